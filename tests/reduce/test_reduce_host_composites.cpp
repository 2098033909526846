// Host suite for reductions, part 3: the composites (softmax, log_softmax, layer_norm with weight
// and bias, rms_norm with weight, logsumexp) on rows of length 1, 7, 64 and 1000 against double
// references, the softmax written out by hand, composites with a residual add and a cast epilogue,
// reductions feeding elementwise work, half/bfloat16 intermediates kept in float32, and the plan
// printer (rule 1 and rule 2).
#include "reduce_host_support.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

using namespace rxt;

// --- composites -----------------------------------------------------------------------------------

namespace {

struct row_refs {
  std::vector<ref_value> softmax, log_softmax, layer_norm, layer_norm_affine, rms_norm, rms_norm_weight, lse;
};

/// Double references of the composites over each row of x [rows, n] (w, b: [n]), with error
/// bounds for an accumulation of unit roundoff u: relative (n + 40) u on each quantity's scale.
row_refs composite_refs(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                        std::size_t rows, std::size_t n, double u) {
  row_refs r;
  const double k = (static_cast<double>(n) + 40) * u;
  for (std::size_t i = 0; i < rows; ++i) {
    const double* xr = x.data() + i * n;
    double m = -inf_v, mean = 0, sq = 0, amax_abs = 0;  // max, mean, sum of squares, max |x|
    for (std::size_t j = 0; j < n; ++j) {
      m = std::max(m, xr[j]);
      mean += xr[j];
      sq += xr[j] * xr[j];
      amax_abs = std::max(amax_abs, std::fabs(xr[j]));
    }
    mean /= static_cast<double>(n);
    double s = 0, var = 0;
    for (std::size_t j = 0; j < n; ++j) s += std::exp(xr[j] - m), var += (xr[j] - mean) * (xr[j] - mean);
    var /= static_cast<double>(n);  // population variance
    const double rstd = 1 / std::sqrt(var + 1e-5);
    const double rrms = 1 / std::sqrt(sq / static_cast<double>(n) + 1e-6);
    // Welford's variance: relative error about n u, plus the rounding of (x - running mean) when
    // the mean is large against the deviation.
    const double var_rel = 2 * k * (1 + std::fabs(mean) / std::sqrt(var + 1e-5));
    r.lse.push_back({m + std::log(s), k * (1 + std::fabs(m))});
    for (std::size_t j = 0; j < n; ++j) {
      const double sm = std::exp(xr[j] - m) / s;
      r.softmax.push_back({sm, k * sm});
      const double ls = xr[j] - m - std::log(s);
      r.log_softmax.push_back({ls, k * (1 + std::fabs(ls) + std::fabs(xr[j] - m))});
      const double ln = (xr[j] - mean) * rstd;
      const double ln_err = rstd * (std::fabs(xr[j] - mean) * var_rel + k * amax_abs) + k * std::fabs(ln);
      r.layer_norm.push_back({ln, ln_err});
      const double lna = ln * w[j] + b[j];
      r.layer_norm_affine.push_back({lna, ln_err * std::fabs(w[j]) + k * (std::fabs(lna) + std::fabs(b[j]))});
      const double rn = xr[j] * rrms;
      r.rms_norm.push_back({rn, k * std::fabs(rn) + 1e-300});
      r.rms_norm_weight.push_back({rn * w[j], k * std::fabs(rn * w[j]) + 1e-300});
    }
  }
  return r;
}

template <class T>
host_array<T> random_fp(std::size_t n, std::uint64_t seed, double lo, double hi) {
  auto g = make_rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  host_array<T> a(n);
  for (std::size_t i = 0; i < n; ++i) a[i] = from_double<T>(d(g));
  return a;
}

}  // namespace

