/* Encoding and decoding of the remote protocol (protocol.h). Every read goes
 * through one bounds-checked cursor; a short or long body is refused before
 * any field is used. */
#include "protocol.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *tsr_status_text(int status) {
  switch (status) {
#define TSR__ST_TEXT(name, value, text) \
  case value:                           \
    return text;
    TSR_STATUS_MAP(TSR__ST_TEXT)
#undef TSR__ST_TEXT
  }
  return "unknown status";
}

const char *tsr_type_name(int type) {
  switch (type & ~TSR_REPLY) {
#define TSR__TYPE_NAME(NAME, name, value, req, rep) \
  case value:                                       \
    return #NAME;
    TSR_MSG_MAP(TSR__TYPE_NAME)
#undef TSR__TYPE_NAME
  }
  return "unknown";
}

int tsr_body_size(int type, int is_reply) {
  switch (type) {
#define TSR__SIZE(NAME, name, value, req, rep) \
  case value:                                  \
    return is_reply ? (int)(rep) : (int)(req);
    TSR_MSG_MAP(TSR__SIZE)
#undef TSR__SIZE
  }
  return -2;
}

int tsr_type_known(int type) {
  return type >= 0 && type <= 0xff && tsr_body_size(type & ~TSR_REPLY, 0) != -2;
}

/* ------------------------------------------------------------- writer */

typedef struct writer {
  uint8_t *buf;
  size_t len;
} writer;

static void put_u16(writer *w, uint16_t v) {
  w->buf[w->len++] = (uint8_t)v;
  w->buf[w->len++] = (uint8_t)(v >> 8);
}

static void put_u32(writer *w, uint32_t v) {
  for (int i = 0; i < 4; i++) w->buf[w->len++] = (uint8_t)(v >> (8 * i));
}

static void put_u64(writer *w, uint64_t v) {
  for (int i = 0; i < 8; i++) w->buf[w->len++] = (uint8_t)(v >> (8 * i));
}

static void put_bytes(writer *w, const void *p, size_t n) {
  if (n) memcpy(w->buf + w->len, p, n);
  w->len += n;
}

/* The header, its body length 0 until done() sets it. */
static writer header(uint8_t *buf, int type, uint32_t id, int32_t status) {
  writer w = {buf, 0};
  put_u32(&w, TSR_MAGIC);
  put_u16(&w, (uint16_t)TSR_PROTO_VERSION);
  put_u16(&w, (uint16_t)type);
  put_u32(&w, 0);
  put_u32(&w, id);
  put_u32(&w, (uint32_t)status);
  return w;
}

/* Writes the body length into the header; returns the message's length. */
static size_t done(writer w) {
  uint32_t body = (uint32_t)(w.len - TSR_HEADER_SIZE);
  for (int i = 0; i < 4; i++) w.buf[TSR_LENGTH_OFFSET + i] = (uint8_t)(body >> (8 * i));
  return w.len;
}

void tsr_set_id(uint8_t *buf, uint32_t id) {
  for (int i = 0; i < 4; i++) buf[12 + i] = (uint8_t)(id >> (8 * i));
}

size_t tsr_encode_hello(uint8_t *buf, uint32_t id, uint32_t abi, const uint8_t *nonce) {
  writer w = header(buf, TSR_HELLO, id, 0);
  put_u32(&w, abi);
  put_bytes(&w, nonce, TSR_NONCE_SIZE);
  return done(w);
}

size_t tsr_encode_auth(uint8_t *buf, uint32_t id, const uint8_t *mac) {
  writer w = header(buf, TSR_AUTH, id, 0);
  put_bytes(&w, mac, TSR_MAC_SIZE);
  return done(w);
}

size_t tsr_encode_alloc(uint8_t *buf, uint32_t id, uint32_t device, uint64_t nbytes) {
  writer w = header(buf, TSR_ALLOC, id, 0);
  put_u32(&w, device);
  put_u64(&w, nbytes);
  return done(w);
}

size_t tsr_encode_free(uint8_t *buf, uint32_t id, uint64_t handle) {
  writer w = header(buf, TSR_FREE, id, 0);
  put_u64(&w, handle);
  return done(w);
}

size_t tsr_encode_copy(uint8_t *buf, uint32_t id, uint64_t dst, uint64_t dst_off, uint64_t src,
                       uint64_t src_off, uint64_t nbytes) {
  writer w = header(buf, TSR_COPY, id, 0);
  put_u64(&w, dst);
  put_u64(&w, dst_off);
  put_u64(&w, src);
  put_u64(&w, src_off);
  put_u64(&w, nbytes);
  return done(w);
}

