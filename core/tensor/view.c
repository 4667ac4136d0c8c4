/* Views: new tensors on the same storage with other sizes, strides, offset
 * or dtype. No byte moves (reshape and flatten copy only where PyTorch's do).
 * Each follows ATen's implementation of the same name, refusals included. */
#include "tensor/tensor_internal.h"

#include <inttypes.h>
#include <string.h>

#define MAXD TSTOR_TENSOR_MAX_DIM

static int check(const tstor_tensor *t, tstor_tensor **out, const char *what) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "%s: NULL out", what);
  *out = NULL;
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "%s: NULL tensor", what);
  return 0;
}

static int make(const tstor_tensor *t, tstor_dtype dtype, int64_t offset, int ndim,
                const int64_t *sizes, const int64_t *strides, tstor_tensor **out) {
  return tstor__tensor_make(t->storage, dtype, offset, ndim, sizes, strides, out);
}

/* Same element, other layout; same dtype. */
static int restride(const tstor_tensor *t, int64_t offset, int ndim, const int64_t *sizes,
                    const int64_t *strides, tstor_tensor **out) {
  return make(t, t->dtype, offset, ndim, sizes, strides, out);
}

/* offset + index * stride, for an element that an empty tensor need not hold:
 * its other dimensions do not bound the product. */
static int moved_offset(int64_t offset, int64_t index, int64_t stride, const char *what,
                        int64_t *out) {
  int64_t step;
  if (__builtin_mul_overflow(index, stride, &step) || __builtin_add_overflow(offset, step, out))
    return tstor__stride_overflow(what);
  return 0;
}

/* ------------------------------------------------------------- as_strided */

int tstor_tensor_as_strided(const tstor_tensor *t, int ndim, const int64_t *sizes,
                            const int64_t *strides, int64_t offset, tstor_tensor **out) {
  int rc = check(t, out, "tensor_as_strided");
  if (rc) return rc;
  if ((rc = tstor__tensor_check_ndim(ndim, strides, "as_strided"))) return rc;
  /* torch 2.x's meta kernel (as_strided_tensorimpl_meta) leaves out the
   * check against the storage's size; so does a device without data here. */
  return tstor__tensor_place(t->storage, t->dtype, offset, ndim, sizes, strides,
                             tstor__tensor_has_data(t), out);
}

/* -------------------------------------------------------- view and reshape */

int tstor_tensor_view(const tstor_tensor *t, int ndim, const int64_t *sizes, tstor_tensor **out) {
  int rc = check(t, out, "tensor_view");
  if (rc) return rc;
  if ((rc = tstor__tensor_check_ndim(ndim, sizes, "tensor_view"))) return rc;
  int64_t shape[MAXD], st[MAXD];
  if ((rc = tstor__infer_size(ndim, sizes, t->numel, shape))) return rc;
  if ((rc = tstor__view_strides(t->ndim, t->sizes, t->strides, ndim, shape, st, "tensor_view")))
    return rc;
  return restride(t, t->offset, ndim, shape, st, out);
}

int tstor_tensor_reshape(const tstor_tensor *t, int ndim, const int64_t *sizes,
                         tstor_tensor **out) {
  int rc = check(t, out, "tensor_reshape");
  if (rc) return rc;
  if ((rc = tstor__tensor_check_ndim(ndim, sizes, "tensor_reshape"))) return rc;
  int64_t shape[MAXD], st[MAXD];
  if ((rc = tstor__infer_size(ndim, sizes, t->numel, shape))) return rc;
  int found = tstor__compute_stride(t->ndim, t->sizes, t->strides, ndim, shape, st);
  if (found < 0) return tstor__stride_overflow("tensor_reshape");
  if (found) return restride(t, t->offset, ndim, shape, st, out);
  tstor_tensor *c;
  if ((rc = tstor_tensor_empty(t->storage->ctx, t->storage->device, t->dtype, t->ndim, t->sizes,
                               &c)))
    return rc;
  if ((rc = tstor_tensor_copy_(c, t)) == 0) rc = restride(c, c->offset, ndim, shape, NULL, out);
  tstor_tensor_release(c);
  return rc;
}

/* ------------------------------------------------------ narrow, select, slice */

