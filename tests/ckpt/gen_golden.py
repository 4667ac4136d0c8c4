#!/usr/bin/python3
"""Golden checkpoints for tstor's torch.save reader, written by PyTorch itself.

    gen_golden.py OUTDIR

writes OUTDIR/golden/*.pt (torch.save files: dtypes, shapes, views, sharing,
nesting, scalars, state_dicts, random trees) with OUTDIR/golden.txt, what
torch.load reads from each of them, and OUTDIR/hostile/*.pt, files that lie or
smuggle code, with OUTDIR/hostile.txt, the error tstor must give for each.

golden.txt lists each file's tree depth-first, one value a line, as
test_ckpt_golden.c prints what tstor loaded:

    file NAME
    PATH KIND DETAIL

PATH is $ for the root, then [i] for a tuple or list item, [KEY] for a dict
entry (s:HEX for a string key, i:N for an int, b:0/1, n, f:BITS), and @ for an
OrderedDict's attributes. A float is the 16 hex digits of its IEEE bits, a
string the hex of its UTF-8 bytes (- when empty). A tensor line gives dtype,
sizes, strides, storage offset, which storage (numbered by first appearance in
this listing, so two tensors sharing one show the same number), the storage's
bytes, requires_grad and the FNV-1a 64 hash of its elements' bytes in logical
(row-major) order.

Everything is deterministic: the same torch writes the same bytes.
"""
import collections
import io
import os
import random
import struct
import sys
import zipfile
import zlib

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else "."
GOLD = os.path.join(OUT, "golden")
HOST = os.path.join(OUT, "hostile")
os.makedirs(GOLD, exist_ok=True)
os.makedirs(HOST, exist_ok=True)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool,
          torch.complex64, torch.complex128]


from describe import describe, dname  # noqa: E402


golden = []


objs = {}


def case(name, obj, legacy=False):
    objs[name] = obj
    path = os.path.join(GOLD, name + ".pt")
    torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
    back = torch.load(path)
    golden.append("file %s.pt" % name)
    golden.extend(describe(back))


gen = torch.Generator().manual_seed(1234)


def values(dt, shape):
    n = 1
    for s in shape:
        n *= s
    if dt == torch.bool:
        return (torch.randint(0, 2, (n,), generator=gen) == 1).reshape(shape)
    if dt.is_complex:
        re = torch.randn(n, generator=gen, dtype=torch.float64)
        im = torch.randn(n, generator=gen, dtype=torch.float64)
        return torch.complex(re, im).to(dt).reshape(shape)
    if dt.is_floating_point:
        return (torch.randn(n, generator=gen, dtype=torch.float64) * 100).to(dt).reshape(shape)
    info = torch.iinfo(dt)
    return torch.randint(max(info.min, -2**31), min(info.max, 2**31 - 1) + 1, (n,), generator=gen,
                         dtype=torch.int64).to(dt).reshape(shape)


# 1. every dtype in every shape
SHAPES = [(), (0,), (1,), (7,), (2, 3), (3, 0, 2), (2, 3, 4), (1, 1, 1, 1), (2, 1, 3, 1, 2)]
for dt in DTYPES:
    for shape in SHAPES:
        case("dtype_%s_%s" % (dname(dt), "x".join(map(str, shape)) or "scalar"),
             {"t": values(dt, shape)})

# 2. views: offsets and strides as the view left them (torch.save keeps them)
VIEWS = {
    "transpose": lambda b: b.view(4, 6).t(),
    "slice": lambda b: b[5:17],
    "step": lambda b: b[1::3],
    "narrow2d": lambda b: b.view(4, 6)[1:3, 2:5],
    "diagonal": lambda b: b.view(4, 6)[:, :4].diagonal(),
    "permute": lambda b: b.view(2, 3, 4).permute(2, 0, 1),
    "expand": lambda b: b[3:4].expand(5),
    "expand2d": lambda b: b[:6].view(1, 6).expand(3, 6),
    "channels_last": lambda b: b.view(1, 2, 3, 4).contiguous(memory_format=torch.channels_last),
    "last": lambda b: b[23:],
    "empty_at_end": lambda b: b[24:],
    "scalar_view": lambda b: b[7],
    "unfold": lambda b: b.unfold(0, 4, 2),
}
for dt in [torch.float32, torch.int64, torch.float16, torch.bool, torch.complex128]:
    for vname, fn in VIEWS.items():
        case("view_%s_%s" % (vname, dname(dt)), {"v": fn(values(dt, (24,)))})

# 3. sharing: one storage, many tensors, in every container
for dt in [torch.float32, torch.int32, torch.bfloat16]:
    base = values(dt, (30,))
    case("share_dict_%s" % dname(dt), collections.OrderedDict(
        [("base", base), ("a", base[2:8]), ("b", base.view(5, 6)), ("c", base.view(6, 5).t()),
         ("d", base[::7]), ("again", base)]))
    case("share_list_%s" % dname(dt), [base[:10], base[10:], base, [base[5:6], (base[0],)]])
    other = values(dt, (4,))
    case("share_two_%s" % dname(dt), {"x": [base[:3], other, base[3:]], "y": (other[1:], base)})
