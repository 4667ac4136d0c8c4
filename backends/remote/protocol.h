/* The wire protocol between tstor-remote.so (the client) and `tstor serve`
 * (the server): one header, shared by both, and by the fuzz target.
 *
 * Model. One stream connection (TCP, or a Unix socket on one machine) per
 * client and server, carrying requests and their replies in order, and the
 * bytes of copies after the messages that name them: WRITE is followed by its
 * bytes, READ's reply by the bytes asked for. Every byte the server receives
 * is read by tstor's own code, through the decoder below, and no byte of the
 * server's memory is named by an address: blocks are handles into a table of
 * the client's own, offsets are checked against the block. docs/remote.md
 * says why this is not UCX's one-sided model (UCX applies a peer's puts
 * without asking whether it authenticated) and what each side trusts.
 *
 * Encoding. Every message is a 20-byte header followed by a body whose layout
 * the header's type fixes. The header: magic "TSRM" (u32), version (u16), type
 * (u16; replies have bit 7 set), body length (u32), request id (u32, echoed by
 * the reply), status (i32; 0 in requests, 0 or a TSR_ST_* code in replies).
 * Every integer is little-endian and of fixed width; strings are fixed-size,
 * NUL-padded fields; the only variable-length fields (an error text, the
 * device list, a strided copy's dimensions) carry their count first and are
 * bounded below. The body length comes before anything a version may change,
 * so a reader can frame a message of any version; tsr_decode checks the magic,
 * the version, the type, and that the body is exactly as long as its type
 * says, before any field is used.
 *
 * Versions. TSR_PROTO_VERSION is one number, sent in every header; a peer
 * answers a message of another version with TSR_ST_VERSION and closes the
 * connection. New message types and fields mean a new version: there is no
 * optional field on the wire. 1 and 2 ran over UCX; 3 is the stream protocol;
 * 4 adds the shared region (SHM, and the region offset in ALLOC's reply).
 *
 * Shared memory. Over a Unix socket, after authentication, a client may ask
 * for its region (SHM): memory of its session alone, which the server makes
 * (a sealed memfd), maps, and hands to this client only, with the reply, as
 * SCM_RIGHTS. The server then places the client's blocks of host-memory
 * devices in it, and ALLOC's reply says where (TSR_NO_REGION: not in it); the
 * client reads and writes those blocks itself, with memcpy, and the other
 * requests are as before. Nothing in the region is read by the server as
 * anything but the bytes of blocks. docs/remote.md's threat model says what
 * this adds.
 *
 * Sessions. hello (client nonce) -> challenge (server nonce); auth (HMAC of
 * both nonces under the shared secret) -> welcome (the server's own HMAC, so
 * the client knows the server holds the secret too, and the device list).
 * Nothing else is accepted before; a wrong proof, a message of another type,
 * version or size closes the connection. bye ends the session and frees the
 * client's blocks; a connection that drops does the same.
 *
 * Ownership: the encoders write into a caller's buffer of TSR_MAX_MESSAGE
 * bytes; the decoder fills a tsr_msg whose pointers point into the buffer it
 * was given (borrowed, valid as long as that buffer). */
#ifndef TSTOR_REMOTE_PROTOCOL_H
#define TSTOR_REMOTE_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define TSR_MAGIC 0x4d525354u /* "TSRM" little-endian */
#define TSR_PROTO_VERSION 4u

#define TSR_HEADER_SIZE 20u
#define TSR_LENGTH_OFFSET 8u /* where the body length sits in the header */
#define TSR_NONCE_SIZE 32u
#define TSR_MAC_SIZE 32u /* HMAC-SHA256 */
#define TSR_DEVICE_NAME_SIZE 32u
#define TSR_MAX_DEVICES 64u
#define TSR_MAX_TEXT 240u /* an error reply's message */
#define TSR_MAX_DIMS 64u  /* COPY_STRIDED, as backend.h's copy_strided */
/* ALLOC's reply for a block outside the client's region. */
#define TSR_NO_REGION UINT64_MAX
/* The longest body: the welcome with every device. */
#define TSR_MAX_BODY (TSR_MAC_SIZE + 4u + TSR_MAX_DEVICES * (TSR_DEVICE_NAME_SIZE + 8u))
#define TSR_MAX_MESSAGE (TSR_HEADER_SIZE + TSR_MAX_BODY)

