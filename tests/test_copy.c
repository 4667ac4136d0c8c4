/* Copies, fills, clone, to and new_like: between every pair of device kinds
 * (host, no data, a device reached only through kernels), with size checks,
 * and failures that leave the destination untouched. */
#include "coretest.h"

CORETEST_SANITIZER_OPTIONS

static tstor_context *ctx;
static tstor_device cpu, meta, fake0, fake1;

static void open_ctx(void) {
  ctx = coretest_open(coretest_fake_section("fake", NULL));
  cpu = coretest_dev(ctx, "cpu");
  meta = coretest_dev(ctx, "meta");
  fake0 = coretest_dev(ctx, "fake:0");
  fake1 = coretest_dev(ctx, "fake:1");
}
static void close_ctx(void) {
  tstor_context_close(ctx);
  ctx = NULL;
}

static unsigned char *bytes(tstor_storage *s) { return tstor_storage_data(s); }

static tstor_storage *new_storage(tstor_device dev, size_t n) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, dev, n, &s));
  return s;
}

/* A cpu storage of n bytes: seed, seed + 1, ... */
static tstor_storage *ramp(size_t n, int seed) {
  tstor_storage *s = new_storage(cpu, n);
  for (size_t i = 0; i < n; i++) bytes(s)[i] = (unsigned char)(i + (size_t)seed);
  return s;
}

/* The bytes of s, wherever it lives, as a new cpu storage. */
static tstor_storage *on_cpu(tstor_storage *s) {
  tstor_storage *c = new_storage(cpu, tstor_storage_nbytes(s));
  ck_tstor_ok(tstor_storage_copy(c, s));
  return c;
}

static void assert_ramp(tstor_storage *s, int seed) {
  tstor_storage *c = on_cpu(s);
  for (size_t i = 0; i < tstor_storage_nbytes(c); i++)
    ck_assert_msg(bytes(c)[i] == (unsigned char)(i + (size_t)seed), "byte %zu: %d, expected %d",
                  i, bytes(c)[i], (unsigned char)(i + (size_t)seed));
  tstor_storage_release(c);
}

static void assert_all(tstor_storage *s, int value) {
  tstor_storage *c = on_cpu(s);
  for (size_t i = 0; i < tstor_storage_nbytes(c); i++)
    ck_assert_msg(bytes(c)[i] == value, "byte %zu: %d, expected %d", i, bytes(c)[i], value);
  tstor_storage_release(c);
}

/* ------------------------------------------------------------------ copy */

START_TEST(copy_cpu_to_cpu) {
  tstor_storage *src = ramp(1000, 3), *dst = new_storage(cpu, 1000);
  ck_tstor_ok(tstor_storage_copy(dst, src));
  ck_assert_mem_eq(tstor_storage_data(dst), tstor_storage_data(src), 1000);
  ck_tstor_ok(tstor_storage_copy(dst, dst)); /* onto itself */
  ck_assert_mem_eq(tstor_storage_data(dst), tstor_storage_data(src), 1000);
  tstor_storage_release(dst);
  tstor_storage_release(src);
}
END_TEST

START_TEST(copy_between_overlapping_views) {
  tstor_storage *s = ramp(100, 0), *a = NULL, *b = NULL;
  ck_tstor_ok(tstor_storage_view(s, 0, 60, &a));
  ck_tstor_ok(tstor_storage_view(s, 20, 60, &b));
  ck_tstor_ok(tstor_storage_copy(b, a)); /* as memmove */
  for (int i = 0; i < 60; i++) ck_assert_int_eq(bytes(s)[20 + i], i);
  tstor_storage_release(a);
  tstor_storage_release(b);
  tstor_storage_release(s);
}
END_TEST

