/* The names of a checkpoint's values, as tstor inspect prints them, and the
 * lookups and walks over them (serialize.h's tstor_checkpoint_visit and
 * tstor_checkpoint_find). Each value has two names:
 *
 *   dotted  model.layer1.weight    dict string keys joined with '.', [i] for
 *                                  list and tuple items, [KEY] for other keys,
 *                                  NAME@ for an OrderedDict's attributes: what
 *                                  people write, and what safetensors files
 *                                  hold; two values may share one ({"a.b": x}
 *                                  and {"a": {"b": y}}).
 *   exact   ['model']['layer1.weight']
 *                                  every key as a Python subscript, strings
 *                                  quoted and escaped: never shared.
 *
 * The walk enters each container once, but names a value under every path to
 * it, and a small file can nest long keys deep over a value met a hundred
 * thousand times: it is bounded by the bytes of the names it builds, not by
 * the file's structure, and stops past them. */
#include "io_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct names {
  tstor_value_name *e; /* in tree order */
  size_t n, cap;
  size_t bytes, budget; /* of names built so far, and the most that may be */
  int cut;              /* 1: the walk stopped at the budget */
  int failed;           /* 1: out of memory */
  const void **seen;    /* containers walked: open addressing */
  size_t seen_cap, nseen;
} names;

/* 64 MiB of names, or 16 bytes for each byte of the file when that is more:
 * a large model is never cut, and a small hostile file cannot cost
 * gigabytes. */
static size_t names_budget(uint64_t file_bytes) {
  const size_t floor = (size_t)64 << 20;
  return file_bytes > floor / 16 ? (file_bytes > SIZE_MAX / 16 ? SIZE_MAX : (size_t)file_bytes * 16)
                                 : floor;
}

/* ------------------------------------------------------------- text */

/* A string that grows; `failed` once an allocation did not. */
typedef struct text {
  char *p;
  size_t len, cap;
  int failed;
} text;

static void put(text *t, const char *s, size_t n) {
  if (t->failed) return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 64;
    while (cap < t->len + n + 1) cap *= 2;
    char *p = tstor__io_realloc(t->p, cap);
    if (!p) {
      t->failed = 1;
      return;
    }
    t->p = p;
    t->cap = cap;
  }
  memcpy(t->p + t->len, s, n);
  t->len += n;
  t->p[t->len] = '\0';
}

