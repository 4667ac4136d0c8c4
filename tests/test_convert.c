/* Converting copies against the vectors generated with torch 2.x
 * (conversions_torch2.bin; torch 1.13's conversions.bin stays as the
 * record): every pair of dtypes, special values and random ones, on one
 * thread and split over several, in place, and the conversions PyTorch
 * refuses, in its words. */
#include "typedtest.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static typedtest_vectors vec; /* torch 2.x's */

static void setup(void) { typedtest_load(&vec, "conversions_torch2.bin"); }
static void teardown(void) { typedtest_free(&vec); }

/* The block of src and the index of dst in it. */
static const typedtest_block *find_pair(tstor_dtype src, tstor_dtype dst, int *d) {
  for (int bi = 0; bi < vec.nblocks; bi++) {
    const typedtest_block *b = &vec.blocks[bi];
    for (int k = 0; b->src_dtype == src && k < b->ndst; k++)
      if (b->dst_dtype[k] == dst) {
        *d = k;
        return b;
      }
  }
  ck_abort_msg("no vectors for %s -> %s", tstor_dtype_name(src), tstor_dtype_name(dst));
  return NULL;
}

static int converts(tstor_dtype dt) {
  const tstor_dtype_info *i = tstor_dtype_info_of(dt);
  return i && i->kind != TSTOR_KIND_QUANTIZED && i->kind != TSTOR_KIND_OPAQUE;
}

/* Compares n converted elements with the expected ones; reports the first few
 * differences with their source element. */
static int compare(const typedtest_block *b, int d, const unsigned char *got, size_t n,
                   size_t first_index) {
  tstor_dtype dt = b->dst_dtype[d];
  size_t des = tstor_dtype_size(dt), ses = tstor_dtype_size(b->src_dtype);
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    size_t k = (first_index + i) % b->count;
    if (memcmp(got + i * des, b->dst[d] + k * des, des) != 0) {
      if (bad < 5)
        fprintf(stderr, "%s -> %s [%zu]: source %s gave %s, PyTorch %s\n",
                tstor_dtype_name(b->src_dtype), tstor_dtype_name(dt), k,
                typedtest_hex(b->src + k * ses, ses), typedtest_hex(got + i * des, des),
                typedtest_hex(b->dst[d] + k * des, des));
      bad++;
    }
  }
  return bad;
}

START_TEST(every_pair_matches_pytorch) {
  int bad_pairs = 0, pairs = 0;
  static int seen[TSTOR_DTYPE_END][TSTOR_DTYPE_END];
  for (int bi = 0; bi < vec.nblocks; bi++) {
    const typedtest_block *b = &vec.blocks[bi];
    for (int d = 0; d < b->ndst; d++) {
      seen[b->src_dtype][b->dst_dtype[d]]++;
      size_t des = tstor_dtype_size(b->dst_dtype[d]);
      unsigned char *out = malloc(des * b->count);
      ck_assert_ptr_nonnull(out);
      memset(out, 0xEE, des * b->count);
      ck_tstor_ok(tstor_dtype_convert(out, b->dst_dtype[d], b->src, b->src_dtype, b->count));
      int bad = compare(b, d, out, b->count, 0);
      if (bad) {
        fprintf(stderr, "%s -> %s: %d of %u elements differ\n", tstor_dtype_name(b->src_dtype),
                tstor_dtype_name(b->dst_dtype[d]), bad, b->count);
        bad_pairs++;
      }
      pairs++;
      free(out);
    }
  }
  /* Each pair of dtypes that convert once. */
  for (int s = 0; s < TSTOR_DTYPE_END; s++)
    for (int d = 0; d < TSTOR_DTYPE_END; d++)
      ck_assert_msg(seen[s][d] == (converts((tstor_dtype)s) && converts((tstor_dtype)d)),
                    "%s -> %s: %d blocks of vectors", tstor_dtype_name((tstor_dtype)s),
                    tstor_dtype_name((tstor_dtype)d), seen[s][d]);
  ck_assert_int_eq(pairs, 22 * 22);
  ck_assert_msg(bad_pairs == 0, "%d of %d dtype pairs differ from PyTorch", bad_pairs, pairs);
}
END_TEST

/* Large enough to be split over threads, and with odd lengths so the split
 * points land anywhere: the same results as one thread. */
