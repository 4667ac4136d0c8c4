/* The device guard and CUDA error reporting: the lowest piece of the cuda
 * backend, which every other file uses and which uses none of them. Every op
 * makes its device current on entry and gives the caller's back on return;
 * every CUDA failure becomes a tstor code with CUDA's own words. */
#include <stdarg.h>
#include <stdio.h>

#include "cuda_backend.h"

/* ------------------------------------------------------------ the guard */

int tstor__cuda_enter(tstor__cuda *cu, int device, tstor__cuda_guard *g) {
  g->switched = 0;
  cudaError_t e = cudaGetDevice(&g->prev);
  if (e != cudaSuccess) return tstor__cuda_fail(cu, e, "cuda: cannot read the current device");
  if (g->prev == device) return 0;
  e = cudaSetDevice(device);
  if (e != cudaSuccess) return tstor__cuda_fail(cu, e, "cuda:%d: cannot select the device", device);
  g->switched = 1;
  return 0;
}

void tstor__cuda_leave(tstor__cuda *cu, tstor__cuda_guard *g) {
  if (!g->switched) return;
  /* A thread that never used CUDA reads device 0 as current without device 0
   * having a context. Selecting it back would create that context (hundreds
   * of MiB on the GPU) for nothing, so, as PyTorch does, we leave the thread
   * on our device when the caller's device has no context. */
  if (cu->primary_ctx_state) {
    unsigned flags = 0;
    int active = 1;
    if (cu->primary_ctx_state(g->prev, &flags, &active) == 0 && !active) return;
  }
  cudaSetDevice(g->prev);
}

/* --------------------------------------------------------------- errors */

int tstor__cuda_code(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return 0;
    case cudaErrorMemoryAllocation: return TSTOR_ENOMEM;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidMemcpyDirection: return TSTOR_EINVAL;
    case cudaErrorInvalidDevice:
    case cudaErrorNoDevice: return TSTOR_ENODEV;
    case cudaErrorNotReady: return TSTOR_EAGAIN;
    case cudaErrorNotSupported: return TSTOR_ENOTSUP;
    default: return TSTOR_EBACKEND;
  }
}

int tstor__cuda_fail(tstor__cuda *cu, cudaError_t e, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  cudaGetLastError(); /* a non-sticky error must not fail the thread's next call */
  return cu->reg->set_error(tstor__cuda_code(e), "%s: %s (%s)", what, cudaGetErrorString(e),
                            cudaGetErrorName(e));
}
