// The baseline of bench/compile_time/compile_time.sh: examples/relu_bias's program with a
// hand-written kernel instead of fusex (the same host work: allocate, copy, launch, check).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(call)                                                      \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

__global__ void relu_bias(const float* x, const float* bias, float* y, long long rows, long long cols) {
  const long long n = rows * cols;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const float v = x[i] + bias[i % cols];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 0;
  const long long rows = 1000, cols = 784;
  std::vector<float> hx(rows * cols), hb(cols), hy(rows * cols);
  for (std::size_t i = 0; i < hx.size(); ++i) hx[i] = std::sin(0.1f * static_cast<float>(i));
  for (std::size_t i = 0; i < hb.size(); ++i) hb[i] = 0.001f * static_cast<float>(i) - 0.3f;
  float *d_x, *d_bias, *d_y;
  CHECK_CUDA(cudaMalloc(&d_x, hx.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_bias, hb.size() * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&d_y, hy.size() * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(d_x, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_bias, hb.data(), hb.size() * sizeof(float), cudaMemcpyHostToDevice));
  relu_bias<<<(rows * cols + 255) / 256, 256>>>(d_x, d_bias, d_y, rows, cols);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(cudaMemcpy(hy.data(), d_y, hy.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::size_t bad = 0;
  for (long long i = 0; i < rows * cols; ++i) {
    const float v = hx[i] + hb[i % cols];
    bad += hy[i] != (v > 0 ? v : 0.0f);
  }
  CHECK_CUDA(cudaFree(d_x));
  CHECK_CUDA(cudaFree(d_bias));
  CHECK_CUDA(cudaFree(d_y));
  std::printf("hand relu_bias: %zu wrong\n", bad);
  return bad == 0 ? 0 : 1;
}
