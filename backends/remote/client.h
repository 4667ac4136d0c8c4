/* What the files of tstor-remote.so share: the module's state, its peers and
 * their blocks. Its files, in layers (remote.h): conn.c (a peer's connection
 * as a pipeline of requests and replies) below peer.c (one server: the
 * record, the handshake, the block table) below stream.c (streams and
 * events) below client.c (the device ops and the module's entry point).
 *
 * Device addresses. A remote storage's data pointer names its block in the
 * peer's table of this process: (slot + 1) << RBLOCK_SHIFT, plus the offset
 * into the block. It is never dereferenced (the core does not touch the
 * memory of a device without TSTOR_DEVICE_HOST), it says nothing about the
 * server's memory, and a lookup by address is an index, not a search. */
#ifndef TSTOR_REMOTE_CLIENT_H
#define TSTOR_REMOTE_CLIENT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <tstor/backend.h>

#include "protocol.h"
#include "stream.h"
#include "wire.h"

#define MAX_PEERS 16
/* The most one request moves: copies go in pieces of this, so that two
 * streams on one peer take turns and a stalled piece fails in time. */
#define CHUNK ((size_t)64 << 20)
#define RBLOCK_SHIFT 43 /* a block holds less than 8 TiB */
/* The staging block in a peer's shared region, two halves of it. */
#define STAGE_BYTES ((size_t)4 << 20)
#define RBLOCK_MAX_SLOTS (1u << 20)

typedef struct rblock {
  uint64_t handle; /* the peer's name for it */
  uint64_t nbytes;
  uint8_t *mapped; /* its bytes in the peer's shared region, or NULL */
  int device;      /* remote:N */
  uint32_t slot;
} rblock;

typedef struct remote remote;

/* A connection's pipeline (conn.c): at most RPIPE_DEPTH requests in flight,
 * and RPIPE_READ_BYTES of READ replies; requests go out through a send buffer
 * of RPIPE_BUF bytes (WRITE bytes up to RPIPE_INLINE copied into it, larger
 * ones sent from where they are), replies come in through one as large. */
#define RPIPE_DEPTH 1024
#define RPIPE_READ_BYTES ((uint64_t)64 << 20)
#define RPIPE_BUF ((size_t)64 << 10)
#define RPIPE_INLINE ((size_t)16 << 10)

/* A request in flight, and what its reply completes. */
typedef struct rpending {
  uint32_t id;
  int type;
  int device;      /* remote:N it is for, for messages; -1: none */
  void *into;      /* READ: where the bytes after its reply go */
  uint64_t nbytes; /* READ: how many */
  tsr_msg *out;    /* the reply decoded into it; NULL: not kept */
  size_t tag;      /* the caller's: the batch span it belongs to */
} rpending;

typedef struct rpipe {
  rpending ring[RPIPE_DEPTH]; /* in flight: ring[head], ring[head + 1], ... */
  uint32_t head, count;
  uint64_t read_bytes; /* of the READs in flight */
  uint8_t *sbuf;       /* requests not sent yet: sbuf[0..slen) */
  size_t slen;
  tsr_inbuf in;   /* what came and was not used yet */
  uint8_t *rdata; /* a READ's bytes still to come: rleft of them, here */
  uint64_t rleft;
  int refused; /* the first refusal's code, 0 when none */
  size_t refused_tag;
} rpipe;

typedef struct peer {
  remote *r;
  char name[128]; /* as the config wrote it: "host:port" or "unix:/path" */
  tsr_addr addr;
  pthread_mutex_t mu; /* one request at a time on the connection; taken before blocks_mu */
  /* Guards the block table for readers that do not hold mu (checks of a job
   * before it is queued); who changes the table holds both. */
  pthread_mutex_t blocks_mu;
  int fd;
  int failed;     /* the connection is gone: every op fails with `failure` */
  int dropped;    /* the peer closed it (in the handshake: worth another try) */
  int connecting; /* in peer_connect, which reports the failure itself */
  char failure[512];
  char refusal[512]; /* the last error reply, as the detail said it */
  uint32_t next_id;
  rblock **slots; /* the block table: slot i holds the block at (i + 1) << RBLOCK_SHIFT */
  uint32_t nslots;
  uint32_t *free_slots, nfree;
  uint32_t live;    /* blocks in the table */
  int first_device; /* remote:first_device is the peer's device 0 */
  uint32_t ndevices;
  tsr_device_desc devices[TSR_MAX_DEVICES];
  rpipe pipe; /* under mu */
  /* The shared region (SHM), mapped here: NULL without one. */
  uint8_t *region;
  uint64_t region_size;
  uint32_t region_device; /* a host-memory device of the peer's, for the staging block */
  /* The staging block in the region that the bytes of blocks outside it pass
   * through, in two halves (xfer.c); made on first use. stage_busy: the
   * request that last used each half (its id). */
  uint64_t stage_handle;
  uint8_t *stage;
  int stage_tried;
  uint32_t stage_busy[2];
} peer;

typedef struct rdevice {
  peer *p;
  uint32_t index; /* on the peer */
  tstor_stats stats;
} rdevice;

