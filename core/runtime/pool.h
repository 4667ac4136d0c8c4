/* Per-thread pools of freed objects of one fixed size (storage objects, small
 * tensors), so that a create/release loop skips malloc and free.
 *
 * A block from tstor__pool_get is tstor__malloc's in every respect: it counts
 * and fails through the fault hooks (while a fault is armed the pools stand
 * aside altogether), its contents are undefined, and tstor__pool_put or
 * tstor__free both take it back. `size` must be the same for every call on a
 * pool. The pools are thread-local, so no locks or atomics: an object
 * released on another thread than the one that made it goes to the releasing
 * thread's pool. An exiting thread empties its pools (memory.c says how).
 * Without pools (ASan builds, which must see every free) these are
 * tstor__malloc and tstor__free.
 *
 * The common cases are inline: they are on every create and release. */
#ifndef TSTOR_POOL_H
#define TSTOR_POOL_H

#include "internal.h"

#include "runtime/fault.h"

enum { TSTOR__POOL_STORAGE, TSTOR__POOL_TENSOR, TSTOR__NPOOLS };

#if defined(__SANITIZE_ADDRESS__)
#define TSTOR__POOL_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) /* clang's way of saying it */
#define TSTOR__POOL_UNDER_ASAN 1
#endif
#endif

#if defined(TSTOR__POOL_UNDER_ASAN)
static inline void *tstor__pool_get(int pool, size_t size) {
  (void)pool;
  return tstor__malloc(size);
}
static inline void tstor__pool_put(int pool, void *p) {
  (void)pool;
  tstor__free(p);
}
#else
#define TSTOR__POOL_DEPTH 8

typedef struct tstor__pool_set {
  void *blocks[TSTOR__NPOOLS][TSTOR__POOL_DEPTH];
  int count[TSTOR__NPOOLS];
  /* 1: the thread key's destructor will empty the pools at thread exit; 0:
   * not yet asked; -1: emptied for good (the thread or the process is ending,
   * and whatever is released from now on goes straight back to malloc). */
  int registered;
} tstor__pool_set;

extern _Thread_local tstor__pool_set tstor__pools;

/* The slow paths (memory.c): an empty pool, a full one, a first put. */
void *tstor__pool_get_slow(size_t size);
void tstor__pool_put_slow(int pool, void *p);

static inline void *tstor__pool_get(int pool, size_t size) {
  tstor__pool_set *ps = &tstor__pools;
  int n = ps->count[pool];
  if (TSTOR__LIKELY(n > 0) &&
      atomic_load_explicit(&tstor__fault_kinds, memory_order_relaxed) == 0) {
    ps->count[pool] = n - 1;
    return ps->blocks[pool][n - 1];
  }
  return tstor__pool_get_slow(size);
}

static inline void tstor__pool_put(int pool, void *p) {
  tstor__pool_set *ps = &tstor__pools;
  int n = ps->count[pool];
  if (TSTOR__LIKELY(p != NULL && n < TSTOR__POOL_DEPTH && ps->registered > 0) &&
      atomic_load_explicit(&tstor__fault_kinds, memory_order_relaxed) == 0) {
    ps->blocks[pool][n] = p;
    ps->count[pool] = n + 1;
    return;
  }
  tstor__pool_put_slow(pool, p);
}
#endif

#endif /* TSTOR_POOL_H */
