/* Tensor views and copies against PyTorch: every case of
 * tests/vectors/tensor_views.txt and tensor_copies.txt (gen_tensors.py), the
 * layouts, results and refusals PyTorch 1.13 gave. Copies run on cpu and
 * again through a device the core must stage through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>

#include "copycases.h"

static tstor_context *ctx;
static tstor_device cpu, fake, conv;

static void setup(void) {
  ctx = coretest_open(coretest_fmt("%s[backend convdev]\nlibrary = %s\n",
                                   coretest_fake_section("fake", NULL),
                                   coretest_plugin("convdev")));
  cpu = coretest_dev(ctx, "cpu");
  fake = coretest_dev(ctx, "fake:0");
  conv = coretest_dev(ctx, "convdev:0");
}
static void teardown(void) { tstor_context_close(ctx); }

static void describe(const tstor_tensor *t, char *buf, size_t size) {
  char sz[1024] = "", st[1024] = "";
  int n = tstor_tensor_dim(t);
  size_t a = 0, b = 0;
  for (int i = 0; i < n; i++) {
    a += (size_t)snprintf(sz + a, sizeof sz - a, "%s%" PRId64, i ? "," : "", tstor_tensor_sizes(t)[i]);
    b += (size_t)snprintf(st + b, sizeof st - b, "%s%" PRId64, i ? "," : "", tstor_tensor_strides(t)[i]);
  }
  snprintf(buf, size, "%s %" PRId64 " %s %s", tstor_dtype_name(tstor_tensor_dtype(t)),
           tstor_tensor_storage_offset(t), n ? sz : "-", n ? st : "-");
}

/* ----------------------------------------------------------------- views */

static int64_t arg(char **save) {
  char *a = strtok_r(NULL, " ", save);
  ck_assert_ptr_nonnull(a);
  return strtoll(a, NULL, 10);
}

