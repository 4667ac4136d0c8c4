/* Host dtype conversion: one loop per (source, destination) pair, each giving
 * what PyTorch's CPU tensor.to(dtype) gives, bit for bit.
 *
 * PyTorch converts with C++ static_cast through its scalar classes, and those
 * define the results we reproduce:
 *   - float16, bfloat16 and the float8 formats hold a float32 value: they are
 *     read as float32 and written from float32, so float64 and int64 values
 *     are rounded to float32 first (two roundings, as in PyTorch).
 *   - complex sources give their real part to real destinations but bool,
 *     which is true when either part is nonzero.
 *   - float-to-integer casts that C leaves undefined are done the way x86's
 *     cvtt* instructions do them (see typed.h), written out so that the result
 *     is the same on every machine and sanitizers see no undefined behaviour.
 *
 * Every loop is a load (to int64_t, float or double), a store from that value
 * and nothing else, with no branches the vectoriser cannot turn into selects;
 * typed.am compiles this file with the vectoriser on. */
#include "typed/typed_internal.h"

#include <tstor/codec.h>

#include <stdlib.h>
#include <string.h>

/* The scalar formulas for float16, bfloat16 and float8 and the float to
 * integer casts are tstor/codec.h's, which the cuda kernels share. */
static inline uint16_t f32_to_bf16_vector(float f) {
  return tstor_f32_to_bf16(f, TSTOR_BF16_NAN_VECTOR);
}
static inline uint16_t f32_to_bf16_scalar(float f) {
  return tstor_f32_to_bf16(f, TSTOR_BF16_NAN_SCALAR);
}

/* ------------------------------------------------------ loads and stores */

typedef struct { uint16_t re, im; } c32_t;
typedef struct { float re, im; } c64_t;
typedef struct { double re, im; } c128_t;

/* For each dtype: the C type it is read as (LT), the type it is written as
 * (ST: integers are written unsigned so that wrapping is defined C), a load
 * giving int64_t, uint64_t (uint64 alone), float or double, the imaginary
 * part's load (0 for reals) and a store from each of the four, which also
 * sees the source element as read (x). */
typedef uint8_t bool_lt, bool_st;
typedef uint8_t u8_lt, u8_st;
typedef int8_t i8_lt;
typedef uint8_t i8_st;
typedef int16_t i16_lt;
typedef uint16_t i16_st;
typedef int32_t i32_lt;
typedef uint32_t i32_st;
typedef int64_t i64_lt;
typedef uint64_t i64_st;
typedef uint16_t u16_lt, u16_st;
typedef uint32_t u32_lt, u32_st;
typedef uint64_t u64_lt, u64_st;
typedef uint16_t f16_lt, f16_st, bf16_lt, bf16_st;
typedef float f32_lt, f32_st;
typedef double f64_lt, f64_st;
typedef c32_t c32_lt, c32_st, bc32_lt, bc32_st;
typedef c64_t c64_lt, c64_st;
typedef c128_t c128_lt, c128_st;
typedef uint8_t e5m2_lt, e5m2_st, e4m3fn_lt, e4m3fn_st, e5m2fnuz_lt, e5m2fnuz_st, e4m3fnuz_lt,
    e4m3fnuz_st, e8m0_lt, e8m0_st;

#define LOAD_bool(x) ((int64_t)((x) != 0))
#define LOAD_u8(x) ((int64_t)(x))
#define LOAD_i8(x) ((int64_t)(x))
#define LOAD_i16(x) ((int64_t)(x))
#define LOAD_i32(x) ((int64_t)(x))
#define LOAD_i64(x) ((int64_t)(x))
#define LOAD_u16(x) ((int64_t)(x))
#define LOAD_u32(x) ((int64_t)(x))
#define LOAD_u64(x) ((uint64_t)(x))
#define LOAD_f16(x) tstor_f16_to_f32(x)
#define LOAD_bf16(x) tstor_bf16_to_f32(x)
#define LOAD_f32(x) (x)
#define LOAD_f64(x) (x)
#define LOAD_c32(x) tstor_f16_to_f32((x).re)
#define LOAD_bc32(x) tstor_bf16_to_f32((x).re)
#define LOAD_c64(x) ((x).re)
#define LOAD_c128(x) ((x).re)
#define LOAD_e5m2(x) tstor_e5m2_to_f32(x)
#define LOAD_e4m3fn(x) tstor_e4m3fn_to_f32(x)
#define LOAD_e5m2fnuz(x) tstor_e5m2fnuz_to_f32(x)
#define LOAD_e4m3fnuz(x) tstor_e4m3fnuz_to_f32(x)
#define LOAD_e8m0(x) tstor_e8m0_to_f32(x)

