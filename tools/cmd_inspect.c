/* tstor inspect: what a checkpoint file holds (torch.save, safetensors,
 * Torch7, GGUF), as text or JSON. Names, keys and metadata come from the file:
 * each is printed escaped (terminal.h) or as its exact name, which holds
 * nothing a terminal acts on. */
#include "config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

#include "commands.h"
#include "terminal.h"

/* The values a listing shows, with their names (tstor_checkpoint_visit's,
 * copied), and whether the walk stopped at the names' bound. */
typedef struct entry {
  char *dotted, *exact;
  const tstor_value *v;
  int ambiguous;
} entry;

typedef struct listing {
  entry *e;
  size_t n, cap;
  size_t ntensors;
  int cut; /* the names' bound was reached: the listing stops there */
} listing;

static int add_entry(void *arg, const tstor_value_name *name) {
  listing *l = arg;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    entry *e = realloc(l->e, cap * sizeof *e);
    if (!e) return TSTOR_ENOMEM;
    l->e = e;
    l->cap = cap;
  }
  entry *e = &l->e[l->n];
  *e = (entry){strdup(name->dotted), strdup(name->exact), name->value, name->ambiguous};
  if (!e->dotted || !e->exact) {
    free(e->dotted);
    free(e->exact);
    return TSTOR_ENOMEM;
  }
  l->n++;
  l->ntensors += tool_is_tensor(name->value);
  return 0;
}

static void listing_free(listing *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->e[i].dotted);
    free(l->e[i].exact);
  }
  free(l->e);
}

/* The name a listing shows: the dotted one, or the exact one where another
 * value has the same dotted name. */
static const char *shown_name(const entry *e) { return e->ambiguous ? e->exact : e->dotted; }

static void print_name(const entry *e, int width) {
  if (e->ambiguous)
    printf("%-*s", width, e->exact);
  else
    tool_print_escaped(stdout, e->dotted, width);
}

/* Where a tensor was saved, as the file says: its storage's location. A
 * tensor with no storage in the file is a meta tensor of torch.save's, or
 * Torch7's empty tensor ("-"). */
static const char *saved_on(const tstor_checkpoint *ck, const tstor_value *v, const char *format) {
  long s = tstor_value_storage_index(v);
  if (s < 0)
    return strncmp(format, "torch", 5) == 0 && strcmp(format, "torch7") != 0 ? "meta" : "-";
  const char *loc = tstor_checkpoint_storage_location(ck, (size_t)s);
  return loc && *loc ? loc : "?";
}

/* A value that is not a tensor, as one line of text (a string cut at 80
 * characters), into buf. */
static void value_text(const tstor_value *v, char *buf, size_t size) {
  uint64_t u;
  switch (tstor_value_kind_of(v)) {
    case TSTOR_VALUE_NONE: snprintf(buf, size, "None"); break;
    case TSTOR_VALUE_BOOL: snprintf(buf, size, "%s", tstor_value_bool(v) ? "True" : "False"); break;
    case TSTOR_VALUE_INT: /* a GGUF u64 may pass INT64_MAX */
      if (tstor_value_get_uint64(v, &u) == 0)
        snprintf(buf, size, "%llu", (unsigned long long)u);
      else
        snprintf(buf, size, "%lld", (long long)tstor_value_int(v));
      break;
    case TSTOR_VALUE_FLOAT: { /* as Python's repr: 1.0, 0.1, 1e-05 */
      double d = tstor_value_float(v);
      tstor_dtype_format(TSTOR_FLOAT64, &d, buf, size, NULL);
      break;
    }
    case TSTOR_VALUE_STRING: {
      size_t n;
      const char *t = tstor_value_string(v, &n);
      snprintf(buf, size, "'%.80s%s'", t, n > 80 ? "..." : "");
      break;
    }
    case TSTOR_VALUE_BYTES: {
      size_t n;
      tstor_value_string(v, &n);
      snprintf(buf, size, "%zu bytes", n);
      break;
    }
    case TSTOR_VALUE_STORAGE: {
      tstor_dtype dt;
      tstor_storage *st = tstor_value_storage(v, &dt);
      snprintf(buf, size, "%s, %zu bytes, storage %ld", tstor_dtype_name(dt),
               st ? tstor_storage_nbytes(st) : 0, tstor_value_storage_index(v));
      break;
    }
    case TSTOR_VALUE_COMPLEX: { /* as Python's repr: (1+2j) */
      double re = 0, im = 0;
      char a[40], b[40];
      tstor_value_complex(v, &re, &im);
      tstor_dtype_format(TSTOR_FLOAT64, &re, a, sizeof a, NULL);
      tstor_dtype_format(TSTOR_FLOAT64, &im, b, sizeof b, NULL);
      snprintf(buf, size, "(%s%s%sj)", a, b[0] == '-' ? "" : "+", b);
      break;
    }
    case TSTOR_VALUE_OBJECT: {
      const char *ver = tstor_value_object_version(v);
      snprintf(buf, size, "%s%s%s", tstor_value_object_class(v), ver ? " version " : "",
               ver ? ver : "");
      break;
    }
    default: snprintf(buf, size, "(empty)"); break;
  }
}

