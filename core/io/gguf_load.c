/* GGUF files read (gguf_format.h has the layout), as the gguf package's
 * GGUFReader reads them, with the checks of ggml's own reader (gguf.cpp)
 * that a file must pass to be used at all, and those a hostile file needs:
 * every count and length is weighed against the bytes left before anything
 * is allocated for it, so that a file costs memory in proportion to its
 * size, and every failure names the offset of the item at fault. */
#include "io_internal.h"

#include <string.h>

#include "gguf_format.h"

/* The fewest bytes an item takes: a metadata entry is an empty key, a type
 * and a one-byte value; a tensor info an empty name, no dimensions, a type
 * and an offset. */
#define MIN_KV (8 + 4 + 1)
#define MIN_TENSOR (8 + 4 + 4 + 8)
/* The first read of a header from a file; a longer one is read again. */
#define HEADER_FIRST ((size_t)1 << 20)

typedef struct tensor_info {
  const char *name; /* the name value's bytes (a NUL among them, maybe) */
  size_t name_len;
  uint64_t at; /* its info's offset, for messages */
  int ndim;
  const uint8_t *ne; /* ggml's ne[ndim], u64 each, in the header */
  const tstor__io_ggml_type *type;
  int type_id;
  uint64_t offset; /* into the data section */
  uint64_t nbytes;
  tstor_value *value; /* its entry in the root, bound once the data's place is known */
} tensor_info;

typedef struct reader {
  tstor__io_source *src;
  tstor__io_cursor c; /* over the header (all of the input, or a prefix of a file) */
  tstor_checkpoint *ck;
  tensor_info *ti;
  size_t nt;
  uint64_t alignment;
  uint64_t alignment_at; /* where general.alignment's entry is, for messages */
} reader;