x = values(torch.float32, (6,))
case("share_same_object", {"p": x, "q": x, "r": [x, x]})

# 4. scalars, strings, containers, nesting
case("scalars", [None, True, False, 0, 1, -1, 255, 256, 65535, 65536, -2**31, 2**31 - 1, 2**31,
                 2**63 - 1, -2**63, 12345678901234])
case("floats", [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), float("nan"), 1e308, 5e-324,
                3.141592653589793])
case("strings", ["", "a", "data.pkl", "ünïcødé", "日本語", "emoji \U0001F600", "nul\x00inside",
                 "x" * 300, "tab\tnewline\n"])
case("empties", {"l": [], "t": (), "d": {}, "od": collections.OrderedDict(), "s": ""})
case("keys", {1: "one", -5: "minus five", "s": 2, True: "true", None: "none", 2.5: "float"})
case("tuples", (1, (2, (3, (4,))), (), ("a", None)))
deep = "leaf"
for i in range(100):
    deep = [deep] if i % 2 else {"k%d" % i: deep}
case("deep_100", deep)
deep = torch.arange(3.)
for i in range(200):
    deep = (deep,)
case("deep_tensor_200", deep)
case("wide", {("k%04d" % i): i for i in range(2000)})
case("many_tensors", {("w%03d" % i): values(torch.float32, (i % 5, 3)) for i in range(300)})

# 5. modules: state_dicts with _metadata, parameters, buffers, optimizer-like state
torch.manual_seed(7)
mods = {
    "linear": torch.nn.Linear(4, 3),
    "mlp": torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)),
    "conv_bn": torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)),
    "embedding": torch.nn.Embedding(10, 4),
    "lstm": torch.nn.LSTM(3, 5, num_layers=2),
    "layernorm": torch.nn.LayerNorm([2, 3]),
}
for name, m in mods.items():
    case("module_%s" % name, m.state_dict())
    case("params_%s" % name, dict(m.named_parameters()))
lin = mods["linear"]
case("checkpoint_nested", {"epoch": 3, "model": lin.state_dict(), "lr": [0.1, 0.01],
                           "history": [{"step": i, "w": lin.weight[i]} for i in range(3)],
                           "name": "linear", "done": False})
p = torch.nn.Parameter(values(torch.float32, (2, 2)))
case("parameter_bare", p)
case("requires_grad", {"a": values(torch.float32, (3,)).requires_grad_(),
                       "b": values(torch.float64, (2,))})
case("tensor_root", values(torch.int16, (3, 4)))

# 6. random trees
rng = random.Random(99)


def rand_value(depth, pool):
    r = rng.random()
    if depth > 4 or r < 0.35:
        k = rng.randrange(8)
        if k == 0:
            return None
        if k == 1:
            return rng.random() < 0.5
        if k == 2:
            return rng.randrange(-2**40, 2**40)
        if k == 3:
            return "s%d" % rng.randrange(1000)
        if k == 4 and pool:
            b = rng.choice(pool)
            n = b.numel()
            if n:
                start = rng.randrange(n)
                return b[start:start + rng.randrange(1, n - start + 1)]
            return b
        dt = rng.choice(DTYPES)
        t = values(dt, tuple(rng.randrange(0, 4) for _ in range(rng.randrange(0, 3))))
        pool.append(t.reshape(-1) if t.is_contiguous() else t)
        return t
    n = rng.randrange(0, 5)
    k = rng.randrange(3)
    if k == 0:
        return [rand_value(depth + 1, pool) for _ in range(n)]
    if k == 1:
        return tuple(rand_value(depth + 1, pool) for _ in range(n))
    d = collections.OrderedDict() if rng.random() < 0.5 else {}
    for i in range(n):
        d[rng.choice(["k%d" % i, i])] = rand_value(depth + 1, pool)
    return d


for i in range(60):
    case("random_%02d" % i, rand_value(0, []))

# 7. storages saved as themselves (shared with the tensors that view them),
# meta tensors (no bytes in the file), and an empty storage viewed as two
# dtypes, which PyTorch saves (its one-dtype check skips unallocated storages)
# and loads with the first dtype
t = values(torch.float32, (6,))
case("storages", [t, t.storage(), t[2:].storage(), values(torch.int16, (3,)).storage()])
case("storage_root", values(torch.float64, (4,)).storage())
case("meta_tensors", {"m": torch.empty(3, 4, device="meta"), "t": torch.empty(2, 5, device="meta").t(),
                      "h": torch.empty(0, dtype=torch.float16, device="meta"),
                      "g": torch.empty(2, device="meta", requires_grad=True)})
e = torch.empty(0)
case("empty_two_dtypes", [e, e.view(torch.int32), e.storage()])

