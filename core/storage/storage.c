/* The storage object: bytes on a device, a refcount, and who frees them. */
#include "internal.h"
#include "host/parallel.h"
#include "runtime/pool.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every field zero. Assigning it compiles to a few vector moves, where a
 * memset of the object becomes a `rep stos` whose start-up alone is a sixth of
 * the time it takes to create a small storage. */
static const tstor_storage storage_zero;

/* The object with one reference, a context reference and every other field
 * zero: inline so that the allocating paths below pay no call for it. */
static inline int storage_make(tstor_context *ctx, tstor_device dev, tstor_storage **out) {
  tstor_storage *s = tstor__pool_get(TSTOR__POOL_STORAGE, sizeof *s);
  if (TSTOR__UNLIKELY(!s)) return tstor__err(TSTOR_ENOMEM, "out of memory for a storage");
  *s = storage_zero;
  atomic_init(&s->refs, 1);
  atomic_init(&s->nviews, 0);
  atomic_init(&s->swap_lock, 0);
  s->device = dev;
  s->ctx = ctx;
  if (ctx->types[dev.type].ops.flags & TSTOR_DEVICE_NO_DATA) s->flags = TSTOR_FLAG_NO_DATA;
  tstor__ctx_retain(ctx);
  *out = s;
  return 0;
}

int tstor__storage_alloc(tstor_context *ctx, tstor_device dev, tstor_storage **out) {
  return storage_make(ctx, dev, out);
}

/* Frees the object (not its bytes) and drops its context reference. */
static void storage_free(tstor_storage *s) {
  tstor_context *ctx = s->ctx;
  if (TSTOR__UNLIKELY(s->filename != NULL)) tstor__free(s->filename);
  if (TSTOR__UNLIKELY(s->old_filename != NULL)) tstor__free(s->old_filename);
  /* Marks the object dead for tstor_storage_release's check. The allocator
   * reuses only the first words of a freed block for its own links, so a
   * release past zero still finds the mark until the memory is handed out
   * again (and ASan or valgrind report the access itself). */
  s->ctx = NULL;
  tstor__pool_put(TSTOR__POOL_STORAGE, s);
  tstor__ctx_release(ctx);
}

static int alloc_failed(tstor_context *ctx, tstor_device dev, tstor__allocator *a,
                        size_t nbytes, int rc) {
  const char *detail = tstor_last_error();
  if (rc == TSTOR_ENOMEM && !detail[0])
    tstor__err(rc, "%s:%d: cannot allocate %zu bytes", ctx->types[dev.type].name, dev.index,
               nbytes);
  else if (!detail[0])
    tstor__err(rc, "%s allocator failed for %zu bytes", a->ops.name ? a->ops.name : "?", nbytes);
  return rc;
}

int tstor__storage_new_with(tstor_context *ctx, tstor_device dev, tstor__allocator *a,
                            size_t nbytes, void *stream, tstor_storage **out) {
  tstor_storage *s = NULL;
  int rc = storage_make(ctx, dev, &s);
  if (TSTOR__UNLIKELY(rc)) return rc;
  tstor_block block = {NULL, NULL};
  tstor__err_clear();
  rc = a->ops.allocate(a->state, dev.index, nbytes, stream, &block);
  if (TSTOR__UNLIKELY(rc)) {
    storage_free(s);
    return alloc_failed(ctx, dev, a, nbytes, rc);
  }
  s->data = block.ptr;
  s->alloc_ctx = block.alloc_ctx;
  s->alloc = a;
  s->nbytes = nbytes;
  s->flags |= TSTOR_FLAG_RESIZABLE;
  if (a->ops.flags & TSTOR_ALLOC_PINNED) s->flags |= TSTOR_FLAG_PINNED;
  *out = s;
  return 0;
}

