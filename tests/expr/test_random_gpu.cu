// GPU tests of the counter-based random numbers (expr/random.hpp) against the host backend: the raw
// stream, uniform, bernoulli and dropout bit-identical, normal within 2 ulp (the GPU's and the host's
// double log/cos/sin may differ in their last bits), in the vector path with its scalar tail, the
// scalar path (a destination with reversed strides), a broadcast operand, and bf16 dropout. Every
// checked evaluation goes through fusex_test::run (eager, and captured into a graph and replayed as
// test_elementwise_gpu.graph: the captured (seed, offset) replays the same numbers).
#include <fusex/fusex.hpp>

#include "elementwise_gpu_check.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace fusex_test;
using fusex::shape_t;

namespace {

// Distance in float32 steps (same-sign finite values).
std::int64_t ulp_distance(float a, float b) {
  if (a == b) return 0;
  std::int32_t ia = 0, ib = 0;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if ((ia < 0) != (ib < 0)) return std::int64_t{1} << 40;
  return ia > ib ? std::int64_t{ia} - ib : std::int64_t{ib} - ia;
}

// Evaluates `make(shape)` on the GPU into a poisoned destination (strides `st`, or contiguous) and
// on the host backend into the same layout; returns both.
template <class T, class Make>
std::pair<std::vector<T>, std::vector<T>> both(const shape_t& s, const fusex::strides_t& st, const Make& make) {
  const std::int64_t n = fusex::numel(s);
  device_array<T> d(static_cast<std::size_t>(n));
  d.poison();
  const auto dv = st.rank() == 0 ? fusex::make_view(d.data(), s) : fusex::make_view(d.data(), s, st);
  stream_guard sg;
  fusex_test::run(sg.s, [&](cudaStream_t st2) { fusex::eval(dv, make(s), st2); });
  std::vector<T> h(static_cast<std::size_t>(n));
  const auto hv = st.rank() == 0 ? fusex::make_view(h.data(), s) : fusex::make_view(h.data(), s, st);
  fusex::host::eval(hv, make(s));
  return {d.download(), h};
}

const std::vector<std::pair<shape_t, fusex::strides_t>>& layouts() {
  static const std::vector<std::pair<shape_t, fusex::strides_t>> l = {
      {{(1 << 20) + 3}, {}},      // vector path and its scalar tail
      {{37, 129}, {}},            // rows not a multiple of the vector width
      {{6, 35, 17}, {1, 6, 210}}, // reversed strides: the scalar path
  };
  return l;
}

}  // namespace

TEST_CASE("gpu: random_bits, uniform and bernoulli are bit-identical to the host backend", "[gpu][random]") {
  for (const auto& [s, st] : layouts()) {
    INFO("shape " << s.str() << ", launch " << launch_path_name());
    const auto bits = both<std::int64_t>(s, st, [](const shape_t& x) { return fusex::random_bits(x, 42, 7); });
    CHECK(bits.first == bits.second);
    const auto u = both<float>(s, st, [](const shape_t& x) { return fusex::uniform(x, 42, 8); });
    CHECK(u.first == u.second);
    // (bool results stored as uint8: std::vector<bool> has no data())
    const auto b = both<std::uint8_t>(s, st, [](const shape_t& x) { return fusex::bernoulli(x, 0.3, 42, 9); });
    CHECK(b.first == b.second);
  }
}

TEST_CASE("gpu: normal is within 2 ulp of the host backend", "[gpu][random]") {
  for (const auto& [s, st] : layouts()) {
    INFO("shape " << s.str() << ", launch " << launch_path_name());
    const auto z = both<float>(s, st, [](const shape_t& x) { return fusex::normal(x, 5, 1); });
    std::int64_t worst = 0;
    for (std::size_t i = 0; i < z.first.size(); ++i) {
      const std::int64_t d = ulp_distance(z.first[i], z.second[i]);
      worst = d > worst ? d : worst;
    }
    CHECK(worst <= 2);
  }
}

TEST_CASE("gpu: a broadcast random operand and dropout match the host backend", "[gpu][random][dropout]") {
  const std::int64_t rows = 300, cols = 1000;
  const auto hx = random_values<float>(static_cast<std::size_t>(rows * cols), -2, 2, 17);
  device_array<float> x(hx.size());
  x.upload(hx);
  const auto xd = fusex::make_view<const float>(x.data(), {rows, cols});
  const auto xh = fusex::make_view<const float>(hx.data(), {rows, cols});
  for (double p : {0.0, 0.1, 0.5}) {
    INFO("p = " << p << ", launch " << launch_path_name());
    device_array<float> y(hx.size());
    y.poison();
    stream_guard sg;
    fusex_test::run(sg.s, [&](cudaStream_t s) {
      fusex::eval(fusex::make_view(y.data(), {rows, cols}),
                  fusex::dropout(xd, p, 123, 4) + fusex::uniform({1, cols}, 9, 9), s);
    });
    std::vector<float> want(hx.size());
    fusex::host::eval(fusex::make_view(want.data(), {rows, cols}),
                      fusex::dropout(xh, p, 123, 4) + fusex::uniform({1, cols}, 9, 9));
    CHECK(y.download() == want);
  }
}

