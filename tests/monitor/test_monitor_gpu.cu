// fusex::launch_monitor on the GPU: launch counts of expressions whose plans are known, graph
// replays, nesting, and GPU timing.
#include <fusex/fusex.hpp>

#include "fusex_catch.hpp"
#include "gpu_util.hpp"

#include <vector>

using fusex_test::device_array;
using fusex_test::stream_guard;

namespace {
struct inputs {
  std::int64_t rows = 64, cols = 256;
  device_array<float> x{static_cast<std::size_t>(rows * cols)};
  device_array<float> b{static_cast<std::size_t>(cols)};
  device_array<float> y{static_cast<std::size_t>(rows * cols)};
  device_array<float> z{static_cast<std::size_t>(rows * cols)};
  inputs() {
    std::vector<float> h(static_cast<std::size_t>(rows * cols));
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
    x.upload(h);
    b.upload(std::vector<float>(static_cast<std::size_t>(cols), 0.25f));
  }
  auto xv() const { return fusex::make_view(x.data(), {rows, cols}); }
  auto bv() const { return fusex::make_view(b.data(), {cols}); }
  auto yv() const { return fusex::make_view(y.data(), {rows, cols}); }
  auto zv() const { return fusex::make_view(z.data(), {rows, cols}); }
};
}  // namespace

TEST_CASE("launch_monitor counts one launch per fused expression", "[monitor][gpu]") {
  stream_guard sg;
  inputs in;
  fusex::launch_monitor mon(sg.s);
  fusex::eval(in.yv(), fusex::relu(in.xv() + in.bv()), sg.s);                            // 1: elementwise
  fusex::eval(in.zv(), fusex::softmax(in.xv()), sg.s);                                   // 1: row kernel (rule 1)
  fusex::eval(in.zv(), fusex::layer_norm(in.xv() + in.yv()), sg.s);                      // 1: row kernel
  fusex::eval(fusex::tie(in.yv(), in.zv()), in.xv() * 2.0f, fusex::exp(in.xv()), sg.s);  // 1: two outputs
  const fusex::launch_report r = mon.report();
  REQUIRE(r.kernel_launches == 4);
  REQUIRE(r.graph_launches == 0);
  REQUIRE(r.gpu_timed());
  REQUIRE(r.gpu_us > 0.0);
  REQUIRE(r.host_us > 0.0);
  REQUIRE(r.launch_bound() == (r.host_us >= fusex::launch_bound_margin * r.gpu_us));
}

TEST_CASE("launch_monitor: an empty destination launches nothing", "[monitor][gpu]") {
  stream_guard sg;
  fusex::launch_monitor mon(sg.s);
  auto e = fusex::make_view(static_cast<float*>(nullptr), {0, 4});
  fusex::eval(e, fusex::relu(e), sg.s);
  REQUIRE(mon.report().kernel_launches == 0);
}

TEST_CASE("launch_monitor counts graph replays as graph launches", "[monitor][gpu]") {
  stream_guard sg;
  inputs in;
  fusex::graph_exec g;
  {
    fusex::launch_monitor capture_region(sg.s);  // the stream is not captured yet at its start
    fusex::graph_capture cap(sg.s);
    fusex::eval(in.yv(), fusex::relu(in.xv() + in.bv()), sg.s);
    fusex::eval(in.zv(), fusex::softmax(in.yv()), sg.s);
    g = cap.finish();
    REQUIRE(capture_region.report().kernel_launches == 2);  // captured launches are submissions too
  }
  {
    fusex::graph_capture cap(sg.s);
    fusex::launch_monitor in_capture(sg.s);  // started inside a capture: counts, no GPU timing
    fusex::eval(in.yv(), in.xv() * 3.0f, sg.s);
    const fusex::launch_report r = in_capture.report();
    REQUIRE(r.kernel_launches == 1);
    REQUIRE_FALSE(r.gpu_timed());
    cap.abandon();
  }
  REQUIRE(g.kernel_node_count() == 2);
  fusex::launch_monitor mon(sg.s);
  for (int i = 0; i < 5; ++i) g.launch(sg.s);
  const fusex::launch_report r = mon.report();
  REQUIRE(r.kernel_launches == 0);
  REQUIRE(r.graph_launches == 5);
  REQUIRE(r.gpu_timed());
}

TEST_CASE("launch_monitor: nested regions and the unmonitored path", "[monitor][gpu]") {
  stream_guard sg;
  inputs in;
  fusex::eval(in.yv(), in.xv() + 1.0f, sg.s);  // no region: nothing to count into
  fusex::launch_monitor outer(sg.s);
  fusex::eval(in.yv(), in.xv() + 1.0f, sg.s);
  {
    fusex::launch_monitor inner;
    for (int i = 0; i < 10; ++i) fusex::eval(in.yv(), in.yv() * 0.5f, sg.s);
    REQUIRE(inner.report().kernel_launches == 10);
  }
  const fusex::launch_report r = outer.report();
  REQUIRE(r.kernel_launches == 11);
}

TEST_CASE("launch_monitor: a large kernel is GPU-bound", "[monitor][gpu]") {
  stream_guard sg;
  const std::int64_t n = std::int64_t{1} << 26;  // 256 MiB in, 256 MiB out: ~130 us on an H200
  device_array<float> a(static_cast<std::size_t>(n)), c(static_cast<std::size_t>(n));
  auto av = fusex::make_view(a.data(), {n});
  auto cv = fusex::make_view(c.data(), {n});
  fusex::eval(av, 1.0f, sg.s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
  fusex::launch_monitor mon(sg.s);
  for (int i = 0; i < 4; ++i) fusex::eval(cv, fusex::sqrt(av) + 1.0f, sg.s);
  const fusex::launch_report r = mon.report();
  INFO(r.str());
  REQUIRE(r.kernel_launches == 4);
  REQUIRE_FALSE(r.launch_bound());
}
