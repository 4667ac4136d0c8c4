// Shape inference side by side with libtorch, on the meta device, in one run:
// the output of a conv2d (a channels-last batch of 8 x 64 x 56 x 56, 128
// filters of 3 x 3, stride 2, padding 1, with bias) and of a broadcasting add
// ((8, 64, 56, 56) + (64, 1, 1)). Each side creates the output tensor on meta,
// as an operation on meta does, and releases it.
//
//   shape_vs_torch [--calls N] [--reps R] [--python PATH]
//
// tstor: the tensor forms (tstor_shape_conv, tstor_shape_binary: layouts, type
// promotion, the output tensor on meta), the layout forms alone (the shape
// inference without a tensor), and tstor_tensor_empty on meta alone (what
// creating the output tensor costs by itself). libtorch: at::add on meta through its C++ API. libtorch
// 1.13 has no C++ meta kernel for convolution (PyTorch computes it with a
// Python meta kernel, torch/_meta_registrations.py), so conv2d is timed where
// PyTorch runs it: bench/shape_torch_meta.py, started from here, which times
// torch.add on meta too so that the two PyTorch columns can be compared. Each
// figure is the best of R batches of N calls; results are checked equal.
#include <ATen/ATen.h>
#include <tstor/shape.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
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

// Nanoseconds per call of each function: reps rounds, each timing a batch of
// n calls of every function in turn (so all see the same machine load); the
// best batch of each, and per round the ratio of the first to each other.
struct Timing {
  std::vector<double> best;
  std::vector<std::vector<double>> ratios;  // [function][round]: fns[0] time / fns[i] time
};

