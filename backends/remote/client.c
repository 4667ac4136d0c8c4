/* tstor-remote.so: the devices of `tstor serve` peers as device type
 * "remote". docs/remote.md describes the model; protocol.h the wire.
 *
 * Config keys ([backend remote]):
 *   peers        host:port, host:port ...  (comma-separated; required, empty
 *                declines). Each peer's devices become remote:N in order.
 *   secret_file  the shared secret the peers were started with (required);
 *                a file only its owner may read
 *   timeout_ms   how long any one request, or one 64 MiB piece of a copy, may
 *                take before the peer counts as gone (default 5000)
 *
 * A device address (tstor_block.ptr) is the peer's own address of the block:
 * never dereferenceable here, and what ucp_put_nbx / ucp_get_nbx take as the
 * remote address. Blocks are found by address under the peer's lock.
 *
 * Threading: each peer has one UCX worker and one lock; every op on a peer
 * takes the lock, posts its request and drives the worker until the request
 * completes, the peer fails, or the timeout passes. A failed peer stays failed:
 * every later op on its devices fails at once with the first reason, and frees
 * only drop the local record. Ops that would wait for a peer in a child of
 * fork() fail with TSTOR_EBACKEND instead.
 *
 * Streams (stream.h): an op given a stream checks its arguments, queues itself
 * and returns; the stream's worker runs the same synchronous op later. A free
 * first waits for the work queued on every stream, as cudaFree waits for the
 * device, so no queued job outlives its block. */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tstor/backend.h>
#include <ucp/api/ucp.h>

#include "failure.h"
#include "protocol.h"
#include "stream.h"

#define MAX_PEERS 16
#define CHUNK ((size_t)64 << 20)

typedef struct rblock {
  struct rblock *next;
  uint64_t handle, raddr, nbytes;
  ucp_rkey_h rkey; /* NULL for a staged block: its bytes go through the window */
  int device; /* remote:N */
} rblock;

typedef struct remote remote;

typedef struct peer {
  remote *r;
  char name[128]; /* "host:port" as the config wrote it */
  pthread_mutex_t mu;
  /* Guards `blocks` for readers that do not hold mu (checks of a job before it
   * is queued); who changes the list holds both, mu first. */
  pthread_mutex_t blocks_mu;
  ucp_worker_h worker;
  ucp_ep_h ep;
  int failed;         /* the connection is gone: every op fails with `failure` */
  char failure[512];
  char refusal[512]; /* the last error reply, as the detail said it */
  uint32_t next_id;
  int have_reply;
  size_t reply_len;
  uint8_t reply[TSR_MAX_MESSAGE];
  rblock *blocks;
  /* The peer's window for staged blocks (protocol.h), asked for on first use. */
  uint64_t window_raddr, window_size;
  ucp_rkey_h window_rkey;
  int first_device; /* remote:first_device is the peer's device 0 */
  uint32_t ndevices;
  tsr_device_desc devices[TSR_MAX_DEVICES];
} peer;

typedef struct rdevice {
  peer *p;
  uint32_t index; /* on the peer */
  tstor_stats stats;
} rdevice;

struct remote {
  const tstor_registrar *reg;
  tstor_module *m;
  ucp_context_h ucp;
  long long timeout_ms;
  pid_t pid;
  uint8_t *secret;
  size_t secret_len;
  rstreams *streams;
  int npeers;
  peer *peers[MAX_PEERS];
  int ndevices;
  rdevice devices[MAX_PEERS * 4];
};

/* ------------------------------------------------------------- plumbing */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void peer_fail(peer *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Marks the peer gone (the first reason stays) and drops the endpoint: its
 * pending requests complete with errors, so no buffer of the caller's is
 * touched after this returns. */
static void peer_fail(peer *p, const char *fmt, ...) {
  if (!p->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->failure, sizeof p->failure, fmt, ap);
    va_end(ap);
    p->failed = 1;
    p->r->reg->log(p->r->m, TSTOR_LOG_WARN, "peer %s: %s", p->name, p->failure);
  }
  if (p->ep) {
    ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                 .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t req = ucp_ep_close_nbx(p->ep, &param);
    p->ep = NULL;
    if (UCS_PTR_IS_PTR(req)) {
      double deadline = now_ms() + 2000;
      while (ucp_request_check_status(req) == UCS_INPROGRESS && now_ms() < deadline)
        ucp_worker_progress(p->worker);
      ucp_request_free(req);
    }
  }
}

static int peer_error(peer *p, int device, int code) {
  if (device >= 0)
    return remote_fail(p->r->reg, code, "remote:%d (peer %s): %s", device, p->name, p->failure);
  return remote_fail(p->r->reg, code, "peer %s: %s", p->name, p->failure);
}

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status) {
  peer *p = arg;
  (void)ep;
  if (!p->failed) {
    snprintf(p->failure, sizeof p->failure, "connection lost: %s", ucs_status_string(status));
    p->failed = 1;
  }
}

static ucs_status_t on_reply(void *arg, const void *header, size_t header_length, void *data,
                             size_t length, const ucp_am_recv_param_t *param) {
  peer *p = arg;
  (void)header;
  (void)header_length;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || length > TSR_MAX_MESSAGE)
    return UCS_OK; /* not ours to take; the request it answers times out */
  memcpy(p->reply, data, length);
  p->reply_len = length;
  p->have_reply = 1;
  return UCS_OK;
}

/* Drives the worker until req (a request, or an immediate status) is done,
 * the peer fails, or deadline passes. Returns 0 or TSTOR_EIO with the peer
 * marked failed. The caller holds p->mu. */
