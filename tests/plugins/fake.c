/* An extra device type "fake" for the core's tests: memory the core must not
 * touch directly. Its bytes are kept XOR-scrambled, so only the registered
 * copy kernels (fake->cpu, cpu->fake) read and write them correctly; a core
 * that memcpy'd or memset device addresses would be caught by the round trip.
 *
 * It declares an allocator table of the ABI's first size (no optional ops) and
 * leaves a trap past that size, so a core that reads beyond struct_size aborts.
 * It checks that free() gets back the nbytes and alloc_ctx of the allocation.
 *
 * Keys: devices (0..8, default 2); trace (a file that gets one line per init
 * and fini, "fini live=N" with the blocks still allocated: the lifetime tests
 * read it to see when the module was finalised, and one per batch, "batch
 * fake->cpu N" with its span count); batch (yes: batched kernels for both
 * pairs too, default no); batch_twice (yes: the second registration of one,
 * which the core refuses); batch_fail_at (the span of every batch that fails
 * with TSTOR_EIO, after the ones before it moved; default -1: none). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tstor/backend.h>

#define FAKE_SCRAMBLE 0xA5u
#define FAKE_MAGIC 0xFA4EB10CU

typedef struct fake_state {
  int count;
  long long fail_at;
  char *trace;
  atomic_long live_blocks;
} fake_state;

typedef struct fake_header {
  size_t nbytes;
  unsigned magic;
  int index;
} fake_header;

static void fake_trace(const fake_state *st, const char *fmt, long value) {
  if (st->trace == NULL) return;
  FILE *f = fopen(st->trace, "a");
  if (f == NULL) return;
  fprintf(f, fmt, value);
  fclose(f);
}

static int fake_count(void *state) { return ((fake_state *)state)->count; }

/* Each block starts 64 bytes into a malloc'd chunk that records its size. */
#define FAKE_PAD 64

static int fake_allocate(void *state, int index, size_t nbytes, void *stream,
                         tstor_block *out) {
  fake_state *st = state;
  if (index < 0 || index >= st->count) abort();
  if (nbytes == 0) {
    out->ptr = NULL;
    out->alloc_ctx = NULL;
    atomic_fetch_add(&st->live_blocks, 1);
    return 0;
  }
  if (nbytes > ((size_t)1 << 32)) return TSTOR_ENOMEM;
  char *chunk = malloc(FAKE_PAD + nbytes);
  if (chunk == NULL) return TSTOR_ENOMEM;
  fake_header *h = (fake_header *)chunk;
  h->nbytes = nbytes;
  h->magic = FAKE_MAGIC;
  h->index = index;
  out->ptr = chunk + FAKE_PAD;
  out->alloc_ctx = h;
  atomic_fetch_add(&st->live_blocks, 1);
  return 0;
}

static void fake_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  fake_state *st = state;
  atomic_fetch_sub(&st->live_blocks, 1);
  if (ptr == NULL) {
    if (nbytes != 0 || alloc_ctx != NULL) abort();
    return;
  }
  fake_header *h = (fake_header *)((char *)ptr - FAKE_PAD);
  if (alloc_ctx != h || h->magic != FAKE_MAGIC || h->nbytes != nbytes || h->index != index)
    abort();
  h->magic = 0;
  free(h);
}

static int fake_trap(void *state, int index, tstor_block *block, size_t old_nbytes,
                     size_t new_nbytes) {
  /* Past the declared struct_size: the core must treat this field as absent. */
  abort();
}

static const tstor_allocator_ops fake_allocator = {
    offsetof(tstor_allocator_ops, reallocate), TSTOR_ABI_VERSION, "fake", 0,
    fake_allocate, fake_free, fake_trap, NULL, NULL, NULL, NULL};

static void scramble_copy(unsigned char *dst, const unsigned char *src, size_t n) {
  /* Eight bytes at a time: the tests copy tens of megabytes through here,
   * under sanitizers too. */
  const uint64_t mask = 0x0101010101010101ULL * FAKE_SCRAMBLE;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, src + i, 8);
    w ^= mask;
    memcpy(dst + i, &w, 8);
  }
  for (; i < n; i++) dst[i] = src[i] ^ FAKE_SCRAMBLE;
}

static int fake_check_index(fake_state *st, int index) {
  if (index < 0 || index >= st->count) abort();
  return 0;
}

static int fake_to_cpu(void *state, void *dst, int dst_index, const void *src, int src_index,
                       size_t nbytes, void *stream) {
  fake_check_index(state, src_index);
  if (dst_index != 0 || stream != NULL) abort();
  scramble_copy(dst, src, nbytes);
  return 0;
}

