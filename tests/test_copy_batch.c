/* Batched copies (tstor_storage_copy_batch): items between every pair of
 * device kinds give the bytes single copies give; every bad item is refused,
 * named, before any byte moves; a pair with a batched kernel gets all its
 * items in one call (a test plugin's, and hpu-stub's), the others go one by
 * one; a kernel's failure names its item; batches from many threads. */
#include <pthread.h>

#include "coretest.h"

CORETEST_SANITIZER_OPTIONS

static tstor_context *ctx;
static tstor_device cpu, meta, fake0, fake1, hpu0, hpu1;
static char trace[256];

#define HPU_SECTION "[backend hpu]\nlibrary = tstor-hpu-stub.so\ndevices = 2\nmemory_mb = 64\n"

/* cpu, meta, hpu-stub and the fake plugin, whose pairs get batched kernels
 * when `fake_keys` says so. */
static void open_with(const char *fake_keys) {
  snprintf(trace, sizeof trace, "%s", coretest_tmpfile(".trace"));
  unlink(trace);
  ctx = coretest_open(coretest_fmt(
      "%s\n%s", HPU_SECTION,
      coretest_fake_section("fake", coretest_fmt("trace = %s\n%s", trace, fake_keys))));
  cpu = coretest_dev(ctx, "cpu");
  meta = coretest_dev(ctx, "meta");
  fake0 = coretest_dev(ctx, "fake:0");
  fake1 = coretest_dev(ctx, "fake:1");
  hpu0 = coretest_dev(ctx, "hpu:0");
  hpu1 = coretest_dev(ctx, "hpu:1");
}

static void open_plain(void) { open_with(""); }
static void open_batched(void) { open_with("batch = yes\n"); }
static void close_ctx(void) {
  tstor_context_close(ctx);
  ctx = NULL;
  unlink(trace);
}

static tstor_storage *new_storage(tstor_device dev, size_t n) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, dev, n, &s));
  return s;
}

/* A storage on dev holding seed, seed + 1, ... */
static tstor_storage *ramp(tstor_device dev, size_t n, unsigned seed) {
  tstor_storage *h = new_storage(cpu, n), *s = new_storage(dev, n);
  unsigned char *p = tstor_storage_data(h);
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 7 + seed);
  ck_tstor_ok(tstor_storage_copy(s, h));
  tstor_storage_release(h);
  return s;
}

/* The bytes of s, wherever it lives: a malloc'd copy. */
static unsigned char *contents(tstor_storage *s) {
  size_t n = tstor_storage_nbytes(s);
  tstor_context *owner = tstor_storage_context(s);
  tstor_storage *h = NULL;
  ck_tstor_ok(tstor_storage_new(owner, coretest_dev(owner, "cpu"), n, &h));
  ck_tstor_ok(tstor_storage_copy(h, s));
  unsigned char *out = malloc(n ? n : 1);
  memcpy(out, tstor_storage_data(h), n);
  tstor_storage_release(h);
  return out;
}

static int count_lines(const char *prefix) {
  const char *text = coretest_read_file(trace);
  int n = 0;
  for (const char *p = strstr(text, prefix); p; p = strstr(p + 1, prefix)) n++;
  return n;
}

/* --------------------------------------------------------- what moves */

#define NDEV 6
#define PER_PAIR 5
#define BUF 70000

/* Every ordered pair of cpu, fake:0, fake:1, hpu:0, hpu:1 and meta (as a
 * destination), a few items each, at odd offsets and sizes, in one batch:
 * each destination then holds what the same copies made one by one do. */
