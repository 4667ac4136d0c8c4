/* The core's own allocations (bookkeeping, not storage bytes, which come from
 * backends) all pass through here, so there is one place to count and fail
 * them (fault.h). */
#include "internal.h"

#include "fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *tstor__malloc(size_t n) {
  if (tstor__fault_check(TSTOR_FAULT_MALLOC)) return NULL;
  void *p = malloc(n ? n : 1);
  if (p) tstor__fault_note(1);
  return p;
}

void *tstor__calloc(size_t count, size_t n) {
  if (tstor__fault_check(TSTOR_FAULT_MALLOC)) return NULL;
  void *p = calloc(count ? count : 1, n ? n : 1);
  if (p) tstor__fault_note(1);
  return p;
}

void *tstor__realloc(void *p, size_t n) {
  if (tstor__fault_check(TSTOR_FAULT_MALLOC)) return NULL;
  void *q = realloc(p, n ? n : 1);
  if (q && !p) tstor__fault_note(1);
  return q;
}

void tstor__free(void *p) {
  if (p) tstor__fault_note(-1);
  free(p);
}

char *tstor__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = tstor__malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

char *tstor__asprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *s = tstor__malloc((size_t)n + 1);
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}
