/* The strict unpickler: the opcodes of pickle protocols 2 to 5 that torch.save
 * emits for weights, and nothing that executes. It follows PyTorch's own
 * weights_only unpickler (torch/_weights_only_unpickler.py): a fixed list of
 * globals, each of which only builds data, and every other global refused by
 * name. Nothing here calls anything a file names; a REDUCE is a lookup in that
 * list.
 *
 * Resources are bounded by the input: the stack, the marks and the memo hold
 * at most one entry per byte of pickle (the memo is a table of the indices
 * stored, like Python's dict, not an array as long as the largest), so a
 * hostile pickle cannot make us allocate more than a few times its own size. Values,
 * about 100 bytes each with their bookkeeping, are bounded by the caller's
 * max_values: one per byte of the file, which a pickle stored as torch.save
 * stores it can never exceed (no opcode builds two values). */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

/* Python's memo is a dict: any index, stored in any order. */
typedef struct memo_slot {
  uint64_t idx;
  tstor_value *v; /* NULL: an empty slot */
} memo_slot;

typedef struct unpickler {
  tstor_checkpoint *ck;
  const uint8_t *p, *end, *start;
  size_t op_at; /* offset of the current opcode, for messages */
  tstor_value **stack;
  size_t sp, stack_cap;
  size_t *marks;
  size_t nmarks, marks_cap;
  memo_slot *memo; /* open addressing on the index, at most half full */
  size_t memo_cap;
  size_t memo_len; /* indices stored: where MEMOIZE stores, as Python's len(memo) */
  tstor_value *none; /* one shared None */
  size_t max_values; /* the checkpoint may hold no more values than this */
} unpickler;

#define FAIL(up, code, ...) fail_at((up), (code), __VA_ARGS__)

static int fail_at(unpickler *up, int code, const char *fmt, ...) TSTOR__PRINTF_IO(3, 4);

static int fail_at(unpickler *up, int code, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return TSTOR__ERR(code, "data.pkl offset %zu: %s", up->op_at, msg);
}

static int need(unpickler *up, size_t n) {
  if ((size_t)(up->end - up->p) < n)
    return FAIL(up, TSTOR_EINVAL, "the pickle ends inside an opcode (%zu more bytes needed, %zu left)",
                n, (size_t)(up->end - up->p));
  return 0;
}

/* Reads an opcode's little-endian unsigned operand of width bytes (1, 2, 4 or
 * 8), every fixed-width argument's one reader, and steps past it. */
static int operand(unpickler *up, size_t width, uint64_t *out) {
  int rc = need(up, width);
  if (rc) return rc;
  uint64_t u = 0;
  for (size_t i = 0; i < width; i++) u |= (uint64_t)up->p[i] << (8 * i);
  up->p += width;
  *out = u;
  return 0;
}

static int push(unpickler *up, tstor_value *v) {
  if (!v) return TSTOR_ENOMEM;
  tstor_value **s = tstor__io_grow(up->stack, &up->stack_cap, up->sp, sizeof *s, 64,
                                   "data.pkl: out of memory for the stack");
  if (!s) return TSTOR_ENOMEM;
  up->stack = s;
  up->stack[up->sp++] = v;
  return 0;
}

/* The bottom of the current frame: values below the last MARK are not ours. */
static size_t frame_base(const unpickler *up) { return up->nmarks ? up->marks[up->nmarks - 1] : 0; }

static int pop(unpickler *up, tstor_value **out) {
  if (up->sp <= frame_base(up)) return FAIL(up, TSTOR_EINVAL, "the stack is empty");
  *out = up->stack[--up->sp];
  return 0;
}
static int top(unpickler *up, tstor_value **out) {
  if (up->sp <= frame_base(up)) return FAIL(up, TSTOR_EINVAL, "the stack is empty");
  *out = up->stack[up->sp - 1];
  return 0;
}

/* Pops the values since the last MARK: *items points at them (still in the
 * stack array, valid until the next push), *n is their number. */
static int pop_mark(unpickler *up, tstor_value ***items, size_t *n) {
  if (!up->nmarks) return FAIL(up, TSTOR_EINVAL, "no MARK to pop to");
  size_t base = up->marks[--up->nmarks];
  *items = up->stack ? up->stack + base : NULL; /* no push yet: no array to point into */
  *n = up->sp - base;
  up->sp = base;
  return 0;
}

