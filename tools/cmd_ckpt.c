/* tstor inspect and tstor convert: what a checkpoint file holds (torch.save,
 * safetensors, Torch7), and conversion between the formats (libtstor-io). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

#include "commands.h"

/* A file's text made safe for a terminal: control characters (C0, DEL and
 * C1, which a name could use to move the cursor and hide what is printed)
 * as \xNN, and the backslash as \\. A new string, freed by the caller (NULL
 * when out of memory). */
static char *escaped(const char *s) {
  size_t n = strlen(s);
  char *out = malloc(4 * n + 1), *o = out;
  if (!out) return NULL;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) { /* U+0080..U+009F */
      o += sprintf(o, "\\x%02x", *++p);
    } else if (*p < 0x20 || *p == 0x7f) {
      o += sprintf(o, "\\x%02x", *p);
    } else if (*p == '\\') {
      *o++ = '\\';
      *o++ = '\\';
    } else {
      *o++ = (char)*p;
    }
  }
  *o = '\0';
  return out;
}

/* Prints s escaped for a terminal, in a column of `width` (0: as it is). */
static void print_field(const char *s, int width) {
  char *e = escaped(s);
  printf("%-*s", width, e ? e : "?");
  free(e);
}

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

/* Loads a checkpoint in any format tstor reads, told by its bytes
 * (tstor_checkpoint_load): onto the meta device when `shapes_only` and the
 * context has one (the data is neither read nor mapped), else read onto cpu. */
static int load_any(tstor_context *ctx, const char *path, int shapes_only, tstor_checkpoint **ck,
                    const char **format) {
  tstor_device meta;
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  o.map_location = shapes_only && tstor_device_parse(ctx, "meta", &meta) == 0 ? "meta" : "cpu";
  tstor_file_format f;
  int rc = tstor_file_format_of(path, &f);
  if (rc == 0) rc = tstor_checkpoint_load(ctx, path, &o, ck);
  if (rc) {
    char *e = escaped(tstor_last_error());
    fprintf(stderr, "tstor: %s (%s)\n", e ? e : "?", tstor_err_name(rc));
    free(e);
    return EXIT_FAILED;
  }
  *format = tstor_file_format_name(f);
  return 0;
}

/* Frees what open_and_load gave and passes rc through. */
static int close_loaded(tstor_context *ctx, tstor_checkpoint *ck, int rc) {
  tstor_checkpoint_free(ck);
  tstor_context_close(ctx);
  return rc;
}

/* Opens a context from config and loads path into it (both commands' start).
 * On success the caller owns *ctx and *ck (release them with close_loaded);
 * on failure nothing is left open and the exit status is returned. */
static int open_and_load(const char *config, const char *path, int shapes_only, tstor_context **ctx,
                         tstor_checkpoint **ck, const char **format) {
  *ck = NULL;
  int rc = tstor_open_for_command(config, ctx);
  if (rc) return rc;
  if ((rc = load_any(*ctx, path, shapes_only, ck, format))) {
    close_loaded(*ctx, *ck, rc);
    *ctx = NULL;
    *ck = NULL;
  }
  return rc;
}

/* ---------------------------------------------------------------- listing */

/* The values of the tree in tree order, named by their paths: dict string
 * keys joined with '.', list and tuple items and other keys as [i], [key]; a
 * Torch7 object's fields under its own name, an OrderedDict's attributes
 * under NAME@. A tensor is listed under every name it has; a container met
 * again (a shared subtree) is not walked again, so that a tree shared at
 * every level lists in linear time. */
typedef struct entry {
  char *name;
  const tstor_value *v;
} entry;

typedef struct listing {
  entry *e;
  size_t n, cap;
  size_t ntensors;
  const void **seen; /* containers and tensors walked: open addressing */
  size_t seen_cap, nseen;
  int failed;
} listing;

/* 1 when p was seen before, else remembers it. */
static int seen_before(listing *l, const void *p) {
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

static void add(listing *l, const char *path, const tstor_value *v) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 64;
    entry *e = realloc(l->e, l->cap * sizeof *e);
    if (!e) {
      l->failed = 1;
      return;
    }
    l->e = e;
  }
  if (!(l->e[l->n].name = strdup(*path ? path : "$"))) {
    l->failed = 1;
    return;
  }
  l->e[l->n++].v = v;
  l->ntensors += tstor_value_kind_of(v) == TSTOR_VALUE_TENSOR;
}

