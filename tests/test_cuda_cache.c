/* The cuda backend's caching device allocator (backends/cuda/block_cache.c),
 * driven over a simulated device: pools, best fit, split and merge, stream
 * ownership, record_stream, out of memory and retry, the config keys and the
 * statistics. Runs on every machine; the GPU suite (test_cuda) checks the same
 * behaviour on real hardware. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block_cache.h"
#include "cuda_fake_device.h"

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

#define ck_ok(expr)                                                                     \
  do {                                                                                  \
    int ck_rc_ = (expr);                                                                \
    ck_assert_msg(ck_rc_ == 0, "%s failed: %d (%s)", #expr, ck_rc_, fake_last_error()); \
  } while (0)

#define ck_consistent(c) \
  ck_assert_msg(tstor__cache_check(c) == 0, "cache check failed: %d", tstor__cache_check(c))

static fake_device dev;
static tstor__cache *cache;

static tstor__cache_config default_config(void) {
  tstor__cache_config cfg = {"cuda:0", 1, SIZE_MAX, 0.0, 0};
  return cfg;
}

static void open_cache(size_t capacity, tstor__cache_config cfg) {
  fake_init(&dev, capacity);
  tstor__raw_device raw = fake_raw(&dev);
  ck_ok(tstor__cache_create(&raw, &cfg, &cache));
}

static void close_cache(void) {
  tstor__cache_destroy(cache);
  cache = NULL;
  ck_assert_int_eq(dev.bad_frees, 0);
  ck_assert_int_eq(dev.live_events, 0);
  ck_assert_int_eq(fake_fini(&dev), 0); /* every segment went back */
}

typedef struct alloc {
  void *ptr, *handle;
  size_t n;
} alloc;

static alloc get(size_t n, void *stream) {
  alloc a = {NULL, NULL, n};
  ck_ok(tstor__cache_alloc(cache, n, stream, &a.ptr, &a.handle));
  return a;
}

static void put(alloc a) { tstor__cache_free(cache, a.ptr, a.n, a.handle); }

static tstor_stats stats(void) {
  tstor_stats s = TSTOR_STATS_INIT;
  tstor__cache_stats(cache, &s);
  return s;
}

/* ------------------------------------------------------------- sizing */

START_TEST(rounds_to_512_bytes) {
  open_cache(64 * MiB, default_config());
  ck_assert_uint_eq(tstor__cache_round(cache, 0), 0);
  ck_assert_uint_eq(tstor__cache_round(cache, 1), 512);
  ck_assert_uint_eq(tstor__cache_round(cache, 512), 512);
  ck_assert_uint_eq(tstor__cache_round(cache, 513), 1024);
  ck_assert_uint_eq(tstor__cache_round(cache, 3 * MiB + 1), 3 * MiB + 512);
  ck_assert_uint_eq(tstor__cache_round(cache, SIZE_MAX), SIZE_MAX);
  close_cache();
}
END_TEST

START_TEST(roundup_power2_divisions) {
  tstor__cache_config cfg = default_config();
  cfg.roundup_divisions = 4;
  open_cache(64 * MiB, cfg);
  /* Between 1 MiB and 2 MiB the steps are 256 KiB. */
  ck_assert_uint_eq(tstor__cache_round(cache, MiB + 1), MiB + 256 * KiB);
  ck_assert_uint_eq(tstor__cache_round(cache, MiB + 300 * KiB), MiB + 512 * KiB);
  ck_assert_uint_eq(tstor__cache_round(cache, 2 * MiB), 2 * MiB); /* powers of two stay */
  /* Small requests (up to 512 * divisions) keep 512-byte rounding. */
  ck_assert_uint_eq(tstor__cache_round(cache, 1500), 1536);
  close_cache();
}
END_TEST

