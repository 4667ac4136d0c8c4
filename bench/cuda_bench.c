/* bench_cuda: the cuda backend against the CUDA runtime and PyTorch, side by
 * side in one run, on one GPU.
 *
 *   allocate + free   tstor_storage_new + release (caching allocator) against
 *                     cudaMalloc + cudaFree and, when python3 with torch is
 *                     found, PyTorch's caching allocator (bench/cuda_torch_alloc.py)
 *   bandwidth         256 MiB pinned host->device, device->host and
 *                     device->device with tstor_storage_copy against cudaMemcpy
 *
 * Prints a markdown table for docs/benchmarks.md. Usage:
 *   bench_cuda [--device N] [--quick] [--torch-script PATH] [--python PYTHON]
 * Exits 77 when the cuda backend declines (no GPU). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tstor/tstor.h>

#define MiB ((size_t)1 << 20)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check(int rc, const char *what) {
  if (rc) {
    fprintf(stderr, "bench_cuda: %s: %s (%s)\n", what, tstor_strerror(rc), tstor_last_error());
    exit(1);
  }
}

static void check_cuda(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "bench_cuda: %s: %s\n", what, cudaGetErrorString(e));
    exit(1);
  }
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ------------------------------------------------------------ allocation */

/* Median over `rounds` of the mean time of one allocate + free, in ns. */
static double tstor_alloc_ns(tstor_context *ctx, tstor_device dev, size_t size, int iters,
                             int rounds) {
  double t[16];
  tstor_storage *s;
  check(tstor_storage_new(ctx, dev, size, &s), "warm-up allocation");
  tstor_storage_release(s);
  for (int r = 0; r < rounds; r++) {
    double t0 = now();
    for (int i = 0; i < iters; i++) {
      check(tstor_storage_new(ctx, dev, size, &s), "allocation");
      tstor_storage_release(s);
    }
    t[r] = (now() - t0) / iters * 1e9;
  }
  return median(t, rounds);
}

static double cuda_alloc_ns(size_t size, int iters, int rounds) {
  double t[16];
  void *p;
  for (int r = 0; r < rounds; r++) {
    double t0 = now();
    for (int i = 0; i < iters; i++) {
      check_cuda(cudaMalloc(&p, size), "cudaMalloc");
      check_cuda(cudaFree(p), "cudaFree");
    }
    t[r] = (now() - t0) / iters * 1e9;
  }
  return median(t, rounds);
}

/* PyTorch's numbers for the same sizes, from the helper script: one line per
 * size, "SIZE EMPTY_NS RAW_NS". 0 when unavailable. */
typedef struct torch_row {
  size_t size;
  double empty_ns, raw_ns;
} torch_row;

static int run_torch(const char *python, const char *script, int device, int quick,
                     torch_row *rows, int nrows, char *why, size_t why_size, char *notes,
                     size_t notes_size) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s %s --device %d%s 2>&1", python, script, device,
           quick ? " --quick" : "");
  FILE *p = popen(cmd, "r");
  if (!p) {
    snprintf(why, why_size, "cannot run %s", python);
    return 0;
  }
  char line[1024];
  int n = 0;
  why[0] = '\0';
  notes[0] = '\0';
  while (fgets(line, sizeof line, p)) {
    torch_row r;
    if (line[0] == '#') { /* a note, shown under the table */
      size_t used = strlen(notes);
      snprintf(notes + used, notes_size - used, "%.200s", line);
      continue;
    }
    unsigned long long size;
    if (sscanf(line, "%llu %lf %lf", &size, &r.empty_ns, &r.raw_ns) == 3 && n < nrows) {
      r.size = (size_t)size;
      rows[n++] = r;
    } else if (!why[0]) {
      snprintf(why, why_size, "%.200s", line);
      why[strcspn(why, "\n")] = '\0';
    }
  }
  int status = pclose(p);
  if (status != 0 && n == 0 && !why[0]) snprintf(why, why_size, "exit status %d", status);
  return n;
}

/* ------------------------------------------------------------- bandwidth */

static double gbps(size_t bytes, double seconds) { return (double)bytes / seconds / 1e9; }

typedef enum { H2D, D2H, D2D } direction;

static double tstor_copy_gbps(tstor_context *ctx, tstor_device cpu, tstor_device gpu,
                              direction dir, size_t n, int reps) {
  tstor_storage *h, *hp = NULL, *d1, *d2;
  check(tstor_storage_new(ctx, cpu, n, &h), "host storage");
  check(tstor_storage_pin(h, &hp), "pin");
  check(tstor_storage_new(ctx, gpu, n, &d1), "device storage");
  check(tstor_storage_new(ctx, gpu, n, &d2), "device storage");
  check(tstor_storage_fill(hp, 1), "fill");
  check(tstor_storage_fill(d1, 2), "fill");
  double t[64];
  for (int r = 0; r < reps + 1; r++) {
    double t0 = now();
    switch (dir) {
      case H2D: check(tstor_storage_copy(d1, hp), "copy"); break;
      case D2H: check(tstor_storage_copy(hp, d1), "copy"); break;
      case D2D: check(tstor_storage_copy(d2, d1), "copy"); break;
    }
    if (r > 0) t[r - 1] = now() - t0; /* the first is a warm-up */
  }
  tstor_storage_release(h);
  tstor_storage_release(hp);
  tstor_storage_release(d1);
  tstor_storage_release(d2);
  return gbps(n, median(t, reps));
}

