#!/usr/bin/python3
"""Generates the conversion and printing vectors of tstor's typed-storage tests.

Run with Debian's /usr/bin/python3 and its python3-torch (PyTorch 1.13, CPU):

    /usr/bin/python3 tests/vectors/gen_vectors.py tests/vectors

and with torch 2.x for its answers, every dtype it has (main_torch2 below):

    ~/.cache/tstor/pyref/bin/python tests/vectors/gen_vectors.py tests/vectors

It writes two files, both committed; the tests read print.txt, and
conversions.bin is PyTorch 1.13's record (the tests read torch 2.x's
conversions_torch2.bin, below):

conversions.bin -- what PyTorch's CPU tensor.to(dtype) gives for special and
    random values of every source dtype, into every dtype. Little-endian:
        "TSTORCV1", u32 block count, then per block:
        u8 source dtype, u8 destination count, u16 0, u32 element count,
        the source elements, then per destination: u8 dtype, 3 zero bytes,
        the converted elements.
    dtype numbers are tstor_dtype's (c10::ScalarType's). Blocks with a float8
    source or destination are not PyTorch's (1.13 has no float8): they are
    worked out below from the formats' definitions, in exact arithmetic, with
    PyTorch 2.x's rules: every other dtype reaches float8 through float32 and
    leaves it as float32; float8_e4m3fn saturates (PyTorch 2.15: past 448,
    infinities included, is +-448); a fnuz NaN is 0 in every integer dtype
    (PyTorch 2.15's compiler folds the one NaN code of those formats).

print.txt -- str() of TypedStorages, as "dtype NAME", "data HEX", the expected
    lines, and "end".

The outputs are deterministic (fixed seed).
"""
import math
import random
import struct
import sys
import warnings
from fractions import Fraction

import importlib.metadata
import os

# torch 2.x: the loops PyTorch has for AVX2, which give what its AVX-512 ones
# give (see main_torch2); set before torch is loaded, and not for 1.13, whose
# files were made with the machine's own.
if int(importlib.metadata.version("torch").split(".")[0]) >= 2:
    os.environ["ATEN_CPU_CAPABILITY"] = "avx2"

import torch  # noqa: E402

warnings.filterwarnings("ignore")
# One thread, and lengths that are multiples of 64: PyTorch 1.13 converts
# float64 -> bfloat16 NaN differently in its vector loop (0xffff) and in the
# scalar tail (0x7fc0); the vectors hold the vector loop's results, which are
# what large buffers get.
torch.set_num_threads(1)
N = 512

T = torch
DT = {  # tstor_dtype value -> torch dtype
    0: T.uint8, 1: T.int8, 2: T.int16, 3: T.int32, 4: T.int64, 5: T.float16,
    6: T.float32, 7: T.float64, 8: T.complex32, 9: T.complex64, 10: T.complex128,
    11: T.bool, 15: T.bfloat16,
}
TORCH_CODES = sorted(DT)
FP8 = {23: "e5m2", 24: "e4m3fn", 25: "e5m2fnuz", 26: "e4m3fnuz"}
INT_VIEW = {1: T.uint8, 2: T.int16, 4: T.int32, 8: T.int64}

rng = random.Random(20240601)


def raw_bytes(t):
    """The little-endian bytes of a tensor's elements."""
    t = t.contiguous()
    if t.dtype == T.bool:
        return bytes(t.to(T.uint8).tolist())
    if t.dtype.is_complex:
        part = {T.complex32: T.float16, T.complex64: T.float32, T.complex128: T.float64}.get(
            t.dtype) or T.bfloat16  # torch 2.15's bcomplex32
        size = torch.tensor([], dtype=part).element_size()
        if t.dtype == T.complex32:
            t = t.view(T.float16)
        elif size == 2:  # bcomplex32: by its bits
            t = t.view(T.int32).view(T.int16)
        else:
            t = t.view(part)
        t = t.view(INT_VIEW[size])
        fmt = {2: "<h", 4: "<i", 8: "<q"}[size]
    else:
        size = t.element_size()
        t = t.view(INT_VIEW[size])
        fmt = {1: "<B", 2: "<h", 4: "<i", 8: "<q"}[size]
    return b"".join(struct.pack(fmt, v) for v in t.reshape(-1).tolist())


