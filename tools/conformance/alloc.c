/* The alloc section: zero bytes, small and large blocks, impossible sizes,
 * alignment and resize. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

static void check_zero_bytes(conf_run *r, const conf_device *d) {
  conf_begin(r, "zero bytes", d->label);
  tstor_storage *s = NULL, *c = NULL;
  TRY(r, tstor_storage_new(r->ctx, d->dev, 0, &s), "allocating 0 bytes");
  EXPECT(r, tstor_storage_nbytes(s) == 0, "nbytes is %zu", tstor_storage_nbytes(s));
  TRY(r, tstor_storage_clone(s, &c), "cloning 0 bytes");
  if (d->has_data) {
    TRY(r, tstor_storage_copy(c, s), "copying 0 bytes");
    TRY(r, tstor_storage_fill(s, 7), "filling 0 bytes");
  }
out:
  tstor_storage_release(c);
  tstor_storage_release(s);
  conf_end(r);
}

static int cmp_addr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static void check_small_sizes(conf_run *r, const conf_device *d) {
  conf_begin(r, "small sizes", d->label);
  enum { N = 72 };
  tstor_storage *s[N] = {NULL};
  size_t sizes[N];
  for (int i = 0; i < 64; i++) sizes[i] = (size_t)i + 1;
  const size_t more[] = {100, 255, 257, 1000, 4095, 4096, 4097, 65537};
  for (int i = 0; i < 8; i++) sizes[64 + i] = more[i];
  for (int i = 0; i < N; i++) {
    TRY(r, tstor_storage_new(r->ctx, d->dev, sizes[i], &s[i]), "allocating %zu bytes", sizes[i]);
    EXPECT(r, tstor_storage_nbytes(s[i]) == sizes[i], "asked %zu bytes, got %zu", sizes[i],
           tstor_storage_nbytes(s[i]));
  }
  if (d->has_data) {
    /* Live blocks may not overlap: sort (address, index) pairs by address. */
    uintptr_t pairs[N][2];
    for (int i = 0; i < N; i++) {
      pairs[i][0] = (uintptr_t)tstor_storage_data(s[i]);
      pairs[i][1] = (uintptr_t)i;
      EXPECT(r, pairs[i][0] != 0, "%zu bytes came back with a NULL address", sizes[i]);
    }
    qsort(pairs, N, sizeof pairs[0], cmp_addr);
    for (int i = 0; i + 1 < N; i++) {
      size_t n = sizes[pairs[i][1]];
      EXPECT(r, pairs[i][0] + n <= pairs[i + 1][0],
             "live blocks overlap: %zu bytes at %#lx and another at %#lx", n,
             (unsigned long)pairs[i][0], (unsigned long)pairs[i + 1][0]);
    }
  }
  conf_notef(r, "%d live allocations of 1 to 65537 bytes", N);
out:
  for (int i = 0; i < N; i++) tstor_storage_release(s[i]);
  conf_end(r);
}

static void check_large(conf_run *r, const conf_device *d) {
  size_t n = r->opt->large_bytes;
  conf_begin(r, "large", d->label);
  tstor_storage *s = NULL, *head = NULL, *tail = NULL;
  unsigned char *in = conf_xmalloc(4096), *back = conf_xmalloc(4096);
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &s), "allocating %zu MiB (--large-mb sets it)",
      n >> 20);
  if (d->has_data) {
    /* Both ends of the block must be real memory. */
    TRY(r, tstor_storage_view(s, 0, 4096, &head), "a view of the first page");
    TRY(r, tstor_storage_view(s, n - 4096, 4096, &tail), "a view of the last page");
    conf_pattern(in, 4096, 1);
    TRY(r, conf_upload(r, head, in), "writing the first page");
    TRY(r, conf_download(r, back, head), "reading the first page");
    EXPECT(r, conf_mismatch(in, back, 4096) == SIZE_MAX, "the first page did not read back");
    conf_pattern(in, 4096, 2);
    TRY(r, conf_upload(r, tail, in), "writing the last page");
    TRY(r, conf_download(r, back, tail), "reading the last page");
    EXPECT(r, conf_mismatch(in, back, 4096) == SIZE_MAX, "the last page did not read back");
  }
  conf_notef(r, "%zu MiB", n >> 20);
out:
  tstor_storage_release(head);
  tstor_storage_release(tail);
  tstor_storage_release(s);
  free(in);
  free(back);
  conf_end(r);
}

static void check_impossible(conf_run *r, const conf_device *d) {
  conf_begin(r, "impossible sizes", d->label);
  tstor_storage *s = NULL;
  tstor_stats before = TSTOR_STATS_INIT, after = TSTOR_STATS_INIT;
  if (!d->has_data) {
    conf_skipf(r, "no data: every size is possible");
    goto out;
  }
  TRY(r, conf_read_stats(r, d, &before), "reading statistics");
  const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 4095, SIZE_MAX / 2 + 1, (size_t)1 << 60};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    s = NULL;
    int rc = tstor_storage_new(r->ctx, d->dev, sizes[i], &s);
    EXPECT(r, rc != 0, "allocating %zu bytes succeeded", sizes[i]);
    EXPECT(r, rc == TSTOR_ENOMEM || rc == TSTOR_EOVERFLOW,
           "allocating %zu bytes failed with %s, not TSTOR_ENOMEM or TSTOR_EOVERFLOW", sizes[i],
           tstor_err_name(rc));
    char what[64];
    snprintf(what, sizeof what, "allocating %zu bytes", sizes[i]);
    conf_check_message(r, what);
    if (r->status == CONF_FAIL) goto out;
  }
  TRY(r, conf_read_stats(r, d, &after), "reading statistics");
  EXPECT(r, after.allocated == before.allocated,
         "failed allocations changed allocated from %llu to %llu bytes",
         (unsigned long long)before.allocated, (unsigned long long)after.allocated);
  TRY(r, tstor_storage_new(r->ctx, d->dev, 4096, &s), "allocating 4096 bytes afterwards");
  if (after.oom_count == before.oom_count)
    conf_notef(r, "refused; oom_count not kept");
  else
    conf_notef(r, "refused; oom_count %llu -> %llu", (unsigned long long)before.oom_count,
          (unsigned long long)after.oom_count);