int tstor_tensor_slice(const tstor_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step,
                       tstor_tensor **out) {
  int rc = check(t, out, "tensor_slice"), d;
  if (rc) return rc;
  if (t->ndim == 0) return tstor__err(TSTOR_EINVAL, "slice() cannot be applied to a 0-dim tensor.");
  if ((rc = tstor__wrap_dim(dim, t->ndim, 1, &d))) return rc;
  if (step <= 0) return tstor__err(TSTOR_EINVAL, "slice step must be positive");
  int64_t n = t->sizes[d];
  if (start < 0) start = start < -n ? 0 : start + n;
  if (end < 0) end = end < -n ? 0 : end + n;
  if (start >= n) start = n;
  if (end < start)
    end = start;
  else if (end >= n)
    end = n;
  int64_t sz[MAXD], st[MAXD];
  memcpy(sz, t->sizes, (size_t)t->ndim * 8);
  memcpy(st, t->strides, (size_t)t->ndim * 8);
  int64_t len = end - start, offset;
  sz[d] = len / step + (len % step != 0);
  if (__builtin_mul_overflow(t->strides[d], step, &st[d])) return tstor__stride_overflow("slice");
  if (__builtin_mul_overflow(start, t->strides[d], &offset)) return tstor__stride_overflow("slice");
  if (__builtin_add_overflow(offset, t->offset, &offset)) return tstor__stride_overflow("slice");
  return restride(t, offset, t->ndim, sz, st, out);
}

int tstor_tensor_narrow(const tstor_tensor *t, int64_t dim, int64_t start, int64_t length,
                        tstor_tensor **out) {
  int rc = check(t, out, "tensor_narrow"), d;
  if (rc) return rc;
  if (t->ndim == 0)
    return tstor__err(TSTOR_EINVAL, "narrow() cannot be applied to a 0-dim tensor.");
  /* torch 2.x's narrow_symint: the length's sign before the dimension, the
   * start within [-n, n] before it wraps once */
  if (length < 0) return tstor__err(TSTOR_EINVAL, "narrow(): length must be non-negative.");
  if ((rc = tstor__wrap_dim(dim, t->ndim, 1, &d))) return rc;
  int64_t n = t->sizes[d];
  if (start < -n || start > n)
    return tstor__err(TSTOR_ERANGE,
                      "start out of range (expected to be in range of [%" PRId64 ", %" PRId64
                      "], but got %" PRId64 ")",
                      -n, n, start);
  if (start < 0) start += n;
  if (start > n - length)
    return tstor__err(TSTOR_ERANGE,
                      "start (%" PRId64 ") + length (%" PRId64 ") exceeds dimension size (%" PRId64
                      ").",
                      start, length, n);
  return tstor_tensor_slice(t, d, start, start + length, 1, out);
}

int tstor_tensor_select(const tstor_tensor *t, int64_t dim, int64_t index, tstor_tensor **out) {
  int rc = check(t, out, "tensor_select"), d;
  if (rc) return rc;
  if (t->ndim == 0)
    return tstor__err(TSTOR_EINVAL, "select() cannot be applied to a 0-dim tensor.");
  if ((rc = tstor__wrap_dim(dim, t->ndim, 1, &d))) return rc;
  int64_t n = t->sizes[d];
  if (index < -n || index >= n) {
    char buf[512];
    return tstor__err(TSTOR_ERANGE,
                      "select(): index %" PRId64
                      " out of range for tensor of size %s at dimension %d",
                      index, tstor__dims_str(buf, sizeof buf, t->ndim, t->sizes), d);
  }
  if (index < 0) index += n;
  int64_t sz[MAXD], st[MAXD];
  for (int i = 0, j = 0; i < t->ndim; i++) {
    if (i == d) continue;
    sz[j] = t->sizes[i];
    st[j++] = t->strides[i];
  }
  int64_t off = 0;
  if ((rc = moved_offset(t->offset, index, t->strides[d], "select", &off))) return rc;
  return restride(t, off, t->ndim - 1, sz, st, out);
}

/* ------------------------------------------------------ reordering dims */

int tstor_tensor_transpose(const tstor_tensor *t, int64_t dim0, int64_t dim1, tstor_tensor **out) {
  int rc = check(t, out, "tensor_transpose"), a, b;
  if (rc) return rc;
  if ((rc = tstor__wrap_dim(dim0, t->ndim, 1, &a)) || (rc = tstor__wrap_dim(dim1, t->ndim, 1, &b)))
    return rc;
  int64_t sz[MAXD], st[MAXD];
  memcpy(sz, t->sizes, (size_t)t->ndim * 8);
  memcpy(st, t->strides, (size_t)t->ndim * 8);
  if (t->ndim > 0) {
    sz[a] = t->sizes[b];
    sz[b] = t->sizes[a];
    st[a] = t->strides[b];
    st[b] = t->strides[a];
  }
  return restride(t, t->offset, t->ndim, sz, st, out);
}