static tstor_value *new_value(unpickler *up, int kind) { return tstor__value_alloc(up->ck, kind); }

static int push_string(unpickler *up, size_t len) {
  int rc = need(up, len);
  if (rc) return rc;
  if (!tstor__utf8_valid((const char *)up->p, len))
    return FAIL(up, TSTOR_EINVAL, "a string of %zu bytes that is not UTF-8", len);
  tstor_value *v = new_value(up, TSTOR_VALUE_STRING);
  if (!v) return TSTOR_ENOMEM;
  v->u.str.s = malloc(len + 1);
  if (!v->u.str.s) return TSTOR__ERR(TSTOR_ENOMEM, "data.pkl: out of memory for a %zu-byte string", len);
  memcpy(v->u.str.s, up->p, len);
  v->u.str.s[len] = '\0';
  v->u.str.len = len;
  up->p += len;
  return push(up, v);
}

static int push_int(unpickler *up, int64_t i) {
  tstor_value *v = new_value(up, TSTOR_VALUE_INT);
  if (!v) return TSTOR_ENOMEM;
  v->u.i = i;
  return push(up, v);
}

/* ------------------------------------------------------------- globals */

/* The permitted globals, as "module.name": what torch.save writes for a
 * state_dict. Everything else is refused by name, as torch.load(weights_only=
 * True) refuses it. */
static int resolve_global(unpickler *up, const char *module, size_t mlen, const char *name,
                          size_t nlen) {
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
      if (!(g = new_value(up, TSTOR__VALUE_GLOBAL))) return TSTOR_ENOMEM;
      g->u.i = known[i].which;
      return push(up, g);
    }
  /* torch.FloatStorage and the other typed storage classes */
  char buf[64];
  if (mlen == 5 && memcmp(module, "torch", 5) == 0 && nlen > 7 && nlen < sizeof buf &&
      memcmp(name + nlen - 7, "Storage", 7) == 0) {
    memcpy(buf, name, nlen);
    buf[nlen] = '\0';
    tstor_dtype dt;
    if (tstor_dtype_parse(buf, &dt) == 0) {
      if (!(g = new_value(up, TSTOR__VALUE_GLOBAL))) return TSTOR_ENOMEM;
      g->u.i = TSTOR__G_STORAGE_CLASS;
      g->u.tensor.ndim = (int)dt; /* u.i and u.tensor.ndim do not overlap */
      return push(up, g);
    }
  }
  return FAIL(up, TSTOR_EACCES,
              "global '%.*s.%.*s' is refused: only torch.save's weights are read "
              "(collections.OrderedDict, torch._utils._rebuild_tensor_v2/_rebuild_parameter, "
              "torch.*Storage), as torch.load(weights_only=True) reads them",
              (int)(mlen > 200 ? 200 : mlen), module, (int)(nlen > 200 ? 200 : nlen), name);
}

static int op_global(unpickler *up) {
  /* GLOBAL: "module\nname\n" */
  const uint8_t *m = up->p;
  const uint8_t *nl = memchr(m, '\n', (size_t)(up->end - m));
  if (!nl) return FAIL(up, TSTOR_EINVAL, "GLOBAL without a newline after the module");
  const uint8_t *n = nl + 1;
  const uint8_t *nl2 = memchr(n, '\n', (size_t)(up->end - n));
  if (!nl2) return FAIL(up, TSTOR_EINVAL, "GLOBAL without a newline after the name");
  up->p = nl2 + 1;
  return resolve_global(up, (const char *)m, (size_t)(nl - m), (const char *)n, (size_t)(nl2 - n));
}

