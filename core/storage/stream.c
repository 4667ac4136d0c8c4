/* Streams and events: the backend's when it has them; otherwise stand-ins
 * whose work is complete before each call returns. */
#include "internal.h"

#include <string.h>

struct tstor_stream {
  tstor_context *ctx; /* holds a reference */
  tstor_device dev;
  void *handle; /* the backend's, or NULL for a synchronous device */
};

struct tstor_event {
  tstor_context *ctx; /* holds a reference */
  tstor_device dev;
  void *handle;
};

static const tstor__devtype *type_of(tstor_context *ctx, tstor_device dev) {
  return &ctx->types[dev.type];
}

static int backend_rc(tstor_context *ctx, tstor_device dev, int rc, const char *what) {
  if (rc && !tstor_last_error()[0])
    tstor__err(rc, "%s:%d: %s failed", ctx->types[dev.type].name, dev.index, what);
  return rc;
}

int tstor_stream_new(tstor_context *ctx, tstor_device dev, tstor_stream **out) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "stream_new: NULL out");
  rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  tstor_stream *s = tstor__calloc(1, sizeof *s);
  if (!s) return tstor__err(TSTOR_ENOMEM, "out of memory for a stream");
  const tstor__devtype *t = type_of(ctx, dev);
  if (t->has_streams) {
    tstor__err_clear();
    rc = t->ops.stream_create(t->state, dev.index, &s->handle);
    if (rc) {
      tstor__free(s);
      return backend_rc(ctx, dev, rc, "stream_create");
    }
  }
  if ((rc = tstor__handle_add(s))) {
    if (s->handle) t->ops.stream_destroy(t->state, dev.index, s->handle);
    tstor__free(s);
    return rc;
  }
  s->ctx = ctx;
  s->dev = dev;
  tstor__ctx_retain(ctx);
  *out = s;
  return 0;
}

void tstor_stream_free(tstor_stream *s) {
  if (!s) return;
  if (TSTOR__UNLIKELY(!tstor__handle_remove(s))) tstor__misuse("stream", s, "freed twice, or never made");
  if (s->handle) {
    const tstor__devtype *t = type_of(s->ctx, s->dev);
    t->ops.stream_synchronize(t->state, s->dev.index, s->handle);
    t->ops.stream_destroy(t->state, s->dev.index, s->handle);
  }
  tstor_context *ctx = s->ctx;
  tstor__free(s);
  tstor__ctx_release(ctx);
}

int tstor_stream_synchronize(tstor_stream *s) {
  if (!s) return tstor__err(TSTOR_EINVAL, "stream_synchronize: NULL stream");
  if (!s->handle) return 0;
  const tstor__devtype *t = type_of(s->ctx, s->dev);
  tstor__err_clear();
  return backend_rc(s->ctx, s->dev, t->ops.stream_synchronize(t->state, s->dev.index, s->handle),
                    "stream_synchronize");
}

int tstor_event_new(tstor_context *ctx, tstor_device dev, tstor_event **out) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "event_new: NULL out");
  rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  tstor_event *e = tstor__calloc(1, sizeof *e);
  if (!e) return tstor__err(TSTOR_ENOMEM, "out of memory for an event");
  const tstor__devtype *t = type_of(ctx, dev);
  if (t->has_streams) {
    tstor__err_clear();
    rc = t->ops.event_create(t->state, dev.index, &e->handle);
    if (rc) {
      tstor__free(e);
      return backend_rc(ctx, dev, rc, "event_create");
    }
  }
  if ((rc = tstor__handle_add(e))) {
    if (e->handle) t->ops.event_destroy(t->state, dev.index, e->handle);
    tstor__free(e);
    return rc;
  }
  e->ctx = ctx;
  e->dev = dev;
  tstor__ctx_retain(ctx);
  *out = e;
  return 0;
}

void tstor_event_free(tstor_event *e) {
  if (!e) return;
  if (TSTOR__UNLIKELY(!tstor__handle_remove(e))) tstor__misuse("event", e, "freed twice, or never made");
  if (e->handle) {
    const tstor__devtype *t = type_of(e->ctx, e->dev);
    t->ops.event_destroy(t->state, e->dev.index, e->handle);
  }
  tstor_context *ctx = e->ctx;
  tstor__free(e);
  tstor__ctx_release(ctx);
}

