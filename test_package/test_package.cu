// Conan test_package: compiles fusex's headers with nvcc and links the CUDA runtime through
// fusex::fusex. Running it needs no GPU.
#if __has_include(<fusex/fusex.hpp>)
#include <fusex/fusex.hpp>
#else
#include <fusex/core/view.hpp>
#endif
#include <fusex/version.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>

long long fusex_test_package_host_part();

int main() {
  float host[6] = {};
  fusex::view<float> v(host, {2, 3});
  // broadcast_shapes is defined in the headers, or (fusex::compiled) in the fusex_compiled library.
  const bool ok = v.size() == 6 && fusex_test_package_host_part() == 12 &&
                  fusex::broadcast_shapes({2, 1}, {3}) == fusex::shape_t{2, 3};
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  std::printf("fusex-test-package: fusex %s %s, view of %lld elements, %d CUDA device(s)%s%s\n", fusex::version_string,
              ok ? "OK" : "FAILED", static_cast<long long>(v.size()), err == cudaSuccess ? count : 0,
              err == cudaSuccess ? "" : ": ", err == cudaSuccess ? "" : cudaGetErrorName(err));
  return ok ? 0 : 1;
}
