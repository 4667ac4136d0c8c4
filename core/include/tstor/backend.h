/* tstor backend ABI: what a backend module sees of the core.
 *
 * A backend is a shared object with one exported symbol, `tstor_backend_entry`
 * (TSTOR_BACKEND_DEFINE writes it). The core dlopens the module, reads the
 * entry's struct_size and abi_version before calling anything, refuses a newer
 * major version, then calls init() with a registrar: a table of core services
 * through which the module registers device types, allocators and copy kernels
 * and reads its own [backend NAME] config keys.
 *
 * Versioning rules (as sqlite3_vfs and PJRT): every table and every struct one
 * side fills for the other begins with its size (and the tables with the ABI
 * version they were built against). Fields are only ever appended, each marked
 * "since 1.N" with TSTOR_ABI_MINOR bumped to N for it; a field past a struct's
 * declared struct_size is absent (NULL, 0) and is never read or written. Each
 * struct has its TSTOR_*_HAS(s, field) macro for that test, which both sides
 * use: the core on a module's tables, a module on the core's registrar and on
 * what the core hands it to fill (tstor_stats). A change of TSTOR_ABI_MAJOR
 * means old modules are refused; minor bumps keep them loading.
 *
 * History: 1.0 the first release. 1.1 tstor_stats begins with struct_size
 * (the core hands an allocator table built for 1.0 the 1.0 layout, without
 * it, and converts). 1.2 tstor_device_ops.copy_strided. 1.3
 * tstor_device_ops.describe. 1.4 tstor_registrar.register_copy_batch. 1.5
 * tstor_device_ops.properties.
 *
 * tstor_block and tstor_copy_span are the exceptions: fixed for ABI 1; an
 * allocator that needs to remember more keeps it behind alloc_ctx, and a batch
 * that needs more than a span says is another kind of kernel.
 *
 * Threading: the core may call any op from any thread, concurrently, once init
 * has returned. init and fini are called with the core's loader lock held: one
 * lock for the process, so no two inits or finis run at once, of one module or
 * of any two, even for different contexts (they may share a module's static
 * data). The lock is recursive: a fini may drop a context's last reference and
 * so run another fini on the same thread. fini runs after every op on the
 * module_state it receives has returned.
 *
 * Unloading: after fini the core dlcloses the module, and its code and data
 * are unmapped while no thread may still enter them. The core waits for its
 * own calls; code the system calls on its own is the module's business. A
 * module that installs a thread-exit destructor (pthread_key_create with a
 * destructor, C11 tss_create, C++ thread_local with a destructor) must not be
 * unmapped at all, since pthread_key_delete does not wait for a destructor
 * already started: before the first thread's value is set it pins itself with
 * dlopen(its own path from dladdr, RTLD_NOLOAD | RTLD_NODELETE), as the cpu
 * backend's block cache does. (glibc drops a module's pthread_atfork handlers
 * when it unloads it; signal handlers a module installs it restores in fini.)
 *
 * Errors: ops return 0 or a negative TSTOR_E* code; they describe a failure
 * with reg->set_error(), which fills the caller's tstor_last_error().
 */
#ifndef TSTOR_BACKEND_H
#define TSTOR_BACKEND_H

#include <stdarg.h>
#include <tstor/tstor.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TSTOR_ABI_MAJOR 1
#define TSTOR_ABI_MINOR 5
#define TSTOR_ABI_VERSION ((uint32_t)((TSTOR_ABI_MAJOR << 16) | TSTOR_ABI_MINOR))
#define TSTOR_ABI_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define TSTOR_ABI_MINOR_OF(v) ((uint32_t)(v)&0xffffu)

/* The core's handle for a loaded module; opaque, passed back to the registrar. */
typedef struct tstor_module tstor_module;

/* -------------------------------------------------------------- allocators */

/* What an allocation hands back to the core. Fixed for ABI 1 (no size). */
typedef struct tstor_block {
  void *ptr;       /* device address of the bytes; NULL for 0 bytes or no-data devices */
  void *alloc_ctx; /* the allocator's own record, given back to free(); may be NULL */
} tstor_block;

enum {
  TSTOR_ALLOC_PINNED = 1 << 0 /* host memory that asynchronous device copies may use */
};

