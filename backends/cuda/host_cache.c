/* The caching pinned host allocator: see host_cache.h for the policy. */
#include "host_cache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "treap.h"

enum { HB_FREE = 0, HB_USED = 1, HB_PENDING = 2 };

/* The last event recorded on one stream that used the block: on one stream,
 * a later event completes after an earlier one, so one per stream is enough. */
typedef struct use {
  void *stream;
  void *event;
} use;

typedef struct hblock hblock;
struct hblock {
  tstor__treap_node by_addr; /* in c->blocks, always; keys (addr, 0) */
  tstor__treap_node by_size; /* in c->free_set while free; keys (size, addr) */
  uintptr_t addr;
  size_t size;
  size_t requested;
  int state;
  use *uses;
  int nuses, cap_uses;
  hblock *pending_next;
};

struct tstor__hostcache {
  pthread_mutex_t lock;
  tstor__raw_device raw;
  char name[32];
  int caching;
  tstor__treap_node *blocks;
  tstor__treap_node *free_set;
  hblock *pending;
  tstor_stats stats;
};

size_t tstor__hostcache_round(size_t n) {
  if (n == 0) return 0;
  if (n > SIZE_MAX - 2 * TSTOR__HOSTCACHE_ROUND_LARGE) return SIZE_MAX;
  if (n <= TSTOR__HOSTCACHE_SMALL_SIZE) {
    size_t p = 512;
    while (p < n) p <<= 1;
    return p;
  }
  return (n + TSTOR__HOSTCACHE_ROUND_LARGE - 1) & ~(TSTOR__HOSTCACHE_ROUND_LARGE - 1);
}

static hblock *block_at(tstor__hostcache *c, const void *ptr) {
  tstor__treap_node *n = tstor__treap_floor(c->blocks, (uintptr_t)ptr, UINT64_MAX);
  if (!n) return NULL;
  hblock *b = TSTOR__TREAP_ENTRY(n, hblock, by_addr);
  return (uintptr_t)ptr < b->addr + b->size ? b : NULL;
}

/* Drops the events that have completed; returns how many remain. With `wait`,
 * waits for all of them. A failed query keeps its event (and the block). */
static int prune_uses(tstor__hostcache *c, hblock *b, int wait) {
  int j = 0;
  for (int i = 0; i < b->nuses; i++) {
    int rc = wait ? c->raw.event_synchronize(c->raw.ctx, b->uses[i].event)
                  : c->raw.event_query(c->raw.ctx, b->uses[i].event);
    if (rc == 0)
      c->raw.event_release(c->raw.ctx, b->uses[i].event);
    else
      b->uses[j++] = b->uses[i];
  }
  b->nuses = j;
  return j;
}

static void to_free_set(tstor__hostcache *c, hblock *b) {
  b->state = HB_FREE;
  c->stats.active -= b->size;
  tstor__treap_init(&b->by_size, b->size, b->addr);
  tstor__treap_insert(&c->free_set, &b->by_size);
}

static void destroy_block(tstor__hostcache *c, hblock *b) {
  tstor__treap_erase(&c->blocks, &b->by_addr);
  c->raw.free(c->raw.ctx, (void *)b->addr);
  c->stats.reserved -= b->size;
  free(b->uses);
  free(b);
}

static void process_pending(tstor__hostcache *c, int wait) {
  hblock **link = &c->pending;
  while (*link) {
    hblock *b = *link;
    if (prune_uses(c, b, wait) == 0) {
      *link = b->pending_next;
      b->pending_next = NULL;
      if (c->caching) {
        to_free_set(c, b);
      } else {
        c->stats.active -= b->size;
        destroy_block(c, b);
      }
    } else {
      link = &b->pending_next;
    }
  }
}

/* Returns every free block to the system; returns how many bytes. */
static size_t release_free(tstor__hostcache *c) {
  size_t freed = 0;
  tstor__treap_node *n;
  while ((n = tstor__treap_first(c->free_set)) != NULL) {
    hblock *b = TSTOR__TREAP_ENTRY(n, hblock, by_size);
    tstor__treap_erase(&c->free_set, n);
    freed += b->size;
    destroy_block(c, b);
  }
  return freed;
}

