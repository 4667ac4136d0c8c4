/* Type promotion: PyTorch's promote_types and result_type.
 *
 * Derived from the categories rather than kept as a table: bool < integers <
 * floats < complex, and within a category the wider type, with the two
 * exceptions PyTorch (and NumPy before it) makes: uint8 with int8 needs int16,
 * and float16 with bfloat16 needs float32 because neither holds the other (so
 * complex32 with bcomplex32 needs complex64). In torch 2.15 bfloat16's complex
 * type is bcomplex32, where earlier releases had complex64.
 * torch 2.x's dtypes add refusals ahead of those rules: the bits types and
 * float8 with anything else, and uint16/32/64 with anything but a float. The
 * whole matrix is checked against torch.promote_types by the tests (1.13's
 * 17 x 17, 2.x's rows and columns of its new dtypes). */
#include "shape/shape_internal.h"

/* The category (TSTOR__CAT_*) of a plain (neither quantized nor float8) dtype;
 * the bits types count as integers, as ATen's categories leave them. */
static int category(const tstor_dtype_info *d) {
  switch (d->kind) {
    case TSTOR_KIND_BOOL: return TSTOR__CAT_BOOL;
    case TSTOR_KIND_UNSIGNED:
    case TSTOR_KIND_SIGNED: return TSTOR__CAT_INTEGER;
    case TSTOR_KIND_COMPLEX: return TSTOR__CAT_COMPLEX;
    case TSTOR_KIND_OPAQUE:
      return tstor__opaque_float(d->dtype) ? TSTOR__CAT_FLOAT : TSTOR__CAT_INTEGER;
    default: return TSTOR__CAT_FLOAT;
  }
}

/* PyTorch's bits types, which promote with nothing but themselves. */
static int is_bits(const tstor_dtype_info *d) {
  return d->kind == TSTOR_KIND_OPAQUE && !tstor__opaque_float(d->dtype);
}

/* float8 (e8m0 included) has no promotion rules in PyTorch 1.13 and only
 * identity in 2.x. */
static int is_float8(tstor_dtype d) {
  return d == TSTOR_FLOAT8_E5M2 || d == TSTOR_FLOAT8_E4M3FN || d == TSTOR_FLOAT8_E5M2FNUZ ||
         d == TSTOR_FLOAT8_E4M3FNUZ || d == TSTOR_FLOAT8_E8M0FNU;
}

/* torch 2.x's "barebones" unsigned types: it promotes them with a float (the
 * float wins) and with nothing else, uint8 included, since promoting uint64
 * with int64 would overflow. */
static int is_barebones_unsigned(tstor_dtype d) {
  return d == TSTOR_UINT16 || d == TSTOR_UINT32 || d == TSTOR_UINT64;
}

int tstor__dtype_category(tstor_dtype d) {
  const tstor_dtype_info *i = tstor_dtype_info_of(d);
  return i ? category(i) : -1;
}

/* The complex dtype of a float, as torch 2.15's c10 toComplexType has it. */
static int to_complex(tstor_dtype f, tstor_dtype *out) {
  switch (f) {
  case TSTOR_FLOAT16: *out = TSTOR_COMPLEX32; return 0;
  case TSTOR_BFLOAT16: *out = TSTOR_BCOMPLEX32; return 0;
  case TSTOR_FLOAT32: *out = TSTOR_COMPLEX64; return 0;
  case TSTOR_FLOAT64: *out = TSTOR_COMPLEX128; return 0;
  default:
    return tstor__err(TSTOR_EDTYPE, "Unknown Complex ScalarType for %s",
                      tstor_dtype_info_of(f)->scalar_type);
  }
}

/* Promotion within one category. */
static tstor_dtype promote_same_category(tstor_dtype a, tstor_dtype b, int cat) {
  size_t sa = tstor_dtype_size(a), sb = tstor_dtype_size(b);
  if (a == b) return a;
  if (cat == TSTOR__CAT_INTEGER) {
    int ua = a == TSTOR_UINT8, ub = b == TSTOR_UINT8;
    if (ua != ub) {
      tstor_dtype s = ua ? b : a; /* the signed one */
      return s == TSTOR_INT8 ? TSTOR_INT16 : s;
    }
  } else if (cat == TSTOR__CAT_FLOAT && sa == sb) {
    return TSTOR_FLOAT32; /* float16 with bfloat16 */
  } else if (cat == TSTOR__CAT_COMPLEX && sa == sb) {
    return TSTOR_COMPLEX64; /* complex32 with bcomplex32 */
  }
  return sa >= sb ? a : b;
}

