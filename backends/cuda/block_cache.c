/* The caching device allocator: see block_cache.h for the policy. */
#include "block_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "treap.h"

enum { POOL_SMALL = 0, POOL_LARGE = 1 };
enum { BLOCK_FREE = 0, BLOCK_USED = 1, BLOCK_PENDING = 2 };

typedef struct stream_rec stream_rec;
typedef struct segment segment;
typedef struct block block;

/* A run of bytes inside a segment: free (in its owner's free set), used (handed
 * out), or pending (freed, waiting for events on other streams). */
struct block {
  tstor__treap_node node; /* in owner->free[seg->pool] while free; keys (size, addr) */
  uintptr_t addr;
  size_t size;
  size_t requested; /* bytes asked for, while used */
  segment *seg;
  block *prev, *next; /* address neighbours inside seg */
  stream_rec *owner;
  int state;
  /* While used: other streams that use it (record_stream). While pending: the
   * events recorded on them at free, in the same array. */
  void **marks;
  int nmarks, cap_marks;
  block *pending_next;
  uint64_t freed_at; /* clock at the last free: the age for garbage collection */
};

/* One raw allocation from the device. */
struct segment {
  uintptr_t base;
  size_t size;
  int pool;
  stream_rec *home; /* the stream it was allocated for */
  block *first;
  segment *prev, *next;
};

/* A stream the cache has seen, with the free blocks it owns. */
struct stream_rec {
  void *key; /* the backend's stream handle; NULL for the default stream */
  tstor__treap_node *free[2];
  uint64_t rejected_at; /* tick at which its queued work was found busy */
  stream_rec *next;
};

struct tstor__cache {
  pthread_mutex_t lock;
  tstor__raw_device raw;
  tstor__cache_config cfg;
  char name[32];
  stream_rec *streams; /* the default stream (key NULL) is always the last */
  stream_rec *default_stream;
  segment *segments;
  block *pending;
  size_t total_mem; /* 0 until known */
  uint64_t tick;    /* one per allocation */
  uint64_t clock;   /* one per free: orders blocks by age */
  tstor_stats stats;
};

/* ------------------------------------------------------------ statistics */

static void add_allocated(tstor__cache *c, size_t n) {
  c->stats.allocated += n;
  tstor_stats_note_peaks(&c->stats);
}
static void add_reserved(tstor__cache *c, size_t n) {
  c->stats.reserved += n;
  tstor_stats_note_peaks(&c->stats);
}
static void add_active(tstor__cache *c, size_t n) {
  c->stats.active += n;
  tstor_stats_note_peaks(&c->stats);
}

/* --------------------------------------------------------------- sizing */

size_t tstor__cache_round(const tstor__cache *c, size_t n) {
  if (n == 0) return 0;
  /* Leave room for the segment rounding below, so that nothing overflows. */
  if (n > SIZE_MAX - 4 * TSTOR__CACHE_ROUND_LARGE) return SIZE_MAX;
  if (n < TSTOR__CACHE_MIN_BLOCK) return TSTOR__CACHE_MIN_BLOCK;
  unsigned div = c->cfg.roundup_divisions;
  if (div > 1 && n > TSTOR__CACHE_MIN_BLOCK * div && (n & (n - 1)) != 0) {
    size_t floor = (size_t)1 << (63 - __builtin_clzll((unsigned long long)n));
    size_t step = floor / div; /* >= 512: n > 512 * div */
    return (n + step - 1) & ~(step - 1);
  }
  return (n + TSTOR__CACHE_MIN_BLOCK - 1) & ~(TSTOR__CACHE_MIN_BLOCK - 1);
}

static int pool_of(size_t rounded) {
  return rounded <= TSTOR__CACHE_SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
}

