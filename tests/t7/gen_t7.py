#!/usr/bin/python3
r"""Torch7 (Lua Torch, ``.t7``) serialization writer and test-corpus generator.

Standard library only.  Usage:

    gen_t7.py OUTDIR             valid corpus + OUTDIR/manifest.txt
    gen_t7.py --hostile OUTDIR   malformed files + OUTDIR/hostile.txt

As a module: ``write(value, mode, endian, long_size) -> bytes`` and
``render(value) -> str`` (the manifest rendering), over the value model below.

Everything here was worked out from torch/torch7 at commit
814ea4afd6beb110705d2456de03876841fcf1fd; line numbers below refer to it.  The
code was read, not copied.  check_gen.py compares the output, byte for byte, with files
that Torch7 itself wrote.

======================================================================
1. ON-DISK FORMAT
======================================================================

torch.save(file, obj, mode) opens a DiskFile, sets binary() or ascii(), and
calls File:writeObject(obj) once (File.lua, torch.save).  The file has no
header and no trailer: it holds one object and nothing else.  Nothing in the
file says whether it is binary or ascii, or gives the byte order or the long
size.  The reader has to be told, as torch.load(file, 'binary'|'b32'|'b64'|
'ascii') is.

1.1 Primitive fields

  Every field is written through a THFile array write of n elements.  A scalar
  write is an array write with n = 1 (lib/TH/THFile.c:117-137).

  binary mode (THDiskFile.c READ_WRITE_METHODS, lines 46-134):
    byte   uint8       char  int8     short int16    int   int32
    float  IEEE-754 binary32           double IEEE-754 binary64
    half   IEEE-754 binary16, stored as a 2-byte unsigned short (THHalf.h)
    long   the writer's C `long`: 8 bytes on LP64 (Linux, macOS), 4 bytes on
           Windows and 32-bit systems.  DiskFile:longSize(4|8) changes it
           (THDiskFile.c writeLong, 430-478).  With longSize 4, values are
           truncated to int32.  The loader picks the size with
           torch.load(f, 'b32'|'b64').
    Byte order: the CPU's by default.  DiskFile:bigEndianEncoding() and
    littleEndianEncoding() change it.  Every element wider than one byte is
    swapped as one block, halves included (THDiskFile_reverseMemory, 245-265).
    Array writes never add padding or separators.

  ascii mode (the default for a new DiskFile, with autoSpacing on:
  THDiskFile_new, lines 681-689):
    An array write of n > 0 numbers prints each one with its printf format.
    It puts one " " between elements and one "\n" after the last.  For n == 0
    it writes nothing at all, not even "\n" (lines 115-123).  The formats are
    (lines 346-364 and 485):
      short "%hd"   int "%d"   long "%ld"   float "%.9g"   double "%.17g"
      half  "%.9g" of TH_half2float(h).  That function (THHalf.c) turns every
            NaN half into a positive float NaN, so the sign of a half NaN is
            lost in ascii.
      glibc prints non-finite values as "inf", "-inf", "nan" and "-nan"
      (sign bit set).
    byte/char arrays are the exception (lines 337-344).  The n raw bytes are
    fwrite'n with no separators and no escaping, then one "\n" if n > 0.
    A string is therefore its length as "%d\n" followed by the raw bytes and
    "\n".  The bytes may themselves contain newlines, spaces or NUL.
    Reading (for reference): fscanf skips whitespace before a number.  After
    an array read of n > 0 elements, one '\n' is consumed if it comes next.
    Raw bytes are read exactly, with no skipping (lines 55-74, 405-418).
    The long size and the byte order play no part in ascii mode.

1.2 Objects (File.lua: writeObject 107-243, readObject 245-377)

  Every object begins with an int type tag:
    TYPE_NIL=0 TYPE_NUMBER=1 TYPE_STRING=2 TYPE_TABLE=3 TYPE_TORCH=4
    TYPE_BOOLEAN=5 TYPE_FUNCTION=6 LEGACY_TYPE_RECUR_FUNCTION=7
    TYPE_RECUR_FUNCTION=8

  NIL      tag only.
  NUMBER   tag, double (l.146).  Every Lua number is a double, so 2^53+1
           cannot occur.
  BOOLEAN  tag, int 1 or 0 (l.3-9, 148).  The reader tests ==1.
  STRING   tag, int n, then n raw bytes (l.150-152; in ascii, followed by
           "\n" if n > 0).
  TABLE    tag, int index.  If the index was already written, the object ends
           here: this is a reference.  Otherwise: int count, then count pairs
           (key object, value object) in Lua's pairs() order, which is
           unspecified (l.225-230).  A nil key or nil value never occurs,
           because pairs() never yields one.
  TORCH    tag, int index.  If the index was already written it is a
           reference (l.153-170).  Otherwise (l.202-207):
             int n, n bytes "V <version>".  <version> is the class's
               __version as Lua prints a number: "V 1" by default
               (luaT.c:734-736), "V 0" for tds.  A Lua 5.3 build would print
               "V 1.0".
             int m, m bytes of class name, e.g. "torch.FloatTensor".
             Legacy files from before versioning have no "V ..." string.
             The first string is the class name itself.  The reader tells
             the two apart by whether the string matches ^V (.*)$ with a
             number after the space, and uses version 0 when it does not
             (l.333-340).
           then the class's own payload:
             torch.<T>Storage  (generic/Storage.c:237-249):
               long size, then size elements as ONE array write of type <T>.
             torch.<T>Tensor   (generic/Tensor.c:1249-1273):
               int ndim (0 for an empty tensor, whose storage is NULL and
               offset 0: lib/TH/generic/THTensor.c:753-762.  Torch7 has
               no 0-dim scalar),
               long sizes[ndim]    (one array write: in ascii "2 3\n", and
               long strides[ndim]   nothing at all when ndim == 0),
               long storageOffset+1   (1-based),
               the storage as a nested writeObject: NIL when the tensor has
               none (torch.Tensor()), a new storage object, or a reference.
             Lua classes (torch.class, e.g. nn.Linear): they have no C write,
               so File.lua copies the instance's fields into a FRESH table
               and writes that with writeObject (l.212-220).  It therefore
               always takes a new reference index of its own, right after
               the object's.
             Classes with their own __write (tds.Hash: long n, then n
               key/value objects; tds.Vec: long n, then n objects; cutorch
               types): the format cannot describe these, and a reader must
               refuse them.
  RECUR_FUNCTION (8), LEGACY 7: tag, int index (or a reference), int n,
           n bytes of string.dump() bytecode (LuaJIT: "\x1bLJ..."), then a
           fresh table of upvalues written with writeObject (l.172-200).
  FUNCTION (6, old writers): tag, int n, bytecode, upvalues object.  There
           is no index.

  Reference indices: one counter per file.  It starts at 1 and is bumped for
  every new table, torch object or function, in write order.  The order is
  depth-first pre-order: an object takes its index before its children are
  written.  A Tensor's storage is a child, written after the tensor's
  geometry.

  Long fields: Storage size, LongStorage elements, Tensor sizes, strides and
  storageOffset, and the tds counts.  Every other integer is an int: type
  tags, reference indices, string, version and class-name lengths, table
  counts, ndim and booleans.

======================================================================
2. MANIFEST FORMAT (OUTDIR/manifest.txt, torch7-written/manifest.txt)
======================================================================

One line per file, "\n"-terminated, no comment lines:

  line     := FILE SP FORMAT SP RESULT LF
  FORMAT   := "binary-le-long8" | "binary-le-long4" | "binary-be-long8"
            | "binary-be-long4" | "ascii"
  RESULT   := "ok" SP node
            | "refuse:" SP REASON     REASON: "cycle" | "function" | CLASSNAME
  node     := "nil" | "true" | "false" | number | string
            | table | storage | tensor | object | "@" ID
  number   := "num(" HEXA ";" REPR ")"
  string   := "str(" HEX* ")"                 raw bytes, lowercase hex
  table    := "table#" ID "{" [ entry ("," entry)* ] "}"
  entry    := node "=" node                   key "=" value
  storage  := "storage#" ID "(" TYPE ";" N ";[" elems "])"      N: element count
  tensor   := "tensor#" ID "(" TYPE ";sizes=[" ints "];strides=[" ints
              "];offset=" INT ";storage=" node ";values=[" elems "])"
  object   := "object#" ID "(" CLASSNAME ";version=" VERSION ";" table ")"
  TYPE     := Byte | Char | Short | Int | Long | Float | Double | Half
  ID       := the object's reference index in the file (decimal)
  HEXA     := printf("%a") of the double as glibc prints it ("0x1.8p+0",
              "-0x0p+0", "0x0.0000000000001p-1022", "inf", "-inf", "nan",
              "-nan" for a NaN with the sign bit set; payload not shown)
  REPR     := Python repr() of the double, for people to read.  A reader
              may compare HEXA only.
  elems    := [ elem ("," elem)* ]
  elem     := integer types: decimal (Byte 0..255; Char -128..127, as C
              char is signed on x86.  The bytes are the same either way);
              Float/Double/Half: HEXA of the value widened to double
  ints     := decimal, comma-separated, possibly empty
  VERSION  := the text after "V " (e.g. "1", "0"), or "legacy" when there
              is no version string
  CLASSNAME: as stored; always [A-Za-z0-9_.]+ in this corpus.

  Canonical traversal: a node is rendered in full the first time the
  traversal meets it and as "@ID" every later time.  The traversal starts at
  the root and goes depth-first.  A table's entries are sorted by key, and
  each entry's key is rendered before its value.  Key order: booleans
  (false < true), then numbers ascending, then strings bytewise (a shorter
  prefix first), then reference-typed keys (tables, torch objects) in the
  order the table's pairs are written, as a reader meets them.
  A tensor renders its storage (storage=) before listing its values.
  "values" lists the tensor's logical elements in row-major order: element
  (i0..ik) is storage[offset-1 + sum(i_d*stride_d)], and an ndim-0 tensor
  has none.  An object's payload table is rendered in place, with its own
  ID (always the object's ID + 1 for Lua classes).
  Element values are what the file holds: Float is rounded to binary32,
  Half to binary16.  A Half NaN keeps its sign in binary files but not in
  ascii ones (see 1.1), so the corpus uses only +NaN halves.

  A file is "refuse:" when a strict reader must decline it.  The reason
  given is the first one met in file order:
    cycle      an object is referenced while it is still being read (a
               table or object that contains itself); shared, acyclic
               references are fine
    function   tags 6, 7, 8
    CLASSNAME  torch classes whose payload is class-specific (tds.Hash,
               tds.Vec, torch.Cuda*)

======================================================================
3. HOSTILE LIST (OUTDIR/hostile.txt)
======================================================================

  line    := FILE SP FORMAT SP OUTCOME SP "#" SP DESCRIPTION LF
  OUTCOME := "error:" CLASS ("|" CLASS)*   any listed class is acceptable;
                                           the first is what a reader that
                                           checks lengths up front reports
           | "refuse:" SP REASON
  CLASS:
    truncated    EOF inside or before a field.
    bad-length   a string, storage or table length that is negative, or
                 that promises more data than the rest of the file can hold.
                 Check this before allocating: n bytes for a string, n
                 elements times the element size for a binary storage (one
                 byte per element in ascii), 8 bytes (binary) or 4 bytes
                 (ascii) per table entry.
    bad-ref      reference index <= 0.  Or greater than (objects so far + 1),
                 i.e. a forward reference: writers number new objects 1,2,3..
                 in order, although Torch7 itself would take any unseen index
                 as a new object.  Or a TABLE tag that points at a torch
                 object, or a TORCH tag that points at a table.
    bad-tag      unknown type tag.
    too-deep     nesting beyond the reader's limit.  The corpus assumes a
                 limit between 200 and 9999; valid files nest fewer than 100.
    bad-tensor   ndim < 0 or > 64 (64 is tstor's TSTOR_TENSOR_MAX_DIM;
                 Torch7 itself has no limit); a size or stride < 0; an
                 offset < 1; a storage slot that is neither nil nor a storage
                 of the tensor's element type; numel > 0 with no storage;
                 or elements beyond the storage: (offset-1) +
                 sum((size-1)*stride) must be < the storage size, computed
                 without overflow.
    bad-class    class name unknown in the torch. namespace, empty, or not
                 [A-Za-z_][A-Za-z0-9_]*(.[A-Za-z_][A-Za-z0-9_]*)*.  Or a Lua
                 class whose payload is not a new table.  A version string
                 that is not "V <number>" therefore lands here: it is read
                 as a legacy class name, as in Torch7.
    bad-entry    a table with a nil or NaN key, a duplicate key (numbers
                 compare by value, strings by bytes, objects by identity),
                 or a nil value.  Torch7 writers never produce any of these.
    bad-value    a boolean other than 0 or 1.
    bad-syntax   (ascii) a number field that does not parse, or that is out
                 of range for its type.
    trailing-data  bytes after the top-level object (trailing whitespace is
                 allowed in ascii).
"""

