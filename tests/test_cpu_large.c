/* The cpu backend's large blocks (past the 1 MiB per-thread size classes):
 * huge-page alignment, the context's cache of freed ones, its byte bound,
 * aging and emptying, its keys, and threads that free what others allocated. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

static tstor_context *open_cpu(const char *keys) {
  char ini[1024];
  snprintf(ini, sizeof ini, "[tstor]\ndefault_device = cpu\n[backend cpu]\nlibrary = tstor-cpu.so\n%s\n",
           keys ? keys : "");
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(ini, "large.ini", &ctx));
  return ctx;
}

static tstor_device cpu_of(tstor_context *ctx) {
  tstor_device dev;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &dev));
  return dev;
}

static tstor_stats stats_of(tstor_context *ctx) {
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, cpu_of(ctx), &st));
  return st;
}

/* Bytes held in caches: reserved less what live storages use. */
static uint64_t cached_of(tstor_context *ctx) {
  tstor_stats st = stats_of(ctx);
  return st.reserved - st.active;
}

static tstor_storage *new_storage(tstor_context *ctx, size_t nbytes) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu_of(ctx), nbytes, &s));
  memset(tstor_storage_data(s), 0x5a, nbytes);
  return s;
}

START_TEST(freed_blocks_serve_the_next_request) {
  tstor_context *ctx = open_cpu(NULL);
  static const size_t sizes[] = {MIB + 1, 3 * MIB / 2, 2 * MIB, 5 * MIB + 7, 64 * MIB};
  uint64_t hits = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    tstor_storage *a = new_storage(ctx, sizes[i]);
    void *p = tstor_storage_data(a);
    if (sizes[i] >= 2 * MIB) ck_assert_uint_eq((uintptr_t)p % (2 * MIB), 0); /* huge pages */
    tstor_storage_release(a);
    ck_assert_uint_ge(cached_of(ctx), sizes[i]);
    tstor_storage *b = new_storage(ctx, sizes[i]);
    ck_assert_ptr_eq(tstor_storage_data(b), p);
    ck_assert_uint_eq(stats_of(ctx).cache_hits, ++hits);
    tstor_storage_release(b);
  }
  /* Another size class of huge pages is a miss. */
  tstor_storage *c = new_storage(ctx, 7 * MIB);
  ck_assert_uint_eq(stats_of(ctx).cache_hits, hits);
  tstor_storage_release(c);
  ck_tstor_ok(tstor_device_empty_cache(ctx, cpu_of(ctx)));
  ck_assert_uint_eq(cached_of(ctx), 0);
  ck_assert_uint_eq(stats_of(ctx).reserved, 0);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(the_bound_is_never_exceeded) {
  tstor_context *ctx = open_cpu("large_cache_mb = 10");
  static const size_t sizes[] = {3 * MIB, 4 * MIB, 5 * MIB, MIB + 64, 9 * MIB, 2 * MIB, 11 * MIB,
                                 6 * MIB, 10 * MIB};
  tstor_storage *live[sizeof sizes / sizeof sizes[0]];
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) live[i] = new_storage(ctx, sizes[i]);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    tstor_storage_release(live[i]);
    uint64_t cached = cached_of(ctx);
    ck_assert_msg(cached <= 10 * MIB, "%llu bytes cached after %zu releases",
                  (unsigned long long)cached, i + 1);
  }
  /* The newest block that fits stays: 10 MiB exactly. */
  ck_assert_uint_eq(cached_of(ctx), 10 * MIB);
  ck_assert_uint_le(stats_of(ctx).peak_reserved, 55 * MIB + 64 + 11 * MIB);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(aged_blocks_go_back) {
  tstor_context *ctx = open_cpu("large_cache_age_ms = 1000");
  tstor_storage_release(new_storage(ctx, 4 * MIB));
  tstor_storage_release(new_storage(ctx, 8 * MIB));
  ck_assert_uint_eq(cached_of(ctx), 12 * MIB);
  /* The reaper gives them back about a second later; a loaded machine may
   * take longer, so wait up to 10 s. */
  for (int i = 0; i < 1000 && cached_of(ctx) > 0; i++) usleep(10000);
  ck_assert_uint_eq(cached_of(ctx), 0);
  /* And the cache works again afterwards. */
  tstor_storage_release(new_storage(ctx, 4 * MIB));
  ck_assert_uint_eq(cached_of(ctx), 4 * MIB);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(young_blocks_stay) {
  tstor_context *ctx = open_cpu("large_cache_age_ms = 60000");
  tstor_storage_release(new_storage(ctx, 4 * MIB));
  usleep(200000);
  ck_assert_uint_eq(cached_of(ctx), 4 * MIB);
  tstor_context_close(ctx); /* gives them back: a leak checker would see them otherwise */
}
END_TEST

START_TEST(empty_cache_returns_everything) {
  tstor_context *ctx = open_cpu(NULL);
  tstor_storage *keep = new_storage(ctx, 3 * MIB);
  for (size_t mb = 2; mb <= 20; mb += 3) tstor_storage_release(new_storage(ctx, mb * MIB));
  tstor_storage_release(new_storage(ctx, 100)); /* a small block in the thread cache too */
  ck_assert_uint_gt(cached_of(ctx), 0);
  ck_tstor_ok(tstor_device_empty_cache(ctx, cpu_of(ctx)));
  ck_assert_uint_eq(cached_of(ctx), 0);
  ck_assert_uint_eq(stats_of(ctx).reserved, 4 * MIB); /* the live one, in whole huge pages */
  tstor_storage_release(keep);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(off_by_config) {
  static const char *const keys[] = {"large_cache_mb = 0", "cache = no"};
  for (int i = 0; i < 2; i++) {
    tstor_context *ctx = open_cpu(keys[i]);
    for (int k = 0; k < 3; k++) tstor_storage_release(new_storage(ctx, 4 * MIB));
    ck_assert_uint_eq(stats_of(ctx).cache_hits, 0);
    ck_assert_uint_eq(stats_of(ctx).reserved, 0);
    tstor_context_close(ctx);
  }
}
END_TEST

START_TEST(keys_are_decimal) {
  static const char *const bad[] = {
      "large_cache_mb = 0x10",   "large_cache_mb = -1",       "large_cache_mb = 1e3",
      "large_cache_mb = 16 MiB", "large_cache_mb =",          "large_cache_mb = 1048577",
      "large_cache_mb = +5",     "large_cache_age_ms = 0x64", "large_cache_age_ms = 1.5",
      "large_cache_age_ms = 86400001", "large_cache_age_ms = 99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char ini[512];
    snprintf(ini, sizeof ini, "[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n%s\n", bad[i]);
    tstor_context *ctx = NULL;
    ck_tstor_err(tstor_context_open_string(ini, "bad.ini", &ctx), TSTOR_ECONFIG);
    ck_assert_ptr_null(ctx);
    ck_last_error_has("bad.ini:4");
    ck_last_error_has("large_cache");
    ck_last_error_has("decimal");
  }
  /* A leading zero is decimal, not octal: 010 is ten. */
  tstor_context *ctx = open_cpu("large_cache_mb = 010\nlarge_cache_age_ms = 0600000");
  tstor_storage_release(new_storage(ctx, 8 * MIB));
  tstor_storage_release(new_storage(ctx, 10 * MIB));
  ck_assert_uint_eq(cached_of(ctx), 10 * MIB);
  tstor_context_close(ctx);
}
END_TEST

/* ---------------------------------------------------------------- threads */

/* Threads hand blocks to each other through a ring: each allocates, stamps
 * its block, and frees one that another thread allocated. A block handed out
 * twice while live would be found in `live` or carry another's stamp. */
#define RING 8
#define THREADS 4
#define ROUNDS 300

static tstor_context *sctx;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static tstor_storage *ring[RING];
static void *live[RING * 2 + THREADS * 2];
static atomic_int failures;

static int live_add(void *p) {
  for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
    if (live[i] == p) return 0;
  for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
    if (!live[i]) {
      live[i] = p;
      return 1;
    }
  return 0;
}
static void live_remove(void *p) {
  for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
    if (live[i] == p) live[i] = NULL;
}

static void *stress(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  static const size_t sizes[] = {MIB + 4096, 2 * MIB, 3 * MIB, 4 * MIB};
  tstor_device dev = cpu_of(sctx);
  for (int r = 0; r < ROUNDS; r++) {
    seed = seed * 1103515245u + 12345u;
    size_t n = sizes[(seed >> 16) % 4];
    tstor_storage *s;
    if (tstor_storage_new(sctx, dev, n, &s) != 0) {
      atomic_fetch_add(&failures, 1);
      continue;
    }
    uint64_t *w = tstor_storage_data(s);
    uint64_t stamp = ((uint64_t)seed << 20) ^ (uint64_t)r;
    w[0] = stamp;
    w[n / 8 - 1] = stamp;
    if (w[0] != stamp || w[n / 8 - 1] != stamp) atomic_fetch_add(&failures, 1);
    pthread_mutex_lock(&ring_lock);
    if (!live_add(w)) atomic_fetch_add(&failures, 1);
    size_t slot = (seed >> 8) % RING;
    tstor_storage *old = ring[slot];
    ring[slot] = s;
    pthread_mutex_unlock(&ring_lock); /* s is the ring's now: another thread may free it */
    if (old) {
      uint64_t *o = tstor_storage_data(old);
      size_t on = tstor_storage_nbytes(old);
      if (o[0] != o[on / 8 - 1]) atomic_fetch_add(&failures, 1);
      pthread_mutex_lock(&ring_lock);
      live_remove(o);
      pthread_mutex_unlock(&ring_lock);
      tstor_storage_release(old);
    }
    if (r % 50 == 49) tstor_device_empty_cache(sctx, dev);
  }
  return NULL;
}

START_TEST(threads_free_each_others_blocks) {
  sctx = open_cpu("large_cache_mb = 12\nlarge_cache_age_ms = 5");
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, stress, (void *)(uintptr_t)(i * 7919 + 1)), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  ck_assert_int_eq(atomic_load(&failures), 0);
  for (int i = 0; i < RING; i++)
    if (ring[i]) {
      live_remove(tstor_storage_data(ring[i]));
      tstor_storage_release(ring[i]);
      ring[i] = NULL;
    }
  tstor_stats st = stats_of(sctx);
  ck_assert_uint_eq(st.alloc_count, (uint64_t)THREADS * ROUNDS);
  ck_assert_uint_eq(st.free_count, st.alloc_count);
  ck_assert_uint_eq(st.active, 0);
  ck_assert_uint_le(st.reserved, 12 * MIB + 4 * MIB); /* large bound + the small caches' */
  tstor_context_close(sctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cpu_large");
  TCase *tc = tcase_create("large");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, freed_blocks_serve_the_next_request);
  tcase_add_test(tc, the_bound_is_never_exceeded);
  tcase_add_test(tc, aged_blocks_go_back);
  tcase_add_test(tc, young_blocks_stay);
  tcase_add_test(tc, empty_cache_returns_everything);
  tcase_add_test(tc, off_by_config);
  tcase_add_test(tc, keys_are_decimal);
  tcase_add_test(tc, threads_free_each_others_blocks);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
