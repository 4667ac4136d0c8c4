#!/usr/bin/python3
"""Generates tensor_chains.txt: random chains of views on meta tensors, as
PyTorch computes them, and tensor_chains_torch2.txt, the same chains as torch
2.x walks them, for tests/test_tensor_vectors.c.

Run with Debian's /usr/bin/python3 and its python3-torch (PyTorch 1.13):

    /usr/bin/python3 tests/vectors/gen_chains.py tests/vectors

and, for a longer run with another seed (the test reads the file that
TSTOR_CHAINS_FILE names instead of the committed one; tstor follows torch 2.x,
so the run is torch 2.x's), until it exits 0:

    until ~/.cache/tstor/pyref/bin/python tests/vectors/gen_chains.py OUTDIR SEED COUNT; do :; done

and, to walk the chains of a tensor_chains.txt again step by step with another
PyTorch, whatever random numbers it would draw:

    ~/.cache/tstor/pyref/bin/python tests/vectors/gen_chains.py OUTDIR --replay FILE

Under torch 2.x it writes tensor_chains_torch2.txt, the file the test reads:
the chains of the committed tensor_chains.txt (1.13's record) replayed, FILE
when given; with TSTOR_GEN_ALL_VERSIONS=1 it writes tensor_chains.txt instead
(compare-torch2.sh compares that with 1.13's).

Each line is "BASE ; STEP ; STEP ... ; RESULT". BASE is "DTYPE OFFSET SIZES
STRIDES", a meta tensor as_strided() on a storage of just enough elements;
each STEP is "OP ARGS" as in tensor_views.txt, and an op that returns several
tensors (split, split_sizes, chunk) carries "@K": the chain goes on with the
K-th. RESULT is the last tensor's layout, "none" when a split gave no
tensor, or "! K MESSAGE": step K (from 1) was refused with PyTorch's message.

Half the chains start from layouts whose sizes, strides or offsets are near
INT64_MAX and take arguments near the int64 limits, where PyTorch's C++ may
overflow without a word. Each step's sizes, strides and offset are recomputed
in unbounded integers where the op's formula is a product (exact(),
exact_shape()), and a view is checked to stay inside its source: where
PyTorch's answer differs, or breaks the invariants a tensor keeps, or is a
refusal its wrapped arithmetic caused, the step is written "! K overflow",
followed by the exact layout where one exists: tstor must refuse that step
with TSTOR_EOVERFLOW or give exactly that layout. FOUND adds chains that once
went otherwise in tstor (FOUND_TORCH2 those found under torch 2.x, to
tensor_chains_torch2.txt). The output is deterministic (fixed seed).
"""
import os
import random
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_tensors import L, desc  # noqa: E402 -- the layouts as tensor_views.txt writes them

warnings.filterwarnings("ignore")
T = torch
INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
DTYPES = {"uint8": T.uint8, "int16": T.int16, "float32": T.float32, "float64": T.float64,
          "complex64": T.complex64, "int64": T.int64}
NAME = {v: k for k, v in DTYPES.items()}
rng = random.Random(20261126)
HUGE = [INT64_MAX, INT64_MAX - 1, 1 << 62, (1 << 62) + 1, 1 << 61, 1 << 32, (1 << 31) + 1, 3037000500]
CHAINS = 3000
# PyTorch 1.13 keeps ints at or below -2^62 for symbolic sizes and refuses them
# as arguments with this message: a trait of that version, not of the views.
SYMBOLIC = "is_symbolic()"


def extent(sizes, strides, off):
    """Elements a storage needs for the layout, None when empty."""
    if any(s == 0 for s in sizes):
        return None
    return off + 1 + sum(st * (s - 1) for s, st in zip(sizes, strides))


def sound(t):
    """Whether PyTorch's result keeps a tensor's invariants (no wrap-around)."""
    sizes, strides, off = list(t.shape), list(t.stride()), t.storage_offset()
    if None in strides:  # PyTorch 1.13 gives None for a stride it wrapped into its symbolic range
        return False
    if min(sizes + strides + [off], default=0) < 0:
        return False
    numel = 1
    for s in sizes:
        numel *= s
    if numel > INT64_MAX:
        return False
    n = extent(sizes, strides, off)
    return n is None or n * t.element_size() <= INT64_MAX


def err(e):
    return str(e).split("\n")[0]


