/* torch.save's rules for the pickle machine: which globals a file may name,
 * what its persistent ids refer to, and what REDUCE and BUILD may do. They
 * follow PyTorch's weights_only unpickler (torch/_weights_only_unpickler.py):
 * a fixed list of globals, each of which only builds data, and every other
 * global refused by name. A REDUCE is a lookup in that list, never a call. */
#include "io_internal.h"

#include <string.h>

#define FAIL(up, code, ...) tstor__io_unpickler_fail((up), (code), __VA_ARGS__)

/* ------------------------------------------------------------- globals */

/* A global of the rules' own, in the checkpoint being read. */
static int new_global(tstor__io_unpickler *up, int which, int dtype, tstor_value **out) {
  *out = tstor__io_value_global(tstor__io_unpickler_checkpoint(up), which, dtype);
  return *out ? 0 : TSTOR_ENOMEM;
}

/* Whether the n bytes at p are the string s. */
static bool same(const char *s, const char *p, size_t n) {
  return s && strlen(s) == n && memcmp(s, p, n) == 0;
}

/* The permitted globals, as "module.name": what torch.save writes for a
 * state_dict. Everything else is refused by name, as torch.load(weights_only=
 * True) refuses it. */
static int find_class(tstor__io_unpickler *up, const char *module, size_t mlen, const char *name,
                      size_t nlen, tstor_value **out) {
  static const struct {
    const char *module, *name;
    int which;
  } known[] = {
      {"collections", "OrderedDict", TSTOR__G_ORDEREDDICT},
      {"torch._utils", "_rebuild_tensor_v2", TSTOR__G_REBUILD_TENSOR_V2},
      {"torch._utils", "_rebuild_tensor_v3", TSTOR__G_REBUILD_TENSOR_V3},
      {"torch._utils", "_rebuild_tensor", TSTOR__G_REBUILD_TENSOR},
      {"torch._utils", "_rebuild_parameter", TSTOR__G_REBUILD_PARAMETER},
      {"torch._utils", "_rebuild_meta_tensor_no_storage", TSTOR__G_REBUILD_META},
      /* the other values PyTorch 2.x's weights_only loader builds; pickle's
       * protocol 2 names builtins "__builtin__", which torch maps */
      {"torch._utils", "_rebuild_parameter_with_state", TSTOR__G_REBUILD_PARAMETER_STATE},
      {"collections", "Counter", TSTOR__G_COUNTER},
      {"torch", "Size", TSTOR__G_SIZE},
      {"torch", "device", TSTOR__G_DEVICE},
      {"builtins", "set", TSTOR__G_SET},
      {"__builtin__", "set", TSTOR__G_SET},
      {"builtins", "bytearray", TSTOR__G_BYTEARRAY},
      {"__builtin__", "bytearray", TSTOR__G_BYTEARRAY},
      {"builtins", "complex", TSTOR__G_COMPLEX},
      {"__builtin__", "complex", TSTOR__G_COMPLEX},
      {"_codecs", "encode", TSTOR__G_ENCODE},
      /* a tensor with Python attributes: _rebuild_from_type_v2(func,
       * torch.Tensor, args, state), and the classes it may make */
      {"torch._tensor", "_rebuild_from_type_v2", TSTOR__G_REBUILD_FROM_TYPE},
      {"torch", "Tensor", TSTOR__G_TENSOR_TYPE},
      {"torch.nn.parameter", "Parameter", TSTOR__G_PARAMETER_TYPE},
      /* a quantized tensor, and its quantization schemes */
      {"torch._utils", "_rebuild_qtensor", TSTOR__G_REBUILD_QTENSOR},
  };
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (same(known[i].module, module, mlen) && same(known[i].name, name, nlen))
      return new_global(up, known[i].which, -1, out);
  /* what PyTorch 2.x's weights_only loader reads and tstor does not, named */
  static const struct {
    const char *module, *name, *what;
  } unread[] = {
      {"torch._utils", "_rebuild_sparse_tensor", "a sparse tensor (save it as .to_dense())"},
      {"torch.serialization", "_get_layout", "a sparse tensor's layout (save it as .to_dense())"},
      {"torch._utils", "_rebuild_wrapper_subclass",
       "a tensor subclass without storage (a wrapper subclass)"},
      {"torch._utils", "_rebuild_device_tensor_from_cpu_tensor",
       "a tensor of a device without storage, saved through the cpu (save it as .cpu())"},
      {"torch._utils", "_rebuild_device_tensor_from_numpy",
       "a tensor of a device without storage, saved through numpy (save it as .cpu())"},
  };
  for (size_t i = 0; i < sizeof unread / sizeof unread[0]; i++)
    if (same(unread[i].module, module, mlen) && same(unread[i].name, name, nlen))
      return FAIL(up, TSTOR_ENOTSUP,
                  "global '%s.%s', %s: tstor reads strided tensors with storages only",
                  unread[i].module, unread[i].name, unread[i].what);
  bool torch = same("torch", module, mlen);
  for (int q = 0; torch && q < TSTOR__QSCHEME_END; q++)
    if (same(tstor__io_qscheme_names[q], name, nlen))
      return new_global(up, TSTOR__G_QSCHEME, q, out);
  /* PyTorch 2.x's class for the storage of a dtype with no storage class of
   * its own (float8, uint16...): bytes, which _rebuild_tensor_v3 views as
   * its dtype; torch.load takes it as a uint8 storage of numel bytes */
  if (same("torch.storage", module, mlen) && same("UntypedStorage", name, nlen))
    return new_global(up, TSTOR__G_STORAGE_CLASS, TSTOR_UINT8, out);
  /* torch.FloatStorage and the other typed storage classes */
  char buf[64];
  if (torch && nlen > 7 && nlen < sizeof buf && memcmp(name + nlen - 7, "Storage", 7) == 0) {
    memcpy(buf, name, nlen);
    buf[nlen] = '\0';
    tstor_dtype dt;
    if (tstor_dtype_parse(buf, &dt) == 0)
      return new_global(up, TSTOR__G_STORAGE_CLASS, (int)dt, out);
  }
  /* torch.float32 and the other dtypes, by the names torch has for them */
  for (int d = 0; torch && d < TSTOR_DTYPE_END; d++) {
    const tstor_dtype_info *info = tstor_dtype_info_of((tstor_dtype)d);
    if (info && (same(info->name, name, nlen) || same(info->alias, name, nlen)))
      return new_global(up, TSTOR__G_DTYPE, d, out);
  }
  return FAIL(
      up, TSTOR_EACCES,
      "global '%.*s.%.*s' is refused: only torch.save's weights are read "
      "(torch._utils._rebuild_tensor_v2/_v3/_rebuild_parameter/_with_state/"
      "_rebuild_meta_tensor_no_storage, torch.*Storage, torch.storage.UntypedStorage, torch's "
      "dtypes, collections.OrderedDict/Counter, torch.Size, torch.device, set, bytearray, "
      "complex, _codecs.encode, torch._tensor._rebuild_from_type_v2, torch.Tensor, "
      "torch.nn.parameter.Parameter, torch._utils._rebuild_qtensor and its schemes), as "
      "torch.load(weights_only=True) of PyTorch 2.x reads them",
      (int)(mlen > 200 ? 200 : mlen), module, (int)(nlen > 200 ? 200 : nlen), name);
}

/* The storage or tensor class module.name names, for the tar format's
 * headers: torch.FloatStorage (as normalize_storage_type wrote them) and
 * torch.FloatTensor or torch.cuda.FloatTensor (the tensor's own type). */
static int find_class_header(tstor__io_unpickler *up, const char *module, size_t mlen,
                             const char *name, size_t nlen, tstor_value **out) {
  static const char *const kinds[] = {"Storage", "Tensor"};
  char buf[64];
  bool torch = same("torch", module, mlen) || same("torch.cuda", module, mlen);
  for (int k = 0; k < 2 && torch; k++) {
    size_t klen = strlen(kinds[k]);
    if (nlen <= klen || nlen - klen + 7 >= sizeof buf ||
        memcmp(name + nlen - klen, kinds[k], klen) != 0)
      continue;
    memcpy(buf, name, nlen - klen);
    memcpy(buf + nlen - klen, "Storage", 8);
    tstor_dtype dt;
    if (tstor_dtype_parse(buf, &dt) == 0)
      return new_global(up, k ? TSTOR__G_TENSOR_CLASS : TSTOR__G_STORAGE_CLASS, (int)dt, out);
  }
  return FAIL(up, TSTOR_EACCES,
              "global '%.*s.%.*s' is refused: a storage's or tensor's header names its class "
              "(torch.FloatStorage, torch.FloatTensor, torch.cuda.FloatTensor...) and nothing else",
              (int)(mlen > 200 ? 200 : mlen), module, (int)(nlen > 200 ? 200 : nlen), name);
}

