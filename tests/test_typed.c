/* Typed storage operations: sizes, element access, arrays, fill, buffers,
 * byteswap, strings, converting copies and views, on cpu, on meta, on a device
 * the core must stage through ("fake", whose bytes are scrambled), and on one
 * with its own convert op ("convdev"); and Torch7's Storage documentation,
 * example by example. */
#define _GNU_SOURCE
#include "coretest.h"
#include "typedtest.h"

#include <math.h>
#include <tstor/mapped.h>
#include <tstor/tensor.h>

static tstor_context *ctx;
static tstor_device cpu, meta, fake0, fake1, conv0;

static void setup(void) {
  ctx = coretest_open(coretest_fmt("%s[backend convdev]\nlibrary = %s\n",
                                   coretest_fake_section("fake", NULL),
                                   coretest_plugin("convdev")));
  cpu = coretest_dev(ctx, "cpu");
  meta = coretest_dev(ctx, "meta");
  fake0 = coretest_dev(ctx, "fake:0");
  fake1 = coretest_dev(ctx, "fake:1");
  conv0 = coretest_dev(ctx, "convdev:0");
}
static void teardown(void) { tstor_context_close(ctx); }

/* A new storage of `count` dtype elements holding values[i] (as doubles). */
static tstor_storage *make(tstor_device dev, tstor_dtype dt, const double *values, size_t count) {
  tstor_storage *s;
  ck_tstor_ok(tstor_typed_from_array(ctx, dev, dt, values, TSTOR_FLOAT64, count, &s));
  return s;
}

static double at(const tstor_storage *s, tstor_dtype dt, size_t i) {
  double v;
  ck_tstor_ok(tstor_typed_get_f64(s, dt, i, &v));
  return v;
}

/* ------------------------------------------------------------- sizes */

START_TEST(sizes_and_resize) {
  tstor_storage *s;
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_FLOAT64, 10, &s));
  size_t n;
  ck_tstor_ok(tstor_typed_size(s, TSTOR_FLOAT64, &n));
  ck_assert_uint_eq(n, 10);
  ck_assert_uint_eq(tstor_storage_nbytes(s), 80);
  ck_tstor_ok(tstor_typed_size(s, TSTOR_COMPLEX128, &n));
  ck_assert_uint_eq(n, 5);
  ck_tstor_ok(tstor_typed_size(s, TSTOR_UINT8, &n));
  ck_assert_uint_eq(n, 80);
  ck_tstor_ok(tstor_typed_resize(s, TSTOR_INT16, 3));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 6);
  ck_tstor_err(tstor_typed_size(s, TSTOR_INT32, &n), TSTOR_ESIZE);
  ck_last_error_has("not a whole number of int32");
  ck_tstor_err(tstor_typed_size(s, (tstor_dtype)35, &n), TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_size(NULL, TSTOR_INT8, &n), TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_size(s, TSTOR_INT8, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_resize(s, TSTOR_INT64, SIZE_MAX / 4), TSTOR_EOVERFLOW);
  ck_assert_uint_eq(tstor_storage_nbytes(s), 6);
  tstor_storage_release(s);
  ck_tstor_err(tstor_typed_new(ctx, cpu, TSTOR_INT64, SIZE_MAX / 4, &s), TSTOR_EOVERFLOW);
  ck_tstor_err(tstor_typed_new(ctx, cpu, (tstor_dtype)35, 1, &s), TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_new(ctx, cpu, TSTOR_INT8, 1, NULL), TSTOR_EINVAL);
  /* Meta storages have sizes. */
  ck_tstor_ok(tstor_typed_new(ctx, meta, TSTOR_COMPLEX64, 7, &s));
  ck_tstor_ok(tstor_typed_size(s, TSTOR_COMPLEX64, &n));
  ck_assert_uint_eq(n, 7);
  ck_tstor_ok(tstor_typed_resize(s, TSTOR_COMPLEX64, 9));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 72);
  tstor_storage_release(s);
}
END_TEST

/* ---------------------------------------------------- element access */

START_TEST(get_set_and_bounds) {
  tstor_device devs[] = {cpu, fake1, conv0};
  for (size_t k = 0; k < 3; k++) {
    tstor_storage *s;
    int32_t v[] = {10, 20, 30};
    ck_tstor_ok(tstor_typed_from_array(ctx, devs[k], TSTOR_INT32, v, TSTOR_INT32, 3, &s));
    int32_t x = 0;
    ck_tstor_ok(tstor_typed_get(s, TSTOR_INT32, 2, &x));
    ck_assert_int_eq(x, 30);
    x = -7;
    ck_tstor_ok(tstor_typed_set(s, TSTOR_INT32, 1, &x));
    ck_assert_double_eq(at(s, TSTOR_INT32, 1), -7);
    /* Out of range: a clear error and nothing changed. */
    ck_tstor_err(tstor_typed_get(s, TSTOR_INT32, 3, &x), TSTOR_ERANGE);
    ck_last_error_has("index 3 is out of range for a storage of 3 int32 elements");
    x = 99;
    ck_tstor_err(tstor_typed_set(s, TSTOR_INT32, 3, &x), TSTOR_ERANGE);
    ck_tstor_err(tstor_typed_set(s, TSTOR_INT32, SIZE_MAX, &x), TSTOR_ERANGE);
    ck_tstor_err(tstor_typed_set_f64(s, TSTOR_INT32, 5, 1.0), TSTOR_ERANGE);
    ck_tstor_err(tstor_typed_get(s, TSTOR_INT32, 0, NULL), TSTOR_EINVAL);
    ck_tstor_err(tstor_typed_set(s, TSTOR_INT32, 0, NULL), TSTOR_EINVAL);
    ck_tstor_err(tstor_typed_get_f64(s, TSTOR_INT32, 0, NULL), TSTOR_EINVAL);
    ck_tstor_err(tstor_typed_get_i64(s, TSTOR_INT32, 0, NULL), TSTOR_EINVAL);
    ck_tstor_err(tstor_typed_get(s, TSTOR_INT64, 0, &x), TSTOR_ESIZE); /* 12 bytes */
    int32_t all[3];
    ck_tstor_ok(tstor_typed_to_array(s, TSTOR_INT32, all, TSTOR_INT32, 3));
    ck_assert_int_eq(all[0], 10);
    ck_assert_int_eq(all[1], -7);
    ck_assert_int_eq(all[2], 30);
    /* By number: converted as a cast. */
    ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_INT32, 0, 3.7));
    ck_assert_double_eq(at(s, TSTOR_INT32, 0), 3);
    ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_INT32, 0, -3.7));
    int64_t i64;
    ck_tstor_ok(tstor_typed_get_i64(s, TSTOR_INT32, 0, &i64));
    ck_assert_int_eq(i64, -3);
    ck_tstor_ok(tstor_typed_set_i64(s, TSTOR_INT32, 2, INT64_C(0x100000005)));
    ck_assert_double_eq(at(s, TSTOR_INT32, 2), 5); /* wraps */
    /* The same bytes as bytes: a typed view is the storage plus a dtype. */
    ck_tstor_ok(tstor_typed_set_i64(s, TSTOR_UINT8, 0, 0x7f));
    ck_assert_double_eq(at(s, TSTOR_UINT8, 0), 0x7f);
    tstor_storage_release(s);
  }
}
END_TEST