static int wait_request(peer *p, ucs_status_ptr_t req, double deadline, const char *what) {
  if (UCS_PTR_IS_ERR(req)) {
    peer_fail(p, "%s: %s", what, ucs_status_string(UCS_PTR_STATUS(req)));
    return TSTOR_EIO;
  }
  if (req == NULL) return 0;
  ucs_status_t st;
  while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
    if (p->failed || now_ms() > deadline) break;
    ucp_worker_progress(p->worker);
  }
  if (st == UCS_INPROGRESS) {
    if (!p->failed)
      peer_fail(p, "%s: no answer within %lld ms", what, p->r->timeout_ms);
    else
      peer_fail(p, "%s", p->failure); /* closes the endpoint: req completes */
    while (ucp_request_check_status(req) == UCS_INPROGRESS && now_ms() < deadline + 2000)
      ucp_worker_progress(p->worker);
    ucp_request_free(req);
    return TSTOR_EIO;
  }
  ucp_request_free(req);
  if (st != UCS_OK) {
    peer_fail(p, "%s: %s", what, ucs_status_string(st));
    return TSTOR_EIO;
  }
  return 0;
}

static int status_code(int status) {
  switch (status) {
    case TSR_ST_NOMEM:
    case TSR_ST_QUOTA:
      return TSTOR_ENOMEM;
    case TSR_ST_NODEV:
      return TSTOR_ENODEV;
    case TSR_ST_RANGE:
      return TSTOR_ERANGE;
    case TSR_ST_INVAL:
      return TSTOR_EINVAL;
    case TSR_ST_DENIED:
      return TSTOR_EACCES;
    case TSR_ST_VERSION:
      return TSTOR_EABI;
    default:
      return TSTOR_EBACKEND;
  }
}

/* Sends the request in buf[0..len) and waits for its reply, decoded into
 * *out. Returns 0; a TSTOR_E* code with the detail set, naming the peer and
 * `device` (-1: none), when the peer refused it (the peer stays usable) or
 * when the connection failed or the reply lies (the peer is then failed).
 * The caller holds p->mu. */
static int rpc(peer *p, int device, uint8_t *buf, size_t len, tsr_msg *out) {
  if (p->failed) return peer_error(p, device, TSTOR_EIO);
  /* the id is bytes 8..11 of the header */
  uint32_t id = ++p->next_id;
  for (int i = 0; i < 4; i++) buf[8 + i] = (uint8_t)(id >> (8 * i));
  int type = buf[6] | buf[7] << 8;
  double deadline = now_ms() + (double)p->r->timeout_ms;
  p->have_reply = 0;
  ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER};
  ucs_status_ptr_t req = ucp_am_send_nbx(p->ep, TSR_AM_REQUEST, NULL, 0, buf, len, &param);
  if (wait_request(p, req, deadline, tsr_type_name(type))) return peer_error(p, device, TSTOR_EIO);
  for (;;) {
    while (!p->have_reply && !p->failed && now_ms() <= deadline) ucp_worker_progress(p->worker);
    if (!p->have_reply) {
      if (!p->failed)
        peer_fail(p, "%s: no reply within %lld ms", tsr_type_name(type), p->r->timeout_ms);
      else
        peer_fail(p, "%s", p->failure);
      return peer_error(p, device, TSTOR_EIO);
    }
    p->have_reply = 0;
    char why[200];
    int st = tsr_decode(p->reply, p->reply_len, 1, out, why, sizeof why);
    if (st == 0 && out->id != id) continue; /* a late reply to a request that timed out */
    if (st != 0) {
      peer_fail(p, "%s: malformed reply: %s", tsr_type_name(type), why);
      return peer_error(p, device, st == TSR_ST_VERSION ? TSTOR_EABI : TSTOR_EIO);
    }
    if ((out->type & ~TSR_REPLY) != type) {
      peer_fail(p, "%s: answered with a %s reply", tsr_type_name(type),
                tsr_type_name(out->type));
      return peer_error(p, device, TSTOR_EIO);
    }
    if (out->status != 0) {
      if (device >= 0)
        snprintf(p->refusal, sizeof p->refusal, "remote:%d (peer %s): %s: %s", device, p->name,
                 tsr_status_text(out->status), out->text);
      else
        snprintf(p->refusal, sizeof p->refusal, "%s: %s", tsr_status_text(out->status),
                 out->text);
      return remote_fail(p->r->reg, status_code(out->status), "%s", p->refusal);
    }
    return 0;
  }
}

/* One-sided transfer of n bytes between local and the peer's raddr, then a
 * flush for puts, so that the bytes are in place when it returns. In pieces
 * of CHUNK bytes, each bounded by the timeout. The caller holds p->mu. */
static int transfer(peer *p, int device, int put, void *local, uint64_t raddr, ucp_rkey_h rkey,
                    size_t n) {
  if (p->failed) return peer_error(p, device, TSTOR_EIO);
  const char *what = put ? "put" : "get";
  for (size_t done = 0; done < n;) {
    size_t piece = n - done < CHUNK ? n - done : CHUNK;
    double deadline = now_ms() + (double)p->r->timeout_ms;
    ucp_request_param_t param = {.op_attr_mask = 0};
    ucs_status_ptr_t req =
        put ? ucp_put_nbx(p->ep, (uint8_t *)local + done, piece, raddr + done, rkey, &param)
            : ucp_get_nbx(p->ep, (uint8_t *)local + done, piece, raddr + done, rkey, &param);
    if (put && !UCS_PTR_IS_ERR(req)) {
      /* The flush is posted at once and completes after the put: one wait
       * for both, not a round of progress for each. */
      ucs_status_ptr_t flush = ucp_ep_flush_nbx(p->ep, &param);
      int flushed = wait_request(p, flush, deadline, "flush");
      if (wait_request(p, req, deadline, what) || flushed)
        return peer_error(p, device, TSTOR_EIO);
    } else if (wait_request(p, req, deadline, what)) {
      return peer_error(p, device, TSTOR_EIO);
    }
    done += piece;
  }
  return 0;
}

