/* DLPack export and import, 0.x and 1.x: a DLManagedTensor or
 * DLManagedTensorVersioned that holds a tensor reference, and a storage
 * whose deleter hands either back to its owner. */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

#include <tstor/dlpack.h>

/* Each dtype DLPack has a type for, both ways. bool and the float8s have
 * codes from DLPack 0.8 and 1.1 on; PyTorch writes them in either struct,
 * and so does tstor. float4_e2m1fn_x2 holds two elements a byte, which
 * kDLFloat4_e2m1fn would count as one each: it has none. */
static const struct {
  tstor_dtype dtype;
  uint8_t code, bits;
} dl_dtypes[] = {
    {TSTOR_UINT8, kDLUInt, 8},
    {TSTOR_INT8, kDLInt, 8},
    {TSTOR_INT16, kDLInt, 16},
    {TSTOR_INT32, kDLInt, 32},
    {TSTOR_INT64, kDLInt, 64},
    {TSTOR_FLOAT16, kDLFloat, 16},
    {TSTOR_FLOAT32, kDLFloat, 32},
    {TSTOR_FLOAT64, kDLFloat, 64},
    {TSTOR_BFLOAT16, kDLBfloat, 16},
    {TSTOR_COMPLEX32, kDLComplex, 32},
    {TSTOR_COMPLEX64, kDLComplex, 64},
    {TSTOR_COMPLEX128, kDLComplex, 128},
    {TSTOR_UINT16, kDLUInt, 16},
    {TSTOR_UINT32, kDLUInt, 32},
    {TSTOR_UINT64, kDLUInt, 64},
    {TSTOR_BOOL, kDLBool, 8},
    {TSTOR_FLOAT8_E5M2, kDLFloat8_e5m2, 8},
    {TSTOR_FLOAT8_E4M3FN, kDLFloat8_e4m3fn, 8},
    {TSTOR_FLOAT8_E5M2FNUZ, kDLFloat8_e5m2fnuz, 8},
    {TSTOR_FLOAT8_E4M3FNUZ, kDLFloat8_e4m3fnuz, 8},
    {TSTOR_FLOAT8_E8M0FNU, kDLFloat8_e8m0fnu, 8},
};
#define NDL (sizeof dl_dtypes / sizeof dl_dtypes[0])

/* What an export owns: the tensor it views, and its shape and strides. One
 * of the two structs is handed out, by the export that made it. */
typedef struct exported {
  union {
    DLManagedTensor m;
    DLManagedTensorVersioned v;
  } u;
  tstor_tensor *t;
  int64_t dims[]; /* shape, then strides */
} exported;

static void export_free(exported *e) {
  tstor_tensor_release(e->t);
  tstor__io_free(e);
}
static void export_deleter(DLManagedTensor *self) { export_free(self->manager_ctx); }
static void export_deleter_versioned(DLManagedTensorVersioned *self) {
  export_free(self->manager_ctx);
}

static int is_type(tstor_context *ctx, tstor_device dev, const char *name) {
  const char *n = tstor_device_type_name(ctx, dev.type);
  return n && strcmp(n, name) == 0;
}

int tstor_dlpack_negotiate(int max_major, int max_minor) {
  (void)max_minor; /* a consumer of an older 1.x reads 1.1: minor versions only add */
  return max_major >= 1;
}

/* Whether consumers must not write t's bytes: they map a file or belong to
 * someone else. */
static bool read_only(const tstor_tensor *t) {
  return (tstor_storage_flags(tstor_tensor_storage(t)) &
          (TSTOR_FLAG_MAPPED | TSTOR_FLAG_BORROWED)) != 0;
}

/* A new export of t that holds a reference on it (*out): its DLTensor
 * filled in the struct `versioned` says, the rest left to the caller. */
static int export_tensor(const tstor_tensor *t, bool versioned, const char *fn, exported **out) {
  tstor_dtype dt = tstor_tensor_dtype(t);
  size_t k;
  for (k = 0; k < NDL && dl_dtypes[k].dtype != dt; k++) {
  }
  if (k == NDL)
    return TSTOR__ERR(TSTOR_ENOTSUP, "%s: DLPack has no type for %s", fn, tstor_dtype_name(dt));
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
  DLTensor *x = versioned ? &e->u.v.dl_tensor : &e->u.m.dl_tensor;
  x->data = tstor_tensor_data(t);
  x->device = dl;
  x->ndim = nd;
  x->dtype = (DLDataType){dl_dtypes[k].code, dl_dtypes[k].bits, 1};
  x->shape = e->dims;
  x->strides = e->dims + nd;
  x->byte_offset = 0;
  *out = e;
  return 0;
}

int tstor_dlpack_export(const tstor_tensor *t, DLManagedTensor **out) {
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_export: out is NULL");
  *out = NULL;
  if (!t) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_export: t is NULL");
  if (read_only(t))
    return TSTOR__ERR(
        TSTOR_EACCES,
        "tstor_dlpack_export: the storage is %s, so read-only to a consumer, which DLPack 0.x "
        "cannot tell one: export to a 1.x consumer (tstor_dlpack_export_versioned), or a copy",
        (tstor_storage_flags(tstor_tensor_storage(t)) & TSTOR_FLAG_MAPPED) ? "mapped" : "borrowed");
  exported *e;
  int rc = export_tensor(t, false, "tstor_dlpack_export", &e);
  if (rc) return rc;
  e->u.m.manager_ctx = e;
  e->u.m.deleter = export_deleter;
  *out = &e->u.m;
  return 0;
}

#define EXPORT_FLAGS (TSTOR_DLPACK_COPY | TSTOR_DLPACK_NO_COPY | TSTOR_DLPACK_READ_ONLY)

