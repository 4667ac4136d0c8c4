/* The tensor object: creation, layouts and the bytes they need, queries,
 * copies between layouts, dtypes and devices, element access, bad input. */
#define _GNU_SOURCE
#include "tensortest.h"
#include "typedtest.h"

#include <math.h>

static tstor_context *ctx;
static tstor_device cpu, meta, fake;

static void setup(void) {
  ctx = coretest_open(coretest_fake_section("fake", NULL));
  cpu = coretest_dev(ctx, "cpu");
  meta = coretest_dev(ctx, "meta");
  fake = coretest_dev(ctx, "fake:0");
}
static void teardown(void) { tstor_context_close(ctx); }

/* 0, 1, 2, ... as a contiguous float64 tensor on dev. */
static tstor_tensor *arange(tstor_device dev, tstor_dtype dt, int ndim, const int64_t *sizes) {
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_empty(ctx, dev, dt, ndim, sizes, &t));
  int64_t n = tstor_tensor_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = (double)i;
  tstor_tensor *src;
  ck_tstor_ok(tstor_tensor_from_array(ctx, cpu, TSTOR_FLOAT64, ndim, sizes, v, &src));
  ck_tstor_ok(tstor_tensor_copy_(t, src));
  tstor_tensor_release(src);
  free(v);
  return t;
}

START_TEST(empty_contiguous) {
  int64_t sizes[] = {2, 3, 4};
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 3, sizes, &t));
  int64_t strides[] = {12, 4, 1};
  tensortest_layout(t, 3, sizes, strides);
  ck_assert_int_eq(tstor_tensor_numel(t), 24);
  ck_assert_int_eq(tstor_tensor_nbytes(t), 96);
  ck_assert_uint_eq(tstor_storage_nbytes(tstor_tensor_storage(t)), 96);
  ck_assert_int_eq(tstor_tensor_storage_offset(t), 0);
  ck_assert_int_eq(tstor_tensor_dtype(t), TSTOR_FLOAT32);
  ck_assert_int_eq(tstor_tensor_device(t).type, cpu.type);
  ck_assert_ptr_eq(tstor_tensor_data(t), tstor_storage_data(tstor_tensor_storage(t)));
  ck_assert(tstor_tensor_is_contiguous(t));
  ck_assert(tstor_tensor_is_non_overlapping_and_dense(t));
  ck_assert(!tstor_tensor_is_channels_last(t));
  int64_t v;
  ck_tstor_ok(tstor_tensor_size(t, -1, &v));
  ck_assert_int_eq(v, 4);
  ck_tstor_ok(tstor_tensor_stride(t, -3, &v));
  ck_assert_int_eq(v, 12);
  ck_tstor_err(tstor_tensor_size(t, 3, &v), TSTOR_ERANGE);
  ck_last_error_has("Dimension out of range (expected to be in range of [-3, 2], but got 3)");
  ck_tstor_err(tstor_tensor_stride(t, -4, &v), TSTOR_ERANGE);
  ck_assert_ptr_eq(tstor_tensor_retain(t), t);
  ck_assert_int_eq(tstor_tensor_use_count(t), 2);
  tstor_tensor_release(t);
  tstor_tensor_release(t);
  tstor_tensor_release(NULL);
}
END_TEST

START_TEST(zero_dim_and_zero_size) {
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_full(ctx, cpu, TSTOR_INT64, 0, NULL, 7, &t));
  ck_assert_int_eq(tstor_tensor_dim(t), 0);
  ck_assert_int_eq(tstor_tensor_numel(t), 1);
  ck_assert(tstor_tensor_is_contiguous(t));
  double v;
  ck_tstor_ok(tstor_tensor_get_f64(t, NULL, &v));
  ck_assert(v == 7);
  int64_t x;
  ck_tstor_err(tstor_tensor_size(t, 0, &x), TSTOR_ERANGE);
  ck_last_error_has("Dimension specified as 0 but tensor has no dimensions");
  tstor_tensor_release(t);

  int64_t sizes[] = {3, 0, 5};
  ck_tstor_ok(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 3, sizes, &t));
  int64_t strides[] = {5, 5, 1};
  tensortest_layout(t, 3, sizes, strides);
  ck_assert_int_eq(tstor_tensor_numel(t), 0);
  ck_assert_uint_eq(tstor_storage_nbytes(tstor_tensor_storage(t)), 0);
  ck_assert(tstor_tensor_is_contiguous(t));
  ck_tstor_ok(tstor_tensor_fill(t, 1));
  ck_tstor_ok(tstor_tensor_to_array(t, NULL, TSTOR_FLOAT64, 0));
  tstor_tensor_release(t);
}
END_TEST

START_TEST(many_dims) {
  int64_t sizes[65], strides[65];
  for (int i = 0; i < 65; i++) sizes[i] = i % 7 == 0 ? 2 : 1;
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_zeros(ctx, cpu, TSTOR_UINT8, 64, sizes, &t));
  ck_assert_int_eq(tstor_tensor_dim(t), 64);
  ck_assert_int_eq(tstor_tensor_numel(t), 1024);
  int64_t idx[64] = {0};
  idx[63] = 1;
  ck_tstor_ok(tstor_tensor_set_f64(t, idx, 5));
  tstor_tensor *c;
  ck_tstor_ok(tstor_tensor_clone(t, &c));
  double v;
  ck_tstor_ok(tstor_tensor_get_f64(c, idx, &v));
  ck_assert(v == 5);
  tstor_tensor_release(c);
  tstor_tensor_release(t);
  ck_tstor_err(tstor_tensor_empty(ctx, cpu, TSTOR_UINT8, 65, sizes, &t), TSTOR_EINVAL);
  ck_assert_ptr_null(t);
  ck_last_error_has("65 dimensions");
  for (int i = 0; i < 65; i++) strides[i] = 1;
  ck_tstor_err(tstor_tensor_empty_strided(ctx, cpu, TSTOR_UINT8, 65, sizes, strides, &t),
               TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_empty(ctx, cpu, TSTOR_UINT8, -1, sizes, &t), TSTOR_EINVAL);
}
END_TEST

