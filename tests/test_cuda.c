/* The cuda backend on a real GPU, through the public API: allocation sizes,
 * out of memory and retry, the cache, record_stream, pinned memory held back
 * during an asynchronous copy, copies of every size and offset in every
 * direction, fills, dtype conversion against the host's, streams and events,
 * the caller's current device, statistics.
 *
 * Without a usable GPU the suite exits 77 (skipped) and prints why.
 * TSTOR_TEST_CUDA_CACHING=no runs it with the caching allocator off, as for
 * compute-sanitizer (see docs/cuda.md). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tstor/typed.h>

#include "cudatest.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

static tstor_context *ctx;
static tstor_device cpu, gpu;
static int ndev;
static int caching = 1;

/* --------------------------------------------------------------- helpers */

static tstor_storage *new_storage(tstor_device dev, size_t n) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, dev, n, &s));
  return s;
}

static tstor_storage *view(tstor_storage *base, size_t off, size_t n) {
  tstor_storage *v = NULL;
  ck_tstor_ok(tstor_storage_view(base, off, n, &v));
  return v;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) { return tstor_test_rng(&rng_state); }

static void randomize(void *p, size_t n) {
  unsigned char *b = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t r = rng();
    memcpy(b + i, &r, 8);
  }
  for (; i < n; i++) b[i] = (unsigned char)rng();
}

static tstor_stats stats(tstor_device dev) {
  tstor_stats s = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, dev, &s));
  return s;
}

/* Bytes of a storage, read back to the host into a new buffer (caller frees). */
static unsigned char *read_back(tstor_storage *s) {
  size_t n = tstor_storage_nbytes(s);
  tstor_storage *h = new_storage(cpu, n);
  ck_tstor_ok(tstor_storage_copy(h, s));
  unsigned char *out = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(out);
  if (n) memcpy(out, tstor_storage_data(h), n);
  tstor_storage_release(h);
  return out;
}

static void setup(void) {
  caching = cudatest_caching();
  ctx = cudatest_open();
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  ck_tstor_ok(tstor_device_parse(ctx, "cuda:0", &gpu));
  ndev = tstor_device_count(ctx, gpu.type);
}

static void teardown(void) {
  tstor_context_close(ctx);
  ctx = NULL;
}

/* ------------------------------------------------------------ allocation */

START_TEST(allocation_sizes_from_0_to_1gib) {
  static const size_t sizes[] = {0,       1,           511,         512,     513,
                                 4095,    MiB - 1,     MiB,         MiB + 1, 10 * MiB - 1,
                                 10 * MiB, 100 * MiB + 3, 512 * MiB, GiB};
  tstor_stats before = stats(gpu);
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    tstor_storage *s = new_storage(gpu, n);
    ck_assert_uint_eq(tstor_storage_nbytes(s), n);
    if (n == 0) {
      ck_assert_ptr_null(tstor_storage_data(s));
    } else {
      ck_assert_ptr_nonnull(tstor_storage_data(s));
      ck_assert_uint_eq((uintptr_t)tstor_storage_data(s) % 256, 0); /* cudaMalloc's promise */
      ck_assert_uint_ge(stats(gpu).allocated, before.allocated + n);
      ck_tstor_ok(tstor_storage_fill(s, (uint8_t)(i + 1)));
      /* Read back only the ends of the largest ones. */
      size_t m = n < 4 * MiB ? n : 4 * MiB;
      tstor_storage *tailv = view(s, n - m, m);
      unsigned char *b = read_back(tailv);
      for (size_t k = 0; k < m; k++)
        ck_assert_msg(b[k] == (unsigned char)(i + 1), "size %zu: byte %zu is %u", n, n - m + k,
                      b[k]);
      free(b);
      tstor_storage_release(tailv);
    }
    tstor_storage_release(s);
  }
  tstor_stats after = stats(gpu);
  ck_assert_uint_eq(after.allocated, before.allocated);
  ck_assert_uint_eq(after.active, before.active);
}
END_TEST

