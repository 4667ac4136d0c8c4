/* Files written whole or not at all: into a temporary file beside the
 * target, renamed over it only when everything was written, so that a
 * failed save leaves no partial file and never truncates one another
 * process may have mapped (mapped.h explains the SIGBUS that would bring). */
#include "io_internal.h"

#include <errno.h>
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

int tstor__create_temp(const char *path, char **tmp, FILE **f) {
  *f = NULL;
  size_t n = strlen(path) + 16;
  *tmp = malloc(n);
  if (!*tmp) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  snprintf(*tmp, n, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(*tmp);
  if (fd < 0) {
    int e = errno;
    free(*tmp);
    *tmp = NULL;
    return TSTOR__ERR(e == ENOENT ? TSTOR_ENOENT : e == EACCES || e == EPERM ? TSTOR_EACCES :
                      e == ENOSPC ? TSTOR_ENOSPC : TSTOR_EIO,
                      "%s: cannot create a file beside it: %s", path, strerror(e));
  }
  /* mkstemp makes it 0600; a saved file gets the mode open() would give */
  (void)fchmod(fd, 0666 & ~current_umask());
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

int tstor__commit_file(FILE *f, char *tmp, const char *path, int ok) {
  int rc = 0;
  if (fclose(f) != 0 && ok) {
    rc = TSTOR__ERR(errno == ENOSPC ? TSTOR_ENOSPC : TSTOR_EIO, "%s: %s", path, strerror(errno));
    ok = 0;
  }
  if (ok && rename(tmp, path) != 0) {
    rc = TSTOR__ERR(TSTOR_EIO, "%s: cannot rename the written file into place: %s", path,
                    strerror(errno));
    ok = 0;
  }
  if (!ok) unlink(tmp);
  free(tmp);
  return rc;
}
