/* Moving bytes between this process and its peers' blocks (client.h): the
 * copy kernels' work, one span or a batch of them. The spans of one peer go
 * out as one pipeline on its connection (conn.c): WRITEs and their bytes, READs,
 * COPYs within the peer, back to back, replies collected after. Spans between
 * two peers pass through a host buffer, one after the other.
 *
 * A peer with a shared region (a Unix socket's, protocol.h): a block in it is
 * memory of this process too, copied with memcpy, no request at all. The
 * bytes of a block outside it (a staged device's) pass through a staging
 * block in the region, in two halves: this process fills one half while the
 * server moves the other to its device, or the server fills one while this
 * process empties the other. */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "failure.h"

int remote_bad_device(remote *r, int index) {
  return remote_fail(r->reg, TSTOR_ENODEV, "remote:%d: no such device (%d remote devices)", index,
                     r->ndevices);
}

int remote_no_block(remote *r, int device, const void *addr, size_t n) {
  return remote_fail(r->reg, TSTOR_EINVAL,
                     "remote:%d: %zu bytes at %p are not inside one block of this device", device,
                     n, addr);
}

int remote_check(remote *r, int index, const char *what) {
  if (index < 0 || index >= r->ndevices) return remote_bad_device(r, index);
  return remote_check_process(r->reg, r->pid, index, what);
}

/* The peer a span is on: its remote side's (both sides' for XFER_ON, NULL
 * when they are on two peers). */
static peer *peer_of(remote *r, int kind, const tstor_copy_span *sp) {
  if (kind == XFER_PUT) return r->devices[sp->dst_index].p;
  if (kind == XFER_GET) return r->devices[sp->src_index].p;
  peer *d = r->devices[sp->dst_index].p;
  return d == r->devices[sp->src_index].p ? d : NULL;
}

/* The staging block, made in the region on first use, outside any pipeline
 * (a refusal here is no failure of the batch: without it the bytes go
 * through the socket). The caller holds p->mu. */
static void stage_open(peer *p) {
  uint8_t req[TSR_MAX_MESSAGE];
  tsr_msg reply;
  p->stage_tried = 1;
  if (peer_rpc(p, (int)p->region_device, req,
               tsr_encode_alloc(req, 0, p->region_device, STAGE_BYTES), &reply) != 0)
    return;
  if (reply.region != TSR_NO_REGION && reply.region <= p->region_size &&
      STAGE_BYTES <= p->region_size - reply.region) {
    p->stage = p->region + reply.region;
    p->stage_handle = reply.handle;
    return;
  }
  peer_rpc(p, -1, req, tsr_encode_free(req, 0, reply.handle), &reply); /* not in the region */
}

/* n bytes between local memory and [offset, offset + n) of block b through
 * the staging block's halves, in pieces of half of it, each a COPY. */
static int staged(peer *p, int put, int device, uint8_t *local, const rblock *b, uint64_t offset,
                  size_t n, size_t tag) {
  const size_t half = STAGE_BYTES / 2, pieces = (n + half - 1) / half;
  uint8_t req[TSR_MAX_MESSAGE];
  int rc = 0;
  /* a COPY of piece k between its half and the block */
  for (size_t k = 0, next = 0; k < pieces && rc == 0; k++) {
    int h = (int)(k % 2);
    /* a GET keeps the server a piece ahead: it fills the other half meanwhile */
    for (; !put && rc == 0 && next < pieces && next <= k + 1; next++) {
      int nh = (int)(next % 2);
      size_t at = next * half, len = n - at < half ? n - at : half;
      rc = pipe_wait(p, p->stage_busy[nh]);
      if (rc == 0)
        rc = pipe_send(p, device, req,
                       tsr_encode_copy(req, 0, p->stage_handle, (uint64_t)nh * half, b->handle,
                                       offset + at, len),
                       NULL, NULL, 0, NULL, tag);
      p->stage_busy[nh] = p->next_id;
      if (rc == 0) rc = pipe_flush(p);
    }
    size_t at = k * half, len = n - at < half ? n - at : half;
    if (rc == 0) rc = pipe_wait(p, p->stage_busy[h]);
    if (rc) break;
    if (!put) {
      memcpy(local + at, p->stage + (size_t)h * half, len);
      continue;
    }
    memcpy(p->stage + (size_t)h * half, local + at, len);
    rc = pipe_send(
        p, device, req,
        tsr_encode_copy(req, 0, b->handle, offset + at, p->stage_handle, (uint64_t)h * half, len),
        NULL, NULL, 0, NULL, tag);
    p->stage_busy[h] = p->next_id;
    if (rc == 0) rc = pipe_flush(p);
  }
  return rc;
}

/* Queues the requests of one span on p's pipeline, tagged with its index, or
 * moves its bytes at once where both ends are this process's memory. */
