/* Transposing copies of host memory (transpose.h): tiles read a source row
 * at a time into a buffer and written a destination row at a time, through
 * register transposes where the machine has them (SSE2 4 x 4 and 8 x 8,
 * AVX2 8 x 8), and bands of tiles that fetch the next band while they go
 * out. Every cache line of either side is touched once. */
#include "internal.h"
#include "host/parallel.h"
#include "host/transpose.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif
#ifdef TSTOR__CLONES
#include <immintrin.h>
#endif

#define TILE TSTOR__TILE
#define BAND_ROWS TSTOR__BAND_ROWS
#define BAND_TILE TSTOR__BAND_TILE
/* Tiles are visited in blocks of SUPER x SUPER (tstor__tile_order): a
 * block's source and destination rows then span 2 x 512 pages at most,
 * within the second-level TLB (1.2x for the transposed 8192 x 8192 copy). */
#define SUPER 8
_Static_assert(BAND_ROWS <= TILE && BAND_TILE <= TILE, "a band's tiles fit the tile buffers");
_Static_assert(BAND_ROWS % 8 == 0 && BAND_TILE % 8 == 0,
               "band_4byte_avx2 goes 8 columns at a time, 8 x 8 a transpose");

typedef tstor__ahead ahead;

/* A tile through a buffer: the source's rows are read whole into it, then
 * the destination's rows are written whole from it. Reading the tile
 * straight across instead would visit 64 lines a power-of-two stride apart,
 * which share one L1 set and evict each other. */
#define TILE_BUFFERED(T)                                                                 \
  do {                                                                                   \
    T(*buf)[TILE] = (T(*)[TILE])raw;                                                     \
    for (int64_t i = 0; i < ni; i++) memcpy(buf[i], s + i * si, (size_t)nj * sizeof(T)); \
    for (int64_t j = 0; j < nj; j++) {                                                   \
      T *dp = (T *)(d + j * dj);                                                         \
      for (int64_t i = 0; i < ni; i++) dp[i] = buf[i][j];                                \
    }                                                                                    \
  } while (0)

static inline void fetch_ahead(ahead *a, int lines) {
  for (; lines > 0 && a->row < a->rows; lines--) {
    uintptr_t r = (uintptr_t)(a->src + a->row * a->stride);
    int64_t lead = (int64_t)(r & 63);
    /* into L2 (locality 2) */
    __builtin_prefetch((const void *)(r - (uintptr_t)lead + (uintptr_t)a->offset), 0, 2);
    a->offset += 64;
    if (a->offset >= lead + a->len) {
      a->row++;
      a->offset = 0;
    }
  }
}

#if defined(__SSE2__)
/* 4-byte elements: the buffer is transposed 4 x 4 at a time in registers.
 * With `stream`, a destination too large for the caches is written with
 * non-temporal stores, which skip reading each line before writing it. */
static void tile_4byte(char *d, int64_t dj, const char *s, int64_t si, int64_t ni, int64_t nj,
                       int stream, ahead *next) {
  _Alignas(64) float buf[TILE][TILE];
  for (int64_t i = 0; i < ni; i++) memcpy(buf[i], s + i * si, (size_t)nj * 4);
  int64_t i4 = ni & ~(int64_t)3, j4 = nj & ~(int64_t)3;
  stream = stream && ((uintptr_t)d % 16) == 0 && dj % 16 == 0;
  for (int64_t j = 0; j < j4; j += 4) {
    float *d0 = (float *)(d + j * dj), *d1 = (float *)(d + (j + 1) * dj);
    float *d2 = (float *)(d + (j + 2) * dj), *d3 = (float *)(d + (j + 3) * dj);
    /* Two copies of the loop on purpose: the store is chosen once per column
     * block, not per 4x4 tile in the hot loop. */
    if (stream) {
      for (int64_t i = 0; i < i4; i += 4) {
        __m128 r0 = _mm_load_ps(&buf[i][j]), r1 = _mm_load_ps(&buf[i + 1][j]);
        __m128 r2 = _mm_load_ps(&buf[i + 2][j]), r3 = _mm_load_ps(&buf[i + 3][j]);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_stream_ps(d0 + i, r0);
        _mm_stream_ps(d1 + i, r1);
        _mm_stream_ps(d2 + i, r2);
        _mm_stream_ps(d3 + i, r3);
        if (next) fetch_ahead(next, 1);
      }
    } else {
      for (int64_t i = 0; i < i4; i += 4) {
        __m128 r0 = _mm_load_ps(&buf[i][j]), r1 = _mm_load_ps(&buf[i + 1][j]);
        __m128 r2 = _mm_load_ps(&buf[i + 2][j]), r3 = _mm_load_ps(&buf[i + 3][j]);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        _mm_storeu_ps(d0 + i, r0);
        _mm_storeu_ps(d1 + i, r1);
        _mm_storeu_ps(d2 + i, r2);
        _mm_storeu_ps(d3 + i, r3);
      }
    }
    for (int64_t i = i4; i < ni; i++) {
      d0[i] = buf[i][j];
      d1[i] = buf[i][j + 1];
      d2[i] = buf[i][j + 2];
      d3[i] = buf[i][j + 3];
    }
  }
  for (int64_t j = j4; j < nj; j++) {
    float *dp = (float *)(d + j * dj);
    for (int64_t i = 0; i < ni; i++) dp[i] = buf[i][j];
  }
}
#endif

