#!/usr/bin/python3
"""Checkpoint loading, side by side in one run: PyTorch's torch.load, the
machine's own read of the file (dd to /dev/null) and tstor's loads of the same
1 GiB checkpoint of 200 float32 tensors.

    ckpt_vs_torch.py BUILDDIR [--dir DIR] [--reps N] [--mib M] [--tensors T] [--cold]

Writes DIR/bench.pt with torch.save and DIR/bench.safetensors with
`tstor convert` (both then sit in the page cache, as after any recent use),
then REPS rounds, each timing torch.load(map_location="cpu"), dd of the .pt
file and one run of every variant of BUILDDIR/bench/ckpt_bench on the same
files, each in a fresh process, and prints the median and best of each.
--cold drops the files from the page cache (posix_fadvise DONTNEED) before
every one of them. Deletes the files at the end.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("builddir")
ap.add_argument("--dir", default=None)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--mib", type=int, default=1024)
ap.add_argument("--tensors", type=int, default=200)
ap.add_argument("--cold", action="store_true")
a = ap.parse_args()

d = a.dir or tempfile.mkdtemp(prefix="tstor-ckpt-bench-")
pt, st = os.path.join(d, "bench.pt"), os.path.join(d, "bench.safetensors")
per = a.mib * 1024 * 1024 // 4 // a.tensors
g = torch.Generator().manual_seed(0)
sd = {"layer%03d.weight" % i: torch.rand(per, generator=g).view(-1, 256) if per % 256 == 0 else torch.rand(per)
      for i in range(a.tensors)}
torch.save(sd, pt)
del sd
env = dict(os.environ, TSTOR_BACKEND_DIR=os.path.join(a.builddir, "modules"))
subprocess.run([os.path.join(a.builddir, "tools", "tstor"), "convert", pt, st], check=True, env=env)
size = os.path.getsize(pt)
print("checkpoint: %d tensors, %.1f MiB (.pt %d bytes, .safetensors %d bytes); torch %s; %d runs each; %s" % (
    a.tensors, size / 2**20, size, os.path.getsize(st), torch.__version__, a.reps,
    "cold: the files dropped from the page cache before each load" if a.cold else "warm: in the page cache"))


def evict():
    for path in (pt, st):
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)

# Rounds alternate between torch.load, dd and one run of each tstor variant
# (ckpt_bench ... 1 --variant N), so that whatever else the machine is doing
# weighs on every side alike.
bench = os.path.join(a.builddir, "bench", "ckpt_bench")
results = {}
label_torch = "torch.load (PyTorch %s)" % torch.__version__
# Each load runs in a fresh process, as a program starting up meets it: a
# process that loaded before would reuse memory that its allocator kept, and
# its page faults would be gone (the file itself is in the page cache for
# every run alike).
TORCH_ONCE = """
import sys, time, torch
t0 = time.perf_counter()
x = torch.load(sys.argv[1], map_location="cpu")
print((time.perf_counter() - t0) * 1e3, len(x))
"""
# dd's own figure would leave out its start; timed from here like the rest.
label_dd = "dd of the .pt to /dev/null, 1 MiB blocks"
for _ in range(a.reps):
    if a.cold:
        evict()
    ms, n = subprocess.run([sys.executable, "-c", TORCH_ONCE, pt], check=True, capture_output=True,
                           text=True).stdout.split()
    assert int(n) == a.tensors
    results.setdefault(label_torch, []).append(float(ms))
    if a.cold:
        evict()
    t0 = time.perf_counter()
    subprocess.run(["dd", "if=" + pt, "of=/dev/null", "bs=1M"], check=True, capture_output=True)
    results.setdefault(label_dd, []).append((time.perf_counter() - t0) * 1e3)
    for v in range(6):
        outp = subprocess.run([bench, pt, st, "1", "--variant", str(v)] + (["--cold"] if a.cold else []),
                              check=True, env=env, capture_output=True, text=True).stdout
        for line in outp.splitlines():
            label, rest = line[:36].strip(), line[36:].split()
            results.setdefault(label, []).append(float(rest[1]))
base = statistics.median(results[label_torch])
for label, ts in results.items():
    m = statistics.median(ts)
    print("%-42s median %10.3f ms  best %10.3f ms  %7.2fx torch.load  %6.2f GB/s" % (
        label, m, min(ts), base / m, size / (m / 1e3) / 1e9))
os.unlink(pt)
os.unlink(st)
if not a.dir:
    os.rmdir(d)
