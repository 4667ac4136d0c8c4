/* A small strict JSON reader, pull-style, over one bounds-checked cursor
 * (cJSON's parse_buffer, with its limits enforced while reading): the
 * caller asks for the value it expects next (an object's key, a string, an
 * integer) or skips one whole. What it takes is what serde_json takes, less
 * what tstor refuses by design in every header it reads:
 *
 *  - RFC 8259's grammar: whitespace is space, tab, CR and LF; no comments,
 *    no trailing commas, no NaN or Infinity, no leading zeros;
 *  - strings of UTF-8 (the text is checked whole before it is read) with
 *    the escapes \" \\ \/ \b \f \n \r \t \uXXXX, a surrogate only in a
 *    pair, no raw control character; \u0000 is refused (tstor's names and
 *    strings are C strings);
 *  - numbers: integers from -2^63 to 2^63-1 (-0, which serde_json reads as
 *    a float, is refused, and so is an integer past that range, which it
 *    reads as a u64 or a float); fractions and exponents as finite doubles
 *    (one that overflows is refused, as serde_json refuses it);
 *  - nesting of at most TSTOR__JSON_DEPTH_MAX arrays and objects (serde_json's
 *    128 less one);
 *  - a key twice in one object, at any depth, is refused;
 *  - after the value, only whitespace.
 *
 * Decoded strings are NUL-terminated and live in one arena as long as the
 * reader: they never need more bytes than the text itself. Every failure
 * returns TSTOR_EINVAL with "WHAT offset N: ..." (N the file offset of the
 * item), or TSTOR_ENOMEM; nothing is left to free but the reader itself. */
#ifndef TSTOR_IO_JSON_H
#define TSTOR_IO_JSON_H

#include "cursor.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TSTOR__JSON_DEPTH_MAX 127

typedef struct tstor__json_key {
  const char *s; /* in the arena */
  size_t len;
  uint64_t hash; /* set when its object closes with many keys */
} tstor__json_key;

/* Per depth (1 for the outermost value): where that object's keys begin in
 * keys, and whether its next member is its first. */
typedef struct tstor__json_level {
  size_t mark;
  bool first;
} tstor__json_level;

typedef struct tstor__json {
  tstor__io_cursor c; /* the text, borrowed */
  char *arena;        /* owned: every decoded string, each NUL-terminated */
  size_t arena_used, arena_cap;
  int depth;             /* arrays and objects open */
  tstor__json_key *keys; /* owned: the keys of every open object, outermost first */
  size_t nkeys, capkeys;
  tstor__json_level level[TSTOR__JSON_DEPTH_MAX + 1];
} tstor__json;

typedef enum tstor__json_kind {
  TSTOR__JSON_END, /* no value here: the text ended */
  TSTOR__JSON_NULL,
  TSTOR__JSON_BOOL,
  TSTOR__JSON_NUMBER,
  TSTOR__JSON_STRING,
  TSTOR__JSON_ARRAY,
  TSTOR__JSON_OBJECT,
  TSTOR__JSON_OTHER /* a byte no value starts with */
} tstor__json_kind;

/* A reader over text, len bytes (borrowed until tstor__json_free), which
 * must be valid UTF-8; base is its offset in the file and what names it in
 * messages. 0, or TSTOR_ENOMEM (nothing to free then). */
int tstor__json_init(tstor__json *j, const char *text, size_t len, uint64_t base, const char *what);
void tstor__json_free(tstor__json *j);

/* The kind of the next value, whitespace skipped, nothing consumed. */
tstor__json_kind tstor__json_peek(tstor__json *j);

/* An object: begin consumes '{'; each call of next then gives the next key
 * (*key, decoded, in the arena) with its ':' consumed, the caller reads or
 * skips its value, until next sets *more false, having consumed '}' and
 * checked that no key came twice. */
int tstor__json_object_begin(tstor__json *j);
int tstor__json_object_next(tstor__json *j, bool *more, const char **key, size_t *keylen);
/* An array: begin consumes '['; next sets *more whether a value follows (to
 * be read or skipped), or consumes ']'. */
int tstor__json_array_begin(tstor__json *j);
int tstor__json_array_next(tstor__json *j, bool *more);

/* A string, decoded into the arena: *s NUL-terminated, *len bytes. */
int tstor__json_string(tstor__json *j, const char **s, size_t *len);
/* A number: *is_int says whether it is an integer (then *v holds it), or a
 * fraction or exponent (*v untouched). */
int tstor__json_number(tstor__json *j, bool *is_int, int64_t *v);
/* null. */
int tstor__json_null(tstor__json *j);
/* Any one value, checked whole by the same rules. */
int tstor__json_skip(tstor__json *j);
/* Only whitespace left. */
int tstor__json_finish(tstor__json *j);

/* The error for what the caller found wrong at the item just begun. */
int tstor__json_fail(tstor__json *j, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