static int op_stack_global(unpickler *up) {
  tstor_value *name = NULL, *module = NULL;
  int rc = pop(up, &name);
  if (!rc) rc = pop(up, &module);
  if (rc) return rc;
  if (name->kind != TSTOR_VALUE_STRING || module->kind != TSTOR_VALUE_STRING)
    return FAIL(up, TSTOR_EINVAL, "STACK_GLOBAL needs two strings");
  return resolve_global(up, module->u.str.s, module->u.str.len, name->u.str.s, name->u.str.len);
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
static int op_binpersid(unpickler *up) {
  tstor_value *pid = NULL;
  int rc = pop(up, &pid);
  if (rc) return rc;
  if (pid->kind != TSTOR_VALUE_TUPLE || pid->u.seq.n != 5)
    return FAIL(up, TSTOR_EINVAL, "a persistent id must be the 5-tuple ('storage', class, key, location, numel)");
  tstor_value **f = pid->u.seq.items;
  if (!is_str(f[0], "storage"))
    return FAIL(up, TSTOR_EACCES, "only persistent ids of storages are allowed");
  if (f[1]->kind != TSTOR__VALUE_GLOBAL || f[1]->u.i != TSTOR__G_STORAGE_CLASS)
    return FAIL(up, TSTOR_EINVAL, "a storage's class must be a torch.*Storage");
  if (f[2]->kind != TSTOR_VALUE_STRING)
    return FAIL(up, TSTOR_EINVAL, "a storage's key must be a string");
  const tstor_value *key = f[2];
  long idx = tstor__storage_find(up->ck, key->u.str.s, key->u.str.len);
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
    rc = tstor__storage_add(up->ck, key->u.str.s, key->u.str.len, dt, numel, named ? f[3]->u.str.s : "",
                            named ? f[3]->u.str.len : 0, &idx);
    if (rc) return rc;
  }
  tstor_value *s = new_value(up, TSTOR__VALUE_STORAGE);
  if (!s) return TSTOR_ENOMEM;
  s->u.i = idx;
  return push(up, s);
}

/* ------------------------------------------------------------- REDUCE */

static int int_tuple(unpickler *up, const tstor_value *t, const char *what, int64_t **out, int *n) {
  if (t->kind != TSTOR_VALUE_TUPLE)
    return FAIL(up, TSTOR_EINVAL, "a tensor's %s must be a tuple of ints", what);
  if (t->u.seq.n > TSTOR_TENSOR_MAX_DIM)
    return FAIL(up, TSTOR_EINVAL, "a tensor of %zu dimensions (at most %d)", t->u.seq.n,
                TSTOR_TENSOR_MAX_DIM);
  for (size_t i = 0; i < t->u.seq.n; i++) {
    const tstor_value *v = t->u.seq.items[i];
    if (v->kind != TSTOR_VALUE_INT || v->u.i < 0)
      return FAIL(up, TSTOR_EINVAL, "a tensor's %s must be non-negative ints", what);
    out[0][i] = v->u.i;
  }
  *n = (int)t->u.seq.n;
  return 0;
}

static int rebuild_tensor(unpickler *up, tstor_value **args, size_t nargs, int v2, tstor_value **out) {
  if (v2 ? (nargs != 6 && nargs != 7) : nargs != 4)
    return FAIL(up, TSTOR_EINVAL, "%s takes %s arguments, not %zu",
                v2 ? "_rebuild_tensor_v2" : "_rebuild_tensor", v2 ? "6 or 7" : "4", nargs);
  if (args[0]->kind != TSTOR__VALUE_STORAGE)
    return FAIL(up, TSTOR_EINVAL, "a tensor's first argument must be a storage");
  if (args[1]->kind != TSTOR_VALUE_INT || args[1]->u.i < 0)
    return FAIL(up, TSTOR_EINVAL, "a tensor's storage offset must be a non-negative int");
  /* Both tuples' lengths are known equal and bounded before either is
   * copied: the buffer holds exactly that many sizes and strides. */
  for (int k = 2; k <= 3; k++)
    if (args[k]->kind != TSTOR_VALUE_TUPLE)
      return FAIL(up, TSTOR_EINVAL, "a tensor's %s must be a tuple of ints", k == 2 ? "size" : "stride");
  size_t ndim = args[2]->u.seq.n;
  if (args[3]->u.seq.n != ndim)
    return FAIL(up, TSTOR_EINVAL, "a tensor of %zu sizes and %zu strides", ndim, args[3]->u.seq.n);
  tstor_value *t = new_value(up, TSTOR_VALUE_TENSOR);
  if (!t) return TSTOR_ENOMEM;
  if (ndim > TSTOR_TENSOR_MAX_DIM) ndim = TSTOR_TENSOR_MAX_DIM; /* int_tuple refuses it */
  t->u.tensor.sizes = malloc((2 * ndim + 1) * sizeof(int64_t));
  if (!t->u.tensor.sizes) return TSTOR__ERR(TSTOR_ENOMEM, "data.pkl: out of memory");
  t->u.tensor.strides = t->u.tensor.sizes + ndim;
  int nsz, nst;
  int rc = int_tuple(up, args[2], "size", &t->u.tensor.sizes, &nsz);
  if (!rc) rc = int_tuple(up, args[3], "stride", &t->u.tensor.strides, &nst);
  if (rc) return rc;
  t->u.tensor.ndim = nsz;
  t->u.tensor.storage = (long)args[0]->u.i;
  t->u.tensor.offset = args[1]->u.i;
  if (v2) {
    if (args[4]->kind != TSTOR_VALUE_BOOL)
      return FAIL(up, TSTOR_EINVAL, "a tensor's requires_grad must be a bool");
    t->requires_grad = (unsigned char)args[4]->u.i;
    if (args[5]->kind != TSTOR_VALUE_DICT)
      return FAIL(up, TSTOR_EINVAL, "a tensor's backward hooks must be an OrderedDict");
    if (nargs == 7 && args[6]->kind != TSTOR_VALUE_DICT && args[6]->kind != TSTOR_VALUE_NONE)
      return FAIL(up, TSTOR_EINVAL, "a tensor's metadata must be a dict or None");
  }
  *out = t;
  return 0;
}

