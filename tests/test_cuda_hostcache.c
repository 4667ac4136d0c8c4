/* The cuda backend's caching pinned host allocator (backends/cuda/host_cache.c),
 * over a simulated device: rounding without powers of two for large blocks,
 * reuse, blocks held back while an asynchronous copy uses them, out of memory
 * and retry, caching off. Runs on every machine. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fake_device.h"
#include "host_cache.h"

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

#define ck_ok(expr)                                                                     \
  do {                                                                                  \
    int ck_rc_ = (expr);                                                                \
    ck_assert_msg(ck_rc_ == 0, "%s failed: %d (%s)", #expr, ck_rc_, fake_last_error()); \
  } while (0)

static fake_device dev;
static tstor__hostcache *cache;

static void open_cache(size_t capacity, int caching) {
  fake_init(&dev, capacity);
  tstor__raw_device raw = fake_raw(&dev);
  raw.synchronize = NULL; /* host memory: the cache waits on events only */
  ck_ok(tstor__hostcache_create(&raw, "cuda-pinned", caching, &cache));
}

static void close_cache(void) {
  tstor__hostcache_destroy(cache);
  cache = NULL;
  ck_assert_int_eq(dev.bad_frees, 0);
  ck_assert_int_eq(dev.live_events, 0);
  ck_assert_int_eq(fake_fini(&dev), 0);
}

typedef struct pinned {
  void *ptr, *handle;
} pinned;

static pinned get(size_t n) {
  pinned p = {NULL, NULL};
  ck_ok(tstor__hostcache_alloc(cache, n, &p.ptr, &p.handle));
  return p;
}

static void put(pinned p) { tstor__hostcache_free(cache, p.ptr, p.handle); }

static tstor_stats stats(void) {
  tstor_stats s = TSTOR_STATS_INIT;
  tstor__hostcache_stats(cache, &s);
  return s;
}

START_TEST(rounding_keeps_large_blocks_near_their_size) {
  ck_assert_uint_eq(tstor__hostcache_round(0), 0);
  ck_assert_uint_eq(tstor__hostcache_round(1), 512);
  ck_assert_uint_eq(tstor__hostcache_round(600), 1024);
  ck_assert_uint_eq(tstor__hostcache_round(300 * KiB), 512 * KiB);
  ck_assert_uint_eq(tstor__hostcache_round(MiB), MiB);
  ck_assert_uint_eq(tstor__hostcache_round(MiB + 1), 2 * MiB);
  /* 257 MiB pins 258 MiB, not the 512 MiB a power of two would. */
  ck_assert_uint_eq(tstor__hostcache_round(257 * MiB), 258 * MiB);
  ck_assert_uint_eq(tstor__hostcache_round(SIZE_MAX), SIZE_MAX);
}
END_TEST

START_TEST(zero_bytes_is_null) {
  open_cache(64 * MiB, 1);
  pinned p = get(0);
  ck_assert_ptr_null(p.ptr);
  put(p);
  ck_assert_int_eq(dev.allocs, 0);
  ck_assert_uint_eq(stats().alloc_count, 0);
  close_cache();
}
END_TEST

START_TEST(freed_block_is_reused) {
  open_cache(64 * MiB, 1);
  pinned a = get(300 * KiB);
  put(a);
  pinned b = get(400 * KiB); /* same 512 KiB class */
  ck_assert_ptr_eq(b.ptr, a.ptr);
  ck_assert_int_eq(dev.allocs, 1);
  tstor_stats s = stats();
  ck_assert_uint_eq(s.cache_hits, 1);
  ck_assert_uint_eq(s.allocated, 400 * KiB);
  ck_assert_uint_eq(s.active, 512 * KiB);
  ck_assert_uint_eq(s.reserved, 512 * KiB);
  put(b);
  s = stats();
  ck_assert_uint_eq(s.allocated, 0);
  ck_assert_uint_eq(s.active, 0);
  ck_assert_uint_eq(s.reserved, 512 * KiB);
  ck_assert_uint_eq(s.alloc_count, 2);
  ck_assert_uint_eq(s.free_count, 2);
  close_cache();
}
END_TEST

START_TEST(much_larger_block_is_not_handed_out) {
  open_cache(256 * MiB, 1);
  pinned big = get(64 * MiB);
  put(big);
  pinned small = get(MiB);
  ck_assert_ptr_ne(small.ptr, big.ptr);
  pinned near = get(56 * MiB); /* 64 is within a quarter of 56 */
  ck_assert_ptr_eq(near.ptr, big.ptr);
  put(small);
  put(near);
  close_cache();
}
END_TEST

