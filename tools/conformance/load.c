/* The load section: the module loads, names its device types and devices,
 * offers copy paths to and from the host, keeps its state per context, and
 * loads again after fini. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

static void check_device_types(conf_run *r, tstor_context *ctx) {
  conf_begin(r, "device types", NULL);
  char seen[CONF_REASON] = "";
  int ntypes = 0;
  for (int t = 0; t < tstor_device_type_count(ctx); t++) {
    if (!conf_is_target_type(r, ctx, t)) continue;
    const char *name = tstor_device_type_name(ctx, t);
    int count = tstor_device_count(ctx, t);
    ntypes++;
    EXPECT(r, name[0] != '\0' && strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-") ==
                                     strlen(name),
           "type name '%s' is not [a-z0-9_-]+", name);
    EXPECT(r, count >= 1, "%s has %d devices: a backend with no device should decline", name,
           count);
    size_t used = strlen(seen);
    snprintf(seen + used, sizeof seen - used, "%s%s (%d device%s)", used ? ", " : "", name, count,
             count == 1 ? "" : "s");
  }
  EXPECT(r, ntypes > 0, "the module registered no device type");
  conf_notef(r, "%s", seen);
out:
  conf_end(r);
}

static void check_device_names(conf_run *r, tstor_context *ctx) {
  conf_begin(r, "device names", NULL);
  for (int t = 0; t < tstor_device_type_count(ctx); t++) {
    if (!conf_is_target_type(r, ctx, t)) continue;
    const char *name = tstor_device_type_name(ctx, t);
    int count = tstor_device_count(ctx, t);
    char buf[96];
    for (int i = 0; i < count; i++) {
      tstor_device dev = {t, i}, back;
      TRY(r, tstor_device_format(ctx, dev, buf, sizeof buf), "formatting %s:%d", name, i);
      TRY(r, tstor_device_parse(ctx, buf, &back), "parsing '%s'", buf);
      EXPECT(r, back.type == t && back.index == i, "'%s' parses as type %d index %d", buf,
             back.type, back.index);
    }
    snprintf(buf, sizeof buf, "%s:%d", name, count);
    tstor_device bad;
    int rc = tstor_device_parse(ctx, buf, &bad);
    EXPECT(r, rc == TSTOR_ENODEV, "parsing '%s' (past the last device) gave %s, not TSTOR_ENODEV",
           buf, tstor_err_name(rc));
  }
out:
  conf_end(r);
}

static void check_copy_paths(conf_run *r, tstor_context *ctx) {
  conf_begin(r, "copy paths", NULL);
  tstor_device host;
  TRY(r, tstor_device_parse(ctx, "cpu", &host), "finding the host device");
  char seen[CONF_REASON] = "";
  for (int t = 0; t < tstor_device_type_count(ctx); t++) {
    if (!conf_is_target_type(r, ctx, t)) continue;
    const char *name = tstor_device_type_name(ctx, t);
    int in = tstor_copy_path_of(ctx, host.type, t);
    int out_ = tstor_copy_path_of(ctx, t, host.type);
    int self = tstor_copy_path_of(ctx, t, t);
    EXPECT(r, in >= 0 && out_ >= 0 && self >= 0, "copy_path_of failed for %s", name);
    tstor_storage *probe = NULL;
    int no_data = 0;
    tstor_device dev = {t, 0};
    if (tstor_storage_new(ctx, dev, 1, &probe) == 0)
      no_data = (tstor_storage_flags(probe) & TSTOR_FLAG_NO_DATA) != 0;
    tstor_storage_release(probe);
    if (no_data) {
      EXPECT(r, in == TSTOR_COPY_CHECK, "cpu -> %s (no data) is %s, not sizes only", name,
             conf_path_name(in));
    } else {
      EXPECT(r, in != TSTOR_COPY_NONE && in != TSTOR_COPY_CHECK, "cpu -> %s is %s", name,
             conf_path_name(in));
      EXPECT(r, out_ != TSTOR_COPY_NONE && out_ != TSTOR_COPY_CHECK, "%s -> cpu is %s", name,
             conf_path_name(out_));
      EXPECT(r, self != TSTOR_COPY_NONE && self != TSTOR_COPY_CHECK, "%s -> %s is %s", name,
             name, conf_path_name(self));
    }
    size_t used = strlen(seen);
    snprintf(seen + used, sizeof seen - used, "%scpu->%s %s, %s->cpu %s, %s->%s %s",
             used ? "; " : "", name, conf_path_name(in), name, conf_path_name(out_), name, name,
             conf_path_name(self));
  }
  conf_notef(r, "%s", seen);
out:
  conf_end(r);
}

/* The module must keep its state in module_state: a second context loads the
 * same mapped image and calls init again. */
