/* One bounds-checked cursor for every read of bytes a file gave us (cJSON's
 * parse_buffer and can_read()): a reader asks the cursor, never the pointer,
 * whether n more bytes are there, so that no format's reader can step past
 * its input by forgetting a check. Errors name the input (`what`) and the
 * offset of the item being read (`item`, which the reader sets as it starts
 * one), not the byte where the input ran out. */
#ifndef TSTOR_IO_CURSOR_H
#define TSTOR_IO_CURSOR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tstor__io_cursor {
  const uint8_t *data; /* the input, borrowed */
  size_t len;          /* its bytes */
  size_t off;          /* the next byte to read */
  size_t item;         /* where the item being read began, for messages */
  uint64_t base;       /* data[0]'s offset in the file, for messages */
  const char *what;    /* names the input in messages ("data.pkl", a path) */
  bool ran_out;        /* a read was refused for want of bytes: a reader given
                          a prefix of its input may retry with more */
} tstor__io_cursor;

static inline tstor__io_cursor tstor__io_cursor_over(const void *data, size_t len,
                                                     const char *what) {
  tstor__io_cursor c = {(const uint8_t *)data, len, 0, 0, 0, what, false};
  return c;
}

static inline size_t tstor__io_cur_left(const tstor__io_cursor *c) { return c->len - c->off; }
static inline bool tstor__io_cur_can_read(const tstor__io_cursor *c, size_t n) {
  return n <= c->len - c->off;
}
static inline bool tstor__io_cur_at_end(const tstor__io_cursor *c) { return c->off >= c->len; }
/* The file offset of the item being read. */
static inline uint64_t tstor__io_cur_item_at(const tstor__io_cursor *c) {
  return c->base + c->item;
}

/* The error every refused read of this input gives: "WHAT offset N: MSG",
 * N the item's offset. Returns code. */
int tstor__io_cur_fail(const tstor__io_cursor *c, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

int tstor__io_cur_vfail(const tstor__io_cursor *c, int code, const char *fmt, va_list ap);
/* The same error for offset `at` of the input named `what`, where no cursor
 * has read (a header found by a scan, a member of an archive). */
int tstor__io_fail_at(const char *what, uint64_t at, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* TSTOR_EINVAL unless n more bytes are there ("it ends inside ..."); both
 * this and tstor__io_cur_short set ran_out. */
int tstor__io_cur_need(tstor__io_cursor *c, size_t n);
/* The failure of a reader that wanted more than the input holds. */
int tstor__io_cur_short(tstor__io_cursor *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* *p gets the next n bytes (borrowed from the input), which are stepped over. */
int tstor__io_cur_bytes(tstor__io_cursor *c, size_t n, const uint8_t **p);
/* The next n bytes as a cursor of their own (*sub: the same input, offsets
 * in messages still the file's, its item at its start), stepped over. */
int tstor__io_cur_sub(tstor__io_cursor *c, size_t n, tstor__io_cursor *sub);
/* An unsigned integer of width bytes (1 to 8), little- or big-endian. */
int tstor__io_cur_uint_any(tstor__io_cursor *c, size_t width, bool big_endian, uint64_t *out);
/* The same, inline where the width is a constant: the widths every format's
 * fields have, little-endian, with one load each (the pickle's operands and
 * the zip directory read millions of them). */
static inline int tstor__io_cur_uint(tstor__io_cursor *c, size_t width, bool big_endian,
                                     uint64_t *out) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (!big_endian && (width == 1 || width == 2 || width == 4 || width == 8) &&
      tstor__io_cur_can_read(c, width)) {
    const uint8_t *p = c->data + c->off;
    uint64_t u = 0;
    __builtin_memcpy(&u, p, width); /* the low bytes of u */
    c->off += width;
    *out = u;
    return 0;
  }
#endif
  return tstor__io_cur_uint_any(c, width, big_endian, out);
}
/* The bytes up to the next '\n' (*p, *n, the newline not counted), stepped
 * over with the newline; TSTOR_EINVAL naming `item` when there is none. */
int tstor__io_cur_line(tstor__io_cursor *c, const char *item, const uint8_t **p, size_t *n);

#endif
