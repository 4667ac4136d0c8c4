/* Transposing copies of host memory (transpose.c): the kernels under a
 * tensor copy whose source is contiguous along another dimension than its
 * destination (a transpose, NCHW -> NHWC). They see pointers, byte strides
 * and counts, no tensor. tensor/iter.c plans the copy and hands them its
 * tiles and bands. docs/notes/benchmark-log.md has the measurements
 * behind the shapes below, and the variants that lost. Never installed. */
#ifndef TSTOR_TRANSPOSE_H
#define TSTOR_TRANSPOSE_H

#include <stddef.h>
#include <stdint.h>

/* A tile's edge in elements: 64 x 64 elements of up to 8 bytes is 32 KiB a
 * side at most, within L1 and L2 on every recent core. */
#define TSTOR__TILE 64

/* Large transposes of 4-byte elements whose destination streams go in bands
 * instead of tiles: TSTOR__BAND_ROWS source rows by a part of each, the rows
 * cut into equal parts of TSTOR__BAND_ROW_BYTES at most, and fewer columns
 * where the band's destination rows would lie on more than
 * TSTOR__BAND_DST_PAGES pages of 4 KiB (the second-level TLB's reach). A
 * band goes out in tiles of its rows by TSTOR__BAND_TILE columns, each
 * destination row getting the band's 128 bytes in one run, while the band
 * copied next is asked into L2 a line for each line written: reads and
 * writes overlap as in a plain copy (0.79-0.85 of a streaming copy for the
 * transposed 8192 x 8192 float32 matrix, where reading a band in order
 * first made 0.69-0.80). */
#define TSTOR__BAND_ROWS 32
#define TSTOR__BAND_ROW_BYTES ((int64_t)8192)
#define TSTOR__BAND_DST_PAGES ((int64_t)1024)
#define TSTOR__BAND_TILE 32

/* The lines of the band a thread copies next, asked into L2 a few at a time
 * while the current band goes out: rows of `len` bytes, `stride` apart, from
 * row `row` to `rows`, `offset` bytes past the line where the row starts. */
typedef struct tstor__ahead {
  const char *src;
  int64_t stride, len;
  int64_t row, rows;
  int64_t offset;
} tstor__ahead;

/* One tile: ni elements along the destination's contiguous dimension (the
 * source's rows, si bytes apart) by nj along the source's contiguous one
 * (the destination's rows, dj bytes apart), of es bytes each. `stream`:
 * non-temporal stores where the alignment allows. next, when not NULL, is
 * fetched ahead as the tile goes out. */
void tstor__transpose_tile(char *d, int64_t dj, const char *s, int64_t si, int64_t ni, int64_t nj,
                           size_t es, int stream, tstor__ahead *next);
/* One band: ni (at most TSTOR__BAND_ROWS) source rows by nj columns, tile
 * after tile of TSTOR__BAND_TILE columns; a full band's whole tiles of 4-byte
 * elements go out in one call with AVX2 where the stores stream. */
void tstor__transpose_band(char *d, int64_t dj, const char *s, int64_t si, int64_t ni, int64_t nj,
                           size_t es, int stream, tstor__ahead *next);
/* The k-th of the nti x ntj tiles of one outer index, visited in blocks of
 * 8 x 8 tiles, down the rows (ti) first inside a block, so that a block's
 * rows stay within the TLB and the prefetched lines are used. */
void tstor__tile_order(int64_t k, int64_t nti, int64_t ntj, int64_t *ti, int64_t *tj);
/* Loads one byte of every 64 in n rows of `len` bytes, `stride` apart, in
 * order, so that the hardware prefetcher brings them into the cache at the
 * speed of a sequential read. */
void tstor__read_in_order(const char *s, int64_t stride, int64_t n, int64_t len);

#endif /* TSTOR_TRANSPOSE_H */
