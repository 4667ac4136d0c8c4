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

/* One map request on its way: what cpu_map's steps found so far, and what
 * its exit must undo when a later step fails. */
typedef struct map_job {
  tstor_map_request *req;
  uint32_t flags;
  int shared, shm, unique, whole;
  char what[300]; /* the request in words, for messages */
  int fd;         /* ours, closed at the end unless a record keeps it */
  int created;    /* a name we made, removed if the request fails */
  char name[64];  /* the unique shared-memory name, when made */
  int grown;      /* the file grew from old_size, shrunk back on failure */
  off_t old_size;
  size_t want; /* bytes to map */
  void *addr;
} map_job;

/* The flags agree with each other and with the request's fd and name. */
static int check_request(map_job *j) {
  tstor_map_request *req = j->req;
  const uint32_t fl = j->flags;
  if ((j->unique && (!j->shm || !j->shared || j->whole || req->fd >= 0)) ||
      (!j->unique && (fl & (TSTOR_MAP_UNLINK | TSTOR_MAP_OWN_NAME))) ||
      (!j->unique && req->fd < 0 && !req->name))
    return fail(TSTOR_EINVAL, "cpu: inconsistent map request (flags 0x%x)", (unsigned)fl);
  if (j->want > (size_t)PTRDIFF_MAX)
    return fail(TSTOR_EOVERFLOW, "cpu: %zu bytes cannot be mapped (at most %td)", j->want,
                PTRDIFF_MAX);
  return 0;
}

/* j->fd: the caller's descriptor duplicated, a new unique shared-memory
 * object, or the named file or object opened (created where asked). */
static int open_object(map_job *j) {
  tstor_map_request *req = j->req;
  if (req->fd >= 0) {
    j->fd = fcntl(req->fd, F_DUPFD_CLOEXEC, 0);
    if (j->fd < 0)
      return fail(tstor_errno_code(errno), "cpu: cannot use %s: %s", j->what, strerror(errno));
    return 0;
  }
  if (j->unique) {
    int rc = open_unique(&j->fd, j->name);
    if (rc) return rc;
    j->created = 1;
    /* The earliest moment: from here on the object lives exactly as long as
     * its descriptor and mappings, whatever happens to this process. */
    if (j->flags & TSTOR_MAP_UNLINK) {
      shm_unlink(j->name);
      j->created = 0;
    }
    return 0;
  }
  return open_named(req, j->what, j->shared && (j->flags & TSTOR_MAP_CREATE) && !j->whole, &j->fd,
                    &j->created);
}

/* A regular file; and a shared-memory name opened, not created (anyone could
 * have made it), only when this user made it for this user alone. */
static int check_object(map_job *j, const struct stat *st) {
  if (!S_ISREG(st->st_mode))
    return fail(TSTOR_EINVAL, "cpu: %s is %s, not a file that can be mapped", j->what,
                type_of(st->st_mode));
  if (!j->shm || j->unique || j->req->fd >= 0 || j->created) return 0;
  if (st->st_uid != geteuid())
    return fail(TSTOR_EACCES, "cpu: %s belongs to uid %ld, not to this user (%ld): refusing it",
                j->what, (long)st->st_uid, (long)geteuid());
  if (st->st_mode & 077)
    return fail(TSTOR_EACCES,
                "cpu: %s has mode 0%03o, open to other users: refusing it (tstor makes 0600)",
                j->what, (unsigned)(st->st_mode & 0777));
  return 0;
}

/* j->want against the object's size: the whole of it, or a part that fits,
 * or, for a shared mapping that creates, the object grown to it. */
static int size_object(map_job *j, const struct stat *st) {
  size_t have = (size_t)st->st_size;
  if (j->whole) {
    if (have == 0) return fail(TSTOR_ESIZE, "cpu: %s is empty: give a size to map", j->what);
    j->want = have;
    return 0;
  }
  if (j->want <= have) return 0;
  if (!j->shared || !(j->flags & (TSTOR_MAP_CREATE | TSTOR_MAP_UNIQUE)))
    return fail(TSTOR_ESIZE, "cpu: %s holds %zu bytes, %zu asked (%s)", j->what, have, j->want,
                j->shared ? "an import never grows what it maps"
                          : "a private mapping never grows the file");
  /* Reserve the space now: a full disk or /dev/shm is an error here, not a
   * SIGBUS at the first write to a hole later. */
  j->old_size = st->st_size;
  int err = posix_fallocate(j->fd, 0, (off_t)j->want);
  if (err) {
    struct stat now;
    if (fstat(j->fd, &now) == 0 && now.st_size != j->old_size) {
      if (ftruncate(j->fd, j->old_size) != 0) { /* the error below is the one to report */
      }
    }
    return fail(tstor_errno_code(err), "cpu: cannot reserve %zu bytes for %s: %s", j->want, j->what,
                strerror(err));
  }
  j->grown = 1;
  return 0;
}

