/* Internals shared by the shape-inference files; never installed. The files,
 * each named after the ATen file of native/ it follows, lowest first: a file
 * calls only files before it in this list (tests/layering.py keeps them
 * without a circle).
 *
 *   promote.c       type promotion and result_type (c10's promoteTypes)
 *   layout.c        layouts, broadcasting, the shared helpers and the tensor
 *                   glue (TensorGeometry, ExpandUtils)
 *   elementwise.c   the output layout of elementwise operations and of where
 *                   (TensorIterator.cpp, and the Python references' order)
 *   reduce.c        reductions and softmax (ReduceOps.cpp, SoftMax.cpp)
 *   linalg.c        mm, bmm, matmul, linear (LinearAlgebra.cpp)
 *   join.c          cat and stack (TensorShape.cpp)
 *   index.c         embedding and index_select (Embedding.cpp,
 *                   TensorAdvancedIndexing.cpp)
 *   conv.c          convolutions (Convolution.cpp)
 *   pool.c          2-d and adaptive pooling (Pooling.cpp,
 *                   AdaptiveAveragePooling.cpp)
 *   activation.c    activations and dropout (Activation.cpp, Dropout.cpp)
 *   norm.c          batch, layer and group norm (Normalization.cpp)
 *
 * Each op has a layout form (tstor_layout_*), the inference, and a tensor
 * form (tstor_shape_*), which runs it through tstor__shape_form. */
#ifndef TSTOR_SHAPE_INTERNAL_H
#define TSTOR_SHAPE_INTERNAL_H

#include "tensor/tensor_internal.h"

#include <tstor/shape.h>

#include <stdbool.h>
#include <string.h>

/* PyTorch's default dtypes (torch.get_default_dtype() and its complex
 * counterpart), which Python floats and complex numbers count as. */
#define TSTOR__DEFAULT_FLOAT TSTOR_FLOAT32
#define TSTOR__DEFAULT_COMPLEX TSTOR_COMPLEX64

/* The most tensors one elementwise operation, cat or stack takes. */
#define TSTOR__SHAPE_MAX_OPERANDS 64

/* ------------------------------------------------------------ promote.c */

/* The promotion categories, lowest first: a dtype of a higher category wins
 * over any of a lower one. */
enum { TSTOR__CAT_BOOL, TSTOR__CAT_INTEGER, TSTOR__CAT_FLOAT, TSTOR__CAT_COMPLEX };

/* A dtype's TSTOR__CAT_*; -1 for a non-dtype. Quantized dtypes count as
 * floats (promotion refuses them before this matters). */
int tstor__dtype_category(tstor_dtype d);

/* ------------------------------------------------------------- layout.c */

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

/* c10's get_channels_last_strides_2d (ndim 4) or _3d (ndim 5) for sizes. */
void tstor__channels_last_strides(int ndim, const int64_t *sizes, int64_t *strides);

/* TSTOR_EINVAL naming `what` unless l is a valid layout (non-NULL, a known
 * dtype, 0 to TSTOR_TENSOR_MAX_DIM dims). */
int tstor__check_layout(const tstor_layout *l, const char *what);
/* The same for an optional layout: NULL passes. */
int tstor__check_optional(const tstor_layout *l, const char *what);

/* Whether d (a known dtype) is quantized. */
bool tstor__is_quantized(tstor_dtype d);

/* Writes a new contiguous layout of dtype and sizes into out (which sizes may
 * point into), refused as PyTorch's empty() refuses it when its byte count
 * passes int64 (the strides would wrap). */
int tstor__set_contiguous(tstor_layout *out, tstor_dtype dtype, int ndim, const int64_t *sizes);

/* empty_like(preserve_format): a dense input's own strides, otherwise dense
 * strides in the input's order. */
void tstor__layout_empty_like(const tstor_layout *in, tstor_layout *out);

/* An options struct of shape.h (tstor_conv_params, tstor_pool_params): size
 * first, fields only appended. */
typedef struct {
  const char *type, *init; /* "tstor_conv_params", "TSTOR_CONV_PARAMS_INIT" */
  size_t first;            /* its first layout: the bytes through its last field */
  size_t current;          /* this header's sizeof */
  const void *defaults;    /* this header's struct with its INIT's values */
} tstor__params_kind;

/* Reads the caller's options struct into *out (kind->current bytes): every
 * size from the first layout's to this header's is accepted, and the fields
 * past the caller's size take their defaults, so that a program built against
 * an older header still works. TSTOR_EINVAL for any other size, naming the
 * struct and its INIT macro. */
int tstor__params_read(const tstor__params_kind *kind, const void *params, void *out);

/* Checks that the tensors (any may be NULL where allowed) all live on one
 * device; writes the first one's context and device. */
int tstor__shape_device(int n, const tstor_tensor *const *tensors, tstor_context **ctx,
                        tstor_device *dev);

/* Ends a tensor form whose inference wrote the sizes and strides of t (from
 * tstor__tensor_blank): t, of dtype, on a new storage on dev of exactly the
 * bytes it needs. contiguous: 1 when the inference knows its strides are the
 * contiguous ones, 0 when unknown. On failure t is discarded. */
int tstor__shape_complete(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, tstor_tensor *t,
                          int contiguous, tstor_tensor **out);

/* A tensor form's inference: in[i] is the layout of the form's tensor i, NULL
 * where that tensor is NULL (in[i] is &layouts[i] of one array, so in[0] is
 * the array of them all when none is NULL: cat's and stack's input); args
 * the form's other arguments. Writes *out and returns 0, or returns
 * TSTOR__SHAPE_IS_INPUT where the output is the first tensor itself, or a
 * negative code. */
typedef int (*tstor__shape_infer)(const tstor_layout *const *in, const void *args,
                                  tstor_layout *out);
#define TSTOR__SHAPE_IS_INPUT 1

/* The glue of every tensor form but the elementwise ones (elementwise.c
 * reads their operands in place): sets *out to NULL, refuses a NULL out
 * and a NULL among the first `required` of the n tensors (naming the form,
 * `name`), checks that they share a device, runs infer on their layouts, and
 * makes *out a new tensor of the layout it wrote, on that device (or a new
 * reference to tensors[0] for TSTOR__SHAPE_IS_INPUT). */
/* The name torch's argument checks give a CPU tensor of dtype d
 * ("torch.FloatTensor", "CPUUInt16Type"), into buf. */
const char *tstor__tensor_type_name(tstor_dtype d, char *buf, size_t size);

/* tstor_broadcast_shapes with the words of the ops that broadcast their
 * operands ("The size of tensor a (3) must match the size of tensor b ..."). */
int tstor__broadcast_shapes(int n, const int *ndims, const int64_t *const *sizes, int *out_ndim,
                            int64_t *out_sizes);

int tstor__shape_form(const char *name, int n, const tstor_tensor *const *tensors, int required,
                      tstor__shape_infer infer, const void *args, tstor_tensor **out);

#endif
