/* tstor-remote.so: the devices of `tstor serve` peers as device type
 * "remote". docs/remote.md describes the model; protocol.h the wire; client.h
 * the files of the module and its device addresses.
 *
 * Config keys ([backend remote]):
 *   peers        host:port, [v6]:port or unix:/path, ... (comma-separated;
 *                required, empty declines). Each peer's devices become
 *                remote:N in order.
 *   secret_file  the shared secret the peers were started with (required);
 *                a file only its owner may read
 *   timeout_ms   how long any wait on a peer may last without progress
 *                before the peer counts as gone (default 5000)
 *   shared_memory  yes (default): ask each peer on a Unix socket for a
 *                shared region and copy to and from its blocks there with
 *                memcpy; no: every byte through the socket
 *
 * Threading: each peer has one connection and one lock; every op on a peer
 * takes the lock, sends its requests (a batch's, or a large copy's pieces,
 * pipelined: conn.c) and takes their replies. Ops that would use a peer in a
 * child of fork() fail with TSTOR_EBACKEND instead.
 *
 * Streams (stream.h): an op given a stream checks its arguments, queues itself
 * and returns; the stream's worker runs the same synchronous op later. A free
 * first waits for the work queued on every stream, as cudaFree waits for the
 * device, so no queued job outlives its block. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "failure.h"

/* ------------------------------------------------------------- plumbing */

static int check_process(remote *r, int device, const char *what) {
  return remote_check_process(r->reg, r->pid, device, what);
}

/* ------------------------------------------------------------ allocator */

static int remote_count(void *state) { return ((remote *)state)->ndevices; }

static int remote_allocate(void *state, int index, size_t nbytes, void *stream, tstor_block *out) {
  remote *r = state;
  (void)stream;
  out->ptr = NULL;
  out->alloc_ctx = NULL;
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
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
  if ((uint64_t)nbytes >> RBLOCK_SHIFT)
    return remote_fail(r->reg, TSTOR_ENOMEM,
                       "remote:%d (peer %s): %zu bytes is too many (a block is under 8 TiB)", index,
                       p->name, nbytes);
  if (TSTOR_REGISTRAR_HAS(r->reg, should_fail) && r->reg->should_fail(TSTOR_FAULT_MALLOC))
    return remote_fail(r->reg, TSTOR_ENOMEM, "remote:%d: no host memory for a block record", index);
  rblock *b = calloc(1, sizeof *b);
  if (!b) return remote_fail(r->reg, TSTOR_ENOMEM, "remote:%d: no host memory for a block record", index);
  uint8_t buf[TSR_MAX_MESSAGE];
  tsr_msg reply;
  pthread_mutex_lock(&p->mu);
  b->nbytes = nbytes;
  b->device = index;
  int added = peer_block_add(p, b) == 0;
  rc = !added ? remote_fail(r->reg, TSTOR_ENOMEM, "remote:%d (peer %s): the block table is full",
                            index, p->name)
              : peer_rpc(p, index, buf, tsr_encode_alloc(buf, 0, d->index, nbytes), &reply);
  if (rc) {
    if (rc == TSTOR_ENOMEM) d->stats.oom_count++;
    if (added) peer_block_remove(p, b);
    pthread_mutex_unlock(&p->mu);
    free(b);
    return rc;
  }
  b->handle = reply.handle;
  if (reply.region != TSR_NO_REGION) {
    if (!p->region || reply.region > p->region_size || nbytes > p->region_size - reply.region) {
      peer_fail(p, "ALLOC: a block at %llu of a shared region of %llu bytes",
                (unsigned long long)reply.region, (unsigned long long)p->region_size);
      peer_block_remove(p, b);
      pthread_mutex_unlock(&p->mu);
      free(b);
      return peer_error(p, index, TSTOR_EIO);
    }
    b->mapped = p->region + reply.region;
  }
  d->stats.allocated += nbytes;
  d->stats.alloc_count++;
  tstor_stats_note_peaks(&d->stats);
  pthread_mutex_unlock(&p->mu);
  out->ptr = (void *)(uintptr_t)rblock_addr(b);
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
    peer_block_remove(p, b);
    d->stats.allocated -= nbytes;
    /* A failed peer, or a fork child: the blocks are gone with the peer's
     * connection (or belong to the parent's); only the record is ours. */
    if (!p->failed && remote_getpid() == r->pid) {
      uint8_t buf[TSR_MAX_MESSAGE];
      tsr_msg reply;
      if (peer_rpc(p, index, buf, tsr_encode_free(buf, 0, b->handle), &reply) != 0)
        r->reg->log(r->m, TSTOR_LOG_WARN, "remote:%d: freeing %zu bytes on peer %s failed: %s",
                    index, nbytes, p->name, p->failed ? p->failure : p->refusal);
    }
    free(b);
  }
  pthread_mutex_unlock(&p->mu);
}

