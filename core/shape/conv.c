/* The output layout of convolutions, as ATen's Convolution.cpp checks and
 * computes it: its argument checks (check_shape_forward), its output sizes
 * (conv_output_size, and conv_input_size for a transposed convolution), and
 * the memory format of torch 2.x's meta kernels: contiguous. */
#include "shape/shape_internal.h"

#include <stdio.h>
#include <string.h>

/* "2 x 3", as ATen's messages print spatial sizes. */
static const char *dims_x_str(char *buf, size_t size, int n, const int64_t *v) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < n && at < size; i++) {
    int k = snprintf(buf + at, size - at, "%s%lld", i ? " x " : "", (long long)v[i]);
    if (k < 0) break;
    at += (size_t)k;
  }
  return buf;
}

/* Adds a leading batch dimension of 1 (unsqueeze(0)). */
static void unsqueeze0(const tstor_layout *in, tstor_layout *out) {
  out->dtype = in->dtype;
  out->ndim = in->ndim + 1;
  out->sizes[0] = 1;
  out->strides[0] = in->ndim ? in->sizes[0] * in->strides[0] : 1;
  memcpy(out->sizes + 1, in->sizes, sizeof(int64_t) * (size_t)in->ndim);
  memcpy(out->strides + 1, in->strides, sizeof(int64_t) * (size_t)in->ndim);
}

/* Drops the leading dimension of 1 (squeeze(0)); the strides of the others
 * are kept. */
static void squeeze0(tstor_layout *l) {
  memmove(l->sizes, l->sizes + 1, sizeof(int64_t) * (size_t)(l->ndim - 1));
  memmove(l->strides, l->strides + 1, sizeof(int64_t) * (size_t)(l->ndim - 1));
  l->ndim--;
}

/* ---------------------------------------------------------------- arguments */

static const tstor_conv_params conv_defaults = TSTOR_CONV_PARAMS_INIT(0);
static const tstor__params_kind conv_params = {
    .type = "tstor_conv_params",
    .init = "TSTOR_CONV_PARAMS_INIT",
    .first = offsetof(tstor_conv_params, padding_mode) + sizeof(tstor_conv_padding),
    .current = sizeof(tstor_conv_params),
    .defaults = &conv_defaults};

/* The layouts and pointers; the options struct read into *q. */
static int conv_args(const tstor_layout *input, const tstor_layout *weight,
                     const tstor_layout *bias, const tstor_conv_params *p, const tstor_layout *out,
                     tstor_conv_params *q) {
  int rc;
  if ((rc = tstor__check_layout(input, "conv: input")) < 0 ||
      (rc = tstor__check_layout(weight, "conv: weight")) < 0 ||
      (rc = tstor__check_optional(bias, "conv: bias")) < 0)
    return rc;
  if (!p || !out) return tstor__err(TSTOR_EINVAL, "conv: NULL %s", p ? "out" : "params");
  if ((rc = tstor__params_read(&conv_params, p, q)) < 0) return rc;
  if (q->spatial < 1 || q->spatial > 3)
    return tstor__err(TSTOR_EINVAL, "conv: %d spatial dimensions (1 .. 3)", q->spatial);
  return 0;
}

/* The name of the convolution in messages, as PyTorch's functional. */
static const char *conv_name(const tstor_conv_params *p) {
  static const char *const names[2][3] = {
      {"conv1d", "conv2d", "conv3d"}, {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}};
  return names[p->transposed != 0][p->spatial - 1];
}

/* ATen's batchify: conv2d takes (C, H, W) as a batch of one. Writes the
 * batched input into *in. */
static int batchify(const tstor_layout *input, int k, const char *name, tstor_layout *in) {
  if (input->ndim != k + 1 && input->ndim != k + 2) {
    char a[TSTOR__SHAPE_STR_MAX];
    return tstor__err(TSTOR_EINVAL,
                      "Expected %dD (unbatched) or %dD (batched) input to %s, but "
                      "got input of size: %s",
                      k + 1, k + 2, name, tstor__dims_str(a, sizeof a, input->ndim, input->sizes));
  }
  if (input->ndim == k + 2)
    tstor__layout_copy(in, input);
  else
    unsqueeze0(input, in);
  return 0;
}

