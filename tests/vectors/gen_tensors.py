#!/usr/bin/python3
"""Generates the tensor vectors of tstor's tensor tests.

Run with Debian's /usr/bin/python3 and its python3-torch (PyTorch 1.13, CPU):

    /usr/bin/python3 tests/vectors/gen_tensors.py tests/vectors

and with torch 2.x for its answers to the views and the dtypes 1.13 lacks
(see "PyTorch 2.x's dtypes"):

    ~/.cache/tstor/pyref/bin/python tests/vectors/gen_tensors.py tests/vectors

It writes files, all committed, that tests/test_tensor_vectors.c reads. Each
line is one case; lists are comma-separated ("-" for an empty one) and every
tensor is written "DTYPE OFFSET SIZES STRIDES".

tensor_views.txt -- view operations: "BASE ; OP ARGS ; RESULT", where BASE is
    the tensor as_strided() on a zeroed storage of enough elements, RESULT is
    the tensor PyTorch returns (several, '|'-separated, for split and chunk,
    then "copy" when reshape or flatten copied, "view" when not) or "! MESSAGE"
    with the first line of PyTorch's error.

tensor_print.txt -- str() of tensors: "print DTYPE SIZES PERM", "data HEX" (the
    contiguous tensor's little-endian bytes), the lines PyTorch printed for
    it permuted by PERM ("-": not permuted), and "end"; "meta DTYPE SIZES",
    the lines and "end" for meta tensors.

tensor_copies.txt -- copy_: "DST ; SRC ; SHARED ; HEX" where DST and SRC are
    tensors as_strided() on storages filled with ((i % 97) - 40) * 0.5 in
    their dtype (SHARED 1: SRC is on DST's storage, read as SRC's dtype), and
    HEX the bytes of DST's whole storage afterwards, or "! MESSAGE".

The outputs are deterministic (fixed seed).
"""
import math
import random
import os
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
torch.set_num_threads(1)
T = torch
DTYPES = {
    "uint8": T.uint8, "int8": T.int8, "int16": T.int16, "int32": T.int32, "int64": T.int64,
    "float16": T.float16, "float32": T.float32, "float64": T.float64,
    "complex32": T.complex32, "complex64": T.complex64, "complex128": T.complex128,
    "bool": T.bool, "bfloat16": T.bfloat16,
}
NAME = {v: k for k, v in DTYPES.items()}
rng = random.Random(20261123)
INT64_MAX = (1 << 63) - 1


def L(v):
    return ",".join(str(int(x)) for x in v) if len(v) else "-"


def desc(t):
    return "%s %d %s %s" % (NAME[t.dtype], t.storage_offset(), L(t.shape), L(t.stride()))


def need(sizes, strides, off):
    if any(s == 0 for s in sizes):
        return off + 1
    return off + 1 + sum(st * (s - 1) for s, st in zip(sizes, strides))


def base(dtype, sizes, strides, off):
    n = need(sizes, strides, off)
    return torch.zeros(n, dtype=dtype).as_strided(sizes, strides, off)


def err(e):
    return "! " + str(e).split("\n")[0]


def random_layout(maxdim=4, maxsize=5):
    nd = rng.randint(0, maxdim)
    sizes = [rng.choice([0, 1, 1, 2, 3, 4, maxsize]) if rng.random() < 0.15 else rng.randint(1, maxsize)
             for _ in range(nd)]
    kind = rng.choice(["contig", "contig", "perm", "step", "expand", "random"])
    cs, z = [0] * nd, 1
    for d in reversed(range(nd)):
        cs[d] = z
        z *= max(sizes[d], 1)
    strides = list(cs)
    if kind == "perm" and nd > 1:
        p = list(range(nd))
        rng.shuffle(p)
        # a permuted contiguous tensor: sizes and strides of a permute
        psizes = [sizes[i] for i in p]
        cs2, z = [0] * nd, 1
        for d in reversed(range(nd)):
            cs2[d] = z
            z *= max(psizes[d], 1)
        inv = [0] * nd
        for i, q in enumerate(p):
            inv[q] = i
        strides = [cs2[inv[i]] for i in range(nd)]
    elif kind == "step":
        strides = [s * rng.choice([1, 2, 3]) for s in cs]
    elif kind == "expand":
        strides = [0 if (sizes[d] == 1 or rng.random() < 0.3) else cs[d] for d in range(nd)]
    elif kind == "random":
        strides = [rng.randint(0, 12) for _ in range(nd)]
    off = rng.choice([0, 0, 1, 3, 8])
    return sizes, strides, off


