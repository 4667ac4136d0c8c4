/* The output layout of matrix products (mm, bmm, matmul, linear), as ATen's
 * LinearAlgebra.cpp checks and computes it: a new contiguous tensor of the
 * operands' one dtype, with PyTorch's messages word for word. */
#include "shape/shape_internal.h"

#include <stdio.h>
#include <string.h>

/* The C++ name of a dtype's element type, as torch's messages print a
 * caffe2 TypeMeta ("long int", "c10::Half"). */
static const char *cpp_type_name(tstor_dtype d, char *buf, size_t size) {
  switch (d) {
    case TSTOR_UINT8: return "unsigned char";
    case TSTOR_INT8: return "signed char";
    case TSTOR_INT16: return "short int";
    case TSTOR_INT32: return "int";
    case TSTOR_INT64: return "long int";
    case TSTOR_UINT16: return "short unsigned int";
    case TSTOR_UINT32: return "unsigned int";
    case TSTOR_UINT64: return "long unsigned int";
    case TSTOR_FLOAT32: return "float";
    case TSTOR_FLOAT64: return "double";
    case TSTOR_BOOL: return "bool";
    case TSTOR_COMPLEX32: return "c10::complex<c10::Half>";
    case TSTOR_BCOMPLEX32: return "c10::complex<c10::BFloat16>";
    case TSTOR_COMPLEX64: return "c10::complex<float>";
    case TSTOR_COMPLEX128: return "c10::complex<double>";
    case TSTOR_QINT8: return "c10::qint8";
    case TSTOR_QUINT8: return "c10::quint8";
    case TSTOR_QINT32: return "c10::qint32";
    case TSTOR_QUINT4X2: return "c10::quint4x2";
    case TSTOR_QUINT2X4: return "c10::quint2x4";
    default: break;
  }
  /* c10::Half, c10::BFloat16, c10::Float8_e5m2, ...: the c10 name */
  snprintf(buf, size, "c10::%s", tstor_dtype_info_of(d)->scalar_type);
  return buf;
}

/* The dtypes torch 2.x added, whose scalar-type checks print Python's names. */
static int is_torch2_dtype(tstor_dtype d) {
  return d == TSTOR_UINT16 || d == TSTOR_UINT32 || d == TSTOR_UINT64 || d == TSTOR_FLOAT8_E8M0FNU ||
         d == TSTOR_FLOAT4_E2M1FN_X2 || d == TSTOR_BCOMPLEX32;
}

/* TSTOR_EDTYPE unless a and b have one dtype: bmm's words, and the batched
 * matmul's. */
static int check_same_dtype(const tstor_layout *a, const tstor_layout *b) {
  if (a->dtype == b->dtype) return 0;
  if (is_torch2_dtype(a->dtype))
    return tstor__err(TSTOR_EDTYPE, "expected scalar type torch.%s but found torch.%s",
                      tstor_dtype_name(a->dtype), tstor_dtype_name(b->dtype));
  return tstor__err(TSTOR_EDTYPE, "expected scalar type %s but found %s",
                    tstor_dtype_info_of(a->dtype)->scalar_type,
                    tstor_dtype_info_of(b->dtype)->scalar_type);
}

/* The same for mm (and what goes through it): torch 2.x's words. */
static int check_mm_dtype(const tstor_layout *a, const tstor_layout *b) {
  if (a->dtype == b->dtype) return 0;
  char x[48], y[48];
  return tstor__err(TSTOR_EDTYPE, "expected m1 and m2 to have the same dtype, but got: %s != %s",
                    cpp_type_name(a->dtype, x, sizeof x), cpp_type_name(b->dtype, y, sizeof y));
}

/* ----------------------------------------------------------- matrix products */

