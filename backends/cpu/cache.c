/* The cpu backend's per-thread block cache and allocation counters (cache.h).
 *
 * Counters. Each thread keeps, per context, counters that only it writes, with
 * relaxed atomic loads and stores (plain moves, no read-modify-write); a read
 * of the statistics sums them under the process lock, and a thread that exits
 * folds its own into the context's totals first. So allocated, active,
 * reserved, alloc_count, free_count, cache_hits, retries and oom_count are
 * exact for every call that returned before the read (one racing with the read
 * may be seen in part).
 *
 * Peaks. A thread's byte counters are deltas that it adds to the context's
 * shared totals once they reach CPU_FLUSH_BYTES either way, or when it exits.
 * At each allocation the thread compares shared total + its own delta with
 * the peak. So the peaks are exact when one thread does all of a context's
 * allocating and releasing (others may have done so and exited); otherwise
 * the value compared lacks the pending delta of each other live thread that
 * used the context: less than CPU_FLUSH_BYTES, of either sign.
 * peak_reserved is compared at allocations that take a new block from the C
 * library. A read never reports a peak below the current value.
 *
 * Unloading. A thread's record is freed by the thread key's destructor,
 * thread_exit, when the thread exits. glibc may have started that destructor
 * (it read the function pointer and called it; it may be waiting for
 * shared.lock) at any moment, and pthread_key_delete does not wait for it:
 * unmapping this module then would pull its code and data from under the
 * exiting thread. So before the first record exists the module pins itself
 * (dlopen RTLD_NOLOAD | RTLD_NODELETE, as glibc pins a library with C++
 * thread_local destructors): from then on dlclose runs fini but leaves the
 * module mapped, and the key lives as long as the process. A module that
 * never made a record deletes its key at the last close and unloads as usual.
 */
#define _GNU_SOURCE /* dladdr, RTLD_NODELETE */
#include "cache.h"
#include "large.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define CPU_LIKELY(x) __builtin_expect(!!(x), 1)
#define CPU_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define CPU_LIKELY(x) (x)
#define CPU_UNLIKELY(x) (x)
#endif

/* Size classes: 64, 128, 192, 256, then four per power of two up to 1 MiB. */
#define CPU_NCLASSES 52
#define CPU_FLUSH_BYTES ((int64_t)4 << 20)

typedef struct counts {
  _Atomic int64_t allocated; /* requested bytes, not yet in the context's totals */
  _Atomic int64_t active;    /* block bytes (class or 64-byte rounding), likewise */
  _Atomic uint64_t allocs, frees, hits, retries, ooms;
} counts;

typedef struct bin {
  void *head; /* free blocks, linked through their first word */
  unsigned count;
} bin;

typedef struct thread_cache {
  struct thread_cache *prev, *next; /* in shared.threads, under shared.lock */
  unsigned epoch;                   /* shared.empty_epoch when last emptied */
  _Atomic uint64_t cached;          /* bytes in bins: the owner writes, others read under lock */
  int64_t cached_pending;           /* change of `cached` not yet in shared.cached_total */
  counts *counts;                   /* one per context slot; the owner resizes it under lock */
  int ncounts;
  bin bins[CPU_NCLASSES];
} thread_cache;

struct cpu_cache {
  cpu_cache_config cfg;
  int slot; /* index of this context's counters in every thread_cache */
  cpu_large *large; /* freed large blocks, or NULL when they are not kept */
  _Atomic int64_t allocated, active; /* flushed totals */
  _Atomic uint64_t peak_allocated, peak_active, peak_reserved;
};

/* Process-wide state: one per loaded module, shared by all its contexts. */
static struct {
  pthread_mutex_t lock;
  int users;              /* open handles */
  pthread_key_t key;      /* valid while key_made; its value is the thread's cache */
  int key_made;           /* created at the first open; deleted at the last close unless pinned */
  atomic_int pinned;      /* the module is pinned (no unmapping): records may exist */
  thread_cache *threads;  /* every living thread's cache (a record leaves with its thread) */
  cpu_cache **slot_owner; /* per slot: the handle using it, or NULL */
  counts *retired;        /* per slot: the counts of threads that exited */
  int nslots;
  _Atomic unsigned empty_epoch;  /* bumped by cpu_cache_empty */
  _Atomic int64_t cached_total;  /* all threads' cached bytes, less their pending changes */
  int atfork;                    /* fork handlers registered (they go when the module does) */
} shared = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ------------------------------------------------------------------ helpers */

