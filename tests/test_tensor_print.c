/* Printing tensors against PyTorch: every case of tests/vectors/
 * tensor_print.txt (gen_tensors.py) is str() of a tensor as PyTorch 1.13
 * wrote it, for every dtype PyTorch prints, shapes from 0-dim to 5-d, empty,
 * summarised and permuted tensors, and meta tensors; tensor_print_torch2.txt
 * the same for the dtypes of torch 2.x, as torch 2.x writes them. */
#define _GNU_SOURCE
#include "copycases.h"

static tstor_context *ctx;
static tstor_device cpu, meta, fake;

static void setup(void) {
  ctx = coretest_open(coretest_fake_section("fake", NULL));
  cpu = coretest_dev(ctx, "cpu");
  meta = coretest_dev(ctx, "meta");
  fake = coretest_dev(ctx, "fake:0");
}
static void teardown(void) { tstor_context_close(ctx); }

static unsigned char *unhex(const char *h, size_t *n) {
  if (strcmp(h, "-") == 0) {
    *n = 0;
    return malloc(1);
  }
  size_t len = strlen(h) / 2;
  unsigned char *b = malloc(len + 1);
  for (size_t i = 0; i < len; i++) sscanf(h + 2 * i, "%2hhx", &b[i]);
  *n = len;
  return b;
}

/* Runs every case of the file `name` on `dev`; returns the number of cases.
 * A case whose text is "error MESSAGE" is refused in PyTorch's words. */
static int run_file(tstor_device dev, const char *name) {
  FILE *f = open_vectors(name);
  static char line[1 << 20], want[1 << 20];
  int cases = 0, bad = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == '#') continue;
    char kind[16], dname[32], sz[256], perm[256] = "-";
    int fields = sscanf(line, "%15s %31s %255s %255s", kind, dname, sz, perm);
    ck_assert_int_ge(fields, 3);
    tstor_dtype dt;
    ck_tstor_ok(tstor_dtype_parse(dname, &dt));
    int64_t sizes[64], p64[64];
    int nd = parse_list(sz, sizes);
    tstor_tensor *t = NULL;
    if (strcmp(kind, "meta") == 0) {
      ck_tstor_ok(tstor_tensor_empty(ctx, meta, dt, nd, sizes, &t));
    } else {
      ck_assert(fgets(line, sizeof line, f) != NULL);
      line[strcspn(line, "\n")] = '\0';
      ck_assert(strncmp(line, "data ", 5) == 0);
      size_t n;
      unsigned char *data = unhex(line + 5, &n);
      tstor_tensor *base;
      ck_tstor_ok(tstor_tensor_from_array(ctx, dev, dt, nd, sizes, data, &base));
      free(data);
      int np = parse_list(perm, p64);
      if (np) {
        ck_tstor_ok(tstor_tensor_permute(base, np, p64, &t));
        tstor_tensor_release(base);
      } else {
        t = base;
      }
    }
    size_t w = 0;
    want[0] = '\0';
    while (fgets(line, sizeof line, f) && strcmp(line, "end\n") != 0) {
      size_t k = strlen(line);
      memcpy(want + w, line, k + 1);
      w += k;
    }
    if (w > 0) want[--w] = '\0'; /* the last newline */
    char *got = NULL;
    if (strncmp(want, "error ", 6) == 0) {
      int rc = tstor_tensor_to_string(t, &got);
      const char *msg = strstr(want, ": ") + 2;
      if (rc != TSTOR_EDTYPE || got != NULL || strcmp(tstor_last_error(), msg) != 0) {
        fprintf(stderr, "case %d (%s %s %s): %s, \"%s\"; PyTorch: %s\n", cases, kind, dname, sz,
                tstor_err_name(rc), tstor_last_error(), want);
        bad++;
      }
      free(got);
      tstor_tensor_release(t);
      cases++;
      continue;
    }
    ck_tstor_ok(tstor_tensor_to_string(t, &got));
    if (strcmp(got, want) != 0) {
      fprintf(stderr, "case %d (%s %s %s %s):\n--- got\n%s\n--- want\n%s\n", cases, kind, dname, sz,
              perm, got, want);
      bad++;
    }
    free(got);
    tstor_tensor_release(t);
    cases++;
  }
  fclose(f);
  ck_assert_msg(bad == 0, "%d of %d tensors print differently from PyTorch", bad, cases);
  return cases;
}

START_TEST(prints_as_pytorch) { ck_assert_int_ge(run_file(cpu, "tensor_print.txt"), 380); }
END_TEST

/* The dtypes PyTorch 1.13 lacks, as torch 2.x prints them
 * (tensor_print_torch2.txt). */
START_TEST(prints_as_torch2) {
  ck_assert_int_ge(run_file(cpu, "tensor_print_torch2.txt"), 215 + 51);
}
END_TEST

/* Through a device the core stages through: the same text, with the device
 * named as PyTorch names every device but cpu. */
START_TEST(prints_other_devices) {
  int64_t sz[] = {2, 2};
  float v[] = {1, 2.5f, -3, 4};
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_from_array(ctx, fake, TSTOR_FLOAT32, 2, sz, v, &t));
  char *s;
  ck_tstor_ok(tstor_tensor_to_string(t, &s));
  ck_assert_str_eq(s, "tensor([[ 1.0000,  2.5000],\n        [-3.0000,  4.0000]], device='fake:0')");
  long len = (long)strlen(s);
  free(s);
  FILE *f = tmpfile();
  ck_tstor_ok(tstor_tensor_print(f, t));
  ck_assert_int_eq(ftell(f), len + 1);
  fclose(f);
  tstor_tensor_release(t);
  ck_tstor_err(tstor_tensor_to_string(NULL, &s), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_print(NULL, t), TSTOR_EINVAL);
}
END_TEST

Suite *print_suite(void) {
  Suite *s = suite_create("tensor_print");
  TCase *tc = tcase_create("pytorch");
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, prints_as_pytorch);
  tcase_add_test(tc, prints_as_torch2);
  tcase_add_test(tc, prints_other_devices);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tstor_test_run(print_suite()); }
