/* Torch7 (.t7) files: those Torch7 itself wrote (tests/t7/torch7-written)
 * and the corpus gen_t7.py builds from the format's definition (every type,
 * both modes, both byte orders, both long sizes; $TSTOR_T7_DIR, made by
 * t7/check-reader.sh), each read and listed as its manifest line says;
 * every file written back in its own format and read again the same (and,
 * for Torch7's own files, to the same bytes); the hostile set refused, never
 * a crash; and trees built here written in every format. The files
 * re-saved go to $TSTOR_T7_DIR/resaved, where check-reader.sh has the
 * reference reader of check_gen.py read them too. */
#define _GNU_SOURCE
#include "testutil.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

#include "t7render.h"
#include "testtext.h"

#define WRITTEN TSTOR_TEST_SRCDIR "/t7/torch7-written"

static tstor_context *ctx;
static tstor_device cpu;

static void setup(void) {
  ck_tstor_ok(tstor_context_open(NULL, &ctx));
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
}
static void teardown(void) { tstor_context_close(ctx); }

/* ------------------------------------------------------- the manifests */

static unsigned flags_of(const char *format) {
  if (strcmp(format, "ascii") == 0) return TSTOR_SAVE_TORCH7_ASCII;
  unsigned f = 0;
  if (strstr(format, "-be-")) f |= TSTOR_SAVE_TORCH7_BIG_ENDIAN;
  if (strstr(format, "long4")) f |= TSTOR_SAVE_TORCH7_LONG4;
  return f;
}

typedef struct counts {
  int ok, refused, resaved, same_bytes;
} counts;

/* The reason a refusal gives, in the message. */
static void refusal_says(const char *file, const char *reason) {
  const char *e = tstor_last_error();
  if (strcmp(reason, "cycle") == 0) ck_assert_msg(strstr(e, "contains itself"), "%s: %s", file, e);
  else if (strcmp(reason, "function") == 0) ck_assert_msg(strstr(e, "Lua function"), "%s: %s", file, e);
  else ck_assert_msg(strstr(e, reason), "%s: '%s' does not name %s", file, e, reason);
}

/* Reads every file a manifest lists in dir and checks it; those read are
 * saved again in their own format (into resaved, when not NULL) and read
 * back the same. With `bytes`, Torch7's own files, the bytes too. */
static counts check_manifest(const char *dir, const char *resaved, int bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.txt", dir);
  FILE *m = fopen(path, "r");
  ck_assert_msg(m != NULL, "no %s", path);
  counts c = {0};
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  FILE *list = NULL;
  if (resaved) {
    snprintf(path, sizeof path, "%s/manifest.txt", resaved);
    list = fopen(path, "w");
    ck_assert_ptr_nonnull(list);
  }
  while ((len = getline(&line, &cap, m)) > 0) {
    if (line[len - 1] == '\n') line[len - 1] = '\0';
    char *file = line, *format = strchr(file, ' ');
    ck_assert_ptr_nonnull(format);
    *format++ = '\0';
    char *result = strchr(format, ' ');
    ck_assert_ptr_nonnull(result);
    *result++ = '\0';
    snprintf(path, sizeof path, "%s/%s", dir, file);
    tstor_checkpoint *ck = (tstor_checkpoint *)1;
    int rc = tstor_torch7_load(ctx, path, NULL, &ck);
    if (strncmp(result, "refuse: ", 8) == 0) {
      ck_assert_msg(rc != 0, "%s: read, but Torch7 files like it are refused (%s)", file, result);
      ck_assert_ptr_null(ck);
      refusal_says(file, result + 8);
      /* the format is told by its first bytes, and the Torch7 reader says why */
      ck_tstor_err(tstor_checkpoint_load(ctx, path, NULL, &ck), rc);
      refusal_says(file, result + 8);
      c.refused++;
      continue;
    }
    ck_assert_msg(rc == 0, "%s: %s: %s", file, tstor_err_name(rc), tstor_last_error());
    ck_assert_msg(strncmp(result, "ok ", 3) == 0, "%s: manifest says %s", file, result);
    char *got = render(ck), *want = normalize(result + 3);
    same_listing(file, "", got, want);
    c.ok++;
    /* written back in the file's format, and read the same */
    char out[4096];
    snprintf(out, sizeof out, "%s/%s", resaved ? resaved : "/tmp", file);
    if (!resaved) snprintf(out, sizeof out, "/tmp/tstor-t7-%d-%s", (int)getpid(), file);
    ck_tstor_ok(tstor_torch7_save(ck, out, TEST_SAVE_OPTS(flags_of(format))));
    tstor_checkpoint *back;
    ck_tstor_ok(tstor_torch7_load(ctx, out, NULL, &back));
    char *again = render(back);
    same_listing(file, " written back", again, want);
    c.resaved++;
    if (list) fprintf(list, "%s %s ok %s\n", file, format, result + 3);
    if (bytes) {
      size_t a, b;
      unsigned char *x = (unsigned char *)tstor_test_slurp(path, &a), *y = (unsigned char *)tstor_test_slurp(out, &b);
      ck_assert_msg(a == b && memcmp(x, y, a) == 0, "%s: written back, %zu bytes differ from Torch7's %zu", file, b, a);
      c.same_bytes++;
      free(x);
      free(y);
    }
    if (!resaved) unlink(out);
    free(again);
    free(got);
    free(want);
    tstor_checkpoint_free(back);
    tstor_checkpoint_free(ck);
  }
  free(line);
  fclose(m);
  if (list) fclose(list);
  return c;
}

