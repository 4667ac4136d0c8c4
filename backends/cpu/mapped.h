/* The cpu backend's file mappings and POSIX shared memory (the map,
 * mapping_info and shm_sweep ops of backend.h).
 *
 * A mapping is handed to the core as a block whose alloc_ctx is a tagged
 * pointer to a record of ours (the low bit set, which no allocation record
 * has: they are aligned). The core frees it through the cpu allocator's free(),
 * which hands it back here: cpu_free calls cpu_mapping_free first and stops
 * when it took the block.
 *
 * Mappings are not counted in the cpu allocator's statistics: they are the
 * kernel's page cache and shared memory, not the heap.
 */
#ifndef TSTOR_CPU_MAPPED_H
#define TSTOR_CPU_MAPPED_H

#include <tstor/backend.h>

/* Remembers the registrar for error messages; called from cpu_init. */
void cpu_mapped_init(const tstor_registrar *reg);

/* The device ops; state and index are unused (one host device). */
int cpu_map(void *state, int index, tstor_map_request *req);
int cpu_mapping_info(void *state, int index, void *alloc_ctx, tstor_mapping_info *out);
int cpu_shm_sweep(void *state, int *removed);

/* When alloc_ctx is a mapping of ours: unmaps it, closes its descriptor,
 * unlinks the name it owns, frees the record and returns 1. Otherwise
 * touches nothing and returns 0. */
int cpu_mapping_free(void *alloc_ctx);

#endif /* TSTOR_CPU_MAPPED_H */
