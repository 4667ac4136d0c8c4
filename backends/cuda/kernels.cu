/* Device kernels of the cuda backend: pattern fill, dtype conversion and
 * strided copies.
 *
 * The conversions give what tstor_dtype_convert gives on the host, bit for bit
 * (core/convert.c documents the rules; they are PyTorch's CPU results): each
 * element goes through tstor/codec.h, the same scalar code the host loops
 * use, which the GPU evaluates identically: IEEE round-to-nearest adds and
 * conversions with subnormals kept (this file must not be built with
 * --use_fast_math or -ftz=true), and range checks written out where C leaves a
 * cast undefined. The GPU suite compares every pair against the host.
 *
 * Every kernel's body is a __host__ __device__ function, so that with
 * TSTOR_CUDA_EMULATE defined this file also exports host loops running the
 * same bodies: test_cuda_kernels checks them against the host conversion and
 * every fill case on machines without a GPU. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>
#include <tstor/codec.h>
#include <tstor/typed.h>

#include <type_traits>

#include "kernels.h"

#define HD __host__ __device__ __forceinline__

namespace {

/* ------------------------------------------------------------------ fill */

struct pattern16 {
  unsigned char b[16];
};

/* What thread `tid` of `stride` writes: [0, head) byte by byte, then nchunks
 * 16-byte words of the pattern replicated (rep, already rotated to start at
 * byte `head`), then the tail. */
HD void fill_body(unsigned char *p, size_t head, size_t nchunks, size_t tail, uint4 rep,
                  const pattern16 &pat, unsigned psize, size_t tid, size_t stride) {
  uint4 *mid = reinterpret_cast<uint4 *>(p + head);
  for (size_t i = tid; i < nchunks; i += stride) mid[i] = rep;
  if (tid < head) p[tid] = pat.b[tid % psize];
  if (tid < tail) {
    size_t off = head + nchunks * 16 + tid;
    p[off] = pat.b[off % psize];
  }
}

__global__ void fill_kernel(unsigned char *p, size_t head, size_t nchunks, size_t tail,
                            uint4 rep, pattern16 pat, unsigned psize) {
  fill_body(p, head, nchunks, tail, rep, pat, psize, (size_t)blockIdx.x * blockDim.x + threadIdx.x,
            (size_t)gridDim.x * blockDim.x);
}

/* The kernel's arguments for a fill. */
struct fill_plan {
  size_t head, nchunks, tail;
  uint4 rep;
  pattern16 pat;
  unsigned grid;
};

unsigned grid_for(size_t n) {
  size_t blocks = (n + 255) / 256;
  if (blocks < 1) blocks = 1;
  if (blocks > 8192) blocks = 8192; /* grid-stride loops do the rest */
  return (unsigned)blocks;
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
 * giving int64_t, uint64_t (uint64 alone), float or double, the imaginary
 * part's load, and a store from each of the four (overloads pick it, as
 * _Generic does on the host). */
#define TAG_INT(NAME, LT, ST, FROM_F, FROM_D)                  \
  struct NAME {                                                \
    typedef LT lt;                                             \
    typedef ST st;                                             \
    static HD int64_t load(lt x) { return (int64_t)x; }        \
    static HD int64_t im(lt) { return 0; }                     \
    static HD st store(int64_t v, int64_t) { return (st)v; }   \
    static HD st store(uint64_t v, uint64_t) { return (st)v; } \
    static HD st store(float v, float) { return FROM_F; }      \
    static HD st store(double v, double) { return FROM_D; }    \
  };

TAG_INT(t_u8, uint8_t, uint8_t, (uint8_t)tstor_f32_to_i64(v), (uint8_t)tstor_f64_to_i64(v))
TAG_INT(t_i8, int8_t, uint8_t, (uint8_t)tstor_f32_to_i32(v), (uint8_t)tstor_f64_to_i32(v))
TAG_INT(t_i16, int16_t, uint16_t, (uint16_t)tstor_f32_to_i32(v), (uint16_t)tstor_f64_to_i32(v))
TAG_INT(t_i32, int32_t, uint32_t, (uint32_t)tstor_f32_to_i32(v), (uint32_t)tstor_f64_to_i32(v))
TAG_INT(t_i64, int64_t, uint64_t, (uint64_t)tstor_f32_to_i64(v), (uint64_t)tstor_f64_to_i64(v))
TAG_INT(t_u16, uint16_t, uint16_t, (uint16_t)tstor_f32_to_i32(v), (uint16_t)tstor_f64_to_i32(v))
/* From a float, PyTorch's vector loops' cast; convert_elem takes the low
 * half of the int64 cast instead for the sources u32_low_half names. */
