/* The async section: streams, events, ordering on a stream, waits between
 * streams, device synchronize, record_stream and stream_free. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

#define ASYNC_BYTES ((size_t)4 << 20)

static void check_streams_events(conf_run *r, const conf_device *d) {
  conf_begin(r, "streams and events", d->label);
  tstor_stream *s = NULL;
  tstor_event *e = NULL;
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s), "creating a stream");
  TRY(r, tstor_stream_synchronize(s), "synchronizing an empty stream");
  TRY(r, tstor_event_new(r->ctx, d->dev, &e), "creating an event");
  TRY(r, tstor_event_query(e), "querying an event never recorded");
  TRY(r, tstor_event_synchronize(e), "waiting for an event never recorded");
  TRY(r, tstor_event_record(e, s), "recording on an empty stream");
  TRY(r, tstor_event_synchronize(e), "waiting for it");
  TRY(r, tstor_event_query(e), "querying it afterwards");
  TRY(r, tstor_synchronize(r->ctx, d->dev), "synchronizing the device");
out:
  tstor_event_free(e);
  tstor_stream_free(s);
  conf_end(r);
}

/* A chain of dependent copies on one stream: only in-order execution gives
 * the right bytes at the end. */
static void check_ordering(conf_run *r, const conf_device *d) {
  conf_begin(r, "ordering on a stream", d->label);
  const size_t n = ASYNC_BYTES;
  tstor_stream *s = NULL;
  tstor_event *e = NULL;
  tstor_storage *x = NULL, *y = NULL, *a1 = NULL, *a2 = NULL, *b = NULL;
  unsigned char *h1 = conf_xmalloc(n), *h2 = conf_xmalloc(n), *hb = conf_xmalloc(n);
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s), "creating a stream");
  TRY(r, tstor_event_new(r->ctx, d->dev, &e), "creating an event");
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &x), "allocating");
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &y), "allocating");
  TRY(r, conf_host_storage(r, h1, n, &a1), "wrapping host memory");
  TRY(r, conf_host_storage(r, h2, n, &a2), "wrapping host memory");
  TRY(r, conf_host_storage(r, hb, n, &b), "wrapping host memory");
  int polls = 0, pending = 0;
  for (unsigned round = 0; round < 4; round++) {
    conf_pattern(h1, n, 500 + round);
    conf_pattern(h2, n, 600 + round);
    memset(hb, 0, n);
    TRY(r, tstor_storage_copy_async(x, a1, s), "queueing host -> x");
    TRY(r, tstor_storage_copy_async(x, a2, s), "queueing host -> x again");
    TRY(r, tstor_storage_copy_async(y, x, s), "queueing x -> y");
    TRY(r, tstor_storage_copy_async(b, y, s), "queueing y -> host");
    TRY(r, tstor_event_record(e, s), "recording an event");
    int rc;
    while ((rc = tstor_event_query(e)) == TSTOR_EAGAIN && polls < 1000) {
      polls++;
      pending = 1;
    }
    EXPECT(r, rc == 0 || rc == TSTOR_EAGAIN, "event_query gave %s", tstor_err_name(rc));
    TRY(r, tstor_event_synchronize(e), "waiting for the event");
    TRY(r, tstor_event_query(e), "querying the event once waited for");
    size_t at = conf_mismatch(h2, hb, n);
    EXPECT(r, at == SIZE_MAX, "round %u: byte %zu of the result is not the last write", round,
           at);
  }
  conf_notef(r, "%s", pending ? "copies were still running when queried" : "copies ran synchronously");
out:
  tstor_storage_release(a1);
  tstor_storage_release(a2);
  tstor_storage_release(b);
  tstor_storage_release(x);
  tstor_storage_release(y);
  tstor_event_free(e);
  tstor_stream_free(s);
  free(h1);
  free(h2);
  free(hb);
  conf_end(r);
}

/* s2 reads what s1 writes, ordered only by an event. */
static void check_wait_event(conf_run *r, const conf_device *d) {
  conf_begin(r, "stream waits for event", d->label);
  const size_t n = ASYNC_BYTES;
  tstor_stream *s1 = NULL, *s2 = NULL;
  tstor_event *e = NULL;
  tstor_storage *x = NULL, *a = NULL, *b = NULL;
  unsigned char *ha = conf_xmalloc(n), *hb = conf_xmalloc(n);
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s1), "creating a stream");
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s2), "creating a stream");
  TRY(r, tstor_event_new(r->ctx, d->dev, &e), "creating an event");
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &x), "allocating");
  TRY(r, conf_host_storage(r, ha, n, &a), "wrapping host memory");
  TRY(r, conf_host_storage(r, hb, n, &b), "wrapping host memory");
  for (unsigned round = 0; round < 4; round++) {
    conf_pattern(ha, n, 700 + round);
    memset(hb, 0, n);
    TRY(r, tstor_storage_copy_async(x, a, s1), "queueing host -> x on stream 1");
    TRY(r, tstor_event_record(e, s1), "recording on stream 1");
    TRY(r, tstor_stream_wait_event(s2, e), "stream 2 waiting for the event");
    TRY(r, tstor_storage_copy_async(b, x, s2), "queueing x -> host on stream 2");
    TRY(r, tstor_stream_synchronize(s2), "synchronizing stream 2");
    size_t at = conf_mismatch(ha, hb, n);
    EXPECT(r, at == SIZE_MAX, "round %u: stream 2 read byte %zu before stream 1 wrote it", round,
           at);
    TRY(r, tstor_stream_synchronize(s1), "synchronizing stream 1");
  }