int tstor_layout_mm(const tstor_layout *a, const tstor_layout *b, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(a, "mm: self")) < 0 ||
      (rc = tstor__check_layout(b, "mm: mat2")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "mm: out is NULL");
  if (a->ndim != 2)
    return tstor__err(TSTOR_EINVAL, "mm: self must be a matrix, got %d-D tensor", a->ndim);
  if (b->ndim != 2)
    return tstor__err(TSTOR_EINVAL, "mm: mat2 must be a matrix, got %d-D tensor", b->ndim);
  if (a->sizes[1] != b->sizes[0])
    return tstor__err(TSTOR_EINVAL,
                      "mm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                      "%lldx%lld)",
                      (long long)a->sizes[0], (long long)a->sizes[1], (long long)b->sizes[0],
                      (long long)b->sizes[1]);
  if ((rc = check_mm_dtype(a, b)) < 0) return rc;
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
  /* the dtypes are checked with the words of the kernel matmul goes to */
  if (da == 2 && db == 2)
    rc = check_mm_dtype(a, b);
  else if (da >= 3 && db == 2)
    rc = check_mm_dtype(a, b); /* folded into mm */
  else
    rc = check_same_dtype(a, b);
  if (rc < 0) return rc;
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
                        "mm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                        "%lldx%lld)",
                        (long long)n, (long long)k, (long long)k2, (long long)m);
    }
  } else {
    /* the batch dimensions broadcast */
    int ba = da > 2 ? da - 2 : 0, bb = db > 2 ? db - 2 : 0;
    int ndims[2] = {ba, bb};
    const int64_t *sz[2] = {a->sizes, b->sizes};
    if ((rc = tstor__broadcast_shapes(2, ndims, sz, &nd, s)) < 0) return rc;
    if (k != k2) {
      if (da >= 3 && db <= 2)
        return tstor__err(TSTOR_EINVAL,
                          "mm: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
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

/* addmm's refusal of a bias that does not expand to its (rows, out) result,
 * the rows those of the input flattened to 2-d. */
static int addmm_expand_error(const tstor_layout *input, const tstor_layout *r,
                              const tstor_layout *bias) {
  int64_t target[2] = {1, r->sizes[r->ndim - 1]};
  for (int d = 0; d < input->ndim - 1; d++) target[0] = tstor__mul_wrap(target[0], input->sizes[d]);
  char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
  for (int i = 1, j = bias->ndim - 1; j >= 0; i--, j--)
    if (bias->sizes[j] != target[i] && bias->sizes[j] != 1)
      return tstor__err(TSTOR_ESIZE,
                        "The expanded size of the tensor (%lld) must match the existing size "
                        "(%lld) at non-singleton dimension %d.  Target sizes: %s.  Tensor "
                        "sizes: %s",
                        (long long)target[i], (long long)bias->sizes[j], i,
                        tstor__dims_str(a, sizeof a, 2, target),
                        tstor__dims_str(b, sizeof b, bias->ndim, bias->sizes));
  return TSTOR_ESIZE; /* the broadcast's own message stands */
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
  int addmm =
      bias && (input->ndim == 2 ||
               (input->ndim == 3 && tstor__compute_contiguous(3, input->sizes, input->strides)));
  if (addmm && weight->ndim < 2)
    return tstor__err(TSTOR_EINVAL, "addmm: mat2 must be a matrix, got %d-D tensor", weight->ndim);
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
    rc = tstor__broadcast_shapes(2, ndims, sz, &nd, s);
    if (rc < 0 && addmm && r.ndim >= 1 && bias->ndim <= 2) rc = addmm_expand_error(input, &r, bias);
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
  char x[48], y[48], z[48];
  if (query->dtype != key->dtype || query->dtype != value->dtype)
    return tstor__err(TSTOR_EDTYPE,
                      "Expected query, key, and value to have the same dtype, but got "
                      "query.dtype: %s key.dtype: %s and value.dtype: %s instead.",
                      cpp_type_name(query->dtype, x, sizeof x),
                      cpp_type_name(key->dtype, y, sizeof y),
                      cpp_type_name(value->dtype, z, sizeof z));
  int cat = tstor__dtype_category(query->dtype);
  if (tstor__is_quantized(query->dtype) ||
      (tstor_dtype_info_of(query->dtype)->kind == TSTOR_KIND_OPAQUE && cat != TSTOR__CAT_FLOAT))
    return tstor__err(TSTOR_EDTYPE, "scaled_dot_product_attention: %s is not a floating dtype",
                      tstor_dtype_name(query->dtype));
  /* the math: softmax(query . key^T) . value, which torch computes with float
   * attention weights: its matmul refuses them beside integers, while its
   * meta kernels let complex and float8 through */
  if (cat == TSTOR__CAT_BOOL || cat == TSTOR__CAT_INTEGER)
    return tstor__err(TSTOR_EDTYPE,
                      "expected m1 and m2 to have the same dtype, but got: float != %s",
                      cpp_type_name(query->dtype, x, sizeof x));
  /* three 3-dimensional inputs are computed as 4-dimensional ones with a
   * leading batch of 1, which torch's broadcast errors then count in */
  tstor_layout lifted[3];
  bool lift = query->ndim == 3 && key->ndim == 3 && value->ndim == 3;
  if (lift) {
    const tstor_layout *in[3] = {query, key, value};
    for (int i = 0; i < 3; i++) {
      tstor_layout *l = &lifted[i];
      l->dtype = in[i]->dtype;
      l->ndim = 4;
      l->sizes[0] = 1;
      l->strides[0] = in[i]->sizes[0] * in[i]->strides[0];
      memcpy(l->sizes + 1, in[i]->sizes, 3 * sizeof l->sizes[0]);
      memcpy(l->strides + 1, in[i]->strides, 3 * sizeof l->strides[0]);
    }
    query = &lifted[0], key = &lifted[1], value = &lifted[2];
  }
  /* each product a matmul */
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
  if (lift) { /* the leading 1 dropped */
    r.ndim = 3;
    memmove(r.sizes, r.sizes + 1, 3 * sizeof r.sizes[0]);
  }
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
