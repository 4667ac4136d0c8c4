/* ABI evolution: modules built against other versions of backend.h.
 *
 *   tstor_backend_entry   tables as an older minor version had them, each
 *                         shorter than today's: the entry has no fini, the
 *                         device ops stop after `allocator`, the allocator
 *                         after `free`. Loads as device type "older", which
 *                         works through the core's fallbacks (fill, streams,
 *                         statistics). The device and allocator tables end
 *                         exactly where a PROT_NONE page begins, so a core
 *                         that reads a field past a declared struct_size
 *                         faults; the entry's trailing slot is a trap.
 *   abi_next_major        ABI (major + 1).2: must be refused, naming both
 *                         versions, before anything is called. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tstor/backend.h>

#define ABI_OF(major, minor) ((uint32_t)(((major) << 16) | (minor)))

/* ------------------------------------------------- the older, smaller tables */

typedef struct older_allocator_ops {
  uint32_t struct_size;
  uint32_t abi_version;
  const char *name;
  uint32_t flags;
  int (*allocate)(void *state, int index, size_t nbytes, void *stream, tstor_block *out);
  void (*free)(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx);
} older_allocator_ops;

typedef struct older_device_ops {
  uint32_t struct_size;
  uint32_t abi_version;
  const char *type_name;
  uint32_t flags;
  int (*device_count)(void *state);
  const void *allocator;
} older_device_ops;

typedef struct older_entry {
  uint32_t struct_size;
  uint32_t abi_version;
  int (*init)(const tstor_registrar *reg, tstor_module *m, void **module_state, char *msg,
              size_t msg_size);
  void (*trap)(void *); /* where today's fini is: past the declared size */
} older_entry;

/* The same prefix as today's tables, field for field: what "appended only"
 * promises. */
_Static_assert(offsetof(older_device_ops, allocator) == offsetof(tstor_device_ops, allocator),
               "device ops prefix");
_Static_assert(offsetof(older_allocator_ops, free) == offsetof(tstor_allocator_ops, free),
               "allocator ops prefix");
_Static_assert(offsetof(older_entry, trap) == offsetof(tstor_backend_def, fini), "entry prefix");

static int older_count(void *state) { return 1; }

static int older_allocate(void *state, int index, size_t nbytes, void *stream,
                          tstor_block *out) {
  out->ptr = NULL;
  out->alloc_ctx = NULL;
  if (nbytes == 0) return 0;
  out->ptr = malloc(nbytes);
  return out->ptr ? 0 : TSTOR_ENOMEM;
}

static void older_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  free(ptr);
}

static int older_copy(void *state, void *dst, int dst_index, const void *src, int src_index,
                      size_t nbytes, void *stream) {
  if (nbytes) memmove(dst, src, nbytes);
  return 0;
}

/* Where `size` bytes end exactly at the end of `page`. */
static void *at_page_end(void *page, size_t size) {
  long pagesize = sysconf(_SC_PAGESIZE);
  return (char *)page + pagesize - size;
}

static int older_init(const tstor_registrar *reg, tstor_module *m, void **module_state,
                      char *msg, size_t msg_size) {
  long pagesize = sysconf(_SC_PAGESIZE);
  char *pages = mmap(NULL, 4 * (size_t)pagesize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED) return TSTOR_ENOMEM;
  /* pages: [device ops page][guard][allocator page][guard]. This entry
   * predates fini, so they stay mapped for the life of the process. */
  older_allocator_ops *alloc = at_page_end(pages + 2 * pagesize, sizeof *alloc);
  older_device_ops *dev = at_page_end(pages, sizeof *dev);
  *alloc = (older_allocator_ops){sizeof *alloc, ABI_OF(TSTOR_ABI_MAJOR, 0), "older", 0,
                                 older_allocate, older_free};
  *dev = (older_device_ops){sizeof *dev, ABI_OF(TSTOR_ABI_MAJOR, 0), "older", 0, older_count,
                            alloc};
  if (mprotect(pages + pagesize, (size_t)pagesize, PROT_NONE) != 0 ||
      mprotect(pages + 3 * pagesize, (size_t)pagesize, PROT_NONE) != 0)
    return TSTOR_EBACKEND;
  *module_state = pages;
  int rc = reg->register_device_type(m, (const tstor_device_ops *)dev, NULL);
  if (rc == 0) rc = reg->register_copy(m, "cpu", "older", older_copy, NULL);
  if (rc == 0) rc = reg->register_copy(m, "older", "cpu", older_copy, NULL);
  if (rc == 0) rc = reg->register_copy(m, "older", "older", older_copy, NULL);
  return rc;
}

/* Calling this would be the bug under test: it lies past the declared size. */
static void trap(void *state) {
  (void)state;
  abort();
}

TSTOR_EXTERN const older_entry tstor_backend_entry = {offsetof(older_entry, trap),
                                                      ABI_OF(TSTOR_ABI_MAJOR, 0), older_init,
                                                      trap};

/* ------------------------------------------------------ a newer major version */

static int never_init(const tstor_registrar *reg, tstor_module *m, void **module_state,
                      char *msg, size_t msg_size) {
  abort();
}

TSTOR_EXTERN const tstor_backend_def abi_next_major = {
    sizeof(tstor_backend_def), ABI_OF(TSTOR_ABI_MAJOR + 1, 2), never_init, trap};