static inline int64_t load_i(_Atomic int64_t *v) {
  return atomic_load_explicit(v, memory_order_relaxed);
}
static inline uint64_t load_u(_Atomic uint64_t *v) {
  return atomic_load_explicit(v, memory_order_relaxed);
}
/* Owner-only updates: nobody else writes these, so no read-modify-write. */
static inline void store_i(_Atomic int64_t *v, int64_t x) {
  atomic_store_explicit(v, x, memory_order_relaxed);
}
static inline void bump_u(_Atomic uint64_t *v, uint64_t n) {
  atomic_store_explicit(v, load_u(v) + n, memory_order_relaxed);
}

static void raise_peak(_Atomic uint64_t *peak, int64_t value) {
  if (value <= 0) return;
  uint64_t seen = load_u(peak);
  while ((uint64_t)value > seen &&
         !atomic_compare_exchange_weak_explicit(peak, &seen, (uint64_t)value,
                                                memory_order_relaxed, memory_order_relaxed)) {
  }
}

static void counts_zero(counts *k) {
  store_i(&k->allocated, 0);
  store_i(&k->active, 0);
  atomic_store_explicit(&k->allocs, 0, memory_order_relaxed);
  atomic_store_explicit(&k->frees, 0, memory_order_relaxed);
  atomic_store_explicit(&k->hits, 0, memory_order_relaxed);
  atomic_store_explicit(&k->retries, 0, memory_order_relaxed);
  atomic_store_explicit(&k->ooms, 0, memory_order_relaxed);
}

/* dst += src; dst is written by nobody else (under shared.lock or a dead thread's). */
static void counts_add(counts *dst, counts *src) {
  store_i(&dst->allocated, load_i(&dst->allocated) + load_i(&src->allocated));
  store_i(&dst->active, load_i(&dst->active) + load_i(&src->active));
  bump_u(&dst->allocs, load_u(&src->allocs));
  bump_u(&dst->frees, load_u(&src->frees));
  bump_u(&dst->hits, load_u(&src->hits));
  bump_u(&dst->retries, load_u(&src->retries));
  bump_u(&dst->ooms, load_u(&src->ooms));
}

static inline size_t round_block(size_t nbytes) {
  return (nbytes + CPU_CACHE_ALIGNMENT - 1) & ~(size_t)(CPU_CACHE_ALIGNMENT - 1);
}

/* The size class of a request of 1 to CPU_CACHE_MAX_BLOCK bytes; *block gets
 * the class's block size. Four classes per power of two keep the rounding
 * under 25%. */
static inline int size_class(size_t nbytes, size_t *block) {
  size_t r = round_block(nbytes);
  if (r <= 256) {
    *block = r;
    return (int)(r >> 6) - 1;
  }
  int p = 63 - __builtin_clzll((unsigned long long)(r - 1)); /* 2^p < r <= 2^(p+1) */
  size_t step = (size_t)1 << (p - 2);
  size_t size = (r + step - 1) & ~(step - 1);
  *block = size;
  return 4 + (p - 8) * 4 + (int)(size >> (p - 2)) - 5;
}

/* ----------------------------------------------------------- thread caches */

/* Moves the owner's pending change of cached bytes into the shared total. */
static void cached_flush(thread_cache *t) {
  if (t->cached_pending)
    atomic_fetch_add_explicit(&shared.cached_total, t->cached_pending, memory_order_relaxed);
  t->cached_pending = 0;
}

static inline void cached_change(thread_cache *t, int64_t delta) {
  atomic_store_explicit(&t->cached, (uint64_t)((int64_t)load_u(&t->cached) + delta),
                        memory_order_relaxed);
  t->cached_pending += delta;
  if (CPU_UNLIKELY(t->cached_pending >= CPU_FLUSH_BYTES ||
                   t->cached_pending <= -CPU_FLUSH_BYTES))
    cached_flush(t);
}

