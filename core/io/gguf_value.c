/* The GGUF type a value carries: what a GGUF file wrote it as, kept so that
 * a save writes it as it was, and checked against the value's kind and
 * range whoever gives it. */
#include "io_internal.h"

#include "gguf_format.h"

#define TYPE_ROW(NAME, id, size, name) [id] = {name, size},
static const struct {
  const char *name;
  size_t size;
} types[TSTOR__GGUF_VALUE_TYPE_COUNT] = {TSTOR__GGUF_VALUE_TYPES(TYPE_ROW)};

const char *tstor__io_gguf_type_name(int64_t type) {
  return type >= 0 && type < TSTOR__GGUF_VALUE_TYPE_COUNT ? types[type].name : NULL;
}

size_t tstor__io_gguf_type_size(int type) { return types[type].size; }

/* The range of GGUF's integer types; false for the others. */
static bool int_range(int type, int64_t *lo, uint64_t *hi) {
  switch (type) {
    case TSTOR_GGUF_UINT8: *lo = 0, *hi = UINT8_MAX; return true;
    case TSTOR_GGUF_INT8: *lo = INT8_MIN, *hi = INT8_MAX; return true;
    case TSTOR_GGUF_UINT16: *lo = 0, *hi = UINT16_MAX; return true;
    case TSTOR_GGUF_INT16: *lo = INT16_MIN, *hi = INT16_MAX; return true;
    case TSTOR_GGUF_UINT32: *lo = 0, *hi = UINT32_MAX; return true;
    case TSTOR_GGUF_INT32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    case TSTOR_GGUF_UINT64: *lo = 0, *hi = UINT64_MAX; return true;
    case TSTOR_GGUF_INT64: *lo = INT64_MIN, *hi = INT64_MAX; return true;
    default: return false;
  }
}

int tstor__io_gguf_scalar_check(const tstor_value *v, int type) {
  int64_t lo;
  uint64_t hi;
  const char *tn = tstor__io_gguf_type_name(type);
  if (!tn || type == TSTOR_GGUF_ARRAY)
    return TSTOR__ERR(TSTOR_EINVAL, "GGUF type %d is no scalar type", type);
  int kind = v->kind;
  bool ok = int_range(type, &lo, &hi)                                  ? kind == TSTOR_VALUE_INT
            : type == TSTOR_GGUF_FLOAT32 || type == TSTOR_GGUF_FLOAT64 ? kind == TSTOR_VALUE_FLOAT
            : type == TSTOR_GGUF_BOOL                                  ? kind == TSTOR_VALUE_BOOL
                                      : kind == TSTOR_VALUE_STRING || kind == TSTOR_VALUE_BYTES;
  if (!ok)
    return TSTOR__ERR(TSTOR_EINVAL, "a %s cannot be written as GGUF's %s",
                      tstor_value_kind_name((tstor_value_kind)kind), tn);
  if (kind != TSTOR_VALUE_INT) return 0;
  /* a u64 read from a file keeps its bits in u.i */
  bool big = v->gguf == TSTOR_GGUF_UINT64 + 1 && v->u.i < 0;
  bool fits =
      big ? type == TSTOR_GGUF_UINT64 : v->u.i >= lo && (v->u.i < 0 || (uint64_t)v->u.i <= hi);
  if (!fits)
    return TSTOR__ERR(TSTOR_ERANGE, "%s%lld does not fit GGUF's %s", big ? "u64 " : "",
                      (long long)v->u.i, tn);
  return 0;
}

int tstor_value_gguf_type(const tstor_value *v, tstor_gguf_type *elem) {
  if (!v || !v->gguf) return -1;
  if (elem && v->gguf == TSTOR_GGUF_ARRAY + 1) *elem = (tstor_gguf_type)(v->gguf_elem - 1);
  return v->gguf - 1;
}

int tstor_value_set_gguf_type(tstor_value *v, tstor_gguf_type type) {
  if (!v) return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_set_gguf_type: v is NULL");
  if (v->kind != TSTOR_VALUE_LIST && v->kind != TSTOR_VALUE_TUPLE) {
    int rc = tstor__io_gguf_scalar_check(v, (int)type);
    if (!rc) v->gguf = (unsigned char)(type + 1);
    return rc;
  }
  if (type == TSTOR_GGUF_ARRAY) return TSTOR__ERR(TSTOR_EINVAL, "GGUF has no arrays of arrays");
  /* every item first, so that a failure leaves the list as it was */
  for (size_t i = 0; i < v->u.seq.n; i++) {
    int rc = tstor__io_gguf_scalar_check(v->u.seq.items[i], (int)type);
    if (rc) return tstor_error_prefix(rc, "GGUF array item %zu", i);
  }
  for (size_t i = 0; i < v->u.seq.n; i++) v->u.seq.items[i]->gguf = (unsigned char)(type + 1);
  v->gguf = TSTOR_GGUF_ARRAY + 1;
  v->gguf_elem = (unsigned char)(type + 1);
  return 0;
}