START_TEST(copy_size_mismatch) {
  const tstor_device devs[] = {cpu, meta, fake0};
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 3; j++) {
      tstor_storage *src = new_storage(devs[i], 10), *dst = new_storage(devs[j], 11);
      unsigned char before[11];
      if (j == 0) {
        memset(bytes(dst), 0x77, 11);
        memcpy(before, bytes(dst), 11);
      }
      ck_tstor_err(tstor_storage_copy(dst, src), TSTOR_ESIZE);
      ck_last_error_has("10");
      ck_last_error_has("11");
      if (j == 0) ck_assert_mem_eq(bytes(dst), before, 11);
      tstor_storage_release(dst);
      tstor_storage_release(src);
    }
  }
  tstor_storage *s = new_storage(cpu, 4);
  ck_tstor_err(tstor_storage_copy(NULL, s), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_copy(s, NULL), TSTOR_EINVAL);
  tstor_storage_release(s);
}
END_TEST

START_TEST(copy_into_meta_checks_sizes) {
  tstor_storage *src = ramp(64, 0), *m = new_storage(meta, 64), *m2 = new_storage(meta, 64);
  ck_tstor_ok(tstor_storage_copy(m, src));
  ck_tstor_ok(tstor_storage_copy(m2, m)); /* meta to meta */
  tstor_storage *f = new_storage(fake0, 64);
  ck_tstor_ok(tstor_storage_copy(m, f));
  tstor_storage_release(f);
  tstor_storage *big = new_storage(meta, 65);
  ck_tstor_err(tstor_storage_copy(big, src), TSTOR_ESIZE);
  tstor_storage_release(big);
  tstor_storage_release(m2);
  tstor_storage_release(m);
  tstor_storage_release(src);
}
END_TEST

START_TEST(copy_out_of_meta_has_no_data) {
  tstor_storage *m = new_storage(meta, 16), *dst = ramp(16, 5), *f = new_storage(fake0, 16);
  ck_tstor_err(tstor_storage_copy(dst, m), TSTOR_ENODATA);
  ck_last_error_has("meta");
  for (int i = 0; i < 16; i++) ck_assert_int_eq(bytes(dst)[i], i + 5);
  ck_tstor_ok(tstor_storage_fill(f, 9));
  ck_tstor_err(tstor_storage_copy(f, m), TSTOR_ENODATA);
  assert_all(f, 9);
  tstor_storage *out = (tstor_storage *)0x1;
  ck_tstor_err(tstor_storage_to(m, cpu, &out), TSTOR_ENODATA);
  ck_assert_ptr_null(out); /* a failed call leaves its output NULL */
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 16); /* only dst: the failed to() freed its attempt */
  tstor_storage_release(f);
  tstor_storage_release(dst);
  tstor_storage_release(m);
}
END_TEST

START_TEST(copy_through_kernels) {
  /* cpu -> fake and back go through the fake's kernels (its bytes are
   * scrambled, so a plain memcpy would be caught); fake:0 -> fake:1 is
   * staged through host memory. */
  const size_t sizes[] = {1, 63, 4096, (size_t)16 << 20 | 5}; /* the last spans staging chunks */
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    tstor_storage *src = ramp(n, (int)i), *f0 = new_storage(fake0, n), *f1 = new_storage(fake1, n);
    tstor_storage *back = new_storage(cpu, n);
    ck_tstor_ok(tstor_storage_copy(f0, src));
    ck_tstor_ok(tstor_storage_copy(f1, f0));
    ck_tstor_ok(tstor_storage_copy(back, f1));
    ck_assert_mem_eq(tstor_storage_data(back), tstor_storage_data(src), n);
    tstor_storage_release(back);
    tstor_storage_release(f1);
    tstor_storage_release(f0);
    tstor_storage_release(src);
  }
}
END_TEST

START_TEST(copy_views_across_devices) {
  tstor_storage *src = ramp(100, 0), *f = new_storage(fake1, 100), *fv = NULL, *cv = NULL;
  ck_tstor_ok(tstor_storage_fill(f, 0));
  ck_tstor_ok(tstor_storage_view(f, 10, 30, &fv));
  ck_tstor_ok(tstor_storage_view(src, 50, 30, &cv));
  ck_tstor_ok(tstor_storage_copy(fv, cv));
  tstor_storage *c = on_cpu(f);
  for (int i = 0; i < 100; i++)
    ck_assert_int_eq(bytes(c)[i], i >= 10 && i < 40 ? i + 40 : 0);
  tstor_storage_release(c);
  tstor_storage_release(cv);
  tstor_storage_release(fv);
  tstor_storage_release(f);
  tstor_storage_release(src);
}
END_TEST

