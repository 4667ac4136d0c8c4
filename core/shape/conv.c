/* The output layout of convolutions, as ATen's Convolution.cpp checks and
 * computes it: its argument checks (check_shape_forward), its output sizes
 * (conv_output_size, and conv_input_size for a transposed convolution) and
 * its choice of memory format. */
#include "shape/shape_internal.h"

#include <stdio.h>
#include <string.h>

/* "2 x 3" for error messages. */
static const char *dims_str(char *buf, size_t size, int n, const int64_t *v) {
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

/* Drops the leading dimension of 1 and recomputes contiguous strides unless
 * the layout is dense in another format (unbatched results are contiguous). */
static void squeeze0(tstor_layout *l) {
  memmove(l->sizes, l->sizes + 1, sizeof(int64_t) * (size_t)(l->ndim - 1));
  memmove(l->strides, l->strides + 1, sizeof(int64_t) * (size_t)(l->ndim - 1));
  l->ndim--;
}

/* ------------------------------------------------------------- convolution */

/* padding="same" and "valid" as explicit padding. "same" is PyTorch's
 * convolution_same: dil (k - 1) of padding in all, half on the left; where
 * the total is odd the input is first padded by one more on the right
 * (constant_pad_nd, which keeps the input's memory format), and `in` becomes
 * that padded input. */
static int conv_padding_mode(tstor_layout *in, const tstor_layout *weight,
                             const tstor_conv_params *p, tstor_conv_params *q) {
  *q = *p;
  q->padding_mode = TSTOR_CONV_PADDING_EXPLICIT;
  int k = p->spatial;
  if (p->padding_mode == TSTOR_CONV_PADDING_VALID) {
    for (int i = 0; i < k; i++) q->padding[i] = 0;
    return 0;
  }
  if (p->padding_mode != TSTOR_CONV_PADDING_SAME || p->transposed)
    return tstor__err(TSTOR_EINVAL, "conv: padding mode %d%s", (int)p->padding_mode,
                      p->transposed ? " with a transposed convolution" : " is unknown");
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
    if (p->stride[i] != 1)
      return tstor__err(TSTOR_EINVAL, "padding='same' is not supported for strided convolutions");
  int asymmetric = 0;
  tstor_memory_format format =
      in->ndim == 4 ? tstor_layout_memory_format(in) : TSTOR_MEMORY_CONTIGUOUS;
  for (int i = 0; i < k; i++) {
    if (p->dilation[i] <= 0 || p->dilation[i] > ((int64_t)1 << 30) || weight->sizes[i + 2] < 1)
      return 0; /* left to the checks of the explicit convolution */
    int64_t total = p->dilation[i] * (weight->sizes[i + 2] - 1), left = total / 2;
    q->padding[i] = left;
    if (total - left != left) {
      in->sizes[i + 2] += 1;
      asymmetric = 1;
    }
  }
  if (asymmetric) tstor_layout_restride(in, format);
  return 0;
}

int tstor_layout_conv(const tstor_layout *input, const tstor_layout *weight,
                      const tstor_layout *bias, const tstor_conv_params *p, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(input, "conv: input")) < 0 ||
      (rc = tstor__check_layout(weight, "conv: weight")) < 0 ||
      (rc = tstor__check_optional(bias, "conv: bias")) < 0)
    return rc;
  if (!p || !out) return tstor__err(TSTOR_EINVAL, "conv: NULL %s", p ? "out" : "params");
  if ((rc = tstor__params_size(p->size, sizeof *p, "tstor_conv_params")) < 0) return rc;
  int k = p->spatial;
  if (k < 1 || k > 3) return tstor__err(TSTOR_EINVAL, "conv: %d spatial dimensions (1 .. 3)", k);
  const char *name = p->transposed ? (k == 1   ? "conv_transpose1d"
                                      : k == 2 ? "conv_transpose2d"
                                               : "conv_transpose3d")
                                   : (k == 1   ? "conv1d"
                                      : k == 2 ? "conv2d"
                                               : "conv3d");
  char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX], c[TSTOR__SHAPE_STR_MAX];
  /* conv2d takes (C, H, W) as a batch of one */
  if (input->ndim != k + 1 && input->ndim != k + 2)
    return tstor__err(TSTOR_EINVAL,
                      "Expected %dD (unbatched) or %dD (batched) input to %s, but "
                      "got input of size: %s",
                      k + 1, k + 2, name, tstor__dims_str(a, sizeof a, input->ndim, input->sizes));
  int batched = input->ndim == k + 2;
  tstor_layout in;
  if (batched)
    tstor__layout_copy(&in, input);
  else
    unsqueeze0(input, &in);
  tstor_conv_params explicit_p;
  if (p->padding_mode != TSTOR_CONV_PADDING_EXPLICIT) {
    if ((rc = conv_padding_mode(&in, weight, p, &explicit_p)) < 0) return rc;
    p = &explicit_p;
  }

  for (int i = 0; i < k; i++) {
    if (p->padding[i] < 0) return tstor__err(TSTOR_EINVAL, "negative padding is not supported");
    if (p->transposed && p->output_padding[i] < 0)
      return tstor__err(TSTOR_EINVAL, "negative output_padding is not supported");
    if (p->stride[i] <= 0) return tstor__err(TSTOR_EINVAL, "non-positive stride is not supported");
    if (p->dilation[i] <= 0)
      return tstor__err(TSTOR_EINVAL, "non-positive dilation is not supported");
  }
  if (p->groups <= 0) return tstor__err(TSTOR_EINVAL, "non-positive groups is not supported");
  /* bounded so that every size below is computed without overflow */
  for (int i = 0; i < k; i++) {
    const int64_t big = (int64_t)1 << 30;
    if (p->padding[i] > big || p->stride[i] > big || p->dilation[i] > big ||
        (p->transposed && p->output_padding[i] > big))
      return tstor__err(TSTOR_EOVERFLOW,
                        "%s: stride, padding, dilation and output_padding must "
                        "be below 2^30",
                        name);
  }
  for (int d = 0; d < input->ndim; d++)
    if (input->sizes[d] > ((int64_t)1 << 31))
      return tstor__err(TSTOR_EOVERFLOW, "%s: input sizes must be below 2^31", name);
  for (int d = 0; d < weight->ndim; d++)
    if (weight->sizes[d] > ((int64_t)1 << 31))
      return tstor__err(TSTOR_EOVERFLOW, "%s: weight sizes must be below 2^31", name);
  if (weight->ndim != k + 2)
    return tstor__err(TSTOR_EINVAL,
                      "Expected %d-dimensional input for %d-dimensional weight %s, "
                      "but got %d-dimensional input of size %s instead",
                      weight->ndim, weight->ndim,
                      tstor__dims_str(a, sizeof a, weight->ndim, weight->sizes), in.ndim,
                      tstor__dims_str(b, sizeof b, in.ndim, in.sizes));
  const int64_t *w = weight->sizes;
  int64_t g = p->groups;
  /* the messages below name the weight (a) and the input (b) */
