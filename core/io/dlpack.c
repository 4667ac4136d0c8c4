/* DLPack export and import: a DLManagedTensor that holds a tensor reference,
 * and a storage whose deleter hands a DLManagedTensor back to its owner. */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

#include <tstor/dlpack.h>

/* Each dtype DLPack 0.6 has a type for, both ways; the float8s and float4
 * have codes only from DLPack 1.x on. */
static const struct {
  tstor_dtype dtype;
  uint8_t code, bits;
} dl_dtypes[] = {
    {TSTOR_UINT8, kDLUInt, 8},         {TSTOR_INT8, kDLInt, 8},
    {TSTOR_INT16, kDLInt, 16},         {TSTOR_INT32, kDLInt, 32},
    {TSTOR_INT64, kDLInt, 64},         {TSTOR_FLOAT16, kDLFloat, 16},
    {TSTOR_FLOAT32, kDLFloat, 32},     {TSTOR_FLOAT64, kDLFloat, 64},
    {TSTOR_BFLOAT16, kDLBfloat, 16},   {TSTOR_COMPLEX32, kDLComplex, 32},
    {TSTOR_COMPLEX64, kDLComplex, 64}, {TSTOR_COMPLEX128, kDLComplex, 128},
    {TSTOR_UINT16, kDLUInt, 16},       {TSTOR_UINT32, kDLUInt, 32},
    {TSTOR_UINT64, kDLUInt, 64},
};
#define NDL (sizeof dl_dtypes / sizeof dl_dtypes[0])

typedef struct exported {
  DLManagedTensor m;
  tstor_tensor *t;
  int64_t dims[]; /* shape, then strides */
} exported;

static void export_deleter(DLManagedTensor *self) {
  exported *e = self->manager_ctx;
  tstor_tensor_release(e->t);
  tstor__io_free(e);
}

static int is_type(tstor_context *ctx, tstor_device dev, const char *name) {
  const char *n = tstor_device_type_name(ctx, dev.type);
  return n && strcmp(n, name) == 0;
}

int tstor_dlpack_export(const tstor_tensor *t, DLManagedTensor **out) {
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_export: out is NULL");
  *out = NULL;
  if (!t) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_export: t is NULL");
  tstor_dtype dt = tstor_tensor_dtype(t);
  size_t k;
  for (k = 0; k < NDL && dl_dtypes[k].dtype != dt; k++) {
  }
  if (k == NDL)
    return TSTOR__ERR(TSTOR_ENOTSUP, "DLPack 0.6 has no type for %s", tstor_dtype_name(dt));
  tstor_storage *s = tstor_tensor_storage(t);
  tstor_context *ctx = tstor_storage_context(s);
  tstor_device dev = tstor_tensor_device(t);
  if (tstor_storage_flags(s) & TSTOR_FLAG_NO_DATA)
    return TSTOR__ERR(TSTOR_ENODATA, "a %s tensor has no data to export",
                      tstor_device_type_name(ctx, dev.type));
  DLDevice dl;
  if (tstor_device_type_flags(ctx, dev.type) & TSTOR_DEVICE_HOST)
    dl = (DLDevice){tstor_storage_is_pinned(s) ? kDLCUDAHost : kDLCPU, 0};
  else if (is_type(ctx, dev, "cuda")) dl = (DLDevice){kDLCUDA, dev.index};
  else dl = (DLDevice){kDLExtDev, dev.index};
  int nd = tstor_tensor_dim(t);
  exported *e = tstor__io_calloc(1, sizeof *e + 2 * (size_t)nd * sizeof(int64_t));
  if (!e) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for a DLPack tensor");
  memcpy(e->dims, tstor_tensor_sizes(t), (size_t)nd * sizeof(int64_t));
  memcpy(e->dims + nd, tstor_tensor_strides(t), (size_t)nd * sizeof(int64_t));
  e->t = tstor_tensor_retain((tstor_tensor *)t);
  e->m.dl_tensor.data = tstor_tensor_data(t);
  e->m.dl_tensor.device = dl;
  e->m.dl_tensor.ndim = nd;
  e->m.dl_tensor.dtype = (DLDataType){dl_dtypes[k].code, dl_dtypes[k].bits, 1};
  e->m.dl_tensor.shape = e->dims;
  e->m.dl_tensor.strides = e->dims + nd;
  e->m.dl_tensor.byte_offset = 0;
  e->m.manager_ctx = e;
  e->m.deleter = export_deleter;
  *out = &e->m;
  return 0;
}

/* What an imported storage owns: the producer's tensor, handed back once. A
 * failed import disarms it, so that the caller keeps m. */
typedef struct imported {
  DLManagedTensor *m;
  int armed;
} imported;

static void import_deleter(void *data, void *ctx) {
  (void)data;
  imported *im = ctx;
  if (im->armed && im->m->deleter) im->m->deleter(im->m);
  tstor__io_free(im);
}

