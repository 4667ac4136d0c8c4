/* The cpu backend's per-thread block cache and its statistics, seen through
 * the public API: storages on "cpu" and tstor_device_stats. */
#include "testutil.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

/* A huge request must fail with TSTOR_ENOMEM, not stop the sanitizer run. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* Opens a context with the cpu backend and `keys` in its section. */
static tstor_context *open_cpu(const char *keys) {
  char ini[1024];
  snprintf(ini, sizeof ini,
           "[tstor]\n"
           "default_device = cpu\n"
           "\n"
           "[backend cpu]\n"
           "library = tstor-cpu.so\n"
           "%s\n",
           keys ? keys : "");
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(ini, "cache.ini", &ctx));
  return ctx;
}

static tstor_device cpu_of(tstor_context *ctx) {
  tstor_device dev;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &dev));
  return dev;
}

static tstor_stats stats_of(tstor_context *ctx) {
  tstor_stats st = TSTOR_STATS_INIT;
  memset(&st, 0xff, sizeof st);
  ck_tstor_ok(tstor_device_stats(ctx, cpu_of(ctx), &st));
  return st;
}

static tstor_storage *new_storage(tstor_context *ctx, size_t nbytes) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu_of(ctx), nbytes, &s));
  if (nbytes) {
    ck_assert_uint_eq((uintptr_t)tstor_storage_data(s) % 64, 0);
    memset(tstor_storage_data(s), 0x5a, nbytes); /* every byte is ours to write */
  }
  return s;
}

/* The checks every quiet moment must pass: nothing allocated, counts balanced. */
static void expect_idle(tstor_context *ctx, uint64_t allocs) {
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.allocated, 0);
  ck_assert_uint_eq(st.active, 0);
  ck_assert_uint_eq(st.alloc_count, allocs);
  ck_assert_uint_eq(st.free_count, allocs);
}

/* ----------------------------------------------------------------- reuse */

START_TEST(reuse_within_each_size_class) {
  tstor_context *ctx = open_cpu(NULL);
  /* A freed block serves the next request of its class, whatever the exact size. */
  static const size_t pairs[][2] = {{1, 64},          {65, 128},        {200, 256},
                                    {300, 320},       {4000, 4096},     {4097, 5000},
                                    {60 * KIB, 64 * KIB}, {900 * KIB, MIB}, {MIB, MIB - 1}};
  uint64_t hits = 0, allocs = 0;
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    ck_tstor_ok(tstor_device_empty_cache(ctx, cpu_of(ctx))); /* a miss first */
    tstor_storage *a = new_storage(ctx, pairs[i][0]);
    void *p = tstor_storage_data(a);
    tstor_storage_release(a);
    tstor_storage *b = new_storage(ctx, pairs[i][1]);
    ck_assert_msg(tstor_storage_data(b) == p, "%zu then %zu bytes: block not reused",
                  pairs[i][0], pairs[i][1]);
    tstor_storage_release(b);
    allocs += 2;
    hits += 1;
    tstor_stats st = stats_of(ctx);
    ck_assert_uint_eq(st.cache_hits, hits);
    ck_assert_uint_eq(st.alloc_count, allocs);
  }
  expect_idle(ctx, allocs);
  tstor_context_close(ctx);
}
END_TEST

/* Past 1 MiB blocks are the large cache's (test_cpu_large); without it they go
 * straight back. */
START_TEST(larger_than_a_mebibyte_is_not_cached) {
  tstor_context *ctx = open_cpu("large_cache_mb = 0");
  for (int i = 0; i < 3; i++) tstor_storage_release(new_storage(ctx, MIB + 1));
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.cache_hits, 0);
  ck_assert_uint_eq(st.reserved, 0);
  expect_idle(ctx, 3);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(zero_bytes_take_no_block) {
  tstor_context *ctx = open_cpu(NULL);
  tstor_storage *s = new_storage(ctx, 0);
  ck_assert_ptr_null(tstor_storage_data(s));
  tstor_storage_release(s);
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.alloc_count, 0);
  ck_assert_uint_eq(st.reserved, 0);
  tstor_context_close(ctx);
}
END_TEST

