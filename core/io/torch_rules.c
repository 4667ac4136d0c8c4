/* torch.save's rules for the pickle machine: which globals a file may name,
 * what its persistent ids refer to, and what REDUCE and BUILD may do. They
 * follow PyTorch's weights_only unpickler (torch/_weights_only_unpickler.py):
 * a fixed list of globals, each of which only builds data, and every other
 * global refused by name. A REDUCE is a lookup in that list, never a call. */
#include "io_internal.h"

#include <string.h>

#define FAIL(up, code, ...) tstor__unpickler_fail((up), (code), __VA_ARGS__)

/* ------------------------------------------------------------- globals */

/* The permitted globals, as "module.name": what torch.save writes for a
 * state_dict. Everything else is refused by name, as torch.load(weights_only=
 * True) refuses it. */
static int find_class(tstor__unpickler *up, const char *module, size_t mlen, const char *name, size_t nlen,
                      tstor_value **out) {
  static const struct {
    const char *module, *name;
    int which;
  } known[] = {
      {"collections", "OrderedDict", TSTOR__G_ORDEREDDICT},
      {"torch._utils", "_rebuild_tensor_v2", TSTOR__G_REBUILD_TENSOR_V2},
      {"torch._utils", "_rebuild_tensor", TSTOR__G_REBUILD_TENSOR},
      {"torch._utils", "_rebuild_parameter", TSTOR__G_REBUILD_PARAMETER},
  };
  tstor_value *g = NULL;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strlen(known[i].module) == mlen && memcmp(known[i].module, module, mlen) == 0 &&
        strlen(known[i].name) == nlen && memcmp(known[i].name, name, nlen) == 0) {
      if (!(g = tstor__unpickler_value(up, TSTOR__VALUE_GLOBAL))) return TSTOR_ENOMEM;
      g->u.i = known[i].which;
      *out = g;
      return 0;
    }
  /* torch.FloatStorage and the other typed storage classes */
  char buf[64];
  if (mlen == 5 && memcmp(module, "torch", 5) == 0 && nlen > 7 && nlen < sizeof buf &&
      memcmp(name + nlen - 7, "Storage", 7) == 0) {
    memcpy(buf, name, nlen);
    buf[nlen] = '\0';
    tstor_dtype dt;
    if (tstor_dtype_parse(buf, &dt) == 0) {
      if (!(g = tstor__unpickler_value(up, TSTOR__VALUE_GLOBAL))) return TSTOR_ENOMEM;
      g->u.i = TSTOR__G_STORAGE_CLASS;
      g->u.tensor.ndim = (int)dt; /* u.i and u.tensor.ndim do not overlap */
      *out = g;
      return 0;
    }
  }
  return FAIL(up, TSTOR_EACCES,
              "global '%.*s.%.*s' is refused: only torch.save's weights are read "
              "(collections.OrderedDict, torch._utils._rebuild_tensor_v2/_rebuild_parameter, "
              "torch.*Storage), as torch.load(weights_only=True) reads them",
              (int)(mlen > 200 ? 200 : mlen), module, (int)(nlen > 200 ? 200 : nlen), name);
}

/* ------------------------------------------------------ persistent ids */

static int is_str(const tstor_value *v, const char *s) {
  return v->kind == TSTOR_VALUE_STRING && v->u.str.len == strlen(s) &&
         memcmp(v->u.str.s, s, v->u.str.len) == 0;
}

/* ('storage', storage_class, key, location, numel): torch.save's reference to
 * the record data/KEY. The same key may be named many times (every view of a
 * storage names it): as in torch.load, the first names its dtype, size and
 * location, and later ones only find it (torch.load reads nothing else of
 * them). */