START_TEST(rejects_bad_config) {
  fake_init(&dev, MiB);
  tstor__raw_device raw = fake_raw(&dev);
  tstor__cache_config cfg = default_config();
  cfg.roundup_divisions = 3;
  ck_assert_int_eq(tstor__cache_create(&raw, &cfg, &cache), TSTOR_EINVAL);
  ck_assert_ptr_null(cache);
  ck_assert_ptr_nonnull(strstr(fake_last_error(), "power of two"));
  cfg = default_config();
  cfg.gc_threshold = 1.5;
  ck_assert_int_eq(tstor__cache_create(&raw, &cfg, &cache), TSTOR_EINVAL);
  ck_assert_ptr_nonnull(strstr(fake_last_error(), "garbage_collection_threshold"));
  ck_assert_int_eq(fake_fini(&dev), 0);
}
END_TEST

/* -------------------------------------------------------------- pools */

START_TEST(zero_bytes_is_null_and_free) {
  open_cache(64 * MiB, default_config());
  alloc a = get(0, NULL);
  ck_assert_ptr_null(a.ptr);
  put(a);
  tstor_stats s = stats();
  ck_assert_uint_eq(s.reserved, 0);
  ck_assert_uint_eq(s.alloc_count, 0);
  ck_assert_int_eq(dev.allocs, 0);
  close_cache();
}
END_TEST

START_TEST(small_requests_share_a_2mib_segment) {
  open_cache(64 * MiB, default_config());
  alloc a = get(1000, NULL), b = get(1000, NULL), c = get(100 * KiB, NULL);
  ck_assert_int_eq(dev.allocs, 1);
  ck_assert_uint_eq(stats().reserved, 2 * MiB);
  ck_assert_ptr_eq((char *)b.ptr, (char *)a.ptr + 1024);
  ck_assert_ptr_eq((char *)c.ptr, (char *)b.ptr + 1024);
  tstor_stats s = stats();
  ck_assert_uint_eq(s.allocated, 1000 + 1000 + 100 * KiB);
  ck_assert_uint_eq(s.active, 1024 + 1024 + 100 * KiB);
  ck_consistent(cache);
  put(a);
  put(b);
  put(c);
  ck_consistent(cache);
  s = stats();
  ck_assert_uint_eq(s.allocated, 0);
  ck_assert_uint_eq(s.active, 0);
  ck_assert_uint_eq(s.reserved, 2 * MiB); /* cached, not returned */
  ck_assert_uint_eq(s.alloc_count, 3);
  ck_assert_uint_eq(s.free_count, 3);
  close_cache();
}
END_TEST

START_TEST(large_requests_use_the_large_pool) {
  open_cache(256 * MiB, default_config());
  alloc a = get(5 * MiB, NULL); /* under 10 MiB: a 20 MiB segment */
  alloc b = get(5 * MiB, NULL); /* from the same segment */
  ck_assert_int_eq(dev.allocs, 1);
  ck_assert_uint_eq(stats().reserved, 20 * MiB);
  ck_assert_ptr_eq((char *)b.ptr, (char *)a.ptr + 5 * MiB);
  alloc c = get(12 * MiB + 1, NULL); /* 10 MiB and up: rounded to 2 MiB */
  ck_assert_int_eq(dev.allocs, 2);
  ck_assert_uint_eq(stats().reserved, 20 * MiB + 14 * MiB);
  /* A 1 MiB request is small: it never takes from the large pool. */
  alloc d = get(MiB, NULL);
  ck_assert_int_eq(dev.allocs, 3);
  ck_consistent(cache);
  put(a);
  put(b);
  put(c);
  put(d);
  close_cache();
}
END_TEST

START_TEST(reuses_freed_block) {
  open_cache(64 * MiB, default_config());
  alloc a = get(4000, NULL);
  put(a);
  alloc b = get(4000, NULL);
  ck_assert_ptr_eq(b.ptr, a.ptr);
  ck_assert_int_eq(dev.allocs, 1);
  ck_assert_uint_eq(stats().cache_hits, 1);
  put(b);
  close_cache();
}
END_TEST

