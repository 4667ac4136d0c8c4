/* The registry: device types by name, device counts, "type:index" parsing and
 * printing, the default device and the copy path table. */
#include "coretest.h"

static tstor_context *ctx;

static void open_ctx(void) {
  ctx = coretest_open(coretest_fake_section("fake", "devices = 3"));
}
static void close_ctx(void) {
  tstor_context_close(ctx);
  ctx = NULL;
}

static int type_id(const char *name) {
  for (int t = 0; t < tstor_device_type_count(ctx); t++)
    if (strcmp(tstor_device_type_name(ctx, t), name) == 0) return t;
  ck_abort_msg("no device type %s", name);
  return -1;
}

START_TEST(types_are_listed_by_name) {
  ck_assert_int_eq(tstor_device_type_count(ctx), 3);
  const char *names[3];
  for (int t = 0; t < 3; t++) {
    names[t] = tstor_device_type_name(ctx, t);
    ck_assert_ptr_nonnull(names[t]);
  }
  /* Registration order: backends in file order. */
  ck_assert_str_eq(names[0], "cpu");
  ck_assert_str_eq(names[1], "meta");
  ck_assert_str_eq(names[2], "fake");
  ck_assert_ptr_null(tstor_device_type_name(ctx, 3));
  ck_assert_ptr_null(tstor_device_type_name(ctx, -1));
  ck_assert_ptr_null(tstor_device_type_name(ctx, 1000));
}
END_TEST

START_TEST(device_counts) {
  ck_assert_int_eq(tstor_device_count(ctx, type_id("cpu")), 1);
  ck_assert_int_ge(tstor_device_count(ctx, type_id("meta")), 1);
  ck_assert_int_eq(tstor_device_count(ctx, type_id("fake")), 3);
  ck_tstor_err(tstor_device_count(ctx, 3), TSTOR_ENODEV);
  ck_tstor_err(tstor_device_count(ctx, -1), TSTOR_ENODEV);
}
END_TEST

/* The facts a program asks instead of comparing names. */
START_TEST(device_type_flags) {
  ck_assert_uint_eq(tstor_device_type_flags(ctx, type_id("cpu")), TSTOR_DEVICE_HOST);
  ck_assert_uint_eq(tstor_device_type_flags(ctx, type_id("meta")), TSTOR_DEVICE_NO_DATA);
  ck_assert_uint_eq(tstor_device_type_flags(ctx, type_id("fake")), 0); /* a device of its own */
  ck_assert_uint_eq(tstor_device_type_flags(ctx, 3), 0);
  ck_assert_uint_eq(tstor_device_type_flags(ctx, -1), 0);
}
END_TEST

START_TEST(parse_good_names) {
  tstor_device dev;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &dev));
  ck_assert_int_eq(dev.type, type_id("cpu"));
  ck_assert_int_eq(dev.index, 0);
  ck_tstor_ok(tstor_device_parse(ctx, "cpu:0", &dev));
  ck_assert_int_eq(dev.type, type_id("cpu"));
  ck_assert_int_eq(dev.index, 0);
  ck_tstor_ok(tstor_device_parse(ctx, "fake:2", &dev));
  ck_assert_int_eq(dev.type, type_id("fake"));
  ck_assert_int_eq(dev.index, 2);
  ck_tstor_ok(tstor_device_parse(ctx, "meta", &dev));
  ck_assert_int_eq(dev.type, type_id("meta"));
  ck_assert_int_eq(dev.index, 0);
}
END_TEST