START_TEST(threaded_conversion_matches) {
  static const tstor_dtype pairs[][2] = {
      {TSTOR_FLOAT32, TSTOR_FLOAT64},        {TSTOR_FLOAT64, TSTOR_FLOAT32},
      {TSTOR_FLOAT32, TSTOR_FLOAT16},        {TSTOR_FLOAT16, TSTOR_FLOAT32},
      {TSTOR_FLOAT32, TSTOR_BFLOAT16},       {TSTOR_BFLOAT16, TSTOR_FLOAT32},
      {TSTOR_FLOAT32, TSTOR_INT32},          {TSTOR_INT32, TSTOR_FLOAT32},
      {TSTOR_COMPLEX128, TSTOR_UINT8},       {TSTOR_INT64, TSTOR_FLOAT8_E4M3FN},
      {TSTOR_FLOAT32, TSTOR_UINT32},         {TSTOR_FLOAT16, TSTOR_UINT32},
      {TSTOR_UINT64, TSTOR_FLOAT32},         {TSTOR_FLOAT64, TSTOR_UINT64},
      {TSTOR_FLOAT32, TSTOR_FLOAT8_E8M0FNU}, {TSTOR_FLOAT8_E8M0FNU, TSTOR_INT32}};
  int old = tstor_set_num_threads(3);
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    int d;
    const typedtest_block *b = find_pair(pairs[p][0], pairs[p][1], &d);
    size_t n = (size_t)b->count * 1013 + 7; /* a few MB, not a multiple of anything */
    size_t ses = tstor_dtype_size(pairs[p][0]), des = tstor_dtype_size(pairs[p][1]);
    unsigned char *src = malloc(n * ses), *out = malloc(n * des);
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(out);
    for (size_t i = 0; i < n; i++) memcpy(src + i * ses, b->src + (i % b->count) * ses, ses);
    ck_tstor_ok(tstor_dtype_convert(out, pairs[p][1], src, pairs[p][0], n));
    ck_assert_int_eq(compare(b, d, out, n, 0), 0);
    free(src);
    free(out);
  }
  tstor_set_num_threads(old);
}
END_TEST

/* Results of 16 MiB and more are streamed past the caches from a small
 * buffer: the same bytes, wherever the destination starts. */
START_TEST(streamed_results_match) {
  static const tstor_dtype pairs[][2] = {
      {TSTOR_FLOAT32, TSTOR_FLOAT64},  {TSTOR_FLOAT64, TSTOR_FLOAT16}, {TSTOR_INT64, TSTOR_UINT8},
      {TSTOR_FLOAT32, TSTOR_BFLOAT16}, {TSTOR_FLOAT32, TSTOR_FLOAT16}, {TSTOR_INT32, TSTOR_FLOAT32},
      {TSTOR_FLOAT32, TSTOR_UINT64},   {TSTOR_UINT16, TSTOR_FLOAT64}};
  int old = tstor_set_num_threads(2);
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    int d;
    const typedtest_block *b = find_pair(pairs[p][0], pairs[p][1], &d);
    size_t ses = tstor_dtype_size(pairs[p][0]), des = tstor_dtype_size(pairs[p][1]);
    size_t n = ((size_t)17 << 20) / des + 5;
    unsigned char *src = malloc(n * ses), *out = malloc((n + 1) * des);
    ck_assert(src && out);
    for (size_t i = 0; i < n; i++) memcpy(src + i * ses, b->src + (i % b->count) * ses, ses);
    /* One element in, so the destination is not on a cache line. */
    ck_tstor_ok(tstor_dtype_convert(out + des, pairs[p][1], src, pairs[p][0], n));
    ck_assert_int_eq(compare(b, d, out + des, n, 0), 0);
    free(src);
    free(out);
  }
  tstor_set_num_threads(old);
}
END_TEST

/* A large float32 -> float64 conversion, checked; 0 when right. */
static int big_conversion(void) {
  size_t n = (size_t)3 << 20;
  float *f = malloc(n * sizeof *f);
  double *d = malloc(n * sizeof *d);
  int bad = f == NULL || d == NULL;
  for (size_t i = 0; !bad && i < n; i++) f[i] = (float)i * 0.5f;
  if (!bad) bad = tstor_dtype_convert(d, TSTOR_FLOAT64, f, TSTOR_FLOAT32, n) != 0;
  for (size_t i = 0; !bad && i < n; i++) bad = d[i] != (double)i * 0.5;
  free(f);
  free(d);
  return bad;
}

static void *big_conversion_thread(void *p) {
  *(int *)p = big_conversion();
  return NULL;
}

/* Callers on several threads at once share the worker threads (or run
 * alone): every result right. */
START_TEST(concurrent_callers) {
  int old = tstor_set_num_threads(2);
  pthread_t t[4];
  int bad[4] = {1, 1, 1, 1};
  for (int i = 0; i < 4; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, big_conversion_thread, &bad[i]), 0);
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    ck_assert_int_eq(bad[i], 0);
  }
  tstor_set_num_threads(old);
}
END_TEST

