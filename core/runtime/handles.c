/* The handles a caller may still close or free: contexts, streams and events.
 *
 * Closing or freeing one takes it out of this set first. A second close then
 * finds it missing and reports the misuse without reading the object, which
 * is freed by then: a mark kept inside the object would have to be read from
 * freed memory, itself undefined behaviour. As with free(), a stale pointer
 * that a new handle has since been given the address of names the new one. */
#include "runtime/fault.h"
#include "internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Open addressing, at most half full; NULL is empty. Never freed: a close
 * from another library's destructor at exit must still find its handle, and
 * a table reachable from here is no leak. */
static const void **slots;
static size_t cap, count;

static size_t slot_of(const void *h) {
  uint64_t x = (uint64_t)(uintptr_t)h; /* splitmix64's finaliser: pointers differ in the middle bits */
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return (size_t)(x ^ (x >> 31)) & (cap - 1);
}

static void put(const void *h) {
  size_t at = slot_of(h);
  while (slots[at]) at = (at + 1) & (cap - 1);
  slots[at] = h;
}

static int grow(void) {
  size_t old_cap = cap, new_cap = cap ? 2 * cap : 64;
  /* plain calloc, not counted as the core's (the table is never freed), but
   * failed on demand like every other acquisition (fault.h) */
  const void **old = slots, **fresh = NULL;
  if (!tstor__fault_check(TSTOR_FAULT_MALLOC)) fresh = calloc(new_cap, sizeof *fresh);
  if (!fresh) return TSTOR_ENOMEM;
  slots = fresh;
  cap = new_cap;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i]) put(old[i]);
  free(old);
  return 0;
}

int tstor__handle_add(const void *h) {
  pthread_mutex_lock(&lock);
  int rc = 2 * (count + 1) > cap ? grow() : 0;
  if (rc == 0) {
    put(h);
    count++;
  }
  pthread_mutex_unlock(&lock);
  return rc ? tstor__err(rc, "out of memory for the table of open handles") : 0;
}

int tstor__handle_remove(const void *h) {
  pthread_mutex_lock(&lock);
  int found = 0;
  if (cap) {
    size_t at = slot_of(h);
    while (slots[at] && slots[at] != h) at = (at + 1) & (cap - 1);
    if (slots[at] == h) {
      found = 1;
      count--;
      /* Backward-shift deletion: move up each later entry of the run that
       * belongs at or before the hole, so that no lookup stops early. */
      size_t hole = at;
      for (size_t next = (hole + 1) & (cap - 1); slots[next]; next = (next + 1) & (cap - 1)) {
        size_t home = slot_of(slots[next]);
        if (((next - home) & (cap - 1)) >= ((next - hole) & (cap - 1))) {
          slots[hole] = slots[next];
          hole = next;
        }
      }
      slots[hole] = NULL;
    }
  }
  pthread_mutex_unlock(&lock);
  return found;
}
