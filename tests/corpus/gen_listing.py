#!/usr/bin/env python3
"""What the references read from each file of the corpus (SOURCES, files/).

    gen_listing.py OUT          (the pyref venv's python: torch 2.x,
                                 safetensors, torchfile; it runs
                                 /usr/bin/python3's torch 1.13 itself)

writes OUT, in the form listing.txt has, which test_corpus.c reads:

    file NAME FORMAT
    # REFERENCE: what it did (comment lines, for people)
    ...then what tstor must give:

torch files (torch.save's zip and legacy formats): the lines of
tests/ckpt/describe.py for what torch 2.x's torch.load(weights_only=True)
returned (1.13 is run too, and said to agree or not: tstor follows 2.x);
safetensors: "$[s:NAMEHEX] tensor ..." lines in describe's form, one per
tensor sorted by name, each with a storage of its own as the safetensors
package gives them, then "meta s:KEYHEX s:VALUEHEX" sorted by key;
Torch7: "t7 FORMAT ok NODE", the manifest line of tests/t7 (gen_t7.py's
section 2) for what torchfile read, with the file indices torchfile read;
a file the reference refuses, or that tstor refuses by design where the
reference reads it: "refused CODE WORDS", the error code tstor must give and
words its message must hold.
"""
import io
import json
import os
import subprocess
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ckpt"))
sys.path.insert(0, os.path.join(HERE, "..", "t7"))
sys.dont_write_bytecode = True
FILES = os.path.join(HERE, "files")
TORCH113 = os.environ.get("TSTOR_PYTHON", "/usr/bin/python3")

# Read by the reference, refused by tstor by design (docs/formats.md): the
# code, the words of the message, and why.
BY_DESIGN = {
    "torchfile-function.t7": ("TSTOR_EACCES", "a Lua function (LuaJIT bytecode) is refused",
                              "a Lua function (LuaJIT bytecode), which tstor never runs nor keeps"),
    "torchfile-function_upvals.t7": ("TSTOR_EACCES", "a Lua function (LuaJIT bytecode) is refused",
                                     "a Lua function with upvalues (LuaJIT bytecode), which tstor never runs "
                                     "nor keeps"),
    "torchfile-recursive_class.t7": ("TSTOR_EINVAL", "contains itself is refused",
                                     "an object that holds itself: a cycle, which no tree of values has"),
    "torchfile-recursive_kv_table.t7": ("TSTOR_EINVAL", "contains itself is refused",
                                        "a table that is its own key and value: a cycle"),
    "torchfile-tds_hash.t7": ("TSTOR_ENOTSUP", "class tds.Hash is refused",
                              "tds.Hash writes a payload of its own, which a reader cannot tell from data"),
    "torchfile-tds_vec.t7": ("TSTOR_ENOTSUP", "class tds.Vec is refused",
                             "tds.Vec writes a payload of its own, which a reader cannot tell from data"),
}
# Refused by the reference: the code and words tstor gives for the same file.
REFUSED_AS = {
    "burn-broken.pt": ("TSTOR_EINVAL", "not a checkpoint"),
}


def fmt_of(name):
    with open(os.path.join(FILES, name), "rb") as f:
        head = f.read(8)
    if head[:4] == b"PK\x03\x04":
        return "torch"
    if name.endswith(".safetensors"):
        return "safetensors"
    if name.endswith(".t7"):
        return "torch7"
    return "torch-legacy" if head[:2] == b"\x80\x02" else "unknown"


def err(e):
    return "%s: %s" % (type(e).__name__, str(e).strip().split("\n")[0][:160])


# ------------------------------------------------------------------ torch
def torch_listing(path):
    """(lines or None, how): torch.load with weights_only=True, as the
    running torch gives it."""
    import torch
    from describe import describe
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - the reference's refusal, listed
            return None, "refuses (%s)" % err(e)
    return describe(obj), "reads"


