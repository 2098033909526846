// Host self-check of the composites' GPU tolerances (no GPU): the references, data and comparison
// of the GPU test (composite_reference.hpp, check_composite_output) fed outputs known to be wrong,
// computed in double and rounded to the output type, at the GPU test's shapes and data. Each
// mutation must be reported as a mismatch, and the correct output rounded to T must pass (the
// tolerance is not tighter than the output's own rounding). A table of the worst error against
// the tolerance per case is printed (ratio > 1: a mismatch).
#include "composite_reference.hpp"
#include "fusex_catch.hpp"

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

using namespace composite_test;
using fusex::bfloat16;
using fusex::half;

namespace {

template <class T>
host_vector<T> rounded(const std::vector<double>& v) {
  host_vector<T> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = fusex::convert<T>(v[i]);
  return h;
}

/// Runs the GPU test's check on `got`, prints one line (the worst element's error and tolerance),
/// and returns whether the check passed.
template <class T>
bool verdict_line(const char* mutation, composite op, std::int64_t cols, const composite_expected& e,
                  const host_vector<T>& got) {
  const composite_verdict v = check_composite_output<T>(e, got);
  const std::size_t i = v.linear.worst;
  const double half_eps = epsilon_of<T>() / 2, floor = denorm_min_of<T>() / 2;
  const double tol = half_eps * std::fabs(e.value[i]) + floor + e.err[i] * (1 + half_eps);
  const double err = std::fabs(to_double(got[i]) - e.value[i]);
  std::printf("%-9s %-40s %6lld  %-22s %-8s worst |err| %.3e  tol %.3e  ratio %9.3g  (log space: %s, ratio %.3g)\n",
              fusex::dtype_name<T>(), composite_name(op), static_cast<long long>(cols), mutation,
              v.ok() ? "passes" : "FAILS", err, tol, v.linear.worst_ratio,
              e.log_value.empty() ? "-" : (v.log.ok() ? "passes" : "FAILS"), v.log.worst_ratio);
  return v.ok();
}

// The other side: a float emulation of the row kernel's arithmetic (256 threads each folding its
// share of the row one element after the other, then a tree over the threads; the one-pass
// logsumexp combine, Welford/Chan for the moments; the epilogues in float), rounded to T, must
// pass: the bounds are not tighter than float arithmetic of that shape. (expf stands in for
// ex2.approx, whose extra error the bounds also allow.)
template <class Acc, class Lift, class Combine>
Acc fold_like_the_row_kernel(const std::vector<float>& v, const Lift& lift, const Combine& combine) {
  const std::size_t n = v.size(), threads = std::min<std::size_t>(256, n);
  std::vector<Acc> part;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t first = t * n / threads, last = (t + 1) * n / threads;
    Acc a = lift(v[first]);
    for (std::size_t i = first + 1; i < last; ++i) a = combine(a, lift(v[i]));
    part.push_back(a);
  }
  while (part.size() > 1) {
    std::vector<Acc> next;
    for (std::size_t i = 0; i + 1 < part.size(); i += 2) next.push_back(combine(part[i], part[i + 1]));
    if (part.size() % 2 != 0) next.push_back(part.back());
    part.swap(next);
  }
  return part[0];
}

struct max_sum_f {
  float m, s;
};
struct welford_f {
  float n, mean, m2;
};

