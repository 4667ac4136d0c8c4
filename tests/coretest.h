/* Helpers for the core suites: where the test plugins and configs are, INI
 * text that loads them, and ways to look at what the loader did. */
#ifndef TSTOR_CORETEST_H
#define TSTOR_CORETEST_H

#include "testutil.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <unistd.h>

/* The folder of the freshly built test plugins (set by the test environment). */
static inline const char *coretest_plugin_dir(void) {
  const char *d = getenv("TSTOR_TEST_PLUGINS");
  return d ? d : TSTOR_TEST_BUILDDIR "/plugins/.libs";
}

/* A formatted string in a static ring of buffers: enough for one test's paths
 * and configs without bookkeeping. */
static inline const char *coretest_fmt(const char *fmt, ...) {
  static char ring[32][8192];
  static int next;
  char *buf = ring[next++ % 32];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof ring[0], fmt, ap);
  va_end(ap);
  ck_assert_msg(n >= 0 && (size_t)n < sizeof ring[0], "coretest_fmt: text too long");
  return buf;
}

/* Absolute path of test plugin NAME ("fake" -> .../plugins/.libs/fake.so). */
static inline const char *coretest_plugin(const char *name) {
  return coretest_fmt("%s/%s.so", coretest_plugin_dir(), name);
}

/* Absolute path of a file in the source tree's tests/ folder. */
static inline const char *coretest_src(const char *rel) {
  return coretest_fmt("%s/%s", TSTOR_TEST_SRCDIR, rel);
}

/* Absolute path of a backend module of the build tree ("cpu" -> tstor-cpu.so). */
static inline const char *coretest_backend(const char *name) {
  return coretest_fmt("%s/tstor-%s.so", tstor_test_backend_dir(), name);
}

/* The [tstor] section and cpu + meta backends every plugin test starts from;
 * append "[backend ...]" sections after it. */
#define CORETEST_BASE_INI        \
  "[tstor]\n"                   \
  "default_device = cpu\n"      \
  "\n"                          \
  "[backend cpu]\n"             \
  "library = tstor-cpu.so\n"    \
  "\n"                          \
  "[backend meta]\n"            \
  "library = tstor-meta.so\n"

/* Opens a context of cpu + meta + whatever `extra` adds; fails the test when
 * the open fails. */
static inline tstor_context *coretest_open(const char *extra) {
  tstor_context *ctx = NULL;
  const char *ini = coretest_fmt("%s\n%s", CORETEST_BASE_INI, extra ? extra : "");
  int rc = tstor_context_open_string(ini, "coretest.ini", &ctx);
  ck_assert_msg(rc == 0, "context open failed: %s: %s\n%s", tstor_err_name(rc),
                tstor_last_error(), ini);
  ck_assert_ptr_nonnull(ctx);
  return ctx;
}

/* The INI section that loads the fake plugin as backend NAME. */
static inline const char *coretest_fake_section(const char *name, const char *more) {
  return coretest_fmt("[backend %s]\nlibrary = %s\n%s\n", name, coretest_plugin("fake"),
                      more ? more : "");
}

/* Parses a device or fails the test. */
static inline tstor_device coretest_dev(tstor_context *ctx, const char *text) {
  tstor_device dev;
  int rc = tstor_device_parse(ctx, text, &dev);
  ck_assert_msg(rc == 0, "parse %s: %s: %s", text, tstor_err_name(rc), tstor_last_error());
  return dev;
}

/* Whether the shared object at `path` is mapped in this process now. */
static inline int coretest_is_loaded(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h == NULL) return 0;
  dlclose(h);
  return 1;
}

/* A fresh temporary file name (the file is created empty); the caller unlinks
 * it. Returned in a static ring buffer. */
static inline const char *coretest_tmpfile(const char *suffix) {
  char tmpl[256];
  const char *dir = getenv("TMPDIR");
  snprintf(tmpl, sizeof tmpl, "%s/tstor-test-XXXXXX%s", dir ? dir : "/tmp", suffix);
  int fd = mkstemps(tmpl, (int)strlen(suffix));
  ck_assert_msg(fd >= 0, "mkstemps failed");
  close(fd);
  return coretest_fmt("%s", tmpl);
}

/* Writes `len` bytes to a new file and returns its name (see coretest_tmpfile). */
static inline const char *coretest_write_file(const char *suffix, const void *data,
                                              size_t len) {
  const char *path = coretest_tmpfile(suffix);
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(data, 1, len, f), len);
  ck_assert_int_eq(fclose(f), 0);
  return path;
}

/* The whole content of a small text file ("" when absent), in a static ring
 * buffer. */
static inline const char *coretest_read_file(const char *path) {
  char buf[4096];
  size_t n = 0;
  FILE *f = fopen(path, "rb");
  if (f != NULL) {
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
  }
  buf[n] = '\0';
  return coretest_fmt("%s", buf);
}

/* Sets or unsets (value NULL) an environment variable. */
static inline void coretest_setenv(const char *name, const char *value) {
  if (value != NULL)
    ck_assert_int_eq(setenv(name, value, 1), 0);
  else
    ck_assert_int_eq(unsetenv(name), 0);
}

/* A size no machine can allocate, yet small enough that valgrind does not
 * take it for a negative one (it reports sizes from 2^63 up). */
#define CORETEST_HUGE (SIZE_MAX / 4)

/* ASan and TSan abort on absurd allocation sizes by default; the tests ask
 * for them on purpose and want the allocator's NULL (TSTOR_ENOMEM) instead. */
#define CORETEST_SANITIZER_OPTIONS                                 \
  const char *__asan_default_options(void);                        \
  const char *__asan_default_options(void) {                       \
    return "allocator_may_return_null=1";                          \
  }                                                                \
  const char *__tsan_default_options(void);                        \
  const char *__tsan_default_options(void) {                       \
    return "allocator_may_return_null=1";                          \
  }
#define CORETEST_ASAN_OPTIONS CORETEST_SANITIZER_OPTIONS

#endif