static int rebuild_parameter(unpickler *up, tstor_value **args, size_t nargs, tstor_value **out) {
  if (nargs != 3) return FAIL(up, TSTOR_EINVAL, "_rebuild_parameter takes 3 arguments, not %zu", nargs);
  const tstor_value *src = args[0];
  if (src->kind != TSTOR_VALUE_TENSOR || args[1]->kind != TSTOR_VALUE_BOOL ||
      args[2]->kind != TSTOR_VALUE_DICT)
    return FAIL(up, TSTOR_EINVAL, "_rebuild_parameter needs (tensor, bool, OrderedDict)");
  tstor_value *t = new_value(up, TSTOR_VALUE_TENSOR);
  if (!t) return TSTOR_ENOMEM;
  size_t nd = (size_t)src->u.tensor.ndim;
  t->u.tensor.sizes = malloc((2 * nd + 1) * sizeof(int64_t));
  if (!t->u.tensor.sizes) return TSTOR__ERR(TSTOR_ENOMEM, "data.pkl: out of memory");
  memcpy(t->u.tensor.sizes, src->u.tensor.sizes, 2 * nd * sizeof(int64_t));
  t->u.tensor.strides = t->u.tensor.sizes + nd;
  t->u.tensor.ndim = src->u.tensor.ndim;
  t->u.tensor.storage = src->u.tensor.storage;
  t->u.tensor.offset = src->u.tensor.offset;
  t->requires_grad = (unsigned char)args[1]->u.i;
  *out = t;
  return 0;
}

/* REDUCE, BUILD and the opcodes after them each pop and check their own
 * operands: the kinds allowed and the messages differ per opcode. */
static int op_reduce(unpickler *up) {
  tstor_value *args = NULL, *fn = NULL;
  int rc = pop(up, &args);
  if (!rc) rc = top(up, &fn);
  if (rc) return rc;
  if (args->kind != TSTOR_VALUE_TUPLE) return FAIL(up, TSTOR_EINVAL, "REDUCE's arguments must be a tuple");
  if (fn->kind != TSTOR__VALUE_GLOBAL)
    return FAIL(up, TSTOR_EINVAL, "REDUCE calls a %s, not a permitted function",
                tstor_value_kind_name((tstor_value_kind)fn->kind));
  tstor_value *res = NULL;
  size_t n = args->u.seq.n;
  switch (fn->u.i) {
    case TSTOR__G_ORDEREDDICT:
      if (n != 0) return FAIL(up, TSTOR_EINVAL, "OrderedDict is rebuilt from (), not %zu arguments", n);
      if (!(res = new_value(up, TSTOR_VALUE_DICT))) return TSTOR_ENOMEM;
      res->ordered = 1;
      break;
    case TSTOR__G_REBUILD_TENSOR_V2:
    case TSTOR__G_REBUILD_TENSOR:
      rc = rebuild_tensor(up, args->u.seq.items, n, fn->u.i == TSTOR__G_REBUILD_TENSOR_V2, &res);
      break;
    case TSTOR__G_REBUILD_PARAMETER: rc = rebuild_parameter(up, args->u.seq.items, n, &res); break;
    default: return FAIL(up, TSTOR_EACCES, "a storage class cannot be called");
  }
  if (rc) return rc;
  up->stack[up->sp - 1] = res;
  return 0;
}