static int persistent_load(tstor__unpickler *up, tstor_value *pid, tstor_value **out) {
  tstor_checkpoint *ck = tstor__unpickler_checkpoint(up);
  if (pid->kind != TSTOR_VALUE_TUPLE || pid->u.seq.n != 5)
    return FAIL(up, TSTOR_EINVAL, "a persistent id must be the 5-tuple ('storage', class, key, location, numel)");
  tstor_value **f = pid->u.seq.items;
  if (!is_str(f[0], "storage")) return FAIL(up, TSTOR_EACCES, "only persistent ids of storages are allowed");
  if (f[1]->kind != TSTOR__VALUE_GLOBAL || f[1]->u.i != TSTOR__G_STORAGE_CLASS)
    return FAIL(up, TSTOR_EINVAL, "a storage's class must be a torch.*Storage");
  if (f[2]->kind != TSTOR_VALUE_STRING) return FAIL(up, TSTOR_EINVAL, "a storage's key must be a string");
  const tstor_value *key = f[2];
  long idx = tstor__storage_find(ck, key->u.str.s, key->u.str.len);
  if (idx < 0) {
    if (!key->u.str.len || memchr(key->u.str.s, '/', key->u.str.len) ||
        memchr(key->u.str.s, '\0', key->u.str.len) || is_str(key, ".") || is_str(key, ".."))
      return FAIL(up, TSTOR_EINVAL, "storage key '%.*s' is not a record name",
                  (int)(key->u.str.len > 100 ? 100 : key->u.str.len), key->u.str.s);
    if (f[4]->kind != TSTOR_VALUE_INT || f[4]->u.i < 0)
      return FAIL(up, TSTOR_EINVAL, "a storage's size must be a non-negative int");
    tstor_dtype dt = (tstor_dtype)f[1]->u.tensor.ndim;
    int64_t numel = f[4]->u.i;
    if ((uint64_t)numel > (uint64_t)INT64_MAX / tstor_dtype_size(dt))
      return FAIL(up, TSTOR_EOVERFLOW, "storage '%s' of %lld %s elements: the byte size overflows",
                  key->u.str.s, (long long)numel, tstor_dtype_name(dt));
    /* A location that is no string is kept as "": torch.load ignores it under
     * a map_location, and the loader refuses it without one. */
    int named = f[3]->kind == TSTOR_VALUE_STRING;
    int rc = tstor__storage_add(ck, key->u.str.s, key->u.str.len, dt, numel, named ? f[3]->u.str.s : "",
                                named ? f[3]->u.str.len : 0, &idx);
    if (rc) return rc;
  }
  tstor_value *s = tstor__unpickler_value(up, TSTOR__VALUE_STORAGE);
  if (!s) return TSTOR_ENOMEM;
  s->u.i = idx;
  *out = s;
  return 0;
}

/* ------------------------------------------------------------- REDUCE */

