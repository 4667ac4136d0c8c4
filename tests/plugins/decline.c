/* A module with nothing to offer here (like cuda without a GPU): init declines
 * after registering, so the core must drop what it registered. */
#include <stdio.h>
#include <stdlib.h>
#include <tstor/backend.h>

static int count_one(void *state) { return 1; }

static int never_allocate(void *state, int index, size_t nbytes, void *stream,
                          tstor_block *out) {
  abort();
}
static void never_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  abort();
}

static const tstor_allocator_ops decline_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops), "decline", 0, never_allocate, never_free,
    NULL, NULL, NULL, NULL, NULL};

static const tstor_device_ops decline_device = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "declined",
    .flags = TSTOR_DEVICE_HOST,
    .device_count = count_one,
    .allocator = &decline_allocator,
};

static int decline_init(const tstor_registrar *reg, tstor_module *m, void **state, char *msg,
                        size_t msg_size) {
  int rc = reg->register_device_type(m, &decline_device, NULL);
  if (rc != 0) return rc;
  snprintf(msg, msg_size, "no simulated hardware found");
  return TSTOR_EDECLINED;
}

static void decline_fini(void *state) { abort(); }

TSTOR_BACKEND_DEFINE(decline_init, decline_fini);