START_TEST(a_1pib_request_fails_cleanly) {
  tstor_storage *keep = new_storage(gpu, MiB);
  ck_tstor_ok(tstor_storage_fill(keep, 7));
  tstor_stats before = stats(gpu);
  tstor_storage *s = (tstor_storage *)1;
  ck_tstor_err(tstor_storage_new(ctx, gpu, (size_t)1 << 50, &s), TSTOR_ENOMEM);
  ck_last_error_has("1.00 PiB");
  ck_last_error_has("free of");
  ck_last_error_has("allocated");
  ck_last_error_has("reserved");
  tstor_stats after = stats(gpu);
  ck_assert_uint_eq(after.oom_count, before.oom_count + 1);
  ck_assert_uint_eq(after.allocated, before.allocated);
  ck_assert_uint_eq(after.reserved, before.reserved); /* the cache was not dropped for it */
  /* Everything still works. */
  tstor_storage *t = new_storage(gpu, MiB);
  ck_tstor_ok(tstor_storage_copy(t, keep));
  unsigned char *b = read_back(t);
  ck_assert_uint_eq(b[0], 7);
  ck_assert_uint_eq(b[MiB - 1], 7);
  free(b);
  tstor_storage_release(t);
  tstor_storage_release(keep);
}
END_TEST