# 8. torch.save's legacy format (_use_new_zipfile_serialization=False, and every
# file before PyTorch 1.6) of cases above. Its storage keys are addresses, so
# these files differ from run to run; their listings do not.
for name in ["checkpoint_nested", "scalars", "strings", "empties", "keys", "share_dict_float32",
             "share_list_int32", "share_same_object", "module_conv_bn", "params_lstm", "parameter_bare",
             "requires_grad", "tensor_root", "deep_tensor_200", "many_tensors", "storages", "storage_root",
             "meta_tensors", "empty_two_dtypes", "random_00", "random_01", "random_02"] + \
        ["dtype_%s_2x3" % dname(dt) for dt in DTYPES] + ["view_%s_float32" % v for v in VIEWS]:
    case("legacy_" + name, objs[name], legacy=True)

with open(os.path.join(OUT, "golden.txt"), "w") as f:
    f.write("# PyTorch %s; torch.load of each golden/*.pt\n" % torch.__version__)
    f.write("\n".join(golden) + "\n")

# ----------------------------------------------------------------- hostile
hostile = []
FIXED = (1980, 1, 1, 0, 0, 0)


def zipped(name, records, compress=zipfile.ZIP_STORED, version=b"3\n"):
    """A zip of (record, bytes) pairs under the folder `name`, as torch.save lays it out,
    with the version record PyTorch requires unless the records hold one or version is None."""
    if version is not None and not any(rec == "version" for rec, _ in records):
        records = list(records) + [("version", version)]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for rec, data in records:
            zi = zipfile.ZipInfo("%s/%s" % (name, rec), date_time=FIXED)
            zi.compress_type = compress
            z.writestr(zi, data)
    return buf.getvalue()


def bad(name, data, code, needle):
    with open(os.path.join(HOST, name + ".pt"), "wb") as f:
        f.write(data)
    hostile.append("%s.pt %s %s" % (name, code, needle))


def shared_only(name, data):
    """A file PyTorch reads whose tree shares subtrees too often to list path
    by path: tstor must load it; test_ckpt_golden checks the sharing."""
    path = os.path.join(HOST, name + ".pt")
    with open(path, "wb") as f:
        f.write(data)
    torch.load(path, weights_only=True)
    hostile.append("%s.pt OK -" % name)


def good_variant(name, data, same_as=None, weights_only=False):
    """A file PyTorch reads too: it goes into the golden list as well. PyTorch
    1.13 ignores the byteorder record (2.x reads it), so a big-endian file is
    described by torch.load of the little-endian file it was made from."""
    path = os.path.join(HOST, name + ".pt")
    with open(path, "wb") as f:
        f.write(data)
    back = torch.load(io.BytesIO(same_as) if same_as else path, weights_only=weights_only)
    hostile.append("%s.pt OK -" % name)
    golden.append("file ../hostile/%s.pt" % name)
    golden.extend(describe(back))


PROTO = b"\x80\x02"


def s(x):  # BINUNICODE
    b = x.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def tensor_pickle(key="0", cls="FloatStorage", numel=4, offset=0, size=(4,), stride=(1,), loc="cpu"):
    def tup(xs):
        return b"(" + b"".join(b"J" + struct.pack("<i", x) if -2**31 <= x < 2**31 else
                               b"\x8a\x08" + struct.pack("<q", x) for x in xs) + b"t"
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" +
            b"(" + s("storage") + b"ctorch\n" + cls.encode() + b"\n" + s(key) + s(loc) +
            b"\x8a\x08" + struct.pack("<q", numel) + b"tQ" +
            b"\x8a\x08" + struct.pack("<q", offset) + tup(size) + tup(stride) +
            b"\x89ccollections\nOrderedDict\n)Rt" + b"R")


def one_tensor(pkl_tensor, data=b"\0" * 16, extra=()):
    return zipped("archive", [("data.pkl", PROTO + b"}" + s("w") + pkl_tensor + b"s."),
                              ("data/0", data)] + list(extra))


def two_folders():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for folder in ("a", "b"):
            z.writestr(zipfile.ZipInfo(folder + "/data.pkl", date_time=FIXED), PROTO + b"N.")
    return buf.getvalue()


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


class Evil2:
    def __reduce__(self):
        return (eval, ("1+1",))


buf = io.BytesIO()
torch.save({"x": Evil()}, buf)
bad("global_os_system", buf.getvalue(), "TSTOR_EACCES", "posix.system")
buf = io.BytesIO()
torch.save([Evil2()], buf)
bad("global_eval", buf.getvalue(), "TSTOR_EACCES", "__builtin__.eval")
bad("global_getattr", zipped("a", [("data.pkl", PROTO + b"c__builtin__\ngetattr\n.")]),
    "TSTOR_EACCES", "__builtin__.getattr")
bad("global_torch_load", zipped("a", [("data.pkl", PROTO + b"ctorch\nload\n" + s("x") + b"\x85R.")]),
    "TSTOR_EACCES", "torch.load")
