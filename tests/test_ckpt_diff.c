/* The differential test against torch.load: tstor loads every file that
 * tests/ckpt/gen_diff.py wrote (valid-looking checkpoints with one field
 * broken) and must agree with what PyTorch made of each, recorded beside
 * them in expect.txt: both refuse, or both load the same tree (values,
 * layouts, storage sharing and element bytes). Both load with map_location
 * "cpu". The same for the .safetensors files of gen_st_diff.py against its
 * model of the reference reader (tensors, their bytes and the metadata).
 * The folder comes from TSTOR_DIFF_DIR (ckpt/diff.sh makes it); every
 * disagreement is printed with its mutation. Where the folder also holds
 * expect_torch2.txt (torch 2.x's judgement of the same files, which 1.13
 * wrote), tstor is held to 2.x, and the files on which 1.13 and 2.x
 * disagree are counted and named with the judge tstor followed (those where
 * it follows 1.13 count as disagreements too; docs/formats.md lists every
 * difference between the two). */
#define _GNU_SOURCE
#include "testutil.h"

#include "ckptlist.h"

static tstor_context *ctx;

typedef struct expected {
  char *name, *mutation;
  text want; /* the listing, or "refused\n" */
} expected;

/* expect.txt (or another judge's file of that form): "file NAME",
 * "# mutation ...", then the listing lines. NULL where `optional` and the
 * file is absent. */
static expected *read_expect(const char *dir, const char *file, int optional, size_t *n) {
  char *path;
  ck_assert(asprintf(&path, "%s/%s", dir, file) > 0);
  FILE *f = fopen(path, "r");
  if (!f && optional) {
    free(path);
    *n = 0;
    return NULL;
  }
  ck_assert_msg(f != NULL, "%s: cannot open it", path);
  expected *cases = NULL;
  size_t count = 0, cap = 0;
  char *line = NULL;
  size_t lcap = 0;
  ssize_t len;
  while ((len = getline(&line, &lcap, f)) > 0) {
    if (line[len - 1] == '\n') line[--len] = '\0';
    if (strncmp(line, "file ", 5) == 0) {
      if (count == cap) {
        cap = cap ? cap * 2 : 256;
        ck_assert_ptr_nonnull(cases = realloc(cases, cap * sizeof *cases));
      }
      memset(&cases[count], 0, sizeof cases[count]);
      ck_assert_ptr_nonnull(cases[count].name = strdup(line + 5));
      count++;
    } else if (strncmp(line, "# mutation ", 11) == 0 && count) {
      ck_assert_ptr_nonnull(cases[count - 1].mutation = strdup(line + 11));
    } else if (line[0] != '#' && count) {
      put(&cases[count - 1].want, "%s\n", line);
    }
  }
  free(line);
  fclose(f);
  free(path);
  *n = count;
  return cases;
}

static int by_text(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A safetensors file as gen_st_diff.py lists what the package read: a line
 * per tensor and per metadata entry, sorted ("empty" for none), with the
 * format's dtype names and shapes (F4's last dimension twice
 * float4_e2m1fn_x2's; a packed tensor's own). */
static char *list_safetensors(const tstor_checkpoint *ck) {
  static const struct {
    tstor_dtype dtype;
    const char *name;
  } names[] = {{TSTOR_BOOL, "BOOL"},
               {TSTOR_UINT8, "U8"},
               {TSTOR_INT8, "I8"},
               {TSTOR_FLOAT8_E5M2, "F8_E5M2"},
               {TSTOR_FLOAT8_E4M3FN, "F8_E4M3"},
               {TSTOR_FLOAT8_E8M0FNU, "F8_E8M0"},
               {TSTOR_FLOAT8_E4M3FNUZ, "F8_E4M3FNUZ"},
               {TSTOR_FLOAT8_E5M2FNUZ, "F8_E5M2FNUZ"},
               {TSTOR_INT16, "I16"},
               {TSTOR_UINT16, "U16"},
               {TSTOR_FLOAT16, "F16"},
               {TSTOR_BFLOAT16, "BF16"},
               {TSTOR_INT32, "I32"},
               {TSTOR_UINT32, "U32"},
               {TSTOR_FLOAT32, "F32"},
               {TSTOR_COMPLEX64, "C64"},
               {TSTOR_FLOAT64, "F64"},
               {TSTOR_INT64, "I64"},
               {TSTOR_UINT64, "U64"},
               {TSTOR_FLOAT4_E2M1FN_X2, "F4"}};
  const tstor_value *root = tstor_checkpoint_root(ck), *md = tstor_checkpoint_metadata(ck);
  size_t nt = tstor_value_len(root), nm = md ? tstor_value_len(md) : 0, n = 0;
  char **lines = calloc(nt + nm + 1, sizeof *lines);
  ck_assert_ptr_nonnull(lines);
  for (size_t i = 0; i < nt; i++) {
    size_t len;
    const char *name = tstor_value_string(tstor_value_key(root, i), &len);
    const tstor_value *v = tstor_value_item(root, i);
    const tstor_tensor *t = tstor_value_tensor(v);
    const char *dn = "?";
    int nd = tstor_tensor_dim(t);
    int64_t sizes[TSTOR_TENSOR_MAX_DIM];
    memcpy(sizes, tstor_tensor_sizes(t), (size_t)nd * sizeof *sizes);
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
      if (names[k].dtype == tstor_tensor_dtype(t)) dn = names[k].name;
    if (tstor_tensor_dtype(t) == TSTOR_FLOAT4_E2M1FN_X2 && nd) sizes[nd - 1] *= 2;
    tstor_safetensors_packed(ck, v, &dn, &nd, sizes); /* where it is packed bytes */
    text l = {0};
    char *h = hex(name, len);
    put(&l, "t s:%s %s sizes=", h, dn);
    ints(&l, sizes, nd);
    put(&l, " fnv=%016" PRIx64, tensor_fnv(t));
    free(h);
    lines[n++] = l.s;
  }
  for (size_t i = 0; i < nm; i++) {
    size_t kl, vl;
    const char *k = tstor_value_string(tstor_value_key(md, i), &kl), *v = tstor_value_string(tstor_value_item(md, i), &vl);
    char *hk = hex(k, kl), *hv = hex(v, vl);
    text l = {0};
    put(&l, "m s:%s s:%s", hk, hv);
    free(hk);
    free(hv);
    lines[n++] = l.s;
  }
  qsort(lines, n, sizeof *lines, by_text);
  text all = {0};
  for (size_t i = 0; i < n; i++) {
    put(&all, "%s\n", lines[i]);
    free(lines[i]);
  }
  if (!n) put(&all, "empty\n");
  free(lines);
  return all.s;
}

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && strcmp(s + a - b, tail) == 0;
}

