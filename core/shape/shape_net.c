/* Shape inference for what networks are built of besides convolutions and
 * products: activations, dropout, batch/layer/group normalization, adaptive
 * pooling and where. Each follows what PyTorch 1.13's meta device returns,
 * and refuses what its meta or cpu kernels refuse (tests/vectors/shapes.txt).
 * Two ordering rules meet here: TensorIterator's (shape.c, through
 * tstor_layout_elementwise) and that of PyTorch's Python references
 * (torch/_prims_common compute_elementwise_output_strides), which the meta
 * kernels of relu and where are. */
#include "shape/shape_internal.h"

#include <stdio.h>
#include <string.h>

static int check_optional(const tstor_layout *l, const char *what) {
  return l ? tstor__check_layout(l, what) : 0;
}

static int is_quantized(tstor_dtype d) {
  return tstor_dtype_info_of(d)->kind == TSTOR_KIND_QUANTIZED;
}

/* empty_like(preserve_format): a dense input's own strides, otherwise dense
 * strides in the input's order. */
static void empty_like(const tstor_layout *in, tstor_layout *out) {
  tstor__layout_copy(out, in);
  if (!tstor__non_overlapping_and_dense(in->ndim, in->sizes, in->strides))
    tstor__infer_dense_strides(in->ndim, in->sizes, in->strides, out->strides);
}

/* ------------------------------------------------- the references' order */

/* The strides of PyTorch's compute_elementwise_output_strides for n layouts
 * of one shape (broadcast dimensions with stride 0): the dimensions sorted,
 * outermost first, by Python's sorted(..., key=cmp_to_key(cmp),
 * reverse=True), then laid out densely. The comparison is not a strict order
 * (a zero stride skips a tensor), so the result depends on the sorting
 * algorithm; this is CPython's for fewer than 64 items (a run, then binary
 * insertion), on the reversed list as its reverse=True does. At exactly 64
 * dimensions CPython would sort two runs and merge them; the insertion agrees
 * with that wherever the comparison is consistent. */
typedef struct {
  int n;
  const tstor_layout *in;
} refs_order;

/* cmp(a, b) < 0: dimension a is inner to b */
static int refs_cmp(const refs_order *o, int a, int b) {
  const int64_t *shape = o->in[0].sizes;
  for (int k = 0; k < o->n; k++) {
    int64_t sa = o->in[k].strides[a], sb = o->in[k].strides[b];
    if (sa == 0 || sb == 0) continue;
    if (sa < sb) return -1;
    if (sa > sb) return 1;
    if (shape[a] > shape[b]) return 1;
    if (shape[a] < shape[b]) return -1;
  }
  return 0;
}

static void refs_strides(int n, const tstor_layout *in, int64_t *strides) {
  int nd = in[0].ndim;
  if (nd <= 1) {
    if (nd == 1) strides[0] = 1;
    return;
  }
  refs_order o = {n, in};
  int v[TSTOR_TENSOR_MAX_DIM];
  for (int i = 0; i < nd; i++) v[i] = nd - 1 - i; /* reverse=True reverses first */
  /* the first run: strictly descending (then reversed) or non-descending */
  int run = 2;
  if (refs_cmp(&o, v[1], v[0]) < 0) {
    while (run < nd && refs_cmp(&o, v[run], v[run - 1]) < 0) run++;
    for (int i = 0, j = run - 1; i < j; i++, j--) {
      int t = v[i];
      v[i] = v[j];
      v[j] = t;
    }
  } else {
    while (run < nd && !(refs_cmp(&o, v[run], v[run - 1]) < 0)) run++;
  }
  /* binary insertion of the rest */
  for (int start = run; start < nd; start++) {
    int pivot = v[start], l = 0, r = start;
    while (l < r) {
      int p = l + ((r - l) >> 1);
      if (refs_cmp(&o, pivot, v[p]) < 0) r = p;
      else l = p + 1;
    }
    memmove(v + l + 1, v + l, sizeof(int) * (size_t)(start - l));
    v[l] = pivot;
  }
  /* ascending now; reversed, v[nd-1] is the outermost: lay out innermost first */
  int64_t acc = 1;
  for (int i = 0; i < nd; i++) {
    int d = v[i];
    strides[d] = acc;
    if (in[0].sizes[d] != 0) acc = tstor__mul_wrap(acc, in[0].sizes[d]);
  }
}

