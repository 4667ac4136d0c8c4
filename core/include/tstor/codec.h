/* tstor codec: float16, bfloat16 and the float8 formats (e8m0 included) to
 * and from float32, and the float-to-integer casts, one element at a time,
 * bit for bit as tstor_dtype_convert (and so PyTorch's CPU tensor.to) gives
 * them.
 *
 * Why a header of static inline functions, and why installed: the core's
 * host loops (core/convert.c) and the cuda backend's kernels (kernels.cu,
 * built by nvcc) must give the same bits, so they share this one copy of
 * the formulas rather than two that could drift. A backend sees only the
 * installed headers, so the shared copy has to be one of them; and an
 * outside backend author whose device converts dtypes needs exactly the
 * same conversions to pass the conformance checks, so installing it is the
 * point, not a cost. Nothing here is a library symbol: every function is
 * static inline, so using the header adds no link dependency and no ABI.
 *
 * The code is the subset of C that C++ and nvcc also compile: fixed-width
 * integers, memcpy for bit casts on the host (the CUDA intrinsics on the
 * device), no _Generic, no designated initialisers. Under nvcc every
 * function is __host__ __device__. The formulas are integer operations and
 * IEEE round-to-nearest float32 additions and conversions with subnormals
 * kept: device code including this header must not be built with
 * --use_fast_math or -ftz=true. Every select is written as ?: on values
 * already computed, so loops over these functions vectorise.
 *
 * The NaN each encoder writes, and how each decoder widens a NaN, are
 * PyTorch's; tstor/typed.h (tstor_dtype_convert) lists them. */
#ifndef TSTOR_CODEC_H
#define TSTOR_CODEC_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define TSTOR_CODEC_FN static __host__ __device__ __forceinline__
#else
#define TSTOR_CODEC_FN static inline
#endif

/* The NaN bfloat16 gets from float32 and float64 (PyTorch's vectorised CPU
 * loops) and from float16, complex and the float8s (its scalar loops): the
 * second argument of tstor_f32_to_bf16. */
#define TSTOR_BF16_NAN_VECTOR ((uint16_t)0xffffu)
#define TSTOR_BF16_NAN_SCALAR ((uint16_t)0x7fc0u)

/* ------------------------------------------------------------ bit access */

TSTOR_CODEC_FN uint32_t tstor__codec_f2u(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

TSTOR_CODEC_FN float tstor__codec_u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/* A round-to-nearest float32 addition the device compiler may not contract
 * into anything else. */
TSTOR_CODEC_FN float tstor__codec_add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/* ------------------------------------------------------- float16 (binary16) */

/* Exact. Infinity and NaN keep an all-ones exponent; a NaN comes out quiet,
 * with its payload, as the conversion instructions and PyTorch give it. */
TSTOR_CODEC_FN float tstor_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t a = h & 0x7fffu;
  /* Normal: rebias the exponent by 127 - 15. */
  uint32_t normal = (a << 13) + 0x38000000u;
  uint32_t special = 0x7f800000u | (a << 13) | (a > 0x7c00u ? 0x00400000u : 0u);
  /* Subnormal (and zero): a is the value in units of 2^-24, exact in float. */
  uint32_t sub = tstor__codec_f2u((float)a * 0x1p-24f);
  uint32_t r = a < 0x0400u ? sub : a >= 0x7c00u ? special : normal;
  return tstor__codec_u2f(sign | r);
}

/* Round to nearest even; 65520 and up become infinity. A NaN stays a NaN
 * with its sign and the top ten bits of its payload, made quiet, as x86's
 * vcvtps2ph and so torch 2.x give it (0x7fa00000 becomes 0x7f00; PyTorch
 * 1.13 wrote 0x7e00). */
