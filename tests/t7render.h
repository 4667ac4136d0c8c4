/* The canonical form of a Torch7 tree, as tests/t7/gen_t7.py's manifest
 * writes it (its section 2): tstor's loaded tree rendered node by node, and a
 * manifest line normalized to compare with it. Shared by the Torch7 suite
 * and the corpus suite; for Check suites (failures are ck_assert). */
#ifndef TSTOR_TEST_T7RENDER_H
#define TSTOR_TEST_T7RENDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <tstor/serialize.h>
#include <tstor/tensor.h>

#include "testtext.h"

/* Objects by identity, numbered as the rendering first meets them (the
 * manifest's file indices are renumbered the same way before comparing). */
typedef struct renderer {
  text out;
  const void *ids[4096];
  int nids;
} renderer;

/* 0 when new (and numbered), else its number. */
static int seen(renderer *r, const void *id, int *num) {
  for (int i = 0; i < r->nids; i++)
    if (r->ids[i] == id) {
      *num = i + 1;
      return 1;
    }
  ck_assert_int_lt(r->nids, 4096);
  r->ids[r->nids++] = id;
  *num = r->nids;
  return 0;
}

static const char *t7_type(tstor_dtype dt) {
  switch (dt) {
    case TSTOR_UINT8: return "Byte";
    case TSTOR_INT8: return "Char";
    case TSTOR_INT16: return "Short";
    case TSTOR_INT32: return "Int";
    case TSTOR_INT64: return "Long";
    case TSTOR_FLOAT32: return "Float";
    case TSTOR_FLOAT64: return "Double";
    case TSTOR_FLOAT16: return "Half";
    default: ck_abort_msg("dtype %s in a Torch7 tree", tstor_dtype_name(dt)); return NULL;
  }
}

static void elem(renderer *r, tstor_dtype dt, const unsigned char *p) {
  if (dt == TSTOR_FLOAT32 || dt == TSTOR_FLOAT64 || dt == TSTOR_FLOAT16) {
    double d;
    ck_tstor_ok(tstor_dtype_convert(&d, TSTOR_FLOAT64, p, dt, 1));
    put(&r->out, "%a", d);
  } else {
    int64_t i;
    ck_tstor_ok(tstor_dtype_convert(&i, TSTOR_INT64, p, dt, 1));
    put(&r->out, "%lld", (long long)i);
  }
}

static void storage(renderer *r, tstor_storage *s, tstor_dtype dt) {
  int id;
  if (seen(r, s, &id)) {
    put(&r->out, "@%d", id);
    return;
  }
  size_t es = tstor_dtype_size(dt), n = tstor_storage_nbytes(s) / es;
  put(&r->out, "storage#%d(%s;%zu;[", id, t7_type(dt), n);
  const unsigned char *p = tstor_storage_data(s);
  for (size_t i = 0; i < n; i++) {
    if (i) put(&r->out, ",");
    elem(r, dt, p + i * es);
  }
  put(&r->out, "])");
}

static void tensor(renderer *r, const tstor_value *v) {
  tstor_tensor *t = tstor_value_tensor(v);
  int id;
  if (seen(r, t, &id)) {
    put(&r->out, "@%d", id);
    return;
  }
  tstor_dtype dt = tstor_tensor_dtype(t);
  put(&r->out, "tensor#%d(%s;", id, t7_type(dt));
  if (tstor_value_storage_index(v) < 0) { /* Torch7's empty tensor, which has no storage */
    ck_assert_int_eq(tstor_tensor_numel(t), 0);
    put(&r->out, "sizes=[];strides=[];offset=1;storage=nil;values=[])");
    return;
  }
  int nd = tstor_tensor_dim(t);
  if (tstor_tensor_numel(t) == 0) nd = 0; /* Torch7's nDimension 0, read as shape [0] */
  const int64_t *sz = tstor_tensor_sizes(t), *st = tstor_tensor_strides(t);
  for (int k = 0; k < 2; k++) {
    put(&r->out, k ? "strides=[" : "sizes=[");
    for (int d = 0; d < nd; d++) put(&r->out, d ? ",%lld" : "%lld", (long long)(k ? st : sz)[d]);

    put(&r->out, "];");
  }
  put(&r->out, "offset=%lld;storage=", (long long)tstor_tensor_storage_offset(t) + 1);
  storage(r, tstor_tensor_storage(t), dt);
  put(&r->out, ";values=[");
  int64_t n = tstor_tensor_numel(t), idx[TSTOR_TENSOR_MAX_DIM] = {0};
  if (!nd) n = 0;
  const unsigned char *base = tstor_tensor_data(t);
  size_t es = tstor_dtype_size(dt);
  for (int64_t k = 0; k < n; k++) {
    int64_t off = 0;
    for (int d = 0; d < nd; d++) off += idx[d] * st[d];
    if (k) put(&r->out, ",");
    elem(r, dt, base + off * (int64_t)es);
    for (int d = nd - 1; d >= 0; d--) {
      if (++idx[d] < sz[d]) break;
      idx[d] = 0;
    }
  }
  put(&r->out, "])");
}

static void node(renderer *r, const tstor_value *v);

/* The manifest's key order: booleans, numbers, strings bytewise, then
 * objects (in the order the file gave them, which is theirs by index). */
static int key_rank(const tstor_value *k) {
  switch (tstor_value_kind_of(k)) {
    case TSTOR_VALUE_BOOL: return 0;
    case TSTOR_VALUE_INT:
    case TSTOR_VALUE_FLOAT: return 1;
    case TSTOR_VALUE_STRING:
    case TSTOR_VALUE_BYTES: return 2;
    default: return 3;
  }
}