/* l expanded to the ndim/sizes it broadcasts to: stride 0 where it is
 * stretched or missing. */
static void expand_to(const tstor_layout *l, int ndim, const int64_t *sizes, tstor_layout *out) {
  int off = ndim - l->ndim;
  out->dtype = l->dtype;
  out->ndim = ndim;
  for (int d = 0; d < ndim; d++) {
    out->sizes[d] = sizes[d];
    if (d < off) out->strides[d] = 0;
    else out->strides[d] = l->sizes[d - off] == sizes[d] ? l->strides[d - off] : 0;
  }
}

/* ------------------------------------------------------------ activations */

static const char *const activation_names[] = {"relu", "relu6", "gelu", "silu", "sigmoid",
                                               "tanh", "hardswish", "hardsigmoid"};

int tstor_layout_activation(tstor_activation act, const tstor_layout *in, tstor_layout *out) {
  int rc;
  if ((unsigned)act > TSTOR_ACT_HARDSIGMOID)
    return tstor__err(TSTOR_EINVAL, "activation: unknown activation %d", (int)act);
  const char *name = activation_names[act];
  if ((rc = tstor__check_layout(in, name)) < 0) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "%s: out is NULL", name);
  if (is_quantized(in->dtype))
    return tstor__err(TSTOR_EDTYPE, "%s: quantized %s is not supported", name,
                      tstor_dtype_name(in->dtype));
  int cat = tstor__dtype_category(in->dtype);
  if (cat == 3 && (act == TSTOR_ACT_RELU || act == TSTOR_ACT_RELU6 || act == TSTOR_ACT_HARDSWISH))
    return tstor__err(TSTOR_EDTYPE, "clamp is not supported for complex types");
  if (cat == 0 && act == TSTOR_ACT_RELU)
    return tstor__err(TSTOR_EDTYPE, "Boolean inputs not supported for relu");
  if (cat == 0 && act == TSTOR_ACT_RELU6)
    return tstor__err(TSTOR_EDTYPE, "Bool inputs not supported for hardtanh");
  tstor_elementwise_rule rule = act == TSTOR_ACT_SIGMOID || act == TSTOR_ACT_TANH
                                    ? TSTOR_ELEMENTWISE_FLOAT
                                    : TSTOR_ELEMENTWISE_PROMOTE;
  if (act != TSTOR_ACT_RELU) return tstor_layout_elementwise(rule, 1, in, 0, NULL, out);
  /* relu's meta kernel is where(le(a, 0), 0, a), whose prim orders the
   * operands a (the number 0, no tensor), b (the input), then the predicate
   * (the comparison, with TensorIterator's layout) */
  tstor_layout ops[2];
  tstor_dtype zero = TSTOR_INT64;
  tstor__layout_copy(&ops[0], in);
  if ((rc = tstor_layout_elementwise(TSTOR_ELEMENTWISE_BOOL, 1, in, 1, &zero, &ops[1])) < 0)
    return rc;
  tstor_layout r;
  tstor__layout_copy(&r, in);
  refs_strides(2, ops, r.strides);
  tstor__layout_copy(out, &r);
  return 0;
}