static void collect(listing *l, const char *path, const tstor_value *v) {
  tstor_value_kind k = tstor_value_kind_of(v);
  int container = k == TSTOR_VALUE_DICT || k == TSTOR_VALUE_LIST || k == TSTOR_VALUE_TUPLE;
  if ((container || k == TSTOR_VALUE_OBJECT) && seen_before(l, v)) return;
  if (!container) add(l, path, v);
  if (k == TSTOR_VALUE_OBJECT) { /* a Torch7 class instance: its fields */
    collect(l, path, tstor_value_object_state(v));
    return;
  }
  if (container && !tstor_value_len(v)) add(l, path, v); /* an empty one is a value of its own */
  for (size_t i = 0; i < tstor_value_len(v); i++) {
    char *sub = NULL;
    const tstor_value *key = tstor_value_key(v, i);
    int r;
    size_t plen = strlen(path);
    const char *dot = plen && path[plen - 1] != '@' ? "." : "";
    if (key && tstor_value_kind_of(key) == TSTOR_VALUE_STRING && *tstor_value_string(key, NULL))
      r = asprintf(&sub, "%s%s%s", path, dot, tstor_value_string(key, NULL));
    else if (key && tstor_value_kind_of(key) == TSTOR_VALUE_STRING) /* the empty name */
      r = asprintf(&sub, "%s['']", path);
    else if (key && tstor_value_kind_of(key) == TSTOR_VALUE_INT)
      r = asprintf(&sub, "%s[%lld]", path, (long long)tstor_value_int(key));
    else if (key)
      r = asprintf(&sub, "%s[%s]", path, tstor_value_kind_name(tstor_value_kind_of(key)));
    else
      r = asprintf(&sub, "%s[%zu]", path, i);
    if (r < 0) {
      l->failed = 1;
      return;
    }
    collect(l, sub, tstor_value_item(v, i));
    free(sub);
  }
  const tstor_value *attrs = tstor_value_dict_attributes(v); /* a state_dict's _metadata */
  char *sub = NULL;
  if (attrs && asprintf(&sub, "%s@", path) >= 0) {
    collect(l, sub, attrs);
    free(sub);
  }
}

static void listing_free(listing *l) {
  for (size_t i = 0; i < l->n; i++) free(l->e[i].name);
  free(l->e);
  free(l->seen);
}

/* Where a tensor was saved, as the file says: its storage's location. A
 * tensor with no storage in the file is a meta tensor of torch.save's, or
 * Torch7's empty tensor ("-"). */
static const char *saved_on(const tstor_checkpoint *ck, const tstor_value *v, const char *format) {
  long s = tstor_value_storage_index(v);
  if (s < 0) return strncmp(format, "torch", 5) == 0 && strcmp(format, "torch7") != 0 ? "meta" : "-";
  const char *loc = tstor_checkpoint_storage_location(ck, (size_t)s);
  return loc && *loc ? loc : "?";
}

/* A value that is not a tensor, as one line of text (a string cut at 80
 * characters), into buf. */
static void value_text(const tstor_value *v, char *buf, size_t size) {
  switch (tstor_value_kind_of(v)) {
    case TSTOR_VALUE_NONE: snprintf(buf, size, "None"); break;
    case TSTOR_VALUE_BOOL: snprintf(buf, size, "%s", tstor_value_bool(v) ? "True" : "False"); break;
    case TSTOR_VALUE_INT: snprintf(buf, size, "%lld", (long long)tstor_value_int(v)); break;
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
      snprintf(buf, size, "%s, %zu bytes, storage %ld", tstor_dtype_name(dt), st ? tstor_storage_nbytes(st) : 0,
               tstor_value_storage_index(v));
      break;
    }
    case TSTOR_VALUE_OBJECT: {
      const char *ver = tstor_value_object_version(v);
      snprintf(buf, size, "%s%s%s", tstor_value_object_class(v), ver ? " version " : "", ver ? ver : "");
      break;
    }
    default: snprintf(buf, size, "(empty)"); break;
  }
}

