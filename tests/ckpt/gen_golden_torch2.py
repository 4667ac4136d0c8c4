#!/usr/bin/python3
"""Golden checkpoints of PyTorch 2.x, written by torch 2.x itself (the pyref
environment's), beside gen_golden.py's files of Debian's 1.13.

    gen_golden_torch2.py OUTDIR

writes OUTDIR/golden_torch2/*.pt with OUTDIR/golden_torch2.txt, what
torch.load(weights_only=True) reads from each of them, in gen_golden.py's
listing (describe.py), and OUTDIR/hostile_torch2/*.pt with
OUTDIR/hostile_torch2.txt, files torch 2.x refuses with weights_only=True and
the error tstor must give for each (FILE CODE WORDS, as hostile.txt).

The files hold what only 2.x writes: the dtypes without a storage class of
their own (uint16/32/64, the float8 formats, float8_e8m0fnu,
float4_e2m1fn_x2, complex32, 2.15's bcomplex32, the bits types), which torch.save pickles as
torch._utils._rebuild_tensor_v3 over a torch.storage.UntypedStorage; and the
other values 2.x's weights_only loader builds: a Parameter with attributes
(_rebuild_parameter_with_state), torch.Size, torch.device,
collections.Counter, set, bytes, bytearray and complex.

Everything is deterministic: the same torch writes the same bytes.
"""
import collections
import io
import os
import struct
import sys
import zipfile

# a set of strings is pickled in the order of their hashes, which Python
# randomizes per process unless told
if os.environ.get("PYTHONHASHSEED") != "0":
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, PYTHONHASHSEED="0"))

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from describe import describe, dname, fnv  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
GOLD = os.path.join(OUT, "golden_torch2")
HOST = os.path.join(OUT, "hostile_torch2")
os.makedirs(GOLD, exist_ok=True)
os.makedirs(HOST, exist_ok=True)

golden = []
hostile = []


def case(name, obj):
    path = os.path.join(GOLD, name + ".pt")
    torch.save(obj, path)
    back = torch.load(path, weights_only=True)
    golden.append("file %s.pt" % name)
    golden.extend(describe(back))


gen = torch.Generator().manual_seed(2015)


def raw(n):
    """n random bytes, as a uint8 tensor."""
    return torch.randint(0, 256, (n,), generator=gen, dtype=torch.uint8)


NEW_FLOATS = [torch.float8_e5m2, torch.float8_e4m3fn, torch.float8_e5m2fnuz, torch.float8_e4m3fnuz,
              torch.float8_e8m0fnu]
NEW_INTS = [torch.uint16, torch.uint32, torch.uint64]
# bytes torch stores and views but has no arithmetic for
OPAQUE = [torch.float4_e2m1fn_x2, torch.bits1x8, torch.bits2x4, torch.bits4x2, torch.bits8, torch.bits16]


def values(dt, shape):
    n = 1
    for s in shape:
        n *= s
    if dt in NEW_FLOATS:
        # every byte pattern of the format turns up: NaNs, infinities,
        # subnormals and the largest finite values included
        return raw(n).view(dt).reshape(shape)
    if dt == torch.complex32:
        return torch.randn(n, 2, generator=gen).to(torch.float16).view(torch.complex32).reshape(shape)
    size = torch.empty(0, dtype=dt).element_size()
    return raw(n * size).view(dt).reshape(shape)


# 1. every dtype of 2.x that has no storage class, in several shapes
SHAPES = [(), (0,), (1,), (7,), (2, 3), (2, 3, 4)]
for dt in NEW_FLOATS + NEW_INTS + [torch.complex32] + OPAQUE:
    for shape in SHAPES:
        case("dtype_%s_%s" % (dname(dt), "x".join(map(str, shape)) or "scalar"), {"t": values(dt, shape)})

# 2. views of them: offsets and strides as the view left them, storages shared
for dt in NEW_FLOATS + NEW_INTS + [torch.complex32]:
    b = values(dt, (24,))
    case("view_%s" % dname(dt), collections.OrderedDict(
        [("base", b), ("t", b.view(4, 6).t()), ("slice", b[5:17]), ("step", b[1::3]),
         ("narrow2d", b.view(4, 6)[1:3, 2:5]), ("scalar", b[7])]))
