/* DLPack in C: export and import without copying, the deleter called exactly
 * once (and not at all when an import fails), the storage kept alive by the
 * exported tensor, devices and dtypes. The real clients (PyTorch and numpy)
 * are in ckpt/dlpack_clients.py. */
#define _GNU_SOURCE
#include "testutil.h"

#include <tstor/dlpack.h>
#include <tstor/tensor.h>

static tstor_context *ctx;
static tstor_device cpu;

static void setup(void) {
  ck_tstor_ok(tstor_context_open(NULL, &ctx));
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
}
static void teardown(void) { tstor_context_close(ctx); }

static tstor_tensor *arange(tstor_dtype dt, int64_t n) {
  double *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = (double)i;
  tstor_storage *s;
  tstor_tensor *t;
  ck_tstor_ok(tstor_typed_from_array(ctx, cpu, dt, v, TSTOR_FLOAT64, (size_t)n, &s));
  ck_tstor_ok(tstor_tensor_on_storage(s, dt, 0, 1, &n, NULL, &t));
  tstor_storage_release(s);
  free(v);
  return t;
}

START_TEST(export_views_without_copy) {
  tstor_tensor *base = arange(TSTOR_FLOAT32, 24), *v;
  int64_t sizes[2] = {3, 2}, strides[2] = {1, 6};
  ck_tstor_ok(tstor_tensor_on_storage(tstor_tensor_storage(base), TSTOR_FLOAT32, 5, 2, sizes, strides, &v));
  DLManagedTensor *m;
  long before = tstor_storage_use_count(tstor_tensor_storage(base));
  ck_tstor_ok(tstor_dlpack_export(v, &m));
  ck_assert_ptr_eq(m->dl_tensor.data, (float *)tstor_tensor_data(base) + 5);
  ck_assert_int_eq(m->dl_tensor.byte_offset, 0);
  ck_assert_int_eq(m->dl_tensor.device.device_type, kDLCPU);
  ck_assert_int_eq(m->dl_tensor.ndim, 2);
  ck_assert_int_eq(m->dl_tensor.shape[0], 3);
  ck_assert_int_eq(m->dl_tensor.strides[1], 6);
  ck_assert_int_eq(m->dl_tensor.dtype.code, kDLFloat);
  ck_assert_int_eq(m->dl_tensor.dtype.bits, 32);
  /* the export keeps the storage: drop every tensor of ours, the bytes stay */
  tstor_tensor_release(v);
  tstor_tensor_release(base);
  float *p = m->dl_tensor.data;
  ck_assert(p[0] == 5.0f && p[6] == 11.0f);
  /* a consumer in C: import our own export, write through it */
  tstor_tensor *back;
  ck_tstor_ok(tstor_dlpack_import(ctx, m, &back));
  ck_assert_ptr_eq(tstor_tensor_data(back), p);
  ck_assert_int_eq(tstor_tensor_strides(back)[1], 6);
  int64_t idx[2] = {1, 1};
  ck_tstor_ok(tstor_tensor_set_f64(back, idx, -7.0));
  ck_assert(p[7] == -7.0f);
  tstor_tensor_release(back); /* calls the export's deleter, which frees everything */
  (void)before;
}
END_TEST

static int deleted;
static void counting_deleter(DLManagedTensor *self) {
  deleted++;
  free(self->dl_tensor.data);
  free(self);
}

static DLManagedTensor *producer(int ndim, const int64_t *shape, int64_t *strides, DLDataType dt, DLDevice dev) {
  DLManagedTensor *m = calloc(1, sizeof *m + 2 * 8 * sizeof(int64_t));
  int64_t *dims = (int64_t *)(m + 1);
  memcpy(dims, shape, (size_t)ndim * sizeof(int64_t));
  m->dl_tensor.data = calloc(1, 4096);
  m->dl_tensor.device = dev;
  m->dl_tensor.ndim = ndim;
  m->dl_tensor.dtype = dt;
  m->dl_tensor.shape = dims;
  if (strides) {
    memcpy(dims + 8, strides, (size_t)ndim * sizeof(int64_t));
    m->dl_tensor.strides = dims + 8;
  }
  m->deleter = counting_deleter;
  return m;
}

