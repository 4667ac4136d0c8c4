/* Streams and events of the remote devices (stream.h). A stream's timeline
 * counts its queued and finished jobs under one lock, and keeps the first
 * failure; an event is (timeline, count).
 *
 * A deliberate twin of backends/hpu-stub/stream.c's engine, with failures
 * that stop a stream added: hpu-stub stays a self-contained template for
 * authors, so the two are kept apart rather than shared. A fix to one
 * belongs in the other. */
#include "stream.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "failure.h"

typedef struct timeline {
  pthread_mutex_t mu;
  pthread_cond_t progress; /* done moved */
  int refs;                /* the stream's, and one per event and wait job */
  int index;               /* remote:index */
  uint64_t queued, done;
  int error;               /* the first failure not yet reported, or 0 */
  uint64_t error_seq;      /* the job that failed */
  uint64_t skipped;        /* jobs not run since */
  char text[640];
} timeline;

typedef struct job {
  struct job *next;
  uint64_t seq;
  rjob_fn run;          /* NULL: wait until wait_for reaches wait_seq */
  timeline *wait_for;   /* a reference, dropped when the job is done */
  uint64_t wait_seq;
  void *args;           /* the copy, in the same allocation */
} job;

struct rstream {
  rstreams *set;
  timeline *tl;
  pthread_t worker;
  pthread_cond_t work; /* under tl->mu: a job was queued, or stopping */
  job *head, *tail;
  int stopping;
  rstream *prev, *next;
};

typedef struct revent {
  pthread_mutex_t mu;
  timeline *tl; /* NULL until recorded */
  uint64_t seq;
} revent;

struct rstreams {
  const tstor_registrar *reg;
  void *state;
  pid_t pid;
  pthread_mutex_t mu;
  rstream *list;
};

/* -------------------------------------------------------------- timelines */

static timeline *timeline_new(int index) {
  timeline *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (pthread_mutex_init(&t->mu, NULL) != 0) {
    free(t);
    return NULL;
  }
  if (pthread_cond_init(&t->progress, NULL) != 0) {
    pthread_mutex_destroy(&t->mu);
    free(t);
    return NULL;
  }
  t->refs = 1;
  t->index = index;
  return t;
}

static timeline *timeline_retain(timeline *t) {
  pthread_mutex_lock(&t->mu);
  t->refs++;
  pthread_mutex_unlock(&t->mu);
  return t;
}

static void timeline_release(timeline *t) {
  if (!t) return;
  pthread_mutex_lock(&t->mu);
  int last = --t->refs == 0;
  pthread_mutex_unlock(&t->mu);
  if (!last) return;
  pthread_cond_destroy(&t->progress);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

/* Waits, with t->mu held, until the jobs up to seq are done. */
static void timeline_wait_locked(timeline *t, uint64_t seq) {
  while (t->done < seq) pthread_cond_wait(&t->progress, &t->mu);
}

/* The failure that reaches the point seq of t, as the caller's error; 0 when
 * none. With t->mu held. */
static int failure_at(rstreams *set, timeline *t, uint64_t seq, int clear) {
  if (!t->error || t->error_seq > seq) return 0;
  int code = t->error;
  char skipped[64] = "";
  if (t->skipped)
    snprintf(skipped, sizeof skipped, " (%llu later job%s on the stream not run)",
             (unsigned long long)t->skipped, t->skipped == 1 ? "" : "s");
  remote_fail(set->reg, code, "remote:%d: work queued on a stream failed: %s%s", t->index,
              t->text, skipped);
  if (clear) {
    t->error = 0;
    t->skipped = 0;
  }
  return code;
}

/* ----------------------------------------------------------------- worker */

static void *worker_main(void *arg) {
  rstream *s = arg;
  timeline *t = s->tl;
  for (;;) {
    pthread_mutex_lock(&t->mu);
    while (!s->head && !s->stopping) pthread_cond_wait(&s->work, &t->mu);
    job *j = s->head;
    if (!j) { /* stopping, and the queue is drained */
      pthread_mutex_unlock(&t->mu);
      return NULL;
    }
    s->head = j->next;
    if (!s->head) s->tail = NULL;
    int failed = t->error != 0;
    if (failed) t->skipped++;
    pthread_mutex_unlock(&t->mu);

    if (!failed && j->run) {
      remote_failure_clear();
      int rc = j->run(s->set->state, j->args);
      if (rc) {
        const char *text = remote_failure_text();
        pthread_mutex_lock(&t->mu);
        t->error = rc;
        t->error_seq = j->seq;
        snprintf(t->text, sizeof t->text, "%s", text[0] ? text : "failed without a reason");
        pthread_mutex_unlock(&t->mu);
      }
    } else if (!failed) {
      pthread_mutex_lock(&j->wait_for->mu);
      timeline_wait_locked(j->wait_for, j->wait_seq);
      pthread_mutex_unlock(&j->wait_for->mu);
    }
    timeline_release(j->wait_for);
    pthread_mutex_lock(&t->mu);
    t->done = j->seq;
    pthread_cond_broadcast(&t->progress);
    pthread_mutex_unlock(&t->mu);
    free(j);
  }
}

static int forked(rstreams *set, int index, const char *what) {
  return remote_check_process(set->reg, set->pid, index, what);
}

/* Takes j; the sequence number is handed out under the lock, in queue order. */
static void enqueue(rstream *s, job *j) {
  timeline *t = s->tl;
  pthread_mutex_lock(&t->mu);
  j->seq = ++t->queued;
  j->next = NULL;
  if (s->tail)
    s->tail->next = j;
  else
    s->head = j;
  s->tail = j;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&t->mu);
}

