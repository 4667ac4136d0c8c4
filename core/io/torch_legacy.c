/* torch.save's legacy format: every file PyTorch wrote before 1.6, and what
 * torch.save(..., _use_new_zipfile_serialization=False) still writes. Read
 * as torch/serialization.py's _legacy_load reads it:
 *
 *   five pickles, one after another:
 *     the magic number 0x1950a86a20f9469cfc6c,
 *     the protocol version, 1001,
 *     the system info (byte order, type sizes: ignored, as torch.load does),
 *     the tree, whose persistent ids ('storage', class, key, location,
 *       numel, view_metadata) name storages by key,
 *     the list of keys whose bytes follow, in that order;
 *   then for each key of that list: its element count (8 bytes, little-endian)
 *   and its elements, little-endian, one storage after another.
 *
 * The pickles go through the same strict machine and rules as the zip
 * format's (only their persistent ids differ); the storages through the same
 * source, so a cpu storage is read straight into place or, with
 * TSTOR_LOAD_MMAP, is a view of the file where it is aligned. */
#include "io_internal.h"

#include <string.h>

#define PROTOCOL_VERSION 1001
#define FIRST_READ ((size_t)64 << 10) /* the pickles of a state_dict fit in this, mostly */

bool tstor__io_torch_legacy_magic(const uint8_t *p, size_t n, size_t *end) {
  static const uint8_t magic[] = {TSTOR__OP_LONG1, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  if (end) *end = 0;
  if (n < 2 || p[0] != TSTOR__OP_PROTO || p[1] < 2 || p[1] > 5) return false;
  size_t at = 2;
  if (n > at && p[at] == TSTOR__OP_FRAME) at += 9; /* and its 8-byte length */
  if (n < at + sizeof magic || memcmp(p + at, magic, sizeof magic) != 0) return false;
  at += sizeof magic;
  if (end && n > at && p[at] == TSTOR__OP_STOP) *end = at + 1;
  return true;
}

typedef struct legacy {
  tstor__io_source *src;
  tstor_checkpoint *ck;
  const tstor_value *keys; /* the list of keys whose bytes follow the pickles */
  uint64_t data_start;     /* where the first of them begins */
} legacy;

/* The five pickles, from the first `len` bytes of the input at p. With
 * cur->ran_out set on failure, they need more than `len` bytes. */
static int read_pickles(legacy *lg, tstor__io_cursor *cur) {
  size_t end = 0;
  size_t max_values = lg->src->size < SIZE_MAX - 16 ? (size_t)lg->src->size + 16 : SIZE_MAX;
  if (!tstor__io_torch_legacy_magic(cur->data, cur->len, &end))
    return tstor__io_cur_fail(
        cur, TSTOR_EINVAL,
        "not torch.save's legacy format: no magic number pickle (0x1950a86a20f9469cfc6c) "
        "as torch.save writes it");
  if (!end)
    return tstor__io_cur_fail(cur, TSTOR_EINVAL, "the magic number pickle does not end with STOP");
  cur->off = end;
  tstor_value *version = NULL, *info = NULL, *keys = NULL;
  int rc = tstor__io_unpickle(lg->ck, cur, NULL, max_values, &version);
  if (rc) return rc;
  if (version->kind != TSTOR_VALUE_INT || version->u.i != PROTOCOL_VERSION)
    return tstor__io_cur_fail(
        cur, TSTOR_EINVAL, "protocol version %s%lld, not %d (torch.load: Invalid protocol version)",
        version->kind == TSTOR_VALUE_INT ? "" : "of a non-int, ",
        (long long)(version->kind == TSTOR_VALUE_INT ? version->u.i : 0), PROTOCOL_VERSION);
  if ((rc = tstor__io_unpickle(lg->ck, cur, NULL, max_values, &info))) return rc;
  if ((rc = tstor__io_unpickle(lg->ck, cur, &tstor__io_torch_legacy_rules, max_values,
                               &lg->ck->root)))
    return rc;
  if ((rc = tstor__io_unpickle(lg->ck, cur, NULL, max_values, &keys))) return rc;
  if (keys->kind != TSTOR_VALUE_LIST && keys->kind != TSTOR_VALUE_TUPLE)
    return tstor__io_cur_fail(cur, TSTOR_EINVAL, "the storage keys are a %s, not a list",
                              tstor_value_kind_name((tstor_value_kind)keys->kind));
  lg->keys = keys;
  lg->data_start = cur->base + cur->off;
  return 0;
}

/* Runs read_pickles over a prefix of a file read with pread, four times
 * longer each time the pickles run past it: what a small file costs stays
 * bounded by its size, and a large one is not read whole for its pickles. */
static int parse(legacy *lg) {
  tstor__io_source *src = lg->src;
  uint64_t limit = src->size < TSTOR__PICKLE_MAX ? src->size : TSTOR__PICKLE_MAX;
  size_t want = src->bytes || limit < FIRST_READ ? (size_t)limit : FIRST_READ;
  uint8_t *buf = NULL;
  int rc;
  for (;;) {
    tstor_checkpoint_free(lg->ck);
    lg->ck = NULL;
    const uint8_t *p = src->bytes;
    if ((rc = tstor_checkpoint_new(&lg->ck))) break;
    if (!p) {
      uint8_t *grown = tstor__io_realloc(buf, want ? want : 1);
      if (!grown) {
        rc = TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu bytes of pickles", want);
        break;
      }
      buf = grown;
      if ((rc = tstor__io_source_read(src, buf, want, 0, "the pickles"))) break;
      p = buf;
    }
    tstor__io_cursor cur = tstor__io_cursor_over(p, want, "torch.save legacy file");
    rc = read_pickles(lg, &cur);
    if (!rc || !cur.ran_out || want == limit) {
      if (rc && cur.ran_out && limit < src->size)
        rc = TSTOR__ERR(TSTOR_ERANGE, "pickles of more than %llu bytes", (unsigned long long)TSTOR__PICKLE_MAX);
      break;
    }
    want = limit / 4 < want ? (size_t)limit : want * 4;
  }
  tstor__io_free(buf);
  return rc;
}

/* The record of `key`, which the list of keys gives: a root storage the tree
 * named, and not given twice. */
static int listed_storage(legacy *lg, const tstor_value *key, unsigned char *seen,
                          tstor__io_record **out) {
  if (key->kind != TSTOR_VALUE_STRING)
    return TSTOR__ERR(TSTOR_EINVAL, "the list of storage keys holds a %s",
                      tstor_value_kind_name((tstor_value_kind)key->kind));
  long idx = tstor__io_record_find(lg->ck, key->u.str.s, key->u.str.len);
  if (idx < 0 || lg->ck->storages[idx].view_of >= 0)
    return TSTOR__ERR(TSTOR_EINVAL, "the list of storage keys names '%.64s', which is no storage of the tree", key->u.str.s);
  if (seen[idx]) return TSTOR__ERR(TSTOR_EINVAL, "the list of storage keys names '%.64s' twice", key->u.str.s);
  seen[idx] = 1;
  *out = &lg->ck->storages[idx];
  return 0;
}

/* The bytes each root storage holds once the tree is built: torch.load
 * builds the tensors before it reads the storages' bytes, and a tensor set
 * on a storage too small for it grows the storage to fit (Tensor.set_), so
 * a storage is the larger of what the pickle says and what its tensors
 * reach; that is what the file's count must then give. UINT64_MAX where a
 * tensor's reach overflows. */
static int storage_sizes(const tstor_checkpoint *ck, uint64_t **out) {
  uint64_t *size = tstor__io_calloc(ck->nstorages ? ck->nstorages : 1, sizeof *size);
  if (!size) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu storages", ck->nstorages);
  for (size_t i = 0; i < ck->nstorages; i++)
    size[i] = (uint64_t)ck->storages[i].numel * tstor_dtype_size(ck->storages[i].dtype);
  for (size_t i = 0; i < ck->nvalues; i++) {
    const tstor_value *v = ck->values[i];
    if (v->kind != TSTOR_VALUE_TENSOR || v->u.tensor.storage < 0) continue;
    const tstor__io_record *r = &ck->storages[v->u.tensor.storage];
    if (r->view_of >= 0) continue; /* a view's tensors grow the view, not its root */
    uint64_t reach = 1, es = tstor_dtype_size(
                            v->u.tensor.dtype >= 0 ? (tstor_dtype)v->u.tensor.dtype : r->dtype);
    bool empty = false, over = false;
    for (int d = 0; d < v->u.tensor.ndim; d++) {
      uint64_t step;
      empty |= v->u.tensor.sizes[d] == 0;
      over |= __builtin_mul_overflow((uint64_t)(v->u.tensor.sizes[d] ? v->u.tensor.sizes[d] - 1 : 0),
                                     (uint64_t)v->u.tensor.strides[d], &step) ||
              __builtin_add_overflow(reach, step, &reach);
    }
    over |= __builtin_add_overflow(reach, (uint64_t)v->u.tensor.offset, &reach) ||
            __builtin_mul_overflow(reach, es, &reach);
    if (empty) continue;
    uint64_t *s = &size[v->u.tensor.storage];
    if (over) *s = UINT64_MAX;
    else if (reach > *s) *s = reach;
  }
  *out = size;
  return 0;
}

/* Storage r of `grown` bytes (storage_sizes), whose count and bytes begin at
 * *at, which is moved past them. */
static int load_storage(legacy *lg, tstor__io_record *r, uint64_t grown, uint64_t *at) {
  tstor__io_source *src = lg->src;
  size_t es = tstor_dtype_size(r->dtype);
  uint8_t word[8];
  int rc = tstor__io_source_read(src, word, 8, *at, r->key);
  if (rc) return rc;
  uint64_t count = 0;
  for (int i = 7; i >= 0; i--) count = count << 8 | word[i];
  uint64_t nbytes = grown, file_nbytes = count * es; /* wraps as PyTorch's does */
  if (file_nbytes != nbytes)
    return TSTOR__ERR(TSTOR_EINVAL, "storage '%s': storage has wrong byte size: expected %lld got %llu (the file "
                      "gives %lld elements, the tree %lld)", r->key, (long long)file_nbytes,
                      (unsigned long long)nbytes, (long long)count, (long long)(nbytes / es));
  r->numel = (int64_t)(nbytes / es);
  *at += 8;
  if (nbytes > src->size - *at || *at > src->size)
    return TSTOR__ERR(TSTOR_EINVAL, "storage '%s': unexpected EOF, expected %llu more bytes (the file ends at %llu)",
                      r->key, (unsigned long long)nbytes, (unsigned long long)src->size);
  uint64_t off = *at;
  *at += nbytes;
  return tstor__io_source_record(src, r, off, (size_t)nbytes);
}

static int load_storages(legacy *lg) {
  tstor_checkpoint *ck = lg->ck;
  uint64_t *grown = NULL;
  int rc = storage_sizes(ck, &grown);
  if (rc) return rc;
  unsigned char *seen = tstor__io_calloc(ck->nstorages ? ck->nstorages : 1, 1);
  if (!seen) {
    tstor__io_free(grown);
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu storages", ck->nstorages);
  }
  uint64_t at = lg->data_start;
  for (size_t i = 0; i < lg->keys->u.seq.n && !rc; i++) {
    tstor__io_record *r = NULL;
    if (!(rc = listed_storage(lg, lg->keys->u.seq.items[i], seen, &r)))
      rc = load_storage(lg, r, grown[r - ck->storages], &at);
  }
  tstor__io_free(grown);
  for (size_t i = 0; i < ck->nstorages && !rc; i++)
    if (ck->storages[i].view_of < 0 && !seen[i])
      rc = TSTOR__ERR(TSTOR_EINVAL, "storage '%s' is named by the tree, but the list of storages whose bytes "
                      "follow does not give it", ck->storages[i].key);
  tstor__io_free(seen);
  return rc ? rc : tstor__io_source_run(lg->src);
}

int tstor__io_torch_legacy_load(tstor__io_source *src, tstor_checkpoint **out) {
  legacy lg = {src, NULL, NULL, 0};
  int rc = parse(&lg);
  if (!rc) rc = tstor__io_tree_check(lg.ck->root);
  if (!rc) rc = load_storages(&lg);
  if (!rc) rc = tstor__io_torch_bind(src->ctx, lg.ck);
  if (rc) {
    tstor_checkpoint_free(lg.ck);
    return rc;
  }
  *out = lg.ck;
  return 0;
}
