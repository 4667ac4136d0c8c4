/* `tstor serve` (server.h): a UCX listener, one record per client, and the
 * request handlers. Everything below tsr_serve runs on the progress thread;
 * UCX callbacks only queue what they received (a request, a failed
 * connection), and the loop handles the queue between two progress calls, so
 * no handler runs inside UCX. */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <tstor/backend.h>
#include <tstor/tstor.h>
#include <ucp/api/ucp.h>

#include "protocol.h"

typedef struct srv_block {
  tstor_storage *storage; /* owns the bytes; released with the block */
  void *addr;             /* the device's address: host memory unless staged */
  uint64_t nbytes;
  ucp_mem_h memh;         /* NULL for a staged block: its bytes pass through the window */
  int staged;
  uint32_t device;
  uint32_t generation; /* the upper half of the handle: a stale handle misses */
} srv_block;

typedef struct srv_client {
  struct srv_client *next;
  ucp_ep_h ep;
  char name[80];     /* "127.0.0.1:41234 #3", for the log */
  int state;         /* CL_* */
  int dead;          /* the connection failed or the client said bye */
  unsigned long refused; /* requests refused; only the first REFUSALS_LOGGED are logged */
  uint8_t client_nonce[TSR_NONCE_SIZE], server_nonce[TSR_NONCE_SIZE];
  srv_block **blocks; /* slot i holds handle (generation << 32 | i + 1) */
  uint32_t nslots, generation;
  uint64_t held, peak, allocs, frees; /* all devices */
  uint64_t dev_held[TSR_MAX_DEVICES], dev_peak[TSR_MAX_DEVICES];
  uint64_t dev_allocs[TSR_MAX_DEVICES], dev_frees[TSR_MAX_DEVICES];
  /* The window staged blocks' bytes pass through (protocol.h); made on the
   * first WINDOW, counted in `held`. */
  uint8_t *window;
  uint64_t window_size;
  ucp_mem_h window_memh;
} srv_client;

enum { CL_NEW, CL_CHALLENGED, CL_READY };

/* A client that sends garbage without end must not fill the log. */
#define REFUSALS_LOGGED 1000
/* Connections served at once; more are rejected. */
#define MAX_CLIENTS 256
/* How long the progress thread keeps polling after its last event before it
 * sleeps (progress_thread). */
#define SPIN_US 500.0
/* The largest window a client gets (less when its cap is lower). */
#define WINDOW_MAX ((uint64_t)16 << 20)

/* A request as received, waiting for the loop. */
typedef struct srv_msg {
  struct srv_msg *next;
  ucp_ep_h ep;
  size_t len;
  int unread; /* too long or rendezvous: data holds nothing */
  uint8_t data[];
} srv_msg;

typedef struct server {
  const tsr_server_options *opt;
  FILE *log;
  tstor_context *ctx;
  uint8_t *secret;
  size_t secret_len;
  tsr_device_desc devices[TSR_MAX_DEVICES];
  tstor_device tdev[TSR_MAX_DEVICES];
  int staged[TSR_MAX_DEVICES]; /* its memory is not host memory */
  uint32_t ndevices;
  tstor_device host; /* a host-memory device, for wrapping host buffers */
  ucp_context_h ucp;
  ucp_worker_h worker;
  ucp_listener_h listener;
  srv_client *clients;
  srv_msg *queue_head, **queue_tail;
  unsigned long accepted, dropped;
  uint64_t total_held;
  atomic_int stop;
  char why[TSR_MAX_TEXT]; /* the last failure of block_io or block_move */
  uint8_t reply[TSR_MAX_MESSAGE];
} server;

