/* Storages: creation on every kind of device, wrapping (borrowed and owned),
 * views, reference counts, accessors and resize, with their error paths; a
 * failed call leaves its objects as they were. */
#include "coretest.h"

#include <stdint.h>

CORETEST_SANITIZER_OPTIONS

static tstor_context *ctx;
static tstor_device cpu, meta, fake;

static void open_ctx(void) {
  ctx = coretest_open(coretest_fake_section("fake", NULL));
  cpu = coretest_dev(ctx, "cpu");
  meta = coretest_dev(ctx, "meta");
  fake = coretest_dev(ctx, "fake:1");
}
static void close_ctx(void) {
  tstor_context_close(ctx);
  ctx = NULL;
}

static unsigned char *bytes(tstor_storage *s) { return tstor_storage_data(s); }

/* The bytes of a storage on any device, copied to a new cpu storage. */
static tstor_storage *on_cpu(tstor_storage *s) {
  tstor_storage *c = NULL;
  ck_tstor_ok(tstor_storage_to(s, cpu, &c));
  return c;
}

/* Fills a cpu storage with 0, 1, 2, ... */
static void ramp(tstor_storage *s) {
  for (size_t i = 0; i < tstor_storage_nbytes(s); i++) bytes(s)[i] = (unsigned char)i;
}

/* ------------------------------------------------------------------ new */

START_TEST(new_on_cpu) {
  const size_t sizes[] = {1, 7, 64, 65, 4096, 1 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    tstor_storage *s = NULL;
    ck_tstor_ok(tstor_storage_new(ctx, cpu, sizes[i], &s));
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(tstor_storage_nbytes(s), sizes[i]);
    ck_assert_ptr_nonnull(tstor_storage_data(s));
    ck_assert_uint_eq((uintptr_t)tstor_storage_data(s) % 64, 0);
    ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_RESIZABLE);
    tstor_device d = tstor_storage_device(s);
    ck_assert_int_eq(d.type, cpu.type);
    ck_assert_int_eq(d.index, 0);
    ck_assert_ptr_eq(tstor_storage_context(s), ctx);
    ck_assert_ptr_null(tstor_storage_base(s));
    ck_assert_uint_eq(tstor_storage_offset(s), 0);
    ck_assert_int_eq(tstor_storage_use_count(s), 1);
    void *p = NULL;
    ck_tstor_ok(tstor_storage_data_checked(s, &p));
    ck_assert_ptr_eq(p, tstor_storage_data(s));
    /* All of it is writable. */
    memset(tstor_storage_data(s), 0xee, sizes[i]);
    tstor_storage_release(s);
  }
}
END_TEST