START_TEST(bad_sizes_and_overflow) {
  tstor_tensor *t = (tstor_tensor *)1;
  int64_t neg[] = {-1, 2};
  ck_tstor_err(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 2, neg, &t), TSTOR_EINVAL);
  ck_assert_ptr_null(t);
  ck_last_error_has("Trying to create tensor with negative dimension -1: [-1, 2]");
  int64_t huge[] = {INT64_C(1) << 62, INT64_C(1) << 62};
  ck_tstor_err(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 2, huge, &t), TSTOR_EOVERFLOW);
  ck_last_error_has("Storage size calculation overflowed with sizes=[4611686018427387904, 4611686018427387904]");
  int64_t big[] = {INT64_MAX};
  ck_tstor_err(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 1, big, &t), TSTOR_EOVERFLOW);
  ck_tstor_err(tstor_tensor_empty(ctx, meta, TSTOR_INT16, 1, big, &t), TSTOR_EOVERFLOW);
  int64_t s2[] = {2, 3}, bads[] = {-1, 1};
  ck_tstor_err(tstor_tensor_empty_strided(ctx, cpu, TSTOR_FLOAT32, 2, s2, bads, &t), TSTOR_EINVAL);
  ck_last_error_has("Negative strides are not supported at the moment, got strides: [-1, 1]");
  int64_t ovs[] = {INT64_MAX, 1}, two[] = {3, 2};
  ck_tstor_err(tstor_tensor_empty_strided(ctx, cpu, TSTOR_FLOAT32, 2, two, ovs, &t), TSTOR_EOVERFLOW);
  ck_last_error_has("and strides=[9223372036854775807, 1]");
  ck_tstor_err(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 2, NULL, &t), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_empty(ctx, cpu, (tstor_dtype)35, 1, s2, &t), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 1, s2, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_from_array(ctx, cpu, TSTOR_FLOAT32, 2, s2, NULL, &t), TSTOR_EINVAL);
  ck_assert_ptr_null(t);
  /* a huge meta tensor has sizes and no bytes */
  int64_t m[] = {INT64_C(1) << 40, 1 << 20};
  ck_tstor_ok(tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, 2, m, &t));
  ck_assert_ptr_null(tstor_tensor_data(t));
  ck_assert_int_eq(tstor_tensor_nbytes(t), INT64_C(1) << 62);
  tstor_tensor_release(t);
  uint64_t nb;
  int64_t sz[] = {2, 3}, st[] = {3, 1};
  ck_tstor_ok(tstor_layout_nbytes(2, sz, st, 4, 5, &nb));
  ck_assert_uint_eq(nb, (5 + 1 + 3 + 2) * 4);
  int64_t zs[] = {0, 3};
  ck_tstor_ok(tstor_layout_nbytes(2, zs, st, 4, 5, &nb));
  ck_assert_uint_eq(nb, 0);
  ck_tstor_err(tstor_layout_nbytes(2, sz, st, 4, -1, &nb), TSTOR_EINVAL);
  ck_tstor_err(tstor_layout_nbytes(2, sz, st, 4, INT64_MAX, &nb), TSTOR_EOVERFLOW);
}
END_TEST

START_TEST(on_storage_bounds) {
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 48, &s));
  tstor_tensor *t = (tstor_tensor *)1;
  int64_t sz[] = {20, 2}, st[] = {1, 1};
  ck_tstor_err(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 0, 2, sz, st, &t), TSTOR_ERANGE);
  ck_assert_ptr_null(t);
  ck_last_error_has("setStorage: sizes [20, 2], strides [1, 1], storage offset 0, and itemsize 4 "
                    "requiring a storage size of 84 are out of bounds for storage of size 48");
  int64_t ok[] = {3, 4};
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 0, 2, ok, NULL, &t));
  ck_assert_int_eq(tstor_storage_use_count(s), 2);
  tstor_tensor_release(t);
  ck_tstor_err(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 1, 2, ok, NULL, &t), TSTOR_ERANGE);
  ck_tstor_err(tstor_tensor_on_storage(s, TSTOR_FLOAT32, -1, 2, ok, NULL, &t), TSTOR_EINVAL);
  ck_last_error_has("Tensor: invalid storage offset -1");
  int64_t huge[] = {INT64_C(1) << 62, INT64_C(1) << 62};
  ck_tstor_err(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 0, 2, huge, st, &t), TSTOR_EOVERFLOW);
  ck_last_error_has("Storage size calculation overflowed with sizes=[4611686018427387904, "
                    "4611686018427387904] and strides=[1, 1]");
  ck_tstor_err(tstor_tensor_on_storage(s, TSTOR_FLOAT32, INT64_MAX / 2, 1, ok, NULL, &t),
               TSTOR_EOVERFLOW);
  /* a zero-size layout fits anywhere, as in PyTorch */
  int64_t z[] = {0, 1000};
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 1000, 2, z, NULL, &t));
  tstor_tensor_release(t);
  /* a float64 and an int32 tensor on the same bytes */
  tstor_tensor *a, *b;
  int64_t six[] = {6}, twelve[] = {12};
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_FLOAT64, 0, 1, six, NULL, &a));
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_INT32, 0, 1, twelve, NULL, &b));
  ck_tstor_ok(tstor_tensor_fill(a, 1.0));
  int64_t i1[] = {1};
  int32_t hi;
  ck_tstor_ok(tstor_tensor_get(b, i1, &hi));
  ck_assert_int_eq(hi, 0x3ff00000);
  tstor_tensor_release(a);
  tstor_tensor_release(b);
  ck_assert_int_eq(tstor_storage_use_count(s), 1);
  tstor_storage_release(s);
}
END_TEST

/* as_strided checks its layout against the storage as on_storage does, the
 * offset's sign first (torch 2.x); on meta, as torch 2.x's meta kernel, it
 * checks no bound, where on_storage still does. */
