/* The stats section: counts, peaks and empty_cache as the statistics
 * report them. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

static void check_stats_counts(conf_run *r, const conf_device *d) {
  conf_begin(r, "counts", d->label);
  const size_t sizes[] = {1, 1000, 65536, 3};
  tstor_storage *s[4] = {NULL};
  tstor_stats b = TSTOR_STATS_INIT, m = TSTOR_STATS_INIT, a = TSTOR_STATS_INIT;
  size_t sum = 0;
  TRY(r, conf_read_stats(r, d, &b), "reading statistics");
  for (int i = 0; i < 4; i++) {
    TRY(r, tstor_storage_new(r->ctx, d->dev, sizes[i], &s[i]), "allocating");
    sum += sizes[i];
  }
  TRY(r, conf_read_stats(r, d, &m), "reading statistics");
  if (m.allocated == b.allocated && m.alloc_count == b.alloc_count) {
    conf_skipf(r, "the backend keeps no statistics");
    goto out;
  }
  EXPECT(r, m.allocated >= b.allocated + sum, "allocated grew by %llu bytes for %zu allocated",
         (unsigned long long)(m.allocated - b.allocated), sum);
  /* A counter that does not move is not kept; --strict wants every one. */
  int strict = r->opt->strict;
  EXPECT(r, !strict || m.alloc_count != b.alloc_count,
         "alloc_count did not move for 4 allocations (--strict: every counter must be kept)");
  if (m.alloc_count != b.alloc_count)
    EXPECT(r, m.alloc_count == b.alloc_count + 4, "alloc_count grew by %llu for 4 allocations",
           (unsigned long long)(m.alloc_count - b.alloc_count));
  EXPECT(r, !strict || m.peak_allocated != 0,
         "peak_allocated is 0 with %llu bytes allocated (--strict: every peak must be kept)",
         (unsigned long long)m.allocated);
  if (m.peak_allocated) /* 0: not kept */
    EXPECT(r, m.peak_allocated >= m.allocated, "peak_allocated %llu < allocated %llu",
           (unsigned long long)m.peak_allocated, (unsigned long long)m.allocated);
  if (m.active) EXPECT(r, m.active >= m.allocated, "active %llu < allocated %llu",
                       (unsigned long long)m.active, (unsigned long long)m.allocated);
  if (m.reserved && m.active)
    EXPECT(r, m.reserved >= m.active, "reserved %llu < active %llu",
           (unsigned long long)m.reserved, (unsigned long long)m.active);
  for (int i = 0; i < 4; i++) {
    tstor_storage_release(s[i]);
    s[i] = NULL;
  }
  TRY(r, conf_read_stats(r, d, &a), "reading statistics");
  EXPECT(r, a.allocated == b.allocated, "allocated is %llu after freeing, %llu before allocating",
         (unsigned long long)a.allocated, (unsigned long long)b.allocated);
  EXPECT(r, !strict || a.free_count != m.free_count,
         "free_count did not move for 4 frees (--strict: every counter must be kept)");
  if (a.free_count != m.free_count)
    EXPECT(r, a.free_count == m.free_count + 4, "free_count grew by %llu for 4 frees",
           (unsigned long long)(a.free_count - m.free_count));
  conf_notef(r, "allocated +%llu bytes for %zu asked, then back",
        (unsigned long long)(m.allocated - b.allocated), sum);
out:
  for (int i = 0; i < 4; i++) tstor_storage_release(s[i]);
  conf_end(r);
}

static void check_stats_peak(conf_run *r, const conf_device *d) {
  conf_begin(r, "peak and reset", d->label);
  tstor_storage *s = NULL;
  tstor_stats b = TSTOR_STATS_INIT, a = TSTOR_STATS_INIT;
  TRY(r, conf_read_stats(r, d, &b), "reading statistics");
  TRY(r, tstor_storage_new(r->ctx, d->dev, 1 << 20, &s), "allocating 1 MiB");
  tstor_storage_release(s);
  s = NULL;
  TRY(r, conf_read_stats(r, d, &a), "reading statistics");
  if (a.peak_allocated == 0) {
    conf_skipf(r, "the backend keeps no peak");
    goto out;
  }
  EXPECT(r, a.peak_allocated >= b.allocated + (1 << 20),
         "peak_allocated is %llu after 1 MiB on top of %llu", (unsigned long long)a.peak_allocated,
         (unsigned long long)b.allocated);
  TRY(r, tstor_device_reset_peak(r->ctx, d->dev), "resetting the peak");
  TRY(r, conf_read_stats(r, d, &a), "reading statistics");
  EXPECT(r, a.peak_allocated == a.allocated, "after reset, peak_allocated %llu != allocated %llu",
         (unsigned long long)a.peak_allocated, (unsigned long long)a.allocated);
out:
  tstor_storage_release(s);
  conf_end(r);
}

static void check_stats_cache(conf_run *r, const conf_device *d) {
  conf_begin(r, "empty cache", d->label);
  tstor_storage *s = NULL;
  tstor_stats b = TSTOR_STATS_INIT, a = TSTOR_STATS_INIT;
  TRY(r, tstor_storage_new(r->ctx, d->dev, 12345, &s), "allocating");
  TRY(r, conf_read_stats(r, d, &b), "reading statistics");
  TRY(r, tstor_device_empty_cache(r->ctx, d->dev), "emptying the cache");
  TRY(r, conf_read_stats(r, d, &a), "reading statistics");
  EXPECT(r, a.allocated == b.allocated, "empty_cache changed allocated (%llu -> %llu)",
         (unsigned long long)b.allocated, (unsigned long long)a.allocated);
  if (a.reserved) EXPECT(r, a.reserved >= a.allocated, "reserved %llu < allocated %llu",
                         (unsigned long long)a.reserved, (unsigned long long)a.allocated);
out:
  tstor_storage_release(s);
  conf_end(r);
}

void conf_section_stats(conf_run *r) {
  if (conf_setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    conf_begin(r, "start at zero", r->devs[i].label);
    if (!r->devs[i].stats_ok)
      conf_failf(r, "statistics cannot be read");
    else if (r->devs[i].start_allocated != 0)
      conf_failf(r, "a fresh context shows %llu bytes allocated", r->devs[i].start_allocated);
    conf_end(r);
    check_stats_counts(r, &r->devs[i]);
    check_stats_peak(r, &r->devs[i]);
    check_stats_cache(r, &r->devs[i]);
  }
  conf_teardown(r);
}