#define IM_bool(x) ((int64_t)0)
#define IM_u8(x) ((int64_t)0)
#define IM_i8(x) ((int64_t)0)
#define IM_i16(x) ((int64_t)0)
#define IM_i32(x) ((int64_t)0)
#define IM_i64(x) ((int64_t)0)
#define IM_u16(x) ((int64_t)0)
#define IM_u32(x) ((int64_t)0)
#define IM_u64(x) ((uint64_t)0)
#define IM_f16(x) 0.0f
#define IM_bf16(x) 0.0f
#define IM_f32(x) 0.0f
#define IM_f64(x) 0.0
#define IM_c32(x) tstor_f16_to_f32((x).im)
#define IM_bc32(x) tstor_bf16_to_f32((x).im)
#define IM_c64(x) ((x).im)
#define IM_c128(x) ((x).im)
#define IM_e5m2(x) 0.0f
#define IM_e4m3fn(x) 0.0f
#define IM_e5m2fnuz(x) 0.0f
#define IM_e4m3fnuz(x) 0.0f
#define IM_e8m0(x) 0.0f

/* A store chosen by the type of the loaded value. */
#define STORE_BY(v, fi, fu, ff, fd) \
  _Generic((v), int64_t : fi, uint64_t : fu, float : ff, double : fd)(v)

static inline uint8_t bool_i(int64_t v) { return v != 0; }
static inline uint8_t bool_u(uint64_t v) { return v != 0; }
static inline uint8_t bool_f(float v) { return v != 0; }
static inline uint8_t bool_d(double v) { return v != 0; }
/* uint8 goes through int64 in PyTorch, so that -1.0 is 255 on every machine. */
static inline uint8_t u8_i(int64_t v) { return (uint8_t)v; }
static inline uint8_t u8_u(uint64_t v) { return (uint8_t)v; }
static inline uint8_t u8_f(float v) { return (uint8_t)tstor_f32_to_i64(v); }
static inline uint8_t u8_d(double v) { return (uint8_t)tstor_f64_to_i64(v); }
static inline uint8_t i8_i(int64_t v) { return (uint8_t)v; }
static inline uint8_t i8_u(uint64_t v) { return (uint8_t)v; }
static inline uint8_t i8_f(float v) { return (uint8_t)tstor_f32_to_i32(v); }
static inline uint8_t i8_d(double v) { return (uint8_t)tstor_f64_to_i32(v); }
/* int16 and uint16 both go through int32. */
static inline uint16_t i16_i(int64_t v) { return (uint16_t)v; }
static inline uint16_t i16_u(uint64_t v) { return (uint16_t)v; }
static inline uint16_t i16_f(float v) { return (uint16_t)tstor_f32_to_i32(v); }
static inline uint16_t i16_d(double v) { return (uint16_t)tstor_f64_to_i32(v); }
static inline uint32_t i32_i(int64_t v) { return (uint32_t)v; }
static inline uint32_t i32_u(uint64_t v) { return (uint32_t)v; }
static inline uint32_t i32_f(float v) { return (uint32_t)tstor_f32_to_i32(v); }
static inline uint32_t i32_d(double v) { return (uint32_t)tstor_f64_to_i32(v); }
static inline uint64_t i64_i(int64_t v) { return (uint64_t)v; }
static inline uint64_t i64_u(uint64_t v) { return v; }
static inline uint64_t i64_f(float v) { return (uint64_t)tstor_f32_to_i64(v); }
static inline uint64_t i64_d(double v) { return (uint64_t)tstor_f64_to_i64(v); }
/* uint32 from a float: PyTorch's vector loops (u32v) or the low half of the
 * int64 cast (u32s), by source dtype (RULES_ below). */
static inline uint32_t u32v_f(float v) { return tstor_f32_to_u32(v); }
static inline uint32_t u32v_d(double v) { return tstor_f64_to_u32(v); }
static inline uint32_t u32s_f(float v) { return (uint32_t)tstor_f32_to_i64(v); }
static inline uint32_t u32s_d(double v) { return (uint32_t)tstor_f64_to_i64(v); }
static inline uint64_t u64_f(float v) { return tstor_f32_to_u64(v); }
static inline uint64_t u64_d(double v) { return tstor_f64_to_u64(v); }
static inline float f32_i(int64_t v) { return (float)v; }
static inline float f32_u(uint64_t v) { return (float)v; }
static inline float f32_f(float v) { return v; }
static inline float f32_d(double v) { return (float)v; }
static inline double f64_i(int64_t v) { return (double)v; }
static inline double f64_u(uint64_t v) { return (double)v; }
static inline double f64_f(float v) { return (double)v; }
static inline double f64_d(double v) { return v; }