int tstor_layout_dropout(const tstor_layout *in, double p, int training, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(in, "dropout")) < 0) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "dropout: out is NULL");
  if (!(p >= 0.0 && p <= 1.0))
    return tstor__err(TSTOR_EINVAL, "dropout probability has to be between 0 and 1, but got %g", p);
  if (!training) {
    tstor__layout_copy(out, in);
    return 0;
  }
  /* input * empty_like(input).bernoulli_(1 - p).div_(1 - p): the in-place
   * division by a float refuses what cannot hold one */
  int cat = tstor__dtype_category(in->dtype);
  if (cat < 2 || is_quantized(in->dtype))
    return tstor__err(TSTOR_EDTYPE, "result type Float can't be cast to the desired output type %s",
                      tstor_dtype_info_of(in->dtype)->scalar_type);
  tstor_layout ops[2];
  tstor__layout_copy(&ops[0], in);
  empty_like(in, &ops[1]);
  return tstor_layout_elementwise(TSTOR_ELEMENTWISE_PROMOTE, 2, ops, 0, NULL, out);
}

/* ---------------------------------------------------------- normalization */

/* "torch.Size([1, 3])" */
static const char *torch_size_str(char *buf, size_t size, int n, const int64_t *v) {
  char dims[TSTOR__SHAPE_STR_MAX];
  snprintf(buf, size, "torch.Size(%s)", tstor__dims_str(dims, sizeof dims, n, v));
  return buf;
}

/* F.batch_norm and F.group_norm's _verify_batch_size: one value per channel
 * cannot be normalised in training. */
static int verify_batch_size(int n, const int64_t *sizes, int torch_size) {
  int64_t prod = sizes[0];
  for (int i = 2; i < n; i++) prod *= sizes[i];
  if (prod != 1) return 0;
  char s[TSTOR__SHAPE_STR_MAX + 16];
  if (torch_size) torch_size_str(s, sizeof s, n, sizes);
  else tstor__dims_str(s, sizeof s, n, sizes);
  return tstor__err(TSTOR_EINVAL, "Expected more than 1 value per channel when training, got input "
                    "size %s", s);
}

/* A parameter's dtype: the input's, or float32 beside a float16 or bfloat16
 * input (PyTorch's mixed precision). */
static int param_dtype(const char *op, const char *what, const tstor_layout *p, tstor_dtype in) {
  if (!p || p->dtype == in) return 0;
  if (p->dtype == TSTOR_FLOAT32 && (in == TSTOR_FLOAT16 || in == TSTOR_BFLOAT16)) return 0;
  return tstor__err(TSTOR_EDTYPE, "%s: %s is %s and the input %s: expected the input's dtype "
                    "(or float32 beside float16 and bfloat16)", op, what,
                    tstor_dtype_name(p->dtype), tstor_dtype_name(in));
}

static int floating_input(const char *op, const tstor_layout *in) {
  if (tstor__dtype_category(in->dtype) != 2 || is_quantized(in->dtype))
    return tstor__err(TSTOR_EDTYPE, "%s: input is %s, expected a floating dtype", op,
                      tstor_dtype_name(in->dtype));
  return 0;
}

/* out * p[0], the empty-input path's use of a weight or bias: the vector's
 * first element as a zero-dim operand. */
static int times_first(tstor_layout *out, const tstor_layout *p) {
  if (p->ndim == 0) return tstor__err(TSTOR_ERANGE, "select() cannot be applied to a 0-dim tensor.");
  if (p->sizes[0] == 0)
    return tstor__err(TSTOR_ERANGE, "select(): index 0 out of range for tensor of size [0] at "
                      "dimension 0");
  tstor_layout ops[2];
  tstor__layout_copy(&ops[0], out);
  ops[1].dtype = p->dtype;
  ops[1].ndim = p->ndim - 1;
  memcpy(ops[1].sizes, p->sizes + 1, sizeof(int64_t) * (size_t)ops[1].ndim);
  memcpy(ops[1].strides, p->strides + 1, sizeof(int64_t) * (size_t)ops[1].ndim);
  return tstor_layout_elementwise(TSTOR_ELEMENTWISE_PROMOTE, 2, ops, 0, NULL, out);
}

