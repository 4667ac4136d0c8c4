/* The output layout of batch, layer and group normalization, as ATen's
 * Normalization.cpp (and layer_norm.cpp, group_norm.cpp) and the functional
 * wrappers check and compute it: the input's sizes and dtype, with
 * float32 parameters beside float16 and bfloat16 inputs. */
#include "shape/shape_internal.h"

#include <stdio.h>
#include <string.h>

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
  if (torch_size)
    torch_size_str(s, sizeof s, n, sizes);
  else
    tstor__dims_str(s, sizeof s, n, sizes);
  return tstor__err(TSTOR_EINVAL,
                    "Expected more than 1 value per channel when training, got input "
                    "size %s",
                    s);
}

/* A parameter's dtype: the input's, or float32 beside a float16 or bfloat16
 * input (PyTorch's mixed precision). */
static int param_dtype(const char *op, const char *what, const tstor_layout *p, tstor_dtype in) {
  if (!p || p->dtype == in) return 0;
  if (p->dtype == TSTOR_FLOAT32 && (in == TSTOR_FLOAT16 || in == TSTOR_BFLOAT16)) return 0;
  return tstor__err(TSTOR_EDTYPE,
                    "%s: %s is %s and the input %s: expected the input's dtype "
                    "(or float32 beside float16 and bfloat16)",
                    op, what, tstor_dtype_name(p->dtype), tstor_dtype_name(in));
}

static int floating_input(const char *op, const tstor_layout *in) {
  int cat = tstor__dtype_category(in->dtype);
  if (cat < TSTOR__CAT_FLOAT && !tstor__is_quantized(in->dtype)) /* torch 2.x: mean's refusal */
    return tstor__err(TSTOR_EDTYPE,
                      "mean(): could not infer output dtype. Input dtype must be either a "
                      "floating point or complex dtype. Got: torch.%s",
                      tstor_dtype_name(in->dtype));
  if (cat != TSTOR__CAT_FLOAT || tstor__is_quantized(in->dtype))
    return tstor__err(TSTOR_EDTYPE, "%s: input is %s, expected a floating dtype", op,
                      tstor_dtype_name(in->dtype));
  return 0;
}

/* torch 2.x's CPU kernels of layer_norm and group_norm check mixed dtypes
 * first (mixed_data_type.h): where a parameter's dtype is not the input's,
 * every parameter must be float32 and the input float16 or bfloat16. */
static int check_mixed_dtype(const tstor_layout *in, const tstor_layout *weight,
                             const tstor_layout *bias) {
  const tstor_layout *p = weight ? weight : bias;
  if (!p || p->dtype == in->dtype) return 0;
  if ((weight && weight->dtype != TSTOR_FLOAT32) || (bias && bias->dtype != TSTOR_FLOAT32))
    return tstor__err(TSTOR_EDTYPE,
                      "mixed dtype (CPU): expect parameter to have scalar type of Float");
  if (in->dtype != TSTOR_FLOAT16 && in->dtype != TSTOR_BFLOAT16)
    return tstor__err(TSTOR_EDTYPE, "mixed dtype (CPU): all inputs must share same datatype.");
  return 0;
}

/* out * p[0], the empty-input path's use of a weight or bias: the vector's
 * first element as a zero-dim operand. */
