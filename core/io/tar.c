/* tar archives as Python's tarfile reads them (TarFile.next, TarInfo.frombuf
 * and its _proc_* methods), for torch.save's first format: PyTorch 0.1
 * wrote its members with tarfile.PAX_FORMAT, and torch.load finds them
 * with tarfile still, so an archive holds what tarfile says it holds.
 *
 * An archive is a run of 512-byte blocks: a header, then the member's bytes
 * padded to a whole block, then the next header. A header's numbers are
 * octal text (or GNU's base-256) and its checksum must match; extension
 * headers before it may replace its name and size: a PAX extended header
 * ('x', records "LEN key=value\n", of which path and size count here; the
 * writer adds one for every member, for its mtime) and a GNU long name
 * ('L'). The outermost extension wins, as in tarfile's recursion. The
 * archive ends at a block of zeros, at the end of the file, or at the first
 * block that is no header (tarfile stops there without a word, unless it is
 * the first); a member whose bytes run past the end of the file is refused,
 * as tarfile refuses it.
 *
 * Refused where tarfile reads on, none of which torch.save wrote: global
 * PAX headers and GNU sparse members (both change what later members hold),
 * a PAX header over 1 MiB, more than 64 extension headers in a row (tarfile
 * recurses through them until Python's stack runs out) and negative sizes
 * (with which tarfile steps backwards, and may read one header forever).
 *
 * Headers are read one block at a time into a 512-byte array whose fields
 * lie at fixed offsets; the PAX records go through a cursor. Nothing is
 * allocated but one PAX header's bytes, so a scan costs one read per header
 * and memory of its own size, whatever the archive holds. */
#include "io_internal.h"

#include <string.h>

#define BLOCK 512
#define PAX_MAX ((uint64_t)1 << 20)
#define CHAIN_MAX 64
#define WHAT "tar"

/* A name as tarfile builds it; only its first NAME_KEPT bytes are kept, and
 * a longer one is no member anyone looks for. */
#define NAME_KEPT 256
typedef struct name {
  uint8_t s[NAME_KEPT];
  size_t len;
  bool longer; /* more bytes than s holds */
} name;

typedef struct header {
  name name;
  char type;
  int64_t size;
  bool size_big; /* past int64 */
} header;

/* A header's fields, as frombuf reads them: (offset, length). */
enum { NAME_AT = 0, NAME_LEN = 100, SIZE_AT = 124, SIZE_LEN = 12, CHKSUM_AT = 148, CHKSUM_LEN = 8 };
enum { TYPE_AT = 156, PREFIX_AT = 345, PREFIX_LEN = 155 };
static const struct {
  unsigned at, len;
} numbers[] = {{100, 8}, {108, 8}, {116, 8}, {SIZE_AT, SIZE_LEN}, {136, 12}, {329, 8}, {337, 8}};

#define bad_at(at, code, ...) tstor__io_fail_at(WHAT, (at), (code), __VA_ARGS__)

static void name_set(name *n, const uint8_t *p, size_t len) {
  n->len = len < NAME_KEPT ? len : NAME_KEPT;
  n->longer = len > NAME_KEPT;
  memcpy(n->s, p, n->len);
}

/* The bytes up to the first NUL, as tarfile's nts cuts a field. */
static size_t nts_len(const uint8_t *p, size_t len) {
  const uint8_t *z = memchr(p, 0, len);
  return z ? (size_t)(z - p) : len;
}

