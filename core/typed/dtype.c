/* The dtype table: names, sizes and kinds of every storage dtype, and parsing
 * a name back to a dtype. */
#include "typed/typed_internal.h"

#include <string.h>

/* Indexed by dtype value, generated from TSTOR_DTYPE_MAP; entries with a NULL
 * name are holes (PyTorch's uint1-7 and int1-7, 30-43). */
static const tstor_dtype_info table[TSTOR_DTYPE_END] = {
#define ROW(A, e, v, tag, name, alias, legacy, st, size, kind, sgn, under) \
  [TSTOR_##e] = {TSTOR_##e, name, alias, legacy, st, size, TSTOR_KIND_##kind, sgn, TSTOR_##under},
    TSTOR_DTYPE_MAP(ROW, _)
#undef ROW
};

/* TSTOR_DTYPE_END is a literal in the public header: one past the largest
 * value in the list. */
#define BELOW_END(A, e, v, ...) &&(v) < TSTOR_DTYPE_END
#define IS_LAST(A, e, v, ...) || (v) == TSTOR_DTYPE_END - 1
_Static_assert(1 TSTOR_DTYPE_MAP(BELOW_END, _), "a dtype value is not below TSTOR_DTYPE_END");
_Static_assert(0 TSTOR_DTYPE_MAP(IS_LAST, _), "TSTOR_DTYPE_END is not one past the last dtype");
#undef BELOW_END
#undef IS_LAST

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

int tstor__opaque_copy_refused(tstor_dtype dst, tstor_dtype src, int contiguous) {
  const tstor_dtype_info *o = tstor_dtype_info_of(dst);
  if (o->kind != TSTOR_KIND_OPAQUE) o = tstor_dtype_info_of(src);
  /* PyTorch's loop between float32 and the narrower floats, float4 among
   * them, is named copy_kernel; every other copy loop copy_. */
  int narrow_float = (dst == TSTOR_FLOAT32 && src == TSTOR_FLOAT4_E2M1FN_X2) ||
                     (src == TSTOR_FLOAT32 && dst == TSTOR_FLOAT4_E2M1FN_X2);
  return tstor__err(TSTOR_EDTYPE, "\"%s\" not implemented for '%s'",
                    narrow_float && contiguous ? "copy_kernel" : "copy_", o->scalar_type);
}

int tstor__dtype_as_numbers(const tstor_dtype_info *d, const char *kernel) {
  /* torch 2.15 reads and writes one bcomplex32 element but has no fill kernel
   * for it. */
  int no_fill = d->dtype == TSTOR_BCOMPLEX32 && strcmp(kernel, TSTOR__FILL) == 0;
  if (d->kind != TSTOR_KIND_OPAQUE && !no_fill) return 0;
  return tstor__err(TSTOR_EDTYPE, "\"%s\" not implemented for '%s'", kernel, d->scalar_type);
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
  if (d->kind == TSTOR_KIND_OPAQUE || s->kind == TSTOR_KIND_OPAQUE)
    return tstor__opaque_copy_refused(dst_dtype, src_dtype, 1);
  if (d->kind == TSTOR_KIND_QUANTIZED || s->kind == TSTOR_KIND_QUANTIZED)
    return tstor__err(TSTOR_EDTYPE,
                      "cannot convert %s to %s: PyTorch copies quantized dtypes only to "
                      "the same dtype (quantize or dequantize instead)",
                      s->name, d->name);
  return 0;
}
