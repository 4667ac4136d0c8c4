/* Devices as the user sees them: names, counts, the default device and the
 * allocator's statistics, all read from the registry of a context. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

int tstor_device_parse(tstor_context *ctx, const char *text, tstor_device *out) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  return tstor__device_lookup(ctx, text, out);
}

int tstor_device_format(tstor_context *ctx, tstor_device dev, char *buf, size_t size) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!buf) return tstor__err(TSTOR_EINVAL, "device_format: NULL buffer");
  rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  int n = snprintf(buf, size, "%s:%d", ctx->types[dev.type].name, dev.index);
  if (n < 0 || (size_t)n >= size) {
    if (size) buf[0] = '\0';
    return tstor__err(TSTOR_ERANGE, "device name needs %d bytes, buffer has %zu", n + 1, size);
  }
  return 0;
}

int tstor_device_type_count(tstor_context *ctx) {
  int rc = tstor__ctx(&ctx);
  return rc ? rc : ctx->ntypes;
}

const char *tstor_device_type_name(tstor_context *ctx, int type) {
  if (tstor__ctx(&ctx) != 0 || type < 0 || type >= ctx->ntypes) return NULL;
  return ctx->types[type].name;
}

int tstor_device_count(tstor_context *ctx, int type) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (type < 0 || type >= ctx->ntypes)
    return tstor__err(TSTOR_ENODEV, "unknown device type id %d", type);
  return ctx->types[type].count;
}

int tstor_device_default(tstor_context *ctx, tstor_device *out) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "device_default: NULL argument");
  *out = ctx->default_device;
  return 0;
}

int tstor_copy_path_of(tstor_context *ctx, int src_type, int dst_type) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (src_type < 0 || src_type >= ctx->ntypes || dst_type < 0 || dst_type >= ctx->ntypes)
    return tstor__err(TSTOR_ENODEV, "unknown device type id (%d or %d)", src_type, dst_type);
  return ctx->copy_path[src_type][dst_type];
}

static int allocator_op(tstor_context *ctx, tstor_device dev, int which, tstor_stats *out) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  tstor__allocator *a = ctx->types[dev.type].allocator;
  switch (which) {
    case 0:
      if (!out) return tstor__err(TSTOR_EINVAL, "device_stats: NULL argument");
      memset(out, 0, sizeof *out);
      return a->ops.stats ? a->ops.stats(a->state, dev.index, out) : 0;
    case 1: return a->ops.reset_peak ? a->ops.reset_peak(a->state, dev.index) : 0;
    default: return a->ops.empty_cache ? a->ops.empty_cache(a->state, dev.index) : 0;
  }
}

int tstor_device_stats(tstor_context *ctx, tstor_device dev, tstor_stats *out) {
  return allocator_op(ctx, dev, 0, out);
}
int tstor_device_reset_peak(tstor_context *ctx, tstor_device dev) {
  return allocator_op(ctx, dev, 1, NULL);
}
int tstor_device_empty_cache(tstor_context *ctx, tstor_device dev) {
  return allocator_op(ctx, dev, 2, NULL);
}
