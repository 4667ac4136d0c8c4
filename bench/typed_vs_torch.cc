// Side by side with libtorch in one run: converting copies of 64M elements
// between float32 and float64, float16, bfloat16 and int32 (both ways), a
// same-dtype copy of 256 MiB and a fill of 256 MiB, each with the same number
// of threads on both sides. Both libraries read and write the same buffers
// (PyTorch's, which tstor wraps), allocated and touched beforehand, as
// dst.copy_(src) does in PyTorch; their results are compared byte for byte.
//
//   typed_vs_torch [--threads 1,2] [--elements N] [--reps R]
//
// Prints a Markdown table: throughput counts the bytes read plus the bytes
// written. tstor's and PyTorch's runs alternate, so both see the same machine
// load, and each waits for the machine to settle first (see settle()); each
// side's time is the best of R runs (on a shared machine the best
// run is the one least disturbed), and the ratio column is the median of the
// R adjacent-pair ratios, a second view that does not depend on one lucky run.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <tstor/typed.h>

#include "side_by_side.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

struct Row {
  const char *label;
  enum Kind { CONVERT, COPY, FILL } kind;
  tstor_dtype src, dst;
  at::ScalarType tsrc, tdst;
};

const Row rows[] = {
    {"float32 -> float64", Row::CONVERT, TSTOR_FLOAT32, TSTOR_FLOAT64, at::kFloat, at::kDouble},
    {"float64 -> float32", Row::CONVERT, TSTOR_FLOAT64, TSTOR_FLOAT32, at::kDouble, at::kFloat},
    {"float32 -> float16", Row::CONVERT, TSTOR_FLOAT32, TSTOR_FLOAT16, at::kFloat, at::kHalf},
    {"float16 -> float32", Row::CONVERT, TSTOR_FLOAT16, TSTOR_FLOAT32, at::kHalf, at::kFloat},
    {"float32 -> bfloat16", Row::CONVERT, TSTOR_FLOAT32, TSTOR_BFLOAT16, at::kFloat,
     at::kBFloat16},
    {"bfloat16 -> float32", Row::CONVERT, TSTOR_BFLOAT16, TSTOR_FLOAT32, at::kBFloat16,
     at::kFloat},
    {"float32 -> int32", Row::CONVERT, TSTOR_FLOAT32, TSTOR_INT32, at::kFloat, at::kInt},
    {"int32 -> float32", Row::CONVERT, TSTOR_INT32, TSTOR_FLOAT32, at::kInt, at::kFloat},
    {"copy float32 (256 MiB)", Row::COPY, TSTOR_FLOAT32, TSTOR_FLOAT32, at::kFloat, at::kFloat},
    {"fill float32 (256 MiB)", Row::FILL, TSTOR_FLOAT32, TSTOR_FLOAT32, at::kFloat, at::kFloat},
};

using side_by_side::best;
using side_by_side::median;
using side_by_side::now;
using side_by_side::settle;

void check(int rc, const char *what) {
  if (rc != 0) {
    std::fprintf(stderr, "%s: %s: %s\n", what, tstor_strerror(rc), tstor_last_error());
    std::exit(1);
  }
}

std::vector<int> parse_list(const char *s) {
  std::vector<int> out;
  for (const char *p = s; *p;) {
    out.push_back(std::atoi(p));
    p = std::strchr(p, ',');
    if (!p) break;
    p++;
  }
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  std::vector<int> threads = {2};
  size_t n = size_t(64) << 20;
  int reps = 11;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--elements")) n = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--threads 1,2] [--elements N] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  tstor_context *ctx = nullptr;
  check(tstor_context_default(&ctx), "context");
  tstor_device cpu;
  check(tstor_device_parse(ctx, "cpu", &cpu), "cpu");

  std::printf("| operation | threads | PyTorch GB/s | tstor GB/s | tstor / PyTorch | "
              "median pair ratio | same bytes |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (int nt : threads) {
    at::set_num_threads(nt);
    tstor_set_num_threads(nt);
    for (const Row &row : rows) {
      // Sources: values every destination represents without NaN or overflow.
      at::Tensor tsrc = (at::rand({int64_t(n)}, at::kDouble) * 2000 - 1000).to(row.tsrc);
      at::Tensor tdst = at::zeros({int64_t(n)}, row.tdst);
      size_t ses = tstor_dtype_size(row.src), des = tstor_dtype_size(row.dst);
      // Both libraries work on the very same bytes (tstor wraps PyTorch's
      // buffers), so neither gains from where its allocator put them.
      tstor_storage *src, *dst;
      check(tstor_storage_wrap(ctx, cpu, tsrc.data_ptr(), n * ses, &src), "wrap");
      check(tstor_storage_wrap(ctx, cpu, tdst.data_ptr(), n * des, &dst), "wrap");
      float fill_value = 1.5f;

      std::function<void()> run_tstor, run_torch;
      double bytes;
      if (row.kind == Row::FILL) {
        run_tstor = [&] { check(tstor_typed_fill(dst, row.dst, &fill_value), "fill"); };
        run_torch = [&] { tdst.fill_(fill_value); };
        bytes = double(n * des);
      } else {
        run_tstor = [&] { check(tstor_typed_copy(dst, row.dst, src, row.src), "copy"); };
        run_torch = [&] { tdst.copy_(tsrc); };
        bytes = double(n * (ses + des));
      }
      for (int w = 0; w < 2; w++) {
        run_tstor();
        run_torch();
      }
      std::vector<double> tt, pt, ratio;
      for (int r = 0; r < reps; r++) {
        settle();
        double t0 = now();
        run_tstor();
        double ts = now() - t0;
        settle();
        t0 = now();
        run_torch();
        double tp = now() - t0;
        tt.push_back(ts);
        pt.push_back(tp);
        ratio.push_back(tp / ts);
      }
      run_torch();
      std::vector<unsigned char> expected(n * des);
      std::memcpy(expected.data(), tdst.data_ptr(), n * des);
      std::memset(tdst.data_ptr(), 0, n * des);
      run_tstor();
      bool same = std::memcmp(expected.data(), tdst.data_ptr(), n * des) == 0;
      double tg = bytes / best(tt) / 1e9, pg = bytes / best(pt) / 1e9;
      std::printf("| %s | %d | %.2f | %.2f | %.2fx | %.2fx | %s |\n", row.label, nt, pg, tg,
                  tg / pg, median(ratio), same ? "yes" : "NO");
      std::fflush(stdout);
      tstor_storage_release(src);
      tstor_storage_release(dst);
    }
  }
  std::printf("\n%zu elements per operation; best of %d alternating runs each.\n", n, reps);
  return 0;
}
