/* tstor typed storage: dtypes, typed element access and converting copies.
 *
 * A typed storage is not a new object: it is a tstor_storage read as an array
 * of one dtype, exactly as PyTorch's TypedStorage wraps an UntypedStorage and
 * Torch7's torch.IntStorage is a THStorage of int. Every function here takes the
 * storage and the dtype side by side, so different dtypes may view the same
 * bytes. The element count is nbytes / element_size; a storage whose size is
 * not a multiple of the element size is refused (TSTOR_ESIZE).
 *
 * Typed operations work on every device. On host-memory devices they read and
 * write the bytes directly; on other devices they use the device's own convert
 * op where it has one (backend.h) and otherwise stage through host memory.
 * Meta storages have sizes and no data, as PyTorch's meta tensors: size
 * queries, creation and resizing work; calls that only write given values
 * (tstor_typed_fill, tstor_typed_set and its _f64/_i64 forms,
 * tstor_typed_set_string) check their arguments and succeed, writing nothing,
 * as fill_ and x[i] = v do on meta; calls that read the bytes (get, to_array,
 * get_string, byteswap, a copy into a device with data) fail with
 * TSTOR_ENODATA.
 *
 * Conversions give the results of PyTorch's CPU tensor.to(dtype), bit for bit,
 * for every pair PyTorch converts; see tstor_dtype_convert for the details and
 * for what happens where C leaves the result undefined. Conversions to or from
 * a quantized dtype are refused with TSTOR_EDTYPE, as PyTorch refuses them.
 */
#ifndef TSTOR_TYPED_H
#define TSTOR_TYPED_H

#include <stdio.h>
#include <tstor/tstor.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ dtypes */

/* Every dtype, one line each: the list everything else about dtypes is
 * generated from (the enum below, the table behind tstor_dtype_info_of, the
 * host conversion loops and the cuda kernels), as TSTOR_ERRNO_MAP is for
 * errors. XX is called as
 *
 *   XX(A, ENUM, value, tag, name, alias, legacy_name, scalar_type, size, KIND,
 *      is_signed, UNDERLYING)
 *
 * A is passed through unchanged, so that an expansion nested in another can
 * know the outer row (a table over pairs of dtypes); ENUM, KIND and UNDERLYING
 * are suffixes (TSTOR_ENUM, TSTOR_KIND_KIND, TSTOR_UNDERLYING); tag is a
 * short C identifier for the dtype (u8, f16, e4m3fn) for names built from it.
 * The other fields are those of tstor_dtype_info.
 *
 * The values are c10::ScalarType's, so a dtype crosses into PyTorch (and into a
 * backend's convert op, which receives them as int) unchanged. They are fixed:
 * never renumbered. 30-43 are PyTorch's uint1-7 and int1-7, which it cannot
 * save, and are not dtypes here. */