START_TEST(numbers_by_dtype) {
  tstor_storage *s;
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_COMPLEX64, 2, &s));
  float c[2] = {1.5f, -2.0f};
  ck_tstor_ok(tstor_typed_set(s, TSTOR_COMPLEX64, 0, c));
  ck_assert_double_eq(at(s, TSTOR_COMPLEX64, 0), 1.5); /* the real part */
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_COMPLEX64, 1, 4.0));
  float back[2];
  ck_tstor_ok(tstor_typed_get(s, TSTOR_COMPLEX64, 1, back));
  ck_assert_float_eq(back[0], 4.0f);
  ck_assert_float_eq(back[1], 0.0f);
  tstor_storage_release(s);

  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_FLOAT16, 1, &s));
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_FLOAT16, 0, 65519.0));
  ck_assert_double_eq(at(s, TSTOR_FLOAT16, 0), 65504.0);
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_FLOAT16, 0, 65520.0));
  ck_assert(isinf(at(s, TSTOR_FLOAT16, 0)));
  tstor_storage_release(s);

  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_BOOL, 1, &s));
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_BOOL, 0, NAN));
  ck_assert_double_eq(at(s, TSTOR_BOOL, 0), 1);
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_BOOL, 0, -0.0));
  ck_assert_double_eq(at(s, TSTOR_BOOL, 0), 0);
  tstor_storage_release(s);

  /* Quantized storages read and write their integer codes, as PyTorch's do. */
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_QINT8, 2, &s));
  ck_tstor_ok(tstor_typed_set_i64(s, TSTOR_QINT8, 0, -5));
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_QINT8, 1, 200.0));
  ck_assert_double_eq(at(s, TSTOR_QINT8, 0), -5);
  ck_assert_double_eq(at(s, TSTOR_QINT8, 1), -56);
  ck_assert_double_eq(at(s, TSTOR_QUINT8, 1), 200);
  tstor_storage_release(s);

  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_FLOAT8_E4M3FN, 1, &s));
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_FLOAT8_E4M3FN, 0, 470.0));
  ck_assert_double_eq(at(s, TSTOR_FLOAT8_E4M3FN, 0), 448.0); /* no infinity: saturates */
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_FLOAT8_E4M3FN, 0, 0.1));
  ck_assert_double_eq(at(s, TSTOR_FLOAT8_E4M3FN, 0), 0.1015625);
  tstor_storage_release(s);
}
END_TEST

/* The dtypes of torch 2.x as storages: uint64 past int64, e8m0's scale,
 * and float4_e2m1fn_x2 and the bits types, whose bytes are kept, copied and
 * viewed but never read or written as numbers (refused in torch 2.x's
 * words). */
START_TEST(torch2_dtypes_by_element) {
  tstor_storage *s;
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_UINT64, 2, &s));
  uint64_t top = UINT64_MAX;
  ck_tstor_ok(tstor_typed_set(s, TSTOR_UINT64, 0, &top));
  ck_assert_double_eq(at(s, TSTOR_UINT64, 0), 18446744073709551615.0);
  int64_t i;
  ck_tstor_ok(tstor_typed_get_i64(s, TSTOR_UINT64, 0, &i));
  ck_assert_int_eq(i, -1); /* int64 keeps the low bits */
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_UINT64, 1, -1.0));
  ck_tstor_ok(tstor_typed_get(s, TSTOR_UINT64, 1, &top));
  ck_assert_uint_eq(top, UINT64_MAX);
  tstor_storage_release(s);

  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_FLOAT8_E8M0FNU, 1, &s));
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_FLOAT8_E8M0FNU, 0, -3.0)); /* no sign; 3 ties to 4 */
  ck_assert_double_eq(at(s, TSTOR_FLOAT8_E8M0FNU, 0), 4.0);
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_FLOAT8_E8M0FNU, 0, 0.0)); /* no zero either */
  ck_assert_double_eq(at(s, TSTOR_FLOAT8_E8M0FNU, 0), 0x1p-127);
  tstor_storage_release(s);

  /* bcomplex32 (torch 2.15): two bfloat16, each part swapped on its own; an
   * element reads and writes as a number, but torch has no fill for it. */
  const tstor_dtype bc = TSTOR_BCOMPLEX32;
  ck_tstor_ok(tstor_typed_new(ctx, cpu, bc, 2, &s));
  ck_tstor_ok(tstor_typed_set_f64(s, bc, 0, 1.00390625)); /* a tie: to even, 1.0 */
  ck_assert_double_eq(at(s, bc, 0), 1.0);
  uint16_t parts[2] = {0x4049, 0xbf80}; /* 3.140625 - 1j */
  ck_tstor_ok(tstor_typed_set(s, bc, 1, parts));
  ck_assert_double_eq(at(s, bc, 1), 3.140625);
  ck_tstor_ok(tstor_typed_byteswap(s, bc));
  ck_tstor_ok(tstor_typed_get(s, bc, 1, parts));
  ck_assert_uint_eq(parts[0], 0x4940);
  ck_assert_uint_eq(parts[1], 0x80bf);
  ck_tstor_err(tstor_typed_fill_f64(s, bc, 1.0), TSTOR_EDTYPE);
  ck_assert_str_eq(tstor_last_error(), "\"fill_cpu\" not implemented for 'BComplex32'");
  tstor_storage_release(s);

  const tstor_dtype f4 = TSTOR_FLOAT4_E2M1FN_X2;
  const unsigned char bytes[] = {0x12, 0xf7, 0x00};
  tstor_storage *copy;
  ck_tstor_ok(tstor_typed_from_array(ctx, cpu, f4, bytes, f4, 3, &s));
  ck_tstor_ok(tstor_typed_new(ctx, fake0, f4, 3, &copy));
  ck_tstor_ok(tstor_typed_copy(copy, f4, s, f4));
  unsigned char back[3], one;
  ck_tstor_ok(tstor_typed_to_array(copy, f4, back, f4, 3));
  ck_assert_int_eq(memcmp(back, bytes, 3), 0);
  ck_tstor_ok(tstor_typed_get(s, f4, 1, &one));
  ck_assert_uint_eq(one, 0xf7);
  ck_tstor_ok(tstor_typed_fill(copy, f4, &one));
  double d;
  /* every opaque dtype's elements, as numbers (the 3 bytes are whole
   * elements of each but bits16) */
  for (int dt = 0; dt < TSTOR_DTYPE_END; dt++) {
    const tstor_dtype_info *o = tstor_dtype_info_of((tstor_dtype)dt);
    if (!o || o->kind != TSTOR_KIND_OPAQUE || o->element_size != 1) continue;
    ck_tstor_err(tstor_typed_get_f64(s, o->dtype, 0, &d), TSTOR_EDTYPE);
    ck_assert_str_eq(tstor_last_error(), typedtest_refusal("item", o->name));
    ck_tstor_err(tstor_typed_get_i64(s, o->dtype, 0, &i), TSTOR_EDTYPE);
    ck_tstor_err(tstor_typed_set_f64(s, o->dtype, 0, 1.0), TSTOR_EDTYPE);
    ck_assert_str_eq(tstor_last_error(), typedtest_refusal("setitem", o->name));
    ck_tstor_err(tstor_typed_set_i64(s, o->dtype, 0, 1), TSTOR_EDTYPE);
    ck_tstor_err(tstor_typed_fill_f64(s, o->dtype, 1.0), TSTOR_EDTYPE);
    ck_assert_str_eq(tstor_last_error(), typedtest_refusal("fill", o->name));
  }
  ck_tstor_err(tstor_typed_to_array(s, f4, &d, TSTOR_FLOAT64, 3), TSTOR_EDTYPE);
  tstor_storage *f32;
  ck_tstor_err(tstor_typed_convert(s, f4, TSTOR_FLOAT32, &f32), TSTOR_EDTYPE);
  ck_assert_int_eq(memcmp(tstor_storage_data(s), bytes, 3), 0); /* untouched */
  tstor_storage_release(copy);
  tstor_storage_release(s);
}
END_TEST

/* -------------------------------------------------------------- arrays */

