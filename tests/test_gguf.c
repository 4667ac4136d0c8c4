/* GGUF: the hostile files (gguf/hostile.txt) refused every way with their
 * code and an offset; the golden files' metadata through the typed reads;
 * tensors in PyTorch's order; quantized values kept and decoded, the two
 * types the gguf package cannot write (Q8_1 and Q2_0, by ggml's layout)
 * included; mapping; large legitimate files past the guards; and a small
 * file that cannot make a load ask for much memory. gguf/check.sh compares
 * every byte and value with GGUFReader's. */
#define _GNU_SOURCE
#include "testutil.h"

#include <fcntl.h>
#include <math.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tstor/codec.h>
#include <tstor/serialize.h>
#include <tstor/tensor.h>

#define GDIR TSTOR_TEST_SRCDIR "/gguf"

static tstor_context *ctx;

static void setup(void) { ck_tstor_ok(tstor_context_open(NULL, &ctx)); }
static void teardown(void) { tstor_context_close(ctx); }

/* ------------------------------------------------------ a GGUF builder */

typedef struct gbuf {
  uint8_t *p;
  size_t n, cap;
} gbuf;

static void put(gbuf *b, const void *p, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2;
    b->p = realloc(b->p, b->cap);
    ck_assert_ptr_nonnull(b->p);
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
}
static void put_u32(gbuf *b, uint32_t v) { put(b, &v, 4); } /* little-endian hosts only */
static void put_u64(gbuf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(gbuf *b, const char *s) {
  put_u64(b, strlen(s));
  put(b, s, strlen(s));
}
static void pad(gbuf *b, size_t align) {
  static const uint8_t zeros[64];
  put(b, zeros, (align - b->n % align) % align);
}
static void header(gbuf *b, uint64_t nt, uint64_t nkv) {
  put(b, "GGUF", 4);
  put_u32(b, 3);
  put_u64(b, nt);
  put_u64(b, nkv);
}
/* A tensor info: ne in ggml's order. */
static void tinfo(gbuf *b, const char *name, int nd, const uint64_t *ne, uint32_t type,
                  uint64_t offset) {
  put_str(b, name);
  put_u32(b, (uint32_t)nd);
  for (int d = 0; d < nd; d++) put_u64(b, ne[d]);
  put_u32(b, type);
  put_u64(b, offset);
}

static tstor_checkpoint *load_buf(const gbuf *b) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_gguf_load_buffer(ctx, b->p, b->n, NULL, &ck));
  return ck;
}

static const tstor_value *md(const tstor_checkpoint *ck, const char *key) {
  const tstor_value *v = tstor_value_dict_get(tstor_checkpoint_metadata(ck), key);
  ck_assert_msg(v != NULL, "no metadata '%s'", key);
  return v;
}

static const tstor_value *tensor(const tstor_checkpoint *ck, const char *name) {
  const tstor_value *v = tstor_value_dict_get(tstor_checkpoint_root(ck), name);
  ck_assert_msg(v != NULL, "no tensor '%s'", name);
  return v;
}

/* ------------------------------------------------------------ hostile */