/* A child process has none of its parent's worker threads; it gets its own. */
START_TEST(after_fork) {
#if defined(__SANITIZE_THREAD__)
  return; /* ThreadSanitizer cannot run threads in a child of a threaded process */
#endif
  int old = tstor_set_num_threads(2);
  ck_assert_int_eq(big_conversion(), 0); /* the parent's workers are running */
  int fds[2];
  ck_assert_int_eq(pipe(fds), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    /* The verdict goes through a pipe and the child ends with SIGKILL: a
     * leak checker would otherwise report the stacks of the parent's threads,
     * which no forked child can free. */
    char ok = big_conversion() == 0 && big_conversion() == 0 ? 'y' : 'n';
    if (write(fds[1], &ok, 1) != 1) _exit(1);
    kill(getpid(), SIGKILL);
  }
  close(fds[1]);
  char verdict = 0;
  ck_assert_int_eq(read(fds[0], &verdict, 1), 1);
  close(fds[0]);
  ck_assert_int_eq(verdict, 'y');
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_int_eq(big_conversion(), 0);
  tstor_set_num_threads(old);
}
END_TEST

START_TEST(in_place_same_size) {
  /* float32 <-> int32 over the same bytes, as a typed view of one storage may. */
  float f[4] = {1.5f, -2.5f, 1e10f, NAN};
  ck_tstor_ok(tstor_dtype_convert(f, TSTOR_INT32, f, TSTOR_FLOAT32, 4));
  int32_t i[4];
  memcpy(i, f, sizeof i);
  ck_assert_int_eq(i[0], 1);
  ck_assert_int_eq(i[1], -2);
  ck_assert_int_eq(i[2], INT32_MIN);
  ck_assert_int_eq(i[3], INT32_MIN);
}
END_TEST

/* Buffers at odd addresses (a view at an odd byte offset) convert the same. */
START_TEST(misaligned_buffers) {
  int old = tstor_set_num_threads(2);
  size_t n = ((size_t)1 << 19) + 11;
  unsigned char *src = malloc(n * 8 + 1), *a = malloc(n * 4 + 3), *b = malloc(n * 4);
  ck_assert(src && a && b);
  for (size_t i = 0; i < n; i++) {
    double v = ((double)i - (double)n / 2) * 1.37;
    memcpy(src + 1 + i * 8, &v, 8);
  }
  ck_tstor_ok(tstor_dtype_convert(a + 3, TSTOR_FLOAT32, src + 1, TSTOR_FLOAT64, n));
  double *aligned = malloc(n * 8);
  memcpy(aligned, src + 1, n * 8);
  ck_tstor_ok(tstor_dtype_convert(b, TSTOR_FLOAT32, aligned, TSTOR_FLOAT64, n));
  ck_assert_int_eq(memcmp(a + 3, b, n * 4), 0);
  /* In place at an odd address, same size. */
  ck_tstor_ok(tstor_dtype_convert(a + 3, TSTOR_INT32, a + 3, TSTOR_FLOAT32, n));
  ck_tstor_ok(tstor_dtype_convert(b, TSTOR_INT32, b, TSTOR_FLOAT32, n));
  ck_assert_int_eq(memcmp(a + 3, b, n * 4), 0);
  free(aligned);
  free(src);
  free(a);
  free(b);
  tstor_set_num_threads(old);
}
END_TEST

/* The narrowing loops ask for their source 8 KiB ahead of what they read: a
 * source that ends where an inaccessible page begins converts without a
 * fault, right to its last element, for every length near a loop's step. */
START_TEST(a_source_ending_at_an_unmapped_page) {
  long page = sysconf(_SC_PAGESIZE);
  size_t span = 16 * (size_t)page;
  unsigned char *map = mmap(NULL, span + (size_t)page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert(map != MAP_FAILED);
  ck_assert_int_eq(mprotect(map + span, (size_t)page, PROT_NONE), 0);
  static const tstor_dtype pairs[][2] = {{TSTOR_FLOAT32, TSTOR_BFLOAT16},
                                         {TSTOR_FLOAT32, TSTOR_FLOAT16},
                                         {TSTOR_FLOAT64, TSTOR_FLOAT32}};
  for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
    size_t ses = tstor_dtype_size(pairs[p][0]), des = tstor_dtype_size(pairs[p][1]);
    for (size_t n = 1; n <= 100; n++) {
      unsigned char *src = map + span - n * ses;
      for (size_t i = 0; i < n; i++) {
        double v = (double)i * 0.75 - 20;
        if (ses == 4) {
          float f = (float)v;
          memcpy(src + i * ses, &f, 4);
        } else {
          memcpy(src + i * ses, &v, 8);
        }
      }
      unsigned char got[800], want[800];
      ck_tstor_ok(tstor_dtype_convert(got, pairs[p][1], src, pairs[p][0], n));
      for (size_t i = 0; i < n; i++) /* one element at a time: no vector loop */
        ck_tstor_ok(tstor_dtype_convert(want + i * des, pairs[p][1], src + i * ses, pairs[p][0], 1));
      ck_assert_msg(memcmp(got, want, n * des) == 0, "%s -> %s, %zu elements",
                    tstor_dtype_name(pairs[p][0]), tstor_dtype_name(pairs[p][1]), n);
    }
  }
  munmap(map, span + (size_t)page);
}
END_TEST

