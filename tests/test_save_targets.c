/* torch.save's file-like targets, for every format: a save to an open
 * stream or to memory gives the bytes a save to a path gives (which
 * ckpt/roundtrip.sh has PyTorch read); a load from an fd (a file, at any
 * offset, or a pipe) or from memory gives what a load from the path gives;
 * maps shared reach the file; a file without a byteorder record is read in
 * the byte order asked. */
#define _GNU_SOURCE
#include "testutil.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

#include "ckptlist.h"

#define CKDIR TSTOR_TEST_SRCDIR "/ckpt"
#define T7DIR TSTOR_TEST_SRCDIR "/t7/torch7-written"

static tstor_context *ctx;
static char dir[64];

static void setup(void) {
  ck_tstor_ok(tstor_context_open(NULL, &ctx));
  strcpy(dir, "/tmp/tstor-targets-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}
static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ck_assert_int_eq(system(cmd), 0);
  tstor_context_close(ctx);
}


static const struct {
  const char *file;
  tstor_file_format format; /* saved back in */
  unsigned flags;
} cases[] = {
    {CKDIR "/golden/checkpoint_nested.pt", TSTOR_FORMAT_TORCH, 0},
    {CKDIR "/golden/legacy_share_dict_float32.pt", TSTOR_FORMAT_TORCH, 0},
    {CKDIR "/golden/storages.pt", TSTOR_FORMAT_TORCH, 0},
    {CKDIR "/golden/dtype_float16_2x3.pt", TSTOR_FORMAT_SAFETENSORS, 0},
    {CKDIR "/golden/share_dict_int32.pt", TSTOR_FORMAT_SAFETENSORS, TSTOR_SAVE_COPY_SHARED},
    {T7DIR "/floattensor.t7", TSTOR_FORMAT_TORCH7, 0},
    {T7DIR "/gmodule_with_linear_identity.t7", TSTOR_FORMAT_TORCH7, TSTOR_SAVE_TORCH7_ASCII},
};
#define NCASES (sizeof cases / sizeof cases[0])

/* A listing that shows values, layouts, sharing and bytes (ckptlist.h), or
 * for a Torch7 tree, whose objects it does not know, the count of values. */
static char *listing(const tstor_checkpoint *ck, tstor_file_format format) {
  if (format != TSTOR_FORMAT_TORCH7) return list_checkpoint(ck, 1);
  char *s;
  ck_assert(asprintf(&s, "%zu storages", tstor_checkpoint_storage_count(ck)) > 0);
  return s;
}

START_TEST(saves_to_a_stream_and_to_memory_are_the_path_bytes) {
  for (size_t i = 0; i < NCASES; i++) {
    tstor_checkpoint *ck;
    ck_tstor_ok(tstor_checkpoint_load(ctx, cases[i].file, NULL, &ck));
    char path[128];
    snprintf(path, sizeof path, "%s/saved", dir);
    ck_tstor_ok(tstor_checkpoint_save(ck, path, cases[i].format, TEST_SAVE_OPTS(cases[i].flags)));
    size_t plen;
    unsigned char *pbytes = (unsigned char *)tstor_test_slurp(path, &plen);
    /* to memory */
    void *mem;
    size_t mlen;
    ck_tstor_ok(tstor_checkpoint_save_buffer(ck, cases[i].format, TEST_SAVE_OPTS(cases[i].flags), &mem, &mlen));
    ck_assert_msg(mlen == plen && memcmp(mem, pbytes, plen) == 0, "%s: memory and path bytes differ", cases[i].file);
    /* to a stream, after what the caller wrote first: the stream is left open */
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    fputs("HEAD", f);
    ck_tstor_ok(tstor_checkpoint_save_stream(ck, f, cases[i].format, TEST_SAVE_OPTS(cases[i].flags)));
    fputs("TAIL", f);
    ck_assert_int_eq(ftell(f), (long)(plen + 8));
    rewind(f);
    unsigned char *sbytes = malloc(plen + 8);
    ck_assert_int_eq(fread(sbytes, 1, plen + 8, f), plen + 8);
    ck_assert_mem_eq(sbytes, "HEAD", 4);
    ck_assert_msg(memcmp(sbytes + 4, pbytes, plen) == 0, "%s: stream and path bytes differ", cases[i].file);
    ck_assert_mem_eq(sbytes + 4 + plen, "TAIL", 4);
    fclose(f);
    /* and what is read back from memory is what was saved */
    tstor_checkpoint *back, *again;
    ck_tstor_ok(tstor_checkpoint_load_buffer(ctx, mem, mlen, NULL, &back));
    ck_tstor_ok(tstor_checkpoint_load(ctx, path, NULL, &again));
    char *a = listing(back, cases[i].format), *b = listing(again, cases[i].format);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    tstor_checkpoint_free(back);
    tstor_checkpoint_free(again);
    free(sbytes);
    free(mem);
    free(pbytes);
    tstor_checkpoint_free(ck);
  }
}
END_TEST

START_TEST(loads_from_an_fd) {
  for (size_t i = 0; i < NCASES; i++) {
    tstor_checkpoint *want, *got;
    ck_tstor_ok(tstor_checkpoint_load(ctx, cases[i].file, NULL, &want));
    char *a = listing(want, cases[i].format);
    /* a file, whose offset is left where it was */
    int fd = open(cases[i].file, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(lseek(fd, 3, SEEK_SET), 3);
    ck_tstor_ok(tstor_checkpoint_load_fd(ctx, fd, NULL, &got));
    ck_assert_int_eq(lseek(fd, 0, SEEK_CUR), 3);
    char *b = listing(got, cases[i].format);
    ck_assert_str_eq(a, b);
    free(b);
    tstor_checkpoint_free(got);
    close(fd);
    /* a pipe, written by a child, read to its end */
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
      close(p[0]);
      size_t len;
      unsigned char *bytes = (unsigned char *)tstor_test_slurp(cases[i].file, &len);
      for (size_t done = 0; done < len;) {
        ssize_t n = write(p[1], bytes + done, len - done);
        if (n <= 0) _exit(1);
        done += (size_t)n;
      }
      _exit(0);
    }
    close(p[1]);
    ck_tstor_ok(tstor_checkpoint_load_fd(ctx, p[0], NULL, &got));
    close(p[0]);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    b = listing(got, cases[i].format);
    ck_assert_str_eq(a, b);
    free(b);
    free(a);
    tstor_checkpoint_free(got);
    tstor_checkpoint_free(want);
  }
  /* what cannot be */
  tstor_checkpoint *ck = (tstor_checkpoint *)1;
  ck_tstor_err(tstor_checkpoint_load_fd(ctx, -1, NULL, &ck), TSTOR_EINVAL);
  ck_assert_ptr_null(ck);
  int fd = open(cases[0].file, O_RDONLY);
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  o.flags = TSTOR_LOAD_MMAP;
  ck_tstor_err(tstor_checkpoint_load_fd(ctx, fd, &o, &ck), TSTOR_EINVAL);
  ck_last_error_has("maps a file by its path");
  close(fd);
  fd = open(TSTOR_TEST_SRCDIR, O_RDONLY | O_DIRECTORY);
  ck_tstor_err(tstor_checkpoint_load_fd(ctx, fd, NULL, &ck), TSTOR_EINVAL);
  close(fd);
  /* /dev/zero was read until memory ran out */
  fd = open("/dev/zero", O_RDONLY);
  ck_tstor_err(tstor_checkpoint_load_fd(ctx, fd, NULL, &ck), TSTOR_EINVAL);
  ck_last_error_has("a character device is not a checkpoint");
  ck_assert_ptr_null(ck);
  close(fd);
  ck_tstor_err(tstor_checkpoint_load_buffer(ctx, "hello", 5, NULL, &ck), TSTOR_EINVAL);
  ck_last_error_has("not a checkpoint tstor knows");
}
END_TEST

START_TEST(refusals) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_checkpoint_load(ctx, cases[0].file, NULL, &ck));
  void *mem = (void *)1;
  size_t len = 1;
  ck_tstor_err(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_TORCH_LEGACY, NULL, &mem, &len), TSTOR_ENOTSUP);
  ck_assert_ptr_null(mem);
  ck_assert_int_eq(len, 0);
  ck_tstor_err(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_UNKNOWN, NULL, &mem, &len), TSTOR_EINVAL);
  ck_tstor_err(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_TORCH, TEST_SAVE_OPTS(1), &mem, &len), TSTOR_EINVAL);
  char path[128];
  snprintf(path, sizeof path, "%s/never", dir);
  ck_tstor_err(tstor_checkpoint_save(ck, path, TSTOR_FORMAT_TORCH_LEGACY, NULL), TSTOR_ENOTSUP);
  ck_assert_int_eq(access(path, F_OK), -1);
  /* a nested tree is no safetensors file: refused, and memory left as it was */
  ck_tstor_err(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_SAFETENSORS, NULL, &mem, &len), TSTOR_EINVAL);
  ck_assert_ptr_null(mem);
  ck_tstor_err(tstor_checkpoint_save_stream(ck, NULL, TSTOR_FORMAT_TORCH, NULL), TSTOR_EINVAL);
  ck_tstor_err(tstor_checkpoint_save_buffer(ck, TSTOR_FORMAT_TORCH, NULL, NULL, &len), TSTOR_EINVAL);
  tstor_checkpoint_free(ck);
}
END_TEST

