// fusex with memory it does not own: thrust::device_vector and raw cudaMalloc pointers are viewed
// (no copy) and evaluated into, and a fusex result feeds thrust::reduce. Needs a GPU (exits 77 with
// --require-device when there is none, else 0).
#include <fusex/fusex.hpp>

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>

#include <cmath>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  const bool require = argc > 1 && std::strcmp(argv[1], "--require-device") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("thrust_interop: no usable CUDA device\n");
    return require ? 77 : 0;
  }
  const std::int64_t rows = 256, cols = 128;
  cudaStream_t s;
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  thrust::device_vector<float> x(rows * cols);
  thrust::sequence(x.begin(), x.end(), 0.0f, 0.001f);  // 0, 0.001, 0.002, ...
  float* bias = nullptr;                               // a raw device pointer
  FUSEX_CUDA_CHECK(cudaMalloc(&bias, cols * sizeof(float)));
  FUSEX_CUDA_CHECK(cudaMemset(bias, 0, cols * sizeof(float)));
  thrust::device_vector<float> y(rows * cols);
  FUSEX_CUDA_CHECK(cudaDeviceSynchronize());  // thrust ran on the default stream

  // Views over memory fusex does not own: thrust::raw_pointer_cast gives the device pointer.
  auto xv = fusex::make_view(thrust::raw_pointer_cast(x.data()), {rows, cols});
  auto bv = fusex::make_view(bias, {cols});
  auto yv = fusex::make_view(thrust::raw_pointer_cast(y.data()), {rows, cols});
  fusex::eval(bv, 1.0f, s);            // fill the raw buffer
  fusex::eval(yv, xv * 2.0f + bv, s);  // one kernel into thrust's vector
  const float total = thrust::reduce(thrust::cuda::par.on(s), y.begin(), y.end(), 0.0f);  // thrust on fusex's result
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));

  const double n = static_cast<double>(rows * cols);
  const double expected = 2.0 * 0.001 * n * (n - 1) / 2 + n;  // sum of 2 * 0.001 i + 1
  const double rel = std::fabs(total - expected) / expected;
  std::printf("thrust_interop: sum %.6g, expected %.6g (relative error %.2g)\n", total, expected, rel);
  FUSEX_CUDA_CHECK(cudaFree(bias));
  FUSEX_CUDA_CHECK(cudaStreamDestroy(s));
  return rel < 1e-4 ? 0 : 1;
}