for dt in OPAQUE:
    b = values(dt, (12,))
    case("view_%s" % dname(dt), {"base": b, "slice": b[3:9], "rows": b.view(3, 4)[1:]})

# 3. a state_dict of old and new dtypes together: _rebuild_tensor_v2 for the
# ones with a storage class, _v3 for the others, in one pickle
torch.manual_seed(15)
lin = torch.nn.Linear(4, 3)
sd = lin.state_dict()
sd["weight_fp8"] = lin.weight.detach().to(torch.float8_e4m3fn)
sd["scale"] = torch.tensor([2.0 ** -3]).to(torch.float8_e8m0fnu)
sd["ids"] = torch.arange(5, dtype=torch.int64).to(torch.uint32)
sd["packed"] = values(torch.float4_e2m1fn_x2, (3, 2))
case("state_dict_mixed", sd)


# 4. the other values torch 2.x's weights_only loader builds
p = torch.nn.Parameter(values(torch.float32, (2, 3)).float())
p.lr_scale = 0.5
p.tag = "attention.q"
p.shard = (0, 4)
p.extra = values(torch.int64, (2,))
q = torch.nn.Parameter(values(torch.float64, (3,)).double(), requires_grad=False)
q.frozen = True
case("parameter_with_state", {"p": p, "q": q, "plain": torch.nn.Parameter(values(torch.float32, (2,)).float())})
case("parameter_fp8_with_state", [torch.nn.Parameter(values(torch.float8_e4m3fn, (4,)), requires_grad=False)])
lin8 = torch.nn.Parameter(values(torch.float8_e4m3fn, (4,)), requires_grad=False)
lin8.scale = torch.tensor([0.25])
case("parameter_fp8_attrs", {"w": lin8})
t = values(torch.float32, (2, 3, 4)).float()
case("values_torch2", collections.OrderedDict([
    ("shape", t.shape), ("size0", torch.Size([])), ("t", t),
    ("cuda1", torch.device("cuda", 1)), ("cpu", torch.device("cpu")), ("meta", torch.device("meta")),
    ("cuda", torch.device("cuda")), ("cpu0", torch.device("cpu:0")),
    ("counter", collections.Counter({"a": 2, "b": -1, "c": 0})), ("counter0", collections.Counter()),
    ("set", {1, 2, "x", (1, 2), None, 2.5, False}), ("set0", set()),
    ("bytes", b"\x00\xff xyz\x80"), ("bytearray", bytearray(b"ab\xff\x00")), ("bytearray0", bytearray()),
    ("complex", 1 + 2j), ("complex_nan", complex(float("nan"), -0.0)),
    ("complex_big", complex(float("inf"), 5e-324)), ("complex0", 0j),
]))
shared = {3, 4}
case("values_shared", {"a": [shared, shared], b"key": bytearray(b"v"), "sizes": [torch.Size([1]), torch.Size([1])]})

# 5. torch 2.15's bcomplex32 (two bfloat16), from a random stream of its own
# so that the files above keep their bytes: every bit pattern of either part,
# NaNs and infinities included; its views; and beside bfloat16 and complex64
gen_before, gen = gen, torch.Generator().manual_seed(46)
BC = torch.bcomplex32
for shape in SHAPES:
    case("dtype_bcomplex32_%s" % ("x".join(map(str, shape)) or "scalar"), {"t": values(BC, shape)})
b = values(BC, (24,))
case("view_bcomplex32", collections.OrderedDict(
    [("base", b), ("t", b.view(4, 6).t()), ("slice", b[5:17]), ("step", b[1::3]),
     ("narrow2d", b.view(4, 6)[1:3, 2:5]), ("scalar", b[7])]))
w = torch.randn(3, 4, generator=gen)
case("state_dict_bcomplex32", collections.OrderedDict(
    [("w", w), ("w_bf16", w.to(torch.bfloat16)), ("w_bc32", torch.complex(w, -w).to(BC)),
     ("w_c64", torch.complex(w, w))]))
