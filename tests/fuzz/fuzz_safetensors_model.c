/* libFuzzer target, structure-aware: the input is not a file but a model of
 * one (tensors with a dtype, a shape, a name, and how the header is laid
 * out) and the choice of one field to break. The harness writes the file the
 * model describes, so every input reaches the reader's rules with a valid
 * structure, breaks that one field (or none), loads it every way
 * (ckpt_walk.h) and checks the outcome, not only that nothing crashed: an
 * intact file must load with each tensor's dtype, shape and bytes, a broken
 * one must be refused. Byte mutations of the model change one field at a
 * time. Seeds: tests/fuzz/corpus-safetensors_model. */
#include "ckpt_walk.h"

#include <inttypes.h>

/* The model's bytes, read in order; past the end they read as 0. */
typedef struct model_reader {
  const uint8_t *p;
  size_t n, at;
} model_reader;

static unsigned next(model_reader *r) { return r->at < r->n ? r->p[r->at++] : 0; }

typedef struct growbuf {
  char *s;
  size_t len, cap;
} growbuf;

static void put(growbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(growbuf *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (k < 0) abort();
    if (b->s && b->len + (size_t)k < b->cap) {
      b->len += (size_t)k;
      return;
    }
    b->cap = (b->cap + (size_t)k + 64) * 2;
    if (!(b->s = realloc(b->s, b->cap))) abort();
  }
}

/* The format's whole-byte dtypes with their sizes, then its sub-byte ones
 * (F4, F6: no size of bytes an element), which the model names only to
 * break a tensor: its bytes are then never what its shape needs, unless it
 * holds none. */
static const struct {
  const char *name;
  int size, supported;
  tstor_dtype dtype;
} dtypes[] = {
    {"BOOL", 1, 1, TSTOR_BOOL},
    {"U8", 1, 1, TSTOR_UINT8},
    {"I8", 1, 1, TSTOR_INT8},
    {"F8_E5M2", 1, 1, TSTOR_FLOAT8_E5M2},
    {"F8_E4M3", 1, 1, TSTOR_FLOAT8_E4M3FN},
    {"I16", 2, 1, TSTOR_INT16},
    {"F16", 2, 1, TSTOR_FLOAT16},
    {"BF16", 2, 1, TSTOR_BFLOAT16},
    {"I32", 4, 1, TSTOR_INT32},
    {"F32", 4, 1, TSTOR_FLOAT32},
    {"F64", 8, 1, TSTOR_FLOAT64},
    {"I64", 8, 1, TSTOR_INT64},
    {"U16", 2, 1, TSTOR_UINT16},
    {"U32", 4, 1, TSTOR_UINT32},
    {"U64", 8, 1, TSTOR_UINT64},
    {"C64", 8, 1, TSTOR_COMPLEX64},
    {"F8_E8M0", 1, 1, TSTOR_FLOAT8_E8M0FNU},
    {"F8_E4M3FNUZ", 1, 1, TSTOR_FLOAT8_E4M3FNUZ},
    {"F8_E5M2FNUZ", 1, 1, TSTOR_FLOAT8_E5M2FNUZ},
    {"F4", 0, 0, TSTOR_UINT8},
    {"F6_E2M3", 0, 0, TSTOR_UINT8},
    {"F6_E3M2", 0, 0, TSTOR_UINT8},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])
#define NSUPPORTED 19

enum brk {
  INTACT,
  HEADER_LONGER,  /* the length says more bytes than the JSON has */
  HEADER_SHORTER, /* ... fewer */
  HEADER_HUGE,    /* past the file, or past the format's 100 MB */
  DTYPE_UNKNOWN,
  DTYPE_UNSUPPORTED, /* a sub-byte dtype: its bytes no longer match */
  SHAPE_ENTRY,       /* a shape entry that is no size: -1, 1.5, "2", 2^64... */
  SHAPE_EXTRA,       /* one more dimension: its bytes no longer match */
  OFFSET_SHIFT,      /* begin or end moved by one */
  OFFSET_FORM,       /* data_offsets not two non-negative integers */
  FIELD_MISSING,
  FIELD_EXTRA, /* a fourth field, which readers ignore: still valid */
  NAME_TWICE,  /* a second entry with the same name */
  DATA_TRAILING,
  DATA_TRUNCATED,
  METADATA_VALUE, /* a __metadata__ value that is no string */
  METADATA_FORM,  /* __metadata__ that is no object */
  HEADER_LEADING, /* a byte before the '{': valid when JSON whitespace */
  NAME_NOT_UTF8,
  ROOT_FORM,  /* the header is a JSON array */
  ENTRY_FORM, /* an entry is no object */
  TOO_MANY_DIMS,
  DEEP_METADATA, /* a metadata value nested 10,000 deep */
  NBREAKS
};

