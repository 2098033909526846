// GPU suite for graph capture: kernel-node counts of captured fused expressions, replay with new
// inputs, exceptions during capture, graph-private arena memory (isolation while the graph lives,
// return when it is destroyed, frees inside the capture, memory allocated before the capture and
// freed inside it), graph_cache across three shapes, the update path both ways, fork and join, and
// programmatic dependent launch on and off. Every result is checked exactly against an fp32 host
// reference on random non-zero inputs with poisoned outputs.
#include "graph_gpu_util.hpp"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace graph_test;
using fusex_test::device_array;
using fusex_test::random_values;

namespace graph_test {
void eval_relu2(mview y, cview x, cview b, cudaStream_t s) { fusex::eval(y, fusex::relu(x + b) * 2.0f, s); }
void eval_affine(mview y, cview x, float a, cview c, cudaStream_t s) { fusex::eval(y, x * a + c, s); }
}  // namespace graph_test

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

mview as_view(fusex::buffer<float>& b, std::int64_t rows, std::int64_t cols) {
  return fusex::make_view(b.data(), {rows, cols});
}

fusex::capture_options no_pool() {
  fusex::capture_options o;
  o.memory = fusex::capture_memory::none();
  return o;
}

std::size_t programmatic_edges(cudaGraph_t g) {
#if CUDART_VERSION >= 12030
  std::size_t n = 0;
#if CUDART_VERSION >= 13000
#define FUSEX_TEST_GET_EDGES cudaGraphGetEdges
#else
#define FUSEX_TEST_GET_EDGES cudaGraphGetEdges_v2
#endif
  FUSEX_CUDA_CHECK(FUSEX_TEST_GET_EDGES(g, nullptr, nullptr, nullptr, &n));
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  FUSEX_CUDA_CHECK(FUSEX_TEST_GET_EDGES(g, from.data(), to.data(), data.data(), &n));
#undef FUSEX_TEST_GET_EDGES
  std::size_t k = 0;
  for (std::size_t i = 0; i < n; ++i) k += data[i].type == cudaGraphDependencyTypeProgrammatic;
  return k;
#else
  (void)g;
  return 0;
#endif
}

int compute_capability_major() {
  int dev = 0, major = 0;
  FUSEX_CUDA_CHECK(cudaGetDevice(&dev));
  FUSEX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  return major;
}

}  // namespace

TEST_CASE("gpu graph: captured fused expressions are one kernel node each", "[gpu][graph]") {
  problem p(64, 1000, 11);
  device_array<float> t(64 * 1000), u(64 * 1000);
  t.poison();
  u.poison();
  const auto tv = fusex::make_view(t.data(), {64, 1000});
  const auto uv = fusex::make_view(u.data(), {64, 1000});
  stream_guard s;
  fusex::graph_exec g = [&] {
    fusex::graph_capture cap(s, no_pool());
    eval_relu2(tv, p.xv(), p.bv(), s);          // t = relu(x + b) * 2
    eval_affine(uv, tv, 0.5f, p.bv(), s);       // u = t * 0.5 + b
    eval_affine(p.yv(), uv, 0.25f, p.xv(), s);  // y = u * 0.25 + x
    eval_relu2(fusex::make_view(t.data(), {0, 1000}), fusex::make_view(t.data(), {0, 1000}), p.bv(),
               s);  // empty: no kernel
    return cap.finish();
  }();
  REQUIRE(g);
  CHECK(g.kernel_node_count() == 3);
  CHECK(g.node_count() == 3);
  CHECK_FALSE(g.has_private_pool());
  CHECK(g.memory_bytes() == 0);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(std::isnan(p.y.download()[0]));  // captured, not run
  for (int rep = 0; rep < 3; ++rep) g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(g.launches() == 3);
  const auto hy = p.y.download();
  for (std::size_t i = 0; i < hy.size(); ++i) {
    const float bi = p.hb[i % 1000];
    const float e = affine_ref(affine_ref(relu2_ref(p.hx[i], bi), 0.5f, bi), 0.25f, p.hx[i]);
    REQUIRE(hy[i] == e);
  }
}

