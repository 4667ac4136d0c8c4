/* A module that notices when its init or fini overlaps another init or fini
 * of itself, from any context: both touch one plain static counter, as real
 * modules touch their shared static state, and stay inside long enough for
 * an overlap to happen. serial_overlaps() (read by the test through dlsym)
 * counts the overlaps seen; ThreadSanitizer reports the counter's race. */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <tstor/backend.h>

static atomic_int inside;
static atomic_int overlaps;
static long live_states; /* plain on purpose: the loader lock guards it */

TSTOR_EXTERN int serial_overlaps(void);
int serial_overlaps(void) { return atomic_load(&overlaps); }

static void enter(void) {
  if (atomic_exchange(&inside, 1)) atomic_fetch_add(&overlaps, 1);
  struct timespec pause = {0, 200 * 1000};
  nanosleep(&pause, NULL);
}

static void leave(void) { atomic_store(&inside, 0); }

static int count_one(void *state) {
  (void)state;
  return 1;
}

static int serial_allocate(void *state, int index, size_t nbytes, void *stream,
                           tstor_block *out) {
  (void)state, (void)index, (void)stream;
  out->ptr = nbytes ? malloc(nbytes) : NULL;
  out->alloc_ctx = NULL;
  return nbytes && !out->ptr ? TSTOR_ENOMEM : 0;
}

static void serial_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  (void)state, (void)index, (void)nbytes, (void)alloc_ctx;
  free(ptr);
}

static const tstor_allocator_ops serial_allocator = {
    TSTOR_OPS_HEADER(tstor_allocator_ops), "serial", 0, serial_allocate, serial_free,
    NULL, NULL, NULL, NULL, NULL};

static const tstor_device_ops serial_device = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "serial",
    .flags = TSTOR_DEVICE_HOST,
    .device_count = count_one,
    .allocator = &serial_allocator,
};

static int serial_init(const tstor_registrar *reg, tstor_module *m, void **state, char *msg,
                       size_t msg_size) {
  (void)msg, (void)msg_size;
  enter();
  live_states++;
  *state = &live_states;
  int rc = reg->register_device_type(m, &serial_device, NULL);
  if (rc != 0) live_states--;
  leave();
  return rc;
}

static void serial_fini(void *state) {
  enter();
  (*(long *)state)--;
  leave();
}

TSTOR_BACKEND_DEFINE(serial_init, serial_fini);
