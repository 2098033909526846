// Host suite for reductions, part 2: NaN and infinities, ties of argmin/argmax, empty axes, bad
// axes and shapes (fusex::shape_error naming the axis and shape). Part 3
// (test_reduce_host_composites.cpp) has the composites and the plan printer.
#include "reduce_host_support.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

using namespace rxt;

namespace {

/// Runs reduction K over `list` (keepdim off) of the values `x` of shape `s` and compares with the
/// reference.
template <rk K, class T>
void check_kind(const host_array<T>& x, const shape_v& s, const std::vector<int>& list, double correction = 1) {
  const axis_case c{"", false, list, false};
  const auto e = make(std::integral_constant<rk, K>{}, x.cview(to_shape(s)), c, correction);
  const std::uint32_t mask = mask_of(list, static_cast<int>(s.size()));
  const shape_v os = reduced_shape(s, mask, false);
  const auto out = evaluate(e, os);
  std::vector<ref_value> want;
  for (const auto& grp : groups(x.values(), s, mask)) want.push_back(reference(K, grp, acc_roundoff<T>(), correction));
  std::string axes_text;
  for (int a : list) axes_text += std::to_string(a) + " ";
  check_results(std::string(rk_name(K)) + " over axes " + axes_text + "of " + to_shape(s).str(), out, want);
}

template <class T, rk... K>
void check_kinds(const host_array<T>& x, const shape_v& s, const std::vector<int>& list) {
  (check_kind<K, T>(x, s, list), ...);
}

}  // namespace

// --- NaN and infinities ------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("host: NaN propagates through min/max, argmin/argmax pick the first NaN, infinities",
                   "[reduce][host][nan]", RXT_FLOAT_DTYPES) {
  using T = TestType;
  const double N = nan_v, I = inf_v;
  // Rows: NaN twice; +inf and -inf; all -inf; +inf twice first; +inf later and twice; finite with
  // an +inf; finite with a -inf.
  const shape_v s{7, 5};
  const auto x = from_values<T>({1,  N,  7,  -2, N,                   //
                                 I,  2,  -I, 3,  0.5,                 //
                                 -I, -I, -I, -I, -I,  I, I, 1, 2, 3,  //
                                 1,  2,  I,  3,  I,                   //
                                 1,  2,  3,  I,  4,                   //
                                 1,  -I, 3,  2,  4});
  check_kinds<T, rk::sum, rk::prod, rk::mean, rk::amax, rk::amin, rk::argmax, rk::argmin, rk::any, rk::all, rk::l1,
              rk::l2, rk::linf, rk::var, rk::stddev, rk::logsumexp>(x, s, {-1});
  check_kinds<T, rk::sum, rk::prod, rk::mean, rk::amax, rk::amin, rk::argmax, rk::argmin, rk::any, rk::all, rk::l1,
              rk::l2, rk::linf, rk::var, rk::stddev, rk::logsumexp>(x, s, {0});
  check_kinds<T, rk::sum, rk::amax, rk::amin, rk::argmax, rk::argmin, rk::logsumexp>(x, s, {0, 1});

  // The headline cases, spelled out.
  const auto xv = x.cview(to_shape(s));
  const auto mx = evaluate(fusex::amax(xv, -1), {7});
  CHECK(std::isnan(to_double(mx[0])));  // amax with a NaN is NaN
  CHECK(to_double(mx[1]) == I);
  CHECK(to_double(mx[2]) == -I);
  const auto mn = evaluate(fusex::min(xv, -1, fusex::keepdim), {7, 1});
  CHECK(std::isnan(to_double(mn[0])));
  CHECK(to_double(mn[1]) == -I);
  const auto am = evaluate(fusex::argmax(xv, -1), {7});
  CHECK(am[0] == 1);  // the first NaN
  CHECK(am[1] == 0);
  CHECK(am[2] == 0);  // all equal: the first
  CHECK(am[3] == 0);
  CHECK(am[4] == 2);
  const auto ai = evaluate(fusex::argmin(xv, -1), {7});
  CHECK(ai[0] == 1);
  CHECK(ai[1] == 2);
  CHECK(ai[6] == 1);
  const auto sm = evaluate(fusex::sum(xv, -1), {7});
  CHECK(std::isnan(to_double(sm[0])));
  CHECK(std::isnan(to_double(sm[1])));  // inf + -inf
  CHECK(to_double(sm[3]) == I);         // sum with inf
  CHECK(to_double(sm[6]) == -I);
  const auto all_nan = evaluate(fusex::amax(xv), {});
  CHECK(std::isnan(to_double(all_nan[0])));
}

TEST_CASE("host: logsumexp with +inf is +inf wherever the inf is, -inf rows give -inf", "[reduce][host][nan]") {
  const double I = inf_v;
  const auto x = from_values<float>({I, 1, 2, 1, I, 2, I, I, 0, -I, -I, -I, -I, 3, -I});
  const auto out = evaluate(fusex::logsumexp(x.cview(fusex::shape_t{5, 3}), -1), {5});
  CHECK(out[0] == I);
  CHECK(out[1] == I);  // +inf after a finite value
  CHECK(out[2] == I);  // +inf twice
  CHECK(out[3] == -I);
  CHECK(std::fabs(out[4] - 3.0f) < 1e-6f);
  const auto d = from_values<double>({1, 2, I});
  CHECK(evaluate(fusex::logsumexp(d.cview(fusex::shape_t{3})), {})[0] == I);
}

