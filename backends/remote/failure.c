/* remote_fail and its thread-local copy of the message (failure.h). */
#include "failure.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static _Thread_local char last_text[640];

int remote_fail(const tstor_registrar *reg, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_text, sizeof last_text, fmt, ap);
  va_end(ap);
  return reg->set_error(code, "%s", last_text);
}

const char *remote_failure_text(void) { return last_text; }

void remote_failure_clear(void) { last_text[0] = '\0'; }

/* This process's id, known until it forks: the child forgets it (a fork
 * handler), and asks the system once. Checked on every op, so not a system
 * call each time. */
static atomic_int known_pid;
static pthread_once_t watching = PTHREAD_ONCE_INIT;

static void forget_pid(void) { atomic_store_explicit(&known_pid, 0, memory_order_relaxed); }

static void watch_forks(void) { pthread_atfork(NULL, NULL, forget_pid); }

void remote_pid_watch(void) { pthread_once(&watching, watch_forks); }

pid_t remote_getpid(void) {
  int pid = atomic_load_explicit(&known_pid, memory_order_relaxed);
  if (pid == 0) {
    pid = (int)getpid();
    atomic_store_explicit(&known_pid, pid, memory_order_relaxed);
  }
  return (pid_t)pid;
}

int remote_check_process(const tstor_registrar *reg, pid_t loader, int index, const char *what) {
  if (remote_getpid() == loader) return 0;
  return remote_fail(reg, TSTOR_EBACKEND,
                     "remote:%d: %s: the backend was loaded before the process forked; open a "
                     "new context in the child",
                     index, what);
}
