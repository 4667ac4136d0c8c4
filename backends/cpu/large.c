/* The cpu backend's large blocks and their cache (large.h). */
#define _GNU_SOURCE
#include "large.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#include <tstor/tstor.h>

#include "cache.h"

/* A cached block's first bytes link it into its cache, newest first. */
typedef struct entry {
  struct entry *newer, *older;
  size_t size;
  struct timespec freed; /* CLOCK_MONOTONIC */
} entry;

struct cpu_large {
  pthread_mutex_t lock; /* everything below */
  pthread_cond_t wake;  /* a block was cached, or stop */
  size_t max_bytes;
  unsigned long max_age_ms;
  entry *newest, *oldest;
  _Atomic size_t cached; /* written under the lock; read without it */
  int reaper_started, stop;
  pthread_t reaper;
  struct cpu_large *next_cache; /* in caches, for fork */
};

/* Every open cache, so that fork can hold their locks and the child can forget
 * the reapers it does not have. */
static pthread_mutex_t caches_lock = PTHREAD_MUTEX_INITIALIZER;
static cpu_large *caches;
static int atfork_done;

/* ------------------------------------------------------------ the system */

size_t cpu_large_block(size_t nbytes) {
  size_t unit = nbytes >= CPU_LARGE_HUGE ? CPU_LARGE_HUGE : CPU_CACHE_ALIGNMENT;
  size_t block = (nbytes + unit - 1) & ~(unit - 1);
  return block < nbytes ? 0 : block;
}

void *cpu_large_new(size_t block) {
  if (block < CPU_LARGE_HUGE) return aligned_alloc(CPU_CACHE_ALIGNMENT, block);
  /* Map one huge page more than asked and trim, so the block starts on a
   * huge-page boundary and every page of it can be a huge one. */
  size_t span = block + CPU_LARGE_HUGE;
  if (span < block) return NULL;
  char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  char *start = (char *)(((uintptr_t)p + CPU_LARGE_HUGE - 1) & ~(uintptr_t)(CPU_LARGE_HUGE - 1));
  if (start > p) munmap(p, (size_t)(start - p));
  size_t tail = (size_t)(p + span - (start + block));
  if (tail) munmap(start + block, tail);
#ifdef MADV_HUGEPAGE
  madvise(start, block, MADV_HUGEPAGE); /* advice: a kernel without THP ignores it */
#endif
  return start;
}

static void release(void *p, size_t block) {
  if (block < CPU_LARGE_HUGE)
    free(p);
  else
    munmap(p, block);
}

/* ------------------------------------------------------------- the list */

static void unlink_entry(cpu_large *l, entry *e) {
  if (e->newer) e->newer->older = e->older;
  else l->newest = e->older;
  if (e->older) e->older->newer = e->newer;
  else l->oldest = e->newer;
  atomic_store_explicit(&l->cached, l->cached - e->size, memory_order_relaxed);
}

/* Unlinks the oldest blocks while the cache holds more than keep_at_most
 * bytes or they were freed at or before `before`, and returns them linked
 * through `older`, to be released outside the lock. */
static entry *cut_oldest(cpu_large *l, size_t keep_at_most, const struct timespec *before) {
  entry *out = NULL;
  while (l->oldest) {
    entry *e = l->oldest;
    int too_many = l->cached > keep_at_most;
    int too_old = before && (e->freed.tv_sec < before->tv_sec ||
                             (e->freed.tv_sec == before->tv_sec &&
                              e->freed.tv_nsec <= before->tv_nsec));
    if (!too_many && !too_old) break;
    unlink_entry(l, e);
    e->older = out;
    out = e;
  }
  return out;
}

static void release_all(entry *e) {
  while (e) {
    entry *next = e->older;
    release(e, e->size);
    e = next;
  }
}