/* The float32-based formats: everything reaches them as a float32. */
#define VIA_F32(name, type, enc)                                    \
  static inline type name##_i(int64_t v) { return enc((float)v); }  \
  static inline type name##_u(uint64_t v) { return enc((float)v); } \
  static inline type name##_f(float v) { return enc(v); }           \
  static inline type name##_d(double v) { return enc((float)v); }
VIA_F32(f16, uint16_t, tstor_f32_to_f16)
VIA_F32(bf16, uint16_t, f32_to_bf16_vector)
VIA_F32(bf16s, uint16_t, f32_to_bf16_scalar)
VIA_F32(e5m2, uint8_t, tstor_f32_to_e5m2)
VIA_F32(e4m3fn, uint8_t, tstor_f32_to_e4m3fn)
VIA_F32(e5m2fnuz, uint8_t, tstor_f32_to_e5m2fnuz)
VIA_F32(e4m3fnuz, uint8_t, tstor_f32_to_e4m3fnuz)
VIA_F32(e8m0, uint8_t, tstor_f32_to_e8m0)
#undef VIA_F32

/* What PyTorch's loops do differently by source dtype, one row each:
 *   - the NaN a bfloat16 gets: all ones from its vectorised loops (VECTOR),
 *     0x7fc0 from its scalar ones (SCALAR: float16, complex, the float8s);
 *   - a NaN into an integer dtype: the cast's value (KEEP), or 0 from the
 *     formats whose one NaN code PyTorch's compiler folds (FNUZ, E8M0);
 *   - a float into uint32: the vector loops' cast (V, tstor_f32_to_u32) or
 *     the low half of the int64 cast (S), as PyTorch's loop for the source
 *     computes it on x86 with AVX2 or AVX-512. */
#define RULES_bool VECTOR, KEEP, V
#define RULES_u8 VECTOR, KEEP, V
#define RULES_i8 VECTOR, KEEP, V
#define RULES_i16 VECTOR, KEEP, V
#define RULES_i32 VECTOR, KEEP, V
#define RULES_i64 VECTOR, KEEP, V
#define RULES_u16 VECTOR, KEEP, V
#define RULES_u32 VECTOR, KEEP, V
#define RULES_u64 VECTOR, KEEP, V
#define RULES_f16 SCALAR, KEEP, S
#define RULES_bf16 VECTOR, KEEP, V
#define RULES_f32 VECTOR, KEEP, V
#define RULES_f64 VECTOR, KEEP, V
#define RULES_c32 SCALAR, KEEP, S
#define RULES_bc32 SCALAR, KEEP, V
#define RULES_c64 SCALAR, KEEP, V
#define RULES_c128 SCALAR, KEEP, V
#define RULES_e5m2 SCALAR, KEEP, S
#define RULES_e4m3fn SCALAR, KEEP, S
#define RULES_e5m2fnuz SCALAR, FNUZ, S
#define RULES_e4m3fnuz SCALAR, FNUZ, S
#define RULES_e8m0 SCALAR, E8M0, S
#define FIRST(...) FIRST_(__VA_ARGS__)
#define FIRST_(a, ...) a
#define SECOND(...) SECOND_(__VA_ARGS__)
#define SECOND_(a, b, ...) b
#define THIRD(...) THIRD_(__VA_ARGS__)
#define THIRD_(a, b, c, ...) c
#define CAT(a, b) CAT_(a, b)
#define CAT_(a, b) a##b

/* The integer r stored for the element x of S; a folded NaN is told by its
 * code (a select on the result costs the fnuz loops least). */
#define INT_OUT(S, r, x) CAT(NAN_, SECOND(RULES_##S))(r, x)
#define NAN_KEEP(r, x) (r)
#define NAN_FNUZ(r, x) ((x) == 0x80 ? 0 : (r))
#define NAN_E8M0(r, x) ((x) == 0xff ? 0 : (r))

/* A complex element is true when either part is nonzero (torch 2.x; 1.13
 * looked at the real part only); a real one's imaginary part is a constant 0. */
#define STORE_bool(S, re, im, x)                            \
  ((uint8_t)(STORE_BY(re, bool_i, bool_u, bool_f, bool_d) | \
             STORE_BY(im, bool_i, bool_u, bool_f, bool_d)))
