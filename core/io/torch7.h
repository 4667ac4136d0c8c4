/* Torch7's serialization (Lua Torch's torch.save / torch.File writeObject and
 * readObject): the facts its reader (torch7_load.c) and its writer
 * (torch7_save.c) share. Binary or ascii, either byte order, 4- or 8-byte
 * longs. torch7's File.lua, generic/Storage.c, generic/Tensor.c and
 * THDiskFile.c are the reference; tests/t7/gen_t7.py's docstring lays the
 * format out field by field.
 *
 * A file holds one object: a type tag, then its payload. Tables, torch
 * objects and functions carry a reference index; an index seen before is a
 * reference to that object, so an object written twice is read once and
 * shared.
 *
 * The mapping onto tstor values (serialize.h says it too): nil None, a
 * boolean bool, a number int where it is an integer of at most 2^53 (not
 * -0), else float; a string str where it is UTF-8, else bytes; a table a
 * dict (Lua's keys: true is not 1, a table may be a key); torch.<T>Storage a
 * storage value, torch.<T>Tensor a tensor on it (storageOffset made 0-based;
 * an empty tensor, nDimension 0, has shape [0]); any other class an object
 * value with its name, version and fields. */
#ifndef TSTOR_IO_TORCH7_H
#define TSTOR_IO_TORCH7_H

#include <locale.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <tstor/typed.h>

enum {
  T7_NIL = 0,
  T7_NUMBER = 1,
  T7_STRING = 2,
  T7_TABLE = 3,
  T7_TORCH = 4,
  T7_BOOLEAN = 5,
  T7_FUNCTION = 6,
  T7_LEGACY_RECUR_FUNCTION = 7,
  T7_RECUR_FUNCTION = 8
};

/* X(name, dtype): Torch7's element types, and the dtype each reads as. */
#define T7_TYPES(X)        \
  X(Byte, TSTOR_UINT8)     \
  X(Char, TSTOR_INT8)      \
  X(Short, TSTOR_INT16)    \
  X(Int, TSTOR_INT32)      \
  X(Long, TSTOR_INT64)     \
  X(Float, TSTOR_FLOAT32)  \
  X(Double, TSTOR_FLOAT64) \
  X(Half, TSTOR_FLOAT16)

static const struct {
  const char *name;
  tstor_dtype dtype;
} tstor__io_t7_types[] = {
#define T7_TYPE_ENTRY(name, dtype) {#name, dtype},
    T7_TYPES(T7_TYPE_ENTRY)
#undef T7_TYPE_ENTRY
};
#define T7_NTYPES (sizeof tstor__io_t7_types / sizeof tstor__io_t7_types[0])

/* Integers a double holds exactly: a number within reads as an int. */
#define T7_EXACT_INT ((double)((int64_t)1 << 53))

typedef struct tstor__io_t7_format {
  bool ascii, big_endian;
  unsigned long_size; /* 4 or 8, binary only */
} tstor__io_t7_format;

/* ascii numbers are read and written in the C locale, whatever the
 * program's: Torch7's "%.17g" never has a decimal comma. The locale, made
 * once (one per file that includes this); NULL when it cannot be made. */
static locale_t tstor__io_t7_locale;
static pthread_once_t tstor__io_t7_locale_once = PTHREAD_ONCE_INIT;
static void tstor__io_t7_locale_init(void) {
  tstor__io_t7_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}
static inline locale_t tstor__io_t7_c_locale(void) {
  pthread_once(&tstor__io_t7_locale_once, tstor__io_t7_locale_init);
  return tstor__io_t7_locale;
}

#endif