#if defined(__SSE2__)
/* 2-byte elements: the buffer is transposed 8 x 8 at a time in registers
 * into a second buffer, whose rows then go out whole, a line after another:
 * eight rows a block would leave eight lines a quarter written at once. */
static void tile_2byte(char *d, int64_t dj, const char *s, int64_t si, int64_t ni, int64_t nj,
                       int stream) {
  _Alignas(64) uint16_t buf[TILE][TILE], out[TILE][TILE];
  for (int64_t i = 0; i < ni; i++) memcpy(buf[i], s + i * si, (size_t)nj * 2);
  int64_t i8 = ni & ~(int64_t)7, j8 = nj & ~(int64_t)7;
  for (int64_t j = 0; j < j8; j += 8)
    for (int64_t i = 0; i < i8; i += 8) {
      __m128i r[8], a[8], b[8];
      for (int k = 0; k < 8; k++)
        r[k] = _mm_load_si128((const __m128i *)(const void *)&buf[i + k][j]);
      /* pairs of rows interleaved, then pairs of pairs, then the halves */
      for (int k = 0; k < 4; k++) {
        a[2 * k] = _mm_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
        a[2 * k + 1] = _mm_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
      }
      for (int k = 0; k < 2; k++) {
        b[4 * k] = _mm_unpacklo_epi32(a[4 * k], a[4 * k + 2]);
        b[4 * k + 1] = _mm_unpackhi_epi32(a[4 * k], a[4 * k + 2]);
        b[4 * k + 2] = _mm_unpacklo_epi32(a[4 * k + 1], a[4 * k + 3]);
        b[4 * k + 3] = _mm_unpackhi_epi32(a[4 * k + 1], a[4 * k + 3]);
      }
      for (int k = 0; k < 4; k++) {
        __m128i *o = (__m128i *)(void *)&out[j + 2 * k][i];
        _mm_store_si128(o, _mm_unpacklo_epi64(b[k], b[k + 4]));
        _mm_store_si128(o + TILE / 8, _mm_unpackhi_epi64(b[k], b[k + 4])); /* the next row */
      }
    }
  for (int64_t j = 0; j < nj; j++) {
    int64_t from = j < j8 ? i8 : 0;
    for (int64_t i = from; i < ni; i++) out[j][i] = buf[i][j];
  }
  stream = stream && ((uintptr_t)d % 16) == 0 && dj % 16 == 0;
  for (int64_t j = 0; j < nj; j++) {
    if (stream)
      tstor__stream_copy(d + j * dj, out[j], (size_t)ni * 2);
    else
      memcpy(d + j * dj, out[j], (size_t)ni * 2);
  }
}

/* 8-byte elements to a destination that streams, d and dj aligned to 16
 * bytes: 2 x 2 blocks in registers, four of them a step, so that each
 * destination row gets 64 bytes, a whole line where the row is aligned,
 * before the next row. With ordinary stores the plain loop is faster
 * (1.13x), and the tile goes there instead. */