START_TEST(import_deleter_once) {
  int64_t shape[3] = {2, 3, 4}, strides[3] = {1, 2, 6};
  DLManagedTensor *m = producer(3, shape, strides, (DLDataType){kDLInt, 16, 1}, (DLDevice){kDLCPU, 0});
  m->dl_tensor.byte_offset = 32;
  deleted = 0;
  tstor_tensor *t, *view;
  ck_tstor_ok(tstor_dlpack_import(ctx, m, &t));
  ck_assert_int_eq(tstor_tensor_dtype(t), TSTOR_INT16);
  ck_assert_ptr_eq(tstor_tensor_data(t), (char *)m->dl_tensor.data + 32);
  ck_assert_int_eq(tstor_tensor_strides(t)[2], 6);
  ck_assert_int_eq(tstor_storage_nbytes(tstor_tensor_storage(t)), 2 * (1 + 1 * 1 + 2 * 2 + 6 * 3));
  ck_tstor_ok(tstor_tensor_on_storage(tstor_tensor_storage(t), TSTOR_INT16, 1, 1, shape, NULL, &view));
  tstor_tensor_release(t);
  ck_assert_int_eq(deleted, 0); /* a view still holds the storage */
  tstor_tensor_release(view);
  ck_assert_int_eq(deleted, 1);

  /* no strides: compact row-major */
  m = producer(2, shape, NULL, (DLDataType){kDLFloat, 64, 1}, (DLDevice){kDLCPU, 0});
  ck_tstor_ok(tstor_dlpack_import(ctx, m, &t));
  ck_assert(tstor_tensor_is_contiguous(t));
  ck_assert_int_eq(tstor_tensor_strides(t)[0], 3);
  tstor_tensor_release(t);
  ck_assert_int_eq(deleted, 2);

  /* every refusal leaves m the caller's: its deleter not called */
  static const struct {
    DLDataType dt;
    DLDevice dev;
    int64_t stride0;
    int code;
  } bad[] = {
      {{kDLFloat, 8, 1}, {kDLCPU, 0}, 1, TSTOR_ENOTSUP},   {{kDLFloat, 32, 4}, {kDLCPU, 0}, 1, TSTOR_ENOTSUP},
      {{kDLOpaqueHandle, 64, 1}, {kDLCPU, 0}, 1, TSTOR_ENOTSUP}, {{kDLInt, 32, 1}, {kDLOpenCL, 0}, 1, TSTOR_ENODEV},
      {{kDLInt, 32, 1}, {kDLCUDA, 0}, 1, TSTOR_ENODEV},    {{kDLInt, 32, 1}, {kDLCPU, 0}, -1, TSTOR_ENOTSUP},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t st[1] = {bad[i].stride0}, sh[1] = {4};
    m = producer(1, sh, st, bad[i].dt, bad[i].dev);
    t = (tstor_tensor *)1;
    ck_tstor_err(tstor_dlpack_import(ctx, m, &t), bad[i].code);
    ck_assert_ptr_null(t);
    ck_assert_int_eq(deleted, 2);
    counting_deleter(m);
    deleted--;
  }
  /* compact strides past int64: [2, 2^62, 4] needs 2^64 for the first */
  int64_t vast[3] = {2, INT64_C(1) << 62, 4};
  m = producer(3, vast, NULL, (DLDataType){kDLInt, 8, 1}, (DLDevice){kDLCPU, 0});
  t = (tstor_tensor *)1;
  ck_tstor_err(tstor_dlpack_import(ctx, m, &t), TSTOR_EOVERFLOW);
  ck_assert_ptr_null(t);
  ck_assert_int_eq(deleted, 2);
  counting_deleter(m);
  deleted--;
  m = producer(1, shape, NULL, (DLDataType){kDLInt, 32, 1}, (DLDevice){kDLCPU, 0});
  m->dl_tensor.ndim = 65;
  ck_tstor_err(tstor_dlpack_import(ctx, m, &t), TSTOR_EINVAL);
  counting_deleter(m);
  ck_tstor_err(tstor_dlpack_import(ctx, NULL, &t), TSTOR_EINVAL);
}
END_TEST

