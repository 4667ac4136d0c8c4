/* A module whose registration the core refuses (a device type name that is
 * not [a-z0-9_-]+, or one already taken) fails its init; the core's reason
 * must reach the user, in tstor_last_error() for a required backend and in
 * tstor_backend_info's message for an optional one, whether or not the
 * module writes a summary of its own. */
#include "coretest.h"

#include <tstor/backend.h>

static const char *section(const char *type, int optional, int summary) {
  return coretest_fmt("[backend odd]\nlibrary = %s\ntype = %s\noptional = %s\nsummary = %s\n",
                      coretest_plugin("badname"), type, optional ? "yes" : "no",
                      summary ? "yes" : "no");
}

static void expect_reason(const char *type, int code, const char *reason) {
  for (int summary = 0; summary < 2; summary++) {
    const char *text = coretest_fmt("%s\n%s", CORETEST_BASE_INI, section(type, 0, summary));
    tstor_context *ctx = (tstor_context *)0x1;
    ck_tstor_err(tstor_context_open_string(text, "reg.ini", &ctx), code);
    ck_assert_ptr_null(ctx);
    const char *why = tstor_last_error();
    ck_assert_msg(strstr(why, reason) && strstr(why, "reg.ini:10: backend odd"),
                  "type \"%s\", summary %d: detail \"%s\" lacks \"%s\"", type, summary, why,
                  reason);
    if (summary)
      ck_assert_msg(strstr(why, "registration failed"), "the module's summary is lost: %s", why);
    ck_assert(!coretest_is_loaded(coretest_plugin("badname")));

    text = coretest_fmt("%s\n%s", CORETEST_BASE_INI, section(type, 1, summary));
    ck_tstor_ok(tstor_context_open_string(text, "reg.ini", &ctx));
    tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
    ck_tstor_ok(tstor_backend_get(ctx, 2, &info));
    ck_assert_int_eq(info.state, TSTOR_BACKEND_FAILED);
    ck_assert_msg(strstr(info.message, reason), "type \"%s\": message \"%s\" lacks \"%s\"", type,
                  info.message, reason);
    ck_assert_int_eq(tstor_device_type_count(ctx), 2); /* cpu and meta, nothing of odd's */
    tstor_context_close(ctx);
  }
}

START_TEST(invalid_type_names_say_so) {
  expect_reason("a:b", TSTOR_EINVAL, "invalid device type name \"a:b\"");
  expect_reason("XPU", TSTOR_EINVAL, "invalid device type name \"XPU\"");
  expect_reason("", TSTOR_EINVAL, "invalid device type name \"\"");
  expect_reason("x y", TSTOR_EINVAL, "invalid device type name \"x y\"");
  expect_reason("abcdefghijklmnopqrstuvwxyz0123456", TSTOR_EINVAL, "invalid device type name");
}
END_TEST

START_TEST(taken_type_names_name_the_owner) {
  expect_reason("cpu", TSTOR_EEXIST, "device type \"cpu\" is already registered by backend cpu");
  expect_reason("meta", TSTOR_EEXIST,
                "device type \"meta\" is already registered by backend meta");
}
END_TEST

/* A good name still loads, so the refusals above are about the names. */
START_TEST(a_good_name_loads) {
  tstor_context *ctx = coretest_open(section("x_1-y", 0, 0));
  tstor_device dev = coretest_dev(ctx, "x_1-y");
  ck_assert_int_eq(tstor_device_count(ctx, dev.type), 1);
  tstor_context_close(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("registration");
  TCase *tc = tcase_create("names");
  tcase_add_test(tc, invalid_type_names_say_so);
  tcase_add_test(tc, taken_type_names_name_the_owner);
  tcase_add_test(tc, a_good_name_loads);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
