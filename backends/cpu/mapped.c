/* File mappings and POSIX shared memory for the cpu backend (mapped.h).
 *
 * Every path through map() either hands a complete mapping to the core or
 * undoes all it did: the descriptor is closed, the mapping unmapped, a file or
 * name it created unlinked and a file it grew cut back to its old size. The
 * tests check each failure for leaks of descriptors, mappings and names.
 *
 * Names made for share_memory (TSTOR_MAP_UNIQUE) read /tstor-PID-HEX: PID is
 * the creating process, which lets shm_sweep tell a dead creator's leftovers
 * from a live one's, and HEX is 128 random bits, so nobody can guess a name
 * to create it first; if somebody did anyway, O_EXCL fails and we draw again.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mapped.h"

#define MAPPING_MAGIC 0x4d415050u /* "MAPP" */
#define MAPPING_TAG ((uintptr_t)1)
#define SHM_DIR "/dev/shm"
#define SHM_PREFIX "tstor-"
#define SHM_RANDOM_BYTES 16
#define UNIQUE_TRIES 8

typedef struct mapping {
  uint32_t magic;
  uint32_t flags; /* the TSTOR_MAP_* it was made with */
  void *addr;     /* NULL for 0 bytes */
  size_t len;
  int fd;              /* kept descriptor, or -1 */
  pid_t creator;       /* with owned_name: a fork child inherits the record but must not unlink it */
  char owned_name[64]; /* unlinked when freed; "" for none */
} mapping;

/* The core's registrar is one static table, the same for every context. */
static _Atomic(const tstor_registrar *) mapped_reg;

void cpu_mapped_init(const tstor_registrar *reg) {
  atomic_store_explicit(&mapped_reg, reg, memory_order_release);
}

/* The core's fault injection (tests only): nonzero, with errno set as the real
 * call would set it, when this acquisition of `what` must fail. */
static int should_fail(int what) {
  const tstor_registrar *reg = atomic_load_explicit(&mapped_reg, memory_order_acquire);
  return reg && TSTOR_REGISTRAR_HAS(reg, should_fail) && reg->should_fail(what);
}

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  const tstor_registrar *reg = atomic_load_explicit(&mapped_reg, memory_order_acquire);
  return reg ? reg->set_error(code, "%s", buf) : code;
}

/* What the request names, for messages: "'data.bin'", "shared memory '/x'". */
static void describe(const tstor_map_request *req, char *buf, size_t size) {
  if (req->fd >= 0)
    snprintf(buf, size, "descriptor %d", req->fd);
  else if (req->flags & TSTOR_MAP_UNIQUE)
    snprintf(buf, size, "new shared memory");
  else if (req->flags & TSTOR_MAP_SHM)
    snprintf(buf, size, "shared memory '%s'", req->name);
  else
    snprintf(buf, size, "'%s'", req->name);
}

static mapping *mapping_of(void *alloc_ctx) {
  uintptr_t v = (uintptr_t)alloc_ctx;
  if (!(v & MAPPING_TAG)) return NULL;
  mapping *m = (mapping *)(v & ~MAPPING_TAG);
  return m->magic == MAPPING_MAGIC ? m : NULL;
}

static int random_bytes(unsigned char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(buf + got, n - got, 0);
    if (r > 0) {
      got += (size_t)r;
    } else if (r < 0 && errno != EINTR) {
      return fail(tstor_errno_code(errno), "cpu: no random bytes for a shared-memory name: %s",
                  strerror(errno));
    }
  }
  return 0;
}

/* Creates a new shared-memory object under a fresh name, as PyTorch does:
 * O_CREAT|O_EXCL and mode 0600, so an object somebody else made first is
 * never ours to use or to unlink. */
