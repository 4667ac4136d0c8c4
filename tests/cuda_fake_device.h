/* A simulated device for the cuda backend's allocator suites: it hands out
 * addresses from a private range (never memory: the caches do not touch the
 * bytes), enforces a capacity, and has streams whose queued work completes
 * only when the test says so. It checks every free and counts live events, so
 * that the suites catch double frees and leaks. Single-threaded except where
 * a test takes fake->lock. */
#ifndef TSTOR_TEST_CUDA_FAKE_DEVICE_H
#define TSTOR_TEST_CUDA_FAKE_DEVICE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "raw_device.h"

typedef struct fake_stream {
  uint64_t queued; /* work items submitted */
  uint64_t done;   /* work items finished */
} fake_stream;

typedef struct fake_device {
  pthread_mutex_t lock;
  size_t capacity, used, total; /* total: what mem_info reports (capacity unless set) */
  uintptr_t next_addr;
  struct { uintptr_t addr; size_t size; } *live;
  int nlive, cap_live;
  long allocs, frees, syncs, bad_frees, live_events;
  int fail_alloc;        /* non-zero: alloc returns this code */
  int fail_event_record; /* non-zero: event_record returns this code */
  int no_mem_info;
  fake_stream default_stream;
  fake_stream *streams[16]; /* what synchronize completes, besides the default */
  int nstreams;
} fake_device;

void fake_init(fake_device *f, size_t capacity);
/* Frees the bookkeeping; returns the number of allocations still live. */
int fake_fini(fake_device *f);
/* The raw-device table over f. */
tstor__raw_device fake_raw(fake_device *f);
void fake_add_stream(fake_device *f, fake_stream *s);

/* Simulated work: queue an item on a stream (NULL: default), finish all of it. */
void fake_queue(fake_device *f, fake_stream *s);
void fake_finish(fake_device *f, fake_stream *s);

/* The detail of the last set_error on this thread. */
const char *fake_last_error(void);

#endif