static int remote_stats(void *state, int index, tstor_stats *out) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
  rdevice *d = &r->devices[index];
  pthread_mutex_lock(&d->p->mu);
  tstor_stats mine = d->stats;
  pthread_mutex_unlock(&d->p->mu);
  tstor_stats_copy(out, &mine);
  return 0;
}

static int remote_reset_peak(void *state, int index) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
  rdevice *d = &r->devices[index];
  pthread_mutex_lock(&d->p->mu);
  tstor_stats_reset_peaks(&d->stats);
  pthread_mutex_unlock(&d->p->mu);
  return 0;
}

/* ---------------------------------------------------------- copies, fill */

/* Checks what a job will touch before it is queued, so that a bad argument
 * fails the call that gave it, as a synchronous op would: the device, the
 * process, and that [addr, addr + n) lies inside one block of the device. */
static int check_span(remote *r, int index, const void *addr, size_t n, const char *what) {
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
  int rc = check_process(r, index, what);
  if (rc) return rc;
  peer *p = r->devices[index].p;
  pthread_mutex_lock(&p->blocks_mu);
  rblock *b = peer_block_find(p, index, (uint64_t)(uintptr_t)addr, n);
  pthread_mutex_unlock(&p->blocks_mu);
  return b ? 0 : remote_no_block(r, index, addr, n);
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

/* One span, as a batch of one (xfer.c). */
static int copy_one(remote *r, int kind, void *dst, int dst_index, const void *src, int src_index,
                    size_t nbytes) {
  if (nbytes == 0) return 0;
  tstor_copy_span span = {dst, src, nbytes, dst_index, src_index};
  size_t failed;
  return xfer_spans(r, kind, &span, 1, &failed);
}

/* cpu -> remote: WRITE requests. */
static int remote_copy_to_device(void *state, void *dst, int dst_index, const void *src,
                                 int src_index, size_t nbytes, void *stream) {
  if (stream && nbytes) {
    int rc = check_span(state, dst_index, dst, nbytes, "copy to the device");
    return rc ? rc
              : queue_copy(stream, remote_copy_to_device, dst, dst_index, src, src_index, nbytes);
  }
  return copy_one(state, XFER_PUT, dst, dst_index, src, src_index, nbytes);
}

/* remote -> cpu: READ requests. */
static int remote_copy_to_host(void *state, void *dst, int dst_index, const void *src,
                               int src_index, size_t nbytes, void *stream) {
  if (stream && nbytes) {
    int rc = check_span(state, src_index, src, nbytes, "copy from the device");
    return rc ? rc
              : queue_copy(stream, remote_copy_to_host, dst, dst_index, src, src_index, nbytes);
  }
  return copy_one(state, XFER_GET, dst, dst_index, src, src_index, nbytes);
}

/* remote -> remote: within one peer the peer copies (one message); between
 * two peers the bytes pass through a host buffer. */
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
  return copy_one(r, XFER_ON, dst, dst_index, src, src_index, nbytes);
}

/* The batched kernels (ABI 1.4): all of a batch's spans, each peer's as one
 * pipeline. */
static int remote_batch_to_device(void *state, const tstor_copy_span *spans, size_t count,
                                  size_t *failed) {
  return xfer_spans(state, XFER_PUT, spans, count, failed);
}

static int remote_batch_to_host(void *state, const tstor_copy_span *spans, size_t count,
                                size_t *failed) {
  return xfer_spans(state, XFER_GET, spans, count, failed);
}

