/* libtstor-io internals, shared by its files; never installed. Functions,
 * objects and types are named tstor__io_*, apart from the core's tstor__
 * internals (the test build links both into one program). A file calls
 * functions of its own layer and the layers above it in this list only
 * (tests/layering.py checks it; a layer may take two lines):
 *
 * layer 1: value.c cursor.c writebuf.c idmap.c host_bytes.c atomic_file.c file_read.c
 * layer 1: ggml_dequant.c gguf_value.c torch_dequantize.c
 * layer 2: unpickle.c pickle_write.c zip.c zip_write.c source.c tar.c quantized.c json.c
 * layer 3: torch_rules.c
 * layer 4: torch_load.c torch_legacy.c torch_tar.c torch_save.c
 * layer 4: safetensors.c torch7_load.c torch7_save.c gguf_load.c gguf_save.c
 * layer 5: detect.c dlpack.c names.c torch7_modules.c
 *
 * 1 holds the value arena and the byte-level pieces every format uses (the
 * reading cursor, the sticky writers to memory and to a file, files read and
 * replaced, maps by identity and by key), ggml's types and torch's quantized
 * tensors decoded, and the GGUF types values carry; 2 the pickle machine and
 * writer, zip archives (zip_format.h's records, read and written), tar
 * archives (read), the source that turns a file's bytes into storages,
 * quantized values and the strict JSON reader (json.h) of the safetensors
 * header; 3 torch.save's rules for the machine; 4 one reader or writer per
 * format; 5 what works across formats (telling them apart, DLPack, values
 * found and walked by name) and on whole trees (a Lua model's state_dict). */
#ifndef TSTOR_IO_INTERNAL_H
#define TSTOR_IO_INTERNAL_H

#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

#define TSTOR__ERR(code, ...) tstor_error_set((code), __VA_ARGS__)

/* libtstor-io's own allocations. In libtstor-io.so they are libc's: the
 * library sees only the core's exported ABI. In the test build
 * (libtstor_io_test.la, compiled with TSTOR_IO_CORE_ALLOC and linked with the
 * core's own objects) they are the core's tstor__malloc family, which fault.h
 * counts and fails, so that the allocation-failure sweeps walk libtstor-io's
 * error paths as they walk the core's. Memory another library allocates or
 * frees stays libc's: realpath's (atomic_file.c) and open_memstream's (a save
 * to memory). */
#ifdef TSTOR_IO_CORE_ALLOC
void *tstor__malloc(size_t n);
void *tstor__calloc(size_t count, size_t n);
void *tstor__realloc(void *p, size_t n);
void tstor__free(void *p);
#define tstor__io_malloc tstor__malloc
#define tstor__io_calloc tstor__calloc
#define tstor__io_realloc tstor__realloc
#define tstor__io_free tstor__free
#else
#define tstor__io_malloc malloc
#define tstor__io_calloc calloc
#define tstor__io_realloc realloc
#define tstor__io_free free
#endif
static inline char *tstor__io_strdup(const char *s) {
  size_t n = __builtin_strlen(s) + 1;
  char *d = (char *)tstor__io_malloc(n);
  if (d) __builtin_memcpy(d, s, n);
  return d;
}
#if defined(__GNUC__)
#define TSTOR__PRINTF_IO(f, a) __attribute__((format(printf, f, a)))
#else
#define TSTOR__PRINTF_IO(f, a)
#endif

/* Room for one more element in a doubling array of elem-byte elements that
 * holds n of *cap (first slots the first time). Returns the array, moved or
 * not, with *cap updated; or NULL with nomem as the error text, the old array
 * still valid and *cap unchanged. */
static inline void *tstor__io_grow(void *items, size_t *cap, size_t n, size_t elem, size_t first,
                                   const char *nomem) {
  if (n < *cap) return items;
  size_t c = *cap ? *cap * 2 : first, bytes;
  void *p = __builtin_mul_overflow(c, elem, &bytes) ? NULL : tstor__io_realloc(items, bytes);
  if (!p) {
    TSTOR__ERR(TSTOR_ENOMEM, "%s", nomem);
    return NULL;
  }
  *cap = c;
  return p;
}

/* The flags of a saver's options (0 for NULL); TSTOR_EINVAL for a size that
 * is not this version's struct or an older one. */
