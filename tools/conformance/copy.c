/* The copy section: host round trips at many sizes and offsets, through
 * views, device to device, and batches of copies. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

static const size_t copy_sizes[] = {1,    2,    3,    4,     7,     8,     15,          16,
                                    31,   64,   255,  256,   257,   1000,  4095,        4096,
                                    4097, 65535, 65536, 65537, 1 << 20, (1 << 20) + 13};
static const size_t copy_offsets[] = {0, 1, 3, 8, 13, 64, 255, 4096};

/* Writes `n` bytes at `offset` of a device buffer through a view and reads
 * the whole buffer back: the bytes must be there and nothing around them may
 * have changed. */
static void round_trip(conf_run *r, const conf_device *d, size_t n, size_t offset,
                       unsigned seed) {
  size_t total = offset + n + GUARD;
  tstor_storage *buf = NULL, *view = NULL;
  unsigned char *guard = conf_xmalloc(total), *in = conf_xmalloc(n), *back = conf_xmalloc(total);
  conf_pattern(guard, total, seed);
  conf_pattern(in, n, seed + 1000);
  TRY(r, tstor_storage_new(r->ctx, d->dev, total, &buf), "allocating %zu bytes", total);
  TRY(r, conf_upload(r, buf, guard), "writing %zu bytes", total);
  TRY(r, tstor_storage_view(buf, offset, n, &view), "a view of %zu bytes at %zu", n, offset);
  TRY(r, conf_upload(r, view, in), "writing %zu bytes at offset %zu", n, offset);
  memset(back, 0, total);
  TRY(r, conf_download(r, back, buf), "reading %zu bytes", total);
  size_t at = conf_mismatch(in, back + offset, n);
  EXPECT(r, at == SIZE_MAX, "%zu bytes at offset %zu: byte %zu reads 0x%02x, wrote 0x%02x", n,
         offset, at, back[offset + at], in[at]);
  at = conf_mismatch(guard, back, offset);
  EXPECT(r, at == SIZE_MAX,
         "%zu bytes at offset %zu: byte %zu before them reads 0x%02x, not 0x%02x", n, offset, at,
         back[at], guard[at]);
  at = conf_mismatch(guard + offset + n, back + offset + n, GUARD);
  EXPECT(r, at == SIZE_MAX,
         "%zu bytes at offset %zu: byte %zu after them reads 0x%02x, not 0x%02x", n, offset, at,
         back[offset + n + at], guard[offset + n + at]);
  /* And back out through a view as well. */
  memset(back, 0, n);
  TRY(r, conf_download(r, back, view), "reading %zu bytes at offset %zu", n, offset);
  EXPECT(r, conf_mismatch(in, back, n) == SIZE_MAX, "reading %zu bytes at offset %zu through a view",
         n, offset);
out:
  tstor_storage_release(view);
  tstor_storage_release(buf);
  free(guard);
  free(in);
  free(back);
}

static void check_host_round_trips(conf_run *r, const conf_device *d) {
  conf_begin(r, "host round trips", d->label);
  unsigned seed = 1;
  for (size_t i = 0; i < COUNT(copy_sizes) && r->status == CONF_PASS; i++)
    for (size_t j = 0; j < COUNT(copy_offsets) && r->status == CONF_PASS; j++)
      round_trip(r, d, copy_sizes[i], copy_offsets[j], seed++);
  conf_notef(r, "%zu sizes (1 B to 1 MiB + 13) x %zu offsets", COUNT(copy_sizes),
        COUNT(copy_offsets));
  conf_end(r);
}

/* Device to device, between two devices (the same one when `to` is `from`),
 * whole and through views at odd offsets. */
static void device_copy(conf_run *r, const conf_device *from, tstor_device to) {
  const size_t n = 300000;
  tstor_storage *a = NULL, *b = NULL, *va = NULL, *vb = NULL;
  unsigned char *in = conf_xmalloc(n), *back = conf_xmalloc(n), *expect = conf_xmalloc(n);
  conf_pattern(in, n, 41);
  TRY(r, tstor_storage_new(r->ctx, from->dev, n, &a), "allocating");
  TRY(r, tstor_storage_new(r->ctx, to, n, &b), "allocating");
  TRY(r, conf_upload(r, a, in), "writing the source");
  TRY(r, tstor_storage_copy(b, a), "copying %zu bytes", n);
  TRY(r, conf_download(r, back, b), "reading the destination");
  EXPECT(r, conf_mismatch(in, back, n) == SIZE_MAX, "a whole copy of %zu bytes differs", n);
  /* bytes [3, 3 + 1001) of a into [70001, 71002) of b */
  conf_pattern(in, n, 42);
  TRY(r, conf_upload(r, a, in), "writing the source");
  TRY(r, tstor_storage_view(a, 3, 1001, &va), "a source view");
  TRY(r, tstor_storage_view(b, 70001, 1001, &vb), "a destination view");
  TRY(r, conf_download(r, expect, b), "reading the destination");
  memcpy(expect + 70001, in + 3, 1001);
  TRY(r, tstor_storage_copy(vb, va), "copying between views");
  TRY(r, conf_download(r, back, b), "reading the destination");
  size_t at = conf_mismatch(expect, back, n);
  EXPECT(r, at == SIZE_MAX, "copying 1001 bytes between views: byte %zu of the destination", at);
out:
  tstor_storage_release(va);
  tstor_storage_release(vb);
  tstor_storage_release(a);
  tstor_storage_release(b);
  free(in);
  free(back);
  free(expect);
}