int tstor_storage_new(tstor_context *ctx, tstor_device dev, size_t nbytes, tstor_storage **out) {
  if (out) *out = NULL;
  int rc = tstor__ctx(&ctx);
  if (TSTOR__UNLIKELY(rc)) return rc;
  if (TSTOR__UNLIKELY(!out)) return tstor__err(TSTOR_EINVAL, "storage_new: NULL out");
  rc = tstor__check_device(ctx, dev);
  if (TSTOR__UNLIKELY(rc)) return rc;
  return tstor__storage_new_with(ctx, dev, ctx->types[dev.type].allocator, nbytes, NULL, out);
}

static int wrap(tstor_context *ctx, tstor_device dev, void *data, size_t nbytes,
                tstor_deleter deleter, void *deleter_ctx, tstor_storage **out) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "storage_wrap: NULL out");
  rc = tstor__check_device(ctx, dev);
  if (rc) return rc;
  int no_data = (ctx->types[dev.type].ops.flags & TSTOR_DEVICE_NO_DATA) != 0;
  if (no_data && data)
    return tstor__err(TSTOR_EINVAL, "%s holds no data: wrap it with data NULL",
                      ctx->types[dev.type].name);
  if (!no_data && !data && nbytes > 0)
    return tstor__err(TSTOR_EINVAL, "storage_wrap: NULL data for %zu bytes", nbytes);
  tstor_storage *s = NULL;
  rc = tstor__storage_alloc(ctx, dev, &s);
  if (rc) return rc;
  s->data = data;
  s->nbytes = nbytes;
  s->deleter = deleter;
  s->deleter_ctx = deleter_ctx;
  if (!deleter) s->flags |= TSTOR_FLAG_BORROWED;
  *out = s;
  return 0;
}

int tstor_storage_wrap(tstor_context *ctx, tstor_device dev, void *data, size_t nbytes,
                       tstor_storage **out) {
  if (out) *out = NULL;
  return wrap(ctx, dev, data, nbytes, NULL, NULL, out);
}

int tstor_storage_wrap_owned(tstor_context *ctx, tstor_device dev, void *data, size_t nbytes,
                             tstor_deleter deleter, void *deleter_ctx, tstor_storage **out) {
  if (out) *out = NULL;
  if (!deleter) return tstor__err(TSTOR_EINVAL, "storage_wrap_owned: NULL deleter");
  return wrap(ctx, dev, data, nbytes, deleter, deleter_ctx, out);
}

void tstor__swap_lock(tstor_storage *s) {
  for (unsigned spins = 0;; spins++) {
    int expected = 0;
    if (atomic_compare_exchange_weak_explicit(&s->swap_lock, &expected, 1, memory_order_acquire,
                                              memory_order_relaxed))
      return;
    if (spins < 64) continue;
    if (spins < 1024) {
      sched_yield();
    } else {
      struct timespec pause = {0, 100 * 1000};
      nanosleep(&pause, NULL);
    }
  }
}

void tstor__swap_unlock(tstor_storage *s) { tstor__unlock_spin(&s->swap_lock); }

int tstor_storage_view(tstor_storage *base, size_t offset, size_t nbytes, tstor_storage **out) {
  if (out) *out = NULL;
  if (!base || !out) return tstor__err(TSTOR_EINVAL, "storage_view: NULL argument");
  if (offset > base->nbytes || nbytes > base->nbytes - offset)
    return tstor__err(TSTOR_ERANGE,
                      "view of bytes [%zu, %zu + %zu) is outside a storage of %zu bytes", offset,
                      offset, nbytes, base->nbytes);
  /* A view of a view refers to the root, so chains never grow. */
  tstor_storage *root = base->base ? base->base : base;
  size_t root_offset = base->offset + offset;
  tstor_storage *s = NULL;
  int rc = tstor__storage_alloc(base->ctx, base->device, &s);
  if (rc) return rc;
  /* share_memory and export_name replace the bytes of an unshared root and
   * free the old ones unless it has views: reading the pointer and counting
   * the view happen under the lock they hold, so the view either counts before
   * they look (and they refuse) or reads the new bytes. Shared bytes never
   * move again (published with release by the move), so their views need no
   * lock. */
  int movable = !(__atomic_load_n(&root->flags, __ATOMIC_ACQUIRE) & TSTOR_FLAG_SHARED);
  if (movable) tstor__swap_lock(root);
  s->data = root->data ? (char *)root->data + root_offset : NULL;
  s->nbytes = nbytes;
  s->flags = TSTOR_FLAG_VIEW | (root->flags & (TSTOR_FLAG_MAPPED | TSTOR_FLAG_SHARED |
                                               TSTOR_FLAG_PINNED | TSTOR_FLAG_BORROWED |
                                               TSTOR_FLAG_NO_DATA));
  atomic_fetch_add_explicit(&root->nviews, 1, memory_order_relaxed);
  if (movable) tstor__swap_unlock(root);
  s->base = tstor_storage_retain(root);
  s->offset = root_offset;
  *out = s;
  return 0;
}

