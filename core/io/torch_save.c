/* torch.save's zip format, written: a protocol-2 pickle of the tree as
 * torch.save pickles it, one record per distinct storage however many tensors
 * view it, a version and a byteorder record. A tensor of a dtype PyTorch 1.13
 * has a storage class for is written as 1.13 writes it (_rebuild_tensor_v2
 * over a torch.FloatStorage...), which 1.13 and 2.x read; one of the dtypes
 * PyTorch 2.x added (uint16/32/64, float8, float4_e2m1fn_x2, the bits types)
 * and complex32 as 2.x writes it (_rebuild_tensor_v3 over a
 * torch.storage.UntypedStorage), which only 2.x reads. */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

#include <tstor/mapped.h>

#define ARCHIVE "archive" /* the folder name PyTorch 2.x writes; 1.13 reads any */

/* ------------------------------------------------------------ the pickle */

typedef struct saver {
  tstor__io_pickler pk;
  /* storages, in first-appearance order */
  struct {
    tstor_storage *s;
    tstor_dtype dtype;
  } *st;
  size_t nst, capst;
} saver;

/* The globals' identities in the pickler's memo. */
static const char g_rebuild, g_rebuild_v3, g_untyped, g_odict;
static const char g_param, g_param_state, g_counter, g_size, g_device, g_set, g_bytearray,
    g_complex, g_encode, g_from_type, g_tensor, g_qtensor, g_qscheme[TSTOR__QSCHEME_END];
static const char g_storage[TSTOR_DTYPE_END], g_dtype[TSTOR_DTYPE_END], g_rebuild_meta;

/* The key of storage s, seen as dtype dt elements. An empty storage may be
 * seen as several dtypes: PyTorch saves it (its one-dtype check skips
 * unallocated storages), and loads every view of it as the first. */
static int storage_key(saver *sv, tstor_storage *s, tstor_dtype dt, size_t *key) {
  for (size_t i = 0; i < sv->nst; i++)
    if (sv->st[i].s == s) {
      if (sv->st[i].dtype != dt && tstor_storage_nbytes(s))
        return TSTOR__ERR(TSTOR_EINVAL,
                          "two tensors view one storage as %s and as %s: torch.save's format gives a "
                          "storage one dtype (save a copy of one of them)",
                          tstor_dtype_name(sv->st[i].dtype), tstor_dtype_name(dt));
      *key = i;
      return 0;
    }
  void *p = tstor__io_grow(sv->st, &sv->capst, sv->nst, sizeof *sv->st, 16, "out of memory");
  if (!p) return TSTOR_ENOMEM;
  sv->st = p;
  sv->st[sv->nst].s = s;
  sv->st[sv->nst].dtype = dt;
  *key = sv->nst++;
  return 0;
}

static int location_of(tstor_storage *s, char *buf, size_t size) {
  tstor_context *ctx = tstor_storage_context(s);
  tstor_device dev = tstor_storage_device(s);
  const char *type = tstor_device_type_name(ctx, dev.type);
  if (tstor_storage_flags(s) & TSTOR_FLAG_NO_DATA)
    return TSTOR__ERR(TSTOR_ENODATA, "a storage on '%s' has no data to save", type ? type : "?");
  if (type && strcmp(type, "cpu") == 0) {
    snprintf(buf, size, "cpu");
    return 0;
  }
  return tstor_device_format(ctx, dev, buf, size);
}

/* The one tuple of ints a tensor's size or stride is. */
static void pickle_ints(tstor__io_pickler *pk, const int64_t *v, int n) {
  tstor__io_pickle_tuple_begin(pk, (size_t)n);
  for (int i = 0; i < n; i++) tstor__io_pickle_int(pk, v[i]);
  tstor__io_pickle_tuple_end(pk, (size_t)n);
}

/* Whether torch.save writes a dtype's storages as its storage class (v2) or,
 * for the dtypes PyTorch 2.x added and complex32, which have none, as
 * UntypedStorage bytes (v3). Quantized tensors are saved by neither. */
static const tstor_dtype_info *savable(tstor_dtype dt, bool *untyped, bool quantized) {
  const tstor_dtype_info *info = tstor_dtype_info_of(dt);
  if (!info || (info->kind == TSTOR_KIND_QUANTIZED && !quantized)) {
    TSTOR__ERR(TSTOR_ENOTSUP,
               "a %s tensor without its scales: torch.save writes a quantized tensor with them "
               "(_rebuild_qtensor), as tstor writes one a file gave",
               tstor_dtype_name(dt));
    return NULL;
  }
  *untyped = info->legacy_name == NULL;
  return info;
}