static void tile_8byte_stream(char *d, int64_t dj, const char *s, int64_t si, int64_t ni,
                              int64_t nj) {
  _Alignas(64) uint64_t buf[TILE][TILE];
  for (int64_t i = 0; i < ni; i++) memcpy(buf[i], s + i * si, (size_t)nj * 8);
  int64_t i8 = ni & ~(int64_t)7, j2 = nj & ~(int64_t)1;
  for (int64_t j = 0; j < j2; j += 2) {
    uint64_t *d0 = (uint64_t *)(void *)(d + j * dj), *d1 = (uint64_t *)(void *)(d + (j + 1) * dj);
    for (int64_t i = 0; i < i8; i += 8) {
      __m128i lo[4], hi[4];
      for (int q = 0; q < 4; q++) {
        __m128i x = _mm_load_si128((const __m128i *)(const void *)&buf[i + 2 * q][j]);
        __m128i y = _mm_load_si128((const __m128i *)(const void *)&buf[i + 2 * q + 1][j]);
        lo[q] = _mm_unpacklo_epi64(x, y);
        hi[q] = _mm_unpackhi_epi64(x, y);
      }
      for (int q = 0; q < 4; q++) _mm_stream_si128((__m128i *)(void *)(d0 + i + 2 * q), lo[q]);
      for (int q = 0; q < 4; q++) _mm_stream_si128((__m128i *)(void *)(d1 + i + 2 * q), hi[q]);
    }
    for (int64_t i = i8; i < ni; i++) {
      d0[i] = buf[i][j];
      d1[i] = buf[i][j + 1];
    }
  }
  for (int64_t j = j2; j < nj; j++) {
    uint64_t *dp = (uint64_t *)(void *)(d + j * dj);
    for (int64_t i = 0; i < ni; i++) dp[i] = buf[i][j];
  }
}
#endif

#ifdef TSTOR__CLONES
/* Rows r[0], r[stride], ... r[7 * stride] of 8 floats transposed into c. */
__attribute__((target("avx2"))) static inline void transpose8(const float *r, int64_t stride,
                                                              __m256 c[8]) {
  __m256 r0 = _mm256_load_ps(r), r1 = _mm256_load_ps(r + stride);
  __m256 r2 = _mm256_load_ps(r + 2 * stride), r3 = _mm256_load_ps(r + 3 * stride);
  __m256 r4 = _mm256_load_ps(r + 4 * stride), r5 = _mm256_load_ps(r + 5 * stride);
  __m256 r6 = _mm256_load_ps(r + 6 * stride), r7 = _mm256_load_ps(r + 7 * stride);
  /* pairs of rows interleaved, then pairs of pairs, then the halves */
  __m256 a0 = _mm256_unpacklo_ps(r0, r1), a1 = _mm256_unpackhi_ps(r0, r1);
  __m256 a2 = _mm256_unpacklo_ps(r2, r3), a3 = _mm256_unpackhi_ps(r2, r3);
  __m256 a4 = _mm256_unpacklo_ps(r4, r5), a5 = _mm256_unpackhi_ps(r4, r5);
  __m256 a6 = _mm256_unpacklo_ps(r6, r7), a7 = _mm256_unpackhi_ps(r6, r7);
  __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xee);
  __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xee);
  __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xee);
  __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xee);
  c[0] = _mm256_permute2f128_ps(b0, b4, 0x20);
  c[1] = _mm256_permute2f128_ps(b1, b5, 0x20);
  c[2] = _mm256_permute2f128_ps(b2, b6, 0x20);
  c[3] = _mm256_permute2f128_ps(b3, b7, 0x20);
  c[4] = _mm256_permute2f128_ps(b0, b4, 0x31);
  c[5] = _mm256_permute2f128_ps(b1, b5, 0x31);
  c[6] = _mm256_permute2f128_ps(b2, b6, 0x31);
  c[7] = _mm256_permute2f128_ps(b3, b7, 0x31);
}

/* Rows i to i + 15 of a tile's columns j to j + 7 (b, rows ld floats apart)
 * to the destination's rows j to j + 7, 64 bytes to each row in turn (why:
 * tile_4byte_avx2). */
