/* The strict JSON reader of json.h. */
#include "io_internal.h"

#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tstor__json_init(tstor__json *j, const char *text, size_t len, uint64_t base,
                     const char *what) {
  memset(j, 0, sizeof *j);
  j->c = tstor__io_cursor_over(text, len, what);
  j->c.base = base;
  /* a decoded string and its NUL take fewer bytes than its quoted text, so
   * the text's length bounds the arena */
  j->arena_cap = len + 1;
  j->arena = tstor__io_malloc(j->arena_cap);
  if (!j->arena)
    return TSTOR__ERR(TSTOR_ENOMEM, "%s: out of memory for a %zu-byte text's strings", what, len);
  return 0;
}

void tstor__json_free(tstor__json *j) {
  tstor__io_free(j->arena);
  tstor__io_free(j->keys);
  j->arena = NULL;
  j->keys = NULL;
}

static tstor__json_level *level(tstor__json *j) { return &j->level[j->depth]; }

int tstor__json_fail(tstor__json *j, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = tstor__io_cur_vfail(&j->c, TSTOR_EINVAL, fmt, ap);
  va_end(ap);
  return rc;
}

/* Skips whitespace; the next byte, or -1 at the end. Sets the item there. */
static int next_byte(tstor__json *j) {
  const uint8_t *d = j->c.data;
  size_t off = j->c.off, len = j->c.len;
  while (off < len && (d[off] == ' ' || d[off] == '\n' || d[off] == '\r' || d[off] == '\t')) off++;
  j->c.off = j->c.item = off;
  return off < len ? d[off] : -1;
}

static bool digit(uint8_t b) { return b >= '0' && b <= '9'; }

static int unexpected(tstor__json *j, const char *wanted) {
  int b = next_byte(j);
  if (b < 0) return tstor__json_fail(j, "the text ends where %s should be", wanted);
  return tstor__json_fail(j, "%s expected, found '%c'", wanted, b >= 0x20 && b < 0x7f ? b : '?');
}

tstor__json_kind tstor__json_peek(tstor__json *j) {
  switch (next_byte(j)) {
    case -1: return TSTOR__JSON_END;
    case 'n': return TSTOR__JSON_NULL;
    case 't':
    case 'f': return TSTOR__JSON_BOOL;
    case '"': return TSTOR__JSON_STRING;
    case '[': return TSTOR__JSON_ARRAY;
    case '{': return TSTOR__JSON_OBJECT;
    default:
      return j->c.data[j->c.off] == '-' || digit(j->c.data[j->c.off]) ? TSTOR__JSON_NUMBER
                                                                      : TSTOR__JSON_OTHER;
  }
}

/* ------------------------------------------------------------- strings */

static int hex4(const uint8_t *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    uint8_t h = p[i];
    v <<= 4;
    if (h >= '0' && h <= '9')
      v |= (unsigned)(h - '0');
    else if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f')
      v |= (unsigned)((h | 0x20) - 'a' + 10);
    else
      return -1;
  }
  *out = v;
  return 0;
}

static char *put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    *o++ = (char)cp;
  } else if (cp < 0x800) {
    *o++ = (char)(0xC0 | cp >> 6);
    *o++ = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *o++ = (char)(0xE0 | cp >> 12);
    *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
    *o++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *o++ = (char)(0xF0 | cp >> 18);
    *o++ = (char)(0x80 | (cp >> 12 & 0x3F));
    *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
    *o++ = (char)(0x80 | (cp & 0x3F));
  }
  return o;
}

/* The escape at p (after its backslash), end the text's end: its code
 * point into *o, which moves on; *p moves past it. */
