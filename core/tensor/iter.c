/* TensorIterator's port for copies (tensor_internal.h's tstor__plan): a
 * transfer between two strided layouts planned the way PyTorch plans it,
 * size-1 dimensions dropped, dimensions ordered by the destination's strides
 * (the source's breaking ties), then neighbours that are contiguous together
 * merged. A plan that ends as one contiguous run is a bulk copy or one
 * conversion; a plan whose source is contiguous along another dimension than
 * the destination is a transpose, in tiles or bands (host/transpose.h);
 * anything else goes row by row. Large plans are split over the thread pool,
 * with the store (streaming or ordinary) chosen per call where it matters. */
#include "host/transpose.h"
#include "tensor/tensor_internal.h"

#include <string.h>

#define MAXD TSTOR_TENSOR_MAX_DIM
/* Elements of a row handed out as one work item. */
#define ROW_CHUNK ((int64_t)16384)
/* Elements converted at a time through the stack when a side is strided. */
#define GATHER 256

/* PyTorch's reorder_dimensions comparison: >0 when dim a should go after b
 * (further out), <0 when before, 0 when undecided. */
static int should_swap(const void *ctx, int a, int b) {
  const tstor__plan *p = ctx;
  const int64_t *st[2] = {p->dst_strides, p->src_strides};
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
int64_t tstor__plan_build(tstor__plan *p, int ndim, const int64_t *sizes, const int64_t *dstr,
                          const int64_t *sstr) {
  int n = 0;
  int64_t numel = 1;
  for (int i = 0; i < ndim; i++) numel *= sizes[i];
  if (numel == 0) return 0;
  /* innermost first, as TensorIterator's initial permutation */
  for (int i = ndim - 1; i >= 0; i--) {
    if (sizes[i] == 1) continue;
    p->size[n] = sizes[i];
    p->dst_strides[n] = dstr[i] * (int64_t)p->dst_esize;
    p->src_strides[n] = sstr[i] * (int64_t)p->src_esize;
    n++;
  }
  /* insertion sort with ambiguous comparisons, as TensorIterator */
  int perm[MAXD];
  for (int i = 0; i < n; i++) perm[i] = i;
  tstor__reorder_dims(n, perm, should_swap, p);
  int64_t size[MAXD], ds[MAXD], ss[MAXD];
  for (int i = 0; i < n; i++) {
    size[i] = p->size[perm[i]];
    ds[i] = p->dst_strides[perm[i]];
    ss[i] = p->src_strides[perm[i]];
  }
  /* coalesce neighbours contiguous together in both operands */
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (m > 0 && ds[i] == p->dst_strides[m - 1] * p->size[m - 1] &&
        ss[i] == p->src_strides[m - 1] * p->size[m - 1]) {
      p->size[m - 1] *= size[i];
      continue;
    }
    p->size[m] = size[i];
    p->dst_strides[m] = ds[i];
    p->src_strides[m] = ss[i];
    m++;
  }
  if (m == 0) { /* one element */
    p->size[0] = 1;
    p->dst_strides[0] = (int64_t)p->dst_esize;
    p->src_strides[0] = (int64_t)p->src_esize;
    m = 1;
  }
  p->ndim = m;
  return numel;
}

/* Tells one transposing copy from another for the store trials (FNV-1a over
 * the dtypes, sizes and strides): two shapes of one size class can run at
 * speeds far apart. */
