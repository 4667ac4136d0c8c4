/* The loader against modules that go wrong in every way the ABI allows: each
 * failure has its own code and a message naming the module, a required module
 * fails the open and leaves nothing loaded, an optional one is reported by
 * tstor_backend_get and the rest of the context works. */
#include "coretest.h"

#include <tstor/backend.h>

/* A [backend NAME] section for test plugin `plugin`, with extra lines. */
static const char *section(const char *name, const char *plugin, int optional,
                           const char *more) {
  return coretest_fmt("[backend %s]\nlibrary = %s\noptional = %s\n%s\n", name,
                      plugin[0] == '/' ? plugin : coretest_plugin(plugin),
                      optional ? "yes" : "no", more ? more : "");
}

/* The detail of the last expected failure, kept across the good open that
 * follows it. */
static char failure[1024];
#define ck_failure_has(needle)                                                           \
  ck_assert_msg(strstr(failure, (needle)) != NULL, "detail \"%s\" does not mention \"%s\"", \
                failure, (needle))

/* Opening cpu + meta + `extra` fails with `code`; the detail mentions `says`;
 * nothing stays loaded; a later good open works. */
static void expect_required_failure(const char *extra, int code, const char *says,
                                    const char *library) {
  tstor_context *ctx = (tstor_context *)0x1;
  const char *text = coretest_fmt("%s\n%s", CORETEST_BASE_INI, extra);
  int rc = tstor_context_open_string(text, "loader.ini", &ctx);
  ck_assert_msg(rc == code, "got %s, expected %s (%s)", tstor_err_name(rc),
                tstor_err_name(code), tstor_last_error());
  ck_assert_ptr_null(ctx);
  snprintf(failure, sizeof failure, "%s", tstor_last_error());
  if (says != NULL) ck_failure_has(says);
  ck_assert(!coretest_is_loaded(coretest_backend("cpu")));
  ck_assert(!coretest_is_loaded(coretest_backend("meta")));
  if (library != NULL) ck_assert(!coretest_is_loaded(library));
  /* The failure left no state behind that would spoil the next open. */
  ctx = coretest_open(NULL);
  tstor_context_close(ctx);
}

/* Opens cpu + meta + `extra` (an optional section, third), checks its report,
 * and that cpu and meta work. Returns the open context. */
static tstor_context *expect_optional_report(const char *extra, tstor_backend_state state,
                                             const char *says) {
  tstor_context *ctx = coretest_open(extra);
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 2, &info));
  ck_assert_int_eq(info.optional, 1);
  ck_assert_msg(info.state == state, "state %d, expected %d (%s)", info.state, state,
                info.message);
  if (says != NULL)
    ck_assert_msg(strstr(info.message, says) != NULL, "message \"%s\" lacks \"%s\"",
                  info.message, says);
  tstor_storage *s = NULL, *m = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, coretest_dev(ctx, "cpu"), 64, &s));
  ck_tstor_ok(tstor_storage_fill(s, 7));
  ck_assert_int_eq(((unsigned char *)tstor_storage_data(s))[63], 7);
  ck_tstor_ok(tstor_storage_new(ctx, coretest_dev(ctx, "meta"), 64, &m));
  ck_tstor_ok(tstor_storage_copy(m, s));
  tstor_storage_release(m);
  tstor_storage_release(s);
  return ctx;
}

/* ----------------------------------------------------------------- ABI */

START_TEST(newer_major_is_refused_before_init) {
  const char *lib = coretest_plugin("abi");
  expect_required_failure(section("abi", "abi", 0, NULL), TSTOR_EABI, "abi.so", lib);
  /* Both versions are named. */
  ck_failure_has(coretest_fmt("%d.0", TSTOR_ABI_MAJOR + 1));
  ck_failure_has(coretest_fmt("%d.%d", TSTOR_ABI_MAJOR, TSTOR_ABI_MINOR));
  tstor_context *ctx =
      expect_optional_report(section("abi", "abi", 1, NULL), TSTOR_BACKEND_FAILED, "abi.so");
  tstor_context_close(ctx);
}
END_TEST

