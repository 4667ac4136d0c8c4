/* safetensors files, read with the format's own validation rules and written
 * as the reference writer (huggingface/safetensors, tensor.rs) writes them.
 * The JSON header is read by json.h's strict reader and written here. */
#include "io_internal.h"
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tstor/mapped.h>

#define HEADER_MAX 100000000ull /* the reference's MAX_HEADER_SIZE */

/* The format's dtypes, in the order of the reference's enum (tensor.rs):
 * its writer sorts tensors by that order, last first. Each has its width
 * in bits; F4 and F6 pack several elements into a byte. */
static const struct {
  const char *name;
  int bits;
  int dtype; /* tstor dtype, or -1: kept as packed bytes */
} st_dtypes[] = {
    {"BOOL", 8, TSTOR_BOOL},
    {"F4", 4, TSTOR_FLOAT4_E2M1FN_X2}, /* two to a byte, the last dimension halved */
    {"F6_E2M3", 6, -1},
    {"F6_E3M2", 6, -1},
    {"U8", 8, TSTOR_UINT8},
    {"I8", 8, TSTOR_INT8},
    {"F8_E5M2", 8, TSTOR_FLOAT8_E5M2},
    {"F8_E4M3", 8, TSTOR_FLOAT8_E4M3FN},
    {"F8_E8M0", 8, TSTOR_FLOAT8_E8M0FNU},
    {"F8_E4M3FNUZ", 8, TSTOR_FLOAT8_E4M3FNUZ},
    {"F8_E5M2FNUZ", 8, TSTOR_FLOAT8_E5M2FNUZ},
    {"I16", 16, TSTOR_INT16},
    {"U16", 16, TSTOR_UINT16},
    {"F16", 16, TSTOR_FLOAT16},
    {"BF16", 16, TSTOR_BFLOAT16},
    {"I32", 32, TSTOR_INT32},
    {"U32", 32, TSTOR_UINT32},
    {"F32", 32, TSTOR_FLOAT32},
    {"C64", 64, TSTOR_COMPLEX64},
    {"F64", 64, TSTOR_FLOAT64},
    {"I64", 64, TSTOR_INT64},
    {"U64", 64, TSTOR_UINT64},
};
#define NST (sizeof st_dtypes / sizeof st_dtypes[0])
#define ST_F4 1

static int rank_of(tstor_dtype dt) {
  for (size_t i = 0; i < NST; i++)
    if (st_dtypes[i].dtype == (int)dt) return (int)i;
  return -1;
}

static int rank_of_name(const char *name) {
  for (size_t i = 0; i < NST; i++) /* the first byte first: a header names one a tensor */
    if (st_dtypes[i].name[0] == name[0] && strcmp(st_dtypes[i].name, name) == 0) return (int)i;
  return -1;
}

/* ---------------------------------------------------------- packed bytes */

/* Tensor value v of ck holds the packed bytes of a tensor of format dtype
 * st_dtypes[rank] and logical shape sizes: recorded for the writer. */
static int packed_add(tstor_checkpoint *ck, const tstor_value *v, int rank, int ndim,
                      const int64_t *sizes) {
  if (ck->npacked == ck->cappacked) {
    size_t cap = ck->cappacked ? 2 * ck->cappacked : 4;
    tstor__io_packed *p = tstor__io_realloc(ck->packed, cap * sizeof *p);
    if (!p) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
    ck->packed = p;
    ck->cappacked = cap;
  }
  tstor__io_packed *p = &ck->packed[ck->npacked++];
  p->v = v;
  p->dtype = st_dtypes[rank].name;
  p->ndim = ndim;
  memcpy(p->sizes, sizes, (size_t)ndim * sizeof *sizes);
  return 0;
}

static const tstor__io_packed *packed_find(const tstor_checkpoint *ck, const tstor_value *v) {
  for (size_t i = ck->npacked; i-- > 0;)
    if (ck->packed[i].v == v) return &ck->packed[i];
  return NULL;
}

int tstor_safetensors_packed(const tstor_checkpoint *ck, const tstor_value *v, const char **dtype,
                             int *ndim, int64_t *sizes) {
  if (!ck || !v || !dtype || !ndim || !sizes)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_safetensors_packed: NULL argument");
  const tstor__io_packed *p = packed_find(ck, v);
  if (!p) return TSTOR__ERR(TSTOR_ENOENT, "tstor_safetensors_packed: not a tensor of packed bytes");
  *dtype = p->dtype;
  *ndim = p->ndim;
  memcpy(sizes, p->sizes, (size_t)p->ndim * sizeof *sizes);
  return 0;
}

/* The bytes numel elements of st_dtypes[rank] take; an error where their
 * bits overflow or end inside a byte, as the reference counts them. */
