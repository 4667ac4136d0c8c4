/* torch.load for the zip format (PyTorch 1.6 and later): the archive through
 * libzip, data.pkl through the strict unpickler, one storage per data/KEY
 * record, mapped from the file on cpu where it is stored uncompressed, and
 * the tensors as views of those storages. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include <tstor/mapped.h>

#define PICKLE_MAX ((uint64_t)1 << 30)     /* data.pkl of a state_dict is kilobytes */
#define PICKLE_PER_FILE_BYTE 16            /* and no larger than this many times the file */
#define EXPANDED_MAX ((uint64_t)1 << 24)   /* values, shared subtrees counted each time */

typedef struct loader {
  tstor_context *ctx;
  zip_t *z;
  const uint8_t *bytes;   /* the whole archive in memory (mapped or the caller's), or NULL */
  size_t nbytes;
  tstor_storage *whole;   /* a storage over those bytes, for views; or NULL */
  tstor__zip_index ix;    /* entries' data offsets in `bytes` */
  char *prefix;           /* the archive's folder: "archive", or the file's stem */
  int big_endian;
  unsigned flags;
  const char *map_location;
  int fd;                 /* the file, for reading records with pread; or -1 */
  uint64_t file_size;     /* with fd */
  tstor__read_batch reads; /* records read into cpu storages, all at once */
} loader;

static int zip_failure(zip_error_t *e, const char *what) {
  int rc = TSTOR__ERR(TSTOR_EINVAL, "%s: %s", what, zip_error_strerror(e));
  return rc;
}

/* Entry `name`, by its raw name in the central directory (what torch.load
 * reads), and *idx its index for libzip (both number entries in directory
 * order); NULL when absent. Never a name from libzip: it replaces an entry's
 * name with the one in an Info-ZIP Unicode Path extra field, so that a file
 * could name one record for torch.load and another for libzip. */
static const tstor__zip_entry *entry_named(loader *ld, const char *name, zip_int64_t *idx) {
  const tstor__zip_entry *e = tstor__zip_find(&ld->ix, name);
  *idx = e ? (zip_int64_t)(e - ld->ix.entries) : -1;
  return e;
}

/* What libzip says of entry idx must be what the directory says: one archive,
 * read two ways, or neither is trusted. */
static int cross_check(loader *ld, zip_int64_t idx, const tstor__zip_entry *e) {
  zip_stat_t st;
  if (zip_stat_index(ld->z, (zip_uint64_t)idx, ZIP_FL_UNCHANGED, &st) != 0)
    return TSTOR__ERR(TSTOR_EINVAL, "record '%.*s': %s", (int)e->name_len, e->name, zip_strerror(ld->z));
  if (!(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE) || !(st.valid & ZIP_STAT_COMP_METHOD) ||
      st.size != e->size || st.comp_size != e->comp_size || st.comp_method != e->method)
    return TSTOR__ERR(TSTOR_EINVAL, "record '%.*s': libzip reads other sizes or another method than the "
                      "central directory gives", (int)e->name_len, e->name);
  return 0;
}

/* Reads the first `want` bytes of entry `idx` (`size` bytes) into dst through
 * libzip, which inflates compressed entries and checks the CRC once the whole
 * entry is read: the rest is read too, and dropped. */
static int read_entry(loader *ld, zip_int64_t idx, const char *name, void *dst, uint64_t want, uint64_t size) {
  zip_file_t *f = zip_fopen_index(ld->z, (zip_uint64_t)idx, 0);
  if (!f) return TSTOR__ERR(TSTOR_EINVAL, "record '%s': %s", name, zip_strerror(ld->z));
  uint64_t done = 0;
  int rc = 0;
  char drop[4096];
  while (done < size) {
    char *at = done < want ? (char *)dst + done : drop;
    uint64_t room = done < want ? want - done : size - done < sizeof drop ? size - done : sizeof drop;
    zip_int64_t n = zip_fread(f, at, room);
    if (n < 0) {
      rc = TSTOR__ERR(TSTOR_EINVAL, "record '%s': %s", name, zip_file_strerror(f));
      break;
    }
    if (n == 0) {
      rc = TSTOR__ERR(TSTOR_EINVAL, "record '%s' ends after %llu of its %llu bytes", name,
                      (unsigned long long)done, (unsigned long long)size);
      break;
    }
    done += (uint64_t)n;
  }
  if (!rc) {
    /* one more read reaches the end of the entry, where libzip checks the CRC */
    char extra;
    zip_int64_t n = zip_fread(f, &extra, 1);
    if (n < 0) rc = TSTOR__ERR(TSTOR_EINVAL, "record '%s': %s", name, zip_file_strerror(f));
    else if (n > 0) rc = TSTOR__ERR(TSTOR_EINVAL, "record '%s' is longer than its directory says", name);
  }
  zip_fclose(f);
  return rc;
}

