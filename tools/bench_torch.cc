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

#include <tstor/tensor.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// What a bandwidth-bound row's bytes are compared with: the fastest this
// machine moves as many bytes, measured in the row's own rounds. A
// conversion's ceiling reads and writes the conversion's own bytes, as many
// of each as it does: a widening conversion writes twice what it reads, and
// writes cost more than reads on the machines measured.
enum class Ceiling { none, copy, fill, convert };

// The buffers and sizes a conversion reads and writes, for its ceiling.
struct Shape {
  const void *src;
  size_t src_bytes;
  void *dst;
  size_t dst_bytes;
};

struct Bench {
  int rounds;
  double scale;
  int threads;
  at::Tensor a, b; // byte buffers for the ceilings' copies and fills
};

// Bare loops of streaming stores over the bench's threads, each thread a
// contiguous part: what non-temporal stores alone reach, for the ceilings.
#if defined(__x86_64__)
__attribute__((target("avx"))) void stream_part(char *d, const char *s, size_t n, int fill) {
  const __m256i v = _mm256_set1_epi8(7);
  for (size_t i = 0; i + 64 <= n; i += 64) {
    __m256i a = fill ? v : _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i));
    __m256i c = fill ? v : _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + i + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i *>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i *>(d + i + 32), c);
  }
  _mm_sfence();
}
#else
void stream_part(char *d, const char *s, size_t n, int fill) {
  if (fill) std::memset(d, 7, n);
  else std::memcpy(d, s, n);
}
#endif

// Reads s_bytes at s and writes d_bytes at d, one a multiple of the other, the
// bytes copied over and over where d is larger and xor'ed where it is smaller:
// a conversion's traffic without its arithmetic.
#if defined(__x86_64__)
__attribute__((target("avx"))) static inline void put32(char *p, __m256i v, int stream) {
  if (stream) _mm256_stream_si256(reinterpret_cast<__m256i *>(p), v);
  else _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), v);
}
__attribute__((target("avx"))) static inline __m256i get32(const char *p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
}
__attribute__((target("avx"))) static inline __m256i xor32(__m256i a, __m256i b) {
  return _mm256_castps_si256(_mm256_xor_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b)));
}
__attribute__((target("avx"))) void shaped_part(char *d, size_t d_bytes, const char *s,
                                                 size_t s_bytes, int stream) {
  if (d_bytes >= s_bytes) {
    size_t m = d_bytes / s_bytes;
    for (size_t i = 0; i + 32 <= s_bytes; i += 32) {
      __m256i v = get32(s + i);
      for (size_t k = 0; k < m; k++) put32(d + i * m + 32 * k, v, stream);
    }
  } else {
    size_t m = s_bytes / d_bytes;
    for (size_t j = 0; j + 32 <= d_bytes; j += 32) {
      __m256i v = get32(s + j * m);
      for (size_t k = 1; k < m; k++) v = xor32(v, get32(s + j * m + 32 * k));
      put32(d + j, v, stream);
    }
  }
  if (stream) _mm_sfence();
}
#else
void shaped_part(char *d, size_t d_bytes, const char *s, size_t s_bytes, int stream) {
  (void)stream;
  for (size_t i = 0; i < d_bytes; i++) d[i] = s[i % s_bytes];
}
#endif

// The same over the bench's threads, each a contiguous part of both sides.
void shaped(const Shape &sh, int threads, int stream) {
  std::vector<std::thread> t;
  size_t unit = 64 * std::max(sh.src_bytes, sh.dst_bytes) / std::min(sh.src_bytes, sh.dst_bytes);
  size_t sp = sh.src_bytes / size_t(threads) / unit * unit;
  size_t dp = sh.dst_bytes >= sh.src_bytes ? sp * (sh.dst_bytes / sh.src_bytes)
                                           : sp / (sh.src_bytes / sh.dst_bytes);
  for (int k = 0; k < threads; k++) {
    size_t s_at = sp * size_t(k), d_at = dp * size_t(k);
    size_t s_len = k == threads - 1 ? sh.src_bytes - s_at : sp;
    size_t d_len = k == threads - 1 ? sh.dst_bytes - d_at : dp;
    t.emplace_back([=] {
      shaped_part(static_cast<char *>(sh.dst) + d_at, d_len,
                  static_cast<const char *>(sh.src) + s_at, s_len, stream);
    });
  }
  for (auto &th : t) th.join();
}

