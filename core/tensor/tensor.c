/* The tensor object: creation on new or existing storages, the bytes a layout
 * needs, reference counting and queries. */
#include "tensor_internal.h"

#include "pool.h"

#include <inttypes.h>
#include <string.h>

/* ------------------------------------------------------------- helpers */

const char *tstor__dims_str(char *buf, size_t size, int n, const int64_t *v) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i <= n; i++) {
    char item[32];
    if (i == n)
      snprintf(item, sizeof item, "]");
    else
      snprintf(item, sizeof item, "%s%" PRId64, i ? ", " : "[", v[i]);
    size_t k = strlen(item);
    if (len + k + 5 > size) {
      snprintf(buf + len, size - len, "...]");
      return buf;
    }
    memcpy(buf + len, item, k + 1);
    len += k;
  }
  if (n == 0) snprintf(buf, size, "[]");
  return buf;
}

int tstor__tensor_check_ndim(int ndim, const void *array, const char *what) {
  if (ndim < 0 || ndim > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "%s: %d dimensions; a tensor has 0 to %d", what, ndim,
                      TSTOR_TENSOR_MAX_DIM);
  if (ndim > 0 && array == NULL)
    return tstor__err(TSTOR_EINVAL, "%s: NULL array for %d dimensions", what, ndim);
  return 0;
}

int tstor__tensor_check_sizes(int ndim, const int64_t *sizes, const char *what) {
  for (int i = 0; i < ndim; i++)
    if (sizes[i] < 0) {
      char buf[256];
      return tstor__err(TSTOR_EINVAL, "%s: Trying to create tensor with negative dimension %" PRId64 ": %s",
                        what, sizes[i], tstor__dims_str(buf, sizeof buf, ndim, sizes));
    }
  return 0;
}

int tstor__wrap_dim(int64_t dim, int ndim, int wrap_scalar, int *out) {
  int64_t n = ndim;
  if (n <= 0) {
    if (!wrap_scalar)
      return tstor__err(TSTOR_ERANGE, "Dimension specified as %" PRId64 " but tensor has no dimensions",
                        dim);
    n = 1;
  }
  if (dim < -n || dim > n - 1)
    return tstor__err(TSTOR_ERANGE,
                      "Dimension out of range (expected to be in range of [%" PRId64 ", %" PRId64
                      "], but got %" PRId64 ")",
                      -n, n - 1, dim);
  *out = (int)(dim < 0 ? dim + n : dim);
  return 0;
}

void tstor__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
  int64_t z = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = z;
    /* PyTorch: max(size, 1), so the strides of a zero-size tensor stay useful */
    z = tstor__mul_wrap(z, sizes[d] > 1 ? sizes[d] : 1);
  }
}

int tstor__broadcast_into(int *ndim, int64_t *out, int n, const int64_t *s) {
  int nd = *ndim > n ? *ndim : n, shift = nd - *ndim;
  if (shift) {
    for (int i = *ndim - 1; i >= 0; i--) out[i + shift] = out[i];
    for (int i = 0; i < shift; i++) out[i] = 1;
  }
  for (int i = nd - 1; i >= 0; i--) {
    int ib = i - (nd - n);
    int64_t a = out[i], b = ib >= 0 ? s[ib] : 1;
    if (a != b && a != 1 && b != 1)
      return tstor__err(TSTOR_ESIZE, "The size of tensor a (%" PRId64 ") must match the size of "
                        "tensor b (%" PRId64 ") at non-singleton dimension %d", a, b, i);
    out[i] = a == 1 ? b : a;
  }
  *ndim = nd;
  return 0;
}

int tstor__compute_contiguous(int ndim, const int64_t *sizes, const int64_t *strides) {
  int64_t z = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (sizes[d] == 0) return 1;
  }
  for (int d = ndim - 1; d >= 0; d--) {
    if (sizes[d] == 1) continue;
    if (strides[d] != z) return 0;
    z = tstor__mul_wrap(z, sizes[d]);
  }
  return 1;
}

