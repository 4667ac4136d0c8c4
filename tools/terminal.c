/* Text from a file, escaped for a terminal (terminal.h). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "terminal.h"

char *tool_escaped(const char *s) {
  size_t n = strlen(s);
  char *out = malloc(4 * n + 1), *o = out;
  if (!out) return NULL;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* U+0080..U+009F */
      o += sprintf(o, "\\x%02x", *++p);
    } else if (*p < 0x20 || *p == 0x7f) {
      o += sprintf(o, "\\x%02x", *p);
    } else if (*p == '\\') {
      *o++ = '\\';
      *o++ = '\\';
    } else {
      *o++ = (char)*p;
    }
  }
  *o = '\0';
  return out;
}

void tool_print_escaped(FILE *f, const char *s, int width) {
  char *e = tool_escaped(s);
  fprintf(f, "%-*s", width, e ? e : "?");
  free(e);
}

void tool_complain(const char *fmt, ...) {
  char *msg = NULL;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&msg, fmt, ap);
  va_end(ap);
  if (n < 0) {
    fputs("tstor: out of memory for a message\n", stderr);
    return;
  }
  tool_print_escaped(stderr, msg, 0);
  fputc('\n', stderr);
  free(msg);
}
