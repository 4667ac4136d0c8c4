/* Errors and version: the error table, names and messages for every code and
 * for codes outside it, the per-thread detail, and the run-time version. */
#include "coretest.h"

#include <pthread.h>

typedef struct {
  int code;
  const char *name;
  const char *msg;
} error_row;

static const error_row error_rows[] = {
#define ROW(name, value, msg) {TSTOR_##name, "TSTOR_" #name, msg},
    TSTOR_ERRNO_MAP(ROW)
#undef ROW
};
#define NROWS ((int)(sizeof error_rows / sizeof error_rows[0]))

START_TEST(every_code_has_its_name_and_message) {
  for (int i = 0; i < NROWS; i++) {
    ck_assert_str_eq(tstor_err_name(error_rows[i].code), error_rows[i].name);
    ck_assert_str_eq(tstor_strerror(error_rows[i].code), error_rows[i].msg);
  }
}
END_TEST

START_TEST(codes_are_distinct_negative_and_dense) {
  /* The table runs from -1 down to TSTOR__ERR_LAST + 1 without gaps, so that a
   * new code is appended and old values never move. */
  ck_assert_int_eq(NROWS, -(TSTOR__ERR_LAST + 1));
  for (int i = 0; i < NROWS; i++) {
    ck_assert_int_eq(error_rows[i].code, -(i + 1));
    for (int j = 0; j < i; j++) ck_assert_str_ne(error_rows[i].msg, error_rows[j].msg);
  }
}
END_TEST

START_TEST(success_has_a_name) {
  ck_assert_ptr_nonnull(tstor_err_name(0));
  ck_assert_ptr_nonnull(tstor_strerror(0));
  ck_assert_str_ne(tstor_err_name(0), "");
  ck_assert_str_ne(tstor_strerror(0), "");
  /* And it is not one of the failure codes' names. */
  for (int i = 0; i < NROWS; i++) ck_assert_str_ne(tstor_err_name(0), error_rows[i].name);
}
END_TEST

START_TEST(unknown_codes_get_a_static_string) {
  const int unknown[] = {TSTOR__ERR_LAST, TSTOR__ERR_LAST - 1, -1000, 1, 42, INT32_MIN,
                         INT32_MAX};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    const char *name = tstor_err_name(unknown[i]);
    const char *msg = tstor_strerror(unknown[i]);
    ck_assert_ptr_nonnull(name);
    ck_assert_ptr_nonnull(msg);
    ck_assert_str_ne(name, "");
    ck_assert_str_ne(msg, "");
    for (int j = 0; j < NROWS; j++) {
      ck_assert_str_ne(name, error_rows[j].name);
      ck_assert_str_ne(msg, error_rows[j].msg);
    }
    /* Static: the same answer twice, and still valid after other calls. */
    ck_assert_str_eq(tstor_err_name(unknown[i]), name);
    (void)tstor_strerror(TSTOR_EINVAL);
    ck_assert_str_eq(tstor_strerror(unknown[i]), msg);
  }
}
END_TEST

START_TEST(last_error_starts_empty) {
  /* A fresh thread has seen no failure. */
  ck_assert_ptr_nonnull(tstor_last_error());
  ck_assert_str_eq(tstor_last_error(), "");
}
END_TEST

START_TEST(last_error_names_the_failure) {
  tstor_context *ctx = NULL;
  ck_tstor_err(tstor_context_open("/nonexistent/tstor-test.ini", &ctx), TSTOR_ENOENT);
  ck_assert_ptr_null(ctx);
  ck_last_error_has("/nonexistent/tstor-test.ini");
}
END_TEST

static void *fail_in_thread(void *arg) {
  tstor_context *ctx = NULL;
  int rc = tstor_context_open("/nonexistent/other-thread.ini", &ctx);
  *(int *)arg = rc == TSTOR_ENOENT && strstr(tstor_last_error(), "other-thread.ini") != NULL;
  return NULL;
}

START_TEST(last_error_is_per_thread) {
  tstor_context *ctx = NULL;
  ck_tstor_err(tstor_context_open("/nonexistent/main-thread.ini", &ctx), TSTOR_ENOENT);
  int ok = 0;
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, fail_in_thread, &ok), 0);
  ck_assert_int_eq(pthread_join(t, NULL), 0);
  ck_assert_int_eq(ok, 1);
  /* The other thread's failure did not overwrite ours. */
  ck_last_error_has("main-thread.ini");
}
END_TEST

START_TEST(version_matches_the_header) {
  ck_assert_uint_eq(tstor_version(), TSTOR_VERSION_HEX);
  char expect[32];
  snprintf(expect, sizeof expect, "%d.%d.%d", TSTOR_VERSION_MAJOR, TSTOR_VERSION_MINOR,
           TSTOR_VERSION_PATCH);
  ck_assert_str_eq(tstor_version_string(), expect);
  ck_assert_ptr_eq(tstor_version_string(), tstor_version_string());
}
END_TEST

int main(void) {
  Suite *s = suite_create("error");
  TCase *tc = tcase_create("table");
  tcase_add_test(tc, every_code_has_its_name_and_message);
  tcase_add_test(tc, codes_are_distinct_negative_and_dense);
  tcase_add_test(tc, success_has_a_name);
  tcase_add_test(tc, unknown_codes_get_a_static_string);
  suite_add_tcase(s, tc);
  tc = tcase_create("detail");
  tcase_add_test(tc, last_error_starts_empty);
  tcase_add_test(tc, last_error_names_the_failure);
  tcase_add_test(tc, last_error_is_per_thread);
  suite_add_tcase(s, tc);
  tc = tcase_create("version");
  tcase_add_test(tc, version_matches_the_header);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