START_TEST(as_strided_bounds) {
  int64_t four[] = {4}, far[] = {3}, one[] = {1};
  tstor_tensor *t, *v = (tstor_tensor *)1;
  ck_tstor_ok(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 1, four, &t));
  ck_tstor_err(tstor_tensor_as_strided(t, 1, far, one, 2, &v), TSTOR_ERANGE);
  ck_last_error_has("setStorage: sizes [3], strides [1], storage offset 2");
  ck_assert_ptr_null(v);
  ck_tstor_err(tstor_tensor_as_strided(t, 1, far, one, -1, &v), TSTOR_EINVAL);
  ck_last_error_has("Tensor: invalid storage offset -1");
  tstor_tensor_release(t);
  ck_tstor_ok(tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, 1, four, &t));
  ck_tstor_ok(tstor_tensor_as_strided(t, 1, far, one, 2, &v));
  ck_assert_int_eq(tstor_tensor_storage_offset(v), 2);
  ck_assert_ptr_eq(tstor_tensor_storage(v), tstor_tensor_storage(t));
  tstor_tensor_release(v);
  ck_tstor_err(tstor_tensor_as_strided(t, 1, far, one, -1, &v), TSTOR_EINVAL);
  int64_t huge[] = {INT64_C(1) << 62};
  ck_tstor_err(tstor_tensor_as_strided(t, 1, far, huge, 0, &v), TSTOR_EOVERFLOW);
  ck_tstor_err(tstor_tensor_on_storage(tstor_tensor_storage(t), TSTOR_FLOAT32, 2, 1, far, one, &v),
               TSTOR_ERANGE);
  ck_assert_ptr_null(v);
  tstor_tensor_release(t);
}
END_TEST

START_TEST(layout_predicates) {
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 4096, &s));
  struct {
    int nd;
    int64_t sz[5], st[5];
    int contig, dense, cl;
  } cases[] = {
      {2, {3, 4}, {4, 1}, 1, 1, 0},
      {2, {3, 4}, {1, 3}, 0, 1, 0},
      {2, {3, 4}, {8, 2}, 0, 0, 0},
      {2, {3, 1}, {1, 7}, 1, 1, 0},
      {2, {3, 4}, {0, 1}, 0, 0, 0},
      {4, {2, 3, 4, 5}, {60, 1, 15, 3}, 0, 1, 1},
      {4, {2, 3, 4, 5}, {60, 20, 5, 1}, 1, 1, 0},
      {4, {2, 1, 4, 5}, {20, 20, 5, 1}, 1, 1, 1},
      {5, {2, 3, 2, 2, 2}, {24, 1, 12, 6, 3}, 0, 1, 1},
      {1, {5}, {2}, 0, 0, 0},
      {1, {1}, {9}, 1, 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tstor_tensor *t;
    ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 0, cases[i].nd, cases[i].sz,
                                        cases[i].st, &t));
    ck_assert_msg(tstor_tensor_is_contiguous(t) == cases[i].contig, "case %zu contiguous", i);
    ck_assert_msg(tstor_tensor_is_non_overlapping_and_dense(t) == cases[i].dense, "case %zu dense", i);
    ck_assert_msg(tstor_tensor_is_channels_last(t) == cases[i].cl, "case %zu channels_last", i);
    tstor_tensor_release(t);
  }
  tstor_storage_release(s);
}
END_TEST

START_TEST(copy_transposed_and_contiguous) {
  int64_t sz[] = {3, 4};
  tstor_tensor *a = arange(cpu, TSTOR_FLOAT32, 2, sz);
  int64_t tsz[] = {4, 3}, tst[] = {1, 4};
  tstor_tensor *at, *c;
  ck_tstor_ok(tstor_tensor_on_storage(tstor_tensor_storage(a), TSTOR_FLOAT32, 0, 2, tsz, tst, &at));
  ck_assert(!tstor_tensor_is_contiguous(at));
  ck_tstor_ok(tstor_tensor_contiguous(at, &c));
  ck_assert(tstor_tensor_is_contiguous(c));
  ck_assert_ptr_ne(tstor_tensor_storage(c), tstor_tensor_storage(a));
  const double *v = tensortest_values(c);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) ck_assert(v[i * 3 + j] == j * 4 + i);
  tstor_tensor *same;
  ck_tstor_ok(tstor_tensor_contiguous(c, &same));
  ck_assert_ptr_eq(same, c);
  tstor_tensor_release(same);
  /* clone keeps a dense transposed layout */
  tstor_tensor *k;
  ck_tstor_ok(tstor_tensor_clone(at, &k));
  tensortest_layout(k, 2, tsz, tst);
  v = tensortest_values(k);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) ck_assert(v[i * 3 + j] == j * 4 + i);
  tstor_tensor_release(k);
  tstor_tensor_release(c);
  tstor_tensor_release(at);
  tstor_tensor_release(a);
}
END_TEST

START_TEST(copy_broadcast_convert_devices) {
  int64_t sz[] = {2, 3}, row[] = {3};
  tstor_tensor *r = arange(cpu, TSTOR_FLOAT64, 1, row);
  tstor_device devs[] = {cpu, fake};
  for (int di = 0; di < 2; di++) {
    tstor_tensor *d;
    ck_tstor_ok(tstor_tensor_empty(ctx, devs[di], TSTOR_INT16, 2, sz, &d));
    ck_tstor_ok(tstor_tensor_copy_(d, r));
    const double *v = tensortest_values(d);
    for (int i = 0; i < 6; i++) ck_assert(v[i] == i % 3);
    /* back to cpu, transposed, as float32 */
    tstor_tensor *t;
    ck_tstor_ok(tstor_tensor_to(d, cpu, TSTOR_FLOAT32, &t));
    ck_assert_int_eq(tstor_tensor_dtype(t), TSTOR_FLOAT32);
    v = tensortest_values(t);
    for (int i = 0; i < 6; i++) ck_assert(v[i] == i % 3);
    tstor_tensor_release(t);
    tstor_tensor_release(d);
  }
  tstor_tensor *d;
  int64_t bad[] = {2, 4};
  ck_tstor_ok(tstor_tensor_empty(ctx, cpu, TSTOR_INT16, 2, bad, &d));
  ck_tstor_err(tstor_tensor_copy_(d, r), TSTOR_ESIZE);
  ck_last_error_has("The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 1");
  tstor_tensor_release(d);
  tstor_tensor_release(r);
}
END_TEST