/* tstor's bounds, under which every size below is computed without overflow:
 * arguments below 2^30, the caller's input and weight sizes up to 2^31. */
static int check_bounds(const tstor_layout *input, const tstor_layout *weight,
                        const tstor_conv_params *p, const char *name) {
  const int64_t big = (int64_t)1 << 30, huge = (int64_t)1 << 31;
  for (int i = 0; i < p->spatial; i++)
    if (p->padding[i] > big || p->stride[i] > big || p->dilation[i] > big ||
        (p->transposed && p->output_padding[i] > big))
      return tstor__err(TSTOR_EOVERFLOW,
                        "%s: stride, padding, dilation and output_padding must "
                        "be below 2^30",
                        name);
  for (int d = 0; d < input->ndim; d++)
    if (input->sizes[d] > huge)
      return tstor__err(TSTOR_EOVERFLOW, "%s: input sizes must be below 2^31", name);
  for (int d = 0; d < weight->ndim; d++)
    if (weight->sizes[d] > huge)
      return tstor__err(TSTOR_EOVERFLOW, "%s: weight sizes must be below 2^31", name);
  return 0;
}

/* padding="same" and "valid" as explicit padding, in *q. "same" is PyTorch's
 * convolution_same: dil (k - 1) of padding in all, half on the left; where
 * the total is odd the input is first padded by one more on the right
 * (constant_pad_nd, which keeps the input's memory format), and `in` becomes
 * that padded input. */
static int explicit_padding(tstor_layout *in, const tstor_layout *weight, tstor_conv_params *q,
                            const char *name) {
  tstor_conv_padding mode = q->padding_mode;
  int k = q->spatial;
  q->padding_mode = TSTOR_CONV_PADDING_EXPLICIT;
  if (mode == TSTOR_CONV_PADDING_VALID) {
    for (int i = 0; i < k; i++) q->padding[i] = 0;
    return 0;
  }
  if (mode != TSTOR_CONV_PADDING_SAME || q->transposed)
    return tstor__err(TSTOR_EINVAL, "conv: padding mode %d%s", (int)mode,
                      q->transposed ? " with a transposed convolution" : " is unknown");
  if (weight->ndim != in->ndim) {
    char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
    return tstor__err(TSTOR_EINVAL,
                      "Expected %d-dimensional input for %d-dimensional weight%s, but "
                      "got %d-dimensional input of size %s instead",
                      weight->ndim, weight->ndim,
                      tstor__dims_str(a, sizeof a, weight->ndim, weight->sizes), in->ndim,
                      tstor__dims_str(b, sizeof b, in->ndim, in->sizes));
  }
  for (int i = 0; i < k; i++)
    if (q->stride[i] != 1)
      return tstor__err(TSTOR_EINVAL, "padding='same' is not supported for strided convolutions");
  /* The padding is ours to compute, and only from sizes within the bounds:
   * whatever the caller left in it is not read. */
  for (int i = 0; i < k; i++) q->padding[i] = 0;
  int rc = check_bounds(in, weight, q, name);
  if (rc < 0) return rc;
  int asymmetric = 0;
  tstor_memory_format format =
      in->ndim == 4 ? tstor_layout_memory_format(in) : TSTOR_MEMORY_CONTIGUOUS;
  for (int i = 0; i < k; i++) {
    if (q->dilation[i] <= 0 || weight->sizes[i + 2] < 1)
      return 0; /* left to the checks of the explicit convolution */
    int64_t total = q->dilation[i] * (weight->sizes[i + 2] - 1), left = total / 2;
    q->padding[i] = left;
    if (total - left != left) {
      in->sizes[i + 2] += 1;
      asymmetric = 1;
    }
  }
  if (asymmetric) tstor_layout_restride(in, format);
  return 0;
}

/* ------------------------------------------------------ check_shape_forward */

/* ConvParams' checks: is_padding_neg, is_output_padding_neg,
 * is_stride_nonpos, and the dilation and groups PyTorch's functional checks,
 * dimension by dimension. */