START_TEST(copy_across_contexts_is_refused) {
  tstor_context *other = coretest_open(NULL);
  tstor_storage *a = new_storage(cpu, 8), *b = NULL;
  ck_tstor_ok(tstor_storage_new(other, coretest_dev(other, "cpu"), 8, &b));
  ck_tstor_err(tstor_storage_copy(a, b), TSTOR_EINVAL);
  ck_last_error_has("context");
  tstor_storage_release(b);
  tstor_storage_release(a);
  tstor_context_close(other);
}
END_TEST

/* ------------------------------------------------------------------ fill */

START_TEST(fill_every_device) {
  tstor_storage *c = new_storage(cpu, 333), *f = new_storage(fake1, 333), *m = new_storage(meta, 333);
  ck_tstor_ok(tstor_storage_fill(c, 0xa1));
  ck_tstor_ok(tstor_storage_fill(f, 0xa1));
  ck_tstor_ok(tstor_storage_fill(m, 0xa1));
  assert_all(c, 0xa1);
  assert_all(f, 0xa1);
  ck_tstor_err(tstor_storage_fill(NULL, 1), TSTOR_EINVAL);
  tstor_storage_release(m);
  tstor_storage_release(f);
  tstor_storage_release(c);
}
END_TEST

START_TEST(fill_a_view_only) {
  tstor_storage *f = new_storage(fake0, 64), *v = NULL;
  ck_tstor_ok(tstor_storage_fill(f, 1));
  ck_tstor_ok(tstor_storage_view(f, 16, 16, &v));
  ck_tstor_ok(tstor_storage_fill(v, 2));
  tstor_storage *c = on_cpu(f);
  for (int i = 0; i < 64; i++) ck_assert_int_eq(bytes(c)[i], i >= 16 && i < 32 ? 2 : 1);
  tstor_storage_release(c);
  tstor_storage_release(v);
  tstor_storage_release(f);
}
END_TEST

START_TEST(fill_patterns) {
  static const unsigned char pattern[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const size_t psizes[] = {1, 2, 4, 8, 16};
  const tstor_device devs[] = {cpu, fake1};
  for (int d = 0; d < 2; d++) {
    for (size_t p = 0; p < 5; p++) {
      size_t n = 16 * 37;
      tstor_storage *s = new_storage(devs[d], n);
      ck_tstor_ok(tstor_storage_fill_pattern(s, pattern, psizes[p]));
      tstor_storage *c = on_cpu(s);
      for (size_t i = 0; i < n; i++) ck_assert_int_eq(bytes(c)[i], pattern[i % psizes[p]]);
      tstor_storage_release(c);
      tstor_storage_release(s);
    }
  }
}
END_TEST

START_TEST(fill_pattern_errors) {
  static const unsigned char pattern[16] = {0};
  tstor_storage *s = ramp(24, 0);
  const size_t bad_sizes[] = {0, 3, 5, 12, 32};
  for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++)
    ck_tstor_err(tstor_storage_fill_pattern(s, pattern, bad_sizes[i]), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_fill_pattern(s, pattern, 16), TSTOR_ESIZE); /* 24 % 16 */
  ck_tstor_err(tstor_storage_fill_pattern(s, NULL, 4), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_fill_pattern(NULL, pattern, 4), TSTOR_EINVAL);
  for (int i = 0; i < 24; i++) ck_assert_int_eq(bytes(s)[i], i);
  ck_tstor_ok(tstor_storage_fill_pattern(s, pattern, 8));
  tstor_storage *m = new_storage(meta, 24);
  ck_tstor_err(tstor_storage_fill_pattern(m, pattern, 16), TSTOR_ESIZE);
  ck_tstor_ok(tstor_storage_fill_pattern(m, pattern, 8));
  tstor_storage_release(m);
  tstor_storage_release(s);
}
END_TEST

