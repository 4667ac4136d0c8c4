#!/usr/bin/env python3
"""PyTorch's side of bench_cuda: allocate + free through PyTorch's CUDA caching
allocator, for the sizes bench_cuda measures. Prints one line per size,
"SIZE EMPTY_NS RAW_NS": torch.empty + release, and the allocator's own entry
points (torch.cuda.caching_allocator_alloc / _delete), each the median over
rounds of the mean per iteration; then "layout NAME NS" for the layout rows
(the median time of .contiguous() on a transposed 8192x8192 float32 matrix,
and of NCHW -> NHWC of a 64x256x56x56 one). Lines starting with '#' are notes. Both are
measured from Python, so they include the interpreter's call overhead, which
the '# python' note estimates (an empty loop and a trivial call)."""
import argparse
import statistics
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--device", type=int, default=0)
parser.add_argument("--quick", action="store_true")
args = parser.parse_args()

try:
    import torch
except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
    print(f"torch is not importable: {e}")
    sys.exit(1)
if not torch.cuda.is_available():
    print("torch sees no CUDA device")
    sys.exit(1)

dev = torch.device("cuda", args.device)
torch.cuda.set_device(dev)
iters = 2000 if args.quick else 100000
rounds = 5
sizes = [512, 64 << 10, 1 << 20, 16 << 20]


def per_iter_ns(fn):
    fn()  # warm-up: the first call may reach cudaMalloc
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter_ns() - t0) / iters)
    return statistics.median(times)


def empty(size):
    def run():
        x = torch.empty(size, dtype=torch.uint8, device=dev)
        del x
    return run


def raw(size):
    stream = torch.cuda.current_stream(dev)

    def run():
        p = torch.cuda.caching_allocator_alloc(size, args.device, stream)
        torch.cuda.caching_allocator_delete(p)
    return run


print(f"# torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"{torch.cuda.get_device_name(dev)}")
print(f"# python loop {per_iter_ns(lambda: None):.0f} ns per iteration "
      f"(an empty call), which the numbers below include")
for size in sizes:
    print(f"{size} {per_iter_ns(empty(size)):.1f} {per_iter_ns(raw(size)):.1f}", flush=True)


def relayout_ns(make):
    x = make()  # warm-up, and the output's block cached
    del x
    times = []
    for _ in range(5 if args.quick else 20):
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter_ns()
        y = make()
        torch.cuda.synchronize(dev)
        times.append(time.perf_counter_ns() - t0)
        del y
    return statistics.median(times)


m = torch.ones(8192, 8192, dtype=torch.float32, device=dev)
print(f"layout transpose {relayout_ns(lambda: m.t().contiguous()):.0f}", flush=True)
del m
a = torch.ones(64, 256, 56, 56, dtype=torch.float32, device=dev)
print(f"layout nhwc {relayout_ns(lambda: a.permute(0, 2, 3, 1).contiguous()):.0f}", flush=True)