int tstor__non_overlapping_and_dense(int ndim, const int64_t *sizes, const int64_t *strides) {
  /* c10's flag is is_contiguous || is_channels_last(_3d)_contiguous || the
   * computation below: so a tensor with no elements, contiguous by
   * definition, is dense whatever its strides (clone and empty_like keep them) */
  if (tstor__compute_contiguous(ndim, sizes, strides) ||
      tstor__channels_last_contiguous(ndim, sizes, strides))
    return 1;
  if (ndim == 1) return sizes[0] < 2 || strides[0] == 1;
  int perm[TSTOR_TENSOR_MAX_DIM];
  for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
  /* Sort by stride, size 0 and 1 dimensions last (PyTorch's order); an
   * insertion sort, stable, small n. */
  for (int i = 1; i < ndim; i++) {
    int p = perm[i], j = i;
    while (j > 0) {
      int q = perm[j - 1];
      int before = sizes[p] >= 2 && (sizes[q] < 2 || strides[p] < strides[q]);
      if (!before) break;
      perm[j] = q;
      j--;
    }
    perm[j] = p;
  }
  int64_t require = 1;
  for (int i = 0; i < ndim; i++) {
    int64_t s = sizes[perm[i]];
    if (s < 2) return 1;
    if (strides[perm[i]] != require) return 0;
    require *= s;
  }
  return 1;
}

int tstor__channels_last_contiguous(int ndim, const int64_t *sizes, const int64_t *strides) {
  static const int order4[] = {1, 3, 2, 0}, order5[] = {1, 4, 3, 2, 0};
  if (ndim != 4 && ndim != 5) return 0;
  const int *order = ndim == 4 ? order4 : order5;
  int64_t expected = 1;
  for (int i = 0; i < ndim; i++) {
    int d = order[i];
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return 0;
    expected *= sizes[d];
  }
  return 1;
}

typedef struct {
  const int64_t *sizes, *strides;
} dense_order;

/* stride-0 dims compare as ambiguous */
static int dense_should_swap(const void *ctx, int a, int b) {
  const dense_order *o = ctx;
  int64_t s0 = o->strides[a], s1 = o->strides[b];
  if (s0 == 0 || s1 == 0) return 0;
  return s0 < s1 ? -1 : s0 > s1 ? 1 : o->sizes[a] > o->sizes[b] ? 1 : 0;
}

void tstor__infer_dense_strides(int ndim, const int64_t *sizes, const int64_t *strides,
                                int64_t *out) {
  int perm[TSTOR_TENSOR_MAX_DIM];
  for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
  dense_order o = {sizes, strides};
  tstor__reorder_dims(ndim, perm, dense_should_swap, &o);
  int64_t cur = 1;
  for (int i = 0; i < ndim; i++) {
    out[perm[i]] = cur;
    if (sizes[perm[i]] > 1) cur *= sizes[perm[i]];
  }
}

/* ------------------------------------------------------------- layouts */

static int overflowed(int ndim, const int64_t *sizes, const int64_t *strides) {
  char a[256], b[256];
  return tstor__err(TSTOR_EOVERFLOW, "Storage size calculation overflowed with sizes=%s and strides=%s",
                    tstor__dims_str(a, sizeof a, ndim, sizes),
                    tstor__dims_str(b, sizeof b, ndim, strides));
}

static int check_strides(int ndim, const int64_t *strides, const char *what) {
  for (int i = 0; i < ndim; i++)
    if (strides[i] < 0) {
      char buf[256];
      return tstor__err(TSTOR_EINVAL,
                        "%s: Negative strides are not supported at the moment, got strides: %s",
                        what, tstor__dims_str(buf, sizeof buf, ndim, strides));
    }
  return 0;
}

