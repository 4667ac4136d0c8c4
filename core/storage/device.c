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

int tstor_device_describe(tstor_context *ctx, tstor_device dev, char *buf, size_t size) {
  int rc = tstor__ctx(&ctx); /* NULL: the default context, used below as well */
  if (rc) return rc;
  rc = tstor_device_format(ctx, dev, buf, size);
  if (rc) return rc;
  const tstor__devtype *t = &ctx->types[dev.type];
  if (!t->ops.describe) return 0;
  /* The backend writes into a buffer of ours, so a module that overruns its
   * `size` or forgets the NUL cannot reach past the caller's. */
  char what[256];
  what[0] = '\0';
  tstor__err_clear();
  rc = t->ops.describe(t->state, dev.index, what, sizeof what);
  if (rc) {
    buf[0] = '\0';
    if (!tstor_last_error()[0])
      tstor__err(rc, "%s:%d: describe failed", t->name, dev.index);
    return rc;
  }
  what[sizeof what - 1] = '\0';
  if (!what[0]) return 0;
  size_t have = strlen(buf);
  int n = snprintf(buf + have, size - have, " -> %s", what);
  if (n < 0 || (size_t)n >= size - have) {
    buf[0] = '\0';
    return tstor__err(TSTOR_ERANGE, "device description needs %zu bytes, buffer has %zu",
                      have + (size_t)n + 1, size);
  }
  return 0;
}

/* The capability bits of a type: the optional ops its backend registered. */
static uint32_t type_capabilities(const tstor__devtype *t) {
  uint32_t caps = 0;
  if (t->ops.stream_create) caps |= TSTOR_DEVICE_CAP_STREAMS;
  if (t->ops.fill) caps |= TSTOR_DEVICE_CAP_FILL;
  if (t->ops.convert) caps |= TSTOR_DEVICE_CAP_CONVERT;
  if (t->ops.copy_strided) caps |= TSTOR_DEVICE_CAP_COPY_STRIDED;
  if (t->ops.map) caps |= TSTOR_DEVICE_CAP_MAPPING;
  if (t->ops.properties) caps |= TSTOR_DEVICE_CAP_PROPERTIES;
  return caps;
}

int tstor_device_get_properties(tstor_context *ctx, tstor_device dev,
                                tstor_device_properties *out) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "device_get_properties: NULL argument");
  size_t n = tstor__out_struct_size(out->struct_size, sizeof *out, sizeof *out,
                                    "device_get_properties", "tstor_device_properties");
  if (n == 0) return TSTOR_EINVAL;
  rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  const tstor__devtype *t = &ctx->types[dev.type];
  /* The core's own struct: the module never sees the caller's, so a module
   * built for a newer header cannot write past it. */
  tstor_device_properties p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  if (t->ops.properties) {
    tstor__err_clear();
    rc = t->ops.properties(t->state, dev.index, &p);
    if (rc) {
      if (!tstor_last_error()[0]) tstor__err(rc, "%s:%d: properties failed", t->name, dev.index);
      return rc;
    }
  }
  p.struct_size = (uint32_t)n;
  p.capabilities = type_capabilities(t);
  p.reported &= TSTOR_PROP_FREE | TSTOR_PROP_TOTAL | TSTOR_PROP_ALIGNMENT |
                TSTOR_PROP_MAX_ALLOCATION | TSTOR_PROP_ID;
  p.reserved_ = 0;
  p.id[sizeof p.id - 1] = '\0';
  if (!(p.reported & TSTOR_PROP_ID)) p.id[0] = '\0';
  memcpy(out, &p, n);
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

unsigned tstor_device_type_flags(tstor_context *ctx, int type) {
  if (tstor__ctx(&ctx) != 0 || type < 0 || type >= ctx->ntypes) return 0;
  return ctx->types[type].ops.flags & (TSTOR_DEVICE_HOST | TSTOR_DEVICE_NO_DATA);
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

/* tstor_stats as ABI 1.0 had it: the same counters, without struct_size. An
 * allocator table built for 1.0 fills this one. */
typedef struct stats_1_0 {
#define FIELD(name, comment) uint64_t name;
  TSTOR_STATS_FIELDS_FIRST(FIELD)
#undef FIELD
} stats_1_0;

/* The allocator's counters in the core's own tstor_stats, whatever layout the
 * module was built for: the module never sees the caller's struct, so a
 * module built for a newer header cannot write past it. */
static int module_stats(tstor__allocator *a, int index, tstor_stats *st) {
  memset(st, 0, sizeof *st);
  st->struct_size = sizeof *st;
  if (!a->ops.stats) return 0;
  int rc;
  if (TSTOR_ABI_MINOR_OF(a->ops.abi_version) < 1) {
    stats_1_0 old;
    memset(&old, 0, sizeof old);
    /* Same arguments; the pointee is the layout the module was compiled for. */
    rc = ((int (*)(void *, int, stats_1_0 *))(void (*)(void))a->ops.stats)(a->state, index, &old);
#define FIELD(name, comment) st->name = old.name;
    TSTOR_STATS_FIELDS_FIRST(FIELD)
#undef FIELD
  } else {
    rc = a->ops.stats(a->state, index, st);
  }
  st->struct_size = sizeof *st;
  return rc;
}

static int allocator_op(tstor_context *ctx, tstor_device dev, int which) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  tstor__allocator *a = ctx->types[dev.type].allocator;
  return which == 1 ? (a->ops.reset_peak ? a->ops.reset_peak(a->state, dev.index) : 0)
                    : (a->ops.empty_cache ? a->ops.empty_cache(a->state, dev.index) : 0);
}

/* The first sized layout: what a struct_size of 0 stands for. */
#define STATS_FIRST_SIZE (offsetof(tstor_stats, oom_count) + sizeof(uint64_t))

int tstor_device_stats(tstor_context *ctx, tstor_device dev, tstor_stats *out) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "device_stats: NULL argument");
  size_t n = tstor__out_struct_size(out->struct_size, STATS_FIRST_SIZE, sizeof *out,
                                    "device_stats", "tstor_stats");
  if (n == 0) return TSTOR_EINVAL;
  rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  tstor_stats st;
  rc = module_stats(ctx->types[dev.type].allocator, dev.index, &st);
  if (rc) return rc;
  memcpy(out, &st, n);
  out->struct_size = (uint32_t)n;
  return 0;
}
int tstor_device_reset_peak(tstor_context *ctx, tstor_device dev) {
  return allocator_op(ctx, dev, 1);
}
int tstor_device_empty_cache(tstor_context *ctx, tstor_device dev) {
  return allocator_op(ctx, dev, 2);
}
