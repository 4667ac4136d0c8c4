/* Streams and events on devices without asynchronous work (cpu, meta, and
 * fake, which offers no stream ops): they exist and every operation completes
 * before the call returns. Pinning without a pinned allocator, and the
 * allocator statistics of cpu. */
#include "coretest.h"

static tstor_context *ctx;
static tstor_device cpu, meta, fake;

static void open_ctx(void) {
  ctx = coretest_open(coretest_fake_section("fake", NULL));
  cpu = coretest_dev(ctx, "cpu");
  meta = coretest_dev(ctx, "meta");
  fake = coretest_dev(ctx, "fake:1");
}
static void close_ctx(void) {
  tstor_context_close(ctx);
  ctx = NULL;
}

static unsigned char *bytes(tstor_storage *s) { return tstor_storage_data(s); }

START_TEST(streams_and_events_are_synchronous) {
  const tstor_device devs[] = {cpu, meta, fake};
  for (int i = 0; i < 3; i++) {
    tstor_stream *s = NULL, *s2 = NULL;
    tstor_event *e = NULL;
    ck_tstor_ok(tstor_stream_new(ctx, devs[i], &s));
    ck_tstor_ok(tstor_stream_new(ctx, devs[i], &s2));
    ck_tstor_ok(tstor_event_new(ctx, devs[i], &e));
    ck_tstor_ok(tstor_event_query(e)); /* nothing recorded: nothing to wait for */
    ck_tstor_ok(tstor_event_record(e, s));
    ck_tstor_ok(tstor_event_query(e));
    ck_tstor_ok(tstor_event_synchronize(e));
    ck_tstor_ok(tstor_stream_wait_event(s2, e));
    ck_tstor_ok(tstor_stream_synchronize(s));
    ck_tstor_ok(tstor_stream_synchronize(s2));
    ck_tstor_ok(tstor_synchronize(ctx, devs[i]));
    tstor_event_free(e);
    tstor_stream_free(s2);
    tstor_stream_free(s);
  }
  tstor_stream_free(NULL);
  tstor_event_free(NULL);
}
END_TEST

START_TEST(copy_async_completes_on_return) {
  tstor_stream *cs = NULL, *fs = NULL;
  ck_tstor_ok(tstor_stream_new(ctx, cpu, &cs));
  ck_tstor_ok(tstor_stream_new(ctx, fake, &fs));
  tstor_storage *a = NULL, *b = NULL, *f = NULL, *m = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 4096, &a));
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 4096, &b));
  ck_tstor_ok(tstor_storage_new(ctx, fake, 4096, &f));
  ck_tstor_ok(tstor_storage_new(ctx, meta, 4096, &m));
  for (int i = 0; i < 4096; i++) bytes(a)[i] = (unsigned char)(i * 7);
  ck_tstor_ok(tstor_storage_copy_async(b, a, cs));
  ck_assert_mem_eq(tstor_storage_data(b), tstor_storage_data(a), 4096);
  /* Through the fake's kernels, on a stream of either side. */
  memset(bytes(b), 0, 4096);
  ck_tstor_ok(tstor_storage_copy_async(f, a, fs));
  ck_tstor_ok(tstor_storage_copy_async(b, f, cs));
  ck_assert_mem_eq(tstor_storage_data(b), tstor_storage_data(a), 4096);
  ck_tstor_ok(tstor_storage_copy_async(m, a, cs));
  ck_tstor_err(tstor_storage_copy_async(a, m, cs), TSTOR_ENODATA);
  ck_tstor_ok(tstor_storage_record_stream(a, cs));
  ck_tstor_ok(tstor_storage_record_stream(f, fs));
  ck_tstor_ok(tstor_stream_synchronize(cs));
  tstor_storage_release(m);
  tstor_storage_release(f);
  tstor_storage_release(b);
  tstor_storage_release(a);
  tstor_stream_free(fs);
  tstor_stream_free(cs);
}
END_TEST