/* ------------------------------------------------------------ statistics */

START_TEST(stats_follow_allocations_and_releases) {
  tstor_context *ctx = open_cpu("large_cache_mb = 0");
  static const size_t sizes[] = {10, 64, 100, 4096, 5000, 200 * KIB, MIB, 3 * MIB};
  enum { N = sizeof sizes / sizeof sizes[0] };
  tstor_storage *s[N];
  size_t total = 0;
  for (int i = 0; i < N; i++) {
    s[i] = new_storage(ctx, sizes[i]);
    total += sizes[i];
  }
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.allocated, total);
  ck_assert_uint_ge(st.active, total);
  ck_assert_uint_lt(st.active, total + total / 4 + N * 64); /* classes round by under 25% */
  ck_assert_uint_eq(st.reserved, st.active);               /* nothing cached yet */
  ck_assert_uint_eq(st.peak_allocated, total);
  ck_assert_uint_eq(st.peak_active, st.active);
  ck_assert_uint_eq(st.alloc_count, N);
  ck_assert_uint_eq(st.free_count, 0);
  ck_assert_uint_eq(st.cache_hits, 0);
  uint64_t active = st.active;

  for (int i = 0; i < N; i++) tstor_storage_release(s[i]);
  st = stats_of(ctx);
  ck_assert_uint_eq(st.allocated, 0);
  ck_assert_uint_eq(st.active, 0);
  ck_assert_uint_eq(st.free_count, N);
  /* Everything up to 1 MiB is cached and still reserved; 3 MiB went back. */
  ck_assert_uint_gt(st.reserved, 0);
  ck_assert_uint_lt(st.reserved, active);
  ck_assert_uint_eq(st.peak_allocated, total);
  ck_assert_uint_eq(st.peak_reserved, active);
  ck_assert_uint_eq(st.oom_count, 0);

  ck_tstor_ok(tstor_device_empty_cache(ctx, cpu_of(ctx)));
  st = stats_of(ctx);
  ck_assert_uint_eq(st.reserved, 0);
  ck_tstor_ok(tstor_device_reset_peak(ctx, cpu_of(ctx)));
  st = stats_of(ctx);
  ck_assert_uint_eq(st.peak_allocated, 0);
  ck_assert_uint_eq(st.peak_active, 0);
  ck_assert_uint_eq(st.peak_reserved, 0);

  /* After emptying, the same sizes are misses again. */
  tstor_storage_release(new_storage(ctx, 100));
  st = stats_of(ctx);
  ck_assert_uint_eq(st.cache_hits, 0);
  ck_assert_uint_eq(st.peak_allocated, 100);
  expect_idle(ctx, N + 1);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(peak_is_the_high_water_mark) {
  tstor_context *ctx = open_cpu(NULL);
  tstor_storage *a = new_storage(ctx, 1000), *b = new_storage(ctx, 3000);
  tstor_storage_release(a);
  tstor_storage *c = new_storage(ctx, 500); /* 3500 now, 4000 before */
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.allocated, 3500);
  ck_assert_uint_eq(st.peak_allocated, 4000);
  ck_tstor_ok(tstor_device_reset_peak(ctx, cpu_of(ctx)));
  ck_assert_uint_eq(stats_of(ctx).peak_allocated, 3500);
  tstor_storage_release(b);
  tstor_storage_release(c);
  st = stats_of(ctx);
  ck_assert_uint_eq(st.peak_allocated, 3500);
  ck_assert_uint_ge(st.peak_reserved, st.reserved);
  expect_idle(ctx, 3);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(out_of_memory_is_counted) {
  tstor_context *ctx = open_cpu(NULL);
  tstor_storage *s = NULL;
  ck_tstor_err(tstor_storage_new(ctx, cpu_of(ctx), (size_t)1 << 50, &s), TSTOR_ENOMEM);
  ck_assert_ptr_null(s);
  ck_last_error_has("cannot allocate");
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.oom_count, 1);
  ck_assert_uint_eq(st.alloc_count, 0);
  ck_assert_uint_eq(st.allocated, 0);
  tstor_context_close(ctx);
}
END_TEST