TEST_CASE("gpu: bf16 dropout (bf16 storage) matches the host backend", "[gpu][random][dropout]") {
  const std::int64_t n = (1 << 18) + 5;
  const auto hx = random_values<fusex::bfloat16>(static_cast<std::size_t>(n), -3, 3, 23);
  device_array<fusex::bfloat16> x(hx.size()), y(hx.size());
  x.upload(hx);
  y.poison();
  stream_guard sg;
  fusex_test::run(sg.s, [&](cudaStream_t s) {
    fusex::eval(fusex::make_view(y.data(), {n}), fusex::dropout(fusex::make_view<const fusex::bfloat16>(x.data(), {n}), 0.2, 1, 2), s);
  });
  std::vector<fusex::bfloat16> want(hx.size());
  fusex::host::eval(fusex::make_view(want.data(), {n}),
                    fusex::dropout(fusex::make_view<const fusex::bfloat16>(hx.data(), {n}), 0.2, 1, 2));
  const auto got = y.download();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) bad += std::memcmp(&got[i], &want[i], sizeof(fusex::bfloat16)) != 0;
  CHECK(bad == 0);
}

TEST_CASE("gpu: a random_generator's captured step draws new numbers on each replay, equal to eager runs",
          "[gpu][random][generator]") {
  const std::int64_t n = (1 << 16) + 3, m = 1000;
  const std::uint64_t seed = 99, start = 5, per_step = static_cast<std::uint64_t>(n + m);
  const auto hx = random_values<float>(static_cast<std::size_t>(n), -2, 2, 29);
  device_array<float> x(hx.size()), y1(hx.size()), y2(static_cast<std::size_t>(m)), e1(hx.size()),
      e2(static_cast<std::size_t>(m));
  x.upload(hx);
  const auto xv = fusex::make_view<const float>(x.data(), {n});
  stream_guard sg;
  fusex::random_generator gen(seed, start);
  fusex::graph_exec step = [&] {
    fusex::graph_capture cap(sg.s);
    fusex::eval(fusex::make_view(y1.data(), {n}), fusex::dropout(xv, 0.25, gen.draw(n)), sg.s);
    fusex::eval(fusex::make_view(y2.data(), {m}), fusex::normal({m}, gen.draw(m)), sg.s);
    gen.advance(sg.s);
    return cap.finish();
  }();
  CHECK(gen.step_draws() == 0);
  std::vector<float> previous;
  for (std::uint64_t r = 0; r < 3; ++r) {
    INFO("replay " << r);
    y1.poison();
    y2.poison();
    step.launch(sg.s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
    // The same draws eagerly, with the offsets the r-th step has.
    const std::uint64_t base = start + r * per_step;
    fusex::eval(fusex::make_view(e1.data(), {n}), fusex::dropout(xv, 0.25, seed, base), sg.s);
    fusex::eval(fusex::make_view(e2.data(), {m}), fusex::normal({m}, seed, base + static_cast<std::uint64_t>(n)), sg.s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
    const auto got1 = y1.download();
    CHECK(got1 == e1.download());
    CHECK(y2.download() == e2.download());
    if (r > 0) CHECK(got1 != previous);  // new masks on each replay
    previous = got1;
  }
  CHECK(gen.offset(sg.s) == start + 3 * per_step);

  // Eagerly: each step's draws continue where the last step's stopped.
  fusex::random_generator eager(3);
  for (std::uint64_t r = 0; r < 2; ++r) {
    fusex::eval(fusex::make_view(y2.data(), {m}), fusex::uniform({m}, eager.draw(m)), sg.s);
    eager.advance(sg.s);
    fusex::eval(fusex::make_view(e2.data(), {m}), fusex::uniform({m}, 3, r * static_cast<std::uint64_t>(m)), sg.s);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
    CHECK(y2.download() == e2.download());
  }
  CHECK_THROWS_AS(eager.draw(-1), fusex::invalid_argument);
  fusex::random_generator moved = std::move(eager);
  CHECK_THROWS_AS(eager.draw(1), fusex::invalid_argument);  // NOLINT(bugprone-use-after-move): the check
  CHECK(moved.offset(sg.s) == 2 * static_cast<std::uint64_t>(m));
}