static int op_build(unpickler *up) {
  tstor_value *state = NULL, *inst = NULL;
  int rc = pop(up, &state);
  if (!rc) rc = top(up, &inst);
  if (rc) return rc;
  if (inst->kind != TSTOR_VALUE_DICT || state->kind != TSTOR_VALUE_DICT)
    return FAIL(up, TSTOR_EINVAL, "BUILD is only allowed to set an OrderedDict's attributes from a dict");
  if (!inst->u.seq.attrs) {
    inst->u.seq.attrs = state;
    return 0;
  }
  for (size_t i = 0; i < state->u.seq.n; i++)
    if ((rc = tstor__dict_set(inst->u.seq.attrs, state->u.seq.keys[i], state->u.seq.items[i])))
      return rc;
  return 0;
}

static int op_setitems(unpickler *up, tstor_value **items, size_t n) {
  tstor_value *d = NULL;
  int rc = top(up, &d);
  if (rc) return rc;
  if (d->kind != TSTOR_VALUE_DICT) return FAIL(up, TSTOR_EINVAL, "SETITEM(S) on a %s, not a dict",
                                               tstor_value_kind_name((tstor_value_kind)d->kind));
  if (n % 2) return FAIL(up, TSTOR_EINVAL, "SETITEMS with an odd number of values");
  for (size_t i = 0; i < n; i += 2) {
    int k = items[i]->kind;
    /* what Python can hash: tensors by identity, tuples by their items */
    if (k != TSTOR_VALUE_STRING && k != TSTOR_VALUE_INT && k != TSTOR_VALUE_BOOL && k != TSTOR_VALUE_NONE &&
        k != TSTOR_VALUE_FLOAT && k != TSTOR_VALUE_TUPLE && k != TSTOR_VALUE_TENSOR)
      return FAIL(up, TSTOR_EINVAL, "a dict key that is a %s",
                  k >= TSTOR__VALUE_GLOBAL ? "class or storage" : tstor_value_kind_name((tstor_value_kind)k));
    if ((rc = tstor__dict_set(d, items[i], items[i + 1]))) return rc;
  }
  return 0;
}

static int op_appends(unpickler *up, tstor_value **items, size_t n) {
  tstor_value *l = NULL;
  int rc = top(up, &l);
  if (rc) return rc;
  if (l->kind != TSTOR_VALUE_LIST) return FAIL(up, TSTOR_EINVAL, "APPEND(S) on a %s, not a list",
                                               l->kind >= TSTOR__VALUE_GLOBAL ? "class or storage" :
                                               tstor_value_kind_name((tstor_value_kind)l->kind));
  for (size_t i = 0; i < n; i++)
    if ((rc = tstor__seq_push(l, items[i]))) return rc;
  return 0;
}

static int make_tuple(unpickler *up, tstor_value **items, size_t n) {
  tstor_value *t = new_value(up, TSTOR_VALUE_TUPLE);
  if (!t) return TSTOR_ENOMEM;
  /* items may point into the stack array: copy before pushing */
  for (size_t i = 0; i < n; i++) {
    int rc = tstor__seq_push(t, items[i]);
    if (rc) return rc;
  }
  return push(up, t);
}

static memo_slot *memo_find(memo_slot *slots, size_t cap, uint64_t idx) {
  size_t mask = cap - 1, at = tstor__hash_u64(idx) & mask;
  while (slots[at].v && slots[at].idx != idx) at = (at + 1) & mask;
  return &slots[at];
}

static int memo_put(unpickler *up, uint64_t idx) {
  tstor_value *v = NULL;
  int rc = top(up, &v);
  if (rc) return rc;
  if (2 * (up->memo_len + 1) > up->memo_cap) {
    size_t cap = up->memo_cap ? up->memo_cap * 2 : 64;
    memo_slot *m = calloc(cap, sizeof *m);
    if (!m) return TSTOR__ERR(TSTOR_ENOMEM, "data.pkl: out of memory for the memo");
    for (size_t i = 0; i < up->memo_cap; i++)
      if (up->memo[i].v) *memo_find(m, cap, up->memo[i].idx) = up->memo[i];
    free(up->memo);
    up->memo = m;
    up->memo_cap = cap;
  }
  memo_slot *slot = memo_find(up->memo, up->memo_cap, idx);
  if (!slot->v) up->memo_len++;
  slot->idx = idx;
  slot->v = v;
  return 0;
}

