/* The bad-input catalogue: what the config, loader and storage suites do not
 * already try. Duplicate keys of every kind, odd section headers, NUL bytes
 * anywhere in a file, numbers out of range, config and library paths that
 * are directories, FIFOs, devices, empty or truncated files; sizes whose byte
 * counts overflow size_t; and a storage released once too often, which must
 * abort rather than corrupt memory. Each bad input gets its own code and a
 * detail naming the file and line, and leaves nothing loaded. */
#define _GNU_SOURCE /* dladdr */
#include "coretest.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* The tests ask for absurd sizes on purpose, and the release-past-zero child
 * must die of SIGABRT whether the core's check or ASan sees it first. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "allocator_may_return_null=1:abort_on_error=1";
}

static int count_lines(const char *text) {
  int n = 0;
  for (const char *p = text; *p; p++) n += *p == '\n';
  return n;
}

static void assert_nothing_loaded(void) {
  ck_assert(!coretest_is_loaded(coretest_backend("cpu")));
  ck_assert(!coretest_is_loaded(coretest_backend("meta")));
  ck_assert(!coretest_is_loaded(coretest_plugin("fake")));
}

/* Opening `text` fails with `code`, naming "bad.ini:LINE" (line > 0) and
 * `says` (when not NULL), and hands back NULL. */
static void expect_text(const char *text, int code, int line, const char *says) {
  tstor_context *ctx = (tstor_context *)0x1;
  int rc = tstor_context_open_string(text, "bad.ini", &ctx);
  ck_assert_msg(rc == code, "got %s, expected %s (%s) for:\n%s", tstor_err_name(rc),
                tstor_err_name(code), tstor_last_error(), text);
  ck_assert_ptr_null(ctx);
  if (line > 0) ck_last_error_has(coretest_fmt("bad.ini:%d", line));
  if (says) ck_last_error_has(says);
  assert_nothing_loaded();
}

/* As expect_text, for a file of `len` bytes; the detail names the file. */
static void expect_file(const void *data, size_t len, int code, int line) {
  const char *path = coretest_write_file(".ini", data, len);
  tstor_context *ctx = (tstor_context *)0x1;
  int rc = tstor_context_open(path, &ctx);
  ck_assert_msg(rc == code, "got %s, expected %s (%s)", tstor_err_name(rc),
                tstor_err_name(code), tstor_last_error());
  ck_assert_ptr_null(ctx);
  const char *name = strrchr(path, '/') + 1;
  ck_last_error_has(line > 0 ? coretest_fmt("%s:%d", name, line) : name);
  assert_nothing_loaded();
  unlink(path);
}

/* ----------------------------------------------------------- duplicate keys */

START_TEST(duplicate_keys_are_errors) {
  /* Every key, in both kinds of section: the second one is named by line. */
  const char *tstor_keys[] = {"default_device = cpu", "backend_dir = /tmp", "log_level = warn"};
  for (size_t i = 0; i < sizeof tstor_keys / sizeof tstor_keys[0]; i++) {
    const char *text = coretest_fmt("[tstor]\n%s\n%s\n[backend cpu]\nlibrary = tstor-cpu.so\n",
                                    tstor_keys[i], tstor_keys[i]);
    expect_text(text, TSTOR_ECONFIG, 3, "duplicate");
  }
  const char *backend_keys[] = {"library = tstor-cpu.so", "entry = tstor_backend_entry",
                                "optional = no", "enabled = yes"};
  for (size_t i = 0; i < sizeof backend_keys / sizeof backend_keys[0]; i++) {
    const char *text = coretest_fmt("[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n%s\n%s\n",
                                     backend_keys[i], backend_keys[i]);
    expect_text(text, TSTOR_ECONFIG, i == 0 ? 4 : 5, "duplicate");
  }
  /* A backend's own key, twice: caught before the module is even loaded. */
  const char *text = coretest_fmt("%s%s", CORETEST_BASE_INI,
                                  coretest_fake_section("fake", "devices = 1\ndevices = 2"));
  expect_text(text, TSTOR_ECONFIG, count_lines(text), "first at line");
}
END_TEST

/* ---------------------------------------------------------- section headers */