#define STORE_u8(S, re, im, x) INT_OUT(S, STORE_BY(re, u8_i, u8_u, u8_f, u8_d), x)
#define STORE_i8(S, re, im, x) INT_OUT(S, STORE_BY(re, i8_i, i8_u, i8_f, i8_d), x)
#define STORE_i16(S, re, im, x) INT_OUT(S, STORE_BY(re, i16_i, i16_u, i16_f, i16_d), x)
#define STORE_i32(S, re, im, x) INT_OUT(S, STORE_BY(re, i32_i, i32_u, i32_f, i32_d), x)
#define STORE_i64(S, re, im, x) INT_OUT(S, STORE_BY(re, i64_i, i64_u, i64_f, i64_d), x)
#define STORE_u16(S, re, im, x) INT_OUT(S, STORE_BY(re, i16_i, i16_u, i16_f, i16_d), x)
#define STORE_u32(S, re, im, x) INT_OUT(S, CAT(U32_, THIRD(RULES_##S))(re), x)
#define U32_V(v) STORE_BY(v, i32_i, i32_u, u32v_f, u32v_d)
#define U32_S(v) STORE_BY(v, i32_i, i32_u, u32s_f, u32s_d)
#define STORE_u64(S, re, im, x) INT_OUT(S, STORE_BY(re, i64_i, i64_u, u64_f, u64_d), x)
#define STORE_f16(S, re, im, x) STORE_BY(re, f16_i, f16_u, f16_f, f16_d)
#define STORE_bf16(S, re, im, x) CAT(BF16_, FIRST(RULES_##S))(re)
#define BF16_VECTOR(re) STORE_BY(re, bf16_i, bf16_u, bf16_f, bf16_d)
#define BF16_SCALAR(re) STORE_BY(re, bf16s_i, bf16s_u, bf16s_f, bf16s_d)
#define STORE_f32(S, re, im, x) STORE_BY(re, f32_i, f32_u, f32_f, f32_d)
#define STORE_f64(S, re, im, x) STORE_BY(re, f64_i, f64_u, f64_f, f64_d)
#define STORE_e5m2(S, re, im, x) STORE_BY(re, e5m2_i, e5m2_u, e5m2_f, e5m2_d)
#define STORE_e4m3fn(S, re, im, x) STORE_BY(re, e4m3fn_i, e4m3fn_u, e4m3fn_f, e4m3fn_d)
#define STORE_e5m2fnuz(S, re, im, x) STORE_BY(re, e5m2fnuz_i, e5m2fnuz_u, e5m2fnuz_f, e5m2fnuz_d)
#define STORE_e4m3fnuz(S, re, im, x) STORE_BY(re, e4m3fnuz_i, e4m3fnuz_u, e4m3fnuz_f, e4m3fnuz_d)
#define STORE_e8m0(S, re, im, x) STORE_BY(re, e8m0_i, e8m0_u, e8m0_f, e8m0_d)
/* Complex destinations: each part as the matching real dtype would store it
 * (the parts of complex32 as float16). */
#define STORE_c32(S, re, im, x) ((c32_t){STORE_f16(S, re, 0, x), STORE_f16(S, im, 0, x)})
#define STORE_bc32(S, re, im, x) ((c32_t){BF16_SCALAR(re), BF16_SCALAR(im)})
#define STORE_c64(S, re, im, x) ((c64_t){STORE_f32(S, re, 0, x), STORE_f32(S, im, 0, x)})
#define STORE_c128(S, re, im, x) ((c128_t){STORE_f64(S, re, 0, x), STORE_f64(S, im, 0, x)})

/* --------------------------------------------------------------- kernels */

typedef void (*cvt_fn)(void *dst, const void *src, size_t n);

/* The loops between the real dtypes PyTorch programs convert most are built
 * twice, for AVX2 and for the baseline, and the loader picks one for the
 * machine (GCC's target_clones, an ifunc): twice the vector width for the
 * arithmetic ones (float16, bfloat16, float-to-int). */
#define CLONES_11 TSTOR__AVX2_CLONES
#define CLONES_10
#define CLONES_01
#define CLONES_00
#define CLONES_(a, b) CLONES_##a##b
#define CLONES(a, b) CLONES_(a, b)
#define HOT_u8 1
#define HOT_i8 1
#define HOT_i16 1
#define HOT_i32 1
#define HOT_i64 1
#define HOT_f16 1
#define HOT_bf16 1
#define HOT_f32 1
#define HOT_f64 1
#define HOT_bool 0
#define HOT_c32 0
#define HOT_bc32 0
#define HOT_c64 0
#define HOT_c128 0
#define HOT_e5m2 0
#define HOT_e4m3fn 0
#define HOT_e5m2fnuz 0
#define HOT_e4m3fnuz 0
#define HOT_u16 0
#define HOT_u32 0
#define HOT_u64 0
#define HOT_e8m0 0