static int check_params(const tstor_conv_params *p) {
  for (int i = 0; i < p->spatial; i++) {
    if (p->padding[i] < 0) return tstor__err(TSTOR_EINVAL, "negative padding is not supported");
    if (p->transposed && p->output_padding[i] < 0)
      return tstor__err(TSTOR_EINVAL, "negative output_padding is not supported");
    if (p->stride[i] <= 0) return tstor__err(TSTOR_EINVAL, "non-positive stride is not supported");
    if (p->dilation[i] <= 0)
      return tstor__err(TSTOR_EINVAL, "non-positive dilation is not supported");
  }
  if (p->groups <= 0) return tstor__err(TSTOR_EINVAL, "non-positive groups is not supported");
  return 0;
}

/* The weight's dimensions, and its first size against the groups. */
static int check_weight(const tstor_layout *in, const tstor_layout *weight,
                        const tstor_conv_params *p) {
  char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
  long long g = (long long)p->groups;
  if (weight->ndim != p->spatial + 2)
    return tstor__err(TSTOR_EINVAL,
                      "Expected %d-dimensional input for %d-dimensional weight %s, "
                      "but got %d-dimensional input of size %s instead",
                      weight->ndim, weight->ndim,
                      tstor__dims_str(a, sizeof a, weight->ndim, weight->sizes), in->ndim,
                      tstor__dims_str(b, sizeof b, in->ndim, in->sizes));
  if (weight->sizes[0] < p->groups)
    return tstor__err(TSTOR_EINVAL,
                      "Given groups=%lld, expected weight to be at least %lld at "
                      "dimension 0, but got weight of size %s instead",
                      g, g, tstor__dims_str(a, sizeof a, weight->ndim, weight->sizes));
  if (weight->sizes[0] % p->groups != 0)
    return tstor__err(TSTOR_EINVAL,
                      "Given groups=%lld, expected weight to be divisible by %lld "
                      "at dimension 0, but got weight of size [%s] instead",
                      g, g, tstor__dims_str(a, sizeof a, weight->ndim, weight->sizes));
  return 0;
}

/* The kernel, dilated, fits the padded input. */
static int check_kernel_fits(const tstor_layout *in, const int64_t *w, const tstor_conv_params *p) {
  int64_t padded[3], kernel[3];
  int fits = 1;
  for (int i = 0; i < p->spatial; i++) {
    padded[i] = in->sizes[i + 2] + 2 * p->padding[i];
    kernel[i] = p->dilation[i] * (w[i + 2] - 1) + 1;
    if (padded[i] < kernel[i]) fits = 0;
  }
  if (fits) return 0;
  char s1[128], s2[128];
  return tstor__err(TSTOR_EINVAL,
                    "Calculated padded input size per channel: (%s). Kernel "
                    "size: (%s). Kernel size can't be greater than actual input size",
                    dims_x_str(s1, sizeof s1, p->spatial, padded),
                    dims_x_str(s2, sizeof s2, p->spatial, kernel));
}

/* A convolution's channels: the weight (out, C / groups, k...), so the input
 * has its second size times the groups and the bias one per output channel;
 * then the kernel must fit the padded input. */
static int check_forward_channels(const tstor_layout *in, const tstor_layout *weight,
                                  const tstor_layout *bias, const tstor_conv_params *p) {
  char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
  const int64_t *w = weight->sizes;
  int64_t g = p->groups;
  if (in->sizes[1] != w[1] * g)
    return tstor__err(TSTOR_EINVAL,
                      "Given groups=%lld, weight of size %s, expected input%s to "
                      "have %lld channels, but got %lld channels instead",
                      (long long)g, tstor__dims_str(a, sizeof a, weight->ndim, w),
                      tstor__dims_str(b, sizeof b, in->ndim, in->sizes), (long long)(w[1] * g),
                      (long long)in->sizes[1]);
  if (bias && (bias->ndim != 1 || bias->sizes[0] != w[0]))
    return tstor__err(TSTOR_EINVAL,
                      "Given weight of size %s, expected bias to be "
                      "1-dimensional with %lld elements, but got bias of size %s instead",
                      tstor__dims_str(a, sizeof a, weight->ndim, w), (long long)w[0],
                      tstor__dims_str(b, sizeof b, bias->ndim, bias->sizes));
  return check_kernel_fits(in, w, p);
}

/* A transposed convolution's channels: the weight (C, out / groups, k...), so
 * the input has its first size and the bias its second times the groups; and
 * each output padding is below the stride or the dilation. */
