// GPU tests of fusex::layer_sequence: the persistent kernel (one launch per up to 112 layers,
// thread-block clusters on sm_90) and the per-layer path, against the double reference with its
// error bound (sequence_reference.hpp), for several batch sizes (partial clusters of rows), widths,
// activations, with and without bias; a chain longer than one launch; one kernel node under
// capture; bad shapes. Checked runs go through fusex_test::run (eager, and captured and replayed
// in test_matmul_gpu.graph).
#include <fusex/graph/graph_capture.hpp>
#include <fusex/sequence.hpp>

#include "fusex_catch.hpp"
#include "gpu_util.hpp"
#include "sequence_reference.hpp"

#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

using fusex::activation;
using fusex_test::device_array;
template <class T>
using chain = sequence_test::chain<T>;

namespace {

// A chain's weights and biases on the device, and the sequence over them.
template <class T>
struct device_chain {
  std::deque<device_array<T>> w, b;  // not movable: a deque never moves them
  fusex::basic_layer_sequence<T> seq;
  explicit device_chain(const chain<T>& c) {
    for (std::size_t l = 0; l < c.layers(); ++l) {
      w.emplace_back(c.w[l].size());
      w.back().upload(c.w[l]);
      b.emplace_back(c.b[l].size());
      b.back().upload(c.b[l]);
    }
    for (std::size_t l = 0; l < c.layers(); ++l) {
      const fusex::view<const T> wv(w[l].data(), {c.dims[l + 1], c.dims[l]});
      if (c.bias[l]) seq.linear(wv, fusex::view<const T>(b[l].data(), {c.dims[l + 1]}), c.acts[l]);
      else seq.linear(wv, c.acts[l]);
    }
  }
};

bool has_clusters() {
  int dev = 0, major = 0;
  FUSEX_CUDA_CHECK(cudaGetDevice(&dev));
  FUSEX_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  return major >= 9;
}

// Runs the sequence on M random rows (poisoned output, with two poisoned guard rows after it that
// must stay untouched) and returns the reference's verdict ("" when within the bound).
template <class T>
std::string run_chain(const chain<T>& c, device_chain<T>& d, std::int64_t m, unsigned seed) {
  fusex_test::stream_guard s;
  const std::int64_t k0 = c.dims.front(), n = c.dims.back();
  const auto x = fusex_test::random_values<T>(static_cast<std::size_t>(m * k0), -1, 1, seed);
  device_array<T> dx(x.size()), dy(static_cast<std::size_t>((m + 2) * n));
  dx.upload(x);
  dy.poison();
  const std::vector<T> poisoned = dy.download();
  const fusex::view<const T> xv(dx.data(), {m, k0});
  const fusex::view<T> yv(dy.data(), {m, n});
  fusex_test::run(s.s, [&](cudaStream_t st) { d.seq.run(xv, yv, st); });
  std::vector<T> got = dy.download();
  const bool guard_ok =
      std::memcmp(got.data() + m * n, poisoned.data() + m * n, static_cast<std::size_t>(2 * n) * sizeof(T)) == 0;
  got.resize(static_cast<std::size_t>(m * n));
  const std::string miss = sequence_test::check(got, sequence_test::reference(c, x, m));
  return guard_ok ? miss : "the rows after y were written\n" + miss;
}

template <class T>
void check_chain(const chain<T>& c, device_chain<T>& d, std::int64_t m, unsigned seed) {
  const std::string miss = run_chain(c, d, m, seed);
  INFO(miss);
  CHECK(miss.empty());
}

template <class T>
void persistent_against_reference() {
  // Widths 256 -> 256 -> 128 -> 512 -> 64: clusters of 8 give 32, 16, 64 and 8 columns per block (at
  // 16 the last layer's 4 would be less than a tile).
  const chain<T> c({256, 256, 128, 512, 64}, {activation::relu, activation::gelu, activation::silu, activation::none},
                   {true, false, true, true}, 21);
  device_chain<T> d(c);
  const std::string plan = d.seq.plan(40);
  INFO(plan);
  if (has_clusters()) CHECK(plan.find("persistent: 1 launch of 3 clusters x 8 blocks") == 0);
  for (std::int64_t m : {1, 7, 16, 17, 40, 64}) {
    INFO(fusex::dtype_name<T>() << " M " << m << ", " << fusex_test::launch_path_name());
    check_chain(c, d, m, static_cast<unsigned>(100 + m));
  }
  // The per-layer path (one fused linear per layer) on the same chain.
  d.seq.allow_persistent(false);
  CHECK(d.seq.plan(16).find("per layer") == 0);
  for (std::int64_t m : {3, 16, 33}) {
    INFO(fusex::dtype_name<T>() << " per layer, M " << m);
    check_chain(c, d, m, static_cast<unsigned>(200 + m));
  }
}

}  // namespace

TEST_CASE("sequence gpu: persistent kernel against the double reference", "[sequence][gpu]") {
  persistent_against_reference<float>();
  persistent_against_reference<fusex::bfloat16>();
  persistent_against_reference<fusex::half>();
}

TEST_CASE("sequence gpu: the tour's MLP, 120 layers in two launches", "[sequence][gpu]") {
  std::vector<std::int64_t> dims(121, 256);
  const chain<float> c(dims, std::vector<activation>(120, activation::relu), std::vector<bool>(120, true), 31);
  device_chain<float> d(c);
  const std::string plan = d.seq.plan(16);
  INFO(plan);
  if (has_clusters()) CHECK(plan.find("persistent: 2 launches of 1 cluster x 16 blocks") == 0);
  check_chain(c, d, 16, 7);
}

