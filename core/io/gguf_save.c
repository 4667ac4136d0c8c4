/* GGUF files written, version 3 (gguf_format.h has the layout), as the gguf
 * package's GGUFWriter lays one out: the metadata and the tensor infos in
 * the tree's order, each tensor's bytes at the next multiple of the
 * alignment, zeros between. Everything is checked, and every offset worked
 * out, before the first byte is written. */
#include "io_internal.h"

#include <string.h>

#include "gguf_format.h"

typedef struct out_tensor {
  const tstor_value *name, *v;
  int type; /* ggml's */
  int ndim;
  const int64_t *sizes; /* PyTorch's order: written reversed */
  uint64_t nbytes, offset;
} out_tensor;

typedef struct out_kv {
  const tstor_value *key, *v;
  int type, elem; /* GGUF's; elem for an ARRAY */
} out_kv;

typedef struct plan {
  out_tensor *t;
  size_t nt;
  out_kv *kv;
  size_t nkv;
  uint64_t alignment;
} plan;

static void plan_free(plan *p) {
  tstor__io_free(p->t);
  tstor__io_free(p->kv);
}

/* --------------------------------------------------------- metadata */

/* The GGUF type a value without one is written with. */
static int default_type(const tstor_value *v) {
  switch (v->kind) {
    case TSTOR_VALUE_BOOL: return TSTOR_GGUF_BOOL;
    case TSTOR_VALUE_INT: return TSTOR_GGUF_INT64;
    case TSTOR_VALUE_FLOAT: return TSTOR_GGUF_FLOAT64;
    case TSTOR_VALUE_STRING:
    case TSTOR_VALUE_BYTES: return TSTOR_GGUF_STRING;
    default: return -1;
  }
}

static int scalar_type(const tstor_value *v, int *type) {
  *type = v->gguf ? v->gguf - 1 : default_type(v);
  if (*type < 0 || *type == TSTOR_GGUF_ARRAY)
    return TSTOR__ERR(TSTOR_EINVAL,
                      "GGUF metadata holds numbers, bools, strings and lists of "
                      "them, not a %s",
                      tstor_value_kind_name((tstor_value_kind)v->kind));
  return tstor__io_gguf_scalar_check(v, *type);
}

/* Entry kv's types: its own, or those its kind and items give. */
static int kv_types(out_kv *kv) {
  const tstor_value *v = kv->v;
  const char *key = kv->key->u.str.s;
  int rc;
  if (v->kind != TSTOR_VALUE_LIST && v->kind != TSTOR_VALUE_TUPLE) {
    /* the format asks for a u32 here; an int that fits is written so */
    if (!v->gguf && v->kind == TSTOR_VALUE_INT && strcmp(key, TSTOR__GGUF_ALIGNMENT_KEY) == 0)
      kv->type = TSTOR_GGUF_UINT32;
    else if ((rc = scalar_type(v, &kv->type)))
      return tstor_error_prefix(rc, "GGUF metadata '%s'", key);
    return tstor__io_gguf_scalar_check(v, kv->type);
  }
  kv->type = TSTOR_GGUF_ARRAY;
  kv->elem = v->gguf_elem ? v->gguf_elem - 1 : -1;
  for (size_t i = 0; i < v->u.seq.n; i++) {
    const tstor_value *item = v->u.seq.items[i];
    int t;
    rc = kv->elem >= 0 ? tstor__io_gguf_scalar_check(item, kv->elem) : scalar_type(item, &t);
    if (!rc && kv->elem < 0) kv->elem = t; /* the first item's type is the array's */
    if (rc) return tstor_error_prefix(rc, "GGUF metadata '%s' item %zu", key, i);
  }
  if (kv->elem < 0)
    return TSTOR__ERR(TSTOR_EINVAL,
                      "GGUF metadata '%s': an empty list has no element type "
                      "(tstor_value_set_gguf_type gives it one)",
                      key);
  return 0;
}