size_t tsr_encode_transfer(uint8_t *buf, int type, uint32_t id, uint64_t handle, uint64_t offset,
                           uint64_t nbytes) {
  writer w = header(buf, type, id, 0);
  put_u64(&w, handle);
  put_u64(&w, offset);
  put_u64(&w, nbytes);
  return done(w);
}

size_t tsr_encode_fill(uint8_t *buf, uint32_t id, uint64_t handle, uint64_t offset,
                       uint64_t nbytes, uint32_t pattern_size, const uint8_t *pattern) {
  writer w = header(buf, TSR_FILL, id, 0);
  uint8_t pat[16] = {0};
  memcpy(pat, pattern, pattern_size < 16 ? pattern_size : 16); /* zero padding after it */
  put_u64(&w, handle);
  put_u64(&w, offset);
  put_u64(&w, nbytes);
  put_u32(&w, pattern_size);
  put_bytes(&w, pat, 16);
  return done(w);
}

size_t tsr_encode_copy_strided(uint8_t *buf, uint32_t id, uint64_t dst, uint64_t dst_off,
                               uint64_t src, uint64_t src_off, uint32_t element_size, int ndim,
                               const int64_t *sizes, const int64_t *dst_strides,
                               const int64_t *src_strides) {
  writer w = header(buf, TSR_COPY_STRIDED, id, 0);
  if (ndim < 0) ndim = 0;
  if (ndim > (int)TSR_MAX_DIMS) ndim = TSR_MAX_DIMS;
  put_u64(&w, dst);
  put_u64(&w, dst_off);
  put_u64(&w, src);
  put_u64(&w, src_off);
  put_u32(&w, element_size);
  put_u32(&w, (uint32_t)ndim);
  for (int d = 0; d < ndim; d++) {
    put_u64(&w, (uint64_t)sizes[d]);
    put_u64(&w, (uint64_t)dst_strides[d]);
    put_u64(&w, (uint64_t)src_strides[d]);
  }
  return done(w);
}

size_t tsr_encode_stats(uint8_t *buf, uint32_t id, uint32_t device) {
  writer w = header(buf, TSR_STATS, id, 0);
  put_u32(&w, device);
  return done(w);
}

size_t tsr_encode_bye(uint8_t *buf, uint32_t id) { return done(header(buf, TSR_BYE, id, 0)); }

size_t tsr_encode_error(uint8_t *buf, int type, uint32_t id, int status, const char *text) {
  writer w = header(buf, (type & ~TSR_REPLY) | TSR_REPLY, id, status);
  size_t n = text ? strlen(text) : 0;
  if (n > TSR_MAX_TEXT) n = TSR_MAX_TEXT;
  put_u16(&w, (uint16_t)n);
  put_bytes(&w, text, n);
  return done(w);
}

size_t tsr_encode_empty_reply(uint8_t *buf, int type, uint32_t id) {
  return done(header(buf, (type & ~TSR_REPLY) | TSR_REPLY, id, 0));
}

size_t tsr_encode_challenge(uint8_t *buf, uint32_t id, uint32_t abi, const uint8_t *nonce) {
  writer w = header(buf, TSR_HELLO | TSR_REPLY, id, 0);
  put_u32(&w, abi);
  put_bytes(&w, nonce, TSR_NONCE_SIZE);
  return done(w);
}

size_t tsr_encode_welcome(uint8_t *buf, uint32_t id, const uint8_t *mac,
                          const tsr_device_desc *devices, uint32_t ndevices) {
  writer w = header(buf, TSR_AUTH | TSR_REPLY, id, 0);
  if (ndevices > TSR_MAX_DEVICES) ndevices = TSR_MAX_DEVICES;
  put_bytes(&w, mac, TSR_MAC_SIZE);
  put_u32(&w, ndevices);
  for (uint32_t i = 0; i < ndevices; i++) {
    char name[TSR_DEVICE_NAME_SIZE] = {0};
    strncpy(name, devices[i].name, sizeof name - 1);
    put_bytes(&w, name, sizeof name);
    put_u64(&w, devices[i].capacity);
  }
  return done(w);
}