static void ints(char *buf, size_t size, const int64_t *v, int n) {
  FILE *f = fmemopen(buf, size, "w");
  if (!f) {
    snprintf(buf, size, "?");
    return;
  }
  fputc('[', f);
  for (int i = 0; i < n; i++) fprintf(f, i ? ", %lld" : "%lld", (long long)v[i]);
  fputc(']', f);
  fclose(f);
}

static json_t *json_ints(const int64_t *v, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

static const char *format_title(const char *format) {
  if (strcmp(format, "torch") == 0) return "torch.save checkpoint";
  if (strcmp(format, "torch-legacy") == 0) return "torch.save checkpoint (legacy format)";
  if (strcmp(format, "torch-tar") == 0) return "torch.save checkpoint (tar format of PyTorch 0.1)";
  if (strcmp(format, "torch7") == 0) return "Torch7 file";
  if (strcmp(format, "gguf") == 0) return "GGUF file";
  return format;
}

/* The width of the name column: the longest name, from 40 up to 120 (longer
 * ones push their line's other columns right, not everyone's). */
static int name_width(const listing *l, int tensors) {
  size_t w = 40;
  for (size_t i = 0; i < l->n; i++) {
    const entry *e = &l->e[i];
    int is_tensor = tool_is_tensor(e->v);
    size_t n = strlen(shown_name(e));
    if (is_tensor == tensors && n > w) w = n;
  }
  return (int)(w > 120 ? 120 : w);
}

/* ------------------------------------------------------ shared storages */

/* The listed values that view a storage of the file, grouped by storage in
 * listing order: the groups of at least two are the shared storages. */
typedef struct by_storage {
  const entry **e;
  size_t n;
} by_storage;

static int storage_then_order(const void *a, const void *b) {
  const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
  long sx = tstor_value_storage_index(x->v), sy = tstor_value_storage_index(y->v);
  if (sx != sy) return sx < sy ? -1 : 1;
  return x < y ? -1 : x > y;
}

static int group_by_storage(const listing *l, by_storage *g) {
  g->n = 0;
  g->e = malloc((l->n ? l->n : 1) * sizeof *g->e);
  if (!g->e) return -1;
  for (size_t i = 0; i < l->n; i++)
    if (tstor_value_storage_index(l->e[i].v) >= 0) g->e[g->n++] = &l->e[i];
  qsort(g->e, g->n, sizeof *g->e, storage_then_order);
  return 0;
}

/* The end of the group that starts at i. */
static size_t group_end(const by_storage *g, size_t i) {
  long s = tstor_value_storage_index(g->e[i]->v);
  size_t j = i + 1;
  while (j < g->n && tstor_value_storage_index(g->e[j]->v) == s) j++;
  return j;
}

/* ------------------------------------------------------------------ text */

/* A quantized tensor shows its ggml type, its logical shape and no strides
 * (its elements lie in blocks). */
static void print_tensor_line(const tstor_loaded *f, const entry *e, int w) {
  tstor_tensor *t = tstor_value_tensor(e->v);
  char shape[256], strides[256];
  const int64_t *qsizes;
  int qdim = tstor_value_quantized_shape(e->v, &qsizes);
  const char *dtype = qdim >= 0 ? tstor_ggml_type_name(tstor_value_ggml_type(e->v))
                                : tstor_dtype_name(tstor_tensor_dtype(t));
  if (qdim >= 0) {
    ints(shape, sizeof shape, qsizes, qdim);
    snprintf(strides, sizeof strides, "-");
  } else {
    ints(shape, sizeof shape, tstor_tensor_sizes(t), tstor_tensor_dim(t));
    ints(strides, sizeof strides, tstor_tensor_strides(t), tstor_tensor_dim(t));
  }
  print_name(e, w);
  printf(" %-10s %-18s %-18s %8lld %8ld %12zu ", dtype, shape, strides,
         (long long)tstor_tensor_storage_offset(t), tstor_value_storage_index(e->v),
         tstor_storage_nbytes(tstor_tensor_storage(t)));
  tool_print_escaped(stdout, saved_on(f->ck, e->v, f->format), 0);
  printf("\n");
}

static void print_values(const listing *l) {
  int vw = name_width(l, 0);
  printf("\n%-*s %s\n", vw, "value", "kind");
  for (size_t i = 0; i < l->n; i++) {
    const entry *e = &l->e[i];
    tstor_value_kind k = tstor_value_kind_of(e->v);
    if (tool_is_tensor(e->v)) continue;
    char text[160];
    value_text(e->v, text, sizeof text);
    print_name(e, vw);
    printf(" %-8s ", tstor_value_kind_name(k));
    tool_print_escaped(stdout, text, 0);
    printf("\n");
  }
}

static void print_shared(const tstor_loaded *f, const by_storage *g) {
  int shared = 0;
  for (size_t i = 0, j; i < g->n; i = j) {
    j = group_end(g, i);
    if (j - i < 2) continue;
    if (!shared++) printf("\nshared storages:\n");
    const char *key;
    tstor_storage *st;
    size_t s = (size_t)tstor_value_storage_index(g->e[i]->v);
    tstor_checkpoint_storage(f->ck, s, &key, &st);
    printf("  storage %zu (record ", s);
    tool_print_escaped(stdout, key, 0);
    printf(", %zu bytes):", tstor_storage_nbytes(st));
    for (size_t k = i; k < j; k++) {
      printf(" ");
      print_name(g->e[k], 0);
    }
    printf("\n");
  }
}

/* ------------------------------------------------------------ metadata */

/* A GGUF value's type ("u32", "arr[str]"), into buf; "" for none. */
static void gguf_type_text(const tstor_value *v, char *buf, size_t size) {
  static const char *const names[] = {"u8",   "i8",  "u16", "i16", "u32", "i32", "f32",
                                      "bool", "str", "arr", "u64", "i64", "f64"};
  tstor_gguf_type elem = TSTOR_GGUF_UINT8;
  int t = tstor_value_gguf_type(v, &elem);
  if (t < 0)
    snprintf(buf, size, "%s", "");
  else if (t == TSTOR_GGUF_ARRAY)
    snprintf(buf, size, "arr[%s]", names[elem]);
  else
    snprintf(buf, size, "%s", names[t]);
}

/* A metadata value as one line: a string as it is, a list as its first items
 * and its length (a tokenizer's vocabulary is a list of 100,000 strings;
 * --json has them all). */
static void metadata_text(const tstor_value *v, char *buf, size_t size) {
  tstor_value_kind k = tstor_value_kind_of(v);
  if (k == TSTOR_VALUE_STRING) {
    snprintf(buf, size, "%s", tstor_value_string(v, NULL));
    return;
  }
  if (k != TSTOR_VALUE_LIST && k != TSTOR_VALUE_TUPLE) {
    value_text(v, buf, size);
    return;
  }
  size_t n = tstor_value_len(v), at = 0, i;
  at += (size_t)snprintf(buf + at, size - at, "[");
  for (i = 0; i < n && at < 100; i++) {
    char item[160];
    value_text(tstor_value_item(v, i), item, sizeof item);
    at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? ", " : "", item);
    if (at >= size) break;
  }
  if (at < size && i < n)
    snprintf(buf + at, size - at, ", ... %zu items]", n);
  else if (at < size)
    snprintf(buf + at, size - at, "]");
}

