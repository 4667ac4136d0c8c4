/* Device kernels of the cuda backend: pattern fill and dtype conversion.
 *
 * The conversions give what tstor_dtype_convert gives on the host, bit for bit
 * (core/convert.c documents the rules; they are PyTorch's CPU results). The
 * formulas below are the same integer and float32 operations as the host's,
 * which the GPU evaluates identically: IEEE round-to-nearest adds and
 * conversions with subnormals kept (this file must not be built with
 * --use_fast_math or -ftz=true), and range checks written out where C leaves a
 * cast undefined. The GPU suite compares every pair against the host. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

namespace {

/* ------------------------------------------------------------------ fill */

struct pattern16 {
  unsigned char b[16];
};

/* Writes [0, head) byte by byte, then nchunks 16-byte words of the pattern
 * replicated (rep, already rotated to start at byte `head`), then the tail. */
__global__ void fill_kernel(unsigned char *p, size_t head, size_t nchunks, size_t tail,
                            uint4 rep, pattern16 pat, unsigned psize) {
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  uint4 *mid = reinterpret_cast<uint4 *>(p + head);
  for (size_t i = tid; i < nchunks; i += stride) mid[i] = rep;
  if (tid < head) p[tid] = pat.b[tid % psize];
  if (tid < tail) {
    size_t off = head + nchunks * 16 + tid;
    p[off] = pat.b[off % psize];
  }
}

unsigned grid_for(size_t n) {
  size_t blocks = (n + 255) / 256;
  if (blocks < 1) blocks = 1;
  if (blocks > 8192) blocks = 8192; /* grid-stride loops do the rest */
  return (unsigned)blocks;
}

/* ------------------------------------------------------- conversion helpers */

__device__ __forceinline__ uint32_t f2u(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float u2f(uint32_t u) { return __uint_as_float(u); }

__device__ __forceinline__ float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t a = h & 0x7fffu;
  uint32_t normal = (a << 13) + 0x38000000u;
  uint32_t special = 0x7f800000u | (a << 13) | (a > 0x7c00u ? 0x00400000u : 0);
  uint32_t sub = f2u((float)a * 0x1p-24f);
  uint32_t r = a < 0x0400u ? sub : a >= 0x7c00u ? special : normal;
  return u2f(sign | r);
}