import math
import os
import struct
import sys

TYPE_NIL = 0
TYPE_NUMBER = 1
TYPE_STRING = 2
TYPE_TABLE = 3
TYPE_TORCH = 4
TYPE_BOOLEAN = 5
TYPE_FUNCTION = 6
LEGACY_TYPE_RECUR_FUNCTION = 7
TYPE_RECUR_FUNCTION = 8

# Element types in Torch7's THGenerateAllTypes order, plus Half.  The value is
# the struct code; Long is None because its width is the writer's long_size.
ELEMENT_CODES = {
    'Byte': 'B', 'Char': 'b', 'Short': 'h', 'Int': 'i',
    'Long': None, 'Float': 'f', 'Double': 'd', 'Half': 'e',
}
TYPES = list(ELEMENT_CODES)
INTEGER_TYPES = ('Byte', 'Char', 'Short', 'Int', 'Long')
_INT_RANGES = {
    'Byte': (0, 255), 'Char': (-128, 127), 'Short': (-2**15, 2**15 - 1),
    'Int': (-2**31, 2**31 - 1), 'Long': (-2**63, 2**63 - 1),
}

# (file suffix, mode, endian, long_size, manifest FORMAT token)
FORMATS = [
    ('le8', 'binary', '<', 8, 'binary-le-long8'),
    ('le4', 'binary', '<', 4, 'binary-le-long4'),
    ('be8', 'binary', '>', 8, 'binary-be-long8'),
    ('be4', 'binary', '>', 4, 'binary-be-long4'),
    ('ascii', 'ascii', '<', 8, 'ascii'),
]
FORMAT_BY_SUFFIX = {f[0]: f for f in FORMATS}

TENSOR_MAX_DIM = 64  # tstor's TSTOR_TENSOR_MAX_DIM; see bad-tensor above


# ---------------------------------------------------------------------------
# Value model
# ---------------------------------------------------------------------------
# None, bool, int/float (a Lua number), str (written as UTF-8)/bytes (a Lua
# string), dict/list/T7Table (a Lua table; a list is the Lua array {v1,...}
# with keys 1..n), and the classes below.  A Python object written twice
# (same identity) is written the second time as a reference, as Torch7 does
# with its pointer-keyed table.

class T7Table:
    """A Lua table given as an ordered list of (key, value) pairs.

    Use it where a dict cannot say what is needed: keys that are tables or
    torch objects (unhashable or identity-keyed), True beside 1 (equal in
    Python), or a chosen write order.  Pairs are written in list order.
    """

    def __init__(self, pairs=()):
        self.pairs = list(pairs)


def _class_name(type, kind, cuda):
    """torch.<type><kind>, or cutorch's torch.Cuda<type><kind> (torch.Cuda<kind>
    for Float), which cutorch writes in the host type's layout."""
    if cuda:
        return 'torch.Cuda%s%s' % ('' if type == 'Float' else type, kind)
    return 'torch.%s%s' % (type, kind)


class T7Storage:
    """torch.<type>Storage.  version=None writes the legacy, version-less header.
    cuda=True names it as cutorch does; it reads as the host type."""

    def __init__(self, type, values, version=1, cuda=False):
        _check_type(type)
        self.type = type
        self.values = list(values)
        self.version = version
        self.cuda = cuda


class T7Tensor:
    """torch.<type>Tensor.  offset1 is 1-based, as written on disk.

    storage is a T7Storage or None.  Nothing is checked here, so hostile
    geometry can be written.  render() checks it.
    """

    def __init__(self, type, sizes, strides, offset1, storage, version=1, cuda=False):
        _check_type(type)
        if len(sizes) != len(strides):
            raise ValueError('sizes and strides differ in length')
        self.cuda = cuda
        self.type = type
        self.sizes = list(sizes)
        self.strides = list(strides)
        self.offset1 = offset1
        self.storage = storage
        self.version = version


class T7Object:
    """An instance of a Lua torch.class (nn.Linear...), whose payload is a table.

    version: an int or str printed after "V ", or None for a legacy
    version-less header.  table: dict, list or T7Table.  It is written as a
    fresh table, as File.lua copies the fields into a new one, so it must not
    also appear elsewhere in the value.
    """

    def __init__(self, classname, version, table):
        self.classname = classname
        self.version = version
        self.table = table


