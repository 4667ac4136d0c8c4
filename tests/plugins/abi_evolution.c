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
 *   abi_older_stats       an allocator table of ABI 1.0 with stats(): it
 *                         fills tstor_stats as 1.0 had it, without
 *                         struct_size, counters 1 to 11 in order; device
 *                         type "olderstats". Its tables end at guard pages too.
 *   abi_future            every table and filled struct as the next minor
 *                         version has them (future_backend.h), with traps
 *                         in the appended slots; device type "future". Its
 *                         stats() writes the appended counter only when the
 *                         core's struct_size covers it, and abi_future_seen()
 *                         tells the test what it saw.
 *   abi_next_major        ABI (major + 1).2: must be refused, naming both
 *                         versions, before anything is called. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tstor/backend.h>

#include "future_backend.h"

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

/* --------------------------------------- 1.0 statistics, without struct_size */

typedef struct stats_1_0 {
  uint64_t allocated, reserved, active, peak_allocated, peak_reserved, peak_active,
      alloc_count, free_count, cache_hits, retries, oom_count;
} stats_1_0;

static int older_stats(void *state, int index, stats_1_0 *out) {
  (void)state, (void)index;
  uint64_t *counter = &out->allocated;
  for (int i = 0; i < 11; i++) counter[i] = (uint64_t)i + 1;
  return 0;
}

static int older_stats_init(const tstor_registrar *reg, tstor_module *m, void **module_state,
                            char *msg, size_t msg_size) {
  (void)msg, (void)msg_size;
  long pagesize = sysconf(_SC_PAGESIZE);
  char *pages = mmap(NULL, 4 * (size_t)pagesize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED) return TSTOR_ENOMEM;
  /* A 1.0 allocator table, whole: today's layout but for what stats() fills. */
  tstor_allocator_ops *alloc = at_page_end(pages + 2 * pagesize, sizeof *alloc);
  older_device_ops *dev = at_page_end(pages, sizeof *dev);
  memset(alloc, 0, sizeof *alloc);
  alloc->struct_size = sizeof *alloc;
  alloc->abi_version = ABI_OF(TSTOR_ABI_MAJOR, 0);
  alloc->name = "olderstats";
  alloc->allocate = older_allocate;
  alloc->free = older_free;
  alloc->stats = (int (*)(void *, int, tstor_stats *))(void (*)(void))older_stats;
  *dev = (older_device_ops){sizeof *dev, ABI_OF(TSTOR_ABI_MAJOR, 0), "olderstats", 0,
                            older_count, alloc};
  if (mprotect(pages + pagesize, (size_t)pagesize, PROT_NONE) != 0 ||
      mprotect(pages + 3 * pagesize, (size_t)pagesize, PROT_NONE) != 0)
    return TSTOR_EBACKEND;
  *module_state = pages;
  return reg->register_device_type(m, (const tstor_device_ops *)dev, NULL);
}

TSTOR_EXTERN const older_entry abi_older_stats = {offsetof(older_entry, trap),
                                                  ABI_OF(TSTOR_ABI_MAJOR, 0), older_stats_init,
                                                  trap};

/* ------------------------------------------------- the next minor version */

/* What the newer module saw of today's core, for the test. */
static uint32_t future_stats_size_seen;
static int future_wrote_compactions, future_registrar_had_health, future_finis;

TSTOR_EXTERN void abi_future_seen(uint32_t *stats_size, int *wrote_compactions,
                                  int *registrar_had_health, int *finis);
void abi_future_seen(uint32_t *stats_size, int *wrote_compactions, int *registrar_had_health,
                     int *finis) {
  *stats_size = future_stats_size_seen;
  *wrote_compactions = future_wrote_compactions;
  *registrar_had_health = future_registrar_had_health;
  *finis = future_finis;
}

static int future_stats_op(void *state, int index, tstor_stats *out) {
  (void)state, (void)index;
  future_stats_size_seen = out->struct_size;
  if (TSTOR_STATS_HAS(out, allocated)) out->allocated = 4242;
  if (TSTOR_STATS_HAS(out, oom_count)) out->oom_count = 7;
  if (FUTURE_STATS_HAS(out, compactions)) {
    ((future_stats *)out)->compactions = 99;
    future_wrote_compactions = 1;
  }
  return 0;
}

static uint32_t future_properties_size_seen;
static int future_wrote_temperature;

TSTOR_EXTERN void abi_future_properties_seen(uint32_t *size, int *wrote_temperature);
void abi_future_properties_seen(uint32_t *size, int *wrote_temperature) {
  *size = future_properties_size_seen;
  *wrote_temperature = future_wrote_temperature;
}

static int future_properties_op(void *state, int index, tstor_device_properties *out) {
  (void)state, (void)index;
  future_properties_size_seen = out->struct_size;
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, total_bytes)) {
    out->total_bytes = 1 << 30;
    out->free_bytes = 1 << 20;
    out->reported |= TSTOR_PROP_TOTAL | TSTOR_PROP_FREE;
  }
  if (FUTURE_DEVICE_PROPERTIES_HAS(out, temperature_mc)) {
    ((future_device_properties *)out)->temperature_mc = 41000;
    future_wrote_temperature = 1;
  }
  return 0;
}

static int future_trim(void *state, int index, size_t keep) {
  (void)state, (void)index, (void)keep;
  abort(); /* today's core knows nothing of it */
}

static int future_copy_2d(void *state, int index, void *dst, const void *src,
                               size_t nbytes, size_t stride, void *stream) {
  (void)state, (void)index, (void)dst, (void)src, (void)nbytes, (void)stride, (void)stream;
  abort();
}

static const future_allocator_ops future_allocator = {
    .now = {.struct_size = sizeof(future_allocator_ops),
            .abi_version = FUTURE_ABI_VERSION,
            .name = "future",
            .allocate = older_allocate,
            .free = older_free,
            .stats = future_stats_op},
    .trim = future_trim,
};

static const future_device_ops future_device = {
    .now = {.struct_size = sizeof(future_device_ops),
            .abi_version = FUTURE_ABI_VERSION,
            .type_name = "future",
            .flags = TSTOR_DEVICE_HOST,
            .device_count = older_count,
            .allocator = &future_allocator.now,
            .properties = future_properties_op},
    .copy_2d = future_copy_2d,
};

static int future_init(const tstor_registrar *reg, tstor_module *m, void **module_state,
                       char *msg, size_t msg_size) {
  (void)msg, (void)msg_size;
  /* A service of the next version: today's registrar does not have it. */
  future_registrar_had_health = FUTURE_REGISTRAR_HAS(reg, report_health);
  if (future_registrar_had_health) ((const future_registrar *)reg)->report_health(m, 1);
  *module_state = NULL;
  return reg->register_device_type(m, &future_device.now, NULL);
}

static void future_fini(void *module_state) {
  (void)module_state;
  future_finis++;
}

static void future_before_fork(void *module_state) {
  (void)module_state;
  abort();
}

TSTOR_EXTERN const future_backend_def abi_future = {
    .now = {sizeof(future_backend_def), FUTURE_ABI_VERSION, future_init, future_fini},
    .before_fork = future_before_fork,
};

/* ------------------------------------------------------ a newer major version */

static int never_init(const tstor_registrar *reg, tstor_module *m, void **module_state,
                      char *msg, size_t msg_size) {
  abort();
}

TSTOR_EXTERN const tstor_backend_def abi_next_major = {
    sizeof(tstor_backend_def), ABI_OF(TSTOR_ABI_MAJOR + 1, 2), never_init, trap};