START_TEST(arrays_in_and_out) {
  const double v[] = {1.25, -2.5, 1e10, NAN};
  tstor_device devs[] = {cpu, fake0, conv0};
  for (size_t k = 0; k < 3; k++) {
    tstor_storage *s = make(devs[k], TSTOR_FLOAT32, v, 4);
    ck_assert_uint_eq(tstor_storage_nbytes(s), 16);
    int32_t i[4];
    ck_tstor_ok(tstor_typed_to_array(s, TSTOR_FLOAT32, i, TSTOR_INT32, 4));
    ck_assert_int_eq(i[0], 1);
    ck_assert_int_eq(i[1], -2);
    ck_assert_int_eq(i[2], INT32_MIN);
    ck_assert_int_eq(i[3], INT32_MIN);
    double d[4];
    ck_tstor_ok(tstor_typed_to_array(s, TSTOR_FLOAT32, d, TSTOR_FLOAT64, 4));
    ck_assert_double_eq(d[1], -2.5);
    ck_assert(isnan(d[3]));
    ck_tstor_err(tstor_typed_to_array(s, TSTOR_FLOAT32, d, TSTOR_FLOAT64, 3), TSTOR_ESIZE);
    ck_tstor_err(tstor_typed_to_array(s, TSTOR_FLOAT32, NULL, TSTOR_FLOAT64, 4), TSTOR_EINVAL);
    ck_tstor_err(tstor_typed_to_array(s, TSTOR_FLOAT32, d, TSTOR_QINT32, 4), TSTOR_EDTYPE);
    tstor_storage_release(s);
  }
  tstor_storage *s;
  ck_tstor_err(tstor_typed_from_array(ctx, cpu, TSTOR_QUINT8, v, TSTOR_FLOAT64, 4, &s),
               TSTOR_EDTYPE);
  ck_last_error_has("quint8");
  ck_tstor_err(tstor_typed_from_array(ctx, cpu, TSTOR_FLOAT32, NULL, TSTOR_FLOAT64, 4, &s),
               TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_from_array(ctx, cpu, TSTOR_FLOAT32, v, TSTOR_FLOAT64, 4, NULL),
               TSTOR_EINVAL);
  /* Empty, and on meta (sizes only). */
  ck_tstor_ok(tstor_typed_from_array(ctx, cpu, TSTOR_FLOAT32, NULL, TSTOR_FLOAT64, 0, &s));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 0);
  tstor_storage_release(s);
  ck_tstor_ok(tstor_typed_from_array(ctx, meta, TSTOR_INT16, v, TSTOR_FLOAT64, 4, &s));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 8);
  double d[4];
  ck_tstor_err(tstor_typed_to_array(s, TSTOR_INT16, d, TSTOR_FLOAT64, 4), TSTOR_ENODATA);
  ck_last_error_has("no data");
  int16_t x = 1;
  ck_tstor_err(tstor_typed_get(s, TSTOR_INT16, 0, &x), TSTOR_ENODATA);
  ck_tstor_err(tstor_typed_get_f64(s, TSTOR_INT16, 0, d), TSTOR_ENODATA);
  /* Writes succeed and write nothing, as PyTorch's x[i] = v on meta. */
  ck_tstor_ok(tstor_typed_set(s, TSTOR_INT16, 3, &x));
  ck_tstor_ok(tstor_typed_set_f64(s, TSTOR_INT16, 0, 2.5));
  ck_tstor_ok(tstor_typed_set_i64(s, TSTOR_INT16, 1, -7));
  ck_assert_ptr_null(tstor_storage_data(s));
  ck_tstor_err(tstor_typed_set(s, TSTOR_INT16, 4, &x), TSTOR_ERANGE); /* checked all the same */
  ck_tstor_err(tstor_typed_set(s, TSTOR_INT16, 0, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_get(s, TSTOR_INT16, 9, &x), TSTOR_ERANGE); /* bounds first */
  tstor_storage_release(s);
}
END_TEST

/* ---------------------------------------------------------------- fill */

START_TEST(fill_every_size) {
  const tstor_dtype dts[] = {TSTOR_BOOL, TSTOR_INT16, TSTOR_FLOAT32, TSTOR_INT64,
                             TSTOR_COMPLEX128};
  tstor_device devs[] = {cpu, fake1};
  for (size_t k = 0; k < 2; k++)
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
      size_t es = tstor_dtype_size(dts[t]);
      unsigned char value[16], got[16];
      for (size_t b = 0; b < es; b++) value[b] = (unsigned char)(0x11 * (b + 1));
      if (dts[t] == TSTOR_BOOL) value[0] = 1;
      tstor_storage *s;
      ck_tstor_ok(tstor_typed_new(ctx, devs[k], dts[t], 1001, &s));
      ck_tstor_ok(tstor_typed_fill(s, dts[t], value));
      for (size_t i = 0; i < 1001; i += 97) {
        ck_tstor_ok(tstor_typed_get(s, dts[t], i, got));
        ck_assert_int_eq(memcmp(got, value, es), 0);
      }
      ck_tstor_ok(tstor_typed_get(s, dts[t], 1000, got));
      ck_assert_int_eq(memcmp(got, value, es), 0);
      ck_tstor_err(tstor_typed_fill(s, dts[t], NULL), TSTOR_EINVAL);
      tstor_storage_release(s);
    }
  /* Large enough for the worker threads (3 MiB) and for streaming stores
   * (16 MiB and up, from an odd element so the start is not on a line), every
   * byte checked, and nothing written past the end. */
  int old = tstor_set_num_threads(3);
  tstor_storage *s, *base;
  const size_t sizes[] = {((size_t)3 << 20) + 5, ((size_t)17 << 20) / 16 + 3};
  for (size_t k = 0; k < 2; k++) {
    size_t n = sizes[k];
    ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_COMPLEX64, n + 2, &base));
    memset(tstor_storage_data(base), 0x77, (n + 2) * 8);
    ck_tstor_ok(tstor_typed_view(base, TSTOR_COMPLEX64, 1, n, &s));
    float value[2] = {1.5f, -2.0f};
    ck_tstor_ok(tstor_typed_fill(s, TSTOR_COMPLEX64, value));
    const float *p = tstor_storage_data(s);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += p[2 * i] != 1.5f || p[2 * i + 1] != -2.0f;
    ck_assert_uint_eq(wrong, 0);
    const unsigned char *raw = tstor_storage_data(base);
    for (size_t i = 0; i < 8; i++) {
      ck_assert_int_eq(raw[i], 0x77);
      ck_assert_int_eq(raw[(n + 1) * 8 + i], 0x77);
    }
    tstor_storage_release(s);
    tstor_storage_release(base);
  }
  tstor_set_num_threads(old);
  float one = 1.5f;
  /* Meta: no data, and a fill succeeds writing nothing, as the untyped fill
   * and PyTorch's fill_ on meta do; its arguments are checked all the same. */
  ck_tstor_ok(tstor_typed_new(ctx, meta, TSTOR_FLOAT32, 4, &s));
  ck_tstor_ok(tstor_typed_fill(s, TSTOR_FLOAT32, &one));
  ck_tstor_ok(tstor_storage_fill(s, 7));
  ck_assert_ptr_null(tstor_storage_data(s));
  ck_tstor_err(tstor_typed_fill(s, TSTOR_FLOAT32, NULL), TSTOR_EINVAL);
  tstor_storage_release(s);
  ck_tstor_ok(tstor_typed_new(ctx, meta, TSTOR_FLOAT32, 3, &s)); /* 12 bytes: 1.5 float64s */
  ck_tstor_err(tstor_typed_fill(s, TSTOR_FLOAT64, &one), TSTOR_ESIZE);
  tstor_storage_release(s);
}
END_TEST

/* A fill from a number converts it as every conversion does (PyTorch's
 * IntStorage.fill_(3.7) fills 3; -1.0 into uint8 is 255): each element holds
 * exactly the bytes tstor_dtype_convert makes of it, for every dtype. */