#define TSTOR_DTYPE_MAP(XX, A)                                                                     \
  /* torch.uint8, Byte */                                                                          \
  XX(A, UINT8, 0, u8, "uint8", NULL, "Byte", "Byte", 1, UNSIGNED, 0, UINT8)                        \
  /* torch.int8, Char */                                                                           \
  XX(A, INT8, 1, i8, "int8", NULL, "Char", "Char", 1, SIGNED, 1, INT8)                             \
  /* torch.int16, Short */                                                                         \
  XX(A, INT16, 2, i16, "int16", "short", "Short", "Short", 2, SIGNED, 1, INT16)                    \
  /* torch.int32, Int */                                                                           \
  XX(A, INT32, 3, i32, "int32", "int", "Int", "Int", 4, SIGNED, 1, INT32)                          \
  /* torch.int64, Long */                                                                          \
  XX(A, INT64, 4, i64, "int64", "long", "Long", "Long", 8, SIGNED, 1, INT64)                       \
  /* torch.float16, Half: IEEE binary16 */                                                         \
  XX(A, FLOAT16, 5, f16, "float16", "half", "Half", "Half", 2, FLOAT, 1, FLOAT16)                  \
  /* torch.float32, Float */                                                                       \
  XX(A, FLOAT32, 6, f32, "float32", "float", "Float", "Float", 4, FLOAT, 1, FLOAT32)               \
  /* torch.float64, Double */                                                                      \
  XX(A, FLOAT64, 7, f64, "float64", "double", "Double", "Double", 8, FLOAT, 1, FLOAT64)            \
  /* torch.complex32 (chalf): two float16, real first */                                           \
  XX(A, COMPLEX32, 8, c32, "complex32", "chalf", NULL, "ComplexHalf", 4, COMPLEX, 1, COMPLEX32)    \
  /* torch.complex64, ComplexFloat */                                                              \
  XX(A, COMPLEX64, 9, c64, "complex64", "cfloat", "ComplexFloat", "ComplexFloat", 8, COMPLEX, 1,   \
     COMPLEX64)                                                                                    \
  /* torch.complex128, ComplexDouble */                                                            \
  XX(A, COMPLEX128, 10, c128, "complex128", "cdouble", "ComplexDouble", "ComplexDouble", 16,       \
     COMPLEX, 1, COMPLEX128)                                                                       \
  /* torch.bool, one byte, 0 or 1 */                                                               \
  XX(A, BOOL, 11, bool, "bool", NULL, "Bool", "Bool", 1, BOOL, 0, BOOL)                            \
  /* torch.qint8: int8 codes of a quantized tensor */                                              \
  XX(A, QINT8, 12, qi8, "qint8", NULL, "QInt8", "QInt8", 1, QUANTIZED, 1, INT8)                    \
  /* torch.quint8 */                                                                               \
  XX(A, QUINT8, 13, qu8, "quint8", NULL, "QUInt8", "QUInt8", 1, QUANTIZED, 0, UINT8)               \
  /* torch.qint32 */                                                                               \
  XX(A, QINT32, 14, qi32, "qint32", NULL, "QInt32", "QInt32", 4, QUANTIZED, 1, INT32)              \
  /* torch.bfloat16: the top half of a float32 */                                                  \
  XX(A, BFLOAT16, 15, bf16, "bfloat16", NULL, "BFloat16", "BFloat16", 2, FLOAT, 1, BFLOAT16)       \
  /* torch.quint4x2: two 4-bit codes per byte */                                                   \
  XX(A, QUINT4X2, 16, qu4x2, "quint4x2", NULL, "QUInt4x2", "QUInt4x2", 1, QUANTIZED, 0, UINT8)     \
  /* torch.quint2x4: four 2-bit codes per byte */                                                  \
  XX(A, QUINT2X4, 17, qu2x4, "quint2x4", NULL, "QUInt2x4", "QUInt2x4", 1, QUANTIZED, 0, UINT8)     \
  /* torch.bits1x8 .. bits16: bytes PyTorch saves and copies, no values (PyTorch 2.x) */           \
  XX(A, BITS1X8, 18, b1x8, "bits1x8", NULL, NULL, "Bits1x8", 1, OPAQUE, 0, BITS1X8)                \
  XX(A, BITS2X4, 19, b2x4, "bits2x4", NULL, NULL, "Bits2x4", 1, OPAQUE, 0, BITS2X4)                \
  XX(A, BITS4X2, 20, b4x2, "bits4x2", NULL, NULL, "Bits4x2", 1, OPAQUE, 0, BITS4X2)                \
  XX(A, BITS8, 21, b8, "bits8", NULL, NULL, "Bits8", 1, OPAQUE, 0, BITS8)                          \
  XX(A, BITS16, 22, b16, "bits16", NULL, NULL, "Bits16", 2, OPAQUE, 0, BITS16)                     \
  /* OCP FP8 E5M2: bias 15, inf and NaN as IEEE */                                                 \
  XX(A, FLOAT8_E5M2, 23, e5m2, "float8_e5m2", NULL, NULL, "Float8_e5m2", 1, FLOAT, 1, FLOAT8_E5M2) \
  /* OCP FP8 E4M3: bias 7, no inf, NaN S.1111.111 */                                               \
  XX(A, FLOAT8_E4M3FN, 24, e4m3fn, "float8_e4m3fn", NULL, NULL, "Float8_e4m3fn", 1, FLOAT, 1,      \
     FLOAT8_E4M3FN)                                                                                \
  /* E5M2, bias 16, no inf, no -0, NaN 0x80 */                                                     \
  XX(A, FLOAT8_E5M2FNUZ, 25, e5m2fnuz, "float8_e5m2fnuz", NULL, NULL, "Float8_e5m2fnuz", 1, FLOAT, \
     1, FLOAT8_E5M2FNUZ)                                                                           \
  /* E4M3, bias 8, no inf, no -0, NaN 0x80 */                                                      \
  XX(A, FLOAT8_E4M3FNUZ, 26, e4m3fnuz, "float8_e4m3fnuz", NULL, NULL, "Float8_e4m3fnuz", 1, FLOAT, \
     1, FLOAT8_E4M3FNUZ)                                                                           \
  /* torch.uint16 (PyTorch 2.x, as the two below) */                                               \
  XX(A, UINT16, 27, u16, "uint16", NULL, NULL, "UInt16", 2, UNSIGNED, 0, UINT16)                   \
  XX(A, UINT32, 28, u32, "uint32", NULL, NULL, "UInt32", 4, UNSIGNED, 0, UINT32)                   \
  XX(A, UINT64, 29, u64, "uint64", NULL, NULL, "UInt64", 8, UNSIGNED, 0, UINT64)                   \
  /* OCP MX scale E8M0: 2^(x - 127), no sign, no zero, NaN 0xff */                                 \
  XX(A, FLOAT8_E8M0FNU, 44, e8m0, "float8_e8m0fnu", NULL, NULL, "Float8_e8m0fnu", 1, FLOAT, 0,     \
     FLOAT8_E8M0FNU)                                                                               \
  /* OCP MX FP4 E2M1, two per byte, the first in the low nibble */                                 \
  XX(A, FLOAT4_E2M1FN_X2, 45, f4x2, "float4_e2m1fn_x2", NULL, NULL, "Float4_e2m1fn_x2", 1, OPAQUE, \
     1, FLOAT4_E2M1FN_X2)                                                                          \
  /* torch.bcomplex32 (PyTorch 2.15): two bfloat16, real first */                                  \
  XX(A, BCOMPLEX32, 46, bc32, "bcomplex32", NULL, NULL, "BComplex32", 4, COMPLEX, 1, BCOMPLEX32)