START_TEST(copy_overlap) {
  int64_t ten[] = {10};
  tstor_tensor *x = arange(cpu, TSTOR_FLOAT32, 1, ten);
  tstor_storage *s = tstor_tensor_storage(x);
  tstor_tensor *a, *b;
  int64_t nine[] = {9};
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 1, 1, nine, NULL, &a));
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 0, 1, nine, NULL, &b));
  ck_tstor_err(tstor_tensor_copy_(a, b), TSTOR_EINVAL);
  ck_last_error_has("some elements of the input tensor and the written-to tensor refer to a single memory location");
  tstor_tensor_release(a);
  tstor_tensor_release(b);
  /* x[2:8:2].copy_(x[0:6:2]) reads what it just wrote, as PyTorch */
  int64_t three[] = {3}, two[] = {2};
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 2, 1, three, two, &a));
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 0, 1, three, two, &b));
  ck_tstor_ok(tstor_tensor_copy_(a, b));
  const double *v = tensortest_values(x);
  double want[] = {0, 1, 0, 3, 0, 5, 0, 7, 8, 9};
  for (int i = 0; i < 10; i++) ck_assert(v[i] == want[i]);
  tstor_tensor_release(a);
  tstor_tensor_release(b);
  /* a destination with stride 0 */
  int64_t zero[] = {0};
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 0, 1, three, zero, &a));
  ck_tstor_err(tstor_tensor_copy_(a, x), TSTOR_EINVAL);
  ck_last_error_has("more than one element of the written-to tensor refers to a single memory location");
  ck_tstor_ok(tstor_tensor_fill(a, 4));
  tstor_tensor_release(a);
  tstor_tensor_release(x);
}
END_TEST

START_TEST(element_access) {
  int64_t sz[] = {2, 3};
  tstor_device devs[] = {cpu, fake};
  for (int di = 0; di < 2; di++) {
    tstor_tensor *t = arange(devs[di], TSTOR_INT32, 2, sz);
    int64_t idx[] = {1, -1};
    double v;
    ck_tstor_ok(tstor_tensor_get_f64(t, idx, &v));
    ck_assert(v == 5);
    ck_tstor_ok(tstor_tensor_set_f64(t, idx, 42.7));
    int32_t raw;
    ck_tstor_ok(tstor_tensor_get(t, idx, &raw));
    ck_assert_int_eq(raw, 42);
    int64_t bad[] = {2, 0};
    ck_tstor_err(tstor_tensor_get_f64(t, bad, &v), TSTOR_ERANGE);
    ck_last_error_has("index 2 is out of bounds for dimension 0 with size 2");
    int32_t arr[6];
    ck_tstor_err(tstor_tensor_to_array(t, arr, TSTOR_INT32, 5), TSTOR_ESIZE);
    ck_tstor_ok(tstor_tensor_to_array(t, arr, TSTOR_INT32, 6));
    ck_assert_int_eq(arr[4], 4);
    ck_assert_int_eq(arr[5], 42);
    tstor_tensor_release(t);
  }
  tstor_tensor *m;
  ck_tstor_ok(tstor_tensor_zeros(ctx, meta, TSTOR_FLOAT32, 2, sz, &m));
  int64_t idx[] = {0, 0};
  double v;
  ck_tstor_err(tstor_tensor_get_f64(m, idx, &v), TSTOR_ENODATA);
  tstor_tensor_release(m);
}
END_TEST

/* hpu-stub has a strided copy op (its memory faults on host access, so a
 * core that touched it directly would crash): transposing copies, a
 * broadcast source and converting copies on it, against the same on cpu. */
START_TEST(backend_strided_copy) {
  tstor_context *h = coretest_open("[backend hpu]\nlibrary = tstor-hpu-stub.so\n");
  tstor_device hpu = coretest_dev(h, "hpu:0"), hcpu = coretest_dev(h, "cpu");
  int64_t sz[] = {5, 7, 3};
  double v[105];
  for (int i = 0; i < 105; i++) v[i] = i * 1.5;
  tstor_tensor *src, *on_dev, *perm, *dst, *back;
  ck_tstor_ok(tstor_tensor_from_array(h, hcpu, TSTOR_FLOAT64, 3, sz, v, &src));
  ck_tstor_ok(tstor_tensor_to(src, hpu, TSTOR_FLOAT64, &on_dev));
  int64_t order[] = {2, 0, 1};
  ck_tstor_ok(tstor_tensor_permute(on_dev, 3, order, &perm));
  ck_tstor_ok(tstor_tensor_contiguous(perm, &dst)); /* device to device, strided */
  ck_assert_int_eq(tstor_tensor_device(dst).type, hpu.type);
  ck_tstor_ok(tstor_tensor_to(dst, hcpu, TSTOR_FLOAT32, &back));
  float got[105];
  ck_tstor_ok(tstor_tensor_to_array(back, got, TSTOR_FLOAT32, 105));
  for (int c = 0; c < 3; c++)
    for (int a = 0; a < 5; a++)
      for (int b = 0; b < 7; b++) ck_assert(got[(c * 5 + a) * 7 + b] == (float)v[(a * 7 + b) * 3 + c]);
  tstor_tensor_release(back);
  /* a row broadcast into a strided slice of a device tensor */
  tstor_tensor *row, *slice;
  int64_t three[] = {3};
  ck_tstor_ok(tstor_tensor_full(h, hpu, TSTOR_FLOAT64, 1, three, -1, &row));
  ck_tstor_ok(tstor_tensor_slice(on_dev, 1, 0, INT64_MAX, 3, &slice));
  ck_tstor_ok(tstor_tensor_copy_(slice, row));
  double all[105];
  ck_tstor_ok(tstor_tensor_to_array(on_dev, all, TSTOR_FLOAT64, 105));
  for (int i = 0; i < 105; i++) ck_assert(all[i] == ((i / 3) % 7 % 3 == 0 ? -1 : v[i]));
  tstor_tensor_release(slice);
  tstor_tensor_release(row);
  tstor_tensor_release(dst);
  tstor_tensor_release(perm);
  tstor_tensor_release(on_dev);
  tstor_tensor_release(src);
  tstor_context_close(h);
}
END_TEST