START_TEST(best_fit_takes_the_smallest_block_that_fits) {
  open_cache(64 * MiB, default_config());
  alloc big = get(64 * KiB, NULL), sep1 = get(512, NULL);
  alloc small = get(8 * KiB, NULL), sep2 = get(512, NULL);
  alloc mid = get(16 * KiB, NULL), sep3 = get(512, NULL);
  put(big);
  put(small);
  put(mid);
  alloc x = get(6 * KiB, NULL);
  ck_assert_ptr_eq(x.ptr, small.ptr);
  alloc y = get(10 * KiB, NULL);
  ck_assert_ptr_eq(y.ptr, mid.ptr);
  ck_consistent(cache);
  put(x);
  put(y);
  put(sep1);
  put(sep2);
  put(sep3);
  ck_consistent(cache);
  close_cache();
}
END_TEST

START_TEST(free_neighbours_merge) {
  open_cache(64 * MiB, default_config());
  alloc a = get(MiB / 2, NULL), b = get(MiB / 4, NULL), c = get(MiB / 4, NULL);
  put(a);
  put(c);
  ck_consistent(cache);
  put(b); /* a, b, c and the tail merge into the whole segment */
  ck_consistent(cache);
  alloc whole = get(MiB, NULL); /* needs a block as large as a + b + c */
  ck_assert_ptr_eq(whole.ptr, a.ptr);
  ck_assert_int_eq(dev.allocs, 1);
  put(whole);
  ck_ok(tstor__cache_empty(cache));
  ck_assert_uint_eq(stats().reserved, 0);
  ck_assert_int_eq(dev.frees, 1);
  close_cache();
}
END_TEST

START_TEST(large_split_keeps_the_rest_only_when_over_1mib) {
  open_cache(256 * MiB, default_config());
  alloc a = get(12 * MiB, NULL);
  put(a);
  /* 12 MiB - 11.5 MiB leaves 512 KiB: not worth a block in the large pool. */
  alloc b = get(11 * MiB + 512 * KiB, NULL);
  ck_assert_uint_eq(stats().active, 12 * MiB);
  put(b);
  /* 12 MiB - 8 MiB leaves 4 MiB: split. */
  alloc c = get(8 * MiB, NULL);
  ck_assert_uint_eq(stats().active, 8 * MiB);
  alloc d = get(4 * MiB, NULL);
  ck_assert_ptr_eq((char *)d.ptr, (char *)c.ptr + 8 * MiB);
  ck_assert_int_eq(dev.allocs, 1);
  put(c);
  put(d);
  ck_consistent(cache);
  close_cache();
}
END_TEST

/* ------------------------------------------------------------- streams */

START_TEST(block_stays_with_its_stream_while_the_stream_is_busy) {
  open_cache(64 * MiB, default_config());
  fake_stream s1 = {0, 0}, s2 = {0, 0};
  fake_add_stream(&dev, &s1);
  fake_add_stream(&dev, &s2);
  alloc a = get(MiB, &s1);
  fake_queue(&dev, &s1); /* a kernel on s1 still uses a */
  put(a);
  alloc b = get(MiB, &s2);
  ck_assert_ptr_ne(b.ptr, a.ptr);
  ck_assert_int_eq(dev.allocs, 2);
  /* The owning stream itself may reuse it at once: its work is ordered. */
  alloc c = get(MiB, &s1);
  ck_assert_ptr_eq(c.ptr, a.ptr);
  put(b);
  put(c);
  ck_consistent(cache);
  close_cache();
}
END_TEST

START_TEST(another_stream_reuses_a_block_once_its_owner_is_done) {
  open_cache(64 * MiB, default_config());
  fake_stream s1 = {0, 0}, s2 = {0, 0};
  fake_add_stream(&dev, &s1);
  fake_add_stream(&dev, &s2);
  alloc a = get(MiB, &s1);
  fake_queue(&dev, &s1);
  put(a);
  fake_finish(&dev, &s1);
  alloc b = get(MiB, &s2);
  ck_assert_ptr_eq(b.ptr, a.ptr);
  ck_assert_int_eq(dev.allocs, 1);
  ck_assert_uint_eq(stats().cache_hits, 1);
  ck_assert_int_eq(dev.live_events, 0); /* the probe event was released */
  put(b);
  ck_consistent(cache);
  /* b now belongs to s2: s1 must wait for s2. */
  fake_queue(&dev, &s2);
  alloc c = get(MiB, &s1);
  ck_assert_ptr_ne(c.ptr, a.ptr);
  put(c);
  ck_consistent(cache);
  close_cache();
}
END_TEST