__device__ __forceinline__ uint16_t f32_to_f16(float f) {
  uint32_t x = f2u(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
  uint32_t sub = f2u(__fadd_rn(u2f(a), 0.5f)) - 0x3f000000u;
  uint32_t r = a < 0x38800000u ? sub : normal;
  r = a >= 0x477ff000u ? 0x7c00u : r;
  r = a > 0x7f800000u ? 0x7e00u : r;
  return (uint16_t)(sign | r);
}

__device__ __forceinline__ float bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t f32_to_bf16(float f) {
  uint32_t x = f2u(f);
  uint32_t r = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return (uint16_t)((x & 0x7fffffffu) > 0x7f800000u ? 0xffffu : r);
}

__device__ __forceinline__ uint32_t fp8_round(uint32_t a, uint32_t ebias, uint32_t mbits) {
  return (a - (ebias << 23) + ((1u << (22 - mbits)) - 1u) + ((a >> (23 - mbits)) & 1u)) >>
         (23 - mbits);
}

/* The subnormal encodings: adding a power of two whose ulp is the format's
 * smallest subnormal lets the FPU round to nearest even. */
__device__ __forceinline__ uint32_t fp8_sub(uint32_t a, float magic) {
  return f2u(__fadd_rn(u2f(a), magic)) - f2u(magic);
}

__device__ __forceinline__ uint8_t f32_to_e4m3fn(float f) {
  uint32_t x = f2u(f), a = x & 0x7fffffffu;
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t r = a < 0x3c800000u ? fp8_sub(a, 16384.0f) : fp8_round(a, 120, 3);
  r = a >= 0x43f00000u ? 0x7fu : r;
  return (uint8_t)(sign | r);
}

__device__ __forceinline__ uint8_t f32_to_e5m2(float f) {
  uint32_t x = f2u(f), a = x & 0x7fffffffu;
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t r = a < 0x38800000u ? fp8_sub(a, 128.0f) : fp8_round(a, 112, 2);
  r = a >= 0x47800000u ? 0x7cu : r;
  r = a > 0x7f800000u ? 0x7fu : r;
  return (uint8_t)(sign | r);
}

__device__ __forceinline__ uint8_t f32_to_e4m3fnuz(float f) {
  uint32_t x = f2u(f), a = x & 0x7fffffffu;
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t r = a < 0x3c000000u ? fp8_sub(a, 8192.0f) : fp8_round(a, 119, 3);
  r = r == 0 ? 0 : sign | r;
  return (uint8_t)(a >= 0x43800000u ? 0x80u : r);
}

__device__ __forceinline__ uint8_t f32_to_e5m2fnuz(float f) {
  uint32_t x = f2u(f), a = x & 0x7fffffffu;
  uint32_t sign = (x >> 24) & 0x80u;
  uint32_t r = a < 0x38000000u ? fp8_sub(a, 64.0f) : fp8_round(a, 111, 2);
  r = r == 0 ? 0 : sign | r;
  return (uint8_t)(a >= 0x47800000u ? 0x80u : r);
}

__device__ __forceinline__ float fp8_decode(uint8_t x, unsigned mbits, unsigned ebias,
                                            float sub_unit) {
  uint32_t sign = (uint32_t)(x & 0x80u) << 24;
  uint32_t e = (x & 0x7fu) >> mbits, m = x & ((1u << mbits) - 1u);
  uint32_t normal = ((e + ebias) << 23) | (m << (23 - mbits));
  uint32_t sub = f2u((float)m * sub_unit);
  return u2f(sign | (e == 0 ? sub : normal));
}

__device__ __forceinline__ float e4m3fn_to_f32(uint8_t x) {
  return (x & 0x7fu) == 0x7fu ? u2f(((uint32_t)(x & 0x80u) << 24) | 0x7ff00000u)
                              : fp8_decode(x, 3, 120, 0x1p-9f);
}
__device__ __forceinline__ float e5m2_to_f32(uint8_t x) {
  return f16_to_f32((uint16_t)(x << 8));
}
__device__ __forceinline__ float e4m3fnuz_to_f32(uint8_t x) {
  return x == 0x80u ? u2f(0x7f800001u) : fp8_decode(x, 3, 119, 0x1p-10f);
}
__device__ __forceinline__ float e5m2fnuz_to_f32(uint8_t x) {
  return x == 0x80u ? u2f(0x7f800001u) : fp8_decode(x, 2, 111, 0x1p-17f);
}

/* x86's cvtt* results, as the host gives them (see tstor/typed.h). */
__device__ __forceinline__ int32_t f32_to_i32(float v) {
  return v >= -0x1p31f && v < 0x1p31f ? (int32_t)v : INT32_MIN;
}
__device__ __forceinline__ int64_t f32_to_i64(float v) {
  return v >= -0x1p63f && v < 0x1p63f ? (int64_t)v : INT64_MIN;
}
__device__ __forceinline__ int32_t f64_to_i32(double v) {
  return v > -2147483649.0 && v < 2147483648.0 ? (int32_t)v : INT32_MIN;
}
__device__ __forceinline__ int64_t f64_to_i64(double v) {
  return v >= -0x1p63 && v < 0x1p63 ? (int64_t)v : INT64_MIN;
}

/* ------------------------------------------------------------- dtype tags */

struct c32_t {
  uint16_t re, im;
};
struct c64_t {
  float re, im;
};
struct c128_t {
  double re, im;
};

/* Each tag: the type elements are read as (lt) and written as (st), a load
 * giving int64_t, float or double, the imaginary part's load, and a store from
 * each of the three (overloads pick it, as _Generic does on the host). */
#define TAG_INT(NAME, LT, ST, LOAD, FROM_F, FROM_D)                                   \
  struct NAME {                                                                       \
    typedef LT lt;                                                                    \
    typedef ST st;                                                                    \
    static __device__ __forceinline__ int64_t load(lt x) { return LOAD; }             \
    static __device__ __forceinline__ int64_t im(lt) { return 0; }                    \
    static __device__ __forceinline__ st store(int64_t v, int64_t) { return (st)v; }  \
    static __device__ __forceinline__ st store(float v, float) { return FROM_F; }     \
    static __device__ __forceinline__ st store(double v, double) { return FROM_D; }   \
  };

TAG_INT(t_u8, uint8_t, uint8_t, (int64_t)x, (uint8_t)f32_to_i64(v), (uint8_t)f64_to_i64(v))
TAG_INT(t_i8, int8_t, uint8_t, (int64_t)x, (uint8_t)f32_to_i32(v), (uint8_t)f64_to_i32(v))
TAG_INT(t_i16, int16_t, uint16_t, (int64_t)x, (uint16_t)f32_to_i32(v), (uint16_t)f64_to_i32(v))
TAG_INT(t_i32, int32_t, uint32_t, (int64_t)x, (uint32_t)f32_to_i32(v), (uint32_t)f64_to_i32(v))
TAG_INT(t_i64, int64_t, uint64_t, (int64_t)x, (uint64_t)f32_to_i64(v), (uint64_t)f64_to_i64(v))
#undef TAG_INT

struct t_bool {
  typedef uint8_t lt;
  typedef uint8_t st;
  static __device__ __forceinline__ int64_t load(lt x) { return x != 0; }
  static __device__ __forceinline__ int64_t im(lt) { return 0; }
  static __device__ __forceinline__ st store(int64_t v, int64_t) { return v != 0; }
  static __device__ __forceinline__ st store(float v, float) { return v != 0; }
  static __device__ __forceinline__ st store(double v, double) { return v != 0; }
};

/* The float32-based formats: everything reaches them as a float32. */
#define TAG_VIA_F32(NAME, T, DECODE, ENCODE)                                                 \
  struct NAME {                                                                              \
    typedef T lt;                                                                            \
    typedef T st;                                                                            \
    static __device__ __forceinline__ float load(lt x) { return DECODE(x); }                \
    static __device__ __forceinline__ float im(lt) { return 0.0f; }                         \
    static __device__ __forceinline__ st store(int64_t v, int64_t) { return ENCODE((float)v); } \
    static __device__ __forceinline__ st store(float v, float) { return ENCODE(v); }        \
    static __device__ __forceinline__ st store(double v, double) { return ENCODE((float)v); } \
  };

TAG_VIA_F32(t_f16, uint16_t, f16_to_f32, f32_to_f16)
TAG_VIA_F32(t_bf16, uint16_t, bf16_to_f32, f32_to_bf16)
TAG_VIA_F32(t_e5m2, uint8_t, e5m2_to_f32, f32_to_e5m2)
TAG_VIA_F32(t_e4m3fn, uint8_t, e4m3fn_to_f32, f32_to_e4m3fn)
TAG_VIA_F32(t_e5m2fnuz, uint8_t, e5m2fnuz_to_f32, f32_to_e5m2fnuz)
TAG_VIA_F32(t_e4m3fnuz, uint8_t, e4m3fnuz_to_f32, f32_to_e4m3fnuz)
#undef TAG_VIA_F32

struct t_f32 {
  typedef float lt;
  typedef float st;
  static __device__ __forceinline__ float load(lt x) { return x; }
  static __device__ __forceinline__ float im(lt) { return 0.0f; }
  static __device__ __forceinline__ st store(int64_t v, int64_t) { return (float)v; }
  static __device__ __forceinline__ st store(float v, float) { return v; }
  static __device__ __forceinline__ st store(double v, double) { return (float)v; }
};

struct t_f64 {
  typedef double lt;
  typedef double st;
  static __device__ __forceinline__ double load(lt x) { return x; }
  static __device__ __forceinline__ double im(lt) { return 0.0; }
  static __device__ __forceinline__ st store(int64_t v, int64_t) { return (double)v; }
  static __device__ __forceinline__ st store(float v, float) { return (double)v; }
  static __device__ __forceinline__ st store(double v, double) { return v; }
};

/* Complex: real destinations get the real part; each part of a complex
 * destination is stored as the matching real dtype would store it. */
#define TAG_COMPLEX(NAME, T, PART, LOADPART)                                        \
  struct NAME {                                                                     \
    typedef T lt;                                                                   \
    typedef T st;                                                                   \
    static __device__ __forceinline__ auto load(lt x) { return LOADPART(x.re); }   \
    static __device__ __forceinline__ auto im(lt x) { return LOADPART(x.im); }     \
    template <class V>                                                              \
    static __device__ __forceinline__ st store(V re, V im) {                        \
      st out;                                                                       \
      out.re = PART::store(re, re);                                                 \
      out.im = PART::store(im, im);                                                 \
      return out;                                                                   \
    }                                                                               \
  };

__device__ __forceinline__ float id_f(float x) { return x; }
__device__ __forceinline__ double id_d(double x) { return x; }
TAG_COMPLEX(t_c32, c32_t, t_f16, f16_to_f32)
TAG_COMPLEX(t_c64, c64_t, t_f32, id_f)
TAG_COMPLEX(t_c128, c128_t, t_f64, id_d)
#undef TAG_COMPLEX

template <class S, class D>
__global__ void convert_kernel(typename D::st *dst, const typename S::lt *src, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    typename S::lt x = src[i];
    dst[i] = D::store(S::load(x), S::im(x));
  }
}

