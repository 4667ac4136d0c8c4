/* hpu-stub: a simulated accelerator, written against the installed tstor
 * headers only, as a third-party backend would be. This header is shared by
 * the backend's own files and is not installed.
 *
 * The pieces, one file each. A file calls (or takes the address of) functions
 * of its own layer and the layers above it only, never of a later one, so no
 * two files call each other round in a circle and each can be read knowing
 * only what is above it (tests/layering.py checks this in make check):
 *
 * layer 1: timeline.c
 * layer 2: arena.c pinned.c
 * layer 3: kernels.c
 * layer 4: stream.c
 * layer 5: copy.c
 * layer 6: module.c
 *
 *   timeline.c  a stream's progress: jobs queued and finished
 *   arena.c     per-device allocator: first fit over an address-ordered block
 *               list; frees deferred on timelines (record_stream)
 *   pinned.c    pinned host memory, registered for "cpu" (pinned_memory = yes)
 *   kernels.c   translating device addresses; the bodies of copy and fill
 *   stream.c    streams (a FIFO of kernels run by one worker thread each) and
 *               events, on timelines
 *   copy.c      the copy and fill ops: translate, then queue on a stream or run;
 *               batches: translate every span, then run them as one
 *   module.c    entry point, config keys, device setup, the op tables,
 *               registration (synchronize = wait for the streams, then give
 *               back the deferred frees: the one place streams meet the arena)
 * The sections of this header follow the same order.
 *
 * Device memory: every device reserves an address range with PROT_NONE and hands
 * out addresses inside it; the bytes themselves live in a second, ordinary
 * mapping at the same offset. A host dereference of a device pointer therefore
 * faults at once, and only the kernels (which translate) can reach the bytes. */
#ifndef HPU_STUB_H
#define HPU_STUB_H

/* mmap's MAP_ANONYMOUS and MAP_NORESERVE, under -std=c11 too. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <tstor/backend.h>

#define HPU_MAX_DEVICES 16
/* Allocation granularity and alignment, as CUDA's allocator gives. */
#define HPU_ALIGN ((size_t)256)

typedef struct hpu_stub hpu_stub;

/* -------------------------------------------------------------- timeline.c */

/* The progress of one stream, as two counters: jobs queued and jobs finished.
 * Events and deferred frees hold a reference on it and a sequence number, so
 * they stay meaningful after the stream itself is destroyed. */
typedef struct hpu_timeline {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic uint64_t enqueued; /* sequence number of the last queued job */
  uint64_t completed;        /* of the last finished job; under mu */
  int refs;                  /* under mu */
  unsigned generation;       /* hpu_fork_generation when made (see below) */
} hpu_timeline;

/* fork() copies the process, not its threads: in a child, the parent's
 * stream workers do not exist and a lock one of them held stays held. Every
 * fork bumps this counter in the child (a pthread_atfork handler), and the
 * stub, its streams' timelines and its events remember the value they were
 * made under. In a child, stream and event work of the parent's backend fails
 * with TSTOR_EBACKEND and says why (hpu_check_process), instead of waiting
 * forever; a new context opened in the child loads a backend of its own.
 * A parent's timeline counts as finished there: nothing will run its work,
 * so nothing touches the blocks it fenced. */
extern atomic_uint hpu_fork_generation;
static inline int hpu_timeline_dead(const hpu_timeline *t) {
  return t->generation != atomic_load_explicit(&hpu_fork_generation, memory_order_relaxed);
}

hpu_timeline *hpu_timeline_new(void);
hpu_timeline *hpu_timeline_retain(hpu_timeline *t);
void hpu_timeline_release(hpu_timeline *t);
int hpu_timeline_reached(hpu_timeline *t, uint64_t seq);
void hpu_timeline_wait(hpu_timeline *t, uint64_t seq);
/* Marks every job up to seq finished and wakes the waiters (the stream's worker). */
void hpu_timeline_advance(hpu_timeline *t, uint64_t seq);

/* ----------------------------------------------------------------- arena.c */