/* ------------------------------------------------------ persistent ids */

static int is_str(const tstor_value *v, const char *s) {
  return v->kind == TSTOR_VALUE_STRING && same(s, v->u.str.s, v->u.str.len);
}

/* A storage key the file names, checked once: torch.save's zip format makes
 * it a record name (data/KEY), so no path may hide in it. */
static int key_ok(tstor__io_unpickler *up, const tstor_value *key) {
  if (key->kind != TSTOR_VALUE_STRING) return FAIL(up, TSTOR_EINVAL, "a storage's key must be a string");
  if (!key->u.str.len || memchr(key->u.str.s, '/', key->u.str.len) || memchr(key->u.str.s, '\0', key->u.str.len) ||
      is_str(key, ".") || is_str(key, ".."))
    return FAIL(up, TSTOR_EINVAL, "storage key '%.*s' is not a record name",
                (int)(key->u.str.len > 100 ? 100 : key->u.str.len), key->u.str.s);
  return 0;
}

/* The empty storage of `dtype` that the legacy format's key of record
 * `idx` gives an id of another dtype and size: a view of none of the root's
 * bytes, a new one for each such id as in torch.load, recorded as
 * "KEY/DTYPE/INDEX". */
static int empty_alias(tstor__io_unpickler *up, long idx, tstor_dtype dtype, long *out) {
  tstor_checkpoint *ck = tstor__io_unpickler_checkpoint(up);
  long root = ck->storages[idx].view_of >= 0 ? ck->storages[idx].view_of : idx;
  int rc = tstor__io_record_add_derived(ck, idx, tstor_dtype_name(dtype), dtype, 0,
                                        ck->storages[root].location, out);
  if (!rc) {
    ck->storages[*out].view_of = root;
    ck->storages[*out].view_offset = 0;
  }
  return rc;
}

/* The storage `key` of `count` elements of the class's dtype at `location`:
 * the first persistent id that names a key gives its size and location, and
 * its dtype to the ids that name the key again with that dtype. An id of
 * another dtype over as many bytes views the same bytes as its own dtype,
 * as torch.load of PyTorch 2.x reads it (1.13 gave it the first dtype).
 * Over another number of bytes, 2.x loads the record again with the new
 * size, which its size check then refuses (the zip format), or gives it a
 * fresh empty storage (the legacy format, `legacy`): here a view of none of
 * the root's bytes, so that a tensor with elements on it does not fit.
 * *idx gets the index in ck->storages, *dtype the dtype the id sees. */
static int storage_named(tstor__io_unpickler *up, tstor_value *cls, tstor_value *key,
                         tstor_value *location, tstor_value *count, bool legacy, long *idx,
                         tstor_dtype *dtype) {
  tstor_checkpoint *ck = tstor__io_unpickler_checkpoint(up);
  if (cls->kind != TSTOR__VALUE_GLOBAL || cls->u.global.which != TSTOR__G_STORAGE_CLASS)
    return FAIL(up, TSTOR_EINVAL, "a storage's class must be a torch.*Storage");
  int rc = key_ok(up, key);
  if (rc) return rc;
  tstor_dtype dt = (tstor_dtype)cls->u.global.dtype;
  *dtype = dt;
  bool sized = count->kind == TSTOR_VALUE_INT && count->u.i >= 0 &&
               (uint64_t)count->u.i <= (uint64_t)INT64_MAX / tstor_dtype_size(dt);
  uint64_t nbytes = sized ? (uint64_t)count->u.i * tstor_dtype_size(dt) : 0;
  if ((*idx = tstor__io_record_find(ck, key->u.str.s, key->u.str.len)) >= 0) {
    const tstor__io_record *r = &ck->storages[*idx];
    uint64_t first = (uint64_t)r->numel * tstor_dtype_size(r->dtype);
    if (r->dtype == dt || (sized && nbytes == first)) return 0;
    if (!legacy)
      return FAIL(up, TSTOR_EINVAL,
                  "storage '%s' is named as %lld %s elements (%llu bytes) and again as %s of "
                  "another size: one record cannot hold both (torch.load's record size check)",
                  r->key, (long long)r->numel, tstor_dtype_name(r->dtype),
                  (unsigned long long)first, tstor_dtype_name(dt));
    return empty_alias(up, *idx, dt, idx);
  }
  if (!sized && count->kind == TSTOR_VALUE_INT && count->u.i >= 0)
    return FAIL(up, TSTOR_EOVERFLOW, "storage '%s' of %lld %s elements: the byte size overflows",
                key->u.str.s, (long long)count->u.i, tstor_dtype_name(dt));
  if (!sized) return FAIL(up, TSTOR_EINVAL, "a storage's size must be a non-negative int");
  /* A location that is no string is kept as "": torch.load ignores it under
   * a map_location, and the loader refuses it without one. */
  int named = location->kind == TSTOR_VALUE_STRING;
  return tstor__io_record_add(ck, key->u.str.s, key->u.str.len, dt, count->u.i,
                              named ? location->u.str.s : "", named ? location->u.str.len : 0, idx);
}

static int storage_value(tstor__io_unpickler *up, long idx, tstor_dtype dtype, tstor_value **out) {
  tstor_value *s = tstor__io_unpickler_value(up, TSTOR_VALUE_STORAGE);
  if (!s) return TSTOR_ENOMEM;
  s->u.tensor.storage = idx;
  s->u.tensor.dtype = (int)dtype;
  *out = s;
  return 0;
}

/* ('storage', storage_class, key, location, numel): torch.save's reference to
 * the record data/KEY. */
static int persistent_load(tstor__io_unpickler *up, tstor_value *pid, tstor_value **out) {
  if (pid->kind != TSTOR_VALUE_TUPLE || pid->u.seq.n != 5)
    return FAIL(up, TSTOR_EINVAL, "a persistent id must be the 5-tuple ('storage', class, key, location, numel)");
  tstor_value **f = pid->u.seq.items;
  if (!is_str(f[0], "storage")) return FAIL(up, TSTOR_EACCES, "only persistent ids of storages are allowed");
  long idx;
  tstor_dtype dt;
  int rc = storage_named(up, f[1], f[2], f[3], f[4], false, &idx, &dt);
  return rc ? rc : storage_value(up, idx, dt, out);
}

/* ('storage', storage_class, root_key, location, numel, view_metadata): the
 * legacy format's reference to a storage whose bytes follow the pickles,
 * keyed by the root's key; view_metadata, None since PyTorch 0.4, else
 * (view_key, offset, size), names a part of the root that its tensors view.
 * As _legacy_load reads it, the view is of this id's class, whatever class
 * first named the root, and its offset and size count that class's
 * elements. */
static int persistent_load_legacy(tstor__io_unpickler *up, tstor_value *pid, tstor_value **out) {
  if (pid->kind != TSTOR_VALUE_TUPLE || pid->u.seq.n < 1 || !is_str(pid->u.seq.items[0], "storage"))
    return FAIL(up, TSTOR_EACCES, "only persistent ids of storages are allowed");
  if (pid->u.seq.n != 6)
    return FAIL(up, TSTOR_EINVAL,
                "a persistent id must be the 6-tuple ('storage', class, key, location, numel, view_metadata)");
  tstor_value **f = pid->u.seq.items;
  long root;
  tstor_dtype dt;
  int rc = storage_named(up, f[1], f[2], f[3], f[4], true, &root, &dt);
  if (rc || f[5]->kind == TSTOR_VALUE_NONE) return rc ? rc : storage_value(up, root, dt, out);
  tstor_value *vm = f[5];
  tstor_checkpoint *ck = tstor__io_unpickler_checkpoint(up);
  if (vm->kind != TSTOR_VALUE_TUPLE || vm->u.seq.n != 3 || vm->u.seq.items[1]->kind != TSTOR_VALUE_INT ||
      vm->u.seq.items[2]->kind != TSTOR_VALUE_INT || vm->u.seq.items[1]->u.i < 0 || vm->u.seq.items[2]->u.i < 0)
    return FAIL(up, TSTOR_EINVAL, "a storage's view_metadata must be None or (key, offset, size), both non-negative");
  tstor_value *vkey = vm->u.seq.items[0];
  if ((rc = key_ok(up, vkey))) return rc;
  long view = tstor__io_record_find(ck, vkey->u.str.s, vkey->u.str.len);
  if (view < 0) {
    const tstor__io_record *r = &ck->storages[root];
    bool empty = r->view_of >= 0 && r->numel == 0; /* whose every slice is empty */
    if (r->view_of >= 0 && !empty)
      return FAIL(up, TSTOR_EINVAL, "storage '%s' is a view, and views have no views", r->key);
    uint64_t es = tstor_dtype_size(dt), bytes = (uint64_t)r->numel * tstor_dtype_size(r->dtype);
    uint64_t off = (uint64_t)vm->u.seq.items[1]->u.i, n = (uint64_t)vm->u.seq.items[2]->u.i;
    long base = empty ? r->view_of : root;
    if (empty)
      off = n = 0;
    else if (off > bytes / es || n > (bytes - off * es) / es)
      return FAIL(up, TSTOR_ERANGE,
                  "view '%s' of %llu %s elements at %llu lies past storage '%s' of %llu bytes",
                  vkey->u.str.s, (unsigned long long)n, tstor_dtype_name(dt),
                  (unsigned long long)off, r->key, (unsigned long long)bytes);
    if ((rc = tstor__io_record_add(ck, vkey->u.str.s, vkey->u.str.len, dt, (int64_t)n, r->location,
                                   strlen(r->location), &view)))
      return rc;
    ck->storages[view].view_of = base;
    ck->storages[view].view_offset = (int64_t)off;
  }
  return storage_value(up, view, ck->storages[view].dtype, out);
}

