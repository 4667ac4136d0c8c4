/* The gate of `tstor serve` (server_state.h): one thread that accepts
 * connections and runs every handshake, before any session exists. What an
 * unauthenticated peer can make the server do is bounded here:
 *
 * - it reads at most one hello and one auth, each of a fixed size, into a
 *   buffer of the connection's own; anything else (another type, version or
 *   size, bytes that are not a tstor header at all, a wrong proof) closes the
 *   connection, after an error reply where the peer spoke the protocol;
 * - at most GATE_PENDING connections wait in the handshake, at most
 *   GATE_PER_ADDRESS of them from one address; a new one past either limit
 *   pushes out the one that has been idle longest (of that address, for the
 *   second), so a flood of idle connections keeps none of the slots a client
 *   that answers at once needs;
 * - each has opt->handshake_ms from its accept to finish;
 * - the accepted are handled after the connections already waiting, every
 *   round, so new connections cannot starve a handshake in progress.
 *
 * Sessions run on their own threads: a flood here slows no authenticated
 * client but for the CPU the gate takes. */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <tstor/backend.h>

#include "server_state.h"

#define GATE_PENDING 64
#define GATE_PER_ADDRESS 16
#define GATE_ACCEPTS_PER_ROUND 16
/* Log lines about unauthenticated connections: the first these many, then
 * one at every power of two. */
#define GATE_NOTES_LOGGED 100

enum { WANT_HELLO, WANT_AUTH };

typedef struct pending {
  int fd; /* -1: a free slot */
  int state;
  size_t got;                                       /* bytes of the message in `in` */
  uint8_t in[TSR_HEADER_SIZE + 4 + TSR_NONCE_SIZE]; /* the largest: hello */
  uint8_t client_nonce[TSR_NONCE_SIZE], server_nonce[TSR_NONCE_SIZE];
  double accepted_ms, active_ms;
  struct sockaddr_storage from;
  char name[96];
} pending;

typedef struct gate {
  server *s;
  int epfd;
  int spare; /* a descriptor held to be closed when none is left */
  pending slots[GATE_PENDING];
  unsigned long accepted, notes;
  uint8_t out[TSR_MAX_MESSAGE];
} gate;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Logs the first GATE_NOTES_LOGGED events about unauthenticated peers, then
 * only every power of two, with the count: a flood cannot fill the log. */
static void note(gate *g, const pending *p, const char *what) {
  unsigned long n = ++g->notes;
  if (n <= GATE_NOTES_LOGGED)
    srv_log(g->s, "connection %s: %s", p->name, what);
  else if ((n & (n - 1)) == 0)
    srv_log(g->s, "connection %s: %s (%lu such events before authentication so far)", p->name, what,
            n);
}

static void drop(gate *g, pending *p, const char *why) {
  if (why) note(g, p, why);
  epoll_ctl(g->epfd, EPOLL_CTL_DEL, p->fd, NULL);
  close(p->fd);
  p->fd = -1;
}

/* Sends out[0..len) at once or not at all: a peer in the handshake whose
 * socket cannot take a few hundred bytes is not waited for. */
static int send_now(gate *g, pending *p, size_t len) {
  struct iovec iov = {g->out, len};
  return tsr_send_all(p->fd, &iov, 1, 0);
}

/* An error reply, where the peer spoke the protocol far enough to read one,
 * and the end of the connection. */
static void refuse(gate *g, pending *p, const tsr_msg *m, int status, const char *why) {
  int type = tsr_type_known(m->type) && !(m->type & TSR_REPLY) ? m->type : 0;
  send_now(g, p, tsr_encode_error(g->out, type, m->id, status, why));
  drop(g, p, why);
}

static int same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family) return 0;
  if (a->ss_family == AF_INET)
    return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
           ((const struct sockaddr_in *)b)->sin_addr.s_addr;
  if (a->ss_family == AF_INET6)
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
  return 1; /* every Unix socket peer is this machine */
}

static void describe(const struct sockaddr_storage *from, const char *listen, unsigned long n,
                     char *name, size_t size) {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (from->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)from;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    snprintf(name, size, "%s:%u #%lu", host, port, n);
  } else if (from->ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)from;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
    snprintf(name, size, "[%s]:%u #%lu", host, port, n);
  } else {
    snprintf(name, size, "%s #%lu", listen, n);
  }
}

/* The slot a new connection from `from` takes: a free one, or the one idle
 * longest among those of its address when that address has its share, or
 * among all when every slot is taken (that connection is dropped). */