static int check_transposed_channels(const tstor_layout *in, const tstor_layout *weight,
                                     const tstor_layout *bias, const tstor_conv_params *p) {
  char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
  const int64_t *w = weight->sizes;
  int64_t out_channels = w[1] * p->groups;
  if (in->sizes[1] != w[0])
    return tstor__err(TSTOR_EINVAL,
                      "Given transposed=1, weight of size %s, expected input%s to "
                      "have %lld channels, but got %lld channels instead",
                      tstor__dims_str(a, sizeof a, weight->ndim, w),
                      tstor__dims_str(b, sizeof b, in->ndim, in->sizes), (long long)w[0],
                      (long long)in->sizes[1]);
  if (bias && (bias->ndim != 1 || bias->sizes[0] != out_channels))
    return tstor__err(TSTOR_EINVAL,
                      "Given transposed=1, weight of size %s, expected bias to be "
                      "1-dimensional with %lld elements, but got bias of size %s instead",
                      tstor__dims_str(a, sizeof a, weight->ndim, w), (long long)out_channels,
                      tstor__dims_str(b, sizeof b, bias->ndim, bias->sizes));
  for (int i = 0; i < p->spatial; i++)
    if (p->output_padding[i] >= p->stride[i] && p->output_padding[i] >= p->dilation[i]) {
      char s1[128], s2[128], s3[128];
      if (p->spatial <= 2) { /* torch 2.x's slow_conv_transpose2d, a 1-d one as (1, w) */
        int h = p->spatial == 2;
        return tstor__err(
            TSTOR_EINVAL,
            "output padding must be smaller than either stride or dilation, but got "
            "output_padding_height: %lld output_padding_width: %lld stride_height: %lld "
            "stride_width: %lld dilation_height: %lld dilation_width: %lld",
            (long long)(h ? p->output_padding[0] : 0), (long long)p->output_padding[h],
            (long long)(h ? p->stride[0] : 1), (long long)p->stride[h],
            (long long)(h ? p->dilation[0] : 1), (long long)p->dilation[h]);
      }
      return tstor__err(TSTOR_EINVAL,
                        "output padding must be smaller than either stride or "
                        "dilation, but got output_padding: (%s) stride: (%s) dilation: (%s)",
                        dims_x_str(s1, sizeof s1, p->spatial, p->output_padding),
                        dims_x_str(s2, sizeof s2, p->spatial, p->stride),
                        dims_x_str(s3, sizeof s3, p->spatial, p->dilation));
    }
  return 0;
}

/* ATen's check_shape_forward: the arguments, the weight, the channels. input
 * is the caller's layout, `in` the batched (and padded) one. */
static int check_shape_forward(const tstor_layout *input, const tstor_layout *in,
                               const tstor_layout *weight, const tstor_layout *bias,
                               const tstor_conv_params *p, const char *name) {
  int rc;
  if ((rc = check_params(p)) < 0 || (rc = check_bounds(input, weight, p, name)) < 0 ||
      (rc = check_weight(in, weight, p)) < 0)
    return rc;
  if (p->transposed) return check_transposed_channels(in, weight, bias, p);
  return check_forward_channels(in, weight, bias, p);
}

/* One dtype for the input, the weight and the bias. */
static int check_same_type(const tstor_layout *in, const tstor_layout *weight,
                           const tstor_layout *bias, const char *name) {
  if (bias && bias->dtype != in->dtype)
    return tstor__err(TSTOR_EDTYPE, "%s: bias type %s and input type %s should be the same", name,
                      tstor_dtype_name(bias->dtype), tstor_dtype_name(in->dtype));
  if (weight->dtype != in->dtype) {
    char a[64], b[64];
    return tstor__err(TSTOR_EDTYPE,
                      "Input type (%s) and weight type (%s) should be the same or input should be "
                      "a MKLDNN tensor and weight is a dense tensor",
                      tstor__tensor_type_name(in->dtype, a, sizeof a),
                      tstor__tensor_type_name(weight->dtype, b, sizeof b));
  }
  return 0;
}

/* --------------------------------------------------------------- the output */

/* ATen's conv_output_size: (N, out, spatial...) of a convolution, each
 * spatial size (in + 2 pad - dil (k - 1) - 1) / stride + 1. */
