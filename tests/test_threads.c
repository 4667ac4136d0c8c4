/* Concurrency: several threads retaining, releasing, viewing and creating
 * storages at once, opening and closing contexts at once, and racing to drop
 * the last references of a closed context. Counts are bounded so the suite
 * stays fast; run it under --enable-tsan for data races. */
#include "coretest.h"

#include <pthread.h>

enum { NTHREADS = 6, ROUNDS = 3000 };

/* glibc's dynamic loader serialises dlopen and dlclose with a lock that
 * ThreadSanitizer cannot see, so its bookkeeping looks racy when contexts load
 * and unload modules on several threads at once. */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void) { return "race:_dl_close_worker\n"; }

static tstor_context *ctx;
static tstor_device cpu, fake;
static tstor_storage *shared;
static pthread_barrier_t start;

static void open_ctx(void) {
  ctx = coretest_open(coretest_fake_section("fake", NULL));
  cpu = coretest_dev(ctx, "cpu");
  fake = coretest_dev(ctx, "fake:1");
}
static void close_ctx(void) {
  tstor_context_close(ctx);
  ctx = NULL;
}

static void run_threads(void *(*fn)(void *)) {
  pthread_t t[NTHREADS];
  long ids[NTHREADS];
  ck_assert_int_eq(pthread_barrier_init(&start, NULL, NTHREADS), 0);
  for (long i = 0; i < NTHREADS; i++) {
    ids[i] = i;
    ck_assert_int_eq(pthread_create(&t[i], NULL, fn, &ids[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) {
    void *ret = NULL;
    ck_assert_int_eq(pthread_join(t[i], &ret), 0);
    ck_assert_msg(ret == NULL, "thread %d: %s", i, (const char *)ret);
  }
  pthread_barrier_destroy(&start);
}

/* Each thread works on the shared storage and on its own ones; a thread
 * returns NULL, or a static string saying what went wrong. */
static void *hammer_shared(void *arg) {
  long id = *(long *)arg;
  pthread_barrier_wait(&start);
  for (int r = 0; r < ROUNDS; r++) {
    tstor_storage *held[4];
    for (int k = 0; k < 4; k++) held[k] = tstor_storage_retain(shared);
    tstor_storage *v = NULL, *vv = NULL;
    size_t off = (size_t)((id * 131 + r) % 900);
    if (tstor_storage_view(shared, off, 100, &v) != 0) return "view failed";
    if (tstor_storage_view(v, 10, 50, &vv) != 0) return "view of view failed";
    if (tstor_storage_base(vv) != shared) return "view of view not flattened";
    if (tstor_storage_data(vv) != (char *)tstor_storage_data(shared) + off + 10)
      return "view points at the wrong bytes";
    /* Each thread writes only its own byte of the shared storage. */
    ((unsigned char *)tstor_storage_data(shared))[1000 + id] = (unsigned char)r;
    tstor_storage *own = NULL;
    if (tstor_storage_new(ctx, (r & 1) ? cpu : fake, 64 + (size_t)r % 100, &own) != 0)
      return "new failed";
    tstor_storage *ownv = NULL;
    if (tstor_storage_view(own, 0, 32, &ownv) != 0) return "view of own failed";
    tstor_storage_release(own); /* ownv keeps it */
    if (tstor_storage_fill(ownv, (uint8_t)id) != 0) return "fill failed";
    tstor_storage_release(vv);
    for (int k = 0; k < 4; k++) tstor_storage_release(held[k]);
    tstor_storage_release(v);
    tstor_storage_release(ownv);
  }
  return NULL;
}

START_TEST(retain_release_view_create) {
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 1000 + NTHREADS, &shared));
  run_threads(hammer_shared);
  ck_assert_int_eq(tstor_storage_use_count(shared), 1);
  for (int i = 0; i < NTHREADS; i++)
    ck_assert_int_eq(((unsigned char *)tstor_storage_data(shared))[1000 + i],
                     (unsigned char)(ROUNDS - 1));
  /* Every view was counted off again. */
  ck_tstor_ok(tstor_storage_resize(shared, 10));
  tstor_storage_release(shared);
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 0);
  ck_assert_uint_eq(st.alloc_count, st.free_count);
}
END_TEST

static tstor_storage *last_refs[NTHREADS];

static void *drop_last(void *arg) {
  long id = *(long *)arg;
  pthread_barrier_wait(&start);
  tstor_storage_release(last_refs[id]);
  return NULL;
}

static char trace[256];

START_TEST(last_releases_race_after_close) {
  /* The context is closed; each thread holds one of its last storages and all
   * release at once: exactly one of them finalises the modules. */
  snprintf(trace, sizeof trace, "%s", coretest_tmpfile(".trace"));
  for (int round = 0; round < 20; round++) {
    tstor_context *c =
        coretest_open(coretest_fake_section("fake", coretest_fmt("trace = %s", trace)));
    for (int i = 0; i < NTHREADS; i++)
      ck_tstor_ok(tstor_storage_new(c, coretest_dev(c, i % 2 ? "fake" : "cpu"), 32,
                                    &last_refs[i]));
    tstor_context_close(c);
    run_threads(drop_last);
    ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
  }
  const char *t = coretest_read_file(trace);
  int inits = 0, finis = 0;
  for (const char *p = t; (p = strstr(p, "init 2\n")) != NULL; p++) inits++;
  for (const char *p = t; (p = strstr(p, "fini live=0\n")) != NULL; p++) finis++;
  ck_assert_int_eq(inits, 20);
  ck_assert_int_eq(finis, 20);
  unlink(trace);
}
END_TEST

static char ini_text[4096];

static void *open_close(void *arg) {
  pthread_barrier_wait(&start);
  for (int r = 0; r < 15; r++) {
    tstor_context *c = NULL;
    if (tstor_context_open_string(ini_text, "threads.ini", &c) != 0) return "open failed";
    tstor_device dev;
    if (tstor_device_parse(c, "fake:1", &dev) != 0) return "parse failed";
    tstor_storage *s = NULL;
    if (tstor_storage_new(c, dev, 16, &s) != 0) return "new failed";
    tstor_context_close(c);
    if (tstor_storage_fill(s, 1) != 0) return "fill after close failed";
    tstor_storage_release(s);
  }
  return NULL;
}

START_TEST(contexts_open_and_close_concurrently) {
  snprintf(ini_text, sizeof ini_text, "%s%s", CORETEST_BASE_INI,
           coretest_fake_section("fake", NULL));
  run_threads(open_close);
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
}
END_TEST

static void *errors_per_thread(void *arg) {
  long id = *(long *)arg;
  char text[32], want[64];
  snprintf(text, sizeof text, "nosuch%ld", id);
  snprintf(want, sizeof want, "\"nosuch%ld\"", id);
  pthread_barrier_wait(&start);
  for (int r = 0; r < 500; r++) {
    tstor_device dev;
    if (tstor_device_parse(ctx, text, &dev) != TSTOR_ENODEV) return "parse did not fail";
    if (strstr(tstor_last_error(), want) == NULL) return "another thread's detail";
  }
  return NULL;
}

START_TEST(error_details_do_not_cross_threads) { run_threads(errors_per_thread); }
END_TEST

int main(void) {
  Suite *s = suite_create("threads");
  TCase *tc = tcase_create("threads");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, retain_release_view_create);
  tcase_add_test(tc, error_details_do_not_cross_threads);
  suite_add_tcase(s, tc);
  tc = tcase_create("contexts"); /* no fixture: they watch the fake module go */
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, last_releases_race_after_close);
  tcase_add_test(tc, contexts_open_and_close_concurrently);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