int tstor_tensor_t(const tstor_tensor *t, tstor_tensor **out) {
  int rc = check(t, out, "tensor_t");
  if (rc) return rc;
  if (t->ndim > 2)
    return tstor__err(TSTOR_EINVAL, "t() expects a tensor with <= 2 dimensions, but self is %dD",
                      t->ndim);
  return tstor_tensor_transpose(t, 0, t->ndim < 2 ? 0 : 1, out);
}

int tstor_tensor_permute(const tstor_tensor *t, int ndim, const int64_t *order,
                         tstor_tensor **out) {
  int rc = check(t, out, "tensor_permute");
  if (rc) return rc;
  if (ndim < 0 || (ndim > 0 && order == NULL))
    return tstor__err(TSTOR_EINVAL, "tensor_permute: NULL or negative dims");
  if (ndim != t->ndim)
    return tstor__err(
        TSTOR_EINVAL,
        "permute(sparse_coo): number of dimensions in the tensor input does not match "
        "the length of the desired ordering of dimensions i.e. input.dim() = %d is not "
        "equal to len(dims) = %d",
        t->ndim, ndim);
  int64_t sz[MAXD], st[MAXD];
  char seen[MAXD] = {0};
  for (int i = 0; i < ndim; i++) {
    int d;
    if ((rc = tstor__wrap_dim(order[i], t->ndim, 1, &d))) return rc;
    if (seen[d]) return tstor__err(TSTOR_EINVAL, "permute(): duplicate dims are not allowed.");
    seen[d] = 1;
    sz[i] = t->sizes[d];
    st[i] = t->strides[d];
  }
  return restride(t, t->offset, ndim, sz, st, out);
}

int tstor_tensor_movedim(const tstor_tensor *t, int n, const int64_t *source,
                         const int64_t *destination, tstor_tensor **out) {
  int rc = check(t, out, "tensor_movedim");
  if (rc) return rc;
  if (n < 0 || (n > 0 && (source == NULL || destination == NULL)))
    return tstor__err(TSTOR_EINVAL, "tensor_movedim: NULL or negative dims");
  int nd = t->ndim;
  if (n > (nd > 0 ? nd : 1))
    return tstor__err(TSTOR_EINVAL, "movedim: %d dims to move in a %d-dimensional tensor", n, nd);
  int src[MAXD], dst[MAXD];
  int64_t order[MAXD];
  char used_src[MAXD + 1] = {0}, used_dst[MAXD + 1] = {0};
  int64_t sv[MAXD], dv[MAXD];
  for (int i = 0; i < n; i++) {
    if ((rc = tstor__wrap_dim(source[i], nd, 1, &src[i])) ||
        (rc = tstor__wrap_dim(destination[i], nd, 1, &dst[i])))
      return rc;
    sv[i] = source[i];
    dv[i] = destination[i];
  }
  char buf[512];
  for (int i = 0; i < n; i++) {
    if (used_src[src[i]])
      return tstor__err(TSTOR_EINVAL, "movedim: repeated dim in `source` (%s)",
                        tstor__dims_str(buf, sizeof buf, n, sv));
    used_src[src[i]] = 1;
  }
  for (int i = 0; i < n; i++) {
    if (used_dst[dst[i]])
      return tstor__err(TSTOR_EINVAL, "movedim: repeated dim in `destination` (%s)",
                        tstor__dims_str(buf, sizeof buf, n, dv));
    used_dst[dst[i]] = 1;
  }
  if (nd == 0) return restride(t, t->offset, 0, NULL, NULL, out);
  for (int i = 0; i < nd; i++) order[i] = -1;
  for (int i = 0; i < n; i++) order[dst[i]] = src[i];
  /* the other dims keep their relative order in the free positions */
  int next = 0;
  for (int i = 0; i < nd; i++) {
    if (order[i] >= 0) continue;
    while (used_src[next]) next++;
    order[i] = next++;
  }
  return tstor_tensor_permute(t, nd, order, out);
}

/* -------------------------------------------------------------- expand */