__attribute__((target("avx2"), always_inline)) static inline void put_16x8_avx2(
    char *d, int64_t dj, const float *b, int64_t ld, int64_t j, int64_t i, int stream) {
  __m256 c[8], e[8];
  transpose8(b, ld, c);
  transpose8(b + 8 * ld, ld, e);
  for (int k = 0; k < 8; k++) {
    float *o = (float *)(void *)(d + (j + k) * dj) + i;
    if (stream) {
      _mm256_stream_ps(o, c[k]);
      _mm256_stream_ps(o + 8, e[k]);
    } else {
      _mm256_storeu_ps(o, c[k]);
      _mm256_storeu_ps(o + 8, e[k]);
    }
  }
}

/* The same with AVX2, 8 x 8 elements a register transpose: fewer
 * instructions an element than the 4 x 4 one (1.15x in L2). Two blocks at a
 * time, so that each destination row gets 64 bytes, a whole line where the
 * row is aligned, before the next row: eight rows half written at once
 * would keep eight lines open. Streams only to a destination aligned to 32
 * bytes, else calls the SSE version. */
__attribute__((target("avx2"))) static void tile_4byte_avx2(char *d, int64_t dj, const char *s,
                                                            int64_t si, int64_t ni, int64_t nj,
                                                            int stream, ahead *next) {
  if (stream && (((uintptr_t)d % 32) != 0 || dj % 32 != 0)) {
    tile_4byte(d, dj, s, si, ni, nj, stream, next);
    return;
  }
  _Alignas(64) float buf[TILE][TILE];
  for (int64_t i = 0; i < ni; i++) memcpy(buf[i], s + i * si, (size_t)nj * 4);
  int64_t i8 = ni & ~(int64_t)7, i16 = ni & ~(int64_t)15, j8 = nj & ~(int64_t)7;
  for (int64_t j = 0; j < j8; j += 8) {
    for (int64_t i = 0; i < i16; i += 16) {
      put_16x8_avx2(d, dj, &buf[i][j], TILE, j, i, stream);
      if (next) fetch_ahead(next, 8);
    }
    if (i16 < i8) {
      __m256 c[8];
      transpose8(&buf[i16][j], TILE, c);
      for (int k = 0; k < 8; k++) {
        float *o = (float *)(d + (j + k) * dj) + i16;
        if (stream)
          _mm256_stream_ps(o, c[k]);
        else
          _mm256_storeu_ps(o, c[k]);
      }
      if (next) fetch_ahead(next, 4);
    }
    for (int64_t k = 0; k < 8; k++) {
      float *dp = (float *)(d + (j + k) * dj);
      for (int64_t i = i8; i < ni; i++) dp[i] = buf[i][j + k];
    }
  }
  for (int64_t j = j8; j < nj; j++) {
    float *dp = (float *)(d + j * dj);
    for (int64_t i = 0; i < ni; i++) dp[i] = buf[i][j];
  }
}

/* A band's rows of a tile's columns j to j + 7 (b, rows BAND_TILE floats
 * apart) to the destination's rows j to j + 7, each row's BAND_ROWS * 4
 * bytes in one run before the next row, and a line of the next band asked
 * into L2 for each line written, after every four rows (whole runs gained up
 * to 0.05 of a copy over two halves eight rows apart). */
__attribute__((target("avx2"), always_inline)) static inline void put_band_x8_avx2(
    char *d, int64_t dj, const float *b, int64_t j, ahead *next) {
  __m256 c[BAND_ROWS / 8][8];
  for (int q = 0; q < BAND_ROWS / 8; q++) transpose8(b + 8 * q * BAND_TILE, BAND_TILE, c[q]);
  for (int k = 0; k < 8; k++) {
    float *o = (float *)(void *)(d + (j + k) * dj);
    for (int q = 0; q < BAND_ROWS / 8; q++) _mm256_stream_ps(o + 8 * q, c[q][k]);
    if (k % 4 == 3) fetch_ahead(next, BAND_ROWS * 4 * 4 / 64);
  }
}

/* A band's whole tiles of BAND_ROWS x BAND_TILE elements, with AVX2 and
 * streaming stores to a destination aligned to 32 bytes: the register
 * transposes of tile_4byte_avx2, each destination row's run written whole
 * (put_band_x8_avx2), in one call for the band, through a 4 KiB buffer that
 * the loads fill directly (0.79-0.82 of a streaming copy, where a tile at a
 * time through memcpy made 0.72-0.80). */
