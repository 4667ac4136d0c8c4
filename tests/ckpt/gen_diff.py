#!/usr/bin/python3
"""Files for the differential test against torch.load: valid-looking
checkpoints with one field broken, and what PyTorch makes of each.

    gen_diff.py OUTDIR COUNT [SEED]

Each file starts as torch.save of a random tree (dicts, OrderedDicts, lists,
tuples, ints, strings, None, bools, tensors of every dtype that share storages
and view them at offsets and strides). Then, for most of them, one thing is
broken where a reader has to check it: an integer argument of one opcode
replaced by an extreme value (sizes, strides, offsets, numels, memo indices,
dict keys), a string argument replaced (a storage key, a dtype class, a
location), one opcode deleted, doubled or turned into a tuple of another
arity, a memo index moved, or at the zip level a record shortened or
lengthened, dropped, or the byteorder record set to "big" (with PyTorch 2,
which reads it). A quarter are in torch.save's legacy format instead, broken
in its tree's pickle the same way, or in its list of storage keys, a
storage's element count, its end or its protocol version. The rest stay
valid, so that equal values are checked as often as equal refusals.

Where torch.load reads a file that tstor must refuse, the expectation says
"refused" and why: torch.load read past a record (a storage larger than the
bytes behind it), or the tree holds an int past 64 bits or a negative size or
stride, or a class or function as a value (what a rebuild call was meant to
consume), which tstor's values and tensors exclude by design.

OUTDIR gets the files (diff_NNNNN.pt) and expect.txt: for each file a line
"file NAME", then "refused" or the listing of describe.py for what
torch.load(map_location="cpu", weights_only=True) returned, and a comment
line "# mutation ..." saying what was broken. The same SEED gives the same
files and, with the same torch, the same expectations.

    gen_diff.py --judge OUTDIR

makes no files: it judges the files expect.txt lists with this Python's
torch (torch 2.x as the second judge of files 1.13 wrote) into
expect_torch2.txt, in the same form.
"""
import collections
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

JUDGE = sys.argv[1] == "--judge"
if JUDGE:
    out, count, seed = sys.argv[2], 0, 0
else:
    out, count = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
rng = random.Random(seed)
torch.manual_seed(seed)
os.makedirs(out, exist_ok=True)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool, torch.complex64]


def tensor(pool):
    dt = rng.choice(DTYPES)
    shape = tuple(rng.randrange(0, 5) for _ in range(rng.randrange(0, 4)))
    t = (torch.randn(shape) * 100).to(dt) if dt != torch.bool else torch.rand(shape) < 0.5
    if pool and rng.random() < 0.4:  # a view of an earlier tensor's storage
        b = rng.choice(pool)
        n = b.numel()
        if n:
            start = rng.randrange(n)
            t = b.reshape(-1)[start:start + rng.randrange(1, n - start + 1)]
            if t.numel() >= 4 and rng.random() < 0.5:
                t = t[::2]
    elif t.dim() >= 2 and rng.random() < 0.4:
        t = t.transpose(0, 1)
    pool.append(t)
    return t


def value(depth, pool):
    if depth > 3 or rng.random() < 0.4:
        k = rng.randrange(7)
        if k == 0:
            return None
        if k == 1:
            return rng.random() < 0.5
        if k == 2:
            return rng.choice([0, 1, -1, 255, 65536, -2**31, 2**40, 2**63 - 1, -2**63])
        if k == 3:
            return rng.choice(["", "w", "layer.weight", "\u00e9t\u00e9"])
        return tensor(pool)
    n = rng.randrange(0, 5)
    k = rng.randrange(3)
    if k == 0:
        return [value(depth + 1, pool) for _ in range(n)]
    if k == 1:
        return tuple(value(depth + 1, pool) for _ in range(n))
    d = collections.OrderedDict() if rng.random() < 0.3 else {}
    for i in range(n):
        d[rng.choice(["k%d" % i, i, -i])] = value(depth + 1, pool)
    return d


EXTREME = [0, 1, -1, 2, 3, 7, 8, 255, 256, 65535, 2**31 - 1, -2**31, 2**32, 2**62, 2**63 - 1, -2**63, 2**63, 2**64]


def long1(v):
    n = (v.bit_length() + 8) // 8 if v else 0
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True) if n else b"\x8a\x00"


def unicode(s):
    b = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(b)) + b


INT_OPS = {"BININT", "BININT1", "BININT2", "LONG1"}
STR_OPS = {"BINUNICODE", "SHORT_BINUNICODE"}
MEMO_OPS = {"BINPUT", "BINGET", "LONG_BINPUT", "LONG_BINGET"}
TUPLE_OPS = {"EMPTY_TUPLE": b")", "TUPLE1": b"\x85", "TUPLE2": b"\x86", "TUPLE3": b"\x87"}
STRINGS = ["", "0", "1", "2", "9", "storage", "FloatStorage", "HalfStorage", "LongStorage", "BoolStorage",
           "cpu", "cuda:0", "meta", "xpu", "k0", "\udcff"]