/* ---------------------------------------------------------------- config */

START_TEST(cache_off_via_config) {
  tstor_context *ctx = open_cpu("cache = no");
  for (int i = 0; i < 4; i++) tstor_storage_release(new_storage(ctx, 4096));
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.cache_hits, 0);
  ck_assert_uint_eq(st.reserved, 0);
  ck_assert_uint_eq(st.peak_allocated, 4096);
  expect_idle(ctx, 4);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(byte_cap_bounds_each_thread) {
  tstor_context *ctx = open_cpu("cache_max_bytes = 4096");
  tstor_storage *a = new_storage(ctx, 4096), *b = new_storage(ctx, 4096);
  tstor_storage_release(a);
  tstor_storage_release(b); /* over the cap: freed */
  ck_assert_uint_eq(stats_of(ctx).reserved, 4096);
  tstor_storage_release(new_storage(ctx, 64)); /* 4096 + 64 would pass the cap */
  ck_assert_uint_eq(stats_of(ctx).reserved, 4096);
  expect_idle(ctx, 3);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(block_cap_bounds_each_class) {
  tstor_context *ctx = open_cpu("cache_max_blocks = 2");
  tstor_storage *s[5];
  for (int i = 0; i < 5; i++) s[i] = new_storage(ctx, 100);
  for (int i = 0; i < 5; i++) tstor_storage_release(s[i]);
  ck_assert_uint_eq(stats_of(ctx).reserved, 2 * 128);
  for (int i = 0; i < 5; i++) s[i] = new_storage(ctx, 128);
  ck_assert_uint_eq(stats_of(ctx).cache_hits, 2);
  for (int i = 0; i < 5; i++) tstor_storage_release(s[i]);
  expect_idle(ctx, 10);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(bad_values_name_the_key_and_line) {
  static const struct {
    const char *keys;
    const char *key;
  } bad[] = {{"cache = maybe", "cache"},
             {"cache_max_bytes = -1", "cache_max_bytes"},
             {"cache_max_bytes = 2TiB", "cache_max_bytes"},
             {"cache_max_blocks = 99999999", "cache_max_blocks"},
             {"cache_max_blocks =", "cache_max_blocks"},
             {"cache_max_bytes = 0x100000", "cache_max_bytes"}, /* decimal only */
             {"cache_max_blocks = 0x20", "cache_max_blocks"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char ini[512];
    snprintf(ini, sizeof ini, "[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n%s\n",
             bad[i].keys);
    tstor_context *ctx = (tstor_context *)&ini; /* must be reset on failure */
    ck_tstor_err(tstor_context_open_string(ini, "bad.ini", &ctx), TSTOR_ECONFIG);
    ck_assert_ptr_null(ctx);
    ck_last_error_has("bad.ini:4");
    ck_last_error_has(bad[i].key);
  }
  /* The module went away cleanly: a good config still loads. */
  tstor_context *ctx = open_cpu("cache = yes\ncache_max_bytes = 01048576\ncache_max_blocks = 0");
  tstor_storage_release(new_storage(ctx, 64));
  ck_assert_uint_eq(stats_of(ctx).reserved, 0); /* no block may be kept */
  tstor_context_close(ctx);
}
END_TEST

/* -------------------------------------------------------------- contexts */

START_TEST(contexts_share_blocks_not_counts) {
  tstor_context *a = open_cpu(NULL), *b = open_cpu(NULL);
  tstor_storage *s = new_storage(a, 4096);
  void *p = tstor_storage_data(s);
  tstor_storage_release(s);
  s = new_storage(b, 4000);
  ck_assert_ptr_eq(tstor_storage_data(s), p);
  ck_assert_uint_eq(stats_of(a).cache_hits, 0);
  ck_assert_uint_eq(stats_of(b).cache_hits, 1);
  ck_assert_uint_eq(stats_of(a).allocated, 0);
  ck_assert_uint_eq(stats_of(b).allocated, 4000);
  /* The storage outlives both handles on its context. */
  tstor_context_close(a);
  tstor_context_close(b);
  memset(tstor_storage_data(s), 1, 4000);
  tstor_storage_release(s);
}
END_TEST

START_TEST(a_new_context_starts_from_zero) {
  tstor_context *keep = open_cpu(NULL);
  tstor_context *a = open_cpu(NULL);
  for (int i = 0; i < 5; i++) tstor_storage_release(new_storage(a, 64));
  expect_idle(a, 5);
  tstor_context_close(a);
  tstor_context *b = open_cpu(NULL); /* likely takes a's counters' place */
  tstor_stats st = stats_of(b);
  ck_assert_uint_eq(st.alloc_count, 0);
  ck_assert_uint_eq(st.cache_hits, 0);
  ck_assert_uint_eq(st.peak_allocated, 0);
  tstor_storage_release(new_storage(b, 64));
  ck_assert_uint_eq(stats_of(b).cache_hits, 1);
  expect_idle(b, 1);
  expect_idle(keep, 0);
  tstor_context_close(b);
  tstor_context_close(keep);
}
END_TEST

START_TEST(many_contexts_at_once) {
  enum { N = 20 };
  tstor_context *ctx[N];
  tstor_storage *s[N];
  for (int i = 0; i < N; i++) {
    ctx[i] = open_cpu(i % 2 ? "cache = no" : NULL);
    s[i] = new_storage(ctx[i], (size_t)(i + 1) * 100);
  }
  for (int i = 0; i < N; i++) {
    tstor_stats st = stats_of(ctx[i]);
    ck_assert_uint_eq(st.allocated, (size_t)(i + 1) * 100);
    ck_assert_uint_eq(st.alloc_count, 1);
    tstor_storage_release(s[i]);
    expect_idle(ctx[i], 1);
  }
  for (int i = 0; i < N; i++) tstor_context_close(ctx[i]);
}
END_TEST

/* --------------------------------------------------------------- threads */

typedef struct gate {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int step;
} gate;

static void gate_init(gate *g) {
  pthread_mutex_init(&g->lock, NULL);
  pthread_cond_init(&g->cond, NULL);
  g->step = 0;
}
static void gate_destroy(gate *g) {
  pthread_mutex_destroy(&g->lock);
  pthread_cond_destroy(&g->cond);
}
static void gate_set(gate *g, int step) {
  pthread_mutex_lock(&g->lock);
  g->step = step;
  pthread_cond_broadcast(&g->cond);
  pthread_mutex_unlock(&g->lock);
}
static void gate_wait(gate *g, int step) {
  pthread_mutex_lock(&g->lock);
  while (g->step < step) pthread_cond_wait(&g->cond, &g->lock);
  pthread_mutex_unlock(&g->lock);
}

typedef struct worker {
  tstor_context *ctx;
  tstor_storage *out; /* handed to the main thread */
  gate *g;
  int failures;
} worker;

static void *fill_cache_and_exit(void *arg) {
  worker *w = arg;
  tstor_device dev;
  if (tstor_device_parse(w->ctx, "cpu", &dev) != 0) w->failures++;
  tstor_storage *s[8];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 8; i++)
      if (tstor_storage_new(w->ctx, dev, (size_t)(i + 1) * 1000, &s[i]) != 0) w->failures++;
    for (int i = 0; i < 8; i++) tstor_storage_release(s[i]);
  }
  if (tstor_storage_new(w->ctx, dev, 4096, &w->out) != 0) w->failures++;
  return NULL;
}

START_TEST(thread_exit_gives_its_blocks_back) {
  tstor_context *ctx = open_cpu(NULL);
  worker w = {ctx, NULL, NULL, 0};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, fill_cache_and_exit, &w), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_int_eq(w.failures, 0);
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.allocated, 4096); /* the one handed over */
  ck_assert_uint_eq(st.reserved, 4096);  /* the thread's cache is gone */
  ck_assert_uint_eq(st.alloc_count, 25);
  ck_assert_uint_eq(st.cache_hits, 17); /* rounds 2 and 3, and the 4096 from 4000's class */
  ck_assert_uint_eq(st.free_count, 24);
  /* Released here, the block joins this thread's cache. */
  tstor_storage_release(w.out);
  st = stats_of(ctx);
  ck_assert_uint_eq(st.reserved, 4096);
  expect_idle(ctx, 25);
  tstor_context_close(ctx);
}
END_TEST

