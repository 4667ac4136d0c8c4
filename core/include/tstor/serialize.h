/* tstor/serialize.h: PyTorch checkpoints (torch.save's zip and legacy
 * formats, and its first, a tar archive), safetensors files, Lua Torch's .t7
 * files and GGUF files, read and written (docs/formats.md: the formats and
 * how each maps onto values). Part of libtstor-io (pkg-config module
 * tstor-io), a library layered on libtstor: a program that only needs
 * storages and tensors does not link it.
 *
 * A checkpoint is an arena of values: the tree torch.save pickled (dicts,
 * lists, tuples, strings, numbers, None) whose leaves are tstor tensors and
 * storages (and, from Torch7, class objects and byte strings). The
 * checkpoint owns every value in it; values are borrowed pointers that live as
 * long as the checkpoint. Tensors are refcounted as usual: a caller that wants
 * one past tstor_checkpoint_free retains it.
 *
 * Reading never executes anything from the file. The pickle is read by a
 * strict interpreter of what torch.save emits for weights (PyTorch's
 * weights_only subset): collections.OrderedDict, torch._utils'
 * _rebuild_tensor_v2 / _rebuild_tensor / _rebuild_parameter /
 * _rebuild_meta_tensor_no_storage, torch's dtypes, the storage classes
 * (torch.FloatStorage...) through persistent ids ('storage', class, key,
 * location, numel[, view_metadata]). Any other global is refused with TSTOR_EACCES and a
 * message naming it. A file that is malformed or lies (offsets past a record,
 * sizes that overflow, nesting deeper than TSTOR_CHECKPOINT_MAX_DEPTH, a
 * value that contains itself) is refused with TSTOR_EINVAL, TSTOR_ERANGE or
 * TSTOR_EOVERFLOW and a message saying where; nothing is leaked.
 *
 * What a file can cost is bounded by its size, as it is read: data.pkl may
 * inflate to at most 16 times the file (and 1 GiB; torch.save stores it
 * uncompressed, so a real one is part of the file) and may build at most one
 * value per byte of the file, so the tree takes under 512 times the file's
 * size; storages take what their records hold (a compressed record at most
 * deflate's 1032 times its bytes). Past a bound, TSTOR_ERANGE before the
 * memory is spent.
 *
 * Conventions as in tstor.h: 0 or a negative TSTOR_E* code, detail in
 * tstor_last_error(), a failed call leaves *out NULL and nothing allocated.
 */
#ifndef TSTOR_SERIALIZE_H
#define TSTOR_SERIALIZE_H

#include <stdint.h>
#include <stdio.h>
#include <tstor/tstor.h>
#include <tstor/typed.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tstor_tensor tstor_tensor; /* tstor/tensor.h */
typedef struct tstor_checkpoint tstor_checkpoint;
typedef struct tstor_value tstor_value;

/* Trees nest at most this deep (Python's own recursion limit is about 1000). */
#define TSTOR_CHECKPOINT_MAX_DEPTH 512

typedef enum tstor_value_kind {
  TSTOR_VALUE_NONE = 0,
  TSTOR_VALUE_BOOL = 1,
  TSTOR_VALUE_INT = 2,    /* a Python int that fits int64 */
  TSTOR_VALUE_FLOAT = 3,  /* a Python float (double) */
  TSTOR_VALUE_STRING = 4, /* UTF-8, may hold NULs (length given) */
  TSTOR_VALUE_TUPLE = 5,
  TSTOR_VALUE_LIST = 6,
  TSTOR_VALUE_DICT = 7, /* dict or OrderedDict: insertion order kept */
  TSTOR_VALUE_TENSOR = 8,
  TSTOR_VALUE_STORAGE = 9, /* a storage saved as itself (torch.save([t.storage()])), typed */
  TSTOR_VALUE_BYTES = 10,  /* a byte string that is not UTF-8 (a Lua string may hold any bytes) */
  TSTOR_VALUE_OBJECT = 11, /* a Torch7 class instance (nn.Linear): class, version, fields */
  TSTOR_VALUE_QUANTIZED = 12, /* a tensor of a quantized ggml type (GGUF), its blocks as they are */
  TSTOR_VALUE_SET = 13,    /* a Python set (PyTorch 2.x reads them): distinct items, as a list's */
  TSTOR_VALUE_COMPLEX = 14 /* a Python complex: two doubles (tstor_value_complex) */
} tstor_value_kind;

/* -------------------------------------------------- loading a checkpoint */

/* The flags of tstor_load_options, every loader's, in bit order. */
typedef enum tstor_load_flag {
  /* Read the storages into memory: the default, as torch.load does. */
  TSTOR_LOAD_READ = 1 << 0,
  /* The _load_buffer calls only: cpu storages point into the caller's bytes
   * instead of copies of them (tstor_torch_load_buffer says how). */
  TSTOR_LOAD_BORROW_BUFFER = 1 << 1,
  /* Check the CRC of every record of a torch.save file, not only of the
   * compressed ones. Off by default, as in PyTorch's reader: it costs a pass
   * over all the bytes (about 1 GB/s), and a mapped load would have to read
   * what it otherwise leaves on disk until used. */
  TSTOR_LOAD_VERIFY_CRC = 1 << 2,
  /* Map the file instead, as torch.load(mmap=True): cpu storages whose records
   * are stored uncompressed and aligned become copy-on-write views of the
   * file, so a load costs almost nothing until the weights are used. The
   * hazard, as with PyTorch's mmap=True: the file must stay as it is while
   * any of those storages lives. torch.save rewrites a file in place
   * (truncate, then write), so a trainer saving over a checkpoint a server
   * loaded mapped changes the server's weights under it, and truncating it
   * kills the server with SIGBUS when it next reads them. Not with
   * TSTOR_LOAD_READ. */
  TSTOR_LOAD_MMAP = 1 << 3,
  /* Map the file shared instead of copy-on-write (torch.load(mmap=True) under
   * torch.serialization.set_default_mmap_options(mmap.MAP_SHARED)): a write
   * to a mapped storage reaches the file and every process that maps it. The
   * file must be writable. Implies TSTOR_LOAD_MMAP. */
  TSTOR_LOAD_MMAP_SHARED = 1 << 4,
  /* A torch.save zip file that has no byteorder record (PyTorch before 2.1
   * wrote none) is read as big-endian, as torch.serialization.
   * set_default_load_endianness(LoadEndianness.BIG) asks; without it,
   * little-endian. A file with the record is read as it says either way. */
  TSTOR_LOAD_ASSUME_BIG_ENDIAN = 1 << 5
} tstor_load_flag;

