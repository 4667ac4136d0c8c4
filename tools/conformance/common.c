/* What every section of `tstor conformance` shares: reporting a check's
 * result, test patterns, host round trips through the cpu device, and the
 * setup and teardown that open a section's context and check at its end that
 * every device's `allocated` is back where it started. */
#include "config.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"

/* ------------------------------------------------------------- reporting */

void conf_begin(conf_run *r, const char *check, const char *device) {
  r->check = check;
  r->device = device ? device : "-";
  r->status = CONF_PASS;
  r->reason[0] = '\0';
  conf_emit_begin(r, check, r->device);
}

void conf_end(conf_run *r) { conf_emit(r, r->check, r->device, r->status, r->reason); }

static void conf_vset(conf_run *r, conf_status status, const char *fmt, va_list ap) {
  r->status = status;
  vsnprintf(r->reason, sizeof r->reason, fmt, ap);
}

/* conf_failf, conf_skipf and conf_notef each keep their va_start/va_end: C
 * cannot forward `...`, and the shared part already takes a va_list. */
/* The first failure of a check is its reason. */
void conf_failf(conf_run *r, const char *fmt, ...) {
  if (r->status == CONF_FAIL) return;
  va_list ap;
  va_start(ap, fmt);
  conf_vset(r, CONF_FAIL, fmt, ap);
  va_end(ap);
}

/* "what: TSTOR_ENOMEM (detail)" */
void conf_fail_rc(conf_run *r, int rc, const char *fmt, ...) {
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

void conf_skipf(conf_run *r, const char *fmt, ...) {
  if (r->status == CONF_FAIL) return;
  va_list ap;
  va_start(ap, fmt);
  conf_vset(r, CONF_SKIP, fmt, ap);
  va_end(ap);
}

/* A remark on a passing check (what was seen); failures keep their reason. */
void conf_notef(conf_run *r, const char *fmt, ...) {
  if (r->status != CONF_PASS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->reason, sizeof r->reason, fmt, ap);
  va_end(ap);
}

/* --------------------------------------------------------------- helpers */

/* Bytes that differ with position and seed, so that a shifted, truncated or
 * stale copy never matches by accident. */
void conf_pattern(unsigned char *p, size_t n, unsigned seed) {
  uint32_t x = 0x9e3779b9u * (seed + 1);
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (unsigned char)(x >> 11);
  }
}

/* Index of the first byte where a and b differ, or SIZE_MAX. */
size_t conf_mismatch(const unsigned char *a, const unsigned char *b, size_t n) {
  if (memcmp(a, b, n) == 0) return SIZE_MAX;
  for (size_t i = 0; i < n; i++)
    if (a[i] != b[i]) return i;
  return SIZE_MAX;
}

void *conf_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "tstor conformance: out of host memory (%zu bytes)\n", n);
    exit(EXIT_FAILURE);
  }
  return p;
}

int conf_upload(conf_run *r, tstor_storage *dst, const void *buf) {
  tstor_storage *h;
  int rc = tstor_storage_wrap(r->ctx, r->host, (void *)buf, tstor_storage_nbytes(dst), &h);
  if (rc) return rc;
  rc = tstor_storage_copy(dst, h);
  tstor_storage_release(h);
  return rc;
}

int conf_download(conf_run *r, void *buf, const tstor_storage *src) {
  tstor_storage *h;
  int rc = tstor_storage_wrap(r->ctx, r->host, buf, tstor_storage_nbytes(src), &h);
  if (rc) return rc;
  rc = tstor_storage_copy(h, src);
  tstor_storage_release(h);
  return rc;
}

/* A host buffer as a storage of the context's host device. */
int conf_host_storage(conf_run *r, void *buf, size_t n, tstor_storage **out) {
  return tstor_storage_wrap(r->ctx, r->host, buf, n, out);
}

int conf_read_stats(conf_run *r, const conf_device *d, tstor_stats *s) {
  memset(s, 0, sizeof *s);
  return tstor_device_stats(r->ctx, d->dev, s);
}

const char *conf_path_name(int path) {
  switch (path) {
  case TSTOR_COPY_DIRECT: return "direct";
  case TSTOR_COPY_HOST: return "host";
  case TSTOR_COPY_STAGED: return "staged";
  case TSTOR_COPY_CHECK: return "sizes only";
  case TSTOR_COPY_NONE: return "impossible";
  }
  return "?";
}

