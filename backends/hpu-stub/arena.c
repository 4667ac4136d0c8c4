/* The device allocator: each device's range is one arena, cut into blocks kept
 * in address order. Allocation takes the first free block that fits and splits
 * it; free merges a block with free neighbours. A block that a stream may still
 * use (record_stream) is deferred on free and comes back once the stream has
 * passed the point where it was freed: the rule CUDA's caching allocator keeps
 * with events. */
#include "hpu_stub.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t round_up(size_t n) { return (n + HPU_ALIGN - 1) & ~(HPU_ALIGN - 1); }

static void list_push(hpu_block **head, hpu_block *b) {
  b->lprev = NULL;
  b->lnext = *head;
  if (*head) (*head)->lprev = b;
  *head = b;
}

static void list_remove(hpu_block **head, hpu_block *b) {
  if (b->lprev)
    b->lprev->lnext = b->lnext;
  else
    *head = b->lnext;
  if (b->lnext) b->lnext->lprev = b->lprev;
  b->lprev = b->lnext = NULL;
}

int hpu_arena_init(hpu_arena *a, size_t capacity) {
  memset(a, 0, sizeof *a);
  hpu_block *all = calloc(1, sizeof *all);
  if (!all) return TSTOR_ENOMEM;
  if (pthread_mutex_init(&a->mu, NULL) != 0) {
    free(all);
    return TSTOR_ENOMEM;
  }
  a->capacity = capacity;
  all->size = capacity;
  a->blocks = all;
  list_push(&a->free_list, all);
  return 0;
}

static void fences_free(hpu_fence *f) {
  while (f) {
    hpu_fence *next = f->next;
    hpu_timeline_release(f->timeline);
    free(f);
    f = next;
  }
}

/* Drops the fences the streams have passed; true when none is left. */
static int fences_passed(hpu_block *b) {
  hpu_fence **link = &b->fences;
  while (*link) {
    hpu_fence *f = *link;
    if (hpu_timeline_reached(f->timeline, f->seq)) {
      *link = f->next;
      hpu_timeline_release(f->timeline);
      free(f);
    } else {
      link = &f->next;
    }
  }
  return b->fences == NULL;
}

/* Returns a block to the free list, merged with free neighbours. Under a->mu. */
static void release_block(hpu_arena *a, hpu_block *b) {
  a->stats.active -= b->size;
  a->stats.reserved -= b->size;
  b->in_use = 0;
  b->requested = 0;
  hpu_block *next = b->next;
  if (next && !next->in_use) {
    list_remove(&a->free_list, next);
    b->size += next->size;
    b->next = next->next;
    if (b->next) b->next->prev = b;
    free(next);
  }
  hpu_block *prev = b->prev;
  if (prev && !prev->in_use) {
    prev->size += b->size;
    prev->next = b->next;
    if (prev->next) prev->next->prev = prev;
    free(b);
    return; /* prev is on the free list already */
  }
  list_push(&a->free_list, b);
}

/* Gives back the deferred blocks whose streams have moved on; with `wait`, waits
 * for all of them first. Under a->mu: workers never take it, so waiting here
 * cannot deadlock with them. */
static int reclaim_deferred(hpu_arena *a, int wait) {
  int reclaimed = 0;
  hpu_block *b = a->deferred;
  while (b) {
    hpu_block *next = b->lnext;
    if (wait)
      for (hpu_fence *f = b->fences; f; f = f->next) hpu_timeline_wait(f->timeline, f->seq);
    if (fences_passed(b)) {
      list_remove(&a->deferred, b);
      release_block(a, b);
      reclaimed = 1;
    }
    b = next;
  }
  return reclaimed;
}

static hpu_block *first_fit(hpu_arena *a, size_t size) {
  for (hpu_block *b = a->free_list; b; b = b->lnext) {
    if (b->size < size) continue;
    /* Without a record for the rest, the block goes out whole. */
    hpu_block *rest = b->size - size >= HPU_ALIGN ? calloc(1, sizeof *rest) : NULL;
    if (rest) {
      rest->offset = b->offset + size;
      rest->size = b->size - size;
      rest->prev = b;
      rest->next = b->next;
      if (rest->next) rest->next->prev = rest;
      b->next = rest;
      b->size = size;
      list_push(&a->free_list, rest);
    }
    list_remove(&a->free_list, b);
    b->in_use = 1;
    return b;
  }
  return NULL;
}