/* The tar format's persistent ids: a storage's or a tensor's key (the
 * address PyTorch 0.1 gave it), as a string _legacy_load reads with
 * int(saved_id), found in the keymap of the rules' state; or a module class
 * with its source file and source, (class, file, source), which torch.load
 * would import and check, refused. */
static int persistent_load_tar(tstor__io_unpickler *up, tstor_value *pid, tstor_value **out) {
  int64_t key = 0;
  int rc = 0;
  switch (pid->kind) {
    case TSTOR_VALUE_TUPLE:
      return FAIL(
          up, TSTOR_EACCES,
          "a module class as a persistent id ((class, file, source) of a saved nn.Module) is "
          "refused: only weights are read");
    case TSTOR_VALUE_STRING:
      rc = tstor__io_parse_int(pid->u.str.s, pid->u.str.len, 10, &key);
      break;
    case TSTOR_VALUE_INT:
    case TSTOR_VALUE_BOOL: key = pid->u.i; break;
    default: rc = TSTOR_EINVAL; break;
  }
  if (rc)
    return FAIL(
        up, rc, "a persistent id that is no storage or tensor key (int(saved_id) of a %s%s%.*s)",
        tstor_value_kind_name((tstor_value_kind)pid->kind),
        pid->kind == TSTOR_VALUE_STRING ? " " : "",
        pid->kind == TSTOR_VALUE_STRING ? (int)(pid->u.str.len > 40 ? 40 : pid->u.str.len) : 0,
        pid->kind == TSTOR_VALUE_STRING ? pid->u.str.s : "");
  tstor_value *v = tstor__io_keymap_get(tstor__io_unpickler_state(up), key);
  if (!v)
    return FAIL(up, TSTOR_EINVAL,
                "persistent id %lld is no key of the members 'storages' and 'tensors'",
                (long long)key);
  *out = v;
  return 0;
}

/* ------------------------------------------------------------- REDUCE */

static int int_tuple(tstor__io_unpickler *up, const tstor_value *t, const char *what, int64_t *out,
                     int *n) {
  if (t->kind != TSTOR_VALUE_TUPLE) return FAIL(up, TSTOR_EINVAL, "a tensor's %s must be a tuple of ints", what);
  if (t->u.seq.n > TSTOR_TENSOR_MAX_DIM)
    return FAIL(up, TSTOR_EINVAL, "a tensor of %zu dimensions (at most %d)", t->u.seq.n, TSTOR_TENSOR_MAX_DIM);
  for (size_t i = 0; i < t->u.seq.n; i++) {
    const tstor_value *v = t->u.seq.items[i];
    if (v->kind != TSTOR_VALUE_INT || v->u.i < 0)
      return FAIL(up, TSTOR_EINVAL, "a tensor's %s must be non-negative ints", what);
    out[i] = v->u.i;
  }
  *n = (int)t->u.seq.n;
  return 0;
}

/* A tensor value with room for ndim sizes and strides. */
static tstor_value *new_tensor(tstor__io_unpickler *up, size_t ndim) {
  tstor_value *t = tstor__io_unpickler_value(up, TSTOR_VALUE_TENSOR);
  if (!t) return NULL;
  if (!(t->u.tensor.sizes = tstor__io_malloc((2 * ndim + 1) * sizeof(int64_t)))) {
    TSTOR__ERR(TSTOR_ENOMEM, "pickle: out of memory for a tensor of %zu dimensions", ndim);
    return NULL;
  }
  t->u.tensor.strides = t->u.tensor.sizes + ndim;
  return t;
}

/* Sizes and strides from two tuples whose lengths are checked equal and
 * bounded before either is copied: the tensor holds exactly that many. */
static int layout_of(tstor__io_unpickler *up, const tstor_value *sizes, const tstor_value *strides,
                     tstor_value **out) {
  for (int k = 0; k < 2; k++)
    if ((k ? strides : sizes)->kind != TSTOR_VALUE_TUPLE)
      return FAIL(up, TSTOR_EINVAL, "a tensor's %s must be a tuple of ints", k ? "stride" : "size");
  size_t ndim = sizes->u.seq.n;
  if (strides->u.seq.n != ndim)
    return FAIL(up, TSTOR_EINVAL, "a tensor of %zu sizes and %zu strides", ndim, strides->u.seq.n);
  tstor_value *t = new_tensor(up, ndim > TSTOR_TENSOR_MAX_DIM ? TSTOR_TENSOR_MAX_DIM : ndim);
  if (!t) return TSTOR_ENOMEM;
  int nsz, nst;
  int rc = int_tuple(up, sizes, "size", t->u.tensor.sizes, &nsz);
  if (!rc) rc = int_tuple(up, strides, "stride", t->u.tensor.strides, &nst);
  if (rc) return rc;
  t->u.tensor.ndim = nsz;
  *out = t;
  return 0;
}

/* Python's truth of a value, where the unpickler can know it: a tensor's
 * (which needs its elements) and a global's (always true) are not asked. */
static bool truthy(const tstor_value *v) {
  switch (v->kind) {
    case TSTOR_VALUE_NONE: return false;
    case TSTOR_VALUE_BOOL:
    case TSTOR_VALUE_INT: return v->u.i != 0;
    case TSTOR_VALUE_FLOAT: return v->u.f != 0.0;
    case TSTOR_VALUE_COMPLEX: return v->u.c[0] != 0.0 || v->u.c[1] != 0.0;
    case TSTOR_VALUE_STRING:
    case TSTOR_VALUE_BYTES: return v->u.str.len != 0;
    case TSTOR_VALUE_TUPLE:
    case TSTOR_VALUE_LIST:
    case TSTOR_VALUE_SET:
    case TSTOR_VALUE_DICT: return v->u.seq.n != 0;
    default: return true;
  }
}

/* A tensor's metadata, the last argument of _rebuild_tensor_v2/_v3, as
 * torch.load of 2.x takes it: nothing when it is false (None, {}, (), 0...),
 * else a dict of str to a value a C++ bool converts from (bool, int,
 * float, complex, None) whose keys "conj" and "neg" set the tensor's
 * conjugate and negative bits, whatever their values (torch.save writes
 * {'conj': True} for x.conj() and {'neg': True} for a negative view).
 * tstor keeps no such bits: those tensors are refused rather than read as
 * the bytes they view. */
static int tensor_metadata(tstor__io_unpickler *up, const tstor_value *md, tstor_dtype dtype) {
  if (md->kind != TSTOR_VALUE_DICT && md->kind != TSTOR_VALUE_TENSOR && !truthy(md)) return 0;
  if (md->kind != TSTOR_VALUE_DICT)
    return FAIL(
        up, TSTOR_EINVAL, "a tensor's metadata must be a dict (torch.load: expected dict, got %s)",
        md->kind == TSTOR__VALUE_GLOBAL ? "a class or function"
                                        : tstor_value_kind_name((tstor_value_kind)md->kind));
  for (size_t i = 0; i < md->u.seq.n; i++) {
    const tstor_value *k = md->u.seq.keys[i], *v = md->u.seq.items[i];
    if (k->kind != TSTOR_VALUE_STRING)
      return FAIL(up, TSTOR_EINVAL, "a tensor's metadata must have str keys");
    if (v->kind != TSTOR_VALUE_BOOL && v->kind != TSTOR_VALUE_INT && v->kind != TSTOR_VALUE_FLOAT &&
        v->kind != TSTOR_VALUE_COMPLEX && v->kind != TSTOR_VALUE_NONE)
      return FAIL(up, TSTOR_EINVAL, "a tensor's metadata '%.*s' must be a bool, not a %s",
                  (int)(k->u.str.len > 100 ? 100 : k->u.str.len), k->u.str.s,
                  tstor_value_kind_name((tstor_value_kind)v->kind));
    bool conj = is_str(k, "conj");
    if (conj && tstor_dtype_info_of(dtype)->kind != TSTOR_KIND_COMPLEX)
      return FAIL(up, TSTOR_EINVAL,
                  "a %s tensor saved as conjugate (metadata 'conj'): only complex tensors have a "
                  "conjugate bit",
                  tstor_dtype_name(dtype));
    if (conj || is_str(k, "neg"))
      return FAIL(
          up, TSTOR_ENOTSUP,
          "a tensor saved as a %s view (metadata '%s'): tstor keeps no %s bit, and its bytes are "
          "not its values (save it after .%s())",
          conj ? "conjugate" : "negative", conj ? "conj" : "neg", conj ? "conjugate" : "negative",
          conj ? "resolve_conj" : "resolve_neg");
  }
  return 0;
}