TEMPLATE_TEST_CASE("host: softmax, log_softmax, layer_norm, rms_norm, logsumexp on rows of length 1, 7, 64, 1000",
                   "[reduce][host][composite]", RXT_FLOAT_DTYPES) {
  using T = TestType;
  const double u = acc_roundoff<T>();
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{1000}}) {
    const std::size_t rows = 3;
    const shape_v s{static_cast<i64>(rows), static_cast<i64>(n)};
    const auto shape = to_shape(s);
    const auto x = random_fp<T>(rows * n, 100 + n, -8, 8);
    const auto w = random_fp<T>(n, 200 + n, 0.5, 1.5);
    const auto b = random_fp<T>(n, 300 + n, -1, 1);
    const auto xv = x.cview(shape);
    const auto wv = w.cview(fusex::shape_t{static_cast<std::int64_t>(n)});
    const auto bv = b.cview(fusex::shape_t{static_cast<std::int64_t>(n)});
    const row_refs r = composite_refs(x.values(), w.values(), b.values(), rows, n, u);
    const std::string len = " rows of " + std::to_string(n);
    check_results("softmax" + len, evaluate(fusex::softmax(xv), s), r.softmax);
    check_results("softmax(x, -1)" + len, evaluate(fusex::softmax(xv, -1), s), r.softmax);
    check_results("log_softmax" + len, evaluate(fusex::log_softmax(xv), s), r.log_softmax);
    check_results("layer_norm" + len, evaluate(fusex::layer_norm(xv), s), r.layer_norm);
    check_results("layer_norm(x, weight, bias)" + len, evaluate(fusex::layer_norm(xv, wv, bv), s), r.layer_norm_affine);
    check_results("rms_norm" + len, evaluate(fusex::rms_norm(xv), s), r.rms_norm);
    check_results("rms_norm(x, weight)" + len, evaluate(fusex::rms_norm(xv, wv), s), r.rms_norm_weight);
    check_results("logsumexp(x, -1)" + len, evaluate(fusex::logsumexp(xv, -1), {static_cast<i64>(rows)}), r.lse);
    // The softmax written out by hand is the same expression.
    const auto by_hand = fusex::exp(xv - fusex::max(xv, -1, fusex::keepdim)) /
                         fusex::sum(fusex::exp(xv - fusex::max(xv, -1, fusex::keepdim)), -1, fusex::keepdim);
    static_assert(std::is_same_v<typename decltype(by_hand)::value_type, T>);
    check_results("softmax by hand" + len, evaluate(by_hand, s), r.softmax);
  }
}

TEST_CASE("host: composites over other axes and shapes (softmax over axis 0 and a middle axis)",
          "[reduce][host][composite]") {
  const auto x = random_fp<double>(4 * 6 * 5, 401, -8, 8);
  const auto xd = x.values();
  const shape_v s{4, 6, 5};
  const auto xv = x.cview(to_shape(s));
  for (int axis : {0, 1, -2}) {
    const int d = axis < 0 ? axis + 3 : axis;
    const std::int64_t n = s[static_cast<std::size_t>(d)];
    const std::int64_t inner = d == 0 ? 30 : 5;
    std::vector<ref_value> want(120);
    for (std::int64_t o = 0; o < 120 / (n * inner); ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        double m = -inf_v, sum = 0;
        for (std::int64_t j = 0; j < n; ++j) m = std::max(m, xd[static_cast<std::size_t>((o * n + j) * inner + i)]);
        for (std::int64_t j = 0; j < n; ++j) sum += std::exp(xd[static_cast<std::size_t>((o * n + j) * inner + i)] - m);
        for (std::int64_t j = 0; j < n; ++j) {
          const std::size_t at = static_cast<std::size_t>((o * n + j) * inner + i);
          want[at] = {std::exp(xd[at] - m) / sum, 1e-14};
        }
      }
    check_results("softmax over axis " + std::to_string(axis), evaluate(fusex::softmax(xv, axis), s), want);
  }
}

TEST_CASE("host: composites with a residual add and a cast epilogue: cast<bfloat16>(layer_norm(x + residual, g, b))",
          "[reduce][host][composite]") {
  const std::size_t rows = 5, n = 96;
  const shape_v s{static_cast<i64>(rows), static_cast<i64>(n)};
  const auto x = random_fp<float>(rows * n, 501, -4, 4);
  const auto res = random_fp<float>(rows * n, 502, -4, 4);
  const auto g = random_fp<float>(n, 503, 0.5, 1.5);
  const auto be = random_fp<float>(n, 504, -1, 1);
  const auto xv = x.cview(to_shape(s));
  const auto rv = res.cview(to_shape(s));
  const auto gv = g.cview(fusex::shape_t{96});
  const auto bv = be.cview(fusex::shape_t{96});
  std::vector<double> sum(rows * n);
  const auto xd = x.values(), rd = res.values();
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = static_cast<double>(static_cast<float>(xd[i] + rd[i]));
  const row_refs r = composite_refs(sum, g.values(), be.values(), rows, n, unit_roundoff<float>());

  const auto e1 = fusex::cast<fusex::bfloat16>(fusex::layer_norm(xv + rv, gv, bv));
  static_assert(std::is_same_v<typename decltype(e1)::value_type, fusex::bfloat16>);
  check_results("cast<bfloat16>(layer_norm(x + residual, gamma, beta))", evaluate(e1, s), r.layer_norm_affine);
  const auto e2 = fusex::cast<fusex::bfloat16>(fusex::layer_norm(xv + rv) * gv + bv);
  check_results("cast<bfloat16>(layer_norm(x + residual) * gamma + beta)", evaluate(e2, s), r.layer_norm_affine);
  // Into a bfloat16 destination without the cast: the store rounds once.
  check_results(
      "layer_norm(x + residual, gamma, beta) into bfloat16",
      [&] {
        host_array<fusex::bfloat16> out(rows * n);
        out.poison();
        fusex::host::eval(out.view(to_shape(s)), fusex::layer_norm(xv + rv, gv, bv));
        return out;
      }(),
      r.layer_norm_affine);
  check_results("rms_norm(x + residual, gamma)", evaluate(fusex::rms_norm(xv + rv, gv), s), r.rms_norm_weight);
  check_results("softmax(x + residual) * 2", evaluate(fusex::softmax(xv + rv) * 2.0f, s), [&] {
    auto w = r.softmax;
    for (auto& e : w) e.value *= 2, e.err *= 2;
    return w;
  }());
}