/* PyTorch 1.13 writes no byteorder record: its files read little-endian by
 * default, and byteswapped when the caller says they came from a
 * big-endian machine. */
START_TEST(byte_order_of_files_without_the_record) {
  const char *file = CKDIR "/golden/dtype_int32_7.pt";
  tstor_checkpoint *le, *be;
  ck_tstor_ok(tstor_torch_load(ctx, file, NULL, &le));
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  o.flags = TSTOR_LOAD_ASSUME_BIG_ENDIAN;
  ck_tstor_ok(tstor_torch_load(ctx, file, &o, &be));
  tstor_tensor *a = tstor_value_tensor(tstor_value_dict_get(tstor_checkpoint_root(le), "t"));
  tstor_tensor *b = tstor_value_tensor(tstor_value_dict_get(tstor_checkpoint_root(be), "t"));
  const uint32_t *x = tstor_tensor_data(a), *y = tstor_tensor_data(b);
  for (int i = 0; i < 7; i++) ck_assert_uint_eq(__builtin_bswap32(x[i]), y[i]);
  tstor_checkpoint_free(be);
  /* a file with the record is read as it says, whatever was assumed */
  char path[128];
  snprintf(path, sizeof path, "%s/with_record.pt", dir);
  ck_tstor_ok(tstor_torch_save(le, path, NULL));
  ck_tstor_ok(tstor_torch_load(ctx, path, &o, &be));
  b = tstor_value_tensor(tstor_value_dict_get(tstor_checkpoint_root(be), "t"));
  ck_assert_mem_eq(tstor_tensor_data(a), tstor_tensor_data(b), 28);
  tstor_checkpoint_free(be);
  tstor_checkpoint_free(le);
}
END_TEST

