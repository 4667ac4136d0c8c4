// Timing helpers for the benchmarks that run tstor and PyTorch side by side
// in one process (bench/typed_vs_torch.cc, tools/bench_torch.cc).
//
// PyTorch's OpenMP threads spin for a while after each parallel region before
// they sleep (libgomp's GOMP_SPINCOUNT, read once at load, so it cannot be
// changed from inside the process). A run timed right after one of PyTorch's
// would share its cores with those spinning threads; settle() pauses before
// every timed run, tstor's and PyTorch's alike, long enough for them to sleep.
#ifndef TSTOR_BENCH_SIDE_BY_SIDE_H
#define TSTOR_BENCH_SIDE_BY_SIDE_H

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace side_by_side {

inline double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

inline void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline double best(const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); }

}  // namespace side_by_side

#endif
