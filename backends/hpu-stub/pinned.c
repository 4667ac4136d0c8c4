/* Pinned host memory: the host buffers a device's copy engine may read and
 * write while the host goes on (CUDA's cudaHostAlloc). The stub registers
 * this allocator for "cpu" with TSTOR_ALLOC_PINNED, so tstor_storage_pin and
 * PyTorch's pin_memory() work where hpu-stub is the accelerator. The blocks
 * are page-aligned anonymous mappings, counted in their own tstor_stats;
 * nothing is locked into RAM, since the simulated engine is the host. */
#include "hpu_stub.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

int hpu_pinned_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out) {
  hpu_stub *stub = state;
  (void)index;
  (void)stream;
  out->ptr = NULL;
  out->alloc_ctx = NULL;
  if (nbytes == 0) return 0;
  if (TSTOR_REGISTRAR_HAS(stub->reg, should_fail) && stub->reg->should_fail(TSTOR_FAULT_ALLOC))
    return HPU_ERROR(stub, TSTOR_ENOMEM, "hpu-pinned: injected failure for %zu bytes", nbytes);
  void *p = mmap(NULL, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return HPU_ERROR(stub, TSTOR_ENOMEM, "hpu-pinned: cannot map %zu bytes of host memory: %s",
                     nbytes, strerror(errno));
  pthread_mutex_lock(&stub->pinned_mu);
  stub->pinned_stats.allocated += nbytes;
  stub->pinned_stats.reserved += nbytes;
  stub->pinned_stats.active += nbytes;
  stub->pinned_stats.alloc_count++;
  tstor_stats_note_peaks(&stub->pinned_stats);
  pthread_mutex_unlock(&stub->pinned_mu);
  out->ptr = p;
  return 0;
}

void hpu_pinned_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  hpu_stub *stub = state;
  (void)index;
  (void)alloc_ctx;
  if (!ptr) return;
  munmap(ptr, nbytes);
  pthread_mutex_lock(&stub->pinned_mu);
  stub->pinned_stats.allocated -= nbytes;
  stub->pinned_stats.reserved -= nbytes;
  stub->pinned_stats.active -= nbytes;
  stub->pinned_stats.free_count++;
  pthread_mutex_unlock(&stub->pinned_mu);
}

int hpu_pinned_stats(void *state, int index, tstor_stats *out) {
  hpu_stub *stub = state;
  (void)index;
  pthread_mutex_lock(&stub->pinned_mu);
  tstor_stats_copy(out, &stub->pinned_stats);
  pthread_mutex_unlock(&stub->pinned_mu);
  return 0;
}

int hpu_pinned_reset_peak(void *state, int index) {
  hpu_stub *stub = state;
  (void)index;
  pthread_mutex_lock(&stub->pinned_mu);
  tstor_stats_reset_peaks(&stub->pinned_stats);
  pthread_mutex_unlock(&stub->pinned_mu);
  return 0;
}
