/* The strict pickle machine: protocols 2 to 5, the opcodes of pickle.h's list
 * and nothing that executes. Globals, persistent ids, REDUCE and BUILD are
 * handed to the format's rules (torch_rules.c); without a rule they are
 * refused.
 *
 * Resources are bounded by the input: the stack, the marks and the memo hold
 * at most one entry per byte of pickle (the memo is a table of the indices
 * stored, like Python's dict, not an array as long as the largest), so a
 * hostile pickle cannot make us allocate more than a few times its own size.
 * Values, about 100 bytes each with their bookkeeping, are bounded by the
 * caller's max_values. */
#include "io_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Python's memo is a dict: any index, stored in any order. */
typedef struct memo_slot {
  uint64_t idx;
  tstor_value *v; /* NULL: an empty slot */
} memo_slot;

struct tstor__io_unpickler {
  tstor_checkpoint *ck;
  tstor__io_cursor *cur;
  const tstor__io_pickle_rules *rules;
  uint8_t op; /* the opcode being run */
  tstor_value **stack;
  size_t sp, stack_cap;
  size_t *marks;
  size_t nmarks, marks_cap;
  tstor_value **dense; /* indices 0 to ndense - 1, as picklers number them */
  size_t ndense, dense_cap;
  memo_slot *memo; /* any other index: open addressing, at most half full */
  size_t memo_cap, nother;
  size_t memo_len;   /* indices stored: where MEMOIZE stores, as Python's len(memo) */
  tstor_value *none; /* one shared None */
  /* False and True, shared as None is (made on first use): singletons in
   * Python too, and one a tensor (requires_grad). Ints are not shared: a
   * caller may give one a GGUF type of its own (tstor_value_set_gguf_type). */
  tstor_value *bools[2];
  size_t max_values;
  tstor_value *result; /* set by STOP */
};

typedef int (*load_fn)(tstor__io_unpickler *up);

/* ------------------------------------------------------- for the rules */

tstor_value *tstor__io_unpickler_value(tstor__io_unpickler *up, int kind) {
  return tstor__io_value_alloc(up->ck, kind);
}
void *tstor__io_unpickler_state(const tstor__io_unpickler *up) {
  return up->rules ? up->rules->state : NULL;
}
tstor_checkpoint *tstor__io_unpickler_checkpoint(const tstor__io_unpickler *up) { return up->ck; }

int tstor__io_unpickler_fail(const tstor__io_unpickler *up, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = tstor__io_cur_vfail(up->cur, code, fmt, ap);
  va_end(ap);
  return rc;
}

#define FAIL(up, code, ...) tstor__io_unpickler_fail((up), (code), __VA_ARGS__)

/* ------------------------------------------------------------ the stack */

static int need(tstor__io_unpickler *up, size_t n) {
  if (tstor__io_cur_can_read(up->cur, n)) return 0;
  return tstor__io_cur_short(up->cur,
                             "the pickle ends inside an opcode (%zu more bytes needed, %zu left)",
                             n, tstor__io_cur_left(up->cur));
}

/* An opcode's little-endian unsigned operand of width bytes. */
static int operand(tstor__io_unpickler *up, size_t width, uint64_t *out) {
  int rc = need(up, width);
  return rc ? rc : tstor__io_cur_uint(up->cur, width, false, out);
}

static int push(tstor__io_unpickler *up, tstor_value *v) {
  if (!v) return TSTOR_ENOMEM;
  tstor_value **s = tstor__io_grow(up->stack, &up->stack_cap, up->sp, sizeof *s, 64,
                                   "pickle: out of memory for the stack");
  if (!s) return TSTOR_ENOMEM;
  up->stack = s;
  up->stack[up->sp++] = v;
  return 0;
}

/* The bottom of the current frame: values below the last MARK are not ours. */
static size_t frame_base(const tstor__io_unpickler *up) {
  return up->nmarks ? up->marks[up->nmarks - 1] : 0;
}

static int pop(tstor__io_unpickler *up, tstor_value **out) {
  if (up->sp <= frame_base(up)) return FAIL(up, TSTOR_EINVAL, "the stack is empty");
  *out = up->stack[--up->sp];
  return 0;
}