/* _rebuild_tensor(storage, offset, size, stride) (version 1),
 * _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[,
 * metadata]) (2) and PyTorch 2.x's _rebuild_tensor_v3(storage, offset, size,
 * stride, requires_grad, hooks, dtype[, metadata]) (3), which views the
 * storage's bytes as `dtype` whatever class named the storage, the offset,
 * sizes and strides counting elements of that dtype. */
static int rebuild_tensor(tstor__io_unpickler *up, tstor_value **args, size_t nargs, int version,
                          tstor_value **out) {
  static const char *const names[] = {"", "_rebuild_tensor", "_rebuild_tensor_v2",
                                      "_rebuild_tensor_v3"};
  static const char *const counts[] = {"", "4", "6 or 7", "7 or 8"};
  size_t min = version == 1 ? 4 : version == 2 ? 6 : 7, max = version == 1 ? 4 : min + 1;
  if (nargs < min || nargs > max)
    return FAIL(up, TSTOR_EINVAL, "%s takes %s arguments, not %zu", names[version], counts[version],
                nargs);
  if (args[0]->kind != TSTOR_VALUE_STORAGE) return FAIL(up, TSTOR_EINVAL, "a tensor's first argument must be a storage");
  if (args[1]->kind != TSTOR_VALUE_INT || args[1]->u.i < 0)
    return FAIL(up, TSTOR_EINVAL, "a tensor's storage offset must be a non-negative int");
  if (version == 3 &&
      (args[6]->kind != TSTOR__VALUE_GLOBAL || args[6]->u.global.which != TSTOR__G_DTYPE))
    return FAIL(up, TSTOR_EINVAL, "_rebuild_tensor_v3's dtype must be a torch dtype");
  tstor_value *t = NULL;
  int rc = layout_of(up, args[2], args[3], &t);
  if (rc) return rc;
  t->u.tensor.storage = args[0]->u.tensor.storage;
  t->u.tensor.dtype = version == 3 ? args[6]->u.global.dtype : args[0]->u.tensor.dtype;
  t->u.tensor.offset = args[1]->u.i;
  if (version >= 2) {
    if (args[4]->kind != TSTOR_VALUE_BOOL) return FAIL(up, TSTOR_EINVAL, "a tensor's requires_grad must be a bool");
    t->requires_grad = (unsigned char)args[4]->u.i;
    /* torch.load cannot rebuild it: v3 calls set_ on a fresh leaf that
     * requires grad, which PyTorch 2.x refuses (the file, not the tensor) */
    if (version == 3 && t->requires_grad)
      return FAIL(up, TSTOR_EINVAL,
                  "_rebuild_tensor_v3 with requires_grad=True: torch.load cannot rebuild it "
                  "(set_ on a leaf that requires grad)");
    /* args[5], the backward hooks (an empty OrderedDict; None where old
     * releases wrote none), is dropped: torch.load of 2.x assigns whatever
     * it is to _backward_hooks, which takes any object (1.13 refused what
     * was no dict) */
    if (nargs == max && (rc = tensor_metadata(up, args[max - 1], (tstor_dtype)t->u.tensor.dtype)))
      return rc;
  }
  *out = t;
  return 0;
}

const char *const tstor__io_qscheme_names[TSTOR__QSCHEME_END] = {
    "per_tensor_affine", "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
    "per_channel_affine_float_qparams"};

/* The per-channel scales or zero points of a quantized tensor of `channels`
 * channels: a 1-dimensional tensor (of floats for scales) or a list of
 * numbers, *floating set when they are floats. */
static int channel_params(tstor__io_unpickler *up, const tstor_value *v, bool scales,
                          int64_t channels, bool *floating) {
  const char *what = scales ? "scales" : "zero_points";
  int64_t n;
  if (v->kind == TSTOR_VALUE_LIST) {
    n = (int64_t)v->u.seq.n;
    *floating = false;
    for (size_t i = 0; i < v->u.seq.n; i++) {
      int k = v->u.seq.items[i]->kind;
      if (k != TSTOR_VALUE_INT && k != TSTOR_VALUE_BOOL && k != TSTOR_VALUE_FLOAT)
        return FAIL(up, TSTOR_EINVAL, "a quantized tensor's %s must be numbers", what);
    }
  } else if (v->kind == TSTOR_VALUE_TENSOR) {
    if (v->u.tensor.ndim != 1)
      return FAIL(up, TSTOR_EINVAL, "a quantized tensor's %s tensor must have dimension 1", what);
    n = v->u.tensor.sizes[0];
    tstor_dtype_kind kind = tstor_dtype_info_of((tstor_dtype)v->u.tensor.dtype)->kind;
    *floating = kind == TSTOR_KIND_FLOAT;
    if (!*floating && ((kind != TSTOR_KIND_SIGNED && kind != TSTOR_KIND_UNSIGNED) || scales))
      return FAIL(up, TSTOR_EINVAL, "a quantized tensor's %s tensor must be %s, not %s", what,
                  scales ? "floating point" : "integers or floating point",
                  tstor_dtype_name((tstor_dtype)v->u.tensor.dtype));
  } else {
    return FAIL(up, TSTOR_EINVAL, "a quantized tensor's %s must be a tensor or a list", what);
  }
  if (n != channels)
    return FAIL(up, TSTOR_EINVAL,
                "a quantized tensor's %s number %lld, not size[axis] = %lld (_rebuild_qtensor)",
                what, (long long)n, (long long)channels);
  return 0;
}

/* _rebuild_qtensor(storage, offset, size, stride, quantizer_params,
 * requires_grad, hooks): a tensor of a quantized dtype (its storage's: the
 * integer codes) with (per_tensor_affine, scale, zero_point) or
 * (per_channel_affine or _float_qparams, scales, zero_points, axis), kept
 * as the tensor's quantizer with the scheme torch.load makes of it: per
 * channel, float zero points make it per_channel_affine_float_qparams
 * (torch.save writes per_channel_affine for both). tstor keeps the scales
 * and zero points as the file gives them; torch converts them to float64
 * and int64, or float32 and float32. */
