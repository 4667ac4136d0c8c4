/* Config files: every malformed input is TSTOR_ECONFIG with the file and line
 * in the detail, and leaves nothing open or loaded; keys a backend asks for are
 * its own and the rest are reported; environment overrides win over the file. */
#define _GNU_SOURCE 1 /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "coretest.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

static const char *config_path(const char *name) {
  return coretest_src(coretest_fmt("configs/%s", name));
}

/* Opening `name` fails with `code`, names "name:line" in the detail, hands back
 * NULL and leaves no backend module loaded. */
static void expect_file_error(const char *name, int code, int line) {
  tstor_context *ctx = (tstor_context *)0x1;
  const char *path = config_path(name);
  int rc = tstor_context_open(path, &ctx);
  ck_assert_msg(rc == code, "%s: got %s, expected %s (%s)", name, tstor_err_name(rc),
                tstor_err_name(code), tstor_last_error());
  ck_assert_ptr_null(ctx);
  ck_last_error_has(coretest_fmt("%s:%d", name, line));
  ck_assert_msg(!coretest_is_loaded(coretest_backend("cpu")), "%s: cpu still loaded", name);
  ck_assert_msg(!coretest_is_loaded(coretest_backend("meta")), "%s: meta still loaded", name);
}

/* As expect_file_error, for INI text in memory named "inline.ini". */
static void expect_text_error(const char *text, int code, int line) {
  tstor_context *ctx = (tstor_context *)0x1;
  int rc = tstor_context_open_string(text, "inline.ini", &ctx);
  ck_assert_msg(rc == code, "got %s, expected %s (%s) for:\n%s", tstor_err_name(rc),
                tstor_err_name(code), tstor_last_error(), text);
  ck_assert_ptr_null(ctx);
  ck_last_error_has(coretest_fmt("inline.ini:%d", line));
  ck_assert(!coretest_is_loaded(coretest_backend("cpu")));
}

/* ------------------------------------------------------------ good files */

START_TEST(good_file_opens) {
  tstor_context *ctx = NULL;
  const char *path = config_path("good.ini");
  ck_tstor_ok(tstor_context_open(path, &ctx));
  ck_assert_str_eq(tstor_context_config_name(ctx), path);
  ck_assert_int_eq(tstor_backend_count(ctx), 2);
  tstor_device dev;
  ck_tstor_ok(tstor_device_parse(ctx, "meta", &dev));
  ck_tstor_ok(tstor_device_default(ctx, &dev));
  ck_assert_str_eq(tstor_device_type_name(ctx, dev.type), "cpu");
  tstor_context_close(ctx);
}
END_TEST

START_TEST(comments_blank_lines_and_spacing) {
  const char *text =
      "; leading comment\n"
      "\n"
      "   [tstor]   \n"
      "default_device=meta\n"
      "\n"
      "log_level   =   error   \n"
      "[backend cpu]\n"
      "library = tstor-cpu.so ; trailing comment\n"
      "[backend meta]\n"
      "library = tstor-meta.so";
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(text, "spacing.ini", &ctx));
  ck_assert_str_eq(tstor_context_config_name(ctx), "spacing.ini");
  tstor_device dev;
  ck_tstor_ok(tstor_device_default(ctx, &dev));
  ck_assert_str_eq(tstor_device_type_name(ctx, dev.type), "meta");
  tstor_context_close(ctx);
}
END_TEST

START_TEST(crlf_line_ends) {
  const char *text =
      "[tstor]\r\ndefault_device = cpu\r\n\r\n[backend cpu]\r\nlibrary = tstor-cpu.so\r\n";
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(text, "crlf.ini", &ctx));
  ck_assert_int_eq(tstor_backend_count(ctx), 1);
  tstor_context_close(ctx);
}
END_TEST

START_TEST(line_of_198_characters_is_fine) {
  /* inih's limit: 199 bytes with the newline. */
  char line[199];
  memset(line, ' ', sizeof line);
  memcpy(line, "log_level = warn", 16);
  line[196] = ';';
  line[197] = 'x';
  line[198] = '\0';
  ck_assert_uint_eq(strlen(line), 198);
  const char *text = coretest_fmt("[tstor]\ndefault_device = cpu\n%s\n[backend cpu]\n"
                                  "library = tstor-cpu.so\n",
                                  line);
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(text, "long.ini", &ctx));
  tstor_context_close(ctx);
}
END_TEST