START_TEST(record_stream_defers_reuse_until_the_other_stream_is_done) {
  open_cache(64 * MiB, default_config());
  fake_stream side = {0, 0};
  fake_add_stream(&dev, &side);
  alloc a = get(256 * KiB, NULL);
  ck_ok(tstor__cache_record_stream(cache, a.handle, &side));
  ck_ok(tstor__cache_record_stream(cache, a.handle, &side)); /* twice is once */
  ck_ok(tstor__cache_record_stream(cache, a.handle, NULL));  /* the owner: nothing */
  fake_queue(&dev, &side);
  put(a);
  ck_assert_int_eq(dev.live_events, 1);
  tstor_stats s = stats();
  ck_assert_uint_eq(s.allocated, 0);
  ck_assert_uint_eq(s.active, 256 * KiB); /* still in use by the side stream */
  alloc b = get(256 * KiB, NULL);
  ck_assert_ptr_ne(b.ptr, a.ptr);
  fake_finish(&dev, &side);
  alloc c = get(256 * KiB, NULL);
  ck_assert_ptr_eq(c.ptr, a.ptr);
  ck_assert_int_eq(dev.live_events, 0);
  put(b);
  put(c);
  ck_consistent(cache);
  close_cache();
}
END_TEST

START_TEST(record_stream_without_events_waits_for_the_device) {
  open_cache(64 * MiB, default_config());
  fake_stream side = {0, 0};
  fake_add_stream(&dev, &side);
  alloc a = get(4096, NULL);
  ck_ok(tstor__cache_record_stream(cache, a.handle, &side));
  fake_queue(&dev, &side);
  dev.fail_event_record = TSTOR_EBACKEND;
  put(a);
  dev.fail_event_record = 0;
  ck_assert_int_eq(dev.syncs, 1);
  ck_assert_uint_eq(stats().active, 0);
  alloc b = get(4096, NULL);
  ck_assert_ptr_eq(b.ptr, a.ptr);
  put(b);
  close_cache();
}
END_TEST

START_TEST(record_stream_on_a_freed_block_fails) {
  open_cache(64 * MiB, default_config());
  fake_stream side = {0, 0};
  alloc a = get(4096, NULL);
  alloc keep = get(4096, NULL); /* a's block stays a separate, free block */
  put(a);
  ck_assert_int_eq(tstor__cache_record_stream(cache, a.handle, &side), TSTOR_EINVAL);
  ck_assert_ptr_nonnull(strstr(fake_last_error(), "not allocated"));
  put(keep);
  ck_consistent(cache);
  close_cache();
}
END_TEST

START_TEST(forgotten_stream_gives_its_blocks_to_the_default_stream) {
  open_cache(64 * MiB, default_config());
  fake_stream s1 = {0, 0};
  fake_add_stream(&dev, &s1);
  alloc a = get(MiB, &s1), live = get(MiB / 2, &s1), other = get(4096, NULL);
  ck_ok(tstor__cache_record_stream(cache, other.handle, &s1));
  put(a);
  fake_queue(&dev, &s1);
  fake_finish(&dev, &s1);
  tstor__cache_forget_stream(cache, &s1);
  ck_consistent(cache);
  fake_queue(&dev, NULL); /* the default stream is busy: its own blocks are fine */
  alloc b = get(MiB, NULL);
  ck_assert_ptr_eq(b.ptr, a.ptr);
  put(live); /* owned by the gone stream: returns to the default one */
  put(other); /* s1 was dropped from its marks: freed at once */
  ck_assert_uint_eq(stats().active, 1024 * KiB);
  put(b);
  ck_consistent(cache);
  ck_ok(tstor__cache_empty(cache));
  ck_assert_uint_eq(stats().reserved, 0);
  close_cache();
}
END_TEST