typedef struct tstor_allocator_ops {
  uint32_t struct_size; /* sizeof(tstor_allocator_ops) as the module was built */
  uint32_t abi_version; /* TSTOR_ABI_VERSION as the module was built */
  const char *name;     /* "cpu", "cuda", "cuda-pinned"; static, for messages */
  uint32_t flags;       /* TSTOR_ALLOC_* */

  /* Required. Allocate nbytes (0 allowed) on device `index`, for use on `stream`
   * (NULL: the device's default stream). The memory belongs to the core until
   * free() is called for it exactly once, with the same nbytes. */
  int (*allocate)(void *state, int index, size_t nbytes, void *stream, tstor_block *out);
  void (*free)(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx);

  /* Optional (NULL when absent). Grow or shrink in place or by moving, keeping
   * min(old, new) bytes; on failure the block is unchanged. Without it the core
   * allocates, copies and frees. */
  int (*reallocate)(void *state, int index, tstor_block *block, size_t old_nbytes,
                    size_t new_nbytes);
  /* The block is used on `stream` too: do not reuse it before that work is done. */
  int (*record_stream)(void *state, int index, void *ptr, void *alloc_ctx, void *stream);
  /* Statistics. The core zeroes *out and sets out->struct_size to its own
   * sizeof(tstor_stats); write only the fields TSTOR_STATS_HAS(out, field)
   * covers (tstor_stats_copy does), never struct_size. */
  int (*stats)(void *state, int index, tstor_stats *out);
  int (*reset_peak)(void *state, int index);
  int (*empty_cache)(void *state, int index);
  /* Fields above: since 1.0. Append below, marked "since 1.N". */
} tstor_allocator_ops;

#define TSTOR_ALLOCATOR_OPS_HAS(ops, field) \
  TSTOR_SIZE_COVERS(tstor_allocator_ops, (ops)->struct_size, field)

/* ------------------------------------------- file mapping and shared memory */

/* How map() opens and maps an object (tstor/mapped.h is the user's side). */
enum {
  TSTOR_MAP_SHARED = 1 << 0,   /* MAP_SHARED: writes reach the object and every other
                                  mapping of it; without it a private copy-on-write map */
  TSTOR_MAP_SHM = 1 << 1,      /* name is a POSIX shared-memory object (shm_open) */
  TSTOR_MAP_CREATE = 1 << 2,   /* with SHARED: create name (mode 0600) when missing and
                                  grow it to nbytes with the space reserved, not sparse */
  TSTOR_MAP_WHOLE = 1 << 3,    /* map the object's whole size (an empty one is an error) */
  TSTOR_MAP_UNIQUE = 1 << 4,   /* with SHM: create a new object under a fresh unguessable
                                  name (O_EXCL, mode 0600); name is ignored */
  TSTOR_MAP_UNLINK = 1 << 5,   /* with UNIQUE: unlink the name as soon as it is open */
  TSTOR_MAP_OWN_NAME = 1 << 6, /* with UNIQUE: unlink the name when the block is freed
                                  (by the process that created it, not by a fork child) */
  TSTOR_MAP_KEEP_FD = 1 << 7   /* keep a descriptor open, for mapping_info() */
};

/* One map() call: the core fills the inputs, the backend the outputs. */
typedef struct tstor_map_request {
  uint32_t struct_size; /* sizeof(tstor_map_request) as the core was built */
  uint32_t abi_version; /* the core's TSTOR_ABI_VERSION */
  const char *name;     /* a path, or a shm name with TSTOR_MAP_SHM; borrowed; NULL with
                           fd >= 0 or TSTOR_MAP_UNIQUE */
  int fd;               /* >= 0: map this descriptor instead of a name; borrowed (the
                           backend duplicates what it keeps), -1 otherwise */
  uint32_t flags;       /* TSTOR_MAP_* */
  size_t nbytes;        /* bytes to map from offset 0; ignored with TSTOR_MAP_WHOLE */
  /* Outputs, written only on success. */
  tstor_block block;    /* the mapping; the core frees it with this device type's
                           allocator free(ptr, mapped_nbytes, alloc_ctx) */
  size_t mapped_nbytes; /* bytes mapped (ptr is NULL for 0) */
  char created_name[64]; /* TSTOR_MAP_UNIQUE: the name created, NUL-terminated */
  /* Fields above: since 1.0. Append below, marked "since 1.N". */
} tstor_map_request;

#define TSTOR_MAP_REQUEST_HAS(req, field) \
  TSTOR_SIZE_COVERS(tstor_map_request, (req)->struct_size, field)

/* What a block from map() is. */
typedef struct tstor_mapping_info {
  uint32_t struct_size; /* sizeof(tstor_mapping_info) as the core was built */
  uint32_t abi_version; /* the core's TSTOR_ABI_VERSION */
  uint32_t flags;       /* the TSTOR_MAP_* it was mapped with */
  int fd;               /* the kept descriptor, owned by the backend (dup it to keep
                           it past the block), or -1 */
  /* Fields above: since 1.0. Append below, marked "since 1.N". */
} tstor_mapping_info;