static void every_pair(void) {
  tstor_device devs[NDEV] = {cpu, fake0, fake1, hpu0, hpu1, meta};
  tstor_storage *src[NDEV], *dst[NDEV], *expect[NDEV];
  for (int i = 0; i < NDEV; i++) {
    int has_data = i < NDEV - 1;
    src[i] = has_data ? ramp(devs[i], BUF, 3u * (unsigned)i) : NULL;
    dst[i] = has_data ? ramp(devs[i], NDEV * PER_PAIR * 1000, 100u + (unsigned)i)
                      : new_storage(meta, NDEV * PER_PAIR * 1000);
    expect[i] = has_data ? ramp(cpu, NDEV * PER_PAIR * 1000, 100u + (unsigned)i) : NULL;
  }
  tstor_copy_item items[NDEV * NDEV * PER_PAIR];
  size_t n = 0;
  for (int s = 0; s < NDEV - 1; s++)
    for (int d = 0; d < NDEV; d++)
      for (int k = 0; k < PER_PAIR; k++) {
        size_t len = (size_t)(1 + k * 211 + s * 13), soff = (size_t)(k * 4099 + d * 7);
        size_t doff = (size_t)((s * PER_PAIR + k) * 1000);
        items[n++] = (tstor_copy_item){dst[d], doff, src[s], soff, len};
        if (!expect[d]) continue;
        tstor_storage *v = NULL, *e = NULL;
        ck_tstor_ok(tstor_storage_view(src[s], soff, len, &v));
        ck_tstor_ok(tstor_storage_view(expect[d], doff, len, &e));
        ck_tstor_ok(tstor_storage_copy(e, v));
        tstor_storage_release(v);
        tstor_storage_release(e);
      }
  ck_tstor_ok(tstor_storage_copy_batch(items, n));
  for (int d = 0; d < NDEV - 1; d++) {
    unsigned char *got = contents(dst[d]);
    size_t at = 0, size = tstor_storage_nbytes(dst[d]);
    const unsigned char *want = tstor_storage_data(expect[d]);
    while (at < size && got[at] == want[at]) at++;
    ck_assert_msg(at == size, "destination %d differs at byte %zu", d, at);
    free(got);
  }
  for (int i = 0; i < NDEV; i++) {
    tstor_storage_release(src[i]);
    tstor_storage_release(dst[i]);
    tstor_storage_release(expect[i]);
  }
}

START_TEST(every_pair_one_by_one) { every_pair(); }
END_TEST

START_TEST(every_pair_batched) {
  every_pair();
  /* One call per batched pair, with all its items. */
  ck_assert_int_eq(count_lines("batch cpu->fake 10\n"), 1);
  ck_assert_int_eq(count_lines("batch fake->cpu 10\n"), 1);
  ck_assert_int_eq(count_lines("batch "), 2);
}
END_TEST

START_TEST(which_pairs_are_batched) {
  ck_assert_int_eq(tstor_copy_batched(ctx, cpu.type, hpu0.type), 1);
  ck_assert_int_eq(tstor_copy_batched(ctx, hpu0.type, cpu.type), 1);
  ck_assert_int_eq(tstor_copy_batched(ctx, hpu0.type, hpu0.type), 1);
  ck_assert_int_eq(tstor_copy_batched(ctx, cpu.type, cpu.type), 0); /* the core's own */
  ck_assert_int_eq(tstor_copy_batched(ctx, cpu.type, meta.type), 0);
  ck_assert_int_eq(tstor_copy_batched(ctx, fake0.type, hpu0.type), 0); /* staged */
  ck_assert_int_eq(tstor_copy_batched(ctx, cpu.type, fake0.type), 0);
  ck_tstor_err(tstor_copy_batched(ctx, 99, cpu.type), TSTOR_ENODEV);
}
END_TEST

START_TEST(fake_pairs_batched_when_registered) {
  ck_assert_int_eq(tstor_copy_batched(ctx, cpu.type, fake0.type), 1);
  ck_assert_int_eq(tstor_copy_batched(ctx, fake0.type, cpu.type), 1);
  ck_assert_int_eq(tstor_copy_batched(ctx, fake0.type, fake0.type), 0);
}
END_TEST

START_TEST(nothing_to_copy) {
  ck_tstor_ok(tstor_storage_copy_batch(NULL, 0));
  tstor_storage *a = ramp(hpu0, 16, 1), *b = ramp(cpu, 16, 2);
  tstor_copy_item empty[2] = {{a, 16, b, 0, 0}, {b, 3, a, 3, 0}};
  ck_tstor_ok(tstor_storage_copy_batch(empty, 2));
  ck_tstor_err(tstor_storage_copy_batch(NULL, 1), TSTOR_EINVAL);
  tstor_storage_release(a);
  tstor_storage_release(b);
}
END_TEST

/* ------------------------------------------------------------ refusals */

