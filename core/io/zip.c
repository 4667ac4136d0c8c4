/* Where each entry's bytes lie in a zip archive, in memory or in a file, and
 * what each entry is called; and the CRC-32 its entries carry.
 *
 * libzip inflates and checks archives for us (torch_load.c), but it exposes
 * no entry's data offset, which reading or mapping a storage straight from
 * the file needs, and its names are not the raw ones torch.load reads (it
 * applies the Info-ZIP Unicode Path extra field). So this file reads the
 * central directory (zip64 included) and each local header, strictly: every
 * record is read through a cursor (cursor.h) over the bytes it was found in,
 * and every count, size and offset is checked against the archive before it
 * is used; torch_load.c finds every entry here by its raw name and
 * cross-checks what libzip says about it. On failure the caller still frees
 * the index (tstor__io_zip_index_free). */
#include "io_internal.h"
#include "zip_format.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

uint32_t tstor__io_crc32(uint32_t crc, const void *data, size_t len) {
  const unsigned char *p = data;
  /* zlib's crc32 takes a uInt length: feed it in pieces */
  while (len) {
    uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
    crc = (uint32_t)crc32(crc, p, n);
    p += n;
    len -= n;
  }
  return crc;
}

/* The layouts of zip_format.h, for the reader and the writer. */
#define WIDTH(name, bytes) bytes,
#define LAYOUT(NAME, LIST) \
  const tstor__io_zip_layout NAME = {ZIP_##LIST##_N, {TSTOR__ZIP_##LIST(WIDTH)}}
LAYOUT(tstor__io_zip_local, LOCAL);
LAYOUT(tstor__io_zip_central, CENTRAL);
LAYOUT(tstor__io_zip_end64, END64);
LAYOUT(tstor__io_zip_locator, LOCATOR);
LAYOUT(tstor__io_zip_end, END);
#undef LAYOUT
#undef WIDTH

#define WHAT "zip" /* the input's name in the cursors' messages */
#define BAD(...) TSTOR__ERR(TSTOR_EINVAL, WHAT ": " __VA_ARGS__)
#define CUR_BAD(c, ...) tstor__io_cur_fail((c), TSTOR_EINVAL, __VA_ARGS__)

/* The record of layout r at the cursor, its fields into v, stepped over. */
static int read_record(tstor__io_cursor *c, const tstor__io_zip_layout *r, uint64_t *v) {
  size_t len = 0;
  for (size_t i = 0; i < r->n; i++) len += r->bytes[i];
  const uint8_t *p;
  int rc = tstor__io_cur_bytes(c, len, &p);
  if (rc) return rc;
  /* one bounds check a record, then each field as little-endian bytes */
  for (size_t i = 0; i < r->n; p += r->bytes[i++]) {
    uint64_t u = 0;
    for (size_t b = r->bytes[i]; b-- > 0;) u = u << 8 | p[b];
    v[i] = u;
  }
  return 0;
}

/* A failure naming the archive's offset `at`, where no cursor has read. */
#define bad_at(at, ...) tstor__io_fail_at(WHAT, (at), TSTOR_EINVAL, __VA_ARGS__)

/* Where the archive's bytes come from: memory, or a file read with pread. */
typedef struct zip_src {
  const uint8_t *bytes; /* the whole archive, or NULL */
  int fd;               /* with bytes NULL */
  uint64_t size;
} zip_src;

/* A cursor over the len bytes at off, which the caller has checked lie in
 * the archive: over the archive in memory, or over buf, read from the file. */
static int cursor_at(const zip_src *s, uint64_t off, size_t len, uint8_t *buf,
                     tstor__io_cursor *c) {
  int rc = s->bytes ? 0 : tstor__io_pread_full(s->fd, buf, len, off, "zip directory");
  *c = tstor__io_cursor_over(s->bytes ? s->bytes + off : buf, len, WHAT);
  c->base = off;
  return rc;
}

/* ------------------------------------------------------ the end records */

/* What the end records say of the central directory. */
typedef struct zip_end {
  uint64_t count, cd_size, cd_off;
  uint64_t at; /* the record that says it, before which the directory must end */
} zip_end;

/* The end of the archive, where the end of central directory record and the
 * zip64 locator before it are searched for: the record, a comment of up to
 * 65535 bytes and the locator. */
#define TAIL_MAX ((size_t)ZIP_END_LEN + 65535u + ZIP_LOCATOR_LEN)

/* The end of central directory record in the tail: the last one whose
 * comment runs to the archive's end. The cursor's item is left at it. */
static int find_eocd(tstor__io_cursor *tail, zip_end *end, bool *no_end) {
  uint64_t v[ZIP_END_N];
  size_t at = tail->len - ZIP_END_LEN, stop = at > 65535 ? at - 65535 : 0;
  for (;; at--) {
    tail->off = tail->item = at;
    if (!read_record(tail, &tstor__io_zip_end, v) && v[ZIP_END_SIG] == ZIP_END_MAGIC &&
        v[ZIP_END_COMMENT_LEN] == tail->len - at - ZIP_END_LEN)
      break;
    if (at == stop) {
      *no_end = true;
      return BAD("no end of central directory record (not a zip archive)");
    }
  }
  if (v[ZIP_END_DISK] != 0 || v[ZIP_END_CD_DISK] != 0)
    return CUR_BAD(tail, "multi-disk archives are not supported");
  *end = (zip_end){v[ZIP_END_ENTRIES], v[ZIP_END_CD_SIZE], v[ZIP_END_CD_OFFSET],
                   tstor__io_cur_item_at(tail)};
  return 0;
}

/* A zip64 locator before the end record makes the zip64 end record's values
 * the real ones, as in libzip (PyTorch's writer always adds the zip64
 * records); one is needed where the end record's fields are saturated. The
 * tail's cursor has its item at the end record. */
static int read_zip64_end(const zip_src *s, tstor__io_cursor *tail, zip_end *end) {
  uint64_t loc[ZIP_LOCATOR_N], v[ZIP_END64_N];
  bool saturated = end->count == ZIP_SAT16 || end->cd_size == ZIP_SAT32 || end->cd_off == ZIP_SAT32;
  bool has64 = false;
  if (tail->item >= ZIP_LOCATOR_LEN) {
    tail->off = tail->item -= ZIP_LOCATOR_LEN;
    has64 =
        !read_record(tail, &tstor__io_zip_locator, loc) && loc[ZIP_LOC64_SIG] == ZIP_LOCATOR_MAGIC;
  }
  if (!has64 && saturated) return bad_at(end->at, "zip64 locator missing");
  if (!has64) return 0;
  const uint64_t e64 = loc[ZIP_LOC64_END64], loc_at = tstor__io_cur_item_at(tail);
  uint8_t buf[ZIP_END64_LEN];
  tstor__io_cursor c;
  int rc = 0;
  if (e64 > loc_at || loc_at - e64 < ZIP_END64_LEN ||
      (rc = cursor_at(s, e64, ZIP_END64_LEN, buf, &c)) ||
      (rc = read_record(&c, &tstor__io_zip_end64, v)) || v[ZIP_E64_SIG] != ZIP_END64_MAGIC)
    return rc ? rc : CUR_BAD(tail, "zip64 end of central directory record missing or misplaced");
  *end = (zip_end){v[ZIP_E64_ENTRIES], v[ZIP_E64_CD_SIZE], v[ZIP_E64_CD_OFFSET], e64};
  return 0;
}

/* The end records, from a cursor over the archive's tail. */
static int read_end(const zip_src *s, zip_end *end, bool *no_end) {
  const size_t tail_len = s->size < TAIL_MAX ? (size_t)s->size : TAIL_MAX;
  uint8_t *buf = s->bytes ? NULL : tstor__io_malloc(tail_len);
  if (!s->bytes && !buf) return TSTOR__ERR(TSTOR_ENOMEM, WHAT ": out of memory");
  tstor__io_cursor tail;
  int rc = cursor_at(s, s->size - tail_len, tail_len, buf, &tail);
  if (!rc) rc = find_eocd(&tail, end, no_end);
  if (!rc) rc = read_zip64_end(s, &tail, end);
  tstor__io_free(buf);
  return rc;
}

/* --------------------------------------------------- the directory's entries */

/* The zip64 extra field among an entry's extra fields (the cursor x): the
 * values whose 32-bit fields are saturated follow in order (size,
 * compressed, offset). */
static int zip64_extra(tstor__io_cursor *x, uint64_t *size, uint64_t *csize, uint64_t *offset) {
  uint64_t *fields[3] = {size, csize, offset};
  while (tstor__io_cur_left(x) >= 4) {
    uint64_t id, n;
    tstor__io_cursor body;
    x->item = x->off;
    if (tstor__io_cur_uint(x, 2, false, &id) || tstor__io_cur_uint(x, 2, false, &n) ||
        tstor__io_cur_sub(x, (size_t)n, &body))
      return CUR_BAD(x, "an extra field runs past its entry");
    if (id != ZIP_EXTRA_ZIP64) continue;
    for (int f = 0; f < 3; f++)
      if (*fields[f] == ZIP_SAT32 && tstor__io_cur_uint(&body, 8, false, fields[f]))
        return CUR_BAD(x, "a zip64 extra field is too short");
    return 0;
  }
  if (*size == ZIP_SAT32 || *csize == ZIP_SAT32 || *offset == ZIP_SAT32)
    return bad_at(x->base, "an entry needs a zip64 extra field and has none");
  return 0;
}

/* The i-th entry of the central directory, at the cursor: its name, sizes,
 * method and CRC into e, the offset of its local header into *loc. */
static int read_central_entry(tstor__io_cursor *c, size_t i, tstor__io_zip_entry *e,
                              uint64_t *loc) {
  uint64_t v[ZIP_CENTRAL_N];
  const uint8_t *name, *comment;
  tstor__io_cursor extra;
  c->item = c->off;
  if (read_record(c, &tstor__io_zip_central, v) || v[ZIP_CEN_SIG] != ZIP_CENTRAL_MAGIC ||
      tstor__io_cur_bytes(c, (size_t)v[ZIP_CEN_NAME_LEN], &name) ||
      tstor__io_cur_sub(c, (size_t)v[ZIP_CEN_EXTRA_LEN], &extra) ||
      tstor__io_cur_bytes(c, (size_t)v[ZIP_CEN_COMMENT_LEN], &comment))
    return CUR_BAD(c, "central directory entry %zu is malformed", i);
  e->name = (const char *)name;
  e->name_len = (size_t)v[ZIP_CEN_NAME_LEN];
  e->method = (uint16_t)v[ZIP_CEN_METHOD];
  e->crc = (uint32_t)v[ZIP_CEN_CRC];
  e->comp_size = v[ZIP_CEN_COMP_SIZE];
  e->size = v[ZIP_CEN_SIZE];
  *loc = v[ZIP_CEN_LOCAL_OFFSET];
  int rc = zip64_extra(&extra, &e->size, &e->comp_size, loc);
  if (rc) return rc;
  if (v[ZIP_CEN_FLAGS] & 1)
    return CUR_BAD(c, "entry '%.*s' is encrypted", (int)e->name_len, e->name);
  return 0;
}

/* The local header at loc of entry e must name e, and its own name and extra
 * lengths decide where e's data starts; the data must lie in the archive.
 * buf holds a local header and a name read from a file. */
static int check_local_header(const zip_src *s, tstor__io_zip_entry *e, uint64_t loc,
                              uint8_t *buf) {
  const int nlen = (int)e->name_len;
  const uint64_t size = s->size;
  if (loc > size || size - loc < ZIP_LOCAL_LEN)
    return bad_at(loc, "entry '%.*s': no local header", nlen, e->name);
  size_t len =
      size - loc < ZIP_LOCAL_LEN + e->name_len ? (size_t)(size - loc) : ZIP_LOCAL_LEN + e->name_len;
  uint64_t v[ZIP_LOCAL_N];
  const uint8_t *lname;
  tstor__io_cursor c;
  int rc = cursor_at(s, loc, len, buf, &c);
  if (!rc) rc = read_record(&c, &tstor__io_zip_local, v);
  if (rc) return rc;
  if (v[ZIP_LOC_SIG] != ZIP_LOCAL_MAGIC)
    return CUR_BAD(&c, "entry '%.*s': no local header", nlen, e->name);
  if (size - loc - ZIP_LOCAL_LEN < v[ZIP_LOC_NAME_LEN] + v[ZIP_LOC_EXTRA_LEN])
    return CUR_BAD(&c, "entry '%.*s': local header past the end", nlen, e->name);
  if (v[ZIP_LOC_NAME_LEN] != e->name_len || tstor__io_cur_bytes(&c, e->name_len, &lname) ||
      memcmp(lname, e->name, e->name_len) != 0)
    return CUR_BAD(&c, "entry '%.*s': the local header names another file", nlen, e->name);
  e->header_offset = loc;
  e->data_offset = loc + ZIP_LOCAL_LEN + v[ZIP_LOC_NAME_LEN] + v[ZIP_LOC_EXTRA_LEN];
  if (e->comp_size > size - e->data_offset)
    return CUR_BAD(&c, "entry '%.*s': %llu bytes at offset %llu run past the archive's %llu", nlen,
                   e->name, (unsigned long long)e->comp_size, (unsigned long long)e->data_offset,
                   (unsigned long long)size);
  if (e->method == 0 && e->comp_size != e->size)
    return CUR_BAD(&c, "entry '%.*s' is stored with %llu bytes but claims %llu", nlen, e->name,
                   (unsigned long long)e->comp_size, (unsigned long long)e->size);
  return 0;
}

/* The central directory the end records locate, and each entry's local
 * header. */
static int read_directory(const zip_src *s, const zip_end *end, tstor__io_zip_index *out) {
  if (end->cd_off > end->at || end->cd_size > end->at - end->cd_off)
    return bad_at(end->at, "central directory (%llu bytes at %llu) outside the archive",
                  (unsigned long long)end->cd_size, (unsigned long long)end->cd_off);
  if (end->count > end->cd_size / ZIP_CENTRAL_LEN)
    return bad_at(end->at, "%llu entries cannot fit a %llu-byte central directory",
                  (unsigned long long)end->count, (unsigned long long)end->cd_size);
  const size_t n = (size_t)end->count, cd_size = (size_t)end->cd_size;
  uint8_t *buf = NULL;
  /* Read from a file, the directory stays: the entries' names point into it. */
  if (!s->bytes && (!(out->directory = tstor__io_malloc(cd_size ? cd_size : 1)) ||
                    !(buf = tstor__io_malloc(ZIP_LOCAL_LEN + 65535))))
    return TSTOR__ERR(TSTOR_ENOMEM, WHAT ": out of memory for a %zu-byte directory", cd_size);
  tstor__io_cursor c;
  int rc = cursor_at(s, end->cd_off, cd_size, out->directory, &c);
  if (!rc && !(out->entries = tstor__io_calloc(n ? n : 1, sizeof *out->entries)))
    rc = TSTOR__ERR(TSTOR_ENOMEM, WHAT ": out of memory for %zu entries", n);
  for (size_t i = 0; i < n && !rc; i++) {
    uint64_t loc;
    out->n = i + 1;
    rc = read_central_entry(&c, i, &out->entries[i], &loc);
    if (!rc) rc = check_local_header(s, &out->entries[i], loc, buf);
  }
  tstor__io_free(buf);
  return rc;
}

/* ------------------------------------------------------------- the index */

static int by_header_offset(const void *a, const void *b) {
  const tstor__io_zip_entry *x = *(const tstor__io_zip_entry *const *)a;
  const tstor__io_zip_entry *y = *(const tstor__io_zip_entry *const *)b;
  return x->header_offset < y->header_offset ? -1 : x->header_offset > y->header_offset;
}

/* Refuses entries whose bytes (local header to the end of the data) share a
 * byte: two records over the same bytes would load as storages that alias
 * each other, where torch.load gives independent ones. */
static int no_overlap(const tstor__io_zip_index *ix) {
  if (ix->n < 2) return 0;
  const tstor__io_zip_entry **order = tstor__io_malloc(ix->n * sizeof *order);
  if (!order) return TSTOR__ERR(TSTOR_ENOMEM, WHAT ": out of memory for %zu entries", ix->n);
  bool sorted = true;
  for (size_t i = 0; i < ix->n; i++) {
    order[i] = &ix->entries[i];
    if (i && ix->entries[i].header_offset < ix->entries[i - 1].header_offset) sorted = false;
  }
  if (!sorted) /* a writer's archive is in offset order already */
    qsort(order, ix->n, sizeof *order, by_header_offset);
  int rc = 0;
  for (size_t i = 1; i < ix->n && !rc; i++) {
    const tstor__io_zip_entry *a = order[i - 1], *b = order[i];
    if (b->header_offset < a->data_offset + a->comp_size)
      rc = bad_at(b->header_offset, "entries '%.*s' and '%.*s' overlap in the archive",
                  (int)a->name_len, a->name, (int)b->name_len, b->name);
  }
  tstor__io_free(order);
  return rc;
}

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen) {
  int c = memcmp(a, b, alen < blen ? alen : blen);
  return c ? c : (alen > blen) - (alen < blen);
}