/* Frees every block in the thread's bins. The owner, or anyone while the owner
 * makes no calls (exit, last close). */
static void thread_drain(thread_cache *t) {
  for (int i = 0; i < CPU_NCLASSES; i++) {
    void *p = t->bins[i].head;
    while (p) {
      void *next = *(void **)p;
      free(p);
      p = next;
    }
    t->bins[i].head = NULL;
    t->bins[i].count = 0;
  }
  cached_change(t, -(int64_t)load_u(&t->cached));
  cached_flush(t);
}

/* Frees the blocks if cpu_cache_empty was called since the thread last looked. */
static inline void thread_catch_up(thread_cache *t) {
  unsigned epoch = atomic_load_explicit(&shared.empty_epoch, memory_order_relaxed);
  if (CPU_UNLIKELY(t->epoch != epoch)) {
    thread_drain(t);
    t->epoch = epoch;
  }
}

static void thread_unlink(thread_cache *t) {
  if (t->prev) t->prev->next = t->next;
  else shared.threads = t->next;
  if (t->next) t->next->prev = t->prev;
}

/* Frees a thread's cache: its blocks, counters and record. Under shared.lock. */
static void thread_destroy(thread_cache *t) {
  thread_drain(t);
  thread_unlink(t);
  free(t->counts);
  free(t);
}

/* The thread key's destructor: the thread is exiting, so its blocks go back,
 * its pending bytes join the contexts' shared totals and its counts the
 * retired ones. The record is listed until now: only this frees it, and the
 * module stays mapped (pinned) for as long as this can run. */
static void thread_exit(void *arg) {
  thread_cache *t = arg;
  pthread_mutex_lock(&shared.lock);
  int n = t->ncounts < shared.nslots ? t->ncounts : shared.nslots;
  for (int i = 0; i < n; i++) {
    cpu_cache *c = shared.slot_owner[i];
    if (!c) continue; /* counts of a closed handle, zeroed when the slot is reused */
    counts *k = &t->counts[i];
    atomic_fetch_add_explicit(&c->allocated, load_i(&k->allocated), memory_order_relaxed);
    atomic_fetch_add_explicit(&c->active, load_i(&k->active), memory_order_relaxed);
    store_i(&k->allocated, 0);
    store_i(&k->active, 0);
    counts_add(&shared.retired[i], k);
  }
  thread_destroy(t);
  pthread_mutex_unlock(&shared.lock);
}

/* Keeps this module mapped until the process ends (the top of this file says
 * why); 0, or -1 when the dynamic loader would not. Outside shared.lock: the
 * loader takes its own lock. */
static int pin_module(void) {
  if (atomic_load_explicit(&shared.pinned, memory_order_acquire)) return 0;
  Dl_info info;
  if (!dladdr((void *)thread_exit, &info) || !info.dli_fname) return -1;
  void *self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
  if (!self) return -1;
  dlclose(self); /* drops this handle's reference; RTLD_NODELETE stays */
  atomic_store_explicit(&shared.pinned, 1, memory_order_release);
  return 0;
}

static thread_cache *thread_new(void) {
  /* No pin, no record: the thread goes without a cache (thread_get). */
  if (pin_module() != 0) return NULL;
  thread_cache *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  pthread_mutex_lock(&shared.lock);
  if (pthread_setspecific(shared.key, t) != 0) {
    pthread_mutex_unlock(&shared.lock);
    free(t);
    return NULL;
  }
  t->epoch = atomic_load_explicit(&shared.empty_epoch, memory_order_relaxed);
  t->next = shared.threads;
  if (shared.threads) shared.threads->prev = t;
  shared.threads = t;
  pthread_mutex_unlock(&shared.lock);
  return t;
}

/* The calling thread's cache, made on first use; NULL when out of memory (the
 * caller then goes without a cache and counts under the lock). */
static inline thread_cache *thread_get(void) {
  thread_cache *t = pthread_getspecific(shared.key);
  return CPU_LIKELY(t != NULL) ? t : thread_new();
}

