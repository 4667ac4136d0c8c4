/* The entry point: reads the [backend NAME] keys, sets up the simulated
 * devices and registers the "hpu" device type, its allocator and its copy
 * kernels with the core.
 *
 * Config keys (all optional):
 *   devices        number of simulated devices, 0..16 (default 2); 0 declines,
 *                  as a real backend does when it finds no hardware
 *   memory_mb      memory of each device in MiB (default 256)
 *   fail_alloc_nth make the Nth allocation of the module fail with TSTOR_ENOMEM,
 *                  counting from 1 across devices (default 0: never)
 *   copy_delay_us  sleep this long before each copy or fill, on the stream's
 *                  worker when there is one (default 0)
 *   pinned_memory  offer pinned host memory (pinned.c) for "cpu" (default yes) */
#include "hpu_stub.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static const tstor_allocator_ops hpu_allocator = {
    .struct_size = sizeof(tstor_allocator_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .name = "hpu",
    .flags = 0,
    .allocate = hpu_allocate,
    .free = hpu_free,
    .record_stream = hpu_record_stream,
    .stats = hpu_stats,
    .reset_peak = hpu_reset_peak,
    .empty_cache = hpu_empty_cache,
};

static const tstor_allocator_ops hpu_pinned_allocator = {
    .struct_size = sizeof(tstor_allocator_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .name = "hpu-pinned",
    .flags = TSTOR_ALLOC_PINNED,
    .allocate = hpu_pinned_allocate,
    .free = hpu_pinned_free,
    .stats = hpu_pinned_stats,
    .reset_peak = hpu_pinned_reset_peak,
};

/* Waits for every stream of the device; the blocks freed while they ran are
 * free now, so the deferred list is emptied too. */
static int device_synchronize(void *state, int index) {
  int rc = hpu_check_process(state, index, "synchronize");
  if (rc) return rc;
  hpu_streams_wait_idle(state, index);
  return hpu_empty_cache(state, index);
}

static const tstor_device_ops hpu_device_ops = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "hpu",
    .flags = 0, /* not host memory: the core must go through the kernels */
    .device_count = hpu_device_count,
    .allocator = &hpu_allocator,
    .fill = hpu_fill,
    .synchronize = device_synchronize,
    .stream_create = hpu_stream_create,
    .stream_destroy = hpu_stream_destroy,
    .stream_synchronize = hpu_stream_synchronize,
    .stream_wait_event = hpu_stream_wait_event,
    .event_create = hpu_event_create,
    .event_destroy = hpu_event_destroy,
    .event_record = hpu_event_record,
    .event_query = hpu_event_query,
    .event_synchronize = hpu_event_synchronize,
    .copy_strided = hpu_copy_strided, /* since 1.2 */
    .properties = hpu_properties,     /* since 1.5 */
};

int hpu_device_count(void *state) { return ((hpu_stub *)state)->ndevices; }

static void device_close(hpu_stub *stub, int index) {
  hpu_device *d = &stub->devices[index];
  if (d->streams && !hpu_forked(stub)) /* a child leaves the parent's streams alone */
    stub->reg->log(stub->module, TSTOR_LOG_WARN, "hpu:%d: unloaded with streams still open",
                   index);
  hpu_arena_destroy(stub, index, &d->arena);
  if (d->base) munmap(d->base, d->capacity);
  if (d->backing) munmap(d->backing, d->capacity);
  pthread_mutex_destroy(&d->streams_mu);
  memset(d, 0, sizeof *d);
}