typedef enum tstor_dtype {
#define TSTOR__DTYPE_ENUM(A, e, v, ...) TSTOR_##e = v,
  TSTOR_DTYPE_MAP(TSTOR__DTYPE_ENUM, _)
#undef TSTOR__DTYPE_ENUM
} tstor_dtype;

/* One past the largest dtype value, for loops and tables (check validity with
 * tstor_dtype_info: not every value below it is a dtype). */
#define TSTOR_DTYPE_END 47

typedef enum tstor_dtype_kind {
  TSTOR_KIND_BOOL = 0,
  TSTOR_KIND_UNSIGNED = 1,  /* uint8, uint16, uint32, uint64 */
  TSTOR_KIND_SIGNED = 2,    /* int8 .. int64 */
  TSTOR_KIND_FLOAT = 3,     /* float16, bfloat16, float32, float64, the float8s */
  TSTOR_KIND_COMPLEX = 4,   /* complex32, complex64, complex128, bcomplex32 */
  TSTOR_KIND_QUANTIZED = 5, /* qint8, quint8, qint32, quint4x2, quint2x4 */
  TSTOR_KIND_OPAQUE = 6     /* float4_e2m1fn_x2 and the bits types: bytes
                               PyTorch stores, copies to the same dtype and
                               views, but neither converts nor reads as
                               numbers */
} tstor_dtype_kind;

typedef struct tstor_dtype_info {
  tstor_dtype dtype;
  const char *name;        /* PyTorch's name without "torch.": "float32" */
  const char *alias;       /* PyTorch's other name ("float", "half", "cfloat"), or NULL */
  const char *legacy_name; /* the storage class stem, "Float" for torch.FloatStorage
                              (Torch7's name where Torch7 had one), or NULL */
  const char *scalar_type; /* c10::ScalarType's name: "Float", "ComplexHalf" */
  size_t element_size;     /* bytes per element; 1 for the packed quint4x2/2x4,
                              float4_e2m1fn_x2 and bits1x8/2x4/4x2 */
  tstor_dtype_kind kind;
  int is_signed;           /* 1 for signed integers and every float or complex
                              but float8_e8m0fnu, as torch.dtype.is_signed;
                              0 for the bits types, which PyTorch leaves
                              undefined */
  tstor_dtype underlying;  /* the integer type a quantized dtype stores (qint8 ->
                              int8; quint4x2 -> uint8); the dtype itself otherwise */
} tstor_dtype_info;