static int queue_span(remote *r, peer *p, int kind, const tstor_copy_span *sp, size_t tag) {
  uint8_t req[TSR_MAX_MESSAGE];
  uint64_t daddr = (uint64_t)(uintptr_t)sp->dst, saddr = (uint64_t)(uintptr_t)sp->src;
  rblock *db = kind == XFER_GET ? NULL : peer_block_find(p, sp->dst_index, daddr, sp->nbytes);
  rblock *sb = kind == XFER_PUT ? NULL : peer_block_find(p, sp->src_index, saddr, sp->nbytes);
  if (kind != XFER_GET && !db) return remote_no_block(r, sp->dst_index, sp->dst, sp->nbytes);
  if (kind != XFER_PUT && !sb) return remote_no_block(r, sp->src_index, sp->src, sp->nbytes);
  uint8_t *dmap = db && db->mapped ? db->mapped + (daddr - rblock_addr(db)) : NULL;
  uint8_t *smap = sb && sb->mapped ? sb->mapped + (saddr - rblock_addr(sb)) : NULL;
  if ((kind == XFER_PUT && dmap) || (kind == XFER_GET && smap) || (dmap && smap)) {
    memmove(dmap ? dmap : sp->dst, smap ? smap : sp->src, sp->nbytes);
    return 0;
  }
  if (kind == XFER_ON) {
    size_t len = tsr_encode_copy(req, 0, db->handle, daddr - rblock_addr(db), sb->handle,
                                 saddr - rblock_addr(sb), sp->nbytes);
    return pipe_send(p, sp->dst_index, req, len, NULL, NULL, 0, NULL, tag);
  }
  int put = kind == XFER_PUT, device = put ? sp->dst_index : sp->src_index;
  rblock *b = put ? db : sb;
  uint64_t offset = (put ? daddr : saddr) - rblock_addr(b);
  uint8_t *local = put ? (uint8_t *)sp->src : sp->dst;
  if (p->stage) return staged(p, put, device, local, b, offset, sp->nbytes, tag);
  int rc = 0;
  for (size_t done = 0, piece; done < sp->nbytes && rc == 0; done += piece) {
    piece = sp->nbytes - done < CHUNK ? sp->nbytes - done : CHUNK;
    size_t len =
        tsr_encode_transfer(req, put ? TSR_WRITE : TSR_READ, 0, b->handle, offset + done, piece);
    rc = pipe_send(p, device, req, len, put ? local + done : NULL, put ? NULL : local + done, piece,
                   NULL, tag);
  }
  return rc;
}

/* Every span of the batch that is on p, as one pipeline. */
static int on_peer(remote *r, peer *p, int kind, const tstor_copy_span *spans, size_t count,
                   size_t *failed) {
  size_t i = 0;
  while (i < count && peer_of(r, kind, &spans[i]) != p) i++;
  if (i == count) return 0;
  pthread_mutex_lock(&p->mu);
  if (p->region && !p->stage && !p->stage_tried && kind != XFER_ON && !p->failed)
    for (size_t k = i; k < count; k++) { /* a block outside the region: make the staging block */
      const tstor_copy_span *sp = &spans[k];
      int put = kind == XFER_PUT, device = put ? sp->dst_index : sp->src_index;
      const void *addr = put ? sp->dst : sp->src;
      rblock *b = peer_of(r, kind, sp) == p
                      ? peer_block_find(p, device, (uint64_t)(uintptr_t)addr, sp->nbytes)
                      : NULL;
      if (b && !b->mapped) {
        stage_open(p);
        break;
      }
    }
  pipe_begin(p);
  int rc = 0;
  for (; i < count && rc == 0; i++)
    if (peer_of(r, kind, &spans[i]) == p && (rc = queue_span(r, p, kind, &spans[i], i)) != 0)
      *failed = i;
  size_t tag = SIZE_MAX;
  int end = pipe_end(p, &tag);
  pthread_mutex_unlock(&p->mu);
  if (end && tag != SIZE_MAX) *failed = tag;
  return end ? end : rc;
}

/* remote -> remote between two peers: through a host buffer, a piece at a
 * time, one peer's lock at a time. */
static int across_peers(remote *r, const tstor_copy_span *sp) {
  size_t piece = sp->nbytes < CHUNK ? sp->nbytes : CHUNK;
  uint8_t *tmp = malloc(piece);
  if (!tmp)
    return remote_fail(r->reg, TSTOR_ENOMEM,
                       "remote:%d -> remote:%d: no host memory to stage %zu bytes", sp->src_index,
                       sp->dst_index, piece);
  int rc = 0;
  for (size_t done = 0; done < sp->nbytes && rc == 0; done += piece) {
    size_t n = sp->nbytes - done < piece ? sp->nbytes - done : piece;
    size_t ignored;
    tstor_copy_span get = {tmp, (const uint8_t *)sp->src + done, n, 0, sp->src_index};
    tstor_copy_span put = {(uint8_t *)sp->dst + done, tmp, n, sp->dst_index, 0};
    rc = on_peer(r, r->devices[sp->src_index].p, XFER_GET, &get, 1, &ignored);
    if (rc == 0) rc = on_peer(r, r->devices[sp->dst_index].p, XFER_PUT, &put, 1, &ignored);
  }
  free(tmp);
  return rc;
}

int xfer_spans(remote *r, int kind, const tstor_copy_span *spans, size_t count, size_t *failed) {
  static const char *const what[] = {"copy to the device", "copy from the device", "copy"};
  for (size_t i = 0; i < count; i++) {
    int rc = 0;
    if (kind != XFER_GET) rc = remote_check(r, spans[i].dst_index, what[kind]);
    if (rc == 0 && kind != XFER_PUT) rc = remote_check(r, spans[i].src_index, what[kind]);
    if (rc) {
      *failed = i;
      return rc;
    }
  }
  for (int k = 0; k < r->npeers; k++) {
    int rc = on_peer(r, r->peers[k], kind, spans, count, failed);
    if (rc) return rc;
  }
  for (size_t i = 0; kind == XFER_ON && i < count; i++) {
    if (peer_of(r, kind, &spans[i])) continue;
    int rc = across_peers(r, &spans[i]);
    if (rc) {
      *failed = i;
      return rc;
    }
  }
  return 0;
}
