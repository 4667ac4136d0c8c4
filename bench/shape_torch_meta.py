#!/usr/bin/python3
"""PyTorch's side of bench/shape_vs_torch.cc for what libtorch's C++ API cannot
do on meta: PyTorch 1.13 computes conv2d on the meta device with a Python meta
kernel (torch/_meta_registrations.py), so that is where it is timed, with
torch.add on meta beside it for scale. Prints "NAME NANOSECONDS" lines: the best
of REPS batches of N calls each.

    shape_torch_meta.py [N] [REPS]
"""
import sys
import time
import warnings

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 7
m = dict(device="meta", dtype=torch.float32)
x = torch.empty(8, 64, 56, 56, **m).to(memory_format=torch.channels_last)
w = torch.empty(128, 64, 3, 3, **m)
b = torch.empty(128, **m)
a = torch.empty(8, 64, 56, 56, **m)
c = torch.empty(64, 1, 1, **m)


def best(fn):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t) / n)
    return min(times) * 1e9


print("conv2d %.1f" % best(lambda: F.conv2d(x, w, b, 2, 1)))
print("add %.1f" % best(lambda: torch.add(a, c)))