/* PyTorch's computeStorageNbytes, with every step checked. */
static int layout_nbytes(int ndim, const int64_t *sizes, const int64_t *strides, size_t esize,
                         uint64_t offset, uint64_t *out) {
  uint64_t size;
  int over = __builtin_add_overflow(offset, (uint64_t)1, &size);
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] == 0) {
      *out = 0;
      return 0;
    }
  }
  for (int i = 0; i < ndim; i++) {
    int64_t strided;
    over |= __builtin_mul_overflow(strides[i], sizes[i] - 1, &strided);
    over |= __builtin_add_overflow(size, (uint64_t)strided, &size);
  }
  over |= __builtin_mul_overflow(size, (uint64_t)esize, &size);
  over |= size > (uint64_t)INT64_MAX;
  if (over) return overflowed(ndim, sizes, strides);
  *out = size;
  return 0;
}

int tstor__storage_nbytes(int ndim, const int64_t *sizes, const int64_t *strides, size_t esize,
                          uint64_t *out) {
  if (strides) {
    int rc = layout_nbytes(ndim, sizes, strides, esize, 0, out);
    if (rc == 0 && *out > SIZE_MAX) return overflowed(ndim, sizes, strides);
    return rc;
  }
  /* computeStorageNbytesContiguous: the product of the sizes, checked, so it
   * overflows even where a later size is 0 */
  uint64_t n = 1;
  int over = 0;
  for (int i = 0; i < ndim; i++) over |= __builtin_mul_overflow(n, (uint64_t)sizes[i], &n);
  over |= __builtin_mul_overflow(n, (uint64_t)esize, &n);
  if (over || n > (uint64_t)INT64_MAX || n > SIZE_MAX) {
    char buf[256];
    return tstor__err(TSTOR_EOVERFLOW, "Storage size calculation overflowed with sizes=%s",
                      tstor__dims_str(buf, sizeof buf, ndim, sizes));
  }
  *out = n;
  return 0;
}

int tstor_layout_nbytes(int ndim, const int64_t *sizes, const int64_t *strides,
                        size_t element_size, int64_t offset, uint64_t *out) {
  int rc;
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "layout_nbytes: NULL out");
  if ((rc = tstor__tensor_check_ndim(ndim, sizes, "layout_nbytes")) ||
      (rc = tstor__tensor_check_ndim(ndim, strides, "layout_nbytes")) ||
      (rc = tstor__tensor_check_sizes(ndim, sizes, "layout_nbytes")) ||
      (rc = check_strides(ndim, strides, "layout_nbytes")))
    return rc;
  if (offset < 0)
    return tstor__err(TSTOR_EINVAL, "layout_nbytes: Tensor: invalid storage offset %" PRId64, offset);
  return layout_nbytes(ndim, sizes, strides, element_size, (uint64_t)offset, out);
}

/* --------------------------------------------------------------- object */

/* Tensors of up to POOLED_NDIM dimensions (nearly all) share one block size,
 * so that their blocks can be reused from a per-thread pool. */
#define POOLED_NDIM 6
#define POOLED_SIZE (sizeof(tstor_tensor) + 2 * POOLED_NDIM * sizeof(int64_t))

tstor_tensor *tstor__tensor_blank(int ndim) {
  tstor_tensor *t = ndim <= POOLED_NDIM
                        ? tstor__pool_get(TSTOR__POOL_TENSOR, POOLED_SIZE)
                        : tstor__malloc(sizeof *t + 2 * (size_t)ndim * sizeof(int64_t));
  if (t == NULL) {
    tstor__err(TSTOR_ENOMEM, "no memory for a %d-dimensional tensor", ndim);
    return NULL;
  }
  t->ndim = ndim;
  t->sizes = t->dims;
  t->strides = t->dims + ndim;
  return t;
}

void tstor__tensor_discard(tstor_tensor *t) {
  if (t->ndim <= POOLED_NDIM)
    tstor__pool_put(TSTOR__POOL_TENSOR, t);
  else
    tstor__free(t);
}

