/* The registry: device types, allocators and the copy table of a context.
 *
 * Registration happens only while a context is being opened, one module at a
 * time under the loader; afterwards the registry is read-only, so lookups
 * take no lock. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies a module's table into ours: fields past its declared size stay NULL. */
static void widen(void *dst, size_t dst_size, const void *src, uint32_t src_size) {
  memset(dst, 0, dst_size);
  memcpy(dst, src, src_size < dst_size ? src_size : dst_size);
}

static int check_header(tstor_module *m, const char *what, uint32_t size, uint32_t abi,
                        size_t min_size) {
  if (!m || !m->registering)
    return tstor__err(TSTOR_EINVAL, "%s registered outside init", what);
  if (TSTOR_ABI_MAJOR_OF(abi) != TSTOR_ABI_MAJOR)
    return tstor__err(TSTOR_EABI, "%s table built for ABI %u.%u; this tstor speaks %u.%u", what,
                      TSTOR_ABI_MAJOR_OF(abi), TSTOR_ABI_MINOR_OF(abi), TSTOR_ABI_MAJOR,
                      TSTOR_ABI_MINOR);
  if (size < min_size)
    return tstor__err(TSTOR_EABI, "%s table too small (%u bytes, at least %zu)", what, size,
                      min_size);
  return 0;
}

static int valid_type_name(const char *s) {
  if (!s || !*s || strlen(s) > 32) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
      return 0;
  return 1;
}

static int find_type(tstor_context *ctx, const char *name) {
  for (int i = 0; i < ctx->ntypes; i++)
    if (strcmp(ctx->types[i].name, name) == 0) return i;
  return -1;
}

#define MIN_ALLOC_OPS (offsetof(tstor_allocator_ops, free) + sizeof(void (*)(void)))
#define MIN_DEVICE_OPS (offsetof(tstor_device_ops, allocator) + sizeof(void *))

static int add_allocator(tstor_context *ctx, tstor_module *m, const tstor_allocator_ops *ops,
                         void *state, int type, tstor__allocator **out) {
  int rc = check_header(m, "allocator", ops ? ops->struct_size : 0, ops ? ops->abi_version : 0,
                        MIN_ALLOC_OPS);
  if (rc) return rc;
  if (!ops->allocate || !ops->free)
    return tstor__err(TSTOR_EINVAL, "allocator %s lacks allocate or free",
                      ops->name ? ops->name : "?");
  if (ctx->nallocators == (int)(sizeof ctx->allocators / sizeof ctx->allocators[0]))
    return tstor__err(TSTOR_ENOMEM, "too many allocators");
  tstor__allocator *a = tstor__calloc(1, sizeof *a);
  if (!a) return tstor__err(TSTOR_ENOMEM, "out of memory");
  widen(&a->ops, sizeof a->ops, ops, ops->struct_size);
  a->state = state;
  a->module = m;
  a->type = type;
  ctx->allocators[ctx->nallocators++] = a;
  *out = a;
  return 0;
}

int tstor__registry_register_device_type(tstor_module *m, const tstor_device_ops *ops,
                                         void *state) {
  int rc = check_header(m, "device", ops ? ops->struct_size : 0, ops ? ops->abi_version : 0,
                        MIN_DEVICE_OPS);
  if (rc) return rc;
  tstor_context *ctx = m->ctx;
  if (!valid_type_name(ops->type_name))
    return tstor__err(TSTOR_EINVAL, "invalid device type name \"%s\" (use a-z, 0-9, '_', '-')",
                      ops->type_name ? ops->type_name : "(null)");
  int existing = find_type(ctx, ops->type_name);
  if (existing >= 0)
    return tstor__err(TSTOR_EEXIST, "device type \"%s\" is already registered by backend %s",
                      ops->type_name, ctx->types[existing].module->section->name);
  if (!ops->device_count || !ops->allocator)
    return tstor__err(TSTOR_EINVAL, "device type %s lacks device_count or allocator",
                      ops->type_name);
  if (ctx->ntypes == TSTOR__MAX_TYPES)
    return tstor__err(TSTOR_ENOMEM, "too many device types (at most %d)", TSTOR__MAX_TYPES);
  int count = ops->device_count(state);
  if (count < 0)
    return tstor__err(TSTOR_EBACKEND, "device type %s reported %d devices", ops->type_name,
                      count);

  tstor__devtype *t = &ctx->types[ctx->ntypes];
  memset(t, 0, sizeof *t);
  widen(&t->ops, sizeof t->ops, ops, ops->struct_size);
  t->name = tstor__strdup(ops->type_name);
  if (!t->name) return tstor__err(TSTOR_ENOMEM, "out of memory");
  rc = add_allocator(ctx, m, ops->allocator, state, ctx->ntypes, &t->allocator);
  if (rc) {
    tstor__free(t->name);
    return rc;
  }
  t->state = state;
  t->module = m;
  t->count = count;
  t->has_streams = t->ops.stream_create && t->ops.stream_destroy && t->ops.stream_synchronize &&
                   t->ops.stream_wait_event && t->ops.event_create && t->ops.event_destroy &&
                   t->ops.event_record && t->ops.event_query && t->ops.event_synchronize;
  ctx->ntypes++;
  return 0;
}