static int packed_nbytes(int rank, int ndim, const int64_t *sizes, const char *name,
                         uint64_t *nbytes) {
  uint64_t numel = 1, nbits;
  for (int d = 0; d < ndim; d++)
    if (sizes[d] < 0 || __builtin_mul_overflow(numel, (uint64_t)sizes[d], &numel))
      return TSTOR__ERR(TSTOR_EOVERFLOW,
                        "safetensors: tensor '%s': its number of elements overflows", name);
  if (__builtin_mul_overflow(numel, (uint64_t)st_dtypes[rank].bits, &nbits))
    return TSTOR__ERR(TSTOR_EOVERFLOW, "safetensors: tensor '%s': its number of bits overflows",
                      name);
  if (nbits % 8)
    return TSTOR__ERR(
        TSTOR_EINVAL, "safetensors: tensor '%s': %llu elements of %s end inside a byte (%llu bits)",
        name, (unsigned long long)numel, st_dtypes[rank].name, (unsigned long long)nbits);
  *nbytes = nbits / 8;
  return 0;
}

int tstor_safetensors_set_packed(tstor_checkpoint *ck, const tstor_value *v, const char *dtype,
                                 int ndim, const int64_t *sizes) {
  if (!ck || !v || !dtype || (ndim && !sizes))
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_safetensors_set_packed: NULL argument");
  int rank = rank_of_name(dtype);
  if (rank < 0) return TSTOR__ERR(TSTOR_EINVAL, "safetensors has no dtype \"%.32s\"", dtype);
  if (ndim < 0 || ndim > TSTOR_TENSOR_MAX_DIM)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_safetensors_set_packed: %d dimensions (0 to %d)", ndim,
                      TSTOR_TENSOR_MAX_DIM);
  if (v->kind != TSTOR_VALUE_TENSOR || !v->u.tensor.t ||
      tstor_tensor_dtype(v->u.tensor.t) != TSTOR_UINT8)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_safetensors_set_packed: v is not a uint8 tensor");
  uint64_t nbytes;
  int rc = packed_nbytes(rank, ndim, sizes, "(packed)", &nbytes);
  if (rc) return rc;
  if ((uint64_t)tstor_tensor_numel(v->u.tensor.t) != nbytes)
    return TSTOR__ERR(
        TSTOR_EINVAL,
        "tstor_safetensors_set_packed: %s of that shape takes %llu bytes, the tensor holds %lld",
        dtype, (unsigned long long)nbytes, (long long)tstor_tensor_numel(v->u.tensor.t));
  return packed_add(ck, v, rank, ndim, sizes);
}

/* --------------------------------------------------------------- reading */

typedef struct st_entry {
  const char *name; /* in the reader's arena */
  size_t name_len;
  int rank;          /* in st_dtypes */
  tstor_dtype dtype; /* the tensor's: uint8 where the bytes stay packed */
  int ndim;
  size_t
      sizes_at; /* its sizes in st_header.sizes: the header's, in elements of the format's dtype */
  uint64_t begin, end;
} st_entry;

/* A __metadata__ entry, both strings in the reader's arena. */
typedef struct st_pair {
  const char *k, *v;
  size_t klen, vlen;
} st_pair;

/* The header, read: its tensors' entries and the metadata's strings. */
typedef struct st_header {
  tstor__json j;
  st_entry *es;
  size_t ne, cape;
  int64_t *sizes; /* every entry's shape, one after another */
  size_t nsizes, capsizes;
  st_pair *md; /* NULL for no __metadata__ (or null) */
  size_t nmd, capmd;
  bool has_md, seen_md;
} st_header;

static void header_free(st_header *h) {
  tstor__json_free(&h->j);
  tstor__io_free(h->es);
  tstor__io_free(h->sizes);
  tstor__io_free(h->md);
}