START_TEST(disabled_backend_is_not_loaded) {
  const char *text =
      "[tstor]\ndefault_device = cpu\n[backend cpu]\nlibrary = tstor-cpu.so\n"
      "[backend meta]\nlibrary = tstor-meta.so\nenabled = no\n";
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(text, "disabled.ini", &ctx));
  ck_assert_int_eq(tstor_backend_count(ctx), 2);
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 1, &info));
  ck_assert_str_eq(info.name, "meta");
  ck_assert_int_eq(info.state, TSTOR_BACKEND_DISABLED);
  tstor_device dev;
  ck_tstor_err(tstor_device_parse(ctx, "meta", &dev), TSTOR_ENODEV);
  ck_assert(!coretest_is_loaded(coretest_backend("meta")));
  tstor_context_close(ctx);
}
END_TEST

START_TEST(boolean_spellings) {
  const char *yes[] = {"yes", "true", "on", "1", "YES", "True"};
  const char *no[] = {"no", "false", "off", "0", "NO", "False"};
  for (int i = 0; i < 6; i++) {
    const char *text = coretest_fmt(
        "[tstor]\ndefault_device = cpu\n[backend cpu]\nlibrary = tstor-cpu.so\n"
        "optional = %s\n[backend meta]\nlibrary = tstor-meta.so\nenabled = %s\n",
        yes[i], no[i]);
    tstor_context *ctx = NULL;
    ck_tstor_ok(tstor_context_open_string(text, "bools.ini", &ctx));
    tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
    ck_tstor_ok(tstor_backend_get(ctx, 0, &info));
    ck_assert_int_eq(info.optional, 1);
    ck_tstor_ok(tstor_backend_get(ctx, 1, &info));
    ck_assert_int_eq(info.optional, 0);
    ck_assert_int_eq(info.state, TSTOR_BACKEND_DISABLED);
    tstor_context_close(ctx);
  }
}
END_TEST

START_TEST(log_level_spellings) {
  const char *levels[] = {"error", "warn", "info", "debug", "0", "1", "2", "3"};
  for (int i = 0; i < 8; i++) {
    const char *text = coretest_fmt(
        "[tstor]\ndefault_device = cpu\nlog_level = %s\n[backend cpu]\nlibrary = tstor-cpu.so\n",
        levels[i]);
    tstor_context *ctx = NULL;
    ck_tstor_ok(tstor_context_open_string(text, "levels.ini", &ctx));
    tstor_context_close(ctx);
  }
}
END_TEST

START_TEST(entry_symbol_override) {
  /* entry = names the symbol to look up instead of tstor_backend_entry. */
  const char *text = coretest_fmt("%s[backend fake]\nlibrary = %s\nentry = no_such_entry\n",
                                  CORETEST_BASE_INI, coretest_plugin("fake"));
  tstor_context *ctx = NULL;
  ck_tstor_err(tstor_context_open_string(text, "entry.ini", &ctx), TSTOR_ELOAD);
  ck_last_error_has("no_such_entry");
  ck_assert_ptr_null(ctx);
  text = coretest_fmt("%s[backend fake]\nlibrary = %s\nentry = tstor_backend_entry\n",
                      CORETEST_BASE_INI, coretest_plugin("fake"));
  ck_tstor_ok(tstor_context_open_string(text, "entry.ini", &ctx));
  tstor_context_close(ctx);
}
END_TEST

/* ------------------------------------------------------------- bad files */

