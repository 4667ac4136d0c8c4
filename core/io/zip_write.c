/* Writing zip archives as PyTorch's writer lays them out: every entry stored
 * (uncompressed), its data 64-byte aligned by padding the local header's
 * extra field, and the zip64 end records always present. The records are
 * zip_format.h's, which the reader reads.
 *
 * libzip writes archives too, but it decides where each entry's data lands
 * and offers no way to align it; records that tstor (and PyTorch's mmap
 * loader) map straight from the file need aligned data, so the few records
 * of this layout are written here. */
#include "io_internal.h"
#include "zip_format.h"

#include <string.h>

#define VERSION_ZIP64 45 /* the version needed to extract zip64 records */
#define VERSION_PLAIN 20
#define DATE_1980 0x21 /* 1980-01-01, time 0: archives do not change with the clock */

/* The fields v of a record of layout r. */
static void put_record(tstor__io_fwriter *out, const tstor__io_zip_layout *r, const uint64_t *v) {
  for (size_t i = 0; i < r->n; i++) tstor__io_fw_uint(out, v[i], r->bytes[i]);
}

void tstor__io_zipw_init(tstor__io_zip_writer *w, FILE *f) {
  memset(w, 0, sizeof *w);
  w->out = (tstor__io_fwriter)TSTOR__FWRITER_INIT(f, "the archive");
}

/* An entry for the central directory, written at the current offset. */
static bool add_entry(tstor__io_zip_writer *w, const char *name, uint64_t size, uint32_t crc) {
  if (strlen(name) > 0xFFFF) {
    tstor__io_fw_fail(&w->out, TSTOR_EINVAL, "record name of %zu bytes", strlen(name));
    return false;
  }
  tstor__io_zipw_entry *grown = tstor__io_grow(w->e, &w->cap, w->n, sizeof *grown, 16,
                                               "out of memory for the archive's directory");
  char *copy = grown ? tstor__io_strdup(name) : NULL;
  if (grown) w->e = grown;
  if (!copy) {
    tstor__io_fw_fail(&w->out, TSTOR_ENOMEM, "out of memory for the archive's directory");
    return false;
  }
  w->e[w->n++] = (tstor__io_zipw_entry){copy, w->out.off, size, crc};
  return true;
}

void tstor__io_zipw_begin(tstor__io_zip_writer *w, const char *name, uint64_t size, uint32_t crc) {
  if (!tstor__io_fw_ok(&w->out) || !add_entry(w, name, size, crc)) return;
  /* the local header, a zip64 extra for large entries, then the padding
   * that puts the data at a multiple of 64 (PyTorch's "FB" extra field) */
  const size_t nlen = strlen(name), x64 = size >= ZIP_SAT32 ? 20 : 0;
  const uint64_t data_at = w->out.off + ZIP_LOCAL_LEN + nlen + x64;
  const size_t pad = (size_t)((64 - (data_at + 4) % 64) % 64);
  const uint64_t sz = x64 ? ZIP_SAT32 : size;
  const uint64_t h[ZIP_LOCAL_N] = {
      [ZIP_LOC_SIG] = ZIP_LOCAL_MAGIC, [ZIP_LOC_NEEDED] = x64 ? VERSION_ZIP64 : VERSION_PLAIN,
      [ZIP_LOC_DATE] = DATE_1980,      [ZIP_LOC_CRC] = crc,
      [ZIP_LOC_COMP_SIZE] = sz,        [ZIP_LOC_SIZE] = sz,
      [ZIP_LOC_NAME_LEN] = nlen,       [ZIP_LOC_EXTRA_LEN] = x64 + 4 + pad};
  static const uint8_t zeros[64];
  put_record(&w->out, &tstor__io_zip_local, h);
  tstor__io_fw_append(&w->out, name, nlen);
  if (x64) {
    tstor__io_fw_uint(&w->out, ZIP_EXTRA_ZIP64, 2);
    tstor__io_fw_uint(&w->out, 16, 2);
    tstor__io_fw_uint(&w->out, size, 8);
    tstor__io_fw_uint(&w->out, size, 8);
  }
  tstor__io_fw_uint(&w->out, ZIP_EXTRA_PAD, 2);
  tstor__io_fw_uint(&w->out, pad, 2);
  tstor__io_fw_append(&w->out, zeros, pad);
}

/* Entry e in the central directory, with a zip64 extra field for what its
 * 32-bit fields cannot hold. */
