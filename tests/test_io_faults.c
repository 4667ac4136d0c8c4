/* libtstor-io under allocation failure: every allocation of a load (torch.save
 * zip, legacy and tar files, safetensors, Torch7, GGUF), of a save to memory
 * in each format, of decoding GGUF's quantized tensors and of a DLPack export
 * and import is failed in turn. Each failed
 * call must say TSTOR_ENOMEM, hand back nothing, and leave no allocation
 * behind (fault.h's count of the core's and libtstor-io's own allocations,
 * which this test build routes through the core: io_internal.h). */
#define _GNU_SOURCE
#include "coretest.h"

#include <tstor/dlpack.h>
#include <tstor/serialize.h>
#include <tstor/tensor.h>

#include "runtime/fault.h"

static tstor_context *ctx;

static void setup(void) { ctx = coretest_open(NULL); }
static void teardown(void) { tstor_context_close(ctx); }

/* Fails allocation 1, 2, ... of load(data) until one load succeeds; returns
 * how many allocations that load made. */
static unsigned long sweep_load(const char *what, const void *data, size_t size) {
  for (unsigned long nth = 1;; nth++) {
    tstor_checkpoint *ck = (tstor_checkpoint *)&ck;
    tstor__fault_arm(TSTOR_FAULT_MALLOC, nth, 0);
    int rc = tstor_checkpoint_load_buffer(ctx, data, size, NULL, &ck);
    tstor__fault_disarm();
    if (tstor__fault_failed() == 0) {
      ck_assert_msg(rc == 0, "%s: %s", what, tstor_last_error());
      tstor_checkpoint_free(ck);
      return nth - 1;
    }
    ck_assert_msg(rc == TSTOR_ENOMEM, "%s, allocation %lu failed: %s (%s)", what, nth,
                  tstor_err_name(rc), tstor_last_error());
    ck_assert_ptr_null(ck);
    ck_assert_msg(tstor__fault_live() == 0, "%s, allocation %lu failed: %ld left allocated", what,
                  nth, tstor__fault_live());
  }
}

static unsigned long sweep_save(const char *what, const tstor_checkpoint *ck,
                                tstor_file_format format) {
  for (unsigned long nth = 1;; nth++) {
    void *data = (void *)&data;
    size_t size = 7;
    tstor__fault_arm(TSTOR_FAULT_MALLOC, nth, 0);
    int rc = tstor_checkpoint_save_buffer(ck, format, NULL, &data, &size);
    tstor__fault_disarm();
    if (tstor__fault_failed() == 0) {
      ck_assert_msg(rc == 0, "%s: %s", what, tstor_last_error());
      free(data);
      return nth - 1;
    }
    ck_assert_msg(rc == TSTOR_ENOMEM, "%s, allocation %lu failed: %s (%s)", what, nth,
                  tstor_err_name(rc), tstor_last_error());
    ck_assert_ptr_null(data);
    ck_assert_msg(tstor__fault_live() == 0, "%s, allocation %lu failed: %ld left allocated", what,
                  nth, tstor__fault_live());
  }
}

/* torch.save files of each kind PyTorch writes (zip, legacy, tar) and a
 * Torch7 file, and what tstor writes of them in the formats it writes, each
 * loaded under every failure. */
START_TEST(test_loads_and_saves) {
  static const char *const files[] = {
      "ckpt/golden/checkpoint_nested.pt",
      "ckpt/golden/legacy_checkpoint_nested.pt",
      "ckpt/golden/module_conv_bn.pt",
      "ckpt/golden/legacy_share_dict_float32.pt",
      "ckpt/golden/strings.pt",
      "ckpt/golden/meta_tensors.pt",
      "t7/torch7-written/gmodule_with_linear_identity.t7",
      "ckpt/tar/py2_checkpoint.pt",
      "ckpt/tar/storage_views.pt",
      "ckpt/tar/member_twice.pt",
  };
  unsigned long total = 0;
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    size_t size;
    void *data = tstor_test_slurp(coretest_src(files[i]), &size);
    unsigned long n = sweep_load(files[i], data, size);
    ck_assert_uint_gt(n, 0);
    total += n;
    tstor_checkpoint *ck;
    ck_tstor_ok(tstor_checkpoint_load_buffer(ctx, data, size, NULL, &ck));
    static const tstor_file_format formats[] = {TSTOR_FORMAT_TORCH, TSTOR_FORMAT_TORCH7};
    for (size_t f = 0; f < sizeof formats / sizeof *formats; f++) {
      /* meta tensors have no bytes to write; Torch7 has no type for some
       * dtypes: those saves are refused whatever the memory */
      void *out;
      size_t len;
      if (tstor_checkpoint_save_buffer(ck, formats[f], NULL, &out, &len) != 0) continue;
      total += sweep_save(files[i], ck, formats[f]);
      total += sweep_load(files[i], out, len);
      free(out);
    }
    tstor_checkpoint_free(ck);
    free(data);
  }
  fprintf(stderr, "%lu allocations failed in turn, each refused cleanly\n", total);
}
END_TEST

