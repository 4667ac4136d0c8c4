/* Moving and filling bytes between devices, through the copy table, and the
 * one loop that stages a move through host memory. */
#include "internal.h"
#include "host/parallel.h"

#include <stdint.h>
#include <string.h>

static int kernel(tstor_context *ctx, int s, int d, tstor_device dst_dev, void *dst,
                  tstor_device src_dev, const void *src, size_t n, tstor_module *stream_module,
                  void *stream) {
  const tstor__copy_entry *e = &ctx->copy_table[s][d];
  void *st = stream && stream_module == e->module ? stream : NULL;
  tstor__err_clear();
  int rc = e->fn(e->state, dst, dst_dev.index, src, src_dev.index, n, st);
  if (rc && !tstor_last_error()[0])
    tstor__err(rc, "copy %s -> %s of %zu bytes failed", ctx->types[s].name, ctx->types[d].name,
               n);
  return rc;
}

int tstor__copy_possible(tstor_context *ctx, tstor_device dst_dev, tstor_device src_dev) {
  int s = src_dev.type, d = dst_dev.type;
  if (ctx->copy_path[s][d] != TSTOR_COPY_NONE) return 0;
  if (ctx->types[s].ops.flags & TSTOR_DEVICE_NO_DATA)
    return tstor__err(TSTOR_ENODATA, "cannot copy out of a %s storage: it has no data",
                      ctx->types[s].name);
  return tstor__err(TSTOR_ENOTSUP, "no copy path from %s to %s", ctx->types[s].name,
                    ctx->types[d].name);
}

int tstor__copy_bytes(tstor_context *ctx, tstor_device dst_dev, void *dst,
                      tstor_device src_dev, const void *src, size_t nbytes,
                      tstor_module *stream_module, void *stream) {
  int s = src_dev.type, d = dst_dev.type;
  int path = ctx->copy_path[s][d];
  if (path == TSTOR_COPY_CHECK) return 0;
  if (path == TSTOR_COPY_NONE) return tstor__copy_possible(ctx, dst_dev, src_dev);
  if (nbytes == 0) return 0;
  /* Between host-memory devices with no stream to order against, the core's
   * own threaded copy does what the backend's kernel would, on every core. */
  if (path == TSTOR_COPY_DIRECT && stream == NULL &&
      (ctx->types[s].ops.flags & ctx->types[d].ops.flags & TSTOR_DEVICE_HOST))
    path = TSTOR_COPY_HOST;
  if (path == TSTOR_COPY_DIRECT)
    return kernel(ctx, s, d, dst_dev, dst, src_dev, src, nbytes, stream_module, stream);
  if (path == TSTOR_COPY_HOST) {
    tstor__host_copy(dst, src, nbytes);
    return 0;
  }
  /* Staged. A host side needs no buffer: its bytes are host memory already. */
  int h = ctx->host_type;
  tstor_device host = {h, 0};
  if (ctx->types[s].ops.flags & TSTOR_DEVICE_HOST)
    return kernel(ctx, h, d, dst_dev, dst, host, src, nbytes, stream_module, stream);
  if (ctx->types[d].ops.flags & TSTOR_DEVICE_HOST)
    return kernel(ctx, s, h, host, dst, src_dev, src, nbytes, stream_module, stream);
  tstor__stage_side to = {dst_dev, dst, 1}, from = {src_dev, (void *)(uintptr_t)src, 1};
  return tstor__stage(ctx, &to, &from, nbytes, NULL, NULL);
}

/* ---------------------------------------------------------------- staging */

static int in_host_memory(tstor_context *ctx, tstor_device dev) {
  return dev.type == TSTOR__HOST_MEMORY || (ctx->types[dev.type].ops.flags & TSTOR_DEVICE_HOST);
}

/* Whether two sides' bytes can be the same memory: both host memory, or one
 * device. */
static int same_memory(tstor_context *ctx, const tstor__stage_side *a,
                       const tstor__stage_side *b) {
  if (in_host_memory(ctx, a->dev) && in_host_memory(ctx, b->dev)) return 1;
  return a->dev.type == b->dev.type && a->dev.index == b->dev.index;
}

/* Whether [a, a + an) and [b, b + bn) share a byte. */
static int ranges_meet(uintptr_t a, size_t an, uintptr_t b, size_t bn) {
  return an > 0 && bn > 0 && a < b + bn && b < a + an;
}

/* Whether chunks of `chunk` items, taken first to last (or last to first),
 * never write a source item before it has been read: after the chunks up to
 * each boundary, what was written must miss what is still to be read. */
static int order_is_safe(const tstor__stage_side *dst, const tstor__stage_side *src,
                         size_t count, size_t chunk, int backward) {
  uintptr_t d = (uintptr_t)dst->ptr, s = (uintptr_t)src->ptr;
  size_t des = dst->item, ses = src->item;
  for (size_t b = chunk; b < count; b += chunk) {
    int meet = backward ? ranges_meet(d + b * des, (count - b) * des, s, b * ses)
                        : ranges_meet(d, b * des, s + b * ses, (count - b) * ses);
    if (meet) return 0;
  }
  return 1;
}

/* Moves n items of a side to or from host memory at `host`. */
static int side_read(tstor_context *ctx, void *host, const tstor__stage_side *side, size_t first,
                     size_t n) {
  const char *p = (const char *)side->ptr + first * side->item;
  if (in_host_memory(ctx, side->dev)) {
    memcpy(host, p, n * side->item);
    return 0;
  }
  tstor_device h = {ctx->host_type, 0};
  return tstor__copy_bytes(ctx, h, host, side->dev, p, n * side->item, NULL, NULL);
}

