/* The cuda backend's allocators: the device caching allocator (one
 * block_cache per device) and the pinned host allocator (one host_cache),
 * each over a tstor__raw_device made of CUDA runtime calls, and the allocator
 * tables the core calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_backend.h"

/* ------------------------------------------------------- pooled events */

int tstor__cuda_event_record_pooled(tstor__cuda *cu, int device, void *stream,
                                    tstor__cuda_event **out) {
  int dev_index = tstor__cuda_stream_device(stream, device);
  tstor__cuda_device *d = &cu->devices[dev_index];
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, dev_index, &g);
  if (rc) return rc;
  pthread_mutex_lock(&d->events_lock);
  tstor__cuda_event *ev = d->idle_events;
  if (ev) d->idle_events = ev->next_idle;
  pthread_mutex_unlock(&d->events_lock);
  if (!ev) {
    ev = calloc(1, sizeof *ev);
    if (!ev) {
      tstor__cuda_leave(cu, &g);
      return cu->reg->set_error(TSTOR_ENOMEM, "%s: no memory for an event", d->name);
    }
    cudaError_t e = cudaEventCreateWithFlags(&ev->event, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      free(ev);
      tstor__cuda_leave(cu, &g);
      return tstor__cuda_fail(cu, e, "%s: cannot create an event", d->name);
    }
    ev->device = dev_index;
  }
  cudaError_t e = cudaEventRecord(ev->event, tstor__cuda_stream_of(stream));
  tstor__cuda_leave(cu, &g);
  if (e != cudaSuccess) {
    rc = tstor__cuda_fail(cu, e, "%s: cannot record an event", d->name);
    tstor__cuda_event_release_pooled(cu, ev);
    return rc;
  }
  *out = ev;
  return 0;
}

void tstor__cuda_event_release_pooled(tstor__cuda *cu, tstor__cuda_event *ev) {
  tstor__cuda_device *d = &cu->devices[ev->device];
  pthread_mutex_lock(&d->events_lock);
  ev->next_idle = d->idle_events;
  d->idle_events = ev;
  pthread_mutex_unlock(&d->events_lock);
}

/* Event functions of both raw devices. The context is the device for the
 * device caches and the module for the pinned cache, whose events always come
 * with a stream. */
static int record_on(tstor__cuda *cu, int device, void *stream, void **out) {
  tstor__cuda_event *ev;
  int rc = tstor__cuda_event_record_pooled(cu, device, stream, &ev);
  if (rc == 0) *out = ev;
  return rc;
}

static int query(tstor__cuda *cu, void *event) {
  tstor__cuda_event *ev = event;
  cudaError_t e = cudaEventQuery(ev->event);
  if (e == cudaSuccess) return 0;
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return TSTOR_EAGAIN;
  }
  return tstor__cuda_fail(cu, e, "cuda:%d: event query failed", ev->device);
}

static int wait_for(tstor__cuda *cu, void *event) {
  tstor__cuda_event *ev = event;
  cudaError_t e = cudaEventSynchronize(ev->event);
  return e == cudaSuccess ? 0 : tstor__cuda_fail(cu, e, "cuda:%d: event wait failed", ev->device);
}

/* ----------------------------------------------- raw device: GPU memory */

/* The block cache calls these with the device already current. */

static int dev_alloc(void *ctx, size_t n, void **out) {
  tstor__cuda_device *d = ctx;
  cudaError_t e = cudaMalloc(out, n);
  if (e == cudaSuccess) return 0;
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return TSTOR_ENOMEM; /* the cache explains it, after retrying */
  }
  return tstor__cuda_fail(d->cuda, e, "%s: cudaMalloc of %zu bytes failed", d->name, n);
}

static void dev_free(void *ctx, void *ptr) {
  (void)ctx;
  if (cudaFree(ptr) != cudaSuccess) cudaGetLastError();
}

static int dev_mem_info(void *ctx, size_t *free_b, size_t *total_b) {
  tstor__cuda_device *d = ctx;
  cudaError_t e = cudaMemGetInfo(free_b, total_b);
  return e == cudaSuccess ? 0 : tstor__cuda_fail(d->cuda, e, "%s: cudaMemGetInfo", d->name);
}