START_TEST(oom_then_retry_succeeds_after_cached_blocks_are_freed) {
  if (!caching) return;
  ck_tstor_ok(tstor_device_empty_cache(ctx, gpu));
  size_t free_b = 0, total_b = 0;
  ck_assert_int_eq(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  size_t a_size = free_b / 100 * 55, b_size = free_b / 100 * 60;
  tstor_storage *a = new_storage(gpu, a_size);
  tstor_storage_release(a); /* cached: 55% of the free memory stays reserved */
  tstor_stats before = stats(gpu);
  ck_assert_uint_ge(before.reserved, a_size);
  tstor_storage *b = new_storage(gpu, b_size); /* fits only without the cached block */
  tstor_stats after = stats(gpu);
  ck_assert_uint_eq(after.retries, before.retries + 1);
  ck_assert_uint_eq(after.oom_count, before.oom_count);
  ck_tstor_ok(tstor_storage_fill(b, 0x5a));
  tstor_storage *tailv = view(b, b_size - 4096, 4096);
  unsigned char *bytes = read_back(tailv);
  ck_assert_uint_eq(bytes[4095], 0x5a);
  free(bytes);
  tstor_storage_release(tailv);
  tstor_storage_release(b);
  ck_tstor_ok(tstor_device_empty_cache(ctx, gpu));
}
END_TEST

START_TEST(freed_block_is_reused_from_the_cache) {
  if (!caching) return;
  tstor_storage *a = new_storage(gpu, 3 * MiB);
  void *p = tstor_storage_data(a);
  tstor_storage_release(a);
  tstor_stats before = stats(gpu);
  tstor_storage *b = new_storage(gpu, 3 * MiB);
  ck_assert_ptr_eq(tstor_storage_data(b), p);
  ck_assert_uint_eq(stats(gpu).cache_hits, before.cache_hits + 1);
  tstor_storage_release(b);
}
END_TEST

START_TEST(empty_cache_and_peaks) {
  ck_tstor_ok(tstor_device_empty_cache(ctx, gpu));
  tstor_stats s0 = stats(gpu);
  tstor_storage *a = new_storage(gpu, 64 * MiB);
  tstor_stats s1 = stats(gpu);
  ck_assert_uint_eq(s1.allocated, s0.allocated + 64 * MiB);
  ck_assert_uint_ge(s1.reserved, s0.reserved + 64 * MiB);
  ck_assert_uint_ge(s1.peak_allocated, s1.allocated);
  ck_assert_uint_eq(s1.alloc_count, s0.alloc_count + 1);
  tstor_storage_release(a);
  tstor_stats s2 = stats(gpu);
  ck_assert_uint_eq(s2.free_count, s0.free_count + 1);
  ck_assert_uint_eq(s2.allocated, s0.allocated);
  ck_tstor_ok(tstor_device_reset_peak(ctx, gpu));
  ck_assert_uint_eq(stats(gpu).peak_allocated, s2.allocated);
  ck_tstor_ok(tstor_device_empty_cache(ctx, gpu));
  ck_assert_uint_eq(stats(gpu).reserved, s0.reserved);
}
END_TEST

/* --------------------------------------------------------------- streams */

/* Queues about `ms` milliseconds of copies on `s` (pinned host to device), so
 * that what follows on it is still pending while the test looks. Returns the
 * two storages, which the caller releases after synchronising. */
static void keep_busy(tstor_stream *s, int ms, tstor_storage **host, tstor_storage **dev) {
  size_t n = 256 * MiB; /* ~10 ms at 25 GB/s */
  tstor_storage *h = new_storage(cpu, n);
  ck_tstor_ok(tstor_storage_pin(h, host));
  tstor_storage_release(h);
  *dev = new_storage(gpu, n);
  for (int i = 0; i < ms / 10 + 1; i++) ck_tstor_ok(tstor_storage_copy_async(*dev, *host, s));
}

START_TEST(record_stream_holds_a_block_until_the_stream_is_done) {
  if (!caching) return;
  for (int attempt = 1; attempt <= 3; attempt++) {
    tstor_stream *side;
    tstor_event *ev;
    ck_tstor_ok(tstor_stream_new(ctx, gpu, &side));
    ck_tstor_ok(tstor_event_new(ctx, gpu, &ev));
    tstor_storage *busy_h, *busy_d;
    keep_busy(side, 200 * attempt, &busy_h, &busy_d);
    tstor_storage *x = new_storage(gpu, 8 * MiB);
    void *p = tstor_storage_data(x);
    ck_tstor_ok(tstor_storage_record_stream(x, side));
    ck_tstor_ok(tstor_event_record(ev, side));
    tstor_storage_release(x);
    tstor_storage *y = new_storage(gpu, 8 * MiB);
    int still_busy = tstor_event_query(ev) == TSTOR_EAGAIN;
    void *q = tstor_storage_data(y);
    tstor_storage_release(y);
    ck_tstor_ok(tstor_stream_synchronize(side));
    tstor_storage *z = new_storage(gpu, 8 * MiB);
    void *r = tstor_storage_data(z);
    tstor_storage_release(z);
    tstor_storage_release(busy_h);
    tstor_storage_release(busy_d);
    tstor_event_free(ev);
    tstor_stream_free(side);
    if (!still_busy) continue; /* the GPU was too quick: queue more work */
    ck_assert_ptr_ne(q, p);  /* not reused while the side stream may use it */
    ck_assert_ptr_eq(r, p);  /* reused once an event says it is done */
    return;
  }
  ck_abort_msg("the side stream finished before the test could look; raise keep_busy");
}
END_TEST

START_TEST(pinned_block_is_not_reused_during_an_async_copy) {
  if (!caching) return;
  for (int attempt = 1; attempt <= 3; attempt++) {
    tstor_stream *s;
    tstor_event *ev;
    ck_tstor_ok(tstor_stream_new(ctx, gpu, &s));
    ck_tstor_ok(tstor_event_new(ctx, gpu, &ev));
    tstor_storage *busy_h, *busy_d;
    keep_busy(s, 200 * attempt, &busy_h, &busy_d);
    size_t n = 64 * MiB;
    tstor_storage *h = new_storage(cpu, n), *p, *d = new_storage(gpu, n);
    randomize(tstor_storage_data(h), n);
    ck_tstor_ok(tstor_storage_pin(h, &p));
    ck_assert(tstor_storage_is_pinned(p));
    void *pdata = tstor_storage_data(p);
    ck_tstor_ok(tstor_storage_copy_async(d, p, s)); /* queued behind the busy work */
    ck_tstor_ok(tstor_event_record(ev, s));
    tstor_storage_release(p); /* the copy still reads it */
    tstor_storage *p2;
    ck_tstor_ok(tstor_storage_pin(h, &p2));
    int still_busy = tstor_event_query(ev) == TSTOR_EAGAIN;
    void *p2data = tstor_storage_data(p2);
    tstor_storage_release(p2);
    ck_tstor_ok(tstor_stream_synchronize(s));
    /* The copy read the original bytes. */
    unsigned char *back = read_back(d);
    ck_assert_int_eq(memcmp(back, tstor_storage_data(h), n), 0);
    free(back);
    tstor_storage *p3;
    ck_tstor_ok(tstor_storage_pin(h, &p3));
    void *p3data = tstor_storage_data(p3);
    tstor_storage_release(p3);
    tstor_storage_release(h);
    tstor_storage_release(d);
    tstor_storage_release(busy_h);
    tstor_storage_release(busy_d);
    tstor_event_free(ev);
    tstor_stream_free(s);
    if (!still_busy) continue;
    ck_assert_ptr_ne(p2data, pdata);
    ck_assert(p3data == pdata || p3data == p2data); /* cached blocks come back */
    return;
  }
  ck_abort_msg("the copy finished before the test could look; raise keep_busy");
}
END_TEST

START_TEST(streams_and_events) {
  tstor_stream *s1, *s2;
  tstor_event *e;
  ck_tstor_ok(tstor_stream_new(ctx, gpu, &s1));
  ck_tstor_ok(tstor_stream_new(ctx, gpu, &s2));
  ck_tstor_ok(tstor_event_new(ctx, gpu, &e));
  size_t n = 32 * MiB;
  tstor_storage *h = new_storage(cpu, n), *hp, *d1 = new_storage(gpu, n),
                *d2 = new_storage(gpu, n);
  randomize(tstor_storage_data(h), n);
  ck_tstor_ok(tstor_storage_pin(h, &hp));
  ck_tstor_ok(tstor_storage_copy_async(d1, hp, s1));
  ck_tstor_ok(tstor_event_record(e, s1));
  ck_tstor_ok(tstor_stream_wait_event(s2, e)); /* s2 sees d1 complete */
  ck_tstor_ok(tstor_storage_copy_async(d2, d1, s2));
  ck_tstor_ok(tstor_storage_record_stream(d1, s2));
  ck_tstor_ok(tstor_stream_synchronize(s2));
  ck_tstor_ok(tstor_event_synchronize(e));
  ck_tstor_ok(tstor_event_query(e));
  unsigned char *b = read_back(d2);
  ck_assert_int_eq(memcmp(b, tstor_storage_data(h), n), 0);
  free(b);
  ck_tstor_ok(tstor_synchronize(ctx, gpu));
  tstor_storage_release(h);
  tstor_storage_release(hp);
  tstor_storage_release(d1);
  tstor_storage_release(d2);
  tstor_event_free(e);
  tstor_stream_free(s1);
  tstor_stream_free(s2);
}
END_TEST

/* ------------------------------------------------------------------ copies */

static const size_t copy_sizes[] = {1, 7, 512, 4097, MiB + 3, 33 * MiB + 5};
static const size_t copy_offsets[] = {0, 1, 3, 511, 4103};

/* Host -> device -> device -> host through views at odd offsets, and checks
 * that the bytes around the views are untouched. */
static void round_trip(size_t n, size_t off, tstor_device other, int async, int pinned) {
  size_t pad = 64;
  tstor_storage *hbase = new_storage(cpu, n + off + pad), *src = hbase;
  if (pinned) ck_tstor_ok(tstor_storage_pin(hbase, &src));
  randomize(tstor_storage_data(src), n + off + pad);
  tstor_storage *gbase = new_storage(gpu, n + off + pad);
  tstor_storage *obase = new_storage(other, n + 2 * off + pad);
  ck_tstor_ok(tstor_storage_fill(gbase, 0xee));
  ck_tstor_ok(tstor_storage_fill(obase, 0xdd));
  tstor_storage *hv = view(src, off, n), *gv = view(gbase, off, n), *ov = view(obase, 2 * off, n);
  tstor_stream *s = NULL, *s_other = NULL; /* a stream on each side's device */
  if (async) ck_tstor_ok(tstor_stream_new(ctx, gpu, &s));
  if (async) ck_tstor_ok(tstor_stream_new(ctx, other, &s_other));
  if (async) {
    ck_tstor_ok(tstor_storage_copy_async(gv, hv, s));
    ck_tstor_ok(tstor_storage_copy_async(ov, gv, s));
    ck_tstor_ok(tstor_stream_synchronize(s));
  } else {
    ck_tstor_ok(tstor_storage_copy(gv, hv));
    ck_tstor_ok(tstor_storage_copy(ov, gv));
  }
  tstor_storage *back = new_storage(cpu, n + 2 * off + pad), *backp = back;
  if (pinned) ck_tstor_ok(tstor_storage_pin(back, &backp));
  tstor_storage *bv = view(backp, 0, n + 2 * off + pad);
  if (async) {
    ck_tstor_ok(tstor_storage_copy_async(bv, obase, s_other));
    ck_tstor_ok(tstor_stream_synchronize(s_other));
  } else {
    ck_tstor_ok(tstor_storage_copy(bv, obase));
  }
  const unsigned char *want = (const unsigned char *)tstor_storage_data(src) + off;
  const unsigned char *got = tstor_storage_data(backp);
  for (size_t i = 0; i < 2 * off; i++) ck_assert_uint_eq(got[i], 0xdd);
  ck_assert_msg(memcmp(got + 2 * off, want, n) == 0, "size %zu offset %zu async %d pinned %d", n,
                off, async, pinned);
  for (size_t i = 2 * off + n; i < n + 2 * off + pad; i++) ck_assert_uint_eq(got[i], 0xdd);
  unsigned char *g = read_back(gbase);
  for (size_t i = 0; i < off; i++) ck_assert_uint_eq(g[i], 0xee);
  for (size_t i = off + n; i < n + off + pad; i++) ck_assert_uint_eq(g[i], 0xee);
  free(g);
  tstor_stream_free(s);
  tstor_stream_free(s_other);
  tstor_storage_release(bv);
  if (backp != back) tstor_storage_release(backp);
  tstor_storage_release(back);
  tstor_storage_release(hv);
  tstor_storage_release(gv);
  tstor_storage_release(ov);
  if (src != hbase) tstor_storage_release(src);
  tstor_storage_release(hbase);
  tstor_storage_release(gbase);
  tstor_storage_release(obase);
}

START_TEST(round_trips_same_device) {
  for (size_t i = 0; i < sizeof copy_sizes / sizeof copy_sizes[0]; i++)
    for (size_t j = 0; j < sizeof copy_offsets / sizeof copy_offsets[0]; j++)
      round_trip(copy_sizes[i], copy_offsets[j], gpu, _i & 1, (_i >> 1) & 1);
}
END_TEST

START_TEST(round_trips_between_devices) {
  if (ndev < 2) return;
  tstor_device other = {gpu.type, 1};
  for (size_t i = 0; i < sizeof copy_sizes / sizeof copy_sizes[0]; i++)
    for (size_t j = 0; j < sizeof copy_offsets / sizeof copy_offsets[0]; j++)
      round_trip(copy_sizes[i], copy_offsets[j], other, _i & 1, (_i >> 1) & 1);
}
END_TEST

START_TEST(copy_size_mismatch_is_refused) {
  tstor_storage *a = new_storage(gpu, 100), *b = new_storage(cpu, 101);
  ck_tstor_err(tstor_storage_copy(a, b), TSTOR_ESIZE);
  ck_tstor_err(tstor_storage_copy(b, a), TSTOR_ESIZE);
  tstor_storage_release(a);
  tstor_storage_release(b);
}
END_TEST

/* ------------------------------------------------------------------- fills */

START_TEST(fills_every_pattern_size_at_every_alignment) {
  static const size_t psizes[] = {1, 2, 4, 8, 16};
  size_t psize = psizes[_i];
  unsigned char pattern[16];
  for (size_t k = 0; k < 16; k++) pattern[k] = (unsigned char)(0x11 * (k + 1));
  tstor_storage *base = new_storage(gpu, 4 * MiB + 64);
  for (size_t off = 0; off < 18; off++) {
    for (size_t count = 0; count < 40; count += (count < 20 ? 1 : 7)) {
      size_t n = psize * (count == 39 ? (MiB + 5) : count);
      ck_tstor_ok(tstor_storage_fill(base, 0));
      tstor_storage *v = view(base, off, n);
      ck_tstor_ok(tstor_storage_fill_pattern(v, pattern, psize));
      tstor_storage_release(v);
      tstor_storage *head = view(base, 0, off + n + 32);
      unsigned char *b = read_back(head);
      for (size_t i = 0; i < off; i++) ck_assert_uint_eq(b[i], 0);
      for (size_t i = 0; i < n; i++)
        ck_assert_msg(b[off + i] == pattern[i % psize], "psize %zu off %zu n %zu: byte %zu",
                      psize, off, n, i);
      for (size_t i = off + n; i < off + n + 32; i++) ck_assert_uint_eq(b[i], 0);
      free(b);
      tstor_storage_release(head);
    }
  }
  /* A pattern of one repeated byte takes the memset path. */
  unsigned char same[16];
  memset(same, 0x3c, sizeof same);
  ck_tstor_ok(tstor_storage_fill_pattern(base, same, psize));
  unsigned char *b = read_back(base);
  for (size_t i = 0; i < 4 * MiB + 64; i++) ck_assert_uint_eq(b[i], 0x3c);
  free(b);
  tstor_storage_release(base);
}
END_TEST

START_TEST(bad_fill_pattern_is_refused) {
  tstor_storage *s = new_storage(gpu, 12);
  unsigned char p[16] = {0};
  ck_tstor_err(tstor_storage_fill_pattern(s, p, 8), TSTOR_ESIZE);
  ck_assert_int_ne(tstor_storage_fill_pattern(s, p, 3), 0);
  tstor_storage_release(s);
}
END_TEST

/* -------------------------------------------------------------- conversion */

/* Source values: random bits, plus each dtype's awkward cases. */
static void convert_source(tstor_dtype dt, void *buf, size_t count) {
  size_t es = tstor_dtype_size(dt);
  randomize(buf, count * es);
  static const double specials[] = {
      0.0,    -0.0,     1.0,          -1.0,          0.5,          1.5,     2.5,    -2.5,
      255.0,  256.0,    300.0,        -129.0,        65504.0,      65520.0, 1e-8,   6e-8,
      1e30,   -1e30,    2147483648.0, -2147483649.0, 4294967296.0, 5e9,     9.3e18, 1.5e19,
      1.9e19, 0x1p-127, 1.0 / 0.0,    -1.0 / 0.0,    0.0 / 0.0};
  size_t ns = sizeof specials / sizeof specials[0];
  for (size_t i = 0; i < ns && i < count; i++)
    ck_tstor_ok(tstor_dtype_convert((char *)buf + i * es, dt, &specials[i], TSTOR_FLOAT64, 1));
}

START_TEST(conversion_matches_the_host_bit_for_bit) {
  const size_t count = 65536 + 17;
  tstor_dtype src_dt = (tstor_dtype)_i;
  const tstor_dtype_info *si = tstor_dtype_info_of(src_dt);
  if (!si || si->kind == TSTOR_KIND_QUANTIZED || si->kind == TSTOR_KIND_OPAQUE) return;
  void *src_host = malloc(count * si->element_size);
  ck_assert_ptr_nonnull(src_host);
  convert_source(src_dt, src_host, count);
  tstor_storage *src = NULL;
  ck_tstor_ok(tstor_typed_from_array(ctx, gpu, src_dt, src_host, src_dt, count, &src));
  for (int d = 0; d < TSTOR_DTYPE_END; d++) {
    const tstor_dtype_info *di = tstor_dtype_info_of((tstor_dtype)d);
    if (!di || di->kind == TSTOR_KIND_QUANTIZED || di->kind == TSTOR_KIND_OPAQUE) continue;
    tstor_storage *dst = NULL;
    ck_tstor_ok(tstor_typed_new(ctx, gpu, di->dtype, count, &dst));
    ck_tstor_ok(tstor_typed_copy(dst, di->dtype, src, src_dt));
    unsigned char *got = read_back(dst);
    unsigned char *want = malloc(count * di->element_size);
    ck_assert_ptr_nonnull(want);
    ck_tstor_ok(tstor_dtype_convert(want, di->dtype, src_host, src_dt, count));
    for (size_t i = 0; i < count; i++) {
      if (memcmp(got + i * di->element_size, want + i * di->element_size, di->element_size)) {
        ck_abort_msg("%s -> %s: element %zu differs from the host's", si->name, di->name, i);
      }
    }
    free(want);
    free(got);
    tstor_storage_release(dst);
  }
  tstor_storage_release(src);
  free(src_host);
}
END_TEST

START_TEST(typed_fill_on_the_device) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_typed_new(ctx, gpu, TSTOR_FLOAT64, 1000, &s));
  double v = 3.25;
  ck_tstor_ok(tstor_typed_fill(s, TSTOR_FLOAT64, &v));
  unsigned char *b = read_back(s);
  for (size_t i = 0; i < 1000; i++) ck_assert_int_eq(memcmp(b + 8 * i, &v, 8), 0);
  free(b);
  tstor_storage_release(s);
}
END_TEST