/* The folder holding data.pkl: torch.save writes "NAME/data.pkl" with one
 * folder of any name (1.13 uses the file's stem, later versions "archive"). */
static int find_prefix(loader *ld) {
  static const char tail[] = "/data.pkl";
  const size_t tlen = sizeof tail - 1;
  for (size_t i = 0; i < ld->ix.n; i++) {
    const tstor__zip_entry *e = &ld->ix.entries[i];
    const char *slash = memchr(e->name, '/', e->name_len);
    if (!slash || slash == e->name || (size_t)(e->name + e->name_len - slash) != tlen ||
        memcmp(slash, tail, tlen) != 0)
      continue;
    if (memchr(e->name, '\0', e->name_len))
      return TSTOR__ERR(TSTOR_EINVAL, "an entry's name holds a NUL byte");
    if (ld->prefix)
      return TSTOR__ERR(TSTOR_EINVAL, "the archive holds two data.pkl records ('%s/data.pkl' and '%.*s')",
                        ld->prefix, (int)e->name_len, e->name);
    /* not strndup: the name is not NUL-terminated, and may end the buffer */
    size_t plen = (size_t)(slash - e->name);
    if (!(ld->prefix = malloc(plen + 1))) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
    memcpy(ld->prefix, e->name, plen);
    ld->prefix[plen] = '\0';
  }
  if (!ld->prefix)
    return TSTOR__ERR(TSTOR_EINVAL, "no FOLDER/data.pkl record: not a torch.save archive");
  return 0;
}

static char *record_name(const loader *ld, const char *tail) {
  size_t n = strlen(ld->prefix) + strlen(tail) + 2;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s/%s", ld->prefix, tail);
  return s;
}

static int read_small_record(loader *ld, const char *tail, uint64_t max, uint8_t **out,
                             size_t *len, int required) {
  *out = NULL;
  *len = 0;
  char *name = record_name(ld, tail);
  if (!name) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  int rc = 0;
  zip_int64_t idx;
  const tstor__zip_entry *e = entry_named(ld, name, &idx);
  if (!e) {
    if (required) rc = TSTOR__ERR(TSTOR_EINVAL, "the archive has no record '%s'", name);
    goto out;
  }
  if ((rc = cross_check(ld, idx, e))) goto out;
  uint64_t size = e->size;
  if (size > max) {
    rc = TSTOR__ERR(TSTOR_ERANGE, "record '%s' of %llu bytes is larger than the %llu allowed", name,
                    (unsigned long long)size, (unsigned long long)max);
    goto out;
  }
  *out = malloc(size ? (size_t)size : 1);
  if (!*out) {
    rc = TSTOR__ERR(TSTOR_ENOMEM, "out of memory for record '%s' (%llu bytes)", name, (unsigned long long)size);
    goto out;
  }
  if ((rc = read_entry(ld, idx, name, *out, size, size))) {
    free(*out);
    *out = NULL;
    goto out;
  }
  *len = (size_t)size;
out:
  free(name);
  return rc;
}

static int device_is(tstor_context *ctx, tstor_device dev, const char *type) {
  const char *n = tstor_device_type_name(ctx, dev.type);
  return n && strcmp(n, type) == 0;
}

/* The CRC of a stored record whose first `have` bytes (at p) are in memory:
 * the rest of a record longer than its storage comes from the archive. */
static int stored_crc(loader *ld, const tstor__zip_entry *e, const void *p, size_t have, uint32_t *crc) {
  *crc = tstor__crc32(0, p, have);
  char buf[65536];
  for (uint64_t at = have; at < e->size;) {
    size_t n = e->size - at < sizeof buf ? (size_t)(e->size - at) : sizeof buf;
    const void *chunk = buf;
    if (ld->bytes) chunk = ld->bytes + e->data_offset + at;
    else {
      int rc = tstor__pread_full(ld->fd, buf, n, e->data_offset + at, "record tail");
      if (rc) return rc;
    }
    *crc = tstor__crc32(*crc, chunk, n);
    at += n;
  }
  return 0;
}

