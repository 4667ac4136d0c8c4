/* Large host copies and fills, split over the thread pool (parallel.c), and
 * the streaming stores that write destinations too large for the caches: each
 * large call writes with the stores stores.c chooses for its kind of work. */
#include "internal.h"
#include "host/parallel.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* ------------------------------------------------------------------ copy */

typedef struct copy_job {
  char *dst;
  const char *src;
  int stream;
} copy_job;

/* A large copy is streamed past the caches; glibc's memcpy would do that for
 * the whole buffer, but not for the pieces of a split one. */
static void copy_range(void *arg, size_t begin, size_t end) {
  const copy_job *j = arg;
  if (j->stream) {
    tstor__stream_copy(j->dst + begin, j->src + begin, end - begin);
    tstor__stream_fence();
  } else {
    memcpy(j->dst + begin, j->src + begin, end - begin);
  }
}

static void split_copy(char *d, const char *s, size_t nbytes) {
  if (nbytes < TSTOR__HOST_SPLIT_MIN_BYTES) {
    memcpy(d, s, nbytes);
    return;
  }
  copy_job job = {d, s, 0};
  tstor__parallel_for_stores(TSTOR_WORK_COPY, 0, nbytes, 2, 4096, copy_range, &job, &job.stream);
}

/* Overlapping ranges `gap` bytes apart are copied in steps of `gap` bytes,
 * each a split copy whose source and destination are disjoint: toward lower
 * addresses first to last, toward higher ones last to first, so no step
 * writes bytes a later step still has to read. A small gap is one memmove. */
void tstor__host_copy(void *dst, const void *src, size_t nbytes) {
  char *d = dst;
  const char *s = src;
  if (nbytes == 0 || d == s) return;
  if (!(d < s + nbytes && s < d + nbytes)) {
    split_copy(d, s, nbytes);
    return;
  }
  size_t gap = d < s ? (size_t)(s - d) : (size_t)(d - s);
  if (gap < TSTOR__HOST_SPLIT_MIN_BYTES) {
    memmove(dst, src, nbytes);
    return;
  }
  for (size_t done = 0; done < nbytes;) {
    size_t n = nbytes - done < gap ? nbytes - done : gap;
    size_t at = d < s ? done : nbytes - done - n;
    split_copy(d + at, s + at, n);
    done += n;
  }
}

/* -------------------------------------------------------- streaming stores */

#if defined(__SSE2__)
/* 64 bytes (a cache line) per step; dst is 16-byte aligned. */
static void stream_sse2(char *d, const char *s, size_t nbytes) {
  for (size_t i = 0; i + 64 <= nbytes; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
    _mm_stream_si128((__m128i *)(void *)(d + i), a);
    _mm_stream_si128((__m128i *)(void *)(d + i + 16), b);
    _mm_stream_si128((__m128i *)(void *)(d + i + 32), c);
    _mm_stream_si128((__m128i *)(void *)(d + i + 48), e);
  }
}
#endif

#ifdef TSTOR__CLONES
#include <immintrin.h>
/* The same with 32-byte stores; dst is 32-byte aligned. */
__attribute__((target("avx"))) static void stream_avx(char *d, const char *s, size_t nbytes) {
  for (size_t i = 0; i + 64 <= nbytes; i += 64) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(s + i + 32));
    _mm256_stream_si256((__m256i *)(void *)(d + i), a);
    _mm256_stream_si256((__m256i *)(void *)(d + i + 32), b);
  }
}
static int have_avx;
static pthread_once_t avx_once = PTHREAD_ONCE_INIT;
static void find_avx(void) {
  __builtin_cpu_init();
  have_avx = __builtin_cpu_supports("avx");
}
#endif

void tstor__stream_copy(void *dst, const void *src, size_t nbytes) {
#if defined(__SSE2__)
  char *d = dst;
  const char *s = src;
  /* Up to the first 64-byte boundary, and the last partial line, plainly. */
  size_t head = (64 - (uintptr_t)d % 64) % 64;
  if (head > nbytes) head = nbytes;
  memcpy(d, s, head);
  size_t body = (nbytes - head) / 64 * 64;
#ifdef TSTOR__CLONES
  pthread_once(&avx_once, find_avx);
  if (have_avx)
    stream_avx(d + head, s + head, body);
  else
#endif
    stream_sse2(d + head, s + head, body);
  memcpy(d + head + body, s + head + body, nbytes - head - body);
#else
  memcpy(dst, src, nbytes);
#endif
}

