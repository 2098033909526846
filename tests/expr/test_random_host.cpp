// Host tests of the counter-based random numbers (expr/random.hpp): Philox4x32-10 against
// Random123's known-answer vectors; the stream's definition (element i is word i % 4 of block i / 4,
// recomputed here from the cipher) in every destination layout, broadcast, and through the
// evaluators the kernels use (vector lanes, 32-bit pieces); statistics over 2^24 samples (mean,
// variance, chi-square) with stated bounds, each check shown to fail on a broken generator;
// bernoulli and dropout against their definitions; errors and the plan printer.
#include <fusex/fusex.hpp>

#include "host_test_support.hpp"

#include <cmath>
#include <cstring>
#include <cstdint>
#include <string>
#include <vector>

using namespace fxt;
using fusex::shape_t;

namespace {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

// Word i % 4 of block i / 4 of the stream (seed, offset), built here from the cipher alone.
u32 stream_word(u64 seed, u64 offset, i64 i) {
  const u64 q = static_cast<u64>(i) / 4;
  const u32 ctr[4] = {static_cast<u32>(q & 0xffffffffu), static_cast<u32>(q >> 32),
                      static_cast<u32>(offset & 0xffffffffu), static_cast<u32>(offset >> 32)};
  const u32 key[2] = {static_cast<u32>(seed & 0xffffffffu), static_cast<u32>(seed >> 32)};
  u32 out[4];
  fusex::detail::philox4x32_10(ctr, key, out);
  return out[static_cast<u64>(i) % 4];
}

// A test's verdict and what it measured.
struct verdict {
  bool ok;
  std::string what;
};

// Mean and variance of `x` against the distribution's, each within 5 standard errors of the sample
// statistic (for the variance: sqrt((mu4 - sigma^4) / n), mu4 the fourth central moment).
verdict moments(const std::vector<double>& x, double mean, double var, double mu4) {
  const double n = static_cast<double>(x.size());
  double s = 0;
  for (double v : x) s += v;
  const double m = s / n;
  double q = 0;
  for (double v : x) q += (v - m) * (v - m);
  const double v = q / (n - 1);
  const double mean_bound = 5 * std::sqrt(var / n), var_bound = 5 * std::sqrt((mu4 - var * var) / n);
  const bool ok = std::fabs(m - mean) <= mean_bound && std::fabs(v - var) <= var_bound;
  return {ok, "mean " + std::to_string(m) + " (want " + std::to_string(mean) + " +- " + std::to_string(mean_bound) +
                  "), variance " + std::to_string(v) + " (want " + std::to_string(var) + " +- " +
                  std::to_string(var_bound) + ")"};
}

// Pearson's chi-square over `bins` equiprobable bins (bin_of maps a sample to [0, bins)): with
// bins - 1 degrees of freedom the statistic has mean k = bins - 1 and deviation sqrt(2k); accepted
// within 6 deviations on both sides (too even a histogram fails too: a counter is not random).
template <class BinOf>
verdict chi_square(const std::vector<double>& x, int bins, BinOf bin_of) {
  std::vector<double> count(static_cast<std::size_t>(bins), 0.0);
  for (double v : x) {
    int b = bin_of(v);
    b = b < 0 ? 0 : b >= bins ? bins - 1 : b;
    count[static_cast<std::size_t>(b)] += 1;
  }
  const double expect = static_cast<double>(x.size()) / bins;
  double chi = 0;
  for (double c : count) chi += (c - expect) * (c - expect) / expect;
  const double k = bins - 1, dev = std::sqrt(2 * k);
  const bool ok = chi > k - 6 * dev && chi < k + 6 * dev;
  return {ok, "chi-square " + std::to_string(chi) + " over " + std::to_string(bins) + " bins (want " +
                  std::to_string(k) + " +- " + std::to_string(6 * dev) + ")"};
}

verdict uniform_checks(const std::vector<double>& u) {
  const verdict m = moments(u, 0.5, 1.0 / 12, 1.0 / 80);
  const verdict c = chi_square(u, 256, [](double v) { return static_cast<int>(std::floor(v * 256)); });
  return {m.ok && c.ok, m.what + "; " + c.what};
}

double std_normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

verdict normal_checks(const std::vector<double>& z) {
  const verdict m = moments(z, 0.0, 1.0, 3.0);
  const verdict c = chi_square(z, 64, [](double v) { return static_cast<int>(std::floor(std_normal_cdf(v) * 64)); });
  return {m.ok && c.ok, m.what + "; " + c.what};
}

constexpr i64 stat_n = i64{1} << 24;

template <class E>
std::vector<double> evaluate(const E& e, i64 n) {
  host_array<float> y(static_cast<std::size_t>(n));
  fusex::host::eval(y.view({n}), e);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = y[i];
  return v;
}

}  // namespace

