/* The output layout of 2-d pooling, as ATen's Pooling.cpp checks and
 * computes it (pool2d_shape_check, pooling_output_shape), keeping the
 * input's memory format; and of adaptive pooling, as
 * AdaptiveAveragePooling.cpp and AdaptiveMaxPooling2d.cpp. */
#include "shape/shape_internal.h"

/* ---------------------------------------------------------------- pooling */

/* floor division, as ATen's div_rtn */
static int64_t div_floor(int64_t x, int64_t y) {
  int64_t q = x / y, r = x % y;
  if (r != 0 && ((r < 0) != (y < 0))) q--;
  return q;
}

/* ATen's pooling_output_shape, with its checks. */
static int pool_out(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, int ceil,
                    int64_t *out) {
  if (stride == 0) return tstor__err(TSTOR_EINVAL, "stride should not be zero");
  if (pad < 0)
    return tstor__err(TSTOR_EINVAL, "pad must be non-negative, but got pad: %lld", (long long)pad);
  /* torch 2.x: half of the dilated kernel */
  if (pad > ((k - 1) * dil + 1) / 2)
    return tstor__err(TSTOR_EINVAL,
                      "pad should be at most half of effective kernel size, but got pad=%lld, "
                      "kernel_size=%lld and dilation=%lld",
                      (long long)pad, (long long)k, (long long)dil);
  int64_t o = div_floor(in + 2 * pad - dil * (k - 1) - 1 + (ceil ? stride - 1 : 0), stride) + 1;
  /* in ceil mode the last window must start inside the input or the left
   * padding, never in the right padding alone */
  if (ceil && (o - 1) * stride >= in + pad) o--;
  *out = o;
  return 0;
}

static const tstor_pool_params pool_defaults = TSTOR_POOL_PARAMS_INIT(0, 0);
static const tstor__params_kind pool_params = {
    .type = "tstor_pool_params",
    .init = "TSTOR_POOL_PARAMS_INIT",
    .first = offsetof(tstor_pool_params, ceil_mode) + sizeof(int),
    .current = sizeof(tstor_pool_params),
    .defaults = &pool_defaults};

