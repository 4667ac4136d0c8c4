/* File-backed and shared-memory storages: the user's side of tstor/mapped.h.
 *
 * The host device's backend does the system calls (the map, mapping_info and
 * shm_sweep ops; backends/cpu/mapped.c). This file checks arguments, wraps
 * mappings in storages, moves live storages into shared memory and carries
 * descriptors over Unix sockets, which is the same on every backend. */
#include "internal.h"

#include <tstor/mapped.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* -------------------------------------------------------------- helpers */

/* The flags word is read without the swap lock by is_shared and the fast
 * paths, so the move publishes it with release and readers acquire it. */
static unsigned load_flags(const tstor_storage *s) {
  return __atomic_load_n(&s->flags, __ATOMIC_ACQUIRE);
}


/* 0 when device type `type` can map, else TSTOR_ENOTSUP with the reason. */
static int check_mapper(tstor_context *ctx, int type, const char *what) {
  const tstor__devtype *t = &ctx->types[type];
  if (!(t->ops.flags & TSTOR_DEVICE_HOST) || !t->ops.map || !t->ops.mapping_info ||
      !t->ops.shm_sweep)
    return tstor__err(TSTOR_ENOTSUP, "%s: %s storages cannot map files or shared memory", what,
                      t->name);
  return 0;
}

/* The context's host device type, which maps for from_file and the imports. */
static int host_mapper(tstor_context *ctx, const char *what, int *type) {
  *type = ctx->host_type;
  if (ctx->host_type < 0)
    return tstor__err(TSTOR_ENOTSUP, "%s: no loaded backend provides host memory", what);
  return check_mapper(ctx, ctx->host_type, what);
}

static void request_init(tstor_map_request *req, uint32_t flags, size_t nbytes) {
  memset(req, 0, sizeof *req);
  req->struct_size = sizeof *req;
  req->abi_version = TSTOR_ABI_VERSION;
  req->fd = -1;
  req->flags = flags;
  req->nbytes = nbytes;
}

/* Asks type `type` to map; on failure the backend's detail gets our prefix. */
static int map(tstor_context *ctx, int type, tstor_map_request *req, const char *what) {
  const tstor__devtype *t = &ctx->types[type];
  tstor__err_clear();
  int rc = t->ops.map(t->state, 0, req);
  if (rc) {
    if (!tstor_last_error()[0]) tstor__err(rc, "%s backend could not map", t->name);
    tstor__err_prefix("%s", what);
  }
  return rc;
}

/* Gives a mapping back, as the last release of its storage would. */
static void unmap(tstor_context *ctx, int type, const tstor_map_request *req) {
  const tstor__allocator *a = ctx->types[type].allocator;
  a->ops.free(a->state, 0, req->block.ptr, req->mapped_nbytes, req->block.alloc_ctx);
}

/* A new storage with `flags` and a copy of `filename` (NULL for none) around
 * what `req` maps. The storage comes first: once the backend has mapped (and
 * maybe created or grown a file) nothing may fail any more. */
static int map_new(tstor_context *ctx, int type, tstor_map_request *req, unsigned flags,
                   const char *filename, const char *what, tstor_storage **out) {
  tstor_device dev = {type, 0};
  tstor_storage *s;
  int rc = tstor__storage_alloc(ctx, dev, &s);
  if (rc) return rc;
  if (filename && !(s->filename = tstor__strdup(filename))) {
    tstor_storage_release(s);
    return tstor__err(TSTOR_ENOMEM, "%s: out of memory for a file name", what);
  }
  rc = map(ctx, type, req, what);
  if (rc) {
    tstor_storage_release(s); /* holds no bytes yet: frees the object only */
    return rc;
  }
  s->data = req->block.ptr;
  s->nbytes = req->mapped_nbytes;
  s->alloc = ctx->types[type].allocator;
  s->alloc_ctx = req->block.alloc_ctx;
  s->flags |= flags;
  *out = s;
  return 0;
}

/* What the backend says about the mapping under root s; nonzero (without a
 * detail) when s's bytes are not a mapping of its device type. */
