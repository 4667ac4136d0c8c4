/* Which stores large host work writes its destination with: streaming
 * (non-temporal) stores, which skip reading each destination line before
 * writing it, or ordinary ones. Neither wins everywhere: on a VM whose memory
 * alternates between a slow and a fast mode within minutes, streaming stores
 * were up to 1.3x faster in the slow mode and lost up to 12% on widening
 * conversions in the fast one. docs/notes/benchmark-log.md has the
 * measurements behind each rule below.
 *
 * The rules, under the automatic policy:
 * - Each operation (its `what`: the dtypes of a conversion, the shape of a
 *   transposing copy) keeps a choice of its own within its kind of work and
 *   size class; OPERATIONS choices a kind and size are kept, the one used
 *   longest ago giving way to a new operation.
 * - Now and then a trial writes whole calls with each store and times them:
 *   TRIAL_RUN calls in a row with one store, then as many with the other,
 *   counting all but the first of each run, so that each counted call pays
 *   for the write-back its predecessor left, as in a steady stream of calls.
 *   Parts of one call are too short to time on a VM.
 * - Streaming stores are kept when they lead by a margin (within it the two
 *   are the same to the measurement, and ordinary stores leave the end of
 *   the destination in cache).
 * - A verdict against the current store changes it only when the next trial
 *   agrees (the memory's mode can change between a trial's two runs), and a
 *   store that won by less than its margin, the other faster, gets a second
 *   trial at once (tstor__stores_second_look).
 * - A trial older than TRIAL_MAX_RECHECKS times the recheck time (a program
 *   that moved on to other work) is given up; the operation's next call
 *   starts one of its own. */
#include "internal.h"
#include "host/parallel.h"

#include <tstor/typed.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A choice older than this is tried again by the next calls large enough.
 * When the last trial found the loser more than DECISIVE_PCT slower, eight
 * times as old: ordinary stores to rows 32 KiB apart took 4x as long as
 * streaming ones, and a trial writes TRIAL_RUN calls with the loser. The
 * memory's mode changes within minutes, not seconds. */
#define RECHECK_NS (2000 * 1000 * 1000LL)
#define DECISIVE_PCT 25

/* How much faster (percent of time) streaming stores must be to take over
 * from ordinary ones, and to keep their place. Two calls of one operation
 * vary by up to a tenth on the VM measured, so a trial tells apart larger
 * differences only; within them ordinary stores, which PyTorch writes with
 * too, are kept, as they also leave the end of the destination in cache. */
#define STREAM_WIN_PCT 8
#define STREAM_KEEP_PCT 2

/* Calls in a row with each store in a trial; the first of each run only
 * brings the caches to that store's steady state. */
#define COUNTED TSTOR__STORE_SAMPLES
#define TRIAL_RUN (COUNTED + 1)
#define TRIAL_MAX_RECHECKS 30

