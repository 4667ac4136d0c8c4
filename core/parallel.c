/* Large host loops split over threads, as PyTorch splits them over its intra-op
 * pool: the thread count, the split, and the byte loops that use it (copy,
 * fill, byteswap). Threads are started per call and joined before returning:
 * no pool outlives a call, so nothing is left running at fork or unload, and
 * for the sizes that are split (a megabyte and up) the start costs little. */
#include "typed_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 64

static atomic_int chosen_threads; /* tstor_set_num_threads; 0 = the default */
static int default_threads = 1;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

static void find_default_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  const char *env = getenv("TSTOR_NUM_THREADS");
  if (env != NULL && *env != '\0') {
    char *end;
    errno = 0;
    long v = strtol(env, &end, 10);
    if (errno == 0 && *end == '\0' && v >= 1) n = v;
  }
  if (n < 1) n = 1;
  if (n > MAX_THREADS) n = MAX_THREADS;
  default_threads = (int)n;
}

int tstor_set_num_threads(int n) {
  if (n < 0) n = 0;
  if (n > MAX_THREADS) n = MAX_THREADS;
  return atomic_exchange(&chosen_threads, n);
}

int tstor_get_num_threads(void) {
  int n = atomic_load(&chosen_threads);
  if (n > 0) return n;
  pthread_once(&default_once, find_default_threads);
  return default_threads;
}

typedef struct range_task {
  tstor__range_fn fn;
  void *arg;
  size_t begin, end;
} range_task;

static void *run_task(void *p) {
  range_task *t = p;
  t->fn(t->arg, t->begin, t->end);
  return NULL;
}

void tstor__parallel_for(size_t n, size_t item_bytes, size_t align, tstor__range_fn fn,
                         void *arg) {
  if (n == 0) return;
  size_t threads = (size_t)tstor_get_num_threads();
  /* Each thread gets at least half the threshold, so a job just past it is not
   * split into slivers whose start-up dominates. */
  size_t bytes = n > SIZE_MAX / (item_bytes ? item_bytes : 1) ? SIZE_MAX : n * item_bytes;
  size_t by_size = bytes / (TSTOR__PARALLEL_MIN_BYTES / 2);
  if (by_size < threads) threads = by_size;
  if (threads <= 1 || bytes < TSTOR__PARALLEL_MIN_BYTES) {
    fn(arg, 0, n);
    return;
  }
  if (align == 0) align = 1;
  size_t per = (n + threads - 1) / threads;
  per = (per + align - 1) / align * align;
  range_task tasks[MAX_THREADS];
  pthread_t ids[MAX_THREADS];
  int started[MAX_THREADS];
  size_t count = 0;
  for (size_t begin = 0; begin < n && count < threads; begin += per, count++) {
    tasks[count].fn = fn;
    tasks[count].arg = arg;
    tasks[count].begin = begin;
    tasks[count].end = n - begin < per ? n : begin + per;
  }
  /* Task 0 runs here; a task whose thread cannot start runs here too. */
  for (size_t i = 1; i < count; i++)
    started[i] = pthread_create(&ids[i], NULL, run_task, &tasks[i]) == 0;
  run_task(&tasks[0]);
  for (size_t i = 1; i < count; i++) {
    if (started[i])
      pthread_join(ids[i], NULL);
    else
      run_task(&tasks[i]);
  }
}

/* ------------------------------------------------------------------ copy */

typedef struct copy_job {
  char *dst;
  const char *src;
} copy_job;

static void copy_range(void *arg, size_t begin, size_t end) {
  const copy_job *j = arg;
  memcpy(j->dst + begin, j->src + begin, end - begin);
}

void tstor__host_copy(void *dst, const void *src, size_t nbytes) {
  const char *d = dst, *s = src;
  if (nbytes == 0 || dst == src) return;
  if ((d < s + nbytes && s < d + nbytes)) { /* overlapping: one memmove */
    memmove(dst, src, nbytes);
    return;
  }
  copy_job job = {dst, src};
  tstor__parallel_for(nbytes, 2, 4096, copy_range, &job);
}

/* ------------------------------------------------------------------ fill */

typedef struct fill_job {
  char *dst;
  unsigned char pattern[16];
  size_t psize;
} fill_job;

/* Loops on the pattern's own width, which the compiler turns into wide
 * stores. Ranges start on multiples of 64 bytes, so each begins with a whole
 * pattern. */
static void fill_range(void *arg, size_t begin, size_t end) {
  const fill_job *j = arg;
  char *p = j->dst + begin;
  size_t nbytes = end - begin;
  switch (j->psize) {
    case 1: memset(p, j->pattern[0], nbytes); return;
    case 2: {
      uint16_t v;
      memcpy(&v, j->pattern, 2);
      for (size_t i = 0; i < nbytes / 2; i++) memcpy(p + 2 * i, &v, 2);
      return;
    }
    case 4: {
      uint32_t v;
      memcpy(&v, j->pattern, 4);
      for (size_t i = 0; i < nbytes / 4; i++) memcpy(p + 4 * i, &v, 4);
      return;
    }
    case 8: {
      uint64_t v;
      memcpy(&v, j->pattern, 8);
      for (size_t i = 0; i < nbytes / 8; i++) memcpy(p + 8 * i, &v, 8);
      return;
    }
    default: {
      uint64_t v[2];
      memcpy(v, j->pattern, 16);
      for (size_t i = 0; i < nbytes / 16; i++) {
        memcpy(p + 16 * i, &v[0], 8);
        memcpy(p + 16 * i + 8, &v[1], 8);
      }
      return;
    }
  }
}

void tstor__host_fill(void *dst, size_t nbytes, const void *pattern, size_t psize) {
  fill_job job;
  job.dst = dst;
  job.psize = psize;
  memcpy(job.pattern, pattern, psize);
  tstor__parallel_for(nbytes, 1, 64, fill_range, &job);
}

/* -------------------------------------------------------------- byteswap */

static inline uint16_t swap16(uint16_t v) { return (uint16_t)((v >> 8) | (v << 8)); }
static inline uint32_t swap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}
static inline uint64_t swap64(uint64_t v) {
  return ((uint64_t)swap32((uint32_t)v) << 32) | swap32((uint32_t)(v >> 32));
}

void tstor__byteswap_units(void *p, size_t n, size_t unit) {
  char *b = p;
  switch (unit) {
    case 2:
      for (size_t i = 0; i < n; i++) {
        uint16_t v;
        memcpy(&v, b + 2 * i, 2);
        v = swap16(v);
        memcpy(b + 2 * i, &v, 2);
      }
      break;
    case 4:
      for (size_t i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, b + 4 * i, 4);
        v = swap32(v);
        memcpy(b + 4 * i, &v, 4);
      }
      break;
    case 8:
      for (size_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, b + 8 * i, 8);
        v = swap64(v);
        memcpy(b + 8 * i, &v, 8);
      }
      break;
    default: break; /* single bytes have no order */
  }
}