static int rebuild_qtensor(tstor__io_unpickler *up, tstor_value **args, size_t nargs,
                           tstor_value **out) {
  if (nargs != 7)
    return FAIL(up, TSTOR_EINVAL, "_rebuild_qtensor takes 7 arguments, not %zu", nargs);
  if (args[0]->kind != TSTOR_VALUE_STORAGE)
    return FAIL(up, TSTOR_EINVAL, "a tensor's first argument must be a storage");
  tstor_dtype dt = (tstor_dtype)args[0]->u.tensor.dtype;
  if (tstor_dtype_info_of(dt)->kind != TSTOR_KIND_QUANTIZED)
    return FAIL(up, TSTOR_EINVAL,
                "a quantized tensor over a %s storage: creation of quantized tensor requires "
                "quantized dtype like torch.quint8",
                tstor_dtype_name(dt));
  if (dt == TSTOR_QUINT4X2 || dt == TSTOR_QUINT2X4)
    return FAIL(up, TSTOR_ENOTSUP,
                "a %s tensor: tstor does not read quantized tensors of packed sub-byte codes",
                tstor_dtype_name(dt));
  if (args[1]->kind != TSTOR_VALUE_INT || args[1]->u.i < 0)
    return FAIL(up, TSTOR_EINVAL, "a tensor's storage offset must be a non-negative int");
  if (args[5]->kind != TSTOR_VALUE_BOOL)
    return FAIL(up, TSTOR_EINVAL, "a tensor's requires_grad must be a bool");
  if (args[5]->u.i)
    return FAIL(up, TSTOR_EINVAL,
                "a quantized tensor that requires grad: only tensors of floating point "
                "dtype can require gradients");
  const tstor_value *qp = args[4];
  if (qp->kind != TSTOR_VALUE_TUPLE || qp->u.seq.n < 1 ||
      qp->u.seq.items[0]->kind != TSTOR__VALUE_GLOBAL ||
      qp->u.seq.items[0]->u.global.which != TSTOR__G_QSCHEME)
    return FAIL(up, TSTOR_EINVAL,
                "a quantized tensor's parameters must be a tuple that begins with its qscheme");
  int scheme = qp->u.seq.items[0]->u.global.dtype;
  tstor_value **p = qp->u.seq.items;
  tstor_value *t = NULL;
  int rc = layout_of(up, args[2], args[3], &t);
  if (rc) return rc;
  if (scheme == TSTOR__QSCHEME_PER_TENSOR_AFFINE) {
    if (qp->u.seq.n != 3 ||
        (p[1]->kind != TSTOR_VALUE_FLOAT && p[1]->kind != TSTOR_VALUE_INT &&
         p[1]->kind != TSTOR_VALUE_BOOL) ||
        (p[2]->kind != TSTOR_VALUE_INT && p[2]->kind != TSTOR_VALUE_BOOL))
      return FAIL(up, TSTOR_EINVAL,
                  "per_tensor_affine's parameters must be (qscheme, scale, zero_point)");
  } else if (scheme == TSTOR__QSCHEME_PER_CHANNEL_AFFINE ||
             scheme == TSTOR__QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS) {
    if (qp->u.seq.n != 4 || p[3]->kind != TSTOR_VALUE_INT)
      return FAIL(up, TSTOR_EINVAL, "%s's parameters must be (qscheme, scales, zero_points, axis)",
                  tstor__io_qscheme_names[scheme]);
    if (p[3]->u.i < 0 || p[3]->u.i >= t->u.tensor.ndim)
      return FAIL(up, TSTOR_EINVAL,
                  "_rebuild_qtensor: per_channel axis %lld out of range for %d dimensions",
                  (long long)p[3]->u.i, t->u.tensor.ndim);
    int64_t channels = t->u.tensor.sizes[p[3]->u.i];
    bool fs, fz;
    if ((rc = channel_params(up, p[1], true, channels, &fs)) ||
        (rc = channel_params(up, p[2], false, channels, &fz)))
      return rc;
    /* lists keep the scheme the file names; tensors' zero points decide */
    if (p[1]->kind != TSTOR_VALUE_LIST || p[2]->kind != TSTOR_VALUE_LIST)
      scheme =
          fz ? TSTOR__QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS : TSTOR__QSCHEME_PER_CHANNEL_AFFINE;
  } else {
    return FAIL(up, TSTOR_EINVAL, "Can't deserialize quantized tensor with qscheme torch.%s",
                tstor__io_qscheme_names[scheme]);
  }
  tstor_checkpoint *ck = tstor__io_unpickler_checkpoint(up);
  const char *sname = tstor__io_qscheme_names[scheme];
  tstor_value *q = NULL, *name = NULL;
  if ((rc = tstor_value_new(ck, TSTOR_VALUE_TUPLE, &q)) ||
      (rc = tstor_value_new_string(ck, sname, strlen(sname), &name)) ||
      (rc = tstor__io_seq_push(q, name)))
    return rc;
  for (size_t i = 1; i < qp->u.seq.n; i++)
    if ((rc = tstor__io_seq_push(q, p[i]))) return rc;
  t->u.tensor.storage = args[0]->u.tensor.storage;
  t->u.tensor.dtype = (int)dt;
  t->u.tensor.offset = args[1]->u.i;
  t->u.tensor.quantizer = q;
  *out = t;
  return 0;
}

/* A Parameter over the tensor src, as nn.Parameter(src, requires_grad). */
static int parameter_of(tstor__io_unpickler *up, const tstor_value *src, const tstor_value *grad,
                        tstor_value **out) {
  size_t nd = (size_t)src->u.tensor.ndim;
  tstor_value *t = new_tensor(up, nd);
  if (!t) return TSTOR_ENOMEM;
  memcpy(t->u.tensor.sizes, src->u.tensor.sizes, 2 * nd * sizeof(int64_t));
  t->u.tensor.ndim = src->u.tensor.ndim;
  t->u.tensor.storage = src->u.tensor.storage;
  t->u.tensor.offset = src->u.tensor.offset;
  t->u.tensor.dtype = src->u.tensor.dtype;
  t->u.tensor.quantizer = src->u.tensor.quantizer;
  t->requires_grad = (unsigned char)grad->u.i;
  t->pyclass = TSTOR__CLASS_PARAMETER;
  *out = t;
  return 0;
}

static int rebuild_parameter(tstor__io_unpickler *up, tstor_value **args, size_t nargs,
                             tstor_value **out) {
  if (nargs != 3)
    return FAIL(up, TSTOR_EINVAL, "_rebuild_parameter takes 3 arguments, not %zu", nargs);
  if (args[0]->kind != TSTOR_VALUE_TENSOR || args[1]->kind != TSTOR_VALUE_BOOL ||
      args[2]->kind != TSTOR_VALUE_DICT)
    return FAIL(up, TSTOR_EINVAL, "_rebuild_parameter needs (tensor, bool, OrderedDict)");
  return parameter_of(up, args[0], args[1], out);
}

/* Copies the entries of `from` (a dict) into the attribute dict *attrs,
 * made on first use: each a name, as setattr takes it. */
static int add_attributes(tstor__io_unpickler *up, const tstor_value *from, tstor_value **attrs) {
  for (size_t i = 0; i < from->u.seq.n; i++) {
    if (from->u.seq.keys[i]->kind != TSTOR_VALUE_STRING)
      return FAIL(up, TSTOR_EINVAL, "a tensor's attribute names must be strings, not %s",
                  tstor_value_kind_name(from->u.seq.keys[i]->kind));
    if (!*attrs && !(*attrs = tstor__io_unpickler_value(up, TSTOR_VALUE_DICT))) return TSTOR_ENOMEM;
    int rc = tstor__io_dict_set(*attrs, from->u.seq.keys[i], from->u.seq.items[i]);
    if (rc) return rc;
  }
  return 0;
}

/* An object's pickled state set on a tensor as torch._utils._set_obj_state
 * sets it: its __dict__, or (__dict__, slots), each set with setattr where
 * Python finds it true, and so a dict (or an OrderedDict or Counter) of
 * str names. The attributes are kept as a dict of values
 * (tstor_value_attributes). */
static int set_obj_state(tstor__io_unpickler *up, const tstor_value *state, tstor_value *t) {
  const tstor_value *parts[2] = {state, NULL};
  if (state->kind == TSTOR_VALUE_TUPLE) {
    if (state->u.seq.n != 2)
      return FAIL(up, TSTOR_EINVAL, "a tensor's state tuple holds %zu items, not (dict, slots)",
                  state->u.seq.n);
    parts[0] = state->u.seq.items[0];
    parts[1] = state->u.seq.items[1];
  }
  for (int k = 0; k < 2; k++) {
    if (!parts[k] || (parts[k]->kind != TSTOR_VALUE_TENSOR && !truthy(parts[k]))) continue;
    if (parts[k]->kind != TSTOR_VALUE_DICT)
      return FAIL(up, TSTOR_EINVAL,
                  "a tensor's state must be a dict, None or (dict, slots), not %s",
                  parts[k]->kind == TSTOR__VALUE_GLOBAL
                      ? "a class or function"
                      : tstor_value_kind_name((tstor_value_kind)parts[k]->kind));
    int rc = add_attributes(up, parts[k], &t->u.tensor.attrs);
    if (rc) return rc;
  }
  return 0;
}

/* _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state),
 * PyTorch 2.x's Parameter with Python attributes. */
static int rebuild_parameter_with_state(tstor__io_unpickler *up, tstor_value **args, size_t nargs,
                                        tstor_value **out) {
  if (nargs != 4)
    return FAIL(up, TSTOR_EINVAL, "_rebuild_parameter_with_state takes 4 arguments, not %zu",
                nargs);
  if (args[0]->kind != TSTOR_VALUE_TENSOR || args[1]->kind != TSTOR_VALUE_BOOL)
    return FAIL(up, TSTOR_EINVAL,
                "_rebuild_parameter_with_state needs (tensor, bool, hooks, state)");
  int rc = parameter_of(up, args[0], args[1], out);
  return rc ? rc : set_obj_state(up, args[3], *out);
}

static int reduce(tstor__io_unpickler *up, tstor_value *fn, tstor_value *args, tstor_value **out);

/* _rebuild_from_type_v2(func, new_type, args, state): func(*args), which
 * must build a tensor, made a new_type (torch.Tensor or Parameter, as
 * Tensor.as_subclass makes it, requires_grad kept), with state set on it:
 * what torch.save writes for a tensor with Python attributes (an
 * nn.Buffer's 'persistent' and '_is_buffer'). */