static int int_tuple(tstor__unpickler *up, const tstor_value *t, const char *what, int64_t *out, int *n) {
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
static tstor_value *new_tensor(tstor__unpickler *up, size_t ndim) {
  tstor_value *t = tstor__unpickler_value(up, TSTOR_VALUE_TENSOR);
  if (!t) return NULL;
  if (!(t->u.tensor.sizes = malloc((2 * ndim + 1) * sizeof(int64_t)))) {
    TSTOR__ERR(TSTOR_ENOMEM, "pickle: out of memory for a tensor of %zu dimensions", ndim);
    return NULL;
  }
  t->u.tensor.strides = t->u.tensor.sizes + ndim;
  return t;
}

/* Sizes and strides from two tuples whose lengths are checked equal and
 * bounded before either is copied: the tensor holds exactly that many. */
static int layout_of(tstor__unpickler *up, const tstor_value *sizes, const tstor_value *strides, tstor_value **out) {
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

static int rebuild_tensor(tstor__unpickler *up, tstor_value **args, size_t nargs, int v2, tstor_value **out) {
  if (v2 ? (nargs != 6 && nargs != 7) : nargs != 4)
    return FAIL(up, TSTOR_EINVAL, "%s takes %s arguments, not %zu", v2 ? "_rebuild_tensor_v2" : "_rebuild_tensor",
                v2 ? "6 or 7" : "4", nargs);
  if (args[0]->kind != TSTOR__VALUE_STORAGE)
    return FAIL(up, TSTOR_EINVAL, "a tensor's first argument must be a storage");
  if (args[1]->kind != TSTOR_VALUE_INT || args[1]->u.i < 0)
    return FAIL(up, TSTOR_EINVAL, "a tensor's storage offset must be a non-negative int");
  tstor_value *t = NULL;
  int rc = layout_of(up, args[2], args[3], &t);
  if (rc) return rc;
  t->u.tensor.storage = (long)args[0]->u.i;
  t->u.tensor.offset = args[1]->u.i;
  if (v2) {
    if (args[4]->kind != TSTOR_VALUE_BOOL) return FAIL(up, TSTOR_EINVAL, "a tensor's requires_grad must be a bool");
    t->requires_grad = (unsigned char)args[4]->u.i;
    if (args[5]->kind != TSTOR_VALUE_DICT)
      return FAIL(up, TSTOR_EINVAL, "a tensor's backward hooks must be an OrderedDict");
    if (nargs == 7 && args[6]->kind != TSTOR_VALUE_DICT && args[6]->kind != TSTOR_VALUE_NONE)
      return FAIL(up, TSTOR_EINVAL, "a tensor's metadata must be a dict or None");
  }
  *out = t;
  return 0;
}

static int rebuild_parameter(tstor__unpickler *up, tstor_value **args, size_t nargs, tstor_value **out) {
  if (nargs != 3) return FAIL(up, TSTOR_EINVAL, "_rebuild_parameter takes 3 arguments, not %zu", nargs);
  const tstor_value *src = args[0];
  if (src->kind != TSTOR_VALUE_TENSOR || args[1]->kind != TSTOR_VALUE_BOOL || args[2]->kind != TSTOR_VALUE_DICT)
    return FAIL(up, TSTOR_EINVAL, "_rebuild_parameter needs (tensor, bool, OrderedDict)");
  size_t nd = (size_t)src->u.tensor.ndim;
  tstor_value *t = new_tensor(up, nd);
  if (!t) return TSTOR_ENOMEM;
  memcpy(t->u.tensor.sizes, src->u.tensor.sizes, 2 * nd * sizeof(int64_t));
  t->u.tensor.ndim = src->u.tensor.ndim;
  t->u.tensor.storage = src->u.tensor.storage;
  t->u.tensor.offset = src->u.tensor.offset;
  t->requires_grad = (unsigned char)args[1]->u.i;
  *out = t;
  return 0;
}

static int reduce(tstor__unpickler *up, tstor_value *fn, tstor_value *args, tstor_value **out) {
  size_t n = args->u.seq.n;
  tstor_value **a = args->u.seq.items;
  switch (fn->u.i) {
    case TSTOR__G_ORDEREDDICT:
      if (n != 0) return FAIL(up, TSTOR_EINVAL, "OrderedDict is rebuilt from (), not %zu arguments", n);
      if (!(*out = tstor__unpickler_value(up, TSTOR_VALUE_DICT))) return TSTOR_ENOMEM;
      (*out)->ordered = 1;
      return 0;
    case TSTOR__G_REBUILD_TENSOR_V2:
    case TSTOR__G_REBUILD_TENSOR: return rebuild_tensor(up, a, n, fn->u.i == TSTOR__G_REBUILD_TENSOR_V2, out);
    case TSTOR__G_REBUILD_PARAMETER: return rebuild_parameter(up, a, n, out);
    default: return FAIL(up, TSTOR_EACCES, "a storage class cannot be called");
  }
}

/* BUILD sets an OrderedDict's attributes (a state_dict's _metadata), and
 * nothing else. */
static int build(tstor__unpickler *up, tstor_value *inst, tstor_value *state) {
  if (inst->kind != TSTOR_VALUE_DICT || state->kind != TSTOR_VALUE_DICT)
    return FAIL(up, TSTOR_EINVAL, "BUILD is only allowed to set an OrderedDict's attributes from a dict");
  if (!inst->u.seq.attrs) {
    inst->u.seq.attrs = state;
    return 0;
  }
  int rc = 0;
  for (size_t i = 0; i < state->u.seq.n && !rc; i++)
    rc = tstor__dict_set(inst->u.seq.attrs, state->u.seq.keys[i], state->u.seq.items[i]);
  return rc;
}

const tstor__pickle_rules tstor__torch_rules = {find_class, persistent_load, reduce, build, NULL};