tstor_storage *tstor_storage_retain(tstor_storage *s) {
  if (s) atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
  return s;
}

_Noreturn static void released_past_zero(const tstor_storage *s) {
  fprintf(stderr, "tstor: storage %p released more times than retained\n", (const void *)s);
  abort();
}

void tstor_storage_release(tstor_storage *s) {
  if (!s) return;
  if (TSTOR__UNLIKELY(s->ctx == NULL)) released_past_zero(s);
  /* A count of 1 means the caller holds the only reference: nobody else can
   * retain concurrently, so the last release needs no read-modify-write. */
  long before = atomic_load_explicit(&s->refs, memory_order_acquire);
  if (before != 1) before = atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel);
  if (TSTOR__LIKELY(before > 1)) return;
  if (TSTOR__UNLIKELY(before < 1)) released_past_zero(s);
  if (s->base) {
    atomic_fetch_sub_explicit(&s->base->nviews, 1, memory_order_relaxed);
    tstor_storage_release(s->base);
  } else if (s->alloc) {
    s->alloc->ops.free(s->alloc->state, s->device.index, s->data, s->nbytes, s->alloc_ctx);
  } else if (s->deleter) {
    s->deleter(s->data, s->deleter_ctx);
  }
  storage_free(s);
}

long tstor_storage_use_count(const tstor_storage *s) {
  return s ? atomic_load_explicit(&((tstor_storage *)s)->refs, memory_order_relaxed) : 0;
}

void *tstor_storage_data(const tstor_storage *s) { return s ? s->data : NULL; }
size_t tstor_storage_nbytes(const tstor_storage *s) { return s ? s->nbytes : 0; }
tstor_device tstor_storage_device(const tstor_storage *s) {
  tstor_device none = {-1, -1};
  return s ? s->device : none;
}
unsigned tstor_storage_flags(const tstor_storage *s) { return s ? s->flags : 0; }
tstor_context *tstor_storage_context(const tstor_storage *s) { return s ? s->ctx : NULL; }
tstor_storage *tstor_storage_base(const tstor_storage *s) { return s ? s->base : NULL; }
size_t tstor_storage_offset(const tstor_storage *s) { return s ? s->offset : 0; }

int tstor_storage_data_checked(const tstor_storage *s, void **out) {
  if (out) *out = NULL;
  if (!s || !out) return tstor__err(TSTOR_EINVAL, "storage_data_checked: NULL argument");
  if (s->flags & TSTOR_FLAG_NO_DATA)
    return tstor__err(TSTOR_ENODATA, "a %s storage has no data",
                      s->ctx->types[s->device.type].name);
  *out = s->data;
  return 0;
}

