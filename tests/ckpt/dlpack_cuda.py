#!/usr/bin/env python3
"""DLPack 1.x between tstor's cuda device and PyTorch's own CUDA, on a machine
with a GPU (tests/gpu-checks.sh runs it with that machine's torch), with
libtstor-io loaded by ctypes and a context whose config ($TSTOR_CONFIG) loads
the cuda backend.

    dlpack_cuda.py LIBTSTOR_IO

For every dtype that has a DLPack code, both ways, on a strided view with a
storage offset: the consumer's tensor is on cuda:0 at the producer's address
with the producer's strides and bytes, and dropping it calls the producer's
deleter once. Then the stream handshake of the Python array API, both ways:

- PyTorch as producer: tstor's synchronous copies run on CUDA's legacy
  default stream, so tstor asks `__dlpack__(stream=1)`. PyTorch then makes
  that stream wait for the work queued on its current stream: a tensor that a
  side stream is still writing (behind `torch.cuda._sleep`) reads, in tstor,
  as the side stream leaves it.
- tstor as producer: torch.from_dlpack passes its current stream (1 for the
  default); tstor's bytes written by an asynchronous copy on a tstor stream
  are ready for it once the producer has synchronized that stream's event,
  which `__dlpack__` does before it hands the capsule over.

Last, a copy exported IS_COPIED, on the device.
"""
import ctypes
import gc
import sys
import warnings

import numpy as np
import torch

from tstor_ctypes import COPY, FLAG_IS_COPIED, P, Device, Versioned, arr, capi, dlpack_dtypes, open_cpu, \
    strided_view

warnings.filterwarnings("ignore", "ComplexHalf support is experimental")

U = ctypes.c_uint
KDL_CUDA = 2

io, ok, ctx, cpu = open_cpu(sys.argv[1], [
    ("tstor_storage_new", ctypes.c_int, [P, Device, ctypes.c_size_t, ctypes.POINTER(P)]),
    ("tstor_storage_new_pinned", ctypes.c_int, [P, ctypes.c_size_t, ctypes.POINTER(P)]),
    ("tstor_storage_data", P, [P]),
    ("tstor_storage_release", None, [P]),
    ("tstor_storage_copy_async", ctypes.c_int, [P, P, P]),
    ("tstor_stream_new", ctypes.c_int, [P, Device, ctypes.POINTER(P)]),
    ("tstor_stream_free", None, [P]),
    ("tstor_event_new", ctypes.c_int, [P, Device, ctypes.POINTER(P)]),
    ("tstor_event_record", ctypes.c_int, [P, P]),
    ("tstor_event_synchronize", ctypes.c_int, [P]),
    ("tstor_event_free", None, [P]),
    ("tstor_tensor_get_device", ctypes.c_int, [P]),
    ("tstor_tensor_to", ctypes.c_int, [P, Device, ctypes.c_int, ctypes.POINTER(P)]),
    ("tstor_tensor_contiguous", ctypes.c_int, [P, ctypes.POINTER(P)]),
    ("tstor_tensor_nbytes", ctypes.c_size_t, [P]),
    ("tstor_dlpack_negotiate", ctypes.c_int, [ctypes.c_int, ctypes.c_int]),
    ("tstor_dlpack_export_versioned", ctypes.c_int, [P, U, ctypes.POINTER(P)]),
    ("tstor_dlpack_import_versioned", ctypes.c_int, [P, P, U, ctypes.POINTER(P)]),
])
gpu = Device()
ok(io.tstor_device_parse(ctx, b"cuda:0", ctypes.byref(gpu)), "cuda:0 (is the cuda backend in $TSTOR_CONFIG?)")
if not torch.cuda.is_available():
    raise SystemExit("this torch (%s) sees no GPU" % torch.__version__)

DTYPES = dlpack_dtypes(torch, np)
checks = 0
streams_passed = []


def raw(x):
    """x's elements, row-major, as bytes (x a torch tensor anywhere)."""
    return x.contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes()