static int device_open(hpu_stub *stub, int index, size_t capacity, char *msg, size_t msg_size) {
  hpu_device *d = &stub->devices[index];
  if (pthread_mutex_init(&d->streams_mu, NULL) != 0) {
    snprintf(msg, msg_size, "hpu:%d: cannot initialise a lock", index);
    return TSTOR_ENOMEM;
  }
  d->capacity = capacity; /* from here on, device_close() undoes what is done */
  /* Addresses only: any host access to them faults. */
  d->base = mmap(NULL, capacity, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  /* The bytes: pages are only committed once a kernel touches them. */
  d->backing = mmap(NULL, capacity, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (d->base == MAP_FAILED || d->backing == MAP_FAILED) {
    int err = errno;
    if (d->base == MAP_FAILED) d->base = NULL;
    if (d->backing == MAP_FAILED) d->backing = NULL;
    snprintf(msg, msg_size, "hpu:%d: cannot map %zu MiB of simulated device memory: %s", index,
             capacity >> 20, strerror(err));
    return TSTOR_ENOMEM;
  }
  if (hpu_arena_init(&d->arena, capacity) != 0) {
    snprintf(msg, msg_size, "hpu:%d: out of host memory", index);
    return TSTOR_ENOMEM;
  }
  return 0;
}

static void stub_free(hpu_stub *stub) {
  for (int i = 0; i < HPU_MAX_DEVICES; i++)
    if (stub->devices[i].capacity) device_close(stub, i);
  pthread_mutex_destroy(&stub->pinned_mu);
  free(stub);
}

/* The batched kernels, where the core offers them (since ABI 1.4): an older
 * core copies a batch's items one by one through the kernels above. */
static int register_batches(const tstor_registrar *reg, tstor_module *m, hpu_stub *stub) {
  if (!TSTOR_REGISTRAR_HAS(reg, register_copy_batch)) return 0;
  int rc;
  if ((rc = reg->register_copy_batch(m, "cpu", "hpu", hpu_copy_batch_to_device, stub)) != 0 ||
      (rc = reg->register_copy_batch(m, "hpu", "cpu", hpu_copy_batch_to_host, stub)) != 0)
    return rc;
  return reg->register_copy_batch(m, "hpu", "hpu", hpu_copy_batch_on_device, stub);
}

static int hpu_init(const tstor_registrar *reg, tstor_module *m, void **module_state, char *msg,
                    size_t msg_size) {
  /* A core older than the headers this module was built with hands out a
   * shorter registrar. */
  if (!TSTOR_REGISTRAR_HAS(reg, set_error)) {
    snprintf(msg, msg_size, "the core's registrar is older than this module needs");
    return TSTOR_EABI;
  }
  /* On a bad value the core has described it (file, line, range): msg stays
   * empty so that its description is the one shown. */
  long long devices, memory_mb, fail_nth, delay_us;
  int pinned, rc;
  if ((rc = reg->config_int(m, "devices", 2, 0, HPU_MAX_DEVICES, &devices)) ||
      (rc = reg->config_int(m, "memory_mb", 256, 1, 65536, &memory_mb)) ||
      (rc = reg->config_int(m, "fail_alloc_nth", 0, 0, (long long)1 << 62, &fail_nth)) ||
      (rc = reg->config_int(m, "copy_delay_us", 0, 0, 10000000, &delay_us)) ||
      (rc = reg->config_bool(m, "pinned_memory", 1, &pinned)))
    return rc;
  if (devices == 0) {
    snprintf(msg, msg_size, "no hpu devices (devices = 0)");
    return TSTOR_EDECLINED;
  }

  int fork_rc = hpu_fork_watch();
  if (fork_rc != 0) {
    snprintf(msg, msg_size, "cannot register a fork handler: %s", strerror(fork_rc));
    return TSTOR_ENOMEM;
  }
  hpu_stub *stub = calloc(1, sizeof *stub);
  if (!stub || pthread_mutex_init(&stub->pinned_mu, NULL) != 0) {
    free(stub);
    snprintf(msg, msg_size, "out of host memory");
    return TSTOR_ENOMEM;
  }
  stub->fork_generation = atomic_load_explicit(&hpu_fork_generation, memory_order_relaxed);
  stub->reg = reg;
  stub->module = m;
  stub->fail_alloc_nth = fail_nth;
  stub->copy_delay_us = delay_us;
  atomic_init(&stub->alloc_calls, 0);
  for (int i = 0; i < (int)devices; i++) {
    if ((rc = device_open(stub, i, (size_t)memory_mb << 20, msg, msg_size)) != 0) {
      stub_free(stub);
      return rc;
    }
    stub->ndevices = i + 1;
  }

  /* What is registered stays ours until fini; the core drops it if we fail. */
  if ((rc = reg->register_device_type(m, &hpu_device_ops, stub)) != 0 ||
      (rc = reg->register_copy(m, "cpu", "hpu", hpu_copy_to_device, stub)) != 0 ||
      (rc = reg->register_copy(m, "hpu", "cpu", hpu_copy_to_host, stub)) != 0 ||
      (rc = reg->register_copy(m, "hpu", "hpu", hpu_copy_on_device, stub)) != 0 ||
      (rc = register_batches(reg, m, stub)) != 0 ||
      (pinned && (rc = reg->register_allocator(m, "cpu", &hpu_pinned_allocator, stub)) != 0)) {
    snprintf(msg, msg_size, "registration failed (error %d)", rc);
    stub_free(stub);
    return rc;
  }
  reg->log(m, TSTOR_LOG_INFO, "hpu: %d simulated device(s) of %lld MiB", stub->ndevices,
           memory_mb);
  *module_state = stub;
  return 0;
}

static void hpu_fini(void *module_state) { stub_free(module_state); }

TSTOR_BACKEND_DEFINE(hpu_init, hpu_fini);
