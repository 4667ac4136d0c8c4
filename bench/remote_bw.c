/* The remote backend's put and get through the public API: cpu -> remote:0
 * and back, 8 B (latency) and 64 MiB (bandwidth), against a `tstor serve`
 * named by the config. bench/remote-bench.sh runs it beside ucx_perftest.
 *
 *   remote_bw CONFIG */
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

int main(int argc, char **argv) {
  tstor_context *ctx;
  tstor_device cpu, remote;
  if (argc != 2) {
    fprintf(stderr, "usage: remote_bw CONFIG\n");
    return 2;
  }
  if (tstor_context_open(argv[1], &ctx) || tstor_device_parse(ctx, "cpu", &cpu) ||
      tstor_device_parse(ctx, "remote:0", &remote)) {
    fprintf(stderr, "remote_bw: %s\n", tstor_last_error());
    return 1;
  }
  const size_t sizes[] = {8, (size_t)64 << 20};
  for (int k = 0; k < 2; k++) {
    size_t n = sizes[k];
    int iters = n < 4096 ? 20000 : 20;
    tstor_storage *host, *dev;
    if (tstor_storage_new(ctx, cpu, n, &host) || tstor_storage_new(ctx, remote, n, &dev)) {
      fprintf(stderr, "remote_bw: %s\n", tstor_last_error());
      return 1;
    }
    memset(tstor_storage_data(host), 1, n);
    for (int get = 0; get < 2; get++) {
      tstor_storage *dst = get ? host : dev, *src = get ? dev : host;
      double best = 1e30;
      for (int round = 0; round < 3; round++) {
        double t0 = now();
        for (int i = 0; i < iters; i++)
          if (tstor_storage_copy(dst, src)) {
            fprintf(stderr, "remote_bw: %s\n", tstor_last_error());
            return 1;
          }
        double t = (now() - t0) / iters;
        if (t < best) best = t;
      }
      if (n < 4096)
        printf("%s %zu B: %.1f us per copy\n", get ? "get" : "put", n, best * 1e6);
      else
        printf("%s %zu MiB: %.0f MB/s\n", get ? "get" : "put", n >> 20, n / best / 1e6);
    }
    tstor_storage_release(host);
    tstor_storage_release(dev);
  }
  tstor_context_close(ctx);
  return 0;
}