/* Message types: X(NAME, name, value, request body bytes, reply body bytes;
 * -1 when variable). A reply has the request's type with TSR_REPLY set; an
 * error reply of any type has a nonzero status and the TEXT body. */
#define TSR_MSG_MAP(X)                                                                      \
  X(HELLO, hello, 1, 4 + TSR_NONCE_SIZE, 4 + TSR_NONCE_SIZE) /* abi; nonce -> abi; nonce */ \
  X(AUTH, auth, 2, TSR_MAC_SIZE, -1)                         /* mac -> mac, devices */      \
  X(ALLOC, alloc, 3, 12, 16) /* device, nbytes -> handle, region offset */                  \
  X(FREE, free, 4, 8, 0)     /* handle */                                                   \
  X(COPY, copy, 5, 40, 0)    /* dst handle, dst offset, src handle, src offset, nbytes */   \
  X(FILL, fill, 6, 44, 0)    /* handle, offset, nbytes, pattern size, pattern[16] */        \
  X(STATS, stats, 7, 4, 40)  /* device -> held, peak, allocs, frees, server total */        \
  X(BYE, bye, 8, 0, 0)                                                                      \
  X(COPY_STRIDED, copy_strided, 9, -1, 0) /* as COPY, element size, ndim, per dim: size,    \
                                             strides */                                     \
  X(WRITE, write, 10, 24, 0)              /* handle, offset, nbytes; then nbytes bytes */   \
  X(READ, read, 11, 24, 0)                /* handle, offset, nbytes -> then nbytes bytes */ \
  X(SHM, shm, 12, 0, 12) /* -> region bytes, a host device; the memfd as SCM_RIGHTS */

enum {
#define TSR__TYPE(NAME, name, value, req, rep) TSR_##NAME = value,
  TSR_MSG_MAP(TSR__TYPE)
#undef TSR__TYPE
  TSR_REPLY = 0x80
};

/* Statuses in a reply's header: 0 or one of these, each a TSTOR_E* code on
 * the client (status_code in peer.c). */
#define TSR_STATUS_MAP(X)                                        \
  X(OK, 0, "ok")                                                 \
  X(BADMSG, 1, "malformed message")                              \
  X(VERSION, 2, "protocol version mismatch")                     \
  X(DENIED, 3, "authentication failed")                          \
  X(NOSESSION, 4, "not authenticated")                           \
  X(NODEV, 5, "no such device")                                  \
  X(NOHANDLE, 6, "no such block")                                \
  X(RANGE, 7, "offset or length outside the block")              \
  X(NOMEM, 8, "out of memory")                                   \
  X(QUOTA, 9, "over this client's memory limit (max_client_mb)") \
  X(INVAL, 10, "invalid argument")                               \
  X(INTERNAL, 11, "server failure")                              \
  X(BUSY, 12, "the server is serving as many clients as it may")

enum {
#define TSR__ST(name, value, text) TSR_ST_##name = value,
  TSR_STATUS_MAP(TSR__ST)
#undef TSR__ST
};

const char *tsr_status_text(int status);
const char *tsr_type_name(int type);
/* 1 when type (without TSR_REPLY) is one of TSR_MSG_MAP's. */
int tsr_type_known(int type);

typedef struct tsr_device_desc {
  char name[TSR_DEVICE_NAME_SIZE]; /* "cpu:0", NUL-terminated by the decoder */
  uint64_t capacity;               /* bytes, 0 when unknown */
} tsr_device_desc;