typedef struct choice {
  int taken;                  /* 0: no operation yet, the rest unset */
  unsigned what;              /* the operation it is for */
  uint64_t used;              /* use_clock at its last call; 0: none yet */
  int streaming;              /* the current choice */
  int step;                   /* the next call's place in a running trial; -1: none */
  int tried;                  /* the store the running trial writes with first */
  unsigned trial;             /* counts trials: a call counts only in its own */
  int64_t trial_ns;           /* when it started */
  int counted[2];             /* samples taken, [ordinary, streaming] */
  double sample[2][COUNTED];  /* ns per byte */
  int64_t measured_ns;        /* CLOCK_MONOTONIC at the last trial's end; 0: never */
  double est[2];              /* the last trial's ns per byte, the best of each store */
  int doubt;                  /* the last trial found the other store faster: try again */
  int looked;                 /* the last trial was a second look at a close call */
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

/* A program's large calls are of a few shapes and dtype pairs (tstor bench's
 * conversion rows are five of one kind). */
#define OPERATIONS TSTOR__STORE_OPERATIONS

/* Before anything is measured, large work streams, as it always did. */
#define UNMEASURED {.taken = 1, .streaming = 1, .step = -1}

static choice choices[TSTOR__WORK_KINDS][SIZE_CLASSES][OPERATIONS];
static uint64_t use_clock; /* counts calls, for `used` */

/* Held for a few instructions at a time: large calls only, which take a
 * third of a millisecond and more. */
static pthread_mutex_t choices_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int64_t recheck_ns = RECHECK_NS;

static const char *const work_names[TSTOR__WORK_KINDS] = {"copy", "fill", "convert",
                                                          "transpose", "widen"};
static const char *const class_names[SIZE_CLASSES] = {"16-32", "32-64", "64-128", "128+"};

static atomic_int policy = -1; /* -1: not read from the environment yet */
static atomic_int log_choices = -1;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A fork while another thread held the lock would leave the child's copy
 * held for good. */
static void lock_before_fork(void) { pthread_mutex_lock(&choices_lock); }
static void unlock_after_fork(void) { pthread_mutex_unlock(&choices_lock); }
static void register_atfork(void) {
  pthread_atfork(lock_before_fork, unlock_after_fork, unlock_after_fork);
}

static void lock_choices(void) {
  pthread_once(&atfork_once, register_atfork);
  pthread_mutex_lock(&choices_lock);
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

/* Under the lock: the choice of `what` among one kind and size's, or, where
 * it has none, a new one in place of the choice used longest ago (which
 * `use` marks as used now; a query leaves the order alone). */
static choice *choice_for(choice ops[OPERATIONS], unsigned what, int use) {
  choice *c = NULL, *oldest = &ops[0];
  for (int k = 0; k < OPERATIONS && !c; k++) {
    if (ops[k].taken && ops[k].what == what) c = &ops[k];
    else if (!ops[k].taken || (oldest->taken && ops[k].used < oldest->used)) oldest = &ops[k];
  }
  if (!c) {
    /* a call of the operation it was still counts in no trial of this one */
    unsigned trial = oldest->trial;
    *oldest = (choice)UNMEASURED;
    oldest->what = what;
    oldest->trial = trial + 1;
    c = oldest;
  }
  if (use) c->used = ++use_clock;
  return c;
}

/* Under the lock: a copy of the choice of one kind and size's that a call
 * used last, or the defaults before any call. */
static choice last_choice(const choice ops[OPERATIONS]) {
  const choice *last = NULL;
  for (int k = 0; k < OPERATIONS; k++)
    if (ops[k].taken && ops[k].used != 0 && (!last || ops[k].used > last->used)) last = &ops[k];
  return last ? *last : (choice)UNMEASURED;
}

int tstor_get_store_choice(tstor_store_work work, size_t nbytes, tstor_store_choice *out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "get_store_choice: NULL out");
  if ((int)work < 0 || (int)work >= TSTOR__WORK_KINDS)
    return tstor__err(TSTOR_EINVAL, "get_store_choice: %d is not a kind of work", (int)work);
  const size_t first = offsetof(tstor_store_choice, age_s) + sizeof out->age_s;
  size_t n = tstor__out_struct_size(out->struct_size, first, sizeof *out, "get_store_choice",
                                    "tstor_store_choice");
  if (n == 0) return TSTOR_EINVAL;
  tstor_store_choice got = {0};
  got.struct_size = (uint32_t)n;
  int p = current_policy();
  lock_choices();
  choice c = last_choice(choices[work][size_class(nbytes)]);
  pthread_mutex_unlock(&choices_lock);
  if (nbytes < TSTOR__STREAM_MIN_BYTES) got.streaming = 0;
  else if (p == TSTOR_STORES_AUTO) got.streaming = c.streaming;
  else got.streaming = p == TSTOR_STORES_STREAMING;
  got.measured = c.measured_ns != 0 && nbytes >= TSTOR__STREAM_MIN_BYTES;
  if (got.measured) {
    got.streaming_speedup = c.est[1] > 0 ? c.est[0] / c.est[1] : 0;
    got.age_s = (double)(now_ns() - c.measured_ns) * 1e-9;
  }
  memcpy(out, &got, got.struct_size);
  return 0;
}

int tstor__store_streaming(tstor_store_work work, unsigned what, size_t nbytes) {
  int p = current_policy();
  if (nbytes < TSTOR__STREAM_MIN_BYTES) return 0;
  if (p != TSTOR_STORES_AUTO) return p == TSTOR_STORES_STREAMING;
  lock_choices();
  int s = choice_for(choices[work][size_class(nbytes)], what, 0)->streaming;
  pthread_mutex_unlock(&choices_lock);
  return s;
}

void tstor__stores_set_recheck(int64_t ns) {
  lock_choices();
  recheck_ns = ns > 0 ? ns : RECHECK_NS;
  pthread_mutex_unlock(&choices_lock);
}

/* The best of each store's samples: the least disturbed call, as a call
 * whose thread lost its CPU for a while only ever takes longer. */
int tstor__stores_decide(int was_streaming, const double sample[2][COUNTED], double est[2]) {
  for (int w = 0; w < 2; w++) {
    est[w] = sample[w][0];
    for (int k = 1; k < COUNTED; k++)
      if (sample[w][k] < est[w]) est[w] = sample[w][k];
  }
  int margin = was_streaming ? STREAM_KEEP_PCT : STREAM_WIN_PCT;
  return est[0] * 100 > est[1] * (100 + margin);
}

int tstor__stores_second_look(int streaming, const double est[2], int *doubt, int *looked) {
  int other_faster = streaming ? est[0] < est[1] : est[1] < est[0];
  if (!other_faster || *doubt || *looked) {
    *looked = 0;
    return 0;
  }
  *doubt = 1;
  *looked = 1;
  return 1;
}

int tstor__stores_confirm(int was_streaming, int verdict, int *doubt) {
  if (verdict == was_streaming || *doubt) {
    *doubt = 0;
    return verdict;
  }
  *doubt = 1;
  return was_streaming;
}

/* Whether a choice is due for a trial. */
static int stale(const choice *c, int64_t now) {
  if (c->measured_ns == 0 || c->doubt) return 1;
  double o = c->est[0], s = c->est[1];
  int decisive = o * 100 > s * (100 + DECISIVE_PCT) || s * 100 > o * (100 + DECISIVE_PCT);
  return now - c->measured_ns > (decisive ? 8 : 1) * recheck_ns;
}

/* The store a call of `what` writes with, the choice it counts in, its place
 * in a trial (-1: none) and which trial that is. */
static int take_store(tstor_store_work work, int cls, unsigned what, choice **out, int *step,
                      unsigned *trial) {
  lock_choices();
  choice *c = choice_for(choices[work][cls], what, 1);
  int64_t now = now_ns();
  if (c->step >= 0 && now - c->trial_ns > TRIAL_MAX_RECHECKS * recheck_ns) c->step = -1;
  if (c->step < 0 && stale(c, now)) {
    c->step = 0;
    c->tried = !c->streaming;
    c->trial++;
    c->trial_ns = now;
    c->counted[0] = c->counted[1] = 0;
  }
  int store = c->streaming;
  *step = -1;
  *trial = c->trial;
  if (c->step >= 0 && c->step < 2 * TRIAL_RUN) {
    *step = c->step++;
    store = *step < TRIAL_RUN ? c->tried : !c->tried;
  }
  *out = c;
  pthread_mutex_unlock(&choices_lock);
  return store;
}

/* Counts a trial call's time; the last one decides. */
static void count_call(tstor_store_work work, int cls, choice *c, unsigned trial, int store,
                       double ns_per_byte) {
  lock_choices();
  if (c->step < 0 || c->trial != trial || c->counted[store] >= COUNTED) { /* given up */
    pthread_mutex_unlock(&choices_lock);
    return;
  }
  c->sample[store][c->counted[store]++] = ns_per_byte;
  if (c->counted[0] < COUNTED || c->counted[1] < COUNTED) {
    pthread_mutex_unlock(&choices_lock);
    return;
  }
  int was = c->streaming, first = c->measured_ns == 0;
  /* Streaming before any trial was a default, not a finding: ordinary
   * stores take over from it by the smaller margin. But the first trial is
   * as likely as any to straddle a change of the memory's mode, so leaving
   * the default also needs the next trial's agreement. */
  int verdict =
      tstor__stores_decide(was && !first, (const double(*)[COUNTED])c->sample, c->est);
  c->streaming = tstor__stores_confirm(was, verdict, &c->doubt);
  int close_call = tstor__stores_second_look(c->streaming, c->est, &c->doubt, &c->looked);
  c->measured_ns = now_ns();
  c->step = -1;
  int now = c->streaming, doubt = c->doubt;
  unsigned what = c->what;
  double speedup = c->est[1] > 0 ? c->est[0] / c->est[1] : 0;
  pthread_mutex_unlock(&choices_lock);
  if (!logging()) return;
  if (close_call)
    fprintf(stderr,
            "tstor: %s work of %s MiB, operation %#x, writes with %s stores, a close call "
            "(streaming %.2fx ordinary); another trial follows at once\n",
            work_names[work], class_names[cls], what, now ? "streaming" : "ordinary", speedup);
  else if (doubt)
    fprintf(stderr,
            "tstor: %s work of %s MiB, operation %#x: a trial found %s stores faster "
            "(streaming %.2fx ordinary); another trial follows before the choice changes\n",
            work_names[work], class_names[cls], what, verdict ? "streaming" : "ordinary", speedup);
  else if (was != now || first)
    fprintf(stderr,
            "tstor: %s work of %s MiB, operation %#x, now writes with %s stores "
            "(streaming %.2fx ordinary)\n",
            work_names[work], class_names[cls], what, now ? "streaming" : "ordinary", speedup);
}

void tstor__parallel_for_stores(tstor_store_work work, unsigned what, size_t n, size_t item_bytes,
                                size_t align, tstor__range_fn fn, void *arg, int *streaming) {
  size_t bytes = n > SIZE_MAX / (item_bytes ? item_bytes : 1) ? SIZE_MAX : n * item_bytes;
  int p = current_policy();
  if (bytes < TSTOR__STREAM_MIN_BYTES || p != TSTOR_STORES_AUTO) {
    *streaming = bytes >= TSTOR__STREAM_MIN_BYTES && p == TSTOR_STORES_STREAMING;
    tstor__parallel_for(n, item_bytes, align, fn, arg);
    return;
  }
  int cls = size_class(bytes), step;
  unsigned trial;
  choice *c;
  *streaming = take_store(work, cls, what, &c, &step, &trial);
  int64_t t = step >= 0 ? now_ns() : 0;
  tstor__parallel_for(n, item_bytes, align, fn, arg);
  if (step >= 0 && step % TRIAL_RUN != 0)
    count_call(work, cls, c, trial, *streaming, (double)(now_ns() - t) / (double)bytes);
}