static unsigned plan_what(const tstor__plan *p) {
  uint32_t h = 2166136261u;
  int64_t words[2 + 3 * MAXD];
  int n = 0;
  words[n++] = p->dst_dtype * 64 + p->src_dtype;
  words[n++] = p->ndim;
  for (int d = 0; d < p->ndim; d++) {
    words[n++] = p->size[d];
    words[n++] = p->dst_strides[d];
    words[n++] = p->src_strides[d];
  }
  const unsigned char *b = (const unsigned char *)words;
  for (size_t i = 0; i < (size_t)n * sizeof words[0]; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

/* Chooses the work split and the store once pointers and the serial flag
 * are known. Returns whether the plan's store is chosen call by call (a large
 * transposing copy). */
static int plan_split(tstor__plan *p, int64_t numel) {
  p->tile = 0;
  p->band = 0;
  if (p->same && !p->serial && !p->ordered && p->ndim >= 2 &&
      p->dst_strides[0] == (int64_t)p->dst_esize && p->src_strides[0] != (int64_t)p->src_esize &&
      p->size[0] >= 16) {
    for (int k = 1; k < p->ndim; k++)
      if (p->src_strides[k] == (int64_t)p->src_esize && p->size[k] >= 16) {
        p->tile = k;
        break;
      }
  }
  int64_t outer = 1;
  for (int d = 1; d < p->ndim; d++)
    if (d != p->tile) outer *= p->size[d];
  /* Non-temporal stores pay off for large destinations (the NHWC permute's
   * copy_ 1.6x faster), transposes in blocks of tiles included; trials of
   * whole calls choose anyway (host/stores.c), in the split chosen here for
   * the current choice. */
  int can_stream = p->tile && (size_t)numel * p->dst_esize >= TSTOR__STREAM_MIN_BYTES;
  p->what = can_stream ? plan_what(p) : 0;
  p->stream = can_stream && tstor__store_streaming(TSTOR_WORK_TRANSPOSE, p->what,
                                                   (size_t)numel * (p->dst_esize + p->src_esize));
  if (p->tile) {
#if defined(__SSE2__) /* where the 4-byte tiles stream */
    p->band = p->stream && p->dst_esize == 4 && p->size[0] >= TSTOR__BAND_ROWS;
#endif
    p->step0 = TSTOR__TILE;
    p->stept = TSTOR__TILE;
    if (p->band) { /* the source's rows cut into equal parts */
      int64_t cols = TSTOR__BAND_ROW_BYTES / 4;
      int64_t page_share = p->dst_strides[p->tile] < 4096 ? p->dst_strides[p->tile] : 4096;
      if (cols * page_share > TSTOR__BAND_DST_PAGES * 4096)
        cols = TSTOR__BAND_DST_PAGES * 4096 / page_share;
      int64_t parts = (p->size[p->tile] + cols - 1) / cols;
      p->step0 = TSTOR__BAND_ROWS;
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

/* ---------------------------------------------------------------- rows */

#define ROW_LOOP(T) \
  for (int64_t i = 0; i < n; i++) *(T *)(d + i * dstep) = *(const T *)(s + i * sstep);

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
static void row_convert(const tstor__plan *p, char *d, int64_t dstep, const char *s, int64_t sstep,
                        int64_t n) {
  size_t des = p->dst_esize, ses = p->src_esize;
  if (p->serial) {
    for (int64_t i = 0; i < n; i++)
      tstor__convert_serial(d + i * dstep, p->dst_dtype, s + i * sstep, p->src_dtype, 1);
    return;
  }
  if (dstep == (int64_t)des && sstep == (int64_t)ses) {
    tstor__convert_serial(d, p->dst_dtype, s, p->src_dtype, (size_t)n);
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
      tstor__convert_serial(dp, p->dst_dtype, sp, p->src_dtype, (size_t)k);
    } else {
      tstor__convert_serial(dbuf, p->dst_dtype, sp, p->src_dtype, (size_t)k);
      row_same(dp, dstep, (const char *)dbuf, (int64_t)des, k, des, 0);
    }
  }
}
/* Where item q of a plan starts in either tensor, and its extent: ni
 * elements along dim 0 by nj along the tile dimension (1 without tiles). */
static void item_place(const tstor__plan *p, int64_t q, char **d, const char **s, int64_t *ni,
                       int64_t *nj) {
  int64_t c0, ct = 0;
  if (p->band) { /* down the source's rows first */
    c0 = q % p->nchunk0;
    ct = q / p->nchunk0 % p->ntile;
    q /= p->nchunk0 * p->ntile;
  } else if (p->tile) {
    tstor__tile_order(q % (p->nchunk0 * p->ntile), p->nchunk0, p->ntile, &c0, &ct);
    q /= p->nchunk0 * p->ntile;
  } else {
    c0 = q % p->nchunk0;
    q /= p->nchunk0;
  }
  int64_t doff = 0, soff = 0;
  for (int dd = 1; dd < p->ndim; dd++) {
    if (dd == p->tile) continue;
    int64_t idx = q % p->size[dd];
    q /= p->size[dd];
    doff += idx * p->dst_strides[dd];
    soff += idx * p->src_strides[dd];
  }
  int64_t i0 = c0 * p->step0, j0 = ct * p->stept;
  *ni = p->size[0] - i0 < p->step0 ? p->size[0] - i0 : p->step0;
  *nj = 1;
  *d = p->dst + doff + i0 * p->dst_strides[0];
  *s = p->src + soff + i0 * p->src_strides[0];
  if (p->tile) {
    *nj = p->size[p->tile] - j0 < p->stept ? p->size[p->tile] - j0 : p->stept;
    *d += j0 * p->dst_strides[p->tile];
    *s += j0 * p->src_strides[p->tile];
  }
}

/* Runs items [begin, end) of a plan. */
static void run_items(void *arg, size_t begin, size_t end) {
  const tstor__plan *p = arg;
  for (size_t it = begin; it < end; it++) {
    char *d;
    const char *s;
    int64_t ni, nj;
    item_place(p, (int64_t)it, &d, &s, &ni, &nj);
    if (p->band) {
      /* A range's first band is read in order; every later one was asked
       * into L2 while the band before it went out. */
      tstor__ahead next = {0};
      if (it == begin) tstor__read_in_order(s, p->src_strides[0], ni, nj * (int64_t)p->src_esize);
      if (it + 1 < end) {
        char *nd;
        int64_t nnj;
        item_place(p, (int64_t)it + 1, &nd, &next.src, &next.rows, &nnj);
        next.stride = p->src_strides[0];
        next.len = nnj * (int64_t)p->src_esize;
      }
      tstor__transpose_band(d, p->dst_strides[p->tile], s, p->src_strides[0], ni, nj, p->dst_esize,
                            p->stream, &next);
    } else if (p->tile) {
      tstor__transpose_tile(d, p->dst_strides[p->tile], s, p->src_strides[0], ni, nj, p->dst_esize,
                            p->stream, NULL);
    } else if (p->same) {
      row_same(d, p->dst_strides[0], s, p->src_strides[0], ni, p->dst_esize, p->serial);
    } else {
      row_convert(p, d, p->dst_strides[0], s, p->src_strides[0], ni);
    }
  }
  /* this thread's non-temporal stores are visible before the job ends */
  if (p->stream) tstor__stream_fence();
}

/* Runs a plan on host memory. */
void tstor__plan_run(tstor__plan *p) {
  int64_t numel = 1;
  for (int d = 0; d < p->ndim; d++) numel *= p->size[d];
  int can_stream = plan_split(p, numel);
  if (!p->serial && p->ndim == 1 && p->dst_strides[0] == (int64_t)p->dst_esize &&
      p->src_strides[0] == (int64_t)p->src_esize) {
    /* one contiguous run: the threaded byte copy or conversion */
    if (p->same)
      tstor__host_copy(p->dst, p->src, (size_t)p->size[0] * p->dst_esize);
    else
      tstor_dtype_convert(p->dst, p->dst_dtype, p->src, p->src_dtype, (size_t)p->size[0]);
    return;
  }
  if (p->serial || p->ordered) {
    run_items(p, 0, (size_t)p->items);
    return;
  }
  size_t per_item =
      (size_t)(p->size[0] < ROW_CHUNK ? p->size[0] : ROW_CHUNK) * (p->dst_esize + p->src_esize);
  if (p->tile) per_item = (size_t)(p->step0 * p->stept) * (p->dst_esize + p->src_esize);
  if (can_stream)
    tstor__parallel_for_stores(TSTOR_WORK_TRANSPOSE, p->what, (size_t)p->items, per_item, 1,
                               run_items, p, &p->stream);
  else
    tstor__parallel_for((size_t)p->items, per_item, 1, run_items, p);
}

/* Byte extent of a side of the plan from element 0: [0, span). */
int64_t tstor__plan_span(const tstor__plan *p, const int64_t *st, size_t es) {
  int64_t hi = (int64_t)es;
  for (int d = 0; d < p->ndim; d++) hi += st[d] * (p->size[d] - 1);
  return hi;
}

/* Whether no two destination elements share a byte: taken by stride from the
 * smallest, each dimension's stride clears every byte the smaller ones reach.
 * A sufficient test, as PyTorch's non-overlap check; where it fails, which
 * write stays depends on the order, so the copy keeps PyTorch's. */
int tstor__plan_dst_distinct(const tstor__plan *p) {
  int order[MAXD];
  for (int i = 0; i < p->ndim; i++) {
    int j = i;
    for (; j > 0 && p->dst_strides[order[j - 1]] > p->dst_strides[i]; j--) order[j] = order[j - 1];
    order[j] = i;
  }
  int64_t reach = (int64_t)p->dst_esize;
  for (int k = 0; k < p->ndim; k++) {
    int d = order[k];
    if (p->size[d] == 1) continue;
    if (p->dst_strides[d] < reach) return 0;
    reach += p->dst_strides[d] * (p->size[d] - 1);
  }
  return 1;
}
