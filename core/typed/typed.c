/* Typed operations on storages: a storage read as an array of one dtype.
 *
 * Host-memory devices are read and written in place. Other devices go through
 * the copy table in bounded chunks of host memory, or through the device's own
 * convert op when both sides are on the same device and it has one. */
#include "typed/typed_internal.h"

#include <string.h>

/* ---------------------------------------------------------------- checks */

static const tstor__devtype *devtype(const tstor_storage *s) {
  return &s->ctx->types[s->device.type];
}
static int on_host(const tstor_storage *s) {
  return (devtype(s)->ops.flags & TSTOR_DEVICE_HOST) != 0;
}
static int has_data(const tstor_storage *s) {
  return !(s->flags & TSTOR_FLAG_NO_DATA) &&
         !(devtype(s)->ops.flags & TSTOR_DEVICE_NO_DATA);
}

/* The dtype of a typed call and the storage's element count in it. */
static int typed_args(const tstor_storage *s, tstor_dtype dtype, const char *what,
                      const tstor_dtype_info **info, size_t *count) {
  if (s == NULL) return tstor__err(TSTOR_EINVAL, "%s: NULL storage", what);
  const tstor_dtype_info *d = tstor__dtype(dtype, what);
  if (d == NULL) return TSTOR_EINVAL;
  if (s->nbytes % d->element_size != 0)
    return tstor__err(TSTOR_ESIZE, "%s: %zu bytes are not a whole number of %s elements (%zu bytes each)",
                      what, s->nbytes, d->name, d->element_size);
  *info = d;
  if (count) *count = s->nbytes / d->element_size;
  return 0;
}

/* Meta storages follow PyTorch's meta tensors: what only writes given values
 * (fill, set, set_string) succeeds and writes nothing, as fill_ and x[i] = v
 * do there; what reads the bytes (get, to_array, copy out, byteswap) fails
 * here with TSTOR_ENODATA, as "Cannot copy out of meta tensor" does. */
static int need_data(const tstor_storage *s, const char *what) {
  if (has_data(s)) return 0;
  return tstor__err(TSTOR_ENODATA, "%s: a %s storage has no data", what, devtype(s)->name);
}

int tstor__staging_device(tstor_context *ctx, tstor_device *out) {
  if (ctx->host_type < 0)
    return tstor__err(TSTOR_ENOTSUP, "no host-memory device is loaded to stage through");
  out->type = ctx->host_type;
  out->index = 0;
  return 0;
}

/* Moves bytes between host memory and [offset, offset + n) of s. */
static int read_bytes(const tstor_storage *s, size_t offset, void *host, size_t n) {
  if (n == 0) return 0;
  if (on_host(s)) {
    memcpy(host, (const char *)s->data + offset, n);
    return 0;
  }
  tstor_device h;
  int rc = tstor__staging_device(s->ctx, &h);
  if (rc) return rc;
  return tstor__copy_bytes(s->ctx, h, host, s->device, (const char *)s->data + offset, n, NULL,
                           NULL);
}

int tstor__typed_read(const tstor_storage *s, size_t offset, void *host, size_t n) {
  return read_bytes(s, offset, host, n);
}

static int write_bytes(tstor_storage *s, size_t offset, const void *host, size_t n) {
  if (n == 0) return 0;
  if (on_host(s)) {
    memcpy((char *)s->data + offset, host, n);
    return 0;
  }
  tstor_device h;
  int rc = tstor__staging_device(s->ctx, &h);
  if (rc) return rc;
  return tstor__copy_bytes(s->ctx, s->device, (char *)s->data + offset, h, host, n, NULL, NULL);
}

/* ------------------------------------------------------ size and shape */

int tstor_typed_new(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, size_t count,
                    tstor_storage **out) {
  if (out) *out = NULL;
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "typed_new: NULL out");
  const tstor_dtype_info *d = tstor__dtype(dtype, "typed_new");
  if (d == NULL) return TSTOR_EINVAL;
  size_t nbytes;
  if (tstor__mul_size(count, d->element_size, &nbytes))
    return tstor__err(TSTOR_EOVERFLOW, "typed_new: %zu %s elements overflow size_t", count,
                      d->name);
  return tstor_storage_new(ctx, dev, nbytes, out);
}