/* Views refuse bad arguments with an error and hand out nothing. */
START_TEST(views_refuse_bad_input) {
  int64_t sz[] = {2, 3};
  tstor_tensor *t, *v = (tstor_tensor *)1, **list = (tstor_tensor **)1;
  int count = 7;
  ck_tstor_ok(tstor_tensor_zeros(ctx, cpu, TSTOR_FLOAT32, 2, sz, &t));
  ck_tstor_err(tstor_tensor_view(t, 2, NULL, &v), TSTOR_EINVAL);
  ck_assert_ptr_null(v);
  ck_tstor_err(tstor_tensor_view(NULL, 2, sz, &v), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_view(t, 2, sz, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_reshape(t, 65, sz, &v), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_expand(t, -1, sz, &v), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_permute(t, 2, NULL, &v), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_movedim(t, 1, NULL, NULL, &v), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_split(t, 1, 0, &count, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_split(NULL, 1, 0, &count, &list), TSTOR_EINVAL);
  ck_assert_ptr_null(list);
  ck_assert_int_eq(count, 0);
  ck_tstor_err(tstor_tensor_split_sizes(t, 2, NULL, 0, &count, &list), TSTOR_EINVAL);
  int64_t parts[] = {3, -1}; /* the whole list in the words, as PyTorch */
  ck_tstor_err(tstor_tensor_split_sizes(t, 2, parts, 0, &count, &list), TSTOR_EINVAL);
  ck_last_error_has(
      "split_with_sizes expects split_sizes have only non-negative entries, but got "
      "split_sizes=[3, -1]");
  ck_tstor_err(tstor_tensor_transpose(t, INT32_MIN, 0, &v), TSTOR_ERANGE);
  ck_tstor_err(tstor_tensor_select(t, INT32_MAX, 0, &v), TSTOR_ERANGE);
  ck_tstor_err(tstor_tensor_select(t, 0, INT64_MIN, &v), TSTOR_ERANGE);
  ck_tstor_err(tstor_tensor_narrow(t, 0, INT64_MIN, 1, &v), TSTOR_ERANGE);
  ck_tstor_err(tstor_tensor_narrow(t, 0, 0, INT64_MAX, &v), TSTOR_ERANGE);
  ck_tstor_err(tstor_tensor_view_dtype(t, (tstor_dtype)35, &v), TSTOR_EINVAL);
  ck_assert_ptr_null(v);
  /* Python's clamping at the extremes */
  ck_tstor_ok(tstor_tensor_slice(t, 1, INT64_MIN, INT64_MAX, INT64_MAX, &v));
  int64_t one[] = {2, 1}, st[] = {3, INT64_MAX};
  tensortest_layout(v, 2, one, st);
  tstor_tensor_release(v);
  ck_tstor_err(tstor_tensor_slice(t, 0, 0, 2, INT64_MAX, &v), TSTOR_EOVERFLOW);
  ck_assert_ptr_null(v);
  ck_tstor_ok(tstor_tensor_slice(t, 1, INT64_MAX, INT64_MIN, 1, &v));
  ck_assert_int_eq(tstor_tensor_numel(v), 0);
  tstor_tensor_release(v);
  /* sizes whose product overflows */
  tstor_tensor *s1;
  int64_t ones[] = {1, 1};
  ck_tstor_ok(tstor_tensor_zeros(ctx, cpu, TSTOR_FLOAT32, 2, ones, &s1));
  int64_t huge[] = {INT64_C(1) << 62, INT64_C(1) << 62};
  ck_tstor_err(tstor_tensor_expand(s1, 2, huge, &v), TSTOR_EOVERFLOW);
  ck_assert_ptr_null(v);
  int64_t big[] = {INT64_MAX, 1};
  ck_tstor_ok(tstor_tensor_expand(s1, 2, big, &v)); /* one stride-0 dimension: fine */
  ck_assert_int_eq(tstor_tensor_numel(v), INT64_MAX);
  tstor_tensor_release(v);
  tstor_tensor_release(s1);
  /* 64 dimensions, and no 65th */
  int64_t s64[64];
  for (int i = 0; i < 64; i++) s64[i] = 1;
  tstor_tensor *t64;
  ck_tstor_ok(tstor_tensor_empty(ctx, cpu, TSTOR_COMPLEX64, 64, s64, &t64));
  ck_tstor_err(tstor_tensor_unsqueeze(t64, 0, &v), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_unfold(t64, 0, 1, 1, &v), TSTOR_EINVAL);
  ck_tstor_err(tstor_tensor_view_as_real(t64, &v), TSTOR_EINVAL);
  int64_t two[] = {1, 1};
  ck_tstor_err(tstor_tensor_unflatten(t64, 0, 2, two, &v), TSTOR_EINVAL);
  ck_tstor_ok(tstor_tensor_flatten(t64, 0, -1, &v));
  ck_assert_int_eq(tstor_tensor_dim(v), 1);
  tstor_tensor_release(v);
  ck_tstor_ok(tstor_tensor_squeeze(t64, &v));
  ck_assert_int_eq(tstor_tensor_dim(v), 0);
  tstor_tensor_release(v);
  tstor_tensor_release(t64);
  tstor_tensor_release(t);
}
END_TEST

/* Views whose strides or offset would pass int64 are refused with
 * TSTOR_EOVERFLOW (tensor.h), never made with the wrapped value, and the
 * arithmetic that decides so does not overflow itself (UBSan runs this). */
START_TEST(views_refuse_int64_overflow) {
  tstor_storage *s;
  tstor_tensor *t, *v = (tstor_tensor *)1, **list = NULL;
  int count = 0;
  /* two elements 2^62 apart, on meta: */
  ck_tstor_ok(tstor_storage_new(ctx, meta, ((size_t)1 << 62) + 1, &s));
  int64_t two[] = {2}, far[] = {INT64_C(1) << 62};
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_UINT8, 0, 1, two, far, &t));
  int64_t row[] = {1, 2};
  ck_tstor_err(tstor_tensor_view(t, 2, row, &v), TSTOR_EOVERFLOW); /* the size-1 dim: 2^63 */
  ck_assert_ptr_null(v);
  ck_tstor_err(tstor_tensor_reshape(t, 2, row, &v), TSTOR_EOVERFLOW);
  ck_tstor_err(tstor_tensor_slice(t, 0, 2, 2, 1, &v), TSTOR_EOVERFLOW); /* offset 2^63 */
  ck_assert_ptr_null(v);
  /* a negative window is a rule of torch 2.x's unfold, before any product */
  ck_tstor_err(tstor_tensor_unfold(t, 0, INT64_MIN, 1, &v), TSTOR_EINVAL);
  ck_last_error_has("size is -9223372036854775808 but must be >= 0");
  ck_assert_ptr_null(v);
  ck_tstor_ok(tstor_tensor_split(t, INT64_MAX, 0, &count, &list)); /* one piece of 2 */
  ck_assert_int_eq(count, 1);
  ck_assert_int_eq(tstor_tensor_sizes(list[0])[0], 2);
  tstor_tensor_list_free(list, count);
  tstor_tensor_release(t);
  tstor_storage_release(s);
  /* no elements, and a compact view whose strides would pass int64 */
  int64_t none[] = {0}, wide[] = {0, INT64_C(1) << 32, INT64_C(1) << 32};
  ck_tstor_ok(tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, 1, none, &t));
  ck_tstor_err(tstor_tensor_view(t, 3, wide, &v), TSTOR_EOVERFLOW);
  ck_assert_ptr_null(v);
  int64_t fits[] = {0, INT64_C(1) << 31, INT64_C(1) << 31}, fit_strides[] = {INT64_C(1) << 62, INT64_C(1) << 31, 1};
  ck_tstor_ok(tstor_tensor_view(t, 3, fits, &v));
  tensortest_layout(v, 3, fits, fit_strides);
  tstor_tensor_release(v);
  /* sizes whose product passes int64 still leave 0 for an inferred size */
  int64_t past[] = {INT64_C(1) << 61, -1, INT64_C(1) << 62}, zero_mid[] = {INT64_C(1) << 61, 0, INT64_C(1) << 62},
          past_strides[] = {INT64_C(1) << 62, INT64_C(1) << 62, 1};
  ck_tstor_ok(tstor_tensor_view(t, 3, past, &v));
  tensortest_layout(v, 3, zero_mid, past_strides);
  tstor_tensor_release(v);
  tstor_tensor_release(t);
  /* an element an empty tensor holds none of: select and diagonal move the
   * offset by index * stride, here 8 * 2^60 = 2^63 */
  int64_t square[] = {9, 9, 0}, steep[] = {1, INT64_C(1) << 60, 1};
  ck_tstor_ok(tstor_storage_new(ctx, meta, 1, &s));
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_UINT8, 0, 3, square, steep, &t));
  ck_tstor_err(tstor_tensor_select(t, 1, 8, &v), TSTOR_EOVERFLOW);
  ck_tstor_err(tstor_tensor_diagonal(t, 8, 0, 1, &v), TSTOR_EOVERFLOW);
  ck_tstor_err(tstor_tensor_diagonal(t, -8, 1, 0, &v), TSTOR_EOVERFLOW);
  ck_assert_ptr_null(v);
  tstor_tensor_release(t);
  tstor_storage_release(s);
  /* a view that does not exist is refused as such, though computing it
   * would overflow a size-1 dimension's stride; reshape copies */
  int64_t odd[] = {(INT64_C(1) << 51) - 1, 1, 2}, odd_strides[] = {2, 1, (INT64_C(1) << 50) - 1},
          flat[] = {(INT64_C(1) << 52) - 2}, one_flat[] = {1, (INT64_C(1) << 52) - 2};
  ck_tstor_ok(tstor_storage_new(ctx, meta, (size_t)3 << 51, &s));
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_UINT8, 0, 3, odd, odd_strides, &t));
  ck_tstor_err(tstor_tensor_view(t, 2, one_flat, &v), TSTOR_EINVAL);
  ck_assert_str_eq(tstor_last_error(), "view size is not compatible with input tensor's size and stride (at "
                   "least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  ck_tstor_ok(tstor_tensor_reshape(t, 1, flat, &v));
  ck_assert_ptr_ne(tstor_tensor_storage(v), s);
  tstor_tensor_release(v);
  tstor_tensor_release(t);
  tstor_storage_release(s);
}
END_TEST

