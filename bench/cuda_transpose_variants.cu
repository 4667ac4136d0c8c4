/* Transposing kernels for one case alone, an N x N float32 matrix (8192 by
 * default; out[r][c] = in[c][r]), against cudaMemcpy and a plain copy kernel,
 * in one process: the experiment behind the cuda backend's tiled copy
 * (docs/benchmarks.md, "CUDA"). Each variant's result is checked against the
 * host's transpose. Not part of the build; on a machine with a GPU:
 *
 *   nvcc -O3 -std=c++17 -arch=sm_90 bench/cuda_transpose_variants.cu -o variants && ./variants [N]
 *
 * Variants, by letter: A, the backend's first tile shape (64 x 64, 32 x 8
 * threads, scalar); B, 16-byte loads and stores through the same tile; C,
 * 16-byte cp.async loads into S staged tiles; D, B with two tiles a block at
 * once; E, 32 x 32 tiles of 64 threads. */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1);} } while (0)

static int N = 8192;

// A: the current kernel's shape: 64x64 tiles, 32x8 threads, scalar.
__global__ void __launch_bounds__(256) tA(float *out, const float *in, int n, int ntb, long long ntiles) {
  __shared__ float tile[64][65];
  int tx = threadIdx.x, ty = threadIdx.y;
  for (long long t = blockIdx.x; t < ntiles; t += gridDim.x) {
    int b0 = (int)(t % ntb) * 64, a0 = (int)(t / ntb) * 64; // b: in column, a: in row
#pragma unroll
    for (int c = 0; c < 64; c += 32)
#pragma unroll
      for (int r = 0; r < 64; r += 8) tile[r + ty][c + tx] = in[(size_t)(a0 + r + ty) * n + b0 + c + tx];
    __syncthreads();
#pragma unroll
    for (int r = 0; r < 64; r += 32)
#pragma unroll
      for (int c = 0; c < 64; c += 8) out[(size_t)(b0 + c + ty) * n + a0 + r + tx] = tile[r + tx][c + ty];
    __syncthreads();
  }
}

// B: float4 loads (warp = 4 rows x 8 quads), float4 stores (warp = 8 quads x 4 rows), padded tile.
template <int ORDER, int HINT = 0>
__global__ void __launch_bounds__(256) tB(float *out, const float *in, int n, int ntb, long long ntiles) {
  __shared__ float tile[64][65];
  int t_ = threadIdx.x, lane = t_ & 31, w = t_ >> 5;
  // load mapping
  int lq = lane & 7, lr = lane >> 3;                 // quad 0..7, row 0..3
  int q = lq + 8 * (w & 1), r = lr + 4 * (w >> 1);   // q 0..15, r 0..15
  // store mapping
  int ss = (lane & 7) + 8 * (w & 1), jj = (lane >> 3) + 4 * (w >> 1); // s 0..15, j 0..15
  for (long long t = blockIdx.x; t < ntiles; t += gridDim.x) {
    int b0, a0;
    if (ORDER == 0) { b0 = (int)(t % ntb) * 64; a0 = (int)(t / ntb) * 64; }
    else { a0 = (int)(t % ntb) * 64; b0 = (int)(t / ntb) * 64; }
    float4 v[4];
#pragma unroll
    for (int p = 0; p < 4; p++)
      v[p] = HINT ? __ldcs(reinterpret_cast<const float4 *>(in + (size_t)(a0 + r + 16 * p) * n + b0 + 4 * q))
                  : *reinterpret_cast<const float4 *>(in + (size_t)(a0 + r + 16 * p) * n + b0 + 4 * q);
#pragma unroll
    for (int p = 0; p < 4; p++) {
      float *row = tile[r + 16 * p] + 4 * q;
      row[0] = v[p].x; row[1] = v[p].y; row[2] = v[p].z; row[3] = v[p].w;
    }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < 4; p++) {
      int j = jj + 16 * p;
      float4 o;
      o.x = tile[4 * ss][j]; o.y = tile[4 * ss + 1][j]; o.z = tile[4 * ss + 2][j]; o.w = tile[4 * ss + 3][j];
      if (HINT) __stcs(reinterpret_cast<float4 *>(out + (size_t)(b0 + j) * n + a0 + 4 * ss), o);
      else *reinterpret_cast<float4 *>(out + (size_t)(b0 + j) * n + a0 + 4 * ss) = o;
    }
    __syncthreads();
  }
}

