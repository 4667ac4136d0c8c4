/* The checks of `tstor conformance`. Each section opens its own context with
 * the module under test, runs its checks on every device the module offers
 * (index 0 and the last index of each type), and ends by checking that the
 * device's `allocated` statistic is back where it started. Checks use the
 * public API only, exactly as an application would: what they find is what
 * applications will meet. */
#include "config.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

/* ------------------------------------------------------------- reporting */

static void begin(conf_run *r, const char *check, const char *device) {
  r->check = check;
  r->device = device ? device : "-";
  r->status = CONF_PASS;
  r->reason[0] = '\0';
  conf_emit_begin(r, check, r->device);
}

static void end(conf_run *r) { conf_emit(r, r->check, r->device, r->status, r->reason); }

static void vset(conf_run *r, conf_status status, const char *fmt, va_list ap) {
  r->status = status;
  vsnprintf(r->reason, sizeof r->reason, fmt, ap);
}

/* The first failure of a check is its reason. */
static void failf(conf_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(conf_run *r, const char *fmt, ...) {
  if (r->status == CONF_FAIL) return;
  va_list ap;
  va_start(ap, fmt);
  vset(r, CONF_FAIL, fmt, ap);
  va_end(ap);
}

/* "what: TSTOR_ENOMEM (detail)" */
static void fail_rc(conf_run *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_rc(conf_run *r, int rc, const char *fmt, ...) {
  if (r->status == CONF_FAIL) return;
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const char *detail = tstor_last_error();
  r->status = CONF_FAIL;
  snprintf(r->reason, sizeof r->reason, "%s: %s%s%s%s", what, tstor_err_name(rc),
           detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
}

static void skipf(conf_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void skipf(conf_run *r, const char *fmt, ...) {
  if (r->status == CONF_FAIL) return;
  va_list ap;
  va_start(ap, fmt);
  vset(r, CONF_SKIP, fmt, ap);
  va_end(ap);
}

/* A remark on a passing check (what was seen); failures keep their reason. */
static void notef(conf_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notef(conf_run *r, const char *fmt, ...) {
  if (r->status != CONF_PASS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->reason, sizeof r->reason, fmt, ap);
  va_end(ap);
}

#define TRY(r, expr, ...)                   \
  do {                                      \
    int try_rc_ = (expr);                   \
    if (try_rc_ != 0) {                     \
      fail_rc((r), try_rc_, __VA_ARGS__);   \
      goto out;                             \
    }                                       \
  } while (0)

#define EXPECT(r, cond, ...)  \
  do {                        \
    if (!(cond)) {            \
      failf((r), __VA_ARGS__); \
      goto out;               \
    }                         \
  } while (0)

/* --------------------------------------------------------------- helpers */

/* Bytes that differ with position and seed, so that a shifted, truncated or
 * stale copy never matches by accident. */
static void pattern(unsigned char *p, size_t n, unsigned seed) {
  uint32_t x = 0x9e3779b9u * (seed + 1);
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (unsigned char)(x >> 11);
  }
}

/* Index of the first byte where a and b differ, or SIZE_MAX. */
static size_t mismatch(const unsigned char *a, const unsigned char *b, size_t n) {
  if (memcmp(a, b, n) == 0) return SIZE_MAX;
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return i;
  return SIZE_MAX;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "tstor conformance: out of host memory (%zu bytes)\n", n);
    exit(EXIT_FAILURE);
  }
  return p;
}

static int upload(conf_run *r, tstor_storage *dst, const void *buf) {
  tstor_storage *h;
  int rc = tstor_storage_wrap(r->ctx, r->host, (void *)buf, tstor_storage_nbytes(dst), &h);
  if (rc) return rc;
  rc = tstor_storage_copy(dst, h);
  tstor_storage_release(h);
  return rc;
}

static int download(conf_run *r, void *buf, const tstor_storage *src) {
  tstor_storage *h;
  int rc = tstor_storage_wrap(r->ctx, r->host, buf, tstor_storage_nbytes(src), &h);
  if (rc) return rc;
  rc = tstor_storage_copy(h, src);
  tstor_storage_release(h);
  return rc;
}

/* A host buffer as a storage of the context's host device. */
static int host_storage(conf_run *r, void *buf, size_t n, tstor_storage **out) {
  return tstor_storage_wrap(r->ctx, r->host, buf, n, out);
}

static int read_stats(conf_run *r, const conf_device *d, tstor_stats *s) {
  memset(s, 0, sizeof *s);
  return tstor_device_stats(r->ctx, d->dev, s);
}

static const char *path_name(int path) {
  switch (path) {
  case TSTOR_COPY_DIRECT: return "direct";
  case TSTOR_COPY_HOST: return "host";
  case TSTOR_COPY_STAGED: return "staged";
  case TSTOR_COPY_CHECK: return "sizes only";
  case TSTOR_COPY_NONE: return "impossible";
  }
  return "?";
}

static int find_backend(tstor_context *ctx, const char *name, tstor_backend_info *out) {
  for (int i = 0; i < tstor_backend_count(ctx); i++)
    if (tstor_backend_get(ctx, i, out) == 0 && strcmp(out->name, name) == 0) return 0;
  return -1;
}

/* Whether a device type is one the module under test registered. */
static int is_target_type(conf_run *r, tstor_context *ctx, int type) {
  const char *name = tstor_device_type_name(ctx, type);
  return name && (!r->opt->add_cpu || strcmp(name, "cpu") != 0);
}

static int open_context(conf_run *r, const char *const *extra, int nextra, tstor_context **out) {
  char *text = conf_config_text(r->opt, extra, nextra);
  int rc = tstor_context_open_string(text, "conformance.ini", out);
  free(text);
  return rc;
}

/* Opens the section's context and lists the devices under test; reports a
 * "setup" row and returns -1 when there is nothing to test. */
static int setup(conf_run *r) {
  begin(r, "setup", NULL);
  int rc = open_context(r, NULL, 0, &r->ctx);
  if (rc) {
    fail_rc(r, rc, "opening a context with the module");
    end(r);
    return -1;
  }
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  memset(&info, 0, sizeof info);
  info.message = "no such section";
  if (find_backend(r->ctx, r->opt->name, &info) != 0 || info.state != TSTOR_BACKEND_LOADED) {
    if (info.state == TSTOR_BACKEND_DECLINED)
      skipf(r, "the module declined: %s", info.message);
    else
      failf(r, "the module did not load: %s", info.message);
    goto out;
  }
  TRY(r, tstor_device_parse(r->ctx, "cpu", &r->host), "finding the host device");
  r->ndevs = 0;
  for (int t = 0; t < tstor_device_type_count(r->ctx); t++) {
    if (!is_target_type(r, r->ctx, t)) continue;
    int count = tstor_device_count(r->ctx, t);
    for (int k = 0; k < 2 && k < count && r->ndevs < CONF_MAX_DEVICES; k++) {
      conf_device *d = &r->devs[r->ndevs++];
      memset(d, 0, sizeof *d);
      d->dev.type = t;
      d->dev.index = k == 0 ? 0 : count - 1;
      d->count = count;
      d->first = k == 0;
      if (tstor_device_format(r->ctx, d->dev, d->label, sizeof d->label) != 0)
        snprintf(d->label, sizeof d->label, "type%d:%d", t, d->dev.index);
      d->has_data = 1;
      tstor_storage *probe;
      if (tstor_storage_new(r->ctx, d->dev, 16, &probe) == 0) {
        d->has_data = !(tstor_storage_flags(probe) & TSTOR_FLAG_NO_DATA);
        tstor_storage_release(probe);
      }
      tstor_stats st = TSTOR_STATS_INIT;
      d->stats_ok = read_stats(r, d, &st) == 0;
      d->start_allocated = st.allocated;
      if (count == 1) break;
    }
  }
  EXPECT(r, r->ndevs > 0, "the module offers no device");
  return 0; /* a setup that works is not worth a row */
out:
  end(r);
  tstor_context_close(r->ctx);
  r->ctx = NULL;
  return -1;
}

/* Every section ends here: what it allocated must all be given back. */
static void teardown(conf_run *r) {
  for (int i = 0; i < r->ndevs; i++) {
    conf_device *d = &r->devs[i];
    begin(r, "allocated back to start", d->label);
    tstor_stats st = TSTOR_STATS_INIT;
    int rc = read_stats(r, d, &st);
    if (rc)
      fail_rc(r, rc, "reading statistics");
    else if (!d->stats_ok)
      failf(r, "statistics could not be read when the section began");
    else if (st.allocated != d->start_allocated)
      failf(r, "allocated is %llu bytes, was %llu when the section began",
            (unsigned long long)st.allocated, d->start_allocated);
    end(r);
  }
  tstor_context_close(r->ctx);
  r->ctx = NULL;
}

/* ============================================================== load ===== */

static void check_device_types(conf_run *r, tstor_context *ctx) {
  begin(r, "device types", NULL);
  char seen[CONF_REASON] = "";
  int ntypes = 0;
  for (int t = 0; t < tstor_device_type_count(ctx); t++) {
    if (!is_target_type(r, ctx, t)) continue;
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
  notef(r, "%s", seen);
out:
  end(r);
}

static void check_device_names(conf_run *r, tstor_context *ctx) {
  begin(r, "device names", NULL);
  for (int t = 0; t < tstor_device_type_count(ctx); t++) {
    if (!is_target_type(r, ctx, t)) continue;
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
  end(r);
}

static void check_copy_paths(conf_run *r, tstor_context *ctx) {
  begin(r, "copy paths", NULL);
  tstor_device host;
  TRY(r, tstor_device_parse(ctx, "cpu", &host), "finding the host device");
  char seen[CONF_REASON] = "";
  for (int t = 0; t < tstor_device_type_count(ctx); t++) {
    if (!is_target_type(r, ctx, t)) continue;
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
             path_name(in));
    } else {
      EXPECT(r, in != TSTOR_COPY_NONE && in != TSTOR_COPY_CHECK, "cpu -> %s is %s", name,
             path_name(in));
      EXPECT(r, out_ != TSTOR_COPY_NONE && out_ != TSTOR_COPY_CHECK, "%s -> cpu is %s", name,
             path_name(out_));
      EXPECT(r, self != TSTOR_COPY_NONE && self != TSTOR_COPY_CHECK, "%s -> %s is %s", name,
             name, path_name(self));
    }
    size_t used = strlen(seen);
    snprintf(seen + used, sizeof seen - used, "%scpu->%s %s, %s->cpu %s, %s->%s %s",
             used ? "; " : "", name, path_name(in), name, path_name(out_), name, name,
             path_name(self));
  }
  notef(r, "%s", seen);
out:
  end(r);
}

/* The module must keep its state in module_state: a second context loads the
 * same mapped image and calls init again. */
static void check_two_contexts(conf_run *r, tstor_context *ctx) {
  begin(r, "two contexts at once", NULL);
  tstor_context *other = NULL;
  tstor_storage *s = NULL;
  TRY(r, open_context(r, NULL, 0, &other), "opening a second context");
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  memset(&info, 0, sizeof info);
  info.message = "no such section";
  EXPECT(r, find_backend(other, r->opt->name, &info) == 0 && info.state == TSTOR_BACKEND_LOADED,
         "the second context did not load the module: %s", info.message);
  for (int t = 0; t < tstor_device_type_count(ctx); t++) {
    if (!is_target_type(r, ctx, t)) continue;
    tstor_device dev = {t, 0};
    tstor_stats before, during, mine;
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
    if (mine.allocated == mine_before) notef(r, "the module keeps no allocated statistic");
    tstor_storage_release(s);
    s = NULL;
  }
out:
  tstor_storage_release(s);
  tstor_context_close(other);
  end(r);
}

static void check_reopen(conf_run *r, int expect_count) {
  begin(r, "close and reopen", NULL);
  for (int round = 0; round < 3; round++) {
    tstor_context *ctx = NULL;
    TRY(r, open_context(r, NULL, 0, &ctx), "reopening (round %d)", round + 1);
    tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
    memset(&info, 0, sizeof info);
    info.message = "no such section";
    int loaded =
        find_backend(ctx, r->opt->name, &info) == 0 && info.state == TSTOR_BACKEND_LOADED;
    int count = 0;
    for (int t = 0; t < tstor_device_type_count(ctx); t++)
      if (is_target_type(r, ctx, t)) count += tstor_device_count(ctx, t);
    tstor_context_close(ctx);
    EXPECT(r, loaded, "round %d: the module did not load again: %s", round + 1, info.message);
    EXPECT(r, count == expect_count, "round %d: %d devices, %d the first time", round + 1, count,
           expect_count);
  }
  notef(r, "3 rounds of init and fini");
out:
  end(r);
}

static void section_load(conf_run *r) {
  begin(r, "module loads", NULL);
  tstor_context *ctx = NULL;
  int rc = open_context(r, NULL, 0, &ctx);
  if (rc) {
    fail_rc(r, rc, "opening a context with the module");
    end(r);
    return;
  }
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  if (find_backend(ctx, r->opt->name, &info) != 0) {
    failf(r, "no [backend %s] in the context", r->opt->name);
  } else if (info.state == TSTOR_BACKEND_DECLINED) {
    if (!info.message[0]) failf(r, "declined without saying why");
    else skipf(r, "declined: %s", info.message);
  } else if (info.state != TSTOR_BACKEND_LOADED) {
    failf(r, "%s", info.message[0] ? info.message : "failed without a message");
  } else {
    notef(r, "%s", info.library);
  }
  end(r);
  if (r->status != CONF_PASS) {
    tstor_context_close(ctx);
    return;
  }
  int count = 0;
  for (int t = 0; t < tstor_device_type_count(ctx); t++)
    if (is_target_type(r, ctx, t)) count += tstor_device_count(ctx, t);
  check_device_types(r, ctx);
  check_device_names(r, ctx);
  check_copy_paths(r, ctx);
  check_two_contexts(r, ctx);
  tstor_context_close(ctx);
  check_reopen(r, count);
}

/* =========================================================== decline ===== */

static void section_decline(conf_run *r) {
  begin(r, "declines without hardware", NULL);
  tstor_context *ctx = NULL;
  tstor_storage *s = NULL;
  const conf_options *o = r->opt;
  TRY(r, open_context(r, o->no_hw_keys, o->nno_hw_keys, &ctx), "opening a context");
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  EXPECT(r, find_backend(ctx, o->name, &info) == 0, "no [backend %s] in the context", o->name);
  if (o->nno_hw_keys == 0 && info.state == TSTOR_BACKEND_LOADED) {
    skipf(r, "loaded here; --no-hardware KEY=VALUE gives the keys that make it decline");
    goto out;
  }
  EXPECT(r, info.state == TSTOR_BACKEND_DECLINED, "%s instead of declining%s%s",
         info.state == TSTOR_BACKEND_LOADED ? "loaded" : "failed", info.message[0] ? ": " : "",
         info.message);
  EXPECT(r, info.message[0] != '\0', "declined without saying why");
  for (int t = 0; t < tstor_device_type_count(ctx); t++)
    EXPECT(r, !is_target_type(r, ctx, t), "device type '%s' stayed registered after declining",
           tstor_device_type_name(ctx, t));
  /* The rest of the context goes on working. */
  tstor_device host;
  TRY(r, tstor_device_parse(ctx, "cpu", &host), "finding the host device");
  TRY(r, tstor_storage_new(ctx, host, 64, &s), "allocating host memory after the decline");
  notef(r, "%s", info.message);
out:
  tstor_storage_release(s);
  tstor_context_close(ctx);
  end(r);
}

/* ============================================================= alloc ===== */

static void check_zero_bytes(conf_run *r, const conf_device *d) {
  begin(r, "zero bytes", d->label);
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
  end(r);
}

static int cmp_addr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static void check_small_sizes(conf_run *r, const conf_device *d) {
  begin(r, "small sizes", d->label);
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
  notef(r, "%d live allocations of 1 to 65537 bytes", N);
out:
  for (int i = 0; i < N; i++) tstor_storage_release(s[i]);
  end(r);
}

static void check_large(conf_run *r, const conf_device *d) {
  size_t n = r->opt->large_bytes;
  begin(r, "large", d->label);
  tstor_storage *s = NULL, *head = NULL, *tail = NULL;
  unsigned char *in = xmalloc(4096), *back = xmalloc(4096);
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &s), "allocating %zu MiB (--large-mb sets it)",
      n >> 20);
  if (d->has_data) {
    /* Both ends of the block must be real memory. */
    TRY(r, tstor_storage_view(s, 0, 4096, &head), "a view of the first page");
    TRY(r, tstor_storage_view(s, n - 4096, 4096, &tail), "a view of the last page");
    pattern(in, 4096, 1);
    TRY(r, upload(r, head, in), "writing the first page");
    TRY(r, download(r, back, head), "reading the first page");
    EXPECT(r, mismatch(in, back, 4096) == SIZE_MAX, "the first page did not read back");
    pattern(in, 4096, 2);
    TRY(r, upload(r, tail, in), "writing the last page");
    TRY(r, download(r, back, tail), "reading the last page");
    EXPECT(r, mismatch(in, back, 4096) == SIZE_MAX, "the last page did not read back");
  }
  notef(r, "%zu MiB", n >> 20);
out:
  tstor_storage_release(head);
  tstor_storage_release(tail);
  tstor_storage_release(s);
  free(in);
  free(back);
  end(r);
}