/* Asks for the peer's window once. The caller holds p->mu. */
static int window_open(peer *p, int device) {
  if (p->window_rkey) return 0;
  uint8_t buf[TSR_MAX_MESSAGE];
  tsr_msg reply;
  int rc = rpc(p, device, buf, tsr_encode_window(buf, 0), &reply);
  if (rc) return rc;
  if (reply.nbytes == 0) { /* it would move nothing, for ever */
    peer_fail(p, "WINDOW: answered with a window of 0 bytes");
    return peer_error(p, device, TSTOR_EIO);
  }
  ucs_status_t st = ucp_ep_rkey_unpack(p->ep, reply.rkey, &p->window_rkey);
  if (st != UCS_OK) {
    p->window_rkey = NULL;
    return remote_fail(p->r->reg, TSTOR_EBACKEND, "remote:%d (peer %s): cannot unpack its key: %s",
                       device, p->name, ucs_status_string(st));
  }
  p->window_raddr = reply.raddr;
  p->window_size = reply.nbytes;
  return 0;
}

/* A staged block's bytes [offset, offset + n) through the peer's window, a
 * window's worth at a time: a put, then PUSH (the peer copies the window into
 * the block); or PULL, then a get. The caller holds p->mu. */
static int staged_transfer(peer *p, int device, int put, void *local, const rblock *b,
                           uint64_t offset, size_t n) {
  int rc = window_open(p, device);
  uint8_t buf[TSR_MAX_MESSAGE];
  tsr_msg reply;
  for (size_t done = 0; done < n && rc == 0;) {
    size_t piece = n - done < p->window_size ? n - done : (size_t)p->window_size;
    uint8_t *at = (uint8_t *)local + done;
    size_t len = tsr_encode_stage(buf, put ? TSR_PUSH : TSR_PULL, 0, b->handle, offset + done,
                                  piece);
    if (put) {
      rc = transfer(p, device, 1, at, p->window_raddr, p->window_rkey, piece);
      if (rc == 0) rc = rpc(p, device, buf, len, &reply);
    } else {
      rc = rpc(p, device, buf, len, &reply);
      if (rc == 0) rc = transfer(p, device, 0, at, p->window_raddr, p->window_rkey, piece);
    }
    done += piece;
  }
  return rc;
}

/* The block of device `device` holding [addr, addr + n); NULL when none. */
static rblock *find_block(peer *p, int device, uint64_t addr, size_t n) {
  for (rblock *b = p->blocks; b; b = b->next)
    if (b->device == device && addr >= b->raddr && addr - b->raddr <= b->nbytes &&
        n <= b->nbytes - (addr - b->raddr))
      return b;
  return NULL;
}

static int check_process(remote *r, int device, const char *what) {
  return remote_check_process(r->reg, r->pid, device, what);
}

static int bad_device(remote *r, int index) {
  return remote_fail(r->reg, TSTOR_ENODEV, "remote:%d: no such device (%d remote devices)", index,
                           r->ndevices);
}

static int no_block(remote *r, int device, const void *addr, size_t n) {
  return remote_fail(r->reg, TSTOR_EINVAL,
                           "remote:%d: %zu bytes at %p are not inside one block of this device",
                           device, n, addr);
}

/* ------------------------------------------------------------ allocator */

static int remote_count(void *state) { return ((remote *)state)->ndevices; }

static int remote_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out) {
  remote *r = state;
  (void)stream;
  out->ptr = NULL;
  out->alloc_ctx = NULL;
  if (index < 0 || index >= r->ndevices) return bad_device(r, index);
  rdevice *d = &r->devices[index];
  peer *p = d->p;
  if (nbytes == 0) {
    pthread_mutex_lock(&p->mu);
    d->stats.alloc_count++;
    pthread_mutex_unlock(&p->mu);
    return 0;
  }
  int rc = check_process(r, index, "allocate");
  if (rc) return rc;
  if (nbytes > SIZE_MAX / 2)
    return remote_fail(r->reg, TSTOR_ENOMEM, "remote:%d (peer %s): %zu bytes is too many", index,
                             p->name, nbytes);
  if (TSTOR_REGISTRAR_HAS(r->reg, should_fail) && r->reg->should_fail(TSTOR_FAULT_MALLOC))
    return remote_fail(r->reg, TSTOR_ENOMEM, "remote:%d: no host memory for a block record", index);
  rblock *b = calloc(1, sizeof *b);
  if (!b) return remote_fail(r->reg, TSTOR_ENOMEM, "remote:%d: no host memory for a block record", index);
  uint8_t buf[TSR_MAX_MESSAGE];
  tsr_msg reply;
  pthread_mutex_lock(&p->mu);
  rc = rpc(p, index, buf, tsr_encode_alloc(buf, 0, d->index, nbytes), &reply);
  if (rc == 0 && reply.rkey_len > 0) {
    ucs_status_t st = ucp_ep_rkey_unpack(p->ep, reply.rkey, &b->rkey);
    if (st != UCS_OK) {
      /* give the block back; the peer's answer decides nothing more */
      tsr_msg ignored;
      rpc(p, index, buf, tsr_encode_free(buf, 0, reply.handle), &ignored);
      rc = remote_fail(r->reg, TSTOR_EBACKEND, "remote:%d (peer %s): cannot unpack its key: %s",
                             index, p->name, ucs_status_string(st));
    }
  }
  if (rc) {
    if (rc == TSTOR_ENOMEM) d->stats.oom_count++;
    pthread_mutex_unlock(&p->mu);
    free(b);
    return rc;
  }
  b->handle = reply.handle;
  b->raddr = reply.raddr;
  b->nbytes = nbytes;
  b->device = index;
  pthread_mutex_lock(&p->blocks_mu);
  b->next = p->blocks;
  p->blocks = b;
  pthread_mutex_unlock(&p->blocks_mu);
  d->stats.allocated += nbytes;
  d->stats.alloc_count++;
  if (d->stats.allocated > d->stats.peak_allocated) d->stats.peak_allocated = d->stats.allocated;
  pthread_mutex_unlock(&p->mu);
  out->ptr = (void *)(uintptr_t)b->raddr;
  out->alloc_ctx = b;
  return 0;
}

