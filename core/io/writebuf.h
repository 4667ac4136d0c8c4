/* The emitters' builders, in the shape of SQLite's sqlite3_str: appends
 * return nothing and keep the first error, which the builder checks once at
 * the end, so that no emitter repeats an error check after every byte it
 * writes. A growing byte buffer for every emitter that builds in memory (the
 * pickle writer, the Torch7 writer, headers), and a file writer for every
 * saver that writes a file (the zip writer, safetensors, Torch7). */
#ifndef TSTOR_IO_WRITEBUF_H
#define TSTOR_IO_WRITEBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* v as width bytes (1 to 8) at p, least significant first unless
 * big_endian: every integer an emitter writes is laid out here. */
static inline void tstor__io_put_uint(uint8_t *p, uint64_t v, size_t width, bool big_endian) {
  for (size_t i = 0; i < width; i++) p[big_endian ? width - 1 - i : i] = (uint8_t)(v >> (8 * i));
}

/* A builder's first error, kept with its message: whatever failed since (a
 * file write, say) must not hide it, so the check at the end sets it again. */
typedef struct tstor__io_sticky {
  int code;           /* 0 while nothing failed */
  char message[1024]; /* the core's whole message: a failure kept from a device copy is long */
} tstor__io_sticky;

/* ------------------------------------------------------- in memory */

typedef struct tstor__io_wbuf {
  uint8_t *data; /* owned; NULL until the first append */
  size_t len, cap;
  const char *what; /* names what is built, in the out-of-memory message */
  tstor__io_sticky err;
} tstor__io_wbuf;

#define TSTOR__WBUF_INIT(name) \
  { .what = (name) }

void tstor__io_wbuf_append(tstor__io_wbuf *b, const void *p, size_t n);
void tstor__io_wbuf_byte(tstor__io_wbuf *b, uint8_t c);
/* v as width bytes (1 to 8), least significant first unless big_endian. */
void tstor__io_wbuf_uint(tstor__io_wbuf *b, uint64_t v, size_t width, bool big_endian);
void tstor__io_wbuf_printf(tstor__io_wbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Records code and its message as the buffer's error, unless it has one. */
void tstor__io_wbuf_fail(tstor__io_wbuf *b, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The first error, or 0; its message is set again so that it is the last. */
int tstor__io_wbuf_error(const tstor__io_wbuf *b);
void tstor__io_wbuf_free(tstor__io_wbuf *b);

/* --------------------------------------------------------- to a file */

typedef struct tstor__io_fwriter {
  FILE *f;          /* borrowed: the caller opens and closes it */
  uint64_t off;     /* the bytes written so far */
  const char *what; /* names the file in messages ("the archive") */
  tstor__io_sticky err;
} tstor__io_fwriter;

#define TSTOR__FWRITER_INIT(file, name) \
  { .f = (file), .what = (name) }

void tstor__io_fw_append(tstor__io_fwriter *w, const void *p, size_t n);
/* v as width bytes (1 to 8), least significant first. */
void tstor__io_fw_uint(tstor__io_fwriter *w, uint64_t v, size_t width);
/* Tensor t's elements in row-major order, copied to the host and made
 * contiguous first where they are not (a device's, a view's). */
void tstor__io_fw_tensor(tstor__io_fwriter *w, const tstor_tensor *t);
/* Records code and its message as the writer's error, unless it has one:
 * the failure of what was to be written (code's message already set) is
 * kept as tstor__io_fw_fail(w, rc, "%s", tstor_last_error()). */
void tstor__io_fw_fail(tstor__io_fwriter *w, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Whether nothing failed yet: a writer may skip work whose bytes would be
 * dropped. */
static inline bool tstor__io_fw_ok(const tstor__io_fwriter *w) { return w->err.code == 0; }
/* Flushes the stream (the zip writer's archive is whole once it returns;
 * the other savers leave a caller's stream unflushed, serialize.h). */
void tstor__io_fw_flush(tstor__io_fwriter *w);
/* The check at the end: the first error, or 0. */
int tstor__io_fw_finish(const tstor__io_fwriter *w);

#endif