void tstor__stream_fence(void) {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

/* ------------------------------------------------------------------ fill */

typedef struct fill_job {
  char *dst;
  unsigned char pattern[16];
  size_t psize;
  int large; /* split over the pool: memset is slower there */
  int stream;
} fill_job;

TSTOR__AVX2_CLONES static void fill_plain(char *p, size_t nbytes, const unsigned char *pattern, size_t psize) {
  switch (psize) {
    case 1: memset(p, pattern[0], nbytes); return;
    case 2: {
      uint16_t v;
      memcpy(&v, pattern, 2);
      for (size_t i = 0; i < nbytes / 2; i++) memcpy(p + 2 * i, &v, 2);
      return;
    }
    case 4: {
      uint32_t v;
      memcpy(&v, pattern, 4);
      for (size_t i = 0; i < nbytes / 4; i++) memcpy(p + 4 * i, &v, 4);
      return;
    }
    case 8: {
      uint64_t v;
      memcpy(&v, pattern, 8);
      for (size_t i = 0; i < nbytes / 8; i++) memcpy(p + 8 * i, &v, 8);
      return;
    }
    default: {
      uint64_t v[2];
      memcpy(v, pattern, 16);
      for (size_t i = 0; i < nbytes / 16; i++) {
        memcpy(p + 16 * i, &v[0], 8);
        memcpy(p + 16 * i + 8, &v[1], 8);
      }
      return;
    }
  }
}

/* A large fill of equal bytes, written with ordinary stores. glibc's memset
 * writes ranges this large with `rep stosb`, which on two threads of a
 * 2-vCPU EPYC VM ran at 35-41 GB/s where a loop of 32-byte stores reached
 * 48-51 (and PyTorch's fill_, such a loop, as much). */
static void fill_bytes_by_words(char *p, size_t nbytes, unsigned char byte) {
  unsigned char word[8];
  memset(word, byte, sizeof word);
  size_t body = nbytes / 8 * 8;
  fill_plain(p, body, word, 8);
  memset(p + body, byte, nbytes - body);
}

/* Ranges start on multiples of 64 bytes from the start of the fill, so each
 * begins with a whole pattern. A fill written with streaming stores copies a
 * 4 KiB block of the pattern past the caches. */
static void fill_range(void *arg, size_t begin, size_t end) {
  const fill_job *j = arg;
  char *p = j->dst + begin;
  size_t nbytes = end - begin;
  if (!j->stream) {
    if (j->psize == 1 && j->large)
      fill_bytes_by_words(p, nbytes, j->pattern[0]);
    else
      fill_plain(p, nbytes, j->pattern, j->psize);
    return;
  }
  size_t head = (16 - (uintptr_t)p % 16) % 16;
  if (head > nbytes) head = nbytes;
  /* The block starts at the first 16-byte boundary, so it begins `head` bytes
   * into the pattern. */
  _Alignas(64) unsigned char block[4096];
  for (size_t i = 0; i < sizeof block; i++) block[i] = j->pattern[(head + i) % j->psize];
  for (size_t i = 0; i < head; i++) p[i] = (char)j->pattern[i % j->psize];
  for (size_t off = head; off < nbytes; off += sizeof block) {
    size_t k = nbytes - off < sizeof block ? nbytes - off : sizeof block;
    tstor__stream_copy(p + off, block, k);
  }
  tstor__stream_fence();
}

void tstor__host_fill(void *dst, size_t nbytes, const void *pattern, size_t psize) {
  fill_job job;
  job.dst = dst;
  job.psize = psize;
  memcpy(job.pattern, pattern, psize);
  int uniform = 1;
  for (size_t i = 1; i < psize; i++) uniform &= job.pattern[i] == job.pattern[0];
  if (uniform) job.psize = 1; /* 0.0, -1 and the like: one byte to write */
  job.stream = 0;
  job.large = nbytes >= TSTOR__HOST_SPLIT_MIN_BYTES;
  if (!job.large)
    fill_range(&job, 0, nbytes);
  else
    tstor__parallel_for_stores(TSTOR_WORK_FILL, (unsigned)job.psize, nbytes, 1, 64, fill_range,
                               &job, &job.stream);
}
