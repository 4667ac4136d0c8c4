/* Module lifetime: a context may be closed while its storages, views, streams
 * and events live on; they stay usable, and each backend module is finalised
 * and unmapped only when the last of them goes. The fake plugin writes a line
 * to a trace file on init and fini, and whether a module is still mapped is
 * asked of the dynamic loader (RTLD_NOLOAD). Run under ASan or valgrind, a
 * use after unload would also be reported. */
#include "coretest.h"

static char trace[256];

static void make_trace(void) { snprintf(trace, sizeof trace, "%s", coretest_tmpfile(".trace")); }
static void drop_trace(void) { unlink(trace); }

static tstor_context *open_traced(void) {
  return coretest_open(coretest_fake_section("fake", coretest_fmt("trace = %s", trace)));
}

static void assert_trace(const char *expect) {
  ck_assert_str_eq(coretest_read_file(trace), expect);
}

START_TEST(close_without_storages_unloads_at_once) {
  tstor_context *ctx = open_traced();
  assert_trace("init 2\n");
  ck_assert(coretest_is_loaded(coretest_plugin("fake")));
  ck_assert(coretest_is_loaded(coretest_backend("cpu")));
  tstor_context_close(ctx);
  assert_trace("init 2\nfini live=0\n");
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
  ck_assert(!coretest_is_loaded(coretest_backend("cpu")));
  ck_assert(!coretest_is_loaded(coretest_backend("meta")));
}
END_TEST

START_TEST(storages_outlive_their_context) {
  tstor_context *ctx = open_traced();
  tstor_device cpu = coretest_dev(ctx, "cpu"), fake = coretest_dev(ctx, "fake:1");
  tstor_device meta = coretest_dev(ctx, "meta");
  tstor_storage *c = NULL, *f = NULL, *m = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 256, &c));
  ck_tstor_ok(tstor_storage_new(ctx, fake, 256, &f));
  ck_tstor_ok(tstor_storage_new(ctx, meta, 256, &m));
  tstor_context_close(ctx);

  /* Everything still works: the context lives on inside its storages. */
  assert_trace("init 2\n");
  ck_assert(coretest_is_loaded(coretest_plugin("fake")));
  ck_assert(coretest_is_loaded(coretest_backend("cpu")));
  ck_tstor_ok(tstor_storage_fill(c, 0x5e));
  ck_tstor_ok(tstor_storage_copy(f, c));
  ck_tstor_ok(tstor_storage_copy(m, f));
  tstor_storage *v = NULL, *back = NULL, *like = NULL;
  ck_tstor_ok(tstor_storage_view(f, 128, 128, &v));
  ck_tstor_ok(tstor_storage_to(v, cpu, &back));
  ck_assert_int_eq(((unsigned char *)tstor_storage_data(back))[127], 0x5e);
  ck_tstor_ok(tstor_storage_new_like(f, 64, &like));
  ck_tstor_ok(tstor_storage_resize(c, 4096));
  char name[32];
  ck_tstor_ok(tstor_device_format(tstor_storage_context(f), fake, name, sizeof name));
  ck_assert_str_eq(name, "fake:1");

  /* Released in no particular order; the modules go with the last one. */
  tstor_storage_release(f);
  tstor_storage_release(back);
  tstor_storage_release(c);
  tstor_storage_release(like);
  tstor_storage_release(m);
  assert_trace("init 2\n");
  ck_assert(coretest_is_loaded(coretest_plugin("fake")));
  tstor_storage_release(v); /* held the last fake block through its base */
  assert_trace("init 2\nfini live=0\n");
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
  ck_assert(!coretest_is_loaded(coretest_backend("meta")));
  /* The cpu module's fini ran too, but a thread made a block cache, whose
   * thread-exit destructor may run at any time: the module pinned itself and
   * stays mapped (backend.h, "Unloading"). */
  ck_assert(coretest_is_loaded(coretest_backend("cpu")));
}
END_TEST

static int deleter_calls;
static void count_deleter(void *data, void *deleter_ctx) {
  deleter_calls++;
  free(data);
}

