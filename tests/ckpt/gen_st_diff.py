#!/usr/bin/env python3
"""safetensors files for the differential test: valid-looking files with one
field broken (or none), each read by the safetensors package itself (its
Rust reader, safetensors.deserialize, and safe_open for the metadata);
test_ckpt_diff must agree with it on every file.

    gen_st_diff.py OUTDIR COUNT SEED

writes OUTDIR/st_NNNNN.safetensors and OUTDIR/expect.txt: "file NAME", "#
mutation ...", then "refused", or the tensors and metadata as sorted lines
("t s:NAMEHEX DTYPE sizes=A,B fnv=HASH", "m s:KEYHEX s:VALUEHEX", the
format's dtype names and shapes). The model of the reference reader
(st_reference.py) stays for what the package cannot say: where the package
reads a file that tstor refuses by design (a name twice, a NUL in a
string, ...: the model's notes), the expectation is "refused" with the
reason as a comment. Where the model and the package disagree, the package
is followed and the disagreement listed as a comment ("# model: ...") and
counted on stderr. Exits 77 where this python has no safetensors package.
"""
import os
import random
import sys

try:
    import safetensors
    from safetensors import deserialize, safe_open
except ImportError:
    print("gen_st_diff.py: no safetensors package for %s" % sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from describe import fnv  # noqa: E402
from st_reference import BITS, Refused, read  # noqa: E402

out, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
SUPPORTED = sorted(d for d in BITS if BITS[d] % 8 == 0)
OTHERS = sorted(d for d in BITS if BITS[d] % 8)  # several to a byte
NAMES = ["w", "layer.0.weight", "b", "emb", "x.y", "\u00e9t\u00e9", "a/b", "", "n\\u0041me", "t\\u00e9"]


def js(s):
    """A JSON string of s, non-ASCII left raw (UTF-8), escapes in s kept."""
    return '"' + s.replace('"', '\\"') + '"'


class File:
    def __init__(self):
        self.tensors = []  # [name, dtype, shape, begin, end]
        self.metadata = None
        self.extra = {}  # index -> extra fields text
        self.ws = ""
        at = 0
        names = rng.sample(NAMES, rng.randint(0, 4))
        for name in names:
            dtype = rng.choice(SUPPORTED)
            shape = [rng.choice([0, 1, 1, 2, 3, 4]) for _ in range(rng.randint(0, 3))]
            n = BITS[dtype] // 8
            for s in shape:
                n *= s
            self.tensors.append([name, dtype, shape, at, at + n])
            at += n
        self.data_len = at
        if rng.random() < 0.4:
            self.metadata = {"format": "pt"} if rng.random() < 0.5 else {"k": "v", "\u00fc": "x\\n"}
        rng.shuffle(self.tensors)  # the header's order need not be the data's

    def entry(self, t, i):
        name, dtype, shape, b, e = t
        sp = self.ws
        fields = ['"dtype":%s%s' % (sp, dtype if dtype.startswith(("{", "[", "1")) or dtype == "null" else js(dtype)),
                  '"shape":%s[%s]' % (sp, ",".join(str(x) for x in shape)),
                  '"data_offsets":%s[%s,%s]' % (sp, b, e)]
        if i in self.extra:
            fields.append(self.extra[i])
        return js(name) + ":" + sp + "{" + ("," + sp).join(fields) + "}"

    def header(self):
        parts = []
        if self.metadata is not None:
            parts.append('"__metadata__":' + (self.metadata if isinstance(self.metadata, str) else
                                              "{" + ",".join("%s:%s" % (js(k), js(v)) for k, v in
                                                             self.metadata.items()) + "}"))
        parts += [self.entry(t, i) for i, t in enumerate(self.tensors)]
        return "{" + ",".join(parts) + "}"


def build():
    f = File()
    kinds = ["none", "none", "lead", "trail", "length", "dtype", "shape", "offsets", "fields", "entry", "twice",
             "metadata", "root", "data", "names", "numbers", "depth", "others", "zero", "ws"]
    kind = rng.choice(kinds)
    what = kind
    t = rng.choice(f.tensors) if f.tensors else None
    i = f.tensors.index(t) if t else 0
    pre, post, hlen_delta, data_delta, header = "", "", 0, 0, None
    if kind == "lead":
        pre = rng.choice([" ", "\n\t", "\r\n ", "\ufeff", "x", "\0"])
        what += " %r" % pre
    elif kind == "trail":
        post = rng.choice([" " * rng.randint(1, 7), "\n", "x", "\0", "}", " ,"])
        what += " %r" % post
    elif kind == "length":
        hlen_delta = rng.choice([-3, -1, 1, 2, 9, 100_000_001, 2**64 - 20])
        what += " %d" % hlen_delta
    elif kind == "dtype" and t:
        t[1] = rng.choice(["F31", "f32", "", "FLOAT", "C128", '{"F32":null}', '{"%s":null}' % t[1], "1",
                           "null", '["F32"]', t[1] + " "])
        what += " %r" % t[1]
    elif kind == "shape" and t:
        bad = rng.choice(["-1", "-0", "1.0", "2e0", "18446744073709551616", "9223372036854775808", '"2"', "null",
                          "[1]", "extra", "drop", "zero", "order"])
        what += " " + bad
        if bad == "extra":
            t[2] = t[2] + [2]
        elif bad == "drop" and t[2]:
            t[2] = t[2][:-1]
        elif bad == "zero":
            t[2] = t[2] + [0]
        elif bad == "order":
            t[2] = rng.choice([[2**62, 4, 0], [0, 2**62, 4], [2**61, 0], [0, 2**64 - 1], [2**32, 2**32, 0]])
        else:
            t[2] = t[2] + [bad] if not t[2] or rng.random() < 0.5 else [bad] + t[2][1:]
    elif kind == "offsets" and t:
        b, e = t[3], t[4]
        form = rng.choice(["b+1", "e+1", "b-1", "e-1", "swap", "one", "three", "float", "neg", "-0", "big",
                           "str", "u64"])
        what += " " + form
        vals = {"b+1": (b + 1, e), "e+1": (b, e + 1), "b-1": (b - 1, e), "e-1": (b, e - 1), "swap": (e, b),
                "float": ("%d.0" % b, e), "neg": (-1, e), "-0": ("-0", e) if b == 0 else (b, e),
                "big": (b, 2**64 + e), "str": ('"%d"' % b, e), "u64": (2**64 - 1, e)}
        if form == "one":
            t[3], t[4] = "", b
        elif form == "three":
            t[3], t[4] = b, "%d,%d" % (e, e)
        else:
            t[3], t[4] = vals[form]
    elif kind == "fields" and t:
        form = rng.choice(["missing", "twice", "unknown", "unknown_nested", "unknown_dup", "unknown_big",
                           "unknown_minus0", "unknown_nan", "unknown_float"])
        what += " " + form
        f.extra[i] = {"missing": None, "twice": '"shape":[%s]' % ",".join(map(str, t[2])),
                      "unknown": '"x":1', "unknown_nested": '"x":{"y":[1,{"z":null}],"w":"-0"}',
                      "unknown_dup": '"x":{"a":1,"a":2}', "unknown_big": '"x":18446744073709551615',
                      "unknown_minus0": '"x":-0', "unknown_nan": '"x":NaN', "unknown_float": '"x":1e-0'}[form]
        if form == "missing":
            del f.extra[i]
            header = f.header().replace('"dtype":%s%s,' % (f.ws, '"%s"' % t[1]), "", 1)
    elif kind == "entry" and t:
        form = rng.choice(["seq", "seq2", "seq4", "number", "null", "string"])
        what += " " + form
        seq = '[%s,[%s],[%s,%s]]' % (js(t[1]), ",".join(map(str, t[2])), t[3], t[4])
        text = {"seq": seq, "seq2": '[%s,[%s]]' % (js(t[1]), ",".join(map(str, t[2]))),
                "seq4": seq[:-1] + ",1]", "number": "1", "null": "null", "string": '"x"'}[form]
        header = f.header().replace(f.entry(t, i).split(":", 1)[1], text, 1)
    elif kind == "twice" and t:
        form = rng.choice(["same", "other_valid", "other_invalid"])
        what += " " + form
        h = f.header()
        dup = f.entry(t, i)
        if form == "other_invalid":
            dup = dup.replace('"data_offsets"', '"data_offsets":[0],"y"', 1)
        header = h[:-1] + "," + dup + "}"
    elif kind == "metadata":
        form = rng.choice(["null", "list", "string", "number", "value_number", "value_null", "value_obj",
                           "key_twice", "twice", "empty"])
        what += " " + form
        f.metadata = {"null": "null", "list": '["a"]', "string": '"pt"', "number": "1",
                      "value_number": '{"a":1}', "value_null": '{"a":null}', "value_obj": '{"a":{}}',
                      "key_twice": '{"a":"1","a":"2"}', "twice": '{"a":"1"},"__metadata__":{"b":"2"}',
                      "empty": "{}"}[form]
    elif kind == "root":
        header = rng.choice(["[]", '"x"', "1", "null", "", "{}", "{", "{}}", "[{}]"])
        what += " %r" % header
    elif kind == "data":
        data_delta = rng.choice([-1, -3, 1, 2, 8])
        what += " %d" % data_delta
    elif kind == "names" and t:
        t[0] = rng.choice(["\\u0000", "a\\u0000b", "\\ud800", "\\udc00x", "\\ud83d\\ude00", "\x01", "\\u00e9",
                           "\u00e9", "__metadata__", "\\/", "\\\\"])
        what += " %r" % t[0]
    elif kind == "numbers" and t:
        f.extra[i] = '"x":' + rng.choice(["1e400", "-1e400", "Infinity", "-Infinity", "1E5", "0.0", "-0.0",
                                          "123456789012345678901234567890", "-9223372036854775809"])
        what += " " + f.extra[i]
    elif kind == "depth" and t:
        d = rng.choice([124, 125, 126, 127, 200])
        f.extra[i] = '"x":' + "[" * d + "]" * d
        what += " %d" % d
    elif kind == "others" and t:
        t[1] = rng.choice(OTHERS)
        n = BITS[t[1]]
        for s in t[2]:
            n *= s
        if n % 8 == 0:
            f.data_len += n // 8 - (t[4] - t[3])
            t[4] = t[3] + n // 8
            rest = sorted([x for x in f.tensors if x is not t and x[3] >= t[3]], key=lambda x: x[3])
            at = t[4]
            for x in rest:
                size = x[4] - x[3]
                x[3], x[4] = at, at + size
                at += size
        what += " " + t[1]
    elif kind == "zero":
        f.tensors.append(["z%d" % rng.randint(0, 9), rng.choice(SUPPORTED), [0], 0, 0])
        if rng.random() < 0.5:
            f.tensors[-1][3] = f.tensors[-1][4] = f.data_len
        what += " at %d" % f.tensors[-1][3]
    elif kind == "ws":
        f.ws = rng.choice([" ", "\n", "\t  "])
    else:
        what = "none"
    if header is None:
        header = f.header()
    h = (pre + header + post).encode("utf-8", "surrogatepass")
    hlen = len(h) + hlen_delta
    if hlen < 0:
        hlen = 0
    hlen &= 2**64 - 1
    data = bytes((rng.randrange(256) for _ in range(max(f.data_len + data_delta, 0))))
    return hlen.to_bytes(8, "little") + h + data, what


def package_read(path, body):
    """What the package makes of the file: its tensors (name -> dtype,
    shape, bytes) and metadata, or Refused with its message."""
    try:
        tensors = {n: (v["dtype"], list(v["shape"]), bytes(v["data"])) for n, v in deserialize(body)}
        with safe_open(path, "numpy") as f:
            metadata = f.metadata()
    except Exception as e:  # SafetensorError, and serde's errors as they surface
        raise Refused("%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    return tensors, metadata


expect = ["# safetensors, read by the safetensors package %s; the model (st_reference.py) for what tstor "
          "refuses by design; seed %d" % (safetensors.__version__, seed)]
model_disagrees = 0
for k in range(count):
    body, what = build()
    name = "st_%05d.safetensors" % k
    path = os.path.join(out, name)
    with open(path, "wb") as fh:
        fh.write(body)
    expect += ["file " + name, "# mutation " + what]
    try:
        model = read(body)
    except Refused as e:
        model = e
    try:
        tensors, metadata = package_read(path, body)
    except Refused as e:
        if not isinstance(model, Refused):
            model_disagrees += 1
            expect.append("# model: read it")
        expect += ["# the package: %s" % e, "refused"]
        continue
    if isinstance(model, Refused):
        model_disagrees += 1
        expect.append("# model: %s" % model)
        notes = []
    else:
        notes = model[2]
    if notes:
        expect += ["# read by the package, refused by tstor: " + notes[0], "refused"]
        continue
    lines = ["t s:%s %s sizes=%s fnv=%s" % (n.encode("utf-8").hex() or "-", d, ",".join(map(str, s)), fnv(b))
             for n, (d, s, b) in tensors.items()]
    lines += ["m s:%s s:%s" % (mk.encode("utf-8").hex() or "-", mv.encode("utf-8").hex() or "-")
              for mk, mv in (metadata or {}).items()]
    expect += sorted(lines) or ["empty"]
with open(os.path.join(out, "expect.txt"), "w") as fh:
    fh.write("\n".join(expect) + "\n")
if model_disagrees:
    print("gen_st_diff.py: the model of the reader and the package disagree on %d of %d files (the package "
          "followed; see '# model:' in expect.txt)" % (model_disagrees, count), file=sys.stderr)