START_TEST(fill_from_a_number) {
  const double values[] = {3.7, -1.0, 1e5, -0.0, 0.5, 300.0};
  for (int dt = 0; dt < TSTOR_DTYPE_END; dt++) {
    const tstor_dtype_info *d = tstor_dtype_info_of((tstor_dtype)dt);
    if (!d || dt == TSTOR_BCOMPLEX32) continue; /* no fill in torch (torch2_dtypes_by_element) */
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
      unsigned char want[16];
      if (tstor_dtype_convert(want, (tstor_dtype)dt, &values[v], TSTOR_FLOAT64, 1) != 0) {
        tstor_storage *q;
        ck_tstor_ok(tstor_typed_new(ctx, cpu, (tstor_dtype)dt, 2, &q));
        ck_assert_int_ne(tstor_typed_fill_f64(q, (tstor_dtype)dt, values[v]), 0); /* refused alike */
        tstor_storage_release(q);
        continue;
      }
      tstor_storage *s;
      ck_tstor_ok(tstor_typed_new(ctx, cpu, (tstor_dtype)dt, 3, &s));
      ck_tstor_ok(tstor_typed_fill_f64(s, (tstor_dtype)dt, values[v]));
      for (int i = 0; i < 3; i++)
        ck_assert_msg(memcmp((unsigned char *)tstor_storage_data(s) + i * d->element_size, want, d->element_size) == 0,
                      "%s fill %g", d->name, values[v]);
      tstor_storage_release(s);
    }
  }
  tstor_storage *s;
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_INT32, 2, &s));
  ck_tstor_ok(tstor_typed_fill_f64(s, TSTOR_INT32, 3.7));
  ck_assert_int_eq(((int32_t *)tstor_storage_data(s))[1], 3);
  ck_tstor_err(tstor_typed_fill_f64(s, (tstor_dtype)999, 1.0), TSTOR_EINVAL);
  tstor_storage_release(s);
}
END_TEST

/* ---------------------------------------------------- buffers and order */

START_TEST(from_buffer_byte_orders) {
  /* torch.ShortStorage.from_buffer(b'\x01\x02', 'big') is 258. */
  const unsigned char two[] = {0x01, 0x02};
  tstor_device devs[] = {cpu, fake0};
  for (size_t k = 0; k < 2; k++) {
    tstor_storage *s;
    ck_tstor_ok(tstor_typed_from_buffer(ctx, devs[k], TSTOR_INT16, two, 2, TSTOR_ORDER_BIG, &s));
    ck_assert_double_eq(at(s, TSTOR_INT16, 0), 258);
    tstor_storage_release(s);
    ck_tstor_ok(
        tstor_typed_from_buffer(ctx, devs[k], TSTOR_INT16, two, 2, TSTOR_ORDER_LITTLE, &s));
    ck_assert_double_eq(at(s, TSTOR_INT16, 0), 513);
    tstor_storage_release(s);
    ck_tstor_ok(tstor_typed_from_buffer(ctx, devs[k], TSTOR_UINT8, two, 2, TSTOR_ORDER_BIG, &s));
    ck_assert_double_eq(at(s, TSTOR_UINT8, 1), 2);
    tstor_storage_release(s);
    /* complex64, big-endian: each float on its own (1.0f, 2.0f). */
    const unsigned char c[] = {0x3f, 0x80, 0, 0, 0x40, 0, 0, 0};
    ck_tstor_ok(tstor_typed_from_buffer(ctx, devs[k], TSTOR_COMPLEX64, c, 8, TSTOR_ORDER_BIG, &s));
    float parts[2];
    ck_tstor_ok(tstor_typed_get(s, TSTOR_COMPLEX64, 0, parts));
    ck_assert_float_eq(parts[0], 1.0f);
    ck_assert_float_eq(parts[1], 2.0f);
    tstor_storage_release(s);
  }
  tstor_storage *s = (tstor_storage *)&s; /* set NULL by a failure */
  ck_tstor_err(tstor_typed_from_buffer(ctx, cpu, TSTOR_INT32, two, 2, TSTOR_ORDER_BIG, &s),
               TSTOR_ESIZE);
  ck_tstor_err(tstor_typed_from_buffer(ctx, cpu, TSTOR_INT16, two, 2, (tstor_byte_order)7, &s),
               TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_from_buffer(ctx, cpu, TSTOR_INT16, NULL, 2, TSTOR_ORDER_BIG, &s),
               TSTOR_EINVAL);
  ck_assert_ptr_null(s); /* a failed call leaves its output NULL */
  ck_tstor_ok(tstor_typed_from_buffer(ctx, meta, TSTOR_INT16, two, 2, TSTOR_ORDER_BIG, &s));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 2);
  tstor_storage_release(s);
}
END_TEST

START_TEST(byteswap_by_dtype) {
  tstor_device devs[] = {cpu, fake1};
  for (size_t k = 0; k < 2; k++) {
    const unsigned char bytes[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const struct {
      tstor_dtype dt;
      unsigned char want[16];
    } cases[] = {
        {TSTOR_UINT8, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
        {TSTOR_BOOL, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
        {TSTOR_INT16, {2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15}},
        {TSTOR_FLOAT32, {4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9, 16, 15, 14, 13}},
        {TSTOR_INT64, {8, 7, 6, 5, 4, 3, 2, 1, 16, 15, 14, 13, 12, 11, 10, 9}},
        {TSTOR_COMPLEX32, {2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15}},
        {TSTOR_COMPLEX64, {4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9, 16, 15, 14, 13}},
        {TSTOR_COMPLEX128, {8, 7, 6, 5, 4, 3, 2, 1, 16, 15, 14, 13, 12, 11, 10, 9}},
        {TSTOR_QINT32, {4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9, 16, 15, 14, 13}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      tstor_storage *s;
      ck_tstor_ok(tstor_typed_from_buffer(ctx, devs[k], TSTOR_UINT8, bytes, 16,
                                          TSTOR_ORDER_NATIVE, &s));
      ck_tstor_ok(tstor_typed_byteswap(s, cases[c].dt));
      unsigned char got[16];
      ck_tstor_ok(tstor_typed_to_array(s, TSTOR_UINT8, got, TSTOR_UINT8, 16));
      ck_assert_msg(memcmp(got, cases[c].want, 16) == 0, "byteswap as %s",
                    tstor_dtype_name(cases[c].dt));
      tstor_storage_release(s);
    }
  }
  tstor_storage *s;
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_UINT8, 6, &s));
  ck_tstor_err(tstor_typed_byteswap(s, TSTOR_INT32), TSTOR_ESIZE);
  tstor_storage_release(s);
  ck_tstor_ok(tstor_typed_new(ctx, meta, TSTOR_INT32, 6, &s));
  ck_tstor_err(tstor_typed_byteswap(s, TSTOR_INT32), TSTOR_ENODATA);
  tstor_storage_release(s);
}
END_TEST

/* ------------------------------------------------------------- strings */

START_TEST(strings_with_nuls) {
  tstor_device devs[] = {cpu, fake0};
  for (size_t k = 0; k < 2; k++) {
    tstor_storage *s;
    ck_tstor_ok(tstor_typed_new(ctx, devs[k], TSTOR_INT8, 0, &s));
    const char text[] = "a\0b\0c"; /* 5 bytes, two NULs */
    ck_tstor_ok(tstor_typed_set_string(s, TSTOR_INT8, text, 5));
    ck_assert_uint_eq(tstor_storage_nbytes(s), 5);
    char buf[8];
    size_t len = 0;
    ck_tstor_ok(tstor_typed_get_string(s, TSTOR_UINT8, buf, sizeof buf, &len));
    ck_assert_uint_eq(len, 5);
    ck_assert_int_eq(memcmp(buf, text, 5), 0);
    /* Too small: ERANGE with the length; NULL/0 asks for it and gets it. */
    ck_tstor_err(tstor_typed_get_string(s, TSTOR_INT8, buf, 4, &len), TSTOR_ERANGE);
    ck_assert_uint_eq(len, 5);
    len = 0;
    ck_tstor_ok(tstor_typed_get_string(s, TSTOR_INT8, NULL, 0, &len)); /* the length alone */
    ck_assert_uint_eq(len, 5);
    ck_tstor_err(tstor_typed_set_string(s, TSTOR_INT16, "ab", 2), TSTOR_EINVAL);
    ck_last_error_has("only uint8 and int8");
    ck_tstor_err(tstor_typed_get_string(s, TSTOR_FLOAT32, buf, sizeof buf, &len), TSTOR_EINVAL);
    ck_tstor_err(tstor_typed_set_string(s, TSTOR_INT8, NULL, 3), TSTOR_EINVAL);
    ck_assert_uint_eq(tstor_storage_nbytes(s), 5); /* unchanged by the failures */
    ck_tstor_ok(tstor_typed_set_string(s, TSTOR_INT8, "", 0));
    ck_assert_uint_eq(tstor_storage_nbytes(s), 0);
    tstor_storage_release(s);
  }
  /* A storage that cannot be resized keeps its size and bytes. */
  tstor_storage *base, *view;
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_UINT8, 8, &base));
  ck_tstor_ok(tstor_typed_set_string(base, TSTOR_UINT8, "abcdefgh", 8));
  ck_tstor_ok(tstor_typed_view(base, TSTOR_UINT8, 2, 3, &view));
  ck_tstor_err(tstor_typed_set_string(view, TSTOR_UINT8, "xxxxx", 5), TSTOR_ENOTSUP);
  ck_tstor_ok(tstor_typed_set_string(view, TSTOR_UINT8, "XYZ", 3)); /* same size: fine */
  char buf[8];
  size_t len;
  ck_tstor_ok(tstor_typed_get_string(base, TSTOR_UINT8, buf, sizeof buf, &len));
  ck_assert_int_eq(memcmp(buf, "abXYZfgh", 8), 0);
  tstor_storage_release(view);
  tstor_storage_release(base);
  tstor_storage *m;
  ck_tstor_ok(tstor_typed_new(ctx, meta, TSTOR_UINT8, 3, &m));
  /* A write: the size follows the string, no bytes are written. */
  ck_tstor_ok(tstor_typed_set_string(m, TSTOR_UINT8, "abcd", 4));
  ck_assert_uint_eq(tstor_storage_nbytes(m), 4);
  ck_assert_ptr_null(tstor_storage_data(m));
  ck_tstor_err(tstor_typed_get_string(m, TSTOR_UINT8, buf, sizeof buf, &len), TSTOR_ENODATA);
  tstor_storage_release(m);
}
END_TEST