def huge_value():
    return rng.choice(HUGE)


def small_layout():
    nd = rng.randint(0, 4)
    sizes = [rng.choice([0, 1, 2, 3, 4, 5]) for _ in range(nd)]
    strides, z = [0] * nd, 1
    for d in reversed(range(nd)):
        strides[d] = z
        z *= max(sizes[d], 1)
    if nd and rng.random() < 0.4:
        strides = [rng.randint(0, 12) for _ in range(nd)]
    return sizes, strides, rng.choice([0, 0, 1, 7])


def huge_layout(itemsize):
    """Sizes, strides and an offset with one or more of them near the limits,
    whose byte extent still fits in int64 (else PyTorch refuses the base)."""
    while True:
        nd = rng.randint(1, 4)
        sizes = [rng.choice([1, 2, 3, huge_value(), huge_value() >> rng.randint(1, 40)])
                 for _ in range(nd)]
        strides = [rng.choice([0, 1, 2, 3, huge_value() >> rng.randint(0, 40)]) for _ in range(nd)]
        if rng.random() < 0.5:
            z = 1
            for d in reversed(range(nd)):
                strides[d] = z
                z *= sizes[d]
        off = rng.choice([0, 0, 5, huge_value() >> rng.randint(2, 40)])
        n = extent(sizes, strides, off)
        if n is not None and n * itemsize <= INT64_MAX:
            numel = 1
            for s in sizes:
                numel *= s
            if numel <= INT64_MAX:
                return sizes, strides, off


def layout_of(t):
    return list(t.shape), list(t.stride()), t.storage_offset()


def wrap(d, n):
    return d + n if d < 0 else d


