/* libFuzzer target: tstor's unpickler, fed data.pkl bytes directly.
 *
 * The harness wraps each input as the data.pkl of a torch.save archive it
 * builds itself (stored records: data.pkl, version, and data/0 to data/7 of
 * 64 bytes each, so that storage references resolve), and loads it every way
 * fuzz_torch_load does (read, borrowed, from a file, which must agree). So
 * no input is wasted on the zip wrapper: every one reaches the pickle
 * interpreter.
 *
 * Its mutator works on opcodes, not bytes: it parses the pickle and breaks
 * one thing where a reader must check it: an int argument set to an extreme
 * (sizes, strides, offsets, numels, memo indices), a string argument swapped
 * for another a storage reference uses, an opcode inserted from those
 * torch.save pickles are made of (_rebuild_tensor_v2, _rebuild_parameter,
 * OrderedDict, BUILD, SETITEMS, memo ops, tuples of every length, MARK), one
 * deleted, doubled or swapped with its neighbour; one time in four it leaves
 * the bytes to libFuzzer's own mutations. The seeds are the data.pkl records
 * of real torch.save files (tests/fuzz/corpus-pickle, from tests/ckpt).
 *
 * Environment: TSTOR_BACKEND_DIR (the modules), as tests/fuzz/run.sh sets it. */
#include "ckpt_walk.h"

#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

/* ------------------------------------------------------- the zip wrapper */

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 256;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
}

static void le(buf *b, uint64_t v, int bytes) {
  uint8_t x[8];
  for (int i = 0; i < bytes; i++) x[i] = (uint8_t)(v >> (8 * i));
  put(b, x, (size_t)bytes);
}

typedef struct record {
  const char *name;
  const uint8_t *data;
  size_t len;
  uint32_t crc, offset;
} record;

/* A zip of stored records, as torch.save lays them out (no alignment). */
static buf archive(record *r, int n) {
  buf b = {0};
  for (int i = 0; i < n; i++) {
    r[i].crc = (uint32_t)crc32(0, r[i].data, (uInt)r[i].len);
    r[i].offset = (uint32_t)b.n;
    le(&b, 0x04034b50, 4), le(&b, 20, 2), le(&b, 0, 2), le(&b, 0, 2), le(&b, 0, 4);
    le(&b, r[i].crc, 4), le(&b, r[i].len, 4), le(&b, r[i].len, 4);
    le(&b, strlen(r[i].name), 2), le(&b, 0, 2);
    put(&b, r[i].name, strlen(r[i].name));
    put(&b, r[i].data, r[i].len);
  }
  size_t cd = b.n;
  for (int i = 0; i < n; i++) {
    le(&b, 0x02014b50, 4), le(&b, 20, 2), le(&b, 20, 2), le(&b, 0, 2), le(&b, 0, 2), le(&b, 0, 4);
    le(&b, r[i].crc, 4), le(&b, r[i].len, 4), le(&b, r[i].len, 4);
    le(&b, strlen(r[i].name), 2), le(&b, 0, 2), le(&b, 0, 2), le(&b, 0, 2), le(&b, 0, 2), le(&b, 0, 4);
    le(&b, r[i].offset, 4);
    put(&b, r[i].name, strlen(r[i].name));
  }
  size_t cd_len = b.n - cd;
  le(&b, 0x06054b50, 4), le(&b, 0, 2), le(&b, 0, 2), le(&b, (uint64_t)n, 2), le(&b, (uint64_t)n, 2);
  le(&b, cd_len, 4), le(&b, cd, 4), le(&b, 0, 2);
  return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  static uint8_t storage_bytes[64];
  for (int i = 0; i < 64; i++) storage_bytes[i] = (uint8_t)(i * 37 + 11);
  static const char *const names[] = {"archive/data/0", "archive/data/1", "archive/data/2", "archive/data/3",
                                      "archive/data/4", "archive/data/5", "archive/data/6", "archive/data/7"};
  record r[10] = {{"archive/data.pkl", data, size, 0, 0}, {"archive/version", (const uint8_t *)"3\n", 2, 0, 0}};
  for (int i = 0; i < 8; i++) r[2 + i] = (record){names[i], storage_bytes, sizeof storage_bytes, 0, 0};
  buf zip = archive(r, 10);
  load_every_way(tstor_torch_load_buffer, tstor_torch_load, zip.p, zip.n);
  free(zip.p);
  return 0;
}

