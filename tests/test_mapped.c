/* Storages mapped from files and shared-memory names (tstor_storage_from_file):
 * Torch7's example, private and shared mappings, sizes, and every bad input
 * and system refusal, each of which must return its code, say why, and leave
 * no descriptor, mapping, /dev/shm name or file change behind. */
#include "maptest.h"

#include "runtime/fault.h"

#include <stdint.h>
#include <sys/statvfs.h>

/* ------------------------------------------------------------- mapping */

/* Torch7's documentation, as a test: a private mapping leaves the file alone,
 * a shared one writes through. */
START_TEST(torch7_hello) {
  const char *path = scratch("hello.txt");
  write_file(path, "Hello World\n", 12);
  char buf[64];

  tstor_storage *x = NULL;
  ck_tstor_ok(tstor_storage_from_file(ctx, path, 0, 0, 1, &x));
  ck_assert_uint_eq(tstor_storage_nbytes(x), 12);
  ck_assert_mem_eq(bytes(x), "Hello World\n", 12);
  ck_tstor_ok(tstor_storage_fill(x, 42));
  ck_assert_mem_eq(bytes(x), "************", 12);
  tstor_storage_release(x);
  ck_assert_uint_eq(read_file(path, buf, sizeof buf), 12);
  ck_assert_mem_eq(buf, "Hello World\n", 12);

  ck_tstor_ok(tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, 0, 1, &x));
  ck_tstor_ok(tstor_storage_fill(x, 42));
  ck_assert_uint_eq(read_file(path, buf, sizeof buf), 12); /* at once: same pages */
  ck_assert_mem_eq(buf, "************", 12);
  tstor_storage_release(x);
  ck_assert_uint_eq(read_file(path, buf, sizeof buf), 12);
  ck_assert_mem_eq(buf, "************", 12);
}
END_TEST

START_TEST(whole_file_private) {
  const char *path = scratch("data.bin");
  unsigned char data[5000];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7);
  write_file(path, data, sizeof data);
  held before = holding();

  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_from_file(ctx, path, 0, 0, 1, &s));
  ck_assert_uint_eq(tstor_storage_nbytes(s), sizeof data);
  ck_assert_mem_eq(bytes(s), data, sizeof data);
  ck_assert_uint_eq(tstor_storage_flags(s), TSTOR_FLAG_MAPPED);
  ck_assert_int_eq(tstor_storage_is_shared(s), 0);
  ck_assert_str_eq(tstor_storage_filename(s), path);
  ck_assert_int_eq(tstor_storage_device(s).type, cpu.type);
  /* A private mapping keeps no descriptor, only the mapping. */
  ck_assert_int_eq(count_fds(), before.fds);
  ck_assert_int_gt(count_maps(), before.maps);

  ck_tstor_err(tstor_storage_resize(s, 10), TSTOR_ENOTSUP);
  ck_last_error_has("file-mapped");
  ck_assert_uint_eq(tstor_storage_nbytes(s), sizeof data);

  /* Views answer for their base. */
  tstor_storage *v = NULL;
  ck_tstor_ok(tstor_storage_view(s, 100, 50, &v));
  ck_assert_str_eq(tstor_storage_filename(v), path);
  ck_assert_uint_eq(tstor_storage_flags(v), TSTOR_FLAG_MAPPED | TSTOR_FLAG_VIEW);
  ck_assert_mem_eq(bytes(v), data + 100, 50);
  /* A clone is plain memory again. */
  tstor_storage *c = NULL;
  ck_tstor_ok(tstor_storage_clone(s, &c));
  ck_assert_ptr_null(tstor_storage_filename(c));
  ck_assert_uint_eq(tstor_storage_flags(c), TSTOR_FLAG_RESIZABLE);
  ck_assert_mem_eq(bytes(c), data, sizeof data);

  memset(bytes(s), 0, sizeof data);
  tstor_storage_release(v);
  tstor_storage_release(c);
  tstor_storage_release(s);
  ck_holds(before);
  unsigned char back[sizeof data];
  ck_assert_uint_eq(read_file(path, back, sizeof back), sizeof data);
  ck_assert_mem_eq(back, data, sizeof data);

  /* A size maps the file's first bytes only. */
  ck_tstor_ok(tstor_storage_from_file(ctx, path, 0, 10, 4, &s));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 40);
  ck_assert_mem_eq(bytes(s), data, 40);
  tstor_storage_release(s);
}
END_TEST

