/* A minimal tstor backend: device type "toy", whose memory is ordinary host
 * memory that only its copy kernels touch. docs/backend-guide.md walks through
 * it; a test builds it and runs the conformance suite on it.
 *
 *   cc -std=c11 -shared -fPIC -fvisibility=hidden $(pkg-config --cflags tstor) \
 *      minimal-backend.c -o tstor-toy.so
 *
 * Config: [backend toy] devices = N (default 1; 0 declines). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tstor/backend.h>

#define TOY_ALIGN 64

typedef struct toy {
  const tstor_registrar *reg;
  int ndevices;
  atomic_ullong allocated[8]; /* bytes handed out, per device */
} toy;

static int toy_count(void *state) { return ((toy *)state)->ndevices; }

static int toy_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out) {
  toy *t = state;
  (void)stream;
  out->ptr = NULL;
  out->alloc_ctx = NULL;
  if (nbytes == 0) return 0;
  if (nbytes > SIZE_MAX - TOY_ALIGN)
    return t->reg->set_error(TSTOR_ENOMEM, "toy:%d: %zu bytes is too many", index, nbytes);
  /* aligned_alloc wants a multiple of the alignment. */
  out->ptr = aligned_alloc(TOY_ALIGN, (nbytes + TOY_ALIGN - 1) / TOY_ALIGN * TOY_ALIGN);
  if (!out->ptr)
    return t->reg->set_error(TSTOR_ENOMEM, "toy:%d: out of memory for %zu bytes", index, nbytes);
  atomic_fetch_add(&t->allocated[index], nbytes);
  return 0;
}

static void toy_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  toy *t = state;
  (void)alloc_ctx;
  if (ptr) atomic_fetch_sub(&t->allocated[index], nbytes);
  free(ptr);
}

/* Fills only what the core's tstor_stats holds (its struct_size says). */
static int toy_stats(void *state, int index, tstor_stats *out) {
  if (TSTOR_STATS_HAS(out, allocated))
    out->allocated = atomic_load(&((toy *)state)->allocated[index]);
  return 0;
}

static const tstor_allocator_ops toy_allocator = {
    .struct_size = sizeof(tstor_allocator_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .name = "toy",
    .allocate = toy_allocate,
    .free = toy_free,
    .stats = toy_stats, /* the optional ops left out stay NULL: the core falls back */
};

static const tstor_device_ops toy_device = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "toy",
    .flags = 0, /* not TSTOR_DEVICE_HOST: the core must use the copy kernels */
    .device_count = toy_count,
    .allocator = &toy_allocator,
};

/* One kernel serves cpu->toy, toy->cpu and toy->toy. Without a stream of its
 * own (none is offered), every copy is complete when it returns. */
static int toy_copy(void *state, void *dst, int dst_index, const void *src, int src_index,
                    size_t nbytes, void *stream) {
  (void)state, (void)dst_index, (void)src_index, (void)stream;
  if (nbytes) memmove(dst, src, nbytes);
  return 0;
}

static int toy_init(const tstor_registrar *reg, tstor_module *m, void **module_state, char *msg,
                    size_t msg_size) {
  long long devices;
  int rc = reg->config_int(m, "devices", 1, 0, 8, &devices);
  if (rc) return rc; /* the core has said which line is wrong */
  if (devices == 0) {
    snprintf(msg, msg_size, "no toy devices (devices = 0)");
    return TSTOR_EDECLINED;
  }
  toy *t = calloc(1, sizeof *t);
  if (!t) {
    snprintf(msg, msg_size, "out of memory");
    return TSTOR_ENOMEM;
  }
  t->reg = reg;
  t->ndevices = (int)devices;
  if ((rc = reg->register_device_type(m, &toy_device, t)) != 0 ||
      (rc = reg->register_copy(m, "cpu", "toy", toy_copy, t)) != 0 ||
      (rc = reg->register_copy(m, "toy", "cpu", toy_copy, t)) != 0 ||
      (rc = reg->register_copy(m, "toy", "toy", toy_copy, t)) != 0) {
    free(t); /* the core drops what was registered, and says why it refused */
    return rc;
  }
  *module_state = t;
  return 0;
}

static void toy_fini(void *module_state) { free(module_state); }

TSTOR_BACKEND_DEFINE(toy_init, toy_fini);
