/* Saves whose sync fails: this program defines fsync(), which the dynamic
 * linker then binds libtstor-io's calls to, and fails the file's sync or
 * its folder's on demand. A save whose file cannot be synced must fail with
 * the error and leave the old file as it was and no temporary file behind;
 * one whose folder cannot be synced has replaced the file, and says that
 * the rename may not be on disk yet (serialize.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include <tstor/serialize.h>
#include <tstor/tensor.h>

static int fail_at;    /* the fsync call, from 1, that fails; 0: none */
static int fail_errno; /* with this errno */
static int calls;

int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  if (++calls == fail_at) {
    errno = fail_errno;
    return -1;
  }
  return real(fd);
}

static tstor_context *ctx;
static char dir[] = "/tmp/tstor-savefault-XXXXXX";

static void setup(void) {
  ck_tstor_ok(tstor_context_open(NULL, &ctx));
  ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') {
      char p[512];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  if (d) closedir(d);
  rmdir(dir);
  strcpy(dir + strlen(dir) - 6, "XXXXXX");
  tstor_context_close(ctx);
}

/* A checkpoint of one float32 tensor [3] holding 1, 2, 3. */
static tstor_checkpoint *small(void) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_checkpoint_new(&ck));
  tstor_value *root, *key, *val;
  tstor_tensor *t;
  int64_t three[] = {3};
  tstor_device cpu;
  ck_tstor_ok(tstor_device_parse(ctx, "cpu", &cpu));
  ck_tstor_ok(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 1, three, &t));
  float *p = tstor_tensor_data(t);
  p[0] = 1, p[1] = 2, p[2] = 3;
  ck_tstor_ok(tstor_value_new(ck, TSTOR_VALUE_DICT, &root));
  ck_tstor_ok(tstor_value_new_string(ck, "w", 1, &key));
  ck_tstor_ok(tstor_value_new_tensor(ck, t, &val));
  ck_tstor_ok(tstor_value_dict_set(root, key, val));
  ck_tstor_ok(tstor_checkpoint_set_root(ck, root));
  tstor_tensor_release(t);
  return ck;
}

static int entries(void) {
  int n = 0;
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

static void spit(const char *path, const char *s) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(s, f);
  fclose(f);
}

static void old_file_intact(const char *path) {
  char buf[64] = "";
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  ck_assert_ptr_nonnull(fgets(buf, sizeof buf, f));
  fclose(f);
  ck_assert_str_eq(buf, "old contents");
  ck_assert_int_eq(entries(), 1); /* no temporary file left */
}

/* Saves over an old file at dir/model with the `nth` fsync failing with `e`
 * (0: none); returns the save's code. */
static int save_over_old(int safetensors, int nth, int e, char *path, size_t size) {
  tstor_checkpoint *ck = small();
  snprintf(path, size, "%s/model", dir);
  spit(path, "old contents");
  calls = 0;
  fail_at = nth;
  fail_errno = e;
  int rc = safetensors ? tstor_safetensors_save(ck, path, NULL) : tstor_torch_save(ck, path, NULL);
  fail_at = 0;
  tstor_checkpoint_free(ck);
  return rc;
}

START_TEST(file_sync_fails) {
  int safetensors = _i & 1, enospc = _i & 2;
  char path[512];
  ck_tstor_err(save_over_old(safetensors, 1, enospc ? ENOSPC : EIO, path, sizeof path),
               enospc ? TSTOR_ENOSPC : TSTOR_EIO);
  ck_last_error_has(strerror(enospc ? ENOSPC : EIO));
  ck_assert_int_eq(calls, 1);
  old_file_intact(path);
}
END_TEST

START_TEST(folder_sync_fails) {
  int safetensors = _i;
  char path[512];
  ck_tstor_err(save_over_old(safetensors, 2, EIO, path, sizeof path), TSTOR_EIO);
  ck_last_error_has("written, but its folder could not be synced");
  ck_assert_int_eq(entries(), 1);
  /* the new file is in place and whole */
  tstor_checkpoint *back;
  ck_tstor_ok(safetensors ? tstor_safetensors_load(ctx, path, NULL, &back) : tstor_torch_load(ctx, path, NULL, &back));
  const tstor_value *w = tstor_value_dict_get(tstor_checkpoint_root(back), "w");
  ck_assert_ptr_nonnull(w);
  ck_assert_float_eq(((float *)tstor_tensor_data(tstor_value_tensor(w)))[2], 3);
  tstor_checkpoint_free(back);
}
END_TEST

/* A folder whose file system cannot sync folders (EINVAL) is taken at its
 * word: the save succeeds. */
START_TEST(folder_cannot_sync) {
  tstor_checkpoint *ck = small();
  char path[512];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  calls = 0;
  fail_at = 2;
  fail_errno = EINVAL;
  ck_tstor_ok(tstor_safetensors_save(ck, path, NULL));
  fail_at = 0;
  ck_assert_int_eq(calls, 2);
  tstor_checkpoint_free(ck);
}
END_TEST

int main(void) {
  Suite *s = suite_create("save_faults");
  TCase *tc = tcase_create("fsync");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_loop_test(tc, file_sync_fails, 0, 4);
  tcase_add_loop_test(tc, folder_sync_fails, 0, 2);
  tcase_add_test(tc, folder_cannot_sync);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