/* The description of `dtype`, or NULL when it is not a dtype. Static; never
 * freed. */
TSTOR_EXTERN const tstor_dtype_info *tstor_dtype_info_of(tstor_dtype dtype);

/* Shorthands: "float32" (or "?" for a non-dtype) and the element size (0 for a
 * non-dtype). The string is static. */
TSTOR_EXTERN const char *tstor_dtype_name(tstor_dtype dtype);
TSTOR_EXTERN size_t tstor_dtype_size(tstor_dtype dtype);

/* Parses a dtype name: PyTorch's ("float32", "torch.float32", "float", "half",
 * "chalf"), the storage class ("FloatStorage", "torch.FloatStorage", "Float")
 * or c10's ("ComplexFloat"). Case matters, as in PyTorch. TSTOR_ENOENT for an
 * unknown name, TSTOR_EINVAL for NULL. */
TSTOR_EXTERN int tstor_dtype_parse(const char *name, tstor_dtype *out);

/* 0 when PyTorch converts src_dtype to dst_dtype, TSTOR_EDTYPE when it refuses
 * (a quantized or opaque dtype on either side, unless both are the same dtype:
 * a copy; an opaque one in PyTorch 2.x's words, "\"copy_\" not implemented
 * for 'Float4_e2m1fn_x2'", naming the destination where both are opaque),
 * TSTOR_EINVAL for a non-dtype. Sets the error detail on failure. */
TSTOR_EXTERN int tstor_dtype_can_convert(tstor_dtype dst_dtype, tstor_dtype src_dtype);

