/* The output layout of matrix products (mm, bmm, matmul, linear), as ATen's
 * LinearAlgebra.cpp checks and computes it: a new contiguous tensor of the
 * operands' one dtype, with PyTorch's messages word for word. */
#include "shape/shape_internal.h"

#include <string.h>

/* TSTOR_EDTYPE unless a and b have one dtype. */
static int check_same_dtype(const tstor_layout *a, const tstor_layout *b) {
  if (a->dtype == b->dtype) return 0;
  return tstor__err(TSTOR_EDTYPE, "expected scalar type %s but found %s",
                    tstor_dtype_info_of(a->dtype)->scalar_type,
                    tstor_dtype_info_of(b->dtype)->scalar_type);
}

/* ----------------------------------------------------------- matrix products */

int tstor_layout_mm(const tstor_layout *a, const tstor_layout *b, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(a, "mm: self")) < 0 ||
      (rc = tstor__check_layout(b, "mm: mat2")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "mm: out is NULL");
  if (a->ndim != 2) return tstor__err(TSTOR_EINVAL, "self must be a matrix");
  if (b->ndim != 2) return tstor__err(TSTOR_EINVAL, "mat2 must be a matrix");
  if (a->sizes[1] != b->sizes[0])
    return tstor__err(TSTOR_EINVAL,
                      "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                      "%lldx%lld)",
                      (long long)a->sizes[0], (long long)a->sizes[1], (long long)b->sizes[0],
                      (long long)b->sizes[1]);
  if ((rc = check_same_dtype(a, b)) < 0) return rc;
  int64_t s[2] = {a->sizes[0], b->sizes[1]};
  return tstor__set_contiguous(out, a->dtype, 2, s);
}

/* Kept apart from tstor_layout_mm: the checks and messages are PyTorch's,
 * word for word, and differ per op. */
int tstor_layout_bmm(const tstor_layout *a, const tstor_layout *b, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(a, "bmm: batch1")) < 0 ||
      (rc = tstor__check_layout(b, "bmm: batch2")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "bmm: out is NULL");
  if (a->ndim != 3) return tstor__err(TSTOR_EINVAL, "batch1 must be a 3D tensor");
  if (b->ndim != 3) return tstor__err(TSTOR_EINVAL, "batch2 must be a 3D tensor");
  if (b->sizes[0] != a->sizes[0] || b->sizes[1] != a->sizes[2])
    return tstor__err(TSTOR_EINVAL,
                      "Expected size for first two dimensions of batch2 tensor to "
                      "be: [%lld, %lld] but got: [%lld, %lld].",
                      (long long)a->sizes[0], (long long)a->sizes[2], (long long)b->sizes[0],
                      (long long)b->sizes[1]);
  if ((rc = check_same_dtype(a, b)) < 0) return rc;
  int64_t s[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
  return tstor__set_contiguous(out, a->dtype, 3, s);
}