/* A decoded message. Fields other than the header's are set as `type` says;
 * the others are zero, but for the arrays at the end, which hold what their
 * counts say and nothing is cleared past that (a decode is one per request:
 * it clears a few hundred bytes, not the arrays' kilobytes). */
typedef struct tsr_msg {
  uint32_t version;
  int type;       /* with TSR_REPLY for replies */
  uint32_t id;    /* the request id a reply answers */
  int32_t status; /* TSR_ST_*; replies only */
  /* HELLO */
  uint32_t abi;
  const uint8_t *nonce; /* TSR_NONCE_SIZE bytes */
  /* AUTH request and reply */
  const uint8_t *mac; /* TSR_MAC_SIZE bytes */
  uint32_t ndevices;  /* devices[0..ndevices) */
  /* ALLOC, STATS; SHM reply: a host-memory device of the server's */
  uint32_t device;
  /* ALLOC reply: where the block is in the client's region, or TSR_NO_REGION;
   * SHM reply: the region's size */
  uint64_t region;
  /* ALLOC, COPY, FILL, WRITE, READ */
  uint64_t nbytes;
  /* ALLOC reply, FREE, COPY and COPY_STRIDED (the destination), FILL, WRITE, READ */
  uint64_t handle, offset;
  /* COPY and COPY_STRIDED: the source */
  uint64_t src_handle, src_offset;
  /* FILL */
  uint32_t pattern_size;
  uint8_t pattern[16];
  /* COPY_STRIDED: strides in bytes; every value below 2^63 */
  uint32_t element_size, ndim; /* sizes and strides [0..ndim) */
  /* STATS reply */
  uint64_t held, peak, allocs, frees, server_total;
  /* error replies */
  char text[TSR_MAX_TEXT + 1];
  /* The arrays, last. */
  tsr_device_desc devices[TSR_MAX_DEVICES];
  int64_t sizes[TSR_MAX_DIMS], dst_strides[TSR_MAX_DIMS], src_strides[TSR_MAX_DIMS];
} tsr_msg;

/* A header's fields as its bytes say, unchecked: for the reader that checks
 * an empty reply without decoding it. */
typedef struct tsr_head {
  uint32_t magic, body, id;
  uint16_t version, type;
  int32_t status;
} tsr_head;

void tsr_head_read(const uint8_t *header, tsr_head *out);

/* The body size of a type's requests (is_reply 0) or replies: bytes, -1 when
 * variable, -2 for an unknown type. */
int tsr_body_size(int type, int is_reply);

/* Frames a message from its first TSR_HEADER_SIZE bytes: checks the magic
 * and that the body length is at most max_body, and puts it in *body_len.
 * Returns 0, or TSR_ST_BADMSG with a reason in why. */
int tsr_frame(const uint8_t *header, uint32_t max_body, uint32_t *body_len, char *why,
              size_t why_size);

/* Decodes buf[0..len) into *out. Returns 0, or a TSR_ST_* status (BADMSG,
 * VERSION) with a reason in why (NUL-terminated, at most why_size bytes). A
 * message of another version is decoded as far as its header. */
int tsr_decode(const void *buf, size_t len, int is_reply, tsr_msg *out, char *why,
               size_t why_size);

/* ------------------------------------------------------------- encoders */

/* Each writes a whole message into buf (at least TSR_MAX_MESSAGE bytes) and
 * returns its length. tsr_encode_fill reads min(pattern_size, 16) bytes of
 * pattern and pads the 16-byte field with zeros, which the decoder requires. */
size_t tsr_encode_hello(uint8_t *buf, uint32_t id, uint32_t abi, const uint8_t *nonce);
size_t tsr_encode_auth(uint8_t *buf, uint32_t id, const uint8_t *mac);
size_t tsr_encode_alloc(uint8_t *buf, uint32_t id, uint32_t device, uint64_t nbytes);
size_t tsr_encode_free(uint8_t *buf, uint32_t id, uint64_t handle);
size_t tsr_encode_copy(uint8_t *buf, uint32_t id, uint64_t dst, uint64_t dst_off, uint64_t src,
                       uint64_t src_off, uint64_t nbytes);