typedef struct tstor_load_options {
  size_t size;              /* sizeof(tstor_load_options): fields are only appended */
  const char *map_location; /* "cpu", "cuda:1", "meta"...: every storage there.
                               NULL: where the file says ("cpu", "cuda:0"), as
                               torch.load without map_location */
  unsigned flags;           /* TSTOR_LOAD_* */
} tstor_load_options;
/* The defaults, size filled in: `tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
 * o.map_location = "cpu";`. */
#define TSTOR_LOAD_OPTIONS_INIT \
  { .size = sizeof(tstor_load_options), .map_location = NULL, .flags = 0 }

/* The checkpoint formats a file may be in, told by its first bytes. */
typedef enum tstor_file_format {
  TSTOR_FORMAT_UNKNOWN = 0,
  TSTOR_FORMAT_TORCH,        /* torch.save's zip format (PyTorch 1.6 and later) */
  TSTOR_FORMAT_TORCH_LEGACY, /* torch.save before 1.6, or _use_new_zipfile_serialization=False */
  TSTOR_FORMAT_SAFETENSORS,
  TSTOR_FORMAT_TORCH7,    /* Lua Torch's torch.save / torch.File, binary or ascii */
  TSTOR_FORMAT_TORCH_TAR, /* torch.save's first format, a tar archive (PyTorch 0.1 before 0.1.10) */
  TSTOR_FORMAT_GGUF       /* llama.cpp's and ggml's GGUF, version 2 or 3 */
} tstor_file_format;

/* "torch", "torch-legacy", "safetensors", "torch7", "torch-tar", "gguf" or
 * "unknown". */
TSTOR_EXTERN const char *tstor_file_format_name(tstor_file_format format);
/* The format of the `size` bytes at head, a file's start (16 bytes or more
 * tell every format apart but the tar one, which takes 512: a tar header;
 * fewer may leave it UNKNOWN). Never fails. */
TSTOR_EXTERN tstor_file_format tstor_file_format_detect(const void *head, size_t size);
/* The same for the file at `path`, read without blocking: a FIFO, a device
 * or a directory is refused with TSTOR_EINVAL before anything waits on it;
 * TSTOR_ENOENT, TSTOR_EIO as open(2) fails. */
TSTOR_EXTERN int tstor_file_format_of(const char *path, tstor_file_format *out);

/* Loads the checkpoint at `path` in whatever format its bytes say:
 * tstor_torch_load (each of torch.save's formats), tstor_safetensors_load,
 * tstor_torch7_load or tstor_gguf_load, with the same options and
 * ownership; anything else is refused with TSTOR_EINVAL naming the formats
 * tried. */
TSTOR_EXTERN int tstor_checkpoint_load(tstor_context *ctx, const char *path,
                                       const tstor_load_options *opts, tstor_checkpoint **out);
/* The same from the file open on fd, which stays the caller's: a regular file
 * is read from its start with pread (its offset is left alone), a pipe or
 * socket to its end. A directory or a device (/dev/zero never ends) and
 * TSTOR_LOAD_MMAP are refused (TSTOR_EINVAL): a mapping is made from a
 * path. */
TSTOR_EXTERN int tstor_checkpoint_load_fd(tstor_context *ctx, int fd,
                                          const tstor_load_options *opts, tstor_checkpoint **out);
/* The same from `size` bytes at data, as the formats' _load_buffer calls. */
TSTOR_EXTERN int tstor_checkpoint_load_buffer(tstor_context *ctx, const void *data, size_t size,
                                              const tstor_load_options *opts,
                                              tstor_checkpoint **out);

/* Frees the checkpoint and every value in it, and drops its references on
 * tensors and storages (which live on where the caller retained them). NULL is
 * a no-op. */
TSTOR_EXTERN void tstor_checkpoint_free(tstor_checkpoint *ck);

/* The tree: the object torch.save was given (a safetensors file gives a dict
 * of name -> tensor). Borrowed from the checkpoint; NULL for a new one. */
TSTOR_EXTERN const tstor_value *tstor_checkpoint_root(const tstor_checkpoint *ck);

/* The distinct storages the checkpoint's tensors view, in the order the file
 * names them. *key gets the record name ("0", "1", ... for torch.save; the
 * tensor name for safetensors) and *storage the storage, both borrowed.
 * TSTOR_ERANGE for i out of range. */
TSTOR_EXTERN size_t tstor_checkpoint_storage_count(const tstor_checkpoint *ck);
TSTOR_EXTERN int tstor_checkpoint_storage(const tstor_checkpoint *ck, size_t i,
                                          const char **key, tstor_storage **storage);
/* Where the file says storage i was saved, as written ("cpu", "cuda:0"; "cpu"
 * for safetensors and Torch7, which say nothing; "" for a location that was
 * no string), whatever map_location loaded it onto; borrowed. NULL for i out
 * of range. */
TSTOR_EXTERN const char *tstor_checkpoint_storage_location(const tstor_checkpoint *ck, size_t i);
/* Where storage i's bytes begin in the file, for the formats whose records
 * are bytes at a place (safetensors, GGUF); -1 for the others, an empty
 * record and i out of range. */
TSTOR_EXTERN int64_t tstor_checkpoint_storage_offset(const tstor_checkpoint *ck, size_t i);

