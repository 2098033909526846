// A minimal fusex consumer: fusex's headers through nvcc (main.cu) and the host compiler
// (host_part.cpp), linked against the CUDA runtime that fusex::fusex brings.
#if __has_include(<fusex/fusex.hpp>)
#include <fusex/fusex.hpp>
#else
#include <fusex/core/view.hpp>
#endif
#include <fusex/version.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

int fusex_consumer_host_part();

__global__ void fusex_consumer_fill(float* p, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

int main() {
  if (std::strcmp(fusex::version_string, FUSEX_CONSUMER_EXPECTED_VERSION) != 0) {
    std::printf("fusex-consumer: headers say fusex %s, expected %s\n", fusex::version_string,
                FUSEX_CONSUMER_EXPECTED_VERSION);
    return 1;
  }
  float host[6] = {};
  fusex::view<float> v(host, {2, 3});
  // broadcast_shapes is defined in the headers, or (fusex::compiled) in the fusex_compiled library.
  if (v.size() != 6 || fusex_consumer_host_part() != 12 ||
      !(fusex::broadcast_shapes({2, 1}, {3}) == fusex::shape_t{2, 3})) {
    std::printf("fusex-consumer: unexpected view sizes\n");
    return 1;
  }
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    // Linking and starting are what is checked here; a device is optional.
    std::printf("fusex-consumer: fusex %s OK (no CUDA device: %s)\n", fusex::version_string,
                err != cudaSuccess ? cudaGetErrorName(err) : "none found");
    return 0;
  }
  float* d = nullptr;
  if (cudaMalloc(&d, 6 * sizeof(float)) != cudaSuccess) return 1;
  fusex_consumer_fill<<<1, 32>>>(d, 6, 1.0f);
  err = cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost);
  cudaFree(d);
  if (err != cudaSuccess || host[5] != 1.0f) {
    std::printf("fusex-consumer: kernel check failed (%s)\n", cudaGetErrorName(err));
    return 1;
  }
  std::printf("fusex-consumer: fusex %s OK on %d device(s)\n", fusex::version_string, count);
  return 0;
}