/* Grows the thread's counters to cover every slot; NULL when out of memory. */
static counts *counts_grow(thread_cache *t, int slot) {
  pthread_mutex_lock(&shared.lock);
  counts *k = realloc(t->counts, (size_t)shared.nslots * sizeof *k);
  if (k) {
    for (int i = t->ncounts; i < shared.nslots; i++) counts_zero(&k[i]);
    t->counts = k;
    t->ncounts = shared.nslots;
  }
  pthread_mutex_unlock(&shared.lock);
  return k ? &k[slot] : NULL;
}

static inline counts *counts_of(thread_cache *t, const cpu_cache *c) {
  if (CPU_UNLIKELY(!t)) return NULL;
  if (CPU_LIKELY(c->slot < t->ncounts)) return &t->counts[c->slot];
  return counts_grow(t, c->slot);
}

/* ---------------------------------------------------------------- counting */

/* Records one allocation (dreq > 0) or free (dreq < 0) of dreq requested and
 * dblock block bytes in the thread's counters k, flushing and comparing the
 * peaks as the top of this file says. */
static inline void count_bytes(cpu_cache *c, thread_cache *t, counts *k, int64_t dreq,
                               int64_t dblock, int new_block) {
  int64_t req = load_i(&k->allocated) + dreq;
  int64_t blk = load_i(&k->active) + dblock;
  if (CPU_UNLIKELY(req >= CPU_FLUSH_BYTES || req <= -CPU_FLUSH_BYTES ||
                   blk >= CPU_FLUSH_BYTES || blk <= -CPU_FLUSH_BYTES)) {
    atomic_fetch_add_explicit(&c->allocated, req, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->active, blk, memory_order_relaxed);
    req = blk = 0;
  }
  store_i(&k->allocated, req);
  store_i(&k->active, blk);
  if (dreq <= 0) return;
  int64_t active = load_i(&c->active) + blk;
  int64_t allocated = load_i(&c->allocated) + req;
  if (CPU_UNLIKELY((uint64_t)allocated > load_u(&c->peak_allocated)))
    raise_peak(&c->peak_allocated, allocated);
  if (CPU_UNLIKELY((uint64_t)active > load_u(&c->peak_active)))
    raise_peak(&c->peak_active, active);
  if (new_block) {
    int64_t cached = atomic_load_explicit(&shared.cached_total, memory_order_relaxed);
    raise_peak(&c->peak_reserved, active + cached + (t ? t->cached_pending : 0) +
                                      (int64_t)cpu_large_cached(c->large));
  }
}

/* Counting without a thread cache (none could be made): straight into the
 * shared totals and the retired counters. */
static void count_locked(cpu_cache *c, int64_t dreq, int64_t dblock, int alloc, int retry,
                         int oom) {
  pthread_mutex_lock(&shared.lock);
  counts *r = &shared.retired[c->slot];
  if (oom) {
    bump_u(&r->ooms, 1);
  } else {
    bump_u(alloc ? &r->allocs : &r->frees, 1);
    if (retry) bump_u(&r->retries, 1);
  }
  pthread_mutex_unlock(&shared.lock);
  if (oom) return;
  int64_t allocated = atomic_fetch_add_explicit(&c->allocated, dreq, memory_order_relaxed) + dreq;
  int64_t active = atomic_fetch_add_explicit(&c->active, dblock, memory_order_relaxed) + dblock;
  if (alloc) {
    raise_peak(&c->peak_allocated, allocated);
    raise_peak(&c->peak_active, active);
    raise_peak(&c->peak_reserved,
               active + atomic_load_explicit(&shared.cached_total, memory_order_relaxed) +
                   (int64_t)cpu_large_cached(c->large));
  }
}

/* ---------------------------------------------------------- the fast paths */

/* The common cases of cpu_cache_alloc and cpu_cache_free as straight lines: a
 * block taken from or kept in the thread's own bin, with the thread's
 * counters in place and no empty_cache to catch up on. Each returns 0 where
 * anything else holds, and the general path then does the whole work. */
static inline int usual_case(const cpu_cache *c, const thread_cache *t, size_t nbytes) {
  return CPU_LIKELY(t != NULL) && c->cfg.enabled && nbytes <= CPU_CACHE_MAX_BLOCK &&
         c->slot < t->ncounts &&
         t->epoch == atomic_load_explicit(&shared.empty_epoch, memory_order_relaxed);
}

