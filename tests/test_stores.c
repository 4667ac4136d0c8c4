/* Streaming or ordinary stores for large host work (tstor_set_store_policy):
 * the policy calls and their refusals, the same bytes from large copies,
 * fills, conversions and transposing copies under each policy (and under the
 * automatic one through its trials, each call written with one store or the
 * other), what tstor_get_store_choice reports once measured, when a choice
 * is tried again, and the decision a trial's times lead to. */
#include "testutil.h"

#include "host/parallel.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tstor/tensor.h>
#include <tstor/typed.h>

static const tstor_store_policy policies[] = {TSTOR_STORES_ORDINARY, TSTOR_STORES_STREAMING,
                                              TSTOR_STORES_AUTO};
static const tstor_store_work works[] = {TSTOR_WORK_COPY, TSTOR_WORK_FILL, TSTOR_WORK_CONVERT,
                                         TSTOR_WORK_TRANSPOSE, TSTOR_WORK_WIDEN};

/* Large work: its bytes would not fit in any cache. */
#define BIG (((size_t)88 << 20) + 12345)
/* The bytes each kind of large_work_is_right's calls reads and writes. */
static const size_t work_bytes[] = {2 * BIG, BIG - 1, BIG / 8 * 8, (size_t)4100 * 4096 * 8,
                                    BIG / 8 * 12};
/* The calls a trial takes: TSTOR__STORE_SAMPLES counted with each store, and
 * one before each run of them. */
#define TRIAL_CALLS (2 * (TSTOR__STORE_SAMPLES + 1))

static unsigned char *random_bytes(size_t n, uint64_t seed) {
  unsigned char *p = malloc(n);
  ck_assert_ptr_nonnull(p);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    p[i] = (unsigned char)(seed >> 56);
  }
  return p;
}

static tstor_storage *wrap(void *p, size_t n) {
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(NULL, "cpu", &cpu));
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_wrap(NULL, cpu, p, n, &s));
  return s;
}

START_TEST(the_policy_is_set_and_read_back) {
  ck_assert_int_eq(tstor_get_store_policy(), TSTOR_STORES_AUTO); /* no $TSTOR_STORES here */
  ck_assert_int_eq(tstor_set_store_policy(TSTOR_STORES_ORDINARY), TSTOR_STORES_AUTO);
  ck_assert_int_eq(tstor_get_store_policy(), TSTOR_STORES_ORDINARY);
  ck_assert_int_eq(tstor_set_store_policy(TSTOR_STORES_STREAMING), TSTOR_STORES_ORDINARY);
  ck_tstor_err(tstor_set_store_policy((tstor_store_policy)3), TSTOR_EINVAL);
  ck_assert_ptr_nonnull(strstr(tstor_last_error(), "3 is not a policy"));
  ck_tstor_err(tstor_set_store_policy((tstor_store_policy)-1), TSTOR_EINVAL);
  ck_assert_int_eq(tstor_get_store_policy(), TSTOR_STORES_STREAMING); /* unchanged */
  ck_assert_int_eq(tstor_set_store_policy(TSTOR_STORES_AUTO), TSTOR_STORES_STREAMING);
}
END_TEST

