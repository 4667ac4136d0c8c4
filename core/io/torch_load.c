/* torch.load for the zip format (PyTorch 1.6 and later): the archive through
 * zip.c's index, data.pkl through the strict unpickler, one storage per
 * data/KEY record, mapped from the file on cpu where it is stored
 * uncompressed, and the tensors as views of those storages. libzip is opened
 * only for a compressed record, to inflate it. A file in the legacy format goes
 * to torch_legacy.c, as torch.load sends it to _legacy_load. */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include <tstor/mapped.h>

#define PICKLE_PER_FILE_BYTE 16 /* data.pkl no larger than this many times the file */

typedef struct loader {
  tstor__io_source *src;  /* the archive's bytes */
  const char *name;       /* the input's name in messages: its path, or "buffer" */
  zip_t *z;               /* libzip's view of the archive, opened for the first compressed record */
  tstor__io_zip_index ix; /* entries' data offsets in the archive */
  char *prefix;           /* the archive's folder: "archive", or the file's stem */
  int big_endian;
  size_t next_entry; /* the entry after the last one found: writers put records in the order
                        the pickle names them */
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
static const tstor__io_zip_entry *entry_named(loader *ld, const char *name, zip_int64_t *idx) {
  /* the next entry first: no hash and no jump through a table of 10^6 */
  const tstor__io_zip_entry *e = ld->next_entry < ld->ix.n ? &ld->ix.entries[ld->next_entry] : NULL;
  size_t len = strlen(name);
  if (!e || e->name_len != len || memcmp(e->name, name, len) != 0)
    e = tstor__io_zip_find(&ld->ix, name);
  *idx = e ? (zip_int64_t)(e - ld->ix.entries) : -1;
  if (e) ld->next_entry = (size_t)*idx + 1;
  return e;
}

/* What libzip says of entry idx must be what the directory says: one archive,
 * read two ways, or neither is trusted. */
static int cross_check(loader *ld, zip_int64_t idx, const tstor__io_zip_entry *e) {
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
    const tstor__io_zip_entry *e = &ld->ix.entries[i];
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
    if (!(ld->prefix = tstor__io_malloc(plen + 1))) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
    memcpy(ld->prefix, e->name, plen);
    ld->prefix[plen] = '\0';
  }
  if (!ld->prefix)
    return TSTOR__ERR(TSTOR_EINVAL, "no FOLDER/data.pkl record: not a torch.save archive");
  return 0;
}

static int zip_open_lazily(loader *ld);
static int index_archive(loader *ld);

/* A stored record whole into dst, its CRC checked (as libzip checks every
 * record it reads). */
static int read_stored(loader *ld, const tstor__io_zip_entry *e, const char *name, void *dst) {
  int rc = tstor__io_source_read(ld->src, dst, (size_t)e->size, e->data_offset, name);
  if (!rc && tstor__io_crc32(0, dst, (size_t)e->size) != e->crc)
    rc = TSTOR__ERR(TSTOR_EINVAL,
                    "record '%s': CRC error: the bytes are not those the archive was written with",
                    name);
  return rc;
}

/* A compressed record whole into dst, inflated by libzip, which must read the
 * entry as the directory does. */
static int read_compressed(loader *ld, zip_int64_t idx, const tstor__io_zip_entry *e,
                           const char *name, void *dst) {
  int rc = zip_open_lazily(ld);
  if (!rc) rc = cross_check(ld, idx, e);
  if (!rc) rc = read_entry(ld, idx, name, dst, e->size, e->size);
  return rc;
}

