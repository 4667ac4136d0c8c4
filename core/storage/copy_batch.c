/* Batched copies (tstor_storage_copy_batch): every item is checked first,
 * then the items of each pair of device types that has a batched kernel go to
 * it in one call, and the rest are copied one by one as single copies are. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Batches of up to this many items are checked and grouped on the stack. */
#define SMALL 16

/* ------------------------------------------------------------------ checks */

static int check_item(const tstor_copy_item *items, size_t i, size_t count, tstor_context **ctx) {
  const tstor_copy_item *it = &items[i];
  if (!it->dst || !it->src)
    return tstor__err(TSTOR_EINVAL, "storage_copy_batch: item %zu of %zu: NULL storage", i, count);
  if (it->dst->ctx != it->src->ctx || (*ctx && it->dst->ctx != *ctx))
    return tstor__err(TSTOR_EINVAL,
                      "storage_copy_batch: item %zu of %zu: storages of another context", i, count);
  *ctx = it->dst->ctx;
  const tstor_storage *sides[2] = {it->dst, it->src};
  const size_t offsets[2] = {it->dst_offset, it->src_offset};
  for (int k = 0; k < 2; k++)
    if (offsets[k] > sides[k]->nbytes || it->nbytes > sides[k]->nbytes - offsets[k])
      return tstor__err(TSTOR_ERANGE,
                        "storage_copy_batch: item %zu of %zu: %s bytes [%zu, %zu + %zu) are "
                        "outside a storage of %zu bytes",
                        i, count, k ? "source" : "destination", offsets[k], offsets[k], it->nbytes,
                        sides[k]->nbytes);
  int rc = tstor__copy_possible(*ctx, it->dst->device, it->src->device);
  if (rc) tstor__err_prefix("storage_copy_batch: item %zu of %zu", i, count);
  return rc;
}

/* Whether an item moves bytes: not empty, and a destination with data. */
static int moves(tstor_context *ctx, const tstor_copy_item *it) {
  return it->nbytes > 0 &&
         ctx->copy_path[it->src->device.type][it->dst->device.type] != TSTOR_COPY_CHECK;
}

/* One range of the batch: the memory it is in (type -1 for host memory, which
 * every host-memory type shares), where, and whose. */
typedef struct range {
  int type, index;
  uintptr_t start, end;
  size_t item;
  int is_dst;
} range;