START_TEST(new_zero_bytes_everywhere) {
  const tstor_device devs[] = {cpu, meta, fake};
  const tstor_device targets[] = {fake, meta, cpu};
  for (int i = 0; i < 3; i++) {
    tstor_storage *s = NULL, *v = NULL, *c = NULL, *l = NULL, *t = NULL;
    ck_tstor_ok(tstor_storage_new(ctx, devs[i], 0, &s));
    ck_assert_uint_eq(tstor_storage_nbytes(s), 0);
    ck_assert_ptr_null(tstor_storage_data(s));
    ck_assert(tstor_storage_flags(s) & TSTOR_FLAG_RESIZABLE);
    ck_tstor_ok(tstor_storage_view(s, 0, 0, &v));
    ck_assert_uint_eq(tstor_storage_nbytes(v), 0);
    ck_tstor_ok(tstor_storage_fill(s, 1));
    ck_tstor_ok(tstor_storage_fill(v, 1));
    ck_tstor_ok(tstor_storage_fill_pattern(s, "0123456789abcdef", 16));
    ck_tstor_ok(tstor_storage_copy(s, v));
    ck_tstor_ok(tstor_storage_clone(s, &c));
    ck_assert_uint_eq(tstor_storage_nbytes(c), 0);
    ck_tstor_ok(tstor_storage_new_like(s, 0, &l));
    ck_tstor_ok(tstor_storage_to(s, targets[i], &t));
    ck_assert_uint_eq(tstor_storage_nbytes(t), 0);
    ck_tstor_err(tstor_storage_resize(s, 0), TSTOR_EBUSY); /* v is a view on it */
    tstor_storage_release(v);
    ck_tstor_ok(tstor_storage_resize(s, 0));
    ck_tstor_ok(tstor_storage_resize(s, 32));
    ck_tstor_ok(tstor_storage_resize(s, 0));
    ck_assert_ptr_null(tstor_storage_data(s));
    tstor_storage_release(t);
    tstor_storage_release(l);
    tstor_storage_release(c);
    tstor_storage_release(s);
  }
  /* Zero-byte wraps, borrowed and owned, with and without a pointer. */
  tstor_storage *w = NULL;
  char byte;
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, NULL, 0, &w));
  tstor_storage_release(w);
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, &byte, 0, &w));
  ck_assert_uint_eq(tstor_storage_nbytes(w), 0);
  tstor_storage_release(w);
  ck_tstor_ok(tstor_storage_wrap(ctx, meta, NULL, 0, &w));
  tstor_storage_release(w);
}
END_TEST

START_TEST(new_on_meta) {
  tstor_storage *s = NULL;
  size_t tib = (size_t)1 << 40;
  ck_tstor_ok(tstor_storage_new(ctx, meta, tib, &s));
  ck_assert_uint_eq(tstor_storage_nbytes(s), tib);
  ck_assert_ptr_null(tstor_storage_data(s));
  ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_RESIZABLE | TSTOR_FLAG_NO_DATA);
  void *p = (void *)0x1;
  ck_tstor_err(tstor_storage_data_checked(s, &p), TSTOR_ENODATA);
  ck_assert_ptr_null(p); /* a failed call leaves its output NULL */
  ck_last_error_has("meta");
  ck_tstor_ok(tstor_storage_resize(s, 2 * tib));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 2 * tib);
  tstor_storage_release(s);
}
END_TEST

/* Out of meta into a device with data is TSTOR_ENODATA whatever the size:
 * the path is checked before the destination is allocated, so a size the
 * host cannot allocate does not turn it into TSTOR_ENOMEM. */
START_TEST(meta_to_data_device_is_enodata_at_any_size) {
  const size_t sizes[] = {0, 1, 4096, (size_t)1 << 40, (size_t)1 << 62, SIZE_MAX};
  const tstor_device targets[] = {cpu, fake};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    tstor_storage *m = NULL;
    ck_tstor_ok(tstor_storage_new(ctx, meta, sizes[i], &m));
    for (size_t j = 0; j < 2; j++) {
      tstor_storage *out = (tstor_storage *)0x1;
      ck_tstor_err(tstor_storage_to(m, targets[j], &out), TSTOR_ENODATA);
      ck_assert_ptr_null(out); /* a failed call leaves its output NULL */
      ck_last_error_has("no data");
    }
    tstor_storage *same = NULL; /* meta to meta: sizes only */
    ck_tstor_ok(tstor_storage_clone(m, &same));
    ck_assert_uint_eq(tstor_storage_nbytes(same), sizes[i]);
    tstor_storage_release(same);
    ck_assert_int_eq(tstor_storage_use_count(m), 1);
    tstor_storage_release(m);
  }
}
END_TEST

START_TEST(new_on_fake) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, fake, 100, &s));
  ck_assert_int_eq(tstor_storage_device(s).type, fake.type);
  ck_assert_int_eq(tstor_storage_device(s).index, 1);
  ck_assert_ptr_nonnull(tstor_storage_data(s));
  ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_RESIZABLE);
  tstor_storage_release(s);
}
END_TEST