START_TEST(older_major_is_refused) {
  expect_required_failure(section("abi", "abi", 0, "entry = abi_entry_major0"), TSTOR_EABI,
                          "abi.so", coretest_plugin("abi"));
  ck_failure_has(coretest_fmt("%d.3", TSTOR_ABI_MAJOR - 1));
}
END_TEST

START_TEST(short_entry_is_refused) {
  expect_required_failure(section("abi", "abi", 0, "entry = abi_entry_short"), TSTOR_EABI,
                          "abi.so", coretest_plugin("abi"));
}
END_TEST

START_TEST(newer_minor_with_longer_tables_loads) {
  tstor_context *ctx = expect_optional_report(section("abi", "abi", 1, "entry = abi_entry_minor"),
                                              TSTOR_BACKEND_LOADED, NULL);
  tstor_device dev = coretest_dev(ctx, "newer");
  ck_assert_int_eq(tstor_device_count(ctx, dev.type), 1);
  tstor_storage *s = NULL, *c = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, dev, 100, &s));
  ck_tstor_ok(tstor_storage_fill(s, 0x3c));
  ck_tstor_ok(tstor_storage_to(s, coretest_dev(ctx, "cpu"), &c));
  ck_assert_int_eq(((unsigned char *)tstor_storage_data(c))[99], 0x3c);
  ck_tstor_ok(tstor_storage_resize(s, 200));
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, dev, &st));
  tstor_storage_release(c);
  tstor_storage_release(s);
  tstor_context_close(ctx);
}
END_TEST

/* ------------------------------------------------------- loading fails */

START_TEST(missing_entry_point) {
  const char *lib = coretest_plugin("noentry");
  expect_required_failure(section("noentry", "noentry", 0, NULL), TSTOR_ELOAD,
                          "tstor_backend_entry", lib);
  ck_failure_has("noentry.so");
  tstor_context *ctx = expect_optional_report(section("noentry", "noentry", 1, NULL),
                                              TSTOR_BACKEND_FAILED, "tstor_backend_entry");
  tstor_context_close(ctx);
  ck_assert(!coretest_is_loaded(lib));
}
END_TEST

START_TEST(not_a_shared_object) {
  const char *txt = coretest_src("plugins/not-a-module.txt");
  expect_required_failure(section("text", txt, 0, NULL), TSTOR_ELOAD, "not-a-module.txt",
                          NULL);
  tstor_context *ctx = expect_optional_report(section("text", txt, 1, NULL),
                                              TSTOR_BACKEND_FAILED, "not-a-module.txt");
  tstor_context_close(ctx);
}
END_TEST

START_TEST(missing_library_file) {
  expect_required_failure(section("nothing", "/nonexistent/tstor-nothing.so", 0, NULL),
                          TSTOR_ELOAD, "/nonexistent/tstor-nothing.so", NULL);
  expect_required_failure("[backend nothing]\nlibrary = tstor-nothing.so\n", TSTOR_ELOAD,
                          "tstor-nothing.so", NULL);
  tstor_context *ctx = expect_optional_report(
      section("nothing", "/nonexistent/tstor-nothing.so", 1, NULL), TSTOR_BACKEND_FAILED,
      "tstor-nothing.so");
  tstor_context_close(ctx);
}
END_TEST

/* ------------------------------------------------------------ init fails */