static int fail(reader *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(reader *r, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = tstor__io_cur_vfail(&r->c, code, fmt, ap);
  va_end(ap);
  return rc;
}

/* The input's bytes after the cursor: the header's cursor may hold only a
 * prefix of a file, whose counts are weighed against the whole file. */
static uint64_t left(const reader *r) { return r->src->size - (r->c.base + r->c.off); }

static int u32(reader *r, uint32_t *v) {
  uint64_t u;
  int rc = tstor__io_cur_uint(&r->c, 4, false, &u);
  *v = (uint32_t)u;
  return rc;
}
static int u64(reader *r, uint64_t *v) { return tstor__io_cur_uint(&r->c, 8, false, v); }

/* A GGUF string: *p and *n its bytes in the header (not NUL-terminated). */
static int string(reader *r, const char *what, const uint8_t **p, uint64_t *n) {
  int rc = u64(r, n);
  if (rc) return rc;
  if (*n > left(r))
    return fail(r, TSTOR_EINVAL, "%s of %llu bytes, past the end of the file (%llu bytes left)",
                what, (unsigned long long)*n, (unsigned long long)left(r));
  return tstor__io_cur_bytes(&r->c, (size_t)*n, p);
}

/* UTF-8 as Python decodes it: no surrogates either (0xED then 0xA0 or more
 * starts one), so that a name GGUFReader cannot read is refused here too. */
static bool text(const uint8_t *p, size_t n) {
  if (!tstor__io_utf8_valid((const char *)p, n)) return false;
  for (size_t i = 0; i + 1 < n; i++)
    if (p[i] == 0xED && p[i + 1] >= 0xA0) return false;
  return true;
}

/* A key or tensor name: a string value of ck. */
static int name(reader *r, const char *what, tstor_value **out) {
  const uint8_t *p;
  uint64_t n;
  int rc = string(r, what, &p, &n);
  if (rc) return rc;
  if (!text(p, (size_t)n)) return fail(r, TSTOR_EINVAL, "%s is not UTF-8", what);
  return tstor_value_new_string(r->ck, (const char *)p, (size_t)n, out);
}

/* ------------------------------------------------------------ metadata */

/* A scalar of `type` (not an array), as a value tagged with it. */
static int scalar(reader *r, int type, tstor_value **out) {
  uint64_t u = 0;
  int rc = 0;
  size_t size = tstor__io_gguf_type_size(type);
  if (type == TSTOR_GGUF_STRING) {
    const uint8_t *p;
    uint64_t n;
    rc = string(r, "a string", &p, &n);
    if (!rc)
      rc = text(p, (size_t)n) ? tstor_value_new_string(r->ck, (const char *)p, (size_t)n, out)
                              : tstor_value_new_bytes(r->ck, p, (size_t)n, out);
  } else {
    rc = tstor__io_cur_uint(&r->c, size, false, &u);
    int64_t i = 0;
    switch (type) {
      case TSTOR_GGUF_INT8: i = (int8_t)u; break;
      case TSTOR_GGUF_INT16: i = (int16_t)u; break;
      case TSTOR_GGUF_INT32: i = (int32_t)u; break;
      default: i = (int64_t)u; break; /* unsigned, and int64; a u64 keeps its bits */
    }
    if (rc) return rc;
    if (type == TSTOR_GGUF_FLOAT32 || type == TSTOR_GGUF_FLOAT64) {
      double d;
      float f;
      uint32_t w = (uint32_t)u;
      if (type == TSTOR_GGUF_FLOAT32)
        memcpy(&f, &w, sizeof f), d = f;
      else
        memcpy(&d, &u, sizeof d);
      rc = tstor_value_new_float(r->ck, d, out);
    } else if (type == TSTOR_GGUF_BOOL) {
      rc = tstor_value_new_bool(r->ck, u != 0, out);
    } else {
      rc = tstor_value_new_int(r->ck, i, out);
    }
  }
  if (!rc) (*out)->gguf = (unsigned char)(type + 1);
  return rc;
}

/* A value of `type` (the u32 just read), an array's elements included. */
static int value(reader *r, uint32_t type, tstor_value **out) {
  if (type >= TSTOR__GGUF_VALUE_TYPE_COUNT)
    return fail(r, TSTOR_EINVAL, "value type %u is none of GGUF's (0 to %d)", type,
                TSTOR__GGUF_VALUE_TYPE_COUNT - 1);
  if (type != TSTOR_GGUF_ARRAY) return scalar(r, (int)type, out);
  uint32_t elem;
  uint64_t n;
  int rc = u32(r, &elem);
  if (!rc) rc = u64(r, &n);
  if (rc) return rc;
  if (elem == TSTOR_GGUF_ARRAY)
    return fail(r, TSTOR_EINVAL,
                "an array of arrays (ggml's reader refuses them; GGUF's writers "
                "write none)");
  if (elem >= TSTOR__GGUF_VALUE_TYPE_COUNT)
    return fail(r, TSTOR_EINVAL, "array element type %u is none of GGUF's (0 to %d)", elem,
                TSTOR__GGUF_VALUE_TYPE_COUNT - 1);
  size_t least = elem == TSTOR_GGUF_STRING ? 8 : tstor__io_gguf_type_size((int)elem);
  if (n > left(r) / least)
    return fail(r, TSTOR_EINVAL, "an array of %llu %s, which the %llu bytes left cannot hold",
                (unsigned long long)n, tstor__io_gguf_type_name(elem), (unsigned long long)left(r));
  tstor_value *list;
  if ((rc = tstor_value_new(r->ck, TSTOR_VALUE_LIST, &list))) return rc;
  list->gguf = TSTOR_GGUF_ARRAY + 1;
  list->gguf_elem = (unsigned char)(elem + 1);
  for (uint64_t i = 0; i < n; i++) {
    tstor_value *item;
    if ((rc = scalar(r, (int)elem, &item)) || (rc = tstor__io_seq_push(list, item))) return rc;
  }
  *out = list;
  return 0;
}

static int metadata(reader *r, uint64_t count) {
  tstor_value *md;
  int rc = tstor_value_new(r->ck, TSTOR_VALUE_DICT, &md);
  if (rc) return rc;
  r->ck->metadata = md;
  for (uint64_t i = 0; i < count; i++) {
    r->c.item = r->c.off;
    tstor_value *key, *val;
    uint32_t type;
    bool existed;
    if ((rc = name(r, "a key", &key)) || (rc = u32(r, &type)) || (rc = value(r, type, &val)))
      return rc;
    if ((rc = tstor__io_dict_put(md, key, val, false, &existed))) return rc;
    if (existed) return fail(r, TSTOR_EINVAL, "key '%s' a second time", key->u.str.s);
    if (strcmp(key->u.str.s, TSTOR__GGUF_ALIGNMENT_KEY) == 0) r->alignment_at = r->c.item;
  }
  return 0;
}

/* general.alignment, when given: a u32 power of two, as both of GGUF's
 * readers ask. */
static int alignment(reader *r) {
  r->alignment = TSTOR__GGUF_ALIGNMENT;
  const tstor_value *a = tstor_value_dict_get(r->ck->metadata, TSTOR__GGUF_ALIGNMENT_KEY);
  if (!a) return 0;
  r->c.item = (size_t)r->alignment_at;
  if (a->gguf != TSTOR_GGUF_UINT32 + 1)
    return fail(r, TSTOR_EINVAL, "%s is of type %s, not u32", TSTOR__GGUF_ALIGNMENT_KEY,
                tstor__io_gguf_type_name(a->gguf - 1));
  uint64_t v = (uint64_t)a->u.i;
  if (v == 0 || (v & (v - 1)))
    return fail(r, TSTOR_EINVAL, "%s %llu is not a power of two", TSTOR__GGUF_ALIGNMENT_KEY,
                (unsigned long long)v);
  r->alignment = v;
  return 0;
}

/* --------------------------------------------------------- tensor infos */

static int64_t ne_at(const tensor_info *t, int d) {
  uint64_t u = 0;
  for (int b = 7; b >= 0; b--) u = u << 8 | t->ne[8 * d + b];
  return (int64_t)u;
}

/* The dimensions, type and offset of tensor t, its sizes checked as they
 * are read. */
static int tensor_shape(reader *r, tensor_info *t) {
  uint32_t nd, type;
  int rc = u32(r, &nd);
  if (rc) return rc;
  if (nd > TSTOR_TENSOR_MAX_DIM)
    return fail(r, TSTOR_EINVAL, "tensor '%s' has %u dimensions (at most %d)", t->name, nd,
                TSTOR_TENSOR_MAX_DIM);
  t->ndim = (int)nd;
  if ((rc = tstor__io_cur_bytes(&r->c, 8 * (size_t)nd, &t->ne)) || (rc = u32(r, &type)) ||
      (rc = u64(r, &t->offset)))
    return rc;
  if (!(t->type = tstor__io_ggml_type_of(type)))
    return fail(r, TSTOR_EINVAL, "tensor '%s' has ggml type %u, which is none of ggml's", t->name,
                type);
  t->type_id = (int)type;
  /* the sizes but the zeros must multiply within int64, in elements and in
   * bytes (a tensor's strides are their products), however empty it is */
  uint64_t numel = 1, span = 1;
  for (int d = 0; d < t->ndim; d++) {
    int64_t n = ne_at(t, d);
    if (n < 0)
      return fail(r, TSTOR_EINVAL, "tensor '%s': dimension %d of %llu elements (at most 2^63 - 1)",
                  t->name, d, (unsigned long long)n);
    if (n && (__builtin_mul_overflow(span, (uint64_t)n, &span) || span > INT64_MAX))
      return fail(r, TSTOR_EOVERFLOW, "tensor '%s': its number of elements overflows", t->name);
    numel = n ? numel * (uint64_t)n : 0;
  }
  uint64_t span_bytes;
  if (__builtin_mul_overflow(span, (uint64_t)t->type->bytes, &span_bytes) || span_bytes > INT64_MAX)
    return fail(r, TSTOR_EOVERFLOW, "tensor '%s': its number of bytes overflows", t->name);
  int64_t row = t->ndim ? ne_at(t, 0) : 1;
  if (row % t->type->block)
    return fail(r, TSTOR_EINVAL,
                "tensor '%s' of type %s has rows of %lld elements, not a multiple "
                "of its %lld-element blocks",
                t->name, t->type->name, (long long)row, (long long)t->type->block);
  if (__builtin_mul_overflow(numel / (uint64_t)t->type->block, (uint64_t)t->type->bytes,
                             &t->nbytes) ||
      t->nbytes > INT64_MAX)
    return fail(r, TSTOR_EOVERFLOW, "tensor '%s': its number of bytes overflows", t->name);
  return 0;
}

static int tensor_infos(reader *r, uint64_t count) {
  int rc = tstor_value_new(r->ck, TSTOR_VALUE_DICT, &r->ck->root);
  if (rc) return rc;
  if (!(r->ti = tstor__io_calloc(count ? (size_t)count : 1, sizeof *r->ti)))
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %llu tensor infos",
                      (unsigned long long)count);
  for (r->nt = 0; r->nt < count; r->nt++) {
    tensor_info *t = &r->ti[r->nt];
    r->c.item = r->c.off;
    t->at = r->c.base + r->c.off;
    tstor_value *nv;
    bool existed;
    if ((rc = name(r, "a tensor name", &nv))) return rc;
    t->name = nv->u.str.s;
    t->name_len = nv->u.str.len;
    if ((rc = tensor_shape(r, t))) return rc;
    t->value = tstor__io_value_alloc(
        r->ck, t->type->dtype < 0 ? TSTOR_VALUE_QUANTIZED : TSTOR_VALUE_TENSOR);
    if (!t->value) return TSTOR_ENOMEM;
    if ((rc = tstor__io_dict_put(r->ck->root, nv, t->value, false, &existed))) return rc;
    if (existed) return fail(r, TSTOR_EINVAL, "tensor '%s' a second time", t->name);
  }
  return 0;
}

