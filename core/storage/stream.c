/* Streams and events: the backend's when it has them; otherwise stand-ins
 * whose work is complete before each call returns. */
#include "internal.h"

#include <string.h>

/* A stream or an event: made, checked and freed alike, through the backend's
 * ops of the one kind or the other. */
typedef struct queue_object {
  tstor_context *ctx; /* holds a reference */
  tstor_device dev;
  void *handle; /* the backend's, or NULL for a synchronous device */
} queue_object;

struct tstor_stream {
  queue_object q;
};

struct tstor_event {
  queue_object q;
};

typedef struct queue_kind {
  const char *name; /* "stream", "event" */
  size_t size;      /* of the public struct */
  int (*create)(void *state, int index, void **out);
  void (*destroy)(void *state, int index, void *handle);
} queue_kind;

static const tstor__devtype *type_of(tstor_context *ctx, tstor_device dev) {
  return &ctx->types[dev.type];
}

static int backend_rc(tstor_context *ctx, tstor_device dev, int rc, const char *what) {
  if (rc && !tstor_last_error()[0])
    tstor__err(rc, "%s:%d: %s failed", ctx->types[dev.type].name, dev.index, what);
  return rc;
}

static queue_kind stream_kind(const tstor__devtype *t) {
  return (queue_kind){"stream", sizeof(tstor_stream), t->ops.stream_create, t->ops.stream_destroy};
}

static queue_kind event_kind(const tstor__devtype *t) {
  return (queue_kind){"event", sizeof(tstor_event), t->ops.event_create, t->ops.event_destroy};
}

static int queue_new(tstor_context *ctx, tstor_device dev, int event, void **out) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  const tstor__devtype *t = type_of(ctx, dev);
  queue_kind kind = event ? event_kind(t) : stream_kind(t);
  queue_object *q = tstor__calloc(1, kind.size);
  if (!q) return tstor__err(TSTOR_ENOMEM, "out of memory for a%s %s", event ? "n" : "", kind.name);
  if (t->has_streams) {
    tstor__err_clear();
    if ((rc = kind.create(t->state, dev.index, &q->handle))) {
      tstor__free(q);
      return backend_rc(ctx, dev, rc, event ? "event_create" : "stream_create");
    }
  }
  if ((rc = tstor__handle_add(q))) {
    if (q->handle) kind.destroy(t->state, dev.index, q->handle);
    tstor__free(q);
    return rc;
  }
  q->ctx = ctx;
  q->dev = dev;
  tstor__ctx_retain(ctx);
  *out = q;
  return 0;
}

/* Frees q; a stream once its work is done. */
static void queue_free(queue_object *q, int event) {
  if (!q) return;
  const char *name = event ? "event" : "stream";
  if (TSTOR__UNLIKELY(!tstor__handle_remove(q)))
    tstor__misuse(name, q, "freed twice, or never made");
  if (q->handle) {
    const tstor__devtype *t = type_of(q->ctx, q->dev);
    if (!event) t->ops.stream_synchronize(t->state, q->dev.index, q->handle);
    (event ? event_kind(t) : stream_kind(t)).destroy(t->state, q->dev.index, q->handle);
  }
  tstor_context *ctx = q->ctx;
  tstor__free(q);
  tstor__ctx_release(ctx);
}

int tstor_stream_new(tstor_context *ctx, tstor_device dev, tstor_stream **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "stream_new: NULL out");
  return queue_new(ctx, dev, 0, (void **)out);
}

/* Waits for the stream's work before it goes. */
void tstor_stream_free(tstor_stream *s) { queue_free(s ? &s->q : NULL, 0); }

int tstor_stream_synchronize(tstor_stream *s) {
  if (!s) return tstor__err(TSTOR_EINVAL, "stream_synchronize: NULL stream");
  if (!s->q.handle) return 0;
  const tstor__devtype *t = type_of(s->q.ctx, s->q.dev);
  tstor__err_clear();
  return backend_rc(s->q.ctx, s->q.dev,
                    t->ops.stream_synchronize(t->state, s->q.dev.index, s->q.handle),
                    "stream_synchronize");
}

int tstor_event_new(tstor_context *ctx, tstor_device dev, tstor_event **out) {
  if (!out) return tstor__err(TSTOR_EINVAL, "event_new: NULL out");
  return queue_new(ctx, dev, 1, (void **)out);
}

void tstor_event_free(tstor_event *e) { queue_free(e ? &e->q : NULL, 1); }

static int same_device(tstor_device a, tstor_device b) {
  return a.type == b.type && a.index == b.index;
}