def torch113(paths):
    """{path: (lines or None, how)} from Debian's torch 1.13, or None."""
    code = ("import json, sys; sys.path.insert(0, %r); sys.dont_write_bytecode = True\n"
            "import gen_listing\n"
            "print(json.dumps({p: gen_listing.torch_listing(p) for p in sys.argv[1:]}))\n" % HERE)
    try:
        out = subprocess.run([TORCH113, "-c", code] + paths, capture_output=True, check=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return {p: tuple(v) for p, v in json.loads(out.stdout).items()}


# ------------------------------------------------------------ safetensors
def safetensors_listing(path):
    import safetensors
    import torch
    from describe import dname, fnv, logical_bytes
    lines = []
    with safetensors.safe_open(path, framework="pt") as f:
        names = sorted(f.keys())
        meta = f.metadata() or {}
        for sid, k in enumerate(names):
            t = f.get_tensor(k)
            lines.append("$[s:%s] tensor %s sizes=%s strides=%s offset=0 storage=%d snbytes=%d grad=0 fnv=%s" % (
                k.encode("utf-8").hex() or "-", dname(t.dtype), ",".join(map(str, t.shape)),
                ",".join(map(str, t.stride())), sid, t.untyped_storage().nbytes(), fnv(logical_bytes(t))))
    for k in sorted(meta):
        lines.append("meta s:%s s:%s" % (k.encode("utf-8").hex() or "-", meta[k].encode("utf-8").hex() or "-"))
    assert torch  # the framework the package hands tensors to
    return lines


# ----------------------------------------------------------------- Torch7
T7_TYPES = {"uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
            "float32": "Float", "float64": "Double", "float16": "Half"}


def torchfile_tree(path):
    """What torchfile read, as gen_t7's value model, with the file's
    reference indices: (value, {id(value): index})."""
    import torchfile
    from gen_t7 import T7Object, T7Storage, T7Table, T7Tensor

    geometry = {}  # id(array torchfile returned) -> (sizes, strides, offset1, storage array)

    def observe(handler):
        # torchfile's own tensor reader, with what it read kept beside it
        def read(reader, version):
            seen = []
            spy = {"read_long_array": reader.read_long_array, "read_long": reader.read_long,
                   "read_obj": reader.read_obj}

            def long_array(n):
                v = spy["read_long_array"](n)
                seen.append(list(v))
                return v

            def long():
                v = spy["read_long"]()
                if len(seen) == 2:
                    seen.append(v)
                return v

            def obj():
                for k, fn in spy.items():
                    setattr(reader, k, fn)
                v = spy["read_obj"]()
                seen.append(v)
                return v
            reader.read_long_array, reader.read_long, reader.read_obj = long_array, long, obj
            try:
                arr = handler(reader, version)
            finally:
                for k in spy:
                    reader.__dict__.pop(k, None)
            geometry[id(arr)] = (seen[0], seen[1], seen[2], seen[3], arr)
            return arr
        return read
    handlers = dict(torchfile.type_handlers)
    try:
        for name, h in handlers.items():
            if name.endswith(b"Tensor"):
                torchfile.type_handlers[name] = observe(h)
        with open(path, "rb") as f:
            reader = torchfile.T7Reader(f, use_list_heuristic=False, use_int_heuristic=False)
            root = reader.read_obj()
            objects = reader.objects
            if f.read(1):
                raise ValueError("bytes after the object")
    finally:
        torchfile.type_handlers.clear()
        torchfile.type_handlers.update(handlers)
    index = {id(v): i for i, v in objects.items()}
    made, where = {}, {}

    def conv(v):
        import numpy as np
        if v is None or isinstance(v, (bool, int, float, bytes)):
            return v
        if id(v) in made:
            return made[id(v)]
        if isinstance(v, np.ndarray) and id(v) in geometry:
            sizes, strides, offset1, st, _ = geometry[id(v)]
            out = T7Tensor(T7_TYPES[str(v.dtype)], sizes, strides, offset1, None)
            made[id(v)] = out
            out.storage = conv(st)
        elif isinstance(v, np.ndarray):
            out = T7Storage(T7_TYPES[str(v.dtype)], v.tolist())
            made[id(v)] = out
        elif isinstance(v, torchfile.TorchObject):
            # torchfile keeps the number after "V " as _version_number
            # (v.version_number would look the name up in the fields); it
            # reads a file without a version string as 0 too
            if not v._version_number:
                raise SystemExit("%s: version 0 or none, which torchfile does not tell apart" % path)
            out = T7Object(v.torch_typename(), v._version_number, None)
            made[id(v)] = out
            out.table = conv(v._obj)
        elif isinstance(v, dict):
            out = T7Table()
            made[id(v)] = out
            out.pairs = [(conv(k), conv(x)) for k, x in v.items()]
        elif type(v).__name__ == "LuaFunction":
            raise Refusal("function")
        else:
            raise TypeError(type(v))
        where[id(out)] = index[id(v)]
        return out
    return conv(root), where


class Refusal(Exception):
    pass


def torchfile_reads(path):
    """torchfile reads the whole file (a file tstor refuses by design: a
    cycle or a tds class has no tree in gen_t7's model to render)."""
    import torchfile
    with open(path, "rb") as f:
        torchfile.T7Reader(f, use_list_heuristic=False, use_int_heuristic=False).read_obj()
        if f.read(1):
            raise ValueError("%s: bytes after the object" % path)


def torch7_line(path):
    from gen_t7 import Renderer
    tree, where = torchfile_tree(path)
    return "t7 binary-le-long8 ok " + Renderer(lambda o: where[id(o)]).node(tree)


def torch7_ascii_line(path):
    """torchfile reads binary files only: an ascii one is read by
    tests/t7/check_gen.py's reader, written from Torch7's File.lua and
    THDiskFile.c apart from tstor."""
    import check_gen
    with open(path, "rb") as f:
        got = check_gen.read_outcome(f.read(), "ascii")
    return "t7 ascii " + got


# ------------------------------------------------------------------- main
def main():
    import safetensors
    import torch
    import torchfile
    out = sys.argv[1]
    names = sorted(os.listdir(FILES))
    paths = [os.path.join(FILES, n) for n in names if fmt_of(n).startswith("torch") and fmt_of(n) != "torch7"]
    old = torch113(paths) or {}
    v113 = subprocess.run([TORCH113, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                          text=True).stdout.strip() or "absent"
    lines = ["# the corpus (SOURCES) as the references read it: torch %s and %s, safetensors %s, "
             "torchfile 0.1.0" % (torch.__version__.split("+")[0], v113, safetensors.__version__)]
    for n in names:
        path = os.path.join(FILES, n)
        fmt = fmt_of(n)
        lines.append("file %s %s" % (n, fmt))
        body = []
        if fmt in ("torch", "torch-legacy", "unknown"):
            got, how = torch_listing(path)
            lines.append("# torch %s torch.load(weights_only=True): %s" % (torch.__version__.split("+")[0], how))
            if path in old:
                o, ohow = old[path]
                lines.append("# torch %s: %s" % (v113, "the same" if (o, ohow) == (got, how) else
                                                 "%s, not the same: tstor follows 2.x" % ohow))
            body = got
        elif fmt == "safetensors":
            try:
                body = safetensors_listing(path)
                lines.append("# safetensors %s safe_open(framework=pt): reads" % safetensors.__version__)
            except Exception as e:  # noqa: BLE001
                body = None
                lines.append("# safetensors %s: refuses (%s)" % (safetensors.__version__, err(e)))
        elif n in BY_DESIGN:
            torchfile_reads(path)
            lines.append("# torchfile: reads")
        else:
            try:
                body = [torch7_line(path)]
                lines.append("# torchfile: reads")
            except Refusal as r:
                body = ["t7 binary-le-long8 refuse: %s" % r]
                lines.append("# torchfile: reads; a Lua function, which tstor never runs nor keeps")
            except torchfile.T7ReaderException as e:
                body = [torch7_ascii_line(path)]
                lines.append("# torchfile: refuses (%s): it reads binary files only; the listing is "
                             "tests/t7/check_gen.py's reader's" % err(e))
        if n in BY_DESIGN:
            code, words, why = BY_DESIGN[n]
            lines.append("# refused by tstor by design: %s" % why)
            body = ["refused %s %s" % (code, words)]
        elif body is None:
            if n not in REFUSED_AS:
                raise SystemExit("%s: the reference refuses it; say in REFUSED_AS what tstor gives" % n)
            body = ["refused %s %s" % REFUSED_AS[n]]
        lines.extend(body)
    with io.open(out, "w", encoding="ascii", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
