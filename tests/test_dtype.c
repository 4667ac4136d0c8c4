/* The dtype table, name parsing, element formatting and printing, the last
 * against PyTorch's own str() of storages (tests/vectors/print.txt). */
#define _GNU_SOURCE
#include "coretest.h"
#include "typedtest.h"

#include <math.h>

static tstor_context *ctx;
static void setup(void) { ctx = coretest_open(NULL); }
static void teardown(void) { tstor_context_close(ctx); }

START_TEST(table_matches_pytorch) {
  static const struct {
    tstor_dtype dt;
    const char *name;
    size_t size;
    tstor_dtype_kind kind;
  } want[] = {
      {TSTOR_BOOL, "bool", 1, TSTOR_KIND_BOOL},
      {TSTOR_UINT8, "uint8", 1, TSTOR_KIND_UNSIGNED},
      {TSTOR_INT8, "int8", 1, TSTOR_KIND_SIGNED},
      {TSTOR_INT16, "int16", 2, TSTOR_KIND_SIGNED},
      {TSTOR_INT32, "int32", 4, TSTOR_KIND_SIGNED},
      {TSTOR_INT64, "int64", 8, TSTOR_KIND_SIGNED},
      {TSTOR_FLOAT16, "float16", 2, TSTOR_KIND_FLOAT},
      {TSTOR_BFLOAT16, "bfloat16", 2, TSTOR_KIND_FLOAT},
      {TSTOR_FLOAT32, "float32", 4, TSTOR_KIND_FLOAT},
      {TSTOR_FLOAT64, "float64", 8, TSTOR_KIND_FLOAT},
      {TSTOR_COMPLEX32, "complex32", 4, TSTOR_KIND_COMPLEX},
      {TSTOR_COMPLEX64, "complex64", 8, TSTOR_KIND_COMPLEX},
      {TSTOR_COMPLEX128, "complex128", 16, TSTOR_KIND_COMPLEX},
      {TSTOR_FLOAT8_E4M3FN, "float8_e4m3fn", 1, TSTOR_KIND_FLOAT},
      {TSTOR_FLOAT8_E4M3FNUZ, "float8_e4m3fnuz", 1, TSTOR_KIND_FLOAT},
      {TSTOR_FLOAT8_E5M2, "float8_e5m2", 1, TSTOR_KIND_FLOAT},
      {TSTOR_FLOAT8_E5M2FNUZ, "float8_e5m2fnuz", 1, TSTOR_KIND_FLOAT},
      {TSTOR_QUINT8, "quint8", 1, TSTOR_KIND_QUANTIZED},
      {TSTOR_QINT8, "qint8", 1, TSTOR_KIND_QUANTIZED},
      {TSTOR_QINT32, "qint32", 4, TSTOR_KIND_QUANTIZED},
      {TSTOR_QUINT4X2, "quint4x2", 1, TSTOR_KIND_QUANTIZED},
      {TSTOR_QUINT2X4, "quint2x4", 1, TSTOR_KIND_QUANTIZED},
      {TSTOR_UINT16, "uint16", 2, TSTOR_KIND_UNSIGNED},
      {TSTOR_UINT32, "uint32", 4, TSTOR_KIND_UNSIGNED},
      {TSTOR_UINT64, "uint64", 8, TSTOR_KIND_UNSIGNED},
      {TSTOR_FLOAT8_E8M0FNU, "float8_e8m0fnu", 1, TSTOR_KIND_FLOAT},
      {TSTOR_FLOAT4_E2M1FN_X2, "float4_e2m1fn_x2", 1, TSTOR_KIND_OPAQUE},
      {TSTOR_BITS1X8, "bits1x8", 1, TSTOR_KIND_OPAQUE},
      {TSTOR_BITS2X4, "bits2x4", 1, TSTOR_KIND_OPAQUE},
      {TSTOR_BITS4X2, "bits4x2", 1, TSTOR_KIND_OPAQUE},
      {TSTOR_BITS8, "bits8", 1, TSTOR_KIND_OPAQUE},
      {TSTOR_BITS16, "bits16", 2, TSTOR_KIND_OPAQUE},
      {TSTOR_BCOMPLEX32, "bcomplex32", 4, TSTOR_KIND_COMPLEX},
  };
  int valid = 0;
  for (int v = -2; v < TSTOR_DTYPE_END + 2; v++)
    if (tstor_dtype_info_of((tstor_dtype)v)) valid++;
  ck_assert_int_eq(valid, (int)(sizeof want / sizeof want[0]));
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const tstor_dtype_info *d = tstor_dtype_info_of(want[i].dt);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->dtype, want[i].dt);
    ck_assert_str_eq(d->name, want[i].name);
    ck_assert_str_eq(tstor_dtype_name(want[i].dt), want[i].name);
    ck_assert_uint_eq(d->element_size, want[i].size);
    ck_assert_uint_eq(tstor_dtype_size(want[i].dt), want[i].size);
    ck_assert_int_eq(d->kind, want[i].kind);
    ck_assert_ptr_nonnull(d->scalar_type);
    tstor_dtype back;
    ck_tstor_ok(tstor_dtype_parse(d->name, &back));
    ck_assert_int_eq(back, want[i].dt);
    if (d->kind != TSTOR_KIND_QUANTIZED) ck_assert_int_eq(d->underlying, want[i].dt);
  }
  /* c10::ScalarType's numbers, which a backend's convert op receives. */
  ck_assert_int_eq(TSTOR_UINT8, 0);
  ck_assert_int_eq(TSTOR_FLOAT32, 6);
  ck_assert_int_eq(TSTOR_BOOL, 11);
  ck_assert_int_eq(TSTOR_BFLOAT16, 15);
  ck_assert_int_eq(TSTOR_FLOAT8_E4M3FNUZ, 26);
  ck_assert_int_eq(TSTOR_UINT16, 27);
  ck_assert_int_eq(TSTOR_UINT64, 29);
  ck_assert_int_eq(TSTOR_FLOAT8_E8M0FNU, 44);
  ck_assert_int_eq(TSTOR_FLOAT4_E2M1FN_X2, 45);
  ck_assert_int_eq(TSTOR_BCOMPLEX32, 46);
  ck_assert_int_eq(TSTOR_DTYPE_END, 47);
  ck_assert_int_eq(tstor_dtype_info_of(TSTOR_BCOMPLEX32)->is_signed, 1);
  ck_assert_str_eq(tstor_dtype_info_of(TSTOR_BCOMPLEX32)->scalar_type, "BComplex32");
  ck_assert_ptr_null(tstor_dtype_info_of(TSTOR_BCOMPLEX32)->legacy_name);
  ck_assert_int_eq(tstor_dtype_info_of(TSTOR_UINT32)->is_signed, 0);
  ck_assert_int_eq(tstor_dtype_info_of(TSTOR_FLOAT8_E8M0FNU)->is_signed, 0);
  ck_assert_int_eq(tstor_dtype_info_of(TSTOR_FLOAT4_E2M1FN_X2)->is_signed, 1);
  ck_assert_int_eq(tstor_dtype_info_of(TSTOR_QINT8)->underlying, TSTOR_INT8);
  ck_assert_int_eq(tstor_dtype_info_of(TSTOR_QUINT4X2)->underlying, TSTOR_UINT8);
  ck_assert_int_eq(tstor_dtype_info_of(TSTOR_QINT32)->underlying, TSTOR_INT32);
  ck_assert_int_eq(TSTOR_BITS1X8, 18);
  ck_assert_int_eq(TSTOR_BITS16, 22);
  /* The holes are not dtypes: uint1-7 and int1-7, which PyTorch cannot save. */
  for (int v = 30; v <= 43; v++) {
    ck_assert_ptr_null(tstor_dtype_info_of((tstor_dtype)v));
    ck_assert_str_eq(tstor_dtype_name((tstor_dtype)v), "?");
    ck_assert_uint_eq(tstor_dtype_size((tstor_dtype)v), 0);
  }
}
END_TEST

