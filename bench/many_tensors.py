#!/usr/bin/python3
"""The cost per tensor of a file of many small tensors, side by side in one
run: tstor's loads (read into memory, and mapped) of the same state_dict as
torch.save's zip and legacy formats, safetensors, Torch7 and GGUF, beside
torch.load, the safetensors package's safe_open, torchfile and the gguf
package's GGUFReader.

    many_tensors.py BUILDDIR [--counts 1000,10000,100000,1000000] [--reps N] [--dir DIR]
                    [--formats pt,legacy,st,t7,gguf] [--before OTHER_BUILDDIR]

Each count N is a state_dict of N float32 tensors of 10 elements. torch
writes the .pt files; the safetensors package writes the .safetensors where
it is installed (tstor convert otherwise); tstor convert writes the .t7
and the .gguf.
tstor's loads run in `BUILDDIR/bench/ckpt_bench --any` (REPS loads in one
process, the median); the references run here, REPS times each, the median. Prints
one markdown table of microseconds per tensor. A reference that is not
installed, or takes over a minute a load, is left out and said so.
--before times a second build's ckpt_bench (an older commit's) on the same
files in the same run, in two more columns.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

try:
    import safetensors
    from safetensors import safe_open
    from safetensors.torch import save_file
except ImportError:
    safetensors = None
try:
    import torchfile
except ImportError:
    torchfile = None
try:
    import gguf
except ImportError:
    gguf = None

ap = argparse.ArgumentParser()
ap.add_argument("builddir")
ap.add_argument("--counts", default="1000,10000,100000,1000000")
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--dir", default=None)
ap.add_argument("--formats", default="pt,legacy,st,t7,gguf")
ap.add_argument("--before", default=None)
a = ap.parse_args()
formats = a.formats.split(",")

d = a.dir or tempfile.mkdtemp(prefix="tstor-many-")
env = dict(os.environ, TSTOR_BACKEND_DIR=os.path.join(a.builddir, "modules"))
tstor = os.path.join(a.builddir, "tools", "tstor")
bench = os.path.join(a.builddir, "bench", "ckpt_bench")
SLOW_MS = 60000


def tstor_ms(path, mmap, builddir=None):
    b, e = bench, env
    if builddir:
        b = os.path.join(builddir, "bench", "ckpt_bench")
        e = dict(os.environ, TSTOR_BACKEND_DIR=os.path.join(builddir, "modules"))
    out = subprocess.run([b, "--any", path, str(a.reps)] + (["--mmap"] if mmap else []), env=e,
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[3])


def py_ms(fn):
    times = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
        if times[-1] > SLOW_MS:
            break
    return statistics.median(times)


def safe_open_all(path):
    with safe_open(path, framework="pt") as f:
        for k in f.keys():
            f.get_tensor(k)


print("torch %s, safetensors %s, torchfile %s, gguf %s; %d loads each, the median; %s" % (
    torch.__version__, safetensors.__version__ if safetensors else "(not installed)",
    "yes" if torchfile else "(not installed)", "yes" if gguf else "(not installed)", a.reps,
    time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
print()
before = " | before read | before mapped" if a.before else ""
print("| tensors | format%s | tstor read | tstor mapped | reference | reference us |" % before)
print("| ---: | ---%s | ---: | ---: | --- | ---: |" % (" | ---: | ---:" if a.before else ""))
for n in [int(c) for c in a.counts.split(",")]:
    sd = {"layer%07d.weight" % i: torch.full((10,), float(i)) for i in range(n)}
    files = {"pt": os.path.join(d, "m%d.pt" % n), "legacy": os.path.join(d, "m%d.legacy.pt" % n),
             "st": os.path.join(d, "m%d.safetensors" % n), "t7": os.path.join(d, "m%d.t7" % n),
             "gguf": os.path.join(d, "m%d.gguf" % n)}
    torch.save(sd, files["pt"])
    if "legacy" in formats:
        torch.save(sd, files["legacy"], _use_new_zipfile_serialization=False)
    if safetensors and "st" in formats:
        save_file(sd, files["st"])
    elif "st" in formats:
        subprocess.run([tstor, "convert", files["pt"], files["st"]], env=env, check=True)
    for k in ("t7", "gguf"):
        if k in formats:
            subprocess.run([tstor, "convert", files["pt"], files[k]], env=env, check=True,
                           capture_output=True)
    del sd
    refs = {
        "pt": ("torch.load", lambda: torch.load(files["pt"])),
        "legacy": ("torch.load", lambda: torch.load(files["legacy"])),
        "st": ("safe_open, every tensor", lambda: safe_open_all(files["st"])) if safetensors else None,
        "t7": ("torchfile.load", lambda: torchfile.load(files["t7"])) if torchfile else None,
        "gguf": ("GGUFReader", lambda: gguf.GGUFReader(files["gguf"])) if gguf else None,
    }
    names = {"pt": ".pt (zip)", "legacy": ".pt (legacy)", "st": ".safetensors", "t7": ".t7",
             "gguf": ".gguf"}
    for k in [f for f in ("pt", "legacy", "st", "t7", "gguf") if f in formats]:
        old = ""
        if a.before:
            old = " | %.2f | %.2f" % (tstor_ms(files[k], False, a.before) * 1e3 / n,
                                      tstor_ms(files[k], True, a.before) * 1e3 / n)
        read, mapped = tstor_ms(files[k], False), tstor_ms(files[k], True)
        ref = refs[k]
        ref_us = "%.2f" % (py_ms(ref[1]) * 1e3 / n) if ref else "-"
        print("| %d | %s%s | %.2f | %.2f | %s | %s |" % (n, names[k], old, read * 1e3 / n, mapped * 1e3 / n,
                                                        ref[0] if ref else "(not installed)", ref_us))
        sys.stdout.flush()
    for f in files.values():
        if os.path.exists(f):
            os.unlink(f)
if not a.dir:
    os.rmdir(d)
