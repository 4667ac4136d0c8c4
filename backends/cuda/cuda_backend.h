/* Internals shared by the cuda backend's files: the module state, the device
 * guard, CUDA error reporting and the ops each file provides. Never installed;
 * names carry tstor__cuda. The module sees the core only through backend.h.
 *
 * The files. A file calls (or takes the address of) functions of its own
 * layer and the layers above it only, never of a later one, so no two files
 * call each other round in a circle (tests/layering.py checks this in make
 * check); the sections below follow the same order:
 *
 * layer 1: treap.c
 * layer 2: block_cache.c host_cache.c
 * layer 3: guard.c
 * layer 4: alloc.c
 * layer 5: stream.c
 * layer 6: copy.c
 * layer 7: module.c
 *
 *   treap.c, block_cache.c, host_cache.c
 *               the caching allocators, over raw_device.h: no CUDA in them
 *   guard.c     the device guard; CUDA errors as tstor codes and messages
 *   alloc.c     the device and pinned allocators over the caches; pooled events
 *   stream.c    streams and events
 *   copy.c      copies, fills and conversions, launching kernels.cu's kernels
 *               (kernels.h; built by nvcc, calls none of these files)
 *   module.c    entry point: config, driver and devices, the op tables */
#ifndef TSTOR_CUDA_BACKEND_H
#define TSTOR_CUDA_BACKEND_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <tstor/backend.h>

#include "block_cache.h"
#include "host_cache.h"

#if defined(__GNUC__)
#define TSTOR__CUDA_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TSTOR__CUDA_PRINTF(f, a)
#endif

typedef struct tstor__cuda tstor__cuda;

/* A stream handed to the core: the CUDA stream and the device it belongs to. */
typedef struct tstor__cuda_stream {
  cudaStream_t stream;
  int device;
} tstor__cuda_stream;

/* An event handed to the core, or used inside the allocators (those are pooled
 * per device: creating an event costs more than recording one). */
typedef struct tstor__cuda_event {
  cudaEvent_t event;
  int device;
  struct tstor__cuda_event *next_idle;
} tstor__cuda_event;

typedef struct tstor__cuda_device {
  tstor__cuda *cuda;
  int index;
  char name[16]; /* "cuda:0" */
  tstor__cache *cache;
  pthread_mutex_t events_lock;
  tstor__cuda_event *idle_events;
} tstor__cuda_device;

/* The allocator settings of [backend cuda]; see docs/cuda.md. */
typedef struct tstor__cuda_config {
  int caching;
  long long max_split_size_mb; /* 0: no limit */
  double gc_threshold;         /* 0: off */
  long long roundup_power2_divisions;
  long long max_devices; /* -1: every device */
} tstor__cuda_config;

typedef int (*tstor__cuda_primary_ctx_state_fn)(int device, unsigned *flags, int *active);

struct tstor__cuda {
  const tstor_registrar *reg;
  tstor_module *module;
  tstor__cuda_config config;
  int ndev;
  int driver_version, runtime_version;
  tstor__cuda_device *devices;
  tstor__hostcache *pinned; /* NULL when no cpu device type was registered */
  pthread_mutex_t peer_lock;
  signed char *peer; /* ndev * ndev: 0 not tried, 1 enabled, -1 not possible */
  /* cuDevicePrimaryCtxGetState from the driver, or NULL (see tstor__cuda_leave). */
  tstor__cuda_primary_ctx_state_fn primary_ctx_state;
};

/* ----------------------------------------------------------------- guard.c */

/* Every op makes its device current and gives the caller's back on return. */
typedef struct tstor__cuda_guard {
  int prev;
  int switched;
} tstor__cuda_guard;

int tstor__cuda_enter(tstor__cuda *cu, int device, tstor__cuda_guard *g);
void tstor__cuda_leave(tstor__cuda *cu, tstor__cuda_guard *g);

/* CUDA errors (guard.c). */

/* The tstor code for a CUDA error. */
int tstor__cuda_code(cudaError_t e);
/* Clears CUDA's last error (a failed call leaves it set for the thread),
 * describes the failure as "WHAT: CUDA's message (cudaErrorName)" and returns
 * the matching tstor code. */
int tstor__cuda_fail(tstor__cuda *cu, cudaError_t e, const char *fmt, ...)
    TSTOR__CUDA_PRINTF(3, 4);

/* The device a stream handle belongs to (NULL: `fallback`'s default stream). */
static inline int tstor__cuda_stream_device(void *stream, int fallback) {
  return stream ? ((tstor__cuda_stream *)stream)->device : fallback;
}
static inline cudaStream_t tstor__cuda_stream_of(void *stream) {
  return stream ? ((tstor__cuda_stream *)stream)->stream : (cudaStream_t)0;
}

/* -------------------------------------------------------- alloc.c */

extern const tstor_allocator_ops tstor__cuda_device_allocator;
extern const tstor_allocator_ops tstor__cuda_pinned_allocator;
/* Creates each device's cache and the pinned cache. On failure everything made
 * so far stays for tstor__cuda_allocators_close to free. */
int tstor__cuda_allocators_open(tstor__cuda *cu, int with_pinned);
void tstor__cuda_allocators_close(tstor__cuda *cu);
/* A pooled event recorded on `stream` (NULL: the default stream of device
 * `device`), and its return to the pool. */
int tstor__cuda_event_record_pooled(tstor__cuda *cu, int device, void *stream,
                                    tstor__cuda_event **out);
void tstor__cuda_event_release_pooled(tstor__cuda *cu, tstor__cuda_event *ev);
/* The device ops' properties (since ABI 1.5). */
int tstor__cuda_properties(void *state, int index, tstor_device_properties *out);

/* --------------------------------------------------------- stream.c */

int tstor__cuda_synchronize(void *state, int index);
int tstor__cuda_stream_create(void *state, int index, void **out);
void tstor__cuda_stream_destroy(void *state, int index, void *stream);
int tstor__cuda_stream_synchronize(void *state, int index, void *stream);
int tstor__cuda_stream_wait_event(void *state, int index, void *stream, void *event);
int tstor__cuda_event_create(void *state, int index, void **out);
void tstor__cuda_event_destroy(void *state, int index, void *event);
int tstor__cuda_event_record(void *state, int index, void *event, void *stream);
int tstor__cuda_event_query(void *state, int index, void *event);
int tstor__cuda_event_synchronize(void *state, int index, void *event);

/* ----------------------------------------------------------- copy.c */

int tstor__cuda_copy_h2d(void *state, void *dst, int dst_index, const void *src, int src_index,
                         size_t nbytes, void *stream);
int tstor__cuda_copy_d2h(void *state, void *dst, int dst_index, const void *src, int src_index,
                         size_t nbytes, void *stream);
int tstor__cuda_copy_d2d(void *state, void *dst, int dst_index, const void *src, int src_index,
                         size_t nbytes, void *stream);
int tstor__cuda_fill(void *state, int index, void *ptr, size_t nbytes, const void *pattern,
                     size_t pattern_size, void *stream);
/* The device ops' copy_strided (backend.h): one kernel launch. */
int tstor__cuda_copy_strided(void *state, int index, void *dst, const int64_t *dst_strides,
                             const void *src, const int64_t *src_strides, const int64_t *sizes,
                             int ndim, size_t element_size, void *stream);
int tstor__cuda_convert(void *state, int index, void *dst, int dst_dtype, const void *src,
                        int src_dtype, size_t count, void *stream);

#endif