static void ints(FILE *f, const int64_t *v, int n) {
  fputc('[', f);
  for (int i = 0; i < n; i++) fprintf(f, i ? ", %lld" : "%lld", (long long)v[i]);
  fputc(']', f);
}

static json_t *json_ints(const int64_t *v, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

/* Names, keys and metadata come from the file: each goes through
 * print_field, so that none can rewrite what the terminal shows. */
static const char *format_title(const char *format) {
  if (strcmp(format, "torch") == 0) return "torch.save checkpoint";
  if (strcmp(format, "torch-legacy") == 0) return "torch.save checkpoint (legacy format)";
  if (strcmp(format, "torch7") == 0) return "Torch7 file";
  return format;
}

/* The width of the name column: the longest name, from 40 up to 120 (longer
 * ones push their line's other columns right, not everyone's). */
static int name_width(const listing *l, int tensors) {
  size_t w = 40;
  for (size_t i = 0; i < l->n; i++) {
    int is_tensor = tstor_value_kind_of(l->e[i].v) == TSTOR_VALUE_TENSOR;
    size_t n = strlen(l->e[i].name);
    if (is_tensor == tensors && n > w) w = n;
  }
  return (int)(w > 120 ? 120 : w);
}

static void print_text(const char *path, const char *format, const tstor_checkpoint *ck, const listing *l) {
  size_t ns = tstor_checkpoint_storage_count(ck);
  print_field(path, 0);
  printf(": %s, %zu tensor%s, %zu storage%s\n", format_title(format), l->ntensors, l->ntensors == 1 ? "" : "s",
         ns, ns == 1 ? "" : "s");
  int w = name_width(l, 1);
  if (l->ntensors)
    printf("\n%-*s %-10s %-18s %-18s %8s %8s %12s %s\n", w, "tensor", "dtype", "shape", "strides", "offset",
           "storage", "storage bytes", "device");
  for (size_t i = 0; i < l->n; i++) {
    if (tstor_value_kind_of(l->e[i].v) != TSTOR_VALUE_TENSOR) continue;
    tstor_tensor *t = tstor_value_tensor(l->e[i].v);
    char shape[256], strides[256];
    FILE *m = fmemopen(shape, sizeof shape, "w");
    ints(m, tstor_tensor_sizes(t), tstor_tensor_dim(t));
    fclose(m);
    m = fmemopen(strides, sizeof strides, "w");
    ints(m, tstor_tensor_strides(t), tstor_tensor_dim(t));
    fclose(m);
    print_field(l->e[i].name, w);
    printf(" %-10s %-18s %-18s %8lld %8ld %12zu ", tstor_dtype_name(tstor_tensor_dtype(t)), shape, strides,
           (long long)tstor_tensor_storage_offset(t), tstor_value_storage_index(l->e[i].v),
           tstor_storage_nbytes(tstor_tensor_storage(t)));
    print_field(saved_on(ck, l->e[i].v, format), 0);
    printf("\n");
  }
  if (l->n > l->ntensors) {
    int vw = name_width(l, 0);
    printf("\n%-*s %s\n", vw, "value", "kind");
    for (size_t i = 0; i < l->n; i++) {
      const tstor_value *v = l->e[i].v;
      tstor_value_kind k = tstor_value_kind_of(v);
      if (k == TSTOR_VALUE_TENSOR) continue;
      char text[160];
      value_text(v, text, sizeof text);
      print_field(l->e[i].name, vw);
      printf(" %-8s ", tstor_value_kind_name(k));
      print_field(text, 0);
      printf("\n");
    }
  }
  int shared = 0;
  for (size_t s = 0; s < ns; s++) {
    size_t count = 0;
    for (size_t i = 0; i < l->n; i++) count += (size_t)tstor_value_storage_index(l->e[i].v) == s;
    if (count < 2) continue;
    if (!shared++) printf("\nshared storages:\n");
    const char *key;
    tstor_storage *st;
    tstor_checkpoint_storage(ck, s, &key, &st);
    printf("  storage %zu (record ", s);
    print_field(key, 0);
    printf(", %zu bytes):", tstor_storage_nbytes(st));
    for (size_t i = 0; i < l->n; i++)
      if ((size_t)tstor_value_storage_index(l->e[i].v) == s) {
        printf(" ");
        print_field(l->e[i].name, 0);
      }
    printf("\n");
  }
  const tstor_value *md = tstor_checkpoint_metadata(ck);
  if (md && tstor_value_len(md)) {
    printf("\nmetadata:\n");
    for (size_t i = 0; i < tstor_value_len(md); i++) {
      printf("  ");
      print_field(tstor_value_string(tstor_value_key(md, i), NULL), 0);
      printf(": ");
      print_field(tstor_value_string(tstor_value_item(md, i), NULL), 0);
      printf("\n");
    }
  }
}

static int print_json(const char *path, const char *format, const tstor_checkpoint *ck, const listing *l) {
  json_t *root = json_object(), *tensors = json_array(), *storages = json_array(), *shared = json_array();
  json_object_set_new(root, "file", json_string(path));
  json_object_set_new(root, "format", json_string(format));
  json_t *values = json_array();
  for (size_t i = 0; i < l->n; i++) {
    const tstor_value *v = l->e[i].v;
    tstor_value_kind k = tstor_value_kind_of(v);
    if (k != TSTOR_VALUE_TENSOR) {
      json_t *o = json_object(), *x;
      json_object_set_new(o, "name", json_string(l->e[i].name));
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
      json_array_append_new(values, o);
      continue;
    }
    tstor_tensor *t = tstor_value_tensor(v);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(l->e[i].name));
    json_object_set_new(o, "device", json_string(saved_on(ck, v, format)));
    json_object_set_new(o, "dtype", json_string(tstor_dtype_name(tstor_tensor_dtype(t))));
    json_object_set_new(o, "shape", json_ints(tstor_tensor_sizes(t), tstor_tensor_dim(t)));
    json_object_set_new(o, "strides", json_ints(tstor_tensor_strides(t), tstor_tensor_dim(t)));
    json_object_set_new(o, "storage_offset", json_integer(tstor_tensor_storage_offset(t)));
    json_object_set_new(o, "storage", json_integer(tstor_value_storage_index(l->e[i].v)));
    json_object_set_new(o, "storage_nbytes", json_integer((json_int_t)tstor_storage_nbytes(tstor_tensor_storage(t))));
    json_object_set_new(o, "requires_grad", json_boolean(tstor_value_requires_grad(l->e[i].v)));
    json_array_append_new(tensors, o);
  }
  for (size_t s = 0; s < tstor_checkpoint_storage_count(ck); s++) {
    const char *key;
    tstor_storage *st;
    tstor_checkpoint_storage(ck, s, &key, &st);
    json_t *o = json_object(), *names = json_array();
    json_object_set_new(o, "index", json_integer((json_int_t)s));
    json_object_set_new(o, "record", json_string(key));
    json_object_set_new(o, "nbytes", json_integer((json_int_t)tstor_storage_nbytes(st)));
    for (size_t i = 0; i < l->n; i++)
      if ((size_t)tstor_value_storage_index(l->e[i].v) == s) json_array_append_new(names, json_string(l->e[i].name));
    if (json_array_size(names) > 1) json_array_append(shared, names);
    json_object_set_new(o, "tensors", names);
    json_array_append_new(storages, o);
  }
  json_object_set_new(root, "tensors", tensors);
  json_object_set_new(root, "values", values);
  json_object_set_new(root, "storages", storages);
  json_object_set_new(root, "shared", shared);
  const tstor_value *md = tstor_checkpoint_metadata(ck);
  if (md) {
    json_t *m = json_object();
    for (size_t i = 0; i < tstor_value_len(md); i++)
      json_object_set_new(m, tstor_value_string(tstor_value_key(md, i), NULL),
                          json_string(tstor_value_string(tstor_value_item(md, i), NULL)));
    json_object_set_new(root, "metadata", m);
  }
  int rc = json_dumpf(root, stdout, JSON_INDENT(2)) == 0 ? 0 : EXIT_FAILED;
  printf("\n");
  json_decref(root);
  return rc;
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
      printf("usage: tstor inspect [--json] [--config FILE] FILE\n\n"
             "Lists what a torch.save (.pt, either format), safetensors or Torch7 (.t7) file\n"
             "holds, told by its bytes: each tensor's name (its path in the tree), dtype,\n"
             "shape, strides, storage offset, the storage it views and that storage's size,\n"
             "and which tensors share a storage. Nothing in the file is executed. --json\n"
             "prints the same as JSON.\n"
             "Exit status: 0, 1 for a file that cannot be read, 2 for bad usage.\n");
      return 0;
    } else if (argv[i][0] == '-' || file) {
      fprintf(stderr, "tstor inspect: unexpected argument '%s' (try tstor inspect --help)\n", argv[i]);
      return EXIT_USAGE;
    } else {
      file = argv[i];
    }
  }
  if (!file) {
    fprintf(stderr, "tstor inspect: which file? (try tstor inspect --help)\n");
    return EXIT_USAGE;
  }
  tstor_context *ctx;
  tstor_checkpoint *ck;
  const char *format;
  int rc = open_and_load(config, file, 1, &ctx, &ck, &format);
  if (rc) return rc;
  listing l = {0};
  collect(&l, "", tstor_checkpoint_root(ck));
  if (l.failed) {
    fprintf(stderr, "tstor inspect: out of memory\n");
    rc = EXIT_FAILED;
  } else if (json) {
    rc = print_json(file, format, ck, &l);
  } else {
    print_text(file, format, ck, &l);
  }
  listing_free(&l);
  return close_loaded(ctx, ck, rc);
}

