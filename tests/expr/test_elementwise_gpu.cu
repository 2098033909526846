// GPU suite for elementwise fusion, part 1: layouts (odd sizes, empty, misaligned, strided,
// transposed, broadcast) and user functors and lambdas, on the device against a double-precision
// reference computed here on the host, on random non-zero inputs with poisoned outputs. Part 2
// (test_elementwise_gpu_launch.cu) has multi-output, the one-kernel guarantee, errors, PDL and a case
// past 2^31 elements; the ops on every dtype are in test_elementwise_ops_*_gpu.cu. Every evaluation
// whose results are checked is submitted through fusex_test::run, so CTest runs each case eagerly
// and (test_elementwise_gpu.graph) captured into a graph and replayed.
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