size_t tsr_encode_alloc_reply(uint8_t *buf, uint32_t id, uint64_t handle, uint64_t region) {
  writer w = header(buf, TSR_ALLOC | TSR_REPLY, id, 0);
  put_u64(&w, handle);
  put_u64(&w, region);
  return done(w);
}

size_t tsr_encode_shm(uint8_t *buf, uint32_t id) { return done(header(buf, TSR_SHM, id, 0)); }

size_t tsr_encode_shm_reply(uint8_t *buf, uint32_t id, uint64_t region_size, uint32_t device) {
  writer w = header(buf, TSR_SHM | TSR_REPLY, id, 0);
  put_u64(&w, region_size);
  put_u32(&w, device);
  return done(w);
}

size_t tsr_encode_stats_reply(uint8_t *buf, uint32_t id, uint64_t held, uint64_t peak,
                              uint64_t allocs, uint64_t frees, uint64_t server_total) {
  writer w = header(buf, TSR_STATS | TSR_REPLY, id, 0);
  put_u64(&w, held);
  put_u64(&w, peak);
  put_u64(&w, allocs);
  put_u64(&w, frees);
  put_u64(&w, server_total);
  return done(w);
}

/* ------------------------------------------------------------- reader */

/* One cursor over the message: every read checks what is left first and, on
 * a short message, marks the reader bad and reads zeros. */
typedef struct reader {
  const uint8_t *buf;
  size_t len, pos;
  int bad;
} reader;

static int can_read(reader *r, size_t n) {
  if (r->bad || n > r->len - r->pos) {
    r->bad = 1;
    return 0;
  }
  return 1;
}

static uint16_t get_u16(reader *r) {
  if (!can_read(r, 2)) return 0;
  const uint8_t *p = r->buf + r->pos;
  r->pos += 2;
  return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_u32(reader *r) {
  if (!can_read(r, 4)) return 0;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)r->buf[r->pos + i] << (8 * i);
  r->pos += 4;
  return v;
}

static uint64_t get_u64(reader *r) {
  if (!can_read(r, 8)) return 0;
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)r->buf[r->pos + i] << (8 * i);
  r->pos += 8;
  return v;
}

static const uint8_t *get_bytes(reader *r, size_t n) {
  if (!can_read(r, n)) return NULL;
  const uint8_t *p = r->buf + r->pos;
  r->pos += n;
  return p;
}

static int fail(char *why, size_t why_size, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int fail(char *why, size_t why_size, int status, const char *fmt, ...) {
  if (why && why_size) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
  }
  return status;
}

/* One decoder per message type, named after TSR_MSG_MAP's second column:
 * each reads the request's or the reply's body field by field and returns 0
 * or a TSR_ST_* status with why set; a body cut short is the caller's to
 * report (the reader is marked bad). */
typedef struct decoding {
  reader *r;
  tsr_msg *m;
  int is_reply;
  char *why;
  size_t why_size;
} decoding;

static int decode_hello(decoding *d) {
  d->m->abi = get_u32(d->r);
  d->m->nonce = get_bytes(d->r, TSR_NONCE_SIZE);
  return 0;
}

/* auth: the client's MAC; the welcome: the server's MAC and the devices. */
static int decode_auth(decoding *d) {
  reader *r = d->r;
  tsr_msg *m = d->m;
  m->mac = get_bytes(r, TSR_MAC_SIZE);
  if (!d->is_reply) return 0;
  m->ndevices = get_u32(r);
  if (!r->bad && m->ndevices > TSR_MAX_DEVICES)
    return fail(d->why, d->why_size, TSR_ST_BADMSG, "%u devices, at most %u", m->ndevices,
                TSR_MAX_DEVICES);
  for (uint32_t i = 0; i < m->ndevices && !r->bad; i++) {
    const uint8_t *name = get_bytes(r, TSR_DEVICE_NAME_SIZE);
    m->devices[i].capacity = get_u64(r);
    if (!name) break;
    memcpy(m->devices[i].name, name, TSR_DEVICE_NAME_SIZE);
    if (memchr(name, '\0', TSR_DEVICE_NAME_SIZE) == NULL)
      return fail(d->why, d->why_size, TSR_ST_BADMSG, "device %u: name not terminated", i);
  }
  return 0;
}

static int decode_alloc(decoding *d) {
  if (d->is_reply) {
    d->m->handle = get_u64(d->r);
    d->m->region = get_u64(d->r);
  } else {
    d->m->device = get_u32(d->r);
    d->m->nbytes = get_u64(d->r);
  }
  return 0;
}

