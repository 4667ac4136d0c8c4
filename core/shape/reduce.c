/* The output layout of reductions (sum, mean, amax, argmax), as ATen's
 * ReduceOps.cpp, and of softmax, as SoftMax.cpp: the reduced dimensions
 * dropped (or kept as 1), the dtype of each op's rule, contiguous (a kept
 * dimension of sum and amax strided as torch 2.x's references stride it). */
#include "shape/shape_internal.h"

/* ---------------------------------------------------------------- reductions */

static const char *reduction_name(tstor_reduction op) {
  switch (op) {
    case TSTOR_REDUCE_SUM: return "sum";
    case TSTOR_REDUCE_MEAN: return "mean";
    case TSTOR_REDUCE_AMAX: return "amax";
    case TSTOR_REDUCE_ARGMAX: return "argmax";
  }
  return "?";
}

/* torch 2.x's sum and amax keep a reduced dimension as the references do:
 * the result without it, contiguous, then broadcast_in_dim's stride for the
 * dimension of size 1 put back (that of the next kept dimension times its
 * size, 1 at the end). They differ from the contiguous strides only where a
 * size is 0. r holds the kept layout, contiguous; reduced[] marks the n
 * dimensions of the input. */
static void keep_dims_strides(int n, const unsigned char *reduced, tstor_layout *r) {
  int64_t kept_sizes[TSTOR_TENSOR_MAX_DIM], kept_strides[TSTOR_TENSOR_MAX_DIM];
  int nk = 0;
  for (int d = 0; d < n; d++)
    if (!reduced[d]) kept_sizes[nk++] = r->sizes[d];
  tstor__contiguous_strides(nk, kept_sizes, kept_strides);
  int k = 0;
  for (int d = 0; d < n; d++) {
    if (!reduced[d])
      r->strides[d] = kept_strides[k++];
    else
      r->strides[d] = k == nk ? 1 : tstor__mul_wrap(kept_strides[k], kept_sizes[k]);
  }
}