static inline void *take_cached(cpu_cache *c, thread_cache *t, size_t nbytes) {
  if (!usual_case(c, t, nbytes)) return NULL;
  size_t block;
  bin *b = &t->bins[size_class(nbytes, &block)];
  void *p = b->head;
  if (CPU_UNLIKELY(p == NULL)) return NULL;
  b->head = *(void **)p;
  b->count--;
  cached_change(t, -(int64_t)block);
  counts *k = &t->counts[c->slot];
  bump_u(&k->allocs, 1);
  bump_u(&k->hits, 1);
  count_bytes(c, t, k, (int64_t)nbytes, (int64_t)block, 0);
  return p;
}

static inline int keep_cached(cpu_cache *c, thread_cache *t, void *ptr, size_t nbytes) {
  if (!usual_case(c, t, nbytes)) return 0;
  size_t block;
  bin *b = &t->bins[size_class(nbytes, &block)];
  if (CPU_UNLIKELY(b->count >= c->cfg.max_blocks || load_u(&t->cached) + block > c->cfg.max_bytes))
    return 0;
  *(void **)ptr = b->head;
  b->head = ptr;
  b->count++;
  cached_change(t, (int64_t)block);
  counts *k = &t->counts[c->slot];
  bump_u(&k->frees, 1);
  count_bytes(c, t, k, -(int64_t)nbytes, -(int64_t)block, 0);
  return 1;
}

/* ------------------------------------------------------------------ the API */

int cpu_cache_alloc(cpu_cache *c, size_t nbytes, void **out) {
  thread_cache *t = thread_get();
  void *hit_block = take_cached(c, t, nbytes);
  if (CPU_LIKELY(hit_block != NULL)) {
    *out = hit_block;
    return 0;
  }
  size_t block;
  int cls = -1;
  if (c->cfg.enabled && nbytes <= CPU_CACHE_MAX_BLOCK) cls = size_class(nbytes, &block);
  else block = nbytes > CPU_CACHE_MAX_BLOCK ? cpu_large_block(nbytes) : round_block(nbytes);
  if (t) thread_catch_up(t);
  void *p;
  int hit = 0, retry = 0;
  if (CPU_UNLIKELY(block == 0)) {
    p = NULL; /* past SIZE_MAX once rounded to huge pages */
  } else if (nbytes > CPU_CACHE_MAX_BLOCK) {
    p = cpu_large_take(c->large, block);
    hit = p != NULL;
    if (!p) p = cpu_large_new(block);
    if (CPU_UNLIKELY(!p) && (cpu_large_cached(c->large) > 0 || (t && load_u(&t->cached) > 0))) {
      /* Cached blocks may be what stands in the way. */
      cpu_large_empty(c->large);
      if (t) thread_drain(t);
      p = cpu_large_new(block);
      retry = p != NULL;
    }
  } else if (cls >= 0 && t && t->bins[cls].head) {
    bin *b = &t->bins[cls];
    p = b->head;
    b->head = *(void **)p;
    b->count--;
    cached_change(t, -(int64_t)block);
    hit = 1;
  } else {
    p = aligned_alloc(CPU_CACHE_ALIGNMENT, block);
    if (CPU_UNLIKELY(!p) && t && load_u(&t->cached) > 0) {
      /* Our own cached blocks may be what stands in the way. */
      thread_drain(t);
      p = aligned_alloc(CPU_CACHE_ALIGNMENT, block);
      retry = p != NULL;
    }
  }
  counts *k = counts_of(t, c);
  if (CPU_UNLIKELY(!k)) {
    count_locked(c, (int64_t)nbytes, (int64_t)block, 1, retry, p == NULL);
  } else if (CPU_UNLIKELY(!p)) {
    bump_u(&k->ooms, 1);
  } else {
    bump_u(&k->allocs, 1);
    if (hit) bump_u(&k->hits, 1);
    if (CPU_UNLIKELY(retry)) bump_u(&k->retries, 1);
    count_bytes(c, t, k, (int64_t)nbytes, (int64_t)block, !hit);
  }
  if (CPU_UNLIKELY(!p)) return TSTOR_ENOMEM;
  *out = p;
  return 0;
}

