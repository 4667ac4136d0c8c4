#include "cuda_fake_device.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *fake_last_error(void) { return last_error; }

static int fake_set_error(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return code;
}

typedef struct fake_event {
  fake_stream *stream;
  uint64_t target;
} fake_event;

static fake_stream *stream_of(fake_device *f, void *s) {
  return s ? (fake_stream *)s : &f->default_stream;
}

static int fake_alloc(void *ctx, size_t n, void **out) {
  fake_device *f = ctx;
  pthread_mutex_lock(&f->lock);
  int rc = 0;
  if (f->fail_alloc) {
    rc = fake_set_error(f->fail_alloc, "fake device: injected failure");
  } else if (n > f->capacity - f->used) {
    rc = TSTOR_ENOMEM;
  } else if (f->nlive == f->cap_live) {
    int cap = f->cap_live ? 2 * f->cap_live : 64;
    void *p = realloc(f->live, (size_t)cap * sizeof *f->live);
    if (!p) rc = TSTOR_ENOMEM;
    else {
      f->live = p;
      f->cap_live = cap;
    }
  }
  if (rc == 0) {
    uintptr_t a = f->next_addr;
    /* A gap after every allocation: neighbours never look contiguous. */
    f->next_addr += ((n + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1)) + (2u << 20);
    f->live[f->nlive].addr = a;
    f->live[f->nlive].size = n;
    f->nlive++;
    f->used += n;
    f->allocs++;
    *out = (void *)a;
  }
  pthread_mutex_unlock(&f->lock);
  return rc;
}

static void fake_free(void *ctx, void *ptr) {
  fake_device *f = ctx;
  pthread_mutex_lock(&f->lock);
  int i = 0;
  while (i < f->nlive && f->live[i].addr != (uintptr_t)ptr) i++;
  if (i == f->nlive) {
    f->bad_frees++;
  } else {
    f->used -= f->live[i].size;
    f->live[i] = f->live[--f->nlive];
    f->frees++;
  }
  pthread_mutex_unlock(&f->lock);
}

static int fake_mem_info(void *ctx, size_t *free_b, size_t *total_b) {
  fake_device *f = ctx;
  if (f->no_mem_info) return TSTOR_ENOTSUP;
  pthread_mutex_lock(&f->lock);
  *free_b = f->capacity - f->used;
  *total_b = f->total ? f->total : f->capacity;
  pthread_mutex_unlock(&f->lock);
  return 0;
}

static int fake_event_record(void *ctx, void *stream, void **out) {
  fake_device *f = ctx;
  if (f->fail_event_record) return fake_set_error(f->fail_event_record, "fake: no event");
  fake_event *e = malloc(sizeof *e);
  if (!e) return TSTOR_ENOMEM;
  pthread_mutex_lock(&f->lock);
  e->stream = stream_of(f, stream);
  e->target = e->stream->queued;
  f->live_events++;
  pthread_mutex_unlock(&f->lock);
  *out = e;
  return 0;
}

static int fake_event_query(void *ctx, void *event) {
  fake_device *f = ctx;
  fake_event *e = event;
  pthread_mutex_lock(&f->lock);
  int rc = e->stream->done >= e->target ? 0 : TSTOR_EAGAIN;
  pthread_mutex_unlock(&f->lock);
  return rc;
}

static int fake_event_synchronize(void *ctx, void *event) {
  fake_device *f = ctx;
  fake_event *e = event;
  pthread_mutex_lock(&f->lock);
  if (e->stream->done < e->target) e->stream->done = e->target;
  pthread_mutex_unlock(&f->lock);
  return 0;
}

static void fake_event_release(void *ctx, void *event) {
  fake_device *f = ctx;
  pthread_mutex_lock(&f->lock);
  f->live_events--;
  pthread_mutex_unlock(&f->lock);
  free(event);
}

static int fake_synchronize(void *ctx) {
  fake_device *f = ctx;
  pthread_mutex_lock(&f->lock);
  f->syncs++;
  f->default_stream.done = f->default_stream.queued;
  for (int i = 0; i < f->nstreams; i++) f->streams[i]->done = f->streams[i]->queued;
  pthread_mutex_unlock(&f->lock);
  return 0;
}

void fake_init(fake_device *f, size_t capacity) {
  memset(f, 0, sizeof *f);
  pthread_mutex_init(&f->lock, NULL);
  f->capacity = capacity;
  f->next_addr = (uintptr_t)1 << 40;
}

int fake_fini(fake_device *f) {
  int n = f->nlive;
  free(f->live);
  pthread_mutex_destroy(&f->lock);
  return n;
}

tstor__raw_device fake_raw(fake_device *f) {
  tstor__raw_device r = {f,
                         fake_alloc,
                         fake_free,
                         fake_mem_info,
                         fake_event_record,
                         fake_event_query,
                         fake_event_synchronize,
                         fake_event_release,
                         fake_synchronize,
                         fake_set_error};
  return r;
}

void fake_add_stream(fake_device *f, fake_stream *s) { f->streams[f->nstreams++] = s; }

void fake_queue(fake_device *f, fake_stream *s) {
  pthread_mutex_lock(&f->lock);
  stream_of(f, s)->queued++;
  pthread_mutex_unlock(&f->lock);
}

void fake_finish(fake_device *f, fake_stream *s) {
  pthread_mutex_lock(&f->lock);
  fake_stream *st = stream_of(f, s);
  st->done = st->queued;
  pthread_mutex_unlock(&f->lock);
}