/* --------------------------------------------------------------- views */

START_TEST(views_share_bytes) {
  const double v[] = {0, 1, 2, 3, 4, 5, 6, 7};
  tstor_storage *s = make(cpu, TSTOR_INT32, v, 8), *view;
  ck_tstor_ok(tstor_typed_view(s, TSTOR_INT32, 2, 4, &view));
  ck_assert_uint_eq(tstor_storage_nbytes(view), 16);
  ck_assert_double_eq(at(view, TSTOR_INT32, 0), 2);
  ck_tstor_ok(tstor_typed_set_f64(view, TSTOR_INT32, 3, -1));
  ck_assert_double_eq(at(s, TSTOR_INT32, 5), -1);
  tstor_storage_release(view);
  ck_tstor_err(tstor_typed_view(s, TSTOR_INT32, 6, 3, &view), TSTOR_ERANGE);
  ck_tstor_err(tstor_typed_view(s, TSTOR_INT32, 9, 0, &view), TSTOR_ERANGE);
  ck_tstor_err(tstor_typed_view(s, TSTOR_INT32, 1, SIZE_MAX, &view), TSTOR_ERANGE);
  ck_tstor_ok(tstor_typed_view(s, TSTOR_INT32, 8, 0, &view));
  tstor_storage_release(view);
  /* Overlapping converting copies between views of the same bytes: int32 ->
   * int64 spreading over its own source, and back. */
  tstor_storage *wide, *narrow;
  ck_tstor_ok(tstor_typed_view(s, TSTOR_INT32, 0, 4, &narrow)); /* elements 0..3 */
  ck_tstor_ok(tstor_typed_view(s, TSTOR_INT64, 0, 4, &wide));   /* all 32 bytes */
  ck_tstor_ok(tstor_typed_copy(wide, TSTOR_INT64, narrow, TSTOR_INT32));
  for (int i = 0; i < 4; i++) ck_assert_double_eq(at(wide, TSTOR_INT64, (size_t)i), i);
  ck_tstor_ok(tstor_typed_set_f64(wide, TSTOR_INT64, 3, 33));
  ck_tstor_ok(tstor_typed_copy(narrow, TSTOR_INT32, wide, TSTOR_INT64));
  ck_assert_double_eq(at(s, TSTOR_INT32, 3), 33);
  ck_assert_double_eq(at(s, TSTOR_INT32, 1), 1);
  /* In place, same size: float32 over its own int32 bytes. */
  ck_tstor_ok(tstor_typed_copy(narrow, TSTOR_FLOAT32, narrow, TSTOR_INT32));
  ck_assert_double_eq(at(narrow, TSTOR_FLOAT32, 3), 33.0);
  tstor_storage_release(wide);
  tstor_storage_release(narrow);
  tstor_storage_release(s);
  /* A view at an odd byte offset: misaligned elements work too. */
  tstor_storage *bytes, *odd, *dbl;
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_UINT8, 17, &bytes));
  ck_tstor_ok(tstor_storage_view(bytes, 1, 16, &odd));
  for (size_t i = 0; i < 4; i++) ck_tstor_ok(tstor_typed_set_f64(odd, TSTOR_FLOAT32, i, 0.5 + (double)i));
  ck_tstor_ok(tstor_typed_convert(odd, TSTOR_FLOAT32, TSTOR_FLOAT64, &dbl));
  for (size_t i = 0; i < 4; i++) ck_assert_double_eq(at(dbl, TSTOR_FLOAT64, i), 0.5 + (double)i);
  ck_tstor_ok(tstor_typed_copy(odd, TSTOR_INT32, odd, TSTOR_FLOAT32));
  ck_assert_double_eq(at(odd, TSTOR_INT32, 3), 3);
  tstor_storage_release(dbl);
  tstor_storage_release(odd);
  tstor_storage_release(bytes);
}
END_TEST

/* ------------------------------------------------------ converting copy */

START_TEST(copy_between_devices) {
  const double v[] = {1.5, -2.25, 65519.0, 1e-8, NAN, -INFINITY, 3e38, 7};
  const size_t n = sizeof v / sizeof v[0];
  float want[8];
  for (size_t i = 0; i < n; i++) want[i] = (float)v[i];
  tstor_device devs[] = {cpu, fake0, fake1, conv0};
  for (size_t a = 0; a < 4; a++)
    for (size_t b = 0; b < 4; b++) {
      tstor_storage *src = make(devs[a], TSTOR_FLOAT64, v, n), *mid, *dst;
      ck_tstor_ok(tstor_typed_new(ctx, devs[b], TSTOR_FLOAT16, n, &mid));
      ck_tstor_ok(tstor_typed_copy(mid, TSTOR_FLOAT16, src, TSTOR_FLOAT64));
      ck_tstor_ok(tstor_typed_convert(mid, TSTOR_FLOAT16, TSTOR_FLOAT32, &dst));
      ck_assert_int_eq(tstor_storage_device(dst).type, devs[b].type);
      float got[8];
      ck_tstor_ok(tstor_typed_to_array(dst, TSTOR_FLOAT32, got, TSTOR_FLOAT32, n));
      uint16_t h[8];
      ck_tstor_ok(tstor_dtype_convert(h, TSTOR_FLOAT16, want, TSTOR_FLOAT32, n));
      float exp[8];
      ck_tstor_ok(tstor_dtype_convert(exp, TSTOR_FLOAT32, h, TSTOR_FLOAT16, n));
      ck_assert_msg(memcmp(got, exp, sizeof got) == 0, "copy %zu -> %zu", a, b);
      /* Same dtype between devices: bytes. */
      tstor_storage *same;
      ck_tstor_ok(tstor_typed_new(ctx, devs[a], TSTOR_FLOAT32, n, &same));
      ck_tstor_ok(tstor_typed_copy(same, TSTOR_FLOAT32, dst, TSTOR_FLOAT32));
      ck_tstor_ok(tstor_typed_to_array(same, TSTOR_FLOAT32, got, TSTOR_FLOAT32, n));
      ck_assert_int_eq(memcmp(got, exp, sizeof got), 0);
      tstor_storage_release(same);
      tstor_storage_release(src);
      tstor_storage_release(mid);
      tstor_storage_release(dst);
    }
}
END_TEST