static void *allocate_one_and_exit(void *arg) {
  worker *w = arg;
  tstor_device dev;
  if (tstor_device_parse(w->ctx, "cpu", &dev) != 0 ||
      tstor_storage_new(w->ctx, dev, 1000, &w->out) != 0)
    w->failures++;
  return NULL;
}

/* What a thread allocated before it exited counts in the peaks that follow. */
START_TEST(peak_counts_what_exited_threads_hold) {
  tstor_context *ctx = open_cpu(NULL);
  worker w = {ctx, NULL, NULL, 0};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, allocate_one_and_exit, &w), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_int_eq(w.failures, 0);
  tstor_storage_release(new_storage(ctx, 500));
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.allocated, 1000);
  ck_assert_uint_eq(st.peak_allocated, 1500);
  ck_assert_uint_eq(st.peak_active, 1024 + 512);
  tstor_storage_release(w.out);
  expect_idle(ctx, 2);
  tstor_context_close(ctx);
}
END_TEST

static void *hold_a_cache(void *arg) {
  worker *w = arg;
  tstor_device dev;
  if (tstor_device_parse(w->ctx, "cpu", &dev) != 0) w->failures++;
  tstor_storage *s[3];
  for (int i = 0; i < 3; i++)
    if (tstor_storage_new(w->ctx, dev, 4096, &s[i]) != 0) w->failures++;
  for (int i = 0; i < 3; i++) tstor_storage_release(s[i]);
  gate_set(w->g, 1);
  gate_wait(w->g, 2); /* the main thread empties the cache */
  tstor_storage *small;
  if (tstor_storage_new(w->ctx, dev, 64, &small) != 0) w->failures++;
  tstor_storage_release(small);
  gate_set(w->g, 3);
  gate_wait(w->g, 4);
  return NULL;
}

