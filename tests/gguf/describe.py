#!/usr/bin/env python3
"""What the gguf package's GGUFReader reads from a GGUF file, one line per
fact, in the form tests/gguf_describe.c prints what tstor reads, so that the
two can be compared line for line (tests/gguf/check.sh against the committed
descriptions; tests/gguf/diff.sh on generated files):

    kv KEY TYPE VALUE          a scalar: an int in decimal, a bool 0 or 1, a
                               float as its bits in hex (nan for any NaN), a
                               string as its bytes in hex
    kv KEY arr[TYPE] N crc C first ITEMS...
    tensor NAME TYPE [SIZES] offset O nbytes N crc C
                               SIZES in PyTorch's order, O the bytes' offset
                               in the file (- for an empty tensor), C the
                               CRC-32 of the bytes
    dequant NAME f32 C f16 C bf16 C
                               with --dequantize, for each quantized tensor:
                               the CRC-32s of its values decoded by
                               gguf.quants.dequantize, and rounded to float16
                               and bfloat16 (NaNs made 0x7fc00000 / 0x7e00 /
                               0x7fc0 first)

or a single line "refused EXCEPTION" where GGUFReader (or reading a value it
handed out) raises. Types the package does not decode (Q8_K, Q1_0) are
decoded here as ggml's C reference decodes them (ggml-quants.c); Q8_1, whose
block the package sizes as ggml no longer does, is left out.

A file GGUFReader reads but that breaks a rule tstor keeps and GGUFReader
does not check is "refused rule:NAME" instead: an array of arrays (which
ggml's reader refuses, and no description here can show), and with
--strict the GGUF spec's other rules (offsets a multiple of the alignment,
tensors apart, strings inside the file, offsets that do not wrap round) and
tstor's own limits (little-endian files, at most 64 dimensions, sizes whose
nonzero ones multiply within int64); and two places where the package and
ggml part, which tstor takes from ggml: a Q8_1 block (rule:q8_1-block; the
package's is 4 bytes longer than ggml's) and a type newer than the package
(rule:newer-type). tests/gguf/diff.sh counts those apart.

    describe.py [--dequantize] [--strict] FILE
"""
import re
import sys
import zlib

import numpy as np
import gguf
from gguf import GGUFReader, GGMLQuantizationType as Q, GGUFValueType as V
from gguf import quants

TYPE_NAMES = {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32",
              V.INT32: "i32", V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "str", V.ARRAY: "arr",
              V.UINT64: "u64", V.INT64: "i64", V.FLOAT64: "f64"}
PLAIN = {Q.F32, Q.F16, Q.BF16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64}


def scalar(t, part):
    """The text of one scalar of type t held in numpy array part (or the
    bytes of a string)."""
    if t == V.STRING:
        return bytes(part).hex() or "-"
    if t == V.FLOAT32:
        v = np.asarray(part, dtype=np.float32).reshape(-1)[0]
        return "nan" if np.isnan(v) else "%08x" % int(v.view(np.uint32))
    if t == V.FLOAT64:
        v = np.asarray(part, dtype=np.float64).reshape(-1)[0]
        return "nan" if np.isnan(v) else "%016x" % int(v.view(np.uint64))
    if t == V.BOOL:
        return "1" if bool(part.reshape(-1)[0]) else "0"
    return str(int(part.reshape(-1)[0]))


class Rule(Exception):
    """A rule GGUFReader does not check (--strict)."""


def check_strings(f):
    """GGUFReader takes the bytes there are for a string whose length runs
    past the file's end; the spec and ggml refuse it (--strict). The key's
    length and bytes are the first two parts; a string value's bytes are a
    data part, its length the part before."""
    strings = [1]
    if f.types and f.types[-1] == V.STRING:
        strings += list(f.data)
    for i in strings:
        if int(f.parts[i - 1][0]) != f.parts[i].size:
            raise Rule("string-past-end")


def field_line(f):
    t = f.types[0]
    if t != V.ARRAY:
        return "kv %s %s %s" % (f.name, TYPE_NAMES[t], scalar(t, f.parts[f.data[0]]))
    et = V(int(f.parts[3][0]))  # the key's three parts, then the element type
    if et == V.ARRAY:
        raise Rule("nested-array")
    items = [scalar(et, f.parts[i]) for i in f.data]
    crc = zlib.crc32(" ".join(items).encode())
    return "kv %s arr[%s] %d crc %08x first %s" % (f.name, TYPE_NAMES[et], len(items), crc,
                                                   " ".join(items[:4]) or "-")


def canon32(a):
    a = np.ascontiguousarray(a, dtype=np.float32).reshape(-1).copy()
    a.view(np.uint32)[np.isnan(a)] = 0x7FC00000
    return a


