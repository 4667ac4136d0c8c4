/* Tensor views and copies against PyTorch: every case of
 * tests/vectors/tensor_views_torch2.txt and tensor_copies.txt (gen_tensors.py)
 * and every chain of tensor_chains_torch2.txt (gen_chains.py), the layouts,
 * results and refusals torch 2.x gave for the views and chains (the cases of
 * PyTorch 1.13's tensor_views.txt and tensor_chains.txt, which stay as the
 * record) and PyTorch 1.13 for the copies. Copies run on cpu and again
 * through a device the core must stage through. */
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
    return tstor_tensor_permute(b, n, v, out);
  }
  if (!strcmp(op, "movedim")) {
    int n = parse_list(strtok_r(NULL, " ", save), v);
    int m = parse_list(strtok_r(NULL, " ", save), w);
    if (n != m)
      return 1; /* one count for both lists in tstor: not expressible */
    return tstor_tensor_movedim(b, n, v, w, out);
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
  FILE *f = open_vectors("tensor_views_torch2.txt");
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

/* ---------------------------------------------------------------- chains */

/* One step of a chain, "OP ARGS [@K]", on *t: the step's status; *t becomes
 * its result (the K-th of a list) and the old *t is released. */
static int chain_step(char *text, tstor_tensor **t, int *none) {
  long pick = -1;
  char *at = strstr(text, " @");
  if (at) {
    pick = strtol(at + 2, NULL, 10);
    *at = '\0';
  }
  char *save;
  char *op = strtok_r(text, " ", &save);
  tstor_tensor **list = NULL, *out = NULL;
  int count = 0;
  int rc = apply(op, &save, *t, &list, &count, &out);
  if (rc != 0) {
    ck_assert_ptr_null(out);
    ck_assert_ptr_null(list);
    return rc;
  }
  if (!strcmp(op, "split") || !strcmp(op, "split_sizes") || !strcmp(op, "chunk")) {
    if (count == 0 || pick < 0 || pick >= count) {
      *none = count == 0;
      tstor_tensor_list_free(list, count);
      return *none ? 0 : -1000;
    }
    out = tstor_tensor_retain(list[pick]);
    tstor_tensor_list_free(list, count);
  }
  tstor_tensor_release(*t);
  *t = out;
  return 0;
}

/* Chains of up to six views on meta tensors whose sizes, strides and offsets
 * are often near INT64_MAX (tensor_chains_torch2.txt, gen_chains.py): each step must
 * succeed where PyTorch's did, the chain must be refused at the step PyTorch
 * refused, with PyTorch's message, and the last layout must be PyTorch's.
 * Where PyTorch's int64 arithmetic wrapped around ("! K overflow"), step K
 * must be refused with TSTOR_EOVERFLOW or give the exact layout the line
 * carries, the op's result in unbounded integers. */
START_TEST(chains_as_pytorch) {
  const char *other = getenv("TSTOR_CHAINS_FILE"); /* a longer run's */
  FILE *f = other ? fopen(other, "r") : open_vectors("tensor_chains_torch2.txt");
  ck_assert_msg(f != NULL, "cannot open %s", other);
  tstor_device meta = coretest_dev(ctx, "meta");
  char line[8192];
  int cases = 0, refusals = 0, overflows = 0, bad = 0, steps = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    line[strcspn(line, "\n")] = '\0';
    char copy[8192], *field[16];
    memcpy(copy, line, sizeof copy);
    int n = 0;
    for (char *p = copy; p && n < 16; n++) {
      field[n] = p;
      p = strstr(p, " ; ");
      if (p) {
        *p = '\0';
        p += 3;
      }
    }
    ck_assert_int_ge(n, 3);
    const char *want = field[n - 1];
    int refused_at = 0;
    const char *message = NULL, *exact = NULL;
    if (want[0] == '!') {
      char *end;
      refused_at = (int)strtol(want + 2, &end, 10);
      message = end + 1;
      refusals++;
      if (!strncmp(message, "overflow", 8)) {
        exact = message[8] ? message + 9 : NULL;
        message = "overflow";
        overflows++;
      }
    }
    char *save;
    layout l;
    save = field[0];
    parse_layout(&save, &l);
    tstor_storage *s;
    ck_tstor_ok(tstor_typed_new(ctx, meta, l.dtype, (size_t)need(&l), &s));
    tstor_tensor *t;
    ck_tstor_ok(tstor_tensor_on_storage(s, l.dtype, l.offset, l.ndim, l.sizes, l.strides, &t));
    char got[8192] = "";
    for (int k = 1; k <= n - 2; k++) {
      int none = 0;
      int rc = chain_step(field[k], &t, &none);
      steps++;
      if (rc != 0) {
        if (k != refused_at)
          snprintf(got, sizeof got, "step %d refused: %s", k, tstor_last_error());
        else if (!strcmp(message, "overflow") ? rc != TSTOR_EOVERFLOW
                                               : strstr(tstor_last_error(), message) == NULL)
          snprintf(got, sizeof got, "step %d refused otherwise: %s: %s", k, tstor_err_name(rc),
                   tstor_last_error());
        break;
      }
      if (k == refused_at) {
        describe(t, got, sizeof got);
        if (!exact || strcmp(got, exact)) {
          char layout_got[4096];
          memcpy(layout_got, got, sizeof layout_got);
          snprintf(got, sizeof got, "step %d succeeded: %s", k, layout_got);
        } else {
          got[0] = '\0';
        }
        break;
      }
      if (none) {
        if (strcmp(want, "none")) snprintf(got, sizeof got, "step %d gave no tensor", k);
        break;
      }
      if (k == n - 2) {
        describe(t, got, sizeof got);
        if (!strcmp(got, want)) got[0] = '\0';
      }
    }
    if (got[0]) {
      fprintf(stderr, "%s\n  got %s\n", line, got);
      bad++;
    }
    tstor_tensor_release(t);
    ck_assert_int_eq(tstor_storage_use_count(s), 1);
    tstor_storage_release(s);
    cases++;
  }
  fclose(f);
  ck_assert_msg(bad == 0, "%d of %d chains differ from PyTorch's", bad, cases);
  fprintf(stderr, "chains: %d, steps %d, refusals %d (%d of them overflows)\n", cases, steps, refusals,
          overflows);
  if (!other) {
    ck_assert_int_ge(cases, 3000);
    ck_assert_int_gt(steps, 5000);
    ck_assert_int_gt(refusals, 1000);
    ck_assert_int_gt(overflows, 100);
  }
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
 * where PyTorch's order decides which write stays. Blocks of 2-byte elements
 * it declines, and the core stages those too. */
START_TEST(copies_as_pytorch_through_copy_strided) {
  void *h = dlopen(coretest_plugin("convdev"), RTLD_NOW | RTLD_NOLOAD);
  ck_assert_ptr_nonnull(h);
  atomic_long *calls = dlsym(h, "convdev_strided_calls");
  atomic_long *declines = dlsym(h, "convdev_strided_declines");
  dlclose(h); /* still loaded by the context */
  ck_assert_ptr_nonnull(calls);
  ck_assert_ptr_nonnull(declines);
  long before = atomic_load(calls), declined_before = atomic_load(declines);
  ck_assert_int_gt(run_copies(ctx, cpu, conv, conv), 700);
  long used = atomic_load(calls) - before, declined = atomic_load(declines) - declined_before;
  ck_assert_int_gt(used, 100);
  ck_assert_int_gt(declined, 20);
  fprintf(stderr, "copy_strided: %ld blocks copied, %ld declined and staged\n", used, declined);
}
END_TEST

/* Copies between the dtypes of torch 2.x and the common ones, as torch 2.x
 * makes them (float4_e2m1fn_x2 and the bits types refused in words that
 * depend on the layout), on cpu and staged through a device. */
START_TEST(copies_as_torch2) {
  ck_assert_int_ge(run_copies_of(ctx, cpu, cpu, cpu, "tensor_copies_torch2.txt"), 580 + 120);
  ck_assert_int_ge(run_copies_of(ctx, cpu, fake, cpu, "tensor_copies_torch2.txt"), 580 + 120);
  ck_assert_int_ge(run_copies_of(ctx, cpu, cpu, fake, "tensor_copies_torch2.txt"), 580 + 120);
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
  tcase_add_test(tc, chains_as_pytorch);
  tcase_add_test(tc, copies_as_pytorch_cpu);
  tcase_add_test(tc, copies_as_pytorch_staged);
  tcase_add_test(tc, copies_as_pytorch_through_copy_strided);
  tcase_add_test(tc, copies_threaded);
  tcase_add_test(tc, copies_as_torch2);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tstor_test_run(vectors_suite()); }