int rstream_enqueue(void *stream, rjob_fn run, const void *args, size_t args_size) {
  rstream *s = stream;
  int rc = forked(s->set, s->tl->index, "work on a stream");
  if (rc) return rc;
  size_t head = (sizeof(job) + 15) & ~(size_t)15; /* args keep a 16-byte alignment */
  job *j = calloc(1, head + args_size);
  if (!j)
    return remote_fail(s->set->reg, TSTOR_ENOMEM,
                       "remote:%d: cannot queue work on a stream: out of host memory",
                       s->tl->index);
  j->run = run;
  j->args = (char *)j + head;
  memcpy(j->args, args, args_size);
  enqueue(s, j);
  return 0;
}

/* ---------------------------------------------------------------- streams */

rstreams *rstreams_new(const tstor_registrar *reg, void *state) {
  rstreams *set = calloc(1, sizeof *set);
  if (!set) return NULL;
  if (pthread_mutex_init(&set->mu, NULL) != 0) {
    free(set);
    return NULL;
  }
  set->reg = reg;
  set->state = state;
  set->pid = remote_getpid();
  return set;
}

void rstreams_free(rstreams *set) {
  if (!set) return;
  if (remote_getpid() == set->pid) pthread_mutex_destroy(&set->mu);
  free(set);
}

int rstreams_wait(rstreams *set, int index) {
  if (remote_getpid() != set->pid) return 0;
  int first = 0;
  pthread_mutex_lock(&set->mu);
  for (rstream *s = set->list; s; s = s->next) {
    timeline *t = s->tl;
    if (index >= 0 && t->index != index) continue;
    pthread_mutex_lock(&t->mu);
    timeline_wait_locked(t, t->queued);
    int rc = first ? 0 : failure_at(set, t, t->queued, 0);
    pthread_mutex_unlock(&t->mu);
    if (rc) first = rc;
  }
  pthread_mutex_unlock(&set->mu);
  return first;
}

int rstream_create(rstreams *set, int index, void **out) {
  int rc = forked(set, index, "stream_create");
  if (rc) return rc;
  rstream *s = calloc(1, sizeof *s);
  timeline *t = s ? timeline_new(index) : NULL;
  if (!t || pthread_cond_init(&s->work, NULL) != 0) {
    timeline_release(t);
    free(s);
    return remote_fail(set->reg, TSTOR_ENOMEM, "remote:%d: stream: out of host memory", index);
  }
  s->set = set;
  s->tl = t;
  int err = pthread_create(&s->worker, NULL, worker_main, s);
  if (err != 0) {
    pthread_cond_destroy(&s->work);
    timeline_release(t);
    free(s);
    return remote_fail(set->reg, TSTOR_EBACKEND, "remote:%d: cannot start a stream worker: %s",
                       index, strerror(err));
  }
  pthread_mutex_lock(&set->mu);
  s->next = set->list;
  if (set->list) set->list->prev = s;
  set->list = s;
  pthread_mutex_unlock(&set->mu);
  *out = s;
  return 0;
}

