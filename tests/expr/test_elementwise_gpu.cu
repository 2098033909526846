// GPU suite for elementwise fusion: every op and dtype on the device against a double-precision
// reference computed here on the host, on random non-zero inputs with poisoned outputs; layouts
// (odd sizes, empty, misaligned, strided, transposed, broadcast), a case past 2^31 elements,
// multi-output, user functors and lambdas, and the one-kernel guarantee by stream capture. Every
// evaluation whose results are checked is submitted through fusex_test::run, so CTest runs each case
// eagerly and (test_elementwise_gpu.graph) captured into a graph and replayed.
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

namespace {
struct scale_shift {
  float scale;
  __host__ __device__ float operator()(float a, float b) const { return a * scale + b; }
};

// Runs `run(x, b, y)` on a [rows, cols] float problem with bias [cols] and compares with `ref`.
template <class Launch, class Ref>
void check_layout(const char* what, std::int64_t rows, std::int64_t cols, Launch launch, Ref ref) {
  INFO(what << " [" << rows << ", " << cols << "], launch " << launch_path_name());
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  const auto hx = random_values<float>(n + 8, -3, 3, 5);
  const auto hb = random_values<float>(static_cast<std::size_t>(cols) + 8, -3, 3, 6);
  device_array<float> x(n + 8), b(static_cast<std::size_t>(cols) + 8), y(n + 8);
  x.upload(hx);
  b.upload(hb);
  y.poison();
  stream_guard sg;
  fusex_test::run(sg.s, [&](cudaStream_t s) { launch(x.data(), b.data(), y.data(), s); });
  const auto hy = y.download();
  std::vector<double> expect;
  std::vector<float> got;
  ref(hx, hb, hy, expect, got);
  const std::string err = compare(got, expect, 4e-6);
  INFO(err);
  CHECK(err.empty());
}
}  // namespace

TEST_CASE("gpu: layouts: odd sizes, empty, misaligned, strided, transposed, broadcast", "[gpu][elementwise]") {
  for (std::int64_t cols : {1, 3, 4, 5, 127, 1024, 4099}) {
    for (std::int64_t rows : {1, 7, 64}) {
      check_layout(
          "relu(x + bias)", rows, cols,
          [&](float* x, float* b, float* y, cudaStream_t s) {
            fusex::eval(fusex::make_view(y, {rows, cols}),
                        fusex::relu(fusex::make_view(x, {rows, cols}) + fusex::make_view(b, {cols})), s);
          },
          [&](const auto& hx, const auto& hb, const auto& hy, auto& expect, auto& got) {
            for (std::int64_t r = 0; r < rows; ++r)
              for (std::int64_t c = 0; c < cols; ++c) {
                const double v = double(hx[r * cols + c]) + hb[c];
                expect.push_back(v > 0 ? v : 0);
                got.push_back(hy[r * cols + c]);
              }
            CHECK(std::isnan(hy[rows * cols]));  // nothing written past the end
          });
      // Misaligned by one element: the scalar path.
      check_layout(
          "misaligned x + bias", rows, cols,
          [&](float* x, float* b, float* y, cudaStream_t s) {
            fusex::eval(fusex::make_view(y + 1, {rows, cols}),
                        fusex::make_view(x + 1, {rows, cols}) * 2.0f + fusex::make_view(b + 3, {cols}), s);
          },
          [&](const auto& hx, const auto& hb, const auto& hy, auto& expect, auto& got) {
            for (std::int64_t i = 0; i < rows * cols; ++i) {
              expect.push_back(2.0 * hx[i + 1] + hb[i % cols + 3]);
              got.push_back(hy[i + 1]);
            }
            CHECK(std::isnan(hy[0]));
          });
    }
  }
  check_layout(
      "transposed destination, [M,1] + [1,N] broadcast", 33, 65,
      [&](float* x, float* b, float* y, cudaStream_t s) {
        auto col = fusex::make_view(x, {33, 1});
        auto row = fusex::make_view(b, {1, 65});
        auto yt = fusex::make_view(y, {65, 33}).transpose(0, 1);  // [33, 65] with strides [1, 33]
        fusex::eval(yt, col * row, s);
      },
      [&](const auto& hx, const auto& hb, const auto& hy, auto& expect, auto& got) {
        for (int r = 0; r < 33; ++r)
          for (int c = 0; c < 65; ++c) {
            expect.push_back(double(hx[r]) * hb[c]);
            got.push_back(hy[c * 33 + r]);
          }
      });
  check_layout(
      "strided (step 2) input and sliced destination", 16, 100,
      [&](float* x, float* b, float* y, cudaStream_t s) {
        auto xs = fusex::make_view(x, {16, 100}).slice(1, 0, 100, 2);  // [16, 50]
        auto ys = fusex::make_view(y, {16, 100}).slice(1, 50, 100);    // [16, 50]
        fusex::eval(ys, fusex::sin(xs) - fusex::make_view(b, {50}), s);
      },
      [&](const auto& hx, const auto& hb, const auto& hy, auto& expect, auto& got) {
        for (int r = 0; r < 16; ++r)
          for (int c = 0; c < 50; ++c) {
            expect.push_back(std::sin(double(hx[r * 100 + 2 * c])) - hb[c]);
            got.push_back(hy[r * 100 + 50 + c]);
          }
        for (int r = 0; r < 16; ++r) CHECK(std::isnan(hy[r * 100]));  // left half untouched
      });
  check_layout(
      "rank 6 with broadcasting", 1, 2 * 3 * 4 * 5 * 6 * 7,
      [&](float* x, float* b, float* y, cudaStream_t s) {
        auto xv = fusex::make_view(x, {2, 3, 4, 5, 6, 7});
        auto bv = fusex::make_view(b, {3, 1, 5, 1, 7});
        fusex::eval(fusex::make_view(y, {2, 3, 4, 5, 6, 7}), xv * bv, s);
      },
      [&](const auto& hx, const auto& hb, const auto& hy, auto& expect, auto& got) {
        std::size_t i = 0;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 3; ++b)
            for (int c = 0; c < 4; ++c)
              for (int d = 0; d < 5; ++d)
                for (int e = 0; e < 6; ++e)
                  for (int f = 0; f < 7; ++f, ++i) {
                    expect.push_back(double(hx[i]) * hb[(b * 5 + d) * 7 + f]);
                    got.push_back(hy[i]);
                  }
      });
  check_layout(
      "a chain of ten mixed ops", 64, 1000,
      [&](float* x, float*, float* y, cudaStream_t s) {
        auto xv = fusex::make_view(x, {64, 1000});
        auto e = fusex::relu(fusex::tanh(fusex::exp(fusex::sin(xv * 1.5f + 0.25f) - 0.5f) * 0.3f) - 0.1f) * 2.0f;
        fusex::eval(fusex::make_view(y, {64, 1000}), e, s);
      },
      [&](const auto& hx, const auto&, const auto& hy, auto& expect, auto& got) {
        for (int i = 0; i < 64000; ++i) {
          const double v = std::tanh(std::exp(std::sin(hx[i] * 1.5 + 0.25) - 0.5) * 0.3) - 0.1;
          expect.push_back((v > 0 ? v : 0) * 2);
          got.push_back(hy[i]);
        }
      });
}