/* A transposing copy large enough for non-temporal stores (16 MiB and up),
 * checked element by element. */
START_TEST(large_transposing_copy) {
  int64_t sz[] = {1000, 4200};
  tstor_tensor *a, *t, *c;
  ck_tstor_ok(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 2, sz, &a));
  float *p = tstor_tensor_data(a);
  for (int64_t i = 0; i < 1000 * 4200; i++) p[i] = (float)i;
  ck_tstor_ok(tstor_tensor_t(a, &t));
  ck_tstor_ok(tstor_tensor_contiguous(t, &c));
  const float *q = tstor_tensor_data(c);
  for (int64_t i = 0; i < 4200; i++)
    for (int64_t j = 0; j < 1000; j++)
      if (q[i * 1000 + j] != (float)(j * 4200 + i))
        ck_abort_msg("element (%" PRId64 ", %" PRId64 ") is %g", i, j, (double)q[i * 1000 + j]);
  tstor_tensor_release(c);
  tstor_tensor_release(t);
  tstor_tensor_release(a);
}
END_TEST

/* The last two dimensions of an nb x r x c tensor of random bytes, swapped
 * by a copy between tensors `off` elements into their storages: each
 * element's bytes checked against the source's, and the elements before the
 * destination's left alone. */
static void transposed_copy_is_right(tstor_dtype dt, int64_t nb, int64_t r, int64_t c, int64_t off,
                                     uint64_t seed) {
  size_t es = tstor_dtype_size(dt), n = (size_t)(nb * r * c), o = (size_t)off;
  tstor_storage *ss, *ds;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, (n + o) * es, &ss));
  ck_tstor_ok(tstor_storage_new(ctx, cpu, (n + o) * es, &ds));
  unsigned char *sp = tstor_storage_data(ss), *dp = tstor_storage_data(ds);
  uint64_t x = 0x9e3779b97f4a7c15ULL * seed;
  for (size_t k = 0; k < (n + o) * es; k++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sp[k] = (unsigned char)(x >> 56);
  }
  memset(dp, 0, (n + o) * es);
  int64_t src_sz[] = {nb, r, c}, dst_sz[] = {nb, c, r}, perm[] = {0, 2, 1};
  tstor_tensor *a, *v, *d;
  ck_tstor_ok(tstor_tensor_on_storage(ss, dt, off, 3, src_sz, NULL, &a));
  ck_tstor_ok(tstor_tensor_permute(a, 3, perm, &v));
  ck_tstor_ok(tstor_tensor_on_storage(ds, dt, off, 3, dst_sz, NULL, &d));
  ck_tstor_ok(tstor_tensor_copy_(d, v));
  for (int64_t b = 0; b < nb; b++)
    for (int64_t j = 0; j < c; j++)
      for (int64_t i = 0; i < r; i++) {
        size_t to = ((size_t)((b * c + j) * r + i) + o) * es;
        size_t from = ((size_t)((b * r + i) * c + j) + o) * es;
        if (memcmp(dp + to, sp + from, es) != 0)
          ck_abort_msg("%zu-byte elements, %" PRId64 "x%" PRId64 "x%" PRId64 " at %" PRId64
                       ": (%" PRId64 ", %" PRId64 ", %" PRId64 ") differs",
                       es, nb, r, c, off, b, j, i);
      }
  for (size_t k = 0; k < o * es; k++) ck_assert_uint_eq(dp[k], 0); /* before the tensor */
  tstor_tensor_release(d);
  tstor_tensor_release(v);
  tstor_tensor_release(a);
  tstor_storage_release(ss);
  tstor_storage_release(ds);
}

