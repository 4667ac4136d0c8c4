/* One authenticated client of `tstor serve` (server_state.h). Its own thread
 * reads its requests in order, through a buffer, checks each against what
 * this client owns and answers it; the replies are kept and sent together
 * whenever the thread would wait for its client (or a READ's bytes are too
 * many to keep). Its blocks live in a table of its own, named by handles that
 * hold a slot and a generation, and die with it. No request names an address:
 * every offset and length is checked against its block, and a WRITE's bytes
 * go only into the range the request named, once it was checked.
 *
 * Every block is zeroed before its handle is returned, so a client never sees
 * the bytes of a block that another client (or itself) freed. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tstor/backend.h>

#include "server_state.h"

/* The largest host buffer a staged device's bytes pass through (less when
 * the client's cap is lower: a quarter of it). */
#define BOUNCE_MAX ((uint64_t)16 << 20)
/* A session reads its requests, and writes its replies, through buffers of
 * this size: a train of small requests costs a recv for many of them, and
 * their replies one send. */
#define SESSION_BUF ((size_t)64 << 10)
/* A READ's bytes up to this size are copied behind its reply in the buffer;
 * larger ones are sent from the block itself. */
#define INLINE_MAX ((size_t)16 << 10)

typedef struct srv_block {
  tstor_storage *storage; /* owns the bytes, released with the block; NULL in the region */
  uint8_t *addr;          /* host memory; NULL for a staged block */
  uint64_t region_off;    /* where it is in the client's region; TSR_NO_REGION */
  uint64_t nbytes;
  uint32_t device;
  uint32_t generation; /* the upper half of the handle: a stale handle misses */
} srv_block;

struct srv_session {
  srv_session *next;
  server *s;
  int fd;
  pthread_t thread;
  atomic_int finished;   /* the thread is done: the reaper may join it */
  char name[96];         /* "127.0.0.1:41234 #3", for the log */
  int ending;            /* read no further request: bye, or a stream that cannot be framed */
  int dead;              /* the connection failed: write nothing more either */
  const char *end;       /* why the session ended, for the log */
  unsigned long refused; /* requests refused; only the first SRV_REFUSALS_LOGGED are logged */
  srv_block **blocks;    /* slot i holds handle (generation << 32 | i + 1) */
  uint32_t nslots, generation;
  uint64_t held, peak, allocs, frees; /* all devices, and the staging buffer */
  uint64_t dev_held[TSR_MAX_DEVICES], dev_peak[TSR_MAX_DEVICES];
  uint64_t dev_allocs[TSR_MAX_DEVICES], dev_frees[TSR_MAX_DEVICES];
  uint8_t *bounce; /* made on the first staged WRITE or READ, counted in `held` */
  uint64_t bounce_size;
  char why[TSR_MAX_TEXT]; /* the last failure of block_io or block_move */
  srv_region region;      /* SHM: memory this client maps too */
  tsr_inbuf in;           /* requests and WRITE bytes, read ahead */
  uint8_t *pending;       /* replies not sent yet: pending[0..npending) */
  size_t npending;
  uint8_t out[TSR_MAX_MESSAGE]; /* the reply being written */
};

/* ---------------------------------------------------------------- replies */

/* Sends the replies kept so far and then `n` bytes at `more` (none when n is
 * 0). A connection that cannot take them ends the session. */
static int flush(srv_session *c, const void *more, size_t n) {
  struct iovec iov[2] = {{c->pending, c->npending}, {(void *)more, n}};
  c->npending = 0;
  if (c->dead) return -1;
  int rc = tsr_send_all(c->fd, iov, 2, SRV_STALL_MS);
  if (rc) {
    c->ending = c->dead = 1;
    c->end = "stopped taking replies";
  }
  return rc;
}

/* Keeps out[0..len) (a reply) and `n` bytes at `more` after it, to be sent
 * when the session next waits for its client, or now when they do not fit. */
static void reply_with(srv_session *c, size_t len, const void *more, size_t n) {
  if (c->npending + len + (n <= INLINE_MAX ? n : 0) > SESSION_BUF && flush(c, NULL, 0)) return;
  memcpy(c->pending + c->npending, c->out, len);
  c->npending += len;
  if (n > INLINE_MAX) {
    flush(c, more, n);
  } else if (n) {
    memcpy(c->pending + c->npending, more, n);
    c->npending += n;
  }
}

