"""libtstor-io through ctypes, for the DLPack clients' tests (dlpack_clients.py
under PyTorch 1.13, dlpack_v1.py under 2.x, dlpack_cuda.py on a GPU): the
library with the signatures all use, PyCapsule's C API, a context with its cpu
device, and what the 1.x clients share: the structs, the flags and the dtypes.

    io, ctx, cpu = tstor_ctypes.open_cpu(path, [(name, restype, argtypes), ...])
"""
import ctypes

P = ctypes.c_void_p
I64 = ctypes.c_int64


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int32), ("index", ctypes.c_int32)]


SIGNATURES = [
    ("tstor_context_open", ctypes.c_int, [P, ctypes.POINTER(P)]),
    ("tstor_context_close", None, [P]),
    ("tstor_device_parse", ctypes.c_int, [P, ctypes.c_char_p, ctypes.POINTER(Device)]),
    ("tstor_last_error", ctypes.c_char_p, []),
    ("tstor_tensor_from_array", ctypes.c_int, [P, Device, ctypes.c_int, ctypes.c_int, P, P, ctypes.POINTER(P)]),
    ("tstor_tensor_on_storage", ctypes.c_int, [P, ctypes.c_int, I64, ctypes.c_int, P, P, ctypes.POINTER(P)]),
    ("tstor_tensor_release", None, [P]),
    ("tstor_tensor_storage", P, [P]),
    ("tstor_tensor_data", P, [P]),
    ("tstor_tensor_dim", ctypes.c_int, [P]),
    ("tstor_tensor_strides", ctypes.POINTER(I64), [P]),
    ("tstor_tensor_sizes", ctypes.POINTER(I64), [P]),
    ("tstor_tensor_dtype", ctypes.c_int, [P]),
    ("tstor_tensor_set_f64", ctypes.c_int, [P, P, ctypes.c_double]),
    ("tstor_tensor_get_f64", ctypes.c_int, [P, P, ctypes.POINTER(ctypes.c_double)]),
    ("tstor_storage_use_count", ctypes.c_long, [P]),
    ("tstor_dlpack_export", ctypes.c_int, [P, ctypes.POINTER(P)]),
]

capi = ctypes.pythonapi
capi.PyCapsule_New.restype = ctypes.py_object
capi.PyCapsule_New.argtypes = [P, ctypes.c_char_p, P]
capi.PyCapsule_GetPointer.restype = P
capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
capi.PyCapsule_SetName.restype = ctypes.c_int
capi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]


def arr(vals):
    """An int64 array of vals, for the sizes and strides tstor takes."""
    return (I64 * len(vals))(*vals)


def strided_view(io, ok, ctx, dev, tdt, src):
    """A tstor tensor on dev over a copy of src's 24 elements (a host
    tensor's, at src.data_ptr()), and the view [offset 5, sizes (3, 2),
    strides (1, 6)] of it: the strided view with an offset the clients'
    exchanges start from."""
    base = P()
    ok(io.tstor_tensor_from_array(ctx, dev, tdt, 1, ctypes.cast(arr([24]), P), P(src.data_ptr()),
                                  ctypes.byref(base)), "from_array")
    view = P()
    ok(io.tstor_tensor_on_storage(io.tstor_tensor_storage(base), tdt, 5, 2, ctypes.cast(arr([3, 2]), P),
                                  ctypes.cast(arr([1, 6]), P), ctypes.byref(view)), "on_storage")
    return base, view


def open_cpu(path, more=()):
    """The library at path with SIGNATURES and `more` declared, a context
    and its cpu device; exits naming tstor's error where either fails."""
    io = ctypes.CDLL(path)
    for name, res, args in SIGNATURES + list(more):
        f = getattr(io, name)
        f.restype = res
        f.argtypes = args

    def ok(rc, what):
        if rc != 0:
            raise SystemExit("%s failed (%d): %s" % (what, rc, io.tstor_last_error().decode()))

    ctx = P()
    ok(io.tstor_context_open(None, ctypes.byref(ctx)), "context")
    cpu = Device()
    ok(io.tstor_device_parse(ctx, b"cpu", ctypes.byref(cpu)), "cpu")
    return io, ok, ctx, cpu


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", P), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", DLDataType), ("shape", ctypes.POINTER(I64)),
                ("strides", ctypes.POINTER(I64)), ("byte_offset", ctypes.c_uint64)]


class Versioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", P), ("deleter", P),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


# tstor_dlpack_flags, and DLPack's DLPACK_FLAG_BITMASK_*
COPY, NO_COPY, READ_ONLY = 1, 2, 4
FLAG_READ_ONLY, FLAG_IS_COPIED = 1, 2


def dlpack_dtypes(torch, np):
    """Every tstor dtype with a DLPack code (typed.h's numbers), with torch
    2.x's and numpy's (None where numpy has none)."""
    return [
        (0, torch.uint8, np.uint8), (1, torch.int8, np.int8), (2, torch.int16, np.int16),
        (3, torch.int32, np.int32), (4, torch.int64, np.int64), (5, torch.float16, np.float16),
        (6, torch.float32, np.float32), (7, torch.float64, np.float64), (8, torch.complex32, None),
        (9, torch.complex64, np.complex64), (10, torch.complex128, np.complex128), (11, torch.bool, np.bool_),
        (15, torch.bfloat16, None), (23, torch.float8_e5m2, None), (24, torch.float8_e4m3fn, None),
        (25, torch.float8_e5m2fnuz, None), (26, torch.float8_e4m3fnuz, None), (27, torch.uint16, np.uint16),
        (28, torch.uint32, np.uint32), (29, torch.uint64, np.uint64), (44, torch.float8_e8m0fnu, None),
    ]
