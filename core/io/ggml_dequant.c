/* ggml's quantized types decoded to float32, one function per type, each
 * block as the gguf package's gguf.quants.dequantize decodes it, so that
 * every value is bit-identical to the reference's: the same float32
 * operations in the same order (numpy rounds each one; nothing here may be
 * fused, which io.am's -ffp-contract=off sees to). Where the package has no
 * decoder (Q8_1, Q8_K, Q1_0, Q2_0), ggml's own C reference (ggml-quants.c)
 * is followed, and for Q8_1, which neither decodes (it exists only for
 * matrix products), its layout says the value: d * q, as Q8_0's. The block
 * layouts are ggml-common.h's. */
#include "io_internal.h"

#include <math.h>
#include <string.h>

#include <tstor/codec.h>

#include "ggml_grids.h"
#include "gguf_format.h"

#define QK_K 256

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static float half(const uint8_t *p) { return tstor_f16_to_f32(le16(p)); }

/* Nibble i of a row of n/2 bytes holding n nibbles: the low nibbles of all
 * the bytes first, then the high ones. */
static unsigned nibble(const uint8_t *qs, int i, int n) {
  return i < n / 2 ? qs[i] & 0x0F : qs[i - n / 2] >> 4;
}

/* ------------------------------------------------------------ 32 blocks */

static void deq_Q4_0(const uint8_t *x, float *y) {
  float d = half(x);
  for (int i = 0; i < 32; i++) y[i] = d * (float)((int)nibble(x + 2, i, 32) - 8);
}

static void deq_Q4_1(const uint8_t *x, float *y) {
  float d = half(x), m = half(x + 2);
  for (int i = 0; i < 32; i++) y[i] = d * (float)nibble(x + 4, i, 32) + m;
}

static void deq_Q5_0(const uint8_t *x, float *y) {
  float d = half(x);
  uint32_t qh = le32(x + 2);
  for (int i = 0; i < 32; i++) {
    unsigned q = nibble(x + 6, i, 32) | ((qh >> i) & 1) << 4;
    y[i] = d * (float)((int)q - 16);
  }
}

static void deq_Q5_1(const uint8_t *x, float *y) {
  float d = half(x), m = half(x + 2);
  uint32_t qh = le32(x + 4);
  for (int i = 0; i < 32; i++) y[i] = d * (float)(nibble(x + 8, i, 32) | ((qh >> i) & 1) << 4) + m;
}

static void deq_Q8_0(const uint8_t *x, float *y) {
  float d = half(x);
  for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)x[2 + i] * d;
}

static void deq_Q8_1(const uint8_t *x, float *y) {
  float d = half(x); /* x + 2 holds d * sum(q), for dot products */
  for (int i = 0; i < 32; i++) y[i] = (float)(int8_t)x[4 + i] * d;
}

static void deq_IQ4_NL(const uint8_t *x, float *y) {
  float d = half(x);
  for (int i = 0; i < 32; i++) y[i] = d * (float)kvalues_iq4nl[nibble(x + 2, i, 32)];
}

/* MXFP4's shared exponent, halved as its doubled values ask (ggml's
 * ggml_e8m0_to_fp32_half). */
