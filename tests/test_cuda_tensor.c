/* Tensors on a real GPU: the copy cases PyTorch made, run with tensors on
 * cuda:0 (same-dtype copies there go through the backend's strided kernel, one
 * launch each); large permutes whose result must equal the host's byte for
 * byte; DLPack export and import of device and pinned tensors; checkpoints
 * of every format loaded with map_location "cuda:0", saved from the device
 * (torch.save and safetensors), and one PyTorch saved on a GPU loaded
 * without map_location.
 *
 * Without a usable GPU the suite exits 77 (skipped) and prints why.
 * TSTOR_TEST_CUDA_CACHING=no runs it with the caching allocators off, as for
 * compute-sanitizer (docs/cuda.md). */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tstor/dlpack.h>
#include <tstor/serialize.h>
#include <unistd.h>

#include "copycases.h"
#include "cudasaved.h"
#include "cudatest.h"
#include "ondevice.h"

static tstor_context *ctx;
static tstor_device cpu, gpu;

static void setup(void) {
  ctx = cudatest_open();
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  ck_tstor_ok(tstor_device_parse(ctx, "cuda:0", &gpu));
}

static void teardown(void) {
  tstor_context_close(ctx);
  ctx = NULL;
}

static uint64_t rng_state = 0x853c49e6748fea9bull;
static uint64_t rng(void) { return tstor_test_rng(&rng_state); }

static int on_gpu(const tstor_tensor *t) {
  tstor_device d = tstor_tensor_device(t);
  return d.type == gpu.type && d.index == gpu.index;
}

/* s's bytes on the host, in a new storage. */
static tstor_storage *to_host(tstor_storage *s) {
  tstor_storage *h;
  ck_tstor_ok(tstor_storage_to(s, cpu, &h));
  return h;
}

static int same_bytes(tstor_storage *a, tstor_storage *b) {
  tstor_storage *ha = to_host(a), *hb = to_host(b);
  size_t n = tstor_storage_nbytes(ha);
  int same = n == tstor_storage_nbytes(hb) &&
             (n == 0 || memcmp(tstor_storage_data(ha), tstor_storage_data(hb), n) == 0);
  tstor_storage_release(ha);
  tstor_storage_release(hb);
  return same;
}

/* ---------------------------------------------------------- copy cases */

/* Every case whose two tensors are on the GPU, and each side alone there. */
START_TEST(copies_as_pytorch_on_the_gpu) {
  ck_assert_int_gt(run_copies(ctx, cpu, gpu, gpu), 700);
  ck_assert_int_gt(run_copies(ctx, cpu, gpu, cpu), 500);
  ck_assert_int_gt(run_copies(ctx, cpu, cpu, gpu), 500);
}
END_TEST

/* ------------------------------------------------------------- permutes */

/* A tensor of `sizes` holding random bits, on the host and the same bytes on
 * the GPU. */
static void random_pair(tstor_dtype dt, int ndim, const int64_t *sizes, tstor_tensor **host,
                        tstor_tensor **dev) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= sizes[d];
  size_t nbytes = (size_t)n * tstor_dtype_size(dt);
  tstor_storage *h, *g;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, nbytes, &h));
  unsigned char *p = tstor_storage_data(h);
  for (size_t i = 0; i < nbytes; i++) p[i] = (unsigned char)rng();
  ck_tstor_ok(tstor_storage_to(h, gpu, &g));
  ck_tstor_ok(tstor_tensor_on_storage(h, dt, 0, ndim, sizes, NULL, host));
  ck_tstor_ok(tstor_tensor_on_storage(g, dt, 0, ndim, sizes, NULL, dev));
  tstor_storage_release(h);
  tstor_storage_release(g);
}

typedef struct permute_case {
  int ndim;
  int64_t sizes[5];
  int64_t perm[5];
} permute_case;

/* Transposes with sides that are and are not multiples of the kernel's tile,
 * NCHW -> NHWC, a batch between the two transposed dimensions, five
 * dimensions, and sides too short to tile. */
