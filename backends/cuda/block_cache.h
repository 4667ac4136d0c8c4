/* The caching device allocator of the cuda backend, in the line of PyTorch's
 * CUDACachingAllocator, written over tstor__raw_device so that it runs without
 * a GPU in the tests.
 *
 * Requests are rounded to 512 bytes (or to a fraction of a power of two, see
 * roundup_divisions). Requests up to 1 MiB come from the small pool, carved
 * from 2 MiB segments; larger ones from the large pool (20 MiB segments for
 * requests under 10 MiB, else the request rounded to 2 MiB). A request takes
 * the smallest cached free block that fits (best fit), splitting off the rest;
 * freed blocks merge with free neighbours.
 *
 * Streams: a block belongs to the stream it was allocated for and returns to
 * that stream's free lists. Another stream takes it only when an event
 * recorded on the owner says the owner's queued work is done. A block that
 * record_stream said is used on other streams too is kept back at free until
 * events on those streams complete.
 *
 * Out of memory: the cache waits for the device, returns every cached block
 * and retries once before failing with a message that gives the request, the
 * device's free and total memory, and what the cache holds.
 *
 * Thread-safe: one lock per cache. */
#ifndef TSTOR_CUDA_BLOCK_CACHE_H
#define TSTOR_CUDA_BLOCK_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <tstor/tstor.h>

#include "raw_device.h"

#define TSTOR__CACHE_MIN_BLOCK ((size_t)512)
#define TSTOR__CACHE_SMALL_SIZE ((size_t)1 << 20)    /* largest small-pool request */
#define TSTOR__CACHE_SMALL_SEGMENT ((size_t)2 << 20) /* segment of the small pool */
#define TSTOR__CACHE_LARGE_BUFFER ((size_t)20 << 20) /* segment for 1 to 10 MiB requests */
#define TSTOR__CACHE_MIN_LARGE_ALLOC ((size_t)10 << 20)
#define TSTOR__CACHE_ROUND_LARGE ((size_t)2 << 20) /* larger segments round to this */

typedef struct tstor__cache tstor__cache;

typedef struct tstor__cache_config {
  const char *name;        /* the device, "cuda:0", for messages; copied */
  int caching;             /* 0: every allocate and free goes to the device */
  size_t max_split_size;   /* blocks this large are never split; SIZE_MAX: no limit */
  double gc_threshold;     /* in (0, 1): free old cached blocks before reserving more than
                              this fraction of the device's memory; 0: off */
  unsigned roundup_divisions; /* 0 or 1: round to 512 bytes; else a power of two N: round
                                 to the next of N steps between powers of two */
} tstor__cache_config;

/* A new cache over `raw` (copied). Fails with TSTOR_ENOMEM or TSTOR_EINVAL for a
 * bad config; *out is then NULL. */
int tstor__cache_create(const tstor__raw_device *raw, const tstor__cache_config *cfg,
                        tstor__cache **out);
/* Returns every segment to the device and frees the cache. Blocks still
 * allocated are returned too: call it when no storage uses the cache. */
void tstor__cache_destroy(tstor__cache *c);

/* Allocates nbytes for use on `stream` (NULL: the default stream). *ptr is the
 * memory (NULL for 0 bytes) and *handle the cache's record of it, both given
 * back to tstor__cache_free exactly once. On failure nothing changes but the
 * out-of-memory count, and the detail says why. */
int tstor__cache_alloc(tstor__cache *c, size_t nbytes, void *stream, void **ptr,
                       void **handle);
void tstor__cache_free(tstor__cache *c, void *ptr, size_t nbytes, void *handle);

/* Marks an allocated block as used on `stream` too: at free, it is kept until
 * the work queued on `stream` by then has finished. */
int tstor__cache_record_stream(tstor__cache *c, void *handle, void *stream);

/* Waits for the device, then returns every cached free segment to it. */
int tstor__cache_empty(tstor__cache *c);

/* The stream is about to be destroyed and its work has finished: what it owned
 * moves to the default stream. */
void tstor__cache_forget_stream(tstor__cache *c, void *stream);

void tstor__cache_stats(tstor__cache *c, tstor_stats *out);
void tstor__cache_reset_peak(tstor__cache *c);

/* The size a request of nbytes occupies in the cache (0 for 0 bytes; SIZE_MAX when
 * it cannot be represented). */
size_t tstor__cache_round(const tstor__cache *c, size_t nbytes);

/* Consistency check for the tests: every block is in exactly one place, the
 * counters match the blocks. 0 or a negative number naming the broken rule. */
int tstor__cache_check(tstor__cache *c);

#endif