#define KERNEL(S, D)                                                \
  CLONES(HOT_##S, HOT_##D)                                          \
  static void cvt_##S##_##D(void *dst, const void *src, size_t n) { \
    const S##_lt *s = src;                                          \
    D##_st *d = dst;                                                \
    for (size_t i = 0; i < n; i++) {                                \
      S##_lt x = s[i];                                              \
      d[i] = STORE_##D(S, LOAD_##S(x), IM_##S(x), x);               \
    }                                                               \
  }

/* The table of loops is the cross product of the dtypes that convert (every
 * kind but quantized and opaque) in TSTOR_DTYPE_MAP. A macro cannot expand itself, so
 * the inner expansion is held back (OBSTRUCT: past the two scans of the
 * outer row, its CONVERTS_ filter's argument and its result) until the outer
 * expansion is done, and EXPAND then rescans the result. */
#define CONVERTS_BOOL(...) __VA_ARGS__
#define CONVERTS_UNSIGNED(...) __VA_ARGS__
#define CONVERTS_SIGNED(...) __VA_ARGS__
#define CONVERTS_FLOAT(...) __VA_ARGS__
#define CONVERTS_COMPLEX(...) __VA_ARGS__
#define CONVERTS_QUANTIZED(...)
#define CONVERTS_OPAQUE(...)
#define EMPTY()
#define DEFER(m) m EMPTY()
#define OBSTRUCT(m) m DEFER(EMPTY)()
#define EXPAND(...) __VA_ARGS__
#define DTYPE_MAP_AGAIN() TSTOR_DTYPE_MAP

/* Same-dtype pairs get kernels too (unused: those are copies), which keeps the
 * table generation a plain cross product. */
#define DEF_DST(S, e, v, D, name, alias, legacy, st, size, kind, ...) \
  CONVERTS_##kind(KERNEL(S, D))
#define DEF_SRC(unused, e, v, S, name, alias, legacy, st, size, kind, ...) \
  CONVERTS_##kind(OBSTRUCT(DTYPE_MAP_AGAIN)()(DEF_DST, S))
EXPAND(TSTOR_DTYPE_MAP(DEF_SRC, _))

#define ROW_DST(S, e, v, D, name, alias, legacy, st, size, kind, ...) \
  CONVERTS_##kind([TSTOR_##e] = cvt_##S##_##D, )
#define ROW_SRC(unused, e, v, S, name, alias, legacy, st, size, kind, ...) \
  CONVERTS_##kind([TSTOR_##e] = {OBSTRUCT(DTYPE_MAP_AGAIN)()(ROW_DST, S)}, )
static const cvt_fn kernels[TSTOR_DTYPE_END][TSTOR_DTYPE_END] = {
    EXPAND(TSTOR_DTYPE_MAP(ROW_SRC, _))};

/* complex32 to float16 and bcomplex32 to bfloat16 copy the real half as it
 * is, and bfloat16 to bcomplex32 is the value with a +0 imaginary part
 * (PyTorch moves the Half or BFloat16 without a float32 round trip, so NaN
 * payloads survive). */
static void cvt_real_half_bits(void *dst, const void *src, size_t n) {
  const c32_t *s = src;
  uint16_t *d = dst;
  for (size_t i = 0; i < n; i++) d[i] = s[i].re;
}
static void cvt_bf16_bc32_bits(void *dst, const void *src, size_t n) {
  const uint16_t *s = src;
  c32_t *d = dst;
  for (size_t i = 0; i < n; i++) d[i] = (c32_t){s[i], 0};
}

#ifdef TSTOR__CLONES
/* The conversions programs run most, written with AVX2 (and F16C)
 * intrinsics for machines that have them. They give the results of the
 * loops above bit for bit but need fewer instructions: x86's conversions
 * already produce the integer-indefinite value the C code selects by hand,
 * float16 rounding is one instruction, and packing needs no masks. That
 * matters when two threads share a core. Each can store past the caches
 * (nt, with dst aligned to 32 bytes); the last elements that do not fill a
 * vector go through the C loop. */
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c")))

AVX2 static inline void put256(void *p, __m256i v, int nt) {
  if (nt)
    _mm256_stream_si256((__m256i *)p, v);
  else
    _mm256_storeu_si256((__m256i *)p, v);
}
AVX2 static inline void put128(void *p, __m128i v, int nt) {
  if (nt)
    _mm_stream_si128((__m128i *)p, v);
  else
    _mm_storeu_si128((__m128i *)p, v);
}

