/* Helpers for the file-mapping and shared-memory suites: a context, scratch
 * files, what the process holds (descriptors, mappings, /dev/shm names) so
 * that a failed call can be shown to have left nothing behind, and running a
 * piece of a test as another user or in a child process. */
#ifndef TSTOR_MAPTEST_H
#define TSTOR_MAPTEST_H

#include "config.h" /* _GNU_SOURCE, before any system header */

#include "coretest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <tstor/mapped.h>
#include <unistd.h>

static tstor_context *ctx;
static tstor_device cpu, meta;
static char tmpdir[256];

/* A path in this test's scratch folder. */
static inline const char *scratch(const char *name) { return coretest_fmt("%s/%s", tmpdir, name); }

static inline void open_ctx(void) {
  ctx = coretest_open(NULL);
  cpu = coretest_dev(ctx, "cpu");
  meta = coretest_dev(ctx, "meta");
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/tstor-maptest-XXXXXX", base ? base : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  /* Reachable by the unprivileged user of as_nobody(). */
  ck_assert_int_eq(chmod(tmpdir, 0755), 0);
}

static inline int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static inline void close_ctx(void) {
  tstor_context_close(ctx);
  ctx = NULL;
  nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void write_file(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
  ck_assert_int_eq(close(fd), 0);
}

/* The first `cap` bytes of a file into buf; returns how many there were. */
static inline size_t read_file(const char *path, void *buf, size_t cap) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, cap);
  close(fd);
  return n < 0 ? 0 : (size_t)n;
}

static inline off_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_size : -1;
}

/* ------------------------------------------------------ what we hold */

static inline int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  ck_assert_ptr_nonnull(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own descriptor */
}

/* Mappings of /dev/shm objects or of files in the scratch folder. */
static inline int count_maps(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  ck_assert_ptr_nonnull(f);
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, "/dev/shm/") || strstr(line, tmpdir)) n++;
  fclose(f);
  return n;
}

/* /dev/shm names that process `pid` made: tstor's own (tstor-PID-...) and the
 * ones the tests choose (see shm_name). */
static inline int count_shm(pid_t pid) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  char a[64], b[64];
  snprintf(a, sizeof a, "tstor-%ld-", (long)pid);
  snprintf(b, sizeof b, "tstortest-%ld-", (long)pid);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, a, strlen(a)) == 0 || strncmp(e->d_name, b, strlen(b)) == 0) n++;
  closedir(d);
  return n;
}

/* A shared-memory name of this process for the tests' own objects. */
static inline const char *shm_name(const char *tag) {
  return coretest_fmt("/tstortest-%ld-%s", (long)getpid(), tag);
}

typedef struct held {
  int fds, maps, shm;
} held;

static inline held holding(void) {
  held h = {count_fds(), count_maps(), count_shm(getpid())};
  return h;
}

/* Asserts that the process holds what it held at `before`. */
#define ck_holds(before)                                                                       \
  do {                                                                                         \
    held now_ = holding();                                                                     \
    ck_assert_msg(now_.fds == (before).fds, "descriptors: %d before, %d now", (before).fds,    \
                  now_.fds);                                                                   \
    ck_assert_msg(now_.maps == (before).maps, "mappings: %d before, %d now", (before).maps,    \
                  now_.maps);                                                                  \
    ck_assert_msg(now_.shm == (before).shm, "/dev/shm names: %d before, %d now", (before).shm, \
                  now_.shm);                                                                   \
  } while (0)

/* Asserts that `expr` fails with `code`, leaves *out untouched and leaks
 * nothing. */
#define ck_fails_clean(expr, code)    \
  do {                                \
    held before_ = holding();         \
    ck_tstor_err((expr), (code));     \
    ck_assert(tstor_last_error()[0]); \
    ck_holds(before_);                \
  } while (0)

/* ------------------------------------------------------ other processes */

/* Runs fn(arg) in a child process, as the unprivileged user "nobody" when we
 * are root (root ignores file permissions); returns fn's exit status. */
static inline int as_nobody(int (*fn)(void *), void *arg) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (geteuid() == 0) {
      if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
          setresuid(65534, 65534, 65534) != 0)
        _exit(99);
    }
    _exit(fn(arg));
  }
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert_msg(WIFEXITED(status), "child died of signal %d",
                WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return WEXITSTATUS(status);
}

/* Sets the soft RLIMIT_NOFILE so that the next descriptor cannot be opened;
 * returns the old limit for restore_nofile. */
static inline struct rlimit exhaust_nofile(void) {
  struct rlimit old;
  ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
  int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ck_assert_int_ge(probe, 0);
  close(probe);
  struct rlimit low = old;
  low.rlim_cur = (rlim_t)probe; /* the lowest free descriptor is now out of range */
  ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
  return old;
}

static inline void restore_nofile(struct rlimit old) {
  ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
}

static inline unsigned char *bytes(tstor_storage *s) { return tstor_storage_data(s); }

/* Valgrind emulates RLIMIT_NOFILE after the system call: an open(O_CREAT)
 * past the limit creates the file, then valgrind closes it and reports
 * EMFILE, which the kernel never does (it checks the limit first). */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define MAPTEST_UNDER_VALGRIND() (RUNNING_ON_VALGRIND != 0)
#endif
#endif
#ifndef MAPTEST_UNDER_VALGRIND
#define MAPTEST_UNDER_VALGRIND() 0
#endif

#endif
