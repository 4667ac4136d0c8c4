/* The corpus of real files (tests/corpus/SOURCES: files other projects wrote
 * and published, each with its repository, commit and licence), loaded by
 * tstor and listed as tests/corpus/listing.txt says the references read
 * them: torch.load's values, dtypes, shapes, strides and sharing (2.x, with
 * what 1.13 said beside it), the safetensors package's tensors and
 * metadata, torchfile's Torch7 tree; or refused with the code and words the
 * listing gives, where the reference refuses the file or tstor refuses it by
 * design. Each file is loaded from its path and from a buffer, then saved
 * again in its own format and loaded the same. No Python is needed here:
 * corpus/regenerate.sh makes the listing again where the references are. */
#define _GNU_SOURCE
#include "testutil.h"

#include <unistd.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

#include "ckptlist.h"
#include "t7render.h"

#define CORPUS TSTOR_TEST_SRCDIR "/corpus"

static tstor_context *ctx;

static void setup(void) { ck_tstor_ok(tstor_context_open(NULL, &ctx)); }
static void teardown(void) { tstor_context_close(ctx); }

typedef struct entry {
  char *name, *format;
  char *expect; /* the lines after the file's comments */
} entry;

static entry *entries;
static int nentries;

static void read_listing(void) {
  if (entries) return;
  char *all = tstor_test_slurp(CORPUS "/listing.txt", NULL);
  entry *e = NULL;
  text body = {0};
  for (char *line = strtok(all, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '#') continue;
    if (strncmp(line, "file ", 5) == 0) {
      if (e) e->expect = body.s ? body.s : strdup("");
      body = (text){0};
      entries = realloc(entries, (size_t)(nentries + 1) * sizeof *entries);
      e = &entries[nentries++];
      char *sp = strchr(line + 5, ' ');
      ck_assert_ptr_nonnull(sp);
      e->name = strndup(line + 5, (size_t)(sp - line - 5));
      e->format = strdup(sp + 1);
      continue;
    }
    ck_assert_msg(e != NULL, "listing.txt: a line before the first file");
    put(&body, "%s\n", line);
  }
  if (e) e->expect = body.s ? body.s : strdup("");
  free(all);
  ck_assert_int_gt(nentries, 70);
}

static const tstor_value *name_dict;
static int by_name(const void *a, const void *b) {
  size_t la, lb;
  const char *x = tstor_value_string(tstor_value_key(name_dict, *(const size_t *)a), &la);
  const char *y = tstor_value_string(tstor_value_key(name_dict, *(const size_t *)b), &lb);
  int c = memcmp(x, y, la < lb ? la : lb);
  return c ? c : (la > lb) - (la < lb);
}

/* safetensors as the listing gives it: tensors sorted by name, then the
 * metadata sorted by key. */
static char *list_safetensors(const tstor_checkpoint *ck) {
  const tstor_value *root = tstor_checkpoint_root(ck);
  lister *l = calloc(1, sizeof *l);
  l->with_data = 1;
  size_t n = tstor_value_len(root), *order = malloc((n + 1) * sizeof *order);
  for (size_t i = 0; i < n; i++) order[i] = i;
  name_dict = root;
  qsort(order, n, sizeof *order, by_name);
  for (size_t i = 0; i < n; i++) {
    text path = {0};
    put(&path, "$[");
    keyrepr(&path, tstor_value_key(root, order[i]));
    put(&path, "]");
    walk(l, path.s, tstor_value_item(root, order[i]));
    free(path.s);
  }
  const tstor_value *meta = tstor_checkpoint_metadata(ck);
  size_t m = meta ? tstor_value_len(meta) : 0;
  order = realloc(order, (m + 1) * sizeof *order);
  for (size_t i = 0; i < m; i++) order[i] = i;
  name_dict = meta;
  if (m) qsort(order, m, sizeof *order, by_name);
  for (size_t i = 0; i < m; i++) {
    put(&l->out, "meta ");
    keyrepr(&l->out, tstor_value_key(meta, order[i]));
    put(&l->out, " ");
    keyrepr(&l->out, tstor_value_item(meta, order[i]));
    put(&l->out, "\n");
  }
  free(order);
  char *s = l->out.s ? l->out.s : strdup("");
  free(l);
  return s;
}