START_TEST(stream_errors) {
  tstor_stream *s = (tstor_stream *)0x1;
  tstor_event *e = (tstor_event *)0x1;
  ck_tstor_err(tstor_stream_new(ctx, (tstor_device){9, 0}, &s), TSTOR_ENODEV);
  ck_tstor_err(tstor_stream_new(ctx, (tstor_device){0, 1}, &s), TSTOR_ENODEV);
  ck_tstor_err(tstor_stream_new(ctx, cpu, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_event_new(ctx, (tstor_device){9, 0}, &e), TSTOR_ENODEV);
  ck_tstor_err(tstor_event_new(ctx, cpu, NULL), TSTOR_EINVAL);
  ck_assert_ptr_eq(s, (tstor_stream *)0x1);
  ck_assert_ptr_eq(e, (tstor_event *)0x1);
  ck_tstor_err(tstor_stream_synchronize(NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_event_query(NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_event_synchronize(NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_synchronize(ctx, (tstor_device){9, 0}), TSTOR_ENODEV);

  ck_tstor_ok(tstor_stream_new(ctx, cpu, &s));
  ck_tstor_ok(tstor_event_new(ctx, cpu, &e));
  ck_tstor_err(tstor_event_record(NULL, s), TSTOR_EINVAL);
  ck_tstor_err(tstor_event_record(e, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_stream_wait_event(NULL, e), TSTOR_EINVAL);
  ck_tstor_err(tstor_stream_wait_event(s, NULL), TSTOR_EINVAL);
  /* An event records only a stream of its own device. */
  tstor_stream *fs = NULL;
  ck_tstor_ok(tstor_stream_new(ctx, fake, &fs));
  ck_tstor_err(tstor_event_record(e, fs), TSTOR_EINVAL);

  tstor_storage *a = NULL, *b = NULL, *c = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 8, &a));
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 9, &b));
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 8, &c));
  memset(bytes(c), 1, 8);
  ck_tstor_err(tstor_storage_copy_async(a, b, s), TSTOR_ESIZE);
  ck_tstor_err(tstor_storage_copy_async(NULL, b, s), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_copy_async(a, NULL, s), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_copy_async(a, c, NULL), TSTOR_EINVAL);
  /* The stream must be on one of the two devices. */
  memset(bytes(a), 0, 8);
  ck_tstor_err(tstor_storage_copy_async(a, c, fs), TSTOR_EINVAL);
  ck_assert_int_eq(bytes(a)[0], 0);
  ck_tstor_err(tstor_storage_record_stream(NULL, s), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_record_stream(a, NULL), TSTOR_EINVAL);
  tstor_storage_release(c);
  tstor_storage_release(b);
  tstor_storage_release(a);
  tstor_stream_free(fs);
  tstor_event_free(e);
  tstor_stream_free(s);
}
END_TEST

START_TEST(pin_without_a_pinned_allocator) {
  tstor_storage *s = NULL, *p = (tstor_storage *)0x1;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 64, &s));
  ck_assert_int_eq(tstor_storage_is_pinned(s), 0);
  ck_assert_int_eq(tstor_storage_is_pinned(NULL), 0);
  ck_tstor_err(tstor_storage_pin(s, &p), TSTOR_ENOTSUP);
  ck_assert_ptr_null(p); /* a failed call leaves its output NULL */
  ck_assert_int_eq(tstor_storage_use_count(s), 1);
  ck_tstor_err(tstor_storage_pin(NULL, &p), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_pin(s, NULL), TSTOR_EINVAL);
  tstor_storage *f = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, fake, 64, &f));
  ck_tstor_err(tstor_storage_pin(f, &p), TSTOR_EINVAL); /* not host memory */
  tstor_storage_release(f);
  tstor_storage_release(s);
}
END_TEST

