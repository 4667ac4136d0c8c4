/* The tensor copy cases PyTorch made (tests/vectors/tensor_copies.txt, from
 * gen_tensors.py), for every suite that runs them on some pair of devices,
 * and the "DTYPE OFFSET SIZES STRIDES" layouts the tensor vectors are written
 * in. Inline, so that a suite may take only the parsers. */
#ifndef TSTOR_COPYCASES_H
#define TSTOR_COPYCASES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tstor/typed.h>

#include "tensortest.h"

typedef struct layout {
  tstor_dtype dtype;
  int64_t offset;
  int ndim;
  int64_t sizes[TSTOR_TENSOR_MAX_DIM], strides[TSTOR_TENSOR_MAX_DIM];
} layout;

/* "-" (no dimensions) or "A,B,...". */
static inline int parse_list(const char *s, int64_t *v) {
  if (strcmp(s, "-") == 0) return 0;
  int n = 0;
  char *end;
  for (;;) {
    v[n++] = strtoll(s, &end, 10);
    if (*end != ',') break;
    s = end + 1;
  }
  return n;
}

/* "DTYPE OFFSET SIZES STRIDES" from *save (strtok_r over spaces). */
static inline void parse_layout(char **save, layout *l) {
  char *dt = strtok_r(NULL, " ", save), *off = strtok_r(NULL, " ", save);
  char *sz = strtok_r(NULL, " ", save), *st = strtok_r(NULL, " ", save);
  ck_assert(dt && off && sz && st);
  ck_tstor_ok(tstor_dtype_parse(dt, &l->dtype));
  l->offset = strtoll(off, NULL, 10);
  l->ndim = parse_list(sz, l->sizes);
  ck_assert_int_eq(parse_list(st, l->strides), l->ndim);
}

/* Elements a storage needs for the layout. */
static inline int64_t need(const layout *l) {
  int64_t n = l->offset + 1;
  for (int i = 0; i < l->ndim; i++)
    if (l->sizes[i] == 0) return l->offset + 1;
  for (int i = 0; i < l->ndim; i++) n += l->strides[i] * (l->sizes[i] - 1);
  return n;
}

static inline FILE *open_vectors(const char *name) {
  const char *path = coretest_fmt("%s/vectors/%s", TSTOR_TEST_SRCDIR, name);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  return f;
}

/* s's bytes, read back through cpu, as hex into buf. */
static inline void hex_of(tstor_device cpu, const tstor_storage *s, char *buf) {
  tstor_storage *h;
  ck_tstor_ok(tstor_storage_to((tstor_storage *)s, cpu, &h));
  const unsigned char *p = tstor_storage_data(h);
  for (size_t i = 0; i < tstor_storage_nbytes(h); i++) sprintf(buf + 2 * i, "%02x", p[i]);
  buf[2 * tstor_storage_nbytes(h)] = '\0';
  tstor_storage_release(h);
}

/* n elements of the generator's values, (i % 97 - 40) / 2, on dev; an
 * opaque dtype's bytes get them as uint8 (bits16 as int16), as the generator
 * fills them. */
static inline tstor_storage *filled(tstor_context *ctx, tstor_device dev, tstor_dtype dt, int64_t n) {
  double *v = malloc(sizeof(double) * (size_t)n);
  ck_assert_ptr_nonnull(v);
  for (int64_t i = 0; i < n; i++) v[i] = (double)((i % 97) - 40) * 0.5;
  tstor_storage *s;
  if (tstor_dtype_info_of(dt)->kind == TSTOR_KIND_OPAQUE)
    dt = tstor_dtype_size(dt) == 2 ? TSTOR_INT16 : TSTOR_UINT8;
  ck_tstor_ok(tstor_typed_from_array(ctx, dev, dt, v, TSTOR_FLOAT64, (size_t)n, &s));
  free(v);
  return s;
}

/* Runs every copy case of the file `name` (tensor_copies.txt, or
 * tensor_copies_torch2.txt for the dtypes of torch 2.x) with the destination
 * on ddev and the source on sdev (cases where both share a storage only when
 * the two are one device type), comparing the destination's bytes, or the
 * refusal, with PyTorch's. Returns the number of cases run. */
static inline int run_copies_of(tstor_context *ctx, tstor_device cpu, tstor_device ddev,
                                tstor_device sdev, const char *name) {
  FILE *f = open_vectors(name);
  static char line[1 << 20], got[1 << 20], before[1 << 20];
  int cases = 0, bad = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    line[strcspn(line, "\n")] = '\0';
    char *save = line;
    layout d, s;
    parse_layout(&save, &d);
    strtok_r(NULL, " ", &save); /* ; */
    parse_layout(&save, &s);
    strtok_r(NULL, " ", &save);
    int shared = atoi(strtok_r(NULL, " ", &save));
    strtok_r(NULL, " ", &save);
    char *want = save;
    if (shared && (ddev.type != sdev.type)) continue;
    size_t des = tstor_dtype_size(d.dtype), ses = tstor_dtype_size(s.dtype);
    int64_t n = need(&d);
    if (shared) {
      int64_t nb = n * (int64_t)des, sb = need(&s) * (int64_t)ses;
      if (sb > nb) nb = sb;
      n = (nb + (int64_t)des - 1) / (int64_t)des;
    }
    tstor_storage *ds = filled(ctx, ddev, d.dtype, n);
    tstor_storage *ss = shared ? tstor_storage_retain(ds) : filled(ctx, sdev, s.dtype, need(&s));
    tstor_tensor *dt, *st;
    ck_tstor_ok(tstor_tensor_on_storage(ds, d.dtype, d.offset, d.ndim, d.sizes, d.strides, &dt));
    ck_tstor_ok(tstor_tensor_on_storage(ss, s.dtype, s.offset, s.ndim, s.sizes, s.strides, &st));
    hex_of(cpu, ds, before);
    int rc = tstor_tensor_copy_(dt, st);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", tstor_last_error());
    hex_of(cpu, ds, got);
    if (want[0] == '!') {
      if (rc >= 0 || strstr(msg, want + 2) == NULL || strcmp(before, got) != 0) {
        fprintf(stderr, "copy case %d: rc %d: %s\n  PyTorch: %s\n", cases, rc, msg, want);
        bad++;
      }
    } else {
      if (rc != 0 || strcmp(got, want) != 0) {
        fprintf(stderr, "copy case %d (%s -> %s): %s\n  got  %s\n  want %s\n", cases,
                tstor_dtype_name(s.dtype), tstor_dtype_name(d.dtype), rc ? msg : "", got, want);
        bad++;
      }
    }
    tstor_tensor_release(dt);
    tstor_tensor_release(st);
    tstor_storage_release(ds);
    tstor_storage_release(ss);
    cases++;
  }
  fclose(f);
  ck_assert_msg(bad == 0, "%d of %d copies differ from PyTorch's", bad, cases);
  return cases;
}

static inline int run_copies(tstor_context *ctx, tstor_device cpu, tstor_device ddev,
                             tstor_device sdev) {
  return run_copies_of(ctx, cpu, ddev, sdev, "tensor_copies.txt");
}

#endif
