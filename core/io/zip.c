/* Where each entry's bytes lie in a zip archive, in memory or in a file, and
 * what each entry is called.
 *
 * libzip inflates and checks archives for us (torch_load.c), but it exposes
 * no entry's data offset, which reading or mapping a storage straight from
 * the file needs, and its names are not the raw ones torch.load reads (it
 * applies the Info-ZIP Unicode Path extra field). So this file reads the
 * central directory (zip64 included) and each local header, strictly: every
 * count, size and offset is checked against the archive before it is used;
 * torch_load.c finds every entry here by its raw name and cross-checks what
 * libzip says about it. On failure the caller still frees the index
 * (tstor__io_zip_index_free). */
#include "io_internal.h"

#include <stdlib.h>
#include <string.h>

static uint16_t u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t u64(const uint8_t *p) { return u32(p) | (uint64_t)u32(p + 4) << 32; }

#define BAD(...) TSTOR__ERR(TSTOR_EINVAL, "zip: " __VA_ARGS__)

/* Reads the zip64 extra field of a central directory entry: the values whose
 * 32-bit fields hold 0xFFFFFFFF follow in order (size, compressed, offset). */
static int zip64_extra(const uint8_t *extra, size_t len, uint64_t *size, uint64_t *csize,
                       uint64_t *offset) {
  size_t i = 0;
  while (len - i >= 4) {
    uint16_t id = u16(extra + i), n = u16(extra + i + 2);
    if (n > len - i - 4) return BAD("an extra field runs past its entry");
    if (id == 0x0001) {
      const uint8_t *p = extra + i + 4, *end = p + n;
      uint64_t *fields[3] = {size, csize, offset};
      for (int f = 0; f < 3; f++) {
        if (*fields[f] != 0xFFFFFFFFu) continue;
        if (end - p < 8) return BAD("a zip64 extra field is too short");
        *fields[f] = u64(p);
        p += 8;
      }
      return 0;
    }
    i += 4 + (size_t)n;
  }
  if (*size == 0xFFFFFFFFu || *csize == 0xFFFFFFFFu || *offset == 0xFFFFFFFFu)
    return BAD("an entry needs a zip64 extra field and has none");
  return 0;
}

static int by_header_offset(const void *a, const void *b) {
  const tstor__io_zip_entry *x = *(const tstor__io_zip_entry *const *)a,
                            *y = *(const tstor__io_zip_entry *const *)b;
  return x->header_offset < y->header_offset ? -1 : x->header_offset > y->header_offset;
}

/* Refuses entries whose bytes (local header to the end of the data) share a
 * byte: two records over the same bytes would load as storages that alias
 * each other, where torch.load gives independent ones. */
static int no_overlap(const tstor__io_zip_index *ix) {
  if (ix->n < 2) return 0;
  const tstor__io_zip_entry **order = tstor__io_malloc(ix->n * sizeof *order);
  if (!order) return TSTOR__ERR(TSTOR_ENOMEM, "zip: out of memory for %zu entries", ix->n);
  for (size_t i = 0; i < ix->n; i++) order[i] = &ix->entries[i];
  qsort(order, ix->n, sizeof *order, by_header_offset);
  int rc = 0;
  for (size_t i = 1; i < ix->n && !rc; i++) {
    const tstor__io_zip_entry *a = order[i - 1], *b = order[i];
    if (b->header_offset < a->data_offset + a->comp_size)
      rc = BAD("entries '%.*s' and '%.*s' overlap in the archive", (int)a->name_len, a->name,
               (int)b->name_len, b->name);
  }
  tstor__io_free(order);
  return rc;
}

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen) {
  int c = memcmp(a, b, alen < blen ? alen : blen);
  return c ? c : (alen > blen) - (alen < blen);
}

static int by_name(const void *a, const void *b) {
  const tstor__io_zip_entry *x = *(const tstor__io_zip_entry *const *)a,
                            *y = *(const tstor__io_zip_entry *const *)b;
  return name_cmp(x->name, x->name_len, y->name, y->name_len);
}

/* Lookups by name go by binary search: one scan per storage made loading
 * 50,000 tensors quadratic. */
static int sort_by_name(tstor__io_zip_index *ix) {
  ix->by_name = tstor__io_malloc((ix->n ? ix->n : 1) * sizeof *ix->by_name);
  if (!ix->by_name) return TSTOR__ERR(TSTOR_ENOMEM, "zip: out of memory for %zu entries", ix->n);
  for (size_t i = 0; i < ix->n; i++) ix->by_name[i] = &ix->entries[i];
  qsort(ix->by_name, ix->n, sizeof *ix->by_name, by_name);
  /* Two entries of one name would let two readers pick different ones. */
  for (size_t i = 1; i < ix->n; i++)
    if (by_name(&ix->by_name[i - 1], &ix->by_name[i]) == 0)
      return BAD("entry '%.*s' appears twice", (int)ix->by_name[i]->name_len, ix->by_name[i]->name);
  return 0;
}