START_TEST(shared_creates_and_grows) {
  const char *path = scratch("new.bin");
  held before = holding();
  tstor_storage *a = NULL, *b = NULL;
  /* Missing: created with mode 0600 and the size asked, zero-filled. */
  ck_tstor_ok(tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, 100, 4, &a));
  ck_assert_uint_eq(tstor_storage_nbytes(a), 400);
  ck_assert_uint_eq(tstor_storage_flags(a), TSTOR_FLAG_MAPPED | TSTOR_FLAG_SHARED);
  ck_assert_int_eq(tstor_storage_is_shared(a), 1);
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_size, 400);
  ck_assert_uint_eq(st.st_mode & 0777, 0600);
  for (size_t i = 0; i < 400; i++) ck_assert_uint_eq(bytes(a)[i], 0);
  ck_tstor_err(tstor_storage_resize(a, 10), TSTOR_ENOTSUP);

  /* A second shared mapping (size omitted) sees the first one's writes. */
  ck_tstor_ok(tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, 0, 1, &b));
  ck_assert_uint_eq(tstor_storage_nbytes(b), 400);
  for (size_t i = 0; i < 400; i++) bytes(a)[i] = (unsigned char)(i ^ 0x5a);
  ck_assert_mem_eq(bytes(b), bytes(a), 400);
  tstor_storage_release(a);
  tstor_storage_release(b);
  ck_holds(before);
  unsigned char back[400];
  ck_assert_uint_eq(read_file(path, back, sizeof back), 400);
  for (size_t i = 0; i < 400; i++) ck_assert_uint_eq(back[i], (unsigned char)(i ^ 0x5a));

  /* Smaller: grown, its bytes kept. Larger: left as it is. */
  const char *small = scratch("small.bin");
  write_file(small, "0123456789", 10);
  ck_tstor_ok(tstor_storage_from_file(ctx, small, TSTOR_FILE_SHARED, 20, 1, &a));
  ck_assert_int_eq(file_size(small), 20);
  ck_assert_mem_eq(bytes(a), "0123456789\0\0\0\0\0\0\0\0\0\0", 20);
  tstor_storage_release(a);
  ck_tstor_ok(tstor_storage_from_file(ctx, small, TSTOR_FILE_SHARED, 5, 1, &a));
  ck_assert_uint_eq(tstor_storage_nbytes(a), 5);
  ck_assert_int_eq(file_size(small), 20);
  tstor_storage_release(a);
  ck_holds(before);
}
END_TEST

START_TEST(element_sizes) {
  const char *path = scratch("twelve.bin");
  write_file(path, "abcdefghijkl", 12);
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_from_file(ctx, path, 0, 0, 4, &s));
  ck_assert_uint_eq(tstor_storage_nbytes(s), 12);
  tstor_storage_release(s);
  ck_tstor_err(tstor_storage_from_file(ctx, path, 0, 0, 8, &s), TSTOR_ESIZE);
  ck_last_error_has("whole number of 8-byte elements");
  ck_fails_clean(tstor_storage_from_file(ctx, path, 0, 0, 5, &s), TSTOR_ESIZE);
  ck_fails_clean(tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, 0, 5, &s), TSTOR_ESIZE);
  ck_assert_int_eq(file_size(path), 12);
}
END_TEST