/* The value inspect names `name` under v, or NULL. A dict's string keys may
 * hold dots themselves (a state_dict's "layer.weight"), so each key that
 * `name` starts with is tried. */
static const tstor_value *find_named(const tstor_value *v, const char *name, int depth) {
  if (!*name) return v;
  if (depth > TSTOR_CHECKPOINT_MAX_DEPTH) return NULL;
  if (tstor_value_kind_of(v) == TSTOR_VALUE_OBJECT) return find_named(tstor_value_object_state(v), name, depth + 1);
  if (*name == '.') name++;
  for (size_t i = 0; i < tstor_value_len(v); i++) {
    const tstor_value *key = tstor_value_key(v, i), *hit = NULL;
    char part[64];
    const char *k = part;
    if (key && tstor_value_kind_of(key) == TSTOR_VALUE_STRING)
      k = *tstor_value_string(key, NULL) ? tstor_value_string(key, NULL) : "['']";
    else if (key && tstor_value_kind_of(key) == TSTOR_VALUE_INT)
      snprintf(part, sizeof part, "[%lld]", (long long)tstor_value_int(key));
    else if (key) snprintf(part, sizeof part, "[%s]", tstor_value_kind_name(tstor_value_kind_of(key)));
    else snprintf(part, sizeof part, "[%zu]", i);
    size_t n = strlen(k);
    if (strncmp(name, k, n) == 0 && (name[n] == '\0' || name[n] == '.' || name[n] == '['))
      hit = find_named(tstor_value_item(v, i), name + n, depth + 1);
    if (hit) return hit;
  }
  return NULL;
}

