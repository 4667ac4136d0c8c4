/* safetensors: the reference writer's own known-answer files (from
 * huggingface/safetensors' tensor.rs tests) byte for byte, PyTorch's golden
 * checkpoints converted and read back with the same bytes, sharing refused
 * or copied, mapping, and a catalogue of files that break one validation
 * rule each, loaded every way. */
#define _GNU_SOURCE
#include "testutil.h"

#include <stdint.h>
#include <unistd.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

#define CKDIR TSTOR_TEST_SRCDIR "/ckpt"

static tstor_context *ctx;
static tstor_device cpu;
static char dir[64];

static void setup(void) {
  ck_tstor_ok(tstor_context_open(NULL, &ctx));
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  strcpy(dir, "/tmp/tstor-st-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}
static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ck_assert_int_eq(system(cmd), 0);
  tstor_context_close(ctx);
}

static char *path_in(const char *name) {
  static char p[128];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return p;
}


static void spit(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(fwrite(p, 1, n, f), n);
  fclose(f);
}

static tstor_value *str(tstor_checkpoint *ck, const char *s) {
  tstor_value *v;
  ck_tstor_ok(tstor_value_new_string(ck, s, strlen(s), &v));
  return v;
}

static tstor_tensor *tensor(tstor_dtype dt, int nd, const int64_t *sizes, const void *data) {
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_from_array(ctx, cpu, dt, nd, sizes, data, &t));
  return t;
}

static void put_tensor(tstor_checkpoint *ck, tstor_value *dict, const char *name, tstor_tensor *t) {
  tstor_value *v;
  ck_tstor_ok(tstor_value_new_tensor(ck, t, &v));
  ck_tstor_ok(tstor_value_dict_set(dict, str(ck, name), v));
}

static void expect_file(const char *path, const unsigned char *want, size_t n) {
  size_t len;
  unsigned char *got = (unsigned char *)tstor_test_slurp(path, &len);
  ck_assert_int_eq(len, n);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(got[i] == want[i], "byte %zu: %u, the reference writes %u", i, got[i], want[i]);
  free(got);
}

/* complex64 is the format's C64, which the reference (safetensors 0.8's
 * save_file of {"c": complex64 [1+2j], "d": float64 [0.5], "f": float32
 * [1.5]}) writes and reads: these bytes are what it wrote, C64 ranked
 * between F64 and F32 as the Rust crate's Dtype orders them. */
START_TEST(complex64_is_c64) {
  static const unsigned char want[] = {
      168, 0,   0,   0,  0,   0,   0,   0,   123, 34,  100, 34,  58,  123, 34,  100, 116, 121,
      112, 101, 34,  58, 34,  70,  54,  52,  34,  44,  34,  115, 104, 97,  112, 101, 34,  58,
      91,  49,  93,  44, 34,  100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,
      58,  91,  48,  44, 56,  93,  125, 44,  34,  99,  34,  58,  123, 34,  100, 116, 121, 112,
      101, 34,  58,  34, 67,  54,  52,  34,  44,  34,  115, 104, 97,  112, 101, 34,  58,  91,
      49,  93,  44,  34, 100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,
      91,  56,  44,  49, 54,  93,  125, 44,  34,  102, 34,  58,  123, 34,  100, 116, 121, 112,
      101, 34,  58,  34, 70,  51,  50,  34,  44,  34,  115, 104, 97,  112, 101, 34,  58,  91,
      49,  93,  44,  34, 100, 97,  116, 97,  95,  111, 102, 102, 115, 101, 116, 115, 34,  58,
      91,  49,  54,  44, 50,  48,  93,  125, 125, 32,  32,  32,  32,  32,  0,   0,   0,   0,
      0,   0,   224, 63, 0,   0,   128, 63,  0,   0,   0,   64,  0,   0,   192, 63};
  static const float c[2] = {1, 2}, f = 1.5f;
  static const double d = 0.5;
  int64_t one = 1;
  tstor_checkpoint *ck;
  tstor_value *dict;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &dict));
  tstor_tensor *tc = tensor(TSTOR_COMPLEX64, 1, &one, c), *td = tensor(TSTOR_FLOAT64, 1, &one, &d),
               *tf = tensor(TSTOR_FLOAT32, 1, &one, &f);
  put_tensor(ck, dict, "c", tc);
  put_tensor(ck, dict, "d", td);
  put_tensor(ck, dict, "f", tf);
  ck_tstor_ok(tstor_checkpoint_set_root(ck, dict));
  ck_tstor_ok(tstor_safetensors_save(ck, path_in("c64.safetensors"), NULL));
  expect_file(path_in("c64.safetensors"), want, sizeof want);
  tstor_checkpoint_free(ck);
  tstor_tensor_release(tc);
  tstor_tensor_release(td);
  tstor_tensor_release(tf);
  ck_tstor_ok(tstor_safetensors_load_buffer(ctx, want, sizeof want, NULL, &ck));
  const tstor_value *root = tstor_checkpoint_root(ck);
  ck_assert_int_eq(tstor_value_len(root), 3);
  tstor_tensor *back = tstor_value_tensor(tstor_value_item(root, 1));
  ck_assert_int_eq(tstor_tensor_dtype(back), TSTOR_COMPLEX64);
  ck_assert_mem_eq(tstor_tensor_data(back), c, sizeof c);
  tstor_checkpoint_free(ck);
}
END_TEST

