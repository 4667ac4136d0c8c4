/* The output layout of elementwise operations, as ATen's TensorIterator.cpp
 * computes it (its fast set-up for inputs of one dense layout, otherwise its
 * reorder_dimensions), so that the layout tstor computes is the one a PyTorch
 * kernel would write; and that of where, whose meta kernel is a Python
 * reference (torch/_prims_common compute_elementwise_output_strides), with
 * that order (tstor__refs_strides, which relu's kernel shares). */
#include "shape/shape_internal.h"

#include <string.h>

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
    return tstor__err(TSTOR_EINVAL,
                      "Negation, the `-` operator, on a bool tensor is not "
                      "supported. If you are trying to invert a mask, use the `~` or "
                      "`logical_not()` operator instead.");
  if (bools == n + nnumbers)
    return tstor__err(TSTOR_EINVAL,
                      "Subtraction, the `-` operator, with two bool tensors is "
                      "not supported. Use the `^` or `logical_xor()` operator instead.");
  return tstor__err(TSTOR_EINVAL,
                    "Subtraction, the `-` operator, with a bool tensor is not "
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
  if (rule == TSTOR_ELEMENTWISE_FLOAT && tstor__dtype_category(common) < TSTOR__CAT_FLOAT)
    common = TSTOR__DEFAULT_FLOAT;
  if (rule == TSTOR_ELEMENTWISE_BOOL) common = TSTOR_BOOL;
  if (rule == TSTOR_ELEMENTWISE_REAL && common == TSTOR_BOOL)
    return tstor__err(TSTOR_EDTYPE, "\"abs_cpu\" not implemented for 'Bool'");
  *contiguous = 0;
  if (rule == TSTOR_ELEMENTWISE_REAL && tstor__dtype_category(common) == TSTOR__CAT_COMPLEX) {
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
      tstor__channels_last_strides(nd, sizes, strides);
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
      return tstor__err(TSTOR_EINVAL, "elementwise: input %d has %d dimensions", i, inputs[i].ndim);
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

/* The tensor forms of elementwise inference, the one kind that does not go
 * through tstor__shape_form: the operands read in place and the output's
 * shape computed straight into the new tensor, no layout copied. */
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

int tstor_shape_binary_number(tstor_elementwise_rule rule, const tstor_tensor *a,
                              tstor_dtype number, tstor_tensor **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "shape_binary_number: out is NULL");
  *out = NULL;
  if (!a) return tstor__err(TSTOR_EINVAL, "shape_binary_number: NULL tensor");
  return elementwise_tensor(rule, 1, &a, 1, &number, out);
}

/* ------------------------------------------------- the references' order */

/* The strides of PyTorch's compute_elementwise_output_strides for n layouts
 * of one shape (broadcast dimensions with stride 0): the dimensions sorted,
 * outermost first, by Python's sorted(..., key=cmp_to_key(cmp),
 * reverse=True), then laid out densely. The comparison is not a strict order
 * (a zero stride skips a tensor), so the result depends on the sorting
 * algorithm; this is CPython's for fewer than 64 items (a run, then binary
 * insertion), on the reversed list as its reverse=True does. At exactly 64
 * dimensions CPython would sort two runs and merge them; the insertion agrees
 * with that wherever the comparison is consistent. */
typedef struct {
  int n;
  const tstor_layout *in;
} refs_order;

/* cmp(a, b) < 0: dimension a is inner to b */
static int refs_cmp(const refs_order *o, int a, int b) {
  const int64_t *shape = o->in[0].sizes;
  for (int k = 0; k < o->n; k++) {
    int64_t sa = o->in[k].strides[a], sb = o->in[k].strides[b];
    if (sa == 0 || sb == 0) continue;
    if (sa < sb) return -1;
    if (sa > sb) return 1;
    if (shape[a] > shape[b]) return 1;
    if (shape[a] < shape[b]) return -1;
  }
  return 0;
}

void tstor__refs_strides(int n, const tstor_layout *in, int64_t *strides) {
  int nd = in[0].ndim;
  if (nd <= 1) {
    if (nd == 1) strides[0] = 1;
    return;
  }
  refs_order o = {n, in};
  int v[TSTOR_TENSOR_MAX_DIM];
  for (int i = 0; i < nd; i++) v[i] = nd - 1 - i; /* reverse=True reverses first */
  /* the first run: strictly descending (then reversed) or non-descending */
  int run = 2;
  if (refs_cmp(&o, v[1], v[0]) < 0) {
    while (run < nd && refs_cmp(&o, v[run], v[run - 1]) < 0) run++;
    for (int i = 0, j = run - 1; i < j; i++, j--) {
      int t = v[i];
      v[i] = v[j];
      v[j] = t;
    }
  } else {
    while (run < nd && !(refs_cmp(&o, v[run], v[run - 1]) < 0)) run++;
  }
  /* binary insertion of the rest */
  for (int start = run; start < nd; start++) {
    int pivot = v[start], l = 0, r = start;
    while (l < r) {
      int p = l + ((r - l) >> 1);
      if (refs_cmp(&o, pivot, v[p]) < 0)
        r = p;
      else
        l = p + 1;
    }
    memmove(v + l + 1, v + l, sizeof(int) * (size_t)(start - l));
    v[l] = pivot;
  }
  /* ascending now; reversed, v[nd-1] is the outermost: lay out innermost first */
  int64_t acc = 1;
  for (int i = 0; i < nd; i++) {
    int d = v[i];
    strides[d] = acc;
    if (in[0].sizes[d] != 0) acc = tstor__mul_wrap(acc, in[0].sizes[d]);
  }
}

/* l expanded to the ndim/sizes it broadcasts to: stride 0 where it is
 * stretched or missing. */
static void expand_to(const tstor_layout *l, int ndim, const int64_t *sizes, tstor_layout *out) {
  int off = ndim - l->ndim;
  out->dtype = l->dtype;
  out->ndim = ndim;
  for (int d = 0; d < ndim; d++) {
    out->sizes[d] = sizes[d];
    if (d < off)
      out->strides[d] = 0;
    else
      out->strides[d] = l->sizes[d - off] == sizes[d] ? l->strides[d - off] : 0;
  }
}

/* -------------------------------------------------------------------- where */

int tstor_layout_where(const tstor_layout *cond, const tstor_layout *a, const tstor_layout *b,
                       tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(cond, "where: condition")) < 0 ||
      (rc = tstor__check_layout(a, "where: a")) < 0 ||
      (rc = tstor__check_layout(b, "where: b")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "where: out is NULL");
  if (cond->dtype != TSTOR_BOOL)
    return tstor__err(TSTOR_EDTYPE,
                      "where expected condition to be a boolean tensor, but got a "
                      "tensor with dtype %s",
                      tstor_dtype_info_of(cond->dtype)->scalar_type);
  tstor_operand ops[2] = {{a->dtype, a->ndim ? TSTOR_OPERAND_TENSOR : TSTOR_OPERAND_ZERO_DIM},
                          {b->dtype, b->ndim ? TSTOR_OPERAND_TENSOR : TSTOR_OPERAND_ZERO_DIM}};
  tstor_dtype dtype;
  if ((rc = tstor_result_type(2, ops, &dtype)) < 0) return rc;
  int nds[3] = {cond->ndim, a->ndim, b->ndim};
  const int64_t *szs[3] = {cond->sizes, a->sizes, b->sizes};
  tstor_layout r;
  if ((rc = tstor_broadcast_shapes(3, nds, szs, &r.ndim, r.sizes)) < 0) return rc;
  /* the prim's order: a, b, then the condition */
  tstor_layout ex[3];
  expand_to(a, r.ndim, r.sizes, &ex[0]);
  expand_to(b, r.ndim, r.sizes, &ex[1]);
  expand_to(cond, r.ndim, r.sizes, &ex[2]);
  r.dtype = dtype;
  tstor__refs_strides(3, ex, r.strides);
  uint64_t nbytes;
  if ((rc = tstor_layout_bytes(&r, &nbytes)) < 0) return rc;
  tstor__layout_copy(out, &r);
  return 0;
}

static int where_form(const tstor_layout *const *in, const void *args, tstor_layout *out) {
  return tstor_layout_where(in[0], in[1], in[2], out);
}

int tstor_shape_where(const tstor_tensor *cond, const tstor_tensor *a, const tstor_tensor *b,
                      tstor_tensor **out) {
  const tstor_tensor *ts[3] = {cond, a, b};
  return tstor__shape_form("shape_where", 3, ts, 3, where_form, NULL, out);
}
