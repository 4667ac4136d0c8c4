/* Timelines: the progress of one stream as two counters, jobs queued and jobs
 * finished. The lowest piece of the backend: the arena's deferred frees and
 * the streams' events both wait on timelines, and a timeline waits on
 * nothing but its own condition variable. */
#include "hpu_stub.h"

#include <stdlib.h>

hpu_timeline *hpu_timeline_new(void) {
  hpu_timeline *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (pthread_mutex_init(&t->mu, NULL) != 0) {
    free(t);
    return NULL;
  }
  if (pthread_cond_init(&t->cv, NULL) != 0) {
    pthread_mutex_destroy(&t->mu);
    free(t);
    return NULL;
  }
  atomic_init(&t->enqueued, 0);
  t->refs = 1;
  return t;
}

hpu_timeline *hpu_timeline_retain(hpu_timeline *t) {
  pthread_mutex_lock(&t->mu);
  t->refs++;
  pthread_mutex_unlock(&t->mu);
  return t;
}

void hpu_timeline_release(hpu_timeline *t) {
  if (!t) return;
  pthread_mutex_lock(&t->mu);
  int last = --t->refs == 0;
  pthread_mutex_unlock(&t->mu);
  if (!last) return;
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

int hpu_timeline_reached(hpu_timeline *t, uint64_t seq) {
  pthread_mutex_lock(&t->mu);
  int done = t->completed >= seq;
  pthread_mutex_unlock(&t->mu);
  return done;
}

void hpu_timeline_wait(hpu_timeline *t, uint64_t seq) {
  pthread_mutex_lock(&t->mu);
  while (t->completed < seq) pthread_cond_wait(&t->cv, &t->mu);
  pthread_mutex_unlock(&t->mu);
}

void hpu_timeline_advance(hpu_timeline *t, uint64_t seq) {
  pthread_mutex_lock(&t->mu);
  t->completed = seq;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