TEST_CASE("random: Philox4x32-10 matches Random123's known-answer vectors", "[random]") {
  struct kat {
    u32 ctr[4];
    u32 key[2];
    u32 want[4];
  };
  const kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const kat& k : kats) {
    u32 out[4];
    fusex::detail::philox4x32_10(k.ctr, k.key, out);
    for (int j = 0; j < 4; ++j) CHECK(out[j] == k.want[j]);
  }
}

TEST_CASE("random: element i of every distribution is defined by word i % 4 of block i / 4", "[random]") {
  const u64 seed = 0x0123456789abcdefull, offset = 0xfedcba9876543210ull;
  const i64 n = 4099;
  host_array<i64> bits(static_cast<std::size_t>(n));
  host_array<float> u(static_cast<std::size_t>(n)), z(static_cast<std::size_t>(n));
  host_array<bool> b(static_cast<std::size_t>(n));
  poison(bits);
  poison(u);
  poison(z);
  poison(b);
  fusex::host::eval(bits.view({n}), fusex::random_bits({n}, seed, offset));
  fusex::host::eval(u.view({n}), fusex::uniform({n}, seed, offset));
  fusex::host::eval(z.view({n}), fusex::normal({n}, seed, offset));
  fusex::host::eval(b.view({n}), fusex::bernoulli({n}, 0.25, seed, offset));
  std::size_t bad = 0;
  for (i64 i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const u32 w = stream_word(seed, offset, i);
    bad += bits[k] != static_cast<i64>(w);
    const float uf = static_cast<float>(w >> 8) / 16777216.0f;
    bad += u[k] != uf;
    bad += b[k] != (uf < 0.25f);
    // Box-Muller over the pair (4q, 4q+1) or (4q+2, 4q+3), in double.
    const i64 pair = i - (i % 2);
    const double u1 = (static_cast<double>(stream_word(seed, offset, pair)) + 1.0) / 4294967296.0;
    const double t = 6.283185307179586 * (static_cast<double>(stream_word(seed, offset, pair + 1)) / 4294967296.0);
    const double r = std::sqrt(-2.0 * std::log(u1));
    bad += z[k] != static_cast<float>(i % 2 == 0 ? r * std::cos(t) : r * std::sin(t));
  }
  CHECK(bad == 0);
  // Another offset or seed is another stream.
  host_array<i64> other(static_cast<std::size_t>(n));
  fusex::host::eval(other.view({n}), fusex::random_bits({n}, seed, offset + 1));
  std::size_t same = 0;
  for (std::size_t k = 0; k < static_cast<std::size_t>(n); ++k) same += other[k] == bits[k];
  CHECK(same < 8);
}

TEST_CASE("random: values follow the element's linear index, not the destination layout", "[random]") {
  const shape_t s{6, 35, 17};
  const i64 n = 6 * 35 * 17;
  const u64 seed = 7, offset = 3;
  // A destination with its dimensions reversed in memory (strides {1, 6, 210}).
  host_array<i64> y(static_cast<std::size_t>(n));
  poison(y);
  fusex::host::eval(fusex::make_view(y.data(), s, fusex::strides_t{1, 6, 210}), fusex::random_bits(s, seed, offset));
  std::size_t bad = 0;
  for (i64 a = 0; a < 6; ++a)
    for (i64 b = 0; b < 35; ++b)
      for (i64 c = 0; c < 17; ++c)
        bad += y[static_cast<std::size_t>(a + 6 * b + 210 * c)] !=
               static_cast<i64>(stream_word(seed, offset, (a * 35 + b) * 17 + c));
  CHECK(bad == 0);
  // A random operand of shape [1, 17] broadcast over rows: every row is the same 17 values.
  host_array<i64> r(static_cast<std::size_t>(35 * 17));
  fusex::host::eval(r.view({35, 17}), fusex::random_bits({1, 17}, seed, offset) + fusex::iota(shape_t{35, 17}, 0) * 0);
  bad = 0;
  for (i64 b = 0; b < 35; ++b)
    for (i64 c = 0; c < 17; ++c) bad += r[static_cast<std::size_t>(b * 17 + c)] != static_cast<i64>(stream_word(seed, offset, c));
  CHECK(bad == 0);
}

