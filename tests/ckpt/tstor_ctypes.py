"""libtstor-io through ctypes, for the DLPack clients' tests (dlpack_clients.py
under PyTorch 1.13, dlpack_v1.py under 2.x): the library with the signatures
both use, PyCapsule's C API, and a context with its cpu device.

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