START_TEST(agrees_with_torch_load) {
  const char *dir = getenv("TSTOR_DIFF_DIR");
  ck_assert_msg(dir != NULL, "TSTOR_DIFF_DIR is not set (tests/ckpt/diff.sh sets it)");
  size_t n, n2;
  expected *cases = read_expect(dir, "expect.txt", 0, &n);
  expected *second = read_expect(dir, "expect_torch2.txt", 1, &n2);
  ck_assert_msg(n > 0, "%s/expect.txt lists no file", dir);
  ck_assert_msg(!second || n2 == n, "expect_torch2.txt judges %zu files, expect.txt lists %zu", n2,
                n);
  size_t both_loaded = 0, both_refused = 0, disagree = 0, judges_differ = 0, follow_old = 0,
         follow_new = 0;
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  o.map_location = "cpu";
  for (size_t i = 0; i < n; i++) {
    char *path;
    ck_assert(asprintf(&path, "%s/%s", dir, cases[i].name) > 0);
    tstor_checkpoint *ck = NULL;
    int st = ends_with(path, ".safetensors");
    int rc = st ? tstor_safetensors_load(ctx, path, &o, &ck) : tstor_torch_load(ctx, path, &o, &ck);
    char *got = rc ? strdup("refused\n") : st ? list_safetensors(ck) : list_checkpoint(ck, 1);
    ck_assert_ptr_nonnull(got);
    const char *want = cases[i].want.s ? cases[i].want.s : "";
    if (second) { /* torch 2.x judges; 1.13's answer is said where it differs */
      ck_assert_str_eq(second[i].name, cases[i].name);
      const char *old = want;
      want = second[i].want.s ? second[i].want.s : "";
      if (strcmp(old, want) != 0) {
        int follows_old = strcmp(got, want) != 0 && strcmp(got, old) == 0;
        if (++judges_differ <= 20 || (follows_old && follow_old < 20))
          fprintf(stderr, "%s (mutation: %s): torch 1.13 %s, torch 2.x %s; tstor follows %s\n",
                  cases[i].name, cases[i].mutation ? cases[i].mutation : "?",
                  strcmp(old, "refused\n") ? "loads it" : "refuses it",
                  strcmp(want, "refused\n") ? "loads it" : "refuses it",
                  strcmp(got, want) == 0 ? "2.x"
                  : follows_old          ? "1.13"
                                         : "neither");
        follow_old += follows_old;
        follow_new += strcmp(got, want) == 0;
      }
    }
    int torch_refused = strcmp(want, "refused\n") == 0;
    if (strcmp(got, want) == 0) {
      if (torch_refused) both_refused++;
      else both_loaded++;
    } else {
      fprintf(stderr, "%s (mutation: %s): tstor %s, torch.load %s\n", cases[i].name,
              cases[i].mutation ? cases[i].mutation : "?", rc ? tstor_last_error() : "loaded",
              torch_refused ? "refused" : "loaded");
      if (++disagree <= 10) fprintf(stderr, "--- tstor\n%s--- torch.load\n%s", got, want);
    }
    free(got);
    tstor_checkpoint_free(ck);
    free(path);
  }
  fprintf(stderr,
          "differential: %zu files, %zu loaded alike, %zu refused by both, %zu disagreements%s\n",
          n, both_loaded, both_refused, disagree, second ? " (with torch 2.x)" : "");
  if (second)
    fprintf(stderr,
            "differential: torch 1.13 and 2.x judge %zu of the files differently; tstor follows "
            "2.x on %zu, "
            "1.13 on %zu\n",
            judges_differ, follow_new, follow_old);
  for (int k = 0; k < 2; k++) {
    expected *c = k ? second : cases;
    for (size_t i = 0; c && i < n; i++) {
      free(c[i].name);
      free(c[i].mutation);
      free(c[i].want.s);
    }
    free(c);
  }
  ck_assert_msg(disagree == 0, "%zu of %zu files load differently from torch.load", disagree, n);
}
END_TEST

static void setup(void) { ck_tstor_ok(tstor_context_open(NULL, &ctx)); }
static void teardown(void) { tstor_context_close(ctx); }

int main(void) {
  Suite *s = suite_create("ckpt_diff");
  TCase *tc = tcase_create("torch.load");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 1800);
  tcase_add_test(tc, agrees_with_torch_load);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