int tstor_storage_resize(tstor_storage *s, size_t nbytes) {
  if (!s) return tstor__err(TSTOR_EINVAL, "storage_resize: NULL storage");
  static const struct {
    unsigned flag;
    const char *what;
  } refused[] = {{TSTOR_FLAG_VIEW, "a view"},
                 {TSTOR_FLAG_BORROWED, "a borrowed storage"},
                 {TSTOR_FLAG_MAPPED, "a file-mapped storage"},
                 {TSTOR_FLAG_SHARED, "a shared-memory storage"}};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    if (s->flags & refused[i].flag)
      return tstor__err(TSTOR_ENOTSUP, "cannot resize %s", refused[i].what);
  if (!(s->flags & TSTOR_FLAG_RESIZABLE))
    return tstor__err(TSTOR_ENOTSUP, "cannot resize a storage with a caller's deleter");
  long views = atomic_load_explicit(&s->nviews, memory_order_relaxed);
  if (views > 0)
    return tstor__err(TSTOR_EBUSY, "cannot resize: %ld view(s) share its bytes", views);
  if (nbytes == s->nbytes) return 0;
  tstor__allocator *a = s->alloc;
  tstor__err_clear();
  if (a->ops.reallocate) {
    tstor_block block = {s->data, s->alloc_ctx};
    int rc = a->ops.reallocate(a->state, s->device.index, &block, s->nbytes, nbytes);
    if (rc) return alloc_failed(s->ctx, s->device, a, nbytes, rc);
    s->data = block.ptr;
    s->alloc_ctx = block.alloc_ctx;
    s->nbytes = nbytes;
    return 0;
  }
  tstor_block block = {NULL, NULL};
  int rc = a->ops.allocate(a->state, s->device.index, nbytes, NULL, &block);
  if (rc) return alloc_failed(s->ctx, s->device, a, nbytes, rc);
  size_t keep = nbytes < s->nbytes ? nbytes : s->nbytes;
  if (keep > 0 && !(s->flags & TSTOR_FLAG_NO_DATA)) {
    rc = tstor__copy_bytes(s->ctx, s->device, block.ptr, s->device, s->data, keep, NULL, NULL);
    if (rc) {
      a->ops.free(a->state, s->device.index, block.ptr, nbytes, block.alloc_ctx);
      return rc;
    }
  }
  a->ops.free(a->state, s->device.index, s->data, s->nbytes, s->alloc_ctx);
  s->data = block.ptr;
  s->alloc_ctx = block.alloc_ctx;
  s->nbytes = nbytes;
  return 0;
}

static int check_pair(const tstor_storage *dst, const tstor_storage *src, const char *what) {
  if (!dst || !src) return tstor__err(TSTOR_EINVAL, "%s: NULL storage", what);
  if (dst->ctx != src->ctx)
    return tstor__err(TSTOR_EINVAL, "%s: storages belong to different contexts", what);
  if (dst->nbytes != src->nbytes)
    return tstor__err(TSTOR_ESIZE, "%s: source has %zu bytes, destination %zu", what,
                      src->nbytes, dst->nbytes);
  return 0;
}

int tstor_storage_copy(tstor_storage *dst, const tstor_storage *src) {
  int rc = check_pair(dst, src, "storage_copy");
  if (rc) return rc;
  if (dst == src) return 0;
  return tstor__copy_bytes(dst->ctx, dst->device, dst->data, src->device, src->data,
                           src->nbytes, NULL, NULL);
}

int tstor_storage_fill(tstor_storage *s, uint8_t value) {
  if (!s) return tstor__err(TSTOR_EINVAL, "storage_fill: NULL storage");
  return tstor__fill_bytes(s->ctx, s->device, s->data, s->nbytes, &value, 1);
}

int tstor_storage_fill_pattern(tstor_storage *s, const void *pattern, size_t pattern_size) {
  if (!s || !pattern) return tstor__err(TSTOR_EINVAL, "storage_fill_pattern: NULL argument");
  if (pattern_size != 1 && pattern_size != 2 && pattern_size != 4 && pattern_size != 8 &&
      pattern_size != 16)
    return tstor__err(TSTOR_EINVAL, "pattern of %zu bytes (expected 1, 2, 4, 8 or 16)",
                      pattern_size);
  if (s->nbytes % pattern_size)
    return tstor__err(TSTOR_ESIZE, "%zu bytes are not a whole number of %zu-byte patterns",
                      s->nbytes, pattern_size);
  return tstor__fill_bytes(s->ctx, s->device, s->data, s->nbytes, pattern, pattern_size);
}