static void print_metadata_line(const tstor_value *md, size_t i) {
  char type[32], text[400];
  const tstor_value *v = tstor_value_item(md, i);
  gguf_type_text(v, type, sizeof type);
  metadata_text(v, text, sizeof text);
  printf("  ");
  tool_print_escaped(stdout, tstor_value_string(tstor_value_key(md, i), NULL), 0);
  if (*type) printf(" (%s)", type);
  printf(": ");
  tool_print_escaped(stdout, text, 0);
  printf("\n");
}

static void print_text(const char *path, const tstor_loaded *f, const listing *l,
                       const by_storage *g) {
  size_t ns = tstor_checkpoint_storage_count(f->ck);
  tool_print_escaped(stdout, path, 0);
  printf(": %s, %zu tensor%s, %zu storage%s\n", format_title(f->format), l->ntensors,
         l->ntensors == 1 ? "" : "s", ns, ns == 1 ? "" : "s");
  int w = name_width(l, 1);
  if (l->ntensors)
    printf("\n%-*s %-10s %-18s %-18s %8s %8s %12s %s\n", w, "tensor", "dtype", "shape", "strides",
           "offset", "storage", "storage bytes", "device");
  for (size_t i = 0; i < l->n; i++)
    if (tool_is_tensor(l->e[i].v)) print_tensor_line(f, &l->e[i], w);
  if (l->n > l->ntensors) print_values(l);
  print_shared(f, g);
  const tstor_value *md = tstor_checkpoint_metadata(f->ck);
  if (md && tstor_value_len(md)) {
    printf("\nmetadata:\n");
    for (size_t i = 0; i < tstor_value_len(md); i++) print_metadata_line(md, i);
  }
}