START_TEST(init_fails) {
  const char *lib = coretest_plugin("initfail");
  expect_required_failure(section("initfail", "initfail", 0, NULL), TSTOR_EBACKEND, "on fire",
                          lib);
  ck_failure_has("initfail");
  /* The detail says where in the config the backend was named. */
  ck_failure_has("loader.ini:");
  /* The code init returned is the one the caller sees. */
  expect_required_failure(section("initfail", "initfail", 0, "code = -16"), TSTOR_EIO,
                          "on fire", lib);
  tstor_context *ctx = expect_optional_report(section("initfail", "initfail", 1, NULL),
                                              TSTOR_BACKEND_FAILED, "on fire");
  /* What it registered before failing is gone. */
  tstor_device dev;
  ck_tstor_err(tstor_device_parse(ctx, "initfail", &dev), TSTOR_ENODEV);
  /* and a device of the backend's name says why it is missing */
  ck_last_error_has("no device \"initfail\": the initfail backend failed to load:");
  ck_last_error_has("on fire");
  ck_assert_int_eq(tstor_device_type_count(ctx), 2);
  tstor_context_close(ctx);
  ck_assert(!coretest_is_loaded(lib));
}
END_TEST

START_TEST(init_declines) {
  const char *lib = coretest_plugin("decline");
  tstor_context *ctx = expect_optional_report(section("decline", "decline", 1, NULL),
                                              TSTOR_BACKEND_DECLINED, "no simulated hardware");
  tstor_device dev;
  ck_tstor_err(tstor_device_parse(ctx, "declined", &dev), TSTOR_ENODEV);
  ck_last_error_has("unknown device type in \"declined\" (this context has cpu, meta)");
  ck_tstor_err(tstor_device_parse(ctx, "decline:0", &dev), TSTOR_ENODEV);
  ck_last_error_has("no device \"decline:0\": the decline backend declined to load: no simulated hardware");
  ck_assert_int_eq(tstor_device_type_count(ctx), 2);
  /* A declined module is of no use: it is not kept loaded. */
  ck_assert(!coretest_is_loaded(lib));
  tstor_context_close(ctx);
}
END_TEST

START_TEST(required_init_declines) {
  /* Declining ("no device here") is an answer, not a failure: even for a
   * backend the config does not mark optional, it is reported and the open
   * goes on. */
  tstor_context *ctx = coretest_open(section("decline", "decline", 0, NULL));
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 2, &info));
  ck_assert_int_eq(info.state, TSTOR_BACKEND_DECLINED);
  ck_assert_int_eq(info.optional, 0);
  ck_assert_ptr_nonnull(strstr(info.message, "no simulated hardware"));
  ck_assert_int_eq(tstor_device_type_count(ctx), 2);
  ck_assert(!coretest_is_loaded(coretest_plugin("decline")));
  tstor_context_close(ctx);
}
END_TEST

START_TEST(device_name_taken_by_another_module) {
  const char *lib = coretest_plugin("dupname");
  expect_required_failure(section("dup", "dupname", 0, "type = cpu"), TSTOR_EEXIST, "cpu",
                          lib);
  tstor_context *ctx = expect_optional_report(section("dup", "dupname", 1, "type = cpu"),
                                              TSTOR_BACKEND_FAILED, "cpu");
  /* "cpu" is still the cpu backend's (expect_optional_report allocated on it). */
  ck_assert_int_eq(tstor_device_type_count(ctx), 2);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(device_name_registered_twice_by_one_module) {
  const char *lib = coretest_plugin("dupname");
  expect_required_failure(section("dup", "dupname", 0, "twice = yes"), TSTOR_EEXIST, "dup",
                          lib);
  tstor_context *ctx = expect_optional_report(section("dup", "dupname", 1, "twice = yes"),
                                              TSTOR_BACKEND_FAILED, "dup");
  tstor_device dev;
  ck_tstor_err(tstor_device_parse(ctx, "dup", &dev), TSTOR_ENODEV);
  tstor_context_close(ctx);
  /* Once is fine. */
  ctx = expect_optional_report(section("dup", "dupname", 1, NULL), TSTOR_BACKEND_LOADED, NULL);
  ck_tstor_ok(tstor_device_parse(ctx, "dup", &dev));
  tstor_context_close(ctx);
}
END_TEST

START_TEST(same_module_in_two_sections) {
  /* The second section's init registers "fake" again: it fails, and the first
   * instance (same shared object) keeps working. */
  const char *lib = coretest_plugin("fake");
  tstor_context *ctx = coretest_open(
      coretest_fmt("%s%s", coretest_fake_section("fake", NULL), section("fake2", "fake", 1, NULL)));
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 2, &info));
  ck_assert_int_eq(info.state, TSTOR_BACKEND_LOADED);
  ck_tstor_ok(tstor_backend_get(ctx, 3, &info));
  ck_assert_int_eq(info.state, TSTOR_BACKEND_FAILED);
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, coretest_dev(ctx, "fake:1"), 32, &s));
  ck_tstor_ok(tstor_storage_fill(s, 1));
  tstor_storage_release(s);
  ck_assert(coretest_is_loaded(lib));
  tstor_context_close(ctx);
  ck_assert(!coretest_is_loaded(lib));
}
END_TEST

