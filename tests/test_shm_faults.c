/* The system's refusals that a test cannot bring about for real without
 * harm: somebody creating our next shared-memory name before we do (a
 * squatter), and a /dev/shm too full to reserve a storage that fits in
 * memory. This program stands in for shm_open and posix_fallocate (it is
 * linked with -export-dynamic, so the cpu module's calls reach the versions
 * below, which call the real ones unless told otherwise). Each refusal must
 * be reported, leave the storage as it was, hold nothing, and never touch an
 * object that is not ours. */
#include "maptest.h"

#include <dlfcn.h>

static int squat_next; /* how many coming O_EXCL creations find their name taken */
static char squatted[32][64];
static int nsquatted;
static int fallocate_error; /* what posix_fallocate returns; 0: the real call */

int shm_open(const char *name, int oflag, mode_t mode) {
  int (*real)(const char *, int, mode_t) =
      (int (*)(const char *, int, mode_t))dlsym(RTLD_NEXT, "shm_open");
  if ((oflag & O_CREAT) && (oflag & O_EXCL) && squat_next > 0 && nsquatted < 32) {
    squat_next--;
    /* The squatter wins the race for the name, and opens it to everyone. */
    int fd = real(name, O_RDWR | O_CREAT | O_EXCL, 0666);
    if (fd >= 0) {
      fchmod(fd, 0666);
      close(fd);
      snprintf(squatted[nsquatted++], sizeof squatted[0], "%s", name);
    }
  }
  return real(name, oflag, mode);
}

static int fallocate_stand_in(const char *symbol, int fd, off_t offset, off_t len) {
  if (fallocate_error) return fallocate_error;
  int (*real)(int, off_t, off_t) = (int (*)(int, off_t, off_t))dlsym(RTLD_NEXT, symbol);
  return real(fd, offset, len);
}

int posix_fallocate(int fd, off_t offset, off_t len) {
  return fallocate_stand_in("posix_fallocate", fd, offset, len);
}
int posix_fallocate64(int fd, off64_t offset, off64_t len) {
  return fallocate_stand_in("posix_fallocate64", fd, (off_t)offset, (off_t)len);
}

static void clear_squatters(void) {
  for (int i = 0; i < nsquatted; i++) shm_unlink(squatted[i]);
  nsquatted = 0;
  squat_next = 0;
  fallocate_error = 0;
}

/* A squatter's object is still there, as it made it. */
static void ck_squatter_untouched(int i) {
  struct stat st;
  ck_assert_int_eq(stat(coretest_fmt("/dev/shm%s", squatted[i]), &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0666);
  ck_assert_int_eq(st.st_size, 0);
}

static tstor_storage *new_cpu(size_t nbytes) {
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_new(ctx, cpu, nbytes, &s));
  memset(tstor_storage_data(s), 0x6b, nbytes);
  return s;
}

START_TEST(squatted_name_is_skipped) {
  for (int named = 0; named <= 1; named++) {
    held before = holding();
    tstor_storage *s = new_cpu(4096);
    squat_next = 1;
    char name[TSTOR_SHM_NAME_MAX];
    if (named)
      ck_tstor_ok(tstor_storage_export_name(s, name, sizeof name));
    else
      ck_tstor_ok(tstor_storage_share_memory(s));
    ck_assert_int_eq(nsquatted, 1);
    ck_squatter_untouched(0);
    if (named) ck_assert_str_ne(name, squatted[0]);
    ck_assert_int_eq(tstor_storage_is_shared(s), 1);
    ck_assert_uint_eq(((unsigned char *)tstor_storage_data(s))[4095], 0x6b);
    tstor_storage_release(s);
    /* Our release never removes the squatter's object either. */
    ck_squatter_untouched(0);
    clear_squatters();
    ck_holds(before);
  }
}
END_TEST

START_TEST(every_name_squatted) {
  for (int named = 0; named <= 1; named++) {
    tstor_storage *s = new_cpu(4096);
    void *data = tstor_storage_data(s);
    held before = holding();
    squat_next = 1000;
    char name[TSTOR_SHM_NAME_MAX];
    int rc =
        named ? tstor_storage_export_name(s, name, sizeof name) : tstor_storage_share_memory(s);
    ck_tstor_err(rc, TSTOR_EEXIST);
    ck_last_error_has("squatting");
    ck_assert_int_ge(nsquatted, 2);
    for (int i = 0; i < nsquatted; i++) ck_squatter_untouched(i);
    ck_assert_ptr_eq(tstor_storage_data(s), data);
    ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_RESIZABLE);
    held now = holding();
    ck_assert_int_eq(now.fds, before.fds);
    ck_assert_int_eq(now.maps, before.maps);
    ck_assert_int_eq(now.shm, before.shm + nsquatted); /* theirs, not ours */
    clear_squatters();
    ck_holds(before);
    tstor_storage_release(s);
  }
}
END_TEST

START_TEST(shared_memory_full) {
  fallocate_error = ENOSPC;
  for (int named = 0; named <= 1; named++) {
    tstor_storage *s = new_cpu(1 << 20);
    void *data = tstor_storage_data(s);
    char name[TSTOR_SHM_NAME_MAX];
    ck_fails_clean(
        named ? tstor_storage_export_name(s, name, sizeof name) : tstor_storage_share_memory(s),
        TSTOR_ENOSPC);
    ck_last_error_has("cannot reserve");
    ck_assert_ptr_eq(tstor_storage_data(s), data);
    ck_assert_int_eq(tstor_storage_is_shared(s), 0);
    ck_assert_uint_eq(((unsigned char *)data)[12345], 0x6b);
    tstor_storage_release(s);
  }

  /* from_file: a name or file it created is removed again, one that was
   * there keeps its size. */
  tstor_storage *s = NULL;
  const char *name = shm_name("full");
  ck_fails_clean(
      tstor_storage_from_file(ctx, name, TSTOR_FILE_SHM | TSTOR_FILE_SHARED, 4096, 1, &s),
      TSTOR_ENOSPC);
  ck_assert_int_eq(shm_unlink(name), -1);
  const char *fresh = scratch("full.bin");
  ck_fails_clean(tstor_storage_from_file(ctx, fresh, TSTOR_FILE_SHARED, 4096, 1, &s), TSTOR_ENOSPC);
  ck_assert_int_eq(file_size(fresh), -1);
  const char *small = scratch("small.bin");
  write_file(small, "abc", 3);
  ck_fails_clean(tstor_storage_from_file(ctx, small, TSTOR_FILE_SHARED, 4096, 1, &s), TSTOR_ENOSPC);
  ck_assert_int_eq(file_size(small), 3);
  ck_assert_ptr_null(s);
  clear_squatters();
}
END_TEST

static Suite *suite(void) {
  Suite *su = suite_create("shm faults");
  TCase *tc = tcase_create("stand-ins");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, squatted_name_is_skipped);
  tcase_add_test(tc, every_name_squatted);
  tcase_add_test(tc, shared_memory_full);
  suite_add_tcase(su, tc);
  return su;
}

int main(void) { return tstor_test_run(suite()); }