START_TEST(new_errors) {
  tstor_storage *s = (tstor_storage *)0x1;
  const tstor_device bad[] = {{3, 0}, {-1, 0}, {0, 1}, {0, -1}, {2, 2}, {INT32_MAX, 0}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_tstor_err(tstor_storage_new(ctx, bad[i], 8, &s), TSTOR_ENODEV);
    ck_assert_ptr_null(s); /* a failed call leaves its output NULL */
  }
  ck_tstor_err(tstor_storage_new(ctx, cpu, 8, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_new(ctx, cpu, CORETEST_HUGE, &s), TSTOR_ENOMEM);
  ck_last_error_has(coretest_fmt("%zu", CORETEST_HUGE));
  ck_assert_ptr_null(s); /* a failed call leaves its output NULL */
  int rc = tstor_storage_new(ctx, cpu, SIZE_MAX, &s);
  ck_assert_msg(rc == TSTOR_ENOMEM || rc == TSTOR_EOVERFLOW, "%s", tstor_err_name(rc));
  ck_tstor_err(tstor_storage_new(ctx, fake, CORETEST_HUGE, &s), TSTOR_ENOMEM);
  ck_assert_ptr_null(s); /* a failed call leaves its output NULL */
  /* The failures cost nothing: the context still has its one reference. */
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 0);
}
END_TEST

START_TEST(new_on_default_context) {
  tstor_storage *s = NULL;
  tstor_device dev;
  ck_tstor_ok(tstor_device_default(NULL, &dev));
  ck_tstor_ok(tstor_storage_new(NULL, dev, 16, &s));
  tstor_context *def = NULL;
  ck_tstor_ok(tstor_context_default(&def));
  ck_assert_ptr_eq(tstor_storage_context(s), def);
  tstor_storage_release(s);
}
END_TEST

/* ----------------------------------------------------------------- wrap */

START_TEST(wrap_borrowed) {
  unsigned char buf[100];
  memset(buf, 9, sizeof buf);
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, buf, sizeof buf, &s));
  ck_assert_ptr_eq(tstor_storage_data(s), buf);
  ck_assert_uint_eq(tstor_storage_nbytes(s), sizeof buf);
  ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_BORROWED);
  ck_tstor_ok(tstor_storage_fill(s, 3));
  ck_assert_int_eq(buf[99], 3);
  ck_tstor_err(tstor_storage_resize(s, 200), TSTOR_ENOTSUP);
  ck_last_error_has("borrowed");
  ck_assert_uint_eq(tstor_storage_nbytes(s), sizeof buf);
  ck_assert_ptr_eq(tstor_storage_data(s), buf);
  /* A view of it is borrowed too, and refused resize as a view. */
  tstor_storage *v = NULL;
  ck_tstor_ok(tstor_storage_view(s, 10, 10, &v));
  ck_assert_ptr_eq(tstor_storage_data(v), buf + 10);
  tstor_storage_release(v);
  /* Releasing does not free the caller's bytes (ASan would see a bad free). */
  tstor_storage_release(s);
  ck_assert_int_eq(buf[0], 3);
}
END_TEST