/* ('storage', cls, key, location, numel) as a persistent id: storage s as
 * dtype dt elements, as torch.save pickles a storage, alone or in a tensor;
 * with `untyped`, ('storage', torch.storage.UntypedStorage, key, location,
 * nbytes), as PyTorch 2.x pickles the storage of a tensor of a dtype with no
 * storage class (a v3 tensor). */
static int pickle_storage(saver *sv, tstor_storage *s, tstor_dtype dt, bool untyped,
                          bool quantized) {
  tstor__io_pickler *pk = &sv->pk;
  bool none;
  const tstor_dtype_info *info = savable(dt, &none, quantized);
  if (!info) return TSTOR_ENOTSUP;
  if (none && !untyped)
    return TSTOR__ERR(
        TSTOR_ENOTSUP,
        "a %s storage saved as itself: PyTorch has no storage class for %s (save a tensor "
        "over it instead)",
        info->name, info->name);
  size_t key = 0;
  char loc[64];
  int rc = storage_key(sv, s, dt, &key);
  if (!rc) rc = location_of(s, loc, sizeof loc);
  if (rc) return rc;
  char keybuf[32], cls[64];
  snprintf(keybuf, sizeof keybuf, "%zu", key);
  size_t nbytes = tstor_storage_nbytes(s);
  if (nbytes % info->element_size)
    return TSTOR__ERR(TSTOR_ESIZE, "a %s storage of %zu bytes holds no whole number of elements", info->name, nbytes);
  tstor__io_pickle_op(pk, TSTOR__OP_MARK);
  tstor__io_pickle_str(pk, "storage", 7);
  if (untyped) {
    tstor__io_pickle_global(pk, &g_untyped, "torch.storage", "UntypedStorage");
  } else {
    snprintf(cls, sizeof cls, "%sStorage", info->legacy_name);
    tstor__io_pickle_global(pk, &g_storage[dt], "torch", cls);
  }
  tstor__io_pickle_str(pk, keybuf, strlen(keybuf));
  tstor__io_pickle_str(pk, loc, strlen(loc));
  tstor__io_pickle_int(pk, (int64_t)(untyped ? nbytes : nbytes / info->element_size));
  tstor__io_pickle_op(pk, TSTOR__OP_TUPLE);
  tstor__io_pickle_op(pk, TSTOR__OP_BINPERSID);
  return 0;
}

/* OrderedDict(), the empty backward hooks torch.save writes. */
static void pickle_odict(tstor__io_pickler *pk) {
  tstor__io_pickle_global(pk, &g_odict, "collections", "OrderedDict");
  tstor__io_pickle_op(pk, TSTOR__OP_EMPTY_TUPLE);
  tstor__io_pickle_op(pk, TSTOR__OP_REDUCE);
}

/* A rebuild's requires_grad and backward hooks. */
static void pickle_grad_hooks(tstor__io_pickler *pk, bool grad) {
  tstor__io_pickle_op(pk, grad ? TSTOR__OP_NEWTRUE : TSTOR__OP_NEWFALSE);
  pickle_odict(pk);
}

/* A rebuild's first four arguments: t's storage (pickle_storage's),
 * storage offset, sizes and strides. */
static int pickle_layout(saver *sv, const tstor_tensor *t, bool untyped, bool quantized) {
  tstor__io_pickler *pk = &sv->pk;
  int rc = pickle_storage(sv, tstor_tensor_storage(t), tstor_tensor_dtype(t), untyped, quantized);
  if (rc) return rc;
  tstor__io_pickle_int(pk, tstor_tensor_storage_offset(t));
  pickle_ints(pk, tstor_tensor_sizes(t), tstor_tensor_dim(t));
  pickle_ints(pk, tstor_tensor_strides(t), tstor_tensor_dim(t));
  return 0;
}

/* A tensor on the meta device, as torch.save pickles one:
 * _rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad); the
 * function, then `between` (when not NULL) and the arguments' tuple. */