out:
  tstor_storage_release(s);
  conf_end(r);
}

/* Freed blocks must be usable again: REUSE_ROUNDS rounds of the large
 * allocation, written at both ends and freed, ask for REUSE_ROUNDS x
 * --large-mb in all (1 GiB by default): more than a small device has, so an
 * allocator that loses freed blocks runs out here. */
#define REUSE_ROUNDS 16
static void check_reuse(conf_run *r, const conf_device *d) {
  size_t n = r->opt->large_bytes;
  conf_begin(r, "freed memory reused", d->label);
  tstor_storage *s = NULL;
  unsigned char in[64], back[64];
  int round = 0;
  for (; round < REUSE_ROUNDS; round++) {
    int rc = tstor_storage_new(r->ctx, d->dev, n, &s);
    if (rc) {
      conf_fail_rc(r, rc,
                   "round %d: allocating %zu MiB again after freeing it %d times (blocks not "
                   "given back?)",
                   round + 1, n >> 20, round);
      goto out;
    }
    if (d->has_data) {
      tstor_storage *v = NULL;
      conf_pattern(in, sizeof in, 4000u + (unsigned)round);
      TRY(r, tstor_storage_view(s, n - sizeof in, sizeof in, &v), "a view of the last bytes");
      rc = conf_upload(r, v, in);
      if (rc == 0) rc = conf_download(r, back, v);
      tstor_storage_release(v);
      TRY(r, rc, "round %d: writing and reading the last bytes", round + 1);
      EXPECT(r, conf_mismatch(in, back, sizeof in) == SIZE_MAX,
             "round %d: the last bytes did not read back", round + 1);
    }
    tstor_storage_release(s);
    s = NULL;
  }
  conf_notef(r, "%d x %zu MiB allocated and freed", REUSE_ROUNDS, n >> 20);
out:
  tstor_storage_release(s);
  conf_end(r);
}

static void check_alignment(conf_run *r, const conf_device *d) {
  conf_begin(r, "alignment", d->label);
  enum { N = 24 };
  tstor_storage *s[N] = {NULL};
  const size_t sizes[N] = {1,   2,   3,    5,    7,    9,    15,   17,   31,   33,   63,    65,
                           100, 127, 129,  255,  257,  511,  513,  1023, 1025, 4095, 65535, 3};
  uintptr_t all = 0;
  if (!d->has_data) {
    conf_skipf(r, "no data, no addresses");
    goto out;
  }
  for (int i = 0; i < N; i++) {
    TRY(r, tstor_storage_new(r->ctx, d->dev, sizes[i], &s[i]), "allocating %zu bytes", sizes[i]);
    uintptr_t p = (uintptr_t)tstor_storage_data(s[i]);
    EXPECT(r, p % r->opt->min_align == 0, "%zu bytes at %#lx: not %zu-byte aligned", sizes[i],
           (unsigned long)p, r->opt->min_align);
    all |= p;
  }
  uintptr_t align = all ? all & -all : 4096;
  conf_notef(r, "every address %lu-byte aligned (%zu required)",
        (unsigned long)(align > 4096 ? 4096 : align), r->opt->min_align);
out:
  for (int i = 0; i < N; i++) tstor_storage_release(s[i]);
  conf_end(r);
}

static void check_resize(conf_run *r, const conf_device *d) {
  conf_begin(r, "resize", d->label);
  tstor_storage *s = NULL;
  unsigned char in[100], back[5000];
  TRY(r, tstor_storage_new(r->ctx, d->dev, 100, &s), "allocating 100 bytes");
  if (!(tstor_storage_flags(s) & TSTOR_FLAG_RESIZABLE)) {
    conf_skipf(r, "new storages are not resizable");
    goto out;
  }
  if (d->has_data) {
    conf_pattern(in, sizeof in, 3);
    TRY(r, conf_upload(r, s, in), "writing 100 bytes");
  }
  TRY(r, tstor_storage_resize(s, 5000), "growing 100 -> 5000 bytes");
  EXPECT(r, tstor_storage_nbytes(s) == 5000, "nbytes is %zu after growing to 5000",
         tstor_storage_nbytes(s));
  if (d->has_data) {
    TRY(r, conf_download(r, back, s), "reading after growing");
    EXPECT(r, conf_mismatch(in, back, 100) == SIZE_MAX, "growing lost the first 100 bytes");
  }
  TRY(r, tstor_storage_resize(s, 10), "shrinking 5000 -> 10 bytes");
  if (d->has_data) {
    TRY(r, conf_download(r, back, s), "reading after shrinking");
    EXPECT(r, conf_mismatch(in, back, 10) == SIZE_MAX, "shrinking lost the first 10 bytes");
  }
  TRY(r, tstor_storage_resize(s, 0), "shrinking to 0 bytes");
  TRY(r, tstor_storage_resize(s, 64), "growing from 0 bytes");
out:
  tstor_storage_release(s);
  conf_end(r);
}

void conf_section_alloc(conf_run *r) {
  if (conf_setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    check_zero_bytes(r, d);
    check_small_sizes(r, d);
    check_large(r, d);
    check_impossible(r, d);
    check_reuse(r, d);
    check_alignment(r, d);
    check_resize(r, d);
  }
  conf_teardown(r);
}
