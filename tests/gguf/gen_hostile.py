#!/usr/bin/env python3
"""Writes GGUF files byte by byte, without the gguf package: hostile ones,
each reproducing a class of crash published against GGUF readers (or a rule
a reader must keep), and valid ones GGUFWriter cannot write. hostile.txt
lists each hostile file with the code tstor must refuse it with and words of
its message; test_gguf.c loads each every way and checks both, and that the
message names an offset. The valid ones (crafted/) are described by
describe.py, as the golden files are (generate.sh).

    gen_hostile.py OUTDIR     (writes OUTDIR/hostile/, OUTDIR/hostile.txt,
                               OUTDIR/crafted/)
"""
import os
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
F32_T, F16_T, Q4_0_T, Q8_0_T, Q4_K_T, I8_T = 0, 1, 2, 8, 12, 24


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def string(b, length=None):
    b = b.encode() if isinstance(b, str) else b
    return u64(len(b) if length is None else length) + b


def kv(key, vtype, payload):
    return string(key) + u32(vtype) + payload


def kv_u32(key, v):
    return kv(key, U32, u32(v))


def info(name, ne, gtype, offset, ndims=None):
    return (string(name) + u32(len(ne) if ndims is None else ndims) + b"".join(u64(d) for d in ne) +
            u32(gtype) + u64(offset))


def gguf(kvs=(), infos=(), data=b"", version=3, n_tensors=None, n_kv=None, alignment=32,
         magic=b"GGUF", pad=True):
    head = (magic + u32(version) + u64(len(infos) if n_tensors is None else n_tensors) +
            u64(len(kvs) if n_kv is None else n_kv) + b"".join(kvs) + b"".join(infos))
    if pad and infos:
        head += b"\0" * (-len(head) % alignment)
    return head + data


def f32s(n):
    return b"".join(struct.pack("<f", float(i)) for i in range(n))


ARCH = kv("general.architecture", STR, string("test"))
ONE = info("w", [4], F32_T, 0)
FOUR = f32s(4)

