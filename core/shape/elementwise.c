/* The output layout of elementwise operations and of where, as torch 2.x's
 * meta kernels give it: the order of torch/_prims_common's
 * compute_elementwise_output_strides (refs_strides below), so that the layout tstor computes is
 * the one a PyTorch kernel would write. */
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

/* ------------------------------------------------- the references' order */

/* n operands broadcast to one shape, as expand lays them out (stride 0
 * along a dimension an operand stretches). */
typedef struct {
  int n;
  const operand *in;
  int ndim;
  const int64_t *sizes; /* the broadcast shape */
} refs_order;

static int64_t expanded_stride(const refs_order *o, int k, int d) {
  const operand *in = &o->in[k];
  int off = o->ndim - in->ndim;
  if (d >= off) return in->sizes[d - off] == o->sizes[d] ? in->strides[d - off] : 0;
  /* a new dimension of size 1 nests around the next (inferExpandGeometry) */
  if (o->sizes[d] != 1 || d == o->ndim - 1) return 0;
  return tstor__mul_wrap(o->sizes[d + 1], expanded_stride(o, k, d + 1));
}

/* torch/_prims_common's ge(a, b): a >= b, or b divides a (0 divides
 * nothing, and everything is >= 0). */
static int refs_ge(int64_t a, int64_t b) {
  if (b == 0) return 1;
  if (a == 0) return 0;
  return a >= b || b == -1 || a % b == 0;
}

/* compute_elementwise_output_logical_to_physical_perm's should_swap: >0
 * when dimension a goes outside b. */
static int refs_should_swap(const void *ctx, int a, int b) {
  const refs_order *o = ctx;
  for (int k = 0; k < o->n; k++) {
    int64_t sa = expanded_stride(o, k, a), sb = expanded_stride(o, k, b);
    if (sa == 0 || sb == 0) continue;
    if (sa == sb) {
      if (refs_ge(o->sizes[b], o->sizes[a])) continue;
      return 1;
    }
    if (refs_ge(sb, sa)) return -1;
    if (refs_ge(sa, sb)) return 1;
  }
  return 0;
}

/* The output strides torch 2.x's meta kernels give an elementwise operation
 * (its operator, where, the activations): compute_elementwise_output_strides
 * of torch/_prims_common without its short cut for one tensor (abs of a
 * complex tensor shows it). The operands' dimensions in order, contiguous
 * and channels-last (4 dimensions) decided first, then laid out densely,
 * a size of 0 counting as 1. 1 when the strides are the contiguous ones. */
static int refs_strides(const refs_order *o, int64_t *strides) {
  int nd = o->ndim;
  if (nd == 0) return 1;
  if (nd == 1) {
    strides[0] = 1;
    return 1;
  }
  int contig = 1, cl = nd == 4;
  for (int k = 0; k < o->n && (contig || cl); k++) {
    int64_t st[TSTOR_TENSOR_MAX_DIM];
    for (int d = 0; d < nd; d++) st[d] = expanded_stride(o, k, d);
    contig &= tstor__compute_contiguous(nd, o->sizes, st);
    cl = cl && tstor__channels_last_contiguous(nd, o->sizes, st);
  }
  if (contig && !cl) {
    tstor__contiguous_strides(nd, o->sizes, strides);
    return 1;
  }
  int perm[TSTOR_TENSOR_MAX_DIM]; /* innermost first */
  if (cl && !contig) {
    perm[0] = 1;
    for (int i = 1; i < nd - 1; i++) perm[i] = nd - i;
    perm[nd - 1] = 0;
  } else {
    for (int i = 0; i < nd; i++) perm[i] = nd - 1 - i;
    tstor__reorder_dims(nd, perm, refs_should_swap, o);
  }
  int64_t acc = 1;
  for (int i = 0; i < nd; i++) {
    strides[perm[i]] = acc;
    acc = tstor__mul_wrap(acc, o->sizes[perm[i]] > 1 ? o->sizes[perm[i]] : 1);
  }
  for (int i = 0; i < nd; i++)
    if (perm[i] != nd - 1 - i) return 0;
  return 1;
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
  if (rule == TSTOR_ELEMENTWISE_REAL && tstor__dtype_category(common) == TSTOR__CAT_COMPLEX)
    common = tstor__complex_part(common);
  *dtype = common;

  /* the shape; numbers are no operands of the layout */
  int nd = in[0].ndim;
  for (int d = 0; d < nd; d++) sizes[d] = in[0].sizes[d];
  for (int i = 1; i < n; i++)
    if ((rc = tstor__broadcast_into(&nd, sizes, in[i].ndim, in[i].sizes)) < 0) return rc;
  refs_order o = {n, in, nd, sizes};
  *contiguous = refs_strides(&o, strides);
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

/* -------------------------------------------------------------------- where */

int tstor_layout_where(const tstor_layout *cond, const tstor_layout *a, const tstor_layout *b,
                       tstor_layout *out) {
  int rc;
  if ((rc = tstor__check_layout(cond, "where: condition")) < 0 ||
      (rc = tstor__check_layout(a, "where: a")) < 0 ||
      (rc = tstor__check_layout(b, "where: b")) < 0)
    return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "where: out is NULL");
  if (cond->dtype == TSTOR_UINT8) /* torch 2.x's words for the old byte masks */
    return tstor__err(TSTOR_EDTYPE, "expected predicate to be bool, got torch.uint8");
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
  if ((rc = tstor__broadcast_shapes(3, nds, szs, &r.ndim, r.sizes)) < 0) return rc;
  /* the order of the condition, a, then b */
  const tstor_layout *ls[3] = {cond, a, b};
  operand in[3];
  for (int i = 0; i < 3; i++)
    in[i] = (operand){ls[i]->dtype, ls[i]->ndim, ls[i]->sizes, ls[i]->strides};
  refs_order o = {3, in, r.ndim, r.sizes};
  r.dtype = dtype;
  refs_strides(&o, r.strides);
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