/* tensor.rs: test_serialization, test_serialization_forced_alignement, test_empty */
START_TEST(reference_files) {
  static const float vals[6] = {0, 1, 2, 3, 4, 5};
  static const unsigned char attn[] = {
      64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100, 116, 121, 112,
      101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49, 44, 50, 44, 51,
      93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52,
      93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
  static const unsigned char aligned[] = {
      72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116, 121, 112, 101,
      34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58, 91, 49, 44, 49, 44, 50, 44, 51,
      93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52,
      93, 125, 125, 32, 32, 32, 32, 32, 32, 32, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0,
      0, 128, 64, 0, 0, 160, 64};
  static const unsigned char empty[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
  static const unsigned char empty_md[] = {
      40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95, 95, 34, 58, 123,
      34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112, 116, 34, 125, 125, 32, 32, 32, 32, 32};

  tstor_checkpoint *ck;
  tstor_value *d;
  int64_t s3[3] = {1, 2, 3}, s4[4] = {1, 1, 2, 3};
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &d));
  tstor_tensor *t = tensor(TSTOR_FLOAT32, 3, s3, vals);
  put_tensor(ck, d, "attn.0", t);
  tstor_tensor_release(t);
  ck_tstor_ok(tstor_checkpoint_set_root(ck, d));
  ck_tstor_ok(tstor_safetensors_save(ck, path_in("a.safetensors"), NULL));
  expect_file(path_in("a.safetensors"), attn, sizeof attn);
  tstor_checkpoint_free(ck);

  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &d));
  t = tensor(TSTOR_FLOAT32, 4, s4, vals);
  put_tensor(ck, d, "attn0", t);
  tstor_tensor_release(t);
  ck_tstor_ok(tstor_checkpoint_set_root(ck, d));
  ck_tstor_ok(tstor_safetensors_save(ck, path_in("b.safetensors"), NULL));
  expect_file(path_in("b.safetensors"), aligned, sizeof aligned);
  tstor_checkpoint_free(ck);

  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &d));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, d));
  ck_tstor_ok(tstor_safetensors_save(ck, path_in("c.safetensors"), NULL));
  expect_file(path_in("c.safetensors"), empty, sizeof empty);
  tstor_value *md;
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &md));
  ck_tstor_ok(tstor_value_dict_set(md, str(ck, "framework"), str(ck, "pt")));
  ck_tstor_ok(tstor_checkpoint_set_metadata(ck, md));
  ck_tstor_ok(tstor_safetensors_save(ck, path_in("d.safetensors"), NULL));
  expect_file(path_in("d.safetensors"), empty_md, sizeof empty_md);
  tstor_checkpoint_free(ck);

  /* and they read back: values, shape, metadata */
  ck_tstor_ok(tstor_safetensors_load(ctx, path_in("a.safetensors"), NULL, &ck));
  const tstor_value *v = tstor_value_dict_get(tstor_checkpoint_root(ck), "attn.0");
  ck_assert_int_eq(tstor_tensor_dim(tstor_value_tensor(v)), 3);
  ck_assert(memcmp(tstor_tensor_data(tstor_value_tensor(v)), vals, sizeof vals) == 0);
  tstor_checkpoint_free(ck);
  ck_tstor_ok(tstor_safetensors_load(ctx, path_in("d.safetensors"), NULL, &ck));
  ck_assert_str_eq(tstor_value_string(tstor_value_dict_get(tstor_checkpoint_metadata(ck), "framework"), NULL), "pt");
  ck_assert_int_eq(tstor_value_len(tstor_checkpoint_root(ck)), 0);
  tstor_checkpoint_free(ck);
}
END_TEST