static void putf(text *t, const char *fmt, ...) {
  char buf[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  put(t, buf, n < 0 ? 0 : (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* s[0..n) as the inside of a Python string literal in single quotes, as
 * repr() writes it: the quote and the backslash escaped, control characters
 * (C0, DEL and, in UTF-8, C1) as \n, \r, \t or \xNN. So an exact name holds
 * nothing a terminal acts on. */
static void put_quoted(text *t, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (size_t i = 0; i < n; i++) {
    unsigned c = p[i];
    if (c == '\\' || c == '\'') {
      putf(t, "\\%c", c);
    } else if (c == '\n' || c == '\r' || c == '\t') {
      putf(t, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
    } else if (c < 0x20 || c == 0x7f) {
      putf(t, "\\x%02x", c);
    } else if (c == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f) {
      putf(t, "\\x%02x", p[++i]);
    } else {
      put(t, s + i, 1);
    }
  }
}

/* The name of item i of container v after `path` into t: dotted or exact. */
static void put_segment(text *t, const char *path, const tstor_value *v, size_t i, int dotted) {
  const tstor_value *key = tstor_value_key(v, i);
  tstor_value_kind k = key ? tstor_value_kind_of(key) : TSTOR_VALUE_NONE;
  size_t n = 0;
  const char *s = key ? tstor_value_string(key, &n) : NULL;
  put(t, path, strlen(path));
  if (!key) {
    putf(t, "[%zu]", i);
  } else if (k == TSTOR_VALUE_STRING && dotted && n > 0 && strlen(s) == n) {
    size_t plen = strlen(path);
    if (plen && path[plen - 1] != '@') put(t, ".", 1);
    put(t, s, n);
  } else if (k == TSTOR_VALUE_STRING || k == TSTOR_VALUE_BYTES) {
    put(t, k == TSTOR_VALUE_BYTES ? "[b'" : "['", k == TSTOR_VALUE_BYTES ? 3 : 2);
    put_quoted(t, s, n);
    put(t, "']", 2);
  } else if (k == TSTOR_VALUE_INT) {
    putf(t, "[%lld]", (long long)tstor_value_int(key));
  } else if (k == TSTOR_VALUE_FLOAT) {
    char f[64];
    double d = tstor_value_float(key);
    tstor_dtype_format(TSTOR_FLOAT64, &d, f, sizeof f, NULL);
    putf(t, "[%s]", f);
  } else if (k == TSTOR_VALUE_BOOL) {
    putf(t, "[%s]", tstor_value_bool(key) ? "True" : "False");
  } else if (k == TSTOR_VALUE_NONE) {
    put(t, "[None]", 6);
  } else { /* a tuple or other key: its kind and place, unique in v */
    putf(t, "[%s #%zu]", tstor_value_kind_name(k), i);
  }
}

/* ------------------------------------------------------------- walk */

/* 1 when p was seen before, else remembers it. */
static int seen_before(names *l, const void *p) {
  if (2 * (l->nseen + 1) > l->seen_cap) {
    size_t cap = l->seen_cap ? l->seen_cap * 2 : 256;
    const void **t = tstor__io_calloc(cap, sizeof *t);
    if (!t) {
      l->failed = 1;
      return 1;
    }
    for (size_t i = 0; i < l->seen_cap; i++)
      if (l->seen[i]) {
        size_t j = ((uintptr_t)l->seen[i] >> 4) & (cap - 1);
        while (t[j]) j = (j + 1) & (cap - 1);
        t[j] = l->seen[i];
      }
    tstor__io_free(l->seen);
    l->seen = t;
    l->seen_cap = cap;
  }
  size_t j = ((uintptr_t)p >> 4) & (l->seen_cap - 1);
  while (l->seen[j] && l->seen[j] != p) j = (j + 1) & (l->seen_cap - 1);
  if (l->seen[j]) return 1;
  l->seen[j] = p;
  l->nseen++;
  return 0;
}

/* Counts `bytes` more of names against the budget: 0 while within it. */
static int spend(names *l, size_t bytes) {
  if (l->bytes + bytes > l->budget) {
    l->cut = 1;
    return 1;
  }
  l->bytes += bytes;
  return 0;
}

static void add(names *l, const char *dotted, const char *exact, const tstor_value *v,
                int container) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    tstor_value_name *e = tstor__io_realloc(l->e, cap * sizeof *e);
    if (!e) {
      l->failed = 1;
      return;
    }
    l->e = e;
    l->cap = cap;
  }
  tstor_value_name *e = &l->e[l->n];
  memset(e, 0, sizeof *e);
  e->dotted = tstor__io_strdup(*dotted ? dotted : "$");
  e->exact = tstor__io_strdup(*exact ? exact : "$");
  if (!e->dotted || !e->exact) {
    tstor__io_free((char *)e->dotted);
    tstor__io_free((char *)e->exact);
    l->failed = 1;
    return;
  }
  e->value = v;
  e->container = container;
  l->n++;
}

static void walk(names *l, const tstor_value *v, const char *dotted, const char *exact);

/* The items of container c under the names of their parent. */
static void walk_items(names *l, const tstor_value *c, const char *dotted, const char *exact) {
  for (size_t i = 0; i < tstor_value_len(c) && !l->cut && !l->failed; i++) {
    text d = {0}, x = {0};
    put_segment(&d, dotted, c, i, 1);
    put_segment(&x, exact, c, i, 0);
    if (d.failed || x.failed)
      l->failed = 1;
    else if (!spend(l, d.len + x.len + 2))
      walk(l, tstor_value_item(c, i), d.p, x.p);
    tstor__io_free(d.p);
    tstor__io_free(x.p);
  }
}

static void walk(names *l, const tstor_value *v, const char *dotted, const char *exact) {
  tstor_value_kind k = tstor_value_kind_of(v);
  int container = k == TSTOR_VALUE_DICT || k == TSTOR_VALUE_LIST || k == TSTOR_VALUE_TUPLE ||
                  k == TSTOR_VALUE_SET;
  /* A container met again (a shared subtree) is not walked again, so that a
   * tree shared at every level lists in linear time. */
  if ((container || k == TSTOR_VALUE_OBJECT) && seen_before(l, v)) return;
  if (k == TSTOR_VALUE_OBJECT) { /* a Torch7 class instance: listed, then its fields */
    add(l, dotted, exact, v, 0);
    const tstor_value *state = tstor_value_object_state(v);
    if (state && !seen_before(l, state)) walk_items(l, state, dotted, exact);
    return;
  }
  /* an empty container is a value of its own */
  add(l, dotted, exact, v, container && tstor_value_len(v) > 0);
  if (!container) return;
  walk_items(l, v, dotted, exact);
  const tstor_value *attrs = tstor_value_dict_attributes(v); /* a state_dict's _metadata */
  if (attrs && !l->cut && !l->failed) {
    text d = {0}, x = {0};
    putf(&d, "%s@", dotted);
    putf(&x, "%s@", exact);
    if (d.failed || x.failed)
      l->failed = 1;
    else if (!spend(l, d.len + x.len + 2))
      walk(l, attrs, d.p, x.p);
    tstor__io_free(d.p);
    tstor__io_free(x.p);
  }
}

/* ------------------------------------------------------ ambiguous names */

static int by_dotted(const void *a, const void *b) {
  const tstor_value_name *x = *(tstor_value_name *const *)a, *y = *(tstor_value_name *const *)b;
  return strcmp(x->dotted, y->dotted);
}

/* Marks each dotted name that two different values share. */
static void mark_ambiguous(names *l) {
  tstor_value_name **order = tstor__io_malloc((l->n ? l->n : 1) * sizeof *order);
  if (!order) {
    l->failed = 1;
    return;
  }
  for (size_t i = 0; i < l->n; i++) order[i] = &l->e[i];
  qsort(order, l->n, sizeof *order, by_dotted);
  for (size_t i = 0; i < l->n;) {
    size_t j = i + 1;
    int differ = 0;
    while (j < l->n && strcmp(order[j]->dotted, order[i]->dotted) == 0)
      differ |= order[j++]->value != order[i]->value;
    for (size_t k = i; differ && k < j; k++) order[k]->ambiguous = 1;
    i = j;
  }
  tstor__io_free(order);
}

static void names_collect(names *l, const tstor_value *root, size_t budget) {
  memset(l, 0, sizeof *l);
  l->budget = budget;
  walk(l, root, "", "");
  if (!l->failed) mark_ambiguous(l);
}

static void names_free(names *l) {
  for (size_t i = 0; i < l->n; i++) {
    tstor__io_free((char *)l->e[i].dotted);
    tstor__io_free((char *)l->e[i].exact);
  }
  tstor__io_free(l->e);
  tstor__io_free(l->seen);
  memset(l, 0, sizeof *l);
}

static const tstor_value_name *names_find(const names *l, const char *name, int *ambiguous) {
  *ambiguous = 0;
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->e[i].exact, name) == 0) return &l->e[i];
  const tstor_value_name *hit = NULL;
  for (size_t i = 0; i < l->n; i++) {
    if (strcmp(l->e[i].dotted, name) != 0) continue;
    if (hit && hit->value != l->e[i].value) {
      *ambiguous = 1;
      return NULL;
    }
    hit = &l->e[i];
  }
  return hit;
}

/* ------------------------------------------------------------- public */

/* The names of ck's tree, or the error of a walk that could not finish. */
static int names_of(const tstor_checkpoint *ck, names *l, const char *who) {
  if (!ck || !ck->root)
    return TSTOR__ERR(TSTOR_EINVAL, "%s: no checkpoint, or one without a root", who);
  names_collect(l, ck->root, names_budget(ck->source_bytes));
  if (l->failed) {
    names_free(l);
    return TSTOR__ERR(TSTOR_ENOMEM, "%s: out of memory for the names of the values", who);
  }
  return 0;
}

static int names_cut(const names *l, const tstor_checkpoint *ck, const char *who) {
  return TSTOR__ERR(TSTOR_ERANGE,
                    "%s: the names of the values pass %zu bytes, the most a file of %llu bytes "
                    "may cost (each name repeats every key above it)",
                    who, l->budget, (unsigned long long)ck->source_bytes);
}

int tstor_checkpoint_visit(const tstor_checkpoint *ck, unsigned what, tstor_value_visitor fn,
                           void *arg) {
  if (!fn) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_visit: NULL function");
  names l;
  int rc = names_of(ck, &l, "tstor_checkpoint_visit");
  if (rc) return rc;
  for (size_t i = 0; i < l.n && !rc; i++) {
    const tstor_value_name *e = &l.e[i];
    tstor_value_kind k = tstor_value_kind_of(e->value);
    bool tensor = !e->container && (k == TSTOR_VALUE_TENSOR || k == TSTOR_VALUE_QUANTIZED);
    bool wanted = e->container ? (what & TSTOR_VISIT_CONTAINERS)
                  : tensor     ? (what & (TSTOR_VISIT_TENSORS | TSTOR_VISIT_VALUES))
                               : (what & TSTOR_VISIT_VALUES);
    if (wanted) rc = fn(arg, e);
  }
  if (!rc && l.cut) rc = names_cut(&l, ck, "tstor_checkpoint_visit");
  names_free(&l);
  return rc;
}

int tstor_checkpoint_find(const tstor_checkpoint *ck, const char *name, const tstor_value **out) {
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_find: NULL out");
  *out = NULL;
  if (!name) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_find: NULL name");
  names l;
  int rc = names_of(ck, &l, "tstor_checkpoint_find");
  if (rc) return rc;
  int ambiguous;
  const tstor_value_name *e = names_find(&l, name, &ambiguous);
  if (ambiguous) {
    char both[400] = "";
    size_t used = 0;
    for (size_t i = 0; i < l.n && used < sizeof both - 1; i++)
      if (strcmp(l.e[i].dotted, name) == 0)
        used += (size_t)snprintf(both + used, sizeof both - used, "%s%s", used ? ", " : "",
                                 l.e[i].exact);
    rc = TSTOR__ERR(TSTOR_EINVAL, "'%s' names more than one value: %s", name, both);
  } else if (e) {
    *out = e->value;
  } else if (l.cut) {
    rc = names_cut(&l, ck, "tstor_checkpoint_find");
  } else {
    rc = TSTOR__ERR(TSTOR_ENOENT, "no value named '%s'", name);
  }
  names_free(&l);
  return rc;
}
