/* The cpu backend's per-thread block cache and allocation counters.
 *
 * Host blocks are 64-byte aligned. Requests up to CPU_CACHE_MAX_BLOCK bytes are
 * rounded up to a size class (multiples of 64 up to 256 bytes, then four
 * classes per power of two), and a freed block of a class goes onto the freeing
 * thread's list for that class, bounded in blocks per class and in bytes per
 * thread; the next request of the same class on that thread takes it back
 * without a trip to the C library. Larger requests are large blocks (large.h):
 * whole huge pages from 2 MiB, kept in a cache of the context's shared by its
 * threads.
 *
 * The thread lists are process-wide: every context that loaded this module
 * shares them, so a block released through one context may serve another. Each
 * context holds a cpu_cache handle, which carries its settings and its
 * statistics. The counters behind those statistics are per thread and summed
 * when read, so the allocation path does no atomic read-modify-write.
 *
 * Lifetime: the first cpu_cache_open of the process sets up a thread key; a
 * thread that exits gives its blocks back through the key's destructor; the
 * last cpu_cache_close deletes the key and frees every thread's blocks, so no
 * destructor can run after the module is unloaded and nothing is left behind.
 *
 * Threading: alloc and free may be called from any thread at once; open and
 * close may run concurrently with each other and with other handles' calls, but
 * a handle must have no calls in flight when it is closed (the core's rule: a
 * module is finalised after its last storage is released).
 */
#ifndef TSTOR_CPU_CACHE_H
#define TSTOR_CPU_CACHE_H

#include <stddef.h>

#include <tstor/tstor.h>

#define CPU_CACHE_ALIGNMENT 64
#define CPU_CACHE_MAX_BLOCK ((size_t)1 << 20)

/* One context's settings, from its [backend cpu] section (docs/config.md). */
typedef struct cpu_cache_config {
  int enabled;          /* cache = yes|no: whether this context's frees keep blocks */
  size_t max_bytes;     /* cache_max_bytes: most bytes one thread keeps */
  unsigned max_blocks;  /* cache_max_blocks: most blocks one thread keeps per size class */
  size_t large_max_bytes;         /* large_cache_mb: most bytes of large blocks kept (large.h) */
  unsigned long large_max_age_ms; /* large_cache_age_ms: how long one is kept unused */
} cpu_cache_config;

typedef struct cpu_cache cpu_cache;

/* Opens a handle with a copy of *config; the caller owns it and closes it with
 * cpu_cache_close. Returns 0, or TSTOR_ENOMEM / TSTOR_EAGAIN when the memory or
 * the thread key cannot be had. */
int cpu_cache_open(const cpu_cache_config *config, cpu_cache **out);
/* Frees the handle; the last one of the process returns every thread's cached
 * blocks and deletes the thread key. No call on the handle may be in flight. */
void cpu_cache_close(cpu_cache *c);

/* Allocates a 64-byte-aligned block of at least nbytes (1 to SIZE_MAX - 63)
 * into *out, owned by the caller until cpu_cache_free with the same nbytes.
 * Returns 0 or TSTOR_ENOMEM. */
int cpu_cache_alloc(cpu_cache *c, size_t nbytes, void **out);
/* Takes back a block from cpu_cache_alloc of the same handle and nbytes. */
void cpu_cache_free(cpu_cache *c, void *ptr, size_t nbytes);

/* Fills allocated, active, reserved, their peaks, the counts, cache_hits,
 * retries and oom_count; leaves the other fields alone. See cache.c for what
 * each one counts. */
void cpu_cache_stats(cpu_cache *c, tstor_stats *out);
/* Sets the handle's peaks to the current values. */
void cpu_cache_reset_peak(cpu_cache *c);
/* Frees the calling thread's cached blocks and the handle's large blocks now,
 * and every other thread's at its next allocation or free through this module
 * (or at its exit). */
void cpu_cache_empty(cpu_cache *c);

#endif /* TSTOR_CPU_CACHE_H */
