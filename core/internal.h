/* Core internals shared between the core's files; never installed. Names carry
 * a double underscore. docs/internals.md has the whole picture, a line per
 * file, and the tests that cover each folder.
 *
 * Layering. A file calls (or takes the address of) functions of its own layer
 * and of the layers above it in this list only, never of a later layer, and
 * no two files call each other round in a circle; tests/layering.py checks
 * both in make check, over every folder of core/ as one graph, and through
 * the bodies of the inline functions below. Logging and fault injection sit at
 * the bottom so that every file may use them; the registry only records what
 * modules register and answers lookups, and never calls up into the loader or
 * the context.
 *
 * layer 1: runtime/error.c runtime/memory.c runtime/fault.c runtime/log.c
 * layer 1: runtime/version.c runtime/handles.c default_config.c
 * layer 2: runtime/config.c
 * layer 3: runtime/registry.c
 * layer 4: runtime/loader.c
 * layer 5: runtime/context.c
 * layer 6: host/parallel.c
 * layer 7: host/stores.c
 * layer 8: host/bulk.c host/transpose.c
 * layer 9: storage/[a-z]*.c
 * layer 10: typed/[a-z]*.c
 * layer 11: tensor/[a-z]*.c
 * layer 12: shape/[a-z]*.c
 *
 * The folders: runtime/ (layers 1 to 5) the errors, memory hooks, fault
 * injection, logging and the set of open handles, the config parser, the
 * registry of device types, allocators and copy kernels, the loader (which
 * finds modules, runs their init and fini and hands them the registrar), and
 * contexts; host/ (6 to 8) the host loops under everything that moves bytes:
 * the thread pool, the choice of streaming or ordinary stores, bulk copies and
 * fills, the transposes under tensor copies; storage/ (9) what users do with devices: storages,
 * copies, streams and events, file mappings; typed/ (10) dtypes, their conversions, typed storages
 * and printing; tensor/ (11) tensors; shape/ (12) shape inference and type promotion over tensors
 * and layouts. libtstor-io (core/io/) is a library of its own over the public API, above all of
 * these. */
#ifndef TSTOR_INTERNAL_H
#define TSTOR_INTERNAL_H

#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include <tstor/backend.h>
#include <tstor/tstor.h>

#define TSTOR__MAX_TYPES 32
#define TSTOR__MAX_BACKENDS 64
#define TSTOR__ERRBUF 1024

#if defined(__GNUC__)
#define TSTOR__PRINTF(f, a) __attribute__((format(printf, f, a)))
#define TSTOR__LIKELY(x) __builtin_expect(!!(x), 1)
#define TSTOR__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define TSTOR__PRINTF(f, a)
#define TSTOR__LIKELY(x) (x)
#define TSTOR__UNLIKELY(x) (x)
#endif

/* ---------------------------------------------------------------- errors */

/* Records the calling thread's detail message and returns `code`. */
int tstor__err(int code, const char *fmt, ...) TSTOR__PRINTF(2, 3);
/* tstor.h's struct_size rule for a struct the library fills: the bytes to
 * write, struct_size (0 standing for the first layout, `first` bytes) capped
 * at `full`. 0 when struct_size is smaller than any layout, with a
 * TSTOR_EINVAL message naming the call, the struct type and its _INIT macro. */
size_t tstor__out_struct_size(uint32_t struct_size, size_t first, size_t full, const char *call,
                              const char *type);
int tstor__verr(int code, const char *fmt, va_list ap);
/* The per-thread detail (error.c), and clearing it (for calls that succeed
 * after an earlier failure): on every allocation, so inline. */
extern _Thread_local char tstor__last_error[TSTOR__ERRBUF];
static inline void tstor__err_clear(void) { tstor__last_error[0] = '\0'; }
/* Prefixes the current detail with "prefix: " (keeps the inner reason). */
void tstor__err_prefix(const char *fmt, ...) TSTOR__PRINTF(1, 2);

/* --------------------------------------------------------- memory hooks */

/* Every allocation of the core's own bookkeeping goes through these, so that
 * tests can make the Nth one fail. */
void *tstor__malloc(size_t n);
void *tstor__calloc(size_t count, size_t n);
void *tstor__realloc(void *p, size_t n);
char *tstor__strdup(const char *s);
void tstor__free(void *p);
/* Formats into a new string from tstor__malloc, or NULL. */
char *tstor__asprintf(const char *fmt, ...) TSTOR__PRINTF(1, 2);