bad("global_numpy", zipped("a", [("data.pkl", PROTO + b"cnumpy.core.multiarray\n_reconstruct\n.")]),
    "TSTOR_EACCES", "numpy.core.multiarray._reconstruct")
bad("stack_global", zipped("a", [("data.pkl", b"\x80\x04" + b"\x8c\x02os\x8c\x06system\x93.")]),
    "TSTOR_EACCES", "os.system")
bad("opcode_inst", zipped("a", [("data.pkl", PROTO + b"(ios\nsystem\n.")]), "TSTOR_EACCES", "opcode 0x69")
bad("opcode_binbytes", zipped("a", [("data.pkl", b"\x80\x03B\x01\x00\x00\x00x.")]), "TSTOR_EACCES",
    "opcode 0x42")
bad("opcode_int_text", zipped("a", [("data.pkl", PROTO + b"I1\n.")]), "TSTOR_EACCES", "opcode 0x49")
bad("call_storage_class", zipped("a", [("data.pkl", PROTO + b"ctorch\nFloatStorage\n)R.")]),
    "TSTOR_EACCES", "storage class cannot be called")
bad("persid_not_storage", zipped("a", [("data.pkl", PROTO + b"(" + s("module") + s("x") + s("y") +
                                        s("z") + b"K\x01tQ.")]), "TSTOR_EACCES", "persistent ids of storages")
bad("build_on_list", zipped("a", [("data.pkl", PROTO + b"]}b.")]), "TSTOR_EINVAL", "BUILD")
bad("no_stop", zipped("a", [("data.pkl", PROTO + b"}")]), "TSTOR_EINVAL", "without STOP")
bad("truncated_opcode", zipped("a", [("data.pkl", PROTO + b"X\xff\x00")]), "TSTOR_EINVAL", "ends inside")
bad("string_past_end", zipped("a", [("data.pkl", PROTO + b"X\xff\xff\xff\x7fabc.")]), "TSTOR_EINVAL",
    "ends inside")
bad("bad_utf8", zipped("a", [("data.pkl", PROTO + b"X\x02\x00\x00\x00\xc3\x28.")]), "TSTOR_EINVAL",
    "not UTF-8")
bad("empty_stack_pop", zipped("a", [("data.pkl", PROTO + b"a.")]), "TSTOR_EINVAL", "stack is empty")
bad("mark_underflow", zipped("a", [("data.pkl", PROTO + b"N(a.")]), "TSTOR_EINVAL", "stack is empty")
bad("no_mark", zipped("a", [("data.pkl", PROTO + b"t.")]), "TSTOR_EINVAL", "no MARK")
# what Python's unpickler allows and torch.load therefore reads: STOP takes the
# top value whatever lies under it or a MARK left open, and the memo is a dict
# (any index, in any order)
good_variant("stop_two_values", zipped("a", [("data.pkl", PROTO + b"K\x01K\x02."), ("version", b"3\n")]))
good_variant("stop_with_mark_open", zipped("a", [("data.pkl", PROTO + b"(K\x03."), ("version", b"3\n")]))
# (weights_only: CPython's C unpickler keeps its memo in an array and runs out
# of memory on this index; the weights_only unpickler, whose rules tstor's
# follow, keeps a dict)
good_variant("memo_huge_index", zipped("a", [("data.pkl", PROTO + b"K\x07r\xf0\xff\xff\xffj\xf0\xff\xff\xff\x86."),
                                            ("version", b"3\n")]), weights_only=True)
bad("memo_unset", zipped("a", [("data.pkl", PROTO + b"h\x05.")]), "TSTOR_EINVAL", "never stored")
bad("self_loop", zipped("a", [("data.pkl", PROTO + b"]q\x00h\x00a.")]), "TSTOR_EINVAL", "contains itself")
bad("dict_loop", zipped("a", [("data.pkl", PROTO + b"}q\x00" + s("k") + b"]q\x01h\x00as.")]),
    "TSTOR_EINVAL", "contains itself")
bad("deep_nesting", zipped("a", [("data.pkl", PROTO + b"]" * 600 + b"a" * 599 + b".")]),
    "TSTOR_EINVAL", "deeper than 512")
# a tuple of the tuple before it twice, 60 deep: 2^60 paths over 61 values,
# which torch.load reads (its memo shares them) and so must tstor, in linear
# time; the golden listing, which walks paths, leaves it out
shared_only("exponential_dag", zipped("a", [("data.pkl", PROTO + b"N" + b"q\x00h\x00\x86" * 60 + b".")]))
# decompression bombs: data.pkl deflated from a file thousands of times smaller
# (refused before it is inflated), and one just small enough to inflate whose
# opcodes would each build a value (refused by the one-value-per-file-byte bound)
bad("pickle_bomb", zipped("a", [("data.pkl", PROTO + b"]" * (16 << 20) + b".")], zipfile.ZIP_DEFLATED),
    "TSTOR_ERANGE", "larger than the")