static size_t segment_size(size_t rounded) {
  if (rounded <= TSTOR__CACHE_SMALL_SIZE) return TSTOR__CACHE_SMALL_SEGMENT;
  if (rounded < TSTOR__CACHE_MIN_LARGE_ALLOC) return TSTOR__CACHE_LARGE_BUFFER;
  return (rounded + TSTOR__CACHE_ROUND_LARGE - 1) & ~(TSTOR__CACHE_ROUND_LARGE - 1);
}

static int is_oversize(const tstor__cache *c, size_t size) {
  return size >= c->cfg.max_split_size;
}

/* Whether a free block of b_size may serve a request of `size` at all: blocks
 * past max_split_size go only to requests of about their own size, so that
 * they are not cut up (PyTorch's rule). */
static int may_serve(const tstor__cache *c, size_t b_size, size_t size) {
  if (c->cfg.max_split_size == SIZE_MAX) return 1;
  if (!is_oversize(c, size) && is_oversize(c, b_size)) return 0;
  if (is_oversize(c, size) && b_size >= size + TSTOR__CACHE_LARGE_BUFFER) return 0;
  return 1;
}

static int should_split(const tstor__cache *c, const block *b, size_t size) {
  size_t rest = b->size - size;
  if (b->seg->pool == POOL_SMALL) return rest >= TSTOR__CACHE_MIN_BLOCK;
  return !is_oversize(c, size) && rest > TSTOR__CACHE_SMALL_SIZE;
}

/* ----------------------------------------------------------- free sets */

static tstor__treap_node **free_set(block *b) { return &b->owner->free[b->seg->pool]; }

static void set_insert(block *b) {
  tstor__treap_init(&b->node, b->size, b->addr);
  tstor__treap_insert(free_set(b), &b->node);
}

static void set_erase(block *b) { tstor__treap_erase(free_set(b), &b->node); }

/* Takes b's right neighbour n (free, same owner, out of any set) into b. */
static void absorb_next(block *b) {
  block *n = b->next;
  b->size += n->size;
  b->next = n->next;
  if (n->next) n->next->prev = b;
  free(n->marks);
  free(n);
}

/* Puts a free block (in no set) into its owner's set, merged with free
 * neighbours of the same owner. */
static void release_to_set(block *b) {
  b->state = BLOCK_FREE;
  if (b->next && b->next->state == BLOCK_FREE && b->next->owner == b->owner) {
    set_erase(b->next);
    if (b->next->freed_at > b->freed_at) b->freed_at = b->next->freed_at;
    absorb_next(b);
  }
  if (b->prev && b->prev->state == BLOCK_FREE && b->prev->owner == b->owner) {
    block *p = b->prev;
    set_erase(p);
    if (b->freed_at > p->freed_at) p->freed_at = b->freed_at;
    absorb_next(p);
    b = p;
  }
  set_insert(b);
}

/* A used or pending block whose work is all done becomes free. */
static void finish_free(tstor__cache *c, block *b) {
  c->stats.active -= b->size;
  b->nmarks = 0;
  b->freed_at = ++c->clock;
  release_to_set(b);
}

/* --------------------------------------------------------------- streams */

static stream_rec *find_stream(tstor__cache *c, void *key) {
  for (stream_rec *r = c->streams; r; r = r->next)
    if (r->key == key) return r;
  return NULL;
}

static stream_rec *stream_for(tstor__cache *c, void *key) {
  stream_rec *r = find_stream(c, key);
  if (r) return r;
  r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->key = key;
  r->next = c->streams;
  c->streams = r;
  return r;
}

/* ---------------------------------------------------------------- events */

static void release_marks(tstor__cache *c, block *b) {
  if (b->state == BLOCK_PENDING)
    for (int i = 0; i < b->nmarks; i++) c->raw.event_release(c->raw.ctx, b->marks[i]);
  b->nmarks = 0;
}

/* Frees the pending blocks whose events have all completed. With `wait`, waits
 * for them (after a device-wide synchronize they are complete anyway). */
