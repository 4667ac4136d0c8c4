/* Internals shared by the typed-storage files (dtype.c, convert.c, parallel.c,
 * typed_storage.c, print.c); never installed. */
#ifndef TSTOR_TYPED_INTERNAL_H
#define TSTOR_TYPED_INTERNAL_H

#include "internal.h"

#include <tstor/typed.h>

/* The table entry for dtype, or NULL (with a TSTOR_EINVAL detail naming `what`
 * when what is non-NULL) for a value that is not a dtype. */
const tstor_dtype_info *tstor__dtype(tstor_dtype dtype, const char *what);

/* Reads bytes [offset, offset + n) of s (which has data) into host memory,
 * through the copy table when s is not host memory. */
int tstor__typed_read(const tstor_storage *s, size_t offset, void *host, size_t n);

/* ---------------------------------------------------------------- threads */

/* Runs fn(arg, begin, end) over [0, n) split into at most
 * tstor_get_num_threads() contiguous ranges whose bounds are multiples of
 * `align` items. Ranges run on worker threads and the calling thread; small
 * jobs (n * item_bytes below the threshold) run on the caller alone. Never
 * fails: a thread that cannot be started has its range run by the caller. */
typedef void (*tstor__range_fn)(void *arg, size_t begin, size_t end);
void tstor__parallel_for(size_t n, size_t item_bytes, size_t align, tstor__range_fn fn,
                         void *arg);

/* Below this many bytes touched a job stays on the calling thread: starting
 * and joining a thread costs about as much as converting this much. */
#define TSTOR__PARALLEL_MIN_BYTES ((size_t)1 << 20)

/* ---------------------------------------------------------- host kernels */

/* Converts n elements on the calling thread. The pair must have passed
 * tstor_dtype_can_convert; equal dtypes are a memmove. */
void tstor__convert_serial(void *dst, tstor_dtype dst_dtype, const void *src,
                           tstor_dtype src_dtype, size_t n);

/* Reverses the bytes of n units of `unit` bytes (1, 2, 4 or 8) in place. */
void tstor__byteswap_units(void *p, size_t n, size_t unit);

/* Fills nbytes of host memory with a pattern of psize bytes (1, 2, 4, 8, 16),
 * and copies nbytes of host memory, both on the worker threads when large. */
void tstor__host_fill(void *dst, size_t nbytes, const void *pattern, size_t psize);
void tstor__host_copy(void *dst, const void *src, size_t nbytes);

/* Destinations of at least this many bytes are written with non-temporal
 * stores: they do not fit in the caches (32 MiB of L3 is common) and would
 * only evict what does. */
#ifndef TSTOR__STREAM_MIN_BYTES
#define TSTOR__STREAM_MIN_BYTES ((size_t)16 << 20)
#endif

/* Copies nbytes of host memory to dst, which must be 16-byte aligned, with
 * non-temporal stores where the machine has them (plain stores elsewhere).
 * Call tstor__stream_fence() after the last one, before the bytes are handed
 * to another thread. */
void tstor__stream_copy(void *dst, const void *src, size_t nbytes);
void tstor__stream_fence(void);

/* Built twice, for AVX2 and the baseline, the loader choosing (GCC's
 * target_clones, an ifunc), on x86-64 where the compiler can. Not under
 * ThreadSanitizer, whose instrumented ifunc resolvers run before its runtime
 * is up (a crash at load), nor with clang, which lacks the F16C feature test. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define TSTOR__CLONES 1
#endif
#endif
#ifdef TSTOR__CLONES
#define TSTOR__AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TSTOR__AVX2_CLONES
#endif

/* The byte order of this machine. */
static inline int tstor__little_endian(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

#endif /* TSTOR_TYPED_INTERNAL_H */