bad("pickle_values_past_budget", zipped("a", [("data.pkl", PROTO + b"]" * 10000 + b"."), ("pad", random.Random(1).randbytes(1000))],
                                         zipfile.ZIP_DEFLATED), "TSTOR_ERANGE", "one per byte of the file")
bad("long_int_9_bytes", zipped("a", [("data.pkl", PROTO + b"\x8a\x09" + b"\x01" * 9 + b".")]),
    "TSTOR_ERANGE", "does not fit in 64 bits")
bad("protocol_0", zipped("a", [("data.pkl", b"\x80\x00N.")]), "TSTOR_EINVAL", "protocol 0")
# dict keys as Python hashes them: equal tuples are one key; a list is no key
good_variant("dict_tuple_keys", zipped("a", [("data.pkl", PROTO + b"}(K\x01K\x02\x86" + s("a") + b"K\x01K\x02\x86" + s("b")
                                              + b"K\x03\x85" + s("c") + b"u."), ("version", b"3\n")]), weights_only=True)
good_variant("dict_tensor_key", zipped("archive", [("data.pkl", PROTO + b"}" + tensor_pickle() + b"K\x01s."),
                                                  ("data/0", bytes(range(16)))]), weights_only=True)
bad("dict_list_key", zipped("a", [("data.pkl", PROTO + b"}]K\x01s."), ("version", b"3\n")]), "TSTOR_EINVAL",
    "dict key")
# the format version PyTorch requires: present, a number, 1 to 10
bad("no_version", zipped("a", [("data.pkl", PROTO + b"N.")], version=None), "TSTOR_EINVAL", "no record 'a/version'")
bad("version_not_a_number", zipped("a", [("data.pkl", PROTO + b"N.")], version=b"three"), "TSTOR_EINVAL",
    "holds no number")
bad("version_too_new", zipped("a", [("data.pkl", PROTO + b"N.")], version=b"11\n"), "TSTOR_EINVAL",
    "format version 11")
bad("version_negative", zipped("a", [("data.pkl", PROTO + b"N.")], version=b"-3"), "TSTOR_EINVAL",
    "format version 18446744073709551613")
good_variant("version_padded", zipped("a", [("data.pkl", PROTO + b"K\x05.")], version=b" \t+10 and more"),
             weights_only=True)
# a 64-bit int written in more bytes than it needs (the extra ones repeat the sign)
good_variant("long_int_sign_padded", zipped("a", [("data.pkl", PROTO + b"(\x8a\x09" + (-2**63).to_bytes(9, "little", signed=True)
                                                   + b"\x8a\x0a" + (5).to_bytes(10, "little", signed=True) + b"t."),
                                                  ("version", b"3\n")]), weights_only=True)
# sizes whose product passes 2^63 before a zero: no elements, as PyTorch counts in 64 unsigned bits
good_variant("zero_size_after_huge_sizes", one_tensor(tensor_pickle(numel=0, size=(2, 2**63 - 1, 0), stride=(0, 0, 1)),
                                                      data=b"", extra=[("version", b"3\n")]), weights_only=True)
bad("setitems_odd", zipped("a", [("data.pkl", PROTO + b"}(NNNu.")]), "TSTOR_EINVAL", "odd number")
bad("reduce_non_tuple", zipped("a", [("data.pkl", PROTO + b"ccollections\nOrderedDict\nNR.")]),
    "TSTOR_EINVAL", "must be a tuple")
# OrderedDict(items), as Python 2's pickle wrote every OrderedDict (its
# __reduce__ gave ([[key, value], ...],)), which the weights_only loader
# calls: a repeated key keeps its first place and its last value
od_items = b"](" + b"".join(b"](" + s(k) + b"K" + bytes([v]) + b"e" for k, v in [("b", 2), ("a", 1), ("b", 3)]) + b"e"
good_variant("ordereddict_items", zipped("a", [("data.pkl", PROTO + b"ccollections\nOrderedDict\n" + od_items + b"\x85R."),
                                              ("version", b"3\n")]), weights_only=True)
bad("ordereddict_not_pairs", zipped("a", [("data.pkl", PROTO + b"ccollections\nOrderedDict\n]K\x01a\x85R.")]),
    "TSTOR_EINVAL", "OrderedDict's item 0 is no (key, value) pair")
bad("dict_key_list", zipped("a", [("data.pkl", PROTO + b"}]Ns.")]), "TSTOR_EINVAL", "dict key that is a list")

bad("record_too_short", one_tensor(tensor_pickle(numel=8)), "TSTOR_ERANGE", "holds 16 bytes")
bad("record_missing", zipped("archive", [("data.pkl", PROTO + b"}" + s("w") + tensor_pickle() + b"s.")]),
    "TSTOR_EINVAL", "no record 'archive/data/0'")
bad("offset_past_record", one_tensor(tensor_pickle(offset=3, size=(2,))), "TSTOR_ERANGE", "storage '0'")
bad("stride_past_record", one_tensor(tensor_pickle(size=(2,), stride=(5,))), "TSTOR_ERANGE", "storage '0'")
bad("size_overflow", one_tensor(tensor_pickle(size=(2**62, 2**62), stride=(1, 1))), "TSTOR_EOVERFLOW",
    "storage '0'")