static void process_pending(tstor__cache *c, int wait) {
  block **link = &c->pending;
  while (*link) {
    block *b = *link;
    while (b->nmarks > 0) {
      void *ev = b->marks[b->nmarks - 1];
      int rc = wait ? c->raw.event_synchronize(c->raw.ctx, ev)
                    : c->raw.event_query(c->raw.ctx, ev);
      if (rc != 0) break; /* not yet, or a failed device: keep the block */
      c->raw.event_release(c->raw.ctx, ev);
      b->nmarks--;
    }
    if (b->nmarks == 0) {
      *link = b->pending_next;
      b->pending_next = NULL;
      finish_free(c, b);
    } else {
      link = &b->pending_next;
    }
  }
}

/* Whether the work queued so far on r's stream has finished. */
static int stream_idle(tstor__cache *c, stream_rec *r) {
  void *ev = NULL;
  if (c->raw.event_record(c->raw.ctx, r->key, &ev) != 0) return 0;
  int rc = c->raw.event_query(c->raw.ctx, ev);
  c->raw.event_release(c->raw.ctx, ev);
  return rc == 0;
}

/* -------------------------------------------------------------- segments */

static void release_segment(tstor__cache *c, segment *s) {
  block *b = s->first;
  set_erase(b);
  c->raw.free(c->raw.ctx, (void *)s->base);
  c->stats.reserved -= s->size;
  if (s->prev) s->prev->next = s->next;
  else c->segments = s->next;
  if (s->next) s->next->prev = s->prev;
  free(b->marks);
  free(b);
  free(s);
}

static int segment_unused(const segment *s) {
  return s->first->state == BLOCK_FREE && s->first->next == NULL;
}

/* Moves the free blocks of s owned by `from` (every free block when from is
 * NULL) to stream `to` and merges the free runs `to` then owns. */
static void retag_free(segment *s, stream_rec *from, stream_rec *to) {
  for (block *b = s->first; b; b = b->next) {
    if (b->state != BLOCK_FREE || (from && b->owner != from && b->owner != to)) continue;
    set_erase(b);
    b->owner = to;
  }
  for (block *b = s->first; b; b = b->next) {
    if (b->state != BLOCK_FREE || b->owner != to) continue;
    while (b->next && b->next->state == BLOCK_FREE && b->next->owner == to) {
      if (b->next->freed_at > b->freed_at) b->freed_at = b->next->freed_at;
      absorb_next(b);
    }
    set_insert(b);
  }
}

/* Synchronizes, completes every pending block and returns every unused
 * segment. Returns how many bytes it gave back, or a negative code when the
 * device could not be synchronized (nothing is freed then). */
static long long empty_locked(tstor__cache *c) {
  if (c->raw.synchronize) {
    int rc = c->raw.synchronize(c->raw.ctx);
    if (rc != 0) return rc;
    process_pending(c, 0);
  } else {
    process_pending(c, 1);
  }
  /* No stream has work left: every free block may go back to its segment's
   * home stream and merge with all its free neighbours. */
  for (segment *s = c->segments; s; s = s->next) retag_free(s, NULL, s->home);
  long long freed = 0;
  segment *s = c->segments;
  while (s) {
    segment *next = s->next;
    if (segment_unused(s)) {
      freed += (long long)s->size;
      release_segment(c, s);
    }
    s = next;
  }
  return freed;
}

static size_t total_memory(tstor__cache *c) {
  if (c->total_mem == 0 && c->raw.mem_info) {
    size_t free_b = 0, total_b = 0;
    if (c->raw.mem_info(c->raw.ctx, &free_b, &total_b) == 0) c->total_mem = total_b;
  }
  return c->total_mem;
}

static int by_age(const void *a, const void *b) {
  const segment *sa = *(segment *const *)a, *sb = *(segment *const *)b;
  return sa->first->freed_at < sb->first->freed_at ? -1 : sa->first->freed_at > sb->first->freed_at;
}