// dst (64-byte aligned, n a multiple of 64 per thread) written with streaming
// stores: a copy of src, or with fill set, bytes of 7.
void bare_streaming(void *dst, const void *src, size_t n, int threads, int fill) {
  std::vector<std::thread> t;
  size_t part = n / size_t(threads) / 64 * 64;
  for (int k = 0; k < threads; k++) {
    size_t at = part * size_t(k), len = k == threads - 1 ? n - at : part;
    t.emplace_back([=] {
      stream_part(static_cast<char *>(dst) + at, static_cast<const char *>(src) + at, len, fill);
    });
  }
  for (auto &th : t) th.join();
}

// The ways to move `bytes` that make a row's ceiling: for a copy (bytes read
// and written), memcpy, the bare streaming copy and PyTorch's copy_ of half as
// many bytes; for a fill (bytes written), memset, the bare streaming fill and
// PyTorch's fill_.
// For a conversion (`shape`), a loop of ordinary stores (memcpy where the
// sizes are equal), the same loop with streaming stores, and PyTorch's own
// conversion (the row's PyTorch side, not run again).
std::vector<std::function<void()>> ceiling_sides(const Bench &b, Ceiling kind, double bytes,
                                                 const Shape *shape) {
  std::vector<std::function<void()>> sides;
  if (kind == Ceiling::none) return sides;
  if (kind == Ceiling::convert) {
    Shape sh = *shape;
    int threads = b.threads;
    if (sh.src_bytes == sh.dst_bytes)
      sides.push_back([=] { std::memcpy(sh.dst, sh.src, sh.src_bytes); });
    else
      sides.push_back([=] { shaped(sh, threads, 0); });
    sides.push_back([=] { shaped(sh, threads, 1); });
    return sides;
  }
  size_t n = size_t(kind == Ceiling::copy ? bytes / 2 : bytes) / 64 * 64;
  if (n > size_t(b.a.numel())) std::abort();
  char *pa = static_cast<char *>(b.a.data_ptr()), *pb = static_cast<char *>(b.b.data_ptr());
  at::Tensor ta = b.a.narrow(0, 0, int64_t(n)), tb = b.b.narrow(0, 0, int64_t(n));
  int threads = b.threads;
  if (kind == Ceiling::copy) {
    sides.push_back([=] { std::memcpy(pb, pa, n); });
    sides.push_back([=] { bare_streaming(pb, pa, n, threads, 0); });
    sides.push_back([=]() mutable { tb.copy_(ta); });
  } else {
    sides.push_back([=] { std::memset(pb, 7, n); });
    sides.push_back([=] { bare_streaming(pb, nullptr, n, threads, 1); });
    sides.push_back([=]() mutable { tb.fill_(7); });
  }
  return sides;
}