START_TEST(copy_errors_leave_destination) {
  const double v[] = {1, 2, 3};
  tstor_storage *a = make(cpu, TSTOR_INT32, v, 3), *b = make(fake0, TSTOR_INT64, v, 2), *m;
  ck_tstor_err(tstor_typed_copy(b, TSTOR_INT64, a, TSTOR_INT32), TSTOR_ESIZE);
  ck_last_error_has("source has 3 int32 elements, destination 2 int64");
  ck_tstor_err(tstor_typed_copy(a, TSTOR_QINT32, a, TSTOR_INT32), TSTOR_EDTYPE);
  ck_tstor_err(tstor_typed_copy(a, TSTOR_INT32, NULL, TSTOR_INT32), TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_copy(a, (tstor_dtype)35, a, TSTOR_INT32), TSTOR_EINVAL);
  ck_assert_double_eq(at(b, TSTOR_INT64, 1), 2);
  ck_assert_double_eq(at(a, TSTOR_INT32, 2), 3);
  /* Meta: a meta destination is size-checked only; a meta source has no data. */
  ck_tstor_ok(tstor_typed_new(ctx, meta, TSTOR_FLOAT64, 3, &m));
  ck_tstor_ok(tstor_typed_copy(m, TSTOR_FLOAT64, a, TSTOR_INT32));
  ck_tstor_err(tstor_typed_copy(a, TSTOR_INT32, m, TSTOR_FLOAT64), TSTOR_ENODATA);
  tstor_storage *c;
  ck_tstor_ok(tstor_typed_convert(m, TSTOR_FLOAT64, TSTOR_INT16, &c));
  ck_assert_uint_eq(tstor_storage_nbytes(c), 6);
  ck_assert_int_eq(tstor_storage_device(c).type, meta.type);
  tstor_storage_release(c);
  c = (tstor_storage *)&c;
  ck_tstor_err(tstor_typed_convert(a, TSTOR_INT32, TSTOR_QUINT8, &c), TSTOR_EDTYPE);
  ck_assert_ptr_null(c); /* a failed call leaves its output NULL */
  /* A different context. */
  tstor_context *other = coretest_open(NULL);
  tstor_storage *o;
  ck_tstor_ok(tstor_typed_new(other, coretest_dev(other, "cpu"), TSTOR_INT32, 3, &o));
  ck_tstor_err(tstor_typed_copy(o, TSTOR_INT32, a, TSTOR_INT32), TSTOR_EINVAL);
  ck_last_error_has("different contexts");
  tstor_storage_release(o);
  tstor_context_close(other);
  tstor_storage_release(m);
  tstor_storage_release(a);
  tstor_storage_release(b);
}
END_TEST

static long *convert_calls(void) {
  void *h = dlopen(coretest_plugin("convdev"), RTLD_NOW | RTLD_NOLOAD);
  ck_assert_ptr_nonnull(h);
  long *p = dlsym(h, "convdev_convert_calls");
  dlclose(h); /* still loaded by the context */
  ck_assert_ptr_nonnull(p);
  return p;
}

START_TEST(device_convert_op) {
  volatile long *calls = convert_calls();
  long before = *calls;
  const double v[] = {0.1, -3, 1e30, NAN};
  tstor_storage *f = make(conv0, TSTOR_FLOAT32, v, 4), *d;
  ck_tstor_ok(tstor_typed_new(ctx, conv0, TSTOR_FLOAT64, 4, &d));
  ck_tstor_ok(tstor_typed_copy(d, TSTOR_FLOAT64, f, TSTOR_FLOAT32));
  ck_assert_int_eq(*calls, before + 1); /* the device did it */
  ck_assert_double_eq(at(d, TSTOR_FLOAT64, 0), (double)0.1f);
  ck_assert(isnan(at(d, TSTOR_FLOAT64, 3)));
  /* A pair it declines is staged, with the same results. */
  tstor_storage *h;
  ck_tstor_ok(tstor_typed_new(ctx, conv0, TSTOR_FLOAT16, 4, &h));
  ck_tstor_ok(tstor_typed_copy(h, TSTOR_FLOAT16, d, TSTOR_FLOAT64));
  ck_assert_int_eq(*calls, before + 1);
  ck_assert_double_eq(at(h, TSTOR_FLOAT16, 1), -3);
  ck_assert(isinf(at(h, TSTOR_FLOAT16, 2)));
  /* Different devices of the type: staged, not the op. */
  tstor_storage *d1;
  ck_tstor_ok(tstor_typed_new(ctx, coretest_dev(ctx, "convdev:1"), TSTOR_FLOAT64, 4, &d1));
  ck_tstor_ok(tstor_typed_copy(d1, TSTOR_FLOAT64, f, TSTOR_FLOAT32));
  ck_assert_int_eq(*calls, before + 1);
  ck_assert_double_eq(at(d1, TSTOR_FLOAT64, 1), -3);
  /* The op's failure reaches the caller with its message. */
  tstor_storage *f13, *d13;
  ck_tstor_ok(tstor_typed_new(ctx, conv0, TSTOR_FLOAT32, 13, &f13));
  ck_tstor_ok(tstor_typed_new(ctx, conv0, TSTOR_FLOAT64, 13, &d13));
  ck_tstor_err(tstor_typed_copy(d13, TSTOR_FLOAT64, f13, TSTOR_FLOAT32), TSTOR_EBACKEND);
  ck_last_error_has("convdev: injected failure");
  tstor_storage_release(f13);
  tstor_storage_release(d13);
  tstor_storage_release(d1);
  tstor_storage_release(h);
  tstor_storage_release(d);
  tstor_storage_release(f);
}
END_TEST

START_TEST(large_copies_split_over_threads) {
  int old = tstor_set_num_threads(2);
  size_t n = ((size_t)5 << 20) + 3;
  tstor_storage *a, *b, *c;
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_INT32, n, &a));
  int32_t *p = tstor_storage_data(a);
  for (size_t i = 0; i < n; i++) p[i] = (int32_t)(i * 2654435761u);
  ck_tstor_ok(tstor_typed_convert(a, TSTOR_INT32, TSTOR_FLOAT64, &b));
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_INT32, n, &c));
  ck_tstor_ok(tstor_typed_copy(c, TSTOR_INT32, b, TSTOR_FLOAT64));
  ck_assert_int_eq(memcmp(tstor_storage_data(c), p, n * 4), 0);
  ck_tstor_ok(tstor_typed_copy(c, TSTOR_INT32, a, TSTOR_INT32)); /* same dtype */
  ck_assert_int_eq(memcmp(tstor_storage_data(c), p, n * 4), 0);
  tstor_storage_release(a);
  tstor_storage_release(b);
  tstor_storage_release(c);
  tstor_set_num_threads(old);
}
END_TEST

START_TEST(printing_other_devices) {
  const double v[] = {1, 2.5};
  tstor_storage *s = make(fake1, TSTOR_FLOAT32, v, 2);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_tstor_ok(tstor_typed_print(f, s, TSTOR_FLOAT32, 0));
  ck_tstor_ok(tstor_typed_print(f, s, TSTOR_FLOAT32, TSTOR_PRINT_TORCH7));
  fclose(f);
  ck_assert_str_eq(text,
                   " 1.0\n 2.5\n[torch.storage.TypedStorage(dtype=torch.float32, device=fake:1) of "
                   "size 2]\n 1.0000\n 2.5000\n[torch.FloatStorage of size 2 on fake:1]\n");
  free(text);
  tstor_storage_release(s);
}
END_TEST