/* ------------------------------------------------------- out of memory */

START_TEST(oom_frees_the_cache_and_retries) {
  open_cache(64 * MiB, default_config());
  alloc a = get(40 * MiB, NULL);
  put(a);
  ck_assert_uint_eq(stats().reserved, 40 * MiB);
  alloc b = get(50 * MiB, NULL); /* 40 + 50 > 64: only after returning the cache */
  tstor_stats s = stats();
  ck_assert_uint_eq(s.retries, 1);
  ck_assert_uint_eq(s.oom_count, 0);
  ck_assert_uint_eq(s.reserved, 50 * MiB);
  ck_assert_int_eq(dev.syncs, 1); /* it waited for the device before freeing */
  put(b);
  ck_consistent(cache);
  close_cache();
}
END_TEST

START_TEST(oom_waits_for_pending_blocks_before_giving_up) {
  open_cache(64 * MiB, default_config());
  fake_stream side = {0, 0};
  fake_add_stream(&dev, &side);
  alloc a = get(40 * MiB, NULL);
  ck_ok(tstor__cache_record_stream(cache, a.handle, &side));
  fake_queue(&dev, &side);
  put(a); /* pending on side */
  alloc b = get(50 * MiB, NULL);
  ck_assert_uint_eq(stats().retries, 1);
  ck_assert_int_eq(dev.live_events, 0);
  put(b);
  close_cache();
}
END_TEST

START_TEST(oom_message_gives_request_device_and_cache) {
  open_cache(64 * MiB, default_config());
  alloc held = get(30 * MiB, NULL);
  alloc cached = get(12 * MiB, NULL);
  put(cached);
  void *p = (void *)1, *h = (void *)1;
  ck_assert_int_eq(tstor__cache_alloc(cache, 40 * MiB, NULL, &p, &h), TSTOR_ENOMEM);
  ck_assert_ptr_null(p);
  ck_assert_ptr_null(h);
  const char *msg = fake_last_error();
  ck_assert_msg(strstr(msg, "cuda:0") && strstr(msg, "40.00 MiB") &&
                    strstr(msg, "41943040 bytes") && strstr(msg, "free of 64.00 MiB") &&
                    strstr(msg, "30.00 MiB allocated") && strstr(msg, "30.00 MiB reserved"),
                "message: %s", msg);
  tstor_stats s = stats();
  ck_assert_uint_eq(s.oom_count, 1);
  ck_assert_uint_eq(s.retries, 0);
  ck_assert_uint_eq(s.allocated, 30 * MiB);
  /* Everything still works. */
  alloc again = get(20 * MiB, NULL);
  put(again);
  put(held);
  ck_consistent(cache);
  close_cache();
}
END_TEST

START_TEST(impossible_request_keeps_the_cache) {
  open_cache(64 * MiB, default_config());
  alloc a = get(8 * MiB, NULL);
  put(a);
  void *p, *h;
  size_t pib = (size_t)1 << 50;
  ck_assert_int_eq(tstor__cache_alloc(cache, pib, NULL, &p, &h), TSTOR_ENOMEM);
  ck_assert_ptr_nonnull(strstr(fake_last_error(), "1.00 PiB"));
  ck_assert_int_eq(dev.syncs, 0);           /* the cache was not emptied for it */
  ck_assert_uint_eq(stats().reserved, 20 * MiB);
  ck_assert_int_eq(tstor__cache_alloc(cache, SIZE_MAX, NULL, &p, &h), TSTOR_ENOMEM);
  ck_assert_int_eq(tstor__cache_alloc(cache, SIZE_MAX - 511, NULL, &p, &h), TSTOR_ENOMEM);
  ck_assert_uint_eq(stats().oom_count, 3);
  alloc b = get(8 * MiB, NULL);
  ck_assert_ptr_eq(b.ptr, a.ptr);
  put(b);
  close_cache();
}
END_TEST