/* The metadata beside the tree: the string -> string dict of a safetensors
 * file's __metadata__, or a GGUF file's key -> value dict; NULL for none;
 * borrowed. set_metadata makes `dict` (a value of ck, or NULL) the metadata
 * tstor_safetensors_save and tstor_gguf_save write. */
TSTOR_EXTERN const tstor_value *tstor_checkpoint_metadata(const tstor_checkpoint *ck);
TSTOR_EXTERN int tstor_checkpoint_set_metadata(tstor_checkpoint *ck, tstor_value *dict);

/* ------------------------------------------------------------- values */

TSTOR_EXTERN tstor_value_kind tstor_value_kind_of(const tstor_value *v);
/* "none", "bool", "int", "float", "str", "tuple", "list", "dict", "tensor",
 * "storage", "bytes", "object", "quantized". */
TSTOR_EXTERN const char *tstor_value_kind_name(tstor_value_kind kind);

/* Scalars; a value of another kind reads as 0 (and bool/int read as each other). */
TSTOR_EXTERN int tstor_value_bool(const tstor_value *v);
TSTOR_EXTERN int64_t tstor_value_int(const tstor_value *v);
TSTOR_EXTERN double tstor_value_float(const tstor_value *v);
/* The bytes of a STRING or BYTES value, NUL-terminated, owned by the
 * checkpoint; *len (if not NULL) gets the length. NULL for other kinds. */
TSTOR_EXTERN const char *tstor_value_string(const tstor_value *v, size_t *len);

/* Items of a tuple or list, entries of a dict; 0 for other kinds. */
TSTOR_EXTERN size_t tstor_value_len(const tstor_value *v);
/* The i-th item of a tuple or list, the i-th value of a dict (insertion
 * order); borrowed. NULL when out of range or not a container. */
TSTOR_EXTERN const tstor_value *tstor_value_item(const tstor_value *v, size_t i);
/* The i-th key of a dict; borrowed. NULL when out of range or not a dict. */
TSTOR_EXTERN const tstor_value *tstor_value_key(const tstor_value *v, size_t i);
/* The value under string key `key` in a dict, or NULL; borrowed. */
TSTOR_EXTERN const tstor_value *tstor_value_dict_get(const tstor_value *v, const char *key);
/* An OrderedDict's attributes (a state_dict's _metadata lives there), a dict
 * value, or NULL when it has none; borrowed. */
TSTOR_EXTERN const tstor_value *tstor_value_dict_attributes(const tstor_value *v);

/* The tensor of a TENSOR value, or the uint8 tensor of a QUANTIZED value's
 * blocks (shaped as its rows of bytes: the logical sizes with the last one
 * made bytes per row, as gguf's GGUFReader shapes its data); borrowed
 * (retain it to keep it past the checkpoint); NULL for other kinds. */
TSTOR_EXTERN tstor_tensor *tstor_value_tensor(const tstor_value *v);
/* A COMPLEX's real and imaginary parts; TSTOR_EINVAL (parts untouched) for
 * another kind. */
TSTOR_EXTERN int tstor_value_complex(const tstor_value *v, double *re, double *im);
/* The Python class a value was saved as, where its kind does not say it all:
 * "collections.OrderedDict" and "collections.Counter" (DICT), "torch.Size"
 * (TUPLE of ints), "torch.device" (STRING, "cuda:1" or "cpu"), "bytearray"
 * (BYTES), "torch.nn.Parameter" (TENSOR); NULL for the plain class of its
 * kind. The string is static. */
TSTOR_EXTERN const char *tstor_value_class(const tstor_value *v);
/* The attributes a value was saved with: an OrderedDict's __dict__, a
 * tensor's or Parameter's Python attributes (an nn.Buffer's "persistent" and
 * "_is_buffer"; torch._tensor._rebuild_from_type_v2 and
 * torch._utils._rebuild_parameter_with_state: a dict of name to value); NULL
 * when it has none. Borrowed from the checkpoint. */
TSTOR_EXTERN const tstor_value *tstor_value_attributes(const tstor_value *v);
/* An OBJECT's class name ("nn.Linear"), its version as the file wrote it
 * ("1"; NULL for a file from before classes had versions) and its state, a
 * dict of the instance's fields; all borrowed. NULL for other kinds. */
TSTOR_EXTERN const char *tstor_value_object_class(const tstor_value *v);
TSTOR_EXTERN const char *tstor_value_object_version(const tstor_value *v);
TSTOR_EXTERN const tstor_value *tstor_value_object_state(const tstor_value *v);
/* The storage of a STORAGE value, borrowed, and (dtype not NULL) the dtype
 * PyTorch 2.x gives it, as to the tensors that view it: the class its
 * reference names (a storage the file names with two dtypes over as many
 * bytes is seen as each). NULL for other kinds. */
TSTOR_EXTERN tstor_storage *tstor_value_storage(const tstor_value *v, tstor_dtype *dtype);
/* 1 when the tensor was saved as a Parameter or with requires_grad. */
TSTOR_EXTERN int tstor_value_requires_grad(const tstor_value *v);

/* How a quantized tensor (torch.save's _rebuild_qtensor: a tensor of qint8,
 * quint8 or qint32 codes) maps its codes to numbers, x = (q - zero_point) *
 * scale: one scale and zero point for the tensor, or one per index along
 * `axis`. */
typedef struct tstor_qparams {
  /* "per_tensor_affine", "per_channel_affine" or
   * "per_channel_affine_float_qparams" (float zero points), as torch.load
   * makes it */
  const char *scheme;
  double scale;       /* per tensor */
  int64_t zero_point; /* per tensor */
  /* per channel: 1-dimensional tensors (or lists of numbers) of size[axis]
   * items, as the file holds them; torch takes them as float64 and int64,
   * or float32 and float32 for float_qparams */
  const tstor_value *scales, *zero_points;
  int64_t axis;
} tstor_qparams;
/* A quantized tensor's parameters into *out (borrowed from the checkpoint);
 * TSTOR_EINVAL, *out untouched, for any other value. */