START_TEST(dtypes_and_devices) {
  static const tstor_dtype ok[] = {
      TSTOR_UINT8,         TSTOR_INT8,          TSTOR_INT16,           TSTOR_INT32,
      TSTOR_INT64,         TSTOR_FLOAT16,       TSTOR_FLOAT32,         TSTOR_FLOAT64,
      TSTOR_BFLOAT16,      TSTOR_COMPLEX32,     TSTOR_COMPLEX64,       TSTOR_COMPLEX128,
      TSTOR_UINT16,        TSTOR_UINT32,        TSTOR_UINT64,          TSTOR_BOOL,
      TSTOR_FLOAT8_E5M2,   TSTOR_FLOAT8_E4M3FN, TSTOR_FLOAT8_E5M2FNUZ, TSTOR_FLOAT8_E4M3FNUZ,
      TSTOR_FLOAT8_E8M0FNU};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    tstor_tensor *t = arange(ok[i], 5), *back;
    DLManagedTensor *m;
    ck_tstor_ok(tstor_dlpack_export(t, &m));
    ck_assert_int_eq(m->dl_tensor.dtype.bits, 8 * tstor_dtype_size(ok[i]));
    ck_tstor_ok(tstor_dlpack_import(ctx, m, &back));
    ck_assert_int_eq(tstor_tensor_dtype(back), ok[i]);
    ck_assert_ptr_eq(tstor_tensor_data(back), tstor_tensor_data(t));
    tstor_tensor_release(back);
    tstor_tensor_release(t);
  }
  /* DLPack has no complex of bfloat16: torch 2.15 refuses bcomplex32 too
   * ("BComplex32 type is not supported by dlpack") */
  static const tstor_dtype refused[] = {TSTOR_QINT8, TSTOR_QUINT4X2, TSTOR_BITS8,
                                        TSTOR_FLOAT4_E2M1FN_X2, TSTOR_BCOMPLEX32};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    tstor_tensor *t;
    int64_t n = 4;
    ck_tstor_ok(tstor_tensor_empty(ctx, cpu, refused[i], 1, &n, &t));
    DLManagedTensor *m = (DLManagedTensor *)1;
    ck_tstor_err(tstor_dlpack_export(t, &m), TSTOR_ENOTSUP);
    ck_assert_ptr_null(m);
    tstor_tensor_release(t);
  }
  /* meta has no data; hpu (a backend's own device) is kDLExtDev both ways */
  tstor_device meta, hpu;
  ck_tstor_ok(tstor_device_parse(ctx, "meta", &meta));
  int64_t n = 8;
  tstor_tensor *t;
  DLManagedTensor *m;
  ck_tstor_ok(tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, 1, &n, &t));
  ck_tstor_err(tstor_dlpack_export(t, &m), TSTOR_ENODATA);
  tstor_tensor_release(t);
  if (tstor_device_parse(ctx, "hpu:0", &hpu) == 0) {
    tstor_tensor *back;
    ck_tstor_ok(tstor_tensor_empty(ctx, hpu, TSTOR_INT32, 1, &n, &t));
    ck_tstor_ok(tstor_dlpack_export(t, &m));
    ck_assert_int_eq(m->dl_tensor.device.device_type, kDLExtDev);
    ck_tstor_ok(tstor_dlpack_import(ctx, m, &back));
    ck_assert_int_eq(tstor_tensor_device(back).type, hpu.type);
    ck_assert_ptr_eq(tstor_tensor_data(back), tstor_tensor_data(t));
    tstor_tensor_release(back);
    tstor_tensor_release(t);
  }
}
END_TEST

static int deleted;
static void count_deleter(DLManagedTensorVersioned *self) {
  (void)self;
  deleted++;
}

/* DLPack 1.x: the version, READ_ONLY for borrowed and mapped storages (and
 * their refusal to a 0.x consumer), IS_COPIED for a copy, the version as
 * __dlpack__(max_version) negotiates it, and the import side of each. */