TEST_CASE("host: reductions feeding elementwise work", "[reduce][host][composite]") {
  const std::size_t rows = 6, n = 40;
  const shape_v s{static_cast<i64>(rows), static_cast<i64>(n)};
  const auto x = random_fp<float>(rows * n, 601, -3, 3);
  const auto xv = x.cview(to_shape(s));
  const auto xd = x.values();
  const double u = unit_roundoff<float>();
  SECTION("sqrt(sum(x * x, -1)) into a [rows] destination") {
    std::vector<ref_value> want;
    for (std::size_t i = 0; i < rows; ++i) {
      double q = 0;
      for (std::size_t j = 0; j < n; ++j) q += xd[i * n + j] * xd[i * n + j];
      want.push_back({std::sqrt(q), (n + 8) * u * std::sqrt(q)});
    }
    check_results("sqrt(sum(x * x, -1))", evaluate(fusex::sqrt(fusex::sum(xv * xv, -1)), {static_cast<i64>(rows)}),
                  want);
    check_results("norm(x, -1)", evaluate(fusex::norm(xv, -1), {static_cast<i64>(rows)}), want);
  }
  SECTION("x - mean(x, 0) broadcasts the [n] column means back over the rows") {
    std::vector<ref_value> want(rows * n);
    for (std::size_t j = 0; j < n; ++j) {
      double m = 0;
      for (std::size_t i = 0; i < rows; ++i) m += xd[i * n + j];
      m /= static_cast<double>(rows);
      for (std::size_t i = 0; i < rows; ++i) want[i * n + j] = {xd[i * n + j] - m, 32 * u * 3};
    }
    check_results("x - mean(x, 0)", evaluate(xv - fusex::mean(xv, 0), s), want);
  }
  SECTION("x / norm(x, -1, l2, keepdim) and where(x == amax(x, -1, keepdim), 1, 0)") {
    std::vector<ref_value> unit(rows * n), hot(rows * n);
    for (std::size_t i = 0; i < rows; ++i) {
      double q = 0, m = -inf_v;
      for (std::size_t j = 0; j < n; ++j) q += xd[i * n + j] * xd[i * n + j], m = std::max(m, xd[i * n + j]);
      for (std::size_t j = 0; j < n; ++j) {
        unit[i * n + j] = {xd[i * n + j] / std::sqrt(q), (n + 8) * u};
        hot[i * n + j] = {xd[i * n + j] == m ? 1.0 : 0.0, 0};
      }
    }
    check_results("x / norm(x, -1, l2, keepdim)",
                  evaluate(xv / fusex::norm(xv, -1, fusex::norm_kind::l2, fusex::keepdim), s), unit);
    check_results("where(x == amax(x, -1, keepdim), 1, 0)",
                  evaluate(fusex::where(xv == fusex::amax(xv, -1, fusex::keepdim), 1.0f, 0.0f), s), hot);
  }
  SECTION("a sum of reductions of different axes, and mean and var into tie(...)") {
    // sum(x, 0) is [n], sum(x, 1, keepdim) is [rows, 1]: their sum broadcasts to [rows, n].
    std::vector<double> cs(n, 0), rs(rows, 0);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < n; ++j) cs[j] += xd[i * n + j], rs[i] += xd[i * n + j];
    std::vector<ref_value> want(rows * n);
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = 0; j < n; ++j) want[i * n + j] = {cs[j] + rs[i], (n + 8) * u * 3 * static_cast<double>(n)};
    check_results("sum(x, 0) + sum(x, 1, keepdim)", evaluate(fusex::sum(xv, 0) + fusex::sum(xv, 1, fusex::keepdim), s),
                  want);

    host_array<float> m(rows), v(rows);
    m.poison();
    v.poison();
    fusex::host::eval(fusex::tie(m.view(fusex::shape_t{6}), v.view(fusex::shape_t{6})), fusex::mean(xv, -1),
                      fusex::var(xv, -1));
    std::vector<ref_value> wm, wv;
    for (const auto& grp : groups(xd, s, 2u))
      wm.push_back(reference(rk::mean, grp, u)), wv.push_back(reference(rk::var, grp, u));
    check_results("tie: mean", m, wm);
    check_results("tie: var", v, wv);
  }
}