static int escape(tstor__json *j, const uint8_t **pp, const uint8_t *end, char **o) {
  const uint8_t *p = *pp;
  if (p >= end) return tstor__json_fail(j, "the text ends inside a string's escape");
  static const char simple[] = "\"\"\\\\//b\bf\fn\nr\rt\t";
  for (const char *s = simple; *s; s += 2)
    if (*p == (uint8_t)s[0]) {
      *(*o)++ = s[1];
      *pp = p + 1;
      return 0;
    }
  if (*p != 'u')
    return tstor__json_fail(j, "a string has the unknown escape '\\%c'",
                            *p >= 0x20 && *p < 0x7f ? *p : '?');
  unsigned cp, lo;
  if (end - p < 5 || hex4(p + 1, &cp))
    return tstor__json_fail(j, "a \\u escape without four hex digits");
  p += 5;
  if (cp >= 0xDC00 && cp <= 0xDFFF)
    return tstor__json_fail(j, "a string holds a lone trailing surrogate");
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) || lo < 0xDC00 ||
        lo > 0xDFFF)
      return tstor__json_fail(j, "a string holds a lone leading surrogate");
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    p += 6;
  }
  if (cp == 0) return tstor__json_fail(j, "a string holds \\u0000, which tstor's strings cannot");
  *o = put_utf8(*o, cp);
  *pp = p;
  return 0;
}

int tstor__json_string(tstor__json *j, const char **s, size_t *len) {
  if (next_byte(j) != '"') return unexpected(j, "a string");
  const uint8_t *p = j->c.data + j->c.off + 1, *end = j->c.data + j->c.len;
  char *start = j->arena + j->arena_used, *o = start;
  for (;;) {
    /* the plain run, copied as it is */
    while (p < end && *p != '"' && *p != '\\' && *p >= 0x20) {
      if (*p == 0xED && p + 1 < end && p[1] >= 0xA0)
        return tstor__json_fail(j, "a string holds a surrogate in UTF-8");
      *o++ = (char)*p++;
    }
    if (p >= end) return tstor__json_fail(j, "the text ends inside a string");
    if (*p == '"') break;
    if (*p < 0x20) return tstor__json_fail(j, "a string holds the control character 0x%02x", *p);
    p++;
    int rc = escape(j, &p, end, &o);
    if (rc) return rc;
  }
  *o = '\0';
  *s = start;
  *len = (size_t)(o - start);
  j->arena_used += *len + 1;
  j->c.off = (size_t)(p + 1 - j->c.data);
  return 0;
}

/* ------------------------------------------------------------- numbers */

/* Whether the number text s, n bytes of JSON's grammar with a fraction or
 * an exponent, is a finite double. Its first 40 significant digits decide,
 * as an integer times a power of ten (no decimal point, so no locale). */
static bool finite_number(const uint8_t *s, size_t n) {
  char buf[64];
  size_t nd = 0, i = s[0] == '-';
  long long e10 = 0;
  for (; i < n && digit(s[i]); i++) {
    if (!nd && s[i] == '0') continue;
    if (nd < 40)
      buf[nd++] = (char)s[i];
    else
      e10++;
  }
  if (i < n && s[i] == '.')
    for (i++; i < n && digit(s[i]); i++) {
      if (!nd && s[i] == '0') {
        e10--;
      } else if (nd < 40) {
        buf[nd++] = (char)s[i];
        e10--;
      }
    }
  if (!nd) return true; /* zero */
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    bool neg = s[++i] == '-';
    if (s[i] == '-' || s[i] == '+') i++;
    long long e = 0;
    for (; i < n && digit(s[i]); i++)
      if (e < 1000000000) e = e * 10 + (s[i] - '0');
    e10 += neg ? -e : e;
  }
  long long top = (long long)nd - 1 + e10; /* the leading digit's power of ten */
  if (top > 309) return false;
  if (top < 300) return true;
  snprintf(buf + nd, sizeof buf - nd, "e%lld", e10);
  return isfinite(strtod(buf, NULL));
}

