#!/usr/bin/python3
"""torch.save's first format, a tar archive, written as PyTorch 0.1 wrote it.

    gen_tar.py OUTDIR

writes OUTDIR/tar/*.pt, files as torch.save wrote them before PyTorch 0.1.10
(tar_listing.py records what torch.load reads from each in tar.txt), and
OUTDIR/tar_hostile/*.pt with OUTDIR/tar_hostile.txt, files that lie, each
with the error tstor must give and the words of its message. No PyTorch is
needed: the same Python writes the same bytes.

What the writer is built from. No PyTorch that writes this format installs
here (pytorch/pytorch#713, "improved serialization (no tar copy)", replaced
it in February 2017, before 0.1.10; 0.1.6 to 0.1.9 wrote it, for Python 2.7
and 3.5/3.6), so it is rebuilt from:
- the reader PyTorch still has, legacy_load in _legacy_load of
  torch/serialization.py (1.13's and 2.x's), which fixes every byte it reads;
- torch/serialization.py before #713, whose _save this follows step by step
  (_add_to_tar, save_sys_info, pickle_objects, save_tensors, save_storages,
  their order and their dicts keyed by _cdata), and its persistent_id:
  str(_cdata) for a tensor or storage, (class, source file, source) for an
  nn.Module class;
- TH's writeMetadataRaw and writeFileRaw (torch/csrc/generic/
  serialization.cpp of that tree): ndim written as sizeof(long) from an int
  field, so 4 bytes of whatever followed it in the struct, then the sizes,
  strides and storage offset as longs; a storage's size as a long, then its
  elements; in the machine's byte order (little-endian: torch.load reads no
  other, so no big-endian file is written);
- Python's tarfile of 2.7 and 3.5 (TarFile.add with format=PAX_FORMAT): a PAX
  header holding the member's float mtime (str() of it, which Python 2 cuts
  to 12 digits), the ustar header with mtime 0, records of 20 blocks;
- Python 2.7's pickle, protocol 2 (torch.save's default): ints past 32 bits
  as INT text lines, str as SHORT_BINSTRING or BINSTRING, an OrderedDict as
  the REDUCE of its [key, value] list; Python 3's own pickle writes the
  Python 3 files.
Keys are the objects' addresses, made up here (fixed heap-like addresses)
so that every run writes the same bytes. The dtypes are those of the era:
Double, Float, Half, Long, Int, Short, Char and Byte; an empty tensor was
one of no dimensions, with no storage or with the storage it had before.
"""
import collections
import io
import os
import pickle
import random
import struct
import sys
import types

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
GOLD = os.path.join(OUT, "tar")
HOST = os.path.join(OUT, "tar_hostile")

# ------------------------------------------------------------ TH's objects

# (class stem, element size, struct code) of the storage types of the era
TYPES = {"Double": (8, "d"), "Float": (4, "f"), "Half": (2, "e"), "Long": (8, "q"), "Int": (4, "i"),
         "Short": (2, "h"), "Char": (1, "b"), "Byte": (1, "B")}

_next_address = [0x55d4c8e1a040]


def address():
    """A made-up _cdata: heap addresses of a 64-bit Linux process."""
    _next_address[0] += 0x1f0
    return _next_address[0]


class Storage:
    """A THStorage: its elements' bytes, or a view of `count` elements of a
    root storage at `offset` (TH's storage views, which _root_storage gave)."""

    def __init__(self, stem, values=None, raw=None, location="cpu", root=None, offset=0, count=0):
        self.stem, self.location = stem, location
        if root is not None and root.root is not None:  # _root_storage walks to the first
            root, offset = root.root, root.offset + offset
        self.root, self.offset = root, offset
        self.cdata = address()
        if root is not None:
            self.stem, self.count = root.stem, count
            return
        es, code = TYPES[stem]
        self.raw = raw if raw is not None else struct.pack("<%d%s" % (len(values), code), *values)
        self.count = len(self.raw) // es

    def root_storage(self):
        return (self, 0) if self.root is None else (self.root, self.offset)


class Tensor:
    """A THTensor: a storage (or none), sizes, strides and an offset; `pad`
    is what followed nDimension in its struct."""

    def __init__(self, storage, sizes, strides=None, offset=0, stem=None, pad=b"\0" * 4):
        self.storage, self.sizes, self.offset, self.pad = storage, tuple(sizes), offset, pad
        if strides is None:
            strides, n = [], 1
            for s in reversed(self.sizes):
                strides.insert(0, n)
                n *= s
        self.strides = tuple(strides)
        self.stem = stem or storage.stem
        self.cuda = storage is not None and storage.location != "cpu"
        self.cdata = address()

    def metadata(self):
        nd = len(self.sizes)
        return (struct.pack("<i", nd) + self.pad + struct.pack("<%dq" % nd, *self.sizes) +
                struct.pack("<%dq" % nd, *self.strides) + struct.pack("<q", self.offset))


def vector(stem, values, location="cpu"):
    s = Storage(stem, values, location=location)
    return Tensor(s, (len(values),))


def ramp(stem, n, seed):
    r = random.Random(seed)
    if stem in ("Double", "Float", "Half"):
        return [round(r.uniform(-100, 100), 3) for _ in range(n)]
    lo, hi = {"Long": (-2**63, 2**63 - 1), "Int": (-2**31, 2**31 - 1), "Short": (-2**15, 2**15 - 1),
              "Char": (-128, 127), "Byte": (0, 255)}[stem]
    return [r.randint(lo, hi) for _ in range(n)]


class Module:
    """An nn.Module class as torch.save(model) pickled it: its persistent id
    was (class, source file, source)."""

# ------------------------------------------------------------ the pickles

# Stand-ins for torch's classes: pickle writes a class as its module and name.
_modules = {}


def stand_in(module, name):
    if module not in _modules:
        _modules[module] = sys.modules[module] = types.ModuleType(module)
    cls = getattr(_modules[module], name, None)
    if cls is None:
        cls = type(name, (), {"__module__": module})
        setattr(_modules[module], name, cls)
    return cls


