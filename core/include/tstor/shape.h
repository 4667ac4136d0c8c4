/* tstor shape inference: an operation's output sizes, strides and dtype,
 * computed without reading a byte of data.
 *
 * Every function here answers the question PyTorch's meta device answers: what
 * would this operation return? It works on tensors of any device (their data
 * is never touched) and is what makes the meta device useful: a whole model can
 * be laid out, its activations counted and its memory planned before one
 * buffer is allocated. The results are torch 2.15's, checked case by case
 * against PyTorch itself (tests/vectors/gen_shapes.py): the same type
 * promotion, the same broadcasting, the same output strides (a channels-last
 * input gives a channels-last output where PyTorch's meta device does) and an
 * error where PyTorch raises one.
 *
 * The header reads top to bottom: layouts (the metadata of a tensor as a plain
 * value), type promotion, broadcasting, then the operations. Each operation
 * comes in two forms:
 *   - tstor_layout_OP works on tstor_layout values only: no tensor, no context,
 *     no allocation. It fills *out.
 *   - tstor_shape_OP takes tensors and returns a new, uninitialised tensor with
 *     the output's layout on the inputs' device (tstor_tensor_empty_strided).
 *     All tensor arguments must be on one device of one context.
 *
 * Conventions (those of tstor.h, plus):
 *   - A failed call returns a negative TSTOR_E* code, names the shapes in
 *     tstor_last_error() in PyTorch's words where PyTorch has them, sets *out
 *     to NULL (tensor forms) and leaves *out untouched (layout forms).
 *     TSTOR_ESIZE for shapes that do not broadcast and for view sizes that do
 *     not hold the input's elements (PyTorch's "must match the size of
 *     tensor b" and "is invalid for input of size": the codes tensor.h gives
 *     for the same messages), TSTOR_EINVAL for other bad arguments and
 *     mismatched shapes, TSTOR_ERANGE for a dimension out of range,
 *     TSTOR_EDTYPE for a dtype the operation refuses.
 *   - Dimensions may be negative and wrap as in Python (-1 is the last).
 *   - Every function is thread-safe; none keeps state.
 */
#ifndef TSTOR_SHAPE_H
#define TSTOR_SHAPE_H

#include <tstor/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------- layouts */

/* A tensor's metadata as a value: dtype, sizes and strides (in elements).
 * Entries past ndim are unused. 1 KiB: fine on a stack, not for arrays of
 * thousands. */
typedef struct tstor_layout {
  tstor_dtype dtype;
  int ndim; /* 0 .. TSTOR_TENSOR_MAX_DIM */
  int64_t sizes[TSTOR_TENSOR_MAX_DIM];
  int64_t strides[TSTOR_TENSOR_MAX_DIM];
} tstor_layout;

/* Fills *out from arrays; strides NULL means contiguous (row-major, the last
 * dimension fastest, as PyTorch's contiguous strides: a size of 0 or 1 counts
 * as 1). TSTOR_EINVAL for a bad dtype, ndim or negative size, TSTOR_EOVERFLOW
 * when the element count passes INT64_MAX. The caller owns everything. */
TSTOR_EXTERN int tstor_layout_init(tstor_layout *out, tstor_dtype dtype, int ndim,
                                   const int64_t *sizes, const int64_t *strides);

/* The layout of tensor t (copied; t stays the caller's). */
TSTOR_EXTERN int tstor_layout_of(const tstor_tensor *t, tstor_layout *out);

/* The number of elements (the product of the sizes; 1 for zero dims), or -1
 * when it overflows int64. */
TSTOR_EXTERN int64_t tstor_layout_numel(const tstor_layout *l);

/* The bytes a storage needs to hold l at offset 0 (tstor_layout_nbytes of
 * tensor.h for its sizes, strides and element size): one element past the
 * furthest one the strides reach, 0 when a size is 0. TSTOR_EOVERFLOW when it
 * passes INT64_MAX, TSTOR_EINVAL for a negative stride or a bad dtype. */
TSTOR_EXTERN int tstor_layout_bytes(const tstor_layout *l, uint64_t *out);