static void check_clone_and_to(conf_run *r, const conf_device *d) {
  conf_begin(r, "clone and to", d->label);
  const size_t n = 70001;
  tstor_storage *a = NULL, *c = NULL, *h = NULL, *same = NULL, *back_dev = NULL;
  unsigned char *in = conf_xmalloc(n), *back = conf_xmalloc(n);
  conf_pattern(in, n, 51);
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &a), "allocating");
  TRY(r, conf_upload(r, a, in), "writing");
  TRY(r, tstor_storage_clone(a, &c), "cloning");
  tstor_device cd = tstor_storage_device(c);
  EXPECT(r, cd.type == d->dev.type && cd.index == d->dev.index, "the clone is on another device");
  EXPECT(r, tstor_storage_data(c) != tstor_storage_data(a), "the clone shares the bytes");
  TRY(r, conf_download(r, back, c), "reading the clone");
  EXPECT(r, conf_mismatch(in, back, n) == SIZE_MAX, "the clone differs");
  TRY(r, tstor_storage_to(a, r->host, &h), "moving to the host");
  EXPECT(r, memcmp(tstor_storage_data(h), in, n) == 0, "the host copy differs");
  TRY(r, tstor_storage_to(a, d->dev, &same), "moving to its own device");
  EXPECT(r, same == a, "to() its own device made a copy");
  TRY(r, tstor_storage_to(h, d->dev, &back_dev), "moving back to the device");
  TRY(r, conf_download(r, back, back_dev), "reading it");
  EXPECT(r, conf_mismatch(in, back, n) == SIZE_MAX, "the round trip through to() differs");
out:
  tstor_storage_release(back_dev);
  tstor_storage_release(same);
  tstor_storage_release(h);
  tstor_storage_release(c);
  tstor_storage_release(a);
  free(in);
  free(back);
  conf_end(r);
}

/* The batch: slot k of N, 8 KiB each, moves a few bytes at a small offset:
 * host to the device for k % 3 == 0, the device's slot k + 1 out to host
 * memory for k % 3 == 1, and the device's slot k to another device (or the
 * same one) for k % 3 == 2. No destination meets another item's range. */
enum { BATCH_N = 48, BATCH_SLOT = 8192 };

static tstor_copy_item batch_item(tstor_storage *h, tstor_storage *a, tstor_storage *b,
                                  tstor_storage *hb, int k) {
  size_t at = (size_t)k * BATCH_SLOT + (size_t)(k * 13) % 64;
  size_t len = 1 + (size_t)(k * 997) % (BATCH_SLOT - 64);
  if (k % 3 == 0) return (tstor_copy_item){a, at, h, at, len};
  if (k % 3 == 1) return (tstor_copy_item){hb, at, a, at + BATCH_SLOT, len};
  return (tstor_copy_item){b, at, a, at, len};
}

/* What the batch does, done on host copies of the buffers. */
static void batch_expect(unsigned char *bufs[4], int k) {
  size_t at = (size_t)k * BATCH_SLOT + (size_t)(k * 13) % 64;
  size_t len = 1 + (size_t)(k * 997) % (BATCH_SLOT - 64);
  unsigned char *h = bufs[0], *a = bufs[1], *b = bufs[2], *hb = bufs[3];
  if (k % 3 == 0) memcpy(a + at, h + at, len);
  if (k % 3 == 1) memcpy(hb + at, a + at + BATCH_SLOT, len);
  if (k % 3 == 2) memcpy(b + at, a + at, len);
}

/* tstor_storage_copy_batch to, from and on the device (the backend's batched
 * kernel where it registered one, else one by one), then a batch whose last
 * item is outside its storage: refused, naming it, with nothing moved. */
