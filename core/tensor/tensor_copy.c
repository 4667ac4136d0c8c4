/* Data operations on tensors: the strided copy engine (copy_, contiguous,
 * clone, to, fill, element access, arrays) and creation with data.
 *
 * Every transfer is planned the way PyTorch's TensorIterator plans it: size-1
 * dimensions dropped, dimensions ordered by the destination's strides (the
 * source's breaking ties), then neighbours that are contiguous together
 * merged. A plan that ends as one contiguous run is a memcpy or one
 * conversion; a plan whose source is contiguous along another dimension than
 * the destination (a transpose, NCHW -> NHWC) is copied in square tiles that
 * stay in the L1 cache, or, large and of 4-byte elements that stream, in
 * bands of rows, each fetched while the one before goes out (BAND_ROWS);
 * anything else row by row.
 * Large plans are split over the thread pool. Devices that are not host
 * memory use their backend's strided copy when it has one, else the bytes
 * spanned are staged through host memory. */
#include "tensor_internal.h"

#include <inttypes.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif
#ifdef TSTOR__CLONES
#include <immintrin.h>
#endif

#define MAXD TSTOR_TENSOR_MAX_DIM
/* Elements of a row handed out as one work item. */
#define ROW_CHUNK ((int64_t)16384)
/* Tile edge for transposing copies: 64 x 64 elements of up to 8 bytes is
 * 32 KiB per side at most, within L1 and L2 on every recent core. */
#ifndef TILE
#define TILE 64
#endif
/* Transposing copies visit their tiles in blocks of SUPER x SUPER tiles,
 * down the destination's rows first. A block's source and destination rows
 * then span 2 x 512 pages at most, within the second-level TLB, and the
 * lines the hardware prefetches past a tile's 256 bytes of a row are still in
 * L2 when the next tile of the block reads them. Visiting the whole column of
 * tiles first instead (8192 rows of a transposed 8192 x 8192 matrix) touched
 * a new page for every 256 bytes and threw the prefetched lines away; the
 * blocks made that copy about 1.2x faster on the 2-vCPU EPYC VM. */
#define SUPER 8
/* Large transposing copies of 4-byte elements whose destination streams go
 * in bands instead: BAND_ROWS source rows (dim 0) by a part of each, the
 * rows cut into equal parts of BAND_ROW_BYTES at most, and fewer columns
 * where the band's destination rows would lie on more than BAND_DST_PAGES
 * pages of 4 KiB. A band goes out in tiles of its rows by BAND_TILE columns,
 * each destination row getting the band's 128 bytes in one run, and
 * meanwhile the band the thread copies next is asked into L2 a line for each
 * line written, so that reads and writes overlap as in a plain copy; a
 * thread's first band is read in order before it starts. Two bands of 32
 * rows by 8 KiB take half of a 1 MiB L2. On the 2-vCPU EPYC VM, against a
 * streaming copy of the same bytes in the same run, this took the transposed
 * 8192 x 8192 float32 copy (parts of 4 KiB) from 0.69-0.80 (each band read
 * in order, then sent out) to 0.79-0.85 when its memory was slow and from
 * 0.50-0.63 to 0.63-0.80 when fast, and NCHW to NHWC (parts of 6 KiB) from
 * 0.78-0.85 to 0.84-0.89 (slow). There reading alone took 0.6-0.7 of a
 * copy's time and writing in order alone as long: without the overlap the
 * two halves of a transpose cannot reach 0.8 of a copy. The page bound is
 * that VM's second-level TLB, whose entries cover 4 KiB even where the guest
 * maps 2 MiB: parts of 8 KiB of the 8192 x 8192 matrix, whose destination
 * rows are 32 KiB apart, ran about 0.95x those of 4 KiB in 4 KiB pages, as
 * PyTorch's buffers have. Loads of the next band in place of the prefetches
 * stalled on their misses (0.6x); 64-row bands, whose 256-byte runs write
 * as fast as writing in order, ran 0.88-0.9x; parts of 12-16 KiB of the
 * matrix 0.82-0.98x; NCHW's whole rows 1.0-1.08x in 2 MiB pages but 0.86x
 * in 4 KiB ones. With ordinary stores bands were slower than tiles in
 * blocks (0.83-0.85x), and for 2- and 8-byte elements no faster (1.00x and
 * 0.97x with their register transposes). Parts of 512 bytes to 2 KiB, and
 * tiles loaded straight from the source rows without band_4byte_avx2's
 * buffer, each gained up to 0.09 of a copy where the source has 4 KiB pages
 * and lost up to 0.22 where it has 2 MiB ones, whose rows 32 KiB apart share
 * few sets of the physically indexed L2. A pointer does not tell its page
 * size; the buffer and parts of 4 KiB lose least on both. */
#define BAND_ROWS 32
#define BAND_ROW_BYTES ((int64_t)8192)
#define BAND_DST_PAGES ((int64_t)1024)
#define BAND_TILE 32
_Static_assert(BAND_ROWS <= TILE && BAND_TILE <= TILE, "a band's tiles fit the tile buffers");
_Static_assert(BAND_ROWS % 8 == 0 && BAND_TILE % 8 == 0,
               "band_4byte_avx2 goes 8 columns at a time, 8 x 8 a transpose");
/* Elements converted at a time through the stack when a side is strided. */
#define GATHER 256

typedef struct plan {
  int nd;
  int64_t size[MAXD];
  int64_t ds[MAXD], ss[MAXD]; /* bytes */
  char *dst;
  const char *src;
  tstor_dtype dd, sd;
  size_t des, ses;
  int same;   /* same dtype: bytes move unchanged */
  int serial; /* source and destination overlap: one element after another */
  int ordered; /* destination elements may share bytes: PyTorch's order, one thread */
  int tile;   /* 0, or the dimension along which the source is contiguous */
  int stream; /* the destination is too large for the caches: non-temporal stores */
  int band;   /* tile set and the items are bands */
  unsigned what; /* plan_what where the store is chosen call by call */
  int64_t nchunk0, ntile, items;
  int64_t step0, stept; /* an item's extent along dim 0 and the tile dimension */
} plan;

/* ---------------------------------------------------------------- plans */

