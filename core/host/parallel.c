/* Large host loops split over threads, as PyTorch splits them over its intra-op
 * pool: the thread count, the pool and the split (copies and fills that use it
 * are in host_copy.c), and the byteswap loop.
 *
 * The pool's workers are started on first use and sleep between jobs. A
 * sleeping thread that is woken gets a CPU sooner than a new one on a busy
 * machine (the scheduler debits new threads), which is why threads are not
 * started per call. A job is cut into a few more pieces than there are
 * threads and the pieces are handed out one at a time, so a thread that
 * shares its core with another process does less of the work instead of
 * holding everyone up. One job runs at a time: a caller that finds the pool
 * busy does its job alone. After fork() the child starts a pool of its own;
 * at unload (or exit) the workers are stopped and joined. */
#include "internal.h"
#include "host/parallel.h"

#include <tstor/typed.h>

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_THREADS 64

static atomic_int chosen_threads; /* tstor_set_num_threads; 0 = the default */
static int default_threads = 1;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

#ifdef TSTOR__CLONES
static unsigned simd_features;
static pthread_once_t simd_once = PTHREAD_ONCE_INIT;

static void find_simd(void) {
  __builtin_cpu_init();
  const char *env = secure_getenv("TSTOR_SIMD");
  if (env != NULL && strcmp(env, "off") == 0) return;
  simd_features = (__builtin_cpu_supports("avx2") ? TSTOR__SIMD_AVX2 : 0u) |
                  (__builtin_cpu_supports("f16c") ? TSTOR__SIMD_F16C : 0u);
}

int tstor__simd(unsigned features) {
  pthread_once(&simd_once, find_simd);
  return (simd_features & features) == features;
}
#endif

static void find_default_threads(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  const char *env = secure_getenv("TSTOR_NUM_THREADS");
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

/* Pieces per thread: enough for a busy core to hand work to an idle one. */
#ifndef PIECES_PER_THREAD
#define PIECES_PER_THREAD 4
#endif

typedef struct pool {
  pthread_mutex_t lock; /* everything below */
  pthread_cond_t wake;  /* a new job, or stop */
  pthread_cond_t done;  /* the last piece of a job finished */
  pthread_t ids[MAX_THREADS];
  int nworkers;
  int stop;
  unsigned long generation; /* of the current job */
  tstor__range_fn fn;
  void *arg;
  size_t n, per, pieces, next, unfinished;
} pool;

static pool P = {.lock = PTHREAD_MUTEX_INITIALIZER,
                 .wake = PTHREAD_COND_INITIALIZER,
                 .done = PTHREAD_COND_INITIALIZER};
/* Held by the caller whose job the pool is running. */
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Runs pieces of job `gen` until none is left; called and returns with
 * P.lock held. */
static void run_pieces(unsigned long gen) {
  while (P.generation == gen && P.next < P.pieces) {
    size_t i = P.next++;
    tstor__range_fn fn = P.fn;
    void *arg = P.arg;
    size_t begin = i * P.per, end = P.n - begin < P.per ? P.n : begin + P.per;
    pthread_mutex_unlock(&P.lock);
    fn(arg, begin, end);
    pthread_mutex_lock(&P.lock);
    if (--P.unfinished == 0) pthread_cond_signal(&P.done);
  }
}

static void *worker(void *unused) {
  (void)unused;
  pthread_mutex_lock(&P.lock);
  unsigned long seen = P.generation;
  for (;;) {
    while (!P.stop && P.generation == seen) pthread_cond_wait(&P.wake, &P.lock);
    if (P.stop) break;
    seen = P.generation;
    run_pieces(seen);
  }
  pthread_mutex_unlock(&P.lock);
  return NULL;
}

static void before_fork(void) {
  pthread_mutex_lock(&job_lock);
  pthread_mutex_lock(&P.lock);
}
static void after_fork_parent(void) {
  pthread_mutex_unlock(&P.lock);
  pthread_mutex_unlock(&job_lock);
}
/* The child has none of the workers: it forgets them and starts its own. The
 * condition variables still count the parent's sleeping workers as waiters
 * (glibc would wait for them forever), so they are made afresh. */
static void after_fork_child(void) {
  P.nworkers = 0;
  P.stop = 0;
  pthread_cond_init(&P.wake, NULL);
  pthread_cond_init(&P.done, NULL);
  pthread_mutex_unlock(&P.lock);
  pthread_mutex_unlock(&job_lock);
}
static void register_atfork(void) {
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

__attribute__((destructor)) static void stop_pool(void) {
  pthread_mutex_lock(&P.lock);
  int n = P.nworkers;
  P.stop = 1;
  pthread_cond_broadcast(&P.wake);
  pthread_mutex_unlock(&P.lock);
  for (int i = 0; i < n; i++) pthread_join(P.ids[i], NULL);
  pthread_mutex_lock(&P.lock);
  P.nworkers = 0;
  P.stop = 0;
  pthread_mutex_unlock(&P.lock);
}

/* Starts workers up to `want` (with P.lock held); fewer when the system
 * refuses a thread, which only means less help. */
static void grow_pool(int want) {
  pthread_once(&atfork_once, register_atfork);
  while (P.nworkers < want && P.nworkers < MAX_THREADS) {
    if (pthread_create(&P.ids[P.nworkers], NULL, worker, NULL) != 0) break;
    P.nworkers++;
  }
}

void tstor__parallel_for(size_t n, size_t item_bytes, size_t align, tstor__range_fn fn,
                         void *arg) {
  if (n == 0) return;
  size_t threads = (size_t)tstor_get_num_threads();
  /* Each piece gets at least half the threshold, so a job just past it is not
   * cut into slivers that cost more to hand out than to run. */
  size_t bytes = n > SIZE_MAX / (item_bytes ? item_bytes : 1) ? SIZE_MAX : n * item_bytes;
  size_t pieces = threads * PIECES_PER_THREAD, by_size = bytes / (TSTOR__PARALLEL_MIN_BYTES / 2);
  if (by_size < pieces) pieces = by_size;
  if (threads <= 1 || pieces <= 1 || bytes < TSTOR__PARALLEL_MIN_BYTES ||
      pthread_mutex_trylock(&job_lock) != 0) {
    fn(arg, 0, n);
    return;
  }
  if (align == 0) align = 1;
  size_t per = (n + pieces - 1) / pieces;
  per = (per + align - 1) / align * align;
  pthread_mutex_lock(&P.lock);
  grow_pool((int)threads - 1);
  P.fn = fn;
  P.arg = arg;
  P.n = n;
  P.per = per;
  P.pieces = (n + per - 1) / per;
  P.next = 0;
  P.unfinished = P.pieces;
  unsigned long gen = ++P.generation;
  pthread_cond_broadcast(&P.wake);
  run_pieces(gen); /* the caller works too, and alone if no worker started */
  while (P.unfinished > 0) pthread_cond_wait(&P.done, &P.lock);
  pthread_mutex_unlock(&P.lock);
  pthread_mutex_unlock(&job_lock);
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