static inline int tstor__io_save_flags(const tstor_save_options *opts, unsigned *flags) {
  *flags = 0;
  if (!opts) return 0;
  if (opts->size < sizeof(size_t) || opts->size > sizeof *opts)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_save_options.size %zu: expected %zu (TSTOR_SAVE_OPTIONS_INIT)",
                      opts->size, sizeof *opts);
  if (opts->size >= offsetof(tstor_save_options, flags) + sizeof opts->flags) *flags = opts->flags;
  return 0;
}

/* TSTOR_EINVAL unless opts->size covers at least the size field and no more
 * than this version's struct (both loaders' check). */
static inline int tstor__io_load_options_check(const tstor_load_options *opts) {
  if (opts->size < sizeof(size_t) || opts->size > sizeof *opts)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_load_options.size %zu: expected %zu", opts->size,
                      sizeof *opts);
  const unsigned known = TSTOR_LOAD_READ | TSTOR_LOAD_BORROW_BUFFER | TSTOR_LOAD_VERIFY_CRC | TSTOR_LOAD_MMAP |
                         TSTOR_LOAD_MMAP_SHARED | TSTOR_LOAD_ASSUME_BIG_ENDIAN;
  if (opts->flags & ~known)
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_load_options.flags 0x%x: unknown flags 0x%x", opts->flags,
                      opts->flags & ~known);
  if ((opts->flags & TSTOR_LOAD_READ) && (opts->flags & (TSTOR_LOAD_MMAP | TSTOR_LOAD_MMAP_SHARED)))
    return TSTOR__ERR(TSTOR_EINVAL, "tstor_load_options.flags: TSTOR_LOAD_READ and a mapping together");
  return 0;
}

/* A map_location the context has no device for is the caller's argument at
 * fault, whatever the file holds: said so before anything is read. */
static inline int tstor__io_map_location_check(tstor_context *ctx, const char *map_location) {
  tstor_device dev;
  int rc = map_location ? tstor_device_parse(ctx, map_location, &dev) : 0;
  if (rc == 0) return 0;
  return tstor_error_prefix(rc, "map_location \"%s\" is no device of this context", map_location);
}

/* A kind only the unpickler sees: it never reaches a finished tree. */
enum {
  TSTOR__VALUE_GLOBAL = 100 /* a permitted callable or class (u.global) */
};

/* The callables the unpickler knows: every one of them only builds data. */
enum {
  TSTOR__G_ORDEREDDICT = 1,
  TSTOR__G_REBUILD_TENSOR_V2,
  TSTOR__G_REBUILD_TENSOR_V3,
  TSTOR__G_REBUILD_TENSOR,
  TSTOR__G_REBUILD_PARAMETER,
  TSTOR__G_REBUILD_META,
  TSTOR__G_REBUILD_PARAMETER_STATE,
  TSTOR__G_COUNTER,           /* collections.Counter */
  TSTOR__G_SIZE,              /* torch.Size */
  TSTOR__G_DEVICE,            /* torch.device */
  TSTOR__G_SET,               /* builtins.set */
  TSTOR__G_BYTEARRAY,         /* builtins.bytearray */
  TSTOR__G_COMPLEX,           /* builtins.complex */
  TSTOR__G_ENCODE,            /* _codecs.encode, which pickle's protocol 2 writes bytes with */
  TSTOR__G_STORAGE_CLASS,     /* a torch.XStorage class, of u.global.dtype */
  TSTOR__G_DTYPE,             /* torch.float32...: u.global.dtype */
  TSTOR__G_TENSOR_CLASS,      /* torch.XTensor, torch.cuda.XTensor: u.global.dtype */
  TSTOR__G_REBUILD_FROM_TYPE, /* torch._tensor._rebuild_from_type_v2 */
  TSTOR__G_TENSOR_TYPE,       /* the class torch.Tensor */
  TSTOR__G_PARAMETER_TYPE,    /* the class torch.nn.parameter.Parameter */
  TSTOR__G_REBUILD_QTENSOR,   /* torch._utils._rebuild_qtensor */
  TSTOR__G_QSCHEME            /* torch.per_tensor_affine...: u.global.dtype the TSTOR__QSCHEME_* */
};

/* torch's quantization schemes, as its qscheme enum numbers them. */
enum {
  TSTOR__QSCHEME_PER_TENSOR_AFFINE = 0,
  TSTOR__QSCHEME_PER_CHANNEL_AFFINE,
  TSTOR__QSCHEME_PER_TENSOR_SYMMETRIC,
  TSTOR__QSCHEME_PER_CHANNEL_SYMMETRIC,
  TSTOR__QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS,
  TSTOR__QSCHEME_END
};
extern const char *const tstor__io_qscheme_names[TSTOR__QSCHEME_END];

