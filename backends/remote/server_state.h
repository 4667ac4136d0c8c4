/* What the parts of `tstor serve` share: the server's state, its log
 * (serve_log.c), and the calls between the sessions (session.c), the gate
 * (gate.c) and the start and stop (serve.c), in that order of layers
 * (remote.h). */
#ifndef TSTOR_REMOTE_SERVER_STATE_H
#define TSTOR_REMOTE_SERVER_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <tstor/tstor.h>

#include "protocol.h"
#include "server.h"
#include "wire.h"

/* Authenticated clients served at once; one more is answered BUSY. */
#define SRV_MAX_SESSIONS 256
/* How long a session may wait for the rest of a message, or for its client
 * to take a reply, before it is dropped. */
#define SRV_STALL_MS 30000
/* A client that sends garbage without end must not fill the log. */
#define SRV_REFUSALS_LOGGED 1000
/* The largest shared region a client gets: its cap, up to this. */
#define SRV_REGION_MAX ((uint64_t)64 << 30)

typedef struct srv_session srv_session;

typedef struct server {
  const tsr_server_options *opt;
  FILE *log;
  tstor_context *ctx;
  uint8_t *secret;
  size_t secret_len;
  /* The exported devices, in the order clients see them. */
  tsr_device_desc devices[TSR_MAX_DEVICES];
  tstor_device tdev[TSR_MAX_DEVICES];
  int staged[TSR_MAX_DEVICES]; /* not host memory: its bytes pass through a host buffer */
  uint32_t ndevices;
  tstor_device host; /* a host-memory device, for wrapping host buffers */
  int host_index;    /* the exported index of `host`; -1 when it is not exported */
  tsr_addr listen_addr[TSR_MAX_LISTEN];
  int listen_fd[TSR_MAX_LISTEN];
  int nlisten;
  int wake_fd; /* an eventfd: written once to stop the gate */
  atomic_int stop;
  atomic_uint_fast64_t total_held; /* every client's blocks and buffers */
  pthread_mutex_t mu;              /* guards sessions */
  srv_session *sessions;
} server;

/* region.c: a client's shared region, and the allocator of its blocks. */
typedef struct srv_extent {
  uint64_t off, len;
} srv_extent;

typedef struct srv_region {
  uint8_t *base; /* NULL: the session has no region */
  uint64_t size;
  srv_extent *free; /* free extents in address order, none touching */
  size_t nfree, cap;
} srv_region;

/* Makes and maps a region of `size` bytes (rounded down to pages): a memfd
 * whose size is sealed. *fd is its descriptor, for the client; the caller
 * closes it. 0, or -1 with the reason in why. */
int srv_region_open(srv_region *g, uint64_t size, int *fd, char *why, size_t why_size);
void srv_region_close(srv_region *g);
/* The bytes a block of n bytes takes in the region (rounded to a line). */
uint64_t srv_region_span(uint64_t n);
/* A block of n bytes (n > 0) at *off: 0, or -1 when no free extent holds it. */
int srv_region_alloc(srv_region *g, uint64_t n, uint64_t *off);
/* Gives the block [off, off + n) back; the pages left wholly free return to
 * the system and read as zeros. */
void srv_region_free(srv_region *g, uint64_t off, uint64_t n);

/* serve_log.c: one line to the log, with the time; safe from any thread. */
void srv_log(server *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The gate's thread: accepts on every listening socket and authenticates,
 * until s->stop. */
void *srv_gate(void *server);

/* Sessions not yet finished. */
unsigned srv_sessions_live(server *s);
/* Starts the session of a client that has just authenticated on fd (the
 * welcome sent); name is for the log. On success the session owns fd and
 * returns 0; -1 leaves fd to the caller. */
int srv_session_start(server *s, int fd, const char *name);
/* Joins and frees the sessions that have finished; with `all`, first ends
 * every session (its connection shut down) and waits for each. */
void srv_sessions_reap(server *s, int all);

#endif
