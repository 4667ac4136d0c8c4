/* A growing text for the suites that build listings to compare (a
 * checkpoint's tree, a Torch7 file's canonical form): put() appends a
 * printf'd piece; the test fails when memory runs out. */
#ifndef TSTOR_TEST_TEXT_H
#define TSTOR_TEST_TEXT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

typedef struct text {
  char *s;
  size_t len, cap;
} text;

static inline void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *line = NULL;
  int n = vasprintf(&line, fmt, ap);
  va_end(ap);
  ck_assert(n >= 0);
  if (t->len + (size_t)n + 1 > t->cap) {
    t->cap = (t->len + (size_t)n + 1) * 2;
    t->s = realloc(t->s, t->cap);
    ck_assert_ptr_nonnull(t->s);
  }
  memcpy(t->s + t->len, line, (size_t)n + 1);
  t->len += (size_t)n;
  free(line);
}

#endif