START_TEST(names_parse_back) {
  static const struct {
    const char *text;
    tstor_dtype dt;
  } cases[] = {
      {"float", TSTOR_FLOAT32},
      {"torch.float32", TSTOR_FLOAT32},
      {"FloatStorage", TSTOR_FLOAT32},
      {"torch.FloatStorage", TSTOR_FLOAT32},
      {"Float", TSTOR_FLOAT32},
      {"double", TSTOR_FLOAT64},
      {"half", TSTOR_FLOAT16},
      {"Half", TSTOR_FLOAT16},
      {"long", TSTOR_INT64},
      {"torch.LongStorage", TSTOR_INT64},
      {"int", TSTOR_INT32},
      {"IntStorage", TSTOR_INT32},
      {"short", TSTOR_INT16},
      {"Char", TSTOR_INT8},
      {"ByteStorage", TSTOR_UINT8},
      {"Byte", TSTOR_UINT8},
      {"BoolStorage", TSTOR_BOOL},
      {"chalf", TSTOR_COMPLEX32},
      {"ComplexHalf", TSTOR_COMPLEX32},
      {"cfloat", TSTOR_COMPLEX64},
      {"torch.ComplexDoubleStorage", TSTOR_COMPLEX128},
      {"BFloat16Storage", TSTOR_BFLOAT16},
      {"torch.QUInt4x2Storage", TSTOR_QUINT4X2},
      {"Float8_e4m3fn", TSTOR_FLOAT8_E4M3FN},
      {"torch.float8_e5m2fnuz", TSTOR_FLOAT8_E5M2FNUZ},
      {"torch.uint16", TSTOR_UINT16},
      {"UInt32", TSTOR_UINT32},
      {"uint64", TSTOR_UINT64},
      {"Float8_e8m0fnu", TSTOR_FLOAT8_E8M0FNU},
      {"torch.float4_e2m1fn_x2", TSTOR_FLOAT4_E2M1FN_X2},
      {"bits8", TSTOR_BITS8},
      {"Bits16", TSTOR_BITS16},
      {"torch.bcomplex32", TSTOR_BCOMPLEX32},
      {"BComplex32", TSTOR_BCOMPLEX32},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tstor_dtype dt = (tstor_dtype)-1;
    ck_tstor_ok(tstor_dtype_parse(cases[i].text, &dt));
    ck_assert_msg(dt == cases[i].dt, "%s parsed as %d", cases[i].text, dt);
  }
  const char *bad[] = {"",
                       "Float32",
                       "FLOAT",
                       "torch.",
                       "Storage",
                       "floatStorage",
                       "ComplexHalfStorage",
                       "torch.Float8_e4m3fnStorage",
                       "float32 ",
                       "Bits8Storage",
                       "UInt16Storage",
                       "torch.UInt64Storage",
                       "uint4",
                       "e8m0",
                       "BComplex32Storage",
                       "cbfloat16"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tstor_dtype dt = TSTOR_INT8;
    ck_tstor_err(tstor_dtype_parse(bad[i], &dt), TSTOR_ENOENT);
    ck_assert_int_eq(dt, TSTOR_INT8); /* untouched */
    ck_last_error_has("unknown dtype");
  }
  tstor_dtype dt;
  ck_tstor_err(tstor_dtype_parse(NULL, &dt), TSTOR_EINVAL);
  ck_tstor_err(tstor_dtype_parse("float", NULL), TSTOR_EINVAL);
}
END_TEST

