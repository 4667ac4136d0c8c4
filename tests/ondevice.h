/* Checkpoints loaded straight onto a device (map_location), held against the
 * same files loaded onto the cpu: shared by the hpu-stub's run in
 * test_ckpt_golden and the GPU's in test_cuda_tensor, so that what a GPU
 * machine runs is first tried here on hpu-stub, whose memory faults when the
 * host touches it. For Check suites (failures are ck_assert). */
#ifndef TSTOR_TEST_ONDEVICE_H
#define TSTOR_TEST_ONDEVICE_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <tstor/serialize.h>

#include "testutil.h"

/* The storages of `dev`, a load onto device `where`, against those of
 * `ref`, a load of the same file onto the cpu or elsewhere: as many, in the
 * same order, each on `where` (a meta storage stays meta, as torch.load
 * leaves it) and holding ref's bytes, both read back to the cpu through
 * tstor_storage_to. (The includer defines _GNU_SOURCE, for asprintf.) */
static void ondevice_same_storages(tstor_context *ctx, tstor_checkpoint *dev, tstor_checkpoint *ref,
                                   tstor_device where, const char *name) {
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  size_t n = tstor_checkpoint_storage_count(ref);
  ck_assert_msg(tstor_checkpoint_storage_count(dev) == n,
                "%s: %zu storages on the device, %zu in the reference", name,
                tstor_checkpoint_storage_count(dev), n);
  for (size_t k = 0; k < n; k++) {
    tstor_storage *sd, *sr, *bd, *br;
    ck_tstor_ok(tstor_checkpoint_storage(dev, k, NULL, &sd));
    ck_tstor_ok(tstor_checkpoint_storage(ref, k, NULL, &sr));
    tstor_device rd = tstor_storage_device(sr), dd = tstor_storage_device(sd);
    ck_assert_uint_eq(tstor_storage_nbytes(sd), tstor_storage_nbytes(sr));
    if (tstor_device_type_flags(ctx, rd.type) & TSTOR_DEVICE_NO_DATA) {
      ck_assert_msg(dd.type == rd.type, "%s: storage %zu left meta", name, k);
      continue;
    }
    ck_assert_msg(dd.type == where.type && dd.index == where.index,
                  "%s: storage %zu is not on the device", name, k);
    ck_tstor_ok(tstor_storage_to(sd, cpu, &bd));
    ck_tstor_ok(tstor_storage_to(sr, cpu, &br));
    ck_assert_msg(
        tstor_storage_nbytes(br) == 0 ||
            memcmp(tstor_storage_data(bd), tstor_storage_data(br), tstor_storage_nbytes(br)) == 0,
        "%s: storage %zu differs on the device", name, k);
    tstor_storage_release(bd);
    tstor_storage_release(br);
  }
}

/* The folders of checkpoints that other software wrote, one or more of each
 * format tstor reads, under the tests' source folder. */
static const char *const ondevice_folders[] = {
    "ckpt/golden",        /* torch.save by PyTorch 1.13: zip and legacy */
    "ckpt/golden_torch2", /* torch.save by PyTorch 2.x: its dtypes, quantized tensors */
    "ckpt/tar",           /* torch.save's first format, some saved on a GPU */
    "ckpt/st_golden",     /* safetensors, every dtype */
    "corpus/files",       /* real files of other projects (corpus/SOURCES) */
    "t7/torch7-written",  /* Lua Torch */
    "gguf/golden",        /* the gguf package's, quantized types too */
};

/* Every checkpoint in ondevice_folders, loaded with map_location `where` and
 * with map_location "cpu": the same outcome (a file refused one way is
 * refused the other, with the same code) and, where both load, the same
 * storages. Each folder must give at least one file that loads. Returns how
 * many loaded. */
static int ondevice_every_format(tstor_context *ctx, const char *where) {
  tstor_device dev;
  ck_tstor_ok(tstor_device_parse(ctx, where, &dev));
  tstor_load_options on_dev = {sizeof on_dev, where, 0}, on_cpu = {sizeof on_cpu, "cpu", 0};
  int total = 0;
  for (size_t f = 0; f < sizeof ondevice_folders / sizeof *ondevice_folders; f++) {
    char *dir;
    ck_assert(asprintf(&dir, "%s/%s", TSTOR_TEST_SRCDIR, ondevice_folders[f]) > 0);
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "%s cannot be read", dir);
    int loaded = 0;
    for (struct dirent *e; (e = readdir(d));) {
      char *path;
      ck_assert(asprintf(&path, "%s/%s", dir, e->d_name) > 0);
      tstor_file_format format;
      if (e->d_name[0] == '.' || tstor_file_format_of(path, &format) != 0 ||
          format == TSTOR_FORMAT_UNKNOWN) {
        free(path);
        continue;
      }
      tstor_checkpoint *a = NULL, *b = NULL;
      int rc_dev = tstor_checkpoint_load(ctx, path, &on_dev, &a);
      char why[256];
      snprintf(why, sizeof why, "%s", rc_dev ? tstor_last_error() : "");
      int rc_cpu = tstor_checkpoint_load(ctx, path, &on_cpu, &b);
      ck_assert_msg(rc_dev == rc_cpu, "%s: %s onto %s, %s onto the cpu (%s / %s)", path,
                    tstor_err_name(rc_dev), where, tstor_err_name(rc_cpu), why,
                    rc_cpu ? tstor_last_error() : "");
      if (rc_dev == 0) {
        ondevice_same_storages(ctx, a, b, dev, path);
        loaded++;
      }
      tstor_checkpoint_free(a);
      tstor_checkpoint_free(b);
      free(path);
    }
    closedir(d);
    ck_assert_msg(loaded > 0, "no checkpoint of %s loaded", dir);
    free(dir);
    total += loaded;
  }
  return total;
}

#endif /* TSTOR_TEST_ONDEVICE_H */