/* The slot of name (len bytes) in ix's table by name: its entry's, or the
 * empty one where it would go. */
static uint32_t *name_slot(const tstor__io_zip_index *ix, const char *name, size_t len) {
  size_t mask = ix->by_name_cap - 1, at = (size_t)tstor__io_hash_bytes(name, len) & mask;
  for (;; at = (at + 1) & mask) {
    uint32_t *slot = &ix->by_name[at];
    if (!*slot) return slot;
    const tstor__io_zip_entry *e = &ix->entries[*slot - 1];
    if (name_cmp(e->name, e->name_len, name, len) == 0) return slot;
  }
}

/* Lookups by name go through a hash table: one scan per storage made loading
 * 50,000 tensors quadratic, and a sort by name cost a fifth of a load. */
static int index_by_name(tstor__io_zip_index *ix) {
  if (ix->n > UINT32_MAX / 2) return BAD("%zu entries are too many", ix->n);
  ix->by_name_cap = 16;
  while (ix->by_name_cap < 2 * ix->n) ix->by_name_cap *= 2;
  ix->by_name = tstor__io_calloc(ix->by_name_cap, sizeof *ix->by_name);
  if (!ix->by_name) return TSTOR__ERR(TSTOR_ENOMEM, WHAT ": out of memory for %zu entries", ix->n);
  for (size_t i = 0; i < ix->n; i++) {
    const tstor__io_zip_entry *e = &ix->entries[i];
    uint32_t *slot = name_slot(ix, e->name, e->name_len);
    /* Two entries of one name would let two readers pick different ones. */
    if (*slot) return BAD("entry '%.*s' appears twice", (int)e->name_len, e->name);
    *slot = (uint32_t)(i + 1);
  }
  return 0;
}