int conf_find_backend(tstor_context *ctx, const char *name, tstor_backend_info *out) {
  for (int i = 0; i < tstor_backend_count(ctx); i++)
    if (tstor_backend_get(ctx, i, out) == 0 && strcmp(out->name, name) == 0) return 0;
  return -1;
}

/* Whether a device type is one the module under test registered. */
int conf_is_target_type(conf_run *r, tstor_context *ctx, int type) {
  const char *name = tstor_device_type_name(ctx, type);
  return name && (!r->opt->add_cpu || strcmp(name, "cpu") != 0);
}

int conf_open_context(conf_run *r, const char *const *extra, int nextra, tstor_context **out) {
  char *text = conf_config_text(r->opt, extra, nextra);
  int rc = tstor_context_open_string(text, "conformance.ini", out);
  free(text);
  return rc;
}

/* Opens the section's context and lists the devices under test; reports a
 * "setup" row and returns -1 when there is nothing to test. */
int conf_setup(conf_run *r) {
  conf_begin(r, "setup", NULL);
  int rc = conf_open_context(r, NULL, 0, &r->ctx);
  if (rc) {
    conf_fail_rc(r, rc, "opening a context with the module");
    conf_end(r);
    return -1;
  }
  tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
  memset(&info, 0, sizeof info);
  info.message = "no such section";
  if (conf_find_backend(r->ctx, r->opt->name, &info) != 0 || info.state != TSTOR_BACKEND_LOADED) {
    if (info.state == TSTOR_BACKEND_DECLINED)
      conf_skipf(r, "the module declined: %s", info.message);
    else
      conf_failf(r, "the module did not load: %s", info.message);
    goto out;
  }
  TRY(r, tstor_device_parse(r->ctx, "cpu", &r->host), "finding the host device");
  r->ndevs = 0;
  for (int t = 0; t < tstor_device_type_count(r->ctx); t++) {
    if (!conf_is_target_type(r, r->ctx, t)) continue;
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
      d->stats_ok = conf_read_stats(r, d, &st) == 0;
      d->start_allocated = st.allocated;
      if (count == 1) break;
    }
  }
  EXPECT(r, r->ndevs > 0, "the module offers no device");
  return 0; /* a setup that works is not worth a row */
out:
  conf_end(r);
  tstor_context_close(r->ctx);
  r->ctx = NULL;
  return -1;
}

/* Every section ends here: what it allocated must all be given back. */
void conf_teardown(conf_run *r) {
  for (int i = 0; i < r->ndevs; i++) {
    conf_device *d = &r->devs[i];
    conf_begin(r, "allocated back to start", d->label);
    tstor_stats st = TSTOR_STATS_INIT;
    int rc = conf_read_stats(r, d, &st);
    if (rc)
      conf_fail_rc(r, rc, "reading statistics");
    else if (!d->stats_ok)
      conf_failf(r, "statistics could not be read when the section began");
    else if (st.allocated != d->start_allocated)
      conf_failf(r, "allocated is %llu bytes, was %llu when the section began",
            (unsigned long long)st.allocated, d->start_allocated);
    conf_end(r);
  }
  tstor_context_close(r->ctx);
  r->ctx = NULL;
}

/* --------------------------------------------------------------- messages */

/* What the core writes when a backend gave no message (loader.c, storage.c,
 * copy.c). */
static const char *const stand_ins[] = {
    "declined",
    "* allocator failed for * bytes",
    "*:*: cannot allocate * bytes",
    "copy * -> * of * bytes failed",
};

int conf_no_own_message(const char *msg) {
  if (msg == NULL || msg[0] == '\0') return 1;
  for (size_t i = 0; i < COUNT(stand_ins); i++)
    if (fnmatch(stand_ins[i], msg, 0) == 0) return 1;
  return 0;
}

void conf_check_message(conf_run *r, const char *what) {
  const char *msg = tstor_last_error();
  if (msg[0] == '\0')
    conf_failf(r, "%s: refused without a message", what);
  else if (r->opt->strict && conf_no_own_message(msg))
    conf_failf(r, "%s: the backend set no message; the user sees only the core's stand-in "
                  "\"%s\" (--strict)", what, msg);
}
