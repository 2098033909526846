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
#include <cstdlib>
#include <cstring>

#if defined(FUSEX_TEST_NEEDS_GPU)
#include <fusex/memory/resource.hpp>
#endif

int main(int argc, char* argv[]) {
#if defined(FUSEX_TEST_NEEDS_GPU)
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf(
        "SKIPPED: no NVIDIA GPU or driver was found (cudaGetDeviceCount: %s, %d device(s)); "
        "this program's tests need a GPU and were not run.\n",
        err != cudaSuccess ? cudaGetErrorName(err) : "cudaSuccess", count);
    return 77;
  }
  // Diagnostics: FUSEX_TEST_DEFAULT_RESOURCE=async runs a suite with cudaMallocAsync as the default
  // resource instead of the arena, to tell an allocator problem from a kernel problem.
  static fusex::cuda_async_resource async_resource;
  const char* r = std::getenv("FUSEX_TEST_DEFAULT_RESOURCE");
  if (r != nullptr && std::strcmp(r, "async") == 0) {
    fusex::set_default_resource(async_resource);
    std::printf("default resource: cudaMallocAsync (FUSEX_TEST_DEFAULT_RESOURCE=async)\n");
  }
#endif
  return Catch::Session().run(argc, argv);
}
