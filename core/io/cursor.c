/* The bounds-checked cursor of cursor.h. */
#include "io_internal.h"

#include <string.h>

int tstor__io_cur_vfail(const tstor__io_cursor *c, int code, const char *fmt, va_list ap) {
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  return TSTOR__ERR(code, "%s offset %llu: %s", c->what,
                    (unsigned long long)tstor__io_cur_item_at(c), msg);
}

int tstor__io_cur_fail(const tstor__io_cursor *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = tstor__io_cur_vfail(c, code, fmt, ap);
  va_end(ap);
  return rc;
}

int tstor__io_fail_at(const char *what, uint64_t at, int code, const char *fmt, ...) {
  tstor__io_cursor c = tstor__io_cursor_over(NULL, 0, what);
  c.base = at;
  va_list ap;
  va_start(ap, fmt);
  int rc = tstor__io_cur_vfail(&c, code, fmt, ap);
  va_end(ap);
  return rc;
}

int tstor__io_cur_short(tstor__io_cursor *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  c->ran_out = true;
  int rc = tstor__io_cur_vfail(c, TSTOR_EINVAL, fmt, ap);
  va_end(ap);
  return rc;
}

int tstor__io_cur_need(tstor__io_cursor *c, size_t n) {
  if (tstor__io_cur_can_read(c, n)) return 0;
  return tstor__io_cur_short(c, "it ends inside an item (%zu more bytes needed, %zu left)", n,
                             tstor__io_cur_left(c));
}

int tstor__io_cur_bytes(tstor__io_cursor *c, size_t n, const uint8_t **p) {
  int rc = tstor__io_cur_need(c, n);
  if (rc) return rc;
  *p = c->data + c->off;
  c->off += n;
  return 0;
}

int tstor__io_cur_sub(tstor__io_cursor *c, size_t n, tstor__io_cursor *sub) {
  const uint8_t *p;
  uint64_t at = c->base + c->off;
  int rc = tstor__io_cur_bytes(c, n, &p);
  if (rc) return rc;
  *sub = tstor__io_cursor_over(p, n, c->what);
  sub->base = at;
  return 0;
}

int tstor__io_cur_uint_any(tstor__io_cursor *c, size_t width, bool big_endian, uint64_t *out) {
  const uint8_t *p;
  int rc = tstor__io_cur_bytes(c, width, &p);
  if (rc) return rc;
  uint64_t u = 0;
  for (size_t i = 0; i < width; i++) u |= (uint64_t)p[big_endian ? width - 1 - i : i] << (8 * i);
  *out = u;
  return 0;
}

int tstor__io_cur_line(tstor__io_cursor *c, const char *item, const uint8_t **p, size_t *n) {
  const uint8_t *start = c->data + c->off;
  const uint8_t *nl = tstor__io_cur_left(c) ? memchr(start, '\n', tstor__io_cur_left(c)) : NULL;
  if (!nl) return tstor__io_cur_short(c, "%s without a newline", item);
  *p = start;
  *n = (size_t)(nl - start);
  c->off += *n + 1;
  return 0;
}
