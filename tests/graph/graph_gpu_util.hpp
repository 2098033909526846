#pragma once
// Shared helpers of the graph GPU suites. The fusex expressions are evaluated through the two
// functions below, defined once in test_graph_gpu.cu, so that the suites instantiate two
// expression kernels in all (nvcc time).
#include <fusex/fusex.hpp>

#include "fusex_catch.hpp"
#include "gpu_util.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace graph_test {

using cview = fusex::view<const float>;
using mview = fusex::view<float>;

/// y = relu(x + b) * 2 (b broadcasts), one kernel.
void eval_relu2(mview y, cview x, cview b, cudaStream_t s);
/// y = x * a + c (c broadcasts), one kernel.
void eval_affine(mview y, cview x, float a, cview c, cudaStream_t s);

/// Host references, exact in fp32 for the values the tests use (|x| <= 8, a a power of two).
inline float relu2_ref(float x, float b) {
  const float v = x + b;
  return (v > 0.0f ? v : 0.0f) * 2.0f;
}
inline float affine_ref(float x, float a, float c) { return x * a + c; }

struct stream_guard {
  cudaStream_t s{};
  stream_guard() { FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  stream_guard(const stream_guard&) = delete;
  stream_guard& operator=(const stream_guard&) = delete;
  ~stream_guard() { cudaStreamDestroy(s); }
  operator cudaStream_t() const { return s; }  // NOLINT
};

/// A rank-2 float problem in cudaMalloc'd memory: x [rows, cols] and b [cols] random non-zero
/// inputs, y [rows, cols] poisoned.
struct problem {
  std::int64_t rows, cols;
  std::vector<float> hx, hb;
  fusex_test::device_array<float> x, b, y;
  problem(std::int64_t r, std::int64_t c, unsigned seed)
      : rows(r),
        cols(c),
        hx(fusex_test::random_values<float>(static_cast<std::size_t>(r * c), -3, 3, seed)),
        hb(fusex_test::random_values<float>(static_cast<std::size_t>(c), -3, 3, seed + 1)),
        x(static_cast<std::size_t>(r * c)),
        b(static_cast<std::size_t>(c)),
        y(static_cast<std::size_t>(r * c)) {
    x.upload(hx);
    b.upload(hb);
    y.poison();
  }
  mview xv() const { return fusex::make_view(x.data(), {rows, cols}); }
  cview bv() const { return fusex::make_view(static_cast<const float*>(b.data()), {cols}); }
  mview yv() const { return fusex::make_view(y.data(), {rows, cols}); }
  /// Exact relu2 of the current hx, hb against y's contents ("" when all match).
  std::string check_relu2() const {
    const auto got = y.download();
    for (std::size_t i = 0; i < got.size(); ++i) {
      const float e = relu2_ref(hx[i], hb[i % static_cast<std::size_t>(cols)]);
      if (got[i] != e) {
        return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", expected " + std::to_string(e);
      }
    }
    return "";
  }
};

/// Bytes equal.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace graph_test
