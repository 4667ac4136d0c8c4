/* A growing byte buffer for every emitter (the pickle writer, the Torch7
 * writer, headers), in the shape of SQLite's sqlite3_str: appends return
 * nothing and keep the first error, which the builder checks once at the end,
 * so that no emitter repeats an error check after every byte it writes. */
#ifndef TSTOR_IO_WRITEBUF_H
#define TSTOR_IO_WRITEBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tstor__io_wbuf {
  uint8_t *data;    /* owned; NULL until the first append */
  size_t len, cap;
  int err;          /* the first error (its message set when it happened), or 0 */
  const char *what; /* names what is built, in the out-of-memory message */
  char message[256]; /* err's message, set again by tstor__io_wbuf_error: whatever
                        failed since (a file write, say) must not hide it */
} tstor__io_wbuf;

#define TSTOR__WBUF_INIT(name) {.what = (name)}

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

#endif