/* Transposing copies go in tiles, in blocks of tiles, with register
 * transposes for 2-, 4- and 8-byte elements (AVX2 for 4 where the CPU has
 * it): every element size, shapes that end in partial tiles and partial
 * blocks, a batch dimension, and both operands one element off their
 * storage's start (so off any vector alignment). */
START_TEST(tiled_copies_every_size_and_edge) {
  static const tstor_dtype dtypes[] = {TSTOR_UINT8, TSTOR_INT16, TSTOR_INT32, TSTOR_INT64,
                                       TSTOR_COMPLEX128};
  /* batch, rows, cols of the source; its last two dimensions swapped */
  static const int64_t shapes[][3] = {{1, 70, 600}, {1, 1100, 130}, {1, 67, 531}, {3, 90, 100},
                                      {2, 16, 16}, {1, 520, 520}};
  for (size_t di = 0; di < sizeof dtypes / sizeof dtypes[0]; di++)
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
      transposed_copy_is_right(dtypes[di], shapes[si][0], shapes[si][1], shapes[si][2], 1,
                               di * 16 + si + 1);
}
END_TEST

/* Large transposing copies stream. Those of 4-byte elements go in bands of
 * 32 source rows by equal parts of each row, 8 KiB at most, each band asked
 * into the cache while the one before it goes out: bands that end short in
 * rows, rows whose last part is narrower than the others, a band of one
 * row, a batch dimension (the next band in the next matrix), NCHW -> NHWC's
 * shape, fewer than 32 rows (tiles then). 2- and 8-byte elements go in tiles
 * with partial blocks at both edges. Each aligned and one element off; and
 * all of it again with ordinary stores. */
