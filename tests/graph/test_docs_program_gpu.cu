// The program the docs teach, as a test: a step whose intermediate is a tensor<float> from the
// default arena, captured with graph_capture and replayed on new inputs, and the same step through
// a graph_cache keyed by two shapes; results read back with fusex::to_host. Built in every build
// the suite is (tools/ci/gpu_gates.sh runs it with and without NDEBUG: without it the arena's
// thorough checks are on, and they once made every capture fail with cudaErrorStreamCaptureUnsupported).
#include "graph_gpu_util.hpp"

#include <cstdint>
#include <string>
#include <vector>

using namespace graph_test;
using fusex_test::random_values;

namespace {

// y = relu(x + b) * 2 * 0.5 + b through a temporary: exact in fp32 (0.5 is a power of two, so a
// fused multiply-add rounds like the host's multiply then add).
void step(mview y, cview x, cview b, cudaStream_t s) {
  fusex::tensor<float> t(x.shape(), s);  // from the default arena; a graph-private pool in a capture
  eval_relu2(t, x, b, s);
  eval_affine(y, t, 0.5f, b, s);
}

float step_ref(float x, float b) { return affine_ref(relu2_ref(x, b), 0.5f, b); }

std::string check_step(const std::vector<float>& got, const std::vector<float>& hx, const std::vector<float>& hb) {
  if (got.size() != hx.size()) return "size " + std::to_string(got.size()) + ", expected " + std::to_string(hx.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float e = step_ref(hx[i], hb[i % hb.size()]);
    if (got[i] != e)
      return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", expected " + std::to_string(e);
  }
  return "";
}

}  // namespace

TEST_CASE("docs program: a step with a tensor temporary, captured, replayed on new inputs", "[gpu][graph][docs]") {
  problem p(16, 256, 901);
  stream_guard s;
  fusex::graph_exec g = [&] {
    fusex::graph_capture cap(s);
    step(p.yv(), p.xv(), p.bv(), s);
    return cap.finish();
  }();
  CHECK(g.kernel_node_count() == 2);
  for (unsigned trial = 0; trial < 3; ++trial) {
    const std::vector<float> next = random_values<float>(p.hx.size(), -3, 3, 902 + trial);
    fusex::copy_input(p.xv(), next, s);  // the input contract: new data into the captured buffer
    p.hx = next;
    p.y.poison();
    g.launch(s);
    const std::vector<float> got = fusex::to_host(p.yv(), s);
    INFO("replay " << trial);
    CHECK(check_step(got, p.hx, p.hb).empty());
  }
  // copy_async into a std::vector of the right size, and a clear error for the wrong size.
  std::vector<float> into(p.hx.size());
  fusex::copy_async(into, p.yv(), s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(check_step(into, p.hx, p.hb).empty());
  std::vector<float> small(7);
  const std::string msg = thrown_message<fusex::shape_error>([&] { fusex::copy_async(small, p.yv(), s); });
  CHECK(msg.find("7 elements") != std::string::npos);
  CHECK(msg.find("[16, 256]") != std::string::npos);
}

TEST_CASE("docs program: graph_cache over two shapes, a tensor temporary in each graph", "[gpu][graph][docs]") {
  const std::int64_t cols = 256;
  problem p(32, cols, 911);  // buffers for the larger batch
  stream_guard s;
  fusex::graph_cache_options o;
  o.capacity = 4;
  fusex::graph_cache cache(o);  // default capture options: a graph-private arena pool
  auto run = [&](std::int64_t rows) {
    const auto xv = fusex::make_view(p.x.data(), {rows, cols});
    const auto yv = fusex::make_view(p.y.data(), {rows, cols});
    p.y.poison();
    cache.run(fusex::graph_key::of(yv.shape()), s, [&](cudaStream_t st) { step(yv, xv, p.bv(), st); });
    const std::vector<float> got = fusex::to_host(yv, s);
    const std::vector<float> hx(p.hx.begin(), p.hx.begin() + rows * cols);
    INFO("rows " << rows);
    CHECK(check_step(got, hx, p.hb).empty());
  };
  run(16);  // miss: warm-up, capture, launch
  run(32);  // miss
  run(16);  // hit
  p.hx = random_values<float>(p.hx.size(), -4, 4, 912);
  p.x.upload(p.hx);
  run(32);  // hit, new data
  const fusex::graph_cache_stats st = cache.stats();
  CHECK(st.misses == 2);
  CHECK(st.hits == 2);
  CHECK(st.captures == 2);
  CHECK(st.entries == 2);
  CHECK(st.memory_bytes > 0);  // each graph holds its temporary's pool
}