int tstor_typed_size(const tstor_storage *s, tstor_dtype dtype, size_t *out) {
  const tstor_dtype_info *d;
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "typed_size: NULL out");
  return typed_args(s, dtype, "typed_size", &d, out);
}

int tstor_typed_resize(tstor_storage *s, tstor_dtype dtype, size_t count) {
  if (s == NULL) return tstor__err(TSTOR_EINVAL, "typed_resize: NULL storage");
  const tstor_dtype_info *d = tstor__dtype(dtype, "typed_resize");
  if (d == NULL) return TSTOR_EINVAL;
  size_t nbytes;
  if (tstor__mul_size(count, d->element_size, &nbytes))
    return tstor__err(TSTOR_EOVERFLOW, "typed_resize: %zu %s elements overflow size_t", count,
                      d->name);
  return tstor_storage_resize(s, nbytes);
}

int tstor_typed_view(tstor_storage *base, tstor_dtype dtype, size_t offset, size_t count,
                     tstor_storage **out) {
  if (out) *out = NULL;
  const tstor_dtype_info *d;
  size_t n;
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "typed_view: NULL out");
  int rc = typed_args(base, dtype, "typed_view", &d, &n);
  if (rc) return rc;
  if (offset > n || count > n - offset)
    return tstor__err(TSTOR_ERANGE,
                      "typed_view: elements [%zu, %zu + %zu) are outside a storage of %zu %s "
                      "elements",
                      offset, offset, count, n, d->name);
  return tstor_storage_view(base, offset * d->element_size, count * d->element_size, out);
}

/* ------------------------------------------------------- element access */

static int check_index(const tstor_dtype_info *d, size_t index, size_t n, const char *what) {
  if (index < n) return 0;
  return tstor__err(TSTOR_ERANGE, "%s: index %zu is out of range for a storage of %zu %s elements",
                    what, index, n, d->name);
}

int tstor_typed_get(const tstor_storage *s, tstor_dtype dtype, size_t index, void *value) {
  const tstor_dtype_info *d;
  size_t n;
  int rc = typed_args(s, dtype, "typed_get", &d, &n);
  if (rc) return rc;
  if (value == NULL) return tstor__err(TSTOR_EINVAL, "typed_get: NULL value");
  if ((rc = check_index(d, index, n, "typed_get")) || (rc = need_data(s, "typed_get")))
    return rc;
  return read_bytes(s, index * d->element_size, value, d->element_size);
}

int tstor_typed_set(tstor_storage *s, tstor_dtype dtype, size_t index, const void *value) {
  const tstor_dtype_info *d;
  size_t n;
  int rc = typed_args(s, dtype, "typed_set", &d, &n);
  if (rc) return rc;
  if (value == NULL) return tstor__err(TSTOR_EINVAL, "typed_set: NULL value");
  if ((rc = check_index(d, index, n, "typed_set"))) return rc;
  if (!has_data(s)) return 0; /* a write: nothing to write to (need_data) */
  return write_bytes(s, index * d->element_size, value, d->element_size);
}

/* Element as a number: quantized dtypes read and write their integer codes. */
static int get_as(const tstor_storage *s, tstor_dtype dtype, size_t index, void *out,
                  tstor_dtype out_dtype) {
  unsigned char elem[16];
  int rc = tstor_typed_get(s, dtype, index, elem);
  if (rc || (rc = tstor__dtype_as_numbers(tstor_dtype_info_of(dtype), TSTOR__READ_ONE))) return rc;
  tstor__convert_serial(out, out_dtype, elem, tstor_dtype_info_of(dtype)->underlying, 1);
  return 0;
}

static int set_as(tstor_storage *s, tstor_dtype dtype, size_t index, const void *in,
                  tstor_dtype in_dtype) {
  const tstor_dtype_info *d = tstor__dtype(dtype, "typed_set");
  if (d == NULL) return TSTOR_EINVAL;
  int rc = tstor__dtype_as_numbers(d, TSTOR__SET_ONE);
  if (rc) return rc;
  unsigned char elem[16];
  tstor__convert_serial(elem, d->underlying, in, in_dtype, 1);
  return tstor_typed_set(s, dtype, index, elem);
}

