/* The cpu backend: 64-byte-aligned host memory, host copies and fills.
 *
 * Built like any outside backend, against tstor/backend.h only. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <tstor/backend.h>

#include "mapped.h"

#include "cache.h"

#define CPU_ALIGNMENT CPU_CACHE_ALIGNMENT

typedef struct cpu_state {
  const tstor_registrar *reg;
  cpu_cache *cache; /* blocks and statistics (cache.h) */
} cpu_state;

/* The core's fault injection (tests only): whether to fail this acquisition. */
static int cpu_should_fail(const tstor_registrar *reg, int what) {
  return TSTOR_REGISTRAR_HAS(reg, should_fail) && reg->should_fail(what);
}

static int cpu_device_count(void *state) {
  (void)state;
  return 1;
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
  void *p = NULL;
  if (cpu_should_fail(st->reg, TSTOR_FAULT_ALLOC) || cpu_cache_alloc(st->cache, nbytes, &p) != 0)
    return st->reg->set_error(TSTOR_ENOMEM, "cpu: cannot allocate %zu bytes of host memory",
                              nbytes);
  out->ptr = p;
  return 0;
}

static void cpu_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  /* A file or shared-memory mapping has an alloc_ctx; a block never does. */
  if (alloc_ctx && cpu_mapping_free(alloc_ctx)) return;
  cpu_state *st = state;
  (void)index;
  (void)alloc_ctx;
  if (!ptr) return;
  cpu_cache_free(st->cache, ptr, nbytes);
}

static int cpu_stats(void *state, int index, tstor_stats *out) {
  cpu_state *st = state;
  (void)index;
  tstor_stats all = TSTOR_STATS_INIT;
  cpu_cache_stats(st->cache, &all);
  tstor_stats_copy(out, &all); /* only what the core's struct holds */
  return 0;
}

static int cpu_reset_peak(void *state, int index) {
  cpu_state *st = state;
  (void)index;
  cpu_cache_reset_peak(st->cache);
  return 0;
}

static int cpu_empty_cache(void *state, int index) {
  cpu_state *st = state;
  (void)index;
  cpu_cache_empty(st->cache);
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

/* The host's memory as the kernel counts it for new allocations
 * (MemAvailable, else free RAM), its total, the blocks' alignment, and the
 * host's name for an id. Free memory is the whole machine's, shared with
 * every process, so an allocation of this one need not lower it. */
static int cpu_properties(void *state, int index, tstor_device_properties *out) {
  (void)state;
  (void)index;
  struct sysinfo si;
  if (sysinfo(&si) == 0) {
    uint64_t unit = si.mem_unit ? si.mem_unit : 1;
    uint64_t total = (uint64_t)si.totalram * unit, avail = (uint64_t)si.freeram * unit;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
      char line[128];
      unsigned long long kb;
      while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) avail = (uint64_t)kb * 1024;
      fclose(f);
    }
    if (avail > total) avail = total;
    if (TSTOR_DEVICE_PROPERTIES_HAS(out, free_bytes)) {
      out->free_bytes = avail;
      out->reported |= TSTOR_PROP_FREE;
    }
    if (TSTOR_DEVICE_PROPERTIES_HAS(out, total_bytes)) {
      out->total_bytes = total;
      out->reported |= TSTOR_PROP_TOTAL;
    }
  }
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, alignment)) {
    out->alignment = CPU_ALIGNMENT;
    out->reported |= TSTOR_PROP_ALIGNMENT;
  }
  char host[48];
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, id) && gethostname(host, sizeof host) == 0) {
    host[sizeof host - 1] = '\0';
    snprintf(out->id, sizeof out->id, "host:%s", host);
    out->reported |= TSTOR_PROP_ID;
  }
  return 0;
}

static const tstor_allocator_ops cpu_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops),
    .name = "cpu",
    .allocate = cpu_allocate,
    .free = cpu_free,
    .stats = cpu_stats,
    .reset_peak = cpu_reset_peak,
    .empty_cache = cpu_empty_cache,
};