START_TEST(parse_unknown_devices) {
  const char *unknown[] = {"tpu", "tpu:0", "cpu:1", "fake:3", "fake:1000", "CPU", "cp", "cpux"};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    tstor_device dev = {77, 88};
    int rc = tstor_device_parse(ctx, unknown[i], &dev);
    ck_assert_msg(rc == TSTOR_ENODEV, "\"%s\": %s, expected TSTOR_ENODEV", unknown[i],
                  tstor_err_name(rc));
    ck_assert_msg(dev.type == 77 && dev.index == 88, "\"%s\" changed *out", unknown[i]);
    ck_assert_msg(tstor_last_error()[0] != '\0', "\"%s\": no detail", unknown[i]);
  }
  /* The detail says how many there are. */
  tstor_device dev;
  ck_tstor_err(tstor_device_parse(ctx, "fake:3", &dev), TSTOR_ENODEV);
  ck_last_error_has("fake:3");
  ck_last_error_has("3");
}
END_TEST

START_TEST(parse_malformed_text) {
  const char *bad[] = {"", ":", ":0", "cpu:", "cpu:-1", "cpu:x", "cpu:0:0", "cpu: 0", " cpu",
                       "cpu ", "cpu:+0", "cpu:0x0", "cpu:1e0", "fake:99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tstor_device dev = {77, 88};
    int rc = tstor_device_parse(ctx, bad[i], &dev);
    ck_assert_msg(rc == TSTOR_EINVAL || rc == TSTOR_ENODEV, "\"%s\": %s", bad[i],
                  tstor_err_name(rc));
    ck_assert_msg(dev.type == 77 && dev.index == 88, "\"%s\" changed *out", bad[i]);
  }
  tstor_device dev;
  ck_tstor_err(tstor_device_parse(ctx, NULL, &dev), TSTOR_EINVAL);
  ck_tstor_err(tstor_device_parse(ctx, "cpu", NULL), TSTOR_EINVAL);
}
END_TEST

START_TEST(format_round_trips) {
  for (int t = 0; t < tstor_device_type_count(ctx); t++) {
    for (int i = 0; i < tstor_device_count(ctx, t); i++) {
      tstor_device dev = {t, i}, back;
      char buf[64];
      ck_tstor_ok(tstor_device_format(ctx, dev, buf, sizeof buf));
      ck_assert_str_eq(buf, coretest_fmt("%s:%d", tstor_device_type_name(ctx, t), i));
      ck_tstor_ok(tstor_device_parse(ctx, buf, &back));
      ck_assert_int_eq(back.type, t);
      ck_assert_int_eq(back.index, i);
    }
  }
}
END_TEST

START_TEST(format_buffer_sizes) {
  tstor_device dev = coretest_dev(ctx, "fake:2");
  char buf[16];
  /* "fake:2" needs 7 bytes with its NUL. */
  ck_tstor_ok(tstor_device_format(ctx, dev, buf, 7));
  ck_assert_str_eq(buf, "fake:2");
  for (size_t size = 0; size < 7; size++) {
    memset(buf, '#', sizeof buf);
    ck_tstor_err(tstor_device_format(ctx, dev, buf, size), TSTOR_ERANGE);
    /* Nothing past size was written. */
    for (size_t i = size; i < sizeof buf; i++) ck_assert_int_eq(buf[i], '#');
  }
  ck_tstor_err(tstor_device_format(ctx, dev, NULL, 16), TSTOR_EINVAL);
}
END_TEST

START_TEST(format_unknown_devices) {
  const tstor_device bad[] = {{3, 0}, {-1, 0}, {0, 1}, {0, -1}, {2, 3}, {1000, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char buf[32] = "untouched";
    ck_tstor_err(tstor_device_format(ctx, bad[i], buf, sizeof buf), TSTOR_ENODEV);
  }
}
END_TEST

START_TEST(default_device) {
  tstor_device dev;
  ck_tstor_ok(tstor_device_default(ctx, &dev));
  ck_assert_int_eq(dev.type, type_id("cpu"));
  ck_assert_int_eq(dev.index, 0);
  ck_tstor_err(tstor_device_default(ctx, NULL), TSTOR_EINVAL);

  const char *text = coretest_fmt("[tstor]\ndefault_device = fake:1\n[backend cpu]\n"
                                  "library = tstor-cpu.so\n%s",
                                  coretest_fake_section("fake", NULL));
  tstor_context *other = NULL;
  ck_tstor_ok(tstor_context_open_string(text, "default.ini", &other));
  ck_tstor_ok(tstor_device_default(other, &dev));
  ck_assert_str_eq(tstor_device_type_name(other, dev.type), "fake");
  ck_assert_int_eq(dev.index, 1);
  tstor_context_close(other);

  /* A default past the device count is a config error naming its line. */
  text = coretest_fmt("[tstor]\ndefault_device = fake:2\n[backend cpu]\n"
                      "library = tstor-cpu.so\n%s",
                      coretest_fake_section("fake", NULL));
  other = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open_string(text, "default.ini", &other), TSTOR_ECONFIG);
  ck_assert_ptr_null(other);
  ck_last_error_has("default.ini:2");
}
END_TEST