TAG_INT(t_u32, uint32_t, uint32_t, tstor_f32_to_u32(v), tstor_f64_to_u32(v))
#undef TAG_INT

struct t_u64 {
  typedef uint64_t lt;
  typedef uint64_t st;
  static HD uint64_t load(lt x) { return x; }
  static HD uint64_t im(lt) { return 0; }
  static HD st store(int64_t v, int64_t) { return (st)v; }
  static HD st store(float v, float) { return tstor_f32_to_u64(v); }
  static HD st store(double v, double) { return tstor_f64_to_u64(v); }
};

struct t_bool {
  typedef uint8_t lt;
  typedef uint8_t st;
  static HD int64_t load(lt x) { return x != 0; }
  static HD int64_t im(lt) { return 0; }
  /* a complex element is true when either part is nonzero (torch 2.x) */
  static HD st store(int64_t v, int64_t im) { return v != 0 || im != 0; }
  static HD st store(uint64_t v, uint64_t im) { return v != 0 || im != 0; }
  static HD st store(float v, float im) { return v != 0 || im != 0; }
  static HD st store(double v, double im) { return v != 0 || im != 0; }
};

/* The float32-based formats: everything reaches them as a float32. */
#define TAG_VIA_F32(NAME, T, DECODE, ENCODE)                              \
  struct NAME {                                                           \
    typedef T lt;                                                         \
    typedef T st;                                                         \
    static HD float load(lt x) { return DECODE(x); }                      \
    static HD float im(lt) { return 0.0f; }                               \
    static HD st store(int64_t v, int64_t) { return ENCODE((float)v); }   \
    static HD st store(uint64_t v, uint64_t) { return ENCODE((float)v); } \
    static HD st store(float v, float) { return ENCODE(v); }              \
    static HD st store(double v, double) { return ENCODE((float)v); }     \
  };

TAG_VIA_F32(t_f16, uint16_t, tstor_f16_to_f32, tstor_f32_to_f16)
TAG_VIA_F32(t_e5m2, uint8_t, tstor_e5m2_to_f32, tstor_f32_to_e5m2)
TAG_VIA_F32(t_e4m3fn, uint8_t, tstor_e4m3fn_to_f32, tstor_f32_to_e4m3fn)
TAG_VIA_F32(t_e5m2fnuz, uint8_t, tstor_e5m2fnuz_to_f32, tstor_f32_to_e5m2fnuz)
TAG_VIA_F32(t_e4m3fnuz, uint8_t, tstor_e4m3fnuz_to_f32, tstor_f32_to_e4m3fnuz)
TAG_VIA_F32(t_e8m0, uint8_t, tstor_e8m0_to_f32, tstor_f32_to_e8m0)
#undef TAG_VIA_F32

struct t_bf16 {
  typedef uint16_t lt;
  typedef uint16_t st;
  static HD float load(lt x) { return tstor_bf16_to_f32(x); }
  static HD float im(lt) { return 0.0f; }
  static HD st store(int64_t v, uint16_t nan) { return tstor_f32_to_bf16((float)v, nan); }
  static HD st store(uint64_t v, uint16_t nan) { return tstor_f32_to_bf16((float)v, nan); }
  static HD st store(float v, uint16_t nan) { return tstor_f32_to_bf16(v, nan); }
  static HD st store(double v, uint16_t nan) { return tstor_f32_to_bf16((float)v, nan); }
};

struct t_f32 {
  typedef float lt;
  typedef float st;
  static HD float load(lt x) { return x; }
  static HD float im(lt) { return 0.0f; }
  static HD st store(int64_t v, int64_t) { return (float)v; }
  static HD st store(uint64_t v, uint64_t) { return (float)v; }
  static HD st store(float v, float) { return v; }
  static HD st store(double v, double) { return (float)v; }
};