static int range_order(const void *a, const void *b) {
  const range *x = a, *y = b;
  if (x->type != y->type) return x->type < y->type ? -1 : 1;
  if (x->index != y->index) return x->index < y->index ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

static range range_of(tstor_context *ctx, const tstor_storage *s, size_t offset, size_t n,
                      size_t item, int is_dst) {
  range r = {
      s->device.type, s->device.index, (uintptr_t)s->data + offset, (uintptr_t)s->data + offset + n,
      item,           is_dst};
  if (ctx->types[r.type].ops.flags & TSTOR_DEVICE_HOST) r.type = r.index = TSTOR__HOST_MEMORY;
  return r;
}

static int overlap(const range *a, const range *b, size_t count) {
  if (a->item == b->item)
    return tstor__err(TSTOR_EINVAL,
                      "storage_copy_batch: item %zu of %zu: its destination shares bytes with "
                      "its own source (the items of a batch move in any order)",
                      a->item, count);
  if (a->item > b->item) {
    const range *t = a;
    a = b;
    b = t;
  }
  return tstor__err(TSTOR_EINVAL,
                    "storage_copy_batch: item %zu of %zu: its %s shares bytes with item %zu's %s "
                    "(the items of a batch move in any order)",
                    b->item, count, b->is_dst ? "destination" : "source", a->item,
                    a->is_dst ? "destination" : "source");
}

/* No destination range may share a byte with any other range. Sorted by
 * start, a range meets an earlier one exactly when it starts before the
 * furthest end so far: the furthest destination's for any range, and the
 * furthest of all for a destination. */
static int check_overlaps(tstor_context *ctx, const tstor_copy_item *items, size_t count) {
  range small[2 * SMALL], *r = count <= SMALL ? small : tstor__malloc(2 * count * sizeof *r);
  if (!r)
    return tstor__err(TSTOR_ENOMEM, "storage_copy_batch: no memory to check %zu items", count);
  size_t n = 0;
  for (size_t i = 0; i < count; i++) {
    const tstor_copy_item *it = &items[i];
    if (!moves(ctx, it)) continue;
    r[n++] = range_of(ctx, it->dst, it->dst_offset, it->nbytes, i, 1);
    r[n++] = range_of(ctx, it->src, it->src_offset, it->nbytes, i, 0);
  }
  qsort(r, n, sizeof *r, range_order);
  int rc = 0;
  const range *far_dst = NULL, *far_any = NULL;
  for (size_t i = 0; i < n && rc == 0; i++) {
    if (i > 0 && (r[i].type != r[i - 1].type || r[i].index != r[i - 1].index))
      far_dst = far_any = NULL; /* another memory */
    if (far_dst && r[i].start < far_dst->end)
      rc = overlap(&r[i], far_dst, count);
    else if (r[i].is_dst && far_any && r[i].start < far_any->end)
      rc = overlap(&r[i], far_any, count);
    if (r[i].is_dst && (!far_dst || r[i].end > far_dst->end)) far_dst = &r[i];
    if (!far_any || r[i].end > far_any->end) far_any = &r[i];
  }
  if (r != small) tstor__free(r);
  return rc;
}

/* ----------------------------------------------------------------- copying */

/* The batched kernel the items of a pair go to, or NULL: between two
 * host-memory types the core copies, as for single copies. */
static const tstor__copy_entry *batch_kernel(tstor_context *ctx, int s, int d) {
  const tstor__copy_entry *e = &ctx->batch_table[s][d];
  if (!e->batch || (ctx->types[s].ops.flags & ctx->types[d].ops.flags & TSTOR_DEVICE_HOST))
    return NULL;
  return e;
}

int tstor_copy_batched(tstor_context *ctx, int src_type, int dst_type) {
  int rc = tstor__ctx(&ctx);
  if (rc) return rc;
  if (src_type < 0 || src_type >= ctx->ntypes || dst_type < 0 || dst_type >= ctx->ntypes)
    return tstor__err(TSTOR_ENODEV, "unknown device type id (%d or %d)", src_type, dst_type);
  return batch_kernel(ctx, src_type, dst_type) != NULL &&
         ctx->copy_path[src_type][dst_type] != TSTOR_COPY_CHECK;
}

/* The items of one pair with a batched kernel: their spans are
 * spans[at..at + n) of the call's array, in the order of the items. */
typedef struct pair_run {
  int s, d;
  size_t n, at;
} pair_run;

/* The grouping of one call: the pairs in order of their first item, and the
 * spans of their items; item_of[k] is span k's item. */
typedef struct groups {
  pair_run *pairs, small_pairs[8];
  size_t npairs, cap, nspans;
  tstor_copy_span *spans, small_spans[SMALL];
  size_t *item_of, small_item_of[SMALL];
} groups;

/* The run of an item's pair, made when it is new; NULL when out of memory.
 * Items of one pair mostly come together: the last one found is tried first. */
static pair_run *run_of(groups *g, const tstor_copy_item *it, size_t *last) {
  int s = it->src->device.type, d = it->dst->device.type;
  if (*last < g->npairs && g->pairs[*last].s == s && g->pairs[*last].d == d)
    return &g->pairs[*last];
  for (size_t k = 0; k < g->npairs; k++)
    if (g->pairs[k].s == s && g->pairs[k].d == d) return &g->pairs[*last = k];
  if (g->npairs == g->cap) {
    pair_run *more = tstor__malloc(2 * g->cap * sizeof *more);
    if (!more) return NULL;
    memcpy(more, g->pairs, g->npairs * sizeof *more);
    if (g->pairs != g->small_pairs) tstor__free(g->pairs);
    g->pairs = more;
    g->cap *= 2;
  }
  g->pairs[g->npairs] = (pair_run){s, d, 0, 0};
  return &g->pairs[*last = g->npairs++];
}

static int group(tstor_context *ctx, const tstor_copy_item *items, size_t count, groups *g) {
  size_t last = 0;
  for (size_t i = 0; i < count; i++) {
    const tstor_copy_item *it = &items[i];
    if (!moves(ctx, it) || !batch_kernel(ctx, it->src->device.type, it->dst->device.type)) continue;
    pair_run *run = run_of(g, it, &last);
    if (!run) return tstor__err(TSTOR_ENOMEM, "storage_copy_batch: out of memory");
    run->n++;
    g->nspans++;
  }
  if (g->nspans > SMALL) {
    g->spans = tstor__malloc(g->nspans * sizeof *g->spans);
    g->item_of = tstor__malloc(g->nspans * sizeof *g->item_of);
    if (!g->spans || !g->item_of)
      return tstor__err(TSTOR_ENOMEM, "storage_copy_batch: no memory for %zu spans", g->nspans);
  }
  for (size_t k = 0, at = 0; k < g->npairs; k++) {
    g->pairs[k].at = at;
    at += g->pairs[k].n;
    g->pairs[k].n = 0; /* from here: its spans placed so far */
  }
  for (size_t i = 0; i < count; i++) {
    const tstor_copy_item *it = &items[i];
    if (!moves(ctx, it) || !batch_kernel(ctx, it->src->device.type, it->dst->device.type)) continue;
    pair_run *run = run_of(g, it, &last);
    size_t k = run->at + run->n++;
    g->spans[k] = (tstor_copy_span){(char *)it->dst->data + it->dst_offset,
                                    (const char *)it->src->data + it->src_offset, it->nbytes,
                                    it->dst->device.index, it->src->device.index};
    g->item_of[k] = i;
  }
  return 0;
}

/* Hands one pair's spans to its kernel. */
static int run_group(tstor_context *ctx, const groups *g, const pair_run *run, size_t count) {
  const tstor__copy_entry *e = &ctx->batch_table[run->s][run->d];
  const char *from = ctx->types[run->s].name, *to = ctx->types[run->d].name;
  size_t failed = SIZE_MAX;
  tstor__err_clear();
  int rc = e->batch(e->state, g->spans + run->at, run->n, &failed);
  if (rc == 0) return 0;
  if (!tstor_last_error()[0])
    tstor__err(rc, "a batch of %zu copies %s -> %s failed", run->n, from, to);
  if (failed < run->n)
    tstor__err_prefix("storage_copy_batch: item %zu of %zu", g->item_of[run->at + failed], count);
  else
    tstor__err_prefix("storage_copy_batch: %zu items %s -> %s", run->n, from, to);
  return rc;
}

static int run(tstor_context *ctx, const tstor_copy_item *items, size_t count) {
  groups g = {.cap = 8};
  g.pairs = g.small_pairs;
  g.spans = g.small_spans;
  g.item_of = g.small_item_of;
  int rc = group(ctx, items, count, &g);
  for (size_t k = 0; rc == 0 && k < g.npairs; k++) rc = run_group(ctx, &g, &g.pairs[k], count);
  for (size_t i = 0; i < count && rc == 0; i++) {
    const tstor_copy_item *it = &items[i];
    if (!moves(ctx, it) || batch_kernel(ctx, it->src->device.type, it->dst->device.type)) continue;
    rc = tstor__copy_bytes(ctx, it->dst->device, (char *)it->dst->data + it->dst_offset,
                           it->src->device, (const char *)it->src->data + it->src_offset,
                           it->nbytes, NULL, NULL);
    if (rc) tstor__err_prefix("storage_copy_batch: item %zu of %zu", i, count);
  }
  if (g.pairs != g.small_pairs) tstor__free(g.pairs);
  if (g.spans != g.small_spans) tstor__free(g.spans);
  if (g.item_of != g.small_item_of) tstor__free(g.item_of);
  return rc;
}

int tstor_storage_copy_batch(const tstor_copy_item *items, size_t count) {
  if (count == 0) return 0;
  if (!items) return tstor__err(TSTOR_EINVAL, "storage_copy_batch: NULL items");
  tstor_context *ctx = NULL;
  for (size_t i = 0; i < count; i++) {
    int rc = check_item(items, i, count, &ctx);
    if (rc) return rc;
  }
  int rc = check_overlaps(ctx, items, count);
  return rc ? rc : run(ctx, items, count);
}