static int remote_batch_on_device(void *state, const tstor_copy_span *spans, size_t count,
                                  size_t *failed) {
  return xfer_spans(state, XFER_ON, spans, count, failed);
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
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
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
  rblock *b = peer_block_find(p, index, addr, nbytes);
  if (!b) {
    rc = remote_no_block(r, index, ptr, nbytes);
  } else {
    uint8_t buf[TSR_MAX_MESSAGE];
    tsr_msg reply;
    rc = peer_rpc(p, index, buf,
                  tsr_encode_fill(buf, 0, b->handle, addr - rblock_addr(b), nbytes,
                                  (uint32_t)pattern_size, pattern),
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
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
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
  rblock *db = peer_block_find(p, index, daddr, (size_t)dspan);
  rblock *sb = peer_block_find(p, index, saddr, (size_t)sspan);
  if (!db || !sb) {
    rc = db ? remote_no_block(r, index, src, (size_t)sspan)
            : remote_no_block(r, index, dst, (size_t)dspan);
  } else {
    uint8_t buf[TSR_MAX_MESSAGE];
    tsr_msg reply;
    rc = peer_rpc(p, index, buf,
                  tsr_encode_copy_strided(buf, 0, db->handle, daddr - rblock_addr(db), sb->handle,
                                          saddr - rblock_addr(sb), (uint32_t)element_size, ndim,
                                          sizes, dst_strides, src_strides),
                  &reply);
  }
  pthread_mutex_unlock(&p->mu);
  return rc;
}

/* ---------------------------------------------- streams, events, describe */

static int remote_synchronize(void *state, int index) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
  return rstreams_wait(r->streams, index);
}

static int remote_stream_create(void *state, int index, void **out) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
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
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
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

/* The peer's device as its welcome named it: its memory (when the server
 * said) and the peer and device as an id. Free memory is not on the wire:
 * it would take a message of the protocol's next version. */
static int remote_properties(void *state, int index, tstor_device_properties *out) {
  remote *r = state;
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
  rdevice *d = &r->devices[index];
  peer *p = d->p;
  pthread_mutex_lock(&p->mu);
  uint64_t capacity = p->devices[d->index].capacity;
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, total_bytes) && capacity) {
    out->total_bytes = capacity;
    out->reported |= TSTOR_PROP_TOTAL;
  }
  if (TSTOR_DEVICE_PROPERTIES_HAS(out, id)) {
    /* cut short where the two do not fit: still the same text every time */
    int n = snprintf(out->id, sizeof out->id, "%s %s", p->name, p->devices[d->index].name);
    if (n > 0) out->reported |= TSTOR_PROP_ID;
  }
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
    .properties = remote_properties,     /* since 1.5 */
};

/* ---------------------------------------------------------------- module */

static void remote_free_all(remote *r) {
  for (int i = 0; i < r->npeers; i++) peer_close(r->peers[i]);
  tsr_secret_free(r->secret, r->secret_len);
  rstreams_free(r->streams);
  free(r);
}

/* The module's state from its config keys and secret file; *out NULL on
 * failure, with msg or the config error said. */
static int remote_new(const tstor_registrar *reg, tstor_module *m, char *msg, size_t msg_size,
                      remote **out) {
  *out = NULL;
  long long timeout_ms;
  int shared_memory;
  int rc = reg->config_int(m, "timeout_ms", 5000, 10, 3600000, &timeout_ms);
  if (rc == 0) rc = reg->config_bool(m, "shared_memory", 1, &shared_memory);
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
  if (r) r->streams = rstreams_new(reg, r);
  if (!r || !r->streams) {
    free(r);
    snprintf(msg, msg_size, "out of host memory");
    return TSTOR_ENOMEM;
  }
  r->reg = reg;
  r->m = m;
  r->timeout_ms = timeout_ms;
  r->shared_memory = shared_memory;
  r->pid = remote_getpid();
  char why[512];
  if (tsr_secret_read(secret_file, &r->secret, &r->secret_len, why, sizeof why) != 0) {
    remote_free_all(r);
    return reg->config_error(m, "secret_file", "%s", why);
  }
  *out = r;
  return 0;
}

/* Connects to peer p and gives its devices the next remote:N numbers. A
 * peer that cannot be reached or refuses stays, failed, with its reason
 * appended to msg at *used; returns its code then. */