TEST_CASE("gpu graph: a replay reads new input data copied into the captured buffers", "[gpu][graph][input]") {
  const std::int64_t rows = 16, cols = 784;
  problem p(rows, cols, 21);
  stream_guard s;
  fusex::graph_exec g;
  {
    fusex::graph_capture cap(s);
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    g = cap.finish();
  }
  for (unsigned round = 0; round < 3; ++round) {
    p.hx = random_values<float>(static_cast<std::size_t>(rows * cols), -4, 4, 100 + round);
    p.hb = random_values<float>(static_cast<std::size_t>(cols), -4, 4, 200 + round);
    p.y.poison();
    if (round == 0) {
      fusex::copy_input(p.xv(), p.hx, s);  // from host vectors
      fusex::copy_input(fusex::make_view(p.b.data(), {cols}), p.hb, s);
    } else {
      device_array<float> staged(static_cast<std::size_t>(rows * cols));  // from device memory
      staged.upload(p.hx);
      fusex::copy_input(p.xv(), fusex::make_view(static_cast<const float*>(staged.data()), {rows, cols}), s);
      fusex::copy_input(fusex::make_view(p.b.data(), {cols}), p.hb.data(), p.hb.size(), s);
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));  // staged dies here
    }
    g.launch(s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    const std::string err = p.check_relu2();
    INFO("round " << round << ": " << err);
    CHECK(err.empty());
  }
  // A smaller batch padded up to the captured one: rows past it read zeros.
  const std::int64_t small = 5;
  const auto hs = random_values<float>(static_cast<std::size_t>(small * cols), -4, 4, 300);
  device_array<float> ds(static_cast<std::size_t>(small * cols));
  ds.upload(hs);
  p.y.poison();
  fusex::copy_input_padded(p.xv(), fusex::make_view(static_cast<const float*>(ds.data()), {small, cols}), s);
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto hy = p.y.download();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const float xin = r < small ? hs[static_cast<std::size_t>(r * cols + c)] : 0.0f;
      REQUIRE(hy[static_cast<std::size_t>(r * cols + c)] == relu2_ref(xin, p.hb[static_cast<std::size_t>(c)]));
    }
  // Sizes are checked.
  CHECK_THROWS_AS(fusex::copy_input(p.xv(), std::vector<float>(10), s), fusex::invalid_argument);
  CHECK_THROWS_AS(fusex::copy_input(p.xv(), fusex::make_view(static_cast<const float*>(ds.data()), {small, cols}), s),
                  fusex::shape_error);
}

TEST_CASE("gpu graph: an exception in the middle of a capture unwinds; the streams then run ordinary work",
          "[gpu][graph][exception]") {
  problem p(32, 700, 31);
  stream_guard s, s2;
  device_array<float> side(32 * 700);
  const auto sv = fusex::make_view(side.data(), {32, 700});
  try {
    fusex::graph_capture cap(s);
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    fusex::tensor<float> t({32, 700}, s);  // from the capture's graph-private pool (default arena)
    eval_affine(t.view(), p.xv(), 0.5f, p.bv(), s);
    fusex::scoped_fork side_branch(cap, s2);
    eval_affine(sv, p.xv(), 0.25f, p.bv(), s2);
    throw std::runtime_error("boom in the middle of a capture");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "boom in the middle of a capture");  // not masked
  }
  CHECK_FALSE(fusex::is_capturing(s));
  CHECK_FALSE(fusex::is_capturing(s2));
  // An early return without finish() discards the capture too.
  auto early = [&]() -> int {
    fusex::graph_capture cap(s);
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    return 7;
  };
  CHECK(early() == 7);
  CHECK_FALSE(fusex::is_capturing(s));
  // Ordinary work on both streams, and tensors from the default resource, run and are correct.
  p.y.poison();
  side.poison();
  fusex::tensor<float> t({32, 700}, s);
  eval_relu2(t.view(), p.xv(), p.bv(), s);
  eval_affine(p.yv(), t.view(), 0.5f, p.bv(), s);
  eval_affine(sv, p.xv(), 0.25f, p.bv(), s2);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s2));
  const auto hy = p.y.download(), hs = side.download();
  for (std::size_t i = 0; i < hy.size(); ++i) {
    const float bi = p.hb[i % 700];
    REQUIRE(hy[i] == affine_ref(relu2_ref(p.hx[i], bi), 0.5f, bi));
    REQUIRE(hs[i] == affine_ref(p.hx[i], 0.25f, bi));
  }
  // A capture right after works as well.
  fusex::graph_exec g;
  {
    fusex::graph_capture cap(s);
    eval_relu2(p.yv(), p.xv(), p.bv(), s);
    g = cap.finish();
  }
  p.y.poison();
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(p.check_relu2().empty());
}