/* The checks and swaps a storage's bytes need once they are all in. */
static int finish_storage(loader *ld, tstor__storage_rec *r, tstor_storage *host, const tstor__zip_entry *e,
                          int check_crc) {
  uint32_t crc = 0;
  int rc = check_crc ? stored_crc(ld, e, tstor_storage_data(host), tstor_storage_nbytes(host), &crc) : 0;
  if (rc) return rc;
  if (check_crc && crc != e->crc)
    return TSTOR__ERR(TSTOR_EINVAL,
                      "storage '%s': CRC error: the bytes are not those the archive was written with", r->key);
  if (ld->big_endian && tstor_dtype_size(r->dtype) > 1) return tstor_typed_byteswap(host, r->dtype);
  return 0;
}

/* Loads storage `r`: a view of the mapped archive (TSTOR_LOAD_MMAP), or read.
 * A cpu storage read from the file is only queued on ld->reads, and *queued
 * set to its entry; the caller runs them all and then finishes each
 * (finish_storage). */
static int load_storage(loader *ld, tstor__storage_rec *r, const tstor__zip_entry **queued) {
  int rc;
  *queued = NULL;
  size_t esize = tstor_dtype_size(r->dtype);
  uint64_t nbytes = (uint64_t)r->numel * esize; /* checked against overflow by the unpickler */
  const char *where = ld->map_location ? ld->map_location : r->location;
  if (!where[0]) return TSTOR__ERR(TSTOR_EINVAL, "storage '%s' names no location (a string); load with a map_location", r->key);
  tstor_device dev;
  if ((rc = tstor_device_parse(ld->ctx, where, &dev))) {
    char why[512]; /* the message is rewritten below: copied out first */
    snprintf(why, sizeof why, "%s", tstor_last_error());
    return TSTOR__ERR(rc, "storage '%s' is for device '%s', which this context cannot give (%s); "
                          "load with a map_location", r->key, where, why);
  }
  char tail[64 + 8];
  if (strlen(r->key) > 64) return TSTOR__ERR(TSTOR_EINVAL, "storage key '%.64s...' is too long", r->key);
  snprintf(tail, sizeof tail, "data/%s", r->key);
  char *name = record_name(ld, tail);
  if (!name) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  zip_int64_t idx;
  const tstor__zip_entry *e = entry_named(ld, name, &idx);
  tstor_storage *host = NULL;
  if (!e) {
    rc = TSTOR__ERR(TSTOR_EINVAL, "storage '%s' has no record '%s' in the archive", r->key, name);
    goto out;
  }
  if ((rc = cross_check(ld, idx, e))) goto out;
  uint64_t size = e->size;
  /* A longer record is read in part, as torch.load does; a shorter one is
   * refused (torch.load would read past it). */
  if (size < nbytes) {
    rc = TSTOR__ERR(TSTOR_ERANGE, "record '%s' holds %llu bytes, but storage '%s' is %lld %s elements (%llu bytes)",
                    name, (unsigned long long)size, r->key, (long long)r->numel,
                    tstor_dtype_name(r->dtype), (unsigned long long)nbytes);
    goto out;
  }
  if (nbytes > SIZE_MAX) {
    rc = TSTOR__ERR(TSTOR_EOVERFLOW, "storage '%s' of %llu bytes cannot be addressed", r->key,
                    (unsigned long long)nbytes);
    goto out;
  }
  if (device_is(ld->ctx, dev, "meta")) {
    rc = tstor_storage_new(ld->ctx, dev, (size_t)nbytes, &r->s);
    goto out;
  }
  /* A stored record is mapped (a view of the file's mapping) or read with
   * pread, never through libzip, which would copy it once more. Like
   * PyTorch's reader, those paths check the CRC only when asked
   * (TSTOR_LOAD_VERIFY_CRC: it costs a pass over the bytes at about 1 GB/s);
   * compressed records go through libzip, which always checks it. */
  int stored = e->method == 0;
  /* Bytes to be swapped are never a view: the swap would write to the
   * caller's borrowed buffer (const, maybe read-only, maybe loaded again). */
  int swap = ld->big_endian && esize > 1;
  if (stored && ld->whole && e->data_offset % (esize ? esize : 1) == 0 && !swap) {
    rc = tstor_storage_view(ld->whole, (size_t)e->data_offset, (size_t)nbytes, &host);
  } else {
    tstor_device cpu;
    if ((rc = tstor_device_parse(ld->ctx, "cpu", &cpu))) goto out;
    if ((rc = tstor_storage_new(ld->ctx, cpu, (size_t)nbytes, &host))) goto out;
    char *dst = tstor_storage_data(host);
    if (!nbytes) {
      rc = 0;
    } else if (stored && ld->fd >= 0 && device_is(ld->ctx, dev, "cpu")) {
      /* the storage itself, read with the others; finished by the caller */
      if ((rc = tstor__read_batch_add(&ld->reads, dst, e->data_offset, (size_t)nbytes, r->key))) goto out;
      r->s = host;
      host = NULL;
      *queued = e;
      goto out;
    } else if (stored && ld->fd >= 0) {
      rc = tstor__pread_full(ld->fd, dst, (size_t)nbytes, e->data_offset, r->key);
    } else if (stored) {
      memcpy(dst, ld->bytes + e->data_offset, (size_t)nbytes);
    } else {
      rc = read_entry(ld, idx, name, dst, nbytes, size);
      stored = 0; /* libzip checked the CRC */
    }
  }
  if (!rc) rc = finish_storage(ld, r, host, e, stored && (ld->flags & TSTOR_LOAD_VERIFY_CRC));
  if (rc) goto out;
  rc = tstor_storage_to(host, dev, &r->s);
out:
  tstor_storage_release(host);
  free(name);
  return rc;
}