/* ---------------------------------------------------------- current device */

START_TEST(operations_restore_the_callers_device) {
  int last = ndev - 1;
  ck_assert_int_eq(cudaSetDevice(last), cudaSuccess);
  tstor_storage *a = new_storage(gpu, MiB); /* cuda:0 */
  int cur = -1;
  ck_assert_int_eq(cudaGetDevice(&cur), cudaSuccess);
  ck_assert_int_eq(cur, last);
  ck_tstor_ok(tstor_storage_fill(a, 1));
  tstor_stream *s;
  ck_tstor_ok(tstor_stream_new(ctx, gpu, &s));
  tstor_storage *h = new_storage(cpu, MiB);
  ck_tstor_ok(tstor_storage_copy_async(h, a, s));
  ck_tstor_ok(tstor_stream_synchronize(s));
  tstor_stream_free(s);
  ck_tstor_ok(tstor_synchronize(ctx, gpu));
  ck_tstor_ok(tstor_device_empty_cache(ctx, gpu));
  tstor_storage_release(a);
  tstor_storage_release(h);
  ck_assert_int_eq(cudaGetDevice(&cur), cudaSuccess);
  ck_assert_int_eq(cur, last);
  if (ndev >= 2) { /* the other way round */
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    tstor_device d1 = {gpu.type, 1};
    tstor_storage *b = new_storage(d1, MiB);
    ck_tstor_ok(tstor_storage_fill(b, 2));
    tstor_storage_release(b);
    ck_assert_int_eq(cudaGetDevice(&cur), cudaSuccess);
    ck_assert_int_eq(cur, 0);
  }
}
END_TEST

