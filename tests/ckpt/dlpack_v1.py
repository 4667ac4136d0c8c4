#!/usr/bin/env python3
"""DLPack 1.x with the real clients of the reference environment: PyTorch 2.x
and numpy 2.x take tstor's tensors and tstor takes theirs, through
"dltensor_versioned" PyCapsules, with libtstor-io loaded by ctypes.

    dlpack_v1.py LIBTSTOR_IO

For every dtype that has a DLPack code, both ways, on a strided view with a
storage offset: the consumer's tensor has the producer's data pointer,
strides and bytes (zero copy), and dropping it calls the producer's deleter
once. Then the flags: the version each client asks for (max_version) and the
struct it gets; a borrowed storage exported READ_ONLY, which numpy refuses
to write (torch 2.x takes it writable: said, not hidden); a copy exported
IS_COPIED; a read-only numpy array imported by tstor as a copy, or refused
without one; a 0.x consumer still served.
"""
import ctypes
import gc
import sys
import warnings

import numpy as np
import torch

from tstor_ctypes import COPY, FLAG_IS_COPIED, FLAG_READ_ONLY, NO_COPY, P, Device, Versioned, arr, capi, \
    dlpack_dtypes, open_cpu, strided_view

warnings.filterwarnings("ignore", "ComplexHalf support is experimental")

U = ctypes.c_uint


io, ok, ctx, cpu = open_cpu(sys.argv[1], [
    ("tstor_storage_wrap", ctypes.c_int, [P, Device, P, ctypes.c_size_t, ctypes.POINTER(P)]),
    ("tstor_storage_release", None, [P]),
    ("tstor_dlpack_negotiate", ctypes.c_int, [ctypes.c_int, ctypes.c_int]),
    ("tstor_dlpack_export_versioned", ctypes.c_int, [P, U, ctypes.POINTER(P)]),
    ("tstor_dlpack_import_versioned", ctypes.c_int, [P, P, U, ctypes.POINTER(P)]),
])

DTYPES = dlpack_dtypes(torch, np)
checks = 0
asked = {}


def raw(x):
    """x's elements, row-major, as bytes."""
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x).tobytes()
    return x.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def source(tt):
    v = torch.arange(24, dtype=torch.float64) + 1
    return (v.remainder(2) == 0) if tt == torch.bool else v.to(tt)


class Exported:
    """A tstor tensor as a producer: __dlpack__ negotiates the version with
    tstor_dlpack_negotiate, as the protocol has producers do."""

    def __init__(self, t, flags=0, client=""):
        self.t, self.flags, self.client = t, flags, client

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        asked.setdefault(self.client, max_version)
        m = P()
        flags = self.flags | (COPY if copy else NO_COPY if copy is False else 0)
        if io.tstor_dlpack_negotiate(*(max_version or (-1, -1))):
            ok(io.tstor_dlpack_export_versioned(self.t, flags, ctypes.byref(m)), "export_versioned")
            return capi.PyCapsule_New(m, b"dltensor_versioned", None)
        ok(io.tstor_dlpack_export(self.t, ctypes.byref(m)), "export")
        return capi.PyCapsule_New(m, b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)


def data_of(x):
    return x.data_ptr() if isinstance(x, torch.Tensor) else x.__array_interface__["data"][0]


# ---------------------------------------------------------- tstor -> them
for tdt, tt, nt in DTYPES:
    src = source(tt)
    want = src[5:].as_strided((3, 2), (1, 6))
    for client in ("torch", "numpy"):
        if client == "numpy" and nt is None:
            continue
        base, view = strided_view(io, ok, ctx, cpu, tdt, src)
        storage = io.tstor_tensor_storage(base)
        uses = io.tstor_storage_use_count(storage)
        e = Exported(view, client=client)
        x = torch.from_dlpack(e) if client == "torch" else np.from_dlpack(e)
        if client == "torch":
            assert x.dtype == tt and x.stride() == (1, 6), (tt, x.dtype, x.stride())
        else:
            assert x.dtype == nt and x.strides == (x.itemsize, 6 * x.itemsize), (nt, x.strides)
            assert x.flags.writeable, nt
        assert tuple(x.shape) == (3, 2)
        assert data_of(x) == io.tstor_tensor_data(view), (client, tt)
        assert raw(x) == raw(want), (client, tt)
        io.tstor_tensor_release(view)
        assert io.tstor_storage_use_count(storage) == uses, "the export holds the storage"
        del x, e
        gc.collect()
        assert io.tstor_storage_use_count(storage) == uses - 1, (client, tt)
        io.tstor_tensor_release(base)
        checks += 1


# ---------------------------------------------------------- them -> tstor
def import_capsule(cap, flags=0):
    ptr = capi.PyCapsule_GetPointer(cap, b"dltensor_versioned")
    t = P()
    rc = io.tstor_dlpack_import_versioned(ctx, ptr, flags, ctypes.byref(t))
    if rc == 0:
        capi.PyCapsule_SetName(cap, b"used_dltensor_versioned")  # the consumer's, now
    return rc, t


