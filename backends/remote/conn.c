/* One server's connection as a pipeline (client.h): requests, and the bytes
 * of WRITEs, go out back to back through a send buffer; replies, and the bytes
 * of READs, are read as they come and matched to their requests in order.
 *
 * Deadlock. The server answers in order and may block writing a reply (a
 * READ's bytes) until the client takes it, and does not read meanwhile; the
 * client may have more to send. So the client never blocks writing: when the
 * socket cannot take more it waits for either direction and reads what has
 * come (flush()), and neither side is ever blocked writing while the other is
 * too. What is in flight is bounded besides (RPIPE_DEPTH requests,
 * RPIPE_READ_BYTES of READ replies not yet taken), so that a failure loses a
 * bounded amount of work and the ring of pending requests is fixed.
 *
 * Failures. A reply that lies (its id, its type, a body that does not decode)
 * or a connection that fails fails the peer for good: its connection is
 * closed, and every later op fails at once with the first reason. A refusal
 * fails only the request it answers: the pipeline stops queuing, takes the
 * replies still in flight, and reports the first refusal. Every wait is
 * bounded by timeout_ms without progress. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "failure.h"

/* ------------------------------------------------------------- failures */

void peer_hang_up(peer *p) {
  if (p->fd < 0) return;
  /* In a child of fork() the socket is the parent's too: only closed, never
   * shut down, which would end the parent's session. */
  if (remote_getpid() == p->r->pid) shutdown(p->fd, SHUT_RDWR);
  close(p->fd);
  p->fd = -1;
}

void peer_fail(peer *p, const char *fmt, ...) {
  if (!p->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->failure, sizeof p->failure, fmt, ap);
    va_end(ap);
    p->failed = 1;
    if (!p->connecting) /* peer_connect reports its own end */
      p->r->reg->log(p->r->m, TSTOR_LOG_WARN, "peer %s: %s", p->name, p->failure);
  }
  peer_hang_up(p);
}

int peer_error(peer *p, int device, int code) {
  if (device >= 0)
    return remote_fail(p->r->reg, code, "remote:%d (peer %s): %s", device, p->name, p->failure);
  return remote_fail(p->r->reg, code, "peer %s: %s", p->name, p->failure);
}

static int status_code(int status) {
  switch (status) {
    case TSR_ST_NOMEM:
    case TSR_ST_QUOTA: return TSTOR_ENOMEM;
    case TSR_ST_NODEV: return TSTOR_ENODEV;
    case TSR_ST_RANGE: return TSTOR_ERANGE;
    case TSR_ST_INVAL: return TSTOR_EINVAL;
    case TSR_ST_DENIED: return TSTOR_EACCES;
    case TSR_ST_VERSION: return TSTOR_EABI;
    case TSR_ST_BUSY: return TSTOR_EBUSY;
    default: return TSTOR_EBACKEND;
  }
}

/* The request the next reply answers; NULL when none is in flight. */
static rpending *oldest(peer *p) {
  rpipe *q = &p->pipe;
  return q->count ? &q->ring[q->head] : NULL;
}

/* Fails the peer for an I/O result while the pipeline waited. */
static int io_failed(peer *p, int rc, int waiting_reply) {
  const rpending *h = oldest(p);
  const char *what = h ? tsr_type_name(h->type) : "reading";
  int device = h ? h->device : -1, ms = (int)p->r->timeout_ms;
  char io[128];
  if (rc == TSR_IO_CLOSED) p->dropped = 1;
  if (rc == TSR_IO_TIMEOUT && waiting_reply)
    peer_fail(p, "%s: no reply within %d ms", what, ms);
  else if (rc == TSR_IO_CLOSED)
    peer_fail(p, "%s: connection lost: %s", what, tsr_io_text(rc, ms, io, sizeof io));
  else
    peer_fail(p, "%s: %s", what, tsr_io_text(rc, ms, io, sizeof io));
  return peer_error(p, device, TSTOR_EIO);
}