def mutate_pickle(pkl):
    """One opcode of the pickle changed; returns (bytes, what)."""
    ops = list(pickletools.genops(pkl))
    ends = [pos for _, _, pos in ops[1:]] + [len(pkl)]
    parts = [pkl[pos:end] for (_, _, pos), end in zip(ops, ends)]
    where = []
    while not where:  # a kind the pickle has an opcode for (delete and double always do)
        kind = rng.choice(["int", "int", "int", "str", "delete", "double", "tuple", "memo"])
        pick = {"int": INT_OPS, "str": STR_OPS, "memo": MEMO_OPS, "tuple": set(TUPLE_OPS)}.get(kind)
        where = [i for i, (op, _, _) in enumerate(ops) if (pick is None and op.name not in ("PROTO", "STOP"))
                 or (pick is not None and op.name in pick)]
    i = rng.choice(where)
    op, arg, _ = ops[i]
    if kind == "int":
        new = rng.choice(EXTREME + [arg + rng.choice([-1, 1]), -arg])
        parts[i], what = long1(new), "int %s at op %d: %d -> %d" % (op.name, i, arg, new)
    elif kind == "str":
        new = rng.choice(STRINGS)
        parts[i], what = unicode(new), "str at op %d: %r -> %r" % (i, arg, new)
    elif kind == "delete":
        parts[i], what = b"", "delete op %d (%s)" % (i, op.name)
    elif kind == "double":
        parts[i], what = parts[i] * 2, "double op %d (%s)" % (i, op.name)
    elif kind == "tuple":
        name = rng.choice([n for n in TUPLE_OPS if n != op.name])
        parts[i], what = TUPLE_OPS[name], "op %d %s -> %s" % (i, op.name, name)
    else:
        new = rng.choice([0, 1, 2, arg + 1, max(arg - 1, 0), 255, 2**31 - 1])
        code = {"BINPUT": b"q", "BINGET": b"h", "LONG_BINPUT": b"r", "LONG_BINGET": b"j"}[op.name]
        body = bytes([new]) if code in (b"q", b"h") and new < 256 else struct.pack("<I", new)
        code = code if len(body) == 1 or code in (b"r", b"j") else {b"q": b"r", b"h": b"j"}[code]
        parts[i], what = code + body, "memo %s at op %d: %d -> %d" % (op.name, i, arg, new)
    return b"".join(parts), what


def rezip(records):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in records:
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            z.writestr(zi, data)
    return buf.getvalue()


def split_pickles(data, count):
    """The offsets where each of the first `count` pickles of a stream ends."""
    ends, at = [], 0
    f = io.BytesIO(data)
    for _ in range(count):
        for op, _, pos in pickletools.genops(f):
            pass
        ends.append(f.tell())
    return ends


def legacy_file(obj):
    """torch.save's legacy format of obj, its storage keys (addresses, which
    differ from run to run) replaced by indices of the same length, so that
    one seed gives one file."""
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=False)
    data = buf.getvalue()
    ends = split_pickles(data, 5)
    keys = pickle.loads(data[ends[3]:ends[4]])
    head = data[:ends[4]]
    for n, k in enumerate(sorted(keys, key=len, reverse=True)):
        new = str(n).zfill(len(k))
        head = head.replace(unicode(k)[1:], unicode(new)[1:])
    return head + data[ends[4]:], ends


def make_legacy():
    """A legacy file, broken in one of its parts: the tree's pickle (as the
    zip format's is broken), the list of storage keys, a storage's element
    count, the bytes' end, or the protocol version."""
    pool = []
    data, ends = legacy_file(value(0, pool))
    r = rng.random()
    if r < 0.2:
        return data, "legacy, none"
    if r < 0.7:
        pkl, what = mutate_pickle(data[ends[2]:ends[3]])
        return data[:ends[2]] + pkl + data[ends[3]:], "legacy, " + what
    keys = pickle.loads(data[ends[3]:ends[4]])
    m = rng.randrange(5)
    if m == 0 and keys:
        k = rng.randrange(len(keys))
        new = keys[:k] + keys[k + 1:] if rng.random() < 0.5 else keys + [keys[k]]
        return data[:ends[3]] + pickle.dumps(new, protocol=2) + data[ends[4]:], "legacy, key list changed"
    if m == 1 and len(data) > ends[4] + 8:
        count = struct.unpack("<q", data[ends[4]:ends[4] + 8])[0]
        new = rng.choice([count + 1, count - 1, -1, 2**62, 0])
        return data[:ends[4]] + struct.pack("<q", new) + data[ends[4] + 8:], "legacy, first count %d -> %d" % (count, new)
    if m == 2 and len(data) > ends[4]:
        cut = rng.randrange(ends[4], len(data))
        return data[:cut], "legacy, cut at %d of %d" % (cut, len(data))
    if m == 3:
        return data + b"\0" * rng.choice([1, 8]), "legacy, bytes after"
    return data[:ends[0]] + pickle.dumps(1000, protocol=2) + data[ends[1]:], "legacy, protocol 1000"