START_TEST(written_by_torch7) {
  counts c = check_manifest(WRITTEN, NULL, 0);
  /* 9 read (tables, tensors, classes, an nngraph gModule of 10 KB), 6
   * refused: functions, tables that contain themselves, tds */
  ck_assert_int_eq(c.ok, 9);
  ck_assert_int_eq(c.refused, 6);
  ck_assert_int_eq(c.resaved, 9);
}
END_TEST

/* Torch7's own files written back byte for byte, where the tree keeps all a
 * file says: tables in the order Torch7 wrote them, versions as written. */
START_TEST(written_back_byte_for_byte) {
  static const char *const files[] = {"hello=123.t7", "list_table.t7", "map_table1.t7", "map_table2.t7",
                                      "custom_class.t7", "doubletensor.t7", "floattensor.t7",
                                      "nngraph_node.t7", "gmodule_with_linear_identity.t7"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[512], out[512];
    snprintf(path, sizeof path, WRITTEN "/%s", files[i]);
    snprintf(out, sizeof out, "/tmp/tstor-t7b-%d.t7", (int)getpid());
    tstor_checkpoint *ck;
    ck_tstor_ok(tstor_torch7_load(ctx, path, NULL, &ck));
    ck_tstor_ok(tstor_torch7_save(ck, out, NULL));
    size_t a, b;
    unsigned char *x = (unsigned char *)tstor_test_slurp(path, &a), *y = (unsigned char *)tstor_test_slurp(out, &b);
    ck_assert_msg(a == b && memcmp(x, y, a) == 0, "%s: %zu bytes written back, Torch7 wrote %zu", files[i], b, a);
    free(x);
    free(y);
    unlink(out);
    tstor_checkpoint_free(ck);
  }
}
END_TEST

static const char *corpus_dir(void) {
  const char *d = getenv("TSTOR_T7_DIR");
  return d && *d ? d : NULL;
}

START_TEST(generated_corpus) {
  const char *dir = corpus_dir();
  if (!dir) return; /* t7/check-reader.sh runs this with the corpus */
  char resaved[4096];
  snprintf(resaved, sizeof resaved, "%s/resaved", dir);
  mkdir(resaved, 0700);
  counts c = check_manifest(dir, resaved, 0);
  printf("t7 corpus: %d files read as listed, %d refused as listed, %d written back\n", c.ok, c.refused,
         c.resaved);
  ck_assert_int_gt(c.ok, 300);
  ck_assert_int_gt(c.refused, 50);
}
END_TEST