START_TEST(oom_without_mem_info_still_explains) {
  open_cache(8 * MiB, default_config());
  dev.no_mem_info = 1;
  void *p, *h;
  ck_assert_int_eq(tstor__cache_alloc(cache, 9 * MiB, NULL, &p, &h), TSTOR_ENOMEM);
  ck_assert_ptr_nonnull(strstr(fake_last_error(), "unknown"));
  close_cache();
}
END_TEST

START_TEST(device_failure_is_passed_on) {
  open_cache(64 * MiB, default_config());
  dev.fail_alloc = TSTOR_EBACKEND;
  void *p, *h;
  ck_assert_int_eq(tstor__cache_alloc(cache, 4096, NULL, &p, &h), TSTOR_EBACKEND);
  ck_assert_ptr_nonnull(strstr(fake_last_error(), "injected"));
  tstor_stats s = stats();
  ck_assert_uint_eq(s.reserved, 0);
  ck_assert_uint_eq(s.alloc_count, 0);
  ck_assert_uint_eq(s.oom_count, 0);
  dev.fail_alloc = 0;
  alloc a = get(4096, NULL);
  put(a);
  close_cache();
}
END_TEST

/* --------------------------------------------------------- config keys */

START_TEST(caching_off_goes_to_the_device_every_time) {
  tstor__cache_config cfg = default_config();
  cfg.caching = 0;
  open_cache(64 * MiB, cfg);
  alloc a = get(1000, NULL);
  tstor_stats s = stats();
  ck_assert_uint_eq(s.reserved, 1000);
  ck_assert_uint_eq(s.allocated, 1000);
  ck_ok(tstor__cache_record_stream(cache, a.handle, NULL));
  put(a);
  alloc b = get(1000, NULL);
  put(b);
  ck_assert_int_eq(dev.allocs, 2);
  ck_assert_int_eq(dev.frees, 2);
  s = stats();
  ck_assert_uint_eq(s.reserved, 0);
  ck_assert_uint_eq(s.cache_hits, 0);
  ck_assert_uint_eq(s.peak_reserved, 1000);
  void *p, *h;
  ck_assert_int_eq(tstor__cache_alloc(cache, 65 * MiB, NULL, &p, &h), TSTOR_ENOMEM);
  ck_assert_ptr_nonnull(strstr(fake_last_error(), "caching off"));
  close_cache();
}
END_TEST

START_TEST(max_split_size_keeps_big_blocks_whole) {
  tstor__cache_config cfg = default_config();
  cfg.max_split_size = 40 * MiB;
  open_cache(512 * MiB, cfg);
  alloc big = get(100 * MiB, NULL);
  put(big);
  /* A request under the limit never takes an oversize block. */
  alloc small = get(30 * MiB, NULL);
  ck_assert_ptr_ne(small.ptr, big.ptr);
  /* An oversize request takes one up to 20 MiB larger, unsplit. */
  alloc near = get(90 * MiB, NULL);
  ck_assert_ptr_eq(near.ptr, big.ptr);
  ck_assert_uint_eq(stats().active, 30 * MiB + 100 * MiB);
  put(near);
  alloc far = get(60 * MiB, NULL); /* 100 >= 60 + 20: not this one */
  ck_assert_ptr_ne(far.ptr, big.ptr);
  put(far);
  put(small);
  ck_consistent(cache);
  close_cache();
}
END_TEST

START_TEST(garbage_collection_returns_old_blocks_past_the_threshold) {
  tstor__cache_config cfg = default_config();
  cfg.gc_threshold = 0.5;
  open_cache(100 * MiB, cfg);
  alloc a = get(20 * MiB, NULL);
  alloc b = get(14 * MiB, NULL);
  put(a); /* older */
  put(b);
  ck_assert_uint_eq(stats().reserved, 34 * MiB);
  alloc c = get(26 * MiB, NULL); /* fits neither; 34 + 26 > 50: a goes (the oldest) */
  tstor_stats s = stats();
  ck_assert_uint_eq(s.reserved, 14 * MiB + 26 * MiB);
  ck_assert_uint_eq(s.retries, 0);
  ck_assert_int_eq(dev.frees, 1);
  ck_assert_int_eq(dev.syncs, 0);
  alloc d = get(14 * MiB, NULL);
  ck_assert_ptr_eq(d.ptr, b.ptr);
  put(c);
  put(d);
  close_cache();
}
END_TEST

