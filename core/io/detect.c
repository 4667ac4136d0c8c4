/* Telling checkpoint formats apart by their first bytes, and loading any of
 * them through one call, so that no tool guesses by a file's name or by
 * trying readers in turn (a legacy .pt read as safetensors gave a "header of
 * 5088219219985302144 bytes"). */
#include "io_internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define HEAD 512 /* the bytes that tell every format apart: a tar header's */

const char *tstor_file_format_name(tstor_file_format format) {
  switch (format) {
    case TSTOR_FORMAT_TORCH: return "torch";
    case TSTOR_FORMAT_TORCH_LEGACY: return "torch-legacy";
    case TSTOR_FORMAT_SAFETENSORS: return "safetensors";
    case TSTOR_FORMAT_TORCH7: return "torch7";
    case TSTOR_FORMAT_TORCH_TAR: return "torch-tar";
    case TSTOR_FORMAT_GGUF: return "gguf";
    default: return "unknown";
  }
}

/* safetensors: an 8-byte little-endian header length the format allows, then
 * the header's object, maybe after JSON whitespace. */
static int safetensors(const uint8_t *p, size_t n) {
  if (n < 10) return 0;
  uint64_t len = 0;
  for (int i = 7; i >= 0; i--) len = len << 8 | p[i];
  if (len < 2 || len > 100000000) return 0;
  for (size_t i = 8; i < n && i < 8 + len; i++) {
    if (p[i] == '{') return 1;
    if (p[i] != ' ' && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') return 0;
  }
  return 0;
}

/* The types a Torch7 file opens with that carry a reference index: a table
 * (3), a torch class (4), a function (7, 8: refused by the reader, which says
 * so, rather than here as "not a checkpoint"). */
static int torch7_indexed(uint32_t type) {
  return type == 3 || type == 4 || type == 7 || type == 8;
}

/* A Lua function as old Torch7 wrote it (type 6, no reference index): the
 * bytecode's length as an int, then string.dump's output, which opens with
 * ESC 'L' (LuaJIT's "\x1bLJ", Lua's "\x1bLua"); in ascii, "6\n" and the
 * length's digits on lines of their own. */
static int torch7_plain_function(const uint8_t *p, size_t n) {
  if (n >= 2 && p[0] == '6' && p[1] == '\n') {
    size_t i = 2;
    while (i < n && i < 14 && p[i] >= '0' && p[i] <= '9') i++;
    return i > 2 && i + 2 < n && p[i] == '\n' && p[i + 1] == 0x1b && p[i + 2] == 'L';
  }
  if (n < 10) return 0;
  int le = p[0] == 6 && !p[1] && !p[2] && !p[3], be = !p[0] && !p[1] && !p[2] && p[3] == 6;
  return (le || be) && p[8] == 0x1b && p[9] == 'L';
}

/* Torch7's torch.File opens with an object's type and its reference index,
 * 1: as two 4-byte ints of either byte order in a binary file, as "3\n1\n"
 * and the like in an ascii one. */
static int torch7(const uint8_t *p, size_t n) {
  if (torch7_plain_function(p, n)) return 1;
  if (n >= 4 && p[0] >= '0' && torch7_indexed((uint32_t)(p[0] - '0')) && p[1] == '\n' &&
      p[2] == '1' && p[3] == '\n')
    return 1;
  if (n < 8) return 0;
  uint32_t le = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  uint32_t be = (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
  int le_one = p[4] == 1 && !p[5] && !p[6] && !p[7], be_one = !p[4] && !p[5] && !p[6] && p[7] == 1;
  return (torch7_indexed(le) && le_one) || (torch7_indexed(be) && be_one);
}

tstor_file_format tstor_file_format_detect(const void *head, size_t size) {
  const uint8_t *p = head;
  if (!p) return TSTOR_FORMAT_UNKNOWN;
  if (size >= 4 && p[0] == 'P' && p[1] == 'K' && ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6)))
    return TSTOR_FORMAT_TORCH;
  if (size >= 4 && memcmp(p, "GGUF", 4) == 0) return TSTOR_FORMAT_GGUF;
  if (tstor__io_torch_legacy_magic(p, size, NULL)) return TSTOR_FORMAT_TORCH_LEGACY;
  if (tstor__io_tar_header_ok(p, size)) return TSTOR_FORMAT_TORCH_TAR;
  if (torch7(p, size)) return TSTOR_FORMAT_TORCH7;
  if (safetensors(p, size)) return TSTOR_FORMAT_SAFETENSORS;
  return TSTOR_FORMAT_UNKNOWN;
}