/* safetensors: a flat dict of tensors with metadata, written by tstor and
 * read back; the header's JSON reader's allocations are failed too. */
START_TEST(test_safetensors) {
  size_t size;
  void *data = tstor_test_slurp(coretest_src("ckpt/golden/params_conv_bn.pt"), &size);
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_checkpoint_load_buffer(ctx, data, size, NULL, &ck));
  tstor_value *md, *key, *val;
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &md));
  ck_tstor_ok(tstor_value_new_string(ck, "format", 6, &key));
  ck_tstor_ok(tstor_value_new_string(ck, "pt", 2, &val));
  ck_tstor_ok(tstor_value_dict_set(md, key, val));
  ck_tstor_ok(tstor_checkpoint_set_metadata(ck, md));
  void *out;
  size_t len;
  ck_tstor_ok(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_SAFETENSORS, NULL, &out, &len));
  unsigned long saves = sweep_save("safetensors save", ck, TSTOR_FORMAT_SAFETENSORS);
  unsigned long loads = sweep_load("safetensors load", out, len);
  ck_assert_uint_gt(saves, 0);
  ck_assert_uint_gt(loads, 0);
  fprintf(stderr, "safetensors: %lu allocations of a save, %lu of a load, failed in turn\n", saves,
          loads);
  free(out);
  tstor_checkpoint_free(ck);
  free(data);
  /* packed bytes (F6), and every dtype with metadata (all.safetensors, 141
   * tensors), loaded and saved again */
  static const char *const golden[] = {"ckpt/st_golden/st_F6_E3M2.safetensors",
                                       "ckpt/st_golden/st_F6_E2M3.safetensors",
                                       "ckpt/st_golden/all.safetensors"};
  for (size_t i = 0; i < sizeof golden / sizeof *golden; i++) {
    data = tstor_test_slurp(coretest_src(golden[i]), &size);
    ck_assert_uint_gt(sweep_load(golden[i], data, size), 0);
    ck_tstor_ok(tstor_checkpoint_load_buffer(ctx, data, size, NULL, &ck));
    ck_assert_uint_gt(sweep_save(golden[i], ck, TSTOR_FORMAT_SAFETENSORS), 0);
    tstor_checkpoint_free(ck);
    free(data);
  }
}
END_TEST

/* GGUF: metadata of every kind, plain and quantized tensors, loaded and
 * saved; and a whole tree dequantized, which either changes every value or
 * none. */
START_TEST(test_gguf) {
  static const char *const files[] = {"gguf/golden/quant.gguf", "gguf/golden/v2.gguf",
                                      "gguf/crafted/empty_arrays.gguf"};
  unsigned long total = 0;
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    size_t size;
    void *data = tstor_test_slurp(coretest_src(files[i]), &size);
    total += sweep_load(files[i], data, size);
    tstor_checkpoint *ck;
    ck_tstor_ok(tstor_checkpoint_load_buffer(ctx, data, size, NULL, &ck));
    total += sweep_save(files[i], ck, TSTOR_FORMAT_GGUF);
    const tstor_value *root = tstor_checkpoint_root(ck);
    size_t quantized = 0;
    for (size_t k = 0; k < tstor_value_len(root); k++)
      quantized += tstor_value_kind_of(tstor_value_item(root, k)) == TSTOR_VALUE_QUANTIZED;
    for (unsigned long nth = 1;; nth++) {
      tstor__fault_arm(TSTOR_FAULT_MALLOC, nth, 0);
      int rc = tstor_checkpoint_dequantize(ck, TSTOR_BFLOAT16);
      tstor__fault_disarm();
      if (tstor__fault_failed() == 0) {
        ck_tstor_ok(rc);
        break;
      }
      ck_assert_msg(rc == TSTOR_ENOMEM, "%s dequantized, allocation %lu failed: %s", files[i], nth,
                    tstor_err_name(rc));
      size_t still = 0; /* nothing half done */
      for (size_t k = 0; k < tstor_value_len(root); k++)
        still += tstor_value_kind_of(tstor_value_item(root, k)) == TSTOR_VALUE_QUANTIZED;
      ck_assert_uint_eq(still, quantized);
      total++;
    }
    tstor_checkpoint_free(ck);
    free(data);
  }
  fprintf(stderr, "gguf: %lu allocations failed in turn, each refused cleanly\n", total);
}
END_TEST

static void noop_deleter(DLManagedTensor *m) { (void)m; }