/* ------------------------------------------------------ a good plugin */

START_TEST(fake_device_registers) {
  tstor_context *ctx = coretest_open(coretest_fake_section("fake", NULL));
  ck_assert_int_eq(tstor_device_type_count(ctx), 3);
  tstor_device dev = coretest_dev(ctx, "fake:1");
  ck_assert_str_eq(tstor_device_type_name(ctx, dev.type), "fake");
  ck_assert_int_eq(tstor_device_count(ctx, dev.type), 2);
  ck_tstor_err(tstor_device_parse(ctx, "fake:2", &dev), TSTOR_ENODEV);
  int cpu = coretest_dev(ctx, "cpu").type, fake = coretest_dev(ctx, "fake").type;
  ck_assert_int_eq(tstor_copy_path_of(ctx, fake, cpu), TSTOR_COPY_DIRECT);
  ck_assert_int_eq(tstor_copy_path_of(ctx, cpu, fake), TSTOR_COPY_DIRECT);
  ck_assert_int_eq(tstor_copy_path_of(ctx, fake, fake), TSTOR_COPY_STAGED);
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 2, &info));
  ck_assert_str_eq(info.name, "fake");
  ck_assert_int_eq(info.state, TSTOR_BACKEND_LOADED);
  ck_assert_int_eq(info.optional, 0);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(fake_device_with_no_devices) {
  tstor_context *ctx = coretest_open(coretest_fake_section("fake", "devices = 0"));
  tstor_device dev;
  ck_tstor_err(tstor_device_parse(ctx, "fake", &dev), TSTOR_ENODEV);
  ck_tstor_err(tstor_device_parse(ctx, "fake:0", &dev), TSTOR_ENODEV);
  ck_assert_int_eq(tstor_device_type_count(ctx), 3);
  int type = -1;
  for (int t = 0; t < tstor_device_type_count(ctx); t++)
    if (strcmp(tstor_device_type_name(ctx, t), "fake") == 0) type = t;
  ck_assert_int_ge(type, 0);
  ck_assert_int_eq(tstor_device_count(ctx, type), 0);
  tstor_context_close(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("loader");
  TCase *tc = tcase_create("abi");
  tcase_add_test(tc, newer_major_is_refused_before_init);
  tcase_add_test(tc, older_major_is_refused);
  tcase_add_test(tc, short_entry_is_refused);
  tcase_add_test(tc, newer_minor_with_longer_tables_loads);
  suite_add_tcase(s, tc);
  tc = tcase_create("load");
  tcase_add_test(tc, missing_entry_point);
  tcase_add_test(tc, not_a_shared_object);
  tcase_add_test(tc, missing_library_file);
  suite_add_tcase(s, tc);
  tc = tcase_create("init");
  tcase_add_test(tc, init_fails);
  tcase_add_test(tc, init_declines);
  tcase_add_test(tc, required_init_declines);
  tcase_add_test(tc, device_name_taken_by_another_module);
  tcase_add_test(tc, device_name_registered_twice_by_one_module);
  tcase_add_test(tc, same_module_in_two_sections);
  tcase_add_test(tc, fake_device_registers);
  tcase_add_test(tc, fake_device_with_no_devices);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
