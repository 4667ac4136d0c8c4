/* The cuda backend's entry point: reads [backend cuda], finds the driver and
 * the devices, and registers the "cuda" device type, the pinned host
 * allocator (for "cpu") and the copy kernels.
 *
 * The CUDA runtime is linked statically, so the module needs only the driver
 * (libcuda.so.1) at run time, and the runtime opens that itself. On a machine
 * without a usable GPU the module declines, saying why: no driver, a driver
 * too old for this runtime, or no device. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"

/* --------------------------------------------------------------- tables */

static int device_count(void *state) { return ((tstor__cuda *)state)->ndev; }

static const tstor_device_ops cuda_device_ops = {
    TSTOR_OPS_HEADER(tstor_device_ops),
    .type_name = "cuda",
    .flags = 0, /* device memory: the core goes through the kernels */
    .device_count = device_count,
    .allocator = &tstor__cuda_device_allocator,
    .fill = tstor__cuda_fill,
    .synchronize = tstor__cuda_synchronize,
    .stream_create = tstor__cuda_stream_create,
    .stream_destroy = tstor__cuda_stream_destroy,
    .stream_synchronize = tstor__cuda_stream_synchronize,
    .stream_wait_event = tstor__cuda_stream_wait_event,
    .event_create = tstor__cuda_event_create,
    .event_destroy = tstor__cuda_event_destroy,
    .event_record = tstor__cuda_event_record,
    .event_query = tstor__cuda_event_query,
    .event_synchronize = tstor__cuda_event_synchronize,
    .convert = tstor__cuda_convert,
    .copy_strided = tstor__cuda_copy_strided,
    .properties = tstor__cuda_properties, /* since 1.5 */
};

/* --------------------------------------------------------------- config */

/* A bad value, with the file and line where the core can give them (a core
 * older than the registrar's config_error cannot). */
static int config_error(const tstor_registrar *reg, tstor_module *m, const char *key,
                        const char *reason) {
  if (TSTOR_REGISTRAR_HAS(reg, config_error)) return reg->config_error(m, key, "%s", reason);
  return reg->set_error(TSTOR_ECONFIG, "[backend cuda] %s = '%s': %s", key,
                        reg->config_get(m, key), reason);
}

static int read_config(const tstor_registrar *reg, tstor_module *m, tstor__cuda_config *cfg) {
  int rc = reg->config_bool(m, "caching", 1, &cfg->caching);
  if (rc) return rc;
  rc = reg->config_int(m, "max_split_size_mb", 0, 0, (long long)1 << 40, &cfg->max_split_size_mb);
  if (rc) return rc;
  /* PyTorch's lower limit: a block under its large-buffer size is never split
   * in a way this key could change. */
  if (cfg->max_split_size_mb != 0 && cfg->max_split_size_mb <= 20)
    return config_error(reg, m, "max_split_size_mb", "use 0 (no limit) or a size above 20");
  rc = reg->config_int(m, "roundup_power2_divisions", 0, 0, 1024, &cfg->roundup_power2_divisions);
  if (rc) return rc;
  long long d = cfg->roundup_power2_divisions;
  if (d > 1 && (d & (d - 1)) != 0)
    return config_error(reg, m, "roundup_power2_divisions", "use a power of two (or 0 for none)");
  rc = reg->config_int(m, "max_devices", -1, 0, 1 << 20, &cfg->max_devices);
  if (rc) return rc;
  const char *gc = reg->config_get(m, "garbage_collection_threshold");
  cfg->gc_threshold = 0;
  if (gc) {
    char *end;
    errno = 0;
    /* Decimal digits and a point only: strtod alone would take "0x1p-1". */
    size_t plain = strspn(gc, "0123456789.");
    double v = strtod(gc, &end);
    if (gc[plain] != '\0' || end == gc || *end != '\0' || errno == ERANGE || !isfinite(v) ||
        v < 0 || v >= 1)
      return config_error(reg, m, "garbage_collection_threshold",
                          "expected a fraction from 0 (off) up to, not including, 1");
    cfg->gc_threshold = v;
  }
  return 0;
}

/* ------------------------------------------------------------ detection */