START_TEST(contains_knows_its_blocks) {
  open_cache(64 * MiB, 1);
  pinned a = get(4 * KiB);
  ck_assert_int_eq(tstor__hostcache_contains(cache, a.ptr, 4 * KiB), 1);
  ck_assert_int_eq(tstor__hostcache_contains(cache, (char *)a.ptr + 100, 100), 1);
  ck_assert_int_eq(tstor__hostcache_contains(cache, (char *)a.ptr + 100, 4 * KiB), 0);
  ck_assert_int_eq(tstor__hostcache_contains(cache, (char *)a.ptr - 1, 1), 0);
  ck_assert_int_eq(tstor__hostcache_contains(cache, NULL, 0), 0);
  int local;
  ck_assert_int_eq(tstor__hostcache_contains(cache, &local, sizeof local), 0);
  put(a);
  ck_assert_int_eq(tstor__hostcache_contains(cache, a.ptr, 1), 0); /* cached, not in use */
  close_cache();
}
END_TEST

START_TEST(block_in_use_by_a_copy_is_not_reused) {
  open_cache(64 * MiB, 1);
  fake_stream s = {0, 0};
  pinned a = get(MiB);
  fake_queue(&dev, &s); /* an asynchronous copy from a */
  ck_ok(tstor__hostcache_record_use(cache, (char *)a.ptr + 64, &s));
  put(a);
  tstor_stats st = stats();
  ck_assert_uint_eq(st.allocated, 0);
  ck_assert_uint_eq(st.active, MiB); /* the copy still reads it */
  pinned b = get(MiB);
  ck_assert_ptr_ne(b.ptr, a.ptr);
  fake_finish(&dev, &s);
  pinned c = get(MiB);
  ck_assert_ptr_eq(c.ptr, a.ptr);
  ck_assert_int_eq(dev.live_events, 0);
  put(b);
  put(c);
  close_cache();
}
END_TEST

START_TEST(copies_finished_before_free_do_not_hold_the_block) {
  open_cache(64 * MiB, 1);
  fake_stream s = {0, 0};
  pinned a = get(MiB);
  fake_queue(&dev, &s);
  ck_ok(tstor__hostcache_record_use(cache, a.ptr, &s));
  fake_finish(&dev, &s);
  put(a);
  ck_assert_int_eq(dev.live_events, 0);
  pinned b = get(MiB);
  ck_assert_ptr_eq(b.ptr, a.ptr);
  put(b);
  close_cache();
}
END_TEST

START_TEST(one_event_per_stream_is_kept) {
  open_cache(64 * MiB, 1);
  fake_stream s1 = {0, 0}, s2 = {0, 0};
  pinned a = get(MiB);
  for (int i = 0; i < 100; i++) {
    fake_queue(&dev, &s1);
    ck_ok(tstor__hostcache_record_use(cache, a.ptr, &s1));
  }
  ck_assert_int_eq(dev.live_events, 1);
  fake_queue(&dev, &s2);
  ck_ok(tstor__hostcache_record_use(cache, a.ptr, &s2));
  ck_assert_int_eq(dev.live_events, 2);
  fake_finish(&dev, &s1);
  put(a); /* s2's copy is still running */
  ck_assert_int_eq(dev.live_events, 1);
  pinned b = get(MiB);
  ck_assert_ptr_ne(b.ptr, a.ptr);
  fake_finish(&dev, &s2);
  put(b);
  pinned c = get(MiB);
  ck_assert_ptr_eq(c.ptr, a.ptr);
  put(c);
  close_cache();
}
END_TEST

START_TEST(record_use_of_foreign_memory_is_a_no_op) {
  open_cache(64 * MiB, 1);
  fake_stream s = {0, 0};
  char local[64];
  ck_ok(tstor__hostcache_record_use(cache, local, &s));
  ck_ok(tstor__hostcache_record_use(cache, NULL, &s));
  ck_assert_int_eq(dev.live_events, 0);
  close_cache();
}
END_TEST

START_TEST(record_use_failure_is_reported) {
  open_cache(64 * MiB, 1);
  fake_stream s = {0, 0};
  pinned a = get(MiB);
  dev.fail_event_record = TSTOR_EBACKEND;
  ck_assert_int_eq(tstor__hostcache_record_use(cache, a.ptr, &s), TSTOR_EBACKEND);
  dev.fail_event_record = 0;
  put(a);
  pinned b = get(MiB);
  ck_assert_ptr_eq(b.ptr, a.ptr);
  put(b);
  close_cache();
}
END_TEST