static const permute_case permutes[] = {
    {2, {1000, 777}, {1, 0}},
    {2, {512, 256}, {1, 0}},
    {2, {8, 3000}, {1, 0}},
    {4, {4, 35, 33, 31}, {0, 2, 3, 1}},
    {3, {40, 7, 50}, {2, 1, 0}},
    {5, {3, 4, 5, 6, 7}, {4, 2, 0, 3, 1}},
    {3, {5, 3, 2}, {2, 0, 1}},
};

/* contiguous() of case pc's permuted view of random bytes, on the GPU against
 * the host, and the other way round: a contiguous source copied into the
 * permuted destination. */
static void check_permute(tstor_dtype dt, const permute_case *pc, size_t c) {
  tstor_tensor *h, *g, *hv, *gv, *hc, *gc;
  random_pair(dt, pc->ndim, pc->sizes, &h, &g);
  ck_tstor_ok(tstor_tensor_permute(h, pc->ndim, pc->perm, &hv));
  ck_tstor_ok(tstor_tensor_permute(g, pc->ndim, pc->perm, &gv));
  ck_tstor_ok(tstor_tensor_contiguous(hv, &hc));
  ck_tstor_ok(tstor_tensor_contiguous(gv, &gc));
  ck_assert(on_gpu(gc));
  ck_assert_msg(same_bytes(tstor_tensor_storage(gc), tstor_tensor_storage(hc)),
                "%s, case %zu: the GPU's contiguous() differs from the host's", tstor_dtype_name(dt), c);
  ck_tstor_ok(tstor_tensor_copy_(gv, gc));
  ck_tstor_ok(tstor_tensor_copy_(hv, hc));
  ck_assert_msg(same_bytes(tstor_tensor_storage(g), tstor_tensor_storage(h)),
                "%s, case %zu: the GPU's copy into the permuted view differs from the host's", tstor_dtype_name(dt),
                c);
  tstor_tensor_release(hc);
  tstor_tensor_release(gc);
  tstor_tensor_release(hv);
  tstor_tensor_release(gv);
  tstor_tensor_release(h);
  tstor_tensor_release(g);
}

/* Every case, for every element size the kernel moves (1, 2, 4, 8 and 16
 * bytes). */
START_TEST(permutes_match_the_host) {
  static const tstor_dtype dtypes[] = {TSTOR_UINT8, TSTOR_INT16, TSTOR_FLOAT32, TSTOR_FLOAT64,
                                       TSTOR_COMPLEX128};
  for (size_t c = 0; c < sizeof permutes / sizeof permutes[0]; c++) check_permute(dtypes[_i], &permutes[c], c);
}
END_TEST

/* The transposing kernel's grid stops at 65535 blocks along the tiles of the
 * source's contiguous side and along the batch; past that each block takes
 * several. Both, for 1- and 4-byte elements, against the host. */
START_TEST(transposes_past_the_grid_limits) {
  static const permute_case big[] = {
      {2, {8, 65536 * 64 + 100}, {1, 0}}, /* 65538 tiles along the source's rows */
      {3, {70000, 9, 10}, {0, 2, 1}},     /* 70000 batches */
  };
  static const tstor_dtype dtypes[] = {TSTOR_UINT8, TSTOR_FLOAT32};
  for (size_t k = 0; k < 2; k++)
    for (size_t c = 0; c < 2; c++) check_permute(dtypes[k], &big[c], c);
}
END_TEST

/* A strided destination at an offset, the bytes around it untouched, and a
 * broadcast (stride 0) source. */