/* What a device has (backend.h's properties op): cudaMemGetInfo's free and
 * total, as torch.cuda.mem_get_info gives them (blocks this backend caches
 * count as used), cudaMalloc's alignment, and the PCI bus id. */
int tstor__cuda_properties(void *state, int index, tstor_device_properties *out) {
  tstor__cuda *cu = state;
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, index, &g);
  if (rc) return rc;
  size_t free_b = 0, total_b = 0;
  char bus[sizeof out->id] = "";
  cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
  cudaError_t e_bus = cudaDeviceGetPCIBusId(bus, (int)sizeof bus, index);
  tstor__cuda_leave(cu, &g);
  if (e != cudaSuccess) return tstor__cuda_fail(cu, e, "cuda:%d: cudaMemGetInfo", index);
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, free_bytes)) {
    out->free_bytes = free_b;
    out->reported |= TSTOR_PROP_FREE;
  }
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, total_bytes)) {
    out->total_bytes = total_b;
    out->reported |= TSTOR_PROP_TOTAL;
  }
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, alignment)) {
    out->alignment = 256; /* what cudaMalloc promises; the cache splits at 512 */
    out->reported |= TSTOR_PROP_ALIGNMENT;
  }
  if (e_bus == cudaSuccess && TSTOR_DEVICE_PROPERTIES_HAS(out, id)) {
    snprintf(out->id, sizeof out->id, "%s", bus);
    out->reported |= TSTOR_PROP_ID;
  } else if (e_bus != cudaSuccess) {
    cudaGetLastError(); /* the id is optional: clear the error it left */
  }
  return 0;
}

static int dev_event_record(void *ctx, void *stream, void **out) {
  tstor__cuda_device *d = ctx;
  return record_on(d->cuda, d->index, stream, out);
}
static int dev_event_query(void *ctx, void *ev) {
  return query(((tstor__cuda_device *)ctx)->cuda, ev);
}
static int dev_event_synchronize(void *ctx, void *ev) {
  return wait_for(((tstor__cuda_device *)ctx)->cuda, ev);
}
static void dev_event_release(void *ctx, void *ev) {
  tstor__cuda_event_release_pooled(((tstor__cuda_device *)ctx)->cuda, ev);
}

static int dev_synchronize(void *ctx) {
  tstor__cuda_device *d = ctx;
  cudaError_t e = cudaDeviceSynchronize();
  return e == cudaSuccess ? 0 : tstor__cuda_fail(d->cuda, e, "%s: synchronize", d->name);
}

/* --------------------------------------------- raw device: pinned memory */

static int host_alloc(void *ctx, size_t n, void **out) {
  tstor__cuda *cu = ctx;
  /* Portable: usable by copies on every device, not just the current one. */
  cudaError_t e = cudaHostAlloc(out, n, cudaHostAllocPortable);
  if (e == cudaSuccess) return 0;
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return TSTOR_ENOMEM;
  }
  return tstor__cuda_fail(cu, e, "cuda-pinned: cudaHostAlloc of %zu bytes failed", n);
}

static void host_free(void *ctx, void *ptr) {
  (void)ctx;
  if (cudaFreeHost(ptr) != cudaSuccess) cudaGetLastError();
}

static int host_mem_info(void *ctx, size_t *free_b, size_t *total_b) {
  (void)ctx;
  long page = sysconf(_SC_PAGESIZE), avail = sysconf(_SC_AVPHYS_PAGES),
       total = sysconf(_SC_PHYS_PAGES);
  if (page <= 0 || avail < 0 || total <= 0) return TSTOR_ENOTSUP;
  *free_b = (size_t)avail * (size_t)page;
  *total_b = (size_t)total * (size_t)page;
  return 0;
}