static int oom(tstor__hostcache *c, size_t nbytes) {
  char req[32], fr[32], tot[32], al[32], rs[32];
  size_t free_b = 0, total_b = 0;
  c->stats.oom_count++;
  tstor__format_bytes(req, sizeof req, nbytes);
  tstor__format_bytes(al, sizeof al, c->stats.allocated);
  tstor__format_bytes(rs, sizeof rs, c->stats.reserved);
  if (c->raw.mem_info && c->raw.mem_info(c->raw.ctx, &free_b, &total_b) == 0)
    return c->raw.set_error(
        TSTOR_ENOMEM,
        "%s: cannot pin %s (%zu bytes): the host has %s available of %s; tstor holds %s "
        "allocated and %s reserved of pinned memory",
        c->name, req, nbytes, tstor__format_bytes(fr, sizeof fr, free_b),
        tstor__format_bytes(tot, sizeof tot, total_b), al, rs);
  return c->raw.set_error(TSTOR_ENOMEM,
                          "%s: cannot pin %s (%zu bytes); tstor holds %s allocated and %s "
                          "reserved of pinned memory",
                          c->name, req, nbytes, al, rs);
}

/* Pins a new block of `size`, freeing cached blocks and retrying when the
 * system refuses. */
static int grow(tstor__hostcache *c, size_t nbytes, size_t size, hblock **out) {
  hblock *b = calloc(1, sizeof *b);
  if (!b)
    return c->raw.set_error(TSTOR_ENOMEM, "%s: no host memory for the allocator's records",
                            c->name);
  void *mem = NULL;
  int rc = size == SIZE_MAX ? TSTOR_ENOMEM : c->raw.alloc(c->raw.ctx, size, &mem);
  if (rc == TSTOR_ENOMEM && size != SIZE_MAX && c->caching) {
    if (release_free(c) > 0) {
      rc = c->raw.alloc(c->raw.ctx, size, &mem);
      if (rc == 0) c->stats.retries++;
    }
    if (rc == TSTOR_ENOMEM && c->pending) {
      process_pending(c, 1);
      if (release_free(c) > 0) {
        rc = c->raw.alloc(c->raw.ctx, size, &mem);
        if (rc == 0) c->stats.retries++;
      }
    }
  }
  if (rc != 0) {
    free(b);
    return rc == TSTOR_ENOMEM ? oom(c, nbytes) : rc;
  }
  b->addr = (uintptr_t)mem;
  b->size = size;
  tstor__treap_init(&b->by_addr, b->addr, 0);
  tstor__treap_insert(&c->blocks, &b->by_addr);
  c->stats.reserved += size;
  tstor_stats_note_peaks(&c->stats);
  *out = b;
  return 0;
}