static pending *slot_for(gate *g, const struct sockaddr_storage *from) {
  pending *free_slot = NULL, *idlest = NULL, *idlest_same = NULL;
  unsigned same = 0;
  for (int i = 0; i < GATE_PENDING; i++) {
    pending *p = &g->slots[i];
    if (p->fd < 0) {
      if (!free_slot) free_slot = p;
      continue;
    }
    if (!idlest || p->active_ms < idlest->active_ms) idlest = p;
    if (same_host(&p->from, from)) {
      same++;
      if (!idlest_same || p->active_ms < idlest_same->active_ms) idlest_same = p;
    }
  }
  if (same >= GATE_PER_ADDRESS) {
    drop(g, idlest_same, "pushed out: its address has the most connections waiting");
    return idlest_same;
  }
  if (free_slot) return free_slot;
  drop(g, idlest, "pushed out: idle the longest while every handshake slot was taken");
  return idlest;
}

static void accept_some(gate *g, int listen_index) {
  server *s = g->s;
  for (int n = 0; n < GATE_ACCEPTS_PER_ROUND; n++) {
    struct sockaddr_storage from;
    socklen_t len = sizeof from;
    int fd = accept4(s->listen_fd[listen_index], (struct sockaddr *)&from, &len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && g->spare >= 0) {
      /* Out of descriptors: the spare one makes room to take the connection
       * off the queue and close it, so that it is not offered again. */
      pending shed = {.fd = -1};
      snprintf(shed.name, sizeof shed.name, "%s", s->listen_addr[listen_index].text);
      note(g, &shed, "shed: no file descriptor left for it");
      close(g->spare);
      fd = accept4(s->listen_fd[listen_index], NULL, NULL, SOCK_CLOEXEC);
      if (fd >= 0) close(fd);
      g->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
      continue;
    }
    if (fd < 0) return;
    pending *p = slot_for(g, &from);
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->state = WANT_HELLO;
    p->from = from;
    p->accepted_ms = p->active_ms = now_ms();
    describe(&from, s->listen_addr[listen_index].text, ++g->accepted, p->name, sizeof p->name);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)(p - g->slots)};
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);
      p->fd = -1;
    }
  }
}

static void on_hello(gate *g, pending *p, const tsr_msg *m) {
  if (TSTOR_ABI_MAJOR_OF(m->abi) != TSTOR_ABI_MAJOR) {
    char why[TSR_MAX_TEXT];
    snprintf(why, sizeof why, "backend ABI %u.%u, the server's is %u.%u",
             TSTOR_ABI_MAJOR_OF(m->abi), TSTOR_ABI_MINOR_OF(m->abi), TSTOR_ABI_MAJOR,
             TSTOR_ABI_MINOR);
    return refuse(g, p, m, TSR_ST_VERSION, why);
  }
  memcpy(p->client_nonce, m->nonce, TSR_NONCE_SIZE);
  if (tsr_random(p->server_nonce, TSR_NONCE_SIZE) != 0)
    return refuse(g, p, m, TSR_ST_INTERNAL, "no random bytes");
  if (send_now(g, p, tsr_encode_challenge(g->out, m->id, TSTOR_ABI_VERSION, p->server_nonce)))
    return drop(g, p, "did not take the challenge");
  p->state = WANT_AUTH;
  p->got = 0;
}

static void on_auth(gate *g, pending *p, const tsr_msg *m) {
  server *s = g->s;
  uint8_t expect[TSR_MAC_SIZE], mine[TSR_MAC_SIZE];
  if (tsr_mac(s->secret, s->secret_len, "client", p->server_nonce, p->client_nonce, expect) ||
      tsr_mac(s->secret, s->secret_len, "server", p->client_nonce, p->server_nonce, mine))
    return refuse(g, p, m, TSR_ST_INTERNAL, "HMAC failed");
  if (!tsr_mac_equal(expect, m->mac)) return refuse(g, p, m, TSR_ST_DENIED, "wrong secret");
  srv_sessions_reap(s, 0);
  if (srv_sessions_live(s) >= SRV_MAX_SESSIONS) {
    char why[TSR_MAX_TEXT];
    snprintf(why, sizeof why, "%d clients already; try again later", SRV_MAX_SESSIONS);
    return refuse(g, p, m, TSR_ST_BUSY, why);
  }
  if (send_now(g, p, tsr_encode_welcome(g->out, m->id, mine, s->devices, s->ndevices)))
    return drop(g, p, "did not take the welcome");
  epoll_ctl(g->epfd, EPOLL_CTL_DEL, p->fd, NULL);
  srv_log(s, "client %s: authenticated; %u device(s)", p->name, s->ndevices);
  if (srv_session_start(s, p->fd, p->name) != 0) {
    srv_log(s, "client %s: cannot start its session thread", p->name);
    close(p->fd);
  }
  p->fd = -1;
}