static float e8m0_half(uint8_t e) {
  uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static void deq_MXFP4(const uint8_t *x, float *y) {
  float d = e8m0_half(x[0]);
  for (int i = 0; i < 32; i++) y[i] = d * (float)kvalues_mxfp4[nibble(x + 1, i, 32)];
}

/* NVFP4's sub-block scale: unsigned e4m3 (bias 7), halved for the doubled
 * values; 0 and 0x7F decode to 0. Every step is exact in float32. */
static float ue4m3_half(uint8_t x) {
  int e = (x >> 3) & 0xF;
  float man = (float)(x & 7);
  float raw = e == 0 ? man * 0x1p-9f : ldexpf(1.0f + man / 8.0f, e - 7);
  return x == 0 || x == 0x7F ? 0.0f : raw * 0.5f;
}

static void deq_NVFP4(const uint8_t *x, float *y) {
  for (int s = 0; s < 4; s++) {
    float d = ue4m3_half(x[s]);
    const uint8_t *qs = x + 4 + 8 * s;
    for (int i = 0; i < 16; i++)
      y[16 * s + i] = d * (float)kvalues_mxfp4[i < 8 ? qs[i] & 0x0F : qs[i - 8] >> 4];
  }
}

static void deq_Q1_0(const uint8_t *x, float *y) {
  float d = half(x), neg = -d;
  for (int i = 0; i < 128; i++) y[i] = (x[2 + i / 8] >> (i % 8)) & 1 ? d : neg;
}

static void deq_Q2_0(const uint8_t *x, float *y) {
  float d = half(x);
  for (int i = 0; i < 64; i++) y[i] = (float)((int)((x[2 + i / 4] >> (2 * (i % 4))) & 3) - 1) * d;
}

/* ------------------------------------------------------------ K-quants */

/* The 2-bit field of element e of a 256-element row of 2 x 32 bytes, four
 * fields a byte: 128 elements a half, 32 a shift. */
static unsigned crumb(const uint8_t *qs, int e) {
  return (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

static void deq_Q2_K(const uint8_t *x, float *y) {
  const uint8_t *sc = x, *qs = x + 16;
  float d = half(x + 80), dmin = half(x + 82);
  for (int e = 0; e < QK_K; e++) {
    float dl = d * (float)(sc[e / 16] & 0xF), ml = dmin * (float)(sc[e / 16] >> 4);
    y[e] = dl * (float)crumb(qs, e) - ml;
  }
}

static void deq_Q3_K(const uint8_t *x, float *y) {
  const uint8_t *hmask = x, *qs = x + 32, *sc = x + 96;
  float d = half(x + 108), dl[16];
  for (int k = 0; k < 16; k++) {
    unsigned lo = (k < 8 ? sc[k] : sc[k - 8] >> 4) & 0xF, hi = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
    dl[k] = d * (float)((int8_t)(lo | hi << 4) - 32);
  }
  for (int e = 0; e < QK_K; e++) {
    int high = ((hmask[e % 32] >> (e / 32)) & 1) ^ 1; /* a clear bit subtracts 4 */
    y[e] = dl[e / 16] * (float)((int)crumb(qs, e) - (high << 2));
  }
}

/* Q4_K's and Q5_K's eight 6-bit scales and mins, packed in 12 bytes. */
static void scale_min_k4(const uint8_t *s, unsigned sc[8], unsigned mn[8]) {
  for (int j = 0; j < 4; j++) {
    sc[j] = s[j] & 0x3F;
    mn[j] = s[4 + j] & 0x3F;
    sc[4 + j] = (s[8 + j] & 0x0F) | ((s[j] >> 2) & 0x30);
    mn[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 2) & 0x30);
  }
}

/* The 4-bit field of element e of a 256-element row of 4 x 32 bytes, two a
 * byte: each 32 bytes give 32 low nibbles, then 32 high ones. */
static unsigned nib_k(const uint8_t *qs, int e) {
  int j = e / 32;
  return (qs[(j / 2) * 32 + e % 32] >> (4 * (j % 2))) & 0xF;
}

static void deq_Q4_K(const uint8_t *x, float *y) {
  float d = half(x), dmin = half(x + 2);
  unsigned sc[8], mn[8];
  scale_min_k4(x + 4, sc, mn);
  for (int e = 0; e < QK_K; e++) {
    float dl = d * (float)sc[e / 32], ml = dmin * (float)mn[e / 32];
    y[e] = dl * (float)nib_k(x + 16, e) - ml;
  }
}

static void deq_Q5_K(const uint8_t *x, float *y) {
  float d = half(x), dmin = half(x + 2);
  const uint8_t *qh = x + 16, *qs = x + 48;
  unsigned sc[8], mn[8];
  scale_min_k4(x + 4, sc, mn);
  for (int e = 0; e < QK_K; e++) {
    float dl = d * (float)sc[e / 32], ml = dmin * (float)mn[e / 32];
    unsigned q = nib_k(qs, e) | ((qh[e % 32] >> (e / 32)) & 1) << 4;
    y[e] = dl * (float)q - ml;
  }
}

static void deq_Q6_K(const uint8_t *x, float *y) {
  const uint8_t *ql = x, *qh = x + 128;
  const int8_t *sc = (const int8_t *)(x + 192);
  float d = half(x + 208);
  for (int e = 0; e < QK_K; e++) {
    int h = e / 128, r = e % 128;
    unsigned lo = (ql[h * 64 + e % 64] >> (4 * (r / 64))) & 0xF;
    unsigned hi = (qh[h * 32 + e % 32] >> (2 * (r / 32))) & 3;
    y[e] = (d * (float)sc[e / 16]) * (float)((int8_t)(lo | hi << 4) - 32);
  }
}

static void deq_Q8_K(const uint8_t *x, float *y) {
  float d;
  uint32_t bits = le32(x);
  memcpy(&d, &bits, sizeof d);
  for (int i = 0; i < QK_K; i++) y[i] = d * (float)(int8_t)x[4 + i];
}

/* ------------------------------------------------------ ternary types */

static void deq_TQ1_0(const uint8_t *x, float *y) {
  static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
  const uint8_t *qs = x, *qh = x + 48;
  float d = half(x + 52);
  for (int e = 0; e < QK_K; e++) {
    uint8_t v; /* a base-3 digit, scaled to the top of a byte (uint8 wraps) */
    if (e < 160)
      v = (uint8_t)(qs[e % 32] * pow3[e / 32]);
    else if (e < 240)
      v = (uint8_t)(qs[32 + (e - 160) % 16] * pow3[(e - 160) / 16]);
    else
      v = (uint8_t)(qh[(e - 240) % 4] * pow3[(e - 240) / 4]);
    y[e] = d * (float)((int)(((unsigned)v * 3) >> 8) - 1);
  }
}

static void deq_TQ2_0(const uint8_t *x, float *y) {
  float d = half(x + 64);
  for (int e = 0; e < QK_K; e++) y[e] = d * (float)((int)crumb(x, e) - 1);
}

/* ---------------------------------------------------------- IQ types */

/* Element k of row r of a grid whose elements lie `step` bits apart. */
static float grid_at(const uint16_t *grid, const int8_t *map, unsigned row, int k, int step) {
  unsigned mask = step == 2 ? 3 : 7;
  return (float)map[(grid[row] >> (step * k)) & mask];
}

static float sign_of(uint8_t signs, int k) { return (signs >> k) & 1 ? -1.0f : 1.0f; }

static void deq_IQ2_XXS(const uint8_t *x, float *y) {
  float d = half(x);
  for (int g = 0; g < 8; g++) {
    uint32_t grid = le32(x + 2 + 8 * g), aux = le32(x + 6 + 8 * g);
    float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
    for (int l = 0; l < 4; l++) {
      uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
      unsigned row = (grid >> (8 * l)) & 0xFF;
      for (int k = 0; k < 8; k++)
        y[32 * g + 8 * l + k] =
            db * grid_at(grid_iq2xxs, map_iq2xxs, row, k, 2) * sign_of(signs, k);
    }
  }
}

static void deq_IQ2_XS(const uint8_t *x, float *y) {
  float d = half(x);
  const uint8_t *sc = x + 66;
  for (int j = 0; j < 32; j++) {
    uint16_t q = le16(x + 2 + 2 * j);
    unsigned s = (sc[j / 4] >> (4 * ((j / 2) % 2))) & 0xF;
    float db = d * (0.5f + (float)s) * 0.25f;
    uint8_t signs = ksigns_iq2xs[q >> 9];
    for (int k = 0; k < 8; k++)
      y[8 * j + k] = db * grid_at(grid_iq2xs, map_iq2xs, q & 511, k, 2) * sign_of(signs, k);
  }
}

static void deq_IQ2_S(const uint8_t *x, float *y) {
  float d = half(x);
  const uint8_t *qs = x + 2, *signs = x + 34, *qh = x + 66, *sc = x + 74;
  for (int j = 0; j < 32; j++) {
    unsigned s = (sc[j / 4] >> (4 * ((j / 2) % 2))) & 0xF;
    float db = d * (0.5f + (float)s) * 0.25f;
    unsigned row = qs[j] | ((qh[j / 4] >> (2 * (j % 4))) & 3) << 8;
    for (int k = 0; k < 8; k++)
      y[8 * j + k] = db * grid_at(grid_iq2s, map_iq2s, row, k, 2) * sign_of(signs[j], k);
  }
}

static void deq_IQ3_XXS(const uint8_t *x, float *y) {
  float d = half(x);
  const uint8_t *qs = x + 2;
  for (int g = 0; g < 8; g++) {
    uint32_t aux = le32(x + 66 + 4 * g);
    float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; l++) {
      uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
      for (int k = 0; k < 8; k++) {
        unsigned row = qs[8 * g + 2 * l + k / 4];
        y[32 * g + 8 * l + k] =
            db * grid_at(grid_iq3xxs, map_iq3xxs, row, k % 4, 4) * sign_of(signs, k);
      }
    }
  }
}

static void deq_IQ3_S(const uint8_t *x, float *y) {
  float d = half(x);
  const uint8_t *qs = x + 2, *qh = x + 66, *signs = x + 74, *sc = x + 106;
  for (int g = 0; g < 8; g++) {
    unsigned s = (sc[g / 2] >> (4 * (g % 2))) & 0xF;
    float db = d * (float)(1 + 2 * s);
    for (int l = 0; l < 4; l++)
      for (int k = 0; k < 8; k++) {
        int j = 8 * g + 2 * l + k / 4;
        unsigned row = qs[j] | ((qh[j / 8] >> (j % 8)) & 1) << 8;
        y[32 * g + 8 * l + k] =
            db * grid_at(grid_iq3s, map_iq3s, row, k % 4, 4) * sign_of(signs[4 * g + l], k);
      }
  }
}

static void deq_IQ1_S(const uint8_t *x, float *y) {
  float d = half(x);
  const uint8_t *qs = x + 2;
  for (int g = 0; g < 8; g++) {
    uint16_t qh = le16(x + 34 + 2 * g);
    float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
    float delta = qh & 0x8000 ? -0.125f : 0.125f;
    for (int l = 0; l < 4; l++) {
      unsigned row = qs[4 * g + l] | ((qh >> (3 * l)) & 7) << 8;
      for (int k = 0; k < 8; k++)
        y[32 * g + 8 * l + k] = dl * (grid_at(grid_iq1s, map_iq1s, row, k, 2) + delta);
    }
  }
}

static void deq_IQ1_M(const uint8_t *x, float *y) {
  const uint8_t *qs = x, *qh = x + 32, *sc = x + 48;
  uint16_t s[4];
  for (int i = 0; i < 4; i++) s[i] = le16(sc + 2 * i);
  /* the block's float16 scale is the top nibbles of the four words */
  uint16_t dbits = (uint16_t)((s[0] & 0xF000) >> 12 | (s[1] & 0xF000) >> 8 | (s[2] & 0xF000) >> 4 |
                              (s[3] & 0xF000));
  float d = tstor_f16_to_f32(dbits);
  for (int j = 0; j < 32; j++) {
    int k16 = j / 2; /* the 3-bit scale of each pair of rows */
    float dl = d * (float)(2 * ((s[k16 / 4] >> (3 * (k16 % 4))) & 7) + 1);
    unsigned h = qh[j / 2] >> (4 * (j % 2));
    unsigned row = qs[j] | (h & 7) << 8;
    float delta = h & 8 ? -0.125f : 0.125f;
    for (int k = 0; k < 8; k++)
      y[8 * j + k] = dl * (grid_at(grid_iq1s, map_iq1s, row, k, 2) + delta);
  }
}

static void deq_IQ4_XS(const uint8_t *x, float *y) {
  float d = half(x);
  uint16_t sh = le16(x + 2);
  const uint8_t *sl = x + 4, *qs = x + 8;
  for (int k = 0; k < 8; k++) {
    unsigned lo = (sl[k / 2] >> (4 * (k % 2))) & 0xF, hi = (sh >> (2 * k)) & 3;
    float dl = d * (float)((int8_t)(lo | hi << 4) - 32);
    for (int i = 0; i < 32; i++)
      y[32 * k + i] = dl * (float)kvalues_iq4nl[nibble(qs + 16 * k, i, 32)];
  }
}

/* ------------------------------------------------------------- table */

typedef void (*block_fn)(const uint8_t *x, float *y);

/* A plain type has no decoder: its dtype converts it. */
#define deq_F32 NULL
#define deq_F16 NULL
#define deq_I8 NULL
#define deq_I16 NULL
#define deq_I32 NULL
#define deq_I64 NULL
#define deq_F64 NULL
#define deq_BF16 NULL
#define DEQ_ENTRY(NAME, id, block, bytes, dtype) [id] = deq_##NAME,
static const block_fn decoders[TSTOR__GGML_TYPE_END] = {TSTOR__GGML_TYPES(DEQ_ENTRY)};

#define TYPE_ENTRY(NAME, id, block, bytes, dtype) [id] = {#NAME, block, bytes, dtype},
static const tstor__io_ggml_type types[TSTOR__GGML_TYPE_END] = {TSTOR__GGML_TYPES(TYPE_ENTRY)};

const tstor__io_ggml_type *tstor__io_ggml_type_of(int64_t id) {
  return id >= 0 && id < TSTOR__GGML_TYPE_END && types[id].name ? &types[id] : NULL;
}

int tstor__io_ggml_type_for(tstor_dtype dt) {
  for (int i = 0; i < TSTOR__GGML_TYPE_END; i++)
    if (types[i].name && types[i].dtype == (int)dt) return i;
  return -1;
}

int tstor__io_ggml_dequantize(int id, const uint8_t *src, int64_t blocks, float *dst) {
  const tstor__io_ggml_type *t = tstor__io_ggml_type_of(id);
  if (!t || !decoders[id]) return TSTOR__ERR(TSTOR_EINVAL, "ggml type %d is no quantized type", id);
  for (int64_t b = 0; b < blocks; b++) decoders[id](src + b * t->bytes, dst + b * t->block);
  return 0;
}

const char *tstor_ggml_type_name(int type) {
  const tstor__io_ggml_type *t = tstor__io_ggml_type_of(type);
  return t ? t->name : NULL;
}

int tstor_ggml_type_block(int type, int64_t *block_size, int64_t *type_size) {
  const tstor__io_ggml_type *t = tstor__io_ggml_type_of(type);
  if (!t) return TSTOR__ERR(TSTOR_EINVAL, "ggml type %d is none of ggml's", type);
  if (block_size) *block_size = t->block;
  if (type_size) *type_size = t->bytes;
  return 0;
}