class T7Custom:
    """A torch class that has its own __write (tds.Hash, tds.Vec, torch.Cuda*).

    fields: a list of (kind, value) written in order after the header.  kind
    is one of 'int', 'long', 'double', 'object' (a nested writeObject) or
    'elements' (value = (type, values), one array write).  Readers must refuse
    these, and render() reports "refuse: <classname>".
    """

    def __init__(self, classname, version, fields):
        self.classname = classname
        self.version = version
        self.fields = list(fields)


class T7Function:
    """A Lua function: opaque string.dump() bytecode plus its upvalues table.

    tag 8 (current writers), 7 (legacy recursive) or 6 (old, no reference
    index).  upvalues is written as a fresh table, as File.lua builds it anew.
    """

    def __init__(self, bytecode, upvalues=None, tag=TYPE_RECUR_FUNCTION):
        if tag not in (TYPE_FUNCTION, LEGACY_TYPE_RECUR_FUNCTION, TYPE_RECUR_FUNCTION):
            raise ValueError('function tag must be 6, 7 or 8')
        self.bytecode = bytes(bytecode)
        self.upvalues = T7Table() if upvalues is None else upvalues
        self.tag = tag


def _check_type(t):
    if t not in ELEMENT_CODES:
        raise ValueError('unknown element type %r' % (t,))


def _is_table(v):
    return isinstance(v, (dict, list, T7Table))


def _pairs(t):
    if isinstance(t, T7Table):
        return t.pairs
    if isinstance(t, dict):
        return list(t.items())
    return [(i + 1, v) for i, v in enumerate(t)]


def _as_bytes(s):
    return s.encode('utf-8') if isinstance(s, str) else bytes(s)


def _number(v):
    """A Python number as the double Lua would hold.

    Inexact ints are refused rather than rounded, so a test cannot assume it
    wrote 2^53+1.
    """
    if isinstance(v, int):
        f = float(v)
        if int(f) != v:
            raise ValueError('%d is not exactly representable as a double' % v)
        return f
    return float(v)


def element_value(etype, v):
    """The value an element of type etype holds once stored.

    Integer types are range-checked.  Float and Half are rounded to binary32
    and binary16, as a Torch storage would hold them.
    """
    if etype in INTEGER_TYPES:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError('%s element must be an int, got %r' % (etype, v))
        lo, hi = _INT_RANGES[etype]
        if not lo <= v <= hi:
            raise ValueError('%d out of range for %s' % (v, etype))
        return v
    v = float(v)
    if etype == 'Float':
        return struct.unpack('<f', struct.pack('<f', v))[0]
    if etype == 'Half':
        return struct.unpack('<e', struct.pack('<e', v))[0]
    return v


# ---------------------------------------------------------------------------
# Primitive encoder
# ---------------------------------------------------------------------------

def c_g(x, precision):
    """printf("%.<precision>g", x) as glibc prints it.

    Python's %-formatting matches glibc (both round correctly and use the
    same exponent style), except that it never prints "-nan".
    """
    if math.isnan(x):
        return '-nan' if math.copysign(1.0, x) < 0 else 'nan'
    return '%.*g' % (precision, x)


def _half_to_float_th(h):
    """TH_half2float: like IEEE widening, but every NaN comes back positive."""
    return abs(h) if math.isnan(h) else h


class Encoder:
    """The THFile primitive writes, for one mode, byte order and long size.

    It also records (start, end, kind) for every field, so the hostile
    generator can cut a file inside any kind of field.
    """

    def __init__(self, mode='binary', endian='<', long_size=8):
        if mode not in ('binary', 'ascii'):
            raise ValueError("mode must be 'binary' or 'ascii'")
        if endian not in ('<', '>'):
            raise ValueError("endian must be '<' or '>'")
        if long_size not in (4, 8):
            raise ValueError('long_size must be 4 or 8')
        self.binary = mode == 'binary'
        self.endian = endian
        self.long_size = long_size
        self.out = bytearray()
        self.fields = []

    def _emit(self, data, kind):
        start = len(self.out)
        self.out += data
        self.fields.append((start, len(self.out), kind))

    def _pack(self, code, values):
        return struct.pack(self.endian + code * len(values), *values)

    def _ints(self, values, lo, hi, what):
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError('%r does not fit a %s' % (v, what))

    def ints(self, values, kind='int'):
        self._ints(values, -2**31, 2**31 - 1, '4-byte int')
        self._emit(self._array(values, 'i', '%d'), kind)

    def int(self, v, kind='int'):
        self.ints([v], kind)

    def longs(self, values, kind='long'):
        if self.binary and self.long_size == 4:
            self._ints(values, -2**31, 2**31 - 1, '4-byte long')
        else:
            self._ints(values, -2**63, 2**63 - 1, '8-byte long')
        code = 'q' if self.long_size == 8 else 'i'
        self._emit(self._array(values, code, '%d'), kind)

    def long(self, v, kind='long'):
        self.longs([v], kind)

    def double(self, v, kind='double'):
        v = float(v)
        if self.binary:
            self._emit(self._pack('d', [v]), kind)
        else:
            self._emit((c_g(v, 17) + '\n').encode('ascii'), kind)

    def chars(self, data, kind='chars'):
        """A char array write: raw bytes.  In ascii, "\\n" follows if non-empty."""
        data = bytes(data)
        if not self.binary and data:
            data += b'\n'
        self._emit(data, kind)

    def elements(self, etype, values, kind='elements'):
        """One array write of a storage's elements."""
        vals = [element_value(etype, v) for v in values]
        if etype in ('Byte', 'Char'):
            # Raw bytes in ascii mode too (THDiskFile.c:337-344).
            self.chars(bytes(v & 0xFF for v in vals), kind)
        elif etype == 'Long':
            self.longs(vals, kind)
        elif etype in ('Short', 'Int'):
            self._emit(self._array(vals, ELEMENT_CODES[etype], '%d'), kind)
        elif self.binary:
            self._emit(self._pack(ELEMENT_CODES[etype], vals), kind)
        else:
            if etype == 'Double':
                text = [c_g(v, 17) for v in vals]
            elif etype == 'Float':
                text = [c_g(v, 9) for v in vals]
            else:
                text = [c_g(_half_to_float_th(v), 9) for v in vals]
            self._emit(self._text_array(text), kind)

    def raw(self, data, kind='raw'):
        """Arbitrary bytes, for hostile files."""
        self._emit(bytes(data), kind)

    def _array(self, values, code, fmt):
        if self.binary:
            return self._pack(code, values)
        return self._text_array([fmt % v for v in values])

    @staticmethod
    def _text_array(items):
        # autoSpacing: " " between elements and "\n" after the last, but only
        # when n > 0 (THDiskFile.c:115-123).
        return (' '.join(items) + '\n').encode('ascii') if items else b''

    def getvalue(self):
        return bytes(self.out)


# ---------------------------------------------------------------------------
# Object writer (File.lua writeObject)
# ---------------------------------------------------------------------------