#define WSTR tstor__dims_str(a, sizeof a, weight->ndim, w)
#define ISTR tstor__dims_str(b, sizeof b, in.ndim, in.sizes)
  if (w[0] < g)
    return tstor__err(TSTOR_EINVAL,
                      "Given groups=%lld, expected weight to be at least %lld at "
                      "dimension 0, but got weight of size %s instead",
                      (long long)g, (long long)g, WSTR);
  if (w[0] % g != 0)
    return tstor__err(TSTOR_EINVAL,
                      "Given groups=%lld, expected weight to be divisible by %lld "
                      "at dimension 0, but got weight of size %s instead",
                      (long long)g, (long long)g, WSTR);
  int64_t out_channels;
  if (!p->transposed) {
    if (in.sizes[1] != w[1] * g)
      return tstor__err(TSTOR_EINVAL,
                        "Given groups=%lld, weight of size %s, expected input%s to "
                        "have %lld channels, but got %lld channels instead",
                        (long long)g, WSTR, ISTR, (long long)(w[1] * g), (long long)in.sizes[1]);
    out_channels = w[0];
    if (bias && (bias->ndim != 1 || bias->sizes[0] != w[0]))
      return tstor__err(TSTOR_EINVAL,
                        "Given weight of size %s, expected bias to be "
                        "1-dimensional with %lld elements, but got bias of size %s instead",
                        WSTR, (long long)w[0],
                        tstor__dims_str(c, sizeof c, bias->ndim, bias->sizes));
    int64_t padded[3], kernel[3];
    int fits = 1;
    for (int i = 0; i < k; i++) {
      padded[i] = in.sizes[i + 2] + 2 * p->padding[i];
      kernel[i] = p->dilation[i] * (w[i + 2] - 1) + 1;
      if (padded[i] < kernel[i]) fits = 0;
    }
    if (!fits) {
      char s1[128], s2[128];
      return tstor__err(TSTOR_EINVAL,
                        "Calculated padded input size per channel: (%s). Kernel "
                        "size: (%s). Kernel size can't be greater than actual input size",
                        dims_str(s1, sizeof s1, k, padded), dims_str(s2, sizeof s2, k, kernel));
    }
  } else {
    if (in.sizes[1] != w[0])
      return tstor__err(TSTOR_EINVAL,
                        "Given transposed=1, weight of size %s, expected input%s to "
                        "have %lld channels, but got %lld channels instead",
                        WSTR, ISTR, (long long)w[0], (long long)in.sizes[1]);
    out_channels = w[1] * g;
    if (bias && (bias->ndim != 1 || bias->sizes[0] != out_channels))
      return tstor__err(TSTOR_EINVAL,
                        "Given transposed=1, weight of size %s, expected bias to be "
                        "1-dimensional with %lld elements, but got bias of size %s instead",
                        WSTR, (long long)out_channels,
                        tstor__dims_str(c, sizeof c, bias->ndim, bias->sizes));
    for (int i = 0; i < k; i++)
      if (p->output_padding[i] >= p->stride[i] && p->output_padding[i] >= p->dilation[i]) {
        char s1[128], s2[128], s3[128];
        return tstor__err(TSTOR_EINVAL,
                          "output padding must be smaller than either stride or "
                          "dilation, but got output_padding: (%s) stride: (%s) dilation: (%s)",
                          dims_str(s1, sizeof s1, k, p->output_padding),
                          dims_str(s2, sizeof s2, k, p->stride),
                          dims_str(s3, sizeof s3, k, p->dilation));
      }
  }