static char *write_temp(const void *p, size_t n) {
  static char path[64];
  strcpy(path, "/tmp/tstor-gguf-XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
  close(fd);
  return path;
}

/* Every way of loading `name` must give `code`, with `words` and, from the
 * GGUF loader, the item's offset in the message; and nothing in *out. */
static void refused_every_way(const char *name, int code, const char *words) {
  char *path;
  ck_assert(asprintf(&path, GDIR "/hostile/%s", name) > 0);
  size_t n;
  char *data = tstor_test_slurp(path, &n);
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  static const unsigned flags[] = {0, TSTOR_LOAD_MMAP};
  for (int way = 0; way < 6; way++) {
    tstor_checkpoint *ck = (tstor_checkpoint *)&ck;
    int rc, fd = -1;
    o.flags = flags[way % 2];
    switch (way) {
      case 0:
      case 1: rc = tstor_gguf_load(ctx, path, &o, &ck); break;
      case 2: rc = tstor_gguf_load_buffer(ctx, data, n, NULL, &ck); break;
      case 3:
        o.flags = TSTOR_LOAD_BORROW_BUFFER;
        rc = tstor_gguf_load_buffer(ctx, data, n, &o, &ck);
        break;
      case 4:
        fd = open(path, O_RDONLY);
        rc = tstor_checkpoint_load_fd(ctx, fd, NULL, &ck);
        close(fd);
        break;
      default: rc = tstor_checkpoint_load(ctx, path, NULL, &ck); break;
    }
    ck_assert_msg(rc == code, "%s, way %d: %s, not %s (%s)", name, way, tstor_err_name(rc),
                  tstor_err_name(code), tstor_last_error());
    ck_assert_ptr_null(ck);
    ck_assert_msg(strstr(tstor_last_error(), words), "%s, way %d: \"%s\" does not say \"%s\"", name,
                  way, tstor_last_error(), words);
    if (way < 4)
      ck_assert_msg(strstr(tstor_last_error(), "offset "), "%s, way %d: \"%s\" names no offset",
                    name, way, tstor_last_error());
  }
  free(data);
  free(path);
}

START_TEST(hostile_files) {
  size_t len;
  char *list = tstor_test_slurp(GDIR "/hostile.txt", &len), *save = NULL;
  int n = 0;
  for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#') continue;
    char name[128], code[32];
    int used;
    ck_assert_int_eq(sscanf(line, "%127s %31s %n", name, code, &used), 2);
    int want = 0;
    for (int c = -1; c > -200 && !want; c--)
      if (strcmp(tstor_err_name(c), code) == 0) want = c;
    ck_assert_msg(want, "%s: unknown code %s", name, code);
    refused_every_way(name, want, line + used);
    n++;
  }
  ck_assert_int_ge(n, 50);
  fprintf(stderr, "gguf: %d hostile files, each refused six ways\n", n);
  free(list);
}
END_TEST

/* In a child limited to 256 MiB of address space: every hostile file loads
 * to its refusal, not to TSTOR_ENOMEM, so no file of a few bytes made a
 * load ask for gigabytes before it was refused. */
START_TEST(small_files_cost_little) {
  if (UNDER_ASAN) return; /* its shadow memory takes the address space */
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    struct rlimit r = {(rlim_t)256 << 20, (rlim_t)256 << 20};
    struct rlimit cur;
    getrlimit(RLIMIT_AS, &cur);
    if (cur.rlim_cur == RLIM_INFINITY || cur.rlim_cur > r.rlim_cur) setrlimit(RLIMIT_AS, &r);
    size_t len;
    char *list = tstor_test_slurp(GDIR "/hostile.txt", &len), *save = NULL;
    for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
      char name[128], *path;
      if (line[0] == '#' || sscanf(line, "%127s", name) != 1) continue;
      if (asprintf(&path, GDIR "/hostile/%s", name) < 0) _exit(3);
      tstor_checkpoint *ck;
      int rc = tstor_gguf_load(ctx, path, NULL, &ck);
      if (rc == TSTOR_ENOMEM || rc == 0) {
        fprintf(stderr, "%s: %s\n", name, tstor_last_error());
        _exit(1);
      }
      free(path);
    }
    _exit(0);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a hostile file ran out of memory");
}
END_TEST

/* ------------------------------------------------------------ metadata */