static char *record_name(const loader *ld, const char *tail) {
  size_t np = strlen(ld->prefix), nt = strlen(tail);
  char *s = tstor__io_malloc(np + nt + 2);
  if (s) { /* prefix/tail, once a storage: no printf */
    memcpy(s, ld->prefix, np);
    s[np] = '/';
    memcpy(s + np + 1, tail, nt + 1);
  }
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
  const tstor__io_zip_entry *e = entry_named(ld, name, &idx);
  if (!e) {
    if (required) rc = TSTOR__ERR(TSTOR_EINVAL, "the archive has no record '%s'", name);
    goto out;
  }
  uint64_t size = e->size;
  if (size > max) {
    rc = TSTOR__ERR(TSTOR_ERANGE, "record '%s' of %llu bytes is larger than the %llu allowed", name,
                    (unsigned long long)size, (unsigned long long)max);
    goto out;
  }
  *out = tstor__io_malloc(size ? (size_t)size : 1);
  if (!*out) {
    rc = TSTOR__ERR(TSTOR_ENOMEM, "out of memory for record '%s' (%llu bytes)", name, (unsigned long long)size);
    goto out;
  }
  rc = e->method == 0 ? read_stored(ld, e, name, *out) : read_compressed(ld, idx, e, name, *out);
  if (rc) {
    tstor__io_free(*out);
    *out = NULL;
    goto out;
  }
  *len = (size_t)size;
out:
  tstor__io_free(name);
  return rc;
}

/* The CRC of a stored record whose first `have` bytes (at p) are in memory:
 * the rest of a record longer than its storage comes from the archive. */
static int stored_crc(loader *ld, const tstor__io_zip_entry *e, const void *p, size_t have,
                      uint32_t *crc) {
  *crc = tstor__io_crc32(0, p, have);
  char buf[65536];
  for (uint64_t at = have; at < e->size;) {
    size_t n = e->size - at < sizeof buf ? (size_t)(e->size - at) : sizeof buf;
    const void *chunk = buf;
    if (ld->src->bytes) chunk = ld->src->bytes + e->data_offset + at;
    else {
      int rc = tstor__io_source_read(ld->src, buf, n, e->data_offset + at, "record tail");
      if (rc) return rc;
    }
    *crc = tstor__io_crc32(*crc, chunk, n);
    at += n;
  }
  return 0;
}

/* The checks and swaps a storage's bytes need once they are all in. */
static int finish_storage(loader *ld, tstor__io_record *r, tstor_storage *host,
                          const tstor__io_zip_entry *e, int check_crc) {
  uint32_t crc = 0;
  int rc = check_crc ? stored_crc(ld, e, tstor_storage_data(host), tstor_storage_nbytes(host), &crc) : 0;
  if (rc) return rc;
  if (check_crc && crc != e->crc)
    return TSTOR__ERR(TSTOR_EINVAL,
                      "storage '%s': CRC error: the bytes are not those the archive was written with", r->key);
  if (ld->big_endian && tstor_dtype_size(r->dtype) > 1) return tstor_typed_byteswap(host, r->dtype);
  return 0;
}

/* The record of storage r (*name, freed by the caller; *e, *idx), holding at
 * least nbytes. */