START_TEST(large_transposes_every_edge) {
  /* dtype, batch, rows, cols of the source (each 16 MiB or more), and the offset */
  static const struct {
    tstor_dtype dt;
    int64_t nb, r, c, off;
  } cases[] = {{TSTOR_INT32, 1, 1000, 4200, 0}, {TSTOR_INT32, 1, 1000, 4200, 1},
               {TSTOR_INT32, 3, 700, 2100, 0},  {TSTOR_INT32, 1, 1100, 4000, 1},
               {TSTOR_INT32, 6, 256, 3136, 0},  {TSTOR_INT32, 1, 40, 110000, 1},
               {TSTOR_INT32, 1, 33, 140000, 0}, {TSTOR_INT32, 2, 96, 22500, 0},
               {TSTOR_INT32, 1, 20, 230000, 0}, {TSTOR_INT16, 1, 2100, 4100, 0},
               {TSTOR_INT16, 1, 1030, 8300, 1}, {TSTOR_INT64, 1, 1000, 2100, 0},
               {TSTOR_INT64, 3, 300, 3001, 1}};
  static const tstor_store_policy stores[] = {TSTOR_STORES_STREAMING, TSTOR_STORES_ORDINARY};
  for (size_t k = 0; k < sizeof stores / sizeof stores[0]; k++) {
    tstor_set_store_policy(stores[k]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
      transposed_copy_is_right(cases[i].dt, cases[i].nb, cases[i].r, cases[i].c, cases[i].off,
                               k * 16 + i + 1);
  }
  tstor_set_store_policy(TSTOR_STORES_AUTO);
}
END_TEST

/* Views hold the storage: it outlives the tensor they came from. */
START_TEST(views_share_and_outlive) {
  int64_t sz[] = {4, 5};
  tstor_tensor *t, *v, *w;
  ck_tstor_ok(tstor_tensor_zeros(ctx, cpu, TSTOR_INT64, 2, sz, &t));
  tstor_storage *s = tstor_tensor_storage(t);
  ck_tstor_ok(tstor_tensor_transpose(t, 0, 1, &v));
  ck_tstor_ok(tstor_tensor_narrow(v, 0, 1, 2, &w));
  ck_assert_ptr_eq(tstor_tensor_storage(w), s);
  ck_assert_int_eq(tstor_storage_use_count(s), 3);
  tstor_tensor_release(t);
  tstor_tensor_release(v);
  ck_tstor_ok(tstor_tensor_fill(w, 9)); /* the storage lives on through w */
  int64_t idx[] = {1, 3};
  double x;
  ck_tstor_ok(tstor_tensor_get_f64(w, idx, &x));
  ck_assert(x == 9);
  ck_assert_int_eq(tstor_tensor_storage_offset(w), 1);
  tstor_tensor_release(w);
}
END_TEST

/* t's fill, and ones and full of its dtype, are refused on cpu: torch has no
 * fill kernel for the dtype named `name`. */
static void fills_refused(tstor_tensor *t, const char *name) {
  ck_tstor_err(tstor_tensor_fill(t, 1.0), TSTOR_EDTYPE);
  ck_assert_str_eq(tstor_last_error(), typedtest_refusal("fill", name));
  int64_t sz[] = {2, 3};
  tstor_tensor *o = (tstor_tensor *)1;
  ck_tstor_err(tstor_tensor_ones(ctx, cpu, tstor_tensor_dtype(t), 2, sz, &o), TSTOR_EDTYPE);
  ck_assert_ptr_null(o);
  ck_tstor_err(tstor_tensor_full(ctx, cpu, tstor_tensor_dtype(t), 2, sz, 0.0, &o), TSTOR_EDTYPE);
  ck_assert_ptr_null(o);
  /* on meta, which runs no kernel, torch 2.15 lets them pass */
  ck_tstor_ok(tstor_tensor_ones(ctx, meta, tstor_tensor_dtype(t), 2, sz, &o));
  ck_tstor_ok(tstor_tensor_fill(o, 2.0));
  tstor_tensor_release(o);
  ck_tstor_ok(tstor_tensor_full(ctx, meta, tstor_tensor_dtype(t), 2, sz, 0.0, &o));
  tstor_tensor_release(o);
}

/* float4_e2m1fn_x2 tensors hold, copy and view bytes, and are zeroed as
 * torch.zeros zeroes them; fills, ones, full and element access by number
 * are refused in torch 2.x's words (tests/vectors/refusals_torch2.txt). */
START_TEST(opaque_tensors) {
  const tstor_dtype f4 = TSTOR_FLOAT4_E2M1FN_X2;
  int64_t sz[] = {2, 3}, idx[] = {1, 2};
  const unsigned char bytes[] = {1, 2, 3, 4, 5, 0xf6};
  tstor_tensor *t, *z, *tt, *c;
  ck_tstor_ok(tstor_tensor_from_array(ctx, cpu, f4, 2, sz, bytes, &t));
  ck_tstor_ok(tstor_tensor_zeros(ctx, fake, f4, 2, sz, &z));
  ck_tstor_ok(tstor_tensor_transpose(t, 0, 1, &tt));
  ck_tstor_ok(tstor_tensor_contiguous(tt, &c));
  unsigned char got[6], one;
  ck_tstor_ok(tstor_tensor_to_array(c, got, f4, 6));
  const unsigned char want[] = {1, 4, 2, 5, 3, 0xf6};
  ck_assert_int_eq(memcmp(got, want, 6), 0);
  ck_tstor_ok(tstor_tensor_to_array(z, got, f4, 6));
  for (int i = 0; i < 6; i++) ck_assert_uint_eq(got[i], 0);
  ck_tstor_ok(tstor_tensor_get(t, idx, &one));
  ck_assert_uint_eq(one, 0xf6);
  double d;
  ck_tstor_err(tstor_tensor_get_f64(t, idx, &d), TSTOR_EDTYPE);
  ck_assert_str_eq(tstor_last_error(), typedtest_refusal("item", "float4_e2m1fn_x2"));
  ck_tstor_err(tstor_tensor_set_f64(t, idx, 1.0), TSTOR_EDTYPE);
  ck_assert_str_eq(tstor_last_error(), typedtest_refusal("setitem", "float4_e2m1fn_x2"));
  fills_refused(t, "float4_e2m1fn_x2");
  ck_tstor_ok(tstor_tensor_to_array(t, got, f4, 6));
  ck_assert_int_eq(memcmp(got, bytes, 6), 0); /* untouched */
  tstor_tensor *list[] = {t, z, tt, c};
  for (int i = 0; i < 4; i++) tstor_tensor_release(list[i]);
}
END_TEST

/* bcomplex32 (torch 2.15) tensors read and write elements as numbers (the
 * real part), have bfloat16 parts, and are zeroed as torch.zeros does; fill,
 * ones and full are refused, as torch has no fill kernel for them. */
START_TEST(bcomplex32_tensors) {
  const tstor_dtype bc = TSTOR_BCOMPLEX32;
  int64_t sz[] = {2}, idx[] = {1};
  const uint16_t parts[] = {0x3f80, 0x4000, 0xc040, 0x3f00}; /* 1+2j, -3+0.5j */
  tstor_tensor *t, *z, *re, *im;
  ck_tstor_ok(tstor_tensor_from_array(ctx, cpu, bc, 1, sz, parts, &t));
  ck_tstor_ok(tstor_tensor_zeros(ctx, fake, bc, 1, sz, &z));
  double d;
  ck_tstor_ok(tstor_tensor_get_f64(t, idx, &d));
  ck_assert_double_eq(d, -3.0);
  ck_tstor_ok(tstor_tensor_set_f64(t, idx, 2.5));
  ck_tstor_ok(tstor_tensor_real(t, &re));
  ck_tstor_ok(tstor_tensor_imag(t, &im));
  ck_assert_int_eq(tstor_tensor_dtype(re), TSTOR_BFLOAT16);
  uint16_t got[4];
  ck_tstor_ok(tstor_tensor_to_array(im, got, TSTOR_BFLOAT16, 2));
  ck_assert_uint_eq(got[0], 0x4000);
  ck_assert_uint_eq(got[1], 0); /* x[i] = 2.5 sets 2.5+0j */
  ck_tstor_ok(tstor_tensor_to_array(re, got, TSTOR_BFLOAT16, 2));
  ck_assert_uint_eq(got[1], 0x4020);
  ck_tstor_ok(tstor_tensor_to_array(z, got, bc, 2));
  for (int i = 0; i < 4; i++) ck_assert_uint_eq(got[i], 0);
  fills_refused(t, "bcomplex32");
  tstor_tensor *list[] = {t, z, re, im};
  for (int i = 0; i < 4; i++) tstor_tensor_release(list[i]);
}
END_TEST

Suite *tensor_suite(void) {
  Suite *s = suite_create("tensor");
  TCase *tc = tcase_create("object");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 60); /* hundreds of megabytes, maybe under a sanitizer (8 s under TSan) */
  tcase_add_test(tc, empty_contiguous);
  tcase_add_test(tc, opaque_tensors);
  tcase_add_test(tc, bcomplex32_tensors);
  tcase_add_test(tc, zero_dim_and_zero_size);
  tcase_add_test(tc, many_dims);
  tcase_add_test(tc, bad_sizes_and_overflow);
  tcase_add_test(tc, on_storage_bounds);
  tcase_add_test(tc, as_strided_bounds);
  tcase_add_test(tc, layout_predicates);
  tcase_add_test(tc, copy_transposed_and_contiguous);
  tcase_add_test(tc, copy_broadcast_convert_devices);
  tcase_add_test(tc, copy_overlap);
  tcase_add_test(tc, element_access);
  tcase_add_test(tc, backend_strided_copy);
  tcase_add_test(tc, views_refuse_bad_input);
  tcase_add_test(tc, views_refuse_int64_overflow);
  tcase_add_test(tc, views_share_and_outlive);
  tcase_add_test(tc, large_transposing_copy);
  tcase_add_test(tc, tiled_copies_every_size_and_edge);
  tcase_add_test(tc, large_transposes_every_edge);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return tstor_test_run(tensor_suite()); }