static void check_impossible(conf_run *r, const conf_device *d) {
  begin(r, "impossible sizes", d->label);
  tstor_storage *s = NULL;
  tstor_stats before, after;
  if (!d->has_data) {
    skipf(r, "no data: every size is possible");
    goto out;
  }
  TRY(r, read_stats(r, d, &before), "reading statistics");
  const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 4095, SIZE_MAX / 2 + 1, (size_t)1 << 60};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    s = NULL;
    int rc = tstor_storage_new(r->ctx, d->dev, sizes[i], &s);
    EXPECT(r, rc != 0, "allocating %zu bytes succeeded", sizes[i]);
    EXPECT(r, rc == TSTOR_ENOMEM || rc == TSTOR_EOVERFLOW,
           "allocating %zu bytes failed with %s, not TSTOR_ENOMEM or TSTOR_EOVERFLOW", sizes[i],
           tstor_err_name(rc));
    EXPECT(r, tstor_last_error()[0] != '\0', "allocating %zu bytes failed without a message",
           sizes[i]);
  }
  TRY(r, read_stats(r, d, &after), "reading statistics");
  EXPECT(r, after.allocated == before.allocated,
         "failed allocations changed allocated from %llu to %llu bytes",
         (unsigned long long)before.allocated, (unsigned long long)after.allocated);
  TRY(r, tstor_storage_new(r->ctx, d->dev, 4096, &s), "allocating 4096 bytes afterwards");
  if (after.oom_count == before.oom_count)
    notef(r, "refused; oom_count not kept");
  else
    notef(r, "refused; oom_count %llu -> %llu", (unsigned long long)before.oom_count,
          (unsigned long long)after.oom_count);