int tstor_typed_get_f64(const tstor_storage *s, tstor_dtype dtype, size_t index, double *out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "typed_get_f64: NULL out");
  return get_as(s, dtype, index, out, TSTOR_FLOAT64);
}

int tstor_typed_set_f64(tstor_storage *s, tstor_dtype dtype, size_t index, double value) {
  return set_as(s, dtype, index, &value, TSTOR_FLOAT64);
}

int tstor_typed_get_i64(const tstor_storage *s, tstor_dtype dtype, size_t index, int64_t *out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "typed_get_i64: NULL out");
  return get_as(s, dtype, index, out, TSTOR_INT64);
}

int tstor_typed_set_i64(tstor_storage *s, tstor_dtype dtype, size_t index, int64_t value) {
  return set_as(s, dtype, index, &value, TSTOR_INT64);
}

/* ------------------------------------------------- converting transfers */

/* The two sides of a staged move: a storage, and the caller's host memory. */
static tstor__stage_side storage_side(const tstor_storage *s, size_t item) {
  tstor__stage_side side = {s->device, s->data, item};
  return side;
}
static tstor__stage_side memory_side(const void *p, size_t item) {
  tstor__stage_side side = {{TSTOR__HOST_MEMORY, 0}, (void *)(uintptr_t)p, item};
  return side;
}

/* Staged conversions: each chunk converted from one dtype to another. */
typedef struct convert_stage {
  tstor_dtype to, from;
} convert_stage;

static int convert_chunk(void *arg, void *to, const void *from, size_t first, size_t n) {
  const convert_stage *c = arg;
  (void)first;
  return tstor_dtype_convert(to, c->to, from, c->from, n);
}

/* Staged byte swaps: each chunk's units reversed. */
static int swap_chunk(void *arg, void *to, const void *from, size_t first, size_t n) {
  size_t unit = *(const size_t *)arg;
  (void)first;
  if (to != from) memcpy(to, from, n * unit);
  tstor__byteswap_units(to, n, unit);
  return 0;
}

/* Converts `count` host elements into elements [0, count) of s. */
static int write_converted(tstor_storage *s, const tstor_dtype_info *d, const void *values,
                           tstor_dtype values_dtype, size_t count) {
  if (on_host(s)) return tstor_dtype_convert(s->data, d->dtype, values, values_dtype, count);
  if (values_dtype == d->dtype) return write_bytes(s, 0, values, count * d->element_size);
  convert_stage c = {d->dtype, values_dtype};
  tstor__stage_side to = storage_side(s, d->element_size);
  tstor__stage_side from = memory_side(values, tstor_dtype_size(values_dtype));
  return tstor__stage(s->ctx, &to, &from, count, convert_chunk, &c);
}

/* Converts elements [0, count) of s into host memory. */
static int read_converted(const tstor_storage *s, const tstor_dtype_info *d, void *out,
                          tstor_dtype out_dtype, size_t count) {
  if (on_host(s)) return tstor_dtype_convert(out, out_dtype, s->data, d->dtype, count);
  if (out_dtype == d->dtype) return read_bytes(s, 0, out, count * d->element_size);
  convert_stage c = {out_dtype, d->dtype};
  tstor__stage_side to = memory_side(out, tstor_dtype_size(out_dtype));
  tstor__stage_side from = storage_side(s, d->element_size);
  return tstor__stage(s->ctx, &to, &from, count, convert_chunk, &c);
}

int tstor_typed_from_array(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                           const void *values, tstor_dtype values_dtype, size_t count,
                           tstor_storage **out) {
  if (out) *out = NULL;
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "typed_from_array: NULL out");
  int rc = tstor_dtype_can_convert(dtype, values_dtype);
  if (rc) return rc;
  if (values == NULL && count > 0)
    return tstor__err(TSTOR_EINVAL, "typed_from_array: NULL values for %zu elements", count);
  tstor_storage *s;
  if ((rc = tstor_typed_new(ctx, dev, dtype, count, &s))) return rc;
  if (has_data(s) && count > 0)
    rc = write_converted(s, tstor_dtype_info_of(dtype), values, values_dtype, count);
  if (rc) {
    tstor_storage_release(s);
    return rc;
  }
  *out = s;
  return 0;
}

