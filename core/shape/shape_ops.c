/* Shape inference for matrix products, cat and stack, embedding,
 * index_select and softmax. Their outputs are new contiguous tensors (or, for
 * cat, dense in the inputs' common memory format), as PyTorch's. */
#include "shape/shape_internal.h"

#include <string.h>


static int same_dtype(const tstor_layout *a, const tstor_layout *b) {
  if (a->dtype == b->dtype) return 0;
  return tstor__err(TSTOR_EDTYPE, "expected scalar type %s but found %s",
                    tstor_dtype_info_of(a->dtype)->scalar_type,
                    tstor_dtype_info_of(b->dtype)->scalar_type);
}

/* A new contiguous output, refused as PyTorch's empty() refuses it when its
 * byte count passes int64 (the strides would wrap). */
static int set_contiguous(tstor_layout *out, tstor_dtype dtype, int ndim, const int64_t *sizes) {
  uint64_t nbytes;
  int rc = tstor__layout_nbytes(ndim, sizes, NULL, tstor_dtype_size(dtype), &nbytes);
  if (rc) return rc;
  out->dtype = dtype;
  out->ndim = ndim;
  if (ndim) memmove(out->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  tstor__layout_contiguous(out);
  return 0;
}

/* ----------------------------------------------------------- matrix products */

int tstor_layout_mm(const tstor_layout *a, const tstor_layout *b, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(a, "mm: self")) < 0 || (rc = tstor__check_layout(b, "mm: mat2")) < 0) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "mm: out is NULL");
  if (a->ndim != 2) return tstor__err(TSTOR_EINVAL, "self must be a matrix");
  if (b->ndim != 2) return tstor__err(TSTOR_EINVAL, "mat2 must be a matrix");
  if (a->sizes[1] != b->sizes[0])
    return tstor__err(TSTOR_EINVAL, "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                      "%lldx%lld)", (long long)a->sizes[0], (long long)a->sizes[1],
                      (long long)b->sizes[0], (long long)b->sizes[1]);
  if ((rc = same_dtype(a, b)) < 0) return rc;
  int64_t s[2] = {a->sizes[0], b->sizes[1]};
  return set_contiguous(out, a->dtype, 2, s);
}

/* Kept apart from tstor_layout_mm: the checks and messages are PyTorch's,
 * word for word, and differ per op. */
int tstor_layout_bmm(const tstor_layout *a, const tstor_layout *b, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(a, "bmm: batch1")) < 0 || (rc = tstor__check_layout(b, "bmm: batch2")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "bmm: out is NULL");
  if (a->ndim != 3) return tstor__err(TSTOR_EINVAL, "batch1 must be a 3D tensor");
  if (b->ndim != 3) return tstor__err(TSTOR_EINVAL, "batch2 must be a 3D tensor");
  if (b->sizes[0] != a->sizes[0] || b->sizes[1] != a->sizes[2])
    return tstor__err(TSTOR_EINVAL, "Expected size for first two dimensions of batch2 tensor to "
                      "be: [%lld, %lld] but got: [%lld, %lld].", (long long)a->sizes[0],
                      (long long)a->sizes[2], (long long)b->sizes[0], (long long)b->sizes[1]);
  if ((rc = same_dtype(a, b)) < 0) return rc;
  int64_t s[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
  return set_contiguous(out, a->dtype, 3, s);
}

