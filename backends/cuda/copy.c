/* Copies, fills and dtype conversion of the cuda backend.
 *
 * With a stream the work is queued on it and the call returns; without one it
 * goes on the legacy default stream and is complete on return. A copy between
 * host and device memory is only truly asynchronous when the host side is
 * pinned, as in PyTorch: from pageable memory it is finished before return,
 * so the caller may reuse the host buffer at once. A pinned block of our own
 * allocator that an asynchronous copy uses is marked with an event, so that
 * the allocator does not hand it out again before the copy is done. */
#include <string.h>

#include "cuda_backend.h"
#include "kernels.h"

/* Whether host memory at p is page-locked, and whether our allocator owns it. */
static int host_is_pinned(tstor__cuda *cu, const void *p, size_t n, int *ours) {
  *ours = cu->pinned && tstor__hostcache_contains(cu->pinned, p, n);
  if (*ours) return 1;
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return a.type == cudaMemoryTypeHost;
}

/* Finishes a copy between host memory at `host` and the device, queued on s. */
static cudaError_t finish_host_copy(tstor__cuda *cu, const void *host, size_t n, void *stream,
                                    cudaStream_t s, int pinned, int ours) {
  if (!stream || !pinned) return cudaStreamSynchronize(s);
  if (ours && tstor__hostcache_record_use(cu->pinned, host, stream) != 0) {
    /* Without the event the block could be reused too early: wait instead. */
    return cudaStreamSynchronize(s);
  }
  (void)n;
  return cudaSuccess;
}

static int copy_host(tstor__cuda *cu, void *dst, const void *src, size_t n, int device,
                     void *stream, enum cudaMemcpyKind kind) {
  if (n == 0) return 0;
  const void *host = kind == cudaMemcpyHostToDevice ? src : dst;
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, tstor__cuda_stream_device(stream, device), &g);
  if (rc) return rc;
  cudaStream_t s = tstor__cuda_stream_of(stream);
  int ours = 0;
  int pinned = stream ? host_is_pinned(cu, host, n, &ours) : 0;
  cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, s);
  if (e == cudaSuccess) e = finish_host_copy(cu, host, n, stream, s, pinned, ours);
  tstor__cuda_leave(cu, &g);
  if (e != cudaSuccess)
    return tstor__cuda_fail(cu, e, "cuda:%d: copy of %zu bytes %s", device, n,
                            kind == cudaMemcpyHostToDevice ? "to the device" : "to the host");
  return 0;
}

int tstor__cuda_copy_h2d(void *state, void *dst, int dst_index, const void *src, int src_index,
                         size_t nbytes, void *stream) {
  (void)src_index;
  return copy_host(state, dst, src, nbytes, dst_index, stream, cudaMemcpyHostToDevice);
}

int tstor__cuda_copy_d2h(void *state, void *dst, int dst_index, const void *src, int src_index,
                         size_t nbytes, void *stream) {
  (void)dst_index;
  return copy_host(state, dst, src, nbytes, src_index, stream, cudaMemcpyDeviceToHost);
}

/* Enables direct access between two devices once, where the hardware allows
 * it; elsewhere cudaMemcpyPeer stages through host memory itself. */
static void enable_peer(tstor__cuda *cu, int a, int b) {
  pthread_mutex_lock(&cu->peer_lock);
  signed char *state = &cu->peer[a * cu->ndev + b];
  if (*state == 0) {
    int can_ab = 0, can_ba = 0;
    cudaDeviceCanAccessPeer(&can_ab, a, b);
    cudaDeviceCanAccessPeer(&can_ba, b, a);
    *state = -1;
    if (can_ab && can_ba) {
      tstor__cuda_guard g;
      if (tstor__cuda_enter(cu, a, &g) == 0) {
        cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
        tstor__cuda_leave(cu, &g);
        if (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled) *state = 1;
      }
      if (*state == 1 && tstor__cuda_enter(cu, b, &g) == 0) {
        cudaError_t e = cudaDeviceEnablePeerAccess(a, 0);
        tstor__cuda_leave(cu, &g);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) *state = -1;
      }
    }
    cu->peer[b * cu->ndev + a] = *state;
    cudaGetLastError();
  }
  pthread_mutex_unlock(&cu->peer_lock);
}

int tstor__cuda_copy_d2d(void *state, void *dst, int dst_index, const void *src, int src_index,
                         size_t nbytes, void *stream) {
  tstor__cuda *cu = state;
  if (nbytes == 0) return 0;
  if (src_index != dst_index) enable_peer(cu, dst_index, src_index);
  int device = tstor__cuda_stream_device(stream, dst_index);
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, device, &g);
  if (rc) return rc;
  cudaStream_t s = tstor__cuda_stream_of(stream);
  cudaError_t e = src_index == dst_index
                      ? cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, s)
                      : cudaMemcpyPeerAsync(dst, dst_index, src, src_index, nbytes, s);
  if (e == cudaSuccess && !stream) e = cudaStreamSynchronize(s);
  tstor__cuda_leave(cu, &g);
  if (e != cudaSuccess)
    return tstor__cuda_fail(cu, e, "cuda:%d -> cuda:%d: copy of %zu bytes", src_index,
                            dst_index, nbytes);
  return 0;
}