/* Mixed dtypes: written largest alignment first, then by name; every
 * tensor's bytes land aligned, so all of them map. */
START_TEST(order_and_alignment) {
  static const struct {
    const char *name;
    tstor_dtype dt;
  } ts[] = {{"z8", TSTOR_UINT8}, {"b", TSTOR_BOOL}, {"h", TSTOR_FLOAT16}, {"a64", TSTOR_INT64},
            {"f", TSTOR_FLOAT32}, {"d", TSTOR_FLOAT64}, {"i8", TSTOR_INT8}, {"bf", TSTOR_BFLOAT16},
            {"i32", TSTOR_INT32}, {"s", TSTOR_INT16}, {"e5", TSTOR_FLOAT8_E5M2}, {"a8", TSTOR_UINT8}};
  static const char *want_order[] = {"a64", "d", "f", "i32", "bf", "h", "s", "e5", "i8", "a8", "z8", "b"};
  tstor_checkpoint *ck;
  tstor_value *d;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &d));
  unsigned char raw[64];
  for (int i = 0; i < 64; i++) raw[i] = (unsigned char)(i & 1);
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
    int64_t n = 3;
    tstor_tensor *t = tensor(ts[i].dt, 1, &n, raw);
    put_tensor(ck, d, ts[i].name, t);
    tstor_tensor_release(t);
  }
  ck_tstor_ok(tstor_checkpoint_set_root(ck, d));
  ck_tstor_ok(tstor_safetensors_save(ck, path_in("m.safetensors"), NULL));
  tstor_checkpoint_free(ck);
  size_t len;
  unsigned char *bytes = (unsigned char *)tstor_test_slurp(path_in("m.safetensors"), &len);
  const char *prev = NULL;
  for (size_t i = 0; i < sizeof want_order / sizeof want_order[0]; i++) {
    char key[16];
    snprintf(key, sizeof key, "\"%s\":{", want_order[i]);
    const char *at = memmem(bytes, len, key, strlen(key));
    ck_assert_msg(at && (!prev || at > prev), "%s out of order", want_order[i]);
    prev = at;
  }
  free(bytes);
  tstor_load_options mm = {sizeof mm, NULL, TSTOR_LOAD_MMAP};
  ck_tstor_ok(tstor_safetensors_load(ctx, path_in("m.safetensors"), &mm, &ck));
  const tstor_value *root = tstor_checkpoint_root(ck);
  ck_assert_int_eq(tstor_value_len(root), 12);
  for (size_t i = 0; i < tstor_value_len(root); i++) {
    tstor_tensor *t = tstor_value_tensor(tstor_value_item(root, i));
    ck_assert_str_eq(tstor_value_string(tstor_value_key(root, i), NULL), want_order[i]); /* file order */
    tstor_storage *base = tstor_storage_base(tstor_tensor_storage(t));
    ck_assert(base && (tstor_storage_flags(base) & TSTOR_FLAG_MAPPED));
    ck_assert_int_eq((uintptr_t)tstor_tensor_data(t) % tstor_dtype_size(tstor_tensor_dtype(t)), 0);
  }
  tstor_checkpoint_free(ck);
}
END_TEST

