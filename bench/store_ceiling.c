/* How much a conversion written with streaming (non-temporal) stores can gain
 * over one written with ordinary stores on this machine, and how close
 * tstor's conversions come to the streaming bound.
 *
 * An ordinary store first reads the destination's cache line (read for
 * ownership); a streaming store does not. When both run at the memory's
 * bandwidth, a float64 -> float32 conversion moves 8 + 4 + 4 bytes an element
 * with ordinary stores against 8 + 4 with streaming ones, so no implementation
 * can be more than 1.33x faster than one that uses ordinary stores well
 * (PyTorch's, for instance), and the machine's own figure is what this
 * measures. For each conversion, on the same buffers of random values and
 * rounds alternated: tstor_typed_copy; the conversion as a bare loop of AVX2
 * streaming stores split over the threads; the same loop with ordinary stores.
 * Each side's best round is printed, and the ratios.
 *
 *   store_ceiling [--elements N] [--threads T] [--rounds R]
 *
 * `make -C bench bench-ceiling` runs it against this build's backends. */
#include <tstor/tstor.h>
#include <tstor/typed.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Eight elements of each conversion, stored streaming (nt) or not. */
AVX2 static void put(void *p, __m256i v, int nt) {
  if (nt)
    _mm256_stream_si256((__m256i *)p, v);
  else
    _mm256_storeu_si256((__m256i *)p, v);
}

AVX2 static void f64_f32(const void *src, void *dst, size_t i, int nt) {
  const double *s = src;
  __m128 a = _mm256_cvtpd_ps(_mm256_loadu_pd(s + i)), b = _mm256_cvtpd_ps(_mm256_loadu_pd(s + i + 4));
  put((float *)dst + i, _mm256_castps_si256(_mm256_insertf128_ps(_mm256_castps128_ps256(a), b, 1)), nt);
}

AVX2 static void f32_f64(const void *src, void *dst, size_t i, int nt) {
  __m256 x = _mm256_loadu_ps((const float *)src + i);
  double *d = (double *)dst + i;
  put(d, _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_castps256_ps128(x))), nt);
  put(d + 4, _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))), nt);
}

/* Sixteen elements: round to nearest even on the top half of each float. */
AVX2 static void f32_bf16(const void *src, void *dst, size_t i, int nt) {
  const float *s = src;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  __m256i r[2];
  for (int k = 0; k < 2; k++) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 8 * k));
    a = _mm256_add_epi32(a, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(a, 16), one)));
    r[k] = _mm256_srli_epi32(a, 16);
  }
  put((uint16_t *)dst + i, _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xd8), nt);
}

typedef struct conversion {
  const char *name;
  tstor_dtype src, dst;
  void (*step)(const void *src, void *dst, size_t i, int nt);
  size_t per_step;
} conversion;

static const conversion conversions[] = {
    {"float64 -> float32", TSTOR_FLOAT64, TSTOR_FLOAT32, f64_f32, 8},
    {"float32 -> bfloat16", TSTOR_FLOAT32, TSTOR_BFLOAT16, f32_bf16, 16},
    {"float32 -> float64", TSTOR_FLOAT32, TSTOR_FLOAT64, f32_f64, 8},
};

typedef struct slice {
  const conversion *c;
  const void *src;
  void *dst;
  size_t first, last;
  int nt;
} slice;

static void *run_slice(void *arg) {
  const slice *s = arg;
  for (size_t i = s->first; i < s->last; i += s->c->per_step) s->c->step(s->src, s->dst, i, s->nt);
  if (s->nt) _mm_sfence();
  return NULL;
}

/* The bare loop over `threads` threads, each a contiguous part. */
static void bare(const conversion *c, const void *src, void *dst, size_t n, int threads, int nt) {
  pthread_t t[64];
  slice s[64];
  size_t part = (n / (size_t)threads) / c->per_step * c->per_step;
  for (int k = 0; k < threads; k++) {
    s[k] = (slice){c, src, dst, part * (size_t)k, k == threads - 1 ? n : part * (size_t)(k + 1), nt};
    if (pthread_create(&t[k], NULL, run_slice, &s[k]) != 0) {
      fprintf(stderr, "store_ceiling: cannot start a thread\n");
      exit(1);
    }
  }
  for (int k = 0; k < threads; k++) pthread_join(t[k], NULL);
}