/* Applies OP ARGS; returns the call's status, the tensors in out[]. */
static int apply(const char *op, char **save, tstor_tensor *b, tstor_tensor ***list, int *count,
                 tstor_tensor **out) {
  int64_t v[70], w[70];
  int iv[70], iw[70];
  *list = NULL;
  *count = 0;
  if (!strcmp(op, "view") || !strcmp(op, "reshape") || !strcmp(op, "expand")) {
    int n = parse_list(strtok_r(NULL, " ", save), v);
    if (!strcmp(op, "view")) return tstor_tensor_view(b, n, v, out);
    if (!strcmp(op, "reshape")) return tstor_tensor_reshape(b, n, v, out);
    return tstor_tensor_expand(b, n, v, out);
  }
  if (!strcmp(op, "narrow")) {
    int d = (int)arg(save);
    int64_t s = arg(save), l = arg(save);
    return tstor_tensor_narrow(b, d, s, l, out);
  }
  if (!strcmp(op, "select")) {
    int d = (int)arg(save);
    return tstor_tensor_select(b, d, arg(save), out);
  }
  if (!strcmp(op, "slice")) {
    int d = (int)arg(save);
    int64_t s = arg(save), e = arg(save), st = arg(save);
    return tstor_tensor_slice(b, d, s, e, st, out);
  }
  if (!strcmp(op, "transpose")) {
    int a = (int)arg(save);
    return tstor_tensor_transpose(b, a, (int)arg(save), out);
  }
  if (!strcmp(op, "t")) return tstor_tensor_t(b, out);
  if (!strcmp(op, "permute")) {
    int n = parse_list(strtok_r(NULL, " ", save), v);
    for (int i = 0; i < n; i++) iv[i] = (int)v[i];
    return tstor_tensor_permute(b, n, iv, out);
  }
  if (!strcmp(op, "movedim")) {
    int n = parse_list(strtok_r(NULL, " ", save), v);
    int m = parse_list(strtok_r(NULL, " ", save), w);
    for (int i = 0; i < n; i++) iv[i] = (int)v[i];
    for (int i = 0; i < m; i++) iw[i] = (int)w[i];
    if (n != m)
      return 1; /* one count for both lists in tstor: not expressible */
    return tstor_tensor_movedim(b, n, iv, iw, out);
  }
  if (!strcmp(op, "squeeze")) return tstor_tensor_squeeze(b, out);
  if (!strcmp(op, "squeeze_dim")) return tstor_tensor_squeeze_dim(b, (int)arg(save), out);
  if (!strcmp(op, "unsqueeze")) return tstor_tensor_unsqueeze(b, (int)arg(save), out);
  if (!strcmp(op, "flatten")) {
    int a = (int)arg(save);
    return tstor_tensor_flatten(b, a, (int)arg(save), out);
  }
  if (!strcmp(op, "unflatten")) {
    int d = (int)arg(save);
    int n = parse_list(strtok_r(NULL, " ", save), v);
    return tstor_tensor_unflatten(b, d, n, v, out);
  }
  if (!strcmp(op, "unfold")) {
    int d = (int)arg(save);
    int64_t s = arg(save);
    return tstor_tensor_unfold(b, d, s, arg(save), out);
  }
  if (!strcmp(op, "diagonal")) {
    int64_t o = arg(save);
    int a = (int)arg(save);
    return tstor_tensor_diagonal(b, o, a, (int)arg(save), out);
  }
  if (!strcmp(op, "split")) {
    int64_t s = arg(save);
    return tstor_tensor_split(b, s, (int)arg(save), count, list);
  }
  if (!strcmp(op, "split_sizes")) {
    int n = parse_list(strtok_r(NULL, " ", save), v);
    return tstor_tensor_split_sizes(b, n, v, (int)arg(save), count, list);
  }
  if (!strcmp(op, "chunk")) {
    int c = (int)arg(save);
    return tstor_tensor_chunk(b, c, (int)arg(save), count, list);
  }
  if (!strcmp(op, "view_dtype")) {
    tstor_dtype dt;
    ck_tstor_ok(tstor_dtype_parse(strtok_r(NULL, " ", save), &dt));
    return tstor_tensor_view_dtype(b, dt, out);
  }
  if (!strcmp(op, "real")) return tstor_tensor_real(b, out);
  if (!strcmp(op, "imag")) return tstor_tensor_imag(b, out);
  if (!strcmp(op, "view_as_real")) return tstor_tensor_view_as_real(b, out);
  if (!strcmp(op, "as_strided")) {
    int n = parse_list(strtok_r(NULL, " ", save), v);
    int m = parse_list(strtok_r(NULL, " ", save), w);
    ck_assert_int_eq(n, m);
    return tstor_tensor_as_strided(b, n, v, w, arg(save), out);
  }
  if (!strcmp(op, "contiguous")) return tstor_tensor_contiguous(b, out);
  if (!strcmp(op, "clone")) return tstor_tensor_clone(b, out);
  ck_abort_msg("unknown op %s", op);
  return 0;
}