HOSTILE = [
    # header
    ("truncated_magic.gguf", b"GGU", "TSTOR_EINVAL", "GGUF"),
    ("truncated_header.gguf", b"GGUF" + u32(3) + u64(1), "TSTOR_EINVAL", "ends inside"),
    ("version_0.gguf", gguf(version=0), "TSTOR_ENOTSUP", "version 0"),
    ("version_1.gguf", gguf(version=1), "TSTOR_ENOTSUP", "version 1"),
    ("version_4.gguf", gguf(version=4), "TSTOR_ENOTSUP", "version 4"),
    ("version_huge.gguf", gguf(version=0xFFFFFFFF), "TSTOR_ENOTSUP", "version 4294967295"),
    ("big_endian.gguf", b"GGUF" + struct.pack(">I", 3) + struct.pack(">QQ", 0, 0),
     "TSTOR_ENOTSUP", "big-endian"),
    # counts the bytes cannot hold
    ("kv_count_huge.gguf", gguf([ARCH], n_kv=2**63), "TSTOR_EINVAL", "metadata entries, which"),
    ("kv_count_max.gguf", gguf([ARCH], n_kv=2**64 - 1), "TSTOR_EINVAL", "metadata entries, which"),
    ("kv_count_one_more.gguf", gguf([ARCH], n_kv=2), "TSTOR_EINVAL", "ends inside"),
    ("tensor_count_huge.gguf", gguf([ARCH], [ONE], FOUR, n_tensors=2**62), "TSTOR_EINVAL",
     "tensors, which"),
    ("tensor_count_one_more.gguf", gguf([ARCH], [ONE], n_tensors=2, pad=False), "TSTOR_EINVAL",
     "ends inside"),
    # strings
    ("key_length_past_end.gguf", gguf([string("k", 1000) + u32(U8) + b"\1"]), "TSTOR_EINVAL",
     "past the end"),
    ("key_length_max.gguf", gguf([string("k", 2**64 - 1) + b"\0" * 16]), "TSTOR_EINVAL",
     "past the end"),
    ("string_length_past_end.gguf", gguf([kv("s", STR, string("abc", 2**40))]), "TSTOR_EINVAL",
     "past the end"),
    ("string_length_max.gguf", gguf([kv("s", STR, string("abc", 2**64 - 1))]), "TSTOR_EINVAL",
     "past the end"),
    ("string_in_array_past_end.gguf", gguf([kv("a", ARR, u32(STR) + u64(2) + string("x") +
                                                string("y", 2**63))]), "TSTOR_EINVAL", "past the end"),
    ("key_not_utf8.gguf", gguf([kv(b"k\xff", U8, b"\1")]), "TSTOR_EINVAL", "not UTF-8"),
    ("key_surrogate.gguf", gguf([kv(b"k\xed\xa0\x80", U8, b"\1")]), "TSTOR_EINVAL", "not UTF-8"),
    ("tensor_name_not_utf8.gguf", gguf([ARCH], [info(b"w\xc0", [4], F32_T, 0)], FOUR),
     "TSTOR_EINVAL", "not UTF-8"),
    ("tensor_name_past_end.gguf", gguf([ARCH], [string("w", 2**32) + u32(1)], pad=False),
     "TSTOR_EINVAL", "past the end"),
    ("duplicate_key.gguf", gguf([kv_u32("k", 1), kv_u32("k", 2)]), "TSTOR_EINVAL",
     "key 'k' a second time"),
    # value types
    ("value_type_13.gguf", gguf([kv("k", 13, u32(0))]), "TSTOR_EINVAL", "value type 13"),
    ("value_type_max.gguf", gguf([kv("k", 0xFFFFFFFF, u32(0))]), "TSTOR_EINVAL",
     "value type 4294967295"),
    ("array_type_13.gguf", gguf([kv("a", ARR, u32(13) + u64(1) + b"\0")]), "TSTOR_EINVAL",
     "element type 13"),
    ("nested_array.gguf", gguf([kv("a", ARR, u32(ARR) + u64(1) + u32(U8) + u64(1) + b"\1")]),
     "TSTOR_EINVAL", "array of arrays"),
    ("array_count_huge.gguf", gguf([kv("a", ARR, u32(U8) + u64(2**40) + b"\1")]), "TSTOR_EINVAL",
     "an array of"),
    ("array_count_max.gguf", gguf([kv("a", ARR, u32(U64) + u64(2**64 - 1) + u64(1))]),
     "TSTOR_EINVAL", "an array of"),
    ("array_of_strings_count_huge.gguf", gguf([kv("a", ARR, u32(STR) + u64(2**61) + string("x"))]),
     "TSTOR_EINVAL", "an array of"),
    ("array_one_short.gguf", gguf([kv("a", ARR, u32(U32) + u64(3) + u32(1) + u32(2) + b"\0\0")]),
     "TSTOR_EINVAL", "an array of"),
    # alignment
    ("alignment_0.gguf", gguf([kv_u32("general.alignment", 0)], [ONE], FOUR), "TSTOR_EINVAL",
     "not a power of two"),
    ("alignment_48.gguf", gguf([kv_u32("general.alignment", 48)], [ONE], FOUR), "TSTOR_EINVAL",
     "not a power of two"),
    ("alignment_u64.gguf", gguf([kv("general.alignment", U64, u64(32))], [ONE], FOUR),
     "TSTOR_EINVAL", "of type u64, not u32"),
    ("alignment_string.gguf", gguf([kv("general.alignment", STR, string("32"))], [ONE], FOUR),
     "TSTOR_EINVAL", "of type str, not u32"),
    ("alignment_2g.gguf", gguf([kv_u32("general.alignment", 2**31)], [ONE], FOUR, pad=False),
     "TSTOR_EINVAL", "past the end"),
    # tensor types and shapes
    ("tensor_type_43.gguf", gguf([ARCH], [info("w", [4], 43, 0)], FOUR), "TSTOR_EINVAL",
     "ggml type 43"),
    ("tensor_type_removed.gguf", gguf([ARCH], [info("w", [32], 4, 0)], FOUR * 8), "TSTOR_EINVAL",
     "ggml type 4"),
    ("tensor_type_max.gguf", gguf([ARCH], [info("w", [4], 0xFFFFFFFF, 0)], FOUR), "TSTOR_EINVAL",
     "ggml type 4294967295"),
    ("n_dims_65.gguf", gguf([ARCH], [info("w", [1] * 65, F32_T, 0)], FOUR), "TSTOR_EINVAL",
     "65 dimensions"),
    ("n_dims_max.gguf", gguf([ARCH], [info("w", [4], F32_T, 0, ndims=0xFFFFFFFF)], FOUR),
     "TSTOR_EINVAL", "4294967295 dimensions"),
    ("n_dims_past_end.gguf", gguf([ARCH], [info("w", [], F32_T, 0, ndims=60)], pad=False),
     "TSTOR_EINVAL", "ends inside"),
    ("dim_negative.gguf", gguf([ARCH], [info("w", [2**63, 0], F32_T, 0)], FOUR), "TSTOR_EINVAL",
     "dimension 0"),
    ("numel_overflow.gguf", gguf([ARCH], [info("w", [2**32, 2**32], F32_T, 0)], FOUR),
     "TSTOR_EOVERFLOW", "number of elements overflows"),
    ("numel_overflow_int64.gguf", gguf([ARCH], [info("w", [2**32, 2**31], F32_T, 0)], FOUR),
     "TSTOR_EOVERFLOW", "number of elements overflows"),
    ("numel_overflow_empty.gguf", gguf([ARCH], [info("w", [0, 2**40, 2**40], F32_T, 0)], FOUR),
     "TSTOR_EOVERFLOW", "number of elements overflows"),
    ("nbytes_overflow.gguf", gguf([ARCH], [info("w", [2**61, 2], F32_T, 0)], FOUR),
     "TSTOR_EOVERFLOW", "number of bytes overflows"),
    ("row_not_whole_blocks.gguf", gguf([ARCH], [info("w", [33, 2], Q4_0_T, 0)], b"\0" * 64),
     "TSTOR_EINVAL", "not a multiple"),
    ("quantized_scalar.gguf", gguf([ARCH], [info("w", [], Q4_K_T, 0)], b"\0" * 144),
     "TSTOR_EINVAL", "not a multiple"),
    ("duplicate_tensor.gguf", gguf([ARCH], [ONE, info("w", [4], F32_T, 32)], FOUR + b"\0" * 16 + FOUR),
     "TSTOR_EINVAL", "tensor 'w' a second time"),
    # where the bytes lie
    ("offset_past_end.gguf", gguf([ARCH], [info("w", [4], F32_T, 1 << 20)], FOUR), "TSTOR_EINVAL",
     "past the end"),
    ("offset_wraps.gguf", gguf([ARCH], [info("w", [4], F32_T, 2**64 - 32)], FOUR), "TSTOR_EINVAL",
     "past the end"),
    ("offset_misaligned.gguf", gguf([ARCH], [info("w", [4], F32_T, 4)], FOUR * 2), "TSTOR_EINVAL",
     "not a multiple of the alignment"),
    ("data_truncated.gguf", gguf([ARCH], [info("w", [64], F32_T, 0)], f32s(63)), "TSTOR_EINVAL",
     "past the end"),
    ("huge_tensor_small_file.gguf", gguf([ARCH], [info("w", [2**30, 64], F32_T, 0)], FOUR),
     "TSTOR_EINVAL", "past the end"),
    ("overlap.gguf", gguf([ARCH], [info("a", [16], F32_T, 0), info("b", [8], F32_T, 32)], f32s(16)),
     "TSTOR_EINVAL", "overlaps"),
    ("overlap_same_offset.gguf", gguf([ARCH], [info("a", [4], F32_T, 0), info("b", [4], I8_T, 0)],
                                      FOUR), "TSTOR_EINVAL", "overlaps"),
    ("overlap_later_first.gguf", gguf([ARCH], [info("b", [8], F32_T, 32), info("a", [16], F32_T, 0)],
                                      f32s(16)), "TSTOR_EINVAL", "overlaps"),
]