template <class T>
std::vector<double> float_emulation(composite op, const composite_data<T>& d) {
  std::vector<double> out(static_cast<std::size_t>(d.rows * d.cols));
  const bool res = has_residual(op);
  std::vector<float> v(static_cast<std::size_t>(d.cols));
  for (std::int64_t row = 0; row < d.rows; ++row) {
    const std::size_t o = static_cast<std::size_t>(row * d.cols);
    for (std::size_t j = 0; j < v.size(); ++j)
      v[j] = static_cast<float>(d.xd[o + j]) + (res ? static_cast<float>(d.rd[o + j]) : 0.0f);
    auto g = [&](std::size_t j) { return static_cast<float>(d.gd[j]); };
    auto b = [&](std::size_t j) { return static_cast<float>(d.bd[j]); };
    if (op == composite::softmax || op == composite::softmax_res || op == composite::log_softmax_res) {
      const auto a = fold_like_the_row_kernel<max_sum_f>(
          v,
          [](float x) {
            return max_sum_f{x, 1.0f};
          },
          [](max_sum_f p, max_sum_f q) {
            const float m = std::max(p.m, q.m);
            return max_sum_f{m, p.s * std::exp(p.m - m) + q.s * std::exp(q.m - m)};
          });
      const float lse = a.m + std::log(a.s);
      for (std::size_t j = 0; j < v.size(); ++j)
        out[o + j] = op == composite::log_softmax_res ? (v[j] - lse) + b(j) : std::exp(v[j] - lse) * g(j);
    } else if (op == composite::layer_norm || op == composite::layer_norm_res) {
      const auto w = fold_like_the_row_kernel<welford_f>(
          v,
          [](float x) {
            return welford_f{1.0f, x, 0.0f};
          },
          [](welford_f p, welford_f q) {
            const float n = p.n + q.n, delta = q.mean - p.mean, wb = q.n / n;
            return welford_f{n, p.mean + delta * wb, p.m2 + q.m2 + delta * delta * p.n * wb};
          });
      const float rs = 1.0f / std::sqrt(w.m2 / w.n + static_cast<float>(layer_norm_eps));
      for (std::size_t j = 0; j < v.size(); ++j) out[o + j] = (v[j] - w.mean) * rs * g(j) + b(j);
    } else {
      std::vector<float> sq(v.size());
      for (std::size_t j = 0; j < v.size(); ++j) sq[j] = v[j] * v[j];
      const float s = fold_like_the_row_kernel<float>(
          sq, [](float x) { return x; }, [](float p, float q) { return p + q; });
      const float rs = 1.0f / std::sqrt(s / static_cast<float>(v.size()) + static_cast<float>(rms_norm_eps));
      for (std::size_t j = 0; j < v.size(); ++j) out[o + j] = v[j] * rs * g(j);
    }
  }
  return out;
}

// Whether a mutation cannot be seen in outputs of T at a column count, whatever the tolerance.
// Only one case: with one column, softmax is exactly 1 and rms_norm within 1e-5 of +-1, so the
// outputs are gamma's 17 bfloat16 values (times +-1); a relative change of 1e-3 is below half an
// ulp of bfloat16 (2^-8) and rounds back to the same values. Everywhere else every mutation must
// be caught: float32 resolves them outright; in float16 and bfloat16 a change smaller than half an
// ulp is caught on the elements whose exact value lies within that change of a rounding midpoint
// (the mutated value rounds to the neighbour, more than half an ulp plus the device's bound away),
// and rows of 7 columns and more have such elements.
template <class T>
bool below_resolution(const std::string& mutation, std::int64_t cols) {
  return std::is_same_v<T, bfloat16> && cols == 1 && mutation.rfind("relative error", 0) == 0;
}