def from_bits(bits, dtype):
    """A tensor of `dtype` whose elements have the given integer bit patterns."""
    size = torch.tensor([], dtype=dtype).element_size()
    signed = [b - (1 << (8 * size)) if b >= 1 << (8 * size - 1) else b for b in bits]
    view = INT_VIEW[size] if size > 1 else T.uint8
    if size == 1:
        signed = bits
    return torch.tensor(signed, dtype=view).view(dtype)


# ------------------------------------------------------------- source values

def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def float_specials():
    v = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5,
         2.5, -2.5, 3.5, 255.0, 255.5, 256.0, 127.0, 127.5, 128.0, -128.0, -128.5, -129.0,
         300.0, -300.0, 32767.0, 32767.5, 32768.0, -32768.0, -32769.0, 65504.0, 65519.0,
         65519.99, 65520.0, 65536.0, 70000.0, -70000.0, 2.0 ** 31 - 128, 2.0 ** 31, -2.0 ** 31,
         -2.0 ** 31 - 256, 3e9, -3e9, 1e10, -1e10, 2.0 ** 53 + 2, 2.0 ** 63, -2.0 ** 63, 1e19,
         -1e19, 1e20, 1e38, 3.4028234663852886e38, 3.4028235677973366e38, 1e39, 1e300, -1e300,
         1e-5, 1e-8, 6.103515625e-05, 6.097555160522461e-05, 5.960464477539063e-08,
         2.9802322387695312e-08, 2.98023224e-08, 1e-40, -1e-40, 1.401298464324817e-45,
         1e-45, 7e-46, 1e-300, 5e-324, 1.0 / 3, -2.0 / 3, 0.1, 448.0, 464.0, 480.0, 240.0,
         248.0, 256.0, 57344.0, 61440.0, 0.001953125, 0.0009765625, 1.52587890625e-05,
         7.62939453125e-06, 1.0000000596046448, 1.00390625, 1.0039062500000002, 65505.0]
    return v


def float_source(code):
    dtype = DT[code]
    vals = float_specials()
    t = torch.tensor(vals, dtype=T.float64).to(dtype)
    extra = []
    # NaNs with payloads and signalling NaNs, as bit patterns.
    if dtype == T.float32:
        extra = [0x7F800001, 0xFF800001, 0x7FA00000, 0x7FC00001, 0xFFC00000, 0x7FFFFFFF,
                 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x477FEFFF, 0x477FF000, 0x33000000,
                 0x33000001, 0x387FE000, 0x387FF000]
    elif dtype == T.float64:
        extra = [0x7FF0000000000001, 0x7FF4000000000000, 0xFFF8000000000000, 0x7FF8000000000001,
                 0x0000000000000001, 0x380FFFFFF0000000, 0x380FFFFFF0000001, 0x3FF0000010000000,
                 0x3FF0000010000001, 0x3FF000000FFFFFFF, 0x3FF0100000000000, 0x3FF0080000000001]
    elif dtype in (T.float16, T.bfloat16):
        extra = [0x7C01, 0x7D00, 0xFE00, 0x7FFF, 0x0001, 0x8001, 0x03FF, 0x7BFF, 0x7F81, 0x7FA0,
                 0xFFC0, 0x7F7F, 0x0080, 0x007F]
    parts = [t]
    if extra:
        parts.append(from_bits(extra, dtype))
    # Random bit patterns: every exponent, payloads, subnormals.
    size = torch.tensor([], dtype=dtype).element_size()
    parts.append(from_bits([rng.getrandbits(8 * size) for _ in range(96)], dtype))
    # Random magnitudes over the interesting range, both signs.
    mags = [rng.choice([-1, 1]) * 10 ** rng.uniform(-9, 21) for _ in range(96)]
    parts.append(torch.tensor(mags, dtype=T.float64).to(dtype))
    # Ties and near-ties of the narrower formats: a float16 / bfloat16 value plus
    # half its ulp, plus or minus a little, as float32 and float64.
    ties = []
    for _ in range(64):
        h = rng.randrange(0x0001, 0x7BFF)
        lo = torch.tensor([h], dtype=T.int16).view(T.float16).to(T.float64).item()
        hi = torch.tensor([h + 1], dtype=T.int16).view(T.float16).to(T.float64).item()
        mid = (lo + hi) / 2
        ties.append(rng.choice([mid, -mid, mid * (1 + 2 ** -30), mid * (1 - 2 ** -30)]))
        b = rng.randrange(0x0001, 0x7F7F)
        lo = torch.tensor([b], dtype=T.int16).view(T.bfloat16).to(T.float64).item()
        hi = torch.tensor([b + 1], dtype=T.int16).view(T.bfloat16).to(T.float64).item()
        mid = (lo + hi) / 2
        ties.append(rng.choice([mid, -mid, mid * (1 + 2 ** -40), mid * (1 - 2 ** -40)]))
    parts.append(torch.tensor(ties, dtype=T.float64).to(dtype))
    # Integer boundaries for float -> int, with halves.
    ints = [rng.choice([-1, 1]) * (2 ** rng.randrange(0, 64) + rng.choice([-1, -0.5, 0, 0.5, 1]))
            for _ in range(48)]
    parts.append(torch.tensor(ints, dtype=T.float64).to(dtype))
    return torch.cat(parts)


