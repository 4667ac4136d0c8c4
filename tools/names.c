/* The dotted and exact names of a checkpoint's values (names.h). */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "names.h"

size_t tool_names_budget(size_t file_bytes) {
  const size_t floor = (size_t)64 << 20;
  return file_bytes > floor / 16 ? file_bytes * 16 : floor;
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
    char *p = realloc(t->p, cap);
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
static int seen_before(tool_names *l, const void *p) {
  if (2 * (l->nseen + 1) > l->seen_cap) {
    size_t cap = l->seen_cap ? l->seen_cap * 2 : 256;
    const void **t = calloc(cap, sizeof *t);
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
    free(l->seen);
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
static int spend(tool_names *l, size_t bytes) {
  if (l->bytes + bytes > l->budget) {
    l->cut = 1;
    return 1;
  }
  l->bytes += bytes;
  return 0;
}

static void add(tool_names *l, const char *dotted, const char *exact, const tstor_value *v,
                int container) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    tool_name *e = realloc(l->e, cap * sizeof *e);
    if (!e) {
      l->failed = 1;
      return;
    }
    l->e = e;
    l->cap = cap;
  }
  tool_name *e = &l->e[l->n];
  memset(e, 0, sizeof *e);
  e->dotted = strdup(*dotted ? dotted : "$");
  e->exact = strdup(*exact ? exact : "$");
  if (!e->dotted || !e->exact) {
    free(e->dotted);
    free(e->exact);
    l->failed = 1;
    return;
  }
  e->v = v;
  e->container = container;
  l->n++;
  if (!container) {
    l->nleaves++;
    l->ntensors += tstor_value_kind_of(v) == TSTOR_VALUE_TENSOR;
  }
}

static void walk(tool_names *l, const tstor_value *v, const char *dotted, const char *exact);

/* The items of container c under the names of their parent. */
static void walk_items(tool_names *l, const tstor_value *c, const char *dotted, const char *exact) {
  for (size_t i = 0; i < tstor_value_len(c) && !l->cut && !l->failed; i++) {
    text d = {0}, x = {0};
    put_segment(&d, dotted, c, i, 1);
    put_segment(&x, exact, c, i, 0);
    if (d.failed || x.failed)
      l->failed = 1;
    else if (!spend(l, d.len + x.len + 2))
      walk(l, tstor_value_item(c, i), d.p, x.p);
    free(d.p);
    free(x.p);
  }
}

static void walk(tool_names *l, const tstor_value *v, const char *dotted, const char *exact) {
  tstor_value_kind k = tstor_value_kind_of(v);
  int container = k == TSTOR_VALUE_DICT || k == TSTOR_VALUE_LIST || k == TSTOR_VALUE_TUPLE;
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
    free(d.p);
    free(x.p);
  }
}

/* ------------------------------------------------------ ambiguous names */

static int by_dotted(const void *a, const void *b) {
  const tool_name *x = *(tool_name *const *)a, *y = *(tool_name *const *)b;
  return strcmp(x->dotted, y->dotted);
}

/* Marks each dotted name that two different values share. */
static void mark_ambiguous(tool_names *l) {
  tool_name **order = malloc((l->n ? l->n : 1) * sizeof *order);
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
      differ |= order[j++]->v != order[i]->v;
    for (size_t k = i; differ && k < j; k++) order[k]->ambiguous = 1;
    i = j;
  }
  free(order);
}

void tool_names_collect(tool_names *l, const tstor_value *root, size_t budget) {
  memset(l, 0, sizeof *l);
  l->budget = budget;
  walk(l, root, "", "");
  if (!l->failed) mark_ambiguous(l);
}

void tool_names_free(tool_names *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->e[i].dotted);
    free(l->e[i].exact);
  }
  free(l->e);
  free(l->seen);
  memset(l, 0, sizeof *l);
}

const tool_name *tool_names_find(const tool_names *l, const char *name, int *ambiguous) {
  *ambiguous = 0;
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->e[i].exact, name) == 0) return &l->e[i];
  const tool_name *hit = NULL;
  for (size_t i = 0; i < l->n; i++) {
    if (strcmp(l->e[i].dotted, name) != 0) continue;
    if (hit && hit->v != l->e[i].v) {
      *ambiguous = 1;
      return NULL;
    }
    hit = &l->e[i];
  }
  return hit;
}