def make(i):
    if rng.random() < 0.25:
        return make_legacy()
    pool = []
    obj = value(0, pool)
    buf = io.BytesIO()
    torch.save(obj, buf)
    z = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    records = [(n, z.read(n)) for n in z.namelist()]
    r = rng.random()
    what = "none"
    if r < 0.2:
        return buf.getvalue(), what
    pkl_at = next(k for k, (n, _) in enumerate(records) if n.endswith("/data.pkl"))
    data = [k for k, (n, _) in enumerate(records) if "/data/" in n]
    if r < 0.85 or not data:
        pkl, what = mutate_pickle(records[pkl_at][1])
        records[pkl_at] = (records[pkl_at][0], pkl)
    else:
        k = rng.choice(data)
        name, body = records[k]
        m = rng.randrange(4)
        if m == 0:
            records[k], what = (name, body[:-1 - rng.randrange(len(body))] if body else b""), "record shortened"
        elif m == 1:
            records[k], what = (name, body + b"\0" * rng.choice([1, 2, 8])), "record lengthened"
        elif m == 2:
            del records[k]
            what = "record dropped"
        elif BYTEORDER:
            prefix = records[pkl_at][0].rsplit("/", 1)[0]
            records = [(n, d) for n, d in records if not n.endswith("/byteorder")] + [(prefix + "/byteorder", b"big")]
            what = "byteorder big"
        else:
            records[k], what = (name, body + b"\0"), "record lengthened"
    return rezip(records), what


# PyTorch 1.x ignores the byteorder record; tstor reads it, as PyTorch 2 does.
BYTEORDER = int(torch.__version__.split(".")[0]) >= 2


class StorageClass:
    """A storage class as the pickle names it: the class for persistent ids,
    and a note when the pickle calls it (torch.load builds a storage of its
    own then, which tstor refuses: storages come from records only)."""

    def __init__(self, refs, cls):
        self.refs, self.dtype = refs, getattr(cls, "dtype", torch.uint8)

    def __call__(self, *args):
        self.refs.called = True


class FirstReferences(pickle.Unpickler):
    """Each storage key's first (dtype, numel), as torch.load takes them."""

    def __init__(self, f):
        super().__init__(f)
        self.first = {}
        self.negative = self.called = False

    def persistent_load(self, pid):
        key, cls, numel = pid[2], pid[1], pid[4]
        if key not in self.first:
            self.first[key] = (getattr(cls, "dtype", torch.uint8), numel)
        return None

    def find_class(self, mod, name):
        if name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return self.rebuild
        if name.endswith("Storage"):
            return StorageClass(self, super().find_class(mod, name))
        if name.startswith("_rebuild"):
            return lambda *a: None
        return super().find_class(mod, name)

    def rebuild(self, storage, offset, size, stride, *rest):
        if any(isinstance(x, int) and x < 0 for x in tuple(size) + tuple(stride)):
            self.negative = True