def int_source(code):
    dtype = DT[code]
    if dtype == T.bool:
        vals = [rng.random() < 0.5 for _ in range(N)]
        vals[:2] = [False, True]
        return torch.tensor(vals, dtype=T.bool)
    info = torch.iinfo(dtype)
    vals = [0, 1, -1, 2, info.max, info.min, info.max - 1, info.min + 1, 127, 128, 255, 256,
            -128, -129, 32767, 32768, 65535, 65536, 2 ** 24 - 1, 2 ** 24, 2 ** 24 + 1,
            2 ** 24 + 3, 2 ** 25 + 2, 2 ** 25 + 6, 0x1008001, 0x1018001, 2 ** 31 - 1, 2 ** 31,
            -2 ** 31, 2 ** 53 + 1, 2 ** 53 + 3, 2 ** 62 + 2 ** 40 + 1, 2 ** 63 - 2 ** 39,
            2 ** 63 - 2 ** 39 - 1, 0x7FFFFF0000000000, 0x7FFFFF8000000000, 0x7FFFFF8000000001,
            65504, 65519, 65520, 65535 + 16]
    vals = [v for v in vals if info.min <= v <= info.max]
    bits = info.bits
    for _ in range(N):
        kind = rng.randrange(3)
        if kind == 0:
            v = rng.getrandbits(bits)
            if info.min < 0 and v >= 1 << (bits - 1):
                v -= 1 << bits
        elif kind == 1:  # near a power of two: float rounding ties
            p = rng.randrange(0, bits - (1 if info.min < 0 else 0))
            v = 2 ** p + rng.randrange(-3, 4) * (2 ** max(0, p - 24)) // 2
            v = v if rng.random() < 0.5 or info.min == 0 else -v
        else:
            v = rng.randrange(info.min, info.max + 1)
        if info.min <= v <= info.max:
            vals.append(v)
    return torch.tensor(vals, dtype=dtype)


def complex_source(code):
    dtype = DT[code]
    part = {T.complex32: T.float16, T.complex64: T.float32, T.complex128: T.float64}[dtype]
    re = float_source({T.float16: 5, T.float32: 6, T.float64: 7}[part])
    perm = list(range(len(re)))
    rng.shuffle(perm)
    im = re[perm]
    both = torch.stack([re, im], dim=1).contiguous()
    if dtype == T.complex32:  # no view_as_complex for float16 in 1.13: go by bits
        return both.view(T.int16).view(T.int32).reshape(-1).view(T.complex32)
    return torch.view_as_complex(both)