bad("numel_overflow", one_tensor(tensor_pickle(numel=2**62)), "TSTOR_EOVERFLOW", "overflows")
bad("negative_numel", one_tensor(tensor_pickle(numel=-4)), "TSTOR_EINVAL", "non-negative")
bad("negative_size", one_tensor(tensor_pickle(size=(-1,))), "TSTOR_EINVAL", "non-negative")
bad("negative_offset", one_tensor(tensor_pickle(offset=-1)), "TSTOR_EINVAL", "non-negative")
bad("size_stride_mismatch", one_tensor(tensor_pickle(size=(2, 2), stride=(1,))), "TSTOR_EINVAL",
    "2 sizes and 1 strides")
# strides written past the sizes' room (a heap overflow once)
bad("stride_longer_than_size", one_tensor(tensor_pickle(size=(2,), stride=(1,) * 40)), "TSTOR_EINVAL",
    "1 sizes and 40 strides")
bad("too_many_dims", one_tensor(tensor_pickle(size=(1,) * 65, stride=(1,) * 65)), "TSTOR_EINVAL",
    "65 dimensions")
bad("unknown_storage_class", one_tensor(tensor_pickle(cls="FancyStorage")), "TSTOR_EACCES",
    "torch.FancyStorage")
bad("key_with_slash", one_tensor(tensor_pickle(key="../0")), "TSTOR_EINVAL", "not a record name")
# a key named again with another class and size: torch.load of 1.13 keeps the
# first (both tensors float32); 2.x reads the record again as the second size,
# which its size check refuses, and tstor follows 2.x
bad("key_two_dtypes", zipped("archive", [("data.pkl", PROTO + b"(" + tensor_pickle() +
                                          tensor_pickle(cls="IntStorage", numel=99) + b"t."),
                                         ("data/0", bytes(range(16))), ("version", b"3\n")]),
    "TSTOR_EINVAL", "one record cannot hold both")
# a record longer than its storage: torch.load of 1.13 reads its first bytes,
# 2.x refuses it, and tstor follows 2.x
bad("record_longer_than_storage", one_tensor(tensor_pickle(), data=bytes(range(20)), extra=[("version", b"3\n")]),
    "TSTOR_ERANGE", "refuses a record of another size than its storage")
bad("unknown_device", one_tensor(tensor_pickle(loc="tpu:3")), "TSTOR_ENODEV", "tpu:3")
# a location that is no string: torch.load reads it only under a map_location
bad("location_not_string", one_tensor(tensor_pickle().replace(s("cpu"), b"N"), extra=[("version", b"3\n")]),
    "TSTOR_EINVAL", "names no location")
bad("no_data_pkl", zipped("archive", [("data/0", b"\0" * 16)]), "TSTOR_EINVAL", "no FOLDER/data.pkl")
bad("two_data_pkl", two_folders(), "TSTOR_EINVAL", "two data.pkl")
bad("byteorder_bad", one_tensor(tensor_pickle(), extra=[("byteorder", b"middle")]), "TSTOR_EINVAL",
    "not 'little' or 'big'")
bad("not_a_zip", b"this is not a zip file at all" * 10, "TSTOR_EINVAL", "not a torch.save zip archive")
# the legacy format's opening (its magic number, protocol version and system
# info pickles); a whole legacy file names storages by address, so it would
# differ from run to run
import pickle  # noqa: E402
legacy = (pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2) + pickle.dumps(1001, protocol=2) +
          pickle.dumps({"protocol_version": 1001, "little_endian": True}, protocol=2))
