/* The first-error-wins byte buffer of writebuf.h. */
#include "io_internal.h"

#include <string.h>

static void fail_v(tstor__io_wbuf *b, int code, const char *fmt, va_list ap) {
  if (b->err) return;
  vsnprintf(b->message, sizeof b->message, fmt, ap);
  b->err = TSTOR__ERR(code, "%s", b->message);
}

void tstor__io_wbuf_fail(tstor__io_wbuf *b, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_v(b, code, fmt, ap);
  va_end(ap);
}

/* Room for n more bytes; false (and the error kept) when there is none. */
static bool reserve(tstor__io_wbuf *b, size_t n) {
  if (b->err) return false;
  if (n <= b->cap - b->len) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len < n) {
    if (cap > SIZE_MAX / 2) {
      tstor__io_wbuf_fail(b, TSTOR_EOVERFLOW, "%s: more than %zu bytes", b->what, SIZE_MAX / 2);
      return false;
    }
    cap *= 2;
  }
  uint8_t *p = tstor__io_realloc(b->data, cap);
  if (!p) {
    tstor__io_wbuf_fail(b, TSTOR_ENOMEM, "%s: out of memory for %zu bytes", b->what, cap);
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void tstor__io_wbuf_append(tstor__io_wbuf *b, const void *p, size_t n) {
  if (!n || !reserve(b, n)) return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

void tstor__io_wbuf_byte(tstor__io_wbuf *b, uint8_t c) { tstor__io_wbuf_append(b, &c, 1); }

void tstor__io_wbuf_uint(tstor__io_wbuf *b, uint64_t v, size_t width, bool big_endian) {
  uint8_t bytes[8];
  for (size_t i = 0; i < width; i++) bytes[big_endian ? width - 1 - i : i] = (uint8_t)(v >> (8 * i));
  tstor__io_wbuf_append(b, bytes, width);
}

void tstor__io_wbuf_printf(tstor__io_wbuf *b, const char *fmt, ...) {
  char small[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    tstor__io_wbuf_fail(b, TSTOR_EINVAL, "%s: a format the C library refused", b->what);
    return;
  }
  if ((size_t)n < sizeof small) {
    tstor__io_wbuf_append(b, small, (size_t)n);
    return;
  }
  if (!reserve(b, (size_t)n + 1)) return;
  va_start(ap, fmt);
  vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

int tstor__io_wbuf_error(const tstor__io_wbuf *b) {
  if (b->err) TSTOR__ERR(b->err, "%s", b->message);
  return b->err;
}

void tstor__io_wbuf_free(tstor__io_wbuf *b) {
  tstor__io_free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}