START_TEST(metadata_typed) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_gguf_load(ctx, GDIR "/golden/metadata.gguf", NULL, &ck));
  int64_t i;
  uint64_t u;
  double d;
  int b;
  const char *s;
  size_t n;
  tstor_gguf_type elem;
  /* a u64 past int64: whole through get_uint64, ERANGE through get_int64 */
  const tstor_value *big = md(ck, "t.uint64.hi");
  ck_tstor_ok(tstor_value_get_uint64(big, &u));
  ck_assert(u == UINT64_MAX);
  i = 42;
  ck_tstor_err(tstor_value_get_int64(big, &i), TSTOR_ERANGE);
  ck_assert_int_eq(i, 42);
  ck_assert_int_eq(tstor_value_gguf_type(big, NULL), TSTOR_GGUF_UINT64);
  ck_tstor_ok(tstor_value_get_int64(md(ck, "t.int8.lo"), &i));
  ck_assert_int_eq(i, -128);
  ck_assert_int_eq(tstor_value_gguf_type(md(ck, "t.int8.lo"), NULL), TSTOR_GGUF_INT8);
  ck_tstor_ok(tstor_value_get_int64(md(ck, "t.int64.lo"), &i));
  ck_assert(i == INT64_MIN);
  ck_tstor_err(tstor_value_get_uint64(md(ck, "t.int64.lo"), &u), TSTOR_ERANGE);
  /* mismatches are errors, never aborts */
  ck_tstor_err(tstor_value_get_string(md(ck, "t.uint32.hi"), &s, &n), TSTOR_EINVAL);
  ck_last_error_has("int");
  ck_tstor_err(tstor_value_get_double(md(ck, "t.str.ascii"), &d), TSTOR_EINVAL);
  ck_tstor_err(tstor_value_get_bool(md(ck, "t.int32.hi"), &b), TSTOR_EINVAL);
  ck_tstor_err(tstor_value_get_int64(md(ck, "t.bool.true"), &i), TSTOR_EINVAL);
  ck_tstor_err(tstor_value_get_int64(NULL, &i), TSTOR_EINVAL);
  ck_tstor_err(tstor_value_get_string(md(ck, "a.uint8"), &s, &n), TSTOR_EINVAL);
  ck_tstor_ok(tstor_value_get_bool(md(ck, "t.bool.true"), &b));
  ck_assert_int_eq(b, 1);
  ck_tstor_ok(tstor_value_get_double(md(ck, "t.float32.0"), &d));
  ck_assert(d == (double)0.1f);
  ck_tstor_ok(tstor_value_get_double(md(ck, "t.float64.4"), &d));
  ck_assert(isnan(d));
  ck_tstor_ok(tstor_value_get_string(md(ck, "t.str.unicode"), &s, &n));
  ck_assert_str_eq(s, "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80");
  ck_tstor_ok(tstor_value_get_string(md(ck, "t.str.nul"), &s, &n));
  ck_assert_int_eq(n, 3);
  /* bytes that are not UTF-8 stay bytes, still a GGUF string */
  const tstor_value *raw = md(ck, "t.str.bytes");
  ck_assert_int_eq(tstor_value_kind_of(raw), TSTOR_VALUE_BYTES);
  ck_assert_int_eq(tstor_value_gguf_type(raw, NULL), TSTOR_GGUF_STRING);
  ck_tstor_ok(tstor_value_get_string(raw, &s, &n));
  ck_assert_int_eq((unsigned char)s[0], 0xff);
  /* arrays */
  const tstor_value *vocab = md(ck, "tokenizer.ggml.tokens");
  ck_assert_int_eq(tstor_value_gguf_type(vocab, &elem), TSTOR_GGUF_ARRAY);
  ck_assert_int_eq(elem, TSTOR_GGUF_STRING);
  ck_assert_uint_eq(tstor_value_len(vocab), 3005);
  ck_assert_str_eq(tstor_value_string(tstor_value_item(vocab, 1), NULL), "<s>");
  ck_assert_int_eq(tstor_value_gguf_type(md(ck, "a.float32"), &elem), TSTOR_GGUF_ARRAY);
  ck_assert_int_eq(elem, TSTOR_GGUF_FLOAT32);
  ck_tstor_ok(tstor_value_get_uint64(tstor_value_item(md(ck, "a.uint64"), 2), &u));
  ck_assert(u == UINT64_MAX);
  tstor_checkpoint_free(ck);
}
END_TEST

START_TEST(set_gguf_type) {
  tstor_checkpoint *ck;
  tstor_value *v, *l, *s;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new_int(ck, 300, &v));
  ck_assert_int_eq(tstor_value_gguf_type(v, NULL), -1);
  ck_tstor_err(tstor_value_set_gguf_type(v, TSTOR_GGUF_UINT8), TSTOR_ERANGE);
  ck_tstor_err(tstor_value_set_gguf_type(v, TSTOR_GGUF_STRING), TSTOR_EINVAL);
  ck_tstor_err(tstor_value_set_gguf_type(v, (tstor_gguf_type)13), TSTOR_EINVAL);
  ck_assert_int_eq(tstor_value_gguf_type(v, NULL), -1);
  ck_tstor_ok(tstor_value_set_gguf_type(v, TSTOR_GGUF_UINT16));
  ck_assert_int_eq(tstor_value_gguf_type(v, NULL), TSTOR_GGUF_UINT16);
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_LIST, &l));
  ck_tstor_ok(tstor_value_append(l, v));
  ck_tstor_ok(tstor_value_new_string(ck, "x", 1, &s));
  ck_tstor_ok(tstor_value_append(l, s));
  ck_tstor_err(tstor_value_set_gguf_type(l, TSTOR_GGUF_INT32), TSTOR_EINVAL);
  ck_assert_int_eq(tstor_value_gguf_type(v, NULL), TSTOR_GGUF_UINT16); /* unchanged */
  ck_tstor_err(tstor_value_set_gguf_type(l, TSTOR_GGUF_ARRAY), TSTOR_EINVAL);
  tstor_checkpoint_free(ck);
}
END_TEST

/* ------------------------------------------------------------- tensors */