/* tstor__tensor_make; `adopt` hands the tensor the caller's reference on s
 * (a new storage's only one) instead of taking another: tstor_tensor_empty
 * then pays no retain and release, two atomic read-modify-writes. On failure
 * the caller keeps its reference either way. */
static int make(tstor_storage *s, tstor_dtype dtype, int64_t offset, int ndim,
                const int64_t *sizes, const int64_t *strides, int adopt, tstor_tensor **out) {
  /* In unsigned 64 bits, as PyTorch counts (safe_compute_numel): a product
   * that stays under 2^64 until a zero size is 0 elements, not an overflow. */
  uint64_t n = 1;
  int overflow = 0;
  for (int i = 0; i < ndim; i++) overflow |= __builtin_mul_overflow(n, (uint64_t)sizes[i], &n);
  if (overflow || n > (uint64_t)INT64_MAX) {
    char buf[256];
    *out = NULL;
    return tstor__err(TSTOR_EOVERFLOW, "the number of elements of sizes %s overflows int64",
                      tstor__dims_str(buf, sizeof buf, ndim, sizes));
  }
  int64_t numel = (int64_t)n;
  tstor_tensor *t = tstor__tensor_blank(ndim);
  if (t == NULL) {
    *out = NULL;
    return TSTOR_ENOMEM;
  }
  if (ndim > 0) memcpy(t->sizes, sizes, (size_t)ndim * sizeof(int64_t));
  int contiguous = 1; /* by construction when strides is NULL */
  if (strides) {
    if (ndim > 0) memcpy(t->strides, strides, (size_t)ndim * sizeof(int64_t));
    contiguous = tstor__compute_contiguous(ndim, t->sizes, t->strides);
  } else {
    tstor__contiguous_strides(ndim, sizes, t->strides);
  }
  tstor__tensor_complete(t, adopt ? s : tstor_storage_retain(s), dtype, tstor_dtype_size(dtype),
                         offset, numel, contiguous);
  *out = t;
  return 0;
}

int tstor__tensor_make(tstor_storage *s, tstor_dtype dtype, int64_t offset, int ndim,
                       const int64_t *sizes, const int64_t *strides, tstor_tensor **out) {
  return make(s, dtype, offset, ndim, sizes, strides, 0, out);
}

/* A tensor on a new storage of nbytes, which then only the tensor holds: it
 * adopts the storage's first reference. */
int tstor__tensor_make_on_new(tstor_context *ctx, tstor_device dev, size_t nbytes,
                              tstor_dtype dtype, int ndim, const int64_t *sizes,
                              const int64_t *strides, tstor_tensor **out) {
  tstor_storage *s;
  int rc = tstor_storage_new(ctx, dev, nbytes, &s);
  if (rc) return rc;
  rc = make(s, dtype, 0, ndim, sizes, strides, 1, out);
  if (rc) tstor_storage_release(s);
  return rc;
}

int tstor_tensor_empty_strided(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                               int ndim, const int64_t *sizes, const int64_t *strides,
                               tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_empty_strided: NULL out");
  *out = NULL;
  const tstor_dtype_info *d = tstor__dtype(dtype, "tensor_empty_strided");
  if (d == NULL) return TSTOR_EINVAL;
  int rc;
  if ((rc = tstor__tensor_check_ndim(ndim, sizes, "tensor_empty_strided")) ||
      (rc = tstor__tensor_check_ndim(ndim, strides, "tensor_empty_strided")) ||
      (rc = tstor__tensor_check_sizes(ndim, sizes, "tensor_empty_strided")) ||
      (rc = check_strides(ndim, strides, "tensor_empty_strided")))
    return rc;
  uint64_t nbytes;
  if ((rc = tstor__storage_nbytes(ndim, sizes, strides, d->element_size, &nbytes))) return rc;
  return tstor__tensor_make_on_new(ctx, dev, (size_t)nbytes, dtype, ndim, sizes, strides, out);
}