/* The narrowing loops ask for their source FETCH_AHEAD bytes ahead into L2,
 * a call for each 64-byte line they read: their conversions take enough
 * instructions that fewer of their loads are in flight than a copy's, and
 * fetching ahead took float32 -> bfloat16 from 0.94 to 1.06 of a loop moving
 * the same bytes where memory was fast (docs/notes/benchmark-log.md has the
 * other distances and pairs). */
#define FETCH_AHEAD 8192

static inline void fetch_ahead(const void *p) {
  /* Past the end of the source the hint is dropped, never a fault; the
   * address is made as an integer since no pointer may point there. */
  _mm_prefetch((const char *)((uintptr_t)p + FETCH_AHEAD), _MM_HINT_T1);
}

typedef size_t (*hot_fn)(void *dst, const void *src, size_t n, int nt);

AVX2 static size_t hot_f32_f64(void *dst, const void *src, size_t n, int nt) {
  const float *s = src;
  double *d = dst;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(s + i);
    put256(d + i, _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_castps256_ps128(x))), nt);
    put256(d + i + 4, _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))), nt);
  }
  return i;
}

AVX2 static size_t hot_f64_f32(void *dst, const void *src, size_t n, int nt) {
  const double *s = src;
  float *d = dst;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    fetch_ahead(s + i);
    __m128 a = _mm256_cvtpd_ps(_mm256_loadu_pd(s + i));
    __m128 b = _mm256_cvtpd_ps(_mm256_loadu_pd(s + i + 4));
    put256(d + i, _mm256_castps_si256(_mm256_insertf128_ps(_mm256_castps128_ps256(a), b, 1)), nt);
  }
  return i;
}

/* Eight floats s[0..7] as float16; the instruction keeps a NaN's payload as
 * tstor_f32_to_f16 (and torch 2.x) do. */
AVX2 static inline __m128i f16_of8(const float *s) {
  return _mm256_cvtps_ph(_mm256_loadu_ps(s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* 16 elements a step, so that each store is 32 bytes: with streaming stores,
 * half as many as 16-byte ones for each line. */
AVX2 static size_t hot_f32_f16(void *dst, const void *src, size_t n, int nt) {
  const float *s = src;
  uint16_t *d = dst;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    fetch_ahead(s + i);
    put256(d + i, _mm256_set_m128i(f16_of8(s + i + 8), f16_of8(s + i)), nt);
  }
  for (; i + 8 <= n; i += 8) put128(d + i, f16_of8(s + i), nt);
  return i;
}

/* Exact, NaNs quieted with their payload, as tstor_f16_to_f32. */
AVX2 static size_t hot_f16_f32(void *dst, const void *src, size_t n, int nt) {
  const uint16_t *s = src;
  float *d = dst;
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    put256(d + i,
           _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(s + i)))),
           nt);
  return i;
}

/* A NaN's lane is all ones in the unordered mask; its low half, or'd in, makes
 * the result 0xffff as the C loop's select does. */
AVX2 static inline __m256i bf16_round(__m256 x) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  __m256i a = _mm256_castps_si256(x);
  __m256i r = _mm256_add_epi32(a, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(a, 16), one)));
  return _mm256_srli_epi32(_mm256_or_si256(r, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q))), 16);
}

/* A NaN's lane is all ones in the unordered mask; or'd in, it makes the
 * result 0xffff as the C loop's select does. 32 elements a step. */
AVX2 static size_t hot_f32_bf16(void *dst, const void *src, size_t n, int nt) {
  const float *s = src;
  uint16_t *d = dst;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    fetch_ahead(s + i);
    fetch_ahead(s + i + 16);
    __m256i r0 = bf16_round(_mm256_loadu_ps(s + i)), r1 = bf16_round(_mm256_loadu_ps(s + i + 8));
    __m256i r2 = bf16_round(_mm256_loadu_ps(s + i + 16)), r3 = bf16_round(_mm256_loadu_ps(s + i + 24));
    put256(d + i, _mm256_permute4x64_epi64(_mm256_packus_epi32(r0, r1), 0xd8), nt);
    put256(d + i + 16, _mm256_permute4x64_epi64(_mm256_packus_epi32(r2, r3), 0xd8), nt);
  }
  return i;
}

AVX2 static size_t hot_bf16_f32(void *dst, const void *src, size_t n, int nt) {
  const uint16_t *s = src;
  float *d = dst;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
    __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 8));
    put256(d + i, _mm256_slli_epi32(_mm256_cvtepu16_epi32(lo), 16), nt);
    put256(d + i + 8, _mm256_slli_epi32(_mm256_cvtepu16_epi32(hi), 16), nt);
  }
  return i;
}