TSTOR_CODEC_FN uint16_t tstor_f32_to_f16(float f) {
  uint32_t x = tstor__codec_f2u(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  /* Normal result: drop 13 mantissa bits, rounding to nearest even; a carry
   * out of the mantissa correctly bumps the exponent. */
  uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  /* Subnormal result: adding 0.5 (whose ulp is 2^-24, the float16 subnormal
   * step) lets the FPU round to nearest even. */
  uint32_t sub = tstor__codec_f2u(tstor__codec_add_rn(tstor__codec_u2f(a), 0.5f)) - 0x3f000000u;
  uint32_t r = a < 0x38800000u ? sub : normal;
  r = a >= 0x477ff000u ? 0x7c00u : r;
  r = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : r;
  return (uint16_t)(sign | r);
}

/* ------------------------------------------------------------- bfloat16 */

/* Exact; NaNs unchanged. */
TSTOR_CODEC_FN float tstor_bf16_to_f32(uint16_t h) { return tstor__codec_u2f((uint32_t)h << 16); }

/* Round to nearest even; NaN becomes `nan` (TSTOR_BF16_NAN_VECTOR or
 * TSTOR_BF16_NAN_SCALAR, by the source dtype). */
TSTOR_CODEC_FN uint16_t tstor_f32_to_bf16(float f, uint16_t nan) {
  uint32_t x = tstor__codec_f2u(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

/* --------------------------------------------------------------- float8 */

/* A normal encoding of |f| (bits a), as PyTorch 2.x rounds it: to nearest
 * even, where rounding past the largest finite value gives the overflow code
 * of the format. `ebias` is 127 minus the format's bias, `mbits` its mantissa
 * width. */
TSTOR_CODEC_FN uint32_t tstor__codec_fp8_round(uint32_t a, uint32_t ebias, uint32_t mbits) {
  return (a - (ebias << 23) + ((1u << (22 - mbits)) - 1u) + ((a >> (23 - mbits)) & 1u)) >>
         (23 - mbits);
}

/* A subnormal encoding: adding a power of two whose ulp is the format's
 * smallest subnormal lets the FPU round to nearest even. */
TSTOR_CODEC_FN uint32_t tstor__codec_fp8_sub(uint32_t a, float magic) {
  return tstor__codec_f2u(tstor__codec_add_rn(tstor__codec_u2f(a), magic)) -
         tstor__codec_f2u(magic);
}

/* What rounds past 448, infinities included, saturates to 448 (0x7e); NaN
 * becomes 0x7f; each with the sign. */
TSTOR_CODEC_FN uint8_t tstor_f32_to_e4m3fn(float f) {
  uint32_t x = tstor__codec_f2u(f), a = x & 0x7fffffffu;
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t r = a < 0x3c800000u ? tstor__codec_fp8_sub(a, 16384.0f) /* below 2^-6; ulp 2^-9 */
                               : tstor__codec_fp8_round(a, 120, 3);
  r = a > 0x7f800000u ? 0x7fu : r > 0x7eu ? 0x7eu : r;
  return (uint8_t)(sign | r);
}

/* The four fp8 encoders stay separate: their shared steps are the helpers
 * above, what differs (thresholds, saturation, NaN and negative-zero rules) is
 * each format's own, and each is inlined per element on host and device.
 * What rounds past 57344, infinity included, becomes infinity; NaN 0x7f with
 * the sign. */
TSTOR_CODEC_FN uint8_t tstor_f32_to_e5m2(float f) {
  uint32_t x = tstor__codec_f2u(f), a = x & 0x7fffffffu;
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t r = a < 0x38800000u ? tstor__codec_fp8_sub(a, 128.0f) /* below 2^-14; ulp 2^-16 */
                               : tstor__codec_fp8_round(a, 112, 2);
  r = a >= 0x47800000u ? 0x7cu : r;
  r = a > 0x7f800000u ? 0x7fu : r;
  return (uint8_t)(sign | r);
}

/* No negative zero; 256 and up, infinities and NaN become NaN (0x80), as does
 * a rounding into 0x80. */
TSTOR_CODEC_FN uint8_t tstor_f32_to_e4m3fnuz(float f) {
  uint32_t x = tstor__codec_f2u(f), a = x & 0x7fffffffu;
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t r = a < 0x3c000000u ? tstor__codec_fp8_sub(a, 8192.0f) /* below 2^-7; ulp 2^-10 */
                               : tstor__codec_fp8_round(a, 119, 3);
  r = r == 0 ? 0 : sign | r;
  return (uint8_t)(a >= 0x43800000u ? 0x80u : r);
}

/* As e4m3fnuz: 65536 and up, infinities and NaN become 0x80. */
TSTOR_CODEC_FN uint8_t tstor_f32_to_e5m2fnuz(float f) {
  uint32_t x = tstor__codec_f2u(f), a = x & 0x7fffffffu;
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t r = a < 0x38000000u ? tstor__codec_fp8_sub(a, 64.0f) /* below 2^-15; ulp 2^-17 */
                               : tstor__codec_fp8_round(a, 111, 2);
  r = r == 0 ? 0 : sign | r;
  return (uint8_t)(a >= 0x47800000u ? 0x80u : r);
}

/* A finite float8 value: exponent field rebiased by `ebias`, mantissa
 * shifted up; subnormals are m units of `sub_unit`. */
TSTOR_CODEC_FN float tstor__codec_fp8_decode(uint8_t x, uint32_t mbits, uint32_t ebias,
                                              float sub_unit) {
  uint32_t sign = (uint32_t)(x & 0x80u) << 24;
  uint32_t e = (x & 0x7fu) >> mbits, m = x & ((1u << mbits) - 1u);
  uint32_t normal = ((e + ebias) << 23) | (m << (23 - mbits));
  uint32_t sub = tstor__codec_f2u((float)m * sub_unit);
  return tstor__codec_u2f(sign | (e == 0 ? sub : normal));
}

/* Exact. NaNs come out as PyTorch 2.x's c10 gives them: 0x7ff00000 with the
 * sign for e4m3fn, the float16 NaN of the same top byte for e5m2, and
 * 0x7f800001 for the fnuz formats. */
TSTOR_CODEC_FN float tstor_e4m3fn_to_f32(uint8_t x) {
  return (x & 0x7fu) == 0x7fu ? tstor__codec_u2f(((uint32_t)(x & 0x80u) << 24) | 0x7ff00000u)
                              : tstor__codec_fp8_decode(x, 3, 120, 0x1p-9f);
}
TSTOR_CODEC_FN float tstor_e5m2_to_f32(uint8_t x) { return tstor_f16_to_f32((uint16_t)(x << 8)); }
TSTOR_CODEC_FN float tstor_e4m3fnuz_to_f32(uint8_t x) {
  return x == 0x80u ? tstor__codec_u2f(0x7f800001u) : tstor__codec_fp8_decode(x, 3, 119, 0x1p-10f);
}
TSTOR_CODEC_FN float tstor_e5m2fnuz_to_f32(uint8_t x) {
  return x == 0x80u ? tstor__codec_u2f(0x7f800001u) : tstor__codec_fp8_decode(x, 2, 111, 0x1p-17f);
}

/* ------------------------------------------------------- float8_e8m0fnu */

/* The OCP MX scale 2^(x - 127): no sign, no zero, 0xff is NaN. The code is
 * float32's exponent field rounded by its mantissa to nearest, ties to even,
 * where a normal's hidden bit is the last kept bit and a subnormal's is 0.
 * The sign is dropped (-2 becomes 2, 0 becomes 2^-127); infinities, NaN and
 * what rounds past 2^127 become 0xff. */
TSTOR_CODEC_FN uint8_t tstor_f32_to_e8m0(float f) {
  uint32_t x = tstor__codec_f2u(f), e = (x >> 23) & 0xffu;
  uint32_t up = ((x >> 22) & 1u) & ((uint32_t)((x & 0x3fffffu) != 0) | (uint32_t)(e != 0));
  return (uint8_t)(e == 0xffu ? 0xffu : e + up);
}

/* Exact: 0 is 2^-127, a float32 subnormal; NaN comes out as 0x7f800001, as
 * PyTorch 2.x's c10 decodes it. */
TSTOR_CODEC_FN float tstor_e8m0_to_f32(uint8_t x) {
  return tstor__codec_u2f(x == 0 ? 0x00400000u : x == 0xffu ? 0x7f800001u : (uint32_t)x << 23);
}

/* --------------------------------------------------- float to integer casts */

/* x86's cvtt*: truncation toward zero, and the "integer indefinite" value (the
 * minimum) for NaN and anything that does not fit, on every machine and with
 * no undefined behaviour. */
TSTOR_CODEC_FN int32_t tstor_f32_to_i32(float v) {
  return v >= -0x1p31f && v < 0x1p31f ? (int32_t)v : INT32_MIN;
}
TSTOR_CODEC_FN int64_t tstor_f32_to_i64(float v) {
  return v >= -0x1p63f && v < 0x1p63f ? (int64_t)v : INT64_MIN;
}
TSTOR_CODEC_FN int32_t tstor_f64_to_i32(double v) {
  return v > -2147483649.0 && v < 2147483648.0 ? (int32_t)v : INT32_MIN;
}
TSTOR_CODEC_FN int64_t tstor_f64_to_i64(double v) {
  return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}

/* To the unsigned types wider than uint8 C leaves the cast of a negative or
 * too large value undefined too, and PyTorch's result is what its compiler's
 * code does. Below 2^(N-1) that is the signed cast above (-1.0 becomes all
 * ones, NaN the top bit alone); from 2^(N-1) up the value less 2^(N-1) is
 * cast and the top bit set again, so that 2^N and more become 0. Some of
 * PyTorch's loops to uint32 take the low half of the int64 cast instead;
 * tstor/typed.h says which. */
TSTOR_CODEC_FN uint32_t tstor_f32_to_u32(float v) {
  uint32_t hi = v < 0x1p32f ? (uint32_t)tstor_f32_to_i64(v) : 0u;
  return v >= 0x1p31f ? hi : (uint32_t)tstor_f32_to_i32(v);
}
TSTOR_CODEC_FN uint32_t tstor_f64_to_u32(double v) {
  uint32_t hi = v < 0x1p32 ? (uint32_t)tstor_f64_to_i64(v) : 0u;
  return v >= 0x1p31 ? hi : (uint32_t)tstor_f64_to_i32(v);
}
TSTOR_CODEC_FN uint64_t tstor_f32_to_u64(float v) {
  uint64_t hi = v < 0x1p64f ? (uint64_t)tstor_f32_to_i64(v - 0x1p63f) + 0x8000000000000000u : 0u;
  return v >= 0x1p63f ? hi : (uint64_t)tstor_f32_to_i64(v);
}
TSTOR_CODEC_FN uint64_t tstor_f64_to_u64(double v) {
  uint64_t hi = v < 0x1p64 ? (uint64_t)tstor_f64_to_i64(v - 0x1p63) + 0x8000000000000000u : 0u;
  return v >= 0x1p63 ? hi : (uint64_t)tstor_f64_to_i64(v);
}

#endif /* TSTOR_CODEC_H */
