// GPU suite for elementwise fusion, part 3: tensors from the default resource, programmatic
// dependent launch on and off, and a case past 2^31 elements in 32-bit pieces (parts 1 and 2:
// test_elementwise_gpu.cu, test_elementwise_gpu_launch.cu). Checked evaluations go through
// fusex_test::run, so CTest runs them eagerly and captured into a graph.
#include <fusex/fusex.hpp>

#include "elementwise_gpu_check.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

using fusex::bfloat16;
using fusex::half;
using namespace fusex_test;

TEST_CASE("gpu: tensors allocate from the default resource and assign expressions", "[gpu][elementwise]") {
  stream_guard sg;
  fusex::tensor<float> a({256, 33}, sg.s);
  fusex::tensor<fusex::bfloat16> b({256, 33}, sg.s);
  fusex_test::run(sg.s, [&](cudaStream_t s) {
    fusex::eval(a, 1.5f, s);  // fill
    b.assign(fusex::sqrt(a) * 2.0f, s);
  });
  std::vector<fusex::bfloat16> hb(256 * 33);
  FUSEX_CUDA_CHECK(
      cudaMemcpyAsync(hb.data(), b.data(), hb.size() * sizeof(fusex::bfloat16), cudaMemcpyDeviceToHost, sg.s));
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
  const float expect = fusex::convert<float>(fusex::convert<fusex::bfloat16>(std::sqrt(1.5f) * 2.0f));
  for (auto v : hb) REQUIRE(fusex::convert<float>(v) == expect);
}

TEST_CASE("gpu: programmatic dependent launch on and off give identical bits", "[gpu][elementwise]") {
  const std::int64_t n = 1 << 20;
  device_array<float> x(n), y1(n), y2(n);
  x.upload(random_values<float>(n, -2, 2, 9));
  stream_guard sg;
  auto xv = fusex::make_view(x.data(), {n});
  // Under graph the chain is captured with (programmatic edges) and without PDL, then replayed.
  auto chain = [&](float* y) {
    fusex_test::run(sg.s, [&](cudaStream_t s) {
      auto yv = fusex::make_view(y, {n});
      fusex::eval(yv, fusex::exp(xv), s);
      for (int i = 0; i < 20; ++i) fusex::eval(yv, fusex::tanh(yv + xv) * 1.01f, s);  // dependent chain
    });
  };
  fusex::set_programmatic_dependent_launch(true);
  chain(y1.data());
  fusex::set_programmatic_dependent_launch(false);
  chain(y2.data());
  fusex::set_programmatic_dependent_launch(true);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
  const auto a = y1.download(), b = y2.download();
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST_CASE("gpu: more than 2^31 elements (32-bit pieces, vector and scalar paths)", "[gpu][elementwise][large]") {
  const std::size_t n = (std::size_t{1} << 31) + 4099;
  device_array<std::uint8_t> x(n), y(n);
  fill_pattern<<<1024, 256>>>(x.data(), n);
  FUSEX_CUDA_CHECK(cudaGetLastError());
  y.poison();
  stream_guard sg;
  FUSEX_CUDA_CHECK(cudaDeviceSynchronize());
  auto xv = fusex::make_view(x.data(), {static_cast<std::int64_t>(n)});
  auto yv = fusex::make_view(y.data(), {static_cast<std::int64_t>(n)});
  // Two launches of about half each (the first at whole 16-byte vectors).
  REQUIRE(fusex::explain(yv, xv * 3 + 1).find("vector width 16 (16-byte accesses), 32-bit indices in 2 pieces") !=
          std::string::npos);
  fusex_test::run(sg.s, [&](cudaStream_t s) { fusex::eval(yv, xv * 3 + 1, s); });
  auto hy = y.download();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) bad += hy[i] != static_cast<std::uint8_t>((i % 251 + 1) * 3 + 1);
  CHECK(bad == 0);
  // Shifted by one element: misaligned, so the scalar path, in two 32-bit pieces.
  auto xs = fusex::make_view(x.data() + 1, {static_cast<std::int64_t>(n - 1)});
  auto ys = fusex::make_view(y.data(), {static_cast<std::int64_t>(n - 1)});
  REQUIRE(fusex::explain(ys, xs - 1).find("scalar accesses, 32-bit indices in 2 pieces") != std::string::npos);
  fusex_test::run(sg.s, [&](cudaStream_t s) { fusex::eval(ys, xs - 1, s); });
  hy = y.download();
  bad = 0;
  for (std::size_t i = 0; i + 1 < n; ++i) bad += hy[i] != static_cast<std::uint8_t>((i + 1) % 251);
  CHECK(bad == 0);
}
