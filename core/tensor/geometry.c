/* The geometry of a tensor, on raw arrays: the rules of PyTorch's shapes that
 * tensors (tensor/) and shape inference (shape/) share, one implementation
 * each, after c10's TensorGeometry and ATen's InferSize.h and TensorUtils:
 * dimension and size checks, wrapped dimensions, broadcasting, contiguous
 * and dense strides, the layout predicates, the bytes a layout needs, and
 * the strides a view can have (geometry.h). */
#include "tensor/geometry.h"

#include <inttypes.h>
#include <string.h>

/* ------------------------------------------------------------- helpers */

const char *tstor__dims_str(char *buf, size_t size, int n, const int64_t *v) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i <= n; i++) {
    char item[32];
    if (i == n)
      snprintf(item, sizeof item, "]");
    else
      snprintf(item, sizeof item, "%s%" PRId64, i ? ", " : "[", v[i]);
    size_t k = strlen(item);
    if (len + k + 5 > size) {
      snprintf(buf + len, size - len, "...]");
      return buf;
    }
    memcpy(buf + len, item, k + 1);
    len += k;
  }
  if (n == 0) snprintf(buf, size, "[]");
  return buf;
}

int tstor__tensor_check_ndim(int ndim, const void *array, const char *what) {
  if (ndim < 0 || ndim > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "%s: %d dimensions; a tensor has 0 to %d", what, ndim,
                      TSTOR_TENSOR_MAX_DIM);
  if (ndim > 0 && array == NULL)
    return tstor__err(TSTOR_EINVAL, "%s: NULL array for %d dimensions", what, ndim);
  return 0;
}

int tstor__tensor_check_sizes(int ndim, const int64_t *sizes, const char *what) {
  for (int i = 0; i < ndim; i++)
    if (sizes[i] < 0) {
      char buf[256];
      return tstor__err(TSTOR_EINVAL,
                        "%s: Trying to create tensor with negative dimension %" PRId64 ": %s", what,
                        sizes[i], tstor__dims_str(buf, sizeof buf, ndim, sizes));
    }
  return 0;
}

int tstor__wrap_dim(int64_t dim, int ndim, int wrap_scalar, int *out) {
  int64_t n = ndim;
  if (n <= 0) {
    if (!wrap_scalar)
      return tstor__err(TSTOR_ERANGE,
                        "Dimension specified as %" PRId64 " but tensor has no dimensions", dim);
    n = 1;
  }
  if (dim < -n || dim > n - 1)
    return tstor__err(TSTOR_ERANGE,
                      "Dimension out of range (expected to be in range of [%" PRId64 ", %" PRId64
                      "], but got %" PRId64 ")",
                      -n, n - 1, dim);
  *out = (int)(dim < 0 ? dim + n : dim);
  return 0;
}

void tstor__contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides) {
  int64_t z = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = z;
    /* PyTorch: max(size, 1), so the strides of a zero-size tensor stay useful */
    z = tstor__mul_wrap(z, sizes[d] > 1 ? sizes[d] : 1);
  }
}

int tstor__broadcast_into(int *ndim, int64_t *out, int n, const int64_t *s) {
  int nd = *ndim > n ? *ndim : n, shift = nd - *ndim;
  if (shift) {
    for (int i = *ndim - 1; i >= 0; i--) out[i + shift] = out[i];
    for (int i = 0; i < shift; i++) out[i] = 1;
  }
  for (int i = nd - 1; i >= 0; i--) {
    int ib = i - (nd - n);
    int64_t a = out[i], b = ib >= 0 ? s[ib] : 1;
    if (a != b && a != 1 && b != 1)
      return tstor__err(TSTOR_ESIZE,
                        "The size of tensor a (%" PRId64
                        ") must match the size of "
                        "tensor b (%" PRId64 ") at non-singleton dimension %d",
                        a, b, i);
    out[i] = a == 1 ? b : a;
  }
  *ndim = nd;
  return 0;
}