/* Counts the devices, or declines with the reason in msg. */
static int find_devices(tstor__cuda *cu, char *msg, size_t msg_size) {
  cudaDriverGetVersion(&cu->driver_version);
  cudaRuntimeGetVersion(&cu->runtime_version);
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  cudaGetLastError();
  int rt = cu->runtime_version, dv = cu->driver_version;
  switch (e) {
    case cudaSuccess: break;
    case cudaErrorInsufficientDriver:
      /* The runtime reports a missing libcuda.so.1 as an insufficient driver
       * of version 0. */
      if (dv == 0)
        snprintf(msg, msg_size, "no CUDA driver (libcuda.so.1 not found or not loadable)");
      else
        snprintf(msg, msg_size,
                 "CUDA driver too old: it supports CUDA %d.%d, this module needs %d.%d or newer",
                 dv / 1000, dv % 1000 / 10, rt / 1000, rt % 1000 / 10);
      return TSTOR_EDECLINED;
    case cudaErrorStubLibrary:
      snprintf(msg, msg_size,
               "no CUDA driver (only the toolkit's stub libcuda.so was found, not a driver)");
      return TSTOR_EDECLINED;
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      snprintf(msg, msg_size, "CUDA driver unusable for CUDA %d.%d: %s", rt / 1000,
               rt % 1000 / 10, cudaGetErrorString(e));
      return TSTOR_EDECLINED;
    case cudaErrorNoDevice:
      n = 0;
      break;
    case cudaErrorDevicesUnavailable:
      snprintf(msg, msg_size, "CUDA devices unavailable (busy or prohibited compute mode)");
      return TSTOR_EDECLINED;
    default:
      snprintf(msg, msg_size, "cannot count CUDA devices: %s (%s)", cudaGetErrorString(e),
               cudaGetErrorName(e));
      return TSTOR_EBACKEND;
  }
  if (n <= 0) {
    snprintf(msg, msg_size, "no CUDA device (driver for CUDA %d.%d present)", dv / 1000,
             dv % 1000 / 10);
    return TSTOR_EDECLINED;
  }
  cu->ndev = cu->config.max_devices >= 0 && cu->config.max_devices < n
                 ? (int)cu->config.max_devices
                 : n;
  return 0;
}

/* cuDevicePrimaryCtxGetState, through the runtime (this module does not link
 * the driver API). Without it the guard always restores. */
static void find_driver_entries(tstor__cuda *cu) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult status;
  if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000,
                                       cudaEnableDefault, &status) == cudaSuccess &&
      status == cudaDriverEntryPointSuccess && fn)
    memcpy(&cu->primary_ctx_state, &fn, sizeof fn);
  cudaGetLastError();
}

/* ------------------------------------------------------------ lifecycle */

static void cuda_fini(void *state) {
  tstor__cuda *cu = state;
  if (!cu) return;
  tstor__cuda_allocators_close(cu);
  pthread_mutex_destroy(&cu->peer_lock);
  free(cu->peer);
  free(cu);
}

static int cuda_init(const tstor_registrar *reg, tstor_module *m, void **module_state,
                     char *msg, size_t msg_size) {
  *module_state = NULL;
  /* Config first: a bad key is reported the same with or without a GPU. */
  tstor__cuda_config cfg;
  int rc = read_config(reg, m, &cfg);
  if (rc) return rc;
  if (cfg.max_devices == 0) {
    snprintf(msg, msg_size, "no CUDA device used: max_devices = 0");
    return TSTOR_EDECLINED;
  }

  tstor__cuda *cu = calloc(1, sizeof *cu);
  if (!cu) {
    snprintf(msg, msg_size, "out of memory");
    return TSTOR_ENOMEM;
  }
  cu->reg = reg;
  cu->module = m;
  cu->config = cfg;
  if (pthread_mutex_init(&cu->peer_lock, NULL) != 0) {
    free(cu);
    snprintf(msg, msg_size, "cannot initialise a lock");
    return TSTOR_ENOMEM;
  }
  rc = find_devices(cu, msg, msg_size);
  if (rc) {
    cuda_fini(cu);
    return rc;
  }
  find_driver_entries(cu);
  cu->peer = calloc((size_t)cu->ndev * (size_t)cu->ndev, 1);
  if (!cu->peer) {
    cuda_fini(cu);
    snprintf(msg, msg_size, "out of memory");
    return TSTOR_ENOMEM;
  }
  rc = tstor__cuda_allocators_open(cu, 1);
  if (rc) {
    snprintf(msg, msg_size, "cannot set up the allocators (error %d)", rc);
    cuda_fini(cu);
    return rc;
  }
  rc = reg->register_device_type(m, &cuda_device_ops, cu);
  if (rc == 0) {
    int prc = reg->register_allocator(m, "cpu", &tstor__cuda_pinned_allocator, cu);
    if (prc)
      reg->log(m, TSTOR_LOG_WARN,
               "no pinned host memory: cannot register it for the cpu device type "
               "(list the cpu backend before cuda)");
  }
  if (rc == 0) rc = reg->register_copy(m, "cpu", "cuda", tstor__cuda_copy_h2d, cu);
  if (rc == 0) rc = reg->register_copy(m, "cuda", "cpu", tstor__cuda_copy_d2h, cu);
  if (rc == 0) rc = reg->register_copy(m, "cuda", "cuda", tstor__cuda_copy_d2d, cu);
  if (rc) {
    snprintf(msg, msg_size,
             "cannot register with the core (error %d%s)", rc,
             rc == TSTOR_EEXIST ? ": another backend has registered \"cuda\" already" : "");
    cuda_fini(cu);
    return rc;
  }
  reg->log(m, TSTOR_LOG_INFO, "%d CUDA device(s); driver for CUDA %d.%d, runtime %d.%d%s",
           cu->ndev, cu->driver_version / 1000, cu->driver_version % 1000 / 10,
           cu->runtime_version / 1000, cu->runtime_version % 1000 / 10,
           cfg.caching ? "" : "; caching allocator off");
  *module_state = cu;
  return 0;
}

TSTOR_BACKEND_DEFINE(cuda_init, cuda_fini);