START_TEST(hostile_files) {
  const char *dir = corpus_dir();
  if (!dir) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/../hostile/hostile.txt", dir);
  FILE *m = fopen(path, "r");
  ck_assert_msg(m != NULL, "no %s", path);
  char *line = NULL;
  size_t cap = 0;
  int n = 0;
  while (getline(&line, &cap, m) > 0) {
    char file[256], format[64], outcome[256];
    ck_assert_int_eq(sscanf(line, "%255s %63s %255s", file, format, outcome), 3);
    snprintf(path, sizeof path, "%s/../hostile/%s", dir, file);
    size_t len;
    unsigned char *bytes = (unsigned char *)tstor_test_slurp(path, &len);
    for (int way = 0; way < 2; way++) {
      tstor_checkpoint *ck = (tstor_checkpoint *)1;
      int rc = way ? tstor_torch7_load_buffer(ctx, bytes, len, NULL, &ck) : tstor_torch7_load(ctx, path, NULL, &ck);
      /* a good file of the other byte order, which tstor tells itself, and
       * the files Torch7 reads though it never writes them (a key twice),
       * read as listed */
      if (strstr(line, "listed as") || strcmp(outcome, "ok") == 0) {
        ck_assert_msg(rc == 0, "%s: %s", file, tstor_last_error());
        if (strcmp(outcome, "ok") == 0) {
          const char *listing = strstr(line, " ok ") + 4, *hash = strstr(listing, " #");
          char *want = strndup(listing, (size_t)(hash - listing)), *norm = normalize(want);
          char *got = render(ck);
          same_listing(file, "", got, norm);
          free(got);
          free(norm);
          free(want);
        }
        tstor_checkpoint_free(ck);
        continue;
      }
      ck_assert_msg(rc != 0, "%s: read (%s)", file, line);
      ck_assert_ptr_null(ck);
      ck_assert_msg(*tstor_last_error(), "%s: no message", file);
    }
    if (strcmp(outcome, "refuse:") == 0) {
      char reason[128];
      ck_assert_int_eq(sscanf(line, "%*s %*s refuse: %127s", reason), 1);
      refusal_says(file, reason);
    }
    free(bytes);
    n++;
  }
  free(line);
  fclose(m);
  ck_assert_int_gt(n, 150);
}
END_TEST

/* ------------------------------------------------------ trees built here */

static tstor_value *str(tstor_checkpoint *ck, const char *s) {
  tstor_value *v;
  ck_tstor_ok(tstor_value_new_string(ck, s, strlen(s), &v));
  return v;
}

static tstor_value *integer(tstor_checkpoint *ck, int64_t i) {
  tstor_value *v;
  ck_tstor_ok(tstor_value_new_int(ck, i, &v));
  return v;
}