static const char *fmt(tstor_dtype dt, const void *v) {
  static char buf[4][80];
  static int next;
  char *b = buf[next++ % 4];
  size_t len = 0;
  ck_tstor_ok(tstor_dtype_format(dt, v, b, 80, &len));
  ck_assert_uint_eq(len, strlen(b));
  return b;
}

START_TEST(elements_format_as_python) {
  double d[] = {1.0, 0.1, 1e16, 1e-5, 1e-4, 123456789.0, -0.0, NAN, -INFINITY, 5e-324,
                1.7976931348623157e308, 9007199254740993.0, 0.30000000000000004, 1e22, 12.5};
  const char *want[] = {"1.0", "0.1", "1e+16", "1e-05", "0.0001", "123456789.0", "-0.0", "nan",
                        "-inf", "5e-324", "1.7976931348623157e+308", "9007199254740992.0",
                        "0.30000000000000004", "1e+22", "12.5"};
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
    ck_assert_str_eq(fmt(TSTOR_FLOAT64, &d[i]), want[i]);
  /* Powers of two, where the shortest string is on the far side of x. */
  double p = 0x1p-1022;
  ck_assert_str_eq(fmt(TSTOR_FLOAT64, &p), "2.2250738585072014e-308");
  double p2 = 0x1p1023;
  ck_assert_str_eq(fmt(TSTOR_FLOAT64, &p2), "8.98846567431158e+307");
  int64_t big = INT64_MIN;
  ck_assert_str_eq(fmt(TSTOR_INT64, &big), "-9223372036854775808");
  uint8_t u = 255, b = 1, q = 200;
  ck_assert_str_eq(fmt(TSTOR_UINT8, &u), "255");
  ck_assert_str_eq(fmt(TSTOR_INT8, &u), "-1");
  ck_assert_str_eq(fmt(TSTOR_BOOL, &b), "True");
  b = 0;
  ck_assert_str_eq(fmt(TSTOR_BOOL, &b), "False");
  ck_assert_str_eq(fmt(TSTOR_QUINT8, &q), "200");
  ck_assert_str_eq(fmt(TSTOR_QINT8, &q), "-56");
  double c[][2] = {{0, 1}, {-0.0, -0.0}, {NAN, INFINITY}, {1, 2}, {1.5, -NAN}, {0, -1}, {1e16, 1e-5}};
  const char *cw[] = {"1j", "(-0-0j)", "(nan+infj)", "(1+2j)", "(1.5+nanj)", "-1j",
                      "(1e+16+1e-05j)"};
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
    ck_assert_str_eq(fmt(TSTOR_COMPLEX128, c[i]), cw[i]);
  /* The longest element fits in 64 bytes. */
  double worst[2] = {-1.2345678901234567e-300, -1.2345678901234567e-300};
  char small[64];
  ck_tstor_ok(tstor_dtype_format(TSTOR_COMPLEX128, worst, small, sizeof small, NULL));
  /* Too small a buffer: ERANGE, the length needed, and an empty string. */
  char tiny[3];
  size_t need = 0;
  ck_tstor_err(tstor_dtype_format(TSTOR_FLOAT64, &d[5], tiny, sizeof tiny, &need), TSTOR_ERANGE);
  ck_assert_uint_eq(need, strlen("123456789.0"));
  ck_assert_str_eq(tiny, "");
  ck_tstor_err(tstor_dtype_format((tstor_dtype)35, &d[0], small, sizeof small, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_dtype_format(TSTOR_FLOAT64, NULL, small, sizeof small, NULL), TSTOR_EINVAL);
  /* The unsigned types print whole, past int64 too; e8m0 as its float. */
  uint64_t u64 = UINT64_MAX;
  ck_assert_str_eq(fmt(TSTOR_UINT64, &u64), "18446744073709551615");
  uint8_t e[] = {0, 127, 255};
  ck_assert_str_eq(fmt(TSTOR_FLOAT8_E8M0FNU, &e[0]), "5.877471754111438e-39");
  ck_assert_str_eq(fmt(TSTOR_FLOAT8_E8M0FNU, &e[1]), "1.0");
  ck_assert_str_eq(fmt(TSTOR_FLOAT8_E8M0FNU, &e[2]), "nan");
  /* bcomplex32 as Python's complex of its two bfloat16 parts. */
  uint16_t bc[][2] = {{0x3f80, 0x4000}, {0x0000, 0xbf80}, {0x7fc0, 0xff80}, {0x3dcd, 0x8000}};
  const char *bcw[] = {"(1+2j)", "-1j", "(nan-infj)", "(0.10009765625-0j)"};
  for (size_t i = 0; i < sizeof bc / sizeof bc[0]; i++)
    ck_assert_str_eq(fmt(TSTOR_BCOMPLEX32, bc[i]), bcw[i]);
  /* float4_e2m1fn_x2 has no value PyTorch reads (item() refuses). */
  ck_tstor_err(tstor_dtype_format(TSTOR_FLOAT4_E2M1FN_X2, e, small, sizeof small, NULL),
               TSTOR_EDTYPE);
  ck_assert_str_eq(tstor_last_error(),
                   "\"_local_scalar_dense_cpu\" not implemented for 'Float4_e2m1fn_x2'");
}
END_TEST

/* Prints into a string (the caller frees it). */
static char *print_to_string(const tstor_storage *s, tstor_dtype dt, unsigned flags) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_assert_ptr_nonnull(f);
  int rc = tstor_typed_print(f, s, dt, flags);
  fclose(f);
  ck_assert_msg(rc == 0, "print failed: %s", tstor_last_error());
  return text;
}