static int mapping_info(const tstor_storage *s, tstor_mapping_info *info) {
  const tstor__devtype *t = &s->ctx->types[s->device.type];
  if (!s->alloc || s->alloc != t->allocator || !t->ops.mapping_info) return TSTOR_ENOTSUP;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
  info->abi_version = TSTOR_ABI_VERSION;
  info->fd = -1;
  int rc = t->ops.mapping_info(t->state, s->device.index, s->alloc_ctx, info);
  tstor__err_clear();
  return rc;
}

/* ---------------------------------------------------------------- files */

int tstor_storage_from_file(tstor_context *ctx, const char *filename, unsigned flags, size_t size,
                            size_t elem_size, tstor_storage **out) {
  if (out) *out = NULL;
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!filename || !out) return tstor__err(TSTOR_EINVAL, "from_file: NULL argument");
  if (!filename[0]) return tstor__err(TSTOR_EINVAL, "from_file: empty file name");
  if (flags & ~(unsigned)(TSTOR_FILE_SHARED | TSTOR_FILE_SHM))
    return tstor__err(TSTOR_EINVAL, "from_file: unknown flags 0x%x", flags);
  if (elem_size == 0) return tstor__err(TSTOR_EINVAL, "from_file: element size 0");
  size_t nbytes;
  if (tstor__mul_size(size, elem_size, &nbytes))
    return tstor__err(TSTOR_EOVERFLOW, "from_file: %zu elements of %zu bytes overflow size_t", size,
                      elem_size);
  int type;
  rc = host_mapper(ctx, "from_file", &type);
  if (rc) return rc;

  const int shared = (flags & TSTOR_FILE_SHARED) != 0;
  uint32_t mflags = (shared ? TSTOR_MAP_SHARED | TSTOR_MAP_CREATE | TSTOR_MAP_KEEP_FD : 0) |
                    ((flags & TSTOR_FILE_SHM) ? TSTOR_MAP_SHM : 0) |
                    (size == 0 ? TSTOR_MAP_WHOLE : 0);
  tstor_map_request req;
  request_init(&req, mflags, nbytes);
  req.name = filename;
  tstor_storage *s;
  rc = map_new(ctx, type, &req, TSTOR_FLAG_MAPPED | (shared ? TSTOR_FLAG_SHARED : 0u), filename,
               "from_file", &s);
  if (rc) return rc;
  /* The whole file was mapped, and never grown: dropping it changes nothing. */
  if (s->nbytes % elem_size) {
    size_t n = s->nbytes;
    tstor_storage_release(s);
    return tstor__err(TSTOR_ESIZE,
                      "from_file: '%s' holds %zu bytes, not a whole number of %zu-byte elements",
                      filename, n, elem_size);
  }
  *out = s;
  return 0;
}

const char *tstor_storage_filename(const tstor_storage *s) {
  if (!s) return NULL;
  const tstor_storage *root = s->base ? s->base : s;
  return __atomic_load_n(&root->filename, __ATOMIC_ACQUIRE);
}

/* --------------------------------------------------------- shared memory */

/* Moves root storage s into new shared memory, named (the name stays until
 * the storage's last release) or not (unlinked at once). The caller holds
 * s's swap lock and has seen s unshared; no view can be made meanwhile
 * (tstor_storage_view counts itself under the same lock). */