static int pickle_meta_tensor(saver *sv, const tstor_value *v, bool grad,
                              void (*between)(saver *)) {
  tstor__io_pickler *pk = &sv->pk;
  const tstor_tensor *t = v->u.tensor.t;
  tstor_dtype dt = tstor_tensor_dtype(t);
  const tstor_dtype_info *info = tstor_dtype_info_of(dt);
  if (!info) return TSTOR__ERR(TSTOR_EINVAL, "a tensor of unknown dtype %d", (int)dt);
  tstor__io_pickle_global(pk, &g_rebuild_meta, "torch._utils", "_rebuild_meta_tensor_no_storage");
  if (between) between(sv);
  tstor__io_pickle_op(pk, TSTOR__OP_MARK);
  tstor__io_pickle_global(pk, &g_dtype[dt], "torch", info->name);
  pickle_ints(pk, tstor_tensor_sizes(t), tstor_tensor_dim(t));
  pickle_ints(pk, tstor_tensor_strides(t), tstor_tensor_dim(t));
  tstor__io_pickle_op(pk, grad ? TSTOR__OP_NEWTRUE : TSTOR__OP_NEWFALSE);
  tstor__io_pickle_op(pk, TSTOR__OP_TUPLE);
  return 0;
}

static bool on_meta(const tstor_tensor *t) {
  tstor_storage *s = tstor_tensor_storage(t);
  const char *type = tstor_device_type_name(tstor_storage_context(s), tstor_storage_device(s).type);
  return type && strcmp(type, "meta") == 0;
}

/* _rebuild_tensor_v2(('storage', cls, key, location, numel), offset, size,
 * stride, requires_grad, OrderedDict()), as torch.save pickles a tensor; for
 * a dtype with no storage class, as PyTorch 2.x does,
 * _rebuild_tensor_v3(('storage', UntypedStorage, key, location, nbytes),
 * offset, size, stride, requires_grad, OrderedDict(), dtype). The function,
 * then `between` (when not NULL) and the arguments' tuple, not yet called. */
static int pickle_tensor_call(saver *sv, const tstor_value *v, bool grad,
                              void (*between)(saver *)) {
  tstor__io_pickler *pk = &sv->pk;
  const tstor_tensor *t = v->u.tensor.t;
  if (on_meta(t)) return pickle_meta_tensor(sv, v, grad, between);
  tstor_dtype dt = tstor_tensor_dtype(t);
  bool v3;
  const tstor_dtype_info *info = savable(dt, &v3, false);
  if (!info) return TSTOR_ENOTSUP;
  /* torch.load rebuilds a v3 tensor with set_ on a leaf, which PyTorch
   * refuses for one that requires grad: the file would not load */
  if (v3 && grad)
    return TSTOR__ERR(TSTOR_ENOTSUP,
                      "a %s tensor that requires grad: PyTorch 2.x's torch.load cannot rebuild it "
                      "(_rebuild_tensor_v3 calls set_ on a leaf that requires grad)",
                      info->name);
  if (v3)
    tstor__io_pickle_global(pk, &g_rebuild_v3, "torch._utils", "_rebuild_tensor_v3");
  else
    tstor__io_pickle_global(pk, &g_rebuild, "torch._utils", "_rebuild_tensor_v2");
  if (between) between(sv);
  tstor__io_pickle_op(pk, TSTOR__OP_MARK);
  int rc = pickle_layout(sv, t, v3, false);
  if (rc) return rc;
  pickle_grad_hooks(pk, grad);
  if (v3) tstor__io_pickle_global(pk, &g_dtype[dt], "torch", info->name);
  tstor__io_pickle_op(pk, TSTOR__OP_TUPLE);
  return 0;
}

static int pickle_tensor_data(saver *sv, const tstor_value *v, bool grad) {
  int rc = pickle_tensor_call(sv, v, grad, NULL);
  if (!rc) tstor__io_pickle_op(&sv->pk, TSTOR__OP_REDUCE);
  return rc;
}

static int pickle_value(saver *sv, const tstor_value *v);
static int pickle_items(saver *sv, const tstor_value *v, int dict);

/* A quantized tensor as torch.save pickles one: _rebuild_qtensor(storage,
 * offset, size, stride, quantizer_params, requires_grad, OrderedDict()),
 * the parameters' scheme a global (per_channel_affine for float_qparams too,
 * as torch.save writes it). */
