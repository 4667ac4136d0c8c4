#!/usr/bin/python3
"""Checkpoint loading, side by side in one run: PyTorch 1.13's torch.load and
tstor's loads of the same 1 GiB checkpoint of 200 float32 tensors.

    ckpt_vs_torch.py BUILDDIR [--dir DIR] [--reps N] [--mib M] [--tensors T]

Writes DIR/bench.pt with torch.save and DIR/bench.safetensors with
`tstor convert` (both then sit in the page cache, as after any recent use),
then REPS rounds, each timing torch.load(map_location="cpu") and one run of
every variant of BUILDDIR/bench/ckpt_bench on the same files, each in a fresh
process, and prints the median and best of each. Deletes the files at the end.
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
print("checkpoint: %d tensors, %.1f MiB (.pt %d bytes, .safetensors %d bytes); torch %s; %d runs each" % (
    a.tensors, size / 2**20, size, os.path.getsize(st), torch.__version__, a.reps))

# Rounds alternate between torch.load and one run of each tstor variant
# (ckpt_bench ... 1), so that whatever else the machine is doing weighs on
# both sides alike.
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
for _ in range(a.reps):
    ms, n = subprocess.run([sys.executable, "-c", TORCH_ONCE, pt], check=True, capture_output=True,
                           text=True).stdout.split()
    assert int(n) == a.tensors
    results.setdefault(label_torch, []).append(float(ms))
    outp = subprocess.run([bench, pt, st, "1"], check=True, env=env, capture_output=True, text=True).stdout
    for line in outp.splitlines():
        label, rest = line[:36].strip(), line[36:].split()
        results.setdefault(label, []).append(float(rest[1]))
for label, ts in results.items():
    print("%-36s median %10.3f ms  best %10.3f ms" % (label, statistics.median(ts), min(ts)))
os.unlink(pt)
os.unlink(st)
if not a.dir:
    os.rmdir(d)
