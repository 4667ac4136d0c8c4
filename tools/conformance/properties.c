/* The properties section (backend ABI 1.5): what a device reports of its
 * memory holds together and follows the allocations, and its id is stable.
 * Every field is optional, and so is the op (a backend built for an older
 * ABI): what is not reported passes with a note saying so, under --strict
 * too, and what is reported must be right. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "checks.h"

static int read_properties(conf_run *r, tstor_context *ctx, const conf_device *d,
                           tstor_device_properties *p) {
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  (void)r;
  return tstor_device_get_properties(ctx, d->dev, p);
}

static void check_consistent(conf_run *r, const conf_device *d, const tstor_device_properties *p) {
  conf_begin(r, "free, total, largest", d->label);
  const uint32_t both = TSTOR_PROP_FREE | TSTOR_PROP_TOTAL;
  if ((p->reported & both) == both)
    EXPECT(r, p->free_bytes <= p->total_bytes, "free %llu bytes > total %llu",
           (unsigned long long)p->free_bytes, (unsigned long long)p->total_bytes);
  if ((p->reported & (TSTOR_PROP_MAX_ALLOCATION | TSTOR_PROP_FREE)) ==
      (TSTOR_PROP_MAX_ALLOCATION | TSTOR_PROP_FREE))
    EXPECT(r, p->max_allocation <= p->free_bytes, "largest allocation %llu > free %llu",
           (unsigned long long)p->max_allocation, (unsigned long long)p->free_bytes);
  if (p->reported & TSTOR_PROP_TOTAL)
    EXPECT(r, p->total_bytes > 0, "total memory reported as 0 bytes");
  if (r->status == CONF_PASS)
    conf_notef(r, "reports%s%s%s%s%s", p->reported & TSTOR_PROP_FREE ? " free" : "",
               p->reported & TSTOR_PROP_TOTAL ? " total" : "",
               p->reported & TSTOR_PROP_ALIGNMENT ? " alignment" : "",
               p->reported & TSTOR_PROP_MAX_ALLOCATION ? " largest" : "",
               p->reported & TSTOR_PROP_ID ? " id" : "");
out:
  conf_end(r);
}

/* Allocating N bytes lowers free memory by at least N, where free memory is
 * the device's own: host memory is the machine's, which every process
 * shares and whose pages an allocation need not touch. */
static void check_free_follows(conf_run *r, const conf_device *d,
                               const tstor_device_properties *p) {
  conf_begin(r, "allocation lowers free", d->label);
  tstor_storage *s = NULL;
  tstor_device_properties b, a;
  if (!(p->reported & TSTOR_PROP_FREE)) {
    conf_notef(r, "free memory is not reported");
    goto out;
  }
  if (tstor_device_type_flags(r->ctx, d->dev.type) & TSTOR_DEVICE_HOST) {
    conf_notef(r, "not checked: host memory is the machine's, shared with every process");
    goto out;
  }
  size_t n = (size_t)4 << 20;
  if (p->reported & TSTOR_PROP_TOTAL && p->total_bytes / 4 < n) n = (size_t)(p->total_bytes / 4);
  TRY(r, tstor_device_empty_cache(r->ctx, d->dev), "emptying the cache");
  TRY(r, read_properties(r, r->ctx, d, &b), "reading the properties");
  TRY(r, tstor_storage_new(r->ctx, d->dev, n, &s), "allocating %zu bytes", n);
  TRY(r, read_properties(r, r->ctx, d, &a), "reading the properties");
  EXPECT(r, a.free_bytes + n <= b.free_bytes, "free went from %llu to %llu for %zu allocated",
         (unsigned long long)b.free_bytes, (unsigned long long)a.free_bytes, n);
  if (r->status == CONF_PASS)
    conf_notef(r, "free -%llu bytes for %zu", (unsigned long long)(b.free_bytes - a.free_bytes), n);
out:
  tstor_storage_release(s);
  conf_end(r);
}

static void check_alignment(conf_run *r, const conf_device *d, const tstor_device_properties *p) {
  conf_begin(r, "alignment", d->label);
  tstor_storage *s[3] = {NULL};
  if (!(p->reported & TSTOR_PROP_ALIGNMENT)) {
    conf_notef(r, "alignment is not reported");
    goto out;
  }
  uint64_t al = p->alignment;
  EXPECT(r, al && (al & (al - 1)) == 0, "alignment %llu is not a power of two",
         (unsigned long long)al);
  if (!d->has_data) goto out;
  const size_t sizes[] = {1, 1000, 65537};
  for (size_t i = 0; i < COUNT(sizes); i++) {
    TRY(r, tstor_storage_new(r->ctx, d->dev, sizes[i], &s[i]), "allocating");
    uintptr_t at = (uintptr_t)tstor_storage_data(s[i]);
    EXPECT(r, at % al == 0, "%zu bytes at %p, not a multiple of the reported %llu", sizes[i],
           tstor_storage_data(s[i]), (unsigned long long)al);
  }
out:
  for (size_t i = 0; i < COUNT(s); i++) tstor_storage_release(s[i]);
  conf_end(r);
}

/* The same id from another context, as from this one. */
static void check_id(conf_run *r, const conf_device *d, const tstor_device_properties *p) {
  conf_begin(r, "stable id", d->label);
  tstor_context *other = NULL;
  tstor_device_properties q;
  if (!(p->reported & TSTOR_PROP_ID)) {
    conf_notef(r, "no id is reported");
    goto out;
  }
  EXPECT(r, p->id[0] != '\0', "an id is reported, and it is empty");
  TRY(r, conf_open_context(r, NULL, 0, &other), "opening a second context");
  TRY(r, read_properties(r, other, d, &q), "reading the properties in a second context");
  EXPECT(r, strcmp(p->id, q.id) == 0, "id '%s' in one context, '%s' in another", p->id, q.id);
out:
  tstor_context_close(other);
  conf_end(r);
}

void conf_section_properties(conf_run *r) {
  if (conf_setup(r)) return;
  for (int i = 0; i < r->ndevs; i++) {
    const conf_device *d = &r->devs[i];
    tstor_device_properties p;
    conf_begin(r, "reported", d->label);
    int rc = read_properties(r, r->ctx, d, &p);
    if (rc) {
      conf_fail_rc(r, rc, "tstor_device_get_properties");
      conf_end(r);
      continue;
    }
    if (!(p.capabilities & TSTOR_DEVICE_CAP_PROPERTIES)) {
      conf_notef(r, "no properties op (backend ABI 1.5): nothing to check");
      conf_end(r);
      continue;
    }
    conf_end(r);
    check_consistent(r, d, &p);
    check_free_follows(r, d, &p);
    check_alignment(r, d, &p);
    check_id(r, d, &p);
  }
  conf_teardown(r);
}