START_TEST(wrap_errors) {
  unsigned char buf[16];
  tstor_storage *s = (tstor_storage *)0x1;
  ck_tstor_err(tstor_storage_wrap(ctx, cpu, NULL, 16, &s), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_wrap(ctx, cpu, buf, 16, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_wrap(ctx, (tstor_device){7, 0}, buf, 16, &s), TSTOR_ENODEV);
  ck_tstor_err(tstor_storage_wrap(ctx, meta, buf, 16, &s), TSTOR_EINVAL);
  ck_assert_ptr_null(s); /* a failed call leaves its output NULL */
  /* Meta is wrapped without data: a size only. */
  ck_tstor_ok(tstor_storage_wrap(ctx, meta, NULL, 16, &s));
  ck_assert_uint_eq(tstor_storage_flags(s) & TSTOR_FLAG_NO_DATA, TSTOR_FLAG_NO_DATA);
  tstor_storage_release(s);
}
END_TEST

typedef struct {
  int calls;
  void *data;
} deleter_record;

static void count_deleter(void *data, void *deleter_ctx) {
  deleter_record *r = deleter_ctx;
  r->calls++;
  r->data = data;
  free(data);
}

START_TEST(wrap_owned_deleter_runs_once) {
  deleter_record rec = {0, NULL};
  void *mem = malloc(48);
  ck_assert_ptr_nonnull(mem);
  tstor_storage *s = NULL, *v = NULL, *vv = NULL;
  ck_tstor_ok(tstor_storage_wrap_owned(ctx, cpu, mem, 48, count_deleter, &rec, &s));
  ck_assert_ptr_eq(tstor_storage_data(s), mem);
  ck_assert_uint_eq(tstor_storage_flags(s) & TSTOR_FLAG_BORROWED, 0);
  ck_assert_uint_eq(tstor_storage_flags(s) & TSTOR_FLAG_VIEW, 0);
  /* Not an allocator's block: resize cannot move it. */
  ck_tstor_err(tstor_storage_resize(s, 96), TSTOR_ENOTSUP);
  ck_tstor_ok(tstor_storage_view(s, 8, 16, &v));
  ck_tstor_ok(tstor_storage_view(v, 4, 4, &vv));
  tstor_storage_retain(s);
  tstor_storage_release(s);
  tstor_storage_release(s); /* the views keep it */
  ck_assert_int_eq(rec.calls, 0);
  tstor_storage_release(v);
  ck_assert_int_eq(rec.calls, 0);
  tstor_storage_release(vv);
  ck_assert_int_eq(rec.calls, 1);
  ck_assert_ptr_eq(rec.data, mem);
}
END_TEST

START_TEST(wrap_owned_failure_keeps_ownership) {
  deleter_record rec = {0, NULL};
  char mem[16];
  tstor_storage *s = (tstor_storage *)0x1;
  ck_tstor_err(tstor_storage_wrap_owned(ctx, (tstor_device){9, 0}, mem, 16, count_deleter, &rec,
                                        &s),
               TSTOR_ENODEV);
  ck_tstor_err(tstor_storage_wrap_owned(ctx, cpu, NULL, 16, count_deleter, &rec, &s),
               TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_wrap_owned(ctx, cpu, mem, 16, NULL, &rec, &s), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_wrap_owned(ctx, cpu, mem, 16, count_deleter, &rec, NULL),
               TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_wrap_owned(ctx, meta, mem, 16, count_deleter, &rec, &s),
               TSTOR_EINVAL);
  ck_assert_int_eq(rec.calls, 0);
  ck_assert_ptr_null(s); /* a failed call leaves its output NULL */
}
END_TEST

/* ---------------------------------------------------------------- views */

START_TEST(view_shares_bytes) {
  tstor_storage *s = NULL, *v = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 256, &s));
  ramp(s);
  ck_tstor_ok(tstor_storage_view(s, 100, 50, &v));
  ck_assert_ptr_eq(tstor_storage_data(v), bytes(s) + 100);
  ck_assert_uint_eq(tstor_storage_nbytes(v), 50);
  ck_assert_uint_eq(tstor_storage_flags(v), TSTOR_FLAG_VIEW);
  ck_assert_ptr_eq(tstor_storage_base(v), s);
  ck_assert_uint_eq(tstor_storage_offset(v), 100);
  ck_assert_int_eq(tstor_storage_use_count(s), 2);
  ck_assert_int_eq(tstor_storage_use_count(v), 1);
  ck_assert_ptr_eq(tstor_storage_context(v), ctx);
  ck_assert_int_eq(tstor_storage_device(v).type, cpu.type);
  ck_assert_int_eq(bytes(v)[0], 100);
  ck_tstor_ok(tstor_storage_fill(v, 0xff));
  ck_assert_int_eq(bytes(s)[99], 99);
  ck_assert_int_eq(bytes(s)[100], 0xff);
  ck_assert_int_eq(bytes(s)[149], 0xff);
  ck_assert_int_eq(bytes(s)[150], 150);
  ck_tstor_err(tstor_storage_resize(v, 10), TSTOR_ENOTSUP);
  ck_last_error_has("view");
  ck_assert_uint_eq(tstor_storage_nbytes(v), 50);
  tstor_storage_release(v);
  ck_assert_int_eq(tstor_storage_use_count(s), 1);
  tstor_storage_release(s);
}
END_TEST