int tstor__compute_contiguous(int ndim, const int64_t *sizes, const int64_t *strides) {
  int64_t z = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    if (sizes[d] == 0) return 1;
  }
  for (int d = ndim - 1; d >= 0; d--) {
    if (sizes[d] == 1) continue;
    if (strides[d] != z) return 0;
    z = tstor__mul_wrap(z, sizes[d]);
  }
  return 1;
}

int tstor__non_overlapping_and_dense(int ndim, const int64_t *sizes, const int64_t *strides) {
  /* c10's flag is is_contiguous || is_channels_last(_3d)_contiguous || the
   * computation below: so a tensor with no elements, contiguous by
   * definition, is dense whatever its strides (clone and empty_like keep them) */
  if (tstor__compute_contiguous(ndim, sizes, strides) ||
      tstor__channels_last_contiguous(ndim, sizes, strides))
    return 1;
  if (ndim == 1) return sizes[0] < 2 || strides[0] == 1;
  int perm[TSTOR_TENSOR_MAX_DIM];
  for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
  /* Sort by stride, size 0 and 1 dimensions last (PyTorch's order); an
   * insertion sort, stable, small n. */
  for (int i = 1; i < ndim; i++) {
    int p = perm[i], j = i;
    while (j > 0) {
      int q = perm[j - 1];
      int before = sizes[p] >= 2 && (sizes[q] < 2 || strides[p] < strides[q]);
      if (!before) break;
      perm[j] = q;
      j--;
    }
    perm[j] = p;
  }
  int64_t require = 1;
  for (int i = 0; i < ndim; i++) {
    int64_t s = sizes[perm[i]];
    if (s < 2) return 1;
    if (strides[perm[i]] != require) return 0;
    require *= s;
  }
  return 1;
}

int tstor__channels_last_contiguous(int ndim, const int64_t *sizes, const int64_t *strides) {
  static const int order4[] = {1, 3, 2, 0}, order5[] = {1, 4, 3, 2, 0};
  if (ndim != 4 && ndim != 5) return 0;
  const int *order = ndim == 4 ? order4 : order5;
  int64_t expected = 1;
  for (int i = 0; i < ndim; i++) {
    int d = order[i];
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return 0;
    expected *= sizes[d];
  }
  return 1;
}

typedef struct {
  const int64_t *sizes, *strides;
} dense_order;

/* stride-0 dims compare as ambiguous */
static int dense_should_swap(const void *ctx, int a, int b) {
  const dense_order *o = ctx;
  int64_t s0 = o->strides[a], s1 = o->strides[b];
  if (s0 == 0 || s1 == 0) return 0;
  return s0 < s1 ? -1 : s0 > s1 ? 1 : o->sizes[a] > o->sizes[b] ? 1 : 0;
}

void tstor__infer_dense_strides(int ndim, const int64_t *sizes, const int64_t *strides,
                                int64_t *out) {
  int perm[TSTOR_TENSOR_MAX_DIM];
  for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
  dense_order o = {sizes, strides};
  tstor__reorder_dims(ndim, perm, dense_should_swap, &o);
  int64_t cur = 1;
  for (int i = 0; i < ndim; i++) {
    out[perm[i]] = cur;
    if (sizes[perm[i]] > 1) cur *= sizes[perm[i]];
  }
}

/* ------------------------------------------------------------- layouts */

int tstor__layout_overflowed(int ndim, const int64_t *sizes, const int64_t *strides) {
  char a[256], b[256];
  return tstor__err(
      TSTOR_EOVERFLOW, "Storage size calculation overflowed with sizes=%s and strides=%s",
      tstor__dims_str(a, sizeof a, ndim, sizes), tstor__dims_str(b, sizeof b, ndim, strides));
}