/* Every storage: the queued reads run together, then each is finished. */
static int load_storages(loader *ld, tstor_checkpoint *ck) {
  int rc = 0;
  const tstor__zip_entry **queued = calloc(ck->nstorages ? ck->nstorages : 1, sizeof *queued);
  if (!queued) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu storages", ck->nstorages);
  for (size_t i = 0; i < ck->nstorages && !rc; i++) rc = load_storage(ld, &ck->storages[i], &queued[i]);
  if (!rc && ld->reads.n) rc = tstor__read_batch_run(&ld->reads, ld->fd);
  for (size_t i = 0; i < ck->nstorages && !rc; i++) {
    tstor__storage_rec *r = &ck->storages[i];
    if (queued[i]) rc = finish_storage(ld, r, r->s, queued[i], ld->flags & TSTOR_LOAD_VERIFY_CRC);
  }
  free(queued);
  return rc;
}

static int bind_tensors(tstor_checkpoint *ck) {
  for (size_t i = 0; i < ck->nvalues; i++) {
    tstor_value *v = ck->values[i];
    if (v->kind != TSTOR_VALUE_TENSOR || v->u.tensor.t) continue;
    const tstor__storage_rec *r = &ck->storages[v->u.tensor.storage];
    int rc = tstor_tensor_on_storage(r->s, r->dtype, v->u.tensor.offset, v->u.tensor.ndim,
                                     v->u.tensor.sizes, v->u.tensor.strides, &v->u.tensor.t);
    if (rc) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", tstor_last_error());
      return TSTOR__ERR(rc, "a tensor on storage '%s' (%lld %s elements) does not fit it: %s",
                        r->key, (long long)r->numel, tstor_dtype_name(r->dtype), msg);
    }
  }
  return 0;
}

/* The archive's format version, as PyTorch's reader requires it: a record
 * "version" (or ".data/version") that C++'s stoull reads as 1 to 10 (leading
 * blanks and a sign allowed, anything after the digits ignored, a negative
 * number wrapping around). */