for tdt, tt, nt in DTYPES:
    for client in ("torch", "numpy"):
        if client == "numpy" and nt is None:
            continue
        full = source(tt).view(4, 6)
        src = full[1:, ::2] if client == "torch" else full.numpy()[1:, ::2]  # offset 6, strides (6, 2)
        cap = src.__dlpack__(max_version=(1, 1))
        v = ctypes.cast(capi.PyCapsule_GetPointer(cap, b"dltensor_versioned"), ctypes.POINTER(Versioned))[0]
        assert v.major == 1 and v.flags == 0, (client, tt, v.major, v.flags)
        rc, t = import_capsule(cap)
        ok(rc, "import_versioned")
        del cap
        assert io.tstor_tensor_dtype(t) == tdt, (client, tt, io.tstor_tensor_dtype(t))
        assert io.tstor_tensor_data(t) == data_of(src), (client, tt)
        assert tuple(io.tstor_tensor_strides(t)[i] for i in range(2)) == (6, 2)
        assert tuple(io.tstor_tensor_sizes(t)[i] for i in range(2)) == (3, 3)
        if tt in (torch.float32, torch.int64, torch.uint32):
            ok(io.tstor_tensor_set_f64(t, ctypes.cast(arr([0, 1]), P), 77), "set")
            assert int(src[0, 1]) == 77, (client, tt)
        io.tstor_tensor_release(t)  # the producer's deleter, once
        gc.collect()
        checks += 1

# ------------------------------------------------------------------ flags
# a borrowed storage: READ_ONLY, which numpy keeps; torch 2.x does not
buf = (ctypes.c_float * 4)(1, 2, 3, 4)
s = P()
ok(io.tstor_storage_wrap(ctx, cpu, ctypes.addressof(buf), 16, ctypes.byref(s)), "wrap")
ro = P()
ok(io.tstor_tensor_on_storage(s, 6, 0, 1, ctypes.cast(arr([4]), P), None, ctypes.byref(ro)), "on_storage")
io.tstor_storage_release(s)
x = np.from_dlpack(Exported(ro, client="numpy"))
assert not x.flags.writeable and x.__array_interface__["data"][0] == ctypes.addressof(buf)
try:
    x[0] = 9
    raise SystemExit("numpy wrote through a READ_ONLY export")
except ValueError:
    pass
assert buf[0] == 1
del x
y = torch.from_dlpack(Exported(ro, client="torch"))
torch_keeps_read_only = False
try:
    y[0] = 9
except RuntimeError:
    torch_keeps_read_only = True
if not torch_keeps_read_only:
    buf[0] = 1  # torch 2.x makes a writable tensor of READ_ONLY memory: its choice, noted below
del y
m = P()
assert io.tstor_dlpack_export(ro, ctypes.byref(m)) != 0 and not m, "a 0.x export of a borrowed storage"
assert b"borrowed" in io.tstor_last_error()
# a copy: IS_COPIED, writable, the consumer's own
x = np.from_dlpack(Exported(ro, client="numpy"), copy=True)
assert x.flags.writeable and x.__array_interface__["data"][0] != ctypes.addressof(buf)
x[0] = 9
assert buf[0] == 1
m = P()
ok(io.tstor_dlpack_export_versioned(ro, COPY, ctypes.byref(m)), "export copy")
v = ctypes.cast(m, ctypes.POINTER(Versioned))[0]
assert v.flags == FLAG_IS_COPIED and v.major == 1, v.flags
ctypes.CFUNCTYPE(None, P)(v.deleter)(m)
io.tstor_tensor_release(ro)
checks += 4

# a read-only numpy array into tstor: a copy, or refused without one
a = np.arange(6, dtype=np.float32)
a.flags.writeable = False
cap = a.__dlpack__(max_version=(1, 0))
v = ctypes.cast(capi.PyCapsule_GetPointer(cap, b"dltensor_versioned"), ctypes.POINTER(Versioned))[0]
assert v.flags & FLAG_READ_ONLY
rc, t = import_capsule(cap, NO_COPY)
assert rc != 0 and not t and b"read-only" in io.tstor_last_error()
rc, t = import_capsule(cap)
ok(rc, "import read-only")
assert io.tstor_tensor_data(t) != a.__array_interface__["data"][0]
ok(io.tstor_tensor_set_f64(t, ctypes.cast(arr([2]), P), -1), "set the copy")
assert a[2] == 2
io.tstor_tensor_release(t)
del cap
checks += 2

# a 0.x consumer (no max_version) gets a DLManagedTensor
src = torch.arange(5, dtype=torch.float32)
base = P()
ok(io.tstor_tensor_from_array(ctx, cpu, 6, 1, ctypes.cast(arr([5]), P), P(src.data_ptr()), ctypes.byref(base)),
   "from_array")
cap = Exported(base).__dlpack__()
assert capi.PyCapsule_GetPointer(cap, b"dltensor")
x = torch.from_dlpack(cap)
assert x.data_ptr() == io.tstor_tensor_data(base) and torch.equal(x, src)
del x, cap
io.tstor_tensor_release(base)
checks += 1

io.tstor_context_close(ctx)
print("dlpack 1.x: %d exchanges with torch %s and numpy %s; max_version asked: torch %s, numpy %s; "
      "READ_ONLY kept by numpy, %s by torch" % (checks, torch.__version__, np.__version__, asked.get("torch"),
                                                asked.get("numpy"), "kept" if torch_keeps_read_only else "not kept"))
