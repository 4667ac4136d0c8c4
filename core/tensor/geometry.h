/* The geometry of a tensor on raw arrays (geometry.c): the rules of
 * PyTorch's shapes that tensors and shape inference share, one
 * implementation each, one error code each, named after c10's TensorGeometry
 * and ATen's InferSize.h. Never installed. */
#ifndef TSTOR_GEOMETRY_H
#define TSTOR_GEOMETRY_H

#include "internal.h"

#include <tstor/tensor.h>

/* a * b wrapped as two's complement: the stride products of a layout that
 * shape inference has not yet checked to fit (it is refused by its byte
 * count afterwards), where a signed overflow would be undefined. */
static inline int64_t tstor__mul_wrap(int64_t a, int64_t b) {
  return (int64_t)((uint64_t)a * (uint64_t)b);
}

/* computeStorageNbytes, every step checked: the bytes a layout needs at an
 * offset of `offset` elements (at most INT64_MAX); TSTOR_EOVERFLOW with
 * PyTorch's message (tstor__layout_overflowed's) otherwise. */
int tstor__compute_storage_nbytes(int ndim, const int64_t *sizes, const int64_t *strides,
                                  size_t esize, uint64_t offset, uint64_t *out);
/* TSTOR_EOVERFLOW "Storage size calculation overflowed with sizes=... and
 * strides=...". */
int tstor__layout_overflowed(int ndim, const int64_t *sizes, const int64_t *strides);
/* Refuses negative strides with PyTorch's message, naming `what`. */
int tstor__check_strides(int ndim, const int64_t *strides, const char *what);
/* TSTOR_EOVERFLOW: a stride or offset of a view past int64, refused where
 * PyTorch's arithmetic would silently wrap. */
int tstor__stride_overflow(const char *what);
/* The bytes a storage needs for a layout at offset 0, as PyTorch counts them:
 * computeStorageNbytes for strides, computeStorageNbytesContiguous for NULL
 * strides. TSTOR_EOVERFLOW with PyTorch's message past INT64_MAX or SIZE_MAX. */
int tstor__layout_nbytes(int ndim, const int64_t *sizes, const int64_t *strides, size_t esize,
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

#endif /* TSTOR_GEOMETRY_H */