#define FORMAT_VERSION_MIN 1
#define FORMAT_VERSION_MAX 10
static int check_version(loader *ld) {
  uint8_t *text = NULL;
  size_t len = 0;
  int rc = read_small_record(ld, ".data/version", 1 << 20, &text, &len, 0);
  if (!rc && !text) rc = read_small_record(ld, "version", 1 << 20, &text, &len, 0);
  if (rc) return rc;
  if (!text) return TSTOR__ERR(TSTOR_EINVAL, "the archive has no record '%s/version' (PyTorch requires it)", ld->prefix);
  size_t i = 0;
  while (i < len && (text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) i++;
  int negative = i < len && text[i] == '-';
  if (i < len && (text[i] == '+' || text[i] == '-')) i++;
  uint64_t v = 0;
  int digits = 0, overflow = 0;
  for (; i < len && text[i] >= '0' && text[i] <= '9'; i++, digits++)
    overflow |= __builtin_mul_overflow(v, 10, &v) | __builtin_add_overflow(v, (uint64_t)(text[i] - '0'), &v);
  free(text);
  if (!digits) return TSTOR__ERR(TSTOR_EINVAL, "record '%s/version' holds no number", ld->prefix);
  if (negative) v = 0 - v;
  if (overflow || v < FORMAT_VERSION_MIN || v > FORMAT_VERSION_MAX)
    return TSTOR__ERR(TSTOR_EINVAL, "format version %s%llu: PyTorch reads versions %d to %d",
                      overflow ? "past " : "", (unsigned long long)v, FORMAT_VERSION_MIN, FORMAT_VERSION_MAX);
  return 0;
}

static int load(loader *ld, tstor_checkpoint **out) {
  tstor_checkpoint *ck = NULL;
  uint8_t *pkl = NULL, *order = NULL;
  size_t pkl_len = 0, order_len = 0;
  int rc;
  rc = ld->bytes ? tstor__zip_index_read(ld->bytes, ld->nbytes, &ld->ix)
                 : tstor__zip_index_read_fd(ld->fd, ld->file_size, &ld->ix);
  if (rc) goto fail;
  if ((zip_uint64_t)zip_get_num_entries(ld->z, 0) != ld->ix.n) {
    rc = TSTOR__ERR(TSTOR_EINVAL, "libzip finds %lld entries, the central directory %zu",
                    (long long)zip_get_num_entries(ld->z, 0), ld->ix.n);
    goto fail;
  }
  if ((rc = find_prefix(ld))) goto fail;
  if ((rc = check_version(ld))) goto fail;
  if ((rc = read_small_record(ld, "byteorder", 16, &order, &order_len, 0))) goto fail;
  if (order) {
    if (order_len == 6 && memcmp(order, "little", 6) == 0) ld->big_endian = 0;
    else if (order_len == 3 && memcmp(order, "big", 3) == 0) ld->big_endian = 1;
    else {
      rc = TSTOR__ERR(TSTOR_EINVAL, "record '%s/byteorder' says '%.*s', not 'little' or 'big'",
                      ld->prefix, (int)order_len, (const char *)order);
      goto fail;
    }
  }
  /* What a small file can cost is bounded by its size, before anything is
   * inflated or built: data.pkl at most PICKLE_PER_FILE_BYTE times the file
   * (torch.save stores it, so it is part of the file; only a compressed one
   * can be larger), and one value per byte of the file. */
  const uint64_t input = ld->fd >= 0 ? ld->file_size : ld->nbytes;
  uint64_t pkl_max = input > PICKLE_MAX / PICKLE_PER_FILE_BYTE ? PICKLE_MAX : input * PICKLE_PER_FILE_BYTE;
  if ((rc = read_small_record(ld, "data.pkl", pkl_max, &pkl, &pkl_len, 1))) goto fail;
  if ((rc = tstor_checkpoint_new(&ck))) goto fail;
  tstor__cursor cur = tstor__cursor_over(pkl, pkl_len, "data.pkl");
  if ((rc = tstor__unpickle(ck, &cur, &tstor__torch_rules, (size_t)(input < SIZE_MAX - 16 ? input + 16 : SIZE_MAX),
                            &ck->root)))
    goto fail;
  if ((rc = tstor__tree_check(ck->root, EXPANDED_MAX))) goto fail;
  if ((rc = load_storages(ld, ck))) goto fail;
  if ((rc = bind_tensors(ck))) goto fail;
  free(pkl);
  free(order);
  *out = ck;
  return 0;
fail:
  free(pkl);
  free(order);
  tstor_checkpoint_free(ck);
  return rc;
}

/* The archive in `size` bytes at data (a buffer, or the file's mapping), which
 * libzip and our reads then both see. */
static int zip_over_bytes(loader *ld, const void *data, size_t size) {
  zip_error_t e;
  zip_error_init(&e);
  zip_source_t *src = zip_source_buffer_create(data, size, 0, &e);
  int rc = 0;
  if (!src) {
    rc = zip_failure(&e, "buffer");
  } else if (!(ld->z = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &e))) {
    zip_source_free(src);
    rc = zip_failure(&e, "not a torch.save zip archive (PyTorch 1.6 and later)");
  }
  zip_error_fini(&e);
  ld->bytes = data;
  ld->nbytes = size;
  return rc;
}

static void loader_close(loader *ld) {
  if (ld->z) zip_discard(ld->z);
  if (ld->fd >= 0) close(ld->fd);
  tstor__zip_index_free(&ld->ix);
  tstor__read_batch_free(&ld->reads);
  tstor_storage_release(ld->whole);
  free(ld->prefix);
}

