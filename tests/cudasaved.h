/* The values of tests/ckpt/cuda_saved.pt, which PyTorch 2.11 wrote from an
 * H200 (ckpt/gen_cuda_saved.py): its storages are tagged "cuda:0". Checks a
 * load of it, wherever its storages went. Included after testutil.h. */
#ifndef TSTOR_CUDASAVED_H
#define TSTOR_CUDASAVED_H

#include <stdint.h>
#include <string.h>
#include <tstor/serialize.h>
#include <tstor/tensor.h>

#define CUDA_SAVED_PT TSTOR_TEST_SRCDIR "/ckpt/cuda_saved.pt"

static const tstor_tensor *cuda_saved_tensor(const tstor_checkpoint *ck, const char *name) {
  const tstor_value *v = tstor_value_dict_get(tstor_checkpoint_root(ck), name);
  ck_assert_msg(v != NULL, "no \"%s\" in cuda_saved.pt", name);
  ck_assert_ptr_nonnull(tstor_value_tensor(v));
  return tstor_value_tensor(v);
}

/* Its tensors' values and layouts; every storage on `where`. */
static void cuda_saved_check(tstor_context *ctx, const tstor_checkpoint *ck, tstor_device where) {
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  ck_assert_uint_eq(tstor_checkpoint_storage_count(ck), 3);
  for (size_t k = 0; k < 3; k++) {
    tstor_storage *s;
    ck_tstor_ok(tstor_checkpoint_storage(ck, k, NULL, &s));
    ck_assert_int_eq(tstor_storage_device(s).type, where.type);
    ck_assert_int_eq(tstor_storage_device(s).index, where.index);
  }
  const tstor_tensor *a = cuda_saved_tensor(ck, "a"), *t = cuda_saved_tensor(ck, "t");
  const tstor_tensor *i = cuda_saved_tensor(ck, "i"), *h = cuda_saved_tensor(ck, "h");
  ck_assert_ptr_eq(tstor_tensor_storage(a), tstor_tensor_storage(t)); /* shared in the file */
  ck_assert_int_eq(tstor_tensor_strides(t)[0], 1);
  ck_assert_int_eq(tstor_tensor_strides(t)[1], 4);
  float av[12];
  int64_t iv[5];
  uint16_t hv[7];
  ck_tstor_ok(tstor_tensor_to_array(a, av, TSTOR_FLOAT32, 12));
  ck_tstor_ok(tstor_tensor_to_array(i, iv, TSTOR_INT64, 5));
  ck_tstor_ok(tstor_tensor_to_array(h, hv, TSTOR_BFLOAT16, 7));
  for (int k = 0; k < 12; k++) ck_assert(av[k] == (float)k);
  for (int k = 0; k < 5; k++) ck_assert_int_eq(iv[k], -3 * k);
  /* linspace(-1, 1, 7) in bfloat16, as PyTorch computed it on the GPU */
  static const uint16_t want_h[7] = {0xbf80, 0xbf2b, 0xbeab, 0xb300, 0x3eab, 0x3f2b, 0x3f80};
  ck_assert_int_eq(memcmp(hv, want_h, sizeof hv), 0);
}

#endif