TSTOR_EXTERN int tstor_value_qparams(const tstor_value *v, tstor_qparams *out);
/* The index (for tstor_checkpoint_storage) of the storage a tensor or a
 * QUANTIZED value views or a STORAGE value is; -1 for other kinds and for
 * meta tensors, which have no bytes in the file. */
TSTOR_EXTERN long tstor_value_storage_index(const tstor_value *v);

/* Typed reads, for values a file chose (GGUF metadata, a checkpoint's
 * hyperparameters): unlike the scalar reads above, a value of another kind
 * (or NULL) is TSTOR_EINVAL naming both kinds, and a number that does not
 * fit *out is TSTOR_ERANGE; *out is left as it was then. get_int64 and
 * get_uint64 read an INT (a GGUF integer of any width; a GGUF u64 above
 * INT64_MAX only through get_uint64), get_double a FLOAT, get_bool a BOOL,
 * get_string a STRING or BYTES value (*s borrowed, NUL-terminated; *len when
 * len is not NULL). */
TSTOR_EXTERN int tstor_value_get_bool(const tstor_value *v, int *out);
TSTOR_EXTERN int tstor_value_get_int64(const tstor_value *v, int64_t *out);
TSTOR_EXTERN int tstor_value_get_uint64(const tstor_value *v, uint64_t *out);
TSTOR_EXTERN int tstor_value_get_double(const tstor_value *v, double *out);
TSTOR_EXTERN int tstor_value_get_string(const tstor_value *v, const char **s, size_t *len);

/* ------------------------------------------------------ values by name */

/* The names tstor inspect prints, for finding a value and for walking them
 * all. Each value has two:
 *   dotted: dict string keys joined with '.', [i] for list and tuple items,
 *           [KEY] for other keys (an int, a float as Python prints it, True,
 *           None), NAME@ for an OrderedDict's attributes; "$" for the root:
 *           "model.layer1.weight", "history[2].w". What people write and
 *           safetensors files hold, but two values may share one
 *           ({"a.b": x} and {"a": {"b": y}}).
 *   exact:  every key a Python subscript, a string quoted and escaped as
 *           repr() writes it: "['model']['layer1.weight']", "['a.b']". Never
 *           shared, and holds no control character.
 * A value reached by several paths (a shared tensor) has a name for each; a
 * container met again is not walked again. Names take bytes: at most 16 for
 * each byte of the file the checkpoint was loaded from (64 MiB at least),
 * which a model never needs and a small file nesting long keys deep over a
 * value met many times would pass; past it a walk stops with TSTOR_ERANGE. */
typedef struct tstor_value_name {
  const char *dotted, *exact;
  const tstor_value *value;
  int container; /* a dict, list or tuple with items (TSTOR_VISIT_CONTAINERS) */
  int ambiguous; /* another value has the same dotted name: its exact one tells them apart */
} tstor_value_name;

/* What tstor_checkpoint_visit calls its function for, in bit order. */
typedef enum tstor_visit_flag {
  TSTOR_VISIT_TENSORS = 1 << 0,    /* tensors, a GGUF file's quantized ones too */
  TSTOR_VISIT_VALUES = 1 << 1,     /* every value that is not a container with items: tensors,
                                      numbers, strings, storages, objects, empty containers */
  TSTOR_VISIT_CONTAINERS = 1 << 2, /* dicts, lists and tuples with items */
} tstor_visit_flag;

/* What tstor_checkpoint_visit calls: 0 to go on; anything else stops the
 * walk and is its result. */
typedef int (*tstor_value_visitor)(void *arg, const tstor_value_name *name);

/* Calls fn(arg, name) for each value under ck's root that `what` selects, in
 * tree order (a dict's values in insertion order; a Torch7 object, then its
 * fields under its own name). The name is valid during the call. Returns fn's
 * first nonzero result; TSTOR_ERANGE after visiting every value named before
 * the names' bound was reached (see above). */
TSTOR_EXTERN int tstor_checkpoint_visit(const tstor_checkpoint *ck, unsigned what,
                                        tstor_value_visitor fn, void *arg);

/* *out, borrowed, gets the value `name` names under ck's root, dotted
 * ("model.fc.weight") or exact ("['model']['fc.weight']"). TSTOR_ENOENT when
 * none does; TSTOR_EINVAL when a dotted name is shared, the message giving
 * each value's exact name; TSTOR_ERANGE past the names' bound. */
TSTOR_EXTERN int tstor_checkpoint_find(const tstor_checkpoint *ck, const char *name,
                                       const tstor_value **out);

/* --------------------------------------------------- saving a checkpoint */

/* How every saver writes `path`: into a temporary file beside it, synced to
 * disk, then renamed over it, the folder synced after, so that neither a
 * failure nor a crash leaves an empty or partial file under the name. A
 * symbolic link at `path` is written through (its target replaced, the link
 * kept); an existing file keeps its permissions and, where the process may
 * set it, its owner; a path that is not a regular file (a FIFO, a device, a
 * directory) is refused with TSTOR_EINVAL, and so is a link whose target
 * cannot be resolved.
 *
 * Every saver takes a tstor_save_options (NULL: the defaults). Each format
 * reads the flags it has and refuses any other with TSTOR_EINVAL. */
typedef enum tstor_save_flag {
  /* safetensors: tensors that share a storage are written as copies, each
   * its own bytes, instead of being refused (the format has no sharing). */
  TSTOR_SAVE_COPY_SHARED = 1 << 0,
  /* Torch7: torch.save(f, x, 'ascii') */
  TSTOR_SAVE_TORCH7_ASCII = 1 << 1,
  /* Torch7: binary, DiskFile:bigEndianEncoding() */
  TSTOR_SAVE_TORCH7_BIG_ENDIAN = 1 << 2,
  /* Torch7: binary, 4-byte longs (DiskFile:longSize(4)) */
  TSTOR_SAVE_TORCH7_LONG4 = 1 << 3
} tstor_save_flag;

