/* Helpers shared by the Check suites. */
#ifndef TSTOR_TESTUTIL_H
#define TSTOR_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tstor/tstor.h>

/* 1 in a build under AddressSanitizer, whose shadow memory makes address
 * space and resident-size figures meaningless. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

/* Saver options with the given flags, for the checkpoint suites (a compound
 * literal, so <tstor/serialize.h> need only come before the use). */
#define TEST_SAVE_OPTS(f) (&(tstor_save_options){.size = sizeof(tstor_save_options), .flags = (f)})

/* Asserts that a tstor call succeeded, printing the error and its detail when not. */
#define ck_tstor_ok(expr)                                                              \
  do {                                                                                 \
    int ck_rc_ = (expr);                                                               \
    ck_assert_msg(ck_rc_ == 0, "%s failed: %s (%s): %s", #expr, tstor_err_name(ck_rc_), \
                  tstor_strerror(ck_rc_), tstor_last_error());                         \
  } while (0)

/* Asserts that a tstor call failed with `code`. */
#define ck_tstor_err(expr, code)                                                      \
  do {                                                                                \
    int ck_rc_ = (expr);                                                              \
    ck_assert_msg(ck_rc_ == (code), "%s returned %s, expected %s (detail: %s)", #expr, \
                  tstor_err_name(ck_rc_), tstor_err_name(code), tstor_last_error());  \
  } while (0)

/* Asserts that the thread's last error detail contains `needle`. */
#define ck_last_error_has(needle)                                                 \
  ck_assert_msg(strstr(tstor_last_error(), (needle)) != NULL,                     \
                "last error \"%s\" does not mention \"%s\"", tstor_last_error(), \
                (needle))

/* Runs a suite and returns the process exit status for automake. */
static inline int tstor_test_run(Suite *suite) {
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* xorshift64: the same test data on every run, from a state the caller seeds
 * (not 0). */
static inline uint64_t tstor_test_rng(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

/* A whole file in memory from malloc, NUL-terminated (*len, when not NULL,
 * gets its length without the NUL); the test fails when it cannot be read. */
static inline char *tstor_test_slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = '\0';
  fclose(f);
  if (len) *len = (size_t)n;
  return s;
}

/* The modules directory of the build tree (set by the test environment). */
static inline const char *tstor_test_backend_dir(void) {
  const char *d = getenv("TSTOR_BACKEND_DIR");
  return d ? d : ".";
}

#endif
