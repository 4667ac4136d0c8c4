#!/usr/bin/env python3
"""What tstor's writers wrote, read back by each format's reference.

    read_back.py OUT SOURCE...   (the pyref venv's python)

For each SOURCE, read-back.sh had `tstor convert` write OUT/NAME.pt (torch.save
zip), OUT/NAME.safetensors (--flatten --copy) and OUT/NAME.t7 (Torch7 binary),
or put tstor's refusal to write it in OUT/NAME.EXT.refused. Each file written
is read by the format's reference: torch.load(weights_only=True) of torch 2.x,
the safetensors package's safe_open, torchfile. What the reference reads
must be what it (or, for a source it cannot read, the project's reference
reader) read from the source:

  .pt from a torch.save source: describe.py's listing, the same line for
      line: values, dtypes, shapes, strides, storage offsets and sharing;
  otherwise: the same tensors, as a multiset of (dtype, shape, element
      bytes) (.safetensors, and .pt of the other formats); for .t7 the
      source's storages too, and a 0-dim tensor is Torch7's one element of
      one dimension, an empty one Torch7's empty tensor.

A refusal to write must be one the format forces: a dtype it has no type for,
an int it cannot hold, a value it has no form for; anything else fails.
torchfile 0.1.0 has no reader for torch.HalfTensor (it raises
NotImplementedError), though Lua Torch writes and reads them
(torch7/generic/Tensor.c and Storage.c are built for Half, File.lua's
writeObject calls their write): those files are read by tests/t7/check_gen.py's
reader instead, and counted apart.
"""
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ckpt"))
sys.path.insert(0, os.path.join(HERE, "..", "t7"))
sys.dont_write_bytecode = True
warnings.simplefilter("ignore")

import numpy as np  # noqa: E402
import safetensors  # noqa: E402
import torch  # noqa: E402
import torchfile  # noqa: E402
from describe import describe  # noqa: E402

# refusals the formats force, by the words of tstor's message
FORCED = ["no type for", "has no dtype", "no Torch7 type", "beyond", "TSTOR_ENOTSUP", "TSTOR_ERANGE",
          "no tensor", "holds no tensor", "no data"]

T7_NP = {"Byte": np.uint8, "Char": np.int8, "Short": np.int16, "Int": np.int32, "Long": np.int64,
         "Float": np.float32, "Double": np.float64, "Half": np.float16}


def tkey(dtype, shape, data):
    return (str(dtype).replace("torch.", ""), tuple(shape), data)


def of_torch(t):
    if t.is_meta:
        return tkey(t.dtype, t.shape, b"meta")
    x = torch.empty(t.shape, dtype=t.dtype)
    x.copy_(t.detach())
    return tkey(t.dtype, t.shape, x.reshape(-1).view(torch.uint8).numpy().tobytes())


def of_numpy(a):
    a = np.ascontiguousarray(a)
    return tkey(a.dtype, a.shape, a.tobytes())


def tensors(v, out, storages=False, seen=None):
    """The tensors of a tree, depth-first in the tree's order; with storages,
    bare storages too (as one-dimensional tensors, as torchfile reads
    Torch7's). With seen (a set), each object once, however many times the
    tree reaches it (an nngraph gModule reaches its nodes' modules by many
    paths), as a flattened file holds it."""
    if seen is not None:
        if id(v) in seen:
            return out
        if isinstance(v, (torch.Tensor, np.ndarray, dict, list, torchfile.TorchObject)):
            seen.add(id(v))
    if isinstance(v, torch.Tensor):
        out.append(of_torch(v))
    elif isinstance(v, torch.storage.TypedStorage):
        if storages:
            out.append(of_torch(torch.tensor([], dtype=v.dtype).set_(v)))
    elif isinstance(v, np.ndarray):
        out.append(of_numpy(v))
    elif isinstance(v, dict):
        for x in v.values():
            tensors(x, out, storages, seen)
        if getattr(v, "__dict__", None):
            tensors(dict(v.__dict__), out, storages, seen)
    elif isinstance(v, (list, tuple)):
        for x in v:
            tensors(x, out, storages, seen)
    elif isinstance(v, torchfile.TorchObject):
        tensors(v._obj, out, storages, seen)
    return out


