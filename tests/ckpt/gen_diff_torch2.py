"""Broken and intact checkpoints of torch 2.x's own kinds, judged by torch 2.x.

    gen_diff_torch2.py OUTDIR COUNT SEED

gen_diff.py's files are written by PyTorch 1.13, which has none of what only
2.x writes: _rebuild_tensor_v3, quantized tensors, tensors with attributes
(_rebuild_from_type_v2), metadata, the new dtypes. This writes COUNT files,
each one of golden_torch2/*.pt with one opcode of its pickle deleted,
doubled elsewhere, swapped with the next, or an int replaced, and
OUTDIR/expect.txt: what torch.load(weights_only=True, map_location="cpu") of
this torch makes of each (describe.py's listing), or "refused". A tree
describe.py cannot list (a class left as a value) counts as refused: tstor
refuses those by design, and so does a tensor's negative size or stride,
which torch.load may rewrite and tstor's tensors rule out (as gen_diff.py's
beyond_tstor says). test_ckpt_diff then holds tstor to it.
"""
import glob
import io
import os
import pickle
import pickletools
import random
import struct
import sys
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from describe import describe  # noqa: E402

out, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bases = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden_torch2", "*.pt")))
rng = random.Random(seed)
os.makedirs(out, exist_ok=True)


def mutate(data):
    ops = list(pickletools.genops(data))
    k = rng.randrange(len(ops) - 1)
    op, arg, pos = ops[k]
    end = ops[k + 1][2]
    r = rng.random()
    if r < 0.4:
        return data[:pos] + data[end:], "delete op %d (%s)" % (k, op.name)
    if r < 0.7 and op.name in ("BININT1", "BININT2", "BININT"):
        v = rng.choice([0, 1, 2, 3, -1, 7, 255, 100000])
        return data[:pos] + b"J" + struct.pack("<i", v) + data[end:], "int at op %d: %s -> %d" % (k, arg, v)
    if r < 0.85:
        j = rng.randrange(len(ops) - 1)
        return (data[:pos] + data[ops[j][2]:ops[j + 1][2]] + data[pos:],
                "op %d (%s) doubled at op %d" % (j, ops[j][0].name, k))
    after = ops[min(k + 2, len(ops) - 1)][2]
    return data[:pos] + data[end:after] + data[pos:end] + data[after:], "ops %d and %d swapped" % (k, k + 1)


class Layouts(pickle.Unpickler):
    """A pass over a pickle that only asks whether a tensor rebuild is given
    a negative size or stride: the rebuilds are stubs, storages None."""
    negative = False

    def find_class(self, mod, name):
        if mod == "torch._utils" and name.startswith("_rebuild"):
            return self.rebuild
        return super().find_class(mod, name)

    def persistent_load(self, pid):
        return None

    def rebuild(self, *a):
        try:
            if any(isinstance(x, int) and x < 0 for x in tuple(a[2]) + tuple(a[3])):
                Layouts.negative = True
        except Exception:  # noqa: BLE001 -- no layout to look at
            pass


def negative_layout(pkl):
    Layouts.negative = False
    try:
        Layouts(io.BytesIO(pkl)).load()
    except Exception:  # noqa: BLE001 -- torch.load read it; this pass needs only the arguments
        pass
    return Layouts.negative


expect = []
for i in range(count):
    base = rng.choice(bases)
    z = zipfile.ZipFile(base)
    pkl = [n for n in z.namelist() if n.endswith("data.pkl")][0]
    new, what = mutate(z.read(pkl))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zo:
        for info in z.infolist():
            zo.writestr(info, new if info.filename == pkl else z.read(info.filename))
    name = "diff2_%05d.pt" % i
    path = os.path.join(out, name)
    with open(path, "wb") as f:
        f.write(buf.getvalue())
    try:
        lines = describe(torch.load(path, weights_only=True, map_location="cpu"))
        if negative_layout(new):
            lines = ["# loaded by torch.load, refused by tstor: a negative size or stride", "refused"]
    except Exception:  # noqa: BLE001 - any refusal is a refusal
        lines = ["refused"]
    expect.append("file %s\n# mutation %s: %s\n%s\n" % (name, os.path.basename(base), what, "\n".join(lines)))
with open(os.path.join(out, "expect.txt"), "w") as f:
    f.write("".join(expect))