START_TEST(out_of_range_floats_are_defined) {
  /* What typed.h promises, spelled out. */
  const double v[] = {300.0, -1.0, 1e10, -1e10, INFINITY, -INFINITY, NAN, 1e30, -0.9};
  const int n = sizeof v / sizeof v[0];
  uint8_t u8[9];
  int8_t i8[9];
  int16_t i16[9];
  int32_t i32[9];
  int64_t i64[9];
  ck_tstor_ok(tstor_dtype_convert(u8, TSTOR_UINT8, v, TSTOR_FLOAT64, n));
  ck_tstor_ok(tstor_dtype_convert(i8, TSTOR_INT8, v, TSTOR_FLOAT64, n));
  ck_tstor_ok(tstor_dtype_convert(i16, TSTOR_INT16, v, TSTOR_FLOAT64, n));
  ck_tstor_ok(tstor_dtype_convert(i32, TSTOR_INT32, v, TSTOR_FLOAT64, n));
  ck_tstor_ok(tstor_dtype_convert(i64, TSTOR_INT64, v, TSTOR_FLOAT64, n));
  const uint8_t eu8[] = {44, 255, 0, 0, 0, 0, 0, 0, 0};
  const int8_t ei8[] = {44, -1, 0, 0, 0, 0, 0, 0, 0};
  const int16_t ei16[] = {300, -1, 0, 0, 0, 0, 0, 0, 0};
  const int32_t ei32[] = {300, -1, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN,
                          INT32_MIN, 0};
  const int64_t ei64[] = {300, -1, 10000000000LL, -10000000000LL, INT64_MIN, INT64_MIN,
                          INT64_MIN, INT64_MIN, 0};
  for (int k = 0; k < n; k++) {
    ck_assert_msg(u8[k] == eu8[k], "uint8(%g) = %d", v[k], u8[k]);
    ck_assert_msg(i8[k] == ei8[k], "int8(%g) = %d", v[k], i8[k]);
    ck_assert_msg(i16[k] == ei16[k], "int16(%g) = %d", v[k], i16[k]);
    ck_assert_msg(i32[k] == ei32[k], "int32(%g) = %d", v[k], i32[k]);
    ck_assert_msg(i64[k] == ei64[k], "int64(%g) = %lld", v[k], (long long)i64[k]);
  }
}
END_TEST

START_TEST(quantized_conversions_are_refused) {
  const tstor_dtype q[] = {TSTOR_QINT8, TSTOR_QUINT8, TSTOR_QINT32, TSTOR_QUINT4X2,
                           TSTOR_QUINT2X4};
  unsigned char in[16] = {1, 2, 3, 4}, out[16];
  memset(out, 0x5A, sizeof out);
  for (size_t k = 0; k < sizeof q / sizeof q[0]; k++) {
    ck_tstor_err(tstor_dtype_convert(out, TSTOR_FLOAT32, in, q[k], 1), TSTOR_EDTYPE);
    ck_last_error_has(tstor_dtype_name(q[k]));
    ck_tstor_err(tstor_dtype_convert(out, q[k], in, TSTOR_INT8, 1), TSTOR_EDTYPE);
    ck_tstor_err(tstor_dtype_can_convert(q[k], TSTOR_FLOAT32), TSTOR_EDTYPE);
    /* The same quantized dtype is a copy, which PyTorch does. */
    ck_tstor_ok(tstor_dtype_can_convert(q[k], q[k]));
  }
  ck_tstor_err(tstor_dtype_convert(out, TSTOR_QINT8, in, TSTOR_QUINT8, 1), TSTOR_EDTYPE);
  for (size_t k = 0; k < sizeof out; k++) ck_assert_int_eq(out[k], 0x5A); /* untouched */
  ck_tstor_ok(tstor_dtype_convert(out, TSTOR_QINT32, in, TSTOR_QINT32, 1));
  ck_assert_int_eq(memcmp(out, in, 4), 0);
}
END_TEST