static size_t largest_free(const hpu_arena *a) {
  size_t best = 0;
  for (const hpu_block *b = a->free_list; b; b = b->lnext)
    if (b->size > best) best = b->size;
  return best;
}

static int out_of_memory(hpu_stub *stub, int index, size_t nbytes, const char *why) {
  hpu_arena *a = &stub->devices[index].arena;
  a->stats.oom_count++;
  return HPU_ERROR(stub, TSTOR_ENOMEM,
                   "hpu:%d: out of memory allocating %zu bytes: %s (%llu of %zu bytes in use, "
                   "largest free block %zu bytes)",
                   index, nbytes, why, (unsigned long long)a->stats.reserved, a->capacity,
                   largest_free(a));
}

int hpu_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out) {
  hpu_stub *stub = state;
  (void)stream; /* one arena serves every stream; record_stream covers reuse */
  if (index < 0 || index >= stub->ndevices)
    return HPU_ERROR(stub, TSTOR_ENODEV, "hpu:%d: no such device (%d present)", index,
                     stub->ndevices);
  hpu_arena *a = &stub->devices[index].arena;

  long long call = atomic_fetch_add(&stub->alloc_calls, 1) + 1;
  if (call == stub->fail_alloc_nth) {
    pthread_mutex_lock(&a->mu);
    a->stats.oom_count++;
    pthread_mutex_unlock(&a->mu);
    return HPU_ERROR(stub, TSTOR_ENOMEM,
                     "hpu:%d: injected allocation failure (fail_alloc_nth = %lld) for %zu bytes",
                     index, call, nbytes);
  }

  out->ptr = NULL;
  out->alloc_ctx = NULL;
  pthread_mutex_lock(&a->mu);
  if (nbytes == 0) { /* nothing to hand out: no address, no block */
    a->stats.alloc_count++;
    pthread_mutex_unlock(&a->mu);
    return 0;
  }
  if (nbytes > a->capacity) {
    int rc = out_of_memory(stub, index, nbytes, "larger than the device");
    pthread_mutex_unlock(&a->mu);
    return rc;
  }
  size_t size = round_up(nbytes);
  reclaim_deferred(a, 0);
  hpu_block *b = first_fit(a, size);
  if (!b && a->deferred) {
    reclaim_deferred(a, 1);
    b = first_fit(a, size);
    if (b) a->stats.retries++;
  }
  if (!b) {
    int rc = out_of_memory(stub, index, nbytes, "no free block large enough");
    pthread_mutex_unlock(&a->mu);
    return rc;
  }
  b->requested = nbytes;
  a->stats.allocated += nbytes;
  a->stats.active += b->size;
  a->stats.reserved += b->size;
  a->stats.alloc_count++;
  tstor_stats_note_peaks(&a->stats);
  pthread_mutex_unlock(&a->mu);

  out->ptr = stub->devices[index].base + b->offset;
  out->alloc_ctx = b;
  return 0;
}

void hpu_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  hpu_stub *stub = state;
  hpu_arena *a = &stub->devices[index].arena;
  hpu_block *b = alloc_ctx;
  pthread_mutex_lock(&a->mu);
  a->stats.free_count++;
  if (!b) { /* a zero-byte allocation */
    pthread_mutex_unlock(&a->mu);
    return;
  }
  if (ptr != stub->devices[index].base + b->offset || nbytes != b->requested)
    stub->reg->log(stub->module, TSTOR_LOG_ERROR,
                   "hpu:%d: free(%p, %zu) does not match the block handed out (%p, %zu)", index,
                   ptr, nbytes, (void *)(stub->devices[index].base + b->offset), b->requested);
  a->stats.allocated -= b->requested;
  /* Work queued on the recorded streams up to now may still touch the block. */
  for (hpu_fence *f = b->fences; f; f = f->next) f->seq = atomic_load(&f->timeline->enqueued);
  if (fences_passed(b))
    release_block(a, b);
  else
    list_push(&a->deferred, b);
  pthread_mutex_unlock(&a->mu);
}