/* --select and --flatten: the tree convert writes, in ck. 0, or the exit
 * status after saying why not. */
static int reshape(tstor_checkpoint *ck, const char *select, int flatten) {
  if (select) {
    const tstor_value *v = find_named(tstor_checkpoint_root(ck), select, 0);
    if (!v) {
      fprintf(stderr, "tstor convert: no value named '%s' (tstor inspect lists the names)\n", select);
      return EXIT_FAILED;
    }
    tstor_checkpoint_set_root(ck, (tstor_value *)v);
  }
  if (!flatten) return 0;
  listing l = {0};
  collect(&l, "", tstor_checkpoint_root(ck));
  tstor_value *root = NULL;
  int rc = l.failed ? TSTOR_ENOMEM : tstor_value_new(ck, TSTOR_VALUE_DICT, &root);
  for (size_t i = 0; i < l.n && !rc; i++) {
    tstor_value *name;
    if (tstor_value_kind_of(l.e[i].v) != TSTOR_VALUE_TENSOR) continue;
    if (!(rc = tstor_value_new_string(ck, l.e[i].name, strlen(l.e[i].name), &name)))
      rc = tstor_value_dict_set(root, name, (tstor_value *)l.e[i].v);
  }
  if (!rc && l.n > l.ntensors)
    fprintf(stderr, "tstor convert: --flatten keeps the %zu tensors and leaves out %zu other values\n", l.ntensors,
            l.n - l.ntensors);
  if (!rc) rc = tstor_checkpoint_set_root(ck, root);
  listing_free(&l);
  if (rc) fprintf(stderr, "tstor convert: --flatten: %s\n", tstor_last_error());
  return rc ? EXIT_FAILED : 0;
}

