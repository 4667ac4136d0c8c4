/* The output layout of cat and stack, as ATen's TensorShape.cpp computes
 * it: the inputs' dtypes promoted, dense in their common memory format
 * (contiguous where they differ); stack is cat along the dimension, viewed
 * with the new one. */
#include "shape/shape_internal.h"

#include <string.h>

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
      return tstor__err(TSTOR_EINVAL,
                        "zero-dimensional tensor (at position %d) cannot be "
                        "concatenated",
                        i);
    if (i && (rc = tstor_promote_types(dtype, in[i].dtype, &dtype)) < 0) return rc;
    tstor_memory_format f = tstor_layout_memory_format(&in[i]);
    if (i == 0)
      format = f;
    else if (f != format)
      format = TSTOR_MEMORY_CONTIGUOUS;
    if (ref < 0 && !cat_skips(&in[i])) ref = i;
  }
  if (ref < 0) { /* only empty 1-d inputs */
    int64_t zero = 0;
    return tstor__set_contiguous(out, dtype, 1, &zero);
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
      return tstor__err(TSTOR_EINVAL,
                        "Tensors must have same number of dimensions: got %d and "
                        "%d",
                        r.ndim, l->ndim);
    for (int j = 0; j < r.ndim; j++)
      if (j != d && l->sizes[j] != in[ref].sizes[j])
        return tstor__err(TSTOR_EINVAL,
                          "Sizes of tensors must match except in dimension %d. "
                          "Expected size %lld but got size %lld for tensor number %d in the "
                          "list.",
                          d, (long long)in[ref].sizes[j], (long long)l->sizes[j], i);
    if (__builtin_add_overflow(r.sizes[d], l->sizes[d], &r.sizes[d]))
      return tstor__err(TSTOR_EOVERFLOW, "cat: the size of dimension %d overflows", d);
  }
  if (tstor_layout_restride(&r, format) < 0) tstor__layout_contiguous(&r);
  tstor__layout_copy(out, &r);
  return 0;
}

int tstor_layout_stack(int n, const tstor_layout *in, int64_t dim, tstor_layout *out) {
  if (n < 1 || !in || !out) return tstor__err(TSTOR_EINVAL, "stack expects a non-empty TensorList");
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
      return tstor__err(TSTOR_EINVAL,
                        "stack expects each tensor to be equal size, but got %s at "
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
      if (i == 0)
        format = f;
      else if (f != format)
        format = TSTOR_MEMORY_CONTIGUOUS;
    }
    r.dtype = dtype;
    r.ndim = nd + 1;
    memcpy(r.sizes, sizes, sizeof(int64_t) * (size_t)r.ndim);
    if (tstor_layout_restride(&r, format) < 0) tstor__layout_contiguous(&r);
  }
  tstor__layout_copy(out, &r);
  return 0;
}

/* ------------------------------------------------------------ tensor forms */

/* The arguments of cat's and stack's tensor forms past their inputs. */
typedef struct {
  int n;
  int64_t dim;
} join_args;

/* in[0] is the array of all the inputs: tstor__shape_form requires them all. */
static int cat_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  const join_args *a = args;
  return tstor_layout_cat(a->n, in[0], a->dim, out);
}

static int stack_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  const join_args *a = args;
  return tstor_layout_stack(a->n, in[0], a->dim, out);
}

int tstor_shape_cat(int n, const tstor_tensor *const *inputs, int64_t dim, tstor_tensor **out) {
  const join_args a = {n, dim};
  return tstor__shape_form("shape_cat", n, inputs, n, cat_form, &a, out);
}

int tstor_shape_stack(int n, const tstor_tensor *const *inputs, int64_t dim, tstor_tensor **out) {
  const join_args a = {n, dim};
  return tstor__shape_form("shape_stack", n, inputs, n, stack_form, &a, out);
}
