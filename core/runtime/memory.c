/* The core's own allocations (bookkeeping, not storage bytes, which come from
 * backends) all pass through here, so there is one place to count and fail
 * them (fault.h). */
#include "internal.h"

#include "runtime/fault.h"
#include "runtime/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *tstor__malloc(size_t n) {
  if (tstor__fault_check(TSTOR_FAULT_MALLOC)) return NULL;
  void *p = malloc(n ? n : 1);
  if (p) tstor__fault_note(1);
  return p;
}

void *tstor__calloc(size_t count, size_t n) {
  if (tstor__fault_check(TSTOR_FAULT_MALLOC)) return NULL;
  void *p = calloc(count ? count : 1, n ? n : 1);
  if (p) tstor__fault_note(1);
  return p;
}

void *tstor__realloc(void *p, size_t n) {
  if (tstor__fault_check(TSTOR_FAULT_MALLOC)) return NULL;
  void *q = realloc(p, n ? n : 1);
  if (q && !p) tstor__fault_note(1);
  return q;
}

void tstor__free(void *p) {
  if (p) tstor__fault_note(-1);
  free(p);
}

char *tstor__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = tstor__malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

char *tstor__asprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *s = tstor__malloc((size_t)n + 1);
  if (!s) return NULL;
  va_start(ap, fmt);
  vsnprintf(s, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

/* ------------------------------------------------------------------ pools */

#if !defined(TSTOR__POOL_UNDER_ASAN)
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

_Thread_local tstor__pool_set tstor__pools;

static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static int pool_key_ok;

static void pool_drain(void *unused) {
  (void)unused;
  for (int p = 0; p < TSTOR__NPOOLS; p++)
    while (tstor__pools.count[p] > 0) free(tstor__pools.blocks[p][--tstor__pools.count[p]]);
  tstor__pools.registered = -1;
}

/* The key's destructor runs in each exiting thread, and glibc may have
 * started it when another thread unloads libtstor: pthread_key_delete does
 * not wait for it. So, as the cpu module does for its thread caches (its
 * cache.c says more), libtstor pins itself (RTLD_NODELETE) before the first
 * pool can hold anything; a library that cannot be pinned keeps no pools. */
static void pool_key_make(void) {
  Dl_info info;
  struct link_map *map = NULL;
  if (!dladdr1((void *)pool_drain, &info, (void **)&map, RTLD_DL_LINKMAP) || !map) return;
  /* Linked into the program itself (the suites' libtstor_test), the code
   * cannot go away: only a shared library needs the pin. */
  if (map->l_name[0] != '\0') {
    void *self = dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
    if (!self) return;
    dlclose(self); /* drops this handle's reference; RTLD_NODELETE stays */
  }
  pool_key_ok = pthread_key_create(&pool_key, pool_drain) == 0;
}

/* The thread that ends the process runs no key destructor: its pools are
 * emptied here, so that leak checkers see every block go. */
__attribute__((destructor)) static void pool_fini(void) { pool_drain(NULL); }

void *tstor__pool_get_slow(size_t size) { return tstor__malloc(size); }

/* Once per thread, from a thread that has not asked yet: without the key a
 * thread's pool would leak at its exit, so a thread that cannot register
 * frees instead. */
static int pool_register(tstor__pool_set *ps) {
  pthread_once(&pool_once, pool_key_make);
  if (!pool_key_ok || pthread_setspecific(pool_key, ps) != 0) return 0;
  ps->registered = 1;
  return 1;
}

void tstor__pool_put_slow(int pool, void *p) {
  if (!p) return;
  tstor__pool_set *ps = &tstor__pools;
  int n = ps->count[pool];
  if (n < TSTOR__POOL_DEPTH &&
      atomic_load_explicit(&tstor__fault_kinds, memory_order_relaxed) == 0 &&
      ps->registered == 0 && pool_register(ps)) {
    ps->blocks[pool][n] = p;
    ps->count[pool] = n + 1;
    return;
  }
  tstor__free(p);
}
#endif