int tstor_dlpack_export_versioned(const tstor_tensor *t, unsigned flags,
                                  DLManagedTensorVersioned **out) {
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_export_versioned: out is NULL");
  *out = NULL;
  if (!t) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_export_versioned: t is NULL");
  if (flags & ~(unsigned)EXPORT_FLAGS)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_export_versioned: unknown flags 0x%x",
                      flags & ~(unsigned)EXPORT_FLAGS);
  if ((flags & TSTOR_DLPACK_COPY) && (flags & TSTOR_DLPACK_NO_COPY))
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_export_versioned: both COPY and NO_COPY");
  tstor_tensor *copy = NULL;
  int rc = 0;
  if ((flags & TSTOR_DLPACK_COPY) && (rc = tstor_tensor_clone(t, &copy))) return rc;
  const tstor_tensor *what = copy ? copy : t;
  uint64_t dlflags = copy ? DLPACK_FLAG_BITMASK_IS_COPIED : 0;
  if ((flags & TSTOR_DLPACK_READ_ONLY) || read_only(what)) dlflags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  exported *e;
  rc = export_tensor(what, true, "tstor_dlpack_export_versioned", &e);
  tstor_tensor_release(copy); /* the export holds its own reference */
  if (rc) return rc;
  e->u.v.version = (DLPackVersion){TSTOR_DLPACK_MAJOR, TSTOR_DLPACK_MINOR};
  e->u.v.manager_ctx = e;
  e->u.v.deleter = export_deleter_versioned;
  e->u.v.flags = dlflags;
  *out = &e->u.v;
  return 0;
}

/* What an imported storage owns: the producer's tensor (m or v), handed
 * back once. A failed import disarms it, so that the caller keeps it. */
typedef struct imported {
  DLManagedTensor *m;
  DLManagedTensorVersioned *v;
  int armed;
} imported;

static void give_back(const imported *im) {
  if (im->m && im->m->deleter) im->m->deleter(im->m);
  if (im->v && im->v->deleter) im->v->deleter(im->v);
}

static void import_deleter(void *data, void *ctx) {
  (void)data;
  imported *im = ctx;
  if (im->armed) give_back(im);
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

/* A tensor over x's memory, whose storage owns what `owner` names (*out;
 * on failure the caller keeps it). With `copy`, a tensor over a copy of
 * the memory instead, the owner's deleter called once it is made. */
static int import_tensor(tstor_context *ctx, const DLTensor *x, imported owner, bool copy,
                         tstor_tensor **out) {
  int rc;
  if (!ctx && (rc = tstor_context_default(&ctx))) return rc;
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
  tstor_storage *s;
  if (copy) {
    /* a view of the producer's bytes, borrowed for as long as the clone takes */
    tstor_tensor *view = NULL;
    if (!(rc = tstor_storage_wrap(ctx, dev, data, (size_t)nbytes, &s))) {
      rc = tstor_tensor_on_storage(s, dt, 0, x->ndim, x->shape, strides, &view);
      tstor_storage_release(s);
    }
    if (!rc) rc = tstor_tensor_clone(view, out);
    tstor_tensor_release(view);
    if (!rc) give_back(&owner);
    return rc;
  }
  imported *im = tstor__io_malloc(sizeof *im);
  if (!im) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  *im = owner;
  im->armed = 1;
  if ((rc = tstor_storage_wrap_owned(ctx, dev, data, (size_t)nbytes, import_deleter, im, &s))) {
    tstor__io_free(im);
    return rc;
  }
  if ((rc = tstor_tensor_on_storage(s, dt, 0, x->ndim, x->shape, strides, out))) im->armed = 0;
  tstor_storage_release(s);
  return rc;
}

int tstor_dlpack_import(tstor_context *ctx, DLManagedTensor *m, tstor_tensor **out) {
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_import: out is NULL");
  *out = NULL;
  if (!m) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_import: m is NULL");
  return import_tensor(ctx, &m->dl_tensor, (imported){m, NULL, 0}, false, out);
}

int tstor_dlpack_import_versioned(tstor_context *ctx, DLManagedTensorVersioned *m, unsigned flags,
                                  tstor_tensor **out) {
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_import_versioned: out is NULL");
  *out = NULL;
  if (!m) return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_import_versioned: m is NULL");
  if (flags & ~(unsigned)(TSTOR_DLPACK_COPY | TSTOR_DLPACK_NO_COPY))
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_import_versioned: unknown flags 0x%x",
                      flags & ~(unsigned)(TSTOR_DLPACK_COPY | TSTOR_DLPACK_NO_COPY));
  if ((flags & TSTOR_DLPACK_COPY) && (flags & TSTOR_DLPACK_NO_COPY))
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_dlpack_import_versioned: both COPY and NO_COPY");
  /* the version first: past it, another major's layout is unknown */
  if (m->version.major != TSTOR_DLPACK_MAJOR)
    return TSTOR__ERR(TSTOR_ENOTSUP, "a DLPack %u.%u tensor, and tstor reads major version %d",
                      m->version.major, m->version.minor, TSTOR_DLPACK_MAJOR);
  bool ro = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  if (ro && (flags & TSTOR_DLPACK_NO_COPY))
    return TSTOR__ERR(
        TSTOR_EACCES,
        "a read-only DLPack tensor, which a tstor storage cannot keep from writes, and "
        "TSTOR_DLPACK_NO_COPY forbids the copy");
  return import_tensor(ctx, &m->dl_tensor, (imported){NULL, m, 0},
                       ro || (flags & TSTOR_DLPACK_COPY), out);
}