/* --------------------------------------------------------- tensor data */

static int by_start(const void *a, const void *b) {
  const tensor_info *x = *(const tensor_info *const *)a, *y = *(const tensor_info *const *)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Each tensor's bytes at a multiple of the alignment, inside the file, and
 * apart from every other's. */
static int check_places(reader *r, uint64_t data_start) {
  tensor_info **order = tstor__io_malloc((r->nt ? r->nt : 1) * sizeof *order);
  if (!order) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu tensors", r->nt);
  int rc = 0;
  size_t n = 0;
  for (size_t i = 0; i < r->nt && !rc; i++) {
    tensor_info *t = &r->ti[i];
    r->c.item = (size_t)(t->at - r->c.base);
    uint64_t end;
    if (t->offset % r->alignment)
      rc = fail(r, TSTOR_EINVAL,
                "tensor '%s' at offset %llu of the data, not a multiple of the "
                "alignment %llu",
                t->name, (unsigned long long)t->offset, (unsigned long long)r->alignment);
    else if (t->nbytes && (__builtin_add_overflow(data_start, t->offset, &end) ||
                           __builtin_add_overflow(end, t->nbytes, &end) || end > r->src->size))
      rc = fail(r, TSTOR_EINVAL,
                "tensor '%s': its %llu bytes at offset %llu of the data, which "
                "begins at %llu, lie past the end of the file (%llu bytes)",
                t->name, (unsigned long long)t->nbytes, (unsigned long long)t->offset,
                (unsigned long long)data_start, (unsigned long long)r->src->size);
    else if (t->nbytes)
      order[n++] = t;
  }
  if (!rc) qsort(order, n, sizeof *order, by_start);
  for (size_t i = 1; i < n && !rc; i++)
    if (order[i]->offset < order[i - 1]->offset + order[i - 1]->nbytes) {
      r->c.item = (size_t)(order[i]->at - r->c.base);
      rc = fail(r, TSTOR_EINVAL,
                "tensor '%s' at offset %llu of the data overlaps tensor '%s' "
                "(%llu bytes at %llu)",
                order[i]->name, (unsigned long long)order[i]->offset, order[i - 1]->name,
                (unsigned long long)order[i - 1]->nbytes, (unsigned long long)order[i - 1]->offset);
    }
  tstor__io_free(order);
  return rc;
}

/* Tensor t's record, its storage and its tensor: sizes in PyTorch's order,
 * ne reversed; a quantized tensor's blocks as rows of bytes. */
static int bind(reader *r, tensor_info *t, uint64_t data_start) {
  int64_t sizes[TSTOR_TENSOR_MAX_DIM];
  for (int d = 0; d < t->ndim; d++) sizes[d] = ne_at(t, t->ndim - 1 - d);
  bool quantized = t->type->dtype < 0;
  tstor_dtype dt = quantized ? TSTOR_UINT8 : (tstor_dtype)t->type->dtype;
  size_t esize = tstor_dtype_size(dt);
  long idx;
  tstor__io_record *rec;
  int rc = tstor__io_record_add(r->ck, t->name, t->name_len, dt, (int64_t)(t->nbytes / esize),
                                "cpu", 3, &idx);
  if (rc) return rc;
  rec = &r->ck->storages[idx];
  /* an empty tensor's offset is never read, so it may lie anywhere */
  rc = tstor__io_source_storage(r->src, t->nbytes ? data_start + t->offset : 0, (size_t)t->nbytes,
                                esize, t->name, &rec->s);
  if (rc) return rc;
  tstor_value *v = t->value;
  if (t->nbytes) rec->file_offset = (int64_t)(data_start + t->offset);
  v->u.tensor.storage = idx;
  if (!quantized)
    return tstor_tensor_on_storage(rec->s, dt, 0, t->ndim, sizes, NULL, &v->u.tensor.t);
  int64_t rows[TSTOR_TENSOR_MAX_DIM];
  memcpy(rows, sizes, (size_t)t->ndim * sizeof *rows);
  rows[t->ndim - 1] = sizes[t->ndim - 1] / t->type->block * t->type->bytes;
  if (!(v->u.tensor.sizes = tstor__io_malloc((size_t)t->ndim * sizeof(int64_t))))
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for a tensor's sizes");
  memcpy(v->u.tensor.sizes, sizes, (size_t)t->ndim * sizeof(int64_t));
  v->u.tensor.ndim = t->ndim;
  v->u.tensor.dtype = t->type_id;
  return tstor_tensor_on_storage(rec->s, TSTOR_UINT8, 0, t->ndim, rows, NULL, &v->u.tensor.t);
}

/* ------------------------------------------------------------ the file */

static int header(reader *r, uint64_t *nt, uint64_t *nkv) {
  const uint8_t *magic;
  uint32_t version;
  int rc = tstor__io_cur_bytes(&r->c, 4, &magic);
  if (rc || memcmp(magic, TSTOR__GGUF_MAGIC, 4) != 0)
    return fail(r, TSTOR_EINVAL, "not a GGUF file (no \"GGUF\" at its start)");
  if ((rc = u32(r, &version))) return rc;
  if (version && !(version & 0xFFFF))
    return fail(r, TSTOR_ENOTSUP,
                "a big-endian GGUF file (version %u read little-endian); tstor "
                "reads little-endian GGUF, as ggml does",
                version);
  if (version == 1)
    return fail(r, TSTOR_ENOTSUP, "GGUF version 1, whose counts are 32-bit, is no longer read");
  if (version != 2 && version != TSTOR__GGUF_VERSION)
    return fail(r, TSTOR_ENOTSUP, "GGUF version %u (tstor reads 2 and 3)", version);
  if ((rc = u64(r, nt)) || (rc = u64(r, nkv))) return rc;
  uint64_t room = left(r);
  if (*nkv > room / MIN_KV)
    return fail(r, TSTOR_EINVAL, "%llu metadata entries, which the %llu bytes left cannot hold",
                (unsigned long long)*nkv, (unsigned long long)room);
  if (*nt > (room - *nkv * MIN_KV) / MIN_TENSOR)
    return fail(r, TSTOR_EINVAL, "%llu tensors, which the %llu bytes left cannot hold",
                (unsigned long long)*nt, (unsigned long long)room);
  return 0;
}

/* The whole header, from a cursor over the first `len` bytes of the input;
 * then every tensor bound to its bytes. */
static int parse(reader *r) {
  uint64_t nt, nkv;
  int rc = header(r, &nt, &nkv);
  if (!rc) rc = metadata(r, nkv);
  if (!rc) rc = alignment(r);
  if (!rc) rc = tensor_infos(r, nt);
  if (rc) return rc;
  uint64_t end = r->c.base + r->c.off;
  uint64_t data_start = end + (r->alignment - end % r->alignment) % r->alignment;
  if ((rc = check_places(r, data_start))) return rc;
  for (size_t i = 0; i < r->nt && !rc; i++) rc = bind(r, &r->ti[i], data_start);
  return rc ? rc : tstor__io_source_run(r->src);
}

/* One attempt over the first `len` bytes (the whole input when it is in
 * memory); *short_read true when the header ran past them. */
static int attempt(tstor__io_source *src, const char *name, size_t len, tstor_checkpoint **out,
                   bool *short_read) {
  reader r;
  memset(&r, 0, sizeof r);
  r.src = src;
  uint8_t *copy = NULL;
  int rc = 0;
  *short_read = false;
  if (!src->bytes) {
    if (!(copy = tstor__io_malloc(len ? len : 1)))
      return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for a %zu-byte header", len);
    rc = tstor__io_source_read(src, copy, len, 0, "the GGUF header");
  }
  r.c = tstor__io_cursor_over(src->bytes ? src->bytes : copy, len, name);
  if (!rc) rc = tstor_checkpoint_new(&r.ck);
  if (!rc) rc = parse(&r);
  *short_read = rc && r.c.ran_out && len < src->size;
  tstor__io_free(r.ti);
  tstor__io_free(copy);
  if (rc)
    tstor_checkpoint_free(r.ck);
  else
    *out = r.ck;
  return rc;
}

int tstor__io_gguf_load_source(tstor__io_source *src, const char *name, tstor_checkpoint **out) {
  /* a file read with pread: its header is read first, again longer when it
   * does not fit (a tokenizer's vocabulary makes megabytes) */
  size_t len = src->bytes || src->size < HEADER_FIRST ? (size_t)src->size : HEADER_FIRST;
  for (;;) {
    bool again;
    int rc = attempt(src, name, len, out, &again);
    if (!again) return rc;
    len = src->size / 4 < len ? (size_t)src->size : 4 * len;
  }
}

int tstor_gguf_load(tstor_context *ctx, const char *path, const tstor_load_options *opts,
                    tstor_checkpoint **out) {
  return tstor__io_load_path(ctx, path, opts, out, "tstor_gguf_load", "a GGUF file",
                             tstor__io_gguf_load_source);
}

int tstor_gguf_load_buffer(tstor_context *ctx, const void *data, size_t size,
                           const tstor_load_options *opts, tstor_checkpoint **out) {
  return tstor__io_load_buffer(ctx, data, size, opts, out, "tstor_gguf_load_buffer",
                               tstor__io_gguf_load_source);
}