static int open_unique(int *fd_out, char name[64]) {
  for (int attempt = 0; attempt < UNIQUE_TRIES; attempt++) {
    unsigned char r[SHM_RANDOM_BYTES];
    int rc = random_bytes(r, sizeof r);
    if (rc) return rc;
    int len = snprintf(name, 64, "/" SHM_PREFIX "%ld-", (long)getpid());
    for (size_t i = 0; i < sizeof r; i++)
      len += snprintf(name + len, 64 - (size_t)len, "%02x", r[i]);
    int fd = should_fail(TSTOR_FAULT_SHM) ? -1 : shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      *fd_out = fd;
      return 0;
    }
    if (errno != EEXIST) {
      int err = errno;
      name[0] = '\0';
      return fail(tstor_errno_code(err), "cpu: cannot create shared memory: %s", strerror(err));
    }
  }
  name[0] = '\0';
  return fail(TSTOR_EEXIST,
              "cpu: %d fresh shared-memory names in a row were already taken: is somebody "
              "squatting " SHM_DIR "?",
              UNIQUE_TRIES);
}

static int open_one(const char *name, int shm, int oflag, mode_t mode) {
  /* O_NONBLOCK: opening a FIFO must fail its type check, not wait for a writer. */
  oflag |= O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  if (!shm) return open(name, oflag, mode);
  return should_fail(TSTOR_FAULT_SHM) ? -1 : shm_open(name, oflag, mode);
}

/* Opens an existing object, or creates it (mode 0600) when allowed; a racing
 * creator makes us open theirs. */
static int open_named(const tstor_map_request *req, const char *what, int may_create, int *fd_out,
                      int *created) {
  int shm = (req->flags & TSTOR_MAP_SHM) != 0;
  int access = (req->flags & TSTOR_MAP_SHARED) ? O_RDWR : O_RDONLY;
  for (int attempt = 0; attempt < 4; attempt++) {
    int fd = open_one(req->name, shm, access, 0);
    if (fd >= 0) {
      *fd_out = fd;
      *created = 0;
      return 0;
    }
    int err = errno;
    if (err != ENOENT || !may_create) {
      const char *hint = "";
      if (err == ENOENT && (req->flags & TSTOR_MAP_SHARED) && (req->flags & TSTOR_MAP_CREATE))
        hint = " (and no size was given to create it with)";
      else if (err == EINVAL && shm)
        hint = " (a shared-memory name is one component: /name)";
      else if (err == EISDIR)
        return fail(TSTOR_EINVAL, "cpu: %s is a directory, not a file", what);
      return fail(tstor_errno_code(err), "cpu: cannot open %s for %s: %s%s", what,
                  access == O_RDWR ? "reading and writing" : "reading", strerror(err), hint);
    }
    fd = open_one(req->name, shm, access | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      *fd_out = fd;
      *created = 1;
      return 0;
    }
    if (errno != EEXIST)
      return fail(tstor_errno_code(errno), "cpu: cannot create %s: %s", what, strerror(errno));
  }
  return fail(TSTOR_EBUSY, "cpu: %s keeps appearing and disappearing", what);
}

static const char *type_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

static void unlink_name(const char *name, int shm) {
  if (shm)
    shm_unlink(name);
  else
    unlink(name);
}