/* The Python class of a value where its kind does not say it
 * (tstor_value_class); an OrderedDict is `ordered`. */
enum {
  TSTOR__CLASS_PLAIN = 0,
  TSTOR__CLASS_COUNTER,   /* a DICT */
  TSTOR__CLASS_SIZE,      /* a TUPLE of ints */
  TSTOR__CLASS_DEVICE,    /* a STRING: "cuda:1" */
  TSTOR__CLASS_BYTEARRAY, /* BYTES */
  TSTOR__CLASS_PARAMETER  /* a TENSOR, u.tensor.attrs its attributes or NULL */
};

struct tstor_value {
  int kind;
  unsigned char pyclass; /* TSTOR__CLASS_* */
  unsigned char requires_grad;
  unsigned char colour; /* for the walk that checks a finished tree */
  unsigned char ordered; /* a dict that was an OrderedDict */
  unsigned char lua;     /* a dict that was a Lua table: true is not 1, any key by identity */
  unsigned char gguf;    /* the GGUF type it is written with, plus 1; 0 for none */
  unsigned char gguf_elem; /* an ARRAY's element type, plus 1 */
  union {
    int64_t i;
    double f;
    double c[2]; /* a COMPLEX: real, imaginary */
    struct {
      char *s;
      size_t len;
    } str;
    struct {
      tstor_value **items; /* values; a dict's values */
      tstor_value **keys;  /* a dict's keys, else NULL */
      size_t n, cap;
      tstor_value *attrs;  /* an OrderedDict's __dict__ (BUILD), or NULL */
      uint32_t *index;     /* a dict's hash index (slots hold position + 1), or NULL */
      size_t index_cap;
    } seq;
    struct {
      char *cls;           /* owned */
      char *version;       /* owned; NULL: written before classes had versions */
      tstor_value *state;  /* a dict */
    } obj;                 /* a Torch7 class instance */
    struct {
      tstor_tensor *t;  /* NULL until the storages are loaded; a QUANTIZED value's blocks */
      long storage;     /* index in the checkpoint's storages; -1 for a meta tensor */
      union {
        tstor_storage *s; /* a STORAGE value's storage, borrowed from its record once loaded */
        tstor_value *quantizer; /* a quantized TENSOR's: (scheme, scale, zero_point) or (scheme,
                                   scales, zero_points, axis), the scheme a STRING as torch.load
                                   makes it; NULL for the others */
      };
      int dtype;        /* a STORAGE value's dtype; a tensor's as its rebuild gave it, -1 for its
                           storage's; a QUANTIZED value's ggml type */
      int ndim;         /* beside dtype: a value is 80 bytes, not 88 */
      int64_t offset;   /* elements */
      int64_t *sizes,
          *strides;       /* owned (strides within sizes); a QUANTIZED value's logical sizes */
      tstor_value *attrs; /* a Parameter's attributes (a dict), or NULL */
    } tensor;
    struct {
      int which; /* TSTOR__G_* */
      int dtype; /* a storage class's or a dtype's; -1 for the others */
    } global;    /* a TSTOR__VALUE_GLOBAL, built by tstor__io_value_global */
  } u;
};

typedef struct tstor__io_record {
  char *key;             /* record name under data/ */
  tstor_dtype dtype;
  int64_t numel;         /* elements */
  char *location;        /* "cpu", "cuda:0" as written */
  tstor_storage *s;      /* loaded storage, or NULL */
  long view_of;          /* a legacy view: the index of its root storage; else -1 */
  int64_t view_offset;   /* a view's first element in its root */
  int64_t file_offset;   /* where its bytes begin in the file (safetensors, GGUF), or -1 */
} tstor__io_record;

/* Values are allocated in slabs, not one by one: a pickle builds about a
 * dozen for each tensor (its arguments, sizes, strides), and a malloc and a
 * free apiece were a third of a load's instructions. */
typedef struct tstor__io_value_slab {
  struct tstor__io_value_slab *next;
  size_t n; /* values in v */
  tstor_value v[];
} tstor__io_value_slab;

/* A safetensors tensor kept as its packed bytes (a uint8 tensor): the
 * format's dtype and shape, which the writer writes back. */
typedef struct tstor__io_packed {
  const tstor_value *v; /* the tensor value, in the checkpoint's arena */
  const char *dtype;    /* static: "F6_E2M3", ... */
  int ndim;
  int64_t sizes[TSTOR_TENSOR_MAX_DIM];
} tstor__io_packed;