static int storage_record(loader *ld, const tstor__io_record *r, uint64_t nbytes, char **name,
                          const tstor__io_zip_entry **e, zip_int64_t *idx) {
  char tail[64 + 8];
  *name = NULL;
  size_t klen = strlen(r->key);
  if (klen > 64) return TSTOR__ERR(TSTOR_EINVAL, "storage key '%.64s...' is too long", r->key);
  memcpy(tail, "data/", 5);
  memcpy(tail + 5, r->key, klen + 1);
  if (!(*name = record_name(ld, tail))) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  if (!(*e = entry_named(ld, *name, idx)))
    return TSTOR__ERR(TSTOR_EINVAL, "storage '%s' has no record '%s' in the archive", r->key,
                      *name);
  /* A shorter record is refused: torch.load read past it, into the memory
   * after it (CVE-2026-24747). A longer one too, as PyTorch 2.x refuses a
   * record of any other size than its storage's (1.13 read its first
   * bytes). */
  if ((*e)->size < nbytes)
    return TSTOR__ERR(
        TSTOR_ERANGE,
        "record '%s' holds %llu bytes, but storage '%s' is %lld %s elements (%llu bytes): a "
        "storage declared larger than its record, which old torch.load read past (CVE-2026-24747)",
        *name, (unsigned long long)(*e)->size, r->key, (long long)r->numel,
        tstor_dtype_name(r->dtype), (unsigned long long)nbytes);
  if ((*e)->size > nbytes)
    return TSTOR__ERR(
        TSTOR_ERANGE,
        "record '%s' holds %llu bytes, but storage '%s' is %lld %s elements (%llu bytes): "
        "torch.load of PyTorch 2.x refuses a record of another size than its storage",
        *name, (unsigned long long)(*e)->size, r->key, (long long)r->numel,
        tstor_dtype_name(r->dtype), (unsigned long long)nbytes);
  if (nbytes > SIZE_MAX)
    return TSTOR__ERR(TSTOR_EOVERFLOW, "storage '%s' of %llu bytes cannot be addressed", r->key,
                      (unsigned long long)nbytes);
  return 0;
}

/* A stored record's nbytes on the host (*host): a view of the file's mapping
 * or read with pread, never through libzip, which would copy it once more;
 * a cpu storage read from the file is only queued (*queued). Bytes to be
 * swapped are never a view: the swap would write to the caller's borrowed
 * buffer (const, maybe read-only, maybe loaded again). */
static int stored_host(loader *ld, const tstor__io_record *r, tstor_device dev,
                       const tstor__io_zip_entry *e, uint64_t nbytes, tstor_storage **host,
                       bool *queued) {
  size_t esize = tstor_dtype_size(r->dtype);
  int swap = ld->big_endian && esize > 1;
  unsigned how =
      (swap ? 0 : TSTOR__SOURCE_VIEW) |
      (tstor__io_source_device_has(ld->src, dev, TSTOR_DEVICE_HOST) ? TSTOR__SOURCE_QUEUE : 0);
  return tstor__io_source_host(ld->src, e->data_offset, (size_t)nbytes, esize, how, r->key, host,
                               queued);
}

/* A compressed record's first nbytes, inflated by libzip (which checks the
 * CRC) into a cpu storage *host. */
static int inflated_host(loader *ld, zip_int64_t idx, const tstor__io_zip_entry *e,
                         const char *name, uint64_t nbytes, tstor_storage **host) {
  tstor_device cpu;
  int rc = zip_open_lazily(ld);
  if (!rc) rc = cross_check(ld, idx, e);
  if (!rc) rc = tstor_device_parse(ld->src->ctx, "cpu", &cpu);
  if (!rc) rc = tstor_storage_new(ld->src->ctx, cpu, (size_t)nbytes, host);
  if (!rc) rc = read_entry(ld, idx, name, tstor_storage_data(*host), nbytes, e->size);
  return rc;
}

/* Loads storage `r`: a view of the mapped archive (TSTOR_LOAD_MMAP), or read.
 * A cpu storage read from the file is only queued on the source, and *queued
 * set to its entry; the caller runs them all and then finishes each
 * (finish_storage). */