/* items[0..n) must fail with code, naming item `bad`, and leave every
 * destination as it was. */
static void refused(tstor_copy_item *items, size_t n, int code, size_t bad, const char *why) {
  unsigned char *before[8];
  for (size_t i = 0; i < n; i++)
    before[i] = items[i].dst && tstor_storage_data(items[i].dst) ? contents(items[i].dst) : NULL;
  ck_tstor_err(tstor_storage_copy_batch(items, n), code);
  char name[64];
  snprintf(name, sizeof name, "item %zu of %zu", bad, n);
  ck_last_error_has(name);
  ck_last_error_has(why);
  for (size_t i = 0; i < n; i++) {
    if (!before[i]) continue;
    unsigned char *after = contents(items[i].dst);
    ck_assert_msg(memcmp(before[i], after, tstor_storage_nbytes(items[i].dst)) == 0,
                  "item %zu's destination changed", i);
    free(after);
    free(before[i]);
  }
}

START_TEST(bad_items_copy_nothing) {
  tstor_storage *h = ramp(cpu, 4096, 1), *d = ramp(hpu0, 4096, 2), *f = ramp(fake0, 4096, 3);
  tstor_storage *m = new_storage(meta, 4096);
  tstor_copy_item ok0 = {d, 0, h, 0, 1000}, ok1 = {f, 0, h, 1000, 1000};
  tstor_copy_item ok2 = {h, 3000, d, 3000, 1000};

  tstor_copy_item null_item[3] = {ok0, ok1, {NULL, 0, h, 0, 1}};
  refused(null_item, 3, TSTOR_EINVAL, 2, "NULL storage");
  tstor_copy_item past_end[3] = {ok0, {d, 4000, h, 0, 97}, ok1};
  refused(past_end, 3, TSTOR_ERANGE, 1, "destination bytes [4000, 4000 + 97)");
  tstor_copy_item src_past[3] = {ok0, ok1, {d, 0, h, SIZE_MAX, 1}};
  refused(src_past, 3, TSTOR_ERANGE, 2, "source bytes");
  tstor_copy_item out_of_meta[3] = {ok0, {h, 0, m, 0, 10}, ok1};
  refused(out_of_meta, 3, TSTOR_ENODATA, 1, "no data");
  /* overlaps: two destinations; a destination and another's source; an
   * item's own source; and in host memory through two storages' views */
  tstor_copy_item two_dst[3] = {ok0, ok1, {d, 999, h, 2000, 10}};
  refused(two_dst, 3, TSTOR_EINVAL, 2, "its destination shares bytes with item 0's destination");
  tstor_copy_item dst_src[3] = {ok0, ok2, {d, 3500, h, 0, 1}};
  refused(dst_src, 3, TSTOR_EINVAL, 2, "its destination shares bytes with item 1's source");
  tstor_copy_item own[2] = {ok0, {d, 2000, d, 2005, 10}};
  refused(own, 2, TSTOR_EINVAL, 1, "its destination shares bytes with its own source");
  tstor_storage *v = NULL;
  ck_tstor_ok(tstor_storage_view(h, 100, 200, &v));
  tstor_copy_item views[3] = {{d, 0, h, 3000, 1000}, {v, 0, d, 2000, 50}, {d, 1000, h, 120, 10}};
  refused(views, 3, TSTOR_EINVAL, 2, "its source shares bytes with item 1's destination");
  /* Touching ranges do not overlap; sources may share bytes; meta takes sizes. */
  tstor_copy_item fine[5] = {ok0, {d, 1000, h, 0, 1000}, ok1, {m, 0, h, 0, 4096}, ok2};
  ck_tstor_ok(tstor_storage_copy_batch(fine, 5));

  tstor_context *other = coretest_open(NULL);
  tstor_storage *o = NULL;
  ck_tstor_ok(tstor_storage_new(other, coretest_dev(other, "cpu"), 16, &o));
  tstor_copy_item contexts[2] = {ok0, {h, 0, o, 0, 1}};
  refused(contexts, 2, TSTOR_EINVAL, 1, "another context");
  tstor_copy_item contexts2[2] = {ok0, {o, 0, o, 8, 1}};
  refused(contexts2, 2, TSTOR_EINVAL, 1, "another context");
  tstor_storage_release(o);
  tstor_context_close(other);
  tstor_storage_release(v);
  tstor_storage_release(m);
  tstor_storage_release(f);
  tstor_storage_release(d);
  tstor_storage_release(h);
}
END_TEST