START_TEST(forgotten_stream_drops_its_events) {
  open_cache(64 * MiB, 1);
  fake_stream s = {0, 0};
  pinned a = get(MiB);
  fake_queue(&dev, &s);
  ck_ok(tstor__hostcache_record_use(cache, a.ptr, &s));
  put(a);
  fake_finish(&dev, &s); /* the stream was synchronised before it is destroyed */
  tstor__hostcache_forget_stream(cache, &s);
  ck_assert_int_eq(dev.live_events, 0);
  ck_assert_uint_eq(stats().active, 0);
  close_cache();
}
END_TEST

START_TEST(oom_frees_the_cache_and_retries) {
  open_cache(64 * MiB, 1);
  pinned a = get(40 * MiB);
  put(a);
  pinned b = get(50 * MiB);
  tstor_stats s = stats();
  ck_assert_uint_eq(s.retries, 1);
  ck_assert_uint_eq(s.reserved, 50 * MiB);
  ck_assert_int_eq(dev.frees, 1);
  put(b);
  close_cache();
}
END_TEST

START_TEST(oom_waits_for_copies_then_retries) {
  open_cache(64 * MiB, 1);
  fake_stream s = {0, 0};
  pinned a = get(40 * MiB);
  fake_queue(&dev, &s);
  ck_ok(tstor__hostcache_record_use(cache, a.ptr, &s));
  put(a);
  pinned b = get(50 * MiB);
  ck_assert_uint_eq(stats().retries, 1);
  ck_assert_int_eq(dev.live_events, 0);
  put(b);
  close_cache();
}
END_TEST

START_TEST(oom_message_and_state) {
  open_cache(64 * MiB, 1);
  pinned held = get(30 * MiB);
  void *p = (void *)1, *h = (void *)1;
  ck_assert_int_eq(tstor__hostcache_alloc(cache, 40 * MiB, &p, &h), TSTOR_ENOMEM);
  ck_assert_ptr_null(p);
  ck_assert_ptr_null(h);
  const char *msg = fake_last_error();
  ck_assert_msg(strstr(msg, "cuda-pinned") && strstr(msg, "40.00 MiB") &&
                    strstr(msg, "30.00 MiB allocated") && strstr(msg, "of 64.00 MiB"),
                "message: %s", msg);
  ck_assert_int_eq(tstor__hostcache_alloc(cache, SIZE_MAX, &p, &h), TSTOR_ENOMEM);
  tstor_stats s = stats();
  ck_assert_uint_eq(s.oom_count, 2);
  ck_assert_uint_eq(s.allocated, 30 * MiB);
  pinned ok = get(20 * MiB);
  put(ok);
  put(held);
  close_cache();
}
END_TEST

START_TEST(device_failure_is_passed_on) {
  open_cache(64 * MiB, 1);
  dev.fail_alloc = TSTOR_EBACKEND;
  void *p, *h;
  ck_assert_int_eq(tstor__hostcache_alloc(cache, MiB, &p, &h), TSTOR_EBACKEND);
  ck_assert_uint_eq(stats().oom_count, 0);
  ck_assert_uint_eq(stats().reserved, 0);
  dev.fail_alloc = 0;
  close_cache();
}
END_TEST

START_TEST(empty_cache_returns_free_blocks_only) {
  open_cache(64 * MiB, 1);
  fake_stream s = {0, 0};
  pinned a = get(MiB), b = get(2 * MiB), c = get(4 * MiB);
  fake_queue(&dev, &s);
  ck_ok(tstor__hostcache_record_use(cache, b.ptr, &s));
  put(a);
  put(b); /* pending */
  ck_ok(tstor__hostcache_empty(cache));
  ck_assert_uint_eq(stats().reserved, 6 * MiB);
  fake_finish(&dev, &s);
  ck_ok(tstor__hostcache_empty(cache));
  ck_assert_uint_eq(stats().reserved, 4 * MiB);
  put(c);
  ck_ok(tstor__hostcache_empty(cache));
  tstor_stats st = stats();
  ck_assert_uint_eq(st.reserved, 0);
  ck_assert_uint_eq(st.peak_reserved, 7 * MiB);
  tstor__hostcache_reset_peak(cache);
  ck_assert_uint_eq(stats().peak_reserved, 0);
  close_cache();
}
END_TEST