START_TEST(built_trees_every_format) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  tstor_value *root, *list, *state, *obj, *tv, *view, *sv, *scalar, *empty, *b;
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &root));
  float data[12];
  for (int i = 0; i < 12; i++) data[i] = (float)i / 3.0f - 1.0f;
  int64_t sizes[2] = {3, 4};
  tstor_tensor *t, *tt, *s0, *e0;
  ck_tstor_ok(tstor_tensor_from_array(ctx, cpu, TSTOR_FLOAT32, 2, sizes, data, &t));
  ck_tstor_ok(tstor_tensor_t(t, &tt));
  int64_t seven = 7;
  ck_tstor_ok(tstor_tensor_from_array(ctx, cpu, TSTOR_INT64, 0, NULL, &seven, &s0));
  int64_t zero = 0;
  ck_tstor_ok(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT64, 1, &zero, &e0));
  ck_tstor_ok(tstor_value_new_tensor(ck, t, &tv));
  ck_tstor_ok(tstor_value_new_tensor(ck, tt, &view));
  ck_tstor_ok(tstor_value_new_tensor(ck, s0, &scalar));
  ck_tstor_ok(tstor_value_new_tensor(ck, e0, &empty));
  ck_tstor_ok(tstor_value_new_storage(ck, tstor_tensor_storage(t), TSTOR_FLOAT32, &sv));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_LIST, &list));
  ck_tstor_ok(tstor_value_append(list, integer(ck, -3)));
  ck_tstor_ok(tstor_value_append(list, str(ck, "two")));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &state));
  ck_tstor_ok(tstor_value_dict_set(state, str(ck, "weight"), tv));
  ck_tstor_ok(tstor_value_new_bool(ck, 1, &b));
  ck_tstor_ok(tstor_value_dict_set(state, str(ck, "train"), b));
  ck_tstor_ok(tstor_value_new_object(ck, "nn.Linear", "1", state, &obj));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "model"), obj));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "transposed"), view));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "storage"), sv));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "list"), list));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "scalar"), scalar));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "empty"), empty));
  tstor_value *pi, *bytes;
  ck_tstor_ok(tstor_value_new_float(ck, 3.25, &pi));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "pi"), pi));
  ck_tstor_ok(tstor_value_new_bytes(ck, "\xff\x00\xfe", 3, &bytes));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "raw"), bytes));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, root));
  static const unsigned formats[] = {0, TSTOR_SAVE_TORCH7_BIG_ENDIAN, TSTOR_SAVE_TORCH7_LONG4,
                                     TSTOR_SAVE_TORCH7_BIG_ENDIAN | TSTOR_SAVE_TORCH7_LONG4,
                                     TSTOR_SAVE_TORCH7_ASCII};
  char path[128];
  snprintf(path, sizeof path, "/tmp/tstor-t7-built-%d.t7", (int)getpid());
  for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
    ck_tstor_ok(tstor_torch7_save(ck, path, TEST_SAVE_OPTS(formats[f])));
    tstor_file_format fmt;
    ck_tstor_ok(tstor_file_format_of(path, &fmt));
    ck_assert_int_eq(fmt, TSTOR_FORMAT_TORCH7);
    tstor_checkpoint *back;
    ck_tstor_ok(tstor_checkpoint_load(ctx, path, NULL, &back));
    const tstor_value *r = tstor_checkpoint_root(back);
    const tstor_value *m = tstor_value_dict_get(r, "model");
    ck_assert_str_eq(tstor_value_object_class(m), "nn.Linear");
    ck_assert_str_eq(tstor_value_object_version(m), "1");
    const tstor_value *w = tstor_value_dict_get(tstor_value_object_state(m), "weight");
    tstor_tensor *bt = tstor_value_tensor(w), *btt = tstor_value_tensor(tstor_value_dict_get(r, "transposed"));
    ck_assert_ptr_eq(tstor_tensor_storage(bt), tstor_tensor_storage(btt)); /* one storage, still */
    ck_assert_int_eq(tstor_tensor_strides(btt)[0], 1);
    ck_assert_int_eq(tstor_tensor_strides(btt)[1], 4);
    ck_assert_mem_eq(tstor_tensor_data(bt), data, sizeof data);
    tstor_dtype sdt;
    ck_assert_ptr_eq(tstor_value_storage(tstor_value_dict_get(r, "storage"), &sdt), tstor_tensor_storage(bt));
    ck_assert_int_eq(sdt, TSTOR_FLOAT32);
    const tstor_value *l = tstor_value_dict_get(r, "list");
    ck_assert_int_eq(tstor_value_kind_of(l), TSTOR_VALUE_DICT); /* Lua's array: keys 1 and 2 */
    ck_assert_int_eq(tstor_value_len(l), 2);
    ck_assert_int_eq(tstor_value_int(tstor_value_key(l, 1)), 2);
    ck_assert_int_eq(tstor_value_int(tstor_value_item(l, 0)), -3);
    tstor_tensor *bs = tstor_value_tensor(tstor_value_dict_get(r, "scalar"));
    ck_assert_int_eq(tstor_tensor_dim(bs), 1); /* Torch7 has no 0-dim tensor */
    ck_assert_int_eq(*(int64_t *)tstor_tensor_data(bs), 7);
    ck_assert_int_eq(tstor_tensor_numel(tstor_value_tensor(tstor_value_dict_get(r, "empty"))), 0);
    ck_assert(tstor_value_float(tstor_value_dict_get(r, "pi")) == 3.25);
    size_t n;
    const char *raw = tstor_value_string(tstor_value_dict_get(r, "raw"), &n);
    ck_assert_int_eq(tstor_value_kind_of(tstor_value_dict_get(r, "raw")), TSTOR_VALUE_BYTES);
    ck_assert_int_eq(n, 3);
    ck_assert_mem_eq(raw, "\xff\x00\xfe", 3);
    tstor_checkpoint_free(back);
  }
  /* what Torch7 cannot hold is refused, and no file is left */
  unlink(path);
  ck_tstor_err(tstor_torch7_save(ck, path,
                                 TEST_SAVE_OPTS(TSTOR_SAVE_TORCH7_ASCII | TSTOR_SAVE_TORCH7_LONG4)),
               TSTOR_EINVAL);
  ck_tstor_err(tstor_torch7_save(ck, path, TEST_SAVE_OPTS(1u << 9)), TSTOR_EINVAL);
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "big"), integer(ck, ((int64_t)1 << 53) + 1)));
  ck_tstor_err(tstor_torch7_save(ck, path, NULL), TSTOR_ERANGE);
  ck_last_error_has("cannot hold it exactly");
  ck_assert_int_eq(access(path, F_OK), -1);
  tstor_tensor *bt;
  ck_tstor_ok(tstor_tensor_zeros(ctx, cpu, TSTOR_BOOL, 1, sizes, &bt));
  tstor_value *bv;
  ck_tstor_ok(tstor_value_new_tensor(ck, bt, &bv));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "big"), bv));
  ck_tstor_err(tstor_torch7_save(ck, path, NULL), TSTOR_ENOTSUP);
  ck_last_error_has("a bool tensor: Torch7 has no type for it");
  tstor_tensor *lt;
  int64_t huge = (int64_t)1 << 40;
  ck_tstor_ok(tstor_tensor_from_array(ctx, cpu, TSTOR_INT64, 0, NULL, &huge, &lt));
  tstor_value *lv;
  ck_tstor_ok(tstor_value_new_tensor(ck, lt, &lv));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "big"), lv));
  ck_tstor_ok(tstor_torch7_save(ck, path, NULL));
  ck_tstor_err(tstor_torch7_save(ck, path, TEST_SAVE_OPTS(TSTOR_SAVE_TORCH7_LONG4)), TSTOR_ERANGE);
  ck_last_error_has("does not fit the 4-byte longs");
  unlink(path);
  tstor_tensor_release(lt);
  tstor_tensor_release(bt);
  tstor_tensor_release(t);
  tstor_tensor_release(tt);
  tstor_tensor_release(s0);
  tstor_tensor_release(e0);
  tstor_checkpoint_free(ck);
}
END_TEST