int tstor_tensor_expand(const tstor_tensor *t, int ndim, const int64_t *sizes, tstor_tensor **out) {
  int rc = check(t, out, "tensor_expand");
  if (rc) return rc;
  if ((rc = tstor__tensor_check_ndim(ndim, sizes, "tensor_expand"))) return rc;
  char a[512], b[512];
  if (ndim < t->ndim)
    return tstor__err(
        TSTOR_EINVAL,
        "expand(torch.%s%s%sTensor{%s}, size=%s): the number of sizes provided (%d) must "
        "be greater or equal to the number of dimensions in the tensor (%d)",
        tstor__tensor_on_host(t) ? ""
                                 : tstor_tensor_context(t)->types[t->storage->device.type].name,
        tstor__tensor_on_host(t) ? "" : ".", tstor_dtype_info_of(t->dtype)->scalar_type,
        tstor__dims_str(a, sizeof a, t->ndim, t->sizes), tstor__dims_str(b, sizeof b, ndim, sizes),
        ndim, t->ndim);
  int64_t sz[MAXD], st[MAXD];
  for (int i = ndim - 1; i >= 0; i--) {
    int off = ndim - 1 - i, dim = t->ndim - 1 - off;
    int64_t size = dim >= 0 ? t->sizes[dim] : 1;
    int64_t stride = 0;
    if (dim >= 0)
      stride = t->strides[dim];
    else if (i + 1 < ndim)
      if (__builtin_mul_overflow(sz[i + 1], st[i + 1], &stride))
        return tstor__stride_overflow("expand");
    int64_t target = sizes[i];
    if (target == -1) {
      if (dim < 0)
        return tstor__err(TSTOR_EINVAL,
                          "The expanded size of the tensor (-1) isn't allowed in a leading, "
                          "non-existing dimension %d",
                          i);
      target = size;
    }
    if (size != target) {
      if (size != 1 || target < 0)
        return tstor__err(TSTOR_EINVAL,
                          "The expanded size of the tensor (%" PRId64
                          ") must match the existing size (%" PRId64
                          ") at non-singleton dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                          target, size, i, tstor__dims_str(a, sizeof a, ndim, sizes),
                          tstor__dims_str(b, sizeof b, t->ndim, t->sizes));
      size = target;
      stride = 0;
    }
    sz[i] = size;
    st[i] = stride;
  }
  return restride(t, t->offset, ndim, sz, st, out);
}

int tstor_tensor_expand_as(const tstor_tensor *t, const tstor_tensor *other, tstor_tensor **out) {
  int rc = check(t, out, "tensor_expand_as");
  if (rc) return rc;
  if (other == NULL) return tstor__err(TSTOR_EINVAL, "tensor_expand_as: NULL other");
  return tstor_tensor_expand(t, other->ndim, other->sizes, out);
}

/* ---------------------------------------------------- squeeze, unsqueeze */

int tstor_tensor_squeeze(const tstor_tensor *t, tstor_tensor **out) {
  int rc = check(t, out, "tensor_squeeze");
  if (rc) return rc;
  int64_t sz[MAXD], st[MAXD];
  int n = 0;
  for (int i = 0; i < t->ndim; i++)
    if (t->sizes[i] != 1) {
      sz[n] = t->sizes[i];
      st[n++] = t->strides[i];
    }
  return restride(t, t->offset, n, sz, st, out);
}

int tstor_tensor_squeeze_dim(const tstor_tensor *t, int64_t dim, tstor_tensor **out) {
  int rc = check(t, out, "tensor_squeeze_dim"), d;
  if (rc) return rc;
  if ((rc = tstor__wrap_dim(dim, t->ndim, 1, &d))) return rc;
  if (t->ndim == 0 || t->sizes[d] != 1)
    return restride(t, t->offset, t->ndim, t->sizes, t->strides, out);
  int64_t sz[MAXD], st[MAXD];
  for (int i = 0, j = 0; i < t->ndim; i++)
    if (i != d) {
      sz[j] = t->sizes[i];
      st[j++] = t->strides[i];
    }
  return restride(t, t->offset, t->ndim - 1, sz, st, out);
}

int tstor_tensor_unsqueeze(const tstor_tensor *t, int64_t dim, tstor_tensor **out) {
  int rc = check(t, out, "tensor_unsqueeze"), d;
  if (rc) return rc;
  if (t->ndim >= TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "tensor_unsqueeze: %d dimensions; a tensor has 0 to %d",
                      t->ndim + 1, TSTOR_TENSOR_MAX_DIM);
  if ((rc = tstor__wrap_dim(dim, t->ndim + 1, 1, &d))) return rc;
  int64_t sz[MAXD], st[MAXD];
  for (int i = 0, j = 0; i <= t->ndim; i++) {
    if (i == d) {
      sz[i] = 1;
      if (d >= t->ndim)
        st[i] = 1;
      else if (__builtin_mul_overflow(t->sizes[d], t->strides[d], &st[i]))
        return tstor__stride_overflow("unsqueeze");
      continue;
    }
    sz[i] = t->sizes[j];
    st[i] = t->strides[j++];
  }
  return restride(t, t->offset, t->ndim + 1, sz, st, out);
}

/* ---------------------------------------------------- flatten, unflatten */

