// Tensors side by side with libtorch in one run: creating and releasing a
// contiguous 4-d float32 tensor on cpu (at::empty), two views (transpose,
// narrow), and contiguous() of a transposed 8192 x 8192 float32 matrix and of
// an NCHW 64x256x56x56 float32 tensor permuted to NHWC, with the same number
// of threads on both sides. The results of the copies are compared byte for
// byte.
//
//   tensor_vs_torch [--threads 2] [--reps R] [--small]
//
// Prints a Markdown table of the time per call on each side and the ratio
// libtorch / tstor (above 1: tstor is faster). Runs alternate between the two
// libraries so both see the same machine load; each side's time is the best
// of R runs. --small shrinks the copies (for a quick look).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <tstor/tensor.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void check(int rc, const char *what) {
  if (rc != 0) {
    std::fprintf(stderr, "%s: %s: %s\n", what, tstor_strerror(rc), tstor_last_error());
    std::exit(1);
  }
}

// One timing of fn() run `inner` times, in seconds per call, appended to
// samples[idx].
void time_once(long inner, const std::function<void()> &fn, int idx,
               std::vector<std::vector<double>> &samples) {
  double t0 = now();
  for (long i = 0; i < inner; i++) fn();
  double t = (now() - t0) / (double)inner;
  if (samples.size() <= (size_t)idx) samples.resize(idx + 1);
  samples[idx].push_back(t);
}

double best(const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); }

// The median of the ratios of runs taken side by side (torch / tstor).
double median_ratio(const std::vector<double> &tstor, const std::vector<double> &torch) {
  std::vector<double> r;
  for (size_t i = 0; i < tstor.size() && i < torch.size(); i++) r.push_back(torch[i] / tstor[i]);
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

// PyTorch's OpenMP threads spin for a while after a parallel region; let
// them sleep before the other side runs.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }

struct Result {
  const char *label;
  std::vector<double> tstor, torch;
};

void row(const Result &r) {
  auto fmt = [](double s, char *buf) {
    if (s < 1e-6)
      std::snprintf(buf, 32, "%.0f ns", s * 1e9);
    else if (s < 1e-3)
      std::snprintf(buf, 32, "%.2f us", s * 1e6);
    else
      std::snprintf(buf, 32, "%.1f ms", s * 1e3);
  };
  char a[32], b[32];
  double ts = best(r.tstor), th = best(r.torch);
  fmt(ts, a);
  fmt(th, b);
  std::printf("| %s | %s | %s | %.2fx | %.2fx |\n", r.label, a, b, th / ts,
              median_ratio(r.tstor, r.torch));
}

}  // namespace