// --- half and bfloat16: intermediates stay in float32 ---------------------------------------------------
// The row kernel keeps a reduction's operand and its result in float32 (the compute type); the
// host backend must compute the same values, not round them to float16/bfloat16 on the way.

TEMPLATE_TEST_CASE("host: float16/bfloat16 reductions keep their operand and result in float32",
                   "[reduce][host][precision]", fusex::half, fusex::bfloat16) {
  using T = TestType;
  const double u = unit_roundoff<float>();
  SECTION("mean(x * x, -1) where one x * x exceeds the float16 range") {
    const auto x = from_values<T>({300, 1, 1, 1, 1, 1, 1, 1});
    const double want = (300.0 * 300.0 + 7) / 8;
    const auto v = x.cview(fusex::shape_t{1, 8});
    check_results("mean(x, -1)", evaluate(fusex::mean(v, -1), {1}), std::vector<ref_value>{{(300.0 + 7) / 8, 0}});
    check_results("mean(x * x, -1)", evaluate(fusex::mean(v * v, -1), {1}),
                  std::vector<ref_value>{{want, 16 * u * want}});
  }
  SECTION("rms_norm of values whose squares exceed the float16 range") {
    const std::size_t rows = 2, n = 16;
    const auto x = random_fp<T>(rows * n, 701, 200, 400);
    const auto w = random_fp<T>(n, 702, 0.5, 1.5);
    const row_refs r = composite_refs(x.values(), w.values(), w.values(), rows, n, u);
    const shape_v s{static_cast<i64>(rows), static_cast<i64>(n)};
    check_results("rms_norm(x)", evaluate(fusex::rms_norm(x.cview(to_shape(s))), s), r.rms_norm);
    check_results("rms_norm(x, w)", evaluate(fusex::rms_norm(x.cview(to_shape(s)), w.cview(fusex::shape_t{16})), s),
                  r.rms_norm_weight);
  }
  SECTION("layer_norm of rows with a large mean (the mean is not rounded to float16)") {
    const std::size_t rows = 3, n = 64;
    // Spread over a few units in the last place of T at 1000 (float16: 0.5, bfloat16: 4).
    const double spread = std::is_same_v<T, fusex::half> ? 2 : 100;
    const auto x = random_fp<T>(rows * n, 703, 1000 - spread, 1000 + spread);
    const row_refs r = composite_refs(x.values(), std::vector<double>(n, 1), std::vector<double>(n, 0), rows, n, u);
    const shape_v s{static_cast<i64>(rows), static_cast<i64>(n)};
    check_results("layer_norm(x)", evaluate(fusex::layer_norm(x.cview(to_shape(s))), s), r.layer_norm);
  }
}

// --- the plan printer -------------------------------------------------------------------------------

