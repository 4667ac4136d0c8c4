/* Helpers for the typed-storage suites: the conversion vectors generated with
 * PyTorch (tests/vectors/gen_vectors.py: conversions_torch2.bin by torch 2.x,
 * every pair; conversions.bin, torch 1.13's, is kept as the record) and a
 * cpu/meta context. */
#ifndef TSTOR_TYPEDTEST_H
#define TSTOR_TYPEDTEST_H

#include "testutil.h"

#include <stdint.h>
#include <tstor/typed.h>

/* One source array and what PyTorch turns it into, for every destination. */
typedef struct typedtest_block {
  tstor_dtype src_dtype;
  uint32_t count;
  const unsigned char *src; /* count elements, native byte order */
  int ndst;
  tstor_dtype dst_dtype[32];
  const unsigned char *dst[32];
} typedtest_block;

typedef struct typedtest_vectors {
  unsigned char *file; /* everything points into this */
  size_t size;
  int nblocks;
  typedtest_block blocks[32];
} typedtest_vectors;

static inline uint32_t typedtest_le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Elements of the file are little-endian; on a big-endian machine they are
 * swapped in place (each half of a complex on its own). */
static inline void typedtest_to_native(unsigned char *p, size_t count, tstor_dtype dtype) {
  const uint16_t one = 1;
  if (*(const unsigned char *)&one == 1) return;
  const tstor_dtype_info *d = tstor_dtype_info_of(dtype);
  size_t unit = d->kind == TSTOR_KIND_COMPLEX ? d->element_size / 2 : d->element_size;
  size_t n = count * d->element_size / unit;
  for (size_t i = 0; i < n; i++)
    for (size_t a = 0, b = unit - 1; a < b; a++, b--) {
      unsigned char t = p[i * unit + a];
      p[i * unit + a] = p[i * unit + b];
      p[i * unit + b] = t;
    }
}

/* Reads tests/vectors/NAME (conversions.bin, conversions_torch2.bin); fails
 * the test when it is missing or malformed. */
static inline void typedtest_load(typedtest_vectors *v, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/vectors/%s", TSTOR_TEST_SRCDIR, name);
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
  long size = ftell(f);
  ck_assert_int_gt(size, 12);
  rewind(f);
  v->file = malloc((size_t)size);
  ck_assert_ptr_nonnull(v->file);
  ck_assert_uint_eq(fread(v->file, 1, (size_t)size, f), (size_t)size);
  fclose(f);
  v->size = (size_t)size;
  ck_assert_msg(memcmp(v->file, "TSTORCV1", 8) == 0, "%s: bad magic", path);
  uint32_t nblocks = typedtest_le32(v->file + 8);
  ck_assert_uint_le(nblocks, 32);
  v->nblocks = (int)nblocks;
  size_t off = 12;
  for (uint32_t b = 0; b < nblocks; b++) {
    typedtest_block *blk = &v->blocks[b];
    ck_assert_uint_le(off + 8, v->size);
    blk->src_dtype = (tstor_dtype)v->file[off];
    blk->ndst = v->file[off + 1];
    ck_assert_int_le(blk->ndst, 32);
    blk->count = typedtest_le32(v->file + off + 4);
    off += 8;
    size_t es = tstor_dtype_size(blk->src_dtype);
    ck_assert_uint_gt(es, 0);
    ck_assert_uint_le(off + es * blk->count, v->size);
    blk->src = v->file + off;
    typedtest_to_native(v->file + off, blk->count, blk->src_dtype);
    off += es * blk->count;
    for (int d = 0; d < blk->ndst; d++) {
      ck_assert_uint_le(off + 4, v->size);
      blk->dst_dtype[d] = (tstor_dtype)v->file[off];
      off += 4;
      size_t des = tstor_dtype_size(blk->dst_dtype[d]);
      ck_assert_uint_gt(des, 0);
      ck_assert_uint_le(off + des * blk->count, v->size);
      blk->dst[d] = v->file + off;
      typedtest_to_native(v->file + off, blk->count, blk->dst_dtype[d]);
      off += des * blk->count;
    }
  }
  ck_assert_uint_eq(off, v->size);
}

static inline void typedtest_free(typedtest_vectors *v) {
  free(v->file);
  v->file = NULL;
}

/* What torch 2.x says when `op` ("item", "setitem", "fill") meets dtype
 * `name` (tests/vectors/refusals_torch2.txt), after its exception's name. */
static inline const char *typedtest_refusal(const char *op, const char *name) {
  static char msg[256];
  char path[512], line[512], head[128];
  snprintf(path, sizeof path, "%s/vectors/refusals_torch2.txt", TSTOR_TEST_SRCDIR);
  snprintf(head, sizeof head, "%s %s => ", op, name);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  msg[0] = '\0';
  while (fgets(line, sizeof line, f))
    if (strncmp(line, head, strlen(head)) == 0) {
      const char *m = strstr(line + strlen(head), ": ");
      ck_assert_ptr_nonnull(m);
      snprintf(msg, sizeof msg, "%.*s", (int)strcspn(m + 2, "\n"), m + 2);
    }
  fclose(f);
  ck_assert_msg(msg[0] != '\0', "%s: no \"%s\" case", path, head);
  return msg;
}

/* Hex of one element, for messages (static ring of buffers). */
static inline const char *typedtest_hex(const void *p, size_t n) {
  static char ring[4][80];
  static int next;
  char *out = ring[next++ % 4];
  const unsigned char *b = p;
  size_t k = 0;
  /* Most significant byte first on little-endian machines, as numbers read. */
  for (size_t i = 0; i < n && k + 3 < sizeof ring[0]; i++)
    k += (size_t)snprintf(out + k, sizeof ring[0] - k, "%02x", b[n - 1 - i]);
  return out;
}

#endif