static int breaks_a_tensor(enum brk b) {
  switch (b) {
    case DTYPE_UNKNOWN: case DTYPE_UNSUPPORTED: case SHAPE_ENTRY: case SHAPE_EXTRA: case OFFSET_SHIFT:
    case OFFSET_FORM: case FIELD_MISSING: case FIELD_EXTRA: case NAME_TWICE: case NAME_NOT_UTF8:
    case ENTRY_FORM: case TOO_MANY_DIMS:
      return 1;
    default:
      return 0;
  }
}

#define MAXT 5
typedef struct tensor_model {
  char name[24];
  unsigned dtype, ndim, sizes[5]; /* one more than a model makes, for SHAPE_EXTRA */
  uint64_t begin, end;
} tensor_model;

static uint64_t nbytes_of(const tensor_model *t) {
  uint64_t n = (uint64_t)dtypes[t->dtype].size;
  for (unsigned d = 0; d < t->ndim; d++) n *= t->sizes[d];
  return n;
}

static void entry(growbuf *h, const tensor_model *t, enum brk brk, int target, unsigned arg, const char *sp,
                  int extra_shows) {
  put(h, "%s\"%s\":%s{", sp, t->name, sp);
  if (target && brk == ENTRY_FORM) {
    put(h, "[1,2]");
    return;
  }
  if (target && brk == FIELD_EXTRA) put(h, "\"offsets\":[0,0],");
  if (!(target && brk == FIELD_MISSING && arg % 3 == 0)) {
    const char *name = dtypes[t->dtype].name;
    if (target && brk == DTYPE_UNKNOWN) {
      static const char *bad[] = {"F31", "f32", "", "F32 ", "FLOAT", "U128", "C64x"};
      name = bad[arg % (sizeof bad / sizeof bad[0])];
    }
    if (target && brk == DTYPE_UNSUPPORTED) name = dtypes[NSUPPORTED + arg % 3].name;
    put(h, "\"dtype\":%s\"%s\",%s", sp, name, sp);
  }
  if (!(target && brk == FIELD_MISSING && arg % 3 == 1)) {
    put(h, "\"shape\":%s[", sp);
    for (unsigned d = 0; d < t->ndim; d++) {
      if (target && brk == SHAPE_ENTRY && d == arg % t->ndim) {
        static const char *bad[] = {"-1", "1.5", "\"2\"", "18446744073709551616", "null", "2e0", "true",
                                    "9223372036854775808"};
        put(h, "%s%s", d ? "," : "", bad[(arg / 4) % (sizeof bad / sizeof bad[0])]);
      } else {
        put(h, "%s%u", d ? "," : "", t->sizes[d]);
      }
    }
    if (target && brk == SHAPE_EXTRA && extra_shows) put(h, "%s2", t->ndim ? "," : "");
    if (target && brk == TOO_MANY_DIMS)
      for (int d = 0; d < 70; d++) put(h, "%s1", t->ndim || d ? "," : "");
    put(h, "],%s", sp);
  }
  if (!(target && brk == FIELD_MISSING && arg % 3 == 2)) {
    uint64_t b = t->begin, e = t->end;
    if (target && brk == OFFSET_SHIFT) {
      if (arg & 1) b += 1;
      else e += 1;
    }
    if (target && brk == OFFSET_FORM) {
      static const char *bad[] = {"[-1,%" PRIu64 "]", "[0]", "[0,%" PRIu64 ",0]", "[0.0,%" PRIu64 "]",
                                  "{\"0\":%" PRIu64 "}", "[\"0\",%" PRIu64 "]", "[%" PRIu64 ",0]"};
      unsigned k = arg % (sizeof bad / sizeof bad[0]);
      /* [end, 0] is a form break only when end is past 0 */
      if (k == 6 && e == 0) e = 1;
      put(h, "\"data_offsets\":%s", sp);
      put(h, bad[k], e);
    } else {
      put(h, "\"data_offsets\":%s[%" PRIu64 ",%" PRIu64 "]", sp, b, e);
    }
  } else {
    put(h, "\"x\":0"); /* keeps three fields, one of them unknown */
  }
  put(h, "}");
}

