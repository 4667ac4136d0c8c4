/* Which stores large host work writes its destination with: streaming
 * (non-temporal) stores, which skip reading each destination line before
 * writing it, or ordinary ones. Neither wins everywhere. On one 2-vCPU EPYC VM
 * whose memory alternates between a slow and a fast mode within minutes,
 * streaming stores were up to 1.3x faster in the slow mode and up to 15%
 * slower in the fast one (docs/benchmarks.md). So under the automatic policy
 * a large call measures both on its own work: after a first part written as
 * before, four equal parts of it, written streaming, ordinary, ordinary,
 * streaming (the order cancels a steady drift), the rest with the faster. The
 * choice is kept for each kind of work and size class, and measured again
 * once it is older than RECHECK_NS. */
#include "internal.h"
#include "parallel.h"

#include <tstor/typed.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A choice older than this is measured again by the next call large enough. */
#define RECHECK_NS (250 * 1000 * 1000LL)

/* How much faster (percent of time) the other store must be to replace the
 * current choice. */
#define SWITCH_MARGIN_PCT 4

/* Each probe part: large enough that what the caches absorb of the ordinary
 * stores' write-back is small beside it, and a few pieces per thread; a
 * tenth of the call at most. */
#define PROBE_PART_MIN ((size_t)8 << 20)
#define PROBE_PART_PER_THREAD ((size_t)2 << 20)

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

/* The other store takes over when it won both neighbouring pairs (parts 1
 * and 2, parts 3 and 4) by the margin: a part that lost its thread to another
 * process for a while then changes nothing, and two parts of one call differ
 * by a few percent on their own. */
int tstor__stores_decide(int was_streaming, const int64_t took[4]) {
  int w = was_streaming != 0;
  int64_t mine1 = took[w ? 0 : 1], other1 = took[w ? 1 : 0];
  int64_t mine2 = took[w ? 3 : 2], other2 = took[w ? 2 : 3];
  int won = other1 * 100 < mine1 * (100 - SWITCH_MARGIN_PCT) &&
            other2 * 100 < mine2 * (100 - SWITCH_MARGIN_PCT);
  return won ? !w : w;
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
  if (part > bytes / 10) part = bytes / 10; /* smaller calls measure in smaller parts */
  size_t part_items = part / (item_bytes ? item_bytes : 1) / align * align;
  int64_t last = atomic_load_explicit(&c->measured_ns, memory_order_relaxed);
  int stale = last == 0 || now_ns() - last > RECHECK_NS;
  int idle = 0;
  /* Half the call at most is spent measuring; one call measures at a time. */
  if (!stale || part_items == 0 || n / 10 < part_items ||
      !atomic_compare_exchange_strong(&c->busy, &idle, 1)) {
    *streaming = atomic_load_explicit(&c->streaming, memory_order_relaxed);
    tstor__parallel_for(n, item_bytes, align, fn, arg);
    return;
  }
  /* A first part, not timed, with the current choice: the first call of a
   * process starts the pool's threads, which would count against the store
   * measured first. */
  *streaming = atomic_load_explicit(&c->streaming, memory_order_relaxed);
  run_part(0, part_items, item_bytes, align, fn, arg);
  static const int order[4] = {1, 0, 0, 1};
  int64_t took[4], spent[2] = {0, 0};
  size_t at = part_items;
  for (int k = 0; k < 4; k++, at += part_items) {
    *streaming = order[k];
    int64_t t = now_ns();
    run_part(at, part_items, item_bytes, align, fn, arg);
    took[k] = now_ns() - t;
    spent[order[k]] += took[k];
  }
  int was = atomic_load(&c->streaming);
  int faster = tstor__stores_decide(was, took);
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
