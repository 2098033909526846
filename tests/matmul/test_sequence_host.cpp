// Host tests of fusex::layer_sequence (CI, no GPU): run_host against the double reference with
// its error bound (sequence_reference.hpp), the shape checks of building and running, the layer
// rules of the persistent kernel (seq_layer_misfit) and its shared-memory size, and plan() in a
// translation unit compiled without nvcc.
#include <fusex/sequence.hpp>

#include "fusex_catch.hpp"
#include "gpu_util.hpp"
#include "sequence_reference.hpp"

#include <cstdint>
#include <string>
#include <vector>

using fusex::activation;
template <class T>
using chain = sequence_test::chain<T>;

namespace {

template <class T>
fusex::view<const T> cview(const std::vector<T>& v, std::int64_t r, std::int64_t c) {
  return fusex::view<const T>(v.data(), {r, c});
}

// The chain's layers as views of its host vectors.
template <class T>
fusex::basic_layer_sequence<T> build(const chain<T>& c) {
  fusex::basic_layer_sequence<T> s;
  for (std::size_t l = 0; l < c.layers(); ++l) {
    const auto w = cview(c.w[l], c.dims[l + 1], c.dims[l]);
    if (c.bias[l]) s.linear(w, fusex::view<const T>(c.b[l].data(), {c.dims[l + 1]}), c.acts[l]);
    else s.linear(w, c.acts[l]);
  }
  return s;
}

template <class T>
void check_run_host() {
  const chain<T> c({64, 128, 32, 96, 64}, {activation::relu, activation::gelu, activation::none, activation::silu},
                   {true, false, true, true}, 11);
  const auto s = build(c);
  CHECK(s.size() == 4);
  CHECK(s.in_features() == 64);
  CHECK(s.out_features() == 64);
  for (std::int64_t m : {1, 5, 16, 19}) {
    INFO(fusex::dtype_name<T>() << " M " << m);
    const auto x = fusex_test::random_values<T>(static_cast<std::size_t>(m * 64), -1, 1, 3);
    std::vector<T> y(static_cast<std::size_t>(m * 64), fusex::convert<T>(std::nanf("")));
    s.run_host(cview(x, m, 64), fusex::view<T>(y.data(), {m, 64}));
    const std::string miss = sequence_test::check(y, sequence_test::reference(c, x, m));
    INFO(miss);
    CHECK(miss.empty());
  }
}

}  // namespace

TEST_CASE("sequence host: run_host matches the double reference", "[sequence]") {
  check_run_host<float>();
  check_run_host<fusex::bfloat16>();
  check_run_host<fusex::half>();
}

TEST_CASE("sequence host: a mutated chain misses the reference", "[sequence]") {
  // The check is not vacuous: one output row of the middle layer's weights, each weight moved by
  // its range 1/K (an output column computed from a wrong weight row is off by more), moves
  // outputs past the bound. (One weight alone may meet only inputs that the ReLU zeroed.)
  chain<float> c({32, 32, 32, 32}, {activation::relu, activation::gelu, activation::none}, {true, true, true}, 5);
  const auto x = fusex_test::random_values<float>(8 * 32, -1, 1, 9);
  const auto want = sequence_test::reference(c, x, 8);
  for (int j = 0; j < 32; ++j) c.w[1][32 + j] += 1.0f / 32.0f;
  const auto s = build(c);
  std::vector<float> y(8 * 32);
  s.run_host(cview(x, 8, 32), fusex::view<float>(y.data(), {8, 32}));
  CHECK_FALSE(sequence_test::check(y, want).empty());
}