int tstor_tensor_flatten(const tstor_tensor *t, int64_t start_dim, int64_t end_dim,
                         tstor_tensor **out) {
  int rc = check(t, out, "tensor_flatten"), s, e;
  if (rc) return rc;
  if ((rc = tstor__wrap_dim(start_dim, t->ndim, 1, &s)) ||
      (rc = tstor__wrap_dim(end_dim, t->ndim, 1, &e)))
    return rc;
  if (t->ndim == 0) {
    int64_t one = 1;
    return tstor_tensor_reshape(t, 1, &one, out);
  }
  if (s > e)
    return tstor__err(TSTOR_EINVAL,
                      "flatten() has invalid args: start_dim cannot come after end_dim");
  if (s == e) return restride(t, t->offset, t->ndim, t->sizes, t->strides, out);
  int64_t shape[MAXD], prod = 1;
  int n = 0;
  for (int i = 0; i < s; i++) shape[n++] = t->sizes[i];
  for (int i = s; i <= e; i++) prod *= t->sizes[i];
  shape[n++] = prod;
  for (int i = e + 1; i < t->ndim; i++) shape[n++] = t->sizes[i];
  return tstor_tensor_reshape(t, n, shape, out);
}

int tstor_tensor_unflatten(const tstor_tensor *t, int64_t dim, int nsizes, const int64_t *sizes,
                           tstor_tensor **out) {
  int rc = check(t, out, "tensor_unflatten"), d;
  if (rc) return rc;
  if ((rc = tstor__wrap_dim(dim, t->ndim, 1, &d))) return rc;
  if (t->ndim == 0) /* torch 2.x wraps the IndexError of 1.13 in these words */
    return tstor__err(TSTOR_ERANGE,
                      "unflatten got an unexpected error: Dimension specified as 0 "
                      "but tensor has no dimensions");
  if (nsizes == 0) return tstor__err(TSTOR_EINVAL, "unflatten: sizes must be non-empty");
  if ((rc = tstor__tensor_check_ndim(nsizes, sizes, "tensor_unflatten"))) return rc;
  if (t->ndim - 1 + nsizes > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "tensor_unflatten: %d dimensions; a tensor has 0 to %d",
                      t->ndim - 1 + nsizes, TSTOR_TENSOR_MAX_DIM);
  int64_t n = t->ndim ? t->sizes[d] : 1, inferred[MAXD];
  if ((rc = tstor__infer_size(nsizes, sizes, n, inferred))) {
    if (rc == TSTOR_ESIZE) {
      char buf[512];
      return tstor__err(
          TSTOR_ESIZE,
          "unflatten: Provided sizes %s don't multiply up to the size of dim %d (%" PRId64
          ") in the input tensor",
          tstor__dims_str(buf, sizeof buf, nsizes, sizes), d, n);
    }
    return rc;
  }
  int64_t shape[MAXD];
  int k = 0;
  for (int i = 0; i < d; i++) shape[k++] = t->sizes[i];
  for (int i = 0; i < nsizes; i++) shape[k++] = inferred[i];
  for (int i = d + 1; i < t->ndim; i++) shape[k++] = t->sizes[i];
  return tstor_tensor_view(t, k, shape, out);
}

/* ------------------------------------------------------ unfold, diagonal */

int tstor_tensor_unfold(const tstor_tensor *t, int64_t dim, int64_t size, int64_t step,
                        tstor_tensor **out) {
  int rc = check(t, out, "tensor_unfold"), d;
  if (rc) return rc;
  if ((rc = tstor__wrap_dim(dim, t->ndim, 1, &d))) return rc;
  if (t->ndim >= TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "tensor_unfold: %d dimensions; a tensor has 0 to %d",
                      t->ndim + 1, TSTOR_TENSOR_MAX_DIM);
  int64_t max_size = t->ndim == 0 ? 1 : t->sizes[d];
  if (size > max_size)
    return tstor__err(TSTOR_EINVAL,
                      "maximum size for tensor at dimension %d is %" PRId64 " but size is %" PRId64,
                      d, max_size, size);
  if (size < 0) return tstor__err(TSTOR_EINVAL, "size is %" PRId64 " but must be >= 0", size);
  if (step <= 0) return tstor__err(TSTOR_EINVAL, "step is %" PRId64 " but must be > 0", step);
  int64_t sz[MAXD + 1], st[MAXD + 1];
  for (int i = 0; i < t->ndim; i++) {
    sz[i] = t->sizes[i];
    st[i] = t->strides[i];
  }
  if (t->ndim > 0) {
    if (__builtin_sub_overflow(t->sizes[d], size, &sz[d])) return tstor__stride_overflow("unfold");
    sz[d] = sz[d] / step + 1;
    if (__builtin_mul_overflow(step, t->strides[d], &st[d]))
      return tstor__stride_overflow("unfold");
  }
  sz[t->ndim] = size;
  st[t->ndim] = t->ndim == 0 ? 1 : t->strides[d];
  return restride(t, t->offset, t->ndim + 1, sz, st, out);
}