/* ------------------------------------------------------------------ JSON */

static json_t *json_value(const entry *e) {
  const tstor_value *v = e->v;
  tstor_value_kind k = tstor_value_kind_of(v);
  json_t *o = json_object(), *x;
  json_object_set_new(o, "name", json_string(e->dotted));
  json_object_set_new(o, "exact", json_string(e->exact));
  json_object_set_new(o, "kind", json_string(tstor_value_kind_name(k)));
  size_t n;
  switch (k) {
    case TSTOR_VALUE_NONE: x = json_null(); break;
    case TSTOR_VALUE_BOOL: x = json_boolean(tstor_value_bool(v)); break;
    case TSTOR_VALUE_INT: x = json_integer(tstor_value_int(v)); break;
    case TSTOR_VALUE_FLOAT: x = json_real(tstor_value_float(v)); break;
    case TSTOR_VALUE_STRING: {
      const char *t = tstor_value_string(v, &n);
      x = json_stringn(t, n);
      break;
    }
    default: {
      char text[160];
      value_text(v, text, sizeof text);
      x = json_string(text);
    }
  }
  json_object_set_new(o, "value", x ? x : json_null());
  return o;
}

/* A quantized tensor: its ggml type as the dtype, its logical shape, no
 * strides, and its blocks' sizes. */
static void json_quantized(json_t *o, const tstor_value *v) {
  const int64_t *sizes;
  int nd = tstor_value_quantized_shape(v, &sizes), type = tstor_value_ggml_type(v);
  int64_t block = 0, bytes = 0;
  tstor_ggml_type_block(type, &block, &bytes);
  json_object_set_new(o, "dtype", json_string(tstor_ggml_type_name(type)));
  json_object_set_new(o, "quantized", json_true());
  json_object_set_new(o, "ggml_type", json_integer(type));
  json_object_set_new(o, "block_size", json_integer(block));
  json_object_set_new(o, "type_size", json_integer(bytes));
  json_object_set_new(o, "shape", json_ints(sizes, nd));
  json_object_set_new(o, "strides", json_null());
}