/* The option loop and load steps look like inspect's: each command has its own
 * options and messages; the shared part is open_and_load/close_loaded. */
int tstor_cmd_convert(int argc, char **argv) {
  const char *config = NULL, *in = NULL, *out = NULL, *select = NULL;
  unsigned flags = 0;
  int flatten = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config = argv[++i];
    } else if (strcmp(argv[i], "--select") == 0 && i + 1 < argc) {
      select = argv[++i];
    } else if (strcmp(argv[i], "--flatten") == 0) {
      flatten = 1;
    } else if (strcmp(argv[i], "--copy") == 0) {
      flags |= TSTOR_SAVE_COPY_SHARED;
    } else if (strcmp(argv[i], "--help") == 0) {
      printf("usage: tstor convert [--select NAME] [--flatten] [--copy] [--config FILE] IN OUT\n\n"
             "Converts between torch.save (.pt, either format), safetensors and Torch7\n"
             "(.t7) files. IN's format is told by its bytes; OUT's is safetensors when its\n"
             "name ends in .safetensors, Torch7 when it ends in .t7, torch.save otherwise.\n"
             "--select NAME writes only the value of that name, as tstor inspect names it\n"
             "(\"model\" of a training checkpoint); --flatten writes the tensors as one dict\n"
             "of their names (\"model.layer1.weight\"), what a safetensors file holds, and\n"
             "leaves the other values out. safetensors has no shared storage: tensors that\n"
             "share one are refused unless --copy writes each as its own copy.\n"
             "Exit status: 0, 1 for a file that cannot be read or written, 2 for bad usage.\n");
      return 0;
    } else if (argv[i][0] == '-' || (in && out)) {
      fprintf(stderr, "tstor convert: unexpected argument '%s' (try tstor convert --help)\n", argv[i]);
      return EXIT_USAGE;
    } else if (!in) {
      in = argv[i];
    } else {
      out = argv[i];
    }
  }
  if (!in || !out) {
    fprintf(stderr, "tstor convert: needs IN and OUT (try tstor convert --help)\n");
    return EXIT_USAGE;
  }
  tstor_context *ctx;
  tstor_checkpoint *ck;
  const char *format;
  int rc = open_and_load(config, in, 0, &ctx, &ck, &format);
  if (rc) return rc;
  if ((rc = reshape(ck, select, flatten))) return close_loaded(ctx, ck, rc);
  tstor_file_format to = ends_with(out, ".safetensors") ? TSTOR_FORMAT_SAFETENSORS
                        : ends_with(out, ".t7")         ? TSTOR_FORMAT_TORCH7
                                                        : TSTOR_FORMAT_TORCH;
  tstor_save_options opts = TSTOR_SAVE_OPTIONS_INIT;
  if (to == TSTOR_FORMAT_SAFETENSORS) opts.flags = flags; /* the one format that takes them */
  int err = tstor_checkpoint_save(ck, out, to, &opts);
  if (err) {
    fprintf(stderr, "tstor convert: %s: %s (%s)\n", out, tstor_last_error(), tstor_err_name(err));
    rc = EXIT_FAILED;
  }
  return close_loaded(ctx, ck, rc);
}