/* ------------------------------------------------------------ statistics */

START_TEST(peaks_and_reset) {
  open_cache(64 * MiB, default_config());
  alloc a = get(3 * MiB, NULL);
  alloc b = get(MiB, NULL);
  put(a);
  tstor_stats s = stats();
  ck_assert_uint_eq(s.peak_allocated, 4 * MiB);
  ck_assert_uint_eq(s.peak_active, 4 * MiB);
  ck_assert_uint_eq(s.peak_reserved, 20 * MiB + 2 * MiB);
  tstor__cache_reset_peak(cache);
  s = stats();
  ck_assert_uint_eq(s.peak_allocated, MiB);
  ck_assert_uint_eq(s.peak_active, MiB);
  ck_assert_uint_eq(s.peak_reserved, s.reserved);
  put(b);
  ck_ok(tstor__cache_empty(cache));
  s = stats();
  ck_assert_uint_eq(s.reserved, 0);
  ck_assert_uint_eq(s.peak_reserved, 22 * MiB);
  close_cache();
}
END_TEST

/* ---------------------------------------------------------------- stress */

/* Random allocations and frees on three streams whose work completes at random,
 * with record_stream, checking the invariants after every step. */
START_TEST(random_workload_keeps_the_invariants) {
  open_cache(256 * MiB, default_config());
  fake_stream st[2] = {{0, 0}, {0, 0}};
  fake_add_stream(&dev, &st[0]);
  fake_add_stream(&dev, &st[1]);
  void *streams[3] = {NULL, &st[0], &st[1]};
  enum { N = 64 };
  alloc live[N];
  memset(live, 0, sizeof live);
  unsigned seed = 12345;
  for (int step = 0; step < 20000; step++) {
    seed = seed * 1103515245u + 12345u;
    unsigned r = seed >> 8;
    int slot = (int)(r % N);
    void *stream = streams[(r >> 6) % 3];
    if (live[slot].ptr) {
      if ((r >> 9) % 4 == 0)
        ck_ok(tstor__cache_record_stream(cache, live[slot].handle, streams[(r >> 11) % 3]));
      put(live[slot]);
      live[slot].ptr = NULL;
    } else {
      static const size_t sizes[] = {1, 511, 4096, 100 * 1024, MiB, 3 * MiB, 11 * MiB, 25 * MiB};
      size_t n = sizes[(r >> 12) % 8] + (r >> 16) % 4096;
      int rc = tstor__cache_alloc(cache, n, stream, &live[slot].ptr, &live[slot].handle);
      ck_assert_msg(rc == 0 || rc == TSTOR_ENOMEM, "rc %d", rc);
      live[slot].n = n;
    }
    if ((r >> 20) % 3 == 0) fake_queue(&dev, stream);
    if ((r >> 22) % 5 == 0) fake_finish(&dev, streams[(r >> 24) % 3]);
    if (step % 997 == 0) ck_ok(tstor__cache_empty(cache));
    ck_consistent(cache);
  }
  for (int i = 0; i < N; i++)
    if (live[i].ptr) put(live[i]);
  ck_ok(tstor__cache_empty(cache));
  tstor_stats s = stats();
  ck_assert_uint_eq(s.allocated, 0);
  ck_assert_uint_eq(s.active, 0);
  ck_assert_uint_eq(s.reserved, 0);
  ck_assert_uint_eq(s.alloc_count, s.free_count);
  close_cache();
}
END_TEST

typedef struct worker_arg {
  int id;
  int failures;
} worker_arg;