START_TEST(shm_names) {
  const char *name = shm_name("sharedmem");
  shm_unlink(name);
  held before = holding();
  tstor_storage *a = NULL, *b = NULL, *p = NULL;
  ck_tstor_ok(tstor_storage_from_file(ctx, name, TSTOR_FILE_SHARED | TSTOR_FILE_SHM, 64, 1, &a));
  ck_assert_int_eq(count_shm(getpid()), before.shm + 1);
  struct stat st;
  ck_assert_int_eq(stat(coretest_fmt("/dev/shm%s", name), &st), 0);
  ck_assert_uint_eq(st.st_mode & 0777, 0600);
  ck_assert_int_eq(st.st_size, 64);
  ck_assert_str_eq(tstor_storage_filename(a), name);
  ck_assert_uint_eq(tstor_storage_flags(a), TSTOR_FLAG_MAPPED | TSTOR_FLAG_SHARED);

  ck_tstor_ok(tstor_storage_from_file(ctx, name, TSTOR_FILE_SHARED | TSTOR_FILE_SHM, 0, 1, &b));
  ck_assert_uint_eq(tstor_storage_nbytes(b), 64);
  memset(bytes(a), 7, 64);
  ck_assert_uint_eq(bytes(b)[63], 7);
  /* Private: a copy-on-write view of the object. */
  ck_tstor_ok(tstor_storage_from_file(ctx, name, TSTOR_FILE_SHM, 0, 1, &p));
  ck_assert_uint_eq(bytes(p)[0], 7);
  memset(bytes(p), 9, 64);
  ck_assert_uint_eq(bytes(a)[0], 7);
  ck_assert_uint_eq(tstor_storage_flags(p), TSTOR_FLAG_MAPPED);

  /* The object outlives its storages, until unlinked; storages outlive the name. */
  tstor_storage_release(p);
  tstor_storage_release(b);
  ck_assert_int_eq(count_shm(getpid()), before.shm + 1);
  ck_assert_int_eq(shm_unlink(name), 0);
  bytes(a)[0] = 1;
  tstor_storage_release(a);
  ck_holds(before);
}
END_TEST

/* ---------------------------------------------------------- bad inputs */

START_TEST(missing_file) {
  tstor_storage *s = NULL;
  const char *path = scratch("nope.bin");
  ck_fails_clean(tstor_storage_from_file(ctx, path, 0, 0, 1, &s), TSTOR_ENOENT);
  ck_last_error_has("nope.bin");
  ck_fails_clean(tstor_storage_from_file(ctx, path, 0, 10, 1, &s), TSTOR_ENOENT);
  /* Shared without a size: nothing to create it with, so nothing is created. */
  ck_fails_clean(tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, 0, 1, &s), TSTOR_ENOENT);
  ck_last_error_has("no size");
  ck_assert_int_eq(file_size(path), -1);
  ck_fails_clean(
      tstor_storage_from_file(ctx, scratch("no/such/dir.bin"), TSTOR_FILE_SHARED, 10, 1, &s),
      TSTOR_ENOENT);
  const char *name = shm_name("missing");
  ck_fails_clean(tstor_storage_from_file(ctx, name, TSTOR_FILE_SHM, 0, 1, &s), TSTOR_ENOENT);
  ck_fails_clean(tstor_storage_from_file(ctx, name, TSTOR_FILE_SHM | TSTOR_FILE_SHARED, 0, 1, &s),
                 TSTOR_ENOENT);
  ck_assert_ptr_null(s);
}
END_TEST

START_TEST(not_a_file) {
  tstor_storage *s = NULL;
  const char *dir = scratch("adir");
  ck_assert_int_eq(mkdir(dir, 0755), 0);
  ck_fails_clean(tstor_storage_from_file(ctx, dir, 0, 0, 1, &s), TSTOR_EINVAL);
  ck_last_error_has("directory");
  ck_fails_clean(tstor_storage_from_file(ctx, dir, TSTOR_FILE_SHARED, 10, 1, &s), TSTOR_EINVAL);
  ck_last_error_has("directory");

  /* A FIFO must be refused at once, not wait for a writer. */
  const char *fifo = scratch("afifo");
  ck_assert_int_eq(mkfifo(fifo, 0644), 0);
  ck_fails_clean(tstor_storage_from_file(ctx, fifo, 0, 0, 1, &s), TSTOR_EINVAL);
  ck_last_error_has("FIFO");
  ck_fails_clean(tstor_storage_from_file(ctx, fifo, TSTOR_FILE_SHARED, 10, 1, &s), TSTOR_EINVAL);
  ck_last_error_has("FIFO");

  ck_fails_clean(tstor_storage_from_file(ctx, "/dev/null", 0, 10, 1, &s), TSTOR_EINVAL);
  ck_last_error_has("character device");
  ck_assert_ptr_null(s);
}
END_TEST

static const char *unreadable_path;

