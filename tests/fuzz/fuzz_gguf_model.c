/* libFuzzer target, structure-aware: the input is a model of a GGUF file
 * (metadata entries of every value type, tensors of every ggml type with
 * their shapes, the alignment, where the data lie) and the choice of one
 * field to break. The harness writes the file the model describes, breaks
 * that field (or none), loads it every way (ckpt_walk.h) and checks the
 * outcome, not only that nothing crashed: an intact file must load with
 * each value's type and contents, each tensor's type, shape (reversed from
 * ggml's) and bytes, and every quantized tensor must decode; a broken one
 * must be refused. Seeds: tests/fuzz/corpus-gguf_model. */
#include "ckpt_walk.h"

/* The model's bytes, read in order; past the end they read as 0. */
typedef struct model_reader {
  const uint8_t *p;
  size_t n, at;
} model_reader;

static unsigned next(model_reader *r) { return r->at < r->n ? r->p[r->at++] : 0; }

typedef struct bytes {
  uint8_t *p;
  size_t n, cap;
} bytes;

static void put(bytes *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    if (!(b->p = realloc(b->p, b->cap))) abort();
  }
  if (n) memcpy(b->p + b->n, p, n);
  b->n += n;
}
static void put_u32(bytes *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(bytes *b, uint64_t v) { put(b, &v, 8); }
static void put_str(bytes *b, const char *s, size_t n) {
  put_u64(b, n);
  put(b, s, n);
}

/* ggml's types: id, elements and bytes per block (gguf_format.h's list). */
static const struct {
  unsigned id, block, size;
} types[] = {{0, 1, 4},      {1, 1, 2},      {2, 32, 18},    {3, 32, 20},    {6, 32, 22},
             {7, 32, 24},    {8, 32, 34},    {9, 32, 36},    {10, 256, 84},  {11, 256, 110},
             {12, 256, 144}, {13, 256, 176}, {14, 256, 210}, {15, 256, 292}, {16, 256, 66},
             {17, 256, 74},  {18, 256, 98},  {19, 256, 50},  {20, 32, 18},   {21, 256, 110},
             {22, 256, 82},  {23, 256, 136}, {24, 1, 1},     {25, 1, 2},     {26, 1, 4},
             {27, 1, 8},     {28, 1, 8},     {29, 256, 56},  {30, 1, 2},     {34, 256, 54},
             {35, 256, 66},  {39, 32, 17},   {40, 64, 36},   {41, 128, 18},  {42, 64, 18}};
#define NTYPES (sizeof types / sizeof types[0])
static const unsigned scalar_size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

enum brk {
  INTACT,
  TRAILING,   /* bytes after the data: still valid */
  VALUE_BITS, /* a scalar's bytes changed: still valid */
  MAGIC,
  VERSION,  /* 0, 1, 4 or a big-endian 3 */
  KV_COUNT, /* more entries than the bytes hold */
  TENSOR_COUNT,
  KEY_LENGTH, /* past the end of the file */
  KEY_TWICE,
  KEY_NOT_UTF8,
  VALUE_TYPE,  /* none of GGUF's */
  ELEM_TYPE,   /* an array of arrays, or none of GGUF's */
  ARRAY_COUNT, /* more items than the bytes hold */
  ALIGNMENT,   /* 0, not a power of two, or not a u32 */
  TENSOR_TYPE, /* removed from ggml, or past its list */
  NDIMS,       /* past 64 */
  DIM_HUGE,    /* past 2^63 */
  ROW_BLOCKS,  /* a quantized row of no whole number of blocks */
  MISALIGNED,
  OFFSET_PAST,
  OVERLAP,
  NAME_TWICE,
  NAME_NOT_UTF8,
  TRUNCATED, /* the file ends inside the last tensor's bytes */
  NBREAKS
};

#define MAXKV 5
#define MAXT 5
typedef struct kv_model {
  char key[16];
  unsigned type, elem, count;
  uint8_t raw[64]; /* the scalars' bytes; strings are "s<i>" */
} kv_model;

typedef struct tensor_model {
  char name[16];
  unsigned type; /* an index into types[] */
  unsigned ndim;
  uint64_t ne[4];
  uint64_t offset, nbytes;
} tensor_model;

typedef struct model {
  kv_model kv[MAXKV];
  tensor_model t[MAXT];
  unsigned nkv, nt, alignment;
  uint64_t data_start;
} model;

static uint64_t nbytes_of(const tensor_model *t) {
  uint64_t n = 1;
  for (unsigned d = 0; d < t->ndim; d++) n *= t->ne[d];
  return n / types[t->type].block * types[t->type].size;
}

static void value_bytes(bytes *b, const kv_model *k, unsigned type, unsigned i) {
  if (type == 8) {
    char s[8];
    int n = snprintf(s, sizeof s, "s%u", i);
    put_str(b, s, (size_t)n);
  } else {
    put(b, k->raw + (i * scalar_size[type]) % 32, scalar_size[type]);
  }
}

static void kv_bytes(bytes *b, const kv_model *k, enum brk brk, int target, unsigned arg) {
  size_t klen = strlen(k->key);
  if (target && brk == KEY_LENGTH) klen = (size_t)1 << 40;
  put_u64(b, klen);
  put(b, k->key, strlen(k->key));
  if (target && brk == KEY_NOT_UTF8) b->p[b->n - 1] = 0xff;
  unsigned type = k->type;
  if (target && brk == VALUE_TYPE) type = 13 + arg % 200;
  put_u32(b, type);
  if (type == 9) {
    unsigned elem = k->elem;
    if (target && brk == ELEM_TYPE) elem = arg & 1 ? 9 : 13 + arg % 100;
    put_u32(b, elem);
    put_u64(b, target && brk == ARRAY_COUNT ? (uint64_t)1 << 50 : k->count);
    for (unsigned i = 0; i < k->count; i++) value_bytes(b, k, k->elem, i);
  } else if (type < 13) {
    value_bytes(b, k, type, 0);
  }
}

/* Builds the file; *broken says whether the one break left it invalid. */
static uint8_t *build(model_reader *r, model *m, size_t *size, int *broken) {
  memset(m, 0, sizeof *m);
  m->nkv = next(r) % (MAXKV + 1);
  m->nt = next(r) % (MAXT + 1);
  enum brk brk = (enum brk)(next(r) % NBREAKS);
  unsigned arg = next(r) | next(r) << 8;
  static const unsigned aligns[] = {0, 1, 2, 8, 16, 32, 64, 256};
  m->alignment = aligns[next(r) % 8];
  for (unsigned i = 0; i < m->nkv; i++) {
    kv_model *k = &m->kv[i];
    snprintf(k->key, sizeof k->key, "k%u.%c", i, "abxyz."[next(r) % 6]);
    k->type = next(r) % 13;
    k->elem = next(r) % 13;
    if (k->elem == 9) k->elem = 8;
    k->count = next(r) % 6;
    for (size_t j = 0; j < sizeof k->raw; j++) k->raw[j] = (uint8_t)next(r);
  }
  for (unsigned i = 0; i < m->nt; i++) {
    tensor_model *t = &m->t[i];
    snprintf(t->name, sizeof t->name, "t%u.%c", i, "wqkvo"[next(r) % 5]);
    t->type = next(r) % NTYPES;
    t->ndim = 1 + next(r) % 4;
    t->ne[0] = (next(r) % 4) * types[t->type].block;
    for (unsigned d = 1; d < t->ndim; d++) t->ne[d] = next(r) % 4;
    t->nbytes = nbytes_of(t);
  }
  uint64_t align = m->alignment ? m->alignment : 32;
  /* keys and names are unique by their numbers; where a break needs a
   * target of some kind and the model has none, the file stays intact */
  unsigned kt = m->nkv ? arg % m->nkv : 0, tt = m->nt ? arg % m->nt : 0;
  int need_kv = brk >= KEY_LENGTH && brk <= ARRAY_COUNT,
      need_t = brk >= TENSOR_TYPE && brk <= NAME_NOT_UTF8;
  if ((need_kv && !m->nkv) || (need_t && !m->nt)) brk = INTACT;
  if ((brk == ELEM_TYPE || brk == ARRAY_COUNT) && m->kv[kt].type != 9) brk = INTACT;
  if (brk == VALUE_BITS && (!m->nkv || m->kv[kt].type == 8 || m->kv[kt].type == 9)) brk = INTACT;
  if (brk == ROW_BLOCKS && types[m->t[tt].type].block == 1) brk = INTACT;
  if ((brk == MISALIGNED && (align == 1 || !m->t[tt].nbytes)) ||
      (brk == OFFSET_PAST && !m->t[tt].nbytes))
    brk = INTACT;
  if (brk == ALIGNMENT && !m->alignment) m->alignment = 32; /* the key must be there to break */
  /* the data: in order or reversed, with a gap of one alignment now and then */
  uint64_t at = 0;
  unsigned order = next(r);
  for (unsigned j = 0; j < m->nt; j++) {
    tensor_model *t = &m->t[order & 1 ? m->nt - 1 - j : j];
    t->offset = at;
    at += (t->nbytes + align - 1) / align * align + (order & 2 ? align : 0);
  }
  uint64_t data_len = at;
  int overlap_ok = 0;
  if (brk == OVERLAP) {
    for (unsigned j = 0; j < m->nt && !overlap_ok; j++)
      if (j != tt && m->t[j].nbytes && m->t[tt].nbytes) {
        m->t[tt].offset = m->t[j].offset;
        overlap_ok = 1;
      }
    if (!overlap_ok) brk = INTACT;
  }
  uint64_t last_end = 0;
  for (unsigned j = 0; j < m->nt; j++)
    if (m->t[j].nbytes && m->t[j].offset + m->t[j].nbytes > last_end)
      last_end = m->t[j].offset + m->t[j].nbytes;
  if (brk == TRUNCATED && !last_end) brk = INTACT;
  *broken = brk != INTACT && brk != TRAILING && brk != VALUE_BITS;

  bytes b = {0};
  static const uint32_t versions[] = {0, 1, 4, 0x03000000};
  put(&b, brk == MAGIC ? "GGUG" : "GGUF", 4);
  put_u32(&b, brk == VERSION ? versions[arg % 4] : 3 - (arg & 1 && brk == INTACT));
  unsigned nkv = m->nkv + (m->alignment ? 1 : 0) + (brk == KEY_TWICE);
  put_u64(&b, brk == TENSOR_COUNT ? ((uint64_t)1 << 40) + arg : m->nt);
  put_u64(&b, brk == KV_COUNT ? ((uint64_t)1 << 40) + arg : nkv);
  if (m->alignment) {
    put_str(&b, "general.alignment", 17);
    if (brk == ALIGNMENT && arg % 3 == 2) {
      put_u32(&b, 10);
      put_u64(&b, m->alignment);
    } else {
      put_u32(&b, 4);
      put_u32(&b, brk == ALIGNMENT ? (arg % 3 ? 3u << (arg % 8) : 0) : m->alignment);
    }
  }
  for (unsigned i = 0; i < m->nkv; i++) {
    if (i == kt && brk == VALUE_BITS) m->kv[i].raw[0] ^= 0x5a;
    kv_bytes(&b, &m->kv[i], brk, i == kt, arg);
    if (i == kt && brk == KEY_TWICE) kv_bytes(&b, &m->kv[i], INTACT, 0, arg);
  }
  for (unsigned i = 0; i < m->nt; i++) {
    const tensor_model *t = &m->t[i];
    unsigned ndim = t->ndim;
    int target = i == tt;
    put_str(&b, t->name, strlen(t->name));
    if (target && brk == NAME_NOT_UTF8) b.p[b.n - 1] = 0xc0;
    put_u32(&b, target && brk == NDIMS ? 65 + arg % 1000 : ndim);
    if (target && brk == NDIMS) ndim = 0; /* the reader stops at the count */
    for (unsigned d = 0; d < ndim; d++) {
      uint64_t ne = t->ne[d];
      if (target && d == 0 && brk == ROW_BLOCKS) ne += 1 + arg % (types[t->type].block - 1);
      if (target && d == ndim - 1 && brk == DIM_HUGE) ne = (uint64_t)1 << 63 | arg;
      put_u64(&b, ne);
    }
    static const unsigned bad_types[] = {4, 5, 31, 32, 33, 36, 37, 38, 43, 1000, 0xFFFFFFFF};
    put_u32(&b, target && brk == TENSOR_TYPE ? bad_types[arg % 11] : types[t->type].id);
    uint64_t off = t->offset;
    if (target && brk == MISALIGNED) off += 1 + arg % (align - 1);
    if (target && brk == OFFSET_PAST) off = arg & 1 ? UINT64_MAX - (align - 1) : (uint64_t)1 << 40;
    put_u64(&b, off);
    if (target && brk == NAME_TWICE) {
      put_str(&b, t->name, strlen(t->name));
      put_u32(&b, 1);
      put_u64(&b, 0);
      put_u32(&b, 0);
      put_u64(&b, 0);
    }
  }
  if (brk == NAME_TWICE) { /* one more tensor than counted: the count says it */
    memcpy(b.p + 8, &(uint64_t){m->nt + 1}, 8);
  }
  if (m->nt || brk == NAME_TWICE)
    while (b.n % align) put(&b, "", 1);
  m->data_start = b.n;
  for (uint64_t i = 0; i < data_len; i++) {
    uint8_t c = (uint8_t)(r->n ? r->p[(i * 13 + arg) % r->n] ^ i : i);
    put(&b, &c, 1);
  }
  if (brk == TRAILING) put(&b, "trail", 1 + arg % 5);
  if (brk == TRUNCATED) b.n = (size_t)(m->data_start + last_end - 1 - arg % last_end);
  *size = b.n;
  return b.p ? b.p : malloc(1);
}

static int same_bits(const tstor_value *v, const kv_model *k, unsigned type, unsigned i) {
  if (type == 8) {
    char s[8];
    snprintf(s, sizeof s, "s%u", i);
    return strcmp(tstor_value_string(v, NULL), s) == 0;
  }
  uint64_t want = 0;
  memcpy(&want, k->raw + (i * scalar_size[type]) % 32, scalar_size[type]);
  uint64_t u;
  int64_t s;
  double d;
  int bl;
  switch (type) {
    case 0:
    case 2:
    case 4:
    case 10: return tstor_value_get_uint64(v, &u) == 0 && u == want;
    case 1: return tstor_value_get_int64(v, &s) == 0 && s == (int8_t)want;
    case 3: return tstor_value_get_int64(v, &s) == 0 && s == (int16_t)want;
    case 5: return tstor_value_get_int64(v, &s) == 0 && s == (int32_t)want;
    case 11: return tstor_value_get_int64(v, &s) == 0 && (uint64_t)s == want;
    case 7: return tstor_value_get_bool(v, &bl) == 0 && bl == (want != 0);
    case 6: {
      float f;
      uint32_t w = (uint32_t)want;
      memcpy(&f, &w, 4);
      return tstor_value_get_double(v, &d) == 0 && (d == f || (d != d && f != f));
    }
    default: {
      double f;
      memcpy(&f, &want, 8);
      return tstor_value_get_double(v, &d) == 0 && (d == f || (d != d && f != f));
    }
  }
}

static void fail(const char *what) {
  fprintf(stderr, "fuzz: %s (%s)\n", what, tstor_last_error());
  abort();
}

static void check(const model *m, const uint8_t *file, int broken, int rc, tstor_checkpoint *ck) {
  if (broken) {
    if (rc == 0) fail("a broken file loaded");
    return;
  }
  if (rc) fail("an intact file was refused");
  const tstor_value *md = tstor_checkpoint_metadata(ck), *root = tstor_checkpoint_root(ck);
  if (tstor_value_len(md) != m->nkv + (m->alignment ? 1 : 0) || tstor_value_len(root) != m->nt)
    fail("counts differ");
  for (unsigned i = 0; i < m->nkv; i++) {
    const kv_model *k = &m->kv[i];
    const tstor_value *v = tstor_value_dict_get(md, k->key);
    tstor_gguf_type elem;
    if (!v || tstor_value_gguf_type(v, &elem) != (int)k->type) fail("a value's type differs");
    if (k->type != 9) {
      if (!same_bits(v, k, k->type, 0)) fail("a value differs");
      continue;
    }
    if (elem != k->elem || tstor_value_len(v) != k->count) fail("an array differs");
    for (unsigned j = 0; j < k->count; j++)
      if (!same_bits(tstor_value_item(v, j), k, k->elem, j)) fail("an array item differs");
  }
  for (unsigned i = 0; i < m->nt; i++) {
    const tensor_model *t = &m->t[i];
    const tstor_value *v = tstor_value_dict_get(root, t->name);
    if (!v) fail("a tensor is missing");
    const int64_t *sizes;
    int nd = tstor_value_quantized_shape(v, &sizes);
    if (nd < 0) {
      nd = tstor_tensor_dim(tstor_value_tensor(v));
      sizes = tstor_tensor_sizes(tstor_value_tensor(v));
    } else if (tstor_value_ggml_type(v) != (int)types[t->type].id) {
      fail("a quantized type differs");
    }
    if (nd != (int)t->ndim) fail("a tensor's dimensions differ");
    for (unsigned d = 0; d < t->ndim; d++)
      if (sizes[d] != (int64_t)t->ne[t->ndim - 1 - d]) fail("a size differs from ne reversed");
    const tstor_tensor *bt = tstor_value_tensor(v);
    if ((uint64_t)tstor_tensor_nbytes(bt) != t->nbytes ||
        (t->nbytes &&
         memcmp(tstor_tensor_data(bt), file + m->data_start + t->offset, (size_t)t->nbytes)))
      fail("a tensor holds other bytes than the file's");
    if (tstor_value_kind_of(v) == TSTOR_VALUE_QUANTIZED) {
      tstor_tensor *f;
      if (tstor_value_dequantize(v, TSTOR_FLOAT32, &f)) fail("a quantized tensor does not decode");
      tstor_tensor_release(f);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  model m;
  model_reader r = {data, size, 0};
  size_t n;
  int broken;
  uint8_t *file = build(&r, &m, &n, &broken);
  load_every_way(tstor_gguf_load_buffer, tstor_gguf_load, file, n);
  for (int k = 0; k < 2; k++) {
    tstor_load_options o = {sizeof o, NULL, k ? TSTOR_LOAD_BORROW_BUFFER : TSTOR_LOAD_READ};
    tstor_checkpoint *ck = NULL;
    int rc = tstor_gguf_load_buffer(ctx, file, n, &o, &ck);
    check(&m, file, broken, rc, ck);
    tstor_checkpoint_free(ck);
  }
  free(file);
  return 0;
}