START_TEST(file_malformed_line) { expect_file_error("malformed.ini", TSTOR_ECONFIG, 3); }
END_TEST
START_TEST(file_unknown_tstor_key) { expect_file_error("unknown-key.ini", TSTOR_ECONFIG, 4); }
END_TEST
START_TEST(file_duplicate_section) {
  expect_file_error("duplicate-section.ini", TSTOR_ECONFIG, 8);
}
END_TEST
START_TEST(file_missing_library) {
  expect_file_error("missing-library.ini", TSTOR_ECONFIG, 8);
  ck_last_error_has("library");
}
END_TEST
START_TEST(file_bad_optional) {
  expect_file_error("bad-optional.ini", TSTOR_ECONFIG, 6);
  ck_last_error_has("maybe");
}
END_TEST
START_TEST(file_bad_log_level) {
  expect_file_error("bad-log-level.ini", TSTOR_ECONFIG, 3);
  ck_last_error_has("loud");
}
END_TEST
START_TEST(file_bad_enabled) {
  expect_file_error("bad-enabled.ini", TSTOR_ECONFIG, 9);
  ck_last_error_has("perhaps");
}
END_TEST
START_TEST(file_unknown_backend_key) {
  expect_file_error("unknown-backend-key.ini", TSTOR_ECONFIG, 6);
  ck_last_error_has("colour");
}
END_TEST
START_TEST(file_unknown_section) {
  expect_file_error("unknown-section.ini", TSTOR_ECONFIG, 5);
  ck_last_error_has("frobnicate");
}
END_TEST
START_TEST(file_long_line) { expect_file_error("long-line.ini", TSTOR_ECONFIG, 4); }
END_TEST
START_TEST(file_unterminated_section) {
  expect_file_error("unterminated-section.ini", TSTOR_ECONFIG, 4);
}
END_TEST
START_TEST(file_empty_backend_name) {
  expect_file_error("empty-backend-name.ini", TSTOR_ECONFIG, 4);
}
END_TEST
START_TEST(file_bad_default_device) {
  expect_file_error("bad-default-device.ini", TSTOR_ECONFIG, 3);
  ck_last_error_has("tpu");
}
END_TEST

START_TEST(file_nul_byte) {
  static const char text[] =
      "[tstor]\ndefault_device = cpu\n[backend cpu]\nlibrary = tstor-cpu.so\x00junk\n";
  const char *path = coretest_write_file(".ini", text, sizeof text - 1);
  tstor_context *ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open(path, &ctx), TSTOR_ECONFIG);
  ck_assert_ptr_null(ctx);
  const char *slash = strrchr(path, '/');
  ck_last_error_has(coretest_fmt("%s:4", slash + 1));
  unlink(path);
}
END_TEST

START_TEST(file_missing) {
  tstor_context *ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open(config_path("no-such-file.ini"), &ctx), TSTOR_ENOENT);
  ck_assert_ptr_null(ctx);
  ck_last_error_has("no-such-file.ini");
}
END_TEST

START_TEST(file_unreadable) {
  if (geteuid() == 0) return; /* root reads everything */
  const char *path = coretest_write_file(".ini", "[tstor]\n", 8);
  ck_assert_int_eq(chmod(path, 0), 0);
  tstor_context *ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open(path, &ctx), TSTOR_EACCES);
  ck_assert_ptr_null(ctx);
  unlink(path);
}
END_TEST

/* ------------------------------------------------------------ bad texts */