template <class S, class D>
struct same_dtype {
  static constexpr bool value = false;
};
template <class S>
struct same_dtype<S, S> {
  static constexpr bool value = true;
};

template <class S, class D>
int launch(void *dst, const void *src, size_t n, cudaStream_t stream) {
  if constexpr (same_dtype<S, D>::value) {
    /* A copy, bit for bit: going through float would canonicalise NaNs. */
    return (int)cudaMemcpyAsync(dst, src, n * sizeof(typename S::lt), cudaMemcpyDeviceToDevice,
                                stream);
  } else {
    if ((uintptr_t)dst % alignof(typename D::st) || (uintptr_t)src % alignof(typename S::lt))
      return -1;
    convert_kernel<S, D><<<grid_for(n), 256, 0, stream>>>(
        static_cast<typename D::st *>(dst), static_cast<const typename S::lt *>(src), n);
    return (int)cudaGetLastError();
  }
}

/* The dtype values of tstor/typed.h (c10::ScalarType's). */
#define DTYPES(X, A) \
  X(A, 0, t_u8)      \
  X(A, 1, t_i8)      \
  X(A, 2, t_i16)     \
  X(A, 3, t_i32)     \
  X(A, 4, t_i64)     \
  X(A, 5, t_f16)     \
  X(A, 6, t_f32)     \
  X(A, 7, t_f64)     \
  X(A, 8, t_c32)     \
  X(A, 9, t_c64)     \
  X(A, 10, t_c128)   \
  X(A, 11, t_bool)   \
  X(A, 15, t_bf16)   \
  X(A, 23, t_e5m2)   \
  X(A, 24, t_e4m3fn) \
  X(A, 25, t_e5m2fnuz) \
  X(A, 26, t_e4m3fnuz)