static int features_match(const char *what, int64_t c, const tstor_layout *p) {
  int64_t n = tstor_layout_numel(p);
  if (n == c) return 0;
  return tstor__err(TSTOR_EINVAL, "%s should contain %lld elements not %lld", what, (long long)c,
                    (long long)n);
}

int tstor_layout_batch_norm(const tstor_layout *input, const tstor_layout *running_mean,
                            const tstor_layout *running_var, const tstor_layout *weight,
                            const tstor_layout *bias, int training, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(input, "batch_norm: input")) < 0 ||
      (rc = check_optional(running_mean, "batch_norm: running_mean")) < 0 ||
      (rc = check_optional(running_var, "batch_norm: running_var")) < 0 ||
      (rc = check_optional(weight, "batch_norm: weight")) < 0 ||
      (rc = check_optional(bias, "batch_norm: bias")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "batch_norm: out is NULL");
  if (input->ndim < 2) {
    char a[TSTOR__SHAPE_STR_MAX];
    return tstor__err(TSTOR_EINVAL, "batch_norm: expected an input (N, C, ...) of 2 dimensions or "
                      "more, got %s", tstor__dims_str(a, sizeof a, input->ndim, input->sizes));
  }
  if ((rc = floating_input("batch_norm", input)) < 0 ||
      (rc = param_dtype("batch_norm", "running_mean", running_mean, input->dtype)) < 0 ||
      (rc = param_dtype("batch_norm", "running_var", running_var, input->dtype)) < 0 ||
      (rc = param_dtype("batch_norm", "weight", weight, input->dtype)) < 0 ||
      (rc = param_dtype("batch_norm", "bias", bias, input->dtype)) < 0)
    return rc;
  if (training && (rc = verify_batch_size(input->ndim, input->sizes, 1)) < 0) return rc;
  tstor_layout r;
  empty_like(input, &r);
  if (tstor_layout_numel(input) == 0) {
    /* PyTorch skips the checks for an empty input: clone(), times weight[0],
     * plus bias[0] */
    if ((weight && (rc = times_first(&r, weight)) < 0) || (bias && (rc = times_first(&r, bias)) < 0))
      return rc;
    tstor__layout_copy(out, &r);
    return 0;
  }
  int64_t c = input->sizes[1];
  if (running_mean) {
    if ((rc = features_match("running_mean", c, running_mean)) < 0) return rc;
  } else if (!training) {
    return tstor__err(TSTOR_EINVAL, "running_mean must be defined in evaluation mode");
  }
  if (running_var) {
    if ((rc = features_match("running_var", c, running_var)) < 0) return rc;
  } else if (!training) {
    return tstor__err(TSTOR_EINVAL, "running_var must be defined in evaluation mode");
  }
  if ((weight && (rc = features_match("weight", c, weight)) < 0) ||
      (bias && (rc = features_match("bias", c, bias)) < 0))
    return rc;
  tstor__layout_copy(out, &r);
  return 0;
}

/* layer_norm's and group_norm's output, once their shapes are checked: the
 * dtypes checked, the input's sizes and dtype, contiguous. */
static int norm_output(const char *op, const tstor_layout *input, const tstor_layout *weight,
                       const tstor_layout *bias, tstor_layout *out) {
  int rc;
  if ((rc = floating_input(op, input)) < 0 || (rc = param_dtype(op, "weight", weight, input->dtype)) < 0 ||
      (rc = param_dtype(op, "bias", bias, input->dtype)) < 0)
    return rc;
  tstor_layout r;
  tstor__layout_copy(&r, input);
  tstor__layout_contiguous(&r);
  tstor__layout_copy(out, &r);
  return 0;
}

/* "[4, 3]" as PyTorch prints an IntArrayRef */
#define DIMS(buf, n, v) tstor__dims_str(buf, sizeof buf, (n), (v))

static int same_shape(const tstor_layout *p, int n, const int64_t *shape) {
  return p->ndim == n && memcmp(p->sizes, shape, sizeof(int64_t) * (size_t)n) == 0;
}