/* An untyped storage prints as PyTorch 1.13 prints an UntypedStorage (the
 * expected strings are its repr() of the same bytes), and a tensor's
 * get_device() is -1 where PyTorch's is: on cpu and meta. */
START_TEST(printing_untyped_and_get_device) {
  const unsigned char bytes[] = {255, 0, 17, 128};
  tstor_storage *s, *e, *m;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 4, &s));
  memcpy(tstor_storage_data(s), bytes, 4);
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 0, &e));
  ck_tstor_ok(tstor_storage_new(ctx, meta, 2, &m));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_tstor_ok(tstor_typed_print(f, s, TSTOR_UINT8, TSTOR_PRINT_UNTYPED));
  ck_tstor_ok(tstor_typed_print(f, e, TSTOR_UINT8, TSTOR_PRINT_UNTYPED));
  ck_tstor_ok(tstor_typed_print(f, m, TSTOR_UINT8, TSTOR_PRINT_UNTYPED));
  ck_tstor_err(tstor_typed_print(f, s, TSTOR_INT32, TSTOR_PRINT_UNTYPED), TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_print(f, s, TSTOR_UINT8, TSTOR_PRINT_UNTYPED | TSTOR_PRINT_TORCH7), TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_print(f, s, TSTOR_UINT8, 1u << 7), TSTOR_EINVAL);
  fclose(f);
  ck_assert_str_eq(text, " 255\n 0\n 17\n 128\n[torch.storage.UntypedStorage(device=cpu) of size 4]\n"
                         " \n[torch.storage.UntypedStorage(device=cpu) of size 0]\n"
                         "...\n[torch.storage.UntypedStorage(device=meta) of size 2]\n");
  free(text);
  tstor_tensor *t;
  int64_t two = 2;
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_UINT8, 0, 1, &two, NULL, &t));
  ck_assert_int_eq(tstor_tensor_get_device(t), -1);
  tstor_tensor_release(t);
  ck_tstor_ok(tstor_tensor_on_storage(m, TSTOR_UINT8, 0, 1, &two, NULL, &t));
  ck_assert_int_eq(tstor_tensor_get_device(t), -1);
  tstor_tensor_release(t);
  tstor_storage *g;
  ck_tstor_ok(tstor_storage_new(ctx, fake1, 2, &g));
  ck_tstor_ok(tstor_tensor_on_storage(g, TSTOR_UINT8, 0, 1, &two, NULL, &t));
  ck_assert_int_eq(tstor_tensor_get_device(t), 1); /* a device with indices: its index */
  tstor_tensor_release(t);
  tstor_storage_release(g);
  tstor_storage_release(s);
  tstor_storage_release(e);
  tstor_storage_release(m);
}
END_TEST

/* ------------------------------------------- Torch7's Storage documentation */

static char *printed(const tstor_storage *s, tstor_dtype dt) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_tstor_ok(tstor_typed_print(f, s, dt, TSTOR_PRINT_TORCH7));
  fclose(f);
  return text;
}

/* Torch7's own format (Storage__printformat in its Tensor.lua): one format
 * for the whole storage, from the magnitudes of its elements. Each expected
 * text follows that code by hand; the comment gives expMin and expMax
 * (floor(log10(|x|)) + 1 of the smallest and largest magnitude). */
