/* tstor bench: core storage operations against the libc calls they stand on,
 * measured side by side in one run. Rounds alternate between ours and the
 * baseline and the best round of each is kept, so a noisy neighbour hurts
 * both the same way. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
  tstor_context *ctx;
  tstor_device dev;
  size_t size;
  long iters;
  void *a, *b;               /* 256 MiB host buffers for the libc baselines */
  tstor_storage *sa, *sb;    /* and for ours */
} bench;

static volatile unsigned char sink;

static double run_create_ours(bench *b) {
  double t = now();
  for (long i = 0; i < b->iters; i++) {
    tstor_storage *s;
    if (tstor_storage_new(b->ctx, b->dev, b->size, &s) != 0) abort();
    tstor_storage_release(s);
  }
  return now() - t;
}

static double run_create_libc(bench *b) {
  double t = now();
  for (long i = 0; i < b->iters; i++) {
    void *p;
    if (posix_memalign(&p, 64, b->size) != 0) abort();
    sink = *(volatile unsigned char *)&p;
    free(p);
  }
  return now() - t;
}

static double run_copy_ours(bench *b) {
  double t = now();
  for (long i = 0; i < b->iters; i++)
    if (tstor_storage_copy(b->sb, b->sa) != 0) abort();
  return now() - t;
}

static double run_copy_libc(bench *b) {
  double t = now();
  for (long i = 0; i < b->iters; i++) {
    memcpy(b->b, b->a, b->size);
    sink = ((volatile unsigned char *)b->b)[i % b->size];
  }
  return now() - t;
}

static double run_fill_ours(bench *b) {
  double t = now();
  for (long i = 0; i < b->iters; i++)
    if (tstor_storage_fill(b->sb, (uint8_t)i) != 0) abort();
  return now() - t;
}

static double run_fill_libc(bench *b) {
  double t = now();
  for (long i = 0; i < b->iters; i++) {
    memset(b->b, (int)i, b->size);
    sink = ((volatile unsigned char *)b->b)[i % b->size];
  }
  return now() - t;
}

typedef double (*runner)(bench *);

/* Best-of-rounds seconds per iteration for ours and the baseline. */
static void compare(bench *b, int rounds, runner ours, runner base, double *t_ours,
                    double *t_base) {
  *t_ours = *t_base = 1e30;
  for (int r = 0; r < rounds; r++) {
    double x = ours(b) / (double)b->iters, y = base(b) / (double)b->iters;
    if (x < *t_ours) *t_ours = x;
    if (y < *t_base) *t_base = y;
  }
}

static const char *human(size_t n, char *buf, size_t len) {
  if (n >= (size_t)1 << 40) snprintf(buf, len, "%zu TiB", n >> 40);
  else if (n >= (size_t)1 << 20) snprintf(buf, len, "%zu MiB", n >> 20);
  else if (n >= 1024) snprintf(buf, len, "%zu KiB", n >> 10);
  else snprintf(buf, len, "%zu B", n);
  return buf;
}

#ifdef TSTOR_BENCH_TORCH
/* tstor bench --torch: loads bench-torch.so, the one part of the program that
 * links libtorch; $TSTOR_BENCH_TORCH_MODULE names another, and a program run
 * from its build tree takes the one built there. */
static int run_bench_torch(tstor_context *ctx, int rounds, int quick, int threads, const char *dir) {
  const char *path = getenv("TSTOR_BENCH_TORCH_MODULE");
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const char *tools = TSTOR_ABS_BUILDDIR "/tools/";
  if (!path && n > 0 && (exe[n] = '\0', strncmp(exe, tools, strlen(tools)) == 0))
    path = TSTOR_ABS_BUILDDIR "/tools/.libs/bench-torch.so";
  if (!path) path = TSTOR_PKGLIBDIR "/bench-torch.so";
  void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!module) {
    fprintf(stderr, "tstor bench: --torch needs %s (built by make bench): %s\n", path, dlerror());
    return EXIT_FAILED;
  }
  int (*bench_torch)(tstor_context *, int, int, int, const char *);
  *(void **)&bench_torch = dlsym(module, "tstor_bench_torch");
  int rc = EXIT_FAILED;
  if (bench_torch) rc = bench_torch(ctx, rounds, quick, threads, dir);
  else fprintf(stderr, "tstor bench: %s has no tstor_bench_torch\n", path);
  dlclose(module);
  return rc;
}
#endif

typedef struct {
  const char *config, *dir;
  int rounds, torch, threads, quick;
  double scale; /* of the iteration counts and sizes: 1, or 0.05 with --quick */
} bench_args;

static void print_help(void) {
  printf(
      "usage: tstor bench [--config FILE] [--rounds N] [--quick]\n"
      "       tstor bench --torch [--threads N] [--dir DIR] [--rounds N] [--quick]\n\n"
      "Measures storage create+release on cpu (64 B, 4 KiB, 1 MiB) against\n"
      "posix_memalign+free, a 256 MiB copy against memcpy, a 256 MiB fill against\n"
      "memset, and a 1 TiB meta storage. Prints each side and the ratio.\n\n"
      "--torch: tstor, PyTorch (libtorch) and libc side by side, N threads each\n"
      "(default 2): 256 MiB copy and fills, a 64 MiB allocate+fill+release loop,\n"
      "create+release 1 MiB against c10's allocator, the float32 conversions, and a\n"
      "256 MiB file in DIR (default /tmp) mapped and summed.%s\n",
#ifdef TSTOR_BENCH_TORCH
      ""
#else
      " Not in this build: libtorch\nwas not found by configure."
#endif
  );
}

