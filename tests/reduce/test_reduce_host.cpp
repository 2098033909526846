// Host suite for reductions, part 1: every reduction x every dtype x every axis set (all axes, one
// leading, middle or trailing axis, negative axes, two non-adjacent axes, all three listed),
// keepdim on and off, on random non-zero inputs with fixed seeds, evaluated into poisoned
// destinations (with poisoned guard elements after them) and compared with an independent
// double-precision reference written as plain loops (reduce_host_support.hpp). Result dtypes are
// checked at compile time against the documented rule. Reductions of expressions and of strided
// views are checked here too. Special values, errors, composites and the plan printer are in
// test_reduce_host_special.cpp.
#include "reduce_host_support.hpp"

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

using namespace rxt;

namespace {

template <rk K, class T>
host_array<T> make_input(std::size_t n, std::uint64_t seed) {
  auto g = make_rng(seed);
  host_array<T> x(n);
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (K == rk::prod) x[i] = random_for_prod<T>(g);
    else if constexpr (K == rk::any) x[i] = random_sparse<T>(g, 0.85);
    else if constexpr (K == rk::all) x[i] = random_sparse<T>(g, 0.08);
    else x[i] = random_default<T>(g);
  }
  return x;
}

/// Runs reduction K over every axis set of `s`, keepdim on and off.
template <rk K, class T>
void run_matrix(const shape_v& s, std::uint64_t seed, double correction = 1) {
  const auto x = make_input<K, T>(static_cast<std::size_t>(count(s)), seed);
  const auto xv = x.cview(to_shape(s));
  const std::vector<double> xd = x.values();
  const int rank = static_cast<int>(s.size());
  for (const axis_case& c : axis_cases()) {
    if ((K == rk::var || K == rk::stddev) && c.whole && correction != 1) continue;
    const auto e = make(std::integral_constant<rk, K>{}, xv, c, correction);
    using R = typename decltype(e)::value_type;
    static_assert(std::is_same_v<R, expected_result<K, T>>, "result dtype differs from the documented one");
    const std::uint32_t mask = c.whole ? (1u << rank) - 1 : mask_of(c.list, rank);
    const shape_v os = reduced_shape(s, mask, c.keep);
    const std::string what = std::string(rk_name(K)) + " of " + fusex::dtype_name<T>() + " " + to_shape(s).str() +
                             " over " + c.label + (c.keep ? " keepdim" : "") +
                             (K == rk::var || K == rk::stddev ? " correction " + std::to_string(correction) : "");
    INFO(what);
    CHECK(e.shape() == to_shape(os));
    const auto out = evaluate(e, os);
    std::vector<ref_value> want;
    for (const auto& grp : groups(xd, s, mask)) want.push_back(reference(K, grp, acc_roundoff<T>(), correction));
    check_results(what, out, want);
  }
}

template <rk K, class T>
void run_shapes(std::uint64_t seed, double correction = 1) {
  run_matrix<K, T>({5, 6, 7}, seed, correction);
  run_matrix<K, T>({3, 1, 64}, seed + 1000, correction);
}

}  // namespace

TEMPLATE_TEST_CASE("host: sum, prod and mean over every axis set", "[reduce][host]", RXT_ALL_DTYPES) {
  run_shapes<rk::sum, TestType>(11);
  run_shapes<rk::prod, TestType>(12);
  run_shapes<rk::mean, TestType>(13);
}

TEMPLATE_TEST_CASE("host: amax, amin, argmax and argmin over every axis set", "[reduce][host]", RXT_ALL_DTYPES) {
  run_shapes<rk::amax, TestType>(21);
  run_shapes<rk::amin, TestType>(22);
  run_shapes<rk::argmax, TestType>(23);
  run_shapes<rk::argmin, TestType>(24);
}

TEMPLATE_TEST_CASE("host: any and all over every axis set", "[reduce][host]", RXT_ALL_DTYPES) {
  run_shapes<rk::any, TestType>(31);
  run_shapes<rk::all, TestType>(32);
}

TEMPLATE_TEST_CASE("host: L1, L2 and max norms over every axis set", "[reduce][host]", RXT_NUMERIC_DTYPES) {
  run_shapes<rk::l1, TestType>(41);
  run_shapes<rk::l2, TestType>(42);
  run_shapes<rk::linf, TestType>(43);
}

TEMPLATE_TEST_CASE("host: var and stddev with corrections 0, 1 and 2 over every axis set", "[reduce][host]",
                   RXT_NUMERIC_DTYPES) {
  for (double correction : {0.0, 1.0, 2.0}) {
    run_shapes<rk::var, TestType>(51, correction);
    run_shapes<rk::stddev, TestType>(52, correction);
  }
}

TEMPLATE_TEST_CASE("host: logsumexp over every axis set", "[reduce][host]", RXT_NUMERIC_DTYPES) {
  run_shapes<rk::logsumexp, TestType>(61);
}