out:
  tstor_storage_release(s);
  end(r);
}

static void check_alignment(conf_run *r, const conf_device *d) {
  begin(r, "alignment", d->label);
  enum { N = 24 };
  tstor_storage *s[N] = {NULL};
  const size_t sizes[N] = {1,   2,   3,    5,    7,    9,    15,   17,   31,   33,   63,    65,
                           100, 127, 129,  255,  257,  511,  513,  1023, 1025, 4095, 65535, 3};
  uintptr_t all = 0;
  if (!d->has_data) {
    skipf(r, "no data, no addresses");
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
  notef(r, "every address %lu-byte aligned (%zu required)",
        (unsigned long)(align > 4096 ? 4096 : align), r->opt->min_align);
out:
  for (int i = 0; i < N; i++) tstor_storage_release(s[i]);
  end(r);
}

static void check_resize(conf_run *r, const conf_device *d) {
  begin(r, "resize", d->label);
  tstor_storage *s = NULL;
  unsigned char in[100], back[5000];
  TRY(r, tstor_storage_new(r->ctx, d->dev, 100, &s), "allocating 100 bytes");
  if (!(tstor_storage_flags(s) & TSTOR_FLAG_RESIZABLE)) {
    skipf(r, "new storages are not resizable");
    goto out;
  }
  if (d->has_data) {
    pattern(in, sizeof in, 3);
    TRY(r, upload(r, s, in), "writing 100 bytes");
  }
  TRY(r, tstor_storage_resize(s, 5000), "growing 100 -> 5000 bytes");
  EXPECT(r, tstor_storage_nbytes(s) == 5000, "nbytes is %zu after growing to 5000",
         tstor_storage_nbytes(s));
  if (d->has_data) {
    TRY(r, download(r, back, s), "reading after growing");
    EXPECT(r, mismatch(in, back, 100) == SIZE_MAX, "growing lost the first 100 bytes");
  }
  TRY(r, tstor_storage_resize(s, 10), "shrinking 5000 -> 10 bytes");
  if (d->has_data) {
    TRY(r, download(r, back, s), "reading after shrinking");
    EXPECT(r, mismatch(in, back, 10) == SIZE_MAX, "shrinking lost the first 10 bytes");
  }
  TRY(r, tstor_storage_resize(s, 0), "shrinking to 0 bytes");
  TRY(r, tstor_storage_resize(s, 64), "growing from 0 bytes");
out:
  tstor_storage_release(s);
  end(r);
}

static void section_alloc(conf_run *r) {
  if (setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    check_zero_bytes(r, d);
    check_small_sizes(r, d);
    check_large(r, d);
    check_impossible(r, d);
    check_alignment(r, d);
    check_resize(r, d);
  }
  teardown(r);
}

/* ============================================================== copy ===== */

static const size_t copy_sizes[] = {1,    2,    3,    4,     7,     8,     15,          16,
                                    31,   64,   255,  256,   257,   1000,  4095,        4096,
                                    4097, 65535, 65536, 65537, 1 << 20, (1 << 20) + 13};
static const size_t copy_offsets[] = {0, 1, 3, 8, 13, 64, 255, 4096};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define GUARD 64

/* Writes `n` bytes at `offset` of a device buffer through a view and reads
 * the whole buffer back: the bytes must be there and nothing around them may
 * have changed. */
static void round_trip(conf_run *r, const conf_device *d, size_t n, size_t offset,
                       unsigned seed) {
  size_t total = offset + n + GUARD;
  tstor_storage *buf = NULL, *view = NULL;
  unsigned char *guard = xmalloc(total), *in = xmalloc(n), *back = xmalloc(total);
  pattern(guard, total, seed);
  pattern(in, n, seed + 1000);
  TRY(r, tstor_storage_new(r->ctx, d->dev, total, &buf), "allocating %zu bytes", total);
  TRY(r, upload(r, buf, guard), "writing %zu bytes", total);
  TRY(r, tstor_storage_view(buf, offset, n, &view), "a view of %zu bytes at %zu", n, offset);
  TRY(r, upload(r, view, in), "writing %zu bytes at offset %zu", n, offset);
  memset(back, 0, total);
  TRY(r, download(r, back, buf), "reading %zu bytes", total);
  size_t at = mismatch(in, back + offset, n);
  EXPECT(r, at == SIZE_MAX, "%zu bytes at offset %zu: byte %zu reads 0x%02x, wrote 0x%02x", n,
         offset, at, back[offset + at], in[at]);
  at = mismatch(guard, back, offset);
  EXPECT(r, at == SIZE_MAX,
         "%zu bytes at offset %zu: byte %zu before them reads 0x%02x, not 0x%02x", n, offset, at,
         back[at], guard[at]);
  at = mismatch(guard + offset + n, back + offset + n, GUARD);
  EXPECT(r, at == SIZE_MAX,
         "%zu bytes at offset %zu: byte %zu after them reads 0x%02x, not 0x%02x", n, offset, at,
         back[offset + n + at], guard[offset + n + at]);
  /* And back out through a view as well. */
  memset(back, 0, n);
  TRY(r, download(r, back, view), "reading %zu bytes at offset %zu", n, offset);
  EXPECT(r, mismatch(in, back, n) == SIZE_MAX, "reading %zu bytes at offset %zu through a view",
         n, offset);
out:
  tstor_storage_release(view);
  tstor_storage_release(buf);
  free(guard);
  free(in);
  free(back);
}

static void check_host_round_trips(conf_run *r, const conf_device *d) {
  begin(r, "host round trips", d->label);
  unsigned seed = 1;
  for (size_t i = 0; i < COUNT(copy_sizes) && r->status == CONF_PASS; i++)
    for (size_t j = 0; j < COUNT(copy_offsets) && r->status == CONF_PASS; j++)
      round_trip(r, d, copy_sizes[i], copy_offsets[j], seed++);
  notef(r, "%zu sizes (1 B to 1 MiB + 13) x %zu offsets", COUNT(copy_sizes),
        COUNT(copy_offsets));
  end(r);
}

/* Device to device, between two devices (the same one when `to` is `from`),
 * whole and through views at odd offsets. */
static void device_copy(conf_run *r, const conf_device *from, tstor_device to) {
  const size_t n = 300000;
  tstor_storage *a = NULL, *b = NULL, *va = NULL, *vb = NULL;
  unsigned char *in = xmalloc(n), *back = xmalloc(n), *expect = xmalloc(n);
  pattern(in, n, 41);
  TRY(r, tstor_storage_new(r->ctx, from->dev, n, &a), "allocating");
  TRY(r, tstor_storage_new(r->ctx, to, n, &b), "allocating");
  TRY(r, upload(r, a, in), "writing the source");
  TRY(r, tstor_storage_copy(b, a), "copying %zu bytes", n);
  TRY(r, download(r, back, b), "reading the destination");
  EXPECT(r, mismatch(in, back, n) == SIZE_MAX, "a whole copy of %zu bytes differs", n);
  /* bytes [3, 3 + 1001) of a into [70001, 71002) of b */
  pattern(in, n, 42);
  TRY(r, upload(r, a, in), "writing the source");
  TRY(r, tstor_storage_view(a, 3, 1001, &va), "a source view");
  TRY(r, tstor_storage_view(b, 70001, 1001, &vb), "a destination view");
  TRY(r, download(r, expect, b), "reading the destination");
  memcpy(expect + 70001, in + 3, 1001);
  TRY(r, tstor_storage_copy(vb, va), "copying between views");
  TRY(r, download(r, back, b), "reading the destination");
  size_t at = mismatch(expect, back, n);
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
  begin(r, "clone and to", d->label);
  const size_t n = 70001;
  tstor_storage *a = NULL, *c = NULL, *h = NULL, *same = NULL, *back_dev = NULL;
  unsigned char *in = xmalloc(n), *back = xmalloc(n);
  pattern(in, n, 51);
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &a), "allocating");
  TRY(r, upload(r, a, in), "writing");
  TRY(r, tstor_storage_clone(a, &c), "cloning");
  tstor_device cd = tstor_storage_device(c);
  EXPECT(r, cd.type == d->dev.type && cd.index == d->dev.index, "the clone is on another device");
  EXPECT(r, tstor_storage_data(c) != tstor_storage_data(a), "the clone shares the bytes");
  TRY(r, download(r, back, c), "reading the clone");
  EXPECT(r, mismatch(in, back, n) == SIZE_MAX, "the clone differs");
  TRY(r, tstor_storage_to(a, r->host, &h), "moving to the host");
  EXPECT(r, memcmp(tstor_storage_data(h), in, n) == 0, "the host copy differs");
  TRY(r, tstor_storage_to(a, d->dev, &same), "moving to its own device");
  EXPECT(r, same == a, "to() its own device made a copy");
  TRY(r, tstor_storage_to(h, d->dev, &back_dev), "moving back to the device");
  TRY(r, download(r, back, back_dev), "reading it");
  EXPECT(r, mismatch(in, back, n) == SIZE_MAX, "the round trip through to() differs");