static int top(tstor__io_unpickler *up, tstor_value **out) {
  if (up->sp <= frame_base(up)) return FAIL(up, TSTOR_EINVAL, "the stack is empty");
  *out = up->stack[up->sp - 1];
  return 0;
}

/* Pops the values since the last MARK: *items points at them (still in the
 * stack array, valid until the next push), *n is their number. */
static int pop_mark(tstor__io_unpickler *up, tstor_value ***items, size_t *n) {
  if (!up->nmarks) return FAIL(up, TSTOR_EINVAL, "no MARK to pop to");
  size_t base = up->marks[--up->nmarks];
  *items = up->stack ? up->stack + base : NULL; /* no push yet: no array to point into */
  *n = up->sp - base;
  up->sp = base;
  return 0;
}

static tstor_value *new_value(tstor__io_unpickler *up, int kind) {
  return tstor__io_value_alloc(up->ck, kind);
}

static int push_int(tstor__io_unpickler *up, int64_t i) {
  tstor_value *v = new_value(up, TSTOR_VALUE_INT);
  if (!v) return TSTOR_ENOMEM;
  v->u.i = i;
  return push(up, v);
}

static int push_bool(tstor__io_unpickler *up, bool b) {
  tstor_value *v = up->bools[b];
  if (!v) {
    if (!(v = new_value(up, TSTOR_VALUE_BOOL))) return TSTOR_ENOMEM;
    v->u.i = b;
    up->bools[b] = v;
  }
  return push(up, v);
}

static int push_string(tstor__io_unpickler *up, size_t len) {
  const uint8_t *p;
  int rc = need(up, len);
  if (!rc) rc = tstor__io_cur_bytes(up->cur, len, &p);
  if (rc) return rc;
  if (!tstor__io_utf8_valid((const char *)p, len))
    return FAIL(up, TSTOR_EINVAL, "a string of %zu bytes that is not UTF-8", len);
  tstor_value *v = new_value(up, TSTOR_VALUE_STRING);
  if (!v) return TSTOR_ENOMEM;
  if (!(v->u.str.s = tstor__io_malloc(len + 1))) return TSTOR__ERR(TSTOR_ENOMEM, "pickle: out of memory for a %zu-byte string", len);
  memcpy(v->u.str.s, p, len);
  v->u.str.s[len] = '\0';
  v->u.str.len = len;
  return push(up, v);
}

static const char *kind_name(int kind) {
  return kind >= TSTOR__VALUE_GLOBAL ? "class or storage" : tstor_value_kind_name((tstor_value_kind)kind);
}

/* ---------------------------------------------------------- the opcodes
 * Each takes its operands from the input and the stack and leaves its result
 * on the stack, as pickletools documents it. */

static int load_proto(tstor__io_unpickler *up) {
  uint64_t v;
  int rc = operand(up, 1, &v);
  if (!rc && (v < 2 || v > 5))
    rc = FAIL(up, TSTOR_EINVAL, "pickle protocol %u (torch.save writes 2 to 5)", (unsigned)v);
  return rc;
}

/* a length hint, nothing to do */
static int load_frame(tstor__io_unpickler *up) {
  uint64_t v;
  return operand(up, 8, &v);
}

/* the top value, whatever lies under it (as Python's load_stop) */
static int load_stop(tstor__io_unpickler *up) {
  if (up->sp == 0) return FAIL(up, TSTOR_EINVAL, "STOP with nothing on the stack");
  up->result = up->stack[up->sp - 1];
  return 0;
}

static int load_mark(tstor__io_unpickler *up) {
  size_t *m = tstor__io_grow(up->marks, &up->marks_cap, up->nmarks, sizeof *m, 32, "pickle: out of memory for marks");
  if (!m) return TSTOR_ENOMEM;
  up->marks = m;
  up->marks[up->nmarks++] = up->sp;
  return 0;
}

static int load_none(tstor__io_unpickler *up) { return push(up, up->none); }

static int load_bool(tstor__io_unpickler *up) { return push_bool(up, up->op == TSTOR__OP_NEWTRUE); }

static int load_binint(tstor__io_unpickler *up) {
  uint64_t v;
  int rc = operand(up, 4, &v);
  return rc ? rc : push_int(up, (int32_t)(uint32_t)v);
}