START_TEST(text_errors_name_their_line) {
  const struct {
    const char *text;
    int line;
    const char *says;
  } cases[] = {
      {"[tstor]\ndefault_device cpu\n", 2, NULL},
      {"[tstor]\ndefault_device = cpu\nspeed = 11\n", 3, "speed"},
      {"[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n[tstor]\n", 4, "tstor"},
      {"[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n\n[backend cpu]\nlibrary = "
       "tstor-cpu.so\n",
       5, "cpu"},
      {"[tstor]\n[backend cpu]\noptional = yes\n", 2, "library"},
      {"[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\noptional = maybe\n", 4, "maybe"},
      {"[tstor]\nlog_level = loud\n[backend cpu]\nlibrary = tstor-cpu.so\n", 2, "loud"},
      {"[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n[nonsense]\n", 4, "nonsense"},
      {"[tstor]\n[backend cpu\nlibrary = tstor-cpu.so\n", 2, NULL},
      {"key = before any section\n[tstor]\n", 1, NULL},
      {"[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n[backend BAD NAME]\nlibrary = x.so\n", 4,
       NULL},
      /* An indented line after a key would be glued to its value by inih. */
      {"[tstor]\ndefault_device = cpu\n  log_level = warn\n[backend cpu]\nlibrary = tstor-cpu.so\n",
       3, NULL},
      {"[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\nlibrary = tstor-meta.so\n", 4, "library"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    expect_text_error(cases[i].text, TSTOR_ECONFIG, cases[i].line);
    if (cases[i].says != NULL) ck_last_error_has(cases[i].says);
  }
}
END_TEST

/* Text in memory has the 1 MiB bound of a file: at the bound it opens, one
 * byte more is refused before any line is read. */
START_TEST(text_over_one_mib_is_refused) {
  const size_t limit = (size_t)1 << 20;
  const char *base = CORETEST_BASE_INI;
  size_t blank = limit - strlen(base);
  char *text = malloc(limit + 2);
  ck_assert_ptr_nonnull(text);
  memset(text, '\n', blank);
  memcpy(text + blank, base, strlen(base) + 1);
  ck_assert_uint_eq(strlen(text), limit);
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open_string(text, "big.ini", &ctx));
  tstor_context_close(ctx);
  /* Blank lines then "[bad" on the last: the error names a line past 10^6. */
  memset(text, '\n', limit - 4);
  memcpy(text + limit - 4, "[bad", 5);
  ck_tstor_err(tstor_context_open_string(text, "big.ini", &ctx), TSTOR_ECONFIG);
  ck_last_error_has(coretest_fmt("big.ini:%zu: unterminated", limit - 3));
  memmove(text + 1, text, limit + 1);
  ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open_string(text, "big.ini", &ctx), TSTOR_ECONFIG);
  ck_assert_ptr_null(ctx);
  ck_last_error_has("big.ini: config text too large (more than 1048576 bytes)");
  free(text);
}
END_TEST

/* 2^31 + 1 blank lines overflowed the reader's int line counter (UBSan), and
 * measuring the text took seconds on a loaded machine. The text is read no
 * further than one byte past the 1 MiB bound: here 2 MiB of newlines, then
 * 2 GiB of address space that cannot be read, which would kill the test at the
 * first byte the reader touched there. */
START_TEST(text_of_gigabytes_is_refused_unread) {
  const size_t readable = (size_t)2 << 20, total = ((size_t)2 << 30) + readable;
  char *text = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ck_assert_ptr_ne(text, MAP_FAILED);
  ck_assert_int_eq(mprotect(text, readable, PROT_READ | PROT_WRITE), 0);
  memset(text, '\n', readable);
  tstor_context *ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open_string(text, "lines.ini", &ctx), TSTOR_ECONFIG);
  ck_assert_ptr_null(ctx);
  ck_last_error_has("lines.ini: config text too large (more than 1048576 bytes)");
  munmap(text, total);
}
END_TEST

START_TEST(text_lines_of_200_and_more_characters) {
  const size_t lengths[] = {200, 201, 256, 4096};
  for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
    char line[4100];
    memset(line, 'x', lengths[i]);
    memcpy(line, "; ", 2);
    line[lengths[i]] = '\0';
    const char *text = coretest_fmt("[tstor]\ndefault_device = cpu\n\n%s\n[backend cpu]\n"
                                    "library = tstor-cpu.so\n",
                                    line);
    expect_text_error(text, TSTOR_ECONFIG, 4);
  }
}
END_TEST

START_TEST(unknown_backend_key_after_init) {
  /* The backend reads its keys in init, so unknown ones can only be told after
   * it: the module ran (init and fini both) and the open still fails. */
  const char *trace = coretest_tmpfile(".trace");
  const char *text = coretest_fmt("%s[backend fake]\nlibrary = %s\ntrace = %s\ndevices = 1\n"
                                  "colour = blue\n",
                                  CORETEST_BASE_INI, coretest_plugin("fake"), trace);
  int line = 0;
  for (const char *p = text; *p; p++)
    if (*p == '\n') line++;
  expect_text_error(text, TSTOR_ECONFIG, line);
  ck_last_error_has("colour");
  ck_assert_str_eq(coretest_read_file(trace), "init 1\nfini live=0\n");
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
  unlink(trace);
  /* A config mistake is not excused by optional = yes. */
  text = coretest_fmt("%s[backend fake]\nlibrary = %s\noptional = yes\ncolour = blue\n",
                      CORETEST_BASE_INI, coretest_plugin("fake"));
  line = 0;
  for (const char *p = text; *p; p++)
    if (*p == '\n') line++;
  expect_text_error(text, TSTOR_ECONFIG, line);
}
END_TEST