int tstor_file_format_of(const char *path, tstor_file_format *out) {
  if (!path || !out) return TSTOR__ERR(TSTOR_EINVAL, "tstor_file_format_of: NULL argument");
  *out = TSTOR_FORMAT_UNKNOWN;
  int fd;
  uint64_t size;
  int rc = tstor__io_file_open(path, &fd, &size);
  if (rc) return rc;
  uint8_t head[HEAD];
  ssize_t n = pread(fd, head, sizeof head, 0);
  close(fd);
  if (n < 0) return TSTOR__ERR(TSTOR_EIO, "%s: %s", path, strerror(errno));
  *out = tstor_file_format_detect(head, (size_t)n);
  return 0;
}

/* The format of an open source, from its first bytes. */
static tstor_file_format format_of(const tstor__io_source *src) {
  uint8_t head[HEAD];
  size_t n = src->size < sizeof head ? (size_t)src->size : sizeof head;
  return tstor__io_source_read(src, head, n, 0, "the file's head")
             ? TSTOR_FORMAT_UNKNOWN
             : tstor_file_format_detect(head, n);
}

static int load_any(tstor__io_source *src, const char *name, tstor_checkpoint **out) {
  switch (format_of(src)) {
    case TSTOR_FORMAT_TORCH:
    case TSTOR_FORMAT_TORCH_LEGACY:
    case TSTOR_FORMAT_TORCH_TAR: return tstor__io_torch_load_source(src, name, out);
    case TSTOR_FORMAT_SAFETENSORS: return tstor__io_safetensors_load_source(src, name, out);
    case TSTOR_FORMAT_TORCH7: return tstor__io_torch7_load_source(src, name, out);
    case TSTOR_FORMAT_GGUF: return tstor__io_gguf_load_source(src, name, out);
    default:
      return TSTOR__ERR(
          TSTOR_EINVAL,
          "%s: not a checkpoint tstor knows (torch.save's zip, legacy or tar format, safetensors, "
          "Torch7, GGUF)",
          name);
  }
}

/* One open of the file: its format read from the open source, which every
 * format's loader then takes (a FIFO is refused by the open, before anything
 * waits on it). */
int tstor_checkpoint_load(tstor_context *ctx, const char *path, const tstor_load_options *opts,
                          tstor_checkpoint **out) {
  return tstor__io_load_path(ctx, path, opts, out, "tstor_checkpoint_load", "a checkpoint",
                             load_any);
}

int tstor_checkpoint_load_fd(tstor_context *ctx, int fd, const tstor_load_options *opts, tstor_checkpoint **out) {
  tstor__io_source src;
  uint8_t *owned = NULL;
  char name[32];
  snprintf(name, sizeof name, "fd %d", fd);
  int rc = tstor__io_source_begin(&src, ctx, opts, out, "tstor_checkpoint_load_fd");
  if (!rc) rc = tstor__io_source_open_fd(&src, fd, &owned);
  if (!rc && !(rc = load_any(&src, name, out))) (*out)->source_bytes = src.size;
  if (rc) tstor__io_source_fail(rc, name);
  tstor__io_source_close(&src);
  tstor__io_free(owned);
  return rc;
}

int tstor_checkpoint_load_buffer(tstor_context *ctx, const void *data, size_t size, const tstor_load_options *opts,
                                 tstor_checkpoint **out) {
  return tstor__io_load_buffer(ctx, data, size, opts, out, "tstor_checkpoint_load_buffer",
                               load_any);
}

