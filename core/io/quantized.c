/* QUANTIZED values: tensors of ggml's quantized types, kept as the file's
 * blocks with their logical shape beside them, and decoded on demand; and
 * the decoding of torch's quantized tensors (torch_dequantize.c) beside
 * theirs. */
#include "io_internal.h"

#include <string.h>

#include "gguf_format.h"

int tstor_value_ggml_type(const tstor_value *v) {
  return v && v->kind == TSTOR_VALUE_QUANTIZED ? v->u.tensor.dtype : -1;
}

int tstor_value_quantized_shape(const tstor_value *v, const int64_t **sizes) {
  if (!v || v->kind != TSTOR_VALUE_QUANTIZED) return -1;
  if (sizes) *sizes = v->u.tensor.sizes;
  return v->u.tensor.ndim;
}

int tstor__io_quantized_bytes(int type, int ndim, const int64_t *sizes, uint64_t *nbytes) {
  const tstor__io_ggml_type *t = tstor__io_ggml_type_of(type);
  if (!t || t->dtype >= 0)
    return TSTOR__ERR(TSTOR_EINVAL, "ggml type %d is no quantized type", type);
  if (ndim < 1 || ndim > TSTOR_TENSOR_MAX_DIM)
    return TSTOR__ERR(TSTOR_EINVAL, "a %s tensor needs 1 to %d dimensions, not %d", t->name,
                      TSTOR_TENSOR_MAX_DIM, ndim);
  uint64_t n = 1;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] < 0) return TSTOR__ERR(TSTOR_EINVAL, "size %lld is negative", (long long)sizes[d]);
    if (__builtin_mul_overflow(n, (uint64_t)sizes[d], &n))
      return TSTOR__ERR(TSTOR_EOVERFLOW, "a %s tensor's number of elements overflows", t->name);
  }
  if (sizes[ndim - 1] % t->block)
    return TSTOR__ERR(TSTOR_EINVAL,
                      "a %s row of %lld elements is no whole number of %lld-element blocks",
                      t->name, (long long)sizes[ndim - 1], (long long)t->block);
  if (__builtin_mul_overflow(n / (uint64_t)t->block, (uint64_t)t->bytes, nbytes) ||
      *nbytes > INT64_MAX)
    return TSTOR__ERR(TSTOR_EOVERFLOW, "a %s tensor's bytes overflow", t->name);
  return 0;
}

int tstor__io_value_quantized(tstor_checkpoint *ck, int type, int ndim, const int64_t *sizes,
                              tstor_tensor *blocks, long storage, tstor_value **out) {
  int64_t *copy = tstor__io_malloc((size_t)(ndim ? ndim : 1) * sizeof *copy);
  tstor_value *v = copy ? tstor__io_value_alloc(ck, TSTOR_VALUE_QUANTIZED) : NULL;
  if (!v) {
    tstor__io_free(copy);
    return copy ? TSTOR_ENOMEM : TSTOR__ERR(TSTOR_ENOMEM, "out of memory for a tensor's sizes");
  }
  memcpy(copy, sizes, (size_t)ndim * sizeof *copy);
  v->u.tensor.sizes = copy;
  v->u.tensor.ndim = ndim;
  v->u.tensor.dtype = type;
  v->u.tensor.storage = storage;
  v->u.tensor.t = tstor_tensor_retain(blocks);
  *out = v;
  return 0;
}

int tstor_value_new_quantized(tstor_checkpoint *ck, int type, int ndim, const int64_t *sizes,
                              tstor_tensor *blocks, tstor_value **out) {
  if (out) *out = NULL;
  if (!ck || !out || !blocks || (!sizes && ndim))
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_new_quantized: NULL argument");
  uint64_t nbytes;
  int rc = tstor__io_quantized_bytes(type, ndim, sizes, &nbytes);
  if (rc) return rc;
  if (tstor_tensor_dtype(blocks) != TSTOR_UINT8 || !tstor_tensor_is_contiguous(blocks) ||
      (uint64_t)tstor_tensor_numel(blocks) != nbytes)
    return TSTOR__ERR(TSTOR_EINVAL,
                      "tstor_value_new_quantized: the blocks must be a contiguous uint8 tensor of "
                      "%llu bytes, not %s of %lld elements",
                      (unsigned long long)nbytes, tstor_dtype_name(tstor_tensor_dtype(blocks)),
                      (long long)tstor_tensor_numel(blocks));
  return tstor__io_value_quantized(ck, type, ndim, sizes, blocks, -1, out);
}

/* ------------------------------------------------------------ decoding */

/* The bytes of contiguous tensor t, readable from the host (*tmp, a copy
 * when it lives on a device, for the caller to release). */
static int host_view(const tstor_tensor *t, tstor_storage **tmp, const uint8_t **p) {
  const void *base;
  int rc = tstor__io_host_bytes(tstor_tensor_storage(t), tmp, &base);
  if (!rc) *p = (const uint8_t *)base + tstor_tensor_storage_offset(t);
  return rc;
}

/* A torch quantized tensor (_rebuild_qtensor), not a ggml one. */
static bool torch_quantized(const tstor_value *v) {
  return v->kind == TSTOR_VALUE_TENSOR && v->u.tensor.quantizer;
}

/* A value tstor_value_dequantize decodes: ggml's or torch's. */
static bool decodable(const tstor_value *v) {
  return v->kind == TSTOR_VALUE_QUANTIZED || torch_quantized(v);
}

