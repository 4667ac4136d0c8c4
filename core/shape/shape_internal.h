/* Internals shared by the shape-inference files (promote.c, shape.c,
 * shape_ops.c, shape_nn.c); never installed. */
#ifndef TSTOR_SHAPE_INTERNAL_H
#define TSTOR_SHAPE_INTERNAL_H

#include "tensor/tensor_internal.h"

#include <tstor/shape.h>

#include <string.h>

/* PyTorch's default dtypes (torch.get_default_dtype() and its complex
 * counterpart), which Python floats and complex numbers count as. */
#define TSTOR__DEFAULT_FLOAT TSTOR_FLOAT32
#define TSTOR__DEFAULT_COMPLEX TSTOR_COMPLEX64

/* The most tensors one elementwise operation, cat or stack takes. */
#define TSTOR__SHAPE_MAX_OPERANDS 64

/* 0 bool, 1 integer, 2 float, 3 complex; -1 for a non-dtype. Quantized dtypes
 * count as floats (promotion refuses them before this matters). */
int tstor__dtype_category(tstor_dtype d);

/* Room for a shape in messages (tstor__dims_str truncates past it). */
#define TSTOR__SHAPE_STR_MAX 256

/* Wraps dim into [0, ndim) as PyTorch's maybe_wrap_dim (a zero-dim tensor takes
 * 0 and -1); TSTOR_ERANGE with PyTorch's message otherwise. */
static inline int tstor__shape_wrap_dim(int64_t dim, int ndim, int *out) {
  return tstor__wrap_dim(dim, ndim, 1, out);
}

/* Copies the used part of a layout (a whole one is 1 KiB: copying it costs
 * as much as the shape inference itself). */
static inline void tstor__layout_copy(tstor_layout *dst, const tstor_layout *src) {
  dst->dtype = src->dtype;
  dst->ndim = src->ndim;
  memcpy(dst->sizes, src->sizes, sizeof(int64_t) * (size_t)src->ndim);
  memcpy(dst->strides, src->strides, sizeof(int64_t) * (size_t)src->ndim);
}

/* Contiguous strides for l's sizes (sizes of 0 and 1 count as 1, as PyTorch's). */
static inline void tstor__layout_contiguous(tstor_layout *l) {
  tstor__contiguous_strides(l->ndim, l->sizes, l->strides);
}


/* TSTOR_EINVAL naming `what` unless l is a valid layout (non-NULL, a known
 * dtype, 0 to TSTOR_TENSOR_MAX_DIM dims). */
int tstor__check_layout(const tstor_layout *l, const char *what);

/* An options struct's leading size: this version's struct or an older one
 * (fields are only appended; this is the first sized layout). */
static inline int tstor__params_size(size_t size, size_t current, const char *name) {
  if (size != current)
    return tstor__err(TSTOR_EINVAL, "%s.size is %zu, expected %zu: initialise it with its INIT "
                      "macro", name, size, current);
  return 0;
}

/* Checks that the tensors (any may be NULL where allowed) all live on one
 * device; writes the first one's context and device. */
int tstor__shape_device(int n, const tstor_tensor *const *tensors, tstor_context **ctx,
                        tstor_device *dev);

/* As tstor__shape_device, and builds a layout from each tensor. */
int tstor__shape_layouts(int n, const tstor_tensor *const *tensors, tstor_layout *layouts,
                         tstor_context **ctx, tstor_device *dev);

/* Ends a tensor form whose inference wrote the sizes and strides of t (from
 * tstor__tensor_blank): t, of dtype, on a new storage on dev of exactly the
 * bytes it needs. contiguous: 1 when the inference knows its strides are the
 * contiguous ones, 0 when unknown. On failure t is discarded. */
int tstor__shape_complete(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                          tstor_tensor *t, int contiguous, tstor_tensor **out);

/* Ends a tensor form: on rc == 0 allocates the output tensor for layout l. */
int tstor__shape_finish(int rc, tstor_context *ctx, tstor_device dev, const tstor_layout *l,
                        tstor_tensor **out);

#endif