/* A shared mapping: a write to a loaded storage reaches the file; a private
 * one stays in the process. */
START_TEST(mapped_shared_reaches_the_file) {
  tstor_checkpoint *ck;
  ck_tstor_ok(tstor_torch_load(ctx, CKDIR "/golden/dtype_float32_7.pt", NULL, &ck));
  char path[128];
  snprintf(path, sizeof path, "%s/shared.pt", dir);
  ck_tstor_ok(tstor_torch_save(ck, path, NULL));
  tstor_checkpoint_free(ck);
  for (int shared = 0; shared < 2; shared++) {
    tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
    o.flags = shared ? TSTOR_LOAD_MMAP_SHARED : TSTOR_LOAD_MMAP;
    ck_tstor_ok(tstor_torch_load(ctx, path, &o, &ck));
    tstor_tensor *t = tstor_value_tensor(tstor_value_dict_get(tstor_checkpoint_root(ck), "t"));
    tstor_storage *base = tstor_storage_base(tstor_tensor_storage(t));
    ck_assert(base && (tstor_storage_flags(base) & TSTOR_FLAG_MAPPED));
    ck_assert_int_eq((tstor_storage_flags(base) & TSTOR_FLAG_SHARED) != 0, shared);
    float *p = tstor_tensor_data(t);
    p[0] = shared ? 1234.5f : -99.0f;
    tstor_checkpoint_free(ck);
    ck_tstor_ok(tstor_torch_load(ctx, path, NULL, &ck));
    t = tstor_value_tensor(tstor_value_dict_get(tstor_checkpoint_root(ck), "t"));
    float first = ((float *)tstor_tensor_data(t))[0];
    if (shared) ck_assert(first == 1234.5f);
    else ck_assert(first != -99.0f);
    tstor_checkpoint_free(ck);
  }
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  o.flags = TSTOR_LOAD_MMAP_SHARED | TSTOR_LOAD_READ;
  ck_tstor_err(tstor_torch_load(ctx, path, &o, &ck), TSTOR_EINVAL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("save_targets");
  TCase *tc = tcase_create("targets");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, saves_to_a_stream_and_to_memory_are_the_path_bytes);
  tcase_add_test(tc, loads_from_an_fd);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, byte_order_of_files_without_the_record);
  tcase_add_test(tc, mapped_shared_reaches_the_file);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