int tstor_layout_matmul(const tstor_layout *a, const tstor_layout *b, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(a, "matmul: self")) < 0 || (rc = tstor__check_layout(b, "matmul: other")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "matmul: out is NULL");
  int da = a->ndim, db = b->ndim;
  if (da == 0 || db == 0)
    return tstor__err(TSTOR_EINVAL, "both arguments to matmul need to be at least 1D, but they "
                      "are %dD and %dD", da, db);
  if ((rc = same_dtype(a, b)) < 0) return rc;
  if (da == 1 && db == 1) {
    if (a->sizes[0] != b->sizes[0])
      return tstor__err(TSTOR_EINVAL, "inconsistent tensor size, expected tensor [%lld] and src "
                        "[%lld] to have the same number of elements, but got %lld and %lld "
                        "elements respectively", (long long)a->sizes[0], (long long)b->sizes[0],
                        (long long)a->sizes[0], (long long)b->sizes[0]);
    return set_contiguous(out, a->dtype, 0, NULL);
  }
  /* a 1-d left operand is a row, a 1-d right one a column; both dropped after */
  int64_t n = da >= 2 ? a->sizes[da - 2] : 1, k = a->sizes[da - 1];
  int64_t k2 = db >= 2 ? b->sizes[db - 2] : b->sizes[0], m = db >= 2 ? b->sizes[db - 1] : 1;
  int64_t s[TSTOR_TENSOR_MAX_DIM];
  int nd = 0;
  if (da <= 2 && db <= 2) {
    if (k != k2) {
      if (db == 1)
        return tstor__err(TSTOR_EINVAL, "size mismatch, got %lld, %lldx%lld,%lld",
                          (long long)n, (long long)n, (long long)k, (long long)k2);
      return tstor__err(TSTOR_EINVAL, "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                        "%lldx%lld)", (long long)n, (long long)k, (long long)k2, (long long)m);
    }
  } else {
    /* the batch dimensions broadcast */
    int ba = da > 2 ? da - 2 : 0, bb = db > 2 ? db - 2 : 0;
    int ndims[2] = {ba, bb};
    const int64_t *sz[2] = {a->sizes, b->sizes};
    if ((rc = tstor_broadcast_shapes(2, ndims, sz, &nd, s)) < 0) return rc;
    if (k != k2) {
      if (da >= 3 && db <= 2)
        return tstor__err(TSTOR_EINVAL, "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and "
                          "%lldx%lld)", (long long)n, (long long)k, (long long)k2, (long long)m);
      return tstor__err(TSTOR_EINVAL, "Expected size for first two dimensions of batch2 tensor "
                        "to be: [%lld, %lld] but got: [%lld, %lld].", (long long)(nd ? s[0] : 1),
                        (long long)k, (long long)(nd ? s[0] : 1), (long long)k2);
    }
  }
  if (da >= 2) s[nd++] = n;
  if (db >= 2) s[nd++] = m;
  return set_contiguous(out, a->dtype, nd, s);
}

int tstor_layout_linear(const tstor_layout *input, const tstor_layout *weight,
                        const tstor_layout *bias, tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(input, "linear: input")) < 0 ||
      (rc = tstor__check_layout(weight, "linear: weight")) < 0 ||
      (bias && (rc = tstor__check_layout(bias, "linear: bias")) < 0))
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
      rc = tstor__err(TSTOR_EINVAL, "linear: bias of size %s does not broadcast to the output "
                      "size %s", tstor__dims_str(a, sizeof a, bias->ndim, bias->sizes),
                      tstor__dims_str(b, sizeof b, r.ndim, r.sizes));
    if (rc < 0) return rc;
    if ((rc = same_dtype(&r, bias)) < 0) return rc;
  }
  tstor__layout_copy(out, &r);
  return 0;
}

/* ------------------------------------------------------------ cat and stack */

/* PyTorch's legacy rule: a 1-d tensor of size 0 may join anything. */
static int cat_skips(const tstor_layout *l) { return l->ndim == 1 && l->sizes[0] == 0; }

int tstor_layout_cat(int n, const tstor_layout *in, int64_t dim, tstor_layout *out) {
  if (n < 1 || !in || !out)
    return tstor__err(TSTOR_EINVAL, "torch.cat(): expected a non-empty list of Tensors");
  int rc, ref = -1;
  tstor_dtype dtype = in[0].dtype;
  tstor_memory_format format = TSTOR_MEMORY_CONTIGUOUS;
  for (int i = 0; i < n; i++) {
    if ((rc = tstor__check_layout(&in[i], "cat: input")) < 0) return rc;
    if (in[i].ndim == 0)
      return tstor__err(TSTOR_EINVAL, "zero-dimensional tensor (at position %d) cannot be "
                        "concatenated", i);
    if (i && (rc = tstor_promote_types(dtype, in[i].dtype, &dtype)) < 0) return rc;
    tstor_memory_format f = tstor_layout_memory_format(&in[i]);
    if (i == 0) format = f;
    else if (f != format) format = TSTOR_MEMORY_CONTIGUOUS;
    if (ref < 0 && !cat_skips(&in[i])) ref = i;
  }
  if (ref < 0) { /* only empty 1-d inputs */
    int64_t zero = 0;
    return set_contiguous(out, dtype, 1, &zero);
  }
  int d;
  if ((rc = tstor__shape_wrap_dim(dim, in[ref].ndim, &d)) < 0) return rc;
  tstor_layout r;
  r.dtype = dtype;
  r.ndim = in[ref].ndim;
  memcpy(r.sizes, in[ref].sizes, sizeof(int64_t) * (size_t)r.ndim);
  r.sizes[d] = 0;
  for (int i = 0; i < n; i++) {
    const tstor_layout *l = &in[i];
    if (cat_skips(l)) continue;
    if (l->ndim != r.ndim)
      return tstor__err(TSTOR_EINVAL, "Tensors must have same number of dimensions: got %d and "
                        "%d", r.ndim, l->ndim);
    for (int j = 0; j < r.ndim; j++)
      if (j != d && l->sizes[j] != in[ref].sizes[j])
        return tstor__err(TSTOR_EINVAL, "Sizes of tensors must match except in dimension %d. "
                          "Expected size %lld but got size %lld for tensor number %d in the "
                          "list.", d, (long long)in[ref].sizes[j], (long long)l->sizes[j], i);
    if (__builtin_add_overflow(r.sizes[d], l->sizes[d], &r.sizes[d]))
      return tstor__err(TSTOR_EOVERFLOW, "cat: the size of dimension %d overflows", d);
  }
  if (tstor_layout_restride(&r, format) < 0) tstor__layout_contiguous(&r);
  tstor__layout_copy(out, &r);
  return 0;
}

