/* torch.save's zip format, written: a protocol-2 pickle of the tree as
 * torch.save pickles it (what PyTorch 1.13's weights_only loader accepts),
 * one record per distinct storage however many tensors view it, a version
 * and a byteorder record. */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

#include <tstor/mapped.h>

#define ARCHIVE "archive" /* the folder name PyTorch 2.x writes; 1.13 reads any */

/* ------------------------------------------------------------ the pickle */

typedef struct saver {
  const tstor_checkpoint *ck;
  uint8_t *buf;
  size_t len, cap;
  /* memo: value pointer -> memo index, open addressing */
  const void **mkeys;
  uint32_t *mvals;
  size_t mcap, mcount;
  uint32_t next_memo;
  /* storages, in first-appearance order */
  struct {
    tstor_storage *s;
    tstor_dtype dtype;
  } *st;
  size_t nst, capst;
  int64_t g_rebuild, g_odict; /* memo indices of the two globals, or -1 */
  int64_t g_storage[TSTOR_DTYPE_END];
} saver;

static int emit(saver *sv, const void *p, size_t n) {
  if (sv->len + n > sv->cap) {
    size_t cap = sv->cap ? sv->cap : 4096;
    while (cap < sv->len + n) cap *= 2;
    uint8_t *b = realloc(sv->buf, cap);
    if (!b) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for the pickle (%zu bytes)", cap);
    sv->buf = b;
    sv->cap = cap;
  }
  memcpy(sv->buf + sv->len, p, n);
  sv->len += n;
  return 0;
}
static int op(saver *sv, uint8_t c) { return emit(sv, &c, 1); }

