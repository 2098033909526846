// Hand-written reference row kernels for [16384, 4096] (not part of the build; evidence for
// docs/performance.md): what the H200 reaches with one block of 256 threads per row, 16 elements
// per thread in registers, cub::BlockReduce. Variants: two-level (max then sum; mean then squared
// deviations) and one-level online (logsumexp's and Welford's combines, as fusex's row kernel).
// Build: nvcc -O3 -std=c++17 -arch=sm_90 bench/reduce/row_reference.cu -o row_reference
// Output of the H200 run: bench/results/logs/row_reference-2026-12-03.txt
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cub/block/block_reduce.cuh>
#include <cstdio>
#include <cstdlib>
#include <vector>
#define CK(x)                                        \
  do {                                               \
    cudaError_t e = (x);                             \
    if (e != cudaSuccess) {                          \
      printf("%s: %s\n", #x, cudaGetErrorString(e)); \
      exit(1);                                       \
    }                                                \
  } while (0)
constexpr int TPB = 256;
template <class T>
struct vecn {
  static constexpr int n = 16 / sizeof(T);
};
template <class T>
__device__ float tof(T v) {
  return static_cast<float>(v);
}
template <>
__device__ float tof(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <class T>
__device__ T fromf(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __nv_bfloat16 fromf(float v) {
  return __float2bfloat16(v);
}

template <class T>
struct alignas(16) pack {
  T v[vecn<T>::n];
};
template <class T>
__device__ void load_row(const T* row, float (&x)[16]) {
  constexpr int V = vecn<T>::n, C = 16 / V;
  const pack<T>* p = reinterpret_cast<const pack<T>*>(row);
  pack<T> r[C];
#pragma unroll
  for (int c = 0; c < C; ++c) r[c] = p[threadIdx.x + c * TPB];
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int l = 0; l < V; ++l) x[c * V + l] = tof(r[c].v[l]);
}
template <class T>
__device__ void store_row(T* row, const float (&y)[16]) {
  constexpr int V = vecn<T>::n, C = 16 / V;
  pack<T>* p = reinterpret_cast<pack<T>*>(row);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    pack<T> r;
#pragma unroll
    for (int l = 0; l < V; ++l) r.v[l] = fromf<T>(y[c * V + l]);
    p[threadIdx.x + c * TPB] = r;
  }
}
using BR = cub::BlockReduce<float, TPB>;
struct mx {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class T>
__global__ void __launch_bounds__(TPB) softmax_2level(const T* x, T* y, int cols) {
  __shared__ typename BR::TempStorage ts;
  __shared__ float bc;
  float v[16];
  load_row(x + size_t(blockIdx.x) * cols, v);
  float m = v[0];
#pragma unroll
  for (int i = 1; i < 16; ++i) m = fmaxf(m, v[i]);
  m = BR(ts).Reduce(m, mx{});
  if (threadIdx.x == 0) bc = m;
  __syncthreads();
  m = bc;
  float s = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    v[i] = expf(v[i] - m);
    s += v[i];
  }
  __syncthreads();
  s = BR(ts).Sum(s);
  if (threadIdx.x == 0) bc = 1.0f / s;
  __syncthreads();
  const float r = bc;
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] *= r;
  store_row(y + size_t(blockIdx.x) * cols, v);
}
// exp recomputed in the epilogue, as an expression would: exp(x - (m + log s)).
template <class T>
__global__ void __launch_bounds__(TPB) softmax_2level_lse(const T* x, T* y, int cols) {
  __shared__ typename BR::TempStorage ts;
  __shared__ float bc;
  float v[16];
  load_row(x + size_t(blockIdx.x) * cols, v);
  float m = v[0];
#pragma unroll
  for (int i = 1; i < 16; ++i) m = fmaxf(m, v[i]);
  m = BR(ts).Reduce(m, mx{});
  if (threadIdx.x == 0) bc = m;
  __syncthreads();
  m = bc;
  float s = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) s += expf(v[i] - m);
  __syncthreads();
  s = BR(ts).Sum(s);
  if (threadIdx.x == 0) bc = m + logf(s);
  __syncthreads();
  const float lse = bc;
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = expf(v[i] - lse);
  store_row(y + size_t(blockIdx.x) * cols, v);
}
struct ms {
  float m, s;
};
struct ms_combine {
  __device__ ms operator()(ms a, ms b) const {
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
  }
};
template <class T>
__global__ void __launch_bounds__(TPB) softmax_online(const T* x, T* y, int cols) {
  using BRm = cub::BlockReduce<ms, TPB>;
  __shared__ typename BRm::TempStorage ts;
  __shared__ float bc;
  float v[16];
  load_row(x + size_t(blockIdx.x) * cols, v);
  float m = v[0];
#pragma unroll
  for (int i = 1; i < 16; ++i) m = fmaxf(m, v[i]);
  float s = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) s += expf(v[i] - m);
  ms a = BRm(ts).Reduce(ms{m, s}, ms_combine{});
  if (threadIdx.x == 0) bc = a.m + logf(a.s);
  __syncthreads();
  const float lse = bc;
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = expf(v[i] - lse);
  store_row(y + size_t(blockIdx.x) * cols, v);
}
template <class T>
__global__ void __launch_bounds__(TPB) layer_norm_2level(const T* x, T* y, const T* g, const T* b, int cols) {
  __shared__ typename BR::TempStorage ts;
  __shared__ float bc;
  float v[16], gv[16], bv[16];
  load_row(x + size_t(blockIdx.x) * cols, v);
  float s = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) s += v[i];
  s = BR(ts).Sum(s);
  if (threadIdx.x == 0) bc = s / cols;
  __syncthreads();
  const float mean = bc;
  float q = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const float d = v[i] - mean;
    q += d * d;
  }
  __syncthreads();
  q = BR(ts).Sum(q);
  if (threadIdx.x == 0) bc = rsqrtf(q / cols + 1e-5f);
  __syncthreads();
  const float r = bc;
  load_row(g, gv);
  load_row(b, bv);
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = (v[i] - mean) * r * gv[i] + bv[i];
  store_row(y + size_t(blockIdx.x) * cols, v);
}
struct wf {
  float n, mean, m2;
};
struct wf_combine {
  __device__ wf operator()(wf a, wf b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    const float n = a.n + b.n, d = b.mean - a.mean, wb = b.n / n;
    return {n, a.mean + d * wb, a.m2 + b.m2 + d * d * a.n * wb};
  }
};
template <class T>
__global__ void __launch_bounds__(TPB) layer_norm_welford(const T* x, T* y, const T* g, const T* b, int cols) {
  using BRw = cub::BlockReduce<wf, TPB>;
  __shared__ typename BRw::TempStorage ts;
  __shared__ float bm, br;
  float v[16], gv[16], bv[16];
  load_row(x + size_t(blockIdx.x) * cols, v);
  float m = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) m += v[i] * (1.0f / 16);
  float q = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const float d = v[i] - m;
    q += d * d;
  }
  wf a = BRw(ts).Reduce(wf{16.f, m, q}, wf_combine{});
  if (threadIdx.x == 0) {
    bm = a.mean;
    br = rsqrtf(a.m2 / a.n + 1e-5f);
  }
  __syncthreads();
  const float mean = bm, r = br;
  load_row(g, gv);
  load_row(b, bv);
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = (v[i] - mean) * r * gv[i] + bv[i];
  store_row(y + size_t(blockIdx.x) * cols, v);
}
template <class T>
__global__ void __launch_bounds__(TPB) rms_norm_ref(const T* x, T* y, const T* g, int cols) {
  __shared__ typename BR::TempStorage ts;
  __shared__ float bc;
  float v[16], gv[16];
  load_row(x + size_t(blockIdx.x) * cols, v);
  float s = 0;
#pragma unroll
  for (int i = 0; i < 16; ++i) s += v[i] * v[i];
  s = BR(ts).Sum(s);
  if (threadIdx.x == 0) bc = rsqrtf(s / cols + 1e-6f);
  __syncthreads();
  const float r = bc;
  load_row(g, gv);
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = v[i] * r * gv[i];
  store_row(y + size_t(blockIdx.x) * cols, v);
}
template <class F>
float time_ms(F f, int reps = 50) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  CK(cudaEventRecord(a));
  for (int i = 0; i < reps; ++i) f();
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaGetLastError());
  return ms / reps;
}
template <class T>
void run(const char* tname) {
  const int rows = 16384, cols = 4096;
  const size_t n = size_t(rows) * cols, bytes = n * sizeof(T);
  T *x, *y, *g, *b;
  CK(cudaMalloc(&x, bytes));
  CK(cudaMalloc(&y, bytes));
  CK(cudaMalloc(&g, cols * sizeof(T)));
  CK(cudaMalloc(&b, cols * sizeof(T)));
  std::vector<T> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = T(float((i * 2654435761u) % 1000) / 500.0f - 1.0f);
  CK(cudaMemcpy(x, h.data(), bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(g, h.data(), cols * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, h.data() + cols, cols * sizeof(T), cudaMemcpyHostToDevice));
  const float copy = time_ms([&] { CK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice)); });
  auto rep = [&](const char* name, float ms) {
    printf("%-22s %-5s %8.2f us  %7.0f GB/s  %.3f of copy\n", name, tname, ms * 1e3, 2.0 * bytes / ms / 1e6, copy / ms);
  };
  rep("copy", copy);
  rep("softmax_2level", time_ms([&] { softmax_2level<T><<<rows, TPB>>>(x, y, cols); }));
  rep("softmax_2level_lse", time_ms([&] { softmax_2level_lse<T><<<rows, TPB>>>(x, y, cols); }));
  rep("softmax_online", time_ms([&] { softmax_online<T><<<rows, TPB>>>(x, y, cols); }));
  rep("layer_norm_2level", time_ms([&] { layer_norm_2level<T><<<rows, TPB>>>(x, y, g, b, cols); }));
  rep("layer_norm_welford", time_ms([&] { layer_norm_welford<T><<<rows, TPB>>>(x, y, g, b, cols); }));
  rep("rms_norm", time_ms([&] { rms_norm_ref<T><<<rows, TPB>>>(x, y, g, cols); }));
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaFree(g));
  CK(cudaFree(b));
}
int main() {
  run<float>("f32");
  run<__nv_bfloat16>("bf16");
  return 0;
}
