// PyTorch's side of bench_cuda from C++, without the interpreter: allocate +
// free through PyTorch's CUDA caching allocator for the sizes bench_cuda
// measures. Prints one line per size, "SIZE EMPTY_NS RAW_NS": at::empty +
// release, and c10::cuda::CUDACachingAllocator::raw_alloc + raw_delete, each
// the median over 5 rounds of the mean per iteration; lines starting with '#'
// are notes. Built against the libtorch of a CUDA build of PyTorch, e.g.
//   T=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
//   g++ -O2 -std=c++17 -I$T/include -I/usr/local/cuda/include cuda_torch_alloc.cc \
//     -L$T/lib -Wl,-rpath,$T/lib -Wl,--no-as-needed -ltorch_cpu -ltorch_cuda -lc10_cuda -lc10 \
//     -o torch_alloc
// (--no-as-needed: nothing here calls into libtorch_cuda, but its CUDA kernels
// and allocator register themselves when it loads.)
// Usage: torch_alloc [--device N] [--quick]
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

template <typename F>
double per_iter_ns(F fn, long iters) {
  fn();  // warm-up: the first call may reach cudaMalloc
  std::vector<double> t;
  for (int r = 0; r < 5; r++) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; i++) fn();
    auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / iters);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
  int device = 0;
  long iters = 100000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) device = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick")) iters = 2000;
  }
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  auto opts = at::TensorOptions().dtype(at::kByte).device(at::Device(at::kCUDA, device));
  std::printf("# libtorch from C++: at::empty, and the c10 caching allocator's raw_alloc\n");
  const size_t sizes[] = {512, 64 << 10, 1 << 20, 16 << 20};
  for (size_t size : sizes) {
    double empty = per_iter_ns([&] { at::empty({static_cast<int64_t>(size)}, opts); }, iters);
    double raw = per_iter_ns(
        [&] {
          void *p = c10::cuda::CUDACachingAllocator::raw_alloc(size);
          c10::cuda::CUDACachingAllocator::raw_delete(p);
        },
        iters);
    std::printf("%zu %.1f %.1f\n", size, empty, raw);
    std::fflush(stdout);
  }
  return 0;
}