/* Every conversion torch 2.x refuses (tests/vectors/refusals_torch2.txt:
 * float4_e2m1fn_x2 and the bits types with any other dtype), refused in its
 * words; the same dtype is a copy. */
START_TEST(torch2_refusals_in_its_words) {
  const char *path = TSTOR_TEST_SRCDIR "/vectors/refusals_torch2.txt";
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  char line[512];
  int n = 0;
  unsigned char in[16] = {0x12, 0xf7}, out[16];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "convert ", 8) != 0) continue;
    char src[64], dst[64];
    const char *arrow = strstr(line, " => "), *colon = arrow ? strstr(arrow, ": ") : NULL;
    ck_assert_msg(colon && sscanf(line, "convert %63s %63s", src, dst) == 2, "bad line %s", line);
    tstor_dtype s, d;
    ck_tstor_ok(tstor_dtype_parse(src, &s));
    ck_tstor_ok(tstor_dtype_parse(dst, &d));
    char want[256];
    snprintf(want, sizeof want, "%.*s", (int)strcspn(colon + 2, "\n"), colon + 2);
    memset(out, 0x5a, sizeof out);
    ck_tstor_err(tstor_dtype_convert(out, d, in, s, 1), TSTOR_EDTYPE);
    ck_assert_str_eq(tstor_last_error(), want);
    ck_assert_int_eq(out[0], 0x5a);
    ck_tstor_err(tstor_dtype_can_convert(d, s), TSTOR_EDTYPE);
    ck_assert_str_eq(tstor_last_error(), want);
    n++;
  }
  fclose(f);
  ck_assert_int_eq(n, 6 * 2 * 22 + 6 * 5); /* 6 opaque dtypes, 22 that convert */
  ck_tstor_ok(tstor_dtype_convert(out, TSTOR_FLOAT4_E2M1FN_X2, in, TSTOR_FLOAT4_E2M1FN_X2, 2));
  ck_assert_int_eq(memcmp(out, in, 2), 0);
}
END_TEST

START_TEST(bad_arguments) {
  float f = 1;
  ck_tstor_err(tstor_dtype_convert(&f, (tstor_dtype)35, &f, TSTOR_FLOAT32, 1), TSTOR_EINVAL);
  ck_last_error_has("35 is not a dtype");
  ck_tstor_err(tstor_dtype_convert(&f, TSTOR_FLOAT32, &f, (tstor_dtype)-1, 1), TSTOR_EINVAL);
  ck_tstor_err(tstor_dtype_convert(&f, TSTOR_FLOAT32, &f, (tstor_dtype)TSTOR_DTYPE_END, 1),
               TSTOR_EINVAL);
  ck_tstor_err(tstor_dtype_convert(NULL, TSTOR_FLOAT64, &f, TSTOR_FLOAT32, 1), TSTOR_EINVAL);
  ck_last_error_has("NULL");
  ck_tstor_ok(tstor_dtype_convert(NULL, TSTOR_FLOAT64, NULL, TSTOR_FLOAT32, 0));
}
END_TEST

START_TEST(thread_count) {
  int old = tstor_set_num_threads(5);
  ck_assert_int_eq(tstor_get_num_threads(), 5);
  ck_assert_int_eq(tstor_set_num_threads(0), 5);
  ck_assert_int_ge(tstor_get_num_threads(), 1);
  tstor_set_num_threads(-3); /* treated as the default */
  ck_assert_int_ge(tstor_get_num_threads(), 1);
  tstor_set_num_threads(old);
}
END_TEST

int main(void) {
  Suite *s = suite_create("convert");
  TCase *tc = tcase_create("vectors");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, every_pair_matches_pytorch);
  tcase_add_test(tc, threaded_conversion_matches);
  tcase_add_test(tc, streamed_results_match);
  suite_add_tcase(s, tc);
  TCase *rules = tcase_create("rules");
  tcase_add_test(rules, in_place_same_size);
  tcase_add_test(rules, misaligned_buffers);
  tcase_add_test(rules, a_source_ending_at_an_unmapped_page);
  tcase_add_test(rules, out_of_range_floats_are_defined);
  tcase_add_test(rules, quantized_conversions_are_refused);
  tcase_add_test(rules, torch2_refusals_in_its_words);
  tcase_add_test(rules, bad_arguments);
  tcase_add_test(rules, thread_count);
  tcase_add_test(rules, concurrent_callers);
  tcase_add_test(rules, after_fork);
  suite_add_tcase(s, rules);
  return tstor_test_run(s);
}