#undef WSTR
#undef ISTR
  if (bias && bias->dtype != in.dtype)
    return tstor__err(TSTOR_EDTYPE, "%s: bias type %s and input type %s should be the same", name,
                      tstor_dtype_name(bias->dtype), tstor_dtype_name(in.dtype));
  if (weight->dtype != in.dtype)
    return tstor__err(TSTOR_EDTYPE, "Input type (%s) and weight type (%s) should be the same",
                      tstor_dtype_name(in.dtype), tstor_dtype_name(weight->dtype));

  tstor_layout r;
  r.dtype = in.dtype;
  r.ndim = k + 2;
  r.sizes[0] = in.sizes[0];
  r.sizes[1] = out_channels;
  int64_t outsz[3];
  int small = 0;
  for (int i = 0; i < k; i++) {
    int64_t x = in.sizes[i + 2], kk = w[i + 2];
    if (!p->transposed)
      outsz[i] = (x + 2 * p->padding[i] - p->dilation[i] * (kk - 1) - 1) / p->stride[i] + 1;
    else
      outsz[i] = (x - 1) * p->stride[i] - 2 * p->padding[i] + p->dilation[i] * (kk - 1) +
                 p->output_padding[i] + 1;
    if (outsz[i] < 1 && !(x == 0 && !p->transposed)) small = 1;
    r.sizes[i + 2] = outsz[i];
  }
  if (small) {
    char s1[128], s2[128];
    return tstor__err(TSTOR_EINVAL,
                      "Given input size per channel: (%s). Calculated output size "
                      "per channel: (%s). Output size is too small",
                      dims_str(s1, sizeof s1, k, in.sizes + 2), dims_str(s2, sizeof s2, k, outsz));
  }
  /* the output's bytes must fit int64, as PyTorch's empty() checks */
  uint64_t nbytes;
  if ((rc = tstor__layout_nbytes(r.ndim, r.sizes, NULL, tstor_dtype_size(r.dtype), &nbytes)))
    return rc;
  /* PyTorch's meta kernel: channels-last when the input or the weight suggests
   * it (4 dims), otherwise contiguous */
  tstor_memory_format f = TSTOR_MEMORY_CONTIGUOUS;
  if (r.ndim == 4 && (tstor_layout_memory_format(&in) == TSTOR_MEMORY_CHANNELS_LAST ||
                      tstor_layout_memory_format(weight) == TSTOR_MEMORY_CHANNELS_LAST))
    f = TSTOR_MEMORY_CHANNELS_LAST;
  tstor_layout_restride(&r, f);
  if (!batched) {
    squeeze0(&r);
    tstor__layout_contiguous(&r);
  }
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