static int load_binint1(tstor__io_unpickler *up) {
  uint64_t v;
  int rc = operand(up, 1, &v);
  return rc ? rc : push_int(up, (int64_t)v);
}

static int load_binint2(tstor__io_unpickler *up) {
  uint64_t v;
  int rc = operand(up, 2, &v);
  return rc ? rc : push_int(up, (int64_t)v);
}

/* Python 2's opcodes, where the rules take them: refused as any other
 * opcode the machine does not read otherwise. */
static int python2_only(tstor__io_unpickler *up) {
  if (up->rules && up->rules->python2) return 0;
  return FAIL(up, TSTOR_EACCES,
              "opcode 0x%02x is refused: only the opcodes torch.save emits for weights are read",
              up->op);
}

/* C's strtol(s, &end, 0) over the whole line: blanks, a sign, then hex after
 * "0x", octal after a 0, else decimal. false where it stops early or
 * overflows. */
static bool strtol_line(const uint8_t *p, size_t n, int64_t *out) {
  size_t i = 0;
  while (i < n && (p[i] == ' ' || (p[i] >= '\t' && p[i] <= '\r'))) i++;
  bool neg = i < n && p[i] == '-';
  if (i < n && (p[i] == '+' || p[i] == '-')) i++;
  unsigned base = 10;
  if (i + 2 < n && p[i] == '0' && (p[i + 1] | 0x20) == 'x' && isxdigit(p[i + 2]))
    base = 16, i += 2;
  else if (i < n && p[i] == '0')
    base = 8;
  uint64_t v = 0;
  size_t first = i;
  for (; i < n; i++) {
    unsigned d = isdigit(p[i])    ? (unsigned)(p[i] - '0')
                 : isxdigit(p[i]) ? (unsigned)((p[i] | 0x20) - 'a' + 10)
                                  : 99;
    if (d >= base || v > ((uint64_t)INT64_MAX + 1 - d) / base) return false;
    v = v * base + d;
  }
  if (i == first || v > (uint64_t)INT64_MAX + neg) return false;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

/* A decimal line, as CPython's load_int reads it: strtol, else Python's
 * int(s, 0); "00" and "01" (any two bytes strtol reads as 0 or 1) are False
 * and True, as protocol 0 wrote bools. */
static int load_int(tstor__io_unpickler *up) {
  const uint8_t *p;
  size_t n;
  int64_t v;
  int rc = python2_only(up);
  if (!rc) rc = tstor__io_cur_line(up->cur, "INT", &p, &n);
  if (rc) return rc;
  if (strtol_line(p, n, &v)) {
    if (n != 2 || (v != 0 && v != 1)) return push_int(up, v);
    return push_bool(up, v == 1);
  }
  if ((rc = tstor__io_parse_int((const char *)p, n, 0, &v)) == 0) return push_int(up, v);
  return rc == TSTOR_ERANGE ? FAIL(up, TSTOR_ERANGE, "an int that does not fit in 64 bits")
                            : FAIL(up, TSTOR_EINVAL, "INT of a line that is no int");
}

/* n bytes, little-endian two's complement. More than 8 bytes is still a
 * 64-bit int when the extra ones only repeat the sign (a pickler need not
 * write the shortest form). */
static int load_long1(tstor__io_unpickler *up) {
  uint64_t n;
  const uint8_t *p;
  int rc = operand(up, 1, &n);
  if (!rc) rc = need(up, (size_t)n);
  if (!rc) rc = tstor__io_cur_bytes(up->cur, (size_t)n, &p);
  if (rc) return rc;
  uint8_t sign = n && (p[n - 1] & 0x80) ? 0xff : 0;
  for (size_t i = 8; i < n; i++)
    if (p[i] != sign || (p[7] & 0x80) != (sign & 0x80))
      return FAIL(up, TSTOR_ERANGE, "an int of %zu bytes does not fit in 64 bits", (size_t)n);
  uint64_t u = 0;
  for (size_t i = 0; i < n && i < 8; i++) u |= (uint64_t)p[i] << (8 * i);
  if (n && n < 8 && (p[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
  int64_t s;
  memcpy(&s, &u, sizeof s);
  return push_int(up, s);
}

/* a big-endian double */
static int load_binfloat(tstor__io_unpickler *up) {
  uint64_t u;
  int rc = need(up, 8);
  if (!rc) rc = tstor__io_cur_uint(up->cur, 8, true, &u);
  if (rc) return rc;
  tstor_value *v = new_value(up, TSTOR_VALUE_FLOAT);
  if (!v) return TSTOR_ENOMEM;
  memcpy(&v->u.f, &u, sizeof u);
  return push(up, v);
}

static int load_binunicode(tstor__io_unpickler *up) {
  uint64_t len;
  int rc = operand(up, 4, &len);
  return rc ? rc : push_string(up, (size_t)len);
}

/* SHORT_BINUNICODE, and SHORT_BINSTRING: a Python 2 str, read as text
 * (torch's _maybe_decode_ascii) */
static int load_short_binunicode(tstor__io_unpickler *up) {
  uint64_t len;
  int rc = operand(up, 1, &len);
  return rc ? rc : push_string(up, (size_t)len);
}

/* a Python 2 str of a signed 4-byte length, read as text (torch.load reads
 * with encoding="utf-8") */
static int load_binstring(tstor__io_unpickler *up) {
  uint64_t len;
  int rc = python2_only(up);
  if (!rc) rc = operand(up, 4, &len);
  if (rc) return rc;
  if (len >> 31) return FAIL(up, TSTOR_EINVAL, "BINSTRING of a negative length");
  return push_string(up, (size_t)len);
}

static int load_binunicode8(tstor__io_unpickler *up) {
  uint64_t len;
  int rc = operand(up, 8, &len);
  if (rc) return rc;
  if (len > tstor__io_cur_left(up->cur))
    return tstor__io_cur_short(up->cur, "a string of %llu bytes past the end of the pickle",
                               (unsigned long long)len);
  return push_string(up, (size_t)len);
}

static int load_empty_dict(tstor__io_unpickler *up) {
  return push(up, new_value(up, TSTOR_VALUE_DICT));
}
static int load_empty_list(tstor__io_unpickler *up) {
  return push(up, new_value(up, TSTOR_VALUE_LIST));
}
static int load_empty_tuple(tstor__io_unpickler *up) {
  return push(up, new_value(up, TSTOR_VALUE_TUPLE));
}

static int make_tuple(tstor__io_unpickler *up, tstor_value **items, size_t n) {
  tstor_value *t = new_value(up, TSTOR_VALUE_TUPLE);
  if (!t) return TSTOR_ENOMEM;
  /* items may point into the stack array: copied before the push, into an
   * array of the tuple's length (a tuple never grows) */
  if (n) {
    if (!(t->u.seq.items = tstor__io_malloc(n * sizeof *items)))
      return TSTOR__ERR(TSTOR_ENOMEM, "pickle: out of memory for a tuple of %zu", n);
    memcpy(t->u.seq.items, items, n * sizeof *items);
    t->u.seq.n = t->u.seq.cap = n;
  }
  return push(up, t);
}

static int load_tuple(tstor__io_unpickler *up) {
  tstor_value **items = NULL;
  size_t n = 0;
  int rc = pop_mark(up, &items, &n);
  return rc ? rc : make_tuple(up, items, n);
}

static int load_tuple_n(tstor__io_unpickler *up) {
  size_t n = (size_t)(up->op - TSTOR__OP_TUPLE1 + 1);
  if (up->sp - frame_base(up) < n) return FAIL(up, TSTOR_EINVAL, "TUPLE%zu with fewer values on the stack", n);
  up->sp -= n;
  return make_tuple(up, up->stack + up->sp, n);
}

static int extend_list(tstor__io_unpickler *up, tstor_value **items, size_t n) {
  tstor_value *l = NULL;
  int rc = top(up, &l);
  if (rc) return rc;
  if (l->kind != TSTOR_VALUE_LIST) return FAIL(up, TSTOR_EINVAL, "APPEND(S) on a %s, not a list", kind_name(l->kind));
  for (size_t i = 0; i < n && !rc; i++) rc = tstor__io_seq_push(l, items[i]);
  return rc;
}

static int load_append(tstor__io_unpickler *up) {
  tstor_value *v;
  int rc = pop(up, &v);
  return rc ? rc : extend_list(up, &v, 1);
}

static int load_appends(tstor__io_unpickler *up) {
  tstor_value **items = NULL;
  size_t n = 0;
  int rc = pop_mark(up, &items, &n);
  return rc ? rc : extend_list(up, items, n);
}

static int set_items(tstor__io_unpickler *up, tstor_value **items, size_t n) {
  tstor_value *d = NULL;
  int rc = top(up, &d);
  if (rc) return rc;
  /* as PyTorch 2.x's weights_only loader: items are set on a dict,
   * OrderedDict or Counter only, never through another object's __setitem__ */
  if (d->kind != TSTOR_VALUE_DICT)
    return FAIL(up, TSTOR_EINVAL,
                "SETITEM(S) on a %s, not a dict: only a dict, OrderedDict or Counter takes items",
                kind_name(d->kind));
  if (n % 2) return FAIL(up, TSTOR_EINVAL, "SETITEMS with an odd number of values");
  for (size_t i = 0; i < n; i += 2) {
    int k = items[i]->kind;
    /* what Python can hash: tensors by identity, tuples by their items, bytes
     * but not a bytearray (the value layer refuses the rest tstor keeps apart:
     * a complex, a torch.device) */
    if (k != TSTOR_VALUE_STRING && k != TSTOR_VALUE_INT && k != TSTOR_VALUE_BOOL &&
        k != TSTOR_VALUE_NONE && k != TSTOR_VALUE_FLOAT && k != TSTOR_VALUE_TUPLE &&
        k != TSTOR_VALUE_TENSOR &&
        (k != TSTOR_VALUE_BYTES || items[i]->pyclass == TSTOR__CLASS_BYTEARRAY))
      return FAIL(up, TSTOR_EINVAL, "a dict key that is a %s",
                  items[i]->pyclass == TSTOR__CLASS_BYTEARRAY ? "bytearray" : kind_name(k));
    if ((rc = tstor__io_dict_set(d, items[i], items[i + 1]))) return rc;
  }
  return 0;
}

static int load_setitem(tstor__io_unpickler *up) {
  tstor_value *kv[2] = {NULL, NULL};
  int rc = pop(up, &kv[1]);
  if (!rc) rc = pop(up, &kv[0]);
  return rc ? rc : set_items(up, kv, 2);
}

static int load_setitems(tstor__io_unpickler *up) {
  tstor_value **items = NULL;
  size_t n = 0;
  int rc = pop_mark(up, &items, &n);
  return rc ? rc : set_items(up, items, n);
}

static memo_slot *memo_find(memo_slot *slots, size_t cap, uint64_t idx) {
  size_t mask = cap - 1, at = tstor__io_hash_u64(idx) & mask;
  while (slots[at].v && slots[at].idx != idx) at = (at + 1) & mask;
  return &slots[at];
}

/* The slot of idx in the table of other indices, NULL where the table is empty. */
static memo_slot *memo_other(tstor__io_unpickler *up, uint64_t idx) {
  return up->memo_cap ? memo_find(up->memo, up->memo_cap, idx) : NULL;
}

/* Picklers store the indices 0, 1, 2, ... in turn: those go into a plain
 * array (one pointer each, no hash); any other order into the table. An
 * index lives in one of the two: the array takes only the index after its
 * last, and only when the table does not hold it already. */
static int memo_put(tstor__io_unpickler *up, uint64_t idx) {
  tstor_value *v = NULL;
  int rc = top(up, &v);
  if (rc) return rc;
  if (idx < up->ndense) {
    up->dense[idx] = v;
    return 0;
  }
  memo_slot *other = memo_other(up, idx);
  if (idx == up->ndense && !(other && other->v)) {
    tstor_value **d = tstor__io_grow(up->dense, &up->dense_cap, up->ndense, sizeof *d, 64,
                                     "pickle: out of memory for the memo");
    if (!d) return TSTOR_ENOMEM;
    up->dense = d;
    d[up->ndense++] = v;
    up->memo_len++;
    return 0;
  }
  if (2 * (up->nother + 1) > up->memo_cap) {
    size_t cap = up->memo_cap ? up->memo_cap * 2 : 64;
    memo_slot *m = tstor__io_calloc(cap, sizeof *m);
    if (!m) return TSTOR__ERR(TSTOR_ENOMEM, "pickle: out of memory for the memo");
    for (size_t i = 0; i < up->memo_cap; i++)
      if (up->memo[i].v) *memo_find(m, cap, up->memo[i].idx) = up->memo[i];
    tstor__io_free(up->memo);
    up->memo = m;
    up->memo_cap = cap;
  }
  memo_slot *slot = memo_find(up->memo, up->memo_cap, idx);
  if (!slot->v) {
    up->memo_len++;
    up->nother++;
  }
  slot->idx = idx;
  slot->v = v;
  return 0;
}

static int memo_get(tstor__io_unpickler *up, uint64_t idx) {
  if (idx < up->ndense) return push(up, up->dense[idx]);
  memo_slot *slot = memo_other(up, idx);
  if (!slot || !slot->v) return FAIL(up, TSTOR_EINVAL, "memo index %llu was never stored", (unsigned long long)idx);
  return push(up, slot->v);
}

static int load_binput(tstor__io_unpickler *up) {
  uint64_t i;
  int rc = operand(up, 1, &i);
  return rc ? rc : memo_put(up, i);
}

static int load_long_binput(tstor__io_unpickler *up) {
  uint64_t i;
  int rc = operand(up, 4, &i);
  return rc ? rc : memo_put(up, i);
}

/* at len(memo), which a repeated BINPUT does not grow */
static int load_memoize(tstor__io_unpickler *up) { return memo_put(up, up->memo_len); }

static int load_binget(tstor__io_unpickler *up) {
  uint64_t i;
  int rc = operand(up, 1, &i);
  return rc ? rc : memo_get(up, i);
}

static int load_long_binget(tstor__io_unpickler *up) {
  uint64_t i;
  int rc = operand(up, 4, &i);
  return rc ? rc : memo_get(up, i);
}

static int find_class(tstor__io_unpickler *up, const char *module, size_t mlen, const char *name,
                      size_t nlen) {
  tstor_value *g = NULL;
  if (!up->rules || !up->rules->find_class)
    return FAIL(up, TSTOR_EACCES, "global '%.*s.%.*s' is refused: this pickle may name none",
                (int)(mlen > 200 ? 200 : mlen), module, (int)(nlen > 200 ? 200 : nlen), name);
  int rc = up->rules->find_class(up, module, mlen, name, nlen, &g);
  return rc ? rc : push(up, g);
}

/* "module\nname\n" */
static int load_global(tstor__io_unpickler *up) {
  const uint8_t *m, *n;
  size_t mlen, nlen;
  int rc = tstor__io_cur_line(up->cur, "GLOBAL's module", &m, &mlen);
  if (!rc) rc = tstor__io_cur_line(up->cur, "GLOBAL's name", &n, &nlen);
  return rc ? rc : find_class(up, (const char *)m, mlen, (const char *)n, nlen);
}

static int load_stack_global(tstor__io_unpickler *up) {
  tstor_value *name = NULL, *module = NULL;
  int rc = pop(up, &name);
  if (!rc) rc = pop(up, &module);
  if (rc) return rc;
  if (name->kind != TSTOR_VALUE_STRING || module->kind != TSTOR_VALUE_STRING)
    return FAIL(up, TSTOR_EINVAL, "STACK_GLOBAL needs two strings");
  return find_class(up, module->u.str.s, module->u.str.len, name->u.str.s, name->u.str.len);
}

static int load_binpersid(tstor__io_unpickler *up) {
  tstor_value *pid = NULL, *v = NULL;
  int rc = pop(up, &pid);
  if (rc) return rc;
  if (!up->rules || !up->rules->persistent_load)
    return FAIL(up, TSTOR_EACCES, "a persistent id, which this pickle may not hold");
  return (rc = up->rules->persistent_load(up, pid, &v)) ? rc : push(up, v);
}

/* REDUCE's arguments as Python's func(*args) takes them apart: a tuple's
 * items, or a list's, a dict's keys, a string's characters, a bytes' ints.
 * A set is taken only with at most one item, since Python's order of its
 * items is its hashes'. */
static int reduce_args(tstor__io_unpickler *up, tstor_value *args, tstor_value **out) {
  int k = args->kind;
  bool text = k == TSTOR_VALUE_STRING || k == TSTOR_VALUE_BYTES;
  if (!text && k != TSTOR_VALUE_TUPLE && k != TSTOR_VALUE_LIST && k != TSTOR_VALUE_DICT &&
      !(k == TSTOR_VALUE_SET && args->u.seq.n <= 1))
    return FAIL(up, TSTOR_EINVAL,
                "REDUCE's arguments must be a tuple (or a list, dict, str or bytes, which "
                "func(*args) takes apart), not a %s",
                kind_name(k));
  /* no permitted function takes more than 8 arguments: torch.load fails
   * them all, and a long str would cost a value a character */
  if (k != TSTOR_VALUE_TUPLE && (text ? args->u.str.len > 64 : args->u.seq.n > 16))
    return FAIL(up, TSTOR_EINVAL, "REDUCE with more arguments than any permitted function takes");
  return tstor__io_iterate(tstor__io_unpickler_checkpoint(up), args, out);
}

static int load_reduce(tstor__io_unpickler *up) {
  tstor_value *args = NULL, *fn = NULL, *res = NULL;
  int rc = pop(up, &args);
  if (!rc) rc = top(up, &fn);
  if (!rc) rc = reduce_args(up, args, &args);
  if (rc) return rc;
  if (fn->kind != TSTOR__VALUE_GLOBAL || !up->rules || !up->rules->reduce)
    return FAIL(up, TSTOR_EINVAL, "REDUCE calls a %s, not a permitted function", kind_name(fn->kind));
  if ((rc = up->rules->reduce(up, fn, args, &res))) return rc;
  up->stack[up->sp - 1] = res;
  return 0;
}

static int load_build(tstor__io_unpickler *up) {
  tstor_value *state = NULL, *inst = NULL;
  int rc = pop(up, &state);
  if (!rc) rc = top(up, &inst);
  if (rc) return rc;
  if (!up->rules || !up->rules->build) return FAIL(up, TSTOR_EINVAL, "BUILD, which this pickle may not hold");
  return up->rules->build(up, inst, state);
}

/* ---------------------------------------------------------- the machine */

static const load_fn dispatch[256] = {
#define TSTOR__OPCODE_LOADER(name, byte, reader) [byte] = load_##reader,
    TSTOR__PICKLE_OPCODES(TSTOR__OPCODE_LOADER)
#undef TSTOR__OPCODE_LOADER
};

static int run(tstor__io_unpickler *up) {
  while (!up->result) {
    tstor__io_cursor *c = up->cur;
    c->item = c->off;
    if (tstor__io_cur_at_end(c)) return tstor__io_cur_short(c, "the pickle ends without STOP");
    if (up->ck->nvalues > up->max_values)
      return FAIL(up, TSTOR_ERANGE, "more than %zu values, one per byte of the file they came from: "
                  "a pickle decompressed from fewer bytes than it builds values", up->max_values);
    up->op = c->data[c->off++];
    load_fn load = dispatch[up->op];
    if (!load)
      return FAIL(up, TSTOR_EACCES, "opcode 0x%02x is refused: only the opcodes torch.save emits for weights are read",
                  up->op);
    int rc = load(up);
    if (rc) return rc;
  }
  return 0;
}

int tstor__io_unpickle(tstor_checkpoint *ck, tstor__io_cursor *cur,
                       const tstor__io_pickle_rules *rules, size_t max_values,
                       tstor_value **result) {
  tstor__io_unpickler up;
  memset(&up, 0, sizeof up);
  up.ck = ck;
  up.cur = cur;
  up.rules = rules;
  up.max_values = max_values;
  *result = NULL;
  if (!(up.none = tstor__io_value_alloc(ck, TSTOR_VALUE_NONE))) return TSTOR_ENOMEM;
  int rc = run(&up);
  if (!rc) *result = up.result;
  tstor__io_free(up.stack);
  tstor__io_free(up.marks);
  tstor__io_free(up.memo);
  tstor__io_free(up.dense);
  return rc;
}