static int rebuild_from_type(tstor__io_unpickler *up, tstor_value **args, size_t nargs,
                             tstor_value **out) {
  if (nargs != 4)
    return FAIL(up, TSTOR_EINVAL, "_rebuild_from_type_v2 takes 4 arguments, not %zu", nargs);
  if (args[0]->kind != TSTOR__VALUE_GLOBAL || args[2]->kind != TSTOR_VALUE_TUPLE)
    return FAIL(up, TSTOR_EINVAL,
                "_rebuild_from_type_v2 needs (function, class, args tuple, state)");
  if (args[1]->kind != TSTOR__VALUE_GLOBAL || (args[1]->u.global.which != TSTOR__G_TENSOR_TYPE &&
                                               args[1]->u.global.which != TSTOR__G_PARAMETER_TYPE))
    return FAIL(
        up, TSTOR_EINVAL,
        "_rebuild_from_type_v2 makes a torch.Tensor or torch.nn.parameter.Parameter, and no "
        "other class");
  tstor_value *t = NULL;
  int rc = reduce(up, args[0], args[2], &t);
  if (rc) return rc;
  if (t->kind != TSTOR_VALUE_TENSOR)
    return FAIL(up, TSTOR_EINVAL, "_rebuild_from_type_v2's function built a %s, not a tensor",
                tstor_value_kind_name((tstor_value_kind)t->kind));
  t->pyclass = args[1]->u.global.which == TSTOR__G_PARAMETER_TYPE ? TSTOR__CLASS_PARAMETER
                                                                  : TSTOR__CLASS_PLAIN;
  *out = t;
  return set_obj_state(up, args[3], t);
}

/* _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad): a
 * tensor on the meta device, which has no bytes in the file. */
static int rebuild_meta(tstor__io_unpickler *up, tstor_value **args, size_t nargs,
                        tstor_value **out) {
  if (nargs != 4) return FAIL(up, TSTOR_EINVAL, "_rebuild_meta_tensor_no_storage takes 4 arguments, not %zu", nargs);
  if (args[0]->kind != TSTOR__VALUE_GLOBAL || args[0]->u.global.which != TSTOR__G_DTYPE)
    return FAIL(up, TSTOR_EINVAL, "a meta tensor's first argument must be a torch dtype");
  if (args[3]->kind != TSTOR_VALUE_BOOL) return FAIL(up, TSTOR_EINVAL, "a tensor's requires_grad must be a bool");
  tstor_value *t = NULL;
  int rc = layout_of(up, args[1], args[2], &t);
  if (rc) return rc;
  t->u.tensor.dtype = args[0]->u.global.dtype;
  t->u.tensor.storage = -1;
  t->requires_grad = (unsigned char)args[3]->u.i;
  *out = t;
  return 0;
}

/* OrderedDict() as Python 3 pickles it (its items follow by SETITEMS), or
 * OrderedDict(items) as Python 2 did: a list of [key, value] pairs, or a
 * dict. Keys follow the machine's rules for a dict's, a repeated one
 * keeping its first place, as in Python. */
static int ordered_dict(tstor__io_unpickler *up, tstor_value **args, size_t n, tstor_value **out) {
  if (n > 1)
    return FAIL(up, TSTOR_EINVAL, "OrderedDict takes () or (items,), not %zu arguments", n);
  tstor_value *d = tstor__io_unpickler_value(up, TSTOR_VALUE_DICT);
  if (!d) return TSTOR_ENOMEM;
  d->ordered = 1;
  *out = d;
  if (!n) return 0;
  const tstor_value *items = args[0];
  if (items->kind == TSTOR_VALUE_DICT) {
    int rc = 0;
    for (size_t i = 0; i < items->u.seq.n && !rc; i++)
      rc = tstor__io_dict_set(d, items->u.seq.keys[i], items->u.seq.items[i]);
    return rc;
  }
  if (items->kind != TSTOR_VALUE_LIST && items->kind != TSTOR_VALUE_TUPLE)
    return FAIL(up, TSTOR_EINVAL, "OrderedDict's items must be a list of pairs or a dict, not a %s",
                tstor_value_kind_name((tstor_value_kind)items->kind));
  for (size_t i = 0; i < items->u.seq.n; i++) {
    const tstor_value *kv = items->u.seq.items[i];
    if ((kv->kind != TSTOR_VALUE_LIST && kv->kind != TSTOR_VALUE_TUPLE) || kv->u.seq.n != 2)
      return FAIL(up, TSTOR_EINVAL, "OrderedDict's item %zu is no (key, value) pair", i);
    tstor_value *key = kv->u.seq.items[0];
    int k = key->kind;
    if (k != TSTOR_VALUE_STRING && k != TSTOR_VALUE_INT && k != TSTOR_VALUE_BOOL &&
        k != TSTOR_VALUE_NONE && k != TSTOR_VALUE_FLOAT && k != TSTOR_VALUE_TUPLE &&
        k != TSTOR_VALUE_TENSOR)
      return FAIL(up, TSTOR_EINVAL, "OrderedDict's item %zu has a key that is a %s", i,
                  tstor_value_kind_name((tstor_value_kind)k));
    int rc = tstor__io_dict_set(d, key, kv->u.seq.items[1]);
    if (rc) return rc;
  }
  return 0;
}

/* ------------------------------------------- the other values of 2.x */

/* A copy of the sequence `from` as a new value of `kind` and class `pyclass`. */
static int copy_items(tstor__io_unpickler *up, const tstor_value *from, int kind, int pyclass,
                      tstor_value **out) {
  tstor_value *v = tstor__io_unpickler_value(up, kind);
  if (!v) return TSTOR_ENOMEM;
  v->pyclass = (unsigned char)pyclass;
  for (size_t i = 0; from && i < from->u.seq.n; i++) {
    int rc = tstor__io_seq_push(v, from->u.seq.items[i]);
    if (rc) return rc;
  }
  *out = v;
  return 0;
}

/* Counts x once more in Counter d. */
static int count_item(tstor__io_unpickler *up, tstor_value *d, tstor_value *x) {
  tstor_checkpoint *ck = tstor__io_unpickler_checkpoint(up);
  long pos = tstor__io_dict_find(d, x);
  tstor_value *c = NULL;
  int rc = tstor_value_new_int(ck, pos >= 0 ? d->u.seq.items[pos]->u.i + 1 : 1, &c);
  if (rc) return rc;
  if (pos < 0) return tstor__io_dict_set(d, x, c);
  d->u.seq.items[pos] = c;
  return 0;
}

/* collections.Counter(mapping or iterable) (or ()): a dict of the mapping's
 * items, or of each distinct item of a tuple, list or set, or character of
 * a string, with how many times it comes. */
static int make_counter(tstor__io_unpickler *up, tstor_value **a, size_t n, tstor_value **out) {
  int k = n ? a[0]->kind : TSTOR_VALUE_DICT;
  if (n > 1 || (k != TSTOR_VALUE_DICT && k != TSTOR_VALUE_TUPLE && k != TSTOR_VALUE_LIST &&
                k != TSTOR_VALUE_SET && k != TSTOR_VALUE_STRING))
    return FAIL(up, TSTOR_ENOTSUP,
                "collections.Counter is read from a dict, a tuple, list, set or str, or nothing");
  tstor_value *d = tstor__io_unpickler_value(up, TSTOR_VALUE_DICT);
  if (!d) return TSTOR_ENOMEM;
  d->pyclass = TSTOR__CLASS_COUNTER;
  *out = d;
  if (!n) return 0;
  if (k == TSTOR_VALUE_DICT) { /* a mapping: its items */
    int rc = 0;
    for (size_t i = 0; i < a[0]->u.seq.n && !rc; i++)
      rc = tstor__io_dict_set(d, a[0]->u.seq.keys[i], a[0]->u.seq.items[i]);
    return rc;
  }
  tstor_value *items;
  int rc = tstor__io_iterate(tstor__io_unpickler_checkpoint(up), a[0], &items);
  for (size_t i = 0; !rc && i < items->u.seq.n; i++) rc = count_item(up, d, items->u.seq.items[i]);
  return rc;
}

/* torch.Size(tuple or list of ints) (or ()): a tuple of ints. */
static int make_size(tstor__io_unpickler *up, tstor_value **a, size_t n, tstor_value **out) {
  if (n > 1 || (n == 1 && a[0]->kind != TSTOR_VALUE_TUPLE && a[0]->kind != TSTOR_VALUE_LIST))
    return FAIL(up, TSTOR_EINVAL, "torch.Size is rebuilt from (tuple of ints) or ()");
  for (size_t i = 0; n && i < a[0]->u.seq.n; i++)
    if (a[0]->u.seq.items[i]->kind != TSTOR_VALUE_INT)
      return FAIL(up, TSTOR_EINVAL, "torch.Size takes ints, not %s",
                  tstor_value_kind_name(a[0]->u.seq.items[i]->kind));
  return copy_items(up, n ? a[0] : NULL, TSTOR_VALUE_TUPLE, TSTOR__CLASS_SIZE, out);
}