static json_t *json_tensor(const tstor_loaded *f, const entry *e) {
  tstor_tensor *t = tstor_value_tensor(e->v);
  json_t *o = json_object();
  json_object_set_new(o, "name", json_string(e->dotted));
  json_object_set_new(o, "exact", json_string(e->exact));
  json_object_set_new(o, "device", json_string(saved_on(f->ck, e->v, f->format)));
  if (tstor_value_kind_of(e->v) == TSTOR_VALUE_QUANTIZED) {
    json_quantized(o, e->v);
  } else {
    json_object_set_new(o, "dtype", json_string(tstor_dtype_name(tstor_tensor_dtype(t))));
    json_object_set_new(o, "shape", json_ints(tstor_tensor_sizes(t), tstor_tensor_dim(t)));
    json_object_set_new(o, "strides", json_ints(tstor_tensor_strides(t), tstor_tensor_dim(t)));
  }
  json_object_set_new(o, "storage_offset", json_integer(tstor_tensor_storage_offset(t)));
  json_object_set_new(o, "storage", json_integer(tstor_value_storage_index(e->v)));
  json_object_set_new(o, "storage_nbytes",
                      json_integer((json_int_t)tstor_storage_nbytes(tstor_tensor_storage(t))));
  json_object_set_new(o, "requires_grad", json_boolean(tstor_value_requires_grad(e->v)));
  return o;
}

/* A metadata value whole, as JSON holds it: bytes that are not UTF-8 as
 * {"bytes": HEX}, a u64 past JSON's integers (int64) as its decimal string. */
static json_t *json_metadata(const tstor_value *v) {
  size_t n;
  uint64_t u;
  int64_t i;
  switch (tstor_value_kind_of(v)) {
    case TSTOR_VALUE_BOOL: return json_boolean(tstor_value_bool(v));
    case TSTOR_VALUE_INT: {
      if (tstor_value_get_int64(v, &i) == 0) return json_integer(i);
      char dec[24];
      tstor_value_get_uint64(v, &u);
      snprintf(dec, sizeof dec, "%llu", (unsigned long long)u);
      return json_string(dec);
    }
    case TSTOR_VALUE_FLOAT: return json_real(tstor_value_float(v));
    case TSTOR_VALUE_STRING: {
      const char *t = tstor_value_string(v, &n);
      json_t *x = json_stringn(t, n);
      return x ? x : json_null();
    }
    case TSTOR_VALUE_BYTES: {
      const unsigned char *b = (const unsigned char *)tstor_value_string(v, &n);
      char *hex = malloc(2 * n + 1);
      if (!hex) return json_null();
      for (size_t k = 0; k < n; k++) snprintf(hex + 2 * k, 3, "%02x", b[k]);
      hex[2 * n] = '\0';
      json_t *o = json_pack("{s:s}", "bytes", hex);
      free(hex);
      return o;
    }
    case TSTOR_VALUE_LIST:
    case TSTOR_VALUE_TUPLE: {
      json_t *a = json_array();
      for (size_t k = 0; k < tstor_value_len(v); k++)
        json_array_append_new(a, json_metadata(tstor_value_item(v, k)));
      return a;
    }
    default: return json_null();
  }
}

static json_t *json_storages(const tstor_loaded *f, const by_storage *g, json_t *shared) {
  json_t *storages = json_array();
  size_t next = 0; /* the first of the group of the storage at hand */
  for (size_t s = 0; s < tstor_checkpoint_storage_count(f->ck); s++) {
    const char *key;
    tstor_storage *st;
    tstor_checkpoint_storage(f->ck, s, &key, &st);
    json_t *o = json_object(), *names = json_array();
    json_object_set_new(o, "index", json_integer((json_int_t)s));
    json_object_set_new(o, "record", json_string(key));
    json_object_set_new(o, "nbytes", json_integer((json_int_t)tstor_storage_nbytes(st)));
    while (next < g->n && (size_t)tstor_value_storage_index(g->e[next]->v) < s) next++;
    while (next < g->n && (size_t)tstor_value_storage_index(g->e[next]->v) == s)
      json_array_append_new(names, json_string(g->e[next++]->dotted));
    if (json_array_size(names) > 1) json_array_append(shared, names);
    json_object_set_new(o, "tensors", names);
    json_array_append_new(storages, o);
  }
  return storages;
}