static uint64_t logical_fnv(const tstor_tensor *t) {
  tstor_tensor *c;
  ck_tstor_ok(tstor_tensor_contiguous(t, &c));
  uint64_t h = 0xcbf29ce484222325ull;
  const unsigned char *p = tstor_tensor_data(c);
  for (int64_t i = 0; i < tstor_tensor_nbytes(c); i++) h = (h ^ p[i]) * 0x100000001b3ull;
  tstor_tensor_release(c);
  return h;
}

/* Every golden checkpoint that is a flat dict of tensors of the format's
 * dtypes: to safetensors and back, the same names, dtypes, shapes and bytes.
 * Those whose tensors share storage are refused, naming both, and written
 * with TSTOR_SAVE_COPY_SHARED. */
START_TEST(golden_through_safetensors) {
  static const char *files[] = {"module_linear", "module_mlp", "module_conv_bn", "module_embedding",
                                "module_lstm", "module_layernorm", "many_tensors", "share_dict_float32",
                                "share_dict_int32", "share_dict_bfloat16", "view_transpose_float32",
                                "view_step_int64", "view_expand_float16", "view_channels_last_bool",
                                "dtype_float64_2x3x4", "dtype_bool_7", "dtype_int8_scalar", "dtype_uint8_0",
                                "dtype_int16_3x0x2", "dtype_bfloat16_2x1x3x1x2", "params_lstm",
                                "view_slice_float32", "view_diagonal_int64"};
  int refused = 0;
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    char in[512];
    snprintf(in, sizeof in, CKDIR "/golden/%s.pt", files[f]);
    tstor_checkpoint *pt, *st;
    ck_tstor_ok(tstor_torch_load(ctx, in, NULL, &pt));
    int rc = tstor_safetensors_save(pt, path_in("g.safetensors"), NULL);
    if (rc) {
      ck_assert_msg(rc == TSTOR_EINVAL && strstr(tstor_last_error(), "share a storage"), "%s: %s", files[f],
                    tstor_last_error());
      ck_assert_int_ne(access(path_in("g.safetensors"), F_OK), 0); /* nothing left behind */
      refused++;
      ck_tstor_ok(tstor_safetensors_save(pt, path_in("g.safetensors"), TEST_SAVE_OPTS(TSTOR_SAVE_COPY_SHARED)));
    }
    for (int way = 0; way < 2; way++) {
      tstor_load_options o = {sizeof o, NULL, way ? 0 : TSTOR_LOAD_MMAP}; /* mapped, read */
      ck_tstor_ok(tstor_safetensors_load(ctx, path_in("g.safetensors"), &o, &st));
      const tstor_value *a = tstor_checkpoint_root(pt), *b = tstor_checkpoint_root(st);
      ck_assert_int_eq(tstor_value_len(a), tstor_value_len(b));
      for (size_t i = 0; i < tstor_value_len(a); i++) {
        const char *name = tstor_value_string(tstor_value_key(a, i), NULL);
        tstor_tensor *x = tstor_value_tensor(tstor_value_item(a, i));
        tstor_tensor *y = tstor_value_tensor(tstor_value_dict_get(b, name));
        ck_assert_msg(y != NULL, "%s: %s missing", files[f], name);
        ck_assert_int_eq(tstor_tensor_dtype(x), tstor_tensor_dtype(y));
        ck_assert_int_eq(tstor_tensor_dim(x), tstor_tensor_dim(y));
        for (int d = 0; d < tstor_tensor_dim(x); d++)
          ck_assert_int_eq(tstor_tensor_sizes(x)[d], tstor_tensor_sizes(y)[d]);
        ck_assert(tstor_tensor_is_contiguous(y));
        ck_assert_msg(logical_fnv(x) == logical_fnv(y), "%s: %s bytes differ", files[f], name);
      }
      tstor_checkpoint_free(st);
    }
    unlink(path_in("g.safetensors"));
    tstor_checkpoint_free(pt);
  }
  ck_assert_int_eq(refused, 3); /* the share_dict_* files */
}
END_TEST