/* as_dtype: sum and mean's dtype=, NULL for none */
static int reduce(tstor_reduction op, const tstor_layout *in, int ndims, const int64_t *dims,
                  int keepdim, const tstor_dtype *as_dtype, tstor_layout *out) {
  if (!in || !out || ndims < 0 || (ndims && !dims))
    return tstor__err(TSTOR_EINVAL, "reduce: bad arguments");
  if (op < TSTOR_REDUCE_SUM || op > TSTOR_REDUCE_ARGMAX)
    return tstor__err(TSTOR_EINVAL, "reduce: bad reduction %d", (int)op);
  const tstor_dtype_info *di = tstor_dtype_info_of(in->dtype);
  if (!di || in->ndim < 0 || in->ndim > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "reduce: bad input layout");
  const char *name = reduction_name(op);
  /* torch 2.x refuses a complex input first, whatever the dimension */
  if (op == TSTOR_REDUCE_ARGMAX && tstor__dtype_category(in->dtype) == TSTOR__CAT_COMPLEX)
    return tstor__err(TSTOR_EDTYPE, "argmax(): does not support complex input");
  if (op == TSTOR_REDUCE_ARGMAX && ndims > 1)
    return tstor__err(TSTOR_EINVAL, "argmax(): takes one dimension or none, not %d", ndims);
  /* which dimensions go */
  unsigned char reduced[TSTOR_TENSOR_MAX_DIM] = {0};
  for (int i = 0; i < ndims; i++) {
    int d = 0;
    int rc = tstor__shape_wrap_dim(dims[i], in->ndim, &d);
    if (rc < 0) return rc;
    /* amax and argmax check each dimension's size before duplicates */
    if ((op == TSTOR_REDUCE_AMAX || op == TSTOR_REDUCE_ARGMAX) && in->ndim > 0 && in->sizes[d] == 0)
      return tstor__err(TSTOR_ERANGE, "%s(): Expected reduction dim %d to have non-zero size.",
                        name, d);
    if (reduced[d]) {
      /* torch 2.x's mean of a bool or integer input (no dtype) says it other words */
      if (op == TSTOR_REDUCE_MEAN && !as_dtype &&
          tstor__dtype_category(in->dtype) < TSTOR__CAT_FLOAT)
        return tstor__err(TSTOR_EINVAL, "duplicate value in the list of dims");
      return tstor__err(TSTOR_EINVAL, "dim %d appears multiple times in the list of dims", d);
    }
    reduced[d] = 1;
  }
  int all = ndims == 0;
  if (all)
    for (int d = 0; d < in->ndim; d++) reduced[d] = 1;

  tstor_dtype dtype = in->dtype;
  int cat = tstor__dtype_category(in->dtype);
  if (as_dtype) {
    /* the input is converted first: the output is of the dtype asked for */
    const tstor_dtype_info *ai = tstor_dtype_info_of(*as_dtype);
    if (!ai) return tstor__err(TSTOR_EINVAL, "%s: bad dtype %d", name, (int)*as_dtype);
    if (op != TSTOR_REDUCE_SUM && op != TSTOR_REDUCE_MEAN)
      return tstor__err(TSTOR_EINVAL, "%s() takes no dtype", name);
    if (ai->kind == TSTOR_KIND_QUANTIZED || di->kind == TSTOR_KIND_QUANTIZED)
      return tstor__err(TSTOR_EDTYPE, "%s: quantized dtypes are not supported", name);
    if (op == TSTOR_REDUCE_MEAN && tstor__dtype_category(*as_dtype) < TSTOR__CAT_FLOAT)
      return tstor__err(TSTOR_EDTYPE,
                        "mean(): could not infer output dtype. Optional dtype must "
                        "be either a floating point or complex dtype. Got: torch.%s",
                        tstor_dtype_name(*as_dtype));
    dtype = *as_dtype;
  } else
    switch (op) {
      case TSTOR_REDUCE_SUM:
        if (cat < TSTOR__CAT_FLOAT) dtype = TSTOR_INT64;
        break;
      case TSTOR_REDUCE_MEAN:
        if (cat < TSTOR__CAT_FLOAT)
          return tstor__err(TSTOR_EDTYPE,
                            "mean(): could not infer output dtype. Input dtype must "
                            "be either a floating point or complex dtype. Got: torch.%s",
                            tstor_dtype_name(in->dtype));
        break;
      case TSTOR_REDUCE_AMAX:
      case TSTOR_REDUCE_ARGMAX:
        if (op == TSTOR_REDUCE_ARGMAX) dtype = TSTOR_INT64;
        if (tstor_layout_numel(in) == 0) {
          if (all)
            return tstor__err(
                op == TSTOR_REDUCE_ARGMAX ? TSTOR_ERANGE : TSTOR_EINVAL,
                "%s(): Expected reduction dim to be specified for input.numel() == 0.%s", name,
                op == TSTOR_REDUCE_AMAX ? " Specify the reduction dim with the 'dim' argument."
                                        : "");
          for (int d = 0; d < in->ndim; d++)
            if (reduced[d] && in->sizes[d] == 0)
              return tstor__err(TSTOR_ERANGE,
                                "%s(): Expected reduction dim %d to have non-zero "
                                "size.",
                                name, d);
        }
        break;
    }
  tstor_layout r;
  r.dtype = dtype;
  r.ndim = 0;
  for (int d = 0; d < in->ndim; d++) {
    if (!reduced[d])
      r.sizes[r.ndim++] = in->sizes[d];
    else if (keepdim)
      r.sizes[r.ndim++] = 1;
  }
  tstor__layout_contiguous(&r);
  if (keepdim && (op == TSTOR_REDUCE_SUM || op == TSTOR_REDUCE_AMAX))
    keep_dims_strides(in->ndim, reduced, &r);
  tstor__layout_copy(out, &r);
  return 0;
}