START_TEST(cpu_stats) {
  tstor_stats st = TSTOR_STATS_INIT;
  memset(&st, 0xff, sizeof st);
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 0);
  ck_assert_uint_eq(st.alloc_count, 0);
  ck_assert_uint_eq(st.free_count, 0);
  ck_assert_uint_eq(st.oom_count, 0);
  ck_assert_uint_eq(st.cache_hits, 0);

  tstor_storage *a = NULL, *b = NULL, *v = NULL, *z = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 1000, &a));
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 3000, &b));
  ck_tstor_ok(tstor_storage_view(a, 0, 10, &v)); /* a view allocates nothing */
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 4000);
  ck_assert_uint_ge(st.reserved, st.allocated);
  ck_assert_uint_eq(st.peak_allocated, 4000);
  ck_assert_uint_eq(st.alloc_count, 2);
  ck_assert_uint_eq(st.free_count, 0);

  tstor_storage_release(b);
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 1000);
  ck_assert_uint_eq(st.peak_allocated, 4000);
  ck_assert_uint_eq(st.free_count, 1);
  ck_tstor_ok(tstor_device_reset_peak(ctx, cpu));
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.peak_allocated, 1000);
  ck_tstor_ok(tstor_device_empty_cache(ctx, cpu));

  /* Zero-byte storages allocate nothing. */
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 0, &z));
  tstor_storage_release(z);
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 1000);

  tstor_storage_release(v);
  tstor_storage_release(a);
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 0);
  ck_assert_uint_eq(st.free_count, st.alloc_count);
}
END_TEST

START_TEST(stats_where_the_backend_keeps_none) {
  /* meta and fake offer no stats op: every counter reads 0. */
  const tstor_device devs[] = {meta, fake};
  for (int i = 0; i < 2; i++) {
    tstor_storage *s = NULL;
    ck_tstor_ok(tstor_storage_new(ctx, devs[i], 100, &s));
    tstor_stats st, zero = TSTOR_STATS_INIT;
    memset(&st, 0xff, sizeof st);
    st.struct_size = sizeof st;
    ck_tstor_ok(tstor_device_stats(ctx, devs[i], &st));
    ck_assert_mem_eq(&st, &zero, sizeof st);
    ck_tstor_ok(tstor_device_reset_peak(ctx, devs[i]));
    ck_tstor_ok(tstor_device_empty_cache(ctx, devs[i]));
    tstor_storage_release(s);
  }
}
END_TEST

START_TEST(stats_errors) {
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_err(tstor_device_stats(ctx, cpu, NULL), TSTOR_EINVAL);
  /* A size no tstor_stats ever had: refused, nothing written. */
  st.struct_size = 8;
  st.allocated = 77;
  ck_tstor_err(tstor_device_stats(ctx, cpu, &st), TSTOR_EINVAL);
  ck_assert_uint_eq(st.allocated, 77);
  st.struct_size = sizeof st;
  ck_tstor_err(tstor_device_stats(ctx, (tstor_device){9, 0}, &st), TSTOR_ENODEV);
  ck_tstor_err(tstor_device_stats(ctx, (tstor_device){0, 3}, &st), TSTOR_ENODEV);
  ck_tstor_err(tstor_device_reset_peak(ctx, (tstor_device){-1, 0}), TSTOR_ENODEV);
  ck_tstor_err(tstor_device_empty_cache(ctx, (tstor_device){0, -1}), TSTOR_ENODEV);
}
END_TEST

int main(void) {
  Suite *s = suite_create("stream");
  TCase *tc = tcase_create("streams");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, streams_and_events_are_synchronous);
  tcase_add_test(tc, copy_async_completes_on_return);
  tcase_add_test(tc, stream_errors);
  tcase_add_test(tc, pin_without_a_pinned_allocator);
  suite_add_tcase(s, tc);
  tc = tcase_create("stats");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, cpu_stats);
  tcase_add_test(tc, stats_where_the_backend_keeps_none);
  tcase_add_test(tc, stats_errors);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