__attribute__((target("avx2"))) static void band_4byte_avx2(char *d, int64_t dj, const char *s,
                                                            int64_t si, int64_t nj, ahead *next) {
  _Alignas(64) float buf[BAND_ROWS][BAND_TILE];
  for (int64_t j = 0; j < nj; j += BAND_TILE) {
    for (int i = 0; i < BAND_ROWS; i++) {
      const float *r = (const float *)(const void *)(s + i * si) + j;
      for (int k = 0; k < BAND_TILE; k += 8) _mm256_store_ps(&buf[i][k], _mm256_loadu_ps(r + k));
    }
    for (int jj = 0; jj < BAND_TILE; jj += 8) put_band_x8_avx2(d, dj, &buf[0][jj], j + jj, next);
  }
}
#endif

void tstor__transpose_tile(char *d, int64_t dj, const char *s, int64_t si, int64_t ni, int64_t nj,
                           size_t es, int stream, tstor__ahead *next) {
  _Alignas(64) unsigned char raw[TILE * TILE * 8];
  switch (es) {
    case 1: TILE_BUFFERED(uint8_t); break;
    case 2:
#if defined(__SSE2__)
      tile_2byte(d, dj, s, si, ni, nj, stream);
#else
      TILE_BUFFERED(uint16_t);
#endif
      break;
    case 4:
#ifdef TSTOR__CLONES
      if (tstor__simd(TSTOR__SIMD_AVX2)) {
        tile_4byte_avx2(d, dj, s, si, ni, nj, stream, next);
        break;
      }
#endif
#if defined(__SSE2__)
      tile_4byte(d, dj, s, si, ni, nj, stream, next);
#else
      (void)stream;
      (void)next;
      TILE_BUFFERED(uint32_t);
#endif
      break;
    case 8:
#if defined(__SSE2__)
      if (stream && ((uintptr_t)d % 16) == 0 && dj % 16 == 0) {
        tile_8byte_stream(d, dj, s, si, ni, nj);
        break;
      }
#endif
      TILE_BUFFERED(uint64_t);
      break;
    default:
      for (int64_t j = 0; j < nj; j++)
        for (int64_t i = 0; i < ni; i++)
          memcpy(d + i * (int64_t)es + j * dj, s + i * si + j * (int64_t)es, es);
  }
}

void tstor__transpose_band(char *d, int64_t dj, const char *s, int64_t si, int64_t ni, int64_t nj,
                           size_t es, int stream, tstor__ahead *next) {
  int64_t j = 0;
#ifdef TSTOR__CLONES
  if (es == 4 && ni == BAND_ROWS && stream && (uintptr_t)d % 32 == 0 && dj % 32 == 0 &&
      tstor__simd(TSTOR__SIMD_AVX2)) {
    j = nj / BAND_TILE * BAND_TILE;
    band_4byte_avx2(d, dj, s, si, j, next);
  }
#endif
  /* the last, narrower tile, a short band and a store trial's ordinary
   * stores: tile by tile */
  for (; j < nj; j += BAND_TILE)
    tstor__transpose_tile(d + j * dj, dj, s + j * (int64_t)es, si, ni,
                          nj - j < BAND_TILE ? nj - j : BAND_TILE, es, stream, next);
}

/* Blocks are narrower in the last block column, shorter in the last block
 * row; block columns follow each other. */
void tstor__tile_order(int64_t k, int64_t nti, int64_t ntj, int64_t *ti, int64_t *tj) {
  int64_t col = k / (nti * SUPER);
  int64_t w = ntj - col * SUPER < SUPER ? ntj - col * SUPER : SUPER;
  int64_t r = k - col * nti * SUPER;
  int64_t row = r / (SUPER * w);
  int64_t h = nti - row * SUPER < SUPER ? nti - row * SUPER : SUPER;
  r -= row * SUPER * w;
  *tj = col * SUPER + r / h;
  *ti = row * SUPER + r % h;
}

void tstor__read_in_order(const char *s, int64_t stride, int64_t n, int64_t len) {
  unsigned char acc = 0;
  for (int64_t r = 0; r < n; r++) {
    const volatile unsigned char *q = (const volatile unsigned char *)(s + r * stride);
    for (int64_t off = 0; off < len; off += 64) acc |= q[off];
    acc |= q[len - 1];
  }
  __asm__ volatile("" : : "r"(acc));
}