int tstor_layout_stack(int n, const tstor_layout *in, int64_t dim, tstor_layout *out) {
  if (n < 1 || !in || !out)
    return tstor__err(TSTOR_EINVAL, "stack expects a non-empty TensorList");
  int rc, d;
  if ((rc = tstor__check_layout(&in[0], "stack: input")) < 0) return rc;
  int nd = in[0].ndim;
  if (nd + 1 > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "stack: %d dimensions are too many", nd + 1);
  if ((rc = tstor__shape_wrap_dim(dim, nd + 1, &d)) < 0) return rc;
  for (int i = 1; i < n; i++) {
    if ((rc = tstor__check_layout(&in[i], "stack: input")) < 0) return rc;
    if (in[i].ndim != nd || memcmp(in[i].sizes, in[0].sizes, sizeof(int64_t) * (size_t)nd)) {
      char a[TSTOR__SHAPE_STR_MAX], b[TSTOR__SHAPE_STR_MAX];
      return tstor__err(TSTOR_EINVAL, "stack expects each tensor to be equal size, but got %s at "
                        "entry 0 and %s at entry %d",
                        tstor__dims_str(a, sizeof a, nd, in[0].sizes),
                        tstor__dims_str(b, sizeof b, in[i].ndim, in[i].sizes), i);
    }
  }
  int64_t sizes[TSTOR_TENSOR_MAX_DIM];
  for (int j = 0, k = 0; j <= nd; j++) sizes[j] = j == d ? n : in[0].sizes[k++];
  tstor_layout r;
  if (d < nd && nd > 0) {
    /* as PyTorch: cat along d, then view the joined dimension as (n, size) */
    if ((rc = tstor_layout_cat(n, in, d, &r)) < 0) return rc;
    int64_t strides[TSTOR_TENSOR_MAX_DIM];
    if ((rc = tstor__view_strides(r.ndim, r.sizes, r.strides, nd + 1, sizes, strides, "stack")) < 0)
      return rc;
    r.ndim = nd + 1;
    memcpy(r.sizes, sizes, sizeof(int64_t) * (size_t)r.ndim);
    memcpy(r.strides, strides, sizeof(int64_t) * (size_t)r.ndim);
  } else {
    /* a new last dimension: what cat of the inputs unsqueezed there gives,
     * their dtypes promoted and their memory formats compared */
    tstor_layout u;
    tstor_dtype dtype = in[0].dtype;
    tstor_memory_format format = TSTOR_MEMORY_CONTIGUOUS;
    for (int i = 0; i < n; i++) {
      tstor__layout_copy(&u, &in[i]);
      u.sizes[nd] = 1;
      u.strides[nd] = 1;
      u.ndim = nd + 1;
      if (i && (rc = tstor_promote_types(dtype, in[i].dtype, &dtype)) < 0) return rc;
      tstor_memory_format f = tstor_layout_memory_format(&u);
      if (i == 0) format = f;
      else if (f != format) format = TSTOR_MEMORY_CONTIGUOUS;
    }
    r.dtype = dtype;
    r.ndim = nd + 1;
    memcpy(r.sizes, sizes, sizeof(int64_t) * (size_t)r.ndim);
    if (tstor_layout_restride(&r, format) < 0) tstor__layout_contiguous(&r);
  }
  tstor__layout_copy(out, &r);
  return 0;
}

