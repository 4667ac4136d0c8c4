/* A module whose init registers a device type and then fails: the core must
 * drop the registration, report the message, and never call fini.
 * Keys: code (the TSTOR_E* code init returns, default TSTOR_EBACKEND). */
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

static const tstor_allocator_ops initfail_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops), "initfail", 0, never_allocate, never_free,
    NULL, NULL, NULL, NULL, NULL};

static const tstor_device_ops initfail_device = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "initfail",
    .flags = TSTOR_DEVICE_HOST,
    .device_count = count_one,
    .allocator = &initfail_allocator,
};

static int initfail_init(const tstor_registrar *reg, tstor_module *m, void **state, char *msg,
                         size_t msg_size) {
  long long code;
  int rc = reg->config_int(m, "code", TSTOR_EBACKEND, TSTOR__ERR_LAST + 1, -1, &code);
  if (rc != 0) return rc;
  rc = reg->register_device_type(m, &initfail_device, NULL);
  if (rc != 0) return rc;
  snprintf(msg, msg_size, "initfail: the simulated device is on fire");
  return (int)code;
}

static void initfail_fini(void *state) { abort(); }

TSTOR_BACKEND_DEFINE(initfail_init, initfail_fini);
