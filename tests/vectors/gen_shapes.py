#!/usr/bin/python3
"""Generates the shape-inference cases of tstor's shape tests (tests/test_shape.c).

Run with Debian's /usr/bin/python3 and its python3-torch (PyTorch 1.13):

    /usr/bin/python3 tests/vectors/gen_shapes.py tests/vectors

and with torch 2.x, whose answers tstor follows:

    ~/.cache/tstor/pyref/bin/python tests/vectors/gen_shapes.py tests/vectors

Under 1.13 it writes shapes.txt, the record of 1.13's answers; under torch 2.x
shapes_torch2.txt, the same cases and those of the dtypes 1.13 lacks
(gen_torch2 below). Both committed: one case a line,

    OP ARG ARG ... => RESULT  # PyTorch's message, for errors

where an ARG is
    t:DTYPE:SIZES:STRIDES  a tensor (sizes and strides comma-separated; both
                           empty for a zero-dim tensor)
    s:DTYPE                a Python number: bool, int64 (int), float64 (float)
                           or complex128 (complex)
    d:DTYPE                a dtype
    i:N                    an integer;  l:N,N,...  an integer list (l: is [])
    f:X                    a Python float;  w:WORD  a string ("same", "valid")
    n:                     None
and RESULT is "DTYPE:SIZES:STRIDES" (a new tensor), "d:DTYPE" (a dtype),
"l:SIZES" (a shape) or "error".

Every tensor case runs on the meta device, and, where the operation has a CPU
kernel for the dtype, on small CPU tensors too: PyTorch 1.13's meta kernels skip
some of the checks its CPU kernels make (a kernel larger than the padded input
gives an empty output on meta, mm of float32 and float64 gives float32), and
tstor refuses what PyTorch refuses on a real device. So a case is "error" when
either device raises (a CPU error that only says a kernel is missing for the
dtype does not count), and otherwise holds the meta device's sizes, strides and
dtype. The first line names the PyTorch version; the output is deterministic.
"""
import itertools
import os
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
T = torch
F = torch.nn.functional

DTYPES = [T.uint8, T.int8, T.int16, T.int32, T.int64, T.float16, T.float32, T.float64,
          T.complex32, T.complex64, T.complex128, T.bool, T.qint8, T.quint8, T.qint32,
          T.bfloat16, T.quint4x2]
QUANT = [T.qint8, T.quint8, T.qint32, T.quint4x2]
PLAIN = [d for d in DTYPES if d not in QUANT]
NAME = {d: str(d).replace("torch.", "") for d in DTYPES}


class _Names(dict):
    """NAME, naming too the dtypes a result of a newer torch may have."""

    def __missing__(self, d):
        return str(d).replace("torch.", "")


NAME = _Names(NAME)
SCALARS = {T.bool: True, T.int64: 3, T.float64: 2.5, T.complex128: 1 + 2j}

lines = []
ELEMENTWISE = {"neg", "sin", "signbit", "add", "mul", "div", "eq", "lt", "abs", "sub"}
# elementwise ops whose dtype refusals tstor's rules model (TSTOR_ELEMENTWISE_NO_BOOL)
REFUSING = {"neg", "sub", "abs"}


def fmt_list(xs):
    return ",".join(str(int(x)) for x in xs)


class Arg:
    """A tensor argument: built on meta (and on cpu) from dtype, sizes, strides."""

    def __init__(self, dtype, sizes, strides=None):
        self.dtype, self.sizes = dtype, tuple(sizes)
        if strides is None:
            strides = contiguous(self.sizes)
        self.strides = tuple(strides)

    def make(self, device):
        x = T.empty_strided(self.sizes, self.strides, dtype=self.dtype, device=device)
        if device == "cpu":  # indices must be valid on a real device: all 0
            x.zero_()
        return x

    def text(self):
        return "t:%s:%s:%s" % (NAME[self.dtype], fmt_list(self.sizes), fmt_list(self.strides))


def contiguous(sizes):
    st, acc = [], 1
    for s in reversed(sizes):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


def channels_last(sizes):
    """PyTorch's channels_last (4-d) or channels_last_3d (5-d) strides."""
    order = [1] + list(range(len(sizes) - 1, 1, -1)) + [0]
    st, acc = [0] * len(sizes), 1
    for d in order:
        st[d] = acc
        acc *= max(sizes[d], 1)
    return tuple(st)


def t(dtype, sizes, strides=None):
    return Arg(dtype, sizes, strides)


def f32(sizes, strides=None):
    return Arg(T.float32, sizes, strides)


def cl(sizes, dtype=T.float32):
    return Arg(dtype, sizes, channels_last(sizes))


def arg_text(a):
    if isinstance(a, Arg):
        return a.text()
    if isinstance(a, tuple) and a and a[0] == "scalar":
        return "s:" + NAME[a[1]]
    if isinstance(a, T.dtype):
        return "d:" + NAME[a]
    if a is None:
        return "n:"
    if isinstance(a, bool):
        return "i:%d" % int(a)
    if isinstance(a, float):
        return "f:%r" % a
    if isinstance(a, str):
        return "w:" + a
    if isinstance(a, int):
        return "i:%d" % a
    if isinstance(a, (list, tuple)):
        return "l:" + fmt_list(a)
    raise TypeError(a)


def realise(a, device):
    if isinstance(a, Arg):
        return a.make(device)
    if isinstance(a, tuple) and a and a[0] == "scalar":
        return SCALARS[a[1]]
    if isinstance(a, list) and a and isinstance(a[0], Arg):
        return [x.make(device) for x in a]
    return a


def run(fn, args, device):
    try:
        return fn(*[realise(a, device) for a in args]), None
    except Exception as e:  # what PyTorch raises is the expected result
        return None, "%s: %s" % (type(e).__name__, str(e).split("\n")[0])


def missing_kernel(msg):
    # torch 2.x raises some refusals as NotImplementedError too (sub of bool
    # and uint16): only its text says a kernel is missing
    return msg is not None and ("not implemented for" in msg or "Could not run" in msg or (
        "NotImplementedError" in msg and "Subtraction" not in msg))


def case(op, fn, *args, cpu=True):
    """Runs fn on meta (and cpu) and records the case line."""
    flat = []
    for a in args:
        if isinstance(a, list) and a and isinstance(a[0], Arg):
            flat.append("i:%d" % len(a))
            flat.extend(x.text() for x in a)
        else:
            flat.append(arg_text(a))
    res, err = run(fn, args, "meta")
    if err is not None and missing_kernel(err) and "meta" in err.lower():
        return  # no meta kernel: nothing to compare
    if cpu:  # where both raise, the cpu kernel's words are usually the clearer
        _, cerr = run(fn, args, "cpu")
        if cerr is not None and not missing_kernel(cerr) and "out of range in self" not in cerr:
            err = cerr
        if op == "abs" and cerr is not None and "not implemented for 'Bool'" in cerr:
            err = cerr  # no abs of bool on any device PyTorch computes on
    if err is not None and "INTERNAL ASSERT" in err:
        return  # a bug in PyTorch, not a behaviour
    if (err is not None and op in ELEMENTWISE and op not in REFUSING
            and "must match the size" not in err and "Promotion for" not in err):
        return  # a kernel that refuses a dtype (neg of bool): not a question of shapes
    if err is not None:
        out = "error  # " + err
    elif isinstance(res, T.dtype):
        out = "d:" + NAME[res]
    elif isinstance(res, T.Size):
        out = "l:" + fmt_list(res)
    else:
        out = "%s:%s:%s" % (NAME[res.dtype], fmt_list(res.shape), fmt_list(res.stride()))
    lines.append("%s %s => %s" % (op, " ".join(flat), out))


# ------------------------------------------------------------------ promotion