def host_bytes(t):
    """The elements of tstor tensor t, row-major, as bytes, read by tstor."""
    h, c = P(), P()
    ok(io.tstor_tensor_to(t, cpu, io.tstor_tensor_dtype(t), ctypes.byref(h)), "to cpu")
    ok(io.tstor_tensor_contiguous(h, ctypes.byref(c)), "contiguous")
    out = ctypes.string_at(io.tstor_tensor_data(c), io.tstor_tensor_nbytes(c))
    io.tstor_tensor_release(c)
    io.tstor_tensor_release(h)
    return out


def source(tt):
    v = torch.arange(24, dtype=torch.float64) + 1
    return (v.remainder(2) == 0) if tt == torch.bool else v.to(tt)


class Exported:
    """A tstor tensor on the GPU as a producer. `ready` is a tstor event that
    the bytes are ready after: __dlpack__ waits for it before the consumer
    gets the capsule, whatever its stream."""

    def __init__(self, t, ready=None, flags=0):
        self.t, self.ready, self.flags = t, ready, flags

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        streams_passed.append(stream)
        if self.ready:
            ok(io.tstor_event_synchronize(self.ready), "event_synchronize")
        m = P()
        assert io.tstor_dlpack_negotiate(*(max_version or (-1, -1))) == 1, max_version
        ok(io.tstor_dlpack_export_versioned(self.t, self.flags | (COPY if copy else 0), ctypes.byref(m)),
           "export_versioned")
        return capi.PyCapsule_New(m, b"dltensor_versioned", None)

    def __dlpack_device__(self):
        return (KDL_CUDA, io.tstor_tensor_get_device(self.t))


def import_capsule(cap, flags=0):
    ptr = capi.PyCapsule_GetPointer(cap, b"dltensor_versioned")
    t = P()
    ok(io.tstor_dlpack_import_versioned(ctx, ptr, flags, ctypes.byref(t)), "import_versioned")
    capi.PyCapsule_SetName(cap, b"used_dltensor_versioned")  # the consumer's, now
    return t


# ---------------------------------------------------------- tstor -> torch
for tdt, tt, _ in DTYPES:
    src = source(tt)
    want = src[5:].as_strided((3, 2), (1, 6))
    base, view = strided_view(io, ok, ctx, gpu, tdt, src)
    storage = io.tstor_tensor_storage(base)
    uses = io.tstor_storage_use_count(storage)
    x = torch.from_dlpack(Exported(view))
    assert x.device == torch.device("cuda", 0), (tt, x.device)
    assert x.dtype == tt and x.stride() == (1, 6) and tuple(x.shape) == (3, 2), (tt, x.dtype, x.stride())
    assert x.data_ptr() == io.tstor_tensor_data(view), tt
    assert raw(x) == raw(want), tt
    io.tstor_tensor_release(view)
    assert io.tstor_storage_use_count(storage) == uses, "the export holds the storage"
    del x
    gc.collect()
    assert io.tstor_storage_use_count(storage) == uses - 1, tt
    io.tstor_tensor_release(base)
    checks += 1
assert set(streams_passed) == {1}, streams_passed  # the legacy default stream, as torch's default

# ---------------------------------------------------------- torch -> tstor
for tdt, tt, _ in DTYPES:
    full = source(tt).view(4, 6).cuda()
    src = full[1:, ::2]  # offset 6, strides (6, 2)
    cap = src.__dlpack__(stream=1, max_version=(1, 1))
    v = ctypes.cast(capi.PyCapsule_GetPointer(cap, b"dltensor_versioned"), ctypes.POINTER(Versioned))[0]
    assert v.major == 1 and v.flags == 0 and v.dl_tensor.device_type == KDL_CUDA, (tt, v.major, v.flags)
    t = import_capsule(cap)
    del cap
    assert io.tstor_tensor_get_device(t) == 0
    assert io.tstor_tensor_dtype(t) == tdt, (tt, io.tstor_tensor_dtype(t))
    assert io.tstor_tensor_data(t) == src.data_ptr(), tt
    assert tuple(io.tstor_tensor_strides(t)[i] for i in range(2)) == (6, 2)
    assert tuple(io.tstor_tensor_sizes(t)[i] for i in range(2)) == (3, 3)
    assert host_bytes(t) == raw(src), tt
    io.tstor_tensor_release(t)  # the producer's deleter, once
    del full, src
    gc.collect()
    checks += 1

