/* Shape inference: layouts, broadcasting, elementwise operations and
 * reductions. The output strides of elementwise operations follow PyTorch's
 * TensorIterator (its fast set-up for inputs of one dense layout, otherwise its
 * reorder_dimensions), so that the layout tstor computes is the one a PyTorch
 * kernel would write. */
#include "shape/shape_internal.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ helpers */

/* c10's get_channels_last_strides_2d/3d: plain products, so that a size of 0
 * zeroes the strides outside it (where contiguous strides count it as 1). */
static void channels_last_strides(int ndim, const int64_t *sizes, int64_t *strides,
                                  const int *order) {
  int64_t acc = 1;
  for (int i = 0; i < ndim; i++) {
    strides[order[i]] = acc;
    acc = tstor__mul_wrap(acc, sizes[order[i]]);
  }
}

static const int cl2d_order[4] = {1, 3, 2, 0};
static const int cl3d_order[5] = {1, 4, 3, 2, 0};

/* c10's is_channels_last_strides_2d/3d: the strides read as channels-last,
 * with the ambiguous layouts (a C of stride 0, N11W sliced, N1H1) read as
 * contiguous, as PyTorch's suggest_memory_format does. */
static int strides_like(const tstor_layout *l, const int *order, int n) {
  int64_t min = 0;
  if (l->strides[1] == 0) return 0;
  for (int i = 0; i < n; i++) {
    int d = order[i];
    if (l->sizes[d] == 0 || l->strides[d] < min) return 0;
    if (d == 0 && min == l->strides[1]) return 0;
    min = l->strides[d];
    if (l->sizes[d] > 1) min *= l->sizes[d];
  }
  return 1;
}

/* ------------------------------------------------------------------ layouts */

int tstor__check_layout(const tstor_layout *l, const char *what) {
  if (!l) return tstor__err(TSTOR_EINVAL, "%s is NULL", what);
  if (!tstor_dtype_info_of(l->dtype) || l->ndim < 0 || l->ndim > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "%s is not a valid layout", what);
  return 0;
}

int tstor_layout_init(tstor_layout *out, tstor_dtype dtype, int ndim, const int64_t *sizes,
                      const int64_t *strides) {
  if (!out) return tstor__err(TSTOR_EINVAL, "layout: out is NULL");
  if (!tstor_dtype_info_of(dtype))
    return tstor__err(TSTOR_EINVAL, "layout: %d is not a dtype", (int)dtype);
  if (ndim < 0 || ndim > TSTOR_TENSOR_MAX_DIM || (ndim > 0 && !sizes))
    return tstor__err(TSTOR_EINVAL, "layout: %d dimensions (0 .. %d, with sizes)", ndim,
                      TSTOR_TENSOR_MAX_DIM);
  int64_t numel = 1;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] < 0)
      return tstor__err(TSTOR_EINVAL, "layout: negative size %lld in dimension %d",
                        (long long)sizes[d], d);
    /* the contiguous strides are products of the sizes: they must fit */
    if (__builtin_mul_overflow(numel, sizes[d] > 1 ? sizes[d] : 1, &numel)) {
      char a[TSTOR__SHAPE_STR_MAX];
      return tstor__err(TSTOR_EOVERFLOW, "layout: %s has more elements than int64 counts",
                        tstor__dims_str(a, sizeof a, ndim, sizes));
    }
  }
  out->dtype = dtype;
  out->ndim = ndim;
  if (ndim) memmove(out->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
  if (strides && ndim)
    memmove(out->strides, strides, sizeof(int64_t) * (size_t)ndim);
  else
    tstor__layout_contiguous(out);
  return 0;
}

int tstor_layout_of(const tstor_tensor *t, tstor_layout *out) {
  if (!t || !out) return tstor__err(TSTOR_EINVAL, "layout_of: NULL argument");
  return tstor_layout_init(out, tstor_tensor_dtype(t), tstor_tensor_dim(t), tstor_tensor_sizes(t),
                           tstor_tensor_strides(t));
}

