/* A module that registers a device type name that is already taken: by another
 * module ("cpu") or by itself (twice = yes). init hands back the registrar's
 * TSTOR_EEXIST, and the core must drop whatever the module did register.
 * Keys: type (default "dup"), twice (default no). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tstor/backend.h>

static int count_one(void *state) { return 1; }

static int never_allocate(void *state, int index, size_t nbytes, void *stream,
                          tstor_block *out) {
  abort();
}
static void never_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  abort();
}

static const tstor_allocator_ops dup_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops), "dup", 0, never_allocate, never_free,
    NULL, NULL, NULL, NULL, NULL};

/* type_name must outlive the module's registration; the config value does. */
static tstor_device_ops dup_device = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "dup",
    .flags = TSTOR_DEVICE_HOST,
    .device_count = count_one,
    .allocator = &dup_allocator,
};

static int dupname_init(const tstor_registrar *reg, tstor_module *m, void **state, char *msg,
                        size_t msg_size) {
  const char *type = reg->config_get(m, "type");
  int twice;
  int rc = reg->config_bool(m, "twice", 0, &twice);
  if (rc != 0) return rc;
  dup_device.type_name = type != NULL ? type : "dup";
  rc = reg->register_device_type(m, &dup_device, NULL);
  if (rc == 0 && twice) rc = reg->register_device_type(m, &dup_device, NULL);
  if (rc != 0) snprintf(msg, msg_size, "cannot register \"%s\"", dup_device.type_name);
  return rc;
}

static void dupname_fini(void *state) {}

TSTOR_BACKEND_DEFINE(dupname_init, dupname_fini);
