/* Tensors and their data: fills, creation with a value or from an array,
 * copies out to an array, and element access. */
#include "tensor/tensor_internal.h"

#include <inttypes.h>
#include <string.h>

#define MAXD TSTOR_TENSOR_MAX_DIM

typedef tstor__side side;

/* value as one element of dtype (quantized dtypes take their integer code);
 * `kernel` names PyTorch's words for an opaque dtype (typed_internal.h). */
static int scalar_bytes(tstor_dtype dtype, double value, unsigned char *elem, const char *what,
                        const char *kernel) {
  const tstor_dtype_info *d = tstor__dtype(dtype, what);
  if (d == NULL) return TSTOR_EINVAL;
  int rc = tstor__dtype_as_numbers(d, kernel);
  if (rc) return rc;
  tstor__convert_serial(elem, d->underlying, &value, TSTOR_FLOAT64, 1);
  return 0;
}

/* Writes the element at elem into every element of t. */
static int fill_element(tstor_tensor *t, const unsigned char *elem) {
  if (t->numel == 0 || !tstor__tensor_has_data(t)) return 0;
  if (tstor_tensor_is_non_overlapping_and_dense(t)) {
    size_t n = (size_t)t->numel * t->esize;
    if (tstor__tensor_on_host(t)) {
      tstor__host_fill(tstor_tensor_data(t), n, elem, t->esize);
      return 0;
    }
    if (t->esize == 1 || t->esize == 2 || t->esize == 4 || t->esize == 8 || t->esize == 16)
      return tstor__fill_bytes(t->storage->ctx, t->storage->device, tstor_tensor_data(t), n, elem,
                               t->esize);
  }
  int64_t zero[MAXD] = {0};
  side d = tstor__tensor_side(t, NULL);
  side s = {NULL, (char *)elem, zero, t->dtype, t->esize};
  return tstor__transfer(&d, &s, t->ndim, t->sizes);
}

int tstor_tensor_fill(tstor_tensor *t, double value) {
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_fill: NULL tensor");
  /* a device without data runs no fill kernel, so the dtypes whose elements
   * are no numbers fill there too, as torch's meta kernels let them */
  if (!tstor__tensor_has_data(t)) return 0;
  _Alignas(16) unsigned char elem[16];
  int rc = scalar_bytes(t->dtype, value, elem, "tensor_fill", TSTOR__FILL);
  return rc ? rc : fill_element(t, elem);
}

/* ------------------------------------------------------ creation with data */

int tstor_tensor_full(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, int ndim,
                      const int64_t *sizes, double value, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_full: NULL out");
  *out = NULL;
  tstor_tensor *t;
  int rc = tstor_tensor_empty(ctx, dev, dtype, ndim, sizes, &t);
  if (rc) return rc;
  if ((rc = tstor_tensor_fill(t, value))) {
    tstor_tensor_release(t);
    return rc;
  }
  *out = t;
  return 0;
}

/* Zero is all zero bytes in every dtype, so zeros works on the opaque ones
 * too, as torch.zeros does. */
int tstor_tensor_zeros(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, int ndim,
                       const int64_t *sizes, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_zeros: NULL out");
  *out = NULL;
  tstor_tensor *t;
  int rc = tstor_tensor_empty(ctx, dev, dtype, ndim, sizes, &t);
  if (rc) return rc;
  _Alignas(16) static const unsigned char zero[16];
  if ((rc = fill_element(t, zero))) {
    tstor_tensor_release(t);
    return rc;
  }
  *out = t;
  return 0;
}

int tstor_tensor_ones(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, int ndim,
                      const int64_t *sizes, tstor_tensor **out) {
  return tstor_tensor_full(ctx, dev, dtype, ndim, sizes, 1.0, out);
}

int tstor_tensor_from_array(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, int ndim,
                            const int64_t *sizes, const void *data, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_from_array: NULL out");
  *out = NULL;
  tstor_tensor *t;
  int rc = tstor_tensor_empty(ctx, dev, dtype, ndim, sizes, &t);
  if (rc) return rc;
  if (t->numel > 0 && data == NULL) {
    int64_t n = t->numel;
    tstor_tensor_release(t);
    return tstor__err(TSTOR_EINVAL, "tensor_from_array: NULL data for %" PRId64 " elements", n);
  }
  if (t->numel > 0 && tstor__tensor_has_data(t)) {
    side d = tstor__tensor_side(t, NULL);
    side s = {NULL, (char *)data, t->strides, dtype, t->esize};
    rc = tstor__transfer(&d, &s, ndim, sizes);
  }
  if (rc) {
    tstor_tensor_release(t);
    return rc;
  }
  *out = t;
  return 0;
}

