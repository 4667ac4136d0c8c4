/* Writing zip archives as PyTorch's writer lays them out: every entry stored
 * (uncompressed), its data 64-byte aligned by padding the local header's
 * extra field, and the zip64 end records always present.
 *
 * libzip writes archives too, but it decides where each entry's data lands
 * and offers no way to align it; records that tstor (and PyTorch's mmap
 * loader) map straight from the file need aligned data, so the few records
 * of this layout are written here. */
#include "io_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void le16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void le32(uint8_t *p, uint32_t v) {
  le16(p, (uint16_t)v);
  le16(p + 2, (uint16_t)(v >> 16));
}
static void le64(uint8_t *p, uint64_t v) {
  le32(p, (uint32_t)v);
  le32(p + 4, (uint32_t)(v >> 32));
}

static int put(tstor__io_zip_writer *w, const void *p, size_t n) {
  if (n && fwrite(p, 1, n, w->f) != n)
    return TSTOR__ERR(tstor_errno_code(errno), "writing the archive: %s",
                      strerror(errno));
  w->off += n;
  return 0;
}

int tstor__io_zipw_begin(tstor__io_zip_writer *w, const char *name, uint64_t size, uint32_t crc) {
  tstor__io_zipw_entry *grown = tstor__io_grow(w->e, &w->cap, w->n, sizeof *grown, 16,
                                               "out of memory for the archive's directory");
  if (!grown) return TSTOR_ENOMEM;
  w->e = grown;
  size_t nlen = strlen(name);
  if (nlen > 0xFFFF) return TSTOR__ERR(TSTOR_EINVAL, "record name of %zu bytes", nlen);
  tstor__io_zipw_entry *e = &w->e[w->n];
  e->name = tstor__io_strdup(name);
  if (!e->name) return TSTOR__ERR(TSTOR_ENOMEM, "out of memory");
  e->offset = w->off;
  e->size = size;
  e->crc = crc;
  w->n++;
  int big = size >= 0xFFFFFFFFu;
  /* local header, a zip64 extra for large entries, then the padding that
   * puts the data at a multiple of 64 (PyTorch's "FB" extra field) */
  uint8_t h[30 + 20];
  size_t x64 = big ? 20 : 0;
  uint64_t data_at = w->off + 30 + nlen + x64;
  size_t pad = (size_t)((64 - (data_at + 4) % 64) % 64);
  le32(h, 0x04034b50);
  le16(h + 4, big ? 45 : 20);
  le16(h + 6, 0);
  le16(h + 8, 0);                        /* stored */
  le16(h + 10, 0);                       /* time */
  le16(h + 12, 0x21);                    /* date: 1980-01-01 */
  le32(h + 14, crc);
  le32(h + 18, big ? 0xFFFFFFFFu : (uint32_t)size);
  le32(h + 22, big ? 0xFFFFFFFFu : (uint32_t)size);
  le16(h + 26, (uint16_t)nlen);
  le16(h + 28, (uint16_t)(x64 + 4 + pad));
  int rc = put(w, h, 30);
  if (!rc) rc = put(w, name, nlen);
  if (!rc && big) {
    le16(h, 0x0001);
    le16(h + 2, 16);
    le64(h + 4, size);
    le64(h + 12, size);
    rc = put(w, h, 20);
  }
  if (!rc) {
    uint8_t fb[4 + 64] = {0};
    le16(fb, 0x4246);
    le16(fb + 2, (uint16_t)pad);
    rc = put(w, fb, 4 + pad);
  }
  return rc;
}

int tstor__io_zipw_data(tstor__io_zip_writer *w, const void *p, size_t n) { return put(w, p, n); }

int tstor__io_zipw_finish(tstor__io_zip_writer *w) {
  uint64_t cd_start = w->off;
  int rc = 0;
  for (size_t i = 0; i < w->n && !rc; i++) {
    const tstor__io_zipw_entry *e = &w->e[i];
    size_t nlen = strlen(e->name);
    int big_size = e->size >= 0xFFFFFFFFu, big_off = e->offset >= 0xFFFFFFFFu;
    uint16_t x64 = (uint16_t)((big_size ? 16 : 0) + (big_off ? 8 : 0));
    uint8_t h[46 + 28];
    le32(h, 0x02014b50);
    le16(h + 4, 45);
    le16(h + 6, x64 ? 45 : 20);
    le16(h + 8, 0);
    le16(h + 10, 0);
    le16(h + 12, 0);
    le16(h + 14, 0x21);
    le32(h + 16, e->crc);
    le32(h + 20, big_size ? 0xFFFFFFFFu : (uint32_t)e->size);
    le32(h + 24, big_size ? 0xFFFFFFFFu : (uint32_t)e->size);
    le16(h + 28, (uint16_t)nlen);
    le16(h + 30, x64 ? (uint16_t)(4 + x64) : 0);
    le16(h + 32, 0);
    le16(h + 34, 0);
    le16(h + 36, 0);
    le32(h + 38, 0);
    le32(h + 42, big_off ? 0xFFFFFFFFu : (uint32_t)e->offset);
    rc = put(w, h, 46);
    if (!rc) rc = put(w, e->name, nlen);
    if (!rc && x64) {
      uint8_t x[28];
      size_t k = 4;
      le16(x, 0x0001);
      le16(x + 2, x64);
      if (big_size) {
        le64(x + k, e->size);
        le64(x + k + 8, e->size);
        k += 16;
      }
      if (big_off) {
        le64(x + k, e->offset);
        k += 8;
      }
      rc = put(w, x, k);
    }
  }
  if (rc) return rc;
  uint64_t cd_size = w->off - cd_start, e64 = w->off;
  uint8_t t[56 + 20 + 22];
  le32(t, 0x06064b50); /* zip64 end of central directory */
  le64(t + 4, 44);
  le16(t + 12, 45);
  le16(t + 14, 45);
  le32(t + 16, 0);
  le32(t + 20, 0);
  le64(t + 24, w->n);
  le64(t + 32, w->n);
  le64(t + 40, cd_size);
  le64(t + 48, cd_start);
  le32(t + 56, 0x07064b50); /* its locator */
  le32(t + 60, 0);
  le64(t + 64, e64);
  le32(t + 72, 1);
  uint8_t *d = t + 76; /* end of central directory */
  le32(d, 0x06054b50);
  le16(d + 4, 0);
  le16(d + 6, 0);
  le16(d + 8, w->n >= 0xFFFF ? 0xFFFF : (uint16_t)w->n);
  le16(d + 10, w->n >= 0xFFFF ? 0xFFFF : (uint16_t)w->n);
  le32(d + 12, cd_size >= 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)cd_size);
  le32(d + 16, cd_start >= 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)cd_start);
  le16(d + 20, 0);
  rc = put(w, t, sizeof t);
  if (!rc && fflush(w->f) != 0)
    rc = TSTOR__ERR(tstor_errno_code(errno), "writing the archive: %s", strerror(errno));
  return rc;
}

void tstor__io_zipw_free(tstor__io_zip_writer *w) {
  for (size_t i = 0; i < w->n; i++) tstor__io_free(w->e[i].name);
  tstor__io_free(w->e);
  memset(w, 0, sizeof *w);
}