/* --------------------------------------------- clone, to and new_like */

START_TEST(clone_every_kind) {
  tstor_storage *src = ramp(200, 1), *v = NULL, *c = NULL;
  ck_tstor_ok(tstor_storage_view(src, 50, 100, &v));
  ck_tstor_ok(tstor_storage_clone(v, &c));
  ck_assert_ptr_ne(c, v);
  ck_assert_uint_eq(tstor_storage_nbytes(c), 100);
  ck_assert_uint_eq(tstor_storage_flags(c), TSTOR_FLAG_RESIZABLE);
  ck_assert_ptr_null(tstor_storage_base(c));
  ck_assert_ptr_ne(tstor_storage_data(c), tstor_storage_data(v));
  ck_assert_mem_eq(tstor_storage_data(c), tstor_storage_data(v), 100);
  ck_assert_int_eq(tstor_storage_use_count(src), 2);
  tstor_storage_release(c);

  unsigned char buf[32];
  memset(buf, 4, sizeof buf);
  tstor_storage *w = NULL;
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, buf, sizeof buf, &w));
  ck_tstor_ok(tstor_storage_clone(w, &c));
  ck_assert_uint_eq(tstor_storage_flags(c), TSTOR_FLAG_RESIZABLE);
  ck_assert_ptr_ne(tstor_storage_data(c), buf);
  ck_tstor_ok(tstor_storage_resize(c, 64));
  ck_assert_int_eq(bytes(c)[31], 4);
  tstor_storage_release(c);
  tstor_storage_release(w);

  tstor_storage *f = NULL;
  ck_tstor_ok(tstor_storage_to(src, fake1, &f));
  ck_tstor_ok(tstor_storage_clone(f, &c));
  ck_assert_int_eq(tstor_storage_device(c).type, fake1.type);
  ck_assert_int_eq(tstor_storage_device(c).index, 1);
  assert_ramp(c, 1);
  tstor_storage_release(c);
  tstor_storage_release(f);

  tstor_storage *m = new_storage(meta, 77);
  ck_tstor_ok(tstor_storage_clone(m, &c));
  ck_assert_uint_eq(tstor_storage_nbytes(c), 77);
  ck_assert_uint_eq(tstor_storage_flags(c), TSTOR_FLAG_RESIZABLE | TSTOR_FLAG_NO_DATA);
  tstor_storage_release(c);
  tstor_storage_release(m);

  ck_tstor_err(tstor_storage_clone(NULL, &c), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_clone(v, NULL), TSTOR_EINVAL);
  tstor_storage_release(v);
  tstor_storage_release(src);
}
END_TEST

START_TEST(to_same_device_is_the_same_storage) {
  tstor_storage *s = ramp(10, 0), *t = NULL;
  ck_tstor_ok(tstor_storage_to(s, cpu, &t));
  ck_assert_ptr_eq(t, s);
  ck_assert_int_eq(tstor_storage_use_count(s), 2);
  tstor_storage_release(t);
  tstor_storage *f = NULL;
  ck_tstor_ok(tstor_storage_to(s, fake1, &f));
  ck_tstor_ok(tstor_storage_to(f, fake1, &t));
  ck_assert_ptr_eq(t, f);
  tstor_storage_release(t);
  /* Another index of the same type is another device: a copy. */
  ck_tstor_ok(tstor_storage_to(f, fake0, &t));
  ck_assert_ptr_ne(t, f);
  ck_assert_int_eq(tstor_storage_device(t).index, 0);
  assert_ramp(t, 0);
  tstor_storage_release(t);
  tstor_storage_release(f);
  tstor_storage_release(s);
}
END_TEST

START_TEST(to_every_pair) {
  const tstor_device devs[] = {cpu, fake0, fake1, meta};
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 4; j++) {
      tstor_storage *src = ramp(50, i * 4 + j), *a = NULL, *b = NULL;
      ck_tstor_ok(tstor_storage_to(src, devs[i], &a));
      ck_tstor_ok(tstor_storage_to(a, devs[j], &b));
      ck_assert_int_eq(tstor_storage_device(b).type, devs[j].type);
      ck_assert_int_eq(tstor_storage_device(b).index, devs[j].index);
      ck_assert_uint_eq(tstor_storage_nbytes(b), 50);
      if (devs[j].type != meta.type) assert_ramp(b, i * 4 + j);
      tstor_storage_release(b);
      tstor_storage_release(a);
      tstor_storage_release(src);
    }
  }
}
END_TEST

