/* tstor: refcounted tensor storage on any device.
 *
 * This header is the core's user API for untyped storages; typed.h (dtypes,
 * typed storages), mapped.h (files, shared memory), tensor.h and shape.h build
 * on it. It reads top to bottom: export macro, version, errors, contexts,
 * devices, storages, streams and events, pinned host memory, statistics, and
 * the process-wide settings. Backend authors read backend.h instead.
 *
 * Conventions
 *   - Every function that can fail returns int: 0 on success, a negative TSTOR_E*
 *     code otherwise. The human-readable detail of the last failure on this thread
 *     is tstor_last_error(). A failed call leaves every object as it was, and
 *     sets every output pointer (the T **out of the calls that hand back an
 *     object) to NULL, so that nothing it left there is released twice (an
 *     output struct, a T *out, is left as it was); tests/outparams.py checks
 *     every such call of the public headers.
 *   - A NULL tstor_context * means the process-wide default context, opened on
 *     first use as tstor_context_open(NULL, ...) opens one.
 *   - Ownership is stated in each comment. "Returns a new reference" means the
 *     caller must tstor_storage_release() it exactly once.
 *   - Every function is thread-safe unless its comment says otherwise. Writing to
 *     the same bytes from two threads at once is the caller's business, as in C.
 *   - Each thread keeps a few freed storage and tensor objects for its next
 *     create, and gives them back when it exits. So a program that dlopens
 *     libtstor cannot unload it once it has released a storage: dlclose then
 *     leaves it mapped (RTLD_NODELETE), since an exiting thread may be running
 *     its clean-up in it.
 *   - A struct the library fills for the caller (tstor_stats, tstor_backend_info)
 *     begins with uint32_t struct_size: set it to the size of the struct you
 *     have, as its TSTOR_*_INIT initialiser does. The library writes only the
 *     fields that size covers and sets struct_size to the bytes it wrote, so a
 *     program built against a newer header (more fields) works with an older
 *     library and the reverse; TSTOR_*_HAS(s, field) says whether a field was
 *     written. A struct_size of 0 stands for the struct's first layout (fields
 *     not marked "since"), so `= {0}` is safe too. Fields are only appended,
 *     each marked with the version that added it.
 *   - Each TSTOR_*_INIT initialiser names every field in declaration order, so
 *     that it is valid C and C++20 (and C++17 in GCC and Clang) under -Wextra.
 *   - The TSTOR_* environment variables (TSTOR_CONFIG, TSTOR_SYSTEM_CONFIG,
 *     TSTOR_BACKEND_DIR, TSTOR_LOG, TSTOR_DEFAULT_DEVICE, TSTOR_NUM_THREADS,
 *     TSTOR_SIMD) are read with secure_getenv: a setuid or setgid program (or
 *     one with file capabilities) ignores them, so its caller cannot make it
 *     load a module.
 */
#ifndef TSTOR_TSTOR_H
#define TSTOR_TSTOR_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TSTOR_EXTERN __attribute__((visibility("default")))
#else
#define TSTOR_EXTERN
#endif

/* Whether `size` bytes of a `type` reach past `field`: the test behind every
 * TSTOR_*_HAS macro, here and in backend.h. */
#define TSTOR_SIZE_COVERS(type, size, field) \
  ((size_t)(size) >= offsetof(type, field) + sizeof(((type *)0)->field))

/* ---------------------------------------------------------------- version */

#define TSTOR_VERSION_MAJOR 0
#define TSTOR_VERSION_MINOR 1
#define TSTOR_VERSION_PATCH 0
#define TSTOR_VERSION_HEX \
  ((TSTOR_VERSION_MAJOR << 16) | (TSTOR_VERSION_MINOR << 8) | TSTOR_VERSION_PATCH)

/* The version of the library actually loaded, as TSTOR_VERSION_HEX / "0.1.0".
 * The string is static; do not free it. */
TSTOR_EXTERN unsigned tstor_version(void);
TSTOR_EXTERN const char *tstor_version_string(void);

/* ----------------------------------------------------------------- errors */

/* One table gives every code its value, name and message. */
#define TSTOR_ERRNO_MAP(XX)                                                   \
  XX(EINVAL, -1, "invalid argument")                                          \
  XX(ENOMEM, -2, "out of memory")                                             \
  XX(ENODEV, -3, "no such device")                                            \
  XX(ENOENT, -4, "no such file or name")                                      \
  XX(ECONFIG, -5, "invalid configuration")                                    \
  XX(ELOAD, -6, "cannot load backend module")                                 \
  XX(EABI, -7, "backend ABI version mismatch")                                \
  XX(EDECLINED, -8, "backend declined to load")                               \
  XX(EEXIST, -9, "already exists")                                            \
  XX(ENODATA, -10, "storage has no data")                                     \
  XX(ENOTSUP, -11, "operation not supported")                                 \
  XX(ESIZE, -12, "size mismatch")                                             \
  XX(ERANGE, -13, "index or value out of range")                              \
  XX(EOVERFLOW, -14, "size overflows")                                        \
  XX(EBUSY, -15, "resource busy")                                             \
  XX(EIO, -16, "input/output error")                                          \
  XX(EACCES, -17, "permission denied")                                        \
  XX(EAGAIN, -18, "not ready yet")                                            \
  XX(EBACKEND, -19, "backend failure")                                        \
  XX(EMFILE, -20, "too many open files")                                      \
  XX(ENOSPC, -21, "no space left")                                            \
  XX(EDTYPE, -22, "unsupported dtype conversion")

