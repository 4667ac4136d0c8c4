/* tstor inspect and tstor convert: what a .pt or .safetensors file holds, and
 * conversion between the two (libtstor-io). */
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

/* Exit status for a file that cannot be read or written (usage errors are
 * EXIT_USAGE, as elsewhere). */
enum { EXIT_BADFILE = 1 };

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
    return EXIT_BADFILE;
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

/* ------------------------------------------------------------- tensor list */

typedef struct entry {
  char *name;
  const tstor_value *v;
} entry;

typedef struct listing {
  entry *e;
  size_t n, cap;
  int failed;
} listing;

/* Tensors in tree order, named by their path: dict string keys joined with
 * '.', list and tuple items as [i], other keys as [key]. */
static void collect(listing *l, const char *path, const tstor_value *v) {
  tstor_value_kind k = tstor_value_kind_of(v);
  if (k == TSTOR_VALUE_TENSOR) {
    if (l->n == l->cap) {
      l->cap = l->cap ? l->cap * 2 : 64;
      entry *e = realloc(l->e, l->cap * sizeof *e);
      if (!e) {
        l->failed = 1;
        return;
      }
      l->e = e;
    }
    l->e[l->n].name = strdup(*path ? path : "$");
    l->e[l->n++].v = v;
    return;
  }
  if (k == TSTOR_VALUE_OBJECT) { /* a Torch7 class instance: its fields */
    collect(l, path, tstor_value_object_state(v));
    return;
  }
  for (size_t i = 0; i < tstor_value_len(v); i++) {
    char *sub = NULL;
    const tstor_value *key = tstor_value_key(v, i);
    int r;
    if (key && tstor_value_kind_of(key) == TSTOR_VALUE_STRING)
      r = asprintf(&sub, "%s%s%s", path, *path ? "." : "", tstor_value_string(key, NULL));
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

static void print_text(const char *path, const char *format, const tstor_checkpoint *ck, const listing *l) {
  size_t ns = tstor_checkpoint_storage_count(ck);
  print_field(path, 0);
  printf(": %s, %zu tensor%s, %zu storage%s\n", format_title(format), l->n, l->n == 1 ? "" : "s", ns,
         ns == 1 ? "" : "s");
  printf("\n%-40s %-10s %-18s %-18s %8s %8s %12s\n", "tensor", "dtype", "shape", "strides", "offset", "storage",
         "storage bytes");
  for (size_t i = 0; i < l->n; i++) {
    tstor_tensor *t = tstor_value_tensor(l->e[i].v);
    char shape[256], strides[256];
    FILE *m = fmemopen(shape, sizeof shape, "w");
    ints(m, tstor_tensor_sizes(t), tstor_tensor_dim(t));
    fclose(m);
    m = fmemopen(strides, sizeof strides, "w");
    ints(m, tstor_tensor_strides(t), tstor_tensor_dim(t));
    fclose(m);
    print_field(l->e[i].name, 40);
    printf(" %-10s %-18s %-18s %8lld %8ld %12zu\n", tstor_dtype_name(tstor_tensor_dtype(t)), shape, strides,
           (long long)tstor_tensor_storage_offset(t), tstor_value_storage_index(l->e[i].v),
           tstor_storage_nbytes(tstor_tensor_storage(t)));
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
  for (size_t i = 0; i < l->n; i++) {
    tstor_tensor *t = tstor_value_tensor(l->e[i].v);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(l->e[i].name));
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
  for (size_t i = 0; i < l.n; i++) free(l.e[i].name);
  free(l.e);
  return close_loaded(ctx, ck, rc);
}

/* The option loop and load steps look like inspect's: each command has its own
 * options and messages; the shared part is open_and_load/close_loaded. */
int tstor_cmd_convert(int argc, char **argv) {
  const char *config = NULL, *in = NULL, *out = NULL;
  unsigned flags = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      config = argv[++i];
    } else if (strcmp(argv[i], "--copy") == 0) {
      flags |= TSTOR_SAVE_COPY_SHARED;
    } else if (strcmp(argv[i], "--help") == 0) {
      printf("usage: tstor convert [--copy] [--config FILE] IN OUT\n\n"
             "Converts between torch.save (.pt, either format), safetensors and Torch7\n"
             "(.t7) files. IN's format is told by its bytes; OUT's is safetensors when its\n"
             "name ends in .safetensors, Torch7 when it ends in .t7, torch.save otherwise.\n"
             "safetensors has no shared storage: tensors that share one are refused\n"
             "unless --copy writes each as its own copy. A safetensors file holds a flat\n"
             "dict of name -> tensor, so only such .pt files convert to it.\n"
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
  int err = ends_with(out, ".safetensors") ? tstor_safetensors_save(ck, out, flags)
            : ends_with(out, ".t7")         ? tstor_torch7_save(ck, out, 0)
                                            : tstor_torch_save(ck, out);
  if (err) {
    fprintf(stderr, "tstor convert: %s: %s (%s)\n", out, tstor_last_error(), tstor_err_name(err));
    rc = EXIT_BADFILE;
  }
  return close_loaded(ctx, ck, rc);
}