static void check_batch(conf_run *r, const conf_device *d) {
  conf_begin(r, "batched copies", d->label);
  const size_t total = (size_t)BATCH_N * BATCH_SLOT;
  tstor_device other = {d->dev.type, d->count - 1};
  tstor_storage *st[4] = {NULL, NULL, NULL, NULL}; /* h, a, b, hb */
  unsigned char *want[4] = {NULL, NULL, NULL, NULL}, *got = conf_xmalloc(total);
  tstor_copy_item items[BATCH_N + 1];
  for (int i = 0; i < 4; i++) {
    want[i] = conf_xmalloc(total);
    conf_pattern(want[i], total, 61u + (unsigned)i);
    tstor_device on = i == 0 || i == 3 ? r->host : i == 1 ? d->dev : other;
    TRY(r, tstor_storage_new(r->ctx, on, total, &st[i]), "allocating %zu bytes", total);
    TRY(r, conf_upload(r, st[i], want[i]), "writing %zu bytes", total);
  }
  for (int k = 0; k < BATCH_N; k++) {
    items[k] = batch_item(st[0], st[1], st[2], st[3], k);
    batch_expect(want, k);
  }
  TRY(r, tstor_storage_copy_batch(items, BATCH_N), "a batch of %d copies", BATCH_N);
  for (int i = 1; i < 4; i++) {
    TRY(r, conf_download(r, got, st[i]), "reading the batch's results");
    size_t at = conf_mismatch(want[i], got, total);
    EXPECT(r, at == SIZE_MAX, "after a batch of %d copies, byte %zu (slot %zu) of the %s differs",
           BATCH_N, at, at / BATCH_SLOT,
           i == 1   ? "device buffer"
           : i == 2 ? "second device buffer"
                    : "host buffer");
  }
  items[BATCH_N] = (tstor_copy_item){st[2], total - 10, st[1], 0, 20};
  int rc = tstor_storage_copy_batch(items, BATCH_N + 1);
  EXPECT(r, rc == TSTOR_ERANGE, "a batch with an item outside its storage gave %s",
         tstor_err_name(rc));
  char name[64];
  snprintf(name, sizeof name, "item %d", BATCH_N);
  EXPECT(r, strstr(tstor_last_error(), name), "the refusal does not name %s: %s", name,
         tstor_last_error());
  for (int i = 1; i < 4; i++) { /* the sources and destinations of the valid items too */
    TRY(r, conf_download(r, got, st[i]), "reading after the refused batch");
    EXPECT(r, conf_mismatch(want[i], got, total) == SIZE_MAX, "a refused batch changed the %s",
           i == 1 ? "device buffer" : "destinations");
  }
  int in = tstor_copy_batched(r->ctx, r->host.type, d->dev.type);
  int out_ = tstor_copy_batched(r->ctx, d->dev.type, r->host.type);
  int self = tstor_copy_batched(r->ctx, d->dev.type, d->dev.type);
  conf_notef(r, "%d items, to index %d; cpu->%s %s, back %s, on the device %s", BATCH_N,
             other.index, d->label, in == 1 ? "batched" : "one by one",
             out_ == 1 ? "batched" : "one by one", self == 1 ? "batched" : "one by one");
out:
  for (int i = 0; i < 4; i++) {
    tstor_storage_release(st[i]);
    free(want[i]);
  }
  free(got);
  conf_end(r);
}

static void check_no_data_copies(conf_run *r, const conf_device *d) {
  conf_begin(r, "copies without data", d->label);
  tstor_storage *m = NULL, *h = NULL;
  unsigned char buf[256] = {0};
  TRY(r, tstor_storage_new(r->ctx, d->dev, sizeof buf, &m), "allocating");
  TRY(r, conf_host_storage(r, buf, sizeof buf, &h), "wrapping host memory");
  TRY(r, tstor_storage_copy(m, h), "copying host bytes to a sizes-only device");
  int rc = tstor_storage_copy(h, m);
  EXPECT(r, rc != 0, "copying out of a sizes-only device succeeded");
  EXPECT(r, tstor_last_error()[0] != '\0', "the refusal has no message");
  conf_notef(r, "sizes only: copying out refused with %s", tstor_err_name(rc));
out:
  tstor_storage_release(h);
  tstor_storage_release(m);
  conf_end(r);
}

void conf_section_copy(conf_run *r) {
  if (conf_setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    if (!d->has_data) {
      check_no_data_copies(r, d);
      continue;
    }
    check_host_round_trips(r, d);
    conf_begin(r, "same device", d->label);
    device_copy(r, d, d->dev);
    conf_end(r);
    if (d->first) {
      conf_begin(r, "across devices", d->label);
      if (d->count < 2) {
        conf_skipf(r, "one device");
      } else {
        tstor_device last = {d->dev.type, d->count - 1};
        device_copy(r, d, last);
        conf_notef(r, "to index %d", d->count - 1);
      }
      conf_end(r);
    }
    check_clone_and_to(r, d);
    check_batch(r, d);
  }
  conf_teardown(r);
}