/* Integers are decimal, whatever C's literals say: a leading 0 is not octal. */
START_TEST(backend_integers_are_decimal) {
  static const struct {
    const char *value;
    int count;
  } cases[] = {{"1", 1}, {"7", 7}, {"07", 7}, {"+3", 3}, {"08", 8}, {"+08", 8}, {"0005", 5}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tstor_context *ctx = coretest_open(
        coretest_fake_section("fake", coretest_fmt("devices = %s", cases[i].value)));
    ck_assert_msg(tstor_device_count(ctx, coretest_dev(ctx, "fake").type) == cases[i].count,
                  "devices = %s", cases[i].value);
    tstor_context_close(ctx);
  }
}
END_TEST

START_TEST(backend_keys_are_the_backends) {
  /* Keys the backend asks for are not unknown, and reach it. */
  tstor_context *ctx = coretest_open(coretest_fake_section("fake", "devices = 5"));
  ck_assert_int_eq(tstor_device_count(ctx, coretest_dev(ctx, "fake").type), 5);
  tstor_context_close(ctx);
}
END_TEST

/* A backend's own check, through the registrar's config_error, names the file
 * and line of the key as the core's own checks do. */
START_TEST(backend_config_error_names_the_line) {
  const char *text = coretest_fmt("%s[backend fake]\nlibrary = %s\ndevices = 1\nlabel = Loud\n",
                                  CORETEST_BASE_INI, coretest_plugin("fake"));
  int line = 0;
  for (const char *p = text; *p; p++)
    if (*p == '\n') line++;
  expect_text_error(text, TSTOR_ECONFIG, line);
  ck_last_error_has("[backend fake] label = 'Loud': use lower case");
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
  tstor_context *ctx = coretest_open(coretest_fake_section("fake", "label = quiet"));
  tstor_context_close(ctx);
}
END_TEST

START_TEST(backend_typed_values_are_checked) {
  const char *values[] = {"devices = lots", "devices = 9", "devices = -1", "devices = 3x",
                          "devices = 99999999999999999999999", "devices = 0x4", "devices = 0X4",
                          "devices = 0b1", "devices = 1e0", "devices = 4.", "devices = 0x",
                          "devices = +", "devices = -", "devices = 4 4", "devices = 0010"};
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    const char *text =
        coretest_fmt("%s[backend fake]\nlibrary = %s\n%s\n", CORETEST_BASE_INI,
                     coretest_plugin("fake"), values[i]);
    int line = 0;
    for (const char *p = text; *p; p++)
      if (*p == '\n') line++;
    expect_text_error(text, TSTOR_ECONFIG, line);
    ck_last_error_has("devices");
    ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
  }
  const char *text = coretest_fmt("%s[backend dup]\nlibrary = %s\ntwice = sometimes\n",
                                  CORETEST_BASE_INI, coretest_plugin("dupname"));
  int line = 0;
  for (const char *p = text; *p; p++)
    if (*p == '\n') line++;
  expect_text_error(text, TSTOR_ECONFIG, line);
  ck_last_error_has("twice");
}
END_TEST

/* ------------------------------------------------- environment overrides */