TEST_CASE("host: min(x, axes, keepdim) and max(x, axes, keepdim) reduce; min(x)/max(x) reduce everything",
          "[reduce][host]") {
  const shape_v s{4, 9};
  auto g = make_rng(70);
  host_array<float> x(36);
  for (std::size_t i = 0; i < 36; ++i) x[i] = random_default<float>(g);
  const auto xv = x.cview(to_shape(s));
  const auto xd = x.values();
  std::vector<ref_value> mx, mn;
  for (const auto& grp : groups(xd, s, 2u))
    mx.push_back(reference(rk::amax, grp, 0)), mn.push_back(reference(rk::amin, grp, 0));
  check_results("max(x, -1, keepdim)", evaluate(fusex::max(xv, -1, fusex::keepdim), {4, 1}), mx);
  check_results("min(x, 1, keepdim)", evaluate(fusex::min(xv, 1, fusex::keepdim), {4, 1}), mn);
  check_results("max(x)", evaluate(fusex::max(xv), {}), {reference(rk::amax, xd, 0)});
  check_results("min(x)", evaluate(fusex::min(xv), {}), {reference(rk::amin, xd, 0)});
  // Two tensor operands: the elementwise maximum, not a reduction (with a C++ number max does not
  // compile: tests/core/static_assert_messages.cpp).
  const auto two = fusex::max(xv, xv);
  static_assert(decltype(two)::reduce_count == 0, "max(a, b) is elementwise");
  const auto with_number = fusex::maximum(xv, 0.0f);
  static_assert(decltype(with_number)::reduce_count == 0, "maximum(a, s) is elementwise");
}

TEST_CASE("host: reductions of expressions (sum(x * x), mean(abs(x - 1)), any(x > 3)) and of strided views",
          "[reduce][host]") {
  const shape_v s{5, 6, 7};
  auto g = make_rng(80);
  host_array<float> x(210);
  host_array<double> y(210);
  host_array<std::int32_t> z(210);
  for (std::size_t i = 0; i < 210; ++i)
    x[i] = random_default<float>(g), y[i] = random_default<double>(g), z[i] = random_default<std::int32_t>(g);
  const auto xv = x.cview(to_shape(s));
  const auto yv = y.cview(to_shape(s));
  const auto zv = z.cview(to_shape(s));
  const auto xd = x.values(), yd = y.values(), zd = z.values();
  const double uf = unit_roundoff<float>(), ud = unit_roundoff<double>();

  SECTION("sum(x * x, -1)") {
    std::vector<double> sq(210);
    for (std::size_t i = 0; i < 210; ++i) sq[i] = xd[i] * xd[i];
    std::vector<ref_value> want;
    for (const auto& grp : groups(sq, s, 4u)) want.push_back(reference(rk::sum, grp, 2 * uf));
    check_results("sum(x * x, -1)", evaluate(fusex::sum(xv * xv, -1), {5, 6}), want);
  }
  SECTION("mean(abs(y - 1), {0, 2}, keepdim) in double") {
    std::vector<double> a(210);
    for (std::size_t i = 0; i < 210; ++i) a[i] = std::fabs(yd[i] - 1);
    std::vector<ref_value> want;
    for (const auto& grp : groups(a, s, 5u)) want.push_back(reference(rk::mean, grp, 2 * ud));
    check_results("mean(abs(y - 1), {0, 2}, keepdim)",
                  evaluate(fusex::mean(fusex::abs(yv - 1.0), {0, 2}, fusex::keepdim), {1, 6, 1}), want);
  }
  SECTION("any(x > 3, 1) and all(z != 7, {0, 1})") {
    std::vector<double> gt(210), ne(210);
    for (std::size_t i = 0; i < 210; ++i) gt[i] = xd[i] > 3 ? 1 : 0, ne[i] = zd[i] != 7 ? 1 : 0;
    std::vector<ref_value> w1, w2;
    for (const auto& grp : groups(gt, s, 2u)) w1.push_back(reference(rk::any, grp, 0));
    for (const auto& grp : groups(ne, s, 3u)) w2.push_back(reference(rk::all, grp, 0));
    check_results("any(x > 3, 1)", evaluate(fusex::any(xv > 3.0f, 1), {5, 7}), w1);
    check_results("all(z != 7, {0, 1})", evaluate(fusex::all(zv != 7, {0, 1}), {7}), w2);
  }
  SECTION("sum of int32 * int32 accumulates in int64 (the product itself is int32)") {
    std::vector<double> p(210);
    for (std::size_t i = 0; i < 210; ++i) {
      // The elementwise product wraps to int32 as a store to int32 would; its sum does not.
      const auto prod = static_cast<std::uint32_t>(static_cast<std::int64_t>(zd[i]) * static_cast<std::int64_t>(zd[i]));
      p[i] = static_cast<double>(static_cast<std::int32_t>(prod));
    }
    std::vector<ref_value> want;
    for (const auto& grp : groups(p, s, 7u)) want.push_back(reference(rk::sum, grp, 0));
    const auto e = fusex::sum(zv * zv);
    static_assert(std::is_same_v<decltype(e)::value_type, std::int64_t>, "int sum -> int64");
    check_results("sum(z * z)", evaluate(e, {}), want);
  }
  SECTION("strided views: a permuted view and a sliced view") {
    // p = x.permute({2, 0, 1}) has shape [7, 5, 6]; p[a][b][c] = x[b][c][a].
    const auto p = xv.permute({2, 0, 1});
    const shape_v ps{7, 5, 6};
    std::vector<double> pd(210);
    for (int a = 0; a < 7; ++a)
      for (int b = 0; b < 5; ++b)
        for (int c = 0; c < 6; ++c)
          pd[static_cast<std::size_t>((a * 5 + b) * 6 + c)] = xd[static_cast<std::size_t>((b * 6 + c) * 7 + a)];
    for (std::uint32_t mask : {1u, 2u, 4u, 5u, 7u}) {
      std::vector<int> list;
      for (int d = 0; d < 3; ++d)
        if (mask & (1u << d)) list.push_back(d);
      std::vector<ref_value> ws, wa;
      for (const auto& grp : groups(pd, ps, mask))
        ws.push_back(reference(rk::sum, grp, uf)), wa.push_back(reference(rk::argmax, grp, 0));
      const shape_v os = reduced_shape(ps, mask, false);
      check_results("sum of a permuted view, mask " + std::to_string(mask),
                    evaluate(fusex::sum(p, make_axes(list)), os), ws);
      check_results("argmax of a permuted view, mask " + std::to_string(mask),
                    evaluate(fusex::argmax(p, make_axes(list)), os), wa);
    }
    // Every other column of the last axis: shape [5, 6, 4].
    const auto sl = xv.slice(2, 0, 7, 2);
    const shape_v ss{5, 6, 4};
    std::vector<double> sd;
    for (int a = 0; a < 5; ++a)
      for (int b = 0; b < 6; ++b)
        for (int c = 0; c < 7; c += 2) sd.push_back(xd[static_cast<std::size_t>((a * 6 + b) * 7 + c)]);
    std::vector<ref_value> w;
    for (const auto& grp : groups(sd, ss, 5u)) w.push_back(reference(rk::amax, grp, 0));
    check_results("amax of a sliced view over {0, 2}", evaluate(fusex::amax(sl, {0, 2}), {6}), w);
  }
}