static int add_peer(remote *r, peer *p, char *msg, size_t msg_size, size_t *used) {
  int rc = peer_connect(p);
  if (rc == 0 && r->ndevices + (int)p->ndevices > (int)(sizeof r->devices / sizeof r->devices[0])) {
    snprintf(p->failure, sizeof p->failure, "too many devices in all");
    rc = TSTOR_ERANGE;
  }
  if (rc != 0) {
    char detail[sizeof p->failure];
    snprintf(detail, sizeof detail, "%s", p->failure[0] ? p->failure : "refused");
    r->reg->log(r->m, TSTOR_LOG_WARN, "peer %s left out: %s", p->name, detail);
    if (*used < msg_size)
      *used += (size_t)snprintf(msg + *used, msg_size - *used, "%speer %s: %s", *used ? "; " : "",
                                p->name, detail);
    if (!p->failed) peer_fail(p, "%s", detail);
    return rc;
  }
  p->first_device = r->ndevices;
  for (uint32_t i = 0; i < p->ndevices; i++) {
    rdevice *d = &r->devices[r->ndevices++];
    d->p = p;
    d->index = i;
    d->stats.struct_size = sizeof d->stats;
    r->reg->log(r->m, TSTOR_LOG_INFO, "remote:%d -> %s %s", p->first_device + (int)i, p->name,
                p->devices[i].name);
  }
  return 0;
}

/* Each peer of the config's list in order; the ones that fail are reported
 * and left out. 0 when at least one device came of it. */
static int add_peers(remote *r, char *msg, size_t msg_size) {
  const tstor_registrar *reg = r->reg;
  const char *peers = reg->config_get(r->m, "peers");
  char list[4096];
  if (strlen(peers) >= sizeof list)
    return reg->config_error(r->m, "peers", "longer than %zu characters", sizeof list - 1);
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
    if (r->npeers == MAX_PEERS)
      return reg->config_error(r->m, "peers", "more than %d peers", MAX_PEERS);
    peer *p = peer_new(r, tok);
    if (!p) {
      snprintf(msg, msg_size, "out of host memory");
      return TSTOR_ENOMEM;
    }
    r->peers[r->npeers++] = p;
    int rc = add_peer(r, p, msg, msg_size, &used);
    if (rc && !first_rc) first_rc = rc;
  }
  if (r->ndevices > 0) {
    msg[0] = '\0';
    return 0;
  }
  if (first_rc == 0) {
    snprintf(msg, msg_size, "the peers export no devices");
    return TSTOR_EDECLINED;
  }
  return first_rc;
}

/* The batched kernels, where the core offers them (ABI 1.4). */
static int register_batches(const tstor_registrar *reg, tstor_module *m, remote *r) {
  if (!TSTOR_REGISTRAR_HAS(reg, register_copy_batch)) return 0;
  int rc;
  if ((rc = reg->register_copy_batch(m, "cpu", "remote", remote_batch_to_device, r)) != 0 ||
      (rc = reg->register_copy_batch(m, "remote", "cpu", remote_batch_to_host, r)) != 0)
    return rc;
  return reg->register_copy_batch(m, "remote", "remote", remote_batch_on_device, r);
}

static int remote_init(const tstor_registrar *reg, tstor_module *m, void **module_state, char *msg,
                       size_t msg_size) {
  if (!TSTOR_REGISTRAR_HAS(reg, set_error) || !TSTOR_REGISTRAR_HAS(reg, config_error)) {
    snprintf(msg, msg_size, "the core's registrar is older than this module needs");
    return TSTOR_EABI;
  }
  remote_pid_watch(); /* before anything keeps this process's id */
  remote *r;
  int rc = remote_new(reg, m, msg, msg_size, &r);
  if (rc) return rc;
  if ((rc = add_peers(r, msg, msg_size)) != 0 ||
      (rc = reg->register_device_type(m, &remote_device_ops, r)) != 0 ||
      (rc = reg->register_copy(m, "cpu", "remote", remote_copy_to_device, r)) != 0 ||
      (rc = reg->register_copy(m, "remote", "cpu", remote_copy_to_host, r)) != 0 ||
      (rc = reg->register_copy(m, "remote", "remote", remote_copy_on_device, r)) != 0 ||
      (rc = register_batches(reg, m, r)) != 0) {
    remote_free_all(r);
    return rc;
  }
  *module_state = r;
  return 0;
}

static void remote_fini(void *module_state) { remote_free_all(module_state); }

TSTOR_BACKEND_DEFINE(remote_init, remote_fini);