START_TEST(the_choice_is_refused_bad_arguments) {
  tstor_store_choice c = TSTOR_STORE_CHOICE_INIT;
  ck_tstor_err(tstor_get_store_choice(TSTOR_WORK_COPY, BIG, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_get_store_choice((tstor_store_work)5, BIG, &c), TSTOR_EINVAL);
  ck_assert_ptr_nonnull(strstr(tstor_last_error(), "5 is not a kind of work"));
  ck_tstor_err(tstor_get_store_choice((tstor_store_work)-1, BIG, &c), TSTOR_EINVAL);
  c.struct_size = 4;
  ck_tstor_err(tstor_get_store_choice(TSTOR_WORK_COPY, BIG, &c), TSTOR_EINVAL);
  ck_assert_ptr_nonnull(strstr(tstor_last_error(), "struct_size 4"));
  ck_assert_uint_eq(c.struct_size, 4); /* nothing written */
  /* 0 stands for the first layout, which is the whole struct */
  memset(&c, 0xff, sizeof c);
  c.struct_size = 0;
  ck_tstor_ok(tstor_get_store_choice(TSTOR_WORK_FILL, BIG, &c));
  ck_assert_uint_eq(c.struct_size, sizeof c);
  ck_assert_int_eq(c.measured, 0);
  ck_assert_int_eq(c.streaming, 1); /* before any measurement, large work streams */
  ck_assert(c.age_s == 0 && c.streaming_speedup == 0);
  /* and small work never does */
  ck_tstor_ok(tstor_get_store_choice(TSTOR_WORK_COPY, ((size_t)16 << 20) - 1, &c));
  ck_assert_int_eq(c.streaming, 0);
}
END_TEST

/* A copy, fills of a 4-byte pattern and of a byte at odd offsets, float32 -> int32 and
 * float32 -> float64 conversions and transposing copies, each large and
 * checked element by element against what the C it stands for gives. */
static void large_work_is_right(void) {
  unsigned char *src = random_bytes(BIG, 7), *dst = malloc(BIG + 64);
  ck_assert_ptr_nonnull(dst);

  /* copy, to a destination 3 bytes off alignment */
  tstor_storage *s = wrap(src, BIG), *d = wrap(dst + 3, BIG);
  ck_tstor_ok(tstor_storage_copy(d, s));
  ck_assert_int_eq(memcmp(dst + 3, src, BIG), 0);
  tstor_storage_release(s);
  tstor_storage_release(d);

  /* fill, 4-byte pattern from byte 1 on */
  const unsigned char pattern[4] = {0x11, 0x22, 0x33, 0x44};
  size_t fill_bytes = (BIG - 1) / 4 * 4;
  d = wrap(dst + 1, fill_bytes);
  dst[0] = 0xee;
  dst[1 + fill_bytes] = 0xee;
  ck_tstor_ok(tstor_storage_fill_pattern(d, pattern, 4));
  for (size_t i = 0; i < fill_bytes; i++)
    if (dst[1 + i] != pattern[i % 4]) ck_abort_msg("fill: byte %zu is %#x", i, dst[1 + i]);
  ck_assert_uint_eq(dst[0], 0xee);
  ck_assert_uint_eq(dst[1 + fill_bytes], 0xee);
  tstor_storage_release(d);

  /* fill, one byte, an odd count from byte 1 on: a memset's meaning */
  d = wrap(dst + 1, BIG - 2);
  dst[BIG - 1] = 0xee;
  ck_tstor_ok(tstor_storage_fill(d, 0x5a));
  for (size_t i = 0; i < BIG - 2; i++)
    if (dst[1 + i] != 0x5a) ck_abort_msg("byte fill: byte %zu is %#x", i, dst[1 + i]);
  ck_assert_uint_eq(dst[0], 0xee);
  ck_assert_uint_eq(dst[BIG - 1], 0xee);
  tstor_storage_release(d);

  /* float32 -> int32, which streams without SIMD kernels as well (a
   * narrowing conversion needs them) */
  size_t n = BIG / 8;
  float *f = (float *)(void *)src;
  for (size_t i = 0; i < n; i++) f[i] = (float)((double)i * 0.75 - 3e6);
  int32_t *k = malloc(n * sizeof *k);
  ck_assert_ptr_nonnull(k);
  ck_tstor_ok(tstor_dtype_convert(k, TSTOR_INT32, f, TSTOR_FLOAT32, n));
  for (size_t i = 0; i < n; i++)
    if (k[i] != (int32_t)f[i]) ck_abort_msg("convert: element %zu is %d, not %d", i, k[i], (int32_t)f[i]);
  free(k);

  /* float32 -> float64 */
  for (size_t i = 0; i < n; i++) f[i] = (float)((double)i * 0.25 - 1e6);
  double *g = malloc(n * sizeof *g);
  ck_assert_ptr_nonnull(g);
  ck_tstor_ok(tstor_dtype_convert(g, TSTOR_FLOAT64, f, TSTOR_FLOAT32, n));
  for (size_t i = 0; i < n; i++)
    if (g[i] != (double)f[i]) ck_abort_msg("convert: element %zu is %g, not %g", i, g[i], (double)f[i]);
  free(g);

  /* the transpose of a 4100 x 4096 float32 matrix and of a 4096 x 4100 one,
   * made contiguous: the destination's rows 16400 bytes apart (16-byte
   * streaming stores) and 16384 (32-byte ones, where the CPU has AVX2) */
  unsigned char *dal = dst + (64 - (uintptr_t)dst % 64) % 64;
  for (int64_t rows = 4100, cols = 4096; rows >= 4096; rows -= 4, cols += 4) {
    for (size_t i = 0; i < (size_t)(rows * cols); i++) f[i] = (float)i;
    tstor_storage *ss = wrap(src, (size_t)(rows * cols) * 4), *ds = wrap(dal, (size_t)(rows * cols) * 4);
    tstor_tensor *a, *at, *out;
    int64_t sizes[2] = {rows, cols}, tsizes[2] = {cols, rows};
    ck_tstor_ok(tstor_tensor_on_storage(ss, TSTOR_FLOAT32, 0, 2, sizes, NULL, &a));
    ck_tstor_ok(tstor_tensor_transpose(a, 0, 1, &at));
    ck_tstor_ok(tstor_tensor_on_storage(ds, TSTOR_FLOAT32, 0, 2, tsizes, NULL, &out));
    ck_tstor_ok(tstor_tensor_copy_(out, at));
    const float *o = (const float *)(void *)dal;
    for (int64_t i = 0; i < cols; i++)
      for (int64_t j = 0; j < rows; j++)
        if (o[i * rows + j] != (float)(j * cols + i))
          ck_abort_msg("transpose: [%lld, %lld] is %g", (long long)i, (long long)j,
                       (double)o[i * rows + j]);
    tstor_tensor_release(out);
    tstor_tensor_release(at);
    tstor_tensor_release(a);
    tstor_storage_release(ss);
    tstor_storage_release(ds);
  }
  free(src);
  free(dst);
}

START_TEST(large_work_is_right_under_every_policy) {
  int old = tstor_set_num_threads(2);
  tstor_set_store_policy(policies[_i]);
  /* under the automatic policy, until every kind's first trial has ended */
  int runs = policies[_i] == TSTOR_STORES_AUTO ? TRIAL_CALLS : 1;
  /* trials may last a while under a sanitizer: six runs took over a minute
   * under TSan, the default limit */
  tstor__stores_set_recheck(60 * 1000000000LL);
  tstor_store_choice c = TSTOR_STORE_CHOICE_INIT;
  for (int r = 0; r < runs; r++) {
    large_work_is_right();
    for (size_t k = 0; k < sizeof works / sizeof works[0]; k++) {
      ck_tstor_ok(tstor_get_store_choice(works[k], work_bytes[k], &c));
      /* a trial ends with its last call, not before: its operation's sixth
       * (its two fills, and its two transposing copies, are two operations
       * each, and a trial compares calls of one) */
      ck_assert_msg(c.measured == (r + 1 >= TRIAL_CALLS &&
                                   policies[_i] == TSTOR_STORES_AUTO),
                    "work %zu after %d runs: measured %d", k, r + 1, c.measured);
    }
  }
  for (size_t k = 0; k < sizeof works / sizeof works[0]; k++) {
    ck_tstor_ok(tstor_get_store_choice(works[k], work_bytes[k], &c));
    if (policies[_i] == TSTOR_STORES_AUTO) {
      ck_assert(c.streaming_speedup > 0 && c.age_s >= 0 && c.age_s < 600);
    } else {
      ck_assert_int_eq(c.measured, 0);
      ck_assert_int_eq(c.streaming, policies[_i] == TSTOR_STORES_STREAMING);
    }
  }
  tstor_set_store_policy(TSTOR_STORES_AUTO);
  tstor__stores_set_recheck(0);
  tstor_set_num_threads(old);
}
END_TEST

/* Trying again: once a choice is older than the recheck time, or eight times
 * that where one store was more than 25% slower, the next calls are a trial,
 * whose end makes the choice new; calls before that time leave a settled
 * choice as it is. Every call's bytes are right. */
static void copy_checked(tstor_storage *d, tstor_storage *s, unsigned char *dst,
                         const unsigned char *src) {
  memset(dst, 0, BIG);
  ck_tstor_ok(tstor_storage_copy(d, s));
  ck_assert_int_eq(memcmp(dst, src, BIG), 0);
}

START_TEST(a_stale_choice_is_tried_again) {
  int old = tstor_set_num_threads(2);
  tstor__stores_set_recheck(60 * 1000000000LL);
  unsigned char *src = random_bytes(BIG, 11), *dst = malloc(BIG);
  ck_assert_ptr_nonnull(dst);
  tstor_storage *s = wrap(src, BIG), *d = wrap(dst, BIG);
  tstor_store_choice first = TSTOR_STORE_CHOICE_INIT, again = TSTOR_STORE_CHOICE_INIT;
  /* the first trial, the one that confirms a verdict against streaming, and
   * the second look a close call gets */
  for (int k = 0; k < 3 * TRIAL_CALLS; k++) copy_checked(d, s, dst, src);
  ck_tstor_ok(tstor_get_store_choice(TSTOR_WORK_COPY, 2 * BIG, &first));
  ck_assert(first.measured);
  /* fresh: more calls do not start a trial */
  for (int k = 0; k < TRIAL_CALLS; k++) copy_checked(d, s, dst, src);
  ck_tstor_ok(tstor_get_store_choice(TSTOR_WORK_COPY, 2 * BIG, &again));
  ck_assert_msg(again.age_s > first.age_s && again.streaming_speedup == first.streaming_speedup,
                "tried again within %.3f s", again.age_s);
  tstor__stores_set_recheck(100 * 1000 * 1000);
  struct timespec past = {0, 900 * 1000 * 1000}; /* past 8 x 0.1 s */
  nanosleep(&past, NULL);
  copy_checked(d, s, dst, src); /* starts the trial */
  tstor__stores_set_recheck(60 * 1000000000LL); /* which a slow build must not outlast */
  for (int k = 1; k < TRIAL_CALLS; k++) copy_checked(d, s, dst, src);
  ck_tstor_ok(tstor_get_store_choice(TSTOR_WORK_COPY, 2 * BIG, &again));
  ck_assert_msg(again.age_s < 0.5, "not tried again: %.3f s old", again.age_s);
  tstor__stores_set_recheck(0);
  tstor_storage_release(s);
  tstor_storage_release(d);
  free(src);
  free(dst);
  tstor_set_num_threads(old);
}
END_TEST

/* n calls converting float16 (bfloat16 with `brain`) to float32, the first
 * element of each checked. */
static void widen(float *dst, uint16_t *src, size_t n, int brain, int calls) {
  for (int k = 0; k < calls; k++) {
    dst[0] = -1;
    ck_tstor_ok(tstor_dtype_convert(dst, TSTOR_FLOAT32, src, brain ? TSTOR_BFLOAT16 : TSTOR_FLOAT16, n));
    ck_assert(dst[0] == (brain ? 1.0f : 2.0f));
  }
}

static int measured(size_t bytes) {
  tstor_store_choice c = TSTOR_STORE_CHOICE_INIT;
  ck_tstor_ok(tstor_get_store_choice(TSTOR_WORK_WIDEN, bytes, &c));
  return c.measured;
}

/* Each operation keeps a choice of its own: float16 -> float32 and bfloat16
 * -> float32 are both widening conversions of one size class, and each
 * operation's calls count in its own trials only, whatever comes between
 * them; tstor_get_store_choice reports the operation called last. */
START_TEST(each_operation_keeps_its_own_choice) {
  int old = tstor_set_num_threads(2);
  tstor__stores_set_recheck(60 * 1000000000LL); /* a slow build's trials must not run out */
  size_t n = (size_t)24 << 20; /* 144 MiB read and written: 128 MiB up */
  uint16_t *src = calloc(n, 2);
  float *dst = malloc(n * 4);
  ck_assert(src && dst);
  src[0] = 0x4000; /* 2 as float16; 0x3f80 is 1 as bfloat16 */
  widen(dst, src, n, 0, 1);
  src[0] = 0x3f80;
  widen(dst, src, n, 1, 2);
  src[0] = 0x4000;
  widen(dst, src, n, 0, TRIAL_CALLS - 2);
  ck_assert(!measured(n * 6));
  widen(dst, src, n, 0, 1); /* float16's sixth */
  ck_assert(measured(n * 6));
  src[0] = 0x3f80;
  widen(dst, src, n, 1, 1); /* bfloat16's third: its own trial goes on */
  ck_assert(!measured(n * 6));
  widen(dst, src, n, 1, TRIAL_CALLS - 4);
  ck_assert(!measured(n * 6));
  widen(dst, src, n, 1, 1);
  ck_assert(measured(n * 6));
  free(src);
  free(dst);
  tstor__stores_set_recheck(0);
  tstor_set_num_threads(old);
}
END_TEST

/* TSTOR__STORE_OPERATIONS choices are kept for a kind and size: one more
 * operation takes the place of the one used longest ago, which starts over
 * unmeasured when it comes back; the others keep theirs. Widening
 * conversions from one byte to two, 24 MiB each (the 16-32 MiB class). */
static void widen_bytes(void *dst, tstor_dtype to, const void *src, tstor_dtype from, size_t n,
                        int calls) {
  for (int k = 0; k < calls; k++) ck_tstor_ok(tstor_dtype_convert(dst, to, src, from, n));
}

START_TEST(an_operation_gives_way_to_newer_ones) {
  int old = tstor_set_num_threads(2);
  tstor__stores_set_recheck(60 * 1000000000LL);
  size_t n = (size_t)8 << 20;
  void *src = calloc(n, 1), *dst = malloc(n * 2);
  ck_assert(src && dst);
  static const tstor_dtype from[] = {TSTOR_UINT8, TSTOR_INT8, TSTOR_BOOL};
  static const tstor_dtype to[] = {TSTOR_INT16, TSTOR_FLOAT16, TSTOR_BFLOAT16};
  widen_bytes(dst, to[0], src, from[0], n, TRIAL_CALLS);
  ck_assert(measured(n * 3));
  /* the others once each, the first of them through its own whole trial */
  int others = 0;
  for (int f = 0; f < 3 && others < TSTOR__STORE_OPERATIONS; f++)
    for (int t = 0; t < 3 && others < TSTOR__STORE_OPERATIONS; t++) {
      if (f == 0 && t == 0) continue;
      widen_bytes(dst, to[t], src, from[f], n, others == 0 ? TRIAL_CALLS : 1);
      ck_assert_int_eq(measured(n * 3), others == 0);
      if (others++ == 0) { /* uint8 -> int16 still has its choice */
        widen_bytes(dst, to[0], src, from[0], n, 1);
        ck_assert(measured(n * 3));
        widen_bytes(dst, to[1], src, from[0], n, 1);
        ck_assert(measured(n * 3));
      }
    }
  ck_assert_int_eq(others, TSTOR__STORE_OPERATIONS);
  /* uint8 -> int16 was used longest ago: gone */
  widen_bytes(dst, to[0], src, from[0], n, 1);
  ck_assert(!measured(n * 3));
  free(src);
  free(dst);
  tstor__stores_set_recheck(0);
  tstor_set_num_threads(old);
}
END_TEST

/* The decision at a trial's end: each store's best call (ns per byte) stands
 * for it, so a call that lost its thread changes nothing; streaming stores
 * take over when they are 8% faster and keep their place while 2% faster,
 * and within that ordinary stores are chosen. */
START_TEST(the_decision_takes_each_stores_best_call) {
  static const struct {
    int was;
    double ordinary[2], streaming[2];
    int now;
  } cases[] = {
      {1, {0.90, 0.95}, {1.00, 1.00}, 0}, /* ordinary stores 10% faster */
      {1, {1.01, 1.02}, {1.00, 1.00}, 0}, /* streaming 1% faster: not enough to stay */
      {1, {1.03, 1.05}, {1.00, 1.01}, 1}, /* 3%: enough */
      {0, {1.05, 1.06}, {1.00, 1.00}, 0}, /* 5%: not enough to take over */
      {0, {1.10, 1.10}, {1.00, 1.05}, 1}, /* 10% */
      {0, {1.10, 1.30}, {3.00, 1.00}, 1}, /* a streaming call lost its thread */
      {1, {9.00, 0.90}, {1.00, 1.02}, 0}, /* an ordinary one did */
      {0, {1.00, 1.00}, {1.00, 1.00}, 0},
      {1, {1.00, 1.00}, {1.00, 1.00}, 0},
      {0, {1.00, 1.30}, {0.80, 5.00}, 1},
  };
  _Static_assert(TSTOR__STORE_SAMPLES == 2, "the cases give two calls of each store");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double sample[2][TSTOR__STORE_SAMPLES], est[2];
    memcpy(sample[0], cases[i].ordinary, sizeof sample[0]);
    memcpy(sample[1], cases[i].streaming, sizeof sample[1]);
    ck_assert_msg(tstor__stores_decide(cases[i].was, (const double(*)[TSTOR__STORE_SAMPLES])sample,
                                       est) == cases[i].now,
                  "case %zu", i);
    double lo_o = cases[i].ordinary[0] < cases[i].ordinary[1] ? cases[i].ordinary[0] : cases[i].ordinary[1];
    double lo_s = cases[i].streaming[0] < cases[i].streaming[1] ? cases[i].streaming[0] : cases[i].streaming[1];
    ck_assert_msg(est[0] == lo_o && est[1] == lo_s, "case %zu: %g, %g", i, est[0], est[1]);
  }
}
END_TEST

