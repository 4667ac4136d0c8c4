/* Streams and events. Each stream is a FIFO of jobs run in order by its own
 * worker thread, the way a hardware queue runs commands; the caller returns as
 * soon as a job is queued. A stream's timeline (timeline.c) counts queued and
 * finished jobs, so an event is just (timeline, sequence number): recording it
 * is reading the queued count, querying it is comparing with the finished
 * count. The jobs themselves are kernels.c's.
 *
 * backends/remote/stream.c is a deliberate twin of this engine (a worker
 * thread per stream, timelines, events as (timeline, count)), with failures
 * that stop a stream added: hpu-stub stays a self-contained template that
 * authors copy whole, so the two are kept apart rather than shared through
 * the kit. A fix to one belongs in the other. */
#include "hpu_stub.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------- jobs */

typedef enum { JOB_COPY, JOB_FILL, JOB_WAIT } job_kind;

struct hpu_job {
  job_kind kind;
  uint64_t seq;
  void *dst;
  const void *src;
  size_t nbytes;
  unsigned char pattern[16];
  size_t pattern_size;
  hpu_timeline *wait_for; /* JOB_WAIT: a reference, dropped when done */
  uint64_t wait_seq;
  hpu_job *next;
};

static void job_run(hpu_stub *stub, hpu_job *j) {
  switch (j->kind) {
  case JOB_COPY:
    hpu_kernel_copy(stub, j->dst, j->src, j->nbytes);
    break;
  case JOB_FILL:
    hpu_kernel_fill(stub, j->dst, j->nbytes, j->pattern, j->pattern_size);
    break;
  case JOB_WAIT:
    hpu_timeline_wait(j->wait_for, j->wait_seq);
    hpu_timeline_release(j->wait_for);
    break;
  }
}

static void *worker_main(void *arg) {
  hpu_stream *s = arg;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    while (!s->head && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
    hpu_job *j = s->head;
    if (!j) { /* stopping, and the queue is drained */
      pthread_mutex_unlock(&s->mu);
      return NULL;
    }
    s->head = j->next;
    if (!s->head) s->tail = NULL;
    pthread_mutex_unlock(&s->mu);

    job_run(s->stub, j);
    hpu_timeline_advance(s->timeline, j->seq);
    free(j);
  }
}

/* Takes ownership of j. Sequence numbers are handed out under the queue lock,
 * so they follow queue order. */
static void enqueue(hpu_stream *s, hpu_job *j) {
  pthread_mutex_lock(&s->mu);
  j->seq = atomic_load(&s->timeline->enqueued) + 1;
  atomic_store(&s->timeline->enqueued, j->seq);
  j->next = NULL;
  if (s->tail)
    s->tail->next = j;
  else
    s->head = j;
  s->tail = j;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static hpu_job *job_new(hpu_stream *s, job_kind kind) {
  hpu_job *j = calloc(1, sizeof *j);
  if (!j) {
    HPU_ERROR(s->stub, TSTOR_ENOMEM, "hpu:%d: cannot queue work: out of host memory", s->index);
    return NULL;
  }
  j->kind = kind;
  return j;
}

int hpu_stream_copy(hpu_stream *s, void *dst, const void *src, size_t nbytes) {
  int rc = hpu_check_process(s->stub, s->index, "copy on a stream");
  if (rc) return rc;
  hpu_job *j = job_new(s, JOB_COPY);
  if (!j) return TSTOR_ENOMEM;
  j->dst = dst;
  j->src = src;
  j->nbytes = nbytes;
  enqueue(s, j);
  return 0;
}

int hpu_stream_fill(hpu_stream *s, void *dst, size_t nbytes, const void *pattern,
                    size_t pattern_size) {
  int rc = hpu_check_process(s->stub, s->index, "fill on a stream");
  if (rc) return rc;
  hpu_job *j = job_new(s, JOB_FILL);
  if (!j) return TSTOR_ENOMEM;
  j->dst = dst;
  j->nbytes = nbytes;
  memcpy(j->pattern, pattern, pattern_size);
  j->pattern_size = pattern_size;
  enqueue(s, j);
  return 0;
}

/* ---------------------------------------------------------------- streams */

static void stream_wait_idle(hpu_stream *s) {
  hpu_timeline_wait(s->timeline, atomic_load(&s->timeline->enqueued));
}

int hpu_stream_create(void *state, int index, void **out) {
  hpu_stub *stub = state;
  hpu_device *d = &stub->devices[index];
  int rc = hpu_check_process(stub, index, "stream_create");
  if (rc) return rc;
  hpu_stream *s = calloc(1, sizeof *s);
  if (!s) return HPU_ERROR(stub, TSTOR_ENOMEM, "hpu:%d: stream: out of host memory", index);
  s->stub = stub;
  s->index = index;
  s->timeline = hpu_timeline_new();
  if (!s->timeline) {
    free(s);
    return HPU_ERROR(stub, TSTOR_ENOMEM, "hpu:%d: stream: out of host memory", index);
  }
  if (pthread_mutex_init(&s->mu, NULL) != 0) goto fail_timeline;
  if (pthread_cond_init(&s->cv, NULL) != 0) goto fail_mutex;
  int err = pthread_create(&s->worker, NULL, worker_main, s);
  if (err != 0) {
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    hpu_timeline_release(s->timeline);
    free(s);
    return HPU_ERROR(stub, TSTOR_EBACKEND, "hpu:%d: cannot start a stream worker: %s", index,
                     strerror(err));
  }
  pthread_mutex_lock(&d->streams_mu);
  s->next = d->streams;
  if (d->streams) d->streams->prev = s;
  d->streams = s;
  pthread_mutex_unlock(&d->streams_mu);
  *out = s;
  return 0;

fail_mutex:
  pthread_mutex_destroy(&s->mu);
fail_timeline:
  hpu_timeline_release(s->timeline);
  free(s);
  return HPU_ERROR(stub, TSTOR_ENOMEM, "hpu:%d: stream: cannot initialise a lock", index);
}

/* Finishes the queued work first, as the API promises. */
void hpu_stream_destroy(void *state, int index, void *stream) {
  hpu_stub *stub = state;
  hpu_device *d = &stub->devices[index];
  hpu_stream *s = stream;
  if (!s) return;
  if (hpu_forked(stub)) {
    /* No worker to stop or join here, and its locks may be held for good:
     * the record goes, its queue and locks stay behind (hpu_stub.h). */
    free(s);
    return;
  }
  pthread_mutex_lock(&d->streams_mu);
  if (s->prev)
    s->prev->next = s->next;
  else
    d->streams = s->next;
  if (s->next) s->next->prev = s->prev;
  pthread_mutex_unlock(&d->streams_mu);

  pthread_mutex_lock(&s->mu);
  s->stopping = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->worker, NULL);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  hpu_timeline_release(s->timeline); /* events and fences may keep it */
  free(s);
}