int tstor_tensor_to_array(const tstor_tensor *t, void *out, tstor_dtype out_dtype, size_t count) {
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_to_array: NULL tensor");
  const tstor_dtype_info *od = tstor__dtype(out_dtype, "tensor_to_array");
  if (od == NULL) return TSTOR_EINVAL;
  int rc = tstor_dtype_can_convert(out_dtype, t->dtype);
  if (rc) return rc;
  if ((int64_t)count != t->numel)
    return tstor__err(TSTOR_ESIZE,
                      "tensor_to_array: the tensor has %" PRId64 " elements, the array %zu",
                      t->numel, count);
  if (count == 0) return 0;
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_to_array: NULL out");
  if (!tstor__tensor_has_data(t))
    return tstor__err(TSTOR_ENODATA, "tensor_to_array: a %s tensor has no data",
                      t->storage->ctx->types[t->storage->device.type].name);
  int64_t st[MAXD];
  tstor__contiguous_strides(t->ndim, t->sizes, st);
  side d = {NULL, out, st, out_dtype, od->element_size};
  side s = tstor__tensor_side(t, NULL);
  return tstor__transfer(&d, &s, t->ndim, t->sizes);
}

/* ------------------------------------------------------ element access */

static int element_at(const tstor_tensor *t, const int64_t *index, int64_t *byte_off,
                      const char *what) {
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "%s: NULL tensor", what);
  if (index == NULL && t->ndim > 0) return tstor__err(TSTOR_EINVAL, "%s: NULL index", what);
  if (!tstor__tensor_has_data(t))
    return tstor__err(TSTOR_ENODATA, "%s: a %s tensor has no data", what,
                      t->storage->ctx->types[t->storage->device.type].name);
  int64_t off = 0;
  for (int i = 0; i < t->ndim; i++) {
    int64_t k = index[i], n = t->sizes[i];
    if (k < -n || k >= n)
      return tstor__err(TSTOR_ERANGE,
                        "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64, k,
                        i, n);
    if (k < 0) k += n;
    off += k * t->strides[i];
  }
  *byte_off = off * (int64_t)t->esize;
  return 0;
}

int tstor_tensor_get(const tstor_tensor *t, const int64_t *index, void *value) {
  int64_t off;
  int rc = element_at(t, index, &off, "tensor_get");
  if (rc) return rc;
  if (value == NULL) return tstor__err(TSTOR_EINVAL, "tensor_get: NULL value");
  side x = tstor__tensor_side(t, NULL);
  if (tstor__side_on_host(&x)) {
    memcpy(value, x.ptr + off, t->esize);
    return 0;
  }
  return tstor__side_read(&x, off, value, (int64_t)t->esize);
}

int tstor_tensor_set(tstor_tensor *t, const int64_t *index, const void *value) {
  int64_t off;
  int rc = element_at(t, index, &off, "tensor_set");
  if (rc) return rc;
  if (value == NULL) return tstor__err(TSTOR_EINVAL, "tensor_set: NULL value");
  side x = tstor__tensor_side(t, NULL);
  if (tstor__side_on_host(&x)) {
    memcpy(x.ptr + off, value, t->esize);
    return 0;
  }
  return tstor__side_write(&x, off, value, (int64_t)t->esize);
}

int tstor_tensor_get_f64(const tstor_tensor *t, const int64_t *index, double *out) {
  _Alignas(16) unsigned char elem[16];
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_get_f64: NULL out");
  int rc = tstor_tensor_get(t, index, elem);
  if (rc || (rc = tstor__dtype_as_numbers(tstor_dtype_info_of(t->dtype), TSTOR__READ_ONE)))
    return rc;
  tstor__convert_serial(out, TSTOR_FLOAT64, elem, tstor_dtype_info_of(t->dtype)->underlying, 1);
  return 0;
}

int tstor_tensor_set_f64(tstor_tensor *t, const int64_t *index, double value) {
  _Alignas(16) unsigned char elem[16];
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_set_f64: NULL tensor");
  int rc = scalar_bytes(t->dtype, value, elem, "tensor_set_f64", TSTOR__SET_ONE);
  return rc ? rc : tstor_tensor_set(t, index, elem);
}