START_TEST(strided_destination_keeps_its_neighbours) {
  int64_t big[2] = {300, 200}, sizes[2] = {100, 50}, strides[2] = {3, 600}, row[1] = {100};
  tstor_tensor *h, *g, *hs, *gs, *hd, *gd, *hr, *gr, *he, *ge;
  random_pair(TSTOR_FLOAT32, 2, big, &h, &g);
  random_pair(TSTOR_FLOAT32, 2, sizes, &hs, &gs);
  ck_tstor_ok(tstor_tensor_as_strided(h, 2, sizes, strides, 7, &hd));
  ck_tstor_ok(tstor_tensor_as_strided(g, 2, sizes, strides, 7, &gd));
  ck_tstor_ok(tstor_tensor_copy_(hd, hs));
  ck_tstor_ok(tstor_tensor_copy_(gd, gs));
  ck_assert(same_bytes(tstor_tensor_storage(g), tstor_tensor_storage(h)));
  /* one row broadcast over the 50 columns: the source's stride is 0 */
  random_pair(TSTOR_FLOAT32, 1, row, &hr, &gr);
  int64_t col[2] = {100, 1}, wide[2] = {100, 50};
  tstor_tensor *hr2, *gr2;
  ck_tstor_ok(tstor_tensor_view(hr, 2, col, &hr2));
  ck_tstor_ok(tstor_tensor_view(gr, 2, col, &gr2));
  ck_tstor_ok(tstor_tensor_expand(hr2, 2, wide, &he));
  ck_tstor_ok(tstor_tensor_expand(gr2, 2, wide, &ge));
  ck_tstor_ok(tstor_tensor_copy_(hd, he));
  ck_tstor_ok(tstor_tensor_copy_(gd, ge));
  ck_assert(same_bytes(tstor_tensor_storage(g), tstor_tensor_storage(h)));
  tstor_tensor *list[] = {h, g, hs, gs, hd, gd, hr, gr, hr2, gr2, he, ge};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) tstor_tensor_release(list[i]);
}
END_TEST

/* ---------------------------------------------------------------- DLPack */

/* A cuda tensor goes out as kDLCUDA with its own device pointer, and comes
 * back in as the same bytes on cuda:0; the export's deleter runs once, when
 * the imported tensor goes. */
START_TEST(dlpack_round_trip_of_a_device_tensor) {
  int64_t sizes[2] = {64, 48};
  tstor_tensor *h, *g, *gt;
  random_pair(TSTOR_FLOAT32, 2, sizes, &h, &g);
  ck_tstor_ok(tstor_tensor_t(g, &gt));
  DLManagedTensor *m;
  ck_tstor_ok(tstor_dlpack_export(gt, &m));
  ck_assert_int_eq(m->dl_tensor.device.device_type, kDLCUDA);
  ck_assert_int_eq(m->dl_tensor.device.device_id, 0);
  ck_assert_ptr_eq(m->dl_tensor.data, tstor_tensor_data(gt));
  ck_assert_int_eq(m->dl_tensor.ndim, 2);
  ck_assert_int_eq(m->dl_tensor.shape[0], 48);
  ck_assert_int_eq(m->dl_tensor.strides[0], 1);
  ck_assert_int_eq(m->dl_tensor.strides[1], 48);
  /* The device pointer is one CUDA knows as device memory. */
  struct cudaPointerAttributes attr;
  ck_assert_int_eq(cudaPointerGetAttributes(&attr, m->dl_tensor.data), cudaSuccess);
  ck_assert_int_eq(attr.type, cudaMemoryTypeDevice);
  ck_assert_int_eq(attr.device, 0);
  tstor_tensor *back, *bc, *hb, *ht, *hc;
  ck_tstor_ok(tstor_dlpack_import(ctx, m, &back));
  ck_assert(on_gpu(back));
  ck_assert_ptr_eq(tstor_tensor_data(back), tstor_tensor_data(gt));
  /* its elements in row-major order, against the host's transpose */
  ck_tstor_ok(tstor_tensor_contiguous(back, &bc));
  ck_tstor_ok(tstor_tensor_to(bc, cpu, TSTOR_FLOAT32, &hb));
  ck_tstor_ok(tstor_tensor_t(h, &ht));
  ck_tstor_ok(tstor_tensor_contiguous(ht, &hc));
  ck_assert_int_eq(memcmp(tstor_tensor_data(hb), tstor_tensor_data(hc), 64 * 48 * 4), 0);
  long uses = tstor_tensor_use_count(gt);
  tstor_tensor_release(back); /* the export's deleter: its reference on gt goes */
  ck_assert_int_eq(tstor_tensor_use_count(gt), uses - 1);
  tstor_tensor *list[] = {h, g, gt, bc, hb, ht, hc};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) tstor_tensor_release(list[i]);
}
END_TEST