TEST_CASE("host: explain() names rule 1 (one row kernel) and rule 2 with its reason", "[reduce][host][explain]") {
  const std::size_t rows = 8, n = 256;
  host_array<float> x(rows * n), res(rows * n), out(rows * n), g(n), b(n), per_row(rows), cols(n);
  host_array<fusex::bfloat16> out_bf(rows * n);
  host_array<std::int64_t> idx(n);
  const fusex::shape_t s{8, 256};
  const auto xv = x.cview(s);
  const auto rv = res.cview(s);
  const auto gv = g.cview(fusex::shape_t{256});
  const auto bv = b.cview(fusex::shape_t{256});
  const auto ov = out.view(s);
  auto rule1 = [](const std::string& plan) {
    INFO(plan);
    CHECK(contains(plan, "1 kernel (row reduction"));
    CHECK(contains(plan, "rule 1"));
    CHECK(contains(plan, "8 rows x 256 columns"));
    CHECK_FALSE(contains(plan, "rule 2"));
  };
  rule1(fusex::explain(ov, fusex::softmax(xv)));
  rule1(fusex::explain(ov, fusex::log_softmax(xv + rv)));
  rule1(fusex::explain(ov, fusex::layer_norm(xv + rv, gv, bv)));
  rule1(fusex::explain(ov, fusex::layer_norm(xv + rv) * gv + bv));
  rule1(fusex::explain(ov, fusex::rms_norm(xv + rv, gv)));
  rule1(fusex::explain(out_bf.view(s), fusex::cast<fusex::bfloat16>(fusex::layer_norm(xv + rv, gv, bv))));
  {
    const std::string plan = fusex::explain(ov, fusex::layer_norm(xv + rv, gv, bv));
    INFO(plan);
    CHECK(contains(plan, "epilogue over the row"));
    CHECK(contains(plan, "mean over axes [1] keepdim -> float32"));
    CHECK(contains(plan, "var over axes [1] keepdim -> float32"));
    CHECK(contains(plan, "1 pass(es) over each row (2 reduction(s)"));  // mean and var share the pass
    // x would own the float32 registers, but residual, another float32 operand inside both
    // reductions, would read memory on every pass: the row is re-read per pass instead.
    CHECK_FALSE(contains(plan, "row kept in registers"));
    CHECK(contains(plan, "row re-read per pass (an operand inside a reduction would read memory on every pass)"));
    // Outside the reductions the same operands do not matter: x + residual in the epilogue only.
    const auto m = fusex::mean(xv, -1, fusex::keepdim);
    const std::string epilogue_only = fusex::explain(ov, (xv - m) + rv);
    INFO(epilogue_only);
    CHECK(contains(epilogue_only, "row kept in registers"));
    CHECK_FALSE(contains(epilogue_only, "re-read"));
    // Broadcast operands inside a reduction (a [cols] vector, a [rows, 1] scale) are a few cached
    // lines, not a second stream: the row stays in registers.
    host_array<float> per_row(8);
    const auto pr = per_row.cview(fusex::shape_t{8, 1});
    for (const std::string& p :
         {fusex::explain(ov, fusex::softmax(xv * gv)), fusex::explain(ov, fusex::softmax(xv * pr)),
          fusex::explain(ov, fusex::layer_norm(xv + gv))}) {
      INFO(p);
      CHECK(contains(p, "row kept in registers"));
      CHECK_FALSE(contains(p, "re-read"));
    }
  }
  {
    // The common forms: the planner's roles for the real operands are the ones the structure
    // predicts, so the kernel's roles are compile-time constants.
    for (const std::string& plan :
         {fusex::explain(ov, fusex::softmax(xv)), fusex::explain(ov, fusex::log_softmax(xv)),
          fusex::explain(ov, fusex::layer_norm(xv)), fusex::explain(ov, fusex::layer_norm(xv, gv, bv)),
          fusex::explain(ov, fusex::rms_norm(xv, gv)),
          fusex::explain(out_bf.view(s), fusex::cast<fusex::bfloat16>(fusex::layer_norm(xv, gv, bv)))}) {
      INFO(plan);
      CHECK(contains(plan, "row kept in registers"));
      CHECK(contains(plan, "static path: roles and strides known at compile time"));
    }
    // The prediction is of the default tuning: with prefetching on, weight and bias change role.
    const scoped_setting<bool> on(fusex::detail::row_tuning_state().prefetch, true);
    const std::string plan = fusex::explain(ov, fusex::layer_norm(xv, gv, bv));
    INFO(plan);
    CHECK(contains(plan, "2 prefetched into L1 at the load"));
    CHECK(contains(plan, "roles tested at run time"));
  }
  {
    // Leaves outside the reductions written before them are predicted to be the reduced operand
    // (x + f(layer_norm(x)), as the tour's chain writes it)...
    const std::string plan = fusex::explain(ov, xv + fusex::gelu(fusex::layer_norm(xv, gv, bv)) * 0.5f);
    INFO(plan);
    CHECK(contains(plan, "4 of 6 leaves answered from registers"));
    CHECK(contains(plan, "static path"));
  }
  {
    // ... and those after them another operand: the same operand written there is still found
    // and cached, with the roles tested at run time.
    const std::string plan = fusex::explain(ov, fusex::mean(xv, -1, fusex::keepdim) * xv);
    INFO(plan);
    CHECK(contains(plan, "2 of 2 leaves answered from registers"));
    CHECK(contains(plan, "roles tested at run time"));
  }
  {
    // A per-row value broadcast along the row (column stride 0) keeps the run-time tests.
    host_array<float> scale(8);
    const auto sv = scale.cview(fusex::shape_t{8, 1});
    const std::string plan = fusex::explain(ov, fusex::softmax(xv) * sv);
    INFO(plan);
    CHECK(contains(plan, "row kept in registers"));
    CHECK(contains(plan, "roles tested at run time"));
    CHECK(contains(fusex::explain(ov, fusex::softmax(xv) * gv), "static path"));
  }
  {
    // Written by hand, softmax nests: the max is needed before the sum of exponentials.
    const auto m = fusex::max(xv, -1, fusex::keepdim);
    const std::string plan =
        fusex::explain(ov, fusex::exp(xv - m) / fusex::sum(fusex::exp(xv - m), -1, fusex::keepdim));
    INFO(plan);
    CHECK(contains(plan, "2 pass(es) over each row (3 reduction(s)"));
  }
  {
    const std::string plan = fusex::explain(per_row.view(fusex::shape_t{8}), fusex::sqrt(fusex::sum(xv * xv, -1)));
    rule1(plan);
    INFO(plan);
    CHECK(contains(plan, "one value per row"));
  }
  {
    const std::string plan = fusex::explain(idx.view(fusex::shape_t{256}), fusex::argmax(xv, 0));
    INFO(plan);
    CHECK(contains(plan, "rule 2"));
    CHECK(contains(plan, "argmax reduces axes other than the last one alone"));
    CHECK(contains(plan, "argmax of an operand of shape [8, 256]"));
    CHECK(contains(plan, "1 elementwise kernel"));
    CHECK_FALSE(contains(plan, "rule 1"));
  }
  {
    const std::string plan = fusex::explain(ov, fusex::softmax(xv, 0));
    INFO(plan);
    CHECK(contains(plan, "rule 2"));
    CHECK(contains(plan, "logsumexp reduces axes other than the last one alone"));
  }
  {
    // Per-row sums broadcast over a new leading axis: the destination is neither the full nor the
    // reduced shape.
    host_array<float> wide(2 * 8);
    const std::string plan = fusex::explain(wide.view(fusex::shape_t{2, 8}), fusex::sum(xv, -1));
    INFO(plan);
    CHECK(contains(plan, "rule 2"));
    CHECK(contains(plan, "destination [2, 8] is neither the full shape [8, 256] nor the reduced one"));
  }
  {
    const std::string plan = fusex::explain(cols.view(fusex::shape_t{256}), fusex::sum(xv, 0) + fusex::amax(xv, 0));
    INFO(plan);
    CHECK(contains(plan, "2 reduction(s)"));
    CHECK(contains(plan, "rule 2"));
  }
}

