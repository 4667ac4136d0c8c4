/* What tstor reads from a GGUF file, one line per fact, in the form
 * tests/gguf/describe.py prints what the gguf package's GGUFReader reads
 * (describe.py's head has the form), so that the two compare line for line:
 * against the committed descriptions (gguf/check.sh) and on generated files
 * (gguf/diff.sh). A file tstor refuses is one line, "refused CODE", its
 * message on stderr.
 *
 *   gguf_describe [--dequantize] [--mmap | --buffer] FILE
 *
 * The file is loaded read (the default way), mapped, or from memory with
 * the buffer borrowed. Environment: TSTOR_BACKEND_DIR, as for the suites. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

static const char *type_names[] = {"u8",   "i8",  "u16", "i16", "u32", "i32", "f32",
                                   "bool", "str", "arr", "u64", "i64", "f64"};

/* A plain dtype's ggml type name. */
static const char *plain_name(tstor_dtype dt) {
  switch (dt) {
    case TSTOR_FLOAT32: return "F32";
    case TSTOR_FLOAT16: return "F16";
    case TSTOR_BFLOAT16: return "BF16";
    case TSTOR_FLOAT64: return "F64";
    case TSTOR_INT8: return "I8";
    case TSTOR_INT16: return "I16";
    case TSTOR_INT32: return "I32";
    case TSTOR_INT64: return "I64";
    default: return "?";
  }
}

/* One scalar as describe.py writes it, appended to buf. */
static void scalar(const tstor_value *v, int type, char *buf, size_t size) {
  size_t n;
  const char *s;
  double d;
  int64_t i;
  uint64_t u;
  int b;
  if (type == 8) {
    tstor_value_get_string(v, &s, &n);
    if (!n) snprintf(buf, size, "-");
    for (size_t k = 0; k < n && 2 * k + 2 < size; k++)
      snprintf(buf + 2 * k, 3, "%02x", (unsigned char)s[k]);
  } else if (type == 6 || type == 12) {
    tstor_value_get_double(v, &d);
    if (isnan(d)) {
      snprintf(buf, size, "nan");
    } else if (type == 6) {
      float f = (float)d;
      uint32_t w;
      memcpy(&w, &f, 4);
      snprintf(buf, size, "%08" PRIx32, w);
    } else {
      memcpy(&u, &d, 8);
      snprintf(buf, size, "%016" PRIx64, u);
    }
  } else if (type == 7) {
    tstor_value_get_bool(v, &b);
    snprintf(buf, size, "%d", b);
  } else if (tstor_value_get_int64(v, &i) == 0) {
    snprintf(buf, size, "%" PRId64, i);
  } else {
    tstor_value_get_uint64(v, &u);
    snprintf(buf, size, "%" PRIu64, u);
  }
}

/* A key or name, every byte of it (it may hold a NUL). */
static void put_name(const tstor_value *s) {
  size_t n;
  const char *p = tstor_value_string(s, &n);
  fwrite(p, 1, n, stdout);
}

static void kv_line(const tstor_value *key, const tstor_value *v) {
  tstor_gguf_type elem;
  int t = tstor_value_gguf_type(v, &elem);
  static char text[1 << 16];
  if (t != 9) {
    scalar(v, t, text, sizeof text);
    printf("kv ");
    put_name(key);
    printf(" %s %s\n", type_names[t], text);
    return;
  }
  size_t n = tstor_value_len(v);
  uLong crc = crc32(0, NULL, 0);
  char first[4096] = "";
  for (size_t k = 0; k < n; k++) {
    scalar(tstor_value_item(v, k), (int)elem, text, sizeof text);
    if (k) crc = crc32(crc, (const Bytef *)" ", 1);
    crc = crc32(crc, (const Bytef *)text, (uInt)strlen(text));
    if (k < 4)
      snprintf(first + strlen(first), sizeof first - strlen(first), "%s%s", k ? " " : "", text);
  }
  printf("kv ");
  put_name(key);
  printf(" arr[%s] %zu crc %08lx first %s\n", type_names[elem], n, crc, n ? first : "-");
}

static uLong crc_of(const void *p, size_t n) {
  uLong crc = crc32(0, NULL, 0);
  const Bytef *b = p;
  while (n) {
    uInt k = n > (1u << 30) ? 1u << 30 : (uInt)n;
    crc = crc32(crc, b, k);
    b += k;
    n -= k;
  }
  return crc;
}

