#pragma once
// What the probes share (not built by CMake): the library, its checked CUDA calls, and a
// back-to-back timer. Build a probe from the repository root with
// `nvcc -std=c++17 -O3 -arch=sm_90 -Iinclude --extended-lambda --expt-relaxed-constexpr FILE`.
#include <fusex/fusex.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

using i64 = long long;
namespace fd = fusex::detail;

/// Microseconds per call of `f` (which launches on the default stream), `iters` calls back to
/// back after ten warm-up calls, timed by two events.
template <class F>
float timeit(F f, int iters = 100) {
  cudaEvent_t a, b;
  FUSEX_CUDA_CHECK(cudaEventCreate(&a));
  FUSEX_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 10; ++i) f();
  FUSEX_CUDA_CHECK(cudaEventRecord(a));
  for (int i = 0; i < iters; ++i) f();
  FUSEX_CUDA_CHECK(cudaEventRecord(b));
  FUSEX_CUDA_CHECK(cudaEventSynchronize(b));
  FUSEX_CUDA_CHECK(cudaGetLastError());
  float ms = 0;
  FUSEX_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  FUSEX_CUDA_CHECK(cudaEventDestroy(a));
  FUSEX_CUDA_CHECK(cudaEventDestroy(b));
  return ms * 1000.f / static_cast<float>(iters);
}
