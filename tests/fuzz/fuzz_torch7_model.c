/* libFuzzer target, structure-aware, for the Torch7 reader: the input is a
 * model of a .t7 file (its mode, byte order and long size, then a tree of
 * nils, numbers, strings, booleans, tables, storages, tensors over new or
 * shared storages, class objects and references to earlier objects) and the
 * choice of one field to break. The harness writes the file the model
 * describes as Torch7's File.lua would, noting where each integer field lies;
 * so every input reaches the reader's rules with a valid structure, then one
 * field (a tag, an index, a count, a length, a size, a stride, an offset) is
 * set to an extreme value, or the file is cut there. It loads every way
 * (ckpt_walk.h) and checks the outcome: an intact file must load, with as
 * many tensors as the model has; a broken one must load or be refused,
 * never crash, leak or overrun. Seeds: tests/fuzz/corpus-torch7_model. */
#include "ckpt_walk.h"

#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

typedef struct model_reader {
  const uint8_t *p;
  size_t n, at;
} model_reader;

static unsigned next(model_reader *r) { return r->at < r->n ? r->p[r->at++] : 0; }

/* An integer field of the file: where its text or bytes lie. */
typedef struct field {
  size_t at, len;
} field;

typedef struct writer {
  uint8_t *b;
  size_t len, cap;
  int ascii, big, long_size;
  field fields[512];
  int nfields;
  int next_index; /* Torch7's reference counter */
  int ntensors;
  struct {
    int index, type, count;
  } storages[16];
  int nstorages, tables[16], ntables;
} writer;

static void bytes(writer *w, const void *p, size_t n) {
  if (w->len + n > w->cap) {
    w->cap = (w->len + n) * 2 + 256;
    if (!(w->b = realloc(w->b, w->cap))) abort();
  }
  memcpy(w->b + w->len, p, n);
  w->len += n;
}

static void note(writer *w, size_t at) {
  if (w->nfields < 512) w->fields[w->nfields++] = (field){at, w->len - at};
}

/* An int (4 bytes) or long (long_size) field, one element of an array. */
static void integer(writer *w, int64_t v, int width, int last) {
  size_t at = w->len;
  if (w->ascii) {
    char t[32];
    int k = snprintf(t, sizeof t, "%" PRId64 "%s", v, last ? "\n" : " ");
    bytes(w, t, (size_t)k);
    note(w, at);
    w->fields[w->nfields - 1].len--; /* the number, not its separator */
    return;
  }
  uint8_t b[8];
  for (int i = 0; i < width; i++) b[w->big ? width - 1 - i : i] = (uint8_t)((uint64_t)v >> (8 * i));
  bytes(w, b, (size_t)width);
  note(w, at);
}

static void int1(writer *w, int64_t v) { integer(w, v, 4, 1); }
static void long1(writer *w, int64_t v) { integer(w, v, w->long_size, 1); }

static void number(writer *w, double d) {
  if (w->ascii) {
    char t[40];
    int k = snprintf(t, sizeof t, "%.17g\n", d);
    bytes(w, t, (size_t)k);
    return;
  }
  uint64_t u;
  memcpy(&u, &d, 8);
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[w->big ? 7 - i : i] = (uint8_t)(u >> (8 * i));
  bytes(w, b, 8);
}

static void string(writer *w, const char *s, size_t n) {
  int1(w, (int64_t)n);
  bytes(w, s, n);
  if (w->ascii && n) bytes(w, "\n", 1);
}

static const char *const types[] = {"Byte", "Char", "Short", "Int", "Long", "Float", "Double", "Half"};
static const int sizes_of[] = {1, 1, 2, 4, 8, 4, 8, 2};

static void klass(writer *w, const char *name) {
  string(w, "V 1", 3);
  string(w, name, strlen(name));
}

