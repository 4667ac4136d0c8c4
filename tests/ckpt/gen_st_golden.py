#!/usr/bin/env python3
"""Golden safetensors files written by the safetensors package from torch
2.x tensors, one file per dtype the package writes (all.safetensors holds
them together, with metadata), and F6_E2M3 / F6_E3M2 files, which neither
torch nor the package's writer makes, written here and read back by the
package's own reader. test_safetensors loads each one and compares it with
the listing the package gives: every byte equal, and tstor's save of what it
loaded equal to the package's file.

    gen_st_golden.py OUTDIR

writes OUTDIR/st_golden/*.safetensors and OUTDIR/st_golden.txt: a line
"# ..." saying which versions, then per file "file NAME" and, sorted by
name, "t NAMEHEX DTYPE sizes=A,B hex=BYTES" with DTYPE the torch dtype the
package loads (float4_e2m1fn_x2, ...), or "packed:F6_E2M3" with the format's
shape where torch has none.
"""
import json
import os
import random
import struct
import sys

import safetensors
import torch
from safetensors import deserialize, safe_open
from safetensors.torch import save_file

out = sys.argv[1]
gold = os.path.join(out, "st_golden")
os.makedirs(gold, exist_ok=True)
rng = random.Random(45)

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.float8_e5m2, torch.float8_e4m3fn, torch.float8_e8m0fnu,
          torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.int16, torch.uint16, torch.float16, torch.bfloat16,
          torch.int32, torch.uint32, torch.float32, torch.complex64, torch.float64, torch.int64, torch.uint64,
          torch.float4_e2m1fn_x2]
SHAPES = [[], [0], [1], [7], [2, 3], [3, 0, 2], [2, 1, 4]]


def tensor(dt, shape):
    """Every bit pattern alike (NaN payloads, infinities, subnormals), but
    bool: 0 or 1, the only bytes torch's bool holds."""
    n = 1
    for s in shape:
        n *= s
    nbytes = n * dt.itemsize
    if dt == torch.bool:
        data = bytes(rng.randrange(2) for _ in range(nbytes))
    else:
        data = bytes(rng.randrange(256) for _ in range(nbytes))
    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
    return raw.view(dt).reshape(shape)


def name_of(dt):
    return str(dt).split(".")[1]


files = {}
everything = {}
for dt in DTYPES:
    ts = {}
    for shape in SHAPES:
        if dt == torch.float4_e2m1fn_x2 and not shape:
            continue  # F4 needs a last dimension to double
        key = "s" + "x".join(map(str, shape))
        ts[key] = tensor(dt, shape)
        everything[name_of(dt) + "." + key] = ts[key]
    files["st_%s.safetensors" % name_of(dt)] = ts
for fname, ts in files.items():
    save_file(ts, os.path.join(gold, fname))
# one metadata key: the package writes its map in no fixed order
save_file(everything, os.path.join(gold, "all.safetensors"), metadata={"format": "pt"})


def f6(fname, dtype, shapes):
    """A file of F6 tensors by the format's rules, as the package's writer
    would lay it out (its writer refuses F6)."""
    header, data = {}, b""
    for name, shape in shapes:
        n = 1
        for s in shape:
            n *= s
        b = bytes(rng.randrange(256) for _ in range(n * 6 // 8))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(gold, fname), "wb") as fh:
        fh.write(struct.pack("<Q", len(text)) + text + data)


f6("st_F6_E2M3.safetensors", "F6_E2M3", [("a", [0]), ("b", [4]), ("c", [2, 8]), ("d", [3, 4, 4])])
f6("st_F6_E3M2.safetensors", "F6_E3M2",
   [("a", [4, 1]), ("b", [32]), ("c", [1, 0])])

lines = ["# safetensors %s writing torch %s tensors; F6 read back by its own reader"
         % (safetensors.__version__, torch.__version__)]
for fname in sorted(os.listdir(gold)):
    path = os.path.join(gold, fname)
    lines.append("file " + fname)
    entries = []
    raw = {k: v for k, v in deserialize(open(path, "rb").read())}
    if fname.startswith("st_F6"):
        for k, v in raw.items():
            entries.append("t %s packed:%s sizes=%s hex=%s" % (k.encode().hex(), v["dtype"],
                                                                ",".join(map(str, v["shape"])), bytes(v["data"]).hex() or "-"))
    else:
        with safe_open(path, "pt") as f:
            for k in f.keys():
                t = f.get_tensor(k)
                b = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
                assert b == bytes(raw[k]["data"]), (fname, k)
                entries.append("t %s %s sizes=%s hex=%s" % (k.encode().hex(), name_of(t.dtype),
                                                            ",".join(map(str, t.shape)), b.hex() or "-"))
    lines += sorted(entries)
with open(os.path.join(out, "st_golden.txt"), "w") as fh:
    fh.write("\n".join(lines) + "\n")
