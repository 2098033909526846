// A fusex::matmul consumer: <fusex/matmul.hpp> through nvcc, linked with cuBLASLt by the
// fusex::matmul target. Checks the host backend always and the device path when a GPU exists.
#include <fusex/fusex.hpp>
#include <fusex/matmul.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  // y = relu(x w^T + b) with x [2, 3], w [4, 3], b [4].
  std::vector<float> x{1, 2, 3, -1, 0, 1}, w(12, 0.5f), b{0, -10, 1, 2}, y(8, -1.0f), expect(8);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      const float s = 0.5f * (x[i * 3] + x[i * 3 + 1] + x[i * 3 + 2]) + b[j];
      expect[i * 4 + j] = s > 0 ? s : 0;
    }
  fusex::view<float> xv(x.data(), {2, 3}), wv(w.data(), {4, 3}), bv(b.data(), {4}), yv(y.data(), {2, 4});
  fusex::host::eval(yv, fusex::relu(fusex::linear(xv, wv, bv)));
  for (int i = 0; i < 8; ++i)
    if (std::fabs(y[i] - expect[i]) > 1e-6f) {
      std::printf("fusex-consumer-matmul: host result %d is %g, expected %g\n", i, y[i], expect[i]);
      return 1;
    }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("fusex-consumer-matmul: OK (host backend; no CUDA device)\n");
    return 0;
  }
  float* d = nullptr;
  if (cudaMalloc(&d, (6 + 12 + 4 + 8) * sizeof(float)) != cudaSuccess) return 1;
  cudaMemcpy(d, x.data(), 6 * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d + 6, w.data(), 12 * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(d + 18, b.data(), 4 * sizeof(float), cudaMemcpyHostToDevice);
  fusex::matmul_options lt;
  lt.path = fusex::matmul_path::cublaslt;  // exercise the cuBLASLt link
  fusex::eval(fusex::make_view(d + 22, {2, 4}),
              fusex::relu(fusex::linear(fusex::make_view(d, {2, 3}), fusex::make_view(d + 6, {4, 3}),
                                        fusex::make_view(d + 18, {4}), lt)),
              cudaStream_t{});
  std::vector<float> got(8);
  const cudaError_t err = cudaMemcpy(got.data(), d + 22, 8 * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(d);
  for (int i = 0; i < 8; ++i)
    if (err != cudaSuccess || std::fabs(got[i] - expect[i]) > 1e-5f) {
      std::printf("fusex-consumer-matmul: device result %d is %g, expected %g\n", i, got[i], expect[i]);
      return 1;
    }
  std::printf("fusex-consumer-matmul: OK on %d device(s)\n", count);
  return 0;
}