/* Converts `count` elements of host memory at src (src_dtype) into dst
 * (dst_dtype). The buffers must not overlap unless dst == src and both dtypes
 * have the same size; they may have any alignment (a misaligned one takes a
 * slower path). This is the reference conversion that every device's
 * convert op matches. Large counts are split over worker threads (see
 * tstor_set_num_threads).
 *
 * Results are those of PyTorch's CPU tensor.to(dst_dtype):
 *   - float to float16/bfloat16/float8 rounds to nearest, ties to even, with
 *     subnormals, infinities and signed zeros kept. float64 to float16,
 *     bfloat16 or a float8 goes through float32, rounding twice, as PyTorch does.
 *     NaN in float16 keeps its sign and the top ten bits of its float32
 *     payload, made quiet (0x7FA00000 becomes 0x7F00, as x86's conversion
 *     instruction and torch 2.x give it; PyTorch 1.13 wrote 0x7E00); in
 *     bfloat16 0xFFFF from float32 and float64 (PyTorch's vectorised loops)
 *     and 0x7FC0 from float16, complex and the float8s (its scalar ones;
 *     PyTorch 1.13 itself writes 0x7FC0 for the last elements of a float64
 *     buffer, which tstor does not copy);
 *     0x7F with the sign in e4m3fn and e5m2, 0x80 in the fnuz formats, 0xFF
 *     in e8m0.
 *     float8_e4m3fn saturates: values past its range, infinities included,
 *     become +-448 (PyTorch 2.15; earlier 2.x releases made them NaN). The
 *     fnuz formats have no infinity: values past their range, infinities
 *     included, become NaN; e5m2 overflows to infinity.
 *   - float8_e8m0fnu, a power of two 2^-127 .. 2^127, has neither sign nor
 *     zero: from float32 it takes the exponent rounded by the mantissa, ties
 *     to even (3.0 becomes 4, 0 and every |x| below 2^-127 become 2^-127,
 *     -8 becomes 8); infinities, NaN and what rounds past 2^127 become NaN.
 *     It widens exactly, NaN to 0x7F800001 as PyTorch 2.x decodes it.
 *     Widening is exact; float16 and float8 NaNs widen quiet with their
 *     payload (fnuz NaN is float32 0x7F800001, e4m3fn 0x7FF00000, as PyTorch
 *     2.x's c10 decodes them), bfloat16 NaNs unchanged.
 *   - complex to real keeps the real part (complex32 to float16 copies its
 *     bits); real to complex has a +0 imaginary part; complex to bool is true
 *     when either part is nonzero (torch 2.x: 1j becomes true; PyTorch 1.13
 *     looked at the real part only).
 *   - to bool: nonzero (NaN included) is true.
 *   - integer to narrower integer wraps (keeps the low bits), and so do
 *     negative values into the unsigned types; uint64 past INT64_MAX to a
 *     float rounds to nearest as the unsigned value it is.
 *   - float to integer truncates toward zero. Where C leaves it undefined (NaN,
 *     infinity, out of range) tstor does what x86 does and PyTorch therefore
 *     gives: to int64 the result is INT64_MIN; to int32, int16 and int8 the value
 *     is first made an int32 (INT32_MIN when it does not fit) and then wrapped;
 *     to uint8 it is made an int64 (INT64_MIN when it does not fit) and wrapped,
 *     so -1.0 becomes 255 and 300.0 becomes 44. Never a trap, on any machine.
 *     To uint16 as to int16. To uint32 and uint64, below 2^31 (2^63) as to
 *     int32 (int64), so that -1.0 is all ones and NaN 0x80000000 (2^63); from
 *     there up to 2^32 (2^64) exactly, and 0 past it (tstor_f32_to_u32); but
 *     from float16, complex32, the float8s and e8m0 uint32 takes the low 32
 *     bits of the int64 cast instead, NaN and infinities 0 (PyTorch's loops
 *     for those sources; with ATEN_CPU_CAPABILITY=default, float16, complex32
 *     and e5m2 take the first rule). PyTorch computes the last few elements
 *     of a buffer in a scalar loop whose uint32 results differ for some
 *     out-of-range complex64 values; tstor gives the vector loop's throughout.
 *     The NaN of the fnuz formats and of e8m0 becomes 0 in every integer
 *     dtype (PyTorch's compiler folds their one NaN code).
 *   - bcomplex32 (PyTorch 2.15) is two bfloat16: each part is written as a
 *     float32 rounded to bfloat16, NaN 0x7FC0 (PyTorch's scalar loops);
 *     bfloat16 to and from it moves the real part's bits (NaN payloads
 *     kept); to uint32 it takes the vector loops' cast.
 *   - float4_e2m1fn_x2 and the bits types convert to nothing but themselves,
 *     as in PyTorch 2.x.
 * TSTOR_EDTYPE where tstor_dtype_can_convert refuses; TSTOR_EINVAL for a NULL
 * buffer with count > 0. Nothing is written on failure. */
TSTOR_EXTERN int tstor_dtype_convert(void *dst, tstor_dtype dst_dtype, const void *src,
                                     tstor_dtype src_dtype, size_t count);

/* ----------------------------------------------------------- typed storages */

/* Byte order of an external buffer (PyTorch's from_buffer byte_order). */
typedef enum tstor_byte_order {
  TSTOR_ORDER_NATIVE = 0,
  TSTOR_ORDER_LITTLE = 1,
  TSTOR_ORDER_BIG = 2
} tstor_byte_order;

/* A new resizable storage of `count` uninitialised elements of `dtype` on `dev`
 * (Torch7's torch.IntStorage(n)). *out is a new reference. */
TSTOR_EXTERN int tstor_typed_new(tstor_context *ctx, tstor_device dev, tstor_dtype dtype,
                                 size_t count, tstor_storage **out);

/* Number of `dtype` elements in s (Torch7's size(), PyTorch's size()).
 * TSTOR_ESIZE when nbytes is not a multiple of the element size. */
TSTOR_EXTERN int tstor_typed_size(const tstor_storage *s, tstor_dtype dtype, size_t *out);

/* Resizes s to `count` elements, keeping the first ones (Torch7's resize()).
 * Same rules as tstor_storage_resize. */