START_TEST(odd_section_headers_and_keyless_lines) {
  const struct {
    const char *text;
    int line;
  } cases[] = {
      {"[\n", 1},
      {"[tstor", 1}, /* at the end of the text, no newline */
      {"[tstor]\n[backend cpu\n", 2},
      {"[]\n", 1},
      {"[ ]\n", 1},
      {"[backend]\nlibrary = x.so\n", 1},
      {"[backend ]\nlibrary = x.so\n", 1},
      {"[backend\tcpu!]\nlibrary = x.so\n", 1},
      {"[backend CPU]\nlibrary = x.so\n", 1},
      {"[tstor] trailing\n", 1},
      {"[[tstor]]\n", 1},
      {"]tstor[\n", 1},
      {"[tstor]\n[backend \xff\xfe]\nlibrary = x.so\n", 2},
      {"[tstor]\n[TSTOR]\n", 2},
      /* Lines with a value and no key (found by fuzzing: a backend kept them
       * as a key named ""). */
      {"[tstor]\n= cpu\n", 2},
      {"[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n: value\n", 4},
      {"[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n  =\n", 4},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_text(cases[i].text, TSTOR_ECONFIG, cases[i].line, NULL);
}
END_TEST

/* ------------------------------------------------------------- NUL bytes */

START_TEST(nul_bytes_anywhere_in_a_file) {
  static const char good[] = "[tstor]\ndefault_device = cpu\n[backend cpu]\nlibrary = tstor-cpu.so\n";
  const size_t len = sizeof good - 1;
  /* A NUL in place of each byte in turn (a newline replaced by NUL joins two
   * lines): always an error on the line it falls in, never a truncation. */
  for (size_t at = 0; at < len; at++) {
    char text[sizeof good];
    memcpy(text, good, len);
    text[at] = '\0';
    int line = 1;
    for (size_t k = 0; k < at; k++) line += good[k] == '\n';
    expect_file(text, len, TSTOR_ECONFIG, line);
  }
  /* Appended after the last line, and a file of nothing but NULs. */
  char text[sizeof good + 1];
  memcpy(text, good, len);
  text[len] = '\0';
  expect_file(text, len + 1, TSTOR_ECONFIG, 5);
  static const char zeros[64];
  expect_file(zeros, sizeof zeros, TSTOR_ECONFIG, 1);
}
END_TEST

/* ---------------------------------------------------- numbers out of range */

START_TEST(numbers_out_of_range) {
  const char *levels[] = {"4", "-1", "99999999999999999999", "0x1", "1.0", "", "warn warn"};
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
    expect_text(coretest_fmt("[tstor]\nlog_level = %s\n[backend cpu]\nlibrary = tstor-cpu.so\n",
                             levels[i]),
                TSTOR_ECONFIG, 2, NULL);
  const char *devices[] = {"cpu:1", "cpu:-1", "cpu:2147483648", "cpu:99999999999999999999",
                           "cpu:0x0", "cpu:", ":0"};
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++)
    expect_text(coretest_fmt("[tstor]\ndefault_device = %s\n[backend cpu]\n"
                             "library = tstor-cpu.so\n",
                             devices[i]),
                TSTOR_ECONFIG, 2, "default_device");
  const char *bools[] = {"2", "-1", "yess", "y", "oui", "10"};
  for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++)
    expect_text(coretest_fmt("[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\noptional = %s\n",
                             bools[i]),
                TSTOR_ECONFIG, 4, bools[i]);
  /* A backend's integer key at the edges of its range (fake: devices 0..8). */
  /* Decimal only (docs/config.md): "0x8" is malformed and "010" is ten. */
  const char *counts[] = {"-0x8000000000000001", "0x8000000000000000", "9", "-1", "0x",
                          "0x8", "010", "9223372036854775808", "-9223372036854775809"};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    const char *text =
        coretest_fmt("%s%s", CORETEST_BASE_INI,
                     coretest_fake_section("fake", coretest_fmt("devices = %s", counts[i])));
    expect_text(text, TSTOR_ECONFIG, count_lines(text), "devices");
  }
  const char *edges[] = {"0", "8", "08", "+8", "-0"};
  for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
    tstor_context *ctx = coretest_open(
        coretest_fake_section("fake", coretest_fmt("devices = %s", edges[i])));
    tstor_context_close(ctx);
  }
}
END_TEST

/* ------------------------------------------------------------ config files */