#define TSTOR_MAPPING_INFO_HAS(info, field) \
  TSTOR_SIZE_COVERS(tstor_mapping_info, (info)->struct_size, field)

/* ------------------------------------------------------------ device types */

/* A device type's flags, TSTOR_DEVICE_HOST and TSTOR_DEVICE_NO_DATA, are
 * tstor.h's (tstor_device_type_flags). */

typedef struct tstor_device_ops {
  uint32_t struct_size; /* sizeof(tstor_device_ops) as the module was built */
  uint32_t abi_version; /* TSTOR_ABI_VERSION as the module was built */
  const char *type_name; /* "cpu", "cuda", "hpu"; static; [a-z0-9_-]+, unique */
  uint32_t flags;        /* TSTOR_DEVICE_* */

  /* Required. Number of devices of this type (>= 0), fixed after init. */
  int (*device_count)(void *state);
  /* Required. The allocator storages of this type get by default. */
  const tstor_allocator_ops *allocator;

  /* Optional. Fill nbytes at ptr with copies of pattern (pattern_size of 1, 2,
   * 4, 8 or 16; nbytes a multiple of it). Without it the core copies a pattern
   * from host memory. */
  int (*fill)(void *state, int index, void *ptr, size_t nbytes, const void *pattern,
              size_t pattern_size, void *stream);
  /* Optional. Wait for all work on the device. */
  int (*synchronize)(void *state, int index);

  /* Optional streams and events; all or none. Without them the core offers
   * streams whose work completes before each call returns. */
  int (*stream_create)(void *state, int index, void **out);
  void (*stream_destroy)(void *state, int index, void *stream);
  int (*stream_synchronize)(void *state, int index, void *stream);
  int (*stream_wait_event)(void *state, int index, void *stream, void *event);
  int (*event_create)(void *state, int index, void **out);
  void (*event_destroy)(void *state, int index, void *event);
  int (*event_record)(void *state, int index, void *event, void *stream);
  int (*event_query)(void *state, int index, void *event); /* 0 or TSTOR_EAGAIN */
  int (*event_synchronize)(void *state, int index, void *event);

  /* Optional. Converts `count` elements at src (dtype src_dtype) into dst
   * (dtype dst_dtype), both on device `index`, with the results tstor's host
   * conversion gives (tstor/typed.h). dtypes are tstor_dtype values. Returns
   * TSTOR_ENOTSUP for a pair it does not handle; the core then stages through
   * the host. dst and src never overlap (the core stages overlapping ranges). */
  int (*convert)(void *state, int index, void *dst, int dst_dtype, const void *src,
                 int src_dtype, size_t count, void *stream);

  /* Optional, all three or none: file mapping and shared memory for a device
   * type whose bytes are host memory (tstor/mapped.h). NULL: the core refuses
   * those calls on this type with TSTOR_ENOTSUP.
   *
   * map() maps what `req` names and fills its outputs. The block belongs to
   * the core from then on; the core frees it exactly once with this type's
   * allocator free(), whose alloc_ctx tells a mapping from an allocation. On
   * failure nothing stays open, mapped, created or grown. */
  int (*map)(void *state, int index, tstor_map_request *req);
  /* Describes a block that map() returned (its alloc_ctx); fills *out, whose
   * descriptor stays the backend's. TSTOR_ENOTSUP when alloc_ctx is not one. */
  int (*mapping_info)(void *state, int index, void *alloc_ctx, tstor_mapping_info *out);
  /* Unlinks the names that TSTOR_MAP_UNIQUE created for processes, of this
   * user, that have since died without unlinking them; *removed (non-NULL)
   * counts them. */
  int (*shm_sweep)(void *state, int *removed);
  /* Fields above: since 1.0. Append below, marked "since 1.N". */
  /* Optional (since 1.2). Copies a strided block on device `index`: for every
   * index (i0 .. i[ndim-1]) below `sizes`, the element_size bytes at src +
   * sum(i_k * src_strides[k]) go to dst + sum(i_k * dst_strides[k]). Strides are
   * in bytes and never negative; ndim is 1 to 64; the two blocks do not
   * overlap, and no two elements of dst share a byte, so the elements may move
   * in any order. Bytes move unchanged (tensor copies of one dtype, tstor/tensor.h).
   * TSTOR_ENOTSUP for a block it does not handle; without it, the core stages
   * the bytes spanned through host memory. */
  int (*copy_strided)(void *state, int index, void *dst, const int64_t *dst_strides,
                      const void *src, const int64_t *src_strides, const int64_t *sizes,
                      int ndim, size_t element_size, void *stream);
  /* Optional (since 1.3). What device `index` stands for, for people: one line
   * without the device's own name ("127.0.0.1:13337 cpu:0" for a remote
   * device, a GPU's model name), NUL-terminated in buf's `size` bytes (size >=
   * 1), cut short to fit. Returns 0 or a TSTOR_E* code. Without it the device
   * is described by its name alone (tstor_device_describe). */
  int (*describe)(void *state, int index, char *buf, size_t size);
  /* Optional (since 1.5). What device `index` has (tstor.h's
   * tstor_device_properties): fill the fields of *out that
   * TSTOR_DEVICE_PROPERTIES_HAS(out, field) covers and that the backend
   * knows, each with its TSTOR_PROP_* bit in out->reported; free_bytes never
   * above total_bytes. The core has zeroed *out and set struct_size, and
   * writes capabilities itself. Returns 0 or a TSTOR_E* code. */
  int (*properties)(void *state, int index, tstor_device_properties *out);
} tstor_device_ops;