/* "This block may still be used by the work a stream had queued up to seq." */
typedef struct hpu_fence {
  hpu_timeline *timeline;
  uint64_t seq; /* 0 until the block is freed: then the stream's end at that time */
  struct hpu_fence *next;
} hpu_fence;

typedef struct hpu_block {
  size_t offset;    /* from the start of the device's range */
  size_t size;      /* rounded to HPU_ALIGN */
  size_t requested; /* what the core asked for (0 for free blocks) */
  int in_use;       /* handed out, or freed but deferred */
  struct hpu_block *prev, *next;   /* every block, in address order */
  struct hpu_block *lprev, *lnext; /* the free list, or the deferred list */
  hpu_fence *fences;               /* record_stream() marks */
} hpu_block;

typedef struct hpu_arena {
  pthread_mutex_t mu;
  size_t capacity;
  hpu_block *blocks;    /* address order; covers [0, capacity) */
  hpu_block *free_list; /* free blocks, most recently freed first */
  hpu_block *deferred;  /* freed by the core, still used by a stream */
  tstor_stats stats;
} hpu_arena;

int hpu_arena_init(hpu_arena *a, size_t capacity);
/* Releases the arena's records; logs through the stub when blocks leaked. */
void hpu_arena_destroy(hpu_stub *stub, int index, hpu_arena *a);

/* The allocator ops (tstor_allocator_ops), state = hpu_stub. */
int hpu_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out);
void hpu_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx);
int hpu_record_stream(void *state, int index, void *ptr, void *alloc_ctx, void *stream);
int hpu_stats(void *state, int index, tstor_stats *out);
int hpu_reset_peak(void *state, int index);
int hpu_empty_cache(void *state, int index);
/* The device ops' properties (since ABI 1.5), state = hpu_stub. */
int hpu_properties(void *state, int index, tstor_device_properties *out);

/* ---------------------------------------------------------------- pinned.c */

/* The pinned host allocator's ops (tstor_allocator_ops, registered for
 * "cpu"), state = hpu_stub; the index is the cpu's and is ignored. */
int hpu_pinned_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out);
void hpu_pinned_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx);
int hpu_pinned_stats(void *state, int index, tstor_stats *out);
int hpu_pinned_reset_peak(void *state, int index);

/* --------------------------------------------------------------- kernels.c */

/* *out = the host address of [ptr, ptr + nbytes) on device `index`; an error
 * (set) when the range is not inside that device's memory. */
int hpu_translate(hpu_stub *stub, int index, const void *ptr, size_t nbytes,
                  unsigned char **out);
/* What a job does: the simulated latency, then the bytes. */
void hpu_kernel_copy(hpu_stub *stub, void *dst, const void *src, size_t nbytes);
/* One copy of a batch, its addresses translated. */
typedef struct hpu_move {
  void *dst;
  const void *src;
  size_t nbytes;
} hpu_move;
/* A batch: one latency for all of it, as a device pays one launch for a list
 * of copies, then the bytes of each. */
void hpu_kernel_copy_many(hpu_stub *stub, const hpu_move *moves, size_t n);
void hpu_kernel_fill(hpu_stub *stub, void *dst, size_t nbytes, const void *pattern,
                     size_t pattern_size);
void hpu_kernel_copy_strided(hpu_stub *stub, unsigned char *to, const int64_t *dst_strides,
                             const unsigned char *from, const int64_t *src_strides,
                             const int64_t *sizes, int ndim, size_t element_size, size_t n);

/* ---------------------------------------------------------------- stream.c */

typedef struct hpu_job hpu_job;

typedef struct hpu_stream {
  hpu_stub *stub;
  int index; /* device */
  pthread_t worker;
  pthread_mutex_t mu; /* the queue */
  pthread_cond_t cv;
  hpu_job *head, *tail;
  int stopping;
  hpu_timeline *timeline;
  struct hpu_stream *prev, *next; /* the device's live streams */
} hpu_stream;

typedef struct hpu_event {
  pthread_mutex_t mu;
  hpu_timeline *timeline; /* NULL until recorded */
  uint64_t seq;
} hpu_event;