/* Where the archive's bytes come from: memory, or a file read with pread. */
typedef struct zip_src {
  const uint8_t *bytes; /* the whole archive, or NULL */
  int fd;               /* with bytes NULL */
  uint64_t size;
} zip_src;

/* The len bytes at off, which the caller has checked lie in the archive:
 * where they are in memory, or read into `into`. */
static int fetch(const zip_src *s, uint64_t off, size_t len, uint8_t *into, const uint8_t **out) {
  if (s->bytes) {
    *out = s->bytes + off;
    return 0;
  }
  *out = into;
  return tstor__io_pread_full(s->fd, into, len, off, "zip directory");
}

/* The end of the archive, where the end of central directory record and the
 * zip64 locator before it are searched for: the record's 22 bytes, a comment
 * of up to 65535 and the 20-byte locator. */
#define TAIL_MAX (22u + 65535u + 20u)

static int index_read(const zip_src *s, tstor__io_zip_index *out) {
  const uint64_t size = s->size;
  uint8_t *tail_buf = NULL, *name_buf = NULL, e64_buf[56], lh_buf[30];
  const uint8_t *tail, *e64p, *lh, *lname;
  int rc = 0;
  memset(out, 0, sizeof *out);
  if (size < 22) return BAD("%llu bytes are too few for an archive", (unsigned long long)size);
  const size_t tail_len = size < TAIL_MAX ? (size_t)size : TAIL_MAX;
  const uint64_t tail_off = size - tail_len;
  if (!s->bytes && !(tail_buf = tstor__io_malloc(tail_len))) return TSTOR__ERR(TSTOR_ENOMEM, "zip: out of memory");
  if ((rc = fetch(s, tail_off, tail_len, tail_buf, &tail))) goto out;
#define AT_TAIL(off) (tail + ((off) - tail_off))
  /* the end of central directory record: the last one, before a comment */
  uint64_t eocd = size - 22, stop = size - 22 > 65535 ? size - 22 - 65535 : 0;
  for (;; eocd--) {
    if (u32(AT_TAIL(eocd)) == 0x06054b50 && u16(AT_TAIL(eocd) + 20) == size - eocd - 22) break;
    if (eocd == stop) {
      rc = BAD("no end of central directory record (not a zip archive)");
      goto out;
    }
  }
  uint64_t count = u16(AT_TAIL(eocd) + 10), cd_size = u32(AT_TAIL(eocd) + 12), cd_off = u32(AT_TAIL(eocd) + 16);
  if (u16(AT_TAIL(eocd) + 4) != 0 || u16(AT_TAIL(eocd) + 6) != 0) {
    rc = BAD("multi-disk archives are not supported");
    goto out;
  }
  uint64_t cd_end_limit = eocd;
  /* A zip64 locator before the record makes its values the real ones, as in
   * libzip (PyTorch's writer always adds the zip64 records). */
  int has64 = eocd >= tail_off + 20 && u32(AT_TAIL(eocd - 20)) == 0x07064b50;
  if (has64 || count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
    if (!has64) {
      rc = BAD("zip64 locator missing");
      goto out;
    }
    uint64_t e64 = u64(AT_TAIL(eocd - 20) + 8);
    if (e64 > eocd - 20 || eocd - 20 - e64 < 56 || (rc = fetch(s, e64, 56, e64_buf, &e64p)) ||
        u32(e64p) != 0x06064b50) {
      if (!rc) rc = BAD("zip64 end of central directory record missing or misplaced");
      goto out;
    }
    count = u64(e64p + 32);
    cd_size = u64(e64p + 40);
    cd_off = u64(e64p + 48);
    cd_end_limit = e64;
  }
#undef AT_TAIL
  if (cd_off > cd_end_limit || cd_size > cd_end_limit - cd_off) {
    rc = BAD("central directory (%llu bytes at %llu) outside the archive", (unsigned long long)cd_size,
             (unsigned long long)cd_off);
    goto out;
  }
  if (count > cd_size / 46) {
    rc = BAD("%llu entries cannot fit a %llu-byte central directory", (unsigned long long)count,
             (unsigned long long)cd_size);
    goto out;
  }
  /* Read from a file, the directory stays: the entries' names point into it. */
  if (!s->bytes && (!(out->directory = tstor__io_malloc(cd_size ? (size_t)cd_size : 1)) ||
                    !(name_buf = tstor__io_malloc(65535)))) {
    rc = TSTOR__ERR(TSTOR_ENOMEM, "zip: out of memory for a %llu-byte directory", (unsigned long long)cd_size);
    goto out;
  }
  const uint8_t *p, *end;
  if ((rc = fetch(s, cd_off, (size_t)cd_size, out->directory, &p))) goto out;
  end = p + cd_size;
  out->entries = tstor__io_calloc(count ? (size_t)count : 1, sizeof *out->entries);
  if (!out->entries) {
    rc = TSTOR__ERR(TSTOR_ENOMEM, "zip: out of memory for %llu entries", (unsigned long long)count);
    goto out;
  }
  for (uint64_t i = 0; i < count; i++) {
    if (end - p < 46 || u32(p) != 0x02014b50) goto bad_cd;
    size_t nlen = u16(p + 28), xlen = u16(p + 30), clen = u16(p + 32);
    if ((size_t)(end - p) - 46 < nlen + xlen + clen) goto bad_cd;
    tstor__io_zip_entry *e = &out->entries[i];
    uint16_t flags = u16(p + 8);
    e->method = u16(p + 10);
    e->crc = u32(p + 16);
    e->comp_size = u32(p + 20);
    e->size = u32(p + 24);
    uint64_t loc = u32(p + 42);
    e->name = (const char *)p + 46;
    e->name_len = nlen;
    out->n = (size_t)i + 1;
    if ((rc = zip64_extra(p + 46 + nlen, xlen, &e->size, &e->comp_size, &loc))) goto out;
    if (flags & 1) {
      rc = BAD("entry '%.*s' is encrypted", (int)nlen, e->name);
      goto out;
    }
    /* the local header: its own name and extra lengths decide where data starts */
    if (loc > size || size - loc < 30 || (rc = fetch(s, loc, 30, lh_buf, &lh)) || u32(lh) != 0x04034b50) {
      if (!rc) rc = BAD("entry '%.*s': no local header at offset %llu", (int)nlen, e->name, (unsigned long long)loc);
      goto out;
    }
    size_t lnlen = u16(lh + 26), lxlen = u16(lh + 28);
    if (size - loc - 30 < lnlen + lxlen) {
      rc = BAD("entry '%.*s': local header past the end", (int)nlen, e->name);
      goto out;
    }
    if (lnlen != nlen || (rc = fetch(s, loc + 30, nlen, name_buf, &lname)) || memcmp(lname, e->name, nlen) != 0) {
      if (!rc) rc = BAD("entry '%.*s': the local header names another file", (int)nlen, e->name);
      goto out;
    }
    e->header_offset = loc;
    e->data_offset = loc + 30 + lnlen + lxlen;
    if (e->comp_size > size - e->data_offset) {
      rc = BAD("entry '%.*s': %llu bytes at offset %llu run past the archive's %llu", (int)nlen, e->name,
               (unsigned long long)e->comp_size, (unsigned long long)e->data_offset, (unsigned long long)size);
      goto out;
    }
    if (e->method == 0 && e->comp_size != e->size) {
      rc = BAD("entry '%.*s' is stored with %llu bytes but claims %llu", (int)nlen, e->name,
               (unsigned long long)e->comp_size, (unsigned long long)e->size);
      goto out;
    }
    p += 46 + nlen + xlen + clen;
  }
  if (!(rc = no_overlap(out))) rc = sort_by_name(out);
  goto out;
bad_cd:
  rc = BAD("central directory entry %zu is malformed", out->n);
out:
  tstor__io_free(tail_buf);
  tstor__io_free(name_buf);
  return rc;
}

int tstor__io_zip_index_read(const uint8_t *data, size_t size, tstor__io_zip_index *out) {
  zip_src s = {data, -1, size};
  return index_read(&s, out);
}

int tstor__io_zip_index_read_fd(int fd, uint64_t size, tstor__io_zip_index *out) {
  zip_src s = {NULL, fd, size};
  return index_read(&s, out);
}

void tstor__io_zip_index_free(tstor__io_zip_index *ix) {
  tstor__io_free(ix->entries);
  tstor__io_free(ix->by_name);
  tstor__io_free(ix->directory);
  ix->entries = NULL;
  ix->by_name = NULL;
  ix->directory = NULL;
  ix->n = 0;
}

const tstor__io_zip_entry *tstor__io_zip_find(const tstor__io_zip_index *ix, const char *name) {
  size_t len = strlen(name), lo = 0, hi = ix->by_name ? ix->n : 0;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const tstor__io_zip_entry *e = ix->by_name[mid];
    if (name_cmp(e->name, e->name_len, name, len) < 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo < (ix->by_name ? ix->n : 0) && name_cmp(ix->by_name[lo]->name, ix->by_name[lo]->name_len, name, len) == 0)
    return ix->by_name[lo];
  return NULL;
}
