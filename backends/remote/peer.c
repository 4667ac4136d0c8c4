/* One server of tstor-remote.so (client.h): the record, the connection and
 * its handshake, and the table of this process's blocks on it. Requests and
 * replies are conn.c's. A failed peer stays failed: its connection is closed,
 * and every later op fails at once with the first reason. */
#define _GNU_SOURCE /* F_GET_SEALS */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "failure.h"

peer *peer_new(remote *r, const char *name) {
  peer *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->pipe.sbuf = malloc(RPIPE_BUF);
  p->pipe.in = (tsr_inbuf){.data = malloc(RPIPE_BUF), .cap = RPIPE_BUF};
  if (!p->pipe.sbuf || !p->pipe.in.data || pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p->pipe.sbuf);
    free(p->pipe.in.data);
    free(p);
    return NULL;
  }
  if (pthread_mutex_init(&p->blocks_mu, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    free(p->pipe.sbuf);
    free(p->pipe.in.data);
    free(p);
    return NULL;
  }
  p->r = r;
  p->fd = -1;
  snprintf(p->name, sizeof p->name, "%s", name);
  return p;
}

/* ------------------------------------------------------------- sessions */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Asks for the session's shared region (protocol.h) and maps it. A peer that
 * refuses it is used over its socket alone; a reply that lies fails the peer.
 * The region must be sealed against shrinking: one the server could shrink
 * would fault this process. 0 or a TSTOR_E* code. */
static int open_region(peer *p) {
  remote *r = p->r;
  int ms = (int)r->timeout_ms, fd = -1, io = 0;
  uint8_t buf[TSR_MAX_MESSAGE];
  uint32_t id = ++p->next_id;
  struct iovec iov = {buf, tsr_encode_shm(buf, id)};
  tsr_head head = {0};
  tsr_msg m;
  char why[200] = "";
  if (p->pipe.in.end > p->pipe.in.start) {
    snprintf(why, sizeof why, "bytes no request asked for");
  } else if ((io = tsr_send_all(p->fd, &iov, 1, ms)) == 0 &&
             (io = tsr_recv_fd(p->fd, buf, TSR_HEADER_SIZE, ms, &fd)) == 0) {
    tsr_head_read(buf, &head);
    if (head.body > TSR_MAX_BODY)
      snprintf(why, sizeof why, "a body of %u bytes", head.body);
    else if ((io = tsr_recv_all(p->fd, buf + TSR_HEADER_SIZE, head.body, ms)) == 0 &&
             tsr_decode(buf, TSR_HEADER_SIZE + head.body, 1, &m, why, sizeof why) == 0 &&
             (m.id != id || m.type != (TSR_SHM | TSR_REPLY)))
      snprintf(why, sizeof why, "a %s reply to request %u", tsr_type_name(m.type), m.id);
  }
  if (io == 0 && !why[0] && m.status != 0) { /* refused: the socket alone */
    r->reg->log(r->m, TSTOR_LOG_INFO, "peer %s: no shared memory: %s", p->name, m.text);
    if (fd >= 0) close(fd);
    return 0;
  }
  struct stat st;
  int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : -1;
  if (io == 0 && !why[0] &&
      (fd < 0 || seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) != 0 ||
       (uint64_t)st.st_size < m.region || m.region == 0 || m.region >> RBLOCK_SHIFT ||
       m.device >= p->ndevices))
    snprintf(why, sizeof why, "no sealed region of the size it says, or no such device");
  if (io || why[0]) {
    char text[128];
    if (fd >= 0) close(fd);
    if (io) peer_fail(p, "SHM: %s", tsr_io_text(io, ms, text, sizeof text));
    if (!io) peer_fail(p, "SHM: malformed reply: %s", why);
    return TSTOR_EIO;
  }
  void *base = mmap(NULL, m.region, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    r->reg->log(r->m, TSTOR_LOG_INFO, "peer %s: no shared memory: mmap: %s", p->name,
                strerror(err));
    return 0;
  }
  p->region = base;
  p->region_size = m.region;
  p->region_device = m.device;
  return 0;
}

/* One try: connect, hello, auth. *again is set when what failed was the
 * connection (worth another try), not an answer: 1 when it could not be
 * made, 2 when the peer hung up during the handshake (its gate pushes out
 * waiting connections when a flood fills its slots). */
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
    *again = p->dropped ? 2 : 0;
    return rc;
  }
  uint8_t expect[TSR_MAC_SIZE];
  if (tsr_mac(r->secret, r->secret_len, "server", cnonce, snonce, expect) != 0 ||
      !tsr_mac_equal(expect, reply.mac)) {
    peer_fail(p, "the peer does not hold the secret (its proof is wrong)");
    return TSTOR_EACCES;
  }
  p->ndevices = reply.ndevices;
  memcpy(p->devices, reply.devices, reply.ndevices * sizeof p->devices[0]);
  return r->shared_memory && p->addr.sa.ss_family == AF_UNIX ? open_region(p) : 0;
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
    /* A peer that cannot be reached gets three tries; one that hangs up
     * during the handshake is tried until the deadline, so that a flood of
     * connections at its gate delays a client with the secret and cannot
     * lock it out. */
    int tries = again == 2 ? INT_MAX : 3;
    int pause_ms = 10 * (attempt < 10 ? attempt : 10);
    if (rc == 0 || !again || attempt >= tries || now_ms() + pause_ms >= deadline) {
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
    usleep(1000 * (useconds_t)pause_ms);
  }
}

void peer_close(peer *p) {
  remote *r = p->r;
  if (p->live)
    r->reg->log(r->m, TSTOR_LOG_WARN, "peer %s: %u block(s) still allocated at unload", p->name,
                p->live);
  for (uint32_t i = 0; i < p->nslots; i++) free(p->slots[i]);
  if (!p->failed && p->fd >= 0 && remote_getpid() == r->pid) {
    uint8_t buf[TSR_MAX_MESSAGE];
    tsr_msg reply;
    long long saved = r->timeout_ms;
    r->timeout_ms = saved < 1000 ? saved : 1000; /* bye is a courtesy */
    peer_rpc(p, -1, buf, tsr_encode_bye(buf, 0), &reply);
    r->timeout_ms = saved;
  }
  peer_hang_up(p);
  if (p->region) munmap(p->region, p->region_size);
  free(p->slots);
  free(p->free_slots);
  pthread_mutex_destroy(&p->blocks_mu);
  pthread_mutex_destroy(&p->mu);
  free(p->pipe.sbuf);
  free(p->pipe.in.data);
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