/* ----------------------------------------------------------- bad files */

static void header_file(const char *path, const char *json, size_t data_bytes, int64_t len_override) {
  size_t n = strlen(json);
  size_t total = 8 + n + data_bytes;
  unsigned char *b = calloc(1, total + 1);
  uint64_t len = len_override >= 0 ? (uint64_t)len_override : n;
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(len >> (8 * i));
  memcpy(b + 8, json, n);
  spit(path, b, total);
  free(b);
}

/* 126 nested arrays: inside a tensor entry and the root object, 128 levels */
#define DEEP9 "[[[[[[[[["
#define CLOSE9 "]]]]]]]]]"
#define DEEP126 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 \
  CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9

/* What the reference reader accepts that a stricter reading would not: JSON
 * whitespace before the object, fields other than the three in an entry
 * (ignored), "__metadata__": null, -0 inside a string or a float, 127 levels
 * of nesting, and an empty tensor whose element count passes 2^64 only after
 * its 0. */
START_TEST(accepted_as_the_reference_accepts) {
  static const char *ok[] = {
      " \t\r\n{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
      "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":{\"y\":[1,-0.5,\"-0\",1e-0]}}}",
      "{\"__metadata__\":null,\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
      "{\"a\":{\"x\":" DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 DEEP9 "[[[[[[[[" \
      "]]]]]]]]" CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 CLOSE9 \
      ",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
      "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
      "\"b\":{\"dtype\":\"F64\",\"shape\":[0,4611686018427387904,4],\"data_offsets\":[1,1]}}",
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char *p = path_in("ok.safetensors");
    header_file(p, ok[i], 1, -1);
    tstor_checkpoint *ck;
    ck_assert_msg(tstor_safetensors_load(ctx, p, NULL, &ck) == 0, "case %zu: %s", i, tstor_last_error());
    const tstor_value *a = tstor_value_dict_get(tstor_checkpoint_root(ck), "a");
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(tstor_tensor_numel(tstor_value_tensor(a)), 1);
    ck_assert_ptr_null(tstor_checkpoint_metadata(ck));
    tstor_checkpoint_free(ck);
  }
}
END_TEST

static const struct {
  const char *name, *json;
  size_t data;
  int64_t len; /* header length to write, -1 for the true one */
  int code;
  const char *says;
} bad[] = {
    {"huge_header", "{}", 0, 100000001, TSTOR_EINVAL, "at most 100000000"},
    {"header_past_end", "{}", 0, 5000, TSTOR_EINVAL, "a header of 5000 bytes"},
    {"len_all_ones", "{}", 0, INT64_MAX, TSTOR_EINVAL, "at most"},
    {"not_utf8", "{\"\xc3\x28\":1}", 0, -1, TSTOR_EINVAL, "not UTF-8"},
    {"not_object", "[1,2]", 0, -1, TSTOR_EINVAL, "not a JSON object"},
    {"byte_order_mark", "\xef\xbb\xbf{}", 0, -1, TSTOR_EINVAL, "not a JSON object"},
    {"empty_header", "", 0, -1, TSTOR_EINVAL, "not a JSON object"},
    {"minus_zero", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-0],\"data_offsets\":[0,0]}}", 0, -1,
     TSTOR_EINVAL, "-0"},
    {"too_deep", "{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1],\"x\":" DEEP126 "}}",
     1, -1, TSTOR_EINVAL, "deeper than 127"},
    {"bits_overflow",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[4611686018427387904,4,0],\"data_offsets\":[0,0]}}", 0, -1,
     TSTOR_EOVERFLOW, "number of elements overflows"},
    {"bits_overflow_f64",
     "{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,0]}}", 0, -1,
     TSTOR_EOVERFLOW, "number of bits overflows"},
    {"f4_half_byte", "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, -1,
     TSTOR_EINVAL, "end inside a byte"},
    {"bad_json", "{\"a\":", 0, -1, TSTOR_EINVAL, "header JSON"},
    {"trailing_garbage", "{} x", 0, -1, TSTOR_EINVAL, "header JSON"},
    {"duplicate",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
     "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
     2, -1, TSTOR_EINVAL, "duplicate"},
    {"unknown_dtype", "{\"a\":{\"dtype\":\"F7\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, -1,
     TSTOR_EINVAL, "unknown dtype"},
    {"f6_part_byte", "{\"a\":{\"dtype\":\"F6_E3M2\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, -1,
     TSTOR_EINVAL, "end inside a byte"},
    {"size_mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, -1,
     TSTOR_EINVAL, "needs 8 bytes"},
    {"gap", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, -1, TSTOR_EINVAL,
     "gap"},
    {"overlap",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
     "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}",
     3, -1, TSTOR_EINVAL, "overlap"},
    {"past_end", "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 4, -1,
     TSTOR_EINVAL, "cover 8 bytes, but 4"},
    {"trailing_data", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 5, -1,
     TSTOR_EINVAL, "cover 2 bytes, but 5"},
    {"end_before_begin", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[3,1]}}", 3, -1,
     TSTOR_EINVAL, "begin <= end"},
    {"negative_shape", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0, -1,
     TSTOR_EINVAL, "non-negative"},
    {"float_shape", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}", 1, -1,
     TSTOR_EINVAL, "non-negative integers"},
    {"shape_overflow",
     "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0, -1,
     TSTOR_EOVERFLOW, "overflows"},
    {"huge_offset",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[99999999999999999999,1]}}", 1, -1,
     TSTOR_EINVAL, "header JSON"},
    {"metadata_number", "{\"__metadata__\":{\"k\":1}}", 0, -1, TSTOR_EINVAL, "not a string"},
    {"metadata_list", "{\"__metadata__\":[]}", 0, -1, TSTOR_EINVAL, "not an object"},
    {"missing_field", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, -1, TSTOR_EINVAL,
     "data_offsets"},
    {"entry_not_object", "{\"a\":3}", 0, -1, TSTOR_EINVAL, "not an object"},
    {"nul_in_name", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
     -1, TSTOR_EINVAL, "header JSON"},
    {"too_many_dims",
     "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
     "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
     "\"data_offsets\":[0,1]}}",
     1, -1, TSTOR_EINVAL, "65 dimensions"},
};