static int print_json(const char *path, const tstor_loaded *f, const listing *l,
                      const by_storage *g) {
  json_t *root = json_object(), *tensors = json_array(), *values = json_array();
  json_t *shared = json_array();
  json_object_set_new(root, "file", json_string(path));
  json_object_set_new(root, "format", json_string(f->format));
  json_object_set_new(root, "complete", json_boolean(!l->cut));
  for (size_t i = 0; i < l->n; i++) {
    const entry *e = &l->e[i];
    if (tool_is_tensor(e->v))
      json_array_append_new(tensors, json_tensor(f, e));
    else
      json_array_append_new(values, json_value(e));
  }
  json_object_set_new(root, "tensors", tensors);
  json_object_set_new(root, "values", values);
  json_object_set_new(root, "storages", json_storages(f, g, shared));
  json_object_set_new(root, "shared", shared);
  const tstor_value *md = tstor_checkpoint_metadata(f->ck);
  if (md) {
    json_t *m = json_object(), *types = json_object();
    for (size_t i = 0; i < tstor_value_len(md); i++) {
      const char *key = tstor_value_string(tstor_value_key(md, i), NULL);
      char type[32];
      json_object_set_new(m, key, json_metadata(tstor_value_item(md, i)));
      gguf_type_text(tstor_value_item(md, i), type, sizeof type);
      if (*type) json_object_set_new(types, key, json_string(type));
    }
    json_object_set_new(root, "metadata", m);
    if (json_object_size(types))
      json_object_set_new(root, "metadata_types", types);
    else
      json_decref(types);
  }
  int rc = json_dumpf(root, stdout, JSON_INDENT(2)) == 0 ? 0 : EXIT_FAILED;
  printf("\n");
  json_decref(root);
  return rc;
}

/* --------------------------------------------------------------- command */

static void print_help(void) {
  printf(
      "usage: tstor inspect [--json] [--config FILE] FILE\n\n"
      "Lists what a torch.save (.pt, any of its formats), safetensors, Torch7 (.t7) or\n"
      "GGUF file holds, told by its bytes: each tensor's name (its path in the tree),\n"
      "dtype (a GGUF tensor's quantized type, such as Q4_K), shape, strides, storage\n"
      "offset, the storage it views and that storage's size, which tensors share a\n"
      "storage, and the file's metadata (a long list cut to its first items, with\n"
      "its length). Nothing in the file is executed. --json prints the same as JSON,\n"
      "the metadata whole.\n\n"
      "A name joins dict keys with '.' (model.layer1.weight) and numbers items\n"
      "([0]). Where two values would have the same name ({\"a.b\": x} and\n"
      "{\"a\": {\"b\": y}}), each is shown by its exact name, every key a Python\n"
      "subscript: ['a.b'] and ['a']['b']. A file whose names would pass 16 times\n"
      "its size (64 MiB at least) is listed up to there, and says so.\n"
      "Exit status: 0, 1 for a file that cannot be read, 2 for bad usage.\n");
}

int tstor_cmd_inspect(int argc, char **argv) {
  const char *config = NULL, *file = NULL;
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config = argv[++i];
    } else if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--help") == 0) {
      print_help();
      return 0;
    } else if (argv[i][0] == '-' || file) {
      tool_complain("tstor inspect: unexpected argument '%s' (try tstor inspect --help)", argv[i]);
      return EXIT_USAGE;
    } else {
      file = argv[i];
    }
  }
  if (!file) {
    fprintf(stderr, "tstor inspect: which file? (try tstor inspect --help)\n");
    return EXIT_USAGE;
  }
  tstor_loaded f;
  int rc = tstor_load_for_command(config, file, 1, &f);
  if (rc) return rc;
  listing l = {0};
  by_storage g = {0};
  int walk = tstor_checkpoint_visit(f.ck, TSTOR_VISIT_VALUES, add_entry, &l);
  l.cut = walk == TSTOR_ERANGE;
  if ((walk && !l.cut) || group_by_storage(&l, &g) != 0) {
    fprintf(stderr, "tstor inspect: out of memory\n");
    rc = EXIT_FAILED;
  } else {
    if (json)
      rc = print_json(file, &f, &l, &g);
    else
      print_text(file, &f, &l, &g);
    /* the library's message says where the bound stood and why */
    if (l.cut)
      tool_complain("tstor inspect: listed %zu values and stopped: %s", l.n, tstor_last_error());
  }
  free(g.e);
  listing_free(&l);
  tstor_unload_for_command(&f);
  return rc;
}