typedef enum {
  TSTOR_OK = 0,
#define TSTOR__ERR_ENUM(name, value, msg) TSTOR_##name = value,
  TSTOR_ERRNO_MAP(TSTOR__ERR_ENUM)
#undef TSTOR__ERR_ENUM
  TSTOR__ERR_LAST = -23
} tstor_errno;

/* "invalid argument" / "TSTOR_EINVAL" for a code; a static string for unknown
 * codes too. Never NULL; do not free. */
TSTOR_EXTERN const char *tstor_strerror(int err);
TSTOR_EXTERN const char *tstor_err_name(int err);

/* The detail of the last failure on the calling thread ("cuda:3: no such device,
 * 1 cuda device(s) present"). Valid until the next tstor call on this thread;
 * owned by the library. "" when nothing has failed yet. */
TSTOR_EXTERN const char *tstor_last_error(void);

/* Sets the calling thread's detail (what tstor_last_error returns) from a
 * printf format and returns `code`: for libraries layered on tstor
 * (libtstor-io) so that their failures read as the core's do. The text is
 * copied (truncated to 1023 bytes). */
TSTOR_EXTERN int tstor_error_set(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prefixes the calling thread's detail with the formatted text and ": ",
 * keeping the inner reason ("model.pt: storage 3: ..."), and returns `code`:
 * for a layer that adds where a failure happened to what a lower one said. */
TSTOR_EXTERN int tstor_error_prefix(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The TSTOR_E* code for a C errno value, the one map every part of tstor
 * uses: ENOENT, ENOTDIR -> ENOENT; EACCES, EPERM, EROFS, ETXTBSY -> EACCES;
 * EMFILE, ENFILE -> EMFILE; ENOSPC, EDQUOT -> ENOSPC; ENOMEM, ENOBUFS ->
 * ENOMEM; EFBIG, EOVERFLOW -> EOVERFLOW; EEXIST; EBUSY; ERANGE; EAGAIN ->
 * EAGAIN; ENODEV, EOPNOTSUPP -> ENOTSUP; EINVAL, EISDIR, ENAMETOOLONG, ELOOP,
 * ENXIO, EBADF, ENOTSOCK -> EINVAL; anything else TSTOR_EIO. Inline, so that
 * backends and libraries layered on tstor share it without a call into the
 * core. */
static inline int tstor_errno_code(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR: return TSTOR_ENOENT;
    case EACCES:
    case EPERM:
    case EROFS:
    case ETXTBSY: return TSTOR_EACCES;
    case EMFILE:
    case ENFILE: return TSTOR_EMFILE;
    case ENOSPC:
#ifdef EDQUOT
    case EDQUOT:
#endif
      return TSTOR_ENOSPC;
    case ENOMEM:
    case ENOBUFS: return TSTOR_ENOMEM;
    case EFBIG:
    case EOVERFLOW: return TSTOR_EOVERFLOW;
    case EEXIST: return TSTOR_EEXIST;
    case EBUSY: return TSTOR_EBUSY;
    case ERANGE: return TSTOR_ERANGE;
    case EAGAIN:
#if defined(EWOULDBLOCK) && EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
      return TSTOR_EAGAIN;
    case ENODEV:
    case EOPNOTSUPP:
#if defined(ENOTSUP) && ENOTSUP != EOPNOTSUPP
    case ENOTSUP:
#endif
      return TSTOR_ENOTSUP;
    case EINVAL:
    case EISDIR:
    case ENAMETOOLONG:
    case ELOOP:
    case ENXIO:
    case EBADF:
    case ENOTSOCK: return TSTOR_EINVAL;
    default: return TSTOR_EIO;
  }
}

/* ---------------------------------------------------------------- context */

/* A context owns a configuration, the backend modules it loaded and the registry
 * of devices they provide. Storages keep what they need alive on their own: a
 * context may be closed while its storages live on. */
typedef struct tstor_context tstor_context;

/* Opens a context from the INI file at `path`. With path NULL: $TSTOR_CONFIG if
 * set, else the installed configuration ($(sysconfdir)/tstor/tstor.ini, which
 * make install writes; $TSTOR_SYSTEM_CONFIG names another, or none when
 * empty) if that file exists, else the embedded default configuration;
 * tstor_context_config_name says which was read. On success *out is a new
 * context the caller closes with tstor_context_close(). On failure *out is
 * NULL and nothing stays loaded. */
TSTOR_EXTERN int tstor_context_open(const char *path, tstor_context **out);

/* As tstor_context_open, from INI text in memory. `name` stands for the file
 * in messages and relative library paths resolve against backend_dir only.
 * The text is copied; the caller keeps it. Text over 1 MiB is TSTOR_ECONFIG,
 * as a file over 1 MiB is. */
TSTOR_EXTERN int tstor_context_open_string(const char *ini_text, const char *name,
                                           tstor_context **out);

/* Drops the caller's reference. Backend modules are unloaded once the last
 * storage that came from them is released too. NULL is a no-op; closing the
 * default context (NULL) is not possible. Closing a context twice aborts with
 * a message (as do freeing a stream or an event twice), unless a new context
 * has since been given the same address: as with free(), a stale pointer may
 * name a new object. */
TSTOR_EXTERN void tstor_context_close(tstor_context *ctx);

/* The process-wide default context, opened on first use; borrowed, never
 * closed by the caller. Fails as tstor_context_open(NULL, ...) would. */
TSTOR_EXTERN int tstor_context_default(tstor_context **out);

/* The config the context was opened from: a path, or "embedded default", or the
 * name given to tstor_context_open_string. Owned by the context. */
TSTOR_EXTERN const char *tstor_context_config_name(tstor_context *ctx);

/* What happened to each configured backend, for `tstor info` and diagnostics. */
typedef enum {
  TSTOR_BACKEND_LOADED = 0,
  TSTOR_BACKEND_DECLINED = 1, /* the module ran and said it has nothing to offer */
  TSTOR_BACKEND_FAILED = 2,   /* an optional module could not be loaded */
  TSTOR_BACKEND_DISABLED = 3  /* enabled = no in the config */
} tstor_backend_state;

typedef struct tstor_backend_info {
  uint32_t struct_size;  /* in: sizeof(tstor_backend_info) or 0; out: bytes written */
  const char *name;      /* section name, "cuda"; owned by the context */
  const char *library;   /* resolved path of the module; owned by the context */
  tstor_backend_state state;
  const char *message;   /* reason for DECLINED/FAILED, "" otherwise; owned by the context */
  int optional;          /* 1 when the config says optional = yes */
  /* Fields appended later are marked "since 0.N". */
} tstor_backend_info;

#define TSTOR_BACKEND_INFO_INIT                                               \
  {                                                                           \
    .struct_size = sizeof(tstor_backend_info), .name = NULL, .library = NULL, \
    .state = TSTOR_BACKEND_LOADED, .message = NULL, .optional = 0             \
  }
#define TSTOR_BACKEND_INFO_HAS(info, field) \
  TSTOR_SIZE_COVERS(tstor_backend_info, (info)->struct_size, field)

/* Number of [backend] sections, and the i-th one in file order, into *out as
 * the conventions say (struct_size). The strings in *out live as long as the
 * context. */
TSTOR_EXTERN int tstor_backend_count(tstor_context *ctx);
TSTOR_EXTERN int tstor_backend_get(tstor_context *ctx, int i, tstor_backend_info *out);

/* ---------------------------------------------------------------- devices */

/* A device is a registered type plus an index, written "cuda:1". Type ids are
 * small integers that are only meaningful within the context that gave them. */
typedef struct tstor_device {
  int32_t type;
  int32_t index;
} tstor_device;

/* Parses "cpu", "cuda", "cuda:1". A type without an index means index 0. Fails
 * with TSTOR_ENODEV for an unknown type or an index past the device count. */
TSTOR_EXTERN int tstor_device_parse(tstor_context *ctx, const char *text, tstor_device *out);

/* Writes the device as "type:index" ("cpu:0", "cuda:1") into buf, NUL-terminated,
 * so that tstor_device_parse reads it back. Fails with TSTOR_ERANGE when it does
 * not fit, TSTOR_ENODEV for a device the context does not know. */
TSTOR_EXTERN int tstor_device_format(tstor_context *ctx, tstor_device dev, char *buf,
                                     size_t size);

/* Writes what the device stands for into buf, NUL-terminated: its name, then
 * " -> " and its backend's description where the backend gives one
 * ("remote:0 -> 127.0.0.1:13337 cpu:0"), else the name alone ("cpu:0").
 * Fails with TSTOR_ERANGE when it does not fit (buf then holds ""),
 * TSTOR_ENODEV for a device the context does not know, or the backend's
 * error. */
TSTOR_EXTERN int tstor_device_describe(tstor_context *ctx, tstor_device dev, char *buf,
                                       size_t size);

/* Registered device types: how many, the name of type id `type` (owned by the
 * context), and the number of devices of a type (0 or more). */
TSTOR_EXTERN int tstor_device_type_count(tstor_context *ctx);
TSTOR_EXTERN const char *tstor_device_type_name(tstor_context *ctx, int type);
TSTOR_EXTERN int tstor_device_count(tstor_context *ctx, int type);

/* What a device type's bytes are, as its backend registered it: host memory
 * any code may read and write (cpu), or no bytes at all (meta). Programs ask
 * this instead of comparing type names, so that another backend with the
 * same nature is treated the same. 0 for an unknown type. */
enum {
  TSTOR_DEVICE_HOST = 1 << 0,   /* bytes are host memory the core may read and write */
  TSTOR_DEVICE_NO_DATA = 1 << 1 /* sizes only: allocations hand back NULL (meta) */
};
TSTOR_EXTERN unsigned tstor_device_type_flags(tstor_context *ctx, int type);

/* What a device has and offers, beyond its name (tstor_device_get_properties):
 * its memory and a stable id as its backend reports them, and the optional
 * operations its backend registered. A backend may know some fields and not
 * others (a remote device's free memory): `reported` says which it filled.
 * One list gives the capability bits, for the enum and for code that names
 * them: X(NAME, bit, name). */
#define TSTOR_DEVICE_CAP_MAP(X)                                                             \
  X(STREAMS, 0, "streams")           /* streams and events of its own (else synchronous) */ \
  X(FILL, 1, "fill")                 /* fills on the device (else a pattern is copied) */   \
  X(CONVERT, 2, "convert")           /* dtype conversions on the device */                  \
  X(COPY_STRIDED, 3, "copy-strided") /* strided copies on the device */                     \
  X(MAPPING, 4, "mapping")           /* file mapping and shared memory (host types) */      \
  X(PROPERTIES, 5, "properties")     /* reports its memory (the fields below) */

enum {
#define TSTOR__CAP_ENUM(name, bit, text) TSTOR_DEVICE_CAP_##name = 1u << bit,
  TSTOR_DEVICE_CAP_MAP(TSTOR__CAP_ENUM)
#undef TSTOR__CAP_ENUM
};

/* Which of tstor_device_properties' backend fields were reported. */
enum {
  TSTOR_PROP_FREE = 1 << 0,           /* free_bytes */
  TSTOR_PROP_TOTAL = 1 << 1,          /* total_bytes */
  TSTOR_PROP_ALIGNMENT = 1 << 2,      /* alignment */
  TSTOR_PROP_MAX_ALLOCATION = 1 << 3, /* max_allocation */
  TSTOR_PROP_ID = 1 << 4              /* id */
};

typedef struct tstor_device_properties {
  uint32_t struct_size;    /* in: sizeof(tstor_device_properties) or 0; out: bytes written */
  uint32_t capabilities;   /* TSTOR_DEVICE_CAP_* bits, from the ops the backend registered */
  uint32_t reported;       /* TSTOR_PROP_* bits: which fields below the backend filled */
  uint32_t reserved_;      /* 0 */
  uint64_t free_bytes;     /* bytes the device can still allocate now (<= total_bytes) */
  uint64_t total_bytes;    /* bytes of memory the device has */
  uint64_t alignment;      /* every allocation's address is a multiple of this */
  uint64_t max_allocation; /* the largest single allocation that would succeed now */
  char id[64];             /* stable across processes: a PCI bus id ("0000:3b:00.0"), a
                              peer and its device; NUL-terminated, "" when not reported */
  /* Fields appended later are marked "since 0.N". */
} tstor_device_properties;

#define TSTOR_DEVICE_PROPERTIES_INIT                                                        \
  {                                                                                         \
    .struct_size = sizeof(tstor_device_properties), .capabilities = 0, .reported = 0,       \
    .reserved_ = 0, .free_bytes = 0, .total_bytes = 0, .alignment = 0, .max_allocation = 0, \
    .id = ""                                                                                \
  }
#define TSTOR_DEVICE_PROPERTIES_HAS(p, field) \
  TSTOR_SIZE_COVERS(tstor_device_properties, (p)->struct_size, field)

/* Fills *out (struct_size as the conventions say) for `dev`: the capability
 * bits always, the memory fields where the backend reports them (backend ABI
 * 1.5; `reported` is 0 for an older backend). TSTOR_ENODEV for a device the
 * context does not know, or the backend's error. */
TSTOR_EXTERN int tstor_device_get_properties(tstor_context *ctx, tstor_device dev,
                                             tstor_device_properties *out);

/* The configured default device (default_device / $TSTOR_DEFAULT_DEVICE). */
TSTOR_EXTERN int tstor_device_default(tstor_context *ctx, tstor_device *out);

/* How bytes move from one device type to another. */
typedef enum {
  TSTOR_COPY_DIRECT = 0, /* a kernel registered for the pair */
  TSTOR_COPY_HOST = 1,   /* both sides are host memory: memcpy */
  TSTOR_COPY_STAGED = 2, /* through a host buffer, with two kernels */
  TSTOR_COPY_CHECK = 3,  /* the destination holds no data (meta): sizes checked only */
  TSTOR_COPY_NONE = 4    /* impossible: the source holds no data */
} tstor_copy_path;

/* The path a copy from type `src` to type `dst` takes; TSTOR_ENODEV for bad ids. */
TSTOR_EXTERN int tstor_copy_path_of(tstor_context *ctx, int src_type, int dst_type);
/* 1 when a batch (tstor_storage_copy_batch) hands the items of that pair to
 * one call of a batched kernel of their backend, 0 when the core copies them
 * one by one; TSTOR_ENODEV for bad ids. */
TSTOR_EXTERN int tstor_copy_batched(tstor_context *ctx, int src_type, int dst_type);

/* --------------------------------------------------------------- storages */

typedef struct tstor_storage tstor_storage;

enum {
  TSTOR_FLAG_RESIZABLE = 1 << 0, /* resize is allowed */
  TSTOR_FLAG_VIEW = 1 << 1,      /* shares the bytes of a base storage */
  TSTOR_FLAG_MAPPED = 1 << 2,    /* maps a file */
  TSTOR_FLAG_SHARED = 1 << 3,    /* visible to other processes */
  TSTOR_FLAG_PINNED = 1 << 4,    /* page-locked host memory */
  TSTOR_FLAG_BORROWED = 1 << 5,  /* the caller owns the bytes */
  TSTOR_FLAG_NO_DATA = 1 << 6    /* sizes only (meta) */
};

/* Creates a storage of `nbytes` uninitialised bytes on `dev` (0 bytes is
 * fine). *out is a new reference. */
TSTOR_EXTERN int tstor_storage_new(tstor_context *ctx, tstor_device dev, size_t nbytes,
                                   tstor_storage **out);

/* Wraps `nbytes` at `data`, which lives on `dev`, without taking ownership: the
 * caller keeps the bytes alive past the storage's last release and frees them
 * itself (Torch7's Storage(size, ptr)). Not resizable. *out is a new reference. */
TSTOR_EXTERN int tstor_storage_wrap(tstor_context *ctx, tstor_device dev, void *data,
                                    size_t nbytes, tstor_storage **out);

/* Takes ownership of `nbytes` at `data`: `deleter(data, deleter_ctx)` is called
 * exactly once, when the last reference goes. On failure the deleter is NOT
 * called and the caller still owns `data`. *out is a new reference. */
typedef void (*tstor_deleter)(void *data, void *deleter_ctx);
TSTOR_EXTERN int tstor_storage_wrap_owned(tstor_context *ctx, tstor_device dev, void *data,
                                          size_t nbytes, tstor_deleter deleter,
                                          void *deleter_ctx, tstor_storage **out);

/* A storage for bytes [offset, offset + nbytes) of `base`. It shares the bytes
 * and holds a reference on the base (on the base's own base for a view of a
 * view). Not resizable. *out is a new reference; `base` stays the caller's. */
TSTOR_EXTERN int tstor_storage_view(tstor_storage *base, size_t offset, size_t nbytes,
                                    tstor_storage **out);

/* Adds a reference / drops one. The last release frees the bytes (or calls the
 * deleter, or drops the base of a view) and may unload the backend module.
 * Releasing NULL is a no-op; releasing past zero aborts in debug builds. */
TSTOR_EXTERN tstor_storage *tstor_storage_retain(tstor_storage *s);
TSTOR_EXTERN void tstor_storage_release(tstor_storage *s);
/* The current reference count (a snapshot, for tests and diagnostics). */
TSTOR_EXTERN long tstor_storage_use_count(const tstor_storage *s);

/* Accessors. data() is NULL for a meta or zero-byte storage and is owned by the
 * storage; it stays valid until resize or the last release. For a device that
 * is not host memory it is a device address, not to be dereferenced. */
TSTOR_EXTERN void *tstor_storage_data(const tstor_storage *s);
TSTOR_EXTERN size_t tstor_storage_nbytes(const tstor_storage *s);
TSTOR_EXTERN tstor_device tstor_storage_device(const tstor_storage *s);
TSTOR_EXTERN unsigned tstor_storage_flags(const tstor_storage *s);
/* The context the storage was created in; borrowed. */
TSTOR_EXTERN tstor_context *tstor_storage_context(const tstor_storage *s);
/* The base of a view (borrowed), or NULL; and the view's byte offset in it. */
TSTOR_EXTERN tstor_storage *tstor_storage_base(const tstor_storage *s);
TSTOR_EXTERN size_t tstor_storage_offset(const tstor_storage *s);

/* Like tstor_storage_data, but fails with TSTOR_ENODATA for a meta storage:
 * for callers that are about to read or write bytes. */
TSTOR_EXTERN int tstor_storage_data_checked(const tstor_storage *s, void **out);

/* Changes the size, keeping the first min(old, new) bytes; new bytes are
 * uninitialised. Refused (TSTOR_ENOTSUP) for views, borrowed, mapped and shared
 * storages, and for storages with other views on them (TSTOR_EBUSY). The data
 * pointer may move. Not thread-safe against other users of the same storage. */
TSTOR_EXTERN int tstor_storage_resize(tstor_storage *s, size_t nbytes);

/* Copies all of src into dst; their sizes must match (TSTOR_ESIZE). Works
 * between any two devices: a direct kernel, or staged through host memory.
 * Synchronous: the bytes are in dst when it returns. */
TSTOR_EXTERN int tstor_storage_copy(tstor_storage *dst, const tstor_storage *src);

/* One copy of a batch: nbytes from src at src_offset to dst at dst_offset.
 * The storages are borrowed for the call. */
typedef struct tstor_copy_item {
  tstor_storage *dst;
  size_t dst_offset;
  const tstor_storage *src;
  size_t src_offset;
  size_t nbytes;
} tstor_copy_item;

/* Copies every item of items[0..count), between any two devices, as count
 * calls of tstor_storage_copy on views would, with fewer round trips: the
 * items of one pair of device types go to one call of their backend's batched
 * kernel where it has one (a remote peer gets its items pipelined on its
 * connection: docs/remote.md), the others one by one. Synchronous: the bytes
 * of every item are in place when it returns 0.
 *
 * Every item is checked before any byte moves, and a bad one fails the call
 * with nothing copied and the detail naming its index: a NULL storage or
 * storages of two contexts (TSTOR_EINVAL), a range outside its storage
 * (TSTOR_ERANGE), no copy path between the devices (as tstor_storage_copy
 * says), or a destination range that shares a byte with any other range of
 * the batch, another item's or its own source (TSTOR_EINVAL): so the items
 * may move in any order, and do. A failure after the checks (a device or a
 * peer failing) returns its code with the item named; the destinations of the
 * items are then unspecified. count 0 copies nothing; items may be NULL then. */
TSTOR_EXTERN int tstor_storage_copy_batch(const tstor_copy_item *items, size_t count);

/* Sets every byte of s to `value`. */
TSTOR_EXTERN int tstor_storage_fill(tstor_storage *s, uint8_t value);

/* Fills s with copies of a pattern of `pattern_size` bytes (1, 2, 4, 8 or 16):
 * nbytes must be a multiple of pattern_size (TSTOR_ESIZE). */
TSTOR_EXTERN int tstor_storage_fill_pattern(tstor_storage *s, const void *pattern,
                                            size_t pattern_size);

/* A new storage on the same device with a copy of the bytes. *out is a new
 * reference, resizable and not a view, whatever s was. */
TSTOR_EXTERN int tstor_storage_clone(const tstor_storage *s, tstor_storage **out);

/* The storage on device `dev`: s itself (one more reference) when it is already
 * there, else a copy. *out is a new reference either way. From a device
 * without data (meta) to one with data: TSTOR_ENODATA, decided before anything
 * is allocated (so whatever the size), as PyTorch's "Cannot copy out of meta
 * tensor". */
TSTOR_EXTERN int tstor_storage_to(tstor_storage *s, tstor_device dev, tstor_storage **out);

/* A new storage of `nbytes` on the same device as s (PyTorch's new()). */
TSTOR_EXTERN int tstor_storage_new_like(const tstor_storage *s, size_t nbytes,
                                        tstor_storage **out);

/* ------------------------------------------------------ streams and events */

/* A stream is an ordered queue of work on one device; an event marks a point in
 * it. On devices without asynchronous work (cpu, meta) streams exist and every
 * operation on them completes before the call returns. */
typedef struct tstor_stream tstor_stream;
typedef struct tstor_event tstor_event;

/* A new stream on `dev`; the caller frees it with tstor_stream_free(), which
 * waits for its work first. */
TSTOR_EXTERN int tstor_stream_new(tstor_context *ctx, tstor_device dev, tstor_stream **out);
TSTOR_EXTERN void tstor_stream_free(tstor_stream *stream);
/* Waits until all work queued on the stream has finished. */
TSTOR_EXTERN int tstor_stream_synchronize(tstor_stream *stream);
/* Makes later work on `stream` wait for `event` (without blocking the host). */
TSTOR_EXTERN int tstor_stream_wait_event(tstor_stream *stream, tstor_event *event);

/* A new event on `dev`; freed with tstor_event_free(). */
TSTOR_EXTERN int tstor_event_new(tstor_context *ctx, tstor_device dev, tstor_event **out);
TSTOR_EXTERN void tstor_event_free(tstor_event *event);
/* Marks the current end of `stream`. */
TSTOR_EXTERN int tstor_event_record(tstor_event *event, tstor_stream *stream);
/* 0 when the work before the event has finished, TSTOR_EAGAIN when not yet. */
TSTOR_EXTERN int tstor_event_query(tstor_event *event);
TSTOR_EXTERN int tstor_event_synchronize(tstor_event *event);

/* Queues a copy of src into dst on `stream` and returns. The copy is truly
 * asynchronous only where the backend can make it so (for CUDA, host memory
 * must be pinned, as in PyTorch); otherwise it completes before returning.
 * Both storages must stay alive until the stream has passed the copy: the
 * caller keeps its references until then. */
TSTOR_EXTERN int tstor_storage_copy_async(tstor_storage *dst, const tstor_storage *src,
                                          tstor_stream *stream);

/* Tells the allocator that `stream` uses s, so its bytes are not reused
 * until that work is done (PyTorch's record_stream). */
TSTOR_EXTERN int tstor_storage_record_stream(tstor_storage *s, tstor_stream *stream);

/* Waits until all work on every stream of `dev` has finished. */
TSTOR_EXTERN int tstor_synchronize(tstor_context *ctx, tstor_device dev);

/* ------------------------------------------------------- pinned host memory */

/* A pinned (page-locked) copy of cpu storage s, from the first backend that
 * offers a pinned host allocator (cuda). *out is a new reference; s itself
 * when it is already pinned. TSTOR_ENOTSUP when no backend offers one. */
TSTOR_EXTERN int tstor_storage_pin(tstor_storage *s, tstor_storage **out);
TSTOR_EXTERN int tstor_storage_is_pinned(const tstor_storage *s);
/* A new storage of `nbytes` uninitialised bytes of pinned host memory, from
 * the allocator tstor_storage_pin would use (PyTorch's pinned-memory
 * allocator asks for bytes, not for a copy). *out is a new reference.
 * TSTOR_ENOTSUP when no backend offers one. */
TSTOR_EXTERN int tstor_storage_new_pinned(tstor_context *ctx, size_t nbytes, tstor_storage **out);

/* ------------------------------------------------------------- statistics */

/* The same questions for every device, answered by its allocator. Counters the
 * backend does not keep are 0. One list gives the fields, for the struct and
 * for code that copies or prints them: X(name, comment). New counters are
 * appended, to TSTOR_STATS_FIELDS only, marked "since 1.N" (backend ABI). */
#define TSTOR_STATS_FIELDS_FIRST(X)                                                        \
  X(allocated, "bytes handed out to storages now")                                        \
  X(reserved, "bytes obtained from the device (cached included)")                         \
  X(active, "bytes in blocks in use, rounding included")                                  \
  X(peak_allocated, "high-water mark of allocated since the last reset")                  \
  X(peak_reserved, "high-water mark of reserved")                                         \
  X(peak_active, "high-water mark of active")                                             \
  X(alloc_count, "successful allocations")                                                \
  X(free_count, "frees")                                                                  \
  X(cache_hits, "allocations served from the cache")                                      \
  X(retries, "allocations that succeeded after emptying the cache")                       \
  X(oom_count, "allocations that failed for lack of memory")
#define TSTOR_STATS_FIELDS(X) TSTOR_STATS_FIELDS_FIRST(X)

typedef struct tstor_stats {
  uint32_t struct_size; /* in: sizeof(tstor_stats) or 0; out: bytes written. Since 1.1 */
#define TSTOR__STATS_FIELD(name, comment) uint64_t name;
  TSTOR_STATS_FIELDS(TSTOR__STATS_FIELD)
#undef TSTOR__STATS_FIELD
} tstor_stats;

#define TSTOR__STATS_ZERO(name, comment) , .name = 0
#define TSTOR_STATS_INIT \
  { .struct_size = sizeof(tstor_stats) TSTOR_STATS_FIELDS(TSTOR__STATS_ZERO) }
#define TSTOR_STATS_HAS(st, field) TSTOR_SIZE_COVERS(tstor_stats, (st)->struct_size, field)

/* Copies into dst the counters of src that dst->struct_size covers (an
 * allocator's stats() that keeps its counters in a tstor_stats of its own
 * fills the core's this way); dst->struct_size stays as it was. */
static inline void tstor_stats_copy(tstor_stats *dst, const tstor_stats *src) {
#define TSTOR__STATS_COPY(name, comment) \
  if (TSTOR_STATS_HAS(dst, name)) dst->name = src->name;
  TSTOR_STATS_FIELDS(TSTOR__STATS_COPY)
#undef TSTOR__STATS_COPY
}

/* The rule "a peak follows its current value", written once for the
 * allocators that keep their counters in a tstor_stats: after a change,
 * tstor_stats_note_peaks raises each peak (allocated, reserved, active) to its
 * current value; tstor_stats_reset_peaks sets each peak to it (an
 * allocator's reset_peak). */
static inline void tstor_stats_note_peaks(tstor_stats *s) {
  if (s->allocated > s->peak_allocated) s->peak_allocated = s->allocated;
  if (s->reserved > s->peak_reserved) s->peak_reserved = s->reserved;
  if (s->active > s->peak_active) s->peak_active = s->active;
}
static inline void tstor_stats_reset_peaks(tstor_stats *s) {
  s->peak_allocated = s->allocated;
  s->peak_reserved = s->reserved;
  s->peak_active = s->active;
}

/* Fills *out (struct_size as the conventions say) with the allocator's
 * counters for `dev`. */
TSTOR_EXTERN int tstor_device_stats(tstor_context *ctx, tstor_device dev, tstor_stats *out);
/* Sets the peaks to the current values. */
TSTOR_EXTERN int tstor_device_reset_peak(tstor_context *ctx, tstor_device dev);
/* Returns cached, unused blocks to the device. */
TSTOR_EXTERN int tstor_device_empty_cache(tstor_context *ctx, tstor_device dev);

/* ---------------------------------------------------- process-wide settings */

/* Threads for large host copies, fills and conversions (a megabyte and up):
 * n >= 1, or 0 for the default ($TSTOR_NUM_THREADS, else the number of online
 * CPUs). The calling thread works too; the others belong to a pool started on
 * first use that sleeps between jobs and is stopped when the library is
 * unloaded. Returns the previous setting (0 when it was the default). On
 * x86-64 the common conversions use AVX2 and F16C where the machine has them;
 * $TSTOR_SIMD=off, read once, keeps to the portable loops (for tests and
 * comparisons: the results are the same). */
TSTOR_EXTERN int tstor_set_num_threads(int n);
/* The number of threads large operations use now (>= 1). */
TSTOR_EXTERN int tstor_get_num_threads(void);

/* How large host copies, fills and conversions (16 MiB and up) write their
 * destination. Streaming (non-temporal) stores skip reading each destination
 * line before writing it: they win where memory is slow and can lose where it
 * is fast, and on some hosts which one wins changes within minutes.
 * TSTOR_STORES_AUTO, the default, measures: each operation (a pair of dtypes,
 * a shape) of each kind of work and size keeps a choice of its own, tried
 * again every few seconds by timing a few of its own calls with each store,
 * and streaming stores are chosen only where they are clearly faster. The
 * choice changes speed, never results. $TSTOR_LOG=debug reports each new
 * choice on stderr. The other two policies always use one kind. $TSTOR_STORES
 * (auto, streaming or ordinary), read once, sets the starting policy.
 * Returns the previous policy, or TSTOR_EINVAL for a value that is none of
 * these. */
typedef enum tstor_store_policy {
  TSTOR_STORES_AUTO = 0,
  TSTOR_STORES_STREAMING = 1,
  TSTOR_STORES_ORDINARY = 2
} tstor_store_policy;
TSTOR_EXTERN int tstor_set_store_policy(tstor_store_policy policy);
TSTOR_EXTERN tstor_store_policy tstor_get_store_policy(void);

/* The kinds of large host work whose stores are chosen apart: what streaming
 * gains differs between them (a fill only writes; a widening conversion
 * writes more than it reads; a transposing copy writes in tiles). */
typedef enum tstor_store_work {
  TSTOR_WORK_COPY = 0,      /* untyped and same-dtype copies */
  TSTOR_WORK_FILL = 1,      /* fills */
  TSTOR_WORK_CONVERT = 2,   /* dtype conversions that can stream and do not widen */
  TSTOR_WORK_TRANSPOSE = 3, /* strided copies done in tiles */
  TSTOR_WORK_WIDEN = 4      /* dtype conversions to a larger element (float32 -> float64) */
} tstor_store_work;

/* What the next call of one kind of work and size writes with, and what the
 * last measurement for that size found, for the operation of that kind and
 * size called last. Choices are kept apart for calls of 16-32 MiB, 32-64,
 * 64-128 and 128 MiB up, a call's size being the bytes it reads and writes (a
 * fill's, the bytes it writes).
 * Filled by tstor_get_store_choice (tstor.h's struct_size rule). */
typedef struct tstor_store_choice {
  uint32_t struct_size;
  int streaming;            /* 1: streaming stores; 0: ordinary ones */
  int measured;             /* 1 once a trial has timed both (auto policy) */
  double streaming_speedup; /* then: ordinary time / streaming time; above 1, streaming won */
  double age_s;             /* seconds since that measurement */
} tstor_store_choice;
#define TSTOR_STORE_CHOICE_INIT                                               \
  {                                                                           \
    .struct_size = sizeof(tstor_store_choice), .streaming = 0, .measured = 0, \
    .streaming_speedup = 0.0, .age_s = 0.0                                    \
  }

/* Fills *out for a call of `work` touching `nbytes`. TSTOR_EINVAL for an
 * unknown work or a NULL out. */
TSTOR_EXTERN int tstor_get_store_choice(tstor_store_work work, size_t nbytes,
                                        tstor_store_choice *out);

#ifdef __cplusplus
}
#endif

#endif /* TSTOR_TSTOR_H */