struct remote {
  const tstor_registrar *reg;
  tstor_module *m;
  long long timeout_ms;
  int shared_memory; /* ask peers on Unix sockets for a shared region */
  pid_t pid; /* the process that loaded the module; a fork child touches no peer */
  uint8_t *secret;
  size_t secret_len;
  rstreams *streams;
  int npeers;
  peer *peers[MAX_PEERS];
  int ndevices;
  rdevice devices[MAX_PEERS * 4];
};

/* ------------------------------------------------------------- conn.c */

/* Fails the peer for good (the first reason is kept and logged) and closes
 * its connection. */
void peer_fail(peer *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The peer's failure as this call's error, naming remote:device (-1: none). */
int peer_error(peer *p, int device, int code);
/* Closes the connection (in a fork child without shutting it down). */
void peer_hang_up(peer *p);

/* A pipeline of requests; the caller holds p->mu from pipe_begin to pipe_end.
 * pipe_send queues the request req[0..len) (its id set here) for remote:device
 * (-1: none), with n bytes at `payload` after it (WRITE) or n bytes of its
 * reply to put at `into` (READ), its reply decoded into *out when out is set,
 * and `tag` to name it by; it may send what is queued and read replies. It
 * returns 0, or a code when the peer failed or an earlier request was refused:
 * queue nothing more then. pipe_end sends what is queued and takes every
 * reply: 0; the first refusal's code (its text set, *tag its tag; the peer
 * stays usable); or the failure's (the peer failed; *tag the oldest request
 * still in flight, when there was one). */
void pipe_begin(peer *p);
int pipe_send(peer *p, int device, uint8_t *req, size_t len, const void *payload, void *into,
              uint64_t n, tsr_msg *out, size_t tag);
int pipe_end(peer *p, size_t *tag);
/* Sends what is queued now, and waits until the request whose id is `id` (the
 * id of the last one queued is p->next_id) has its reply, and every one
 * before it. 0, or the failure's code: after a refusal it returns the code
 * too (the pipeline then queues nothing more; pipe_end reports it). */
int pipe_wait(peer *p, uint32_t id);
/* Sends what is queued now: 0 or the failure's code. */
int pipe_flush(peer *p);

/* One request and its reply, decoded into *out: 0, or a TSTOR_E* code with the
 * detail set, naming the peer and `device` (-1: none), when the peer refused
 * it (the peer stays usable) or when the connection failed or the reply lies
 * (the peer is then failed). The caller holds p->mu. */
int peer_rpc(peer *p, int device, uint8_t *req, size_t len, tsr_msg *out);
/* WRITE (put: n bytes from local) or READ (n bytes into local) of
 * [offset, offset + n) of block b, in pieces of CHUNK, pipelined. The caller
 * holds p->mu. */
int peer_transfer(peer *p, int device, int put, void *local, const rblock *b, uint64_t offset,
                  size_t n);

/* ------------------------------------------------------------- peer.c */

/* A peer record for the config's text; NULL on out-of-memory. */
peer *peer_new(remote *r, const char *name);
/* Connects, says hello, proves the secret and checks the peer's proof; fills
 * the device list. A connection that drops before the welcome (a server
 * shedding a flood) is tried again within timeout_ms. 0, or a TSTOR_E* code
 * with p->failure saying why. */
int peer_connect(peer *p);
/* Says bye (in the loading process, to a peer that still answers), closes
 * the connection and frees the record and its blocks' records. */
void peer_close(peer *p);

/* The block table. peer_block_add gives b a slot (0, or -1 when the table is
 * full or out of memory); peer_block_remove gives it back. The caller holds
 * p->mu; they take blocks_mu. */
int peer_block_add(peer *p, rblock *b);
void peer_block_remove(peer *p, rblock *b);
/* The device address of a block. */
uint64_t rblock_addr(const rblock *b);
/* The block of device `device` that holds [addr, addr + n); NULL when none.
 * The caller holds p->mu or p->blocks_mu. */
rblock *peer_block_find(peer *p, int device, uint64_t addr, size_t n);

/* ------------------------------------------------------------- xfer.c */

/* The device ops' common refusals: remote:index is not a device; [addr, addr +
 * n) is not inside one block of it; remote_check: the device exists and this
 * is the process that loaded the module (`what` names the op for a child of
 * fork()). Each returns its code with the detail set. */
int remote_bad_device(remote *r, int index);
int remote_no_block(remote *r, int device, const void *addr, size_t n);
int remote_check(remote *r, int index, const char *what);

/* What a span moves: cpu -> remote (WRITE), remote -> cpu (READ), or between
 * two remote devices (a COPY within one peer, through host memory between two). */
enum { XFER_PUT, XFER_GET, XFER_ON };

/* Moves every span, synchronously: the spans of one peer as one pipeline on
 * its connection, peer after peer. 0, or a TSTOR_E* code with the detail set
 * and *failed the span it failed on. The caller holds no peer's lock. */
int xfer_spans(remote *r, int kind, const tstor_copy_span *spans, size_t count, size_t *failed);

#endif