// Through the kernels' own planner and evaluators: the vector lanes, and a plan split into 32-bit
// pieces (a small limit stands in for 2^31) where each piece's linear index starts at the piece's
// first element.
TEST_CASE("random: vector lanes and 32-bit pieces through the evaluators give the stream's values",
          "[random][index32]") {
  const i64 rows = 6, cols = 12;
  const u64 seed = 11, offset = 5;
  host_array<float> y(static_cast<std::size_t>(rows * cols));
  const auto e = fusex::as_expr(fusex::uniform({rows, cols}, seed, offset));
  // The vector lanes take the ops' block-at-a-time form (one Philox block for four aligned lanes).
  STATIC_REQUIRE(fusex::detail::has_lanes<fusex::ops::random_uniform, 4, float,
                                          fusex::detail::vec<std::int64_t, 4>>::value);
  STATIC_REQUIRE(fusex::detail::has_lanes<fusex::ops::random_normal, 8, float,
                                          fusex::detail::vec<std::int64_t, 8>>::value);
  STATIC_REQUIRE_FALSE(fusex::detail::has_lanes<fusex::ops::neg, 4, std::int64_t,
                                                fusex::detail::vec<std::int64_t, 4>>::value);
  // (The element of y is the linear index.)
  check_through_evaluators(e, y, rows, cols, [&](i64 elem) {
    return static_cast<float>(stream_word(seed, offset, elem) >> 8) / 16777216.0f;
  });
}

TEST_CASE("random: normal's vector lanes and 32-bit pieces through the evaluators equal its elements",
          "[random][index32]") {
  const i64 rows = 4, cols = 16;
  host_array<float> y(static_cast<std::size_t>(rows * cols)), ref(static_cast<std::size_t>(rows * cols));
  fusex::host::eval(ref.view({rows, cols}), fusex::normal({rows, cols}, 3, 9));  // element by element
  const auto e = fusex::as_expr(fusex::normal({rows, cols}, 3, 9));
  check_through_evaluators(e, y, rows, cols, [&](i64 elem) { return ref[static_cast<std::size_t>(elem)]; });
}

TEST_CASE("random: 2^24 uniform, normal and bernoulli samples pass mean, variance and chi-square tests",
          "[random][statistics]") {
  const std::vector<double> u = evaluate(fusex::uniform({stat_n}, 2024, 1), stat_n);
  const verdict vu = uniform_checks(u);
  INFO("uniform: " << vu.what);
  CHECK(vu.ok);
  const std::vector<double> z = evaluate(fusex::normal({stat_n}, 2024, 2), stat_n);
  const verdict vz = normal_checks(z);
  INFO("normal: " << vz.what);
  CHECK(vz.ok);
  const double p = 0.3;
  const std::vector<double> b = evaluate(fusex::bernoulli({stat_n}, p, 2024, 3), stat_n);
  const verdict vb = moments(b, p, p * (1 - p), p * (1 - p) * (1 - 3 * p * (1 - p)));
  INFO("bernoulli(0.3): " << vb.what);
  CHECK(vb.ok);
}

TEST_CASE("random: the statistical checks fail on broken generators", "[random][statistics]") {
  const i64 n = stat_n;
  std::vector<double> u(static_cast<std::size_t>(n));
  // A stuck top bit: uniform on [0.5, 1).
  for (i64 i = 0; i < n; ++i)
    u[static_cast<std::size_t>(i)] = static_cast<double>((stream_word(1, 0, i) | 0x80000000u) >> 8) / 16777216.0;
  CHECK_FALSE(uniform_checks(u).ok);
  // A Weyl sequence (i times the golden ratio, mod 1): its moments are right but it fills the bins
  // far too evenly.
  for (i64 i = 0; i < n; ++i) {
    const double x = static_cast<double>(i) * 0.6180339887498949;
    u[static_cast<std::size_t>(i)] = x - std::floor(x);
  }
  CHECK_FALSE(uniform_checks(u).ok);
  // Low bits only (the top 8 bits of each word zero): a uniform on [0, 2^-8).
  for (i64 i = 0; i < n; ++i)
    u[static_cast<std::size_t>(i)] = static_cast<double>(stream_word(1, 0, i) & 0x00ffffffu) / 4294967296.0;
  CHECK_FALSE(uniform_checks(u).ok);
  // Box-Muller without the factor 2: variance 1/2.
  std::vector<double> z(static_cast<std::size_t>(n));
  for (i64 i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(stream_word(1, 0, i)) + 1.0) / 4294967296.0;
    const double t = 6.283185307179586 * (static_cast<double>(stream_word(1, 0, i + 1)) / 4294967296.0);
    const double r = std::sqrt(-std::log(u1));
    z[static_cast<std::size_t>(i)] = r * std::cos(t);
    z[static_cast<std::size_t>(i + 1)] = r * std::sin(t);
  }
  CHECK_FALSE(normal_checks(z).ok);
  // A uniform passed off as a normal (mean 0.5).
  CHECK_FALSE(normal_checks(evaluate(fusex::uniform({n}, 1, 0), n)).ok);
}