/* The device types c10 parses (DeviceType.cpp), as torch.device("TYPE") takes them. */
static bool device_type_known(const char *s, size_t len) {
  static const char *const types[] = {"cpu",    "cuda",   "ipu",   "xpu",  "mkldnn",
                                      "opengl", "opencl", "ideep", "hip",  "ve",
                                      "fpga",   "maia",   "xla",   "lazy", "vulkan",
                                      "mps",    "meta",   "hpu",   "mtia", "privateuseone"};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (same(types[i], s, len)) return true;
  return false;
}

/* torch.device(type) with type "cuda" or "cuda:1", or torch.device(type,
 * index): the string "cuda:1", of class torch.device. */
static int make_device(tstor__io_unpickler *up, tstor_value **a, size_t n, tstor_value **out) {
  if (n < 1 || n > 2 || a[0]->kind != TSTOR_VALUE_STRING ||
      (n == 2 && a[1]->kind != TSTOR_VALUE_INT))
    return FAIL(up, TSTOR_EINVAL, "torch.device is rebuilt from (str) or (str, int)");
  const char *s = a[0]->u.str.s, *colon = memchr(s, ':', a[0]->u.str.len);
  size_t tlen = colon ? (size_t)(colon - s) : a[0]->u.str.len;
  if (!device_type_known(s, tlen))
    return FAIL(up, TSTOR_EINVAL, "torch.device('%.*s'): not a device type PyTorch knows",
                (int)(tlen > 60 ? 60 : tlen), s);
  int64_t index = -1;
  if (colon) {
    const char *d = colon + 1, *end = s + a[0]->u.str.len;
    if (d == end || end - d > 18 || (*d == '0' && end - d > 1))
      return FAIL(up, TSTOR_EINVAL, "torch.device: '%.*s' is no device index",
                  (int)(end - d > 20 ? 20 : end - d), d);
    for (index = 0; d < end; d++) {
      if (*d < '0' || *d > '9')
        return FAIL(up, TSTOR_EINVAL, "torch.device: a device index must be digits");
      index = index * 10 + (*d - '0');
    }
    if (n == 2)
      return FAIL(up, TSTOR_EINVAL,
                  "torch.device: type (string) must not include an index because index was passed "
                  "explicitly");
  } else if (n == 2) {
    if (a[1]->u.i < 0)
      return FAIL(up, TSTOR_EINVAL, "torch.device: the device index must not be negative");
    index = a[1]->u.i;
  }
  if (index > INT8_MAX)
    return FAIL(up, TSTOR_EINVAL, "torch.device: index %lld is past c10's DeviceIndex",
                (long long)index);
  char buf[48];
  int len = index < 0 ? snprintf(buf, sizeof buf, "%.*s", (int)tlen, s)
                      : snprintf(buf, sizeof buf, "%.*s:%lld", (int)tlen, s, (long long)index);
  tstor_value *v = tstor__io_unpickler_value(up, TSTOR_VALUE_STRING);
  if (!v || !(v->u.str.s = tstor__io_malloc((size_t)len + 1)))
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  memcpy(v->u.str.s, buf, (size_t)len + 1);
  v->u.str.len = (size_t)len;
  v->pyclass = TSTOR__CLASS_DEVICE;
  *out = v;
  return 0;
}

/* set(iterable) (or ()): the distinct items of a list, tuple or set, the
 * keys of a dict or the characters of a str, equal ones once, as Python
 * hashes them (the first one kept), in the order given. */
static int make_set(tstor__io_unpickler *up, tstor_value **a, size_t n, tstor_value **out) {
  int k = n ? a[0]->kind : TSTOR_VALUE_LIST;
  if (n > 1 || (k != TSTOR_VALUE_LIST && k != TSTOR_VALUE_TUPLE && k != TSTOR_VALUE_SET &&
                k != TSTOR_VALUE_DICT && k != TSTOR_VALUE_STRING))
    return FAIL(up, TSTOR_ENOTSUP, "set is read from a list, tuple, set, dict or str, or nothing");
  tstor_value *seen = tstor__io_unpickler_value(up, TSTOR_VALUE_DICT),
              *v = tstor__io_unpickler_value(up, TSTOR_VALUE_SET), *from = NULL;
  if (!seen || !v) return TSTOR_ENOMEM;
  int rc = n ? tstor__io_iterate(tstor__io_unpickler_checkpoint(up), a[0], &from) : 0;
  if (rc) return rc;
  for (size_t i = 0; from && i < from->u.seq.n; i++) {
    tstor_value *item = from->u.seq.items[i];
    bool existed;
    rc = tstor__io_dict_put(seen, item, item, false, &existed);
    if (!rc && !existed) rc = tstor__io_seq_push(v, item);
    if (rc) return tstor_error_prefix(rc, "a set's item");
  }
  *out = v;
  return 0;
}

/* A new BYTES value of class pyclass holding len bytes at p. */
static int new_bytes(tstor__io_unpickler *up, const void *p, size_t len, int pyclass,
                     tstor_value **out) {
  tstor_value *v = tstor__io_unpickler_value(up, TSTOR_VALUE_BYTES);
  if (!v || !(v->u.str.s = tstor__io_malloc(len + 1)))
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu bytes", len);
  if (len) memcpy(v->u.str.s, p, len);
  v->u.str.s[len] = '\0';
  v->u.str.len = len;
  v->pyclass = (unsigned char)pyclass;
  *out = v;
  return 0;
}

/* _codecs.encode(str, 'latin1'), which pickle's protocol 2 writes bytes as:
 * each character one byte, so none may be past U+00FF. */
static int make_encoded(tstor__io_unpickler *up, tstor_value **a, size_t n, tstor_value **out) {
  if (n != 2 || a[0]->kind != TSTOR_VALUE_STRING || a[1]->kind != TSTOR_VALUE_STRING)
    return FAIL(up, TSTOR_EINVAL,
                "_codecs.encode is read as (str, 'latin1'), as pickle writes bytes");
  if (!is_str(a[1], "latin1") && !is_str(a[1], "latin-1") && !is_str(a[1], "latin_1"))
    return FAIL(up, TSTOR_ENOTSUP,
                "_codecs.encode to '%.*s': tstor reads 'latin1', as pickle writes bytes",
                (int)(a[1]->u.str.len > 40 ? 40 : a[1]->u.str.len), a[1]->u.str.s);
  const unsigned char *s = (const unsigned char *)a[0]->u.str.s;
  size_t len = a[0]->u.str.len, k = 0;
  unsigned char *b = tstor__io_malloc(len + 1);
  if (!b) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu bytes", len);
  for (size_t i = 0; i < len; i++) { /* valid UTF-8, checked when read */
    if (s[i] < 0x80)
      b[k++] = s[i];
    else if ((s[i] == 0xc2 || s[i] == 0xc3) && i + 1 < len) {
      b[k++] = (unsigned char)(((s[i] & 3) << 6) | (s[i + 1] & 0x3f));
      i++;
    } else {
      tstor__io_free(b);
      return FAIL(up, TSTOR_EINVAL,
                  "_codecs.encode: 'latin-1' codec can't encode a character past U+00FF");
    }
  }
  int rc = new_bytes(up, b, k, TSTOR__CLASS_PLAIN, out);
  tstor__io_free(b);
  return rc;
}

/* bytearray(bytes) (or ()), as pickle's protocol 2 writes one; or, as
 * Python takes them, bytearray(n), n zero bytes (up to 1 MiB: no more from a
 * few bytes of pickle), and bytearray(list or tuple of ints 0..255). */