TEST_CASE("host: the cached row's roles: per leaf type, the most written operand owns the registers",
          "[reduce][host][explain]") {
  using fusex::detail::operand_layout;
  float a = 0, b = 0;
  fusex::bfloat16 c{};
  auto leaf = [](const void* p, fusex::dtype_id dtype, int size, std::int64_t rs) {
    operand_layout o;
    o.data = p;
    o.dtype = dtype;
    o.elem_size = size;
    o.s[0] = rs;
    o.s[1] = 1;
    return o;
  };
  auto role = [](std::uint64_t m, int i) { return static_cast<int>((m >> (2 * i)) & 3u); };
  int cached = 0;
  {
    // b (written twice) beats a (once) for float32; c owns the bfloat16 registers alone.
    const operand_layout ops[] = {leaf(&a, fusex::dtype_id::float32, 4, 256), leaf(&b, fusex::dtype_id::float32, 4, 256),
                                  leaf(&c, fusex::dtype_id::bfloat16, 2, 256), leaf(&b, fusex::dtype_id::float32, 4, 256)};
    const auto m = fusex::detail::assign_cache_roles(ops, 4, cached);
    CHECK(role(m, 0) == 0);
    CHECK(role(m, 1) == 2);
    CHECK(role(m, 2) == 2);
    CHECK(role(m, 3) == 1);
    CHECK(cached == 3);
  }
  {
    // The same pointer with another row stride (a broadcast row) is another operand.
    const operand_layout ops[] = {leaf(&a, fusex::dtype_id::float32, 4, 0), leaf(&a, fusex::dtype_id::float32, 4, 256), leaf(&a, fusex::dtype_id::float32, 4, 256)};
    const auto m = fusex::detail::assign_cache_roles(ops, 3, cached);
    CHECK(role(m, 0) == 0);
    CHECK(role(m, 1) == 2);
    CHECK(role(m, 2) == 1);
    CHECK(cached == 2);
  }
  {
    // Only eligible leaves take part (a one-value-per-row epilogue reads its leaves from memory):
    // the ineligible b, written twice, does not win over a.
    const operand_layout ops[] = {leaf(&b, fusex::dtype_id::float32, 4, 256), leaf(&a, fusex::dtype_id::float32, 4, 256),
                                  leaf(&b, fusex::dtype_id::float32, 4, 256)};
    const bool eligible[] = {false, true, false};
    const auto m = fusex::detail::assign_cache_roles(ops, 3, cached, eligible);
    CHECK(role(m, 0) == 0);
    CHECK(role(m, 1) == 2);
    CHECK(role(m, 2) == 0);
    CHECK(cached == 1);
  }
  {
    // User types never share registers; leaves past the 32nd read memory.
    std::vector<operand_layout> ops(40, leaf(&a, fusex::dtype_id::float32, 4, 256));
    ops[0] = leaf(&b, fusex::dtype_id::user, 4, 256);
    const auto m = fusex::detail::assign_cache_roles(ops.data(), 40, cached);
    CHECK(role(m, 0) == 0);
    CHECK(role(m, 1) == 2);
    CHECK(role(m, 31) == 1);
    CHECK(cached == 31);
  }
}