START_TEST(env_config_names_the_file) {
  const char *path = config_path("good.ini");
  coretest_setenv("TSTOR_CONFIG", path);
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open(NULL, &ctx));
  ck_assert_str_eq(tstor_context_config_name(ctx), path);
  ck_assert_int_eq(tstor_backend_count(ctx), 2);
  tstor_context_close(ctx);

  coretest_setenv("TSTOR_CONFIG", config_path("malformed.ini"));
  ck_tstor_err(tstor_context_open(NULL, &ctx), TSTOR_ECONFIG);
  ck_last_error_has("malformed.ini:3");
  ck_assert_ptr_null(ctx);
  /* An explicit path wins over the variable. */
  ck_tstor_ok(tstor_context_open(path, &ctx));
  tstor_context_close(ctx);

  coretest_setenv("TSTOR_CONFIG", "/nonexistent/tstor.ini");
  ck_tstor_err(tstor_context_open(NULL, &ctx), TSTOR_ENOENT);
  ck_last_error_has("/nonexistent/tstor.ini");
  coretest_setenv("TSTOR_CONFIG", NULL);
}
END_TEST

START_TEST(env_config_unset_means_embedded_default) {
  coretest_setenv("TSTOR_CONFIG", NULL);
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open(NULL, &ctx));
  ck_assert_str_eq(tstor_context_config_name(ctx), "embedded default");
  tstor_device dev;
  ck_tstor_ok(tstor_device_default(ctx, &dev));
  ck_assert_str_eq(tstor_device_type_name(ctx, dev.type), "cpu");
  ck_tstor_ok(tstor_device_parse(ctx, "meta", &dev));
  tstor_context_close(ctx);
}
END_TEST

START_TEST(env_default_device) {
  coretest_setenv("TSTOR_DEFAULT_DEVICE", "meta");
  tstor_context *ctx = NULL;
  ck_tstor_ok(tstor_context_open(config_path("good.ini"), &ctx));
  tstor_device dev;
  ck_tstor_ok(tstor_device_default(ctx, &dev));
  ck_assert_str_eq(tstor_device_type_name(ctx, dev.type), "meta");
  ck_assert_int_eq(dev.index, 0);
  tstor_context_close(ctx);

  /* The variable wins over the file, so the file's unusable default is never
   * looked at. */
  coretest_setenv("TSTOR_DEFAULT_DEVICE", "cpu");
  ck_tstor_ok(tstor_context_open(config_path("bad-default-device.ini"), &ctx));
  ck_tstor_ok(tstor_device_default(ctx, &dev));
  ck_assert_str_eq(tstor_device_type_name(ctx, dev.type), "cpu");
  tstor_context_close(ctx);

  coretest_setenv("TSTOR_DEFAULT_DEVICE", "tpu:3");
  ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open(config_path("good.ini"), &ctx), TSTOR_ECONFIG);
  ck_assert_ptr_null(ctx);
  ck_last_error_has("TSTOR_DEFAULT_DEVICE");
  ck_last_error_has("tpu");
  coretest_setenv("TSTOR_DEFAULT_DEVICE", NULL);
}
END_TEST