/* ------------------------------------------------ embedding, index_select */

static int is_index_dtype(tstor_dtype d) { return d == TSTOR_INT32 || d == TSTOR_INT64; }

int tstor_layout_embedding(const tstor_layout *weight, const tstor_layout *indices,
                           tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(weight, "embedding: weight")) < 0 ||
      (rc = tstor__check_layout(indices, "embedding: indices")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "embedding: out is NULL");
  if (!is_index_dtype(indices->dtype))
    return tstor__err(TSTOR_EDTYPE, "Expected tensor for argument #1 'indices' to have one of "
                      "the following scalar types: Long, Int; but got %s instead (while checking "
                      "arguments for embedding)", tstor_dtype_name(indices->dtype));
  if (weight->ndim != 2) return tstor__err(TSTOR_EINVAL, "'weight' must be 2-D");
  if (indices->ndim + 1 > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "embedding: indices have too many dimensions");
  int64_t n = tstor_layout_numel(indices);
  if (weight->sizes[0] == 0 && n != 0)
    return tstor__err(TSTOR_ERANGE, "index_select(): self indexing axis dim should be positive");
  int64_t s[TSTOR_TENSOR_MAX_DIM];
  memcpy(s, indices->sizes, sizeof(int64_t) * (size_t)indices->ndim);
  s[indices->ndim] = weight->sizes[1];
  return set_contiguous(out, weight->dtype, indices->ndim + 1, s);
}

int tstor_layout_index_select(const tstor_layout *in, int64_t dim, const tstor_layout *index,
                              tstor_layout *out) {
  int rc, d;
  if ((rc = tstor__check_layout(in, "index_select: self")) < 0 ||
      (rc = tstor__check_layout(index, "index_select: index")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "index_select: out is NULL");
  if ((rc = tstor__shape_wrap_dim(dim, in->ndim, &d)) < 0) return rc;
  if (index->ndim > 1)
    return tstor__err(TSTOR_ERANGE, "index_select(): Index is supposed to be a vector");
  if (!is_index_dtype(index->dtype))
    return tstor__err(TSTOR_EDTYPE, "index_select(): Expected dtype int32 or int64 for index");
  int64_t n = tstor_layout_numel(index);
  if (in->ndim > 0 && in->sizes[d] == 0 && n != 0)
    return tstor__err(TSTOR_ERANGE, "index_select(): self indexing axis dim should be positive");
  int64_t s[TSTOR_TENSOR_MAX_DIM];
  memcpy(s, in->sizes, sizeof(int64_t) * (size_t)in->ndim);
  if (in->ndim > 0) s[d] = n;
  return set_contiguous(out, in->dtype, in->ndim, s);
}

/* softmax, its input taken as converted to *as_dtype first (NULL: kept). */
static int softmax(const tstor_layout *in, int64_t dim, const tstor_dtype *as_dtype,
                   tstor_layout *out) {
  int rc, d;
  if ((rc = tstor__check_layout(in, "softmax: input")) < 0) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "softmax: out is NULL");
  tstor_dtype dtype = as_dtype ? *as_dtype : in->dtype;
  if (!tstor_dtype_info_of(dtype)) return tstor__err(TSTOR_EINVAL, "softmax: bad dtype %d", (int)dtype);
  if ((rc = tstor__shape_wrap_dim(dim, in->ndim, &d)) < 0) return rc;
  if (tstor_dtype_info_of(in->dtype)->kind == TSTOR_KIND_QUANTIZED ||
      tstor_dtype_info_of(dtype)->kind == TSTOR_KIND_QUANTIZED)
    return tstor__err(TSTOR_EDTYPE, "softmax: quantized %s is not supported",
                      tstor_dtype_name(in->dtype));
  return set_contiguous(out, dtype, in->ndim, in->sizes);
}

int tstor_layout_softmax(const tstor_layout *in, int64_t dim, tstor_layout *out) {
  return softmax(in, dim, NULL, out);
}

int tstor_layout_softmax_dtype(const tstor_layout *in, int64_t dim, tstor_dtype dtype,
                               tstor_layout *out) {
  return softmax(in, dim, &dtype, out);
}

/* ------------------------------------------------------------ tensor forms */