static int move_to_shm(tstor_storage *s, int named, const char *what) {
  tstor_context *ctx = s->ctx;
  int type = s->device.type;
  int rc = check_mapper(ctx, type, what);
  if (rc) return rc;
  long views = atomic_load_explicit(&s->nviews, memory_order_acquire);
  if (views > 0)
    return tstor__err(TSTOR_EBUSY, "%s: %ld view(s) point at the bytes it would move", what, views);

  tstor_map_request req;
  request_init(&req,
               TSTOR_MAP_SHM | TSTOR_MAP_SHARED | TSTOR_MAP_UNIQUE | TSTOR_MAP_KEEP_FD |
                   (named ? TSTOR_MAP_OWN_NAME : TSTOR_MAP_UNLINK),
               s->nbytes);
  rc = map(ctx, type, &req, what);
  if (rc) return rc;
  char *name = NULL;
  if (named && !(name = tstor__strdup(req.created_name))) {
    unmap(ctx, type, &req);
    return tstor__err(TSTOR_ENOMEM, "%s: out of memory for a name", what);
  }
  if (s->nbytes) memcpy(req.block.ptr, s->data, s->nbytes);

  struct {
    void *data;
    tstor__allocator *alloc;
    void *alloc_ctx;
    tstor_deleter deleter;
    void *deleter_ctx;
    char *filename;
  } old = {s->data, s->alloc, s->alloc_ctx, s->deleter, s->deleter_ctx, s->filename};
  s->data = req.block.ptr;
  s->alloc = ctx->types[type].allocator;
  s->alloc_ctx = req.block.alloc_ctx;
  s->deleter = NULL;
  s->deleter_ctx = NULL;
  __atomic_store_n(&s->filename, name, __ATOMIC_RELEASE);
  unsigned flags = s->flags & ~(unsigned)(TSTOR_FLAG_RESIZABLE | TSTOR_FLAG_BORROWED |
                                          TSTOR_FLAG_PINNED | TSTOR_FLAG_MAPPED);
  __atomic_store_n(&s->flags, flags | TSTOR_FLAG_SHARED, __ATOMIC_RELEASE);

  if (old.alloc)
    old.alloc->ops.free(old.alloc->state, s->device.index, old.data, s->nbytes, old.alloc_ctx);
  else if (old.deleter)
    old.deleter(old.data, old.deleter_ctx);
  /* Whoever asked tstor_storage_filename before may still hold its answer,
   * promised until the last release (mapped.h): it stays with the storage. */
  s->old_filename = old.filename;
  return 0;
}

int tstor_storage_share_memory(tstor_storage *s) {
  if (!s) return tstor__err(TSTOR_EINVAL, "share_memory: NULL storage");
  if (load_flags(s) & TSTOR_FLAG_SHARED) return 0;
  if (s->base)
    return tstor__err(TSTOR_ENOTSUP,
                      "share_memory: a view of an unshared storage: share the base before "
                      "making views of it");
  tstor__swap_lock(s);
  int rc = (s->flags & TSTOR_FLAG_SHARED) ? 0 : move_to_shm(s, 0, "share_memory");
  tstor__swap_unlock(s);
  return rc;
}

int tstor_storage_is_shared(const tstor_storage *s) {
  return s && (load_flags(s) & TSTOR_FLAG_SHARED) ? 1 : 0;
}

/* ------------------------------------------ sharing: by file descriptor */

/* The message tstor_storage_send writes beside the descriptor. */
typedef struct wire_header {
  char magic[4]; /* "TSTR" */
  uint32_t version;
  uint64_t nbytes;
} wire_header;

#define WIRE_VERSION 1u
#define RECV_MAX_FDS 4

/* The kept descriptor of shared root storage s, borrowed. */
static int shared_fd(const tstor_storage *s, const char *what, int *fd) {
  if (s->base)
    return tstor__err(TSTOR_EINVAL,
                      "%s: a view; export its base (tstor_storage_base) and view that", what);
  if (!(load_flags(s) & TSTOR_FLAG_SHARED))
    return tstor__err(TSTOR_EINVAL, "%s: the storage is not shared (share_memory it first)", what);
  tstor_mapping_info info;
  if (mapping_info(s, &info) || info.fd < 0)
    return tstor__err(TSTOR_EINVAL, "%s: the storage holds no descriptor to export", what);
  *fd = info.fd;
  return 0;
}

int tstor_storage_export_fd(tstor_storage *s, int *fd) {
  if (!s || !fd) return tstor__err(TSTOR_EINVAL, "export_fd: NULL argument");
  int kept;
  int rc = shared_fd(s, "export_fd", &kept);
  if (rc) return rc;
  int dup = fcntl(kept, F_DUPFD_CLOEXEC, 0);
  if (dup < 0)
    return tstor__err(tstor_errno_code(errno), "export_fd: cannot duplicate the descriptor: %s",
                      strerror(errno));
  *fd = dup;
  return 0;
}