START_TEST(env_backend_dir) {
  char modules[4096]; /* a copy: setenv may move the variable's storage */
  snprintf(modules, sizeof modules, "%s", tstor_test_backend_dir());
  const char *text = "[tstor]\ndefault_device = cpu\nbackend_dir = /nonexistent\n"
                     "[backend cpu]\nlibrary = tstor-cpu.so\n";
  tstor_context *ctx = NULL;
  /* The test environment's TSTOR_BACKEND_DIR wins over the file's. */
  ck_tstor_ok(tstor_context_open_string(text, "dir.ini", &ctx));
  tstor_context_close(ctx);

  /* A colon-separated list is searched in order. */
  coretest_setenv("TSTOR_BACKEND_DIR", coretest_fmt("/nonexistent:%s", modules));
  ck_tstor_ok(tstor_context_open_string(text, "dir.ini", &ctx));
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 0, &info));
  ck_assert_str_eq(info.library, coretest_fmt("%s/tstor-cpu.so", modules));
  tstor_context_close(ctx);

  /* Without the variable, the file's backend_dir is used... */
  coretest_setenv("TSTOR_BACKEND_DIR", NULL);
  ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open_string(text, "dir.ini", &ctx), TSTOR_ELOAD);
  ck_assert_ptr_null(ctx);
  ck_last_error_has("tstor-cpu.so");
  text = coretest_fmt("[tstor]\ndefault_device = cpu\nbackend_dir = %s\n"
                      "[backend cpu]\nlibrary = tstor-cpu.so\n",
                      modules);
  ck_tstor_ok(tstor_context_open_string(text, "dir.ini", &ctx));
  tstor_context_close(ctx);

  /* ... and the variable's folders are searched before it: with a module of
   * the same name in both, the variable's is loaded. */
  char env_dir[] = "/tmp/tstor-test-envXXXXXX", file_dir[] = "/tmp/tstor-test-fileXXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(env_dir));
  ck_assert_ptr_nonnull(mkdtemp(file_dir));
  const char *env_lib = coretest_fmt("%s/tstor-x.so", env_dir);
  const char *file_lib = coretest_fmt("%s/tstor-x.so", file_dir);
  ck_assert_int_eq(symlink(coretest_plugin("fake"), env_lib), 0);
  ck_assert_int_eq(symlink(coretest_plugin("dupname"), file_lib), 0);
  text = coretest_fmt("[tstor]\ndefault_device = cpu\nbackend_dir = %s\n"
                      "[backend cpu]\nlibrary = %s\n[backend x]\nlibrary = tstor-x.so\n",
                      file_dir, coretest_fmt("%s/tstor-cpu.so", modules));
  coretest_setenv("TSTOR_BACKEND_DIR", env_dir);
  ck_tstor_ok(tstor_context_open_string(text, "dir.ini", &ctx));
  ck_tstor_ok(tstor_backend_get(ctx, 1, &info));
  ck_assert_str_eq(info.library, env_lib);
  ck_tstor_ok(tstor_device_parse(ctx, "fake", &(tstor_device){0, 0}));
  tstor_context_close(ctx);
  coretest_setenv("TSTOR_BACKEND_DIR", NULL);
  ck_tstor_ok(tstor_context_open_string(text, "dir.ini", &ctx));
  ck_tstor_ok(tstor_backend_get(ctx, 1, &info));
  ck_assert_str_eq(info.library, file_lib);
  ck_tstor_ok(tstor_device_parse(ctx, "dup", &(tstor_device){0, 0}));
  tstor_context_close(ctx);
  coretest_setenv("TSTOR_BACKEND_DIR", modules);
  unlink(env_lib);
  unlink(file_lib);
  rmdir(env_dir);
  rmdir(file_dir);
}
END_TEST

START_TEST(env_log_level) {
  const char *text = "[tstor]\ndefault_device = cpu\nlog_level = error\n"
                     "[backend cpu]\nlibrary = tstor-cpu.so\n";
  const char *good[] = {"error", "warn", "info", "debug", "0", "3"};
  for (int i = 0; i < 6; i++) {
    coretest_setenv("TSTOR_LOG", good[i]);
    tstor_context *ctx = NULL;
    ck_tstor_ok(tstor_context_open_string(text, "log.ini", &ctx));
    tstor_context_close(ctx);
  }
  coretest_setenv("TSTOR_LOG", "loud");
  tstor_context *ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open_string(text, "log.ini", &ctx), TSTOR_ECONFIG);
  ck_assert_ptr_null(ctx);
  ck_last_error_has("TSTOR_LOG");
  ck_last_error_has("loud");
  coretest_setenv("TSTOR_LOG", NULL);
}
END_TEST

/* What opening `text` writes to stderr. */
static const char *stderr_of_open(const char *text) {
  const char *path = coretest_tmpfile(".err");
  fflush(stderr);
  int saved = dup(2);
  int fd = open(path, O_WRONLY | O_TRUNC);
  ck_assert_int_ge(saved, 0);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(dup2(fd, 2), 2);
  close(fd);
  tstor_context *ctx = NULL;
  int rc = tstor_context_open_string(text, "log.ini", &ctx);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  ck_assert_msg(rc == 0, "open failed: %s", tstor_last_error());
  tstor_context_close(ctx);
  const char *out = coretest_read_file(path);
  unlink(path);
  return out;
}

