/* remote_fail and its thread-local copy of the message (failure.h). */
#include "failure.h"

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

int remote_check_process(const tstor_registrar *reg, pid_t loader, int index, const char *what) {
  if (getpid() == loader) return 0;
  return remote_fail(reg, TSTOR_EBACKEND,
                     "remote:%d: %s: the backend was loaded before the process forked; open a "
                     "new context in the child",
                     index, what);
}