static int times_first(tstor_layout *out, const tstor_layout *p) {
  if (p->ndim == 0)
    return tstor__err(TSTOR_ERANGE, "select() cannot be applied to a 0-dim tensor.");
  if (p->sizes[0] == 0)
    return tstor__err(TSTOR_ERANGE,
                      "select(): index 0 out of range for tensor of size [0] at "
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
      (rc = tstor__check_optional(running_mean, "batch_norm: running_mean")) < 0 ||
      (rc = tstor__check_optional(running_var, "batch_norm: running_var")) < 0 ||
      (rc = tstor__check_optional(weight, "batch_norm: weight")) < 0 ||
      (rc = tstor__check_optional(bias, "batch_norm: bias")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "batch_norm: out is NULL");
  if (input->ndim < 2) {
    char a[TSTOR__SHAPE_STR_MAX];
    return tstor__err(TSTOR_EINVAL,
                      "batch_norm: expected an input (N, C, ...) of 2 dimensions or "
                      "more, got %s",
                      tstor__dims_str(a, sizeof a, input->ndim, input->sizes));
  }
  if ((rc = floating_input("batch_norm", input)) < 0 ||
      (rc = param_dtype("batch_norm", "running_mean", running_mean, input->dtype)) < 0 ||
      (rc = param_dtype("batch_norm", "running_var", running_var, input->dtype)) < 0 ||
      (rc = param_dtype("batch_norm", "weight", weight, input->dtype)) < 0 ||
      (rc = param_dtype("batch_norm", "bias", bias, input->dtype)) < 0)
    return rc;
  if (training && (rc = verify_batch_size(input->ndim, input->sizes, 1)) < 0) return rc;
  tstor_layout r;
  tstor__layout_empty_like(input, &r);
  if (tstor_layout_numel(input) == 0) {
    /* PyTorch skips the checks for an empty input: clone(), times weight[0],
     * plus bias[0] */
    if ((weight && (rc = times_first(&r, weight)) < 0) ||
        (bias && (rc = times_first(&r, bias)) < 0))
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
 * dtypes checked, the input's sizes and dtype, contiguous (layer_norm) or in
 * the input's suggested memory format (torch 2.x's group_norm; 1.13's was
 * contiguous). */
static int norm_output(const char *op, const tstor_layout *input, const tstor_layout *weight,
                       const tstor_layout *bias, tstor_layout *out) {
  int rc;
  if ((rc = check_mixed_dtype(input, weight, bias)) < 0 || (rc = floating_input(op, input)) < 0 ||
      (rc = param_dtype(op, "weight", weight, input->dtype)) < 0 ||
      (rc = param_dtype(op, "bias", bias, input->dtype)) < 0)
    return rc;
  tstor_layout r;
  tstor__layout_copy(&r, input);
  if (op[0] == 'g')
    tstor_layout_restride(&r, tstor_layout_memory_format(input));
  else
    tstor__layout_contiguous(&r);
  tstor__layout_copy(out, &r);
  return 0;
}

static int same_shape(const tstor_layout *p, int n, const int64_t *shape) {
  return p->ndim == n && memcmp(p->sizes, shape, sizeof(int64_t) * (size_t)n) == 0;
}

int tstor_layout_layer_norm(const tstor_layout *input, int ndims, const int64_t *normalized_shape,
                            const tstor_layout *weight, const tstor_layout *bias,
                            tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(input, "layer_norm: input")) < 0 ||
      (rc = tstor__check_optional(weight, "layer_norm: weight")) < 0 ||
      (rc = tstor__check_optional(bias, "layer_norm: bias")) < 0)
    return rc;
  if (!out || ndims < 0 || ndims > TSTOR_TENSOR_MAX_DIM || (ndims && !normalized_shape))
    return tstor__err(TSTOR_EINVAL, "layer_norm: bad arguments");
  if ((rc = check_mixed_dtype(input, weight, bias)) < 0) return rc;
  char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
  if (ndims < 1)
    return tstor__err(TSTOR_EINVAL,
                      "Expected normalized_shape to be at least 1-dimensional, i.e., "
                      "containing at least one element, but got normalized_shape = []");
  const tstor_layout *ps[2] = {weight, bias};
  for (int i = 0; i < 2; i++)
    if (ps[i] && !same_shape(ps[i], ndims, normalized_shape))
      return tstor__err(TSTOR_EINVAL,
                        "Expected %s to be of same shape as normalized_shape, but "
                        "got %s of shape %s and normalized_shape = %s",
                        i ? "bias" : "weight", i ? "bias" : "weight",
                        tstor__dims_str(a, sizeof a, ps[i]->ndim, ps[i]->sizes),
                        tstor__dims_str(b, sizeof b, ndims, normalized_shape));
  if (input->ndim < ndims || memcmp(input->sizes + input->ndim - ndims, normalized_shape,
                                    sizeof(int64_t) * (size_t)ndims)) {
    char c[TSTOR__SHAPE_STR_MAX + 8];
    /* "[*, 3, 4]" */
    snprintf(c, sizeof c, "[*, %s", tstor__dims_str(a, sizeof a, ndims, normalized_shape) + 1);
    return tstor__err(TSTOR_EINVAL,
                      "Given normalized_shape=%s, expected input with shape %s, but "
                      "got input of size%s",
                      tstor__dims_str(a, sizeof a, ndims, normalized_shape), c,
                      tstor__dims_str(b, sizeof b, input->ndim, input->sizes));
  }
  return norm_output("layer_norm", input, weight, bias, out);
}