int tstor__check_strides(int ndim, const int64_t *strides, const char *what) {
  for (int i = 0; i < ndim; i++)
    if (strides[i] < 0) {
      char buf[256];
      return tstor__err(TSTOR_EINVAL,
                        "%s: Negative strides are not supported at the moment, got strides: %s",
                        what, tstor__dims_str(buf, sizeof buf, ndim, strides));
    }
  return 0;
}

int tstor__compute_storage_nbytes(int ndim, const int64_t *sizes, const int64_t *strides,
                                  size_t esize, uint64_t offset, uint64_t *out) {
  uint64_t size;
  int over = __builtin_add_overflow(offset, (uint64_t)1, &size);
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] == 0) {
      *out = 0;
      return 0;
    }
  }
  for (int i = 0; i < ndim; i++) {
    int64_t strided;
    over |= __builtin_mul_overflow(strides[i], sizes[i] - 1, &strided);
    over |= __builtin_add_overflow(size, (uint64_t)strided, &size);
  }
  over |= __builtin_mul_overflow(size, (uint64_t)esize, &size);
  over |= size > (uint64_t)INT64_MAX;
  if (over) return tstor__layout_overflowed(ndim, sizes, strides);
  *out = size;
  return 0;
}

int tstor__layout_nbytes(int ndim, const int64_t *sizes, const int64_t *strides, size_t esize,
                         uint64_t *out) {
  if (strides) {
    int rc = tstor__compute_storage_nbytes(ndim, sizes, strides, esize, 0, out);
    if (rc == 0 && *out > SIZE_MAX) return tstor__layout_overflowed(ndim, sizes, strides);
    return rc;
  }
  /* computeStorageNbytesContiguous: the product of the sizes, checked, so it
   * overflows even where a later size is 0 */
  uint64_t n = 1;
  int over = 0;
  for (int i = 0; i < ndim; i++) over |= __builtin_mul_overflow(n, (uint64_t)sizes[i], &n);
  over |= __builtin_mul_overflow(n, (uint64_t)esize, &n);
  if (over || n > (uint64_t)INT64_MAX || n > SIZE_MAX) {
    char buf[256];
    return tstor__err(TSTOR_EOVERFLOW, "Storage size calculation overflowed with sizes=%s",
                      tstor__dims_str(buf, sizeof buf, ndim, sizes));
  }
  *out = n;
  return 0;
}

int tstor_layout_nbytes(int ndim, const int64_t *sizes, const int64_t *strides, size_t element_size,
                        int64_t offset, uint64_t *out) {
  int rc;
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "layout_nbytes: NULL out");
  if ((rc = tstor__tensor_check_ndim(ndim, sizes, "layout_nbytes")) ||
      (rc = tstor__tensor_check_ndim(ndim, strides, "layout_nbytes")) ||
      (rc = tstor__tensor_check_sizes(ndim, sizes, "layout_nbytes")) ||
      (rc = tstor__check_strides(ndim, strides, "layout_nbytes")))
    return rc;
  if (offset < 0)
    return tstor__err(TSTOR_EINVAL, "layout_nbytes: Tensor: invalid storage offset %" PRId64,
                      offset);
  return tstor__compute_storage_nbytes(ndim, sizes, strides, element_size, (uint64_t)offset, out);
}

/* ---------------------------------------------------------------- views */

int tstor__stride_overflow(const char *what) {
  return tstor__err(TSTOR_EOVERFLOW, "%s: a stride or offset of the view overflows int64", what);
}