struct tstor_checkpoint {
  tstor_value **values; /* every value of the arena, in the order made */
  size_t nvalues, capvalues;
  tstor__io_value_slab *slabs; /* the newest first; values are taken from its end */
  size_t slab_left;            /* values not yet taken in the newest slab */
  tstor_value *root;
  tstor__io_record *storages;
  size_t nstorages, capstorages;
  uint32_t *storage_slots; /* index + 1 of the storage with each key, by hash */
  size_t storage_slots_cap;
  tstor_value *metadata; /* safetensors' __metadata__ dict, or NULL */
  tstor__io_packed *packed; /* safetensors tensors kept as packed bytes */
  size_t npacked, cappacked;
  uint64_t source_bytes; /* of the input it was loaded from (0: built), which bounds walks */
};

/* ---------------------------------------------------------------- values */

/* A new value of `kind` in ck's arena (zeroed), or NULL with TSTOR_ENOMEM set. */
tstor_value *tstor__io_value_alloc(tstor_checkpoint *ck, int kind);
/* A global the unpickler's rules permit (TSTOR__VALUE_GLOBAL): `which` of
 * the TSTOR__G_* callables and classes, and the dtype a storage class or a
 * dtype stands for (-1 for the others). NULL with TSTOR_ENOMEM set. */
tstor_value *tstor__io_value_global(tstor_checkpoint *ck, int which, int dtype);
int tstor__io_seq_push(tstor_value *seq, tstor_value *item);
int tstor__io_dict_set(tstor_value *dict, tstor_value *key, tstor_value *value);
/* The items of v as Python iterates it, in *out's u.seq: v itself for a
 * tuple, list or set, else a new tuple of a dict's keys, a str's characters
 * (each a string) or a bytes' ints. v must be one of those kinds. */
int tstor__io_iterate(tstor_checkpoint *ck, tstor_value *v, tstor_value **out);
/* The position of key in dict, or -1 (an unhashable key is in no dict). */
long tstor__io_dict_find(const tstor_value *dict, const tstor_value *key);
/* dict[key] = value unless key is there (*existed then true; replaced only
 * with `replace`). */
int tstor__io_dict_put(tstor_value *dict, tstor_value *key, tstor_value *value, bool replace,
                       bool *existed);
/* Adds a storage record; *index gets its position. Takes ownership of nothing:
 * key and location are copied. */
int tstor__io_record_add(tstor_checkpoint *ck, const char *key, size_t keylen, tstor_dtype dtype,
                         int64_t numel, const char *location, size_t loclen, long *index);
/* A record no file names, made from record `from`: keyed "KEY/WHAT/INDEX"
 * (no key a file names holds a '/'), INDEX its position. */
int tstor__io_record_add_derived(tstor_checkpoint *ck, long from, const char *what,
                                 tstor_dtype dtype, int64_t numel, const char *location,
                                 long *index);
/* -1 when absent. */
long tstor__io_record_find(const tstor_checkpoint *ck, const char *key, size_t keylen);
/* Checks a finished tree: no cycle, at most TSTOR_CHECKPOINT_MAX_DEPTH deep,
 * no unpickler-only kinds. Shared subtrees are not counted again: a tree
 * costs what its values cost, however many paths lead through them (a Lua
 * model's node graph has 10^17), and the walkers that visit every path
 * bound themselves. */
int tstor__io_tree_check(tstor_value *root);
/* A 64-bit hash keyed per process (splitmix64's finaliser over x and a random
 * key), for tables whose keys a file chooses. */
uint64_t tstor__io_hash_u64(uint64_t x);
/* The same keyed hash of n bytes at p, for tables of names a file chooses. */
uint64_t tstor__io_hash_bytes(const void *p, size_t n);
/* The len bytes at s as Python's int(s, base) reads text (base 10, 8, 16 or
 * 2; 0 for a literal's prefix and rules): blanks around, a sign, digits with
 * single underscores between them. TSTOR_EINVAL (no error set) when it is no
 * int, TSTOR_ERANGE when it is one past int64. */
int tstor__io_parse_int(const char *s, size_t len, int base, int64_t *out);
/* 1 when s holds valid UTF-8 (surrogates allowed, as Python's surrogatepass). */
int tstor__io_utf8_valid(const char *s, size_t len);

/* ----------------------------------------------------------------- idmap */