typedef struct tstor_save_options {
  size_t size;    /* sizeof(tstor_save_options): fields are only appended */
  unsigned flags; /* TSTOR_SAVE_*, as the format takes them */
} tstor_save_options;
/* The defaults, size filled in: `tstor_save_options o = TSTOR_SAVE_OPTIONS_INIT;
 * o.flags = TSTOR_SAVE_TORCH7_ASCII;`. */
#define TSTOR_SAVE_OPTIONS_INIT \
  { .size = sizeof(tstor_save_options), .flags = 0 }

/* torch.save's file-like targets, for every format: a save to an open stream
 * (written at its position, left open and unflushed: PyTorch's
 * torch.save(obj, f) for an open file), or to memory (*data from malloc, the
 * caller frees it; PyTorch's torch.save into a BytesIO). `format` is
 * TSTOR_FORMAT_TORCH, TSTOR_FORMAT_SAFETENSORS, TSTOR_FORMAT_TORCH7 or TSTOR_FORMAT_GGUF, opts'
 * flags the format's own (TSTOR_SAVE_COPY_SHARED, TSTOR_SAVE_TORCH7_*; none for torch and GGUF);
 * the legacy and tar formats are not written (TSTOR_ENOTSUP). tstor_checkpoint_save is
 * the same to a path, as the format's own save writes it. */
TSTOR_EXTERN int tstor_checkpoint_save(const tstor_checkpoint *ck, const char *path,
                                       tstor_file_format format, const tstor_save_options *opts);
TSTOR_EXTERN int tstor_checkpoint_save_stream(const tstor_checkpoint *ck, FILE *f,
                                              tstor_file_format format,
                                              const tstor_save_options *opts);
TSTOR_EXTERN int tstor_checkpoint_save_buffer(const tstor_checkpoint *ck, tstor_file_format format,
                                              const tstor_save_options *opts, void **data,
                                              size_t *size);

/* ------------------------------------------------------- building trees */

/* A new, empty checkpoint to build a tree in for saving. *out is freed with
 * tstor_checkpoint_free. */
TSTOR_EXTERN int tstor_checkpoint_new(tstor_checkpoint **out);

/* New values owned by ck (freed with it); *out is borrowed. kind is NONE,
 * TUPLE, LIST or DICT for tstor_value_new (empty containers). */
TSTOR_EXTERN int tstor_value_new(tstor_checkpoint *ck, tstor_value_kind kind, tstor_value **out);
TSTOR_EXTERN int tstor_value_new_bool(tstor_checkpoint *ck, int b, tstor_value **out);
TSTOR_EXTERN int tstor_value_new_int(tstor_checkpoint *ck, int64_t i, tstor_value **out);
TSTOR_EXTERN int tstor_value_new_float(tstor_checkpoint *ck, double d, tstor_value **out);
/* Copies `len` bytes at s, which must be UTF-8 (TSTOR_EINVAL otherwise). */
TSTOR_EXTERN int tstor_value_new_string(tstor_checkpoint *ck, const char *s, size_t len,
                                        tstor_value **out);
/* Copies `len` bytes at p, any bytes. */
TSTOR_EXTERN int tstor_value_new_bytes(tstor_checkpoint *ck, const void *p, size_t len,
                                       tstor_value **out);
/* An instance of Torch7 class `cls` (copied) of `version` (copied; NULL for
 * none) whose fields are the dict `state`, a value of ck. */
TSTOR_EXTERN int tstor_value_new_object(tstor_checkpoint *ck, const char *cls, const char *version,
                                        tstor_value *state, tstor_value **out);
/* Holds a new reference on t, dropped when ck is freed. */
TSTOR_EXTERN int tstor_value_new_tensor(tstor_checkpoint *ck, tstor_tensor *t,
                                        tstor_value **out);
/* A storage saved as itself, as dtype elements (its bytes must hold a whole
 * number of them); holds a new reference on s. Tensors on s and storage
 * values of s share one record when saved. */
TSTOR_EXTERN int tstor_value_new_storage(tstor_checkpoint *ck, tstor_storage *s, tstor_dtype dtype,
                                         tstor_value **out);
/* Appends item to a tuple or list; both belong to the same checkpoint. */
TSTOR_EXTERN int tstor_value_append(tstor_value *seq, tstor_value *item);
/* dict[key] = value: replaces the value of an equal key, else appends. Keys
 * are equal as in Python: 1, 1.0 and True are one key (the first one given
 * stays), as are 0.0 and -0.0; strings by their bytes; tensors and
 * containers by identity. */
TSTOR_EXTERN int tstor_value_dict_set(tstor_value *dict, tstor_value *key, tstor_value *value);
/* Sets the root that tstor_checkpoint_root returns (a value of ck). */
TSTOR_EXTERN int tstor_checkpoint_set_root(tstor_checkpoint *ck, tstor_value *root);

/* ------------------------------------------------------------ torch.save */

/* Loads the torch.save file at `path`: the zip format of PyTorch 1.6 and
 * later, the legacy format before it (told by its magic number, as
 * torch.load tells it), or the tar archive of PyTorch 0.1 before 0.1.10
 * (told by a tar header; its members as Python's tarfile finds them, the
 * last of a name). opts may be NULL (defaults). Regular files only. Every storage is
 * read into memory of its own (records on several threads at once), and the
 * file is closed on return; with TSTOR_LOAD_MMAP, cpu storages are mapped
 * where they can be (see there). Stored records' CRCs are checked with
 * TSTOR_LOAD_VERIFY_CRC only. Tensors that shared a storage in the file
 * share one tstor storage. *out is a new checkpoint the caller frees with
 * tstor_checkpoint_free. */
TSTOR_EXTERN int tstor_torch_load(tstor_context *ctx, const char *path,
                                  const tstor_load_options *opts, tstor_checkpoint **out);