static int memo_get(unpickler *up, uint64_t idx) {
  memo_slot *slot = up->memo_cap ? memo_find(up->memo, up->memo_cap, idx) : NULL;
  if (!slot || !slot->v) return FAIL(up, TSTOR_EINVAL, "memo index %llu was never stored", (unsigned long long)idx);
  return push(up, slot->v);
}

static int run(unpickler *up) {
  int rc = 0;
  for (;;) {
    if (up->p >= up->end) return FAIL(up, TSTOR_EINVAL, "the pickle ends without STOP");
    up->op_at = (size_t)(up->p - up->start);
    if (up->ck->nvalues > up->max_values)
      return FAIL(up, TSTOR_ERANGE, "more than %zu values, one per byte of the file they came from: "
                  "a pickle decompressed from fewer bytes than it builds values", up->max_values);
    uint8_t op = *up->p++;
    tstor_value *v = NULL, **items = NULL;
    size_t n = 0;
    uint64_t arg = 0;
    switch (op) {
      case 0x80: /* PROTO */
        if ((rc = operand(up, 1, &arg))) return rc;
        if (arg < 2 || arg > 5)
          return FAIL(up, TSTOR_EINVAL, "pickle protocol %u (torch.save writes 2 to 5)", (unsigned)arg);
        break;
      case 0x95: /* FRAME: a length hint, nothing to do */
        if ((rc = operand(up, 8, &arg))) return rc;
        break;
      case '.': /* STOP: the top value, whatever lies under it (as Python's load_stop) */
        if (up->sp == 0) return FAIL(up, TSTOR_EINVAL, "STOP with nothing on the stack");
        up->ck->root = up->stack[up->sp - 1];
        return 0;
      case '(': { /* MARK */
        size_t *m = tstor__io_grow(up->marks, &up->marks_cap, up->nmarks, sizeof *m, 32,
                                   "data.pkl: out of memory for marks");
        if (!m) return TSTOR_ENOMEM;
        up->marks = m;
        up->marks[up->nmarks++] = up->sp;
        break;
      }
      case 'N': rc = push(up, up->none); break;
      case 0x88: /* NEWTRUE */
      case 0x89: /* NEWFALSE */
        if (!(v = new_value(up, TSTOR_VALUE_BOOL))) return TSTOR_ENOMEM;
        v->u.i = op == 0x88;
        rc = push(up, v);
        break;
      case '}': rc = push(up, new_value(up, TSTOR_VALUE_DICT)); break;
      case ']': rc = push(up, new_value(up, TSTOR_VALUE_LIST)); break;
      case ')': rc = push(up, new_value(up, TSTOR_VALUE_TUPLE)); break;
      case 't': /* TUPLE */
        if ((rc = pop_mark(up, &items, &n))) return rc;
        rc = make_tuple(up, items, n);
        break;
      case 0x85: /* TUPLE1..3 */
      case 0x86:
      case 0x87:
        n = (size_t)(op - 0x84);
        if (up->sp - frame_base(up) < n) return FAIL(up, TSTOR_EINVAL, "TUPLE%zu with fewer values on the stack", n);
        up->sp -= n;
        rc = make_tuple(up, up->stack + up->sp, n);
        break;
      case 'J': /* BININT */
        if ((rc = operand(up, 4, &arg))) return rc;
        rc = push_int(up, (int32_t)(uint32_t)arg);
        break;
      case 'K': /* BININT1 */
      case 'M': /* BININT2 */
        if ((rc = operand(up, op == 'K' ? 1 : 2, &arg))) return rc;
        rc = push_int(up, (int64_t)arg);
        break;
      case 0x8a: { /* LONG1: n bytes, little-endian two's complement */
        if ((rc = operand(up, 1, &arg))) return rc;
        n = (size_t)arg;
        if ((rc = need(up, n))) return rc;
        /* More than 8 bytes is still a 64-bit int when the extra ones only
         * repeat the sign (a pickler need not write the shortest form). */
        uint8_t sign = n && (up->p[n - 1] & 0x80) ? 0xff : 0;
        for (size_t i = 8; i < n; i++)
          if (up->p[i] != sign || (up->p[7] & 0x80) != (sign & 0x80))
            return FAIL(up, TSTOR_ERANGE, "an int of %zu bytes does not fit in 64 bits", n);
        uint64_t u = 0;
        for (size_t i = 0; i < n && i < 8; i++) u |= (uint64_t)up->p[i] << (8 * i);
        if (n && n < 8 && (up->p[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
        up->p += n;
        int64_t s;
        memcpy(&s, &u, sizeof s);
        rc = push_int(up, s);
        break;
      }
      case 'G': { /* BINFLOAT: big-endian double */
        if ((rc = need(up, 8))) return rc;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++) u = u << 8 | up->p[i];
        up->p += 8;
        if (!(v = new_value(up, TSTOR_VALUE_FLOAT))) return TSTOR_ENOMEM;
        memcpy(&v->u.f, &u, sizeof u);
        rc = push(up, v);
        break;
      }
      case 'X':  /* BINUNICODE */
      case 0x8c: /* SHORT_BINUNICODE */
      case 'U':  /* SHORT_BINSTRING: a Python 2 str, read as text (torch's _maybe_decode_ascii) */
        if ((rc = operand(up, op == 'X' ? 4 : 1, &arg))) return rc;
        rc = push_string(up, (size_t)arg);
        break;
      case 0x8d: /* BINUNICODE8 */
        if ((rc = operand(up, 8, &arg))) return rc;
        if (arg > (uint64_t)(up->end - up->p))
          return FAIL(up, TSTOR_EINVAL, "a string of %llu bytes past the end of the pickle", (unsigned long long)arg);
        rc = push_string(up, (size_t)arg);
        break;
      case 'q': /* BINPUT */
      case 'r': /* LONG_BINPUT */
        if ((rc = operand(up, op == 'q' ? 1 : 4, &arg))) return rc;
        rc = memo_put(up, arg);
        break;
      case 0x94: /* MEMOIZE: at len(memo), which a repeated BINPUT does not grow */
        rc = memo_put(up, up->memo_len);
        break;
      case 'h': /* BINGET */
      case 'j': /* LONG_BINGET */
        if ((rc = operand(up, op == 'h' ? 1 : 4, &arg))) return rc;
        rc = memo_get(up, arg);
        break;
      case 'c': rc = op_global(up); break;
      case 0x93: rc = op_stack_global(up); break;
      case 'Q': rc = op_binpersid(up); break;
      case 'R': rc = op_reduce(up); break;
      case 'b': rc = op_build(up); break;
      case 'a': /* APPEND */
        if ((rc = pop(up, &v))) return rc;
        rc = op_appends(up, &v, 1);
        break;
      case 'e': /* APPENDS */
        if ((rc = pop_mark(up, &items, &n))) return rc;
        rc = op_appends(up, items, n);
        break;
      case 's': { /* SETITEM */
        tstor_value *kv[2] = {NULL, NULL};
        if ((rc = pop(up, &kv[1])) || (rc = pop(up, &kv[0]))) return rc;
        rc = op_setitems(up, kv, 2);
        break;
      }
      case 'u': /* SETITEMS */
        if ((rc = pop_mark(up, &items, &n))) return rc;
        rc = op_setitems(up, items, n);
        break;
      default:
        return FAIL(up, TSTOR_EACCES,
                    "opcode 0x%02x is refused: only the opcodes torch.save emits for weights are read",
                    op);
    }
    if (rc) return rc;
  }
}

int tstor__unpickle(tstor_checkpoint *ck, const uint8_t *data, size_t len, size_t max_values) {
  unpickler up;
  memset(&up, 0, sizeof up);
  up.ck = ck;
  up.max_values = max_values;
  up.start = up.p = data;
  up.end = data + len;
  int rc;
  if (!(up.none = tstor__value_alloc(ck, TSTOR_VALUE_NONE))) return TSTOR_ENOMEM;
  rc = run(&up);
  free(up.stack);
  free(up.marks);
  free(up.memo);
  return rc;
}