static int side_write(tstor_context *ctx, const tstor__stage_side *side, size_t first,
                      const void *host, size_t n) {
  char *p = (char *)side->ptr + first * side->item;
  tstor_device h = {ctx->host_type, 0};
  return tstor__copy_bytes(ctx, side->dev, p, h, host, n * side->item, NULL, NULL);
}

int tstor__stage(tstor_context *ctx, const tstor__stage_side *dst,
                 const tstor__stage_side *src, size_t count, tstor__stage_fn fn, void *arg) {
  if (count == 0) return 0;
  size_t des = dst->item, ses = src ? src->item : 0;
  int dst_here = in_host_memory(ctx, dst->dev);
  int src_here = src && in_host_memory(ctx, src->dev);
  if (fn == NULL && src_here && dst_here) {
    tstor__host_copy(dst->ptr, src->ptr, count * des);
    return 0;
  }
  if ((!dst_here || (src && !src_here)) && ctx->host_type < 0)
    return tstor__err(TSTOR_ENOTSUP, "no host-memory device is loaded to stage through");
  size_t chunk = TSTOR__STAGE_BYTES / (des > ses ? des : ses);
  if (chunk == 0) chunk = 1;
  if (chunk > count) chunk = count;

  /* Overlap: read every chunk before it is written over, by the order of the
   * chunks where one order does that, else by reading the whole source first.
   * Both sides in host memory: the source is staged too, since a conversion
   * in place would read what it has just written. */
  int backward = 0, whole = 0;
  if (src && same_memory(ctx, dst, src) &&
      ranges_meet((uintptr_t)dst->ptr, count * des, (uintptr_t)src->ptr, count * ses)) {
    src_here = 0;
    if (!order_is_safe(dst, src, count, chunk, 0)) {
      if (order_is_safe(dst, src, count, chunk, 1))
        backward = 1;
      else
        whole = 1;
    }
  }
  /* A byte copy needs one buffer at most: the source is read into the
   * destination's buffer, or straight into a destination in host memory. */
  int direct_read = fn == NULL && dst_here && !whole;
  size_t sbytes = (whole ? count : chunk) * ses;
  char *sbuf = NULL, *dbuf = NULL;
  int rc = 0;
  if (src && !src_here && !direct_read && (sbuf = tstor__malloc(sbytes)) == NULL)
    rc = tstor__err(TSTOR_ENOMEM, "no host memory for a %zu-byte staging buffer", sbytes);
  else if (!dst_here && fn != NULL && (dbuf = tstor__malloc(chunk * des)) == NULL)
    rc = tstor__err(TSTOR_ENOMEM, "no host memory for a %zu-byte staging buffer", chunk * des);
  if (rc == 0 && whole) rc = side_read(ctx, sbuf, src, 0, count);
  size_t nchunks = (count + chunk - 1) / chunk;
  for (size_t c = 0; c < nchunks && rc == 0; c++) {
    size_t i = (backward ? nchunks - 1 - c : c) * chunk;
    size_t n = count - i < chunk ? count - i : chunk;
    char *to = dst_here ? (char *)dst->ptr + i * des : dbuf;
    const char *from = NULL;
    if (src && src_here) {
      from = (const char *)src->ptr + i * ses;
    } else if (src && whole) {
      from = sbuf + i * ses;
    } else if (src && direct_read) {
      rc = side_read(ctx, to, src, i, n);
      continue;
    } else if (src) {
      rc = side_read(ctx, sbuf, src, i, n);
      from = sbuf;
    }
    if (rc) break;
    if (fn != NULL) {
      rc = fn(arg, to, from, i, n);
    } else if (dst_here) {
      memcpy(to, from, n * des);
    } else {
      to = (char *)(uintptr_t)from; /* written out from where it was read */
    }
    if (rc == 0 && !dst_here) rc = side_write(ctx, dst, i, to, n);
  }
  tstor__free(sbuf);
  tstor__free(dbuf);
  return rc;
}

/* ------------------------------------------------------------------- fill */

static void fill_host(char *p, size_t nbytes, const void *pattern, size_t psize) {
  tstor__host_fill(p, nbytes, pattern, psize);
}

/* A fill staged through host memory: the buffer is filled once and written
 * out for every chunk (chunks start on multiples of the pattern). */
typedef struct fill_stage {
  const void *pattern;
  size_t psize;
  const void *filled; /* the buffer that holds the pattern already */
  size_t filled_bytes;
} fill_stage;

static int fill_chunk(void *arg, void *to, const void *from, size_t first, size_t n) {
  fill_stage *f = arg;
  (void)from;
  (void)first;
  if (to == f->filled && n <= f->filled_bytes) return 0;
  fill_host(to, n, f->pattern, f->psize);
  f->filled = to;
  f->filled_bytes = n;
  return 0;
}

int tstor__fill_bytes(tstor_context *ctx, tstor_device dev, void *ptr, size_t nbytes,
                      const void *pattern, size_t psize) {
  const tstor__devtype *t = &ctx->types[dev.type];
  if (nbytes == 0 || (t->ops.flags & TSTOR_DEVICE_NO_DATA)) return 0;
  if (t->ops.fill) {
    int rc = t->ops.fill(t->state, dev.index, ptr, nbytes, pattern, psize, NULL);
    if (rc != TSTOR_ENOTSUP) return rc;
  }
  if (t->ops.flags & TSTOR_DEVICE_HOST) {
    fill_host(ptr, nbytes, pattern, psize);
    return 0;
  }
  /* No fill kernel: copy a host buffer of the pattern, chunk by chunk. */
  fill_stage f = {pattern, psize, NULL, 0};
  tstor__stage_side to = {dev, ptr, 1};
  return tstor__stage(ctx, &to, NULL, nbytes, fill_chunk, &f);
}