class _Serializer:
    def __init__(self, enc):
        self.enc = enc
        self.index = {}       # id(obj) -> reference index
        self.payloads = set()  # ids of tables written fresh (payloads, upvalues)
        self.keep = []        # keeps written objects alive so ids stay unique
        self.count = 0
        self.active = set()   # ids of objects whose body is being written
        self.refusal = None   # first reason, in file order, to refuse the file

    def _refuse(self, reason):
        if self.refusal is None:
            self.refusal = reason

    def _tag_and_index(self, obj, tag):
        """Writes tag and index.  Returns True if the object's body must follow."""
        self.enc.int(tag, 'tag')
        key = id(obj)
        if key in self.index:
            if key in self.payloads:
                raise ValueError('a payload/upvalues table is also written elsewhere')
            if key in self.active:
                self._refuse('cycle')
            self.enc.int(self.index[key], 'index')
            return False
        self._register(obj)
        self.enc.int(self.count, 'index')
        return True

    def _register(self, obj):
        self.count += 1
        self.index[id(obj)] = self.count
        self.keep.append(obj)

    def value(self, v):
        e = self.enc
        if v is None:
            e.int(TYPE_NIL, 'tag')
        elif isinstance(v, bool):
            e.int(TYPE_BOOLEAN, 'tag')
            e.int(1 if v else 0, 'bool')
        elif isinstance(v, (int, float)):
            e.int(TYPE_NUMBER, 'tag')
            e.double(_number(v))
        elif isinstance(v, (str, bytes, bytearray)):
            e.int(TYPE_STRING, 'tag')
            self._string(_as_bytes(v), 'str')
        elif _is_table(v):
            if self._tag_and_index(v, TYPE_TABLE):
                self._with_active(v, self._table_body)
        elif isinstance(v, (T7Storage, T7Tensor, T7Object, T7Custom)):
            if self._tag_and_index(v, TYPE_TORCH):
                self._with_active(v, self._torch_body)
        elif isinstance(v, T7Function):
            self._refuse('function')
            if v.tag == TYPE_FUNCTION:
                e.int(TYPE_FUNCTION, 'tag')
                self._function_body(v)
            elif self._tag_and_index(v, v.tag):
                self._with_active(v, self._function_body)
        else:
            raise TypeError('cannot serialize %r' % (type(v),))

    def _with_active(self, obj, body):
        self.active.add(id(obj))
        body(obj)
        self.active.discard(id(obj))

    def _string(self, data, kind):
        self.enc.int(len(data), kind + 'len')
        self.enc.chars(data, kind + 'bytes')

    def _table_body(self, t):
        pairs = _pairs(t)
        self.enc.int(len(pairs), 'count')
        for k, v in pairs:
            self.value(k)
            self.value(v)

    def _fresh_table(self, t):
        """A table File.lua builds anew at write time: always a new index."""
        if not _is_table(t):
            raise TypeError('payload must be a dict, list or T7Table')
        if id(t) in self.index:
            raise ValueError('a payload/upvalues table is also written elsewhere')
        self.enc.int(TYPE_TABLE, 'tag')
        self._register(t)
        self.payloads.add(id(t))
        self.enc.int(self.count, 'index')
        self._with_active(t, self._table_body)

    def _header(self, classname, version):
        if version is not None:
            self._string(('V %s' % (version,)).encode('ascii'), 'ver')
        self._string(_as_bytes(classname), 'name')

    def _torch_body(self, v):
        e = self.enc
        if isinstance(v, T7Storage):
            self._header(_class_name(v.type, 'Storage', v.cuda), v.version)
            e.long(len(v.values), 'storsize')
            e.elements(v.type, v.values)
        elif isinstance(v, T7Tensor):
            self._header(_class_name(v.type, 'Tensor', v.cuda), v.version)
            e.int(len(v.sizes), 'ndim')
            e.longs(v.sizes, 'sizes')
            e.longs(v.strides, 'strides')
            e.long(v.offset1, 'offset')
            self.value(v.storage)
        elif isinstance(v, T7Object):
            self._header(v.classname, v.version)
            self._fresh_table(v.table)
        else:
            self._refuse(v.classname)
            self._header(v.classname, v.version)
            for kind, x in v.fields:
                if kind == 'int':
                    e.int(x)
                elif kind == 'long':
                    e.long(x)
                elif kind == 'double':
                    e.double(x)
                elif kind == 'object':
                    self.value(x)
                elif kind == 'elements':
                    e.elements(*x)
                else:
                    raise ValueError('unknown T7Custom field kind %r' % (kind,))

    def _function_body(self, f):
        self._string(f.bytecode, 'str')
        self._fresh_table(f.upvalues)


def serialize(value, mode='binary', endian='<', long_size=8):
    """Writes value and returns the Encoder.

    Its .getvalue() is the file and its .fields are the field spans.
    """
    enc = Encoder(mode, endian, long_size)
    _Serializer(enc).value(value)
    return enc


def write(value, mode='binary', endian='<', long_size=8):
    """The bytes torch.save would write for value (see the module docstring)."""
    return serialize(value, mode, endian, long_size).getvalue()


# ---------------------------------------------------------------------------
# Manifest rendering
# ---------------------------------------------------------------------------

def hexa(x):
    """printf("%a", x) as glibc prints a double."""
    if math.isnan(x):
        return '-nan' if math.copysign(1.0, x) < 0 else 'nan'
    if math.isinf(x):
        return '-inf' if x < 0 else 'inf'
    # float.hex pads the fraction to 13 digits, where glibc drops trailing
    # zeros (and the point).
    mant, exp = float.hex(x).split('p')
    if '.' in mant:
        mant = mant.rstrip('0').rstrip('.')
    return mant + 'p' + exp


def _render_element(etype, v):
    v = element_value(etype, v)
    return str(v) if etype in INTEGER_TYPES else hexa(v)


def tensor_values(t):
    """The logical elements of T7Tensor t in row-major order.

    Raises ValueError where a strict reader reports bad-tensor (see the
    docstring).
    """
    if not 0 <= len(t.sizes) <= TENSOR_MAX_DIM:
        raise ValueError('bad ndim')
    if any(s < 0 for s in t.sizes) or any(s < 0 for s in t.strides) or t.offset1 < 1:
        raise ValueError('negative size/stride or offset < 1')
    if t.storage is not None and (not isinstance(t.storage, T7Storage)
                                  or t.storage.type != t.type):
        raise ValueError('storage slot is not a %sStorage' % t.type)
    if not t.sizes or 0 in t.sizes:
        return []
    if t.storage is None:
        raise ValueError('non-empty tensor without storage')
    last = t.offset1 - 1 + sum((s - 1) * st for s, st in zip(t.sizes, t.strides))
    if last >= len(t.storage.values):
        raise ValueError('tensor extends past its storage')
    out = []

    def walk(d, pos):
        if d == len(t.sizes):
            out.append(t.storage.values[pos])
            return
        for i in range(t.sizes[d]):
            walk(d + 1, pos + i * t.strides[d])
    walk(0, t.offset1 - 1)
    return out


class Renderer:
    """The canonical rendering of a value tree.

    index_of(obj) gives the reference index of a table or torch object.
    check_gen.py's reader uses this class too.  Its trees come from parsing,
    so their identities and indices are its own.
    """

    def __init__(self, index_of):
        self.index_of = index_of
        self.seen = set()

    def _first(self, v):
        if id(v) in self.seen:
            return False
        self.seen.add(id(v))
        return True

    def _key_order(self, k):
        if isinstance(k, bool):
            return (0, int(k), b'')
        if isinstance(k, (int, float)):
            f = _number(k)
            if math.isnan(f):
                raise ValueError('NaN table key')
            return (1, f, b'')
        if isinstance(k, (str, bytes, bytearray)):
            return (2, 0, _as_bytes(k))
        if k is None:
            raise ValueError('nil table key')
        # tables and torch objects as keys: in the order the table's pairs
        # are written (the sort is stable), which a reader sees as it reads
        return (3, 0, b'')

    def node(self, v):
        if v is None:
            return 'nil'
        if isinstance(v, bool):
            return 'true' if v else 'false'
        if isinstance(v, (int, float)):
            f = _number(v)
            return 'num(%s;%r)' % (hexa(f), f)
        if isinstance(v, (str, bytes, bytearray)):
            return 'str(%s)' % _as_bytes(v).hex()
        if isinstance(v, (T7Custom, T7Function)):
            raise ValueError('refused kind in an ok tree')
        i = self.index_of(v)
        if not self._first(v):
            return '@%d' % i
        if _is_table(v):
            entries = sorted(_pairs(v), key=lambda kv: self._key_order(kv[0]))
            for a, b in zip(entries, entries[1:]):
                if self._key_order(a[0]) == self._key_order(b[0]) and (self._key_order(a[0])[0] != 3 or a[0] is b[0]):
                    raise ValueError('duplicate table key')
            if any(val is None for _, val in entries):
                raise ValueError('nil table value')
            return 'table#%d{%s}' % (i, ','.join(
                self.node(k) + '=' + self.node(val) for k, val in entries))
        if isinstance(v, T7Storage):
            return 'storage#%d(%s;%d;[%s])' % (
                i, v.type, len(v.values),
                ','.join(_render_element(v.type, x) for x in v.values))
        if isinstance(v, T7Tensor):
            values = tensor_values(v)
            storage = self.node(v.storage)
            return 'tensor#%d(%s;sizes=[%s];strides=[%s];offset=%d;storage=%s;values=[%s])' % (
                i, v.type, ','.join(map(str, v.sizes)), ','.join(map(str, v.strides)),
                v.offset1, storage, ','.join(_render_element(v.type, x) for x in values))
        if isinstance(v, T7Object):
            version = 'legacy' if v.version is None else str(v.version)
            return 'object#%d(%s;version=%s;%s)' % (
                i, _as_bytes(v.classname).decode('ascii'), version, self.node(v.table))
        raise TypeError('cannot render %r' % (type(v),))


def render(value):
    """The manifest RESULT for value: "ok <node>" or "refuse: <reason>"."""
    # A dry-run write gives the reference indices and the first refusal in
    # file order.  Both are the same in every mode.
    ser = _Serializer(Encoder())
    ser.value(value)
    if ser.refusal:
        return 'refuse: ' + ser.refusal
    return 'ok ' + Renderer(lambda o: ser.index[id(o)]).node(value)


# ---------------------------------------------------------------------------
# Valid corpus
# ---------------------------------------------------------------------------

