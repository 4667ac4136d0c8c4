#!/usr/bin/env python3
"""The differential run's inputs (diff.sh): COUNT GGUF files GGUFWriter
writes from a random model (metadata of every value type, arrays among
them; tensors of every type the package knows, quantized ones as random
blocks; an alignment now and then), each with one field broken: a count,
a length, a type, a dimension, an offset, the alignment, a value's bytes,
the version, or the file cut or lengthened. Beside each, NAME.intact is
the file as GGUFWriter wrote it, and NAME.py.txt is
what describe.py --strict --dequantize says of it, from GGUFReader, in this
one process, with a time limit per file (GGUFReader takes an array's count
as given, so a small file may keep it busy for hours): "refused timeout"
past it.

    gen_diff.py OUTDIR SEED COUNT
"""
import os
import random
import signal
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q, GGUFValueType as V

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import describe  # noqa: E402

SCALAR = [V.UINT8, V.INT8, V.UINT16, V.INT16, V.UINT32, V.INT32, V.FLOAT32, V.BOOL, V.STRING,
          V.UINT64, V.INT64, V.FLOAT64]
RANGES = {V.UINT8: (0, 255), V.INT8: (-128, 127), V.UINT16: (0, 65535), V.INT16: (-32768, 32767),
          V.UINT32: (0, 2**32 - 1), V.INT32: (-2**31, 2**31 - 1), V.UINT64: (0, 2**64 - 1),
          V.INT64: (-2**63, 2**63 - 1)}
PLAIN = {Q.F32: np.float32, Q.F16: np.float16, Q.F64: np.float64, Q.I8: np.int8, Q.I16: np.int16,
         Q.I32: np.int32, Q.I64: np.int64}
SIZES = {V.UINT8: 1, V.INT8: 1, V.UINT16: 2, V.INT16: 2, V.UINT32: 4, V.INT32: 4, V.FLOAT32: 4,
         V.BOOL: 1, V.UINT64: 8, V.INT64: 8, V.FLOAT64: 8}


def scalar(rng, t):
    if t in RANGES:
        lo, hi = RANGES[t]
        return rng.choice([lo, hi, 0, 1, rng.randint(lo, hi)])
    if t in (V.FLOAT32, V.FLOAT64):
        return rng.choice([0.5, -0.0, float("inf"), 1e-30, rng.uniform(-1e6, 1e6)])
    if t == V.BOOL:
        return rng.random() < 0.5
    return "".join(rng.choice("abc\u00e9\u4e16") for _ in range(rng.randint(0, 6)))


def write_model(rng, path):
    w = gguf.GGUFWriter(path, "diff")
    if rng.random() < 0.3:
        w.add_custom_alignment(rng.choice([1, 8, 16, 64, 128]))
    for i in range(rng.randint(0, 6)):
        t = rng.choice(SCALAR + [V.ARRAY])
        if t == V.ARRAY:
            sub = rng.choice(SCALAR)
            w.add_key_value("a%d" % i, [scalar(rng, sub) for _ in range(rng.randint(1, 5))], V.ARRAY,
                            sub_type=sub)
        else:
            w.add_key_value("k%d" % i, scalar(rng, t), t)
    types = [q for q in Q if q != Q.Q8_1]
    for i in range(rng.randint(0, 5)):
        qt = rng.choice(types)
        block, size = gguf.GGML_QUANT_SIZES[qt]
        shape = [rng.randint(0, 3) for _ in range(rng.randint(0, 2))] + [rng.randint(0, 3) * block]
        if qt in PLAIN:
            a = np.frombuffer(rng.randbytes(int(np.prod(shape)) * np.dtype(PLAIN[qt]).itemsize),
                              dtype=PLAIN[qt]).reshape(shape)
            w.add_tensor("t%d" % i, a)
        else:
            nb = int(np.prod(shape[:-1])) * (shape[-1] // block) * size
            raw = np.frombuffer(rng.randbytes(nb), dtype=np.uint8).reshape(shape[:-1] + [shape[-1] // block * size])
            w.add_tensor("t%d" % i, raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def fields(data):
    """Every field of a valid file: (offset, width, kind)."""
    out = [(0, 4, "magic"), (4, 4, "version"), (8, 8, "tensor_count"), (16, 8, "kv_count")]
    nt, nkv = struct.unpack_from("<QQ", data, 8)
    at = 24

    def string(kind):
        nonlocal at
        n = struct.unpack_from("<Q", data, at)[0]
        out.append((at, 8, kind + "_length"))
        if n:
            out.append((at + 8, n, kind + "_bytes"))
        at += 8 + n

    def value(t, kind):
        nonlocal at
        if t == V.STRING:
            string(kind)
        else:
            out.append((at, SIZES[V(t)], kind))
            at += SIZES[V(t)]

    for _ in range(nkv):
        string("key")
        t = struct.unpack_from("<I", data, at)[0]
        out.append((at, 4, "value_type"))
        at += 4
        if t == V.ARRAY:
            et, n = struct.unpack_from("<IQ", data, at)
            out += [(at, 4, "elem_type"), (at + 4, 8, "array_count")]
            at += 12
            for _ in range(n):
                value(et, "item")
        else:
            value(t, "value")
    for _ in range(nt):
        string("name")
        nd = struct.unpack_from("<I", data, at)[0]
        out.append((at, 4, "n_dims"))
        at += 4
        for _ in range(nd):
            out.append((at, 8, "dim"))
            at += 8
        out += [(at, 4, "tensor_type"), (at + 4, 8, "offset")]
        at += 12
    return out


def broken(rng, data):
    """data with one field broken, and what was broken."""
    data = bytearray(data)
    r = rng.random()
    if r < 0.05:
        return bytes(data[:rng.randint(0, len(data))]), "cut"
    if r < 0.08:
        return bytes(data) + rng.randbytes(rng.randint(1, 64)), "lengthened"
    off, width, kind = rng.choice(fields(bytes(data)))
    if kind.endswith("_bytes") or rng.random() < 0.2:  # a byte of it changed
        data[off + rng.randrange(width)] ^= 1 << rng.randrange(8)
        return bytes(data), kind + ":bit"
    old = int.from_bytes(data[off:off + width], "little")
    top = (1 << (8 * width)) - 1
    new = rng.choice([0, 1, 2, 3, 9, 13, 24, 30, 42, 43, 65, old + 1, old - 1, old * 2, top, top >> 1,
                      top - 31, 1 << (8 * width - 1), old + 32, old + 4, rng.randint(0, top)]) & top
    data[off:off + width] = new.to_bytes(width, "little")
    return bytes(data), "%s=%d" % (kind, new)


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout()


def main():
    out, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    np.seterr(all="ignore")
    signal.signal(signal.SIGALRM, on_alarm)
    rng = random.Random(seed)
    for i in range(count):
        name = os.path.join(out, "%05d.gguf" % i)
        intact = name[:-5] + ".intact"
        write_model(rng, intact)
        data, what = broken(rng, open(intact, "rb").read())
        open(name, "wb").write(data)
        open(name[:-5] + ".what", "w").write(what + "\n")
        signal.alarm(5)
        try:
            lines = describe.verdict(name, True, True)
        except Timeout:
            lines = ["refused timeout"]
        finally:
            signal.alarm(0)
        open(name[:-5] + ".py.txt", "w").write("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    main()