static int pickle_qtensor(saver *sv, const tstor_value *v) {
  tstor__io_pickler *pk = &sv->pk;
  const tstor_tensor *t = v->u.tensor.t;
  const tstor_value *q = v->u.tensor.quantizer;
  if (on_meta(t))
    return TSTOR__ERR(TSTOR_ENOTSUP,
                      "a quantized tensor on the meta device: torch.save has no form for it");
  tstor__io_pickle_global(pk, &g_qtensor, "torch._utils", "_rebuild_qtensor");
  tstor__io_pickle_op(pk, TSTOR__OP_MARK);
  int rc = pickle_layout(sv, t, false, true);
  if (rc) return rc;
  tstor__io_pickle_op(pk, TSTOR__OP_MARK);
  const char *scheme = q->u.seq.items[0]->u.str.s;
  int which = strcmp(scheme, "per_tensor_affine") == 0 ? TSTOR__QSCHEME_PER_TENSOR_AFFINE
                                                       : TSTOR__QSCHEME_PER_CHANNEL_AFFINE;
  if (strcmp(scheme, "per_channel_affine_float_qparams") == 0 &&
      (q->u.seq.items[1]->kind == TSTOR_VALUE_LIST && q->u.seq.items[2]->kind == TSTOR_VALUE_LIST))
    which = TSTOR__QSCHEME_PER_CHANNEL_AFFINE_FLOAT_QPARAMS; /* lists keep the scheme */
  tstor__io_pickle_global(pk, &g_qscheme[which], "torch", tstor__io_qscheme_names[which]);
  for (size_t i = 1; i < q->u.seq.n && !rc; i++) rc = pickle_value(sv, q->u.seq.items[i]);
  if (rc) return rc;
  tstor__io_pickle_op(pk, TSTOR__OP_TUPLE);
  pickle_grad_hooks(pk, false);
  tstor__io_pickle_op(pk, TSTOR__OP_TUPLE);
  tstor__io_pickle_op(pk, TSTOR__OP_REDUCE);
  return 0;
}

static void pickle_tensor_type(saver *sv) {
  tstor__io_pickle_global(&sv->pk, &g_tensor, "torch", "Tensor");
}

/* A tensor; with Python attributes as PyTorch 2.x pickles one:
 * _rebuild_from_type_v2(_rebuild_tensor_v2, torch.Tensor, args, dict). A
 * Parameter as torch.save pickles one: _rebuild_parameter(data,
 * requires_grad, OrderedDict()), or with its attributes
 * _rebuild_parameter_with_state(data, requires_grad, OrderedDict(), dict),
 * which only PyTorch 2.x reads. */
static int pickle_tensor(saver *sv, const tstor_value *v) {
  tstor__io_pickler *pk = &sv->pk;
  const tstor_value *attrs = v->u.tensor.attrs;
  if (v->u.tensor.quantizer) {
    if (attrs || v->pyclass == TSTOR__CLASS_PARAMETER)
      return TSTOR__ERR(TSTOR_ENOTSUP,
                        "a quantized tensor with attributes or as a Parameter: tstor writes "
                        "quantized tensors as _rebuild_qtensor alone");
    return pickle_qtensor(sv, v);
  }
  if (v->pyclass != TSTOR__CLASS_PARAMETER && attrs) {
    tstor__io_pickle_global(pk, &g_from_type, "torch._tensor", "_rebuild_from_type_v2");
    tstor__io_pickle_op(pk, TSTOR__OP_MARK);
    int rc = pickle_tensor_call(sv, v, v->requires_grad, pickle_tensor_type);
    if (!rc) rc = pickle_value(sv, attrs);
    tstor__io_pickle_op(pk, TSTOR__OP_TUPLE);
    tstor__io_pickle_op(pk, TSTOR__OP_REDUCE);
    return rc;
  }
  if (v->pyclass != TSTOR__CLASS_PARAMETER) return pickle_tensor_data(sv, v, v->requires_grad);
  if (attrs)
    tstor__io_pickle_global(pk, &g_param_state, "torch._utils", "_rebuild_parameter_with_state");
  else
    tstor__io_pickle_global(pk, &g_param, "torch._utils", "_rebuild_parameter");
  tstor__io_pickle_op(pk, TSTOR__OP_MARK);
  int rc = pickle_tensor_data(sv, v, false);
  if (rc) return rc;
  pickle_grad_hooks(pk, v->requires_grad);
  if (attrs && (rc = pickle_value(sv, attrs))) return rc;
  tstor__io_pickle_op(pk, TSTOR__OP_TUPLE);
  tstor__io_pickle_op(pk, TSTOR__OP_REDUCE);
  return 0;
}