int tstor_tensor_diagonal(const tstor_tensor *t, int64_t offset, int64_t dim1, int64_t dim2,
                          tstor_tensor **out) {
  int rc = check(t, out, "tensor_diagonal"), a, b;
  if (rc) return rc;
  if ((rc = tstor__wrap_dim(dim1, t->ndim, 1, &a)) || (rc = tstor__wrap_dim(dim2, t->ndim, 1, &b)))
    return rc;
  if (a == b)
    return tstor__err(TSTOR_EINVAL, "diagonal dimensions cannot be identical %" PRId64 ", %" PRId64,
                      dim1, dim2);
  if (t->ndim < 2)
    return tstor__err(TSTOR_EINVAL, "diagonal: a tensor of %d dimensions has no diagonal", t->ndim);
  int64_t n, off = t->offset;
  if (offset >= 0) {
    n = t->sizes[a] < t->sizes[b] - offset ? t->sizes[a] : t->sizes[b] - offset;
  } else {
    n = t->sizes[a] + offset < t->sizes[b] ? t->sizes[a] + offset : t->sizes[b];
  }
  if (n < 0) n = 0;
  if (n > 0 && (rc = offset >= 0 ? moved_offset(off, offset, t->strides[b], "diagonal", &off)
                                 : moved_offset(off, -offset, t->strides[a], "diagonal", &off)))
    return rc;
  int64_t sz[MAXD], st[MAXD];
  int k = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != a && i != b) {
      sz[k] = t->sizes[i];
      st[k++] = t->strides[i];
    }
  sz[k] = n;
  if (__builtin_add_overflow(t->strides[a], t->strides[b], &st[k]))
    return tstor__stride_overflow("diagonal");
  k++;
  return restride(t, off, k, sz, st, out);
}

/* ------------------------------------------------------- split, chunk */

void tstor_tensor_list_free(tstor_tensor **list, int count) {
  if (list == NULL) return;
  for (int i = 0; i < count; i++) tstor_tensor_release(list[i]);
  tstor__free(list);
}

/* ATen's split_with_sizes along dim (d wrapped): each piece a slice
 * (clamped to the dimension), a negative size refused when the loop reaches
 * it, and the sum checked last, so that a piece whose offset overflows is
 * refused first, as torch 2.x refuses it. Past a sum that overflows, whose
 * pieces PyTorch clamps to nothing, only the signs are checked. */
static int split_sizes(const tstor_tensor *t, int64_t dim, int d, int n, const int64_t *lens,
                       int *count, tstor_tensor ***out) {
  tstor_tensor **list = tstor__calloc((size_t)(n ? n : 1), sizeof *list);
  if (list == NULL) return tstor__err(TSTOR_ENOMEM, "no memory for %d tensors", n);
  char buf[512];
  int64_t start = 0, end;
  int rc = 0, wrapped = 0;
  for (int i = 0; i < n; i++) {
    if (lens[i] < 0) {
      rc = tstor__err(TSTOR_EINVAL,
                      "split_with_sizes expects split_sizes have only non-negative entries, but "
                      "got split_sizes=%s",
                      tstor__dims_str(buf, sizeof buf, n, lens));
      goto fail;
    }
    if (wrapped || (wrapped = __builtin_add_overflow(start, lens[i], &end))) continue;
    if ((rc = tstor_tensor_slice(t, d, start, end, 1, &list[i]))) goto fail;
    start = end;
  }
  if (wrapped || start != t->sizes[d]) {
    rc = tstor__err(TSTOR_ESIZE,
                    "split_with_sizes expects split_sizes to sum exactly to %" PRId64
                    " (input tensor's size at dimension %" PRId64 "), but got split_sizes=%s",
                    t->sizes[d], dim, tstor__dims_str(buf, sizeof buf, n, lens));
    goto fail;
  }
  *count = n;
  *out = list;
  return 0;
fail:
  tstor_tensor_list_free(list, n);
  return rc;
}

static int split_check(const tstor_tensor *t, int *count, tstor_tensor ***out, const char *what) {
  if (count == NULL || out == NULL) return tstor__err(TSTOR_EINVAL, "%s: NULL out", what);
  *out = NULL;
  *count = 0;
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "%s: NULL tensor", what);
  return 0;
}