/* A mapped load of a little-endian file: storages that lie aligned are views
 * of the file's mapping; a read one owns its memory. */
START_TEST(mapped_and_read) {
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  o.flags = TSTOR_LOAD_MMAP;
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_torch7_load(ctx, WRITTEN "/doubletensor.t7", &o, &ck));
  tstor_tensor *t = tstor_value_tensor(tstor_checkpoint_root(ck));
  ck_assert_ptr_nonnull(t);
  tstor_storage *s = tstor_tensor_storage(t), *base = tstor_storage_base(s);
  /* where its elements lie in the file: a view when that is 8-aligned */
  size_t len;
  unsigned char *file = (unsigned char *)tstor_test_slurp(WRITTEN "/doubletensor.t7", &len);
  unsigned char *at = memmem(file, len, tstor_storage_data(s), tstor_storage_nbytes(s));
  ck_assert_ptr_nonnull(at);
  ck_assert_int_eq(base != NULL, (at - file) % 8 == 0);
  ck_assert(!base || (tstor_storage_flags(base) & TSTOR_FLAG_MAPPED));
  free(file);
  ck_assert(((double *)tstor_tensor_data(t))[5] == 6.9);
  tstor_checkpoint_free(ck);
  ck_tstor_ok(tstor_torch7_load(ctx, WRITTEN "/doubletensor.t7", NULL, &ck));
  s = tstor_tensor_storage(tstor_value_tensor(tstor_checkpoint_root(ck)));
  ck_assert(!tstor_storage_base(s) && !(tstor_storage_flags(s) & TSTOR_FLAG_MAPPED));
  tstor_checkpoint_free(ck);
  /* shapes only: onto meta */
  o.flags = 0;
  o.map_location = "meta";
  tstor_device meta;
  if (tstor_device_parse(ctx, "meta", &meta) == 0) {
    ck_tstor_ok(tstor_torch7_load(ctx, WRITTEN "/floattensor.t7", &o, &ck));
    t = tstor_value_tensor(tstor_checkpoint_root(ck));
    ck_assert_int_eq(tstor_tensor_numel(t), 24);
    ck_assert_int_eq(tstor_tensor_device(t).type, meta.type);
    tstor_checkpoint_free(ck);
  }
  ck_tstor_err(tstor_torch7_load(ctx, WRITTEN "/doubletensor.t7", NULL, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_torch7_load(ctx, NULL, NULL, &ck), TSTOR_EINVAL);
  ck_tstor_err(tstor_torch7_load_buffer(ctx, NULL, 4, NULL, &ck), TSTOR_EINVAL);
  ck_tstor_err(tstor_torch7_load_buffer(ctx, "", 0, NULL, &ck), TSTOR_EINVAL);
}
END_TEST