int tstor_layout_layer_norm(const tstor_layout *input, int ndims, const int64_t *normalized_shape,
                            const tstor_layout *weight, const tstor_layout *bias,
                            tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(input, "layer_norm: input")) < 0 ||
      (rc = check_optional(weight, "layer_norm: weight")) < 0 ||
      (rc = check_optional(bias, "layer_norm: bias")) < 0)
    return rc;
  if (!out || ndims < 0 || ndims > TSTOR_TENSOR_MAX_DIM || (ndims && !normalized_shape))
    return tstor__err(TSTOR_EINVAL, "layer_norm: bad arguments");
  char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
  if (ndims < 1)
    return tstor__err(TSTOR_EINVAL, "Expected normalized_shape to be at least 1-dimensional, i.e., "
                      "containing at least one element, but got normalized_shape = []");
  if (weight && !same_shape(weight, ndims, normalized_shape))
    return tstor__err(TSTOR_EINVAL, "Expected weight to be of same shape as normalized_shape, but "
                      "got weight of shape %s and normalized_shape = %s",
                      DIMS(a, weight->ndim, weight->sizes), DIMS(b, ndims, normalized_shape));
  if (bias && !same_shape(bias, ndims, normalized_shape))
    return tstor__err(TSTOR_EINVAL, "Expected bias to be of same shape as normalized_shape, but "
                      "got bias of shape %s and normalized_shape = %s",
                      DIMS(a, bias->ndim, bias->sizes), DIMS(b, ndims, normalized_shape));
  if (input->ndim < ndims ||
      memcmp(input->sizes + input->ndim - ndims, normalized_shape, sizeof(int64_t) * (size_t)ndims)) {
    char c[TSTOR__SHAPE_STR_MAX + 8];
    /* "[*, 3, 4]" */
    snprintf(c, sizeof c, "[*, %s", DIMS(a, ndims, normalized_shape) + 1);
    return tstor__err(TSTOR_EINVAL, "Given normalized_shape=%s, expected input with shape %s, but "
                      "got input of size%s", DIMS(a, ndims, normalized_shape), c,
                      DIMS(b, input->ndim, input->sizes));
  }
  return norm_output("layer_norm", input, weight, bias, out);
}

int tstor_layout_group_norm(const tstor_layout *input, int64_t groups, const tstor_layout *weight,
                            const tstor_layout *bias, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(input, "group_norm: input")) < 0 ||
      (rc = check_optional(weight, "group_norm: weight")) < 0 ||
      (rc = check_optional(bias, "group_norm: bias")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "group_norm: out is NULL");
  char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
  int d;
  if ((rc = tstor__shape_wrap_dim(1, input->ndim, &d)) < 0) return rc; /* F.group_norm's size(1) */
  if (groups <= 0)
    return tstor__err(TSTOR_EINVAL, "group_norm: num_groups must be positive, got %lld",
                      (long long)groups);
  int64_t n = input->sizes[0], c = input->sizes[1];
  /* F.group_norm's _verify_batch_size over [N * C / G, G, ...] */
  int64_t as_batch[TSTOR_TENSOR_MAX_DIM];
  memcpy(as_batch, input->sizes, sizeof(int64_t) * (size_t)input->ndim);
  as_batch[0] = n * c / groups;
  as_batch[1] = groups;
  if ((rc = verify_batch_size(input->ndim, as_batch, 0)) < 0) return rc;
  if (c % groups != 0)
    return tstor__err(TSTOR_EINVAL, "Expected number of channels in input to be divisible by "
                      "num_groups, but got input of shape %s and num_groups=%lld",
                      DIMS(a, input->ndim, input->sizes), (long long)groups);
  const tstor_layout *ps[2] = {weight, bias};
  for (int i = 0; i < 2; i++)
    if (ps[i] && (ps[i]->ndim != 1 || ps[i]->sizes[0] != c))
      return tstor__err(TSTOR_EINVAL, "Expected %s to be a vector of size equal to the number of "
                        "channels in input, but got %s of shape %s and input of shape %s",
                        i ? "bias" : "weight", i ? "bias" : "weight",
                        DIMS(a, ps[i]->ndim, ps[i]->sizes), DIMS(b, input->ndim, input->sizes));
  return norm_output("group_norm", input, weight, bias, out);
}