/* How the dimensions are ordered in memory, as PyTorch's suggest_memory_format:
 * channels-last (4 dims: N, H, W, C order) and channels-last-3d (5 dims) are
 * recognised from the strides, ambiguous cases read as contiguous. */
typedef enum tstor_memory_format {
  TSTOR_MEMORY_CONTIGUOUS = 0,
  TSTOR_MEMORY_CHANNELS_LAST = 1,
  TSTOR_MEMORY_CHANNELS_LAST_3D = 2
} tstor_memory_format;
TSTOR_EXTERN tstor_memory_format tstor_layout_memory_format(const tstor_layout *l);

/* Rewrites l's strides as the dense strides of `format` (channels-last needs 4
 * dims, channels-last-3d 5: TSTOR_EINVAL otherwise). */
TSTOR_EXTERN int tstor_layout_restride(tstor_layout *l, tstor_memory_format format);

/* A new, uninitialised tensor with layout l on dev (tstor_tensor_empty_strided):
 * *out is a new reference, NULL on failure. */
TSTOR_EXTERN int tstor_layout_empty(tstor_context *ctx, tstor_device dev, const tstor_layout *l,
                                    tstor_tensor **out);

/* The layout of in.view(sizes) (torch.Tensor.view): the same elements under
 * ndim new sizes, one of which may be -1 (inferred), with the strides PyTorch
 * gives the view (ATen's computeStride), as tstor_tensor_view computes them.
 * TSTOR_ESIZE when the element counts differ ("shape '[4]' is invalid for
 * input of size 6"); TSTOR_EINVAL when -1 is ambiguous or repeated, and when
 * the strides cannot express the view without a copy
 * ("view size is not compatible with input tensor's size and stride"). The
 * view reads the same storage from the same offset: a tensor of it is
 * tstor_tensor_on_storage(tstor_tensor_storage(t), ..., out->sizes,
 * out->strides). */
TSTOR_EXTERN int tstor_layout_view(const tstor_layout *in, int ndim, const int64_t *sizes,
                                   tstor_layout *out);

/* ------------------------------------------------------------ type promotion */

/* The dtype two dtypes combine into, as torch.promote_types: bool < integers <
 * floats < complex; uint8 with int8 gives int16; float16 with bfloat16 gives
 * float32; a float with a complex gives the complex dtype wide enough for both
 * (float64 with complex64 gives complex128). A quantized or float8 dtype
 * combines only with itself (TSTOR_EDTYPE otherwise, naming both). */
TSTOR_EXTERN int tstor_promote_types(tstor_dtype a, tstor_dtype b, tstor_dtype *out);

/* An operand of a type-promoting operation: a tensor with dimensions, a
 * zero-dim tensor, or a Python-like number. Zero-dim tensors and numbers take
 * part only by category: they raise the result to their category (bool <
 * integer < float < complex) but never widen it within one, so an int8
 * tensor times a zero-dim int64 tensor is int8, and a float16 tensor plus 2.5
 * is float16. A number's dtype says its kind: TSTOR_BOOL, any integer dtype
 * (Python int), any float dtype (Python float: counts as the default float
 * dtype, float32) or any complex dtype (Python complex: complex64). */
typedef enum tstor_operand_kind {
  TSTOR_OPERAND_TENSOR = 0,   /* a tensor with one dimension or more */
  TSTOR_OPERAND_ZERO_DIM = 1, /* a zero-dim tensor */
  TSTOR_OPERAND_NUMBER = 2    /* a Python-like scalar */
} tstor_operand_kind;

typedef struct tstor_operand {
  tstor_dtype dtype;
  tstor_operand_kind kind;
} tstor_operand;

/* The dtype PyTorch's result_type gives for n >= 1 operands (ATen's
 * ResultTypeState: tensors with dimensions first, then zero-dim tensors, then
 * numbers, each group by category only over the one before). TSTOR_EDTYPE
 * where promotion refuses; TSTOR_EINVAL for n < 1 or a bad kind or dtype. */
TSTOR_EXTERN int tstor_result_type(int n, const tstor_operand *operands, tstor_dtype *out);

/* The same for tensors (their dimension count says their kind) and nnumbers
 * numbers of the given kinds (numbers may be NULL when nnumbers is 0). */