/* An optimizer's param_groups as torch.optim writes them: foreach,
 * maximize's neighbours and others are None, which a Lua table cannot hold.
 * The writer wrote nil values, which Torch7 and this reader refuse; it leaves
 * those entries out now, in every format, and a list keeps its indices. */
START_TEST(none_values_are_left_out) {
  tstor_checkpoint *ck;
  tstor_value *group, *list, *none, *lr;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &group));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_NONE, &none));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_LIST, &list));
  ck_tstor_ok(tstor_value_new_float(ck, 0.001, &lr));
  ck_tstor_ok(tstor_value_dict_set(group, str(ck, "lr"), lr));
  ck_tstor_ok(tstor_value_dict_set(group, str(ck, "foreach"), none));
  ck_tstor_ok(tstor_value_dict_set(group, str(ck, "differentiable"), none));
  ck_tstor_ok(tstor_value_append(list, integer(ck, 7)));
  ck_tstor_ok(tstor_value_append(list, none));
  ck_tstor_ok(tstor_value_append(list, integer(ck, 9)));
  ck_tstor_ok(tstor_value_dict_set(group, str(ck, "params"), list));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, group));
  static const unsigned formats[] = {0, TSTOR_SAVE_TORCH7_ASCII, TSTOR_SAVE_TORCH7_BIG_ENDIAN,
                                     TSTOR_SAVE_TORCH7_LONG4};
  for (size_t f = 0; f < sizeof formats / sizeof *formats; f++) {
    void *data;
    size_t size;
    ck_tstor_ok(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_TORCH7, TEST_SAVE_OPTS(formats[f]),
                                             &data, &size));
    tstor_checkpoint *back;
    ck_tstor_ok(tstor_torch7_load_buffer(ctx, data, size, NULL, &back));
    const tstor_value *root = tstor_checkpoint_root(back);
    ck_assert_uint_eq(tstor_value_len(root), 2);
    ck_assert(tstor_value_float(tstor_value_dict_get(root, "lr")) == 0.001);
    ck_assert_ptr_null(tstor_value_dict_get(root, "foreach"));
    const tstor_value *params = tstor_value_dict_get(root, "params");
    ck_assert_uint_eq(tstor_value_len(params), 2); /* keys 1 and 3, as Lua has them */
    ck_assert_int_eq(tstor_value_int(tstor_value_key(params, 1)), 3);
    ck_assert_int_eq(tstor_value_int(tstor_value_item(params, 1)), 9);
    tstor_checkpoint_free(back);
    free(data);
  }
  /* a None key has no Lua form */
  tstor_value *d;
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &d));
  ck_tstor_ok(tstor_value_dict_set(d, none, lr));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, d));
  void *data = (void *)&d;
  size_t size;
  ck_tstor_err(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_TORCH7, NULL, &data, &size),
               TSTOR_ENOTSUP);
  ck_last_error_has("a dict key that is None");
  tstor_checkpoint_free(ck);
}
END_TEST

