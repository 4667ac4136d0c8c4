/* The first-error-wins builders of writebuf.h: a byte buffer, a file. */
#include "io_internal.h"

#include <errno.h>
#include <string.h>

static void sticky_vfail(tstor__io_sticky *s, int code, const char *fmt, va_list ap) {
  if (s->code) return;
  vsnprintf(s->message, sizeof s->message, fmt, ap);
  s->code = TSTOR__ERR(code, "%s", s->message);
}

static int sticky_check(const tstor__io_sticky *s) {
  if (s->code) TSTOR__ERR(s->code, "%s", s->message);
  return s->code;
}

/* ------------------------------------------------------- in memory */

void tstor__io_wbuf_fail(tstor__io_wbuf *b, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sticky_vfail(&b->err, code, fmt, ap);
  va_end(ap);
}

/* Room for n more bytes; false (and the error kept) when there is none. */
static bool reserve(tstor__io_wbuf *b, size_t n) {
  if (b->err.code) return false;
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
  tstor__io_put_uint(bytes, v, width, big_endian);
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

int tstor__io_wbuf_error(const tstor__io_wbuf *b) { return sticky_check(&b->err); }

void tstor__io_wbuf_free(tstor__io_wbuf *b) {
  tstor__io_free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

/* --------------------------------------------------------- to a file */

void tstor__io_fw_fail(tstor__io_fwriter *w, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sticky_vfail(&w->err, code, fmt, ap);
  va_end(ap);
}

static void fw_errno(tstor__io_fwriter *w) {
  int e = errno;
  tstor__io_fw_fail(w, tstor_errno_code(e), "writing %s: %s", w->what, strerror(e));
}

void tstor__io_fw_append(tstor__io_fwriter *w, const void *p, size_t n) {
  if (!n || w->err.code) return;
  if (fwrite(p, 1, n, w->f) != n)
    fw_errno(w);
  else
    w->off += n;
}

void tstor__io_fw_uint(tstor__io_fwriter *w, uint64_t v, size_t width) {
  uint8_t bytes[8];
  tstor__io_put_uint(bytes, v, width, false);
  tstor__io_fw_append(w, bytes, width);
}

void tstor__io_fw_flush(tstor__io_fwriter *w) {
  if (!w->err.code && fflush(w->f) != 0) fw_errno(w);
}

/* Tensor t's elements in row-major order on the host: t itself, or a copy
 * (*host, a new reference either way). */
static int host_contiguous(const tstor_tensor *t, tstor_tensor **host) {
  tstor_context *ctx = tstor_tensor_context(t);
  int on_host = (tstor_device_type_flags(ctx, tstor_tensor_device(t).type) & TSTOR_DEVICE_HOST) ||
                tstor_storage_is_pinned(tstor_tensor_storage(t));
  if (on_host && tstor_tensor_is_contiguous(t)) {
    *host = tstor_tensor_retain((tstor_tensor *)t);
    return 0;
  }
  if (on_host) return tstor_tensor_contiguous(t, host);
  tstor_device cpu;
  tstor_tensor *moved = NULL;
  int rc = tstor_device_parse(ctx, "cpu", &cpu);
  if (!rc) rc = tstor_tensor_to(t, cpu, tstor_tensor_dtype(t), &moved);
  if (!rc) rc = tstor_tensor_contiguous(moved, host);
  tstor_tensor_release(moved);
  return rc;
}

void tstor__io_fw_tensor(tstor__io_fwriter *w, const tstor_tensor *t) {
  if (w->err.code) return;
  tstor_tensor *host = NULL;
  int rc = host_contiguous(t, &host);
  if (rc)
    tstor__io_fw_fail(w, rc, "%s", tstor_last_error());
  else
    tstor__io_fw_append(w, tstor_tensor_data(host), (size_t)tstor_tensor_nbytes(host));
  tstor_tensor_release(host);
}

int tstor__io_fw_finish(const tstor__io_fwriter *w) { return sticky_check(&w->err); }