/* What tstor's load gives, in the listing's form for the file's format. */
static char *listing_of(const entry *e, const tstor_checkpoint *ck, const char *t7format) {
  if (strcmp(e->format, "safetensors") == 0) return list_safetensors(ck);
  if (strcmp(e->format, "torch7") == 0) {
    char *node = render(ck);
    text t = {0};
    put(&t, "t7 %s ok %s\n", t7format, node);
    free(node);
    return t.s;
  }
  return list_checkpoint(ck, 1);
}

/* The listing's expectation with Torch7's file indices numbered as the
 * rendering numbers them. */
static char *expected(const entry *e, char *t7format, size_t cap) {
  if (strcmp(e->format, "torch7") != 0) return strdup(e->expect);
  char fmt[64];
  int at = 0;
  ck_assert_msg(sscanf(e->expect, "t7 %63s ok %n", fmt, &at) == 1 && at > 0, "%s: %s", e->name,
                e->expect);
  snprintf(t7format, cap, "%s", fmt);
  char *line = strndup(e->expect + at, strcspn(e->expect + at, "\n"));
  char *node = normalize(line);
  text t = {0};
  put(&t, "t7 %s ok %s\n", fmt, node);
  free(node);
  free(line);
  return t.s;
}

START_TEST(corpus_as_the_references_read_it) {
  read_listing();
  int read = 0, refused = 0;
  for (int i = 0; i < nentries; i++) {
    const entry *e = &entries[i];
    char *path;
    ck_assert(asprintf(&path, CORPUS "/files/%s", e->name) > 0);
    size_t len;
    char *bytes = tstor_test_slurp(path, &len);
    for (int way = 0; way < 2; way++) {
      const char *how = way ? "from a buffer" : "from its path";
      tstor_checkpoint *ck = (tstor_checkpoint *)1;
      int rc = way ? tstor_checkpoint_load_buffer(ctx, bytes, len, NULL, &ck)
                   : tstor_checkpoint_load(ctx, path, NULL, &ck);
      if (strncmp(e->expect, "refused ", 8) == 0) {
        char code[64], words[256];
        ck_assert(sscanf(e->expect, "refused %63s %255[^\n]", code, words) == 2);
        ck_assert_msg(rc != 0, "%s (%s): read, but the listing says %s", e->name, how, e->expect);
        ck_assert_ptr_null(ck);
        ck_assert_msg(strcmp(tstor_err_name(rc), code) == 0, "%s (%s): %s, not %s: %s", e->name,
                      how, tstor_err_name(rc), code, tstor_last_error());
        ck_assert_msg(strstr(tstor_last_error(), words), "%s (%s): '%s' does not say '%s'", e->name,
                      how, tstor_last_error(), words);
        refused += !way;
        continue;
      }
      ck_assert_msg(rc == 0, "%s (%s): %s: %s", e->name, how, tstor_err_name(rc),
                    tstor_last_error());
      char t7format[64] = "";
      char *want = expected(e, t7format, sizeof t7format);
      char *got = listing_of(e, ck, t7format);
      same_listing(e->name, way ? " (from a buffer)" : "", got, want);
      free(got);
      read += !way;
      if (way == 0) {
        /* saved again in its own format (torch.save's zip for both of
         * torch's) and loaded the same */
        char out[256];
        snprintf(out, sizeof out, "/tmp/tstor-corpus-%d", (int)getpid());
        int st = strcmp(e->format, "safetensors") == 0, t7 = strcmp(e->format, "torch7") == 0;
        tstor_save_options o = TSTOR_SAVE_OPTIONS_INIT;
        if (t7 && strcmp(t7format, "ascii") == 0) o.flags = TSTOR_SAVE_TORCH7_ASCII;
        ck_tstor_ok(st   ? tstor_safetensors_save(ck, out, &o)
                    : t7 ? tstor_torch7_save(ck, out, &o)
                         : tstor_torch_save(ck, out, &o));
        tstor_checkpoint *back;
        ck_tstor_ok(tstor_checkpoint_load(ctx, out, NULL, &back));
        char *again = listing_of(e, back, t7format);
        same_listing(e->name, " saved again and loaded", again, want);
        free(again);
        tstor_checkpoint_free(back);
        unlink(out);
      }
      free(want);
      tstor_checkpoint_free(ck);
    }
    free(bytes);
    free(path);
  }
  printf("corpus: %d files read as the references read them, %d refused as listed\n", read,
         refused);
  ck_assert_int_gt(read, 70);
}
END_TEST

int main(void) {
  Suite *s = suite_create("corpus");
  TCase *tc = tcase_create("corpus");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, corpus_as_the_references_read_it);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
