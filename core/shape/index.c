/* The output layout of embedding and index_select, as ATen's Embedding.cpp
 * and TensorAdvancedIndexing.cpp check and compute it: int32 or int64
 * indices, a new contiguous output. */
#include "shape/shape_internal.h"

#include <inttypes.h>
#include <string.h>

static int is_index_dtype(tstor_dtype d) { return d == TSTOR_INT32 || d == TSTOR_INT64; }

int tstor_layout_embedding(const tstor_layout *weight, const tstor_layout *indices,
                           tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(weight, "embedding: weight")) < 0 ||
      (rc = tstor__check_layout(indices, "embedding: indices")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "embedding: out is NULL");
  /* torch 2.x checks the weight first, and names the indices' tensor type */
  if (weight->ndim != 2) return tstor__err(TSTOR_EINVAL, "'weight' must be 2-D");
  if (!is_index_dtype(indices->dtype)) {
    char type[64];
    return tstor__err(TSTOR_EDTYPE,
                      "Expected tensor for argument #1 'indices' to have one of "
                      "the following scalar types: Long, Int; but got %s instead (while checking "
                      "arguments for embedding)",
                      tstor__tensor_type_name(indices->dtype, type, sizeof type));
  }
  if (indices->ndim + 1 > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "embedding: indices have too many dimensions");
  int64_t n = tstor_layout_numel(indices);
  if (weight->sizes[0] == 0 && n != 0)
    return tstor__err(TSTOR_ERANGE, "index_select(): self indexing axis dim should be positive");
  int64_t s[TSTOR_TENSOR_MAX_DIM];
  memcpy(s, indices->sizes, sizeof(int64_t) * (size_t)indices->ndim);
  s[indices->ndim] = weight->sizes[1];
  return tstor__set_contiguous(out, weight->dtype, indices->ndim + 1, s);
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
  int64_t n = tstor_layout_numel(index);
  /* torch 2.x: a zero-dim self takes exactly one index, counted before its dtype */
  if (in->ndim == 0 && n != 1)
    return tstor__err(
        TSTOR_EINVAL,
        "index_select(): Index to scalar can have only 1 value, got %" PRId64 " value(s)", n);
  if (!is_index_dtype(index->dtype))
    return tstor__err(TSTOR_EDTYPE, "index_select(): Expected dtype int32 or int64 for index");
  if (in->ndim > 0 && in->sizes[d] == 0 && n != 0)
    return tstor__err(TSTOR_ERANGE, "index_select(): self indexing axis dim should be positive");
  int64_t s[TSTOR_TENSOR_MAX_DIM];
  for (int i = 0; i < in->ndim; i++) s[i] = in->sizes[i];
  if (in->ndim > 0) s[d] = n;
  return tstor__set_contiguous(out, in->dtype, in->ndim, s);
}

/* ------------------------------------------------------------ tensor forms */

static int embedding_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_embedding(in[0], in[1], out);
}

static int index_select_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_index_select(in[0], *(const int64_t *)args, in[1], out);
}

int tstor_shape_embedding(const tstor_tensor *weight, const tstor_tensor *indices,
                          tstor_tensor **out) {
  const tstor_tensor *ts[2] = {weight, indices};
  return tstor__shape_form("shape_embedding", 2, ts, 2, embedding_form, NULL, out);
}

int tstor_shape_index_select(const tstor_tensor *in, int64_t dim, const tstor_tensor *index,
                             tstor_tensor **out) {
  const tstor_tensor *ts[2] = {in, index};
  return tstor__shape_form("shape_index_select", 2, ts, 2, index_select_form, &dim, out);
}