TEST_CASE("random: dropout keeps x / (1 - p) where uniform >= p, else 0", "[random][dropout]") {
  const i64 n = 1 << 16;
  const auto x = random_default<float>(static_cast<std::size_t>(n));
  for (double p : {0.0, 0.1, 0.5, 1.0}) {
    INFO("p = " << p);
    host_array<float> y(static_cast<std::size_t>(n));
    poison(y);
    fusex::host::eval(y.view({n}), fusex::dropout(x.cview({n}), p, 99, 4));
    const float scale = p < 1.0 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
    std::size_t bad = 0, kept = 0;
    for (i64 i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const float uf = static_cast<float>(stream_word(99, 4, i) >> 8) / 16777216.0f;
      const bool keep = uf >= static_cast<float>(p);
      kept += keep;
      bad += y[k] != (keep ? x[k] * scale : 0.0f);
    }
    CHECK(bad == 0);
    const double frac = static_cast<double>(kept) / static_cast<double>(n);
    CHECK(std::fabs(frac - (1.0 - p)) <= 5 * std::sqrt(p * (1 - p) / static_cast<double>(n)) + 1e-12);
  }
}

TEST_CASE("random: bad arguments throw, naming the function and the value", "[random][errors]") {
  const auto throws_with = [](auto&& f, const std::string& part) {
    try {
      f();
    } catch (const fusex::error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(part) != std::string::npos);
      return;
    }
    FAIL("no exception");
  };
  throws_with([] { (void)fusex::bernoulli({4}, 1.5, 0); }, "fusex::bernoulli: p = 1.5");
  throws_with([] { (void)fusex::bernoulli({4}, std::nan(""), 0); }, "fusex::bernoulli: p = nan");
  host_array<float> x(4);
  throws_with([&] { (void)fusex::dropout(x.cview({4}), -0.1, 0); }, "fusex::dropout: p = -0.1");
  throws_with([] { (void)fusex::uniform({2, -1}, 0); }, "negative extent");
}

TEST_CASE("random: a key is (seed, offset); one with a device offset is refused by the host backend",
          "[random][generator]") {
  const fusex::shape_t s{33, 17};
  host_array<float> a(33 * 17), b(33 * 17);
  fusex::host::eval(a.view(s), fusex::uniform(s, fusex::random_key{7, 9}));
  fusex::host::eval(b.view(s), fusex::uniform(s, 7, 9));
  CHECK(std::memcmp(a.data(), b.data(), 33 * 17 * sizeof(float)) == 0);
  const auto x = random_default<float>(33 * 17);
  fusex::host::eval(a.view(s), fusex::dropout(x.cview(s), 0.3, fusex::random_key{7, 9}) + fusex::normal(s, {7, 10}));
  fusex::host::eval(b.view(s), fusex::dropout(x.cview(s), 0.3, 7, 9) + fusex::normal(s, 7, 10));
  CHECK(std::memcmp(a.data(), b.data(), 33 * 17 * sizeof(float)) == 0);
  // A random_generator's key points at device memory: the host backend says so instead of reading it.
  const std::int64_t not_on_the_host = 0;
  const fusex::random_key k{7, 9, &not_on_the_host};
  try {
    fusex::host::eval(a.view(s), fusex::uniform(s, k));
    FAIL("no exception");
  } catch (const fusex::invalid_argument& e) {
    CHECK(std::string(e.what()).find("random_generator") != std::string::npos);
  }
  try {
    (void)fusex::bernoulli(s, 2.0, k);
    FAIL("no exception");
  } catch (const fusex::invalid_argument& e) {
    CHECK(std::string(e.what()).find("fusex::bernoulli: p = 2") != std::string::npos);
  }
}

