/* tstor/dlpack.h: tensors to and from DLPack (0.6, the ABI of Debian's
 * libdlpack-dev, which numpy 1.24 and PyTorch 1.13 speak), without copying.
 * Part of libtstor-io (pkg-config tstor-io).
 *
 * Devices: cpu <-> kDLCPU, cuda:N <-> kDLCUDA N, pinned host memory ->
 * kDLCUDAHost (imported as cpu), a third-party backend's device -> kDLExtDev
 * with its index (imported when exactly one such device type is registered).
 * meta tensors have no data and are refused. Dtypes: the integers (uint16,
 * uint32 and uint64 too, kDLUInt), float16/32/64, bfloat16, complex32/64/128.
 * bool, the quantized and float8 dtypes (e8m0 included) and float4_e2m1fn_x2
 * have no DLPack 0.6 code and are refused with TSTOR_ENOTSUP.
 */
#ifndef TSTOR_DLPACK_H
#define TSTOR_DLPACK_H

#include <dlpack/dlpack.h>
#include <tstor/tensor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A DLManagedTensor viewing t's elements (data is the address of element 0,
 * byte_offset 0; shape and strides as t's). It holds a reference on t, so
 * the storage lives until the consumer calls its deleter, exactly once,
 * which frees it. *out is owned by the consumer from then on; t stays the
 * caller's. */
TSTOR_EXTERN int tstor_dlpack_export(const tstor_tensor *t, DLManagedTensor **out);

/* A tensor over the memory `m` describes, with its shape, strides and dtype,
 * on the matching device of ctx (NULL: the default context). On success the
 * tensor's storage owns m: m's deleter is called exactly once, when the last
 * reference to that storage goes. On failure *out is NULL and the caller
 * still owns m (its deleter not called). Negative strides are refused
 * (TSTOR_ENOTSUP). */
TSTOR_EXTERN int tstor_dlpack_import(tstor_context *ctx, DLManagedTensor *m, tstor_tensor **out);

#ifdef __cplusplus
}
#endif

#endif /* TSTOR_DLPACK_H */
