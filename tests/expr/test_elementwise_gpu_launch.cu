// GPU suite for elementwise fusion, part 2: empty destinations, multi-output evaluation, the
// one-kernel guarantee by stream capture, errors before launch (part 1, test_elementwise_gpu.cu:
// layouts and user functors; part 3, test_elementwise_gpu_large.cu: tensors, programmatic dependent
// launch, a case past 2^31 elements; the three compile in parallel). Checked evaluations go through
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
  // Deep (22 operations, among them a select and a cast), with no operation of the same type twice: a
  // repeated one would make shared values, whose kernel forms would triple this file's device code
  // (a deep tree with a value used thrice took 124 s to compile); the small shared one below is
  // enough to count.
  auto e1 = fusex::gelu(xv * bv + 0.5f) - fusex::sigmoid(xv);
  auto e2 = fusex::where(xv > 0, fusex::exp(e1), fusex::log1p(fusex::abs(bv))) * fusex::tanh(xv - 1.0f);
  auto e3 =
      fusex::clamp(e2 * 2.0f + fusex::sqrt(1.0f + fusex::exp(xv)), -3.0f, 3.0f) / (1.0f + fusex::cast<fusex::bfloat16>(bv));
  // Counts nodes in a raw capture and checks no values: the same in both runs.
  cudaGraph_t g;
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(sg.s, cudaStreamCaptureModeThreadLocal));
  fusex::eval(fusex::make_view(y.data(), {rows, cols}), e3, sg.s);
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(sg.s, &g));
  CHECK(count_kernel_nodes(g) == 1);
  FUSEX_CUDA_CHECK(cudaGraphDestroy(g));
  // A value used twice (shared: computed once per element) is one kernel too.
  const auto h = xv * bv + 0.5f;
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(sg.s, cudaStreamCaptureModeThreadLocal));
  fusex::eval(fusex::make_view(y.data(), {rows, cols}), h * fusex::sigmoid(h), sg.s);
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