int tstor_tensor_empty(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, int ndim,
                       const int64_t *sizes, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_empty: NULL out");
  *out = NULL;
  const tstor_dtype_info *d = tstor__dtype(dtype, "tensor_empty");
  if (d == NULL) return TSTOR_EINVAL;
  int rc;
  if ((rc = tstor__tensor_check_ndim(ndim, sizes, "tensor_empty")) ||
      (rc = tstor__tensor_check_sizes(ndim, sizes, "tensor_empty")))
    return rc;
  uint64_t n;
  if ((rc = tstor__storage_nbytes(ndim, sizes, NULL, d->element_size, &n))) return rc;
  return tstor__tensor_make_on_new(ctx, dev, (size_t)n, dtype, ndim, sizes, NULL, out);
}

/* The prologue looks like tensor_empty's: each message names its own entry
 * point, and the checks themselves are the shared tstor__tensor_check_*. */
int tstor_tensor_on_storage(tstor_storage *s, tstor_dtype dtype, int64_t offset, int ndim,
                            const int64_t *sizes, const int64_t *strides, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_on_storage: NULL out");
  *out = NULL;
  if (s == NULL) return tstor__err(TSTOR_EINVAL, "tensor_on_storage: NULL storage");
  const tstor_dtype_info *d = tstor__dtype(dtype, "tensor_on_storage");
  if (d == NULL) return TSTOR_EINVAL;
  int rc;
  if ((rc = tstor__tensor_check_ndim(ndim, sizes, "tensor_on_storage")) ||
      (rc = tstor__tensor_check_sizes(ndim, sizes, "tensor_on_storage")))
    return rc;
  int64_t contig[TSTOR_TENSOR_MAX_DIM];
  if (strides == NULL) {
    tstor__contiguous_strides(ndim, sizes, contig);
    strides = contig;
  } else if ((rc = check_strides(ndim, strides, "as_strided"))) {
    return rc;
  }
  /* PyTorch's order: the bounds (checkInBoundsForStorage, with the offset as
   * given), then the offset's sign. */
  uint64_t need;
  if ((rc = layout_nbytes(ndim, sizes, strides, d->element_size, 0, &need))) return rc;
  if (need != 0) {
    int64_t off_bytes, total;
    if (__builtin_mul_overflow(offset, (int64_t)d->element_size, &off_bytes) ||
        __builtin_add_overflow((int64_t)need, off_bytes, &total))
      return overflowed(ndim, sizes, strides);
    if (total > 0 && (uint64_t)total > tstor_storage_nbytes(s)) {
      char a[256], b[256];
      return tstor__err(TSTOR_ERANGE,
                        "setStorage: sizes %s, strides %s, storage offset %" PRId64
                        ", and itemsize %zu requiring a storage size of %" PRId64
                        " are out of bounds for storage of size %zu",
                        tstor__dims_str(a, sizeof a, ndim, sizes),
                        tstor__dims_str(b, sizeof b, ndim, strides), offset, d->element_size,
                        total, tstor_storage_nbytes(s));
    }
  }
  if (offset < 0)
    return tstor__err(TSTOR_EINVAL, "Tensor: invalid storage offset %" PRId64, offset);
  return tstor__tensor_make(s, dtype, offset, ndim, sizes, strides, out);
}

tstor_tensor *tstor_tensor_retain(tstor_tensor *t) {
  if (t) atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
  return t;
}

void tstor_tensor_release(tstor_tensor *t) {
  if (t == NULL) return;
  /* As tstor_storage_release: a count of 1 is the caller's own reference,
   * which nobody else can retain from, so the last release needs no
   * read-modify-write. */
  long before = atomic_load_explicit(&t->refs, memory_order_acquire);
  if (before != 1) before = atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel);
  if (before != 1) return;
  tstor_storage_release(t->storage);
  tstor__tensor_discard(t);
}