static int plan_metadata(const tstor_checkpoint *ck, plan *p) {
  const tstor_value *md = ck->metadata;
  p->alignment = TSTOR__GGUF_ALIGNMENT;
  if (!md) return 0;
  if (md->kind != TSTOR_VALUE_DICT)
    return TSTOR__ERR(TSTOR_EINVAL, "GGUF metadata must be a dict of name -> value");
  p->nkv = md->u.seq.n;
  if (!(p->kv = tstor__io_calloc(p->nkv ? p->nkv : 1, sizeof *p->kv)))
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu metadata entries", p->nkv);
  for (size_t i = 0; i < p->nkv; i++) {
    out_kv *kv = &p->kv[i];
    kv->key = md->u.seq.keys[i];
    kv->v = md->u.seq.items[i];
    if (kv->key->kind != TSTOR_VALUE_STRING)
      return TSTOR__ERR(TSTOR_EINVAL, "GGUF metadata keys are strings; key %zu is a %s", i,
                        tstor_value_kind_name((tstor_value_kind)kv->key->kind));
    int rc = kv_types(kv);
    if (rc) return rc;
    if (strcmp(kv->key->u.str.s, TSTOR__GGUF_ALIGNMENT_KEY) == 0) {
      uint64_t a = (uint64_t)kv->v->u.i;
      if (kv->type != TSTOR_GGUF_UINT32 || a == 0 || (a & (a - 1)))
        return TSTOR__ERR(TSTOR_EINVAL, "GGUF's %s must be a u32 power of two",
                          TSTOR__GGUF_ALIGNMENT_KEY);
      p->alignment = a;
    }
  }
  return 0;
}

/* ---------------------------------------------------------- tensors */

static int plan_tensor(const tstor_value *name, const tstor_value *v, out_tensor *t) {
  const char *n = name->u.str.s;
  t->name = name;
  t->v = v;
  if (v->kind == TSTOR_VALUE_QUANTIZED) {
    t->type = v->u.tensor.dtype;
    t->ndim = v->u.tensor.ndim;
    t->sizes = v->u.tensor.sizes;
    int rc = tstor__io_quantized_bytes(t->type, t->ndim, t->sizes, &t->nbytes);
    if (!rc && (uint64_t)tstor_tensor_nbytes(v->u.tensor.t) != t->nbytes)
      rc = TSTOR__ERR(TSTOR_EINVAL, "its blocks hold %lld bytes, not %llu",
                      (long long)tstor_tensor_nbytes(v->u.tensor.t), (unsigned long long)t->nbytes);
    return rc ? tstor_error_prefix(rc, "GGUF tensor '%s'", n) : 0;
  }
  const tstor_tensor *x = v->u.tensor.t;
  tstor_dtype dt = tstor_tensor_dtype(x);
  if ((t->type = tstor__io_ggml_type_for(dt)) < 0)
    return TSTOR__ERR(TSTOR_ENOTSUP, "GGUF has no type for tensor '%s' (%s)", n,
                      tstor_dtype_name(dt));
  if (tstor_storage_flags(tstor_tensor_storage(x)) & TSTOR_FLAG_NO_DATA)
    return TSTOR__ERR(TSTOR_ENODATA, "GGUF tensor '%s' has no data (meta)", n);
  t->ndim = tstor_tensor_dim(x);
  t->sizes = tstor_tensor_sizes(x);
  t->nbytes = (uint64_t)tstor_tensor_nbytes(x);
  return 0;
}

static int plan_tensors(const tstor_checkpoint *ck, plan *p) {
  const tstor_value *root = ck->root;
  if (!root || root->kind != TSTOR_VALUE_DICT)
    return TSTOR__ERR(TSTOR_EINVAL, "GGUF holds a dict of name -> tensor; the root is a %s",
                      root ? tstor_value_kind_name((tstor_value_kind)root->kind) : "missing value");
  p->nt = root->u.seq.n;
  if (!(p->t = tstor__io_calloc(p->nt ? p->nt : 1, sizeof *p->t)))
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu tensors", p->nt);
  uint64_t at = 0;
  for (size_t i = 0; i < p->nt; i++) {
    const tstor_value *k = root->u.seq.keys[i], *v = root->u.seq.items[i];
    if (k->kind != TSTOR_VALUE_STRING ||
        (v->kind != TSTOR_VALUE_TENSOR && v->kind != TSTOR_VALUE_QUANTIZED))
      return TSTOR__ERR(TSTOR_EINVAL, "GGUF holds only string -> tensor; entry %zu is %s -> %s", i,
                        tstor_value_kind_name((tstor_value_kind)k->kind),
                        tstor_value_kind_name((tstor_value_kind)v->kind));
    int rc = plan_tensor(k, v, &p->t[i]);
    if (rc) return rc;
    p->t[i].offset = at;
    uint64_t padded =
        p->t[i].nbytes + (p->alignment - p->t[i].nbytes % p->alignment) % p->alignment;
    if (__builtin_add_overflow(at, padded, &at))
      return TSTOR__ERR(TSTOR_EOVERFLOW, "GGUF: the tensors' bytes overflow");
  }
  return 0;
}

static int make_plan(const tstor_checkpoint *ck, plan *p) {
  memset(p, 0, sizeof *p);
  if (!ck) return TSTOR__ERR(TSTOR_EINVAL, "GGUF save: NULL checkpoint");
  int rc = plan_metadata(ck, p);
  return rc ? rc : plan_tensors(ck, p);
}

