/* One server of tstor-remote.so (client.h): its connection, the handshake,
 * requests and their replies, and the table of this process's blocks on it.
 *
 * Every request waits for its reply before the next is sent (under p->mu),
 * so a reply answers the request before it or the connection lies; every
 * wait is bounded by timeout_ms without progress (wire.h). A failed peer
 * stays failed: its connection is closed, and every later op fails at once
 * with the first reason. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "failure.h"

peer *peer_new(remote *r, const char *name) {
  peer *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  if (pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p);
    return NULL;
  }
  if (pthread_mutex_init(&p->blocks_mu, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    free(p);
    return NULL;
  }
  p->r = r;
  p->fd = -1;
  snprintf(p->name, sizeof p->name, "%s", name);
  return p;
}

/* Closes the connection. In a child of fork() the socket is the parent's
 * too: it is only closed here, never shut down, which would end the
 * parent's session. */
static void hang_up(peer *p) {
  if (p->fd < 0) return;
  if (getpid() == p->r->pid) shutdown(p->fd, SHUT_RDWR);
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
  hang_up(p);
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

/* Fails the peer for an I/O result of `what`. */
static int io_failed(peer *p, int device, int rc, const char *what, int waiting_reply) {
  int ms = (int)p->r->timeout_ms;
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

/* The request in req[0..len), then `payload` bytes; the reply into *out,
 * then `into` bytes when it says yes. */
static int exchange(peer *p, int device, uint8_t *req, size_t len, const void *payload, void *into,
                    size_t n, tsr_msg *out) {
  if (p->failed) return peer_error(p, device, TSTOR_EIO);
  uint32_t id = ++p->next_id;
  tsr_set_id(req, id);
  int type = req[6] | req[7] << 8;
  const char *what = tsr_type_name(type);
  int ms = (int)p->r->timeout_ms;
  struct iovec iov[2] = {{req, len}, {(void *)payload, payload ? n : 0}};
  int rc = tsr_send_all(p->fd, iov, 2, ms);
  if (rc) return io_failed(p, device, rc, what, 0);
  size_t rlen;
  char why[200];
  rc = tsr_read_message(p->fd, p->reply, TSR_MAX_BODY, ms, ms, &rlen, why, sizeof why);
  if (rc == 1) {
    peer_fail(p, "%s: malformed reply: %s", what, why);
    return peer_error(p, device, TSTOR_EIO);
  }
  if (rc) return io_failed(p, device, rc, what, 1);
  int st = tsr_decode(p->reply, rlen, 1, out, why, sizeof why);
  if (st != 0) {
    peer_fail(p, "%s: malformed reply: %s", what, why);
    return peer_error(p, device, st == TSR_ST_VERSION ? TSTOR_EABI : TSTOR_EIO);
  }
  if (out->id != id || (out->type & ~TSR_REPLY) != type) {
    if (out->id != id)
      peer_fail(p, "%s: a reply to request %u, not to %u", what, out->id, id);
    else
      peer_fail(p, "%s: answered with a %s reply", what, tsr_type_name(out->type));
    return peer_error(p, device, TSTOR_EIO);
  }
  if (out->status != 0) {
    if (device >= 0)
      snprintf(p->refusal, sizeof p->refusal, "remote:%d (peer %s): %s: %s", device, p->name,
               tsr_status_text(out->status), out->text);
    else
      snprintf(p->refusal, sizeof p->refusal, "%s: %s", tsr_status_text(out->status), out->text);
    return remote_fail(p->r->reg, status_code(out->status), "%s", p->refusal);
  }
  if (into && n && (rc = tsr_recv_all(p->fd, into, n, ms)) != 0)
    return io_failed(p, device, rc, what, 0);
  return 0;
}

int peer_rpc(peer *p, int device, uint8_t *req, size_t len, tsr_msg *out) {
  return exchange(p, device, req, len, NULL, NULL, 0, out);
}

int peer_transfer(peer *p, int device, int put, void *local, const rblock *b, uint64_t offset,
                  size_t n) {
  uint8_t req[TSR_MAX_MESSAGE];
  tsr_msg reply;
  for (size_t done = 0; done < n;) {
    size_t piece = n - done < CHUNK ? n - done : CHUNK;
    uint8_t *at = (uint8_t *)local + done;
    size_t len =
        tsr_encode_transfer(req, put ? TSR_WRITE : TSR_READ, 0, b->handle, offset + done, piece);
    int rc = put ? exchange(p, device, req, len, at, NULL, piece, &reply)
                 : exchange(p, device, req, len, NULL, at, piece, &reply);
    if (rc) return rc;
    done += piece;
  }
  return 0;
}

/* ------------------------------------------------------------- sessions */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One try: connect, hello, auth. *again is set when what failed was the
 * connection (worth another try), not an answer. */
static int handshake(peer *p, int *again) {
  remote *r = p->r;
  char why[256];
  *again = 0;
  p->dropped = 0;
  p->fd = tsr_connect(&p->addr, (int)r->timeout_ms, why, sizeof why);
  if (p->fd < 0) {
    snprintf(p->failure, sizeof p->failure, "%s", why);
    *again = 1;
    return TSTOR_EIO;
  }
  uint8_t buf[TSR_MAX_MESSAGE], cnonce[TSR_NONCE_SIZE], snonce[TSR_NONCE_SIZE], mac[TSR_MAC_SIZE];
  tsr_msg reply;
  if (tsr_random(cnonce, sizeof cnonce) != 0) {
    peer_fail(p, "no random bytes for the challenge");
    return TSTOR_EBACKEND;
  }
  int rc = peer_rpc(p, -1, buf, tsr_encode_hello(buf, 0, TSTOR_ABI_VERSION, cnonce), &reply);
  if (rc == 0 && TSTOR_ABI_MAJOR_OF(reply.abi) != TSTOR_ABI_MAJOR) {
    peer_fail(p, "the peer speaks backend ABI %u.%u, this module %u.%u",
              TSTOR_ABI_MAJOR_OF(reply.abi), TSTOR_ABI_MINOR_OF(reply.abi), TSTOR_ABI_MAJOR,
              TSTOR_ABI_MINOR);
    return TSTOR_EABI;
  }
  if (rc == 0) {
    memcpy(snonce, reply.nonce, sizeof snonce);
    if (tsr_mac(r->secret, r->secret_len, "client", snonce, cnonce, mac) != 0) {
      peer_fail(p, "HMAC failed");
      return TSTOR_EBACKEND;
    }
    rc = peer_rpc(p, -1, buf, tsr_encode_auth(buf, 0, mac), &reply);
  }
  if (rc) {
    /* a refusal (the peer closes after it): keep its reason, and hang up */
    if (!p->failed) peer_fail(p, "%s", p->refusal);
    *again = p->dropped;
    return rc;
  }
  uint8_t expect[TSR_MAC_SIZE];
  if (tsr_mac(r->secret, r->secret_len, "server", cnonce, snonce, expect) != 0 ||
      !tsr_mac_equal(expect, reply.mac)) {
    peer_fail(p, "the peer does not hold the secret (its proof is wrong)");
    return TSTOR_EACCES;
  }
  p->ndevices = reply.ndevices;
  memcpy(p->devices, reply.devices, sizeof p->devices);
  return 0;
}

int peer_connect(peer *p) {
  char why[256];
  if (tsr_addr_parse(p->name, 0, &p->addr, why, sizeof why) != 0) {
    snprintf(p->failure, sizeof p->failure, "%s", why);
    p->failed = 1;
    return TSTOR_ECONFIG;
  }
  double deadline = now_ms() + (double)p->r->timeout_ms;
  p->connecting = 1;
  for (int attempt = 1;; attempt++) {
    int again;
    int rc = handshake(p, &again);
    if (rc == 0 || !again || attempt == 3 || now_ms() + 10 * attempt >= deadline) {
      if (rc && !p->failed) {
        char reason[sizeof p->failure];
        snprintf(reason, sizeof reason, "%s", p->failure);
        peer_fail(p, "%s", reason);
      }
      p->connecting = 0;
      return rc;
    }
    p->r->reg->log(p->r->m, TSTOR_LOG_INFO, "peer %s: %s; trying again", p->name, p->failure);
    p->failed = 0; /* a new connection, a new chance */
    usleep(10000 * (useconds_t)attempt);
  }
}

void peer_close(peer *p) {
  remote *r = p->r;
  if (p->live)
    r->reg->log(r->m, TSTOR_LOG_WARN, "peer %s: %u block(s) still allocated at unload", p->name,
                p->live);
  for (uint32_t i = 0; i < p->nslots; i++) free(p->slots[i]);
  if (!p->failed && p->fd >= 0 && getpid() == r->pid) {
    uint8_t buf[TSR_MAX_MESSAGE];
    tsr_msg reply;
    long long saved = r->timeout_ms;
    r->timeout_ms = saved < 1000 ? saved : 1000; /* bye is a courtesy */
    peer_rpc(p, -1, buf, tsr_encode_bye(buf, 0), &reply);
    r->timeout_ms = saved;
  }
  hang_up(p);
  free(p->slots);
  free(p->free_slots);
  pthread_mutex_destroy(&p->blocks_mu);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

/* ---------------------------------------------------------- block table */

uint64_t rblock_addr(const rblock *b) { return (uint64_t)(b->slot + 1) << RBLOCK_SHIFT; }

int peer_block_add(peer *p, rblock *b) {
  pthread_mutex_lock(&p->blocks_mu);
  int rc = 0;
  if (p->nfree == 0) {
    uint32_t n = p->nslots ? p->nslots * 2 : 64;
    rblock **slots = n <= RBLOCK_MAX_SLOTS ? realloc(p->slots, n * sizeof *slots) : NULL;
    if (slots) p->slots = slots;
    uint32_t *free_slots = slots ? realloc(p->free_slots, n * sizeof *free_slots) : NULL;
    if (!free_slots) {
      rc = -1;
    } else {
      p->free_slots = free_slots;
      for (uint32_t i = n; i > p->nslots; i--) { /* the lowest slot on top */
        p->slots[i - 1] = NULL;
        p->free_slots[p->nfree++] = i - 1;
      }
      p->nslots = n;
    }
  }
  if (rc == 0) {
    b->slot = p->free_slots[--p->nfree];
    p->slots[b->slot] = b;
    p->live++;
  }
  pthread_mutex_unlock(&p->blocks_mu);
  return rc;
}

void peer_block_remove(peer *p, rblock *b) {
  pthread_mutex_lock(&p->blocks_mu);
  p->slots[b->slot] = NULL;
  p->free_slots[p->nfree++] = b->slot;
  p->live--;
  pthread_mutex_unlock(&p->blocks_mu);
}

rblock *peer_block_find(peer *p, int device, uint64_t addr, size_t n) {
  uint64_t slot = (addr >> RBLOCK_SHIFT) - 1, offset = addr & (((uint64_t)1 << RBLOCK_SHIFT) - 1);
  if (addr >> RBLOCK_SHIFT == 0 || slot >= p->nslots) return NULL;
  rblock *b = p->slots[slot];
  if (!b || b->device != device || offset > b->nbytes || n > b->nbytes - offset) return NULL;
  return b;
}