/* bytes as pickle's protocol 2 writes them: _codecs.encode(s, 'latin1'),
 * s the string whose characters are the bytes. */
static int pickle_bytes(saver *sv, const unsigned char *p, size_t n) {
  tstor__io_pickler *pk = &sv->pk;
  char *s = tstor__io_malloc(2 * n + 1);
  if (!s) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu bytes", n);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (p[i] < 0x80) {
      s[k++] = (char)p[i];
    } else {
      s[k++] = (char)(0xc0 | (p[i] >> 6));
      s[k++] = (char)(0x80 | (p[i] & 0x3f));
    }
  tstor__io_pickle_global(pk, &g_encode, "_codecs", "encode");
  tstor__io_pickle_str(pk, s, k);
  tstor__io_pickle_str(pk, "latin1", 6);
  tstor__io_pickle_op(pk, TSTOR__OP_TUPLE2);
  tstor__io_pickle_op(pk, TSTOR__OP_REDUCE);
  tstor__io_free(s);
  return 0;
}

/* torch.device("cuda:1") as torch pickles it: torch.device('cuda', 1), or
 * torch.device('cpu') without an index. */
static void pickle_device(saver *sv, const tstor_value *v) {
  tstor__io_pickler *pk = &sv->pk;
  const char *s = v->u.str.s, *colon = memchr(s, ':', v->u.str.len);
  tstor__io_pickle_global(pk, &g_device, "torch", "device");
  tstor__io_pickle_str(pk, s, colon ? (size_t)(colon - s) : v->u.str.len);
  if (colon) tstor__io_pickle_int(pk, strtoll(colon + 1, NULL, 10));
  tstor__io_pickle_op(pk, colon ? TSTOR__OP_TUPLE2 : TSTOR__OP_TUPLE1);
  tstor__io_pickle_op(pk, TSTOR__OP_REDUCE);
}

/* A value of a class pickle writes as a call (PyTorch 2.x reads them all):
 * torch.Size(tuple), collections.Counter(dict), set(list), bytearray(bytes),
 * complex(re, im). */
static int pickle_call(saver *sv, const tstor_value *v) {
  tstor__io_pickler *pk = &sv->pk;
  int rc = 0;
  if (v->kind == TSTOR_VALUE_COMPLEX) {
    tstor__io_pickle_global(pk, &g_complex, "__builtin__", "complex");
    tstor__io_pickle_float(pk, v->u.c[0]);
    tstor__io_pickle_float(pk, v->u.c[1]);
    tstor__io_pickle_op(pk, TSTOR__OP_TUPLE2);
  } else if (v->kind == TSTOR_VALUE_BYTES) {
    tstor__io_pickle_global(pk, &g_bytearray, "__builtin__", "bytearray");
    if (!v->u.str.len) {
      tstor__io_pickle_op(pk, TSTOR__OP_EMPTY_TUPLE);
    } else {
      rc = pickle_bytes(sv, (const unsigned char *)v->u.str.s, v->u.str.len);
      tstor__io_pickle_op(pk, TSTOR__OP_TUPLE1);
    }
  } else if (v->kind == TSTOR_VALUE_TUPLE) {
    tstor__io_pickle_global(pk, &g_size, "torch", "Size");
    tstor__io_pickle_tuple_begin(pk, v->u.seq.n);
    for (size_t i = 0; i < v->u.seq.n; i++) tstor__io_pickle_int(pk, v->u.seq.items[i]->u.i);
    tstor__io_pickle_tuple_end(pk, v->u.seq.n);
    tstor__io_pickle_op(pk, TSTOR__OP_TUPLE1);
  } else {
    bool set = v->kind == TSTOR_VALUE_SET;
    if (set)
      tstor__io_pickle_global(pk, &g_set, "__builtin__", "set");
    else
      tstor__io_pickle_global(pk, &g_counter, "collections", "Counter");
    tstor__io_pickle_op(pk, set ? TSTOR__OP_EMPTY_LIST : TSTOR__OP_EMPTY_DICT);
    rc = pickle_items(sv, v, !set);
    tstor__io_pickle_op(pk, TSTOR__OP_TUPLE1);
  }
  tstor__io_pickle_op(pk, TSTOR__OP_REDUCE);
  return rc;
}

