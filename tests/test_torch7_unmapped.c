/* A Torch7 file loaded the default way is read, never mapped: a mapping of a
 * file that shrank under the load killed the process with SIGBUS. This
 * program stands between the library and mmap (its own definition, which the
 * dynamic linker gives every caller in the process) and counts the mappings
 * of files made while a load runs: none for a read load; some for a load with
 * TSTOR_LOAD_MMAP, which shows that the count sees them. */
#define _GNU_SOURCE
#include "testutil.h"

#include <dlfcn.h>
#include <sys/mman.h>

#include <tstor/serialize.h>
#include <tstor/tensor.h>

#define WRITTEN TSTOR_TEST_SRCDIR "/t7/torch7-written"

static int counting, file_maps;

static void *forward(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  static void *(*real)(void *, size_t, int, int, int, off_t);
  if (!real) *(void **)&real = dlsym(RTLD_NEXT, "mmap");
  if (counting && fd >= 0 && !(flags & MAP_ANONYMOUS)) file_maps++;
  return real(addr, len, prot, flags, fd, off);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return forward(addr, len, prot, flags, fd, off);
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return forward(addr, len, prot, flags, fd, off);
}

static int maps_of_load(tstor_context *ctx, const char *path, unsigned flags) {
  tstor_load_options o = TSTOR_LOAD_OPTIONS_INIT;
  o.flags = flags;
  tstor_checkpoint *ck;
  file_maps = 0;
  counting = 1;
  ck_tstor_ok(tstor_torch7_load(ctx, path, &o, &ck));
  counting = 0;
  tstor_tensor *t = tstor_value_tensor(tstor_checkpoint_root(ck));
  ck_assert(((double *)tstor_tensor_data(t))[5] == 6.9);
  tstor_checkpoint_free(ck);
  return file_maps;
}

START_TEST(read_loads_map_nothing) {
  tstor_context *ctx;
  ck_tstor_ok(tstor_context_open(NULL, &ctx));
  ck_assert_int_eq(maps_of_load(ctx, WRITTEN "/doubletensor.t7", 0), 0);
  ck_assert_int_gt(maps_of_load(ctx, WRITTEN "/doubletensor.t7", TSTOR_LOAD_MMAP), 0);
  tstor_context_close(ctx);
}
END_TEST

int main(void) {
  Suite *s = suite_create("torch7_unmapped");
  TCase *tc = tcase_create("read");
  tcase_add_test(tc, read_loads_map_nothing);
  suite_add_tcase(s, tc);
  return tstor_test_run(s);
}