/* The device a DLPack device names in ctx. */
static int device_of(tstor_context *ctx, DLDevice d, tstor_device *out) {
  char name[64];
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost: return tstor_device_parse(ctx, "cpu", out);
    case kDLCUDA:
      snprintf(name, sizeof name, "cuda:%d", d.device_id);
      return tstor_device_parse(ctx, name, out);
    case kDLExtDev: {
      const char *only = NULL;
      int n = tstor_device_type_count(ctx);
      for (int i = 0; i < n; i++) {
        /* DLPack's own types name host memory and CUDA; a device of no
         * bytes cannot hold one */
        const char *t = tstor_device_type_name(ctx, i);
        if (!t || !strcmp(t, "cuda") ||
            (tstor_device_type_flags(ctx, i) & (TSTOR_DEVICE_HOST | TSTOR_DEVICE_NO_DATA)))
          continue;
        if (only)
          return TSTOR__ERR(TSTOR_ENODEV, "a kDLExtDev tensor, and both '%s' and '%s' could be its device",
                            only, t);
        only = t;
      }
      if (!only) return TSTOR__ERR(TSTOR_ENODEV, "a kDLExtDev tensor, and no backend device to give it");
      snprintf(name, sizeof name, "%s:%d", only, d.device_id);
      return tstor_device_parse(ctx, name, out);
    }
    default:
      return TSTOR__ERR(TSTOR_ENODEV, "DLPack device type %d has no tstor device", (int)d.device_type);
  }
}

int tstor_dlpack_import(tstor_context *ctx, DLManagedTensor *m, tstor_tensor **out) {
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_import: out is NULL");
  *out = NULL;
  if (!m) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_import: m is NULL");
  int rc;
  if (!ctx && (rc = tstor_context_default(&ctx))) return rc;
  const DLTensor *x = &m->dl_tensor;
  if (x->ndim < 0 || x->ndim > TSTOR_TENSOR_MAX_DIM)
    return TSTOR__ERR(TSTOR_EINVAL, "a DLPack tensor of %d dimensions (0 to %d)", x->ndim, TSTOR_TENSOR_MAX_DIM);
  if (x->ndim && !x->shape) return TSTOR__ERR(TSTOR_EINVAL, "a DLPack tensor without a shape");
  size_t k;
  for (k = 0; k < NDL; k++)
    if (dl_dtypes[k].code == x->dtype.code && dl_dtypes[k].bits == x->dtype.bits) break;
  if (k == NDL || x->dtype.lanes != 1)
    return TSTOR__ERR(TSTOR_ENOTSUP, "DLPack type (code %u, %u bits, %u lanes) has no tstor dtype",
                      x->dtype.code, x->dtype.bits, x->dtype.lanes);
  tstor_dtype dt = dl_dtypes[k].dtype;
  tstor_device dev;
  if ((rc = device_of(ctx, x->device, &dev))) return rc;
  int64_t strides[TSTOR_TENSOR_MAX_DIM];
  for (int i = x->ndim - 1; i >= 0; i--) {
    if (x->shape[i] < 0) return TSTOR__ERR(TSTOR_EINVAL, "a DLPack shape of %lld", (long long)x->shape[i]);
    if (x->strides) strides[i] = x->strides[i];
    else if (i == x->ndim - 1) strides[i] = 1;
    else if (__builtin_mul_overflow(strides[i + 1], x->shape[i + 1] ? x->shape[i + 1] : 1, &strides[i]))
      return TSTOR__ERR(TSTOR_EOVERFLOW, "a compact DLPack tensor whose strides overflow int64 (dimension %d)", i);
    if (strides[i] < 0)
      return TSTOR__ERR(TSTOR_ENOTSUP, "a DLPack tensor with negative strides (dimension %d)", i);
  }
  uint64_t nbytes;
  if ((rc = tstor_layout_nbytes(x->ndim, x->shape, strides, tstor_dtype_size(dt), 0, &nbytes))) return rc;
  if (nbytes > SIZE_MAX) return TSTOR__ERR(TSTOR_EOVERFLOW, "a DLPack tensor of %llu bytes", (unsigned long long)nbytes);
  char *data = (char *)x->data + x->byte_offset;
  if (!x->data && nbytes) return TSTOR__ERR(TSTOR_EINVAL, "a DLPack tensor of %llu bytes at NULL", (unsigned long long)nbytes);
  imported *im = tstor__io_malloc(sizeof *im);
  if (!im) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  *im = (imported){m, 1};
  tstor_storage *s;
  if ((rc = tstor_storage_wrap_owned(ctx, dev, data, (size_t)nbytes, import_deleter, im, &s))) {
    tstor__io_free(im);
    return rc;
  }
  if ((rc = tstor_tensor_on_storage(s, dt, 0, x->ndim, x->shape, strides, out))) im->armed = 0;
  tstor_storage_release(s);
  return rc;
}