/* cvttps2dq gives INT32_MIN for NaN and out-of-range values: tstor_f32_to_i32. */
AVX2 static size_t hot_f32_i32(void *dst, const void *src, size_t n, int nt) {
  const float *s = src;
  int32_t *d = dst;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) put256(d + i, _mm256_cvttps_epi32(_mm256_loadu_ps(s + i)), nt);
  return i;
}

AVX2 static size_t hot_i32_f32(void *dst, const void *src, size_t n, int nt) {
  const int32_t *s = src;
  float *d = dst;
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    put256(d + i,
           _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(const void *)(s + i)))),
           nt);
  return i;
}

/* The intrinsics loop for a pair, or NULL (no such loop, or no AVX2). */
static hot_fn hot_kernel(tstor_dtype src, tstor_dtype dst) {
  if (!tstor__simd(TSTOR__SIMD_AVX2 | TSTOR__SIMD_F16C)) return NULL;
  switch (src * TSTOR_DTYPE_END + dst) {
    case TSTOR_FLOAT32 * TSTOR_DTYPE_END + TSTOR_FLOAT64: return hot_f32_f64;
    case TSTOR_FLOAT64 * TSTOR_DTYPE_END + TSTOR_FLOAT32: return hot_f64_f32;
    case TSTOR_FLOAT32 * TSTOR_DTYPE_END + TSTOR_FLOAT16: return hot_f32_f16;
    case TSTOR_FLOAT16 * TSTOR_DTYPE_END + TSTOR_FLOAT32: return hot_f16_f32;
    case TSTOR_FLOAT32 * TSTOR_DTYPE_END + TSTOR_BFLOAT16: return hot_f32_bf16;
    case TSTOR_BFLOAT16 * TSTOR_DTYPE_END + TSTOR_FLOAT32: return hot_bf16_f32;
    case TSTOR_FLOAT32 * TSTOR_DTYPE_END + TSTOR_INT32: return hot_f32_i32;
    case TSTOR_INT32 * TSTOR_DTYPE_END + TSTOR_FLOAT32: return hot_i32_f32;
    default: return NULL;
  }
}
#else
typedef size_t (*hot_fn)(void *dst, const void *src, size_t n, int nt);
static hot_fn hot_kernel(tstor_dtype src, tstor_dtype dst) {
  (void)src;
  (void)dst;
  return NULL;
}
#endif

static void convert_aligned(void *dst, tstor_dtype dst_dtype, const void *src,
                            tstor_dtype src_dtype, size_t n) {
  size_t done = 0;
  hot_fn hot = hot_kernel(src_dtype, dst_dtype);
  if (hot) {
    done = hot(dst, src, n, 0);
    if (done == n) return;
    dst = (char *)dst + done * tstor_dtype_size(dst_dtype);
    src = (const char *)src + done * tstor_dtype_size(src_dtype);
    n -= done;
  }
  if ((src_dtype == TSTOR_COMPLEX32 && dst_dtype == TSTOR_FLOAT16) ||
      (src_dtype == TSTOR_BCOMPLEX32 && dst_dtype == TSTOR_BFLOAT16))
    cvt_real_half_bits(dst, src, n);
  else if (src_dtype == TSTOR_BFLOAT16 && dst_dtype == TSTOR_BCOMPLEX32)
    cvt_bf16_bc32_bits(dst, src, n);
  else
    kernels[src_dtype][dst_dtype](dst, src, n);
}

/* The alignment the loops read and write a dtype with: its size, or that of
 * one part of a complex. */
static size_t alignment(tstor_dtype dt) {
  const tstor_dtype_info *d = tstor_dtype_info_of(dt);
  return d->kind == TSTOR_KIND_COMPLEX ? d->element_size / 2 : d->element_size;
}

void tstor__convert_serial(void *dst, tstor_dtype dst_dtype, const void *src,
                           tstor_dtype src_dtype, size_t n) {
  if (n == 0) return;
  if (dst_dtype == src_dtype) {
    memmove(dst, src, n * tstor_dtype_size(src_dtype));
    return;
  }
  if ((uintptr_t)src % alignment(src_dtype) == 0 && (uintptr_t)dst % alignment(dst_dtype) == 0) {
    convert_aligned(dst, dst_dtype, src, src_dtype, n);
    return;
  }
  /* A view at an odd byte offset: through aligned buffers on the stack. */
  _Alignas(16) unsigned char sbuf[4096], dbuf[4096];
  size_t ses = tstor_dtype_size(src_dtype), des = tstor_dtype_size(dst_dtype);
  size_t chunk = sizeof sbuf / (ses > des ? ses : des);
  for (size_t i = 0; i < n; i += chunk) {
    size_t k = n - i < chunk ? n - i : chunk;
    memcpy(sbuf, (const char *)src + i * ses, k * ses);
    convert_aligned(dbuf, dst_dtype, sbuf, src_dtype, k);
    memcpy((char *)dst + i * des, dbuf, k * des);
  }
}