out:
  tstor_storage_release(back_dev);
  tstor_storage_release(same);
  tstor_storage_release(h);
  tstor_storage_release(c);
  tstor_storage_release(a);
  free(in);
  free(back);
  end(r);
}

static void check_no_data_copies(conf_run *r, const conf_device *d) {
  begin(r, "copies without data", d->label);
  tstor_storage *m = NULL, *h = NULL;
  unsigned char buf[256] = {0};
  TRY(r, tstor_storage_new(r->ctx, d->dev, sizeof buf, &m), "allocating");
  TRY(r, host_storage(r, buf, sizeof buf, &h), "wrapping host memory");
  TRY(r, tstor_storage_copy(m, h), "copying host bytes to a sizes-only device");
  int rc = tstor_storage_copy(h, m);
  EXPECT(r, rc != 0, "copying out of a sizes-only device succeeded");
  EXPECT(r, tstor_last_error()[0] != '\0', "the refusal has no message");
  notef(r, "sizes only: copying out refused with %s", tstor_err_name(rc));
out:
  tstor_storage_release(h);
  tstor_storage_release(m);
  end(r);
}

static void section_copy(conf_run *r) {
  if (setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    if (!d->has_data) {
      check_no_data_copies(r, d);
      continue;
    }
    check_host_round_trips(r, d);
    begin(r, "same device", d->label);
    device_copy(r, d, d->dev);
    end(r);
    if (d->first) {
      begin(r, "across devices", d->label);
      if (d->count < 2) {
        skipf(r, "one device");
      } else {
        tstor_device last = {d->dev.type, d->count - 1};
        device_copy(r, d, last);
        notef(r, "to index %d", d->count - 1);
      }
      end(r);
    }
    check_clone_and_to(r, d);
  }
  teardown(r);
}