int tstor_layout_matmul(const tstor_layout *a, const tstor_layout *b, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(a, "matmul: self")) < 0 ||
      (rc = tstor__check_layout(b, "matmul: other")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "matmul: out is NULL");
  int da = a->ndim, db = b->ndim;
  if (da == 0 || db == 0)
    return tstor__err(TSTOR_EINVAL,
                      "both arguments to matmul need to be at least 1D, but they "
                      "are %dD and %dD",
                      da, db);
  if ((rc = check_same_dtype(a, b)) < 0) return rc;
  if (da == 1 && db == 1) {
    if (a->sizes[0] != b->sizes[0])
      return tstor__err(TSTOR_EINVAL,
                        "inconsistent tensor size, expected tensor [%lld] and src "
                        "[%lld] to have the same number of elements, but got %lld and %lld "
                        "elements respectively",
                        (long long)a->sizes[0], (long long)b->sizes[0], (long long)a->sizes[0],
                        (long long)b->sizes[0]);
    return tstor__set_contiguous(out, a->dtype, 0, NULL);
  }
  /* a 1-d left operand is a row, a 1-d right one a column; both dropped after */
  int64_t n = da >= 2 ? a->sizes[da - 2] : 1, k = a->sizes[da - 1];
  int64_t k2 = db >= 2 ? b->sizes[db - 2] : b->sizes[0], m = db >= 2 ? b->sizes[db - 1] : 1;
  int64_t s[TSTOR_TENSOR_MAX_DIM];
  int nd = 0;
  if (da <= 2 && db <= 2) {
    if (k != k2) {
      if (db == 1)
        return tstor__err(TSTOR_EINVAL, "size mismatch, got %lld, %lldx%lld,%lld", (long long)n,
                          (long long)n, (long long)k, (long long)k2);
      return tstor__err(TSTOR_EINVAL,
                        "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                        "%lldx%lld)",
                        (long long)n, (long long)k, (long long)k2, (long long)m);
    }
  } else {
    /* the batch dimensions broadcast */
    int ba = da > 2 ? da - 2 : 0, bb = db > 2 ? db - 2 : 0;
    int ndims[2] = {ba, bb};
    const int64_t *sz[2] = {a->sizes, b->sizes};
    if ((rc = tstor_broadcast_shapes(2, ndims, sz, &nd, s)) < 0) return rc;
    if (k != k2) {
      if (da >= 3 && db <= 2)
        return tstor__err(TSTOR_EINVAL,
                          "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                          "%lldx%lld)",
                          (long long)n, (long long)k, (long long)k2, (long long)m);
      return tstor__err(TSTOR_EINVAL,
                        "Expected size for first two dimensions of batch2 tensor "
                        "to be: [%lld, %lld] but got: [%lld, %lld].",
                        (long long)(nd ? s[0] : 1), (long long)k, (long long)(nd ? s[0] : 1),
                        (long long)k2);
    }
  }
  if (da >= 2) s[nd++] = n;
  if (db >= 2) s[nd++] = m;
  return tstor__set_contiguous(out, a->dtype, nd, s);
}

int tstor_layout_linear(const tstor_layout *input, const tstor_layout *weight,
                        const tstor_layout *bias, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(input, "linear: input")) < 0 ||
      (rc = tstor__check_layout(weight, "linear: weight")) < 0 ||
      (rc = tstor__check_optional(bias, "linear: bias")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "linear: out is NULL");
  if (weight->ndim > 2)
    return tstor__err(TSTOR_EINVAL, "t() expects a tensor with <= 2 dimensions, but self is %dD",
                      weight->ndim);
  /* with a bias, a 2-d input (or a contiguous 3-d one, flattened to 2-d)
   * goes through addmm, which takes no vector for a weight */
  if (bias && weight->ndim < 2 &&
      (input->ndim == 2 ||
       (input->ndim == 3 && tstor__compute_contiguous(3, input->sizes, input->strides))))
    return tstor__err(TSTOR_EINVAL, "mat2 must be a matrix, got %d-D tensor", weight->ndim);
  tstor_layout wt; /* weight.t() */
  tstor__layout_copy(&wt, weight);
  if (wt.ndim == 2) {
    wt.sizes[0] = weight->sizes[1];
    wt.sizes[1] = weight->sizes[0];
    wt.strides[0] = weight->strides[1];
    wt.strides[1] = weight->strides[0];
  }
  tstor_layout r;
  if ((rc = tstor_layout_matmul(input, &wt, &r)) < 0) return rc;
  if (bias) {
    /* the bias is added in place: it must broadcast to the output unchanged */
    int ndims[2] = {r.ndim, bias->ndim}, nd;
    const int64_t *sz[2] = {r.sizes, bias->sizes};
    int64_t s[TSTOR_TENSOR_MAX_DIM];
    char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
    rc = tstor_broadcast_shapes(2, ndims, sz, &nd, s);
    if (rc == 0 && (nd != r.ndim || memcmp(s, r.sizes, sizeof(int64_t) * (size_t)nd) != 0))
      rc = tstor__err(TSTOR_EINVAL,
                      "linear: bias of size %s does not broadcast to the output "
                      "size %s",
                      tstor__dims_str(a, sizeof a, bias->ndim, bias->sizes),
                      tstor__dims_str(b, sizeof b, r.ndim, r.sizes));
    if (rc < 0) return rc;
    if ((rc = check_same_dtype(&r, bias)) < 0) return rc;
  }
  tstor__layout_copy(out, &r);
  return 0;
}

/* ------------------------------------------------------------ tensor forms */

static int mm_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_mm(in[0], in[1], out);
}

static int bmm_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_bmm(in[0], in[1], out);
}

/* ------------------------------------------------ scaled_dot_product_attention */

