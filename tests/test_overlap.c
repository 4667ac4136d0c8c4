/* Copies between overlapping views of one storage on devices the core stages
 * through host memory: untyped copies on "fake" (only cpu<->fake kernels),
 * converting typed copies on hpu-stub, fake and convdev. The result must be
 * memmove's: every source element read before any is written. Sizes straddle
 * the staging chunk (TSTOR__STAGE_BYTES, 16 MiB of the wider side) and the
 * destination lies before and after the source, near and far. The same on
 * cpu, where the core copies host memory itself. */
#include "coretest.h"

#include <stdint.h>
#include <tstor/typed.h>

#define STAGE_BYTES ((size_t)16 << 20) /* core/internal.h's TSTOR__STAGE_BYTES */

static tstor_context *ctx;
static tstor_device cpu, fake0, conv0, hpu0;

static void setup(void) {
  ctx = coretest_open(coretest_fmt("%s[backend convdev]\nlibrary = %s\n"
                                   "[backend hpu]\nlibrary = tstor-hpu-stub.so\n"
                                   "memory_mb = 128\n",
                                   coretest_fake_section("fake", NULL),
                                   coretest_plugin("convdev")));
  cpu = coretest_dev(ctx, "cpu");
  fake0 = coretest_dev(ctx, "fake:0");
  conv0 = coretest_dev(ctx, "convdev:0");
  hpu0 = coretest_dev(ctx, "hpu:0");
}
static void teardown(void) { tstor_context_close(ctx); }

/* Copies all bytes of s to or from host memory through a wrapped cpu storage. */
static void transfer(tstor_storage *s, void *host, int upload) {
  tstor_storage *h;
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, host, tstor_storage_nbytes(s), &h));
  ck_tstor_ok(upload ? tstor_storage_copy(s, h) : tstor_storage_copy(h, s));
  tstor_storage_release(h);
}

static tstor_storage *view(tstor_storage *base, size_t offset, size_t nbytes) {
  tstor_storage *v;
  ck_tstor_ok(tstor_storage_view(base, offset, nbytes, &v));
  return v;
}

/* Offsets of a source and a destination `shift` bytes apart, both past a
 * 64-byte margin, and the size of a base that holds both ranges. */
static void place(long shift, size_t sbytes, size_t dbytes, size_t *src_off, size_t *dst_off,
                  size_t *base_bytes) {
  *src_off = 64 + (shift < 0 ? (size_t)-shift : 0);
  *dst_off = (size_t)((long)*src_off + shift);
  size_t end = *src_off + sbytes > *dst_off + dbytes ? *src_off + sbytes : *dst_off + dbytes;
  *base_bytes = (end + 64 + 7) / 8 * 8;
}

/* Untyped: copy `n` bytes from a view to a view `shift` bytes away. */
static void check_bytes(tstor_device dev, size_t n, long shift) {
  size_t so, dof, nb;
  place(shift, n, n, &so, &dof, &nb);
  unsigned char *ref = malloc(nb), *got = malloc(nb);
  ck_assert_ptr_nonnull(ref);
  ck_assert_ptr_nonnull(got);
  for (size_t i = 0; i < nb; i++) ref[i] = (unsigned char)(i * 131u + (i >> 9) + (i >> 17));
  tstor_storage *base, *src, *dst;
  ck_tstor_ok(tstor_storage_new(ctx, dev, nb, &base));
  transfer(base, ref, 1);
  src = view(base, so, n);
  dst = view(base, dof, n);
  ck_tstor_ok(tstor_storage_copy(dst, src));
  memmove(ref + dof, ref + so, n);
  transfer(base, got, 0);
  size_t bad = 0;
  while (bad < nb && got[bad] == ref[bad]) bad++;
  ck_assert_msg(bad == nb, "%zu bytes shifted by %ld on type %d: byte %zu is %u, expected %u", n,
                shift, dev.type, bad, bad < nb ? got[bad] : 0, bad < nb ? ref[bad] : 0);
  tstor_storage_release(src);
  tstor_storage_release(dst);
  tstor_storage_release(base);
  free(ref);
  free(got);
}

/* Typed: convert `n` elements of st at a view to dt at a view `shift` bytes
 * away. The base holds st values from its start, so the source is whole st
 * elements; the reference converts on the host from a copy taken before. */
static void check_typed(tstor_device dev, tstor_dtype dt, tstor_dtype st, size_t n, long shift) {
  size_t ses = tstor_dtype_size(st), des = tstor_dtype_size(dt), so, dof, nb;
  place(shift, n * ses, n * des, &so, &dof, &nb);
  size_t count = nb / ses;
  double *values = malloc(count * sizeof *values);
  unsigned char *ref = malloc(nb), *got = malloc(nb), *conv = malloc(n * des);
  ck_assert(values && ref && got && conv);
  for (size_t i = 0; i < count; i++) values[i] = (double)((long)(i % 2001) - 1000);
  ck_tstor_ok(tstor_dtype_convert(ref, st, values, TSTOR_FLOAT64, count));
  tstor_storage *base, *src, *dst;
  ck_tstor_ok(tstor_storage_new(ctx, dev, nb, &base));
  transfer(base, ref, 1);
  src = view(base, so, n * ses);
  dst = view(base, dof, n * des);
  ck_tstor_ok(tstor_typed_copy(dst, dt, src, st));
  ck_tstor_ok(tstor_dtype_convert(conv, dt, ref + so, st, n));
  memcpy(ref + dof, conv, n * des);
  transfer(base, got, 0);
  size_t bad = 0;
  while (bad < nb && got[bad] == ref[bad]) bad++;
  ck_assert_msg(bad == nb, "%s -> %s of %zu elements shifted by %ld bytes on type %d: byte %zu differs",
                tstor_dtype_name(st), tstor_dtype_name(dt), n, shift, dev.type, bad);
  tstor_storage_release(src);
  tstor_storage_release(dst);
  tstor_storage_release(base);
  free(values);
  free(ref);
  free(got);
  free(conv);
}

