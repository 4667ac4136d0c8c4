/* The cpu backend's large blocks: those past the per-thread cache's largest
 * size class (CPU_CACHE_MAX_BLOCK).
 *
 * Blocks of 2 MiB and more are whole 2 MiB pages mapped on their own and
 * advised for transparent huge pages (MADV_HUGEPAGE), as c10's allocator does
 * when asked to, so a large storage faults in 512 times fewer pages; smaller
 * ones come from aligned_alloc.
 *
 * A freed large block is kept in its context's cache, shared by all threads
 * (a block freed on another thread than the one that allocated it is as good),
 * and handed out again for a request of the same rounded size, so a loop that
 * allocates, fills and frees a large storage pays for its page faults once.
 * The cache holds at most `max_bytes`; the least recently freed blocks go back
 * to the system to make room, when they have been idle `max_age_ms`
 * milliseconds (a reaper thread, started with the first cached block, sleeps
 * until then), and when the cache is emptied or closed.
 *
 * Threading: every call may run concurrently with the others on the same
 * cache, except close, which must come after the last. */
#ifndef TSTOR_CPU_LARGE_H
#define TSTOR_CPU_LARGE_H

#include <stddef.h>

/* Blocks from this size up are whole huge pages (2 MiB on x86-64). */
#define CPU_LARGE_HUGE ((size_t)2 << 20)

typedef struct cpu_large cpu_large;

/* Opens a cache holding at most max_bytes (0: none kept) for max_age_ms; the
 * caller owns it and closes it with cpu_large_close. 0 or TSTOR_ENOMEM. */
int cpu_large_open(size_t max_bytes, unsigned long max_age_ms, cpu_large **out);
/* Stops the reaper and gives every cached block back to the system. NULL is
 * allowed. */
void cpu_large_close(cpu_large *l);

/* The block size for a request of nbytes (past CPU_CACHE_MAX_BLOCK): whole
 * huge pages from CPU_LARGE_HUGE up, whole 64-byte lines below. 0 on
 * overflow. */
size_t cpu_large_block(size_t nbytes);
/* A cached block of exactly `block` bytes, which the caller then owns, or
 * NULL. l may be NULL (no cache). */
void *cpu_large_take(cpu_large *l, size_t block);
/* A new block of `block` bytes from the system, or NULL. */
void *cpu_large_new(size_t block);
/* Takes back a block of `block` bytes: cached when l has room (after giving
 * back its oldest blocks where needed), else returned to the system. */
void cpu_large_give(cpu_large *l, void *p, size_t block);
/* Returns every cached block to the system. l may be NULL. */
void cpu_large_empty(cpu_large *l);
/* Bytes held in the cache now. l may be NULL. */
size_t cpu_large_cached(cpu_large *l);

#endif /* TSTOR_CPU_LARGE_H */