// C: cp.async 16-byte loads into swizzled stages, S stages, float4 stores.
__device__ __forceinline__ void cp16(void *smem, const void *g) {
  unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(g));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int K> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(K)); }

template <int S>
__global__ void __launch_bounds__(256) tC(float *out, const float *in, int n, int ntb, long long ntiles) {
  extern __shared__ float4 st4[];
  float *st = reinterpret_cast<float *>(st4);
  int t_ = threadIdx.x, lane = t_ & 31, w = t_ >> 5;
  int lq = lane & 7, lr = lane >> 3;
  int q = lq + 8 * (w & 1), r = lr + 4 * (w >> 1);
  int ss = (lane & 7) + 8 * (w & 1), jj = (lane >> 3) + 4 * (w >> 1);
  long long first = blockIdx.x, step = gridDim.x;
  long long mine = first < ntiles ? (ntiles - 1 - first) / step + 1 : 0;
  auto issue = [&](long long i) {
    if (i < mine) {
      long long t = first + i * step;
      int b0 = (int)(t % ntb) * 64, a0 = (int)(t / ntb) * 64;
      float *stage = st + (i % S) * 4096;
#pragma unroll
      for (int p = 0; p < 4; p++) {
        int row = r + 16 * p;
        int pq = q ^ ((row >> 2) & 15);
        cp16(stage + row * 64 + 4 * pq, in + (size_t)(a0 + row) * n + b0 + 4 * q);
      }
    }
    cp_commit();
  };
#pragma unroll
  for (int i = 0; i < S - 1; i++) issue(i);
  for (long long i = 0; i < mine; i++) {
    issue(i + S - 1);
    cp_wait<S - 1>();
    __syncthreads();
    long long t = first + i * step;
    int b0 = (int)(t % ntb) * 64, a0 = (int)(t / ntb) * 64;
    const float *stage = st + (i % S) * 4096;
#pragma unroll
    for (int p = 0; p < 4; p++) {
      int j = jj + 16 * p;
      float4 o;
      float *po = &o.x;
#pragma unroll
      for (int k = 0; k < 4; k++) {
        int row = 4 * ss + k;
        int pq = (j >> 2) ^ ((row >> 2) & 15);
        po[k] = stage[row * 64 + 4 * pq + (j & 3)];
      }
      *reinterpret_cast<float4 *>(out + (size_t)(b0 + j) * n + a0 + 4 * ss) = o;
    }
    __syncthreads();
  }
}

// D: like B but two tiles per block iteration (more loads in flight).
__global__ void __launch_bounds__(256) tD(float *out, const float *in, int n, int ntb, long long ntiles) {
  __shared__ float tile[2][64][65];
  int t_ = threadIdx.x, lane = t_ & 31, w = t_ >> 5;
  int lq = lane & 7, lr = lane >> 3;
  int q = lq + 8 * (w & 1), r = lr + 4 * (w >> 1);
  int ss = (lane & 7) + 8 * (w & 1), jj = (lane >> 3) + 4 * (w >> 1);
  for (long long t2 = blockIdx.x; 2 * t2 < ntiles; t2 += gridDim.x) {
    float4 v[2][4];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      long long t = 2 * t2 + h;
      int b0 = (int)(t % ntb) * 64, a0 = (int)(t / ntb) * 64;
#pragma unroll
      for (int p = 0; p < 4; p++)
        v[h][p] = *reinterpret_cast<const float4 *>(in + (size_t)(a0 + r + 16 * p) * n + b0 + 4 * q);
    }
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int p = 0; p < 4; p++) {
        float *row = tile[h][r + 16 * p] + 4 * q;
        row[0] = v[h][p].x; row[1] = v[h][p].y; row[2] = v[h][p].z; row[3] = v[h][p].w;
      }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; h++) {
      long long t = 2 * t2 + h;
      int b0 = (int)(t % ntb) * 64, a0 = (int)(t / ntb) * 64;
#pragma unroll
      for (int p = 0; p < 4; p++) {
        int j = jj + 16 * p;
        float4 o;
        o.x = tile[h][4 * ss][j]; o.y = tile[h][4 * ss + 1][j]; o.z = tile[h][4 * ss + 2][j]; o.w = tile[h][4 * ss + 3][j];
        *reinterpret_cast<float4 *>(out + (size_t)(b0 + j) * n + a0 + 4 * ss) = o;
      }
    }
    __syncthreads();
  }
}

