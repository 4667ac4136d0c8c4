/* Where a checkpoint's bytes come from, and how a range of them becomes a
 * storage: shared by every format's reader, which then only says where its
 * records lie. The input is a file read with pread (the default, as
 * torch.load reads), a file mapped copy-on-write (TSTOR_LOAD_MMAP), or the
 * caller's buffer, copied or borrowed (TSTOR_LOAD_BORROW_BUFFER). */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tstor/mapped.h>

int tstor__io_source_begin(tstor__io_source *src, tstor_context *ctx,
                           const tstor_load_options *opts, tstor_checkpoint **out,
                           const char *who) {
  memset(src, 0, sizeof *src);
  src->fd = -1;
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "%s: out is NULL", who);
  *out = NULL;
  if (opts) {
    int rc = tstor__io_load_options_check(opts);
    if (rc) return rc;
    src->map_location = opts->map_location;
    src->flags = opts->flags;
    if (src->flags & TSTOR_LOAD_MMAP_SHARED) src->flags |= TSTOR_LOAD_MMAP;
  }
  int rc = ctx ? (src->ctx = ctx, 0) : tstor_context_default(&src->ctx);
  return rc ? rc : tstor__io_map_location_check(src->ctx, src->map_location);
}

int tstor__io_source_open_file(tstor__io_source *src, const char *path, const char *format) {
  /* opened first either way: a FIFO or a device is refused before a mapping */
  int rc = tstor__io_file_open(path, &src->fd, &src->size);
  if (rc || !(src->flags & TSTOR_LOAD_MMAP)) return rc;
  /* the whole file, mapped: records are read from the mapping alone, and
   * storages are views of it */
  close(src->fd);
  src->fd = -1;
  rc = tstor_storage_from_file(src->ctx, path, src->flags & TSTOR_LOAD_MMAP_SHARED ? TSTOR_FILE_SHARED : 0, 0, 1,
                               &src->whole);
  if (rc == TSTOR_ESIZE) return TSTOR__ERR(TSTOR_EINVAL, "%s: an empty file is not %s", path, format);
  if (rc) return rc;
  src->bytes = tstor_storage_data(src->whole);
  src->size = tstor_storage_nbytes(src->whole);
  return 0;
}

int tstor__io_source_open_fd(tstor__io_source *src, int fd, uint8_t **owned) {
  *owned = NULL;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return TSTOR__ERR(TSTOR_EINVAL, "fd %d: %s", fd, strerror(fd < 0 ? EBADF : errno));
  if (src->flags & TSTOR_LOAD_MMAP)
    return TSTOR__ERR(TSTOR_EINVAL, "fd %d: TSTOR_LOAD_MMAP maps a file by its path; load this one read", fd);
  if (S_ISDIR(st.st_mode)) return TSTOR__ERR(TSTOR_EINVAL, "fd %d: a directory", fd);
  /* a device never ends (/dev/zero would be read until memory ran out); the
   * path loader refuses devices too */
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
    return TSTOR__ERR(TSTOR_EINVAL, "fd %d: a %s device is not a checkpoint", fd,
                      S_ISCHR(st.st_mode) ? "character" : "block");
  if (S_ISREG(st.st_mode)) {
    /* read from its start through a description of its own (libzip reads
     * with read(2)): the caller's offset stays where it was */
    char self[40];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    if ((src->fd = open(self, O_RDONLY | O_CLOEXEC)) < 0)
      return TSTOR__ERR(TSTOR_EIO, "fd %d: cannot open it again through %s: %s", fd, self, strerror(errno));
    if (fstat(src->fd, &st) != 0 || !S_ISREG(st.st_mode))
      return TSTOR__ERR(TSTOR_EIO, "fd %d: %s is no longer that file", fd, self);
    src->size = (uint64_t)st.st_size;
    return 0;
  }
  /* a pipe or socket: read to its end, into memory the load then copies from */
  size_t len = 0, cap = 1 << 16;
  uint8_t *buf = tstor__io_malloc(cap);
  for (;;) {
    if (!buf) return TSTOR__ERR(TSTOR_ENOMEM, "fd %d: out of memory for %zu bytes", fd, cap);
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      tstor__io_free(buf);
      return TSTOR__ERR(TSTOR_EIO, "fd %d: %s", fd, strerror(e));
    }
    if (n == 0) break;
    len += (size_t)n;
    if (len == cap) {
      uint8_t *grown = cap <= SIZE_MAX / 2 ? tstor__io_realloc(buf, cap * 2) : NULL;
      if (!grown) tstor__io_free(buf);
      buf = grown;
      cap *= 2;
    }
  }
  *owned = buf;
  src->bytes = buf;
  src->size = len;
  return 0;
}