TEST_CASE("gpu: user functors and lambdas through map", "[gpu][elementwise]") {
  // Extended lambdas must be defined in a named function, not inside another lambda.
  auto hd = [] __host__ __device__(float a) { return a * a; };
  auto dev_only = [] __device__(float a, float c) { return a - c; };
  const std::int64_t rows = 8, cols = 300;
  const auto hx = random_values<float>(rows * cols, -3, 3, 21);
  const auto hb = random_values<float>(cols, -3, 3, 22);
  device_array<float> x(rows * cols), b(cols), y(rows * cols);
  x.upload(hx);
  b.upload(hb);
  y.poison();
  stream_guard sg;
  auto xv = fusex::make_view(x.data(), {rows, cols});
  auto bv = fusex::make_view(b.data(), {cols});
  fusex_test::run(sg.s, [&](cudaStream_t s) {
    fusex::eval(fusex::make_view(y.data(), {rows, cols}),
                fusex::map<float>(dev_only, fusex::map(scale_shift{3.0f}, xv, bv), fusex::map(hd, bv)), s);
  });
  const auto hy = y.download();
  std::vector<double> expect;
  for (std::int64_t i = 0; i < rows * cols; ++i)
    expect.push_back(double(hx[i]) * 3 + hb[i % cols] - double(hb[i % cols]) * hb[i % cols]);
  const std::string err = compare(hy, expect, 4e-6);
  INFO(err);
  CHECK(err.empty());
}

TEST_CASE("gpu: empty destinations launch nothing", "[gpu][elementwise]") {
  stream_guard sg;
  device_array<float> x(4);
  auto e = fusex::make_view(x.data(), {0, 5});
  // Through the run's launch path (under graph: an empty capture, instantiated and replayed).
  REQUIRE_NOTHROW(fusex_test::run(sg.s, [&](cudaStream_t s) { fusex::eval(e, fusex::exp(e) + 1.0f, s); }));
  // The node count by a raw capture of its own, in both runs.
  cudaGraph_t g;
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(sg.s, cudaStreamCaptureModeThreadLocal));
  fusex::eval(e, fusex::exp(e) + 1.0f, sg.s);
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(sg.s, &g));
  CHECK(count_kernel_nodes(g) == 0);
  FUSEX_CUDA_CHECK(cudaGraphDestroy(g));
}