// One row: each side runs `iters` times per round; `bytes` per iteration
// gives GB/s, else the time per iteration is printed. A bandwidth-bound row
// names its kind of ceiling, timed in the same rounds, and gets tstor's
// fraction of it.
void row(const Bench &b, const char *label, long iters, double bytes,
         const std::function<void()> &ours, const std::function<void()> &torch,
         const std::function<void()> &libc, const char *libc_name,
         Ceiling ceiling = Ceiling::none, const Shape *shape = nullptr) {
  std::vector<double> t_ours, t_torch, t_libc, r_torch, r_libc;
  std::vector<std::function<void()>> limits = ceiling_sides(b, ceiling, bytes, shape);
  std::vector<double> t_limit(limits.size(), 1e30);
  // tstor's times taken beside the ceiling's: one for each time a side of
  // the ceiling is taken. This machine's bandwidth swings from call to call
  // (30 to 105 GB/s between two calls of the same loop, on the 2-vCPU EPYC),
  // and the best of three sides' rounds would otherwise be set against the
  // best of tstor's, from a third as many tries at a fast moment.
  double o_beside = 1e30;
  // Each side first runs untimed calls, as many for every side of a row.
  // At least one: ordinary stores leave up to a last-level cache of dirty
  // lines, written back during whatever runs next, so a side's first call
  // after another side would pay for that side's lines; after its own call
  // it pays for its own, as in any steady stream of its calls. And after the
  // pause a vCPU wakes up slowly: a row of short calls, whose round lasts a
  // millisecond or less, would time that wake-up for whichever side runs
  // first. So an eighth of the calls in rows of 100 or more, and in any row
  // enough for about 200 us of the slower of tstor and PyTorch.
  double longest = 0;
  auto first = [&](const std::function<void()> &side) {
    double t = now();
    side();
    longest = std::max(longest, now() - t);
  };
  first(ours);
  first(torch);
  if (libc) libc();
  for (auto &l : limits) l();
  long warm = iters >= 100 ? iters / 8 : 1;
  if (longest < 200e-6) {
    long for_200us = long(200e-6 / std::max(longest, 1e-9)) + 1;
    warm = std::max(warm, std::min(iters, for_200us));
  }
  auto timed = [&](const std::function<void()> &side) {
    settle();
    for (long i = 0; i < warm; i++) side();
    double t = now();
    for (long i = 0; i < iters; i++) side();
    return (now() - t) / double(iters);
  };
  // tstor and another side, one right after the other, tstor first if asked.
  auto beside = [&](const std::function<void()> &other, bool ours_first, double &to, double &tx) {
    if (ours_first) {
      to = timed(ours);
      tx = timed(other);
    } else {
      tx = timed(other);
      to = timed(ours);
    }
  };
  // tstor and PyTorch take turns at going first in a round: whichever follows
  // the previous round's libc and ceiling sides (a 256 MiB read() loop, in the
  // mapped file's row) runs on a vCPU that work has just left busy.
  for (int r = 0; r < b.rounds; r++) {
    double to, tp;
    beside(torch, r % 2 == 0, to, tp);
    t_ours.push_back(to);
    t_torch.push_back(tp);
    r_torch.push_back(tp / to);
    if (libc) {
      t_libc.push_back(timed(libc));
      r_libc.push_back(t_libc.back() / t_ours.back());
    }
    for (size_t k = 0; k < limits.size(); k++) {
      double tb, tl;
      beside(limits[k], (r + int(k)) % 2 == 0, tb, tl);
      t_limit[k] = std::min(t_limit[k], tl);
      o_beside = std::min(o_beside, tb);
    }
    // A conversion's ceiling includes PyTorch's own side, timed beside `to`.
    if (ceiling == Ceiling::convert) o_beside = std::min(o_beside, to);
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
  std::string ceiling_cols = "- | -";
  if (ceiling == Ceiling::convert) t_limit.push_back(p);
  if (!limits.empty()) {
    const char *const names[] = {ceiling == Ceiling::convert && shape->src_bytes != shape->dst_bytes
                                     ? "loop"
                                     : "libc",
                                 "streaming", "PyTorch"};
    size_t top = size_t(std::min_element(t_limit.begin(), t_limit.end()) - t_limit.begin());
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s (%s) | %.2f (%s)", show(t_limit[top]).c_str(), names[top],
                  t_limit[top] / o_beside, show(o_beside).c_str());
    ceiling_cols = buf;
  }
  std::printf("| %s | %s | %s | %s | %.2fx | %.2fx | %s | %s |\n", label, show(o).c_str(),
              show(p).c_str(), libc_name, p / o, median(r_torch), libc_cols.c_str(),
              ceiling_cols.c_str());
  std::fflush(stdout);
}

