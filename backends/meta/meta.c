/* The meta backend: storages with a size and no data, for shape inference.
 *
 * Allocation records nothing and touches no memory, so a 1 TiB meta storage
 * costs what a 0-byte one does. The core knows from TSTOR_DEVICE_NO_DATA that
 * copies into meta only check sizes and copies out of it fail. */
#include <stdlib.h>

#include <tstor/backend.h>

static int meta_device_count(void *state) {
  (void)state;
  return 1;
}

static int meta_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out) {
  (void)state;
  (void)index;
  (void)nbytes;
  (void)stream;
  out->ptr = NULL;
  out->alloc_ctx = NULL;
  return 0;
}

static void meta_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  (void)state;
  (void)index;
  (void)ptr;
  (void)nbytes;
  (void)alloc_ctx;
}

static const tstor_allocator_ops meta_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops),
    .name = "meta",
    .allocate = meta_allocate,
    .free = meta_free,
};

static const tstor_device_ops meta_device = {
    TSTOR_OPS_HEADER(tstor_device_ops),
    .type_name = "meta",
    .flags = TSTOR_DEVICE_NO_DATA,
    .device_count = meta_device_count,
    .allocator = &meta_allocator,
};

static int meta_init(const tstor_registrar *reg, tstor_module *m, void **module_state, char *msg,
                     size_t msg_size) {
  (void)msg;
  (void)msg_size;
  *module_state = NULL;
  return reg->register_device_type(m, &meta_device, NULL);
}

TSTOR_BACKEND_DEFINE(meta_init, NULL);
