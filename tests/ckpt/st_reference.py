"""A model of the reference safetensors reader (huggingface/safetensors,
safetensors/src/tensor.rs: read_metadata and Metadata::validate, with serde
and serde_json's rules for the header), for the differential test, which
reads each file with the safetensors package itself: the model says what
tstor refuses by design where the package reads the file, which the package
cannot say, and is checked against the package on every file. Written from
the reference's source, not from tstor's reader.

read(data) returns (tensors, metadata, notes): tensors maps each name to
(dtype, shape, bytes); metadata is a dict of strings or None; notes lists
what in the file tstor refuses by design though the reference reads it (see
BEYOND_TSTOR). It raises Refused where the reference refuses the file.
"""
import json

MAX_HEADER_SIZE = 100_000_000
U64_MAX = 2**64 - 1
MAX_DEPTH = 127  # serde_json: remaining_depth 128, an error on reaching 0
BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
    "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}


class Refused(Exception):
    pass


class Float:
    """A JSON number serde_json holds as an f64: a fraction or exponent, -0,
    or an integer past the 64-bit ranges."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


class Obj:
    """A JSON object as its pairs, duplicates kept, in order."""

    def __init__(self, pairs):
        self.pairs = pairs


def parse_int(text):
    v = int(text)
    if text.lstrip("-") != text and v == 0:
        return Float(text)  # -0: serde_json makes it a float
    if not -2**63 <= v <= U64_MAX:
        return Float(text)
    return v


def parse_float(text):
    if float(text) in (float("inf"), float("-inf")):
        raise Refused("number out of range: " + text)
    return Float(text)


def parse_constant(text):
    raise Refused("not JSON: " + text)


def parse(text):
    try:
        doc = json.JSONDecoder(object_pairs_hook=Obj, parse_int=parse_int, parse_float=parse_float,
                               parse_constant=parse_constant, strict=True).decode(text)
    except (ValueError, RecursionError) as e:
        raise Refused("header JSON: %s" % e)
    notes = []

    def walk(v, depth):
        if isinstance(v, (Obj, list)):
            if depth > MAX_DEPTH:
                raise Refused("nested deeper than %d" % MAX_DEPTH)
            items = v.pairs if isinstance(v, Obj) else [(None, x) for x in v]
            if isinstance(v, Obj) and len({k for k, _ in v.pairs}) != len(v.pairs):
                notes.append("a key twice in one object")
            for k, x in items:
                if k is not None:
                    check_string(k)
                walk(x, depth + 1)
        elif isinstance(v, str):
            check_string(v)
        elif isinstance(v, Float) and v.text.lstrip("-").isdigit():
            notes.append("-0" if v.text.lstrip("-") == "0" else "an integer past the 64-bit ranges")
        elif isinstance(v, int) and not isinstance(v, bool) and v > 2**63 - 1:
            notes.append("an integer past int64")

    def check_string(s):
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused("a lone surrogate in a string")
        if "\0" in s:
            notes.append("a NUL in a string")

    walk(doc, 1)
    return doc, notes


def usize(v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise Refused("not a usize: %r" % (v,))
    return v


def tensor_info(v, notes):
    """TensorInfo { dtype, shape: Vec<usize>, data_offsets: (usize, usize) },
    as serde's derive reads it from buffered content: an object (unknown
    fields ignored, a field twice refused) or a sequence of the three."""
    if isinstance(v, Obj):
        fields = {}
        for k, x in v.pairs:
            if k in ("dtype", "shape", "data_offsets"):
                if k in fields:
                    raise Refused("duplicate field " + k)
                fields[k] = x
        if len(fields) != 3:
            raise Refused("missing field")
        dtype, shape, offsets = fields["dtype"], fields["shape"], fields["data_offsets"]
    elif isinstance(v, list):
        if len(v) != 3:
            raise Refused("a TensorInfo sequence of %d" % len(v))
        dtype, shape, offsets = v
        notes.append("a tensor entry as a sequence")
    else:
        raise Refused("a tensor entry that is no object")
    if isinstance(dtype, Obj) and len(dtype.pairs) == 1 and dtype.pairs[0][1] is None:
        dtype = dtype.pairs[0][0]  # an enum's unit variant as a map
        notes.append("a dtype as a map")
    if not isinstance(dtype, str) or dtype not in BITS:
        raise Refused("unknown dtype %r" % (dtype,))
    if not isinstance(shape, list):
        raise Refused("shape is no sequence")
    shape = [usize(x) for x in shape]
    if not isinstance(offsets, list) or len(offsets) != 2:
        raise Refused("data_offsets is no pair")
    return dtype, shape, (usize(offsets[0]), usize(offsets[1]))


def read(data):
    if len(data) < 8:
        raise Refused("HeaderTooSmall")
    n = int.from_bytes(data[:8], "little")
    if n > MAX_HEADER_SIZE:
        raise Refused("HeaderTooLarge")
    if 8 + n > len(data):
        raise Refused("InvalidHeaderLength")
    try:
        text = data[8:8 + n].decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("InvalidHeader (UTF-8)")
    doc, notes = parse(text)
    if not isinstance(doc, Obj):
        raise Refused("the header is no map")
    metadata, seen, tensors = None, False, {}
    for k, v in doc.pairs:
        if k == "__metadata__":
            if seen:
                raise Refused("duplicate field __metadata__")
            seen = True
            if v is None:
                continue
            if not isinstance(v, Obj):
                raise Refused("__metadata__ is no map")
            metadata = {}
            for mk, mv in v.pairs:
                if not isinstance(mv, str):
                    raise Refused("a __metadata__ value that is no string")
                metadata[mk] = mv  # a key twice: the last
        else:
            tensors[k] = tensor_info(v, notes)  # a name twice: the last, both read
    if len({k for k, _ in doc.pairs}) != len(doc.pairs):
        notes.append("a key twice")
    # Metadata::validate: in offset order, contiguous from 0, each the size
    # its shape and dtype give, counted in bits with every product checked
    start = 0
    for name, (dtype, shape, (b, e)) in sorted(tensors.items(), key=lambda kv: kv[1][2]):
        if b != start or e < b:
            raise Refused("InvalidOffset(%s)" % name)
        start = e
        count = 1
        for s in shape:
            count *= s
            if count > U64_MAX:
                raise Refused("ValidationOverflow")
        bits = count * BITS[dtype]
        if bits > U64_MAX:
            raise Refused("ValidationOverflow")
        if bits % 8:
            raise Refused("MisalignedSlice")
        if e - b != bits // 8:
            raise Refused("TensorInvalidInfo")
    if start + 8 + n != len(data):
        raise Refused("MetadataIncompleteBuffer")
    for name, (dtype, shape, _) in tensors.items():
        if len(shape) > 64:
            notes.append("more than 64 dimensions")
    body = 8 + n
    out = {name: (dtype, shape, data[body + b:body + e]) for name, (dtype, shape, (b, e)) in tensors.items()}
    return out, metadata, notes