/* A later trial's verdict against the current store takes effect only when
 * the next trial agrees: a change of the memory's mode between a trial's two
 * runs misjudges one trial, rarely two in a row. */
START_TEST(a_change_of_store_needs_two_trials_in_a_row) {
  static const struct {
    int was, verdict, doubt, now, doubt_after;
  } cases[] = {
      {0, 0, 0, 0, 0}, {1, 1, 0, 1, 0}, /* agreement */
      {0, 1, 0, 0, 1}, {1, 0, 0, 1, 1}, /* a first verdict against: kept, in doubt */
      {0, 1, 1, 1, 0}, {1, 0, 1, 0, 0}, /* the second in a row: changed */
      {0, 0, 1, 0, 0}, {1, 1, 1, 1, 0}, /* the doubt not confirmed */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int doubt = cases[i].doubt;
    ck_assert_msg(tstor__stores_confirm(cases[i].was, cases[i].verdict, &doubt) == cases[i].now,
                  "case %zu", i);
    ck_assert_msg(doubt == cases[i].doubt_after, "case %zu: doubt %d", i, doubt);
  }
  /* verdicts that alternate, as a mode changing back and forth would give,
   * never move the choice; two alike in a row do, once */
  static const int flipping[] = {1, 0, 1, 0, 1, 0}, steady[] = {1, 1, 1, 1};
  int store = 0, doubt = 0;
  for (size_t k = 0; k < sizeof flipping / sizeof flipping[0]; k++)
    store = tstor__stores_confirm(store, flipping[k], &doubt);
  ck_assert_int_eq(store, 0);
  int changes = 0;
  for (size_t k = 0; k < sizeof steady / sizeof steady[0]; k++) {
    int next = tstor__stores_confirm(store, steady[k], &doubt);
    changes += next != store;
    ck_assert_msg(next == (k >= 1), "after %zu steady verdicts: %d", k + 1, next);
    store = next;
  }
  ck_assert_int_eq(changes, 1);
  ck_assert_int_eq(doubt, 0);
}
END_TEST