/* ============================================================== fill ===== */

/* Fills `n` bytes at `offset` through a view with a pattern and checks them
 * and the bytes around them. */
static void fill_one(conf_run *r, const conf_device *d, size_t n, size_t offset,
                     const unsigned char *pat, size_t psize, unsigned seed) {
  size_t total = offset + n + GUARD;
  tstor_storage *buf = NULL, *view = NULL;
  unsigned char *guard = xmalloc(total), *back = xmalloc(total);
  pattern(guard, total, seed);
  TRY(r, tstor_storage_new(r->ctx, d->dev, total, &buf), "allocating %zu bytes", total);
  TRY(r, upload(r, buf, guard), "writing %zu bytes", total);
  TRY(r, tstor_storage_view(buf, offset, n, &view), "a view");
  if (psize == 1)
    TRY(r, tstor_storage_fill(view, pat[0]), "filling %zu bytes at offset %zu", n, offset);
  else
    TRY(r, tstor_storage_fill_pattern(view, pat, psize),
        "filling %zu bytes at offset %zu with a %zu-byte pattern", n, offset, psize);
  TRY(r, download(r, back, buf), "reading back");
  for (size_t i = 0; i < n; i++)
    EXPECT(r, back[offset + i] == pat[i % psize],
           "%zu-byte pattern over %zu bytes at offset %zu: byte %zu reads 0x%02x, not 0x%02x",
           psize, n, offset, i, back[offset + i], pat[i % psize]);
  EXPECT(r, mismatch(guard, back, offset) == SIZE_MAX && mismatch(guard + offset + n,
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
  begin(r, "fill bytes", d->label);
  const size_t sizes[] = {1, 7, 256, 4097, (1 << 20) + 1};
  const size_t offsets[] = {0, 1, 13};
  unsigned seed = 200;
  for (size_t i = 0; i < COUNT(sizes); i++)
    for (size_t j = 0; j < COUNT(offsets) && r->status == CONF_PASS; j++) {
      unsigned char v = (unsigned char)(0x11 * (i + j + 1));
      fill_one(r, d, sizes[i], offsets[j], &v, 1, seed++);
    }
  notef(r, "%zu sizes x %zu offsets", COUNT(sizes), COUNT(offsets));
  end(r);
}

static void check_fill_patterns(conf_run *r, const conf_device *d) {
  begin(r, "fill patterns", d->label);
  const size_t psizes[] = {2, 4, 8, 16};
  const size_t counts[] = {1, 3, 1000, 4097};
  const size_t offsets[] = {0, 5};
  unsigned char pat[16];
  unsigned seed = 300;
  for (size_t p = 0; p < COUNT(psizes); p++)
    for (size_t c = 0; c < COUNT(counts); c++)
      for (size_t o = 0; o < COUNT(offsets) && r->status == CONF_PASS; o++) {
        pattern(pat, sizeof pat, seed);
        fill_one(r, d, psizes[p] * counts[c], offsets[o], pat, psizes[p], seed++);
      }
  notef(r, "patterns of 2, 4, 8 and 16 bytes");
  end(r);
}

static void check_bad_fills(conf_run *r, const conf_device *d) {
  begin(r, "bad fills refused", d->label);
  tstor_storage *s = NULL;
  unsigned char in[24], back[24], pat[32] = {1, 2, 3};
  pattern(in, sizeof in, 77);
  TRY(r, tstor_storage_new(r->ctx, d->dev, sizeof in, &s), "allocating");
  TRY(r, upload(r, s, in), "writing");
  const struct {
    size_t psize;
    const char *what;
  } bad[] = {{0, "a 0-byte pattern"}, {3, "a 3-byte pattern"}, {32, "a 32-byte pattern"},
             {16, "a 16-byte pattern over 24 bytes"}};
  for (size_t i = 0; i < COUNT(bad); i++) {
    int rc = tstor_storage_fill_pattern(s, pat, bad[i].psize);
    EXPECT(r, rc != 0, "%s was accepted", bad[i].what);
    EXPECT(r, tstor_last_error()[0] != '\0', "%s: refused without a message", bad[i].what);
    TRY(r, download(r, back, s), "reading back");
    EXPECT(r, mismatch(in, back, sizeof in) == SIZE_MAX, "%s changed the bytes", bad[i].what);
  }
  int rc = tstor_storage_fill_pattern(s, NULL, 4);
  EXPECT(r, rc == TSTOR_EINVAL, "a NULL pattern gave %s, not TSTOR_EINVAL", tstor_err_name(rc));
out:
  tstor_storage_release(s);
  end(r);
}

static void section_fill(conf_run *r) {
  if (setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    if (!d->has_data) {
      begin(r, "fill bytes", d->label);
      tstor_storage *s = NULL;
      TRY(r, tstor_storage_new(r->ctx, d->dev, 64, &s), "allocating");
      TRY(r, tstor_storage_fill(s, 1), "filling a sizes-only storage");
      skipf(r, "no data to look at");
    out:
      tstor_storage_release(s);
      end(r);
      continue;
    }
    check_fill_bytes(r, d);
    check_fill_patterns(r, d);
    check_bad_fills(r, d);
  }
  teardown(r);
}

/* ============================================================= async ===== */

#define ASYNC_BYTES ((size_t)4 << 20)

static void check_streams_events(conf_run *r, const conf_device *d) {
  begin(r, "streams and events", d->label);
  tstor_stream *s = NULL;
  tstor_event *e = NULL;
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s), "creating a stream");
  TRY(r, tstor_stream_synchronize(s), "synchronizing an empty stream");
  TRY(r, tstor_event_new(r->ctx, d->dev, &e), "creating an event");
  TRY(r, tstor_event_query(e), "querying an event never recorded");
  TRY(r, tstor_event_synchronize(e), "waiting for an event never recorded");
  TRY(r, tstor_event_record(e, s), "recording on an empty stream");
  TRY(r, tstor_event_synchronize(e), "waiting for it");
  TRY(r, tstor_event_query(e), "querying it afterwards");
  TRY(r, tstor_synchronize(r->ctx, d->dev), "synchronizing the device");
out:
  tstor_event_free(e);
  tstor_stream_free(s);
  end(r);
}

/* A chain of dependent copies on one stream: only in-order execution gives
 * the right bytes at the end. */