static int host_event_record(void *ctx, void *stream, void **out) {
  int current = 0;
  if (!stream && cudaGetDevice(&current) != cudaSuccess) cudaGetLastError();
  return record_on(ctx, current, stream, out);
}
static int host_event_query(void *ctx, void *ev) { return query(ctx, ev); }
static int host_event_synchronize(void *ctx, void *ev) { return wait_for(ctx, ev); }
static void host_event_release(void *ctx, void *ev) {
  tstor__cuda_event_release_pooled(ctx, ev);
}

/* ------------------------------------------------------ allocator tables */

static int check_index(tstor__cuda *cu, int index, void *stream) {
  if (index < 0 || index >= cu->ndev)
    return cu->reg->set_error(TSTOR_ENODEV, "cuda:%d: no such device (%d present)", index,
                              cu->ndev);
  if (stream && ((tstor__cuda_stream *)stream)->device != index)
    return cu->reg->set_error(TSTOR_EINVAL, "cuda:%d: the stream belongs to cuda:%d", index,
                              ((tstor__cuda_stream *)stream)->device);
  return 0;
}

static int device_allocate(void *state, int index, size_t nbytes, void *stream,
                           tstor_block *out) {
  tstor__cuda *cu = state;
  out->ptr = out->alloc_ctx = NULL;
  int rc = check_index(cu, index, stream);
  if (rc || nbytes == 0) return rc;
  tstor__cuda_guard g;
  if ((rc = tstor__cuda_enter(cu, index, &g))) return rc;
  rc = tstor__cache_alloc(cu->devices[index].cache, nbytes, stream, &out->ptr, &out->alloc_ctx);
  tstor__cuda_leave(cu, &g);
  return rc;
}

static void device_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  tstor__cuda *cu = state;
  if (!ptr) return;
  tstor__cuda_guard g;
  int rc = tstor__cuda_enter(cu, index, &g);
  tstor__cache_free(cu->devices[index].cache, ptr, nbytes, alloc_ctx);
  if (rc == 0) tstor__cuda_leave(cu, &g);
}

static int device_record_stream(void *state, int index, void *ptr, void *alloc_ctx,
                                 void *stream) {
  tstor__cuda *cu = state;
  (void)ptr;
  if (index < 0 || index >= cu->ndev) return check_index(cu, index, NULL);
  return tstor__cache_record_stream(cu->devices[index].cache, alloc_ctx, stream);
}

static int device_stats(void *state, int index, tstor_stats *out) {
  tstor__cuda *cu = state;
  int rc = check_index(cu, index, NULL);
  if (rc == 0) tstor__cache_stats(cu->devices[index].cache, out);
  return rc;
}

static int device_reset_peak(void *state, int index) {
  tstor__cuda *cu = state;
  int rc = check_index(cu, index, NULL);
  if (rc == 0) tstor__cache_reset_peak(cu->devices[index].cache);
  return rc;
}

static int device_empty_cache(void *state, int index) {
  tstor__cuda *cu = state;
  int rc = check_index(cu, index, NULL);
  if (rc) return rc;
  tstor__cuda_guard g;
  if ((rc = tstor__cuda_enter(cu, index, &g))) return rc;
  rc = tstor__cache_empty(cu->devices[index].cache);
  tstor__cuda_leave(cu, &g);
  return rc;
}

const tstor_allocator_ops tstor__cuda_device_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops),
    .name = "cuda",
    .flags = 0,
    .allocate = device_allocate,
    .free = device_free,
    .reallocate = NULL, /* the core allocates, copies and frees */
    .record_stream = device_record_stream,
    .stats = device_stats,
    .reset_peak = device_reset_peak,
    .empty_cache = device_empty_cache,
};

static int pinned_allocate(void *state, int index, size_t nbytes, void *stream,
                           tstor_block *out) {
  tstor__cuda *cu = state;
  (void)index;
  (void)stream;
  out->ptr = out->alloc_ctx = NULL;
  return tstor__hostcache_alloc(cu->pinned, nbytes, &out->ptr, &out->alloc_ctx);
}

static void pinned_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  tstor__cuda *cu = state;
  (void)index;
  (void)nbytes;
  tstor__hostcache_free(cu->pinned, ptr, alloc_ctx);
}

