/* Torch7's writer (torch7.h): the whole file is built in memory (writebuf.h),
 * objects written once and referred to by index after, then written out. */
#include "io_internal.h"
#include "torch7.h"

#include <string.h>

typedef struct t7_writer {
  tstor__io_wbuf out;
  tstor__io_t7_format fmt;
  tstor__io_idmap refs; /* objects written (values, tensors, storages) -> their index */
  uint32_t next;        /* the index the next new object takes */
} t7_writer;

/* printf in the C locale, whatever the program's. */
static void put_number_text(t7_writer *w, const char *fmt, double d) {
  locale_t c = tstor__io_t7_c_locale();
  if (!c) {
    tstor__io_wbuf_fail(&w->out, TSTOR_ENOMEM, "no C locale to write numbers in");
    return;
  }
  locale_t old = uselocale(c);
  tstor__io_wbuf_printf(&w->out, fmt, d);
  uselocale(old);
}

static void put_int(t7_writer *w, int64_t v) {
  if (w->fmt.ascii)
    tstor__io_wbuf_printf(&w->out, "%lld\n", (long long)v);
  else
    tstor__io_wbuf_uint(&w->out, (uint64_t)v, 4, w->fmt.big_endian);
}

/* A long element of an array (its separator the caller's in ascii). */
static void put_long_elem(t7_writer *w, int64_t v) {
  if (w->fmt.long_size == 4 && (v < INT32_MIN || v > INT32_MAX)) {
    tstor__io_wbuf_fail(&w->out, TSTOR_ERANGE, "%lld does not fit the 4-byte longs asked for",
                        (long long)v);
    return;
  }
  if (w->fmt.ascii)
    tstor__io_wbuf_printf(&w->out, "%lld", (long long)v);
  else
    tstor__io_wbuf_uint(&w->out, (uint64_t)v, w->fmt.long_size, w->fmt.big_endian);
}

/* n longs as one array write: in ascii, space-separated with one '\n'
 * after, nothing at all for none. */
static void put_longs(t7_writer *w, const int64_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (w->fmt.ascii && i) tstor__io_wbuf_byte(&w->out, ' ');
    put_long_elem(w, v[i]);
  }
  if (w->fmt.ascii && n) tstor__io_wbuf_byte(&w->out, '\n');
}

static void put_double(t7_writer *w, double d) {
  if (w->fmt.ascii) {
    put_number_text(w, "%.17g\n", d);
    return;
  }
  uint64_t u;
  memcpy(&u, &d, 8);
  tstor__io_wbuf_uint(&w->out, u, 8, w->fmt.big_endian);
}

static void put_raw(t7_writer *w, const void *p, size_t n) {
  tstor__io_wbuf_append(&w->out, p, n);
  if (w->fmt.ascii && n) tstor__io_wbuf_byte(&w->out, '\n');
}

static void put_string(t7_writer *w, const char *s, size_t n) {
  if (n > INT32_MAX) {
    tstor__io_wbuf_fail(&w->out, TSTOR_EOVERFLOW,
                        "a string of %zu bytes (Torch7's lengths are ints)", n);
    return;
  }
  put_int(w, (int64_t)n);
  put_raw(w, s, n);
}

/* The tag and index of an indexed object: true when it was written before
 * (a reference, which ends it here). */
static bool put_indexed(t7_writer *w, int tag, const void *id) {
  uint32_t idx;
  put_int(w, tag);
  if (tstor__io_idmap_get(&w->refs, id, &idx)) {
    put_int(w, idx);
    return true;
  }
  int rc = tstor__io_idmap_put(&w->refs, id, w->next);
  if (rc) tstor__io_wbuf_fail(&w->out, rc, "Torch7 writer: out of memory");
  put_int(w, w->next++);
  return false;
}

static const char *t7_type_of(tstor_dtype dt) {
  for (size_t i = 0; i < T7_NTYPES; i++)
    if (tstor__io_t7_types[i].dtype == dt) return tstor__io_t7_types[i].name;
  return NULL;
}

