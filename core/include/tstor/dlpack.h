/* tstor/dlpack.h: tensors to and from DLPack, without copying unless asked.
 * DLPack 1.x (DLManagedTensorVersioned: a version, READ_ONLY and IS_COPIED
 * flags), which numpy 2.x and PyTorch 2.x exchange, and 0.x
 * (DLManagedTensor) for older consumers such as numpy 1.24 and PyTorch 1.13.
 * Part of libtstor-io (pkg-config tstor-io).
 *
 * Devices: cpu <-> kDLCPU, cuda:N <-> kDLCUDA N, pinned host memory ->
 * kDLCUDAHost (imported as cpu), a third-party backend's device -> kDLExtDev
 * with its index (imported when exactly one such device type is registered).
 * meta tensors have no data and are refused. Dtypes: the integers (uint16,
 * uint32 and uint64 too, kDLUInt), float16/32/64, bfloat16, complex32/64/128,
 * bool (kDLBool, 8 bits), and float8_e5m2, float8_e4m3fn, float8_e5m2fnuz,
 * float8_e4m3fnuz and float8_e8m0fnu (kDLFloat8_*, DLPack 1.1's codes, in a
 * DLManagedTensor as well, as PyTorch writes them). The quantized and bits
 * dtypes, float4_e2m1fn_x2 (two elements a byte, which DLPack's
 * kDLFloat4_e2m1fn counts as one each) and bcomplex32 (DLPack has no complex
 * of bfloat16; PyTorch 2.15 refuses it too) are refused with TSTOR_ENOTSUP.
 *
 * Read-only: a storage that maps a file or borrows its bytes
 * (TSTOR_FLAG_MAPPED, TSTOR_FLAG_BORROWED) is exported with READ_ONLY, and
 * refused (TSTOR_EACCES) to a 0.x consumer, which cannot be told, as numpy
 * refuses a read-only array; export a copy instead (TSTOR_DLPACK_COPY).
 */
#ifndef TSTOR_DLPACK_H
#define TSTOR_DLPACK_H

#include <stdint.h>

#include <dlpack/dlpack.h>
#include <tstor/tensor.h>

/* Debian 12's dlpack.h is 0.6 (DLPACK_VERSION 60): the 1.x declarations
 * tstor uses, laid out as DLPack 1.x lays them out, where the header has
 * none. With a 1.x dlpack.h its own are used. */
#ifndef DLPACK_MAJOR_VERSION
typedef struct {
  uint32_t major; /* differs: the layout below may differ, call only the deleter */
  uint32_t minor; /* differs: compatible additions */
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version; /* the producer's */
  void *manager_ctx;     /* the producer's; may be NULL */
  /* Called by the consumer exactly once, when done; frees self. May be NULL. */
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags; /* DLPACK_FLAG_BITMASK_* */
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL) /* the consumer must not write */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL) /* the producer copied: nothing else sees it */

/* DLDataTypeCode's values after 0.6's */
enum {
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U
};
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The DLPack version tstor writes into a DLManagedTensorVersioned. */
#define TSTOR_DLPACK_MAJOR 1
#define TSTOR_DLPACK_MINOR 1

/* Export and import options, as __dlpack__(copy=..., read_only=...) and
 * from_dlpack(copy=...) take them. Without either copy flag, a copy is made
 * only where it must be (an import of READ_ONLY memory, which a tstor
 * storage cannot keep from writes). */
enum tstor_dlpack_flags {
  TSTOR_DLPACK_COPY = 1 << 0,      /* always copy (an export says IS_COPIED) */
  TSTOR_DLPACK_NO_COPY = 1 << 1,   /* never copy: refuse (TSTOR_EACCES) where one must be made */
  TSTOR_DLPACK_READ_ONLY = 1 << 2, /* export: set READ_ONLY though the storage is writable */
};

/* Which DLPack a consumer gets, as __dlpack__(max_version=...) decides:
 * 1 (a DLManagedTensorVersioned, tstor_dlpack_export_versioned) for a
 * consumer whose max_version has major 1 or more; 0 (a DLManagedTensor,
 * tstor_dlpack_export) for one that gives none (max_major < 0) or one
 * below 1.0. */
TSTOR_EXTERN int tstor_dlpack_negotiate(int max_major, int max_minor);

/* A DLManagedTensorVersioned (version 1.1) viewing t's elements (data is
 * the address of element 0, byte_offset 0; shape and strides as t's), or,
 * with TSTOR_DLPACK_COPY, a contiguous copy of them (IS_COPIED, writable).
 * READ_ONLY is set for a mapped or borrowed storage, and with
 * TSTOR_DLPACK_READ_ONLY. It holds a reference on t (or its copy), so the
 * storage lives until the consumer calls its deleter, exactly once, which
 * frees it. *out is owned by the consumer from then on; t stays the
 * caller's. */
TSTOR_EXTERN int tstor_dlpack_export_versioned(const tstor_tensor *t, unsigned flags,
                                               DLManagedTensorVersioned **out);

/* The same as a DLManagedTensor (DLPack 0.x), which has no flags: a
 * tensor whose storage is mapped or borrowed is refused with TSTOR_EACCES,
 * since the consumer could not be told not to write. */
TSTOR_EXTERN int tstor_dlpack_export(const tstor_tensor *t, DLManagedTensor **out);

/* A tensor over the memory `m` describes, with its shape, strides and dtype,
 * on the matching device of ctx (NULL: the default context). On success the
 * tensor's storage owns m: m's deleter is called exactly once, when the last
 * reference to that storage goes. On failure *out is NULL and the caller
 * still owns m (its deleter not called). Negative strides are refused
 * (TSTOR_ENOTSUP). */
TSTOR_EXTERN int tstor_dlpack_import(tstor_context *ctx, DLManagedTensor *m, tstor_tensor **out);

/* The same for a DLManagedTensorVersioned of major version 1 (another major
 * is refused with TSTOR_ENOTSUP, naming both, before any other field is
 * read). READ_ONLY memory, which a tstor storage cannot keep from writes,
 * is copied into a new storage on the same device (refused with
 * TSTOR_EACCES under TSTOR_DLPACK_NO_COPY); TSTOR_DLPACK_COPY copies any.
 * Where a copy is made, m's deleter is called before this returns. On
 * failure the caller still owns m, as above. */
TSTOR_EXTERN int tstor_dlpack_import_versioned(tstor_context *ctx, DLManagedTensorVersioned *m,
                                               unsigned flags, tstor_tensor **out);

#ifdef __cplusplus
}
#endif

#endif /* TSTOR_DLPACK_H */