int tstor_layout_reduce(tstor_reduction op, const tstor_layout *in, int ndims, const int64_t *dims,
                        int keepdim, tstor_layout *out) {
  return reduce(op, in, ndims, dims, keepdim, NULL, out);
}

int tstor_layout_reduce_dtype(tstor_reduction op, const tstor_layout *in, int ndims,
                              const int64_t *dims, int keepdim, tstor_dtype dtype,
                              tstor_layout *out) {
  return reduce(op, in, ndims, dims, keepdim, &dtype, out);
}

/* The arguments of a reduction's tensor form past its input; dtype NULL for
 * none. */
typedef struct {
  tstor_reduction op;
  int ndims;
  const int64_t *dims;
  int keepdim;
  const tstor_dtype *dtype;
} reduce_args;

static int reduce_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  const reduce_args *a = args;
  return reduce(a->op, in[0], a->ndims, a->dims, a->keepdim, a->dtype, out);
}

int tstor_shape_reduce(tstor_reduction op, const tstor_tensor *in, int ndims, const int64_t *dims,
                       int keepdim, tstor_tensor **out) {
  const reduce_args a = {op, ndims, dims, keepdim, NULL};
  return tstor__shape_form("shape_reduce", 1, &in, 1, reduce_form, &a, out);
}

int tstor_shape_reduce_dtype(tstor_reduction op, const tstor_tensor *in, int ndims,
                             const int64_t *dims, int keepdim, tstor_dtype dtype,
                             tstor_tensor **out) {
  const reduce_args a = {op, ndims, dims, keepdim, &dtype};
  return tstor__shape_form("shape_reduce", 1, &in, 1, reduce_form, &a, out);
}

/* ------------------------------------------------------------------ softmax */

/* softmax, its input taken as converted to *as_dtype first (NULL: kept). */
static int softmax(const tstor_layout *in, int64_t dim, const tstor_dtype *as_dtype,
                   tstor_layout *out) {
  int rc, d;
  if ((rc = tstor__check_layout(in, "softmax: input")) < 0) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "softmax: out is NULL");
  tstor_dtype dtype = as_dtype ? *as_dtype : in->dtype;
  if (!tstor_dtype_info_of(dtype))
    return tstor__err(TSTOR_EINVAL, "softmax: bad dtype %d", (int)dtype);
  if ((rc = tstor__shape_wrap_dim(dim, in->ndim, &d)) < 0) return rc;
  if (tstor__is_quantized(in->dtype) || tstor__is_quantized(dtype))
    return tstor__err(TSTOR_EDTYPE, "softmax: quantized %s is not supported",
                      tstor_dtype_name(in->dtype));
  return tstor__set_contiguous(out, dtype, in->ndim, in->sizes);
}

int tstor_layout_softmax(const tstor_layout *in, int64_t dim, tstor_layout *out) {
  return softmax(in, dim, NULL, out);
}

int tstor_layout_softmax_dtype(const tstor_layout *in, int64_t dim, tstor_dtype dtype,
                               tstor_layout *out) {
  return softmax(in, dim, &dtype, out);
}

/* The arguments of softmax's tensor form past its input; dtype NULL for none. */
typedef struct {
  int64_t dim;
  const tstor_dtype *dtype;
} softmax_args;

static int softmax_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  const softmax_args *a = args;
  return softmax(in[0], a->dim, a->dtype, out);
}

int tstor_shape_softmax(const tstor_tensor *in, int64_t dim, tstor_tensor **out) {
  const softmax_args a = {dim, NULL};
  return tstor__shape_form("shape_softmax", 1, &in, 1, softmax_form, &a, out);
}

int tstor_shape_softmax_dtype(const tstor_tensor *in, int64_t dim, tstor_dtype dtype,
                              tstor_tensor **out) {
  const softmax_args a = {dim, &dtype};
  return tstor__shape_form("shape_softmax", 1, &in, 1, softmax_form, &a, out);
}