static void remote_free(void *state, int index, void *ptr, size_t nbytes, void *alloc_ctx) {
  remote *r = state;
  (void)ptr;
  if (index < 0 || index >= r->ndevices) return;
  rdevice *d = &r->devices[index];
  peer *p = d->p;
  rblock *b = alloc_ctx;
  if (b) rstreams_wait(r->streams, -1); /* its failures are the streams' to report */
  pthread_mutex_lock(&p->mu);
  d->stats.free_count++;
  if (b) {
    pthread_mutex_lock(&p->blocks_mu);
    for (rblock **q = &p->blocks; *q; q = &(*q)->next)
      if (*q == b) {
        *q = b->next;
        break;
      }
    pthread_mutex_unlock(&p->blocks_mu);
    d->stats.allocated -= nbytes;
    /* A failed peer, or a fork child: the blocks are gone with the peer's
     * connection (or belong to the parent's); only the record is ours. */
    if (!p->failed && getpid() == r->pid) {
      uint8_t buf[TSR_MAX_MESSAGE];
      tsr_msg reply;
      if (rpc(p, index, buf, tsr_encode_free(buf, 0, b->handle), &reply) != 0)
        r->reg->log(r->m, TSTOR_LOG_WARN, "remote:%d: freeing %zu bytes on peer %s failed: %s",
                    index, nbytes, p->name, p->failed ? p->failure : p->refusal);
    }
    if (getpid() == r->pid && b->rkey) ucp_rkey_destroy(b->rkey);
    free(b);
  }
  pthread_mutex_unlock(&p->mu);
}

static int remote_stats(void *state, int index, tstor_stats *out) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return bad_device(r, index);
  rdevice *d = &r->devices[index];
  pthread_mutex_lock(&d->p->mu);
  tstor_stats mine = d->stats;
  pthread_mutex_unlock(&d->p->mu);
  tstor_stats_copy(out, &mine);
  return 0;
}

static int remote_reset_peak(void *state, int index) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return bad_device(r, index);
  rdevice *d = &r->devices[index];
  pthread_mutex_lock(&d->p->mu);
  d->stats.peak_allocated = d->stats.allocated;
  pthread_mutex_unlock(&d->p->mu);
  return 0;
}

/* ---------------------------------------------------------- copies, fill */

/* Checks what a job will touch before it is queued, so that a bad argument
 * fails the call that gave it, as a synchronous op would: the device, the
 * process, and that [addr, addr + n) lies inside one block of the device. */
static int check_span(remote *r, int index, const void *addr, size_t n, const char *what) {
  if (index < 0 || index >= r->ndevices) return bad_device(r, index);
  int rc = check_process(r, index, what);
  if (rc) return rc;
  peer *p = r->devices[index].p;
  pthread_mutex_lock(&p->blocks_mu);
  rblock *b = find_block(p, index, (uint64_t)(uintptr_t)addr, n);
  pthread_mutex_unlock(&p->blocks_mu);
  return b ? 0 : no_block(r, index, addr, n);
}

/* A copy kernel's call, queued: the worker makes it again without a stream. */
typedef struct copy_job {
  tstor_copy_fn kernel;
  void *dst;
  const void *src;
  int dst_index, src_index;
  size_t nbytes;
} copy_job;

static int run_copy(void *state, const void *args) {
  const copy_job *j = args;
  return j->kernel(state, j->dst, j->dst_index, j->src, j->src_index, j->nbytes, NULL);
}

static int queue_copy(void *stream, tstor_copy_fn kernel, void *dst, int dst_index,
                      const void *src, int src_index, size_t nbytes) {
  copy_job j = {kernel, dst, src, dst_index, src_index, nbytes};
  return rstream_enqueue(stream, run_copy, &j, sizeof j);
}

/* cpu -> remote and remote -> cpu: one-sided put or get. */
static int copy_host(remote *r, int put, int index, void *host, uint64_t raddr, size_t nbytes) {
  if (nbytes == 0) return 0;
  if (index < 0 || index >= r->ndevices) return bad_device(r, index);
  int rc = check_process(r, index, put ? "copy to the device" : "copy from the device");
  if (rc) return rc;
  peer *p = r->devices[index].p;
  pthread_mutex_lock(&p->mu);
  rblock *b = find_block(p, index, raddr, nbytes);
  if (!b)
    rc = no_block(r, index, (void *)(uintptr_t)raddr, nbytes);
  else if (!b->rkey)
    rc = staged_transfer(p, index, put, host, b, raddr - b->raddr, nbytes);
  else
    rc = transfer(p, index, put, host, raddr, b->rkey, nbytes);
  pthread_mutex_unlock(&p->mu);
  return rc;
}

static int remote_copy_to_device(void *state, void *dst, int dst_index, const void *src,
                                  int src_index, size_t nbytes, void *stream) {
  if (stream && nbytes) {
    int rc = check_span(state, dst_index, dst, nbytes, "copy to the device");
    return rc ? rc
              : queue_copy(stream, remote_copy_to_device, dst, dst_index, src, src_index, nbytes);
  }
  return copy_host(state, 1, dst_index, (void *)src, (uint64_t)(uintptr_t)dst, nbytes);
}

static int remote_copy_to_host(void *state, void *dst, int dst_index, const void *src,
                               int src_index, size_t nbytes, void *stream) {
  if (stream && nbytes) {
    int rc = check_span(state, src_index, src, nbytes, "copy from the device");
    return rc ? rc
              : queue_copy(stream, remote_copy_to_host, dst, dst_index, src, src_index, nbytes);
  }
  return copy_host(state, 0, src_index, dst, (uint64_t)(uintptr_t)src, nbytes);
}

/* remote -> remote: within one peer the peer copies (one message); between
 * two peers the bytes pass through a host buffer, a piece at a time, one
 * peer's lock at a time. */