/* ------------------------------------------------------------- the mutator */

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return rng_state >> 17;
}

typedef struct op {
  size_t at, len; /* the opcode and its argument */
} op;

/* The length of the opcode at p (with its argument), or 0 when unknown or cut. */
static size_t op_len(const uint8_t *p, size_t left) {
  size_t arg;
  switch (p[0]) {
    case '(': case ')': case ']': case '}': case 'N': case 0x88: case 0x89: case 't': case 0x85: case 0x86:
    case 0x87: case 'R': case 'b': case 's': case 'u': case 'a': case 'e': case 'Q': case '.': case 0x94:
    case '0': case '1': case '2': case 'l': case 'd': case 0x81:
      return 1;
    case 'K': case 'q': case 'h': case 0x80: return 2;
    case 'M': return 3;
    case 'J': case 'r': case 'j': return 5;
    case 0x95: case 'G': return 9;
    case 0x8a: case 0x8c: case 'C':
      if (left < 2) return 0;
      arg = 2 + p[1];
      return arg <= left ? arg : 0;
    case 'X': case 0x8b: case 'B':
      if (left < 5) return 0;
      arg = 5 + ((size_t)p[1] | (size_t)p[2] << 8 | (size_t)p[3] << 16 | (size_t)p[4] << 24);
      return arg <= left ? arg : 0;
    case 'c': {
      const uint8_t *nl1 = memchr(p + 1, '\n', left - 1);
      const uint8_t *nl2 = nl1 ? memchr(nl1 + 1, '\n', left - (size_t)(nl1 + 1 - p)) : NULL;
      return nl2 ? (size_t)(nl2 + 1 - p) : 0;
    }
    default: return 0;
  }
}

static size_t parse(const uint8_t *d, size_t n, op *ops, size_t max_ops) {
  size_t k = 0;
  for (size_t at = 0; at < n && k < max_ops;) {
    size_t len = op_len(d + at, n - at);
    if (!len || len > n - at) break; /* unknown, or cut short */
    ops[k++] = (op){at, len};
    at += len;
  }
  return k;
}

/* What torch.save pickles are made of, to insert one of. */
#define V(s) {s, sizeof s - 1}
static const struct { const char *bytes; size_t len; } vocabulary[] = {
    V("ctorch._utils\n_rebuild_tensor_v2\n"), V("ctorch._utils\n_rebuild_parameter\n"),
    V("ccollections\nOrderedDict\n"), V("ctorch\nFloatStorage\n"), V("ctorch\nLongStorage\n"),
    V("b"), V("u"), V("s"), V("R"), V("Q"), V("("), V(")"), V("t"), V("\x85"), V("\x86"),
    V("\x87"), V("]"), V("}"), V("a"), V("e"), V("N"), V("\x88"), V("\x89"), V("0"),
    V("1"), V("2"), V("\x94"), V("q\x00"), V("q\x01"), V("h\x00"), V("h\x01"),
    V("r\xff\xff\xff\xff"), V("j\x05\x00\x00\x00"), V("X\x07\x00\x00\x00storage"),
    V("X\x03\x00\x00\x00cpu"), V("X\x01\x00\x00\x000"), V("X\x00\x00\x00\x00"), V("."),
};
/* and the globals of the rebuilds PyTorch 2.x's loader reads besides */
static const struct {
  const char *bytes;
  size_t len;
} globals_2x[] = {
    V("ctorch._tensor\n_rebuild_from_type_v2\n"),
    V("ctorch\nTensor\n"),
    V("ctorch\nIntStorage\n"),
    V("ctorch._utils\n_rebuild_qtensor\n"),
    V("ctorch\nQInt8Storage\n"),
    V("ctorch\nper_tensor_affine\n"),
    V("ctorch\nper_channel_affine\n"),
};
#undef V
enum {
  NVOCAB = sizeof vocabulary / sizeof vocabulary[0],
  N2X = sizeof globals_2x / sizeof globals_2x[0]
};