gen = gen_before


def crafted(name, pkl, records=()):
    """A file written by hand (what pickle writes, but no torch.save call
    makes), with its records, which torch 2.x reads: it goes into the golden
    list."""
    path = os.path.join(GOLD, name + ".pt")
    with open(path, "wb") as f:
        f.write(zipped([("data.pkl", pkl)] + list(records) + [("version", b"3\n")], align=True))
    golden.append("file %s.pt" % name)
    golden.extend(describe(torch.load(path, weights_only=True)))


# ----------------------------------------------------------------- hostile
FIXED = (1980, 1, 1, 0, 0, 0)


def refused(name, data, code, needle):
    """A file torch 2.x's torch.load(weights_only=True) refuses, and what tstor
    must answer."""
    path = os.path.join(HOST, name + ".pt")
    with open(path, "wb") as f:
        f.write(data)
    try:
        torch.load(path, weights_only=True)
    except Exception:  # noqa: BLE001 -- any refusal is a refusal
        pass
    else:
        raise AssertionError("torch %s loads %s" % (torch.__version__, name))
    hostile.append("%s.pt %s %s" % (name, code, needle))


def beyond(name, data, code, needle):
    """A file torch 2.x reads and tstor refuses by design (docs/formats.md
    lists each), and what tstor must answer."""
    path = os.path.join(HOST, name + ".pt")
    with open(path, "wb") as f:
        f.write(data)
    torch.load(path, weights_only=True)
    hostile.append("%s.pt %s %s" % (name, code, needle))


