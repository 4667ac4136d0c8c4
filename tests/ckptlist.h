/* The listing of a loaded checkpoint in the format of tests/ckpt/describe.py,
 * which describes what torch.load returned: one line per value, with each
 * tensor's dtype, layout, storage number (sharing) and an FNV-1a hash of its
 * elements. Shared by the golden test and the differential test; for Check
 * suites (failures are ck_assert). */
#ifndef TSTOR_TEST_CKPTLIST_H
#define TSTOR_TEST_CKPTLIST_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <tstor/serialize.h>
#include <tstor/tensor.h>

#include "testtext.h"


static char *hex(const void *p, size_t n) {
  char *s = malloc(2 * n + 2);
  ck_assert_ptr_nonnull(s);
  if (!n) return strcpy(s, "-");
  for (size_t i = 0; i < n; i++) sprintf(s + 2 * i, "%02x", ((const unsigned char *)p)[i]);
  return s;
}

static uint64_t fnv_step(uint64_t h, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/* FNV-1a over the elements in row-major order, read through the strides. */
static uint64_t tensor_fnv(const tstor_tensor *t) {
  uint64_t h = 0xcbf29ce484222325ull;
  int nd = tstor_tensor_dim(t);
  const int64_t *sz = tstor_tensor_sizes(t), *st = tstor_tensor_strides(t);
  int64_t n = tstor_tensor_numel(t);
  if (n == 0) return h;
  const unsigned char *base = tstor_tensor_data(t);
  ck_assert_ptr_nonnull(base);
  size_t es = tstor_dtype_size(tstor_tensor_dtype(t));
  int64_t idx[TSTOR_TENSOR_MAX_DIM] = {0};
  for (int64_t k = 0; k < n; k++) {
    int64_t off = 0;
    for (int d = 0; d < nd; d++) off += idx[d] * st[d];
    h = fnv_step(h, base + off * (int64_t)es, es);
    for (int d = nd - 1; d >= 0; d--) {
      if (++idx[d] < sz[d]) break;
      idx[d] = 0;
    }
  }
  return h;
}

typedef struct lister {
  text out;
  tstor_storage *seen[4096];
  int nseen;
  int with_data;
} lister;

static int storage_number(lister *l, tstor_storage *s) {
  for (int i = 0; i < l->nseen; i++)
    if (l->seen[i] == s) return i;
  ck_assert_int_lt(l->nseen, 4096);
  l->seen[l->nseen] = s;
  return l->nseen++;
}

static void ints(text *t, const int64_t *v, int n) {
  for (int i = 0; i < n; i++) put(t, i ? ",%" PRId64 : "%" PRId64, v[i]);
}

static void keyrepr(text *t, const tstor_value *k) {
  switch (tstor_value_kind_of(k)) {
    case TSTOR_VALUE_STRING: {
      size_t len;
      const char *s = tstor_value_string(k, &len);
      char *h = hex(s, len);
      put(t, "s:%s", h);
      free(h);
      break;
    }
    case TSTOR_VALUE_INT: put(t, "i:%" PRId64, tstor_value_int(k)); break;
    case TSTOR_VALUE_BOOL: put(t, "b:%d", tstor_value_bool(k)); break;
    case TSTOR_VALUE_NONE: put(t, "n"); break;
    case TSTOR_VALUE_FLOAT: {
      double d = tstor_value_float(k);
      uint64_t b;
      memcpy(&b, &d, 8);
      put(t, "f:%016" PRIx64, b);
      break;
    }
    case TSTOR_VALUE_TUPLE:
      put(t, "t:(");
      for (size_t i = 0; i < tstor_value_len(k); i++) {
        if (i) put(t, ",");
        keyrepr(t, tstor_value_item(k, i));
      }
      put(t, ")");
      break;
    case TSTOR_VALUE_TENSOR: put(t, "T"); break;
    case TSTOR_VALUE_BYTES: {
      size_t len;
      const char *s = tstor_value_string(k, &len);
      char *h = hex(s, len);
      put(t, "y:%s", h);
      free(h);
      break;
    }
    default: ck_abort_msg("unexpected key kind");
  }
}

static void walk(lister *l, const char *path, const tstor_value *v);

typedef struct keyed {
  char *repr;
  const tstor_value *v;
} keyed;

static int keyed_cmp(const void *a, const void *b) {
  return strcmp(((const keyed *)a)->repr, ((const keyed *)b)->repr);
}

/* A set's items in the order of their keyrepr, as describe.py lists them. */
static void walk_set(lister *l, const char *path, const tstor_value *v) {
  size_t n = tstor_value_len(v);
  keyed *items = calloc(n ? n : 1, sizeof *items);
  ck_assert_ptr_nonnull(items);
  for (size_t i = 0; i < n; i++) {
    text r = {0};
    keyrepr(&r, tstor_value_item(v, i));
    items[i] = (keyed){r.s, tstor_value_item(v, i)};
  }
  qsort(items, n, sizeof *items, keyed_cmp);
  put(&l->out, "%s set %zu\n", path, n);
  for (size_t i = 0; i < n; i++) {
    text sub = {0};
    put(&sub, "%s[%zu]", path, i);
    walk(l, sub.s, items[i].v);
    free(sub.s);
    free(items[i].repr);
  }
  free(items);
}

/* "PATH@" and the attributes, where v has any. */
static void walk_attributes(lister *l, const char *path, const tstor_value *v) {
  const tstor_value *attrs = tstor_value_attributes(v);
  if (!attrs) return;
  text sub = {0};
  put(&sub, "%s@", path);
  walk(l, sub.s, attrs);
  free(sub.s);
}

/* Item i of a quantized tensor's scales or zero points (a tensor or a list). */
static double channel_param(const tstor_value *v, int64_t i) {
  double d;
  if (tstor_value_kind_of(v) == TSTOR_VALUE_TENSOR) {
    ck_assert_int_eq(tstor_tensor_get_f64(tstor_value_tensor(v), &i, &d), 0);
    return d;
  }
  const tstor_value *x = tstor_value_item(v, (size_t)i);
  return tstor_value_kind_of(x) == TSTOR_VALUE_FLOAT ? tstor_value_float(x)
                                                     : (double)tstor_value_int(x);
}

static void put_double(text *t, double d) {
  uint64_t b;
  memcpy(&b, &d, 8);
  put(t, "%016" PRIx64, b);
}

/* "PATH% SCHEME ..." for a quantized tensor: its scale and zero point, or
 * its axis and per-channel ones as torch holds them (float64 and int64, or
 * float32 and float32 for float_qparams). */
static void walk_qparams(lister *l, const char *path, const tstor_value *v) {
  tstor_qparams q;
  if (tstor_value_qparams(v, &q)) return;
  text *t = &l->out;
  put(t, "%s%% %s ", path, q.scheme);
  if (!q.scales) {
    put(t, "scale=");
    put_double(t, q.scale);
    put(t, " zero_point=%" PRId64 "\n", q.zero_point);
    return;
  }
  put(t, "axis=%" PRId64 " scales=", q.axis);
  if (!l->with_data) {
    put(t, "- zero_points=-\n");
    return;
  }
  bool fq = strcmp(q.scheme, "per_channel_affine_float_qparams") == 0;
  int64_t n = tstor_tensor_sizes(tstor_value_tensor(v))[q.axis];
  for (int64_t i = 0; i < n; i++) {
    double d = channel_param(q.scales, i);
    put(t, i ? "," : "");
    put_double(t, fq ? (double)(float)d : d);
  }
  put(t, " zero_points=");
  for (int64_t i = 0; i < n; i++) {
    double d = channel_param(q.zero_points, i);
    put(t, i ? "," : "");
    if (fq)
      put_double(t, (double)(float)d);
    else
      put(t, "%" PRId64, (int64_t)d);
  }
  put(t, "\n");
}

static void walk(lister *l, const char *path, const tstor_value *v) {
  text *t = &l->out;
  tstor_value_kind k = tstor_value_kind_of(v);
  const char *cls = tstor_value_class(v);
  switch (k) {
    case TSTOR_VALUE_COMPLEX: {
      double re, im;
      uint64_t a, b;
      ck_assert_int_eq(tstor_value_complex(v, &re, &im), 0);
      memcpy(&a, &re, 8);
      memcpy(&b, &im, 8);
      put(t, "%s complex %016" PRIx64 " %016" PRIx64 "\n", path, a, b);
      return;
    }
    case TSTOR_VALUE_BYTES: {
      size_t len;
      const char *s = tstor_value_string(v, &len);
      char *h = hex(s, len);
      put(t, "%s %s %s\n", path, cls ? cls : "bytes", h);
      free(h);
      return;
    }
    case TSTOR_VALUE_SET: walk_set(l, path, v); return;
    case TSTOR_VALUE_NONE: put(t, "%s none\n", path); return;
    case TSTOR_VALUE_BOOL: put(t, "%s bool %d\n", path, tstor_value_bool(v)); return;
    case TSTOR_VALUE_INT: put(t, "%s int %" PRId64 "\n", path, tstor_value_int(v)); return;
    case TSTOR_VALUE_FLOAT: {
      double d = tstor_value_float(v);
      uint64_t b;
      memcpy(&b, &d, 8);
      put(t, "%s float %016" PRIx64 "\n", path, b);
      return;
    }
    case TSTOR_VALUE_STRING: {
      size_t len;
      const char *s = tstor_value_string(v, &len);
      if (cls && strcmp(cls, "torch.device") == 0) {
        put(t, "%s device %s\n", path, s);
        return;
      }
      char *h = hex(s, len);
      put(t, "%s str %s\n", path, h);
      free(h);
      return;
    }
    case TSTOR_VALUE_TENSOR: {
      tstor_tensor *x = tstor_value_tensor(v);
      ck_assert_ptr_nonnull(x);
      tstor_storage *s = tstor_tensor_storage(x);
      put(t, "%s tensor %s sizes=", path, tstor_dtype_name(tstor_tensor_dtype(x)));
      ints(t, tstor_tensor_sizes(x), tstor_tensor_dim(x));
      put(t, " strides=");
      ints(t, tstor_tensor_strides(x), tstor_tensor_dim(x));
      put(t, " offset=%" PRId64 " storage=%d snbytes=%zu grad=%d fnv=", tstor_tensor_storage_offset(x),
          storage_number(l, s), tstor_storage_nbytes(s), tstor_value_requires_grad(v));
      if (!l->with_data) put(t, "-\n");
      else if (tstor_value_storage_index(v) < 0) put(t, "meta\n"); /* no bytes in the file */
      else put(t, "%016" PRIx64 "\n", tensor_fnv(x));
      walk_qparams(l, path, v);
      walk_attributes(l, path, v);
      return;
    }
    case TSTOR_VALUE_STORAGE: {
      tstor_dtype dt;
      tstor_storage *s = tstor_value_storage(v, &dt);
      ck_assert_ptr_nonnull(s);
      size_t n = tstor_storage_nbytes(s);
      put(t, "%s storage %s storage=%d snbytes=%zu fnv=", path, tstor_dtype_name(dt), storage_number(l, s), n);
      if (l->with_data)
        put(t, "%016" PRIx64 "\n", fnv_step(0xcbf29ce484222325ull, n ? tstor_storage_data(s) : (const void *)"", n));
      else put(t, "-\n");
      return;
    }
    default: break;
  }
  size_t n = tstor_value_len(v);
  const char *shown = !cls || strcmp(cls, "collections.OrderedDict") == 0 ? tstor_value_kind_name(k)
                      : strcmp(cls, "torch.Size") == 0                    ? "size"
                                                                          : "counter";
  put(t, "%s %s %zu\n", path, shown, n);
  for (size_t i = 0; i < n; i++) {
    text sub = {0};
    put(&sub, "%s[", path);
    if (k == TSTOR_VALUE_DICT) keyrepr(&sub, tstor_value_key(v, i));
    else put(&sub, "%zu", i);
    put(&sub, "]");
    walk(l, sub.s, tstor_value_item(v, i));
    free(sub.s);
  }
  walk_attributes(l, path, v);
}

static char *list_checkpoint(const tstor_checkpoint *ck, int with_data) {
  lister *l = calloc(1, sizeof *l);
  l->with_data = with_data;
  walk(l, "$", tstor_checkpoint_root(ck));
  char *s = l->out.s;
  free(l);
  return s;
}

#endif
