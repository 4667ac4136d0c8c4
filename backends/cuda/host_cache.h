/* The caching pinned host allocator of the cuda backend, written over
 * tstor__raw_device (whose alloc is page-locked host memory) so that it runs
 * without a GPU in the tests.
 *
 * Pinning memory is slow (the kernel maps and locks every page), so freed
 * blocks are kept for reuse. Requests up to 1 MiB round up to a power of two;
 * larger ones to a multiple of 2 MiB, not to a power of two, so that a 257 MiB
 * buffer does not pin 512 MiB. A request takes the smallest cached block that
 * is at most a quarter larger than it. Blocks are never split.
 *
 * A block that an asynchronous copy reads or writes is not handed out again
 * before that copy is done: the copy code calls tstor__hostcache_record_use,
 * which records an event on the copy's stream; a freed block waits for its
 * events before it returns to the cache.
 *
 * Thread-safe: one lock per cache. */
#ifndef TSTOR_CUDA_HOST_CACHE_H
#define TSTOR_CUDA_HOST_CACHE_H

#include <stddef.h>
#include <tstor/tstor.h>

#include "raw_device.h"

#define TSTOR__HOSTCACHE_SMALL_SIZE ((size_t)1 << 20)
#define TSTOR__HOSTCACHE_ROUND_LARGE ((size_t)2 << 20)

typedef struct tstor__hostcache tstor__hostcache;

/* A new cache over `raw` (copied); name is for messages ("cuda-pinned"), copied.
 * With caching 0 every allocate and free goes to raw, and blocks are still
 * tracked so that is_pinned and record_use work. */
int tstor__hostcache_create(const tstor__raw_device *raw, const char *name, int caching,
                            tstor__hostcache **out);
/* Waits for outstanding events, frees every block, frees the cache. */
void tstor__hostcache_destroy(tstor__hostcache *c);

/* nbytes of pinned memory; *ptr NULL for 0 bytes. *handle goes back to
 * tstor__hostcache_free with ptr, exactly once. */
int tstor__hostcache_alloc(tstor__hostcache *c, size_t nbytes, void **ptr, void **handle);
void tstor__hostcache_free(tstor__hostcache *c, void *ptr, void *handle);

/* 1 when [ptr, ptr + nbytes) lies in a block this cache handed out, else 0. */
int tstor__hostcache_contains(tstor__hostcache *c, const void *ptr, size_t nbytes);

/* Work queued on `stream` reads or writes the block that holds ptr: it is not
 * reused before that work is done. 0 (also when ptr is not from this cache),
 * or an error code. */
int tstor__hostcache_record_use(tstor__hostcache *c, const void *ptr, void *stream);

/* The stream is about to be destroyed and its work has finished: the events
 * recorded on it are dropped, so that a new stream at the same address is not
 * taken for it. */
void tstor__hostcache_forget_stream(tstor__hostcache *c, void *stream);

/* Frees every cached block whose events have completed. */
int tstor__hostcache_empty(tstor__hostcache *c);

void tstor__hostcache_stats(tstor__hostcache *c, tstor_stats *out);
void tstor__hostcache_reset_peak(tstor__hostcache *c);

/* The size a request occupies (0 for 0, SIZE_MAX when it cannot be represented). */
size_t tstor__hostcache_round(size_t nbytes);

#endif
