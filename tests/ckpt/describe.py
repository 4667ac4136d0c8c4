"""The listing of a loaded checkpoint that golden.txt holds (see gen_golden.py
for its format); shared by the generator and check_torch.py."""
import collections
import struct

import torch


def dname(dt):
    return str(dt).replace("torch.", "")


def fnv(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def logical_bytes(t):
    # copied into fresh contiguous memory: contiguous() keeps a tensor whose
    # only odd strides are those of size-1 dimensions, which view() refuses
    x = torch.empty(t.shape, dtype=t.dtype)
    x.copy_(t.detach())
    return x.reshape(-1).view(torch.uint8).numpy().tobytes()


def keyrepr(k):
    if isinstance(k, bool):
        return "b:%d" % k
    if isinstance(k, int):
        return "i:%d" % k
    if isinstance(k, str):
        return "s:" + (k.encode("utf-8", "surrogatepass").hex() or "-")
    if isinstance(k, bytes):
        return "y:" + (k.hex() or "-")
    if k is None:
        return "n"
    if isinstance(k, float):
        return "f:" + struct.pack(">d", k).hex()
    if isinstance(k, tuple):
        return "t:(" + ",".join(keyrepr(x) for x in k) + ")"
    if isinstance(k, torch.Tensor):
        return "T"
    raise TypeError(k)


def hexd(x):
    return struct.pack(">d", x).hex()


def quantizer(path, v):
    """A quantized tensor's scheme and parameters, as torch holds them."""
    scheme = str(v.qscheme()).replace("torch.", "")
    if v.qscheme() == torch.per_tensor_affine:
        return "%s%% %s scale=%s zero_point=%d" % (path, scheme, hexd(v.q_scale()), v.q_zero_point())
    zps = v.q_per_channel_zero_points().tolist()
    return "%s%% %s axis=%d scales=%s zero_points=%s" % (
        path, scheme, v.q_per_channel_axis(), ",".join(hexd(x) for x in v.q_per_channel_scales().tolist()),
        ",".join(hexd(z) if isinstance(z, float) else str(z) for z in zps))


def describe(obj):
    lines = []
    storages = {}

    def walk(path, v):
        if v is None:
            lines.append("%s none" % path)
        elif isinstance(v, bool):
            lines.append("%s bool %d" % (path, v))
        elif isinstance(v, int):
            lines.append("%s int %d" % (path, v))
        elif isinstance(v, float):
            lines.append("%s float %s" % (path, struct.pack(">d", v).hex()))
        elif isinstance(v, str):
            lines.append("%s str %s" % (path, v.encode("utf-8", "surrogatepass").hex() or "-"))
        # the values only torch 2.x's weights_only loader builds
        elif isinstance(v, complex):
            lines.append("%s complex %s %s" % (path, struct.pack(">d", v.real).hex(), struct.pack(">d", v.imag).hex()))
        elif isinstance(v, (bytes, bytearray)):
            lines.append("%s %s %s" % (path, type(v).__name__, v.hex() or "-"))
        elif isinstance(v, torch.device):
            lines.append("%s device %s" % (path, v))
        elif isinstance(v, torch.Size):
            lines.append("%s size %d" % (path, len(v)))
            for i, x in enumerate(v):
                walk("%s[%d]" % (path, i), x)
        elif isinstance(v, set):
            # in the order of the items' keyrepr: a set has no order of its own
            lines.append("%s set %d" % (path, len(v)))
            for i, x in enumerate(sorted(v, key=keyrepr)):
                walk("%s[%d]" % (path, i), x)
        elif isinstance(v, collections.Counter):
            lines.append("%s counter %d" % (path, len(v)))
            for k, x in v.items():
                walk("%s[%s]" % (path, keyrepr(k)), x)
        elif isinstance(v, torch.storage.TypedStorage):
            sid = storages.setdefault(v._cdata, len(storages))
            raw = torch.tensor([], dtype=torch.uint8).set_(v.untyped()).numpy().tobytes()
            lines.append("%s storage %s storage=%d snbytes=%d fnv=%s" % (
                path, dname(v.dtype), sid, v.nbytes(), fnv(raw)))
        elif isinstance(v, torch.Tensor) and v.is_meta:
            # no bytes, and a storage of its own
            lines.append("%s tensor %s sizes=%s strides=%s offset=%d storage=%d snbytes=%d grad=%d fnv=meta" % (
                path, dname(v.dtype), ",".join(map(str, v.shape)), ",".join(map(str, v.stride())),
                v.storage_offset(), len(storages), v.storage().nbytes(), int(v.requires_grad)))
            storages[object()] = len(storages)
            if v.__dict__:
                walk(path + "@", dict(v.__dict__))
        elif isinstance(v, torch.Tensor):
            st = v.storage()
            sid = storages.setdefault(st._cdata, len(storages))
            lines.append("%s tensor %s sizes=%s strides=%s offset=%d storage=%d snbytes=%d grad=%d fnv=%s" % (
                path, dname(v.dtype), ",".join(map(str, v.shape)), ",".join(map(str, v.stride())),
                v.storage_offset(), sid, st.nbytes(), int(v.requires_grad),
                fnv(logical_bytes(v.int_repr() if v.is_quantized else v))))
            if v.is_quantized:
                lines.append(quantizer(path, v))
            if v.__dict__:  # a tensor's Python attributes (a Parameter's, an nn.Buffer's)
                walk(path + "@", dict(v.__dict__))
        elif isinstance(v, tuple):
            lines.append("%s tuple %d" % (path, len(v)))
            for i, x in enumerate(v):
                walk("%s[%d]" % (path, i), x)
        elif isinstance(v, list):
            lines.append("%s list %d" % (path, len(v)))
            for i, x in enumerate(v):
                walk("%s[%d]" % (path, i), x)
        elif isinstance(v, dict):
            lines.append("%s dict %d" % (path, len(v)))
            for k, x in v.items():
                walk("%s[%s]" % (path, keyrepr(k)), x)
            attrs = getattr(v, "__dict__", None)
            if attrs:
                walk(path + "@", dict(attrs))
        else:
            raise TypeError(type(v))
    walk("$", obj)
    return lines