/* With a garbage collection threshold: before reserving `incoming` more bytes
 * past the threshold, returns the longest-unused free segments until under it.
 * Freeing memory the device may still use is safe: the device's free waits. */
static void collect_garbage(tstor__cache *c, size_t incoming) {
  if (c->cfg.gc_threshold <= 0) return;
  size_t total = total_memory(c);
  if (total == 0) return;
  double limit = c->cfg.gc_threshold * (double)total;
  if ((double)(c->stats.reserved + incoming) <= limit) return;
  size_t n = 0;
  for (segment *s = c->segments; s; s = s->next) n += segment_unused(s);
  if (n == 0) return;
  segment **list = malloc(n * sizeof *list);
  if (!list) return; /* collection is an optimisation: go on without it */
  size_t i = 0;
  for (segment *s = c->segments; s; s = s->next)
    if (segment_unused(s)) list[i++] = s;
  qsort(list, n, sizeof *list, by_age);
  for (i = 0; i < n && (double)(c->stats.reserved + incoming) > limit; i++)
    release_segment(c, list[i]);
  free(list);
}

/* ------------------------------------------------------------ allocation */

static block *best_fit(tstor__cache *c, stream_rec *r, int pool, size_t size) {
  tstor__treap_node *n = tstor__treap_ceil(r->free[pool], size, 0);
  if (!n) return NULL;
  block *b = TSTOR__TREAP_ENTRY(n, block, node);
  return may_serve(c, b->size, size) ? b : NULL;
}

/* A free block of another stream, whose queued work is done, for `size`: the
 * smallest among the streams found idle. */
static block *best_fit_elsewhere(tstor__cache *c, stream_rec *self, int pool, size_t size) {
  for (;;) {
    block *best = NULL;
    for (stream_rec *r = c->streams; r; r = r->next) {
      if (r == self || r->rejected_at == c->tick) continue;
      block *b = best_fit(c, r, pool, size);
      if (b && (!best || b->size < best->size)) best = b;
    }
    if (!best) return NULL;
    if (stream_idle(c, best->owner)) return best;
    best->owner->rejected_at = c->tick; /* busy: look at the next stream */
  }
}

/* Hands out the first `size` bytes of free block b (in a set) to stream r. */
static block *take(tstor__cache *c, block *b, stream_rec *r, size_t size, size_t requested) {
  set_erase(b);
  b->owner = r;
  b->state = BLOCK_USED; /* before the split, so that the rest does not merge back */
  if (should_split(c, b, size)) {
    block *rest = calloc(1, sizeof *rest);
    if (rest) { /* without memory for the record the whole block is handed out */
      rest->addr = b->addr + size;
      rest->size = b->size - size;
      rest->seg = b->seg;
      rest->owner = r;
      rest->freed_at = b->freed_at;
      rest->prev = b;
      rest->next = b->next;
      if (b->next) b->next->prev = rest;
      b->next = rest;
      b->size = size;
      release_to_set(rest);
    }
  }
  b->requested = requested;
  b->nmarks = 0;
  add_active(c, b->size);
  add_allocated(c, requested);
  c->stats.alloc_count++;
  return b;
}

static int new_segment(tstor__cache *c, stream_rec *r, int pool, size_t seg_size, void *mem,
                       block **out) {
  segment *s = calloc(1, sizeof *s);
  block *b = calloc(1, sizeof *b);
  if (!s || !b) {
    free(s);
    free(b);
    return TSTOR_ENOMEM;
  }
  s->base = (uintptr_t)mem;
  s->size = seg_size;
  s->pool = pool;
  s->home = r;
  s->first = b;
  s->next = c->segments;
  if (c->segments) c->segments->prev = s;
  c->segments = s;
  b->addr = s->base;
  b->size = seg_size;
  b->seg = s;
  b->owner = r;
  b->state = BLOCK_FREE;
  b->freed_at = ++c->clock;
  add_reserved(c, seg_size);
  *out = b;
  return 0;
}