def gen_promotion():
    for a, b in itertools.product(DTYPES, DTYPES):
        case("promote", T.promote_types, a, b, cpu=False)
    # result_type: every pair of plain dtypes as dim tensor / zero-dim tensor,
    # and every dtype against each kind of Python number.
    for a, b in itertools.product(PLAIN, PLAIN):
        for sa, sb in [((2,), (2,)), ((2,), ()), ((), (2,)), ((), ())]:
            case("result_type", T.result_type, t(a, sa), t(b, sb), cpu=False)
    for a in PLAIN:
        for s in SCALARS:
            for sa in [(2,), ()]:
                case("result_type", T.result_type, t(a, sa), ("scalar", s), cpu=False)
                case("result_type", T.result_type, ("scalar", s), t(a, sa), cpu=False)
    for s1, s2 in itertools.product(SCALARS, SCALARS):
        case("result_type", T.result_type, ("scalar", s1),
             ("scalar", s2), cpu=False)


# --------------------------------------------------------------- broadcasting

def gen_broadcast():
    shapes = [
        [(2, 3), (3,)], [(2, 3), (2, 1)], [(2, 3), ()], [(), ()], [(1,), ()], [(5, 1, 4), (3, 1)],
        [(0,), (1,)], [(0, 3), (1, 3)], [(2, 0), (2, 1)], [(0,), (0,)], [(1, 0), (5, 1)],
        [(2, 3), (3, 2)], [(2,), (3,)], [(0,), (2,)], [(2, 1, 3), (4, 3), (2, 1, 1)],
        [(8, 1, 6, 1), (7, 1, 5)], [(1,) * 10, (3,)], [(2, 3, 4), (2, 1, 4), (1, 3, 1), ()],
        [(4, 3), (2, 4, 3), (3, 2, 4, 3)], [(3,), (4,), (1,)], [(1, 1), (1,)], [(7,), (7, 7)],
        [(2, 2), (3, 2, 1)], [(1, 2), (2, 1), (2, 2)],
    ]
    for ss in shapes:
        case("broadcast", lambda *x: T.broadcast_shapes(*x), *[list(s) for s in ss], cpu=False)


# ---------------------------------------------------------------- elementwise

LAYOUTS = [  # (sizes, strides) pairs for a first operand, strides None = contiguous
    ((2, 3), None), ((2, 3), (1, 2)), ((3, 4), (8, 1)), ((2, 3, 4, 5), None),
    ((2, 3, 4, 5), channels_last((2, 3, 4, 5))), ((2, 3, 4, 5, 6), channels_last((2, 3, 4, 5, 6))),
    ((4, 1, 3), (3, 3, 1)), ((4, 1, 3), (1, 12, 4)), ((3, 4), (0, 1)), ((3, 4), (1, 0)),
    ((0, 3), None), ((3, 0, 2), None), ((2, 3, 4), (1, 2, 6)), ((2, 3, 4), (4, 8, 1)),
    ((6,), (2,)), ((), ()), ((1, 1), (1, 1)), ((2, 1, 1, 3), channels_last((2, 1, 1, 3))),
    ((2, 3, 1, 1), channels_last((2, 3, 1, 1))), ((1, 3, 4, 1), channels_last((1, 3, 4, 1))),
    ((2, 2), (2, 1)), ((4, 2, 3), (1, 12, 4)),
]

PAIRS = [  # second operand against a first of the given layout
    lambda a: Arg(T.float32, a.sizes, a.strides), lambda a: Arg(T.float32, a.sizes),
    lambda a: Arg(T.float32, a.sizes[1:]), lambda a: Arg(T.float32, ()),
    lambda a: Arg(T.float32, (1,) + a.sizes), lambda a: Arg(T.float32, a.sizes[-1:] + a.sizes[:-1]),
]


def gen_elementwise():
    for sizes, strides in LAYOUTS:
        a = f32(sizes, strides)
        for op, fn in [("neg", T.neg), ("sin", T.sin), ("signbit", T.signbit)]:
            case(op, fn, a)
        for mk in PAIRS:
            b = mk(a)
            case("add", T.add, a, b)
            case("add", T.add, b, a)
        case("mul", T.mul, a, Arg(T.float64, (1,) * len(sizes)))
    # broadcasting layouts of two non-contiguous operands
    extra = [
        (f32((3, 1), (1, 1)), f32((1, 4), (1, 1))), (f32((4, 3), (1, 4)), f32((3,))),
        (f32((2, 3, 4), (12, 1, 3)), f32((2, 3, 4), (1, 8, 2))),
        (f32((2, 3, 4), (1, 2, 6)), f32((2, 3, 4), (12, 4, 1))),
        (cl((2, 3, 4, 5)), f32((2, 3, 4, 5))), (f32((2, 3, 4, 5)), cl((2, 3, 4, 5))),
        (cl((2, 3, 4, 5)), f32((3, 1, 1))), (cl((2, 3, 4, 5)), f32((5,))),
        (cl((2, 3, 4, 5)), cl((1, 3, 1, 1))), (cl((1, 3, 4, 5)), cl((2, 3, 4, 5))),
        (f32((2, 3, 4, 5), (60, 1, 15, 3)), f32((2, 3, 4, 5), (60, 20, 1, 4))),
        (f32((5, 1), (1, 5)), f32((1, 5), (5, 1))), (f32((2, 2), (1, 2)), f32((2, 2), (2, 1))),
        (f32((3, 3), (0, 0)), f32((3, 3), (1, 3))), (f32((0, 4), (1, 1)), f32((4,))),
        (f32((2, 3)), f32((3, 2))), (f32((2, 3)), f32((2,))), (f32((0, 3)), f32((2, 3))),
        (f32((2, 3)), f32((4, 2, 1))),
        # a first operand whose strides fall strictly decides the order alone
        (f32((3, 4), (8, 1)), f32((3, 4), (1, 3))), (f32((2, 3, 4), (24, 8, 2)), f32((4,))),
        (f32((2, 3, 4), (24, 8, 2)), f32((2, 3, 4), (1, 2, 6))),
        (f32((2, 3, 4)), f32((2, 3, 4), (1, 2, 6))), (f32((2, 1, 4)), f32((2, 3, 4), (1, 2, 6))),
        (f32((2, 3, 4), (12, 0, 1)), f32((2, 3, 4), (1, 2, 6))),
        (f32((3, 4)), f32((2, 3, 4), (1, 2, 6))),
    ]
    for a, b in extra:
        for op, fn in [("add", T.add), ("eq", T.eq), ("div", T.div)]:
            case(op, fn, a, b)
    # dtypes: every pair of plain dtypes through a promoting, a comparing and
    # a float op, with zero-dim and Python-number operands
    for da, db in itertools.product(PLAIN, PLAIN):
        a, b = t(da, (2, 3)), t(db, (3,))
        case("mul", T.mul, a, b)
        case("eq", T.eq, a, b)
        case("div", T.div, a, t(db, ()))
    for da in PLAIN:
        for s in SCALARS:
            case("mul", T.mul, t(da, (2, 3)), ("scalar", s))
            case("lt", T.lt, t(da, (2, 3), (1, 2)), ("scalar", s))
        for op, fn in [("neg", T.neg), ("sin", T.sin), ("signbit", T.signbit)]:
            case(op, fn, t(da, (4, 2), (1, 4)))
        for sc in SCALARS:  # true division of every dtype by every kind of number
            case("div", T.div, t(da, (3, 1)), ("scalar", sc))
    # the rules with dtypes of their own: abs gives a complex tensor's float
    # dtype, neg and sub refuse bool, before they look at the shapes. (abs of
    # a real tensor that is not contiguous: 1.13's meta kernel gives
    # contiguous strides where its cpu kernel keeps the input's order, as
    # tstor does; only complex inputs are asked so.)
    for da in PLAIN:
        case("abs", T.abs, t(da, (2, 3)))
        case("neg", T.neg, t(da, (2, 3)))
        for db in PLAIN:
            case("sub", T.sub, t(da, (2, 3)), t(db, (3,)))
        for sc in SCALARS:
            case("sub", T.sub, t(da, (2, 3)), ("scalar", sc))
    case("sub", T.sub, t(T.bool, (2, 3)), t(T.bool, (4,)))
    case("sub", T.sub, t(T.bool, (2, 3)), t(T.int32, (4,)))
    case("abs", T.abs, cl((2, 3, 4, 5), T.complex64))
    case("abs", T.abs, t(T.complex128, (2, 3), (1, 2)))
    # abs of complex is empty_like: the input's strides where dense (odd
    # strides of size-1 dimensions too), dense in its order otherwise
    for sizes, strides in [((2, 3), (6, 2)), ((2, 1, 3), (3, 7, 1)), ((2, 1, 1, 3), (3, 1, 3, 1)),
                           ((3, 4), (0, 1)), ((0, 3), (1, 5)), ((4, 2, 3), (1, 12, 4))]:
        case("abs", T.abs, t(T.complex64, sizes, strides))
    for sizes, strides in [((2, 3), (1, 2)), ((4,), (2,)), ((), ())]:
        case("abs", T.abs, t(T.bool, sizes, strides))


