#!/usr/bin/python3
"""DLPack with the real clients: PyTorch 1.13 and numpy 1.24 take tstor's
tensors and tstor takes theirs, through PyCapsules, with libtstor-io loaded by
ctypes.

    dlpack_clients.py LIBTSTOR_IO

For every dtype both sides have, in both directions, on strided views with a
storage offset: the consumer's tensor has the producer's data pointer,
strides and values; a write on either side is seen on the other (zero copy;
numpy 1.24 makes what it takes read-only, so there only tstor writes);
and dropping the consumer's tensor calls the producer's deleter once (the
storage's use count, numpy's reference count, come back to what they were).
"""
import ctypes
import gc
import sys
import warnings

import numpy as np
import torch
from torch.utils import dlpack as tdl

from tstor_ctypes import P, arr, capi, open_cpu, strided_view

warnings.filterwarnings("ignore", "ComplexHalf support is experimental")

io, ok, ctx, cpu = open_cpu(sys.argv[1], [
    ("tstor_dlpack_import", ctypes.c_int, [P, P, ctypes.POINTER(P)]),
])

# tstor dtype numbers (typed.h) and each side's name for the dtype
DTYPES = [  # (tstor, torch, numpy or None)
    (0, torch.uint8, np.uint8), (1, torch.int8, np.int8), (2, torch.int16, np.int16),
    (3, torch.int32, np.int32), (4, torch.int64, np.int64), (5, torch.float16, np.float16),
    (6, torch.float32, np.float32), (7, torch.float64, np.float64), (15, torch.bfloat16, None),
    (8, torch.complex32, None), (9, torch.complex64, np.complex64), (10, torch.complex128, np.complex128),
]
checks = 0


def idx2(i, j):
    return ctypes.cast(arr([i, j]), P)


def get(t, i, j):
    d = ctypes.c_double()
    ok(io.tstor_tensor_get_f64(t, idx2(i, j), ctypes.byref(d)), "get")
    return d.value


def widen(t):
    """complex32 has few operators in PyTorch 1.13: compare it as complex64."""
    return t.to(torch.complex64) if t.dtype == torch.complex32 else t


def real(x):
    return x.real if isinstance(x, complex) else x


class Exported:
    """What numpy.from_dlpack wants: __dlpack__ and __dlpack_device__."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def export_capsule(view):
    m = P()
    ok(io.tstor_dlpack_export(view, ctypes.byref(m)), "export")
    return capi.PyCapsule_New(m, b"dltensor", None)


# ---------------------------------------------------------- tstor -> them
for tdt, tt, nt in DTYPES:
    src = (torch.arange(24, dtype=torch.float64) + 1).to(tt)
    want = src[5:].as_strided((3, 2), (1, 6))
    for client in ("torch", "numpy"):
        if client == "numpy" and nt is None:
            continue
        base, view = strided_view(io, ok, ctx, cpu, tdt, src)
        storage = io.tstor_tensor_storage(base)
        uses = io.tstor_storage_use_count(storage)
        cap = export_capsule(view)
        if client == "torch":
            x = tdl.from_dlpack(cap)
            assert x.dtype == tt and x.stride() == (1, 6) and tuple(x.shape) == (3, 2), (tt, x.stride())
            assert x.data_ptr() == io.tstor_tensor_data(view)
            assert torch.equal(widen(x), widen(want)), (tt, x, want)
            x[1, 1] = 42
            assert real(get(view, 1, 1)) == 42, tt
            ok(io.tstor_tensor_set_f64(view, idx2(2, 0), 3), "set")
            assert real(complex(x[2, 0].item()) if x.is_complex() else x[2, 0].item()) == 3, tt
        else:
            x = np.from_dlpack(Exported(cap))
            esize = x.itemsize
            assert x.dtype == nt and x.strides == (esize, 6 * esize), (nt, x.strides)
            assert x.__array_interface__["data"][0] == io.tstor_tensor_data(view)
            assert (x == want.numpy()).all(), (nt, x)
            # numpy 1.24 makes arrays it takes by DLPack read-only: the
            # write goes the other way only here (numpy -> tstor below writes)
            assert not x.flags.writeable
            ok(io.tstor_tensor_set_f64(view, idx2(1, 1), 42), "set")
            ok(io.tstor_tensor_set_f64(view, idx2(2, 0), 3), "set")
            assert real(x[2, 0]) == 3, nt
        # our tensors go; theirs keeps the bytes; when theirs goes, the
        # deleter gives the storage's last reference back, once
        io.tstor_tensor_release(view)
        assert io.tstor_storage_use_count(storage) == uses, "the export holds the storage"
        assert (x[1, 1] == 42).all() if client == "numpy" else x[1, 1].item() == 42
        del x, cap
        gc.collect()
        assert io.tstor_storage_use_count(storage) == uses - 1, (client, tt, io.tstor_storage_use_count(storage))
        io.tstor_tensor_release(base)
        checks += 1


# ---------------------------------------------------------- them -> tstor
def import_capsule(cap):
    ptr = capi.PyCapsule_GetPointer(cap, b"dltensor")
    t = P()
    ok(io.tstor_dlpack_import(ctx, ptr, ctypes.byref(t)), "import")
    # as the protocol says: the consumer renames the capsule it took
    capi.PyCapsule_SetName(cap, b"used_dltensor")
    return t


for tdt, tt, nt in DTYPES:
    for client in ("torch", "numpy"):
        if client == "numpy" and nt is None:
            continue
        full = (torch.arange(24, dtype=torch.float64) + 1).to(tt).view(4, 6)
        if client == "torch":
            src = full[1:, ::2]  # offset 6, strides (6, 2)
            cap = tdl.to_dlpack(src)
            ptr, strides = src.data_ptr(), src.stride()
        else:
            src = full.numpy()[1:, ::2] if tt != torch.bfloat16 else None
            refs = sys.getrefcount(src)
            cap = src.__dlpack__()
            ptr, strides = src.__array_interface__["data"][0], tuple(s // src.itemsize for s in src.strides)
        t = import_capsule(cap)
        del cap
        assert io.tstor_tensor_dtype(t) == tdt
        assert io.tstor_tensor_data(t) == ptr
        nd = io.tstor_tensor_dim(t)
        assert tuple(io.tstor_tensor_strides(t)[i] for i in range(nd)) == tuple(strides), client
        assert tuple(io.tstor_tensor_sizes(t)[i] for i in range(nd)) == (3, 3)
        for i in range(3):
            for j in range(3):
                assert real(get(t, i, j)) == real(complex(src[i, j].item()) if client == "torch" and src.is_complex()
                                                  else src[i, j].item()), (client, tt, i, j)
        ok(io.tstor_tensor_set_f64(t, idx2(0, 1), 77), "set")
        assert real(src[0, 1].item()) == 77, (client, tt)
        src[2, 2] = 5
        assert real(get(t, 2, 2)) == 5
        io.tstor_tensor_release(t)  # the producer's deleter, once
        gc.collect()
        if client == "numpy":
            assert sys.getrefcount(src) == refs, (sys.getrefcount(src), refs)
        checks += 1

io.tstor_context_close(ctx)
print("dlpack: %d exchanges with torch %s and numpy %s, zero copy both ways" % (checks, torch.__version__,
                                                                                np.__version__))
