/* Which stores large host work writes its destination with: streaming
 * (non-temporal) stores, which skip reading each destination line before
 * writing it, or ordinary ones. Neither wins everywhere. On one 2-vCPU EPYC VM
 * whose memory alternates between a slow and a fast mode within minutes,
 * streaming stores were up to 1.3x faster in the slow mode and up to 15%
 * slower in the fast one (docs/benchmarks.md). So under the automatic policy
 * a large call measures both on its own work, then writes the rest with the
 * faster. The choice is kept for each kind of work and size class, and
 * measured again once it is older than RECHECK_NS.
 *
 * Ordinary stores leave dirty lines in the caches, and whatever runs next
 * pays for writing them back. Timing parts one by one therefore charged an
 * ordinary part's write-back to the part after it. So the probe times pairs
 * of parts, the second of each pair always streaming: it reads its source
 * through the caches and so evicts, and pays for, what the first part left
 * dirty. Pairs led by ordinary stores are compared with pairs of streaming
 * parts; the pairs go ordinary-led, streaming, streaming, ordinary-led, an
 * order that cancels a steady drift. A fill reads nothing, so for fills the
 * streaming part evicts nothing and ordinary stores still look cheaper than
 * they are, up to what the last-level cache holds. */
#include "internal.h"
#include "parallel.h"

#include <tstor/typed.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A choice older than this is measured again by the next call large enough.
 * When the last measurement found the loser more than DECISIVE_PCT slower,
 * eight times as old: a probe writes two parts with the loser, and ordinary
 * stores to rows 32 KiB apart took 4x as long as streaming ones, so probing
 * each quarter of a second cost the transposing copies of the benchmark, whose
 * rounds are further apart, a quarter of their speed. The memory's mode
 * changes within minutes, not seconds. */
#define RECHECK_NS (250 * 1000 * 1000LL)
#define DECISIVE_PCT 25

/* How much faster (percent of time) the other store must be to replace the
 * current choice. */
#define SWITCH_MARGIN_PCT 4

/* Each probe part: large enough that what the caches absorb of the ordinary
 * stores' write-back is small beside it, and a few pieces per thread. The
 * probe is a first untimed part and four pairs: nine parts, three quarters
 * of the call at most. */
#define PROBE_PART_MIN ((size_t)16 << 20)
#define PROBE_PART_PER_THREAD ((size_t)4 << 20)
#define PROBE_SHARE 12 /* a part is a twelfth of the call at most */

/* Two pairs led by the same store that differ by more than this (percent)
 * mean one of them lost its thread for a while: the faster one counts
 * twice instead of both. */
#define OUTLIER_PCT 25

typedef struct choice {
  _Atomic int64_t measured_ns; /* CLOCK_MONOTONIC; 0: never */
  atomic_int streaming;        /* the faster found */
  atomic_int busy;             /* a call is measuring */
  _Atomic int64_t ordinary_ns, streaming_ns; /* the last probe's two halves */
} choice;

/* Choices are kept apart by size as well: a destination that still fits in
 * a large last-level cache favours ordinary stores, one many times its size
 * may not. Classes by the bytes a call touches: [16, 32) MiB, [32, 64),
 * [64, 128), and 128 MiB up. */
#define SIZE_CLASSES 4

static int size_class(size_t bytes) {
  int c = 0;
  for (size_t b = TSTOR__STREAM_MIN_BYTES * 2; b <= bytes && c < SIZE_CLASSES - 1; b *= 2) c++;
  return c;
}

/* Before anything is measured, large work streams, as it always did. */
static choice choices[TSTOR__WORK_KINDS][SIZE_CLASSES] = {
    {{.streaming = 1}, {.streaming = 1}, {.streaming = 1}, {.streaming = 1}},
    {{.streaming = 1}, {.streaming = 1}, {.streaming = 1}, {.streaming = 1}},
    {{.streaming = 1}, {.streaming = 1}, {.streaming = 1}, {.streaming = 1}},
    {{.streaming = 1}, {.streaming = 1}, {.streaming = 1}, {.streaming = 1}}};

static const char *const work_names[TSTOR__WORK_KINDS] = {"copy", "fill", "convert",
                                                          "transpose"};
static const char *const class_names[SIZE_CLASSES] = {"16-32", "32-64", "64-128", "128+"};

static atomic_int policy = -1; /* -1: not read from the environment yet */
static atomic_int log_choices = -1;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* $TSTOR_STORES (auto, streaming or ordinary; anything else is auto, as a bad
 * $TSTOR_NUM_THREADS is the default) and $TSTOR_LOG=debug, read once. */
