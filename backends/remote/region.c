/* A client's shared region on the server (server_state.h): a memfd made for
 * one session, sized, sealed so that its size can never change (the client
 * holds a descriptor too: a region it could shrink would fault the server),
 * and mapped; and the allocator of its blocks, first fit over a list of free
 * extents kept in address order, merged on every free. Pages that a free
 * leaves wholly unused go back to the system and read as zeros after. */
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS, MADV_REMOVE */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "server_state.h"

#define PAGE ((uint64_t)4096)
/* Every block starts on a cache line; from this size on, on a page. */
#define LINE ((uint64_t)64)
#define PAGE_ALIGNED_FROM ((uint64_t)16 << 10)

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

int srv_region_open(srv_region *g, uint64_t size, int *fd, char *why, size_t why_size) {
  memset(g, 0, sizeof *g);
  *fd = -1;
  size = size / PAGE * PAGE;
  if (size == 0) {
    snprintf(why, why_size, "a region of no pages");
    return -1;
  }
  int mfd = memfd_create("tstor-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mfd < 0 || ftruncate(mfd, (off_t)size) != 0 ||
      fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    snprintf(why, why_size, "cannot make a region of %llu bytes: %s", (unsigned long long)size,
             strerror(errno));
    if (mfd >= 0) close(mfd);
    return -1;
  }
  void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, mfd, 0);
  g->free = malloc(16 * sizeof *g->free);
  if (base == MAP_FAILED || !g->free) {
    snprintf(why, why_size, "cannot map a region of %llu bytes: %s", (unsigned long long)size,
             base == MAP_FAILED ? strerror(errno) : "out of memory");
    if (base != MAP_FAILED) munmap(base, size);
    free(g->free);
    g->free = NULL;
    close(mfd);
    return -1;
  }
  g->base = base;
  g->size = size;
  g->free[0] = (srv_extent){0, size};
  g->nfree = 1;
  g->cap = 16;
  *fd = mfd;
  return 0;
}

void srv_region_close(srv_region *g) {
  if (g->base) munmap(g->base, g->size);
  free(g->free);
  memset(g, 0, sizeof *g);
}

/* Room for one more extent; -1 when there is no memory for it. */
static int grow(srv_region *g) {
  if (g->nfree < g->cap) return 0;
  srv_extent *more = realloc(g->free, 2 * g->cap * sizeof *more);
  if (!more) return -1;
  g->free = more;
  g->cap *= 2;
  return 0;
}

uint64_t srv_region_span(uint64_t n) { return round_up(n, LINE); }

int srv_region_alloc(srv_region *g, uint64_t n, uint64_t *off) {
  uint64_t need = srv_region_span(n), align = need >= PAGE_ALIGNED_FROM ? PAGE : LINE;
  for (size_t i = 0; i < g->nfree; i++) {
    srv_extent *e = &g->free[i];
    uint64_t at = round_up(e->off, align), end = e->off + e->len;
    if (at > end || end - at < need) continue;
    if (at > e->off && at + need < end) { /* a piece stays on each side */
      if (grow(g) != 0) return -1;
      e = &g->free[i];
      memmove(e + 2, e + 1, (g->nfree - i - 1) * sizeof *e);
      e[1] = (srv_extent){at + need, end - at - need};
      e->len = at - e->off;
      g->nfree++;
    } else if (at > e->off) {
      e->len = at - e->off;
    } else if (at + need < end) {
      *e = (srv_extent){at + need, end - at - need};
    } else {
      memmove(e, e + 1, (g->nfree - i - 1) * sizeof *e);
      g->nfree--;
    }
    *off = at;
    return 0;
  }
  return -1;
}

void srv_region_free(srv_region *g, uint64_t off, uint64_t n) {
  uint64_t len = srv_region_span(n);
  size_t lo = 0, hi = g->nfree; /* the first extent after off */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (g->free[mid].off < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  int join_prev = lo > 0 && g->free[lo - 1].off + g->free[lo - 1].len == off;
  int join_next = lo < g->nfree && off + len == g->free[lo].off;
  srv_extent merged = {off, len};
  if (join_prev && join_next) {
    merged = (srv_extent){g->free[lo - 1].off, g->free[lo - 1].len + len + g->free[lo].len};
    g->free[lo - 1] = merged;
    memmove(&g->free[lo], &g->free[lo + 1], (g->nfree - lo - 1) * sizeof merged);
    g->nfree--;
  } else if (join_prev) {
    g->free[lo - 1].len += len;
    merged = g->free[lo - 1];
  } else if (join_next) {
    g->free[lo] = (srv_extent){off, len + g->free[lo].len};
    merged = g->free[lo];
  } else if (grow(g) == 0) {
    memmove(&g->free[lo + 1], &g->free[lo], (g->nfree - lo) * sizeof merged);
    g->free[lo] = merged;
    g->nfree++;
  } /* else: no memory for the record; those bytes stay used, and are zeroed
       when the region is */
  uint64_t first = round_up(merged.off, PAGE), last = (merged.off + merged.len) / PAGE * PAGE;
  if (last > first) madvise(g->base + first, last - first, MADV_REMOVE);
}