START_TEST(view_bounds) {
  tstor_storage *s = NULL, *v = (tstor_storage *)0x1;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 64, &s));
  const size_t bad[][2] = {{0, 65}, {1, 64}, {64, 1}, {65, 0}, {SIZE_MAX, 2}, {2, SIZE_MAX},
                           {SIZE_MAX, 0}, {32, SIZE_MAX - 16}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_tstor_err(tstor_storage_view(s, bad[i][0], bad[i][1], &v), TSTOR_ERANGE);
    ck_assert_ptr_null(v); /* a failed call leaves its output NULL */
  }
  ck_assert_int_eq(tstor_storage_use_count(s), 1);
  ck_tstor_ok(tstor_storage_resize(s, 64)); /* no view was left behind */
  const size_t good[][2] = {{0, 64}, {64, 0}, {0, 0}, {63, 1}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    ck_tstor_ok(tstor_storage_view(s, good[i][0], good[i][1], &v));
    ck_assert_uint_eq(tstor_storage_nbytes(v), good[i][1]);
    tstor_storage_release(v);
  }
  ck_tstor_err(tstor_storage_view(NULL, 0, 0, &v), TSTOR_EINVAL);
  ck_tstor_err(tstor_storage_view(s, 0, 0, NULL), TSTOR_EINVAL);
  tstor_storage_release(s);
}
END_TEST

START_TEST(view_of_view_flattens) {
  tstor_storage *root = NULL, *v1 = NULL, *v2 = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 100, &root));
  ramp(root);
  ck_tstor_ok(tstor_storage_view(root, 10, 80, &v1));
  ck_tstor_ok(tstor_storage_view(v1, 5, 20, &v2));
  /* v2 refers to the root, not to v1. */
  ck_assert_ptr_eq(tstor_storage_base(v2), root);
  ck_assert_uint_eq(tstor_storage_offset(v2), 15);
  ck_assert_ptr_eq(tstor_storage_data(v2), bytes(root) + 15);
  ck_assert_int_eq(tstor_storage_use_count(root), 3);
  ck_assert_int_eq(tstor_storage_use_count(v1), 1);
  /* Bounds are v1's, not the root's. */
  tstor_storage *bad = (tstor_storage *)0x1;
  ck_tstor_err(tstor_storage_view(v1, 70, 11, &bad), TSTOR_ERANGE);
  ck_assert_ptr_null(bad); /* a failed call leaves its output NULL */
  /* Dropping the middle view leaves v2 intact. */
  tstor_storage_release(v1);
  ck_assert_int_eq(tstor_storage_use_count(root), 2);
  ck_assert_int_eq(bytes(v2)[0], 15);
  ck_assert_int_eq(bytes(v2)[19], 34);
  /* And the root is still held by a view: no resize. */
  ck_tstor_err(tstor_storage_resize(root, 10), TSTOR_EBUSY);
  ck_assert_uint_eq(tstor_storage_nbytes(root), 100);
  tstor_storage_release(v2);
  ck_tstor_ok(tstor_storage_resize(root, 10));
  tstor_storage_release(root);
}
END_TEST

