/* A correct backend, device type "lax" (host memory behind a capacity), with
 * one switch per fault that `tstor conformance` must find, alone or with
 * --strict. Every switch is off by default, and then the module passes
 * --strict. Config keys of [backend lax]:
 *
 *   devices = N        devices (default 2; 0 declines)
 *   memory_mb = N      capacity of each device (default 256)
 *   leak_blocks = yes  free gives the host memory back but not the capacity:
 *                      freed memory is never reusable
 *   count_frees = no   free_count is not kept (--strict fails)
 *   keep_peak = no     peak_allocated is not kept (--strict fails)
 *   silent = yes       failures and the decline set no message
 *   leak_at_fini = yes fini leaves a file descriptor open and a mapping
 *   hang = yes         fill never returns
 *   ignore_signals = yes  SIGALRM, SIGTERM, SIGINT and SIGHUP are ignored
 *   fork_helper = yes  the first fill forks a process that keeps every
 *                      descriptor (the result pipe included) for 30 s
 *   batch_drops_last = yes  the batched kernels move every span but the last */
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tstor/backend.h>

#define LAX_MAX 4

typedef struct lax_dev {
  atomic_ullong used; /* capacity taken */
  atomic_ullong allocated, peak, allocs, frees;
} lax_dev;

typedef struct lax {
  const tstor_registrar *reg;
  int ndev;
  unsigned long long capacity;
  int leak_blocks, count_frees, keep_peak, silent, leak_at_fini, hang, fork_helper;
  int batch_drops_last;
  lax_dev dev[LAX_MAX];
} lax;

static int say(const lax *l, int code, const char *what, size_t n) {
  return l->silent ? code : l->reg->set_error(code, "lax: %s (%zu bytes)", what, n);
}

static int lax_count(void *state) { return ((lax *)state)->ndev; }

static int lax_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out) {
  lax *l = state;
  lax_dev *d = &l->dev[index];
  out->ptr = NULL;
  out->alloc_ctx = NULL;
  if (nbytes > l->capacity || atomic_fetch_add(&d->used, nbytes) + nbytes > l->capacity) {
    if (nbytes <= l->capacity) atomic_fetch_sub(&d->used, nbytes);
    return say(l, TSTOR_ENOMEM, "out of device memory", nbytes);
  }
  if (nbytes) {
    out->ptr = aligned_alloc(64, (nbytes + 63) / 64 * 64);
    if (!out->ptr) {
      atomic_fetch_sub(&d->used, nbytes);
      return say(l, TSTOR_ENOMEM, "out of host memory", nbytes);
    }
  }
  unsigned long long now = atomic_fetch_add(&d->allocated, nbytes) + nbytes;
  unsigned long long peak = atomic_load(&d->peak);
  while (now > peak && !atomic_compare_exchange_weak(&d->peak, &peak, now)) {
  }
  atomic_fetch_add(&d->allocs, 1);
  return 0;
}

static void lax_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  lax *l = state;
  lax_dev *d = &l->dev[index];
  free(ptr);
  atomic_fetch_sub(&d->allocated, nbytes);
  if (!l->leak_blocks) atomic_fetch_sub(&d->used, nbytes);
  if (l->count_frees) atomic_fetch_add(&d->frees, 1);
}

static int lax_stats(void *state, int index, tstor_stats *out) {
  lax *l = state;
  lax_dev *d = &l->dev[index];
  out->allocated = atomic_load(&d->allocated);
  out->peak_allocated = l->keep_peak ? atomic_load(&d->peak) : 0;
  out->alloc_count = atomic_load(&d->allocs);
  out->free_count = atomic_load(&d->frees);
  return 0;
}

static int lax_reset_peak(void *state, int index) {
  lax_dev *d = &((lax *)state)->dev[index];
  atomic_store(&d->peak, atomic_load(&d->allocated));
  return 0;
}