static int decode_free(decoding *d) {
  if (!d->is_reply) d->m->handle = get_u64(d->r);
  return 0;
}

/* COPY and COPY_STRIDED begin alike: destination handle and offset, then
 * source handle and offset. */
static void get_copy_ends(reader *r, tsr_msg *m) {
  m->handle = get_u64(r);
  m->offset = get_u64(r);
  m->src_handle = get_u64(r);
  m->src_offset = get_u64(r);
}

static int decode_copy(decoding *d) {
  if (d->is_reply) return 0;
  get_copy_ends(d->r, d->m);
  d->m->nbytes = get_u64(d->r);
  return 0;
}

static int decode_fill(decoding *d) {
  if (d->is_reply) return 0;
  tsr_msg *m = d->m;
  m->handle = get_u64(d->r);
  m->offset = get_u64(d->r);
  m->nbytes = get_u64(d->r);
  m->pattern_size = get_u32(d->r);
  const uint8_t *pat = get_bytes(d->r, 16);
  if (!pat) return 0;
  memcpy(m->pattern, pat, 16);
  for (uint32_t i = m->pattern_size; i < 16; i++)
    if (pat[i] != 0)
      return fail(d->why, d->why_size, TSR_ST_BADMSG, "FILL: pattern byte %u past its size %u",
                  i, m->pattern_size);
  return 0;
}

static int decode_stats(decoding *d) {
  tsr_msg *m = d->m;
  if (!d->is_reply) {
    m->device = get_u32(d->r);
    return 0;
  }
  m->held = get_u64(d->r);
  m->peak = get_u64(d->r);
  m->allocs = get_u64(d->r);
  m->frees = get_u64(d->r);
  m->server_total = get_u64(d->r);
  return 0;
}

static int decode_bye(decoding *d) {
  (void)d;
  return 0;
}

static int decode_copy_strided(decoding *d) {
  if (d->is_reply) return 0;
  reader *r = d->r;
  tsr_msg *m = d->m;
  get_copy_ends(r, m);
  m->element_size = get_u32(r);
  m->ndim = get_u32(r);
  if (!r->bad && (m->ndim == 0 || m->ndim > TSR_MAX_DIMS))
    return fail(d->why, d->why_size, TSR_ST_BADMSG, "COPY_STRIDED: %u dimensions (1 to %u)",
                m->ndim, TSR_MAX_DIMS);
  for (uint32_t i = 0; i < m->ndim && !r->bad; i++) {
    uint64_t v[3] = {get_u64(r), get_u64(r), get_u64(r)};
    if (!r->bad && (v[0] | v[1] | v[2]) >> 63)
      return fail(d->why, d->why_size, TSR_ST_BADMSG,
                  "COPY_STRIDED: dimension %u: a size or stride of 2^63 or more", i);
    m->sizes[i] = (int64_t)v[0];
    m->dst_strides[i] = (int64_t)v[1];
    m->src_strides[i] = (int64_t)v[2];
  }
  return 0;
}

static int decode_shm(decoding *d) {
  if (d->is_reply) {
    d->m->region = get_u64(d->r);
    d->m->device = get_u32(d->r);
  }
  return 0;
}

/* WRITE and READ: the bytes that follow are not part of the message. */
static int decode_transfer(decoding *d) {
  if (d->is_reply) return 0;
  d->m->handle = get_u64(d->r);
  d->m->offset = get_u64(d->r);
  d->m->nbytes = get_u64(d->r);
  return 0;
}

static int decode_write(decoding *d) { return decode_transfer(d); }
static int decode_read(decoding *d) { return decode_transfer(d); }

static int decode_error(decoding *d) {
  reader *r = d->r;
  uint16_t n = get_u16(r);
  if (!r->bad && n > TSR_MAX_TEXT)
    return fail(d->why, d->why_size, TSR_ST_BADMSG, "error text of %u bytes", (unsigned)n);
  const uint8_t *text = get_bytes(r, n);
  if (!text) return 0;
  memcpy(d->m->text, text, n);
  d->m->text[n] = '\0';
  for (uint16_t i = 0; i < n; i++) /* no control characters reach a log */
    if ((unsigned char)d->m->text[i] < 0x20 || d->m->text[i] == 0x7f) d->m->text[i] = '?';
  return 0;
}

