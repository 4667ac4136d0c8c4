/* The cuda backend's kernel bodies (backends/cuda/kernels.cu), run on the host
 * through the TSTOR_CUDA_EMULATE build of the same file: every dtype pair
 * converts exactly as tstor_dtype_convert does, and fills write the right
 * bytes at every alignment. This checks the kernels' code on machines without
 * a GPU; test_cuda checks the same on the device. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tstor/typed.h>

#define TSTOR_CUDA_EMULATE
#include "kernels.h"
#include "testutil.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t rng(void) { return tstor_test_rng(&rng_state); }

/* Random bits, then each dtype's awkward values. */
static void make_source(tstor_dtype dt, unsigned char *buf, size_t count) {
  size_t es = tstor_dtype_size(dt);
  for (size_t i = 0; i < count * es; i++) buf[i] = (unsigned char)rng();
  static const double specials[] = {
      0.0,       -0.0,       1.0,          -1.0,         0.5,           1.5,          2.5,
      -2.5,      127.5,      255.0,        256.0,        300.0,         -129.0,       65504.0,
      65520.0,   1e-8,       6e-8,         3e-45,        1e30,          -1e30,        448.0,
      480.0,     57344.0,    2147483647.0, 2147483648.0, -2147483649.0, 4294967295.0, 4294967296.0,
      5e9,       9.3e18,     -9.3e18,      1.5e19,       1.9e19,        0x1p-127,     3e38,
      1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0};
  size_t ns = sizeof specials / sizeof specials[0];
  for (size_t i = 0; i < ns && i < count; i++)
    ck_tstor_ok(tstor_dtype_convert(buf + i * es, dt, &specials[i], TSTOR_FLOAT64, 1));
  /* Every bit pattern of the one- and two-byte dtypes. */
  if (es <= 2) {
    size_t all = es == 1 ? 256 : 65536;
    for (size_t v = 0; v < all && ns + v < count; v++) memcpy(buf + (ns + v) * es, &v, es);
  }
}

static int convertible(int d) {
  const tstor_dtype_info *info = tstor_dtype_info_of((tstor_dtype)d);
  return info && info->kind != TSTOR_KIND_QUANTIZED && info->kind != TSTOR_KIND_OPAQUE;
}

START_TEST(every_pair_converts_as_on_the_host) {
  if (!convertible(_i)) return;
  tstor_dtype src_dt = (tstor_dtype)_i;
  const size_t count = 65536 + 64 + 7;
  size_t ss = tstor_dtype_size(src_dt);
  unsigned char *src = malloc(count * ss);
  ck_assert_ptr_nonnull(src);
  make_source(src_dt, src, count);
  for (int d = 0; d < TSTOR_DTYPE_END; d++) {
    if (!convertible(d)) continue;
    tstor_dtype dst_dt = (tstor_dtype)d;
    size_t ds = tstor_dtype_size(dst_dt);
    unsigned char *got = malloc(count * ds), *want = malloc(count * ds);
    ck_assert(got && want);
    ck_assert_int_eq(tstor__cuda_emulate_convert(got, d, src, _i, count), 0);
    ck_tstor_ok(tstor_dtype_convert(want, dst_dt, src, src_dt, count));
    for (size_t i = 0; i < count; i++) {
      if (memcmp(got + i * ds, want + i * ds, ds) != 0) {
        unsigned long long in = 0, g = 0, w = 0;
        memcpy(&in, src + i * ss, ss < 8 ? ss : 8);
        memcpy(&g, got + i * ds, ds < 8 ? ds : 8);
        memcpy(&w, want + i * ds, ds < 8 ? ds : 8);
        ck_abort_msg("%s -> %s, element %zu (bits 0x%llx): kernel 0x%llx, host 0x%llx",
                     tstor_dtype_name(src_dt), tstor_dtype_name(dst_dt), i, in, g, w);
      }
    }
    free(got);
    free(want);
  }
  free(src);
}
END_TEST