static int remote_copy_on_device(void *state, void *dst, int dst_index, const void *src,
                                 int src_index, size_t nbytes, void *stream) {
  remote *r = state;
  if (nbytes == 0) return 0;
  if (stream) {
    int rc = check_span(r, dst_index, dst, nbytes, "copy");
    if (rc == 0) rc = check_span(r, src_index, src, nbytes, "copy");
    return rc ? rc
              : queue_copy(stream, remote_copy_on_device, dst, dst_index, src, src_index, nbytes);
  }
  if (dst_index < 0 || dst_index >= r->ndevices) return bad_device(r, dst_index);
  if (src_index < 0 || src_index >= r->ndevices) return bad_device(r, src_index);
  int rc = check_process(r, dst_index, "copy");
  if (rc) return rc;
  peer *dp = r->devices[dst_index].p, *sp = r->devices[src_index].p;
  uint64_t daddr = (uint64_t)(uintptr_t)dst, saddr = (uint64_t)(uintptr_t)src;
  if (dp == sp) {
    pthread_mutex_lock(&dp->mu);
    rblock *db = find_block(dp, dst_index, daddr, nbytes);
    rblock *sb = find_block(dp, src_index, saddr, nbytes);
    if (!db || !sb) {
      rc = db ? no_block(r, src_index, src, nbytes) : no_block(r, dst_index, dst, nbytes);
    } else {
      uint8_t buf[TSR_MAX_MESSAGE];
      tsr_msg reply;
      rc = rpc(dp, dst_index, buf,
               tsr_encode_copy(buf, 0, db->handle, daddr - db->raddr, sb->handle,
                               saddr - sb->raddr, nbytes),
               &reply);
    }
    pthread_mutex_unlock(&dp->mu);
    return rc;
  }
  size_t piece = nbytes < CHUNK ? nbytes : CHUNK;
  uint8_t *tmp = malloc(piece);
  if (!tmp)
    return remote_fail(r->reg, TSTOR_ENOMEM,
                       "remote:%d -> remote:%d: no host memory to stage %zu bytes", src_index,
                       dst_index, piece);
  for (size_t done = 0; done < nbytes && rc == 0; done += piece) {
    size_t n = nbytes - done < piece ? nbytes - done : piece;
    rc = copy_host(r, 0, src_index, tmp, saddr + done, n);
    if (rc == 0) rc = copy_host(r, 1, dst_index, tmp, daddr + done, n);
  }
  free(tmp);
  return rc;
}

typedef struct fill_job {
  void *ptr;
  int index;
  size_t nbytes, pattern_size;
  unsigned char pattern[16];
} fill_job;

static int remote_fill(void *state, int index, void *ptr, size_t nbytes, const void *pattern,
                       size_t pattern_size, void *stream);

static int run_fill(void *state, const void *args) {
  const fill_job *j = args;
  return remote_fill(state, j->index, j->ptr, j->nbytes, j->pattern, j->pattern_size, NULL);
}

static int remote_fill(void *state, int index, void *ptr, size_t nbytes, const void *pattern,
                       size_t pattern_size, void *stream) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return bad_device(r, index);
  if (pattern_size == 0 || pattern_size > 16 || (pattern_size & (pattern_size - 1)) != 0 ||
      nbytes % pattern_size != 0)
    return remote_fail(r->reg, TSTOR_EINVAL,
                       "remote:%d: fill: pattern of %zu bytes over %zu bytes (1, 2, 4, 8 or 16 "
                       "bytes, dividing the size)",
                       index, pattern_size, nbytes);
  if (nbytes == 0) return 0;
  if (stream) {
    int rc = check_span(r, index, ptr, nbytes, "fill");
    if (rc) return rc;
    fill_job j = {.ptr = ptr, .index = index, .nbytes = nbytes, .pattern_size = pattern_size};
    memcpy(j.pattern, pattern, pattern_size);
    return rstream_enqueue(stream, run_fill, &j, sizeof j);
  }
  int rc = check_process(r, index, "fill");
  if (rc) return rc;
  peer *p = r->devices[index].p;
  uint64_t addr = (uint64_t)(uintptr_t)ptr;
  pthread_mutex_lock(&p->mu);
  rblock *b = find_block(p, index, addr, nbytes);
  if (!b) {
    rc = no_block(r, index, ptr, nbytes);
  } else {
    uint8_t buf[TSR_MAX_MESSAGE];
    tsr_msg reply;
    rc = rpc(p, index, buf,
             tsr_encode_fill(buf, 0, b->handle, addr - b->raddr, nbytes, (uint32_t)pattern_size,
                             pattern),
             &reply);
  }
  pthread_mutex_unlock(&p->mu);
  return rc;
}

typedef struct strided_job {
  int index, ndim;
  void *dst;
  const void *src;
  size_t element_size;
  int64_t sizes[TSR_MAX_DIMS], dst_strides[TSR_MAX_DIMS], src_strides[TSR_MAX_DIMS];
} strided_job;

static int remote_copy_strided(void *state, int index, void *dst, const int64_t *dst_strides,
                               const void *src, const int64_t *src_strides, const int64_t *sizes,
                               int ndim, size_t element_size, void *stream);

static int run_strided(void *state, const void *args) {
  const strided_job *j = args;
  return remote_copy_strided(state, j->index, j->dst, j->dst_strides, j->src, j->src_strides,
                             j->sizes, j->ndim, j->element_size, NULL);
}

/* backend.h's copy_strided: one message with the whole descriptor; the peer
 * checks both spans against its blocks and moves the elements. */