START_TEST(copy_paths) {
  int cpu = type_id("cpu"), meta = type_id("meta"), fake = type_id("fake");
  /* The cpu backend registers its own cpu -> cpu kernel. */
  ck_assert_int_eq(tstor_copy_path_of(ctx, cpu, cpu), TSTOR_COPY_DIRECT);
  ck_assert_int_eq(tstor_copy_path_of(ctx, cpu, meta), TSTOR_COPY_CHECK);
  ck_assert_int_eq(tstor_copy_path_of(ctx, meta, cpu), TSTOR_COPY_NONE);
  ck_assert_int_eq(tstor_copy_path_of(ctx, meta, meta), TSTOR_COPY_CHECK);
  ck_assert_int_eq(tstor_copy_path_of(ctx, cpu, fake), TSTOR_COPY_DIRECT);
  ck_assert_int_eq(tstor_copy_path_of(ctx, fake, cpu), TSTOR_COPY_DIRECT);
  ck_assert_int_eq(tstor_copy_path_of(ctx, fake, fake), TSTOR_COPY_STAGED);
  ck_assert_int_eq(tstor_copy_path_of(ctx, fake, meta), TSTOR_COPY_CHECK);
  ck_assert_int_eq(tstor_copy_path_of(ctx, meta, fake), TSTOR_COPY_NONE);
  ck_tstor_err(tstor_copy_path_of(ctx, 3, cpu), TSTOR_ENODEV);
  ck_tstor_err(tstor_copy_path_of(ctx, cpu, 3), TSTOR_ENODEV);
  ck_tstor_err(tstor_copy_path_of(ctx, -1, cpu), TSTOR_ENODEV);
}
END_TEST

START_TEST(two_host_types_copy_by_memcpy) {
  /* abi_entry_minor registers a second host-memory type: host to host needs
   * no kernel. */
  tstor_context *other = coretest_open(coretest_fmt(
      "[backend newer]\nlibrary = %s\nentry = abi_entry_minor\n", coretest_plugin("abi")));
  int cpu = coretest_dev(other, "cpu").type, newer = coretest_dev(other, "newer").type;
  ck_assert_int_eq(tstor_copy_path_of(other, cpu, newer), TSTOR_COPY_HOST);
  ck_assert_int_eq(tstor_copy_path_of(other, newer, cpu), TSTOR_COPY_HOST);
  ck_assert_int_eq(tstor_copy_path_of(other, newer, newer), TSTOR_COPY_HOST);
  tstor_context_close(other);
}
END_TEST

int main(void) {
  Suite *s = suite_create("device");
  TCase *tc = tcase_create("registry");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, types_are_listed_by_name);
  tcase_add_test(tc, device_counts);
  tcase_add_test(tc, device_type_flags);
  tcase_add_test(tc, parse_good_names);
  tcase_add_test(tc, parse_unknown_devices);
  tcase_add_test(tc, parse_malformed_text);
  tcase_add_test(tc, format_round_trips);
  tcase_add_test(tc, format_buffer_sizes);
  tcase_add_test(tc, format_unknown_devices);
  tcase_add_test(tc, default_device);
  tcase_add_test(tc, copy_paths);
  tcase_add_test(tc, two_host_types_copy_by_memcpy);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