TSTOR_EXTERN int tstor_result_type_tensors(int n, const tstor_tensor *const *tensors,
                                           int nnumbers, const tstor_dtype *numbers,
                                           tstor_dtype *out);

/* ------------------------------------------------------------- broadcasting */

/* The shape n >= 1 shapes broadcast to, as torch.broadcast_shapes: aligned at
 * the last dimension, sizes equal or 1 (a 1 stretches, also to 0). shape i has
 * ndims[i] dimensions at sizes[i]. Writes *out_ndim and out_sizes[0..*out_ndim)
 * (room for TSTOR_TENSOR_MAX_DIM). TSTOR_ESIZE when two sizes differ and
 * neither is 1, in torch 2.x's words: "Attempting to broadcast a dimension of
 * length 2 at -1! Mismatching argument at index 1 had [3, 2]; but expected
 * shape should be broadcastable to [2, 3]" (the operations that broadcast
 * their operands say "The size of tensor a (3) must match the size of tensor
 * b (2) at non-singleton dimension 1"). */
TSTOR_EXTERN int tstor_broadcast_shapes(int n, const int *ndims, const int64_t *const *sizes,
                                        int *out_ndim, int64_t *out_sizes);

/* -------------------------------------------------------------- elementwise */

/* What an elementwise operation makes of its operands' promoted dtype. */
typedef enum tstor_elementwise_rule {
  TSTOR_ELEMENTWISE_PROMOTE = 0, /* the promoted dtype: add, mul, maximum */
  TSTOR_ELEMENTWISE_FLOAT = 1,   /* bool and integers become float32: div, sin,
                                    exp, sqrt, sigmoid */
  TSTOR_ELEMENTWISE_BOOL = 2,    /* bool, after checking the operands promote:
                                    eq, lt, isnan, logical_and */
  TSTOR_ELEMENTWISE_REAL = 3,    /* the promoted dtype, a complex one as its
                                    parts' float dtype (then, for one tensor,
                                    the input's own strides as empty_like
                                    keeps them); bool refused: abs */
  TSTOR_ELEMENTWISE_NO_BOOL = 4  /* the promoted dtype, refusing bool operands
                                    in PyTorch's words for neg (one operand)
                                    and sub (two): neg, sub */
} tstor_elementwise_rule;

/* The output of an elementwise operation of n >= 1 tensors and nnumbers
 * numbers (Python-like scalars of the given kinds; NULL when 0): the
 * broadcast shape, the dtype of `rule`, and the strides of torch 2.x's meta
 * device (its references' compute_elementwise_output_strides): inputs all
 * contiguous give a contiguous output, all channels-last (4 dims) a
 * channels-last one; otherwise the output is dense (a size of 0 counting as 1)
 * in the order of the first input's strides, later inputs breaking ties. */
TSTOR_EXTERN int tstor_layout_elementwise(tstor_elementwise_rule rule, int n,
                                          const tstor_layout *inputs, int nnumbers,
                                          const tstor_dtype *numbers, tstor_layout *out);

/* Tensor forms: one tensor; two tensors; a tensor and a number of the kind
 * `number`. *out is a new reference (NULL on failure); the inputs stay the
 * caller's. */