int tstor__hostcache_alloc(tstor__hostcache *c, size_t nbytes, void **ptr, void **handle) {
  *ptr = NULL;
  *handle = NULL;
  if (nbytes == 0) return 0;
  size_t size = c->caching ? tstor__hostcache_round(nbytes) : nbytes;
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  hblock *b = NULL;
  if (c->caching) {
    process_pending(c, 0);
    if (size != SIZE_MAX) {
      tstor__treap_node *n = tstor__treap_ceil(c->free_set, size, 0);
      if (n) {
        b = TSTOR__TREAP_ENTRY(n, hblock, by_size);
        if (b->size - size > size / 4) b = NULL;
      }
    }
  }
  if (b) {
    tstor__treap_erase(&c->free_set, &b->by_size);
    c->stats.cache_hits++;
  } else {
    rc = grow(c, nbytes, size, &b);
  }
  if (rc == 0) {
    b->state = HB_USED;
    b->requested = nbytes;
    c->stats.active += b->size;
    c->stats.allocated += nbytes;
    tstor_stats_note_peaks(&c->stats);
    c->stats.alloc_count++;
    *ptr = (void *)b->addr;
    *handle = b;
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

void tstor__hostcache_free(tstor__hostcache *c, void *ptr, void *handle) {
  hblock *b = handle;
  if (!ptr || !b) return;
  pthread_mutex_lock(&c->lock);
  c->stats.free_count++;
  c->stats.allocated -= b->requested;
  b->requested = 0;
  if (prune_uses(c, b, !c->caching) > 0) {
    b->state = HB_PENDING;
    b->pending_next = c->pending;
    c->pending = b;
  } else if (c->caching) {
    to_free_set(c, b);
  } else {
    c->stats.active -= b->size;
    destroy_block(c, b);
  }
  pthread_mutex_unlock(&c->lock);
}

int tstor__hostcache_contains(tstor__hostcache *c, const void *ptr, size_t nbytes) {
  if (!ptr) return 0;
  pthread_mutex_lock(&c->lock);
  hblock *b = block_at(c, ptr);
  int yes = b && b->state == HB_USED && nbytes <= b->addr + b->size - (uintptr_t)ptr;
  pthread_mutex_unlock(&c->lock);
  return yes;
}

int tstor__hostcache_record_use(tstor__hostcache *c, const void *ptr, void *stream) {
  if (!ptr) return 0;
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  hblock *b = block_at(c, ptr);
  if (b && b->state == HB_USED) {
    void *ev = NULL;
    rc = c->raw.event_record(c->raw.ctx, stream, &ev);
    if (rc == 0) {
      int i = 0;
      while (i < b->nuses && b->uses[i].stream != stream) i++;
      if (i < b->nuses) { /* the new event completes after the old one */
        c->raw.event_release(c->raw.ctx, b->uses[i].event);
        b->uses[i].event = ev;
      } else {
        if (b->nuses == b->cap_uses && prune_uses(c, b, 0) == b->cap_uses) {
          int cap = b->cap_uses ? 2 * b->cap_uses : 2;
          use *u = realloc(b->uses, (size_t)cap * sizeof *u);
          if (!u) {
            /* Without room to remember the event, wait for the copy instead. */
            rc = c->raw.event_synchronize(c->raw.ctx, ev);
            c->raw.event_release(c->raw.ctx, ev);
            pthread_mutex_unlock(&c->lock);
            return rc;
          }
          b->uses = u;
          b->cap_uses = cap;
        }
        b->uses[b->nuses].stream = stream;
        b->uses[b->nuses].event = ev;
        b->nuses++;
      }
    }
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static void forget_in(tstor__hostcache *c, tstor__treap_node *n, void *stream) {
  if (!n) return;
  forget_in(c, n->left, stream);
  forget_in(c, n->right, stream);
  hblock *b = TSTOR__TREAP_ENTRY(n, hblock, by_addr);
  int j = 0;
  for (int i = 0; i < b->nuses; i++) {
    if (b->uses[i].stream == stream) {
      c->raw.event_synchronize(c->raw.ctx, b->uses[i].event); /* done: the stream is idle */
      c->raw.event_release(c->raw.ctx, b->uses[i].event);
    } else {
      b->uses[j++] = b->uses[i];
    }
  }
  b->nuses = j;
}

void tstor__hostcache_forget_stream(tstor__hostcache *c, void *stream) {
  pthread_mutex_lock(&c->lock);
  forget_in(c, c->blocks, stream);
  process_pending(c, 0);
  pthread_mutex_unlock(&c->lock);
}

int tstor__hostcache_empty(tstor__hostcache *c) {
  pthread_mutex_lock(&c->lock);
  process_pending(c, 0);
  release_free(c);
  pthread_mutex_unlock(&c->lock);
  return 0;
}

void tstor__hostcache_stats(tstor__hostcache *c, tstor_stats *out) {
  pthread_mutex_lock(&c->lock);
  tstor_stats_copy(out, &c->stats); /* only what the caller's struct holds */
  pthread_mutex_unlock(&c->lock);
}

void tstor__hostcache_reset_peak(tstor__hostcache *c) {
  pthread_mutex_lock(&c->lock);
  tstor_stats_reset_peaks(&c->stats);
  pthread_mutex_unlock(&c->lock);
}

int tstor__hostcache_create(const tstor__raw_device *raw, const char *name, int caching,
                            tstor__hostcache **out) {
  *out = NULL;
  tstor__hostcache *c = calloc(1, sizeof *c);
  if (!c || pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c);
    return raw->set_error(TSTOR_ENOMEM, "no memory for the pinned allocator");
  }
  c->raw = *raw;
  c->caching = caching;
  snprintf(c->name, sizeof c->name, "%s", name ? name : "cuda-pinned");
  *out = c;
  return 0;
}

void tstor__hostcache_destroy(tstor__hostcache *c) {
  if (!c) return;
  tstor__treap_node *n;
  while ((n = tstor__treap_first(c->blocks)) != NULL) {
    hblock *b = TSTOR__TREAP_ENTRY(n, hblock, by_addr);
    prune_uses(c, b, 1);
    for (int i = 0; i < b->nuses; i++) c->raw.event_release(c->raw.ctx, b->uses[i].event);
    destroy_block(c, b);
  }
  pthread_mutex_destroy(&c->lock);
  free(c);
}