START_TEST(views_as_pytorch) {
  FILE *f = open_vectors("tensor_views.txt");
  char line[8192];
  int cases = 0, refusals = 0, skipped = 0, bad = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    line[strcspn(line, "\n")] = '\0';
    char copy[8192];
    memcpy(copy, line, sizeof copy);
    char *p1 = copy, *p2 = strstr(p1, " ; ");
    ck_assert_ptr_nonnull(p2);
    *p2 = '\0';
    p2 += 3;
    char *p3 = strstr(p2, " ; ");
    ck_assert_ptr_nonnull(p3);
    *p3 = '\0';
    p3 += 3;
    char *save;
    layout l;
    strtok_r(p1, "", &save); /* reset */
    save = p1;
    parse_layout(&save, &l);
    tstor_storage *s;
    ck_tstor_ok(tstor_typed_new(ctx, cpu, l.dtype, (size_t)need(&l), &s));
    tstor_tensor *b;
    ck_tstor_ok(tstor_tensor_on_storage(s, l.dtype, l.offset, l.ndim, l.sizes, l.strides, &b));
    char *op = strtok_r(p2, " ", &save);
    tstor_tensor **list = NULL, *out = NULL;
    int count = 0;
    int rc = apply(op, &save, b, &list, &count, &out);
    if (rc == 1) {
      skipped++;
    } else if (p3[0] == '!') {
      if (rc >= 0 || strstr(tstor_last_error(), p3 + 2) == NULL) {
        fprintf(stderr, "%s\n  got: %s\n", line, rc ? tstor_last_error() : "success");
        bad++;
      }
      if (rc == 0) {
        tstor_tensor_list_free(list, count);
        tstor_tensor_release(out);
      } else {
        ck_assert_ptr_null(out);
        ck_assert_ptr_null(list);
      }
      refusals++;
    } else if (rc != 0) {
      fprintf(stderr, "%s\n  failed: %s: %s\n", line, tstor_err_name(rc), tstor_last_error());
      bad++;
    } else {
      char got[8192] = "", one[2048];
      if (list || !strcmp(op, "split") || !strcmp(op, "chunk") || !strcmp(op, "split_sizes")) {
        size_t k = 0;
        for (int i = 0; i < count; i++) {
          describe(list[i], one, sizeof one);
          k += (size_t)snprintf(got + k, sizeof got - k, "%s%s", i ? " | " : "", one);
        }
        if (count == 0) snprintf(got, sizeof got, "none");
        tstor_tensor_list_free(list, count);
      } else {
        describe(out, got, sizeof got);
        if (!strcmp(op, "reshape") || !strcmp(op, "flatten") || !strcmp(op, "contiguous"))
          strcat(got, tstor_tensor_storage(out) == s ? " view" : " copy");
        tstor_tensor_release(out);
      }
      if (strcmp(got, p3) != 0) {
        fprintf(stderr, "%s\n  got %s\n", line, got);
        bad++;
      }
    }
    tstor_tensor_release(b);
    ck_assert_int_eq(tstor_storage_use_count(s), 1);
    tstor_storage_release(s);
    cases++;
  }
  fclose(f);
  ck_assert_msg(bad == 0, "%d of %d views differ from PyTorch's", bad, cases);
  ck_assert_int_gt(cases, 900);
  ck_assert_int_gt(refusals, 200);
  ck_assert_int_lt(skipped, 10);
}
END_TEST

START_TEST(copies_as_pytorch_cpu) { ck_assert_int_gt(run_copies(ctx, cpu, cpu, cpu), 700); }
END_TEST

START_TEST(copies_as_pytorch_staged) {
  ck_assert_int_gt(run_copies(ctx, cpu, fake, cpu), 500);
  ck_assert_int_gt(run_copies(ctx, cpu, cpu, fake), 500);
  ck_assert_int_gt(run_copies(ctx, cpu, fake, fake), 700);
}
END_TEST

/* On a device with its own copy_strided (convdev's, which goes last element
 * first): the core hands it only blocks whose result cannot depend on the
 * order, and stages the rest, such as a destination whose elements overlap,
 * where PyTorch's order decides which write stays. */
START_TEST(copies_as_pytorch_through_copy_strided) {
  void *h = dlopen(coretest_plugin("convdev"), RTLD_NOW | RTLD_NOLOAD);
  ck_assert_ptr_nonnull(h);
  atomic_long *calls = dlsym(h, "convdev_strided_calls");
  dlclose(h); /* still loaded by the context */
  ck_assert_ptr_nonnull(calls);
  long before = atomic_load(calls);
  ck_assert_int_gt(run_copies(ctx, cpu, conv, conv), 700);
  long used = atomic_load(calls) - before; /* 141 of the 760 cases */
  ck_assert_int_gt(used, 100);
}
END_TEST

/* The same copies with every large job split over 4 threads. */
START_TEST(copies_threaded) {
  int old = tstor_set_num_threads(4);
  ck_assert_int_gt(run_copies(ctx, cpu, cpu, cpu), 700);
  tstor_set_num_threads(old);
}
END_TEST

Suite *vectors_suite(void) {
  Suite *s = suite_create("tensor_vectors");
  TCase *tc = tcase_create("pytorch");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, views_as_pytorch);
  tcase_add_test(tc, copies_as_pytorch_cpu);
  tcase_add_test(tc, copies_as_pytorch_staged);
  tcase_add_test(tc, copies_as_pytorch_through_copy_strided);
  tcase_add_test(tc, copies_threaded);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tstor_test_run(vectors_suite()); }
