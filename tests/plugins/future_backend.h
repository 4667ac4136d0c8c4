/* backend.h as the next minor version might have it: every table, and every
 * struct one side fills for the other, with a field appended, as the
 * versioning rules allow. A module built against this header declares the
 * bigger sizes and the newer minor version; today's core must load it, use
 * what it knows and never touch what it does not. Each appended field is
 * "since" the next minor version. */
#ifndef TSTOR_TEST_FUTURE_BACKEND_H
#define TSTOR_TEST_FUTURE_BACKEND_H

#include <tstor/backend.h>

#define FUTURE_ABI_MINOR (TSTOR_ABI_MINOR + 1)
#define FUTURE_ABI_VERSION ((uint32_t)((TSTOR_ABI_MAJOR << 16) | FUTURE_ABI_MINOR))

typedef struct future_stats {
  tstor_stats now;
  uint64_t compactions; /* since FUTURE_ABI_MINOR */
} future_stats;
#define FUTURE_STATS_HAS(st, field) \
  TSTOR_SIZE_COVERS(future_stats, ((const future_stats *)(st))->now.struct_size, field)

typedef struct future_device_properties {
  tstor_device_properties now;
  uint64_t temperature_mc; /* since FUTURE_ABI_MINOR */
} future_device_properties;
#define FUTURE_DEVICE_PROPERTIES_HAS(p, field) \
  TSTOR_SIZE_COVERS(future_device_properties,  \
                    ((const future_device_properties *)(p))->now.struct_size, field)

typedef struct future_allocator_ops {
  tstor_allocator_ops now;
  int (*trim)(void *state, int index, size_t keep_bytes); /* since FUTURE_ABI_MINOR */
} future_allocator_ops;

typedef struct future_device_ops {
  tstor_device_ops now;
  int (*copy_2d)(void *state, int index, void *dst, const void *src, size_t nbytes,
                      size_t stride, void *stream); /* since FUTURE_ABI_MINOR */
} future_device_ops;

typedef struct future_registrar {
  tstor_registrar now;
  int (*report_health)(tstor_module *m, int healthy); /* since FUTURE_ABI_MINOR */
} future_registrar;
#define FUTURE_REGISTRAR_HAS(reg, field)                                                  \
  (TSTOR_SIZE_COVERS(future_registrar, ((const future_registrar *)(reg))->now.struct_size, \
                     field) &&                                                           \
   ((const future_registrar *)(reg))->field != NULL)

typedef struct future_map_request {
  tstor_map_request now;
  uint64_t hugepage_bytes; /* since FUTURE_ABI_MINOR */
} future_map_request;

typedef struct future_mapping_info {
  tstor_mapping_info now;
  int numa_node; /* since FUTURE_ABI_MINOR */
} future_mapping_info;

typedef struct future_backend_def {
  tstor_backend_def now;
  void (*before_fork)(void *module_state); /* since FUTURE_ABI_MINOR */
} future_backend_def;

#endif