size_t tsr_encode_fill(uint8_t *buf, uint32_t id, uint64_t handle, uint64_t offset,
                       uint64_t nbytes, uint32_t pattern_size, const uint8_t *pattern);
/* ndim is 1 to TSR_MAX_DIMS; sizes and strides (in bytes) are not negative. */
size_t tsr_encode_copy_strided(uint8_t *buf, uint32_t id, uint64_t dst, uint64_t dst_off,
                               uint64_t src, uint64_t src_off, uint32_t element_size, int ndim,
                               const int64_t *sizes, const int64_t *dst_strides,
                               const int64_t *src_strides);
size_t tsr_encode_stats(uint8_t *buf, uint32_t id, uint32_t device);
/* type: TSR_WRITE (the caller sends nbytes bytes after it) or TSR_READ (the
 * reply is followed by nbytes bytes). */
size_t tsr_encode_transfer(uint8_t *buf, int type, uint32_t id, uint64_t handle, uint64_t offset,
                           uint64_t nbytes);
size_t tsr_encode_bye(uint8_t *buf, uint32_t id);

/* Replies. */
size_t tsr_encode_error(uint8_t *buf, int type, uint32_t id, int status, const char *text);
size_t tsr_encode_empty_reply(uint8_t *buf, int type, uint32_t id);
size_t tsr_encode_challenge(uint8_t *buf, uint32_t id, uint32_t abi, const uint8_t *nonce);
size_t tsr_encode_welcome(uint8_t *buf, uint32_t id, const uint8_t *mac,
                          const tsr_device_desc *devices, uint32_t ndevices);
size_t tsr_encode_alloc_reply(uint8_t *buf, uint32_t id, uint64_t handle, uint64_t region);
size_t tsr_encode_shm(uint8_t *buf, uint32_t id);
size_t tsr_encode_shm_reply(uint8_t *buf, uint32_t id, uint64_t region_size, uint32_t device);
size_t tsr_encode_stats_reply(uint8_t *buf, uint32_t id, uint64_t held, uint64_t peak,
                              uint64_t allocs, uint64_t frees, uint64_t server_total);

/* Sets a message's request id in place (the header's bytes 12..15). */
void tsr_set_id(uint8_t *buf, uint32_t id);

/* ----------------------------------------------------------------- auth */

/* HMAC-SHA256 (OpenSSL libcrypto) over the label and both nonces, under the
 * secret: the client proves itself with label "client" and (server nonce,
 * client nonce), the server with "server" and (client nonce, server nonce).
 * Returns 0, or -1 when libcrypto fails. */
int tsr_mac(const uint8_t *secret, size_t secret_len, const char *label, const uint8_t *first,
            const uint8_t *second, uint8_t *mac_out);
/* Compares two MACs in constant time: 1 when equal. */
int tsr_mac_equal(const uint8_t *a, const uint8_t *b);
/* Fills buf with n bytes from the system's random source (OpenSSL RAND_bytes);
 * 0 or -1. */
int tsr_random(uint8_t *buf, size_t n);

/* Reads a secret file: refused (-1, reason in why) unless it is a regular file
 * owned by this user and readable by nobody else (no group or other bits), and
 * holds 16 to 4096 bytes (a trailing newline is dropped). Never blocks on the
 * open: a FIFO or a device is refused, not waited for. *secret is malloc'd,
 * the caller frees it (after wiping it) with tsr_secret_free. */
int tsr_secret_read(const char *path, uint8_t **secret, size_t *len, char *why, size_t why_size);
void tsr_secret_free(uint8_t *secret, size_t len);

#endif