/* The same from `size` bytes at `data`, which the caller keeps: storages are
 * read (copied), never mapped, unless TSTOR_LOAD_BORROW_BUFFER is given, in
 * which case cpu storages point into `data`, which must outlive them. `data`
 * is never written: the records of a big-endian file are copied to be
 * byteswapped, borrowed or not. */
TSTOR_EXTERN int tstor_torch_load_buffer(tstor_context *ctx, const void *data, size_t size,
                                         const tstor_load_options *opts, tstor_checkpoint **out);

/* Writes ck's root as torch.save would, in its zip format (PyTorch 1.13 reads
 * it with torch.load, weights_only=True unless the tree holds floats, which
 * 1.13's weights_only loader refuses): records stored uncompressed, 64-byte
 * aligned, one record per storage however many tensors view it, views keeping
 * their offsets and strides. Tensors on any device are copied to the host to
 * be written, as the section's opening says. ck stays the caller's. */
TSTOR_EXTERN int tstor_torch_save(const tstor_checkpoint *ck, const char *path,
                                  const tstor_save_options *opts);

/* ----------------------------------------------------------- safetensors */

/* Loads a safetensors file (the format of huggingface/safetensors) with the
 * format's own validation: an 8-byte little-endian header length of at most
 * 100,000,000, a UTF-8 JSON object (nested at most 127 deep, no key twice in
 * an object), the reference's 22 dtype names (BOOL, U8, I8, U16, I16, U32,
 * I32, U64, I64, F16, BF16, F32, F64, C64 as complex64, F8_E5M2, F8_E4M3 as
 * float8_e4m3fn, F8_E5M2FNUZ, F8_E4M3FNUZ, F8_E8M0 as float8_e8m0fnu; F4 as
 * float4_e2m1fn_x2 with the last dimension halved, as torch reads it; F6_E2M3,
 * F6_E3M2 and an F4 whose last dimension is odd or absent as their packed
 * bytes, tstor_safetensors_packed), fields other than dtype,
 * shape and data_offsets ignored as the reference ignores them, the element
 * count in bits within 64 and ending on a byte, shape x element size equal to each byte range,
 * ranges that lie inside the file and follow one another with no gap and no overlap up to its end,
 * and a __metadata__ object of strings only. The root is a dict of name -> tensor in file order;
 * each tensor has a storage of its own (the format has no sharing), read into memory, or with
 * TSTOR_LOAD_MMAP mapped from the file on cpu (copy-on-write) where aligned. *out as for
 * tstor_torch_load. */
TSTOR_EXTERN int tstor_safetensors_load(tstor_context *ctx, const char *path,
                                        const tstor_load_options *opts, tstor_checkpoint **out);
/* The same from memory (read; or borrowed with TSTOR_LOAD_BORROW_BUFFER). */
TSTOR_EXTERN int tstor_safetensors_load_buffer(tstor_context *ctx, const void *data, size_t size,
                                               const tstor_load_options *opts,
                                               tstor_checkpoint **out);

/* Writes ck's root, a dict of string -> tensor, as the reference writer
 * does: tensors sorted by dtype alignment (largest first) then name, the
 * header compact JSON with __metadata__ first, padded with spaces to a
 * multiple of 8, each tensor's elements in row-major order. Two tensors
 * viewing one storage are refused with TSTOR_EINVAL naming both (the format
 * has no sharing) unless opts has TSTOR_SAVE_COPY_SHARED. A tensor of a
 * dtype the format has no name for (complex32, complex128, bcomplex32, the
 * quantized and bits types) is refused with TSTOR_ENOTSUP naming it. Written
 * as the section's opening says. */
TSTOR_EXTERN int tstor_safetensors_save(const tstor_checkpoint *ck, const char *path,
                                        const tstor_save_options *opts);

/* A safetensors tensor tstor has no dtype for (F6_E2M3, F6_E3M2, and F4
 * whose last dimension is odd or absent) is loaded as its packed bytes: v, a
 * uint8 tensor of one dimension, holds the file's bytes unchanged. This gives
 * the format's dtype name (static) and shape, *ndim sizes into
 * sizes[TSTOR_TENSOR_MAX_DIM], which tstor_safetensors_save writes back.
 * TSTOR_ENOENT where v is not such a tensor of ck. */
TSTOR_EXTERN int tstor_safetensors_packed(const tstor_checkpoint *ck, const tstor_value *v,
                                          const char **dtype, int *ndim, int64_t *sizes);
/* Marks tensor value v of ck, a uint8 tensor, as the packed bytes of a
 * tensor of safetensors dtype `dtype` and the given shape (its bytes must be
 * that many), for tstor_safetensors_save. Copies sizes. */
TSTOR_EXTERN int tstor_safetensors_set_packed(tstor_checkpoint *ck, const tstor_value *v,
                                              const char *dtype, int ndim, const int64_t *sizes);

/* ---------------------------------------------------------------- Torch7 */