static int make_bytearray(tstor__io_unpickler *up, tstor_value **a, size_t n, tstor_value **out) {
  int k = n ? a[0]->kind : TSTOR_VALUE_BYTES;
  if (n == 1 && (k == TSTOR_VALUE_INT || k == TSTOR_VALUE_BOOL)) {
    if (a[0]->u.i < 0 || a[0]->u.i > (1 << 20))
      return FAIL(up, TSTOR_EINVAL, "bytearray(%lld): a count from 0 to 1 MiB",
                  (long long)a[0]->u.i);
    unsigned char *z = tstor__io_calloc((size_t)a[0]->u.i + 1, 1);
    if (!z) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %lld bytes", (long long)a[0]->u.i);
    int rc = new_bytes(up, z, (size_t)a[0]->u.i, TSTOR__CLASS_BYTEARRAY, out);
    tstor__io_free(z);
    return rc;
  }
  if (n == 1 && (k == TSTOR_VALUE_LIST || k == TSTOR_VALUE_TUPLE)) {
    size_t len = a[0]->u.seq.n;
    unsigned char *b = tstor__io_malloc(len + 1);
    if (!b) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu bytes", len);
    for (size_t i = 0; i < len; i++) {
      const tstor_value *x = a[0]->u.seq.items[i];
      if ((x->kind != TSTOR_VALUE_INT && x->kind != TSTOR_VALUE_BOOL) || x->u.i < 0 ||
          x->u.i > 255) {
        tstor__io_free(b);
        return FAIL(up, TSTOR_EINVAL, "bytearray of a %s: its items must be ints in range(0, 256)",
                    tstor_value_kind_name((tstor_value_kind)a[0]->kind));
      }
      b[i] = (unsigned char)x->u.i;
    }
    int rc = new_bytes(up, b, len, TSTOR__CLASS_BYTEARRAY, out);
    tstor__io_free(b);
    return rc;
  }
  if (n > 1 || k != TSTOR_VALUE_BYTES)
    return FAIL(up, TSTOR_ENOTSUP,
                "bytearray is read from bytes, an int, a list or tuple of ints, or nothing");
  return new_bytes(up, n ? a[0]->u.str.s : "", n ? a[0]->u.str.len : 0, TSTOR__CLASS_BYTEARRAY,
                   out);
}

/* complex(real, imag), each part an int or a float (or fewer: 0). */
static int make_complex(tstor__io_unpickler *up, tstor_value **a, size_t n, tstor_value **out) {
  double part[2] = {0, 0};
  if (n > 2) return FAIL(up, TSTOR_EINVAL, "complex takes at most 2 arguments, not %zu", n);
  for (size_t i = 0; i < n; i++) {
    if (a[i]->kind == TSTOR_VALUE_FLOAT)
      part[i] = a[i]->u.f;
    else if (a[i]->kind == TSTOR_VALUE_INT || a[i]->kind == TSTOR_VALUE_BOOL)
      part[i] = (double)a[i]->u.i;
    else
      return FAIL(up, TSTOR_ENOTSUP, "complex is read from ints and floats, not a %s",
                  tstor_value_kind_name(a[i]->kind));
  }
  tstor_value *v = tstor__io_unpickler_value(up, TSTOR_VALUE_COMPLEX);
  if (!v) return TSTOR_ENOMEM;
  v->u.c[0] = part[0];
  v->u.c[1] = part[1];
  *out = v;
  return 0;
}

static int reduce(tstor__io_unpickler *up, tstor_value *fn, tstor_value *args, tstor_value **out) {
  size_t n = args->u.seq.n;
  tstor_value **a = args->u.seq.items;
  switch (fn->u.global.which) {
    case TSTOR__G_ORDEREDDICT: return ordered_dict(up, a, n, out);
    case TSTOR__G_REBUILD_TENSOR: return rebuild_tensor(up, a, n, 1, out);
    case TSTOR__G_REBUILD_TENSOR_V2: return rebuild_tensor(up, a, n, 2, out);
    case TSTOR__G_REBUILD_TENSOR_V3: return rebuild_tensor(up, a, n, 3, out);
    case TSTOR__G_REBUILD_PARAMETER: return rebuild_parameter(up, a, n, out);
    case TSTOR__G_REBUILD_META: return rebuild_meta(up, a, n, out);
    case TSTOR__G_REBUILD_PARAMETER_STATE: return rebuild_parameter_with_state(up, a, n, out);
    case TSTOR__G_REBUILD_FROM_TYPE: return rebuild_from_type(up, a, n, out);
    case TSTOR__G_REBUILD_QTENSOR: return rebuild_qtensor(up, a, n, out);
    case TSTOR__G_QSCHEME: return FAIL(up, TSTOR_EACCES, "a qscheme cannot be called");
    case TSTOR__G_TENSOR_TYPE:
    case TSTOR__G_PARAMETER_TYPE: return FAIL(up, TSTOR_EACCES, "a tensor class cannot be called");
    case TSTOR__G_COUNTER: return make_counter(up, a, n, out);
    case TSTOR__G_SIZE: return make_size(up, a, n, out);
    case TSTOR__G_DEVICE: return make_device(up, a, n, out);
    case TSTOR__G_SET: return make_set(up, a, n, out);
    case TSTOR__G_BYTEARRAY: return make_bytearray(up, a, n, out);
    case TSTOR__G_COMPLEX: return make_complex(up, a, n, out);
    case TSTOR__G_ENCODE: return make_encoded(up, a, n, out);
    case TSTOR__G_DTYPE: return FAIL(up, TSTOR_EACCES, "a dtype cannot be called");
    case TSTOR__G_TENSOR_CLASS: return FAIL(up, TSTOR_EACCES, "a tensor class cannot be called");
    default: return FAIL(up, TSTOR_EACCES, "a storage class cannot be called");
  }
}

/* BUILD sets an OrderedDict's attributes (a state_dict's _metadata), and
 * nothing else. */
static int build(tstor__io_unpickler *up, tstor_value *inst, tstor_value *state) {
  if (inst->kind != TSTOR_VALUE_DICT || state->kind != TSTOR_VALUE_DICT)
    return FAIL(up, TSTOR_EINVAL, "BUILD is only allowed to set an OrderedDict's attributes from a dict");
  if (!inst->u.seq.attrs) {
    inst->u.seq.attrs = state;
    return 0;
  }
  int rc = 0;
  for (size_t i = 0; i < state->u.seq.n && !rc; i++)
    rc = tstor__io_dict_set(inst->u.seq.attrs, state->u.seq.keys[i], state->u.seq.items[i]);
  return rc;
}

const tstor__io_pickle_rules tstor__io_torch_rules = {
    find_class, persistent_load, reduce, build, NULL, false};
const tstor__io_pickle_rules tstor__io_torch_legacy_rules = {
    find_class, persistent_load_legacy, reduce, build, NULL, false};
const tstor__io_pickle_rules tstor__io_torch_tar_rules = {
    find_class, persistent_load_tar, reduce, build, NULL, true};
const tstor__io_pickle_rules tstor__io_torch_tar_header_rules = {
    find_class_header, NULL, NULL, NULL, NULL, true};

/* -------------------------------------------------------------- binding */

int tstor__io_torch_bind(tstor_context *ctx, tstor_checkpoint *ck) {
  int rc = 0;
  /* the views of the legacy format, once their roots are loaded */
  for (size_t i = 0; i < ck->nstorages && !rc; i++) {
    tstor__io_record *r = &ck->storages[i];
    if (r->view_of < 0 || r->s) continue;
    size_t es = tstor_dtype_size(r->dtype);
    rc = tstor_storage_view(ck->storages[r->view_of].s, (size_t)r->view_offset * es, (size_t)r->numel * es, &r->s);
  }
  for (size_t i = 0; i < ck->nvalues && !rc; i++) {
    tstor_value *v = ck->values[i];
    if (v->kind == TSTOR_VALUE_STORAGE) v->u.tensor.s = ck->storages[v->u.tensor.storage].s;
    if (v->kind != TSTOR_VALUE_TENSOR || v->u.tensor.t) continue;
    if (v->u.tensor.storage < 0) { /* a meta tensor */
      tstor_device meta;
      if ((rc = tstor_device_parse(ctx, "meta", &meta)) ||
          (rc = tstor_tensor_empty_strided(ctx, meta, (tstor_dtype)v->u.tensor.dtype,
                                           v->u.tensor.ndim, v->u.tensor.sizes, v->u.tensor.strides,
                                           &v->u.tensor.t)))
        tstor_error_prefix(rc, "a meta tensor (torch._utils._rebuild_meta_tensor_no_storage)");
      continue;
    }
    /* the tensor's dtype is its storage's, but for _rebuild_tensor_v3's */
    const tstor__io_record *r = &ck->storages[v->u.tensor.storage];
    tstor_dtype dt = v->u.tensor.dtype >= 0 ? (tstor_dtype)v->u.tensor.dtype : r->dtype;
    rc = tstor_tensor_on_storage(r->s, dt, v->u.tensor.offset, v->u.tensor.ndim, v->u.tensor.sizes,
                                 v->u.tensor.strides, &v->u.tensor.t);
    if (rc && dt == r->dtype)
      tstor_error_prefix(rc, "a tensor on storage '%s' (%lld %s elements) does not fit it", r->key,
                         (long long)r->numel, tstor_dtype_name(r->dtype));
    else if (rc)
      tstor_error_prefix(rc, "a %s tensor on storage '%s' (%lld %s elements) does not fit it",
                         tstor_dtype_name(dt), r->key, (long long)r->numel,
                         tstor_dtype_name(r->dtype));
  }
  return rc;
}