static void conv_output_size(const tstor_layout *in, const int64_t *w, const tstor_conv_params *p,
                             int64_t *sizes) {
  sizes[0] = in->sizes[0];
  sizes[1] = w[0];
  for (int i = 0; i < p->spatial; i++) {
    int64_t kernel = p->dilation[i] * (w[i + 2] - 1) + 1;
    sizes[i + 2] = (in->sizes[i + 2] + 2 * p->padding[i] - kernel) / p->stride[i] + 1;
  }
}

/* ATen's conv_input_size: (N, out, spatial...) of a transposed convolution
 * (the input of the convolution whose gradient it is), out the weight's
 * second size times the groups, each spatial size (in - 1) stride - 2 pad +
 * dil (k - 1) + output_padding + 1. */
static void conv_input_size(const tstor_layout *in, const int64_t *w, const tstor_conv_params *p,
                            int64_t *sizes) {
  sizes[0] = in->sizes[0];
  sizes[1] = w[1] * p->groups;
  for (int i = 0; i < p->spatial; i++)
    sizes[i + 2] = (in->sizes[i + 2] - 1) * p->stride[i] - 2 * p->padding[i] +
                   p->dilation[i] * (w[i + 2] - 1) + p->output_padding[i] + 1;
}

/* "Output size is too small" where a spatial size is below 1 (but for an
 * empty input of a convolution); TSTOR_EOVERFLOW where the output's bytes
 * pass int64, as PyTorch's empty() checks. */
static int check_output_size(const tstor_layout *in, const tstor_conv_params *p,
                             const tstor_layout *r) {
  int k = p->spatial;
  for (int i = 0; i < k; i++)
    if (r->sizes[i + 2] < 1 && !(in->sizes[i + 2] == 0 && !p->transposed)) {
      char s1[128], s2[128];
      return tstor__err(TSTOR_EINVAL,
                        "Given input size per channel: (%s). Calculated output size "
                        "per channel: (%s). Output size is too small",
                        dims_x_str(s1, sizeof s1, k, in->sizes + 2),
                        dims_x_str(s2, sizeof s2, k, r->sizes + 2));
    }
  uint64_t nbytes;
  return tstor__layout_nbytes(r->ndim, r->sizes, NULL, tstor_dtype_size(r->dtype), &nbytes);
}

/* -------------------------------------------------------------- convolution */

int tstor_layout_conv(const tstor_layout *input, const tstor_layout *weight,
                      const tstor_layout *bias, const tstor_conv_params *p, tstor_layout *out) {
  tstor_conv_params q;
  tstor_layout in, r;
  int rc;
  if ((rc = conv_args(input, weight, bias, p, out, &q)) < 0) return rc;
  const char *name = conv_name(&q);
  if ((rc = batchify(input, q.spatial, name, &in)) < 0) return rc;
  if (q.padding_mode != TSTOR_CONV_PADDING_EXPLICIT &&
      (rc = explicit_padding(&in, weight, &q, name)) < 0)
    return rc;
  if ((rc = check_shape_forward(input, &in, weight, bias, &q, name)) < 0 ||
      (rc = check_same_type(&in, weight, bias, name)) < 0)
    return rc;
  r.dtype = in.dtype;
  r.ndim = in.ndim;
  if (q.transposed)
    conv_input_size(&in, weight->sizes, &q, r.sizes);
  else
    conv_output_size(&in, weight->sizes, &q, r.sizes);
  if ((rc = check_output_size(&in, &q, &r)) < 0) return rc;
  /* torch 2.x's meta kernels give a contiguous output whatever the input's
   * or the weight's memory format (1.13's kept channels-last) */
  if (input->ndim < in.ndim) squeeze0(&r); /* unbatched: the output too */
  tstor__layout_contiguous(&r);
  tstor__layout_copy(out, &r);
  return 0;
}

static int conv_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_conv(in[0], in[1], in[2], args, out);
}

int tstor_shape_conv(const tstor_tensor *input, const tstor_tensor *weight,
                     const tstor_tensor *bias, const tstor_conv_params *p, tstor_tensor **out) {
  const tstor_tensor *ts[3] = {input, weight, bias};
  return tstor__shape_form("shape_conv", 3, ts, 2, conv_form, p, out);
}