int tstor_storage_import_fd(tstor_context *ctx, int fd, size_t nbytes, tstor_storage **out) {
  if (out) *out = NULL;
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "import_fd: NULL out");
  if (fd < 0) return tstor__err(TSTOR_EINVAL, "import_fd: descriptor %d", fd);
  int type;
  rc = host_mapper(ctx, "import_fd", &type);
  if (rc) return rc;
  tstor_map_request req;
  request_init(&req, TSTOR_MAP_SHARED | TSTOR_MAP_KEEP_FD | (nbytes ? 0 : TSTOR_MAP_WHOLE), nbytes);
  req.fd = fd;
  return map_new(ctx, type, &req, TSTOR_FLAG_SHARED, NULL, "import_fd", out);
}

/* A message of the header alone, with room for descriptors in control. */
static void header_message(struct msghdr *msg, struct iovec *iov, wire_header *h, char *control,
                           size_t control_size) {
  *iov = (struct iovec){h, sizeof *h};
  memset(msg, 0, sizeof *msg);
  msg->msg_iov = iov;
  msg->msg_iovlen = 1;
  msg->msg_control = control;
  msg->msg_controllen = control_size;
}

int tstor_storage_send(tstor_storage *s, int sock) {
  if (!s) return tstor__err(TSTOR_EINVAL, "send: NULL storage");
  int kept;
  int rc = shared_fd(s, "send", &kept);
  if (rc) return rc;
  wire_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, "TSTR", 4);
  h.version = WIRE_VERSION;
  h.nbytes = s->nbytes;
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct iovec iov;
  struct msghdr msg;
  header_message(&msg, &iov, &h, control.buf, sizeof control.buf);
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &kept, sizeof kept);

  size_t sent = 0;
  while (sent < sizeof h) {
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      if (err == EPIPE || err == ECONNRESET || err == ENOTCONN)
        return tstor__err(TSTOR_EIO, "send: the peer has closed the socket");
      return tstor__err(tstor_errno_code(err), "send: %s", strerror(err));
    }
    /* The descriptor went with the first byte; the rest is plain data. */
    sent += (size_t)n;
    iov.iov_base = (char *)&h + sent;
    iov.iov_len = sizeof h - sent;
    msg.msg_control = NULL;
    msg.msg_controllen = 0;
  }
  return 0;
}

int tstor_storage_recv(tstor_context *ctx, int sock, tstor_storage **out) {
  if (out) *out = NULL;
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!out) return tstor__err(TSTOR_EINVAL, "recv: NULL out");
  int type;
  rc = host_mapper(ctx, "recv", &type);
  if (rc) return rc;

  wire_header h;
  memset(&h, 0, sizeof h);
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(RECV_MAX_FDS * sizeof(int))];
  } control;
  struct iovec iov;
  struct msghdr msg;
  header_message(&msg, &iov, &h, control.buf, sizeof control.buf);
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return tstor__err(tstor_errno_code(errno), "recv: %s", strerror(errno));

  int fds[RECV_MAX_FDS], nfds = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count && nfds < RECV_MAX_FDS; i++)
      memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }
  /* A stream socket may hand over the header in pieces; a datagram or
   * sequenced-packet one never does. */
  size_t got = (size_t)n;
  int stype = 0;
  socklen_t slen = sizeof stype;
  if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &stype, &slen) != 0) stype = 0;
  while (stype == SOCK_STREAM && n > 0 && got < sizeof h) {
    n = recv(sock, (char *)&h + got, sizeof h - got, MSG_WAITALL);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) got += (size_t)n;
  }

  if (got == 0 && nfds == 0)
    rc = tstor__err(TSTOR_EIO, "recv: the peer closed the socket before sending a storage");
  else if (got != sizeof h || (msg.msg_flags & MSG_TRUNC) || memcmp(h.magic, "TSTR", 4) != 0 ||
           h.version != WIRE_VERSION)
    rc = tstor__err(TSTOR_EIO, "recv: not a tstor storage message (%zu bytes)", got);
  else if (nfds == 0 && (msg.msg_flags & MSG_CTRUNC))
    rc = tstor__err(TSTOR_EMFILE,
                    "recv: the kernel dropped the descriptor sent: this process is out of "
                    "descriptors (RLIMIT_NOFILE)");
  else if (nfds != 1)
    rc = tstor__err(TSTOR_EIO, "recv: the message carries %d descriptors, expected 1", nfds);
  else if (h.nbytes > SIZE_MAX)
    rc = tstor__err(TSTOR_EOVERFLOW, "recv: %llu bytes do not fit this process",
                    (unsigned long long)h.nbytes);
  if (rc == 0) {
    tstor_map_request req;
    request_init(&req, TSTOR_MAP_SHARED | TSTOR_MAP_KEEP_FD, (size_t)h.nbytes);
    req.fd = fds[0];
    rc = map_new(ctx, type, &req, TSTOR_FLAG_SHARED, NULL, "recv", out);
  }
  for (int i = 0; i < nfds; i++) close(fds[i]);
  return rc;
}

