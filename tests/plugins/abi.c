/* Entry points of several ABI versions in one module; a config picks one with
 * `entry = NAME`. The core must read struct_size and abi_version before it
 * calls anything, refuse another major version (newer or older) and a table
 * too short to hold init, and load a newer minor version whose tables are
 * longer than the core knows.
 *
 *   tstor_backend_entry  major + 1            refused (TSTOR_EABI)
 *   abi_entry_major0     major 0              refused (TSTOR_EABI)
 *   abi_entry_short      struct_size 8        refused (TSTOR_EABI)
 *   abi_entry_minor      same major, minor + 7, every table longer: loads and
 *                        registers device type "newer" */
#include <stdlib.h>
#include <string.h>
#include <tstor/backend.h>

static int trap_init(const tstor_registrar *reg, tstor_module *m, void **state, char *msg,
                     size_t msg_size) {
  /* Calling this would be the bug under test. */
  abort();
}

static void trap_fini(void *state) { abort(); }

#define ABI_OF(major, minor) ((uint32_t)(((major) << 16) | (minor)))

TSTOR_EXTERN const tstor_backend_def tstor_backend_entry = {
    sizeof(tstor_backend_def), ABI_OF(TSTOR_ABI_MAJOR + 1, 0), trap_init, trap_fini};

TSTOR_EXTERN const tstor_backend_def abi_entry_major0 = {
    sizeof(tstor_backend_def), ABI_OF(TSTOR_ABI_MAJOR - 1, 3), trap_init, trap_fini};

TSTOR_EXTERN const tstor_backend_def abi_entry_short = {
    2 * sizeof(uint32_t), TSTOR_ABI_VERSION, trap_init, trap_fini};

/* -------------------------------------------- a module from a newer minor */

#define NEWER_ABI ABI_OF(TSTOR_ABI_MAJOR, TSTOR_ABI_MINOR + 7)

/* Tables as a later minor version would have them: the same fields, then new
 * ones the core does not know and must ignore. */
typedef struct {
  tstor_allocator_ops known;
  void *appended[4];
} newer_allocator_ops;

typedef struct {
  tstor_device_ops known;
  void *appended[4];
} newer_device_ops;

typedef struct {
  tstor_backend_def known;
  void *appended[4];
} newer_entry;

static int newer_count(void *state) { return 1; }

static int newer_allocate(void *state, int index, size_t nbytes, void *stream,
                          tstor_block *out) {
  out->ptr = nbytes ? malloc(nbytes) : NULL;
  out->alloc_ctx = NULL;
  return nbytes && out->ptr == NULL ? TSTOR_ENOMEM : 0;
}

static void newer_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  free(ptr);
}

static void never(void) { abort(); }

static const newer_allocator_ops newer_allocator = {
    {sizeof(newer_allocator_ops), NEWER_ABI, "newer", 0, newer_allocate, newer_free, NULL,
     NULL, NULL, NULL, NULL},
    {(void *)never, (void *)never, (void *)never, (void *)never}};

static const newer_device_ops newer_device = {
    {.struct_size = sizeof(newer_device_ops),
     .abi_version = NEWER_ABI,
     .type_name = "newer",
     .flags = TSTOR_DEVICE_HOST,
     .device_count = newer_count,
     .allocator = &newer_allocator.known},
    {(void *)never, (void *)never, (void *)never, (void *)never}};

static int newer_init(const tstor_registrar *reg, tstor_module *m, void **state, char *msg,
                      size_t msg_size) {
  return reg->register_device_type(m, &newer_device.known, NULL);
}

static void newer_fini(void *state) {}

TSTOR_EXTERN const newer_entry abi_entry_minor = {
    {sizeof(newer_entry), NEWER_ABI, newer_init, newer_fini},
    {(void *)never, (void *)never, (void *)never, (void *)never}};
