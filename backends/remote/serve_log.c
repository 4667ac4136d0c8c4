/* The log of `tstor serve` (server_state.h). */
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "server_state.h"

void srv_log(server *s, const char *fmt, ...) {
  char line[1024];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  size_t n = strftime(line, sizeof line, "tstor serve %Y-%m-%dT%H:%M:%SZ: ", &tm);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
  va_end(ap);
  strcat(line, "\n");
  fputs(line, s->log); /* one call: lines of two threads never interleave */
  fflush(s->log);
}