// The store each kind of host work of 128 MiB and up (bytes read and
// written) writes with at the end of the run: its operation called last.
void store_choices() {
  static const char *const works[] = {"copy", "fill", "convert", "transpose", "widen"};
  std::printf("\nStores for 128 MiB and up, each kind's last operation (policy %s):", tstor_get_store_policy() == TSTOR_STORES_AUTO ? "auto"
                                        : tstor_get_store_policy() == TSTOR_STORES_STREAMING ? "streaming"
                                                                                          : "ordinary");
  for (int w = 0; w < int(sizeof works / sizeof works[0]); w++) {
    tstor_store_choice c = TSTOR_STORE_CHOICE_INIT;
    check(tstor_get_store_choice(tstor_store_work(w), 256 * MiB, &c), "store choice");
    std::printf("%s %s %s", w ? "," : "", works[w], c.streaming ? "streaming" : "ordinary");
    if (c.measured) std::printf(" (streaming %.2fx ordinary)", c.streaming_speedup);
  }
  std::printf("\n");
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

void run_all(tstor_context *ctx, tstor_device cpu, Bench &b, const char *dir) {
  const size_t big = size_t(256 * MiB * b.scale) / 64 * 64;
  const size_t loop = size_t(64 * MiB * b.scale) / 64 * 64;
  // The largest ceiling: float32 -> float64's 12 bytes an element, half of
  // them copied.
  const size_t ceiling_bytes = size_t(64 * MiB * b.scale) * 6;
  b.a = at::full({int64_t(ceiling_bytes)}, 1, at::kByte);
  b.b = at::full({int64_t(ceiling_bytes)}, 2, at::kByte);
  std::printf("| operation | tstor | PyTorch | libc (what) | PyTorch / tstor | median pair | libc | "
              "libc / tstor | median pair | ceiling (best of) | tstor / ceiling |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");

  {  // 256 MiB untyped copy and byte fill, on PyTorch's buffers.
    at::Tensor ta = at::full({int64_t(big)}, 1, at::kByte), tb = at::full({int64_t(big)}, 2, at::kByte);
    tstor_storage *sa, *sb;
    check(tstor_storage_wrap(ctx, cpu, ta.data_ptr(), big, &sa), "wrap");
    check(tstor_storage_wrap(ctx, cpu, tb.data_ptr(), big, &sb), "wrap");
    void *pa = ta.data_ptr(), *pb = tb.data_ptr();
    row(b, "copy 256 MiB (bytes)", 4, 2.0 * double(big), [&] { check(tstor_storage_copy(sb, sa), "copy"); },
        [&] { tb.copy_(ta); }, [&] { std::memcpy(pb, pa, big); }, "memcpy", Ceiling::copy);
    row(b, "fill 256 MiB (bytes)", 4, double(big), [&] { check(tstor_storage_fill(sb, 7), "fill"); },
        [&] { tb.fill_(7); }, [&] { std::memset(pb, 7, big); }, "memset", Ceiling::fill);
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
        "C loop", Ceiling::fill);
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
    Shape shape = {tsrc.data_ptr(), n * ses, tdst.data_ptr(), n * des};
    row(b, c.label, 2, double(n * (ses + des)),
        [&] { check(tstor_typed_copy(dst, c.dst, src, c.src), "typed_copy"); },
        [&] { tdst.copy_(tsrc); }, libc, libc ? "C loop" : "-", Ceiling::convert, &shape);
    tstor_storage_release(src);
    tstor_storage_release(dst);
  }
  // Transposing copies, float32: contiguous() of a transposed 8192 x 8192
  // matrix and of an NCHW 64x256x56x56 tensor permuted to NHWC (sizes
  // scaled), and the same copies into an existing tensor (copy_), the kernel
  // alone. tstor's tensors are views of PyTorch's buffers.
  struct Transpose {
    const char *label;
    std::vector<int64_t> sizes, perm;
  };
  const int64_t side = b.scale < 1 ? 2048 : 8192, batch = b.scale < 1 ? 8 : 64;
  const Transpose transposes[] = {
      {"transposed 8192x8192 float32", {side, side}, {1, 0}},
      {"NCHW 64x256x56x56 float32 to NHWC", {batch, 256, 56, 56}, {0, 2, 3, 1}}};
  for (const Transpose &tr : transposes) {
    at::Tensor tsrc = at::rand(tr.sizes, at::kFloat), tview = tsrc.permute(tr.perm);
    at::Tensor tdst = at::empty(tview.sizes(), at::kFloat);
    size_t nbytes = size_t(tsrc.numel()) * 4;
    tstor_storage *ss, *ds;
    check(tstor_storage_wrap(ctx, cpu, tsrc.data_ptr(), nbytes, &ss), "wrap");
    check(tstor_storage_wrap(ctx, cpu, tdst.data_ptr(), nbytes, &ds), "wrap");
    tstor_tensor *src, *view, *dst;
    check(tstor_tensor_on_storage(ss, TSTOR_FLOAT32, 0, int(tr.sizes.size()), tr.sizes.data(), nullptr,
                                  &src), "tensor");
    check(tstor_tensor_permute(src, int(tr.perm.size()), tr.perm.data(), &view), "permute");
    check(tstor_tensor_on_storage(ds, TSTOR_FLOAT32, 0, int(tview.dim()), tview.sizes().data(), nullptr,
                                  &dst), "tensor");
    std::string label = std::string("contiguous() of ") + tr.label;
    row(b, label.c_str(), 2, 2.0 * double(nbytes),
        [&] {
          tstor_tensor *c;
          check(tstor_tensor_contiguous(view, &c), "contiguous");
          tstor_tensor_release(c);
        },
        [&] { sink = uintptr_t(tview.contiguous().data_ptr()); }, nullptr, "-", Ceiling::copy);
    label = std::string("copy_ of ") + tr.label;
    row(b, label.c_str(), 2, 2.0 * double(nbytes), [&] { check(tstor_tensor_copy_(dst, view), "copy_"); },
        [&] { tdst.copy_(tview); }, nullptr, "-", Ceiling::copy);
    tstor_tensor_release(dst);
    tstor_tensor_release(view);
    tstor_tensor_release(src);
    tstor_storage_release(ss);
    tstor_storage_release(ds);
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
  Bench b{rounds, quick ? 0.125 : 1.0, threads};
  std::printf("tstor %s against libtorch %s, %d thread(s) each, best of %d rounds%s\n\n",
              tstor_version_string(), TORCH_VERSION, threads, rounds,
              quick ? " (--quick: sizes / 8)" : "");
  run_all(ctx, cpu, b, dir);
  store_choices();
  std::printf("\nRatios above 1: tstor takes less time. A round runs tstor and PyTorch (each\n"
              "first in every other round), libc and the ceiling's sides, each after a 30 ms pause\n"
              "for PyTorch's OpenMP threads to stop spinning. The ceiling of a copy is the best of\n"
              "memcpy, a bare loop of streaming stores and PyTorch's copy_ moving as many bytes (read\n"
              "and written); that of a conversion the best of a bare loop that reads and writes the\n"
              "conversion's bytes (memcpy where the two are the same size), the loop with streaming\n"
              "stores and PyTorch's conversion; that of a fill the best of memset, the streaming\n"
              "loop and fill_. tstor / ceiling is tstor's bandwidth over it, tstor timed once beside\n"
              "each timing of a ceiling's side, so that both are the best of as many tries (in\n"
              "brackets: tstor's best of those).\n");
  return 0;
}
