/* Device kernels of the cuda backend (kernels.cu, built by nvcc), called from
 * the C host code. Each launches asynchronously on `stream` and returns a
 * cudaError_t as int: cudaSuccess once the launch is queued. */
#ifndef TSTOR_CUDA_KERNELS_H
#define TSTOR_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fills nbytes at ptr with copies of the pattern_size bytes at pattern (1, 2,
 * 4, 8 or 16; nbytes a multiple of it). Any alignment of ptr. The pattern is
 * read on the host before return. */
int tstor__cuda_launch_fill(void *ptr, size_t nbytes, const void *pattern,
                            size_t pattern_size, cudaStream_t stream);

/* Converts count elements at src (tstor_dtype src_dtype) into dst (dst_dtype)
 * exactly as tstor_dtype_convert does on the host. -1 when the kernels do not
 * handle the pair (quantized dtypes) or a pointer is not aligned for its
 * dtype; nothing is queued then. */
int tstor__cuda_launch_convert(void *dst, int dst_dtype, const void *src, int src_dtype,
                               size_t count, cudaStream_t stream);

/* A strided block of up to 8 dimensions (the core merges dimensions that are
 * contiguous together first, so more are rare): element (i0, ..) of `sizes`
 * at dst + sum(i_k * dst_strides[k]) and src + sum(i_k * src_strides[k]),
 * strides in bytes. */
#define TSTOR__CUDA_STRIDED_MAX_DIM 8
typedef struct tstor__cuda_strided {
  int ndim;
  long long sizes[TSTOR__CUDA_STRIDED_MAX_DIM];
  long long dst_strides[TSTOR__CUDA_STRIDED_MAX_DIM];
  long long src_strides[TSTOR__CUDA_STRIDED_MAX_DIM];
} tstor__cuda_strided;

/* Copies the block's elements of element_size bytes (1, 2, 4, 8 or 16),
 * unchanged. -1 when the kernel does not handle it (more dimensions, another
 * element size, addresses not aligned for the element); nothing is queued
 * then. */
int tstor__cuda_launch_strided(void *dst, const void *src, const tstor__cuda_strided *a,
                               size_t element_size, cudaStream_t stream);

#ifdef TSTOR_CUDA_EMULATE
int tstor__cuda_emulate_strided(void *dst, const void *src, const tstor__cuda_strided *a,
                                size_t element_size);
/* The same kernel bodies run in a loop on the host, for test_cuda_kernels:
 * cudaSuccess (0) or -1 as above. Built only with TSTOR_CUDA_EMULATE. */
int tstor__cuda_emulate_convert(void *dst, int dst_dtype, const void *src, int src_dtype,
                                size_t count);
void tstor__cuda_emulate_fill(void *ptr, size_t nbytes, const void *pattern,
                              size_t pattern_size);
#endif

#ifdef __cplusplus
}
#endif

#endif