static void slog(server *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void slog(server *s, const char *fmt, ...) {
  char when[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  fprintf(s->log, "tstor serve %s: ", when);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(s->log, fmt, ap);
  va_end(ap);
  fputc('\n', s->log);
  fflush(s->log);
}

/* ---------------------------------------------------------------- sends */

static void send_done(void *request, ucs_status_t status, void *user_data) {
  (void)status;
  free(user_data);
  ucp_request_free(request);
}

/* Sends len bytes of s->reply to the client, from a copy that lives until
 * UCX is done with it. A failure to send is the connection's failure, which
 * the error handler reports. */
static void send_reply(server *s, srv_client *c, size_t len) {
  if (c->dead) return;
  uint8_t *copy = malloc(len);
  if (!copy) return;
  memcpy(copy, s->reply, len);
  ucp_request_param_t param = {
      .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                      UCP_OP_ATTR_FIELD_FLAGS,
      .flags = UCP_AM_SEND_FLAG_EAGER,
      .cb.send = send_done,
      .user_data = copy,
  };
  ucs_status_ptr_t req = ucp_am_send_nbx(c->ep, TSR_AM_REPLY, NULL, 0, copy, len, &param);
  if (!UCS_PTR_IS_PTR(req)) free(copy); /* done at once, or failed */
}

static void send_error(server *s, srv_client *c, const tsr_msg *m, int status, const char *fmt,
                       ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Logs the refusal and answers it with an error reply. */
static void send_error(server *s, srv_client *c, const tsr_msg *m, int status, const char *fmt,
                       ...) {
  char text[TSR_MAX_TEXT + 1];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (++c->refused <= REFUSALS_LOGGED)
    slog(s, "client %s: %s refused: %s: %s", c->name, tsr_type_name(m->type),
         tsr_status_text(status), text);
  if (c->refused == REFUSALS_LOGGED)
    slog(s, "client %s: %d requests refused; the rest are counted, not logged", c->name,
         REFUSALS_LOGGED);
  send_reply(s, c, tsr_encode_error(s->reply, m->type, m->id, status, text));
}

/* --------------------------------------------------------------- blocks */

static void block_free(server *s, srv_client *c, uint32_t slot) {
  srv_block *b = c->blocks[slot];
  if (!b) return;
  if (b->memh) ucp_mem_unmap(s->ucp, b->memh);
  tstor_storage_release(b->storage);
  c->held -= b->nbytes;
  c->dev_held[b->device] -= b->nbytes;
  c->frees++;
  c->dev_frees[b->device]++;
  s->total_held -= b->nbytes;
  free(b);
  c->blocks[slot] = NULL;
}

/* The block a handle names, when it is this client's; NULL otherwise. */
static srv_block *block_find(srv_client *c, uint64_t handle) {
  uint32_t slot = (uint32_t)handle, gen = (uint32_t)(handle >> 32);
  if (slot == 0 || slot > c->nslots) return NULL;
  srv_block *b = c->blocks[slot - 1];
  return b && b->generation == gen ? b : NULL;
}

/* Whether [offset, offset + nbytes) lies inside the block. */
static int in_block(const srv_block *b, uint64_t offset, uint64_t nbytes) {
  return offset <= b->nbytes && nbytes <= b->nbytes - offset;
}

/* Copies n bytes between [off, off + n) of a block and host memory, either
 * way, through the server's own context (the device's copy kernels). The
 * range is checked already. 0 or a TSTOR_E* code. */
static int block_io(server *s, srv_block *b, uint64_t off, void *host, size_t n, int to_block) {
  if (!b->staged) {
    if (to_block)
      memmove((uint8_t *)b->addr + off, host, n);
    else
      memmove(host, (uint8_t *)b->addr + off, n);
    return 0;
  }
  tstor_storage *view = NULL, *wrap = NULL;
  int rc = tstor_storage_view(b->storage, (size_t)off, n, &view);
  if (rc == 0) rc = tstor_storage_wrap(s->ctx, s->host, host, n, &wrap);
  if (rc == 0) rc = to_block ? tstor_storage_copy(view, wrap) : tstor_storage_copy(wrap, view);
  if (rc) snprintf(s->why, sizeof s->why, "%s", tstor_last_error());
  tstor_storage_release(wrap);
  tstor_storage_release(view);
  return rc;
}

/* memmove between two blocks' ranges (checked already), whatever their
 * devices. Overlapping ranges of a staged block go through host memory, since
 * a device's copy kernel need not allow overlap. */
static int block_move(server *s, srv_block *dst, uint64_t doff, srv_block *src, uint64_t soff,
                      size_t n) {
  if (n == 0) return 0;
  if (!dst->staged && !src->staged) {
    memmove((uint8_t *)dst->addr + doff, (uint8_t *)src->addr + soff, n);
    return 0;
  }
  if (!src->staged) return block_io(s, dst, doff, (uint8_t *)src->addr + soff, n, 1);
  if (!dst->staged) return block_io(s, src, soff, (uint8_t *)dst->addr + doff, n, 0);
  if (dst == src && doff < soff + n && soff < doff + n) {
    uint8_t *tmp = malloc(n);
    if (!tmp) {
      snprintf(s->why, sizeof s->why, "no host memory to stage %zu bytes", n);
      return TSTOR_ENOMEM;
    }
    int rc = block_io(s, src, soff, tmp, n, 0);
    if (rc == 0) rc = block_io(s, dst, doff, tmp, n, 1);
    free(tmp);
    return rc;
  }
  tstor_storage *dv = NULL, *sv = NULL;
  int rc = tstor_storage_view(dst->storage, (size_t)doff, n, &dv);
  if (rc == 0) rc = tstor_storage_view(src->storage, (size_t)soff, n, &sv);
  if (rc == 0) rc = tstor_storage_copy(dv, sv);
  if (rc) snprintf(s->why, sizeof s->why, "%s", tstor_last_error());
  tstor_storage_release(sv);
  tstor_storage_release(dv);
  return rc;
}

/* A failure of the server's own moving bytes (s->why says it), as an error
 * reply naming the block's device. */
static void send_io_error(server *s, srv_client *c, const tsr_msg *m, int rc,
                          const srv_block *b) {
  send_error(s, c, m, rc == TSTOR_ENOMEM ? TSR_ST_NOMEM : TSR_ST_INTERNAL, "%s: %s",
             s->devices[b->device].name, s->why[0] ? s->why : tstor_strerror(rc));
}

/* A packed key for memh, 1 to TSR_MAX_RKEY bytes, released by the caller
 * with ucp_rkey_buffer_release. 0, or a TSR_ST_* status with s->why. */
static int pack_key(server *s, ucp_mem_h memh, void **rkey, size_t *rkey_len) {
  ucs_status_t st = ucp_rkey_pack(s->ucp, memh, rkey, rkey_len);
  if (st == UCS_OK && *rkey_len > 0 && *rkey_len <= TSR_MAX_RKEY) return 0;
  if (st == UCS_OK) ucp_rkey_buffer_release(*rkey);
  snprintf(s->why, sizeof s->why, "ucp_rkey_pack: %s (%zu bytes)", ucs_status_string(st),
           *rkey_len);
  *rkey = NULL;
  return TSR_ST_INTERNAL;
}

/* Maps [addr, addr + len) for one-sided access and packs its key. 0, or a
 * TSR_ST_* status with s->why and nothing left mapped. */
static int map_and_pack(server *s, void *addr, size_t len, ucp_mem_h *memh, void **rkey,
                        size_t *rkey_len) {
  ucp_mem_map_params_t mp = {
      .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
      .address = addr,
      .length = len,
  };
  ucs_status_t st = ucp_mem_map(s->ucp, &mp, memh);
  if (st != UCS_OK) {
    *memh = NULL;
    snprintf(s->why, sizeof s->why, "ucp_mem_map: %s", ucs_status_string(st));
    return TSR_ST_NOMEM;
  }
  int status = pack_key(s, *memh, rkey, rkey_len);
  if (status) {
    ucp_mem_unmap(s->ucp, *memh);
    *memh = NULL;
  }
  return status;
}

/* ------------------------------------------------------------- handlers */

static void on_hello(server *s, srv_client *c, const tsr_msg *m) {
  if (c->state != CL_NEW)
    return send_error(s, c, m, TSR_ST_BADMSG, "hello sent twice");
  if (TSTOR_ABI_MAJOR_OF(m->abi) != TSTOR_ABI_MAJOR) {
    slog(s, "client %s: backend ABI %u.%u, this server speaks %u.%u", c->name,
         TSTOR_ABI_MAJOR_OF(m->abi), TSTOR_ABI_MINOR_OF(m->abi), TSTOR_ABI_MAJOR,
         TSTOR_ABI_MINOR);
    return send_error(s, c, m, TSR_ST_VERSION, "backend ABI %u.%u, the server's is %u.%u",
                      TSTOR_ABI_MAJOR_OF(m->abi), TSTOR_ABI_MINOR_OF(m->abi), TSTOR_ABI_MAJOR,
                      TSTOR_ABI_MINOR);
  }
  memcpy(c->client_nonce, m->nonce, TSR_NONCE_SIZE);
  if (tsr_random(c->server_nonce, TSR_NONCE_SIZE) != 0)
    return send_error(s, c, m, TSR_ST_INTERNAL, "no random bytes");
  c->state = CL_CHALLENGED;
  send_reply(s, c, tsr_encode_challenge(s->reply, m->id, TSTOR_ABI_VERSION, c->server_nonce));
}

static void on_auth(server *s, srv_client *c, const tsr_msg *m) {
  if (c->state != CL_CHALLENGED)
    return send_error(s, c, m, TSR_ST_BADMSG, "auth without a hello first");
  uint8_t expect[TSR_MAC_SIZE], mine[TSR_MAC_SIZE];
  if (tsr_mac(s->secret, s->secret_len, "client", c->server_nonce, c->client_nonce, expect) ||
      tsr_mac(s->secret, s->secret_len, "server", c->client_nonce, c->server_nonce, mine))
    return send_error(s, c, m, TSR_ST_INTERNAL, "HMAC failed");
  if (!tsr_mac_equal(expect, m->mac)) {
    c->state = CL_NEW; /* a new hello, a new challenge: no second guess on one nonce */
    return send_error(s, c, m, TSR_ST_DENIED, "wrong secret");
  }
  c->state = CL_READY;
  slog(s, "client %s: authenticated; %u device(s)", c->name, s->ndevices);
  send_reply(s, c, tsr_encode_welcome(s->reply, m->id, mine, s->devices, s->ndevices));
}

static void on_alloc(server *s, srv_client *c, const tsr_msg *m) {
  if (m->device >= s->ndevices)
    return send_error(s, c, m, TSR_ST_NODEV, "device %u (the server exports %u)", m->device,
                      s->ndevices);
  if (m->nbytes == 0 || m->nbytes > SIZE_MAX / 2)
    return send_error(s, c, m, TSR_ST_INVAL, "%llu bytes", (unsigned long long)m->nbytes);
  if (m->nbytes > s->opt->max_client_bytes - c->held)
    return send_error(s, c, m, TSR_ST_QUOTA, "%llu bytes asked, %llu held, limit %llu MiB",
                      (unsigned long long)m->nbytes, (unsigned long long)c->held,
                      (unsigned long long)(s->opt->max_client_bytes >> 20));
  uint32_t slot = 0;
  while (slot < c->nslots && c->blocks[slot]) slot++;
  if (slot == c->nslots) {
    if (c->nslots >= (1u << 20))
      return send_error(s, c, m, TSR_ST_QUOTA, "%u blocks held", c->nslots);
    uint32_t n = c->nslots ? c->nslots * 2 : 16;
    srv_block **grown = realloc(c->blocks, n * sizeof *grown);
    if (!grown) return send_error(s, c, m, TSR_ST_NOMEM, "no memory for the block table");
    memset(grown + c->nslots, 0, (n - c->nslots) * sizeof *grown);
    c->blocks = grown;
    c->nslots = n;
  }
  srv_block *b = calloc(1, sizeof *b);
  if (!b) return send_error(s, c, m, TSR_ST_NOMEM, "no memory for a block record");
  int rc = tstor_storage_new(s->ctx, s->tdev[m->device], (size_t)m->nbytes, &b->storage);
  if (rc) {
    free(b);
    return send_error(s, c, m, rc == TSTOR_ENOMEM ? TSR_ST_NOMEM : TSR_ST_INTERNAL,
                      "%s: %s", s->devices[m->device].name, tstor_last_error());
  }
  b->addr = tstor_storage_data(b->storage);
  b->nbytes = m->nbytes;
  b->device = m->device;
  b->staged = s->staged[m->device];
  void *rkey = NULL;
  size_t rkey_len = 0;
  if (!b->staged) { /* a staged block has no key: its bytes go through the window */
    int status = map_and_pack(s, b->addr, (size_t)m->nbytes, &b->memh, &rkey, &rkey_len);
    if (status) {
      tstor_storage_release(b->storage);
      free(b);
      return send_error(s, c, m, status, "%s", s->why);
    }
  }
  b->generation = ++c->generation;
  c->blocks[slot] = b;
  c->held += b->nbytes;
  c->dev_held[b->device] += b->nbytes;
  if (c->held > c->peak) c->peak = c->held;
  if (c->dev_held[b->device] > c->dev_peak[b->device])
    c->dev_peak[b->device] = c->dev_held[b->device];
  c->allocs++;
  c->dev_allocs[b->device]++;
  s->total_held += b->nbytes;
  uint64_t handle = (uint64_t)b->generation << 32 | (slot + 1);
  send_reply(s, c, tsr_encode_alloc_reply(s->reply, m->id, handle, (uint64_t)(uintptr_t)b->addr,
                                          rkey, (uint32_t)rkey_len));
  if (rkey) ucp_rkey_buffer_release(rkey);
}

static void on_free(server *s, srv_client *c, const tsr_msg *m) {
  if (!block_find(c, m->handle))
    return send_error(s, c, m, TSR_ST_NOHANDLE, "handle 0x%llx", (unsigned long long)m->handle);
  block_free(s, c, (uint32_t)m->handle - 1);
  send_reply(s, c, tsr_encode_empty_reply(s->reply, m->type, m->id));
}

static void on_copy(server *s, srv_client *c, const tsr_msg *m) {
  srv_block *dst = block_find(c, m->handle), *src = block_find(c, m->src_handle);
  if (!dst || !src)
    return send_error(s, c, m, TSR_ST_NOHANDLE, "handle 0x%llx",
                      (unsigned long long)(dst ? m->src_handle : m->handle));
  if (!in_block(dst, m->offset, m->nbytes) || !in_block(src, m->src_offset, m->nbytes))
    return send_error(s, c, m, TSR_ST_RANGE,
                      "%llu bytes at %llu (of %llu) from %llu (of %llu)",
                      (unsigned long long)m->nbytes, (unsigned long long)m->offset,
                      (unsigned long long)dst->nbytes, (unsigned long long)m->src_offset,
                      (unsigned long long)src->nbytes);
  int rc = block_move(s, dst, m->offset, src, m->src_offset, (size_t)m->nbytes);
  if (rc) return send_io_error(s, c, m, rc, dst->staged ? dst : src);
  send_reply(s, c, tsr_encode_empty_reply(s->reply, m->type, m->id));
}

/* The bytes a strided side spans (element_size + sum of (size - 1) * stride),
 * into *span; 0, or -1 when that overflows. */
static int strided_span(const tsr_msg *m, const int64_t *strides, uint64_t *span) {
  uint64_t total = m->element_size;
  for (uint32_t d = 0; d < m->ndim; d++) {
    uint64_t ext;
    if (__builtin_mul_overflow((uint64_t)(m->sizes[d] - 1), (uint64_t)strides[d], &ext) ||
        __builtin_add_overflow(total, ext, &total))
      return -1;
  }
  *span = total;
  return 0;
}

/* backend.h's copy_strided, inside two blocks of this client. The element
 * count is bounded by what the destination span holds (its elements share no
 * byte), so a request cannot make the server loop longer than its memory. */
static void on_copy_strided(server *s, srv_client *c, const tsr_msg *m) {
  srv_block *dst = block_find(c, m->handle), *src = block_find(c, m->src_handle);
  if (!dst || !src)
    return send_error(s, c, m, TSR_ST_NOHANDLE, "handle 0x%llx",
                      (unsigned long long)(dst ? m->src_handle : m->handle));
  if (m->element_size == 0 || m->element_size > 1024)
    return send_error(s, c, m, TSR_ST_INVAL, "elements of %u bytes", m->element_size);
  uint64_t n = 1;
  for (uint32_t d = 0; d < m->ndim; d++) {
    if (m->sizes[d] == 0) /* nothing to copy */
      return send_reply(s, c, tsr_encode_empty_reply(s->reply, m->type, m->id));
    if (__builtin_mul_overflow(n, (uint64_t)m->sizes[d], &n))
      return send_error(s, c, m, TSR_ST_INVAL, "element count overflows");
  }
  uint64_t dspan, sspan;
  if (strided_span(m, m->dst_strides, &dspan) || strided_span(m, m->src_strides, &sspan) ||
      !in_block(dst, m->offset, dspan) || !in_block(src, m->src_offset, sspan))
    return send_error(s, c, m, TSR_ST_RANGE, "a strided block of %u dims outside its blocks",
                      m->ndim);
  if (n > dspan / m->element_size)
    return send_error(s, c, m, TSR_ST_INVAL,
                      "%llu elements of %u bytes cannot be apart in a span of %llu bytes",
                      (unsigned long long)n, m->element_size, (unsigned long long)dspan);
  /* A staged side is read into host memory first (the destination too, for
   * the bytes between its elements) and the destination written back after. */
  uint8_t *dbuf = NULL, *sbuf = NULL;
  int rc = 0;
  if (dst->staged && !(dbuf = malloc((size_t)dspan))) rc = TSTOR_ENOMEM;
  if (rc == 0 && src->staged && !(sbuf = malloc((size_t)sspan))) rc = TSTOR_ENOMEM;
  if (rc) snprintf(s->why, sizeof s->why, "no host memory to stage a strided copy");
  if (rc == 0 && dbuf) rc = block_io(s, dst, m->offset, dbuf, (size_t)dspan, 0);
  if (rc == 0 && sbuf) rc = block_io(s, src, m->src_offset, sbuf, (size_t)sspan, 0);
  if (rc) {
    free(dbuf);
    free(sbuf);
    return send_io_error(s, c, m, rc, dst->staged ? dst : src);
  }
  uint8_t *to = dbuf ? dbuf : (uint8_t *)dst->addr + m->offset;
  const uint8_t *from = sbuf ? sbuf : (const uint8_t *)src->addr + m->src_offset;
  int64_t idx[TSR_MAX_DIMS] = {0};
  int last = (int)m->ndim - 1;
  uint64_t doff = 0, soff = 0;
  for (;;) {
    for (int64_t i = 0; i < m->sizes[last]; i++) /* the innermost dimension */
      memmove(to + doff + (uint64_t)i * (uint64_t)m->dst_strides[last],
              from + soff + (uint64_t)i * (uint64_t)m->src_strides[last], m->element_size);
    int d = last - 1;
    while (d >= 0 && ++idx[d] == m->sizes[d]) {
      doff -= (uint64_t)(m->sizes[d] - 1) * (uint64_t)m->dst_strides[d];
      soff -= (uint64_t)(m->sizes[d] - 1) * (uint64_t)m->src_strides[d];
      idx[d--] = 0;
    }
    if (d < 0) break;
    doff += (uint64_t)m->dst_strides[d];
    soff += (uint64_t)m->src_strides[d];
  }
  if (dbuf) rc = block_io(s, dst, m->offset, dbuf, (size_t)dspan, 1);
  free(dbuf);
  free(sbuf);
  if (rc) return send_io_error(s, c, m, rc, dst);
  send_reply(s, c, tsr_encode_empty_reply(s->reply, m->type, m->id));
}

static void on_fill(server *s, srv_client *c, const tsr_msg *m) {
  srv_block *b = block_find(c, m->handle);
  if (!b)
    return send_error(s, c, m, TSR_ST_NOHANDLE, "handle 0x%llx", (unsigned long long)m->handle);
  uint32_t ps = m->pattern_size;
  if (ps == 0 || ps > 16 || (ps & (ps - 1)) != 0 || m->nbytes % ps != 0)
    return send_error(s, c, m, TSR_ST_INVAL, "pattern of %u bytes over %llu bytes", ps,
                      (unsigned long long)m->nbytes);
  if (!in_block(b, m->offset, m->nbytes))
    return send_error(s, c, m, TSR_ST_RANGE, "%llu bytes at %llu of a block of %llu",
                      (unsigned long long)m->nbytes, (unsigned long long)m->offset,
                      (unsigned long long)b->nbytes);
  if (b->staged) {
    tstor_storage *view = NULL;
    int rc = tstor_storage_view(b->storage, (size_t)m->offset, (size_t)m->nbytes, &view);
    if (rc == 0) rc = tstor_storage_fill_pattern(view, m->pattern, ps);
    if (rc) snprintf(s->why, sizeof s->why, "%s", tstor_last_error());
    tstor_storage_release(view);
    if (rc) return send_io_error(s, c, m, rc, b);
    return send_reply(s, c, tsr_encode_empty_reply(s->reply, m->type, m->id));
  }
  uint8_t *p = (uint8_t *)b->addr + m->offset;
  if (ps == 1) {
    memset(p, m->pattern[0], (size_t)m->nbytes);
  } else {
    for (uint64_t i = 0; i < m->nbytes; i += ps) memcpy(p + i, m->pattern, ps);
  }
  send_reply(s, c, tsr_encode_empty_reply(s->reply, m->type, m->id));
}

static void window_free(server *s, srv_client *c) {
  if (!c->window) return;
  ucp_mem_unmap(s->ucp, c->window_memh);
  free(c->window);
  c->window = NULL;
  c->held -= c->window_size;
  s->total_held -= c->window_size;
  c->window_size = 0;
}

/* Makes the client's window (once) and answers with its size and key. */
static void on_window(server *s, srv_client *c, const tsr_msg *m) {
  if (!c->window) {
    /* at most a quarter of the cap, so that the blocks keep the rest */
    uint64_t size = s->opt->max_client_bytes / 4 < WINDOW_MAX ? s->opt->max_client_bytes / 4
                                                               : WINDOW_MAX;
    size &= ~(uint64_t)4095;
    if (size == 0 || size > s->opt->max_client_bytes - c->held)
      return send_error(s, c, m, TSR_ST_QUOTA, "a window of %llu bytes, %llu held, limit %llu MiB",
                        (unsigned long long)(size ? size : 4096), (unsigned long long)c->held,
                        (unsigned long long)(s->opt->max_client_bytes >> 20));
    uint8_t *buf = aligned_alloc(4096, (size_t)size);
    if (!buf) return send_error(s, c, m, TSR_ST_NOMEM, "no memory for a window");
    void *rkey = NULL;
    size_t rkey_len = 0;
    int status = map_and_pack(s, buf, (size_t)size, &c->window_memh, &rkey, &rkey_len);
    if (status) {
      free(buf);
      return send_error(s, c, m, status, "%s", s->why);
    }
    ucp_rkey_buffer_release(rkey);
    c->window = buf;
    c->window_size = size;
    c->held += size;
    s->total_held += size;
    if (c->held > c->peak) c->peak = c->held;
  }
  void *rkey = NULL;
  size_t rkey_len = 0;
  int status = pack_key(s, c->window_memh, &rkey, &rkey_len);
  if (status) return send_error(s, c, m, status, "%s", s->why);
  send_reply(s, c, tsr_encode_window_reply(s->reply, m->id, c->window_size,
                                           (uint64_t)(uintptr_t)c->window, rkey,
                                           (uint32_t)rkey_len));
  ucp_rkey_buffer_release(rkey);
}

/* PUSH: the window's first nbytes into the block; PULL: the other way. */
static void on_stage(server *s, srv_client *c, const tsr_msg *m) {
  srv_block *b = block_find(c, m->handle);
  if (!b)
    return send_error(s, c, m, TSR_ST_NOHANDLE, "handle 0x%llx", (unsigned long long)m->handle);
  if (!c->window) return send_error(s, c, m, TSR_ST_INVAL, "no window (send WINDOW first)");
  if (m->nbytes > c->window_size)
    return send_error(s, c, m, TSR_ST_RANGE, "%llu bytes through a window of %llu",
                      (unsigned long long)m->nbytes, (unsigned long long)c->window_size);
  if (!in_block(b, m->offset, m->nbytes))
    return send_error(s, c, m, TSR_ST_RANGE, "%llu bytes at %llu of a block of %llu",
                      (unsigned long long)m->nbytes, (unsigned long long)m->offset,
                      (unsigned long long)b->nbytes);
  int rc = block_io(s, b, m->offset, c->window, (size_t)m->nbytes, m->type == TSR_PUSH);
  if (rc) return send_io_error(s, c, m, rc, b);
  send_reply(s, c, tsr_encode_empty_reply(s->reply, m->type, m->id));
}

static void on_stats(server *s, srv_client *c, const tsr_msg *m) {
  if (m->device >= s->ndevices)
    return send_error(s, c, m, TSR_ST_NODEV, "device %u (the server exports %u)", m->device,
                      s->ndevices);
  uint32_t d = m->device;
  send_reply(s, c, tsr_encode_stats_reply(s->reply, m->id, c->dev_held[d], c->dev_peak[d],
                                          c->dev_allocs[d], c->dev_frees[d], s->total_held));
}

static void client_drop_blocks(server *s, srv_client *c) {
  uint64_t held = c->held;
  uint32_t n = 0;
  for (uint32_t i = 0; i < c->nslots; i++)
    if (c->blocks[i]) {
      block_free(s, c, i);
      n++;
    }
  window_free(s, c);
  if (n) slog(s, "client %s: freed %u block(s), %llu bytes", c->name, n, (unsigned long long)held);
}

static void on_bye(server *s, srv_client *c, const tsr_msg *m) {
  slog(s, "client %s: bye", c->name);
  client_drop_blocks(s, c);
  send_reply(s, c, tsr_encode_empty_reply(s->reply, m->type, m->id));
  c->state = CL_NEW;
}

/* One request, decoded and checked against what this client may do. */
static void handle(server *s, srv_client *c, const uint8_t *data, size_t len) {
  tsr_msg m;
  char why[200];
  int st = tsr_decode(data, len, 0, &m, why, sizeof why);
  if (st != 0) {
    /* Answer with what could be read of the header (type 0 when none). */
    if (len < TSR_HEADER_SIZE || (m.type & TSR_REPLY) || !tsr_type_known(m.type)) m.type = 0;
    return send_error(s, c, &m, st, "%s", why);
  }
  if (m.type == TSR_HELLO) return on_hello(s, c, &m);
  if (m.type == TSR_AUTH) return on_auth(s, c, &m);
  if (m.type == TSR_BYE) return on_bye(s, c, &m);
  if (c->state != CL_READY)
    return send_error(s, c, &m, TSR_ST_NOSESSION, "%s before authentication",
                      tsr_type_name(m.type));
  switch (m.type) {
    case TSR_ALLOC:
      return on_alloc(s, c, &m);
    case TSR_FREE:
      return on_free(s, c, &m);
    case TSR_COPY:
      return on_copy(s, c, &m);
    case TSR_FILL:
      return on_fill(s, c, &m);
    case TSR_STATS:
      return on_stats(s, c, &m);
    case TSR_COPY_STRIDED:
      return on_copy_strided(s, c, &m);
    case TSR_WINDOW:
      return on_window(s, c, &m);
    case TSR_PUSH:
    case TSR_PULL:
      return on_stage(s, c, &m);
  }
  send_error(s, c, &m, TSR_ST_BADMSG, "unexpected type %d", m.type);
}

/* --------------------------------------------------------- UCX callbacks */

static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status) {
  srv_client *c = arg;
  (void)ep;
  (void)status;
  c->dead = 1; /* the loop reaps it */
}

static ucs_status_t on_request(void *arg, const void *header, size_t header_length, void *data,
                               size_t length, const ucp_am_recv_param_t *param) {
  server *s = arg;
  (void)header;
  (void)header_length;
  if (param->reply_ep == NULL) { /* nobody to answer */
    if (++s->dropped <= REFUSALS_LOGGED)
      slog(s, "dropped a request of %zu bytes without a reply endpoint%s", length,
           s->dropped == REFUSALS_LOGGED ? "; further drops are not logged" : "");
    return UCS_OK;
  }
  /* Too long, or its data not here (rendezvous): refused unread, with a reply. */
  int unread = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || length > TSR_MAX_MESSAGE;
  srv_msg *q = malloc(sizeof *q + (unread ? 0 : length));
  if (!q) return UCS_OK;
  q->next = NULL;
  q->ep = param->reply_ep;
  q->len = length;
  q->unread = unread;
  if (!unread && length) memcpy(q->data, data, length);
  *s->queue_tail = q;
  s->queue_tail = &q->next;
  return UCS_OK;
}

static void on_connect(ucp_conn_request_h req, void *arg) {
  server *s = arg;
  unsigned live = 0;
  for (srv_client *p = s->clients; p; p = p->next) live++;
  srv_client *c = live < MAX_CLIENTS ? calloc(1, sizeof *c) : NULL;
  if (!c) {
    slog(s, "connection refused: %u clients already", live);
    ucp_listener_reject(s->listener, req);
    return;
  }
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  ucp_conn_request_attr_t attr = {.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR};
  if (ucp_conn_request_query(req, &attr) == UCS_OK) {
    if (attr.client_address.ss_family == AF_INET) {
      struct sockaddr_in *in = (struct sockaddr_in *)&attr.client_address;
      inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
      port = ntohs(in->sin_port);
    } else if (attr.client_address.ss_family == AF_INET6) {
      struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&attr.client_address;
      inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
      port = ntohs(in6->sin6_port);
    }
  }
  snprintf(c->name, sizeof c->name, "%s:%u #%lu", host, port, ++s->accepted);
  ucp_ep_params_t ep_params = {
      .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                    UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
      .conn_request = req,
      .err_mode = UCP_ERR_HANDLING_MODE_PEER,
      .err_handler = {.cb = on_ep_error, .arg = c},
  };
  ucs_status_t st = ucp_ep_create(s->worker, &ep_params, &c->ep);
  if (st != UCS_OK) {
    slog(s, "client %s: cannot accept: %s", c->name, ucs_status_string(st));
    free(c);
    return;
  }
  c->next = s->clients;
  s->clients = c;
  slog(s, "client %s: connected", c->name);
}

/* ------------------------------------------------------------------ loop */

static void ep_close(server *s, ucp_ep_h ep) {
  ucp_request_param_t param = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = UCP_EP_CLOSE_FLAG_FORCE};
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &param);
  if (UCS_PTR_IS_PTR(req)) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (ucp_request_check_status(req) == UCS_INPROGRESS) {
      ucp_worker_progress(s->worker);
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - start.tv_sec > 2) break;
    }
    ucp_request_free(req);
  }
}