static int lax_fill(void *state, int index, void *ptr, size_t nbytes, const void *pattern,
                    size_t pattern_size, void *stream) {
  lax *l = state;
  static atomic_int forked;
  if (l->fork_helper && atomic_exchange(&forked, 1) == 0 && fork() == 0) {
    sleep(30); /* holding every descriptor the process had */
    _exit(0);
  }
  while (l->hang) pause();
  if (pattern_size == 0 || pattern_size > 16 || (pattern_size & (pattern_size - 1)) ||
      nbytes % pattern_size)
    return l->silent ? TSTOR_EINVAL
                     : l->reg->set_error(TSTOR_EINVAL, "lax: bad fill pattern of %zu bytes",
                                         pattern_size);
  for (size_t i = 0; i < nbytes; i++)
    ((char *)ptr)[i] = ((const char *)pattern)[i % pattern_size];
  return 0;
}

static int lax_copy(void *state, void *dst, int di, const void *src, int si, size_t n, void *s) {
  if (n) memmove(dst, src, n);
  return 0;
}

static int lax_copy_batch(void *state, const tstor_copy_span *spans, size_t count, size_t *failed) {
  lax *l = state;
  for (size_t i = 0; i + (l->batch_drops_last ? 1 : 0) < count; i++)
    memmove(spans[i].dst, spans[i].src, spans[i].nbytes);
  return 0;
}

static const tstor_allocator_ops lax_allocator = {
    .struct_size = sizeof(tstor_allocator_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .name = "lax",
    .allocate = lax_allocate,
    .free = lax_free,
    .stats = lax_stats,
    .reset_peak = lax_reset_peak,
};

static const tstor_device_ops lax_ops = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "lax",
    .device_count = lax_count,
    .allocator = &lax_allocator,
    .fill = lax_fill,
};

static int lax_init(const tstor_registrar *reg, tstor_module *m, void **state, char *msg,
                    size_t msg_size) {
  long long ndev, memory_mb;
  int ignore_signals;
  lax *l = calloc(1, sizeof *l);
  if (!l) return TSTOR_ENOMEM;
  l->reg = reg;
  int rc = reg->config_int(m, "devices", 2, 0, LAX_MAX, &ndev);
  if (!rc) rc = reg->config_int(m, "memory_mb", 256, 1, 1 << 20, &memory_mb);
  if (!rc) rc = reg->config_bool(m, "leak_blocks", 0, &l->leak_blocks);
  if (!rc) rc = reg->config_bool(m, "count_frees", 1, &l->count_frees);
  if (!rc) rc = reg->config_bool(m, "keep_peak", 1, &l->keep_peak);
  if (!rc) rc = reg->config_bool(m, "silent", 0, &l->silent);
  if (!rc) rc = reg->config_bool(m, "leak_at_fini", 0, &l->leak_at_fini);
  if (!rc) rc = reg->config_bool(m, "hang", 0, &l->hang);
  if (!rc) rc = reg->config_bool(m, "fork_helper", 0, &l->fork_helper);
  if (!rc) rc = reg->config_bool(m, "ignore_signals", 0, &ignore_signals);
  if (!rc) rc = reg->config_bool(m, "batch_drops_last", 0, &l->batch_drops_last);
  if (rc) {
    free(l);
    return rc;
  }
  if (ignore_signals) {
    signal(SIGALRM, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
  }
  if (ndev == 0) {
    if (!l->silent) snprintf(msg, msg_size, "lax: devices = 0");
    free(l);
    return TSTOR_EDECLINED;
  }
  l->ndev = (int)ndev;
  l->capacity = (unsigned long long)memory_mb << 20;
  if ((rc = reg->register_device_type(m, &lax_ops, l)) != 0 ||
      (rc = reg->register_copy(m, "cpu", "lax", lax_copy, l)) != 0 ||
      (rc = reg->register_copy(m, "lax", "cpu", lax_copy, l)) != 0 ||
      (rc = reg->register_copy(m, "lax", "lax", lax_copy, l)) != 0 ||
      (rc = reg->register_copy_batch(m, "cpu", "lax", lax_copy_batch, l)) != 0 ||
      (rc = reg->register_copy_batch(m, "lax", "lax", lax_copy_batch, l)) != 0) {
    free(l);
    return rc;
  }
  *state = l;
  return 0;
}

static void lax_fini(void *state) {
  lax *l = state;
  if (l->leak_at_fini) {
    (void)open("/dev/null", O_RDONLY); /* never closed */
    (void)mmap(NULL, (size_t)4 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  free(l);
}

TSTOR_BACKEND_DEFINE(lax_init, lax_fini);