TEST_CASE("random: explain shows the generator over the linear index", "[random][explain]") {
  host_array<float> y(64 * 32);
  const std::string plan = fusex::explain(y.view({64, 32}), fusex::normal({64, 32}, 1, 2) * 2.0f);
  INFO(plan);
  CHECK(plan.find("normal -> float32") != std::string::npos);
  CHECK(plan.find("linear index of [64, 32] (int64, computed)") != std::string::npos);
  CHECK(plan.find("vector width 4") != std::string::npos);
}

TEST_CASE("random: a random operand inside a row reduction keeps the row in registers", "[random][explain]") {
  const i64 rows = 64, cols = 1024;
  const auto x = random_default<float>(static_cast<std::size_t>(rows * cols));
  const auto xv = x.cview({rows, cols});
  host_array<float> y(static_cast<std::size_t>(rows * cols));
  const auto e = fusex::softmax(xv + fusex::normal({rows, cols}, 3, 4) * 0.1f, -1);
  const std::string plan = fusex::explain(y.view({rows, cols}), e);
  INFO(plan);
  CHECK(plan.find("row kept in registers") != std::string::npos);
  CHECK(plan.find("linear index of [64, 1024] (int64, computed)") != std::string::npos);
  // And its values: the softmax of x + 0.1 z row by row, against a double reference.
  fusex::host::eval(y.view({rows, cols}), e);
  host_array<float> z(static_cast<std::size_t>(rows * cols));
  fusex::host::eval(z.view({rows, cols}), fusex::normal({rows, cols}, 3, 4));
  std::size_t bad = 0;
  for (i64 r = 0; r < rows; ++r) {
    double m = -1e300, sum = 0;
    std::vector<double> v(static_cast<std::size_t>(cols));
    for (i64 c = 0; c < cols; ++c) {
      const auto k = static_cast<std::size_t>(r * cols + c);
      v[static_cast<std::size_t>(c)] = static_cast<double>(x[k]) + static_cast<double>(z[k] * 0.1f);
      m = v[static_cast<std::size_t>(c)] > m ? v[static_cast<std::size_t>(c)] : m;
    }
    for (double t : v) sum += std::exp(t - m);
    for (i64 c = 0; c < cols; ++c) {
      const double want = std::exp(v[static_cast<std::size_t>(c)] - m) / sum;
      bad += std::fabs(y[static_cast<std::size_t>(r * cols + c)] - want) > 1e-5 * want + 1e-9;
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("random: an elementwise expression with random numbers takes the register-capped kernel", "[random]") {
  // launch_elementwise picks elementwise_random_kernel by this trait: if it stopped seeing the random
  // ops (wrapped in a shared value, say), dropout would silently lose its register cap.
  using namespace fusex::detail;
  host_array<float> x(64), y(64);
  for (std::size_t i = 0; i < 64; ++i) x[i] = 0.25f * static_cast<float>(i) - 3.0f;
  const auto X = x.cview({8, 8});
  auto takes_random_kernel = [&](const auto& e) {
    const auto dst = std::make_tuple(y.view({8, 8}));
    const auto pe = prepare(dst, e);
    bool lazy = true, random = false;
    const auto evs = make_evaluators<std::uint32_t>(pe, 1, lazy, e);
    // The assignments of the form the launch chooses (with_elementwise_form).
    with_elementwise_form<std::uint32_t>(pe, dst, evs, lazy, [&](const auto& as, auto) {
      random = has_random_v<std::decay_t<decltype(as)>>;
    });
    return random;
  };
  CHECK(takes_random_kernel(fusex::dropout(X, 0.1, 1, 0)));
  CHECK(takes_random_kernel(fusex::relu(X) + fusex::normal(X.shape(), 1, 0)));
  CHECK(takes_random_kernel(fusex::where(fusex::bernoulli(X.shape(), 0.5, 2, 0), X, 0.0f)));
  const auto h = X + fusex::uniform(X.shape(), 3, 0);  // inside a shared value
  CHECK(takes_random_kernel(h * h));
  CHECK_FALSE(takes_random_kernel(fusex::relu(X) * 2.0f));
  CHECK_FALSE(takes_random_kernel((X + 1.0f) * (X + 1.0f)));
}