TEST_CASE("gpu: multi-output evaluation computes every destination in one kernel", "[gpu][elementwise]") {
  const std::int64_t n = 10007;
  const auto hx = random_values<float>(n, -4, 4, 11);
  device_array<float> x(n), y(n);
  device_array<bool> m(n);
  device_array<half> h(n);
  x.upload(hx);
  y.poison();
  m.poison();
  h.poison();
  stream_guard sg;
  auto xv = fusex::make_view(x.data(), {n});
  auto out =
      fusex::tie(fusex::make_view(y.data(), {n}), fusex::make_view(m.data(), {n}), fusex::make_view(h.data(), {n}));
  // One kernel: counted in a raw capture of its own (discarded), in both runs.
  cudaGraph_t g;
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(sg.s, cudaStreamCaptureModeThreadLocal));
  fusex::eval(out, fusex::relu(xv), xv > 0, xv * 0.5f, sg.s);
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(sg.s, &g));
  CHECK(count_kernel_nodes(g) == 1);
  FUSEX_CUDA_CHECK(cudaGraphDestroy(g));
  // The results, through the run's launch path.
  fusex_test::run(sg.s, [&](cudaStream_t s) { fusex::eval(out, fusex::relu(xv), xv > 0, xv * 0.5f, s); });
  const auto hy = y.download();
  const auto hm = m.download();
  const auto hh = h.download();
  for (std::int64_t i = 0; i < n; ++i) {
    REQUIRE(hy[i] == (hx[i] > 0 ? hx[i] : 0.0f));
    REQUIRE(hm[i] == (hx[i] > 0));
    REQUIRE(fusex::convert<float>(hh[i]) == fusex::convert<float>(fusex::convert<half>(hx[i] * 0.5f)));
  }
}

TEST_CASE("gpu: any elementwise expression is one kernel node, however deep", "[gpu][elementwise]") {
  const std::int64_t rows = 128, cols = 512;
  device_array<float> x(rows * cols), b(cols), y(rows * cols);
  x.upload(random_values<float>(rows * cols, -1, 1, 3));
  b.upload(random_values<float>(cols, -1, 1, 4));
  stream_guard sg;
  auto xv = fusex::make_view(x.data(), {rows, cols});
  auto bv = fusex::make_view(b.data(), {cols});
  auto e1 = fusex::gelu(xv * bv + bv) - fusex::sigmoid(xv);
  auto e2 = fusex::where(e1 > 0, fusex::exp(e1), fusex::log1p(fusex::abs(e1))) * fusex::tanh(e1 + xv);
  auto e3 =
      fusex::clamp(e2 * e2 + fusex::sqrt(fusex::abs(e2)), -3.0f, 3.0f) / (1.0f + fusex::cast<fusex::bfloat16>(e1));
  // Counts nodes in a raw capture and checks no values: the same in both runs.
  cudaGraph_t g;
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(sg.s, cudaStreamCaptureModeThreadLocal));
  fusex::eval(fusex::make_view(y.data(), {rows, cols}), e3, sg.s);
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(sg.s, &g));
  CHECK(count_kernel_nodes(g) == 1);
  FUSEX_CUDA_CHECK(cudaGraphDestroy(g));
}

TEST_CASE("gpu: bad input throws before launching and leaves the destination untouched", "[gpu][elementwise]") {
  device_array<float> x(64), y(64);
  y.poison();
  stream_guard sg;
  auto x34 = fusex::make_view(x.data(), {3, 4});
  auto y34 = fusex::make_view(y.data(), {3, 4});
  auto x5 = fusex::make_view(x.data(), {5});
  // Each through the run's launch path: under graph the throw happens inside a capture, which the
  // guard discards before rethrowing.
  auto submit = [&](auto&& eval_it) { fusex_test::run(sg.s, [&](cudaStream_t s) { eval_it(s); }); };
  CHECK_THROWS_AS(submit([&](cudaStream_t s) { fusex::eval(y34, x34 + x5, s); }), fusex::shape_error);
  CHECK_THROWS_AS(submit([&](cudaStream_t s) {
                    fusex::eval(fusex::make_view(y.data(), {4, 3}), x34 * 2.0f, s);
                  }),
                  fusex::shape_error);
  CHECK_THROWS_AS(submit([&](cudaStream_t s) {
                    fusex::eval(fusex::make_view(x.data() + 1, {3, 4}), x34 + 1.0f, s);
                  }),
                  fusex::invalid_argument);
  bool threw = false;
  try {
    submit([&](cudaStream_t s) { fusex::eval(y34, x34 + x5, s); });
  } catch (const fusex::error& e) {
    threw = true;
    const std::string m = e.what();
    CHECK(m.find("[3, 4]") != std::string::npos);
    CHECK(m.find("[5]") != std::string::npos);
  }
  CHECK(threw);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
  for (float v : y.download()) CHECK(std::isnan(v));
  // In place, element for element, is allowed.
  x.upload(std::vector<float>(64, 2.0f));
  submit([&](cudaStream_t s) { fusex::eval(x34, x34 * x34 + 1.0f, s); });
  const auto hx = x.download();
  for (int i = 0; i < 12; ++i) CHECK(hx[i] == 5.0f);
  CHECK(hx[12] == 2.0f);
}

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

namespace {
__global__ void fill_pattern(std::uint8_t* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<std::uint8_t>(i % 251 + 1);
}
}  // namespace

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