# Every Lua number is a double: 2^53+1 cannot be a TYPE_NUMBER, so the corpus
# carries its neighbours here and 2^53+1 itself in a LongStorage.
SPECIAL_DOUBLES = [
    0.0, -0.0, 1.0, -1.5, 0.1, 1 / 3, math.pi, 123456789.125, 1e-7,
    2.0**53, 2.0**53 + 2, -(2.0**53), 2.0**63, -(2.0**63), 2.0**64,
    1e300, 1.7976931348623157e308, -1.7976931348623157e308,
    2.2250738585072014e-308,            # smallest normal
    2.225073858507201e-308,             # largest subnormal
    5e-324,                             # smallest subnormal
    -5e-324,
    math.inf, -math.inf, math.nan, -math.nan,
]

SPECIAL_STRINGS = [
    b'', b'hello', b'\x00', b'a\x00b', b'line1\nline2\n', b'\n', b'\r\n',
    b' ', b'  spaced  ', b'\xff\xfe\x80\x00', 'h\u00e9llo \u2713'.encode('utf-8'),
    b'9\n',     # an ascii reader must not parse string bytes as a number
    b'V 1', b'torch.FloatTensor', bytes(range(256)),
]

STORAGE_VALUES = {
    # 10, 13 and 32 are newline, CR and space: ascii writes byte/char
    # storages raw, so a reader must not skip them as whitespace.
    'Byte': [0, 1, 10, 13, 32, 127, 128, 255],
    'Char': [-128, -1, 0, 1, 10, 32, 127],
    'Short': [-32768, -1, 0, 1, 10, 32767],
    'Int': [-2**31, -1, 0, 1, 10, 2**31 - 1],
    # Fits a 4-byte long; long64_extremes covers the rest.
    'Long': [-2**31, -1, 0, 1, 10, 2**31 - 1],
    'Float': [0.0, -0.0, 1.0, -2.5, 0.1, 1e-45, 1.1754943508222875e-38,
              3.4028234663852886e38, math.inf, -math.inf, math.nan, -math.nan],
    'Double': [0.0, -0.0, 1.0, -2.5, 0.1, 5e-324, 2.2250738585072014e-308,
               1.7976931348623157e308, 2.0**53, math.inf, -math.inf, math.nan,
               -math.nan],
    # Only +NaN: ascii mode loses a half NaN's sign (TH_half2float).
    'Half': [0.0, -0.0, 1.0, -2.5, 0.1, 2.0**-24, 6.103515625e-05, 65504.0,
             math.inf, -math.inf, math.nan],
}

# Six values per type for the 2x3 tensors.
TENSOR_VALUES = {
    'Byte': [0, 1, 2, 253, 254, 255], 'Char': [-3, -2, -1, 0, 1, 2],
    'Short': [-300, -2, 0, 1, 2, 300], 'Int': [-70000, -1, 0, 1, 2, 70000],
    'Long': [-70000, -1, 0, 1, 2, 70000], 'Float': [1.5, -2.25, 0.1, 4.0, 5.0, 6.0],
    'Double': [1.5, -2.25, 0.1, 4.0, 5.0, 6.9], 'Half': [1.5, -2.25, 0.1, 4.0, 5.0, 6.0],
}

FAKE_BYTECODE = b'\x1bLJ\x02\x00 fake LuaJIT bytecode: opaque to readers \x00\xff'


def _contiguous_strides(sizes):
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.insert(0, acc)
        acc *= s
    return strides


def _tensor(etype, sizes, values):
    return T7Tensor(etype, sizes, _contiguous_strides(sizes), 1, T7Storage(etype, values))


def _linear(etype, n_in, n_out, base):
    w = _tensor(etype, [n_out, n_in], [base + i / 8 for i in range(n_in * n_out)])
    b = _tensor(etype, [n_out], [base - i for i in range(n_out)])
    return T7Object('nn.Linear', 1, {
        'weight': w, 'bias': b,
        'gradWeight': _tensor(etype, [n_out, n_in], [0.0] * (n_in * n_out)),
        'gradBias': _tensor(etype, [n_out], [0.0] * n_out),
        'output': T7Tensor(etype, [], [], 1, None),
        'gradInput': T7Tensor(etype, [], [], 1, None),
        'train': True,
        '_type': 'torch.%sTensor' % etype,
    })


def _case_nested():
    return {'a': {'b': {'c': [1, 2, {'d': True}]}}, 'empty': {}, 'lists': [[], [[]]]}


def _case_deep(depth):
    root = node = {}
    for i in range(depth - 1):
        child = {}
        node['level%d' % i] = child
        node = child
    node['bottom'] = True
    return root


def _case_table_keys():
    return T7Table([
        (1, 'one'), (2, 'two'), (3.5, 'three and a half'), (-1, 'minus one'),
        (0, 'zero'), (1e100, 'big'), (2.0**53, '2^53'),
        (True, 'yes'), (False, 'no'),
        ('s', 'string key'), (b'\x00k', 'NUL key'), ('', 'empty key'),
        (b'\xff', 'non-UTF-8 key'), ('sub', {'x': 1.0}),
    ])


def _case_object_keys():
    return T7Table([
        ({'inner': 1}, 'a table as key'),
        (T7Storage('Float', [1.0]), 'a storage as key'),
        ('after', 'a string key sorts before object keys'),
    ])


def _case_shared_objects():
    shared = {'v': 1}
    obj = T7Object('nn.Identity', 1, {'train': False})
    return {'a': shared, 'b': shared, 'm1': obj, 'm2': obj, 'list': [shared, obj]}


def _case_tensor_shared_storage():
    s = T7Storage('Double', [1, 2, 3, 4, 5, 6])
    return {'a': T7Tensor('Double', [2, 3], [3, 1], 1, s),
            'b': T7Tensor('Double', [3, 2], [1, 3], 1, s),   # transpose of a
            'c': T7Tensor('Double', [2], [1], 5, s),          # narrow, offset 5
            's': s}


def _case_tensor_twice():
    t = _tensor('Float', [2, 2], [1, 2, 3, 4])
    return [t, t, t.storage]


def _case_storage_then_tensor():
    s = T7Storage('Int', [10, 20, 30])
    # The storage is written first, so the tensor's storage slot is a reference.
    return T7Table([('storage', s), ('tensor', T7Tensor('Int', [3], [1], 1, s))])


def _case_nn_sequential():
    lin = _linear('Float', 3, 2, 0.5)
    relu = T7Object('nn.ReLU', 1, {'train': True, 'inplace': False, 'threshold': 0})
    tied = _linear('Float', 3, 2, -1.0)
    # Weight tying as nn's :share() does it: a second tensor on the same storage.
    w = lin.table['weight']
    tied.table['weight'] = T7Tensor('Float', w.sizes, w.strides, 1, w.storage)
    return T7Object('nn.Sequential', 1, {
        'modules': [lin, relu, tied, lin],       # lin twice: a reference
        'train': True, 'output': T7Tensor('Float', [], [], 1, None),
    })


def _case_legacy():
    return {'module': T7Object('nn.Module', None, {'x': 1}),
            'tensor': T7Tensor('Double', [2], [1], 1,
                               T7Storage('Double', [1, 2], version=None), version=None)}


def _case_long64():
    # Needs 8-byte longs: only in the long8 and ascii variants.
    s = T7Storage('Long', [-2**63, 2**63 - 1, 2**53 + 1, -(2**53 + 1), 2**31, -2**31 - 1, 2**40])
    return {'storage': s, 'tensor': T7Tensor('Long', [2], [3], 1, s)}


def _case_cycle_table():
    t = {'x': 1}
    t['self'] = t
    return t


def _case_cycle_list():
    l = []
    l.append(l)
    return l


def _case_cycle_object():
    obj = T7Object('nn.Container', 1, {})
    obj.table['self'] = obj
    return obj


def _case_cycle_key():
    t = T7Table()
    t.pairs.append((t, 1))
    return t


def _case_cycle_deep():
    a = {'name': 'a'}
    a['child'] = {'grandchild': {'back': a}}
    return a


def _case_cuda_tensors():
    """A GPU-trained Lua model's parameters: cutorch's classes, in their host
    types' layouts."""
    w = T7Tensor('Float', [2, 2], [2, 1], 1, T7Storage('Float', [1.5, -2.0, 0.25, 3.0], cuda=True),
                 cuda=True)
    d = T7Tensor('Double', [2], [1], 1, T7Storage('Double', [0.1, -0.2], cuda=True), cuda=True)
    idx = T7Tensor('Long', [3], [1], 1, T7Storage('Long', [1, -5, 2**40], cuda=True), cuda=True)
    return T7Object('nn.Linear', 1, {'weight': w, 'bias': d, 'index': idx,
                                     'half': T7Storage('Half', [1.0, -0.5], cuda=True)})


def _case_tds_hash():
    return T7Custom('tds.Hash', 0, [('long', 2), ('object', 'k'), ('object', 1), ('object', 2),
                                    ('object', {'nested': True})])


