/* The args section: bad devices, sizes and views are refused with a
 * message, and nothing changes. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

/* A failed call must say why and change nothing, allocated bytes included. */
static int refused(conf_run *r, const conf_device *d, int rc, const tstor_stats *before,
                   const char *what) {
  if (rc == 0) {
    conf_failf(r, "%s was accepted", what);
    return 0;
  }
  if (!tstor_last_error()[0]) {
    conf_failf(r, "%s: refused (%s) without a message", what, tstor_err_name(rc));
    return 0;
  }
  tstor_stats after = TSTOR_STATS_INIT;
  if (conf_read_stats(r, d, &after) == 0 && after.allocated != before->allocated) {
    conf_failf(r, "%s: refused, but allocated went from %llu to %llu", what,
          (unsigned long long)before->allocated, (unsigned long long)after.allocated);
    return 0;
  }
  return 1;
}

static void check_bad_device(conf_run *r, const conf_device *d) {
  conf_begin(r, "bad device index", d->label);
  tstor_stats st = TSTOR_STATS_INIT;
  tstor_storage *s = NULL;
  tstor_stream *str = NULL;
  tstor_event *e = NULL;
  TRY(r, conf_read_stats(r, d, &st), "reading statistics");
  tstor_device past = {d->dev.type, d->count}, negative = {d->dev.type, -1};
  int rc = tstor_storage_new(r->ctx, past, 16, &s);
  if (!refused(r, d, rc, &st, "allocating on the index past the last device")) goto out;
  EXPECT(r, rc == TSTOR_ENODEV, "a device past the last gave %s, not TSTOR_ENODEV",
         tstor_err_name(rc));
  rc = tstor_storage_new(r->ctx, negative, 16, &s);
  if (!refused(r, d, rc, &st, "allocating on index -1")) goto out;
  rc = tstor_stream_new(r->ctx, past, &str);
  if (!refused(r, d, rc, &st, "a stream on the index past the last device")) goto out;
  rc = tstor_event_new(r->ctx, past, &e);
  if (!refused(r, d, rc, &st, "an event on the index past the last device")) goto out;
  rc = tstor_device_stats(r->ctx, past, &st);
  EXPECT(r, rc != 0, "statistics of the index past the last device");
out:
  tstor_event_free(e);
  tstor_stream_free(str);
  tstor_storage_release(s);
  conf_end(r);
}

/* describe (ABI 1.3, optional): every device's line starts with its name, is
 * printable and NUL-terminated, and a buffer too small is refused whole. */
static void check_describe(conf_run *r, const conf_device *d) {
  conf_begin(r, "device descriptions", d->label);
  char line[512], name[64];
  int described = 0;
  for (int i = 0; i < d->count; i++) {
    tstor_device dev = {d->dev.type, i};
    TRY(r, tstor_device_format(r->ctx, dev, name, sizeof name), "formatting the device's name");
    memset(line, 'x', sizeof line);
    TRY(r, tstor_device_describe(r->ctx, dev, line, sizeof line), "describing %s", name);
    size_t len = strnlen(line, sizeof line);
    EXPECT(r, len < sizeof line, "the description of %s is not NUL-terminated", name);
    EXPECT(r, strncmp(line, name, strlen(name)) == 0 &&
                  (line[strlen(name)] == '\0' || strncmp(line + strlen(name), " -> ", 4) == 0),
           "the description of %s does not start with its name: '%s'", name, line);
    for (size_t k = 0; k < len; k++)
      EXPECT(r, line[k] >= 0x20 && line[k] < 0x7f, "the description of %s has byte 0x%02x",
             name, (unsigned char)line[k]);
    if (line[strlen(name)]) {
      described++;
      EXPECT(r, len > strlen(name) + 4, "the description of %s is empty after ' -> '", name);
      int rc = tstor_device_describe(r->ctx, dev, line, len);
      EXPECT(r, rc == TSTOR_ERANGE && line[0] == '\0',
             "describing %s into %zu bytes gave %s and '%s', not TSTOR_ERANGE and ''", name, len,
             tstor_err_name(rc), line);
    }
  }
  tstor_device past = {d->dev.type, d->count};
  EXPECT(r, tstor_device_describe(r->ctx, past, line, sizeof line) == TSTOR_ENODEV,
         "describing the index past the last device did not give TSTOR_ENODEV");
  if (described)
    conf_notef(r, "%d of %d devices described", described, d->count);
  else
    conf_notef(r, "no descriptions (the op is optional)");
out:
  conf_end(r);
}

static void check_bad_copies(conf_run *r, const conf_device *d) {
  conf_begin(r, "bad copies and views", d->label);
  tstor_stats st = TSTOR_STATS_INIT;
  tstor_storage *a = NULL, *b = NULL, *v = NULL;
  tstor_stream *s = NULL;
  unsigned char in[101], back[101];
  conf_pattern(in, sizeof in, 31);
  TRY(r, tstor_storage_new(r->ctx, d->dev, 100, &a), "allocating");
  TRY(r, tstor_storage_new(r->ctx, d->dev, 101, &b), "allocating");
  if (d->has_data) TRY(r, conf_upload(r, b, in), "writing");
  TRY(r, conf_read_stats(r, d, &st), "reading statistics");
  int rc = tstor_storage_copy(b, a);
  if (!refused(r, d, rc, &st, "copying 100 bytes into 101")) goto out;
  EXPECT(r, rc == TSTOR_ESIZE, "a size mismatch gave %s, not TSTOR_ESIZE", tstor_err_name(rc));
  if (d->has_data) {
    TRY(r, conf_download(r, back, b), "reading");
    EXPECT(r, conf_mismatch(in, back, sizeof back) == SIZE_MAX, "the refused copy changed bytes");
  }
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s), "creating a stream");
  rc = tstor_storage_copy_async(b, a, s);
  if (!refused(r, d, rc, &st, "queueing a copy of 100 bytes into 101")) goto out;
  TRY(r, tstor_stream_synchronize(s), "synchronizing");
  rc = tstor_storage_view(a, 90, 20, &v);
  if (!refused(r, d, rc, &st, "a view of [90, 110) of 100 bytes")) goto out;
  EXPECT(r, v == NULL, "the refused view was handed out");
  rc = tstor_storage_view(a, SIZE_MAX, 2, &v);
  if (!refused(r, d, rc, &st, "a view at offset SIZE_MAX")) goto out;
  rc = tstor_storage_new(r->ctx, d->dev, 16, NULL);
  if (!refused(r, d, rc, &st, "storage_new with a NULL out")) goto out;
  EXPECT(r, rc == TSTOR_EINVAL, "a NULL out gave %s, not TSTOR_EINVAL", tstor_err_name(rc));
out:
  tstor_stream_free(s);
  tstor_storage_release(v);
  tstor_storage_release(a);
  tstor_storage_release(b);
  conf_end(r);
}

void conf_section_args(conf_run *r) {
  if (conf_setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    if (!r->devs[i].first) continue;
    check_bad_device(r, &r->devs[i]);
    check_describe(r, &r->devs[i]);
    check_bad_copies(r, &r->devs[i]);
  }
  conf_teardown(r);
}
