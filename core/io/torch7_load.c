/* Torch7's reader (torch7.h says what the format is and how its values map
 * onto tstor's). Nothing in the file says binary or ascii, the byte order or
 * the long size: the reader tells the first two from the first tag (a digit
 * in ascii; a tag of 0 to 8 in one byte order and not the other). The long
 * size is 8 bytes, Torch7's on every 64-bit system, unless the file's
 * framing breaks under 8 (it runs out, a tag or a length is impossible) and
 * holds under 4: only framing is evidence, and a refusal of what a file says
 * (a function, a class, a tensor past its storage) is final, never a reason
 * to read it again. Functions (LuaJIT bytecode), classes with their own
 * write function (tds.Hash, tds.Vec) and a table that contains itself are
 * refused by name. cutorch's classes (torch.CudaTensor, torch.Cuda<T>Storage)
 * are written in their host type's layout and read as it. Nothing is run. */
#include "io_internal.h"
#include "torch7.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct t7_reader {
  tstor__io_source *src;
  tstor_checkpoint *ck;
  tstor__io_cursor cur;
  tstor__io_t7_format fmt;
  bool views;          /* storages may be views of the input (a mapped load) */
  tstor_value **objs;  /* by reference index - 1 */
  unsigned char *busy; /* 1 while that object is being read */
  size_t nobjs, capobjs;
  int depth;
  tstor_value *none;
  bool misframed; /* a refusal that says the bytes are not framed as read */
} t7_reader;

#define FAIL(r, code, ...) tstor__io_cur_fail(&(r)->cur, (code), __VA_ARGS__)
/* A refusal of the file's framing under the long size being tried: evidence
 * for the other one (as running out of bytes is, which the cursor notes). */
#define MISFRAMED(r, code, ...) ((r)->misframed = true, FAIL(r, code, __VA_ARGS__))