TEST_CASE("sequence host: shapes that do not chain are errors that name them", "[sequence][errors]") {
  std::vector<float> w1(32 * 16), w2(8 * 24), b(32), x(4 * 16), y(4 * 32);
  fusex::layer_sequence s;
  s.linear(cview(w1, 32, 16), fusex::view<const float>(b.data(), {32}));
  // K of the next layer (24) is not N of this one (32).
  CHECK_THROWS_AS(s.linear(cview(w2, 8, 24)), fusex::shape_error);
  try {
    s.linear(cview(w2, 8, 24));
  } catch (const fusex::shape_error& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("K = 24") != std::string::npos);
    CHECK(m.find("N = 32") != std::string::npos);
  }
  CHECK(s.size() == 1);  // the rejected layer was not added
  // A bias of the wrong length, a weight that is not 2-D.
  CHECK_THROWS_AS(s.linear(cview(w1, 16, 32), fusex::view<const float>(b.data(), {8})), fusex::shape_error);
  CHECK_THROWS_AS(s.linear(fusex::view<const float>(w1.data(), {512})), fusex::shape_error);
  // run_host: x must be [M, 16], y [M, 32].
  CHECK_THROWS_AS(s.run_host(cview(x, 2, 32), fusex::view<float>(y.data(), {2, 32})), fusex::shape_error);
  CHECK_THROWS_AS(s.run_host(cview(x, 4, 16), fusex::view<float>(y.data(), {2, 32})), fusex::shape_error);
  CHECK_THROWS_AS(s.run_host(cview(x, 4, 16), fusex::view<float>(y.data(), {4, 16})), fusex::shape_error);
  fusex::layer_sequence empty;
  CHECK_THROWS_AS(empty.run_host(cview(x, 4, 16), fusex::view<float>(y.data(), {4, 32})), fusex::invalid_argument);
}

TEST_CASE("sequence host: the persistent kernel's layer rules and shared memory", "[sequence]") {
  using fusex::detail::seq_layer_misfit;
  // Clusters of 16 on Linear(256, 256): 16 columns per block, two 8-column tiles, four warps each.
  CHECK(seq_layer_misfit(256, 256, 16).empty());
  CHECK(seq_layer_misfit(256, 256, 8).empty());
  CHECK(seq_layer_misfit(64, 256, 16).empty());
  CHECK(seq_layer_misfit(40, 128, 16).empty());          // K = 5 TF32 steps (warps split them unevenly)
  CHECK_FALSE(seq_layer_misfit(20, 256, 16).empty());    // K not a multiple of 8
  CHECK(seq_layer_misfit(20, 256, 16).find("K = 20") != std::string::npos);
  CHECK_FALSE(seq_layer_misfit(40, 256, 16, 2).empty());  // 16-bit: K not a multiple of 16
  CHECK(seq_layer_misfit(48, 256, 16, 2).empty());
  CHECK_FALSE(seq_layer_misfit(256, 10, 2).empty());     // 5 columns per block
  CHECK_FALSE(seq_layer_misfit(256, 64, 16).empty());    // 4 columns per block: less than a tile
  CHECK_FALSE(seq_layer_misfit(256, 96, 4).empty());     // 24 columns per block: not a power of two
  CHECK_FALSE(seq_layer_misfit(256, 250, 16).empty());   // N not a multiple of 16
  CHECK(seq_layer_misfit(256, 250, 16).find("N = 250") != std::string::npos);
  CHECK_FALSE(seq_layer_misfit(256, 2048, 16).empty());  // 128 columns per block: more than 8 tiles
  // Row pitches: 16 bytes past a multiple of 128 bytes; 16-bit products' inputs 32 bytes past.
  CHECK(fusex::detail::seq_pitch(256, 4) == 260);
  CHECK(fusex::detail::seq_pitch(250, 4) == 260);
  CHECK(fusex::detail::seq_pitch(256, 2) == 264);
  CHECK(fusex::detail::seq_act_pitch(256, 4) == 260);
  CHECK(fusex::detail::seq_act_pitch(256, 2) == 264);
  // Two inputs [16][act pitch] (float), two weight slices [nc][pitch] (T), 4 KiB of partial sums.
  const fusex::detail::seq_layout f(260, 260, 16, 4), h(264, 264, 16, 2);
  CHECK(f.bytes == 4 * (2 * 16 * 260 + 2 * 16 * 260) + 4096);
  CHECK(h.w == 4 * 2 * 16 * 264);
  CHECK(h.red == h.w + 2 * 2 * 16 * 264);
  CHECK(h.bytes == h.red + 4096);
}

TEST_CASE("sequence host: plan without nvcc", "[sequence]") {
  std::vector<float> w(16 * 16);
  fusex::layer_sequence s;
  CHECK(s.plan(16).find("per layer") == 0);
  s.linear(cview(w, 16, 16), activation::relu);
  CHECK(s.plan(16) == "per layer: compiled without nvcc");
  s.allow_persistent(false);
  CHECK(s.plan(16).find("allow_persistent(false)") != std::string::npos);
}