int tstor__io_source_open_buffer(tstor__io_source *src, const void *data, size_t size,
                                 const char *who) {
  if (!data && size) return TSTOR__ERR(TSTOR_EINVAL, "%s: data is NULL", who);
  src->bytes = data;
  src->size = size;
  if (!(src->flags & TSTOR_LOAD_BORROW_BUFFER)) return 0;
  tstor_device cpu;
  int rc = tstor_device_parse(src->ctx, "cpu", &cpu);
  return rc ? rc : tstor_storage_wrap(src->ctx, cpu, (void *)data, size, &src->whole);
}

void tstor__io_source_close(tstor__io_source *src) {
  if (src->fd >= 0) close(src->fd);
  src->fd = -1;
  tstor__io_read_batch_free(&src->reads);
  tstor_storage_release(src->whole);
  src->whole = NULL;
}

int tstor__io_source_fail(int rc, const char *path) {
  return strstr(tstor_last_error(), path) ? rc : tstor_error_prefix(rc, "%s", path);
}

int tstor__io_source_device(tstor__io_source *src, const char *location, const char *key,
                            tstor_device *dev) {
  const char *where = src->map_location ? src->map_location : location;
  if (!where[0])
    return TSTOR__ERR(TSTOR_EINVAL, "storage '%s' names no location (a string); load with a map_location", key);
  int rc = tstor_device_parse(src->ctx, where, dev);
  if (!rc) return 0;
  char why[512]; /* the message is rewritten below: copied out first */
  snprintf(why, sizeof why, "%s", tstor_last_error());
  return TSTOR__ERR(rc, "storage '%s' is for device '%s', which this context cannot give (%s); load with a map_location",
                    key, where, why);
}

bool tstor__io_source_device_has(const tstor__io_source *src, tstor_device dev, unsigned flags) {
  return (tstor_device_type_flags(src->ctx, dev.type) & flags) != 0;
}

int tstor__io_source_read(const tstor__io_source *src, void *dst, size_t len, uint64_t off,
                          const char *what) {
  if (off > src->size || len > src->size - off)
    return TSTOR__ERR(TSTOR_EINVAL, "'%s' lies past the end of the input (%llu bytes at %llu of %llu)", what,
                      (unsigned long long)len, (unsigned long long)off, (unsigned long long)src->size);
  if (!len) return 0;
  if (src->fd >= 0) return tstor__io_pread_full(src->fd, dst, len, off, what);
  memcpy(dst, src->bytes + off, len);
  return 0;
}

int tstor__io_source_host(tstor__io_source *src, uint64_t off, size_t nbytes, size_t align,
                          unsigned how, const char *what, tstor_storage **host, bool *queued) {
  *host = NULL;
  *queued = false;
  if (off > src->size || nbytes > src->size - off)
    return TSTOR__ERR(TSTOR_EINVAL, "'%s' lies past the end of the input (%zu bytes at %llu of %llu)", what,
                      nbytes, (unsigned long long)off, (unsigned long long)src->size);
  if ((how & TSTOR__SOURCE_VIEW) && src->whole && (uintptr_t)(src->bytes + off) % (align ? align : 1) == 0)
    return tstor_storage_view(src->whole, (size_t)off, nbytes, host);
  tstor_device cpu;
  int rc = tstor_device_parse(src->ctx, "cpu", &cpu);
  if (!rc) rc = tstor_storage_new(src->ctx, cpu, nbytes, host);
  if (rc || !nbytes) return rc;
  void *dst = tstor_storage_data(*host);
  if (src->fd >= 0 && (how & TSTOR__SOURCE_QUEUE)) {
    rc = tstor__io_read_batch_add(&src->reads, dst, off, nbytes, what);
    *queued = rc == 0;
  } else {
    rc = tstor__io_source_read(src, dst, nbytes, off, what);
  }
  if (rc) {
    tstor_storage_release(*host);
    *host = NULL;
  }
  return rc;
}