TEMPLATE_TEST_CASE("host: argmin/argmax return the first index on ties", "[reduce][host][ties]", RXT_ALL_DTYPES) {
  using T = TestType;
  if constexpr (std::is_same_v<T, bool>) {
    const auto x = from_values<bool>({0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1});
    const auto amax = evaluate(fusex::argmax(x.cview(fusex::shape_t{3, 4}), -1), {3});
    const auto amin = evaluate(fusex::argmin(x.cview(fusex::shape_t{3, 4}), -1), {3});
    CHECK(amax[0] == 1);
    CHECK(amin[0] == 0);
    CHECK(amax[1] == 0);  // the only true
    CHECK(amin[1] == 1);
    CHECK(amax[2] == 0);  // all true
    CHECK(amin[2] == 0);
  } else {
    const shape_v s{4, 5};
    const auto x = from_values<T>({2, 5, 5, 1, 5,  //
                                   3, 1, 1, 3, 1,  //
                                   4, 4, 4, 4, 4,  //
                                   1, 5, 2, 5, 1});
    const auto xv = x.cview(to_shape(s));
    const auto amax = evaluate(fusex::argmax(xv, -1), {4});
    const auto amin = evaluate(fusex::argmin(xv, 1, fusex::keepdim), {4, 1});
    CHECK(amax[0] == 1);
    CHECK(amax[1] == 0);
    CHECK(amax[2] == 0);
    CHECK(amax[3] == 1);
    CHECK(amin[0] == 3);
    CHECK(amin[1] == 1);
    CHECK(amin[2] == 0);
    CHECK(amin[3] == 0);
    // Over several axes the index is row-major over the reduced axes: max 5 first at (0, 1).
    CHECK(evaluate(fusex::argmax(xv), {})[0] == 1);
    CHECK(evaluate(fusex::argmin(xv, {0, 1}, fusex::keepdim), {1, 1})[0] == 3);
    // Over axis 0: columns {2, 3, 4, 1}, {5, 1, 4, 5}, {5, 1, 4, 2}, {1, 3, 4, 5}, {5, 1, 4, 1}.
    const auto col = evaluate(fusex::argmax(xv, 0), {5});
    CHECK(col[0] == 2);
    CHECK(col[1] == 0);
    CHECK(col[4] == 0);
    const auto cmin = evaluate(fusex::argmin(xv, -2), {5});
    CHECK(cmin[0] == 3);
    CHECK(cmin[2] == 1);
    CHECK(cmin[4] == 1);
    check_kinds<T, rk::argmax, rk::argmin>(x, s, {0});
    check_kinds<T, rk::argmax, rk::argmin>(x, s, {-1});
  }
}

// --- empty axes ---------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("host: reductions over an empty axis: sum 0, prod 1, any false, all true, mean NaN",
                   "[reduce][host][empty]", RXT_ALL_DTYPES) {
  using T = TestType;
  host_array<T> x(0);
  const auto e30 = x.cview(fusex::shape_t{3, 0});
  const auto e04 = x.cview(fusex::shape_t{0, 4});
  const auto s = evaluate(fusex::sum(e30, -1), {3});
  const auto p = evaluate(fusex::prod(e30, 1, fusex::keepdim), {3, 1});
  const auto an = evaluate(fusex::any(e30, -1), {3});
  const auto al = evaluate(fusex::all(e30, -1), {3});
  const auto m = evaluate(fusex::mean(e30, -1), {3});
  for (int i = 0; i < 3; ++i) {
    CHECK(to_double(s[static_cast<std::size_t>(i)]) == 0);
    CHECK(to_double(p[static_cast<std::size_t>(i)]) == 1);
    CHECK(bits_of(an[static_cast<std::size_t>(i)]) == 0);
    CHECK(bits_of(al[static_cast<std::size_t>(i)]) == 1);
    CHECK(std::isnan(to_double(m[static_cast<std::size_t>(i)])));  // 0 / 0, as NumPy
  }
  CHECK(s.guards_intact());
  CHECK(to_double(evaluate(fusex::sum(e04), {})[0]) == 0);
  const auto s0 = evaluate(fusex::sum(e04, 0), {4});
  for (int i = 0; i < 4; ++i) CHECK(to_double(s0[static_cast<std::size_t>(i)]) == 0);
  // A kept empty axis: an empty result, no error, nothing written.
  const auto none = evaluate(fusex::sum(e04, -1), {0});
  CHECK(none.guards_intact());
  const auto none_max = evaluate(fusex::amax(e04, 1), {0});  // the reduced axis (4) is not empty
  CHECK(none_max.guards_intact());
  if constexpr (!std::is_same_v<T, bool>) {
    const auto n = evaluate(fusex::norm(e30, -1), {3});
    const auto lse = evaluate(fusex::logsumexp(e30, -1), {3});
    const auto v = evaluate(fusex::var(e30, -1, 0.0), {3});
    CHECK(to_double(n[0]) == 0);
    CHECK(to_double(lse[0]) == -inf_v);  // log(0)
    CHECK(std::isnan(to_double(v[0])));
  }
}

