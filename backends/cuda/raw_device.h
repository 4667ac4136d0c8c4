/* What the cuda backend's caching allocators need from a device: raw memory,
 * events and a way to wait. The module implements it over the CUDA runtime;
 * the tests implement it over malloc and simulated streams, so that the
 * caching logic runs and is tested on machines without a GPU. */
#ifndef TSTOR_CUDA_RAW_DEVICE_H
#define TSTOR_CUDA_RAW_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <tstor/tstor.h>

typedef struct tstor__raw_device {
  void *ctx; /* passed to every function below */

  /* Obtains nbytes (> 0) of memory into *out. TSTOR_ENOMEM when there is not
   * that much free (the cache may then free what it holds and retry); any
   * other code is a failure already described with set_error. */
  int (*alloc)(void *ctx, size_t nbytes, void **out);
  /* Gives back what alloc returned. May wait for the device. */
  void (*free)(void *ctx, void *ptr);
  /* The device's free and total bytes, for messages and the garbage
   * collection threshold. Optional (NULL): both then read as unknown. */
  int (*mem_info)(void *ctx, size_t *free_bytes, size_t *total_bytes);

  /* A new event that completes when the work queued so far on `stream` (NULL:
   * the default stream) has finished. *out is released with event_release. */
  int (*event_record)(void *ctx, void *stream, void **out);
  /* 0 when the event has completed, TSTOR_EAGAIN when not yet, another code
   * when the device failed (the caches then keep the memory: leaking beats
   * handing out bytes a kernel may still write). */
  int (*event_query)(void *ctx, void *event);
  int (*event_synchronize)(void *ctx, void *event);
  void (*event_release)(void *ctx, void *event);

  /* Waits until every stream of the device is idle. Optional for host memory
   * (NULL): the caches then wait on each event instead. */
  int (*synchronize)(void *ctx);

  /* Sets the calling thread's error detail and returns code (the registrar's
   * set_error). */
  int (*set_error)(int code, const char *fmt, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 2, 3)))
#endif
      ;
} tstor__raw_device;

/* Writes "1.50 GiB" for a byte count, for messages. Returns buf. */
static inline const char *tstor__format_bytes(char *buf, size_t size, uint64_t bytes) {
  static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    u++;
  }
  if (u == 0)
    snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
  else
    snprintf(buf, size, "%.2f %s", v, units[u]);
  return buf;
}

#endif