def exact(text, t):
    """The layout the op's formula gives in unbounded integers, for the ops
    whose new strides or offset are products: where PyTorch's differs, its
    int64 arithmetic wrapped. None for the other ops."""
    words = text.split()
    op, a = words[0], [int(w) for w in words[1:] if w.lstrip("-").isdigit()]
    sizes, strides, off = layout_of(t)
    nd = len(sizes)
    if op == "view_dtype":
        return exact_view_dtype(t, words[1])
    if op in ("split", "split_sizes", "chunk"):
        return exact_piece(op, words, t)
    if nd == 0 or op not in ("slice", "narrow", "select", "unfold", "diagonal", "unsqueeze"):
        return None
    if op == "unsqueeze":
        d = wrap(a[0], nd + 1)
        return (sizes[:d] + [1] + sizes[d:],
                strides[:d] + [1 if d >= nd else sizes[d] * strides[d]] + strides[d:], off)
    if op == "diagonal":
        o, d1, d2 = a[0], wrap(a[1], nd), wrap(a[2], nd)
        n = max(min(sizes[d1], sizes[d2] - o), 0) if o >= 0 else max(min(sizes[d1] + o, sizes[d2]), 0)
        if n:
            off += o * strides[d2] if o >= 0 else -o * strides[d1]
        keep = [i for i in range(nd) if i not in (d1, d2)]
        return ([sizes[i] for i in keep] + [n], [strides[i] for i in keep] + [strides[d1] + strides[d2]],
                off)
    d = wrap(a[0], nd)
    n, st = sizes[d], strides[d]
    if op == "select":
        return sizes[:d] + sizes[d + 1:], strides[:d] + strides[d + 1:], off + wrap(a[1], n) * st
    if op == "unfold":
        size, sp = a[1], a[2]
        return (sizes[:d] + [(n - size) // sp + 1] + sizes[d + 1:] + [size],
                strides[:d] + [st * sp] + strides[d + 1:] + [st], off)
    if op == "narrow":
        start, length, sp = wrap(a[1], max(n, 1)), a[2], 1  # wrapped as a dim is
    else:
        start, end, sp = a[1], a[2], a[3]
        start, end = wrap(start, n), wrap(end, n)
        start = min(max(start, 0), n)
        end = min(max(end, start), n)
        length = (end - start + sp - 1) // sp
    sizes[d], strides[d] = length, st * sp
    return sizes, strides, off + start * st


def exact_view_dtype(t, name):
    sizes, strides, off = layout_of(t)
    a, b = t.element_size(), torch.empty(0, dtype=DTYPES[name]).element_size()
    if a == b:
        return sizes, strides, off
    if not sizes or strides[-1] != 1:
        return None  # refused by a rule of the op
    if b < a:
        r = a // b
        return sizes[:-1] + [sizes[-1] * r], [x * r for x in strides[:-1]] + [1], off * r
    r = b // a
    return sizes[:-1] + [sizes[-1] // r], [x // r for x in strides[:-1]] + [1], off // r


def exact_piece(op, words, t):
    """The picked tensor ("@K") of a split, split_sizes or chunk."""
    if " @" not in " ".join(words):
        return None
    sizes, strides, off = layout_of(t)
    nd = len(sizes)
    k = int(words[-1][1:])
    if op == "split_sizes":
        parts = [int(x) for x in words[1].split(",")] if words[1] != "-" else []
        d = wrap(int(words[2]), nd)
        size, start = parts[k], sum(parts[:k])
    else:
        d = wrap(int(words[2]), nd)
        n = sizes[d]
        if op == "chunk":
            c = int(words[1])
            sz = (n + c - 1) // c
            if sz == 0:  # chunks of an empty dimension: `c` empty tensors
                sz, size, start = 0, 0, 0
        else:
            sz = int(words[1])
            if sz <= 0:
                return None  # a rule of the op
        if sz:
            start = k * sz
            size = min(sz, n - start)
    sizes[d] = size
    return sizes, strides, off + start * strides[d]


def prod(v):
    n = 1
    for x in v:
        n *= x
    return n


def exact_shape(text, t):
    """For view, reshape, unflatten and flatten: ("ok", shape) or ("invalid",
    the refusal PyTorch gives for those sizes when nothing wraps), from the
    sizes in unbounded integers; None where a rule of the op decides."""
    words = text.split()
    op, sizes, nd = words[0], list(t.shape), t.dim()
    if op == "flatten":
        if nd == 0:
            return None
        a, b = wrap(int(words[1]), nd), wrap(int(words[2]), nd)
        if not 0 <= a <= b < nd:
            return None
        return "ok", sizes[:a] + [prod(sizes[a:b + 1])] + sizes[b + 1:]
    if op in ("view", "reshape"):
        shape = [int(x) for x in words[1].split(",")] if words[1] != "-" else []
        n, lead, tail = t.numel(), [], []
    elif op == "unflatten":
        d = wrap(int(words[1]), nd)
        if not 0 <= d < nd:
            return None
        shape = [int(x) for x in words[2].split(",")] if words[2] != "-" else []
        n, lead, tail = sizes[d], sizes[:d], sizes[d + 1:]
    else:
        return None
    if not shape or shape.count(-1) > 1 or any(x < -1 for x in shape):
        return None
    p = prod(x for x in shape if x != -1)
    if -1 not in shape:
        ok = p == n
    else:
        ok = p > 0 and n % p == 0
        if ok:
            shape = [n // p if x == -1 else x for x in shape]
    if ok:
        return "ok", lead + shape + tail
    if op == "unflatten":
        return "invalid", ("unflatten: Provided sizes %s don't multiply up to the size of dim %d (%d) in the "
                           "input tensor" % (dims(words[2]), d, n))
    if p == 0 and -1 in shape:
        return None
    return "invalid", "shape '%s' is invalid for input of size %d" % (dims(words[1]), n)


def dims(text):
    return "[" + ", ".join(text.split(",")) + "]" if text != "-" else "[]"


def contiguous_overflows(shape):
    z = 1
    for s in reversed(shape[1:]):
        z *= max(s, 1)
        if z > INT64_MAX:
            return True
    return False


def representable(layout, itemsize):
    sizes, strides, off = layout
    if min(sizes + strides + [off], default=0) < 0 or max(sizes + strides + [off], default=0) > INT64_MAX:
        return False
    numel = 1
    for s in sizes:
        numel *= s
    n = extent(sizes, strides, off)
    return numel <= INT64_MAX and (n is None or n * itemsize <= INT64_MAX)


def inside(r, t):
    """Whether a non-empty view's elements lie within its source's extent, as
    a view's must (as_strided's are checked against the storage instead)."""
    rs, rt, ro = layout_of(r)
    ts, tt, to = layout_of(t)
    if r.numel() == 0 or t.numel() == 0 or not r._is_view():  # reshape may copy
        return True
    rscale = r.element_size()
    tscale = t.element_size()
    lo_r, hi_r = ro * rscale, (extent(rs, rt, ro) * rscale) - 1
    lo_t, hi_t = to * tscale, (extent(ts, tt, to) * tscale) - 1
    return lo_t <= lo_r and hi_r <= hi_t


# PyTorch's refusals that are its int64 arithmetic overflowing, not a rule of
# the op (as_strided's own negative-stride and storage-size checks are rules).
OVERFLOW_MESSAGES = ("numel: integer multiplication overflow", "Storage size calculation overflowed",
                     "Stride calculation overflowed",  # torch 2.x's computeStride
                     "as_strided: Negative strides are not supported",
                     "IntArrayRef contains an int that cannot be represented as a SymInt",
                     # a view's exact result always lies within its source:
                     # outside it, the view's own arithmetic wrapped
                     "setStorage:", "Tensor: invalid storage offset")


# chunk's split size is ceil(n / chunks), which PyTorch computes as
# (n + chunks - 1) / chunks: past int64 it comes out negative, and split
# refuses it. A rule of split, but no refusal of chunk's.
CHUNK_WRAPPED = "split expects split_size be non-negative"

# A refusal of sizes that do multiply up: PyTorch's product of them wrapped.
SHAPE_REFUSALS = ("shape '", "unflatten: Provided sizes", "cannot reshape tensor of 0 elements")


def too_big_for_storage(text, t):
    """Whether an as_strided step needs more bytes than int64 counts, which
    PyTorch reports with a wrapped-around size."""
    words = text.split()
    if words[0] != "as_strided":
        return False
    sizes = [int(x) for x in words[1].split(",")] if words[1] != "-" else []
    strides = [int(x) for x in words[2].split(",")] if words[2] != "-" else []
    if min(sizes + strides, default=0) < 0:
        return False
    n = extent(sizes, strides, int(words[3]))
    return n is not None and n * t.element_size() > INT64_MAX


def exact_empty_view(text, t):
    """The layout of a view of an empty tensor as a new shape: the old strides
    for the same shape, else contiguous ones (counting a size 0 as 1)."""
    shaped = exact_shape(text, t)
    if t.numel() or not shaped or shaped[0] != "ok":
        return None
    shape = shaped[1]
    if shape == list(t.shape):
        return layout_of(t)
    strides, z = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        strides[d] = z
        z *= max(shape[d], 1)
    return shape, strides, t.storage_offset()


def overflow(text, t, k):
    """"! K overflow", with the exact layout where it is representable: tstor
    must refuse the step with TSTOR_EOVERFLOW or give exactly that."""
    e = exact(text, t) or exact_empty_view(text, t)
    if e is not None and representable(e, t.element_size()):
        return "! %d overflow %s %d %s %s" % (k, NAME[t.dtype], e[2], L(e[0]), L(e[1]))
    return "! %d overflow" % k


def base(dtype, sizes, strides, off):
    n = extent(sizes, strides, off) or off + 1
    return torch.empty(n, dtype=dtype, device="meta").as_strided(sizes, strides, off)


def number(near, huge):
    """An argument: mostly near `near`, sometimes at the int64 limits."""
    if huge and rng.random() < 0.35:
        return rng.choice([INT64_MAX, INT64_MAX - 1, 1 << 62, -(1 << 61), huge_value()])
    return near + rng.randint(-2, 2)


def step(t, huge):
    """One random view op for t: (text, function); the text starts with the
    op's name and its arguments follow, as exact() reads them."""
    nd, sizes = t.dim(), list(t.shape)
    numel = t.numel()

    def rd():
        if rng.random() < 0.08:
            return rng.choice([-nd - 1, nd])
        return rng.randint(-nd, nd - 1) if nd else rng.choice([0, -1])

    def size_of(d):
        return sizes[d] if -nd <= d < nd else 1

    op = rng.choice(["view", "view", "reshape", "narrow", "select", "slice", "slice", "transpose",
                     "t", "permute", "movedim", "expand", "expand", "squeeze", "squeeze_dim",
                     "unsqueeze", "unsqueeze", "flatten", "unflatten", "unfold", "unfold",
                     "diagonal", "split", "split_sizes", "chunk", "view_dtype", "as_strided"])
    if op in ("view", "reshape"):
        r = rng.random()
        if r < 0.25:
            shape = [-1]
        elif r < 0.45 and nd >= 2:
            shape = [sizes[0] * sizes[1]] + sizes[2:]
        elif r < 0.6 and nd >= 1:
            shape = list(sizes)
            shape[rng.randrange(nd)] = -1
        elif r < 0.75:
            k = rng.choice([2, 3, 4, 1 << 31, 1 << 32])
            shape = [k, -1] if rng.random() < 0.5 else [-1, k]
        elif r < 0.85 and huge:
            shape = [rng.choice([huge_value(), 2, -1]) for _ in range(rng.randint(1, 3))]
        else:
            shape = [x for x in sizes if x != 1] + [1] * rng.randint(0, 2)
        f = (lambda b: b.view(shape)) if op == "view" else (lambda b: b.reshape(shape))
        return "%s %s" % (op, L(shape)), f
    if op == "narrow":
        d = rd()
        n = size_of(d)
        st = number(rng.randint(0, max(n, 1)), huge)
        ln = number(rng.randint(0, max(n, 1)) if n < 1000 else n // 2, huge)
        return "narrow %d %d %d" % (d, st, ln), lambda b: b.narrow(d, st, ln)
    if op == "select":
        d = rd()
        i = number(rng.randint(-1, 2), huge)
        return "select %d %d" % (d, i), lambda b: b.select(d, i)
    if op == "slice":
        d = rd()
        n = size_of(d)
        st = rng.choice([0, 1, -1, 2, n // 2, -(1 << 61), -n]) if huge else rng.choice([0, 1, -1, 2])
        en = rng.choice([INT64_MAX, n, n - 1, -1, 1, -(1 << 61), n // 3 + 1])
        sp = rng.choice([1, 1, 2, 3, INT64_MAX, 1 << 62, n]) if huge else rng.choice([1, 1, 2, 3])
        return ("slice %d %d %d %d" % (d, st, en, sp),
                lambda b: T.ops.aten.slice.Tensor(b, d, st, en, sp))
    if op == "transpose":
        a, c = rd(), rd()
        return "transpose %d %d" % (a, c), lambda b: b.transpose(a, c)
    if op == "t":
        return "t", lambda b: b.t()
    if op == "permute":
        p = list(range(nd))
        rng.shuffle(p)
        p = [x - nd if rng.random() < 0.3 else x for x in p]
        return "permute %s" % L(p), lambda b: b.permute(p)
    if op == "movedim":
        k = rng.randint(0, nd)
        src = rng.sample(range(nd), k)
        dst = rng.sample(range(nd), k)
        return ("movedim %s %s" % (L(src), L(dst)),
                lambda b: b.movedim(tuple(src), tuple(dst)))
    if op == "expand":
        new = [rng.choice([1, 2, 3] + ([huge_value()] if huge else [])) for _ in range(rng.randint(0, 2))]
        tgt = new + [(rng.choice([2, 3] + ([huge_value()] if huge else [])) if s == 1 else
                      (s if rng.random() < 0.7 else -1)) for s in sizes]
        return "expand %s" % L(tgt), lambda b: b.expand(tgt)
    if op == "squeeze":
        return "squeeze", lambda b: b.squeeze()
    if op == "squeeze_dim":
        d = rd()
        return "squeeze_dim %d" % d, lambda b: b.squeeze(d)
    if op == "unsqueeze":
        d = rng.randint(-nd - 1, nd)
        return "unsqueeze %d" % d, lambda b: b.unsqueeze(d)
    if op == "flatten":
        a, c = rd(), rd()
        return "flatten %d %d" % (a, c), lambda b: b.flatten(a, c)
    if op == "unflatten":
        d = rd()
        n = size_of(d)
        choices = [[n], [1, n], [-1], [2, -1], [-1, 1]]
        if n % 2 == 0:
            choices.append([2, n // 2])
        if huge:
            choices += [[huge_value(), -1], [n, huge_value()]]
        sz = rng.choice(choices)
        return "unflatten %d %s" % (d, L(sz)), lambda b: T.ops.aten.unflatten.int(b, d, sz)
    if op == "unfold":
        d = rd()
        n = size_of(d)
        # not negative: PyTorch has no rule for that, and what its storage
        # check then says differs between meta and cpu (tensor_views.txt
        # holds the cpu case)
        size = max(number(rng.randint(0, min(n, 4)), huge), 0)
        sp = rng.choice([1, 1, 2, 3] + ([INT64_MAX, 1 << 62, n] if huge else []))
        return "unfold %d %d %d" % (d, size, sp), lambda b: b.unfold(d, size, sp)
    if op == "diagonal":
        o = number(rng.randint(-2, 2), huge)
        a, c = rd(), rd()
        return "diagonal %d %d %d" % (o, a, c), lambda b: b.diagonal(o, a, c)
    if op == "split":
        d = rd()
        n = size_of(d)
        sz = rng.choice([1, 2, 3, 0] + ([INT64_MAX, 1 << 62, n // 2 + 1] if huge else []))
        if sz > 0 and n // sz > 64:  # a list of that many tensors is not the point
            sz = n // 2 + 1
        return "split %d %d" % (sz, d), lambda b: b.split(sz, d)
    if op == "split_sizes":
        d = rd()
        n = size_of(d)
        if n <= 6:
            parts, left = [], n
            while left > 0:
                k = rng.randint(0, left)
                parts.append(k)
                left -= k
        else:
            k = rng.randint(0, n)
            parts = [k, n - k]
        if rng.random() < 0.15:
            parts.append(1)
        return ("split_sizes %s %d" % (L(parts), d),
                lambda b: T.ops.aten.split_with_sizes(b, parts, d))
    if op == "chunk":
        # not up to INT_MAX: PyTorch reserves room for `chunks` tensors
        c, d = rng.choice([1, 2, 3, 4, 0] + ([1 << 16] if huge else [])), rd()
        if c > 64 and size_of(d) > 64:
            c = 3
        return "chunk %d %d" % (c, d), lambda b: b.chunk(c, d)
    if op == "view_dtype":
        nt = rng.choice(list(DTYPES.values()))
        return "view_dtype %s" % NAME[nt], lambda b: b.view(nt)
    nsz = [rng.choice([0, 1, 2, 3] + ([huge_value()] if huge else [])) for _ in range(rng.randint(0, 3))]
    nst = [rng.choice([0, 1, 2] + ([huge_value() >> rng.randint(0, 62)] if huge else [])) for _ in nsz]
    no = rng.choice([0, 1, t.storage_offset()] + ([huge_value()] if huge else []))
    return ("as_strided %s %s %d" % (L(nsz), L(nst), no),
            lambda b: b.as_strided(nsz, nst, no))


def walk(t, count, next_step, pick):
    """The line for `count` steps from t: next_step(t) gives a step's text and
    function, pick(n) which of n tensors a split goes on with."""
    parts = [desc(t)]
    for k in range(1, count + 1):
        while True:
            text, fn = next_step(t)
            try:
                r = fn(t)
                break
            except Exception as e:  # noqa: BLE001 - every refusal is a case
                if SYMBOLIC in err(e):
                    continue
                parts.append(text)
                shaped = exact_shape(text, t)
                if shaped and shaped[0] == "invalid":
                    parts.append("! %d %s" % (k, shaped[1]))
                elif shaped and err(e).startswith(SHAPE_REFUSALS):
                    parts.append(overflow(text, t, k))
                elif text.startswith("chunk") and err(e).startswith(CHUNK_WRAPPED):
                    parts[-1] = text + " @0"  # the first piece, as exact_piece computes it
                    parts.append(overflow(parts[-1], t, k))
                elif (not text.startswith("as_strided") and err(e).startswith(OVERFLOW_MESSAGES)) or \
                        err(e).startswith(OVERFLOW_MESSAGES[0]) or too_big_for_storage(text, t):
                    parts.append(overflow(text, t, k))
                else:
                    parts.append("! %d %s" % (k, err(e)))
                return " ; ".join(parts)
        multi = isinstance(r, (tuple, list))
        if multi:
            if not r:
                parts += [text, "none"]
                return " ; ".join(parts)
            i = pick(len(r))
            text += " @%d" % i
            r = r[i]
        parts.append(text)
        e = exact(text, t)
        wrapped = e is not None and tuple(e) != tuple(layout_of(r))
        shaped = exact_shape(text, t)
        if shaped and shaped[0] == "invalid":
            parts.append("! %d %s" % (k, shaped[1]))
            return " ; ".join(parts)
        if shaped and (shaped[1] != list(r.shape) or
                       (r.numel() == 0 and shaped[1] != list(t.shape) and contiguous_overflows(shaped[1]))):
            wrapped = True
        if wrapped or not sound(r) or (not text.startswith("as_strided") and not inside(r, t)):
            parts.append(overflow(text, t, k))
            return " ; ".join(parts)
        t = r
    parts.append(desc(t))
    return " ; ".join(parts)


def chain():
    huge = rng.random() < 0.5
    dtype = rng.choice(list(DTYPES.values()))
    sizes, strides, off = huge_layout(torch.empty(0, dtype=dtype).element_size()) if huge else small_layout()
    return walk(base(dtype, sizes, strides, off), rng.randint(1, 6), lambda t: step(t, huge),
                rng.randrange)


def numbers(text):
    return [int(x) for x in text.split(",")] if text != "-" else []


def op_of(text):
    """The function of a step written as in the file (without "@K")."""
    w = text.split()
    op, a = w[0], w[1:]
    i = [int(x) for x in a if x.lstrip("-").isdigit()]
    return {
        "view": lambda b: b.view(numbers(a[0])),
        "reshape": lambda b: b.reshape(numbers(a[0])),
        "split": lambda b: b.split(i[0], i[1]),
        "chunk": lambda b: b.chunk(i[0], i[1]),
        "select": lambda b: b.select(i[0], i[1]),
        "unsqueeze": lambda b: b.unsqueeze(i[0]),
        "unfold": lambda b: b.unfold(i[0], i[1], i[2]),
        "flatten": lambda b: b.flatten(i[0], i[1]),
        "diagonal": lambda b: b.diagonal(i[0], i[1], i[2]),
        "slice": lambda b: T.ops.aten.slice.Tensor(b, i[0], i[1], i[2], i[3]),
        "unflatten": lambda b: T.ops.aten.unflatten.int(b, int(a[0]), numbers(a[1])),
        "view_dtype": lambda b: b.view(DTYPES[a[0]]),
        "narrow": lambda b: b.narrow(i[0], i[1], i[2]),
        "transpose": lambda b: b.transpose(i[0], i[1]),
        "t": lambda b: b.t(),
        "permute": lambda b: b.permute(numbers(a[0])),
        "movedim": lambda b: b.movedim(numbers(a[0]), numbers(a[1])),
        "expand": lambda b: b.expand(numbers(a[0])),
        "squeeze": lambda b: b.squeeze(),
        "squeeze_dim": lambda b: b.squeeze(i[0]),
        "split_sizes": lambda b: T.ops.aten.split_with_sizes(b, numbers(a[0]), int(a[1])),
        "as_strided": lambda b: b.as_strided(numbers(a[0]), numbers(a[1]), int(a[2])),
    }[op]


# Chains that once went otherwise in tstor than in PyTorch, in longer runs:
# "DTYPE OFFSET SIZES STRIDES", then the steps ("@K" picks a split's tensor).
FOUND = [
    ("int64 5 9223372036854775807 0", ["split 4611686018427387904 0 @0"]),
    ("uint8 0 9223372036854775806 0", ["chunk 2 0 @0", "select 0 9223372036854775807"]),
    ("float32 0 1,3,1 1,3,1", ["unfold -3 1 4611686018427387904", "view_dtype uint8"]),
    ("float64 0 1,8589934592,3 25769803776,3,1", ["view -1,4611686018427387905,4294967296"]),
    ("float64 35184372088831 67108864,2 3,1", ["unflatten 0 67108864,4611686018427387905"]),
    ("uint8 5 3,1,2305843009213693952,2,0 0,0,0,2,2", ["unflatten 4 -1"]),
    ("int64 3 64,0,3 9,3,1", ["unflatten -2 0,9223372036854775806"]),
    ("int64 1 9223372036854775807,0 17179869184,549755813887", ["select 0 -1"]),
    ("complex64 16777216 1,2251799813685247,2,2 0,2,1,1125899906842623",
     ["chunk 4 -2 @0", "flatten -3 3"]),
    ("uint8 5 2305843009213693952,0 1,1", ["view 2305843009213693952,-1,4611686018427387904"]),
    ("float64 5 2,0 1,1", ["view 2,-1,9223372036854775806"]),
    ("int16 0 2,3 3,1", ["flatten 0 1", "unflatten 0 -1,3", "view -1"]),
    ("float32 5 9223372036854775807 0", ["chunk 4 -1"]),
    ("uint8 0 4611686018427387904,3,0 1,1,1", ["view -1"]),
]


# The same, found in runs under torch 2.x: tensor_chains_torch2.txt ends with
# them (tensor_chains.txt, 1.13's record, does not).
FOUND_TORCH2 = [
    # split_with_sizes slices every piece before it checks the sum
    ("uint8 36028797018963967 2,3,3 1,17179869184,0",
     ["squeeze", "as_strided 0,2,1 1,1,2 9223372036854775806", "as_strided 0,3,1 1,1,1 9223372036854775806",
      "split_sizes 0,1,0,0,2,1 1"]),
    ("int64 0 3,8589934591,3,2 51539607546,6,2,1", ["diagonal 2 -3 3", "unflatten 2 0,4611686018427387905"]),
]


def found(chains=None):
    """The FOUND chains, or those of `chains`: (BASE, [STEP, ...]) pairs."""
    lines = []
    for text, steps in FOUND if chains is None else chains:
        w = text.split()
        sizes, strides = numbers(w[2]), numbers(w[3])
        t = base(DTYPES[w[0]], sizes, strides, int(w[1]))
        picks = [int(x.split(" @")[1]) for x in steps if " @" in x]
        todo = [x.split(" @")[0] for x in steps]
        lines.append(walk(t, len(steps), lambda t: (todo[0], op_of(todo.pop(0))), lambda n: picks.pop(0)))
    return lines


def long_run(outdir, seed, count):
    """Chain i from seed "SEED-i", appended line by line: PyTorch 1.13 can
    itself crash reading a stride it wrapped into its symbolic range, so a
    rerun goes on after the chain that crashed, marked with a comment line."""
    path, running = outdir + "/tensor_chains.txt", outdir + "/running"
    try:
        with open(path) as fh:
            done = sum(1 for line in fh) - 1
    except FileNotFoundError:
        done = -1
    with open(path, "a") as fh:
        if done < 0:
            fh.write("# tensor_chains.txt: PyTorch %s; from gen_chains.py %s %d\n" % (torch.__version__, seed,
                                                                                      count))
            done = 0
        elif os.path.exists(running):
            fh.write("# chain %d crashed PyTorch\n" % done)
            done += 1
        for i in range(done, count):
            with open(running, "w") as mark:
                mark.write("%d\n" % i)
            rng.seed("%s-%d" % (seed, i))
            fh.write(chain() + "\n")
            fh.flush()
    os.remove(running)


def replayed(path):
    """The chains of a tensor_chains.txt, each step as it was taken there
    (compare-torch2.sh: another PyTorch walks the same chains)."""
    chains = []
    with open(path) as fh:
        for line in fh:
            if not line.startswith("#"):
                parts = line.rstrip("\n").split(" ; ")
                chains.append((parts[0], parts[1:-1]))
    return chains


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "."
    # torch 2.x writes tensor_chains_torch2.txt: the chains of the committed
    # tensor_chains.txt, replayed (TSTOR_GEN_ALL_VERSIONS=1: tensor_chains.txt
    # again, for compare-torch2.sh)
    torch2 = int(torch.__version__.split(".")[0]) >= 2 and not os.environ.get("TSTOR_GEN_ALL_VERSIONS")
    if (len(sys.argv) == 4 and sys.argv[2] == "--replay") or (torch2 and len(sys.argv) <= 2):
        source = sys.argv[3] if len(sys.argv) == 4 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                     "tensor_chains.txt")
        lines = found(replayed(source) + (FOUND_TORCH2 if torch2 else []))
        name = "tensor_chains_torch2.txt" if torch2 else "tensor_chains.txt"
        with open(outdir + "/" + name, "w") as fh:
            fh.write("# %s: PyTorch %s; the chains of %s\n" % (name, torch.__version__, os.path.basename(source)))
            for line in lines:
                fh.write(line + "\n")
        return
    if len(sys.argv) > 3:
        long_run(outdir, sys.argv[2], int(sys.argv[3]))
        return
    lines = [chain() for _ in range(CHAINS)] + found()
    with open(outdir + "/tensor_chains.txt", "w") as fh:
        fh.write("# tensor_chains.txt: PyTorch %s; from gen_chains.py (meta tensors)\n" % torch.__version__)
        for line in lines:
            fh.write(line + "\n")


if __name__ == "__main__":
    main()