template <class T>
void self_check() {
  std::printf("\n");
  for (const std::int64_t cols : composite_cols) {
    const auto d = make_composite_data<T>(composite_rows, cols);
    for (const composite op :
         {composite::softmax_res, composite::log_softmax_res, composite::layer_norm_res, composite::softmax,
          composite::layer_norm, composite::rms_norm, composite::rms_norm_res}) {
      INFO(composite_name(op) << " [" << composite_rows << ", " << cols << "] " << fusex::dtype_name<T>());
      const composite_expected e = composite_reference(op, d);
      // The correct output, rounded once to T, passes: the tolerance admits the output's rounding.
      CHECK(verdict_line<T>("correct, rounded", op, cols, e, rounded<T>(e.value)));
      // Float arithmetic shaped like the device's, rounded to T, passes too.
      CHECK(verdict_line<T>("float emulation", op, cols, e, rounded<T>(float_emulation(op, d))));
      // The mutations, each computed in double and rounded to T.
      auto expect_caught = [&](const char* mutation, const std::vector<double>& wrong) {
        const bool passed = verdict_line<T>(mutation, op, cols, e, rounded<T>(wrong));
        INFO(mutation);
        if (!below_resolution<T>(mutation, cols)) CHECK_FALSE(passed);
      };
      std::vector<double> wrong = e.value;
      switch (op) {
        case composite::softmax:
        case composite::softmax_res:
          std::fill(wrong.begin(), wrong.end(), 0.0);
          expect_caught("zeros", wrong);
          for (std::size_t i = 0; i < wrong.size(); ++i) wrong[i] = e.value[i] * (1 + 1e-3);
          expect_caught("relative error 1e-3", wrong);
          for (std::size_t i = 0; i < wrong.size(); ++i) wrong[i] = e.value[i] * (1 - 1e-3);
          expect_caught("relative error -1e-3", wrong);
          break;
        case composite::log_softmax_res:
          for (std::size_t i = 0; i < wrong.size(); ++i) wrong[i] = e.value[i] + 0.01;
          expect_caught("log_softmax + 0.01", wrong);
          for (std::size_t i = 0; i < wrong.size(); ++i) wrong[i] = e.value[i] - 0.01;
          expect_caught("log_softmax - 0.01", wrong);
          break;
        case composite::layer_norm:
        case composite::layer_norm_res: expect_caught("sample variance", composite_reference(op, d, 1.0).value); break;
        case composite::rms_norm:
        case composite::rms_norm_res:
          for (std::size_t i = 0; i < wrong.size(); ++i) wrong[i] = e.value[i] * (1 + 1e-3);
          expect_caught("relative error 1e-3", wrong);
          break;
      }
    }
  }
}

}  // namespace

TEMPLATE_TEST_CASE("composite tolerances: mutated outputs fail, correctly rounded ones pass", "[reduce][tolerance]",
                   float, half, bfloat16) {
  self_check<TestType>();
}

TEST_CASE("compare_rel: relative with a tiny absolute floor, unlike compare's max(1, |ref|)", "[reduce][tolerance]") {
  using fusex_test::compare;
  using fusex_test::compare_rel;
  // A probability of 1e-4 returned as 0: compare's tolerance is absolute below 1 and lets it pass;
  // compare_rel's is relative and does not.
  const std::vector<float> zero{0.0f};
  const std::vector<double> small{1e-4};
  CHECK(compare(zero, small, 2e-4).empty());
  CHECK_FALSE(compare_rel(zero, small, 2e-4).empty());
  // Within the relative tolerance, and at the floor for a value below float's normal range.
  CHECK(compare_rel(std::vector<float>{1.0001e-4f}, small, 2e-4).empty());
  CHECK(compare_rel(std::vector<float>{0.0f}, std::vector<double>{0x1p-150}, 0.0).empty());
  CHECK_FALSE(compare_rel(std::vector<float>{0.0f}, std::vector<double>{0x1p-148}, 0.0).empty());
  // NaN only where expected; infinities exactly.
  CHECK(compare_rel(std::vector<float>{NAN}, std::vector<double>{NAN}, 1e-6).empty());
  CHECK_FALSE(compare_rel(std::vector<float>{NAN}, std::vector<double>{1.0}, 1e-6).empty());
  CHECK_FALSE(compare_rel(std::vector<float>{1.0f}, std::vector<double>{INFINITY}, 1e-6).empty());
  CHECK(compare_rel(std::vector<float>{-INFINITY}, std::vector<double>{-INFINITY}, 1e-6).empty());
  CHECK_FALSE(compare_rel(std::vector<float>{1.0f, 2.0f}, std::vector<double>{1.0}, 1e-6).empty());
}