static void check(int rc, const char *what) {
  if (rc == 0) return;
  fprintf(stderr, "store_ceiling: %s: %s (%s)\n", what, tstor_strerror(rc), tstor_last_error());
  exit(1);
}

int main(int argc, char **argv) {
  size_t n = (size_t)64 << 20;
  int threads = 2, rounds = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--elements") == 0) n = strtoull(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: store_ceiling [--elements N] [--threads T] [--rounds R]\n");
      return 2;
    }
  }
  if (threads < 1 || threads > 64 || rounds < 1 || n < 1024) {
    fprintf(stderr, "store_ceiling: threads 1-64, rounds >= 1, elements >= 1024\n");
    return 2;
  }
  n = n / 16 * 16;
  if (!__builtin_cpu_supports("avx2")) {
    printf("store_ceiling: this CPU has no AVX2; nothing measured\n");
    return 0;
  }
  tstor_context *ctx;
  tstor_device cpu;
  check(tstor_context_open(NULL, &ctx), "context_open");
  check(tstor_device_parse(ctx, "cpu", &cpu), "device_parse");
  tstor_set_num_threads(threads);
  printf("%zu elements, %d thread(s) each, best of %d alternated rounds, random values\n\n", n, threads,
         rounds);
  printf("| conversion | tstor | streaming stores | ordinary stores | streaming / ordinary | "
         "tstor / streaming |\n|---|---|---|---|---|---|\n");
  for (size_t k = 0; k < sizeof conversions / sizeof conversions[0]; k++) {
    const conversion *c = &conversions[k];
    size_t ss = tstor_dtype_size(c->src), ds = tstor_dtype_size(c->dst);
    unsigned char *src = aligned_alloc(64, n * ss), *dst = aligned_alloc(64, n * ds);
    if (!src || !dst) {
      fprintf(stderr, "store_ceiling: out of memory\n");
      return 1;
    }
    /* Random values, never zeros: a VM may serve pages of zeros faster. */
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < n; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      double v = (double)(x >> 11) * 0x1p-53 * 2000.0 - 1000.0;
      if (ss == 8)
        ((double *)(void *)src)[i] = v;
      else
        ((float *)(void *)src)[i] = (float)v;
    }
    memset(dst, 1, n * ds);
    tstor_storage *s, *d;
    check(tstor_storage_wrap(ctx, cpu, src, n * ss, &s), "wrap");
    check(tstor_storage_wrap(ctx, cpu, dst, n * ds, &d), "wrap");
    double best[3] = {1e30, 1e30, 1e30};
    for (int r = 0; r < rounds; r++) {
      for (int side = 0; side < 3; side++) {
        double t0 = now();
        if (side == 0)
          check(tstor_typed_copy(d, c->dst, s, c->src), "typed_copy");
        else
          bare(c, src, dst, n, threads, side == 1);
        double t = now() - t0;
        if (t < best[side]) best[side] = t;
      }
    }
    double bytes = (double)n * (double)(ss + ds);
    printf("| %s | %.1f GB/s | %.1f GB/s | %.1f GB/s | %.2fx | %.2fx |\n", c->name,
           bytes / best[0] / 1e9, bytes / best[1] / 1e9, bytes / best[2] / 1e9, best[2] / best[1],
           best[1] / best[0]);
    tstor_storage_release(s);
    tstor_storage_release(d);
    free(src);
    free(dst);
  }
  printf("\nGB/s count bytes read plus written. streaming / ordinary: what the same loop gains from\n"
         "streaming stores here, the most a conversion at this bandwidth gains over one that uses\n"
         "ordinary stores well.\n");
  tstor_context_close(ctx);
  return 0;
}
#else
int main(void) {
  printf("store_ceiling: x86-64 with GCC or Clang only; nothing measured\n");
  return 0;
}
#endif