static int load_storage(loader *ld, tstor__io_record *r, const tstor__io_zip_entry **queued) {
  *queued = NULL;
  uint64_t nbytes = (uint64_t)r->numel * tstor_dtype_size(r->dtype); /* checked by the unpickler */
  tstor_device dev;
  int rc = tstor__io_source_device(ld->src, r->location, r->key, &dev);
  if (rc) return rc;
  char *name = NULL;
  const tstor__io_zip_entry *e = NULL;
  zip_int64_t idx = -1;
  tstor_storage *host = NULL;
  bool q = false;
  if ((rc = storage_record(ld, r, nbytes, &name, &e, &idx))) goto out;
  if (tstor__io_source_device_has(ld->src, dev, TSTOR_DEVICE_NO_DATA)) {
    rc = tstor_storage_new(ld->src->ctx, dev, (size_t)nbytes, &r->s);
    goto out;
  }
  /* Like PyTorch's reader, the paths of stored records check the CRC only
   * when asked (TSTOR_LOAD_VERIFY_CRC: it costs a pass over the bytes at
   * about 1 GB/s); compressed records go through libzip, which always
   * checks it. */
  int stored = e->method == 0;
  rc = stored ? stored_host(ld, r, dev, e, nbytes, &host, &q)
              : inflated_host(ld, idx, e, name, nbytes, &host);
  if (rc) goto out;
  if (q) { /* a cpu storage read with the others, finished after */
    r->s = host;
    host = NULL;
    *queued = e;
    goto out;
  }
  rc = finish_storage(ld, r, host, e, stored && (ld->src->flags & TSTOR_LOAD_VERIFY_CRC));
  if (!rc) rc = tstor_storage_to(host, dev, &r->s);
out:
  tstor_storage_release(host);
  tstor__io_free(name);
  return rc;
}

/* Every storage: the queued reads run together, then each is finished. */
static int load_storages(loader *ld, tstor_checkpoint *ck) {
  int rc = 0;
  const tstor__io_zip_entry **queued =
      tstor__io_calloc(ck->nstorages ? ck->nstorages : 1, sizeof *queued);
  if (!queued) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory for %zu storages", ck->nstorages);
  for (size_t i = 0; i < ck->nstorages && !rc; i++) rc = load_storage(ld, &ck->storages[i], &queued[i]);
  if (!rc) rc = tstor__io_source_run(ld->src);
  for (size_t i = 0; i < ck->nstorages && !rc; i++) {
    tstor__io_record *r = &ck->storages[i];
    if (queued[i]) rc = finish_storage(ld, r, r->s, queued[i], ld->src->flags & TSTOR_LOAD_VERIFY_CRC);
  }
  tstor__io_free(queued);
  return rc;
}

/* The archive's format version, as PyTorch's reader requires it: a record
 * "version" (or ".data/version") that C++'s stoull reads as 1 to 10 (leading
 * blanks and a sign allowed, anything after the digits ignored, a negative
 * number wrapping around). */
/* A TorchScript archive (torch.jit.save) holds the model's code and a
 * constants.pkl beside data.pkl, and torch.load hands it to torch.jit.load,
 * which runs that code: the path of CVE-2025-32434, by which
 * torch.load(weights_only=True) before 2.6 ran it. PyTorch 2.6 and later
 * refuse such an archive under weights_only, and so does tstor, before
 * reading anything else of it. */
static int refuse_torchscript(loader *ld) {
  char *name = record_name(ld, "constants.pkl");
  zip_int64_t idx;
  if (!name) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  bool script = entry_named(ld, name, &idx) != NULL;
  tstor__io_free(name);
  if (!script) return 0;
  return TSTOR__ERR(
      TSTOR_EACCES,
      "a TorchScript archive (torch.jit.save: its record '%s/constants.pkl' comes with code "
      "that torch.jit.load runs, the path of CVE-2025-32434): refused, as "
      "torch.load(weights_only=True) refuses it; only torch.save's weights are read",
      ld->prefix);
}

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
  tstor__io_free(text);
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
  /* without a byteorder record: little-endian, unless the caller says the
   * file came from a big-endian machine (PyTorch's set_default_load_endianness) */
  ld->big_endian = (ld->src->flags & TSTOR_LOAD_ASSUME_BIG_ENDIAN) != 0;
  if ((rc = index_archive(ld))) goto fail;
  if ((rc = find_prefix(ld))) goto fail;
  if ((rc = refuse_torchscript(ld))) goto fail;
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
  const uint64_t input = ld->src->size;
  uint64_t pkl_max = input > TSTOR__PICKLE_MAX / PICKLE_PER_FILE_BYTE ? TSTOR__PICKLE_MAX : input * PICKLE_PER_FILE_BYTE;
  if ((rc = read_small_record(ld, "data.pkl", pkl_max, &pkl, &pkl_len, 1))) goto fail;
  if ((rc = tstor_checkpoint_new(&ck))) goto fail;
  tstor__io_cursor cur = tstor__io_cursor_over(pkl, pkl_len, "data.pkl");
  if ((rc = tstor__io_unpickle(ck, &cur, &tstor__io_torch_rules,
                               (size_t)(input < SIZE_MAX - 16 ? input + 16 : SIZE_MAX), &ck->root)))
    goto fail;
  if ((rc = tstor__io_tree_check(ck->root))) goto fail;
  if ((rc = load_storages(ld, ck))) goto fail;
  if ((rc = tstor__io_torch_bind(ld->src->ctx, ck))) goto fail;
  tstor__io_free(pkl);
  tstor__io_free(order);
  *out = ck;
  return 0;