/* Identities (pointers) to numbers, for writers that write an object once
 * and refer to it after (idmap.c). Zeroed is empty. */
typedef struct tstor__io_idmap {
  const void **keys;
  uint32_t *vals;
  size_t cap, n;
} tstor__io_idmap;
int tstor__io_idmap_put(tstor__io_idmap *m, const void *id, uint32_t value);
bool tstor__io_idmap_get(const tstor__io_idmap *m, const void *id, uint32_t *value);
void tstor__io_idmap_free(tstor__io_idmap *m);

/* Integer keys to objects (not NULL), for readers whose file names its
 * objects by number and may name one number again for another object,
 * which then replaces the first (as a Python dict does). Zeroed is empty. */
typedef struct tstor__io_keymap {
  int64_t *keys;
  void **vals; /* NULL: an empty slot */
  size_t cap, n;
} tstor__io_keymap;
int tstor__io_keymap_put(tstor__io_keymap *m, int64_t key, void *v);
/* NULL when absent. */
void *tstor__io_keymap_get(const tstor__io_keymap *m, int64_t key);
void tstor__io_keymap_free(tstor__io_keymap *m);

/* The bytes of storage s, readable from the host (host_bytes.c): s's own
 * when it is host memory, else a copy on cpu (*tmp, which the caller
 * releases). */
int tstor__io_host_bytes(tstor_storage *s, tstor_storage **tmp, const void **p);
/* A torch quantized tensor's values in a new contiguous float32 cpu tensor,
 * as torch's CPU dequantize computes them (torch_dequantize.c). */
int tstor__io_torch_dequantize(const tstor_value *v, tstor_tensor **out);

/* ---------------------------------------------------------------- pickle */

#include "pickle.h"

/* The bound on a pickle's bytes, whatever the file's size: a state_dict's
 * is kilobytes. */
#define TSTOR__PICKLE_MAX ((uint64_t)1 << 30)

/* torch.save's rules (torch_rules.c), for its zip and its legacy format:
 * the weights_only globals, storages by persistent id; the tensors' storages
 * are listed in ck->storages, not loaded. */
extern const tstor__io_pickle_rules tstor__io_torch_rules;
extern const tstor__io_pickle_rules tstor__io_torch_legacy_rules;
/* The tar format's: for the tree, whose persistent ids are keys of the
 * tstor__io_keymap a copy of these rules gets as its state (storages and
 * tensors); and for the pickles that head each storage and tensor in the
 * other members, which may name storage and tensor classes and nothing
 * else. Both read the opcodes Python 2's pickle wrote. */
extern const tstor__io_pickle_rules tstor__io_torch_tar_rules;
extern const tstor__io_pickle_rules tstor__io_torch_tar_header_rules;
/* Once every root storage is loaded: the legacy format's views of them, and
 * every tensor of the tree on its storage (meta tensors on ctx's meta
 * device); TSTOR_ERANGE and the like naming the storage a tensor overruns. */
int tstor__io_torch_bind(tstor_context *ctx, tstor_checkpoint *ck);

/* ------------------------------------------------------------------- zip */

/* Where an entry's bytes lie in an archive that is in memory (mapped). */
typedef struct tstor__io_zip_entry {
  const char *name; /* points into the archive: NOT NUL-terminated */
  size_t name_len;
  uint64_t header_offset; /* of its local header, where its bytes in the archive begin */
  uint64_t data_offset;   /* of the stored bytes */
  uint64_t size;        /* uncompressed */
  uint64_t comp_size;
  uint16_t method;      /* 0 stored, 8 deflated */
  uint32_t crc;
} tstor__io_zip_entry;

typedef struct tstor__io_zip_index {
  tstor__io_zip_entry *entries;
  size_t n;
  uint32_t *by_name; /* lookups by name: open addressing on the name's hash, at most half
                       full, each slot an entry's position + 1 (0: empty) */
  size_t by_name_cap;
  uint8_t *directory;               /* read from a file: the central directory the
                                       names point into; else NULL */
  bool no_end; /* set when a read failed for want of an end record: the input was cut short,
                  or is no archive */
} tstor__io_zip_index;

/* Reads the central directory of the zip archive of `size` bytes at `data`
 * (zip64 included) and each entry's local header, every record through a
 * cursor (zip_format.h has their layouts). Every offset is checked against
 * the archive; a failure names the offset of the record at fault. */
