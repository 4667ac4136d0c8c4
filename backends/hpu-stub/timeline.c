/* Timelines: the progress of one stream as two counters, jobs queued and jobs
 * finished. The lowest piece of the backend: the arena's deferred frees and
 * the streams' events both wait on timelines, and a timeline waits on
 * nothing but its own condition variable. It also keeps the fork generation
 * (hpu_stub.h): a timeline made before a fork is dead in the child. */
#include "hpu_stub.h"

#include <stdlib.h>

/* ------------------------------------------------------------------ fork */

atomic_uint hpu_fork_generation;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;
static int fork_handler_rc;

static void in_forked_child(void) {
  atomic_fetch_add_explicit(&hpu_fork_generation, 1, memory_order_relaxed);
}
/* glibc drops the handler when the module is unloaded; a reload registers it
 * again (fresh statics). */
static void register_fork_handler(void) {
  fork_handler_rc = pthread_atfork(NULL, NULL, in_forked_child);
}

int hpu_fork_watch(void) {
  pthread_once(&fork_handler_once, register_fork_handler);
  return fork_handler_rc;
}

int hpu_check_process(hpu_stub *stub, int index, const char *what) {
  if (!hpu_forked(stub)) return 0;
  return HPU_ERROR(stub, TSTOR_EBACKEND,
                   "hpu:%d: %s: this backend was loaded before the process forked, and its "
                   "stream workers do not exist in the child; open a new context in the child",
                   index, what);
}

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
  t->generation = atomic_load_explicit(&hpu_fork_generation, memory_order_relaxed);
  return t;
}

/* In a forked child a parent's timeline is left alone: its lock may be held
 * for good, and a few bytes of it stay allocated there. */
hpu_timeline *hpu_timeline_retain(hpu_timeline *t) {
  if (hpu_timeline_dead(t)) return t;
  pthread_mutex_lock(&t->mu);
  t->refs++;
  pthread_mutex_unlock(&t->mu);
  return t;
}

void hpu_timeline_release(hpu_timeline *t) {
  if (!t || hpu_timeline_dead(t)) return;
  pthread_mutex_lock(&t->mu);
  int last = --t->refs == 0;
  pthread_mutex_unlock(&t->mu);
  if (!last) return;
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

int hpu_timeline_reached(hpu_timeline *t, uint64_t seq) {
  if (hpu_timeline_dead(t)) return 1; /* nothing will run it (hpu_stub.h) */
  pthread_mutex_lock(&t->mu);
  int done = t->completed >= seq;
  pthread_mutex_unlock(&t->mu);
  return done;
}

void hpu_timeline_wait(hpu_timeline *t, uint64_t seq) {
  if (hpu_timeline_dead(t)) return;
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