START_TEST(quantized_and_misaligned_are_declined) {
  unsigned char buf[64] = {0};
  ck_assert_int_eq(tstor__cuda_emulate_convert(buf, TSTOR_FLOAT32, buf + 32, TSTOR_QINT8, 4), -1);
  ck_assert_int_eq(tstor__cuda_emulate_convert(buf, TSTOR_QUINT8, buf + 32, TSTOR_FLOAT32, 4), -1);
  ck_assert_int_eq(tstor__cuda_emulate_convert(buf, 19, buf + 32, TSTOR_FLOAT32, 4), -1);
  ck_assert_int_eq(tstor__cuda_emulate_convert(buf + 1, TSTOR_FLOAT32, buf + 32, TSTOR_INT8, 4),
                   -1);
  ck_assert_int_eq(tstor__cuda_emulate_convert(buf, TSTOR_INT8, buf + 33, TSTOR_FLOAT32, 4), -1);
  /* Zero elements and same-dtype copies need no alignment. */
  ck_assert_int_eq(tstor__cuda_emulate_convert(buf + 1, TSTOR_FLOAT32, buf, TSTOR_INT8, 0), 0);
  ck_assert_int_eq(tstor__cuda_emulate_convert(buf + 1, TSTOR_FLOAT64, buf + 41, TSTOR_FLOAT64, 2),
                   0);
}
END_TEST

START_TEST(fills_write_the_pattern_at_every_alignment) {
  static const size_t psizes[] = {1, 2, 4, 8, 16};
  size_t psize = psizes[_i];
  unsigned char pattern[16];
  for (size_t k = 0; k < 16; k++) pattern[k] = (unsigned char)(0x10 + 0x11 * k);
  enum { CAP = 70016 }; /* aligned_alloc wants a multiple of the alignment */
  unsigned char *buf = aligned_alloc(64, CAP + 128);
  ck_assert_ptr_nonnull(buf);
  for (size_t off = 0; off < 33; off++) {
    for (size_t count = 0; count * psize + off + 64 < CAP; count = count < 40 ? count + 1 : count * 3) {
      size_t n = count * psize;
      memset(buf, 0xa5, CAP + 128);
      tstor__cuda_emulate_fill(buf + off, n, pattern, psize);
      for (size_t i = 0; i < off; i++) ck_assert_uint_eq(buf[i], 0xa5);
      for (size_t i = 0; i < n; i++)
        ck_assert_msg(buf[off + i] == pattern[i % psize],
                      "pattern %zu, offset %zu, %zu bytes: byte %zu is 0x%02x", psize, off, n, i,
                      buf[off + i]);
      for (size_t i = off + n; i < off + n + 64; i++) ck_assert_uint_eq(buf[i], 0xa5);
    }
  }
  free(buf);
}
END_TEST

/* The strided copy against a plain loop: a transposed 3-d block with a
 * broadcast (stride 0) dimension, for every element size; and what it
 * declines. */
START_TEST(strided_copies_every_element) {
  static const size_t sizes_of[] = {1, 2, 4, 8, 16};
  size_t es = sizes_of[_i];
  enum { A = 5, B = 3, C = 4 };
  unsigned char src[A * C * 16], dst[A * B * C * 16], want[A * B * C * 16];
  for (size_t k = 0; k < sizeof src; k++) src[k] = (unsigned char)(k * 7 + 1);
  memset(dst, 0, sizeof dst);
  memset(want, 0, sizeof want);
  /* dst[a][b][c] (contiguous) = src[c][a] (src is C x A), broadcast over b */
  tstor__cuda_strided st = {3, {C, B, A}, {(long long)es, (long long)(C * es), (long long)(B * C * es)},
                            {(long long)(A * es), 0, (long long)es}};
  for (int a = 0; a < A; a++)
    for (int b = 0; b < B; b++)
      for (int c = 0; c < C; c++)
        memcpy(want + ((a * B + b) * C + c) * es, src + (c * A + a) * es, es);
  ck_assert_int_eq(tstor__cuda_emulate_strided(dst, src, &st, es), 0);
  ck_assert_mem_eq(dst, want, A * B * C * es);
  tstor__cuda_strided nine = {9, {0}, {0}, {0}};
  ck_assert_int_eq(tstor__cuda_emulate_strided(dst, src, &nine, es), -1);
  if (es > 1) ck_assert_int_eq(tstor__cuda_emulate_strided(dst + 1, src, &st, es), -1);
}
END_TEST