int tstor_typed_to_array(const tstor_storage *s, tstor_dtype dtype, void *out,
                         tstor_dtype out_dtype, size_t out_count) {
  const tstor_dtype_info *d;
  size_t n;
  int rc = typed_args(s, dtype, "typed_to_array", &d, &n);
  if (rc) return rc;
  if ((rc = tstor_dtype_can_convert(out_dtype, dtype))) return rc;
  if (out_count != n)
    return tstor__err(TSTOR_ESIZE, "typed_to_array: the storage has %zu %s elements, the array %zu",
                      n, d->name, out_count);
  if (out == NULL && n > 0) return tstor__err(TSTOR_EINVAL, "typed_to_array: NULL out");
  if ((rc = need_data(s, "typed_to_array"))) return rc;
  return n ? read_converted(s, d, out, out_dtype, n) : 0;
}

/* Both sides on host memory: convert directly, unless the byte ranges overlap
 * in a way an element-by-element pass would clobber. */
static int copy_host(tstor_storage *dst, const tstor_dtype_info *dd, const tstor_storage *src,
                     const tstor_dtype_info *sd, size_t n) {
  const char *d0 = dst->data, *s0 = src->data;
  size_t dbytes = n * dd->element_size, sbytes = n * sd->element_size;
  int overlap = d0 < s0 + sbytes && s0 < d0 + dbytes;
  if (dd->dtype == sd->dtype) {
    tstor__host_copy(dst->data, src->data, dbytes); /* memmove when overlapping */
    return 0;
  }
  if (!overlap || (d0 == s0 && dd->element_size == sd->element_size))
    return tstor_dtype_convert(dst->data, dd->dtype, src->data, sd->dtype, n);
  char *tmp = tstor__malloc(dbytes);
  if (tmp == NULL) return tstor__err(TSTOR_ENOMEM, "no host memory for a %zu-byte buffer", dbytes);
  int rc = tstor_dtype_convert(tmp, dd->dtype, src->data, sd->dtype, n);
  if (rc == 0) tstor__host_copy(dst->data, tmp, dbytes);
  tstor__free(tmp);
  return rc;
}

/* Through host memory, chunk by chunk, overlap-safe. A host side is used in
 * place. */
static int copy_staged(tstor_storage *dst, const tstor_dtype_info *dd,
                       const tstor_storage *src, const tstor_dtype_info *sd, size_t n) {
  convert_stage c = {dd->dtype, sd->dtype};
  tstor__stage_side to = storage_side(dst, dd->element_size);
  tstor__stage_side from = storage_side(src, sd->element_size);
  return tstor__stage(dst->ctx, &to, &from, n, convert_chunk, &c);
}

int tstor_typed_copy(tstor_storage *dst, tstor_dtype dst_dtype, const tstor_storage *src,
                     tstor_dtype src_dtype) {
  const tstor_dtype_info *dd, *sd;
  size_t dn, sn;
  int rc = typed_args(dst, dst_dtype, "typed_copy (destination)", &dd, &dn);
  if (rc) return rc;
  if ((rc = typed_args(src, src_dtype, "typed_copy (source)", &sd, &sn))) return rc;
  if (dst->ctx != src->ctx)
    return tstor__err(TSTOR_EINVAL, "typed_copy: storages belong to different contexts");
  if (dn != sn)
    return tstor__err(TSTOR_ESIZE, "typed_copy: source has %zu %s elements, destination %zu %s",
                      sn, sd->name, dn, dd->name);
  if ((rc = tstor_dtype_can_convert(dst_dtype, src_dtype))) return rc;
  if (!has_data(dst)) return 0; /* sizes only, as tstor_storage_copy */
  if ((rc = need_data(src, "typed_copy"))) return rc;
  if (dn == 0) return 0;
  if (on_host(dst) && on_host(src)) return copy_host(dst, dd, src, sd, dn);
  if (dst_dtype == src_dtype)
    return tstor__copy_bytes(dst->ctx, dst->device, dst->data, src->device, src->data,
                             dst->nbytes, NULL, NULL);
  /* A backend's convert op is never handed overlapping ranges: the staged
   * loop below gives those memmove's meaning. */
  const tstor__devtype *t = devtype(dst);
  const char *d0 = dst->data, *s0 = src->data;
  int overlap = d0 < s0 + src->nbytes && s0 < d0 + dst->nbytes;
  if (t->ops.convert != NULL && dst->device.type == src->device.type &&
      dst->device.index == src->device.index && !overlap) {
    tstor__err_clear();
    rc = t->ops.convert(t->state, dst->device.index, dst->data, (int)dst_dtype, src->data,
                        (int)src_dtype, dn, NULL);
    if (rc != TSTOR_ENOTSUP) {
      if (rc && !tstor_last_error()[0])
        tstor__err(rc, "%s convert %s -> %s of %zu elements failed", t->name, sd->name,
                   dd->name, dn);
      return rc;
    }
  }
  return copy_staged(dst, dd, src, sd, dn);
}

