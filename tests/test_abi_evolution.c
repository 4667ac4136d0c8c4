/* ABI evolution: a module built against older, shorter tables loads and works
 * through the core's fallbacks, and no field past a table's declared size is
 * read (plugins/abi_evolution.c puts its tables against guard pages and a trap
 * where today's fini is); a module of a newer major version is refused with a
 * message naming both versions, before any of its code runs. */
#include "testutil.h"

#include <stdarg.h>
#include <tstor/backend.h>

static const char *plugin(void) {
  static char path[4096];
  const char *dir = getenv("TSTOR_TEST_PLUGINS");
  snprintf(path, sizeof path, "%s/abi_evolution.so",
           dir ? dir : TSTOR_TEST_BUILDDIR "/plugins/.libs");
  return path;
}

/* cpu plus the plugin as [backend NAME], with `more` keys. */
static int open_with(const char *name, const char *more, tstor_context **ctx) {
  char ini[8192];
  snprintf(ini, sizeof ini,
           "[backend cpu]\nlibrary = tstor-cpu.so\n"
           "[backend %s]\nlibrary = %s\n%s\n",
           name, plugin(), more ? more : "");
  return tstor_context_open_string(ini, "abi.ini", ctx);
}

START_TEST(test_older_tables_load_and_work) {
  tstor_context *ctx = NULL;
  ck_tstor_ok(open_with("older", NULL, &ctx));
  tstor_device d, cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "older", &d));
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  ck_assert_int_eq(tstor_device_count(ctx, d.type), 1);
  ck_assert_int_eq(tstor_copy_path_of(ctx, cpu.type, d.type), TSTOR_COPY_DIRECT);

  enum { N = 5000 };
  unsigned char in[N], out[N];
  for (int i = 0; i < N; i++) in[i] = (unsigned char)(i * 7);
  tstor_storage *s, *h, *ho;
  ck_tstor_ok(tstor_storage_new(ctx, d, N, &s));
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, in, N, &h));
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, out, N, &ho));
  ck_tstor_ok(tstor_storage_copy(s, h));
  ck_tstor_ok(tstor_storage_copy(ho, s));
  ck_assert_mem_eq(in, out, N);

  /* No fill in its table: the core copies a pattern in. */
  const uint32_t pat = 0xa1b2c3d4u;
  ck_tstor_ok(tstor_storage_fill_pattern(s, &pat, 4));
  ck_tstor_ok(tstor_storage_copy(ho, s));
  for (int i = 0; i < N; i += 4) ck_assert_mem_eq(out + i, &pat, 4);

  /* No streams: the core's stand-ins, complete on return. */
  tstor_stream *st;
  tstor_event *e;
  ck_tstor_ok(tstor_stream_new(ctx, d, &st));
  ck_tstor_ok(tstor_event_new(ctx, d, &e));
  ck_tstor_ok(tstor_storage_copy_async(s, h, st));
  ck_tstor_ok(tstor_event_record(e, st));
  ck_tstor_ok(tstor_event_query(e));
  ck_tstor_ok(tstor_storage_copy(ho, s));
  ck_assert_mem_eq(in, out, N);
  ck_tstor_ok(tstor_storage_record_stream(s, st));
  tstor_event_free(e);
  tstor_stream_free(st);

  /* No statistics ops: every counter reads 0, and the other calls succeed. */
  tstor_stats stats;
  memset(&stats, 0xff, sizeof stats);
  ck_tstor_ok(tstor_device_stats(ctx, d, &stats));
  ck_assert_uint_eq(stats.allocated, 0);
  ck_assert_uint_eq(stats.alloc_count, 0);
  ck_tstor_ok(tstor_device_reset_peak(ctx, d));
  ck_tstor_ok(tstor_device_empty_cache(ctx, d));
  ck_tstor_ok(tstor_synchronize(ctx, d));

  /* Resize without reallocate: allocate, copy, free. */
  ck_tstor_ok(tstor_storage_copy(s, h));
  ck_tstor_ok(tstor_storage_resize(s, 2 * N));
  tstor_storage *head;
  ck_tstor_ok(tstor_storage_view(s, 0, N, &head));
  ck_tstor_ok(tstor_storage_copy(ho, head));
  ck_assert_mem_eq(in, out, N);
  tstor_storage_release(head);

  tstor_storage_release(h);
  tstor_storage_release(ho);
  tstor_storage_release(s);
  tstor_context_close(ctx); /* unloads: the trap where fini would be is not called */
}
END_TEST

START_TEST(test_older_tables_reload) {
  for (int round = 0; round < 3; round++) {
    tstor_context *ctx = NULL;
    ck_tstor_ok(open_with("older", NULL, &ctx));
    tstor_storage *s;
    tstor_device d;
    ck_tstor_ok(tstor_device_parse(ctx, "older", &d));
    ck_tstor_ok(tstor_storage_new(ctx, d, 100, &s));
    tstor_storage_release(s);
    tstor_context_close(ctx);
  }
}
END_TEST

static void expect_versions_named(const char *text) {
  char newer[32], ours[32];
  snprintf(newer, sizeof newer, "%d.2", TSTOR_ABI_MAJOR + 1);
  snprintf(ours, sizeof ours, "%d.%d", TSTOR_ABI_MAJOR, TSTOR_ABI_MINOR);
  ck_assert_msg(strstr(text, newer) && strstr(text, ours),
                "\"%s\" does not name both %s and %s", text, newer, ours);
}

START_TEST(test_newer_major_refused) {
  tstor_context *ctx = NULL;
  /* Required: the context does not open. init would abort() if called. */
  ck_tstor_err(open_with("next", "entry = abi_next_major", &ctx), TSTOR_EABI);
  ck_assert_ptr_null(ctx);
  expect_versions_named(tstor_last_error());

  /* Optional: the context opens without it and says why. */
  ck_tstor_ok(open_with("next", "entry = abi_next_major\noptional = yes", &ctx));
  tstor_backend_info info;
  ck_tstor_ok(tstor_backend_get(ctx, 1, &info));
  ck_assert_str_eq(info.name, "next");
  ck_assert_int_eq(info.state, TSTOR_BACKEND_FAILED);
  expect_versions_named(info.message);
  ck_assert_int_eq(tstor_device_type_count(ctx), 1); /* cpu only */
  tstor_context_close(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("abi evolution");
  TCase *tc = tcase_create("abi");
  tcase_add_test(tc, test_older_tables_load_and_work);
  tcase_add_test(tc, test_older_tables_reload);
  tcase_add_test(tc, test_newer_major_refused);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