TEST_CASE("host: few short rows get one vector per thread, many rows about 16 elements", "[reduce][host][explain]") {
  // The row group's size: [16, 256] would be 1 block of 16 rows of 16 threads at 4 float4 per
  // thread (fewer blocks than row_small_grid_blocks): it takes 64 threads per row, one float4
  // each; [4096, 1024] keeps 64 threads of 4 float4, [4096, 256] 16 threads (part of a warp).
  // vectors_per_thread forces a size (bench_reduce compares them).
  host_array<float> x(4096 * 1024), y(4096 * 1024), g(1024);
  const auto plan = [&](std::int64_t rows, std::int64_t cols) {
    const fusex::shape_t s{rows, cols};
    return fusex::explain(y.view(s), fusex::rms_norm(x.cview(s), g.cview(fusex::shape_t{cols})));
  };
  CHECK(contains(plan(16, 256), "64 threads per row"));
  CHECK(contains(plan(4096, 1024), "64 threads per row"));
  CHECK(contains(plan(4096, 256), "16 threads per row"));  // 256 blocks: no change
  CHECK(contains(plan(32768, 128), "8 threads per row"));
  CHECK(contains(plan(65536, 4), "1 thread per row"));
  std::string forced;
  {
    const scoped_setting<int> four(fusex::detail::row_tuning_state().vectors_per_thread, 4);
    forced = plan(16, 256);
  }
  CHECK(contains(forced, "16 threads per row"));
  CHECK(contains(forced, "row kept in registers"));
}

TEST_CASE("host: rows at vector width 8 keep 32 elements per thread, up to 8192 columns", "[reduce][host][explain]") {
  // bfloat16 leaves into a bfloat16 destination: 8-wide vectors, 4 per thread (32 elements), so
  // a 4096-column row is 128 threads and an 8192-column one 256, still kept in registers. The
  // same leaves into a float32 destination are 4-wide: 16 elements, so 8192 columns are re-read.
  using fusex::bfloat16;
  host_array<bfloat16> x(1024 * 8192), y(1024 * 8192), g(8192);
  host_array<float> yf(1024 * 8192);
  const auto plan = [&](std::int64_t cols, bool float_out) {
    const fusex::shape_t s{1024, cols};
    const auto e = fusex::rms_norm(x.cview(s), g.cview(fusex::shape_t{cols}));
    return float_out ? fusex::explain(yf.view(s), e) : fusex::explain(y.view(s), e);
  };
  const std::string p4096 = plan(4096, false), p8192 = plan(8192, false), f8192 = plan(8192, true);
  INFO(p4096 << p8192 << f8192);
  CHECK(contains(p4096, "128 threads per row"));
  CHECK(contains(p4096, "vector width 8"));
  CHECK(contains(p4096, "row kept in registers"));
  CHECK(contains(p8192, "256 threads per row"));
  CHECK(contains(p8192, "row kept in registers"));
  CHECK(contains(f8192, "vector width 4"));
  CHECK_FALSE(contains(f8192, "row kept in registers"));
}

namespace {
// The two-level form of a reduction as the row kernel's cached path runs it (chunks of W values,
// a pairwise tree over them, the first result finished, then the second sweep), and the one-pass
// form (lift_vec and combine), on the host: both must agree, special values included.
template <class Op, int W>
float two_level(const Op& op, const std::vector<float>& x) {
  using C = typename Op::template pre_acc<float>;
  C pre = op.template pre_identity<float>();
  for (std::size_t i = 0; i < x.size(); i += W) {
    float v[W];
    for (int l = 0; l < W; ++l) v[l] = x[i + static_cast<std::size_t>(l)];
    pre = op.template pre_combine<float>(pre, op.template pre_lift_vec<float, W>(v));
  }
  const auto n = static_cast<std::int64_t>(x.size());
  const C first = op.template pre_finish<float>(pre, n);
  C post = C(0);
  for (std::size_t i = 0; i < x.size(); i += W) {
    float v[W];
    for (int l = 0; l < W; ++l) v[l] = x[i + static_cast<std::size_t>(l)];
    post += op.template post_lift_vec<float, W>(v, first);
  }
  return op.template finish_two_level<float>(first, post, n);
}
template <class Op, int W>
float one_pass(const Op& op, const std::vector<float>& x) {
  auto acc = op.template identity<float>();
  for (std::size_t i = 0; i < x.size(); i += W) {
    float v[W];
    for (int l = 0; l < W; ++l) v[l] = x[i + static_cast<std::size_t>(l)];
    acc = op.template combine<float>(acc, op.template lift_vec<float, W>(v, static_cast<std::int64_t>(i)));
  }
  return op.template finish<float>(acc, static_cast<std::int64_t>(x.size()));
}
}  // namespace