int hpu_stream_synchronize(void *state, int index, void *stream) {
  int rc = hpu_check_process(state, index, "stream_synchronize");
  if (rc) return rc;
  stream_wait_idle(stream);
  return 0;
}

void hpu_streams_wait_idle(hpu_stub *stub, int index) {
  hpu_device *d = &stub->devices[index];
  pthread_mutex_lock(&d->streams_mu);
  for (hpu_stream *s = d->streams; s; s = s->next) stream_wait_idle(s);
  pthread_mutex_unlock(&d->streams_mu);
}

/* ----------------------------------------------------------------- events */

int hpu_event_create(void *state, int index, void **out) {
  hpu_stub *stub = state;
  hpu_event *e = calloc(1, sizeof *e);
  if (!e) return HPU_ERROR(stub, TSTOR_ENOMEM, "hpu:%d: event: out of host memory", index);
  if (pthread_mutex_init(&e->mu, NULL) != 0) {
    free(e);
    return HPU_ERROR(stub, TSTOR_ENOMEM, "hpu:%d: event: cannot initialise a lock", index);
  }
  *out = e;
  return 0;
}

void hpu_event_destroy(void *state, int index, void *event) {
  (void)index;
  hpu_event *e = event;
  if (!e) return;
  hpu_timeline_release(e->timeline);
  if (!hpu_forked(state)) pthread_mutex_destroy(&e->mu); /* may be held for good there */
  free(e);
}

int hpu_event_record(void *state, int index, void *event, void *stream) {
  int rc = hpu_check_process(state, index, "event_record");
  if (rc) return rc;
  hpu_event *e = event;
  hpu_stream *s = stream;
  hpu_timeline *t = hpu_timeline_retain(s->timeline);
  uint64_t seq = atomic_load(&t->enqueued);
  pthread_mutex_lock(&e->mu);
  hpu_timeline *old = e->timeline;
  e->timeline = t;
  e->seq = seq;
  pthread_mutex_unlock(&e->mu);
  hpu_timeline_release(old);
  return 0;
}

/* The event's point, with a reference on its timeline; NULL when never recorded. */
static hpu_timeline *event_point(hpu_event *e, uint64_t *seq) {
  pthread_mutex_lock(&e->mu);
  hpu_timeline *t = e->timeline ? hpu_timeline_retain(e->timeline) : NULL;
  *seq = e->seq;
  pthread_mutex_unlock(&e->mu);
  return t;
}

/* An event never recorded counts as complete, as in CUDA. */
int hpu_event_query(void *state, int index, void *event) {
  int rc = hpu_check_process(state, index, "event_query");
  if (rc) return rc;
  uint64_t seq;
  hpu_timeline *t = event_point(event, &seq);
  if (!t) return 0;
  int done = hpu_timeline_reached(t, seq);
  hpu_timeline_release(t);
  return done ? 0 : TSTOR_EAGAIN;
}

int hpu_event_synchronize(void *state, int index, void *event) {
  int rc = hpu_check_process(state, index, "event_synchronize");
  if (rc) return rc;
  uint64_t seq;
  hpu_timeline *t = event_point(event, &seq);
  if (!t) return 0;
  hpu_timeline_wait(t, seq);
  hpu_timeline_release(t);
  return 0;
}

/* Queues a job that holds the worker until the event's point is reached. */
int hpu_stream_wait_event(void *state, int index, void *stream, void *event) {
  int rc = hpu_check_process(state, index, "stream_wait_event");
  if (rc) return rc;
  hpu_stream *s = stream;
  uint64_t seq;
  hpu_timeline *t = event_point(event, &seq);
  if (!t) return 0;
  if (t == s->timeline || hpu_timeline_reached(t, seq)) { /* in order already */
    hpu_timeline_release(t);
    return 0;
  }
  hpu_job *j = job_new(s, JOB_WAIT);
  if (!j) {
    hpu_timeline_release(t);
    return TSTOR_ENOMEM;
  }
  j->wait_for = t;
  j->wait_seq = seq;
  enqueue(s, j);
  return 0;
}