/* Builds the file; *broken says whether the model's one break left it
 * invalid (a break that changes nothing a reader checks leaves it valid). */
static uint8_t *build(const uint8_t *in, size_t size, tensor_model *ts, unsigned *nt, size_t *out_size,
                      int *broken, uint64_t *data_at) {
  model_reader r = {in, size, 0};
  *nt = next(&r) % (MAXT + 1);
  enum brk brk = (enum brk)(next(&r) % NBREAKS);
  unsigned arg = next(&r), form = next(&r);
  unsigned target = *nt ? arg % *nt : 0;
  const char *sp = form & 8 ? " " : "";
  for (unsigned i = 0; i < *nt; i++) {
    tensor_model *t = &ts[i];
    t->dtype = next(&r) % NSUPPORTED;
    t->ndim = next(&r) % 5;
    for (unsigned d = 0; d < t->ndim; d++) t->sizes[d] = next(&r) % 5;
    unsigned len = next(&r) % 6;
    int k = snprintf(t->name, sizeof t->name, "t%u.", i);
    for (unsigned c = 0; c < len; c++) t->name[k++] = "abcxyz0189._-/"[next(&r) % 14];
    t->name[k] = '\0';
  }
  /* the data section: tensors in name order, or the reverse */
  uint64_t at = 0;
  for (unsigned j = 0; j < *nt; j++) {
    tensor_model *t = &ts[form & 4 ? *nt - 1 - j : j];
    t->begin = at;
    at = t->end = at + nbytes_of(t);
  }
  uint64_t data_len = at;
  if (*nt == 0 && breaks_a_tensor(brk)) brk = INTACT;
  if (brk == SHAPE_ENTRY && ts[target].ndim == 0) brk = SHAPE_EXTRA;
  if (brk == NAME_NOT_UTF8) {
    if (*nt == 0) brk = INTACT;
    else ts[target].name[1] = '\xff';
  }
  if (brk == DTYPE_UNSUPPORTED && nbytes_of(&ts[target]) == 0)
    brk = DTYPE_UNKNOWN; /* no bytes fit any */
  *broken = brk != INTACT && brk != FIELD_EXTRA && !(brk == HEADER_LEADING && arg % 4 < 2);
  if (brk == SHAPE_EXTRA && nbytes_of(&ts[target]) == 0) { /* 0 x 2 is still 0 bytes: valid */
    *broken = 0;
    ts[target].sizes[ts[target].ndim++] = 2;
  }
  if (brk == DATA_TRUNCATED && data_len == 0) brk = DATA_TRAILING;

  growbuf h = {0};
  put(&h, "%s", brk == ROOT_FORM ? "[" : "{");
  int first = 1;
  if (form & 2 || brk == METADATA_VALUE || brk == METADATA_FORM || brk == DEEP_METADATA) {
    put(&h, "\"__metadata__\":%s", sp);
    if (brk == METADATA_FORM) {
      put(&h, arg & 1 ? "[\"a\"]" : "\"format\"");
    } else {
      put(&h, "{\"format\":%s\"pt\"", sp);
      if (brk == METADATA_VALUE) put(&h, ",\"n\":%s", arg & 1 ? "1" : arg & 2 ? "null" : "{\"a\":\"b\"}");
      if (brk == DEEP_METADATA) {
        put(&h, ",\"deep\":");
        for (int k = 0; k < 10000; k++) put(&h, "[");
        for (int k = 0; k < 10000; k++) put(&h, "]");
      }
      put(&h, "}");
    }
    first = 0;
  }
  for (unsigned i = 0; i < *nt; i++) {
    if (!first) put(&h, ",");
    first = 0;
    entry(&h, &ts[i], brk, i == target, arg, sp, *broken);
    if (i == target && brk == NAME_TWICE) {
      put(&h, ",");
      entry(&h, &ts[i], INTACT, 0, arg, sp, 0);
    }
  }
  put(&h, "%s", brk == ROOT_FORM ? "]" : "}");
  if (form & 1)
    while (h.len % 8) put(&h, " "); /* the reference writer's padding */
  uint64_t hlen = h.len;
  if (brk == HEADER_LONGER) hlen += 1 + arg % 8;
  if (brk == HEADER_SHORTER) hlen -= 1 + arg % (hlen < 8 ? hlen : 8);
  if (brk == HEADER_HUGE) hlen = arg & 1 ? 100000001ull : UINT64_MAX - arg;
  int lead = brk == HEADER_LEADING;
  size_t total = 8 + lead + h.len + (size_t)data_len + (brk == DATA_TRAILING ? 1 + arg % 9 : 0);
  if (brk == DATA_TRUNCATED) total -= 1 + arg % data_len;
  if (brk == HEADER_LEADING) hlen += 1;
  uint8_t *file = malloc(total);
  if (!file) abort();
  for (int i = 0; i < 8; i++) file[i] = (uint8_t)(hlen >> (8 * i));
  if (lead) file[8] = (uint8_t)" \nx\xef"[arg % 4];
  size_t hdr_end = 8 + lead + h.len;
  memcpy(file + 8 + lead, h.s, hdr_end < total ? h.len : total - 8 - lead);
  for (size_t i = hdr_end; i < total; i++) file[i] = (uint8_t)(r.n ? r.p[(i * 7 + arg) % r.n] ^ i : i);
  free(h.s);
  *out_size = total;
  *data_at = hdr_end;
  return file;
}

