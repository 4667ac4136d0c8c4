/* Files written whole or not at all: into a temporary file beside the
 * target, synced, and renamed over it only when everything was written, so
 * that a failed save or a crash leaves no partial file and a save never
 * truncates one another process may have mapped (mapped.h explains the SIGBUS
 * that would bring). The target is the path, or the file a symbolic link
 * there names; it keeps its permissions and owner; anything but a regular
 * file is refused, so that no save replaces a FIFO or a device node. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The process's umask, read without changing it (umask() would, for a
 * moment, under other threads' feet): Linux shows it in /proc/self/status. */
static mode_t current_umask(void) {
  FILE *f = fopen("/proc/self/status", "r");
  unsigned mask = 022;
  char line[128];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Umask: %o", &mask) == 1) break;
  if (f) fclose(f);
  return (mode_t)mask;
}

/* The suffix mkstemp fills in; the target is the temporary name without it. */
#define TEMP_SUFFIX ".tmp.XXXXXX"

/* The file a save to `path` replaces: path itself, or the file a symbolic
 * link there names (written through, as cp and editors do). Anything else
 * that is not a regular file (a FIFO, a device, a directory) is refused, and
 * so is a link to nowhere. *target is malloc'd; *old gets the replaced file's
 * status, or st_mode 0 where there is none yet. */
static int save_target(const char *path, char **target, struct stat *old) {
  struct stat st;
  memset(old, 0, sizeof *old);
  *target = NULL;
  if (lstat(path, &st) != 0) {
    if (errno != ENOENT)
      return TSTOR__ERR(tstor_errno_code(errno), "%s: %s", path, strerror(errno));
    *target = strdup(path);
    return *target ? 0 : TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  }
  if (S_ISLNK(st.st_mode)) {
    *target = realpath(path, NULL);
    if (!*target)
      return TSTOR__ERR(TSTOR_EINVAL, "%s: a symbolic link whose target cannot be resolved (%s)", path,
                        strerror(errno));
    if (stat(*target, &st) != 0) {
      int e = errno;
      free(*target);
      *target = NULL;
      return TSTOR__ERR(tstor_errno_code(e), "%s: %s", path, strerror(e));
    }
  }
  if (!S_ISREG(st.st_mode)) {
    free(*target);
    *target = NULL;
    return TSTOR__ERR(TSTOR_EINVAL, "%s: not a regular file (a FIFO, device, directory or socket); "
                                    "a save only replaces regular files", path);
  }
  if (!*target && !(*target = strdup(path))) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  *old = st;
  return 0;
}

int tstor__io_create_temp(const char *path, char **tmp, FILE **f) {
  *f = NULL;
  *tmp = NULL;
  char *target;
  struct stat old;
  int rc = save_target(path, &target, &old);
  if (rc) return rc;
  size_t n = strlen(target) + sizeof TEMP_SUFFIX;
  *tmp = malloc(n);
  if (!*tmp) {
    free(target);
    return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  }
  snprintf(*tmp, n, "%s" TEMP_SUFFIX, target);
  free(target);
  int fd = mkstemp(*tmp);
  if (fd < 0) {
    int e = errno;
    free(*tmp);
    *tmp = NULL;
    return TSTOR__ERR(tstor_errno_code(e), "%s: cannot create a file beside it: %s", path,
                      strerror(e));
  }
  if (old.st_mode) {
    /* the replaced file's permissions and, where this process may give it,
     * its owner (set-id bits are not carried over to new contents) */
    (void)fchmod(fd, old.st_mode & 0777);
    if (old.st_uid != geteuid() || old.st_gid != getegid()) (void)fchown(fd, old.st_uid, old.st_gid);
  } else {
    /* mkstemp makes it 0600; a new file gets the mode open() would give */
    (void)fchmod(fd, 0666 & ~current_umask());
  }
  *f = fdopen(fd, "wb");
  if (!*f) {
    close(fd);
    unlink(*tmp);
    free(*tmp);
    *tmp = NULL;
    return TSTOR__ERR(TSTOR_ENOMEM, "%s: fdopen failed", path);
  }
  setvbuf(*f, NULL, _IOFBF, 1 << 20);
  return 0;
}

/* fsync of the folder holding `file`, so that the rename itself is on disk.
 * File systems that cannot sync a folder (EINVAL) are taken at their word. */
static int sync_folder(const char *file) {
  char *dir = strdup(file);
  if (!dir) return TSTOR_ENOMEM;
  char *slash = strrchr(dir, '/');
  if (slash == dir) slash[1] = '\0';
  else if (slash) *slash = '\0';
  int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc = 0;
  if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL)) rc = errno ? errno : EIO;
  if (fd >= 0) close(fd);
  free(dir);
  return rc;
}

int tstor__io_commit_file(FILE *f, char *tmp, const char *path, int ok) {
  int rc = 0;
  /* the bytes on disk before the name: a crash after the rename must not
   * leave an empty or partial file under the final name */
  int failed = ok && (fflush(f) != 0 || fsync(fileno(f)) != 0), e = errno;
  if (fclose(f) != 0 && ok && !failed) {
    failed = 1;
    e = errno;
  }
  if (failed) {
    rc = TSTOR__ERR(tstor_errno_code(e), "%s: %s", path, strerror(e));
    ok = 0;
  }
  size_t n = strlen(tmp) - (sizeof TEMP_SUFFIX - 1);
  char *target = strndup(tmp, n);
  if (ok && !target) {
    rc = TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
    ok = 0;
  }
  if (ok && rename(tmp, target) != 0) {
    rc = TSTOR__ERR(TSTOR_EIO, "%s: cannot rename the written file into place: %s", path,
                    strerror(errno));
    ok = 0;
  }
  if (ok && (e = sync_folder(target)) != 0)
    rc = TSTOR__ERR(TSTOR_EIO, "%s: written, but its folder could not be synced: %s", path, strerror(e));
  if (!ok) unlink(tmp);
  free(target);
  free(tmp);
  return rc;
}

int tstor__io_save_atomically(const char *path, tstor__io_stream_writer write, const void *arg) {
  char *tmp = NULL;
  FILE *f = NULL;
  int rc = tstor__io_create_temp(path, &tmp, &f);
  if (rc) return rc;
  rc = write(arg, f);
  if (!rc && fflush(f) != 0)
    rc = TSTOR__ERR(tstor_errno_code(errno), "%s: %s", path, strerror(errno));
  int crc = tstor__io_commit_file(f, tmp, path, rc == 0);
  return rc ? rc : crc;
}