# Valid, though unusual: what a reader must not refuse.
VALID = [
    ("ok_no_tensors_no_padding.gguf", gguf([ARCH])),
    ("ok_empty_file_body.gguf", gguf()),
    ("ok_empty_arrays.gguf", gguf([kv("e.%d" % t, ARR, u32(t) + u64(0)) for t in range(13) if t != ARR])),
    ("ok_empty_tensor_offset_anywhere.gguf", gguf([ARCH], [ONE, info("e", [0, 8], F32_T, 1 << 40)],
                                                  FOUR)),
    ("ok_gap_between.gguf", gguf([ARCH], [info("a", [4], F32_T, 0), info("b", [4], F32_T, 64)],
                                 FOUR + b"\0" * 48 + FOUR + b"\0" * 16)),
    ("ok_out_of_order.gguf", gguf([ARCH], [info("b", [4], F32_T, 32), info("a", [4], F32_T, 0)],
                                  FOUR + b"\0" * 16 + FOUR)),
    ("ok_alignment_1.gguf", gguf([kv_u32("general.alignment", 1)], [info("w", [3], F32_T, 0)],
                                 f32s(3), alignment=1)),
    ("ok_bool_byte_2.gguf", gguf([kv("b", BOOL, b"\2")])),
    ("ok_trailing_bytes.gguf", gguf([ARCH], [ONE], FOUR + b"trailing")),
    ("ok_empty_key.gguf", gguf([kv_u32("", 1)])),
    ("ok_scalar_tensor.gguf", gguf([ARCH], [info("s", [], F32_T, 0)], f32s(1))),
]


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "hostile"), exist_ok=True)
    os.makedirs(os.path.join(out, "crafted"), exist_ok=True)
    lines = ["# FILE  expected code  words of its message"]
    for name, data, code, words in HOSTILE:
        open(os.path.join(out, "hostile", name), "wb").write(data)
        lines.append("%s %s %s" % (name, code, words))
    for name, data in VALID:
        open(os.path.join(out, "crafted", name[3:]), "wb").write(data)
    open(os.path.join(out, "hostile.txt"), "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