TSTOR_EXTERN int tstor_typed_resize(tstor_storage *s, tstor_dtype dtype, size_t count);

/* A view of elements [offset, offset + count) of base (Torch7's
 * torch.IntStorage(storage, offset, size), with a 0-based offset). *out is a new
 * reference holding one on base; base stays the caller's. */
TSTOR_EXTERN int tstor_typed_view(tstor_storage *base, tstor_dtype dtype, size_t offset,
                                  size_t count, tstor_storage **out);

/* Reads / writes element `index` as raw bytes of the dtype (element_size bytes
 * at value). TSTOR_ERANGE for an index past the end, with the index and size in
 * the detail. */
TSTOR_EXTERN int tstor_typed_get(const tstor_storage *s, tstor_dtype dtype, size_t index,
                                 void *value);
TSTOR_EXTERN int tstor_typed_set(tstor_storage *s, tstor_dtype dtype, size_t index,
                                 const void *value);

/* Element access by number, converting as tstor_dtype_convert does (x[i] = 3.7
 * in an IntStorage stores 3; a complex element reads as its real part).
 * Quantized dtypes read and write their integer codes, as PyTorch does. */
TSTOR_EXTERN int tstor_typed_get_f64(const tstor_storage *s, tstor_dtype dtype,
                                     size_t index, double *out);
TSTOR_EXTERN int tstor_typed_set_f64(tstor_storage *s, tstor_dtype dtype, size_t index,
                                     double value);
TSTOR_EXTERN int tstor_typed_get_i64(const tstor_storage *s, tstor_dtype dtype,
                                     size_t index, int64_t *out);
TSTOR_EXTERN int tstor_typed_set_i64(tstor_storage *s, tstor_dtype dtype, size_t index,
                                     int64_t value);

/* A new storage on `dev` holding `count` values read from the C array `values`
 * of `values_dtype`, converted to `dtype` (Torch7's torch.IntStorage({1,2,3,4})
 * is int32_t v[] = {1, 2, 3, 4} with both dtypes TSTOR_INT32). The caller keeps
 * `values`. *out is a new reference. */
TSTOR_EXTERN int tstor_typed_from_array(tstor_context *ctx, tstor_device dev,
                                        tstor_dtype dtype, const void *values,
                                        tstor_dtype values_dtype, size_t count,
                                        tstor_storage **out);

/* Copies all of s, converted to `out_dtype`, into the C array `out` of
 * `out_count` elements (PyTorch's tolist). TSTOR_ESIZE when out_count is not
 * the storage's element count. */
TSTOR_EXTERN int tstor_typed_to_array(const tstor_storage *s, tstor_dtype dtype, void *out,
                                      tstor_dtype out_dtype, size_t out_count);

/* Sets every element to the element_size bytes at value (Torch7's fill()):
 * `value` points at one element of `dtype`, not at a number of another type
 * (an int32 fill from a double's bytes fills garbage; use the _f64 form). */
TSTOR_EXTERN int tstor_typed_fill(tstor_storage *s, tstor_dtype dtype, const void *value);
/* The same from a number, converted to dtype as tstor_dtype_convert does
 * (PyTorch's storage.fill_(3.7) into an IntStorage fills 3). The opaque
 * dtypes and bcomplex32, which PyTorch 2.15 has no fill kernel for, are
 * refused in its words (TSTOR_EDTYPE, "\"fill_cpu\" not implemented for
 * 'BComplex32'"). */
TSTOR_EXTERN int tstor_typed_fill_f64(tstor_storage *s, tstor_dtype dtype, double value);

/* A new storage on `dev` from nbytes of `buffer` read as elements of `dtype` in
 * byte order `order` (PyTorch's from_buffer). nbytes must be a multiple of the
 * element size (TSTOR_ESIZE). For complex dtypes each half is swapped on its
 * own. The caller keeps the buffer. *out is a new reference. */
TSTOR_EXTERN int tstor_typed_from_buffer(tstor_context *ctx, tstor_device dev,
                                         tstor_dtype dtype, const void *buffer,
                                         size_t nbytes, tstor_byte_order order,
                                         tstor_storage **out);

/* Reverses the bytes of every element in place (each half of a complex element
 * on its own, as PyTorch's byteswap). */
