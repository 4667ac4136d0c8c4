/* The cpu backend: 64-byte-aligned host memory, host copies and fills.
 *
 * Built like any outside backend, against tstor/backend.h only. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <tstor/backend.h>

#include "mapped.h"

#define CPU_ALIGNMENT 64

typedef struct cpu_state {
  const tstor_registrar *reg;
  atomic_ullong allocated, peak, allocs, frees;
} cpu_state;

static int cpu_device_count(void *state) {
  (void)state;
  return 1;
}

static void note_alloc(cpu_state *st, size_t nbytes) {
  unsigned long long now =
      atomic_fetch_add_explicit(&st->allocated, nbytes, memory_order_relaxed) + nbytes;
  unsigned long long peak = atomic_load_explicit(&st->peak, memory_order_relaxed);
  while (now > peak &&
         !atomic_compare_exchange_weak_explicit(&st->peak, &peak, now, memory_order_relaxed,
                                                memory_order_relaxed)) {
  }
  atomic_fetch_add_explicit(&st->allocs, 1, memory_order_relaxed);
}

static int cpu_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out) {
  cpu_state *st = state;
  (void)index;
  (void)stream;
  out->ptr = NULL;
  out->alloc_ctx = NULL;
  if (nbytes == 0) return 0;
  /* Round up so that the whole last cache line belongs to the storage. */
  size_t rounded = (nbytes + CPU_ALIGNMENT - 1) & ~(size_t)(CPU_ALIGNMENT - 1);
  if (rounded < nbytes) return st->reg->set_error(TSTOR_EOVERFLOW, "cpu: %zu bytes overflow", nbytes);
  void *p = aligned_alloc(CPU_ALIGNMENT, rounded);
  if (!p)
    return st->reg->set_error(TSTOR_ENOMEM, "cpu: cannot allocate %zu bytes of host memory",
                              nbytes);
  note_alloc(st, nbytes);
  out->ptr = p;
  return 0;
}

static void cpu_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  if (cpu_mapping_free(alloc_ctx)) return; /* a file or shared-memory mapping */
  cpu_state *st = state;
  (void)index;
  (void)alloc_ctx;
  if (!ptr) return;
  free(ptr);
  atomic_fetch_sub_explicit(&st->allocated, nbytes, memory_order_relaxed);
  atomic_fetch_add_explicit(&st->frees, 1, memory_order_relaxed);
}

static int cpu_stats(void *state, int index, tstor_stats *out) {
  cpu_state *st = state;
  (void)index;
  out->allocated = out->reserved = out->active =
      atomic_load_explicit(&st->allocated, memory_order_relaxed);
  out->peak_allocated = out->peak_reserved = out->peak_active =
      atomic_load_explicit(&st->peak, memory_order_relaxed);
  out->alloc_count = atomic_load_explicit(&st->allocs, memory_order_relaxed);
  out->free_count = atomic_load_explicit(&st->frees, memory_order_relaxed);
  return 0;
}

static int cpu_reset_peak(void *state, int index) {
  cpu_state *st = state;
  (void)index;
  atomic_store_explicit(&st->peak, atomic_load_explicit(&st->allocated, memory_order_relaxed),
                        memory_order_relaxed);
  return 0;
}

static int cpu_copy(void *state, void *dst, int dst_index, const void *src, int src_index,
                    size_t nbytes, void *stream) {
  (void)state;
  (void)dst_index;
  (void)src_index;
  (void)stream;
  memmove(dst, src, nbytes); /* views of one storage may overlap */
  return 0;
}

static const tstor_allocator_ops cpu_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops),
    .name = "cpu",
    .allocate = cpu_allocate,
    .free = cpu_free,
    .stats = cpu_stats,
    .reset_peak = cpu_reset_peak,
};

static const tstor_device_ops cpu_device = {
    TSTOR_OPS_HEADER(tstor_device_ops),
    .type_name = "cpu",
    .flags = TSTOR_DEVICE_HOST,
    .device_count = cpu_device_count,
    .allocator = &cpu_allocator,
    .map = cpu_map,
    .mapping_info = cpu_mapping_info,
    .shm_sweep = cpu_shm_sweep,
};

static int cpu_init(const tstor_registrar *reg, tstor_module *m, void **module_state, char *msg,
                    size_t msg_size) {
  (void)msg;
  (void)msg_size;
  cpu_state *st = calloc(1, sizeof *st);
  if (!st) return TSTOR_ENOMEM;
  st->reg = reg;
  cpu_mapped_init(reg);
  int rc = reg->register_device_type(m, &cpu_device, st);
  if (rc == 0) rc = reg->register_copy(m, "cpu", "cpu", cpu_copy, st);
  if (rc != 0) {
    free(st);
    return rc;
  }
  *module_state = st;
  return 0;
}

static void cpu_fini(void *module_state) { free(module_state); }

TSTOR_BACKEND_DEFINE(cpu_init, cpu_fini);