static const char *sdpa_dtype_name(tstor_dtype d) {
  /* the caffe2 type names torch's message prints */
  switch (d) {
    case TSTOR_FLOAT32: return "float";
    case TSTOR_FLOAT64: return "double";
    case TSTOR_FLOAT16: return "c10::Half";
    case TSTOR_BFLOAT16: return "c10::BFloat16";
    default: return tstor_dtype_name(d);
  }
}

int tstor_layout_scaled_dot_product_attention(const tstor_layout *query, const tstor_layout *key,
                                              const tstor_layout *value, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(query, "scaled_dot_product_attention: query")) < 0 ||
      (rc = tstor__check_layout(key, "scaled_dot_product_attention: key")) < 0 ||
      (rc = tstor__check_layout(value, "scaled_dot_product_attention: value")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "scaled_dot_product_attention: out is NULL");
  if (query->ndim < 2 || key->ndim < 2 || value->ndim < 2)
    return tstor__err(TSTOR_EINVAL,
                      "Expected query, key, and value to all be  at least 2 dimensional, but "
                      "got query.dim: %d key.dim: %d and value.dim: %d instead.",
                      query->ndim, key->ndim, value->ndim);
  if (query->dtype != key->dtype || query->dtype != value->dtype)
    return tstor__err(TSTOR_EDTYPE,
                      "Expected query, key, and value to have the same dtype, but got "
                      "query.dtype: %s key.dtype: %s and value.dtype: %s instead.",
                      sdpa_dtype_name(query->dtype), sdpa_dtype_name(key->dtype),
                      sdpa_dtype_name(value->dtype));
  if (tstor__dtype_category(query->dtype) != TSTOR__CAT_FLOAT || tstor__is_quantized(query->dtype))
    return tstor__err(TSTOR_EDTYPE, "scaled_dot_product_attention: %s is not a floating dtype",
                      tstor_dtype_name(query->dtype));
  /* the math: softmax(query . key^T) . value, each product a matmul */
  tstor_layout kt, attn, r;
  tstor__layout_copy(&kt, key);
  int n = kt.ndim;
  int64_t t = kt.sizes[n - 1];
  kt.sizes[n - 1] = kt.sizes[n - 2];
  kt.sizes[n - 2] = t;
  t = kt.strides[n - 1];
  kt.strides[n - 1] = kt.strides[n - 2];
  kt.strides[n - 2] = t;
  if ((rc = tstor_layout_matmul(query, &kt, &attn)) < 0 ||
      (rc = tstor_layout_matmul(&attn, value, &r)) < 0)
    return rc;
  tstor__layout_contiguous(&r);
  tstor__layout_copy(out, &r);
  return 0;
}

static int sdpa_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_scaled_dot_product_attention(in[0], in[1], in[2], out);
}

int tstor_shape_scaled_dot_product_attention(const tstor_tensor *query, const tstor_tensor *key,
                                             const tstor_tensor *value, tstor_tensor **out) {
  const tstor_tensor *ts[3] = {query, key, value};
  return tstor__shape_form("shape_scaled_dot_product_attention", 3, ts, 3, sdpa_form, NULL, out);
}

static int matmul_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_matmul(in[0], in[1], out);
}

static int linear_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_linear(in[0], in[1], in[2], out);
}

int tstor_shape_mm(const tstor_tensor *a, const tstor_tensor *b, tstor_tensor **out) {
  const tstor_tensor *ts[2] = {a, b};
  return tstor__shape_form("shape_mm", 2, ts, 2, mm_form, NULL, out);
}

int tstor_shape_bmm(const tstor_tensor *a, const tstor_tensor *b, tstor_tensor **out) {
  const tstor_tensor *ts[2] = {a, b};
  return tstor__shape_form("shape_bmm", 2, ts, 2, bmm_form, NULL, out);
}

int tstor_shape_matmul(const tstor_tensor *a, const tstor_tensor *b, tstor_tensor **out) {
  const tstor_tensor *ts[2] = {a, b};
  return tstor__shape_form("shape_matmul", 2, ts, 2, matmul_form, NULL, out);
}

int tstor_shape_linear(const tstor_tensor *input, const tstor_tensor *weight,
                       const tstor_tensor *bias, tstor_tensor **out) {
  const tstor_tensor *ts[3] = {input, weight, bias};
  return tstor__shape_form("shape_linear", 3, ts, 2, linear_form, NULL, out);
}