/* PyTorch's reorder_dimensions comparison: >0 when dim a should go after b
 * (further out), <0 when before, 0 when undecided. */
static int should_swap(const void *ctx, int a, int b) {
  const plan *p = ctx;
  const int64_t *st[2] = {p->ds, p->ss};
  for (int k = 0; k < 2; k++) {
    int64_t s0 = st[k][a], s1 = st[k][b];
    if (s0 == 0 || s1 == 0) continue;
    if (s0 < s1) return -1;
    if (s0 > s1) return 1;
    if (p->size[a] > p->size[b]) return 1;
  }
  return 0;
}

/* Fills p's dims from a layout: dims in elements, innermost first after
 * ordering, merged where contiguous together. Returns 0 when there are no
 * elements. */
static int64_t plan_build(plan *p, int ndim, const int64_t *sizes, const int64_t *dstr,
                          const int64_t *sstr) {
  int n = 0;
  int64_t numel = 1;
  for (int i = 0; i < ndim; i++) numel *= sizes[i];
  if (numel == 0) return 0;
  /* innermost first, as TensorIterator's initial permutation */
  for (int i = ndim - 1; i >= 0; i--) {
    if (sizes[i] == 1) continue;
    p->size[n] = sizes[i];
    p->ds[n] = dstr[i] * (int64_t)p->des;
    p->ss[n] = sstr[i] * (int64_t)p->ses;
    n++;
  }
  /* insertion sort with ambiguous comparisons, as TensorIterator */
  int perm[MAXD];
  for (int i = 0; i < n; i++) perm[i] = i;
  tstor__reorder_dims(n, perm, should_swap, p);
  int64_t size[MAXD], ds[MAXD], ss[MAXD];
  for (int i = 0; i < n; i++) {
    size[i] = p->size[perm[i]];
    ds[i] = p->ds[perm[i]];
    ss[i] = p->ss[perm[i]];
  }
  /* coalesce neighbours contiguous together in both operands */
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (m > 0 && ds[i] == p->ds[m - 1] * p->size[m - 1] &&
        ss[i] == p->ss[m - 1] * p->size[m - 1]) {
      p->size[m - 1] *= size[i];
      continue;
    }
    p->size[m] = size[i];
    p->ds[m] = ds[i];
    p->ss[m] = ss[i];
    m++;
  }
  if (m == 0) { /* one element */
    p->size[0] = 1;
    p->ds[0] = (int64_t)p->des;
    p->ss[0] = (int64_t)p->ses;
    m = 1;
  }
  p->nd = m;
  return numel;
}

/* Tells one transposing copy from another for the store trials (FNV-1a over
 * the dtypes, sizes and strides): two shapes of one size class can run at
 * speeds far apart. */