/* A list's items or a dict's pairs, in batches of 1000 as Python writes them. */
static int pickle_items(saver *sv, const tstor_value *v, int dict) {
  int rc = 0;
  size_t n = v->u.seq.n;
  for (size_t start = 0; start < n && !rc; start += 1000) {
    size_t end = n - start > 1000 ? start + 1000 : n;
    tstor__io_pickle_op(&sv->pk, TSTOR__OP_MARK);
    for (size_t i = start; i < end && !rc; i++) {
      if (dict) rc = pickle_value(sv, v->u.seq.keys[i]);
      if (!rc) rc = pickle_value(sv, v->u.seq.items[i]);
    }
    tstor__io_pickle_op(&sv->pk, dict ? TSTOR__OP_SETITEMS : TSTOR__OP_APPENDS);
  }
  return rc;
}

/* Returns the errors the tree's contents cause; the buffer keeps its own. */
static int pickle_value(saver *sv, const tstor_value *v) {
  tstor__io_pickler *pk = &sv->pk;
  if (tstor__io_pickle_memo_get(pk, v)) return 0;
  int rc = 0;
  switch (v->kind) {
    case TSTOR_VALUE_NONE: tstor__io_pickle_op(pk, TSTOR__OP_NONE); return 0;
    case TSTOR_VALUE_BOOL:
      tstor__io_pickle_op(pk, v->u.i ? TSTOR__OP_NEWTRUE : TSTOR__OP_NEWFALSE);
      return 0;
    case TSTOR_VALUE_INT: tstor__io_pickle_int(pk, v->u.i); return 0;
    case TSTOR_VALUE_FLOAT: tstor__io_pickle_float(pk, v->u.f); return 0;
    case TSTOR_VALUE_STRING:
      if (v->pyclass == TSTOR__CLASS_DEVICE)
        pickle_device(sv, v);
      else
        tstor__io_pickle_str(pk, v->u.str.s, v->u.str.len);
      break;
    case TSTOR_VALUE_COMPLEX:
    case TSTOR_VALUE_SET: rc = pickle_call(sv, v); break;
    case TSTOR_VALUE_TENSOR: rc = pickle_tensor(sv, v); break;
    case TSTOR_VALUE_STORAGE:
      rc = pickle_storage(sv, v->u.tensor.s, (tstor_dtype)v->u.tensor.dtype, false, false);
      break;
    case TSTOR_VALUE_TUPLE: {
      if (v->pyclass == TSTOR__CLASS_SIZE) {
        rc = pickle_call(sv, v);
        break;
      }
      /* a tuple that contains itself cannot exist: the tree was checked */
      size_t n = v->u.seq.n;
      tstor__io_pickle_tuple_begin(pk, n);
      for (size_t i = 0; i < n && !rc; i++) rc = pickle_value(sv, v->u.seq.items[i]);
      tstor__io_pickle_tuple_end(pk, n);
      if (!n) return rc; /* () is not memoized, as in Python */
      break;
    }
    case TSTOR_VALUE_LIST:
      tstor__io_pickle_op(pk, TSTOR__OP_EMPTY_LIST);
      tstor__io_pickle_memo_put(pk, v);
      return pickle_items(sv, v, 0);
    case TSTOR_VALUE_DICT:
      if (v->pyclass == TSTOR__CLASS_COUNTER) {
        rc = pickle_call(sv, v);
        break;
      }
      if (v->ordered || v->u.seq.attrs) {
        pickle_odict(pk);
      } else {
        tstor__io_pickle_op(pk, TSTOR__OP_EMPTY_DICT);
      }
      tstor__io_pickle_memo_put(pk, v);
      rc = pickle_items(sv, v, 1);
      if (!rc && v->u.seq.attrs) {
        rc = pickle_value(sv, v->u.seq.attrs);
        tstor__io_pickle_op(pk, TSTOR__OP_BUILD);
      }
      return rc;
    case TSTOR_VALUE_BYTES:
      rc = v->pyclass == TSTOR__CLASS_BYTEARRAY
               ? pickle_call(sv, v)
               : pickle_bytes(sv, (const unsigned char *)v->u.str.s, v->u.str.len);
      break;
    case TSTOR_VALUE_OBJECT:
      return TSTOR__ERR(TSTOR_ENOTSUP,
                        "a Torch7 %s object: torch.save's format has no Lua classes (a network's "
                        "parameters as a PyTorch state_dict: tstor convert --state-dict, "
                        "tstor_torch7_state_dict; its fields: tstor_value_object_state)",
                        v->u.obj.cls);
    default: return TSTOR__ERR(TSTOR_EINVAL, "a value of unknown kind %d", v->kind);
  }
  if (!rc) tstor__io_pickle_memo_put(pk, v);
  return rc;
}