int tstor_event_record(tstor_event *e, tstor_stream *s) {
  if (!e || !s) return tstor__err(TSTOR_EINVAL, "event_record: NULL argument");
  if (e->q.ctx != s->q.ctx || !same_device(e->q.dev, s->q.dev))
    return tstor__err(TSTOR_EINVAL, "event_record: event and stream are on different devices");
  if (!e->q.handle) return 0;
  const tstor__devtype *t = type_of(e->q.ctx, e->q.dev);
  tstor__err_clear();
  return backend_rc(e->q.ctx, e->q.dev,
                    t->ops.event_record(t->state, e->q.dev.index, e->q.handle, s->q.handle),
                    "event_record");
}

int tstor_event_query(tstor_event *e) {
  if (!e) return tstor__err(TSTOR_EINVAL, "event_query: NULL event");
  if (!e->q.handle) return 0;
  const tstor__devtype *t = type_of(e->q.ctx, e->q.dev);
  int rc = t->ops.event_query(t->state, e->q.dev.index, e->q.handle);
  return rc == TSTOR_EAGAIN ? rc : backend_rc(e->q.ctx, e->q.dev, rc, "event_query");
}

int tstor_event_synchronize(tstor_event *e) {
  if (!e) return tstor__err(TSTOR_EINVAL, "event_synchronize: NULL event");
  if (!e->q.handle) return 0;
  const tstor__devtype *t = type_of(e->q.ctx, e->q.dev);
  tstor__err_clear();
  return backend_rc(e->q.ctx, e->q.dev,
                    t->ops.event_synchronize(t->state, e->q.dev.index, e->q.handle),
                    "event_synchronize");
}

int tstor_stream_wait_event(tstor_stream *s, tstor_event *e) {
  if (!s || !e) return tstor__err(TSTOR_EINVAL, "stream_wait_event: NULL argument");
  if (s->q.ctx != e->q.ctx)
    return tstor__err(TSTOR_EINVAL, "stream_wait_event: different contexts");
  if (!e->q.handle) return 0;
  if (s->q.handle && s->q.dev.type == e->q.dev.type) {
    const tstor__devtype *t = type_of(s->q.ctx, s->q.dev);
    tstor__err_clear();
    return backend_rc(s->q.ctx, s->q.dev,
                      t->ops.stream_wait_event(t->state, s->q.dev.index, s->q.handle, e->q.handle),
                      "stream_wait_event");
  }
  /* Different backends cannot wait on each other's events: wait on the host. */
  return tstor_event_synchronize(e);
}

int tstor_storage_copy_async(tstor_storage *dst, const tstor_storage *src, tstor_stream *s) {
  if (!dst || !src || !s) return tstor__err(TSTOR_EINVAL, "storage_copy_async: NULL argument");
  if (dst->ctx != src->ctx || dst->ctx != s->q.ctx)
    return tstor__err(TSTOR_EINVAL, "storage_copy_async: different contexts");
  if (dst->nbytes != src->nbytes)
    return tstor__err(TSTOR_ESIZE, "storage_copy_async: source has %zu bytes, destination %zu",
                      src->nbytes, dst->nbytes);
  if (!same_device(s->q.dev, dst->device) && !same_device(s->q.dev, src->device))
    return tstor__err(TSTOR_EINVAL, "storage_copy_async: the stream is on neither device");
  if (dst == src) return 0;
  tstor__err_clear();
  return tstor__copy_bytes(dst->ctx, dst->device, dst->data, src->device, src->data, src->nbytes,
                           type_of(s->q.ctx, s->q.dev)->module, s->q.handle);
}

int tstor_storage_record_stream(tstor_storage *st, tstor_stream *s) {
  if (!st || !s) return tstor__err(TSTOR_EINVAL, "storage_record_stream: NULL argument");
  tstor_storage *root = st->base ? st->base : st;
  tstor__allocator *a = root->alloc;
  if (!a || !a->ops.record_stream || !s->q.handle ||
      a->module != type_of(s->q.ctx, s->q.dev)->module)
    return 0;
  tstor__err_clear();
  return backend_rc(
      s->q.ctx, s->q.dev,
      a->ops.record_stream(a->state, root->device.index, root->data, root->alloc_ctx, s->q.handle),
      "record_stream");
}

int tstor_synchronize(tstor_context *ctx, tstor_device dev) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  const tstor__devtype *t = type_of(ctx, dev);
  if (!t->ops.synchronize) return 0;
  tstor__err_clear();
  return backend_rc(ctx, dev, t->ops.synchronize(t->state, dev.index), "synchronize");
}