int tstor__io_zip_index_read(const uint8_t *data, size_t size, tstor__io_zip_index *out);
/* The same from the open file fd of `size` bytes, read with pread: only the
 * directory and the local headers are read. A file that ends early (changed
 * while it was read) is TSTOR_EIO. */
int tstor__io_zip_index_read_fd(int fd, uint64_t size, tstor__io_zip_index *out);
void tstor__io_zip_index_free(tstor__io_zip_index *ix);
/* The zip format's CRC-32 of len bytes at data, continuing from crc (0 to
 * begin), for the reader's checks and the writer's entries. */
uint32_t tstor__io_crc32(uint32_t crc, const void *data, size_t len);
const tstor__io_zip_entry *tstor__io_zip_find(const tstor__io_zip_index *ix, const char *name);

/* ----------------------------------------------------- file_read.c */

/* Opens `path` for reading: regular files only (a FIFO or device is refused
 * at once, without waiting for a writer). *fd gets the descriptor, closed by
 * the caller; *size the file's size. */
int tstor__io_file_open(const char *path, int *fd, uint64_t *size);

/* Reads len bytes at off; TSTOR_EIO naming `what` on an error or a file that
 * ends early. */
int tstor__io_pread_full(int fd, void *dst, size_t len, uint64_t off, const char *what);

/* Reads to make at once, split in pieces that threads share. `what` (borrowed,
 * alive until the batch is run) names a piece's record in an error. */
#define TSTOR__READ_PIECE ((size_t)4 << 20)
#define TSTOR__READ_THREADS_MAX 8
typedef struct tstor__io_read_piece {
  void *dst;
  uint64_t off;
  size_t len;
  const char *what;
} tstor__io_read_piece;
typedef struct tstor__io_read_batch {
  tstor__io_read_piece *pieces;
  size_t n, cap;
  uint64_t bytes;
} tstor__io_read_batch;
int tstor__io_read_batch_add(tstor__io_read_batch *b, void *dst, uint64_t off, size_t len,
                             const char *what);
/* Runs every read of the batch from fd, on up to TSTOR__READ_THREADS_MAX
 * threads (tstor_get_num_threads()); the first failure is the result. */
int tstor__io_read_batch_run(const tstor__io_read_batch *b, int fd);
void tstor__io_read_batch_free(tstor__io_read_batch *b);

/* ----------------------------------------------------------- source.c */

/* The input a checkpoint is read from, which every format's reader shares:
 * an open file read with pread, a whole file mapped (TSTOR_LOAD_MMAP), or the
 * caller's buffer (borrowed with TSTOR_LOAD_BORROW_BUFFER). */
typedef struct tstor__io_source {
  tstor_context *ctx;
  const char *map_location; /* the caller's, or NULL */
  unsigned flags;           /* TSTOR_LOAD_* */
  int fd;                   /* the file, read with pread; or -1 */
  uint64_t size;            /* the input's bytes */
  const uint8_t *bytes;     /* the whole input in memory (a mapping or the caller's), or NULL */
  tstor_storage *whole;     /* a cpu storage over `bytes` that storages may view, or NULL */
  tstor__io_read_batch reads; /* reads queued into cpu storages, run together */
} tstor__io_source;

/* A load's first step: *out NULL, the options checked, the context (ctx, or
 * the default), the map_location one of its devices. `who` names the call. */
int tstor__io_source_begin(tstor__io_source *src, tstor_context *ctx,
                           const tstor_load_options *opts, tstor_checkpoint **out, const char *who);
/* The file at path, opened; mapped whole with TSTOR_LOAD_MMAP (an empty
 * file then is "not <format>"). */
int tstor__io_source_open_file(tstor__io_source *src, const char *path, const char *format);
int tstor__io_source_open_buffer(tstor__io_source *src, const void *data, size_t size,
                                 const char *who);
/* The file open on fd, which stays the caller's: a regular file is read with
 * pread from its start (the descriptor's offset is left alone); a pipe or
 * socket is read to its end into *owned, which the caller frees after the
 * load. TSTOR_LOAD_MMAP is refused: a mapping is made from a path. */
int tstor__io_source_open_fd(tstor__io_source *src, int fd, uint8_t **owned);
void tstor__io_source_close(tstor__io_source *src);
/* rc, with the error's message prefixed by path where it does not name it. */
int tstor__io_source_fail(int rc, const char *path);
/* The device storage `key` goes to: the map_location, else the file's
 * `location` ("" is refused: no location was written). */