int tstor__registry_register_allocator(tstor_module *m, const char *type,
                                       const tstor_allocator_ops *ops, void *state) {
  if (!m || !type) return tstor__err(TSTOR_EINVAL, "allocator without a device type");
  tstor_context *ctx = m->ctx;
  int t = find_type(ctx, type);
  if (t < 0)
    return tstor__err(TSTOR_ENODEV,
                      "allocator for unknown device type \"%s\" (list its backend first)", type);
  tstor__allocator *a;
  return add_allocator(ctx, m, ops, state, t, &a);
}

/* A copy kernel or a batched one (entry.fn or entry.batch set), kept until
 * every module is loaded. */
static int add_copy(tstor_module *m, const char *src, const char *dst, tstor__copy_entry entry) {
  const char *kind = entry.batch ? "batched copy kernel" : "copy kernel";
  if (!m || !m->registering) return tstor__err(TSTOR_EINVAL, "%s registered outside init", kind);
  if (!valid_type_name(src) || !valid_type_name(dst) || (!entry.fn && !entry.batch))
    return tstor__err(TSTOR_EINVAL, "%s needs two type names and a function", kind);
  tstor_context *ctx = m->ctx;
  for (int i = 0; i < ctx->ncopies; i++)
    if (strcmp(ctx->copies[i].src, src) == 0 && strcmp(ctx->copies[i].dst, dst) == 0 &&
        !ctx->copies[i].entry.batch == !entry.batch)
      return tstor__err(TSTOR_EEXIST, "a %s %s -> %s is already registered", kind, src, dst);
  tstor__pending_copy *c = tstor__realloc(ctx->copies, sizeof *c * (size_t)(ctx->ncopies + 1));
  if (!c) return tstor__err(TSTOR_ENOMEM, "out of memory");
  ctx->copies = c;
  c = &ctx->copies[ctx->ncopies];
  c->src = tstor__strdup(src);
  c->dst = tstor__strdup(dst);
  if (!c->src || !c->dst) {
    tstor__free(c->src);
    tstor__free(c->dst);
    return tstor__err(TSTOR_ENOMEM, "out of memory");
  }
  c->entry = entry;
  c->entry.module = m;
  ctx->ncopies++;
  return 0;
}

int tstor__registry_register_copy(tstor_module *m, const char *src, const char *dst,
                                  tstor_copy_fn fn, void *state) {
  return add_copy(m, src, dst, (tstor__copy_entry){.fn = fn, .state = state});
}

int tstor__registry_register_copy_batch(tstor_module *m, const char *src, const char *dst,
                                        tstor_copy_batch_fn fn, void *state) {
  return add_copy(m, src, dst, (tstor__copy_entry){.batch = fn, .state = state});
}

void tstor__registry_drop_module(tstor_context *ctx, tstor_module *m) {
  /* A module registers after every earlier one, so its entries are the last. */
  while (ctx->ncopies > 0 && ctx->copies[ctx->ncopies - 1].entry.module == m) {
    ctx->ncopies--;
    tstor__free(ctx->copies[ctx->ncopies].src);
    tstor__free(ctx->copies[ctx->ncopies].dst);
  }
  while (ctx->nallocators > 0 && ctx->allocators[ctx->nallocators - 1]->module == m)
    tstor__free(ctx->allocators[--ctx->nallocators]);
  while (ctx->ntypes > 0 && ctx->types[ctx->ntypes - 1].module == m)
    tstor__free(ctx->types[--ctx->ntypes].name);
}