START_TEST(torch7_number_formats) {
  static const struct {
    tstor_dtype dtype;
    double v[3];
    size_t n;
    const char *text;
  } cases[] = {
      /* integral, expMax 1: "%2d" */
      {TSTOR_INT32, {-5, 3, 0}, 3, "-5\n 3\n 0\n[torch.IntStorage of size 3]\n"},
      {TSTOR_FLOAT64, {0, 0}, 2, " 0\n 0\n[torch.DoubleStorage of size 2]\n"},
      /* integral, expMax 7: "%8d" */
      {TSTOR_FLOAT64, {1e6, 2.5e6}, 2, " 1000000\n 2500000\n[torch.DoubleStorage of size 2]\n"},
      /* integral with more than 9 digits (expMax 11): "%11.4e" */
      {TSTOR_INT64, {1, 12345678901.0}, 2,
       " 1.0000e+00\n 1.2346e+10\n[torch.LongStorage of size 2]\n"},
      /* inf equals its ceil: integral, expMax inf > 9 */
      {TSTOR_FLOAT32, {1, INFINITY}, 2, " 1.0000e+00\n        inf\n[torch.FloatStorage of size 2]\n"},
      /* torch.range(2, 5, 1.2) in Torch7's maths documentation, printed from
       * its storage by the same function: expMin = expMax = 1, "%7.4f" */
      {TSTOR_FLOAT64, {2, 3.2, 4.4}, 3, " 2.0000\n 3.2000\n 4.4000\n[torch.DoubleStorage of size 3]\n"},
      /* expMax 0: width 7 */
      {TSTOR_FLOAT64, {0.5, 0.25}, 2, " 0.5000\n 0.2500\n[torch.DoubleStorage of size 2]\n"},
      /* a float's own double: 0.1f is 0.100000001490116..., expMax 0 */
      {TSTOR_FLOAT32, {0.1, 1.5}, 2, " 0.1000\n 1.5000\n[torch.FloatStorage of size 2]\n"},
      /* expMax 3: width 9 */
      {TSTOR_FLOAT64, {123.25, -1.5}, 2, " 123.2500\n  -1.5000\n[torch.DoubleStorage of size 2]\n"},
      /* expMax - expMin = 5 > 4: "%11.4e" */
      {TSTOR_FLOAT64, {12345.25, -0.5}, 2,
       " 1.2345e+04\n-5.0000e-01\n[torch.DoubleStorage of size 2]\n"},
      /* a magnitude past 10^99: width 12 */
      {TSTOR_FLOAT64, {1e-150, 1.5}, 2,
       " 1.0000e-150\n  1.5000e+00\n[torch.DoubleStorage of size 2]\n"},
      /* expMax 6 > 5: scale 10^5 first ("%g": 100000), then "%7.4f" of x / scale */
      {TSTOR_FLOAT64, {200000.5, 300000.5}, 2,
       "100000 *\n 2.0000\n 3.0000\n[torch.DoubleStorage of size 2]\n"},
      /* expMax -2 < 0: scale 10^-3 */
      {TSTOR_FLOAT64, {0.001, 0.0025}, 2, "0.001 *\n 1.0000\n 2.5000\n[torch.DoubleStorage of size 2]\n"},
      /* a NaN makes min and max NaN, the width "nan", the format "%f" */
      {TSTOR_FLOAT64, {1.5, NAN, -2}, 3, "1.500000\nnan\n-2.000000\n[torch.DoubleStorage of size 3]\n"},
      /* empty: the footer alone */
      {TSTOR_FLOAT64, {0}, 0, "[torch.DoubleStorage of size 0]\n"},
      /* bytes: integral, expMax 3 */
      {TSTOR_UINT8, {255, 7}, 2, " 255\n   7\n[torch.ByteStorage of size 2]\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tstor_storage *x = make(cpu, cases[i].dtype, cases[i].v, cases[i].n);
    char *text = printed(x, cases[i].dtype);
    ck_assert_msg(strcmp(text, cases[i].text) == 0, "case %zu:\n%s\nexpected:\n%s", i, text,
                  cases[i].text);
    free(text);
    tstor_storage_release(x);
  }
}
END_TEST

START_TEST(torch7_docs) {
  /* x = torch.IntStorage(10):fill(1)
   * y = torch.DoubleStorage(10):copy(x) */
  tstor_storage *x, *y;
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_INT32, 10, &x));
  int32_t one = 1;
  ck_tstor_ok(tstor_typed_fill(x, TSTOR_INT32, &one));
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_FLOAT64, 10, &y));
  ck_tstor_ok(tstor_typed_copy(y, TSTOR_FLOAT64, x, TSTOR_INT32));
  for (size_t i = 0; i < 10; i++) ck_assert_double_eq(at(y, TSTOR_FLOAT64, i), 1.0);
  tstor_storage_release(x);
  tstor_storage_release(y);

  /* x = torch.DoubleStorage(10) -- a storage of 10 doubles, uninitialised
   * print(x[5]) -- Lua's 1-based 5 is index 4 */
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_FLOAT64, 10, &x));
  size_t n;
  ck_tstor_ok(tstor_typed_size(x, TSTOR_FLOAT64, &n));
  ck_assert_uint_eq(n, 10);
  double x5;
  ck_tstor_ok(tstor_typed_get_f64(x, TSTOR_FLOAT64, 4, &x5));
  tstor_storage_release(x);

  /* x = torch.DoubleStorage(10)
   * y = torch.DoubleStorage(x, 3, 5)  -- a view from Lua's offset 3, 5 long
   * x:fill(0); y:fill(1); print(x)    -- integral doubles print as integers */
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_FLOAT64, 10, &x));
  ck_tstor_ok(tstor_typed_view(x, TSTOR_FLOAT64, 2, 5, &y));
  double zero_d = 0, one_d = 1;
  ck_tstor_ok(tstor_typed_fill(x, TSTOR_FLOAT64, &zero_d));
  ck_tstor_ok(tstor_typed_fill(y, TSTOR_FLOAT64, &one_d));
  char *shown = printed(x, TSTOR_FLOAT64);
  ck_assert_str_eq(shown, " 0\n 0\n 1\n 1\n 1\n 1\n 1\n 0\n 0\n 0\n[torch.DoubleStorage of size 10]\n");
  free(shown);
  tstor_storage_release(y);
  tstor_storage_release(x);

  /* > = torch.IntStorage({1,2,3,4}) */
  int32_t v[] = {1, 2, 3, 4};
  ck_tstor_ok(tstor_typed_from_array(ctx, cpu, TSTOR_INT32, v, TSTOR_INT32, 4, &x));
  char *text = printed(x, TSTOR_INT32);
  ck_assert_str_eq(text, " 1\n 2\n 3\n 4\n[torch.IntStorage of size 4]\n");
  free(text);
  tstor_storage_release(x);

  /* x = torch.IntStorage(10):fill(0) */
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_INT32, 10, &x));
  int32_t zero = 0;
  ck_tstor_ok(tstor_typed_fill(x, TSTOR_INT32, &zero));
  ck_assert_double_eq(at(x, TSTOR_INT32, 9), 0);
  tstor_storage_release(x);

  /* x = torch.DoubleStorage(10):fill(1)
   * y = torch.DoubleStorage():resize(x:size()):copy(x) */
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_FLOAT64, 10, &x));
  double d1 = 1;
  ck_tstor_ok(tstor_typed_fill(x, TSTOR_FLOAT64, &d1));
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_FLOAT64, 0, &y));
  ck_tstor_ok(tstor_typed_size(x, TSTOR_FLOAT64, &n));
  ck_tstor_ok(tstor_typed_resize(y, TSTOR_FLOAT64, n));
  ck_tstor_ok(tstor_typed_copy(y, TSTOR_FLOAT64, x, TSTOR_FLOAT64));
  ck_assert_double_eq(at(y, TSTOR_FLOAT64, 9), 1);
  tstor_storage_release(x);
  tstor_storage_release(y);

  /* > x = torch.CharStorage():string("blah blah")
   * > print(x)  and  print(x:string()) */
  ck_tstor_ok(tstor_typed_new(ctx, cpu, TSTOR_INT8, 0, &x));
  ck_tstor_ok(tstor_typed_set_string(x, TSTOR_INT8, "blah blah", 9));
  text = printed(x, TSTOR_INT8);
  ck_assert_str_eq(text, "  98\n 108\n  97\n 104\n  32\n  98\n 108\n  97\n 104\n"
                         "[torch.CharStorage of size 9]\n");
  free(text);
  char buf[16];
  size_t len;
  ck_tstor_ok(tstor_typed_get_string(x, TSTOR_INT8, buf, sizeof buf, &len));
  ck_assert_uint_eq(len, 9);
  ck_assert_int_eq(memcmp(buf, "blah blah", 9), 0);
  tstor_storage_release(x);

  /* $ echo "Hello World" > hello.txt
   * > x = torch.CharStorage('hello.txt')   -- a private mapping of the file
   * > = x                                  -- 72 101 ... 10, size 12
   * > = x:string()                         -- Hello World
   * > = x:fill(42):string()                -- twelve '*'; the file unchanged */
  const char *path = coretest_write_file(".txt", "Hello World\n", 12);
  ck_tstor_ok(tstor_storage_from_file(ctx, path, 0, 0, tstor_dtype_size(TSTOR_INT8), &x));
  text = printed(x, TSTOR_INT8);
  ck_assert_str_eq(text, "  72\n 101\n 108\n 108\n 111\n  32\n  87\n 111\n 114\n 108\n 100\n"
                         "  10\n[torch.CharStorage of size 12]\n");
  free(text);
  ck_tstor_ok(tstor_typed_get_string(x, TSTOR_INT8, buf, sizeof buf, &len));
  ck_assert_uint_eq(len, 12);
  ck_assert_int_eq(memcmp(buf, "Hello World\n", 12), 0);
  int8_t star = 42;
  ck_tstor_ok(tstor_typed_fill(x, TSTOR_INT8, &star));
  ck_tstor_ok(tstor_typed_get_string(x, TSTOR_INT8, buf, sizeof buf, &len));
  ck_assert_int_eq(memcmp(buf, "************", 12), 0);
  tstor_storage_release(x);
  ck_assert_str_eq(coretest_read_file(path), "Hello World\n");
  /* > x = torch.CharStorage('hello.txt', true)   -- shared
   * > = x:string()                              -- Hello World
   * > x:fill(42)                                -- and the file is twelve '*' */
  ck_tstor_ok(tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, 0, 1, &x));
  ck_tstor_ok(tstor_typed_get_string(x, TSTOR_INT8, buf, sizeof buf, &len));
  ck_assert_int_eq(memcmp(buf, "Hello World\n", 12), 0);
  ck_tstor_ok(tstor_typed_fill(x, TSTOR_INT8, &star));
  tstor_storage_release(x);
  ck_assert_str_eq(coretest_read_file(path), "************");
  unlink(path);
}
END_TEST

int main(void) {
  Suite *s = suite_create("typed");
  TCase *tc = tcase_create("typed");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, sizes_and_resize);
  tcase_add_test(tc, get_set_and_bounds);
  tcase_add_test(tc, numbers_by_dtype);
  tcase_add_test(tc, torch2_dtypes_by_element);
  tcase_add_test(tc, arrays_in_and_out);
  tcase_add_test(tc, fill_every_size);
  tcase_add_test(tc, fill_from_a_number);
  tcase_add_test(tc, printing_untyped_and_get_device);
  tcase_add_test(tc, from_buffer_byte_orders);
  tcase_add_test(tc, byteswap_by_dtype);
  tcase_add_test(tc, strings_with_nuls);
  tcase_add_test(tc, views_share_bytes);
  tcase_add_test(tc, copy_between_devices);
  tcase_add_test(tc, copy_errors_leave_destination);
  tcase_add_test(tc, device_convert_op);
  tcase_add_test(tc, large_copies_split_over_threads);
  tcase_add_test(tc, printing_other_devices);
  tcase_add_test(tc, torch7_docs);
  tcase_add_test(tc, torch7_number_formats);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