static int cmp_begin(const void *a, const void *b) {
  const st_entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

#define BAD(...) TSTOR__ERR(TSTOR_EINVAL, "safetensors: " __VA_ARGS__)

/* Whether the next value is of kind k: where none is there at all (the text
 * ends, or no value starts there), the JSON's error is set. */
static bool next_is(st_header *h, tstor__json_kind k, int *rc) {
  tstor__json_kind got = tstor__json_peek(&h->j);
  *rc = got == TSTOR__JSON_END || got == TSTOR__JSON_OTHER ? tstor__json_skip(&h->j) : 0;
  return got == k;
}

/* The refusal of an entry that lacks one of its fields or has one of
 * another kind. */
static int fields_refused(const char *name) {
  return BAD("tensor '%s' needs \"dtype\" (a string), \"shape\" and \"data_offsets\" (arrays)",
             name);
}

/* 0 when the entry's next value is of kind k; else the JSON's error, or the
 * entry's refusal. */
static int expect_field(st_header *h, tstor__json_kind k, const char *name) {
  int rc;
  return next_is(h, k, &rc) ? 0 : rc ? rc : fields_refused(name);
}

/* A non-negative integer of the entry (a shape's size, an offset). */
static int read_uint(st_header *h, const char *name, const char *what, uint64_t *out) {
  bool is_int;
  int64_t v = 0;
  int rc;
  if (!next_is(h, TSTOR__JSON_NUMBER, &rc))
    return rc ? rc : BAD("tensor '%s': %s must be non-negative integers", name, what);
  if ((rc = tstor__json_number(&h->j, &is_int, &v))) return rc;
  if (!is_int || v < 0) return BAD("tensor '%s': %s must be non-negative integers", name, what);
  *out = (uint64_t)v;
  return 0;
}

/* "shape": an array of sizes, appended to h->sizes. */
static int read_shape(st_header *h, st_entry *e) {
  int rc;
  if ((rc = expect_field(h, TSTOR__JSON_ARRAY, e->name))) return rc;
  rc = tstor__json_array_begin(&h->j);
  bool more;
  e->sizes_at = h->nsizes;
  e->ndim = 0;
  size_t n = 0;
  while (!rc && !(rc = tstor__json_array_next(&h->j, &more)) && more) {
    uint64_t s;
    if ((rc = read_uint(h, e->name, "shape entries", &s))) return rc;
    if (++n > TSTOR_TENSOR_MAX_DIM) continue; /* counted for the message */
    int64_t *p = tstor__io_grow(h->sizes, &h->capsizes, h->nsizes, sizeof *p, 256,
                                "safetensors: out of memory for the header's shapes");
    if (!p) return TSTOR_ENOMEM;
    h->sizes = p;
    p[h->nsizes++] = (int64_t)s;
  }
  if (rc) return rc;
  if (n > TSTOR_TENSOR_MAX_DIM)
    return BAD("tensor '%s' has %zu dimensions (at most %d)", e->name, n, TSTOR_TENSOR_MAX_DIM);
  e->ndim = (int)n;
  return 0;
}

/* "data_offsets": [begin, end]. */
static int read_offsets(st_header *h, st_entry *e) {
  int rc;
  if ((rc = expect_field(h, TSTOR__JSON_ARRAY, e->name))) return rc;
  uint64_t v[2];
  bool more;
  rc = tstor__json_array_begin(&h->j);
  for (int i = 0; i < 3 && !rc; i++) {
    if ((rc = tstor__json_array_next(&h->j, &more))) break;
    if (more != (i < 2)) return BAD("tensor '%s': data_offsets must be [begin, end]", e->name);
    if (more) rc = read_uint(h, e->name, "data_offsets", &v[i]);
  }
  if (rc) return rc;
  if (v[1] < v[0])
    return BAD("tensor '%s': data_offsets must be integers with 0 <= begin <= end", e->name);
  e->begin = v[0];
  e->end = v[1];
  return 0;
}

/* The entry of tensor `name`: an object with "dtype", "shape" and
 * "data_offsets" (other keys are ignored, as the reference ignores them). */
static int read_entry(st_header *h, const char *name, size_t name_len) {
  st_entry *es = tstor__io_grow(h->es, &h->cape, h->ne, sizeof *es, 64,
                                "safetensors: out of memory for the header's entries");
  if (!es) return TSTOR_ENOMEM;
  h->es = es;
  st_entry *e = &es[h->ne];
  memset(e, 0, sizeof *e);
  e->name = name;
  e->name_len = name_len;
  int rc;
  if (!next_is(h, TSTOR__JSON_OBJECT, &rc))
    return rc ? rc : BAD("tensor '%s': its entry is not an object", name);
  rc = tstor__json_object_begin(&h->j);
  bool more, got_dtype = false, got_shape = false, got_offsets = false;
  const char *key;
  size_t klen;
  while (!rc && !(rc = tstor__json_object_next(&h->j, &more, &key, &klen)) && more) {
    if (klen == 5 && memcmp(key, "dtype", 5) == 0) {
      const char *dn;
      size_t dlen;
      if ((rc = expect_field(h, TSTOR__JSON_STRING, name))) return rc;
      if ((rc = tstor__json_string(&h->j, &dn, &dlen))) return rc;
      if ((e->rank = rank_of_name(dn)) < 0)
        return BAD("tensor '%s' has unknown dtype \"%.32s\"", name, dn);
      got_dtype = true;
    } else if (klen == 5 && memcmp(key, "shape", 5) == 0) {
      rc = read_shape(h, e);
      got_shape = true;
    } else if (klen == 12 && memcmp(key, "data_offsets", 12) == 0) {
      rc = read_offsets(h, e);
      got_offsets = true;
    } else {
      rc = tstor__json_skip(&h->j);
    }
  }
  if (rc) return rc;
  if (!got_dtype || !got_shape || !got_offsets) return fields_refused(name);
  /* the reference's count: elements left to right, then bits, each checked,
   * so that [2^62, 4, 0] overflows where [0, 2^62, 4] is empty */
  const int64_t *sizes = h->sizes + e->sizes_at;
  uint64_t nbytes;
  if ((rc = packed_nbytes(e->rank, e->ndim, sizes, name, &nbytes))) return rc;
  /* F4 is float4_e2m1fn_x2 where its last dimension pairs up, as torch reads
   * it; F6, and F4 that does not pair up, stay packed bytes */
  e->dtype = st_dtypes[e->rank].dtype < 0 ? TSTOR_UINT8 : (tstor_dtype)st_dtypes[e->rank].dtype;
  if (e->rank == ST_F4 && (e->ndim == 0 || sizes[e->ndim - 1] % 2)) e->dtype = TSTOR_UINT8;
  if (e->end - e->begin != nbytes)
    return BAD(
        "tensor '%s': %s of shape [%d dims] needs %llu bytes, its range [%llu, %llu) holds %llu",
        name, st_dtypes[e->rank].name, e->ndim, (unsigned long long)nbytes,
        (unsigned long long)e->begin, (unsigned long long)e->end,
        (unsigned long long)(e->end - e->begin));
  h->ne++;
  return 0;
}

/* __metadata__: null (an Option in the reference), or an object of strings. */
static int read_metadata(st_header *h) {
  if (h->seen_md) return BAD("__metadata__ twice (a duplicate)");
  h->seen_md = true;
  int rc;
  if (tstor__json_peek(&h->j) == TSTOR__JSON_NULL) return tstor__json_null(&h->j);
  if (!next_is(h, TSTOR__JSON_OBJECT, &rc))
    return rc ? rc : BAD("__metadata__ is not an object of strings");
  h->has_md = true;
  rc = tstor__json_object_begin(&h->j);
  bool more;
  const char *key;
  size_t klen;
  while (!rc && !(rc = tstor__json_object_next(&h->j, &more, &key, &klen)) && more) {
    if (!next_is(h, TSTOR__JSON_STRING, &rc))
      return rc ? rc : BAD("__metadata__ entry '%s' is not a string", key);
    st_pair *p = tstor__io_grow(h->md, &h->capmd, h->nmd, sizeof *p, 8,
                                "safetensors: out of memory for the header's metadata");
    if (!p) return TSTOR_ENOMEM;
    h->md = p;
    p[h->nmd].k = key;
    p[h->nmd].klen = klen;
    if ((rc = tstor__json_string(&h->j, &p[h->nmd].v, &p[h->nmd].vlen))) return rc;
    h->nmd++;
  }
  return rc;
}

/* The header at hdr, n bytes (at offset 8 of the file), read into h: a
 * JSON object of tensor entries and __metadata__, as the reference's serde
 * derive reads it (json.h: what tstor refuses beyond it). */
static int read_header_json(const char *hdr, uint64_t n, st_header *h) {
  memset(h, 0, sizeof *h);
  if (!tstor__io_utf8_valid(hdr, (size_t)n)) return BAD("the header is not UTF-8");
  int rc = tstor__json_init(&h->j, hdr, (size_t)n, 8, "safetensors: header JSON");
  if (rc) return rc;
  /* never NULL, so that every entry's sizes point somewhere, none or not */
  if (!(h->sizes = tstor__io_grow(NULL, &h->capsizes, 0, sizeof *h->sizes, 256,
                                  "safetensors: out of memory for the header's shapes")))
    return TSTOR_ENOMEM;
  if (tstor__json_peek(&h->j) != TSTOR__JSON_OBJECT) return BAD("the header is not a JSON object");
  rc = tstor__json_object_begin(&h->j);
  bool more;
  const char *key;
  size_t klen;
  while (!rc && !(rc = tstor__json_object_next(&h->j, &more, &key, &klen)) && more)
    rc = klen == 12 && memcmp(key, "__metadata__", 12) == 0 ? read_metadata(h)
                                                            : read_entry(h, key, klen);
  return rc ? rc : tstor__json_finish(&h->j);
}

/* The metadata strings, as ck's metadata dict. */
static int add_metadata(tstor_checkpoint *ck, const st_header *h) {
  tstor_value *md = tstor__io_value_alloc(ck, TSTOR_VALUE_DICT);
  if (!md) return TSTOR_ENOMEM;
  for (size_t i = 0; i < h->nmd; i++) {
    tstor_value *kv, *vv;
    int rc = tstor_value_new_string(ck, h->md[i].k, h->md[i].klen, &kv);
    if (!rc) rc = tstor_value_new_string(ck, h->md[i].v, h->md[i].vlen, &vv);
    if (!rc) rc = tstor__io_dict_set(md, kv, vv);
    if (rc) return rc;
  }
  ck->metadata = md;
  return 0;
}

/* The ranges, in offset order, must tile the data section exactly. */
static int check_tiling(const st_entry *es, size_t ne, uint64_t data_len) {
  uint64_t at = 0;
  for (size_t i = 0; i < ne; i++) {
    if (es[i].begin != at)
      return BAD("tensor '%s' starts at %llu, where %s", es[i].name,
                 (unsigned long long)es[i].begin,
                 es[i].begin < at ? "an earlier tensor's bytes still are (overlap)"
                                  : "a gap would be left");
    at = es[i].end;
  }
  if (at != data_len)
    return BAD("the tensors cover %llu bytes, but %llu follow the header", (unsigned long long)at,
               (unsigned long long)data_len);
  return 0;
}

/* Entry e's storage record, its storage and a tensor on it, in dict. */
static int add_tensor(tstor__io_source *src, tstor_checkpoint *ck, tstor_value *dict,
                      const st_entry *e, const int64_t *esizes, uint64_t data_start) {
  tstor_value *name, *tv;
  long idx;
  int64_t numel = (int64_t)((e->end - e->begin) / tstor_dtype_size(e->dtype));
  int rc = tstor_value_new_string(ck, e->name, e->name_len, &name);
  if (!rc) rc = tstor__io_record_add(ck, e->name, e->name_len, e->dtype, numel, "cpu", 3, &idx);
  if (!rc)
    rc = tstor__io_source_storage(src, data_start + e->begin, (size_t)(e->end - e->begin),
                                  tstor_dtype_size(e->dtype), e->name, &ck->storages[idx].s);
  if (!rc && e->end > e->begin) ck->storages[idx].file_offset = (int64_t)(data_start + e->begin);
  if (rc) return rc;
  if (!(tv = tstor__io_value_alloc(ck, TSTOR_VALUE_TENSOR))) return TSTOR_ENOMEM;
  tv->u.tensor.storage = idx;
  bool packed = e->dtype == TSTOR_UINT8 && st_dtypes[e->rank].dtype != TSTOR_UINT8;
  int64_t sizes[TSTOR_TENSOR_MAX_DIM];
  memcpy(sizes, esizes, (size_t)e->ndim * sizeof *sizes);
  if (e->dtype == TSTOR_FLOAT4_E2M1FN_X2) sizes[e->ndim - 1] /= 2;
  if (packed) sizes[0] = numel;
  rc = tstor_tensor_on_storage(ck->storages[idx].s, e->dtype, 0, packed ? 1 : e->ndim, sizes, NULL,
                               &tv->u.tensor.t);
  if (!rc && packed) rc = packed_add(ck, tv, e->rank, e->ndim, esizes);
  return rc ? rc : tstor__io_dict_set(dict, name, tv);
}

/* Whether the entries are in offset order already, as the reference's
 * writer leaves them. */
static bool sorted_by_begin(const st_entry *es, size_t ne) {
  for (size_t i = 1; i < ne; i++)
    if (cmp_begin(&es[i - 1], &es[i]) > 0) return false;
  return true;
}

/* The header at hdr, n bytes, then every tensor. */
static int parse_and_load(tstor__io_source *src, const char *hdr, uint64_t n,
                          tstor_checkpoint **out) {
  tstor_checkpoint *ck = NULL;
  st_header h;
  int rc = read_header_json(hdr, n, &h);
  if (rc) goto out;
  if (!sorted_by_begin(h.es, h.ne)) qsort(h.es, h.ne, sizeof *h.es, cmp_begin);
  if ((rc = check_tiling(h.es, h.ne, src->size - 8 - n)) || (rc = tstor_checkpoint_new(&ck)))
    goto out;
  if (h.has_md && (rc = add_metadata(ck, &h))) goto out;
  if (!(ck->root = tstor__io_value_alloc(ck, TSTOR_VALUE_DICT))) {
    rc = TSTOR_ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < h.ne && !rc; i++)
    rc = add_tensor(src, ck, ck->root, &h.es[i], h.sizes + h.es[i].sizes_at, 8 + n);
  if (!rc) rc = tstor__io_source_run(src);
out:
  header_free(&h);
  if (rc)
    tstor_checkpoint_free(ck);
  else
    *out = ck;
  return rc;
}

/* The header's bytes: in the input when it is in memory, else read into
 * *copy (freed by the caller). */
static int read_header(tstor__io_source *src, uint64_t n, const char **hdr, char **copy) {
  *copy = NULL;
  if (src->bytes) {
    *hdr = (const char *)src->bytes + 8;
    return 0;
  }
  if (!(*copy = tstor__io_malloc(n ? (size_t)n : 1)))
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for a %llu-byte header", (unsigned long long)n);
  *hdr = *copy;
  return tstor__io_source_read(src, *copy, (size_t)n, 8, "header");
}

static int st_load(tstor__io_source *src, tstor_checkpoint **out) {
  uint64_t size = src->size;
  if (size < 8) return BAD("%llu bytes: too short for the header length", (unsigned long long)size);
  uint8_t word[8];
  int rc = tstor__io_source_read(src, word, 8, 0, "header length");
  if (rc) return rc;
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | word[i];
  if (n > HEADER_MAX)
    return BAD("a header of %llu bytes (at most %llu)", (unsigned long long)n, (unsigned long long)HEADER_MAX);
  if (n > size - 8)
    return BAD("a header of %llu bytes in a file of %llu", (unsigned long long)n, (unsigned long long)size);
  const char *hdr = NULL;
  char *copy;
  if ((rc = read_header(src, n, &hdr, &copy))) {
    tstor__io_free(copy);
    return rc;
  }
  rc = parse_and_load(src, hdr, n, out);
  tstor__io_free(copy);
  return rc;
}

int tstor__io_safetensors_load_source(tstor__io_source *src, const char *name,
                                      tstor_checkpoint **out) {
  (void)name; /* the messages say "safetensors:" and where */
  return st_load(src, out);
}

int tstor_safetensors_load(tstor_context *ctx, const char *path, const tstor_load_options *opts,
                           tstor_checkpoint **out) {
  return tstor__io_load_path(ctx, path, opts, out, "tstor_safetensors_load", "a safetensors file",
                             tstor__io_safetensors_load_source);
}

int tstor_safetensors_load_buffer(tstor_context *ctx, const void *data, size_t size,
                                  const tstor_load_options *opts, tstor_checkpoint **out) {
  return tstor__io_load_buffer(ctx, data, size, opts, out, "tstor_safetensors_load_buffer",
                               tstor__io_safetensors_load_source);
}

/* --------------------------------------------------------------- writing */

typedef struct st_out {
  const char *name;
  size_t name_len;
  const tstor_value *v;
  int rank;
  const tstor__io_packed *packed; /* the format's shape, where v holds packed bytes */
} st_out;

static int cmp_out(const void *a, const void *b) {
  const st_out *x = a, *y = b;
  if (x->rank != y->rank) return y->rank - x->rank; /* descending alignment */
  size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
  int c = memcmp(x->name, y->name, n);
  if (c) return c;
  return (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* What a save writes, worked out before anything is written: the tensors in
 * writing order and the header. */
typedef struct st_plan {
  st_out *o;
  size_t n;
  tstor__io_wbuf text; /* the header's JSON */
} st_plan;

static void plan_free(st_plan *p) {
  tstor__io_free(p->o);
  tstor__io_wbuf_free(&p->text);
}

/* Whether UTF-8 text s (tstor's strings may hold surrogates, as Python's
 * surrogatepass) is text JSON can carry: the format's strings have no
 * surrogates. In valid UTF-8, 0xED then 0xA0 or more
 * starts one. */
static bool json_can_carry(const char *s, size_t n) {
  for (size_t i = 0; i + 1 < n; i++)
    if ((uint8_t)s[i] == 0xED && (uint8_t)s[i + 1] >= 0xA0) return false;
  return true;
}

/* Root entry i of ck, a tensor to write, checked. */
static int plan_entry(const tstor_checkpoint *ck, size_t i, st_out *o) {
  const tstor_value *root = ck->root;
  const tstor_value *k = root->u.seq.keys[i], *v = root->u.seq.items[i];
  if (k->kind != TSTOR_VALUE_STRING || v->kind != TSTOR_VALUE_TENSOR)
    return TSTOR__ERR(TSTOR_EINVAL,
                      "safetensors holds only string -> tensor; entry %zu is %s -> %s (save one "
                      "subtree, tstor convert --select NAME, or every tensor by its dotted name, "
                      "--flatten; tstor_checkpoint_visit walks them)",
                      i, tstor_value_kind_name((tstor_value_kind)k->kind),
                      tstor_value_kind_name((tstor_value_kind)v->kind));
  if (strlen(k->u.str.s) != k->u.str.len || strcmp(k->u.str.s, "__metadata__") == 0 ||
      !json_can_carry(k->u.str.s, k->u.str.len))
    return TSTOR__ERR(TSTOR_EINVAL, "safetensors: '%s' cannot be a tensor name", k->u.str.s);
  tstor_dtype dt = tstor_tensor_dtype(v->u.tensor.t);
  *o = (st_out){k->u.str.s, k->u.str.len, v, rank_of(dt), packed_find(ck, v)};
  if (o->packed) {
    o->rank = rank_of_name(o->packed->dtype);
    uint64_t nbytes;
    int rc = packed_nbytes(o->rank, o->packed->ndim, o->packed->sizes, k->u.str.s, &nbytes);
    if (rc) return rc;
    if (dt != TSTOR_UINT8 || (uint64_t)tstor_tensor_numel(v->u.tensor.t) != nbytes)
      return TSTOR__ERR(
          TSTOR_EINVAL,
          "safetensors: tensor '%s' of packed %s needs %llu bytes of uint8, it is %lld of %s",
          k->u.str.s, o->packed->dtype, (unsigned long long)nbytes,
          (long long)tstor_tensor_numel(v->u.tensor.t), tstor_dtype_name(dt));
  }
  if (dt == TSTOR_FLOAT4_E2M1FN_X2 && tstor_tensor_dim(v->u.tensor.t) == 0)
    return TSTOR__ERR(
        TSTOR_EINVAL,
        "safetensors: tensor '%s' is a 0-dimensional float4_e2m1fn_x2, which F4 has no shape for "
        "(its two elements need a last dimension)",
        k->u.str.s);
  if (o->rank < 0)
    return TSTOR__ERR(TSTOR_ENOTSUP, "safetensors has no dtype for tensor '%s' (%s)", k->u.str.s,
                      tstor_dtype_name(dt));
  if (tstor_storage_flags(tstor_tensor_storage(v->u.tensor.t)) & TSTOR_FLAG_NO_DATA)
    return TSTOR__ERR(TSTOR_ENODATA, "safetensors: tensor '%s' has no data (meta)", k->u.str.s);
  return 0;
}

/* Tensors that share a storage, which the format cannot express. */
static int no_shared(const st_out *o, size_t n) {
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < i; j++)
      if (tstor_tensor_storage(o[i].v->u.tensor.t) == tstor_tensor_storage(o[j].v->u.tensor.t))
        return TSTOR__ERR(TSTOR_EINVAL,
                          "safetensors: tensors '%s' and '%s' share a storage, which the format "
                          "cannot express; save copies (TSTOR_SAVE_COPY_SHARED, tstor convert "
                          "--copy) or drop one",
                          o[j].name, o[i].name);
  return 0;
}

/* s, n bytes of UTF-8, as a JSON string, escaped as the reference's
 * writer (serde_json) escapes: the quote, the backslash and the control
 * characters, nothing else. */
static void json_string_out(tstor__io_wbuf *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  tstor__io_wbuf_byte(b, '"');
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    uint8_t c = (uint8_t)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    tstor__io_wbuf_append(b, s + run, i - run);
    run = i + 1;
    const char *short_form = c == '"'    ? "\\\""
                             : c == '\\' ? "\\\\"
                             : c == '\b' ? "\\b"
                             : c == '\f' ? "\\f"
                             : c == '\n' ? "\\n"
                             : c == '\r' ? "\\r"
                             : c == '\t' ? "\\t"
                                         : NULL;
    if (short_form) {
      tstor__io_wbuf_append(b, short_form, 2);
    } else {
      char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      tstor__io_wbuf_append(b, u, 6);
    }
  }
  tstor__io_wbuf_append(b, s + run, n - run);
  tstor__io_wbuf_byte(b, '"');
}

/* "__metadata__":{...}, ck's metadata strings, into the header. */
static int metadata_json(const tstor_value *md, tstor__io_wbuf *b) {
  tstor__io_wbuf_append(b, "\"__metadata__\":{", 16);
  for (size_t i = 0; i < md->u.seq.n; i++) {
    const tstor_value *k = md->u.seq.keys[i], *v = md->u.seq.items[i];
    if (k->kind != TSTOR_VALUE_STRING || v->kind != TSTOR_VALUE_STRING)
      return TSTOR__ERR(TSTOR_EINVAL, "safetensors metadata holds strings only");
    if (!json_can_carry(k->u.str.s, k->u.str.len) || !json_can_carry(v->u.str.s, v->u.str.len))
      return TSTOR__ERR(TSTOR_EINVAL,
                        "safetensors metadata '%s': a surrogate, which JSON cannot carry",
                        k->u.str.s);
    if (i) tstor__io_wbuf_byte(b, ',');
    json_string_out(b, k->u.str.s, k->u.str.len);
    tstor__io_wbuf_byte(b, ':');
    json_string_out(b, v->u.str.s, v->u.str.len);
  }
  tstor__io_wbuf_byte(b, '}');
  return 0;
}

/* Tensor o's entry in the header, its bytes at *at, which moves past them. */
static void tensor_json(const st_out *o, uint64_t *at, tstor__io_wbuf *b) {
  const tstor_tensor *t = o->v->u.tensor.t;
  uint64_t nb = (uint64_t)tstor_tensor_numel(t) * tstor_dtype_size(tstor_tensor_dtype(t));
  json_string_out(b, o->name, o->name_len);
  tstor__io_wbuf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", st_dtypes[o->rank].name);
  /* the shape in the format's elements: a packed tensor's own, and F4's
   * last dimension twice float4_e2m1fn_x2's */
  int nd = o->packed ? o->packed->ndim : tstor_tensor_dim(t);
  const int64_t *sizes = o->packed ? o->packed->sizes : tstor_tensor_sizes(t);
  for (int d = 0; d < nd; d++) {
    int64_t n = sizes[d] * (o->rank == ST_F4 && !o->packed && d == nd - 1 ? 2 : 1);
    tstor__io_wbuf_printf(b, d ? ",%lld" : "%lld", (long long)n);
  }
  tstor__io_wbuf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)*at,
                        (unsigned long long)(*at + nb));
  *at += nb;
}