int tstor__io_source_record(tstor__io_source *src, tstor__io_record *r, uint64_t off,
                            size_t nbytes) {
  tstor_device dev;
  int rc = tstor__io_source_device(src, r->location, r->key, &dev);
  if (rc) return rc;
  if (tstor__io_source_device_has(src, dev, TSTOR_DEVICE_NO_DATA))
    return tstor_storage_new(src->ctx, dev, nbytes, &r->s);
  tstor_storage *host;
  bool queued;
  unsigned how =
      TSTOR__SOURCE_VIEW |
      (tstor__io_source_device_has(src, dev, TSTOR_DEVICE_HOST) ? TSTOR__SOURCE_QUEUE : 0);
  if ((rc = tstor__io_source_host(src, off, nbytes, tstor_dtype_size(r->dtype), how, r->key, &host,
                                  &queued)))
    return rc;
  if (queued) {
    r->s = host;
    return 0;
  }
  rc = tstor_storage_to(host, dev, &r->s);
  tstor_storage_release(host);
  return rc;
}

int tstor__io_source_storage(tstor__io_source *src, uint64_t off, size_t nbytes, size_t align,
                             const char *key, tstor_storage **out) {
  tstor_device dev;
  int rc = tstor__io_source_device(src, "cpu", key, &dev);
  if (rc) return rc;
  if (tstor__io_source_device_has(src, dev, TSTOR_DEVICE_NO_DATA))
    return tstor_storage_new(src->ctx, dev, nbytes, out);
  tstor_storage *host;
  bool queued;
  /* a cpu storage is read with the others before the load returns */
  bool on_cpu = tstor__io_source_device_has(src, dev, TSTOR_DEVICE_HOST) && dev.index == 0;
  rc = tstor__io_source_host(src, off, nbytes, align,
                             TSTOR__SOURCE_VIEW | (on_cpu ? TSTOR__SOURCE_QUEUE : 0), key, &host,
                             &queued);
  if (rc) return rc;
  if (queued) {
    *out = host;
    return 0;
  }
  rc = tstor_storage_to(host, dev, out);
  tstor_storage_release(host);
  return rc;
}

int tstor__io_source_run(tstor__io_source *src) {
  return src->reads.n ? tstor__io_read_batch_run(&src->reads, src->fd) : 0;
}

int tstor__io_load_path(tstor_context *ctx, const char *path, const tstor_load_options *opts,
                        tstor_checkpoint **out, const char *who, const char *format,
                        tstor__io_source_loader load) {
  tstor__io_source src;
  int rc = tstor__io_source_begin(&src, ctx, opts, out, who);
  if (!rc && !path) rc = TSTOR__ERR(TSTOR_EINVAL, "%s: path is NULL", who);
  if (!rc) rc = tstor__io_source_open_file(&src, path, format);
  if (!rc && !(rc = load(&src, path, out))) (*out)->source_bytes = src.size;
  if (rc && path) tstor__io_source_fail(rc, path);
  tstor__io_source_close(&src);
  return rc;
}

int tstor__io_load_buffer(tstor_context *ctx, const void *data, size_t size,
                          const tstor_load_options *opts, tstor_checkpoint **out, const char *who,
                          tstor__io_source_loader load) {
  tstor__io_source src;
  int rc = tstor__io_source_begin(&src, ctx, opts, out, who);
  if (!rc) rc = tstor__io_source_open_buffer(&src, data, size, who);
  if (!rc && !(rc = load(&src, "buffer", out))) (*out)->source_bytes = src.size;
  tstor__io_source_close(&src);
  return rc;
}
