#!/usr/bin/env python3
"""GGUF loading per tensor, side by side in one run: tstor's loads
(bench/gguf_bench: mapped and read into memory) and the gguf package's
GGUFReader (which maps the file with numpy) on the same files.

    gguf_vs_reader.py BUILDDIR [--dir DIR] [--rounds R] [--reps N] [--tensors 300,10000]

Writes with GGUFWriter a file of a llama model's metadata alone (33 keys,
a vocabulary of 32,000 tokens with their scores and types) and, for each
count in --tensors, the same metadata and that many tensors named as
llama.cpp names them (blk.N.attn_q.weight...), of Q4_K, Q6_K, F16 and F32
in turn (small ones: a mapped load does not touch the bytes). Then R
rounds, each one run of gguf_bench (10 N timed loads of each file, going
round the files in turn after one untimed round: a load takes
milliseconds, and 300 tensors' share of one is below a single load's
noise) and N GGUFReader(path) of each file in this process, in the same
order; the
figure for each is the median over the rounds of each round's median. The
cost per tensor is the load's time less the metadata-only file's, over
the count. Run with the gguf package's Python (tests/pyref/install.sh
--find prints it); `make -C bench bench-gguf` does. Deletes the files at
the end.
"""
import argparse
import importlib.metadata
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

ap = argparse.ArgumentParser()
ap.add_argument("builddir")
ap.add_argument("--dir", default=None)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--reps", type=int, default=10)
ap.add_argument("--tensors", default="300,10000")
a = ap.parse_args()
counts = [int(c) for c in a.tensors.split(",")]

d = a.dir or tempfile.mkdtemp(prefix="tstor-gguf-bench-")
rng = np.random.default_rng(0)
NAMES = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "attn_norm",
         "ffn_norm"]
TYPES = [Q.Q4_K, Q.Q6_K, Q.F16, Q.F32]


def write(path, ntensors):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("bench")
    w.add_context_length(4096)
    w.add_embedding_length(4096)
    w.add_block_count(max(1, ntensors // len(NAMES)))
    w.add_feed_forward_length(11008)
    w.add_head_count(32)
    w.add_head_count_kv(32)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(15)
    for i in range(16):
        w.add_uint32("bench.extra.%d" % i, i)
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>"] + ["\u2581tok%d" % i for i in range(31997)])
    w.add_token_scores([float(-i) for i in range(32000)])
    w.add_token_types([1] * 32000)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for i in range(ntensors):
        name = "blk.%d.%s.weight" % (i // len(NAMES), NAMES[i % len(NAMES)])
        qt = TYPES[i % len(TYPES)]
        if qt == Q.F32:
            w.add_tensor(name, rng.random(256, dtype=np.float32))
        elif qt == Q.F16:
            w.add_tensor(name, rng.random((8, 256)).astype(np.float16))
        else:
            size = gguf.GGML_QUANT_SIZES[qt][1]
            w.add_tensor(name, rng.integers(0, 256, (8, size), dtype=np.uint8), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


files = [(0, os.path.join(d, "meta.gguf"))] + [(n, os.path.join(d, "t%d.gguf" % n)) for n in counts]
for n, path in files:
    write(path, n)
env = dict(os.environ, TSTOR_BACKEND_DIR=os.path.join(a.builddir, "modules"))
bench = os.path.join(a.builddir, "bench", "gguf_bench")
med = {}  # (label, n) -> the rounds' medians
for _ in range(a.rounds):
    out = subprocess.run([bench, "--reps", str(10 * a.reps)] + [p for _, p in files], check=True, env=env,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        path, label, m, _best, nt = line.split()
        n = dict((p, n) for n, p in files)[path]
        assert int(nt) == n
        med.setdefault(("tstor " + label, n), []).append(float(m))
    ts = {n: [] for n, _ in files}
    for rep in range(-1, a.reps):  # round the files in turn; the first round untimed, as gguf_bench's
        for n, path in files:
            t0 = time.perf_counter()
            r = gguf.GGUFReader(path)
            if rep >= 0:
                ts[n].append((time.perf_counter() - t0) * 1e6)
            assert len(r.tensors) == n
            del r
    for n, _ in files:
        med.setdefault(("GGUFReader", n), []).append(statistics.median(ts[n]))

print("gguf %s, numpy %s; %d rounds of %d loads of each file by tstor, %d by GGUFReader, warm" % (
    importlib.metadata.version("gguf"), np.__version__, a.rounds, 10 * a.reps, a.reps))
for n, path in files:
    print("  %s: %d tensors, %d bytes" % (os.path.basename(path), n, os.path.getsize(path)))
print("%-18s %8s %14s %14s" % ("load", "tensors", "median (us)", "per tensor"))
for label in ("tstor mapped", "tstor read", "GGUFReader"):
    base = statistics.median(med[(label, 0)])
    for n, _ in files:
        m = statistics.median(med[(label, n)])
        per = "%.2f us" % ((m - base) / n) if n else "-"
        print("%-18s %8d %14.1f %14s" % (label, n, m, per))
for _, path in files:
    os.unlink(path)
if not a.dir:
    os.rmdir(d)