void tsr_head_read(const uint8_t *header, tsr_head *out) {
  reader r = {header, TSR_HEADER_SIZE, 0, 0};
  out->magic = get_u32(&r);
  out->version = get_u16(&r);
  out->type = get_u16(&r);
  out->body = get_u32(&r);
  out->id = get_u32(&r);
  out->status = (int32_t)get_u32(&r);
}

static uint32_t body_length(const uint8_t *header) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)header[TSR_LENGTH_OFFSET + i] << (8 * i);
  return v;
}

int tsr_frame(const uint8_t *header, uint32_t max_body, uint32_t *body_len, char *why,
              size_t why_size) {
  reader r = {header, TSR_HEADER_SIZE, 0, 0};
  uint32_t magic = get_u32(&r);
  *body_len = body_length(header);
  if (magic != TSR_MAGIC)
    return fail(why, why_size, TSR_ST_BADMSG, "bad magic 0x%08x: not a tstor message",
                (unsigned)magic);
  if (*body_len > max_body)
    return fail(why, why_size, TSR_ST_BADMSG, "a body of %u bytes, at most %u here", *body_len,
                max_body);
  return 0;
}

int tsr_decode(const void *buf, size_t len, int is_reply, tsr_msg *out, char *why,
               size_t why_size) {
  memset(out, 0, offsetof(tsr_msg, devices));
  if (buf == NULL || len < TSR_HEADER_SIZE)
    return fail(why, why_size, TSR_ST_BADMSG, "message of %zu bytes, shorter than a header",
                len);
  if (len > TSR_MAX_MESSAGE)
    return fail(why, why_size, TSR_ST_BADMSG, "message of %zu bytes, longer than %u", len,
                (unsigned)TSR_MAX_MESSAGE);
  reader r = {buf, len, 0, 0};
  uint32_t magic = get_u32(&r);
  out->version = get_u16(&r);
  int type = get_u16(&r);
  out->type = type;
  uint32_t body = get_u32(&r);
  out->id = get_u32(&r);
  out->status = (int32_t)get_u32(&r);
  if (magic != TSR_MAGIC)
    return fail(why, why_size, TSR_ST_BADMSG, "bad magic 0x%08x: not a tstor message",
                (unsigned)magic);
  if (out->version != TSR_PROTO_VERSION)
    return fail(why, why_size, TSR_ST_VERSION, "protocol version %u, this side speaks %u",
                (unsigned)out->version, TSR_PROTO_VERSION);
  if (body != len - TSR_HEADER_SIZE)
    return fail(why, why_size, TSR_ST_BADMSG, "the header says %u body bytes, %zu came", body,
                len - TSR_HEADER_SIZE);
  if (((type & TSR_REPLY) != 0) != (is_reply != 0))
    return fail(why, why_size, TSR_ST_BADMSG, "a %s where a %s was expected",
                (type & TSR_REPLY) ? "reply" : "request", is_reply ? "reply" : "request");
  int base = type & ~TSR_REPLY;
  int size = tsr_body_size(base, is_reply);
  /* An error reply to a message whose type could not be read says type 0. */
  int unknown_ok = is_reply && out->status != 0 && base == 0;
  if ((size == -2 && !unknown_ok) || (type & ~(TSR_REPLY | 0x7f)) != 0)
    return fail(why, why_size, TSR_ST_BADMSG, "unknown message type %d", type);
  if (!is_reply && out->status != 0)
    return fail(why, why_size, TSR_ST_BADMSG, "a request with status %d", (int)out->status);

  decoding d = {&r, out, is_reply, why, why_size};
  int rc = 0;
  if (is_reply && out->status != 0) {
    rc = decode_error(&d);
  } else if (size >= 0 && len - TSR_HEADER_SIZE != (size_t)size) {
    return fail(why, why_size, TSR_ST_BADMSG, "%s%s of %zu bytes, its body is %d",
                tsr_type_name(base), is_reply ? " reply" : "", len - TSR_HEADER_SIZE, size);
  } else {
    switch (base) {
#define TSR__DECODE(NAME, name, value, req, rep) \
  case value:                                    \
    rc = decode_##name(&d);                      \
    break;
      TSR_MSG_MAP(TSR__DECODE)
#undef TSR__DECODE
    }
  }
  if (rc) return rc;
  if (r.bad) return fail(why, why_size, TSR_ST_BADMSG, "%s: body cut short", tsr_type_name(base));
  if (r.pos != len)
    return fail(why, why_size, TSR_ST_BADMSG, "%s: %zu bytes after the body",
                tsr_type_name(base), len - r.pos);
  return 0;
}