static double num(const tstor_value *v) {
  return tstor_value_kind_of(v) == TSTOR_VALUE_FLOAT ? tstor_value_float(v)
                                                     : (double)tstor_value_int(v);
}

static const tstor_value *sort_dict;
static int key_cmp(const void *a, const void *b) {
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  const tstor_value *x = tstor_value_key(sort_dict, i), *y = tstor_value_key(sort_dict, j);
  int rx = key_rank(x), ry = key_rank(y);
  if (rx != ry) return rx - ry;
  if (rx == 0) return tstor_value_bool(x) - tstor_value_bool(y);
  if (rx == 1) return num(x) < num(y) ? -1 : num(x) > num(y);
  if (rx == 2) {
    size_t lx, ly;
    const char *sx = tstor_value_string(x, &lx), *sy = tstor_value_string(y, &ly);
    int c = memcmp(sx, sy, lx < ly ? lx : ly);
    return c ? c : (lx > ly) - (lx < ly);
  }
  return (i > j) - (i < j);
}

static void table(renderer *r, const tstor_value *d) {
  int id;
  if (seen(r, d, &id)) {
    put(&r->out, "@%d", id);
    return;
  }
  size_t n = tstor_value_len(d);
  size_t *order = malloc((n ? n : 1) * sizeof *order);
  for (size_t i = 0; i < n; i++) order[i] = i;
  sort_dict = d;
  qsort(order, n, sizeof *order, key_cmp);
  put(&r->out, "table#%d{", id);
  for (size_t i = 0; i < n; i++) {
    if (i) put(&r->out, ",");
    node(r, tstor_value_key(d, order[i]));
    put(&r->out, "=");
    node(r, tstor_value_item(d, order[i]));
  }
  put(&r->out, "}");
  free(order);
}

static void node(renderer *r, const tstor_value *v) {
  int id;
  switch (tstor_value_kind_of(v)) {
    case TSTOR_VALUE_NONE: put(&r->out, "nil"); break;
    case TSTOR_VALUE_BOOL: put(&r->out, tstor_value_bool(v) ? "true" : "false"); break;
    case TSTOR_VALUE_INT:
    case TSTOR_VALUE_FLOAT: put(&r->out, "num(%a)", num(v)); break;
    case TSTOR_VALUE_STRING:
    case TSTOR_VALUE_BYTES: {
      size_t n;
      const unsigned char *s = (const unsigned char *)tstor_value_string(v, &n);
      put(&r->out, "str(");
      for (size_t i = 0; i < n; i++) put(&r->out, "%02x", s[i]);
      put(&r->out, ")");
      break;
    }
    case TSTOR_VALUE_DICT: table(r, v); break;
    case TSTOR_VALUE_TENSOR: tensor(r, v); break;
    case TSTOR_VALUE_STORAGE: {
      tstor_dtype dt;
      tstor_storage *s = tstor_value_storage(v, &dt);
      storage(r, s, dt);
      break;
    }
    case TSTOR_VALUE_OBJECT: {
      if (seen(r, v, &id)) {
        put(&r->out, "@%d", id);
        break;
      }
      const char *ver = tstor_value_object_version(v);
      put(&r->out, "object#%d(%s;version=%s;", id, tstor_value_object_class(v),
          ver ? ver : "legacy");
      table(r, tstor_value_object_state(v));
      put(&r->out, ")");
      break;
    }
    default: ck_abort_msg("a %s in a Torch7 tree", tstor_value_kind_name(tstor_value_kind_of(v)));
  }
}

static char *render(const tstor_checkpoint *ck) {
  renderer *r = calloc(1, sizeof *r);
  node(r, tstor_checkpoint_root(ck));
  char *s = r->out.s;
  free(r);
  return s;
}

/* The manifest's node with the numbers' Python spellings dropped and the
 * object indices numbered by first appearance, as render() numbers them. */
static char *normalize(const char *line) {
  text out = {0};
  long map[65536];
  int nmap = 0;
  for (const char *p = line; *p;) {
    if (strncmp(p, "num(", 4) == 0) {
      const char *semi = strchr(p, ';'), *close = strchr(p, ')');
      ck_assert(semi && close && semi < close);
      put(&out, "%.*s)", (int)(semi - p), p);
      p = close + 1;
    } else if ((*p == '#' || *p == '@') && p[1] >= '0' && p[1] <= '9') {
      char *end;
      long idx = strtol(p + 1, &end, 10);
      int k = 0;
      while (k < nmap && map[k] != idx) k++;
      if (k == nmap) {
        ck_assert_int_lt(nmap, 65536);
        map[nmap++] = idx;
      }
      put(&out, "%c%d", *p, k + 1);
      p = end;
    } else {
      put(&out, "%c", *p++);
    }
  }
  return out.s;
}

/* Check's messages are short: a mismatch is shown where it begins. */
static void same_listing(const char *file, const char *what, const char *got, const char *want) {
  size_t i = 0;
  while (got[i] && got[i] == want[i]) i++;
  if (!got[i] && !want[i]) return;
  size_t from = i > 60 ? i - 60 : 0;
  ck_abort_msg("%s%s differs at %zu:\n  tstor:    ...%.160s\n  manifest: ...%.160s", file, what, i,
               got + from, want + from);
}

#endif