START_TEST(empty_cache_reaches_other_threads) {
  tstor_context *ctx = open_cpu(NULL);
  gate g;
  gate_init(&g);
  worker w = {ctx, NULL, &g, 0};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, hold_a_cache, &w), 0);
  gate_wait(&g, 1);
  ck_assert_uint_eq(stats_of(ctx).reserved, 3 * 4096);
  ck_tstor_ok(tstor_device_empty_cache(ctx, cpu_of(ctx)));
  /* The other thread's blocks go at its next call. */
  gate_set(&g, 2);
  gate_wait(&g, 3);
  ck_assert_uint_eq(stats_of(ctx).reserved, 64);
  gate_set(&g, 4);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_int_eq(w.failures, 0);
  ck_assert_uint_eq(stats_of(ctx).reserved, 0);
  expect_idle(ctx, 4);
  gate_destroy(&g);
  tstor_context_close(ctx);
}
END_TEST

/* A thread that outlives the module: its cache goes with the last close, and
 * its exit must not call into the unloaded module. A later context loads the
 * module again and the same thread gets a fresh cache. */
static void *outlive_the_module(void *arg) {
  worker *w = arg;
  tstor_device dev;
  if (tstor_device_parse(w->ctx, "cpu", &dev) != 0) w->failures++;
  tstor_storage *s;
  if (tstor_storage_new(w->ctx, dev, 4096, &s) != 0) w->failures++;
  tstor_storage_release(s);
  gate_set(w->g, 1);
  gate_wait(w->g, 2); /* the main thread closes, reopens */
  if (tstor_device_parse(w->ctx, "cpu", &dev) != 0) w->failures++;
  if (tstor_storage_new(w->ctx, dev, 4096, &s) != 0) w->failures++;
  tstor_storage_release(s);
  gate_set(w->g, 3);
  gate_wait(w->g, 4);
  return NULL;
}