static void put_class(t7_writer *w, const char *version, const char *cls) {
  if (version) {
    char v[80];
    snprintf(v, sizeof v, "V %s", version);
    put_string(w, v, strlen(v));
  }
  put_string(w, cls, strlen(cls));
}

/* One element of an ascii storage, printed as THDiskFile prints its type. */
static void put_ascii_elem(t7_writer *w, tstor_dtype dt, const uint8_t *p) {
  double d;
  int64_t i;
  switch (dt) {
    case TSTOR_FLOAT32:
    case TSTOR_FLOAT16:
      tstor_dtype_convert(&d, TSTOR_FLOAT64, p, dt, 1);
      put_number_text(w, "%.9g", d);
      break;
    case TSTOR_FLOAT64:
      memcpy(&d, p, 8);
      put_number_text(w, "%.17g", d);
      break;
    default:
      tstor_dtype_convert(&i, TSTOR_INT64, p, dt, 1);
      tstor__io_wbuf_printf(&w->out, "%lld", (long long)i);
  }
}

static int put_storage(t7_writer *w, tstor_storage *s, tstor_dtype dt) {
  const char *type = t7_type_of(dt);
  if (!type)
    return TSTOR__ERR(TSTOR_ENOTSUP, "a %s storage: Torch7 has no type for it",
                      tstor_dtype_name(dt));
  if (tstor_storage_flags(s) & TSTOR_FLAG_NO_DATA)
    return TSTOR__ERR(TSTOR_ENODATA,
                      "a storage with no data (on the meta device) cannot be written");
  if (put_indexed(w, T7_TORCH, s)) return 0;
  char cls[40];
  snprintf(cls, sizeof cls, "torch.%sStorage", type);
  put_class(w, "1", cls);
  size_t es = tstor_dtype_size(dt), n = tstor_storage_nbytes(s) / es;
  put_long_elem(w, (int64_t)n);
  if (w->fmt.ascii) tstor__io_wbuf_byte(&w->out, '\n');
  tstor_storage *copy = NULL;
  const void *data = NULL;
  int rc = n ? tstor__io_host_bytes(s, &copy, &data) : 0;
  if (rc) return rc;
  const uint8_t *p = data;
  if (w->fmt.ascii && es == 1) {
    put_raw(w, p, n);
  } else if (w->fmt.ascii) {
    for (size_t i = 0; i < n; i++) {
      if (i) tstor__io_wbuf_byte(&w->out, ' ');
      put_ascii_elem(w, dt, p + i * es);
    }
    if (n) tstor__io_wbuf_byte(&w->out, '\n');
  } else if (dt == TSTOR_INT64) {
    for (size_t i = 0; i < n; i++) {
      int64_t v;
      memcpy(&v, p + 8 * i, 8);
      put_long_elem(w, v);
    }
  } else if (!w->fmt.big_endian || es == 1) {
    tstor__io_wbuf_append(&w->out, p, n * es);
  } else {
    for (size_t i = 0; i < n; i++) {
      uint64_t u = 0;
      for (size_t b = 0; b < es; b++) u |= (uint64_t)p[i * es + b] << (8 * b);
      tstor__io_wbuf_uint(&w->out, u, es, true);
    }
  }
  tstor_storage_release(copy);
  return 0;
}

/* torch.<T>Tensor. Torch7 has no 0-dim tensor and no empty one with a
 * shape: a scalar is written as one element of one dimension, an empty
 * tensor as Torch7's own (nDimension 0; no storage unless its storage holds
 * bytes). */