def storage_class(stem):
    return stand_in("torch", stem + "Storage")


def tensor_class(t):
    return stand_in("torch.cuda" if t.cuda else "torch", t.stem + "Tensor")


OrderedDict = collections.OrderedDict


class Py2Pickler:
    """Python 2.7's pickle.Pickler, protocol 2, for what a checkpoint holds:
    None, bool, int (INT text past 32 bits, as save_int wrote them), long,
    float, str (bytes here: SHORT_BINSTRING, BINSTRING), unicode (str here),
    tuple, list, dict, OrderedDict (its __reduce__: OrderedDict, ([[k, v]],))
    and classes; everything memoized as pickle.py memoizes it."""

    def __init__(self, persistent_id=None):
        self.out, self.memo, self.persistent_id = [], {}, persistent_id

    def dumps(self, obj):
        self.out.append(b"\x80\x02")
        self.save(obj)
        self.out.append(b".")
        return b"".join(self.out)

    def memoize(self, obj):
        n = len(self.memo)
        self.memo[id(obj)] = (n, obj)
        self.out.append(b"q" + bytes([n]) if n < 256 else b"r" + struct.pack("<i", n))

    def save(self, obj):
        pid = self.persistent_id(obj) if self.persistent_id else None
        if pid is not None:
            self.save(pid)
            self.out.append(b"Q")
            return
        if id(obj) in self.memo:
            n = self.memo[id(obj)][0]
            self.out.append(b"h" + bytes([n]) if n < 256 else b"j" + struct.pack("<i", n))
            return
        w = self.out.append
        if obj is None:
            w(b"N")
        elif obj is True or obj is False:
            w(b"\x88" if obj else b"\x89")
        elif isinstance(obj, int):
            if 0 <= obj <= 0xff:
                w(b"K" + bytes([obj]))
            elif 0 <= obj <= 0xffff:
                w(b"M" + struct.pack("<H", obj))
            elif -2**31 <= obj < 2**31:
                w(b"J" + struct.pack("<i", obj))
            elif -2**63 <= obj < 2**63:
                w(b"I" + repr(obj).encode() + b"\n")
            else:  # a long
                n = (obj.bit_length() + 8) // 8
                w(b"\x8a" + bytes([n]) + obj.to_bytes(n, "little", signed=True))
        elif isinstance(obj, float):
            w(b"G" + struct.pack(">d", obj))
        elif isinstance(obj, bytes):
            w((b"U" + bytes([len(obj)]) if len(obj) < 256 else b"T" + struct.pack("<i", len(obj))) + obj)
            self.memoize(obj)
        elif isinstance(obj, str):
            b = obj.encode("utf-8")
            w(b"X" + struct.pack("<i", len(b)) + b)
            self.memoize(obj)
        elif isinstance(obj, tuple):
            if not obj:
                w(b")")
                return
            if len(obj) <= 3:
                for x in obj:
                    self.save(x)
                w(b"\x85\x86\x87"[len(obj) - 1:len(obj)])
            else:
                w(b"(")
                for x in obj:
                    self.save(x)
                w(b"t")
            self.memoize(obj)
        elif isinstance(obj, list):
            w(b"]")
            self.memoize(obj)
            self.batch(obj, b"e", b"a")
        elif isinstance(obj, OrderedDict):
            self.save(OrderedDict)
            self.save(([[k, v] for k, v in obj.items()],))
            w(b"R")
            self.memoize(obj)
        elif isinstance(obj, dict):
            w(b"}")
            self.memoize(obj)
            self.batch([x for kv in obj.items() for x in kv], b"u", b"s", 2)
        elif isinstance(obj, type):
            w(b"c" + obj.__module__.encode() + b"\n" + obj.__name__.encode() + b"\n")
            self.memoize(obj)
        else:
            raise TypeError(type(obj))

    def batch(self, items, many, one, width=1):
        for at in range(0, len(items), 1000 * width):
            part = items[at:at + 1000 * width]
            if len(part) > width:
                self.out.append(b"(")
            for x in part:
                self.save(x)
            self.out.append(many if len(part) > width else one)


def dumps(obj, py2, persistent_id=None):
    """One pickle as torch.save's pickle_module.dump wrote it: Python 2's
    pickle, or Python 3's, protocol 2."""
    if py2:
        return Py2Pickler(persistent_id).dumps(obj)
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=2)
    if persistent_id:
        p.persistent_id = persistent_id
    p.dump(obj)
    return buf.getvalue()


class Unicode(str):
    """A Python 2 unicode string, which py2_strings leaves as it is."""