/* -1 to go on, else the command's exit status. */
static int parse_args(int argc, char **argv, bench_args *a) {
  *a = (bench_args){.dir = "/tmp", .rounds = 7, .threads = 2, .scale = 1.0};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
      a->config = argv[++i];
    } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      a->rounds = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--quick") == 0) {
      a->scale = 0.05;
      a->rounds = 3;
      a->quick = 1;
    } else if (strcmp(argv[i], "--torch") == 0) {
      a->torch = 1;
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      a->threads = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      a->dir = argv[++i];
    } else if (strcmp(argv[i], "--help") == 0) {
      print_help();
      return 0;
    } else {
      fprintf(stderr, "tstor bench: unknown argument '%s' (try tstor bench --help)\n", argv[i]);
      return EXIT_USAGE;
    }
  }
  if (a->rounds < 1 || a->threads < 1) {
    fprintf(stderr, "tstor bench: --rounds and --threads must be at least 1\n");
    return EXIT_USAGE;
  }
#ifndef TSTOR_BENCH_TORCH
  if (a->torch) {
    fprintf(stderr, "tstor bench: --torch needs libtorch, which configure did not find\n");
    return EXIT_FAILED;
  }
#endif
  return -1;
}

static void bench_create(bench *b, const bench_args *a) {
  static const size_t sizes[] = {64, 4096, 1 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    b->size = sizes[i];
    b->iters = (long)((sizes[i] >= (1 << 20) ? 20000 : 2000000) * a->scale) + 1;
    double ours, base;
    compare(b, a->rounds, run_create_ours, run_create_libc, &ours, &base);
    char h[32], label[64];
    snprintf(label, sizeof label, "create+release %s", human(b->size, h, sizeof h));
    printf("%-28s %11.1f ns %11.1f ns %7.2fx  (posix_memalign+free; time, lower is better)\n",
           label, ours * 1e9, base * 1e9, ours / base);
  }
}

static int bench_copy_fill(bench *b, const bench_args *a) {
  b->size = (size_t)256 << 20;
  b->iters = a->scale < 1 ? 2 : 8;
  int rc = 0;
  if (tstor_storage_new(b->ctx, b->dev, b->size, &b->sa) != 0 ||
      tstor_storage_new(b->ctx, b->dev, b->size, &b->sb) != 0 || !(b->a = malloc(b->size)) ||
      !(b->b = malloc(b->size))) {
    fprintf(stderr, "tstor bench: cannot allocate 2 x 256 MiB twice: %s\n", tstor_last_error());
    rc = EXIT_FAILED;
  } else {
    memset(b->a, 1, b->size);
    memset(b->b, 2, b->size);
    tstor_storage_fill(b->sa, 1);
    tstor_storage_fill(b->sb, 2);
    double ours, base;
    compare(b, a->rounds, run_copy_ours, run_copy_libc, &ours, &base);
    double gb = (double)b->size / 1e9;
    printf("%-28s %9.2f GB/s %9.2f GB/s %7.2fx  (memcpy; bandwidth, higher is better)\n",
           "copy 256 MiB", gb / ours, gb / base, base / ours);
    compare(b, a->rounds, run_fill_ours, run_fill_libc, &ours, &base);
    printf("%-28s %9.2f GB/s %9.2f GB/s %7.2fx  (memset; bandwidth, higher is better)\n",
           "fill 256 MiB", gb / ours, gb / base, base / ours);
  }
  tstor_storage_release(b->sa);
  tstor_storage_release(b->sb);
  free(b->a);
  free(b->b);
  return rc;
}

static void bench_meta(bench *b, const bench_args *a) {
  tstor_device meta;
  if (tstor_device_parse(b->ctx, "meta", &meta) != 0) return;
  long iters = (long)(1000000 * a->scale) + 1;
  double best = 1e30;
  for (int r = 0; r < a->rounds; r++) {
    double t = now();
    for (long i = 0; i < iters; i++) {
      tstor_storage *s;
      if (tstor_storage_new(b->ctx, meta, (size_t)1 << 40, &s) != 0) abort();
      tstor_storage_release(s);
    }
    t = (now() - t) / (double)iters;
    if (t < best) best = t;
  }
  printf("%-28s %11.1f ns %14s %8s  (target: under 1000 ns, no memory touched)\n",
         "meta create+release 1 TiB", best * 1e9, "-", "-");
}

int tstor_cmd_bench(int argc, char **argv) {
  bench_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) return rc;
  bench b;
  memset(&b, 0, sizeof b);
  if ((rc = tstor_open_for_command(a.config, &b.ctx))) return rc;
  if (tstor_device_parse(b.ctx, "cpu", &b.dev) != 0) {
    fprintf(stderr, "tstor bench: no cpu device: %s\n", tstor_last_error());
    rc = EXIT_FAILED;
  } else if (a.torch) {
#ifdef TSTOR_BENCH_TORCH
    rc = run_bench_torch(b.ctx, a.rounds, a.quick, a.threads, a.dir);
#endif
  } else {
    printf("%-28s %14s %14s %8s  %s\n", "operation", "tstor", "baseline", "ratio", "(baseline)");
    bench_create(&b, &a);
    rc = bench_copy_fill(&b, &a);
    if (rc == 0) bench_meta(&b, &a);
  }
  tstor_context_close(b.ctx);
  return rc;
}