static int emit_u32(saver *sv, uint8_t opcode, uint32_t v) {
  uint8_t b[5] = {opcode, (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  return emit(sv, b, 5);
}

static int put_memo(saver *sv, int64_t *slot) {
  uint32_t idx = sv->next_memo++;
  if (slot) *slot = idx;
  if (idx < 256) {
    uint8_t b[2] = {'q', (uint8_t)idx};
    return emit(sv, b, 2);
  }
  return emit_u32(sv, 'r', idx);
}
static int get_memo(saver *sv, uint32_t idx) {
  if (idx < 256) {
    uint8_t b[2] = {'h', (uint8_t)idx};
    return emit(sv, b, 2);
  }
  return emit_u32(sv, 'j', idx);
}

static size_t mhash(const void *p, size_t mask) {
  return (size_t)(((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

static long memo_lookup(const saver *sv, const void *p) {
  if (!sv->mcap) return -1;
  for (size_t i = mhash(p, sv->mcap - 1);; i = (i + 1) & (sv->mcap - 1)) {
    if (!sv->mkeys[i]) return -1;
    if (sv->mkeys[i] == p) return (long)sv->mvals[i];
  }
}

static int memo_remember(saver *sv, const void *p) {
  if ((sv->mcount + 1) * 2 > sv->mcap) {
    size_t cap = sv->mcap ? sv->mcap * 2 : 64;
    const void **k = calloc(cap, sizeof *k);
    uint32_t *v = calloc(cap, sizeof *v);
    if (!k || !v) {
      free(k);
      free(v);
      return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for the pickle's memo");
    }
    for (size_t i = 0; i < sv->mcap; i++)
      if (sv->mkeys[i]) {
        size_t j = mhash(sv->mkeys[i], cap - 1);
        while (k[j]) j = (j + 1) & (cap - 1);
        k[j] = sv->mkeys[i];
        v[j] = sv->mvals[i];
      }
    free(sv->mkeys);
    free(sv->mvals);
    sv->mkeys = k;
    sv->mvals = v;
    sv->mcap = cap;
  }
  size_t j = mhash(p, sv->mcap - 1);
  while (sv->mkeys[j]) j = (j + 1) & (sv->mcap - 1);
  sv->mkeys[j] = p;
  sv->mvals[j] = sv->next_memo;
  sv->mcount++;
  return put_memo(sv, NULL);
}

static int emit_global(saver *sv, const char *text, int64_t *slot) {
  if (*slot >= 0) return get_memo(sv, (uint32_t)*slot);
  int rc = op(sv, 'c');
  if (!rc) rc = emit(sv, text, strlen(text));
  if (!rc) rc = put_memo(sv, slot);
  return rc;
}

static int emit_int(saver *sv, int64_t v) {
  if (v >= 0 && v < 256) {
    uint8_t b[2] = {'K', (uint8_t)v};
    return emit(sv, b, 2);
  }
  if (v >= 0 && v < 65536) {
    uint8_t b[3] = {'M', (uint8_t)v, (uint8_t)(v >> 8)};
    return emit(sv, b, 3);
  }
  if (v >= INT32_MIN && v <= INT32_MAX) return emit_u32(sv, 'J', (uint32_t)(int32_t)v);
  /* LONG1: the fewest little-endian two's-complement bytes, as Python writes */
  uint8_t b[10] = {0x8a, 8};
  uint64_t u = (uint64_t)v;
  for (int i = 0; i < 8; i++) b[2 + i] = (uint8_t)(u >> (8 * i));
  int n = 8;
  while (n > 1 && ((b[1 + n] == 0x00 && !(b[n] & 0x80)) || (b[1 + n] == 0xFF && (b[n] & 0x80)))) n--;
  b[1] = (uint8_t)n;
  return emit(sv, b, (size_t)n + 2);
}

static int emit_str(saver *sv, const char *s, size_t len) {
  if (len > UINT32_MAX) return TSTOR__ERR(TSTOR_EOVERFLOW, "a string of %zu bytes", len);
  int rc = emit_u32(sv, 'X', (uint32_t)len);
  return rc ? rc : emit(sv, s, len);
}

static int storage_key(saver *sv, const tstor_tensor *t, size_t *key) {
  tstor_storage *s = tstor_tensor_storage(t);
  tstor_dtype dt = tstor_tensor_dtype(t);
  for (size_t i = 0; i < sv->nst; i++)
    if (sv->st[i].s == s) {
      if (sv->st[i].dtype != dt)
        return TSTOR__ERR(TSTOR_EINVAL,
                          "two tensors view one storage as %s and as %s: torch.save's format gives a "
                          "storage one dtype (save a copy of one of them)",
                          tstor_dtype_name(sv->st[i].dtype), tstor_dtype_name(dt));
      *key = i;
      return 0;
    }
  void *p = tstor__io_grow(sv->st, &sv->capst, sv->nst, sizeof *sv->st, 16, "out of memory");
  if (!p) return TSTOR_ENOMEM;
  sv->st = p;
  sv->st[sv->nst].s = s;
  sv->st[sv->nst].dtype = dt;
  *key = sv->nst++;
  return 0;
}

static int location_of(const tstor_tensor *t, char *buf, size_t size) {
  tstor_storage *s = tstor_tensor_storage(t);
  tstor_context *ctx = tstor_storage_context(s);
  tstor_device dev = tstor_storage_device(s);
  const char *type = tstor_device_type_name(ctx, dev.type);
  if (tstor_storage_flags(s) & TSTOR_FLAG_NO_DATA)
    return TSTOR__ERR(TSTOR_ENODATA, "a tensor on '%s' has no data to save", type ? type : "?");
  if (type && strcmp(type, "cpu") == 0) {
    snprintf(buf, size, "cpu");
    return 0;
  }
  return tstor_device_format(ctx, dev, buf, size);
}

static int emit_tensor(saver *sv, const tstor_value *v) {
  const tstor_tensor *t = v->u.tensor.t;
  tstor_dtype dt = tstor_tensor_dtype(t);
  const tstor_dtype_info *info = tstor_dtype_info_of(dt);
  if (!info || !info->legacy_name || info->kind == TSTOR_KIND_QUANTIZED)
    return TSTOR__ERR(TSTOR_ENOTSUP, "a %s tensor: torch.save's format (PyTorch 1.13) has no storage class for it",
                      tstor_dtype_name(dt));
  size_t key = 0;
  char loc[64];
  int rc = storage_key(sv, t, &key);
  if (!rc) rc = location_of(t, loc, sizeof loc);
  if (rc) return rc;
  char keybuf[32], cls[64];
  snprintf(keybuf, sizeof keybuf, "%zu", key);
  snprintf(cls, sizeof cls, "torch\n%sStorage\n", info->legacy_name);
  size_t nbytes = tstor_storage_nbytes(tstor_tensor_storage(t));
  if (nbytes % info->element_size)
    return TSTOR__ERR(TSTOR_ESIZE, "a %s tensor's storage of %zu bytes holds no whole number of elements",
                      info->name, nbytes);
  if ((rc = emit_global(sv, "torch._utils\n_rebuild_tensor_v2\n", &sv->g_rebuild)) || (rc = op(sv, '(')) ||
      (rc = op(sv, '(')) || (rc = emit_str(sv, "storage", 7)) ||
      (rc = emit_global(sv, cls, &sv->g_storage[dt])) || (rc = emit_str(sv, keybuf, strlen(keybuf))) ||
      (rc = emit_str(sv, loc, strlen(loc))) || (rc = emit_int(sv, (int64_t)(nbytes / info->element_size))) ||
      (rc = op(sv, 't')) || (rc = op(sv, 'Q')) || (rc = emit_int(sv, tstor_tensor_storage_offset(t))))
    return rc;
  int nd = tstor_tensor_dim(t);
  const int64_t *arrays[2] = {tstor_tensor_sizes(t), tstor_tensor_strides(t)};
  for (int a = 0; a < 2; a++) {
    if (nd == 0) rc = op(sv, ')');
    else {
      if (nd > 3) rc = op(sv, '(');
      for (int i = 0; i < nd && !rc; i++) rc = emit_int(sv, arrays[a][i]);
      if (!rc) rc = op(sv, nd == 1 ? 0x85 : nd == 2 ? 0x86 : nd == 3 ? 0x87 : 't');
    }
    if (rc) return rc;
  }
  if ((rc = op(sv, v->requires_grad ? 0x88 : 0x89)) ||
      (rc = emit_global(sv, "collections\nOrderedDict\n", &sv->g_odict)) || (rc = op(sv, ')')) ||
      (rc = op(sv, 'R')) || (rc = op(sv, 't')) || (rc = op(sv, 'R')))
    return rc;
  return 0;
}

static int emit_value(saver *sv, const tstor_value *v);

static int emit_items(saver *sv, const tstor_value *v, int dict) {
  int rc = 0;
  size_t n = v->u.seq.n;
  for (size_t start = 0; start < n && !rc; start += 1000) { /* batches of 1000, as Python */
    size_t end = n - start > 1000 ? start + 1000 : n;
    if ((rc = op(sv, '('))) return rc;
    for (size_t i = start; i < end && !rc; i++) {
      if (dict) rc = emit_value(sv, v->u.seq.keys[i]);
      if (!rc) rc = emit_value(sv, v->u.seq.items[i]);
    }
    if (!rc) rc = op(sv, dict ? 'u' : 'e');
  }
  return rc;
}

static int emit_value(saver *sv, const tstor_value *v) {
  long m = memo_lookup(sv, v);
  if (m >= 0) return get_memo(sv, (uint32_t)m);
  int rc;
  switch (v->kind) {
    case TSTOR_VALUE_NONE: return op(sv, 'N');
    case TSTOR_VALUE_BOOL: return op(sv, v->u.i ? 0x88 : 0x89);
    case TSTOR_VALUE_INT: return emit_int(sv, v->u.i);
    case TSTOR_VALUE_FLOAT: {
      uint64_t u;
      memcpy(&u, &v->u.f, 8);
      uint8_t b[9] = {'G'};
      for (int i = 0; i < 8; i++) b[1 + i] = (uint8_t)(u >> (56 - 8 * i));
      return emit(sv, b, 9);
    }
    case TSTOR_VALUE_STRING:
      if ((rc = emit_str(sv, v->u.str.s, v->u.str.len))) return rc;
      return memo_remember(sv, v);
    case TSTOR_VALUE_TENSOR:
      if ((rc = emit_tensor(sv, v))) return rc;
      return memo_remember(sv, v);
    case TSTOR_VALUE_TUPLE: {
      size_t n = v->u.seq.n;
      if (n == 0) return op(sv, ')');
      if (n > 3 && (rc = op(sv, '('))) return rc;
      for (size_t i = 0; i < n; i++)
        if ((rc = emit_value(sv, v->u.seq.items[i]))) return rc;
      /* a tuple that contains itself cannot exist: the tree was checked */
      if ((rc = op(sv, n == 1 ? 0x85 : n == 2 ? 0x86 : n == 3 ? 0x87 : 't'))) return rc;
      return memo_remember(sv, v);
    }
    case TSTOR_VALUE_LIST:
      if ((rc = op(sv, ']')) || (rc = memo_remember(sv, v))) return rc;
      return v->u.seq.n ? emit_items(sv, v, 0) : 0;
    case TSTOR_VALUE_DICT:
      if (v->ordered || v->u.seq.attrs) {
        if ((rc = emit_global(sv, "collections\nOrderedDict\n", &sv->g_odict)) || (rc = op(sv, ')')) ||
            (rc = op(sv, 'R')))
          return rc;
      } else if ((rc = op(sv, '}'))) {
        return rc;
      }
      if ((rc = memo_remember(sv, v))) return rc;
      if (v->u.seq.n && (rc = emit_items(sv, v, 1))) return rc;
      if (v->u.seq.attrs) {
        if ((rc = emit_value(sv, v->u.seq.attrs)) || (rc = op(sv, 'b'))) return rc;
      }
      return 0;
    default: return TSTOR__ERR(TSTOR_EINVAL, "a value of unknown kind %d", v->kind);
  }
}

/* --------------------------------------------------------------- records */

static int write_record(tstor__zip_writer *w, const char *tail, const void *p, size_t n) {
  char name[96];
  snprintf(name, sizeof name, ARCHIVE "/%s", tail);
  int rc = tstor__zipw_begin(w, name, n, tstor__crc32(0, p, n));
  return rc ? rc : tstor__zipw_data(w, p, n);
}

/* The bytes of storage s, readable from the host: s itself when it is host
 * memory, else a copy on cpu (*tmp, released by the caller). */
static int host_bytes(tstor_storage *s, tstor_storage **tmp, const void **p) {
  *tmp = NULL;
  tstor_context *ctx = tstor_storage_context(s);
  const char *type = tstor_device_type_name(ctx, tstor_storage_device(s).type);
  if ((type && strcmp(type, "cpu") == 0) || tstor_storage_is_pinned(s)) {
    *p = tstor_storage_data(s);
    return 0;
  }
  tstor_device cpu;
  int rc = tstor_device_parse(ctx, "cpu", &cpu);
  if (!rc) rc = tstor_storage_to(s, cpu, tmp);
  if (!rc) *p = tstor_storage_data(*tmp);
  return rc;
}

int tstor_torch_save(const tstor_checkpoint *ck, const char *path) {
  if (!ck || !path) return TSTOR__ERR(TSTOR_EINVAL, "tstor_torch_save: NULL argument");
  if (!ck->root) return TSTOR__ERR(TSTOR_EINVAL, "tstor_torch_save: the checkpoint has no root value");
  int rc = tstor__tree_check(ck->root, UINT64_MAX);
  if (rc) return rc;
  saver sv;
  memset(&sv, 0, sizeof sv);
  sv.ck = ck;
  sv.g_rebuild = sv.g_odict = -1;
  for (int i = 0; i < TSTOR_DTYPE_END; i++) sv.g_storage[i] = -1;
  static const uint8_t proto[2] = {0x80, 2};
  tstor__zip_writer w;
  memset(&w, 0, sizeof w);
  char *tmp = NULL;
  FILE *f = NULL;
  if ((rc = emit(&sv, proto, 2)) || (rc = emit_value(&sv, ck->root)) || (rc = op(&sv, '.'))) goto out;
  if ((rc = tstor__create_temp(path, &tmp, &f))) goto out;
  w.f = f;
  if ((rc = write_record(&w, "data.pkl", sv.buf, sv.len))) goto out;
  for (size_t i = 0; i < sv.nst && !rc; i++) {
    tstor_storage *s = sv.st[i].s, *copy = NULL;
    const void *p = NULL;
    size_t n = tstor_storage_nbytes(s);
    char tail[40];
    snprintf(tail, sizeof tail, "data/%zu", i);
    if (!(rc = host_bytes(s, &copy, &p))) rc = write_record(&w, tail, n ? p : "", n);
    tstor_storage_release(copy);
  }
  if (!rc) rc = write_record(&w, "version", "3\n", 2);
  if (!rc) rc = write_record(&w, "byteorder", "little", 6);
  if (!rc) rc = tstor__zipw_finish(&w);
out:
  if (f) {
    int crc = tstor__commit_file(f, tmp, path, rc == 0);
    if (!rc) rc = crc;
  }
  tstor__zipw_free(&w);
  free(sv.buf);
  free(sv.mkeys);
  free(sv.mvals);
  free(sv.st);
  return rc;
}