/* Queues a copy (memmove between host addresses, after copy_delay_us) or a
 * fill; the addresses are already translated. */
int hpu_stream_copy(hpu_stream *s, void *dst, const void *src, size_t nbytes);
int hpu_stream_fill(hpu_stream *s, void *dst, size_t nbytes, const void *pattern,
                    size_t pattern_size);

/* Waits until every live stream of device `index` has run what it was given. */
void hpu_streams_wait_idle(hpu_stub *stub, int index);

/* The device ops for streams and events, state = hpu_stub. */
int hpu_stream_create(void *state, int index, void **out);
void hpu_stream_destroy(void *state, int index, void *stream);
int hpu_stream_synchronize(void *state, int index, void *stream);
int hpu_stream_wait_event(void *state, int index, void *stream, void *event);
int hpu_event_create(void *state, int index, void **out);
void hpu_event_destroy(void *state, int index, void *event);
int hpu_event_record(void *state, int index, void *event, void *stream);
int hpu_event_query(void *state, int index, void *event);
int hpu_event_synchronize(void *state, int index, void *event);

/* ------------------------------------------------------------------ copy.c */

/* The copy kernels and fill the core calls (tstor_copy_fn, the fill op). */
int hpu_copy_to_device(void *state, void *dst, int dst_index, const void *src, int src_index,
                       size_t nbytes, void *stream);
int hpu_copy_to_host(void *state, void *dst, int dst_index, const void *src, int src_index,
                     size_t nbytes, void *stream);
int hpu_copy_on_device(void *state, void *dst, int dst_index, const void *src, int src_index,
                       size_t nbytes, void *stream);
/* The batched kernels (tstor_copy_batch_fn) of the same three pairs. */
int hpu_copy_batch_to_device(void *state, const tstor_copy_span *spans, size_t count,
                             size_t *failed);
int hpu_copy_batch_to_host(void *state, const tstor_copy_span *spans, size_t count, size_t *failed);
int hpu_copy_batch_on_device(void *state, const tstor_copy_span *spans, size_t count,
                             size_t *failed);
int hpu_copy_strided(void *state, int index, void *dst, const int64_t *dst_strides,
                     const void *src, const int64_t *src_strides, const int64_t *sizes, int ndim,
                     size_t element_size, void *stream);
int hpu_fill(void *state, int index, void *ptr, size_t nbytes, const void *pattern,
             size_t pattern_size, void *stream);

/* ---------------------------------------------------------------- module.c */

typedef struct hpu_device {
  unsigned char *base;    /* device addresses: reserved, PROT_NONE */
  unsigned char *backing; /* the bytes, at the same offsets */
  size_t capacity;
  hpu_arena arena;
  pthread_mutex_t streams_mu;
  hpu_stream *streams; /* live streams, for synchronize() */
} hpu_device;

struct hpu_stub {
  const tstor_registrar *reg;
  tstor_module *module;
  int ndevices;
  hpu_device devices[HPU_MAX_DEVICES];
  /* Fault injection, from the config. */
  long long fail_alloc_nth; /* 0: never */
  atomic_llong alloc_calls;
  long long copy_delay_us;
  unsigned fork_generation; /* hpu_fork_generation at init */
  /* Pinned host memory (pinned.c). */
  pthread_mutex_t pinned_mu;
  tstor_stats pinned_stats;
};

/* 0 in the process that loaded the backend; in a child forked from it,
 * TSTOR_EBACKEND with the reason (set_error). */
int hpu_check_process(hpu_stub *stub, int index, const char *what);
/* Registers the fork handler that bumps hpu_fork_generation, once per load;
 * 0 or the errno of pthread_atfork. */
int hpu_fork_watch(void);
static inline int hpu_forked(const hpu_stub *stub) {
  return stub->fork_generation !=
         atomic_load_explicit(&hpu_fork_generation, memory_order_relaxed);
}

int hpu_device_count(void *state);

/* The registrar's set_error, for the files that have no registrar at hand. */
#define HPU_ERROR(stub, code, ...) ((stub)->reg->set_error((code), __VA_ARGS__))

#endif /* HPU_STUB_H */