/* Binary little-endian Torch7 bytes, built field by field. */
typedef struct t7_bytes {
  unsigned char b[512];
  size_t n;
} t7_bytes;
static void t7_put(t7_bytes *t, const void *p, size_t n) {
  ck_assert_uint_le(t->n + n, sizeof t->b);
  memcpy(t->b + t->n, p, n);
  t->n += n;
}
static void t7_int(t7_bytes *t, int32_t v) { t7_put(t, &v, 4); }
static void t7_long(t7_bytes *t, int64_t v) { t7_put(t, &v, 8); }
static void t7_double(t7_bytes *t, double v) { t7_put(t, &v, 8); }
static void t7_string(t7_bytes *t, const char *s) {
  t7_int(t, (int32_t)strlen(s));
  t7_put(t, s, strlen(s));
}

/* { a = 1, a = DoubleTensor{1.5, 2.5} }: Torch7 reads it as a = the tensor.
 * The reader refused the key written twice, then read the file again with
 * 4-byte longs, which happened to hold: a = LongStorage, b = bytes. A key
 * twice keeps its last value now, and no refusal leads to a second reading. */
START_TEST(a_key_twice_keeps_its_last_value) {
  t7_bytes t = {{0}, 0};
  t7_int(&t, 3), t7_int(&t, 1), t7_int(&t, 2); /* a table, index 1, 2 entries */
  t7_int(&t, 2), t7_string(&t, "a"), t7_int(&t, 1), t7_double(&t, 1.0);
  t7_int(&t, 2), t7_string(&t, "a");
  t7_int(&t, 4), t7_int(&t, 2), t7_string(&t, "V 1"), t7_string(&t, "torch.DoubleTensor");
  t7_int(&t, 1), t7_long(&t, 2), t7_long(&t, 1), t7_long(&t, 1);
  t7_int(&t, 4), t7_int(&t, 3), t7_string(&t, "V 1"), t7_string(&t, "torch.DoubleStorage");
  t7_long(&t, 2), t7_double(&t, 1.5), t7_double(&t, 2.5);
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_torch7_load_buffer(ctx, t.b, t.n, NULL, &ck));
  const tstor_value *root = tstor_checkpoint_root(ck);
  ck_assert_uint_eq(tstor_value_len(root), 1);
  tstor_tensor *a = tstor_value_tensor(tstor_value_dict_get(root, "a"));
  ck_assert_ptr_nonnull(a);
  ck_assert_int_eq(tstor_tensor_dtype(a), TSTOR_FLOAT64);
  const double *d = tstor_tensor_data(a);
  ck_assert(d[0] == 1.5 && d[1] == 2.5);
  tstor_checkpoint_free(ck);
}
END_TEST

/* THDiskFile reads an ascii Float with fscanf("%g") into a float: one
 * rounding from the decimal. Through a double first, this one lands on the
 * midpoint 1 + 3 * 2^-24 and then on the even neighbour 1 + 2^-22 (0x3f800002);
 * strtof gives 1 + 2^-23 (0x3f800001). */
START_TEST(ascii_floats_round_once) {
  static const char file[] =
      "4\n1\n3\nV 1\n18\ntorch.FloatStorage\n1\n1.0000001788139343261718749999\n";
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_torch7_load_buffer(ctx, file, sizeof file - 1, NULL, &ck));
  tstor_dtype dt;
  tstor_storage *s = tstor_value_storage(tstor_checkpoint_root(ck), &dt);
  ck_assert_int_eq(dt, TSTOR_FLOAT32);
  uint32_t bits;
  memcpy(&bits, tstor_storage_data(s), 4);
  ck_assert_uint_eq(bits, 0x3f800001u);
  tstor_checkpoint_free(ck);
}
END_TEST

int main(void) {
  Suite *s = suite_create("torch7");
  TCase *tc = tcase_create("t7");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, written_by_torch7);
  tcase_add_test(tc, written_back_byte_for_byte);
  tcase_add_test(tc, generated_corpus);
  tcase_add_test(tc, hostile_files);
  tcase_add_test(tc, built_trees_every_format);
  tcase_add_test(tc, mapped_and_read);
  tcase_add_test(tc, none_values_are_left_out);
  tcase_add_test(tc, a_key_twice_keeps_its_last_value);
  tcase_add_test(tc, ascii_floats_round_once);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
