#!/usr/bin/python3
"""Checkpoint loading, side by side in one run: PyTorch's torch.load, the
machine's own read of the file (dd to /dev/null) and tstor's loads of the same
1 GiB checkpoint of 200 float32 tensors.

    ckpt_vs_torch.py BUILDDIR [--dir DIR] [--reps N] [--mib M] [--tensors T] [--cold]
    ckpt_vs_torch.py BUILDDIR --fresh [--dir DIR] [--reps N] [--mib M] [--tensors T] [--lock FILE]
                              [--warm-only]

Writes DIR/bench.pt with torch.save and DIR/bench.safetensors with
`tstor convert` (both then sit in the page cache, as after any recent use),
then REPS rounds, each timing torch.load(map_location="cpu"), dd of the .pt
file and one run of every variant of BUILDDIR/bench/ckpt_bench on the same
files, each in a fresh process, and prints the median and best of each.
--cold drops the files from the page cache (posix_fadvise DONTNEED) before
every one of them. Deletes the files at the end.

--fresh (alone, or after the table above with --and-fresh) puts tstor's default load (read into memory, then every page
touched) beside the fresh-memory bound instead of beside torch.load: dd of
the file, then `ckpt_bench --fresh` with each way of allocating each record
fresh and reading it with pread on the load's threads (malloc, MAP_POPULATE,
MADV_HUGEPAGE, MADV_HUGEPAGE then MADV_POPULATE_WRITE), then the load, each
in a fresh process, for the .pt and the .safetensors file; warm (each file
read by dd just before, and checked with fincore to be all in the page cache)
and cold (the page cache dropped before every run: echo 3 >
/proc/sys/vm/drop_caches as root, else posix_fadvise DONTNEED of the file).
Prints the median and best of each with its page faults and the memory that
ended in transparent huge pages, and the load's bandwidth over the best
bound's. --warm-only leaves the cold rounds out. --lock FILE holds an flock on FILE during each round, released
between them (so that no build of the tree runs beside a measurement).
"""
import argparse
import fcntl
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
ap.add_argument("--fresh", action="store_true")
ap.add_argument("--and-fresh", action="store_true")
ap.add_argument("--warm-only", action="store_true")
ap.add_argument("--lock", default=None)
a = ap.parse_args()

d = a.dir or tempfile.mkdtemp(prefix="tstor-ckpt-bench-")
os.makedirs(d, exist_ok=True)
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
bench = os.path.join(a.builddir, "bench", "ckpt_bench")
print("checkpoint: %d tensors, %.1f MiB (.pt %d bytes, .safetensors %d bytes); torch %s; %d runs each; %s" % (
    a.tensors, size / 2**20, size, os.path.getsize(st), torch.__version__, a.reps,
    "cold: the files dropped from the page cache before each load" if a.cold else "warm: in the page cache"))


def evict():
    for path in (pt, st):
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)

FRESH = ["malloc", "populate", "huge", "huge-populate"]
FRESH_LABEL = {"malloc": "bound: malloc + pread", "populate": "bound: mmap MAP_POPULATE + pread",
               "huge": "bound: mmap MADV_HUGEPAGE + pread",
               "huge-populate": "bound: MADV_HUGEPAGE+POPULATE_WRITE + pread", "load": "tstor load + touch"}


def drop_all(path):
    """Drops the page cache: all of it as root, else the file's pages."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "echo 3 > /proc/sys/vm/drop_caches"
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        return "posix_fadvise(POSIX_FADV_DONTNEED)"


def cached_bytes(path):
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         capture_output=True, text=True)
    return int(out.stdout.split()[0]) if out.returncode == 0 and out.stdout.split() else -1


def fresh():
    """The default load beside the fresh-memory bound, warm and cold."""
    rows = {}
    how_cold = None
    temps = ("warm",) if a.warm_only else ("warm", "cold")
    for temp in temps:
        for _ in range(a.reps):
            lk = open(a.lock, "a") if a.lock else None
            if lk:
                fcntl.flock(lk, fcntl.LOCK_EX)
            for fmt, path in ((".pt", pt), (".safetensors", st)):
                fsize = os.path.getsize(path)
                runs = [("dd", None)] + [(v, v) for v in FRESH] + [("load", "load")]
                for name, v in runs:
                    if temp == "cold":
                        how_cold = drop_all(path)
                    elif name != "dd":
                        have = cached_bytes(path)
                        if 0 <= have < fsize:
                            print("warning: %s only %d of %d bytes in the page cache before %s" % (
                                path, have, fsize, name))
                    if v is None:
                        t0 = time.perf_counter()
                        subprocess.run(["dd", "if=" + path, "of=/dev/null", "bs=1M"], check=True,
                                       capture_output=True)
                        r = {"ms": (time.perf_counter() - t0) * 1e3}
                    else:
                        cold = ["--cold"] if temp == "cold" else []
                        out = subprocess.run([bench, "--fresh", path, v] + cold, check=True, env=env,
                                             capture_output=True, text=True).stdout.split()
                        r = {out[i]: float(out[i + 1]) for i in range(0, len(out), 2)}
                    label = "dd of the file to /dev/null, 1 MiB blocks" if v is None else FRESH_LABEL[v]
                    rows.setdefault((temp, fmt, label), []).append(r)
            if lk:
                lk.close()
    print("fresh-memory bound: %d threads read (tstor_get_num_threads, at most 8); THP %s, defrag %s; cold: %s" % (
        int(subprocess.run([bench, "--threads"], capture_output=True, text=True, env=env).stdout or 0),
        open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip(),
        open("/sys/kernel/mm/transparent_hugepage/defrag").read().strip(), how_cold))
    for temp in temps:
        for fmt, path in ((".pt", pt), (".safetensors", st)):
            fsize = os.path.getsize(path)
            best_bound = None
            for (t, f, label), rs in rows.items():
                if (t, f) != (temp, fmt):
                    continue
                ms = statistics.median(r["ms"] for r in rs)
                if label.startswith("bound") and (best_bound is None or ms < best_bound):
                    best_bound = ms
                extra = ""
                if "minflt" in rs[0]:
                    extra = "  minflt %8d  majflt %6d  THP %6.0f MiB" % (
                        statistics.median(r["minflt"] for r in rs), statistics.median(r["majflt"] for r in rs),
                        statistics.median(r["thp_kib"] for r in rs) / 1024)
                if label.startswith("tstor"):
                    extra += "  %.2fx the best bound" % (best_bound / ms)
                print("%-5s %-12s %-44s median %9.1f ms  best %9.1f ms  %6.2f GB/s%s" % (
                    temp, fmt, label, ms, min(r["ms"] for r in rs), fsize / (ms / 1e3) / 1e9, extra))


def remove_files():
    os.unlink(pt)
    os.unlink(st)
    if not a.dir:
        os.rmdir(d)


if a.fresh:
    fresh()
    remove_files()
    sys.exit(0)

# Rounds alternate between torch.load, dd and one run of each tstor variant
# (ckpt_bench ... 1 --variant N), so that whatever else the machine is doing
# weighs on every side alike.
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
if a.and_fresh:
    fresh()
remove_files()