int tstor__cuda_fill(void *state, int index, void *ptr, size_t nbytes, const void *pattern,
                     size_t pattern_size, void *stream) {
  tstor__cuda *cu = state;
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8 &&
      pattern_size != 16)
    return cu->reg->set_error(TSTOR_EINVAL, "cuda:%d: fill pattern of %zu bytes (1, 2, 4, 8 or 16)",
                              index, pattern_size);
  if (nbytes % pattern_size)
    return cu->reg->set_error(TSTOR_ESIZE, "cuda:%d: fill of %zu bytes with a %zu-byte pattern",
                              index, nbytes, pattern_size);
  if (nbytes == 0) return 0;
  int device = tstor__cuda_stream_device(stream, index);
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, device, &g);
  if (rc) return rc;
  cudaStream_t s = tstor__cuda_stream_of(stream);
  const unsigned char *p = pattern;
  size_t same = 1;
  while (same < pattern_size && p[same] == p[0]) same++;
  /* A pattern of one repeated byte is a memset, which the copy engines do best. */
  cudaError_t e = same == pattern_size
                      ? cudaMemsetAsync(ptr, p[0], nbytes, s)
                      : (cudaError_t)tstor__cuda_launch_fill(ptr, nbytes, pattern, pattern_size, s);
  if (e == cudaSuccess && !stream) e = cudaStreamSynchronize(s);
  tstor__cuda_leave(cu, &g);
  if (e != cudaSuccess) return tstor__cuda_fail(cu, e, "cuda:%d: fill of %zu bytes", device, nbytes);
  return 0;
}

int tstor__cuda_convert(void *state, int index, void *dst, int dst_dtype, const void *src,
                        int src_dtype, size_t count, void *stream) {
  tstor__cuda *cu = state;
  if (count == 0) return 0;
  int device = tstor__cuda_stream_device(stream, index);
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, device, &g);
  if (rc) return rc;
  cudaStream_t s = tstor__cuda_stream_of(stream);
  int r = tstor__cuda_launch_convert(dst, dst_dtype, src, src_dtype, count, s);
  if (r < 0) {
    tstor__cuda_leave(cu, &g);
    return TSTOR_ENOTSUP; /* quantized or misaligned: the core converts on the host */
  }
  cudaError_t e = (cudaError_t)r;
  if (e == cudaSuccess && !stream) e = cudaStreamSynchronize(s);
  tstor__cuda_leave(cu, &g);
  if (e != cudaSuccess)
    return tstor__cuda_fail(cu, e, "cuda:%d: conversion of %zu elements (dtype %d to %d)",
                            device, count, src_dtype, dst_dtype);
  return 0;
}

int tstor__cuda_copy_strided(void *state, int index, void *dst, const int64_t *dst_strides,
                             const void *src, const int64_t *src_strides, const int64_t *sizes,
                             int ndim, size_t element_size, void *stream) {
  tstor__cuda *cu = state;
  if (ndim < 1 || ndim > TSTOR__CUDA_STRIDED_MAX_DIM) return TSTOR_ENOTSUP;
  tstor__cuda_strided a;
  a.ndim = ndim;
  for (int d = 0; d < ndim; d++) {
    a.sizes[d] = sizes[d];
    a.dst_strides[d] = dst_strides[d];
    a.src_strides[d] = src_strides[d];
  }
  int device = tstor__cuda_stream_device(stream, index);
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, device, &g);
  if (rc) return rc;
  cudaStream_t s = tstor__cuda_stream_of(stream);
  int r;
  if (ndim == 1 && dst_strides[0] == (int64_t)element_size &&
      src_strides[0] == (int64_t)element_size) /* one run: the copy engines beat any kernel */
    r = (int)cudaMemcpyAsync(dst, src, (size_t)sizes[0] * element_size, cudaMemcpyDeviceToDevice,
                             s);
  else
    r = tstor__cuda_launch_strided(dst, src, &a, element_size, s);
  if (r < 0) {
    tstor__cuda_leave(cu, &g);
    return TSTOR_ENOTSUP; /* the core stages through host memory */
  }
  cudaError_t e = (cudaError_t)r;
  if (e == cudaSuccess && !stream) e = cudaStreamSynchronize(s);
  tstor__cuda_leave(cu, &g);
  if (e != cudaSuccess)
    return tstor__cuda_fail(cu, e, "cuda:%d: strided copy of %d dimensions", device, ndim);
  return 0;
}