/* The header, __metadata__ first, then the tensors in writing order, as
 * compact JSON (p->text). */
static int header_text(const tstor_checkpoint *ck, st_plan *p) {
  tstor__io_wbuf *b = &p->text;
  *b = (tstor__io_wbuf)TSTOR__WBUF_INIT("the safetensors header");
  tstor__io_wbuf_byte(b, '{');
  int rc = ck->metadata ? metadata_json(ck->metadata, b) : 0;
  uint64_t at = 0;
  for (size_t i = 0; i < p->n && !rc; i++) {
    if (i || ck->metadata) tstor__io_wbuf_byte(b, ',');
    tensor_json(&p->o[i], &at, b);
  }
  tstor__io_wbuf_byte(b, '}');
  return rc ? rc : tstor__io_wbuf_error(b);
}

/* What a save of ck writes, before anything is written: the tensors in
 * writing order (largest alignment first) and the header's JSON. */
static int plan(const tstor_checkpoint *ck, unsigned flags, st_plan *p) {
  memset(p, 0, sizeof *p);
  if (!ck) return TSTOR__ERR(TSTOR_EINVAL, "safetensors save: NULL argument");
  if (flags & ~(unsigned)TSTOR_SAVE_COPY_SHARED)
    return TSTOR__ERR(TSTOR_EINVAL, "safetensors save: unknown flags 0x%x",
                      flags & ~(unsigned)TSTOR_SAVE_COPY_SHARED);
  const tstor_value *root = ck->root;
  if (!root || root->kind != TSTOR_VALUE_DICT)
    return TSTOR__ERR(TSTOR_EINVAL, "safetensors holds a dict of name -> tensor; the root is %s%s",
                      root ? tstor_value_kind_name((tstor_value_kind)root->kind) : "missing",
                      root && root->kind == TSTOR_VALUE_OBJECT
                          ? " (a Lua network's parameters: tstor convert --state-dict, "
                            "tstor_torch7_state_dict)"
                          : "");
  p->n = root->u.seq.n;
  if (!(p->o = tstor__io_calloc(p->n ? p->n : 1, sizeof *p->o)))
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  int rc = 0;
  for (size_t i = 0; i < p->n && !rc; i++) rc = plan_entry(ck, i, &p->o[i]);
  if (!rc && !(flags & TSTOR_SAVE_COPY_SHARED)) rc = no_shared(p->o, p->n);
  if (rc) return rc;
  qsort(p->o, p->n, sizeof *p->o, cmp_out);
  return header_text(ck, p);
}