static void client_destroy(server *s, srv_client *c, const char *why) {
  client_drop_blocks(s, c);
  slog(s, "client %s: %s (%lu requests refused); the server holds %llu bytes for all clients",
       c->name, why, c->refused, (unsigned long long)s->total_held);
  ep_close(s, c->ep);
  free(c->blocks);
  free(c);
}

/* Drops the queued requests that came through ep. */
static void queue_purge(server *s, ucp_ep_h ep) {
  for (srv_msg **q = &s->queue_head; *q;) {
    if ((*q)->ep == ep) {
      srv_msg *gone = *q;
      *q = gone->next;
      free(gone);
    } else {
      q = &(*q)->next;
    }
  }
  s->queue_tail = &s->queue_head;
  while (*s->queue_tail) s->queue_tail = &(*s->queue_tail)->next;
}

static void reap(server *s) {
  for (srv_client **p = &s->clients; *p;) {
    srv_client *c = *p;
    if (c->dead) {
      *p = c->next;
      ucp_ep_h ep = c->ep;
      queue_purge(s, ep);
      client_destroy(s, c, "disconnected");
      /* and what arrived while the endpoint closed, before UCX may hand its
       * address to a new connection */
      queue_purge(s, ep);
    } else {
      p = &c->next;
    }
  }
}

