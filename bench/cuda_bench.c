/* bench_cuda: the cuda backend against the CUDA runtime and PyTorch, side by
 * side in one run, on one GPU.
 *
 *   allocate + free   tstor_storage_new + release (caching allocator) against
 *                     cudaMalloc + cudaFree and, when python3 with torch is
 *                     found, PyTorch's caching allocator (bench/cuda_torch_alloc.py)
 *   bandwidth         256 MiB pinned host->device, device->host and
 *                     device->device with tstor_storage_copy against cudaMemcpy
 *   layouts           contiguous() of a transposed 8192x8192 float32 matrix and
 *                     NCHW -> NHWC of 64x256x56x56 float32, against a plain
 *                     device->device copy of the same bytes and PyTorch's own
 *
 * Prints a markdown table for docs/benchmarks.md. Usage:
 *   bench_cuda [--device N] [--quick] [--layouts] [--torch-script PATH]
 *              [--python PYTHON] [--torch-cxx PROGRAM]
 * --layouts runs the layout rows alone.
 * Exits 77 when the cuda backend declines (no GPU). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tstor/tensor.h>
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

/* PyTorch's time for each layout row, "layout NAME NS", in ns; 0 when absent. */
enum { LAYOUT_TRANSPOSE, LAYOUT_NHWC, NLAYOUTS };
static const char *const layout_names[NLAYOUTS] = {"transpose", "nhwc"};
static double torch_layout_ns[NLAYOUTS];