START_TEST(bad_files) {
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *p = path_in("bad.safetensors");
    header_file(p, bad[i].json, bad[i].data, bad[i].len);
    size_t len;
    unsigned char *bytes = (unsigned char *)tstor_test_slurp(p, &len);
    for (int way = 0; way < 4; way++) {
      /* ways: mapped, read (the default), a buffer, a borrowed buffer */
      tstor_load_options o = {sizeof o, NULL, way == 0 ? TSTOR_LOAD_MMAP : way == 3 ? TSTOR_LOAD_BORROW_BUFFER : 0};
      tstor_checkpoint *ck = (tstor_checkpoint *)1;
      int rc = way < 2 ? tstor_safetensors_load(ctx, p, &o, &ck) : tstor_safetensors_load_buffer(ctx, bytes, len, &o, &ck);
      ck_assert_msg(rc == bad[i].code, "%s (way %d): %s (%s), expected %s", bad[i].name, way,
                    tstor_err_name(rc), tstor_last_error(), tstor_err_name(bad[i].code));
      ck_assert_ptr_null(ck);
      ck_assert_msg(strstr(tstor_last_error(), bad[i].says), "%s: \"%s\" does not say \"%s\"", bad[i].name,
                    tstor_last_error(), bad[i].says);
    }
    free(bytes);
  }
  tstor_checkpoint *ck;
  spit(path_in("empty"), "", 0);
  ck_tstor_err(tstor_safetensors_load(ctx, path_in("empty"), NULL, &ck), TSTOR_EINVAL);
  ck_tstor_err(tstor_safetensors_load_buffer(ctx, "abc", 3, NULL, &ck), TSTOR_EINVAL);
  ck_last_error_has("too short");
  ck_tstor_err(tstor_safetensors_load(ctx, path_in("missing"), NULL, &ck), TSTOR_ENOENT);
}
END_TEST

