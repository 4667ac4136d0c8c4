/* A raw client of `tstor serve` for the wire suites: plain blocking sockets
 * of the test's own (not the library's transport), that send whatever bytes a
 * test crafts and read and decode what comes back, every wait bounded. */
#ifndef TSTOR_REMOTEWIRE_H
#define TSTOR_REMOTEWIRE_H

#include <netinet/tcp.h>
#include <poll.h>
#include <sys/un.h>
#include <tstor/backend.h>

#include "protocol.h"
#include "remotetest.h"

typedef struct wire {
  int fd;
  size_t reply_len;
  uint8_t reply[TSR_MAX_MESSAGE];
  uint8_t buf[TSR_MAX_MESSAGE + 64];
} wire;

/* Connects to 127.0.0.1:port, or to the Unix socket at path when port is 0;
 * returns -1 when the connection cannot be made. */
static inline int wire_try_open(wire *w, unsigned port, const char *path) {
  memset(w, 0, sizeof *w);
  if (port) {
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    w->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(w->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(w->fd, (struct sockaddr *)&sa, sizeof sa) == 0) return 0;
  } else {
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s", path ? path : "");
    w->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(w->fd, (struct sockaddr *)&un, sizeof un) == 0) return 0;
  }
  close(w->fd);
  w->fd = -1;
  return -1;
}

static inline void wire_open(wire *w, unsigned port, const char *path) {
  ck_assert_msg(wire_try_open(w, port, path) == 0, "cannot connect: %s", strerror(errno));
}

static inline void wire_close(wire *w) {
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
}

/* Sends n bytes; 0, or -1 when the server has closed the connection. */
static inline int wire_send(wire *w, const void *p, size_t n) {
  const uint8_t *b = p;
  while (n > 0) {
    ssize_t k = send(w->fd, b, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Receives exactly n bytes within secs: 0, -1 when the connection closed,
 * -2 on timeout. */
static inline int wire_recv(wire *w, void *p, size_t n, double secs) {
  uint8_t *b = p;
  double deadline = mono_s() + secs;
  while (n > 0) {
    struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
    int left = (int)((deadline - mono_s()) * 1000);
    if (left <= 0 || poll(&pfd, 1, left) == 0) return -2;
    ssize_t k = recv(w->fd, b, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Reads one reply and decodes it (the test fails when it does not decode):
 * 0, -1 when the connection closed first, -2 after 10 s. */
static inline int wire_reply(wire *w, tsr_msg *m) {
  int rc = wire_recv(w, w->reply, TSR_HEADER_SIZE, 10);
  if (rc) return rc;
  uint32_t body;
  char why[200];
  ck_assert_msg(tsr_frame(w->reply, TSR_MAX_BODY, &body, why, sizeof why) == 0, "reply: %s", why);
  if ((rc = wire_recv(w, w->reply + TSR_HEADER_SIZE, body, 10)) != 0) return rc;
  w->reply_len = TSR_HEADER_SIZE + body;
  ck_assert_msg(tsr_decode(w->reply, w->reply_len, 1, m, why, sizeof why) == 0, "reply: %s", why);
  return 0;
}

/* Sends len raw bytes and returns the reply's status (0 for success), or -1
 * when the connection closed without one. */
static inline int wire_call(wire *w, const void *msg, size_t len, tsr_msg *m) {
  memset(m, 0, sizeof *m);
  if (wire_send(w, msg, len) != 0) return -1;
  int rc = wire_reply(w, m);
  ck_assert_msg(rc != -2, "no reply within 10 s");
  return rc == 0 ? m->status : -1;
}

/* Whether the server closes the connection within secs (what it still sends
 * is read and dropped). */
static inline int wire_closed(wire *w, double secs) {
  uint8_t sink[4096];
  double deadline = mono_s() + secs;
  for (;;) {
    struct pollfd pfd = {.fd = w->fd, .events = POLLIN};
    int left = (int)((deadline - mono_s()) * 1000);
    if (left <= 0 || poll(&pfd, 1, left) == 0) return 0;
    ssize_t k = recv(w->fd, sink, sizeof sink, 0);
    if (k == 0 || (k < 0 && errno == ECONNRESET)) return 1;
  }
}

/* hello and auth with the given secret; returns the auth reply's status
 * (-1: the connection closed). */
static inline int wire_auth(wire *w, const char *secret, tsr_msg *m) {
  uint8_t cnonce[TSR_NONCE_SIZE], snonce[TSR_NONCE_SIZE], mac[TSR_MAC_SIZE];
  ck_assert_int_eq(tsr_random(cnonce, sizeof cnonce), 0);
  int st = wire_call(w, w->buf, tsr_encode_hello(w->buf, 1, TSTOR_ABI_VERSION, cnonce), m);
  if (st != 0) return st;
  memcpy(snonce, m->nonce, sizeof snonce);
  ck_assert_int_eq(tsr_mac((const uint8_t *)secret, strlen(secret), "client", snonce, cnonce, mac),
                   0);
  st = wire_call(w, w->buf, tsr_encode_auth(w->buf, 2, mac), m);
  if (st == 0) {
    uint8_t expect[TSR_MAC_SIZE];
    tsr_mac((const uint8_t *)secret, strlen(secret), "server", cnonce, snonce, expect);
    ck_assert(tsr_mac_equal(expect, m->mac));
  }
  return st;
}

/* WRITE of n bytes from data: the request, then the bytes; the status. */
static inline int wire_write(wire *w, uint64_t handle, uint64_t offset, const void *data, size_t n,
                             tsr_msg *m) {
  size_t len = tsr_encode_transfer(w->buf, TSR_WRITE, 3, handle, offset, n);
  if (wire_send(w, w->buf, len) != 0 || wire_send(w, data, n) != 0) return -1;
  int rc = wire_reply(w, m);
  ck_assert_msg(rc != -2, "no reply within 10 s");
  return rc == 0 ? m->status : -1;
}

/* READ of n bytes into data: the status (the bytes read only on success). */
static inline int wire_read(wire *w, uint64_t handle, uint64_t offset, void *data, size_t n,
                            tsr_msg *m) {
  int st = wire_call(w, w->buf, tsr_encode_transfer(w->buf, TSR_READ, 4, handle, offset, n), m);
  if (st == 0) ck_assert_int_eq(wire_recv(w, data, n, 10), 0);
  return st;
}

/* ALLOC; the handle (the test fails unless it succeeds). */
static inline uint64_t wire_alloc(wire *w, uint32_t device, uint64_t n) {
  tsr_msg m;
  ck_assert_int_eq(wire_call(w, w->buf, tsr_encode_alloc(w->buf, 5, device, n), &m), 0);
  return m.handle;
}

#endif