/* ---------------------------------------------------------------- config */

typedef struct tstor__kv {
  char *key;
  char *value;
  int line;
  int used; /* asked for by the backend (unknown keys are the unused ones) */
} tstor__kv;

typedef struct tstor__section {
  char *name;    /* backend name: the part after "backend " */
  int line;      /* line of the [backend NAME] header */
  char *library; /* required */
  char *entry;   /* symbol override, or NULL */
  int optional;
  int enabled;
  tstor__kv *keys; /* backend-specific keys, in file order */
  int nkeys;
} tstor__section;

typedef struct tstor__config {
  char *name;     /* the file's path, or a caller's name for in-memory text */
  char *dir;      /* the file's folder (NULL for in-memory text) */
  char *default_device;
  int default_device_line;
  char *backend_dir; /* colon-separated list, or NULL */
  int log_level;
  tstor__section *sections;
  int nsections;
} tstor__config;

/* Parses INI text. On error returns TSTOR_ECONFIG with "NAME:LINE: reason" in
 * the detail and *out NULL. `name` and `dir` are copied. */
int tstor__config_parse(const char *text, size_t len, const char *name, const char *dir,
                        tstor__config **out);
/* The length of NUL-terminated config text, read no further than one byte
 * past the bound tstor__config_parse refuses: a text of gigabytes costs no
 * more than one of a megabyte. */
size_t tstor__config_text_len(const char *text);
/* Reads the file at path and parses it. */
int tstor__config_load(const char *path, tstor__config **out);
void tstor__config_free(tstor__config *cfg);
/* Parses "error|warn|info|debug" (or 0-3). */
int tstor__parse_log_level(const char *s, int *out);
int tstor__parse_bool(const char *s, int *out);
/* A decimal integer: an optional sign and digits only ("010" is ten; "0x10",
 * " 1", "1e3" are TSTOR_EINVAL; beyond long long TSTOR_ERANGE). */
int tstor__parse_int(const char *s, long long *out);

extern const char tstor__default_config[];

/* -------------------------------------------------------------- modules */

struct tstor_module {
  tstor_context *ctx;
  tstor__section *section; /* owned by the context's config */
  char *path;              /* resolved library path */
  void *dl;
  const tstor_backend_def *entry;
  void *state;      /* module_state from init */
  int initialized;  /* init succeeded: fini is owed */
  int registering;  /* inside init: registration allowed */
  /* The core's detail for the first registration that failed during init,
   * so that it reaches the user whatever init writes into its msg. */
  char reg_error[TSTOR__ERRBUF / 2];
};

/* ------------------------------------------------------------- registry */

typedef struct tstor__allocator {
  tstor_allocator_ops ops; /* the module's table, widened to our size (absent = NULL) */
  void *state;
  tstor_module *module;
  int type; /* device type id it allocates for */
} tstor__allocator;

typedef struct tstor__devtype {
  char *name;
  tstor_device_ops ops; /* widened copy, absent fields NULL */
  void *state;
  tstor_module *module;
  int count;
  tstor__allocator *allocator;
  int has_streams;
} tstor__devtype;

typedef struct tstor__copy_entry {
  tstor_copy_fn fn;          /* a copy kernel's entry, or */
  tstor_copy_batch_fn batch; /* a batched kernel's */
  void *state;
  tstor_module *module;
} tstor__copy_entry;

/* What a module registered while in init: committed when init succeeds,
 * dropped otherwise. */
typedef struct tstor__pending_copy {
  char *src, *dst;
  tstor__copy_entry entry;
} tstor__pending_copy;

/* --------------------------------------------------------------- context */

typedef struct tstor__backend {
  tstor_backend_info info; /* strings point into the fields below / config */
  char *message;
  char *library;
  tstor_module *module; /* NULL unless loaded */
} tstor__backend;

/* Prints "tstor: <what> %p <why>" and aborts: the caller's references are out
 * of step with the object's, and going on would corrupt memory. */
_Noreturn void tstor__misuse(const char *what, const void *p, const char *why);

/* handles.c: the contexts, streams and events not yet closed or freed. add:
 * 0, or TSTOR_ENOMEM with the detail set; remove: 1 when h was open (it no
 * longer is), 0 when it was not, so that a second close is caught without
 * reading the freed object. */
int tstor__handle_add(const void *h);
int tstor__handle_remove(const void *h);

