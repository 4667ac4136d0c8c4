/* The host byte loops split over the thread pool (parallel.c): copy, fill,
 * byteswap, and the pool itself. Below the devices in the core's layering:
 * every host copy and fill of the core goes through here, untyped or typed.
 * Never installed. */
#ifndef TSTOR_PARALLEL_H
#define TSTOR_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include <tstor/typed.h>

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

/* Reverses the bytes of n units of `unit` bytes (1, 2, 4 or 8) in place. */
void tstor__byteswap_units(void *p, size_t n, size_t unit);

/* Fills nbytes of host memory with a pattern of psize bytes (1, 2, 4, 8, 16),
 * and copies nbytes of host memory with memmove's meaning (overlapping ranges
 * allowed), both on the worker threads when large. */
void tstor__host_fill(void *dst, size_t nbytes, const void *pattern, size_t psize);
void tstor__host_copy(void *dst, const void *src, size_t nbytes);

/* Destinations of at least this many bytes are written with non-temporal
 * stores: they do not fit in the caches (32 MiB of L3 is common) and would
 * only evict what does. */
#ifndef TSTOR__STREAM_MIN_BYTES
#define TSTOR__STREAM_MIN_BYTES ((size_t)16 << 20)
#endif

/* Host copies and fills smaller than this run on the calling thread with
 * memcpy and memset: handing pieces to the pool costs more than it saves while
 * the bytes fit in the caches (on a 2-core EPYC a 1 MiB copy ran at 15 GB/s
 * alone and 12 GB/s split, a 1 MiB fill at 33 and 20 GB/s; from 16 MiB the
 * split streaming copy is ahead). */
#ifndef TSTOR__HOST_SPLIT_MIN_BYTES
#define TSTOR__HOST_SPLIT_MIN_BYTES TSTOR__STREAM_MIN_BYTES
#endif

/* Runs fn over [0, n) as tstor__parallel_for does, for work of one kind whose
 * writes can stream past the caches: *streaming (a field of fn's argument) is
 * set before fn runs, 1 for streaming stores and 0 for ordinary ones. Below
 * TSTOR__STREAM_MIN_BYTES (n * item_bytes) it is 0. Above, the policy decides
 * (tstor_set_store_policy); under the automatic one, the current choice of
 * the operation (`what`, any number that tells operations of one kind apart)
 * at the work's size, or the store a running trial of it gives this call,
 * which the call then times (stores.c). Ranges handed to fn
 * stay multiples of `align` items from 0. */
#define TSTOR__WORK_KINDS 5
/* The operations of one kind and size whose choices are kept (stores.c). */
#define TSTOR__STORE_OPERATIONS 8
void tstor__parallel_for_stores(tstor_store_work work, unsigned what, size_t n, size_t item_bytes,
                                size_t align, tstor__range_fn fn, void *arg, int *streaming);

/* The automatic policy's decision at the end of a trial: sample[0] and
 * sample[1] are the ns per byte of the counted calls written with ordinary
 * and with streaming stores. Returns whether to stream from now on, given
 * whether it streamed before (after a trial: streaming keeps its place by a
 * smaller margin than it takes it by); est[] gets the best sample of each. */
#define TSTOR__STORE_SAMPLES 2
int tstor__stores_decide(int was_streaming, const double sample[2][TSTOR__STORE_SAMPLES],
                         double est[2]);

/* After a trial: whether to stream from now on, given whether it streamed
 * (before the first trial: the default, streaming) and the trial's verdict
 * (tstor__stores_decide). A verdict against the current store changes it
 * only when the trial just before found the same: the first such verdict
 * sets *doubt and keeps the store, and the next call starts another trial;
 * any verdict that settles the question clears *doubt. */
int tstor__stores_confirm(int was_streaming, int verdict, int *doubt);

/* After any trial, once the store is settled (`streaming`, est[] from
 * tstor__stores_decide): whether the store it keeps won by less than its
 * margin, the other store faster, with no doubt already pending and no such
 * second look just taken (*looked). Then it sets *doubt, so that the next
 * call starts another trial whose verdict takes effect at once, and
 * *looked; otherwise it clears *looked. */
int tstor__stores_second_look(int streaming, const double est[2], int *doubt, int *looked);

/* For tests: how old a choice must be before a trial (RECHECK_NS in
 * stores.c; 0 restores it), and so how long a trial may last. */
void tstor__stores_set_recheck(int64_t ns);

/* Whether a call of operation `what` of this kind and size streams, asked
 * before the call (to plan it) or for one that cannot be measured (it runs on
 * one thread, or in an order that must be kept): the policy's answer, or
 * under the automatic one the operation's current choice. */
int tstor__store_streaming(tstor_store_work work, unsigned what, size_t nbytes);

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

#ifdef TSTOR__CLONES
/* Whether the loops written with intrinsics may run: the CPU has every one of
 * `features` (TSTOR__SIMD_*) and $TSTOR_SIMD is not "off" (the portable loops
 * only, for tests). Both are read once, on the first call. */
enum { TSTOR__SIMD_AVX2 = 1 << 0, TSTOR__SIMD_F16C = 1 << 1 };
int tstor__simd(unsigned features);
#endif

#endif /* TSTOR_PARALLEL_H */