int hpu_record_stream(void *state, int index, void *ptr, void *alloc_ctx, void *stream) {
  hpu_stub *stub = state;
  hpu_stream *s = stream;
  hpu_block *b = alloc_ctx;
  (void)ptr;
  if (!b || !s) return 0;
  int rc = hpu_check_process(stub, index, "record_stream");
  if (rc) return rc;
  hpu_arena *a = &stub->devices[index].arena;
  pthread_mutex_lock(&a->mu);
  for (hpu_fence *f = b->fences; f; f = f->next)
    if (f->timeline == s->timeline) {
      pthread_mutex_unlock(&a->mu);
      return 0;
    }
  hpu_fence *f = calloc(1, sizeof *f);
  if (!f) {
    pthread_mutex_unlock(&a->mu);
    return HPU_ERROR(stub, TSTOR_ENOMEM, "hpu:%d: record_stream: out of host memory", index);
  }
  f->timeline = hpu_timeline_retain(s->timeline);
  f->next = b->fences;
  b->fences = f;
  pthread_mutex_unlock(&a->mu);
  return 0;
}

int hpu_stats(void *state, int index, tstor_stats *out) {
  hpu_stub *stub = state;
  hpu_arena *a = &stub->devices[index].arena;
  pthread_mutex_lock(&a->mu);
  tstor_stats_copy(out, &a->stats); /* only what the core's struct holds */
  pthread_mutex_unlock(&a->mu);
  return 0;
}

int hpu_reset_peak(void *state, int index) {
  hpu_stub *stub = state;
  hpu_arena *a = &stub->devices[index].arena;
  pthread_mutex_lock(&a->mu);
  tstor_stats_reset_peaks(&a->stats);
  pthread_mutex_unlock(&a->mu);
  return 0;
}

/* What the device has (backend.h's properties op): its capacity, what no
 * block holds (deferred blocks still count as held), the largest free block,
 * and an id that names the same simulated device in every process. */
int hpu_properties(void *state, int index, tstor_device_properties *out) {
  hpu_stub *stub = state;
  hpu_arena *a = &stub->devices[index].arena;
  pthread_mutex_lock(&a->mu);
  reclaim_deferred(a, 0);
  uint64_t total = a->capacity, held = a->stats.reserved, largest = largest_free(a);
  pthread_mutex_unlock(&a->mu);
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, free_bytes)) {
    out->free_bytes = total - held;
    out->reported |= TSTOR_PROP_FREE;
  }
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, total_bytes)) {
    out->total_bytes = total;
    out->reported |= TSTOR_PROP_TOTAL;
  }
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, alignment)) {
    out->alignment = HPU_ALIGN;
    out->reported |= TSTOR_PROP_ALIGNMENT;
  }
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, max_allocation)) {
    out->max_allocation = largest;
    out->reported |= TSTOR_PROP_MAX_ALLOCATION;
  }
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, id)) {
    snprintf(out->id, sizeof out->id, "hpu-stub:%d", index);
    out->reported |= TSTOR_PROP_ID;
  }
  return 0;
}

/* The arena caches nothing; what waits is the deferred blocks. */
int hpu_empty_cache(void *state, int index) {
  hpu_stub *stub = state;
  hpu_arena *a = &stub->devices[index].arena;
  pthread_mutex_lock(&a->mu);
  reclaim_deferred(a, 0);
  pthread_mutex_unlock(&a->mu);
  return 0;
}

void hpu_arena_destroy(hpu_stub *stub, int index, hpu_arena *a) {
  if (!a->blocks) return;
  pthread_mutex_lock(&a->mu);
  reclaim_deferred(a, 1);
  pthread_mutex_unlock(&a->mu);
  if (a->stats.allocated != 0)
    stub->reg->log(stub->module, TSTOR_LOG_WARN,
                   "hpu:%d: unloaded with %llu bytes still allocated", index,
                   (unsigned long long)a->stats.allocated);
  hpu_block *b = a->blocks;
  while (b) {
    hpu_block *next = b->next;
    fences_free(b->fences);
    free(b);
    b = next;
  }
  a->blocks = NULL;
  pthread_mutex_destroy(&a->mu);
}