/* ne [3, 2] in the file is a [2, 3] tensor whose rows are ne[0]'s. */
START_TEST(dimensions_reversed) {
  gbuf b = {0};
  header(&b, 1, 0);
  tinfo(&b, "w", 2, (const uint64_t[]){3, 2}, 0, 0);
  pad(&b, 32);
  float v[6] = {0, 1, 2, 3, 4, 5};
  put(&b, v, sizeof v);
  tstor_checkpoint *ck = load_buf(&b);
  tstor_tensor *t = tstor_value_tensor(tensor(ck, "w"));
  ck_assert_int_eq(tstor_tensor_dim(t), 2);
  ck_assert_int_eq(tstor_tensor_sizes(t)[0], 2);
  ck_assert_int_eq(tstor_tensor_sizes(t)[1], 3);
  ck_assert(((const float *)tstor_tensor_data(t))[1 * 3 + 2] == 5.0f);
  ck_assert_int_eq(tstor_checkpoint_storage_offset(ck, 0), 96);
  tstor_checkpoint_free(ck);
  free(b.p);
}
END_TEST

START_TEST(plain_types) {
  static const struct {
    const char *name;
    tstor_dtype dt;
  } want[] = {{"F32.2x3", TSTOR_FLOAT32}, {"F16.2x3", TSTOR_FLOAT16},  {"F64.2x3", TSTOR_FLOAT64},
              {"I8.2x3", TSTOR_INT8},     {"I16.2x3", TSTOR_INT16},    {"I32.2x3", TSTOR_INT32},
              {"I64.2x3", TSTOR_INT64},   {"BF16.3x4", TSTOR_BFLOAT16}};
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_gguf_load(ctx, GDIR "/golden/plain.gguf", NULL, &ck));
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    const tstor_value *v = tensor(ck, want[i].name);
    ck_assert_int_eq(tstor_value_kind_of(v), TSTOR_VALUE_TENSOR);
    ck_assert_int_eq(tstor_tensor_dtype(tstor_value_tensor(v)), want[i].dt);
    ck_assert_int_eq(tstor_value_ggml_type(v), -1);
  }
  tstor_tensor *s = tstor_value_tensor(tensor(ck, "F32.scalar"));
  ck_assert_int_eq(tstor_tensor_dim(s), 0);
  ck_assert_int_eq(tstor_tensor_numel(s), 1);
  ck_assert_int_eq(tstor_tensor_numel(tstor_value_tensor(tensor(ck, "F32.empty"))), 0);
  const int64_t *sz = tstor_tensor_sizes(tstor_value_tensor(tensor(ck, "I16.1x2x1x3")));
  ck_assert(sz[0] == 1 && sz[1] == 2 && sz[2] == 1 && sz[3] == 3);
  tstor_checkpoint_free(ck);
}
END_TEST

/* A mapped load's storages are views of the file, at the offsets it says. */
START_TEST(mapped) {
  tstor_checkpoint *ck;
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  o.flags = TSTOR_LOAD_MMAP;
  ck_tstor_ok(tstor_gguf_load(ctx, GDIR "/golden/quant.gguf", &o, &ck));
  size_t n = tstor_checkpoint_storage_count(ck);
  ck_assert_uint_gt(n, 20);
  tstor_storage *s, *whole = NULL;
  for (size_t i = 0; i < n; i++) {
    ck_tstor_ok(tstor_checkpoint_storage(ck, i, NULL, &s));
    ck_assert_ptr_nonnull(tstor_storage_base(s));
    whole = whole ? whole : tstor_storage_base(s);
    ck_assert_ptr_eq(tstor_storage_base(s), whole);
    ck_assert_int_eq((int64_t)tstor_storage_offset(s), tstor_checkpoint_storage_offset(ck, i));
  }
  tstor_checkpoint_free(ck);
}
END_TEST

/* ----------------------------------------------------------- quantized */