#define TSTOR_DEVICE_OPS_HAS(ops, field) \
  TSTOR_SIZE_COVERS(tstor_device_ops, (ops)->struct_size, field)

/* A copy kernel for one (source type, destination type) pair: nbytes from src
 * on device src_index to dst on device dst_index. With stream non-NULL (a
 * stream of the kernel's own module) it may return before the copy is done;
 * with NULL it must be complete on return. */
typedef int (*tstor_copy_fn)(void *state, void *dst, int dst_index, const void *src,
                             int src_index, size_t nbytes, void *stream);

/* One copy of a batch: nbytes (never 0) from src on device src_index to dst on
 * device dst_index. Fixed for ABI 1. */
typedef struct tstor_copy_span {
  void *dst;
  const void *src;
  size_t nbytes;
  int dst_index;
  int src_index;
} tstor_copy_span;

/* A batched copy kernel for one (source type, destination type) pair
 * (register_copy_batch, since 1.4): moves every span of spans[0..count),
 * synchronously, as count calls of the pair's copy kernel would, in whatever
 * order or overlap of work it likes. The core has checked every span before
 * the call: each lies inside a storage of its device, and no destination
 * shares a byte with any other span's source or destination. On failure it
 * returns the code (the detail set with set_error) and sets *failed to the
 * index of the span that failed; the destinations of the others are then
 * unspecified. */
typedef int (*tstor_copy_batch_fn)(void *state, const tstor_copy_span *spans, size_t count,
                                   size_t *failed);

/* --------------------------------------------------------------- registrar */

enum { TSTOR_LOG_ERROR = 0, TSTOR_LOG_WARN = 1, TSTOR_LOG_INFO = 2, TSTOR_LOG_DEBUG = 3 };

/* What a module is about to acquire, for the registrar's should_fail. */
enum {
  TSTOR_FAULT_MALLOC = 1 << 0, /* host memory for bookkeeping (state, records) */
  TSTOR_FAULT_ALLOC = 1 << 1,  /* the bytes of a storage, on any device */
  TSTOR_FAULT_MMAP = 1 << 2,   /* mmap of a file or of shared memory */
  TSTOR_FAULT_SHM = 1 << 3,    /* shm_open / memfd_create */
  TSTOR_FAULT_DLOPEN = 1 << 4, /* loading a shared object */
  TSTOR_FAULT_ALL = (1 << 5) - 1
};

typedef struct tstor_registrar {
  uint32_t struct_size; /* sizeof(tstor_registrar) as the core was built */
  uint32_t abi_version; /* the core's TSTOR_ABI_VERSION */

  /* Registration, during init() only. The tables and state stay the module's
   * and must live until fini(). A name already registered gives TSTOR_EEXIST. */
  int (*register_device_type)(tstor_module *m, const tstor_device_ops *ops, void *state);
  /* Another allocator for an existing or own device type, by type name (a
   * pinned host allocator is registered for "cpu" with TSTOR_ALLOC_PINNED). */
  int (*register_allocator)(tstor_module *m, const char *device_type,
                            const tstor_allocator_ops *ops, void *state);
  int (*register_copy)(tstor_module *m, const char *src_type, const char *dst_type,
                       tstor_copy_fn fn, void *state);

  /* This module's [backend NAME] keys. The value (owned by the core, valid until
   * fini) or NULL when the key is absent. A key never asked for is reported to
   * the user as unknown. */
  const char *(*config_get)(tstor_module *m, const char *key);
  /* Typed readers: *out = default when absent; TSTOR_ECONFIG with the file and
   * line in the message when the value is malformed or outside [min, max].
   * Integers are decimal: an optional sign and digits ("010" is ten; "0x10"
   * is malformed). */
  int (*config_int)(tstor_module *m, const char *key, long long def, long long min,
                    long long max, long long *out);
  int (*config_bool)(tstor_module *m, const char *key, int def, int *out);

  /* Messages at or below the configured log level go to stderr. */
  void (*log)(tstor_module *m, int level, const char *fmt, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 3, 4)))