TSTOR_EXTERN int tstor_typed_byteswap(tstor_storage *s, tstor_dtype dtype);

/* Converting copy (Torch7's copy(), PyTorch's copy_): every element of src, read
 * as src_dtype, converted into dst as dst_dtype. The element counts must match
 * (TSTOR_ESIZE). Any two devices. dst and src may be the same bytes only when
 * the two dtypes have the same size. A dst without data (meta) is only
 * size-checked, as tstor_storage_copy does. */
TSTOR_EXTERN int tstor_typed_copy(tstor_storage *dst, tstor_dtype dst_dtype,
                                  const tstor_storage *src, tstor_dtype src_dtype);

/* A new storage on s's device with s's elements converted to `dtype` (PyTorch's
 * .float(), .double(), .type(), Torch7's :float()...). A meta storage gives a
 * meta storage of the new size. *out is a new reference; s stays the caller's. */
TSTOR_EXTERN int tstor_typed_convert(const tstor_storage *s, tstor_dtype dtype,
                                     tstor_dtype new_dtype, tstor_storage **out);

/* Torch7's string(str): makes byte/char storage s exactly `len` bytes long (it
 * must be resizable, or already of that size) and copies the bytes in, NULs
 * included. dtype must be uint8 or int8 (TSTOR_EINVAL otherwise). */
TSTOR_EXTERN int tstor_typed_set_string(tstor_storage *s, tstor_dtype dtype, const void *bytes,
                                        size_t len);

/* Torch7's string(): copies the storage's bytes into buf (at most `size`) and
 * sets *len to the storage's byte size. buf NULL with size 0 asks for the
 * length alone: 0 with *len set, as snprintf(NULL, 0, ...) answers. A buffer
 * too small is TSTOR_ERANGE, with *len set. No NUL is appended. */
TSTOR_EXTERN int tstor_typed_get_string(const tstor_storage *s, tstor_dtype dtype, void *buf,
                                        size_t size, size_t *len);

/* ---------------------------------------------------------------- printing */

enum {
  /* As Torch7 prints: one format for all elements, chosen from their
   * magnitudes as Torch7's Storage__printformat does (integral values as
   * integers right-aligned, "%7.4f" and the like otherwise, "%11.4e" over wide
   * ranges, a scale factor line such as "100000 *" first for large or small
   * values, "%f" when a NaN is present; complex dtypes, which Torch7 lacked,
   * as Python's reprs right-aligned), footer "[torch.IntStorage of size 4]".
   * Without it, as PyTorch: Python's repr of each element after one space,
   * "[torch.storage.TypedStorage(dtype=torch.int32, device=cpu) of size 4]" */
  TSTOR_PRINT_TORCH7 = 1 << 0,
  /* As PyTorch prints an UntypedStorage: each byte (dtype must be uint8),
   * footer "[torch.storage.UntypedStorage(device=cpu) of size 3]". */
  TSTOR_PRINT_UNTYPED = 1 << 1
};

/* Writes one element as PyTorch's str() of it would ("1", "1.5", "-0.0",
 * "nan", "1e+20", "True", "(1+2j)"; a float element is shown as the shortest
 * decimal that reads back to the same double) into buf, NUL-terminated. *len,
 * when non-NULL, gets the length without the NUL. TSTOR_ERANGE when it does not
 * fit (64 bytes always do); TSTOR_EDTYPE for an opaque dtype, which has no
 * value PyTorch reads. */
TSTOR_EXTERN int tstor_dtype_format(tstor_dtype dtype, const void *value, char *buf,
                                    size_t size, size_t *len);

/* Prints s as Torch7 or PyTorch print storages (TSTOR_PRINT_*): each element
 * on its own line, then a footer naming the dtype, device and size. A storage
 * without data (meta) prints "..." and the footer. The opaque dtypes are
 * refused as PyTorch 2.x refuses them (TSTOR_EDTYPE, nothing written): a
 * float4_e2m1fn_x2 storage with elements, and every bits storage. */
TSTOR_EXTERN int tstor_typed_print(FILE *f, const tstor_storage *s, tstor_dtype dtype,
                                   unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* TSTOR_TYPED_H */