/* ------------------------------------------------------------ writing */

static void put_string(tstor__io_fwriter *w, const tstor_value *s) {
  tstor__io_fw_uint(w, s->u.str.len, 8);
  tstor__io_fw_append(w, s->u.str.s, s->u.str.len);
}

static void put_scalar(tstor__io_fwriter *w, const tstor_value *v, int type) {
  if (type == TSTOR_GGUF_STRING) {
    put_string(w, v);
  } else if (type == TSTOR_GGUF_FLOAT32) {
    float f = (float)v->u.f;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    tstor__io_fw_uint(w, bits, 4);
  } else if (type == TSTOR_GGUF_FLOAT64) {
    uint64_t bits;
    memcpy(&bits, &v->u.f, 8);
    tstor__io_fw_uint(w, bits, 8);
  } else {
    /* two's complement, cut to the width: an int, a bool, a u64's bits */
    tstor__io_fw_uint(w, (uint64_t)v->u.i, tstor__io_gguf_type_size(type));
  }
}

static void put_kv(tstor__io_fwriter *w, const out_kv *kv) {
  put_string(w, kv->key);
  tstor__io_fw_uint(w, (uint64_t)kv->type, 4);
  if (kv->type != TSTOR_GGUF_ARRAY) {
    put_scalar(w, kv->v, kv->type);
    return;
  }
  tstor__io_fw_uint(w, (uint64_t)kv->elem, 4);
  tstor__io_fw_uint(w, kv->v->u.seq.n, 8);
  for (size_t i = 0; i < kv->v->u.seq.n; i++) put_scalar(w, kv->v->u.seq.items[i], kv->elem);
}

static void put_info(tstor__io_fwriter *w, const out_tensor *t) {
  put_string(w, t->name);
  tstor__io_fw_uint(w, (uint64_t)t->ndim, 4);
  for (int d = t->ndim - 1; d >= 0; d--) tstor__io_fw_uint(w, (uint64_t)t->sizes[d], 8);
  tstor__io_fw_uint(w, (uint64_t)t->type, 4);
  tstor__io_fw_uint(w, t->offset, 8);
}

static void put_padding(tstor__io_fwriter *w, uint64_t alignment) {
  static const uint8_t zeros[256];
  uint64_t n = (alignment - w->off % alignment) % alignment;
  while (n) {
    size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
    tstor__io_fw_append(w, zeros, k);
    n -= k;
  }
}

static int write_plan(const void *arg, FILE *f) {
  const plan *p = arg;
  tstor__io_fwriter w = TSTOR__FWRITER_INIT(f, "the GGUF file");
  tstor__io_fw_append(&w, TSTOR__GGUF_MAGIC, 4);
  tstor__io_fw_uint(&w, TSTOR__GGUF_VERSION, 4);
  tstor__io_fw_uint(&w, p->nt, 8);
  tstor__io_fw_uint(&w, p->nkv, 8);
  for (size_t i = 0; i < p->nkv; i++) put_kv(&w, &p->kv[i]);
  for (size_t i = 0; i < p->nt; i++) put_info(&w, &p->t[i]);
  /* padded after the infos and after every tensor, the last too, as both
   * ggml's and the gguf package's writers pad */
  put_padding(&w, p->alignment);
  for (size_t i = 0; i < p->nt && tstor__io_fw_ok(&w); i++) {
    tstor__io_fw_tensor(&w, p->t[i].v->u.tensor.t);
    put_padding(&w, p->alignment);
  }
  return tstor__io_fw_finish(&w);
}

int tstor__io_gguf_save_stream(const tstor_checkpoint *ck, FILE *f) {
  plan p;
  int rc = f ? make_plan(ck, &p) : TSTOR__ERR(TSTOR_EINVAL, "GGUF save: NULL stream");
  if (!f) return rc;
  if (!rc) rc = write_plan(&p, f);
  plan_free(&p);
  return rc;
}

int tstor_gguf_save(const tstor_checkpoint *ck, const char *path, const tstor_save_options *opts) {
  if (!ck || !path) return TSTOR__ERR(TSTOR_EINVAL, "tstor_gguf_save: NULL argument");
  unsigned flags;
  int rc = tstor__io_save_flags(opts, &flags);
  if (!rc && flags) rc = TSTOR__ERR(TSTOR_EINVAL, "GGUF save: unknown flags 0x%x", flags);
  if (rc) return rc;
  plan p;
  rc = make_plan(ck, &p);
  if (!rc) rc = tstor__io_save_atomically(path, write_plan, &p);
  plan_free(&p);
  return rc;
}