static void check_ordering(conf_run *r, const conf_device *d) {
  begin(r, "ordering on a stream", d->label);
  const size_t n = ASYNC_BYTES;
  tstor_stream *s = NULL;
  tstor_event *e = NULL;
  tstor_storage *x = NULL, *y = NULL, *a1 = NULL, *a2 = NULL, *b = NULL;
  unsigned char *h1 = xmalloc(n), *h2 = xmalloc(n), *hb = xmalloc(n);
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s), "creating a stream");
  TRY(r, tstor_event_new(r->ctx, d->dev, &e), "creating an event");
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &x), "allocating");
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &y), "allocating");
  TRY(r, host_storage(r, h1, n, &a1), "wrapping host memory");
  TRY(r, host_storage(r, h2, n, &a2), "wrapping host memory");
  TRY(r, host_storage(r, hb, n, &b), "wrapping host memory");
  int polls = 0, pending = 0;
  for (unsigned round = 0; round < 4; round++) {
    pattern(h1, n, 500 + round);
    pattern(h2, n, 600 + round);
    memset(hb, 0, n);
    TRY(r, tstor_storage_copy_async(x, a1, s), "queueing host -> x");
    TRY(r, tstor_storage_copy_async(x, a2, s), "queueing host -> x again");
    TRY(r, tstor_storage_copy_async(y, x, s), "queueing x -> y");
    TRY(r, tstor_storage_copy_async(b, y, s), "queueing y -> host");
    TRY(r, tstor_event_record(e, s), "recording an event");
    int rc;
    while ((rc = tstor_event_query(e)) == TSTOR_EAGAIN && polls < 1000) {
      polls++;
      pending = 1;
    }
    EXPECT(r, rc == 0 || rc == TSTOR_EAGAIN, "event_query gave %s", tstor_err_name(rc));
    TRY(r, tstor_event_synchronize(e), "waiting for the event");
    TRY(r, tstor_event_query(e), "querying the event once waited for");
    size_t at = mismatch(h2, hb, n);
    EXPECT(r, at == SIZE_MAX, "round %u: byte %zu of the result is not the last write", round,
           at);
  }
  notef(r, "%s", pending ? "copies were still running when queried" : "copies ran synchronously");
out:
  tstor_storage_release(a1);
  tstor_storage_release(a2);
  tstor_storage_release(b);
  tstor_storage_release(x);
  tstor_storage_release(y);
  tstor_event_free(e);
  tstor_stream_free(s);
  free(h1);
  free(h2);
  free(hb);
  end(r);
}

/* s2 reads what s1 writes, ordered only by an event. */
static void check_wait_event(conf_run *r, const conf_device *d) {
  begin(r, "stream waits for event", d->label);
  const size_t n = ASYNC_BYTES;
  tstor_stream *s1 = NULL, *s2 = NULL;
  tstor_event *e = NULL;
  tstor_storage *x = NULL, *a = NULL, *b = NULL;
  unsigned char *ha = xmalloc(n), *hb = xmalloc(n);
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s1), "creating a stream");
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s2), "creating a stream");
  TRY(r, tstor_event_new(r->ctx, d->dev, &e), "creating an event");
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &x), "allocating");
  TRY(r, host_storage(r, ha, n, &a), "wrapping host memory");
  TRY(r, host_storage(r, hb, n, &b), "wrapping host memory");
  for (unsigned round = 0; round < 4; round++) {
    pattern(ha, n, 700 + round);
    memset(hb, 0, n);
    TRY(r, tstor_storage_copy_async(x, a, s1), "queueing host -> x on stream 1");
    TRY(r, tstor_event_record(e, s1), "recording on stream 1");
    TRY(r, tstor_stream_wait_event(s2, e), "stream 2 waiting for the event");
    TRY(r, tstor_storage_copy_async(b, x, s2), "queueing x -> host on stream 2");
    TRY(r, tstor_stream_synchronize(s2), "synchronizing stream 2");
    size_t at = mismatch(ha, hb, n);
    EXPECT(r, at == SIZE_MAX, "round %u: stream 2 read byte %zu before stream 1 wrote it", round,
           at);
    TRY(r, tstor_stream_synchronize(s1), "synchronizing stream 1");
  }
out:
  tstor_storage_release(a);
  tstor_storage_release(b);
  tstor_storage_release(x);
  tstor_event_free(e);
  tstor_stream_free(s1);
  tstor_stream_free(s2);
  free(ha);
  free(hb);
  end(r);
}

static void check_device_synchronize(conf_run *r, const conf_device *d) {
  begin(r, "device synchronize", d->label);
  const size_t n = ASYNC_BYTES;
  tstor_stream *s[2] = {NULL, NULL};
  tstor_storage *x[2] = {NULL, NULL}, *a[2] = {NULL, NULL}, *b[2] = {NULL, NULL};
  unsigned char *ha[2] = {xmalloc(n), xmalloc(n)}, *hb[2] = {xmalloc(n), xmalloc(n)};
  for (int i = 0; i < 2; i++) {
    pattern(ha[i], n, 800 + (unsigned)i);
    memset(hb[i], 0, n);
    TRY(r, tstor_stream_new(r->ctx, d->dev, &s[i]), "creating a stream");
    TRY(r, tstor_storage_new(r->ctx, d->dev, n, &x[i]), "allocating");
    TRY(r, host_storage(r, ha[i], n, &a[i]), "wrapping host memory");
    TRY(r, host_storage(r, hb[i], n, &b[i]), "wrapping host memory");
  }
  for (int i = 0; i < 2; i++) {
    TRY(r, tstor_storage_copy_async(x[i], a[i], s[i]), "queueing host -> device");
    TRY(r, tstor_storage_copy_async(b[i], x[i], s[i]), "queueing device -> host");
  }
  TRY(r, tstor_synchronize(r->ctx, d->dev), "synchronizing the device");
  for (int i = 0; i < 2; i++)
    EXPECT(r, mismatch(ha[i], hb[i], n) == SIZE_MAX,
           "stream %d's work was not done when synchronize returned", i + 1);
out:
  for (int i = 0; i < 2; i++) {
    tstor_stream_free(s[i]);
    tstor_storage_release(a[i]);
    tstor_storage_release(b[i]);
    tstor_storage_release(x[i]);
    free(ha[i]);
    free(hb[i]);
  }
  end(r);
}

/* Released while a stream still writes into it: with record_stream the block
 * may not be handed out again until that work is done. */
static void check_record_stream(conf_run *r, const conf_device *d) {
  begin(r, "record_stream", d->label);
  const size_t n = ASYNC_BYTES;
  tstor_stream *s = NULL;
  tstor_storage *x = NULL, *z = NULL, *a = NULL;
  unsigned char *ha = xmalloc(n), *hz = xmalloc(n), *back = xmalloc(n);
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s), "creating a stream");
  TRY(r, host_storage(r, ha, n, &a), "wrapping host memory");
  for (unsigned round = 0; round < 4; round++) {
    pattern(ha, n, 900 + round);
    pattern(hz, n, 950 + round);
    TRY(r, tstor_storage_new(r->ctx, d->dev, n, &x), "allocating");
    TRY(r, tstor_storage_copy_async(x, a, s), "queueing host -> device");
    TRY(r, tstor_storage_record_stream(x, s), "record_stream");
    tstor_storage_release(x);
    x = NULL;
    TRY(r, tstor_storage_new(r->ctx, d->dev, n, &z), "allocating again");
    TRY(r, upload(r, z, hz), "writing the new block");
    TRY(r, tstor_stream_synchronize(s), "synchronizing");
    TRY(r, download(r, back, z), "reading the new block");
    size_t at = mismatch(hz, back, n);
    EXPECT(r, at == SIZE_MAX,
           "round %u: byte %zu of a new allocation reads other bytes (reused while a stream "
           "still wrote to it?)",
           round, at);
    tstor_storage_release(z);
    z = NULL;
  }
out:
  tstor_storage_release(x);
  tstor_storage_release(z);
  tstor_storage_release(a);
  tstor_stream_free(s);
  free(ha);
  free(hz);
  free(back);
  end(r);
}