void cpu_cache_free(cpu_cache *c, void *ptr, size_t nbytes) {
  thread_cache *t = thread_get();
  if (CPU_LIKELY(keep_cached(c, t, ptr, nbytes))) return;
  size_t block;
  int cls = -1;
  if (c->cfg.enabled && nbytes <= CPU_CACHE_MAX_BLOCK) cls = size_class(nbytes, &block);
  else block = nbytes > CPU_CACHE_MAX_BLOCK ? cpu_large_block(nbytes) : round_block(nbytes);
  if (t) thread_catch_up(t);
  if (nbytes > CPU_CACHE_MAX_BLOCK) {
    cpu_large_give(c->large, ptr, block);
  } else if (cls >= 0 && t && t->bins[cls].count < c->cfg.max_blocks &&
      load_u(&t->cached) + block <= c->cfg.max_bytes) {
    bin *b = &t->bins[cls];
    *(void **)ptr = b->head;
    b->head = ptr;
    b->count++;
    cached_change(t, (int64_t)block);
  } else {
    free(ptr);
  }
  counts *k = counts_of(t, c);
  if (CPU_UNLIKELY(!k)) {
    count_locked(c, -(int64_t)nbytes, -(int64_t)block, 0, 0, 0);
    return;
  }
  bump_u(&k->frees, 1);
  count_bytes(c, t, k, -(int64_t)nbytes, -(int64_t)block, 0);
}

/* The handle's current byte totals and counts, and all threads' cached bytes. */
static void current(cpu_cache *c, counts *sum, uint64_t *cached) {
  counts_zero(sum);
  *cached = 0;
  pthread_mutex_lock(&shared.lock);
  counts_add(sum, &shared.retired[c->slot]);
  for (thread_cache *t = shared.threads; t; t = t->next) {
    *cached += load_u(&t->cached);
    if (c->slot < t->ncounts) counts_add(sum, &t->counts[c->slot]);
  }
  pthread_mutex_unlock(&shared.lock);
  store_i(&sum->allocated, load_i(&sum->allocated) + load_i(&c->allocated));
  store_i(&sum->active, load_i(&sum->active) + load_i(&c->active));
  /* A read racing with frees on other threads may see a free before its
   * allocation's flush. */
  if (load_i(&sum->allocated) < 0) store_i(&sum->allocated, 0);
  if (load_i(&sum->active) < 0) store_i(&sum->active, 0);
}

void cpu_cache_stats(cpu_cache *c, tstor_stats *out) {
  counts sum;
  uint64_t cached;
  current(c, &sum, &cached);
  out->allocated = (uint64_t)load_i(&sum.allocated);
  out->active = (uint64_t)load_i(&sum.active);
  out->reserved = out->active + cached + cpu_large_cached(c->large);
  raise_peak(&c->peak_allocated, (int64_t)out->allocated);
  raise_peak(&c->peak_active, (int64_t)out->active);
  raise_peak(&c->peak_reserved, (int64_t)out->reserved);
  out->peak_allocated = load_u(&c->peak_allocated);
  out->peak_active = load_u(&c->peak_active);
  out->peak_reserved = load_u(&c->peak_reserved);
  out->alloc_count = load_u(&sum.allocs);
  out->free_count = load_u(&sum.frees);
  out->cache_hits = load_u(&sum.hits);
  out->retries = load_u(&sum.retries);
  out->oom_count = load_u(&sum.ooms);
}

void cpu_cache_reset_peak(cpu_cache *c) {
  counts sum;
  uint64_t cached;
  current(c, &sum, &cached);
  atomic_store_explicit(&c->peak_allocated, (uint64_t)load_i(&sum.allocated),
                        memory_order_relaxed);
  atomic_store_explicit(&c->peak_active, (uint64_t)load_i(&sum.active), memory_order_relaxed);
  atomic_store_explicit(&c->peak_reserved,
                        (uint64_t)load_i(&sum.active) + cached + cpu_large_cached(c->large),
                        memory_order_relaxed);
}