START_TEST(bad_saves) {
  tstor_checkpoint *ck;
  tstor_value *d, *l;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_err(tstor_safetensors_save(ck, path_in("x"), NULL), TSTOR_EINVAL); /* no root */
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_LIST, &l));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, l));
  ck_tstor_err(tstor_safetensors_save(ck, path_in("x"), NULL), TSTOR_EINVAL);
  ck_last_error_has("dict of name -> tensor");
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &d));
  ck_tstor_ok(tstor_value_dict_set(d, str(ck, "n"), str(ck, "not a tensor")));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, d));
  ck_tstor_err(tstor_safetensors_save(ck, path_in("x"), NULL), TSTOR_EINVAL);
  ck_last_error_has("str -> str");
  tstor_checkpoint_free(ck);
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &d));
  int64_t n = 2;
  double c[4] = {1, 2, 3, 4};
  tstor_tensor *t = tensor(TSTOR_COMPLEX128, 1, &n, c);
  put_tensor(ck, d, "c", t);
  tstor_tensor_release(t);
  ck_tstor_ok(tstor_checkpoint_set_root(ck, d));
  ck_tstor_err(tstor_safetensors_save(ck, path_in("x"), NULL), TSTOR_ENOTSUP);
  ck_last_error_has("complex128");
  ck_assert_int_ne(access(path_in("x"), F_OK), 0);
  /* nor for torch 2.15's bcomplex32 (the reference package's save_file raises
   * KeyError: torch.bcomplex32) */
  uint16_t bc[4] = {0x3f80, 0x4000, 0x4040, 0x4080};
  t = tensor(TSTOR_BCOMPLEX32, 1, &n, bc);
  put_tensor(ck, d, "c", t);
  tstor_tensor_release(t);
  ck_tstor_err(tstor_safetensors_save(ck, path_in("x"), NULL), TSTOR_ENOTSUP);
  ck_assert_str_eq(tstor_last_error(), "safetensors has no dtype for tensor 'c' (bcomplex32)");
  ck_assert_int_ne(access(path_in("x"), F_OK), 0);
  ck_tstor_err(tstor_safetensors_save(ck, "/nonexistent/dir/x.safetensors", NULL), TSTOR_ENOTSUP);
  tstor_checkpoint_free(ck);
}
END_TEST