def _case_tds_vec():
    return {'vec': T7Custom('tds.Vec', 0, [('long', 2), ('object', 123), ('object', 456)])}


def _all_formats():
    return [f[0] for f in FORMATS]


def corpus_cases():
    """(name, builder, format suffixes).  Each builder returns a fresh value."""
    every = _all_formats()
    long8 = ['le8', 'be8', 'ascii']
    cases = [
        ('nil', lambda: None, every),
        ('true', lambda: True, every),
        ('false', lambda: False, every),
        ('number_pi', lambda: math.pi, every),
        ('number_negzero', lambda: -0.0, every),
        ('string_hello', lambda: 'hello', every),
        ('string_empty', lambda: '', every),
        ('string_newlines', lambda: b'\n\nx\n', every),
        ('numbers', lambda: list(SPECIAL_DOUBLES), every),
        ('strings', lambda: list(SPECIAL_STRINGS), every),
        ('table_empty', lambda: {}, every),
        ('table_keys', _case_table_keys, every),
        ('table_object_keys', _case_object_keys, every),
        ('table_nested', _case_nested, every),
        ('table_deep50', lambda: _case_deep(50), every),
    ]
    for t in TYPES:
        lo = t.lower()
        cases += [
            ('storage_%s' % lo, lambda t=t: T7Storage(t, STORAGE_VALUES[t]), every),
            ('storage_empty_%s' % lo, lambda t=t: T7Storage(t, []), every),
            ('tensor_%s' % lo, lambda t=t: _tensor(t, [2, 3], TENSOR_VALUES[t]), every),
            ('tensor_empty_%s' % lo, lambda t=t: T7Tensor(t, [], [], 1, None), every),
        ]
    cases += [
        ('long64_extremes', _case_long64, long8),
        ('tensor_0dim_with_storage',
         lambda: T7Tensor('Float', [], [], 3, T7Storage('Float', [1, 2, 3, 4])), every),
        ('tensor_transposed',
         lambda: T7Tensor('Double', [3, 2], [1, 3], 1, T7Storage('Double', [1, 2, 3, 4, 5, 6])), every),
        ('tensor_offset',
         lambda: T7Tensor('Int', [2, 2], [3, 1], 2, T7Storage('Int', list(range(1, 10)))), every),
        ('tensor_expanded',
         lambda: T7Tensor('Short', [3, 4], [0, 1], 1, T7Storage('Short', [1, 2, 3, 4])), every),
        ('tensor_3d_permuted',
         lambda: T7Tensor('Double', [4, 2, 3], [1, 12, 4], 1,
                          T7Storage('Double', [i * 0.5 for i in range(24)])), every),
        ('tensor_slack_storage',
         lambda: T7Tensor('Byte', [2], [2], 3, T7Storage('Byte', [9, 9, 1, 9, 2, 9, 9])), every),
        ('tensor_64dim',
         lambda: T7Tensor('Float', [1] * 64, [1] * 64, 1, T7Storage('Float', [42.0])), every),
        ('tensor_shared_storage', _case_tensor_shared_storage, every),
        ('tensor_twice', _case_tensor_twice, every),
        ('storage_then_tensor', _case_storage_then_tensor, every),
        ('shared_objects', _case_shared_objects, every),
        ('nn_linear', lambda: _linear('Float', 4, 3, 0.25), every),
        ('nn_linear_double', lambda: _linear('Double', 2, 2, 1.0), every),
        ('nn_sequential_shared', _case_nn_sequential, every),
        ('object_version2', lambda: T7Object('nn.Thing', 2, {'n': 2}), every),
        ('legacy_no_version', _case_legacy, every),
        ('cuda_tensors', _case_cuda_tensors, long8),
        # Refused: each holds exactly one reason.
        ('cycle_table', _case_cycle_table, every),
        ('cycle_list', _case_cycle_list, every),
        ('cycle_key', _case_cycle_key, every),
        ('cycle_deep', _case_cycle_deep, every),
        ('cycle_object', _case_cycle_object, every),
        ('function', lambda: T7Function(FAKE_BYTECODE, {1: {'name': 'x', 'value': 1}}), every),
        ('function_in_table', lambda: {'f': T7Function(FAKE_BYTECODE), 'n': 1}, every),
        ('function_legacy7', lambda: T7Function(FAKE_BYTECODE, tag=LEGACY_TYPE_RECUR_FUNCTION), every),
        ('function_plain6', lambda: T7Function(FAKE_BYTECODE, tag=TYPE_FUNCTION), every),
        ('tds_hash', _case_tds_hash, every),
        ('tds_vec', _case_tds_vec, every),
    ]
    return cases


def corpus():
    """(file name, FORMAT token, bytes, RESULT) for every corpus file."""
    out = []
    for name, build, suffixes in corpus_cases():
        result = render(build())
        for suffix in suffixes:
            _, mode, endian, long_size, token = FORMAT_BY_SUFFIX[suffix]
            data = write(build(), mode, endian, long_size)
            out.append(('%s.%s.t7' % (name, suffix), token, data, result))
    return out


# ---------------------------------------------------------------------------
# Hostile corpus
# ---------------------------------------------------------------------------

def _enc(suffix):
    _, mode, endian, long_size, _ = FORMAT_BY_SUFFIX[suffix]
    return Encoder(mode, endian, long_size)


def _header(e, index, name, version=b'V 1'):
    e.int(TYPE_TORCH, 'tag')
    e.int(index, 'index')
    if version is not None:
        e.int(len(version), 'verlen')
        e.chars(version, 'verbytes')
    e.int(len(name), 'namelen')
    e.chars(name, 'namebytes')


def _storage(e, index, etype, values, size=None):
    _header(e, index, b'torch.%sStorage' % etype.encode())
    e.long(len(values) if size is None else size, 'storsize')
    e.elements(etype, values)


def _tensor_head(e, index, etype, sizes, strides, offset1, ndim=None):
    _header(e, index, b'torch.%sTensor' % etype.encode())
    e.int(len(sizes) if ndim is None else ndim, 'ndim')
    e.longs(sizes, 'sizes')
    e.longs(strides, 'strides')
    e.long(offset1, 'offset')


def _table_head(e, index, count):
    e.int(TYPE_TABLE, 'tag')
    e.int(index, 'index')
    e.int(count, 'count')


def _string(e, s):
    e.int(TYPE_STRING, 'tag')
    e.int(len(s), 'strlen')
    e.chars(s, 'strbytes')


def _number_obj(e, x):
    e.int(TYPE_NUMBER, 'tag')
    e.double(x)


