/* The minimal backend of docs/backend-guide.md (docs/examples/minimal-backend.c),
 * built as plugins/guide_minimal.so: it loads, and does what the guide says.
 * conformance.sh runs the whole conformance suite on it as well. */
#include "testutil.h"

static tstor_context *open_toy(const char *more, int *rc) {
  char ini[8192];
  const char *dir = getenv("TSTOR_TEST_PLUGINS");
  snprintf(ini, sizeof ini,
           "[backend cpu]\nlibrary = tstor-cpu.so\n"
           "[backend toy]\nlibrary = %s/guide_minimal.so\n%s\n",
           dir ? dir : TSTOR_TEST_BUILDDIR "/plugins/.libs", more ? more : "");
  tstor_context *ctx = NULL;
  *rc = tstor_context_open_string(ini, "guide.ini", &ctx);
  return ctx;
}

START_TEST(test_loads_and_copies) {
  int rc;
  tstor_context *ctx = open_toy("devices = 2", &rc);
  ck_tstor_ok(rc);
  tstor_device toy, cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "toy:1", &toy));
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  ck_assert_int_eq(tstor_device_count(ctx, toy.type), 2);
  ck_assert_int_eq(tstor_copy_path_of(ctx, cpu.type, toy.type), TSTOR_COPY_DIRECT);
  ck_assert_int_eq(tstor_copy_path_of(ctx, toy.type, cpu.type), TSTOR_COPY_DIRECT);

  char in[1000], out[1000];
  for (int i = 0; i < 1000; i++) in[i] = (char)(i * 13);
  tstor_storage *s, *h, *ho;
  ck_tstor_ok(tstor_storage_new(ctx, toy, sizeof in, &s));
  ck_assert_uint_eq((uintptr_t)tstor_storage_data(s) % 64, 0);
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, in, sizeof in, &h));
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, out, sizeof out, &ho));
  ck_tstor_ok(tstor_storage_copy(s, h));
  ck_tstor_ok(tstor_storage_copy(ho, s));
  ck_assert_mem_eq(in, out, sizeof in);

  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, toy, &st));
  ck_assert_uint_eq(st.allocated, sizeof in);
  tstor_storage_release(s);
  ck_tstor_ok(tstor_device_stats(ctx, toy, &st));
  ck_assert_uint_eq(st.allocated, 0);
  tstor_storage_release(h);
  tstor_storage_release(ho);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(test_declines_without_devices) {
  int rc;
  tstor_context *ctx = open_toy("devices = 0", &rc);
  ck_tstor_ok(rc);
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 1, &info));
  ck_assert_int_eq(info.state, TSTOR_BACKEND_DECLINED);
  ck_assert_msg(strstr(info.message, "no toy devices"), "message: %s", info.message);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(test_bad_key_names_line) {
  int rc;
  tstor_context *ctx = open_toy("devices = many", &rc);
  ck_assert_int_eq(rc, TSTOR_ECONFIG);
  ck_assert_ptr_null(ctx);
  ck_last_error_has("guide.ini:5");
  ck_last_error_has("devices");
}
END_TEST

int main(void) {
  Suite *s = suite_create("guide example");
  TCase *tc = tcase_create("minimal backend");
  tcase_add_test(tc, test_loads_and_copies);
  tcase_add_test(tc, test_declines_without_devices);
  tcase_add_test(tc, test_bad_key_names_line);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