/* Shifts: the destination just before and just after the source, and half
 * the range away on each side. */
static long shift_of(int k, size_t bytes) {
  long half = (long)(bytes / 2 / 8 * 8);
  static const int sign[] = {1, -1, 1, -1};
  return sign[k] * (k < 2 ? 8 : half);
}

/* Sizes just under, just over and well past one chunk (sizes under one chunk
 * are read whole before they are written). */
static size_t size_of(int k, size_t chunk_items) {
  switch (k) {
    case 0: return chunk_items - 3;
    case 1: return chunk_items + 5;
    default: return 2 * chunk_items + chunk_items / 3;
  }
}

START_TEST(untyped_overlap_on_fake) {
  for (int s = 0; s < 3; s++)
    for (int k = 0; k < 4; k++) {
      size_t n = size_of(s, STAGE_BYTES);
      check_bytes(fake0, n, shift_of(k, n));
    }
}
END_TEST

START_TEST(untyped_overlap_on_hpu) {
  for (int s = 0; s < 2; s++)
    for (int k = 0; k < 4; k++) {
      size_t n = size_of(s, STAGE_BYTES);
      check_bytes(hpu0, n, shift_of(k, n));
    }
}
END_TEST

/* Widening, narrowing and same-size pairs: each needs its own order (forward,
 * backward, or the whole source first). */
static const struct {
  tstor_dtype dst, src;
} pairs[] = {{TSTOR_FLOAT64, TSTOR_FLOAT32}, {TSTOR_FLOAT32, TSTOR_FLOAT64},
             {TSTOR_INT32, TSTOR_FLOAT32},   {TSTOR_FLOAT32, TSTOR_FLOAT16},
             {TSTOR_BFLOAT16, TSTOR_FLOAT32}};
#define NPAIRS (sizeof pairs / sizeof pairs[0])

static void typed_on(tstor_device dev, int sizes) {
  for (size_t p = 0; p < NPAIRS; p++) {
    size_t es = tstor_dtype_size(pairs[p].dst), ss = tstor_dtype_size(pairs[p].src);
    size_t chunk = STAGE_BYTES / (es > ss ? es : ss);
    for (int s = 0; s < sizes; s++)
      for (int k = 0; k < 4; k++) {
        size_t n = size_of(s, chunk);
        check_typed(dev, pairs[p].dst, pairs[p].src, n, shift_of(k, n * ss));
      }
  }
}

START_TEST(typed_overlap_on_hpu) { typed_on(hpu0, 2); }
END_TEST

START_TEST(typed_overlap_on_fake) { typed_on(fake0, 2); }
END_TEST

/* convdev converts float32 -> float64 itself, element by element forward: the
 * core must not hand it overlapping ranges. */
START_TEST(typed_overlap_on_convdev) { typed_on(conv0, 2); }
END_TEST

/* In place on one view (same start, same size) and an exact alias of a
 * widening pair's prefix: the staged byteswap, and a small overlap under one
 * chunk. */
START_TEST(small_overlaps) {
  for (long shift = -24; shift <= 24; shift += 8) {
    check_bytes(fake0, 1000, shift);
    check_typed(fake0, TSTOR_FLOAT64, TSTOR_FLOAT32, 333, shift);
    check_typed(hpu0, TSTOR_FLOAT16, TSTOR_FLOAT32, 333, shift);
  }
}
END_TEST

/* On cpu the core copies itself, split over threads in steps no longer than
 * the gap when the gap is large (16 MiB and more), else one memmove. */
START_TEST(host_overlap_on_cpu) {
  static const long shifts[] = {8, -8, 17L << 20, -(17L << 20), 3L << 20, -(3L << 20)};
  for (size_t k = 0; k < sizeof shifts / sizeof shifts[0]; k++) {
    check_bytes(cpu, (size_t)40 << 20, shifts[k]);
    check_bytes(cpu, ((size_t)40 << 20) + 12345, shifts[k]);
  }
  check_typed(cpu, TSTOR_FLOAT64, TSTOR_FLOAT32, (size_t)5 << 20, -(8L << 20));
  check_typed(cpu, TSTOR_FLOAT32, TSTOR_FLOAT64, (size_t)5 << 20, 12L << 20);
}
END_TEST

int main(void) {
  Suite *s = suite_create("overlap");
  TCase *tc = tcase_create("staged");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300); /* hundreds of megabytes through scrambling kernels */
  tcase_add_test(tc, small_overlaps);
  tcase_add_test(tc, host_overlap_on_cpu);
  tcase_add_test(tc, untyped_overlap_on_fake);
  tcase_add_test(tc, untyped_overlap_on_hpu);
  tcase_add_test(tc, typed_overlap_on_hpu);
  tcase_add_test(tc, typed_overlap_on_fake);
  tcase_add_test(tc, typed_overlap_on_convdev);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