START_TEST(caching_off_pins_and_unpins_every_time) {
  open_cache(64 * MiB, 0);
  fake_stream s = {0, 0};
  pinned a = get(1000);
  ck_assert_uint_eq(stats().reserved, 1000);
  ck_assert_int_eq(tstor__hostcache_contains(cache, a.ptr, 1000), 1);
  fake_queue(&dev, &s);
  ck_ok(tstor__hostcache_record_use(cache, a.ptr, &s));
  put(a); /* waits for the copy, then unpins */
  ck_assert_int_eq(dev.frees, 1);
  ck_assert_uint_eq(s.done, s.queued);
  pinned b = get(1000);
  put(b);
  ck_assert_int_eq(dev.allocs, 2);
  tstor_stats st = stats();
  ck_assert_uint_eq(st.reserved, 0);
  ck_assert_uint_eq(st.cache_hits, 0);
  close_cache();
}
END_TEST

/* Random use with copies on two streams finishing at random. */
START_TEST(random_workload_balances) {
  open_cache(512 * MiB, 1);
  fake_stream st[2] = {{0, 0}, {0, 0}};
  enum { N = 32 };
  pinned live[N];
  memset(live, 0, sizeof live);
  unsigned seed = 99;
  for (int step = 0; step < 20000; step++) {
    seed = seed * 1103515245u + 12345u;
    unsigned r = seed >> 8;
    int slot = (int)(r % N);
    fake_stream *s = &st[(r >> 5) & 1];
    if (live[slot].ptr) {
      if ((r >> 7) % 3 == 0) {
        fake_queue(&dev, s);
        ck_ok(tstor__hostcache_record_use(cache, live[slot].ptr, s));
      }
      put(live[slot]);
      live[slot].ptr = NULL;
    } else {
      static const size_t sizes[] = {1, 700, 64 * 1024, MiB, 3 * MiB, 17 * MiB};
      size_t n = sizes[(r >> 9) % 6] + (r >> 12) % 1000;
      int rc = tstor__hostcache_alloc(cache, n, &live[slot].ptr, &live[slot].handle);
      ck_assert_msg(rc == 0 || rc == TSTOR_ENOMEM, "rc %d", rc);
    }
    if ((r >> 20) % 4 == 0) fake_finish(&dev, &st[(r >> 22) & 1]);
  }
  for (int i = 0; i < N; i++)
    if (live[i].ptr) put(live[i]);
  fake_finish(&dev, &st[0]);
  fake_finish(&dev, &st[1]);
  ck_ok(tstor__hostcache_empty(cache));
  tstor_stats s = stats();
  ck_assert_uint_eq(s.allocated, 0);
  ck_assert_uint_eq(s.active, 0);
  ck_assert_uint_eq(s.reserved, 0);
  ck_assert_uint_eq(s.alloc_count, s.free_count);
  close_cache();
}
END_TEST

static Suite *hostcache_suite(void) {
  Suite *s = suite_create("cuda pinned host cache");
  TCase *t = tcase_create("blocks");
  tcase_add_test(t, rounding_keeps_large_blocks_near_their_size);
  tcase_add_test(t, zero_bytes_is_null);
  tcase_add_test(t, freed_block_is_reused);
  tcase_add_test(t, much_larger_block_is_not_handed_out);
  tcase_add_test(t, contains_knows_its_blocks);
  suite_add_tcase(s, t);
  t = tcase_create("copies in flight");
  tcase_add_test(t, block_in_use_by_a_copy_is_not_reused);
  tcase_add_test(t, copies_finished_before_free_do_not_hold_the_block);
  tcase_add_test(t, one_event_per_stream_is_kept);
  tcase_add_test(t, record_use_of_foreign_memory_is_a_no_op);
  tcase_add_test(t, record_use_failure_is_reported);
  tcase_add_test(t, forgotten_stream_drops_its_events);
  suite_add_tcase(s, t);
  t = tcase_create("out of memory");
  tcase_add_test(t, oom_frees_the_cache_and_retries);
  tcase_add_test(t, oom_waits_for_copies_then_retries);
  tcase_add_test(t, oom_message_and_state);
  tcase_add_test(t, device_failure_is_passed_on);
  tcase_add_test(t, empty_cache_returns_free_blocks_only);
  tcase_add_test(t, caching_off_pins_and_unpins_every_time);
  suite_add_tcase(s, t);
  t = tcase_create("stress");
  tcase_set_timeout(t, 60);
  tcase_add_test(t, random_workload_balances);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(hostcache_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