int tstor_promote_types(tstor_dtype a, tstor_dtype b, tstor_dtype *out) {
  const tstor_dtype_info *da = tstor_dtype_info_of(a), *db = tstor_dtype_info_of(b);
  if (!da || !db || !out)
    return tstor__err(TSTOR_EINVAL, "promote_types: %s is not a dtype",
                      !da ? "the first" : !db ? "the second" : "out (NULL)");
  if (a == b) {
    *out = a;
    return 0;
  }
  if (da->kind == TSTOR_KIND_QUANTIZED || db->kind == TSTOR_KIND_QUANTIZED)
    return tstor__err(TSTOR_EDTYPE,
                      "promoteTypes with quantized numbers is not handled yet; figure out "
                      "what the correct rules should be, offending types: %s %s",
                      da->scalar_type, db->scalar_type);
  if (is_bits(da) || is_bits(db))
    return tstor__err(TSTOR_EDTYPE, "Promotion from %s and %s is unsupported.", da->scalar_type,
                      db->scalar_type);
  if (is_float8(a) || is_float8(b))
    return tstor__err(TSTOR_EDTYPE,
                      "Promotion for Float8 Types is not supported, attempted "
                      "to promote %s and %s",
                      da->scalar_type, db->scalar_type);
  int ca = category(da), cb = category(db);
  if (is_barebones_unsigned(a) || is_barebones_unsigned(b)) {
    if (ca == TSTOR__CAT_FLOAT || cb == TSTOR__CAT_FLOAT) {
      *out = ca == TSTOR__CAT_FLOAT ? a : b;
      return 0;
    }
    return tstor__err(TSTOR_EDTYPE,
                      "Promotion for uint16, uint32, uint64 types is not "
                      "supported, attempted to promote %s and %s",
                      da->scalar_type, db->scalar_type);
  }
  /* PyTorch 2.x's table has no row for float4_e2m1fn_x2 (an internal
   * assertion fails): refused. */
  if (da->kind == TSTOR_KIND_OPAQUE || db->kind == TSTOR_KIND_OPAQUE)
    return tstor__err(TSTOR_EDTYPE, "promote_types: PyTorch has no promotion of %s with %s",
                      da->scalar_type, db->scalar_type);
  if (ca == cb) {
    *out = promote_same_category(a, b, ca);
    return 0;
  }
  /* Different categories: the higher one wins, except that a float meeting a
   * complex needs a complex whose parts hold the float. */
  tstor_dtype hi = ca > cb ? a : b, lo = ca > cb ? b : a;
  int chi = ca > cb ? ca : cb, clo = ca > cb ? cb : ca;
  if (chi == TSTOR__CAT_COMPLEX && clo == TSTOR__CAT_FLOAT) {
    tstor_dtype part = promote_same_category(tstor__complex_part(hi), lo, TSTOR__CAT_FLOAT);
    return to_complex(part, out);
  }
  *out = hi;
  return 0;
}

/* ------------------------------------------------------------ result_type */

#define UNDEFINED ((tstor_dtype)-1)

static int promote_skip_undefined(tstor_dtype a, tstor_dtype b, tstor_dtype *out) {
  if (a == UNDEFINED) {
    *out = b;
    return 0;
  }
  if (b == UNDEFINED) {
    *out = a;
    return 0;
  }
  /* ATen's promoteTypes gives Undefined for the bits types, which
   * result_type then refuses in other words than promote_types */
  if (a != b && (is_bits(tstor_dtype_info_of(a)) || is_bits(tstor_dtype_info_of(b))))
    return tstor__err(TSTOR_EDTYPE, "unsupported scalarType");
  return tstor_promote_types(a, b, out);
}

/* ATen's combination of a higher-priority group's result with a lower one's:
 * the lower group counts only when it is of a higher category, and then it
 * lifts the category without choosing the width. */
