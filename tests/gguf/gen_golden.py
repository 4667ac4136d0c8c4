#!/usr/bin/env python3
"""Writes the golden GGUF files with the gguf package's GGUFWriter, and
beside each the description of it that describe.py gives from GGUFReader
(NAME.txt), which tstor's reading must match line for line (check.sh):

    metadata.gguf  every value type, as a scalar and as an array, the
                   extremes of each, strings that are not UTF-8 (GGUFWriter
                   writes no empty array: crafted.py does)
    plain.gguf     the plain tensor types (F32 F16 BF16 F64 I8 I16 I32 I64)
                   in 0 to 4 dimensions, an empty tensor, 64-byte alignment
    quant.gguf     every quantized type of GGMLQuantizationType but Q8_1: random
                   blocks (scales mostly finite; each tensor's first block
                   wholly random: subnormal, infinite and NaN scales) of
                   shape [2, 2 x block], and for the types gguf.quants can
                   quantize, a tensor quantized from floats. The package
                   gives Q8_1 40 bytes a block (float32 d and s, a layout
                   ggml dropped); ggml's, which tstor follows, is 36 bytes
                   (float16 d and s): test_gguf.c writes its own
    v2.gguf        plain.gguf's first tensors with the version field 2 (the
                   two versions lay out alike; GGUFWriter writes 3)

    gen_golden.py OUTDIR      (tests/gguf/regenerate.sh compares with the
                               committed files; seeds are fixed)
"""
import os
import subprocess
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q, GGUFValueType as V

HERE = os.path.dirname(os.path.abspath(__file__))
PLAIN = [(Q.F32, np.float32), (Q.F16, np.float16), (Q.F64, np.float64), (Q.I8, np.int8),
         (Q.I16, np.int16), (Q.I32, np.int32), (Q.I64, np.int64)]
# The float16 (or float32, Q8_K) scales of each type's block, by byte offset
# (ggml-common.h's layouts); IQ1_M's is spread over its scales.
SCALES = {Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0], Q.Q8_1: [0, 2],
          Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
          Q.IQ2_XXS: [0], Q.IQ2_XS: [0], Q.IQ3_XXS: [0], Q.IQ1_S: [0], Q.IQ4_NL: [0],
          Q.IQ3_S: [0], Q.IQ2_S: [0], Q.IQ4_XS: [0], Q.TQ1_0: [52], Q.TQ2_0: [64], Q.Q1_0: [0]}
QUANTIZABLE = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.TQ1_0, Q.TQ2_0, Q.MXFP4]


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def metadata(path):
    w = gguf.GGUFWriter(path, "test")
    ints = {V.UINT8: (0, 255), V.INT8: (-128, 127), V.UINT16: (0, 65535), V.INT16: (-32768, 32767),
            V.UINT32: (0, 2**32 - 1), V.INT32: (-2**31, 2**31 - 1), V.UINT64: (0, 2**64 - 1),
            V.INT64: (-2**63, 2**63 - 1)}
    for t, (lo, hi) in ints.items():
        name = t.name.lower()
        w.add_key_value("t.%s.lo" % name, lo, t)
        w.add_key_value("t.%s.hi" % name, hi, t)
        w.add_key_value("a.%s" % name, [lo, 1, hi], V.ARRAY, sub_type=t)
    floats = [0.1, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, 3.4028234663852886e38]
    for t in (V.FLOAT32, V.FLOAT64):
        name = t.name.lower()
        for i, f in enumerate(floats):
            w.add_key_value("t.%s.%d" % (name, i), f, t)
        w.add_key_value("a.%s" % name, floats + [5e-324 if t == V.FLOAT64 else 2.0], V.ARRAY, sub_type=t)
    w.add_bool("t.bool.false", False)
    w.add_bool("t.bool.true", True)
    w.add_array("a.bool", [True, False, True])
    w.add_string("t.str.empty", "")
    w.add_string("t.str.ascii", "llama")
    w.add_string("t.str.unicode", "h\u00e9llo \u4e16\u754c \U0001f600")
    w.add_key_value("t.str.bytes", b"\xff\xfe not UTF-8 \xc0", V.STRING)
    w.add_key_value("t.str.nul", "a\x00b", V.STRING)
    vocab = ["<unk>", "<s>", "</s>"] + ["tok%d" % i for i in range(3000)] + ["\u2581the", ""]
    w.add_array("tokenizer.ggml.tokens", vocab)
    w.add_key_value("a.str.bytes", [b"\x80", b"ok", b""], V.ARRAY, sub_type=V.STRING)
    finish(w)


