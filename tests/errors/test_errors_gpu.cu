// Error catalogue, GPU part: fusex::eval checks every shape, axis and overlap before its first
// launch, also when reductions are computed first (rule 2: materialised into temporaries) and
// inside a graph capture. A launch_monitor counts the kernels submitted (captured ones included):
// it must read 0 after each throw, and more than 0 for the same evaluation with valid input.
#include <fusex/fusex.hpp>

#include "fusex_catch.hpp"
#include "gpu_util.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace fusex_test;

namespace {
bool has(const std::string& m, const std::string& part) { return m.find(part) != std::string::npos; }

// Runs `bad` (which must throw E) eagerly and inside a capture by fusex::graph_capture; returns the
// kernels counted in each, and the messages.
template <class E, class F>
void check_throws_before_launch(cudaStream_t s, F bad, const std::string& names) {
  {
    fusex::launch_monitor m;
    const std::string msg = thrown_message<E>([&] { bad(s); });
    INFO(msg);
    CHECK(has(msg, names));
    CHECK(m.kernel_launches() == 0);
  }
  {
    fusex::launch_monitor m;
    const std::string msg = thrown_message<E>([&] {
      fusex::graph_capture cap(s);
      bad(s);
      (void)cap.finish();
    });
    INFO("in a capture: " << msg);
    CHECK(has(msg, names));
    CHECK(m.kernel_launches() == 0);
  }
  // The stream is usable afterwards (no capture left open, no error pending).
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
  FUSEX_CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  CHECK(st == cudaStreamCaptureStatusNone);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
}
}  // namespace

TEST_CASE("gpu errors: a materialised reduction does not launch before a shape or overlap error", "[errors][gpu]") {
  constexpr std::int64_t rows = 64, cols = 96;
  const auto hx = random_values<float>(rows * cols, -2, 2, 31);
  device_array<float> x(rows * cols), y(rows * cols), z(rows * cols), small(cols);
  x.upload(hx);
  stream_guard sg;
  const auto xv = fusex::make_view(x.data(), {rows, cols});
  const auto yv = fusex::make_view(y.data(), {rows, cols});
  // Column sums (axis 0) are not a row reduction: they are computed first, by their own kernels.
  const auto col = fusex::sum(xv, 0, fusex::keepdim);

  SECTION("the same evaluation with valid input launches and is right") {
    y.poison();
    fusex::launch_monitor m;
    fusex::eval(yv, xv - col, sg.s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
    CHECK(m.kernel_launches() >= 2);
    const auto hy = y.download();
    std::vector<double> ref(hy.size());
    for (std::int64_t c = 0; c < cols; ++c) {
      double sum = 0;
      for (std::int64_t r = 0; r < rows; ++r) sum += hx[r * cols + c];
      for (std::int64_t r = 0; r < rows; ++r) ref[r * cols + c] = hx[r * cols + c] - sum;
    }
    // |x - sum| <= 2 + 128; float sums of 64 terms of |x| <= 2: error well under 64 * 2 * 2^-23 * 128.
    const std::string err = compare(hy, ref, 1e-4);
    INFO(err);
    CHECK(err.empty());
  }
  SECTION("a destination of another shape") {
    const auto wrong = fusex::make_view(small.data(), {cols / 2});
    check_throws_before_launch<fusex::shape_error>(
        sg.s, [&](cudaStream_t s) { fusex::eval(wrong, xv - col, s); }, "[48]");
  }
  SECTION("tie() destinations of two shapes") {
    const auto other = fusex::make_view(z.data(), {rows / 2, cols});
    check_throws_before_launch<fusex::shape_error>(
        sg.s, [&](cudaStream_t s) { fusex::eval(fusex::tie(yv, other), xv - col, xv * col, s); }, "[32, 96]");
  }
  SECTION("a destination overlapping an input, shifted") {
    // y over x's memory one element on: neither element for element nor disjoint.
    const auto shifted = fusex::make_view(x.data() + 1, {rows - 1, cols});
    const auto xs = fusex::make_view(x.data(), {rows - 1, cols});
    const auto cs = fusex::sum(xs, 0, fusex::keepdim);
    check_throws_before_launch<fusex::invalid_argument>(
        sg.s, [&](cudaStream_t s) { fusex::eval(shifted, xs - cs, s); }, "overlaps");
    CHECK(x.download() == hx);  // nothing was written
  }
  SECTION("an axis out of range") {
    check_throws_before_launch<fusex::error>(
        sg.s, [&](cudaStream_t s) { fusex::eval(yv, xv - fusex::sum(xv, 2), s); }, "axis");
  }
}