#define DST_CASE(S, V, D) \
  case V: return launch<S, D>(dst, src, n, stream);

template <class S>
int launch_to(int dst_dtype, void *dst, const void *src, size_t n, cudaStream_t stream) {
  switch (dst_dtype) {
    DTYPES(DST_CASE, S)
    default: return -1;
  }
}

#define SRC_CASE(unused, V, S) \
  case V: return launch_to<S>(dst_dtype, dst, src, n, stream);

int convert_any(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n,
                cudaStream_t stream) {
  switch (src_dtype) {
    DTYPES(SRC_CASE, _)
    default: return -1;
  }
}

}  // namespace

extern "C" int tstor__cuda_launch_convert(void *dst, int dst_dtype, const void *src,
                                          int src_dtype, size_t count, cudaStream_t stream) {
  if (count == 0) return (int)cudaSuccess;
  return convert_any(dst, dst_dtype, src, src_dtype, count, stream);
}

extern "C" int tstor__cuda_launch_fill(void *ptr, size_t nbytes, const void *pattern,
                                       size_t pattern_size, cudaStream_t stream) {
  if (nbytes == 0) return (int)cudaSuccess;
  pattern16 pat;
  memcpy(pat.b, pattern, pattern_size);
  unsigned char *p = static_cast<unsigned char *>(ptr);
  size_t head = (16 - (uintptr_t)p % 16) % 16;
  if (head > nbytes) head = nbytes;
  size_t nchunks = (nbytes - head) / 16;
  size_t tail = nbytes - head - nchunks * 16;
  /* pattern_size divides 16, so every 16-byte word past the head is the same. */
  unsigned char rep[16];
  for (size_t b = 0; b < 16; b++) rep[b] = pat.b[(head + b) % pattern_size];
  uint4 word;
  memcpy(&word, rep, sizeof word);
  fill_kernel<<<grid_for(nchunks > 16 ? nchunks : 16), 256, 0, stream>>>(
      p, head, nchunks, tail, word, pat, (unsigned)pattern_size);
  return (int)cudaGetLastError();
}