static void check_stream_free_waits(conf_run *r, const conf_device *d) {
  begin(r, "stream free waits", d->label);
  const size_t n = ASYNC_BYTES;
  tstor_stream *s = NULL;
  tstor_storage *x = NULL, *a = NULL;
  unsigned char *ha = xmalloc(n), *back = xmalloc(n);
  pattern(ha, n, 990);
  TRY(r, tstor_stream_new(r->ctx, d->dev, &s), "creating a stream");
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &x), "allocating");
  TRY(r, host_storage(r, ha, n, &a), "wrapping host memory");
  TRY(r, tstor_storage_copy_async(x, a, s), "queueing host -> device");
  tstor_stream_free(s);
  s = NULL;
  TRY(r, download(r, back, x), "reading");
  EXPECT(r, mismatch(ha, back, n) == SIZE_MAX, "stream_free returned before its copy was done");
out:
  tstor_stream_free(s);
  tstor_storage_release(x);
  tstor_storage_release(a);
  free(ha);
  free(back);
  end(r);
}

static void section_async(conf_run *r) {
  if (setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    check_streams_events(r, d);
    if (!d->has_data) continue;
    check_ordering(r, d);
    check_wait_event(r, d);
    check_device_synchronize(r, d);
    check_record_stream(r, d);
    check_stream_free_waits(r, d);
  }
  teardown(r);
}

/* ============================================================= stats ===== */

static void check_stats_counts(conf_run *r, const conf_device *d) {
  begin(r, "counts", d->label);
  const size_t sizes[] = {1, 1000, 65536, 3};
  tstor_storage *s[4] = {NULL};
  tstor_stats b, m, a;
  size_t sum = 0;
  TRY(r, read_stats(r, d, &b), "reading statistics");
  for (int i = 0; i < 4; i++) {
    TRY(r, tstor_storage_new(r->ctx, d->dev, sizes[i], &s[i]), "allocating");
    sum += sizes[i];
  }
  TRY(r, read_stats(r, d, &m), "reading statistics");
  if (m.allocated == b.allocated && m.alloc_count == b.alloc_count) {
    skipf(r, "the backend keeps no statistics");
    goto out;
  }
  EXPECT(r, m.allocated >= b.allocated + sum, "allocated grew by %llu bytes for %zu allocated",
         (unsigned long long)(m.allocated - b.allocated), sum);
  if (m.alloc_count != b.alloc_count)
    EXPECT(r, m.alloc_count == b.alloc_count + 4, "alloc_count grew by %llu for 4 allocations",
           (unsigned long long)(m.alloc_count - b.alloc_count));
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
  TRY(r, read_stats(r, d, &a), "reading statistics");
  EXPECT(r, a.allocated == b.allocated, "allocated is %llu after freeing, %llu before allocating",
         (unsigned long long)a.allocated, (unsigned long long)b.allocated);
  if (a.free_count != m.free_count)
    EXPECT(r, a.free_count == m.free_count + 4, "free_count grew by %llu for 4 frees",
           (unsigned long long)(a.free_count - m.free_count));
  notef(r, "allocated +%llu bytes for %zu asked, then back",
        (unsigned long long)(m.allocated - b.allocated), sum);
out:
  for (int i = 0; i < 4; i++) tstor_storage_release(s[i]);
  end(r);
}

static void check_stats_peak(conf_run *r, const conf_device *d) {
  begin(r, "peak and reset", d->label);
  tstor_storage *s = NULL;
  tstor_stats b, a;
  TRY(r, read_stats(r, d, &b), "reading statistics");
  TRY(r, tstor_storage_new(r->ctx, d->dev, 1 << 20, &s), "allocating 1 MiB");
  tstor_storage_release(s);
  s = NULL;
  TRY(r, read_stats(r, d, &a), "reading statistics");
  if (a.peak_allocated == 0) {
    skipf(r, "the backend keeps no peak");
    goto out;
  }
  EXPECT(r, a.peak_allocated >= b.allocated + (1 << 20),
         "peak_allocated is %llu after 1 MiB on top of %llu", (unsigned long long)a.peak_allocated,
         (unsigned long long)b.allocated);
  TRY(r, tstor_device_reset_peak(r->ctx, d->dev), "resetting the peak");
  TRY(r, read_stats(r, d, &a), "reading statistics");
  EXPECT(r, a.peak_allocated == a.allocated, "after reset, peak_allocated %llu != allocated %llu",
         (unsigned long long)a.peak_allocated, (unsigned long long)a.allocated);
out:
  tstor_storage_release(s);
  end(r);
}

static void check_stats_cache(conf_run *r, const conf_device *d) {
  begin(r, "empty cache", d->label);
  tstor_storage *s = NULL;
  tstor_stats b, a;
  TRY(r, tstor_storage_new(r->ctx, d->dev, 12345, &s), "allocating");
  TRY(r, read_stats(r, d, &b), "reading statistics");
  TRY(r, tstor_device_empty_cache(r->ctx, d->dev), "emptying the cache");
  TRY(r, read_stats(r, d, &a), "reading statistics");
  EXPECT(r, a.allocated == b.allocated, "empty_cache changed allocated (%llu -> %llu)",
         (unsigned long long)b.allocated, (unsigned long long)a.allocated);
  if (a.reserved) EXPECT(r, a.reserved >= a.allocated, "reserved %llu < allocated %llu",
                         (unsigned long long)a.reserved, (unsigned long long)a.allocated);
out:
  tstor_storage_release(s);
  end(r);
}

static void section_stats(conf_run *r) {
  if (setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    begin(r, "start at zero", r->devs[i].label);
    if (!r->devs[i].stats_ok)
      failf(r, "statistics cannot be read");
    else if (r->devs[i].start_allocated != 0)
      failf(r, "a fresh context shows %llu bytes allocated", r->devs[i].start_allocated);
    end(r);
    check_stats_counts(r, &r->devs[i]);
    check_stats_peak(r, &r->devs[i]);
    check_stats_cache(r, &r->devs[i]);
  }
  teardown(r);
}

/* =========================================================== threads ===== */

typedef struct worker {
  conf_run *r;
  const conf_device *d;
  tstor_storage *shared; /* for the shared-storage check */
  const unsigned char *shared_bytes;
  size_t shared_n;
  unsigned id;
  int use_stream;
  char error[CONF_REASON];
} worker;

static void werr(worker *w, int rc, const char *what) {
  if (w->error[0]) return;
  if (rc)
    snprintf(w->error, sizeof w->error, "thread %u: %s: %s (%s)", w->id, what, tstor_err_name(rc),
             tstor_last_error());
  else
    snprintf(w->error, sizeof w->error, "thread %u: %s", w->id, what);
}

static uint32_t next_random(uint32_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}