/* -------------------------------------------------------- adaptive pooling */

/* F.adaptive_*_pool2d take their output sizes as (H, W) of an input with
 * at least 3 dimensions. */
static int adaptive_args(const char *name, const tstor_layout *in, const int64_t *size,
                         const tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(in, name)) < 0) return rc;
  if (!out || !size) return tstor__err(TSTOR_EINVAL, "%s: bad arguments", name);
  if (in->ndim < 3) return tstor__err(TSTOR_EINVAL, "Input dimension should be at least 3");
  return 0;
}

int tstor_layout_adaptive_avg_pool2d(const tstor_layout *input, const int64_t output_size[2],
                                     tstor_layout *out) {
  int rc;
  char a[TSTOR__SHAPE_STR_MAX];
  if ((rc = adaptive_args("adaptive_avg_pool2d", input, output_size, out)) < 0) return rc;
  if (output_size[0] < 0 || output_size[1] < 0)
    return tstor__err(TSTOR_EINVAL, "adaptive_avg_pool2d: elements of output_size must be greater "
                      "than or equal to 0 but received {%lld, %lld}", (long long)output_size[0],
                      (long long)output_size[1]);
  tstor_layout r;
  if (output_size[0] == 1 && output_size[1] == 1 && !is_quantized(input->dtype)) {
    /* PyTorch computes this one as mean(-1, -2, keepdim), restrided to
     * channels-last for a channels-last input */
    const int64_t dims[2] = {-1, -2};
    if ((rc = tstor_layout_reduce(TSTOR_REDUCE_MEAN, input, 2, dims, 1, &r)) < 0) return rc;
    if (input->ndim == 4 && tstor_layout_memory_format(input) == TSTOR_MEMORY_CHANNELS_LAST) {
      int64_t c = input->sizes[1];
      r.strides[0] = c;
      r.strides[1] = 1;
      r.strides[2] = r.strides[3] = c;
    }
    tstor__layout_copy(out, &r);
    return 0;
  }
  int nd = input->ndim;
  for (int i = nd - 2; i < nd; i++)
    if (input->sizes[i] == 0)
      return tstor__err(TSTOR_EINVAL, "adaptive_avg_pool2d(): Expected input to have non-zero size "
                        "for non-batch dimensions, but input has sizes %s with dimension %d being "
                        "empty", DIMS(a, nd, input->sizes), i);
  if (nd != 3 && nd != 4)
    return tstor__err(TSTOR_EINVAL, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got %s",
                      DIMS(a, nd, input->sizes));
  /* the meta kernel's new_empty: contiguous whatever the input */
  tstor__layout_copy(&r, input);
  r.sizes[nd - 2] = output_size[0];
  r.sizes[nd - 1] = output_size[1];
  tstor__layout_contiguous(&r);
  uint64_t nbytes;
  if ((rc = tstor_layout_bytes(&r, &nbytes)) < 0) return rc;
  tstor__layout_copy(out, &r);
  return 0;
}