static int try_unreadable(void *arg) {
  (void)arg;
  tstor_storage *s = NULL;
  int fds = count_fds();
  if (tstor_storage_from_file(ctx, unreadable_path, 0, 0, 1, &s) != TSTOR_EACCES) return 1;
  if (!strstr(tstor_last_error(), "Permission denied")) return 2;
  if (tstor_storage_from_file(ctx, unreadable_path, TSTOR_FILE_SHARED, 4, 1, &s) != TSTOR_EACCES)
    return 3;
  return s == NULL && count_fds() == fds ? 0 : 4;
}

START_TEST(no_read_permission) {
  const char *path = scratch("secret.bin");
  write_file(path, "secret", 6);
  ck_assert_int_eq(chmod(path, 0000), 0);
  unreadable_path = path;
  ck_assert_int_eq(as_nobody(try_unreadable, NULL), 0);
  ck_assert_int_eq(file_size(path), 6);
}
END_TEST

START_TEST(empty_without_size) {
  const char *path = scratch("empty.bin");
  write_file(path, "", 0);
  tstor_storage *s = NULL;
  ck_fails_clean(tstor_storage_from_file(ctx, path, 0, 0, 1, &s), TSTOR_ESIZE);
  ck_last_error_has("empty");
  ck_fails_clean(tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, 0, 1, &s), TSTOR_ESIZE);
  ck_last_error_has("empty");
  ck_assert_int_eq(file_size(path), 0);
  ck_assert_ptr_null(s);
}
END_TEST

static const char *readonly_path;

static int try_grow_readonly(void *arg) {
  (void)arg;
  tstor_storage *s = NULL;
  int fds = count_fds();
  if (tstor_storage_from_file(ctx, readonly_path, TSTOR_FILE_SHARED, 20, 1, &s) != TSTOR_EACCES)
    return 1;
  /* Reading it privately is fine; it is the growing that is refused. */
  if (tstor_storage_from_file(ctx, readonly_path, 0, 10, 1, &s) != 0) return 2;
  tstor_storage_release(s);
  return count_fds() == fds ? 0 : 3;
}

START_TEST(larger_than_readonly_file) {
  const char *path = scratch("ro.bin");
  write_file(path, "0123456789", 10);
  ck_assert_int_eq(chmod(path, 0444), 0);
  tstor_storage *s = NULL;
  /* A private mapping never grows the file, whoever we are. */
  ck_fails_clean(tstor_storage_from_file(ctx, path, 0, 20, 1, &s), TSTOR_ESIZE);
  ck_last_error_has("holds 10 bytes, 20 asked");
  readonly_path = path;
  ck_assert_int_eq(as_nobody(try_grow_readonly, NULL), 0);
  ck_assert_int_eq(file_size(path), 10);
  ck_assert_ptr_null(s);
}
END_TEST

START_TEST(size_overflows) {
  const char *path = scratch("ovf.bin");
  write_file(path, "x", 1);
  tstor_storage *s = NULL;
  ck_fails_clean(tstor_storage_from_file(ctx, path, 0, SIZE_MAX / 2, 4, &s), TSTOR_EOVERFLOW);
  ck_last_error_has("overflow");
  ck_fails_clean(tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, SIZE_MAX / 3, 3 * 2, &s),
                 TSTOR_EOVERFLOW);
  /* Fits size_t, but no mapping can be that large. */
  ck_fails_clean(
      tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, (size_t)PTRDIFF_MAX + 1, 1, &s),
      TSTOR_EOVERFLOW);
  const char *fresh = scratch("ovf-new.bin");
  ck_fails_clean(tstor_storage_from_file(ctx, fresh, TSTOR_FILE_SHARED, SIZE_MAX, 1, &s),
                 TSTOR_EOVERFLOW);
  ck_assert_int_eq(file_size(fresh), -1);
  ck_assert_int_eq(file_size(path), 1);
  ck_assert_ptr_null(s);
}
END_TEST

START_TEST(bad_arguments) {
  const char *path = scratch("args.bin");
  write_file(path, "abc", 3);
  tstor_storage *s = NULL;
  ck_fails_clean(tstor_storage_from_file(ctx, NULL, 0, 0, 1, &s), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_from_file(ctx, path, 0, 0, 1, NULL), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_from_file(ctx, "", 0, 0, 1, &s), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_from_file(ctx, path, 1u << 7, 0, 1, &s), TSTOR_EINVAL);
  ck_last_error_has("flags");
  ck_fails_clean(tstor_storage_from_file(ctx, path, 0, 0, 0, &s), TSTOR_EINVAL);
  ck_fails_clean(tstor_storage_from_file(ctx, "/a/b", TSTOR_FILE_SHM | TSTOR_FILE_SHARED, 8, 1, &s),
                 TSTOR_EINVAL);
  ck_last_error_has("one component");
  ck_assert_ptr_null(tstor_storage_filename(NULL));
  ck_assert_int_eq(tstor_storage_is_shared(NULL), 0);
  ck_assert_ptr_null(s);
}
END_TEST