struct tstor_context {
  atomic_long refs; /* the opener's, plus one per live storage, stream, event */
  tstor__config *config;
  int log_level;
  int nbackends;
  int ntypes;
  int host_type; /* first type with TSTOR_DEVICE_HOST, or -1 */

  tstor__backend backends[TSTOR__MAX_BACKENDS];

  tstor__devtype types[TSTOR__MAX_TYPES];
  tstor__allocator *allocators[TSTOR__MAX_TYPES * 4];
  int nallocators;
  tstor__pending_copy *copies;
  int ncopies;
  /* copy_table[src][dst] and batch_table[src][dst]; filled once all modules
   * are loaded */
  tstor__copy_entry copy_table[TSTOR__MAX_TYPES][TSTOR__MAX_TYPES];
  tstor__copy_entry batch_table[TSTOR__MAX_TYPES][TSTOR__MAX_TYPES];
  int copy_path[TSTOR__MAX_TYPES][TSTOR__MAX_TYPES];

  tstor_device default_device;
};

/* Resolves NULL to the default context; returns 0 or an error. Inline, as
 * every entry point starts with it and nearly all pass a context. */
static inline int tstor__ctx(tstor_context **ctx) {
  return TSTOR__LIKELY(*ctx != NULL) ? 0 : tstor_context_default(ctx);
}
/* Inline: every storage takes one, and the call would cost a third as much
 * as the atomic add itself. */
static inline void tstor__ctx_retain(tstor_context *ctx) {
  atomic_fetch_add_explicit(&ctx->refs, 1, memory_order_relaxed);
}
void tstor__ctx_release(tstor_context *ctx);

/* Loads, initialises and registers every enabled backend of the context's
 * config; unloads everything and fails on the first required one that fails. */
int tstor__load_backends(tstor_context *ctx);
/* Calls fini and dlcloses every loaded module, in reverse order. */
void tstor__unload_backends(tstor_context *ctx);

/* The registrar's registration calls (tstor_registrar documents them). */
int tstor__registry_register_device_type(tstor_module *m, const tstor_device_ops *ops,
                                         void *state);
int tstor__registry_register_allocator(tstor_module *m, const char *type,
                                       const tstor_allocator_ops *ops, void *state);
int tstor__registry_register_copy(tstor_module *m, const char *src, const char *dst,
                                  tstor_copy_fn fn, void *state);
int tstor__registry_register_copy_batch(tstor_module *m, const char *src, const char *dst,
                                        tstor_copy_batch_fn fn, void *state);
/* Builds copy_table and copy_path once registration is over. */
void tstor__registry_finish(tstor_context *ctx);
void tstor__registry_free(tstor_context *ctx);
/* Drops everything `m` registered (a failed or declined init). */
void tstor__registry_drop_module(tstor_context *ctx, tstor_module *m);
extern const tstor_registrar tstor__registrar;

/* Validates a device against the context: 0 or TSTOR_ENODEV with detail. The
 * test is inline (it is on every allocation), the message is not. */
int tstor__bad_device(tstor_context *ctx, tstor_device dev);
static inline int tstor__check_device(tstor_context *ctx, tstor_device dev) {
  if (TSTOR__LIKELY(dev.type >= 0 && dev.type < ctx->ntypes && dev.index >= 0 &&
                    dev.index < ctx->types[dev.type].count))
    return 0;
  return tstor__bad_device(ctx, dev);
}
/* Parses "type[:index]" against the context's registry (tstor_device_parse
 * without resolving a NULL context). */
int tstor__device_lookup(tstor_context *ctx, const char *text, tstor_device *out);
/* The first allocator with all of `flags` for type `type`, or NULL. */
tstor__allocator *tstor__find_allocator(tstor_context *ctx, int type, uint32_t flags);

/* Writes "tstor: message" to stderr when level is at or below the context's. */
void tstor__log(tstor_context *ctx, int level, const char *fmt, ...) TSTOR__PRINTF(3, 4);

/* --------------------------------------------------------------- storage */

struct tstor_storage {
  atomic_long refs;
  void *data;
  size_t nbytes;
  tstor_device device;
  unsigned flags;
  tstor_context *ctx; /* holds a reference */
  /* Who frees the bytes: an allocator, or a deleter, or nobody (borrowed, view). */
  tstor__allocator *alloc;
  void *alloc_ctx;
  tstor_deleter deleter;
  void *deleter_ctx;
  /* Views: the base holds the bytes; we hold a reference on it. */
  tstor_storage *base;
  size_t offset;
  atomic_long nviews; /* live views on this storage: resize is refused while > 0 */
  /* Set when the bytes map a file or shared memory; owned by the storage. */
  char *filename;
  /* The name filename held before share_memory or export_name moved the
   * bytes (a storage moves once at most): tstor_storage_filename's answer must
   * live until the last release. */
  char *old_filename;
  /* Serialises operations that replace the bytes of a live storage
   * (share_memory, export_name) with each other and with the making of views
   * of it (tstor__swap_lock); 0 free, 1 held. */
  atomic_int swap_lock;
};