static int run_torch(const char *program, int device, int quick, torch_row *rows, int nrows,
                     char *why, size_t why_size, char *notes, size_t notes_size) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s --device %d%s 2>&1", program, device, quick ? " --quick" : "");
  FILE *p = popen(cmd, "r");
  if (!p) {
    snprintf(why, why_size, "cannot run %s", program);
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
    char lname[32];
    double ns;
    if (sscanf(line, "layout %31s %lf", lname, &ns) == 2) {
      for (int k = 0; k < NLAYOUTS; k++)
        if (strcmp(lname, layout_names[k]) == 0) torch_layout_ns[k] = ns;
    } else if (sscanf(line, "%llu %lf %lf", &size, &r.empty_ns, &r.raw_ns) == 3 && n < nrows) {
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

/* --------------------------------------------------------------- layouts */

/* Median seconds of contiguous() on a permuted view of a new float32 tensor:
 * `sizes` is the tensor's shape, `perm` the view's order of its dimensions. */
static double tstor_relayout_s(tstor_context *ctx, tstor_device gpu, int ndim,
                               const int64_t *sizes, const int64_t *perm, int reps) {
  tstor_tensor *t, *view, *out;
  check(tstor_tensor_ones(ctx, gpu, TSTOR_FLOAT32, ndim, sizes, &t), "tensor");
  check(tstor_tensor_permute(t, ndim, perm, &view), "permute");
  double tm[64];
  for (int r = 0; r < reps + 1; r++) {
    double t0 = now();
    check(tstor_tensor_contiguous(view, &out), "contiguous");
    if (r > 0) tm[r - 1] = now() - t0;
    tstor_tensor_release(out);
  }
  tstor_tensor_release(view);
  tstor_tensor_release(t);
  return median(tm, reps);
}

static void layout_rows(tstor_context *ctx, tstor_device cpu, tstor_device gpu, int reps) {
  static const int64_t matrix[] = {8192, 8192}, nchw[] = {64, 256, 56, 56};
  static const int64_t t_perm[] = {1, 0}, nhwc_perm[] = {0, 2, 3, 1};
  static const char *const titles[NLAYOUTS] = {"transposed 8192x8192 contiguous()",
                                               "NCHW -> NHWC 64x256x56x56"};
  printf("\n| float32 on the device | bytes | tstor (GB/s) | plain copy of the same bytes "
         "(GB/s) | tstor vs copy | PyTorch (GB/s) | tstor vs PyTorch |\n"
         "|---|---|---|---|---|---|---|\n");
  for (int k = 0; k < NLAYOUTS; k++) {
    int ndim = k == LAYOUT_TRANSPOSE ? 2 : 4;
    const int64_t *sizes = k == LAYOUT_TRANSPOSE ? matrix : nchw;
    size_t n = 4;
    for (int d = 0; d < ndim; d++) n *= (size_t)sizes[d];
    double copy = tstor_copy_gbps(ctx, cpu, gpu, D2D, n, reps);
    double t = tstor_relayout_s(ctx, gpu, ndim, sizes, k == LAYOUT_TRANSPOSE ? t_perm : nhwc_perm,
                                reps);
    char torch[32] = "n/a", ratio[32] = "n/a";
    if (torch_layout_ns[k] > 0) {
      snprintf(torch, sizeof torch, "%.1f", gbps(n, torch_layout_ns[k] * 1e-9));
      snprintf(ratio, sizeof ratio, "%.3f", torch_layout_ns[k] * 1e-9 / t);
    }
    printf("| %s | %zu | %.1f | %.1f | %.3f | %s | %s |\n", titles[k], n, gbps(n, t), copy,
           gbps(n, t) / copy, torch, ratio);
  }
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
  int device = 0, quick = 0, layouts_only = 0;
  const char *script = NULL, *python = "python3", *cxx = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = atoi(argv[++i]);
    else if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--layouts") == 0) layouts_only = 1;
    else if (strcmp(argv[i], "--torch-script") == 0 && i + 1 < argc) script = argv[++i];
    else if (strcmp(argv[i], "--python") == 0 && i + 1 < argc) python = argv[++i];
    else if (strcmp(argv[i], "--torch-cxx") == 0 && i + 1 < argc) cxx = argv[++i];
    else {
      fprintf(stderr, "usage: bench_cuda [--device N] [--quick] [--layouts] "
                      "[--torch-script PATH] [--python PYTHON] [--torch-cxx PROGRAM]\n");
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

  int reps = quick ? 5 : 20;
  if (layouts_only) {
    layout_rows(ctx, cpu, gpu, reps);
    tstor_context_close(ctx);
    return 0;
  }
  static const size_t sizes[] = {512, 64 << 10, MiB, 16 * MiB};
  enum { NSIZES = sizeof sizes / sizeof sizes[0] };
  int iters = quick ? 2000 : 100000, cuda_iters = quick ? 100 : 2000, rounds = 5;
  /* PyTorch from Python (its numbers include the interpreter's calls) and,
   * with --torch-cxx, from C++ (bench/cuda_torch_alloc.cc). */
  torch_row prows[NSIZES], crows[NSIZES];
  char pwhy[512] = "no --torch-script given", cwhy[512] = "no --torch-cxx given";
  char notes[4096] = "";
  int npy = 0, ncxx = 0;
  if (script) {
    char program[1024];
    snprintf(program, sizeof program, "%s %s", python, script);
    npy = run_torch(program, device, quick, prows, NSIZES, pwhy, sizeof pwhy, notes,
                    sizeof notes);
  }
  if (cxx) {
    size_t used = strlen(notes);
    ncxx = run_torch(cxx, device, quick, crows, NSIZES, cwhy, sizeof cwhy, notes + used,
                     sizeof notes - used);
  }

  printf("| allocate + free | tstor (ns) | cudaMalloc+cudaFree (ns) | speed-up | torch.empty, "
         "Python (ns) | raw alloc, Python (ns) | at::empty, C++ (ns) | raw_alloc, C++ (ns) | "
         "tstor vs raw_alloc, C++ |\n");
  printf("|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < NSIZES; i++) {
    double t = tstor_alloc_ns(ctx, gpu, sizes[i], iters, rounds);
    double c = cuda_alloc_ns(sizes[i], cuda_iters, rounds);
    char pe[32] = "n/a", pr[32] = "n/a", ce[32] = "n/a", cr[32] = "n/a", ratio[32] = "n/a";
    for (int k = 0; k < npy; k++)
      if (prows[k].size == sizes[i]) {
        snprintf(pe, sizeof pe, "%.0f", prows[k].empty_ns);
        snprintf(pr, sizeof pr, "%.0f", prows[k].raw_ns);
      }
    for (int k = 0; k < ncxx; k++)
      if (crows[k].size == sizes[i]) {
        snprintf(ce, sizeof ce, "%.0f", crows[k].empty_ns);
        snprintf(cr, sizeof cr, "%.0f", crows[k].raw_ns);
        snprintf(ratio, sizeof ratio, "%.2fx", crows[k].raw_ns / t);
      }
    printf("| %zu B | %.0f | %.0f | %.1fx | %s | %s | %s | %s | %s |\n", sizes[i], t, c, c / t,
           pe, pr, ce, cr, ratio);
  }
  if (npy == 0) printf("\n(PyTorch from Python: %s)\n", pwhy);
  if (ncxx == 0) printf("\n(PyTorch from C++: %s)\n", cwhy);
  if (notes[0]) printf("\n%s", notes);

  size_t n = 256 * MiB;
  static const char *const names[] = {"pinned host -> device", "device -> pinned host",
                                      "device -> device"};
  printf("\n| 256 MiB copy | tstor (GB/s) | cudaMemcpy (GB/s) | ratio |\n|---|---|---|---|\n");
  for (int d = H2D; d <= D2D; d++) {
    double t = tstor_copy_gbps(ctx, cpu, gpu, (direction)d, n, reps);
    double c = cuda_copy_gbps((direction)d, n, reps);
    printf("| %s | %.1f | %.1f | %.3f |\n", names[d], t, c, t / c);
  }
  layout_rows(ctx, cpu, gpu, reps);
  tstor_context_close(ctx);
  return 0;
}