int cpu_map(void *state, int index, tstor_map_request *req) {
  (void)state;
  (void)index;
  if (!req || req->struct_size < offsetof(tstor_map_request, created_name) + 64)
    return fail(TSTOR_EABI, "cpu: map request from an older core lacks its outputs");
  const uint32_t fl = req->flags;
  const int shared = (fl & TSTOR_MAP_SHARED) != 0, shm = (fl & TSTOR_MAP_SHM) != 0;
  const int unique = (fl & TSTOR_MAP_UNIQUE) != 0, whole = (fl & TSTOR_MAP_WHOLE) != 0;
  if ((unique && (!shm || !shared || whole || req->fd >= 0)) ||
      (!unique && (fl & (TSTOR_MAP_UNLINK | TSTOR_MAP_OWN_NAME))) ||
      (!unique && req->fd < 0 && !req->name))
    return fail(TSTOR_EINVAL, "cpu: inconsistent map request (flags 0x%x)", (unsigned)fl);
  size_t want = whole ? 0 : req->nbytes;
  if (want > (size_t)PTRDIFF_MAX)
    return fail(TSTOR_EOVERFLOW, "cpu: %zu bytes cannot be mapped (at most %td)", want,
                PTRDIFF_MAX);

  char what[300];
  describe(req, what, sizeof what);
  mapping *m = should_fail(TSTOR_FAULT_MALLOC) ? NULL : calloc(1, sizeof *m);
  if (!m) return fail(TSTOR_ENOMEM, "cpu: out of memory for a mapping record");

  int rc = 0, fd = -1, created = 0;
  char name[64] = "";
  off_t old_size = 0;
  int grown = 0;
  void *addr = NULL;
  struct stat st;

  if (req->fd >= 0) {
    fd = fcntl(req->fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
      rc = fail(tstor_errno_code(errno), "cpu: cannot use %s: %s", what, strerror(errno));
      goto out;
    }
  } else if (unique) {
    rc = open_unique(&fd, name);
    if (rc) goto out;
    created = 1;
    /* The earliest moment: from here on the object lives exactly as long as
     * its descriptor and mappings, whatever happens to this process. */
    if (fl & TSTOR_MAP_UNLINK) {
      shm_unlink(name);
      created = 0;
    }
  } else {
    rc = open_named(req, what, shared && (fl & TSTOR_MAP_CREATE) && !whole, &fd, &created);
    if (rc) goto out;
  }

  if (fstat(fd, &st) != 0) {
    rc = fail(tstor_errno_code(errno), "cpu: cannot stat %s: %s", what, strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    rc = fail(TSTOR_EINVAL, "cpu: %s is %s, not a file that can be mapped", what,
              type_of(st.st_mode));
    goto out;
  }
  /* A shared-memory name opened, not created: anyone could have made it. We
   * map only what this user made for this user alone. */
  if (shm && !unique && req->fd < 0 && !created) {
    if (st.st_uid != geteuid()) {
      rc = fail(TSTOR_EACCES, "cpu: %s belongs to uid %ld, not to this user (%ld): refusing it",
                what, (long)st.st_uid, (long)geteuid());
      goto out;
    }
    if (st.st_mode & 077) {
      rc = fail(TSTOR_EACCES,
                "cpu: %s has mode 0%03o, open to other users: refusing it (tstor makes 0600)", what,
                (unsigned)(st.st_mode & 0777));
      goto out;
    }
  }

  size_t have = (size_t)st.st_size;
  if (whole) {
    if (have == 0) {
      rc = fail(TSTOR_ESIZE, "cpu: %s is empty: give a size to map", what);
      goto out;
    }
    want = have;
  } else if (want > have) {
    if (!shared || !(fl & (TSTOR_MAP_CREATE | TSTOR_MAP_UNIQUE))) {
      rc = fail(
          TSTOR_ESIZE, "cpu: %s holds %zu bytes, %zu asked (%s)", what, have, want,
          shared ? "an import never grows what it maps" : "a private mapping never grows the file");
      goto out;
    }
    /* Reserve the space now: a full disk or /dev/shm is an error here, not a
     * SIGBUS at the first write to a hole later. */
    old_size = st.st_size;
    int err = posix_fallocate(fd, 0, (off_t)want);
    if (err) {
      struct stat now;
      if (fstat(fd, &now) == 0 && now.st_size != old_size) {
        if (ftruncate(fd, old_size) != 0) { /* the error below is the one to report */
        }
      }
      rc = fail(tstor_errno_code(err), "cpu: cannot reserve %zu bytes for %s: %s", want, what,
                strerror(err));
      goto out;
    }
    grown = 1;
  }

  if (want > 0) {
    addr = should_fail(TSTOR_FAULT_MMAP)
               ? MAP_FAILED
               : mmap(NULL, want, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      addr = NULL;
      if (err == EACCES && shared)
        rc = fail(TSTOR_EACCES, "cpu: cannot map %s shared: it is not open for writing", what);
      else
        /* mmap's EAGAIN: too much memory locked */
        rc = fail(err == EAGAIN ? TSTOR_ENOMEM : tstor_errno_code(err),
                  "cpu: cannot map %zu bytes of %s: %s", want, what, strerror(err));
      goto out;
    }
  }

  m->magic = MAPPING_MAGIC;
  m->flags = fl;
  m->addr = addr;
  m->len = want;
  m->fd = -1;
  if (fl & TSTOR_MAP_KEEP_FD) {
    m->fd = fd;
    fd = -1;
  }
  /* Only a name this record unlinks needs its creator: a file's mapping,
   * the most common, costs no getpid system call. */
  if (unique && (fl & TSTOR_MAP_OWN_NAME)) {
    memcpy(m->owned_name, name, sizeof name);
    m->creator = getpid();
  }
  req->block.ptr = addr;
  req->block.alloc_ctx = (void *)((uintptr_t)m | MAPPING_TAG);
  req->mapped_nbytes = want;
  memcpy(req->created_name, name, sizeof name);
  m = NULL;
  created = 0; /* the name stays: it is the caller's (or the record's) now */
  grown = 0;

out:
  if (addr && rc) munmap(addr, want);
  if (grown && rc && !created && ftruncate(fd, old_size) != 0) { /* best effort */
  }
  if (created) unlink_name(name[0] ? name : req->name, shm);
  if (fd >= 0) close(fd);
  free(m);
  return rc;
}

int cpu_mapping_info(void *state, int index, void *alloc_ctx, tstor_mapping_info *out) {
  (void)state;
  (void)index;
  mapping *m = mapping_of(alloc_ctx);
  if (!m) return fail(TSTOR_ENOTSUP, "cpu: these bytes are not a mapping");
  if (!out || out->struct_size < offsetof(tstor_mapping_info, fd) + sizeof out->fd)
    return fail(TSTOR_EABI, "cpu: mapping info from an older core is too small");
  out->flags = m->flags;
  out->fd = m->fd;
  return 0;
}

int cpu_mapping_free(void *alloc_ctx) {
  mapping *m = mapping_of(alloc_ctx);
  if (!m) return 0;
  if (m->addr) munmap(m->addr, m->len);
  if (m->fd >= 0) close(m->fd);
  if (m->owned_name[0] && m->creator == getpid()) shm_unlink(m->owned_name);
  m->magic = 0;
  free(m);
  return 1;
}

/* The creator's pid in a name we made ("tstor-PID-HEX", without the slash),
 * or 0 when the name is not of that form. */
static pid_t creator_of(const char *entry) {
  size_t plen = strlen(SHM_PREFIX);
  if (strncmp(entry, SHM_PREFIX, plen) != 0) return 0;
  const char *p = entry + plen;
  long pid = 0;
  const char *digits = p;
  while (*p >= '0' && *p <= '9') {
    if (pid > 1L << 30) return 0;
    pid = pid * 10 + (*p++ - '0');
  }
  if (p == digits || *p++ != '-') return 0;
  size_t hex = 0;
  for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++) hex++;
  if (*p != '\0' || hex != 2 * SHM_RANDOM_BYTES || pid <= 0) return 0;
  return (pid_t)pid;
}

int cpu_shm_sweep(void *state, int *removed) {
  (void)state;
  int count = 0;
  DIR *dir = opendir(SHM_DIR);
  if (!dir) {
    if (errno == ENOENT) {
      if (removed) *removed = 0;
      return 0;
    }
    return fail(tstor_errno_code(errno), "cpu: cannot list " SHM_DIR ": %s", strerror(errno));
  }
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    pid_t pid = creator_of(e->d_name);
    if (pid == 0) continue;
    /* EPERM means a live process of another user: only ESRCH is dead. */
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st;
    if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != geteuid())
      continue;
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    if (shm_unlink(name) == 0) count++;
  }
  closedir(dir);
  if (removed) *removed = count;
  return 0;
}