static int new_copy(const tstor_storage *s, tstor_device dev, tstor_storage **out) {
  /* The path first: from meta, TSTOR_ENODATA whatever the size, not the
   * TSTOR_ENOMEM of a destination the host cannot allocate. */
  int rc = tstor__copy_possible(s->ctx, dev, s->device);
  if (rc) return rc;
  tstor_storage *c;
  rc = tstor__storage_new_with(s->ctx, dev, s->ctx->types[dev.type].allocator, s->nbytes, NULL,
                               &c);
  if (rc) return rc;
  rc = tstor__copy_bytes(s->ctx, dev, c->data, s->device, s->data, s->nbytes, NULL, NULL);
  if (rc) {
    tstor_storage_release(c);
    return rc;
  }
  *out = c;
  return 0;
}

int tstor_storage_clone(const tstor_storage *s, tstor_storage **out) {
  if (out) *out = NULL;
  if (!s || !out) return tstor__err(TSTOR_EINVAL, "storage_clone: NULL argument");
  return new_copy(s, s->device, out);
}

int tstor_storage_to(tstor_storage *s, tstor_device dev, tstor_storage **out) {
  if (out) *out = NULL;
  if (!s || !out) return tstor__err(TSTOR_EINVAL, "storage_to: NULL argument");
  int rc = tstor__check_device(s->ctx, dev);
  if (rc) return rc;
  if (dev.type == s->device.type && dev.index == s->device.index) {
    *out = tstor_storage_retain(s);
    return 0;
  }
  return new_copy(s, dev, out);
}

int tstor_storage_new_like(const tstor_storage *s, size_t nbytes, tstor_storage **out) {
  if (out) *out = NULL;
  if (!s || !out) return tstor__err(TSTOR_EINVAL, "storage_new_like: NULL argument");
  return tstor__storage_new_with(s->ctx, s->device, s->ctx->types[s->device.type].allocator,
                                 nbytes, NULL, out);
}

static int no_pinned_memory(void) {
  return tstor__err(TSTOR_ENOTSUP,
                    "no loaded backend offers pinned host memory (the cuda and hpu-stub "
                    "backends do)");
}

int tstor_storage_pin(tstor_storage *s, tstor_storage **out) {
  if (out) *out = NULL;
  if (!s || !out) return tstor__err(TSTOR_EINVAL, "storage_pin: NULL argument");
  if (s->flags & TSTOR_FLAG_PINNED) {
    *out = tstor_storage_retain(s);
    return 0;
  }
  tstor_context *ctx = s->ctx;
  if (!(ctx->types[s->device.type].ops.flags & TSTOR_DEVICE_HOST))
    return tstor__err(TSTOR_EINVAL, "only host storages can be pinned (this one is on %s)",
                      ctx->types[s->device.type].name);
  tstor__allocator *a = tstor__find_allocator(ctx, s->device.type, TSTOR_ALLOC_PINNED);
  if (!a) return no_pinned_memory();
  tstor_storage *p;
  int rc = tstor__storage_new_with(ctx, s->device, a, s->nbytes, NULL, &p);
  if (rc) return rc;
  if (s->nbytes) tstor__host_copy(p->data, s->data, s->nbytes);
  *out = p;
  return 0;
}

int tstor_storage_new_pinned(tstor_context *ctx, size_t nbytes, tstor_storage **out) {
  if (out) *out = NULL;
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "storage_new_pinned: NULL out");
  for (int type = 0; type < ctx->ntypes; type++) {
    if (!(ctx->types[type].ops.flags & TSTOR_DEVICE_HOST)) continue;
    tstor__allocator *a = tstor__find_allocator(ctx, type, TSTOR_ALLOC_PINNED);
    if (a) return tstor__storage_new_with(ctx, (tstor_device){type, 0}, a, nbytes, NULL, out);
  }
  return no_pinned_memory();
}

int tstor_storage_is_pinned(const tstor_storage *s) {
  return s && (s->flags & TSTOR_FLAG_PINNED) ? 1 : 0;
}