static int pinned_record_stream(void *state, int index, void *ptr, void *alloc_ctx,
                                void *stream) {
  tstor__cuda *cu = state;
  (void)index;
  (void)alloc_ctx;
  return tstor__hostcache_record_use(cu->pinned, ptr, stream);
}

static int pinned_stats(void *state, int index, tstor_stats *out) {
  (void)index;
  tstor__hostcache_stats(((tstor__cuda *)state)->pinned, out);
  return 0;
}

static int pinned_reset_peak(void *state, int index) {
  (void)index;
  tstor__hostcache_reset_peak(((tstor__cuda *)state)->pinned);
  return 0;
}

static int pinned_empty_cache(void *state, int index) {
  (void)index;
  return tstor__hostcache_empty(((tstor__cuda *)state)->pinned);
}

const tstor_allocator_ops tstor__cuda_pinned_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops),
    .name = "cuda-pinned",
    .flags = TSTOR_ALLOC_PINNED,
    .allocate = pinned_allocate,
    .free = pinned_free,
    .reallocate = NULL,
    .record_stream = pinned_record_stream,
    .stats = pinned_stats,
    .reset_peak = pinned_reset_peak,
    .empty_cache = pinned_empty_cache,
};

/* ------------------------------------------------------------ lifecycle */

int tstor__cuda_allocators_open(tstor__cuda *cu, int with_pinned) {
  const tstor__cuda_config *cfg = &cu->config;
  cu->devices = calloc((size_t)cu->ndev, sizeof *cu->devices);
  if (!cu->devices) return cu->reg->set_error(TSTOR_ENOMEM, "cuda: out of memory");
  for (int i = 0; i < cu->ndev; i++) {
    tstor__cuda_device *d = &cu->devices[i];
    d->index = i;
    snprintf(d->name, sizeof d->name, "cuda:%d", i);
    if (pthread_mutex_init(&d->events_lock, NULL) != 0)
      return cu->reg->set_error(TSTOR_ENOMEM, "%s: cannot initialise a lock", d->name);
    d->cuda = cu; /* from here on, close undoes what is done */
    tstor__raw_device raw = {d,
                             dev_alloc,
                             dev_free,
                             dev_mem_info,
                             dev_event_record,
                             dev_event_query,
                             dev_event_synchronize,
                             dev_event_release,
                             dev_synchronize,
                             cu->reg->set_error};
    tstor__cache_config cc = {
        d->name, cfg->caching,
        cfg->max_split_size_mb ? (size_t)cfg->max_split_size_mb << 20 : SIZE_MAX,
        cfg->gc_threshold, (unsigned)cfg->roundup_power2_divisions};
    int rc = tstor__cache_create(&raw, &cc, &d->cache);
    if (rc) return rc;
  }
  if (with_pinned) {
    tstor__raw_device raw = {cu,
                             host_alloc,
                             host_free,
                             host_mem_info,
                             host_event_record,
                             host_event_query,
                             host_event_synchronize,
                             host_event_release,
                             NULL,
                             cu->reg->set_error};
    int rc = tstor__hostcache_create(&raw, "cuda-pinned", cfg->caching, &cu->pinned);
    if (rc) return rc;
  }
  return 0;
}

void tstor__cuda_allocators_close(tstor__cuda *cu) {
  tstor__hostcache_destroy(cu->pinned);
  cu->pinned = NULL;
  if (!cu->devices) return;
  for (int i = 0; i < cu->ndev; i++) {
    tstor__cuda_device *d = &cu->devices[i];
    if (!d->cuda) continue; /* never opened */
    tstor__cuda_guard g;
    int entered = tstor__cuda_enter(cu, i, &g) == 0;
    tstor__cache_destroy(d->cache);
    while (d->idle_events) {
      tstor__cuda_event *ev = d->idle_events;
      d->idle_events = ev->next_idle;
      cudaEventDestroy(ev->event);
      free(ev);
    }
    if (entered) tstor__cuda_leave(cu, &g);
    pthread_mutex_destroy(&d->events_lock);
  }
  cudaGetLastError();
  free(cu->devices);
  cu->devices = NULL;
}
