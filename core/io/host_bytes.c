/* A storage's bytes where the host can read them, for the writers. */
#include "io_internal.h"

#include <string.h>

int tstor__io_host_bytes(tstor_storage *s, tstor_storage **tmp, const void **p) {
  *tmp = NULL;
  tstor_context *ctx = tstor_storage_context(s);
  if ((tstor_device_type_flags(ctx, tstor_storage_device(s).type) & TSTOR_DEVICE_HOST) ||
      tstor_storage_is_pinned(s)) {
    *p = tstor_storage_data(s);
    return 0;
  }
  tstor_device cpu;
  int rc = tstor_device_parse(ctx, "cpu", &cpu);
  if (!rc) rc = tstor_storage_to(s, cpu, tmp);
  if (!rc) *p = tstor_storage_data(*tmp);
  return rc;
}