fail:
  tstor__io_free(pkl);
  tstor__io_free(order);
  tstor_checkpoint_free(ck);
  return rc;
}

/* Whether the input opens as a zip archive does (a local file header): a
 * file that does and has no end record was cut short, which libzip calls
 * "Not a zip archive". */
static bool opens_as_zip(const tstor__io_source *src) {
  uint8_t head[4] = {0};
  return src->size >= 4 && tstor__io_source_read(src, head, 4, 0, "the first bytes") == 0 &&
         memcmp(head, "PK\3\4", 4) == 0;
}

static int not_an_archive(const loader *ld, const char *name, int zerr, zip_error_t *e) {
  if (zerr == ZIP_ER_NOZIP && opens_as_zip(ld->src))
    return TSTOR__ERR(TSTOR_EINVAL,
                      "%s: truncated: it opens as a zip archive but has no end record (cut "
                      "short, or still being written)",
                      name);
  return TSTOR__ERR(TSTOR_EINVAL, "%s: not a torch.save zip archive (PyTorch 1.6 and later)%s%s",
                    name, zerr == ZIP_ER_NOENT ? "" : ": ",
                    zerr == ZIP_ER_NOENT ? "" : zip_error_strerror(e));
}

/* The archive in the source's bytes (a buffer, or the file's mapping), which
 * libzip and our reads then both see. */
static int zip_over_bytes(loader *ld) {
  zip_error_t e;
  zip_error_init(&e);
  zip_source_t *src = zip_source_buffer_create(ld->src->bytes, (size_t)ld->src->size, 0, &e);
  int rc = 0;
  if (!src) {
    rc = zip_failure(&e, "buffer");
  } else if (!(ld->z = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &e))) {
    zip_source_free(src);
    rc = not_an_archive(ld, "buffer", zip_error_code_zip(&e), &e);
  }
  zip_error_fini(&e);
  return rc;
}

/* The archive in the source's open file, for libzip through a descriptor of
 * its own: one open file, so that a path replaced meanwhile cannot give
 * libzip and our reads two different files. */
static int zip_over_fd(loader *ld, const char *path) {
  int zerr = 0, zfd = dup(ld->src->fd);
  if (zfd < 0) return TSTOR__ERR(TSTOR_EIO, "%s: %s", path, strerror(errno));
  if (!(ld->z = zip_fdopen(zfd, ZIP_CHECKCONS, &zerr))) close(zfd);
  if (ld->z) return 0;
  zip_error_t e;
  zip_error_init_with_code(&e, zerr);
  /* the file is open: libzip's "no such file" means no archive in it (as
   * for a buffer), and only a failed read is the file's fault */
  int rc = zerr == ZIP_ER_READ ? TSTOR__ERR(TSTOR_EIO, "%s: %s", path, zip_error_strerror(&e))
                               : not_an_archive(ld, path, zerr, &e);
  zip_error_fini(&e);
  return rc;
}