START_TEST(config_paths_that_are_not_files) {
  tstor_context *ctx = (tstor_context *)0x1;
  /* A directory, a device, a FIFO with no writer (which must not block). */
  ck_tstor_err(tstor_context_open(TSTOR_TEST_SRCDIR, &ctx), TSTOR_ECONFIG);
  ck_assert_ptr_null(ctx);
  ck_last_error_has("not a regular file");
  ck_tstor_err(tstor_context_open("/dev/null", &ctx), TSTOR_ECONFIG);
  const char *fifo = coretest_tmpfile(".fifo");
  unlink(fifo);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  ck_tstor_err(tstor_context_open(fifo, &ctx), TSTOR_ECONFIG);
  ck_assert_ptr_null(ctx);
  unlink(fifo);
  /* A path through a file, and an empty path. */
  const char *file = coretest_write_file(".ini", "[tstor]\n", 8);
  int rc = tstor_context_open(coretest_fmt("%s/tstor.ini", file), &ctx);
  ck_assert_msg(rc == TSTOR_ENOENT || rc == TSTOR_EIO, "%s", tstor_err_name(rc));
  unlink(file);
  ck_tstor_err(tstor_context_open("", &ctx), TSTOR_ENOENT);
  ck_assert_ptr_null(ctx);
}
END_TEST

START_TEST(config_file_too_large) {
  /* Over a MiB of comments: refused before it is read. */
  size_t len = (1 << 20) + 1;
  char *text = malloc(len);
  ck_assert_ptr_nonnull(text);
  for (size_t i = 0; i < len; i++) text[i] = i % 64 == 63 ? '\n' : ';';
  const char *path = coretest_write_file(".ini", text, len);
  free(text);
  tstor_context *ctx = (tstor_context *)0x1;
  ck_tstor_err(tstor_context_open(path, &ctx), TSTOR_ECONFIG);
  ck_last_error_has("too large");
  unlink(path);
}
END_TEST

START_TEST(empty_configs) {
  /* No sections: no cpu to be the default device. */
  expect_file("", 0, TSTOR_ECONFIG, 0);
  expect_text("", TSTOR_ECONFIG, 0, "default_device");
  expect_text("[tstor]\n", TSTOR_ECONFIG, 0, "default_device");
  expect_text("; only a comment\n\n\n", TSTOR_ECONFIG, 0, NULL);
}
END_TEST

/* --------------------------------------------------------- library paths */

static void expect_library(const char *library, const char *says) {
  const char *text =
      coretest_fmt("%s[backend odd]\nlibrary = %s\n", CORETEST_BASE_INI, library);
  expect_text(text, TSTOR_ELOAD, 0, says);
  /* Optional: reported, and the context works without it. */
  tstor_context *ctx =
      coretest_open(coretest_fmt("[backend odd]\nlibrary = %s\noptional = yes\n", library));
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  ck_tstor_ok(tstor_backend_get(ctx, 2, &info));
  ck_assert_int_eq(info.state, TSTOR_BACKEND_FAILED);
  ck_assert_str_ne(info.message, "");
  tstor_context_close(ctx);
}

START_TEST(library_paths_that_are_not_modules) {
  /* Directories, absolute and relative to the backend directory. */
  expect_library(TSTOR_TEST_SRCDIR, TSTOR_TEST_SRCDIR);
  expect_library(".", NULL);
  expect_library("..", NULL);
  expect_library("tstor-cpu.so/", NULL);
  /* Devices and FIFOs, which dlopen would read forever or block on. */
  expect_library("/dev/null", "/dev/null");
  expect_library("/dev/zero", "/dev/zero");
  const char *fifo = coretest_tmpfile(".so");
  unlink(fifo);
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  expect_library(fifo, fifo);
  unlink(fifo);
  /* Files that are not shared objects: empty, a truncated module, an ELF
   * header and nothing else. */
  const char *empty = coretest_write_file(".so", "", 0);
  expect_library(empty, empty);
  unlink(empty);
  char head[512];
  FILE *f = fopen(coretest_backend("cpu"), "rb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fread(head, 1, sizeof head, f), sizeof head);
  fclose(f);
  const char *truncated = coretest_write_file(".so", head, sizeof head);
  expect_library(truncated, truncated);
  unlink(truncated);
  const char *header = coretest_write_file(".so", head, 64);
  expect_library(header, header);
  unlink(header);
  /* A shared object that is not a tstor module: the C library. */
  Dl_info libc;
  ck_assert_int_ne(dladdr((void *)getpid, &libc), 0);
  const char *libc_path = coretest_fmt("%s", libc.dli_fname);
  expect_library(libc_path, "tstor_backend_entry");
}
END_TEST

START_TEST(backend_dir_odd_lists) {
  /* Empty components, relative entries with no config folder, a very long
   * entry: skipped or tried, never a crash, and the module is still found. */
  char longdir[3000];
  memset(longdir, 'd', sizeof longdir - 1);
  longdir[0] = '/';
  longdir[sizeof longdir - 1] = '\0';
  char longslash[sizeof longdir + 1];
  snprintf(longslash, sizeof longslash, "%s/", longdir);
  const char *lists[] = {"::", ":relative:", longdir, longslash};
  char modules[4096];
  snprintf(modules, sizeof modules, "%s", tstor_test_backend_dir());
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    coretest_setenv("TSTOR_BACKEND_DIR", coretest_fmt("%s:%s", lists[i], modules));
    tstor_context *ctx = coretest_open(NULL);
    tstor_context_close(ctx);
    coretest_setenv("TSTOR_BACKEND_DIR", lists[i]);
    /* a backend_dir of its own, so that an installed tstor (the folder a
     * config without one falls back to) cannot supply the module */
    expect_text(
        "[tstor]\nbackend_dir = /nonexistent/tstor\n[backend cpu]\nlibrary = tstor-cpu.so\n",
        TSTOR_ELOAD, 0, "tstor-cpu.so");
  }
  coretest_setenv("TSTOR_BACKEND_DIR", modules);
}
END_TEST