/* Pinned host memory goes out as kDLCUDAHost and comes back as cpu. */
START_TEST(dlpack_of_pinned_memory) {
  tstor_storage *h, *p;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, 4096, &h));
  memset(tstor_storage_data(h), 0x3c, 4096);
  ck_tstor_ok(tstor_storage_pin(h, &p));
  int64_t n = 1024;
  tstor_tensor *t, *back;
  ck_tstor_ok(tstor_tensor_on_storage(p, TSTOR_INT32, 0, 1, &n, NULL, &t));
  DLManagedTensor *m;
  ck_tstor_ok(tstor_dlpack_export(t, &m));
  ck_assert_int_eq(m->dl_tensor.device.device_type, kDLCUDAHost);
  ck_assert_ptr_eq(m->dl_tensor.data, tstor_storage_data(p));
  ck_tstor_ok(tstor_dlpack_import(ctx, m, &back));
  ck_assert_int_eq(tstor_tensor_device(back).type, cpu.type);
  ck_assert_ptr_eq(tstor_tensor_data(back), tstor_storage_data(p));
  ck_assert_uint_eq(((unsigned char *)tstor_tensor_data(back))[4095], 0x3c);
  tstor_tensor_release(back);
  tstor_tensor_release(t);
  tstor_storage_release(p);
  tstor_storage_release(h);
}
END_TEST

/* A producer other than tstor: memory from cudaMalloc, with a deleter that
 * frees it, imported as a cuda:0 tensor that owns it. */
typedef struct foreign {
  DLManagedTensor m;
  int64_t shape[1];
  int deleted;
} foreign;

static void foreign_deleter(DLManagedTensor *m) {
  foreign *f = m->manager_ctx;
  ck_assert_int_eq(cudaFree(m->dl_tensor.data), cudaSuccess);
  f->deleted++;
}

START_TEST(dlpack_import_of_foreign_device_memory) {
  enum { N = 5000 };
  static double values[N];
  for (int i = 0; i < N; i++) values[i] = i * 0.25 - 17;
  foreign f = {0};
  void *d = NULL;
  ck_assert_int_eq(cudaMalloc(&d, sizeof values), cudaSuccess);
  ck_assert_int_eq(cudaMemcpy(d, values, sizeof values, cudaMemcpyHostToDevice), cudaSuccess);
  f.shape[0] = N;
  f.m.dl_tensor = (DLTensor){d, {kDLCUDA, 0}, 1, {kDLFloat, 64, 1}, f.shape, NULL, 0};
  f.m.manager_ctx = &f;
  f.m.deleter = foreign_deleter;
  tstor_tensor *t, *h;
  ck_tstor_ok(tstor_dlpack_import(ctx, &f.m, &t));
  ck_assert(on_gpu(t));
  ck_assert_ptr_eq(tstor_tensor_data(t), d);
  ck_tstor_ok(tstor_tensor_to(t, cpu, TSTOR_FLOAT64, &h));
  ck_assert_int_eq(memcmp(tstor_tensor_data(h), values, sizeof values), 0);
  /* a device the context does not have is refused, the deleter not called */
  foreign bad = f;
  bad.m.dl_tensor.device.device_id = 4096;
  tstor_tensor *none = (tstor_tensor *)1;
  ck_tstor_err(tstor_dlpack_import(ctx, &bad.m, &none), TSTOR_ENODEV);
  ck_assert_ptr_null(none);
  ck_assert_int_eq(f.deleted, 0);
  tstor_tensor_release(h);
  tstor_tensor_release(t);
  ck_assert_int_eq(f.deleted, 1);
}
END_TEST

/* ------------------------------------------------------------ checkpoints */

/* Every format's files that other software wrote, loaded with map_location
 * "cuda:0", hold on the GPU the bytes a cpu load maps (ondevice.h, which
 * test_ckpt_golden runs on hpu-stub). */
