/* The dtype table: names, sizes and kinds of every storage dtype, and parsing
 * a name back to a dtype. */
#include "typed_internal.h"

#include <string.h>

#define NONE ((tstor_dtype)-1)

/* Indexed by dtype value; entries with a NULL name are holes (PyTorch's bits
 * types, 18-22). */
static const tstor_dtype_info table[TSTOR_DTYPE_END] = {
#define E(dt, name, alias, legacy, st, size, kind, sgn, under) \
  [dt] = {dt, name, alias, legacy, st, size, kind, sgn, under}
    E(TSTOR_UINT8, "uint8", NULL, "Byte", "Byte", 1, TSTOR_KIND_UNSIGNED, 0, TSTOR_UINT8),
    E(TSTOR_INT8, "int8", NULL, "Char", "Char", 1, TSTOR_KIND_SIGNED, 1, TSTOR_INT8),
    E(TSTOR_INT16, "int16", "short", "Short", "Short", 2, TSTOR_KIND_SIGNED, 1, TSTOR_INT16),
    E(TSTOR_INT32, "int32", "int", "Int", "Int", 4, TSTOR_KIND_SIGNED, 1, TSTOR_INT32),
    E(TSTOR_INT64, "int64", "long", "Long", "Long", 8, TSTOR_KIND_SIGNED, 1, TSTOR_INT64),
    E(TSTOR_FLOAT16, "float16", "half", "Half", "Half", 2, TSTOR_KIND_FLOAT, 1, TSTOR_FLOAT16),
    E(TSTOR_FLOAT32, "float32", "float", "Float", "Float", 4, TSTOR_KIND_FLOAT, 1,
      TSTOR_FLOAT32),
    E(TSTOR_FLOAT64, "float64", "double", "Double", "Double", 8, TSTOR_KIND_FLOAT, 1,
      TSTOR_FLOAT64),
    E(TSTOR_COMPLEX32, "complex32", "chalf", NULL, "ComplexHalf", 4, TSTOR_KIND_COMPLEX, 1,
      TSTOR_COMPLEX32),
    E(TSTOR_COMPLEX64, "complex64", "cfloat", "ComplexFloat", "ComplexFloat", 8,
      TSTOR_KIND_COMPLEX, 1, TSTOR_COMPLEX64),
    E(TSTOR_COMPLEX128, "complex128", "cdouble", "ComplexDouble", "ComplexDouble", 16,
      TSTOR_KIND_COMPLEX, 1, TSTOR_COMPLEX128),
    E(TSTOR_BOOL, "bool", NULL, "Bool", "Bool", 1, TSTOR_KIND_BOOL, 0, TSTOR_BOOL),
    E(TSTOR_QINT8, "qint8", NULL, "QInt8", "QInt8", 1, TSTOR_KIND_QUANTIZED, 1, TSTOR_INT8),
    E(TSTOR_QUINT8, "quint8", NULL, "QUInt8", "QUInt8", 1, TSTOR_KIND_QUANTIZED, 0,
      TSTOR_UINT8),
    E(TSTOR_QINT32, "qint32", NULL, "QInt32", "QInt32", 4, TSTOR_KIND_QUANTIZED, 1,
      TSTOR_INT32),
    E(TSTOR_BFLOAT16, "bfloat16", NULL, "BFloat16", "BFloat16", 2, TSTOR_KIND_FLOAT, 1,
      TSTOR_BFLOAT16),
    E(TSTOR_QUINT4X2, "quint4x2", NULL, "QUInt4x2", "QUInt4x2", 1, TSTOR_KIND_QUANTIZED, 0,
      TSTOR_UINT8),
    E(TSTOR_QUINT2X4, "quint2x4", NULL, "QUInt2x4", "QUInt2x4", 1, TSTOR_KIND_QUANTIZED, 0,
      TSTOR_UINT8),
    E(TSTOR_FLOAT8_E5M2, "float8_e5m2", NULL, NULL, "Float8_e5m2", 1, TSTOR_KIND_FLOAT, 1,
      TSTOR_FLOAT8_E5M2),
    E(TSTOR_FLOAT8_E4M3FN, "float8_e4m3fn", NULL, NULL, "Float8_e4m3fn", 1, TSTOR_KIND_FLOAT,
      1, TSTOR_FLOAT8_E4M3FN),
    E(TSTOR_FLOAT8_E5M2FNUZ, "float8_e5m2fnuz", NULL, NULL, "Float8_e5m2fnuz", 1,
      TSTOR_KIND_FLOAT, 1, TSTOR_FLOAT8_E5M2FNUZ),
    E(TSTOR_FLOAT8_E4M3FNUZ, "float8_e4m3fnuz", NULL, NULL, "Float8_e4m3fnuz", 1,
      TSTOR_KIND_FLOAT, 1, TSTOR_FLOAT8_E4M3FNUZ),
#undef E
};

