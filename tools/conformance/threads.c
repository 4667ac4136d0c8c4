/* The threads section: concurrent allocation, copies and streams, and one
 * storage read from many threads. */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

typedef struct worker {
  conf_run *r;
  const conf_device *d;
  tstor_storage *shared; /* for the shared-storage check */
  const unsigned char *shared_bytes;
  size_t shared_n;
  unsigned id;
  int use_stream;
  char error[CONF_REASON];
} worker;

static void werr(worker *w, int rc, const char *what) {
  if (w->error[0]) return;
  if (rc)
    snprintf(w->error, sizeof w->error, "thread %u: %s: %s (%s)", w->id, what, tstor_err_name(rc),
             tstor_last_error());
  else
    snprintf(w->error, sizeof w->error, "thread %u: %s", w->id, what);
}

static uint32_t next_random(uint32_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}

/* Allocate, write, read back, free; with use_stream, through a stream of its own. */
static void *alloc_copy_worker(void *arg) {
  worker *w = arg;
  conf_run *r = w->r;
  uint32_t rnd = 12345u + w->id * 7919u;
  unsigned char *in = conf_xmalloc(70000), *back = conf_xmalloc(70000);
  tstor_stream *s = NULL;
  int rc;
  if (w->use_stream && (rc = tstor_stream_new(r->ctx, w->d->dev, &s)) != 0) {
    werr(w, rc, "creating a stream");
    goto out;
  }
  for (int it = 0; it < 100 && !w->error[0]; it++) {
    size_t n = 1 + next_random(&rnd) % 70000;
    tstor_storage *x = NULL, *hi = NULL, *hb = NULL;
    conf_pattern(in, n, w->id * 1000 + (unsigned)it);
    memset(back, 0, n);
    if ((rc = tstor_storage_new(r->ctx, w->d->dev, n, &x)) != 0) {
      werr(w, rc, "allocating");
    } else if (!s) {
      if ((rc = conf_upload(r, x, in)) != 0) werr(w, rc, "writing");
      else if ((rc = conf_download(r, back, x)) != 0) werr(w, rc, "reading");
    } else {
      if ((rc = conf_host_storage(r, in, n, &hi)) != 0 || (rc = conf_host_storage(r, back, n, &hb)) != 0)
        werr(w, rc, "wrapping host memory");
      else if ((rc = tstor_storage_copy_async(x, hi, s)) != 0 ||
               (rc = tstor_storage_copy_async(hb, x, s)) != 0)
        werr(w, rc, "queueing copies");
      else if ((rc = tstor_stream_synchronize(s)) != 0)
        werr(w, rc, "synchronizing");
    }
    if (!w->error[0] && conf_mismatch(in, back, n) != SIZE_MAX) werr(w, 0, "read back other bytes");
    tstor_storage_release(hi);
    tstor_storage_release(hb);
    tstor_storage_release(x);
  }
out:
  tstor_stream_free(s);
  free(in);
  free(back);
  return NULL;
}

static void *shared_reader(void *arg) {
  worker *w = arg;
  unsigned char *back = conf_xmalloc(w->shared_n);
  for (int it = 0; it < 50 && !w->error[0]; it++) {
    tstor_storage *mine = tstor_storage_retain(w->shared);
    int rc = conf_download(w->r, back, mine);
    if (rc) werr(w, rc, "reading the shared storage");
    else if (conf_mismatch(w->shared_bytes, back, w->shared_n) != SIZE_MAX)
      werr(w, 0, "the shared storage read back other bytes");
    tstor_storage_release(mine);
  }
  free(back);
  return NULL;
}

static void run_workers(conf_run *r, const conf_device *d, void *(*fn)(void *), int use_stream,
                        tstor_storage *shared, const unsigned char *bytes, size_t n) {
  int nt = r->opt->threads;
  worker *w = calloc((size_t)nt, sizeof *w);
  pthread_t *th = calloc((size_t)nt, sizeof *th);
  int started = 0;
  if (!w || !th) {
    conf_failf(r, "out of host memory");
    goto out;
  }
  for (int i = 0; i < nt; i++) {
    w[i] = (worker){r, d, shared, bytes, n, (unsigned)i + 1, use_stream, ""};
    if (pthread_create(&th[i], NULL, fn, &w[i]) != 0) {
      conf_failf(r, "cannot start thread %d", i + 1);
      break;
    }
    started++;
  }
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < started; i++)
    if (w[i].error[0]) {
      conf_failf(r, "%s", w[i].error);
      break;
    }
  conf_notef(r, "%d threads", nt);
out:
  free(w);
  free(th);
}

void conf_section_threads(conf_run *r) {
  if (conf_setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    if (!d->first) continue;
    if (!d->has_data) {
      conf_begin(r, "parallel allocation", d->label);
      conf_skipf(r, "no data");
      conf_end(r);
      continue;
    }
    conf_begin(r, "parallel alloc and copy", d->label);
    run_workers(r, d, alloc_copy_worker, 0, NULL, NULL, 0);
    conf_end(r);
    conf_begin(r, "parallel streams", d->label);
    run_workers(r, d, alloc_copy_worker, 1, NULL, NULL, 0);
    conf_end(r);

    conf_begin(r, "one storage, many readers", d->label);
    const size_t n = 100000;
    unsigned char *bytes = conf_xmalloc(n);
    tstor_storage *s = NULL;
    conf_pattern(bytes, n, 4242);
    TRY(r, tstor_storage_new(r->ctx, d->dev, n, &s), "allocating");
    TRY(r, conf_upload(r, s, bytes), "writing");
    run_workers(r, d, shared_reader, 0, s, bytes, n);
    EXPECT(r, tstor_storage_use_count(s) == 1, "use count is %ld after the readers",
           tstor_storage_use_count(s));
  out:
    tstor_storage_release(s);
    free(bytes);
    conf_end(r);
  }
  conf_teardown(r);
}