/* --------------------------------------------------------------- records */

static void write_record(tstor__io_zip_writer *w, const char *tail, const void *p, size_t n) {
  char name[96];
  snprintf(name, sizeof name, ARCHIVE "/%s", tail);
  tstor__io_zipw_begin(w, name, n, tstor__io_crc32(0, p, n));
  tstor__io_fw_append(&w->out, p, n);
}

/* The pickle of ck, and the storages its records are to hold, worked out
 * before anything is written. */
static int plan(const tstor_checkpoint *ck, saver *sv) {
  memset(sv, 0, sizeof *sv);
  tstor__io_pickler_init(&sv->pk, "data.pkl");
  if (!ck || !ck->root) return TSTOR__ERR(TSTOR_EINVAL, "torch.save: %s", ck ? "the checkpoint has no root value" : "NULL argument");
  int rc = tstor__io_tree_check(ck->root);
  if (rc) return rc;
  tstor__io_pickle_op(&sv->pk, TSTOR__OP_PROTO);
  tstor__io_pickle_op(&sv->pk, 2);
  if ((rc = pickle_value(sv, ck->root))) return rc;
  tstor__io_pickle_op(&sv->pk, TSTOR__OP_STOP);
  return tstor__io_wbuf_error(&sv->pk.out);
}

static void plan_free(saver *sv) {
  tstor__io_pickler_free(&sv->pk);
  tstor__io_free(sv->st);
}

/* The archive: data.pkl, a record per storage, version and byteorder. */
static int write_plan(const void *arg, FILE *f) {
  const saver *sv = arg;
  tstor__io_zip_writer w;
  tstor__io_zipw_init(&w, f);
  write_record(&w, "data.pkl", sv->pk.out.data, sv->pk.out.len);
  for (size_t i = 0; i < sv->nst && tstor__io_fw_ok(&w.out); i++) {
    tstor_storage *s = sv->st[i].s, *copy = NULL;
    const void *p = NULL;
    size_t n = tstor_storage_nbytes(s);
    char tail[40];
    snprintf(tail, sizeof tail, "data/%zu", i);
    int rc = tstor__io_host_bytes(s, &copy, &p);
    if (rc)
      tstor__io_fw_fail(&w.out, rc, "%s", tstor_last_error());
    else
      write_record(&w, tail, n ? p : "", n);
    tstor_storage_release(copy);
  }
  write_record(&w, "version", "3\n", 2);
  write_record(&w, "byteorder", "little", 6);
  int rc = tstor__io_zipw_finish(&w);
  tstor__io_zipw_free(&w);
  return rc;
}

int tstor__io_torch_save_stream(const tstor_checkpoint *ck, FILE *f) {
  saver sv;
  int rc = plan(ck, &sv);
  if (!rc) rc = f ? write_plan(&sv, f) : TSTOR__ERR(TSTOR_EINVAL, "torch.save: NULL stream");
  plan_free(&sv);
  return rc;
}

int tstor_torch_save(const tstor_checkpoint *ck, const char *path, const tstor_save_options *opts) {
  if (!ck || !path) return TSTOR__ERR(TSTOR_EINVAL, "tstor_torch_save: NULL argument");
  unsigned flags;
  int orc = tstor__io_save_flags(opts, &flags);
  if (orc) return orc;
  if (flags) return TSTOR__ERR(TSTOR_EINVAL, "torch.save: unknown flags 0x%x", flags);
  if (!ck->root) return TSTOR__ERR(TSTOR_EINVAL, "tstor_torch_save: the checkpoint has no root value");
  saver sv;
  int rc = plan(ck, &sv);
  if (!rc) rc = tstor__io_save_atomically(path, write_plan, &sv);
  plan_free(&sv);
  return rc;
}
