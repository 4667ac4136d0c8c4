/* Messages to stderr at or below a context's log level. In the lowest layer,
 * so that every file may log; it reads the context's level and calls nothing
 * of the context. */
#include "internal.h"

#include <stdio.h>

void tstor__log(tstor_context *ctx, int level, const char *fmt, ...) {
  if (level > ctx->log_level) return;
  char buf[TSTOR__ERRBUF];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "tstor: %s\n", buf);
}