static int current_policy(void) {
  int p = atomic_load_explicit(&policy, memory_order_acquire);
  if (p >= 0) return p;
  const char *env = secure_getenv("TSTOR_STORES");
  int want = TSTOR_STORES_AUTO;
  if (env && strcmp(env, "streaming") == 0) want = TSTOR_STORES_STREAMING;
  if (env && strcmp(env, "ordinary") == 0) want = TSTOR_STORES_ORDINARY;
  int expected = -1;
  atomic_compare_exchange_strong(&policy, &expected, want);
  return atomic_load(&policy);
}

static int logging(void) {
  int l = atomic_load_explicit(&log_choices, memory_order_relaxed);
  if (l < 0) {
    const char *env = secure_getenv("TSTOR_LOG");
    l = env && strcmp(env, "debug") == 0;
    atomic_store_explicit(&log_choices, l, memory_order_relaxed);
  }
  return l;
}

int tstor_set_store_policy(tstor_store_policy p) {
  if (p != TSTOR_STORES_AUTO && p != TSTOR_STORES_STREAMING && p != TSTOR_STORES_ORDINARY)
    return tstor__err(TSTOR_EINVAL,
                      "set_store_policy: %d is not a policy (auto 0, streaming 1, ordinary 2)",
                      (int)p);
  current_policy();
  return atomic_exchange(&policy, (int)p);
}

tstor_store_policy tstor_get_store_policy(void) { return (tstor_store_policy)current_policy(); }

int tstor_get_store_choice(tstor_store_work work, size_t nbytes, tstor_store_choice *out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "get_store_choice: NULL out");
  if ((int)work < 0 || (int)work >= TSTOR__WORK_KINDS)
    return tstor__err(TSTOR_EINVAL, "get_store_choice: %d is not a kind of work", (int)work);
  const size_t first = offsetof(tstor_store_choice, age_s) + sizeof out->age_s;
  size_t n = tstor__out_struct_size(out->struct_size, first, sizeof *out, "get_store_choice",
                                    "tstor_store_choice");
  if (n == 0) return TSTOR_EINVAL;
  const choice *c = &choices[work][size_class(nbytes)];
  tstor_store_choice got = {0};
  got.struct_size = (uint32_t)n;
  int p = current_policy();
  int64_t at = atomic_load(&c->measured_ns);
  if (nbytes < TSTOR__STREAM_MIN_BYTES) got.streaming = 0;
  else if (p == TSTOR_STORES_AUTO) got.streaming = atomic_load(&c->streaming);
  else got.streaming = p == TSTOR_STORES_STREAMING;
  got.measured = at != 0 && nbytes >= TSTOR__STREAM_MIN_BYTES;
  if (got.measured) {
    int64_t o = atomic_load(&c->ordinary_ns), s = atomic_load(&c->streaming_ns);
    got.streaming_speedup = s > 0 ? (double)o / (double)s : 0;
    got.age_s = (double)(now_ns() - at) * 1e-9;
  }
  memcpy(out, &got, got.struct_size);
  return 0;
}

int tstor__store_streaming(tstor_store_work work, size_t nbytes) {
  int p = current_policy();
  if (nbytes < TSTOR__STREAM_MIN_BYTES) return 0;
  if (p != TSTOR_STORES_AUTO) return p == TSTOR_STORES_STREAMING;
  return atomic_load_explicit(&choices[work][size_class(nbytes)].streaming, memory_order_relaxed);
}

/* The store that leads each timed pair; the second part is streaming. */
static const int pair_lead[4] = {0, 1, 1, 0};

/* The sum of two pairs' times, or twice the faster where they differ by
 * more than OUTLIER_PCT. */
static int64_t pair_sum(int64_t a, int64_t b) {
  int64_t lo = a < b ? a : b, hi = a < b ? b : a;
  return hi * 100 > lo * (100 + OUTLIER_PCT) ? 2 * lo : a + b;
}

/* The two streaming-led pairs are four streaming parts: two parts take half
 * their time. The two ordinary-led pairs are two ordinary parts, their
 * write-back, and two streaming parts. The other store takes over when it is faster by the
 * margin on the sums, with a pair that lost its thread left out: a steady
 * difference is not outvoted by one disturbed pair, nor does one disturbed
 * pair flip the choice. */