static void drain(server *s) {
  while (s->queue_head) {
    srv_msg *q = s->queue_head;
    s->queue_head = q->next;
    if (!s->queue_head) s->queue_tail = &s->queue_head;
    srv_client *c = s->clients;
    while (c && c->ep != q->ep) c = c->next;
    if (c && !c->dead && q->unread) {
      tsr_msg m = {.type = 0};
      send_error(s, c, &m, TSR_ST_BADMSG, "message of %zu bytes, longer than %u or not eager",
                 q->len, (unsigned)TSR_MAX_MESSAGE);
    } else if (c && !c->dead) {
      handle(s, c, q->data, q->len);
    }
    else if (!c)
      slog(s, "dropped a request from an unknown endpoint");
    free(q);
  }
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void *progress_thread(void *arg) {
  server *s = arg;
  int efd = -1;
  ucp_worker_get_efd(s->worker, &efd);
  double busy = now_us();
  while (!atomic_load(&s->stop)) {
    /* One round of progress, then what it queued: a client that floods the
     * server waits for its answers instead of growing the queue. */
    unsigned events = ucp_worker_progress(s->worker);
    drain(s);
    reap(s);
    /* Awake for SPIN_US after the last event: a client's next request (or a
     * put that tcp emulates through this thread) then costs no wakeup. Idle
     * longer, the thread sleeps on the worker's event fd. */
    double now = now_us();
    if (events) busy = now;
    if (now - busy < SPIN_US) continue;
    if (ucp_worker_arm(s->worker) == UCS_ERR_BUSY) continue;
    struct pollfd pfd = {.fd = efd, .events = POLLIN};
    poll(&pfd, 1, 100);
  }
  return NULL;
}

/* -------------------------------------------------------------- startup */

/* Every device with data: host-memory ones mapped for UCX, the others
 * staged through host memory (which needs a host-memory device to wrap it). */
static int find_devices(server *s) {
  int ntypes = tstor_device_type_count(s->ctx), have_host = 0;
  for (int t = 0; t < ntypes && !have_host; t++)
    if (tstor_device_type_flags(s->ctx, t) & TSTOR_DEVICE_HOST) {
      s->host = (tstor_device){t, 0};
      have_host = 1;
    }
  for (int t = 0; t < ntypes; t++) {
    unsigned flags = tstor_device_type_flags(s->ctx, t);
    const char *name = tstor_device_type_name(s->ctx, t);
    if (flags & TSTOR_DEVICE_NO_DATA) {
      slog(s, "not exporting %s: its devices hold no data", name);
      continue;
    }
    if (!(flags & TSTOR_DEVICE_HOST) && !have_host) {
      slog(s, "not exporting %s: staging its bytes needs a host-memory device in the config",
           name);
      continue;
    }
    int n = tstor_device_count(s->ctx, t);
    for (int i = 0; i < n && s->ndevices < TSR_MAX_DEVICES; i++) {
      tstor_device d = {t, i};
      tsr_device_desc *desc = &s->devices[s->ndevices];
      if (tstor_device_format(s->ctx, d, desc->name, sizeof desc->name) != 0) continue;
      s->staged[s->ndevices] = !(flags & TSTOR_DEVICE_HOST);
      s->tdev[s->ndevices++] = d;
    }
  }
  return s->ndevices ? 0 : -1;
}

static int start_ucx(server *s) {
  ucp_params_t params = {
      .field_mask = UCP_PARAM_FIELD_FEATURES,
      .features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP,
  };
  ucs_status_t st = ucp_init(&params, NULL, &s->ucp);
  if (st != UCS_OK) {
    slog(s, "cannot start UCX: %s", ucs_status_string(st));
    return -1;
  }
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SINGLE};
  if ((st = ucp_worker_create(s->ucp, &wp, &s->worker)) != UCS_OK) {
    slog(s, "cannot create a UCX worker: %s", ucs_status_string(st));
    return -1;
  }
  ucp_am_handler_param_t am = {
      .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG,
      .id = TSR_AM_REQUEST,
      .cb = on_request,
      .arg = s,
  };
  if ((st = ucp_worker_set_am_recv_handler(s->worker, &am)) != UCS_OK) {
    slog(s, "cannot set the message handler: %s", ucs_status_string(st));
    return -1;
  }
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  const char *host = s->opt->listen_host ? s->opt->listen_host : "127.0.0.1";
  socklen_t sslen;
  struct sockaddr_in *in = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons((uint16_t)s->opt->port);
    sslen = sizeof *in;
  } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)s->opt->port);
    sslen = sizeof *in6;
  } else {
    slog(s, "listen address '%s' is not a numeric IPv4 or IPv6 address", host);
    return -1;
  }
  ucp_listener_params_t lp = {
      .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
      .sockaddr = {.addr = (struct sockaddr *)&ss, .addrlen = sslen},
      .conn_handler = {.cb = on_connect, .arg = s},
  };
  if ((st = ucp_listener_create(s->worker, &lp, &s->listener)) != UCS_OK) {
    slog(s, "cannot listen on %s:%u: %s", host, s->opt->port, ucs_status_string(st));
    return -1;
  }
  return 0;
}