int tstor__infer_size(int ndim, const int64_t *shape, int64_t numel, int64_t *res) {
  int64_t newsize = 1;
  int infer = -1, over = 0, zero = 0;
  char buf[512];
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == -1) {
      if (infer >= 0) return tstor__err(TSTOR_EINVAL, "only one dimension can be inferred");
      infer = d;
    } else if (shape[d] >= 0) {
      over |= __builtin_mul_overflow(newsize, shape[d], &newsize);
      zero |= shape[d] == 0;
    } else {
      return tstor__err(TSTOR_EINVAL, "invalid shape dimension %" PRId64 " at index %d of shape %s",
                        shape[d], d, tstor__dims_str(buf, sizeof buf, ndim, shape));
    }
    res[d] = shape[d];
  }
  if (zero) { /* the product is 0, however large the sizes before it */
    newsize = 0;
    over = 0;
  }
  /* A product past int64 exceeds every numel; with an inferred size it still
   * divides a numel of 0, which leaves 0 for that size (ATen's product wraps
   * instead, and its answer then hangs on where it wrapped to). */
  if (over && infer >= 0 && numel == 0) {
    res[infer] = 0;
    return 0;
  }
  if (!over && (numel == newsize || (infer >= 0 && newsize > 0 && numel % newsize == 0))) {
    if (infer >= 0) {
      if (newsize == 0)
        return tstor__err(TSTOR_EINVAL,
                          "cannot reshape tensor of 0 elements into shape %s because the "
                          "unspecified dimension size -1 can be any value and is ambiguous",
                          tstor__dims_str(buf, sizeof buf, ndim, shape));
      res[infer] = numel / newsize;
    }
    return 0;
  }
  return tstor__err(TSTOR_ESIZE, "shape '%s' is invalid for input of size %" PRId64,
                    tstor__dims_str(buf, sizeof buf, ndim, shape), numel);
}

int tstor__compute_stride(int on, const int64_t *oldshape, const int64_t *oldstride, int nn,
                          const int64_t *newshape, int64_t *newstride) {
  if (on == 0) {
    for (int i = 0; i < nn; i++) newstride[i] = 1;
    return 1;
  }
  int empty = 0; /* only whether there are elements matters: a product could overflow before a 0 */
  for (int i = 0; i < on; i++) empty |= oldshape[i] == 0;
  if (empty && on == nn && memcmp(oldshape, newshape, (size_t)on * 8) == 0) {
    memcpy(newstride, oldstride, (size_t)on * 8);
    return 1;
  }
  if (empty) {
    for (int d = nn - 1; d >= 0; d--) {
      newstride[d] = 1;
      if (d < nn - 1 && __builtin_mul_overflow(newshape[d + 1] > 1 ? newshape[d + 1] : 1,
                                               newstride[d + 1], &newstride[d]))
        return -1;
    }
    return 1;
  }
  int view_d = nn - 1, over = 0;
  int64_t chunk_base_stride = oldstride[on - 1], tensor_numel = 1, view_numel = 1;
  for (int tensor_d = on - 1; tensor_d >= 0; tensor_d--) {
    tensor_numel *= oldshape[tensor_d];
    int64_t contiguous_stride;
    if (tensor_d == 0 ||
        (oldshape[tensor_d - 1] != 1 &&
         (__builtin_mul_overflow(tensor_numel, chunk_base_stride, &contiguous_stride) ||
          oldstride[tensor_d - 1] != contiguous_stride))) {
      while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
        /* an overflow matters only if the view exists: else a copy is due */
        over |= __builtin_mul_overflow(view_numel, chunk_base_stride, &newstride[view_d]);
        view_numel *= newshape[view_d]; /* at most tensor_numel, a product of sizes */
        view_d--;
      }
      if (view_numel != tensor_numel) return 0;
      if (tensor_d > 0) {
        chunk_base_stride = oldstride[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d != -1 ? 0 : over ? -1 : 1;
}

int tstor__view_strides(int on, const int64_t *oldshape, const int64_t *oldstride, int nn,
                        const int64_t *newshape, int64_t *newstride, const char *what) {
  int found = tstor__compute_stride(on, oldshape, oldstride, nn, newshape, newstride);
  if (found < 0) return tstor__stride_overflow(what);
  if (!found)
    return tstor__err(TSTOR_EINVAL,
                      "view size is not compatible with input tensor's size and stride (at least "
                      "one dimension spans across two contiguous subspaces). Use .reshape(...) "
                      "instead.");
  return 0;
}
