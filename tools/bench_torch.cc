// tstor bench --torch: tstor, PyTorch (libtorch) and libc side by side in one
// run, on the same buffers where the operation has buffers: PyTorch's, which
// tstor wraps and libc writes through a pointer. Rounds alternate the three
// sides, each after settle() (bench/side_by_side.h: PyTorch's OpenMP threads
// spin after each parallel region, on the cores the next run needs). For each
// side the best round is kept; the ratio columns are PyTorch's (libc's) time
// over tstor's, best against best and the median of the per-round ratios, so
// above 1 means tstor is faster. Both libraries use the same thread count.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>
#include <fcntl.h>
#include <tstor/mapped.h>
#include <torch/version.h>
#include <tstor/typed.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../bench/side_by_side.h"
#include "commands.h"

using side_by_side::best;
using side_by_side::median;
using side_by_side::now;
using side_by_side::settle;

namespace {

const size_t MiB = size_t(1) << 20;
volatile uint64_t sink;

void check(int rc, const char *what) {
  if (rc != 0) {
    std::fprintf(stderr, "tstor bench --torch: %s: %s: %s\n", what, tstor_strerror(rc),
                 tstor_last_error());
    std::exit(EXIT_FAILED);
  }
}

uint64_t sum(const void *p, size_t n) {
  const uint64_t *w = static_cast<const uint64_t *>(p);
  uint64_t s = 0;
  for (size_t i = 0; i < n / 8; i++) s += w[i];
  return s;
}

struct Bench {
  int rounds;
  double scale;
};

// One row: each side runs `iters` times per round; `bytes` per iteration
// gives GB/s, else the time per iteration is printed.
void row(const Bench &b, const char *label, long iters, double bytes,
         const std::function<void()> &ours, const std::function<void()> &torch,
         const std::function<void()> &libc, const char *libc_name) {
  std::vector<double> t_ours, t_torch, t_libc, r_torch, r_libc;
  ours();
  torch();
  if (libc) libc();
  // After the pause a vCPU wakes up slowly: a row of short calls, whose
  // round lasts about a millisecond, would time that wake-up for whichever
  // side runs first. Each side first runs an untimed eighth of its calls.
  const long warm = iters >= 100 ? iters / 8 : 0;
  auto timed = [&](const std::function<void()> &side) {
    settle();
    for (long i = 0; i < warm; i++) side();
    double t = now();
    for (long i = 0; i < iters; i++) side();
    return (now() - t) / double(iters);
  };
  for (int r = 0; r < b.rounds; r++) {
    t_ours.push_back(timed(ours));
    t_torch.push_back(timed(torch));
    r_torch.push_back(t_torch.back() / t_ours.back());
    if (libc) {
      t_libc.push_back(timed(libc));
      r_libc.push_back(t_libc.back() / t_ours.back());
    }
  }
  auto show = [&](double secs) {
    char buf[32];
    if (bytes > 0) std::snprintf(buf, sizeof buf, "%.2f GB/s", bytes / secs / 1e9);
    else if (secs >= 1e-3) std::snprintf(buf, sizeof buf, "%.2f ms", secs * 1e3);
    else if (secs >= 1e-6) std::snprintf(buf, sizeof buf, "%.1f us", secs * 1e6);
    else std::snprintf(buf, sizeof buf, "%.0f ns", secs * 1e9);
    return std::string(buf);
  };
  double o = best(t_ours), p = best(t_torch);
  std::string libc_cols = "- | - | -";
  if (libc) {
    double l = best(t_libc);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s | %.2fx | %.2fx", show(l).c_str(), l / o, median(r_libc));
    libc_cols = buf;
  }
  std::printf("| %s | %s | %s | %s | %.2fx | %.2fx | %s |\n", label, show(o).c_str(),
              show(p).c_str(), libc_name, p / o, median(r_torch), libc_cols.c_str());
  std::fflush(stdout);
}

struct Conversion {
  const char *label;
  tstor_dtype src, dst;
  at::ScalarType tsrc, tdst;
};

const Conversion conversions[] = {
    {"float32 -> float64", TSTOR_FLOAT32, TSTOR_FLOAT64, at::kFloat, at::kDouble},
    {"float64 -> float32", TSTOR_FLOAT64, TSTOR_FLOAT32, at::kDouble, at::kFloat},
    {"float32 -> float16", TSTOR_FLOAT32, TSTOR_FLOAT16, at::kFloat, at::kHalf},
    {"float16 -> float32", TSTOR_FLOAT16, TSTOR_FLOAT32, at::kHalf, at::kFloat},
    {"float32 -> bfloat16", TSTOR_FLOAT32, TSTOR_BFLOAT16, at::kFloat, at::kBFloat16},
    {"bfloat16 -> float32", TSTOR_BFLOAT16, TSTOR_FLOAT32, at::kBFloat16, at::kFloat},
    {"float32 -> int32", TSTOR_FLOAT32, TSTOR_INT32, at::kFloat, at::kInt},
    {"int32 -> float32", TSTOR_INT32, TSTOR_FLOAT32, at::kInt, at::kFloat},
};

// The C casts a libc-only program would write, for the pairs C has types for.
std::function<void()> c_loop(const Conversion &c, void *dst, const void *src, size_t n) {
  if (c.src == TSTOR_FLOAT32 && c.dst == TSTOR_FLOAT64)
    return [=] {
      const float *s = static_cast<const float *>(src);
      double *d = static_cast<double *>(dst);
      for (size_t i = 0; i < n; i++) d[i] = s[i];
    };
  if (c.src == TSTOR_FLOAT64 && c.dst == TSTOR_FLOAT32)
    return [=] {
      const double *s = static_cast<const double *>(src);
      float *d = static_cast<float *>(dst);
      for (size_t i = 0; i < n; i++) d[i] = float(s[i]);
    };
  if (c.src == TSTOR_FLOAT32 && c.dst == TSTOR_INT32)
    return [=] {
      const float *s = static_cast<const float *>(src);
      int32_t *d = static_cast<int32_t *>(dst);
      for (size_t i = 0; i < n; i++) d[i] = int32_t(s[i]);
    };
  if (c.src == TSTOR_INT32 && c.dst == TSTOR_FLOAT32)
    return [=] {
      const int32_t *s = static_cast<const int32_t *>(src);
      float *d = static_cast<float *>(dst);
      for (size_t i = 0; i < n; i++) d[i] = float(s[i]);
    };
  return nullptr;
}

void run_all(tstor_context *ctx, tstor_device cpu, const Bench &b, const char *dir) {
  const size_t big = size_t(256 * MiB * b.scale) / 64 * 64;
  const size_t loop = size_t(64 * MiB * b.scale) / 64 * 64;
  std::printf("| operation | tstor | PyTorch | libc (what) | PyTorch / tstor | median pair | libc | "
              "libc / tstor | median pair |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");

  {  // 256 MiB untyped copy and byte fill, on PyTorch's buffers.
    at::Tensor ta = at::full({int64_t(big)}, 1, at::kByte), tb = at::full({int64_t(big)}, 2, at::kByte);
    tstor_storage *sa, *sb;
    check(tstor_storage_wrap(ctx, cpu, ta.data_ptr(), big, &sa), "wrap");
    check(tstor_storage_wrap(ctx, cpu, tb.data_ptr(), big, &sb), "wrap");
    void *pa = ta.data_ptr(), *pb = tb.data_ptr();
    row(b, "copy 256 MiB (bytes)", 4, 2.0 * double(big), [&] { check(tstor_storage_copy(sb, sa), "copy"); },
        [&] { tb.copy_(ta); }, [&] { std::memcpy(pb, pa, big); }, "memcpy");
    row(b, "fill 256 MiB (bytes)", 4, double(big), [&] { check(tstor_storage_fill(sb, 7), "fill"); },
        [&] { tb.fill_(7); }, [&] { std::memset(pb, 7, big); }, "memset");
    tstor_storage_release(sa);
    tstor_storage_release(sb);
  }
  {  // 256 MiB float fill.
    size_t n = big / 4;
    at::Tensor t = at::zeros({int64_t(n)}, at::kFloat);
    tstor_storage *s;
    check(tstor_storage_wrap(ctx, cpu, t.data_ptr(), big, &s), "wrap");
    float v = 1.5f, *p = static_cast<float *>(t.data_ptr());
    row(b, "fill 256 MiB (float32)", 4, double(big),
        [&] { check(tstor_typed_fill(s, TSTOR_FLOAT32, &v), "typed_fill"); }, [&] { t.fill_(v); },
        [&] {
          for (size_t i = 0; i < n; i++) p[i] = v;
        },
        "C loop");
    tstor_storage_release(s);
  }
  // Allocate, fill and release 64 MiB, as a training loop's temporaries do.
  row(b, "alloc+fill+free 64 MiB", 8, 0,
      [&] {
        tstor_storage *s;
        check(tstor_storage_new(ctx, cpu, loop, &s), "storage_new");
        check(tstor_storage_fill(s, 3), "fill");
        tstor_storage_release(s);
      },
      [&] { at::empty({int64_t(loop)}, at::kByte).fill_(3); },
      [&] {
        void *p = std::malloc(loop);
        std::memset(p, 3, loop);
        sink = static_cast<unsigned char *>(p)[loop / 2];
        std::free(p);
      },
      "malloc+memset");
  {  // Create and release 1 MiB: tstor's cpu allocator against c10's.
    c10::Allocator *c10 = c10::GetCPUAllocator();
    long iters = long(20000 * (b.scale < 1 ? 0.1 : 1));
    row(b, "create+release 1 MiB", iters, 0,
        [&] {
          tstor_storage *s;
          check(tstor_storage_new(ctx, cpu, MiB, &s), "storage_new");
          tstor_storage_release(s);
        },
        [&] {
          c10::DataPtr p = c10->allocate(MiB);
          sink = uintptr_t(p.get());
        },
        [&] {
          void *p;
          if (posix_memalign(&p, 64, MiB) != 0) std::abort();
          sink = uintptr_t(p);
          std::free(p);
        },
        "posix_memalign+free");
  }
  // Conversions of 64M elements (scaled), as dst.copy_(src) in PyTorch. The
  // sources are made as bench/typed_vs_torch.cc makes them, so the figures of
  // the two programs compare; they share only the torch-free side_by_side.h.
  size_t n = size_t(64 * MiB * b.scale);
  for (const Conversion &c : conversions) {
    at::Tensor tsrc = (at::rand({int64_t(n)}, at::kDouble) * 2000 - 1000).to(c.tsrc);
    at::Tensor tdst = at::zeros({int64_t(n)}, c.tdst);
    size_t ses = tstor_dtype_size(c.src), des = tstor_dtype_size(c.dst);
    tstor_storage *src, *dst;
    check(tstor_storage_wrap(ctx, cpu, tsrc.data_ptr(), n * ses, &src), "wrap");
    check(tstor_storage_wrap(ctx, cpu, tdst.data_ptr(), n * des, &dst), "wrap");
    auto libc = c_loop(c, tdst.data_ptr(), tsrc.data_ptr(), n);
    row(b, c.label, 2, double(n * (ses + des)),
        [&] { check(tstor_typed_copy(dst, c.dst, src, c.src), "typed_copy"); },
        [&] { tdst.copy_(tsrc); }, libc, libc ? "C loop" : "-");
    tstor_storage_release(src);
    tstor_storage_release(dst);
  }
  {  // A 256 MiB file in the page cache: mapping it (O(1)) and summing it.
    std::string path = std::string(dir) + "/tstor-bench-torch.bin";
    {
      std::vector<unsigned char> chunk(MiB, 0x11);
      FILE *f = std::fopen(path.c_str(), "wb");
      if (!f) check(TSTOR_EIO, "cannot create the file in --dir");
      for (size_t done = 0; done < big; done += MiB) std::fwrite(chunk.data(), 1, MiB, f);
      std::fclose(f);
    }
    std::vector<unsigned char> buf(big);
    auto read_file = [&] {
      int fd = open(path.c_str(), O_RDONLY);
      size_t got = 0;
      while (got < big) {
        ssize_t r = read(fd, buf.data() + got, big - got);
        if (r <= 0) std::abort();
        got += size_t(r);
      }
      close(fd);
    };
    row(b, "map 256 MiB file + release", 20, 0,
        [&] {
          tstor_storage *s;
          check(tstor_storage_from_file(ctx, path.c_str(), 0, 0, 1, &s), "from_file");
          tstor_storage_release(s);
        },
        [&] { sink = uintptr_t(at::from_file(path, false, int64_t(big), at::kByte).data_ptr()); },
        read_file, "read() whole file");
    row(b, "map 256 MiB file + sum", 2, double(big),
        [&] {
          tstor_storage *s;
          check(tstor_storage_from_file(ctx, path.c_str(), 0, 0, 1, &s), "from_file");
          sink = sum(tstor_storage_data(s), big);
          tstor_storage_release(s);
        },
        [&] {
          at::Tensor t = at::from_file(path, false, int64_t(big), at::kByte);
          sink = sum(t.data_ptr(), big);
        },
        [&] {
          read_file();
          sink = sum(buf.data(), big);
        },
        "read() + sum");
    unlink(path.c_str());
  }
}

}  // namespace

extern "C" int tstor_bench_torch(tstor_context *ctx, int rounds, int quick, int threads,
                                 const char *dir) {
  tstor_device cpu;
  check(tstor_device_parse(ctx, "cpu", &cpu), "cpu");
  at::set_num_threads(threads);
  tstor_set_num_threads(threads);
  Bench b{rounds, quick ? 0.125 : 1.0};
  std::printf("tstor %s against libtorch %s, %d thread(s) each, best of %d rounds%s\n\n",
              tstor_version_string(), TORCH_VERSION, threads, rounds,
              quick ? " (--quick: sizes / 8)" : "");
  run_all(ctx, cpu, b, dir);
  std::printf("\nRatios above 1: tstor takes less time. Rounds alternate tstor, PyTorch, libc, each\n"
              "after a 30 ms pause for PyTorch's OpenMP threads to stop spinning.\n");
  return 0;
}