/* Taken around replacing a root storage's bytes, and by tstor_storage_view
 * around reading them and counting the view, so that a view never keeps bytes
 * that are being freed. A waiter spins briefly, then yields, then sleeps: the
 * holder may be copying gigabytes. */
void tstor__swap_lock(tstor_storage *s);
void tstor__swap_unlock(tstor_storage *s);

/* Allocates the storage object itself (not its bytes), with one reference,
 * a context reference, and every other field zero. */
int tstor__storage_alloc(tstor_context *ctx, tstor_device dev, tstor_storage **out);
/* A new storage whose bytes come from `alloc`. */
int tstor__storage_new_with(tstor_context *ctx, tstor_device dev, tstor__allocator *alloc,
                            size_t nbytes, void *stream, tstor_storage **out);

/* ----------------------------------------------------------------- copy */

/* Copies nbytes between two device addresses of the context's devices, through
 * the copy table. stream is a backend stream handle of `stream_module` or NULL
 * (synchronous). */
int tstor__copy_bytes(tstor_context *ctx, tstor_device dst_dev, void *dst,
                      tstor_device src_dev, const void *src, size_t nbytes,
                      tstor_module *stream_module, void *stream);
/* 0 when bytes can be copied from src_dev to dst_dev, else the error the copy
 * would give (TSTOR_ENODATA out of a device without data, TSTOR_ENOTSUP): for
 * callers that allocate the destination first, so that the answer does not
 * depend on whether the allocation fits. */
int tstor__copy_possible(tstor_context *ctx, tstor_device dst_dev, tstor_device src_dev);
/* Fills nbytes at ptr on dev with a pattern. */
int tstor__fill_bytes(tstor_context *ctx, tstor_device dev, void *ptr, size_t nbytes,
                      const void *pattern, size_t pattern_size);

/* Staging: moving items between devices through host memory in bounded
 * chunks. One side of such a move: `ptr` on `dev`, `item` bytes per item. A
 * side whose dev.type is TSTOR__HOST_MEMORY is the caller's host memory. */
#define TSTOR__HOST_MEMORY (-1)
typedef struct tstor__stage_side {
  tstor_device dev;
  void *ptr;
  size_t item;
} tstor__stage_side;
/* Turns items [first, first + n) of the source, at `from` in host memory,
 * into the destination's items at `to` in host memory (NULL for a plain byte
 * copy, items of equal size). Returns 0 or an error code with detail. */
typedef int (*tstor__stage_fn)(void *arg, void *to, const void *from, size_t first, size_t n);
/* Moves `count` items from src to dst through host memory with memmove's
 * meaning: when both sides are on one device and their bytes overlap, the
 * result is that of reading every source item before writing any (the
 * direction is chosen by the overlap, or the whole source is staged). Sides in
 * host memory are used in place, others go through the copy table. src NULL:
 * fn makes each chunk from nothing (a fill). Chunks hold at most
 * TSTOR__STAGE_BYTES of either side. */
#define TSTOR__STAGE_BYTES ((size_t)16 << 20)
int tstor__stage(tstor_context *ctx, const tstor__stage_side *dst,
                 const tstor__stage_side *src, size_t count, tstor__stage_fn fn, void *arg);

/* -------------------------------------------------------------- helpers */

/* 0 and *out = a * b, or TSTOR_EOVERFLOW. */
static inline int tstor__mul_size(size_t a, size_t b, size_t *out) {
  if (b != 0 && a > (size_t)-1 / b) return TSTOR_EOVERFLOW;
  *out = a * b;
  return 0;
}

static inline void tstor__lock_spin(atomic_int *lock) {
  int expected = 0;
  while (!atomic_compare_exchange_weak_explicit(lock, &expected, 1, memory_order_acquire,
                                                memory_order_relaxed))
    expected = 0;
}
static inline void tstor__unlock_spin(atomic_int *lock) {
  atomic_store_explicit(lock, 0, memory_order_release);
}

#endif /* TSTOR_INTERNAL_H */