bad("legacy_format", legacy, "TSTOR_EINVAL", "torch.save legacy file offset 76: the pickle ends without STOP")
buf = io.BytesIO()
torch.save({"x": torch.arange(40.), "y": [1, 2, 3]}, buf)
full = buf.getvalue()
for cut in [len(full) // 4, len(full) // 2, len(full) - 30, len(full) - 1]:
    bad("truncated_%d" % cut, full[:cut], "TSTOR_EINVAL", "truncated: it opens as a zip archive")
# a central directory whose offset points past the end
eocd = full.rfind(b"PK\x05\x06")
e64 = full.rfind(b"PK\x06\x06")
lie = bytearray(full)
lie[eocd + 16:eocd + 20] = struct.pack("<I", len(full) + 100)
lie[e64 + 48:e64 + 56] = struct.pack("<Q", len(full) + 100)
bad("cd_offset_past_end", bytes(lie), "TSTOR_EINVAL", "not a torch.save zip archive")
# a record's data changed after its CRC was written
pos = full.find(b"data/0") + 6
body = bytearray(full)
idx = full.find(b"\x00\x00\x80\x3f")  # 1.0 in the storage
body[idx + 3] ^= 0x40
bad("crc_mismatch", bytes(body), "TSTOR_EINVAL", "CRC")

# files PyTorch reads that take tstor's other paths: compressed records (read,
# not mapped), a big-endian file (byteswapped), records at unaligned offsets
src = {"w": values(torch.float32, (3, 4)), "i": values(torch.int64, (5,)),
       "h": values(torch.float16, (7,)), "c": values(torch.complex128, (2,))}
src["view"] = src["w"][1:, 2:]
buf = io.BytesIO()
torch.save(src, buf)
plain = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
recs = [(n.split("/", 1)[1], plain.read(n)) for n in plain.namelist()]
good_variant("deflated", zipped("archive", recs, zipfile.ZIP_DEFLATED))
good_variant("unaligned", zipped("archive", recs))
# an old release's _rebuild_tensor_v2 with None for its backward hooks, which
# torch.load reads, weights_only too
good_variant("rebuild_v2_none_hooks",
             one_tensor(tensor_pickle().replace(b"ccollections\nOrderedDict\n)R", b"N"),
                        data=struct.pack("<4f", 1, 2, 3, 4)), weights_only=True)


def legacy_tensor(cls, key, numel, view, size):
    """A legacy-format tensor over ('storage', cls, key, 'cpu', numel, view)."""
    vm = b"N" if view is None else (b"(" + s(view[0]) + b"J" + struct.pack("<i", view[1]) +
                                    b"J" + struct.pack("<i", view[2]) + b"t")
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + b"(" + s("storage") + b"ctorch\n" +
            cls.encode() + b"\n" + s(key) + s("cpu") + b"J" + struct.pack("<i", numel) + vm + b"tQ" +
            b"K\x00(J" + struct.pack("<i", size) + b"t(K\x01t\x89ccollections\nOrderedDict\n)RtR")


def legacy_file(tree, storages):
    """torch.save's legacy layout: the magic, protocol and system info pickles,
    the tree, the list of keys, then each storage's count and bytes."""
    info = {"protocol_version": 1001, "little_endian": True,
            "type_sizes": {"short": 2, "int": 4, "long": 4}}
    out = (pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2) + pickle.dumps(1001, protocol=2) +
           pickle.dumps(info, protocol=2) + tree + pickle.dumps([k for k, _, _ in storages], protocol=2))
    for key, numel, data in storages:
        out += struct.pack("<q", numel) + data
    return out


# a view whose id names its root with another storage class: as _legacy_load
# reads it, the view is of its own class (float64 over the root's float32
# bytes), offset and size counted in its elements
good_variant("legacy_view_other_class", legacy_file(
    PROTO + b"}(" + s("f") + legacy_tensor("FloatStorage", "0", 4, None, 4) +
    s("d") + legacy_tensor("DoubleStorage", "0", 2, ("1", 1, 1), 1) + b"u.",
    [("0", 4, struct.pack("<4f", 2.0, 4.0, 0.5, 1.5))]))

# a key named again with another class and byte size: 1.13 gives the ids the
# first class's storage; 2.x gives them a fresh empty storage of their own
# class (and slices of it), so only empty tensors fit; tstor follows 2.x
good_variant("legacy_key_other_size", legacy_file(
    PROTO + b"}(" + s("f") + legacy_tensor("FloatStorage", "0", 4, None, 4) +
    s("e") + legacy_tensor("ShortStorage", "0", 3, None, 0) +
    s("v") + legacy_tensor("ShortStorage", "0", 3, ("1", 1, 2), 0) + b"u.",
    [("0", 4, struct.pack("<4f", 2.0, 4.0, 0.5, 1.5))]))
# the same with elements on the empty storage, which 2.x grows to fit them
# (bytes no file gave) and tstor refuses
bad("legacy_key_other_size_elements", legacy_file(
    PROTO + b"}(" + s("f") + legacy_tensor("FloatStorage", "0", 4, None, 4) +
    s("e") + legacy_tensor("ShortStorage", "0", 3, None, 3) + b"u.",
    [("0", 4, struct.pack("<4f", 2.0, 4.0, 0.5, 1.5))]), "TSTOR_ERANGE", "'0/int16/1'")


def unicode_path(raw, shown):
    """Info-ZIP's Unicode Path extra field: readers that apply it (libzip by
    default) see `shown` where the header says `raw`; torch.load reads raw."""
    body = b"\x01" + struct.pack("<I", zlib.crc32(raw.encode())) + shown.encode()
    return struct.pack("<HH", 0x7075, len(body)) + body


# two storages whose records claim each other's names in that field
ubuf = io.BytesIO()
with zipfile.ZipFile(ubuf, "w") as z:
    for rec, data in [(r, d) for r, d in recs]:
        zi = zipfile.ZipInfo("archive/" + rec, date_time=FIXED)
        if rec in ("data/0", "data/1"):
            zi.extra = unicode_path("archive/" + rec, "archive/data/" + ("1" if rec == "data/0" else "0"))
        z.writestr(zi, data)