/* A batched kernel that fails names the item of the span it failed on. */
START_TEST(a_failing_kernel_names_its_item) {
  tstor_context_close(ctx);
  open_with("batch = yes\nbatch_fail_at = 2\n");
  tstor_storage *h = ramp(cpu, 4096, 1), *f = ramp(fake0, 4096, 2), *d = ramp(hpu0, 4096, 3);
  tstor_copy_item items[5] = {{d, 0, h, 0, 10},
                              {f, 0, h, 0, 10},
                              {d, 100, h, 0, 10},
                              {f, 100, h, 0, 10},
                              {f, 200, h, 0, 10}};
  ck_tstor_err(tstor_storage_copy_batch(items, 5), TSTOR_EIO);
  ck_last_error_has("storage_copy_batch: item 4 of 5");
  tstor_storage_release(h);
  tstor_storage_release(f);
  tstor_storage_release(d);
}
END_TEST

START_TEST(a_second_batched_kernel_is_refused) {
  const char *ini = coretest_fmt("%s\n%s", CORETEST_BASE_INI,
                                 coretest_fake_section("fake", "batch = yes\nbatch_twice = yes\n"));
  tstor_context *c = NULL;
  ck_tstor_err(tstor_context_open_string(ini, "twice.ini", &c), TSTOR_EEXIST);
  ck_last_error_has("a batched copy kernel fake -> cpu is already registered");
}
END_TEST

/* ------------------------------------------------------------- threads */

typedef struct worker {
  tstor_storage *src, *dst;
  int fails;
} worker;

/* 200 batches of 64 items each, scattering a source over a destination. */
static void *scatter(void *arg) {
  worker *w = arg;
  tstor_copy_item items[64];
  for (int round = 0; round < 200 && !w->fails; round++) {
    for (int k = 0; k < 64; k++)
      items[k] = (tstor_copy_item){w->dst, (size_t)((k * 37 + round) % 64) * 64, w->src,
                                   (size_t)k * 64, 64}; /* 37 is prime to 64: apart */
    if (tstor_storage_copy_batch(items, 64) != 0) w->fails++;
  }
  return NULL;
}

START_TEST(batches_from_many_threads) {
  enum { N = 4 };
  pthread_t t[N];
  worker w[N];
  tstor_device on[N] = {hpu0, hpu1, fake0, cpu};
  for (int i = 0; i < N; i++) {
    w[i] = (worker){ramp(cpu, 4096, (unsigned)i), new_storage(on[i], 4096), 0};
    ck_assert_int_eq(pthread_create(&t[i], NULL, scatter, &w[i]), 0);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    ck_assert_int_eq(w[i].fails, 0);
    /* the last round put source block k at (k * 37 + 199) % 64 */
    unsigned char *got = contents(w[i].dst);
    const unsigned char *src = tstor_storage_data(w[i].src);
    for (int k = 0; k < 64; k++)
      ck_assert(memcmp(got + ((k * 37 + 199) % 64) * 64, src + k * 64, 64) == 0);
    free(got);
    tstor_storage_release(w[i].src);
    tstor_storage_release(w[i].dst);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("copy_batch");
  TCase *tc = tcase_create("plain");
  tcase_add_checked_fixture(tc, open_plain, close_ctx);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, every_pair_one_by_one);
  tcase_add_test(tc, which_pairs_are_batched);
  tcase_add_test(tc, nothing_to_copy);
  tcase_add_test(tc, bad_items_copy_nothing);
  tcase_add_test(tc, a_second_batched_kernel_is_refused);
  tcase_add_test(tc, batches_from_many_threads);
  suite_add_tcase(s, tc);
  tc = tcase_create("batched");
  tcase_add_checked_fixture(tc, open_batched, close_ctx);
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, every_pair_batched);
  tcase_add_test(tc, fake_pairs_batched_when_registered);
  tcase_add_test(tc, a_failing_kernel_names_its_item);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