TEST_CASE("gpu graph: arena memory of a graph is never handed to eager code while it lives, and comes back",
          "[gpu][graph][memory]") {
  // An arena limited to 8 MiB: a 4 MiB graph-private pool plus a 4 MiB eager chunk fill it.
  fusex::arena_options ao;
  ao.initial_chunk_bytes = 2 * MiB;
  ao.chunk_granularity = 2 * MiB;
  ao.max_reserved_bytes = 8 * MiB;
  ao.thread_cache_bytes = 0;
  fusex::arena A(ao);
  fusex::private_pool_options po;
  po.reserve_bytes = 4 * MiB;
  const std::int64_t rows = 64, cols = 1000, n = rows * cols;  // 250 KiB per temporary
  problem p(rows, cols, 41);
  stream_guard s;
  std::vector<std::pair<std::uintptr_t, std::size_t>> graph_ranges;
  auto note = [&](const fusex::buffer<float>& b) {
    graph_ranges.emplace_back(reinterpret_cast<std::uintptr_t>(b.data()), b.bytes());
  };
  fusex::capture_options co;
  co.memory = fusex::arena_capture_memory(A, po);
  fusex::graph_exec g;
  {
    fusex::graph_capture cap(s, co);
    REQUIRE(cap.memory_pool() != nullptr);
    {
      fusex::buffer<float> t1(n, s, A);
      note(t1);
      eval_relu2(as_view(t1, rows, cols), p.xv(), p.bv(), s);  // t1 = relu2(x, b)
      {
        fusex::buffer<float> t2(n, s, A);
        note(t2);
        eval_affine(as_view(t2, rows, cols), as_view(t1, rows, cols), 0.5f, p.bv(), s);  // t2 = t1 * 0.5 + b
        eval_affine(p.yv(), as_view(t2, rows, cols), 0.25f, p.xv(), s);                  // y = t2 * 0.25 + x
      }                                                                                  // t2 freed inside the capture
      fusex::buffer<float> t3(n, s, A);
      note(t3);
      eval_affine(as_view(t3, rows, cols), p.yv(), 0.5f, p.xv(), s);  // t3 = y * 0.5 + x
      eval_affine(p.yv(), as_view(t3, rows, cols), 0.5f, p.bv(), s);  // y = t3 * 0.5 + b
    }                                                                 // t1, t3 freed inside the capture
    g = cap.finish();
  }
  REQUIRE(g.has_private_pool());
  CHECK(g.memory_bytes() >= 4 * MiB);
  CHECK(A.stats().private_pools == 1);
  CHECK(A.stats().private_pool_bytes >= 4 * MiB);
  auto expect_y = [&](std::size_t i) {
    const float bi = p.hb[i % static_cast<std::size_t>(cols)], xi = p.hx[i];
    const float y1 = affine_ref(affine_ref(relu2_ref(xi, bi), 0.5f, bi), 0.25f, xi);
    return affine_ref(affine_ref(y1, 0.5f, xi), 0.5f, bi);
  };
  auto overlaps_graph = [&](const void* q, std::size_t bytes) {
    const auto a = reinterpret_cast<std::uintptr_t>(q);
    for (const auto& r : graph_ranges)
      if (a < r.first + r.second && r.first < a + bytes) return true;
    return false;
  };
  {
    // Eager allocations while the graph lives: never its memory, even under pressure.
    void* big = A.allocate_async(3 * MiB, 256, s);
    CHECK_FALSE(overlaps_graph(big, 3 * MiB));
    FUSEX_CUDA_CHECK(cudaMemsetAsync(big, 0xFF, 3 * MiB, s));
    std::vector<void*> smalls;
    for (int i = 0; i < 3; ++i) {
      smalls.push_back(A.allocate_async(static_cast<std::size_t>(n) * sizeof(float), 256, s));
      CHECK_FALSE(overlaps_graph(smalls.back(), static_cast<std::size_t>(n) * sizeof(float)));
      FUSEX_CUDA_CHECK(cudaMemsetAsync(smalls.back(), 0xFF, static_cast<std::size_t>(n) * sizeof(float), s));
    }
    // The pool's 4 MiB are not available to eager code: 2 MiB more exceeds the arena's limit.
    CHECK_THROWS_AS(A.allocate_async(2 * MiB, 256, s), fusex::bad_alloc);
    for (int rep = 0; rep < 3; ++rep) {
      p.y.poison();
      g.launch(s);
      FUSEX_CUDA_CHECK(cudaMemsetAsync(big, rep, 3 * MiB, s));  // eager writes between replays
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
      const auto hy = p.y.download();
      for (std::size_t i = 0; i < hy.size(); ++i) REQUIRE(hy[i] == expect_y(i));
    }
    for (void* q : smalls) A.deallocate_async(q, static_cast<std::size_t>(n) * sizeof(float), 256, s);
    A.deallocate_async(big, 3 * MiB, 256, s);
  }
  const auto before = A.stats();
  g = fusex::graph_exec();  // destroyed: the pool's memory returns to the arena
  const auto after = A.stats();
  CHECK(after.private_pools == 0);
  CHECK(after.private_pool_bytes == 0);
  CHECK(after.bytes_reserved == before.bytes_reserved);
  // Now 2 MiB fit without a new chunk.
  void* q = nullptr;
  REQUIRE_NOTHROW(q = A.allocate_async(2 * MiB, 256, s));
  CHECK(A.stats().upstream_allocations == after.upstream_allocations);
  A.deallocate_async(q, 2 * MiB, 256, s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::string v = A.validate();
  INFO(v);
  CHECK(v.empty());
}

TEST_CASE("gpu graph: memory freed inside a capture is reused inside the same graph", "[gpu][graph][memory]") {
  fusex::arena A;
  fusex::private_pool_options po;
  po.reserve_bytes = 2 * MiB;                  // one temporary of 1.25 MiB at a time fits, two do not
  const std::int64_t rows = 320, cols = 1024;  // 1.25 MiB of floats
  problem p(rows, cols, 51);
  stream_guard s;
  fusex::capture_options co;
  co.memory = fusex::arena_capture_memory(A, po);
  fusex::graph_exec g;
  {
    fusex::graph_capture cap(s, co);
    {
      fusex::buffer<float> t(static_cast<std::size_t>(rows * cols), s, A);
      eval_relu2(as_view(t, rows, cols), p.xv(), p.bv(), s);
      eval_affine(p.yv(), as_view(t, rows, cols), 0.5f, p.bv(), s);
    }
    {
      fusex::buffer<float> t(static_cast<std::size_t>(rows * cols), s, A);  // needs the memory freed above
      eval_affine(as_view(t, rows, cols), p.yv(), 0.25f, p.xv(), s);
      eval_affine(p.yv(), as_view(t, rows, cols), 0.5f, p.bv(), s);
    }
    g = cap.finish();
  }
  CHECK(g.memory_bytes() == 2 * MiB);
  g.launch(s);
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto hy = p.y.download();
  for (std::size_t i = 0; i < hy.size(); ++i) {
    const float bi = p.hb[i % static_cast<std::size_t>(cols)], xi = p.hx[i];
    const float y1 = affine_ref(relu2_ref(xi, bi), 0.5f, bi);
    REQUIRE(hy[i] == affine_ref(affine_ref(y1, 0.25f, xi), 0.5f, bi));
  }
}

TEST_CASE("gpu graph: memory allocated before a capture and freed inside it stays the graph's",
          "[gpu][graph][memory]") {
  fusex::arena A;
  fusex::private_pool_options po;
  po.reserve_bytes = 2 * MiB;
  const std::int64_t rows = 64, cols = 1000, n = rows * cols;
  problem p(rows, cols, 61);
  stream_guard s;
  fusex::buffer<float> pre(static_cast<std::size_t>(n), s, A);  // eager memory, filled eagerly
  eval_relu2(as_view(pre, rows, cols), p.xv(), p.bv(), s);
  const auto pre_addr = reinterpret_cast<std::uintptr_t>(pre.data());
  fusex::capture_options co;
  co.memory = fusex::arena_capture_memory(A, po);
  fusex::graph_exec g;
  {
    fusex::graph_capture cap(s, co);
    eval_affine(p.yv(), as_view(pre, rows, cols), 0.5f, p.bv(), s);  // the graph reads pre
    pre.reset();  // freed inside the capture: the graph's replays still read it
    g = cap.finish();
  }
  // While the graph lives, eager allocations of the same size never get pre's memory back.
  std::vector<void*> eager;
  for (int i = 0; i < 8; ++i) {
    void* q = A.allocate_async(static_cast<std::size_t>(n) * sizeof(float), 256, s);
    const auto a = reinterpret_cast<std::uintptr_t>(q);
    CHECK_FALSE((a < pre_addr + n * sizeof(float) && pre_addr < a + n * sizeof(float)));
    FUSEX_CUDA_CHECK(cudaMemsetAsync(q, 0xFF, static_cast<std::size_t>(n) * sizeof(float), s));
    eager.push_back(q);
  }
  for (int rep = 0; rep < 2; ++rep) {
    p.y.poison();
    g.launch(s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto hy = p.y.download();
    for (std::size_t i = 0; i < hy.size(); ++i) {
      const float bi = p.hb[i % static_cast<std::size_t>(cols)];
      REQUIRE(hy[i] == affine_ref(relu2_ref(p.hx[i], bi), 0.5f, bi));
    }
  }
  for (void* q : eager) A.deallocate_async(q, static_cast<std::size_t>(n) * sizeof(float), 256, s);
  g = fusex::graph_exec();
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(A.stats().allocations_in_use == 0);
  const std::string v = A.validate();
  INFO(v);
  CHECK(v.empty());
}

TEST_CASE("gpu graph: tensors of the default arena inside a capture come from an automatic private pool",
          "[gpu][graph][memory]") {
  problem p(48, 640, 71);
  stream_guard s;
  fusex::graph_exec g;
  {
    fusex::capture_options co;
    co.pool.reserve_bytes = 4 * MiB;
    fusex::graph_capture cap(s, co);
    fusex::tensor<float> t({48, 640}, s);  // default resource: the default arena
    eval_relu2(t.view(), p.xv(), p.bv(), s);
    eval_affine(p.yv(), t.view(), 0.5f, p.bv(), s);
    g = cap.finish();
  }
  const bool default_is_arena = fusex::get_default_resource().target<fusex::arena>() != nullptr;
  CHECK(g.has_private_pool() == default_is_arena);
  if (default_is_arena) CHECK(g.memory_bytes() == 4 * MiB);
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto hy = p.y.download();
  for (std::size_t i = 0; i < hy.size(); ++i) {
    const float bi = p.hb[i % 640];
    REQUIRE(hy[i] == affine_ref(relu2_ref(p.hx[i], bi), 0.5f, bi));
  }
}

TEST_CASE("gpu graph: graph_cache hits, misses and eviction, correct across three shapes", "[gpu][graph][cache]") {
  const std::int64_t cols = 784;
  problem p(64, cols, 81);  // buffers for the largest batch
  stream_guard s;
  fusex::graph_cache_options o;
  o.capacity = 2;
  o.capture.pool.reserve_bytes = 0;  // these graphs allocate nothing
  fusex::graph_cache cache(o);
  auto run = [&](std::int64_t rows) {
    const auto xv = fusex::make_view(p.x.data(), {rows, cols});
    const auto yv = fusex::make_view(p.y.data(), {rows, cols});
    p.y.poison();
    cache.run(fusex::graph_key::of(yv.shape()), s, [&](cudaStream_t st) { eval_relu2(yv, xv, p.bv(), st); });
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto hy = p.y.download();
    for (std::size_t i = 0; i < hy.size(); ++i) {
      if (i < static_cast<std::size_t>(rows * cols)) {
        REQUIRE(hy[i] == relu2_ref(p.hx[i], p.hb[i % static_cast<std::size_t>(cols)]));
      } else {
        REQUIRE(std::isnan(hy[i]));  // rows past the batch untouched
      }
    }
  };
  run(16);  // miss
  run(32);  // miss
  run(16);  // hit
  run(64);  // miss, evicts 32
  CHECK_FALSE(cache.contains(fusex::graph_key::of(fusex::shape_t{32, cols})));
  run(32);  // miss, evicts 16
  run(64);  // hit
  // New input data, same shape: a hit that reads it.
  p.hx = random_values<float>(static_cast<std::size_t>(64 * cols), -4, 4, 82);
  p.x.upload(p.hx);
  run(64);  // hit
  const fusex::graph_cache_stats st = cache.stats();
  CHECK(st.hits == 3);
  CHECK(st.misses == 4);
  CHECK(st.captures == 4);
  CHECK(st.evictions == 2);
  CHECK(st.launches == 7);
  CHECK(st.entries == 2);
  cache.for_each([&](const fusex::graph_key&, const fusex::graph_exec& g) { CHECK(g.kernel_node_count() == 1); });
}

TEST_CASE("gpu graph: update in place with new addresses and scalars, and re-instantiation", "[gpu][graph][update]") {
  problem p1(32, 500, 91), p2(32, 500, 92);
  stream_guard s;
  fusex::graph_exec g;
  {
    fusex::graph_capture cap(s, no_pool());
    eval_affine(p1.yv(), p1.xv(), 0.5f, p1.bv(), s);
    const fusex::update_result r = cap.finish_into(g);
    CHECK(r.how == fusex::graph_update::instantiated);
  }
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  auto check_affine = [](const problem& p, float a) {
    const auto hy = p.y.download();
    for (std::size_t i = 0; i < hy.size(); ++i) REQUIRE(hy[i] == affine_ref(p.hx[i], a, p.hb[i % 500]));
  };
  check_affine(p1, 0.5f);
  // Same work on other buffers with another scalar: cudaGraphExecUpdate takes it.
  const cudaGraphExec_t before = g.native_handle();
  {
    fusex::graph_capture cap(s, no_pool());
    eval_affine(p2.yv(), p2.xv(), 0.25f, p2.bv(), s);
    const fusex::update_result r = cap.finish_into(g);
    INFO("reason: " << fusex::to_string(r.reason));
    CHECK(r.how == fusex::graph_update::updated);
    CHECK(r.updated());
  }
  CHECK(g.native_handle() == before);
  p1.y.poison();
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  check_affine(p2, 0.25f);
  for (float v : p1.y.download()) REQUIRE(std::isnan(v));  // the old addresses are no longer written
  // Different work (two kernels): the topology changed, so the graph is instantiated anew.
  {
    fusex::graph_capture cap(s);
    eval_affine(p1.yv(), p1.xv(), 0.5f, p1.bv(), s);
    eval_relu2(p2.yv(), p2.xv(), p2.bv(), s);
    const fusex::update_result r = cap.finish_into(g);
    INFO("reason: " << fusex::to_string(r.reason));
    CHECK(r.how == fusex::graph_update::reinstantiated);
    CHECK(r.reason != cudaGraphExecUpdateSuccess);
  }
  CHECK(g.kernel_node_count() == 2);
  p1.y.poison();
  p2.y.poison();
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  check_affine(p1, 0.5f);
  CHECK(p2.check_relu2().empty());
}

TEST_CASE("gpu graph: work forked onto a side stream is captured and joined", "[gpu][graph][fork]") {
  const std::int64_t rows = 40, cols = 900, n = rows * cols;
  problem p(rows, cols, 101);
  device_array<float> t(n), u(n), v(n);
  const auto tv = fusex::make_view(t.data(), {rows, cols});
  const auto uv = fusex::make_view(u.data(), {rows, cols});
  const auto vv = fusex::make_view(v.data(), {rows, cols});
  stream_guard s, s2;
  fusex::graph_exec g;
  {
    fusex::graph_capture cap(s);
    eval_relu2(tv, p.xv(), p.bv(), s);  // t = relu2(x, b)
    {
      fusex::scoped_fork side(cap, s2);
      eval_affine(uv, tv, 0.5f, p.bv(), s2);  // u = t * 0.5 + b     (side branch, after t)
      eval_affine(vv, p.xv(), 0.25f, tv, s);  // v = x * 0.25 + t    (main branch, concurrent)
    }
    eval_affine(p.yv(), uv, 0.5f, vv, s);  // y = u * 0.5 + v     (after both)
    g = cap.finish();
  }
  CHECK(g.kernel_node_count() == 4);
  for (int rep = 0; rep < 2; ++rep) {
    p.y.poison();
    g.launch(s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto hy = p.y.download();
    for (std::size_t i = 0; i < hy.size(); ++i) {
      const float bi = p.hb[i % static_cast<std::size_t>(cols)], xi = p.hx[i];
      const float ti = relu2_ref(xi, bi);
      REQUIRE(hy[i] == affine_ref(affine_ref(ti, 0.5f, bi), 0.5f, affine_ref(xi, 0.25f, ti)));
    }
  }
  // Manual fork and join with the guard's members, including a second fork of the same stream.
  {
    fusex::graph_capture cap(s);
    eval_relu2(tv, p.xv(), p.bv(), s);
    cap.fork(s2);
    eval_affine(uv, tv, 0.5f, p.bv(), s2);
    cap.fork(s2);  // again: s2 also waits for s's work so far
    CHECK(cap.forked_streams().size() == 1);
    cap.join(s2);
    CHECK(cap.forked_streams().empty());
    eval_affine(p.yv(), uv, 0.5f, tv, s);
    g = cap.finish();
  }
  p.y.poison();
  g.launch(s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  const auto hy = p.y.download();
  for (std::size_t i = 0; i < hy.size(); ++i) {
    const float bi = p.hb[i % static_cast<std::size_t>(cols)], ti = relu2_ref(p.hx[i], bi);
    REQUIRE(hy[i] == affine_ref(affine_ref(ti, 0.5f, bi), 0.5f, ti));
  }
}

TEST_CASE("gpu graph: programmatic dependent launch on and off give bit-identical results", "[gpu][graph][pdl]") {
  const std::int64_t rows = 16, cols = 784, n = rows * cols;
  const auto hx = random_values<float>(n, -3, 3, 111);
  const auto hc = random_values<float>(cols, -3, 3, 112);
  device_array<float> x(n), c(cols), a(n), b(n);
  x.upload(hx);
  c.upload(hc);
  const cview xv = fusex::make_view(static_cast<const float*>(x.data()), {rows, cols});
  const cview cv = fusex::make_view(static_cast<const float*>(c.data()), {cols});
  const mview av = fusex::make_view(a.data(), {rows, cols});
  const mview bv = fusex::make_view(b.data(), {rows, cols});
  constexpr int chain = 64;
  stream_guard s;
  auto enqueue = [&](cudaStream_t st) {
    eval_affine(av, xv, 0.5f, cv, st);
    for (int i = 1; i < chain; ++i) {
      if (i % 2) eval_affine(bv, av, 0.5f, cv, st);
      else eval_affine(av, bv, 0.5f, cv, st);
    }
  };
  // Reference: the same chain on the host, exact in fp32.
  std::vector<float> ref(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const float ci = hc[static_cast<std::size_t>(i % cols)];
    float val = affine_ref(hx[static_cast<std::size_t>(i)], 0.5f, ci);
    for (int k = 1; k < chain; ++k) val = affine_ref(val, 0.5f, ci);
    ref[static_cast<std::size_t>(i)] = val;
  }
  const bool was = fusex::programmatic_dependent_launch();
  std::vector<float> results[4];
  fusex::graph_exec graphs[2];
  for (int pdl = 0; pdl < 2; ++pdl) {
    fusex::set_programmatic_dependent_launch(pdl == 1);
    // Eager.
    a.poison();
    b.poison();
    enqueue(s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    results[pdl] = b.download();
    // Captured and replayed twice.
    {
      fusex::graph_capture cap(s, no_pool());
      enqueue(s);
      graphs[pdl] = cap.finish();
    }
    CHECK(graphs[pdl].kernel_node_count() == chain);
    a.poison();
    b.poison();
    graphs[pdl].launch(s);
    graphs[pdl].launch(s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    results[2 + pdl] = b.download();
  }
  fusex::set_programmatic_dependent_launch(was);
  for (int k = 0; k < 4; ++k) {
    INFO("result " << k << " (0: eager, 1: eager + PDL, 2: graph, 3: graph + PDL)");
    CHECK(same_bits(results[k], ref));
  }
  // Inside a capture, PDL becomes programmatic edges between the kernels (sm_90 and newer).
  const std::size_t edges_off = programmatic_edges(graphs[0].graph());
  const std::size_t edges_on = programmatic_edges(graphs[1].graph());
  INFO("programmatic edges: PDL off " << edges_off << ", PDL on " << edges_on);
  CHECK(edges_off == 0);
#if CUDART_VERSION >= 12030
  if (compute_capability_major() >= 9) CHECK(edges_on >= 1);
#endif
}

TEST_CASE("gpu graph: PDL kernels after copy and memset nodes in a capture", "[gpu][graph][pdl]") {
  const std::int64_t rows = 16, cols = 784, n = rows * cols;
  problem p(rows, cols, 121);
  device_array<float> staged(n), t(n);
  const auto tv = fusex::make_view(t.data(), {rows, cols});
  stream_guard s;
  const bool was = fusex::programmatic_dependent_launch();
  fusex::set_programmatic_dependent_launch(true);
  fusex::graph_exec g;
  {
    fusex::graph_capture cap(s, no_pool());
    // A copy node (new input), then kernels launched with the PDL attribute, then a memset node and
    // another kernel: the kernels must wait for the copy and the memset as for any dependency.
    fusex::copy_input(p.xv(), fusex::make_view(static_cast<const float*>(staged.data()), {rows, cols}), s);
    eval_relu2(tv, p.xv(), p.bv(), s);
    FUSEX_CUDA_CHECK(cudaMemsetAsync(p.y.data(), 0, n * sizeof(float), s));
    eval_affine(p.yv(), tv, 0.5f, p.yv(), s);  // y = t * 0.5 + 0
    g = cap.finish();
  }
  fusex::set_programmatic_dependent_launch(was);
  CHECK(g.kernel_node_count() == 2);
  for (unsigned round = 0; round < 3; ++round) {
    const auto hs = random_values<float>(n, -4, 4, 130 + round);
    staged.upload(hs);
    p.y.poison();
    g.launch(s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto hy = p.y.download();
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      REQUIRE(hy[k] == affine_ref(relu2_ref(hs[k], p.hb[k % static_cast<std::size_t>(cols)]), 0.5f, 0.0f));
    }
  }
}