int tstor_typed_convert(const tstor_storage *s, tstor_dtype dtype, tstor_dtype new_dtype,
                        tstor_storage **out) {
  if (out) *out = NULL;
  const tstor_dtype_info *d;
  size_t n;
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "typed_convert: NULL out");
  int rc = typed_args(s, dtype, "typed_convert", &d, &n);
  if (rc) return rc;
  if ((rc = tstor_dtype_can_convert(new_dtype, dtype))) return rc;
  tstor_storage *c;
  if ((rc = tstor_typed_new(s->ctx, s->device, new_dtype, n, &c))) return rc;
  if ((rc = tstor_typed_copy(c, new_dtype, s, dtype))) {
    tstor_storage_release(c);
    return rc;
  }
  *out = c;
  return 0;
}

/* ------------------------------------------------------- fill and bytes */

int tstor_typed_fill(tstor_storage *s, tstor_dtype dtype, const void *value) {
  const tstor_dtype_info *d;
  int rc = typed_args(s, dtype, "typed_fill", &d, NULL);
  if (rc) return rc;
  if (value == NULL) return tstor__err(TSTOR_EINVAL, "typed_fill: NULL value");
  if (s->nbytes == 0 || !has_data(s)) return 0; /* a write (need_data) */
  if (on_host(s)) {
    tstor__host_fill(s->data, s->nbytes, value, d->element_size);
    return 0;
  }
  return tstor__fill_bytes(s->ctx, s->device, s->data, s->nbytes, value, d->element_size);
}

int tstor_typed_fill_f64(tstor_storage *s, tstor_dtype dtype, double value) {
  unsigned char element[16]; /* the widest dtype: complex128 */
  const tstor_dtype_info *d = tstor__dtype(dtype, "typed_fill_f64");
  if (d == NULL) return TSTOR_EINVAL;
  if (d->element_size > sizeof element) return tstor__err(TSTOR_EINVAL, "typed_fill_f64: %s", d->name);
  int rc = tstor__dtype_as_numbers(d, TSTOR__FILL);
  if (rc == 0) rc = tstor_dtype_convert(element, dtype, &value, TSTOR_FLOAT64, 1);
  return rc ? rc : tstor_typed_fill(s, dtype, element);
}

/* The unit a dtype's bytes are swapped in: each half of a complex element on
 * its own, the integer code of a quantized one. */
static size_t swap_unit(const tstor_dtype_info *d) {
  if (d->kind == TSTOR_KIND_COMPLEX) return d->element_size / 2;
  return d->element_size;
}