START_TEST(threads_outliving_the_module) {
  gate g;
  gate_init(&g);
  worker w = {open_cpu(NULL), NULL, &g, 0};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, outlive_the_module, &w), 0);
  gate_wait(&g, 1);
  ck_assert_uint_eq(stats_of(w.ctx).reserved, 4096);
  tstor_context_close(w.ctx); /* last close: the module goes */
  w.ctx = open_cpu(NULL);
  tstor_stats st = stats_of(w.ctx);
  ck_assert_uint_eq(st.reserved, 0);
  ck_assert_uint_eq(st.alloc_count, 0);
  gate_set(&g, 2);
  gate_wait(&g, 3);
  st = stats_of(w.ctx);
  ck_assert_uint_eq(st.cache_hits, 0);
  ck_assert_uint_eq(st.reserved, 4096);
  tstor_context_close(w.ctx); /* the thread still holds a cache */
  gate_set(&g, 4);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_int_eq(w.failures, 0);
  gate_destroy(&g);
}
END_TEST

/* Threads that used cpu storages exit while the main thread closes the last
 * context. Each exiting thread runs the module's thread-key destructor, which
 * may have started (and be waiting for the module's lock) when the close
 * deletes the key and the loader dlcloses the module: pthread_key_delete does
 * not wait for it. Unmapping the module then crashed the exiting thread (SEGV
 * under ASan in thread_exit). The module pins itself before it makes its
 * first record, so it stays mapped once a thread has a cache. */
enum { EXITERS = 6, EXIT_ROUNDS = 1000 };

typedef struct exiter {
  tstor_context *ctx;
  pthread_barrier_t *go;
  int failures;
} exiter;

static void *use_then_exit(void *arg) {
  exiter *e = arg;
  tstor_device dev;
  tstor_storage *s = NULL;
  if (tstor_device_parse(e->ctx, "cpu", &dev) != 0 || tstor_storage_new(e->ctx, dev, 256, &s) != 0)
    e->failures++;
  tstor_storage_release(s); /* the block goes to this thread's cache */
  pthread_barrier_wait(e->go);
  return NULL; /* the key's destructor runs now, against the close */
}

static int cpu_module_mapped(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tstor-cpu.so", getenv("TSTOR_BACKEND_DIR"));
  void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != NULL;
}

START_TEST(thread_exit_races_last_close) {
  for (int round = 0; round < EXIT_ROUNDS; round++) {
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, EXITERS + 1);
    exiter e[EXITERS];
    pthread_t t[EXITERS];
    tstor_context *ctx = open_cpu(NULL);
    for (int i = 0; i < EXITERS; i++) {
      e[i] = (exiter){ctx, &go, 0};
      ck_assert_int_eq(pthread_create(&t[i], NULL, use_then_exit, &e[i]), 0);
    }
    pthread_barrier_wait(&go);
    tstor_context_close(ctx); /* the last close, while the threads exit */
    for (int i = 0; i < EXITERS; i++) {
      ck_assert_int_eq(pthread_join(t[i], NULL), 0);
      ck_assert_int_eq(e[i].failures, 0);
    }
    pthread_barrier_destroy(&go);
    /* Pinned: mapped although no context holds it, and its next user starts
     * from zero. */
    ck_assert(cpu_module_mapped());
  }
  tstor_context *ctx = open_cpu(NULL);
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.reserved, 0);
  ck_assert_uint_eq(st.alloc_count, 0);
  tstor_context_close(ctx);
}
END_TEST