/* A new storage of `count` elements of type t; returns its index. */
static int storage(writer *w, model_reader *r, int t, int count) {
  int1(w, 4);
  int idx = ++w->next_index;
  int1(w, idx);
  char cls[40];
  snprintf(cls, sizeof cls, "torch.%sStorage", types[t]);
  klass(w, cls);
  long1(w, count);
  for (int i = 0; i < count; i++) {
    int v = (int)next(r) - 100;
    if (t == 0 || t == 1) {
      uint8_t c = (uint8_t)v;
      bytes(w, &c, 1);
    } else if (t == 4) {
      integer(w, v, w->ascii ? 8 : w->long_size, i == count - 1);
    } else if (w->ascii) {
      char s[40];
      const char *sep = i == count - 1 ? "\n" : " ";
      int k = t >= 5 ? snprintf(s, sizeof s, "%.9g%s", v / 4.0, sep) : snprintf(s, sizeof s, "%d%s", v, sep);
      bytes(w, s, (size_t)k);
    } else {
      uint8_t b[8];
      uint64_t u;
      if (t == 2) u = (uint16_t)v;
      else if (t == 3) u = (uint32_t)v;
      else if (t == 5) {
        float f = (float)v / 4.0f;
        uint32_t x;
        memcpy(&x, &f, 4);
        u = x;
      } else if (t == 6) {
        double d = v / 4.0;
        memcpy(&u, &d, 8);
      } else {
        u = 0x3c00; /* 1.0 as a half */
      }
      int es = sizes_of[t];
      for (int i2 = 0; i2 < es; i2++) b[w->big ? es - 1 - i2 : i2] = (uint8_t)(u >> (8 * i2));
      bytes(w, b, (size_t)es);
    }
  }
  if (w->ascii && (t == 0 || t == 1) && count) bytes(w, "\n", 1);
  if (w->nstorages < 16) {
    w->storages[w->nstorages].index = idx;
    w->storages[w->nstorages].count = count;
    w->storages[w->nstorages++].type = t;
  }
  return idx;
}

static void value(writer *w, model_reader *r, int depth, int nil_ok);

static void tensor(writer *w, model_reader *r) {
  int t = (int)(next(r) % 8);
  int1(w, 4);
  int1(w, ++w->next_index);
  char cls[40];
  snprintf(cls, sizeof cls, "torch.%sTensor", types[t]);
  klass(w, cls);
  int nd = 1 + (int)(next(r) % 3);
  int64_t sz[3], st[3], n = 1;
  for (int d = 0; d < nd; d++) n *= (sz[d] = 1 + (int64_t)(next(r) % 3));
  int64_t stride = 1;
  for (int d = nd - 1; d >= 0; d--) {
    st[d] = stride;
    stride *= sz[d];
  }
  if (nd >= 2 && next(r) % 2) { /* transposed */
    int64_t a = sz[0];
    sz[0] = sz[1];
    sz[1] = a;
    a = st[0];
    st[0] = st[1];
    st[1] = a;
  }
  int64_t offset = next(r) % 3;
  int1(w, nd);
  for (int d = 0; d < nd; d++) integer(w, sz[d], w->long_size, d == nd - 1);
  for (int d = 0; d < nd; d++) integer(w, st[d], w->long_size, d == nd - 1);
  long1(w, offset + 1);
  /* an earlier storage of the same type and room enough, or a new one */
  int64_t last = offset;
  for (int d = 0; d < nd; d++) last += (sz[d] - 1) * st[d];
  for (int i = 0; i < w->nstorages && next(r) % 2; i++)
    if (w->storages[i].type == t && w->storages[i].count > last) {
      int1(w, 4);
      int1(w, w->storages[i].index);
      w->ntensors++;
      return;
    }
  storage(w, r, t, (int)(n + offset));
  w->ntensors++;
}

static void table(writer *w, model_reader *r, int depth) {
  int1(w, 3);
  int idx = ++w->next_index;
  int1(w, idx);
  int n = (int)(next(r) % 4);
  int1(w, n);
  for (int i = 0; i < n; i++) {
    int1(w, 1); /* keys: distinct numbers */
    number(w, i + 1);
    value(w, r, depth + 1, 0); /* a Lua table holds no nil */
  }
  /* referred to only once read: a table that contains itself is refused */
  if (w->ntables < 16) w->tables[w->ntables++] = idx;
}

static void value(writer *w, model_reader *r, int depth, int nil_ok) {
  unsigned k = next(r) % (depth > 3 ? 5 : 10);
  char s[16];
  if (!nil_ok && (k == 0 || (k == 4 && !w->ntables))) k = 1;
  switch (k) {
    case 0: int1(w, 0); break;
    case 1:
      int1(w, 1);
      number(w, (double)(int)next(r) - 7.5);
      break;
    case 2: {
      int1(w, 2);
      int n = (int)(next(r) % 8);
      for (int i = 0; i < n; i++) s[i] = (char)next(r);
      string(w, s, (size_t)n);
      break;
    }
    case 3:
      int1(w, 5);
      int1(w, next(r) % 2);
      break;
    case 4: /* a reference to an earlier table, or nil */
      if (w->ntables) {
        int1(w, 3);
        int1(w, w->tables[next(r) % (unsigned)w->ntables]);
      } else {
        int1(w, 0);
      }
      break;
    case 5:
    case 6: table(w, r, depth); break;
    case 7: tensor(w, r); break;
    case 8: storage(w, r, (int)(next(r) % 8), (int)(next(r) % 4)); break;
    default:
      int1(w, 4);
      int1(w, ++w->next_index);
      klass(w, "nn.Module");
      table(w, r, depth);
  }
}

