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

/* The one errno map: each errno the library meets, and what stays EIO. */
START_TEST(errno_maps_to_one_code) {
  static const struct {
    int err, code;
  } table[] = {
      {ENOENT, TSTOR_ENOENT},       {ENOTDIR, TSTOR_ENOENT},
      {EACCES, TSTOR_EACCES},       {EPERM, TSTOR_EACCES},
      {EROFS, TSTOR_EACCES},        {ETXTBSY, TSTOR_EACCES},
      {EMFILE, TSTOR_EMFILE},       {ENFILE, TSTOR_EMFILE},
      {ENOSPC, TSTOR_ENOSPC},       {EDQUOT, TSTOR_ENOSPC},
      {ENOMEM, TSTOR_ENOMEM},       {ENOBUFS, TSTOR_ENOMEM},
      {EFBIG, TSTOR_EOVERFLOW},     {EOVERFLOW, TSTOR_EOVERFLOW},
      {EEXIST, TSTOR_EEXIST},       {EBUSY, TSTOR_EBUSY},
      {ERANGE, TSTOR_ERANGE},       {EAGAIN, TSTOR_EAGAIN},
      {EWOULDBLOCK, TSTOR_EAGAIN},  {ENODEV, TSTOR_ENOTSUP},
      {EOPNOTSUPP, TSTOR_ENOTSUP},  {ENOTSUP, TSTOR_ENOTSUP},
      {EINVAL, TSTOR_EINVAL},       {EISDIR, TSTOR_EINVAL},
      {ENAMETOOLONG, TSTOR_EINVAL}, {ELOOP, TSTOR_EINVAL},
      {ENXIO, TSTOR_EINVAL},        {EBADF, TSTOR_EINVAL},
      {ENOTSOCK, TSTOR_EINVAL},     {EIO, TSTOR_EIO},
      {EINTR, TSTOR_EIO},           {EPIPE, TSTOR_EIO},
      {ECONNRESET, TSTOR_EIO},      {0, TSTOR_EIO},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    ck_assert_msg(tstor_errno_code(table[i].err) == table[i].code, "%s: %s, expected %s",
                  strerror(table[i].err), tstor_err_name(tstor_errno_code(table[i].err)),
                  tstor_err_name(table[i].code));
}
END_TEST

/* A layer adds where a failure happened and keeps the reason. */
START_TEST(a_prefix_keeps_the_reason) {
  ck_assert_int_eq(tstor_error_set(TSTOR_ERANGE, "index %d is out of range", 7), TSTOR_ERANGE);
  ck_assert_int_eq(tstor_error_prefix(TSTOR_ERANGE, "model.pt: tensor '%s'", "fc.weight"),
                   TSTOR_ERANGE);
  ck_assert_str_eq(tstor_last_error(), "model.pt: tensor 'fc.weight': index 7 is out of range");
  char long_prefix[2000];
  memset(long_prefix, 'p', sizeof long_prefix - 1);
  long_prefix[sizeof long_prefix - 1] = '\0';
  tstor_error_prefix(TSTOR_EIO, "%s", long_prefix); /* truncated, never past the buffer */
  ck_assert_uint_eq(strlen(tstor_last_error()), 1023);
}
END_TEST

int main(void) {
  Suite *s = suite_create("error");
  TCase *tc = tcase_create("table");
  tcase_add_test(tc, every_code_has_its_name_and_message);
  tcase_add_test(tc, codes_are_distinct_negative_and_dense);
  tcase_add_test(tc, success_has_a_name);
  tcase_add_test(tc, unknown_codes_get_a_static_string);
  tcase_add_test(tc, errno_maps_to_one_code);
  suite_add_tcase(s, tc);
  tc = tcase_create("detail");
  tcase_add_test(tc, last_error_starts_empty);
  tcase_add_test(tc, last_error_names_the_failure);
  tcase_add_test(tc, last_error_is_per_thread);
  tcase_add_test(tc, a_prefix_keeps_the_reason);
  suite_add_tcase(s, tc);
  tc = tcase_create("version");
  tcase_add_test(tc, version_matches_the_header);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