int tstor_layout_group_norm(const tstor_layout *input, int64_t groups, const tstor_layout *weight,
                            const tstor_layout *bias, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(input, "group_norm: input")) < 0 ||
      (rc = tstor__check_optional(weight, "group_norm: weight")) < 0 ||
      (rc = tstor__check_optional(bias, "group_norm: bias")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "group_norm: out is NULL");
  char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
  /* F.group_norm's own checks, then its N * C // groups */
  if (input->ndim < 2)
    return tstor__err(TSTOR_EINVAL,
                      "Expected at least 2 dimensions for input tensor but received %d",
                      input->ndim);
  if (groups == 0) return tstor__err(TSTOR_EINVAL, "integer division or modulo by zero");
  if (groups < 0)
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
    return tstor__err(TSTOR_EINVAL,
                      "Expected number of channels in input to be divisible by "
                      "num_groups, but got input of shape %s and num_groups=%lld",
                      tstor__dims_str(a, sizeof a, input->ndim, input->sizes), (long long)groups);
  const tstor_layout *ps[2] = {weight, bias};
  for (int i = 0; i < 2; i++)
    if (ps[i] && (ps[i]->ndim != 1 || ps[i]->sizes[0] != c))
      return tstor__err(TSTOR_EINVAL,
                        "Expected %s to be a vector of size equal to the number of "
                        "channels in input, but got %s of shape %s and input of shape %s",
                        i ? "bias" : "weight", i ? "bias" : "weight",
                        tstor__dims_str(a, sizeof a, ps[i]->ndim, ps[i]->sizes),
                        tstor__dims_str(b, sizeof b, input->ndim, input->sizes));
  return norm_output("group_norm", input, weight, bias, out);
}

/* ------------------------------------------------------------ tensor forms */

static int batch_norm_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_batch_norm(in[0], in[1], in[2], in[3], in[4], *(const int *)args, out);
}

int tstor_shape_batch_norm(const tstor_tensor *input, const tstor_tensor *running_mean,
                           const tstor_tensor *running_var, const tstor_tensor *weight,
                           const tstor_tensor *bias, int training, tstor_tensor **out) {
  const tstor_tensor *ts[5] = {input, running_mean, running_var, weight, bias};
  return tstor__shape_form("shape_batch_norm", 5, ts, 1, batch_norm_form, &training, out);
}

/* layer_norm's normalized_shape. */
typedef struct {
  int ndims;
  const int64_t *normalized_shape;
} layer_norm_args;

static int layer_norm_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  const layer_norm_args *a = args;
  return tstor_layout_layer_norm(in[0], a->ndims, a->normalized_shape, in[1], in[2], out);
}

int tstor_shape_layer_norm(const tstor_tensor *input, int ndims, const int64_t *normalized_shape,
                           const tstor_tensor *weight, const tstor_tensor *bias,
                           tstor_tensor **out) {
  const tstor_tensor *ts[3] = {input, weight, bias};
  const layer_norm_args a = {ndims, normalized_shape};
  return tstor__shape_form("shape_layer_norm", 3, ts, 1, layer_norm_form, &a, out);
}

static int group_norm_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_group_norm(in[0], *(const int64_t *)args, in[1], in[2], out);
}

int tstor_shape_group_norm(const tstor_tensor *input, int64_t groups, const tstor_tensor *weight,
                           const tstor_tensor *bias, tstor_tensor **out) {
  const tstor_tensor *ts[3] = {input, weight, bias};
  return tstor__shape_form("shape_group_norm", 3, ts, 1, group_norm_form, &groups, out);
}