/* Distinct tensors in the tree (a table met twice holds the same ones). */
static int count_tensors(const tstor_value *v, const tstor_tensor **seen, int n) {
  if (tstor_value_kind_of(v) == TSTOR_VALUE_TENSOR) {
    for (int i = 0; i < n; i++)
      if (seen[i] == tstor_value_tensor(v)) return n;
    if (n == 512) abort();
    seen[n] = tstor_value_tensor(v);
    return n + 1;
  }
  if (tstor_value_kind_of(v) == TSTOR_VALUE_OBJECT) return count_tensors(tstor_value_object_state(v), seen, n);
  for (size_t i = 0; i < tstor_value_len(v); i++) n = count_tensors(tstor_value_item(v, i), seen, n);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  model_reader r = {data, size, 0};
  writer w;
  memset(&w, 0, sizeof w);
  unsigned fmt = next(&r) % 5;
  w.ascii = fmt == 4;
  w.big = fmt == 1 || fmt == 3;
  w.long_size = fmt >= 2 && fmt <= 3 ? 4 : 8;
  unsigned brk = next(&r), which = next(&r);
  value(&w, &r, 0, 1);
  int intact = brk % 4 == 0 || !w.nfields;
  if (!intact) {
    /* one integer field set to an extreme value, or the file cut in it */
    static const int64_t extreme[] = {-1, 0, 1, 2, 3, 4, 9, 64, 65, INT32_MAX, INT32_MIN, INT64_MAX,
                                      (int64_t)1 << 32, 1000000};
    field f = w.fields[which % (unsigned)w.nfields];
    if (brk % 4 == 1) {
      w.len = f.at + (f.len ? next(&r) % f.len : 0);
    } else {
      int64_t v = extreme[next(&r) % (sizeof extreme / sizeof extreme[0])];
      writer tail = w;
      size_t after = f.at + f.len, rest = w.len - after;
      uint8_t *saved = malloc(rest ? rest : 1);
      if (!saved) abort();
      memcpy(saved, w.b + after, rest);
      tail.len = f.at;
      tail.nfields = 0;
      if (w.ascii) {
        char t[32];
        int k = snprintf(t, sizeof t, "%" PRId64, v);
        bytes(&tail, t, (size_t)k);
      } else {
        integer(&tail, v, (int)f.len, 1);
      }
      bytes(&tail, saved, rest);
      free(saved);
      w.b = tail.b;
      w.len = tail.len;
      w.cap = tail.cap;
    }
  }
  if (!ctx && tstor_context_open(NULL, &ctx) != 0) abort();
  tstor_checkpoint *ck = NULL;
  int rc = tstor_torch7_load_buffer(ctx, w.b, w.len, NULL, &ck);
  /* Bytes written with 4-byte longs can also frame as a file of 8-byte longs,
   * the reading tried first (Torch7's own on a 64-bit system), up to what
   * tstor refuses by policy: a table that contains itself, a Lua function, a
   * class with a payload of its own, a reference index out of turn, nesting
   * past the limit. Such a refusal is no evidence against the framing, so the
   * file is refused as Torch7 would read it, not retried (torch7_load.c,
   * t7_load). The model writes none of these, so under its own framing none
   * can occur. */
  static const char *const policy[] = {"refers to itself", "a Lua function", "class ",
                                       "a new one takes the next index", "nest deeper than"};
  bool other_reading = false;
  for (size_t i = 0; rc && w.long_size == 4 && i < sizeof policy / sizeof policy[0]; i++)
    other_reading = other_reading || strstr(tstor_last_error(), policy[i]) != NULL;
  if (intact && !other_reading) {
    if (rc) {
      fprintf(stderr, "fuzz: an intact file refused: %s\n", tstor_last_error());
      abort();
    }
    /* as many tensors as the model wrote */
    const tstor_tensor *seen[512];
    int tensors = count_tensors(tstor_checkpoint_root(ck), seen, 0);
    if (tensors != w.ntensors) {
      fprintf(stderr, "fuzz: %d tensors read, %d written\n", tensors, w.ntensors);
      abort();
    }
    tstor_checkpoint_free(ck);
  } else if (!rc) {
    tstor_checkpoint_free(ck);
  }
  load_every_way(tstor_torch7_load_buffer, tstor_torch7_load, w.b, w.len);
  free(w.b);
  return 0;
}