static int same_device(tstor_device a, tstor_device b) {
  return a.type == b.type && a.index == b.index;
}

int tstor_event_record(tstor_event *e, tstor_stream *s) {
  if (!e || !s) return tstor__err(TSTOR_EINVAL, "event_record: NULL argument");
  if (e->ctx != s->ctx || !same_device(e->dev, s->dev))
    return tstor__err(TSTOR_EINVAL, "event_record: event and stream are on different devices");
  if (!e->handle) return 0;
  const tstor__devtype *t = type_of(e->ctx, e->dev);
  tstor__err_clear();
  return backend_rc(e->ctx, e->dev, t->ops.event_record(t->state, e->dev.index, e->handle, s->handle),
                    "event_record");
}

int tstor_event_query(tstor_event *e) {
  if (!e) return tstor__err(TSTOR_EINVAL, "event_query: NULL event");
  if (!e->handle) return 0;
  const tstor__devtype *t = type_of(e->ctx, e->dev);
  int rc = t->ops.event_query(t->state, e->dev.index, e->handle);
  return rc == TSTOR_EAGAIN ? rc : backend_rc(e->ctx, e->dev, rc, "event_query");
}

int tstor_event_synchronize(tstor_event *e) {
  if (!e) return tstor__err(TSTOR_EINVAL, "event_synchronize: NULL event");
  if (!e->handle) return 0;
  const tstor__devtype *t = type_of(e->ctx, e->dev);
  tstor__err_clear();
  return backend_rc(e->ctx, e->dev, t->ops.event_synchronize(t->state, e->dev.index, e->handle),
                    "event_synchronize");
}

int tstor_stream_wait_event(tstor_stream *s, tstor_event *e) {
  if (!s || !e) return tstor__err(TSTOR_EINVAL, "stream_wait_event: NULL argument");
  if (s->ctx != e->ctx)
    return tstor__err(TSTOR_EINVAL, "stream_wait_event: different contexts");
  if (!e->handle) return 0;
  if (s->handle && s->dev.type == e->dev.type) {
    const tstor__devtype *t = type_of(s->ctx, s->dev);
    tstor__err_clear();
    return backend_rc(s->ctx, s->dev,
                      t->ops.stream_wait_event(t->state, s->dev.index, s->handle, e->handle),
                      "stream_wait_event");
  }
  /* Different backends cannot wait on each other's events: wait on the host. */
  return tstor_event_synchronize(e);
}

int tstor_storage_copy_async(tstor_storage *dst, const tstor_storage *src, tstor_stream *s) {
  if (!dst || !src || !s) return tstor__err(TSTOR_EINVAL, "storage_copy_async: NULL argument");
  if (dst->ctx != src->ctx || dst->ctx != s->ctx)
    return tstor__err(TSTOR_EINVAL, "storage_copy_async: different contexts");
  if (dst->nbytes != src->nbytes)
    return tstor__err(TSTOR_ESIZE, "storage_copy_async: source has %zu bytes, destination %zu",
                      src->nbytes, dst->nbytes);
  if (!same_device(s->dev, dst->device) && !same_device(s->dev, src->device))
    return tstor__err(TSTOR_EINVAL, "storage_copy_async: the stream is on neither device");
  if (dst == src) return 0;
  tstor__err_clear();
  return tstor__copy_bytes(dst->ctx, dst->device, dst->data, src->device, src->data, src->nbytes,
                           type_of(s->ctx, s->dev)->module, s->handle);
}

int tstor_storage_record_stream(tstor_storage *st, tstor_stream *s) {
  if (!st || !s) return tstor__err(TSTOR_EINVAL, "storage_record_stream: NULL argument");
  tstor_storage *root = st->base ? st->base : st;
  tstor__allocator *a = root->alloc;
  if (!a || !a->ops.record_stream || !s->handle || a->module != type_of(s->ctx, s->dev)->module)
    return 0;
  tstor__err_clear();
  return backend_rc(s->ctx, s->dev,
                    a->ops.record_stream(a->state, root->device.index, root->data, root->alloc_ctx,
                                         s->handle),
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