int main(int argc, char **argv) {
  int threads = 2, reps = 7;
  bool small = false;
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--small"))
      small = true;
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--reps R] [--small]\n", argv[0]);
      return 2;
    }
  }
  at::set_num_threads(threads);
  tstor_set_num_threads(threads);
  tstor_context *ctx = nullptr;
  check(tstor_context_open(nullptr, &ctx), "context");
  tstor_device cpu;
  check(tstor_device_parse(ctx, "cpu", &cpu), "cpu");

  std::printf("threads: %d (both sides), best of %d runs; ratio = libtorch time / tstor time\n\n",
              threads, reps);
  std::printf("| operation | tstor | libtorch | ratio of bests | median pair ratio |\n"
              "|---|---|---|---|---|\n");

  // --- create + release a contiguous 4-d tensor
  {
    const int64_t sz[4] = {8, 3, 32, 32};
    const long inner = 200000;
    std::vector<std::vector<double>> t;
    for (int r = 0; r < reps; r++) {
      time_once(inner, [&] {
        tstor_tensor *x;
        check(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 4, sz, &x), "empty");
        tstor_tensor_release(x);
      }, 0, t);
      time_once(inner, [&] {
        at::Tensor x = at::empty({8, 3, 32, 32}, at::kFloat);
        (void)x;
      }, 1, t);
    }
    row({"empty 8x3x32x32 float32 + release", t[0], t[1]});
  }

  // --- views
  {
    const int64_t sz[4] = {8, 3, 32, 32};
    tstor_tensor *x;
    check(tstor_tensor_empty(ctx, cpu, TSTOR_FLOAT32, 4, sz, &x), "empty");
    at::Tensor tx = at::empty({8, 3, 32, 32}, at::kFloat);
    const long inner = 500000;
    std::vector<std::vector<double>> t;
    for (int r = 0; r < reps; r++) {
      time_once(inner, [&] {
        tstor_tensor *v;
        check(tstor_tensor_transpose(x, 1, 3, &v), "transpose");
        tstor_tensor_release(v);
      }, 0, t);
      time_once(inner, [&] {
        at::Tensor v = tx.transpose(1, 3);
        (void)v;
      }, 1, t);
      time_once(inner, [&] {
        tstor_tensor *v;
        check(tstor_tensor_narrow(x, 2, 4, 16, &v), "narrow");
        tstor_tensor_release(v);
      }, 2, t);
      time_once(inner, [&] {
        at::Tensor v = tx.narrow(2, 4, 16);
        (void)v;
      }, 3, t);
    }
    row({"transpose(1, 3) of a 4-d tensor + release", t[0], t[1]});
    row({"narrow(2, 4, 16) of a 4-d tensor + release", t[2], t[3]});
    tstor_tensor_release(x);
  }

  // --- contiguous() of big strided tensors
  struct Big {
    const char *label;
    std::vector<int64_t> sizes;
    std::vector<int64_t> perm;
  };
  std::vector<Big> bigs = {
      {"contiguous() of a transposed 8192x8192 float32", {8192, 8192}, {1, 0}},
      {"contiguous() of NCHW 64x256x56x56 float32 permuted to NHWC", {64, 256, 56, 56}, {0, 2, 3, 1}},
  };
  if (small) {
    bigs[0].sizes = {2048, 2048};
    bigs[1].sizes = {8, 64, 56, 56};
    bigs[0].label = "contiguous() of a transposed 2048x2048 float32";
    bigs[1].label = "contiguous() of NCHW 8x64x56x56 float32 permuted to NHWC";
  }
  for (const Big &b : bigs) {
    int nd = (int)b.sizes.size();
    at::Tensor src = at::rand(b.sizes, at::kFloat);
    tstor_storage *s;
    check(tstor_storage_wrap(ctx, cpu, src.data_ptr(), (size_t)src.numel() * 4, &s), "wrap");
    tstor_tensor *ts, *tp;
    check(tstor_tensor_on_storage(s, TSTOR_FLOAT32, 0, nd, b.sizes.data(), nullptr, &ts), "on");
    check(tstor_tensor_permute(ts, nd, b.perm.data(), &tp), "permute");
    at::Tensor pt = src.permute(b.perm);
    std::vector<std::vector<double>> t;
    for (int r = 0; r < reps; r++) {
      settle();
      time_once(1, [&] {
        tstor_tensor *c;
        check(tstor_tensor_contiguous(tp, &c), "contiguous");
        tstor_tensor_release(c);
      }, 0, t);
      settle();
      time_once(1, [&] {
        at::Tensor c = pt.contiguous();
        (void)c;
      }, 1, t);
    }
    tstor_tensor *c;
    check(tstor_tensor_contiguous(tp, &c), "contiguous");
    at::Tensor tc = pt.contiguous();
    if (std::memcmp(tstor_tensor_data(c), tc.data_ptr(), (size_t)tc.numel() * 4) != 0) {
      std::fprintf(stderr, "%s: results differ\n", b.label);
      return 1;
    }
    row({b.label, t[0], t[1]});
    // The same copy into a destination allocated and touched beforehand:
    // the kernels alone, without the page faults of a fresh allocation.
    tstor_storage *ds;
    check(tstor_storage_wrap(ctx, cpu, tc.data_ptr(), (size_t)tc.numel() * 4, &ds), "wrap");
    tstor_tensor *dt;
    check(tstor_tensor_on_storage(ds, TSTOR_FLOAT32, 0, nd, tstor_tensor_sizes(tp), nullptr, &dt),
          "on");
    std::vector<std::vector<double>> u;
    for (int r = 0; r < reps; r++) {
      settle();
      time_once(1, [&] { check(tstor_tensor_copy_(dt, tp), "copy_"); }, 0, u);
      settle();
      time_once(1, [&] { tc.copy_(pt); }, 1, u);
    }
    std::string label = std::string("  the same, copy_ into an existing tensor");
    row({label.c_str(), u[0], u[1]});
    tstor_tensor_release(dt);
    tstor_storage_release(ds);
    tstor_tensor_release(c);
    tstor_tensor_release(tp);
    tstor_tensor_release(ts);
    tstor_storage_release(s);
  }
  tstor_context_close(ctx);
  return 0;
}