/* Reads what the connection sent; acts on a whole message. */
static void on_readable(gate *g, pending *p) {
  uint32_t want_body = p->state == WANT_HELLO ? 4 + TSR_NONCE_SIZE : TSR_MAC_SIZE;
  size_t want = TSR_HEADER_SIZE + want_body;
  ssize_t n = recv(p->fd, p->in + p->got, want - p->got, 0);
  if (n == 0) return drop(g, p, NULL); /* gone: nothing to say */
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    return drop(g, p, NULL);
  }
  p->got += (size_t)n;
  p->active_ms = now_ms();
  char why[200];
  if (p->got >= 4 && memcmp(p->in, "TSRM", 4) != 0)
    return drop(g, p, "refused: not a tstor client (no TSRM magic)");
  if (p->got >= TSR_HEADER_SIZE && p->got - (size_t)n < TSR_HEADER_SIZE) {
    uint32_t body;
    tsr_msg m;
    tsr_decode(p->in, TSR_HEADER_SIZE, 0, &m, NULL, 0); /* the header's fields, for checks */
    int expected = p->state == WANT_HELLO ? TSR_HELLO : TSR_AUTH;
    tsr_frame(p->in, UINT32_MAX, &body, why, sizeof why);
    if (m.version != TSR_PROTO_VERSION) {
      snprintf(why, sizeof why, "protocol version %u, this server speaks %u", (unsigned)m.version,
               TSR_PROTO_VERSION);
      return refuse(g, p, &m, TSR_ST_VERSION, why);
    }
    if (m.type != expected) {
      snprintf(why, sizeof why, "%s before authentication (%s expected)",
               (m.type & TSR_REPLY)     ? "a reply"
               : tsr_type_known(m.type) ? tsr_type_name(m.type)
                                        : "a message of unknown type",
               tsr_type_name(expected));
      return refuse(g, p, &m, TSR_ST_NOSESSION, why);
    }
    if (body != want_body) {
      snprintf(why, sizeof why, "%s of %u bytes, its body is %u", tsr_type_name(expected), body,
               want_body);
      return refuse(g, p, &m, TSR_ST_BADMSG, why);
    }
  }
  if (p->got < want) return;
  tsr_msg m;
  int st = tsr_decode(p->in, p->got, 0, &m, why, sizeof why);
  if (st != 0) return refuse(g, p, &m, st, why);
  if (m.type == TSR_HELLO) return on_hello(g, p, &m);
  on_auth(g, p, &m);
}

/* Drops the connections past their time; returns how long until the next
 * one's time is up (at most 1000 ms, so finished sessions are joined soon). */
static int expire(gate *g) {
  double now = now_ms(), limit = (double)g->s->opt->handshake_ms, next = 1000;
  for (int i = 0; i < GATE_PENDING; i++) {
    pending *p = &g->slots[i];
    if (p->fd < 0) continue;
    double left = p->accepted_ms + limit - now;
    if (left <= 0)
      drop(g, p, "did not authenticate in time");
    else if (left < next)
      next = left;
  }
  return (int)next + 1;
}

void *srv_gate(void *arg) {
  server *s = arg;
  gate *g = calloc(1, sizeof *g);
  if (!g) {
    srv_log(s, "gate: out of memory; stopping");
    return NULL;
  }
  g->s = s;
  g->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (int i = 0; i < GATE_PENDING; i++) g->slots[i].fd = -1;
  g->epfd = epoll_create1(EPOLL_CLOEXEC);
  enum { TAG_LISTEN = 1u << 16, TAG_WAKE = 1u << 17 };
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = TAG_WAKE};
  epoll_ctl(g->epfd, EPOLL_CTL_ADD, s->wake_fd, &ev);
  for (int i = 0; i < s->nlisten; i++) {
    ev.data.u64 = TAG_LISTEN | (uint64_t)i;
    epoll_ctl(g->epfd, EPOLL_CTL_ADD, s->listen_fd[i], &ev);
  }
  while (!atomic_load(&s->stop)) {
    struct epoll_event events[GATE_PENDING + TSR_MAX_LISTEN + 1];
    int n = epoll_wait(g->epfd, events, (int)(sizeof events / sizeof events[0]), expire(g));
    int listening[TSR_MAX_LISTEN] = {0};
    for (int i = 0; i < n; i++) { /* the waiting connections first */
      uint64_t tag = events[i].data.u64;
      if (tag & TAG_LISTEN)
        listening[tag & 0xffff] = 1;
      else if (!(tag & TAG_WAKE) && g->slots[tag].fd >= 0)
        on_readable(g, &g->slots[tag]);
    }
    for (int i = 0; i < s->nlisten; i++)
      if (listening[i]) accept_some(g, i);
    srv_sessions_reap(s, 0);
  }
  for (int i = 0; i < GATE_PENDING; i++)
    if (g->slots[i].fd >= 0) close(g->slots[i].fd);
  close(g->epfd);
  if (g->spare >= 0) close(g->spare);
  free(g);
  return NULL;
}
