/* Internals shared by the tensor files (tensor.c, tensor_view.c,
 * tensor_copy.c, tensor_print.c); never installed. */
#ifndef TSTOR_TENSOR_INTERNAL_H
#define TSTOR_TENSOR_INTERNAL_H

#include "typed_internal.h"

#include <tstor/tensor.h>

/* One allocation per tensor: the sizes and strides live right after the
 * header, so a small tensor costs one malloc and its shape shares the
 * header's cache lines. */
struct tstor_tensor {
  atomic_long refs;
  tstor_storage *storage; /* one reference */
  tstor_dtype dtype;
  int ndim;
  int64_t offset; /* elements */
  int64_t numel;
  size_t esize;   /* element size in bytes */
  int contiguous; /* PyTorch's is_contiguous, computed once */
  int64_t *sizes;   /* dims[0 .. ndim) */
  int64_t *strides; /* dims[ndim .. 2 ndim) */
  int64_t dims[];
};

/* A new tensor on s (which it retains) with the given layout, trusted: the
 * caller has checked it. strides NULL means contiguous. */
int tstor__tensor_make(tstor_storage *s, tstor_dtype dtype, int64_t offset, int ndim,
                       const int64_t *sizes, const int64_t *strides, tstor_tensor **out);
/* As tstor__tensor_make at offset 0 on a new storage of exactly the bytes the
 * layout needs, made on dev. */
int tstor__tensor_make_on_new(tstor_context *ctx, tstor_device dev, size_t nbytes,
                              tstor_dtype dtype, int ndim, const int64_t *sizes,
                              const int64_t *strides, tstor_tensor **out);

/* A tensor in two steps, for code that computes a layout straight into the
 * object (shape inference) rather than into a buffer it then copies:
 * tstor__tensor_blank allocates one of ndim dimensions with only ndim, sizes
 * and strides set (NULL and a message when out of memory); the caller writes
 * sizes[0..ndim) and strides[0..ndim), then either completes it on storage s,
 * whose reference the tensor takes over, or discards it. */
tstor_tensor *tstor__tensor_blank(int ndim);
void tstor__tensor_discard(tstor_tensor *t);
static inline void tstor__tensor_complete(tstor_tensor *t, tstor_storage *s, tstor_dtype dtype,
                                          size_t esize, int64_t offset, int64_t numel,
                                          int contiguous) {
  atomic_init(&t->refs, 1);
  t->storage = s;
  t->dtype = dtype;
  t->esize = esize;
  t->offset = offset;
  t->numel = numel;
  t->contiguous = contiguous;
}

/* a * b wrapped as two's complement: the stride products of a layout that
 * shape inference has not yet checked to fit (it is refused by its byte
 * count afterwards), where a signed overflow would be undefined. */
static inline int64_t tstor__mul_wrap(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a * (uint64_t)b);
}

/* The float dtype of a complex one's parts (complex32's are float16). */
static inline tstor_dtype tstor__complex_part(tstor_dtype d) {
  return d == TSTOR_COMPLEX32 ? TSTOR_FLOAT16 : d == TSTOR_COMPLEX64 ? TSTOR_FLOAT32 : TSTOR_FLOAT64;
}

/* The bytes a storage needs for a layout at offset 0, as PyTorch counts them:
 * computeStorageNbytes for strides, computeStorageNbytesContiguous for NULL
 * strides. TSTOR_EOVERFLOW with PyTorch's message past INT64_MAX or SIZE_MAX. */
int tstor__storage_nbytes(int ndim, const int64_t *sizes, const int64_t *strides, size_t esize,
                          uint64_t *out);

/* Validates ndim (0..TSTOR_TENSOR_MAX_DIM) and a non-NULL array for it. */
int tstor__tensor_check_ndim(int ndim, const void *array, const char *what);
/* Refuses negative sizes with PyTorch's message. */
int tstor__tensor_check_sizes(int ndim, const int64_t *sizes, const char *what);