static void check(const tensor_model *ts, unsigned nt, const uint8_t *file, uint64_t data_at, int broken,
                  int rc, tstor_checkpoint *ck) {
  if (broken) {
    if (rc == 0) {
      fprintf(stderr, "fuzz: a broken file loaded\n");
      abort();
    }
    return;
  }
  if (rc != 0) {
    fprintf(stderr, "fuzz: an intact file was refused: %s\n", tstor_last_error());
    abort();
  }
  const tstor_value *root = tstor_checkpoint_root(ck);
  if (tstor_value_len(root) != nt) abort();
  for (unsigned i = 0; i < nt; i++) {
    const tensor_model *m = &ts[i];
    const tstor_tensor *t = NULL;
    for (size_t k = 0; k < nt; k++) {
      size_t len;
      const char *name = tstor_value_string(tstor_value_key(root, k), &len);
      if (len == strlen(m->name) && memcmp(name, m->name, len) == 0) t = tstor_value_tensor(tstor_value_item(root, k));
    }
    if (!t || tstor_tensor_dtype(t) != dtypes[m->dtype].dtype || tstor_tensor_dim(t) != (int)m->ndim) abort();
    for (unsigned d = 0; d < m->ndim; d++)
      if (tstor_tensor_sizes(t)[d] != (int64_t)m->sizes[d]) abort();
    uint64_t n = m->end - m->begin;
    if (n && memcmp(tstor_tensor_data(t), file + data_at + m->begin, (size_t)n) != 0) {
      fprintf(stderr, "fuzz: tensor '%s' holds other bytes than the file's\n", m->name);
      abort();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tensor_model ts[MAXT];
  unsigned nt;
  size_t n;
  int broken;
  uint64_t data_at;
  uint8_t *file = build(data, size, ts, &nt, &n, &broken, &data_at);
  load_every_way(tstor_safetensors_load_buffer, tstor_safetensors_load, file, n);
  for (int m = 0; m < 2; m++) {
    tstor_load_options o = {sizeof o, NULL, m ? TSTOR_LOAD_BORROW_BUFFER : TSTOR_LOAD_READ};
    tstor_checkpoint *ck = NULL;
    int rc = tstor_safetensors_load_buffer(ctx, file, n, &o, &ck);
    check(ts, nt, file, data_at, broken, rc, ck);
    tstor_checkpoint_free(ck);
  }
  free(file);
  return 0;
}