def beyond_tstor(path, obj):
    """Why a file torch.load read must still be refused by tstor, or None:
    torch.load read past a record (its storage is larger than the bytes
    behind it), or the tree holds what tstor's model excludes by design (an
    int past 64 bits; a negative size or stride, which tensor.h rules out; a
    class or function as a value)."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b"PK"):
        return beyond_tstor_legacy(data, obj)
    z = zipfile.ZipFile(path)
    names = z.namelist()
    pkl_name = next(n for n in names if n.endswith("/data.pkl"))
    prefix = pkl_name.rsplit("/", 1)[0]
    refs = FirstReferences(io.BytesIO(z.read(pkl_name)))
    try:
        refs.load()
    except Exception:  # noqa: BLE001 -- torch.load read it; this pass only needs the ids
        pass
    if refs.negative:  # torch.load may rewrite such a stride; tstor refuses it
        return "a negative size or stride in a tensor's arguments"
    if refs.called:
        return "a storage class called"
    if any(op.name == "LONG1" and not -2**63 <= arg < 2**63 for op, arg, _ in pickletools.genops(z.read(pkl_name))):
        return "an int past 64 bits in the pickle (tstor's ints are 64-bit, used or not)"
    for key, (dtype, numel) in refs.first.items():
        rec = "%s/data/%s" % (prefix, key)
        if rec in names and numel * torch.empty(0, dtype=dtype).element_size() > z.getinfo(rec).file_size:
            return "torch.load reads past record %s" % rec
    return beyond_tree(obj)


def beyond_tree(obj):
    """What tstor's values and tensors exclude by design, in a loaded tree:
    besides the above, a container that contains itself, which a broken memo
    index makes and torch.load builds (tstor refuses it)."""
    bad = []
    path = set()  # the containers being walked: one met again is a cycle

    def walk(v):
        if isinstance(v, bool) or v is None or isinstance(v, (str, float)):
            return
        if isinstance(v, (dict, list, tuple)):
            if id(v) in path:
                bad.append("a container that contains itself")
                return
            path.add(id(v))
            try:
                walk_container(v)
            finally:
                path.discard(id(v))
            return
        walk_leaf(v)

    def walk_container(v):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        else:
            for x in v:
                walk(x)

    def walk_leaf(v):
        if isinstance(v, int):
            if not -2**63 <= v < 2**63:
                bad.append("an int past 64 bits")
        elif isinstance(v, torch.Tensor):
            if any(x < 0 for x in v.shape) or any(x < 0 for x in v.stride()):
                bad.append("a negative size or stride")
        elif isinstance(v, torch.storage.TypedStorage):
            pass  # a storage value
        else:  # a class or a function the pickle left as a value
            bad.append("a %s as a value" % type(v).__name__)
    walk(obj)
    return bad[0] if bad else None


def beyond_tstor_legacy(data, obj):
    """beyond_tstor for the legacy format: what torch.load reads and tstor
    refuses there (a storage the tree names whose bytes the file does not
    give, read by torch.load as uninitialized memory; a key listed twice, whose
    bytes torch.load reads twice over), then the same checks on the tree."""
    ends = split_pickles(data, 5)
    refs = FirstReferences(io.BytesIO(data[ends[2]:ends[3]]))
    try:
        refs.load()
    except Exception:  # noqa: BLE001 -- torch.load read it; this pass only needs the ids
        pass
    keys = pickle.loads(data[ends[3]:ends[4]])
    if len(set(keys)) != len(keys):
        return "a storage key listed twice"
    if set(refs.first) - set(keys):
        return "a storage the tree names has no bytes in the file"
    if refs.negative:
        return "a negative size or stride in a tensor's arguments"
    if refs.called:
        return "a storage class called"
    if any(op.name == "LONG1" and not -2**63 <= arg < 2**63 for op, arg, _ in
           pickletools.genops(data[ends[2]:ends[3]])):
        return "an int past 64 bits in the pickle (tstor's ints are 64-bit, used or not)"
    return beyond_tree(obj)


REFUSED = object()


def expectation(path):
    """What torch.load makes of the file at path, as expect.txt lines (None:
    not comparable, the file removed)."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 -- any refusal is a refusal
        return ["refused"]
    why = beyond_tstor(path, obj)
    try:
        return ["# loaded by torch.load, refused by tstor: " + why, "refused"] if why else describe(obj)
    except RuntimeError as e:
        # PyTorch 1.13 loads a stride in the range it keeps for symbolic
        # sizes, then fails on it when read: nothing to compare against
        if "is_symbolic" not in str(e):
            raise
        return None


def judge():
    """expect_torch2.txt: the files of expect.txt, judged by this torch."""
    lines = ["# PyTorch %s; torch.load(map_location='cpu', weights_only=True) of the files of expect.txt" %
             torch.__version__]
    name = None
    for line in open(os.path.join(out, "expect.txt")):
        line = line.rstrip("\n")
        if line.startswith("file "):
            name = line[5:]
            lines.append(line)
        elif line.startswith("# mutation ") and name:
            lines.append(line)
            got = expectation(os.path.join(out, name))
            lines.extend(got if got is not None else ["# torch cannot read what it loaded", "refused"])
            name = None
    with open(os.path.join(out, "expect_torch2.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if JUDGE:
    judge()
    sys.exit(0)
expect = ["# PyTorch %s; torch.load(map_location='cpu', weights_only=True) of each file, seed %d" %
          (torch.__version__, seed)]
for i in range(count):
    name = "diff_%05d.pt" % i
    body, what = make(i)
    path = os.path.join(out, name)
    with open(path, "wb") as f:
        f.write(body)
    lines = expectation(path)
    if lines is None:
        os.remove(path)
        expect.append("# %s (mutation %s) not compared: PyTorch cannot read what it loaded" % (name, what))
        continue
    expect.append("file " + name)
    expect.append("# mutation " + what)
    expect.extend(lines)
with open(os.path.join(out, "expect.txt"), "w") as f:
    f.write("\n".join(expect) + "\n")