START_TEST(test_dlpack) {
  int64_t s[] = {2, 3};
  tstor_device cpu = coretest_dev(ctx, "cpu");
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_zeros(ctx, cpu, TSTOR_FLOAT32, 2, s, &t));
  for (unsigned long nth = 1;; nth++) {
    DLManagedTensor *m = (DLManagedTensor *)&m;
    tstor__fault_arm(TSTOR_FAULT_MALLOC, nth, 0);
    int rc = tstor_dlpack_export(t, &m);
    tstor__fault_disarm();
    if (tstor__fault_failed() == 0) {
      ck_assert_int_eq(rc, 0);
      m->deleter(m);
      break;
    }
    ck_assert_int_eq(rc, TSTOR_ENOMEM);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(tstor__fault_live(), 0);
  }
  float v[6] = {0};
  int64_t shape[] = {2, 3};
  DLManagedTensor mt = {.dl_tensor = {.data = v, .device = {kDLCPU, 0}, .ndim = 2,
                                      .dtype = {kDLFloat, 32, 1}, .shape = shape},
                        .deleter = noop_deleter};
  for (unsigned long nth = 1;; nth++) {
    tstor_tensor *out = (tstor_tensor *)&out;
    tstor__fault_arm(TSTOR_FAULT_MALLOC, nth, 0);
    int rc = tstor_dlpack_import(ctx, &mt, &out);
    tstor__fault_disarm();
    if (tstor__fault_failed() == 0) {
      ck_assert_int_eq(rc, 0);
      tstor_tensor_release(out);
      break;
    }
    ck_assert_int_eq(rc, TSTOR_ENOMEM);
    ck_assert_ptr_null(out);
    ck_assert_int_eq(tstor__fault_live(), 0);
  }
  tstor_tensor_release(t);
}
END_TEST

static int versioned_deleted;
static void count_deleter(DLManagedTensorVersioned *m) {
  (void)m;
  versioned_deleted++;
}

/* DLPack 1.x: an export of a copy, and an import that copies read-only
 * memory, each failed at every allocation: nothing handed back, nothing
 * left, the producer's deleter not called. */
START_TEST(test_dlpack_versioned) {
  int64_t s[] = {2, 3};
  tstor_device cpu = coretest_dev(ctx, "cpu");
  tstor_tensor *t;
  ck_tstor_ok(tstor_tensor_zeros(ctx, cpu, TSTOR_FLOAT32, 2, s, &t));
  for (unsigned long nth = 1;; nth++) {
    DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)&m;
    tstor__fault_arm(TSTOR_FAULT_MALLOC, nth, 0);
    int rc = tstor_dlpack_export_versioned(t, TSTOR_DLPACK_COPY, &m);
    tstor__fault_disarm();
    if (tstor__fault_failed() == 0) {
      ck_assert_int_eq(rc, 0);
      ck_assert_int_eq(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
      m->deleter(m);
      break;
    }
    ck_assert_int_eq(rc, TSTOR_ENOMEM);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(tstor__fault_live(), 0);
  }
  float v[6] = {0};
  int64_t shape[] = {2, 3};
  for (int ro = 0; ro < 2; ro++) {
    DLManagedTensorVersioned mt = {.version = {1, 0},
                                   .deleter = count_deleter,
                                   .flags = ro ? DLPACK_FLAG_BITMASK_READ_ONLY : 0,
                                   .dl_tensor = {.data = v,
                                                 .device = {kDLCPU, 0},
                                                 .ndim = 2,
                                                 .dtype = {kDLFloat, 32, 1},
                                                 .shape = shape}};
    for (unsigned long nth = 1;; nth++) {
      tstor_tensor *out = (tstor_tensor *)&out;
      versioned_deleted = 0;
      tstor__fault_arm(TSTOR_FAULT_MALLOC, nth, 0);
      int rc = tstor_dlpack_import_versioned(ctx, &mt, 0, &out);
      tstor__fault_disarm();
      if (tstor__fault_failed() == 0) {
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(versioned_deleted, ro); /* a copy gives the memory back at once */
        tstor_tensor_release(out);
        ck_assert_int_eq(versioned_deleted, 1);
        break;
      }
      ck_assert_int_eq(rc, TSTOR_ENOMEM);
      ck_assert_ptr_null(out);
      ck_assert_int_eq(versioned_deleted, 0);
      ck_assert_int_eq(tstor__fault_live(), 0);
    }
  }
  tstor_tensor_release(t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("io_faults");
  TCase *tc = tcase_create("io_faults");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, test_loads_and_saves);
  tcase_add_test(tc, test_safetensors);
  tcase_add_test(tc, test_gguf);
  tcase_add_test(tc, test_dlpack);
  tcase_add_test(tc, test_dlpack_versioned);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
