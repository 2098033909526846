// Sizes past 2^31 elements (label `large`, run by tools/ci/gpu_gates.sh): the elementwise kernel in
// 32-bit pieces, a full and a row reduction over more than 2^31 elements, and a copy.
// int8 elements keep the memory at ~2.2 GB per operand. With less than 8 GB free on the device the
// program prints "SKIPPED: ..." and exits with 77 (CTest: skipped; a gate must count that as not
// tested, never as passed): it never passes without testing. Every evaluation goes through
// fusex_test::run, so test_large_gpu.graph runs the same checks captured into a graph and replayed.
#include "fusex_catch.hpp"
#include "gpu_util.hpp"

#include <fusex/fusex.hpp>
#include <fusex/memory/memory.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

namespace {
constexpr std::int64_t n = (std::int64_t{1} << 31) + 4099;  // past 2^31, not a multiple of 16

// Exits the program with 77 (skipped), saying why, when the device has less than 8 GB free. Catch2
// v2 has no SKIP, and a WARN and return would report a pass for a test that ran nothing.
void skip_unless_enough_memory() {
  std::size_t free_b = 0, total = 0;
  FUSEX_CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
  if (free_b >= (std::size_t{8} << 30)) return;
  std::cout.flush();
  std::printf("SKIPPED: test_large_gpu needs 8 GB of free device memory; %.2f GB of %.2f GB are free. Exit code 77.\n",
              static_cast<double>(free_b) / (1u << 30), static_cast<double>(total) / (1u << 30));
  std::fflush(stdout);
  std::exit(77);
}

template <class T>
T read_at(const T* d, std::int64_t i) {
  T x{};
  FUSEX_CUDA_CHECK(cudaMemcpy(&x, d + i, sizeof(T), cudaMemcpyDeviceToHost));
  return x;
}
}  // namespace

TEST_CASE("large (GPU): elementwise, reductions and copy past 2^31 elements", "[large][gpu]") {
  skip_unless_enough_memory();
  INFO("launch " << fusex_test::launch_path_name());
  cudaStream_t s;
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::int8_t *x = nullptr, *y = nullptr;
  FUSEX_CUDA_CHECK(cudaMalloc(&x, static_cast<std::size_t>(n)));
  FUSEX_CUDA_CHECK(cudaMalloc(&y, static_cast<std::size_t>(n)));
  const auto vx = fusex::make_view(x, {n});
  const auto vy = fusex::make_view(y, {n});

  // Elementwise: x = 1 everywhere, then y = x + 2 (launched in 32-bit pieces).
  CHECK(fusex::explain(vy, vx + std::int8_t{2}).find("32-bit indices in 2 pieces") != std::string::npos);
  fusex_test::run(s, [&](cudaStream_t st) {
    fusex::eval(vx, std::int8_t{1}, st);
    fusex::eval(vy, vx + std::int8_t{2}, st);
  });
  for (std::int64_t i : {std::int64_t{0}, (std::int64_t{1} << 31) - 1, std::int64_t{1} << 31, n - 1}) {
    INFO("element " << i);
    CHECK(read_at(y, i) == 3);
  }

  // Full reduction over n elements: sum of ones as int64.
  std::int64_t* d_sum = nullptr;
  FUSEX_CUDA_CHECK(cudaMalloc(&d_sum, sizeof(std::int64_t)));
  fusex_test::run(s, [&](cudaStream_t st) {
    fusex::eval(fusex::make_view(d_sum, {}), fusex::sum(fusex::cast<std::int64_t>(vx)), st);
  });
  CHECK(read_at(d_sum, 0) == n);

  // Row reduction: 2 rows of n/2 (> 2^30 each, 2^31 + in all), sum of y = 3 per element.
  const std::int64_t half_n = n / 2;
  std::int64_t* d_rows = nullptr;
  FUSEX_CUDA_CHECK(cudaMalloc(&d_rows, 2 * sizeof(std::int64_t)));
  const auto m = fusex::make_view(y, {2, half_n});
  fusex_test::run(s, [&](cudaStream_t st) {
    fusex::eval(fusex::make_view(d_rows, {2}), fusex::sum(fusex::cast<std::int64_t>(m), -1), st);
  });
  CHECK(read_at(d_rows, 0) == 3 * half_n);
  CHECK(read_at(d_rows, 1) == 3 * half_n);

  // The row kernel in pieces: 32768 rows of 65536 (2^31 elements) are two 32-bit launches of
  // 16384 rows (the plan printer says so; host-tested in test_index32_split_host.cpp).
  const std::int64_t wide_rows = 32768, wide_cols = 65536;
  std::int64_t* d_wide = nullptr;
  FUSEX_CUDA_CHECK(cudaMalloc(&d_wide, wide_rows * sizeof(std::int64_t)));
  FUSEX_CUDA_CHECK(cudaMemsetAsync(d_wide, 0xff, wide_rows * sizeof(std::int64_t), s));  // poisoned
  const auto wide = fusex::make_view(y, {wide_rows, wide_cols});
  const auto wide_out = fusex::make_view(d_wide, {wide_rows});
  CHECK(fusex::explain(wide_out, fusex::sum(fusex::cast<std::int64_t>(wide), -1))
            .find("launched in 2 pieces of at most 16384 rows") != std::string::npos);
  fusex_test::run(s,
                  [&](cudaStream_t st) { fusex::eval(wide_out, fusex::sum(fusex::cast<std::int64_t>(wide), -1), st); });
  std::vector<std::int64_t> h_wide(static_cast<std::size_t>(wide_rows));
  FUSEX_CUDA_CHECK(cudaMemcpyAsync(h_wide.data(), d_wide, wide_rows * sizeof(std::int64_t), cudaMemcpyDeviceToHost, s));
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  std::int64_t wrong = 0;
  for (std::int64_t v : h_wide) wrong += v != 3 * wide_cols;
  CHECK(wrong == 0);
  FUSEX_CUDA_CHECK(cudaFree(d_wide));

  // Copy path: x <- y through a strided (every element, reversed rows) view and a plain copy.
  fusex_test::run(s, [&](cudaStream_t st) { fusex::eval(vx, vy, st); });
  CHECK(read_at(x, n - 1) == 3);
  CHECK(read_at(x, std::int64_t{1} << 31) == 3);

  FUSEX_CUDA_CHECK(cudaFree(d_rows));
  FUSEX_CUDA_CHECK(cudaFree(d_sum));
  FUSEX_CUDA_CHECK(cudaFree(y));
  FUSEX_CUDA_CHECK(cudaFree(x));
  FUSEX_CUDA_CHECK(cudaStreamDestroy(s));
}