/* ------------------------------------------------------------ sizes */

static tstor_context *ctx;
static tstor_device cpu, meta, fake;

static void open_ctx(void) {
  ctx = coretest_open(coretest_fake_section("fake", NULL));
  cpu = coretest_dev(ctx, "cpu");
  meta = coretest_dev(ctx, "meta");
  fake = coretest_dev(ctx, "fake");
}

static void close_ctx(void) {
  tstor_context_close(ctx);
  ctx = NULL;
}

START_TEST(sizes_that_overflow) {
  tstor_storage *s = (tstor_storage *)0x1;
  /* The cpu backend rounds up to 64 bytes: these overflow size_t doing so. */
  const size_t overflow[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 62};
  for (size_t i = 0; i < sizeof overflow / sizeof overflow[0]; i++) {
    ck_tstor_err(tstor_storage_new(ctx, cpu, overflow[i], &s), TSTOR_EOVERFLOW);
    ck_assert_ptr_null(s); /* a failed call leaves its output NULL */
  }
  ck_tstor_err(tstor_storage_new(ctx, cpu, CORETEST_HUGE, &s), TSTOR_ENOMEM);
  ck_tstor_err(tstor_storage_new(ctx, fake, SIZE_MAX, &s), TSTOR_ENOMEM);
  ck_assert_ptr_null(s); /* a failed call leaves its output NULL */

  /* Resizing to them leaves the storage whole. */
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 100, &s));
  ck_tstor_ok(tstor_storage_fill(s, 0x3c));
  void *data = tstor_storage_data(s);
  ck_tstor_err(tstor_storage_resize(s, SIZE_MAX), TSTOR_EOVERFLOW);
  ck_tstor_err(tstor_storage_resize(s, CORETEST_HUGE), TSTOR_ENOMEM);
  ck_assert_uint_eq(tstor_storage_nbytes(s), 100);
  ck_assert_ptr_eq(tstor_storage_data(s), data);
  ck_assert_int_eq(((unsigned char *)data)[99], 0x3c);
  /* new_like and views with offsets near SIZE_MAX. */
  tstor_storage *t = (tstor_storage *)0x1;
  ck_tstor_err(tstor_storage_new_like(s, SIZE_MAX, &t), TSTOR_EOVERFLOW);
  ck_assert_ptr_null(t); /* a failed call leaves its output NULL */
  tstor_storage_release(s);
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 0);
}
END_TEST