/* Every element of a strided block, by a plain loop over its index. */
static void strided_reference(unsigned char *dst, const unsigned char *src,
                              const tstor__cuda_strided *st, size_t es) {
  long long n = 1;
  for (int d = 0; d < st->ndim; d++) n *= st->sizes[d];
  for (long long i = 0; i < n; i++) {
    long long q = i, doff = 0, soff = 0;
    for (int d = 0; d < st->ndim; d++) {
      doff += q % st->sizes[d] * st->dst_strides[d];
      soff += q % st->sizes[d] * st->src_strides[d];
      q /= st->sizes[d];
    }
    memcpy(dst + doff, src + soff, es);
  }
}

/* Blocks with one dimension contiguous in dst and another in src go through
 * the tiled transpose: matrices with whole tiles and overhanging ones, and
 * NCHW -> NHWC with the batch dimension outermost and, once, in the middle. */
START_TEST(transposes_move_every_element) {
  static const size_t sizes_of[] = {1, 2, 4, 8, 16};
  size_t es = sizes_of[_i];
  enum { R = 70, C = 45, N = 3, CH = 9, HW = 37 };
  long long e = (long long)es;
  const tstor__cuda_strided cases[] = {
      /* dst (C x R) = src (R x C) transposed: dim 0 walks dst rows, dim 1 src rows */
      {2, {R, C}, {e, R * e}, {C * e, e}},
      /* NCHW (N, CH, HW) -> NHWC: dims CH, HW, N innermost first */
      {3, {CH, HW, N}, {e, CH * e, CH * HW * e}, {HW * e, e, CH * HW * e}},
      /* the batch between the two tiled dimensions */
      {3, {CH, N, HW}, {e, CH * HW * e, CH * e}, {HW * e, CH * HW * e, e}},
      /* whole tiles inside, moved without bounds checks, and overhanging ones */
      {2, {130, 70}, {e, 130 * e}, {70 * e, e}},
      /* the smallest sides that still tile: 8 x 8 */
      {2, {8, 8}, {e, 8 * e}, {8 * e, e}},
  };
  size_t bytes = (size_t)R * C * N * CH * 16;
  unsigned char *src = malloc(bytes), *got = malloc(bytes), *want = malloc(bytes);
  ck_assert(src && got && want);
  for (size_t k = 0; k < bytes; k++) src[k] = (unsigned char)rng();
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    memset(got, 0x5a, bytes);
    memset(want, 0x5a, bytes);
    strided_reference(want, src, &cases[c], es);
    ck_assert_int_eq(tstor__cuda_emulate_strided(got, src, &cases[c], es), 0);
    ck_assert_msg(memcmp(got, want, bytes) == 0, "case %zu, %zu-byte elements", c, es);
  }
  free(src);
  free(got);
  free(want);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cuda kernels (emulated)");
  TCase *t = tcase_create("convert");
  tcase_set_timeout(t, 120);
  tcase_add_loop_test(t, every_pair_converts_as_on_the_host, 0, TSTOR_DTYPE_END);
  tcase_add_test(t, quantized_and_misaligned_are_declined);
  suite_add_tcase(s, t);
  t = tcase_create("fill");
  tcase_set_timeout(t, 120);
  tcase_add_loop_test(t, fills_write_the_pattern_at_every_alignment, 0, 5);
  suite_add_tcase(s, t);
  t = tcase_create("strided");
  tcase_add_loop_test(t, strided_copies_every_element, 0, 5);
  tcase_add_loop_test(t, transposes_move_every_element, 0, 5);
  suite_add_tcase(s, t);
  return tstor_test_run(s);
}
