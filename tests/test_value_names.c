/* Values found and walked by the names tstor inspect prints
 * (tstor_checkpoint_find, tstor_checkpoint_visit): dotted and exact names on
 * a training checkpoint PyTorch wrote, names two values share, keys that
 * need quoting, and the bound on the bytes of names a tree may cost. */
#define _GNU_SOURCE
#include "testutil.h"

#include <tstor/serialize.h>
#include <tstor/tensor.h>

#define CKDIR TSTOR_TEST_SRCDIR "/ckpt/golden"

static tstor_context *ctx;
static void setup(void) { ck_tstor_ok(tstor_context_open(NULL, &ctx)); }
static void teardown(void) { tstor_context_close(ctx); }

static tstor_value *str(tstor_checkpoint *ck, const char *s) {
  tstor_value *v;
  ck_tstor_ok(tstor_value_new_string(ck, s, strlen(s), &v));
  return v;
}

/* The visited names, one a line: "dotted exact kind[!]" (! for ambiguous). */
typedef struct seen {
  char *text;
  size_t len, n;
  size_t stop_after; /* 0: never stop */
} seen;

static int record(void *arg, const tstor_value_name *name) {
  seen *s = arg;
  char line[512];
  int k =
      snprintf(line, sizeof line, "%.200s %.200s %s%s\n", name->dotted, name->exact,
               tstor_value_kind_name(tstor_value_kind_of(name->value)), name->ambiguous ? "!" : "");
  s->text = realloc(s->text, s->len + (size_t)k + 1);
  memcpy(s->text + s->len, line, (size_t)k + 1);
  s->len += (size_t)k;
  s->n++;
  return s->stop_after && s->n == s->stop_after ? 42 : 0;
}

START_TEST(a_training_checkpoint) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_torch_load(ctx, CKDIR "/checkpoint_nested.pt", NULL, &ck));
  const tstor_value *w, *w2, *h, *root;
  ck_tstor_ok(tstor_checkpoint_find(ck, "model.weight", &w));
  ck_tstor_ok(tstor_checkpoint_find(ck, "['model']['weight']", &w2));
  ck_assert_ptr_eq(w, w2);
  ck_assert_int_eq(tstor_tensor_numel(tstor_value_tensor(w)), 12);
  ck_tstor_ok(tstor_checkpoint_find(ck, "history[2].w", &h));
  ck_assert_int_eq(tstor_tensor_storage_offset(tstor_value_tensor(h)), 8);
  ck_tstor_ok(tstor_checkpoint_find(ck, "$", &root));
  ck_assert_ptr_eq(root, tstor_checkpoint_root(ck));
  ck_tstor_ok(tstor_checkpoint_find(ck, "model", &w2)); /* a container, for --select */
  ck_assert_int_eq(tstor_value_kind_of(w2), TSTOR_VALUE_DICT);
  const tstor_value *none = (const tstor_value *)&none;
  ck_tstor_err(tstor_checkpoint_find(ck, "model.nothing", &none), TSTOR_ENOENT);
  ck_assert_ptr_null(none);
  ck_last_error_has("no value named 'model.nothing'");
  seen s = {0};
  ck_tstor_ok(tstor_checkpoint_visit(ck, TSTOR_VISIT_TENSORS, record, &s));
  ck_assert_uint_eq(s.n, 5);
  ck_assert_str_eq(s.text,
                   "model.weight ['model']['weight'] tensor\n"
                   "model.bias ['model']['bias'] tensor\n"
                   "history[0].w ['history'][0]['w'] tensor\n"
                   "history[1].w ['history'][1]['w'] tensor\n"
                   "history[2].w ['history'][2]['w'] tensor\n");
  free(s.text);
  s = (seen){0};
  ck_tstor_ok(tstor_checkpoint_visit(ck, TSTOR_VISIT_VALUES, record, &s));
  ck_assert(strstr(s.text, "epoch ['epoch'] int\n"));
  ck_assert(strstr(s.text, "lr[1] ['lr'][1] float\n"));
  ck_assert(
      strstr(s.text, "model@_metadata[''].version ['model']@['_metadata']['']['version'] int\n"));
  free(s.text);
  s = (seen){0};
  ck_tstor_ok(tstor_checkpoint_visit(ck, TSTOR_VISIT_CONTAINERS, record, &s));
  ck_assert(strncmp(s.text, "$ $ dict\nmodel ['model'] dict\n", 30) == 0);
  free(s.text);
  s = (seen){0, 0, 0, 2}; /* the function's nonzero result stops the walk */
  ck_assert_int_eq(tstor_checkpoint_visit(ck, TSTOR_VISIT_TENSORS, record, &s), 42);
  ck_assert_uint_eq(s.n, 2);
  free(s.text);
  ck_tstor_err(tstor_checkpoint_visit(ck, TSTOR_VISIT_TENSORS, NULL, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_checkpoint_find(ck, NULL, &w), TSTOR_EINVAL);
  ck_tstor_err(tstor_checkpoint_find(NULL, "x", &w), TSTOR_EINVAL);
  tstor_checkpoint_free(ck);
}
END_TEST