/* A QUANTIZED value's blocks decoded into a new float32 tensor. */
static int ggml_dequantize(const tstor_value *v, tstor_tensor **out) {
  const tstor_tensor *blocks = v->u.tensor.t;
  const tstor__io_ggml_type *type = tstor__io_ggml_type_of(v->u.tensor.dtype);
  tstor_context *ctx = tstor_tensor_context(blocks);
  tstor_device cpu;
  tstor_storage *tmp = NULL;
  const uint8_t *p = NULL;
  int rc = tstor_device_parse(ctx, "cpu", &cpu);
  if (!rc)
    rc = tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, v->u.tensor.ndim, v->u.tensor.sizes, out);
  if (!rc && tstor_tensor_numel(blocks)) rc = host_view(blocks, &tmp, &p);
  if (!rc)
    rc = tstor__io_ggml_dequantize(v->u.tensor.dtype, p, tstor_tensor_numel(blocks) / type->bytes,
                                   tstor_tensor_data(*out));
  tstor_storage_release(tmp);
  if (rc) {
    tstor_tensor_release(*out);
    *out = NULL;
  }
  return rc;
}

int tstor_value_dequantize(const tstor_value *v, tstor_dtype dtype, tstor_tensor **out) {
  if (out) *out = NULL;
  if (!v || !out || !decodable(v))
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_value_dequantize: needs a quantized value and out");
  if (dtype != TSTOR_FLOAT32 && dtype != TSTOR_FLOAT16 && dtype != TSTOR_BFLOAT16)
    return TSTOR__ERR(TSTOR_EINVAL,
                      "tstor_value_dequantize: to float32, float16 or bfloat16, not %s",
                      tstor_dtype_name(dtype));
  tstor_tensor *f32 = NULL;
  int rc = torch_quantized(v) ? tstor__io_torch_dequantize(v, &f32) : ggml_dequantize(v, &f32);
  tstor_device cpu;
  if (!rc && dtype != TSTOR_FLOAT32 &&
      !(rc = tstor_device_parse(tstor_tensor_context(f32), "cpu", &cpu))) {
    rc = tstor_tensor_to(f32, cpu, dtype, out);
    tstor_tensor_release(f32);
  } else if (!rc) {
    *out = f32;
  } else {
    tstor_tensor_release(f32);
  }
  return rc;
}

/* Torch quantized tensor v made t, its values (a reference the call takes),
 * on a record of its own. */
static int torch_dequantized(tstor_checkpoint *ck, tstor_value *v, tstor_tensor *t) {
  long idx = -1;
  int rc = tstor__io_record_add_derived(ck, v->u.tensor.storage, "dequantized",
                                        tstor_tensor_dtype(t), tstor_tensor_numel(t), "cpu", &idx);
  if (rc) {
    tstor_tensor_release(t);
    return rc;
  }
  ck->storages[idx].s = tstor_storage_retain(tstor_tensor_storage(t));
  tstor_tensor_release(v->u.tensor.t);
  v->u.tensor.t = t;
  v->u.tensor.storage = idx;
  v->u.tensor.dtype = (int)tstor_tensor_dtype(t);
  v->u.tensor.offset = 0;
  memcpy(v->u.tensor.strides, tstor_tensor_strides(t), (size_t)v->u.tensor.ndim * sizeof(int64_t));
  v->u.tensor.quantizer = NULL;
  return 0;
}

int tstor_checkpoint_dequantize(tstor_checkpoint *ck, tstor_dtype dtype) {
  if (!ck) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_dequantize: ck is NULL");
  size_t n = 0;
  for (size_t i = 0; i < ck->nvalues; i++) n += decodable(ck->values[i]);
  if (!n) return 0;
  /* every value decoded first, so that a failure changes nothing */
  tstor_tensor **done = tstor__io_calloc(n, sizeof *done);
  if (!done) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu tensors", n);
  int rc = 0;
  for (size_t i = 0, k = 0; i < ck->nvalues && !rc; i++)
    if (decodable(ck->values[i])) rc = tstor_value_dequantize(ck->values[i], dtype, &done[k++]);
  for (size_t i = 0, k = 0; i < ck->nvalues && !rc; i++) {
    tstor_value *v = ck->values[i];
    if (torch_quantized(v)) { /* views of one record each get their own storage */
      rc = torch_dequantized(ck, v, done[k]);
      done[k++] = NULL;
      continue;
    }
    if (v->kind != TSTOR_VALUE_QUANTIZED) continue;
    tstor_tensor *t = done[k];
    done[k++] = NULL;
    if (v->u.tensor.storage >= 0) {
      tstor__io_record *r = &ck->storages[v->u.tensor.storage];
      tstor_storage_release(r->s);
      r->s = tstor_storage_retain(tstor_tensor_storage(t));
      r->dtype = dtype;
      r->numel = tstor_tensor_numel(t);
    }
    tstor_tensor_release(v->u.tensor.t);
    tstor__io_free(v->u.tensor.sizes);
    v->u.tensor.t = t;
    v->u.tensor.sizes = NULL;
    v->u.tensor.ndim = 0;
    v->u.tensor.dtype = (int)dtype;
    v->kind = TSTOR_VALUE_TENSOR;
  }
  for (size_t k = 0; k < n; k++) tstor_tensor_release(done[k]);
  tstor__io_free(done);
  return rc;
}