static const int64_t extremes[] = {0, 1, -1, 2, 7, 8, 63, 64, 255, 256, 65535, 65536, INT32_MAX, INT32_MIN,
                                   (int64_t)1 << 32, (int64_t)1 << 62, INT64_MAX, INT64_MIN, INT64_MAX / 8};

static size_t encode_int(uint8_t *out, int64_t v) {
  if (rnd() % 2 && v >= INT32_MIN && v <= INT32_MAX) {
    out[0] = 'J';
    for (int i = 0; i < 4; i++) out[1 + i] = (uint8_t)((uint64_t)v >> (8 * i));
    return 5;
  }
  out[0] = 0x8a;
  out[1] = 8;
  for (int i = 0; i < 8; i++) out[2 + i] = (uint8_t)((uint64_t)v >> (8 * i));
  return 10;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
  rng_state = seed ^ 0x9e3779b97f4a7c15ull;
  enum { MAX_OPS = 4096 };
  static op ops[MAX_OPS];
  size_t nops = parse(data, size, ops, MAX_OPS);
  if (nops < 2 || rnd() % 4 == 0) return LLVMFuzzerMutate(data, size, max_size);
  uint8_t piece[64];
  size_t plen = 0, i = (size_t)(rnd() % nops), drop = ops[i].len, at = ops[i].at;
  const uint8_t *src = piece;
  switch (rnd() % 6) {
    case 0: { /* an int argument set to an extreme */
      size_t tries = 0;
      while (tries++ < 64 && !strchr("KMJ\x8a", data[ops[i].at])) i = (size_t)(rnd() % nops);
      if (!strchr("KMJ\x8a", data[ops[i].at])) return LLVMFuzzerMutate(data, size, max_size);
      at = ops[i].at, drop = ops[i].len;
      plen = encode_int(piece, extremes[rnd() % (sizeof extremes / sizeof extremes[0])]);
      break;
    }
    case 1: { /* an opcode inserted */
      size_t v = (size_t)(rnd() % (NVOCAB + N2X));
      src = (const uint8_t *)(v < NVOCAB ? vocabulary[v].bytes : globals_2x[v - NVOCAB].bytes);
      plen = v < NVOCAB ? vocabulary[v].len : globals_2x[v - NVOCAB].len, drop = 0;
      break;
    }
    case 2: /* deleted */ plen = 0; break;
    case 3: /* doubled */ src = data + at, plen = drop, drop = 0; break;
    case 4: { /* swapped with the next */
      if (i + 1 >= nops || ops[i].len + ops[i + 1].len > sizeof piece) return LLVMFuzzerMutate(data, size, max_size);
      memcpy(piece, data + ops[i + 1].at, ops[i + 1].len);
      memcpy(piece + ops[i + 1].len, data + ops[i].at, ops[i].len);
      plen = drop = ops[i].len + ops[i + 1].len;
      break;
    }
    default: { /* a string argument swapped for another */
      static const char *const strs[] = {"storage", "cpu", "cuda:0", "meta", "0", "1", "7", "8", "",
                                         "FloatStorage", "../0", "data"};
      const char *s = strs[rnd() % (sizeof strs / sizeof strs[0])];
      size_t n = strlen(s);
      piece[0] = 'X';
      for (int k = 0; k < 4; k++) piece[1 + k] = (uint8_t)(n >> (8 * k));
      memcpy(piece + 5, s, n);
      plen = 5 + n;
      size_t tries = 0;
      while (tries++ < 64 && !strchr("X\x8c", data[ops[i].at])) i = (size_t)(rnd() % nops);
      at = ops[i].at, drop = strchr("X\x8c", data[at]) ? ops[i].len : 0;
      break;
    }
  }
  if (size - drop + plen > max_size) return LLVMFuzzerMutate(data, size, max_size);
  uint8_t *tmp = malloc(plen ? plen : 1);
  if (!tmp) return size;
  memcpy(tmp, src, plen); /* src may lie in data, which moves below */
  memmove(data + at + plen, data + at + drop, size - at - drop);
  memcpy(data + at, tmp, plen);
  free(tmp);
  return size - drop + plen;
}