static void reply(srv_session *c, size_t len) { reply_with(c, len, NULL, 0); }

static void reply_empty(srv_session *c, const tsr_msg *m) {
  reply(c, tsr_encode_empty_reply(c->out, m->type, m->id));
}

static void refuse(srv_session *c, const tsr_msg *m, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Logs the refusal and answers it with an error reply. */
static void refuse(srv_session *c, const tsr_msg *m, int status, const char *fmt, ...) {
  char text[TSR_MAX_TEXT + 1];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (++c->refused <= SRV_REFUSALS_LOGGED)
    srv_log(c->s, "client %s: %s refused: %s: %s", c->name, tsr_type_name(m->type),
            tsr_status_text(status), text);
  if (c->refused == SRV_REFUSALS_LOGGED)
    srv_log(c->s, "client %s: %d requests refused; the rest are counted, not logged", c->name,
            SRV_REFUSALS_LOGGED);
  reply(c, tsr_encode_error(c->out, m->type, m->id, status, text));
}

/* ----------------------------------------------------------------- blocks */

/* Frees a block; its region bytes go back to the region unless the whole
 * region is about to close (`closing`). */
static void block_free(srv_session *c, uint32_t slot, int closing) {
  srv_block *b = c->blocks[slot];
  if (!b) return;
  if (b->region_off != TSR_NO_REGION && !closing)
    srv_region_free(&c->region, b->region_off, b->nbytes);
  tstor_storage_release(b->storage);
  c->held -= b->nbytes;
  c->dev_held[b->device] -= b->nbytes;
  c->frees++;
  c->dev_frees[b->device]++;
  atomic_fetch_sub(&c->s->total_held, b->nbytes);
  free(b);
  c->blocks[slot] = NULL;
}

/* The block a handle names, when it is this client's; NULL otherwise. */
static srv_block *block_find(srv_session *c, uint64_t handle) {
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
 * range is checked already. 0 or a TSTOR_E* code with c->why. */
static int block_io(srv_session *c, srv_block *b, uint64_t off, void *host, size_t n,
                    int to_block) {
  if (b->addr) {
    if (to_block)
      memmove(b->addr + off, host, n);
    else
      memmove(host, b->addr + off, n);
    return 0;
  }
  tstor_storage *view = NULL, *wrap = NULL;
  int rc = tstor_storage_view(b->storage, (size_t)off, n, &view);
  if (rc == 0) rc = tstor_storage_wrap(c->s->ctx, c->s->host, host, n, &wrap);
  if (rc == 0) rc = to_block ? tstor_storage_copy(view, wrap) : tstor_storage_copy(wrap, view);
  if (rc) snprintf(c->why, sizeof c->why, "%s", tstor_last_error());
  tstor_storage_release(wrap);
  tstor_storage_release(view);
  return rc;
}

/* memmove between two blocks' ranges (checked already), whatever their
 * devices. Overlapping ranges of a staged block go through host memory, since
 * a device's copy kernel need not allow overlap. */
static int block_move(srv_session *c, srv_block *dst, uint64_t doff, srv_block *src, uint64_t soff,
                      size_t n) {
  if (n == 0) return 0;
  if (dst->addr && src->addr) {
    memmove(dst->addr + doff, src->addr + soff, n);
    return 0;
  }
  if (src->addr) return block_io(c, dst, doff, src->addr + soff, n, 1);
  if (dst->addr) return block_io(c, src, soff, dst->addr + doff, n, 0);
  if (dst == src && doff < soff + n && soff < doff + n) {
    uint8_t *tmp = malloc(n);
    if (!tmp) {
      snprintf(c->why, sizeof c->why, "no host memory to stage %zu bytes", n);
      return TSTOR_ENOMEM;
    }
    int rc = block_io(c, src, soff, tmp, n, 0);
    if (rc == 0) rc = block_io(c, dst, doff, tmp, n, 1);
    free(tmp);
    return rc;
  }
  tstor_storage *dv = NULL, *sv = NULL;
  int rc = tstor_storage_view(dst->storage, (size_t)doff, n, &dv);
  if (rc == 0) rc = tstor_storage_view(src->storage, (size_t)soff, n, &sv);
  if (rc == 0) rc = tstor_storage_copy(dv, sv);
  if (rc) snprintf(c->why, sizeof c->why, "%s", tstor_last_error());
  tstor_storage_release(sv);
  tstor_storage_release(dv);
  return rc;
}

/* A failure of the server's own moving of bytes (c->why says it), as an
 * error reply naming the block's device. */
static void refuse_io(srv_session *c, const tsr_msg *m, int rc, const srv_block *b) {
  refuse(c, m, rc == TSTOR_ENOMEM ? TSR_ST_NOMEM : TSR_ST_INTERNAL, "%s: %s",
         c->s->devices[b->device].name, c->why[0] ? c->why : tstor_strerror(rc));
}

/* The host buffer a staged block's bytes pass through, made on first use.
 * NULL, with a reply sent, when the client's cap has no room for it. */
static uint8_t *bounce(srv_session *c, const tsr_msg *m) {
  if (c->bounce) return c->bounce;
  uint64_t cap = c->s->opt->max_client_bytes;
  uint64_t size = cap / 4 < BOUNCE_MAX ? cap / 4 : BOUNCE_MAX;
  if (size < 4096) size = 4096;
  if (size > cap - c->held) {
    refuse(c, m, TSR_ST_QUOTA, "no room for a staging buffer of %llu bytes: %llu held, limit %llu",
           (unsigned long long)size, (unsigned long long)c->held, (unsigned long long)cap);
    return NULL;
  }
  if (!(c->bounce = malloc((size_t)size))) {
    refuse(c, m, TSR_ST_NOMEM, "no host memory for a staging buffer of %llu bytes",
           (unsigned long long)size);
    return NULL;
  }
  c->bounce_size = size;
  c->held += size;
  atomic_fetch_add(&c->s->total_held, size);
  return c->bounce;
}

/* Frees every block and the staging buffer; logs what it freed. */
static void drop_blocks(srv_session *c) {
  uint64_t held = c->held;
  uint32_t n = 0;
  for (uint32_t i = 0; i < c->nslots; i++)
    if (c->blocks[i]) {
      block_free(c, i, 1);
      n++;
    }
  if (c->bounce) {
    free(c->bounce);
    c->held -= c->bounce_size;
    atomic_fetch_sub(&c->s->total_held, c->bounce_size);
    c->bounce = NULL;
    c->bounce_size = 0;
  }
  if (n)
    srv_log(c->s, "client %s: freed %u block(s), %llu bytes", c->name, n, (unsigned long long)held);
}

/* --------------------------------------------------------------- handlers */

static void on_hello(srv_session *c, const tsr_msg *m) {
  refuse(c, m, TSR_ST_BADMSG, "already authenticated");
}

static void on_auth(srv_session *c, const tsr_msg *m) { on_hello(c, m); }

static void on_alloc(srv_session *c, const tsr_msg *m) {
  server *s = c->s;
  if (m->device >= s->ndevices)
    return refuse(c, m, TSR_ST_NODEV, "device %u (the server exports %u)", m->device, s->ndevices);
  if (m->nbytes == 0 || m->nbytes > SIZE_MAX / 2)
    return refuse(c, m, TSR_ST_INVAL, "%llu bytes", (unsigned long long)m->nbytes);
  if (m->nbytes > s->opt->max_client_bytes - c->held)
    return refuse(c, m, TSR_ST_QUOTA, "%llu bytes asked, %llu held, limit %llu MiB",
                  (unsigned long long)m->nbytes, (unsigned long long)c->held,
                  (unsigned long long)(s->opt->max_client_bytes >> 20));
  uint32_t slot = 0;
  while (slot < c->nslots && c->blocks[slot]) slot++;
  if (slot == c->nslots) {
    if (c->nslots >= (1u << 20)) return refuse(c, m, TSR_ST_QUOTA, "%u blocks held", c->nslots);
    uint32_t n = c->nslots ? c->nslots * 2 : 16;
    srv_block **grown = realloc(c->blocks, n * sizeof *grown);
    if (!grown) return refuse(c, m, TSR_ST_NOMEM, "no memory for the block table");
    memset(grown + c->nslots, 0, (n - c->nslots) * sizeof *grown);
    c->blocks = grown;
    c->nslots = n;
  }
  srv_block *b = calloc(1, sizeof *b);
  if (!b) return refuse(c, m, TSR_ST_NOMEM, "no memory for a block record");
  b->region_off = TSR_NO_REGION;
  int rc = 0;
  if (c->region.base && !s->staged[m->device] &&
      srv_region_alloc(&c->region, m->nbytes, &b->region_off) == 0) {
    b->addr = c->region.base + b->region_off; /* else: outside it, as without one */
    memset(b->addr, 0, (size_t)m->nbytes);
  } else {
    rc = tstor_storage_new(s->ctx, s->tdev[m->device], (size_t)m->nbytes, &b->storage);
  }
  if (rc == 0 && b->storage) {
    if (s->staged[m->device]) {
      rc = tstor_storage_fill(b->storage, 0);
    } else {
      b->addr = tstor_storage_data(b->storage);
      memset(b->addr, 0, (size_t)m->nbytes);
    }
  }
  if (rc) {
    int status = rc == TSTOR_ENOMEM ? TSR_ST_NOMEM : TSR_ST_INTERNAL;
    char why[TSR_MAX_TEXT];
    snprintf(why, sizeof why, "%s", tstor_last_error());
    tstor_storage_release(b->storage);
    free(b);
    return refuse(c, m, status, "%s: %s", s->devices[m->device].name, why);
  }
  b->nbytes = m->nbytes;
  b->device = m->device;
  b->generation = ++c->generation;
  c->blocks[slot] = b;
  c->held += b->nbytes;
  c->dev_held[b->device] += b->nbytes;
  if (c->held > c->peak) c->peak = c->held;
  if (c->dev_held[b->device] > c->dev_peak[b->device])
    c->dev_peak[b->device] = c->dev_held[b->device];
  c->allocs++;
  c->dev_allocs[b->device]++;
  atomic_fetch_add(&s->total_held, b->nbytes);
  reply(c, tsr_encode_alloc_reply(c->out, m->id, (uint64_t)b->generation << 32 | (slot + 1),
                                  b->region_off));
}

static void on_free(srv_session *c, const tsr_msg *m) {
  if (!block_find(c, m->handle))
    return refuse(c, m, TSR_ST_NOHANDLE, "handle 0x%llx", (unsigned long long)m->handle);
  block_free(c, (uint32_t)m->handle - 1, 0);
  reply_empty(c, m);
}

/* The two blocks of a COPY or COPY_STRIDED; NULL after a refusal. */
static int copy_ends(srv_session *c, const tsr_msg *m, srv_block **dst, srv_block **src) {
  *dst = block_find(c, m->handle);
  *src = block_find(c, m->src_handle);
  if (*dst && *src) return 0;
  refuse(c, m, TSR_ST_NOHANDLE, "handle 0x%llx",
         (unsigned long long)(*dst ? m->src_handle : m->handle));
  return -1;
}

static void on_copy(srv_session *c, const tsr_msg *m) {
  srv_block *dst, *src;
  if (copy_ends(c, m, &dst, &src)) return;
  if (!in_block(dst, m->offset, m->nbytes) || !in_block(src, m->src_offset, m->nbytes))
    return refuse(c, m, TSR_ST_RANGE, "%llu bytes at %llu (of %llu) from %llu (of %llu)",
                  (unsigned long long)m->nbytes, (unsigned long long)m->offset,
                  (unsigned long long)dst->nbytes, (unsigned long long)m->src_offset,
                  (unsigned long long)src->nbytes);
  int rc = block_move(c, dst, m->offset, src, m->src_offset, (size_t)m->nbytes);
  if (rc) return refuse_io(c, m, rc, dst->addr ? src : dst);
  reply_empty(c, m);
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

/* Moves the elements of a strided copy between two host spans. */
static void strided_move(const tsr_msg *m, uint8_t *to, const uint8_t *from) {
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
    if (d < 0) return;
    doff += (uint64_t)m->dst_strides[d];
    soff += (uint64_t)m->src_strides[d];
  }
}

/* backend.h's copy_strided, inside two blocks of this client. The element
 * count is bounded by what the destination span holds (its elements share no
 * byte), so a request cannot make the server loop longer than its memory. */
static void on_copy_strided(srv_session *c, const tsr_msg *m) {
  srv_block *dst, *src;
  if (copy_ends(c, m, &dst, &src)) return;
  if (m->element_size == 0 || m->element_size > 1024)
    return refuse(c, m, TSR_ST_INVAL, "elements of %u bytes", m->element_size);
  uint64_t n = 1;
  for (uint32_t d = 0; d < m->ndim; d++) {
    if (m->sizes[d] == 0) return reply_empty(c, m); /* nothing to copy */
    if (__builtin_mul_overflow(n, (uint64_t)m->sizes[d], &n))
      return refuse(c, m, TSR_ST_INVAL, "element count overflows");
  }
  uint64_t dspan, sspan;
  if (strided_span(m, m->dst_strides, &dspan) || strided_span(m, m->src_strides, &sspan) ||
      !in_block(dst, m->offset, dspan) || !in_block(src, m->src_offset, sspan))
    return refuse(c, m, TSR_ST_RANGE, "a strided block of %u dims outside its blocks", m->ndim);
  if (n > dspan / m->element_size)
    return refuse(c, m, TSR_ST_INVAL,
                  "%llu elements of %u bytes cannot be apart in a span of %llu bytes",
                  (unsigned long long)n, m->element_size, (unsigned long long)dspan);
  /* A staged side is read into host memory first (the destination too, for
   * the bytes between its elements) and the destination written back after. */
  uint8_t *dbuf = NULL, *sbuf = NULL;
  int rc = 0;
  if (!dst->addr && !(dbuf = malloc((size_t)dspan))) rc = TSTOR_ENOMEM;
  if (rc == 0 && !src->addr && !(sbuf = malloc((size_t)sspan))) rc = TSTOR_ENOMEM;
  if (rc) snprintf(c->why, sizeof c->why, "no host memory to stage a strided copy");
  if (rc == 0 && dbuf) rc = block_io(c, dst, m->offset, dbuf, (size_t)dspan, 0);
  if (rc == 0 && sbuf) rc = block_io(c, src, m->src_offset, sbuf, (size_t)sspan, 0);
  if (rc == 0) {
    strided_move(m, dbuf ? dbuf : dst->addr + m->offset, sbuf ? sbuf : src->addr + m->src_offset);
    if (dbuf) rc = block_io(c, dst, m->offset, dbuf, (size_t)dspan, 1);
  }
  free(dbuf);
  free(sbuf);
  if (rc) return refuse_io(c, m, rc, dst->addr ? src : dst);
  reply_empty(c, m);
}

static void on_fill(srv_session *c, const tsr_msg *m) {
  srv_block *b = block_find(c, m->handle);
  if (!b) return refuse(c, m, TSR_ST_NOHANDLE, "handle 0x%llx", (unsigned long long)m->handle);
  uint32_t ps = m->pattern_size;
  if (ps == 0 || ps > 16 || (ps & (ps - 1)) != 0 || m->nbytes % ps != 0)
    return refuse(c, m, TSR_ST_INVAL, "pattern of %u bytes over %llu bytes", ps,
                  (unsigned long long)m->nbytes);
  if (!in_block(b, m->offset, m->nbytes))
    return refuse(c, m, TSR_ST_RANGE, "%llu bytes at %llu of a block of %llu",
                  (unsigned long long)m->nbytes, (unsigned long long)m->offset,
                  (unsigned long long)b->nbytes);
  if (b->addr) {
    uint8_t *p = b->addr + m->offset;
    for (uint64_t i = 0; i < m->nbytes; i += ps) memcpy(p + i, m->pattern, ps);
    return reply_empty(c, m);
  }
  tstor_storage *view = NULL;
  int rc = tstor_storage_view(b->storage, (size_t)m->offset, (size_t)m->nbytes, &view);
  if (rc == 0) rc = tstor_storage_fill_pattern(view, m->pattern, ps);
  if (rc) snprintf(c->why, sizeof c->why, "%s", tstor_last_error());
  tstor_storage_release(view);
  if (rc) return refuse_io(c, m, rc, b);
  reply_empty(c, m);
}

static void on_stats(srv_session *c, const tsr_msg *m) {
  server *s = c->s;
  if (m->device >= s->ndevices)
    return refuse(c, m, TSR_ST_NODEV, "device %u (the server exports %u)", m->device, s->ndevices);
  uint32_t d = m->device;
  reply(c, tsr_encode_stats_reply(c->out, m->id, c->dev_held[d], c->dev_peak[d], c->dev_allocs[d],
                                  c->dev_frees[d], (uint64_t)atomic_load(&s->total_held)));
}

static void on_bye(srv_session *c, const tsr_msg *m) {
  drop_blocks(c);
  reply_empty(c, m);
  c->ending = 1;
  c->end = "bye";
}

/* SHM: the client's region, made now and handed to it alone with the reply.
 * Only over a Unix socket: a peer there is on this machine, and only a
 * descriptor passed on it can reach the memory. */
static void on_shm(srv_session *c, const tsr_msg *m) {
  server *s = c->s;
  struct sockaddr_storage sa;
  socklen_t len = sizeof sa;
  if (c->region.base) return refuse(c, m, TSR_ST_INVAL, "the session has its region already");
  if (getsockname(c->fd, (struct sockaddr *)&sa, &len) != 0 || sa.ss_family != AF_UNIX)
    return refuse(c, m, TSR_ST_INVAL, "shared memory is for clients of a Unix socket");
  if (s->host_index < 0)
    return refuse(c, m, TSR_ST_NODEV, "no host-memory device to place blocks in");
  uint64_t cap = s->opt->max_client_bytes;
  int fd;
  char why[TSR_MAX_TEXT];
  if (srv_region_open(&c->region, cap < SRV_REGION_MAX ? cap : SRV_REGION_MAX, &fd, why,
                      sizeof why) != 0)
    return refuse(c, m, TSR_ST_NOMEM, "%s", why);
  size_t n = tsr_encode_shm_reply(c->out, m->id, c->region.size, (uint32_t)s->host_index);
  int rc = c->npending ? flush(c, NULL, 0) : 0; /* the descriptor rides on this reply */
  if (rc == 0 && (rc = tsr_send_fd(c->fd, c->out, n, fd, SRV_STALL_MS)) != 0) {
    c->ending = c->dead = 1;
    c->end = "stopped taking replies";
  }
  close(fd);
  if (rc == 0)
    srv_log(s, "client %s: a shared region of %llu MiB", c->name,
            (unsigned long long)(c->region.size >> 20));
}

/* The block and range of a WRITE or READ; NULL after a refusal. */
static srv_block *transfer_block(srv_session *c, const tsr_msg *m) {
  srv_block *b = block_find(c, m->handle);
  if (!b) {
    refuse(c, m, TSR_ST_NOHANDLE, "handle 0x%llx", (unsigned long long)m->handle);
    return NULL;
  }
  if (!in_block(b, m->offset, m->nbytes)) {
    refuse(c, m, TSR_ST_RANGE, "%llu bytes at %llu of a block of %llu",
           (unsigned long long)m->nbytes, (unsigned long long)m->offset,
           (unsigned long long)b->nbytes);
    return NULL;
  }
  return b;
}

/* A connection that failed mid-transfer ends the session. */
static void broken(srv_session *c, int rc, const char *what) {
  char io[96];
  srv_log(c->s, "client %s: %s: %s", c->name, what, tsr_io_text(rc, SRV_STALL_MS, io, sizeof io));
  c->ending = c->dead = 1;
  c->end = "connection failed mid-transfer";
}

/* WRITE: the request's bytes follow it, whatever the answer. A refused one
 * has them read and dropped, unless there are more than the client may hold,
 * which no honest client sends: that ends the session. */
static void on_write(srv_session *c, const tsr_msg *m) {
  srv_block *b = block_find(c, m->handle);
  int fits = b && in_block(b, m->offset, m->nbytes);
  uint8_t *buf = fits && !b->addr ? bounce(c, m) : NULL; /* a refusal is sent */
  if (!fits || (!b->addr && !buf)) {
    if (m->nbytes > c->s->opt->max_client_bytes) {
      c->ending = 1;
      c->end = "sent a refused WRITE of more bytes than it may hold";
    } else {
      int rc = tsr_inbuf_recv_all(c->fd, &c->in, NULL, m->nbytes, SRV_STALL_MS);
      if (rc) return broken(c, rc, "WRITE");
    }
    if (!fits) transfer_block(c, m); /* the refusal */
    return;
  }
  if (b->addr) {
    int rc = tsr_inbuf_recv_all(c->fd, &c->in, b->addr + m->offset, m->nbytes, SRV_STALL_MS);
    if (rc) return broken(c, rc, "WRITE");
    return reply_empty(c, m);
  }
  int failed = 0;
  for (uint64_t done = 0; done < m->nbytes;) {
    size_t piece = (size_t)(m->nbytes - done < c->bounce_size ? m->nbytes - done : c->bounce_size);
    int rc = tsr_inbuf_recv_all(c->fd, &c->in, buf, piece, SRV_STALL_MS);
    if (rc) return broken(c, rc, "WRITE");
    if (!failed && (rc = block_io(c, b, m->offset + done, buf, piece, 1)) != 0) failed = rc;
    done += piece;
  }
  if (failed) return refuse_io(c, m, failed, b);
  reply_empty(c, m);
}

/* READ: the reply, then the bytes. A staged block's first piece is read
 * before the reply, so a device that fails gets an error reply; one that
 * fails after it ends the session, since the bytes were promised. */
static void on_read(srv_session *c, const tsr_msg *m) {
  srv_block *b = transfer_block(c, m);
  if (!b) return;
  size_t head = tsr_encode_empty_reply(c->out, m->type, m->id);
  if (b->addr) return reply_with(c, head, b->addr + m->offset, (size_t)m->nbytes);
  uint8_t *buf = m->nbytes ? bounce(c, m) : NULL;
  if (m->nbytes && !buf) return;
  for (uint64_t done = 0; done < m->nbytes || done == 0;) {
    size_t piece = (size_t)(m->nbytes - done < c->bounce_size ? m->nbytes - done : c->bounce_size);
    int rc = piece ? block_io(c, b, m->offset + done, buf, piece, 0) : 0;
    if (rc && done == 0) return refuse_io(c, m, rc, b);
    if (rc) {
      srv_log(c->s, "client %s: READ: %s after the reply", c->name, c->why);
      c->ending = 1;
      c->end = "a device failed mid-READ";
      return;
    }
    if (done == 0)
      reply_with(c, head, buf, piece);
    else
      flush(c, buf, piece);
    if (c->dead) return;
    done += piece;
    if (piece == 0) break;
  }
}

/* One request, decoded and checked against what this client may do. */
static void handle(srv_session *c, const uint8_t *msg, size_t len) {
  tsr_msg m;
  char why[200];
  int st = tsr_decode(msg, len, 0, &m, why, sizeof why);
  if (st != 0) {
    /* Answer with what could be read of the header (type 0 when none). */
    if ((m.type & TSR_REPLY) || !tsr_type_known(m.type)) m.type = 0;
    refuse(c, &m, st, "%s", why);
    if (st == TSR_ST_VERSION) {
      c->ending = 1;
      c->end = "spoke another protocol version";
    } else if (m.type == TSR_WRITE) {
      c->ending = 1; /* its bytes cannot be told from the next message */
      c->end = "sent a malformed WRITE";
    }
    return;
  }
  switch (m.type) {
#define TSR__HANDLE(NAME, name, value, req, rep) \
  case value: return on_##name(c, &m);
    TSR_MSG_MAP(TSR__HANDLE)
#undef TSR__HANDLE
  }
}

/* ----------------------------------------------------------------- thread */

/* Reads more of the client's requests, once the replies so far are sent:
 * waiting without a limit between messages, and SRV_STALL_MS for the rest of
 * one begun. 0, or a TSR_IO_* result. */
static int read_more(srv_session *c) {
  if (c->npending && flush(c, NULL, 0)) return TSR_IO_CLOSED;
  int rc = tsr_wait_readable(c->fd, c->in.end > c->in.start ? SRV_STALL_MS : -1);
  while (rc == 0 && (rc = tsr_inbuf_fill(c->fd, &c->in)) == 0) /* woken for nothing */
    rc = tsr_wait_readable(c->fd, c->in.end > c->in.start ? SRV_STALL_MS : -1);
  return rc < 0 ? rc : 0;
}

static void *session_main(void *arg) {
  srv_session *c = arg;
  server *s = c->s;
  c->end = "disconnected";
  while (!c->ending) {
    const uint8_t *msg;
    size_t len;
    char why[200], io[96];
    int got = tsr_inbuf_message(&c->in, TSR_MAX_BODY, &msg, &len, why, sizeof why);
    if (got < 0) { /* no frame to read past: answer, and end */
      tsr_msg m = {.type = 0};
      refuse(c, &m, TSR_ST_BADMSG, "%s", why);
      c->end = "sent what cannot be framed";
      break;
    }
    if (got) {
      handle(c, msg, len);
      continue;
    }
    int rc = read_more(c);
    if (rc == TSR_IO_CLOSED) break;
    if (rc) {
      srv_log(s, "client %s: %s", c->name, tsr_io_text(rc, SRV_STALL_MS, io, sizeof io));
      c->end = "connection failed";
      break;
    }
  }
  if (c->npending) flush(c, NULL, 0); /* bye's reply, a last refusal */
  shutdown(c->fd, SHUT_RDWR); /* the client sees the end at once; the reaper closes it */
  drop_blocks(c);
  srv_log(s, "client %s: %s (%lu requests refused); the server holds %llu bytes for all clients",
          c->name, c->end, c->refused, (unsigned long long)atomic_load(&s->total_held));
  free(c->blocks);
  c->blocks = NULL;
  srv_region_close(&c->region);
  free(c->in.data);
  free(c->pending);
  c->in.data = c->pending = NULL;
  atomic_store(&c->finished, 1);
  return NULL;
}

unsigned srv_sessions_live(server *s) {
  unsigned n = 0;
  pthread_mutex_lock(&s->mu);
  for (srv_session *c = s->sessions; c; c = c->next) n += !atomic_load(&c->finished);
  pthread_mutex_unlock(&s->mu);
  return n;
}

int srv_session_start(server *s, int fd, const char *name) {
  srv_session *c = calloc(1, sizeof *c);
  if (!c) return -1;
  c->in = (tsr_inbuf){.data = malloc(SESSION_BUF), .cap = SESSION_BUF};
  c->pending = malloc(SESSION_BUF);
  if (!c->in.data || !c->pending) {
    free(c->in.data);
    free(c->pending);
    free(c);
    return -1;
  }
  c->s = s;
  c->fd = fd;
  snprintf(c->name, sizeof c->name, "%s", name);
  atomic_init(&c->finished, 0);
  pthread_mutex_lock(&s->mu);
  int rc = pthread_create(&c->thread, NULL, session_main, c);
  if (rc == 0) {
    c->next = s->sessions;
    s->sessions = c;
  }
  pthread_mutex_unlock(&s->mu);
  if (rc != 0) {
    free(c->in.data);
    free(c->pending);
    free(c);
    return -1;
  }
  return 0;
}

void srv_sessions_reap(server *s, int all) {
  pthread_mutex_lock(&s->mu);
  if (all)
    for (srv_session *c = s->sessions; c; c = c->next) shutdown(c->fd, SHUT_RDWR);
  srv_session *done = NULL;
  for (srv_session **p = &s->sessions; *p;) {
    srv_session *c = *p;
    if (all || atomic_load(&c->finished)) {
      *p = c->next;
      c->next = done;
      done = c;
    } else {
      p = &c->next;
    }
  }
  pthread_mutex_unlock(&s->mu);
  while (done) { /* joined outside the lock: a finishing thread takes none */
    srv_session *c = done;
    done = c->next;
    pthread_join(c->thread, NULL);
    close(c->fd);
    free(c);
  }
}