int tstor__io_source_device(tstor__io_source *src, const char *location, const char *key,
                            tstor_device *dev);
/* Whether the type of dev has any of `flags` (TSTOR_DEVICE_HOST: its bytes
 * can be read into directly; TSTOR_DEVICE_NO_DATA: none to read). */
bool tstor__io_source_device_has(const tstor__io_source *src, tstor_device dev, unsigned flags);
/* len bytes at off of the input, into dst; TSTOR_EINVAL naming `what` past
 * its end, TSTOR_EIO when the file ends early. */
int tstor__io_source_read(const tstor__io_source *src, void *dst, size_t len, uint64_t off,
                          const char *what);
/* The input's bytes [off, off + nbytes) as a cpu storage *host: with
 * TSTOR__SOURCE_VIEW a view of the mapping or borrowed buffer when off is
 * aligned to `align`; else a storage of its own, read now, or with
 * TSTOR__SOURCE_QUEUE from a file queued (*queued true; tstor__io_source_run
 * reads them all). */
enum { TSTOR__SOURCE_VIEW = 1 << 0, TSTOR__SOURCE_QUEUE = 1 << 1 };
int tstor__io_source_host(tstor__io_source *src, uint64_t off, size_t nbytes, size_t align,
                          unsigned how, const char *what, tstor_storage **host, bool *queued);
int tstor__io_source_run(tstor__io_source *src);
/* Storage record r, of nbytes at off of the input, on its device (the
 * map_location, else r->location) as r->s: a view where the bytes lie in
 * memory aligned to its elements, a cpu storage read with the others
 * (tstor__io_source_run), or copied to the device; for a device without
 * data, a storage of that size. */
int tstor__io_source_record(tstor__io_source *src, tstor__io_record *r, uint64_t off,
                            size_t nbytes);
/* The storage of a record of `nbytes` at off, of a format that names no
 * device (safetensors, GGUF): on cpu unless the map_location says another
 * device (a meta one gets no bytes), a view of the input where it can be
 * (off aligned to `align`), else read, or queued for tstor__io_source_run
 * when on cpu. `key` names the record in messages. */
int tstor__io_source_storage(tstor__io_source *src, uint64_t off, size_t nbytes, size_t align,
                             const char *key, tstor_storage **out);

/* A format's loader over an open source; `name` names the input in
 * messages. The public loads are one of these two around one. */
typedef int (*tstor__io_source_loader)(tstor__io_source *src, const char *name,
                                       tstor_checkpoint **out);
/* Checks the arguments (`who` names the call), opens the file at path (read,
 * or mapped as opts say; `format` names it in "an empty file is not ..."),
 * loads it, and prefixes a failure's message with the path. */
int tstor__io_load_path(tstor_context *ctx, const char *path, const tstor_load_options *opts,
                        tstor_checkpoint **out, const char *who, const char *format,
                        tstor__io_source_loader load);
int tstor__io_load_buffer(tstor_context *ctx, const void *data, size_t size,
                          const tstor_load_options *opts, tstor_checkpoint **out, const char *who,
                          tstor__io_source_loader load);

/* ------------------------------------------------------------------- tar */

/* A member of a tar archive, as Python's tarfile finds it (tar.c). */
typedef struct tstor__io_tar_member {
  uint64_t header; /* where its headers begin (a PAX or GNU one, if any) */
  uint64_t data;   /* where its bytes begin */
  uint64_t size;   /* its bytes, as its last word on them says (a PAX size record) */
  char type;       /* its header's type flag */
  bool file;       /* a type tarfile reads as a file */
  bool found;
} tstor__io_tar_member;

/* Whether the n bytes at p open with a tar header tarfile accepts: 512
 * bytes, not all zero, whose checksum and numbers are right. */
bool tstor__io_tar_header_ok(const uint8_t *p, size_t n);
/* Reads every header of the tar archive in src, as tarfile.getmembers
 * does, and finds for each of the n names the last member of that name
 * (out[i].found false where there is none). A failure names the offset of
 * the header at fault. */
int tstor__io_tar_find(const tstor__io_source *src, const char *const *names, size_t n,
                       tstor__io_tar_member *out);

/* ------------------------------------------------------------------ GGUF */

/* gguf_value.c: a GGUF value type's name ("u32"; NULL for no type) and the
 * bytes of one scalar of it (0 for a string or an array); whether v may be
 * written as scalar type `type` (its kind, and an int's range: TSTOR_EINVAL,
 * TSTOR_ERANGE). */