/* Wraps a Python-style dimension into [0, ndim) (wrap_scalar: a 0-dim tensor
 * takes dims -1 and 0, as PyTorch's maybe_wrap_dim). TSTOR_ERANGE with
 * PyTorch's message otherwise. */
int tstor__wrap_dim(int64_t dim, int ndim, int wrap_scalar, int *out);

/* The rules of PyTorch's shapes that tensors and shape inference share, one
 * implementation each, one error code each:
 *   infer_size: sizes with at most one -1 resolved against numel into res.
 *     TSTOR_ESIZE "shape '[4]' is invalid for input of size 6" when they
 *     cannot hold numel; TSTOR_EINVAL for two -1s, a size below -1, or a -1
 *     that a 0 leaves ambiguous.
 *   compute_stride: ATen's computeStride, the strides that view (oldshape,
 *     oldstride) as newshape: 1 found, 0 none exist (a copy is needed), -1
 *     one would pass int64 (where ATen's product wraps).
 *   view_strides: compute_stride as view() refuses: TSTOR_EINVAL "view size
 *     is not compatible with input tensor's size and stride", or
 *     TSTOR_EOVERFLOW naming `what`.
 *   broadcast_into: broadcasts shape (n, s) into (*ndim, out), which holds
 *     the shape so far and has room for the result; TSTOR_ESIZE "The size of
 *     tensor a (3) must match the size of tensor b (2) at non-singleton
 *     dimension 1" (out then holds a partial result). */
int tstor__infer_size(int ndim, const int64_t *shape, int64_t numel, int64_t *res);
int tstor__compute_stride(int on, const int64_t *oldshape, const int64_t *oldstride, int nn,
                          const int64_t *newshape, int64_t *newstride);
int tstor__view_strides(int on, const int64_t *oldshape, const int64_t *oldstride, int nn,
                        const int64_t *newshape, int64_t *newstride, const char *what);
int tstor__broadcast_into(int *ndim, int64_t *out, int n, const int64_t *s);

/* Writes "[a, b, c]" into buf (truncated with "...]" when long). */
const char *tstor__dims_str(char *buf, size_t size, int n, const int64_t *v);

/* PyTorch's layout predicates on raw arrays. */
int tstor__compute_contiguous(int ndim, const int64_t *sizes, const int64_t *strides);
int tstor__non_overlapping_and_dense(int ndim, const int64_t *sizes, const int64_t *strides);
int tstor__channels_last_contiguous(int ndim, const int64_t *sizes, const int64_t *strides);
/* TensorIterator's reorder_dimensions: an insertion sort of the dimension
 * indices perm[0..n) where should_swap(ctx, a, b) says >0 when dim a goes
 * after b (further out), <0 when before, 0 when undecided (keep looking).
 * Ambiguous comparisons make this not a plain sort, so dense strides, copy
 * plans and shape inference all share this one loop. */
static inline void tstor__reorder_dims(int n, int *perm,
                                       int (*should_swap)(const void *ctx, int a, int b),
                                       const void *ctx) {
  for (int i = 1; i < n; i++) {
    int d1 = i;
    for (int d0 = i - 1; d0 >= 0; d0--) {
      int c = should_swap(ctx, perm[d0], perm[d1]);
      if (c > 0) {
        int t = perm[d0];
        perm[d0] = perm[d1];
        perm[d1] = t;
        d1 = d0;
      } else if (c < 0) {
        break;
      }
    }
  }
}

/* infer_dense_strides: dense strides that keep the order of t's strides, as
 * empty_like(preserve_format) gives a tensor that is not dense. */
void tstor__infer_dense_strides(int ndim, const int64_t *sizes, const int64_t *strides,
                                int64_t *out);
/* Row-major strides for sizes (size-0 dims count as 1, as PyTorch). */
void tstor__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);

/* Whether the tensor's device holds bytes / is host memory. */
int tstor__tensor_has_data(const tstor_tensor *t);
int tstor__tensor_on_host(const tstor_tensor *t);

#endif /* TSTOR_TENSOR_INTERNAL_H */