/* What Python's str.strip() removes from ASCII text. */
static bool py_space(uint8_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* Octal text as int(s, 8) reads it once stripped: a sign, "0o", digits with
 * single underscores between them (or after the "0o"). */
static bool octal(const uint8_t *p, size_t len, int64_t *out, bool *big) {
  size_t i = 0;
  bool neg = i < len && p[i] == '-';
  if (i < len && (p[i] == '+' || p[i] == '-')) i++;
  bool after_prefix = false;
  if (i + 1 < len && p[i] == '0' && (p[i + 1] == 'o' || p[i + 1] == 'O'))
    i += 2, after_prefix = true;
  uint64_t v = 0;
  bool digit = false, over = false;
  for (; i < len; i++) {
    if (p[i] == '_' && (digit || after_prefix) && i + 1 < len && p[i + 1] >= '0' &&
        p[i + 1] <= '7') {
      after_prefix = false;
      continue;
    }
    if (p[i] < '0' || p[i] > '7') return false;
    over |= v >> 60 != 0;
    v = v << 3 | (uint64_t)(p[i] - '0');
    digit = true;
  }
  if (!digit) return false;
  *big = over || v > (uint64_t)INT64_MAX;
  *out = *big ? 0 : neg ? -(int64_t)v : (int64_t)v;
  return true;
}

/* A number field as tarfile's nti reads it: base-256 (GNU's; a first byte
 * 0x80, or 0xff for a negative number), else octal text up to a NUL with
 * blanks around it (none at all is 0). false where tarfile calls the header
 * invalid; *big where the value passes int64 (valid, but no size). */
static bool nti(const uint8_t *f, size_t len, int64_t *out, bool *big) {
  *out = 0;
  *big = false;
  if (f[0] == 0x80 || f[0] == 0xff) {
    bool neg = f[0] == 0xff;
    uint64_t v = 0;
    for (size_t i = 1; i < len; i++) {
      *big |= v >> 56 != 0;
      v = v << 8 | (uint8_t)(neg ? ~f[i] : f[i]);
    }
    /* a negative number is minus one more than the complement of its bytes */
    *big |= v > (uint64_t)INT64_MAX;
    if (!*big) *out = neg ? -(int64_t)v - 1 : (int64_t)v;
    return true;
  }
  size_t n = nts_len(f, len), a = 0;
  for (size_t i = 0; i < n; i++)
    if (f[i] >= 0x80) return false; /* not ASCII */
  while (a < n && py_space(f[a])) a++;
  while (n > a && py_space(f[n - 1])) n--;
  return a == n || octal(f + a, n - a, out, big);
}

enum { HEADER_OK, HEADER_ZEROS, HEADER_INVALID };

/* The block as frombuf reads it: a header, a block of zeros (the end), or
 * none (a wrong checksum, a number that is none). */
static int frombuf(const uint8_t *b, header *h) {
  size_t zeros = 0;
  while (zeros < BLOCK && !b[zeros]) zeros++;
  if (zeros == BLOCK) return HEADER_ZEROS;
  int64_t chksum, v;
  bool big;
  if (!nti(b + CHKSUM_AT, CHKSUM_LEN, &chksum, &big)) return HEADER_INVALID;
  /* the checksum field counts as spaces; some tars sum signed chars */
  int64_t usum = 8 * ' ', ssum = 8 * ' ';
  for (size_t i = 0; i < BLOCK; i++)
    if (i < CHKSUM_AT || i >= CHKSUM_AT + CHKSUM_LEN) usum += b[i], ssum += (int8_t)b[i];
  if (big || (chksum != usum && chksum != ssum)) return HEADER_INVALID;
  for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
    if (!nti(b + numbers[i].at, numbers[i].len, &v, &big)) return HEADER_INVALID;
  nti(b + SIZE_AT, SIZE_LEN, &h->size, &h->size_big);
  h->type = (char)b[TYPE_AT];
  size_t len = nts_len(b + NAME_AT, NAME_LEN);
  /* an old tar's directory is a file whose name ends in a slash */
  if (h->type == '\0' && len && b[NAME_AT + len - 1] == '/') h->type = '5';
  if (h->type == '5')
    while (len && b[NAME_AT + len - 1] == '/') len--;
  size_t plen = nts_len(b + PREFIX_AT, PREFIX_LEN);
  uint8_t full[PREFIX_LEN + 1 + NAME_LEN];
  size_t at = 0;
  if (plen && h->type != 'L' && h->type != 'K' && h->type != 'S') {
    memcpy(full, b + PREFIX_AT, plen);
    full[plen] = '/';
    at = plen + 1;
  }
  memcpy(full + at, b + NAME_AT, len);
  name_set(&h->name, full, at + len);
  return HEADER_OK;
}

/* -------------------------------------------------------- extensions */

/* What an extension header says of the header it precedes. */
typedef struct extension {
  bool has_name, has_size, size_big;
  bool long_name; /* GNU's, not a PAX path */
  name name;
  int64_t size;
} extension;

/* One PAX record's value for `key`, as _apply_pax_info takes it. */
static int pax_record(const uint8_t *k, size_t klen, const uint8_t *v, size_t vlen, uint64_t at,
                      extension *e) {
  if (klen >= 11 && memcmp(k, "GNU.sparse.", 11) == 0)
    return bad_at(at, TSTOR_EINVAL,
                  "a GNU sparse member (PAX record '%.*s'), which torch.save never wrote",
                  (int)(klen > 40 ? 40 : klen), (const char *)k);
  if (klen == 4 && memcmp(k, "path", 4) == 0) {
    while (vlen && v[vlen - 1] == '/') vlen--;
    name_set(&e->name, v, vlen);
    e->has_name = true;
  } else if (klen == 4 && memcmp(k, "size", 4) == 0) {
    /* int(value); a value that is no int is 0, as tarfile takes it */
    int rc = tstor__io_parse_int((const char *)v, vlen, 10, &e->size);
    e->size_big = rc == TSTOR_ERANGE;
    if (rc) e->size = 0;
    e->has_size = true;
  }
  return 0;
}

/* The records "LEN key=value\n" of a PAX header's bytes (its padding too,
 * as tarfile reads them), up to a NUL or the end; each must be whole. */
static int pax_records(tstor__io_cursor *c, extension *e) {
  while (!tstor__io_cur_at_end(c) && c->data[c->off]) {
    c->item = c->off;
    const uint8_t *p = c->data + c->off;
    size_t left = tstor__io_cur_left(c), digits = 0;
    uint64_t len = 0;
    /* a length past any header's size stays UINT64_MAX */
    for (; digits < left && digits < 20 && p[digits] >= '0' && p[digits] <= '9'; digits++)
      len = len > UINT64_MAX / 20 ? UINT64_MAX : len * 10 + (uint64_t)(p[digits] - '0');
    if (!digits || digits == left || p[digits] != ' ')
      return tstor__io_cur_fail(c, TSTOR_EINVAL, "a PAX record without its length");
    if (len < 5 || len > left || digits + 1 >= len || p[len - 1] != '\n')
      return tstor__io_cur_fail(c, TSTOR_EINVAL,
                                "a PAX record of %llu bytes that does not hold one (%zu left)",
                                (unsigned long long)len, left);
    const uint8_t *kv = p + digits + 1, *eq = memchr(kv, '=', (size_t)len - digits - 2);
    if (!eq || eq == kv)
      return tstor__io_cur_fail(c, TSTOR_EINVAL, "a PAX record without a keyword and '='");
    int rc = pax_record(kv, (size_t)(eq - kv), eq + 1, (size_t)(p + len - 1 - (eq + 1)),
                        tstor__io_cur_item_at(c), e);
    if (rc) return rc;
    c->off += (size_t)len;
  }
  return 0;
}

/* The bytes of an extension header of `size` at `at` (its padding too), and
 * what they say. */
static int read_extension(const tstor__io_source *src, char type, uint64_t at, uint64_t size,
                          extension *e) {
  memset(e, 0, sizeof *e);
  /* its padding too, where the file has it (tarfile reads what is there) */
  uint64_t padded = (size + BLOCK - 1) / BLOCK * BLOCK;
  if (padded > src->size - at) padded = src->size - at;
  if (type == 'L') { /* a name up to its NUL: its first bytes decide */
    uint8_t buf[NAME_KEPT + 1];
    size_t n = padded < sizeof buf ? (size_t)padded : sizeof buf;
    int rc = tstor__io_source_read(src, buf, n, at, "a GNU long name");
    if (rc) return rc;
    name_set(&e->name, buf, nts_len(buf, n));
    e->has_name = e->long_name = true;
    return 0;
  }
  if (type == 'K') return 0; /* a long link name */
  if (padded > PAX_MAX)
    return bad_at(at, TSTOR_ERANGE, "a PAX header of %llu bytes (at most %llu are read)",
                  (unsigned long long)size, (unsigned long long)PAX_MAX);
  uint8_t *buf = tstor__io_malloc(padded ? (size_t)padded : 1);
  if (!buf)
    return TSTOR__ERR(TSTOR_ENOMEM, "tar: out of memory for a PAX header of %llu bytes",
                      (unsigned long long)size);
  int rc = tstor__io_source_read(src, buf, (size_t)padded, at, "a PAX header");
  if (!rc) {
    tstor__io_cursor c = tstor__io_cursor_over(buf, (size_t)padded, WHAT);
    c.base = at;
    rc = pax_records(&c, e);
  }
  tstor__io_free(buf);
  return rc;
}

/* ------------------------------------------------------------ members */

static bool is_extension(char type) {
  return type == 'L' || type == 'K' || type == 'x' || type == 'X';
}

/* Whether tarfile reads a member of this type as a file: a regular one, or
 * one of a type it does not know. */
static bool is_file(char type) {
  return type == '0' || type == '\0' || type == '7' || !strchr("123456LKS", type);
}

/* The block at `at` into b, as tarfile meets it: false at the end of the
 * input or in a block cut short by it. */
static int read_block(const tstor__io_source *src, uint64_t at, uint8_t *b, bool *there) {
  *there = at <= src->size && src->size - at >= BLOCK;
  return *there ? tstor__io_source_read(src, b, BLOCK, at, "a tar header") : 0;
}

/* The member whose first header is at `at`, into *m with *next the header
 * after it; *end where the archive ends there instead. */
static int read_member(const tstor__io_source *src, uint64_t at, tstor__io_tar_member *m,
                       uint64_t *next, bool *end, name *nm) {
  uint8_t b[BLOCK];
  header h;
  bool there;
  extension ext[CHAIN_MAX];
  size_t next_ext = 0;
  int rc = read_block(src, at, b, &there);
  if (rc) return rc;
  int kind = there ? frombuf(b, &h) : HEADER_INVALID;
  if (kind != HEADER_OK) {
    if (at == 0 && kind != HEADER_ZEROS)
      return bad_at(0, TSTOR_EINVAL, "not a tar archive: its first block is no tar header");
    *end = true;
    return 0;
  }
  uint64_t here = at;
  while (is_extension(h.type) || h.type == 'g' || h.type == 'S') {
    if (h.type == 'g' || h.type == 'S')
      return bad_at(here, TSTOR_EINVAL, "a %s, which torch.save never wrote",
                    h.type == 'g' ? "global PAX header" : "GNU sparse member");
    if (next_ext == CHAIN_MAX)
      return bad_at(at, TSTOR_EINVAL, "more than %d extension headers in a row", CHAIN_MAX);
    if (h.size < 0 || h.size_big || (uint64_t)h.size > src->size - here - BLOCK)
      return h.size < 0 ? bad_at(here, TSTOR_EINVAL, "an extension header of a negative size")
             : h.size_big
                 ? bad_at(here, TSTOR_EINVAL, "an extension header of 2^63 bytes or more")
                 : bad_at(here, TSTOR_EINVAL,
                          "an extension header of %lld bytes runs past the end of the file",
                          (long long)h.size);
    uint64_t after = here + BLOCK + ((uint64_t)h.size + BLOCK - 1) / BLOCK * BLOCK;
    if ((rc = read_extension(src, h.type, here + BLOCK, (uint64_t)h.size, &ext[next_ext++])))
      return rc;
    if ((rc = read_block(src, after, b, &there))) return rc;
    if (!there || frombuf(b, &h) != HEADER_OK)
      return bad_at(after, TSTOR_EINVAL, "the extension header at %llu is followed by %s",
                    (unsigned long long)here, there ? "no header" : "the end of the file");
    here = after;
  }
  /* the innermost extension first: the outermost has the last word */
  while (next_ext--) {
    extension *e = &ext[next_ext];
    if (e->has_name) h.name = e->name;
    /* a long name loses one trailing slash of a directory's, a PAX path all */
    if (e->has_name && e->long_name && h.type == '5' && h.name.len && !h.name.longer &&
        h.name.s[h.name.len - 1] == '/')
      h.name.len--;
    if (e->has_size) h.size = e->size, h.size_big = e->size_big;
  }
  if (h.size < 0 || h.size_big)
    return bad_at(at, TSTOR_EINVAL, "a member of %s bytes",
                  h.size < 0 ? "a negative number of" : "more than 2^63");
  m->header = at;
  m->data = here + BLOCK;
  m->size = (uint64_t)h.size;
  m->type = h.type;
  m->file = is_file(h.type);
  *nm = h.name;
  *next = m->data;
  if (m->file && m->size) {
    if (m->size > src->size || m->data > src->size - m->size)
      return bad_at(at, TSTOR_EINVAL,
                    "a member of %llu bytes at %llu runs past the end of the file (%llu bytes)",
                    (unsigned long long)m->size, (unsigned long long)m->data,
                    (unsigned long long)src->size);
    /* tarfile wants its padding there too */
    *next += (m->size + BLOCK - 1) / BLOCK * BLOCK;
    if (*next > src->size)
      return bad_at(at, TSTOR_EINVAL, "a member of %llu bytes ends in a block the file cuts short",
                    (unsigned long long)m->size);
  }
  return 0;
}

bool tstor__io_tar_header_ok(const uint8_t *p, size_t n) {
  header h;
  return n >= BLOCK && frombuf(p, &h) == HEADER_OK;
}

int tstor__io_tar_find(const tstor__io_source *src, const char *const *names, size_t n,
                       tstor__io_tar_member *out) {
  memset(out, 0, n * sizeof *out);
  for (uint64_t at = 0;;) {
    tstor__io_tar_member m;
    name nm;
    uint64_t next;
    bool end = false;
    int rc = read_member(src, at, &m, &next, &end, &nm);
    if (rc || end) return rc;
    /* the last member of a name is the one tarfile.getmember gives */
    for (size_t i = 0; i < n; i++)
      if (!nm.longer && nm.len == strlen(names[i]) && memcmp(nm.s, names[i], nm.len) == 0) {
        out[i] = m;
        out[i].found = true;
      }
    at = next;
  }
}
