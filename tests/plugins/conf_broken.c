/* A backend with known bugs, for checking that `tstor conformance` finds them:
 *
 *   - addresses are 1 byte off any alignment;
 *   - copies to the host of more than 4096 bytes drop the last byte;
 *   - `allocated` never goes down.
 *
 * With `crash = yes` its fill aborts; with `hang = yes` its fill never returns
 * (the suite must report a crash and a timeout, and go on). */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tstor/backend.h>

typedef struct broken {
  atomic_ullong allocated;
  int crash, hang;
} broken;

static int broken_count(void *state) { return 1; }

static int broken_allocate(void *state, int index, size_t nbytes, void *stream,
                           tstor_block *out) {
  broken *b = state;
  out->alloc_ctx = NULL;
  out->ptr = NULL;
  if (nbytes > ((size_t)1 << 40)) return TSTOR_ENOMEM;
  char *p = malloc(nbytes + 1);
  if (!p) return TSTOR_ENOMEM;
  out->ptr = p + 1;
  atomic_fetch_add(&b->allocated, nbytes);
  return 0;
}

static void broken_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  free((char *)ptr - 1);
}

static int broken_stats(void *state, int index, tstor_stats *out) {
  out->allocated = atomic_load(&((broken *)state)->allocated);
  return 0;
}

static int broken_fill(void *state, int index, void *ptr, size_t nbytes, const void *pattern,
                       size_t pattern_size, void *stream) {
  broken *b = state;
  if (b->crash) abort();
  while (b->hang) pause();
  for (size_t i = 0; i < nbytes; i++) ((char *)ptr)[i] = ((const char *)pattern)[i % pattern_size];
  return 0;
}

static int copy_in(void *state, void *dst, int di, const void *src, int si, size_t n, void *s) {
  if (n) memmove(dst, src, n);
  return 0;
}

static int copy_out(void *state, void *dst, int di, const void *src, int si, size_t n, void *s) {
  if (n) memmove(dst, src, n > 4096 ? n - 1 : n);
  return 0;
}

static const tstor_allocator_ops broken_allocator = {
    .struct_size = sizeof(tstor_allocator_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .name = "broken",
    .allocate = broken_allocate,
    .free = broken_free,
    .stats = broken_stats,
};

static const tstor_device_ops broken_device = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "broken",
    .device_count = broken_count,
    .allocator = &broken_allocator,
    .fill = broken_fill,
};

static int broken_init(const tstor_registrar *reg, tstor_module *m, void **module_state,
                       char *msg, size_t msg_size) {
  broken *b = calloc(1, sizeof *b);
  if (!b) return TSTOR_ENOMEM;
  int rc = reg->config_bool(m, "crash", 0, &b->crash);
  if (rc == 0) rc = reg->config_bool(m, "hang", 0, &b->hang);
  if (rc == 0) rc = reg->register_device_type(m, &broken_device, b);
  if (rc == 0) rc = reg->register_copy(m, "cpu", "broken", copy_in, b);
  if (rc == 0) rc = reg->register_copy(m, "broken", "cpu", copy_out, b);
  if (rc == 0) rc = reg->register_copy(m, "broken", "broken", copy_in, b);
  if (rc) {
    free(b);
    return rc;
  }
  *module_state = b;
  return 0;
}

static void broken_fini(void *state) { free(state); }

TSTOR_BACKEND_DEFINE(broken_init, broken_fini);