int tsr_serve(const tsr_server_options *opt) {
  server *s = calloc(1, sizeof *s);
  if (!s) return 1;
  s->opt = opt;
  s->log = opt->log ? opt->log : stderr;
  s->queue_tail = &s->queue_head;
  atomic_init(&s->stop, 0);
  int status = 1;

  /* The signals wait for sigwait here; every thread started after this
   * (UCX's own included) inherits the mask. */
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
  signal(SIGPIPE, SIG_IGN);

  char why[512];
  if (tsr_secret_read(opt->secret_file, &s->secret, &s->secret_len, why, sizeof why) != 0) {
    slog(s, "%s", why);
    goto out;
  }
  int rc = tstor_context_open(opt->config, &s->ctx);
  if (rc) {
    slog(s, "cannot open %s: %s: %s", opt->config ? opt->config : "the default config",
         tstor_strerror(rc), tstor_last_error());
    goto out;
  }
  if (find_devices(s) != 0) {
    slog(s, "the config has no device with data to export");
    goto out;
  }
  if (start_ucx(s) != 0) goto out;
  pthread_t thread;
  if (pthread_create(&thread, NULL, progress_thread, s) != 0) {
    slog(s, "cannot start the progress thread");
    goto out;
  }
  slog(s, "listening on %s:%u; %u device(s); at most %llu MiB per client",
       opt->listen_host ? opt->listen_host : "127.0.0.1", opt->port, s->ndevices,
       (unsigned long long)(opt->max_client_bytes >> 20));
  int sig = 0;
  sigwait(&stop_signals, &sig);
  slog(s, "%s: stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  atomic_store(&s->stop, 1);
  ucp_worker_signal(s->worker);
  pthread_join(thread, NULL);
  while (s->clients) {
    srv_client *c = s->clients;
    s->clients = c->next;
    client_destroy(s, c, "closed by the server");
  }
  status = 0;
out:
  while (s->queue_head) {
    srv_msg *q = s->queue_head;
    s->queue_head = q->next;
    free(q);
  }
  if (s->listener) ucp_listener_destroy(s->listener);
  if (s->worker) ucp_worker_destroy(s->worker);
  if (s->ucp) ucp_cleanup(s->ucp);
  if (s->ctx) tstor_context_close(s->ctx);
  tsr_secret_free(s->secret, s->secret_len);
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  if (status == 0) slog(s, "stopped");
  free(s);
  return status;
}