/* The CRC of a dequantized tensor's bytes, its NaNs made one NaN first. */
static int dequant_crc(const tstor_value *v, tstor_dtype dt, uLong *crc) {
  tstor_tensor *t;
  int rc = tstor_value_dequantize(v, dt, &t);
  if (rc) return rc;
  int64_t n = tstor_tensor_numel(t);
  if (dt == TSTOR_FLOAT32) {
    uint32_t *w = tstor_tensor_data(t);
    for (int64_t k = 0; k < n; k++)
      if ((w[k] & 0x7fffffffu) > 0x7f800000u) w[k] = 0x7fc00000u;
  } else {
    uint16_t *h = tstor_tensor_data(t);
    uint16_t nan = dt == TSTOR_FLOAT16 ? 0x7e00 : 0x7fc0;
    for (int64_t k = 0; k < n; k++) {
      int is_nan = dt == TSTOR_FLOAT16 ? (h[k] & 0x7fff) > 0x7c00 : (h[k] & 0x7fff) > 0x7f80;
      if (is_nan) h[k] = nan;
    }
  }
  *crc = crc_of(tstor_tensor_data(t), (size_t)tstor_tensor_nbytes(t));
  tstor_tensor_release(t);
  return 0;
}

static int tensor_line(const tstor_checkpoint *ck, const tstor_value *name, const tstor_value *v,
                       int deq) {
  tstor_tensor *t = tstor_value_tensor(v);
  const int64_t *sizes = tstor_tensor_sizes(t);
  int nd = tstor_tensor_dim(t);
  const char *type = plain_name(tstor_tensor_dtype(t));
  if (tstor_value_kind_of(v) == TSTOR_VALUE_QUANTIZED) {
    nd = tstor_value_quantized_shape(v, &sizes);
    type = tstor_ggml_type_name(tstor_value_ggml_type(v));
  }
  printf("tensor ");
  put_name(name);
  printf(" %s [", type);
  for (int d = 0; d < nd; d++) printf("%s%" PRId64, d ? "," : "", sizes[d]);
  size_t nbytes = (size_t)tstor_tensor_nbytes(t);
  int64_t off = tstor_checkpoint_storage_offset(ck, (size_t)tstor_value_storage_index(v));
  if (off >= 0)
    printf("] offset %" PRId64, off);
  else
    printf("] offset -");
  printf(" nbytes %zu crc %08lx\n", nbytes, crc_of(tstor_tensor_data(t), nbytes));
  if (!deq || tstor_value_kind_of(v) != TSTOR_VALUE_QUANTIZED) return 0;
  uLong c32, c16, cbf;
  int rc = dequant_crc(v, TSTOR_FLOAT32, &c32);
  if (!rc) rc = dequant_crc(v, TSTOR_FLOAT16, &c16);
  if (!rc) rc = dequant_crc(v, TSTOR_BFLOAT16, &cbf);
  if (rc) return rc;
  printf("dequant ");
  put_name(name);
  printf(" f32 %08lx f16 %08lx bf16 %08lx\n", c32, c16, cbf);
  return 0;
}

static void *slurp(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0, k;
  char *buf = malloc(cap);
  while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  *size = n;
  return buf;
}

int main(int argc, char **argv) {
  int deq = 0;
  const char *path = NULL, *mode = "read";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--dequantize") == 0)
      deq = 1;
    else if (strcmp(argv[i], "--mmap") == 0)
      mode = "mmap";
    else if (strcmp(argv[i], "--buffer") == 0)
      mode = "buffer";
    else
      path = argv[i];
  }
  if (!path) {
    fprintf(stderr, "usage: gguf_describe [--dequantize] [--mmap | --buffer] FILE\n");
    return 2;
  }
  tstor_context *ctx;
  if (tstor_context_open(NULL, &ctx)) {
    fprintf(stderr, "gguf_describe: %s\n", tstor_last_error());
    return 2;
  }
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  tstor_checkpoint *ck = NULL;
  void *data = NULL;
  size_t size = 0;
  int rc;
  if (strcmp(mode, "buffer") == 0) {
    o.flags = TSTOR_LOAD_BORROW_BUFFER;
    data = slurp(path, &size);
    rc = data ? tstor_checkpoint_load_buffer(ctx, data, size, &o, &ck) : TSTOR_EIO;
  } else {
    o.flags = strcmp(mode, "mmap") == 0 ? TSTOR_LOAD_MMAP : 0;
    rc = tstor_checkpoint_load(ctx, path, &o, &ck);
  }
  if (!rc) {
    const tstor_value *md = tstor_checkpoint_metadata(ck), *root = tstor_checkpoint_root(ck);
    for (size_t i = 0; i < tstor_value_len(md); i++)
      kv_line(tstor_value_key(md, i), tstor_value_item(md, i));
    for (size_t i = 0; i < tstor_value_len(root) && !rc; i++)
      rc = tensor_line(ck, tstor_value_key(root, i), tstor_value_item(root, i), deq);
  }
  if (rc) {
    printf("refused %s\n", tstor_err_name(rc));
    fprintf(stderr, "%s\n", tstor_last_error());
  }
  tstor_checkpoint_free(ck);
  tstor_context_close(ctx);
  free(data);
  return 0;
}