static int pool2d(const char *name, int dilated, const tstor_layout *input,
                  const tstor_pool_params *p, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(input, name)) < 0) return rc;
  if (!p || !out) return tstor__err(TSTOR_EINVAL, "%s: NULL %s", name, p ? "out" : "params");
  tstor_pool_params q;
  if ((rc = tstor__params_read(&pool_params, p, &q)) < 0) return rc;
  p = &q;
  int64_t kh = p->kernel[0], kw = p->kernel[1];
  int64_t sh = p->stride[0], sw = p->stride[1];
  int64_t dh = dilated ? p->dilation[0] : 1, dw = dilated ? p->dilation[1] : 1;
  if (!dilated && (p->dilation[0] != 1 || p->dilation[1] != 1))
    return tstor__err(TSTOR_EINVAL, "%s: no dilation (leave it {1, 1})", name);
  if (kh <= 0 || kw <= 0)
    return tstor__err(TSTOR_EINVAL,
                      "kernel size should be greater than zero, but got kH: %lld "
                      "kW: %lld",
                      (long long)kh, (long long)kw);
  if (sh == 0 || sw == 0) return tstor__err(TSTOR_EINVAL, "stride should not be zero");
  if (sh < 0 || sw < 0)
    return tstor__err(TSTOR_EINVAL,
                      "stride should be greater than zero, but got dH: %lld dW: "
                      "%lld",
                      (long long)sh, (long long)sw);
  if (dh <= 0 || dw <= 0)
    return tstor__err(TSTOR_EINVAL,
                      "dilation should be greater than zero, but got dilationH: "
                      "%lld dilationW: %lld",
                      (long long)dh, (long long)dw);
  int nd = input->ndim;
  const int64_t *s = input->sizes;
  int ok = (nd == 3 && s[0] != 0 && s[1] != 0 && s[2] != 0) ||
           (nd == 4 && s[1] != 0 && s[2] != 0 && s[3] != 0);
  if (!ok) {
    char a[TSTOR__SHAPE_STR_MAX];
    /* under 3 dimensions avg_pool2d reads dimension -3 first (PyTorch's
     * IndexError) and max_pool2d says it in its own words */
    if (nd < 3 && !dilated)
      return tstor__err(TSTOR_ERANGE,
                        "Dimension out of range (expected to be in range of [%d, %d], but got -3)",
                        nd ? -nd : -1, nd ? nd - 1 : 0);
    if (nd < 3)
      return tstor__err(TSTOR_EINVAL, "non-empty 3D or 4D (batch mode) tensor expected for input");
    return tstor__err(TSTOR_EINVAL,
                      "Expected 3D or 4D (batch mode) tensor with optional 0 dim "
                      "batch size for input, but got:%s",
                      tstor__dims_str(a, sizeof a, nd, s));
  }
  const int64_t big = (int64_t)1 << 31;
  if (kh > big || kw > big || sh > big || sw > big || dh > big || dw > big || s[nd - 2] > big ||
      s[nd - 1] > big || p->padding[0] > big || p->padding[1] > big)
    return tstor__err(TSTOR_EOVERFLOW,
                      "%s: kernel, stride, padding, dilation and the input's "
                      "height and width must be below 2^31",
                      name);
  int64_t ih = s[nd - 2], iw = s[nd - 1], oh, ow;
  if ((rc = pool_out(ih, kh, p->padding[0], sh, dh, p->ceil_mode, &oh)) < 0 ||
      (rc = pool_out(iw, kw, p->padding[1], sw, dw, p->ceil_mode, &ow)) < 0)
    return rc;
  if (oh < 1 || ow < 1)
    return tstor__err(TSTOR_EINVAL,
                      "Given input size: (%lldx%lldx%lld). Calculated output size: "
                      "(%lldx%lldx%lld). Output size is too small",
                      (long long)s[nd - 3], (long long)ih, (long long)iw, (long long)s[nd - 3],
                      (long long)oh, (long long)ow);
  tstor_layout r;
  tstor__layout_copy(&r, input);
  r.sizes[nd - 2] = oh;
  r.sizes[nd - 1] = ow;
  tstor_layout_restride(&r, nd == 4 ? tstor_layout_memory_format(input) : TSTOR_MEMORY_CONTIGUOUS);
  tstor__layout_copy(out, &r);
  return 0;
}

int tstor_layout_max_pool2d(const tstor_layout *input, const tstor_pool_params *p,
                            tstor_layout *out) {
  return pool2d("max_pool2d", 1, input, p, out);
}