static void check_two_contexts(conf_run *r, tstor_context *ctx) {
  conf_begin(r, "two contexts at once", NULL);
  tstor_context *other = NULL;
  tstor_storage *s = NULL;
  TRY(r, conf_open_context(r, NULL, 0, &other), "opening a second context");
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  memset(&info, 0, sizeof info);
  info.message = "no such section";
  EXPECT(r, conf_find_backend(other, r->opt->name, &info) == 0 && info.state == TSTOR_BACKEND_LOADED,
         "the second context did not load the module: %s", info.message);
  for (int t = 0; t < tstor_device_type_count(ctx); t++) {
    if (!conf_is_target_type(r, ctx, t)) continue;
    tstor_device dev = {t, 0};
    tstor_stats before = TSTOR_STATS_INIT, during = TSTOR_STATS_INIT, mine = TSTOR_STATS_INIT;
    TRY(r, tstor_device_stats(ctx, dev, &before), "statistics in the first context");
    TRY(r, tstor_device_stats(other, dev, &mine), "statistics in the second context");
    uint64_t mine_before = mine.allocated;
    TRY(r, tstor_storage_new(other, dev, 1 << 20, &s), "allocating in the second context");
    TRY(r, tstor_device_stats(ctx, dev, &during), "statistics in the first context");
    TRY(r, tstor_device_stats(other, dev, &mine), "statistics in the second context");
    EXPECT(r, during.allocated == before.allocated,
           "allocating in one context changed the other's statistics (%llu -> %llu bytes): "
           "state shared between contexts?",
           (unsigned long long)before.allocated, (unsigned long long)during.allocated);
    if (mine.allocated == mine_before) conf_notef(r, "the module keeps no allocated statistic");
    tstor_storage_release(s);
    s = NULL;
  }
out:
  tstor_storage_release(s);
  tstor_context_close(other);
  conf_end(r);
}

static void check_reopen(conf_run *r, int expect_count) {
  conf_begin(r, "close and reopen", NULL);
  for (int round = 0; round < 3; round++) {
    tstor_context *ctx = NULL;
    TRY(r, conf_open_context(r, NULL, 0, &ctx), "reopening (round %d)", round + 1);
    tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
    memset(&info, 0, sizeof info);
    info.message = "no such section";
    int loaded =
        conf_find_backend(ctx, r->opt->name, &info) == 0 && info.state == TSTOR_BACKEND_LOADED;
    int count = 0;
    for (int t = 0; t < tstor_device_type_count(ctx); t++)
      if (conf_is_target_type(r, ctx, t)) count += tstor_device_count(ctx, t);
    tstor_context_close(ctx);
    EXPECT(r, loaded, "round %d: the module did not load again: %s", round + 1, info.message);
    EXPECT(r, count == expect_count, "round %d: %d devices, %d the first time", round + 1, count,
           expect_count);
  }
  conf_notef(r, "3 rounds of init and fini");
out:
  conf_end(r);
}

void conf_section_load(conf_run *r) {
  conf_begin(r, "module loads", NULL);
  tstor_context *ctx = NULL;
  int rc = conf_open_context(r, NULL, 0, &ctx);
  if (rc) {
    conf_fail_rc(r, rc, "opening a context with the module");
    conf_end(r);
    return;
  }
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  if (conf_find_backend(ctx, r->opt->name, &info) != 0) {
    conf_failf(r, "no [backend %s] in the context", r->opt->name);
  } else if (info.state == TSTOR_BACKEND_DECLINED) {
    if (conf_no_own_message(info.message)) conf_failf(r, "declined without saying why");
    else conf_skipf(r, "declined: %s", info.message);
  } else if (info.state != TSTOR_BACKEND_LOADED) {
    conf_failf(r, "%s", info.message[0] ? info.message : "failed without a message");
  } else {
    conf_notef(r, "%s", info.library);
  }
  conf_end(r);
  if (r->status != CONF_PASS) {
    tstor_context_close(ctx);
    return;
  }
  int count = 0;
  for (int t = 0; t < tstor_device_type_count(ctx); t++)
    if (conf_is_target_type(r, ctx, t)) count += tstor_device_count(ctx, t);
  check_device_types(r, ctx);
  check_device_names(r, ctx);
  check_copy_paths(r, ctx);
  check_two_contexts(r, ctx);
  tstor_context_close(ctx);
  check_reopen(r, count);
}