/* Loads a file Lua Torch wrote with torch.save / torch.File's writeObject,
 * binary or ascii, either byte order, 8- or 4-byte longs: all told from the
 * bytes (longs are 8 bytes unless the file's framing breaks under 8 and holds
 * under 4; a refusal of what the file says never leads to a second reading).
 * The tree: nil is None, a boolean bool, a number int where it is an integer
 * within 2^53 (not -0), else float; a string str where it is UTF-8, else
 * bytes; a table a dict with Lua's keys (true is not 1; a table may be a
 * key, by identity; a key written twice keeps its last value, as Torch7's
 * reader does); torch.<T>Storage a STORAGE value and torch.<T>Tensor a
 * tensor on it (Byte uint8, Char int8, Short int16, Int int32, Long int64,
 * Float float32, Double float64, Half float16; storageOffset made 0-based; an
 * empty tensor, nDimension 0, has shape [0]), and cutorch's
 * torch.Cuda<T>Storage and Tensor as their host type (torch.CudaTensor is
 * Float's), which is how cutorch writes them: onto the cpu, or where
 * map_location says; any other class (nn.Linear) an OBJECT with its name,
 * version and the dict of its fields. An ascii Float or Half element is
 * rounded once from its decimal, as Torch7's fscanf("%g") into a float does.
 * An object written twice is one value, and tensors that shared a storage
 * share one: a tree costs what its objects cost, however many paths lead
 * through them (an nngraph model has 10^17), and a walker that visits every
 * path must bound itself. Refused by name, and never run: Lua functions
 * (LuaJIT bytecode), classes with a write function of their own (tds.Hash,
 * tds.Vec) and a table that contains itself (TSTOR_EACCES, TSTOR_ENOTSUP,
 * TSTOR_EINVAL). Also refused: what Torch7 never writes (a reference to an
 * index not yet given, a nil or NaN table key, bytes after the object), and
 * what lies (counts and sizes the rest of the file cannot hold, a tensor past
 * its storage), before anything is allocated for it. Storages are read into
 * memory (the file is read, never mapped, so that one shrinking under the
 * load is an error, not SIGBUS), or with TSTOR_LOAD_MMAP mapped where they lie
 * aligned in a binary little-endian file; map_location as for
 * tstor_torch_load (the file says nothing: cpu). *out as for
 * tstor_torch_load. */
TSTOR_EXTERN int tstor_torch7_load(tstor_context *ctx, const char *path, const tstor_load_options *opts,
                                   tstor_checkpoint **out);
TSTOR_EXTERN int tstor_torch7_load_buffer(tstor_context *ctx, const void *data, size_t size,
                                          const tstor_load_options *opts, tstor_checkpoint **out);

/* A Lua nn module's parameters and buffers as a PyTorch state_dict: *out, a
 * new checkpoint whose root is a dict of name -> tensor (sharing ck's
 * tensors; free both) that loads into the equivalent PyTorch module with
 * load_state_dict(strict=True). ck's root must be the module (select it
 * first from a table, as tstor_checkpoint_find does). A container (any
 * module with a `modules` table: nn.Sequential, Concat, ConcatTable,
 * Parallel, DepthConcat, nngraph's gModule in forward order) names its
 * children by place from 0, parameter-less ones counted, as nn.Sequential:
 * "0.weight", "2.1.bias". Other modules give weight and bias, then
 * running_mean and running_var, where they are tensors with elements
 * (gradWeight, output and the other scratch tensors are left out);
 * SpatialConvolutionMM's 2-d weight becomes Conv2d's 4-d view of it.
 * TSTOR_EINVAL for a root that is no module; TSTOR_ENOTSUP for batch
 * normalization's old running_std. */
TSTOR_EXTERN int tstor_torch7_state_dict(const tstor_checkpoint *ck, tstor_checkpoint **out);

/* Writes ck's root as Torch7's torch.save does (binary, little-endian,
 * 8-byte longs unless opts' TSTOR_SAVE_TORCH7_* flags say otherwise), so that Lua Torch loads it:
 * the mapping above, the other way; a list or tuple becomes a table with keys 1 to n; a 0-dim
 * tensor one element of one dimension and an empty tensor Torch7's empty one; an OrderedDict's
 * attributes are dropped, and so is an entry whose value is None (a Lua table holds no nil; an
 * optimizer's state_dict has several). An object, tensor or storage met twice is written once
 * and referred to. A None dict key is refused (TSTOR_ENOTSUP).
 * Refused with TSTOR_ENOTSUP: dtypes Torch7 has no type for (bool, bfloat16, complex...);
 * TSTOR_ERANGE: an int beyond 2^53, a long beyond 4 bytes with
 * TSTOR_SAVE_TORCH7_LONG4. Written as the section on saving says. */
TSTOR_EXTERN int tstor_torch7_save(const tstor_checkpoint *ck, const char *path,
                                   const tstor_save_options *opts);

/* ------------------------------------------------------------------ GGUF */

/* Loads a GGUF file (llama.cpp's and ggml's model format), version 3 or 2
 * (which lay out alike; version 1 and big-endian files are refused with
 * TSTOR_ENOTSUP). The root is a dict of tensor name -> value in the file's
 * order, each with a storage of its own, read into memory, or with
 * TSTOR_LOAD_MMAP a copy-on-write view of the file (every tensor's bytes lie
 * aligned in it). Dimensions come in PyTorch's order: GGUF writes ggml's
 * ne[], the fastest-varying dimension first, and they are reversed, as the
 * gguf package's GGUFReader reverses them, so that a [4096, 11008] ne is a
 * tensor of sizes [11008, 4096]. The plain types are tensors of their dtype
 * (F32, F16, BF16, F64, I8, I16, I32, I64); every other ggml type is a
 * QUANTIZED value that keeps the file's blocks as they are (see below),
 * never refused for being quantized. The metadata is a dict of key -> value
 * (tstor_checkpoint_metadata), in file order: integers INT, floats FLOAT,
 * bool BOOL, strings STRING (BYTES where not UTF-8), arrays LIST; each
 * keeps its GGUF type (tstor_value_gguf_type).
 *
 * Refused with TSTOR_EINVAL (TSTOR_EOVERFLOW for a size whose product
 * overflows) and a message naming the offset of the item at fault, before
 * anything is allocated for it: counts and lengths the rest of the file
 * cannot hold, a value or element type that is none of GGUF's, an array of
 * arrays, a key or tensor name twice, or not UTF-8, general.alignment that is
 * not a u32 power of two, more than TSTOR_TENSOR_MAX_DIM dimensions, a ggml
 * type that is none of ggml's, a row that is no whole number of blocks, an
 * offset that is not a multiple of the alignment, a tensor whose bytes lie
 * past the file's end or overlap another's. So a file costs memory in
 * proportion to its size. map_location and *out as for tstor_torch_load. */