const tstor_dtype_info *tstor_dtype_info_of(tstor_dtype dtype) {
  /* Compared as unsigned so that negative values out of a caller's int fail too. */
  if ((unsigned)dtype >= TSTOR_DTYPE_END || table[dtype].name == NULL) return NULL;
  return &table[dtype];
}

const tstor_dtype_info *tstor__dtype(tstor_dtype dtype, const char *what) {
  const tstor_dtype_info *info = tstor_dtype_info_of(dtype);
  if (info == NULL && what != NULL)
    tstor__err(TSTOR_EINVAL, "%s: %d is not a dtype", what, (int)dtype);
  return info;
}

const char *tstor_dtype_name(tstor_dtype dtype) {
  const tstor_dtype_info *info = tstor_dtype_info_of(dtype);
  return info ? info->name : "?";
}

size_t tstor_dtype_size(tstor_dtype dtype) {
  const tstor_dtype_info *info = tstor_dtype_info_of(dtype);
  return info ? info->element_size : 0;
}

/* Strips `prefix` from *s when it is there. */
static int skip(const char **s, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(*s, prefix, n) != 0) return 0;
  *s += n;
  return 1;
}

int tstor_dtype_parse(const char *name, tstor_dtype *out) {
  if (name == NULL || out == NULL) return tstor__err(TSTOR_EINVAL, "dtype_parse: NULL argument");
  const char *s = name;
  skip(&s, "torch.");
  /* "FloatStorage" names the class; the stem is the legacy name. */
  size_t len = strlen(s);
  const size_t suffix = sizeof "Storage" - 1;
  int storage_class = len > suffix && strcmp(s + len - suffix, "Storage") == 0;
  if (storage_class) len -= suffix;
  for (int i = 0; i < TSTOR_DTYPE_END; i++) {
    const tstor_dtype_info *d = &table[i];
    if (d->name == NULL) continue;
    const char *cands[4] = {d->name, d->alias, d->legacy_name, d->scalar_type};
    for (int c = storage_class ? 2 : 0; c < (storage_class ? 3 : 4); c++) {
      if (cands[c] != NULL && strlen(cands[c]) == len && strncmp(cands[c], s, len) == 0) {
        *out = d->dtype;
        return 0;
      }
    }
  }
  return tstor__err(TSTOR_ENOENT, "unknown dtype \"%s\"", name);
}

int tstor_dtype_can_convert(tstor_dtype dst_dtype, tstor_dtype src_dtype) {
  const tstor_dtype_info *d = tstor__dtype(dst_dtype, "dtype conversion (destination)");
  if (d == NULL) return TSTOR_EINVAL;
  const tstor_dtype_info *s = tstor__dtype(src_dtype, "dtype conversion (source)");
  if (s == NULL) return TSTOR_EINVAL;
  if (dst_dtype == src_dtype) return 0;
  if (d->kind == TSTOR_KIND_QUANTIZED || s->kind == TSTOR_KIND_QUANTIZED)
    return tstor__err(TSTOR_EDTYPE,
                      "cannot convert %s to %s: PyTorch copies quantized dtypes only to "
                      "the same dtype (quantize or dequantize instead)",
                      s->name, d->name);
  return 0;
}