const char *tstor__io_gguf_type_name(int64_t type);
size_t tstor__io_gguf_type_size(int type);
int tstor__io_gguf_scalar_check(const tstor_value *v, int type);

/* quantized.c: the bytes of a tensor of quantized ggml type `type` and
 * logical sizes, checked (a whole number of blocks a row, no overflow); and
 * a QUANTIZED value of ck over `blocks` (a reference taken) with storage
 * record `storage` (-1 for none). */
int tstor__io_quantized_bytes(int type, int ndim, const int64_t *sizes, uint64_t *nbytes);
int tstor__io_value_quantized(tstor_checkpoint *ck, int type, int ndim, const int64_t *sizes,
                              tstor_tensor *blocks, long storage, tstor_value **out);

/* ----------------------------------------------------- torch_legacy.c */

/* 1 when the n bytes at p open with the legacy format's magic number pickle
 * (PROTO 2 to 5, maybe a FRAME, LONG1 of the 10-byte magic), and *end (when
 * not NULL and the pickle's STOP follows) gets the offset past it, else 0. */
bool tstor__io_torch_legacy_magic(const uint8_t *p, size_t n, size_t *end);
/* Loads torch.save's legacy format from an open source. */
int tstor__io_torch_legacy_load(tstor__io_source *src, tstor_checkpoint **out);

/* ------------------------------------------------------- torch_tar.c */

/* Loads torch.save's tar format (PyTorch 0.1, before 0.1.10) from an open
 * source whose first block is a tar header. */
int tstor__io_torch_tar_load(tstor__io_source *src, tstor_checkpoint **out);

/* Each format's loader over an open source (the public calls are these
 * after opening one); `name` names the input in messages. */
int tstor__io_torch_load_source(tstor__io_source *src, const char *name, tstor_checkpoint **out);
int tstor__io_safetensors_load_source(tstor__io_source *src, const char *name,
                                      tstor_checkpoint **out);
int tstor__io_torch7_load_source(tstor__io_source *src, const char *name, tstor_checkpoint **out);
int tstor__io_gguf_load_source(tstor__io_source *src, const char *name, tstor_checkpoint **out);

/* Writes a zip archive of stored entries with 64-byte aligned data
 * (zip_write.c) through a file writer (writebuf.h): begin an entry (its size
 * and CRC known up front), write exactly `size` bytes of data
 * (tstor__io_fw_append on w->out), and finish with the central directory,
 * which returns the first error of them all. */
typedef struct tstor__io_zipw_entry {
  char *name;
  uint64_t offset, size;
  uint32_t crc;
} tstor__io_zipw_entry;

typedef struct tstor__io_zip_writer {
  tstor__io_fwriter out;
  tstor__io_zipw_entry *e;
  size_t n, cap;
} tstor__io_zip_writer;

void tstor__io_zipw_init(tstor__io_zip_writer *w, FILE *f);
void tstor__io_zipw_begin(tstor__io_zip_writer *w, const char *name, uint64_t size, uint32_t crc);
int tstor__io_zipw_finish(tstor__io_zip_writer *w);
void tstor__io_zipw_free(tstor__io_zip_writer *w);

/* atomic_file.c: opens a temporary file beside the file a save to `path`
 * replaces (path, or a symbolic link's target; refused when not a regular
 * file) for writing (*tmp gets its name, to free); tstor__io_commit_file syncs
 * and closes it and renames it over that file, or with ok 0 removes it. */
int tstor__io_create_temp(const char *path, char **tmp, FILE **f);
int tstor__io_commit_file(FILE *f, char *tmp, const char *path, int ok);
/* A save to `path` that way: write(arg, f) into the temporary file, then the
 * commit (or, when write fails, its removal). Every saver's path form. */
typedef int (*tstor__io_stream_writer)(const void *arg, FILE *f);
int tstor__io_save_atomically(const char *path, tstor__io_stream_writer write, const void *arg);

/* Each format's saver to an open stream, at its position, left open (the
 * path forms are these through tstor__io_save_atomically). flags as the
 * format's public save takes them. */
int tstor__io_torch_save_stream(const tstor_checkpoint *ck, FILE *f);
int tstor__io_safetensors_save_stream(const tstor_checkpoint *ck, FILE *f, unsigned flags);
int tstor__io_torch7_save_stream(const tstor_checkpoint *ck, FILE *f, unsigned flags);
int tstor__io_gguf_save_stream(const tstor_checkpoint *ck, FILE *f);

#endif