static int combine_categories(tstor_dtype higher, tstor_dtype lower, tstor_dtype *out) {
  int ch = higher == UNDEFINED ? -1 : tstor__dtype_category(higher);
  int cl = lower == UNDEFINED ? -1 : tstor__dtype_category(lower);
  if (ch == TSTOR__CAT_COMPLEX) {
    *out = higher;
    return 0;
  }
  if (cl == TSTOR__CAT_COMPLEX) {
    /* keep the precision of a float; integers take the complex as it is */
    if (ch == TSTOR__CAT_FLOAT) return to_complex(higher, out);
    *out = lower;
    return 0;
  }
  if (ch == TSTOR__CAT_FLOAT) {
    *out = higher;
    return 0;
  }
  if (higher == TSTOR_BOOL || cl == TSTOR__CAT_FLOAT)
    return promote_skip_undefined(higher, lower, out);
  *out = higher != UNDEFINED ? higher : lower;
  return 0;
}

/* The dtype a Python-like number of kind `d` counts as. */
static int number_dtype(tstor_dtype d, tstor_dtype *out) {
  const tstor_dtype_info *i = tstor_dtype_info_of(d);
  if (!i || i->kind == TSTOR_KIND_QUANTIZED || i->kind == TSTOR_KIND_OPAQUE)
    return tstor__err(TSTOR_EINVAL, "result_type: a number's kind must be bool, an integer, "
                      "a float or a complex dtype");
  switch (category(i)) {
    case TSTOR__CAT_BOOL: *out = TSTOR_BOOL; break;
    case TSTOR__CAT_INTEGER: *out = TSTOR_INT64; break;
    case TSTOR__CAT_FLOAT: *out = TSTOR__DEFAULT_FLOAT; break;
    default: *out = TSTOR__DEFAULT_COMPLEX; break;
  }
  return 0;
}

int tstor_result_type(int n, const tstor_operand *ops, tstor_dtype *out) {
  if (n < 1 || !ops || !out)
    return tstor__err(TSTOR_EINVAL, "result_type: %s", n < 1 ? "no operands" : "NULL argument");
  tstor_dtype dim = UNDEFINED, zero = UNDEFINED, wrapped = UNDEFINED;
  for (int i = 0; i < n; i++) {
    tstor_dtype d = ops[i].dtype;
    int rc;
    if (!tstor_dtype_info_of(d))
      return tstor__err(TSTOR_EINVAL, "result_type: operand %d has no dtype (%d)", i, (int)d);
    switch (ops[i].kind) {
    case TSTOR_OPERAND_TENSOR: rc = promote_skip_undefined(dim, d, &dim); break;
    case TSTOR_OPERAND_ZERO_DIM: rc = promote_skip_undefined(zero, d, &zero); break;
    case TSTOR_OPERAND_NUMBER:
      rc = number_dtype(d, &d);
      if (rc == 0) rc = promote_skip_undefined(wrapped, d, &wrapped);
      break;
    default: return tstor__err(TSTOR_EINVAL, "result_type: operand %d has a bad kind", i);
    }
    if (rc < 0) return rc;
  }
  tstor_dtype lower;
  int rc = combine_categories(zero, wrapped, &lower);
  if (rc == 0) rc = combine_categories(dim, lower, &lower);
  if (rc < 0) return rc;
  *out = lower;
  return 0;
}

int tstor_result_type_tensors(int n, const tstor_tensor *const *tensors, int nnumbers,
                              const tstor_dtype *numbers, tstor_dtype *out) {
  if (n < 0 || nnumbers < 0 || n + nnumbers < 1 || (n && !tensors) || (nnumbers && !numbers) ||
      n > TSTOR__SHAPE_MAX_OPERANDS || nnumbers > TSTOR__SHAPE_MAX_OPERANDS)
    return tstor__err(TSTOR_EINVAL, "result_type: bad operand list (%d tensors, %d numbers)",
                      n, nnumbers);
  tstor_operand ops[2 * TSTOR__SHAPE_MAX_OPERANDS];
  for (int i = 0; i < n; i++) {
    if (!tensors[i]) return tstor__err(TSTOR_EINVAL, "result_type: tensor %d is NULL", i);
    ops[i].dtype = tstor_tensor_dtype(tensors[i]);
    ops[i].kind = tstor_tensor_dim(tensors[i]) ? TSTOR_OPERAND_TENSOR : TSTOR_OPERAND_ZERO_DIM;
  }
  for (int i = 0; i < nnumbers; i++) {
    ops[n + i].dtype = numbers[i];
    ops[n + i].kind = TSTOR_OPERAND_NUMBER;
  }
  return tstor_result_type(n + nnumbers, ops, out);
}