static void put_central_entry(tstor__io_fwriter *out, const tstor__io_zipw_entry *e) {
  const size_t nlen = strlen(e->name);
  const bool big_size = e->size >= ZIP_SAT32, big_off = e->offset >= ZIP_SAT32;
  const uint64_t x64 = (big_size ? 16 : 0) + (big_off ? 8 : 0), sz = big_size ? ZIP_SAT32 : e->size;
  const uint64_t h[ZIP_CENTRAL_N] = {[ZIP_CEN_SIG] = ZIP_CENTRAL_MAGIC,
                                     [ZIP_CEN_MADE_BY] = VERSION_ZIP64,
                                     [ZIP_CEN_NEEDED] = x64 ? VERSION_ZIP64 : VERSION_PLAIN,
                                     [ZIP_CEN_DATE] = DATE_1980,
                                     [ZIP_CEN_CRC] = e->crc,
                                     [ZIP_CEN_COMP_SIZE] = sz,
                                     [ZIP_CEN_SIZE] = sz,
                                     [ZIP_CEN_NAME_LEN] = nlen,
                                     [ZIP_CEN_EXTRA_LEN] = x64 ? 4 + x64 : 0,
                                     [ZIP_CEN_LOCAL_OFFSET] = big_off ? ZIP_SAT32 : e->offset};
  put_record(out, &tstor__io_zip_central, h);
  tstor__io_fw_append(out, e->name, nlen);
  if (!x64) return;
  tstor__io_fw_uint(out, ZIP_EXTRA_ZIP64, 2);
  tstor__io_fw_uint(out, x64, 2);
  if (big_size) {
    tstor__io_fw_uint(out, e->size, 8);
    tstor__io_fw_uint(out, e->size, 8);
  }
  if (big_off) tstor__io_fw_uint(out, e->offset, 8);
}

/* The zip64 end record, its locator and the end record, after the
 * directory of cd_size bytes at cd_start, of n entries. */
static void put_end_records(tstor__io_fwriter *out, uint64_t cd_start, uint64_t cd_size,
                            uint64_t n) {
  const uint64_t end64_at = out->off, n16 = n >= ZIP_SAT16 ? ZIP_SAT16 : n;
  const uint64_t end64[ZIP_END64_N] = {
      [ZIP_E64_SIG] = ZIP_END64_MAGIC,   [ZIP_E64_REST_LEN] = ZIP_END64_LEN - 12,
      [ZIP_E64_MADE_BY] = VERSION_ZIP64, [ZIP_E64_NEEDED] = VERSION_ZIP64,
      [ZIP_E64_DISK_ENTRIES] = n,        [ZIP_E64_ENTRIES] = n,
      [ZIP_E64_CD_SIZE] = cd_size,       [ZIP_E64_CD_OFFSET] = cd_start};
  const uint64_t locator[ZIP_LOCATOR_N] = {
      [ZIP_LOC64_SIG] = ZIP_LOCATOR_MAGIC, [ZIP_LOC64_END64] = end64_at, [ZIP_LOC64_DISKS] = 1};
  const uint64_t end[ZIP_END_N] = {
      [ZIP_END_SIG] = ZIP_END_MAGIC,
      [ZIP_END_DISK_ENTRIES] = n16,
      [ZIP_END_ENTRIES] = n16,
      [ZIP_END_CD_SIZE] = cd_size >= ZIP_SAT32 ? ZIP_SAT32 : cd_size,
      [ZIP_END_CD_OFFSET] = cd_start >= ZIP_SAT32 ? ZIP_SAT32 : cd_start};
  put_record(out, &tstor__io_zip_end64, end64);
  put_record(out, &tstor__io_zip_locator, locator);
  put_record(out, &tstor__io_zip_end, end);
}

int tstor__io_zipw_finish(tstor__io_zip_writer *w) {
  const uint64_t cd_start = w->out.off;
  for (size_t i = 0; i < w->n && tstor__io_fw_ok(&w->out); i++)
    put_central_entry(&w->out, &w->e[i]);
  put_end_records(&w->out, cd_start, w->out.off - cd_start, w->n);
  tstor__io_fw_flush(&w->out);
  return tstor__io_fw_finish(&w->out);
}

void tstor__io_zipw_free(tstor__io_zip_writer *w) {
  for (size_t i = 0; i < w->n; i++) tstor__io_free(w->e[i].name);
  tstor__io_free(w->e);
  memset(w, 0, sizeof *w);
}