START_TEST(meta_sizes_up_to_size_max) {
  /* Meta storages hold no bytes, so every size is fine, and views near the
   * top of the range must not wrap around. */
  tstor_storage *m = NULL, *v = NULL, *w = (tstor_storage *)0x1;
  ck_tstor_ok(tstor_storage_new(ctx, meta, SIZE_MAX, &m));
  ck_tstor_ok(tstor_storage_view(m, SIZE_MAX - 1, 1, &v));
  ck_assert_uint_eq(tstor_storage_offset(v), SIZE_MAX - 1);
  ck_tstor_err(tstor_storage_view(v, 1, 1, &w), TSTOR_ERANGE);
  ck_tstor_err(tstor_storage_view(v, 0, 2, &w), TSTOR_ERANGE);
  ck_tstor_err(tstor_storage_view(m, SIZE_MAX, 1, &w), TSTOR_ERANGE);
  ck_assert_ptr_null(w); /* a failed call leaves its output NULL */
  ck_tstor_ok(tstor_storage_view(v, 1, 0, &w));
  ck_assert_uint_eq(tstor_storage_offset(w), SIZE_MAX);
  tstor_storage_release(w);
  tstor_storage_release(v);
  tstor_storage *c = NULL;
  ck_tstor_ok(tstor_storage_clone(m, &c));
  ck_assert_uint_eq(tstor_storage_nbytes(c), SIZE_MAX);
  ck_tstor_ok(tstor_storage_copy(c, m));
  ck_tstor_ok(tstor_storage_resize(c, 0));
  ck_tstor_ok(tstor_storage_resize(c, SIZE_MAX));
  /* Moving it to a device with data is refused: nothing to copy out of meta. */
  tstor_storage *h = (tstor_storage *)0x1;
  int rc = tstor_storage_to(m, cpu, &h);
  ck_assert_msg(rc == TSTOR_ENODATA || rc == TSTOR_EOVERFLOW || rc == TSTOR_ENOMEM, "%s",
                tstor_err_name(rc));
  ck_assert_ptr_null(h); /* a failed call leaves its output NULL */
  tstor_storage_release(c);
  tstor_storage_release(m);
}
END_TEST

/* -------------------------------------------------- release past zero */

/* Runs fn in a child process and returns how it ended; its stderr goes to
 * `err` (a file the caller reads). */
static int run_child(void (*fn)(void), const char *err) {
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    int fd = open(err, O_WRONLY | O_TRUNC);
    if (fd >= 0) dup2(fd, 2);
    fn();
    _exit(0);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  return status;
}

static void release_twice(void) {
  tstor_context *c = NULL;
  tstor_storage *s = NULL;
  if (tstor_context_open_string(CORETEST_BASE_INI, "child.ini", &c) != 0) _exit(3);
  tstor_device dev;
  if (tstor_device_parse(c, "cpu", &dev) != 0) _exit(4);
  if (tstor_storage_new(c, dev, 64, &s) != 0) _exit(5);
  tstor_context_close(c);
  tstor_storage_release(s);
  tstor_storage_release(s); /* once too often */
  _exit(0);
}

static void view_base_released_once_too_often(void) {
  tstor_context *c = NULL;
  tstor_storage *s = NULL, *v = NULL;
  if (tstor_context_open_string(CORETEST_BASE_INI, "child.ini", &c) != 0) _exit(3);
  tstor_device dev;
  if (tstor_device_parse(c, "cpu", &dev) != 0) _exit(4);
  if (tstor_storage_new(c, dev, 64, &s) != 0) _exit(5);
  if (tstor_storage_view(s, 0, 8, &v) != 0) _exit(6);
  /* The caller owns one reference to s and releases two: the view's is
   * gone, and its last release then releases the base past zero. */
  tstor_storage_release(s);
  tstor_storage_release(s);
  tstor_storage_release(v);
  tstor_context_close(c);
  _exit(0);
}

static void expect_abort(void (*fn)(void)) {
  const char *err = coretest_tmpfile(".err");
  int status = run_child(fn, err);
  const char *said = coretest_read_file(err);
  ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
                "child ended with status %#x, not SIGABRT; it said: %s", status, said);
  ck_assert_msg(strstr(said, "released more times than retained") ||
                    strstr(said, "heap-use-after-free"),
                "the abort does not say why: %s", said);
  unlink(err);
}

START_TEST(release_past_zero_aborts) {
  expect_abort(release_twice);
  expect_abort(view_base_released_once_too_often);
}
END_TEST

int main(void) {
  Suite *s = suite_create("badinput");
  TCase *tc = tcase_create("config");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, duplicate_keys_are_errors);
  tcase_add_test(tc, odd_section_headers_and_keyless_lines);
  tcase_add_test(tc, nul_bytes_anywhere_in_a_file);
  tcase_add_test(tc, numbers_out_of_range);
  tcase_add_test(tc, config_paths_that_are_not_files);
  tcase_add_test(tc, config_file_too_large);
  tcase_add_test(tc, empty_configs);
  tcase_add_test(tc, library_paths_that_are_not_modules);
  tcase_add_test(tc, backend_dir_odd_lists);
  suite_add_tcase(s, tc);
  tc = tcase_create("sizes");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, sizes_that_overflow);
  tcase_add_test(tc, meta_sizes_up_to_size_max);
  tcase_add_test(tc, release_past_zero_aborts);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