static const char *squat_name;

static int squat(void *arg) {
  (void)arg;
  int fd = shm_open(squat_name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return 1;
  int ok = ftruncate(fd, 64) == 0;
  close(fd);
  return ok ? 0 : 2;
}

/* A shared-memory name somebody else made first, or left open to others, is
 * not ours to map: they could read or change every byte. */
START_TEST(squatted_shm_name) {
  tstor_storage *s = NULL;
  const char *name = shm_name("open-to-all");
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, 64), 0);
  ck_assert_int_eq(fchmod(fd, 0666), 0);
  close(fd);
  ck_fails_clean(tstor_storage_from_file(ctx, name, TSTOR_FILE_SHM | TSTOR_FILE_SHARED, 64, 1, &s),
                 TSTOR_EACCES);
  ck_last_error_has("mode 0666");
  ck_fails_clean(tstor_storage_from_file(ctx, name, TSTOR_FILE_SHM, 0, 1, &s), TSTOR_EACCES);
  ck_fails_clean(tstor_storage_import_name(ctx, name, 0, &s), TSTOR_EACCES);
  /* Refusing it does not remove it: it is not ours. */
  ck_assert_int_eq(shm_unlink(name), 0);

  if (geteuid() == 0) {
    squat_name = shm_name("squatted");
    ck_assert_int_eq(as_nobody(squat, NULL), 0);
    ck_fails_clean(
        tstor_storage_from_file(ctx, squat_name, TSTOR_FILE_SHM | TSTOR_FILE_SHARED, 64, 1, &s),
        TSTOR_EACCES);
    ck_last_error_has("belongs to uid 65534");
    ck_fails_clean(tstor_storage_import_name(ctx, squat_name, 0, &s), TSTOR_EACCES);
    ck_assert_int_eq(shm_unlink(squat_name), 0);
  }
  ck_assert_ptr_null(s);
}
END_TEST

START_TEST(too_many_open_files) {
  const char *path = scratch("fd.bin");
  write_file(path, "0123456789", 10);
  const char *fresh = scratch("fd-new.bin");
  tstor_storage *s = NULL;
  /* Counting takes a descriptor too: count with the limit lifted. */
  held before = holding();
  struct rlimit old = exhaust_nofile();
  int rc1 = tstor_storage_from_file(ctx, path, 0, 0, 1, &s);
  char msg1[512];
  snprintf(msg1, sizeof msg1, "%s", tstor_last_error());
  int rc2 = tstor_storage_from_file(ctx, fresh, TSTOR_FILE_SHARED, 10, 1, &s);
  int rc3 =
      tstor_storage_from_file(ctx, shm_name("fd"), TSTOR_FILE_SHARED | TSTOR_FILE_SHM, 10, 1, &s);
  restore_nofile(old);
  ck_assert_int_eq(rc1, TSTOR_EMFILE);
  ck_assert_msg(strstr(msg1, "Too many open files"), "detail: %s", msg1);
  ck_assert_int_eq(rc2, TSTOR_EMFILE);
  ck_assert_int_eq(rc3, TSTOR_EMFILE);
  if (MAPTEST_UNDER_VALGRIND()) { /* its emulation created them (maptest.h) */
    unlink(fresh);
    shm_unlink(shm_name("fd"));
  }
  ck_holds(before);
  ck_assert_int_eq(file_size(fresh), -1);
  ck_assert_ptr_null(s);
}
END_TEST

/* A size beyond the whole of /dev/shm: the reservation fails at once (the
 * kernel checks the size against the filesystem's before allocating), and
 * the object we created for it is gone again. */