static int put_tensor(t7_writer *w, const tstor_tensor *t) {
  tstor_dtype dt = tstor_tensor_dtype(t);
  const char *type = t7_type_of(dt);
  if (!type)
    return TSTOR__ERR(TSTOR_ENOTSUP, "a %s tensor: Torch7 has no type for it",
                      tstor_dtype_name(dt));
  if (put_indexed(w, T7_TORCH, t)) return 0;
  char cls[40];
  snprintf(cls, sizeof cls, "torch.%sTensor", type);
  put_class(w, "1", cls);
  int nd = tstor_tensor_dim(t);
  const int64_t one = 1;
  if (tstor_tensor_numel(t) == 0) { /* nDimension 0, on its storage where that holds anything */
    tstor_storage *s = tstor_tensor_storage(t);
    int64_t offset1 = tstor_storage_nbytes(s) ? tstor_tensor_storage_offset(t) + 1 : 1;
    put_int(w, 0);
    put_longs(w, NULL, 0);
    put_longs(w, NULL, 0);
    put_longs(w, &offset1, 1);
    if (!tstor_storage_nbytes(s)) {
      put_int(w, T7_NIL);
      return 0;
    }
    return put_storage(w, s, dt);
  }
  put_int(w, nd ? nd : 1);
  put_longs(w, nd ? tstor_tensor_sizes(t) : &one, nd ? (size_t)nd : 1);
  put_longs(w, nd ? tstor_tensor_strides(t) : &one, nd ? (size_t)nd : 1);
  int64_t offset1 = tstor_tensor_storage_offset(t) + 1;
  put_longs(w, &offset1, 1);
  return put_storage(w, tstor_tensor_storage(t), dt);
}

static int put_value(t7_writer *w, const tstor_value *v);

/* A Lua table holds no nil: an entry whose value is None is left out, as
 * `t.foreach = nil` leaves Lua's table without the key (an optimizer's
 * state_dict holds several), and an item of a list keeps its index. A None
 * key has no Lua form. */
static int put_table(t7_writer *w, const tstor_value *v) {
  size_t n = 0;
  for (size_t i = 0; i < v->u.seq.n; i++) {
    if (v->kind == TSTOR_VALUE_DICT && v->u.seq.keys[i]->kind == TSTOR_VALUE_NONE)
      return TSTOR__ERR(TSTOR_ENOTSUP, "a dict key that is None: Lua's tables have no nil key");
    n += v->u.seq.items[i]->kind != TSTOR_VALUE_NONE;
  }
  if (put_indexed(w, T7_TABLE, v)) return 0;
  if (n > INT32_MAX) return TSTOR__ERR(TSTOR_EOVERFLOW, "a table of %zu entries", n);
  put_int(w, (int64_t)n);
  int rc = 0;
  for (size_t i = 0; i < v->u.seq.n && !rc; i++) {
    if (v->u.seq.items[i]->kind == TSTOR_VALUE_NONE) continue;
    if (v->kind == TSTOR_VALUE_DICT) {
      rc = put_value(w, v->u.seq.keys[i]);
    } else { /* a list or tuple is Lua's array: keys 1 to n */
      put_int(w, T7_NUMBER);
      put_double(w, (double)(i + 1));
    }
    if (!rc) rc = put_value(w, v->u.seq.items[i]);
  }
  return rc;
}

static int put_value(t7_writer *w, const tstor_value *v) {
  switch (v->kind) {
    case TSTOR_VALUE_NONE: put_int(w, T7_NIL); return 0;
    case TSTOR_VALUE_BOOL:
      put_int(w, T7_BOOLEAN);
      put_int(w, v->u.i != 0);
      return 0;
    case TSTOR_VALUE_INT:
      if (v->u.i < -(int64_t)T7_EXACT_INT || v->u.i > (int64_t)T7_EXACT_INT)
        return TSTOR__ERR(TSTOR_ERANGE,
                          "the int %lld: a Lua number (a double) cannot hold it exactly",
                          (long long)v->u.i);
      put_int(w, T7_NUMBER);
      put_double(w, (double)v->u.i);
      return 0;
    case TSTOR_VALUE_FLOAT:
      put_int(w, T7_NUMBER);
      put_double(w, v->u.f);
      return 0;
    case TSTOR_VALUE_STRING:
    case TSTOR_VALUE_BYTES:
      put_int(w, T7_STRING);
      put_string(w, v->u.str.s, v->u.str.len);
      return 0;
    case TSTOR_VALUE_TUPLE:
    case TSTOR_VALUE_LIST:
    case TSTOR_VALUE_DICT: return put_table(w, v);
    case TSTOR_VALUE_TENSOR: return put_tensor(w, v->u.tensor.t);
    case TSTOR_VALUE_STORAGE: return put_storage(w, v->u.tensor.s, (tstor_dtype)v->u.tensor.dtype);
    case TSTOR_VALUE_OBJECT:
      if (put_indexed(w, T7_TORCH, v)) return 0;
      put_class(w, v->u.obj.version, v->u.obj.cls);
      return put_table(w, v->u.obj.state);
    default: return TSTOR__ERR(TSTOR_EINVAL, "a value of unknown kind %d", v->kind);
  }
}