START_TEST(view_outlives_base) {
  tstor_storage *s = NULL, *v = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, fake, 64, &s));
  ck_tstor_ok(tstor_storage_fill(s, 0x42));
  ck_tstor_ok(tstor_storage_view(s, 32, 32, &v));
  tstor_storage_release(s);
  ck_assert_int_eq(tstor_storage_use_count(tstor_storage_base(v)), 1);
  tstor_storage *c = on_cpu(v);
  ck_assert_int_eq(bytes(c)[31], 0x42);
  tstor_storage_release(c);
  tstor_storage_release(v);
}
END_TEST

START_TEST(view_of_meta) {
  tstor_storage *s = NULL, *v = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, meta, 1000, &s));
  ck_tstor_ok(tstor_storage_view(s, 500, 500, &v));
  ck_assert_ptr_null(tstor_storage_data(v));
  ck_assert_uint_eq(tstor_storage_flags(v), TSTOR_FLAG_VIEW | TSTOR_FLAG_NO_DATA);
  void *p;
  ck_tstor_err(tstor_storage_data_checked(v, &p), TSTOR_ENODATA);
  tstor_storage_release(v);
  tstor_storage_release(s);
}
END_TEST

/* --------------------------------------------------------- references */

START_TEST(retain_and_release) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 8, &s));
  ck_assert_ptr_eq(tstor_storage_retain(s), s);
  ck_assert_ptr_eq(tstor_storage_retain(s), s);
  ck_assert_int_eq(tstor_storage_use_count(s), 3);
  tstor_storage_release(s);
  ck_assert_int_eq(tstor_storage_use_count(s), 2);
  tstor_storage_release(s);
  ck_assert_int_eq(tstor_storage_use_count(s), 1);
  tstor_storage_release(s);
  tstor_storage_release(NULL);
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 0);
}
END_TEST

START_TEST(accessors_on_null) {
  /* Accessors cannot fail; given NULL they answer "nothing". */
  ck_assert_ptr_null(tstor_storage_data(NULL));
  ck_assert_uint_eq(tstor_storage_nbytes(NULL), 0);
  ck_assert_uint_eq(tstor_storage_flags(NULL), 0);
  ck_assert_ptr_null(tstor_storage_base(NULL));
  ck_assert_ptr_null(tstor_storage_context(NULL));
  ck_assert_uint_eq(tstor_storage_offset(NULL), 0);
  ck_assert_int_eq(tstor_storage_use_count(NULL), 0);
  void *p;
  ck_tstor_err(tstor_storage_data_checked(NULL, &p), TSTOR_EINVAL);
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 8, &s));
  ck_tstor_err(tstor_storage_data_checked(s, NULL), TSTOR_EINVAL);
  tstor_storage_release(s);
}
END_TEST

/* --------------------------------------------------------------- resize */

START_TEST(resize_keeps_bytes) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 100, &s));
  ramp(s);
  ck_tstor_ok(tstor_storage_resize(s, 5000));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 5000);
  ck_assert_uint_eq((uintptr_t)tstor_storage_data(s) % 64, 0);
  for (int i = 0; i < 100; i++) ck_assert_int_eq(bytes(s)[i], i);
  memset(bytes(s) + 100, 0xab, 4900); /* the new bytes are there */
  ck_tstor_ok(tstor_storage_resize(s, 40));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 40);
  for (int i = 0; i < 40; i++) ck_assert_int_eq(bytes(s)[i], i);
  ck_tstor_ok(tstor_storage_resize(s, 40)); /* same size */
  ck_tstor_ok(tstor_storage_resize(s, 0));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 0);
  ck_tstor_ok(tstor_storage_resize(s, 10));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 10);
  tstor_storage_release(s);
  tstor_stats st = TSTOR_STATS_INIT;
  ck_tstor_ok(tstor_device_stats(ctx, cpu, &st));
  ck_assert_uint_eq(st.allocated, 0);
}
END_TEST