START_TEST(quantized_values) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_gguf_load(ctx, GDIR "/golden/quant.gguf", NULL, &ck));
  const tstor_value *q = tensor(ck, "r.Q4_K");
  ck_assert_int_eq(tstor_value_kind_of(q), TSTOR_VALUE_QUANTIZED);
  ck_assert_int_eq(tstor_value_ggml_type(q), 12);
  ck_assert_str_eq(tstor_ggml_type_name(12), "Q4_K");
  int64_t block, bytes;
  ck_tstor_ok(tstor_ggml_type_block(12, &block, &bytes));
  ck_assert(block == 256 && bytes == 144);
  ck_tstor_err(tstor_ggml_type_block(4, &block, &bytes), TSTOR_EINVAL);
  ck_assert_ptr_null(tstor_ggml_type_name(43));
  const int64_t *sizes;
  ck_assert_int_eq(tstor_value_quantized_shape(q, &sizes), 2);
  ck_assert(sizes[0] == 2 && sizes[1] == 512);
  tstor_tensor *blocks = tstor_value_tensor(q);
  ck_assert_int_eq(tstor_tensor_dtype(blocks), TSTOR_UINT8);
  ck_assert(tstor_tensor_sizes(blocks)[0] == 2 && tstor_tensor_sizes(blocks)[1] == 288);
  /* float16 and bfloat16 are the float32 values rounded */
  tstor_tensor *f32, *f16, *bf16;
  ck_tstor_ok(tstor_value_dequantize(q, TSTOR_FLOAT32, &f32));
  ck_tstor_ok(tstor_value_dequantize(q, TSTOR_FLOAT16, &f16));
  ck_tstor_ok(tstor_value_dequantize(q, TSTOR_BFLOAT16, &bf16));
  ck_assert(tstor_tensor_sizes(f32)[0] == 2 && tstor_tensor_sizes(f32)[1] == 512);
  const float *x = tstor_tensor_data(f32);
  const uint16_t *h = tstor_tensor_data(f16), *g = tstor_tensor_data(bf16);
  for (int k = 0; k < 1024; k++) {
    if (isnan(x[k])) continue;
    ck_assert_int_eq(h[k], tstor_f32_to_f16(x[k]));
    ck_assert_int_eq(g[k], tstor_f32_to_bf16(x[k], 0x7fc0));
  }
  tstor_tensor_release(f32);
  tstor_tensor_release(f16);
  tstor_tensor_release(bf16);
  tstor_tensor *t = (tstor_tensor *)&t;
  ck_tstor_err(tstor_value_dequantize(q, TSTOR_INT32, &t), TSTOR_EINVAL);
  ck_assert_ptr_null(t);
  ck_tstor_err(tstor_value_dequantize(md(ck, "general.architecture"), TSTOR_FLOAT32, &t),
               TSTOR_EINVAL);
  ck_assert_int_eq(tstor_value_ggml_type(md(ck, "general.architecture")), -1);
  ck_assert_int_eq(tstor_value_quantized_shape(md(ck, "general.architecture"), &sizes), -1);
  /* the whole tree made plain: every quantized value becomes a float tensor */
  ck_tstor_ok(tstor_checkpoint_dequantize(ck, TSTOR_FLOAT32));
  const tstor_value *root = tstor_checkpoint_root(ck);
  for (size_t i = 0; i < tstor_value_len(root); i++)
    ck_assert_int_eq(tstor_value_kind_of(tstor_value_item(root, i)), TSTOR_VALUE_TENSOR);
  tstor_tensor *now = tstor_value_tensor(tensor(ck, "r.Q4_K"));
  ck_assert_int_eq(tstor_tensor_dtype(now), TSTOR_FLOAT32);
  ck_assert_int_eq(tstor_tensor_numel(now), 1024);
  tstor_checkpoint_free(ck);
}
END_TEST

static uint16_t f16(float f) { return tstor_f32_to_f16(f); }

/* Q8_1 and Q2_0, which the gguf package cannot write (its Q8_1 is the 40-byte
 * block ggml dropped; Q2_0 is newer than it), decoded as ggml-quants.c does. */
START_TEST(ggml_only_types) {
  gbuf b = {0};
  header(&b, 2, 0);
  tinfo(&b, "q8_1", 1, (const uint64_t[]){32}, 9, 0);
  tinfo(&b, "q2_0", 1, (const uint64_t[]){64}, 42, 64);
  pad(&b, 32);
  uint16_t d = f16(0.5f), s = f16(3.0f);
  put(&b, &d, 2);
  put(&b, &s, 2);
  for (int i = 0; i < 32; i++) {
    int8_t q = (int8_t)(i * 7 - 100);
    put(&b, &q, 1);
  }
  pad(&b, 32);
  d = f16(-1.5f);
  put(&b, &d, 2);
  for (int i = 0; i < 16; i++) {
    uint8_t q = (uint8_t)(i * 37 + 11);
    put(&b, &q, 1);
  }
  pad(&b, 32);
  tstor_checkpoint *ck = load_buf(&b);
  tstor_tensor *t;
  ck_tstor_ok(tstor_value_dequantize(tensor(ck, "q8_1"), TSTOR_FLOAT32, &t));
  for (int i = 0; i < 32; i++)
    ck_assert(((const float *)tstor_tensor_data(t))[i] == (float)(int8_t)(i * 7 - 100) * 0.5f);
  tstor_tensor_release(t);
  ck_tstor_ok(tstor_value_dequantize(tensor(ck, "q2_0"), TSTOR_FLOAT32, &t));
  for (int i = 0; i < 64; i++) {
    int q = ((i / 4 * 37 + 11) & 0xFF) >> (2 * (i % 4)) & 3;
    ck_assert(((const float *)tstor_tensor_data(t))[i] == (float)(q - 1) * -1.5f);
  }
  tstor_tensor_release(t);
  tstor_checkpoint_free(ck);
  free(b.p);
}
END_TEST