/* --------------------------------------------------------------- threads */

static void *thread_work(void *arg) {
  (void)arg;
  for (int i = 0; i < 200; i++) {
    tstor_storage *s = NULL;
    if (tstor_storage_new(ctx, gpu, (size_t)(i % 7 + 1) * 100000, &s) != 0) return (void *)1;
    if (tstor_storage_fill(s, (uint8_t)i) != 0) return (void *)2;
    tstor_storage_release(s);
  }
  return NULL;
}

START_TEST(threads_allocate_concurrently) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, thread_work, NULL), 0);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(t[i], &r);
    ck_assert_ptr_null(r);
  }
}
END_TEST

/* ------------------------------------------------------------------ pinned */

START_TEST(pin_memory_and_is_pinned) {
  tstor_storage *h = new_storage(cpu, 1000), *p, *p2;
  randomize(tstor_storage_data(h), 1000);
  ck_assert(!tstor_storage_is_pinned(h));
  ck_tstor_ok(tstor_storage_pin(h, &p));
  ck_assert(tstor_storage_is_pinned(p));
  ck_assert_int_eq(memcmp(tstor_storage_data(p), tstor_storage_data(h), 1000), 0);
  ck_tstor_ok(tstor_storage_pin(p, &p2));
  ck_assert_ptr_eq(p2, p);
  tstor_storage_release(p2);
  tstor_storage_release(p);
  tstor_storage_release(h);
}
END_TEST