/* A context that never allocates makes no record: the module is not pinned
 * and unloads with the last close, as every module does. */
START_TEST(no_record_no_pin) {
  if (cpu_module_mapped()) return; /* pinned by an earlier test of this process (CK_FORK=no) */
  tstor_context *ctx = open_cpu(NULL);
  ck_assert(cpu_module_mapped());
  tstor_context_close(ctx);
  ck_assert(!cpu_module_mapped());
}
END_TEST

enum { THREADS = 8, ROUNDS = 3000, SLOTS = 64 };

typedef struct churn {
  tstor_context *ctx;
  _Atomic(tstor_storage *) *shared; /* storages passed between threads */
  unsigned seed;
  long allocs;
  int failures;
} churn;

static void *churn_thread(void *arg) {
  churn *c = arg;
  tstor_device dev;
  if (tstor_device_parse(c->ctx, "cpu", &dev) != 0) {
    c->failures++;
    return NULL;
  }
  static const size_t sizes[] = {1, 64, 100, 1000, 4096, 40000, 300000, MIB, MIB + 1};
  for (int i = 0; i < ROUNDS; i++) {
    c->seed = c->seed * 1103515245u + 12345u;
    size_t n = sizes[(c->seed >> 16) % (sizeof sizes / sizeof sizes[0])];
    tstor_storage *s;
    if (tstor_storage_new(c->ctx, dev, n, &s) != 0) {
      c->failures++;
      continue;
    }
    c->allocs++;
    ((unsigned char *)tstor_storage_data(s))[n - 1] = (unsigned char)i;
    /* Swap it into the shared slots: the one taken out was made by any thread. */
    tstor_storage *old = atomic_exchange(&c->shared[(c->seed >> 8) % SLOTS], s);
    tstor_storage_release(old);
  }
  return NULL;
}

START_TEST(many_threads) {
  /* The large blocks' cache is the context's, not the threads': off here. */
  tstor_context *ctx = open_cpu("cache_max_bytes = 4194304\nlarge_cache_mb = 0");
  _Atomic(tstor_storage *) shared[SLOTS];
  for (int i = 0; i < SLOTS; i++) atomic_init(&shared[i], NULL);
  churn c[THREADS];
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    c[i] = (churn){ctx, shared, (unsigned)i * 7919u + 1, 0, 0};
    ck_assert_int_eq(pthread_create(&t[i], NULL, churn_thread, &c[i]), 0);
  }
  long allocs = 0;
  for (int i = 0; i < THREADS; i++) {
    ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    ck_assert_int_eq(c[i].failures, 0);
    allocs += c[i].allocs;
  }
  tstor_stats st = stats_of(ctx);
  ck_assert_uint_eq(st.alloc_count, (uint64_t)allocs);
  ck_assert_uint_gt(st.cache_hits, 0);
  ck_assert_uint_eq(st.reserved, st.active); /* the workers' caches went with them */
  ck_assert_uint_ge(st.peak_allocated, st.allocated);
  for (int i = 0; i < SLOTS; i++) tstor_storage_release(atomic_load(&shared[i]));
  expect_idle(ctx, (uint64_t)allocs);
  ck_assert_uint_le(stats_of(ctx).reserved, 4194304);
  tstor_context_close(ctx);
}
END_TEST

static atomic_int stop_reading;

/* Reads the statistics (which takes the cache's lock) until told to stop. */
static void *read_stats_until_stopped(void *arg) {
  worker *w = arg;
  tstor_device dev;
  if (tstor_device_parse(w->ctx, "cpu", &dev) != 0) w->failures++;
  while (!atomic_load(&stop_reading)) {
    tstor_stats st = TSTOR_STATS_INIT;
    if (tstor_device_stats(w->ctx, dev, &st) != 0) w->failures++;
  }
  return NULL;
}