static int hexval(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* Checks every case of tests/vectors/NAME (print.txt's form: "dtype", "data"
 * in hex or "meta" and a count, the lines PyTorch prints, or "error" and
 * its words where it refuses to print); returns the number of cases. */
static int check_print_file(const char *name_of_file) {
  char path[512];
  snprintf(path, sizeof path, "%s/vectors/%s", TSTOR_TEST_SRCDIR, name_of_file);
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  tstor_device cpu = coretest_dev(ctx, "cpu"), meta = coretest_dev(ctx, "meta");
  char *line = NULL;
  size_t cap = 0;
  int cases = 0;
  while (getline(&line, &cap, f) > 0) {
    if (line[0] == '#') continue;
    char name[64];
    size_t meta_count = 0;
    int fields = sscanf(line, "dtype %63s meta %zu", name, &meta_count);
    ck_assert_int_ge(fields, 1);
    tstor_dtype dt;
    ck_tstor_ok(tstor_dtype_parse(name, &dt));
    tstor_storage *s = NULL;
    if (fields == 2) {
      ck_tstor_ok(tstor_typed_new(ctx, meta, dt, meta_count, &s));
    } else {
      ck_assert_int_gt(getline(&line, &cap, f), 0);
      ck_assert(strncmp(line, "data ", 5) == 0);
      size_t hex = strcspn(line + 5, "\n");
      unsigned char *bytes = malloc(hex / 2 + 1);
      for (size_t i = 0; i < hex / 2; i++)
        bytes[i] = (unsigned char)(hexval(line[5 + 2 * i]) * 16 + hexval(line[6 + 2 * i]));
      ck_tstor_ok(tstor_typed_from_buffer(ctx, cpu, dt, bytes, hex / 2, TSTOR_ORDER_LITTLE, &s));
      free(bytes);
    }
    /* The expected text: every line up to "end". */
    char *want = NULL;
    size_t want_len = 0;
    FILE *w = open_memstream(&want, &want_len);
    while (getline(&line, &cap, f) > 0 && strcmp(line, "end\n") != 0) fputs(line, w);
    fclose(w);
    if (strncmp(want, "error ", 6) == 0) {
      /* "error NotImplementedError: MESSAGE": refused in those words, nothing written */
      const char *msg = strstr(want, ": ") + 2;
      char *text = NULL;
      size_t len = 0;
      FILE *out = open_memstream(&text, &len);
      ck_tstor_err(tstor_typed_print(out, s, dt, 0), TSTOR_EDTYPE);
      fclose(out);
      ck_assert_uint_eq(len, 0);
      ck_assert_msg(strncmp(tstor_last_error(), msg, strcspn(msg, "\n")) == 0 &&
                        tstor_last_error()[strcspn(msg, "\n")] == '\0',
                    "%s: said \"%s\", PyTorch %s", name, tstor_last_error(), msg);
      free(text);
    } else {
      char *got = print_to_string(s, dt, 0);
      ck_assert_msg(strcmp(got, want) == 0, "%s storage prints\n%s\nPyTorch prints\n%s", name, got,
                    want);
      free(got);
    }
    free(want);
    tstor_storage_release(s);
    cases++;
  }
  free(line);
  fclose(f);
  return cases;
}

START_TEST(printing_matches_pytorch) {
  ck_assert_int_ge(check_print_file("print.txt"), 13 * 3 + 4 + 1);
}
END_TEST

/* The dtypes PyTorch 1.13 lacks, against torch 2.x's str() of them. */
START_TEST(printing_matches_torch2) {
  ck_assert_int_eq(check_print_file("print_torch2.txt"), 5 * 4 + 6 * 3);
}
END_TEST

START_TEST(torch7_style) {
  /* torch.IntStorage({1,2,3,4}) in Torch7's documentation. */
  int32_t v[] = {1, 2, 3, 4};
  tstor_storage *s;
  ck_tstor_ok(tstor_typed_from_array(ctx, coretest_dev(ctx, "cpu"), TSTOR_INT32, v, TSTOR_INT32,
                                     4, &s));
  char *got = print_to_string(s, TSTOR_INT32, TSTOR_PRINT_TORCH7);
  ck_assert_str_eq(got, " 1\n 2\n 3\n 4\n[torch.IntStorage of size 4]\n");
  free(got);
  got = print_to_string(s, TSTOR_INT32, 0);
  ck_assert_str_eq(got,
                   " 1\n 2\n 3\n 4\n[torch.storage.TypedStorage(dtype=torch.int32, device=cpu) of "
                   "size 4]\n");
  free(got);
  /* The same bytes seen as another dtype: a typed view is the storage plus a dtype. */
  got = print_to_string(s, TSTOR_INT16, TSTOR_PRINT_TORCH7);
  ck_assert_str_eq(got, " 1\n 0\n 2\n 0\n 3\n 0\n 4\n 0\n[torch.ShortStorage of size 8]\n");
  free(got);
  tstor_storage_release(s);
  /* Right-aligned, as Torch7 prints a CharStorage. */
  int8_t c[] = {72, 101, 10};
  ck_tstor_ok(tstor_typed_from_array(ctx, coretest_dev(ctx, "cpu"), TSTOR_INT8, c, TSTOR_INT8, 3,
                                     &s));
  got = print_to_string(s, TSTOR_INT8, TSTOR_PRINT_TORCH7);
  ck_assert_str_eq(got, "  72\n 101\n  10\n[torch.CharStorage of size 3]\n");
  free(got);
  tstor_storage_release(s);
  /* Meta: no elements, whatever the style. */
  ck_tstor_ok(tstor_typed_new(ctx, coretest_dev(ctx, "meta"), TSTOR_FLOAT8_E5M2, 5, &s));
  got = print_to_string(s, TSTOR_FLOAT8_E5M2, TSTOR_PRINT_TORCH7);
  ck_assert_str_eq(got, "...\n[torch.Float8_e5m2Storage of size 5 on meta]\n");
  free(got);
  tstor_storage_release(s);
}
END_TEST

START_TEST(print_errors) {
  tstor_storage *s;
  ck_tstor_ok(tstor_storage_new(ctx, coretest_dev(ctx, "cpu"), 6, &s));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_tstor_err(tstor_typed_print(f, s, TSTOR_INT32, 0), TSTOR_ESIZE); /* 6 bytes */
  ck_tstor_err(tstor_typed_print(f, s, (tstor_dtype)35, 0), TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_print(NULL, s, TSTOR_INT16, 0), TSTOR_EINVAL);
  ck_tstor_err(tstor_typed_print(f, NULL, TSTOR_INT16, 0), TSTOR_EINVAL);
  fclose(f);
  ck_assert_uint_eq(len, 0); /* nothing written by the failed calls */
  free(text);
  tstor_storage_release(s);
}
END_TEST

int main(void) {
  Suite *s = suite_create("dtype");
  TCase *tc = tcase_create("table");
  tcase_add_test(tc, table_matches_pytorch);
  tcase_add_test(tc, names_parse_back);
  tcase_add_test(tc, elements_format_as_python);
  suite_add_tcase(s, tc);
  TCase *pr = tcase_create("print");
  tcase_add_checked_fixture(pr, setup, teardown);
  tcase_add_test(pr, printing_matches_pytorch);
  tcase_add_test(pr, printing_matches_torch2);
  tcase_add_test(pr, torch7_style);
  tcase_add_test(pr, print_errors);
  suite_add_tcase(s, pr);
  return tstor_test_run(s);
}