TEST_CASE("host: documented result dtypes", "[reduce][host]") {
  const fusex::view<const std::int8_t> i8v;
  const fusex::view<const std::uint8_t> u8v;
  const fusex::view<const std::int32_t> i32v;
  const fusex::view<const std::int64_t> i64v;
  const fusex::view<const bool> bv;
  const fusex::view<const fusex::half> hv;
  const fusex::view<const fusex::bfloat16> bfv;
  const fusex::view<const double> dv;
  const fusex::view<const float> fv;
  // Sums and products of integers and bool: int64; of floating types: the same type.
  static_assert(std::is_same_v<decltype(fusex::sum(i8v))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(fusex::sum(u8v))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(fusex::sum(bv))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(fusex::prod(i32v))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(fusex::sum(hv))::value_type, fusex::half>);
  static_assert(std::is_same_v<decltype(fusex::sum(bfv))::value_type, fusex::bfloat16>);
  // Means, norms, var/std, logsumexp of integers: float32; of floating types: the same type.
  static_assert(std::is_same_v<decltype(fusex::mean(i32v))::value_type, float>);
  static_assert(std::is_same_v<decltype(fusex::mean(i64v))::value_type, float>);
  static_assert(std::is_same_v<decltype(fusex::mean(dv))::value_type, double>);
  static_assert(std::is_same_v<decltype(fusex::norm(u8v))::value_type, float>);
  static_assert(std::is_same_v<decltype(fusex::var(i8v))::value_type, float>);
  static_assert(std::is_same_v<decltype(fusex::stddev(hv))::value_type, fusex::half>);
  static_assert(std::is_same_v<decltype(fusex::logsumexp(i64v))::value_type, float>);
  // min/max keep the type; argmin/argmax give int64; any/all give bool.
  static_assert(std::is_same_v<decltype(fusex::amax(u8v))::value_type, std::uint8_t>);
  static_assert(std::is_same_v<decltype(fusex::amin(bfv))::value_type, fusex::bfloat16>);
  static_assert(std::is_same_v<decltype(fusex::argmax(fv))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(fusex::argmin(bv))::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(fusex::any(fv))::value_type, bool>);
  static_assert(std::is_same_v<decltype(fusex::all(i64v))::value_type, bool>);
  SUCCEED("checked at compile time");
}