static int check_args(tstor_checkpoint **out, const tstor_load_options *opts, loader *ld) {
  if (!out) return TSTOR__ERR(TSTOR_EINVAL, "checkpoint load: out is NULL");
  *out = NULL;
  memset(ld, 0, sizeof *ld);
  ld->fd = -1;
  if (opts) {
    int rc = tstor__load_options_check(opts);
    if (rc) return rc;
    ld->map_location = opts->map_location;
    ld->flags = opts->flags;
  }
  return 0;
}

int tstor_torch_load(tstor_context *ctx, const char *path, const tstor_load_options *opts,
                     tstor_checkpoint **out) {
  loader ld;
  int rc = check_args(out, opts, &ld);
  if (rc) return rc;
  if (!path) return TSTOR__ERR(TSTOR_EINVAL, "tstor_torch_load: path is NULL");
  if (ctx) ld.ctx = ctx;
  else if ((rc = tstor_context_default(&ld.ctx))) return rc;
  if ((rc = tstor__map_location_check(ld.ctx, ld.map_location))) return rc;
  int zerr = 0;
  /* one open file for libzip and our reads: a path replaced meanwhile cannot
   * give them two different files */
  if ((rc = tstor__file_open(path, &ld.fd, &ld.file_size))) return rc;
  if (ld.flags & TSTOR_LOAD_MMAP) {
    /* the whole file, mapped copy-on-write: the archive is read from the
     * mapping alone, and storages are views of it */
    close(ld.fd);
    ld.fd = -1;
    rc = tstor_storage_from_file(ld.ctx, path, 0, 0, 1, &ld.whole);
    if (rc == TSTOR_ESIZE) rc = TSTOR__ERR(TSTOR_EINVAL, "%s: an empty file is not a torch.save archive", path);
    else if (!rc) rc = zip_over_bytes(&ld, tstor_storage_data(ld.whole), tstor_storage_nbytes(ld.whole));
    if (rc) {
      char msg[900];
      snprintf(msg, sizeof msg, "%s", tstor_last_error());
      if (!strstr(msg, path)) TSTOR__ERR(rc, "%s: %s", path, msg);
      goto out;
    }
    goto loaded;
  }
  int zfd = dup(ld.fd);
  if (zfd < 0) {
    rc = TSTOR__ERR(TSTOR_EIO, "%s: %s", path, strerror(errno));
    goto out;
  }
  if (!(ld.z = zip_fdopen(zfd, ZIP_CHECKCONS, &zerr))) close(zfd);
  if (!ld.z) {
    zip_error_t e;
    zip_error_init_with_code(&e, zerr);
    /* the file is open: libzip's "no such file" means no archive in it (as
     * for a buffer), and only a failed read is the file's fault */
    rc = zerr == ZIP_ER_READ
             ? TSTOR__ERR(TSTOR_EIO, "%s: %s", path, zip_error_strerror(&e))
             : TSTOR__ERR(TSTOR_EINVAL, "%s: not a torch.save zip archive (PyTorch 1.6 and later)%s%s", path,
                          zerr == ZIP_ER_NOENT ? "" : ": ", zerr == ZIP_ER_NOENT ? "" : zip_error_strerror(&e));
    zip_error_fini(&e);
    goto out;
  }
loaded:
  rc = load(&ld, out);
  if (rc) {
    char msg[900];
    snprintf(msg, sizeof msg, "%s", tstor_last_error());
    TSTOR__ERR(rc, "%s: %s", path, msg);
  }
out:
  loader_close(&ld);
  return rc;
}

int tstor_torch_load_buffer(tstor_context *ctx, const void *data, size_t size,
                            const tstor_load_options *opts, tstor_checkpoint **out) {
  loader ld;
  int rc = check_args(out, opts, &ld);
  if (rc) return rc;
  if (!data && size) return TSTOR__ERR(TSTOR_EINVAL, "tstor_torch_load_buffer: data is NULL");
  if (ctx) ld.ctx = ctx;
  else if ((rc = tstor_context_default(&ld.ctx))) return rc;
  if ((rc = tstor__map_location_check(ld.ctx, ld.map_location))) return rc;
  if ((rc = zip_over_bytes(&ld, data, size))) return rc;
  if (ld.flags & TSTOR_LOAD_BORROW_BUFFER) {
    tstor_device cpu;
    if ((rc = tstor_device_parse(ld.ctx, "cpu", &cpu)) ||
        (rc = tstor_storage_wrap(ld.ctx, cpu, (void *)data, size, &ld.whole)))
      goto out;
  }
  rc = load(&ld, out);
out:
  loader_close(&ld);
  return rc;
}