/* ---------------------------------------------------------------- saving */

/* TSTOR_ENOTSUP or TSTOR_EINVAL for a format that is not written. */
static int writable(tstor_file_format format, unsigned flags) {
  switch (format) {
    case TSTOR_FORMAT_TORCH: return flags ? TSTOR__ERR(TSTOR_EINVAL, "torch.save: unknown flags 0x%x", flags) : 0;
    case TSTOR_FORMAT_GGUF:
      return flags ? TSTOR__ERR(TSTOR_EINVAL, "GGUF save: unknown flags 0x%x", flags) : 0;
    case TSTOR_FORMAT_SAFETENSORS:
    case TSTOR_FORMAT_TORCH7: return 0;
    case TSTOR_FORMAT_TORCH_LEGACY:
    case TSTOR_FORMAT_TORCH_TAR:
      return TSTOR__ERR(TSTOR_ENOTSUP,
                        "torch.save's %s format is read, not written: save the zip format",
                        format == TSTOR_FORMAT_TORCH_TAR ? "tar" : "legacy");
    default: return TSTOR__ERR(TSTOR_EINVAL, "no format %d to save in", (int)format);
  }
}

/* The stream save, its options read. */
static int save_stream(const tstor_checkpoint *ck, FILE *f, tstor_file_format format, unsigned flags) {
  int rc = writable(format, flags);
  if (rc) return rc;
  if (format == TSTOR_FORMAT_TORCH) return tstor__io_torch_save_stream(ck, f);
  if (format == TSTOR_FORMAT_SAFETENSORS) return tstor__io_safetensors_save_stream(ck, f, flags);
  if (format == TSTOR_FORMAT_GGUF) return tstor__io_gguf_save_stream(ck, f);
  return tstor__io_torch7_save_stream(ck, f, flags);
}

int tstor_checkpoint_save_stream(const tstor_checkpoint *ck, FILE *f, tstor_file_format format,
                                 const tstor_save_options *opts) {
  if (!ck || !f) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_save_stream: NULL argument");
  unsigned flags;
  int rc = tstor__io_save_flags(opts, &flags);
  return rc ? rc : save_stream(ck, f, format, flags);
}

typedef struct save_args {
  const tstor_checkpoint *ck;
  tstor_file_format format;
  unsigned flags;
} save_args;

static int save_to(const void *arg, FILE *f) {
  const save_args *a = arg;
  return save_stream(a->ck, f, a->format, a->flags);
}

int tstor_checkpoint_save(const tstor_checkpoint *ck, const char *path, tstor_file_format format,
                          const tstor_save_options *opts) {
  if (!ck || !path) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_save: NULL argument");
  unsigned flags;
  int rc = tstor__io_save_flags(opts, &flags);
  if (rc == 0) rc = writable(format, flags);
  if (rc) return rc;
  save_args a = {ck, format, flags};
  return tstor__io_save_atomically(path, save_to, &a);
}

int tstor_checkpoint_save_buffer(const tstor_checkpoint *ck, tstor_file_format format,
                                 const tstor_save_options *opts, void **data, size_t *size) {
  if (data) *data = NULL;
  if (!data || !size) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_save_buffer: NULL argument");
  *data = NULL;
  *size = 0;
  if (!ck) return TSTOR__ERR(TSTOR_EINVAL, "tstor_checkpoint_save_buffer: NULL argument");
  unsigned flags;
  int rc = tstor__io_save_flags(opts, &flags);
  if (rc == 0) rc = writable(format, flags);
  if (rc) return rc;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return TSTOR__ERR(TSTOR_ENOMEM, "tstor_checkpoint_save_buffer: %s", strerror(errno));
  rc = save_stream(ck, f, format, flags);
  if (fclose(f) != 0 && !rc) rc = TSTOR__ERR(TSTOR_ENOMEM, "tstor_checkpoint_save_buffer: %s", strerror(errno));
  if (rc) {
    free(buf); /* open_memstream's */
    return rc;
  }
  *data = buf;
  *size = len;
  return 0;
}