/* float32 to float64 as the host's conversion (x86's cvtss2sd) gives it: a
 * NaN keeps its sign and payload and becomes quiet. Spelled out for NaNs
 * because the device does not do so for every one: the signalling NaN that
 * the fnuz formats decode to came out otherwise on an H200. */
HD double f32_to_f64(float v) {
  if (v == v) return (double)v;
  uint32_t x = tstor__codec_f2u(v);
  unsigned long long bits = (unsigned long long)(x >> 31) << 63 | 0x7ff8000000000000ull |
                            (unsigned long long)(x & 0x7fffffu) << 29;
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

struct t_f64 {
  typedef double lt;
  typedef double st;
  static HD double load(lt x) { return x; }
  static HD double im(lt) { return 0.0; }
  static HD st store(int64_t v, int64_t) { return (double)v; }
  static HD st store(uint64_t v, uint64_t) { return (double)v; }
  static HD st store(float v, float) { return f32_to_f64(v); }
  static HD st store(double v, double) { return v; }
};

/* Complex: real destinations get the real part; each part of a complex
 * destination is stored as the matching real dtype would store it. */
#define TAG_COMPLEX(NAME, T, PART, LOADPART)                                        \
  struct NAME {                                                                     \
    typedef T lt;                                                                   \
    typedef T st;                                                                   \
    static HD auto load(lt x) { return LOADPART(x.re); }   \
    static HD auto im(lt x) { return LOADPART(x.im); }     \
    template <class V>                                                              \
    static HD st store(V re, V im) {                        \
      st out;                                                                       \
      out.re = PART::store(re, re);                                                 \
      out.im = PART::store(im, im);                                                 \
      return out;                                                                   \
    }                                                                               \
  };

HD float id_f(float x) { return x; }
HD double id_d(double x) { return x; }
TAG_COMPLEX(t_c32, c32_t, t_f16, tstor_f16_to_f32)
TAG_COMPLEX(t_c64, c64_t, t_f32, id_f)
TAG_COMPLEX(t_c128, c128_t, t_f64, id_d)
#undef TAG_COMPLEX

/* bcomplex32: two bfloat16, each part stored with the NaN of PyTorch's scalar
 * loops, which are the only ones it has into bcomplex32. */
struct t_bc32 {
  typedef c32_t lt;
  typedef c32_t st;
  static HD float load(lt x) { return tstor_bf16_to_f32(x.re); }
  static HD float im(lt x) { return tstor_bf16_to_f32(x.im); }
  template <class V>
  static HD st store(V re, V im) {
    st out;
    out.re = t_bf16::store(re, (uint16_t)TSTOR_BF16_NAN_SCALAR);
    out.im = t_bf16::store(im, (uint16_t)TSTOR_BF16_NAN_SCALAR);
    return out;
  }
};

/* What PyTorch's loops do differently by source dtype (core/typed/convert.c's
 * RULES_ table): a NaN into an integer dtype is the cast's value, or 0 from
 * the formats whose one NaN code PyTorch's compiler folds; and a float into
 * uint32 is the vector loops' cast or the low half of the int64 cast. */
template <class S>
struct folds_nan {
  static constexpr bool value = false;
};
template <class S>
struct u32_low_half {
  static constexpr bool value = false;
};
#define SOURCE_RULE(RULE, T)            \
  template <>                           \
  struct RULE<T> {                      \
    static constexpr bool value = true; \
  };
SOURCE_RULE(folds_nan, t_e5m2fnuz)
SOURCE_RULE(folds_nan, t_e4m3fnuz)
SOURCE_RULE(folds_nan, t_e8m0)
SOURCE_RULE(u32_low_half, t_f16)
SOURCE_RULE(u32_low_half, t_c32)
SOURCE_RULE(u32_low_half, t_e5m2)
SOURCE_RULE(u32_low_half, t_e4m3fn)
SOURCE_RULE(u32_low_half, t_e5m2fnuz)
SOURCE_RULE(u32_low_half, t_e4m3fnuz)
SOURCE_RULE(u32_low_half, t_e8m0)
#undef SOURCE_RULE
template <class D>
struct integer_tag {
  static constexpr bool value = false;
};
#define INTEGER_TAG(T)                  \
  template <>                           \
  struct integer_tag<T> {               \
    static constexpr bool value = true; \
  };
INTEGER_TAG(t_u8)
INTEGER_TAG(t_i8)
INTEGER_TAG(t_i16)
INTEGER_TAG(t_i32)
INTEGER_TAG(t_i64)
INTEGER_TAG(t_u16)
INTEGER_TAG(t_u64) /* uint32 has a convert_elem of its own */
#undef INTEGER_TAG

/* One element: load as int64_t, float or double, store from that. */
template <class S, class D>
struct convert_elem {
  static HD typename D::st apply(typename S::lt x) {
    auto v = S::load(x);
    if constexpr (folds_nan<S>::value && integer_tag<D>::value) v = v != v ? 0.0f : v;
    return D::store(v, S::im(x));
  }
};

template <class S>
struct convert_elem<S, t_u32> {
  static HD uint32_t apply(typename S::lt x) {
    auto v = S::load(x);
    if constexpr (folds_nan<S>::value) v = v != v ? 0.0f : v;
    if constexpr (u32_low_half<S>::value)
      return (uint32_t)tstor_f32_to_i64(v);
    else
      return t_u32::store(v, S::im(x));
  }
};

/* Whether S is one of Ts. */
template <class S, class... Ts>
struct one_of {
  static constexpr bool value = false;
};
template <class S, class T, class... Ts>
struct one_of<S, T, Ts...> {
  static constexpr bool value = std::is_same<S, T>::value || one_of<S, Ts...>::value;
};

/* The NaN bfloat16 gets: 0x7fc0 from float16, the complex dtypes and the
 * float8s, e8m0 included (PyTorch's scalar loops), all ones from the rest
 * (its vectorised loops). */
template <class S>
struct bf16_nan {
  static constexpr uint16_t value = one_of<S, t_f16, t_c32, t_c64, t_c128, t_e8m0, t_e5m2, t_e4m3fn,
                                           t_e5m2fnuz, t_e4m3fnuz>::value
                                        ? TSTOR_BF16_NAN_SCALAR
                                        : TSTOR_BF16_NAN_VECTOR;
};

template <class S>
struct convert_elem<S, t_bf16> {
  static HD uint16_t apply(typename S::lt x) { return t_bf16::store(S::load(x), bf16_nan<S>::value); }
};

/* complex32 to float16 and bcomplex32 to bfloat16 move the real half as it
 * is, and bfloat16 to bcomplex32 is the value with a +0 imaginary part
 * (PyTorch does not go through float32 there, so NaN payloads survive). */
template <>
struct convert_elem<t_c32, t_f16> {
  static HD uint16_t apply(c32_t x) { return x.re; }
};
template <>
struct convert_elem<t_bc32, t_bf16> {
  static HD uint16_t apply(c32_t x) { return x.re; }
};
template <>
struct convert_elem<t_bf16, t_bc32> {
  static HD c32_t apply(uint16_t x) {
    c32_t out;
    out.re = x;
    out.im = 0;
    return out;
  }
};

template <class S, class D>
HD void convert_one(typename D::st *dst, const typename S::lt *src, size_t i) {
  dst[i] = convert_elem<S, D>::apply(src[i]);
}

template <class S, class D>
__global__ void convert_kernel(typename D::st *dst, const typename S::lt *src, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    convert_one<S, D>(dst, src, i);
}

template <class S, class D>
struct same_dtype {
  static constexpr bool value = false;
};
template <class S>
struct same_dtype<S, S> {
  static constexpr bool value = true;
};

/* Queues the conversion on the device, or with Host (TSTOR_CUDA_EMULATE only)
 * runs the kernel's body in a loop on the host. */
template <bool Host, class S, class D>
int run(void *dst, const void *src, size_t n, cudaStream_t stream) {
  typedef typename S::lt in_t;
  typedef typename D::st out_t;
  if constexpr (same_dtype<S, D>::value) {
    /* A copy, bit for bit: going through float would canonicalise NaNs. */
    if constexpr (Host) {
      memmove(dst, src, n * sizeof(in_t));
      return (int)cudaSuccess;
    } else {
      return (int)cudaMemcpyAsync(dst, src, n * sizeof(in_t), cudaMemcpyDeviceToDevice, stream);
    }
  } else {
    if ((uintptr_t)dst % alignof(out_t) || (uintptr_t)src % alignof(in_t)) return -1;
    out_t *d = static_cast<out_t *>(dst);
    const in_t *sp = static_cast<const in_t *>(src);
    if constexpr (Host) {
      for (size_t i = 0; i < n; i++) convert_one<S, D>(d, sp, i);
      return (int)cudaSuccess;
    } else {
      convert_kernel<S, D><<<grid_for(n), 256, 0, stream>>>(d, sp, n);
      return (int)cudaGetLastError();
    }
  }
}

/* The dtypes that convert (every kind but quantized and opaque), from
 * TSTOR_DTYPE_MAP: each is handled by the tag t_<its tag>. The same filter as
 * core/convert.c's, kept here because a backend may not include core
 * internals. */
#define CONVERTS_BOOL(...) __VA_ARGS__
#define CONVERTS_UNSIGNED(...) __VA_ARGS__
#define CONVERTS_SIGNED(...) __VA_ARGS__
#define CONVERTS_FLOAT(...) __VA_ARGS__
#define CONVERTS_COMPLEX(...) __VA_ARGS__
#define CONVERTS_QUANTIZED(...)
#define CONVERTS_OPAQUE(...)

#define DST_CASE(S, e, v, tag, name, alias, legacy, st, size, kind, ...) \
  CONVERTS_##kind(case TSTOR_##e: return run<Host, S, t_##tag>(dst, src, n, stream);)

template <bool Host, class S>
int run_to(int dst_dtype, void *dst, const void *src, size_t n, cudaStream_t stream) {
  switch (dst_dtype) {
    TSTOR_DTYPE_MAP(DST_CASE, S)
    default: return -1;
  }
}

#define SRC_CASE(unused, e, v, tag, name, alias, legacy, st, size, kind, ...) \
  CONVERTS_##kind(case TSTOR_##e: return run_to<Host, t_##tag>(dst_dtype, dst, src, n, stream);)

template <bool Host>
int convert_any(void *dst, int dst_dtype, const void *src, int src_dtype, size_t n,
                cudaStream_t stream) {
  if (n == 0) return (int)cudaSuccess;
  switch (src_dtype) {
    TSTOR_DTYPE_MAP(SRC_CASE, _)
    default: return -1;
  }
}

/* --------------------------------------------------------- strided copy */

struct u128 {
  unsigned long long lo, hi;
};

/* Element `i` (row-major over sizes, dim 0 varying fastest) of a strided
 * block, byte strides on each side. */
template <typename T>
HD void strided_body(char *dst, const char *src, const tstor__cuda_strided &a, size_t i) {
  long long doff = 0, soff = 0;
  unsigned long long q = i;
  for (int d = 0; d < a.ndim; d++) {
    long long k = (long long)(q % (unsigned long long)a.sizes[d]);
    q /= (unsigned long long)a.sizes[d];
    doff += k * a.dst_strides[d];
    soff += k * a.src_strides[d];
  }
  *reinterpret_cast<T *>(dst + doff) = *reinterpret_cast<const T *>(src + soff);
}

template <typename T>
__global__ void strided_kernel(char *dst, const char *src, tstor__cuda_strided a, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    strided_body<T>(dst, src, a, i);
}

/* Whether every address the block touches is aligned for unit-sized loads. */
bool strided_aligned(const void *dst, const void *src, const tstor__cuda_strided &a, size_t unit) {
  if ((uintptr_t)dst % unit || (uintptr_t)src % unit) return false;
  for (int d = 0; d < a.ndim; d++)
    if (a.dst_strides[d] % (long long)unit || a.src_strides[d] % (long long)unit) return false;
  return true;
}

/* A transposing block: one dimension, `a`, is contiguous in dst and another,
 * `b`, in src. Element by element, one of the two sides would be read or
 * written a whole stride apart by neighbouring threads; instead each block of
 * 32 x 8 threads moves square tiles through shared memory, reading rows along
 * b and writing rows along a, so that both sides move in full memory
 * transactions. Each thread moves (SIDE / 32) x (SIDE / 8) elements.
 *
 * What the speed hangs on, measured on an H200 (docs/benchmarks.md, "CUDA"):
 * the arithmetic around each tile, not its shape. Finding a tile's place
 * with 64-bit divisions cost a quarter of the bandwidth, so the grid's three
 * axes are the tile along a, the tile along b and the batch of the remaining
 * dimensions, and only the batch is divided out, in 32 bits where it fits;
 * tiles clear of the edges skip the bounds checks. Consecutive blocks take
 * consecutive tiles along a, writing neighbouring stretches of dst's rows:
 * 3% faster than along b. 64 x 64 tiles ran 11% faster than 32 x 32 ones. */
enum { WARP = 32, ROWS = 8, GRID_YZ_MAX = 65535 };

/* The tile's side: 64 elements, or 32 for 16-byte ones (static shared memory
 * stops at 48 KiB a block). */
template <typename T>
struct tile_side {
  enum { value = sizeof(T) <= 8 ? 64 : 32 };
};

struct transpose_plan {
  tstor__cuda_strided s;
  int a, b;
  long long tiles_a, tiles_b, batches;
  bool narrow; /* every batch index and size fits 32 bits */
};

/* Whether the block is a transpose worth tiling, and its plan. */
bool plan_transpose(const tstor__cuda_strided &s, size_t element_size, int side,
                    transpose_plan *p) {
  int a = -1, b = -1;
  for (int d = 0; d < s.ndim; d++) {
    if (a < 0 && s.dst_strides[d] == (long long)element_size) a = d;
    if (b < 0 && s.src_strides[d] == (long long)element_size) b = d;
  }
  if (a < 0 || b < 0 || a == b || s.sizes[a] < ROWS || s.sizes[b] < ROWS) return false;
  p->s = s;
  p->a = a;
  p->b = b;
  p->tiles_a = (s.sizes[a] + side - 1) / side;
  p->tiles_b = (s.sizes[b] + side - 1) / side;
  p->batches = 1;
  for (int d = 0; d < s.ndim; d++)
    if (d != a && d != b) p->batches *= s.sizes[d];
  p->narrow = p->batches <= 0xffffffffLL;
  return true;
}

/* The byte offsets of batch z on each side. */
struct batch_at {
  long long doff, soff;
};

template <typename I>
HD batch_at locate_batch(const transpose_plan &p, I z) {
  batch_at at = {0, 0};
  for (int d = 0; d < p.s.ndim; d++) {
    if (d == p.a || d == p.b) continue;
    I size = (I)p.s.sizes[d];
    I k = z % size;
    z /= size;
    at.doff += (long long)k * p.s.dst_strides[d];
    at.soff += (long long)k * p.s.src_strides[d];
  }
  return at;
}

/* Thread (tx, ty) reads tile rows ty, ty + ROWS, ... at columns tx, tx + 32, ...
 * (a row runs along b), straight into the tile, and writes the tile's columns
 * as rows of dst along a. Edge: whether the tile may overhang the block. */
template <typename T, int SIDE, bool Edge>
HD void tile_load(T (*tile)[SIDE + 1], const char *src, const transpose_plan &p, long long a0,
                  long long b0, int tx, int ty) {
  const long long na = p.s.sizes[p.a], nb = p.s.sizes[p.b];
  const long long sa = p.s.src_strides[p.a], sb = p.s.src_strides[p.b];
#pragma unroll
  for (int c = 0; c < SIDE; c += WARP) {
    long long ib = b0 + c + tx;
    const char *col = src + ib * sb;
#pragma unroll
    for (int r = 0; r < SIDE; r += ROWS) {
      long long ia = a0 + r + ty;
      if (!Edge || (ib < nb && ia < na))
        tile[r + ty][c + tx] = *reinterpret_cast<const T *>(col + ia * sa);
    }
  }
}

template <typename T, int SIDE, bool Edge>
HD void tile_store(T (*tile)[SIDE + 1], char *dst, const transpose_plan &p, long long a0,
                   long long b0, int tx, int ty) {
  const long long na = p.s.sizes[p.a], nb = p.s.sizes[p.b];
  const long long da = p.s.dst_strides[p.a], db = p.s.dst_strides[p.b];
#pragma unroll
  for (int r = 0; r < SIDE; r += WARP) {
    long long ia = a0 + r + tx;
    char *row = dst + ia * da;
#pragma unroll
    for (int c = 0; c < SIDE; c += ROWS) {
      long long ib = b0 + c + ty;
      if (!Edge || (ia < na && ib < nb)) *reinterpret_cast<T *>(row + ib * db) = tile[r + tx][c + ty];
    }
  }
}

/* Whether the tile starting at (a0, b0) lies wholly inside the block. */
HD bool tile_inside(const transpose_plan &p, int side, long long a0, long long b0) {
  return a0 + side <= p.s.sizes[p.a] && b0 + side <= p.s.sizes[p.b];
}

template <typename T, int SIDE>
__global__ void __launch_bounds__(WARP *ROWS)
    transpose_kernel(char *dst, const char *src, transpose_plan p) {
  __shared__ T tile[SIDE][SIDE + 1]; /* + 1: a column spreads over the banks */
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (long long z = blockIdx.z; z < p.batches; z += gridDim.z) {
    batch_at at = p.narrow ? locate_batch(p, (unsigned)z) : locate_batch(p, (unsigned long long)z);
    const char *s = src + at.soff;
    char *d = dst + at.doff;
    for (long long y = blockIdx.y; y < p.tiles_b; y += gridDim.y) {
      const long long b0 = y * SIDE;
      for (long long x = blockIdx.x; x < p.tiles_a; x += gridDim.x) {
        const long long a0 = x * SIDE;
        if (tile_inside(p, SIDE, a0, b0)) {
          tile_load<T, SIDE, false>(tile, s, p, a0, b0, tx, ty);
          __syncthreads();
          tile_store<T, SIDE, false>(tile, d, p, a0, b0, tx, ty);
        } else {
          tile_load<T, SIDE, true>(tile, s, p, a0, b0, tx, ty);
          __syncthreads();
          tile_store<T, SIDE, true>(tile, d, p, a0, b0, tx, ty);
        }
        __syncthreads(); /* the next tile overwrites this one */
      }
    }
  }
}

/* One tile moved as a block's threads would move it, on the host. */
template <typename T, int SIDE, bool Edge>
void host_tile(T (*tile)[SIDE + 1], char *d, const char *s, const transpose_plan &p, long long a0,
               long long b0) {
  for (int ty = 0; ty < ROWS; ty++)
    for (int tx = 0; tx < WARP; tx++) tile_load<T, SIDE, Edge>(tile, s, p, a0, b0, tx, ty);
  for (int ty = 0; ty < ROWS; ty++)
    for (int tx = 0; tx < WARP; tx++) tile_store<T, SIDE, Edge>(tile, d, p, a0, b0, tx, ty);
}

unsigned grid_axis(long long n, long long max) { return (unsigned)(n < max ? n : max); }

template <bool Host, typename T>
int run_transpose(char *d, const char *s, const transpose_plan &p, cudaStream_t stream) {
  enum { SIDE = tile_side<T>::value };
  if (Host) {
    static T tile[SIDE][SIDE + 1];
    for (long long z = 0; z < p.batches; z++) {
      batch_at at = locate_batch(p, (unsigned long long)z);
      for (long long y = 0; y < p.tiles_b; y++)
        for (long long x = 0; x < p.tiles_a; x++)
          if (tile_inside(p, SIDE, x * SIDE, y * SIDE))
            host_tile<T, SIDE, false>(tile, d + at.doff, s + at.soff, p, x * SIDE, y * SIDE);
          else
            host_tile<T, SIDE, true>(tile, d + at.doff, s + at.soff, p, x * SIDE, y * SIDE);
    }
    return (int)cudaSuccess;
  }
  dim3 grid(grid_axis(p.tiles_a, 0x7fffffff), grid_axis(p.tiles_b, GRID_YZ_MAX),
            grid_axis(p.batches, GRID_YZ_MAX));
  transpose_kernel<T, SIDE><<<grid, dim3(WARP, ROWS), 0, stream>>>(d, s, p);
  return (int)cudaGetLastError();
}

template <bool Host, typename T>
int run_strided(void *dst, const void *src, const tstor__cuda_strided &a, size_t n,
                cudaStream_t stream) {
  char *d = static_cast<char *>(dst);
  const char *s = static_cast<const char *>(src);
  transpose_plan tp;
  if (plan_transpose(a, sizeof(T), tile_side<T>::value, &tp))
    return run_transpose<Host, T>(d, s, tp, stream);
  if (Host) {
    for (size_t i = 0; i < n; i++) strided_body<T>(d, s, a, i);
    return (int)cudaSuccess;
  }
  strided_kernel<T><<<grid_for(n), 256, 0, stream>>>(d, s, a, n);
  return (int)cudaGetLastError();
}

template <bool Host>
int strided_any(void *dst, const void *src, const tstor__cuda_strided *a, size_t element_size,
                cudaStream_t stream) {
  if (a->ndim < 1 || a->ndim > TSTOR__CUDA_STRIDED_MAX_DIM) return -1;
  size_t n = 1;
  for (int d = 0; d < a->ndim; d++) {
    if (a->sizes[d] < 0) return -1;
    n *= (size_t)a->sizes[d];
  }
  if (n == 0) return (int)cudaSuccess;
  if (!strided_aligned(dst, src, *a, element_size == 16 ? 8 : element_size)) return -1;
  switch (element_size) {
    case 1: return run_strided<Host, uint8_t>(dst, src, *a, n, stream);
    case 2: return run_strided<Host, uint16_t>(dst, src, *a, n, stream);
    case 4: return run_strided<Host, uint32_t>(dst, src, *a, n, stream);
    case 8: return run_strided<Host, unsigned long long>(dst, src, *a, n, stream);
    case 16: return run_strided<Host, u128>(dst, src, *a, n, stream);
    default: return -1;
  }
}

fill_plan plan_fill(void *ptr, size_t nbytes, const void *pattern, size_t pattern_size) {
  fill_plan f;
  memset(f.pat.b, 0, sizeof f.pat.b);
  memcpy(f.pat.b, pattern, pattern_size);
  f.head = (16 - (uintptr_t)ptr % 16) % 16;
  if (f.head > nbytes) f.head = nbytes;
  f.nchunks = (nbytes - f.head) / 16;
  f.tail = nbytes - f.head - f.nchunks * 16;
  /* pattern_size divides 16, so every 16-byte word past the head is the same. */
  unsigned char rep[16];
  for (size_t b = 0; b < 16; b++) rep[b] = f.pat.b[(f.head + b) % pattern_size];
  memcpy(&f.rep, rep, sizeof f.rep);
  f.grid = grid_for(f.nchunks > 16 ? f.nchunks : 16); /* at least 16 threads: head, tail */
  return f;
}

}  // namespace