// E: 32x32 tiles, float4, 64 threads (warp = 8 rows x ... ) -- small tiles, many blocks.
__global__ void __launch_bounds__(64) tE(float *out, const float *in, int n, int ntb, long long ntiles) {
  __shared__ float tile[32][33];
  int t_ = threadIdx.x;
  int q = t_ & 7, r = t_ >> 3;          // 8 quads x 8 rows per pass, 4 passes
  int ss = t_ & 7, jj = t_ >> 3;
  for (long long t = blockIdx.x; t < ntiles; t += gridDim.x) {
    int b0 = (int)(t % ntb) * 32, a0 = (int)(t / ntb) * 32;
    float4 v[4];
#pragma unroll
    for (int p = 0; p < 4; p++) v[p] = *reinterpret_cast<const float4 *>(in + (size_t)(a0 + r + 8 * p) * n + b0 + 4 * q);
#pragma unroll
    for (int p = 0; p < 4; p++) { float *row = tile[r + 8 * p] + 4 * q; row[0] = v[p].x; row[1] = v[p].y; row[2] = v[p].z; row[3] = v[p].w; }
    __syncthreads();
#pragma unroll
    for (int p = 0; p < 4; p++) {
      int j = jj + 8 * p;
      float4 o; o.x = tile[4 * ss][j]; o.y = tile[4 * ss + 1][j]; o.z = tile[4 * ss + 2][j]; o.w = tile[4 * ss + 3][j];
      *reinterpret_cast<float4 *>(out + (size_t)(b0 + j) * n + a0 + 4 * ss) = o;
    }
    __syncthreads();
  }
}

__global__ void copy4(float4 *d, const float4 *s, size_t n4) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) d[i] = s[i];
}

static float *g_in, *g_out, *g_ref;
static size_t bytes;

template <typename F> static double timeit(F f, int reps = 30) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; i++) f();
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(a));
  for (int i = 0; i < reps; i++) f();
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms; CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaGetLastError());
  return bytes / (ms / reps * 1e-3) / 1e9;
}

static bool check(const char *name) {
  CK(cudaDeviceSynchronize());
  std::vector<float> h(bytes / 4);
  CK(cudaMemcpy(h.data(), g_out, bytes, cudaMemcpyDeviceToHost));
  std::vector<float> ref(bytes / 4);
  CK(cudaMemcpy(ref.data(), g_ref, bytes, cudaMemcpyDeviceToHost));
  if (memcmp(h.data(), ref.data(), bytes)) { printf("%s: WRONG\n", name); return false; }
  return true;
}