good_variant("unicode_path_swaps_records", ubuf.getvalue())
storage_dtype = {}
# which record holds which dtype: read it from the pickle's persistent ids
import pickle  # noqa: E402


class PidReader(pickle.Unpickler):
    def persistent_load(self, pid):
        storage_dtype[pid[2]] = pid[1]
        return torch.UntypedStorage(0) if hasattr(torch, "UntypedStorage") else None

    def find_class(self, mod, name):
        if name == "_rebuild_tensor_v2":
            return lambda *a: None
        return super().find_class(mod, name)


PidReader(io.BytesIO(dict(recs)["data.pkl"])).load()
swapped = []
for rec, data in recs:
    if rec.startswith("data/"):
        cls = storage_dtype[rec[5:]]
        esize = {"FloatStorage": 4, "LongStorage": 8, "HalfStorage": 2, "ComplexDoubleStorage": 8}[cls.__name__]
        data = b"".join(data[i:i + esize][::-1] for i in range(0, len(data), esize))
    swapped.append((rec, data))
good_variant("big_endian", zipped("archive", swapped + [("byteorder", b"big")]), buf.getvalue())



def zip_by_hand(entries):
    """A stored zip of (name, local header offset or None, bytes): None puts the
    record after the previous one; an offset points its central directory
    entry anywhere, such as inside another record's bytes."""
    out, cd, placed = b"", b"", []
    for name, at, data in entries:
        nb, crc = name.encode(), zlib.crc32(data)
        local = struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 0, 0, 0x21, crc, len(data), len(data),
                            len(nb), 0) + nb
        if at is None:
            at = len(out)
            out += local + data
        placed.append((nb, at, crc, len(data)))
    for nb, at, crc, n in placed:
        cd += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 20, 20, 0, 0, 0, 0x21, crc, n, n, len(nb),
                          0, 0, 0, 0, 0, at) + nb
    eocd = struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, len(placed), len(placed), len(cd), len(out), 0)
    return out + cd + eocd


# a record whose bytes lie inside another's: two storages over one memory
# (torch.load reads the two as independent storages)
inner_name, inner = "archive/data/1", b"\x07" * 16
inner_local = struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 0, 0, 0x21, zlib.crc32(inner), 16, 16,
                          len(inner_name), 0) + inner_name.encode() + inner
two = (PROTO + b"}(" + s("a") + tensor_pickle(cls="ByteStorage", numel=len(inner_local),
                                               size=(len(inner_local),)) +
       s("b") + tensor_pickle(key="1", cls="ByteStorage", numel=16, size=(16,)) + b"u.")
pkl_local = 30 + len("archive/data.pkl") + len(two)
bad("records_overlap", zip_by_hand([("archive/data.pkl", None, two), ("archive/data/0", None, inner_local),
                                    ("archive/version", None, b"3\n"),
                                    (inner_name, pkl_local + 30 + len("archive/data/0"), inner)]),
    "TSTOR_EINVAL", "overlap in the archive")

# MEMOIZE stores at len(memo), which a repeated BINPUT leaves as it was:
# "c" is the tensor "b" is, not a missing or another memo entry
memo_pkl = (b"\x80\x04}(" + s("a") + tensor_pickle() + b"q\x00q\x00" +
            s("b") + tensor_pickle(key="1") + b"\x94" + s("c") + b"h\x01u.")
good_variant("memo_after_repeated_binput",
             zipped("archive", [("data.pkl", memo_pkl), ("data/0", struct.pack("<4f", 1, 2, 3, 4)),
                                ("data/1", struct.pack("<4f", 5, 6, 7, 8)), ("version", b"3\n")]))

# two records of one name: torch.load 1.13 takes the second; libzip refuses
# the archive when opening it (and tstor's own index would)
dup_pkl = PROTO + b"}" + s("w") + tensor_pickle() + b"s."
bad("record_twice", zip_by_hand([("archive/data.pkl", None, dup_pkl), ("archive/data/0", None, b"\0" * 16),
                                 ("archive/data/0", None, b"\1" * 16), ("archive/version", None, b"3\n")]),
    "TSTOR_EINVAL", "not a torch.save zip archive")

# numbers that are one key in Python: {1: "c", -0.0: "e"}
num_keys = (b"\x80\x02}(K\x01" + s("a") + b"G" + struct.pack(">d", 1.0) + s("b") + b"\x88" + s("c") +
            b"G" + struct.pack(">d", -0.0) + s("d") + b"K\x00" + s("e") + b"u.")
good_variant("dict_numeric_keys", zipped("archive", [("data.pkl", num_keys), ("version", b"3\n")]))

with open(os.path.join(OUT, "hostile.txt"), "w") as f:
    f.write("# PyTorch %s; FILE  expected error  words of its message\n" % torch.__version__)
    f.write("\n".join(hostile) + "\n")
with open(os.path.join(OUT, "golden.txt"), "w") as f:
    f.write("# PyTorch %s; torch.load of each golden/*.pt\n" % torch.__version__)
    f.write("\n".join(golden) + "\n")