static int fake_from_cpu(void *state, void *dst, int dst_index, const void *src,
                         int src_index, size_t nbytes, void *stream) {
  fake_check_index(state, dst_index);
  if (src_index != 0 || stream != NULL) abort();
  scramble_copy(dst, src, nbytes);
  return 0;
}

/* Both batched kernels: the spans in order, each through the pair's kernel. */
static int fake_batch(fake_state *st, const tstor_copy_span *spans, size_t count, size_t *failed,
                      const char *pair, tstor_copy_fn one) {
  if (st->trace) {
    FILE *f = fopen(st->trace, "a");
    if (f) {
      fprintf(f, "batch %s %zu\n", pair, count);
      fclose(f);
    }
  }
  for (size_t i = 0; i < count; i++) {
    if (spans[i].nbytes == 0) abort(); /* the core never hands over an empty span */
    if (st->fail_at >= 0 && i == (size_t)st->fail_at) {
      *failed = i;
      return TSTOR_EIO;
    }
    one(st, spans[i].dst, spans[i].dst_index, spans[i].src, spans[i].src_index, spans[i].nbytes,
        NULL);
  }
  return 0;
}

static int fake_batch_to_cpu(void *state, const tstor_copy_span *spans, size_t count,
                             size_t *failed) {
  return fake_batch(state, spans, count, failed, "fake->cpu", fake_to_cpu);
}

static int fake_batch_from_cpu(void *state, const tstor_copy_span *spans, size_t count,
                               size_t *failed) {
  return fake_batch(state, spans, count, failed, "cpu->fake", fake_from_cpu);
}

static int register_batches(const tstor_registrar *reg, tstor_module *m, fake_state *st) {
  int batch, twice, rc;
  if ((rc = reg->config_bool(m, "batch", 0, &batch)) != 0 ||
      (rc = reg->config_bool(m, "batch_twice", 0, &twice)) != 0 ||
      (rc = reg->config_int(m, "batch_fail_at", -1, -1, 1 << 30, &st->fail_at)) != 0 || !batch)
    return rc;
  if ((rc = reg->register_copy_batch(m, "fake", "cpu", fake_batch_to_cpu, st)) != 0 ||
      (rc = reg->register_copy_batch(m, "cpu", "fake", fake_batch_from_cpu, st)) != 0)
    return rc;
  return twice ? reg->register_copy_batch(m, "fake", "cpu", fake_batch_to_cpu, st) : 0;
}

static const tstor_device_ops fake_device = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "fake",
    .flags = 0,
    .device_count = fake_count,
    .allocator = &fake_allocator,
};

static int fake_init(const tstor_registrar *reg, tstor_module *m, void **module_state,
                     char *msg, size_t msg_size) {
  long long count;
  int rc = reg->config_int(m, "devices", 2, 0, 8, &count);
  if (rc != 0) return rc;
  /* A check config_int cannot express, reported through config_error. */
  const char *label = reg->config_get(m, "label");
  for (const char *c = label; c != NULL && *c != '\0'; c++)
    if (*c >= 'A' && *c <= 'Z') return reg->config_error(m, "label", "use lower case");
  fake_state *st = calloc(1, sizeof *st);
  if (st == NULL) return TSTOR_ENOMEM;
  st->count = (int)count;
  const char *trace = reg->config_get(m, "trace");
  if (trace != NULL && (st->trace = strdup(trace)) == NULL) {
    free(st);
    return TSTOR_ENOMEM;
  }
  if ((rc = reg->register_device_type(m, &fake_device, st)) != 0 ||
      (rc = reg->register_copy(m, "fake", "cpu", fake_to_cpu, st)) != 0 ||
      (rc = reg->register_copy(m, "cpu", "fake", fake_from_cpu, st)) != 0 ||
      (rc = register_batches(reg, m, st)) != 0) {
    snprintf(msg, msg_size, "fake: registration failed (%d)", rc);
    free(st->trace);
    free(st);
    return rc;
  }
  fake_trace(st, "init %ld\n", (long)count);
  reg->log(m, TSTOR_LOG_DEBUG, "ready with %lld device(s)", count);
  *module_state = st;
  return 0;
}

static void fake_fini(void *module_state) {
  fake_state *st = module_state;
  fake_trace(st, "fini live=%ld\n", atomic_load(&st->live_blocks));
  free(st->trace);
  free(st);
}

TSTOR_BACKEND_DEFINE(fake_init, fake_fini);