static double cuda_copy_gbps(direction dir, size_t n, int reps) {
  void *h, *d1, *d2;
  check_cuda(cudaMallocHost(&h, n), "cudaMallocHost");
  check_cuda(cudaMalloc(&d1, n), "cudaMalloc");
  check_cuda(cudaMalloc(&d2, n), "cudaMalloc");
  memset(h, 1, n);
  check_cuda(cudaMemset(d1, 2, n), "cudaMemset");
  check_cuda(cudaDeviceSynchronize(), "sync");
  double t[64];
  for (int r = 0; r < reps + 1; r++) {
    double t0 = now();
    switch (dir) {
      case H2D: check_cuda(cudaMemcpy(d1, h, n, cudaMemcpyHostToDevice), "cudaMemcpy"); break;
      case D2H: check_cuda(cudaMemcpy(h, d1, n, cudaMemcpyDeviceToHost), "cudaMemcpy"); break;
      case D2D:
        check_cuda(cudaMemcpy(d2, d1, n, cudaMemcpyDeviceToDevice), "cudaMemcpy");
        check_cuda(cudaDeviceSynchronize(), "sync"); /* D2D cudaMemcpy does not wait */
        break;
    }
    if (r > 0) t[r - 1] = now() - t0;
  }
  cudaFreeHost(h);
  cudaFree(d1);
  cudaFree(d2);
  return gbps(n, median(t, reps));
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  int device = 0, quick = 0;
  const char *script = NULL, *python = "python3";
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = atoi(argv[++i]);
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--torch-script") == 0 && i + 1 < argc) script = argv[++i];
    else if (strcmp(argv[i], "--python") == 0 && i + 1 < argc) python = argv[++i];
    else {
      fprintf(stderr, "usage: bench_cuda [--device N] [--quick] [--torch-script PATH] "
                      "[--python PYTHON]\n");
      return 2;
    }
  }
  tstor_context *ctx;
  check(tstor_context_open_string("[tstor]\n[backend cpu]\nlibrary = tstor-cpu.so\n"
                                  "[backend cuda]\nlibrary = tstor-cuda.so\noptional = yes\n",
                                  "bench_cuda.ini", &ctx),
        "open");
  tstor_device cpu, gpu;
  check(tstor_device_parse(ctx, "cpu", &cpu), "cpu");
  char name[32];
  snprintf(name, sizeof name, "cuda:%d", device);
  if (tstor_device_parse(ctx, name, &gpu) != 0) {
    for (int i = 0; i < tstor_backend_count(ctx); i++) {
      tstor_backend_info info = TSTOR_BACKEND_INFO_INIT;
      if (tstor_backend_get(ctx, i, &info) == 0 && strcmp(info.name, "cuda") == 0)
        printf("bench_cuda: skipped: %s\n", info.message[0] ? info.message : tstor_last_error());
    }
    tstor_context_close(ctx);
    return 77;
  }
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  struct cudaDeviceProp prop;
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  char date[32];
  time_t tt = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&tt));
  printf("GPU: %s (cuda:%d, %.1f GiB), driver CUDA %d.%d, runtime %d.%d, %s, tstor %s\n\n",
         prop.name, device, (double)prop.totalGlobalMem / (1 << 30), drv / 1000,
         drv % 1000 / 10, rt / 1000, rt % 1000 / 10, date, tstor_version_string());

  static const size_t sizes[] = {512, 64 << 10, MiB, 16 * MiB};
  enum { NSIZES = sizeof sizes / sizeof sizes[0] };
  int iters = quick ? 2000 : 100000, cuda_iters = quick ? 100 : 2000, rounds = 5;
  torch_row trows[NSIZES];
  char why[512] = "no --torch-script given", notes[2048] = "";
  int ntorch = script ? run_torch(python, script, device, quick, trows, NSIZES, why, sizeof why,
                                  notes, sizeof notes)
                      : 0;

  printf("| allocate + free | tstor (ns) | cudaMalloc+cudaFree (ns) | speed-up | torch.empty "
         "(ns) | torch raw alloc (ns) | tstor vs torch raw |\n");
  printf("|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < NSIZES; i++) {
    double t = tstor_alloc_ns(ctx, gpu, sizes[i], iters, rounds);
    double c = cuda_alloc_ns(sizes[i], cuda_iters, rounds);
    const torch_row *tr = NULL;
    for (int k = 0; k < ntorch; k++)
      if (trows[k].size == sizes[i]) tr = &trows[k];
    char te[32] = "n/a", trw[32] = "n/a", ratio[32] = "n/a";
    if (tr) {
      snprintf(te, sizeof te, "%.0f", tr->empty_ns);
      snprintf(trw, sizeof trw, "%.0f", tr->raw_ns);
      snprintf(ratio, sizeof ratio, "%.2fx", tr->raw_ns / t);
    }
    printf("| %zu B | %.0f | %.0f | %.1fx | %s | %s | %s |\n", sizes[i], t, c, c / t, te, trw,
           ratio);
  }
  if (ntorch == 0) printf("\n(PyTorch: %s)\n", why);
  if (notes[0]) printf("\n%s", notes);

  size_t n = 256 * MiB;
  int reps = quick ? 5 : 20;
  static const char *const names[] = {"pinned host -> device", "device -> pinned host",
                                      "device -> device"};
  printf("\n| 256 MiB copy | tstor (GB/s) | cudaMemcpy (GB/s) | ratio |\n|---|---|---|---|\n");
  for (int d = H2D; d <= D2D; d++) {
    double t = tstor_copy_gbps(ctx, cpu, gpu, (direction)d, n, reps);
    double c = cuda_copy_gbps((direction)d, n, reps);
    printf("| %s | %.1f | %.1f | %.3f |\n", names[d], t, c, t / c);
  }
  tstor_context_close(ctx);
  return 0;
}