/* A trial whose store won by less than its margin, the other store faster,
 * gets a second look at once, and only one in a row; the second look's
 * verdict against the store takes effect at once. */
START_TEST(a_close_call_gets_a_second_look) {
  static const struct {
    int streaming;
    double est[2]; /* ns per byte: ordinary, streaming */
    int doubt, looked, look, doubt_after, looked_after;
  } cases[] = {
      {0, {1.05, 1.00}, 0, 0, 1, 1, 1}, /* streaming faster, under its margin */
      {1, {0.99, 1.00}, 0, 0, 1, 1, 1}, /* ordinary faster, under its margin */
      {0, {1.00, 1.05}, 0, 0, 0, 0, 0}, /* the kept store was the faster */
      {1, {1.10, 1.00}, 0, 0, 0, 0, 0},
      {0, {1.00, 1.00}, 0, 0, 0, 0, 0}, /* a tie is no close call */
      {0, {1.05, 1.00}, 0, 1, 0, 0, 0}, /* just looked again: settled */
      {0, {1.05, 1.00}, 1, 0, 0, 1, 0}, /* a doubt already brings a trial */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int doubt = cases[i].doubt, looked = cases[i].looked;
    ck_assert_msg(tstor__stores_second_look(cases[i].streaming, cases[i].est, &doubt, &looked) ==
                      cases[i].look,
                  "case %zu", i);
    ck_assert_msg(doubt == cases[i].doubt_after && looked == cases[i].looked_after,
                  "case %zu: doubt %d, looked %d", i, doubt, looked);
  }
  /* Where ordinary stores are the store, a trial that finds streaming ones
   * 1.05x faster keeps them; the second look finds streaming 1.3x faster
   * and streams. */
  const double near[2][TSTOR__STORE_SAMPLES] = {{1.05, 1.06}, {1.00, 1.01}};
  const double apart[2][TSTOR__STORE_SAMPLES] = {{1.30, 1.32}, {1.00, 1.01}};
  double est[2];
  int doubt = 0, looked = 0;
  int store = tstor__stores_decide(0, near, est);
  ck_assert_int_eq(store, 0);
  ck_assert_int_eq(tstor__stores_second_look(store, est, &doubt, &looked), 1);
  store = tstor__stores_confirm(store, tstor__stores_decide(store, apart, est), &doubt);
  ck_assert_int_eq(store, 1);
  ck_assert_int_eq(tstor__stores_second_look(store, est, &doubt, &looked), 0);
  ck_assert_int_eq(doubt, 0);
  /* close calls in a row look again every other trial, not at every call */
  int looks = 0;
  store = 0;
  for (int k = 0; k < 6; k++) {
    store = tstor__stores_confirm(store, tstor__stores_decide(store, near, est), &doubt);
    ck_assert_int_eq(store, 0);
    looks += tstor__stores_second_look(store, est, &doubt, &looked);
  }
  ck_assert_int_eq(looks, 3);
}
END_TEST

int main(void) {
  Suite *s = suite_create("stores");
  TCase *tc = tcase_create("stores");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, the_policy_is_set_and_read_back);
  tcase_add_test(tc, the_choice_is_refused_bad_arguments);
  tcase_add_test(tc, the_decision_takes_each_stores_best_call);
  tcase_add_test(tc, a_change_of_store_needs_two_trials_in_a_row);
  tcase_add_test(tc, a_close_call_gets_a_second_look);
  tcase_add_loop_test(tc, large_work_is_right_under_every_policy, 0,
                      (int)(sizeof policies / sizeof policies[0]));
  tcase_add_test(tc, a_stale_choice_is_tried_again);
  tcase_add_test(tc, each_operation_keeps_its_own_choice);
  tcase_add_test(tc, an_operation_gives_way_to_newer_ones);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