/* {"a.b": 1, "a": {"b": 2}, "it's\n": 3}: a dotted name two values share is
 * answered with both exact names; a key that needs quoting is quoted as
 * repr() quotes it. */
START_TEST(shared_names_and_quoting) {
  tstor_checkpoint *ck;
  tstor_value *root, *a, *one, *two, *three;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &root));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &a));
  ck_tstor_ok(tstor_value_new_int(ck, 1, &one));
  ck_tstor_ok(tstor_value_new_int(ck, 2, &two));
  ck_tstor_ok(tstor_value_new_int(ck, 3, &three));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "a.b"), one));
  ck_tstor_ok(tstor_value_dict_set(a, str(ck, "b"), two));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "a"), a));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "it's\n"), three));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, root));
  const tstor_value *v;
  ck_tstor_err(tstor_checkpoint_find(ck, "a.b", &v), TSTOR_EINVAL);
  ck_last_error_has("'a.b' names more than one value: ['a.b'], ['a']['b']");
  ck_tstor_ok(tstor_checkpoint_find(ck, "['a.b']", &v));
  ck_assert_ptr_eq(v, one);
  ck_tstor_ok(tstor_checkpoint_find(ck, "['a']['b']", &v));
  ck_assert_ptr_eq(v, two);
  ck_tstor_ok(tstor_checkpoint_find(ck, "['it\\'s\\n']", &v));
  ck_assert_ptr_eq(v, three);
  seen s = {0};
  ck_tstor_ok(tstor_checkpoint_visit(ck, TSTOR_VISIT_VALUES, record, &s));
  ck_assert_str_eq(s.text,
                   "a.b ['a.b'] int!\n"
                   "a.b ['a']['b'] int!\n"
                   "it's\n ['it\\'s\\n'] int\n");
  free(s.text);
  tstor_checkpoint_free(ck);
}
END_TEST

/* One value named 60000 times under 200 nested keys of 1000 bytes: 24 GB of
 * names if every path were spelt out. A tree built here (no file) has the
 * 64 MiB bound: the walk names what fits, then says why it stopped. */
START_TEST(names_are_bounded) {
  tstor_checkpoint *ck;
  tstor_value *list, *one, *node;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_LIST, &list));
  ck_tstor_ok(tstor_value_new_int(ck, 1, &one));
  for (int i = 0; i < 60000; i++) ck_tstor_ok(tstor_value_append(list, one));
  node = list;
  char key[1001];
  for (int depth = 0; depth < 200; depth++) {
    memset(key, 'x', 1000);
    snprintf(key, 5, "k%03d", depth);
    key[4] = 'x';
    key[1000] = '\0';
    tstor_value *d;
    ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &d));
    ck_tstor_ok(tstor_value_dict_set(d, str(ck, key), node));
    node = d;
  }
  ck_tstor_ok(tstor_checkpoint_set_root(ck, node));
  size_t count = 0;
  seen s = {0};
  ck_tstor_err(tstor_checkpoint_visit(ck, TSTOR_VISIT_VALUES, record, &s), TSTOR_ERANGE);
  count = s.n;
  free(s.text);
  ck_assert_uint_gt(count, 10);
  ck_assert_uint_lt(count, 200);
  ck_last_error_has("the names of the values pass 67108864 bytes");
  const tstor_value *v;
  ck_tstor_err(tstor_checkpoint_find(ck, "nothing", &v), TSTOR_ERANGE);
  tstor_checkpoint_free(ck);
}
END_TEST

int main(void) {
  Suite *s = suite_create("value_names");
  TCase *tc = tcase_create("names");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, a_training_checkpoint);
  tcase_add_test(tc, shared_names_and_quoting);
  tcase_add_test(tc, names_are_bounded);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