/* Runs in a forked child: creates a storage and reads the statistics, and
 * reports through `fd` (the child's exit status may be a leak checker's). */
static void child_uses_the_cache(tstor_context *ctx, int fd) {
  tstor_device dev;
  tstor_storage *s = NULL;
  tstor_stats st = TSTOR_STATS_INIT;
  char ok = tstor_device_parse(ctx, "cpu", &dev) == 0 &&
            tstor_storage_new(ctx, dev, 4096, &s) == 0 &&
            tstor_device_stats(ctx, dev, &st) == 0 && st.allocated == 4096;
  tstor_storage_release(s);
  ssize_t n = write(fd, &ok, 1);
  _exit(n == 1 ? 0 : 1);
}

/* A child forked while another thread is inside the cache can still use it. */
START_TEST(fork_while_another_thread_counts) {
  tstor_context *ctx = open_cpu(NULL);
  tstor_storage_release(new_storage(ctx, 4096));
  atomic_store(&stop_reading, 0);
  worker w = {ctx, NULL, NULL, 0};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, read_stats_until_stopped, &w), 0);
  int failed = 0; /* no assertion while the reader runs: it would outlive w */
  for (int i = 0; i < 20 && !failed; i++) {
    int fds[2];
    if (pipe(fds) != 0) {
      failed = 1;
      break;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      child_uses_the_cache(ctx, fds[1]);
    }
    close(fds[1]);
    char ok = 0;
    if (pid < 0 || read(fds[0], &ok, 1) != 1 || !ok) failed = i + 1;
    close(fds[0]);
    if (pid > 0 && waitpid(pid, NULL, 0) != pid) failed = i + 1;
  }
  atomic_store(&stop_reading, 1);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_msg(!failed, "forked child %d could not use the cache", failed);
  ck_assert_int_eq(w.failures, 0);
  expect_idle(ctx, 1);
  tstor_context_close(ctx);
}
END_TEST

static Suite *cpu_cache_suite(void) {
  Suite *s = suite_create("cpu_cache");
  TCase *reuse = tcase_create("reuse");
  tcase_add_test(reuse, reuse_within_each_size_class);
  tcase_add_test(reuse, larger_than_a_mebibyte_is_not_cached);
  tcase_add_test(reuse, zero_bytes_take_no_block);
  suite_add_tcase(s, reuse);
  TCase *stats = tcase_create("stats");
  tcase_add_test(stats, stats_follow_allocations_and_releases);
  tcase_add_test(stats, peak_is_the_high_water_mark);
  tcase_add_test(stats, out_of_memory_is_counted);
  suite_add_tcase(s, stats);
  TCase *config = tcase_create("config");
  tcase_add_test(config, cache_off_via_config);
  tcase_add_test(config, byte_cap_bounds_each_thread);
  tcase_add_test(config, block_cap_bounds_each_class);
  tcase_add_test(config, bad_values_name_the_key_and_line);
  suite_add_tcase(s, config);
  TCase *contexts = tcase_create("contexts");
  tcase_add_test(contexts, contexts_share_blocks_not_counts);
  tcase_add_test(contexts, a_new_context_starts_from_zero);
  tcase_add_test(contexts, many_contexts_at_once);
  suite_add_tcase(s, contexts);
  TCase *threads = tcase_create("threads");
  tcase_set_timeout(threads, 60);
  tcase_add_test(threads, thread_exit_gives_its_blocks_back);
  tcase_add_test(threads, peak_counts_what_exited_threads_hold);
  tcase_add_test(threads, empty_cache_reaches_other_threads);
  tcase_add_test(threads, threads_outliving_the_module);
  tcase_add_test(threads, many_threads);
  tcase_add_test(threads, fork_while_another_thread_counts);
  tcase_add_test(threads, thread_exit_races_last_close);
  tcase_add_test(threads, no_record_no_pin);
  suite_add_tcase(s, threads);
  return s;
}

int main(void) { return tstor_test_run(cpu_cache_suite()); }
