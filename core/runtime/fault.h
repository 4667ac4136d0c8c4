/* Fault injection: making the Nth allocation (or mmap, shm_open, dlopen) fail,
 * so that tests can walk every error path of an operation and check that each
 * one returns the right code, leaves its objects as they were and leaks
 * nothing. Never installed, and never exported from libtstor.so, whose ABI is
 * the tstor_* functions of the installed headers (tests/exports.sh): the
 * suites that arm faults link the core's objects statically, from the
 * test-only convenience library libtstor_test.la (core/Makefile.am).
 *
 * Every place that acquires a resource which may run out asks
 * tstor__fault_should_fail(kind) first and, when told to, fails exactly as
 * the real call would (NULL, MAP_FAILED, -1) with errno set. The core asks
 * for its own allocations (core/runtime/memory.c) and for dlopen (core/runtime/loader.c);
 * backends, which do not link the core, ask through the registrar's
 * should_fail field (the cpu backend for its state, blocks, mappings and
 * shared memory). Kinds are the TSTOR_FAULT_* bits of tstor/backend.h.
 *
 * While nothing is armed the check is one relaxed atomic load. */
#ifndef TSTOR_FAULT_H
#define TSTOR_FAULT_H

#include <stdatomic.h>

#include <tstor/backend.h>

/* Counts acquisitions of the kinds in `kinds` from now on and fails the
 * `nth` of them (1-based); with `persist`, every later one fails too. nth 0
 * counts without failing anything. Resets every counter below. Not meant to
 * be called while another thread is inside the library. */
void tstor__fault_arm(unsigned kinds, unsigned long nth, int persist);
/* Stops counting and failing; the counters keep their values until the next
 * arm. */
void tstor__fault_disarm(void);
/* Acquisitions of armed kinds seen since the last arm (failed ones included). */
unsigned long tstor__fault_seen(void);
/* How many were failed, and their kinds (TSTOR_FAULT_* bits; 0 when none). */
unsigned long tstor__fault_failed(void);
unsigned tstor__fault_failed_kinds(void);
/* The core's own allocations minus its frees while armed: 0 after an
 * operation that failed and cleaned up, whatever the allocator. */
long tstor__fault_live(void);

/* Nonzero when this acquisition of `kind` must fail; sets errno to what the
 * real call would (ENOMEM, EMFILE). Also the registrar's should_fail. */
int tstor__fault_should_fail(int kind);

extern atomic_uint tstor__fault_kinds;
extern atomic_long tstor__fault_live_count;

/* For core/runtime/memory.c: counts the core's allocations (+1) and frees (-1) while
 * armed. */
static inline void tstor__fault_note(long delta) {
  if (atomic_load_explicit(&tstor__fault_kinds, memory_order_relaxed))
    atomic_fetch_add_explicit(&tstor__fault_live_count, delta, memory_order_relaxed);
}

static inline int tstor__fault_check(int kind) {
  if (atomic_load_explicit(&tstor__fault_kinds, memory_order_relaxed) == 0) return 0;
  return tstor__fault_should_fail(kind);
}

#endif /* TSTOR_FAULT_H */