static int by_string(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One golden file's listing as gen_st_golden.py writes it: a line per
 * tensor, sorted (the listing is), newline-terminated. */
static char *golden_listing(const tstor_checkpoint *ck) {
  const tstor_value *root = tstor_checkpoint_root(ck);
  size_t n = tstor_value_len(root);
  char **lines = calloc(n + 1, sizeof *lines);
  ck_assert_ptr_nonnull(lines);
  size_t total = 1;
  for (size_t i = 0; i < n; i++) {
    size_t len;
    const char *name = tstor_value_string(tstor_value_key(root, i), &len);
    const tstor_value *v = tstor_value_item(root, i);
    tstor_tensor *t = tstor_value_tensor(v);
    const char *packed;
    int nd = tstor_tensor_dim(t);
    int64_t sizes[TSTOR_TENSOR_MAX_DIM];
    char dt[64];
    if (tstor_safetensors_packed(ck, v, &packed, &nd, sizes) == 0) {
      snprintf(dt, sizeof dt, "packed:%s", packed);
    } else {
      snprintf(dt, sizeof dt, "%s", tstor_dtype_name(tstor_tensor_dtype(t)));
      memcpy(sizes, tstor_tensor_sizes(t), (size_t)nd * sizeof *sizes);
    }
    size_t nb = (size_t)tstor_tensor_nbytes(t), cap = 2 * len + 64 + 24 * (size_t)nd + 2 * nb + 2;
    char *l = malloc(cap), *at = l;
    ck_assert_ptr_nonnull(l);
    at += sprintf(at, "t ");
    for (size_t k = 0; k < len; k++) at += sprintf(at, "%02x", (unsigned char)name[k]);
    at += sprintf(at, " %s sizes=", dt);
    for (int d = 0; d < nd; d++) at += sprintf(at, "%s%lld", d ? "," : "", (long long)sizes[d]);
    at += sprintf(at, " hex=");
    const unsigned char *p = tstor_tensor_data(t);
    for (size_t k = 0; k < nb; k++) at += sprintf(at, "%02x", p[k]);
    if (!nb) at += sprintf(at, "-");
    lines[i] = l;
    total += (size_t)(at - l) + 1;
  }
  qsort(lines, n, sizeof *lines, by_string);
  char *all = malloc(total), *at = all;
  ck_assert_ptr_nonnull(all);
  *at = 0;
  for (size_t i = 0; i < n; i++) {
    at += sprintf(at, "%s\n", lines[i]);
    free(lines[i]);
  }
  free(lines);
  return all;
}

/* Files the safetensors package wrote from torch 2.x tensors, every dtype
 * (ckpt/gen_st_golden.py): each tensor as the package loads it, every byte,
 * read and mapped; saved again, the package's file byte for byte. */
START_TEST(golden_from_the_package) {
  size_t len;
  char *text = tstor_test_slurp(CKDIR "/st_golden.txt", &len);
  ck_assert_ptr_nonnull(text);
  int files = 0, tensors = 0;
  char *file = strstr(text, "\nfile ");
  while (file) {
    char *name = file + 6, *eol = strchr(name, '\n');
    *eol = 0;
    char *want = eol + 1, *next = strstr(want, "\nfile ");
    if (next) next[1] = 0; /* want ends with its newline */
    char path[512];
    snprintf(path, sizeof path, CKDIR "/st_golden/%s", name);
    for (int way = 0; way < 2; way++) {
      tstor_load_options o = {sizeof o, NULL, way ? 0 : TSTOR_LOAD_MMAP};
      tstor_checkpoint *ck;
      ck_tstor_ok(tstor_safetensors_load(ctx, path, &o, &ck));
      char *got = golden_listing(ck);
      ck_assert_msg(strcmp(got, want) == 0, "%s: tstor reads\n%s\nthe package\n%s", name, got,
                    want);
      free(got);
      if (way == 0) {
        tensors += (int)tstor_value_len(tstor_checkpoint_root(ck));
        ck_tstor_ok(tstor_safetensors_save(ck, path_in("again.safetensors"), NULL));
        size_t n;
        char *orig = tstor_test_slurp(path, &n);
        expect_file(path_in("again.safetensors"), (const unsigned char *)orig, n);
        free(orig);
      }
      tstor_checkpoint_free(ck);
    }
    files++;
    if (next) next[1] = 'f';
    file = next;
  }
  free(text);
  ck_assert_int_ge(files, 23);
  ck_assert_int_ge(tensors, 280);
}
END_TEST

int main(void) {
  Suite *s = suite_create("safetensors");
  TCase *tc = tcase_create("safetensors");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, reference_files);
  tcase_add_test(tc, complex64_is_c64);
  tcase_add_test(tc, order_and_alignment);
  tcase_add_test(tc, golden_through_safetensors);
  tcase_add_test(tc, golden_from_the_package);
  tcase_add_test(tc, bad_files);
  tcase_add_test(tc, accepted_as_the_reference_accepts);
  tcase_add_test(tc, bad_saves);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