TSTOR_EXTERN int tstor_shape_unary(tstor_elementwise_rule rule, const tstor_tensor *a,
                                   tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_binary(tstor_elementwise_rule rule, const tstor_tensor *a,
                                    const tstor_tensor *b, tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_binary_number(tstor_elementwise_rule rule, const tstor_tensor *a,
                                           tstor_dtype number, tstor_tensor **out);

/* --------------------------------------------------------------- reductions */

typedef enum tstor_reduction {
  TSTOR_REDUCE_SUM = 0,   /* bool and integers give int64, others keep their dtype */
  TSTOR_REDUCE_MEAN = 1,  /* floats and complex only (TSTOR_EDTYPE otherwise) */
  TSTOR_REDUCE_AMAX = 2,  /* keeps the dtype (amin, max over dims alike) */
  TSTOR_REDUCE_ARGMAX = 3 /* int64; one dimension or none (then over all) */
} tstor_reduction;

/* Reduces `in` over ndims dimensions dims[0..ndims) (each once; none means all
 * of them), keeping them as size 1 when keepdim. The output is contiguous, as
 * PyTorch's (where a size is 0, a kept dimension of sum and amax has torch
 * 2.x's stride: the next kept dimension's stride times its size, 1 last).
 * A zero-dim input takes dimension 0 or -1. amax and argmax refuse a reduced
 * dimension of size 0 (TSTOR_ERANGE) and, without dims, an empty input
 * (TSTOR_ERANGE for argmax, TSTOR_EINVAL for amax: PyTorch's IndexError and
 * RuntimeError); argmax refuses a complex input first (TSTOR_EDTYPE). */
TSTOR_EXTERN int tstor_layout_reduce(tstor_reduction op, const tstor_layout *in, int ndims,
                                     const int64_t *dims, int keepdim, tstor_layout *out);
/* Tensor form; *out is a new reference. */
TSTOR_EXTERN int tstor_shape_reduce(tstor_reduction op, const tstor_tensor *in, int ndims,
                                    const int64_t *dims, int keepdim, tstor_tensor **out);

/* sum or mean with PyTorch's dtype= argument: the input is taken as converted
 * to `dtype` first, which is then the output's (mean refuses a dtype that is
 * not floating or complex: "Optional dtype must be either a floating point or
 * complex dtype"). Otherwise as tstor_layout_reduce; amax and argmax take no
 * dtype (TSTOR_EINVAL). The tensor form's *out is a new reference. */
TSTOR_EXTERN int tstor_layout_reduce_dtype(tstor_reduction op, const tstor_layout *in, int ndims,
                                           const int64_t *dims, int keepdim, tstor_dtype dtype,
                                           tstor_layout *out);
TSTOR_EXTERN int tstor_shape_reduce_dtype(tstor_reduction op, const tstor_tensor *in, int ndims,
                                          const int64_t *dims, int keepdim, tstor_dtype dtype,
                                          tstor_tensor **out);

/* ---------------------------------------------------------- matrix products */

/* Outputs are contiguous. The operands must have one dtype (TSTOR_EDTYPE
 * otherwise, "expected scalar type Float but found Double").
 *   matmul: torch.matmul's cases: 1-d . 1-d is a zero-dim dot product; 2-d . 1-d
 *     a matrix-vector product; a 1-d left operand is a row (dropped from the
 *     result), a 1-d right one a column; from 3 dims on the batch dimensions
 *     (all but the last two) broadcast.
 *   mm: (n, k) . (k, m) -> (n, m).  bmm: (b, n, k) . (b, k, m) -> (b, n, m).
 *   linear: input (..., in) and weight (out, in) or (in), bias NULL or
 *     broadcastable to the result: input . weight^T + bias (a weight (in)
 *     with a bias and a 2-d input is refused, as PyTorch's addmm does). */
TSTOR_EXTERN int tstor_layout_matmul(const tstor_layout *a, const tstor_layout *b,
                                     tstor_layout *out);
TSTOR_EXTERN int tstor_layout_mm(const tstor_layout *a, const tstor_layout *b, tstor_layout *out);
TSTOR_EXTERN int tstor_layout_bmm(const tstor_layout *a, const tstor_layout *b,
                                  tstor_layout *out);
TSTOR_EXTERN int tstor_layout_linear(const tstor_layout *input, const tstor_layout *weight,
                                     const tstor_layout *bias, tstor_layout *out);
/* Tensor forms; *out is a new reference. bias may be NULL. */
TSTOR_EXTERN int tstor_shape_matmul(const tstor_tensor *a, const tstor_tensor *b,
                                    tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_mm(const tstor_tensor *a, const tstor_tensor *b, tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_bmm(const tstor_tensor *a, const tstor_tensor *b,
                                 tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_linear(const tstor_tensor *input, const tstor_tensor *weight,
                                    const tstor_tensor *bias, tstor_tensor **out);

/* F.scaled_dot_product_attention(query, key, value) with no mask, as torch
 * 2.x's meta device gives it: query (..., L, E), key (..., S, E), value
 * (..., S, Ev) of one floating or complex dtype (integers and bool are
 * refused as torch's CPU refuses them), at least 2 dims each, batch
 * dimensions broadcast as matmul's; the output (..., L, Ev) contiguous.
 * Dropout, causal masking and the scale change no layout. *out is a new
 * reference. */
TSTOR_EXTERN int tstor_layout_scaled_dot_product_attention(const tstor_layout *query,
                                                           const tstor_layout *key,
                                                           const tstor_layout *value,
                                                           tstor_layout *out);
TSTOR_EXTERN int tstor_shape_scaled_dot_product_attention(const tstor_tensor *query,
                                                          const tstor_tensor *key,
                                                          const tstor_tensor *value,
                                                          tstor_tensor **out);

/* ------------------------------------------------------------ cat and stack */

/* torch.cat of n >= 1 inputs along dim: equal sizes except in dim, the dtypes
 * promoted (tstor_promote_types), 1-d inputs of size 0 skipped as PyTorch's
 * legacy rule has it; the output keeps the inputs' memory format when they all
 * suggest the same one. torch.stack: inputs of one shape, joined along a new
 * dimension dim (in -ndim-1 .. ndim). */
TSTOR_EXTERN int tstor_layout_cat(int n, const tstor_layout *inputs, int64_t dim,
                                  tstor_layout *out);
TSTOR_EXTERN int tstor_layout_stack(int n, const tstor_layout *inputs, int64_t dim,
                                    tstor_layout *out);
/* Tensor forms; *out is a new reference. */
TSTOR_EXTERN int tstor_shape_cat(int n, const tstor_tensor *const *inputs, int64_t dim,
                                 tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_stack(int n, const tstor_tensor *const *inputs, int64_t dim,
                                   tstor_tensor **out);

/* ------------------------------------------------------------- convolutions */

/* Convolution arguments for 1 to 3 spatial dimensions; the first `spatial`
 * entries of each array are read. Like every options struct of tstor, it
 * begins with its size, so that fields can be appended without breaking
 * programs built against this header: TSTOR_CONV_PARAMS_INIT sets it, with
 * PyTorch's defaults (stride 1, padding 0, dilation 1, groups 1, not
 * transposed) for `spatial` dimensions. Every size from the first layout's
 * (the fields through padding_mode) to this header's is accepted, the fields
 * past it taking their INIT values; any other is refused (TSTOR_EINVAL). */
typedef enum tstor_conv_padding {
  TSTOR_CONV_PADDING_EXPLICIT = 0, /* padding[] as given (PyTorch's ints) */
  TSTOR_CONV_PADDING_SAME = 1,     /* padding="same": the output as large as
                                      the input, padded more on the right where
                                      the total is odd; stride must be 1 */
  TSTOR_CONV_PADDING_VALID = 2     /* padding="valid": none */
} tstor_conv_padding;

typedef struct tstor_conv_params {
  size_t size;               /* sizeof(tstor_conv_params) */
  int spatial;               /* 1, 2 or 3: conv1d, conv2d, conv3d */
  int transposed;            /* conv_transpose: weight (in, out / groups, k...) */
  int64_t stride[3];         /* > 0 */
  int64_t padding[3];        /* >= 0, read when padding_mode is EXPLICIT */
  int64_t dilation[3];       /* > 0 */
  int64_t output_padding[3]; /* transposed only: < stride or < dilation */
  int64_t groups;            /* > 0, divides both channel counts */
  tstor_conv_padding padding_mode; /* not with transposed */
} tstor_conv_params;
#define TSTOR_CONV_PARAMS_INIT(k)                                                            \
  {                                                                                          \
    .size = sizeof(tstor_conv_params), .spatial = (k), .transposed = 0, .stride = {1, 1, 1}, \
    .padding = {0, 0, 0}, .dilation = {1, 1, 1}, .output_padding = {0, 0, 0}, .groups = 1,   \
    .padding_mode = TSTOR_CONV_PADDING_EXPLICIT                                              \
  }

/* The output of a convolution: input (N, C, spatial...) or unbatched (C,
 * spatial...); weight (out, C / groups, k...) or, transposed, (C, out / groups,
 * k...); bias NULL or (out). Each spatial size is (in + 2 pad - dil (k - 1) -
 * 1) / stride + 1, transposed (in - 1) stride - 2 pad + dil (k - 1) +
 * output_padding + 1. The output is contiguous whatever the input's or the
 * weight's memory format, as torch 2.x's meta kernels make it. The input, weight and bias must
 * have one dtype (TSTOR_EDTYPE). Strides, paddings and dilations from 2^30 and
 * sizes from 2^31 are refused with TSTOR_EOVERFLOW. With TSTOR_CONV_PADDING_SAME
 * each spatial size is the input's (stride 1 only: "padding='same' is not
 * supported for strided convolutions"), and the layout is that of the conv
 * PyTorch runs on the input padded by dil (k - 1) in all. Refused as PyTorch refuses, with its
 * messages: "Given groups=1, weight of size [4, 3, 3, 3], expected input[2, 5,
 * 8, 8] to have 3 channels, but got 5 channels instead", a kernel larger than
 * the padded input, and so on. */
TSTOR_EXTERN int tstor_layout_conv(const tstor_layout *input, const tstor_layout *weight,
                                   const tstor_layout *bias, const tstor_conv_params *p,
                                   tstor_layout *out);
/* Tensor form; *out is a new reference. bias may be NULL. */
TSTOR_EXTERN int tstor_shape_conv(const tstor_tensor *input, const tstor_tensor *weight,
                                  const tstor_tensor *bias, const tstor_conv_params *p,
                                  tstor_tensor **out);

/* ----------------------------------------------------------------- pooling */

/* 2-d pooling arguments over (H, W), size first as every options struct
 * (its first layout: the fields through ceil_mode; sizes as for
 * tstor_conv_params).
 * Every field is taken as given: PyTorch's default stride (stride=None) is
 * the kernel, which TSTOR_POOL_PARAMS_INIT writes, and a stride of 0 is
 * refused as PyTorch refuses it ("stride should not be zero"). dilation is for
 * max pooling only (avg_pool2d has none: leave it {1, 1}). */
typedef struct tstor_pool_params {
  size_t size;         /* sizeof(tstor_pool_params) */
  int64_t kernel[2];
  int64_t stride[2];   /* > 0 */
  int64_t padding[2];  /* at most half the kernel */
  int64_t dilation[2];
  int ceil_mode;       /* round the output size up; a last window that would
                          start in the right padding is dropped */
} tstor_pool_params;
#define TSTOR_POOL_PARAMS_INIT(kh, kw)                                                 \
  {                                                                                    \
    .size = sizeof(tstor_pool_params), .kernel = {(kh), (kw)}, .stride = {(kh), (kw)}, \
    .padding = {0, 0}, .dilation = {1, 1}, .ceil_mode = 0                              \
  }

/* max_pool2d / avg_pool2d over input (N, C, H, W) or (C, H, W): each output
 * size is PyTorch's pooling_output_shape; the memory format (channels-last or
 * contiguous) follows the input's. "Output size is too small" when one is below
 * 1; TSTOR_EOVERFLOW for arguments or input sizes from 2^31. */
TSTOR_EXTERN int tstor_layout_max_pool2d(const tstor_layout *input, const tstor_pool_params *p,
                                         tstor_layout *out);
TSTOR_EXTERN int tstor_layout_avg_pool2d(const tstor_layout *input, const tstor_pool_params *p,
                                         tstor_layout *out);
/* Tensor forms; *out is a new reference. */
TSTOR_EXTERN int tstor_shape_max_pool2d(const tstor_tensor *input, const tstor_pool_params *p,
                                        tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_avg_pool2d(const tstor_tensor *input, const tstor_pool_params *p,
                                        tstor_tensor **out);

/* -------------------------------------------------------- adaptive pooling */

/* adaptive_avg_pool2d / adaptive_max_pool2d of input (N, C, H, W) or (C, H, W)
 * to output_size {oh, ow} (>= 0; PyTorch's None is the input's own size, pass
 * it): the input's sizes with H and W replaced.
 *   adaptive_avg_pool2d: in the input's suggested memory format (channels-last
 *     or contiguous), as torch 2.x's meta kernel makes it, and H
 *     and W must not be empty; except for output size {1, 1}, which PyTorch
 *     computes as mean(-1, -2, keepdim): channels-last for a channels-last
 *     input, and no emptiness check.
 *   adaptive_max_pool2d: in the input's memory format (channels-last or
 *     contiguous), every dimension but the batch non-empty; also the int64
 *     indices, of the output's layout (indices may be NULL where they are not
 *     wanted). */
TSTOR_EXTERN int tstor_layout_adaptive_avg_pool2d(const tstor_layout *input,
                                                  const int64_t output_size[2],
                                                  tstor_layout *out);
TSTOR_EXTERN int tstor_layout_adaptive_max_pool2d(const tstor_layout *input,
                                                  const int64_t output_size[2],
                                                  tstor_layout *out, tstor_layout *indices);
/* Tensor forms; *out (and *indices, when not NULL) are new references. */
TSTOR_EXTERN int tstor_shape_adaptive_avg_pool2d(const tstor_tensor *input,
                                                 const int64_t output_size[2], tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_adaptive_max_pool2d(const tstor_tensor *input,
                                                 const int64_t output_size[2], tstor_tensor **out,
                                                 tstor_tensor **indices);

/* -------------------------------------------------------------- activations */

/* The activation functions of torch.nn.functional, each with its own dtype
 * rule from torch 2.15 (checked against its meta and cpu kernels). The
 * output has the input's shape and the strides tstor_layout_elementwise gives
 * one tensor, as torch 2.x's meta device does. */
typedef enum tstor_activation {
  TSTOR_ACT_RELU = 0,       /* keeps the dtype */
  TSTOR_ACT_RELU6 = 1,      /* hardtanh(0, 6): keeps; refuses bool */
  TSTOR_ACT_GELU = 2,       /* keeps the dtype */
  TSTOR_ACT_SILU = 3,       /* keeps the dtype */
  TSTOR_ACT_SIGMOID = 4,    /* bool and integers give float32 */
  TSTOR_ACT_TANH = 5,       /* bool and integers give float32 */
  TSTOR_ACT_HARDSWISH = 6,  /* keeps the dtype */
  TSTOR_ACT_HARDSIGMOID = 7 /* keeps the dtype */
} tstor_activation;

TSTOR_EXTERN int tstor_layout_activation(tstor_activation act, const tstor_layout *in,
                                         tstor_layout *out);
/* Tensor form; *out is a new reference. */
TSTOR_EXTERN int tstor_shape_activation(tstor_activation act, const tstor_tensor *in,
                                        tstor_tensor **out);

/* F.dropout(in, p, training): p in [0, 1] (TSTOR_EINVAL otherwise, as
 * PyTorch's ValueError). Training, the output is a new tensor of the input's
 * shape and dtype (floating or complex only: "result type Float can't be cast
 * to the desired output type Long") with TensorIterator's strides; not
 * training, PyTorch returns the input itself, and so does the tensor form (a
 * new reference to `in`), while the layout form copies in's layout. */
TSTOR_EXTERN int tstor_layout_dropout(const tstor_layout *in, double p, int training,
                                      tstor_layout *out);
TSTOR_EXTERN int tstor_shape_dropout(const tstor_tensor *in, double p, int training,
                                     tstor_tensor **out);

/* ---------------------------------------------------------- normalization */

/* F.batch_norm(input, running_mean, running_var, weight, bias, training):
 * input (N, C, ...) with 2 to TSTOR_TENSOR_MAX_DIM dimensions; each of the
 * four vectors NULL or with C elements (running_mean and running_var are
 * required when not training); each of the input's floating dtype, or
 * float32 beside a float16 or bfloat16 input (TSTOR_EDTYPE otherwise).
 * Training needs more than one value per channel.
 * The output has the input's sizes and dtype, in the input's layout where that
 * is dense (channels-last stays channels-last), contiguous otherwise. */
TSTOR_EXTERN int tstor_layout_batch_norm(const tstor_layout *input,
                                         const tstor_layout *running_mean,
                                         const tstor_layout *running_var,
                                         const tstor_layout *weight, const tstor_layout *bias,
                                         int training, tstor_layout *out);

/* F.layer_norm(input, normalized_shape, weight, bias): normalized_shape (ndims
 * >= 1 sizes) must be the input's last dimensions; weight and bias NULL or of
 * exactly that shape. The output is contiguous with the input's sizes and
 * dtype. */
TSTOR_EXTERN int tstor_layout_layer_norm(const tstor_layout *input, int ndims,
                                         const int64_t *normalized_shape,
                                         const tstor_layout *weight, const tstor_layout *bias,
                                         tstor_layout *out);

/* F.group_norm(input, groups, weight, bias): input (N, C, ...) with C
 * divisible by groups, weight and bias NULL or (C). The output has the input's
 * sizes and dtype, in its suggested memory format (torch 2.x). */
TSTOR_EXTERN int tstor_layout_group_norm(const tstor_layout *input, int64_t groups,
                                         const tstor_layout *weight, const tstor_layout *bias,
                                         tstor_layout *out);

/* Tensor forms; *out is a new reference. Every optional tensor may be NULL. */
TSTOR_EXTERN int tstor_shape_batch_norm(const tstor_tensor *input,
                                        const tstor_tensor *running_mean,
                                        const tstor_tensor *running_var,
                                        const tstor_tensor *weight, const tstor_tensor *bias,
                                        int training, tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_layer_norm(const tstor_tensor *input, int ndims,
                                        const int64_t *normalized_shape,
                                        const tstor_tensor *weight, const tstor_tensor *bias,
                                        tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_group_norm(const tstor_tensor *input, int64_t groups,
                                        const tstor_tensor *weight, const tstor_tensor *bias,
                                        tstor_tensor **out);

/* -------------------------------------------------------------------- where */

/* torch.where(cond, a, b): cond a bool tensor ("where expected condition to
 * be a boolean tensor"), the three broadcast together, the dtype a and b
 * promote to (tstor_result_type, so a zero-dim b counts by category only),
 * strides as PyTorch's elementwise reference orders them. */
TSTOR_EXTERN int tstor_layout_where(const tstor_layout *cond, const tstor_layout *a,
                                    const tstor_layout *b, tstor_layout *out);
/* Tensor form; *out is a new reference. */
TSTOR_EXTERN int tstor_shape_where(const tstor_tensor *cond, const tstor_tensor *a,
                                   const tstor_tensor *b, tstor_tensor **out);

/* ------------------------------------------------------ indexing and softmax */

/* embedding: weight (num, dim) and int32/int64 indices of any shape give
 * indices' shape plus (dim), weight's dtype, contiguous.
 * index_select: `in` with dimension dim replaced by the number of entries of a
 * 1-d or zero-dim int32/int64 index (exactly one entry for a zero-dim `in`),
 * contiguous.
 * softmax: in's sizes and dtype along dim, contiguous. */
TSTOR_EXTERN int tstor_layout_embedding(const tstor_layout *weight, const tstor_layout *indices,
                                        tstor_layout *out);
TSTOR_EXTERN int tstor_layout_index_select(const tstor_layout *in, int64_t dim,
                                           const tstor_layout *index, tstor_layout *out);
TSTOR_EXTERN int tstor_layout_softmax(const tstor_layout *in, int64_t dim, tstor_layout *out);
/* Tensor forms; *out is a new reference. */
TSTOR_EXTERN int tstor_shape_embedding(const tstor_tensor *weight, const tstor_tensor *indices,
                                       tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_index_select(const tstor_tensor *in, int64_t dim,
                                          const tstor_tensor *index, tstor_tensor **out);
TSTOR_EXTERN int tstor_shape_softmax(const tstor_tensor *in, int64_t dim, tstor_tensor **out);

/* softmax with PyTorch's dtype= argument: the input taken as converted to
 * `dtype`, which is the output's. The tensor form's *out is a new reference. */
TSTOR_EXTERN int tstor_layout_softmax_dtype(const tstor_layout *in, int64_t dim,
                                            tstor_dtype dtype, tstor_layout *out);
TSTOR_EXTERN int tstor_shape_softmax_dtype(const tstor_tensor *in, int64_t dim,
                                           tstor_dtype dtype, tstor_tensor **out);

#ifdef __cplusplus
}
#endif

#endif