/* ----------------------------------------------------------------- the suite */

int main(void) {
  Suite *s = suite_create("cuda");
  TCase *t = tcase_create("allocator");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 300);
  tcase_add_test(t, allocation_sizes_from_0_to_1gib);
  tcase_add_test(t, freed_block_is_reused_from_the_cache);
  tcase_add_test(t, empty_cache_and_peaks);
  tcase_add_test(t, threads_allocate_concurrently);
  suite_add_tcase(s, t);
  /* Tagged: compute-sanitizer's memcheck reports the refused cudaMalloc as an
   * API error, so tests/gpu-checks.sh leaves these out of its run
   * (CK_EXCLUDE_TAGS=oom). */
  t = tcase_create("out of memory");
  tcase_set_tags(t, "oom");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 300);
  tcase_add_test(t, a_1pib_request_fails_cleanly);
  tcase_add_test(t, oom_then_retry_succeeds_after_cached_blocks_are_freed);
  suite_add_tcase(s, t);
  t = tcase_create("streams");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 300);
  tcase_add_test(t, record_stream_holds_a_block_until_the_stream_is_done);
  tcase_add_test(t, pinned_block_is_not_reused_during_an_async_copy);
  tcase_add_test(t, streams_and_events);
  tcase_add_test(t, pin_memory_and_is_pinned);
  suite_add_tcase(s, t);
  t = tcase_create("copies");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 600);
  tcase_add_loop_test(t, round_trips_same_device, 0, 4);
  tcase_add_loop_test(t, round_trips_between_devices, 0, 4);
  tcase_add_test(t, copy_size_mismatch_is_refused);
  tcase_add_loop_test(t, fills_every_pattern_size_at_every_alignment, 0, 5);
  tcase_add_test(t, bad_fill_pattern_is_refused);
  suite_add_tcase(s, t);
  t = tcase_create("conversion");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 600);
  tcase_add_loop_test(t, conversion_matches_the_host_bit_for_bit, 0, TSTOR_DTYPE_END);
  tcase_add_test(t, typed_fill_on_the_device);
  suite_add_tcase(s, t);
  t = tcase_create("devices");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 120);
  tcase_add_test(t, operations_restore_the_callers_device);
  suite_add_tcase(s, t);
  return cudatest_run("test_cuda", s);
}
