/* What the files of tstor-remote.so share: the module's state, its peers and
 * their blocks. Its files, in layers (remote.h): peer.c (one server:
 * connection, handshake, requests, block table) above stream.c (streams and
 * events) above client.c (the device ops and the module's entry point).
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
#define RBLOCK_MAX_SLOTS (1u << 20)

typedef struct rblock {
  uint64_t handle; /* the peer's name for it */
  uint64_t nbytes;
  int device; /* remote:N */
  uint32_t slot;
} rblock;

typedef struct remote remote;

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
  uint8_t reply[TSR_MAX_MESSAGE]; /* under mu */
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
  pid_t pid; /* the process that loaded the module; a fork child touches no peer */
  uint8_t *secret;
  size_t secret_len;
  rstreams *streams;
  int npeers;
  peer *peers[MAX_PEERS];
  int ndevices;
  rdevice devices[MAX_PEERS * 4];
};

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

void peer_fail(peer *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The peer's failure as this call's error, naming remote:device (-1: none). */
int peer_error(peer *p, int device, int code);

/* Sends the request in req[0..len) (its id set here) and waits for its reply,
 * decoded into *out. Returns 0; or a TSTOR_E* code with the detail set, naming
 * the peer and `device` (-1: none), when the peer refused it (the peer stays
 * usable) or when the connection failed or the reply lies (the peer is then
 * failed). The caller holds p->mu. */
int peer_rpc(peer *p, int device, uint8_t *req, size_t len, tsr_msg *out);
/* WRITE (put: n bytes from local) or READ (n bytes into local) of
 * [offset, offset + n) of block b, in pieces of CHUNK. The caller holds p->mu. */
int peer_transfer(peer *p, int device, int put, void *local, const rblock *b, uint64_t offset,
                  size_t n);

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

#endif