def _truncation_base():
    """One value holding every kind of field, for the cut-anywhere cases."""
    s = T7Storage('Float', [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    t = T7Tensor('Float', [2, 2], [3, 1], 2, s)
    return T7Table([
        ('n', 1.5), ('b', True), ('s', 'str\ning'), ('t', t),
        ('o', T7Object('nn.Thing', 1, {'w': T7Storage('Long', [1, -2])})),
        ('ref', t), ('last', 7),
    ])


def _truncations(suffix):
    _, mode, endian, long_size, _ = FORMAT_BY_SUFFIX[suffix]
    enc = serialize(_truncation_base(), mode, endian, long_size)
    data = enc.getvalue()
    last_start = enc.fields[-1][0]
    cuts, seen_kinds = {}, set()
    for start, end, kind in enc.fields:
        if kind in seen_kinds:
            continue
        seen_kinds.add(kind)
        points = [start]
        if end - start >= 2:
            points.append(start + (end - start) // 2)
        for p in points:
            # In ascii, cutting inside the final field can leave a shorter but
            # valid file ("7\n" -> "7"), so cuts stay before it.
            if p < len(data) and (enc.binary or p <= last_start):
                cuts.setdefault(p, kind)
    for p in sorted(cuts):
        where = 'at the start of' if any(f[0] == p for f in enc.fields if f[2] == cuts[p]) else 'inside'
        yield ('truncated_%04d' % p, data[:p], 'error:truncated|bad-length',
               'cut at byte %d, %s the first "%s" field' % (p, where, cuts[p]))


def hostile_cases():
    """(name, suffix, bytes, OUTCOME, description) for every hostile file."""
    cases = []

    def add(name, suffix, build, outcome, desc):
        e = _enc(suffix)
        build(e)
        cases.append((name, suffix, e.getvalue(), outcome, desc))

    for suffix in ('le8', 'be4', 'ascii'):
        for name, data, outcome, desc in _truncations(suffix):
            cases.append((name, suffix, data, outcome, desc))
        add('empty_file', suffix, lambda e: None, 'error:truncated', 'zero bytes')

    add('short_tag', 'le8', lambda e: e.raw(b'\x03\x00'), 'error:truncated', 'half a type tag')

    # Lying lengths.
    for suffix in ('le8', 'ascii'):
        add('string_len_huge', suffix,
            lambda e: (e.int(TYPE_STRING, 'tag'), e.int(2**31 - 1, 'strlen'), e.chars(b'abc')),
            'error:bad-length|truncated', 'string length 2^31-1, 3 bytes follow')
        add('string_len_negative', suffix,
            lambda e: (e.int(TYPE_STRING, 'tag'), e.int(-1, 'strlen'), e.chars(b'abc')),
            'error:bad-length', 'string length -1')
        add('string_len_min', suffix,
            lambda e: (e.int(TYPE_STRING, 'tag'), e.int(-2**31, 'strlen')),
            'error:bad-length', 'string length -2^31')
        add('storage_size_huge', suffix,
            lambda e: _storage(e, 1, 'Double', [1.0], size=2**62),
            'error:bad-length|truncated', 'DoubleStorage size 2^62, one element follows')
        add('storage_size_negative', suffix,
            lambda e: _storage(e, 1, 'Float', [], size=-1),
            'error:bad-length', 'FloatStorage size -1')
        add('table_count_huge', suffix,
            lambda e: (_table_head(e, 1, 2**31 - 1), _number_obj(e, 1), _number_obj(e, 2)),
            'error:bad-length|truncated', 'table count 2^31-1, one entry follows')
        add('table_count_negative', suffix,
            lambda e: _table_head(e, 1, -5), 'error:bad-length', 'table count -5')
        add('class_name_len_negative', suffix,
            lambda e: (e.int(TYPE_TORCH), e.int(1), e.int(3), e.chars(b'V 1'), e.int(-4)),
            'error:bad-length', 'class name length -4')
        add('version_len_huge', suffix,
            lambda e: (e.int(TYPE_TORCH), e.int(1), e.int(2**31 - 1), e.chars(b'V 1')),
            'error:bad-length|truncated', 'version string length 2^31-1')
    add('storage_size_huge_long4', 'be4',
        lambda e: _storage(e, 1, 'Int', [1], size=2**31 - 1),
        'error:bad-length|truncated', 'IntStorage size 2^31-1 in a 4-byte-long file')
    add('char_storage_len_lie', 'ascii',
        lambda e: (_header(e, 1, b'torch.CharStorage'), e.long(10, 'storsize'), e.chars(b'abc')),
        'error:bad-length|truncated', 'ascii CharStorage size 10, 3 raw bytes follow')

    # References.
    add('ref_index_zero', 'le8', lambda e: _table_head(e, 0, 0), 'error:bad-ref', 'table index 0')
    add('ref_index_negative', 'le8', lambda e: _table_head(e, -1, 0), 'error:bad-ref', 'table index -1')
    add('ref_forward_top', 'le8', lambda e: _table_head(e, 2, 0), 'error:bad-ref',
        'first object has index 2')
    add('ref_forward_nested', 'le8',
        lambda e: (_table_head(e, 1, 1), _string(e, b'a'), _table_head(e, 5, 0)),
        'error:bad-ref', 'second object has index 5')
    add('ref_out_of_range', 'ascii',
        lambda e: (_table_head(e, 1, 1), _string(e, b'a'),
                   e.int(TYPE_TABLE, 'tag'), e.int(2**31 - 1, 'index')),
        'error:bad-ref', 'reference to index 2^31-1')
    add('ref_table_tag_to_storage', 'le8',
        lambda e: (_table_head(e, 1, 2), _string(e, b'a'), _storage(e, 2, 'Float', [1.0]),
                   _string(e, b'b'), e.int(TYPE_TABLE, 'tag'), e.int(2, 'index')),
        'error:bad-ref', 'TABLE tag referencing a FloatStorage')
    add('ref_torch_tag_to_table', 'le8',
        lambda e: (_table_head(e, 1, 2), _string(e, b'a'), _table_head(e, 2, 0),
                   _string(e, b'b'), e.int(TYPE_TORCH, 'tag'), e.int(2, 'index')),
        'error:bad-ref', 'TORCH tag referencing a table')
    add('ref_torch_tag_to_table_be4', 'be4',
        lambda e: (_table_head(e, 1, 2), _string(e, b'a'), _table_head(e, 2, 0),
                   _string(e, b'b'), e.int(TYPE_TORCH, 'tag'), e.int(2, 'index')),
        'error:bad-ref', 'TORCH tag referencing a table')

    # Tags.
    add('tag_unknown_9', 'le8', lambda e: e.int(9, 'tag'), 'error:bad-tag', 'type tag 9')
    add('tag_negative', 'le8', lambda e: e.int(-1, 'tag'), 'error:bad-tag', 'type tag -1')
    add('tag_huge', 'ascii', lambda e: e.int(2**31 - 1, 'tag'), 'error:bad-tag', 'type tag 2^31-1')
    add('tag_unknown_in_table', 'be4',
        lambda e: (_table_head(e, 1, 1), _string(e, b'k'), e.int(42, 'tag')),
        'error:bad-tag', 'table value with type tag 42')
    add('byte_order_swapped', 'le8',
        lambda e: e.raw(write({'a': 1}, 'binary', '>', 8)),
        'error:bad-tag', 'a big-endian file listed as little-endian')

    # Depth.
    def deep(e, depth=10000):
        for i in range(depth):
            _table_head(e, i + 1, 1)
            _number_obj(e, 1)
        _table_head(e, depth + 1, 0)
    add('deep_tables_10000', 'le8', deep, 'error:too-deep', '10001 nested tables, well formed')
    add('deep_tables_10000', 'ascii', deep, 'error:too-deep', '10001 nested tables, well formed')

    def deep_keys(e, depth=10000):
        for i in range(depth):
            _table_head(e, i + 1, 1)
        _table_head(e, depth + 1, 0)
        for i in range(depth):
            _number_obj(e, 1)
    add('deep_table_keys_10000', 'le8', deep_keys, 'error:too-deep',
        '10001 tables nested through keys, well formed')

    # Tensors.
    def tensor_case(name, sizes, strides, offset1, storage_values, desc,
                    suffix='le8', ndim=None, etype='Float'):
        def build(e):
            _tensor_head(e, 1, etype, sizes, strides, offset1, ndim)
            if storage_values is None:
                e.int(TYPE_NIL, 'tag')
            else:
                _storage(e, 2, etype, storage_values)
        add(name, suffix, build, 'error:bad-tensor', desc)

    tensor_case('tensor_ndim_negative', [], [], 1, [1.0], 'ndim -1', ndim=-1)
    tensor_case('tensor_ndim_huge', [], [], 1, [1.0], 'ndim 2^31-1, no sizes follow', ndim=2**31 - 1)
    tensor_case('tensor_ndim_65', [1] * 65, [1] * 65, 1, [1.0],
                'ndim 65, well formed (Torch7 allows it; tstor stops at 64)')
    tensor_case('tensor_size_negative', [-2], [1], 1, [1.0, 2.0], 'size -2')
    tensor_case('tensor_stride_negative', [2], [-1], 2, [1.0, 2.0], 'stride -1 from offset 2')
    tensor_case('tensor_offset_zero', [2], [1], 0, [1.0, 2.0], 'storage offset 0 (1-based)')
    tensor_case('tensor_offset_negative', [1], [1], -3, [1.0], 'storage offset -3', suffix='ascii')
    tensor_case('tensor_offset_past_storage', [1], [1], 5, [1.0, 2.0, 3.0, 4.0],
                'offset 5 into a storage of 4')
    tensor_case('tensor_past_storage_end', [5], [1], 1, [1.0, 2.0, 3.0, 4.0],
                '5 elements from a storage of 4', suffix='be4')
    tensor_case('tensor_stride_past_end', [2, 2], [3, 1], 1, [1.0, 2.0, 3.0, 4.0],
                'last element at index 4 of a storage of 4')
    tensor_case('tensor_extent_overflow', [2**62, 4], [2**62, 1], 1, [1.0],
                '(size-1)*stride overflows int64')
    tensor_case('tensor_nil_storage', [3], [1], 1, None, '3 elements, nil storage', suffix='ascii')
    add('tensor_storage_wrong_type', 'le8',
        lambda e: (_tensor_head(e, 1, 'Double', [2], [1], 1), _storage(e, 2, 'Float', [1.0, 2.0])),
        'error:bad-tensor', 'DoubleTensor over a new FloatStorage')
    add('tensor_storage_ref_wrong_type', 'le8',
        lambda e: (_table_head(e, 1, 2), _string(e, b'a'), _storage(e, 2, 'Float', [1.0, 2.0]),
                   _string(e, b'b'), _tensor_head(e, 3, 'Double', [2], [1], 1),
                   e.int(TYPE_TORCH, 'tag'), e.int(2, 'index')),
        'error:bad-tensor', 'DoubleTensor whose storage is a reference to a FloatStorage')
    add('tensor_storage_is_table', 'le8',
        lambda e: (_tensor_head(e, 1, 'Float', [1], [1], 1), _table_head(e, 2, 0)),
        'error:bad-tensor', 'storage slot holds a table')
    add('tensor_storage_is_number', 'ascii',
        lambda e: (_tensor_head(e, 1, 'Float', [1], [1], 1), _number_obj(e, 1)),
        'error:bad-tensor', 'storage slot holds a number')
    add('tensor_storage_is_tensor', 'le8',
        lambda e: (_tensor_head(e, 1, 'Float', [1], [1], 1), _tensor_head(e, 2, 'Float', [], [], 1),
                   e.int(TYPE_NIL, 'tag')),
        'error:bad-tensor', 'storage slot holds another tensor')

    # Classes and versions.
    add('class_unknown_torch', 'le8',
        lambda e: (_header(e, 1, b'torch.FooTensor'), e.int(0), e.long(1)),
        'error:bad-class', 'torch.FooTensor')
    add('class_name_empty', 'le8',
        lambda e: (_header(e, 1, b''), _table_head(e, 2, 0)), 'error:bad-class', 'empty class name')
    add('class_name_garbage', 'ascii',
        lambda e: (_header(e, 1, b'nn.\xff\nx'), _table_head(e, 2, 0)),
        'error:bad-class', 'class name with bytes 0xff and newline')
    add('class_payload_not_table', 'le8',
        lambda e: (_header(e, 1, b'nn.Linear'), _number_obj(e, 1)),
        'error:bad-class', 'nn.Linear followed by a number, not a table')
    add('class_payload_is_reference', 'le8',
        lambda e: (_table_head(e, 1, 1), _string(e, b'x'), _header(e, 2, b'nn.Linear'),
                   e.int(TYPE_TABLE, 'tag'), e.int(1, 'index')),
        'error:bad-class', 'nn.Linear payload is a reference to an earlier table')
    add('version_not_number', 'le8',
        lambda e: (e.int(TYPE_TORCH), e.int(1), e.int(5), e.chars(b'V abc'),
                   e.int(18), e.chars(b'torch.FloatStorage'), e.long(0)),
        'error:bad-class', '"V abc" is not a version, so it is read as a class name')
    add('version_empty_string', 'le8',
        lambda e: (e.int(TYPE_TORCH), e.int(1), e.int(0), e.int(18),
                   e.chars(b'torch.FloatStorage'), e.long(0)),
        'error:bad-class', 'empty version string, read as an empty legacy class name')
    add('version_then_eof', 'le8',
        lambda e: (e.int(TYPE_TORCH), e.int(1), e.int(3), e.chars(b'V 1')),
        'error:truncated', 'version string, then no class name')
    add('version_only_no_classname', 'ascii',
        lambda e: (e.int(TYPE_TORCH), e.int(1), e.int(3), e.chars(b'V 1'),
                   e.int(1, 'ndim'), e.longs([2]), e.longs([1]), e.long(1), e.int(0)),
        'error:bad-class|bad-length|truncated',
        'a FloatTensor payload right after "V 1": the ndim 1 reads as a class-name length')

    # Table entries.
    add('key_nil', 'le8',
        lambda e: (_table_head(e, 1, 1), e.int(TYPE_NIL), _number_obj(e, 1)),
        'error:bad-entry', 'table key nil')
    add('key_nan', 'le8',
        lambda e: (_table_head(e, 1, 1), _number_obj(e, math.nan), _number_obj(e, 1)),
        'error:bad-entry', 'table key NaN')
    add('key_duplicate_string', 'ascii',
        lambda e: (_table_head(e, 1, 2), _string(e, b'a'), _number_obj(e, 1),
                   _string(e, b'a'), _number_obj(e, 2)),
        'ok table#1{str(61)=num(0x1p+1;2.0)}', 'key "a" twice: the last value stands, as in Torch7')
    add('key_duplicate_number', 'le8',
        lambda e: (_table_head(e, 1, 2), _number_obj(e, 0.0), _number_obj(e, 1),
                   _number_obj(e, -0.0), _number_obj(e, 2)),
        'ok table#1{num(0x0p+0;0.0)=num(0x1p+1;2.0)}',
        'keys 0 and -0, the same Lua key: the first key, the last value')
    add('key_duplicate_object', 'le8',
        lambda e: (_table_head(e, 1, 2), _table_head(e, 2, 0), _number_obj(e, 1),
                   e.int(TYPE_TABLE), e.int(2), _number_obj(e, 2)),
        'ok table#1{table#2{}=num(0x1p+1;2.0)}', 'the same table as key twice: the last value stands')
    add('value_nil', 'le8',
        lambda e: (_table_head(e, 1, 1), _string(e, b'a'), e.int(TYPE_NIL)),
        'error:bad-entry', 'table value nil')
    add('bool_two', 'le8',
        lambda e: (e.int(TYPE_BOOLEAN), e.int(2, 'bool')), 'error:bad-value', 'boolean 2')

    # Functions: refused at the tag, whatever follows.
    add('luajit_function', 'le8',
        lambda e: (e.int(TYPE_RECUR_FUNCTION), e.int(1), e.int(len(FAKE_BYTECODE)),
                   e.chars(FAKE_BYTECODE), _table_head(e, 2, 0)),
        'refuse: function', 'LuaJIT bytecode function')
    add('function_len_lie', 'le8',
        lambda e: (e.int(TYPE_RECUR_FUNCTION), e.int(1), e.int(2**31 - 1), e.chars(b'\x1bLJ')),
        'refuse: function', 'function whose bytecode length lies')
    add('function_tag6_truncated', 'ascii',
        lambda e: (e.int(TYPE_FUNCTION), e.int(100)),
        'refuse: function', 'old-style function, truncated after its length')

    # Trailing data.
    add('trailing_garbage', 'le8',
        lambda e: (e.raw(write(1.0)), e.raw(b'junk')), 'error:trailing-data', '4 bytes after a number')
    add('two_objects', 'ascii',
        lambda e: (e.raw(write({}, 'ascii')), e.raw(write({}, 'ascii'))),
        'error:trailing-data', 'two top-level tables')
    add('storage_size_too_small', 'be8',
        lambda e: (_storage(e, 1, 'Float', [1.0, 2.0, 3.0], size=2)),
        'error:trailing-data', 'FloatStorage says 2 elements, 3 are there')

    # Ascii syntax.
    add('ascii_tag_not_number', 'ascii', lambda e: e.raw(b'x\n'), 'error:bad-syntax', 'tag "x"')
    add('ascii_int_overflow', 'ascii', lambda e: e.raw(b'99999999999\n'),
        'error:bad-syntax', 'tag 99999999999 does not fit an int')
    add('ascii_double_garbage', 'ascii', lambda e: e.raw(b'1\nabc\n'),
        'error:bad-syntax', 'number "abc"')
    add('ascii_long_overflow', 'ascii',
        lambda e: (_header(e, 1, b'torch.LongStorage'), e.raw(b'99999999999999999999\n')),
        'error:bad-syntax', 'storage size beyond int64')
    add('ascii_storage_element_garbage', 'ascii',
        lambda e: (_header(e, 1, b'torch.IntStorage'), e.long(3, 'storsize'), e.raw(b'1 x 3\n')),
        'error:bad-syntax', 'IntStorage element "x"')
    return cases


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------

def _write_files(outdir, listing, entries):
    os.makedirs(outdir, exist_ok=True)
    lines = []
    for fname, data, line in entries:
        with open(os.path.join(outdir, fname), 'wb') as f:
            f.write(data)
        lines.append(line)
    with open(os.path.join(outdir, listing), 'w', encoding='ascii', newline='\n') as f:
        f.write(''.join(l + '\n' for l in lines))
    return len(entries)


def main(argv):
    args = argv[1:]
    hostile = False
    if args and args[0] == '--hostile':
        hostile, args = True, args[1:]
    if len(args) != 1:
        sys.stderr.write('usage: gen_t7.py [--hostile] OUTDIR\n')
        return 2
    outdir = args[0]
    if hostile:
        entries = []
        for name, suffix, data, outcome, desc in hostile_cases():
            fname = '%s.%s.t7' % (name, suffix)
            entries.append((fname, data, '%s %s %s # %s' % (
                fname, FORMAT_BY_SUFFIX[suffix][4], outcome, desc)))
        n = _write_files(outdir, 'hostile.txt', entries)
    else:
        entries = [(fname, data, '%s %s %s' % (fname, token, result))
                   for fname, token, data, result in corpus()]
        n = _write_files(outdir, 'manifest.txt', entries)
    print('wrote %d files to %s' % (n, outdir))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