void cpu_cache_empty(cpu_cache *c) {
  cpu_large_empty(c->large); /* the small blocks are the process's, not one context's */
  unsigned epoch = atomic_fetch_add_explicit(&shared.empty_epoch, 1, memory_order_relaxed) + 1;
  thread_cache *t = pthread_getspecific(shared.key);
  if (t) {
    thread_drain(t);
    t->epoch = epoch;
  }
}

/* Gives a handle a slot in every thread's counters. Under shared.lock. */
static int slot_take(cpu_cache *c) {
  int slot = 0;
  while (slot < shared.nslots && shared.slot_owner[slot]) slot++;
  if (slot == shared.nslots) {
    int n = shared.nslots ? 2 * shared.nslots : 4;
    cpu_cache **owner = realloc(shared.slot_owner, (size_t)n * sizeof *owner);
    if (!owner) return -1;
    shared.slot_owner = owner;
    counts *retired = realloc(shared.retired, (size_t)n * sizeof *retired);
    if (!retired) return -1;
    shared.retired = retired;
    for (int i = shared.nslots; i < n; i++) shared.slot_owner[i] = NULL;
    shared.nslots = n;
  }
  /* A slot's last owner may have left counts in threads that outlived it. */
  counts_zero(&shared.retired[slot]);
  for (thread_cache *t = shared.threads; t; t = t->next)
    if (slot < t->ncounts) counts_zero(&t->counts[slot]);
  shared.slot_owner[slot] = c;
  return slot;
}

/* A child forked while another thread held the lock would never get it: fork
 * waits for the lock, and both sides release it. glibc drops the handlers of a
 * module when it is unloaded. */
static void fork_prepare(void) { pthread_mutex_lock(&shared.lock); }
static void fork_done(void) { pthread_mutex_unlock(&shared.lock); }

int cpu_cache_open(const cpu_cache_config *config, cpu_cache **out) {
  cpu_cache *c = calloc(1, sizeof *c);
  if (!c) return TSTOR_ENOMEM;
  c->cfg = *config;
  if (config->enabled && config->large_max_bytes > 0 &&
      cpu_large_open(config->large_max_bytes, config->large_max_age_ms, &c->large) != 0) {
    free(c);
    return TSTOR_ENOMEM;
  }
  pthread_mutex_lock(&shared.lock);
  if (!shared.atfork) shared.atfork = pthread_atfork(fork_prepare, fork_done, fork_done) == 0;
  if (!shared.key_made) {
    if (pthread_key_create(&shared.key, thread_exit) != 0) {
      pthread_mutex_unlock(&shared.lock);
      cpu_large_close(c->large);
      free(c);
      return TSTOR_EAGAIN;
    }
    shared.key_made = 1;
  }
  c->slot = slot_take(c);
  if (c->slot < 0) {
    if (shared.users == 0 && !atomic_load_explicit(&shared.pinned, memory_order_acquire)) {
      pthread_key_delete(shared.key); /* the module may be unloaded now */
      shared.key_made = 0;
    }
    pthread_mutex_unlock(&shared.lock);
    cpu_large_close(c->large);
    free(c);
    return TSTOR_ENOMEM;
  }
  shared.users++;
  pthread_mutex_unlock(&shared.lock);
  *out = c;
  return 0;
}

void cpu_cache_close(cpu_cache *c) {
  if (!c) return;
  pthread_mutex_lock(&shared.lock);
  shared.slot_owner[c->slot] = NULL;
  if (--shared.users == 0) {
    /* No thread may keep blocks. Without a pin no record was ever made, so no
     * destructor can run and the key goes (the module may be unmapped). With
     * one, the records stay with their threads, empty, and the key with the
     * module: thread_exit frees each record when its thread exits. */
    if (!atomic_load_explicit(&shared.pinned, memory_order_acquire)) {
      if (shared.key_made) pthread_key_delete(shared.key);
      shared.key_made = 0;
    }
    for (thread_cache *t = shared.threads; t; t = t->next) thread_drain(t);
    free(shared.slot_owner);
    free(shared.retired);
    shared.slot_owner = NULL;
    shared.retired = NULL;
    shared.nslots = 0;
    atomic_store_explicit(&shared.cached_total, 0, memory_order_relaxed);
  }
  pthread_mutex_unlock(&shared.lock);
  cpu_large_close(c->large);
  free(c);
}