/* Fails the peer for a reply that lies. */
static int lied(peer *p, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int lied(peer *p, int code, const char *fmt, ...) {
  const rpending *h = oldest(p);
  char why[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  peer_fail(p, "%s: %s", h ? tsr_type_name(h->type) : "unasked", why);
  return peer_error(p, h ? h->device : -1, code);
}

/* --------------------------------------------------------------- replies */

static void retire(rpipe *q) {
  rpending *h = &q->ring[q->head];
  if (h->type == TSR_READ) q->read_bytes -= h->nbytes;
  q->head = (q->head + 1) % RPIPE_DEPTH;
  q->count--;
}

/* Keeps the first refusal of the pipeline: its code, its text, its tag. */
static void refused(peer *p, const rpending *h, const tsr_msg *m) {
  rpipe *q = &p->pipe;
  if (q->refused) return;
  if (h->device >= 0)
    snprintf(p->refusal, sizeof p->refusal, "remote:%d (peer %s): %s: %s", h->device, p->name,
             tsr_status_text(m->status), m->text);
  else
    snprintf(p->refusal, sizeof p->refusal, "%s: %s", tsr_status_text(m->status), m->text);
  q->refused = status_code(m->status);
  q->refused_tag = h->tag;
}

/* The reply msg[0..len) to the oldest request. An empty success is checked on
 * its header alone; anything else is decoded whole. */
static int complete(peer *p, const uint8_t *msg, size_t len) {
  rpipe *q = &p->pipe;
  rpending *h = oldest(p);
  if (!h) return lied(p, TSTOR_EIO, "a reply to no request");
  tsr_head head;
  tsr_head_read(msg, &head);
  int empty_ok = head.body == 0 && head.status == 0 && head.version == TSR_PROTO_VERSION &&
                 head.type == (h->type | TSR_REPLY) && head.id == h->id &&
                 tsr_body_size(h->type, 1) == 0 && !h->out;
  tsr_msg local, *m = h->out ? h->out : &local;
  if (!empty_ok) {
    char why[200];
    int st = tsr_decode(msg, len, 1, m, why, sizeof why);
    if (st != 0)
      return lied(p, st == TSR_ST_VERSION ? TSTOR_EABI : TSTOR_EIO, "malformed reply: %s", why);
    if (m->id != h->id) return lied(p, TSTOR_EIO, "a reply to request %u, not to %u", m->id, h->id);
    if ((m->type & ~TSR_REPLY) != h->type)
      return lied(p, TSTOR_EIO, "answered with a %s reply", tsr_type_name(m->type));
    if (m->status != 0) {
      refused(p, h, m);
      retire(q);
      return 0;
    }
  }
  if (h->type == TSR_READ && h->nbytes) { /* its bytes follow */
    q->rdata = h->into;
    q->rleft = h->nbytes;
    return 0;
  }
  retire(q);
  return 0;
}

/* A READ's bytes: the buffered ones, then straight into place while many
 * remain. 1 when more are to come and none are there yet, 0 when the READ is
 * done or the buffer should be filled, or a TSTOR_E* code. */
static int take_bytes(peer *p) {
  rpipe *q = &p->pipe;
  size_t took = tsr_inbuf_take(&q->in, q->rdata, q->rleft);
  q->rdata += took;
  q->rleft -= took;
  while (q->rleft >= RPIPE_BUF) {
    ssize_t k = recv(p->fd, q->rdata, (size_t)q->rleft, MSG_DONTWAIT);
    if (k > 0) {
      q->rdata += k;
      q->rleft -= (uint64_t)k;
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 1;
    } else {
      return io_failed(p, k == 0 || errno == ECONNRESET ? TSR_IO_CLOSED : TSR_IO_ERROR, 0);
    }
  }
  if (q->rleft == 0) retire(q);
  return 0;
}

/* Reads what has arrived and completes the replies it holds, never waiting.
 * Once everything asked for has come it stops: what comes after is for later
 * (a server that closes after its last refusal is not a failure of it). With
 * nothing asked, bytes that come are a lie. 0, or a TSTOR_E* code when the
 * peer failed. */
static int pump(peer *p) {
  rpipe *q = &p->pipe;
  int asked = q->count > 0;
  for (;;) {
    if (q->rleft) {
      int rc = take_bytes(p);
      if (rc) return rc < 0 ? rc : 0;
      if (q->rleft == 0) continue;
    } else if (q->count) {
      const uint8_t *msg;
      size_t len;
      char why[200];
      int got = tsr_inbuf_message(&q->in, TSR_MAX_BODY, &msg, &len, why, sizeof why);
      if (got < 0) return lied(p, TSTOR_EIO, "malformed reply: %s", why);
      if (got > 0) {
        int rc = complete(p, msg, len);
        if (rc) return rc;
        continue;
      }
    } else if (q->in.end > q->in.start) {
      return lied(p, TSTOR_EIO, "sent %zu bytes no request asked for", q->in.end - q->in.start);
    } else if (asked) {
      return 0;
    }
    int n = tsr_inbuf_fill(p->fd, &q->in);
    if (n == 0) return 0;
    if (n < 0) return io_failed(p, n, 0);
  }
}

/* Waits for the next reply bytes, then reads them. */
static int await_reply(peer *p) {
  int rc = tsr_wait_readable(p->fd, (int)p->r->timeout_ms);
  return rc ? io_failed(p, rc, 1) : pump(p);
}

/* --------------------------------------------------------------- sending */

/* Sends the buffered requests and then n bytes at `more`. Whenever the
 * socket cannot take more, it reads the replies that have come. */
static int flush(peer *p, const void *more, size_t n) {
  rpipe *q = &p->pipe;
  struct iovec iov[2] = {{q->sbuf, q->slen}, {(void *)more, n}}, *at = iov;
  int left = 2;
  q->slen = 0;
  while (left > 0) {
    if (at->iov_len == 0) {
      at++;
      left--;
      continue;
    }
    struct msghdr mh = {.msg_iov = at, .msg_iovlen = (size_t)left};
    ssize_t k = sendmsg(p->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      for (size_t moved = (size_t)k; moved > 0;) {
        size_t step = moved < at->iov_len ? moved : at->iov_len;
        at->iov_base = (uint8_t *)at->iov_base + step;
        at->iov_len -= step;
        moved -= step;
        if (at->iov_len == 0 && moved) {
          at++;
          left--;
        }
      }
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      return io_failed(p, errno == EPIPE || errno == ECONNRESET ? TSR_IO_CLOSED : TSR_IO_ERROR, 0);
    struct pollfd pfd = {.fd = p->fd, .events = POLLIN | POLLOUT};
    int ready = poll(&pfd, 1, (int)p->r->timeout_ms);
    if (ready < 0 && errno != EINTR) return io_failed(p, TSR_IO_ERROR, 0);
    if (ready == 0) return io_failed(p, TSR_IO_TIMEOUT, 0);
    if (ready > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR))) {
      int rc = pump(p);
      if (rc) return rc;
    }
  }
  return 0;
}

void pipe_begin(peer *p) {
  rpipe *q = &p->pipe;
  q->head = q->count = 0;
  q->read_bytes = 0;
  q->slen = 0;
  q->rleft = 0;
  q->refused = 0;
}

int pipe_send(peer *p, int device, uint8_t *req, size_t len, const void *payload, void *into,
              uint64_t n, tsr_msg *out, size_t tag) {
  rpipe *q = &p->pipe;
  if (p->failed) return peer_error(p, device, TSTOR_EIO);
  if (q->refused) return q->refused;
  int type = req[6] | req[7] << 8, rc;
  uint64_t reading = type == TSR_READ ? n : 0;
  while (q->count == RPIPE_DEPTH ||
         (reading && q->read_bytes && q->read_bytes + reading > RPIPE_READ_BYTES)) {
    if (q->slen && (rc = flush(p, NULL, 0)) != 0) return rc;
    if ((rc = await_reply(p)) != 0) return rc;
  }
  size_t inline_n = payload && n <= RPIPE_INLINE ? (size_t)n : 0;
  if (q->slen + len + inline_n > RPIPE_BUF && (rc = flush(p, NULL, 0)) != 0) return rc;
  uint32_t id = ++p->next_id;
  tsr_set_id(req, id);
  memcpy(q->sbuf + q->slen, req, len);
  q->slen += len;
  q->ring[(q->head + q->count) % RPIPE_DEPTH] = (rpending){.id = id,
                                                           .type = type,
                                                           .device = device,
                                                           .into = into,
                                                           .nbytes = reading,
                                                           .out = out,
                                                           .tag = tag};
  q->count++;
  q->read_bytes += reading;
  if (payload && n > RPIPE_INLINE) return flush(p, payload, (size_t)n);
  if (inline_n) {
    memcpy(q->sbuf + q->slen, payload, inline_n);
    q->slen += inline_n;
  }
  return 0;
}

int pipe_flush(peer *p) {
  if (p->failed) return peer_error(p, -1, TSTOR_EIO);
  return p->pipe.slen ? flush(p, NULL, 0) : 0;
}

int pipe_wait(peer *p, uint32_t id) {
  rpipe *q = &p->pipe;
  int rc = p->failed ? peer_error(p, -1, TSTOR_EIO) : 0;
  if (rc == 0 && q->slen) rc = flush(p, NULL, 0);
  /* ids grow by one per request: the oldest in flight tells what is done */
  while (rc == 0 && q->count && (int32_t)(q->ring[q->head].id - id) <= 0) rc = await_reply(p);
  return rc ? rc : q->refused;
}

int pipe_end(peer *p, size_t *tag) {
  rpipe *q = &p->pipe;
  int rc = p->failed ? peer_error(p, -1, TSTOR_EIO) : 0;
  if (rc == 0 && q->slen) rc = flush(p, NULL, 0);
  while (rc == 0 && (q->count || q->rleft)) rc = await_reply(p);
  if (rc) {
    if (tag && q->count) *tag = q->ring[q->head].tag;
    pipe_begin(p); /* the peer failed: nothing in flight will come */
    return rc;
  }
  if (!q->refused) return 0;
  if (tag) *tag = q->refused_tag;
  int code = q->refused;
  q->refused = 0;
  return remote_fail(p->r->reg, code, "%s", p->refusal);
}

/* ------------------------------------------------------- whole requests */

int peer_rpc(peer *p, int device, uint8_t *req, size_t len, tsr_msg *out) {
  pipe_begin(p);
  int rc = pipe_send(p, device, req, len, NULL, NULL, 0, out, 0);
  int end = pipe_end(p, NULL);
  return end ? end : rc;
}

int peer_transfer(peer *p, int device, int put, void *local, const rblock *b, uint64_t offset,
                  size_t n) {
  uint8_t req[TSR_MAX_MESSAGE];
  pipe_begin(p);
  int rc = 0;
  for (size_t done = 0, piece; done < n && rc == 0; done += piece) {
    piece = n - done < CHUNK ? n - done : CHUNK;
    uint8_t *at = (uint8_t *)local + done;
    size_t len =
        tsr_encode_transfer(req, put ? TSR_WRITE : TSR_READ, 0, b->handle, offset + done, piece);
    rc = pipe_send(p, device, req, len, put ? at : NULL, put ? NULL : at, piece, NULL, 0);
  }
  int end = pipe_end(p, NULL);
  return end ? end : rc;
}
