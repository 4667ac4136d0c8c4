/* The tensor object: creation on new or existing storages, the bytes a layout
 * needs, reference counting and queries. */
#include "tensor/tensor_internal.h"

#include "runtime/pool.h"

#include <inttypes.h>
#include <string.h>

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
      (rc = tstor__check_strides(ndim, strides, "tensor_empty_strided")))
    return rc;
  uint64_t nbytes;
  if ((rc = tstor__layout_nbytes(ndim, sizes, strides, d->element_size, &nbytes))) return rc;
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
  if ((rc = tstor__layout_nbytes(ndim, sizes, NULL, d->element_size, &n))) return rc;
  return tstor__tensor_make_on_new(ctx, dev, (size_t)n, dtype, ndim, sizes, NULL, out);
}

/* The prologue looks like tensor_empty's: each message names its own entry
 * point, and the checks themselves are the shared tstor__tensor_check_*.
 * `bounded`: the layout must lie inside s (every caller but as_strided on a
 * device without data, which torch 2.x's meta kernel does not check). */
int tstor__tensor_place(tstor_storage *s, tstor_dtype dtype, int64_t offset, int ndim,
                        const int64_t *sizes, const int64_t *strides, int bounded,
                        tstor_tensor **out) {
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
  } else if ((rc = tstor__check_strides(ndim, strides, "as_strided"))) {
    return rc;
  }
  /* torch 2.x's order (setStrided): the offset's sign, then the bounds
   * (checkInBoundsForStorage). */
  if (offset < 0)
    return tstor__err(TSTOR_EINVAL, "Tensor: invalid storage offset %" PRId64, offset);
  uint64_t need;
  if ((rc = tstor__compute_storage_nbytes(ndim, sizes, strides, d->element_size, 0, &need))) return rc;
  if (need != 0) {
    int64_t off_bytes, total;
    if (__builtin_mul_overflow(offset, (int64_t)d->element_size, &off_bytes) ||
        __builtin_add_overflow((int64_t)need, off_bytes, &total))
      return tstor__layout_overflowed(ndim, sizes, strides);
    if (bounded && (uint64_t)total > tstor_storage_nbytes(s)) {
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
  return tstor__tensor_make(s, dtype, offset, ndim, sizes, strides, out);
}

int tstor_tensor_on_storage(tstor_storage *s, tstor_dtype dtype, int64_t offset, int ndim,
                            const int64_t *sizes, const int64_t *strides, tstor_tensor **out) {
  return tstor__tensor_place(s, dtype, offset, ndim, sizes, strides, 1, out);
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