#endif
      ;
  /* Sets the calling thread's tstor_last_error() detail; returns `code`. */
  int (*set_error)(int code, const char *fmt, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 2, 3)))
#endif
      ;

  /* Fault injection, for tests. A module calls it right before each
   * acquisition of a resource of kind `what` (TSTOR_FAULT_*) and, when it
   * returns nonzero, fails that acquisition as if the system had refused it
   * (errno is set to what the real call would give). Always 0 unless a test
   * armed the core's fault injection. Present when struct_size covers it:
   * TSTOR_REGISTRAR_HAS(reg, should_fail). */
  int (*should_fail)(int what);

  /* Reports a bad value of this module's key `key` as the core reports its
   * own: sets the calling thread's detail to "FILE:LINE: [backend NAME] key =
   * 'value': " followed by the formatted reason, and returns TSTOR_ECONFIG
   * for init() to return. For checks config_int/config_bool cannot express
   * (a power of two, a value that depends on another key). */
  int (*config_error)(tstor_module *m, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 3, 4)))
#endif
      ;
  /* Fields above: since 1.0. Append below, marked "since 1.N". */
  /* Since 1.4. A batched copy kernel for the pair, beside its copy kernel:
   * tstor_storage_copy_batch gives it all of a call's items of that pair at
   * once. Without one the core copies them one by one, as single copies go
   * (a direct kernel, or staged through host memory); between two
   * host-memory types the core copies them itself, as it does single copies.
   * During init only, like register_copy; a second one for a pair gives
   * TSTOR_EEXIST. */
  int (*register_copy_batch)(tstor_module *m, const char *src_type, const char *dst_type,
                             tstor_copy_batch_fn fn, void *state);
} tstor_registrar;

/* Whether the core's registrar has `field` (one appended after this module's
 * oldest supported core), and it is set. */
#define TSTOR_REGISTRAR_HAS(reg, field) \
  (TSTOR_SIZE_COVERS(tstor_registrar, (reg)->struct_size, field) && (reg)->field != NULL)

/* -------------------------------------------------------------- entry point */

/* init() returns 0 when it registered something, TSTOR_EDECLINED when it has
 * nothing to offer here (no driver, no device), or another TSTOR_E* code when
 * it failed; in both last cases it writes the reason into msg (NUL-terminated,
 * at most msg_size bytes) and the core drops whatever it registered. fini() is
 * called once, after init succeeded, when the module is about to be unloaded:
 * after its context is closed and its last storage released. */
typedef struct tstor_backend_def {
  uint32_t struct_size; /* sizeof(tstor_backend_def) as the module was built */
  uint32_t abi_version; /* TSTOR_ABI_VERSION as the module was built */
  int (*init)(const tstor_registrar *reg, tstor_module *m, void **module_state, char *msg,
              size_t msg_size);
  void (*fini)(void *module_state);
  /* Fields above: since 1.0. Append below, marked "since 1.N". */
} tstor_backend_def;

#define TSTOR_BACKEND_DEF_HAS(def, field) \
  TSTOR_SIZE_COVERS(tstor_backend_def, (def)->struct_size, field)

#define TSTOR_BACKEND_ENTRY_SYMBOL "tstor_backend_entry"

/* Defines the module's entry point; use once, at file scope. */
#define TSTOR_BACKEND_DEFINE(init_fn, fini_fn)                                       \
  TSTOR_EXTERN const tstor_backend_def tstor_backend_entry = {                     \
      sizeof(tstor_backend_def), TSTOR_ABI_VERSION, (init_fn), (fini_fn)}

/* Fills in the two header fields of an ops table. */
#define TSTOR_OPS_HEADER(type) sizeof(type), TSTOR_ABI_VERSION

#ifdef __cplusplus
}
#endif

#endif /* TSTOR_BACKEND_H */