# ----------------------------------------------------------------- reductions

def gen_reductions():
    inputs = [f32((2, 3, 4)), f32((2, 3, 4), (1, 2, 6)), cl((2, 3, 4, 5)), f32(()), f32((0, 3)),
              f32((3, 0, 2)), t(T.int32, (2, 3)), t(T.bool, (4,)), t(T.uint8, (2, 2)),
              t(T.float16, (5, 2)), t(T.complex64, (3, 2)), t(T.bfloat16, (2, 3)),
              t(T.int64, (2, 3, 4)), t(T.float64, (7,))]
    dimsets = [[], [0], [1], [-1], [0, 2], [2, 0], [-3, -1], [0, 0], [3], [-4], [0, 1, 2]]
    for x in inputs:
        for dims in dimsets:
            for keep in (False, True):
                case("sum", lambda a, d, k: T.sum(a, d, keepdim=k), x, dims, keep)
                case("mean", lambda a, d, k: T.mean(a, d, keepdim=k), x, dims, keep)
                case("amax", lambda a, d, k: T.amax(a, d, keepdim=k), x, dims, keep)
        for dim in [None, 0, 1, -1, 2, -3, 5]:
            for keep in (False, True):
                case("argmax", lambda a, d, k: T.argmax(a, d, keepdim=k), x, dim, keep)


# ------------------------------------------------------------------- matmul

def gen_matmul():
    pairs = [((4,), (4,)), ((3,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)),
             ((3, 4), (5, 6)), ((2, 3, 4), (4,)), ((4,), (2, 4, 5)), ((2, 3, 4), (4, 5)),
             ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (6, 4, 5)),
             ((7, 1, 3, 4), (2, 4, 5)), ((2, 3, 4), (3, 4, 5)), ((0, 3, 4), (4, 5)),
             ((3, 0), (0, 5)), ((2, 3, 4), (2, 5, 6)), ((), (4,)), ((4,), ()),
             ((2, 1, 3, 4), (1, 5, 4, 2)), ((5, 3, 4), (4,)), ((0,), (0,)), ((4,), (5, 4, 3))]
    for sa, sb in pairs:
        case("matmul", T.matmul, f32(sa), f32(sb))
        case("mm", T.mm, f32(sa), f32(sb))
        case("bmm", T.bmm, f32(sa), f32(sb))
    case("matmul", T.matmul, f32((3, 4), (1, 3)), f32((4, 5), (1, 4)))
    case("matmul", T.matmul, f32((2, 3, 4), (1, 2, 6)), f32((4, 5)))
    for da, db in [(T.float32, T.float64), (T.float64, T.float64), (T.int64, T.int64),
                   (T.float16, T.float16), (T.int32, T.float32), (T.complex64, T.complex64)]:
        case("matmul", T.matmul, t(da, (3, 4)), t(db, (4, 5)))
        case("mm", T.mm, t(da, (3, 4)), t(db, (4, 5)))
        case("bmm", T.bmm, t(da, (2, 3, 4)), t(db, (2, 4, 5)))
    for x, w, b in [((5, 3), (4, 3), (4,)), ((5, 3), (4, 3), None), ((2, 5, 3), (4, 3), (4,)),
                    ((3,), (4, 3), (4,)), ((3,), (4, 3), None), ((5, 3), (4, 2), None),
                    ((5, 3), (4, 3), (5,)), ((5, 3), (4, 3), (5, 4)), ((5, 3), (3,), None),
                    ((5, 3), (4, 3), (1,)), ((0, 3), (4, 3), (4,)), ((2, 0, 3), (4, 3), None),
                    ((6, 2, 5, 3), (4, 3), (4,)), ((5, 3), (4, 3), ()), ((5, 3), (3,), (1,)),
                    ((5, 3), (3,), ()), ((3,), (3,), None), ((3,), (3,), ())]:
        case("linear", F.linear, f32(x), f32(w), None if b is None else f32(b))
    case("linear", F.linear, f32((5, 3)), t(T.float64, (4, 3)), None)


# -------------------------------------------------------------- cat and stack

def gen_cat():
    groups = [
        ([f32((2, 3)), f32((4, 3))], 0), ([f32((2, 3)), f32((2, 5))], 1), ([f32((2, 3)), f32((2, 5))], -1),
        ([f32((2, 3)), f32((2, 5))], 0), ([f32((2, 3)), f32((0,))], 0), ([f32((0,)), f32((2, 3))], 1),
        ([f32((2, 3))], 0), ([f32((2, 3)), f32((2, 3)), f32((2, 3))], 1), ([f32((2, 3)), f32((2,))], 0),
        ([f32((2, 3)), f32((3, 2))], 2), ([f32(()), f32(())], 0), ([f32((2, 3)), t(T.float64, (1, 3))], 0),
        ([t(T.int32, (2,)), t(T.bool, (3,)), t(T.int8, (1,))], 0), ([t(T.int32, (2,)), f32((3,))], 0),
        ([cl((2, 3, 4, 5)), cl((1, 3, 4, 5))], 0), ([cl((2, 3, 4, 5)), f32((2, 3, 4, 5))], 1),
        ([cl((2, 3, 4, 5)), cl((2, 1, 4, 5))], 1), ([f32((2, 3), (1, 2)), f32((2, 3), (1, 2))], 0),
        ([f32((0, 3)), f32((0, 3))], 0), ([f32((2, 0)), f32((2, 0))], 1), ([f32((0,)), f32((0,))], 0),
        ([f32((2, 3)), f32((2, 3))], -3), ([t(T.complex64, (2,)), t(T.float64, (2,))], 0),
    ]
    for ts, dim in groups:
        case("cat", T.cat, ts, dim)
        case("stack", T.stack, ts, dim)
    case("stack", T.stack, [f32((2, 3)), f32((2, 3))], 2)
    case("stack", T.stack, [f32((2, 3)), f32((2, 3))], -1)
    case("stack", T.stack, [cl((2, 3, 4, 5)), cl((2, 3, 4, 5))], 0)
    # a new last dimension: the inputs unsqueezed there may read as channels-last
    hwc = f32((3, 4, 5), (1, 15, 3))
    case("stack", T.stack, [hwc, hwc], 3)
    case("stack", T.stack, [hwc, hwc], -1)
    case("stack", T.stack, [hwc, f32((3, 4, 5))], 3)
    case("stack", T.stack, [cl((2, 3, 4, 5)), cl((2, 3, 4, 5))], 4)
    case("stack", T.stack, [f32(()), t(T.int64, ())], 0)
    case("stack", T.stack, [t(T.int8, (2,)), t(T.uint8, (2,))], 1)