# ------------------------------------------- the handshake, torch -> tstor
# A side stream writes the tensor after a sleep of about 0.1 s of GPU
# clocks. Without the handshake tstor would read it before the write.
n = 1 << 24
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    x = torch.zeros(n, dtype=torch.int32, device="cuda")
    torch.cuda._sleep(200_000_000)
    x.fill_(7)
    cap = x.__dlpack__(stream=1, max_version=(1, 1))  # torch's current stream is `side`
t = import_capsule(cap)
del cap
got = np.frombuffer(host_bytes(t), dtype=np.int32)  # a synchronous copy, on the legacy stream
assert got.shape == (n,) and (got == 7).all(), "tstor read the tensor before the side stream wrote it"
io.tstor_tensor_release(t)
side.synchronize()
del x
checks += 1

# ------------------------------------------- the handshake, tstor -> torch
# tstor fills 256 MiB of the device from pinned memory on a stream of its
# own, asynchronously; torch, on a side stream of its own, reads the bytes
# once the producer has waited for tstor's event.
nbytes = 256 << 20
pinned, dev, stream, event, t = P(), P(), P(), P(), P()
ok(io.tstor_storage_new_pinned(ctx, nbytes, ctypes.byref(pinned)), "new_pinned")
ctypes.memset(io.tstor_storage_data(pinned), 0x5A, nbytes)
ok(io.tstor_storage_new(ctx, gpu, nbytes, ctypes.byref(dev)), "new on the GPU")
ok(io.tstor_stream_new(ctx, gpu, ctypes.byref(stream)), "stream_new")
ok(io.tstor_event_new(ctx, gpu, ctypes.byref(event)), "event_new")
ok(io.tstor_storage_copy_async(dev, pinned, stream), "copy_async")
ok(io.tstor_event_record(event, stream), "event_record")
ok(io.tstor_tensor_on_storage(dev, 0, 0, 1, ctypes.cast(arr([nbytes]), P), None, ctypes.byref(t)), "on_storage")
del streams_passed[:]
theirs = torch.cuda.Stream()
with torch.cuda.stream(theirs):
    y = torch.from_dlpack(Exported(t, ready=event))
    total = int(y.to(torch.int64).sum().item())
assert streams_passed == [theirs.cuda_stream], (streams_passed, theirs.cuda_stream)
assert total == 0x5A * nbytes, "torch read the bytes before tstor's copy finished"
del y
io.tstor_tensor_release(t)
io.tstor_event_free(event)
io.tstor_stream_free(stream)
io.tstor_storage_release(dev)
io.tstor_storage_release(pinned)
checks += 1

# --------------------------------------------------- a copy, on the device
src = source(torch.float32)
base = P()
ok(io.tstor_tensor_from_array(ctx, gpu, 6, 1, ctypes.cast(arr([24]), P), P(src.data_ptr()), ctypes.byref(base)),
   "from_array")
y = torch.from_dlpack(Exported(base, flags=COPY))  # as __dlpack__(copy=True) asks
assert y.device == torch.device("cuda", 0) and y.data_ptr() != io.tstor_tensor_data(base)
assert torch.equal(y.cpu(), src)
m = P()
ok(io.tstor_dlpack_export_versioned(base, COPY, ctypes.byref(m)), "export copy")
v = ctypes.cast(m, ctypes.POINTER(Versioned))[0]
assert v.flags == FLAG_IS_COPIED and v.dl_tensor.device_type == KDL_CUDA, v.flags
ctypes.CFUNCTYPE(None, P)(v.deleter)(m)
io.tstor_tensor_release(base)
del y
checks += 1

io.tstor_context_close(ctx)
print("dlpack 1.x on cuda:0: %d exchanges with torch %s (%s), both ways, the stream handshake both ways"
      % (checks, torch.__version__, torch.cuda.get_device_name(0)))