int64_t tstor_layout_numel(const tstor_layout *l) {
  int64_t n = 1;
  for (int d = 0; d < l->ndim; d++)
    if (l->sizes[d] == 0) return 0;
  for (int d = 0; d < l->ndim; d++)
    if (__builtin_mul_overflow(n, l->sizes[d], &n)) return -1;
  return n;
}

int tstor_layout_bytes(const tstor_layout *l, uint64_t *out) {
  if (!l || !out) return tstor__err(TSTOR_EINVAL, "layout_bytes: NULL argument");
  size_t es = tstor_dtype_size(l->dtype);
  if (!es) return tstor__err(TSTOR_EINVAL, "layout_bytes: %d is not a dtype", (int)l->dtype);
  if (l->ndim < 0 || l->ndim > TSTOR_TENSOR_MAX_DIM)
    return tstor__err(TSTOR_EINVAL, "layout_bytes: %d dimensions", l->ndim);
  return tstor_layout_nbytes(l->ndim, l->sizes, l->strides, es, 0, out);
}

tstor_memory_format tstor_layout_memory_format(const tstor_layout *l) {
  if (l && l->ndim == 4 && strides_like(l, cl2d_order, 4)) return TSTOR_MEMORY_CHANNELS_LAST;
  if (l && l->ndim == 5 && strides_like(l, cl3d_order, 5)) return TSTOR_MEMORY_CHANNELS_LAST_3D;
  return TSTOR_MEMORY_CONTIGUOUS;
}

int tstor_layout_restride(tstor_layout *l, tstor_memory_format format) {
  if (!l) return tstor__err(TSTOR_EINVAL, "layout_restride: NULL layout");
  switch (format) {
  case TSTOR_MEMORY_CONTIGUOUS: tstor__layout_contiguous(l); return 0;
  case TSTOR_MEMORY_CHANNELS_LAST:
    if (l->ndim != 4)
      return tstor__err(TSTOR_EINVAL, "required rank 4 tensor to use channels_last format");
    channels_last_strides(4, l->sizes, l->strides, cl2d_order);
    return 0;
  case TSTOR_MEMORY_CHANNELS_LAST_3D:
    if (l->ndim != 5)
      return tstor__err(TSTOR_EINVAL, "required rank 5 tensor to use channels_last_3d format");
    channels_last_strides(5, l->sizes, l->strides, cl3d_order);
    return 0;
  }
  return tstor__err(TSTOR_EINVAL, "layout_restride: bad memory format %d", (int)format);
}

int tstor_layout_view(const tstor_layout *in, int ndim, const int64_t *sizes, tstor_layout *out) {
  int rc = tstor__check_layout(in, "view: input");
  if (rc < 0) return rc;
  if (!out || ndim < 0 || ndim > TSTOR_TENSOR_MAX_DIM || (ndim && !sizes))
    return tstor__err(TSTOR_EINVAL, "view: bad arguments");
  int64_t numel = tstor_layout_numel(in), s[TSTOR_TENSOR_MAX_DIM], st[TSTOR_TENSOR_MAX_DIM];
  if (numel < 0) return tstor__err(TSTOR_EOVERFLOW, "view: the input's element count passes int64");
  rc = tstor__infer_size(ndim, sizes, numel, s);
  if (rc == 0) rc = tstor__view_strides(in->ndim, in->sizes, in->strides, ndim, s, st, "view");
  if (rc < 0) return rc;
  out->dtype = in->dtype;
  out->ndim = ndim;
  memcpy(out->sizes, s, sizeof(int64_t) * (size_t)ndim);
  memcpy(out->strides, st, sizeof(int64_t) * (size_t)ndim);
  return 0;
}

int tstor_layout_empty(tstor_context *ctx, tstor_device dev, const tstor_layout *l,
                       tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "layout_empty: out is NULL");
  *out = NULL;
  if (!l) return tstor__err(TSTOR_EINVAL, "layout_empty: NULL layout");
  return tstor_tensor_empty_strided(ctx, dev, l->dtype, l->ndim, l->sizes, l->strides, out);
}

/* ------------------------------------------------------------- tensor glue */

