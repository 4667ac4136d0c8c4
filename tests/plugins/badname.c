/* A module that registers whatever device type name its config gives
 * (type = NAME, "" for an empty one), so that the core's refusals can be
 * checked end to end: the reason must reach the user however the module
 * words its own message. Keys: type (required), summary = yes to write a
 * summary of its own into msg, as modules often do ("registration failed"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tstor/backend.h>

static char type_name[64];

static int count_one(void *state) {
  (void)state;
  return 1;
}

static int never_allocate(void *state, int index, size_t nbytes, void *stream,
                          tstor_block *out) {
  (void)state, (void)index, (void)nbytes, (void)stream, (void)out;
  abort();
}

static void never_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  (void)state, (void)index, (void)ptr, (void)nbytes, (void)alloc_ctx;
  abort();
}

static const tstor_allocator_ops badname_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops), "badname", 0, never_allocate, never_free,
    NULL, NULL, NULL, NULL, NULL};

static tstor_device_ops badname_device = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = type_name,
    .flags = TSTOR_DEVICE_HOST,
    .device_count = count_one,
    .allocator = &badname_allocator,
};

static int badname_init(const tstor_registrar *reg, tstor_module *m, void **state, char *msg,
                        size_t msg_size) {
  (void)state;
  const char *type = reg->config_get(m, "type");
  int summary = 0;
  int rc = reg->config_bool(m, "summary", 0, &summary);
  if (rc != 0) return rc;
  snprintf(type_name, sizeof type_name, "%s", type ? type : "");
  rc = reg->register_device_type(m, &badname_device, NULL);
  if (rc != 0 && summary) snprintf(msg, msg_size, "registration failed (%d)", rc);
  return rc;
}

static void badname_fini(void *state) { (void)state; }

TSTOR_BACKEND_DEFINE(badname_init, badname_fini);