static bool is_space(uint8_t c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* After an ascii array of n > 0 elements, THDiskFile reads one '\n' if it
 * comes next. */
static void end_array(t7_reader *r, size_t n) {
  tstor__io_cursor *c = &r->cur;
  if (r->fmt.ascii && n && tstor__io_cur_can_read(c, 1) && c->data[c->off] == '\n') c->off++;
}

/* The next ascii number's text, as fscanf finds it: blanks skipped, then
 * the longest run of characters a number can hold. */
static int ascii_token(t7_reader *r, const char *what, char *buf, size_t size) {
  tstor__io_cursor *c = &r->cur;
  while (tstor__io_cur_can_read(c, 1) && is_space(c->data[c->off])) c->off++;
  size_t n = 0;
  while (tstor__io_cur_can_read(c, n + 1) && !is_space(c->data[c->off + n])) n++;
  if (!n) return tstor__io_cur_short(c, "the file ends before %s", what);
  if (n >= size) return FAIL(r, TSTOR_EINVAL, "%s: a number of %zu characters", what, n);
  memcpy(buf, c->data + c->off, n);
  buf[n] = '\0';
  c->off += n;
  return 0;
}

/* An integer field of `width` bytes in binary (a long is long_size), a
 * decimal number within [lo, hi] in ascii. */
static int read_integer(t7_reader *r, size_t width, int64_t lo, int64_t hi, const char *what,
                        int64_t *out) {
  tstor__io_cursor *c = &r->cur;
  c->item = c->off;
  if (r->fmt.ascii) {
    char buf[64], *end;
    int rc = ascii_token(r, what, buf, sizeof buf);
    if (rc) return rc;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (*end || end == buf || errno)
      return FAIL(r, TSTOR_EINVAL, "%s: '%s' is not an integer", what, buf);
    if (v < lo || v > hi) return MISFRAMED(r, TSTOR_ERANGE, "%s: %lld is out of range", what, v);
    *out = v;
    return 0;
  }
  uint64_t u;
  if (!tstor__io_cur_can_read(c, width))
    return tstor__io_cur_short(c, "the file ends inside %s (%zu bytes, %zu left)", what, width,
                               tstor__io_cur_left(c));
  int rc = tstor__io_cur_uint(c, width, r->fmt.big_endian, &u);
  if (rc) return rc;
  if (width < 8 && (u >> (8 * width - 1) & 1)) u |= ~(uint64_t)0 << (8 * width); /* sign-extended */
  memcpy(out, &u, sizeof *out);
  if (*out < lo || *out > hi)
    return MISFRAMED(r, TSTOR_ERANGE, "%s: %lld is out of range", what, (long long)*out);
  return 0;
}

static int read_int(t7_reader *r, const char *what, int64_t lo, int64_t *out) {
  int rc = read_integer(r, 4, lo, INT32_MAX, what, out);
  end_array(r, 1);
  return rc;
}

static int read_long(t7_reader *r, const char *what, int64_t lo, int64_t *out) {
  int rc = read_integer(r, r->fmt.long_size, lo, INT64_MAX, what, out);
  end_array(r, 1);
  return rc;
}

static int parse_double(t7_reader *r, const char *what, double *out) {
  char buf[64], *end;
  int rc = ascii_token(r, what, buf, sizeof buf);
  if (rc) return rc;
  locale_t c = tstor__io_t7_c_locale();
  if (!c) return FAIL(r, TSTOR_ENOMEM, "no C locale to read numbers in");
  *out = strtod_l(buf, &end, c);
  if (*end || end == buf) return FAIL(r, TSTOR_EINVAL, "%s: '%s' is not a number", what, buf);
  return 0;
}

/* A float element as THDiskFile reads one, fscanf's "%g" into a float:
 * rounded once from the decimal (strtof), not through a double. */
static int parse_float(t7_reader *r, const char *what, float *out) {
  char buf[64], *end;
  int rc = ascii_token(r, what, buf, sizeof buf);
  if (rc) return rc;
  locale_t c = tstor__io_t7_c_locale();
  if (!c) return FAIL(r, TSTOR_ENOMEM, "no C locale to read numbers in");
  *out = strtof_l(buf, &end, c);
  if (*end || end == buf) return FAIL(r, TSTOR_EINVAL, "%s: '%s' is not a number", what, buf);
  return 0;
}

static int read_double(t7_reader *r, const char *what, double *out) {
  tstor__io_cursor *c = &r->cur;
  c->item = c->off;
  int rc;
  if (r->fmt.ascii) {
    rc = parse_double(r, what, out);
  } else {
    uint64_t u;
    if (!tstor__io_cur_can_read(c, 8))
      rc = tstor__io_cur_short(c, "the file ends inside %s (8 bytes, %zu left)", what,
                               tstor__io_cur_left(c));
    else if (!(rc = tstor__io_cur_uint(c, 8, r->fmt.big_endian, &u)))
      memcpy(out, &u, 8);
  }
  end_array(r, 1);
  return rc;
}

/* n raw bytes (a string's, or a Byte/Char storage's), borrowed. */
static int read_raw(t7_reader *r, size_t n, const char *what, const uint8_t **p) {
  tstor__io_cursor *c = &r->cur;
  if (!tstor__io_cur_can_read(c, n))
    return tstor__io_cur_short(c, "%s of %zu bytes, past the end of the file (%zu left)", what, n,
                               tstor__io_cur_left(c));
  int rc = tstor__io_cur_bytes(c, n, p);
  end_array(r, n);
  return rc;
}

/* ---------------------------------------------------------------- values */

static int number_value(t7_reader *r, double d, tstor_value **out) {
  tstor_value *v;
  if (d >= -T7_EXACT_INT && d <= T7_EXACT_INT && d == floor(d) && !(d == 0 && signbit(d))) {
    if (!(v = tstor__io_value_alloc(r->ck, TSTOR_VALUE_INT))) return TSTOR_ENOMEM;
    v->u.i = (int64_t)d;
  } else {
    if (!(v = tstor__io_value_alloc(r->ck, TSTOR_VALUE_FLOAT))) return TSTOR_ENOMEM;
    v->u.f = d;
  }
  *out = v;
  return 0;
}

static int read_string(t7_reader *r, const char *what, const uint8_t **p, size_t *n) {
  int64_t len;
  int rc = read_int(r, what, 0, &len);
  if (!rc) rc = read_raw(r, (size_t)len, what, p);
  *n = (size_t)len;
  return rc;
}

static int string_value(t7_reader *r, tstor_value **out) {
  const uint8_t *p;
  size_t n;
  int rc = read_string(r, "a string", &p, &n);
  if (rc) return rc;
  if (tstor__io_utf8_valid((const char *)p, n))
    return tstor_value_new_string(r->ck, (const char *)p, n, out);
  return tstor_value_new_bytes(r->ck, p, n, out);
}

static int read_object(t7_reader *r, tstor_value **out);

/* A table's count pairs; each needs two tags at least. */
static int read_table(t7_reader *r, tstor_value *d) {
  int64_t count;
  int rc = read_int(r, "a table's size", 0, &count);
  if (rc) return rc;
  size_t pair = r->fmt.ascii ? 4 : 8;
  if ((uint64_t)count > tstor__io_cur_left(&r->cur) / pair)
    return tstor__io_cur_short(&r->cur,
                               "a table of %lld entries, more than the %zu bytes left can hold",
                               (long long)count, tstor__io_cur_left(&r->cur));
  d->lua = 1;
  for (int64_t i = 0; i < count; i++) {
    tstor_value *k, *v;
    size_t at = r->cur.off;
    if ((rc = read_object(r, &k)) || (rc = read_object(r, &v))) return rc;
    r->cur.item = at;
    if (k->kind == TSTOR_VALUE_NONE || v->kind == TSTOR_VALUE_NONE)
      return MISFRAMED(r, TSTOR_EINVAL, "a table entry with a nil %s (Lua's tables hold none)",
                       k->kind == TSTOR_VALUE_NONE ? "key" : "value");
    if (k->kind == TSTOR_VALUE_FLOAT && isnan(k->u.f))
      return MISFRAMED(r, TSTOR_EINVAL, "a table key that is NaN");
    /* a key written twice: Torch7's reader assigns t[k] = v in turn, so the
     * last value stands */
    bool existed;
    if ((rc = tstor__io_dict_put(d, k, v, true, &existed))) return rc;
  }
  return 0;
}

/* The element type of torch.<T><suffix>, or of cutorch's torch.Cuda<T><suffix>
 * (torch.Cuda<suffix> alone is Float's), which cutorch writes in its host
 * type's layout: its name (as in "a FloatTensor") and dtype, or NULL. */
static const char *type_of_class(const char *cls, size_t n, const char *suffix,
                                 tstor_dtype *dtype) {
  size_t sl = strlen(suffix);
  if (n < 6 + sl || memcmp(cls, "torch.", 6) != 0 || memcmp(cls + n - sl, suffix, sl) != 0)
    return NULL;
  const char *t = cls + 6;
  size_t tn = n - 6 - sl;
  if (tn >= 4 && memcmp(t, "Cuda", 4) == 0) {
    t += 4;
    tn -= 4;
    if (!tn) t = "Float", tn = 5;
  }
  for (size_t i = 0; i < T7_NTYPES; i++)
    if (strlen(tstor__io_t7_types[i].name) == tn &&
        memcmp(t, tstor__io_t7_types[i].name, tn) == 0) {
      *dtype = tstor__io_t7_types[i].dtype;
      return tstor__io_t7_types[i].name;
    }
  return NULL;
}

/* The elements of a binary storage as they lie in the file: a view of a
 * mapped input where they are aligned and need no swap, else copied (and
 * swapped, or widened from 4-byte longs). */
static int binary_elements(t7_reader *r, tstor_dtype dt, size_t count, tstor_storage **host) {
  size_t es = tstor_dtype_size(dt), fs = dt == TSTOR_INT64 ? r->fmt.long_size : es;
  const uint8_t *p;
  int rc = read_raw(r, count * fs, "a storage's elements", &p);
  if (rc) return rc;
  uint64_t off = r->cur.base + (uint64_t)(p - r->cur.data);
  bool as_is = fs == es && (!r->fmt.big_endian || es == 1);
  if (as_is) {
    bool queued;
    rc = tstor__io_source_host(r->src, off, count * es, es, r->views ? TSTOR__SOURCE_VIEW : 0,
                               "a storage", host, &queued);
    return rc;
  }
  tstor_device cpu;
  if ((rc = tstor_device_parse(r->src->ctx, "cpu", &cpu)) ||
      (rc = tstor_storage_new(r->src->ctx, cpu, count * es, host)))
    return rc;
  uint8_t *dst = tstor_storage_data(*host);
  if (!count) return 0; /* an empty storage has no data to copy into */
  if (fs == es) {
    memcpy(dst, p, count * es);
    return tstor_typed_byteswap(*host, dt);
  }
  for (size_t i = 0; i < count; i++) { /* 4-byte longs, widened */
    uint32_t u = 0;
    for (size_t b = 0; b < 4; b++)
      u |= (uint32_t)p[4 * i + (r->fmt.big_endian ? 3 - b : b)] << (8 * b);
    int64_t v = (int32_t)u;
    memcpy(dst + 8 * i, &v, 8);
  }
  return 0;
}

/* The elements of an ascii storage: raw bytes for Byte and Char, else one
 * printed number each, converted as Torch7's fscanf reads them. */
static int ascii_elements(t7_reader *r, tstor_dtype dt, size_t count, tstor_storage **host) {
  tstor_device cpu;
  size_t es = tstor_dtype_size(dt);
  int rc = tstor_device_parse(r->src->ctx, "cpu", &cpu);
  if (!rc) rc = tstor_storage_new(r->src->ctx, cpu, count * es, host);
  if (rc) return rc;
  uint8_t *dst = tstor_storage_data(*host);
  if (es == 1) {
    const uint8_t *p;
    if (!(rc = read_raw(r, count, "a storage's elements", &p)) && count) memcpy(dst, p, count);
    return rc;
  }
  bool integral = dt != TSTOR_FLOAT32 && dt != TSTOR_FLOAT64 && dt != TSTOR_FLOAT16;
  int64_t lo = dt == TSTOR_INT16 ? INT16_MIN : dt == TSTOR_INT32 ? INT32_MIN : INT64_MIN;
  int64_t hi = dt == TSTOR_INT16 ? INT16_MAX : dt == TSTOR_INT32 ? INT32_MAX : INT64_MAX;
  for (size_t i = 0; i < count && !rc; i++) {
    if (integral) {
      int64_t v;
      if (!(rc = read_integer(r, es, lo, hi, "a storage element", &v)))
        rc = tstor_dtype_convert(dst + i * es, dt, &v, TSTOR_INT64, 1);
    } else if (dt == TSTOR_FLOAT64) {
      r->cur.item = r->cur.off;
      rc = parse_double(r, "a storage element", (double *)(void *)(dst + i * es));
    } else { /* Float, and Half, which THDiskFile reads as a float and narrows */
      float f;
      r->cur.item = r->cur.off;
      if (!(rc = parse_float(r, "a storage element", &f)))
        rc = tstor_dtype_convert(dst + i * es, dt, &f, TSTOR_FLOAT32, 1);
    }
  }
  end_array(r, count);
  return rc;
}

/* torch.<T>Storage: long size, then its elements. */
static int read_storage(t7_reader *r, tstor_dtype dt, const char *type, tstor_value *v) {
  int64_t count;
  int rc = read_long(r, "a storage's size", 0, &count);
  if (rc) return rc;
  size_t least = r->fmt.ascii ? 1 : (dt == TSTOR_INT64 ? r->fmt.long_size : tstor_dtype_size(dt));
  if ((uint64_t)count > tstor__io_cur_left(&r->cur) / least)
    return tstor__io_cur_short(&r->cur,
                               "a %sStorage of %lld elements, more than the %zu bytes left hold",
                               type, (long long)count, tstor__io_cur_left(&r->cur));
  char key[32];
  snprintf(key, sizeof key, "%zu", r->nobjs);
  long idx;
  if ((rc = tstor__io_record_add(r->ck, key, strlen(key), dt, count, "cpu", 3, &idx))) return rc;
  tstor_storage *host = NULL;
  rc = r->fmt.ascii ? ascii_elements(r, dt, (size_t)count, &host)
                    : binary_elements(r, dt, (size_t)count, &host);
  tstor_device dev;
  tstor__io_record *rec = &r->ck->storages[idx];
  if (!rc) rc = tstor__io_source_device(r->src, "cpu", rec->key, &dev);
  if (!rc && tstor__io_source_device_has(r->src, dev, TSTOR_DEVICE_NO_DATA))
    rc = tstor_storage_new(r->src->ctx, dev, tstor_storage_nbytes(host), &rec->s);
  else if (!rc)
    rc = tstor_storage_to(host, dev, &rec->s);
  tstor_storage_release(host);
  if (rc) return rc;
  v->kind = TSTOR_VALUE_STORAGE;
  v->u.tensor.storage = idx;
  v->u.tensor.s = rec->s;
  v->u.tensor.dtype = (int)dt;
  return 0;
}

/* torch.<T>Tensor: int ndim, long sizes and strides, long storageOffset + 1,
 * then its storage (nil for an empty tensor). */
static int read_tensor(t7_reader *r, tstor_dtype dt, const char *type, tstor_value *v) {
  int64_t ndim, offset1, sizes[TSTOR_TENSOR_MAX_DIM], strides[TSTOR_TENSOR_MAX_DIM];
  int rc = read_int(r, "a tensor's nDimension", 0, &ndim);
  if (rc) return rc;
  if (ndim > TSTOR_TENSOR_MAX_DIM)
    return MISFRAMED(r, TSTOR_EINVAL, "a %sTensor of %lld dimensions (at most %d)", type,
                     (long long)ndim, TSTOR_TENSOR_MAX_DIM);
  for (int k = 0; k < 2; k++) {
    for (int64_t i = 0; i < ndim && !rc; i++)
      rc = read_integer(r, r->fmt.long_size, 0, INT64_MAX,
                        k ? "a tensor's stride" : "a tensor's size", k ? &strides[i] : &sizes[i]);
    end_array(r, (size_t)ndim);
    if (rc) return rc;
  }
  if ((rc = read_long(r, "a tensor's storageOffset", 1, &offset1))) return rc;
  size_t at = r->cur.off;
  tstor_value *sv;
  if ((rc = read_object(r, &sv))) return rc;
  r->cur.item = at;
  tstor_dtype sdt = TSTOR_UINT8;
  tstor_storage *s = sv->kind == TSTOR_VALUE_STORAGE ? tstor_value_storage(sv, &sdt) : NULL;
  if (sv->kind != TSTOR_VALUE_NONE && (sv->kind != TSTOR_VALUE_STORAGE || sdt != dt))
    return MISFRAMED(
        r, TSTOR_EINVAL, "a %sTensor's storage is a %s, not a %sStorage or nil", type,
        sv->kind == TSTOR_VALUE_STORAGE ? tstor_dtype_name(sdt) : tstor_value_kind_name(sv->kind),
        type);
  if (!ndim) { /* Torch7's empty tensor (maybe on a storage, at an offset): shape [0] */
    ndim = 1;
    sizes[0] = 0;
    strides[0] = 1;
  }
  int64_t numel = 1;
  for (int64_t i = 0; i < ndim; i++) numel = sizes[i] ? numel : 0;
  tstor_storage *empty = NULL;
  if (!s) {
    if (numel) return MISFRAMED(r, TSTOR_EINVAL, "a %sTensor of elements without a storage", type);
    tstor_device dev;
    if ((rc = tstor__io_source_device(r->src, "cpu", "an empty tensor", &dev)) ||
        (rc = tstor_storage_new(r->src->ctx, dev, 0, &empty)))
      return rc;
    s = empty;
  }
  v->kind = TSTOR_VALUE_TENSOR;
  v->u.tensor.storage = sv->kind == TSTOR_VALUE_STORAGE ? sv->u.tensor.storage : -1;
  rc = tstor_tensor_on_storage(s, dt, offset1 - 1, (int)ndim, sizes, strides, &v->u.tensor.t);
  tstor_storage_release(empty);
  if (rc == TSTOR_ENOMEM) return rc;
  if (rc)
    return MISFRAMED(r, rc, "a %sTensor that does not fit its storage: %s", type,
                     tstor_last_error());
  return 0;
}

static bool class_name_ok(const uint8_t *s, size_t n) {
  if (!n) return false;
  for (size_t i = 0; i < n; i++) {
    uint8_t c = s[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    bool part_start = i == 0 || s[i - 1] == '.';
    if (!(alpha || (!part_start && c >= '0' && c <= '9') || (c == '.' && !part_start && i + 1 < n)))
      return false;
  }
  return true;
}

/* A torch object: "V <version>" (absent in files from before versions), the
 * class name, then the class's payload. */
/* A torch object's class: its version ("V 1") where one is written, into
 * version (else *versioned false), then its name, into cls (at most 200
 * bytes, *nlen of them), both NUL-terminated. */
static int read_class(t7_reader *r, char version[64], bool *versioned, char cls[201],
                      size_t *nlen) {
  const uint8_t *p, *name;
  size_t n;
  int rc = read_string(r, "a class's version", &p, &n);
  if (rc) return rc;
  *versioned = false;
  if (n > 2 && n < 64 + 2 && p[0] == 'V' && p[1] == ' ') {
    memcpy(version, p + 2, n - 2);
    version[n - 2] = '\0';
    char *end;
    locale_t c = tstor__io_t7_c_locale();
    if (c) (void)strtod_l(version, &end, c);
    *versioned = c && end != version && !*end;
  }
  if (*versioned) {
    if ((rc = read_string(r, "a class name", &name, nlen))) return rc;
  } else { /* the first string was the class name itself (File.lua's legacy reading) */
    name = p;
    *nlen = n;
  }
  if (!class_name_ok(name, *nlen) || *nlen > 200)
    return MISFRAMED(r, TSTOR_EINVAL, "a class name that is not one: '%.*s'",
                     (int)(*nlen > 60 ? 60 : *nlen), name);
  memcpy(cls, name, *nlen);
  cls[*nlen] = '\0';
  return 0;
}

static int read_torch(t7_reader *r, tstor_value *v) {
  char version[64], cls[201];
  bool versioned;
  size_t nlen;
  int rc = read_class(r, version, &versioned, cls, &nlen);
  if (rc) return rc;
  tstor_dtype dt;
  const char *type;
  if ((type = type_of_class(cls, nlen, "Storage", &dt))) return read_storage(r, dt, type, v);
  if ((type = type_of_class(cls, nlen, "Tensor", &dt))) return read_tensor(r, dt, type, v);
  if (strncmp(cls, "torch.", 6) == 0 || strncmp(cls, "tds.", 4) == 0)
    return FAIL(r, TSTOR_ENOTSUP,
                "class %s is refused: it writes a payload of its own (its own write "
                "function), which a reader cannot tell apart from data",
                cls);
  /* a Lua class: its fields, copied into a new table */
  size_t at = r->cur.off;
  int64_t tag;
  if ((rc = read_int(r, "a class's payload", 0, &tag))) return rc;
  r->cur.off = at;
  if (tag != T7_TABLE)
    return FAIL(r, TSTOR_ENOTSUP,
                "class %s is refused: its payload is not a table of its "
                "fields (it has a write function of its own)",
                cls);
  tstor_value *state;
  size_t before = r->nobjs;
  if ((rc = read_object(r, &state))) return rc;
  if (r->nobjs <= before || r->objs[before] != state || state->kind != TSTOR_VALUE_DICT) {
    r->cur.item = at;
    return FAIL(r, TSTOR_EINVAL, "class %s: its payload must be a new table", cls);
  }
  v->kind = TSTOR_VALUE_OBJECT;
  v->u.obj.state = state;
  v->u.obj.cls = tstor__io_strdup(cls);
  v->u.obj.version = versioned ? tstor__io_strdup(version) : NULL;
  if (!v->u.obj.cls || (versioned && !v->u.obj.version))
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for a class name");
  return 0;
}

/* A table, torch object or function: a reference to one read before, or a
 * new one with the next index. */
static int read_indexed(t7_reader *r, int64_t tag, tstor_value **out) {
  int64_t idx;
  size_t at = r->cur.off;
  int rc = read_int(r, "a reference index", 1, &idx);
  if (rc) return rc;
  r->cur.item = at;
  if ((uint64_t)idx <= r->nobjs) {
    tstor_value *v = r->objs[idx - 1];
    if (r->busy[idx - 1])
      return FAIL(r, TSTOR_EINVAL,
                  "object %lld refers to itself while it is read: a table or object that "
                  "contains itself is refused",
                  (long long)idx);
    bool is_table = v->kind == TSTOR_VALUE_DICT;
    if ((tag == T7_TABLE) != is_table)
      return MISFRAMED(r, TSTOR_EINVAL, "reference %lld: a %s tag for a %s", (long long)idx,
                       tag == T7_TABLE ? "table" : "torch object", tstor_value_kind_name(v->kind));
    *out = v;
    return 0;
  }
  if ((uint64_t)idx != r->nobjs + 1)
    return FAIL(r, TSTOR_EINVAL,
                "reference index %lld: %zu objects so far, and a new one takes the next index",
                (long long)idx, r->nobjs);
  if (tag == T7_LEGACY_RECUR_FUNCTION || tag == T7_RECUR_FUNCTION)
    return FAIL(r, TSTOR_EACCES,
                "a Lua function (LuaJIT bytecode) is refused: nothing a file holds is run");
  tstor_value **objs =
      tstor__io_grow(r->objs, &r->capobjs, r->nobjs, sizeof *objs, 64, "out of memory for objects");
  if (!objs) return TSTOR_ENOMEM;
  r->objs = objs;
  unsigned char *busy = tstor__io_realloc(r->busy, r->capobjs);
  if (!busy) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for objects");
  r->busy = busy;
  /* its kind is known once read: a dict until then (a table's is final) */
  tstor_value *v = tstor__io_value_alloc(r->ck, TSTOR_VALUE_DICT);
  if (!v) return TSTOR_ENOMEM;
  size_t me = r->nobjs++;
  r->objs[me] = v;
  r->busy[me] = 1;
  rc = tag == T7_TABLE ? read_table(r, v) : read_torch(r, v);
  r->busy[me] = 0;
  *out = v;
  return rc;
}

static int read_object(t7_reader *r, tstor_value **out) {
  size_t at = r->cur.off;
  int64_t tag;
  int rc = read_int(r, "a type tag", INT32_MIN, &tag);
  if (rc) return rc;
  r->cur.item = at;
  if (++r->depth > TSTOR_CHECKPOINT_MAX_DEPTH)
    return FAIL(r, TSTOR_EINVAL, "objects nest deeper than %d levels", TSTOR_CHECKPOINT_MAX_DEPTH);
  double d;
  int64_t b;
  switch (tag) {
    case T7_NIL: *out = r->none; break;
    case T7_NUMBER:
      if (!(rc = read_double(r, "a number", &d))) rc = number_value(r, d, out);
      break;
    case T7_STRING: rc = string_value(r, out); break;
    case T7_BOOLEAN:
      if ((rc = read_int(r, "a boolean", INT32_MIN, &b))) break;
      if (b != 0 && b != 1) {
        rc = MISFRAMED(r, TSTOR_EINVAL, "a boolean of %lld (Torch7 writes 0 or 1)", (long long)b);
        break;
      }
      if (!(*out = tstor__io_value_alloc(r->ck, TSTOR_VALUE_BOOL)))
        rc = TSTOR_ENOMEM;
      else
        (*out)->u.i = b;
      break;
    case T7_FUNCTION:
      rc = FAIL(r, TSTOR_EACCES,
                "a Lua function (LuaJIT bytecode) is refused: nothing a file holds is run");
      break;
    case T7_TABLE:
    case T7_TORCH:
    case T7_LEGACY_RECUR_FUNCTION:
    case T7_RECUR_FUNCTION: rc = read_indexed(r, tag, out); break;
    default: rc = MISFRAMED(r, TSTOR_EINVAL, "unknown type tag %lld", (long long)tag);
  }
  r->depth--;
  return rc;
}

/* One reading of the whole input in format fmt; on failure *misframed says
 * whether the bytes' framing failed (evidence against the long size), and
 * *reached how far the reading got. */
static int read_as(tstor__io_source *src, const uint8_t *bytes, size_t len, bool views,
                   tstor__io_t7_format fmt, tstor_checkpoint **out, bool *misframed,
                   size_t *reached) {
  t7_reader r;
  memset(&r, 0, sizeof r);
  r.src = src;
  r.fmt = fmt;
  r.views = views;
  r.cur = tstor__io_cursor_over(bytes, len, "Torch7 file");
  int rc = tstor_checkpoint_new(&r.ck);
  if (!rc && !(r.none = tstor__io_value_alloc(r.ck, TSTOR_VALUE_NONE))) rc = TSTOR_ENOMEM;
  if (!rc) rc = read_object(&r, &r.ck->root);
  if (!rc && fmt.ascii)
    while (tstor__io_cur_can_read(&r.cur, 1) && is_space(r.cur.data[r.cur.off])) r.cur.off++;
  if (!rc && !tstor__io_cur_at_end(&r.cur)) {
    r.cur.item = r.cur.off;
    rc = MISFRAMED(&r, TSTOR_EINVAL, "%zu bytes after the object (a Torch7 file holds one)",
                   tstor__io_cur_left(&r.cur));
  }
  if (!rc) rc = tstor__io_tree_check(r.ck->root);
  *misframed = r.misframed || r.cur.ran_out;
  *reached = r.cur.off;
  tstor__io_free(r.objs);
  tstor__io_free(r.busy);
  if (rc) {
    tstor_checkpoint_free(r.ck);
    return rc;
  }
  *out = r.ck;
  return 0;
}

static int t7_load(tstor__io_source *src, const uint8_t *bytes, size_t len, bool views,
                   tstor_checkpoint **out) {
  if (!len) return TSTOR__ERR(TSTOR_EINVAL, "Torch7 file: empty");
  tstor__io_t7_format fmt = {bytes[0] >= '0' && bytes[0] <= '9', false, 8};
  if (!fmt.ascii) {
    if (len < 4)
      return TSTOR__ERR(TSTOR_EINVAL, "Torch7 file: %zu bytes, too short for a type tag", len);
    fmt.big_endian = bytes[0] == 0 && bytes[3] <= T7_RECUR_FUNCTION;
  }
  bool misframed8, misframed4;
  size_t reached8 = 0, reached4 = 0;
  int rc = read_as(src, bytes, len, views, fmt, out, &misframed8, &reached8);
  /* a reading that ran out of a resource (memory, a device, the file's
   * reads) says nothing of the framing either */
  bool resource = rc == TSTOR_ENOMEM || rc == TSTOR_ENODEV || rc == TSTOR_EIO ||
                  rc == TSTOR_EBACKEND || rc == TSTOR_EMFILE || rc == TSTOR_ENOSPC;
  if (!rc || fmt.ascii || !misframed8 || resource) return rc;
  char first[900];
  snprintf(first, sizeof first, "%s", tstor_last_error());
  fmt.long_size = 4; /* a file from a system whose long is 4 bytes (torch.load's 'b32') */
  int rc4 = read_as(src, bytes, len, views, fmt, out, &misframed4, &reached4);
  if (!rc4) return 0;
  /* neither reading holds: the one that got further says why */
  if (!misframed4 || reached4 > reached8) return rc4;
  return TSTOR__ERR(rc, "%s", first);
}

/* The whole of a file read with pread, into memory of its own: the parse
 * needs the bytes at hand (objects and storages lie interleaved), and a
 * mapping would kill the process with SIGBUS if the file shrank under it. */
static int t7_load_read(tstor__io_source *src, tstor_checkpoint **out) {
  if (!src->size) return TSTOR__ERR(TSTOR_EINVAL, "Torch7 file: empty");
  if (src->size > SIZE_MAX)
    return TSTOR__ERR(TSTOR_EOVERFLOW, "a Torch7 file of %llu bytes",
                      (unsigned long long)src->size);
  uint8_t *bytes = tstor__io_malloc((size_t)src->size);
  if (!bytes)
    return TSTOR__ERR(TSTOR_ENOMEM, "Torch7 file: out of memory for its %llu bytes",
                      (unsigned long long)src->size);
  int rc = tstor__io_source_read(src, bytes, (size_t)src->size, 0, "the Torch7 file");
  if (!rc) { /* the storages are copied out of the bytes read, not read again */
    int fd = src->fd;
    src->fd = -1;
    src->bytes = bytes;
    rc = t7_load(src, bytes, (size_t)src->size, false, out);
    src->bytes = NULL;
    src->fd = fd;
  }
  tstor__io_free(bytes);
  return rc;
}

int tstor__io_torch7_load_source(tstor__io_source *src, const char *name, tstor_checkpoint **out) {
  (void)name; /* the messages say "Torch7 file" and where */
  if (src->bytes) return t7_load(src, src->bytes, (size_t)src->size, src->whole != NULL, out);
  return t7_load_read(src, out);
}

int tstor_torch7_load(tstor_context *ctx, const char *path, const tstor_load_options *opts,
                      tstor_checkpoint **out) {
  return tstor__io_load_path(ctx, path, opts, out, "tstor_torch7_load", "a Torch7 file",
                             tstor__io_torch7_load_source);
}

int tstor_torch7_load_buffer(tstor_context *ctx, const void *data, size_t size,
                             const tstor_load_options *opts, tstor_checkpoint **out) {
  return tstor__io_load_buffer(ctx, data, size, opts, out, "tstor_torch7_load_buffer",
                               tstor__io_torch7_load_source);
}