int tstor_typed_from_buffer(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                            const void *buffer, size_t nbytes, tstor_byte_order order,
                            tstor_storage **out) {
  if (out) *out = NULL;
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "typed_from_buffer: NULL out");
  const tstor_dtype_info *d = tstor__dtype(dtype, "typed_from_buffer");
  if (d == NULL) return TSTOR_EINVAL;
  if (order != TSTOR_ORDER_NATIVE && order != TSTOR_ORDER_LITTLE && order != TSTOR_ORDER_BIG)
    return tstor__err(TSTOR_EINVAL, "typed_from_buffer: byte order %d is not native, little or big",
                      (int)order);
  if (buffer == NULL && nbytes > 0)
    return tstor__err(TSTOR_EINVAL, "typed_from_buffer: NULL buffer of %zu bytes", nbytes);
  if (nbytes % d->element_size != 0)
    return tstor__err(TSTOR_ESIZE,
                      "typed_from_buffer: %zu bytes are not a whole number of %s elements (%zu "
                      "bytes each)",
                      nbytes, d->name, d->element_size);
  int swap = order != TSTOR_ORDER_NATIVE &&
             (order == TSTOR_ORDER_LITTLE) != (tstor__little_endian() != 0);
  tstor_storage *s;
  int rc = tstor_storage_new(ctx, dev, nbytes, &s);
  if (rc) return rc;
  if (!has_data(s) || nbytes == 0) {
    *out = s;
    return 0;
  }
  size_t unit = swap_unit(d);
  if (on_host(s)) {
    tstor__host_copy(s->data, buffer, nbytes);
    if (swap) tstor__byteswap_units(s->data, nbytes / unit, unit);
  } else if (!swap) {
    rc = write_bytes(s, 0, buffer, nbytes);
  } else {
    tstor__stage_side to = storage_side(s, unit), from = memory_side(buffer, unit);
    rc = tstor__stage(s->ctx, &to, &from, nbytes / unit, swap_chunk, &unit);
  }
  if (rc) {
    tstor_storage_release(s);
    return rc;
  }
  *out = s;
  return 0;
}

int tstor_typed_byteswap(tstor_storage *s, tstor_dtype dtype) {
  const tstor_dtype_info *d;
  int rc = typed_args(s, dtype, "typed_byteswap", &d, NULL);
  if (rc) return rc;
  if ((rc = need_data(s, "typed_byteswap"))) return rc;
  size_t unit = swap_unit(d);
  if (unit == 1 || s->nbytes == 0) return 0;
  if (on_host(s)) {
    tstor__byteswap_units(s->data, s->nbytes / unit, unit);
    return 0;
  }
  tstor__stage_side side = storage_side(s, unit);
  return tstor__stage(s->ctx, &side, &side, s->nbytes / unit, swap_chunk, &unit);
}

/* ------------------------------------------------------------- strings */

static int string_dtype(tstor_dtype dtype, const char *what) {
  if (dtype == TSTOR_UINT8 || dtype == TSTOR_INT8) return 0;
  return tstor__err(TSTOR_EINVAL,
                    "%s: only uint8 and int8 storages (ByteStorage, CharStorage) hold strings, "
                    "not %s",
                    what, tstor_dtype_name(dtype));
}

int tstor_typed_set_string(tstor_storage *s, tstor_dtype dtype, const void *bytes, size_t len) {
  if (s == NULL) return tstor__err(TSTOR_EINVAL, "typed_set_string: NULL storage");
  int rc = string_dtype(dtype, "typed_set_string");
  if (rc) return rc;
  if (bytes == NULL && len > 0)
    return tstor__err(TSTOR_EINVAL, "typed_set_string: NULL bytes for a %zu-byte string", len);
  if (s->nbytes != len && (rc = tstor_storage_resize(s, len))) return rc;
  if (!has_data(s)) return 0; /* a write: the size changes, no bytes (need_data) */
  return write_bytes(s, 0, bytes, len);
}

int tstor_typed_get_string(const tstor_storage *s, tstor_dtype dtype, void *buf, size_t size,
                           size_t *len) {
  if (s == NULL || len == NULL) return tstor__err(TSTOR_EINVAL, "typed_get_string: NULL argument");
  int rc = string_dtype(dtype, "typed_get_string");
  if (rc) return rc;
  if ((rc = need_data(s, "typed_get_string"))) return rc;
  *len = s->nbytes;
  if (buf == NULL && size == 0) return 0; /* the length asked for, as snprintf(NULL, 0) */
  if (size < s->nbytes)
    return tstor__err(TSTOR_ERANGE, "typed_get_string: the storage holds %zu bytes, the buffer %zu",
                      s->nbytes, size);
  if (buf == NULL && s->nbytes > 0) return tstor__err(TSTOR_EINVAL, "typed_get_string: NULL buf");
  return read_bytes(s, 0, buf, s->nbytes);
}