out:
  tstor_storage_release(a);
  tstor_storage_release(b);
  tstor_storage_release(x);
  tstor_event_free(e);
  tstor_stream_free(s1);
  tstor_stream_free(s2);
  free(ha);
  free(hb);
  conf_end(r);
}

static void check_device_synchronize(conf_run *r, const conf_device *d) {
  conf_begin(r, "device synchronize", d->label);
  const size_t n = ASYNC_BYTES;
  tstor_stream *s[2] = {NULL, NULL};
  tstor_storage *x[2] = {NULL, NULL}, *a[2] = {NULL, NULL}, *b[2] = {NULL, NULL};
  unsigned char *ha[2] = {conf_xmalloc(n), conf_xmalloc(n)}, *hb[2] = {conf_xmalloc(n), conf_xmalloc(n)};
  for (int i = 0; i < 2; i++) {
    conf_pattern(ha[i], n, 800 + (unsigned)i);
    memset(hb[i], 0, n);
    TRY(r, tstor_stream_new(r->ctx, d->dev, &s[i]), "creating a stream");
    TRY(r, tstor_storage_new(r->ctx, d->dev, n, &x[i]), "allocating");
    TRY(r, conf_host_storage(r, ha[i], n, &a[i]), "wrapping host memory");
    TRY(r, conf_host_storage(r, hb[i], n, &b[i]), "wrapping host memory");
  }
  for (int i = 0; i < 2; i++) {
    TRY(r, tstor_storage_copy_async(x[i], a[i], s[i]), "queueing host -> device");
    TRY(r, tstor_storage_copy_async(b[i], x[i], s[i]), "queueing device -> host");
  }
  TRY(r, tstor_synchronize(r->ctx, d->dev), "synchronizing the device");
  for (int i = 0; i < 2; i++)
    EXPECT(r, conf_mismatch(ha[i], hb[i], n) == SIZE_MAX,
           "stream %d's work was not done when synchronize returned", i + 1);
out:
  for (int i = 0; i < 2; i++) {
    tstor_stream_free(s[i]);
    tstor_storage_release(a[i]);
    tstor_storage_release(b[i]);
    tstor_storage_release(x[i]);
    free(ha[i]);
    free(hb[i]);
  }
  conf_end(r);
}

/* Released while a stream still writes into it: with record_stream the block
 * may not be handed out again until that work is done. */
static void check_record_stream(conf_run *r, const conf_device *d) {
  conf_begin(r, "record_stream", d->label);
  const size_t n = ASYNC_BYTES;
  tstor_stream *s = NULL;
  tstor_storage *x = NULL, *z = NULL, *a = NULL;
  unsigned char *ha = conf_xmalloc(n), *hz = conf_xmalloc(n), *back = conf_xmalloc(n);
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s), "creating a stream");
  TRY(r, conf_host_storage(r, ha, n, &a), "wrapping host memory");
  for (unsigned round = 0; round < 4; round++) {
    conf_pattern(ha, n, 900 + round);
    conf_pattern(hz, n, 950 + round);
    TRY(r, tstor_storage_new(r->ctx, d->dev, n, &x), "allocating");
    TRY(r, tstor_storage_copy_async(x, a, s), "queueing host -> device");
    TRY(r, tstor_storage_record_stream(x, s), "record_stream");
    tstor_storage_release(x);
    x = NULL;
    TRY(r, tstor_storage_new(r->ctx, d->dev, n, &z), "allocating again");
    TRY(r, conf_upload(r, z, hz), "writing the new block");
    TRY(r, tstor_stream_synchronize(s), "synchronizing");
    TRY(r, conf_download(r, back, z), "reading the new block");
    size_t at = conf_mismatch(hz, back, n);
    EXPECT(r, at == SIZE_MAX,
           "round %u: byte %zu of a new allocation reads other bytes (reused while a stream "
           "still wrote to it?)",
           round, at);
    tstor_storage_release(z);
    z = NULL;
  }
out:
  tstor_storage_release(x);
  tstor_storage_release(z);
  tstor_storage_release(a);
  tstor_stream_free(s);
  free(ha);
  free(hz);
  free(back);
  conf_end(r);
}

static void check_stream_free_waits(conf_run *r, const conf_device *d) {
  conf_begin(r, "stream free waits", d->label);
  const size_t n = ASYNC_BYTES;
  tstor_stream *s = NULL;
  tstor_storage *x = NULL, *a = NULL;
  unsigned char *ha = conf_xmalloc(n), *back = conf_xmalloc(n);
  conf_pattern(ha, n, 990);
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s), "creating a stream");
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &x), "allocating");
  TRY(r, conf_host_storage(r, ha, n, &a), "wrapping host memory");
  TRY(r, tstor_storage_copy_async(x, a, s), "queueing host -> device");
  tstor_stream_free(s);
  s = NULL;
  TRY(r, conf_download(r, back, x), "reading");
  EXPECT(r, conf_mismatch(ha, back, n) == SIZE_MAX, "stream_free returned before its copy was done");
out:
  tstor_stream_free(s);
  tstor_storage_release(x);
  tstor_storage_release(a);
  free(ha);
  free(back);
  conf_end(r);
}

void conf_section_async(conf_run *r) {
  if (conf_setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    check_streams_events(r, d);
    if (!d->has_data) continue;
    check_ordering(r, d);
    check_wait_event(r, d);
    check_device_synchronize(r, d);
    check_record_stream(r, d);
    check_stream_free_waits(r, d);
  }
  conf_teardown(r);
}