int tstor_layout_adaptive_max_pool2d(const tstor_layout *input, const int64_t output_size[2],
                                     tstor_layout *out, tstor_layout *indices) {
  int rc;
  char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
  if ((rc = adaptive_args("adaptive_max_pool2d", input, output_size, out)) < 0) return rc;
  int nd = input->ndim;
  if (nd != 3 && nd != 4)
    return tstor__err(TSTOR_EINVAL, "adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: %s",
                      DIMS(a, nd, input->sizes));
  for (int i = 1; i < nd; i++)
    if (input->sizes[i] == 0)
      return tstor__err(TSTOR_EINVAL, "adaptive_max_pool2d(): Expected input to have non-zero size "
                        "for non-batch dimensions, but input has sizes %s with dimension %d being "
                        "empty", DIMS(a, nd, input->sizes), i);
  tstor_layout r;
  tstor__layout_copy(&r, input);
  r.sizes[nd - 2] = output_size[0];
  r.sizes[nd - 1] = output_size[1];
  if (output_size[0] < 0 || output_size[1] < 0)
    return tstor__err(TSTOR_EINVAL, "Trying to create tensor with negative dimension %lld: %s",
                      (long long)(output_size[0] < 0 ? output_size[0] : output_size[1]),
                      DIMS(b, nd, r.sizes));
  tstor_layout_restride(&r, nd == 4 ? tstor_layout_memory_format(input) : TSTOR_MEMORY_CONTIGUOUS);
  uint64_t nbytes;
  if ((rc = tstor_layout_bytes(&r, &nbytes)) < 0) return rc;
  if (indices) {
    tstor__layout_copy(indices, &r);
    indices->dtype = TSTOR_INT64;
  }
  tstor__layout_copy(out, &r);
  return 0;
}

/* -------------------------------------------------------------------- where */

int tstor_layout_where(const tstor_layout *cond, const tstor_layout *a, const tstor_layout *b,
                       tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(cond, "where: condition")) < 0 || (rc = tstor__check_layout(a, "where: a")) < 0 ||
      (rc = tstor__check_layout(b, "where: b")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "where: out is NULL");
  if (cond->dtype != TSTOR_BOOL)
    return tstor__err(TSTOR_EDTYPE, "where expected condition to be a boolean tensor, but got a "
                      "tensor with dtype %s", tstor_dtype_info_of(cond->dtype)->scalar_type);
  tstor_operand ops[2] = {
      {a->dtype, a->ndim ? TSTOR_OPERAND_TENSOR : TSTOR_OPERAND_ZERO_DIM},
      {b->dtype, b->ndim ? TSTOR_OPERAND_TENSOR : TSTOR_OPERAND_ZERO_DIM}};
  tstor_dtype dtype;
  if ((rc = tstor_result_type(2, ops, &dtype)) < 0) return rc;
  int nds[3] = {cond->ndim, a->ndim, b->ndim};
  const int64_t *szs[3] = {cond->sizes, a->sizes, b->sizes};
  tstor_layout r;
  if ((rc = tstor_broadcast_shapes(3, nds, szs, &r.ndim, r.sizes)) < 0) return rc;
  /* the prim's order: a, b, then the condition */
  tstor_layout ex[3];
  expand_to(a, r.ndim, r.sizes, &ex[0]);
  expand_to(b, r.ndim, r.sizes, &ex[1]);
  expand_to(cond, r.ndim, r.sizes, &ex[2]);
  r.dtype = dtype;
  refs_strides(3, ex, r.strides);
  uint64_t nbytes;
  if ((rc = tstor_layout_bytes(&r, &nbytes)) < 0) return rc;
  tstor__layout_copy(out, &r);
  return 0;
}

/* ------------------------------------------------------------ tensor forms */

/* The tensor forms share tstor__shape_layouts/_finish; what is left is each
 * op's own public signature, as in shape.c and shape_ops.c. */