static int map_object(map_job *j) {
  if (j->want == 0) return 0;
  void *addr = should_fail(TSTOR_FAULT_MMAP) ? MAP_FAILED
                                             : mmap(NULL, j->want, PROT_READ | PROT_WRITE,
                                                    j->shared ? MAP_SHARED : MAP_PRIVATE, j->fd, 0);
  if (addr != MAP_FAILED) {
    j->addr = addr;
    return 0;
  }
  int err = errno;
  if (err == EACCES && j->shared)
    return fail(TSTOR_EACCES, "cpu: cannot map %s shared: it is not open for writing", j->what);
  /* mmap's EAGAIN: too much memory locked */
  return fail(err == EAGAIN ? TSTOR_ENOMEM : tstor_errno_code(err),
              "cpu: cannot map %zu bytes of %s: %s", j->want, j->what, strerror(err));
}

int cpu_map(void *state, int index, tstor_map_request *req) {
  (void)state;
  (void)index;
  if (!req || req->struct_size < offsetof(tstor_map_request, created_name) + 64)
    return fail(TSTOR_EABI, "cpu: map request from an older core lacks its outputs");
  map_job j = {.req = req, .flags = req->flags, .fd = -1};
  j.shared = (j.flags & TSTOR_MAP_SHARED) != 0;
  j.shm = (j.flags & TSTOR_MAP_SHM) != 0;
  j.unique = (j.flags & TSTOR_MAP_UNIQUE) != 0;
  j.whole = (j.flags & TSTOR_MAP_WHOLE) != 0;
  j.want = j.whole ? 0 : req->nbytes;
  int rc = check_request(&j);
  if (rc) return rc;
  describe(req, j.what, sizeof j.what);
  mapping *m = should_fail(TSTOR_FAULT_MALLOC) ? NULL : calloc(1, sizeof *m);
  if (!m) return fail(TSTOR_ENOMEM, "cpu: out of memory for a mapping record");

  struct stat st;
  if ((rc = open_object(&j))) goto out;
  if (fstat(j.fd, &st) != 0) {
    rc = fail(tstor_errno_code(errno), "cpu: cannot stat %s: %s", j.what, strerror(errno));
    goto out;
  }
  if ((rc = check_object(&j, &st)) || (rc = size_object(&j, &st)) || (rc = map_object(&j)))
    goto out;

  m->magic = MAPPING_MAGIC;
  m->flags = j.flags;
  m->addr = j.addr;
  m->len = j.want;
  m->fd = -1;
  if (j.flags & TSTOR_MAP_KEEP_FD) {
    m->fd = j.fd;
    j.fd = -1;
  }
  /* Only a name this record unlinks needs its creator: a file's mapping,
   * the most common, costs no getpid system call. */
  if (j.unique && (j.flags & TSTOR_MAP_OWN_NAME)) {
    memcpy(m->owned_name, j.name, sizeof j.name);
    m->creator = getpid();
  }
  req->block.ptr = j.addr;
  req->block.alloc_ctx = (void *)((uintptr_t)m | MAPPING_TAG);
  req->mapped_nbytes = j.want;
  memcpy(req->created_name, j.name, sizeof j.name);
  m = NULL;
  j.created = 0; /* the name stays: it is the caller's (or the record's) now */
  j.grown = 0;

out:
  if (j.addr && rc) munmap(j.addr, j.want);
  if (j.grown && rc && !j.created && ftruncate(j.fd, j.old_size) != 0) { /* best effort */
  }
  if (j.created) unlink_name(j.name[0] ? j.name : req->name, j.shm);
  if (j.fd >= 0) close(j.fd);
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