START_TEST(to_errors) {
  tstor_storage *s = ramp(10, 0), *t = (tstor_storage *)0x1;
  ck_tstor_err(tstor_storage_to(s, (tstor_device){0, 1}, &t), TSTOR_ENODEV);
  ck_tstor_err(tstor_storage_to(s, (tstor_device){5, 0}, &t), TSTOR_ENODEV);
  ck_tstor_err(tstor_storage_to(s, cpu, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_to(NULL, cpu, &t), TSTOR_EINVAL);
  ck_assert_ptr_null(t); /* a failed call leaves its output NULL */
  ck_tstor_ok(tstor_storage_to(s, fake0, &t));
  ck_assert_ptr_ne(t, s);
  ck_assert_int_eq(tstor_storage_use_count(s), 1);
  tstor_storage_release(t);
  tstor_storage_release(s);
}
END_TEST

START_TEST(new_like_every_device) {
  const tstor_device devs[] = {cpu, fake1, meta};
  for (int i = 0; i < 3; i++) {
    tstor_storage *s = new_storage(devs[i], 10), *v = NULL, *l = NULL;
    ck_tstor_ok(tstor_storage_view(s, 2, 4, &v));
    ck_tstor_ok(tstor_storage_new_like(v, 1000, &l));
    ck_assert_uint_eq(tstor_storage_nbytes(l), 1000);
    ck_assert_int_eq(tstor_storage_device(l).type, devs[i].type);
    ck_assert_int_eq(tstor_storage_device(l).index, devs[i].index);
    ck_assert_ptr_null(tstor_storage_base(l));
    ck_assert(tstor_storage_flags(l) & TSTOR_FLAG_RESIZABLE);
    ck_assert(!(tstor_storage_flags(l) & TSTOR_FLAG_VIEW));
    ck_assert_int_eq(tstor_storage_use_count(s), 2);
    tstor_storage_release(l);
    tstor_storage_release(v);
    tstor_storage_release(s);
  }
  tstor_storage *s = new_storage(cpu, 1), *l = (tstor_storage *)0x1;
  ck_tstor_err(tstor_storage_new_like(s, CORETEST_HUGE, &l), TSTOR_ENOMEM);
  ck_tstor_err(tstor_storage_new_like(NULL, 1, &l), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_new_like(s, 1, NULL), TSTOR_EINVAL);
  ck_assert_ptr_null(l); /* a failed call leaves its output NULL */
  tstor_storage_release(s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("copy");
  TCase *tc = tcase_create("copy");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_set_timeout(tc, 30); /* tens of megabytes, maybe under a sanitizer */
  tcase_add_test(tc, copy_cpu_to_cpu);
  tcase_add_test(tc, copy_between_overlapping_views);
  tcase_add_test(tc, copy_size_mismatch);
  tcase_add_test(tc, copy_into_meta_checks_sizes);
  tcase_add_test(tc, copy_out_of_meta_has_no_data);
  tcase_add_test(tc, copy_through_kernels);
  tcase_add_test(tc, copy_views_across_devices);
  tcase_add_test(tc, copy_across_contexts_is_refused);
  suite_add_tcase(s, tc);
  tc = tcase_create("fill");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, fill_every_device);
  tcase_add_test(tc, fill_a_view_only);
  tcase_add_test(tc, fill_patterns);
  tcase_add_test(tc, fill_pattern_errors);
  suite_add_tcase(s, tc);
  tc = tcase_create("clone");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, clone_every_kind);
  tcase_add_test(tc, to_same_device_is_the_same_storage);
  tcase_add_test(tc, to_every_pair);
  tcase_add_test(tc, to_errors);
  tcase_add_test(tc, new_like_every_device);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