def crc(a):
    return "%08x" % zlib.crc32(np.ascontiguousarray(a).tobytes())


def to_f16(a):
    h = a.astype(np.float16)
    h.view(np.uint16)[np.isnan(h)] = 0x7E00
    return h


def to_bf16(a):
    u = a.view(np.uint32).astype(np.uint64)
    b = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    b[np.isnan(a)] = 0x7FC0
    return b


def ggml_c(data, t):
    """The types gguf.quants has no decoder for, as ggml-quants.c decodes
    them."""
    b = data.reshape(-1, {Q.Q8_K: 292, Q.Q1_0: 18}[t])
    if t == Q.Q8_K:
        d = b[:, :4].copy().view(np.float32)
        return d * b[:, 4:260].copy().view(np.int8).astype(np.float32)
    d = b[:, :2].copy().view(np.float16).astype(np.float32)
    bits = (b[:, 2:].reshape(-1, 16, 1) >> np.arange(8, dtype=np.uint8).reshape(1, 1, 8)) & 1
    return np.where(bits.reshape(-1, 128) == 1, d, -d)


def dequant(t):
    if not int(t.n_elements):  # gguf.quants cannot reshape an empty tensor's blocks
        return np.zeros(0, dtype=np.float32)
    if t.tensor_type in (Q.Q8_K, Q.Q1_0):
        return ggml_c(np.asarray(t.data), t.tensor_type)
    return quants.dequantize(np.asarray(t.data), t.tensor_type)


def strict_rules(r):
    if r.byte_order == "S":
        raise Rule("big-endian")
    spans = []
    for t in r.tensors:
        if int(t.field.parts[0][0]) != t.field.parts[1].size:
            raise Rule("string-past-end")
        if len(t.shape) > 64:
            raise Rule("dimensions")
        if int(t.n_bytes) and int(r.data_offset) + int(t.field.parts[5][0]) >= 2**64:
            raise Rule("offset-wraps")  # GGUFReader's uint64 sum wraps round
        span = 1
        for d in t.shape.tolist():
            span *= int(d) or 1
        if span * gguf.GGML_QUANT_SIZES[t.tensor_type][1] >= 2**63:
            raise Rule("size-overflow")  # tstor's: in bytes, zeros left out
        if t.tensor_type == Q.Q8_1:
            raise Rule("q8_1-block")
        off = int(t.data_offset) - int(r.data_offset)
        if off % int(r.alignment):
            raise Rule("alignment")
        if int(t.n_bytes):
            spans.append((off, off + int(t.n_bytes)))
    spans.sort()
    if any(b[0] < a[1] for a, b in zip(spans, spans[1:])):
        raise Rule("overlap")


def describe(path, with_dequant, strict):
    r = GGUFReader(path)
    out = []
    for name, f in r.fields.items():
        if not name.startswith("GGUF."):
            if strict:
                check_strings(f)
            out.append(field_line(f))
    if strict:
        strict_rules(r)
    for t in r.tensors:
        sizes = ",".join(str(int(d)) for d in reversed(t.shape.tolist()))
        nbytes = int(t.n_bytes)
        data = np.asarray(t.data)
        if data.nbytes != nbytes:
            raise ValueError("short data")
        off = str(int(t.data_offset)) if nbytes else "-"
        out.append("tensor %s %s [%s] offset %s nbytes %d crc %s" % (
            t.name, t.tensor_type.name, sizes, off, nbytes, crc(data)))
        if with_dequant and t.tensor_type not in PLAIN and t.tensor_type != Q.Q8_1:
            f32 = canon32(dequant(t))
            out.append("dequant %s f32 %s f16 %s bf16 %s" % (t.name, crc(f32), crc(to_f16(f32)),
                                                          crc(to_bf16(f32))))
    return out


def verdict(path, with_dequant, strict):
    """describe()'s lines, or the one line of a refusal: GGUFReader's
    exception, or the rule the file breaks."""
    try:
        return describe(path, with_dequant, strict)
    except Rule as e:
        return ["refused rule:%s" % e]
    except ValueError as e:
        # a type ggml defines that this package does not know yet
        newer = strict and re.match(r"(np\.uint32\()?42\)? is not a valid GGMLQuantizationType", str(e))
        return ["refused rule:newer-type" if newer else "refused ValueError"]
    except Exception as e:  # what GGUFReader raises for a file it refuses
        return ["refused %s" % type(e).__name__]


def main():
    np.seterr(all="ignore")  # float16 overflows to infinity, as it should
    args = sys.argv[1:]
    path = [a for a in args if not a.startswith("--")][0]
    for line in verdict(path, "--dequantize" in args, "--strict" in args):
        print(line)


if __name__ == "__main__":
    main()