def views():
    out = []

    def case(dtype, sizes, strides, off, op, args, fn, multi=False, copyflag=False):
        b = base(dtype, sizes, strides, off)
        line = "%s ; %s %s ; " % (desc(b), op, args)
        try:
            r = fn(b)
        except Exception as e:  # noqa: BLE001 - every refusal is a case
            out.append(line + err(e))
            return
        if multi:
            res = " | ".join(desc(x) for x in r) if len(r) else "none"
        else:
            res = desc(r)
            if copyflag:
                same = r.storage().data_ptr() == b.storage().data_ptr()
                res += " view" if same else " copy"
        out.append(line + res)

    f32 = T.float32
    for _ in range(900):
        sizes, strides, off = random_layout()
        nd = len(sizes)
        dt = rng.choice([f32, f32, T.float64, T.int16, T.uint8, T.complex64, T.int64])
        rd = lambda: rng.randint(-nd - 1, nd)  # noqa: E731 - includes bad dims
        op = rng.choice(["view", "reshape", "narrow", "select", "slice", "transpose", "t",
                         "permute", "movedim", "expand", "squeeze", "squeeze_dim", "unsqueeze",
                         "flatten", "unflatten", "unfold", "diagonal", "split", "split_sizes",
                         "chunk", "view_dtype", "real", "imag", "view_as_real", "as_strided",
                         "contiguous", "clone"])
        numel = 1
        for s in sizes:
            numel *= s
        if op in ("view", "reshape"):
            shape = list(sizes)
            r = rng.random()
            if r < 0.3 and nd > 1:
                shape = [numel]
            elif r < 0.5:
                shape = [x for x in sizes if x != 1] + [1] * rng.randint(0, 1)
            elif r < 0.7 and nd >= 1:
                shape = list(sizes)
                shape[rng.randrange(nd)] = -1
            elif r < 0.8:
                shape = [rng.randint(-2, 6) for _ in range(rng.randint(0, 3))]
            elif nd >= 2:
                shape = [sizes[0] * sizes[1]] + list(sizes[2:])
            fn = (lambda s: (lambda b: b.view(s)))(shape) if op == "view" else \
                (lambda s: (lambda b: b.reshape(s)))(shape)
            case(dt, sizes, strides, off, op, L(shape), fn, copyflag=(op == "reshape"))
        elif op == "narrow":
            d, st, ln = rd(), rng.randint(-6, 6), rng.randint(-1, 5)
            case(dt, sizes, strides, off, op, "%d %d %d" % (d, st, ln), lambda b: b.narrow(d, st, ln))
        elif op == "select":
            d, i = rd(), rng.randint(-6, 6)
            case(dt, sizes, strides, off, op, "%d %d" % (d, i), lambda b: b.select(d, i))
        elif op == "slice":
            d = rd()
            st = rng.choice([0, 1, -1, -3, 2, 7, -9])
            en = rng.choice([INT64_MAX, 1, 3, -1, -2, 0, 9, -9])
            step = rng.choice([1, 1, 2, 3, 0])
            case(dt, sizes, strides, off, op, "%d %d %d %d" % (d, st, en, step),
                 lambda b: T.ops.aten.slice.Tensor(b, d, st, en, step))
        elif op == "transpose":
            a, c = rd(), rd()
            case(dt, sizes, strides, off, op, "%d %d" % (a, c), lambda b: b.transpose(a, c))
        elif op == "t":
            case(dt, sizes, strides, off, op, "", lambda b: b.t())
        elif op == "permute":
            p = list(range(nd))
            rng.shuffle(p)
            p = [x - nd if rng.random() < 0.3 else x for x in p]
            if rng.random() < 0.15 and nd:
                p[0] = p[-1]
            if rng.random() < 0.1:
                p = p[:-1]
            case(dt, sizes, strides, off, op, L(p), lambda b: b.permute(p))
        elif op == "movedim":
            k = rng.randint(0, max(nd, 1))
            src = rng.sample(range(max(nd, 1)), min(k, max(nd, 1)))
            dst = rng.sample(range(max(nd, 1)), len(src))
            if rng.random() < 0.1 and len(dst) > 1:
                dst[0] = dst[1]
            case(dt, sizes, strides, off, op, "%s %s" % (L(src), L(dst)),
                 lambda b: b.movedim(tuple(src), tuple(dst)))
        elif op == "expand":
            new = [rng.choice([1, 2, 3]) for _ in range(rng.randint(0, 2))]
            tgt = new + [(rng.choice([2, 3, 4]) if s == 1 else (s if rng.random() < 0.8 else -1))
                         for s in sizes]
            if rng.random() < 0.1 and tgt:
                tgt[0] = rng.choice([-1, 5, -2])
            case(dt, sizes, strides, off, op, L(tgt), lambda b: b.expand(tgt))
        elif op == "squeeze":
            case(dt, sizes, strides, off, op, "", lambda b: b.squeeze())
        elif op == "squeeze_dim":
            d = rd()
            case(dt, sizes, strides, off, op, "%d" % d, lambda b: b.squeeze(d))
        elif op == "unsqueeze":
            d = rng.randint(-nd - 2, nd + 1)
            case(dt, sizes, strides, off, op, "%d" % d, lambda b: b.unsqueeze(d))
        elif op == "flatten":
            a, c = rd(), rd()
            case(dt, sizes, strides, off, op, "%d %d" % (a, c), lambda b: b.flatten(a, c),
                 copyflag=True)
        elif op == "unflatten":
            d = rd()
            n = sizes[d] if -nd <= d < nd and nd else 1
            choices = [[n], [1, n], [n, 1], [-1], [2, -1], [3, 2], [-1, 1]]
            if n % 2 == 0:
                choices.append([2, n // 2])
            sz = rng.choice(choices)
            case(dt, sizes, strides, off, op, "%d %s" % (d, L(sz)),
                 lambda b: T.ops.aten.unflatten.int(b, d, sz))
        elif op == "unfold":
            d, size, step = rd(), rng.randint(0, 4), rng.choice([1, 1, 2, 3, 0])
            case(dt, sizes, strides, off, op, "%d %d %d" % (d, size, step),
                 lambda b: b.unfold(d, size, step))
        elif op == "diagonal":
            o, a, c = rng.randint(-3, 3), rd(), rd()
            case(dt, sizes, strides, off, op, "%d %d %d" % (o, a, c), lambda b: b.diagonal(o, a, c))
        elif op == "split":
            sz, d = rng.choice([1, 2, 3, 0, -1]), rd()
            case(dt, sizes, strides, off, op, "%d %d" % (sz, d), lambda b: b.split(sz, d), multi=True)
        elif op == "split_sizes":
            d = rd()
            n = sizes[d] if -nd <= d < nd and nd else 0
            parts, left = [], n
            while left > 0:
                k = rng.randint(0, left)
                parts.append(k)
                left -= k
            if rng.random() < 0.2:
                parts.append(1)
            case(dt, sizes, strides, off, op, "%s %d" % (L(parts), d),
                 lambda b: T.ops.aten.split_with_sizes(b, parts, d), multi=True)
        elif op == "chunk":
            c, d = rng.choice([1, 2, 3, 4, 0]), rd()
            case(dt, sizes, strides, off, op, "%d %d" % (c, d), lambda b: b.chunk(c, d), multi=True)
        elif op == "view_dtype":
            nt = rng.choice([T.uint8, T.int16, T.float32, T.float64, T.complex128, T.int64])
            case(dt, sizes, strides, off, op, NAME[nt], lambda b: b.view(nt))
        elif op == "real":
            case(dt, sizes, strides, off, op, "", lambda b: T.real(b))
        elif op == "imag":
            case(dt, sizes, strides, off, op, "", lambda b: T.imag(b))
        elif op == "view_as_real":
            case(dt, sizes, strides, off, op, "", lambda b: T.view_as_real(b))
        elif op == "as_strided":
            nsz = [rng.randint(0, 4) for _ in range(rng.randint(0, 3))]
            nst = [rng.randint(0, 5) for _ in nsz]
            if rng.random() < 0.1 and nst:
                nst[0] = -1
            no = rng.choice([0, 1, 2, 50, -1])
            case(dt, sizes, strides, off, op, "%s %s %d" % (L(nsz), L(nst), no),
                 lambda b: b.as_strided(nsz, nst, no))
        elif op == "contiguous":
            case(dt, sizes, strides, off, op, "", lambda b: b.contiguous(), copyflag=True)
        elif op == "clone":
            case(dt, sizes, strides, off, op, "", lambda b: b.clone())
    # edge cases by hand
    for sizes, strides, off, op, args, fn in [
        ([3, 4], [4, 1], 0, "view", "12", lambda b: b.view(12)),
        ([3, 4], [1, 3], 0, "view", "12", lambda b: b.view(12)),
        ([3, 4], [1, 3], 0, "reshape", "12", lambda b: b.reshape(12)),
        ([2, 3, 4], [12, 4, 1], 0, "view", "2,-1", lambda b: b.view(2, -1)),
        ([2, 3, 4], [12, 4, 1], 0, "view", "-1,-1", lambda b: b.view(-1, -1)),
        ([2, 3, 4], [12, 4, 1], 0, "view", "-2,12", lambda b: b.view(-2, 12)),
        ([0, 3], [3, 1], 0, "view", "0,-1", lambda b: b.view(0, -1)),
        ([0, 3], [3, 1], 0, "view", "3,0", lambda b: b.view(3, 0)),
        ([3, 4], [4, 1], 0, "view", "4611686018427387904,4611686018427387904,0,-1",
         lambda b: b.view(1 << 62, 1 << 62, 0, -1)),
        ([2, 1, 3], [3, 3, 1], 0, "view", "6", lambda b: b.view(6)),
        ([2, 1, 3], [1, 9, 2], 0, "view", "2,3", lambda b: b.view(2, 3)),
        ([4, 6], [12, 2], 1, "view", "2,2,3,2", lambda b: b.view(2, 2, 3, 2)),
        ([], [], 5, "view", "1,1", lambda b: b.view(1, 1)),
        ([], [], 5, "view", "-", lambda b: b.view([])),
        ([1], [7], 5, "view", "-", lambda b: b.view([])),
        ([], [], 0, "expand", "2,1", lambda b: b.expand(2, 1)),
        ([], [], 0, "expand", "1", lambda b: b.expand(1)),
        ([3, 4], [4, 1], 0, "expand", "2", lambda b: b.expand(2)),
        ([3, 1], [1, 1], 0, "expand", "-1,3,-1,5", lambda b: b.expand(-1, 3, -1, 5)),
        ([3, 1], [1, 1], 0, "expand", "2,3,5", lambda b: b.expand(2, 3, 5)),
        ([3, 1], [1, 1], 0, "expand", "1,3,5", lambda b: b.expand(1, 3, 5)),
        ([3, 4], [4, 1], 0, "narrow", "0 3 0", lambda b: b.narrow(0, 3, 0)),
        ([3, 4], [4, 1], 0, "narrow", "0 4 0", lambda b: b.narrow(0, 4, 0)),
        ([0], [1], 0, "narrow", "0 0 0", lambda b: b.narrow(0, 0, 0)),
        ([0], [1], 0, "narrow", "0 -1 0", lambda b: b.narrow(0, -1, 0)),
        ([], [], 0, "narrow", "0 0 1", lambda b: b.narrow(0, 0, 1)),
        ([], [], 0, "select", "0 0", lambda b: b.select(0, 0)),
        ([], [], 0, "transpose", "0 -1", lambda b: b.transpose(0, -1)),
        ([], [], 0, "unsqueeze", "0", lambda b: b.unsqueeze(0)),
        ([], [], 0, "unsqueeze", "-1", lambda b: b.unsqueeze(-1)),
        ([], [], 0, "squeeze_dim", "0", lambda b: b.squeeze(0)),
        ([], [], 0, "flatten", "0 -1", lambda b: b.flatten(0, -1)),
        ([], [], 3, "unfold", "0 1 1", lambda b: b.unfold(0, 1, 1)),
        ([3, 4], [4, 1], 0, "unfold", "1 -1 1", lambda b: b.unfold(1, -1, 1)),
        ([], [], 0, "split", "1 0", lambda b: b.split(1, 0)),
        ([], [], 0, "chunk", "1 0", lambda b: b.chunk(1, 0)),
        ([0, 2], [2, 1], 0, "chunk", "3 0", lambda b: b.chunk(3, 0)),
        ([0, 2], [2, 1], 0, "split", "0 0", lambda b: b.split(0, 0)),
        ([5, 2], [2, 1], 0, "chunk", "3 0", lambda b: b.chunk(3, 0)),
        ([6, 2], [2, 1], 0, "chunk", "4 0", lambda b: b.chunk(4, 0)),
        ([2, 3, 4], [12, 4, 1], 0, "diagonal", "1 0 2", lambda b: b.diagonal(1, 0, 2)),
        ([2, 3, 4], [12, 4, 1], 0, "diagonal", "-1 -1 1", lambda b: b.diagonal(-1, -1, 1)),
        ([2, 3, 4], [12, 4, 1], 0, "diagonal", "5 0 1", lambda b: b.diagonal(5, 0, 1)),
        ([2, 3, 4], [12, 4, 1], 0, "movedim", "0,1 2,0", lambda b: b.movedim((0, 1), (2, 0))),
        ([2, 3, 4], [12, 4, 1], 0, "movedim", "-1 0", lambda b: b.movedim(-1, 0)),
        ([2, 3, 4], [12, 4, 1], 0, "movedim", "0,1 1", lambda b: b.movedim((0, 1), (1,))),
        ([2, 3, 4], [12, 4, 1], 0, "flatten", "1 0", lambda b: b.flatten(1, 0)),
        ([2, 3, 4], [12, 4, 1], 0, "permute", "0,0,1", lambda b: b.permute(0, 0, 1)),
        ([2, 3, 4], [12, 4, 1], 0, "permute", "0,1", lambda b: b.permute(0, 1)),
        ([2, 3, 4], [12, 4, 1], 0, "t", "", lambda b: b.t()),
        ([4], [1], 0, "t", "", lambda b: b.t()),
        ([3, 4], [4, 1], 0, "unflatten", "1 -", lambda b: T.ops.aten.unflatten.int(b, 1, [])),
        ([3, 4], [4, 1], 0, "as_strided", "3 1 -1", lambda b: b.as_strided([3], [1], -1)),
        ([3, 4], [4, 1], 0, "as_strided", "20,2 1,1 0", lambda b: b.as_strided([20, 2], [1, 1], 0)),
        ([3, 4], [4, 1], 0, "as_strided", "4611686018427387904,4611686018427387904 1,1 0",
         lambda b: b.as_strided([1 << 62, 1 << 62], [1, 1], 0)),
        ([3, 4], [4, 1], 0, "as_strided", "2,2 1,-1 0", lambda b: b.as_strided([2, 2], [1, -1], 0)),
        ([3, 4], [4, 1], 2, "view_dtype", "float64", lambda b: b.view(T.float64)),
        ([3, 4], [8, 1], 0, "view_dtype", "float64", lambda b: b.view(T.float64)),
        ([3, 4], [6, 1], 0, "view_dtype", "float64", lambda b: b.view(T.float64)),
        ([3, 4], [1, 3], 0, "view_dtype", "uint8", lambda b: b.view(T.uint8)),
        ([3, 4], [4, 1], 1, "view_dtype", "uint8", lambda b: b.view(T.uint8)),
        ([], [], 0, "view_dtype", "int16", lambda b: b.view(T.int16)),
        ([2, 3, 4, 5], [60, 1, 15, 3], 0, "clone", "", lambda b: b.clone()),
        ([2, 3, 4, 5], [120, 1, 30, 6], 0, "clone", "", lambda b: b.clone()),
        ([2, 3, 4, 5, 6], [360, 1, 90, 18, 3], 0, "clone", "", lambda b: b.clone()),
        ([2, 3, 4, 5], [120, 40, 10, 2], 0, "clone", "", lambda b: b.clone()),
        ([3, 4], [0, 1], 0, "clone", "", lambda b: b.clone()),
        # no elements: contiguous by definition, so dense, and clone keeps
        # whatever strides there are
        ([0, 3], [1, 5], 0, "clone", "", lambda b: b.clone()),
        ([2, 0, 3], [7, 1, 100], 0, "clone", "", lambda b: b.clone()),
        ([0], [5], 0, "clone", "", lambda b: b.clone()),
        ([3, 0], [0, 0], 0, "clone", "", lambda b: b.clone()),
        ([2, 3, 0, 5], [1, 2, 6, 6], 0, "clone", "", lambda b: b.clone()),
        ([3, 4], [1, 3], 0, "contiguous", "", lambda b: b.contiguous()),
    ]:
        dt = T.float32
        cf = op in ("reshape", "flatten", "contiguous")
        multi = op in ("split", "chunk")
        case(dt, sizes, strides, off, op, args, fn, multi=multi, copyflag=cf)
    for dt in (T.complex64, T.complex128, T.complex32):
        for op, fn in [("real", lambda b: T.real(b)), ("imag", lambda b: T.imag(b)),
                       ("view_as_real", lambda b: T.view_as_real(b))]:
            case(dt, [3, 4], [8, 2], 1, op, "", fn)
    return out


def fill(n, dtype):
    v = torch.tensor([((i % 97) - 40) * 0.5 for i in range(n)], dtype=torch.float64)
    return v.to(dtype)


def raw_hex(t):
    t = t.contiguous().reshape(-1)
    if t.dtype == T.bool:
        t = t.view(T.uint8)
    elif t.dtype == T.complex32:
        t = t.view(T.int16)
    elif t.dtype == getattr(T, "bcomplex32", None):
        t = t.view(T.int32)
    b = t.view(T.uint8)
    return bytes(b.tolist()).hex()


def copies():
    out = []
    DT = [T.float32, T.float64, T.int32, T.int64, T.uint8, T.int8, T.int16, T.float16,
          T.bfloat16, T.bool, T.complex64, T.complex128]

    def case(dd, dsz, dst, doff, sd, ssz, sst, soff, shared):
        n = need(dsz, dst, doff)
        if shared:
            # src reads the same storage as dd bytes, as sd elements
            sbytes = need(ssz, sst, soff) * torch.tensor([], dtype=sd).element_size()
            nbytes = max(n * torch.tensor([], dtype=dd).element_size(), sbytes)
            es = torch.tensor([], dtype=dd).element_size()
            n = (nbytes + es - 1) // es
        storage = fill(n, dd)
        d = storage.as_strided(dsz, dst, doff)
        if shared:
            ses = torch.tensor([], dtype=sd).element_size()
            sv = storage.view(T.uint8)
            m = sv.numel() // ses
            s = sv[: m * ses].view(sd).as_strided(ssz, sst, soff)
        else:
            s = fill(need(ssz, sst, soff), sd).as_strided(ssz, sst, soff)
        line = "%s ; %s ; %d ; " % (desc(d), desc(s), shared)
        try:
            d.copy_(s)
        except Exception as e:  # noqa: BLE001
            out.append(line + err(e))
            return
        out.append(line + raw_hex(storage))

    for _ in range(700):
        sizes, strides, off = random_layout(4, 5)
        dd = rng.choice(DT)
        sd = rng.choice([dd, dd] + DT)
        kind = rng.random()
        if kind < 0.5:
            ssz, sst, soff = random_layout(2, 5)
            # broadcastable: take the trailing dims of dst, some set to 1
            k = min(len(sizes), rng.randint(0, len(sizes)))
            ssz = [1 if rng.random() < 0.3 else s for s in sizes[len(sizes) - k:]]
            if rng.random() < 0.1:
                ssz = [rng.randint(1, 3)] + ssz
            cs, z = [0] * len(ssz), 1
            for i in reversed(range(len(ssz))):
                cs[i] = z * rng.choice([1, 1, 2])
                z *= max(ssz[i], 1) * (cs[i] // z if z else 1)
            sst = cs
        else:
            ssz = list(sizes)
            perm = list(range(len(ssz)))
            rng.shuffle(perm)
            cs, z = [0] * len(ssz), 1
            for i in perm:
                cs[i] = z * rng.choice([1, 1, 1, 2])
                z *= max(ssz[i], 1) * rng.choice([1, 1, 2])
            sst = cs
            soff = rng.choice([0, 1, 5])
        shared = 1 if rng.random() < 0.2 else 0
        # A source that overlaps the destination gives results that depend on
        # the order the kernel reads and writes in. PyTorch's loops for float16
        # and bfloat16 convert in blocks, in an order tstor does not copy; the
        # other dtypes go element by element, as tstor does.
        if shared and dd in (T.float16, T.bfloat16):
            shared = 0
        if shared:
            sd = dd
        case(dd, sizes, strides, off, sd, ssz, sst, soff, shared)
    # overlapping and special cases by hand
    f = T.float32
    for dsz, dst, doff, ssz, sst, soff in [
        ([3], [2], 2, [3], [2], 0), ([3], [2], 0, [3], [2], 2), ([9], [1], 1, [9], [1], 0),
        ([3, 3], [3, 1], 0, [3, 3], [1, 3], 0), ([3, 2], [4, 1], 0, [3, 2], [4, 1], 1),
        ([3, 2], [4, 1], 1, [3, 2], [4, 1], 0), ([3, 2], [4, 1], 1, [3, 1], [4, 1], 0),
        ([3], [0], 0, [3], [1], 0), ([4], [1], 0, [4], [1], 0), ([2, 2], [2, 1], 0, [2, 2], [1, 2], 0),
        ([5], [2], 0, [5], [2], 1), ([2, 3], [0, 1], 0, [3], [1], 0),
    ]:
        case(f, dsz, dst, doff, f, ssz, sst, soff, 1)
    for dsz, dst, ssz, sst in [([3], [1], [1, 3], [3, 1]), ([3], [1], [2, 3], [3, 1]),
                               ([3, 4], [4, 1], [3], [1]), ([3, 4], [4, 1], [3, 1], [1, 1]),
                               ([0, 4], [4, 1], [3, 1], [1, 1]), ([1, 3], [3, 1], [3], [1]),
                               ([], [], [1, 1], [1, 1]), ([], [], [], []), ([2, 0], [1, 1], [0], [1]),
                               ([70, 70], [70, 1], [70, 70], [1, 70]), ([33, 65], [1, 33], [33, 65], [65, 1]),
                               ([4, 20, 20], [400, 20, 1], [4, 20, 20], [1, 80, 4])]:
        for dd, sd in [(f, f), (T.float64, T.int16), (T.uint8, T.float32), (T.complex64, T.float16)]:
            case(dd, dsz, dst, 0, sd, ssz, sst, 0, 0)
    return out


def print_values(dtype, n):
    """n values in one of the styles that make PyTorch choose a format."""
    style = rng.choice(["int", "dec", "big", "tiny", "wide", "mixed", "special"])
    vals = []
    for _ in range(n):
        if style == "int":
            v = float(rng.randint(-120, 120))
        elif style == "dec":
            v = rng.uniform(-100, 100)
        elif style == "big":
            v = rng.choice([1, -1]) * rng.uniform(1e8, 1e12)
        elif style == "tiny":
            v = rng.uniform(-1e-3, 1e-3)
        elif style == "wide":
            v = rng.choice([1, -1]) * 10 ** rng.uniform(-6, 6)
        elif style == "mixed":
            v = rng.choice([0.0, -0.0, 1.0, 2.5, -3.0, 1e5, 0.1])
        else:
            v = rng.choice([0.0, float("nan"), float("inf"), -float("inf"), -0.0, 7.0, 0.5])
        vals.append(v)
    if dtype in (T.complex32, T.complex64, T.complex128):
        im = print_values(T.float64, n)
        return torch.complex(torch.tensor(vals, dtype=T.float64), im.double()).to(dtype)
    if dtype == T.bool:
        return torch.tensor([rng.random() < 0.5 for _ in range(n)], dtype=T.bool)
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        lo, hi = max(info.min, -10 ** rng.randint(1, 12)), min(info.max, 10 ** rng.randint(1, 12))
        return torch.tensor([rng.randint(lo, hi) for _ in range(n)], dtype=T.int64).to(dtype)
    return torch.tensor(vals, dtype=T.float64).to(dtype)


def prints():
    out = []
    pdt = [T.float32, T.float64, T.float16, T.bfloat16, T.int64, T.int32, T.int16, T.int8,
           T.uint8, T.bool, T.complex64, T.complex128, T.complex32]
    shapes = [[], [1], [3], [5], [10], [25], [1, 1], [2, 3], [3, 4], [4, 1], [2, 3, 4], [2, 1, 3, 2],
              [40], [7, 9], [0], [0, 3], [2, 0, 2], [1001], [1500], [34, 30], [3, 400], [2, 2, 260],
              [11, 11, 11], [2, 3, 2, 3, 2]]
    for i in range(360):
        dt = pdt[i % len(pdt)]
        shape = shapes[(i * 7 + i // len(pdt)) % len(shapes)]
        n = 1
        for x in shape:
            n *= x
        if n > 1000 and dt not in (T.uint8, T.int8, T.bool, T.float16, T.int16, T.float32):
            shape = [7, 9]
            n = 63
        t = print_values(dt, n).reshape(shape)
        perm = list(range(len(shape)))
        if len(shape) >= 2 and rng.random() < 0.4:
            rng.shuffle(perm)
        shown = t.permute(perm) if perm else t
        raw = raw_hex(t)
        out.append("print %s %s %s" % (NAME[dt], L(shape), L(perm) if perm != list(range(len(shape))) else "-"))
        out.append("data " + (raw if raw else "-"))
        out.extend(str(shown).split("\n"))
        out.append("end")
    for dt in (T.float32, T.int64, T.float16, T.complex128):
        for shape in ([], [3], [2, 3], [0, 4], [100, 100]):
            out.append("meta %s %s" % (NAME[dt], L(shape)))
            out.extend(str(torch.empty(shape, dtype=dt, device="meta")).split("\n"))
            out.append("end")
    return out


# --------------------------------------------------- PyTorch 2.x's dtypes
#
# Run with torch 2.x (tests/pyref/install.sh's environment), the script writes
# torch 2.x's answers instead, in the same forms:
#
# tensor_views_torch2.txt -- the cases of tensor_views.txt, every one, as
#     torch 2.x answers them (tstor follows 2.x; tensor_views.txt stays
#     1.13's record, and compare-torch2.sh counts where the two differ).
# tensor_print_torch2.txt -- str() of uint16, uint32, uint64, float8_e8m0fnu,
#     float4_e2m1fn_x2 and bits tensors; "error MESSAGE" in place of the lines
#     where PyTorch refuses to print (a 0-dim float4_e2m1fn_x2, any bits
#     tensor with elements).
# tensor_copies_torch2.txt -- copy_ between those dtypes and the common ones.
# A float4_e2m1fn_x2 or bits storage is filled with the same values as uint8
# bytes (bits16 as int16).

NEW2 = ["uint16", "uint32", "uint64", "float8_e8m0fnu", "float4_e2m1fn_x2"]


def print_values2(dtype, n):
    """n values in one of the styles that make PyTorch choose a format."""
    if dtype in (T.uint16, T.uint32, T.uint64):
        top = torch.iinfo(dtype).max
        style = rng.choice(["small", "wide", "top"])
        lo, hi = {"small": (0, 200), "wide": (0, top), "top": (top - 1000, top)}[style]
        return torch.tensor([rng.randint(lo, hi) for _ in range(n)], dtype=dtype)
    style = rng.choice(["small", "ones", "fractions", "wide", "special"])
    if dtype == T.float4_e2m1fn_x2:
        lo, hi = {"small": (0, 9), "ones": (0, 1), "fractions": (0, 0), "wide": (0, 255),
                  "special": (250, 255)}[style]
        codes = [rng.randint(lo, hi) for _ in range(n)]
        return torch.tensor(codes, dtype=T.uint8).view(dtype)
    pick = {"small": lambda: rng.randint(120, 140), "ones": lambda: rng.choice([0, 127, 128]),
            "fractions": lambda: rng.randint(100, 127), "wide": lambda: rng.randint(0, 255),
            "special": lambda: rng.choice([0, 255, 127, 254, 1, 131])}[style]
    return torch.tensor([pick() for _ in range(n)], dtype=T.uint8).view(dtype)


def prints2():
    out = []
    pdt = [getattr(T, name) for name in NEW2]
    shapes = [[], [1], [3], [5], [10], [25], [1, 1], [2, 3], [3, 4], [4, 1], [2, 3, 4], [2, 1, 3, 2],
              [40], [7, 9], [0], [0, 3], [2, 0, 2], [1001], [1500], [34, 30], [3, 400], [2, 2, 260],
              [11, 11, 11], [2, 3, 2, 3, 2]]
    for i in range(160):
        dt = pdt[i % len(pdt)]
        shape = shapes[(i * 7 + i // len(pdt)) % len(shapes)]
        if i >= 150:  # 0-dim and small tensors of each
            dt, shape = pdt[i % len(pdt)], [[], [1], [2, 2]][i % 3]
        n = 1
        for x in shape:
            n *= x
        t = print_values2(dt, n).reshape(shape)
        perm = list(range(len(shape)))
        if len(shape) >= 2 and rng.random() < 0.4:
            rng.shuffle(perm)
        shown = t.permute(perm) if perm else t
        out.append("print %s %s %s" % (str(dt)[6:], L(shape), L(perm) if perm != list(range(len(shape))) else "-"))
        out.append("data " + (raw_hex(t.view(T.uint8) if dt.itemsize == 1 else t) or "-"))
        try:
            out.extend(str(shown).split("\n"))
        except Exception as e:  # noqa: BLE001 - PyTorch's refusal is the case
            out.append("error %s: %s" % (type(e).__name__, str(e).split("\n")[0]))
        out.append("end")
    # the bits types: PyTorch prints no element of them (only empty tensors)
    bits = [T.bits1x8, T.bits2x4, T.bits4x2, T.bits8, T.bits16]
    for dt in bits:
        for shape in ([], [3], [2, 3], [0], [2, 0]):
            n = 1
            for x in shape:
                n *= x
            data = bytes(rng.randint(0, 255) for _ in range(n * dt.itemsize))
            t = torch.tensor(list(data), dtype=T.uint8).view(dt).reshape(shape)
            out.append("print %s %s -" % (str(dt)[6:], L(shape)))
            out.append("data " + (data.hex() or "-"))
            try:
                out.extend(str(t).split("\n"))
            except Exception as e:  # noqa: BLE001 - PyTorch's refusal is the case
                out.append("error %s: %s" % (type(e).__name__, str(e).split("\n")[0]))
            out.append("end")
    for dt in pdt + bits:
        for shape in ([], [3], [2, 3]):
            out.append("meta %s %s" % (str(dt)[6:], L(shape)))
            out.extend(str(torch.empty(shape, dtype=dt, device="meta")).split("\n"))
            out.append("end")
    return out + prints_bcomplex32()


# torch 2.15's bcomplex32, from a random sequence of its own so that the
# cases above keep theirs
rng_bc = random.Random(46)


def bcomplex32_values(n):
    """n bcomplex32 values in one of the styles that make PyTorch choose a
    format (each part as bfloat16 rounds it)."""
    style = rng_bc.choice(["small", "ones", "fractions", "wide", "special"])
    pick = {"small": lambda: float(rng_bc.randint(-20, 20)),
            "ones": lambda: rng_bc.choice([0.0, 1.0, -1.0]),
            "fractions": lambda: rng_bc.randint(-400, 400) / 64,
            "wide": lambda: rng_bc.choice([-1, 1]) * 10.0 ** rng_bc.uniform(-12, 12),
            "special": lambda: rng_bc.choice([0.0, -0.0, math.inf, -math.inf, math.nan, 1.5,
                                               1e-40, 3e38])}[style]
    vals = [complex(pick(), pick()) for _ in range(n)]
    return torch.tensor(vals, dtype=T.complex128).to(T.bcomplex32)


def prints_bcomplex32():
    out = []
    shapes = [[], [1], [3], [5], [10], [1, 1], [2, 3], [3, 4], [2, 3, 4], [40], [0], [0, 3],
              [1001], [34, 30], [2, 2, 260], [2, 3, 2, 3, 2]]
    for i in range(48):
        shape = shapes[i % len(shapes)]
        n = 1
        for x in shape:
            n *= x
        t = bcomplex32_values(n).reshape(shape)
        perm = list(range(len(shape)))
        if len(shape) >= 2 and rng_bc.random() < 0.4:
            rng_bc.shuffle(perm)
        shown = t.permute(perm) if perm else t
        out.append("print bcomplex32 %s %s" % (L(shape), L(perm) if perm != list(range(len(shape))) else "-"))
        out.append("data " + (raw_hex(t) or "-"))
        out.extend(str(shown).split("\n"))
        out.append("end")
    for shape in ([], [3], [2, 3]):
        out.append("meta bcomplex32 %s" % L(shape))
        out.extend(str(torch.empty(shape, dtype=T.bcomplex32, device="meta")).split("\n"))
        out.append("end")
    return out


def fill2(n, dtype):
    if dtype.itemsize == 1 and (dtype == T.float4_e2m1fn_x2 or "bits" in str(dtype)):
        return fill(n, T.uint8).view(dtype)
    if dtype == T.bits16:
        return fill(n, T.int16).view(dtype)
    return fill(n, dtype)


def copies2():
    out = []
    DT2 = [getattr(T, name) for name in NEW2] + [T.float32, T.float64, T.int64, T.uint8,
                                                  T.float16, T.bfloat16, T.int32, T.bool]
    f4 = T.float4_e2m1fn_x2
    for i in range(580):
        sizes, strides, off = random_layout(4, 5)
        dd = rng.choice(DT2)
        sd = rng.choice([dd] + DT2)
        if i >= 400:  # float32 with float4: PyTorch's words depend on the layout
            dd, sd = rng.choice([(T.float32, f4), (f4, T.float32)])
        if i >= 520:  # the bits types: copied to themselves only
            b = rng.choice([T.bits1x8, T.bits2x4, T.bits4x2, T.bits8, T.bits16])
            dd, sd = rng.choice([(b, b), (b, b), (b, T.float32), (T.uint8, b), (b, f4), (T.bits8, b)])
        ssz = list(sizes)
        perm = list(range(len(ssz)))
        rng.shuffle(perm)
        sst, z = [0] * len(ssz), 1
        for i in perm:
            sst[i] = z * rng.choice([1, 1, 2])
            z *= max(ssz[i], 1)
        soff = rng.choice([0, 1, 5])
        if i >= 400 and rng.random() < 0.3:  # a source broadcast along dims
            ssz = [1 if rng.random() < 0.5 else x for x in ssz]
            sst = [0 if x == 1 and rng.random() < 0.5 else st for x, st in zip(ssz, sst)]
        out.append(copy_case(dd, sizes, strides, off, sd, ssz, sst, soff))
    return out + copies_bcomplex32()


def copy_case(dd, sizes, strides, off, sd, ssz, sst, soff):
    """One copy_ case's line: a destination view of dtype dd, a source view of
    sd, each over a storage of its own, and the destination storage after."""
    storage = fill2(need(sizes, strides, off), dd)
    d = storage.as_strided(sizes, strides, off)
    s = fill2(need(ssz, sst, soff), sd).as_strided(ssz, sst, soff)
    line = "%s ; %s ; 0 ; " % (desc2(d), desc2(s))
    try:
        d.copy_(s)
    except Exception as e:  # noqa: BLE001
        return line + err(e)
    return line + raw_hex(storage.view(T.uint8) if dd.itemsize == 1 or dd == T.bits16 else storage)


def copies_bcomplex32():
    """copy_ into and out of bcomplex32, with the common dtypes and the other
    new ones (float4_e2m1fn_x2 refused)."""
    out = []
    others = [T.bcomplex32, T.complex64, T.complex32, T.bfloat16, T.float32, T.float64, T.int64,
              T.uint8, T.bool, T.uint16, T.float8_e8m0fnu, T.float4_e2m1fn_x2]
    for i in range(120):
        sizes = [rng_bc.randint(0, 4) for _ in range(rng_bc.randint(0, 3))]
        strides, z = [0] * len(sizes), 1
        for k in reversed(range(len(sizes))):
            strides[k] = z * rng_bc.choice([1, 1, 2])
            z *= max(sizes[k], 1)
        off = rng_bc.choice([0, 1, 3])
        other = rng_bc.choice(others)
        dd, sd = (T.bcomplex32, other) if i % 2 == 0 else (other, T.bcomplex32)
        perm = list(range(len(sizes)))
        rng_bc.shuffle(perm)
        sst, z = [0] * len(sizes), 1
        for k in perm:
            sst[k] = z
            z *= max(sizes[k], 1)
        soff = rng_bc.choice([0, 1, 5])
        out.append(copy_case(dd, sizes, strides, off, sd, sizes, sst, soff))
    return out


def desc2(t):
    return "%s %d %s %s" % (str(t.dtype)[6:], t.storage_offset(), L(t.shape), L(t.stride()))


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "."
    head = "# PyTorch %s; see gen_tensors.py\n" % torch.__version__
    # one random sequence: the order of the calls is part of the output
    # TSTOR_GEN_ALL_VERSIONS=1: the files of every version, under torch 2.x
    # too, for compare-torch2.sh
    if int(torch.__version__.split(".")[0]) >= 2 and not os.environ.get("TSTOR_GEN_ALL_VERSIONS"):
        # the cases of tensor_views.txt (drawn from the same seed), answered
        # by torch 2.x; the random sequence then goes on as if not drawn
        state = rng.getstate()
        views2 = views()
        rng.setstate(state)
        files = [("tensor_views_torch2.txt", views2), ("tensor_print_torch2.txt", prints2()),
                 ("tensor_copies_torch2.txt", copies2())]
    else:
        files = [("tensor_views.txt", views()), ("tensor_copies.txt", copies()),
                 ("tensor_print.txt", prints())]
    for name, lines in files:
        with open(outdir + "/" + name, "w") as fh:
            fh.write(head)
            for line in lines:
                fh.write(line + "\n")


if __name__ == "__main__":  # gen_chains.py imports L and desc
    main()