long tstor_tensor_use_count(const tstor_tensor *t) {
  return t ? atomic_load_explicit(&((tstor_tensor *)t)->refs, memory_order_relaxed) : 0;
}

/* -------------------------------------------------------------- queries */

int tstor_tensor_dim(const tstor_tensor *t) { return t->ndim; }
const int64_t *tstor_tensor_sizes(const tstor_tensor *t) { return t->sizes; }
const int64_t *tstor_tensor_strides(const tstor_tensor *t) { return t->strides; }

int tstor_tensor_size(const tstor_tensor *t, int64_t dim, int64_t *out) {
  int d = 0, rc;
  if (t == NULL || out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_size: NULL argument");
  if ((rc = tstor__wrap_dim(dim, t->ndim, 0, &d))) return rc;
  *out = t->sizes[d];
  return 0;
}

int tstor_tensor_stride(const tstor_tensor *t, int64_t dim, int64_t *out) {
  int d = 0, rc;
  if (t == NULL || out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_stride: NULL argument");
  if ((rc = tstor__wrap_dim(dim, t->ndim, 0, &d))) return rc;
  *out = t->strides[d];
  return 0;
}

int64_t tstor_tensor_numel(const tstor_tensor *t) { return t->numel; }
int64_t tstor_tensor_nbytes(const tstor_tensor *t) { return t->numel * (int64_t)t->esize; }
size_t tstor_tensor_element_size(const tstor_tensor *t) { return t->esize; }
int64_t tstor_tensor_storage_offset(const tstor_tensor *t) { return t->offset; }
tstor_storage *tstor_tensor_storage(const tstor_tensor *t) { return t->storage; }
tstor_context *tstor_tensor_context(const tstor_tensor *t) { return t->storage->ctx; }
tstor_dtype tstor_tensor_dtype(const tstor_tensor *t) { return t->dtype; }
tstor_device tstor_tensor_device(const tstor_tensor *t) { return t->storage->device; }

int tstor_tensor_get_device(const tstor_tensor *t) {
  const tstor_storage *s = t->storage;
  const tstor__devtype *type = &s->ctx->types[s->device.type];
  return type->ops.flags & (TSTOR_DEVICE_HOST | TSTOR_DEVICE_NO_DATA) ? -1 : (int)s->device.index;
}

int tstor__tensor_has_data(const tstor_tensor *t) {
  const tstor_storage *s = t->storage;
  return !(s->flags & TSTOR_FLAG_NO_DATA) &&
         !(s->ctx->types[s->device.type].ops.flags & TSTOR_DEVICE_NO_DATA);
}

int tstor__tensor_on_host(const tstor_tensor *t) {
  const tstor_storage *s = t->storage;
  return (s->ctx->types[s->device.type].ops.flags & TSTOR_DEVICE_HOST) != 0;
}

void *tstor_tensor_data(const tstor_tensor *t) {
  if (!tstor__tensor_has_data(t) || t->storage->data == NULL) return NULL;
  /* A tensor of no elements may sit at any offset (PyTorch checks none for
   * it), past its storage or past what a byte offset can hold: its pointer
   * is never read through, so it is the storage's start. */
  int64_t byte;
  if (__builtin_mul_overflow(t->offset, (int64_t)t->esize, &byte) || (uint64_t)byte > t->storage->nbytes)
    return t->storage->data;
  return (char *)t->storage->data + byte;
}

int tstor_tensor_is_contiguous(const tstor_tensor *t) { return t->contiguous; }

int tstor_tensor_is_non_overlapping_and_dense(const tstor_tensor *t) {
  if (t->contiguous) return 1;
  return tstor__non_overlapping_and_dense(t->ndim, t->sizes, t->strides);
}

int tstor_tensor_is_channels_last(const tstor_tensor *t) {
  return tstor__channels_last_contiguous(t->ndim, t->sizes, t->strides);
}