static int write_plan(const void *arg, FILE *f) {
  const st_plan *p = arg;
  size_t hlen = p->text.len, padded = (hlen + 7) / 8 * 8;
  tstor__io_fwriter w = TSTOR__FWRITER_INIT(f, "the safetensors file");
  tstor__io_fw_uint(&w, padded, 8);
  tstor__io_fw_append(&w, p->text.data, hlen);
  tstor__io_fw_append(&w, "        ", padded - hlen);
  for (size_t i = 0; i < p->n && tstor__io_fw_ok(&w); i++)
    tstor__io_fw_tensor(&w, p->o[i].v->u.tensor.t);
  return tstor__io_fw_finish(&w);
}

int tstor__io_safetensors_save_stream(const tstor_checkpoint *ck, FILE *f, unsigned flags) {
  st_plan p;
  int rc = f ? plan(ck, flags, &p) : TSTOR__ERR(TSTOR_EINVAL, "safetensors save: NULL stream");
  if (!f) return rc;
  if (!rc) rc = write_plan(&p, f);
  plan_free(&p);
  return rc;
}

int tstor_safetensors_save(const tstor_checkpoint *ck, const char *path, const tstor_save_options *opts) {
  if (!ck || !path) return TSTOR__ERR(TSTOR_EINVAL, "tstor_safetensors_save: NULL argument");
  unsigned flags;
  int rc = tstor__io_save_flags(opts, &flags);
  if (rc) return rc;
  st_plan p;
  rc = plan(ck, flags, &p);
  if (!rc) rc = tstor__io_save_atomically(path, write_plan, &p);
  plan_free(&p);
  return rc;
}