int tstor__shape_device(int n, const tstor_tensor *const *tensors, tstor_context **ctx,
                        tstor_device *dev) {
  const tstor_tensor *first = NULL;
  for (int i = 0; i < n; i++) {
    const tstor_tensor *t = tensors[i];
    if (!t) continue;
    if (!first) {
      first = t;
      *ctx = t->storage->ctx;
      *dev = t->storage->device;
      continue;
    }
    tstor_device d = t->storage->device;
    if (d.type != dev->type || d.index != dev->index || t->storage->ctx != *ctx) {
      char a[64] = "?", b[64] = "?";
      tstor_device_format(*ctx, *dev, a, sizeof a);
      tstor_device_format(t->storage->ctx, d, b, sizeof b);
      return tstor__err(TSTOR_EINVAL, "Expected all tensors to be on the same device, but found "
                        "at least two devices, %s and %s!", a, b);
    }
  }
  if (!first) return tstor__err(TSTOR_EINVAL, "shape: no tensor given");
  return 0;
}

int tstor__shape_layouts(int n, const tstor_tensor *const *tensors, tstor_layout *layouts,
                         tstor_context **ctx, tstor_device *dev) {
  for (int i = 0; i < n; i++) {
    const tstor_tensor *t = tensors[i];
    if (!t) continue;
    /* a tensor's layout is valid by construction: copied, not checked */
    layouts[i].dtype = t->dtype;
    layouts[i].ndim = t->ndim;
    memcpy(layouts[i].sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(layouts[i].strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
  }
  return tstor__shape_device(n, tensors, ctx, dev);
}

int tstor__shape_complete(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                          tstor_tensor *t, int contiguous, tstor_tensor **out) {
  /* t's layout came out of shape inference: valid sizes and strides, so the
   * tensor goes straight onto a new storage of exactly the bytes it needs,
   * counted as PyTorch's empty and empty_strided count them */
  int64_t numel = 1;
  int over_numel = 0, empty = 0;
  for (int d = 0; d < t->ndim; d++) {
    empty |= t->sizes[d] == 0;
    over_numel |= __builtin_mul_overflow(numel, t->sizes[d], &numel);
  }
  if (!contiguous) contiguous = tstor__compute_contiguous(t->ndim, t->sizes, t->strides);
  size_t esize = tstor_dtype_size(dtype);
  /* A contiguous count is the element count's bytes, known here already; the
   * shared count runs for strides and for the refusal and its message. */
  uint64_t nbytes = 0;
  int rc = 0;
  if (!contiguous || over_numel || __builtin_mul_overflow((uint64_t)numel, esize, &nbytes) ||
      nbytes > INT64_MAX || nbytes > SIZE_MAX)
    rc = tstor__layout_nbytes(t->ndim, t->sizes, contiguous ? NULL : t->strides, esize, &nbytes);
  /* the strided count stops at a size of 0, and its strides may have wrapped
   * (tstor__mul_wrap) where the element count passes int64 */
  if (rc == 0 && over_numel && !empty) {
    char a[TSTOR__SHAPE_STR_MAX];
    rc = tstor__err(TSTOR_EOVERFLOW, "the number of elements of sizes %s overflows int64",
                    tstor__dims_str(a, sizeof a, t->ndim, t->sizes));
  }
  tstor_storage *s = NULL;
  /* the device is a live tensor's: checked when that tensor was made */
  if (TSTOR__LIKELY(rc == 0))
    rc = tstor__storage_new_with(ctx, dev, ctx->types[dev.type].allocator, (size_t)nbytes, NULL,
                                 &s);
  if (TSTOR__UNLIKELY(rc)) {
    tstor__tensor_discard(t);
    return rc;
  }
  tstor__tensor_complete(t, s, dtype, esize, 0, numel, contiguous);
  *out = t;
  return 0;
}

int tstor__shape_finish(int rc, tstor_context *ctx, tstor_device dev, const tstor_layout *l,
                        tstor_tensor **out) {
  if (rc < 0) return rc;
  tstor_tensor *t = tstor__tensor_blank(l->ndim);
  if (!t) return TSTOR_ENOMEM;
  memcpy(t->sizes, l->sizes, sizeof(int64_t) * (size_t)l->ndim);
  memcpy(t->strides, l->strides, sizeof(int64_t) * (size_t)l->ndim);
  return tstor__shape_complete(ctx, dev, l->dtype, t, 0, out);
}

/* ------------------------------------------------------------ broadcasting */

int tstor_broadcast_shapes(int n, const int *ndims, const int64_t *const *sizes, int *out_ndim,
                           int64_t *out_sizes) {
  if (n < 1 || !ndims || !sizes || !out_ndim || !out_sizes)
    return tstor__err(TSTOR_EINVAL, "broadcast_shapes: %s",
                      n < 1 ? "no shapes" : "NULL argument");
  int nd = 0;
  int64_t r[TSTOR_TENSOR_MAX_DIM];
  for (int i = 0; i < n; i++) {
    if (ndims[i] < 0 || ndims[i] > TSTOR_TENSOR_MAX_DIM || (ndims[i] && !sizes[i]))
      return tstor__err(TSTOR_EINVAL, "broadcast_shapes: shape %d has %d dimensions", i,
                        ndims[i]);
    for (int d = 0; d < ndims[i]; d++)
      if (sizes[i][d] < 0)
        return tstor__err(TSTOR_EINVAL, "broadcast_shapes: shape %d has a negative size", i);
    int rc = tstor__broadcast_into(&nd, r, ndims[i], sizes[i]);
    if (rc < 0) return rc;
  }
  *out_ndim = nd;
  memcpy(out_sizes, r, sizeof(int64_t) * (size_t)nd);
  return 0;
}

/* ------------------------------------------------------------- elementwise */

/* An operand by reference: into a tstor_layout for the layout form, straight
 * into a tensor for the tensor forms, which then copy no shape before the
 * inference. */
typedef struct {
  tstor_dtype dtype;
  int ndim;
  const int64_t *sizes, *strides;
} operand;

static int is_contiguous(const operand *o) {
  return tstor__compute_contiguous(o->ndim, o->sizes, o->strides);
}

/* TensorIterator's channels-last fast path is for 4 dimensions only. */
static int is_channels_last_contiguous(const operand *o) {
  return o->ndim == 4 && tstor__channels_last_contiguous(o->ndim, o->sizes, o->strides);
}

static int is_non_overlapping_and_dense(const operand *o) {
  return tstor__non_overlapping_and_dense(o->ndim, o->sizes, o->strides);
}

static int same_dims(int n, const int64_t *a, const int64_t *b) {
  for (int i = 0; i < n; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

typedef struct {
  int n;
  const operand *in;
  int ndim;
  const int64_t *sizes; /* the broadcast shape */
} iterator_order;

/* TensorIterator's should_swap over the inputs' strides on the broadcast shape
 * (0 where an input is broadcast along the dim). */
static int iterator_should_swap(const void *ctx, int d0, int d1) {
  const iterator_order *o = ctx;
  const int64_t *sizes = o->sizes;
  for (int k = 0; k < o->n; k++) {
    const operand *in = &o->in[k];
    int off = o->ndim - in->ndim;
    int64_t s0 = d0 >= off ? in->strides[d0 - off] : 0;
    int64_t s1 = d1 >= off ? in->strides[d1 - off] : 0;
    if (d0 >= off && in->sizes[d0 - off] == 1 && sizes[d0] != 1) s0 = 0;
    if (d1 >= off && in->sizes[d1 - off] == 1 && sizes[d1] != 1) s1 = 0;
    if (s0 == 0 || s1 == 0) continue;
    if (s0 < s1) return -1;
    if (s0 > s1) return 1;
    if (sizes[d0] > sizes[d1]) return 1;
  }
  return 0;
}

/* The output strides (for the broadcast sizes) of TensorIterator's general
 * path: order the dimensions by the inputs' strides, then lay the output out
 * densely in that order. 1 when that order is the contiguous one. */
static int iterator_strides(int n, const operand *in, int nd, const int64_t *sizes,
                            int64_t *strides) {
  if (nd == 0) return 1;
  /* A first input that spans every dimension, none of size 1, with strides
   * that fall strictly from the first dimension to the last orders every pair
   * of dimensions by itself, as they stand: the output is contiguous. That is
   * a full tensor combined with broadcast ones, decided without the sort. */
  const operand *first = &in[0];
  int ordered = first->ndim == nd && first->strides[nd - 1] > 0;
  for (int d = 0; d < nd && ordered; d++)
    ordered = first->sizes[d] > 1 && (d == nd - 1 || first->strides[d] > first->strides[d + 1]);
  if (ordered) {
    tstor__contiguous_strides(nd, sizes, strides);
    return 1;
  }
  int perm[TSTOR_TENSOR_MAX_DIM];
  for (int i = 0; i < nd; i++) perm[i] = nd - 1 - i;
  iterator_order o = {n, in, nd, sizes};
  tstor__reorder_dims(nd, perm, iterator_should_swap, &o);
  int inverted = 1;
  for (int j = 0; j < nd; j++)
    if (perm[j] != nd - 1 - j) inverted = 0;
  if (inverted) {
    tstor__contiguous_strides(nd, sizes, strides);
    return 1;
  }
  /* TensorIterator's compatible_stride: plain products, so a size of 0 zeroes
   * every slower stride */
  int64_t next = 1;
  for (int j = 0; j < nd; j++) {
    strides[perm[j]] = next;
    next = tstor__mul_wrap(next, sizes[perm[j]]);
  }
  return 0;
}

/* The broadcast rank of the inputs: the output's number of dimensions. */
static int broadcast_rank(int n, const operand *in) {
  int nd = 0;
  for (int i = 0; i < n; i++)
    if (in[i].ndim > nd) nd = in[i].ndim;
  return nd;
}

/* TSTOR_ELEMENTWISE_NO_BOOL: PyTorch's neg refuses a bool tensor, and its
 * sub (sub_check) two bool operands, then one; a number counts as the
 * zero-dim tensor PyTorch wraps it in. Checked before the shapes, as there. */
static int refuse_bool(int n, const operand *in, int nnumbers, const tstor_dtype *numbers) {
  int bools = 0;
  for (int i = 0; i < n; i++) bools += in[i].dtype == TSTOR_BOOL;
  for (int i = 0; i < nnumbers; i++) bools += numbers[i] == TSTOR_BOOL;
  if (bools == 0) return 0;
  if (n + nnumbers == 1)
    return tstor__err(TSTOR_EINVAL, "Negation, the `-` operator, on a bool tensor is not "
                      "supported. If you are trying to invert a mask, use the `~` or "
                      "`logical_not()` operator instead.");
  if (bools == n + nnumbers)
    return tstor__err(TSTOR_EINVAL, "Subtraction, the `-` operator, with two bool tensors is "
                      "not supported. Use the `^` or `logical_xor()` operator instead.");
  return tstor__err(TSTOR_EINVAL, "Subtraction, the `-` operator, with a bool tensor is not "
                    "supported. If you are trying to invert a mask, use the `~` or "
                    "`logical_not()` operator instead.");
}

/* The inference itself, for valid operands: the dtype into *dtype, and the
 * sizes and strides into arrays of broadcast_rank() that alias no input;
 * *contiguous is 1 where the strides are known contiguous (0: not known). */
static int elementwise(tstor_elementwise_rule rule, int n, const operand *in, int nnumbers,
                       const tstor_dtype *numbers, tstor_dtype *dtype, int64_t *sizes,
                       int64_t *strides, int *contiguous) {
  int rc;
  if ((unsigned)rule > TSTOR_ELEMENTWISE_NO_BOOL)
    return tstor__err(TSTOR_EINVAL, "elementwise: bad rule %d", (int)rule);
  if (rule == TSTOR_ELEMENTWISE_NO_BOOL && (rc = refuse_bool(n, in, nnumbers, numbers)) < 0)
    return rc;
  int same_dtype = nnumbers == 0;
  for (int i = 1; i < n; i++) same_dtype &= in[i].dtype == in[0].dtype;
  tstor_dtype common = in[0].dtype;
  if (!same_dtype || !tstor_dtype_info_of(common)) {
    /* the general case; one dtype and no numbers promotes to itself */
    tstor_operand ops[2 * TSTOR__SHAPE_MAX_OPERANDS];
    for (int i = 0; i < n; i++) {
      ops[i].dtype = in[i].dtype;
      ops[i].kind = in[i].ndim ? TSTOR_OPERAND_TENSOR : TSTOR_OPERAND_ZERO_DIM;
    }
    for (int i = 0; i < nnumbers; i++) {
      ops[n + i].dtype = numbers[i];
      ops[n + i].kind = TSTOR_OPERAND_NUMBER;
    }
    if ((rc = tstor_result_type(n + nnumbers, ops, &common)) < 0) return rc;
  }
  if (rule == TSTOR_ELEMENTWISE_FLOAT && tstor__dtype_category(common) < 2)
    common = TSTOR__DEFAULT_FLOAT;
  if (rule == TSTOR_ELEMENTWISE_BOOL) common = TSTOR_BOOL;
  if (rule == TSTOR_ELEMENTWISE_REAL && common == TSTOR_BOOL)
    return tstor__err(TSTOR_EDTYPE, "\"abs_cpu\" not implemented for 'Bool'");
  *contiguous = 0;
  if (rule == TSTOR_ELEMENTWISE_REAL && tstor__dtype_category(common) == 3) {
    common = tstor__complex_part(common);
    if (n == 1 && nnumbers == 0) {
      /* abs of a complex tensor writes into empty_like(input): its own
       * strides where dense, dense in its order otherwise */
      *dtype = common;
      for (int d = 0; d < in[0].ndim; d++) sizes[d] = in[0].sizes[d];
      if (is_non_overlapping_and_dense(&in[0]))
        for (int d = 0; d < in[0].ndim; d++) strides[d] = in[0].strides[d];
      else
        tstor__infer_dense_strides(in[0].ndim, in[0].sizes, in[0].strides, strides);
      return 0;
    }
  }
  *dtype = common;

  /* the shape; numbers are zero-dim operands, which count for "all the same
   * shape" as TensorIterator's wrapped numbers do */
  int nd = in[0].ndim;
  for (int d = 0; d < nd; d++) sizes[d] = in[0].sizes[d];
  int same_shape = 1;
  for (int i = 1; i < n; i++) {
    if (in[i].ndim != nd || !same_dims(nd, in[i].sizes, sizes)) same_shape = 0;
    rc = tstor__broadcast_into(&nd, sizes, in[i].ndim, in[i].sizes);
    if (rc < 0) return rc;
  }
  if (nnumbers && nd != 0) same_shape = 0;

  /* TensorIterator's fast set-up: inputs of one shape and one dense layout */
  if (same_shape) {
    int contig = 1, cl = 1, dense = 1;
    for (int i = 0; i < n; i++) {
      contig &= is_contiguous(&in[i]);
      cl &= is_channels_last_contiguous(&in[i]);
      dense &= is_non_overlapping_and_dense(&in[i]);
    }
    if (contig) {
      tstor__contiguous_strides(nd, sizes, strides);
      *contiguous = 1;
      return 0;
    }
    if (cl) {
      channels_last_strides(nd, sizes, strides, cl2d_order);
      return 0;
    }
    if (dense) {
      int same = 1;
      for (int i = 1; i < n; i++) same &= same_dims(nd, in[i].strides, in[0].strides);
      if (same) {
        for (int d = 0; d < nd; d++) strides[d] = in[n - 1].strides[d];
        return 0;
      }
    }
  }
  *contiguous = iterator_strides(n, in, nd, sizes, strides);
  return 0;
}

int tstor_layout_elementwise(tstor_elementwise_rule rule, int n, const tstor_layout *inputs,
                             int nnumbers, const tstor_dtype *numbers, tstor_layout *out) {
  if (n < 1 || n > TSTOR__SHAPE_MAX_OPERANDS || !inputs || !out || nnumbers < 0 ||
      nnumbers > TSTOR__SHAPE_MAX_OPERANDS || (nnumbers && !numbers))
    return tstor__err(TSTOR_EINVAL, "elementwise: bad operands (%d tensors, %d numbers)", n,
                      nnumbers);
  operand in[TSTOR__SHAPE_MAX_OPERANDS];
  for (int i = 0; i < n; i++) {
    if (inputs[i].ndim < 0 || inputs[i].ndim > TSTOR_TENSOR_MAX_DIM)
      return tstor__err(TSTOR_EINVAL, "elementwise: input %d has %d dimensions", i,
                        inputs[i].ndim);
    in[i] = (operand){inputs[i].dtype, inputs[i].ndim, inputs[i].sizes, inputs[i].strides};
  }
  /* into r, not out: out may be one of the inputs */
  tstor_layout r;
  r.ndim = broadcast_rank(n, in);
  int contiguous;
  int rc = elementwise(rule, n, in, nnumbers, numbers, &r.dtype, r.sizes, r.strides, &contiguous);
  if (rc < 0) return rc;
  tstor__layout_copy(out, &r);
  return 0;
}

/* The tensor forms of elementwise inference: the operands read in place and
 * the output's shape computed straight into the new tensor. */
static int elementwise_tensor(tstor_elementwise_rule rule, int n, const tstor_tensor *const *ts,
                              int nnumbers, const tstor_dtype *numbers, tstor_tensor **out) {
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_device(n, ts, &ctx, &dev);
  if (rc < 0) return rc;
  operand in[2]; /* unary, binary, or one tensor and a number */
  for (int i = 0; i < n; i++)
    in[i] = (operand){ts[i]->dtype, ts[i]->ndim, ts[i]->sizes, ts[i]->strides};
  tstor_tensor *t = tstor__tensor_blank(broadcast_rank(n, in));
  if (!t) return TSTOR_ENOMEM;
  tstor_dtype dtype;
  int contiguous;
  rc = elementwise(rule, n, in, nnumbers, numbers, &dtype, t->sizes, t->strides, &contiguous);
  if (rc < 0) {
    tstor__tensor_discard(t);
    return rc;
  }
  return tstor__shape_complete(ctx, dev, dtype, t, contiguous, out);
}

int tstor_shape_unary(tstor_elementwise_rule rule, const tstor_tensor *a, tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_unary: out is NULL");
  *out = NULL;
  if (!a) return tstor__err(TSTOR_EINVAL, "shape_unary: NULL tensor");
  return elementwise_tensor(rule, 1, &a, 0, NULL, out);
}

int tstor_shape_binary(tstor_elementwise_rule rule, const tstor_tensor *a, const tstor_tensor *b,
                       tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_binary: out is NULL");
  *out = NULL;
  if (!a || !b) return tstor__err(TSTOR_EINVAL, "shape_binary: NULL tensor");
  const tstor_tensor *ts[2] = {a, b};
  return elementwise_tensor(rule, 2, ts, 0, NULL, out);
}

/* The tstor_shape_* entry points (here, shape_nn.c, shape_ops.c) stay one per
 * op: the shared steps are elementwise_tensor here and tstor__shape_layouts/
 * _finish elsewhere; what is left is each op's own public signature. */
int tstor_shape_binary_number(tstor_elementwise_rule rule, const tstor_tensor *a,
                              tstor_dtype number, tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_binary_number: out is NULL");
  *out = NULL;
  if (!a) return tstor__err(TSTOR_EINVAL, "shape_binary_number: NULL tensor");
  return elementwise_tensor(rule, 1, &a, 1, &number, out);
}

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
  if (op == TSTOR_REDUCE_ARGMAX && ndims > 1)
    return tstor__err(TSTOR_EINVAL, "argmax(): takes one dimension or none, not %d", ndims);
  /* which dimensions go */
  unsigned char reduced[TSTOR_TENSOR_MAX_DIM] = {0};
  for (int i = 0; i < ndims; i++) {
    int d = 0;
    int rc = tstor__shape_wrap_dim(dims[i], in->ndim, &d);
    if (rc < 0) return rc;
    /* amax and argmax check each dimension's size before duplicates */
    if ((op == TSTOR_REDUCE_AMAX || op == TSTOR_REDUCE_ARGMAX) && in->ndim > 0 &&
        in->sizes[d] == 0)
      return tstor__err(TSTOR_ERANGE, "%s(): Expected reduction dim %d to have non-zero size.",
                        name, d);
    if (reduced[d])
      return tstor__err(TSTOR_EINVAL, "dim %d appears multiple times in the list of dims", d);
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
    if (op == TSTOR_REDUCE_MEAN && tstor__dtype_category(*as_dtype) < 2)
      return tstor__err(TSTOR_EDTYPE, "mean(): could not infer output dtype. Optional dtype must "
                        "be either a floating point or complex dtype. Got: %s", ai->scalar_type);
    dtype = *as_dtype;
  } else switch (op) {
  case TSTOR_REDUCE_SUM:
    if (cat < 2) dtype = TSTOR_INT64;
    break;
  case TSTOR_REDUCE_MEAN:
    if (cat < 2)
      return tstor__err(TSTOR_EDTYPE, "mean(): could not infer output dtype. Input dtype must "
                        "be either a floating point or complex dtype. Got: %s",
                        di->scalar_type);
    break;
  case TSTOR_REDUCE_AMAX:
  case TSTOR_REDUCE_ARGMAX:
    if (op == TSTOR_REDUCE_ARGMAX) dtype = TSTOR_INT64;
    if (tstor_layout_numel(in) == 0) {
      if (all)
        return tstor__err(op == TSTOR_REDUCE_ARGMAX ? TSTOR_ERANGE : TSTOR_EINVAL,
                          "%s(): Expected reduction dim to be specified for input.numel() == 0.",
                          name);
      for (int d = 0; d < in->ndim; d++)
        if (reduced[d] && in->sizes[d] == 0)
          return tstor__err(TSTOR_ERANGE, "%s(): Expected reduction dim %d to have non-zero "
                            "size.", name, d);
    }
    break;
  }
  tstor_layout r;
  r.dtype = dtype;
  r.ndim = 0;
  for (int d = 0; d < in->ndim; d++) {
    if (!reduced[d]) r.sizes[r.ndim++] = in->sizes[d];
    else if (keepdim) r.sizes[r.ndim++] = 1;
  }
  tstor__layout_contiguous(&r);
  tstor__layout_copy(out, &r);
  return 0;
}

int tstor_layout_reduce(tstor_reduction op, const tstor_layout *in, int ndims,
                        const int64_t *dims, int keepdim, tstor_layout *out) {
  return reduce(op, in, ndims, dims, keepdim, NULL, out);
}

int tstor_layout_reduce_dtype(tstor_reduction op, const tstor_layout *in, int ndims,
                              const int64_t *dims, int keepdim, tstor_dtype dtype,
                              tstor_layout *out) {
  return reduce(op, in, ndims, dims, keepdim, &dtype, out);
}

static int shape_reduce(tstor_reduction op, const tstor_tensor *in, int ndims, const int64_t *dims,
                        int keepdim, const tstor_dtype *dtype, tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_reduce: out is NULL");
  *out = NULL;
  tstor_layout l, r;
  tstor_context *ctx = NULL;
  tstor_device dev = {0, 0};
  int rc = tstor__shape_layouts(1, &in, &l, &ctx, &dev);
  if (rc == 0) rc = reduce(op, &l, ndims, dims, keepdim, dtype, &r);
  return tstor__shape_finish(rc, ctx, dev, &r, out);
}

int tstor_shape_reduce(tstor_reduction op, const tstor_tensor *in, int ndims, const int64_t *dims,
                       int keepdim, tstor_tensor **out) {
  return shape_reduce(op, in, ndims, dims, keepdim, NULL, out);
}

int tstor_shape_reduce_dtype(tstor_reduction op, const tstor_tensor *in, int ndims,
                             const int64_t *dims, int keepdim, tstor_dtype dtype,
                             tstor_tensor **out) {
  return shape_reduce(op, in, ndims, dims, keepdim, &dtype, out);
}