static int remote_copy_strided(void *state, int index, void *dst, const int64_t *dst_strides,
                               const void *src, const int64_t *src_strides, const int64_t *sizes,
                               int ndim, size_t element_size, void *stream) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return bad_device(r, index);
  if (ndim < 1 || ndim > (int)TSR_MAX_DIMS || element_size == 0 || element_size > 1024)
    return TSTOR_ENOTSUP;
  uint64_t dspan = element_size, sspan = element_size;
  for (int d = 0; d < ndim; d++) {
    if (sizes[d] <= 0) return sizes[d] == 0 ? 0 : TSTOR_EINVAL;
    if (dst_strides[d] < 0 || src_strides[d] < 0) return TSTOR_ENOTSUP;
    dspan += (uint64_t)dst_strides[d] * (uint64_t)(sizes[d] - 1);
    sspan += (uint64_t)src_strides[d] * (uint64_t)(sizes[d] - 1);
  }
  if (stream) {
    int rc = check_span(r, index, dst, (size_t)dspan, "strided copy");
    if (rc == 0) rc = check_span(r, index, src, (size_t)sspan, "strided copy");
    if (rc) return rc;
    strided_job j = {.index = index, .ndim = ndim, .dst = dst, .src = src,
                     .element_size = element_size};
    memcpy(j.sizes, sizes, (size_t)ndim * sizeof *sizes);
    memcpy(j.dst_strides, dst_strides, (size_t)ndim * sizeof *dst_strides);
    memcpy(j.src_strides, src_strides, (size_t)ndim * sizeof *src_strides);
    return rstream_enqueue(stream, run_strided, &j, sizeof j);
  }
  int rc = check_process(r, index, "strided copy");
  if (rc) return rc;
  peer *p = r->devices[index].p;
  uint64_t daddr = (uint64_t)(uintptr_t)dst, saddr = (uint64_t)(uintptr_t)src;
  pthread_mutex_lock(&p->mu);
  rblock *db = find_block(p, index, daddr, (size_t)dspan);
  rblock *sb = find_block(p, index, saddr, (size_t)sspan);
  if (!db || !sb) {
    rc = db ? no_block(r, index, src, (size_t)sspan) : no_block(r, index, dst, (size_t)dspan);
  } else {
    uint8_t buf[TSR_MAX_MESSAGE];
    tsr_msg reply;
    rc = rpc(p, index, buf,
             tsr_encode_copy_strided(buf, 0, db->handle, daddr - db->raddr, sb->handle,
                                     saddr - sb->raddr, (uint32_t)element_size, ndim, sizes,
                                     dst_strides, src_strides),
             &reply);
  }
  pthread_mutex_unlock(&p->mu);
  return rc;
}

/* ---------------------------------------------- streams, events, describe */

static int remote_synchronize(void *state, int index) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return bad_device(r, index);
  return rstreams_wait(r->streams, index);
}

static int remote_stream_create(void *state, int index, void **out) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return bad_device(r, index);
  return rstream_create(r->streams, index, out);
}

static void remote_stream_destroy(void *state, int index, void *stream) {
  (void)index;
  rstream_destroy(((remote *)state)->streams, stream);
}

static int remote_stream_synchronize(void *state, int index, void *stream) {
  (void)index;
  return rstream_synchronize(((remote *)state)->streams, stream);
}

static int remote_stream_wait_event(void *state, int index, void *stream, void *event) {
  (void)index;
  return rstream_wait_event(((remote *)state)->streams, stream, event);
}

static int remote_event_create(void *state, int index, void **out) {
  return rstream_event_create(((remote *)state)->streams, index, out);
}

static void remote_event_destroy(void *state, int index, void *event) {
  (void)index;
  rstream_event_destroy(((remote *)state)->streams, event);
}

static int remote_event_record(void *state, int index, void *event, void *stream) {
  (void)index;
  return rstream_event_record(((remote *)state)->streams, event, stream);
}

static int remote_event_query(void *state, int index, void *event) {
  (void)index;
  return rstream_event_query(((remote *)state)->streams, event);
}

static int remote_event_synchronize(void *state, int index, void *event) {
  (void)index;
  return rstream_event_synchronize(((remote *)state)->streams, event);
}

/* "127.0.0.1:13337 cpu:0", and the reason when the peer is gone. */
static int remote_describe(void *state, int index, char *buf, size_t size) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return bad_device(r, index);
  rdevice *d = &r->devices[index];
  peer *p = d->p;
  pthread_mutex_lock(&p->mu);
  if (p->failed)
    snprintf(buf, size, "%s %s (unusable: %s)", p->name, p->devices[d->index].name, p->failure);
  else
    snprintf(buf, size, "%s %s", p->name, p->devices[d->index].name);
  pthread_mutex_unlock(&p->mu);
  return 0;
}