/* Allocate, write, read back, free; with use_stream, through a stream of its own. */
static void *alloc_copy_worker(void *arg) {
  worker *w = arg;
  conf_run *r = w->r;
  uint32_t rnd = 12345u + w->id * 7919u;
  unsigned char *in = xmalloc(70000), *back = xmalloc(70000);
  tstor_stream *s = NULL;
  int rc;
  if (w->use_stream && (rc = tstor_stream_new(r->ctx, w->d->dev, &s)) != 0) {
    werr(w, rc, "creating a stream");
    goto out;
  }
  for (int it = 0; it < 100 && !w->error[0]; it++) {
    size_t n = 1 + next_random(&rnd) % 70000;
    tstor_storage *x = NULL, *hi = NULL, *hb = NULL;
    pattern(in, n, w->id * 1000 + (unsigned)it);
    memset(back, 0, n);
    if ((rc = tstor_storage_new(r->ctx, w->d->dev, n, &x)) != 0) {
      werr(w, rc, "allocating");
    } else if (!s) {
      if ((rc = upload(r, x, in)) != 0) werr(w, rc, "writing");
      else if ((rc = download(r, back, x)) != 0) werr(w, rc, "reading");
    } else {
      if ((rc = host_storage(r, in, n, &hi)) != 0 || (rc = host_storage(r, back, n, &hb)) != 0)
        werr(w, rc, "wrapping host memory");
      else if ((rc = tstor_storage_copy_async(x, hi, s)) != 0 ||
               (rc = tstor_storage_copy_async(hb, x, s)) != 0)
        werr(w, rc, "queueing copies");
      else if ((rc = tstor_stream_synchronize(s)) != 0)
        werr(w, rc, "synchronizing");
    }
    if (!w->error[0] && mismatch(in, back, n) != SIZE_MAX) werr(w, 0, "read back other bytes");
    tstor_storage_release(hi);
    tstor_storage_release(hb);
    tstor_storage_release(x);
  }
out:
  tstor_stream_free(s);
  free(in);
  free(back);
  return NULL;
}

static void *shared_reader(void *arg) {
  worker *w = arg;
  unsigned char *back = xmalloc(w->shared_n);
  for (int it = 0; it < 50 && !w->error[0]; it++) {
    tstor_storage *mine = tstor_storage_retain(w->shared);
    int rc = download(w->r, back, mine);
    if (rc) werr(w, rc, "reading the shared storage");
    else if (mismatch(w->shared_bytes, back, w->shared_n) != SIZE_MAX)
      werr(w, 0, "the shared storage read back other bytes");
    tstor_storage_release(mine);
  }
  free(back);
  return NULL;
}

static void run_workers(conf_run *r, const conf_device *d, void *(*fn)(void *), int use_stream,
                        tstor_storage *shared, const unsigned char *bytes, size_t n) {
  int nt = r->opt->threads;
  worker *w = calloc((size_t)nt, sizeof *w);
  pthread_t *th = calloc((size_t)nt, sizeof *th);
  int started = 0;
  if (!w || !th) {
    failf(r, "out of host memory");
    goto out;
  }
  for (int i = 0; i < nt; i++) {
    w[i] = (worker){r, d, shared, bytes, n, (unsigned)i + 1, use_stream, ""};
    if (pthread_create(&th[i], NULL, fn, &w[i]) != 0) {
      failf(r, "cannot start thread %d", i + 1);
      break;
    }
    started++;
  }
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < started; i++)
    if (w[i].error[0]) {
      failf(r, "%s", w[i].error);
      break;
    }
  notef(r, "%d threads", nt);
out:
  free(w);
  free(th);
}

static void section_threads(conf_run *r) {
  if (setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    if (!d->first) continue;
    if (!d->has_data) {
      begin(r, "parallel allocation", d->label);
      skipf(r, "no data");
      end(r);
      continue;
    }
    begin(r, "parallel alloc and copy", d->label);
    run_workers(r, d, alloc_copy_worker, 0, NULL, NULL, 0);
    end(r);
    begin(r, "parallel streams", d->label);
    run_workers(r, d, alloc_copy_worker, 1, NULL, NULL, 0);
    end(r);

    begin(r, "one storage, many readers", d->label);
    const size_t n = 100000;
    unsigned char *bytes = xmalloc(n);
    tstor_storage *s = NULL;
    pattern(bytes, n, 4242);
    TRY(r, tstor_storage_new(r->ctx, d->dev, n, &s), "allocating");
    TRY(r, upload(r, s, bytes), "writing");
    run_workers(r, d, shared_reader, 0, s, bytes, n);
    EXPECT(r, tstor_storage_use_count(s) == 1, "use count is %ld after the readers",
           tstor_storage_use_count(s));
  out:
    tstor_storage_release(s);
    free(bytes);
    end(r);
  }
  teardown(r);
}

/* ============================================================== args ===== */

/* A failed call must say why and change nothing, allocated bytes included. */
static int refused(conf_run *r, const conf_device *d, int rc, const tstor_stats *before,
                   const char *what) {
  if (rc == 0) {
    failf(r, "%s was accepted", what);
    return 0;
  }
  if (!tstor_last_error()[0]) {
    failf(r, "%s: refused (%s) without a message", what, tstor_err_name(rc));
    return 0;
  }
  tstor_stats after = TSTOR_STATS_INIT;
  if (read_stats(r, d, &after) == 0 && after.allocated != before->allocated) {
    failf(r, "%s: refused, but allocated went from %llu to %llu", what,
          (unsigned long long)before->allocated, (unsigned long long)after.allocated);
    return 0;
  }
  return 1;
}

static void check_bad_device(conf_run *r, const conf_device *d) {
  begin(r, "bad device index", d->label);
  tstor_stats st = TSTOR_STATS_INIT;
  tstor_storage *s = NULL;
  tstor_stream *str = NULL;
  tstor_event *e = NULL;
  TRY(r, read_stats(r, d, &st), "reading statistics");
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
  end(r);
}

static void check_bad_copies(conf_run *r, const conf_device *d) {
  begin(r, "bad copies and views", d->label);
  tstor_stats st = TSTOR_STATS_INIT;
  tstor_storage *a = NULL, *b = NULL, *v = NULL;
  tstor_stream *s = NULL;
  unsigned char in[101], back[101];
  pattern(in, sizeof in, 31);
  TRY(r, tstor_storage_new(r->ctx, d->dev, 100, &a), "allocating");
  TRY(r, tstor_storage_new(r->ctx, d->dev, 101, &b), "allocating");
  if (d->has_data) TRY(r, upload(r, b, in), "writing");
  TRY(r, read_stats(r, d, &st), "reading statistics");
  int rc = tstor_storage_copy(b, a);
  if (!refused(r, d, rc, &st, "copying 100 bytes into 101")) goto out;
  EXPECT(r, rc == TSTOR_ESIZE, "a size mismatch gave %s, not TSTOR_ESIZE", tstor_err_name(rc));
  if (d->has_data) {
    TRY(r, download(r, back, b), "reading");
    EXPECT(r, mismatch(in, back, sizeof back) == SIZE_MAX, "the refused copy changed bytes");
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
  end(r);
}

static void section_args(conf_run *r) {
  if (setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    if (!r->devs[i].first) continue;
    check_bad_device(r, &r->devs[i]);
    check_bad_copies(r, &r->devs[i]);
  }
  teardown(r);
}

/* ========================================================== sections ===== */

const conf_section conf_sections[] = {
    {"load", "loads, names its devices, copy paths, init/fini again", section_load},
    {"decline", "declines without hardware, leaving nothing behind", section_decline},
    {"alloc", "0 bytes, small, large and impossible sizes, alignment, resize", section_alloc},
    {"copy", "host round trips at many sizes and offsets, device to device", section_copy},
    {"fill", "byte and pattern fills through views; bad patterns refused", section_fill},
    {"async", "streams, events, ordering, record_stream", section_async},
    {"stats", "allocated back to zero, counts, peaks", section_stats},
    {"threads", "concurrent allocation, copies and streams", section_threads},
    {"args", "bad devices, sizes and views refused, nothing changed", section_args},
};
const int conf_nsections = (int)(sizeof conf_sections / sizeof conf_sections[0]);