/* The whole file, in w's buffer, before anything is written. */
static int plan(const tstor_checkpoint *ck, unsigned flags, t7_writer *w) {
  memset(w, 0, sizeof *w);
  w->out.what = "Torch7 file";
  if (!ck || !ck->root)
    return TSTOR__ERR(TSTOR_EINVAL, "Torch7 save: %s",
                      ck ? "the checkpoint has no root value" : "NULL argument");
  const unsigned known =
      TSTOR_SAVE_TORCH7_ASCII | TSTOR_SAVE_TORCH7_BIG_ENDIAN | TSTOR_SAVE_TORCH7_LONG4;
  if (flags & ~known)
    return TSTOR__ERR(TSTOR_EINVAL, "Torch7 save: unknown flags 0x%x", flags & ~known);
  if ((flags & TSTOR_SAVE_TORCH7_ASCII) &&
      (flags & (TSTOR_SAVE_TORCH7_BIG_ENDIAN | TSTOR_SAVE_TORCH7_LONG4)))
    return TSTOR__ERR(TSTOR_EINVAL, "Torch7 save: byte order and long size are binary mode's");
  int rc = tstor__io_tree_check(ck->root);
  if (rc) return rc;
  w->fmt.ascii = flags & TSTOR_SAVE_TORCH7_ASCII;
  w->fmt.big_endian = flags & TSTOR_SAVE_TORCH7_BIG_ENDIAN;
  w->fmt.long_size = flags & TSTOR_SAVE_TORCH7_LONG4 ? 4 : 8;
  w->next = 1;
  rc = put_value(w, ck->root);
  return rc ? rc : tstor__io_wbuf_error(&w->out);
}

static void plan_free(t7_writer *w) {
  tstor__io_wbuf_free(&w->out);
  tstor__io_idmap_free(&w->refs);
}

static int write_plan(const void *arg, FILE *f) {
  const t7_writer *w = arg;
  tstor__io_fwriter out = TSTOR__FWRITER_INIT(f, "the Torch7 file");
  tstor__io_fw_append(&out, w->out.data, w->out.len);
  return tstor__io_fw_finish(&out);
}

int tstor__io_torch7_save_stream(const tstor_checkpoint *ck, FILE *f, unsigned flags) {
  t7_writer w;
  int rc = plan(ck, flags, &w);
  if (!rc) rc = f ? write_plan(&w, f) : TSTOR__ERR(TSTOR_EINVAL, "Torch7 save: NULL stream");
  plan_free(&w);
  return rc;
}

int tstor_torch7_save(const tstor_checkpoint *ck, const char *path,
                      const tstor_save_options *opts) {
  if (!ck || !path) return TSTOR__ERR(TSTOR_EINVAL, "tstor_torch7_save: NULL argument");
  unsigned flags;
  int rc = tstor__io_save_flags(opts, &flags);
  if (rc) return rc;
  t7_writer w;
  rc = plan(ck, flags, &w);
  if (!rc) rc = tstor__io_save_atomically(path, write_plan, &w);
  plan_free(&w);
  return rc;
}