TSTOR_EXTERN int tstor_gguf_load(tstor_context *ctx, const char *path,
                                 const tstor_load_options *opts, tstor_checkpoint **out);
TSTOR_EXTERN int tstor_gguf_load_buffer(tstor_context *ctx, const void *data, size_t size,
                                        const tstor_load_options *opts, tstor_checkpoint **out);

/* Writes ck's root, a dict of string -> tensor or QUANTIZED value, as GGUF
 * version 3 with ck's metadata (a dict of string -> value, NULL for none):
 * the metadata and the tensors in dict order, each tensor's dimensions
 * reversed back into ggml's order, its bytes in row-major order at the next
 * multiple of general.alignment (32 when absent), zeros between, as the gguf
 * package's GGUFWriter writes a file. QUANTIZED values are written as their
 * blocks are, so that a GGUF file loaded and saved is the same file, byte
 * for byte, wherever it was laid out as GGUF's writers lay one out. A value
 * that carries a GGUF type is written with it; others: bool BOOL, int
 * INT64, float FLOAT64, str STRING, a list an ARRAY of its items' type
 * (all of one kind). Refused: dtypes GGUF has no type for (bool, uint8,
 * complex, float8: TSTOR_ENOTSUP), a tensor with no data (meta), metadata
 * GGUF cannot hold (None, a dict, bytes, nested lists: TSTOR_EINVAL).
 * Written as the section on saving says. */
TSTOR_EXTERN int tstor_gguf_save(const tstor_checkpoint *ck, const char *path,
                                 const tstor_save_options *opts);

/* The value types of GGUF metadata (ggml's enum gguf_type). */
typedef enum tstor_gguf_type {
  TSTOR_GGUF_UINT8 = 0,
  TSTOR_GGUF_INT8 = 1,
  TSTOR_GGUF_UINT16 = 2,
  TSTOR_GGUF_INT16 = 3,
  TSTOR_GGUF_UINT32 = 4,
  TSTOR_GGUF_INT32 = 5,
  TSTOR_GGUF_FLOAT32 = 6,
  TSTOR_GGUF_BOOL = 7,
  TSTOR_GGUF_STRING = 8,
  TSTOR_GGUF_ARRAY = 9,
  TSTOR_GGUF_UINT64 = 10,
  TSTOR_GGUF_INT64 = 11,
  TSTOR_GGUF_FLOAT64 = 12
} tstor_gguf_type;

/* The GGUF type v carries (read from a GGUF file, or given by
 * tstor_value_set_gguf_type), and for an ARRAY its elements' type in *elem
 * when elem is not NULL; -1 for a value that carries none. */
TSTOR_EXTERN int tstor_value_gguf_type(const tstor_value *v, tstor_gguf_type *elem);
/* Gives v the GGUF type a save writes it with: for a number, bool or string
 * one of that kind (an INT must fit the integer type: TSTOR_ERANGE; a FLOAT
 * given FLOAT32 is rounded when written); for a list, `type` is its
 * elements' type, given to each item as to a scalar (an empty list takes
 * it too). TSTOR_EINVAL for a type that does not hold v's kind. */
TSTOR_EXTERN int tstor_value_set_gguf_type(tstor_value *v, tstor_gguf_type type);

/* ggml's tensor types, by their ids (ggml.h's enum ggml_type): the gguf
 * package's name ("Q4_K", "BF16"), or NULL for an id that is no type;
 * the elements and bytes of one block (TSTOR_EINVAL for no type). */
TSTOR_EXTERN const char *tstor_ggml_type_name(int type);
TSTOR_EXTERN int tstor_ggml_type_block(int type, int64_t *block_size, int64_t *type_size);

/* A QUANTIZED value: its ggml type (-1 for other kinds), and its logical
 * sizes, in PyTorch's order (*sizes borrowed; the return is the number of
 * dimensions, -1 for other kinds). Its blocks are tstor_value_tensor's. */
TSTOR_EXTERN int tstor_value_ggml_type(const tstor_value *v);
TSTOR_EXTERN int tstor_value_quantized_shape(const tstor_value *v, const int64_t **sizes);
/* The values of a QUANTIZED value, decoded into a new contiguous cpu tensor
 * of its logical sizes and `dtype`: TSTOR_FLOAT32, bit for bit as the gguf
 * package's gguf.quants.dequantize decodes each type (and as ggml's
 * ggml-quants.c, for the types the package does not decode), or
 * TSTOR_FLOAT16 / TSTOR_BFLOAT16, those float32 values rounded to nearest
 * even. The same for a torch quantized tensor (tstor_value_qparams), its
 * float32 values bit for bit as torch's CPU dequantize() gives them. *out is
 * a new reference. TSTOR_EINVAL for another kind or dtype. */
TSTOR_EXTERN int tstor_value_dequantize(const tstor_value *v, tstor_dtype dtype,
                                        tstor_tensor **out);
/* Replaces every QUANTIZED value of ck's tree by a TENSOR of its values in
 * `dtype`, as tstor_value_dequantize gives them, each in place of its
 * storage record, and every torch quantized tensor by one on a record of its
 * own, so that the tree saves in any format. */
TSTOR_EXTERN int tstor_checkpoint_dequantize(tstor_checkpoint *ck, tstor_dtype dtype);
/* A new QUANTIZED value of ck, of ggml type `type` and logical `sizes` (ndim
 * of them, PyTorch's order), whose blocks are the bytes of `blocks`: a
 * contiguous uint8 tensor of as many bytes as the sizes take (its shape does
 * not matter; a reference is held on it). TSTOR_EINVAL for a plain or
 * unknown type, a last size that is no whole number of blocks, or bytes of
 * another count. */
TSTOR_EXTERN int tstor_value_new_quantized(tstor_checkpoint *ck, int type, int ndim,
                                           const int64_t *sizes, tstor_tensor *blocks,
                                           tstor_value **out);

#ifdef __cplusplus
}
#endif

#endif /* TSTOR_SERIALIZE_H */