int tstor_tensor_split(const tstor_tensor *t, int64_t split_size, int64_t dim, int *count,
                       tstor_tensor ***out) {
  if (out) *out = NULL;
  int rc = split_check(t, count, out, "tensor_split"), d;
  if (rc) return rc;
  if (t->ndim == 0)
    return tstor__err(TSTOR_EINVAL, "split expects at least a 1-dimensional tensor");
  if (split_size < 0)
    return tstor__err(TSTOR_EINVAL,
                      "split expects split_size be non-negative, but got split_size=%" PRId64,
                      split_size);
  if ((rc = tstor__wrap_dim(dim, t->ndim, 1, &d))) return rc;
  int64_t n = t->sizes[d];
  if (split_size == 0 && n != 0)
    return tstor__err(
        TSTOR_EINVAL,
        "split_size can only be 0 if dimension size is 0, but got dimension size of %" PRId64, n);
  int64_t num = split_size ? n / split_size + (n % split_size != 0) : 1; /* no n + split_size */
  if (num < 1) num = 1;
  if (num > INT32_MAX / 8)
    return tstor__err(TSTOR_ERANGE, "split: %" PRId64 " pieces are too many", num);
  int64_t *lens = tstor__malloc((size_t)num * 8);
  if (lens == NULL) return tstor__err(TSTOR_ENOMEM, "no memory for %" PRId64 " pieces", num);
  for (int64_t i = 0; i < num; i++) lens[i] = split_size;
  lens[num - 1] = n - split_size * (num - 1); /* the product is below n */
  rc = split_sizes(t, dim, d, (int)num, lens, count, out);
  tstor__free(lens);
  return rc;
}

int tstor_tensor_split_sizes(const tstor_tensor *t, int n, const int64_t *sizes, int64_t dim,
                             int *count, tstor_tensor ***out) {
  if (out) *out = NULL;
  int rc = split_check(t, count, out, "tensor_split_sizes"), d;
  if (rc) return rc;
  if (t->ndim == 0)
    return tstor__err(TSTOR_EINVAL, "split expects at least a 1-dimensional tensor");
  if ((rc = tstor__wrap_dim(dim, t->ndim, 1, &d))) return rc;
  if (n < 0 || (n > 0 && sizes == NULL))
    return tstor__err(TSTOR_EINVAL, "tensor_split_sizes: NULL sizes");
  return split_sizes(t, dim, d, n, sizes, count, out);
}

int tstor_tensor_chunk(const tstor_tensor *t, int chunks, int64_t dim, int *count,
                       tstor_tensor ***out) {
  if (out) *out = NULL;
  int rc = split_check(t, count, out, "tensor_chunk"), d;
  if (rc) return rc;
  if (t->ndim == 0)
    return tstor__err(TSTOR_EINVAL, "chunk expects at least a 1-dimensional tensor");
  if (chunks <= 0)
    return tstor__err(TSTOR_EINVAL, "chunk expects `chunks` to be greater than 0, got: %d", chunks);
  if ((rc = tstor__wrap_dim(dim, t->ndim, 1, &d))) return rc;
  int64_t n = t->sizes[d];
  /* ceil(n / chunks), without n + chunks - 1, which can overflow */
  int64_t split_size = n / chunks + (n % chunks != 0);
  if (split_size == 0 && n == 0) {
    int64_t *lens = tstor__calloc((size_t)chunks, 8);
    if (lens == NULL) return tstor__err(TSTOR_ENOMEM, "no memory for %d pieces", chunks);
    rc = split_sizes(t, dim, d, chunks, lens, count, out);
    tstor__free(lens);
    return rc;
  }
  return tstor_tensor_split(t, split_size, d, count, out);
}

/* -------------------------------------------------------------- dtypes */