def zipped(records, align=False):
    """A zip of records under archive/; align: each data/ record's bytes at a
    multiple of 64, as torch.save places them (padded by an extra field)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for rec, data in records:
            zi = zipfile.ZipInfo("archive/" + rec, date_time=FIXED)
            if align and rec.startswith("data/"):
                pad = -(buf.tell() + 30 + len(zi.filename) + 4) % 64
                zi.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
            z.writestr(zi, data)
    return buf.getvalue()


def s(x):  # BINUNICODE
    b = x.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def v3_pickle(dtype="float8_e4m3fn", numel=4, size=4):
    """{'w': _rebuild_tensor_v3(('storage', UntypedStorage, '0', 'cpu', numel), 0, (size,), (1,),
    False, OrderedDict(), torch.DTYPE)}, as torch 2.x pickles it."""
    return (b"\x80\x02}" + s("w") + b"ctorch._utils\n_rebuild_tensor_v3\n((" + s("storage") +
            b"ctorch.storage\nUntypedStorage\n" + s("0") + s("cpu") + b"J" + struct.pack("<i", numel) +
            b"tQK\x00J" + struct.pack("<i", size) + b"\x85K\x01\x85\x89ccollections\nOrderedDict\n)R" +
            b"ctorch\n" + dtype.encode() + b"\ntRs.")


# set([1, 1.0, True, 'a', 'a']): equal items once, the first kept, as Python's set
crafted("set_equal_items", b"\x80\x02c__builtin__\nset\n](K\x01G" + struct.pack(">d", 1.0) + b"\x88" + s("a") +
        s("a") + b"e\x85R.")
# Counter(dict) with SETITEM onto the Counter itself afterwards
crafted("counter_setitem", b"\x80\x02ccollections\nCounter\n}" + s("a") + b"K\x01s\x85R" + s("b") + b"K\x02s.")
# torch.device('cuda:3') as one string; torch.Size from a list
crafted("device_string", b"\x80\x02(ctorch\ndevice\n" + s("cuda:3") + b"\x85Rctorch\nSize\n](K\x02K\x03e\x85Rt.")
# Counter and set of any iterable, and REDUCE's arguments as a list or a dict:
# Python's func(*args) and the constructors take each apart
crafted("iterables", b"\x80\x02(ccollections\nCounter\n" + s("abca") + b"\x85R" +
        b"ccollections\nCounter\n](K\x01K\x01K\x02\x88e\x85R" +
        b"ccollections\nCounter\n" + s("h\u00e9\u00e9") + b"\x85R" +
        b"c__builtin__\nset\n" + s("aba") + b"\x85R" +
        b"c__builtin__\nset\n}(" + s("x") + b"K\x01" + s("y") + b"K\x02u\x85R" +
        b"c__builtin__\ncomplex\n](K\x01K\x02eR" +
        b"ccollections\nCounter\n}" + s("q") + b"K\x05sR" +
        b"ccollections\nCounter\n" + s("z") + b"Rt.")
# complex from ints and a bool
crafted("complex_ints", b"\x80\x02c__builtin__\ncomplex\nK\x03\x88\x86R.")

# a v3 tensor that reaches past its untyped storage's bytes
refused("v3_past_storage", zipped([("data.pkl", v3_pickle("uint16", 4, 4)), ("data/0", b"\0" * 4),
                                   ("version", b"3\n")]),
        "TSTOR_ERANGE", "a uint16 tensor on storage '0' (4 uint8 elements) does not fit it")
# a v3 tensor that requires grad, as torch.save writes a float8 tensor cast
# from one that does: torch.load cannot rebuild it (set_ on a leaf that
# requires grad), so the whole file is refused
buf = io.BytesIO()
torch.save({"w": values(torch.float32, (4,)).requires_grad_().to(torch.float8_e5m2)}, buf)
refused("v3_requires_grad", buf.getvalue(), "TSTOR_EINVAL", "_rebuild_tensor_v3 with requires_grad=True")
# v3's dtype argument must be a dtype
refused("v3_dtype_not_dtype", zipped([("data.pkl", v3_pickle("FloatStorage")), ("data/0", b"\0" * 4),
                                      ("version", b"3\n")]),
        "TSTOR_EINVAL", "_rebuild_tensor_v3's dtype must be a torch dtype")

# a TorchScript archive (torch.jit.save): code torch.jit.load runs, the path
# of CVE-2025-32434; refused under weights_only whatever else it holds
buf = io.BytesIO()
torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), buf)
refused("torchscript", buf.getvalue(), "TSTOR_EACCES", "a TorchScript archive (torch.jit.save")
# SETITEM on a list: items are set on dicts only
refused("setitem_on_list", zipped([("data.pkl", b"\x80\x02]K\x00K\x01s."), ("version", b"3\n")]),
        "TSTOR_EINVAL", "SETITEM(S) on a list, not a dict")
# a storage declared larger than its record, v3's untyped one and a typed one
# (CVE-2026-24747)
refused("storage_past_record_v3", zipped([("data.pkl", v3_pickle("uint8", 1 << 20, 4)), ("data/0", b"\0" * 4),
                                          ("version", b"3\n")]),
        "TSTOR_ERANGE", "a storage declared larger than its record, which old torch.load read past (CVE-2026-24747)")

# values torch 2.x refuses, and tstor with it
refused("empty_bytes", zipped([("data.pkl", b"\x80\x02c__builtin__\nbytes\n)R."), ("version", b"3\n")]),
        "TSTOR_EACCES", "global '__builtin__.bytes' is refused")
refused("device_unknown", zipped([("data.pkl", b"\x80\x02ctorch\ndevice\n" + s("gpu") + b"\x85R."),
                                  ("version", b"3\n")]),
        "TSTOR_EINVAL", "torch.device('gpu'): not a device type PyTorch knows")
refused("device_index_twice", zipped([("data.pkl", b"\x80\x02ctorch\ndevice\n" + s("cuda:1") + b"K\x01\x86R."),
                                      ("version", b"3\n")]),
        "TSTOR_EINVAL", "must not include an index")
refused("size_of_floats", zipped([("data.pkl", b"\x80\x02ctorch\nSize\n(G" + struct.pack(">d", 1.5) + b"t\x85R."),
                                  ("version", b"3\n")]),
        "TSTOR_EINVAL", "torch.Size takes ints, not float")
refused("set_of_lists", zipped([("data.pkl", b"\x80\x02c__builtin__\nset\n]]a\x85R."), ("version", b"3\n")]),
        "TSTOR_EINVAL", "unhashable type")
refused("encode_wide", zipped([("data.pkl", b"\x80\x02c_codecs\nencode\n" + s("\u20ac") + s("latin1") + b"\x86R."),
                               ("version", b"3\n")]),
        "TSTOR_EINVAL", "'latin-1' codec can't encode")
refused("parameter_state_int_name", zipped([("data.pkl", b"\x80\x02ctorch._utils\n_rebuild_parameter_with_state\n(" +
                                            v3_pickle()[3 + 6:-2] + b"\x89N}K\x01K\x02stR."),
                                           ("data/0", b"\0" * 4), ("version", b"3\n")]),
        "TSTOR_EINVAL", "a tensor's attribute names must be strings")



def v2_args(cls="FloatStorage", numel=4, size=4, hooks=b"ccollections\nOrderedDict\n)R", metadata=None):
    """The arguments of _rebuild_tensor_v2, pickled one after the other: ('storage', torch.CLS, '0',
    'cpu', numel), 0, (size,), (1,), False, hooks[, metadata], metadata a pickled value or None for the
    6-argument form."""
    return (b"(" + s("storage") + b"ctorch\n" + cls.encode() + b"\n" + s("0") + s("cpu") + b"J" +
            struct.pack("<i", numel) + b"tQK\x00J" + struct.pack("<i", size) + b"\x85K\x01\x85\x89" + hooks +
            (metadata or b""))


def v2_pickle(*a, **k):
    """_rebuild_tensor_v2(v2_args(...))"""
    return b"ctorch._utils\n_rebuild_tensor_v2\n(" + v2_args(*a, **k) + b"tR"


def dict_of(items):
    return b"\x80\x02}(" + b"".join(s(k) + v for k, v in items) + b"u."


record16 = [("data/0", struct.pack("<4f", 1.5, -2.0, 0.25, 3.0))]
# the metadata argument torch 2.x's _rebuild_tensor_v2 takes: nothing when
# false, else a dict of str to bool whose other keys than conj and neg it
# ignores; and the hooks, which it assigns whatever they are (here the class
# OrderedDict, where a REDUCE was deleted)
crafted("metadata_ignored", dict_of([(k, v2_pickle(metadata=m)) for k, m in [
    ("tuple", b")"), ("list", b"]"), ("dict", b"}"), ("none", b"N"), ("zero", b"K\x00"), ("false", b"\x89"),
    ("float_zero", b"G" + struct.pack(">d", 0.0)), ("str", s("")), ("other_key", b"}" + s("a") + b"G" +
                                                                      struct.pack(">d", 1.5) + b"s"),
    ("other_key_none", b"}" + s("b") + b"Ns")]] +
    [("hooks_class", v2_pickle(hooks=b"ccollections\nOrderedDict\n", metadata=b")"))]), record16)
# one storage named as float32, int32 and float64 over its 16 bytes: each
# tensor views the bytes as its own class's dtype (1.13 gave each the first)
crafted("storage_three_dtypes", dict_of([("f", v2_pickle()), ("i", v2_pickle("IntStorage")),
                                         ("d", v2_pickle("DoubleStorage", 2, 2))]), record16)
# (which torch.save then refuses to write, and tstor's writer with it)
try:
    torch.save(torch.load(os.path.join(GOLD, "storage_three_dtypes.pt"), weights_only=True), io.BytesIO())
except RuntimeError:
    pass
else:
    raise AssertionError("torch %s saves one storage as three dtypes" % torch.__version__)
for name, md, code, needle in [
        ("metadata_true", b"\x88", "TSTOR_EINVAL", "expected dict, got bool"),
        ("metadata_tuple", b"K\x01\x85", "TSTOR_EINVAL", "expected dict, got tuple"),
        ("metadata_int_key", b"}K\x01\x88s", "TSTOR_EINVAL", "must have str keys"),
        ("metadata_str_value", b"}" + s("neg") + s("yes") + b"s", "TSTOR_EINVAL", "must be a bool, not a str"),
        ("metadata_conj_float", b"}" + s("conj") + b"\x88s", "TSTOR_EINVAL", "only complex tensors have a conjugate")]:
    refused(name, zipped([("data.pkl", dict_of([("w", v2_pickle(metadata=md))]))] + record16 +
                         [("version", b"3\n")]), code, needle)
# a key named again with another class and byte size
refused("key_other_size", zipped([("data.pkl", dict_of([("f", v2_pickle()), ("h", v2_pickle("HalfStorage", 4, 4))]))] +
                                 record16 + [("version", b"3\n")]),
        "TSTOR_EINVAL", "one record cannot hold both")
# a conjugate and a negative view, as torch.save writes them: torch.load
# gives tensors whose bits say their values are not their bytes
for name, t in [("conj_view", torch.complex(values(torch.float32, (3,)), values(torch.float32, (3,))).conj()),
                ("neg_view", torch._neg_view(values(torch.float32, (3,)))),
                ("neg_conj_view", torch._neg_view(torch.complex(values(torch.float64, (2,)),
                                                                values(torch.float64, (2,))).conj()))]:
    buf = io.BytesIO()
    torch.save({"t": t}, buf)
    beyond(name, buf.getvalue(), "TSTOR_ENOTSUP", "tstor keeps no")

# tensors with Python attributes, which torch.save writes as
# _rebuild_from_type_v2(func, torch.Tensor, args, state): an nn.Buffer, a
# tensor given attributes, one that views another's storage, a float8 one
# (_rebuild_tensor_v3 inside) and a meta one
base = values(torch.float32, (3, 4))
tagged, view = base.clone(), base[1]
tagged.note, tagged.scale = "calibrated", 0.5
view.row = 1
f8 = values(torch.float32, (5,)).to(torch.float8_e4m3fn)
f8.fmt = "e4m3"
meta = torch.empty(2, 3, device="meta")
meta.kind = ("shape", 2)
case("tensor_attributes", {"buffer": torch.nn.Buffer(values(torch.float64, (4,))), "tagged": tagged,
                           "base": base, "view": view, "f8": f8, "meta": meta})
# the same call made by hand: a Parameter made from a plain tensor, state as
# (dict, slots) and as None


def from_type_pickle(cls, state):
    """_rebuild_from_type_v2(_rebuild_tensor_v2, CLS, (v2_args()), state), cls and state pickled."""
    return (b"ctorch._tensor\n_rebuild_from_type_v2\n(ctorch._utils\n_rebuild_tensor_v2\n" + cls + b"(" +
            v2_args() + b"t" + state + b"tR")


crafted("from_type_by_hand", dict_of([
    ("param", from_type_pickle(b"ctorch.nn.parameter\nParameter\n",
                               b"(}" + s("a") + b"K\x01s}" + s("b") + b"K\x02st")),
    ("plain", from_type_pickle(b"ctorch\nTensor\n", b"N"))]), record16)
for name, cls, state, code, needle in [
        ("from_type_state_triple", b"ctorch\nTensor\n", b"(K\x01K\x02K\x03t", "TSTOR_EINVAL", "not (dict, slots)"),
        ("from_type_state_list", b"ctorch\nTensor\n", b"]K\x01a", "TSTOR_EINVAL", "must be a dict, None or (dict, slots)"),
        ("from_type_float_tensor", b"ctorch\nFloatTensor\n", b"N", "TSTOR_EACCES",
         "global 'torch.FloatTensor' is refused"),
        ("from_type_storage_class", b"ctorch\nFloatStorage\n", b"N", "TSTOR_EINVAL",
         "makes a torch.Tensor or torch.nn.parameter.Parameter")]:
    refused(name, zipped([("data.pkl", dict_of([("w", from_type_pickle(cls, state))]))] + record16 +
                         [("version", b"3\n")]), code, needle)
refused("from_type_not_a_tensor", zipped([("data.pkl", dict_of([("w", b"ctorch._tensor\n_rebuild_from_type_v2\n("
                                                                   b"ccollections\nOrderedDict\nctorch\nTensor\n)NtR")]))] +
                                         [("version", b"3\n")]),
        "TSTOR_EINVAL", "built a dict, not a tensor")

# quantized tensors (_rebuild_qtensor): per tensor, per channel along either
# axis, float_qparams, qint32, a view and a transpose of one
xq = values(torch.float32, (4, 3))
qt = torch.quantize_per_tensor(xq, 0.05, 7, torch.qint8)
case("quantized", {
    "per_tensor": qt, "row": qt[1:], "t": qt.t(),
    "quint8": torch.quantize_per_tensor(xq, 0.1, 128, torch.quint8),
    "qint32": torch.quantize_per_tensor(xq, 0.001, -5, torch.qint32),
    "per_channel": torch.quantize_per_channel(xq, torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.double),
                                              torch.tensor([0, 1, -2, 3]), 0, torch.qint8),
    "axis1": torch.quantize_per_channel(xq, torch.tensor([0.5, 0.25, 0.125], dtype=torch.double),
                                        torch.tensor([10, 20, 30]), 1, torch.quint8),
    "float_qparams": torch.quantize_per_channel(xq, torch.tensor([0.1, 0.2, 0.3, 0.4]),
                                                torch.tensor([0.5, 1.0, 2.0, 3.0]), 0, torch.quint8)})

# quantized tensors over every 8-bit code and 32-bit ones to the extremes,
# per tensor and per channel, and what torch's dequantize() makes of each:
# quantized_values.txt holds the fnv of its float32 bytes
g8 = torch.Generator().manual_seed(88)


def scales_of(n):
    return torch.rand(n, generator=g8, dtype=torch.float64) * 10.0 ** torch.randint(-9, 5, (n,), generator=g8)


i8 = torch.arange(-128, 128, dtype=torch.int8).repeat(8).reshape(32, 64)
u8 = torch.arange(0, 256, dtype=torch.int32).to(torch.uint8).repeat(8).reshape(32, 64)
i32 = torch.cat([torch.tensor([2 ** 31 - 1, -2 ** 31, 2 ** 31 - 2, -2 ** 31 + 1, 0, 16777217, -16777217], dtype=torch.int32),
                 torch.randint(-2 ** 31, 2 ** 31 - 1, (2041,), generator=g8, dtype=torch.int64).to(torch.int32)]).reshape(32, 64)
qv = {}
for name, codes, lo, hi in [("qint8", i8, -128, 128), ("quint8", u8, 0, 256), ("qint32", i32, -1000, 1000)]:
    for k, s_ in enumerate(scales_of(3).tolist()):
        zp = int(torch.randint(lo, hi, (1,), generator=g8))
        qv["%s_tensor_%d" % (name, k)] = torch._make_per_tensor_quantized_tensor(codes, s_, zp)
    qv["%s_tensor_wraps" % name] = torch._make_per_tensor_quantized_tensor(codes, 0.5, -7 if name == "qint32" else 3)
    for axis in (0, 1):
        n = codes.shape[axis]
        zps = torch.randint(lo if name != "qint32" else -100, hi if name != "qint32" else 100, (n,), generator=g8)
        qv["%s_channel_%d" % (name, axis)] = torch._make_per_channel_quantized_tensor(codes, scales_of(n), zps, axis)
    if name != "qint32":
        qv["%s_float_qparams" % name] = torch._make_per_channel_quantized_tensor(
            codes, scales_of(32).float(), (torch.rand(32, generator=g8) * 300 - 50).float(), 0)
qv["view_t"] = qv["qint8_tensor_0"].t()
qv["view_rows"] = qv["quint8_channel_1"][3:9]
qv["view_cols"] = qv["qint32_channel_0"][:, 5:40:3]
path = os.path.join(GOLD, "quantized_values.pt")
torch.save(qv, path)
with open(os.path.join(OUT, "quantized_values.txt"), "w") as f:
    f.write("# PyTorch %s; NAME fnv of torch.load(quantized_values.pt)[NAME].dequantize()'s bytes\n"
            % torch.__version__)
    for k, v in torch.load(path, weights_only=True).items():
        f.write("%s %s\n" % (k, fnv(v.dequantize().contiguous().view(torch.uint8).numpy().tobytes())))
golden.append("file quantized_values.pt")
golden.extend(describe(torch.load(path, weights_only=True)))


def qtensor_pickle(cls="QInt8Storage", numel=4, size=4, params=b"ctorch\nper_tensor_affine\nG" +
                   struct.pack(">d", 0.5) + b"K\x03\x87", grad=b"\x89"):
    """{'w': _rebuild_qtensor(('storage', torch.CLS, '0', 'cpu', numel), 0, (size,), (1,), params,
    requires_grad, OrderedDict())}"""
    return dict_of([("w", b"ctorch._utils\n_rebuild_qtensor\n((" + s("storage") + b"ctorch\n" + cls.encode() +
                     b"\n" + s("0") + s("cpu") + b"J" + struct.pack("<i", numel) + b"tQK\x00J" +
                     struct.pack("<i", size) + b"\x85K\x01\x85" + params + grad +
                     b"ccollections\nOrderedDict\n)RtR")])


# per channel with lists, as _rebuild_qtensor also takes them
crafted("quantized_lists", qtensor_pickle(params=b"(ctorch\nper_channel_affine\n](G" + struct.pack(">d", 0.5) +
                                          b"K\x02e](K\x01K\x02eK\x00t", numel=2, size=2),
        [("data/0", bytes([5, 250]))])
for name, pkl, code, needle in [
        ("qtensor_float_storage", qtensor_pickle(cls="FloatStorage"), "TSTOR_EINVAL", "requires quantized dtype"),
        ("qtensor_symmetric", qtensor_pickle(params=b"ctorch\nper_tensor_symmetric\nG" + struct.pack(">d", 0.5) +
                                             b"K\x03\x87"), "TSTOR_EINVAL", "qscheme torch.per_tensor_symmetric"),
        ("qtensor_axis", qtensor_pickle(params=b"(ctorch\nper_channel_affine\n](G" + struct.pack(">d", 0.5) +
                                        b"e](K\x01eK\x01t"), "TSTOR_EINVAL", "axis 1 out of range"),
        ("qtensor_scales_length", qtensor_pickle(params=b"(ctorch\nper_channel_affine\n](G" +
                                                 struct.pack(">d", 0.5) + b"e](K\x01eK\x00t"),
         "TSTOR_EINVAL", "scales number 1, not size[axis] = 4"),
        ("qtensor_requires_grad", qtensor_pickle(grad=b"\x88"), "TSTOR_EINVAL", "only tensors of floating point"),
        ("qtensor_params_short", qtensor_pickle(params=b"ctorch\nper_tensor_affine\nG" + struct.pack(">d", 0.5) +
                                                b"\x86"), "TSTOR_EINVAL", "(qscheme, scale, zero_point)")]:
    refused(name, zipped([("data.pkl", pkl), ("data/0", bytes(4)), ("version", b"3\n")]), code, needle)
# packed sub-byte codes, which torch reads and tstor does not
buf = io.BytesIO()
torch.save({"t": torch.quantize_per_channel(xq, torch.tensor([0.1, 0.2, 0.3, 0.4]), torch.tensor([0., 1., 2., 3.]), 0,
                                            torch.quint4x2)}, buf)
beyond("quint4x2", buf.getvalue(), "TSTOR_ENOTSUP", "packed sub-byte codes")
# sparse tensors, which torch reads and tstor does not
for name, t in [("sparse_coo", values(torch.float32, (4, 3)).to_sparse()),
                ("sparse_csr", values(torch.float32, (4, 3)).to_sparse_csr())]:
    buf = io.BytesIO()
    torch.save({"t": t}, buf)
    beyond(name, buf.getvalue(), "TSTOR_ENOTSUP", "a sparse tensor")

with open(os.path.join(OUT, "hostile_torch2.txt"), "w") as f:
    f.write("# PyTorch %s; FILE  expected error  words of its message\n" % torch.__version__)
    f.write("\n".join(hostile) + "\n")
with open(os.path.join(OUT, "golden_torch2.txt"), "w") as f:
    f.write("# PyTorch %s; torch.load(weights_only=True) of each golden_torch2/*.pt\n" % torch.__version__)
    f.write("\n".join(golden) + "\n")