static const tstor_allocator_ops remote_allocator = {
    .struct_size = sizeof(tstor_allocator_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .name = "remote",
    .allocate = remote_allocate,
    .free = remote_free,
    .stats = remote_stats,
    .reset_peak = remote_reset_peak,
};

static const tstor_device_ops remote_device_ops = {
    .struct_size = sizeof(tstor_device_ops),
    .abi_version = TSTOR_ABI_VERSION,
    .type_name = "remote",
    .flags = 0, /* the peer's memory: the core goes through the kernels */
    .device_count = remote_count,
    .allocator = &remote_allocator,
    .fill = remote_fill,
    .synchronize = remote_synchronize,
    .stream_create = remote_stream_create,
    .stream_destroy = remote_stream_destroy,
    .stream_synchronize = remote_stream_synchronize,
    .stream_wait_event = remote_stream_wait_event,
    .event_create = remote_event_create,
    .event_destroy = remote_event_destroy,
    .event_record = remote_event_record,
    .event_query = remote_event_query,
    .event_synchronize = remote_event_synchronize,
    .copy_strided = remote_copy_strided, /* since 1.2 */
    .describe = remote_describe,         /* since 1.3 */
};

/* ------------------------------------------------------------- sessions */

/* Connects, says hello, proves the secret and checks the peer's proof; fills
 * the peer's device list. 0, or a TSTOR_E* code with p->failure saying why. */
static int peer_connect(remote *r, peer *p) {
  char host[128];
  snprintf(host, sizeof host, "%s", p->name);
  char *colon = strrchr(host, ':');
  if (!colon || colon == host || colon[1] == '\0') {
    snprintf(p->failure, sizeof p->failure, "not host:port");
    return TSTOR_ECONFIG;
  }
  *colon = '\0';
  const char *port = colon + 1;
  if (host[0] == '[' && colon[-1] == ']') { /* [::1]:13337 */
    colon[-1] = '\0';
    memmove(host, host + 1, strlen(host));
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  int gai = getaddrinfo(host, port, &hints, &ai);
  if (gai != 0) {
    snprintf(p->failure, sizeof p->failure, "cannot resolve: %s", gai_strerror(gai));
    return TSTOR_EIO;
  }
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SINGLE};
  ucs_status_t st = ucp_worker_create(r->ucp, &wp, &p->worker);
  if (st != UCS_OK) {
    freeaddrinfo(ai);
    snprintf(p->failure, sizeof p->failure, "cannot create a UCX worker: %s",
             ucs_status_string(st));
    return TSTOR_EBACKEND;
  }
  ucp_am_handler_param_t am = {
      .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG,
      .id = TSR_AM_REPLY,
      .cb = on_reply,
      .arg = p,
  };
  if ((st = ucp_worker_set_am_recv_handler(p->worker, &am)) != UCS_OK) {
    freeaddrinfo(ai);
    snprintf(p->failure, sizeof p->failure, "cannot set the reply handler: %s",
             ucs_status_string(st));
    return TSTOR_EBACKEND;
  }
  ucp_ep_params_t ep_params = {
      .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
      .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
      .sockaddr = {.addr = ai->ai_addr, .addrlen = ai->ai_addrlen},
      .err_mode = UCP_ERR_HANDLING_MODE_PEER,
      .err_handler = {.cb = on_ep_error, .arg = p},
  };
  st = ucp_ep_create(p->worker, &ep_params, &p->ep);
  freeaddrinfo(ai);
  if (st != UCS_OK) {
    p->ep = NULL;
    snprintf(p->failure, sizeof p->failure, "cannot connect: %s", ucs_status_string(st));
    p->failed = 1;
    return TSTOR_EIO;
  }
  uint8_t buf[TSR_MAX_MESSAGE], cnonce[TSR_NONCE_SIZE], mac[TSR_MAC_SIZE];
  tsr_msg reply;
  if (tsr_random(cnonce, sizeof cnonce) != 0) {
    peer_fail(p, "no random bytes for the challenge");
    return TSTOR_EBACKEND;
  }
  int rc = rpc(p, -1, buf, tsr_encode_hello(buf, 0, TSTOR_ABI_VERSION, cnonce), &reply);
  if (rc) goto refused;
  if (TSTOR_ABI_MAJOR_OF(reply.abi) != TSTOR_ABI_MAJOR) {
    peer_fail(p, "the peer speaks backend ABI %u.%u, this module %u.%u",
              TSTOR_ABI_MAJOR_OF(reply.abi), TSTOR_ABI_MINOR_OF(reply.abi), TSTOR_ABI_MAJOR,
              TSTOR_ABI_MINOR);
    return TSTOR_EABI;
  }
  uint8_t snonce[TSR_NONCE_SIZE];
  memcpy(snonce, reply.nonce, sizeof snonce);
  if (tsr_mac(r->secret, r->secret_len, "client", snonce, cnonce, mac) != 0) {
    peer_fail(p, "HMAC failed");
    return TSTOR_EBACKEND;
  }
  rc = rpc(p, -1, buf, tsr_encode_auth(buf, 0, mac), &reply);
  if (rc) goto refused;
  uint8_t expect[TSR_MAC_SIZE];
  if (tsr_mac(r->secret, r->secret_len, "server", cnonce, snonce, expect) != 0 ||
      !tsr_mac_equal(expect, reply.mac)) {
    peer_fail(p, "the peer does not hold the secret (its proof is wrong)");
    return TSTOR_EACCES;
  }
  p->ndevices = reply.ndevices;
  memcpy(p->devices, reply.devices, sizeof p->devices);
  return 0;
refused:
  /* a refusal (the peer stays connected): keep its reason, and hang up */
  if (!p->failed) peer_fail(p, "%s", p->refusal);
  return rc;
}

static void peer_close(remote *r, peer *p) {
  if (p->worker) {
    unsigned leaked = 0;
    while (p->blocks) {
      rblock *b = p->blocks;
      p->blocks = b->next;
      if (getpid() == r->pid && b->rkey) ucp_rkey_destroy(b->rkey);
      free(b);
      leaked++;
    }
    if (leaked)
      r->reg->log(r->m, TSTOR_LOG_WARN, "peer %s: %u block(s) still allocated at unload",
                  p->name, leaked);
    if (p->window_rkey && getpid() == r->pid) ucp_rkey_destroy(p->window_rkey);
    if (!p->failed && getpid() == r->pid) {
      uint8_t buf[TSR_MAX_MESSAGE];
      tsr_msg reply;
      long long saved = r->timeout_ms;
      r->timeout_ms = saved < 1000 ? saved : 1000; /* bye is a courtesy */
      rpc(p, -1, buf, tsr_encode_bye(buf, 0), &reply);
      r->timeout_ms = saved;
    }
    if (p->ep && getpid() == r->pid) {
      ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                   .flags = p->failed ? UCP_EP_CLOSE_FLAG_FORCE : 0};
      ucs_status_ptr_t req = ucp_ep_close_nbx(p->ep, &param);
      if (UCS_PTR_IS_PTR(req)) {
        double deadline = now_ms() + 1000;
        while (ucp_request_check_status(req) == UCS_INPROGRESS && now_ms() < deadline)
          ucp_worker_progress(p->worker);
        ucp_request_free(req);
      }
    }
    if (getpid() == r->pid) ucp_worker_destroy(p->worker);
  }
  pthread_mutex_destroy(&p->blocks_mu);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

static void remote_free_all(remote *r) {
  for (int i = 0; i < r->npeers; i++) peer_close(r, r->peers[i]);
  if (r->ucp && getpid() == r->pid) ucp_cleanup(r->ucp);
  tsr_secret_free(r->secret, r->secret_len);
  rstreams_free(r->streams);
  free(r);
}

static int remote_init(const tstor_registrar *reg, tstor_module *m, void **module_state,
                       char *msg, size_t msg_size) {
  if (!TSTOR_REGISTRAR_HAS(reg, set_error) || !TSTOR_REGISTRAR_HAS(reg, config_error)) {
    snprintf(msg, msg_size, "the core's registrar is older than this module needs");
    return TSTOR_EABI;
  }
  long long timeout_ms;
  int rc = reg->config_int(m, "timeout_ms", 5000, 10, 3600000, &timeout_ms);
  if (rc) return rc;
  const char *peers = reg->config_get(m, "peers");
  const char *secret_file = reg->config_get(m, "secret_file");
  if (!peers || strspn(peers, " \t,") == strlen(peers)) {
    snprintf(msg, msg_size, "no peers (set peers = host:port, ... in [backend remote])");
    return TSTOR_EDECLINED;
  }
  if (!secret_file || !*secret_file) {
    snprintf(msg, msg_size, "peers are set but secret_file is not");
    return TSTOR_ECONFIG;
  }
  remote *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(msg, msg_size, "out of host memory");
    return TSTOR_ENOMEM;
  }
  r->reg = reg;
  r->m = m;
  r->timeout_ms = timeout_ms;
  r->pid = getpid();
  r->streams = rstreams_new(reg, r);
  if (!r->streams) {
    free(r);
    snprintf(msg, msg_size, "out of host memory");
    return TSTOR_ENOMEM;
  }
  char why[512];
  if (tsr_secret_read(secret_file, &r->secret, &r->secret_len, why, sizeof why) != 0) {
    rstreams_free(r->streams);
    free(r);
    return reg->config_error(m, "secret_file", "%s", why);
  }
  ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                         .features = UCP_FEATURE_AM | UCP_FEATURE_RMA};
  ucs_status_t st = ucp_init(&params, NULL, &r->ucp);
  if (st != UCS_OK) {
    snprintf(msg, msg_size, "cannot start UCX: %s", ucs_status_string(st));
    r->ucp = NULL;
    remote_free_all(r);
    return TSTOR_EBACKEND;
  }

  /* Each peer in order; the ones that fail are reported and left out. */
  char list[4096];
  if (strlen(peers) >= sizeof list) {
    remote_free_all(r);
    return reg->config_error(m, "peers", "longer than %zu characters", sizeof list - 1);
  }
  snprintf(list, sizeof list, "%s", peers);
  size_t used = 0;
  int first_rc = 0;
  msg[0] = '\0';
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ' || *tok == '\t') tok++;
    char *end = tok + strlen(tok);
    while (end > tok && (end[-1] == ' ' || end[-1] == '\t')) *--end = '\0';
    if (!*tok) continue;
    if (r->npeers == MAX_PEERS) {
      remote_free_all(r);
      return reg->config_error(m, "peers", "more than %d peers", MAX_PEERS);
    }
    peer *p = calloc(1, sizeof *p);
    if (!p || pthread_mutex_init(&p->mu, NULL) != 0) {
      free(p);
      remote_free_all(r);
      snprintf(msg, msg_size, "out of host memory");
      return TSTOR_ENOMEM;
    }
    if (pthread_mutex_init(&p->blocks_mu, NULL) != 0) {
      pthread_mutex_destroy(&p->mu);
      free(p);
      remote_free_all(r);
      snprintf(msg, msg_size, "out of host memory");
      return TSTOR_ENOMEM;
    }
    p->r = r;
    snprintf(p->name, sizeof p->name, "%s", tok);
    r->peers[r->npeers++] = p;
    int prc = peer_connect(r, p);
    if (prc == 0 && r->ndevices + (int)p->ndevices > (int)(sizeof r->devices / sizeof r->devices[0])) {
      snprintf(p->failure, sizeof p->failure, "too many devices in all");
      prc = TSTOR_ERANGE;
    }
    if (prc != 0) {
      char detail[sizeof p->failure];
      snprintf(detail, sizeof detail, "%s", p->failure[0] ? p->failure : "refused");
      reg->log(m, TSTOR_LOG_WARN, "peer %s left out: %s", p->name, detail);
      if (!first_rc) first_rc = prc;
      if (used < msg_size)
        used += (size_t)snprintf(msg + used, msg_size - used, "%speer %s: %s", used ? "; " : "",
                                 p->name, detail);
      if (!p->failed) peer_fail(p, "%s", detail);
      continue;
    }
    p->first_device = r->ndevices;
    for (uint32_t i = 0; i < p->ndevices; i++) {
      rdevice *d = &r->devices[r->ndevices++];
      d->p = p;
      d->index = i;
      d->stats.struct_size = sizeof d->stats;
      reg->log(m, TSTOR_LOG_INFO, "remote:%d -> %s %s", p->first_device + (int)i, p->name,
               p->devices[i].name);
    }
  }
  if (r->ndevices == 0) {
    remote_free_all(r);
    if (first_rc == 0) {
      snprintf(msg, msg_size, "the peers export no devices");
      return TSTOR_EDECLINED;
    }
    return first_rc == TSTOR_ECONFIG ? TSTOR_ECONFIG : first_rc;
  }
  msg[0] = '\0';
  if ((rc = reg->register_device_type(m, &remote_device_ops, r)) != 0 ||
      (rc = reg->register_copy(m, "cpu", "remote", remote_copy_to_device, r)) != 0 ||
      (rc = reg->register_copy(m, "remote", "cpu", remote_copy_to_host, r)) != 0 ||
      (rc = reg->register_copy(m, "remote", "remote", remote_copy_on_device, r)) != 0) {
    remote_free_all(r);
    return rc;
  }
  *module_state = r;
  return 0;
}

static void remote_fini(void *module_state) { remote_free_all(module_state); }

TSTOR_BACKEND_DEFINE(remote_init, remote_fini);