def plain(path, alignment=None, only=None):
    w = gguf.GGUFWriter(path, "test")
    if alignment:
        w.add_custom_alignment(alignment)
    rng = np.random.RandomState(1)
    shapes = [(5,), (2, 3), (2, 3, 4), (1, 2, 1, 3), ()]
    for qt, dt in PLAIN:
        for s in shapes:
            a = (rng.standard_normal(s) * 100).astype(dt) if qt in (Q.F32, Q.F16, Q.F64) else \
                rng.randint(np.iinfo(dt).min, np.iinfo(dt).max, size=s, dtype=dt)
            w.add_tensor("%s.%s" % (qt.name, "x".join(map(str, s)) or "scalar"), np.asarray(a))
    bf = (rng.standard_normal((3, 4)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    w.add_tensor("BF16.3x4", bf.view(np.uint8).reshape(3, 8), raw_dtype=Q.BF16)
    w.add_tensor("F32.empty", np.zeros((0, 4), dtype=np.float32))
    if only:
        w.tensors[0] = {k: v for k, v in list(w.tensors[0].items())[:only]}
    finish(w)


def quant(path):
    w = gguf.GGUFWriter(path, "test")
    rng = np.random.RandomState(2)
    for qt in Q:
        if qt in (Q.F32, Q.F16, Q.BF16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64, Q.Q8_1):
            continue
        block, size = gguf.GGML_QUANT_SIZES[qt]
        blocks = rng.randint(0, 256, size=(4, size)).astype(np.uint8)
        for b in range(1, 4):  # finite scales in all blocks but the first
            for at in SCALES.get(qt, []):
                blocks[b, at:at + 2] = np.frombuffer(np.float16(rng.uniform(-2, 2)).tobytes(), np.uint8)
            if qt == Q.Q8_K:
                blocks[b, 0:4] = np.frombuffer(np.float32(rng.uniform(-2, 2)).tobytes(), np.uint8)
            if qt == Q.MXFP4:
                blocks[b, 0] = rng.randint(100, 140)
        w.add_tensor("r.%s" % qt.name, blocks.reshape(2, 2 * size), raw_dtype=qt)
        if qt in QUANTIZABLE:
            x = rng.standard_normal((2, 2 * block)).astype(np.float32)
            w.add_tensor("q.%s" % qt.name, gguf.quants.quantize(x, qt), raw_dtype=qt)
    finish(w)


def version2(src, path):
    data = bytearray(open(src, "rb").read())
    data[4:8] = (2).to_bytes(4, "little")
    open(path, "wb").write(bytes(data))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    metadata(os.path.join(out, "metadata.gguf"))
    plain(os.path.join(out, "plain.gguf"), alignment=64)
    quant(os.path.join(out, "quant.gguf"))
    plain(os.path.join(out, "tmp.gguf"), only=6)
    version2(os.path.join(out, "tmp.gguf"), os.path.join(out, "v2.gguf"))
    os.remove(os.path.join(out, "tmp.gguf"))
    for name in ("metadata", "plain", "quant", "v2"):
        desc = subprocess.run([sys.executable, os.path.join(HERE, "describe.py"), "--dequantize",
                               os.path.join(out, name + ".gguf")], check=True, capture_output=True,
                              text=True).stdout
        open(os.path.join(out, name + ".txt"), "w").write(desc)


if __name__ == "__main__":
    main()