int tstor_layout_avg_pool2d(const tstor_layout *input, const tstor_pool_params *p,
                            tstor_layout *out) {
  return pool2d("avg_pool2d", 0, input, p, out);
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

/* The input's sizes from dimension `first` on (those the kernel reads) are
 * not 0. */
static int check_nonzero_sizes(const char *name, const tstor_layout *in, int first) {
  for (int i = first; i < in->ndim; i++)
    if (in->sizes[i] == 0) {
      char a[TSTOR__SHAPE_STR_MAX];
      return tstor__err(TSTOR_EINVAL,
                        "%s(): Expected input to have non-zero size for non-batch dimensions, "
                        "but input has sizes %s with dimension %d being empty",
                        name, tstor__dims_str(a, sizeof a, in->ndim, in->sizes), i);
    }
  return 0;
}

int tstor_layout_adaptive_avg_pool2d(const tstor_layout *input, const int64_t output_size[2],
                                     tstor_layout *out) {
  int rc;
  char a[TSTOR__SHAPE_STR_MAX];
  if ((rc = adaptive_args("adaptive_avg_pool2d", input, output_size, out)) < 0) return rc;
  if (output_size[0] < 0 || output_size[1] < 0)
    return tstor__err(TSTOR_EINVAL,
                      "adaptive_avg_pool2d: elements of output_size must be greater "
                      "than or equal to 0 but received {%lld, %lld}",
                      (long long)output_size[0], (long long)output_size[1]);
  tstor_layout r;
  if (output_size[0] == 1 && output_size[1] == 1 && !tstor__is_quantized(input->dtype)) {
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
  if ((rc = check_nonzero_sizes("adaptive_avg_pool2d", input, nd - 2)) < 0) return rc;
  if (nd != 3 && nd != 4)
    return tstor__err(TSTOR_EINVAL, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got %s",
                      tstor__dims_str(a, sizeof a, nd, input->sizes));
  /* torch 2.x's meta kernel: in the input's suggested memory format (1.13's
   * was contiguous whatever the input) */
  tstor__layout_copy(&r, input);
  r.sizes[nd - 2] = output_size[0];
  r.sizes[nd - 1] = output_size[1];
  if (nd == 4 && tstor_layout_memory_format(input) == TSTOR_MEMORY_CHANNELS_LAST)
    tstor_layout_restride(&r, TSTOR_MEMORY_CHANNELS_LAST);
  else
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
                      tstor__dims_str(a, sizeof a, nd, input->sizes));
  if ((rc = check_nonzero_sizes("adaptive_max_pool2d", input, 1)) < 0) return rc;
  tstor_layout r;
  tstor__layout_copy(&r, input);
  r.sizes[nd - 2] = output_size[0];
  r.sizes[nd - 1] = output_size[1];
  if (output_size[0] < 0 || output_size[1] < 0)
    return tstor__err(TSTOR_EINVAL, "Trying to create tensor with negative dimension %lld: %s",
                      (long long)(output_size[0] < 0 ? output_size[0] : output_size[1]),
                      tstor__dims_str(b, sizeof b, nd, r.sizes));
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

/* ------------------------------------------------------------ tensor forms */

static int max_pool2d_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_max_pool2d(in[0], args, out);
}

static int avg_pool2d_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_avg_pool2d(in[0], args, out);
}

int tstor_shape_max_pool2d(const tstor_tensor *input, const tstor_pool_params *p,
                           tstor_tensor **out) {
  return tstor__shape_form("shape_max_pool2d", 1, &input, 1, max_pool2d_form, p, out);
}

int tstor_shape_avg_pool2d(const tstor_tensor *input, const tstor_pool_params *p,
                           tstor_tensor **out) {
  return tstor__shape_form("shape_avg_pool2d", 1, &input, 1, avg_pool2d_form, p, out);
}

static int adaptive_avg_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_adaptive_avg_pool2d(in[0], args, out);
}

int tstor_shape_adaptive_avg_pool2d(const tstor_tensor *input, const int64_t output_size[2],
                                    tstor_tensor **out) {
  return tstor__shape_form("shape_adaptive_avg_pool2d", 1, &input, 1, adaptive_avg_form,
                           output_size, out);
}

static int adaptive_max_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_adaptive_max_pool2d(in[0], args, out, NULL);
}

int tstor_shape_adaptive_max_pool2d(const tstor_tensor *input, const int64_t output_size[2],
                                    tstor_tensor **out, tstor_tensor **indices) {
  if (indices) *indices = NULL;
  int rc = tstor__shape_form("shape_adaptive_max_pool2d", 1, &input, 1, adaptive_max_form,
                             output_size, out);
  if (rc < 0 || !indices) return rc;
  /* the indices: the output's layout, of int64, on its device */
  const tstor_tensor *t = *out;
  rc = tstor_tensor_empty_strided(t->storage->ctx, t->storage->device, TSTOR_INT64, t->ndim,
                                  t->sizes, t->strides, indices);
  if (rc < 0) {
    tstor_tensor_release(*out);
    *out = NULL;
  }
  return rc;
}