int main(int argc, char **argv) {
  if (argc > 1) N = atoi(argv[1]);
  if (N <= 0 || N % 64) { /* the variants have no edge handling */
    fprintf(stderr, "N must be a positive multiple of 64\n");
    return 2;
  }
  bytes = (size_t)N * N * 4;
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, 0));
  printf("%s, %d SMs, N=%d\n", pr.name, sms, N);
  CK(cudaMalloc(&g_in, bytes)); CK(cudaMalloc(&g_out, bytes)); CK(cudaMalloc(&g_ref, bytes));
  std::vector<float> h((size_t)N * N), ht((size_t)N * N);
  for (size_t i = 0; i < h.size(); i++) h[i] = (float)i;
  for (int r = 0; r < N; r++) for (int c = 0; c < N; c++) ht[(size_t)r * N + c] = h[(size_t)c * N + r];
  CK(cudaMemcpy(g_in, h.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(g_ref, ht.data(), bytes, cudaMemcpyHostToDevice));
  double memcpy_bw = timeit([&] { CK(cudaMemcpyAsync(g_out, g_in, bytes, cudaMemcpyDeviceToDevice)); });
  double copy_bw = timeit([&] { copy4<<<sms * 8, 256>>>((float4 *)g_out, (const float4 *)g_in, bytes / 16); });
  printf("%-40s %8.1f GB/s\n", "cudaMemcpy D2D", memcpy_bw);
  printf("%-40s %8.1f GB/s  %.3f\n", "float4 copy kernel", copy_bw, copy_bw / memcpy_bw);
  int nt64 = N / 64, nt32 = N / 32;
  long long t64 = (long long)nt64 * nt64, t32 = (long long)nt32 * nt32;
  auto row = [&](const char *name, double bw) { printf("%-40s %8.1f GB/s  %.3f\n", name, bw, bw / memcpy_bw); };
  CK(cudaFuncSetAttribute(tC<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * 16384));
  CK(cudaFuncSetAttribute(tC<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 3 * 16384));
  CK(cudaFuncSetAttribute(tC<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * 16384));
  for (int pass = 0; pass < 2; pass++) {
    printf("-- pass %d\n", pass);
    CK(cudaMemset(g_out, 0, bytes));
    row("A scalar 32x8, 1 block/tile", timeit([&] { tA<<<(unsigned)t64, dim3(32, 8)>>>(g_out, g_in, N, nt64, t64); })); check("A");
    row("A scalar, grid sms*8", timeit([&] { tA<<<sms * 8, dim3(32, 8)>>>(g_out, g_in, N, nt64, t64); })); check("A2");
    CK(cudaMemset(g_out, 0, bytes));
    row("B float4, 1 block/tile", timeit([&] { tB<0><<<(unsigned)t64, 256>>>(g_out, g_in, N, nt64, t64); })); check("B");
    CK(cudaMemset(g_out, 0, bytes));
    row("B float4 streaming hints, 1 block/tile", timeit([&] { tB<0, 1><<<(unsigned)t64, 256>>>(g_out, g_in, N, nt64, t64); })); check("Bh");
    row("B float4, a-fastest order", timeit([&] { tB<1><<<(unsigned)t64, 256>>>(g_out, g_in, N, nt64, t64); })); check("B1");
    for (int k = 4; k <= 16; k *= 2) {
      char nm[64]; snprintf(nm, sizeof nm, "B float4, grid sms*%d", k);
      CK(cudaMemset(g_out, 0, bytes));
      row(nm, timeit([&] { tB<0><<<sms * k, 256>>>(g_out, g_in, N, nt64, t64); })); check(nm);
    }
    for (int k = 2; k <= 8; k *= 2) {
      char nm[64];
      snprintf(nm, sizeof nm, "C cp.async 2 stages, grid sms*%d", k);
      CK(cudaMemset(g_out, 0, bytes));
      row(nm, timeit([&] { tC<2><<<sms * k, 256, 2 * 16384>>>(g_out, g_in, N, nt64, t64); })); check(nm);
      snprintf(nm, sizeof nm, "C cp.async 3 stages, grid sms*%d", k);
      CK(cudaMemset(g_out, 0, bytes));
      row(nm, timeit([&] { tC<3><<<sms * k, 256, 3 * 16384>>>(g_out, g_in, N, nt64, t64); })); check(nm);
      snprintf(nm, sizeof nm, "C cp.async 4 stages, grid sms*%d", k);
      CK(cudaMemset(g_out, 0, bytes));
      row(nm, timeit([&] { tC<4><<<sms * k, 256, 4 * 16384>>>(g_out, g_in, N, nt64, t64); })); check(nm);
    }
    CK(cudaMemset(g_out, 0, bytes));
    row("D float4 2 tiles/iter, 1 block/2 tiles", timeit([&] { tD<<<(unsigned)(t64 / 2), 256>>>(g_out, g_in, N, nt64, t64); })); check("D");
    row("D float4 2 tiles/iter, grid sms*8", timeit([&] { tD<<<sms * 8, 256>>>(g_out, g_in, N, nt64, t64); })); check("D2");
    CK(cudaMemset(g_out, 0, bytes));
    row("E float4 32x32 64 thr, 1 block/tile", timeit([&] { tE<<<(unsigned)t32, 64>>>(g_out, g_in, N, nt32, t32); })); check("E");
    row("E float4 32x32, grid sms*32", timeit([&] { tE<<<sms * 32, 64>>>(g_out, g_in, N, nt32, t32); })); check("E2");
  }
  return 0;
}