START_TEST(versioned_flags) {
  ck_assert_int_eq(tstor_dlpack_negotiate(-1, -1), 0); /* no max_version: 0.x */
  ck_assert_int_eq(tstor_dlpack_negotiate(0, 8), 0);
  ck_assert_int_eq(tstor_dlpack_negotiate(1, 0), 1);
  ck_assert_int_eq(tstor_dlpack_negotiate(2, 0), 1);
  tstor_tensor *t = arange(TSTOR_FLOAT32, 6), *back;
  DLManagedTensorVersioned *v;
  ck_tstor_ok(tstor_dlpack_export_versioned(t, 0, &v));
  ck_assert_int_eq(v->version.major, 1);
  ck_assert_int_eq(v->version.minor, TSTOR_DLPACK_MINOR);
  ck_assert_int_eq(v->flags, 0);
  ck_assert_ptr_eq(v->dl_tensor.data, tstor_tensor_data(t));
  ck_tstor_ok(tstor_dlpack_import_versioned(ctx, v, 0, &back)); /* zero copy, writable */
  ck_assert_ptr_eq(tstor_tensor_data(back), tstor_tensor_data(t));
  tstor_tensor_release(back);
  /* asked read-only; a copy is the consumer's alone */
  ck_tstor_ok(tstor_dlpack_export_versioned(t, TSTOR_DLPACK_READ_ONLY, &v));
  ck_assert_int_eq(v->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  v->deleter(v);
  ck_tstor_ok(tstor_dlpack_export_versioned(t, TSTOR_DLPACK_COPY, &v));
  ck_assert_int_eq(v->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  ck_assert_ptr_ne(v->dl_tensor.data, tstor_tensor_data(t));
  ck_assert(((float *)v->dl_tensor.data)[5] == 5.0f);
  v->deleter(v);
  ck_tstor_err(tstor_dlpack_export_versioned(t, TSTOR_DLPACK_COPY | TSTOR_DLPACK_NO_COPY, &v),
               TSTOR_EINVAL);
  ck_tstor_err(tstor_dlpack_export_versioned(t, 1u << 9, &v), TSTOR_EINVAL);
  tstor_tensor_release(t);

  /* a borrowed storage: READ_ONLY to a 1.x consumer, refused to a 0.x one */
  float bytes[4] = {1, 2, 3, 4};
  tstor_storage *s;
  int64_t n = 4;
  ck_tstor_ok(tstor_storage_wrap(ctx, cpu, bytes, sizeof bytes, &s));
  ck_tstor_ok(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 0, 1, &n, NULL, &t));
  tstor_storage_release(s);
  DLManagedTensor *m = (DLManagedTensor *)1;
  ck_tstor_err(tstor_dlpack_export(t, &m), TSTOR_EACCES);
  ck_last_error_has("borrowed");
  ck_assert_ptr_null(m);
  ck_tstor_ok(tstor_dlpack_export_versioned(t, 0, &v));
  ck_assert_int_eq(v->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
  /* tstor takes it back as a copy (its storages cannot refuse writes), the
   * producer's deleter called at once; or refuses it without a copy */
  ck_tstor_err(tstor_dlpack_import_versioned(ctx, v, TSTOR_DLPACK_NO_COPY, &back), TSTOR_EACCES);
  ck_tstor_ok(tstor_dlpack_import_versioned(ctx, v, 0, &back));
  ck_assert_ptr_ne(tstor_tensor_data(back), bytes);
  int64_t i3 = 3;
  double d;
  ck_tstor_ok(tstor_tensor_get_f64(back, &i3, &d));
  ck_assert(d == 4.0);
  ck_assert_int_eq(tstor_storage_use_count(tstor_tensor_storage(t)), 1); /* the export is gone */
  tstor_tensor_release(back);
  /* a copy of it is writable */
  ck_tstor_ok(tstor_dlpack_export_versioned(t, TSTOR_DLPACK_COPY, &v));
  ck_assert_int_eq(v->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  v->deleter(v);
  tstor_tensor_release(t);

  /* another major version: refused before anything else is read, the
   * deleter left to the caller */
  DLManagedTensorVersioned other = {{2, 0}, NULL, count_deleter, 0, {0}};
  deleted = 0;
  ck_tstor_err(tstor_dlpack_import_versioned(ctx, &other, 0, &back), TSTOR_ENOTSUP);
  ck_last_error_has("2.0");
  ck_assert_ptr_null(back);
  ck_assert_int_eq(deleted, 0);
  /* a read-only foreign tensor copied: its deleter runs once, at the import */
  float foreign[2] = {7, 8};
  int64_t two = 2;
  DLManagedTensorVersioned ro = {{1, 0},
                                 NULL,
                                 count_deleter,
                                 DLPACK_FLAG_BITMASK_READ_ONLY,
                                 {foreign, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &two, NULL, 0}};
  ck_tstor_ok(tstor_dlpack_import_versioned(ctx, &ro, 0, &back));
  ck_assert_int_eq(deleted, 1);
  ck_tstor_ok(tstor_tensor_set_f64(back, &(int64_t){0}, 1.0));
  ck_assert(foreign[0] == 7.0f);
  tstor_tensor_release(back);
  ck_assert_int_eq(deleted, 1);
  /* a writable one without a copy: the deleter when the storage goes */
  ro.flags = 0;
  ck_tstor_ok(tstor_dlpack_import_versioned(ctx, &ro, 0, &back));
  ck_assert_ptr_eq(tstor_tensor_data(back), foreign);
  ck_assert_int_eq(deleted, 1);
  tstor_tensor_release(back);
  ck_assert_int_eq(deleted, 2);
}
END_TEST

int main(void) {
  Suite *s = suite_create("dlpack");
  TCase *tc = tcase_create("dlpack");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, export_views_without_copy);
  tcase_add_test(tc, import_deleter_once);
  tcase_add_test(tc, dtypes_and_devices);
  tcase_add_test(tc, versioned_flags);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