TEST_CASE("host: the two-level forms of logsumexp and var agree with the one-pass forms, special values included",
          "[reduce][host][two_level]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float big = 3e38f;
  std::vector<std::vector<float>> rows = {
      {0.5f, -1.25f, 2.0f, 3.5f, -0.75f, 1.0f, 0.25f, -2.5f},
      {inf, 1.0f, 2.0f, 3.0f, -1.0f, 0.0f, 5.0f, 6.0f},
      {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf},
      {-inf, 1.0f, 2.0f, -inf, 3.0f, -inf, 4.0f, 0.5f},
      {1.0f, nan, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f},
      {inf, -inf, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f},
      {big, big, big, big, big, big, big, big},  // var: 0, not an overflowed NaN
      {big, -big, big, -big, 1.0f, 2.0f, 3.0f, 4.0f},
      {80.0f, 85.0f, 88.0f, 88.5f, -100.0f, 70.0f, 60.0f, 87.0f},  // exp would overflow unshifted
      std::vector<float>(8192, 1.5f),                              // the longest cached row (2-byte types), constant
  };
  static_assert(fusex::reduce_ops::variance<0>::two_level_max_count == 8192, "the rows above are the longest");
  std::vector<float> ramp(8192);
  for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i % 97) * 0.37f - 11.0f;
  rows.push_back(ramp);
  auto same = [](float a, float b, double tol) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    if (std::isinf(a) || std::isinf(b)) return a == b;
    return std::abs(double(a) - double(b)) <= tol * std::max(1.0, std::abs(double(b)));
  };
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto& x = rows[r];
    INFO("row " << r);
    const fusex::reduce_ops::logsumexp lse{};
    const float l2 = two_level<fusex::reduce_ops::logsumexp, 4>(lse, x),
                l1 = one_pass<fusex::reduce_ops::logsumexp, 4>(lse, x);
    INFO("logsumexp two-level " << l2 << ", one-pass " << l1);
    CHECK(same(l2, l1, 1e-6));
    for (const double correction : {0.0, 1.0}) {
      fusex::reduce_ops::variance<0> var{};
      var.correction = correction;
      const float v2 = two_level<fusex::reduce_ops::variance<0>, 4>(var, x),
                  v1 = one_pass<fusex::reduce_ops::variance<0>, 4>(var, x);
      INFO("var (correction " << correction << ") two-level " << v2 << ", one-pass " << v1);
      CHECK(same(v2, v1, 1e-5));
    }
  }
  // The special rows' expected values, independently of the one-pass form.
  const fusex::reduce_ops::logsumexp lse{};
  CHECK(two_level<fusex::reduce_ops::logsumexp, 4>(lse, rows[1]) == inf);
  CHECK(two_level<fusex::reduce_ops::logsumexp, 4>(lse, rows[2]) == -inf);
  CHECK(std::isnan(two_level<fusex::reduce_ops::logsumexp, 4>(lse, rows[4])));
  fusex::reduce_ops::variance<0> pop{};
  pop.correction = 0;
  CHECK(two_level<fusex::reduce_ops::variance<0>, 4>(pop, rows[6]) == 0.0f);
  CHECK(std::isnan(two_level<fusex::reduce_ops::variance<0>, 4>(pop, rows[5])));  // inf - inf
  CHECK(two_level<fusex::reduce_ops::variance<0>, 4>(pop, rows[9]) == 0.0f);
  // The first sweep of var over the longest cached row of near-maximal values, summed as the
  // kernel does (a balanced tree): the mean, not an overflow (scaled by 2^-12 it would overflow).
  std::vector<float> part(8192 / 8);
  for (std::size_t i = 0; i < part.size(); ++i) {
    const float v[8] = {big, big, big, big, big, big, big, big};
    part[i] = pop.template pre_lift_vec<float, 8>(v);
  }
  for (std::size_t w = part.size(); w > 1; w /= 2)
    for (std::size_t k = 0; k < w / 2; ++k) part[k] = pop.template pre_combine<float>(part[k], part[k + w / 2]);
  const float mean_big = pop.template pre_finish<float>(part[0], 8192);
  CHECK(std::isfinite(mean_big));
  CHECK(std::fabs(static_cast<double>(mean_big) - big) <= 1e-6 * big);  // rounding of the tree sum
}