int tstor__stores_decide(int was_streaming, const int64_t took[4], int64_t est[2]) {
  int64_t sum[2] = {0, 0}, one[2][2];
  int n[2] = {0, 0};
  for (int k = 0; k < 4; k++) one[pair_lead[k]][n[pair_lead[k]]++] = took[k];
  for (int w = 0; w < 2; w++) sum[w] = pair_sum(one[w][0], one[w][1]);
  int64_t streaming = sum[1] / 2, ordinary = sum[0] - streaming;
  est[0] = ordinary < 1 ? 1 : ordinary; /* below: disturbed beyond what the rule catches */
  est[1] = streaming;
  int w = was_streaming != 0;
  int64_t mine = w ? streaming : ordinary, other = w ? ordinary : streaming;
  return other * 100 < mine * (100 - SWITCH_MARGIN_PCT) ? !w : w;
}

/* fn over [base, base + n): parallel_for's ranges shifted. */
typedef struct shifted {
  tstor__range_fn fn;
  void *arg;
  size_t base;
} shifted;

static void run_shifted(void *arg, size_t begin, size_t end) {
  const shifted *s = arg;
  s->fn(s->arg, s->base + begin, s->base + end);
}

static void run_part(size_t base, size_t n, size_t item_bytes, size_t align, tstor__range_fn fn,
                     void *arg) {
  shifted s = {fn, arg, base};
  tstor__parallel_for(n, item_bytes, align, run_shifted, &s);
}

void tstor__parallel_for_stores(tstor_store_work work, size_t n, size_t item_bytes, size_t align,
                                tstor__range_fn fn, void *arg, int *streaming) {
  size_t bytes = n > SIZE_MAX / (item_bytes ? item_bytes : 1) ? SIZE_MAX : n * item_bytes;
  int p = current_policy();
  choice *c = &choices[work][size_class(bytes)];
  if (bytes < TSTOR__STREAM_MIN_BYTES || p != TSTOR_STORES_AUTO) {
    *streaming = bytes >= TSTOR__STREAM_MIN_BYTES && p == TSTOR_STORES_STREAMING;
    tstor__parallel_for(n, item_bytes, align, fn, arg);
    return;
  }
  size_t part = PROBE_PART_PER_THREAD * (size_t)tstor_get_num_threads();
  if (part < PROBE_PART_MIN) part = PROBE_PART_MIN;
  if (part > bytes / PROBE_SHARE) part = bytes / PROBE_SHARE; /* smaller calls, smaller parts */
  size_t part_items = part / (item_bytes ? item_bytes : 1) / align * align;
  int64_t last = atomic_load_explicit(&c->measured_ns, memory_order_relaxed);
  int64_t o = atomic_load_explicit(&c->ordinary_ns, memory_order_relaxed);
  int64_t st = atomic_load_explicit(&c->streaming_ns, memory_order_relaxed);
  int decisive = o * 100 > st * (100 + DECISIVE_PCT) || st * 100 > o * (100 + DECISIVE_PCT);
  int stale = last == 0 || now_ns() - last > (decisive ? 8 : 1) * RECHECK_NS;
  int idle = 0;
  /* One call measures at a time. */
  if (!stale || part_items == 0 || n / PROBE_SHARE < part_items ||
      !atomic_compare_exchange_strong(&c->busy, &idle, 1)) {
    *streaming = atomic_load_explicit(&c->streaming, memory_order_relaxed);
    tstor__parallel_for(n, item_bytes, align, fn, arg);
    return;
  }
  /* A first part, not timed, streaming: the first call of a process starts
   * the pool's threads, which would count against the store measured first,
   * and whatever ran before this call may have left dirty lines. */
  *streaming = 1;
  run_part(0, part_items, item_bytes, align, fn, arg);
  int64_t took[4];
  size_t at = part_items;
  for (int k = 0; k < 4; k++) {
    int64_t t = now_ns();
    *streaming = pair_lead[k];
    run_part(at, part_items, item_bytes, align, fn, arg);
    *streaming = 1;
    run_part(at + part_items, part_items, item_bytes, align, fn, arg);
    took[k] = now_ns() - t;
    at += 2 * part_items;
  }
  int64_t spent[2];
  int was = atomic_load(&c->streaming);
  int faster = tstor__stores_decide(was, took, spent);
  atomic_store(&c->streaming, faster);
  atomic_store(&c->ordinary_ns, spent[0]);
  atomic_store(&c->streaming_ns, spent[1]);
  atomic_store(&c->measured_ns, now_ns());
  atomic_store(&c->busy, 0);
  if (logging() && (was != faster || last == 0))
    fprintf(stderr,
            "tstor: %s work of %s MiB now writes with %s stores (streaming %.2fx ordinary)\n",
            work_names[work], class_names[c - choices[work]], faster ? "streaming" : "ordinary",
            spent[1] > 0 ? (double)spent[0] / (double)spent[1] : 0.0);
  *streaming = faster;
  run_part(at, n - at, item_bytes, align, fn, arg);
}