def load_torch(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - a tree weights_only refuses (golden's objects)
        return torch.load(path, map_location="cpu", weights_only=False)


def load_st(path):
    with safetensors.safe_open(path, framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def t7_multiset(ts):
    """Tensors as Torch7 holds them: no 0-dim, an empty tensor has no shape."""
    out = []
    for dt, shape, data in ts:
        if len(data) == 0:
            shape = ()
        elif shape == ():
            shape = (1,)
        out.append((dt, shape, data))
    return sorted(out)


def check_gen_tensors(path):
    import check_gen
    from gen_t7 import T7Object, T7Storage, T7Table, T7Tensor, tensor_values
    with open(path, "rb") as f:
        r = check_gen.Reader(f.read(), "binary-le-long8")
    v = r.read()
    out, seen = [], set()

    def walk(x):
        if isinstance(x, T7Tensor):
            vals = tensor_values(x)
            a = np.array(vals, dtype=T7_NP[x.type]).reshape(x.sizes if vals else (0,))
            out.append(of_numpy(a))
        elif isinstance(x, T7Table) or isinstance(x, dict):
            for k, y in (x.pairs if isinstance(x, T7Table) else x.items()):
                walk(y)
        elif isinstance(x, list):
            for y in x:
                walk(y)
        elif isinstance(x, T7Object):
            walk(x.table)
        assert not isinstance(x, T7Storage) or True
    walk(v)
    return out


def source(path):
    """(kind, tree as its reference reads it, tensors)."""
    with open(path, "rb") as f:
        head = f.read(8)
    if path.endswith(".safetensors"):
        tree = load_st(path)
        return "safetensors", tree, [of_torch(tree[k]) for k in sorted(tree)]
    if path.endswith(".t7"):
        try:
            tree = torchfile.load(path, use_list_heuristic=False, use_int_heuristic=False)
            return "torch7", tree, tensors(tree, [])
        except torchfile.T7ReaderException:
            return "torch7", None, None  # ascii: torchfile reads binary files only
    tree = load_torch(path)
    return "torch" if head[:2] in (b"PK", b"\x80\x02") else "torch", tree, tensors(tree, [])


def main():
    out, sources = sys.argv[1], sys.argv[2:]
    n = bad = refused = half = 0
    for src in sources:
        name = os.path.basename(src)
        kind, tree, want = source(src)
        for ext in ("pt", "safetensors", "t7"):
            path = os.path.join(out, "%s.%s" % (name, ext))
            if os.path.exists(path + ".refused"):
                msg = open(path + ".refused").read().strip()
                if not any(w in msg for w in FORCED):
                    bad += 1
                    print("%s -> .%s: tstor refused to write it: %s" % (name, ext, msg))
                refused += 1
                continue
            if want is None:
                continue  # a source no reference reads here
            n += 1
            try:
                if ext == "pt":
                    back = load_torch(path)
                    if kind == "torch":
                        ok = describe(back) == describe(tree)
                    else:
                        ok = sorted(tensors(back, [])) == sorted(want)
                elif ext == "safetensors":
                    back = load_st(path)
                    # a Torch7 object written twice is one object, flattened once
                    once = tensors(tree, [], seen=set()) if kind == "torch7" and tree is not None else want
                    ok = sorted(of_torch(back[k]) for k in back) == sorted(once)
                else:
                    try:
                        got = tensors(torchfile.load(path, use_list_heuristic=False,
                                                     use_int_heuristic=False), [])
                    except (NotImplementedError, TypeError):
                        # torchfile's Half reader raises NotImplementedError, whose
                        # message it builds by adding bytes to str: a TypeError
                        got = check_gen_tensors(path)
                        half += 1
                    ok = t7_multiset(got) == t7_multiset(tensors(tree, [], storages=True) if kind == "torch"
                                                          else want)
            except Exception as e:  # noqa: BLE001 - the reference refused what tstor wrote
                ok = False
                print("%s -> .%s: the reference refuses it: %s: %s" % (name, ext, type(e).__name__, e))
            if not ok:
                bad += 1
                print("%s -> .%s: the reference reads other values than it read from the source" % (name, ext))
    print("%d files tstor wrote, read back by torch %s, safetensors %s and torchfile: %d as the source, "
          "%d not (%d Torch7 files of Half read by check_gen's reader: torchfile has none); "
          "%d writes refused as the formats force" % (n, torch.__version__.split("+")[0],
                                                      safetensors.__version__, n - bad, bad, half, refused))
    sys.exit(1 if bad or not n else 0)


if __name__ == "__main__":
    main()