/* ---------------------------------------------------- sharing: by name */

int tstor_storage_export_name(tstor_storage *s, char *name, size_t size) {
  if (!s || !name) return tstor__err(TSTOR_EINVAL, "export_name: NULL argument");
  if (s->base)
    return tstor__err(TSTOR_EINVAL,
                      "export_name: a view; export its base (tstor_storage_base) and view that");
  /* The cleanup rule (mapped.h): leftovers of dead exporters go first. */
  if (check_mapper(s->ctx, s->device.type, "export_name") == 0) {
    const tstor__devtype *t = &s->ctx->types[s->device.type];
    t->ops.shm_sweep(t->state, NULL);
  }
  tstor__swap_lock(s);
  int rc = 0;
  if (!(s->flags & TSTOR_FLAG_SHARED)) {
    if (size < TSTOR_SHM_NAME_MAX)
      rc = tstor__err(TSTOR_ERANGE, "export_name: a name needs up to %d bytes, %zu given",
                      TSTOR_SHM_NAME_MAX, size);
    else
      rc = move_to_shm(s, 1, "export_name");
  } else {
    tstor_mapping_info info;
    if (mapping_info(s, &info) || !(info.flags & TSTOR_MAP_SHM) || !s->filename)
      rc = tstor__err(TSTOR_EINVAL,
                      "export_name: shared without a shared-memory name (by descriptor, or a "
                      "file mapping): send its descriptor instead");
  }
  if (rc == 0) {
    size_t len = strlen(s->filename);
    if (len >= size)
      rc = tstor__err(TSTOR_ERANGE, "export_name: the name needs %zu bytes, %zu given", len + 1,
                      size);
    else
      memcpy(name, s->filename, len + 1);
  }
  tstor__swap_unlock(s);
  return rc;
}

int tstor_storage_import_name(tstor_context *ctx, const char *name, size_t nbytes,
                              tstor_storage **out) {
  if (out) *out = NULL;
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (!name || !out) return tstor__err(TSTOR_EINVAL, "import_name: NULL argument");
  if (!name[0]) return tstor__err(TSTOR_EINVAL, "import_name: empty name");
  int type;
  rc = host_mapper(ctx, "import_name", &type);
  if (rc) return rc;
  tstor_map_request req;
  request_init(
      &req, TSTOR_MAP_SHM | TSTOR_MAP_SHARED | TSTOR_MAP_KEEP_FD | (nbytes ? 0 : TSTOR_MAP_WHOLE),
      nbytes);
  req.name = name;
  return map_new(ctx, type, &req, TSTOR_FLAG_SHARED, name, "import_name", out);
}

int tstor_shm_sweep(tstor_context *ctx, int *removed) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  int type;
  rc = host_mapper(ctx, "shm_sweep", &type);
  if (rc) return rc;
  const tstor__devtype *t = &ctx->types[type];
  int count = 0;
  tstor__err_clear();
  rc = t->ops.shm_sweep(t->state, &count);
  if (rc) {
    tstor__err_prefix("shm_sweep");
    return rc;
  }
  if (removed) *removed = count;
  return 0;
}