/* Runs what is queued first, as the API promises. */
void rstream_destroy(rstreams *set, void *stream) {
  rstream *s = stream;
  if (!s) return;
  if (remote_getpid() != set->pid) { /* no worker here; its queue and locks stay behind */
    free(s);
    return;
  }
  pthread_mutex_lock(&set->mu);
  if (s->prev)
    s->prev->next = s->next;
  else
    set->list = s->next;
  if (s->next) s->next->prev = s->prev;
  pthread_mutex_unlock(&set->mu);

  pthread_mutex_lock(&s->tl->mu);
  s->stopping = 1;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->tl->mu);
  pthread_join(s->worker, NULL);
  pthread_cond_destroy(&s->work);
  timeline_release(s->tl); /* events may keep it */
  free(s);
}

int rstream_synchronize(rstreams *set, void *stream) {
  rstream *s = stream;
  timeline *t = s->tl;
  int rc = forked(set, t->index, "stream_synchronize");
  if (rc) return rc;
  pthread_mutex_lock(&t->mu);
  timeline_wait_locked(t, t->queued);
  rc = failure_at(set, t, t->queued, 1);
  pthread_mutex_unlock(&t->mu);
  return rc;
}

/* ----------------------------------------------------------------- events */

int rstream_event_create(rstreams *set, int index, void **out) {
  revent *e = calloc(1, sizeof *e);
  if (!e || pthread_mutex_init(&e->mu, NULL) != 0) {
    free(e);
    return remote_fail(set->reg, TSTOR_ENOMEM, "remote:%d: event: out of host memory", index);
  }
  *out = e;
  return 0;
}

void rstream_event_destroy(rstreams *set, void *event) {
  revent *e = event;
  if (!e) return;
  if (remote_getpid() == set->pid) {
    timeline_release(e->tl);
    pthread_mutex_destroy(&e->mu);
  }
  free(e);
}

int rstream_event_record(rstreams *set, void *event, void *stream) {
  revent *e = event;
  rstream *s = stream;
  int rc = forked(set, s->tl->index, "event_record");
  if (rc) return rc;
  timeline *t = timeline_retain(s->tl);
  pthread_mutex_lock(&t->mu);
  uint64_t seq = t->queued;
  pthread_mutex_unlock(&t->mu);
  pthread_mutex_lock(&e->mu);
  timeline *old = e->tl;
  e->tl = t;
  e->seq = seq;
  pthread_mutex_unlock(&e->mu);
  timeline_release(old);
  return 0;
}

/* The event's point, with a reference on its timeline; NULL when never
 * recorded (complete, as in CUDA). */
static timeline *event_point(revent *e, uint64_t *seq) {
  pthread_mutex_lock(&e->mu);
  timeline *t = e->tl ? timeline_retain(e->tl) : NULL;
  *seq = e->seq;
  pthread_mutex_unlock(&e->mu);
  return t;
}

static int event_wait(rstreams *set, void *event, int block, const char *what) {
  uint64_t seq;
  timeline *t = event_point(event, &seq);
  if (!t) return 0;
  int rc = forked(set, t->index, what);
  if (rc == 0) {
    pthread_mutex_lock(&t->mu);
    if (block) timeline_wait_locked(t, seq);
    rc = t->done >= seq ? failure_at(set, t, seq, 0) : TSTOR_EAGAIN;
    pthread_mutex_unlock(&t->mu);
  }
  timeline_release(t);
  return rc;
}

int rstream_event_query(rstreams *set, void *event) {
  return event_wait(set, event, 0, "event_query");
}

int rstream_event_synchronize(rstreams *set, void *event) {
  return event_wait(set, event, 1, "event_synchronize");
}

/* Queues a job that holds the worker until the event's point is reached. */
int rstream_wait_event(rstreams *set, void *stream, void *event) {
  rstream *s = stream;
  int rc = forked(set, s->tl->index, "stream_wait_event");
  if (rc) return rc;
  uint64_t seq;
  timeline *t = event_point(event, &seq);
  if (!t) return 0;
  pthread_mutex_lock(&t->mu);
  int reached = t->done >= seq;
  pthread_mutex_unlock(&t->mu);
  if (t == s->tl || reached) { /* in order already */
    timeline_release(t);
    return 0;
  }
  job *j = calloc(1, sizeof *j);
  if (!j) {
    timeline_release(t);
    return remote_fail(set->reg, TSTOR_ENOMEM, "remote:%d: stream_wait_event: out of host memory",
                       s->tl->index);
  }
  j->wait_for = t;
  j->wait_seq = seq;
  enqueue(s, j);
  return 0;
}