TEMPLATE_TEST_CASE("host: min, max, argmin, argmax over an empty axis throw shape_error naming the shape",
                   "[reduce][host][empty]", float, std::int32_t, bool) {
  using T = TestType;
  host_array<T> x(0);
  const auto e30 = x.cview(fusex::shape_t{3, 0});
  const auto e204 = x.cview(fusex::shape_t{2, 0, 4});
  auto expect = [](const std::string& m, const char* name, const char* shape) {
    INFO(m);
    CHECK(contains(m, name));
    CHECK(contains(m, shape));
    CHECK(contains(m, "empty"));
  };
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::amax(e30, -1); }), "max", "[3, 0]");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::amin(e30, 1); }), "min", "[3, 0]");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::max(e30, -1, fusex::keepdim); }), "max", "[3, 0]");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::argmax(e30, -1); }), "argmax", "[3, 0]");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::argmin(e204, {0, 1}); }), "argmin", "[2, 0, 4]");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::amax(e204); }), "max", "[2, 0, 4]");
  // The axis is named too.
  CHECK(contains(thrown_message<fusex::shape_error>([&] { (void)fusex::amax(e204, 1); }), "axis 1"));
  // shape_error is a fusex::error.
  CHECK_THROWS_AS(fusex::amin(e30), fusex::error);
}

// --- bad axes and shapes ------------------------------------------------------------------------------

TEST_CASE("host: an axis out of range or repeated throws shape_error naming the axis and the shape",
          "[reduce][host][errors]") {
  host_array<float> x(24);
  const auto v = x.cview(fusex::shape_t{2, 3, 4});
  auto expect = [](const std::string& m, const std::string& axis) {
    INFO(m);
    CHECK(contains(m, "axis " + axis));
    CHECK(contains(m, "[2, 3, 4]"));
  };
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::sum(v, 3); }), "3");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::sum(v, -4); }), "-4");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::mean(v, {0, 5}); }), "5");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::amax(v, 3, fusex::keepdim); }), "3");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::argmax(v, -7); }), "-7");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::var(v, 3, 1.0); }), "3");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::stddev(v, {-4}, 0.0, fusex::keepdim); }), "-4");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::norm(v, 9, fusex::norm_kind::l1); }), "9");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::logsumexp(v, 3); }), "3");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::softmax(v, 3); }), "3");
  expect(thrown_message<fusex::shape_error>([&] { (void)fusex::log_softmax(v, -4); }), "-4");
  const std::string rep = thrown_message<fusex::shape_error>([&] { (void)fusex::sum(v, {1, -2}); });
  INFO(rep);
  CHECK(contains(rep, "repeated"));
  CHECK(contains(rep, "[2, 3, 4]"));
  // The name of the reduction is in the message.
  CHECK(contains(thrown_message<fusex::shape_error>([&] { (void)fusex::prod(v, 3); }), "prod"));
}

TEST_CASE("host: rank 0: reducing every axis is the value itself; any axis is out of range", "[reduce][host][errors]") {
  host_array<float> x(1);
  x[0] = 2.5f;
  const auto v = x.cview(fusex::shape_t{});
  CHECK(evaluate(fusex::sum(v), {})[0] == 2.5f);
  CHECK(evaluate(fusex::amax(v), {})[0] == 2.5f);
  CHECK(evaluate(fusex::argmax(v), {})[0] == 0);
  CHECK(contains(thrown_message<fusex::shape_error>([&] { (void)fusex::sum(v, 0); }), "[]"));
}

TEST_CASE("host: a reduction that cannot broadcast back, or a destination of the wrong shape, is a shape_error",
          "[reduce][host][errors]") {
  host_array<float> x(20), out(20);
  const auto v = x.cview(fusex::shape_t{4, 5});
  {
    // sum over the last axis without keepdim has shape [4], which does not broadcast against [4, 5].
    const std::string m = thrown_message<fusex::shape_error>([&] {
      fusex::host::eval(out.view(fusex::shape_t{4, 5}), v - fusex::sum(v, 1));
    });
    INFO(m);
    CHECK(contains(m, "[4, 5]"));
    CHECK(contains(m, "[4]"));
  }
  {
    const std::string m =
        thrown_message<fusex::shape_error>([&] { fusex::host::eval(out.view(fusex::shape_t{5}), fusex::sum(v, -1)); });
    INFO(m);
    CHECK(contains(m, "[4]"));
    CHECK(contains(m, "[5]"));
  }
  // With keepdim, or over the leading axis, it broadcasts back.
  out.poison();
  CHECK_NOTHROW(fusex::host::eval(out.view(fusex::shape_t{4, 5}), v - fusex::sum(v, 1, fusex::keepdim)));
  CHECK_NOTHROW(fusex::host::eval(out.view(fusex::shape_t{4, 5}), v - fusex::sum(v, 0)));
}