Timing time_ns(int n, int reps, const std::vector<std::function<void()>> &fns) {
  Timing t;
  t.best.assign(fns.size(), 1e30);
  t.ratios.assign(fns.size(), {});
  for (auto &f : fns) f();
  for (int r = 0; r < reps; r++) {
    std::vector<double> round;
    for (auto &f : fns) {
      double t0 = now();
      for (int i = 0; i < n; i++) f();
      round.push_back((now() - t0) / n * 1e9);
    }
    for (size_t i = 0; i < fns.size(); i++) {
      t.best[i] = std::min(t.best[i], round[i]);
      t.ratios[i].push_back(round[0] / round[i]);
    }
  }
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool same_layout(const tstor_tensor *t, const at::Tensor &a) {
  if (tstor_tensor_dim(t) != a.dim()) return false;
  for (int i = 0; i < a.dim(); i++)
    if (tstor_tensor_sizes(t)[i] != a.size(i) || tstor_tensor_strides(t)[i] != a.stride(i))
      return false;
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  int calls = 20000, reps = 7;
  std::string python = "/usr/bin/python3";
  std::string script = std::string(TSTOR_BENCH_SRCDIR) + "/shape_torch_meta.py";
  for (int i = 1; i < argc; i++) {
    if (!std::strcmp(argv[i], "--calls") && i + 1 < argc) calls = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--python") && i + 1 < argc) python = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--calls N] [--reps R] [--python PATH]\n", argv[0]);
      return 2;
    }
  }

  tstor_context *ctx;
  tstor_device meta;
  check(tstor_context_open(nullptr, &ctx), "context");
  check(tstor_device_parse(ctx, "meta", &meta), "meta");

  // conv2d inputs, channels-last, and the broadcasting add's operands
  int64_t xs[] = {8, 64, 56, 56}, ws[] = {128, 64, 3, 3}, bs[] = {128};
  int64_t as[] = {8, 64, 56, 56}, cs[] = {64, 1, 1};
  tstor_layout xl;
  check(tstor_layout_init(&xl, TSTOR_FLOAT32, 4, xs, nullptr), "layout");
  check(tstor_layout_restride(&xl, TSTOR_MEMORY_CHANNELS_LAST), "restride");
  tstor_tensor *x, *w, *b, *a, *c;
  check(tstor_layout_empty(ctx, meta, &xl, &x), "x");
  check(tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, 4, ws, &w), "w");
  check(tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, 1, bs, &b), "b");
  check(tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, 4, as, &a), "a");
  check(tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, 3, cs, &c), "c");
  tstor_conv_params p = TSTOR_CONV_PARAMS_INIT(2);
  p.stride[0] = p.stride[1] = 2;
  p.padding[0] = p.padding[1] = 1;

  auto mo = at::TensorOptions().device(at::kMeta).dtype(at::kFloat);
  at::Tensor tx = at::empty({8, 64, 56, 56}, mo).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor ta = at::empty({8, 64, 56, 56}, mo), tc = at::empty({64, 1, 1}, mo);

  // the results agree
  tstor_tensor *y;
  check(tstor_shape_binary(TSTOR_ELEMENTWISE_PROMOTE, a, c, &y), "add");
  bool add_same = same_layout(y, at::add(ta, tc));
  tstor_tensor_release(y);
  check(tstor_shape_conv(x, w, b, &p, &y), "conv");
  // PyTorch's answer for this conv (from shape_torch_meta.py's setup): channels-last
  int64_t want_sizes[] = {8, 128, 28, 28}, want_strides[] = {100352, 1, 3584, 128};
  bool conv_same = !std::memcmp(tstor_tensor_sizes(y), want_sizes, sizeof want_sizes) &&
                   !std::memcmp(tstor_tensor_strides(y), want_strides, sizeof want_strides);
  tstor_tensor_release(y);

  tstor_layout wl, bl, al, cl, out;
  check(tstor_layout_of(w, &wl), "w");
  check(tstor_layout_of(b, &bl), "b");
  check(tstor_layout_of(a, &al), "a");
  check(tstor_layout_of(c, &cl), "c");
  tstor_layout ops[2] = {al, cl};
  // add: libtorch C++ first, then tstor's tensor and layout forms
  Timing add = time_ns(calls, reps,
                       {[&] { at::Tensor r = at::add(ta, tc); },
                        [&] {
                          tstor_tensor *o;
                          tstor_shape_binary(TSTOR_ELEMENTWISE_PROMOTE, a, c, &o);
                          tstor_tensor_release(o);
                        },
                        [&] {
                          tstor_layout_elementwise(TSTOR_ELEMENTWISE_PROMOTE, 2, ops, 0, nullptr,
                                                   &out);
                        },
                        [&] {  // the output tensor alone, without shape inference
                          tstor_tensor *o;
                          tstor_tensor_empty(ctx, meta, TSTOR_FLOAT32, 4, as, &o);
                          tstor_tensor_release(o);
                        }});
  Timing conv = time_ns(calls, reps,
                        {[&] {
                           tstor_tensor *o;
                           tstor_shape_conv(x, w, b, &p, &o);
                           tstor_tensor_release(o);
                         },
                         [&] { tstor_layout_conv(&xl, &wl, &bl, &p, &out); }});

  // PyTorch's Python meta kernels
  std::map<std::string, double> py;
  std::string cmd = python + " " + script + " " + std::to_string(std::max(calls / 10, 100)) + " " +
                    std::to_string(reps) + " 2>/dev/null";
  if (FILE *f = popen(cmd.c_str(), "r")) {
    char name[64];
    double ns;
    while (std::fscanf(f, "%63s %lf", name, &ns) == 2) py[name] = ns;
    pclose(f);
  }

  std::printf("| operation on meta | tstor tensor form ns | tstor layout form ns | libtorch C++ "
              "ns | PyTorch from Python ns | libtorch / tstor tensor form (best; median round) | "
              "same result |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  auto pyv = [&](const char *k) { return py.count(k) ? py[k] : 0.0; };
  std::printf("| add (8, 64, 56, 56) + (64, 1, 1) | %.0f | %.0f | %.0f | %.0f | %.1fx; %.1fx | %s |\n",
              add.best[1], add.best[2], add.best[0], pyv("add"), add.best[0] / add.best[1],
              median(add.ratios[1]), add_same ? "yes" : "NO");
  std::printf("| conv2d (8, 64, 56, 56) channels-last, 128x64x3x3, stride 2, pad 1, bias | %.0f | "
              "%.0f | no C++ meta kernel | %.0f | %.0fx against PyTorch's Python meta kernel | "
              "%s |\n",
              conv.best[0], conv.best[1], pyv("conv2d"), pyv("conv2d") / conv.best[0],
              conv_same ? "yes" : "NO");
  std::printf("\ntstor_tensor_empty on meta alone (the output's storage and tensor, no shape "
              "inference): %.0f ns; libtorch / tstor layout form for add: %.1fx (best), %.1fx "
              "(median round)\n",
              add.best[3], add.best[0] / add.best[2], median(add.ratios[2]));
  for (tstor_tensor *t : {x, w, b, a, c}) tstor_tensor_release(t);
  tstor_context_close(ctx);
  return add_same && conv_same ? 0 : 1;
}