int tstor_shape_activation(tstor_activation act, const tstor_tensor *in, tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_activation: out is NULL");
  *out = NULL;
  tstor_layout l, r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(1, &in, &l, &ctx, &dev);
  if (rc == 0) rc = tstor_layout_activation(act, &l, &r);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

int tstor_shape_dropout(const tstor_tensor *in, double p, int training, tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_dropout: out is NULL");
  *out = NULL;
  tstor_layout l, r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(1, &in, &l, &ctx, &dev);
  if (rc == 0) rc = tstor_layout_dropout(&l, p, training, &r);
  if (rc == 0 && !training) { /* PyTorch returns the input itself */
    *out = tstor_tensor_retain((tstor_tensor *)in);
    return 0;
  }
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

int tstor_shape_batch_norm(const tstor_tensor *input, const tstor_tensor *running_mean,
                           const tstor_tensor *running_var, const tstor_tensor *weight,
                           const tstor_tensor *bias, int training, tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_batch_norm: out is NULL");
  *out = NULL;
  if (!input) return tstor__err(TSTOR_EINVAL, "shape_batch_norm: NULL input");
  const tstor_tensor *ts[5] = {input, running_mean, running_var, weight, bias};
  tstor_layout l[5], r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(5, ts, l, &ctx, &dev);
  if (rc == 0)
    rc = tstor_layout_batch_norm(&l[0], running_mean ? &l[1] : NULL, running_var ? &l[2] : NULL,
                                 weight ? &l[3] : NULL, bias ? &l[4] : NULL, training, &r);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

int tstor_shape_layer_norm(const tstor_tensor *input, int ndims, const int64_t *normalized_shape,
                           const tstor_tensor *weight, const tstor_tensor *bias,
                           tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_layer_norm: out is NULL");
  *out = NULL;
  if (!input) return tstor__err(TSTOR_EINVAL, "shape_layer_norm: NULL input");
  const tstor_tensor *ts[3] = {input, weight, bias};
  tstor_layout l[3], r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(3, ts, l, &ctx, &dev);
  if (rc == 0)
    rc = tstor_layout_layer_norm(&l[0], ndims, normalized_shape, weight ? &l[1] : NULL,
                                 bias ? &l[2] : NULL, &r);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

int tstor_shape_group_norm(const tstor_tensor *input, int64_t groups, const tstor_tensor *weight,
                           const tstor_tensor *bias, tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_group_norm: out is NULL");
  *out = NULL;
  if (!input) return tstor__err(TSTOR_EINVAL, "shape_group_norm: NULL input");
  const tstor_tensor *ts[3] = {input, weight, bias};
  tstor_layout l[3], r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(3, ts, l, &ctx, &dev);
  if (rc == 0)
    rc = tstor_layout_group_norm(&l[0], groups, weight ? &l[1] : NULL, bias ? &l[2] : NULL, &r);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

int tstor_shape_adaptive_avg_pool2d(const tstor_tensor *input, const int64_t output_size[2],
                                    tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_adaptive_avg_pool2d: out is NULL");
  *out = NULL;
  tstor_layout l, r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(1, &input, &l, &ctx, &dev);
  if (rc == 0) rc = tstor_layout_adaptive_avg_pool2d(&l, output_size, &r);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

int tstor_shape_adaptive_max_pool2d(const tstor_tensor *input, const int64_t output_size[2],
                                    tstor_tensor **out, tstor_tensor **indices) {
  if (indices) *indices = NULL;
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_adaptive_max_pool2d: out is NULL");
  *out = NULL;
  tstor_layout l, r, ri;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(1, &input, &l, &ctx, &dev);
  if (rc == 0) rc = tstor_layout_adaptive_max_pool2d(&l, output_size, &r, &ri);
  if (rc == 0 && indices && (rc = tstor_layout_empty(ctx, dev, &ri, indices)) < 0) return rc;
  rc = tstor__shape_finish(rc, ctx, dev, &r, out);
  if (rc < 0 && indices) {
    tstor_tensor_release(*indices);
    *indices = NULL;
  }
  return rc;
}

int tstor_shape_where(const tstor_tensor *cond, const tstor_tensor *a, const tstor_tensor *b,
                      tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_where: out is NULL");
  *out = NULL;
  if (!cond || !a || !b) return tstor__err(TSTOR_EINVAL, "shape_where: NULL tensor");
  const tstor_tensor *ts[3] = {cond, a, b};
  tstor_layout l[3], r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(3, ts, l, &ctx, &dev);
  if (rc == 0) rc = tstor_layout_where(&l[0], &l[1], &l[2], &r);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}
