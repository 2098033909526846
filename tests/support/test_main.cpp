// Shared main for fusex test programs. GPU test programs (FUSEX_TEST_NEEDS_GPU) first look for a
// usable CUDA device; without one they print why and exit with 77, which CTest reports as skipped.
#if defined(FUSEX_CATCH2_V3)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char* argv[]) {
#if defined(FUSEX_TEST_NEEDS_GPU)
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no usable CUDA device (cudaGetDeviceCount: %s, %d device(s)); "
                "GPU tests need an NVIDIA GPU.\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "ok", count);
    return 77;
  }
#endif
  return Catch::Session().run(argc, argv);
}