static int index_read(const zip_src *s, tstor__io_zip_index *out) {
  memset(out, 0, sizeof *out);
  if (s->size < ZIP_END_LEN)
    return BAD("%llu bytes are too few for an archive", (unsigned long long)s->size);
  zip_end end = {0, 0, 0, 0};
  int rc = read_end(s, &end, &out->no_end);
  if (!rc) rc = read_directory(s, &end, out);
  if (!rc) rc = no_overlap(out);
  if (!rc) rc = index_by_name(out);
  return rc;
}

int tstor__io_zip_index_read(const uint8_t *data, size_t size, tstor__io_zip_index *out) {
  zip_src s = {data, -1, size};
  return index_read(&s, out);
}

int tstor__io_zip_index_read_fd(int fd, uint64_t size, tstor__io_zip_index *out) {
  zip_src s = {NULL, fd, size};
  return index_read(&s, out);
}

void tstor__io_zip_index_free(tstor__io_zip_index *ix) {
  tstor__io_free(ix->entries);
  tstor__io_free(ix->by_name);
  tstor__io_free(ix->directory);
  ix->entries = NULL;
  ix->by_name = NULL;
  ix->by_name_cap = 0;
  ix->directory = NULL;
  ix->n = 0;
}

const tstor__io_zip_entry *tstor__io_zip_find(const tstor__io_zip_index *ix, const char *name) {
  if (!ix->by_name) return NULL;
  uint32_t *slot = name_slot(ix, name, strlen(name));
  return *slot ? &ix->entries[*slot - 1] : NULL;
}