START_TEST(log_level_decides_what_is_printed) {
  const char *quiet = coretest_fmt("[tstor]\nlog_level = error\n[backend cpu]\nlibrary = "
                                   "tstor-cpu.so\n%s",
                                   coretest_fake_section("fake", NULL));
  const char *chatty = coretest_fmt("[tstor]\nlog_level = debug\n[backend cpu]\nlibrary = "
                                    "tstor-cpu.so\n%s",
                                    coretest_fake_section("fake", NULL));
  coretest_setenv("TSTOR_LOG", NULL);
  ck_assert_str_eq(stderr_of_open(quiet), "");
  const char *out = stderr_of_open(chatty);
  ck_assert_msg(strstr(out, "backend cpu loaded") != NULL, "stderr: %s", out);
  /* A backend's own messages, through the registrar, name its section. */
  ck_assert_msg(strstr(out, "fake: ready with 2 device(s)") != NULL, "stderr: %s", out);

  /* The variable wins over the file, both ways. */
  coretest_setenv("TSTOR_LOG", "debug");
  out = stderr_of_open(quiet);
  ck_assert_msg(strstr(out, "fake: ready with 2 device(s)") != NULL, "stderr: %s", out);
  coretest_setenv("TSTOR_LOG", "info");
  out = stderr_of_open(quiet);
  ck_assert_msg(strstr(out, "backend cpu loaded") != NULL, "stderr: %s", out);
  ck_assert_msg(strstr(out, "ready with") == NULL, "stderr: %s", out);
  coretest_setenv("TSTOR_LOG", "error");
  ck_assert_str_eq(stderr_of_open(chatty), "");
  coretest_setenv("TSTOR_LOG", NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("config");
  TCase *tc = tcase_create("good");
  tcase_add_test(tc, good_file_opens);
  tcase_add_test(tc, comments_blank_lines_and_spacing);
  tcase_add_test(tc, crlf_line_ends);
  tcase_add_test(tc, line_of_198_characters_is_fine);
  tcase_add_test(tc, disabled_backend_is_not_loaded);
  tcase_add_test(tc, boolean_spellings);
  tcase_add_test(tc, log_level_spellings);
  tcase_add_test(tc, entry_symbol_override);
  tcase_add_test(tc, backend_keys_are_the_backends);
  tcase_add_test(tc, backend_integers_are_decimal);
  suite_add_tcase(s, tc);
  tc = tcase_create("bad files");
  tcase_add_test(tc, file_malformed_line);
  tcase_add_test(tc, file_unknown_tstor_key);
  tcase_add_test(tc, file_duplicate_section);
  tcase_add_test(tc, file_missing_library);
  tcase_add_test(tc, file_bad_optional);
  tcase_add_test(tc, file_bad_log_level);
  tcase_add_test(tc, file_bad_enabled);
  tcase_add_test(tc, file_unknown_backend_key);
  tcase_add_test(tc, file_unknown_section);
  tcase_add_test(tc, file_long_line);
  tcase_add_test(tc, file_unterminated_section);
  tcase_add_test(tc, file_empty_backend_name);
  tcase_add_test(tc, file_bad_default_device);
  tcase_add_test(tc, file_nul_byte);
  tcase_add_test(tc, file_missing);
  tcase_add_test(tc, file_unreadable);
  suite_add_tcase(s, tc);
  tc = tcase_create("bad text");
  tcase_add_test(tc, text_errors_name_their_line);
  tcase_add_test(tc, text_lines_of_200_and_more_characters);
  tcase_add_test(tc, text_over_one_mib_is_refused);
  tcase_add_test(tc, text_of_gigabytes_is_refused_unread);
  tcase_add_test(tc, unknown_backend_key_after_init);
  tcase_add_test(tc, backend_typed_values_are_checked);
  tcase_add_test(tc, backend_config_error_names_the_line);
  suite_add_tcase(s, tc);
  tc = tcase_create("environment");
  tcase_add_test(tc, env_config_names_the_file);
  tcase_add_test(tc, env_config_unset_means_embedded_default);
  tcase_add_test(tc, env_default_device);
  tcase_add_test(tc, env_backend_dir);
  tcase_add_test(tc, env_log_level);
  tcase_add_test(tc, log_level_decides_what_is_printed);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