START_TEST(every_format_loads_onto_the_gpu) {
  ck_assert_int_gt(ondevice_every_format(ctx, "cuda:0"), 300);
}
END_TEST

/* Tensors on the GPU saved with torch.save and safetensors, loaded back onto
 * the GPU and onto the host. */
START_TEST(checkpoints_save_from_and_load_to_the_gpu) {
  int64_t sizes[2] = {33, 17};
  tstor_tensor *h, *g, *gt;
  random_pair(TSTOR_BFLOAT16, 2, sizes, &h, &g);
  ck_tstor_ok(tstor_tensor_t(g, &gt)); /* saved with its strides by torch.save */
  tstor_checkpoint *ck;
  tstor_value *root, *key, *val;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &root));
  ck_tstor_ok(tstor_value_new_string(ck, "w", 1, &key));
  ck_tstor_ok(tstor_value_new_tensor(ck, gt, &val));
  ck_tstor_ok(tstor_value_dict_set(root, key, val));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, root));
  char dir[] = "/tmp/tstor_cuda_ckpt_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char pt[64], st[64];
  snprintf(pt, sizeof pt, "%s/w.pt", dir);
  snprintf(st, sizeof st, "%s/w.safetensors", dir);
  ck_tstor_ok(tstor_torch_save(ck, pt, NULL));
  ck_tstor_ok(tstor_safetensors_save(ck, st, NULL));
  tstor_load_options o = {sizeof o, "cuda:0", 0};
  tstor_checkpoint *dev, *host;
  ck_tstor_ok(tstor_torch_load(ctx, pt, &o, &dev));
  ck_tstor_ok(tstor_torch_load(ctx, pt, NULL, &host));
  ondevice_same_storages(ctx, dev, host, gpu, pt);
  ck_assert(same_bytes(tstor_tensor_storage(tstor_value_tensor(
                           tstor_value_dict_get(tstor_checkpoint_root(dev), "w"))),
                       tstor_tensor_storage(h)));
  tstor_checkpoint_free(dev);
  tstor_checkpoint_free(host);
  ck_tstor_ok(tstor_safetensors_load(ctx, st, &o, &dev));
  ck_tstor_ok(tstor_safetensors_load(ctx, st, NULL, &host));
  ondevice_same_storages(ctx, dev, host, gpu, st);
  tstor_checkpoint_free(dev);
  tstor_checkpoint_free(host);
  tstor_checkpoint_free(ck);
  unlink(pt);
  unlink(st);
  rmdir(dir);
  tstor_tensor_release(gt);
  tstor_tensor_release(g);
  tstor_tensor_release(h);
}
END_TEST

/* A file PyTorch saved from a GPU: without map_location, onto cuda:0. */
START_TEST(a_file_saved_on_a_gpu_loads_onto_it) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_torch_load(ctx, CUDA_SAVED_PT, NULL, &ck));
  cuda_saved_check(ctx, ck, gpu);
  tstor_checkpoint_free(ck);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cuda tensors");
  TCase *t = tcase_create("copies");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 600);
  tcase_add_test(t, copies_as_pytorch_on_the_gpu);
  tcase_add_loop_test(t, permutes_match_the_host, 0, 5);
  tcase_add_test(t, transposes_past_the_grid_limits);
  tcase_add_test(t, strided_destination_keeps_its_neighbours);
  suite_add_tcase(s, t);
  t = tcase_create("dlpack");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, dlpack_round_trip_of_a_device_tensor);
  tcase_add_test(t, dlpack_of_pinned_memory);
  tcase_add_test(t, dlpack_import_of_foreign_device_memory);
  suite_add_tcase(s, t);
  t = tcase_create("checkpoints");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 600);
  tcase_add_test(t, every_format_loads_onto_the_gpu);
  tcase_add_test(t, checkpoints_save_from_and_load_to_the_gpu);
  tcase_add_test(t, a_file_saved_on_a_gpu_loads_onto_it);
  suite_add_tcase(s, t);
  return cudatest_run("test_cuda_tensor", s);
}