TEST_CASE("sequence gpu: layers the kernel does not take run per layer", "[sequence][gpu]") {
  // N = 10 divides among no cluster in whole 8-column tiles.
  const chain<float> c({128, 256, 10}, {activation::gelu, activation::none}, {true, true}, 41);
  device_chain<float> d(c);
  const std::string plan = d.seq.plan(16);
  INFO(plan);
  if (has_clusters()) CHECK(plan.find("per layer: clusters of 16: layer 1: N = 10") == 0);
  else CHECK(plan.find("per layer") == 0);
  for (std::int64_t m : {2, 16, 21}) check_chain(c, d, m, static_cast<unsigned>(300 + m));
}

TEST_CASE("sequence gpu: one kernel node per launch under capture", "[sequence][gpu]") {
  if (!has_clusters()) {
    WARN("thread-block clusters need sm_90: the per-layer path is tested above");
    return;
  }
  const chain<float> c({256, 256, 256, 256}, std::vector<activation>(3, activation::relu), std::vector<bool>(3, true),
                       51);
  device_chain<float> d(c);
  fusex_test::stream_guard s;
  device_array<float> dx(16 * 256), dy(16 * 256);
  dx.upload(fusex_test::random_values<float>(16 * 256, -1, 1, 1));
  INFO(d.seq.plan(16));  // the geometry is found (and cached) before the capture
  cudaGraph_t g{};
  FUSEX_CUDA_CHECK(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeThreadLocal));
  d.seq.run(fusex::view<const float>(dx.data(), {16, 256}), fusex::view<float>(dy.data(), {16, 256}), s.s);
  FUSEX_CUDA_CHECK(cudaStreamEndCapture(s.s, &g));
  CHECK(fusex_test::count_kernel_nodes(g) == 1);
  FUSEX_CUDA_CHECK(cudaGraphDestroy(g));
}

TEST_CASE("sequence gpu: every cluster size and slice width", "[sequence][gpu]") {
  // One layer each: N / C columns per block from 8 (one tile; C = 8, 4, 2 for N = 64, 32, 16:
  // eight warps split K) to 64 (256 -> 1024 at C = 16: eight tiles, no K split), and K = 40 (five
  // TF32 steps over eight warps: some warps have none).
  struct shape {
    std::int64_t k, n;
    const char* plan;
  };
  for (const shape& sh : {shape{256, 64, "x 8 blocks"}, shape{256, 32, "x 4 blocks"}, shape{256, 16, "x 2 blocks"},
                          shape{256, 1024, "x 16 blocks"}, shape{64, 512, "x 16 blocks"}, shape{40, 128, "x 16 blocks"}}) {
    const chain<float> c({sh.k, sh.n}, {activation::silu}, {true}, static_cast<unsigned>(70 + sh.n));
    device_chain<float> d(c);
    const std::string plan = d.seq.plan(40);
    INFO("K " << sh.k << " N " << sh.n << ": " << plan);
    if (has_clusters()) CHECK(plan.find(sh.plan) != std::string::npos);
    for (std::int64_t m : {5, 40}) check_chain(c, d, m, static_cast<unsigned>(400 + m));
  }
  // Two bfloat16 layers through a cluster of 4 (256 -> 32 -> 256: 8 and 64 columns per block); a
  // half chain whose last layer (48: 3, 6, 12 or 24 columns per block) fits no cluster runs per layer.
  const chain<fusex::bfloat16> c({256, 32, 256}, {activation::relu, activation::none}, {true, true}, 81);
  device_chain<fusex::bfloat16> d(c);
  INFO(d.seq.plan(16));
  if (has_clusters()) CHECK(d.seq.plan(16).find("x 4 blocks") != std::string::npos);
  check_chain(c, d, 16, 9);
  const chain<fusex::half> h({256, 32, 256, 48}, {activation::relu, activation::gelu, activation::none},
                             {true, false, true}, 82);
  device_chain<fusex::half> dh(h);
  INFO(dh.seq.plan(16));
  CHECK(dh.seq.plan(16).find("per layer") == 0);
  check_chain(h, dh, 16, 10);
}

TEST_CASE("sequence gpu: a wrong weight fails the check", "[sequence][gpu]") {
  // The reference's bound is not vacuous on the GPU either: one row of a middle layer's weights,
  // each moved by its range 1/K on the device (after the reference was taken), must move outputs
  // past it.
  const chain<float> c({256, 256, 256, 256}, {activation::relu, activation::gelu, activation::none}, {true, true, true},
                       91);
  device_chain<float> d(c);
  CHECK(run_chain(c, d, 16, 3).empty());
  std::vector<float> w1 = c.w[1];
  for (int j = 0; j < 256; ++j) w1[256 + static_cast<std::size_t>(j)] += 1.0f / 256.0f;
  d.w[1].upload(w1);
  CHECK_FALSE(run_chain(c, d, 16, 3).empty());
}

TEST_CASE("sequence gpu: bad shapes are errors before any launch", "[sequence][gpu][errors]") {
  const chain<float> c({64, 64}, {activation::relu}, {true}, 61);
  device_chain<float> d(c);
  fusex_test::stream_guard s;
  device_array<float> dx(16 * 64), dy(16 * 64);
  CHECK_THROWS_AS(
      d.seq.run(fusex::view<const float>(dx.data(), {16, 32}), fusex::view<float>(dy.data(), {16, 64}), s.s),
      fusex::shape_error);
  CHECK_THROWS_AS(d.seq.run(fusex::view<const float>(dx.data(), {16, 64}), fusex::view<float>(dy.data(), {8, 64}), s.s),
                  fusex::shape_error);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s.s));
}
