/* Moving and filling bytes between devices, through the copy table. */
#include "internal.h"

#include <string.h>

/* Staging buffers are bounded so a huge copy needs no huge host allocation. */
#define TSTOR__STAGE_CHUNK ((size_t)16 << 20)

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
  if (path == TSTOR_COPY_DIRECT)
    return kernel(ctx, s, d, dst_dev, dst, src_dev, src, nbytes, stream_module, stream);
  if (path == TSTOR_COPY_HOST) {
    memmove(dst, src, nbytes);
    return 0;
  }
  /* Staged. A host side needs no buffer: its bytes are host memory already. */
  int h = ctx->host_type;
  tstor_device host = {h, 0};
  if (ctx->types[s].ops.flags & TSTOR_DEVICE_HOST)
    return kernel(ctx, h, d, dst_dev, dst, host, src, nbytes, stream_module, stream);
  if (ctx->types[d].ops.flags & TSTOR_DEVICE_HOST)
    return kernel(ctx, s, h, host, dst, src_dev, src, nbytes, stream_module, stream);
  size_t chunk = nbytes < TSTOR__STAGE_CHUNK ? nbytes : TSTOR__STAGE_CHUNK;
  char *buf = tstor__malloc(chunk);
  if (!buf) return tstor__err(TSTOR_ENOMEM, "no host memory for a %zu-byte staging buffer", chunk);
  int rc = 0;
  for (size_t off = 0; off < nbytes && rc == 0; off += chunk) {
    size_t n = nbytes - off < chunk ? nbytes - off : chunk;
    rc = kernel(ctx, s, h, host, buf, src_dev, (const char *)src + off, n, NULL, NULL);
    if (rc == 0) rc = kernel(ctx, h, d, dst_dev, (char *)dst + off, host, buf, n, NULL, NULL);
  }
  tstor__free(buf);
  return rc;
}

static void fill_host(char *p, size_t nbytes, const void *pattern, size_t psize) {
  if (psize == 1) {
    memset(p, *(const unsigned char *)pattern, nbytes);
    return;
  }
  size_t done = psize < nbytes ? psize : nbytes;
  memcpy(p, pattern, done);
  while (done < nbytes) { /* doubling: log2(n) memcpy calls */
    size_t n = done < nbytes - done ? done : nbytes - done;
    memcpy(p + done, p, n);
    done += n;
  }
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
  size_t chunk = nbytes < TSTOR__STAGE_CHUNK ? nbytes : TSTOR__STAGE_CHUNK;
  char *buf = tstor__malloc(chunk);
  if (!buf) return tstor__err(TSTOR_ENOMEM, "no host memory for a %zu-byte fill buffer", chunk);
  fill_host(buf, chunk, pattern, psize);
  int rc = 0;
  tstor_device host = {ctx->host_type, 0};
  for (size_t off = 0; off < nbytes && rc == 0; off += chunk) {
    size_t n = nbytes - off < chunk ? nbytes - off : chunk;
    rc = ctx->host_type < 0
             ? tstor__err(TSTOR_ENOTSUP, "%s has no fill and there is no host device", t->name)
             : tstor__copy_bytes(ctx, dev, (char *)ptr + off, host, buf, n, NULL, NULL);
  }
  tstor__free(buf);
  return rc;
}
