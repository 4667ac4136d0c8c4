/* A context closed twice, a stream or an event freed twice: each must abort
 * with a message that names the object, as a storage released past zero does,
 * rather than corrupt the heap or drop a reference some storage still holds.
 * The check must not itself read freed memory: under ASan the child must die
 * of tstor's own abort, with no heap-use-after-free report before it. Each
 * misuse runs in a child process. */
#include "coretest.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

/* Runs fn in a child whose stderr goes to a file; checks that it died of
 * SIGABRT saying `why`, and that no sanitizer reported an access first. */
static void expect_abort(void (*fn)(void), const char *why) {
  const char *err = coretest_tmpfile(".err");
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
  const char *said = coretest_read_file(err);
  unlink(err);
  ck_assert_msg(strstr(said, "Sanitizer") == NULL, "a sanitizer reported the check's own access: %s",
                said);
  ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
                "child ended with status %#x, not SIGABRT; it said: %s", status, said);
  ck_assert_msg(strstr(said, why), "the abort does not say '%s': %s", why, said);
}

static tstor_context *child_open(void) {
  tstor_context *c = NULL;
  if (tstor_context_open_string(CORETEST_BASE_INI, "child.ini", &c) != 0) _exit(2);
  return c;
}

static tstor_device child_dev(tstor_context *c, const char *name) {
  tstor_device dev;
  if (tstor_device_parse(c, name, &dev) != 0) _exit(3);
  return dev;
}

/* The only reference: the second close finds freed memory. */
static void close_twice(void) {
  tstor_context *c = child_open();
  tstor_context_close(c);
  tstor_context_close(c);
}

/* A storage keeps the context alive: a second close would take the storage's
 * reference and free the context under it. */
static void close_twice_while_a_storage_lives(void) {
  tstor_context *c = child_open();
  tstor_storage *s = NULL;
  if (tstor_storage_new(c, child_dev(c, "cpu"), 64, &s) != 0) _exit(4);
  tstor_context_close(c);
  tstor_context_close(c);
  tstor_storage_release(s);
}

/* Released through a stream's reference after the context went. */
static void close_twice_while_a_stream_lives(void) {
  tstor_context *c = child_open();
  tstor_stream *st = NULL;
  if (tstor_stream_new(c, child_dev(c, "cpu"), &st) != 0) _exit(4);
  tstor_context_close(c);
  tstor_context_close(c);
  tstor_stream_free(st);
}

static void stream_freed_twice(void) {
  tstor_context *c = child_open();
  tstor_stream *st = NULL;
  if (tstor_stream_new(c, child_dev(c, "meta"), &st) != 0) _exit(4);
  /* the context stays open: the stream's own reference is the one at risk */
  tstor_stream_free(st);
  tstor_stream_free(st);
  tstor_context_close(c);
}

static void event_freed_twice(void) {
  tstor_context *c = child_open();
  tstor_event *ev = NULL;
  if (tstor_event_new(c, child_dev(c, "cpu"), &ev) != 0) _exit(4);
  tstor_event_free(ev);
  tstor_event_free(ev);
  tstor_context_close(c);
}

START_TEST(context_closed_twice_aborts) {
  expect_abort(close_twice, "closed twice");
  expect_abort(close_twice_while_a_storage_lives, "closed twice");
  expect_abort(close_twice_while_a_stream_lives, "closed twice");
}
END_TEST

START_TEST(stream_and_event_freed_twice_abort) {
  expect_abort(stream_freed_twice, "stream");
  expect_abort(stream_freed_twice, "freed twice");
  expect_abort(event_freed_twice, "event");
  expect_abort(event_freed_twice, "freed twice");
}
END_TEST

/* The checks cost nothing to correct use: open, use, close in every order. */
START_TEST(correct_use_is_untouched) {
  tstor_context *c = coretest_open(NULL);
  tstor_device cpu = coretest_dev(c, "cpu");
  tstor_storage *s = NULL;
  tstor_stream *st = NULL;
  tstor_event *ev = NULL;
  ck_assert_int_eq(tstor_storage_new(c, cpu, 16, &s), 0);
  ck_assert_int_eq(tstor_stream_new(c, cpu, &st), 0);
  ck_assert_int_eq(tstor_event_new(c, cpu, &ev), 0);
  tstor_context_close(c); /* the objects keep it */
  ck_assert_int_eq(tstor_event_record(ev, st), 0);
  ck_assert_int_eq(tstor_stream_wait_event(st, ev), 0);
  ck_assert_int_eq(tstor_storage_fill(s, 7), 0);
  tstor_event_free(ev);
  tstor_stream_free(st);
  tstor_storage_release(s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("closed_twice");
  TCase *tc = tcase_create("misuse");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, context_closed_twice_aborts);
  tcase_add_test(tc, stream_and_event_freed_twice_abort);
  tcase_add_test(tc, correct_use_is_untouched);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