/* libzip's view of the archive, for a compressed record: the same number of
 * entries as the directory, or neither reading is trusted. */
static int zip_open_lazily(loader *ld) {
  if (ld->z) return 0;
  int rc = ld->src->bytes ? zip_over_bytes(ld) : zip_over_fd(ld, ld->name);
  if (!rc && (zip_uint64_t)zip_get_num_entries(ld->z, 0) != ld->ix.n)
    rc = TSTOR__ERR(TSTOR_EINVAL, "libzip finds %lld entries, the central directory %zu",
                    (long long)zip_get_num_entries(ld->z, 0), ld->ix.n);
  return rc;
}

/* The archive's directory (zip.c), its refusals worded for a torch.save
 * file: a file that opens as a zip archive and has no end record was cut
 * short. */
static int index_archive(loader *ld) {
  int rc = ld->src->bytes ? tstor__io_zip_index_read(ld->src->bytes, (size_t)ld->src->size, &ld->ix)
                          : tstor__io_zip_index_read_fd(ld->src->fd, ld->src->size, &ld->ix);
  if (rc != TSTOR_EINVAL) return rc;
  char why[256];
  snprintf(why, sizeof why, "%s", tstor_last_error());
  if (ld->ix.no_end && opens_as_zip(ld->src))
    return TSTOR__ERR(TSTOR_EINVAL,
                      "%s: truncated: it opens as a zip archive but has no end record (cut "
                      "short, or still being written)",
                      ld->name);
  return TSTOR__ERR(TSTOR_EINVAL, "%s: not a torch.save zip archive (PyTorch 1.6 and later): %s",
                    ld->name, why);
}

static void loader_close(loader *ld) {
  if (ld->z) zip_discard(ld->z);
  tstor__io_zip_index_free(&ld->ix);
  tstor__io_free(ld->prefix);
}

/* torch.load reads each of torch.save's formats, and so do we: the legacy
 * one is told by its magic number, the tar one by a tar header (as
 * tarfile.open tells it), anything else is read as a zip. */
static tstor_file_format format_of(const tstor__io_source *src) {
  uint8_t head[512];
  size_t n = src->size < sizeof head ? (size_t)src->size : sizeof head;
  if (tstor__io_source_read(src, head, n, 0, "the file's head")) return TSTOR_FORMAT_UNKNOWN;
  if (tstor__io_torch_legacy_magic(head, n, NULL)) return TSTOR_FORMAT_TORCH_LEGACY;
  return tstor__io_tar_header_ok(head, n) ? TSTOR_FORMAT_TORCH_TAR : TSTOR_FORMAT_TORCH;
}

int tstor__io_torch_load_source(tstor__io_source *src, const char *name, tstor_checkpoint **out) {
  tstor_file_format f = format_of(src);
  if (f == TSTOR_FORMAT_TORCH_LEGACY) return tstor__io_torch_legacy_load(src, out);
  if (f == TSTOR_FORMAT_TORCH_TAR) return tstor__io_torch_tar_load(src, out);
  loader ld;
  memset(&ld, 0, sizeof ld);
  ld.src = src;
  ld.name = src->bytes ? "buffer" : name;
  int rc = load(&ld, out);
  loader_close(&ld);
  return rc;
}

int tstor_torch_load(tstor_context *ctx, const char *path, const tstor_load_options *opts,
                     tstor_checkpoint **out) {
  return tstor__io_load_path(ctx, path, opts, out, "tstor_torch_load", "a torch.save file",
                             tstor__io_torch_load_source);
}

int tstor_torch_load_buffer(tstor_context *ctx, const void *data, size_t size,
                            const tstor_load_options *opts, tstor_checkpoint **out) {
  return tstor__io_load_buffer(ctx, data, size, opts, out, "tstor_torch_load_buffer",
                               tstor__io_torch_load_source);
}