START_TEST(wrapped_storage_outlives_its_context) {
  tstor_context *ctx = open_traced();
  deleter_calls = 0;
  tstor_storage *s = NULL;
  void *mem = malloc(32);
  ck_tstor_ok(tstor_storage_wrap_owned(ctx, coretest_dev(ctx, "cpu"), mem, 32, count_deleter,
                                       NULL, &s));
  tstor_context_close(ctx);
  assert_trace("init 2\n");
  ck_tstor_ok(tstor_storage_fill(s, 1));
  tstor_storage_release(s);
  ck_assert_int_eq(deleter_calls, 1);
  assert_trace("init 2\nfini live=0\n");
}
END_TEST

START_TEST(streams_and_events_hold_the_context) {
  tstor_context *ctx = open_traced();
  tstor_device fake = coretest_dev(ctx, "fake");
  tstor_stream *s = NULL;
  tstor_event *e = NULL;
  ck_tstor_ok(tstor_stream_new(ctx, fake, &s));
  ck_tstor_ok(tstor_event_new(ctx, fake, &e));
  tstor_context_close(ctx);
  ck_tstor_ok(tstor_event_record(e, s));
  ck_tstor_ok(tstor_stream_synchronize(s));
  tstor_stream_free(s);
  assert_trace("init 2\n");
  ck_assert(coretest_is_loaded(coretest_plugin("fake")));
  tstor_event_free(e);
  assert_trace("init 2\nfini live=0\n");
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
}
END_TEST

START_TEST(two_contexts_share_one_module) {
  /* The same shared object serves two contexts: each gets its own init and
   * fini, and the object stays mapped until both are done. */
  tstor_context *a = open_traced(), *b = open_traced();
  assert_trace("init 2\ninit 2\n");
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(a, coretest_dev(a, "fake"), 8, &s));
  tstor_context_close(a);
  tstor_context_close(b);
  assert_trace("init 2\ninit 2\nfini live=0\n");
  ck_assert(coretest_is_loaded(coretest_plugin("fake")));
  tstor_storage_release(s);
  assert_trace("init 2\ninit 2\nfini live=0\nfini live=0\n");
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
}
END_TEST

START_TEST(failed_open_finalises_what_it_loaded) {
  /* The fake loads and initialises, then a later required backend fails: the
   * fake is finalised and unloaded before the open returns. */
  const char *text = coretest_fmt(
      "%s%s[backend broken]\nlibrary = %s\n", CORETEST_BASE_INI,
      coretest_fake_section("fake", coretest_fmt("trace = %s", trace)), coretest_plugin("noentry"));
  tstor_context *ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open_string(text, "fail.ini", &ctx), TSTOR_ELOAD);
  ck_assert_ptr_null(ctx);
  assert_trace("init 2\nfini live=0\n");
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
  ck_assert(!coretest_is_loaded(coretest_plugin("noentry")));
  ck_assert(!coretest_is_loaded(coretest_backend("cpu")));
}
END_TEST

START_TEST(many_open_close_cycles) {
  for (int i = 0; i < 50; i++) {
    tstor_context *ctx = open_traced();
    tstor_storage *s = NULL;
    ck_tstor_ok(tstor_storage_new(ctx, coretest_dev(ctx, "fake"), 16, &s));
    if (i % 2) tstor_context_close(ctx);
    tstor_storage_release(s);
    if (i % 2 == 0) tstor_context_close(ctx);
    ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
  }
  /* 50 pairs of lines. */
  const char *t = coretest_read_file(trace);
  int inits = 0, finis = 0;
  for (const char *p = t; (p = strstr(p, "init 2\n")) != NULL; p++) inits++;
  for (const char *p = t; (p = strstr(p, "fini live=0\n")) != NULL; p++) finis++;
  ck_assert_int_eq(inits, 50);
  ck_assert_int_eq(finis, 50);
}
END_TEST

int main(void) {
  Suite *s = suite_create("lifetime");
  TCase *tc = tcase_create("modules");
  tcase_add_checked_fixture(tc, make_trace, drop_trace);
  tcase_add_test(tc, close_without_storages_unloads_at_once);
  tcase_add_test(tc, storages_outlive_their_context);
  tcase_add_test(tc, wrapped_storage_outlives_its_context);
  tcase_add_test(tc, streams_and_events_hold_the_context);
  tcase_add_test(tc, two_contexts_share_one_module);
  tcase_add_test(tc, failed_open_finalises_what_it_loaded);
  tcase_add_test(tc, many_open_close_cycles);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