# ------------------------------------------------------------------------ conv

def gen_conv():
    c2 = [  # input, weight, bias, stride, padding, dilation, groups
        ((2, 3, 8, 8), (4, 3, 3, 3), (4,), (1, 1), (0, 0), (1, 1), 1),
        ((2, 3, 8, 8), (4, 3, 3, 3), None, (2, 2), (1, 1), (1, 1), 1),
        ((2, 3, 9, 7), (4, 3, 3, 2), None, (2, 3), (1, 0), (2, 1), 1),
        ((3, 8, 8), (4, 3, 3, 3), None, (1, 1), (0, 0), (1, 1), 1),
        ((2, 4, 8, 8), (6, 2, 3, 3), (6,), (1, 1), (1, 1), (1, 1), 2),
        ((2, 4, 8, 8), (4, 1, 3, 3), None, (1, 1), (1, 1), (1, 1), 4),
        ((2, 4, 8, 8), (6, 1, 3, 3), None, (1, 1), (1, 1), (1, 1), 4),
        ((2, 4, 8, 8), (4, 2, 3, 3), None, (1, 1), (1, 1), (1, 1), 1),
        ((2, 3, 2, 2), (4, 3, 3, 3), None, (1, 1), (0, 0), (1, 1), 1),
        ((2, 3, 2, 2), (4, 3, 3, 3), None, (1, 1), (1, 1), (1, 1), 1),
        ((2, 3, 8, 8), (4, 3, 3, 3), (5,), (1, 1), (0, 0), (1, 1), 1),
        ((2, 3, 8, 8), (4, 3, 3, 3), None, (0, 1), (0, 0), (1, 1), 1),
        ((2, 3, 8, 8), (4, 3, 3, 3), None, (1, 1), (-1, 0), (1, 1), 1),
        ((2, 3, 8, 8), (4, 3, 3, 3), None, (1, 1), (0, 0), (0, 1), 1),
        ((2, 3, 8, 8), (4, 3, 3), None, (1,), (0,), (1,), 1),
        ((0, 3, 8, 8), (4, 3, 3, 3), None, (1, 1), (0, 0), (1, 1), 1),
        ((2, 3, 8), (4, 3, 3, 3), None, (1, 1), (0, 0), (1, 1), 1),
        ((2, 3, 5, 5), (4, 3, 5, 5), None, (1, 1), (0, 0), (1, 1), 1),
        ((2, 3, 5, 5), (4, 3, 3, 3), None, (1, 1), (0, 0), (3, 3), 1),
        ((1, 1, 1, 1), (1, 1, 1, 1), None, (5, 5), (0, 0), (1, 1), 1),
        ((2, 6, 8, 8), (6, 3, 3, 3), None, (1, 1), (1, 1), (1, 1), 3),
        ((2, 3, 8, 8), (4, 3, 3, 3), None, (1, 1), (0, 0), (1, 1), 0),
        ((2, 3, 8, 8), (4, 3, 3, 3), (4, 1), (1, 1), (0, 0), (1, 1), 1),
    ]
    for x, w, b, s, p, d, g in c2:
        for xl in (f32(x), cl(x) if len(x) == 4 else f32(x)):
            case("conv2d", F.conv2d, xl, f32(w), None if b is None else f32(b), s, p, d, g)
    case("conv2d", F.conv2d, f32((2, 3, 8, 8)), cl((4, 3, 3, 3)), None, (1, 1), (0, 0), (1, 1), 1)
    case("conv2d", F.conv2d, f32((2, 3, 8, 8)), t(T.float64, (4, 3, 3, 3)), None, (1, 1), (0, 0),
         (1, 1), 1)
    case("conv2d", F.conv2d, f32((2, 3, 8, 8), (192, 1, 24, 3)), f32((4, 3, 3, 3)), None, (1, 1),
         (0, 0), (1, 1), 1)
    c1 = [((2, 3, 10), (4, 3, 3), (1,), (0,), (1,), 1), ((2, 3, 10), (4, 3, 3), (3,), (2,), (2,), 1),
          ((3, 10), (4, 3, 3), (1,), (0,), (1,), 1), ((2, 4, 10), (4, 2, 3), (1,), (1,), (1,), 2),
          ((2, 3, 2), (4, 3, 3), (1,), (0,), (1,), 1), ((2, 3, 10), (4, 2, 3), (1,), (0,), (1,), 1)]
    for x, w, s, p, d, g in c1:
        case("conv1d", F.conv1d, f32(x), f32(w), None, s, p, d, g)
    c3 = [((2, 3, 6, 6, 6), (4, 3, 3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1),
          ((2, 3, 6, 7, 8), (4, 3, 3, 2, 1), (2, 1, 3), (1, 0, 1), (1, 2, 1), 1),
          ((3, 6, 6, 6), (4, 3, 3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),
          ((2, 4, 6, 6, 6), (4, 2, 3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1), 2),
          ((2, 3, 2, 6, 6), (4, 3, 3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1)]
    for x, w, s, p, d, g in c3:
        case("conv3d", F.conv3d, f32(x), f32(w), None, s, p, d, g)
        case("conv3d", F.conv3d, cl(x) if len(x) == 5 else f32(x), f32(w), None, s, p, d, g)
    ct = [  # input, weight, bias, stride, padding, output_padding, groups, dilation
        ((2, 3, 8, 8), (3, 4, 3, 3), None, (1, 1), (0, 0), (0, 0), 1, (1, 1)),
        ((2, 3, 8, 8), (3, 4, 3, 3), (4,), (2, 2), (1, 1), (1, 1), 1, (1, 1)),
        ((2, 3, 5, 7), (3, 2, 3, 2), None, (2, 3), (1, 0), (0, 2), 1, (1, 2)),
        ((2, 4, 5, 5), (4, 3, 3, 3), None, (1, 1), (0, 0), (0, 0), 2, (1, 1)),
        ((3, 8, 8), (3, 4, 3, 3), None, (2, 2), (0, 0), (1, 1), 1, (1, 1)),
        ((2, 3, 8, 8), (3, 4, 3, 3), None, (1, 1), (0, 0), (1, 1), 1, (1, 1)),
        ((2, 3, 8, 8), (3, 4, 3, 3), None, (2, 2), (0, 0), (2, 0), 1, (1, 1)),
        ((2, 3, 8, 8), (3, 4, 3, 3), None, (1, 1), (0, 0), (1, 1), 1, (2, 2)),
        ((2, 3, 8, 8), (4, 4, 3, 3), None, (1, 1), (0, 0), (0, 0), 1, (1, 1)),
        ((2, 3, 2, 2), (3, 4, 3, 3), None, (1, 1), (3, 3), (0, 0), 1, (1, 1)),
        ((2, 3, 8, 8), (3, 4, 3, 3), None, (1, 1), (0, 0), (-1, 0), 1, (1, 1)),
        ((2, 3, 8, 8), (3, 4, 3, 3), (3,), (1, 1), (0, 0), (0, 0), 1, (1, 1)),
    ]
    for x, w, b, s, p, op, g, d in ct:
        for xl in (f32(x), cl(x) if len(x) == 4 else f32(x)):
            case("conv_transpose2d", F.conv_transpose2d, xl, f32(w), None if b is None else f32(b),
                 s, p, op, g, d)
    ct1 = [((2, 3, 10), (3, 4, 3), (2,), (1,), (1,), 1, (1,)),
           ((3, 10), (3, 4, 3), (1,), (0,), (0,), 1, (2,)),
           ((2, 4, 7), (4, 3, 2), (3,), (0,), (2,), 2, (1,)),
           ((2, 3, 10), (3, 4, 3), (1,), (0,), (1,), 1, (1,))]
    for x, w, s, p, op, g, d in ct1:
        case("conv_transpose1d", F.conv_transpose1d, f32(x), f32(w), None, s, p, op, g, d)
    ct3 = [((2, 3, 4, 5, 6), (3, 2, 3, 3, 3), (1, 2, 1), (0, 1, 0), (0, 1, 0), 1, (1, 1, 2)),
           ((3, 4, 5, 6), (3, 2, 3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), 1, (1, 1, 1)),
           ((2, 4, 4, 5, 6), (4, 1, 3, 3, 3), (1, 1, 1), (0, 0, 0), (0, 0, 0), 2, (1, 1, 1))]
    for x, w, s, p, op, g, d in ct3:
        case("conv_transpose3d", F.conv_transpose3d, f32(x), f32(w), None, s, p, op, g, d)
        if len(x) == 5:
            case("conv_transpose3d", F.conv_transpose3d, cl(x), f32(w), None, s, p, op, g, d)


# ------------------------------------------------------------------------ pool

def gen_pool():
    pools = [  # input, kernel, stride, padding, dilation, ceil
        ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
        ((2, 3, 7, 7), (2, 2), (2, 2), (0, 0), (1, 1), False),
        ((2, 3, 7, 7), (2, 2), (2, 2), (0, 0), (1, 1), True),
        ((2, 3, 7, 7), (3, 3), (2, 2), (1, 1), (1, 1), True),
        ((1, 3, 3), (2, 2), (2, 2), (1, 1), (1, 1), True),
        ((1, 3, 3), (2, 2), (2, 2), (1, 1), (1, 1), False),
        ((2, 3, 6, 6), (3, 3), (3, 3), (1, 1), (1, 1), True),
        ((2, 3, 5, 5), (2, 2), (3, 3), (1, 1), (1, 1), True),
        ((2, 3, 10, 9), (3, 2), (2, 1), (1, 0), (2, 1), False),
        ((2, 3, 10, 9), (3, 2), (2, 1), (1, 0), (2, 1), True),
        ((2, 3, 8, 8), (3, 3), (1, 1), (2, 2), (1, 1), False),
        ((2, 3, 8, 8), (0, 2), (1, 1), (0, 0), (1, 1), False),
        ((2, 3, 8, 8), (2, 2), (0, 1), (0, 0), (1, 1), False),
        ((2, 3, 8, 8), (2, 2), (1, 1), (0, 0), (0, 1), False),
        ((2, 3, 1, 1), (2, 2), (2, 2), (0, 0), (1, 1), False),
        ((2, 3, 1, 1), (2, 2), (2, 2), (0, 0), (1, 1), True),
        ((2, 3, 1, 1), (2, 2), (2, 2), (1, 1), (1, 1), True),
        ((0, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
        ((2, 0, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
        ((3, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
        ((2, 3, 8, 8), (5, 5), (1, 1), (0, 0), (2, 2), False),
        ((2, 3, 9, 9), (3, 3), (2, 2), (1, 1), (1, 1), True),
        ((2, 3, 8, 8), (1, 1), (3, 3), (0, 0), (1, 1), True),
    ]
    for x, k, s, p, d, c in pools:
        for xl in (f32(x), cl(x) if len(x) == 4 else f32(x)):
            case("max_pool2d", lambda a, k, s, p, d, c: F.max_pool2d(a, k, s, p, d, ceil_mode=c),
                 xl, k, s, p, d, c)
            if d == (1, 1):
                case("avg_pool2d", lambda a, k, s, p, c: F.avg_pool2d(a, k, s, p, ceil_mode=c),
                     xl, k, s, p, c)
    # the default stride is the kernel
    case("max_pool2d", lambda a, k, s, p, d, c: F.max_pool2d(a, k, s, p, d, ceil_mode=c),
         f32((2, 3, 9, 9)), (3, 3), [], (0, 0), (1, 1), False)
    case("avg_pool2d", lambda a, k, s, p, c: F.avg_pool2d(a, k, s, p, ceil_mode=c),
         f32((2, 3, 9, 9)), (2, 3), [], (1, 1), True)
    # a stride of zero is PyTorch's refusal, not its default
    case("max_pool2d", lambda a, k, s, p, d, c: F.max_pool2d(a, k, s, p, d, ceil_mode=c),
         f32((2, 3, 9, 9)), (3, 3), (0, 0), (0, 0), (1, 1), False)
    case("avg_pool2d", lambda a, k, s, p, c: F.avg_pool2d(a, k, s, p, ceil_mode=c),
         f32((2, 3, 9, 9)), (2, 3), (0, 0), (1, 1), True)


# ---------------------------------------------- embedding, index_select, softmax

def EMB(weight, indices):
    return F.embedding(indices, weight)


def gen_misc():
    for w, i in [((10, 4), (2, 3)), ((10, 4), ()), ((10, 4), (0,)), ((10, 4), (5,)), ((10,), (2,)),
                 ((10, 4, 2), (3,)), ((0, 4), (2,)), ((10, 0), (2, 2))]:
        for idt in (T.int64, T.int32, T.float32):
            case("embedding", EMB, f32(w), t(idt, i))
    case("embedding", EMB, f32((10, 4), (1, 10)), t(T.int64, (3,)))
    case("embedding", EMB, t(T.float16, (10, 4)), t(T.int64, (3, 2), (1, 3)))
    for x in [f32((4, 5)), f32((4, 5), (1, 4)), f32((2, 3, 4)), f32(()), f32((4,)), t(T.int32, (4, 5)),
              cl((2, 3, 4, 5))]:
        for dim in [0, 1, -1, 2, -3]:
            for idx in [t(T.int64, (3,)), t(T.int32, (0,)), t(T.int64, ()), t(T.float32, (2,)),
                        t(T.int64, (2, 2))]:
                case("index_select", T.index_select, x, dim, idx)
    for x in [f32((4, 5)), f32((4, 5), (1, 4)), cl((2, 3, 4, 5)), f32(()), f32((0, 3)),
              t(T.float64, (3,)), t(T.float16, (2, 3)), t(T.int64, (2, 3)), t(T.bfloat16, (2, 2))]:
        for dim in [0, 1, -1, 2, -2, 4]:
            case("softmax", T.softmax, x, dim)


# ----------------------------------------------- what networks are built of

ACTIVATIONS = [("relu", T.relu), ("gelu", F.gelu), ("silu", F.silu), ("sigmoid", T.sigmoid),
               ("tanh", T.tanh), ("hardswish", F.hardswish), ("hardsigmoid", F.hardsigmoid),
               ("relu6", F.relu6)]


def gen_activations():
    for op, fn in ACTIVATIONS:
        for sizes, strides in LAYOUTS:
            case(op, fn, f32(sizes, strides))
        for d in PLAIN:
            case(op, fn, t(d, (2, 3), (1, 2)))
    drop = lambda a, p, tr: F.dropout(a, p, tr)
    for sizes, strides in LAYOUTS:
        case("dropout", drop, f32(sizes, strides), 0.5, True)
        case("dropout", drop, f32(sizes, strides), 0.5, False)
    for d in PLAIN:
        case("dropout", drop, t(d, (2, 3), (1, 2)), 0.2, True)
        case("dropout", drop, t(d, (2, 3)), 0.2, False)
    for p in [0.0, 1.0, -0.1, 1.5]:
        for tr in (True, False):
            case("dropout", drop, f32((4, 5)), p, tr)


def NORM_BN(x, rm, rv, w, b, tr):
    return F.batch_norm(x, rm, rv, w, b, tr)


def gen_norms():
    c = 3
    for x in [f32((2, 3)), f32((2, 3, 5)), f32((2, 3, 4, 5)), cl((2, 3, 4, 5)), f32((2, 3, 2, 4, 5)),
              cl((2, 3, 2, 4, 5)), f32((2, 3, 4, 5), (60, 1, 15, 3)), f32((0, 3, 4)),
              f32((1, 3)), f32((1, 3, 1, 1)), f32((2, 4, 5)), f32((2, 3, 4), (1, 2, 6)),
              f32((0, 3)), f32((2, 3, 0)), t(T.float64, (2, 3, 4)), t(T.float16, (2, 3, 4)),
              t(T.bfloat16, (2, 3, 4)), t(T.float64, (0, 3, 4))]:
        vec = t(x.dtype, (c,))
        for rm, rv, w, b in [(vec, vec, vec, vec), (vec, vec, None, None), (None, None, vec, vec),
                             (None, None, None, None), (t(x.dtype, (4,)), vec, vec, vec),
                             (vec, t(x.dtype, (2,)), vec, vec), (vec, vec, t(x.dtype, (4,)), vec),
                             (vec, vec, vec, t(x.dtype, (2, 3))), (vec, vec, t(x.dtype, ()), None),
                             (vec, vec, t(x.dtype, (0,)), None), (vec, vec, None, t(x.dtype, (1,)))]:
            for tr in (False, True):
                case("batch_norm", NORM_BN, x, rm, rv, w, b, tr)
    # mixed precision: float16 and bfloat16 inputs with float32 parameters
    for dt in (T.float16, T.bfloat16):
        v = f32((3,))
        case("batch_norm", NORM_BN, t(dt, (2, 3, 4)), v, v, v, v, False)
        case("batch_norm", NORM_BN, t(dt, (2, 3, 4)), v, v, None, None, True)
    # (float16 inputs with weights of another dtype are left out of layer_norm
    # and group_norm: 1.13's meta decompositions return float32 beside float32
    # weights, where its kernels return float16, as tstor does, and accept
    # float64 weights, which tstor refuses as the float32 kernels do)
    ln = lambda x, s, w, b: F.layer_norm(x, s, w, b)
    for x in [f32((2, 3, 4)), f32((2, 3, 4), (1, 2, 6)), cl((2, 3, 4, 5)), f32((4,)), f32(()),
              f32((0, 4)), t(T.float64, (2, 4)), t(T.float16, (2, 4)), t(T.int64, (2, 4)),
              f32((2, 3, 4), (12, 1, 3))]:
        for shape in [(4,), (3, 4), (2, 3, 4), (5,), (4, 3), (), (1, 2, 3, 4), (-4,)]:
            for w in (None, "shape", "other"):
                ws = None if w is None else (f32(shape) if w == "shape" else f32((7,)))
                if w == "shape" and any(s < 0 for s in shape):
                    continue
                if ws is not None and x.dtype == T.float16:
                    continue
                case("layer_norm", ln, x, list(shape), ws, ws)
        if x.dtype != T.float16:
            case("layer_norm", ln, x, [4], f32((4,)), None)
            case("layer_norm", ln, x, [4], None, f32((4,)))
            case("layer_norm", ln, x, [4], t(T.float64, (4,)), t(T.float64, (4,)))
    gn = lambda x, g, w, b: F.group_norm(x, g, w, b)
    for x in [f32((2, 6, 4, 5)), cl((2, 6, 4, 5)), f32((2, 6)), f32((2, 6, 7)), f32((0, 6, 3)),
              f32((2, 6, 2, 3, 4)), f32((6,)), f32((2, 6, 4, 5), (1, 2, 12, 60)),
              t(T.float64, (2, 6, 3)), t(T.int64, (2, 6, 3)), t(T.float16, (2, 6, 3))]:
        for g in [1, 2, 3, 6, 4, 0, 12]:
            for w in (None, "c", "other"):
                ws = None if w is None else (f32((6,)) if w == "c" else f32((4,)))
                if ws is not None and x.dtype == T.float16:
                    continue
                case("group_norm", gn, x, g, ws, ws)
        if x.dtype != T.float16:
            case("group_norm", gn, x, 3, f32((6,)), None)
            case("group_norm", gn, x, 3, t(T.float64, (6,)), t(T.float64, (6,)))


def gen_adaptive():
    amax = lambda x, s: F.adaptive_max_pool2d(x, s, return_indices=True)[0]
    amax_i = lambda x, s: F.adaptive_max_pool2d(x, s, return_indices=True)[1]
    for x in [f32((2, 3, 8, 8)), cl((2, 3, 8, 8)), f32((3, 7, 9)), f32((2, 3, 8, 8), (192, 1, 24, 3)),
              f32((0, 3, 8, 8)), f32((2, 0, 8, 8)), f32((2, 3, 0, 8)), f32((3, 0, 8)), f32((8, 8)),
              f32((1, 2, 3, 4, 5)), t(T.float64, (2, 3, 5, 5)), t(T.float16, (2, 3, 5, 5)),
              t(T.int64, (2, 3, 5, 5)), t(T.bfloat16, (1, 3, 4, 4)), cl((2, 3, 1, 1)),
              cl((1, 3, 4, 5))]:
        for s in [(1, 1), (7, 7), (3, 5), (16, 16), (0, 0), (1, 0), (-1, 2), (1, 3), (2, 1)]:
            case("adaptive_avg_pool2d", F.adaptive_avg_pool2d, x, list(s))
            case("adaptive_max_pool2d", amax, x, list(s))
            case("adaptive_max_pool2d_indices", amax_i, x, list(s))


def gen_where():
    shapes = [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), ()), ((1, 3), (2, 1), (3,)),
              ((2, 3), (4,), (3,)), ((), (), ()), ((0, 3), (1, 3), (3,)), ((5, 1, 4), (3, 1), (1,))]
    for sc, sa, sb in shapes:
        case("where", T.where, t(T.bool, sc), f32(sa), f32(sb))
    for dc in [T.bool, T.uint8, T.float32, T.int64]:
        case("where", T.where, t(dc, (2, 3)), f32((2, 3)), f32((2, 3)))
    for da, db in itertools.product(PLAIN, PLAIN):
        case("where", T.where, t(T.bool, (2, 3)), t(da, (2, 3)), t(db, (3,)))
    for da in PLAIN:
        case("where", T.where, t(T.bool, (2, 3)), t(da, (2, 3)), t(T.float64, ()))
    layouts = [(f32((2, 3), (1, 2)), f32((2, 3), (1, 2)), t(T.bool, (2, 3), (1, 2))),
               (f32((2, 3), (1, 2)), f32((2, 3)), t(T.bool, (2, 3))),
               (f32((2, 3)), f32((2, 3)), t(T.bool, (2, 3), (1, 2))),
               (cl((2, 3, 4, 5)), cl((2, 3, 4, 5)), t(T.bool, (2, 3, 4, 5))),
               (cl((2, 3, 4, 5)), f32((5,)), t(T.bool, (1, 3, 1, 1))),
               (f32((3, 4), (0, 1)), f32((3, 4)), t(T.bool, (3, 4), (1, 3)))]
    for a, b, c in layouts:
        case("where", T.where, c, a, b)


def gen_reduce_dtype():
    inputs = [f32((2, 3, 4)), f32((2, 3, 4), (1, 2, 6)), t(T.int32, (2, 3)), t(T.bool, (4,)),
              t(T.float16, (5, 2)), t(T.complex64, (3, 2)), t(T.int64, (2, 3, 4)), f32(()),
              cl((2, 3, 4, 5))]
    s = lambda a, d, k, dt: T.sum(a, d, keepdim=k, dtype=dt)
    m = lambda a, d, k, dt: T.mean(a, d, keepdim=k, dtype=dt)
    for x in inputs:
        for dims in [[], [0], [-1], [0, 1], [5]]:
            for dt in [T.float32, T.float64, T.int64, T.int32, T.float16, T.complex64, T.bool,
                       T.uint8, T.bfloat16]:
                case("sum_dtype", s, x, dims, False, dt)
                case("mean_dtype", m, x, dims, True, dt)
    sm = lambda a, d, dt: T.softmax(a, d, dtype=dt)
    for x in [f32((4, 5)), f32((4, 5), (1, 4)), cl((2, 3, 4, 5)), f32(()), t(T.int64, (2, 3)),
              t(T.float16, (2, 3)), t(T.bool, (2, 3)), t(T.bfloat16, (2, 2)), t(T.complex64, (2, 2))]:
        for dim in [0, -1, 2]:
            for dt in [T.float32, T.float64, T.float16, T.int64, T.bfloat16, T.complex64]:
                case("softmax_dtype", sm, x, dim, dt)


def gen_conv_same():
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
    cases = [((2, 3, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1), 1), ((2, 3, 8, 8), (4, 3, 2, 2), (1, 1), (1, 1), 1),
             ((2, 3, 8, 8), (4, 3, 4, 3), (1, 1), (2, 1), 1), ((2, 3, 8, 8), (4, 3, 3, 3), (2, 2), (1, 1), 1),
             ((2, 3, 8, 8), (4, 3, 3, 3), (1, 2), (1, 1), 1), ((2, 4, 8, 8), (4, 2, 3, 3), (1, 1), (1, 1), 2),
             ((3, 8, 8), (4, 3, 2, 2), (1, 1), (1, 1), 1), ((2, 3, 2, 2), (4, 3, 5, 5), (1, 1), (1, 1), 1),
             ((2, 3, 8, 8), (4, 3, 2, 2), (1, 1), (3, 3), 1), ((2, 3, 10), (4, 3, 4), (1,), (1,), 1),
             ((2, 3, 10), (4, 3, 3), (1,), (2,), 1), ((2, 3, 4, 5, 6), (4, 3, 2, 3, 2), (1, 1, 1),
                                                      (1, 2, 1), 1), ((0, 3, 8, 8), (4, 3, 2, 2), (1, 1), (1, 1), 1),
             ((2, 3, 8, 8), (4, 5, 3, 3), (1, 1), (1, 1), 1)]
    for x, w, s, d, g in cases:
        k = len(w) - 2
        for xl in (f32(x), cl(x) if len(x) == 4 else f32(x)):
            for mode in ("same", "valid"):
                case("conv%dd_mode" % k, lambda a, b, c, s, m, d, g, f=conv[k]: f(a, b, c, s, m, d, g),
                     xl, f32(w), None, s, mode, d, g)
        case("conv%dd_mode" % k, lambda a, b, c, s, m, d, g, f=conv[k]: f(a, b, c, s, m, d, g),
             f32(x), f32(w), f32(w[:1]), s, "same", d, g)


def gen_view():
    views = [
        (f32((2, 3)), [(6,), (3, 2), (-1,), (1, 6), (2, 1, 3), (-1, 2), (4,), (-1, -1), (5, -1), ()]),
        (f32((2, 3), (1, 2)), [(6,), (3, 2), (2, 3), (2, 3, 1), (1, 2, 1, 3)]),
        (cl((2, 3, 4, 5)), [(2, 60), (2, 3, 20), (6, 4, 5), (2, 3, 4, 5), (-1,), (2, 12, 5)]),
        (f32((4, 1, 3), (1, 12, 4)), [(4, 3), (2, 2, 3), (12,), (4, 3, 1)]),
        (f32((0, 3)), [(3, 0), (0,), (0, -1), (-1, 0), (0, 1, 3), (1, 0)]),
        (f32(()), [(), (1,), (-1,), (1, 1), (2,)]),
        (f32((3, 4), (0, 1)), [(12,), (3, 2, 2), (3, 4, 1)]),
        (f32((2, 3, 4), (12, 1, 3)), [(6, 4), (2, 12), (24,), (2, 3, 2, 2)]),
        (f32((6,), (2,)), [(2, 3), (3, 2, 1), (6,)]),
        (f32((8, 1, 1)), [(8,), (2, 4), (8, 1), (1, 8, 1)]),
    ]
    for x, shapes in views:
        for s in shapes:
            case("view", lambda a, s: a.view(s), x, list(s))


# ------------------------------------------------------ PyTorch 2.x's dtypes
#
# Run with torch 2.x (tests/pyref/install.sh's environment), the script adds to
# shapes_torch2.txt, after the cases above, those that involve the dtypes PyTorch
# 1.13 lacks (uint16, uint32, uint64, float8_e8m0fnu, float4_e2m1fn_x2,
# bcomplex32, the bits types' promotion, and the float8s where promotion meets them), as
# torch 2.x answers them.
# Promotion refusals of elementwise ops are kept there ("Promotion for ..."):
# torch 2.x refuses to promote the new unsigned types with most others.

def torch2_dtypes():
    new = [T.uint16, T.uint32, T.uint64, T.float8_e8m0fnu, T.float4_e2m1fn_x2, T.bcomplex32]
    f8 = [T.float8_e5m2, T.float8_e4m3fn, T.float8_e5m2fnuz, T.float8_e4m3fnuz]
    for d in new + f8:
        NAME[d] = str(d).replace("torch.", "")
    return new, f8


def gen_torch2():
    new, f8 = torch2_dtypes()
    unsigned = new[:3]
    plain2 = PLAIN + f8 + new
    for a in new:
        for b in DTYPES + f8 + new:
            case("promote", T.promote_types, a, b, cpu=False)
            if b not in new:
                case("promote", T.promote_types, b, a, cpu=False)
    for a in new:
        for b in plain2:
            for sa, sb in [((2,), (2,)), ((2,), ()), ((), (2,)), ((), ())]:
                case("result_type", T.result_type, t(a, sa), t(b, sb), cpu=False)
                if b not in new:
                    case("result_type", T.result_type, t(b, sa), t(a, sb), cpu=False)
        for sc in SCALARS:
            for sa in [(2,), ()]:
                case("result_type", T.result_type, t(a, sa), ("scalar", sc), cpu=False)
                case("result_type", T.result_type, ("scalar", sc), t(a, sa), cpu=False)
    for da in new:
        for db in plain2:
            for x, y in ((da, db), (db, da)):
                case("mul", T.mul, t(x, (2, 3)), t(y, (3,)))
                case("eq", T.eq, t(x, (2, 3)), t(y, (3,)))
                case("div", T.div, t(x, (2, 3)), t(y, ()))
                case("sub", T.sub, t(x, (2, 3)), t(y, (3,)))
                case("where", T.where, t(T.bool, (2, 3)), t(x, (2, 3)), t(y, (3,)))
        for sc in SCALARS:
            case("mul", T.mul, t(da, (2, 3)), ("scalar", sc))
            case("lt", T.lt, t(da, (2, 3), (1, 2)), ("scalar", sc))
            case("div", T.div, t(da, (3, 1)), ("scalar", sc))
            case("sub", T.sub, t(da, (2, 3)), ("scalar", sc))
        for op, fn in [("neg", T.neg), ("sin", T.sin), ("signbit", T.signbit), ("abs", T.abs)]:
            case(op, fn, t(da, (4, 2), (1, 4)))
            case(op, fn, t(da, (2, 3)))
        for op, fn in ACTIVATIONS:
            case(op, fn, t(da, (2, 3), (1, 2)))
        drop = lambda a, p, tr: F.dropout(a, p, tr)
        case("dropout", drop, t(da, (2, 3), (1, 2)), 0.2, True)
        case("dropout", drop, t(da, (2, 3)), 0.2, False)
        x = t(da, (2, 3, 4))
        for dims in [[], [0], [-1], [0, 2], [3]]:
            for keep in (False, True):
                case("sum", lambda a, d, k: T.sum(a, d, keepdim=k), x, dims, keep)
                case("mean", lambda a, d, k: T.mean(a, d, keepdim=k), x, dims, keep)
                case("amax", lambda a, d, k: T.amax(a, d, keepdim=k), x, dims, keep)
        for dim in [None, 0, -1, 3]:
            case("argmax", lambda a, d, k: T.argmax(a, d, keepdim=k), x, dim, False)
        for dt in [T.float32, T.int64] + new:
            case("sum_dtype", lambda a, d, k, dt: T.sum(a, d, keepdim=k, dtype=dt), x, [0], False, dt)
            case("mean_dtype", lambda a, d, k, dt: T.mean(a, d, keepdim=k, dtype=dt), x, [0], True, dt)
            case("sum_dtype", lambda a, d, k, dt: T.sum(a, d, keepdim=k, dtype=dt), f32((2, 3)), [0],
                 False, dt)
        # (no dim out of range with float4_e2m1fn_x2: torch refuses its
        # conversion before it checks the dim, and its meta kernel checks none)
        for dim in [0, -1] if da == T.float4_e2m1fn_x2 else [0, -1, 3]:
            case("softmax", T.softmax, t(da, (4, 5)), dim)
            case("softmax_dtype", lambda a, d, dt: T.softmax(a, d, dtype=dt), t(da, (4, 5)), dim,
                 T.float32)
            case("softmax_dtype", lambda a, d, dt: T.softmax(a, d, dtype=dt), f32((4, 5)), dim, da)
        for db in [da, T.float32, T.int64]:
            case("matmul", T.matmul, t(da, (3, 4)), t(db, (4, 5)))
            case("mm", T.mm, t(da, (3, 4)), t(db, (4, 5)))
            case("bmm", T.bmm, t(da, (2, 3, 4)), t(db, (2, 4, 5)))
        for db in [da, T.float32, T.int64, T.uint8] + new:
            case("cat", T.cat, [t(da, (2, 3)), t(db, (1, 3))], 0)
            case("stack", T.stack, [t(da, (2, 3)), t(db, (2, 3))], 1)
        case("embedding", EMB, f32((10, 4)), t(da, (2, 3)))
        case("embedding", EMB, t(da, (10, 4)), t(T.int64, (3,)))
        case("index_select", T.index_select, f32((4, 5)), 0, t(da, (3,)))
        case("index_select", T.index_select, t(da, (4, 5)), 1, t(T.int64, (3,)))
    for a in unsigned:
        case("conv2d", F.conv2d, t(a, (2, 3, 8, 8)), t(a, (4, 3, 3, 3)), None, (1, 1), (0, 0),
             (1, 1), 1)
    gen_sdpa(PLAIN + f8 + new)
    # the bits types promote with nothing but themselves (their elementwise
    # ops have no kernel, not even on meta)
    bits = [T.bits1x8, T.bits2x4, T.bits4x2, T.bits8, T.bits16]
    for d in bits:
        NAME[d] = str(d).replace("torch.", "")
    for a in bits:
        for b in DTYPES + f8 + new + bits:
            case("promote", T.promote_types, a, b, cpu=False)
            if b not in bits:
                case("promote", T.promote_types, b, a, cpu=False)
        for b in [T.uint8, T.float32, T.complex64, T.bool, a]:
            for sa, sb in [((2,), (2,)), ((2,), ())]:
                case("result_type", T.result_type, t(a, sa), t(b, sb), cpu=False)
        for sc in SCALARS:
            case("result_type", T.result_type, t(a, (2,)), ("scalar", sc), cpu=False)


def gen_sdpa(dtypes):
    """F.scaled_dot_product_attention (PyTorch 2.x): the shapes, broadcast batch
    dimensions, the refusals (fewer than 2 dimensions, mixed dtypes, sizes
    that do not multiply) and every dtype."""
    sdpa = F.scaled_dot_product_attention
    for q, k, v in [((2, 3), (4, 3), (4, 5)), ((3,), (4, 3), (4, 5)), ((2, 3), (4,), (4, 5)),
                    ((2, 3), (4, 3), (5,)), ((), (4, 3), (4, 5)), ((2, 3), (4, 2), (4, 5)),
                    ((2, 3), (4, 3), (3, 5)), ((2, 1, 2, 3), (3, 4, 3), (3, 4, 5)),
                    ((0, 3), (4, 3), (4, 5)), ((2, 3), (0, 3), (0, 5)), ((2, 3, 0), (2, 4, 0), (2, 4, 5)),
                    ((2, 2, 3), (3, 4, 3), (3, 4, 5)), ((5, 2, 3), (4, 3), (4, 6)),
                    ((1, 2, 3), (2, 4, 3), (1, 4, 5)), ((2, 3, 2, 8), (2, 3, 6, 8), (2, 1, 6, 4)),
                    # three 3-dimensional inputs count their batch mismatch as torch's 4-dimensional
                    # ones would; two of them do not
                    ((2, 2, 3), (2, 4, 3), (5, 4, 5)), ((5, 2, 3), (3, 4, 3), (3, 4, 6)),
                    ((2, 3), (2, 4, 3), (3, 4, 5)), ((2, 2, 3), (4, 3), (3, 4, 5)), ((2, 2, 3), (3, 4, 3), (4, 5)),
                    ((2, 2, 3), (2, 4, 3), (1, 5, 4, 5)), ((2, 2, 3), (3, 1, 4, 3), (3, 1, 4, 5)),
                    ((2, 3, 4, 2, 3), (2, 3, 5, 4, 3), (2, 3, 5, 4, 5)), ((2, 2, 2, 3), (3, 4, 3), (3, 4, 5))]:
        case("sdpa", sdpa, f32(q), f32(k), f32(v))
    # strided inputs: the output is contiguous whatever they are
    case("sdpa", sdpa, f32((2, 3), (1, 2)), f32((4, 3), (1, 4)), f32((4, 5), (1, 4)))
    case("sdpa", sdpa, f32((2, 4, 3), (3, 6, 1)), f32((2, 5, 3), (0, 3, 1)), f32((2, 5, 4), (20, 4, 1)))
    for d in dtypes:
        case("sdpa", sdpa, t(d, (2, 3)), t(d, (4, 3)), t(d, (4, 5)))
        case("sdpa", sdpa, t(d, (2, 3)), t(d, (4, 3)), f32((4, 5)))
        case("sdpa", sdpa, f32((2, 3)), t(d, (4, 3)), f32((4, 5)))


def gen_all():
    gen_promotion()
    gen_broadcast()
    gen_elementwise()
    gen_reductions()
    gen_matmul()
    gen_cat()
    gen_conv()
    gen_pool()
    gen_misc()
    gen_view()
    gen_activations()
    gen_norms()
    gen_adaptive()
    gen_where()
    gen_reduce_dtype()
    gen_conv_same()


def write(path):
    with open(path, "w") as f:
        f.write("# shape inference cases from PyTorch %s; tests/vectors/gen_shapes.py\n"
                % T.__version__)
        for line in lines:
            f.write(line + "\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    gen_all()
    # torch 2.x writes shapes_torch2.txt: every case above, then those of the
    # dtypes 1.13 lacks; with TSTOR_GEN_ALL_VERSIONS=1 it writes shapes.txt
    # (the cases 1.13 has) instead, for compare-torch2.sh
    if int(T.__version__.split(".")[0]) >= 2 and not os.environ.get("TSTOR_GEN_ALL_VERSIONS"):
        gen_torch2()
        write(out + "/shapes_torch2.txt")
    else:
        write(out + "/shapes.txt")


if __name__ == "__main__":
    main()