START_TEST(shared_memory_full) {
  struct statvfs vfs;
  if (statvfs("/dev/shm", &vfs) != 0 || vfs.f_blocks == 0) return; /* no limit to hit */
  size_t total = (size_t)vfs.f_blocks * vfs.f_frsize;
  tstor_storage *s = NULL;
  const char *name = shm_name("full");
  ck_fails_clean(tstor_storage_from_file(ctx, name, TSTOR_FILE_SHM | TSTOR_FILE_SHARED,
                                         total + ((size_t)1 << 30), 1, &s),
                 TSTOR_ENOSPC);
  ck_last_error_has("cannot reserve");
  ck_assert_int_eq(shm_unlink(name), -1);
  ck_assert_ptr_null(s);
}
END_TEST

/* Every acquisition of from_file failed in turn (core/runtime/fault.h): each failure
 * is reported and cleaned up; the file is created only by a run that works. */
START_TEST(fault_sweep) {
  const char *path = scratch("sweep.bin");
  const unsigned kinds = TSTOR_FAULT_MALLOC | TSTOR_FAULT_MMAP | TSTOR_FAULT_SHM;
  for (int shm = 0; shm <= 1; shm++) {
    const char *name = shm ? shm_name("sweep") : path;
    unsigned flags = TSTOR_FILE_SHARED | (shm ? TSTOR_FILE_SHM : 0u);
    int failures = 0;
    for (unsigned long n = 1; n < 100; n++) {
      held before = holding();
      tstor_storage *s = NULL;
      tstor__fault_arm(kinds, n, 0);
      int rc = tstor_storage_from_file(ctx, name, flags, 64, 1, &s);
      unsigned long failed = tstor__fault_failed();
      tstor__fault_disarm();
      if (rc == 0) {
        ck_assert_uint_eq(failed, 0);
        ck_assert_uint_eq(tstor_storage_nbytes(s), 64);
        tstor_storage_release(s);
        break;
      }
      failures++;
      ck_assert_uint_eq(failed, 1);
      ck_assert_msg(rc == TSTOR_ENOMEM || rc == TSTOR_EMFILE, "run %lu: %s: %s", n,
                    tstor_err_name(rc), tstor_last_error());
      ck_assert(tstor_last_error()[0]);
      ck_assert_ptr_null(s);
      ck_holds(before);
      ck_assert_int_eq(shm ? shm_unlink(name) : file_size(name), -1);
    }
    ck_assert_int_ge(failures, 2);
    if (shm)
      ck_assert_int_eq(shm_unlink(name), 0);
    else
      ck_assert_int_eq(unlink(name), 0);
  }
}
END_TEST

/* What mapped.h documents: truncating a mapped file under a storage makes
 * the next touch of the lost bytes raise SIGBUS. */
START_TEST(truncation_raises_sigbus) {
  const char *path = scratch("truncated.bin");
  long page = sysconf(_SC_PAGESIZE);
  tstor_storage *s = NULL;
  ck_tstor_ok(tstor_storage_from_file(ctx, path, TSTOR_FILE_SHARED, (size_t)page * 2, 1, &s));
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGBUS, &dfl, NULL);
    if (truncate(path, 0) != 0) _exit(2);
    ((volatile unsigned char *)tstor_storage_data(s))[page] = 1;
    _exit(0);
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS, "status 0x%x", status);
  tstor_storage_release(s);
}
END_TEST

static Suite *suite(void) {
  Suite *su = suite_create("mapped");
  TCase *tc = tcase_create("files");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, torch7_hello);
  tcase_add_test(tc, whole_file_private);
  tcase_add_test(tc, shared_creates_and_grows);
  tcase_add_test(tc, element_sizes);
  tcase_add_test(tc, shm_names);
  suite_add_tcase(su, tc);

  tc = tcase_create("bad input");
  tcase_add_checked_fixture(tc, open_ctx, close_ctx);
  tcase_add_test(tc, missing_file);
  tcase_add_test(tc, not_a_file);
  tcase_add_test(tc, no_read_permission);
  tcase_add_test(tc, empty_without_size);
  tcase_add_test(tc, larger_than_readonly_file);
  tcase_add_test(tc, size_overflows);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, squatted_shm_name);
  tcase_add_test(tc, too_many_open_files);
  tcase_add_test(tc, shared_memory_full);
  tcase_add_test(tc, fault_sweep);
  tcase_add_test(tc, truncation_raises_sigbus);
  suite_add_tcase(su, tc);
  return su;
}

int main(void) { return tstor_test_run(suite()); }