static struct timespec plus_ms(struct timespec t, unsigned long ms) {
  t.tv_sec += (time_t)(ms / 1000);
  t.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

static struct timespec minus_ms(struct timespec t, unsigned long ms) {
  t.tv_sec -= (time_t)(ms / 1000);
  t.tv_nsec -= (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec < 0) {
    t.tv_sec--;
    t.tv_nsec += 1000000000L;
  }
  return t;
}

/* ------------------------------------------------------------ the reaper */

/* Sleeps until the oldest block has been idle max_age_ms, gives back every
 * block that has, and again, until the cache is closed. */
static void *reaper(void *arg) {
  cpu_large *l = arg;
  pthread_mutex_lock(&l->lock);
  while (!l->stop) {
    if (!l->oldest) {
      pthread_cond_wait(&l->wake, &l->lock);
      continue;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    struct timespec cutoff = minus_ms(now, l->max_age_ms);
    entry *old = cut_oldest(l, (size_t)-1, &cutoff);
    if (old) {
      pthread_mutex_unlock(&l->lock);
      release_all(old);
      pthread_mutex_lock(&l->lock);
      continue;
    }
    struct timespec due = plus_ms(l->oldest->freed, l->max_age_ms);
    pthread_cond_timedwait(&l->wake, &l->lock, &due);
  }
  pthread_mutex_unlock(&l->lock);
  return NULL;
}

static void fork_prepare(void) {
  pthread_mutex_lock(&caches_lock);
  for (cpu_large *l = caches; l; l = l->next_cache) pthread_mutex_lock(&l->lock);
}
static void fork_parent(void) {
  for (cpu_large *l = caches; l; l = l->next_cache) pthread_mutex_unlock(&l->lock);
  pthread_mutex_unlock(&caches_lock);
}
/* The child has no reapers: it starts its own when it next caches a block.
 * The condition variables may count the parent's reapers as waiters, so they
 * are made afresh. */
static void fork_child(void) {
  for (cpu_large *l = caches; l; l = l->next_cache) {
    l->reaper_started = 0;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&l->wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_unlock(&l->lock);
  }
  pthread_mutex_unlock(&caches_lock);
}

/* ------------------------------------------------------------- the API */

int cpu_large_open(size_t max_bytes, unsigned long max_age_ms, cpu_large **out) {
  cpu_large *l = calloc(1, sizeof *l);
  if (!l) return TSTOR_ENOMEM;
  pthread_condattr_t attr;
  if (pthread_mutex_init(&l->lock, NULL) != 0) {
    free(l);
    return TSTOR_ENOMEM;
  }
  if (pthread_condattr_init(&attr) != 0) {
    pthread_mutex_destroy(&l->lock);
    free(l);
    return TSTOR_ENOMEM;
  }
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&l->wake, &attr);
  pthread_condattr_destroy(&attr);
  if (rc != 0) {
    pthread_mutex_destroy(&l->lock);
    free(l);
    return TSTOR_ENOMEM;
  }
  l->max_bytes = max_bytes;
  l->max_age_ms = max_age_ms;
  pthread_mutex_lock(&caches_lock);
  if (!atfork_done) atfork_done = pthread_atfork(fork_prepare, fork_parent, fork_child) == 0;
  l->next_cache = caches;
  caches = l;
  pthread_mutex_unlock(&caches_lock);
  *out = l;
  return 0;
}

void cpu_large_close(cpu_large *l) {
  if (!l) return;
  pthread_mutex_lock(&caches_lock);
  cpu_large **p = &caches;
  while (*p != l) p = &(*p)->next_cache;
  *p = l->next_cache;
  pthread_mutex_unlock(&caches_lock);
  pthread_mutex_lock(&l->lock);
  l->stop = 1;
  int started = l->reaper_started;
  pthread_cond_signal(&l->wake);
  pthread_mutex_unlock(&l->lock);
  if (started) pthread_join(l->reaper, NULL);
  cpu_large_empty(l);
  pthread_cond_destroy(&l->wake);
  pthread_mutex_destroy(&l->lock);
  free(l);
}

void *cpu_large_take(cpu_large *l, size_t block) {
  if (!l) return NULL;
  pthread_mutex_lock(&l->lock);
  entry *e = l->newest;
  while (e && e->size != block) e = e->older;
  if (e) unlink_entry(l, e);
  pthread_mutex_unlock(&l->lock);
  return e;
}

void cpu_large_give(cpu_large *l, void *p, size_t block) {
  if (!l || block > l->max_bytes || block < sizeof(entry)) {
    release(p, block);
    return;
  }
  entry *e = p;
  e->size = block;
  clock_gettime(CLOCK_MONOTONIC, &e->freed);
  pthread_mutex_lock(&l->lock);
  entry *old = cut_oldest(l, l->max_bytes - block, NULL);
  int was_empty = l->oldest == NULL;
  e->newer = NULL;
  e->older = l->newest;
  if (l->newest) l->newest->newer = e;
  else l->oldest = e;
  l->newest = e;
  atomic_store_explicit(&l->cached, l->cached + block, memory_order_relaxed);
  /* A reaper that cannot be started leaves aging to the bound and to
   * empty_cache: a smaller promise, not an error. */
  if (!l->reaper_started && !l->stop)
    l->reaper_started = pthread_create(&l->reaper, NULL, reaper, l) == 0;
  else if (was_empty)
    pthread_cond_signal(&l->wake); /* the reaper sleeps without a deadline */
  pthread_mutex_unlock(&l->lock);
  release_all(old);
}

void cpu_large_empty(cpu_large *l) {
  if (!l) return;
  pthread_mutex_lock(&l->lock);
  entry *all = cut_oldest(l, 0, NULL);
  pthread_mutex_unlock(&l->lock);
  release_all(all);
}

size_t cpu_large_cached(cpu_large *l) {
  return l ? atomic_load_explicit(&l->cached, memory_order_relaxed) : 0;
}
