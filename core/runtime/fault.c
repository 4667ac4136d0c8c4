/* Fault injection (see fault.h): one countdown shared by every kind of
 * resource, so that a test can sweep N = 1, 2, ... over an operation without
 * knowing in what order it allocates, maps and loads. */
#include "internal.h"

#include "runtime/fault.h"

#include <errno.h>

atomic_uint tstor__fault_kinds;     /* armed kinds; 0 when disarmed */
static atomic_ulong fault_nth;      /* the acquisition to fail; 0 for none */
static atomic_int fault_persist;
static atomic_ulong fault_seen;
static atomic_ulong fault_failed;
static atomic_uint fault_kinds_failed;
atomic_long tstor__fault_live_count;

void tstor__fault_arm(unsigned kinds, unsigned long nth, int persist) {
  atomic_store(&tstor__fault_kinds, 0);
  atomic_store(&fault_nth, nth);
  atomic_store(&fault_persist, persist != 0);
  atomic_store(&fault_seen, 0);
  atomic_store(&fault_failed, 0);
  atomic_store(&fault_kinds_failed, 0);
  atomic_store(&tstor__fault_live_count, 0);
  atomic_store(&tstor__fault_kinds, kinds & TSTOR_FAULT_ALL);
}

void tstor__fault_disarm(void) { atomic_store(&tstor__fault_kinds, 0); }

unsigned long tstor__fault_seen(void) { return atomic_load(&fault_seen); }
unsigned long tstor__fault_failed(void) { return atomic_load(&fault_failed); }
unsigned tstor__fault_failed_kinds(void) { return atomic_load(&fault_kinds_failed); }
long tstor__fault_live(void) { return atomic_load(&tstor__fault_live_count); }

int tstor__fault_should_fail(int kind) {
  unsigned kinds = atomic_load_explicit(&tstor__fault_kinds, memory_order_relaxed);
  if (!(kinds & (unsigned)kind)) return 0;
  unsigned long n = atomic_fetch_add_explicit(&fault_seen, 1, memory_order_relaxed) + 1;
  unsigned long nth = atomic_load_explicit(&fault_nth, memory_order_relaxed);
  if (nth == 0 || n < nth || (n > nth && !atomic_load(&fault_persist))) return 0;
  atomic_fetch_add_explicit(&fault_failed, 1, memory_order_relaxed);
  atomic_fetch_or_explicit(&fault_kinds_failed, (unsigned)kind, memory_order_relaxed);
  errno = kind == TSTOR_FAULT_SHM ? EMFILE : ENOMEM;
  return 1;
}