#define TENSOR_FORM2(name, call)                                                          \
  int tstor_shape_##name(const tstor_tensor *a, const tstor_tensor *b, tstor_tensor **out) { \
    if (!out) return tstor__err(TSTOR_EINVAL, "shape_" #name ": out is NULL");          \
    *out = NULL;                                                                          \
    if (!a || !b) return tstor__err(TSTOR_EINVAL, "shape_" #name ": NULL tensor");      \
    const tstor_tensor *ts[2] = {a, b};                                                   \
    tstor_layout l[2], r;                                                                 \
    tstor_context *ctx = NULL;                                                            \
    tstor_device dev = {0, 0};                                                            \
    int rc = tstor__shape_layouts(2, ts, l, &ctx, &dev);                                  \
    if (rc == 0) rc = call(&l[0], &l[1], &r);                                             \
    return tstor__shape_finish(rc, ctx, dev, &r, out);                                    \
  }

TENSOR_FORM2(matmul, tstor_layout_matmul)
TENSOR_FORM2(mm, tstor_layout_mm)
TENSOR_FORM2(bmm, tstor_layout_bmm)
TENSOR_FORM2(embedding, tstor_layout_embedding)

/* Same shape as tstor_shape_conv's (shape_nn.c), kept apart for the reason
 * given at tstor_shape_binary_number (shape.c). */
int tstor_shape_linear(const tstor_tensor *input, const tstor_tensor *weight,
                       const tstor_tensor *bias, tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_linear: out is NULL");
  *out = NULL;
  if (!input || !weight) return tstor__err(TSTOR_EINVAL, "shape_linear: NULL tensor");
  const tstor_tensor *ts[3] = {input, weight, bias};
  tstor_layout l[3], r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(3, ts, l, &ctx, &dev);
  if (rc == 0) rc = tstor_layout_linear(&l[0], &l[1], bias ? &l[2] : NULL, &r);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

static int shape_join(int stack, int n, const tstor_tensor *const *inputs, int64_t dim,
                      tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_%s: out is NULL", stack ? "stack" : "cat");
  *out = NULL;
  if (n < 1 || n > 1 << 20 || !inputs)
    return tstor__err(TSTOR_EINVAL, "shape_%s: expected a non-empty list of tensors",
                      stack ? "stack" : "cat");
  for (int i = 0; i < n; i++)
    if (!inputs[i]) return tstor__err(TSTOR_EINVAL, "shape_%s: tensor %d is NULL",
                                      stack ? "stack" : "cat", i);
  tstor_layout *l = tstor__malloc(sizeof(tstor_layout) * (size_t)n), r;
  if (!l) return tstor__err(TSTOR_ENOMEM, "shape_%s: out of memory", stack ? "stack" : "cat");
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(n, inputs, l, &ctx, &dev);
  if (rc == 0) rc = stack ? tstor_layout_stack(n, l, dim, &r) : tstor_layout_cat(n, l, dim, &r);
  tstor__free(l);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

int tstor_shape_cat(int n, const tstor_tensor *const *inputs, int64_t dim, tstor_tensor **out) {
  return shape_join(0, n, inputs, dim, out);
}

int tstor_shape_stack(int n, const tstor_tensor *const *inputs, int64_t dim,
                      tstor_tensor **out) {
  return shape_join(1, n, inputs, dim, out);
}

int tstor_shape_index_select(const tstor_tensor *in, int64_t dim, const tstor_tensor *index,
                             tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_index_select: out is NULL");
  *out = NULL;
  if (!in || !index) return tstor__err(TSTOR_EINVAL, "shape_index_select: NULL tensor");
  const tstor_tensor *ts[2] = {in, index};
  tstor_layout l[2], r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(2, ts, l, &ctx, &dev);
  if (rc == 0) rc = tstor_layout_index_select(&l[0], dim, &l[1], &r);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

static int shape_softmax(const tstor_tensor *in, int64_t dim, const tstor_dtype *dtype,
                         tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_softmax: out is NULL");
  *out = NULL;
  tstor_layout l, r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(1, &in, &l, &ctx, &dev);
  if (rc == 0) rc = softmax(&l, dim, dtype, &r);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

int tstor_shape_softmax(const tstor_tensor *in, int64_t dim, tstor_tensor **out) {
  return shape_softmax(in, dim, NULL, out);
}

int tstor_shape_softmax_dtype(const tstor_tensor *in, int64_t dim, tstor_dtype dtype,
                              tstor_tensor **out) {
  return shape_softmax(in, dim, &dtype, out);
}