static unsigned plan_what(const plan *p) {
  uint32_t h = 2166136261u;
  int64_t words[2 + 3 * MAXD];
  int n = 0;
  words[n++] = p->dd * 64 + p->sd;
  words[n++] = p->nd;
  for (int d = 0; d < p->nd; d++) {
    words[n++] = p->size[d];
    words[n++] = p->ds[d];
    words[n++] = p->ss[d];
  }
  const unsigned char *b = (const unsigned char *)words;
  for (size_t i = 0; i < (size_t)n * sizeof words[0]; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

/* Chooses the work split and the store once pointers and the serial flag
 * are known. Returns whether the plan's store is chosen call by call (a large
 * transposing copy). */
static int plan_split(plan *p, int64_t numel) {
  p->tile = 0;
  p->band = 0;
  if (p->same && !p->serial && !p->ordered && p->nd >= 2 && p->ds[0] == (int64_t)p->des &&
      p->ss[0] != (int64_t)p->ses && p->size[0] >= 16) {
    for (int k = 1; k < p->nd; k++)
      if (p->ss[k] == (int64_t)p->ses && p->size[k] >= 16) {
        p->tile = k;
        break;
      }
  }
  int64_t outer = 1;
  for (int d = 1; d < p->nd; d++)
    if (d != p->tile) outer *= p->size[d];
  /* Non-temporal stores pay off for large destinations (the NHWC permute's
   * copy_ 1.6x faster). Where the tile's destination rows are a multiple of
   * 4 KiB apart they once measured slower, 0.8x for the transposed 8192 x
   * 8192 copy; with the tiles in blocks they measured 1.4x faster there as
   * well, as ordinary stores to rows 32 KiB apart share a few sets of each
   * cache and evict each other's lines before they are whole. Trials of
   * whole calls choose anyway (stores.c), in the split chosen here for the
   * current choice. */
  int can_stream = p->tile && (size_t)numel * p->des >= TSTOR__STREAM_MIN_BYTES;
  p->what = can_stream ? plan_what(p) : 0;
  p->stream = can_stream && tstor__store_streaming(TSTOR_WORK_TRANSPOSE, p->what,
                                                   (size_t)numel * (p->des + p->ses));
  if (p->tile) {
#if defined(__SSE2__) /* where the 4-byte tiles stream */
    p->band = p->stream && p->des == 4 && p->size[0] >= BAND_ROWS;
#endif
    p->step0 = TILE;
    p->stept = TILE;
    if (p->band) { /* the source's rows cut into equal parts */
      int64_t cols = BAND_ROW_BYTES / 4;
      int64_t page_share = p->ds[p->tile] < 4096 ? p->ds[p->tile] : 4096;
      if (cols * page_share > BAND_DST_PAGES * 4096) cols = BAND_DST_PAGES * 4096 / page_share;
      int64_t parts = (p->size[p->tile] + cols - 1) / cols;
      p->step0 = BAND_ROWS;
      p->stept = ((p->size[p->tile] + parts - 1) / parts + 7) / 8 * 8;
    }
    p->ntile = (p->size[p->tile] + p->stept - 1) / p->stept;
  } else {
    p->step0 = ROW_CHUNK;
    p->stept = 1;
    p->ntile = 1;
  }
  p->nchunk0 = (p->size[0] + p->step0 - 1) / p->step0;
  p->items = outer * p->nchunk0 * p->ntile;
  return can_stream;
}

/* ------------------------------------------------------------- kernels */

#define ROW_LOOP(T)                                                    \
  for (int64_t i = 0; i < n; i++)                                      \
    *(T *)(d + i * dstep) = *(const T *)(s + i * sstep);

typedef struct u128 {
  uint64_t lo, hi;
} u128;

/* n elements of es bytes, unchanged. */
static void row_same(char *d, int64_t dstep, const char *s, int64_t sstep, int64_t n, size_t es,
                     int serial) {
  if (!serial && dstep == (int64_t)es && sstep == (int64_t)es) {
    memcpy(d, s, (size_t)n * es);
    return;
  }
  switch (es) {
  case 1: ROW_LOOP(uint8_t) break;
  case 2: ROW_LOOP(uint16_t) break;
  case 4: ROW_LOOP(uint32_t) break;
  case 8: ROW_LOOP(uint64_t) break;
  case 16: ROW_LOOP(u128) break;
  default:
    for (int64_t i = 0; i < n; i++) memmove(d + i * dstep, s + i * sstep, es);
  }
}

/* n elements converted; a strided side goes through a stack buffer. */
static void row_convert(const plan *p, char *d, int64_t dstep, const char *s, int64_t sstep,
                        int64_t n) {
  size_t des = p->des, ses = p->ses;
  if (p->serial) {
    for (int64_t i = 0; i < n; i++)
      tstor__convert_serial(d + i * dstep, p->dd, s + i * sstep, p->sd, 1);
    return;
  }
  if (dstep == (int64_t)des && sstep == (int64_t)ses) {
    tstor__convert_serial(d, p->dd, s, p->sd, (size_t)n);
    return;
  }
  _Alignas(16) unsigned char sbuf[GATHER * 16], dbuf[GATHER * 16];
  for (int64_t i = 0; i < n; i += GATHER) {
    int64_t k = n - i < GATHER ? n - i : GATHER;
    const char *sp = s + i * sstep;
    if (sstep != (int64_t)ses) {
      row_same((char *)sbuf, (int64_t)ses, sp, sstep, k, ses, 0);
      sp = (const char *)sbuf;
    }
    char *dp = d + i * dstep;
    if (dstep == (int64_t)des) {
      tstor__convert_serial(dp, p->dd, sp, p->sd, (size_t)k);
    } else {
      tstor__convert_serial(dbuf, p->dd, sp, p->sd, (size_t)k);
      row_same(dp, dstep, (const char *)dbuf, (int64_t)des, k, des, 0);
    }
  }
}

/* A tile: ni elements along dim 0 (contiguous in dst) by nj along the tile
 * dimension (contiguous in src). Rows of the source are read whole into a
 * buffer, then the destination's rows are written whole from it: every cache
 * line of either side is touched once. Reading the tile straight across
 * instead would visit 64 lines a power-of-two stride apart, which share one
 * L1 set and evict each other. */
#define TILE_BUFFERED(T)                                                       \
  do {                                                                         \
    T(*buf)[TILE] = (T(*)[TILE])raw;                                           \
    for (int64_t i = 0; i < ni; i++) memcpy(buf[i], s + i * si, (size_t)nj * sizeof(T)); \
    for (int64_t j = 0; j < nj; j++) {                                         \
      T *dp = (T *)(d + j * dj);                                               \
      for (int64_t i = 0; i < ni; i++) dp[i] = buf[i][j];                      \
    }                                                                          \
  } while (0)

/* The lines of the band a thread copies next, asked into L2 a few at a time
 * while the current band goes out (run_items). */
typedef struct ahead {
  const char *s;
  int64_t stride, len; /* a row's bytes */
  int64_t row, rows;
  int64_t off; /* from the line where the row starts */
} ahead;

static inline void fetch_ahead(ahead *a, int lines) {
  for (; lines > 0 && a->row < a->rows; lines--) {
    uintptr_t r = (uintptr_t)(a->s + a->row * a->stride);
    int64_t lead = (int64_t)(r & 63);
    __builtin_prefetch((const void *)(r - (uintptr_t)lead + (uintptr_t)a->off), 0, 2); /* to L2 */
    a->off += 64;
    if (a->off >= lead + a->len) {
      a->row++;
      a->off = 0;
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
 * before the next row. With ordinary stores the plain loop measured faster
 * (1.13x on the EPYC VM), and the tile goes there instead. */
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
__attribute__((target("avx2"), always_inline)) static inline void
put_16x8_avx2(char *d, int64_t dj, const float *b, int64_t ld, int64_t j, int64_t i, int stream) {
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
 * instructions an element than the 4 x 4 one (1.15x in L2 on the EPYC VM),
 * which counts when the other vCPU is busy. Two blocks at a time, so that
 * each destination row gets 64 bytes, a whole line where the row is
 * aligned, before the next row: stores of 32 bytes to eight rows in turn
 * kept eight lines half written at once and measured 10% slower than the
 * SSE kernel's four. Streams only to a destination aligned to 32 bytes,
 * else calls the SSE version. */
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
        if (stream) _mm256_stream_ps(o, c[k]);
        else _mm256_storeu_ps(o, c[k]);
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
 * into L2 for each line written, after every four rows. Writing each run as
 * two 64-byte halves eight rows apart, as put_16x8_avx2 does, with the
 * fetches after each half, the transposed 8192 x 8192 copy made 0.48-0.65 of
 * a streaming copy where this makes 0.51-0.70 (fast memory, 4 KiB pages),
 * 0.71-0.78 where this makes 0.76-0.82 (fast, 2 MiB pages), and the same
 * within 0.02 in the slow mode, on the 2-vCPU EPYC VM. Writing whole runs with
 * the fetches after all eight rows lost 0.02 in the slow mode on 2 MiB pages
 * and gained less in the fast one. */
__attribute__((target("avx2"), always_inline)) static inline void
put_band_x8_avx2(char *d, int64_t dj, const float *b, int64_t j, ahead *next) {
  __m256 c[BAND_ROWS / 8][8];
  for (int q = 0; q < BAND_ROWS / 8; q++) transpose8(b + 8 * q * BAND_TILE, BAND_TILE, c[q]);
  for (int k = 0; k < 8; k++) {
    float *o = (float *)(void *)(d + (j + k) * dj);
    for (int q = 0; q < BAND_ROWS / 8; q++) _mm256_stream_ps(o + 8 * q, c[q][k]);
    if (k % 4 == 3) fetch_ahead(next, BAND_ROWS * 4 * 4 / 64);
  }
}

/* A band's whole tiles of BAND_ROWS x BAND_TILE elements (run_items), with
 * AVX2 and streaming stores to a destination aligned to 32 bytes: the register
 * transposes of tile_4byte_avx2, each destination row's run written whole
 * (put_band_x8_avx2), in one call for the band, through a 4 KiB buffer that
 * the loads fill directly. A call of tile_same per tile, its 16 KiB buffer
 * filled a row at a time by memcpy, made the transposed 8192 x 8192 copy
 * 0.72-0.80 of a streaming copy where this made 0.79-0.82 (slow memory), and
 * 0.50-0.56 or 0.61-0.66 where this made 0.50-0.64 or 0.72-0.77 (fast memory,
 * 4 KiB or 2 MiB pages), on the 2-vCPU EPYC VM. Inline loads alone, tile by
 * tile, recovered most of that in the slow mode and a third of it in the fast
 * one. */
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

static void tile_same(char *d, int64_t dj, const char *s, int64_t si, int64_t ni, int64_t nj,
                      size_t es, int stream, ahead *next) {
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

/* The k-th of the nti x ntj tiles of one outer index, in blocks of SUPER x
 * SUPER tiles (narrower in the last block column, shorter in the last block
 * row), block columns after each other, down the rows (ti) first inside a
 * block. */
static void tile_at(int64_t k, int64_t nti, int64_t ntj, int64_t *ti, int64_t *tj) {
  int64_t col = k / (nti * SUPER);
  int64_t w = ntj - col * SUPER < SUPER ? ntj - col * SUPER : SUPER;
  int64_t r = k - col * nti * SUPER;
  int64_t row = r / (SUPER * w);
  int64_t h = nti - row * SUPER < SUPER ? nti - row * SUPER : SUPER;
  r -= row * SUPER * w;
  *tj = col * SUPER + r / h;
  *ti = row * SUPER + r % h;
}

/* Loads one byte of every 64 in n rows of `len` bytes, `stride` apart, in
 * order, so that the hardware prefetcher brings them into the cache at the
 * speed of a sequential read. */
static void read_in_order(const char *s, int64_t stride, int64_t n, int64_t len) {
  unsigned char acc = 0;
  for (int64_t r = 0; r < n; r++) {
    const volatile unsigned char *q = (const volatile unsigned char *)(s + r * stride);
    for (int64_t off = 0; off < len; off += 64) acc |= q[off];
    acc |= q[len - 1];
  }
  __asm__ volatile("" : : "r"(acc));
}

/* Where item q of a plan starts in either tensor, and its extent: ni
 * elements along dim 0 by nj along the tile dimension (1 without tiles). */
static void item_place(const plan *p, int64_t q, char **d, const char **s, int64_t *ni,
                       int64_t *nj) {
  int64_t c0, ct = 0;
  if (p->band) { /* down the source's rows first */
    c0 = q % p->nchunk0;
    ct = q / p->nchunk0 % p->ntile;
    q /= p->nchunk0 * p->ntile;
  } else if (p->tile) {
    tile_at(q % (p->nchunk0 * p->ntile), p->nchunk0, p->ntile, &c0, &ct);
    q /= p->nchunk0 * p->ntile;
  } else {
    c0 = q % p->nchunk0;
    q /= p->nchunk0;
  }
  int64_t doff = 0, soff = 0;
  for (int dd = 1; dd < p->nd; dd++) {
    if (dd == p->tile) continue;
    int64_t idx = q % p->size[dd];
    q /= p->size[dd];
    doff += idx * p->ds[dd];
    soff += idx * p->ss[dd];
  }
  int64_t i0 = c0 * p->step0, j0 = ct * p->stept;
  *ni = p->size[0] - i0 < p->step0 ? p->size[0] - i0 : p->step0;
  *nj = 1;
  *d = p->dst + doff + i0 * p->ds[0];
  *s = p->src + soff + i0 * p->ss[0];
  if (p->tile) {
    *nj = p->size[p->tile] - j0 < p->stept ? p->size[p->tile] - j0 : p->stept;
    *d += j0 * p->ds[p->tile];
    *s += j0 * p->ss[p->tile];
  }
}

/* Runs items [begin, end) of a plan. */
static void run_items(void *arg, size_t begin, size_t end) {
  const plan *p = arg;
  for (size_t it = begin; it < end; it++) {
    char *d;
    const char *s;
    int64_t ni, nj;
    item_place(p, (int64_t)it, &d, &s, &ni, &nj);
    if (p->band) {
      /* A range's first band is read in order; every later one was asked
       * into L2 while the band before it went out. */
      ahead next = {0};
      if (it == begin) read_in_order(s, p->ss[0], ni, nj * (int64_t)p->ses);
      if (it + 1 < end) {
        char *nd;
        int64_t nnj;
        item_place(p, (int64_t)it + 1, &nd, &next.s, &next.rows, &nnj);
        next.stride = p->ss[0];
        next.len = nnj * (int64_t)p->ses;
      }
      /* A full band's whole tiles go out in one call where they can; its last
       * narrower tile, a short band and a store trial's ordinary stores go
       * tile by tile. */
      int64_t j = 0, dj = p->ds[p->tile];
#ifdef TSTOR__CLONES
      if (ni == BAND_ROWS && p->stream && (uintptr_t)d % 32 == 0 && dj % 32 == 0 &&
          tstor__simd(TSTOR__SIMD_AVX2)) {
        j = nj / BAND_TILE * BAND_TILE;
        band_4byte_avx2(d, dj, s, p->ss[0], j, &next);
      }
#endif
      for (; j < nj; j += BAND_TILE)
        tile_same(d + j * dj, dj, s + j * p->ss[p->tile], p->ss[0], ni,
                  nj - j < BAND_TILE ? nj - j : BAND_TILE, p->des, p->stream, &next);
    } else if (p->tile) {
      tile_same(d, p->ds[p->tile], s, p->ss[0], ni, nj, p->des, p->stream, NULL);
    } else if (p->same) {
      row_same(d, p->ds[0], s, p->ss[0], ni, p->des, p->serial);
    } else {
      row_convert(p, d, p->ds[0], s, p->ss[0], ni);
    }
  }
  /* this thread's non-temporal stores are visible before the job ends */
  if (p->stream) tstor__stream_fence();
}

/* Runs a plan on host memory. */
static void plan_run(plan *p) {
  int64_t numel = 1;
  for (int d = 0; d < p->nd; d++) numel *= p->size[d];
  int can_stream = plan_split(p, numel);
  if (!p->serial && p->nd == 1 && p->ds[0] == (int64_t)p->des &&
      p->ss[0] == (int64_t)p->ses) {
    /* one contiguous run: the threaded byte copy or conversion */
    if (p->same)
      tstor__host_copy(p->dst, p->src, (size_t)p->size[0] * p->des);
    else
      tstor_dtype_convert(p->dst, p->dd, p->src, p->sd, (size_t)p->size[0]);
    return;
  }
  if (p->serial || p->ordered) {
    run_items(p, 0, (size_t)p->items);
    return;
  }
  size_t per_item = (size_t)(p->size[0] < ROW_CHUNK ? p->size[0] : ROW_CHUNK) * (p->des + p->ses);
  if (p->tile) per_item = (size_t)(p->step0 * p->stept) * (p->des + p->ses);
  if (can_stream)
    tstor__parallel_for_stores(TSTOR_WORK_TRANSPOSE, p->what, (size_t)p->items, per_item, 1,
                               run_items, p, &p->stream);
  else
    tstor__parallel_for((size_t)p->items, per_item, 1, run_items, p);
}

/* Byte extent of a side of the plan from element 0: [0, span). */
static int64_t plan_span(const plan *p, const int64_t *st, size_t es) {
  int64_t hi = (int64_t)es;
  for (int d = 0; d < p->nd; d++) hi += st[d] * (p->size[d] - 1);
  return hi;
}

/* Whether no two destination elements share a byte: taken by stride from the
 * smallest, each dimension's stride clears every byte the smaller ones reach.
 * A sufficient test, as PyTorch's non-overlap check; where it fails, which
 * write stays depends on the order, so the copy keeps PyTorch's. */
static int plan_dst_distinct(const plan *p) {
  int order[MAXD];
  for (int i = 0; i < p->nd; i++) {
    int j = i;
    for (; j > 0 && p->ds[order[j - 1]] > p->ds[i]; j--) order[j] = order[j - 1];
    order[j] = i;
  }
  int64_t reach = (int64_t)p->des;
  for (int k = 0; k < p->nd; k++) {
    int d = order[k];
    if (p->size[d] == 1) continue;
    if (p->ds[d] < reach) return 0;
    reach += p->ds[d] * (p->size[d] - 1);
  }
  return 1;
}

/* ------------------------------------------------------------ transfers */

/* One side of a transfer: a storage's bytes, or host memory (storage NULL). */
typedef struct side {
  tstor_storage *storage;
  char *ptr; /* element 0 */
  const int64_t *strides;
  tstor_dtype dtype;
  size_t es;
} side;

static int side_on_host(const side *x) {
  return x->storage == NULL ||
         (x->storage->ctx->types[x->storage->device.type].ops.flags & TSTOR_DEVICE_HOST);
}

static side tensor_side(const tstor_tensor *t, const int64_t *strides) {
  side x = {t->storage, tstor_tensor_data(t), strides ? strides : t->strides, t->dtype, t->esize};
  return x;
}

/* Moves n bytes between a storage's device address and host memory. */
static int stage_read(const side *x, int64_t lo, void *buf, int64_t n) {
  tstor_device h;
  int rc = tstor__staging_device(x->storage->ctx, &h);
  if (rc) return rc;
  return tstor__copy_bytes(x->storage->ctx, h, buf, x->storage->device, x->ptr + lo, (size_t)n,
                           NULL, NULL);
}
static int stage_write(const side *x, int64_t lo, const void *buf, int64_t n) {
  tstor_device h;
  int rc = tstor__staging_device(x->storage->ctx, &h);
  if (rc) return rc;
  return tstor__copy_bytes(x->storage->ctx, x->storage->device, x->ptr + lo, h, buf, (size_t)n,
                           NULL, NULL);
}

static int same_device(const side *a, const side *b) {
  return a->storage && b->storage && a->storage->ctx == b->storage->ctx &&
         a->storage->device.type == b->storage->device.type &&
         a->storage->device.index == b->storage->device.index;
}

/* Whether [a, a + an) and [b, b + bn) share a byte in one address space. */
static int ranges_meet(const side *a, int64_t an, const side *b, int64_t bn) {
  if (!(side_on_host(a) && side_on_host(b)) && !same_device(a, b)) return 0;
  uintptr_t a0 = (uintptr_t)a->ptr, b0 = (uintptr_t)b->ptr;
  return a0 < b0 + (uintptr_t)bn && b0 < a0 + (uintptr_t)an;
}

/* Copies the elements of `sizes` from src to dst, converting the dtype. The
 * caller has checked shapes, dtypes and data. */
static int transfer(const side *dst, const side *src, int ndim, const int64_t *sizes) {
  plan *p = tstor__malloc(sizeof *p);
  if (p == NULL) return tstor__err(TSTOR_ENOMEM, "no memory for a copy plan");
  p->dd = dst->dtype;
  p->sd = src->dtype;
  p->des = dst->es;
  p->ses = src->es;
  p->same = dst->dtype == src->dtype;
  if (plan_build(p, ndim, sizes, dst->strides, src->strides) == 0) {
    tstor__free(p);
    return 0;
  }
  int64_t dspan = plan_span(p, p->ds, p->des), sspan = plan_span(p, p->ss, p->ses);
  p->serial = ranges_meet(dst, dspan, src, sspan);
  p->ordered = !plan_dst_distinct(p);
  int rc = 0;
  if (side_on_host(dst) && side_on_host(src)) {
    p->dst = dst->ptr;
    p->src = src->ptr;
    plan_run(p);
    tstor__free(p);
    return 0;
  }
  /* A backend's own strided copy, same device, same dtype, in any order. */
  if (p->same && same_device(dst, src) && !p->serial && !p->ordered) {
    const tstor__devtype *t = &dst->storage->ctx->types[dst->storage->device.type];
    if (t->ops.copy_strided) {
      tstor__err_clear();
      rc = t->ops.copy_strided(t->state, dst->storage->device.index, dst->ptr, p->ds, src->ptr,
                               p->ss, p->size, p->nd, p->des, NULL);
      if (rc != TSTOR_ENOTSUP) {
        if (rc && !tstor_last_error()[0])
          tstor__err(rc, "%s strided copy of %d dims failed", t->name, p->nd);
        tstor__free(p);
        return rc;
      }
    }
  }
  /* Staged through host memory: the bytes each side spans. Sides that share
   * bytes are staged as one buffer, so the overlap stays what it was. */
  char *dbuf = NULL, *sbuf = NULL;
  if (p->serial && !side_on_host(dst)) {
    uintptr_t d0 = (uintptr_t)dst->ptr, s0 = (uintptr_t)src->ptr;
    uintptr_t lo = d0 < s0 ? d0 : s0;
    uintptr_t hi = d0 + (uintptr_t)dspan > s0 + (uintptr_t)sspan ? d0 + (uintptr_t)dspan
                                                                 : s0 + (uintptr_t)sspan;
    side whole = *dst;
    whole.ptr = (char *)lo;
    dbuf = tstor__malloc(hi - lo);
    if (dbuf == NULL) rc = tstor__err(TSTOR_ENOMEM, "no host memory to stage %zu bytes", (size_t)(hi - lo));
    if (rc == 0) rc = stage_read(&whole, 0, dbuf, (int64_t)(hi - lo));
    if (rc == 0) {
      p->dst = dbuf + (d0 - lo);
      p->src = dbuf + (s0 - lo);
      plan_run(p);
      rc = stage_write(&whole, 0, dbuf, (int64_t)(hi - lo));
    }
    tstor__free(dbuf);
    tstor__free(p);
    return rc;
  }
  if (!side_on_host(src)) {
    sbuf = tstor__malloc((size_t)sspan);
    if (sbuf == NULL) rc = tstor__err(TSTOR_ENOMEM, "no host memory to stage %" PRId64 " bytes", sspan);
    if (rc == 0) rc = stage_read(src, 0, sbuf, sspan);
  }
  int64_t pnumel = 1;
  for (int i = 0; i < p->nd; i++) pnumel *= p->size[i];
  int dense = dspan == pnumel * (int64_t)p->des; /* no gaps to keep */
  if (rc == 0 && !side_on_host(dst)) {
    dbuf = tstor__malloc((size_t)dspan);
    if (dbuf == NULL) rc = tstor__err(TSTOR_ENOMEM, "no host memory to stage %" PRId64 " bytes", dspan);
    /* a destination with gaps keeps the bytes between its elements */
    if (rc == 0 && !dense) rc = stage_read(dst, 0, dbuf, dspan);
  }
  if (rc == 0) {
    p->dst = dbuf ? dbuf : dst->ptr;
    p->src = sbuf ? sbuf : src->ptr;
    plan_run(p);
    if (dbuf) rc = stage_write(dst, 0, dbuf, dspan);
  }
  tstor__free(sbuf);
  tstor__free(dbuf);
  tstor__free(p);
  return rc;
}

/* -------------------------------------------------------------- copy_ */

static const char internal_overlap_msg[] =
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation.";
static const char partial_overlap_msg[] =
    "unsupported operation: some elements of the input tensor and the written-to tensor refer "
    "to a single memory location. Please clone() the tensor before performing the operation.";

/* assert_no_internal_overlap: only a certain overlap (stride 0) is refused. */
static int internal_overlap(const tstor_tensor *t) {
  if (tstor_tensor_is_non_overlapping_and_dense(t)) return 0;
  for (int i = 0; i < t->ndim; i++)
    if (t->strides[i] == 0 && t->sizes[i] > 1) return 1;
  return 0;
}

/* get_overlap_status == PARTIAL, on the bytes of one device. */
static int partial_overlap(const tstor_tensor *a, const tstor_tensor *b) {
  if (a->numel == 0 || b->numel == 0) return 0;
  if (!tstor_tensor_is_non_overlapping_and_dense(a) || !tstor_tensor_is_non_overlapping_and_dense(b))
    return 0;
  if (!tstor__tensor_has_data(a) || !tstor__tensor_has_data(b)) return 0;
  if (a->storage->ctx != b->storage->ctx || a->storage->device.type != b->storage->device.type ||
      a->storage->device.index != b->storage->device.index)
    return 0;
  uintptr_t a0 = (uintptr_t)tstor_tensor_data(a), b0 = (uintptr_t)tstor_tensor_data(b);
  uintptr_t a1 = a0 + (uintptr_t)(a->numel * (int64_t)a->esize);
  uintptr_t b1 = b0 + (uintptr_t)(b->numel * (int64_t)b->esize);
  if (a0 == b0 && a1 == b1) {
    for (int i = 0; i < a->ndim && a->ndim == b->ndim; i++)
      if (a->strides[i] != b->strides[i]) return 1;
    return a->ndim != b->ndim;
  }
  return a0 < b1 && b0 < a1;
}

/* src's strides expanded to dst's shape (0 where src broadcasts), with
 * TensorIterator's messages when the shapes do not broadcast to dst's. */
static int broadcast_to(const tstor_tensor *dst, const tstor_tensor *src, int64_t *sstr) {
  int nd = dst->ndim;
  int64_t shape[MAXD];
  memcpy(shape, dst->sizes, sizeof(int64_t) * (size_t)nd);
  int rc = tstor__broadcast_into(&nd, shape, src->ndim, src->sizes);
  if (rc) return rc;
  int differs = nd != dst->ndim;
  for (int i = 0; !differs && i < nd; i++) differs = shape[i] != dst->sizes[i];
  if (differs) {
    char x[256], y[256];
    return tstor__err(TSTOR_ESIZE, "output with shape %s doesn't match the broadcast shape %s",
                      tstor__dims_str(x, sizeof x, dst->ndim, dst->sizes),
                      tstor__dims_str(y, sizeof y, nd, shape));
  }
  for (int i = 0; i < dst->ndim; i++) {
    int j = i - (dst->ndim - src->ndim);
    sstr[i] = j < 0 || src->sizes[j] != dst->sizes[i] ? 0 : src->strides[j];
  }
  return 0;
}

int tstor_tensor_copy_(tstor_tensor *dst, const tstor_tensor *src) {
  if (dst == NULL || src == NULL) return tstor__err(TSTOR_EINVAL, "tensor_copy_: NULL tensor");
  if (dst->storage->ctx != src->storage->ctx)
    return tstor__err(TSTOR_EINVAL, "tensor_copy_: tensors belong to different contexts");
  int rc = tstor_dtype_can_convert(dst->dtype, src->dtype);
  if (rc) return rc;
  if (dst == src) return 0;
  /* the same elements read as the same dtype: nothing to do (PyTorch's is_same_data) */
  if (dst->storage == src->storage && dst->offset == src->offset && dst->dtype == src->dtype &&
      dst->ndim == src->ndim && memcmp(dst->dims, src->dims, 2 * (size_t)dst->ndim * 8) == 0)
    return 0;
  /* TensorIterator's order: overlaps first, then shapes */
  if (dst->numel != 0 && internal_overlap(dst))
    return tstor__err(TSTOR_EINVAL, "%s", internal_overlap_msg);
  if (partial_overlap(dst, src)) return tstor__err(TSTOR_EINVAL, "%s", partial_overlap_msg);
  int64_t sstr[MAXD];
  if ((rc = broadcast_to(dst, src, sstr))) return rc;
  if (dst->numel == 0 || !tstor__tensor_has_data(dst)) return 0;
  if (!tstor__tensor_has_data(src))
    return tstor__err(TSTOR_ENODATA, "tensor_copy_: the source is on %s, which has no data",
                      src->storage->ctx->types[src->storage->device.type].name);
  side d = tensor_side(dst, NULL), s = tensor_side(src, sstr);
  return transfer(&d, &s, dst->ndim, dst->sizes);
}

/* ------------------------------------------------- layouts of new copies */

/* A new uninitialised tensor shaped like t, on dev with dtype, laid out as
 * PyTorch's empty_like(preserve_format) lays it out: t's strides when t is
 * dense, else dense strides in the order of t's. */
static int empty_like(const tstor_tensor *t, tstor_device dev, tstor_dtype dtype,
                      tstor_tensor **out) {
  int64_t st[MAXD];
  if (tstor_tensor_is_non_overlapping_and_dense(t))
    memcpy(st, t->strides, (size_t)t->ndim * 8);
  else
    tstor__infer_dense_strides(t->ndim, t->sizes, t->strides, st);
  return tstor_tensor_empty_strided(t->storage->ctx, dev, dtype, t->ndim, t->sizes, st, out);
}

static int copy_into_new(const tstor_tensor *t, tstor_tensor *c, tstor_tensor **out) {
  int rc = tstor_tensor_copy_(c, t);
  if (rc) {
    tstor_tensor_release(c);
    return rc;
  }
  *out = c;
  return 0;
}

int tstor_tensor_clone(const tstor_tensor *t, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_clone: NULL out");
  *out = NULL;
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_clone: NULL tensor");
  tstor_tensor *c;
  int rc = empty_like(t, t->storage->device, t->dtype, &c);
  return rc ? rc : copy_into_new(t, c, out);
}

int tstor_tensor_contiguous(const tstor_tensor *t, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_contiguous: NULL out");
  *out = NULL;
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_contiguous: NULL tensor");
  if (t->contiguous) {
    *out = tstor_tensor_retain((tstor_tensor *)t);
    return 0;
  }
  tstor_tensor *c;
  int rc = tstor_tensor_empty(t->storage->ctx, t->storage->device, t->dtype, t->ndim, t->sizes, &c);
  return rc ? rc : copy_into_new(t, c, out);
}

int tstor_tensor_to(const tstor_tensor *t, tstor_device dev, tstor_dtype dtype,
                    tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_to: NULL out");
  *out = NULL;
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_to: NULL tensor");
  int rc;
  if ((rc = tstor__check_device(t->storage->ctx, dev))) return rc;
  if (tstor__dtype(dtype, "tensor_to") == NULL) return TSTOR_EINVAL;
  if ((rc = tstor_dtype_can_convert(dtype, t->dtype))) return rc;
  if (dev.type == t->storage->device.type && dev.index == t->storage->device.index &&
      dtype == t->dtype) {
    *out = tstor_tensor_retain((tstor_tensor *)t);
    return 0;
  }
  tstor_tensor *c;
  rc = empty_like(t, dev, dtype, &c);
  return rc ? rc : copy_into_new(t, c, out);
}

/* ------------------------------------------------------------- filling */

/* value as one element of dtype (quantized dtypes take their integer code). */
static int scalar_bytes(tstor_dtype dtype, double value, unsigned char *elem, const char *what) {
  const tstor_dtype_info *d = tstor__dtype(dtype, what);
  if (d == NULL) return TSTOR_EINVAL;
  tstor__convert_serial(elem, d->underlying, &value, TSTOR_FLOAT64, 1);
  return 0;
}

int tstor_tensor_fill(tstor_tensor *t, double value) {
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_fill: NULL tensor");
  _Alignas(16) unsigned char elem[16];
  int rc = scalar_bytes(t->dtype, value, elem, "tensor_fill");
  if (rc) return rc;
  if (t->numel == 0 || !tstor__tensor_has_data(t)) return 0;
  if (tstor_tensor_is_non_overlapping_and_dense(t)) {
    size_t n = (size_t)t->numel * t->esize;
    if (tstor__tensor_on_host(t)) {
      tstor__host_fill(tstor_tensor_data(t), n, elem, t->esize);
      return 0;
    }
    if (t->esize == 1 || t->esize == 2 || t->esize == 4 || t->esize == 8 || t->esize == 16)
      return tstor__fill_bytes(t->storage->ctx, t->storage->device, tstor_tensor_data(t), n, elem,
                               t->esize);
  }
  int64_t zero[MAXD] = {0};
  side d = tensor_side(t, NULL);
  side s = {NULL, (char *)elem, zero, t->dtype, t->esize};
  return transfer(&d, &s, t->ndim, t->sizes);
}

/* ------------------------------------------------------ creation with data */

int tstor_tensor_full(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, int ndim,
                      const int64_t *sizes, double value, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_full: NULL out");
  *out = NULL;
  tstor_tensor *t;
  int rc = tstor_tensor_empty(ctx, dev, dtype, ndim, sizes, &t);
  if (rc) return rc;
  if ((rc = tstor_tensor_fill(t, value))) {
    tstor_tensor_release(t);
    return rc;
  }
  *out = t;
  return 0;
}

int tstor_tensor_zeros(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, int ndim,
                       const int64_t *sizes, tstor_tensor **out) {
  return tstor_tensor_full(ctx, dev, dtype, ndim, sizes, 0.0, out);
}

int tstor_tensor_ones(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, int ndim,
                      const int64_t *sizes, tstor_tensor **out) {
  return tstor_tensor_full(ctx, dev, dtype, ndim, sizes, 1.0, out);
}

int tstor_tensor_from_array(tstor_context *ctx, tstor_device dev, tstor_dtype dtype, int ndim,
                            const int64_t *sizes, const void *data, tstor_tensor **out) {
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_from_array: NULL out");
  *out = NULL;
  tstor_tensor *t;
  int rc = tstor_tensor_empty(ctx, dev, dtype, ndim, sizes, &t);
  if (rc) return rc;
  if (t->numel > 0 && data == NULL) {
    int64_t n = t->numel;
    tstor_tensor_release(t);
    return tstor__err(TSTOR_EINVAL, "tensor_from_array: NULL data for %" PRId64 " elements", n);
  }
  if (t->numel > 0 && tstor__tensor_has_data(t)) {
    side d = tensor_side(t, NULL);
    side s = {NULL, (char *)data, t->strides, dtype, t->esize};
    rc = transfer(&d, &s, ndim, sizes);
  }
  if (rc) {
    tstor_tensor_release(t);
    return rc;
  }
  *out = t;
  return 0;
}

int tstor_tensor_to_array(const tstor_tensor *t, void *out, tstor_dtype out_dtype, size_t count) {
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_to_array: NULL tensor");
  const tstor_dtype_info *od = tstor__dtype(out_dtype, "tensor_to_array");
  if (od == NULL) return TSTOR_EINVAL;
  int rc = tstor_dtype_can_convert(out_dtype, t->dtype);
  if (rc) return rc;
  if ((int64_t)count != t->numel)
    return tstor__err(TSTOR_ESIZE, "tensor_to_array: the tensor has %" PRId64 " elements, the array %zu",
                      t->numel, count);
  if (count == 0) return 0;
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_to_array: NULL out");
  if (!tstor__tensor_has_data(t))
    return tstor__err(TSTOR_ENODATA, "tensor_to_array: a %s tensor has no data",
                      t->storage->ctx->types[t->storage->device.type].name);
  int64_t st[MAXD];
  tstor__contiguous_strides(t->ndim, t->sizes, st);
  side d = {NULL, out, st, out_dtype, od->element_size};
  side s = tensor_side(t, NULL);
  return transfer(&d, &s, t->ndim, t->sizes);
}

/* ------------------------------------------------------ element access */

static int element_at(const tstor_tensor *t, const int64_t *index, int64_t *byte_off,
                      const char *what) {
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "%s: NULL tensor", what);
  if (index == NULL && t->ndim > 0) return tstor__err(TSTOR_EINVAL, "%s: NULL index", what);
  if (!tstor__tensor_has_data(t))
    return tstor__err(TSTOR_ENODATA, "%s: a %s tensor has no data", what,
                      t->storage->ctx->types[t->storage->device.type].name);
  int64_t off = 0;
  for (int i = 0; i < t->ndim; i++) {
    int64_t k = index[i], n = t->sizes[i];
    if (k < -n || k >= n)
      return tstor__err(TSTOR_ERANGE, "index %" PRId64 " is out of bounds for dimension %d with size %" PRId64,
                        k, i, n);
    if (k < 0) k += n;
    off += k * t->strides[i];
  }
  *byte_off = off * (int64_t)t->esize;
  return 0;
}

int tstor_tensor_get(const tstor_tensor *t, const int64_t *index, void *value) {
  int64_t off;
  int rc = element_at(t, index, &off, "tensor_get");
  if (rc) return rc;
  if (value == NULL) return tstor__err(TSTOR_EINVAL, "tensor_get: NULL value");
  side x = tensor_side(t, NULL);
  if (side_on_host(&x)) {
    memcpy(value, x.ptr + off, t->esize);
    return 0;
  }
  return stage_read(&x, off, value, (int64_t)t->esize);
}

int tstor_tensor_set(tstor_tensor *t, const int64_t *index, const void *value) {
  int64_t off;
  int rc = element_at(t, index, &off, "tensor_set");
  if (rc) return rc;
  if (value == NULL) return tstor__err(TSTOR_EINVAL, "tensor_set: NULL value");
  side x = tensor_side(t, NULL);
  if (side_on_host(&x)) {
    memcpy(x.ptr + off, value, t->esize);
    return 0;
  }
  return stage_write(&x, off, value, (int64_t)t->esize);
}

int tstor_tensor_get_f64(const tstor_tensor *t, const int64_t *index, double *out) {
  _Alignas(16) unsigned char elem[16];
  if (out == NULL) return tstor__err(TSTOR_EINVAL, "tensor_get_f64: NULL out");
  int rc = tstor_tensor_get(t, index, elem);
  if (rc) return rc;
  tstor__convert_serial(out, TSTOR_FLOAT64, elem, tstor_dtype_info_of(t->dtype)->underlying, 1);
  return 0;
}

int tstor_tensor_set_f64(tstor_tensor *t, const int64_t *index, double value) {
  _Alignas(16) unsigned char elem[16];
  if (t == NULL) return tstor__err(TSTOR_EINVAL, "tensor_set_f64: NULL tensor");
  int rc = scalar_bytes(t->dtype, value, elem, "tensor_set_f64");
  return rc ? rc : tstor_tensor_set(t, index, elem);
}
