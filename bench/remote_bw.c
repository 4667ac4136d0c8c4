/* The remote backend through the public API, in the style of NIXL's
 * nixlbench: for each block size and batch size, batches of copies between a
 * cpu storage and a device (remote:0 by default), each batch one
 * tstor_storage_copy_batch of `batch` blocks at consecutive offsets; the
 * average and the 99th percentile of a batch's time, and the bandwidth. With
 * --loop the same blocks are copied one tstor_storage_copy at a time instead:
 * the round trips a batch saves. bench/remote-bench.sh runs it beside
 * ucx_perftest on the same transports.
 *
 *   remote_bw CONFIG [--device remote:0] [--op put|get|both] [--sizes 8,4096,...]
 *             [--batches 1,16,...] [--loop] [--seconds S] [--max-mb N] [--label TEXT]
 *
 * One markdown table row per (op, size, batch):
 *   | label | op | block | batch | avg us | p99 us | GB/s |
 * Rows whose batch would move more than --max-mb (default 256) are skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tstor/tstor.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* A comma-separated list of sizes (with K, M suffixes) into out; its count. */
static int parse_list(const char *text, size_t *out, int max) {
  int n = 0;
  for (const char *p = text; *p && n < max;) {
    char *end;
    size_t v = strtoull(p, &end, 10);
    if (*end == 'K' || *end == 'k') v <<= 10, end++;
    if (*end == 'M' || *end == 'm') v <<= 20, end++;
    out[n++] = v;
    p = *end == ',' ? end + 1 : end;
    if (end == p && *p != ',') break;
  }
  return n;
}

static void human(size_t n, char *buf, size_t size) {
  if (n >= (1u << 20) && n % (1u << 20) == 0)
    snprintf(buf, size, "%zu MiB", n >> 20);
  else if (n >= 1024 && n % 1024 == 0)
    snprintf(buf, size, "%zu KiB", n >> 10);
  else
    snprintf(buf, size, "%zu B", n);
}

typedef struct run {
  tstor_context *ctx;
  tstor_device cpu, dev;
  double seconds;
  int loop;
  const char *label;
} run;

static int fail(const char *what) {
  fprintf(stderr, "remote_bw: %s: %s\n", what, tstor_last_error());
  return 1;
}

/* One row: batches of `batch` blocks of `size` bytes, put or get. */
static int row(const run *r, int get, size_t size, size_t batch) {
  size_t total = size * batch;
  tstor_storage *host = NULL, *dev = NULL, **views = NULL;
  tstor_copy_item *items = calloc(batch, sizeof *items);
  double *times = NULL;
  int rc = 1, cap = 100000, n = 0;
  if (!items || tstor_storage_new(r->ctx, r->cpu, total, &host) ||
      tstor_storage_new(r->ctx, r->dev, total, &dev)) {
    fail("allocating");
    goto out;
  }
  memset(tstor_storage_data(host), 1, total);
  for (size_t k = 0; k < batch; k++)
    items[k] = get ? (tstor_copy_item){host, k * size, dev, k * size, size}
                   : (tstor_copy_item){dev, k * size, host, k * size, size};
  if (r->loop) { /* views made once: the loop times the copies alone */
    views = calloc(2 * batch, sizeof *views);
    for (size_t k = 0; views && k < batch; k++)
      if (tstor_storage_view(host, k * size, size, &views[2 * k]) ||
          tstor_storage_view(dev, k * size, size, &views[2 * k + 1])) {
        fail("a view");
        goto out;
      }
  }
  times = malloc(cap * sizeof *times);
  if (!times || (r->loop && !views)) goto out;
  double start = now();
  for (int i = -1; i < cap && (i < 5 || now() - start < r->seconds); i++) {
    double t0 = now();
    if (r->loop) {
      for (size_t k = 0; k < batch; k++) {
        tstor_storage *h = views[2 * k], *d = views[2 * k + 1];
        if (get ? tstor_storage_copy(h, d) : tstor_storage_copy(d, h)) {
          fail("copy");
          goto out;
        }
      }
    } else if (tstor_storage_copy_batch(items, batch)) {
      fail("copy_batch");
      goto out;
    }
    if (i >= 0) times[n++] = now() - t0; /* the first round warms up */
  }
  qsort(times, n, sizeof *times, cmp_double);
  double sum = 0;
  for (int i = 0; i < n; i++) sum += times[i];
  int rank = (99 * n + 99) / 100; /* the nearest rank: the slowest of fewer than 100 */
  double avg = sum / n, p99 = times[rank - 1];
  char block[32];
  human(size, block, sizeof block);
  printf("| %s | %s%s | %s | %zu | %.2f | %.2f | %.2f |\n", r->label, get ? "get" : "put",
         r->loop ? " (loop)" : "", block, batch, avg * 1e6, p99 * 1e6, total / avg / 1e9);
  fflush(stdout);
  rc = 0;
out:
  for (size_t k = 0; views && k < 2 * batch; k++) tstor_storage_release(views[k]);
  free(views);
  free(times);
  free(items);
  tstor_storage_release(host);
  tstor_storage_release(dev);
  return rc;
}

int main(int argc, char **argv) {
  size_t sizes[64], batches[64];
  int nsizes = parse_list("8,64,512,4K,32K,64K,256K,1M,4M,16M,64M", sizes, 64);
  int nbatches = parse_list("1,4,16,64,256,1024", batches, 64);
  const char *device = "remote:0", *op = "both";
  size_t max_bytes = (size_t)256 << 20;
  run r = {.seconds = 0.2, .label = "tstor"};
  if (argc < 2) {
    fprintf(stderr, "usage: remote_bw CONFIG [options] (see bench/remote_bw.c)\n");
    return 2;
  }
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--loop")) {
      r.loop = 1;
      continue;
    }
    if (!v) {
      fprintf(stderr, "remote_bw: %s needs a value\n", a);
      return 2;
    }
    i++;
    if (!strcmp(a, "--device"))
      device = v;
    else if (!strcmp(a, "--op"))
      op = v;
    else if (!strcmp(a, "--sizes"))
      nsizes = parse_list(v, sizes, 64);
    else if (!strcmp(a, "--batches"))
      nbatches = parse_list(v, batches, 64);
    else if (!strcmp(a, "--seconds"))
      r.seconds = atof(v);
    else if (!strcmp(a, "--max-mb"))
      max_bytes = strtoull(v, NULL, 10) << 20;
    else if (!strcmp(a, "--label"))
      r.label = v;
    else {
      fprintf(stderr, "remote_bw: unknown option %s\n", a);
      return 2;
    }
  }
  if (tstor_context_open(argv[1], &r.ctx) || tstor_device_parse(r.ctx, "cpu", &r.cpu) ||
      tstor_device_parse(r.ctx, device, &r.dev))
    return fail("opening the context");
  for (int get = 0; get < 2; get++) {
    if ((get && !strcmp(op, "put")) || (!get && !strcmp(op, "get"))) continue;
    for (int s = 0; s < nsizes; s++)
      for (int b = 0; b < nbatches; b++)
        if (sizes[s] * batches[b] <= max_bytes && row(&r, get, sizes[s], batches[b]) != 0) return 1;
  }
  tstor_context_close(r.ctx);
  return 0;
}