static int oom(tstor__cache *c, size_t nbytes) {
  char req[32], fr[32], tot[32], al[32], rs[32];
  size_t free_b = 0, total_b = 0;
  int have_info = c->raw.mem_info && c->raw.mem_info(c->raw.ctx, &free_b, &total_b) == 0;
  c->stats.oom_count++;
  tstor__format_bytes(req, sizeof req, nbytes);
  tstor__format_bytes(al, sizeof al, c->stats.allocated);
  tstor__format_bytes(rs, sizeof rs, c->stats.reserved);
  if (have_info)
    return c->raw.set_error(
        TSTOR_ENOMEM,
        "%s: out of memory: tried to allocate %s (%zu bytes); the device has %s free of %s; "
        "tstor holds %s allocated and %s reserved%s",
        c->name, req, nbytes, tstor__format_bytes(fr, sizeof fr, free_b),
        tstor__format_bytes(tot, sizeof tot, total_b), al, rs,
        c->cfg.caching ? "" : " (caching off)");
  return c->raw.set_error(TSTOR_ENOMEM,
                          "%s: out of memory: tried to allocate %s (%zu bytes); device free "
                          "and total memory unknown; tstor holds %s allocated and %s reserved%s",
                          c->name, req, nbytes, al, rs, c->cfg.caching ? "" : " (caching off)");
}

/* Obtains a new segment for stream r, emptying the cache and retrying once when
 * the device is full. */
static int grow(tstor__cache *c, stream_rec *r, size_t nbytes, size_t size, block **out) {
  size_t seg_size = segment_size(size);
  collect_garbage(c, seg_size);
  void *mem = NULL;
  int rc = c->raw.alloc(c->raw.ctx, seg_size, &mem);
  if (rc == TSTOR_ENOMEM) {
    /* A request past the device's whole memory cannot succeed: keep the cache. */
    size_t total = total_memory(c);
    if (total == 0 || seg_size <= total) {
      if (empty_locked(c) > 0) {
        rc = c->raw.alloc(c->raw.ctx, seg_size, &mem);
        if (rc == 0) c->stats.retries++;
      }
    }
  }
  if (rc == TSTOR_ENOMEM) return oom(c, nbytes);
  if (rc != 0) return rc;
  rc = new_segment(c, r, pool_of(size), seg_size, mem, out);
  if (rc != 0) {
    c->raw.free(c->raw.ctx, mem);
    return c->raw.set_error(rc, "%s: no host memory for the allocator's records", c->name);
  }
  set_insert(*out);
  return 0;
}

static int alloc_uncached(tstor__cache *c, size_t nbytes, void **ptr) {
  int rc = c->raw.alloc(c->raw.ctx, nbytes, ptr);
  if (rc == TSTOR_ENOMEM) return oom(c, nbytes);
  if (rc != 0) return rc;
  add_reserved(c, nbytes);
  add_active(c, nbytes);
  add_allocated(c, nbytes);
  c->stats.alloc_count++;
  return 0;
}