START_TEST(new_quantized) {
  tstor_checkpoint *ck;
  tstor_value *v = (tstor_value *)&v;
  tstor_tensor *blocks;
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  int64_t n = 2 * 18, sizes[2] = {2, 32};
  ck_tstor_ok(tstor_tensor_zeros(ctx, cpu, TSTOR_UINT8, 1, &n, &blocks));
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_err(tstor_value_new_quantized(ck, 0, 2, sizes, blocks, &v), TSTOR_EINVAL); /* F32 */
  ck_assert_ptr_null(v);
  ck_tstor_err(tstor_value_new_quantized(ck, 8, 2, sizes, blocks, &v), TSTOR_EINVAL); /* Q8_0 */
  sizes[1] = 33;
  ck_tstor_err(tstor_value_new_quantized(ck, 2, 2, sizes, blocks, &v), TSTOR_EINVAL);
  sizes[1] = 32;
  ck_tstor_ok(tstor_value_new_quantized(ck, 2, 2, sizes, blocks, &v));
  ck_assert_int_eq(tstor_value_ggml_type(v), 2);
  tstor_tensor *f;
  ck_tstor_ok(tstor_value_dequantize(v, TSTOR_FLOAT32, &f));
  ck_assert_int_eq(tstor_tensor_numel(f), 64);
  tstor_tensor_release(f);
  tstor_tensor_release(blocks);
  tstor_checkpoint_free(ck);
}
END_TEST

/* ------------------------------------------------- large and legitimate */

/* A vocabulary of a million strings (a header of megabytes, read again
 * longer from a file) and 10,000 tensors pass the guards. */
START_TEST(large_legitimate) {
  enum { VOCAB = 1000000, TENSORS = 10000 };
  gbuf b = {0};
  header(&b, TENSORS, 2);
  put_str(&b, "tokenizer.ggml.tokens");
  put_u32(&b, 9);
  put_u32(&b, 8);
  put_u64(&b, VOCAB);
  char tok[32];
  for (int i = 0; i < VOCAB; i++) {
    snprintf(tok, sizeof tok, "t%d", i);
    put_str(&b, tok);
  }
  put_str(&b, "tokenizer.ggml.scores");
  put_u32(&b, 9);
  put_u32(&b, 6);
  put_u64(&b, VOCAB);
  for (int i = 0; i < VOCAB; i++) {
    float f = (float)-i;
    put(&b, &f, 4);
  }
  for (int i = 0; i < TENSORS; i++) {
    snprintf(tok, sizeof tok, "blk.%d.w", i);
    tinfo(&b, tok, 2, (const uint64_t[]){8, 1}, 0, (uint64_t)i * 32);
  }
  pad(&b, 32);
  for (int i = 0; i < TENSORS; i++) {
    float row[8] = {(float)i};
    put(&b, row, sizeof row);
  }
  char *path = write_temp(b.p, b.n);
  for (int mmap = 0; mmap < 2; mmap++) {
    tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
    o.flags = mmap ? TSTOR_LOAD_MMAP : 0;
    tstor_checkpoint *ck;
    ck_tstor_ok(tstor_gguf_load(ctx, path, &o, &ck));
    ck_assert_uint_eq(tstor_value_len(md(ck, "tokenizer.ggml.tokens")), VOCAB);
    ck_assert_str_eq(
        tstor_value_string(tstor_value_item(md(ck, "tokenizer.ggml.tokens"), VOCAB - 1), NULL),
        "t999999");
    ck_assert_uint_eq(tstor_value_len(tstor_checkpoint_root(ck)), TENSORS);
    const float *last = tstor_tensor_data(tstor_value_tensor(tensor(ck, "blk.9999.w")));
    ck_assert(last[0] == 9999.0f);
    tstor_checkpoint_free(ck);
  }
  unlink(path);
  free(b.p);
}
END_TEST

