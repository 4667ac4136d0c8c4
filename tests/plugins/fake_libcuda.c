/* A stand-in for the CUDA driver (libcuda.so.1): just enough for the CUDA
 * runtime to read the driver's version and count devices, so that
 * test_cuda_module sees the cuda backend decline for a driver that is too old
 * and for a driver without devices, on machines without a GPU.
 *
 * The runtime finds every driver function through cuGetProcAddress_v2; the
 * ones not offered here it treats as absent.
 *   FAKE_DRIVER_VERSION  what cuDriverGetVersion reports (11040: CUDA 11.4)
 *   FAKE_NO_DEVICE       cuInit reports CUDA_ERROR_NO_DEVICE */
#include <string.h>

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_NOT_FOUND 500

static int fake_driver_get_version(int *version) {
  *version = FAKE_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

static int fake_init(unsigned flags) {
  (void)flags;
#ifdef FAKE_NO_DEVICE
  return CUDA_ERROR_NO_DEVICE;
#else
  return CUDA_SUCCESS;
#endif
}

static int fake_device_get_count(int *count) {
  *count = 0;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) int cuGetProcAddress_v2(const char *symbol, void **fn,
                                                               int version,
                                                               unsigned long long flags,
                                                               int *status) {
  (void)version;
  (void)flags;
  void *f = NULL;
  if (strcmp(symbol, "cuDriverGetVersion") == 0) f = (void *)fake_driver_get_version;
  if (strcmp(symbol, "cuInit") == 0) f = (void *)fake_init;
  if (strcmp(symbol, "cuDeviceGetCount") == 0) f = (void *)fake_device_get_count;
  if (strcmp(symbol, "cuGetProcAddress") == 0) f = (void *)cuGetProcAddress_v2;
  *fn = f;
  if (status) *status = f ? 0 : 1; /* CU_GET_PROC_ADDRESS_SUCCESS / _SYMBOL_NOT_FOUND */
  return f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