START_TEST(resize_on_a_device_without_reallocate) {
  /* fake has no reallocate: the core allocates, copies (fake to fake, staged
   * through the host) and frees. */
  tstor_storage *s = NULL, *src = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 300, &src));
  ramp(src);
  ck_tstor_ok(tstor_storage_to(src, fake, &s));
  ck_tstor_ok(tstor_storage_resize(s, 1000));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 1000);
  tstor_storage *c = on_cpu(s);
  for (int i = 0; i < 300; i++) ck_assert_int_eq(bytes(c)[i], i % 256);
  tstor_storage_release(c);
  ck_tstor_ok(tstor_storage_resize(s, 50));
  c = on_cpu(s);
  ck_assert_uint_eq(tstor_storage_nbytes(c), 50);
  for (int i = 0; i < 50; i++) ck_assert_int_eq(bytes(c)[i], i);
  tstor_storage_release(c);
  tstor_storage_release(s);
  tstor_storage_release(src);
}
END_TEST

START_TEST(resize_refusals_leave_the_storage) {
  tstor_storage *s = NULL, *v = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 64, &s));
  ramp(s);
  void *data = tstor_storage_data(s);
  ck_tstor_ok(tstor_storage_view(s, 0, 8, &v));
  ck_tstor_err(tstor_storage_resize(s, 128), TSTOR_EBUSY);
  ck_last_error_has("view");
  ck_assert_ptr_eq(tstor_storage_data(s), data);
  ck_assert_uint_eq(tstor_storage_nbytes(s), 64);
  tstor_storage_release(v);
  /* Out of memory: unchanged too. */
  ck_tstor_err(tstor_storage_resize(s, CORETEST_HUGE), TSTOR_ENOMEM);
  ck_assert_ptr_eq(tstor_storage_data(s), data);
  ck_assert_uint_eq(tstor_storage_nbytes(s), 64);
  for (int i = 0; i < 64; i++) ck_assert_int_eq(bytes(s)[i], i);
  ck_tstor_err(tstor_storage_resize(NULL, 1), TSTOR_EINVAL);
  tstor_storage_release(s);

  ck_tstor_ok(tstor_storage_new(ctx, fake, 64, &s));
  data = tstor_storage_data(s);
  ck_tstor_err(tstor_storage_resize(s, CORETEST_HUGE), TSTOR_ENOMEM);
  ck_assert_ptr_eq(tstor_storage_data(s), data);
  ck_assert_uint_eq(tstor_storage_nbytes(s), 64);
  tstor_storage_release(s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("storage");
  TCase *tc = tcase_create("new");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, new_on_cpu);
  tcase_add_test(tc, new_zero_bytes_everywhere);
  tcase_add_test(tc, new_on_meta);
  tcase_add_test(tc, meta_to_data_device_is_enodata_at_any_size);
  tcase_add_test(tc, new_on_fake);
  tcase_add_test(tc, new_errors);
  tcase_add_test(tc, new_on_default_context);
  suite_add_tcase(s, tc);
  tc = tcase_create("wrap");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, wrap_borrowed);
  tcase_add_test(tc, wrap_errors);
  tcase_add_test(tc, wrap_owned_deleter_runs_once);
  tcase_add_test(tc, wrap_owned_failure_keeps_ownership);
  suite_add_tcase(s, tc);
  tc = tcase_create("view");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, view_shares_bytes);
  tcase_add_test(tc, view_bounds);
  tcase_add_test(tc, view_of_view_flattens);
  tcase_add_test(tc, view_outlives_base);
  tcase_add_test(tc, view_of_meta);
  suite_add_tcase(s, tc);
  tc = tcase_create("refs");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, retain_and_release);
  tcase_add_test(tc, accessors_on_null);
  suite_add_tcase(s, tc);
  tc = tcase_create("resize");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, resize_keeps_bytes);
  tcase_add_test(tc, resize_on_a_device_without_reallocate);
  tcase_add_test(tc, resize_refusals_leave_the_storage);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