extern "C" int tstor__cuda_launch_convert(void *dst, int dst_dtype, const void *src,
                                          int src_dtype, size_t count, cudaStream_t stream) {
  return convert_any<false>(dst, dst_dtype, src, src_dtype, count, stream);
}

extern "C" int tstor__cuda_launch_strided(void *dst, const void *src,
                                          const tstor__cuda_strided *a, size_t element_size,
                                          cudaStream_t stream) {
  return strided_any<false>(dst, src, a, element_size, stream);
}

extern "C" int tstor__cuda_launch_fill(void *ptr, size_t nbytes, const void *pattern,
                                       size_t pattern_size, cudaStream_t stream) {
  if (nbytes == 0) return (int)cudaSuccess;
  fill_plan f = plan_fill(ptr, nbytes, pattern, pattern_size);
  fill_kernel<<<f.grid, 256, 0, stream>>>(static_cast<unsigned char *>(ptr), f.head, f.nchunks,
                                          f.tail, f.rep, f.pat, (unsigned)pattern_size);
  return (int)cudaGetLastError();
}

#ifdef TSTOR_CUDA_EMULATE
extern "C" int tstor__cuda_emulate_convert(void *dst, int dst_dtype, const void *src,
                                           int src_dtype, size_t count) {
  return convert_any<true>(dst, dst_dtype, src, src_dtype, count, (cudaStream_t)0);
}

extern "C" int tstor__cuda_emulate_strided(void *dst, const void *src,
                                           const tstor__cuda_strided *a, size_t element_size) {
  return strided_any<true>(dst, src, a, element_size, (cudaStream_t)0);
}

extern "C" void tstor__cuda_emulate_fill(void *ptr, size_t nbytes, const void *pattern,
                                         size_t pattern_size) {
  if (nbytes == 0) return;
  fill_plan f = plan_fill(ptr, nbytes, pattern, pattern_size);
  size_t threads = (size_t)f.grid * 256;
  for (size_t tid = 0; tid < threads; tid++)
    fill_body(static_cast<unsigned char *>(ptr), f.head, f.nchunks, f.tail, f.rep, f.pat,
              (unsigned)pattern_size, tid, threads);
}
#endif