def source(code):
    dtype = DT[code]
    if dtype.is_complex:
        t = complex_source(code)
    elif dtype.is_floating_point:
        t = float_source(code)
    else:
        t = int_source(code)
    t = t[:N]
    if len(t) < N:  # pad with more random bits
        size = torch.tensor([], dtype=dtype).element_size()
        if dtype == T.bool:
            pad = torch.tensor([rng.random() < 0.5 for _ in range(N - len(t))])
        elif dtype.is_complex:
            pad = from_bits([rng.getrandbits(8 * size // 2) for _ in range(2 * (N - len(t)))],
                            {8: T.float32, 16: T.float64, 4: T.float16}[size]).view(dtype)
        else:
            pad = from_bits([rng.getrandbits(8 * size) for _ in range(N - len(t))], dtype)
        t = torch.cat([t, pad])
    assert len(t) == N
    return t


def convert(t, dtype):
    """t.to(dtype), checked to be free of PyTorch's vector-loop/tail differences."""
    once = t.to(dtype)
    twice = torch.cat([t, t]).to(dtype)
    if raw_bytes(once) != raw_bytes(twice[:len(t)]) or raw_bytes(once) != raw_bytes(twice[len(t):]):
        sys.exit("PyTorch gave position-dependent results for %s -> %s" % (t.dtype, dtype))
    return once


# ------------------------------------------------------------------ float8

FMT = {  # exponent bits, mantissa bits, bias, kind
    "e4m3fn": (4, 3, 7, "fn"), "e5m2": (5, 2, 15, "ieee"),
    "e4m3fnuz": (4, 3, 8, "fnuz"), "e5m2fnuz": (5, 2, 16, "fnuz"),
}


def fp8_value(fmt, code):
    """The exact value of a float8 code: a Fraction, +-inf, or None for NaN.
    Signed zero comes back as ("-0") so callers can keep the sign."""
    eb, mb, bias, kind = FMT[fmt]
    sign = -1 if code & 0x80 else 1
    e = (code & 0x7F) >> mb
    m = code & ((1 << mb) - 1)
    if kind == "fnuz" and code == 0x80:
        return None
    if kind == "fn" and (code & 0x7F) == 0x7F:
        return None
    if kind == "ieee" and e == (1 << eb) - 1:
        return None if m else sign * math.inf
    if e == 0:
        v = Fraction(m, 1 << mb) * Fraction(2) ** (1 - bias)
    else:
        v = (1 + Fraction(m, 1 << mb)) * Fraction(2) ** (e - bias)
    return sign * v if v else ("-0" if sign < 0 else Fraction(0))


LADDERS = {}


def fp8_ladder(fmt):
    if fmt not in LADDERS:
        LADDERS[fmt] = make_ladder(fmt)
    return LADDERS[fmt]


def make_ladder(fmt):
    """Positive codes in increasing order with their values, ending with the
    overflow code: the code rounding past the largest finite value gives, with
    the value it would have if the exponent went on."""
    eb, mb, bias, kind = FMT[fmt]
    codes = []
    for c in range(0x80):
        v = fp8_value(fmt, c)
        if isinstance(v, Fraction):
            codes.append((c, v))
    last_code, last = codes[-1]
    step = last - codes[-2][1]
    overflow_code = {"fn": 0x7E, "ieee": 0x7C, "fnuz": 0x80}[kind]
    codes.append((overflow_code, last + step))
    return codes


def fp8_encode(fmt, f32):
    """Round a float32 bit pattern to the nearest float8 code, ties to even."""
    eb, mb, bias, kind = FMT[fmt]
    x = struct.unpack("<f", struct.pack("<I", f32))[0]
    sign = 0x80 if f32 >> 31 else 0
    if math.isnan(x):
        return 0x80 if kind == "fnuz" else 0x7F | sign
    ladder = fp8_ladder(fmt)
    over_code, over_value = ladder[-1]
    a = abs(x)
    if a == math.inf or Fraction(a) >= over_value:
        code = over_code
    else:
        a = Fraction(a)
        code = None
        for (c0, v0), (c1, v1) in zip(ladder, ladder[1:]):
            if v0 <= a <= v1:
                d0, d1 = a - v0, v1 - a
                if d0 < d1:
                    code = c0
                elif d1 < d0:
                    code = c1
                else:
                    code = c0 if c0 % 2 == 0 else c1
                break
        assert code is not None
    if kind == "fnuz":
        return code if code in (0, 0x80) else code | sign
    return code | sign


def fp8_decode_f32(fmt, code):
    """float32 bit pattern of a float8 code. NaNs as PyTorch 2.x's c10 writes
    them: 0x7ff00000 with the sign (e4m3fn), the quieted float16 NaN of the
    same top byte (e5m2), 0x7f800001 (fnuz)."""
    eb, mb, bias, kind = FMT[fmt]
    v = fp8_value(fmt, code)
    if v is None:
        if kind == "fn":
            return 0x7FF00000 | ((code & 0x80) << 24)
        if kind == "fnuz":
            return 0x7F800001
        h = code << 8
        return ((h & 0x8000) << 16) | 0x7F800000 | 0x400000 | ((h & 0x3FF) << 13)
    if v == "-0":
        return 0x80000000
    if isinstance(v, float):  # infinity
        return f32_bits(v)
    return f32_bits(float(v))  # exact: every float8 value is a float32


def f32_tensor(bits):
    return from_bits(bits, T.float32)


# ------------------------------------------------------------------ output

def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "."
    blocks = []
    sources = {code: source(code) for code in TORCH_CODES}
    for code in TORCH_CODES:
        src = sources[code]
        dsts = []
        for dcode in TORCH_CODES:
            dsts.append((dcode, raw_bytes(convert(src, DT[dcode]))))
        as_f32 = convert(src, T.float32).view(T.int32).tolist()
        for dcode, fmt in FP8.items():
            dsts.append((dcode, bytes(fp8_encode(fmt, b & 0xFFFFFFFF) for b in as_f32)))
        blocks.append((code, raw_bytes(src), dsts, len(src)))
    for code, fmt in FP8.items():
        codes = list(range(256))
        f32 = f32_tensor([fp8_decode_f32(fmt, c) for c in codes])
        dsts = []
        for dcode in TORCH_CODES:
            # float32 passes through untouched: PyTorch 2.x stores the decoded
            # bits as they are (a signalling fnuz NaN stays signalling).
            out = f32 if DT[dcode] == T.float32 else convert(f32, DT[dcode])
            if FMT[fmt][3] == "fnuz" and not (DT[dcode].is_floating_point or
                                               DT[dcode].is_complex or DT[dcode] == T.bool):
                out = out.clone()
                out[0x80] = 0
            dsts.append((dcode, raw_bytes(out)))
        for dcode, dfmt in FP8.items():
            if dcode == code:  # the same dtype is a copy of the bytes, NaNs and all
                dsts.append((dcode, bytes(codes)))
            else:
                dsts.append((dcode, bytes(fp8_encode(dfmt, fp8_decode_f32(fmt, c)) for c in codes)))
        blocks.append((code, bytes(codes), dsts, 256))
    with open("%s/conversions.bin" % outdir, "wb") as f:
        f.write(b"TSTORCV1")
        f.write(struct.pack("<I", len(blocks)))
        for code, data, dsts, count in blocks:
            f.write(struct.pack("<BBHI", code, len(dsts), 0, count))
            f.write(data)
            for dcode, out in dsts:
                f.write(struct.pack("<B3x", dcode))
                f.write(out)

    names = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16",
             6: "float32", 7: "float64", 8: "complex32", 9: "complex64", 10: "complex128",
             11: "bool", 15: "bfloat16"}
    with open("%s/print.txt" % outdir, "w") as f:
        f.write("# str() of torch.TypedStorage, PyTorch %s; see gen_vectors.py\n" % torch.__version__)
        for code in TORCH_CODES:
            src = sources[code]
            for sl in (src[:48], src[48:160], src[:0]):
                st = sl.clone().storage()
                f.write("dtype %s\n" % names[code])
                f.write("data %s\n" % raw_bytes(sl).hex())
                f.write(str(st) + "\n")
                f.write("end\n")
        # float8 (not in PyTorch 1.13): each element is Python's str() of its
        # float value, as PyTorch 2.x prints them.
        for code, fmt in FP8.items():
            f.write("dtype float8_%s\n" % fmt)
            f.write("data %s\n" % bytes(range(256)).hex())
            for c in range(256):
                v = struct.unpack("<f", struct.pack("<I", fp8_decode_f32(fmt, c)))[0]
                f.write(" %s\n" % v)
            f.write("[torch.storage.TypedStorage(dtype=torch.float8_%s, device=cpu) of size 256]\n" % fmt)
            f.write("end\n")
        meta = torch.empty(3, dtype=T.float32, device="meta").storage()
        f.write("dtype float32 meta 3\n")
        f.write(str(meta) + "\nend\n")


# --------------------------------------------------- PyTorch 2.x's dtypes
#
# Run with torch 2.x (tests/pyref/install.sh's environment), the same script
# writes the cases of the dtypes PyTorch 1.13 lacks, every one made by torch
# itself, beside the files above:
#
# conversions_torch2.bin -- conversions.bin's format: every dtype that
#     converts (1.13's, the float8s, uint16, uint32, uint64, float8_e8m0fnu,
#     bcomplex32)
#     into every one, the file tstor's conversions are tested against
#     (conversions.bin stays as 1.13's record). The sources of 1.13's dtypes
#     are conversions.bin's kinds of values, floats led by the edges of the
#     new dtypes; a float8 source is every code. Each result is what
#     PyTorch's loops give inside a buffer: the
#     middle copy of the source repeated three times, checked against a
#     repetition of four (the last few elements of a buffer go through a
#     scalar loop that gives other results for some out-of-range values, and
#     the script says how many). ATEN_CPU_CAPABILITY is avx2, which gives
#     what avx512 gives, so that any machine with AVX2 makes the same file.
# refusals_torch2.txt -- what x.to(dtype) raises between an opaque dtype
#     (float4_e2m1fn_x2, the bits types) and every other dtype that converts
#     or is opaque, "convert SRC DST => MESSAGE", and what reading (item),
#     setting (setitem) and filling (fill) its elements as numbers raise,
#     "OP DTYPE => MESSAGE".
# print_torch2.txt -- print.txt's form for the new dtypes, and "error
#     MESSAGE" in place of the lines where PyTorch refuses to print.

NEW = {27: "uint16", 28: "uint32", 29: "uint64", 44: "float8_e8m0fnu", 46: "bcomplex32"}
F4 = 45
BITS = {18: "bits1x8", 19: "bits2x4", 20: "bits4x2", 21: "bits8", 22: "bits16"}


def torch2_dtypes():
    dts = dict(DT)
    dts.update({23: T.float8_e5m2, 24: T.float8_e4m3fn, 25: T.float8_e5m2fnuz,
                26: T.float8_e4m3fnuz, 27: T.uint16, 28: T.uint32, 29: T.uint64,
                44: T.float8_e8m0fnu, 46: T.bcomplex32})
    return dts


def edge_floats():
    """Values where conversions into the new dtypes turn: the ends of the
    unsigned ranges, 2^(N-1) and 2^N, negative values, e8m0's rounding ties
    and its range."""
    v = [-1.0, -0.5, -0.0, 0.5, 0.75, 1.5, 2.5, 3.0, 65535.0, 65535.5, 65536.0, 65537.0,
         70000.0, -70000.0, -32769.0, 2.0 ** 31 - 1, 2.0 ** 31, 2.0 ** 31 + 1, 2.0 ** 32 - 1,
         2.0 ** 32 - 0.5, 2.0 ** 32, 2.0 ** 32 + 1, 2.0 ** 32 + 512, -2.0 ** 31, -2.0 ** 31 - 1,
         -2.0 ** 32, 5e9, -5e9, 2.0 ** 53 + 1, 2.0 ** 63 - 1024, 2.0 ** 63, 2.0 ** 63 + 2048,
         2.0 ** 64 - 2048, 2.0 ** 64, 2.0 ** 64 + 4096, -2.0 ** 63, -2.0 ** 63 - 2048, -2.0 ** 64,
         1e20, -1e20, 1e30, -1e30, 2.0 ** -126, 2.0 ** -127, 1.5 * 2.0 ** -127, 2.0 ** -128,
         1.25 * 2.0 ** -127, 2.0 ** -149, 1.5 * 2.0 ** -126, 1.25 * 2.0 ** -126, 1.5000001,
         1.4999999, 2.0 ** 127, 1.5 * 2.0 ** 127, 1.75 * 2.0 ** 127, 1.25 * 2.0 ** 127,
         448.0, 464.0, 470.0, 480.0, 57344.0, 61440.0, math.inf, -math.inf, math.nan]
    for _ in range(40):
        e = rng.randrange(-130, 128)
        m = rng.choice([1.5, 1.5 + 2 ** -20, 1.5 - 2 ** -20, 1.25, 1.75, 1 + 2 ** -23, 2 - 2 ** -23])
        v.append(rng.choice([1, -1]) * m * 2.0 ** e)
    return v


def unsigned_source(dtype):
    """uint16/32/64 values: the ends, 2^k and its neighbours (where float16,
    bfloat16, float32 and float64 round, ties included), random bits."""
    bits = torch.iinfo(dtype).bits
    top = (1 << bits) - 1
    vals = {0, 1, 2, 3, 127, 128, 255, 256, 448, 464, 480, 57344, 61440, 65504, 65519, 65520,
            65535, top, top - 1, 1 << (bits - 1), (1 << (bits - 1)) - 1, (1 << (bits - 1)) + 1}
    for p in range(bits):
        for k in (-3, -2, -1, 0, 1, 2, 3):
            for keep in (8, 11, 24, 53):  # bfloat16, float16, float32, float64 mantissas
                if p > keep:
                    vals.add((1 << p) + k * (1 << (p - keep - 1)))
    vals = sorted(x for x in vals if 0 <= x <= top)
    rng.shuffle(vals)
    vals = vals[:N // 2]
    vals += [rng.getrandbits(bits) for _ in range(N - len(vals))]
    return torch.tensor(vals, dtype=dtype)


def bcomplex32_source():
    """bcomplex32 (torch 2.15): bfloat16's specials, NaN payloads, subnormals,
    ties and random bits as either part; made by bits, since torch converts
    nothing else into it without rounding first."""
    re = float_source(15)
    re = torch.cat([re, from_bits([rng.getrandbits(16) for _ in range(N)], T.bfloat16)])[:N]
    perm = list(range(N))
    rng.shuffle(perm)
    both = torch.stack([re, re[perm]], dim=1).contiguous()
    return both.view(T.int16).view(T.int32).reshape(-1).view(T.bcomplex32)


def source2(code, dts):
    dtype = dts[code]
    if dtype in (T.uint16, T.uint32, T.uint64):
        return unsigned_source(dtype)
    if dtype == T.bcomplex32:
        edge = torch.tensor(edge_floats(), dtype=T.float64)
        edge = torch.complex(edge, edge.roll(1)).to(dtype)
        return torch.cat([edge, bcomplex32_source()])[:N]
    if dtype.itemsize == 1 and dtype.is_floating_point:  # float8: every code
        return torch.arange(256, dtype=T.int32).to(T.uint8).view(dtype)
    t = source(code)
    if dtype.is_floating_point or dtype.is_complex:
        edge = torch.tensor(edge_floats(), dtype=T.float64)
        if dtype.is_complex:
            edge = torch.complex(edge, edge.roll(1))
        t = torch.cat([edge.to(dtype), t])[:N]
    return t


def convert2(t, dtype):
    """What t.to(dtype) gives inside a buffer (see above), and how many
    elements t.to(dtype) alone gives otherwise."""
    n = len(t)
    three, four = raw_bytes(torch.cat([t] * 3).to(dtype)), raw_bytes(torch.cat([t] * 4).to(dtype))
    es = len(three) // (3 * n)
    mid = three[n * es:2 * n * es]
    if mid != four[n * es:2 * n * es] or mid != four[2 * n * es:3 * n * es]:
        sys.exit("PyTorch gave position-dependent results for %s -> %s" % (t.dtype, dtype))
    alone = raw_bytes(t.to(dtype))
    return mid, sum(alone[i * es:(i + 1) * es] != mid[i * es:(i + 1) * es] for i in range(n))


def error_text(fn):
    try:
        fn()
    except Exception as e:  # PyTorch's words are the expected result
        return "%s: %s" % (type(e).__name__, str(e).split("\n")[0])
    return None


def main_torch2():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "."
    dts = torch2_dtypes()
    name = {c: str(d).replace("torch.", "") for c, d in dts.items()}
    sources = {code: source2(code, dts) for code in sorted(dts)}
    blocks, tails = [], {}
    for code in sorted(dts):
        src = sources[code]
        dsts = []
        for dcode in sorted(dts):
            out, tail = convert2(src, dts[dcode])
            if tail:
                tails[(code, dcode)] = tail
            dsts.append((dcode, out))
        blocks.append((code, raw_bytes(src), dsts, len(src)))
    with open("%s/conversions_torch2.bin" % outdir, "wb") as f:
        f.write(b"TSTORCV1")
        f.write(struct.pack("<I", len(blocks)))
        for code, data, dsts, count in blocks:
            f.write(struct.pack("<BBHI", code, len(dsts), 0, count))
            f.write(data)
            for dcode, out in dsts:
                f.write(struct.pack("<B3x", dcode))
                f.write(out)
    pairs = sum(len(b[2]) for b in blocks)
    print("%d pairs, %d cases; a lone buffer's scalar tail differs in %s" % (
        pairs, sum(len(b[2]) * b[3] for b in blocks),
        ", ".join("%s -> %s (%d)" % (name[a], name[b], k) for (a, b), k in sorted(tails.items()))
        or "none"))

    opaque = {F4: T.float4_e2m1fn_x2}
    opaque.update({c: getattr(T, n) for c, n in BITS.items()})
    oname = dict(name)
    oname.update({c: str(d).replace("torch.", "") for c, d in opaque.items()})
    samples = {c: torch.tensor([0x12, 0xF7, 0x00, 0x81], dtype=T.uint8).view(d) for c, d in opaque.items()}
    with open("%s/refusals_torch2.txt" % outdir, "w") as f:
        f.write("# x.to(dtype) refused, PyTorch %s; see gen_vectors.py\n" % torch.__version__)
        for oc in sorted(opaque):
            o = samples[oc]
            others = [(c, sources[c][:2]) for c in sorted(dts)] + [
                (c, samples[c]) for c in sorted(opaque) if c != oc]
            for code, x in others:
                for src, dst, label in ((o, x.dtype, (oc, code)), (x, o.dtype, (code, oc))):
                    if code in opaque and label[0] != oc:
                        continue  # each pair of opaque dtypes once
                    msg = error_text(lambda: src.to(dst))
                    assert msg is not None, "PyTorch converts %s to %s" % (src.dtype, dst)
                    f.write("convert %s %s => %s\n" % (oname[label[0]], oname[label[1]], msg))
            # reading one element as a number, setting one from a number, filling
            for op, fn in (("item", lambda: o[0].item()), ("setitem", lambda: o.clone().__setitem__(0, 1.0)),
                           ("fill", lambda: o.clone().fill_(1.0))):
                f.write("%s %s => %s\n" % (op, oname[oc], error_text(fn)))
        # bcomplex32 reads and writes one element, but has no fill kernel
        x = sources[46][:4].clone()
        f.write("fill bcomplex32 => %s\n" % error_text(lambda: x.fill_(1.0)))

    with open("%s/print_torch2.txt" % outdir, "w") as f:
        f.write("# str() of torch.TypedStorage, PyTorch %s; see gen_vectors.py\n" % torch.__version__)
        for code in sorted(NEW):
            src = sources[code]
            for sl in (src[:48], src[-112:], src[:0]):  # the first edges, the last random
                f.write("dtype %s\n" % name[code])
                f.write("data %s\n" % raw_bytes(sl).hex())
                f.write(str(sl.clone().storage()) + "\n")
                f.write("end\n")
            meta = torch.empty(3, dtype=dts[code], device="meta").storage()
            f.write("dtype %s meta 3\n" % name[code])
            f.write(str(meta) + "\nend\n")
        for oc, od in sorted(opaque.items()):
            for data in (bytes([0x12, 0xF7, 0x00, 0x81]), b""):
                t = torch.tensor(list(data), dtype=T.uint8).view(od)
                f.write("dtype %s\n" % oname[oc])
                f.write("data %s\n" % data.hex())
                msg = error_text(lambda: str(t.storage()))
                f.write("error %s\n" % msg if msg else str(t.storage()) + "\n")
                f.write("end\n")
            f.write("dtype %s meta 2\n" % oname[oc])
            msg = error_text(lambda: str(torch.empty(2, dtype=od, device="meta").storage()))
            f.write("error %s\n" % msg if msg else
                    str(torch.empty(2, dtype=od, device="meta").storage()) + "\n")
            f.write("end\n")


if __name__ == "__main__":
    # TSTOR_GEN_ALL_VERSIONS=1: print.txt and conversions.bin under torch 2.x
    # too, for compare-torch2.sh
    if int(torch.__version__.split(".")[0]) >= 2 and not os.environ.get("TSTOR_GEN_ALL_VERSIONS"):
        main_torch2()
    else:
        main()