def py2_strings(obj):
    """A tree with Python 2's str for every string (bytes here), as a Python
    2 program's literals and attribute names were."""
    if isinstance(obj, Unicode):
        return str(obj)
    if isinstance(obj, str):
        return obj.encode("utf-8")
    if isinstance(obj, OrderedDict):
        return OrderedDict((py2_strings(k), py2_strings(v)) for k, v in obj.items())
    if isinstance(obj, dict):
        return {py2_strings(k): py2_strings(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [py2_strings(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(py2_strings(x) for x in obj)
    return obj

# -------------------------------------------------------------- torch.save


def members(obj, py2=False):
    """The four members as torch.save's _save wrote them: [(name, bytes)]."""
    tensors, storages, modules = OrderedDict(), OrderedDict(), set()
    text = (lambda s: s.encode()) if py2 else (lambda s: s)

    def persistent_id(o):
        if isinstance(o, type) and issubclass(o, Module):
            if o in modules:
                return None
            modules.add(o)
            return (o, text("/home/user/model.py"), text("class %s(nn.Module):\n    pass\n" % o.__name__))
        if isinstance(o, Tensor):
            tensors[o.cdata] = o
            return text(str(o.cdata))
        if isinstance(o, Storage):
            storages[o.cdata] = o
            return text(str(o.cdata))
        return None

    info = {"protocol_version": 1000, "little_endian": True,
            "type_sizes": {"short": 2, "int": 4, "long": 8}}
    sys_info = dumps(py2_strings(info) if py2 else info, py2)
    tree = dumps(obj, py2, persistent_id)

    out = [dumps(len(tensors), py2)]
    for key, t in tensors.items():
        sid = None
        if t.storage is not None:
            sid = t.storage.cdata
            storages[sid] = t.storage
        out.append(dumps((key, sid, tensor_class(t)), py2) + t.metadata())
    tensor_bytes = b"".join(out)

    views, roots = [], OrderedDict()
    for key, s in storages.items():
        root, offset = s.root_storage()
        if root is not s:
            roots[root.cdata] = root
            views.append((s.cdata, root.cdata, offset, s.count))
    for v in views:
        del storages[v[0]]
    storages.update(roots)
    out = [dumps(len(storages), py2)]
    for key, s in storages.items():
        out.append(dumps((key, text(s.location), storage_class(s.stem)), py2) + struct.pack("<q", s.count) + s.raw)
    out.append(dumps(views, py2))
    return [("sys_info", sys_info), ("pickle", tree), ("tensors", tensor_bytes), ("storages", b"".join(out))]

# ------------------------------------------------------------------- tar


def itn(n, digits):
    """tarfile's number field: octal digits and a NUL."""
    return b"%0*o" % (digits - 1, n) + b"\0"


def header(name, size, mtime=0, kind=b"0", mode=0o600, uid=1000, gid=1000, uname=b"user", gname=b"user",
           magic=b"ustar\x0000", prefix=b"", size_field=None, linkname=b""):
    """A ustar header block as tarfile's _create_header writes it."""
    buf = (name.ljust(100, b"\0") + itn(mode, 8) + itn(uid, 8) + itn(gid, 8) +
           (size_field if size_field is not None else itn(size, 12)) + itn(mtime, 12) + b" " * 8 + kind +
           linkname.ljust(100, b"\0") + magic + uname.ljust(32, b"\0") + gname.ljust(32, b"\0") +
           itn(0, 8) + itn(0, 8) + prefix.ljust(155, b"\0")).ljust(512, b"\0")
    return checksummed(buf)


def checksummed(buf):
    s = 256 + sum(buf[:148]) + sum(buf[156:])
    return buf[:148] + b"%06o\0" % s + buf[155:]


def pax_records(fields):
    """'LEN key=value\\n' records, LEN counting itself."""
    out = b""
    for key, value in fields:
        rest = len(key) + len(value) + 3
        n = p = 0
        while True:
            n = rest + len(str(p))
            if n == p:
                break
            p = n
        out += b"%d %s=%s\n" % (p, key, value)
    return out


def pad(b):
    return b + b"\0" * (-len(b) % 512)


def pax(fields, kind=b"x"):
    rec = pax_records(fields)
    return header(b"././@PaxHeader", len(rec), mode=0, uid=0, gid=0, uname=b"", gname=b"", kind=kind) + pad(rec)


MTIME = 1486051190.4837742  # 2 February 2017


def mtime_text(t, py2):
    return (("%.12g" % t) if py2 else repr(t)).encode()


def member(name, data, i, py2=False):
    """A member as TarFile.add of the temporary file wrote it in PAX_FORMAT:
    its float mtime in a PAX header, 0 in the ustar one."""
    t = MTIME + 0.25 * i
    return pax([(b"mtime", mtime_text(t, py2))]) + header(name.encode(), len(data)) + pad(data)


def archive(blocks):
    """The archive's end: two zero blocks, then zeros to a whole record of
    20 blocks."""
    data = b"".join(blocks) + b"\0" * 1024
    return data + b"\0" * (-len(data) % 10240)


def tar_file(obj, py2=False):
    return archive([member(n, d, i, py2) for i, (n, d) in enumerate(members(obj, py2))])

# ------------------------------------------------------------------ writing


written = []


def write(dirname, name, data):
    os.makedirs(dirname, exist_ok=True)
    with open(os.path.join(dirname, name + ".pt"), "wb") as f:
        f.write(data)


def golden(name, obj, py2=False):
    write(GOLD, name, tar_file(py2_strings(obj) if py2 else obj, py2))
    written.append(name)


def model_class(name):
    cls = type(name, (Module,), {"__module__": "models"})
    if "models" not in _modules:
        _modules["models"] = sys.modules["models"] = types.ModuleType("models")
    setattr(_modules["models"], name, cls)
    return cls


def floats(shape, seed, stem="Float"):
    n = 1
    for s in shape:
        n *= s
    return Tensor(Storage(stem, ramp(stem, n, seed)), shape)


def state_dicts():
    """state_dict()s of the era's modules: parameters' and buffers' data."""
    conv = OrderedDict([("0.weight", floats((4, 3, 3, 3), 1)), ("0.bias", floats((4,), 2)),
                        ("1.weight", floats((4,), 3)), ("1.bias", floats((4,), 4)),
                        ("1.running_mean", floats((4,), 5)), ("1.running_var", floats((4,), 6))])
    # parameters flattened into one storage, as cuDNN's RNNs kept them
    flat = Storage("Float", ramp("Float", 200, 7))
    lstm = OrderedDict([("weight_ih_l0", Tensor(flat, (20, 3), offset=0)), ("weight_hh_l0", Tensor(flat, (20, 5), offset=60)),
                        ("bias_ih_l0", Tensor(flat, (20,), offset=160)), ("bias_hh_l0", Tensor(flat, (20,), offset=180))])
    return {
        "linear": OrderedDict([("weight", floats((3, 4), 8)), ("bias", floats((3,), 9))]),
        "mlp": OrderedDict([("0.weight", floats((8, 5), 10)), ("0.bias", floats((8,), 11)),
                            ("2.weight", floats((2, 8), 12)), ("2.bias", floats((2,), 13))]),
        "conv_bn": conv,
        "embedding": OrderedDict([("weight", floats((10, 4), 14))]),
        "lstm_flat": lstm,
        "double": OrderedDict([("weight", floats((2, 2), 15, "Double")), ("bias", floats((2,), 16, "Double"))]),
    }


def dtype_cases():
    out = {}
    for i, stem in enumerate(TYPES):
        base = Storage(stem, ramp(stem, 24, 100 + i))
        out[stem] = {
            "vector": Tensor(Storage(stem, ramp(stem, 7, 200 + i)), (7,)),
            "matrix": Tensor(base, (4, 6)),
            "cube": Tensor(base, (2, 3, 4)),
            "one": Tensor(Storage(stem, ramp(stem, 1, 300 + i)), (1,)),
            "transposed": Tensor(base, (6, 4), (1, 6)),
            "narrowed": Tensor(base, (2, 3), (6, 1), offset=7),
            # resize_(0) of a tensor that had a storage: no dimensions, which
            # torch.load now reads as a 0-d tensor of the element at its offset
            "no_dims": Tensor(base, (), (), offset=5),
        }
    return out


def sharing():
    base = Storage("Float", ramp("Float", 30, 400))
    t = Tensor(base, (30,))
    tree = OrderedDict([
        ("base", t), ("a", Tensor(base, (6,), offset=2)), ("b", Tensor(base, (5, 6))),
        ("c", Tensor(base, (6, 5), (1, 6))), ("d", Tensor(base, (5,), (7,))),
        ("expanded", Tensor(base, (3, 5), (0, 1), offset=10)), ("again", t), ("list", [t, t])])
    return tree


def storage_views():
    """TH's storage views (a part of another storage, as storage sharing
    between processes made them): written as their root and (view, root,
    offset, count), and a tensor on a view takes the view's part."""
    root = Storage("Float", ramp("Float", 12, 500))
    part = Storage("Float", root=root, offset=4, count=6)
    inner = Storage("Float", root=part, offset=2, count=3)
    byte_root = Storage("Byte", ramp("Byte", 9, 501))
    return {"on_view": Tensor(part, (2, 3)), "view": part, "on_root": Tensor(root, (12,)),
            "inner": Tensor(inner, (3,)), "inner_storage": inner,
            "bytes": Tensor(Storage("Byte", root=byte_root, offset=3, count=5), (5,))}


def checkpoint():
    """An ImageNet example's checkpoint of early 2017: epoch, arch, the
    model's state_dict, the best accuracy, and the optimizer's state_dict
    (its state keyed by the parameters' ids)."""
    sd = state_dicts()["linear"]
    ids = [140121734507272, 140121734507352]
    return {"epoch": 12, "arch": "resnet18", "state_dict": sd, "best_prec1": 71.328,
            "optimizer": {"state": {ids[0]: {"step": 10, "exp_avg": floats((3, 4), 600),
                                              "exp_avg_sq": floats((3, 4), 601)},
                                    ids[1]: {"momentum_buffer": floats((3,), 602)}},
                          "param_groups": [{"lr": 0.1, "momentum": 0.9, "dampening": 0, "weight_decay": 0.0001,
                                            "betas": (0.9, 0.999), "eps": 1e-08, "params": ids}]}}


def scalars(py2):
    return [None, True, False, 0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31 - 1, 2**31, 2**40,
            2**63 - 1, -2**63, 12345678901234, 0.0, -0.0, 1.5, float("inf"), float("-inf"), 1e308,
            "", "a", "\u00fcn\u00efc\u00f8d\u00e9", (Unicode if py2 else str)("\u65e5\u672c\u8a9e"), "x" * 300, ("t", (1, (2,))), {"k": [1, [2, [3]]]},
            {1: "int key", (1, 2): "tuple key", None: "none key"}]


def rand_value(rng, depth, pool):
    if depth > 3 or rng.random() < 0.35:
        k = rng.randrange(7)
        if k == 0:
            return None
        if k == 1:
            return rng.randrange(-2**40, 2**40)
        if k == 2:
            return "s%d" % rng.randrange(1000)
        if k == 3 and pool:
            s = rng.choice(pool)
            start = rng.randrange(s.count)
            return Tensor(s, (rng.randrange(0, s.count - start + 1),), offset=start)
        stem = rng.choice(list(TYPES))
        shape = tuple(rng.randrange(1, 4) for _ in range(rng.randrange(1, 4)))
        t = floats(shape, rng.randrange(10**6), stem)
        pool.append(t.storage)
        return t
    n = rng.randrange(0, 5)
    k = rng.randrange(4)
    if k == 0:
        return [rand_value(rng, depth + 1, pool) for _ in range(n)]
    if k == 1:
        return tuple(rand_value(rng, depth + 1, pool) for _ in range(n))
    d = OrderedDict() if k == 2 else {}
    for i in range(n):
        d[rng.choice(["k%d" % i, i])] = rand_value(rng, depth + 1, pool)
    return d


def goldens():
    for name, sd in state_dicts().items():
        golden("state_%s" % name, sd)
        golden("py2_state_%s" % name, sd, py2=True)
    for stem, cases in dtype_cases().items():
        golden("dtype_%s" % stem.lower(), cases)
        golden("py2_dtype_%s" % stem.lower(), cases, py2=True)
    for py2 in (False, True):
        pre = "py2_" if py2 else ""
        golden(pre + "sharing", sharing(), py2)
        golden(pre + "storage_views", storage_views(), py2)
        golden(pre + "checkpoint", checkpoint(), py2)
        golden(pre + "scalars", scalars(py2), py2)
        golden(pre + "tensor_root", floats((3, 4), 700, "Long"), py2)
        golden(pre + "storage_root", Storage("Short", ramp("Short", 5, 701)), py2)
        golden(pre + "empty_storage", [Storage("Float", []), Tensor(Storage("Double", []), (0,))], py2)
        deep = floats((2,), 702)
        for i in range(100):
            deep = [deep] if i % 2 else {"k%d" % i: deep}
        golden(pre + "deep", deep, py2)
        golden(pre + "wide", OrderedDict(("w%04d" % i, floats((i % 3 + 1,), 800 + i)) for i in range(1200)), py2)
        golden(pre + "big", {"w": floats((256, 256), 703)}, py2)
        rng = random.Random(99 if py2 else 98)
        for i in range(10):
            golden("%srandom_%02d" % (pre, i), rand_value(rng, 0, []), py2)
    # what followed nDimension in TH's struct is not read
    t = floats((2, 2), 704)
    t.pad = b"\xde\xad\xbe\xef"
    golden("ndim_padding", {"t": t})
    # a tensor of a cuda type on 'cuda:0', read with map_location="cpu"
    golden("cuda_state", OrderedDict([("weight", vector("Float", [1.5, -2.0, 3.25], "cuda:0")),
                                      ("steps", vector("Long", [7, 8], "cuda:1"))]))

# ------------------------------------------------------- crafted archives


class Ref:
    """A persistent id in a crafted tree: str(key) as torch.save wrote it."""

    def __init__(self, key):
        self.key = key


def crafted(tree, storages, views=(), tensors=(), py2=False, counts=(None, None), views_raw=None):
    """The members of a file written by hand: storages [(key, location,
    stem, count, raw)] (count None: the raw bytes' own), views [(key, root,
    offset, count)], tensors [(key, storage key, stem, sizes, strides,
    offset)] or raw (key, storage key, stem, metadata bytes), and a tree
    whose Refs are persistent ids."""
    text = (lambda x: x.encode()) if py2 else (lambda x: x)

    def pid(o):
        return text(str(o.key)) if isinstance(o, Ref) else None

    out = [dumps(len(tensors) if counts[1] is None else counts[1], py2)]
    for t in tensors:
        if len(t) == 4:
            key, sid, stem, meta = t
        else:
            key, sid, stem, sizes, strides, offset = t
            meta = Tensor(None, sizes, strides, offset, stem=stem).metadata()
        out.append(dumps((key, sid, stand_in("torch", stem + "Tensor")), py2) + meta)
    tensor_bytes = b"".join(out)
    out = [dumps(len(storages) if counts[0] is None else counts[0], py2)]
    for key, loc, stem, count, raw in storages:
        if count is None:
            count = len(raw) // TYPES[stem][0]
        cls = stem if isinstance(stem, type) else storage_class(stem)
        out.append(dumps((key, loc if not isinstance(loc, str) else text(loc), cls), py2) +
                   struct.pack("<q", count) + raw)
    out.append(views_raw if views_raw is not None else dumps(list(views), py2))
    info = dumps({"protocol_version": 1000, "little_endian": True}, py2)
    return [("sys_info", info), ("pickle", dumps(tree, py2, pid)), ("tensors", tensor_bytes),
            ("storages", b"".join(out))]


def floats_raw(values):
    return struct.pack("<%df" % len(values), *values)


K1, K2, K3, T1, T2 = 94376301285376, 94376301285888, 94376301286400, 94376301290000, 94376301291008


def simple(py2=False, **kw):
    """A dict of two tensors on one storage of 6 floats: the file most
    hostile ones start from."""
    st = kw.pop("storages", [(K1, "cpu", "Float", None, floats_raw([1, 2, 3, 4, 5, 6]))])
    ts = kw.pop("tensors", [(T1, K1, "Float", (2, 3), (3, 1), 0), (T2, K1, "Float", (3,), (1,), 2)])
    tree = kw.pop("tree", {"a": Ref(T1), "b": Ref(T2)})
    return crafted(tree, st, tensors=ts, py2=py2, **kw)


def tar_of(ms, order=None, end=True):
    ms = [m for m in ms if order is None or m[0] in order]
    if order:
        ms.sort(key=lambda m: order.index(m[0]))
    blocks = [member(n, d, i) for i, (n, d) in enumerate(ms)]
    return archive(blocks) if end else b"".join(blocks)


def good(name, data):
    write(GOLD, name, data)
    written.append(name)


def variants():
    base = members({"w": floats((2, 3), 900), "v": vector("Long", [5, -6, 7])})
    good("order_reversed", tar_of(base, ["storages", "tensors", "pickle", "sys_info"]))
    good("no_sys_info", tar_of(base, ["pickle", "tensors", "storages"]))
    # a member given twice: tarfile's getmember takes the last
    good("member_twice", archive([member("storages", b"not these bytes", 0)] +
                                 [member(n, d, i + 1) for i, (n, d) in enumerate(base)]))
    # the size in a PAX record only, as tarfile writes one past 8 GiB
    blocks = []
    for i, (n, d) in enumerate(base):
        if n == "storages":
            blocks.append(pax([(b"mtime", mtime_text(MTIME, False)), (b"size", b"%d" % len(d))]) +
                          header(n.encode(), 0) + pad(d))
        else:
            blocks.append(member(n, d, i))
    good("pax_size", archive(blocks))
    # the name in a PAX record only
    blocks = [pax([(b"path", n.encode())]) + header(b"member%d" % i, len(d)) + pad(d) for i, (n, d) in enumerate(base)]
    good("pax_path", archive(blocks))
    # GNU's format: no PAX headers, a long name in an 'L' header before its own
    blocks = []
    for i, (n, d) in enumerate(base):
        gnu = dict(mtime=int(MTIME), magic=b"ustar  \0")
        if n == "tensors":
            nb = n.encode() + b"\0"
            blocks.append(header(b"././@LongLink", len(nb), kind=b"L", mode=0, uid=0, gid=0, uname=b"",
                                 gname=b"", **gnu) + pad(nb))
        blocks.append(header(n.encode()[:4] if n == "tensors" else n.encode(), len(d), **gnu) + pad(d))
    good("gnu_long_name", archive(blocks))
    # V7's headers (no magic), sizes in base-256, a checksum of signed bytes
    good("v7_headers", archive([header(n.encode(), len(d), magic=b"\0" * 8) + pad(d) for n, d in base]))
    good("base256_size", archive([header(n.encode(), 0, size_field=b"\x80" + len(d).to_bytes(11, "big")) + pad(d)
                                  for n, d in base]))
    blocks = []
    for n, d in base:
        h = bytearray(header(n.encode(), len(d), uname=b"\xff\xfe\xfd"))
        h[148:156] = b"%06o\0 " % (256 + sum((x ^ 0x80) - 0x80 for x in h[:148] + h[156:]))
        blocks.append(bytes(h) + pad(d))
    good("signed_checksum", archive(blocks))
    good("no_end_blocks", tar_of(base, end=False))
    good("garbage_after_end", tar_of(base) + b"this is not a header" * 40)
    # keys given again: the later storage, and a tensor over a storage's key
    good("storage_key_twice", tar_of(crafted({"a": Ref(T1), "s": Ref(K1)},
                                             [(K1, "cpu", "Float", None, floats_raw([9, 9])),
                                              (K1, "cpu", "Double", None, struct.pack("<3d", 1.5, 2.5, 3.5))],
                                             tensors=[(T1, K1, "Double", (3,), (1,), 0)])))
    good("tensor_takes_storage_key", tar_of(crafted({"a": Ref(K1)}, [(K1, "cpu", "Float", None, floats_raw([1, 2, 3]))],
                                                    tensors=[(K1, K1, "Float", (2,), (1,), 1)])))
    # a count below zero is no tensor at all (range(-1))
    good("negative_tensor_count", tar_of(crafted({"s": Ref(K1)}, [(K1, "cpu", "Float", None, floats_raw([4, 5]))],
                                                 counts=(None, -1))))
    # a view of a view, which torch.load finds as the dict holds it by then
    good("view_of_view", tar_of(crafted({"t": Ref(T1), "v": Ref(K3)},
                                        [(K1, "cpu", "Short", None, struct.pack("<8h", *range(8)))],
                                        views=[(K2, K1, 2, 5), (K3, K2, 1, 3)],
                                        tensors=[(T1, K3, "Short", (3,), (1,), 0)])))
    # Python 2's INT keys, a string past 255 bytes, OrderedDict's items
    good("py2_opcodes", tar_of(crafted(OrderedDict([(b"k" * 300, Ref(T1)), (b"n", 2**40)]),
                                       [(K1, "cpu", "Float", None, floats_raw([1, 2]))],
                                       tensors=[(T1, K1, "Float", (2,), (1,), 0)], py2=True)))

# ----------------------------------------------------------------- hostile

hostile = []


def bad(name, data, code, needle, torch_reads=None, lax_reads=None):
    """A file tstor refuses with `code` and a message holding `needle`;
    torch.load refuses it too unless `torch_reads` says why it reads it, or
    `lax_reads` why a Python whose tarfile parses PAX records laxly does
    (3.11.7's; 3.11.2 as Debian patched it, and 3.12 and later, refuse)."""
    write(HOST, name, data)
    if torch_reads:
        hostile.append("# torch.load reads %s.pt: %s" % (name, torch_reads))
    if lax_reads:
        hostile.append("# lax tarfile reads %s.pt: %s" % (name, lax_reads))
    hostile.append("%s.pt %s %s" % (name, code, needle))


def with_member(ms, name, data):
    return [(n, data if n == name else d) for n, d in ms]


def blocks_of(ms):
    return [member(n, d, i) for i, (n, d) in enumerate(ms)]


def hostiles():
    ms = simple()
    whole = tar_of(ms)
    # where the archive lies about its members
    stor = whole.find(b"storages\0")  # its header, after a PAX header
    data_at = stor + 512
    bad("cut_in_storages", whole[:data_at + 20], "TSTOR_EINVAL", "runs past the end of the file")
    bad("cut_in_padding", whole[:data_at + len(ms[3][1]) + 3], "TSTOR_EINVAL", "the file cuts short")
    bad("cut_in_header", whole[:stor + 100], "TSTOR_EINVAL", "followed by the end of the file")
    bad("cut_in_pax_header", whole[:stor - 500], "TSTOR_EINVAL", "past the end of the file")
    bad("cut_before_headers", whole[:stor - 1024], "TSTOR_EINVAL", "without the member 'storages'")
    bad("cut_in_first_header", whole[:300], "TSTOR_EINVAL", "not a torch.save zip archive")
    h = bytearray(whole[stor:stor + 512])
    h[124:136] = itn(len(whole), 12)
    bad("size_past_file", whole[:stor] + checksummed(bytes(h)) + whole[stor + 512:], "TSTOR_EINVAL",
        "runs past the end of the file")
    h[124:136] = itn(40, 12)
    bad("size_too_small", whole[:stor] + checksummed(bytes(h)) + whole[stor + 512:], "TSTOR_EINVAL",
        "member 'storages'")
    h[124:136] = b"\xff" * 12
    bad("size_negative", whole[:stor] + checksummed(bytes(h)) + whole[stor + 512:], "TSTOR_EINVAL",
        "negative number of bytes")
    h[124:136] = b"12x4\0\0\0\0\0\0\0\0"
    # after a PAX header, a block that is no header is an error; anywhere
    # else it ends the archive, as tarfile reads it
    bad("size_not_octal", whole[:stor] + checksummed(bytes(h)) + whole[stor + 512:], "TSTOR_EINVAL",
        "followed by no header")
    x = bytearray(whole[stor - 1024:stor - 512])
    x[148] ^= 1
    bad("checksum_wrong", whole[:stor - 1024] + bytes(x) + whole[stor - 512:], "TSTOR_EINVAL",
        "without the member 'storages'")
    x[148] ^= 1
    x[100:108] = b"0009\0\0\0\0"
    bad("mode_not_octal", whole[:stor - 1024] + checksummed(bytes(x)) + whole[stor - 512:], "TSTOR_EINVAL",
        "without the member 'storages'")
    blocks = blocks_of(ms[:3]) + [pax([(b"size", b"%d" % (len(whole) * 2))]) + header(b"storages", 0) + pad(ms[3][1])]
    bad("pax_size_past_file", archive(blocks), "TSTOR_EINVAL", "runs past the end of the file")
    blocks = blocks_of(ms[:3]) + [header(b"././@PaxHeader", 30, kind=b"x") + pad(b"99 mtime=1486051190.4837742\n") +
                                  header(b"storages", len(ms[3][1])) + pad(ms[3][1])]
    bad("pax_record_length", archive(blocks), "TSTOR_EINVAL", "PAX record of 99 bytes",
        lax_reads="it stops at the first record that does not parse, and ignores the rest")
    # a length of 20 digits, past any header's size: counted to its last digit, then refused
    blocks = blocks_of(ms[:3]) + [header(b"././@PaxHeader", 46, kind=b"x") +
                                  pad(b"28888888888888888888 mtime=1486051190.4837742\n") +
                                  header(b"storages", len(ms[3][1])) + pad(ms[3][1])]
    # (lax tarfile slices past the record with the length and overflows; strict tarfile stops at the
    # header and never finds 'storages')
    bad("pax_record_length_huge", archive(blocks), "TSTOR_EINVAL", "PAX record of 18446744073709551615 bytes")
    blocks = blocks_of(ms[:3]) + [pax([(b"mtime", b"1")]).replace(b"mtime=1", b"mtime 1") +
                                  header(b"storages", len(ms[3][1])) + pad(ms[3][1])]
    bad("pax_record_no_equals", archive(blocks), "TSTOR_EINVAL", "without a keyword and '='",
        lax_reads="it stops at the first record that does not parse, and ignores the rest")
    bad("pax_global", archive([pax([(b"comment", b"x")], kind=b"g")] + blocks_of(ms)), "TSTOR_EINVAL",
        "global PAX header", torch_reads="tarfile applies a global header's records to every later member")
    bad("pax_sparse", archive(blocks_of(ms[:3]) + [pax([(b"GNU.sparse.size", b"40")]) + header(b"storages", len(ms[3][1])) +
                                                   pad(ms[3][1])]), "TSTOR_EINVAL", "GNU sparse")
    bad("pax_huge", archive([pax([(b"comment", b"x" * (1100 << 10))])] + blocks_of(ms)), "TSTOR_ERANGE",
        "a PAX header of", torch_reads="tarfile reads a PAX header of any size")
    bad("gnu_sparse", archive(blocks_of(ms[:3]) + [header(b"storages", len(ms[3][1]), kind=b"S") + pad(ms[3][1])]),
        "TSTOR_EINVAL", "GNU sparse member")
    chain = b"".join(pax([(b"comment", b"%d" % i)]) for i in range(65))
    bad("extension_chain", archive([chain] + blocks_of(ms)), "TSTOR_EINVAL", "extension headers in a row",
        torch_reads="tarfile recurses through the headers (Python's stack ends near 330 of them)")
    bad("extension_at_end", whole[:stor] + pax([(b"path", b"storages")]), "TSTOR_EINVAL",
        "followed by the end of the file")
    bad("extension_then_zeros", whole[:stor] + pax([(b"path", b"storages")]) + b"\0" * 1024, "TSTOR_EINVAL",
        "followed by no header")
    # members missing, or of another type
    bad("no_tensors", tar_of(ms, ["sys_info", "pickle", "storages"]), "TSTOR_EINVAL", "without the member 'tensors'")
    bad("no_pickle", tar_of(ms, ["sys_info", "tensors", "storages"]), "TSTOR_EINVAL", "without the member 'pickle'")
    bad("pickle_a_directory", archive(blocks_of(ms) + [header(b"pickle/", 0, kind=b"5", mode=0o755)]),
        "TSTOR_EINVAL", "no file but of type '5'")
    # (tarfile makes the link, and torch.load reads the file it names)
    bad("storages_a_symlink", archive(blocks_of(ms) + [header(b"storages", 0, kind=b"2", linkname=b"/etc/passwd")]),
        "TSTOR_EINVAL", "no file but of type '2'")
    bad("tensors_a_hard_link", archive(blocks_of(ms) + [header(b"tensors", 0, kind=b"1", linkname=b"sys_info")]),
        "TSTOR_EINVAL", "no file but of type '1'")
    # counts the bytes cannot hold
    bad("storage_count_huge", tar_of(simple(counts=(10**9, None))), "TSTOR_EINVAL", "member 'storages'")
    bad("tensor_count_huge", tar_of(simple(counts=(None, 10**9))), "TSTOR_EINVAL", "member 'tensors'")
    bad("storage_count_text", tar_of(simple(counts=("1", None))), "TSTOR_EINVAL", "count of storages is no int but a str")
    raw = floats_raw([1, 2, 3, 4, 5, 6])
    bad("element_count_negative", tar_of(simple(storages=[(K1, "cpu", "Float", -1, raw)])), "TSTOR_EINVAL",
        "a negative count")
    bad("element_count_past_member", tar_of(simple(storages=[(K1, "cpu", "Float", 100, raw)])), "TSTOR_EINVAL",
        "more bytes than the member has left")
    bad("element_count_overflows", tar_of(simple(storages=[(K1, "cpu", "Float", 2**62, raw)])), "TSTOR_EINVAL",
        "more bytes than the member has left")
    # keys that name nothing, or the wrong thing
    bad("tensor_storage_missing", tar_of(simple(tensors=[(T1, K2, "Float", (2,), (1,), 0)], tree={"a": Ref(T1)})),
        "TSTOR_EINVAL", "no key of the member 'storages'")
    bad("tree_key_missing", tar_of(simple(tree={"a": Ref(K3)})), "TSTOR_EINVAL", "no key of the members")
    bad("tree_key_not_a_number", tar_of(simple(tree={"a": Ref("0x1234")})), "TSTOR_EINVAL",
        "no storage or tensor key")
    bad("view_root_missing", tar_of(simple(views=[(K2, K3, 0, 1)])), "TSTOR_EINVAL", "a view names storage")
    bad("tensor_on_tensor", tar_of(simple(tensors=[(T1, K1, "Float", (2,), (1,), 0), (T2, T1, "Float", (1,), (1,), 0)])),
        "TSTOR_EINVAL", "which is a tensor")
    # an empty tensor of the era, which had no storage: torch.load looks up None
    bad("tensor_without_storage", tar_of(simple(tensors=[(T1, None, "Float", (), (), 0)], tree={"a": Ref(T1)})),
        "TSTOR_EINVAL", "names no storage")
    bad("storage_header_not_a_tuple", tar_of(simple(counts=(None, None), storages=[])[:3] +
                                             [("storages", dumps(1, False) + dumps([K1, "cpu"], False))]),
        "TSTOR_EINVAL", "header is no (key, location, storage class)")
    bad("views_not_a_list", tar_of(simple(views_raw=dumps(5, False))), "TSTOR_EINVAL", "views are no list but a int")
    bad("view_three_fields", tar_of(simple(views_raw=dumps([(K2, K1, 0)], False))), "TSTOR_EINVAL",
        "view 0 is no (key, root key, offset, count)")
    # layouts past their storage, or that are none
    bad("tensor_past_storage", tar_of(simple(tensors=[(T1, K1, "Float", (2, 4), (4, 1), 0)], tree={"a": Ref(T1)})),
        "TSTOR_ERANGE", "would grow it", torch_reads="set_ grows the storage with bytes the file does not hold")
    bad("tensor_offset_past_storage", tar_of(simple(tensors=[(T1, K1, "Float", (), (), 6)], tree={"a": Ref(T1)})),
        "TSTOR_ERANGE", "would grow it", torch_reads="set_ grows the storage with bytes the file does not hold")
    bad("view_past_root", tar_of(simple(views=[(K2, K1, 4, 5)], tree={"v": Ref(K2)})), "TSTOR_ERANGE",
        "lies past storage", torch_reads="Python's slice of the root's bytes stops at its end")
    bad("ndim_negative", tar_of(simple(tensors=[(T1, K1, "Float", struct.pack("<i", -1) + b"\0" * 12)])),
        "TSTOR_EINVAL", "a tensor of -1 dimensions")
    bad("ndim_past_member", tar_of(simple(tensors=[(T1, K1, "Float", struct.pack("<i", 60) + b"\0" * 12)])),
        "TSTOR_EINVAL", "ends inside a tensor of 60 dimensions")
    bad("ndim_cut", tar_of(simple(tensors=[(T1, K1, "Float", struct.pack("<i", 1) + b"\0" * 6)])),
        "TSTOR_EINVAL", "the member ends inside")
    bad("size_negative_dim", tar_of(simple(tensors=[(T1, K1, "Float", (-1,), (1,), 0)])), "TSTOR_EINVAL",
        "tensor %d" % T1)
    bad("stride_negative", tar_of(simple(tensors=[(T1, K1, "Float", (2,), (-1,), 2)])), "TSTOR_EINVAL",
        "tensor %d" % T1)
    bad("offset_negative", tar_of(simple(tensors=[(T1, K1, "Float", (2,), (1,), -1)])), "TSTOR_EINVAL",
        "tensor %d" % T1)
    bad("layout_overflows", tar_of(simple(tensors=[(T1, K1, "Float", (2**62, 2**62), (1, 1), 0)])),
        "TSTOR_EOVERFLOW", "tensor %d" % T1)
    # what the pickles may name
    net = model_class("Net")
    bad("module_class", tar_of(members({"model": net, "w": floats((2,), 950)})), "TSTOR_EACCES", "models.Net")
    evil = stand_in("posix", "system")
    bad("global_in_tree", tar_of(simple(tree={"a": evil})), "TSTOR_EACCES", "posix.system",
        torch_reads="a function as a value, which tstor's values exclude (and a REDUCE would call it)")
    bad("global_in_storage_header", tar_of(simple(storages=[(K1, "cpu", stand_in("collections", "OrderedDict"), 6, raw)])),
        "TSTOR_EACCES", "collections.OrderedDict")
    bad("tensor_class_in_tree", tar_of(simple(tree={"a": stand_in("torch", "FloatTensor")})), "TSTOR_EACCES",
        "torch.FloatTensor", torch_reads="a class as a value, which tstor's values exclude")
    bad("int_not_a_number", tar_of(with_member(ms, "pickle", b"\x80\x02I12x4\n.")), "TSTOR_EINVAL", "INT of a line")
    bad("binstring_negative", tar_of(with_member(ms, "pickle", b"\x80\x02T\xff\xff\xff\xffabc.")), "TSTOR_EINVAL",
        "BINSTRING of a negative length")
    bad("pickle_without_stop", tar_of(with_member(ms, "pickle", b"\x80\x02}")), "TSTOR_EINVAL", "without STOP")
    bad("location_unknown", tar_of(simple(storages=[(K1, "tpu:3", "Float", None, raw)])), "TSTOR_ENODEV", "tpu:3")
    bad("location_not_a_string", tar_of(simple(storages=[(K1, None, "Float", None, raw)])), "TSTOR_EINVAL",
        "names no location")
    deep = b"\x80\x02" + b"]" * 600 + b"a" * 599 + b"."
    bad("deep_nesting", tar_of(with_member(ms, "pickle", deep)), "TSTOR_EINVAL", "deeper than 512",
        torch_reads="tstor bounds a tree's depth (TSTOR_CHECKPOINT_MAX_DEPTH), Python's unpickler does not")


if __name__ == "__main__":
    goldens()
    variants()
    hostiles()
    with open(os.path.join(OUT, "tar_hostile.txt"), "w") as f:
        f.write("# gen_tar.py; FILE  expected error  words of its message (a comment says where torch.load reads it)\n")
        f.write("\n".join(hostile) + "\n")