/* --------------------------------------------------------------- saving */

/* A file GGUFWriter wrote, loaded and saved, is the same file. */
START_TEST(save_same_file) {
  static const char *const files[] = {"metadata.gguf", "plain.gguf", "quant.gguf"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char *path;
    ck_assert(asprintf(&path, GDIR "/golden/%s", files[i]) > 0);
    size_t n, m;
    char *want = tstor_test_slurp(path, &n);
    for (int mmap = 0; mmap < 2; mmap++) {
      tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
      o.flags = mmap ? TSTOR_LOAD_MMAP : 0;
      tstor_checkpoint *ck;
      void *got;
      ck_tstor_ok(tstor_gguf_load(ctx, path, &o, &ck));
      ck_tstor_ok(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_GGUF, NULL, &got, &m));
      ck_assert_msg(m == n && memcmp(got, want, n) == 0, "%s: saved as %zu other bytes", files[i],
                    m);
      free(got);
      tstor_checkpoint_free(ck);
    }
    free(want);
    free(path);
  }
}
END_TEST

static tstor_value *str(tstor_checkpoint *ck, const char *s) {
  tstor_value *v;
  ck_tstor_ok(tstor_value_new_string(ck, s, strlen(s), &v));
  return v;
}

/* A tree built by hand: values written with the types they carry or their
 * kinds give, general.alignment as a u32, read back the same. */
START_TEST(save_built_tree) {
  tstor_checkpoint *ck, *back;
  tstor_value *root, *meta, *v, *list, *item;
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &root));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &meta));
  ck_tstor_ok(tstor_value_new_int(ck, 64, &v));
  ck_tstor_ok(tstor_value_dict_set(meta, str(ck, "general.alignment"), v));
  ck_tstor_ok(tstor_value_new_int(ck, -5, &v));
  ck_tstor_ok(tstor_value_dict_set(meta, str(ck, "n"), v));
  ck_tstor_ok(tstor_value_new_int(ck, 7, &v));
  ck_tstor_ok(tstor_value_set_gguf_type(v, TSTOR_GGUF_UINT8));
  ck_tstor_ok(tstor_value_dict_set(meta, str(ck, "u8"), v));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_LIST, &list));
  for (int i = 0; i < 3; i++) {
    ck_tstor_ok(tstor_value_new_float(ck, i * 0.5, &item));
    ck_tstor_ok(tstor_value_append(list, item));
  }
  ck_tstor_ok(tstor_value_set_gguf_type(list, TSTOR_GGUF_FLOAT32));
  ck_tstor_ok(tstor_value_dict_set(meta, str(ck, "floats"), list));
  ck_tstor_ok(tstor_checkpoint_set_metadata(ck, meta));
  int64_t sizes[2] = {2, 3};
  float data[6] = {1, 2, 3, 4, 5, 6};
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_from_array(ctx, cpu, TSTOR_FLOAT32, 2, sizes, data, &t));
  ck_tstor_ok(tstor_value_new_tensor(ck, t, &v));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "w"), v));
  tstor_tensor_release(t);
  ck_tstor_ok(tstor_checkpoint_set_root(ck, root));
  void *buf;
  size_t n;
  ck_tstor_ok(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_GGUF, NULL, &buf, &n));
  ck_tstor_ok(tstor_gguf_load_buffer(ctx, buf, n, NULL, &back));
  ck_assert_int_eq(tstor_value_gguf_type(md(back, "general.alignment"), NULL), TSTOR_GGUF_UINT32);
  ck_assert_int_eq(tstor_value_gguf_type(md(back, "n"), NULL), TSTOR_GGUF_INT64);
  ck_assert_int_eq(tstor_value_gguf_type(md(back, "u8"), NULL), TSTOR_GGUF_UINT8);
  tstor_gguf_type elem;
  ck_assert_int_eq(tstor_value_gguf_type(md(back, "floats"), &elem), TSTOR_GGUF_ARRAY);
  ck_assert_int_eq(elem, TSTOR_GGUF_FLOAT32);
  ck_assert_int_eq(tstor_checkpoint_storage_offset(back, 0) % 64, 0);
  tstor_tensor *w = tstor_value_tensor(tensor(back, "w"));
  ck_assert(tstor_tensor_sizes(w)[0] == 2 && tstor_tensor_sizes(w)[1] == 3);
  ck_assert_int_eq(memcmp(tstor_tensor_data(w), data, sizeof data), 0);
  tstor_checkpoint_free(back);
  free(buf);
  tstor_checkpoint_free(ck);
}
END_TEST

