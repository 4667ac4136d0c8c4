/* The fill section: byte and pattern fills through views, bad patterns
 * refused. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

/* Fills `n` bytes at `offset` through a view with a pattern and checks them
 * and the bytes around them. */
static void fill_one(conf_run *r, const conf_device *d, size_t n, size_t offset,
                     const unsigned char *pat, size_t psize, unsigned seed) {
  size_t total = offset + n + GUARD;
  tstor_storage *buf = NULL, *view = NULL;
  unsigned char *guard = conf_xmalloc(total), *back = conf_xmalloc(total);
  conf_pattern(guard, total, seed);
  TRY(r, tstor_storage_new(r->ctx, d->dev, total, &buf), "allocating %zu bytes", total);
  TRY(r, conf_upload(r, buf, guard), "writing %zu bytes", total);
  TRY(r, tstor_storage_view(buf, offset, n, &view), "a view");
  if (psize == 1)
    TRY(r, tstor_storage_fill(view, pat[0]), "filling %zu bytes at offset %zu", n, offset);
  else
    TRY(r, tstor_storage_fill_pattern(view, pat, psize),
        "filling %zu bytes at offset %zu with a %zu-byte pattern", n, offset, psize);
  TRY(r, conf_download(r, back, buf), "reading back");
  for (size_t i = 0; i < n; i++)
    EXPECT(r, back[offset + i] == pat[i % psize],
           "%zu-byte pattern over %zu bytes at offset %zu: byte %zu reads 0x%02x, not 0x%02x",
           psize, n, offset, i, back[offset + i], pat[i % psize]);
  EXPECT(r, conf_mismatch(guard, back, offset) == SIZE_MAX && conf_mismatch(guard + offset + n,
                                                                  back + offset + n, GUARD) ==
                                                             SIZE_MAX,
         "filling %zu bytes at offset %zu changed bytes around them", n, offset);
out:
  tstor_storage_release(view);
  tstor_storage_release(buf);
  free(guard);
  free(back);
}

static void check_fill_bytes(conf_run *r, const conf_device *d) {
  conf_begin(r, "fill bytes", d->label);
  const size_t sizes[] = {1, 7, 256, 4097, (1 << 20) + 1};
  const size_t offsets[] = {0, 1, 13};
  unsigned seed = 200;
  for (size_t i = 0; i < COUNT(sizes); i++)
    for (size_t j = 0; j < COUNT(offsets) && r->status == CONF_PASS; j++) {
      unsigned char v = (unsigned char)(0x11 * (i + j + 1));
      fill_one(r, d, sizes[i], offsets[j], &v, 1, seed++);
    }
  conf_notef(r, "%zu sizes x %zu offsets", COUNT(sizes), COUNT(offsets));
  conf_end(r);
}

static void check_fill_patterns(conf_run *r, const conf_device *d) {
  conf_begin(r, "fill patterns", d->label);
  const size_t psizes[] = {2, 4, 8, 16};
  const size_t counts[] = {1, 3, 1000, 4097};
  const size_t offsets[] = {0, 5};
  unsigned char pat[16];
  unsigned seed = 300;
  for (size_t p = 0; p < COUNT(psizes); p++)
    for (size_t c = 0; c < COUNT(counts); c++)
      for (size_t o = 0; o < COUNT(offsets) && r->status == CONF_PASS; o++) {
        conf_pattern(pat, sizeof pat, seed);
        fill_one(r, d, psizes[p] * counts[c], offsets[o], pat, psizes[p], seed++);
      }
  conf_notef(r, "patterns of 2, 4, 8 and 16 bytes");
  conf_end(r);
}

static void check_bad_fills(conf_run *r, const conf_device *d) {
  conf_begin(r, "bad fills refused", d->label);
  tstor_storage *s = NULL;
  unsigned char in[24], back[24], pat[32] = {1, 2, 3};
  conf_pattern(in, sizeof in, 77);
  TRY(r, tstor_storage_new(r->ctx, d->dev, sizeof in, &s), "allocating");
  TRY(r, conf_upload(r, s, in), "writing");
  const struct {
    size_t psize;
    const char *what;
  } bad[] = {{0, "a 0-byte pattern"}, {3, "a 3-byte pattern"}, {32, "a 32-byte pattern"},
             {16, "a 16-byte pattern over 24 bytes"}};
  for (size_t i = 0; i < COUNT(bad); i++) {
    int rc = tstor_storage_fill_pattern(s, pat, bad[i].psize);
    EXPECT(r, rc != 0, "%s was accepted", bad[i].what);
    conf_check_message(r, bad[i].what);
    if (r->status == CONF_FAIL) goto out;
    TRY(r, conf_download(r, back, s), "reading back");
    EXPECT(r, conf_mismatch(in, back, sizeof in) == SIZE_MAX, "%s changed the bytes", bad[i].what);
  }
  int rc = tstor_storage_fill_pattern(s, NULL, 4);
  EXPECT(r, rc == TSTOR_EINVAL, "a NULL pattern gave %s, not TSTOR_EINVAL", tstor_err_name(rc));
out:
  tstor_storage_release(s);
  conf_end(r);
}

void conf_section_fill(conf_run *r) {
  if (conf_setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    if (!d->has_data) {
      conf_begin(r, "fill bytes", d->label);
      tstor_storage *s = NULL;
      TRY(r, tstor_storage_new(r->ctx, d->dev, 64, &s), "allocating");
      TRY(r, tstor_storage_fill(s, 1), "filling a sizes-only storage");
      conf_skipf(r, "no data to look at");
    out:
      tstor_storage_release(s);
      conf_end(r);
      continue;
    }
    check_fill_bytes(r, d);
    check_fill_patterns(r, d);
    check_bad_fills(r, d);
  }
  conf_teardown(r);
}