int tstor__json_number(tstor__json *j, bool *is_int, int64_t *v) {
  int b = next_byte(j);
  if (b != '-' && !(b >= '0' && b <= '9')) return unexpected(j, "a number");
  const uint8_t *d = j->c.data;
  size_t at = j->c.off, i = at, n = j->c.len;
  bool neg = d[i] == '-', big = false;
  uint64_t acc = 0;
  if (neg) i++;
  if (i >= n || !digit(d[i])) return tstor__json_fail(j, "a number without digits");
  if (d[i] == '0') {
    i++;
    if (i < n && digit(d[i])) return tstor__json_fail(j, "a number with a leading zero");
  } else {
    for (; i < n && digit(d[i]); i++) {
      unsigned dg = (unsigned)(d[i] - '0');
      if (acc > (UINT64_MAX - dg) / 10) big = true;
      acc = acc * 10 + dg;
    }
  }
  bool frac = false;
  if (i < n && d[i] == '.') {
    frac = true;
    if (++i >= n || !digit(d[i]))
      return tstor__json_fail(j, "a number without digits after its point");
    while (i < n && digit(d[i])) i++;
  }
  if (i < n && (d[i] == 'e' || d[i] == 'E')) {
    frac = true;
    if (++i < n && (d[i] == '+' || d[i] == '-')) i++;
    if (i >= n || !digit(d[i]))
      return tstor__json_fail(j, "a number without digits in its exponent");
    while (i < n && digit(d[i])) i++;
  }
  j->c.off = i;
  *is_int = !frac;
  if (frac) {
    if (!finite_number(d + at, i - at))
      return tstor__json_fail(j, "the number %.*s is out of a double's range",
                              (int)(i - at > 40 ? 40 : i - at), (const char *)d + at);
    return 0;
  }
  if (neg && acc == 0) return tstor__json_fail(j, "-0, which the format reads as a float");
  if (big || acc > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
    return tstor__json_fail(j, "the integer %.*s is past tstor's range (-2^63 to 2^63-1)",
                            (int)(i - at > 40 ? 40 : i - at), (const char *)d + at);
  *v = neg ? (int64_t)(0 - acc) : (int64_t)acc;
  return 0;
}

/* ------------------------------------------------------------ literals */

static int literal(tstor__json *j, const char *word) {
  size_t n = strlen(word);
  next_byte(j);
  if (j->c.len - j->c.off < n || memcmp(j->c.data + j->c.off, word, n))
    return tstor__json_fail(j, "a value expected");
  j->c.off += n;
  return 0;
}

int tstor__json_null(tstor__json *j) { return literal(j, "null"); }

/* ------------------------------------------------ arrays and objects */

static int open_level(tstor__json *j, int byte, const char *what) {
  if (next_byte(j) != byte) return unexpected(j, what);
  if (j->depth >= TSTOR__JSON_DEPTH_MAX)
    return tstor__json_fail(j, "the text nests deeper than %d levels", TSTOR__JSON_DEPTH_MAX);
  j->c.off++;
  j->depth++;
  level(j)->mark = j->nkeys;
  level(j)->first = true;
  return 0;
}

int tstor__json_array_begin(tstor__json *j) { return open_level(j, '[', "'['"); }
int tstor__json_object_begin(tstor__json *j) { return open_level(j, '{', "'{'"); }

/* The keys of the object that closes, n of them at k: none twice. Few are
 * compared pairwise; more go through a hash table. */
static int keys_unique(tstor__json *j, tstor__json_key *k, size_t n) {
  const tstor__json_key *dup = NULL;
  if (n <= 8) {
    for (size_t a = 1; a < n && !dup; a++)
      for (size_t b = 0; b < a; b++)
        if (k[a].len == k[b].len && memcmp(k[a].s, k[b].s, k[a].len) == 0) {
          dup = &k[a];
          break;
        }
  } else {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    uint32_t *slot = tstor__io_calloc(cap, sizeof *slot);
    if (!slot) return TSTOR__ERR(TSTOR_ENOMEM, "%s: out of memory for %zu keys", j->c.what, n);
    for (size_t a = 0; a < n && !dup; a++) {
      k[a].hash = tstor__io_hash_bytes(k[a].s, k[a].len);
      size_t h = (size_t)k[a].hash & (cap - 1);
      for (; slot[h]; h = (h + 1) & (cap - 1)) {
        const tstor__json_key *o = &k[slot[h] - 1];
        if (o->hash == k[a].hash && o->len == k[a].len && memcmp(o->s, k[a].s, o->len) == 0) {
          dup = &k[a];
          break;
        }
      }
      slot[h] = (uint32_t)(a + 1);
    }
    tstor__io_free(slot);
  }
  if (dup)
    return tstor__json_fail(j, "the key \"%.64s\" is in one object twice (a duplicate)", dup->s);
  return 0;
}

int tstor__json_object_next(tstor__json *j, bool *more, const char **key, size_t *keylen) {
  tstor__json_level *lv = level(j);
  int b = next_byte(j);
  if (b == '}' || (!lv->first && b != ',')) {
    if (b != '}') return unexpected(j, lv->first ? "a key or '}'" : "',' or '}'");
    j->c.off++;
    size_t n = j->nkeys - lv->mark; /* keys is NULL before the first key */
    int rc = n > 1 ? keys_unique(j, j->keys + lv->mark, n) : 0;
    j->nkeys = lv->mark;
    j->depth--;
    *more = false;
    return rc;
  }
  if (!lv->first) j->c.off++;
  lv->first = false;
  if (next_byte(j) != '"') return unexpected(j, "a key");
  size_t at = j->c.off;
  int rc = tstor__json_string(j, key, keylen);
  if (rc) return rc;
  if (next_byte(j) != ':') return unexpected(j, "':'");
  j->c.off++;
  tstor__json_key *k = tstor__io_grow(j->keys, &j->capkeys, j->nkeys, sizeof *k, 16,
                                      "out of memory for a JSON text's keys");
  if (!k) return TSTOR_ENOMEM;
  j->keys = k;
  k[j->nkeys++] = (tstor__json_key){*key, *keylen, 0}; /* hashed where many */
  j->c.item = at;
  *more = true;
  return 0;
}

int tstor__json_array_next(tstor__json *j, bool *more) {
  tstor__json_level *lv = level(j);
  int b = next_byte(j);
  if (b == ']' || (!lv->first && b != ',')) {
    if (b != ']') return unexpected(j, lv->first ? "a value or ']'" : "',' or ']'");
    j->c.off++;
    j->depth--;
    *more = false;
    return 0;
  }
  if (!lv->first) j->c.off++;
  lv->first = false;
  *more = true;
  return 0;
}

/* ---------------------------------------------------------- any value */

int tstor__json_skip(tstor__json *j) {
  bool more, is_int;
  int64_t v;
  const char *s;
  size_t n;
  int rc;
  switch (tstor__json_peek(j)) {
    case TSTOR__JSON_NULL: return literal(j, "null");
    case TSTOR__JSON_BOOL: return literal(j, j->c.data[j->c.off] == 't' ? "true" : "false");
    case TSTOR__JSON_NUMBER: return tstor__json_number(j, &is_int, &v);
    case TSTOR__JSON_STRING: return tstor__json_string(j, &s, &n);
    case TSTOR__JSON_ARRAY:
      if ((rc = tstor__json_array_begin(j))) return rc;
      while (!(rc = tstor__json_array_next(j, &more)) && more)
        if ((rc = tstor__json_skip(j))) return rc;
      return rc;
    case TSTOR__JSON_OBJECT:
      if ((rc = tstor__json_object_begin(j))) return rc;
      while (!(rc = tstor__json_object_next(j, &more, &s, &n)) && more)
        if ((rc = tstor__json_skip(j))) return rc;
      return rc;
    default: return unexpected(j, "a value");
  }
}

int tstor__json_finish(tstor__json *j) {
  if (next_byte(j) >= 0) return tstor__json_fail(j, "bytes follow the JSON value");
  return 0;
}