int tstor__cache_alloc(tstor__cache *c, size_t nbytes, void *stream, void **ptr,
                       void **handle) {
  *ptr = NULL;
  *handle = NULL;
  if (nbytes == 0) return 0;
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  if (!c->cfg.caching) {
    rc = alloc_uncached(c, nbytes, ptr);
    pthread_mutex_unlock(&c->lock);
    return rc;
  }
  c->tick++;
  size_t size = tstor__cache_round(c, nbytes);
  stream_rec *r = size == SIZE_MAX ? NULL : stream_for(c, stream);
  if (size == SIZE_MAX) {
    rc = oom(c, nbytes);
  } else if (!r) {
    rc = c->raw.set_error(TSTOR_ENOMEM, "%s: no host memory for the allocator's records",
                          c->name);
  } else {
    process_pending(c, 0);
    int pool = pool_of(size);
    block *b = best_fit(c, r, pool, size);
    if (!b) b = best_fit_elsewhere(c, r, pool, size);
    if (b) c->stats.cache_hits++;
    else rc = grow(c, r, nbytes, size, &b);
    if (rc == 0) {
      b = take(c, b, r, size, nbytes);
      *ptr = (void *)b->addr;
      *handle = b;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

void tstor__cache_free(tstor__cache *c, void *ptr, size_t nbytes, void *handle) {
  if (!ptr) return;
  pthread_mutex_lock(&c->lock);
  c->stats.free_count++;
  if (!c->cfg.caching) {
    c->raw.free(c->raw.ctx, ptr);
    c->stats.allocated -= nbytes;
    c->stats.active -= nbytes;
    c->stats.reserved -= nbytes;
    pthread_mutex_unlock(&c->lock);
    return;
  }
  block *b = handle;
  c->stats.allocated -= b->requested;
  b->requested = 0;
  /* Turn each stream that used the block into an event on it, in place. */
  int recorded = 0, failed = 0;
  for (; recorded < b->nmarks; recorded++) {
    void *ev = NULL;
    if (c->raw.event_record(c->raw.ctx, b->marks[recorded], &ev) != 0) {
      failed = 1;
      break;
    }
    b->marks[recorded] = ev;
  }
  if (failed) {
    /* Cannot tell when the other streams are done: wait for all of them. */
    for (int i = 0; i < recorded; i++) c->raw.event_release(c->raw.ctx, b->marks[i]);
    b->nmarks = 0;
    if (c->raw.synchronize) c->raw.synchronize(c->raw.ctx);
  }
  if (b->nmarks > 0) {
    b->state = BLOCK_PENDING;
    b->pending_next = c->pending;
    c->pending = b;
  } else {
    finish_free(c, b);
  }
  pthread_mutex_unlock(&c->lock);
}

int tstor__cache_record_stream(tstor__cache *c, void *handle, void *stream) {
  block *b = handle;
  if (!b || !c->cfg.caching) return 0; /* freeing uncached memory waits for the device */
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  if (b->state != BLOCK_USED) {
    rc = c->raw.set_error(TSTOR_EINVAL, "%s: record_stream on a block that is not allocated",
                          c->name);
  } else if (stream != b->owner->key) {
    int i = 0;
    while (i < b->nmarks && b->marks[i] != stream) i++;
    if (i == b->nmarks) {
      if (b->nmarks == b->cap_marks) {
        int cap = b->cap_marks ? 2 * b->cap_marks : 2;
        void **m = realloc(b->marks, (size_t)cap * sizeof *m);
        if (!m) {
          pthread_mutex_unlock(&c->lock);
          return c->raw.set_error(TSTOR_ENOMEM, "%s: no host memory to record the stream",
                                  c->name);
        }
        b->marks = m;
        b->cap_marks = cap;
      }
      b->marks[b->nmarks++] = stream;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

int tstor__cache_empty(tstor__cache *c) {
  pthread_mutex_lock(&c->lock);
  long long rc = c->cfg.caching ? empty_locked(c) : 0;
  pthread_mutex_unlock(&c->lock);
  return rc < 0 ? (int)rc : 0;
}

void tstor__cache_forget_stream(tstor__cache *c, void *stream) {
  if (!stream) return;
  pthread_mutex_lock(&c->lock);
  stream_rec *r = find_stream(c, stream);
  stream_rec *d = c->default_stream;
  for (segment *s = c->segments; s; s = s->next) {
    if (s->home == r) s->home = d;
    for (block *b = s->first; b; b = b->next) {
      if (b->state == BLOCK_USED) { /* drop the stream from record_stream marks */
        int j = 0;
        for (int i = 0; i < b->nmarks; i++)
          if (b->marks[i] != stream) b->marks[j++] = b->marks[i];
        b->nmarks = j;
      }
      if (r && b->owner == r && b->state != BLOCK_FREE) b->owner = d;
    }
    if (r) retag_free(s, r, d);
  }
  if (r) {
    stream_rec **link = &c->streams;
    while (*link != r) link = &(*link)->next;
    *link = r->next;
    free(r);
  }
  pthread_mutex_unlock(&c->lock);
}

void tstor__cache_stats(tstor__cache *c, tstor_stats *out) {
  pthread_mutex_lock(&c->lock);
  tstor_stats_copy(out, &c->stats); /* only what the caller's struct holds */
  pthread_mutex_unlock(&c->lock);
}

void tstor__cache_reset_peak(tstor__cache *c) {
  pthread_mutex_lock(&c->lock);
  tstor_stats_reset_peaks(&c->stats);
  pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------ lifecycle */

int tstor__cache_create(const tstor__raw_device *raw, const tstor__cache_config *cfg,
                        tstor__cache **out) {
  *out = NULL;
  if (cfg->roundup_divisions > 1 && (cfg->roundup_divisions & (cfg->roundup_divisions - 1)))
    return raw->set_error(TSTOR_EINVAL, "roundup_power2_divisions must be a power of two");
  if (cfg->gc_threshold < 0 || cfg->gc_threshold >= 1)
    return raw->set_error(TSTOR_EINVAL, "garbage_collection_threshold must be in [0, 1)");
  tstor__cache *c = calloc(1, sizeof *c);
  stream_rec *d = calloc(1, sizeof *d);
  if (!c || !d || pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c);
    free(d);
    return raw->set_error(TSTOR_ENOMEM, "no memory for the cuda allocator");
  }
  c->raw = *raw;
  c->cfg = *cfg;
  snprintf(c->name, sizeof c->name, "%s", cfg->name ? cfg->name : "cuda");
  c->cfg.name = c->name;
  c->streams = c->default_stream = d;
  *out = c;
  return 0;
}

void tstor__cache_destroy(tstor__cache *c) {
  if (!c) return;
  if (c->cfg.caching) {
    if (c->raw.synchronize) c->raw.synchronize(c->raw.ctx);
    for (block *b = c->pending; b; b = b->pending_next) release_marks(c, b);
    while (c->segments) {
      segment *s = c->segments;
      c->segments = s->next;
      c->raw.free(c->raw.ctx, (void *)s->base);
      for (block *b = s->first; b;) {
        block *next = b->next;
        free(b->marks);
        free(b);
        b = next;
      }
      free(s);
    }
  }
  while (c->streams) {
    stream_rec *r = c->streams;
    c->streams = r->next;
    free(r);
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* --------------------------------------------------------- consistency */

static int in_set(tstor__treap_node *root, block *b) {
  tstor__treap_node *n = tstor__treap_ceil(root, b->size, b->addr);
  return n == &b->node;
}

int tstor__cache_check(tstor__cache *c) {
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  uint64_t reserved = 0, active = 0, allocated = 0;
  for (segment *s = c->segments; s && rc == 0; s = s->next) {
    reserved += s->size;
    uintptr_t at = s->base;
    if (s->first->prev) rc = -1;
    for (block *b = s->first; b && rc == 0; b = b->next) {
      if (b->addr != at || b->seg != s) rc = -2; /* blocks tile the segment */
      at += b->size;
      if (b->next && b->next->prev != b) rc = -3;
      if (b->state == BLOCK_FREE) {
        if (!in_set(b->owner->free[s->pool], b)) rc = -4;
        if (b->next && b->next->state == BLOCK_FREE && b->next->owner == b->owner)
          rc = -5; /* unmerged neighbours */
      } else {
        active += b->size;
        allocated += b->requested;
      }
    }
    if (rc == 0 && at != s->base + s->size) rc = -6;
  }
  if (rc == 0 && c->cfg.caching &&
      (reserved != c->stats.reserved || active != c->stats.active ||
       allocated != c->stats.allocated))
    rc = -7;
  pthread_mutex_unlock(&c->lock);
  return rc;
}