static void *worker(void *p) {
  worker_arg *w = p;
  unsigned seed = (unsigned)w->id * 7919u + 1;
  alloc mine[16];
  memset(mine, 0, sizeof mine);
  for (int i = 0; i < 5000; i++) {
    seed = seed * 1103515245u + 12345u;
    int slot = (int)((seed >> 8) % 16);
    if (mine[slot].ptr) {
      tstor__cache_free(cache, mine[slot].ptr, mine[slot].n, mine[slot].handle);
      mine[slot].ptr = NULL;
    } else {
      mine[slot].n = 512 + (seed >> 12) % (2 * MiB);
      if (tstor__cache_alloc(cache, mine[slot].n, NULL, &mine[slot].ptr, &mine[slot].handle))
        w->failures++;
    }
  }
  for (int i = 0; i < 16; i++)
    if (mine[i].ptr) tstor__cache_free(cache, mine[i].ptr, mine[i].n, mine[i].handle);
  return NULL;
}

START_TEST(threads_share_a_cache) {
  open_cache(1024 * MiB, default_config());
  pthread_t t[4];
  worker_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i].id = i;
    args[i].failures = 0;
    ck_assert_int_eq(pthread_create(&t[i], NULL, worker, &args[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    ck_assert_int_eq(args[i].failures, 0);
  }
  ck_consistent(cache);
  tstor_stats s = stats();
  ck_assert_uint_eq(s.allocated, 0);
  ck_assert_uint_eq(s.alloc_count, s.free_count);
  close_cache();
}
END_TEST

static Suite *cache_suite(void) {
  Suite *s = suite_create("cuda block cache");
  TCase *t = tcase_create("sizing");
  tcase_add_test(t, rounds_to_512_bytes);
  tcase_add_test(t, roundup_power2_divisions);
  tcase_add_test(t, rejects_bad_config);
  suite_add_tcase(s, t);
  t = tcase_create("pools");
  tcase_add_test(t, zero_bytes_is_null_and_free);
  tcase_add_test(t, small_requests_share_a_2mib_segment);
  tcase_add_test(t, large_requests_use_the_large_pool);
  tcase_add_test(t, reuses_freed_block);
  tcase_add_test(t, best_fit_takes_the_smallest_block_that_fits);
  tcase_add_test(t, free_neighbours_merge);
  tcase_add_test(t, large_split_keeps_the_rest_only_when_over_1mib);
  suite_add_tcase(s, t);
  t = tcase_create("streams");
  tcase_add_test(t, block_stays_with_its_stream_while_the_stream_is_busy);
  tcase_add_test(t, another_stream_reuses_a_block_once_its_owner_is_done);
  tcase_add_test(t, record_stream_defers_reuse_until_the_other_stream_is_done);
  tcase_add_test(t, record_stream_without_events_waits_for_the_device);
  tcase_add_test(t, record_stream_on_a_freed_block_fails);
  tcase_add_test(t, forgotten_stream_gives_its_blocks_to_the_default_stream);
  suite_add_tcase(s, t);
  t = tcase_create("out of memory");
  tcase_add_test(t, oom_frees_the_cache_and_retries);
  tcase_add_test(t, oom_waits_for_pending_blocks_before_giving_up);
  tcase_add_test(t, oom_message_gives_request_device_and_cache);
  tcase_add_test(t, impossible_request_keeps_the_cache);
  tcase_add_test(t, oom_without_mem_info_still_explains);
  tcase_add_test(t, device_failure_is_passed_on);
  suite_add_tcase(s, t);
  t = tcase_create("config");
  tcase_add_test(t, caching_off_goes_to_the_device_every_time);
  tcase_add_test(t, max_split_size_keeps_big_blocks_whole);
  tcase_add_test(t, garbage_collection_returns_old_blocks_past_the_threshold);
  suite_add_tcase(s, t);
  t = tcase_create("stats");
  tcase_add_test(t, peaks_and_reset);
  suite_add_tcase(s, t);
  t = tcase_create("stress");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, random_workload_keeps_the_invariants);
  tcase_add_test(t, threads_share_a_cache);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(cache_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
