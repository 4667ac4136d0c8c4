/* The records of a zip archive (PKWARE's APPNOTE.TXT, section 4.3), one list
 * of fields each, which the reader (zip.c) and the writer (zip_write.c) both
 * come from, as pickle.h's opcodes are: X(FIELD, bytes), in the record's
 * order, every field little-endian. Each list gives an enum of its fields
 * (ZIP_<FIELD>, then ZIP_<RECORD>_N fields and ZIP_<RECORD>_LEN bytes) and a
 * layout (tstor__io_zip_<record>) that reads or writes them in one call. */
#ifndef TSTOR_IO_ZIP_FORMAT_H
#define TSTOR_IO_ZIP_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* The local header before each entry's data (4.3.7). */
#define TSTOR__ZIP_LOCAL(X) \
  X(LOC_SIG, 4)             \
  X(LOC_NEEDED, 2)          \
  X(LOC_FLAGS, 2)           \
  X(LOC_METHOD, 2)          \
  X(LOC_TIME, 2)            \
  X(LOC_DATE, 2)            \
  X(LOC_CRC, 4)             \
  X(LOC_COMP_SIZE, 4)       \
  X(LOC_SIZE, 4)            \
  X(LOC_NAME_LEN, 2)        \
  X(LOC_EXTRA_LEN, 2)

/* An entry of the central directory (4.3.12). */
#define TSTOR__ZIP_CENTRAL(X) \
  X(CEN_SIG, 4)               \
  X(CEN_MADE_BY, 2)           \
  X(CEN_NEEDED, 2)            \
  X(CEN_FLAGS, 2)             \
  X(CEN_METHOD, 2)            \
  X(CEN_TIME, 2)              \
  X(CEN_DATE, 2)              \
  X(CEN_CRC, 4)               \
  X(CEN_COMP_SIZE, 4)         \
  X(CEN_SIZE, 4)              \
  X(CEN_NAME_LEN, 2)          \
  X(CEN_EXTRA_LEN, 2)         \
  X(CEN_COMMENT_LEN, 2)       \
  X(CEN_DISK, 2)              \
  X(CEN_INT_ATTR, 2)          \
  X(CEN_EXT_ATTR, 4)          \
  X(CEN_LOCAL_OFFSET, 4)

/* The zip64 end of central directory record (4.3.14). */
#define TSTOR__ZIP_END64(X) \
  X(E64_SIG, 4)             \
  X(E64_REST_LEN, 8)        \
  X(E64_MADE_BY, 2)         \
  X(E64_NEEDED, 2)          \
  X(E64_DISK, 4)            \
  X(E64_CD_DISK, 4)         \
  X(E64_DISK_ENTRIES, 8)    \
  X(E64_ENTRIES, 8)         \
  X(E64_CD_SIZE, 8)         \
  X(E64_CD_OFFSET, 8)

/* The zip64 end of central directory locator, just before the end record (4.3.15). */
#define TSTOR__ZIP_LOCATOR(X) \
  X(LOC64_SIG, 4)             \
  X(LOC64_DISK, 4)            \
  X(LOC64_END64, 8)           \
  X(LOC64_DISKS, 4)

/* The end of central directory record, last but for its comment (4.3.16). */
#define TSTOR__ZIP_END(X) \
  X(END_SIG, 4)           \
  X(END_DISK, 2)          \
  X(END_CD_DISK, 2)       \
  X(END_DISK_ENTRIES, 2)  \
  X(END_ENTRIES, 2)       \
  X(END_CD_SIZE, 4)       \
  X(END_CD_OFFSET, 4)     \
  X(END_COMMENT_LEN, 2)

/* Each record's enum: its fields, then how many (_N) and its bytes (_LEN). */
#define TSTOR__ZIP_FIELD(name, bytes) ZIP_##name,
#define TSTOR__ZIP_BYTES(name, bytes) +(bytes)
#define TSTOR__ZIP_RECORD(REC)                             \
  enum {                                                   \
    TSTOR__ZIP_##REC(TSTOR__ZIP_FIELD) ZIP_##REC##_N,      \
    ZIP_##REC##_LEN = 0 TSTOR__ZIP_##REC(TSTOR__ZIP_BYTES) \
  }
TSTOR__ZIP_RECORD(LOCAL);
TSTOR__ZIP_RECORD(CENTRAL);
TSTOR__ZIP_RECORD(END64);
TSTOR__ZIP_RECORD(LOCATOR);
TSTOR__ZIP_RECORD(END);

/* Each record's signature, its first field. */
enum {
  ZIP_LOCAL_MAGIC = 0x04034b50,
  ZIP_CENTRAL_MAGIC = 0x02014b50,
  ZIP_END64_MAGIC = 0x06064b50,
  ZIP_LOCATOR_MAGIC = 0x07064b50,
  ZIP_END_MAGIC = 0x06054b50
};

/* A 32-bit size or offset that says "in the zip64 extra field" (a count of
 * entries: 0xFFFF). */
#define ZIP_SAT32 0xFFFFFFFFu
#define ZIP_SAT16 0xFFFFu
/* The extra fields' ids: zip64's, and the padding PyTorch's writer adds. */
enum { ZIP_EXTRA_ZIP64 = 0x0001, ZIP_EXTRA_PAD = 0x4246 };

/* A record's fields' widths, in order. */
typedef struct tstor__io_zip_layout {
  size_t n;
  uint8_t bytes[ZIP_CENTRAL_N]; /* the longest list's */
} tstor__io_zip_layout;

extern const tstor__io_zip_layout tstor__io_zip_local, tstor__io_zip_central, tstor__io_zip_end64,
    tstor__io_zip_locator, tstor__io_zip_end;

#endif