int tstor_tensor_view_dtype(const tstor_tensor *t, tstor_dtype dtype, tstor_tensor **out) {
  int rc = check(t, out, "tensor_view_dtype");
  if (rc) return rc;
  const tstor_dtype_info *nd = tstor__dtype(dtype, "tensor_view_dtype");
  if (nd == NULL) return TSTOR_EINVAL;
  const tstor_dtype_info *od = tstor_dtype_info_of(t->dtype);
  int64_t oes = (int64_t)od->element_size, nes = (int64_t)nd->element_size;
  if (oes == nes) return make(t, dtype, t->offset, t->ndim, t->sizes, t->strides, out);
  if (t->ndim == 0)
    return tstor__err(TSTOR_EINVAL,
                      "self.dim() cannot be 0 to view %s as %s (different element sizes)",
                      od->scalar_type, nd->scalar_type);
  int last = t->ndim - 1;
  int64_t sz[MAXD], st[MAXD];
  memcpy(sz, t->sizes, (size_t)t->ndim * 8);
  memcpy(st, t->strides, (size_t)t->ndim * 8);
  int64_t off;
  if (oes > nes) {
    int64_t r = oes / nes;
    if (t->strides[last] != 1)
      return tstor__err(
          TSTOR_EINVAL,
          "self.stride(-1) must be 1 to view %s as %s (different element sizes), but got %" PRId64,
          od->scalar_type, nd->scalar_type, t->strides[last]);
    if (__builtin_mul_overflow(t->offset, r, &off)) return tstor__stride_overflow("view");
    for (int i = 0; i < last; i++)
      if (__builtin_mul_overflow(st[i], r, &st[i])) return tstor__stride_overflow("view");
    if (__builtin_mul_overflow(sz[last], r, &sz[last])) return tstor__stride_overflow("view");
  } else {
    int64_t r = nes / oes;
    if (t->sizes[last] % r != 0)
      return tstor__err(TSTOR_EINVAL,
                        "self.size(-1) must be divisible by %" PRId64
                        " to view %s as %s (different element "
                        "sizes), but got %" PRId64,
                        r, od->scalar_type, nd->scalar_type, t->sizes[last]);
    if (t->offset % r != 0)
      return tstor__err(TSTOR_EINVAL,
                        "self.storage_offset() must be divisible by %" PRId64
                        " to view %s as %s (different "
                        "element sizes), but got %" PRId64,
                        r, od->scalar_type, nd->scalar_type, t->offset);
    if (t->strides[last] != 1)
      return tstor__err(
          TSTOR_EINVAL,
          "self.stride(-1) must be 1 to view %s as %s (different element sizes), but got %" PRId64,
          od->scalar_type, nd->scalar_type, t->strides[last]);
    for (int i = 0; i < last; i++) {
      if (st[i] % r != 0)
        return tstor__err(TSTOR_EINVAL,
                          "self.stride(%d) must be divisible by %" PRId64
                          " to view %s as %s (different "
                          "element sizes), but got %" PRId64,
                          i, r, od->scalar_type, nd->scalar_type, st[i]);
      st[i] /= r;
    }
    sz[last] /= r;
    off = t->offset / r;
  }
  return make(t, dtype, off, t->ndim, sz, st, out);
}

static int complex_part(const tstor_tensor *t, int imag, tstor_tensor **out) {
  int64_t st[MAXD], off;
  for (int i = 0; i < t->ndim; i++)
    if (__builtin_mul_overflow(t->strides[i], 2, &st[i]))
      return tstor__stride_overflow(imag ? "imag" : "real");
  if (__builtin_mul_overflow(t->offset, 2, &off))
    return tstor__stride_overflow(imag ? "imag" : "real");
  return make(t, tstor__complex_part(t->dtype), off + imag, t->ndim, t->sizes, st, out);
}

int tstor_tensor_real(const tstor_tensor *t, tstor_tensor **out) {
  int rc = check(t, out, "tensor_real");
  if (rc) return rc;
  if (tstor_dtype_info_of(t->dtype)->kind != TSTOR_KIND_COMPLEX) {
    *out = tstor_tensor_retain((tstor_tensor *)t);
    return 0;
  }
  return complex_part(t, 0, out);
}

/* Not merged with tensor_real: a non-complex tensor is itself for real but an
 * error for imag, as in PyTorch; the shared part is complex_part. */
int tstor_tensor_imag(const tstor_tensor *t, tstor_tensor **out) {
  int rc = check(t, out, "tensor_imag");
  if (rc) return rc;
  if (tstor_dtype_info_of(t->dtype)->kind != TSTOR_KIND_COMPLEX)
    return tstor__err(TSTOR_EINVAL, "imag is not implemented for tensors with non-complex dtypes.");
  return complex_part(t, 1, out);
}

int tstor_tensor_view_as_real(const tstor_tensor *t, tstor_tensor **out) {
  int rc = check(t, out, "tensor_view_as_real");
  if (rc) return rc;
  if (tstor_dtype_info_of(t->dtype)->kind != TSTOR_KIND_COMPLEX)
    return tstor__err(TSTOR_EINVAL, "view_as_real is only supported for complex tensors");
  if (t->ndim >= TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "tensor_view_as_real: %d dimensions; a tensor has 0 to %d",
                      t->ndim + 1, TSTOR_TENSOR_MAX_DIM);
  int64_t sz[MAXD + 1], st[MAXD + 1];
  int64_t off;
  for (int i = 0; i < t->ndim; i++) {
    sz[i] = t->sizes[i];
    if (__builtin_mul_overflow(t->strides[i], 2, &st[i]))
      return tstor__stride_overflow("view_as_real");
  }
  sz[t->ndim] = 2;
  st[t->ndim] = 1;
  if (__builtin_mul_overflow(t->offset, 2, &off)) return tstor__stride_overflow("view_as_real");
  return make(t, tstor__complex_part(t->dtype), off, t->ndim + 1, sz, st, out);
}
