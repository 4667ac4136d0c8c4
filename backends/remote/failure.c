/* remote_fail and its thread-local copy of the message (failure.h). */
#include "failure.h"

#include <stdio.h>

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