/* ------------------------------------------------------- threaded driver */

/* A result too large for the caches is converted 1 KiB at a time into a
 * buffer that stays in L1 and streamed from there to memory past the caches:
 * the destination's lines are never read in first, which saves a third of
 * the memory traffic of a widening conversion. Blocks this small keep the
 * source and destination streams steady (16 KiB blocks lose most of the
 * gain on the machines measured). */
static void convert_streaming(void *dst, tstor_dtype dst_dtype, const void *src,
                              tstor_dtype src_dtype, size_t n) {
  size_t des = tstor_dtype_size(dst_dtype), ses = tstor_dtype_size(src_dtype);
  if ((uintptr_t)dst % alignment(dst_dtype) != 0) {
    tstor__convert_serial(dst, dst_dtype, src, src_dtype, n);
    return;
  }
  size_t head = 0;
  while (head < n && ((uintptr_t)dst + head * des) % 64 != 0) head++;
  tstor__convert_serial(dst, dst_dtype, src, src_dtype, head);
  char *d = (char *)dst + head * des;
  const char *sp = (const char *)src + head * ses;
  n -= head;
  hot_fn hot = hot_kernel(src_dtype, dst_dtype);
  if (hot) { /* streams straight from the registers */
    size_t done = hot(d, sp, n, 1);
    tstor__stream_fence();
    tstor__convert_serial(d + done * des, dst_dtype, sp + done * ses, src_dtype, n - done);
    return;
  }
  _Alignas(64) unsigned char buf[1024];
  size_t chunk = sizeof buf / des;
  for (size_t i = 0; i < n; i += chunk) {
    size_t k = n - i < chunk ? n - i : chunk;
    tstor__convert_serial(buf, dst_dtype, sp + i * ses, src_dtype, k);
    tstor__stream_copy(d + i * des, buf, k * des);
  }
  tstor__stream_fence();
}

typedef struct convert_job {
  void *dst;
  const void *src;
  tstor_dtype dst_dtype, src_dtype;
  size_t dsize, ssize;
  int stream;
} convert_job;

static void convert_range(void *arg, size_t begin, size_t end) {
  const convert_job *j = arg;
  void *d = (char *)j->dst + begin * j->dsize;
  const void *s = (const char *)j->src + begin * j->ssize;
  if (j->stream)
    convert_streaming(d, j->dst_dtype, s, j->src_dtype, end - begin);
  else
    tstor__convert_serial(d, j->dst_dtype, s, j->src_dtype, end - begin);
}

int tstor_dtype_convert(void *dst, tstor_dtype dst_dtype, const void *src,
                        tstor_dtype src_dtype, size_t count) {
  int rc = tstor_dtype_can_convert(dst_dtype, src_dtype);
  if (rc) return rc;
  if (count == 0) return 0;
  if (dst == NULL || src == NULL)
    return tstor__err(TSTOR_EINVAL, "dtype_convert: NULL buffer for %zu elements", count);
  convert_job job = {dst, src, dst_dtype, src_dtype, tstor_dtype_size(dst_dtype),
                     tstor_dtype_size(src_dtype), 0};
  /* Narrowing conversions mostly read: streaming their smaller writes through
   * a buffer costs more than it saves; from the registers it pays. */
  int can_stream = job.dsize >= job.ssize || hot_kernel(src_dtype, dst_dtype) != NULL;
  if (dst_dtype == src_dtype) {
    size_t nbytes;
    if (tstor__mul_size(count, job.ssize, &nbytes))
      return tstor__err(TSTOR_EOVERFLOW, "dtype_convert: %zu elements overflow", count);
    if (dst != src) tstor__host_copy(dst, src, nbytes);
    return 0;
  }
  /* Threads only when the ranges cannot overlap: an in-place conversion (same
   * element size) is split at the same indices on both sides, which is safe. */
  tstor_store_work work = job.dsize > job.ssize ? TSTOR_WORK_WIDEN : TSTOR_WORK_CONVERT;
  if (can_stream && count >= TSTOR__STREAM_MIN_BYTES / job.dsize)
    tstor__parallel_for_stores(work, (unsigned)(src_dtype * TSTOR_DTYPE_END + dst_dtype), count,
                               job.ssize + job.dsize, 64, convert_range, &job, &job.stream);
  else
    tstor__parallel_for(count, job.ssize + job.dsize, 64, convert_range, &job);
  return 0;
}