static int save_fails(tstor_checkpoint *ck) {
  void *buf = (void *)&buf;
  size_t n;
  int rc = tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_GGUF, NULL, &buf, &n);
  ck_assert_ptr_null(buf);
  return rc;
}

START_TEST(save_refusals) {
  tstor_checkpoint *ck;
  tstor_value *root, *meta, *v, *list;
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_LIST, &root));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, root));
  ck_assert_int_eq(save_fails(ck), TSTOR_EINVAL); /* a list, not a dict */
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &root));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, root));
  int64_t one = 4;
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_zeros(ctx, cpu, TSTOR_BOOL, 1, &one, &t));
  ck_tstor_ok(tstor_value_new_tensor(ck, t, &v));
  ck_tstor_ok(tstor_value_dict_set(root, str(ck, "b"), v));
  tstor_tensor_release(t);
  ck_assert_int_eq(save_fails(ck), TSTOR_ENOTSUP);
  ck_last_error_has("'b'");
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &root));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, root));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &meta));
  ck_tstor_ok(tstor_checkpoint_set_metadata(ck, meta));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_NONE, &v));
  ck_tstor_ok(tstor_value_dict_set(meta, str(ck, "none"), v));
  ck_assert_int_eq(save_fails(ck), TSTOR_EINVAL);
  ck_last_error_has("'none'");
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &meta));
  ck_tstor_ok(tstor_checkpoint_set_metadata(ck, meta));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_LIST, &list));
  ck_tstor_ok(tstor_value_dict_set(meta, str(ck, "empty"), list));
  ck_assert_int_eq(save_fails(ck), TSTOR_EINVAL);
  ck_last_error_has("no element type");
  ck_tstor_ok(tstor_value_new_int(ck, 1, &v));
  ck_tstor_ok(tstor_value_append(list, v));
  ck_tstor_ok(tstor_value_append(list, str(ck, "x")));
  ck_assert_int_eq(save_fails(ck), TSTOR_EINVAL);
  ck_last_error_has("cannot be written as");
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &meta));
  ck_tstor_ok(tstor_checkpoint_set_metadata(ck, meta));
  ck_tstor_ok(tstor_value_new_int(ck, 48, &v));
  ck_tstor_ok(tstor_value_dict_set(meta, str(ck, "general.alignment"), v));
  ck_assert_int_eq(save_fails(ck), TSTOR_EINVAL);
  ck_last_error_has("power of two");
  tstor_checkpoint_free(ck);
}
END_TEST

/* ------------------------------------------------------------ detection */

START_TEST(detection) {
  tstor_file_format f;
  ck_assert_int_eq(tstor_file_format_detect("GGUF\3\0\0\0", 8), TSTOR_FORMAT_GGUF);
  ck_assert_str_eq(tstor_file_format_name(TSTOR_FORMAT_GGUF), "gguf");
  ck_tstor_ok(tstor_file_format_of(GDIR "/golden/plain.gguf", &f));
  ck_assert_int_eq(f, TSTOR_FORMAT_GGUF);
  /* from a pipe, through tstor_checkpoint_load_fd */
  size_t n;
  char *data = tstor_test_slurp(GDIR "/golden/v2.gguf", &n);
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  ck_assert_int_eq(write(p[1], data, n), (ssize_t)n);
  close(p[1]);
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_checkpoint_load_fd(ctx, p[0], NULL, &ck));
  close(p[0]);
  ck_assert_uint_eq(tstor_value_len(tstor_checkpoint_root(ck)), 6);
  tstor_checkpoint_free(ck);
  free(data);
}
END_TEST

int main(void) {
  Suite *s = suite_create("gguf");
  TCase *tc = tcase_create("gguf");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, hostile_files);
  tcase_add_test(tc, small_files_cost_little);
  tcase_add_test(tc, metadata_typed);
  tcase_add_test(tc, set_gguf_type);
  tcase_add_test(tc, dimensions_reversed);
  tcase_add_test(tc, plain_types);
  tcase_add_test(tc, mapped);
  tcase_add_test(tc, quantized_values);
  tcase_add_test(tc, ggml_only_types);
  tcase_add_test(tc, new_quantized);
  tcase_add_test(tc, large_legitimate);
  tcase_add_test(tc, save_same_file);
  tcase_add_test(tc, save_built_tree);
  tcase_add_test(tc, save_refusals);
  tcase_add_test(tc, detection);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