static const tstor_device_ops cpu_device = {
    TSTOR_OPS_HEADER(tstor_device_ops), /* its size and the ABI it was built for */
    .type_name = "cpu",
    .flags = TSTOR_DEVICE_HOST,
    .device_count = cpu_device_count,
    .allocator = &cpu_allocator,
    .map = cpu_map,
    .mapping_info = cpu_mapping_info,
    .shm_sweep = cpu_shm_sweep,
    .properties = cpu_properties,
};

/* A key whose value must be a decimal integer from min to max: no sign, no
 * hex or octal prefix (a leading 0 means nothing). */
static int cpu_config_decimal(const tstor_registrar *reg, tstor_module *m, const char *key,
                              unsigned long long def, unsigned long long max,
                              unsigned long long *out) {
  const char *v = reg->config_get(m, key);
  *out = def;
  if (!v) return 0;
  unsigned long long x = 0;
  const char *p = v;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (x > (max - d) / 10) break;
    x = x * 10 + d;
  }
  if (p == v || *p != '\0')
    return reg->config_error(m, key, "expected a decimal integer from 0 to %llu", max);
  *out = x;
  return 0;
}

/* The block cache, with this context's [backend cpu] keys (docs/config.md). */
static int cpu_open_cache(const tstor_registrar *reg, tstor_module *m, cpu_state *st, char *msg,
                          size_t msg_size) {
  cpu_cache_config cfg;
  long long max_bytes, max_blocks;
  int rc = reg->config_bool(m, "cache", 1, &cfg.enabled);
  if (rc == 0)
    rc = reg->config_int(m, "cache_max_bytes", 16LL << 20, 0, 1LL << 40, &max_bytes);
  if (rc == 0) rc = reg->config_int(m, "cache_max_blocks", 32, 0, 1 << 20, &max_blocks);
  unsigned long long large_mb, large_age_ms;
  if (rc == 0) rc = cpu_config_decimal(reg, m, "large_cache_mb", 256, 1ULL << 20, &large_mb);
  if (rc == 0)
    rc = cpu_config_decimal(reg, m, "large_cache_age_ms", 5000, 86400000ULL, &large_age_ms);
  if (rc != 0) return rc;
  cfg.large_max_bytes = (size_t)large_mb << 20;
  cfg.large_max_age_ms = (unsigned long)large_age_ms;
  cfg.max_bytes = (size_t)max_bytes;
  cfg.max_blocks = (unsigned)max_blocks;
  rc = cpu_cache_open(&cfg, &st->cache);
  if (rc != 0)
    snprintf(msg, msg_size, "cannot set up the block cache: out of %s",
             rc == TSTOR_ENOMEM ? "memory" : "thread keys");
  return rc;
}

static int cpu_init(const tstor_registrar *reg, tstor_module *m, void **module_state, char *msg,
                    size_t msg_size) {
  cpu_state *st = cpu_should_fail(reg, TSTOR_FAULT_MALLOC) ? NULL : calloc(1, sizeof *st);
  if (!st) return TSTOR_ENOMEM;
  st->reg = reg;
  cpu_mapped_init(reg);
  int rc = cpu_open_cache(reg, m, st, msg, msg_size);
  if (rc == 0) rc = reg->register_device_type(m, &cpu_device, st);
  if (rc == 0) rc = reg->register_copy(m, "cpu", "cpu", cpu_copy, st);
  if (rc != 0) {
    cpu_cache_close(st->cache);
    free(st);
    return rc;
  }
  *module_state = st;
  return 0;
}

static void cpu_fini(void *module_state) {
  cpu_state *st = module_state;
  cpu_cache_close(st->cache);
  free(st);
}

TSTOR_BACKEND_DEFINE(cpu_init, cpu_fini);