void tstor__registry_finish(tstor_context *ctx) {
  ctx->host_type = -1;
  for (int i = 0; i < ctx->ntypes; i++) {
    if (ctx->types[i].ops.flags & TSTOR_DEVICE_HOST) {
      ctx->host_type = i;
      break;
    }
  }
  for (int i = 0; i < ctx->ncopies; i++) {
    int s = find_type(ctx, ctx->copies[i].src), d = find_type(ctx, ctx->copies[i].dst);
    if (s < 0 || d < 0) {
      tstor__log(ctx, TSTOR_LOG_DEBUG, "copy kernel %s -> %s ignored: type not registered",
                 ctx->copies[i].src, ctx->copies[i].dst);
      continue;
    }
    if (ctx->copies[i].entry.batch)
      ctx->batch_table[s][d] = ctx->copies[i].entry;
    else
      ctx->copy_table[s][d] = ctx->copies[i].entry;
  }
  int h = ctx->host_type;
  for (int s = 0; s < ctx->ntypes; s++) {
    uint32_t sf = ctx->types[s].ops.flags;
    for (int d = 0; d < ctx->ntypes; d++) {
      uint32_t df = ctx->types[d].ops.flags;
      int path;
      if (df & TSTOR_DEVICE_NO_DATA)
        path = TSTOR_COPY_CHECK;
      else if (sf & TSTOR_DEVICE_NO_DATA)
        path = TSTOR_COPY_NONE;
      else if (ctx->copy_table[s][d].fn)
        path = TSTOR_COPY_DIRECT;
      else if ((sf & TSTOR_DEVICE_HOST) && (df & TSTOR_DEVICE_HOST))
        path = TSTOR_COPY_HOST;
      else if (h >= 0 && ((sf & TSTOR_DEVICE_HOST) || ctx->copy_table[s][h].fn) &&
               ((df & TSTOR_DEVICE_HOST) || ctx->copy_table[h][d].fn))
        path = TSTOR_COPY_STAGED;
      else
        path = TSTOR_COPY_NONE;
      ctx->copy_path[s][d] = path;
    }
  }
}

void tstor__registry_free(tstor_context *ctx) {
  for (int i = 0; i < ctx->ncopies; i++) {
    tstor__free(ctx->copies[i].src);
    tstor__free(ctx->copies[i].dst);
  }
  tstor__free(ctx->copies);
  ctx->copies = NULL;
  ctx->ncopies = 0;
  for (int i = 0; i < ctx->nallocators; i++) tstor__free(ctx->allocators[i]);
  ctx->nallocators = 0;
  for (int i = 0; i < ctx->ntypes; i++) tstor__free(ctx->types[i].name);
  ctx->ntypes = 0;
}

tstor__allocator *tstor__find_allocator(tstor_context *ctx, int type, uint32_t flags) {
  for (int i = 0; i < ctx->nallocators; i++) {
    tstor__allocator *a = ctx->allocators[i];
    if (a->type == type && (a->ops.flags & flags) == flags) return a;
  }
  return NULL;
}

/* ---------------------------------------------------------- device lookups */

int tstor__bad_device(tstor_context *ctx, tstor_device dev) {
  if (dev.type < 0 || dev.type >= ctx->ntypes)
    return tstor__err(TSTOR_ENODEV, "unknown device type id %d (%d types registered)", dev.type,
                      ctx->ntypes);
  return tstor__err(TSTOR_ENODEV, "%s:%d: no such device (%d %s device(s) present)",
                    ctx->types[dev.type].name, dev.index, ctx->types[dev.type].count,
                    ctx->types[dev.type].name);
}

/* Why `text` names no device type: its backend declined or failed to load
 * (its own words), or no backend gives it (the types there are). */
static int unknown_type(tstor_context *ctx, const char *text, size_t n) {
  for (int i = 0; i < ctx->nbackends; i++) {
    const tstor_backend_info *b = &ctx->backends[i].info;
    if (strlen(b->name) != n || memcmp(b->name, text, n) != 0) continue;
    if (b->state == TSTOR_BACKEND_DECLINED)
      return tstor__err(TSTOR_ENODEV, "no device \"%s\": the %s backend declined to load: %s", text, b->name,
                        b->message);
    if (b->state == TSTOR_BACKEND_FAILED)
      return tstor__err(TSTOR_ENODEV, "no device \"%s\": the %s backend failed to load: %s", text, b->name,
                        b->message);
  }
  char types[256] = "";
  size_t at = 0;
  for (int i = 0; i < ctx->ntypes && at < sizeof types; i++)
    at += (size_t)snprintf(types + at, sizeof types - at, "%s%s", i ? ", " : "", ctx->types[i].name);
  return tstor__err(TSTOR_ENODEV, "unknown device type in \"%s\" (this context has %s)", text, types);
}

int tstor__device_lookup(tstor_context *ctx, const char *text, tstor_device *out) {
  if (!text || !out) return tstor__err(TSTOR_EINVAL, "device_parse: NULL argument");
  const char *colon = strchr(text, ':');
  size_t n = colon ? (size_t)(colon - text) : strlen(text);
  int type = -1;
  for (int i = 0; i < ctx->ntypes; i++) {
    if (strlen(ctx->types[i].name) == n && memcmp(ctx->types[i].name, text, n) == 0) {
      type = i;
      break;
    }
  }
  if (type < 0) return unknown_type(ctx, text, n);
  long index = 0;
  if (colon) {
    const char *p = colon + 1;
    if (*p < '0' || *p > '9')
      return tstor__err(TSTOR_EINVAL, "bad device index in \"%s\"", text);
    char *end;
    index = strtol(p, &end, 10);
    if (*end != '\0' || index > INT32_MAX)
      return tstor__err(TSTOR_EINVAL, "bad device index in \"%s\"", text);
  }
  tstor_device dev = {type, (int32_t)index};
  int rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  *out = dev;
  return 0;
}
