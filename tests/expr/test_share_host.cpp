// Host tests of shared values (issue #29 item 1): a value used several times in an expression is
// computed once per element, and a reduction repeated in it once per output. A counting functor
// counts the evaluations (the host backend runs the kernels' evaluators); results are checked
// against double references; values that only look alike (same types, other views or scalars) are
// computed separately; explain prints each shared value once with its number of uses; and the
// evaluators with their vector lanes and 32-bit pieces give the same values.
#include <fusex/fusex.hpp>

#include "host_test_support.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace fxt;
using fusex::shape_t;

namespace {

// A repeated leaf wrapped by share_leaves (shared_eval in a leaf form).
template <class N>
struct is_leaf_role : std::false_type {};
template <class K, class E, int L>
struct is_leaf_role<fusex::detail::shared_eval<K, E, L>> : std::bool_constant<L != fusex::detail::share_node> {};
// The roles of those leaves, in visit order (a visit_tree visitor).
struct leaf_role_collector {
  std::vector<int> roles;
  template <class N>
  int operator()(const N& n, int) {
    if constexpr (is_leaf_role<N>::value) roles.push_back(n.role);
    return 0;
  }
};

// Counts its calls; equal copies (the same counter) are the same op.
struct counted {
  i64* calls;
  float operator()(float x) const {
    ++*calls;
    return 0.5f * x + 0.25f;
  }
};
double counted_ref(double x) { return 0.5 * x + 0.25; }
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

constexpr i64 R = 7, C = 12;
}  // namespace

TEST_CASE("share: a named value used twice is computed once per element", "[eval][share]") {
  const auto x = random_default<float>(R * C);
  const auto b = random_default<float>(C);
  const auto X = x.cview({R, C}), B = b.cview({C});
  i64 calls = 0;
  auto xv = [&](i64 i) { return static_cast<double>(x[static_cast<std::size_t>(i)]); };
  auto bv = [&](i64 i) { return static_cast<double>(b[static_cast<std::size_t>(i % C)]); };

  // h * sigmoid(h): one evaluation of h per element, not two.
  const auto h = fusex::map(counted{&calls}, X) + B;
  host_array<float> y(R * C);
  poison(y);
  fusex::host::eval(y.view({R, C}), h * fusex::sigmoid(h));
  CHECK(calls == R * C);
  check_values<float>("h * sigmoid(h)", y, R * C, [&](std::size_t i) {
    const double v = counted_ref(xv(static_cast<i64>(i))) + bv(static_cast<i64>(i));
    return v * sigmoid_ref(v);
  });

  // A chain in which each step squares the last (a * a, then (a*a) * (a*a), ...): 16 uses of the
  // first value, still one evaluation.
  calls = 0;
  const auto a1 = fusex::map(counted{&calls}, X);
  const auto a2 = a1 * a1;
  const auto a4 = a2 * a2;
  const auto a8 = a4 * a4;
  poison(y);
  fusex::host::eval(y.view({R, C}), a8 * a8 - a1);
  CHECK(calls == R * C);
  check_values<float>("a^16 - a", y, R * C, [&](std::size_t i) {
    const double v = counted_ref(xv(static_cast<i64>(i)));
    return std::pow(v, 16) - v;
  }, tolerance{1e-5, 1e-6});
}

TEST_CASE("share: equal-looking values over other operands are computed separately", "[eval][share]") {
  const auto x = random_default<float>(R * C);
  const auto z = random_default<float>(R * C);
  const auto X = x.cview({R, C}), Z = z.cview({R, C});
  i64 calls = 0;
  host_array<float> y(R * C);
  auto check = [&](const std::string& what, const auto& e, i64 want_calls, auto want) {
    calls = 0;
    poison(y);
    fusex::host::eval(y.view({R, C}), e);
    INFO(what);
    CHECK(calls == want_calls);
    check_values<float>(what, y, R * C, want);
  };
  auto xv = [&](std::size_t i) { return static_cast<double>(x[i]); };
  auto zv = [&](std::size_t i) { return static_cast<double>(z[i]); };
  // The same types over another view, another scalar, another view of the same memory (a
  // transposed square), and another functor state: all computed.
  check("f(x) * f(z)", fusex::map(counted{&calls}, X) * fusex::map(counted{&calls}, Z), 2 * R * C,
        [&](std::size_t i) { return counted_ref(xv(i)) * counted_ref(zv(i)); });
  check("(f(x) + 1) * (f(x) + 2)", (fusex::map(counted{&calls}, X) + 1.0f) * (fusex::map(counted{&calls}, X) + 2.0f),
        R * C,  // f(x) itself is shared: the two sums differ only above it
        [&](std::size_t i) { return (counted_ref(xv(i)) + 1) * (counted_ref(xv(i)) + 2); });
  // Two different values of one type, each used twice: the first is kept, the second computed
  // at each use (a scope keeps one value per type; before this was so, the second overwrote the
  // first, and (f(x) + f(z)) * (f(x) - f(z)) gave 0).
  check("(f(x) + f(z)) * (f(x) - f(z))",
        (fusex::map(counted{&calls}, X) + fusex::map(counted{&calls}, Z)) *
            (fusex::map(counted{&calls}, X) - fusex::map(counted{&calls}, Z)),
        3 * R * C, [&](std::size_t i) {
          const double a = counted_ref(xv(i)), b = counted_ref(zv(i));
          return (a + b) * (a - b);
        });
  // Nested and different: p(v) = a(v) * a(v) with a(v) = f(v) * f(v), p(x) + p(z). Each value's
  // subtree repeats a shared type, so the run-time-role form (what runs here: p(x) and p(z) differ)
  // computes them out of line (load_outlined): f(x) once, and the second value of each type,
  // f(z), at each of its four uses.
  {
    auto p = [&](const auto& V) {
      const auto a = fusex::map(counted{&calls}, V) * fusex::map(counted{&calls}, V);
      return a * a;
    };
    check("p(x) + p(z)", p(X) + p(Z), 5 * R * C, [&](std::size_t i) {
      return std::pow(counted_ref(xv(i)), 4) + std::pow(counted_ref(zv(i)), 4);
    });
  }
  i64 other = 0;
  check("f(x) - f'(x)", fusex::map(counted{&calls}, X) - fusex::map(counted{&other}, X), R * C,
        [&](std::size_t) { return 0.0; });
  CHECK(other == R * C);
  const auto sq = random_default<float>(C * C);
  const auto S = sq.cview({C, C});
  const auto St = fusex::make_view(sq.data(), shape_t{C, C}, fusex::strides_t{1, C});
  host_array<float> t(C * C);
  calls = 0;
  poison(t);
  fusex::host::eval(t.view({C, C}), fusex::map(counted{&calls}, S) + fusex::map(counted{&calls}, St));
  CHECK(calls == 2 * C * C);
  check_values<float>("f(S) + f(S^T)", t, C * C, [&](std::size_t i) {
    const std::size_t r = i / C, c = i % C;
    return counted_ref(sq[r * C + c]) + counted_ref(sq[c * C + r]);
  });
}

TEST_CASE("share: a repeated reduction is computed once", "[eval][share][reduce]") {
  const auto x = random_default<float>(R * C);
  const auto X = x.cview({R, C});
  i64 calls = 0;
  auto xv = [&](i64 r, i64 c) { return static_cast<double>(x[static_cast<std::size_t>(r * C + c)]); };
  std::vector<double> mean(R), var(R);
  for (i64 r = 0; r < R; ++r) {
    double s = 0, q = 0;
    for (i64 c = 0; c < C; ++c) s += counted_ref(xv(r, c));
    mean[static_cast<std::size_t>(r)] = s / C;
    for (i64 c = 0; c < C; ++c) q += std::pow(counted_ref(xv(r, c)) - s / C, 2);
    var[static_cast<std::size_t>(r)] = q / C;
  }
  host_array<float> y(R * C);

  // sum(f(x)) twice: the operand is evaluated for one reduction.
  const auto s = fusex::sum(fusex::map(counted{&calls}, X), -1, fusex::keepdim);
  poison(y);
  fusex::host::eval(y.view({R, C}), s * s + s);
  CHECK(calls == R * C);
  check_values<float>("s * s + s", y, R * C, [&](std::size_t i) {
    const double v = mean[i / C] * C;
    return v * v + v;
  }, tolerance{1e-5, 1e-5});

  // n * gelu(n) with n a normalisation written out: as many evaluations of f as n alone.
  const auto u = fusex::map(counted{&calls}, X);
  const auto n = (u - fusex::mean(u, -1, fusex::keepdim)) * fusex::rsqrt(fusex::var(u, -1, 0, fusex::keepdim) + 1e-5f);
  calls = 0;
  poison(y);
  fusex::host::eval(y.view({R, C}), n);
  const i64 alone = calls;
  CHECK(alone == 3 * R * C);  // mean's operand, var's operand, the epilogue
  calls = 0;
  poison(y);
  fusex::host::eval(y.view({R, C}), n * fusex::gelu(n));
  CHECK(calls == alone);
  check_values<float>("n * gelu(n)", y, R * C, [&](std::size_t i) {
    const std::size_t r = i / C;
    const double v = (counted_ref(x[i]) - mean[r]) / std::sqrt(var[r] + 1e-5);
    return v * 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  }, tolerance{1e-4, 1e-4});
}

TEST_CASE("share: fusex::share marks one value; explain prints it once with its uses", "[eval][share]") {
  const auto x = random_default<float>(R * C);
  const auto b = random_default<float>(C);
  const auto X = x.cview({R, C}), B = b.cview({C});
  i64 calls = 0;
  const auto h = fusex::share(fusex::map(counted{&calls}, X) + B);
  host_array<float> y(R * C);
  poison(y);
  fusex::host::eval(y.view({R, C}), h * h + h);
  CHECK(calls == R * C);
  check_values<float>("h * h + h", y, R * C, [&](std::size_t i) {
    const double v = counted_ref(x[i]) + b[i % C];
    return v * v + v;
  });
  // Two explicit values of one type, each used twice.
  const auto g2 = fusex::share(fusex::map(counted{&calls}, X) + 1.0f);
  const auto k2 = fusex::share(fusex::map(counted{&calls}, X) + 2.0f);
  poison(y);
  fusex::host::eval(y.view({R, C}), (g2 + k2) * (g2 - k2));
  check_values<float>("(g + k) * (g - k)", y, R * C, [&](std::size_t i) {
    const double a = counted_ref(x[i]);
    return (a + 1 + a + 2) * (a + 1 - a - 2);
  });
  // Two share() calls are two values, unless their contents are equal too.
  const auto g = fusex::share(fusex::map(counted{&calls}, X) + 1.0f);
  const auto k = fusex::share(fusex::map(counted{&calls}, X) + 2.0f);
  calls = 0;
  poison(y);
  fusex::host::eval(y.view({R, C}), g * k);
  CHECK(calls == R * C);  // f(x) below them is one value; the sums are two
  STATIC_REQUIRE(std::is_same_v<fusex::result_t<decltype(h)>, float>);

  const std::string text = fusex::explain(y.view({R, C}), h * h + h);
  INFO(text);
  CHECK(contains(text, "share -> float32 [shared: computed once, 3 uses]"));
  CHECK(contains(text, "(the shared value above, not computed again)"));
  // Printed once: its operands appear once.
  CHECK(text.find("view float32") != std::string::npos);
  const auto first = text.find("broadcast");
  CHECK(first != std::string::npos);
  CHECK(text.find("broadcast", first + 1) == std::string::npos);

  const auto u = fusex::map(counted{&calls}, X);
  const auto n = (u - fusex::mean(u, -1, fusex::keepdim)) * fusex::rsqrt(fusex::var(u, -1, 0, fusex::keepdim) + 1e-5f);
  const std::string rows = fusex::explain(y.view({R, C}), n * fusex::gelu(n));
  INFO(rows);
  CHECK(contains(rows, "[shared: computed once, 2 uses]"));
  CHECK(contains(rows, "(the shared value above, not computed again)"));
}

TEST_CASE("share: a shared layer_norm keeps the row kernel's static path", "[eval][share]") {
  // The leaves of n's second copy are predicted to be its first copy's operands (the weight and
  // bias are not x), so the cached row's roles are compile-time constants, as for n alone.
  constexpr i64 rows = 64, cols = 1024;
  host_array<float> y(rows * cols);
  const auto x = random_default<float>(rows * cols);
  const auto g = random_default<float>(cols), b = random_default<float>(cols);
  const auto n = fusex::layer_norm(x.cview({rows, cols}), g.cview({cols}), b.cview({cols}));
  const std::string alone = fusex::explain(y.view({rows, cols}), n);
  const std::string twice = fusex::explain(y.view({rows, cols}), n * fusex::gelu(n));
  INFO(alone << "\n" << twice);
  CHECK(contains(alone, "static path"));
  CHECK(contains(twice, "static path"));
  CHECK(contains(twice, "6 of 10 leaves answered from registers"));
  // Two different normalisations of one type over the same operands (other eps) in one epilogue:
  // the cached roles equal the prediction, but the values differ, so no lazy form, and the static
  // path (which takes it) is not taken: the roles are tested at run time.
  const auto n2 = fusex::layer_norm(x.cview({rows, cols}), g.cview({cols}), b.cview({cols}), 1e-3);
  const std::string two = fusex::explain(y.view({rows, cols}), n * n2);
  INFO(two);
  CHECK(contains(two, "row kept in registers"));
  CHECK(!contains(two, "static path"));
  // Values of one type on both sides of a reduction are different values: the epilogue's w is not
  // predicted to be the reduction's x (the static path stays).
  const auto w = random_default<float>(rows * cols);
  const auto X = x.cview({rows, cols}), W = w.cview({rows, cols});
  const std::string sides = fusex::explain(y.view({rows, cols}), fusex::mean(X * 2.0f, -1, fusex::keepdim) + W * 0.5f);
  INFO(sides);
  CHECK(contains(sides, "static path"));
}

TEST_CASE("share: through the kernels' evaluators, vector lanes and 32-bit pieces", "[eval][share]") {
  constexpr i64 rows = 4, cols = 16;
  const auto x = random_default<float>(rows * cols);
  const auto X = x.cview({rows, cols});
  host_array<float> y(rows * cols);
  const auto h = X * 0.5f + 0.25f;
  const auto e = (h * h) * (h * h) + h;  // exact float arithmetic: the same bits as the reference
  check_through_evaluators(e, y, rows, cols, [&](i64 i) {
    const float v = x[static_cast<std::size_t>(i)] * 0.5f + 0.25f;
    return (v * v) * (v * v) + v;
  });
}

TEST_CASE("share: repeated leaves in a tree with shared values (the same view read once, others each)",
          "[eval][share]") {
  constexpr i64 rows = 4, cols = 16;
  const auto x = random_default<float>(rows * cols);
  const auto x2 = random_default<float>(rows * cols);
  const auto b = random_default<float>(cols);
  const auto X = x.cview({rows, cols}), X2 = x2.cview({rows, cols}), B = b.cview({cols});
  host_array<float> y(rows * cols);
  auto xs = [&](i64 i) { return x[static_cast<std::size_t>(i)]; };
  auto x2s = [&](i64 i) { return x2[static_cast<std::size_t>(i)]; };
  auto bs = [&](i64 i) { return b[static_cast<std::size_t>(i % cols)]; };
  // Four float leaves of one type: X (three times), B (broadcast: other strides) and X2 (another
  // pointer): the first X keeps its value, the other Xs read it, B and X2 read memory. Lazy form.
  const auto h = X * 0.5f + B;
  const auto e = (h * h) * (X2 + X) + X * B;
  check_through_evaluators(e, y, rows, cols, [&](i64 i) {
    const float v = xs(i) * 0.5f + bs(i);
    return (v * v) * (x2s(i) + xs(i)) + xs(i) * bs(i);
  });
  // Two different values of one type, each used twice: no lazy form, roles tested.
  const auto g = X * 0.5f + 0.25f, k = X2 * 0.5f + 0.25f;
  const auto e2 = (g + k) * (g - k) + X;
  check_through_evaluators(e2, y, rows, cols, [&](i64 i) {
    const float gv = xs(i) * 0.5f + 0.25f, kv = x2s(i) * 0.5f + 0.25f;
    return (gv + kv) * (gv - kv) + xs(i);
  });
  // Every repeated leaf the same view (the chain's z): the form without leaf role tests
  // (share_leaf_first), which the launch takes; through the evaluators and the host backend.
  const auto h3 = X * 0.5f + 0.25f;
  const auto e3 = (h3 * h3) * X + X;
  check_through_evaluators(e3, y, rows, cols, [&](i64 i) {
    const float v = xs(i) * 0.5f + 0.25f;
    return (v * v) * xs(i) + xs(i);
  });
  {
    using namespace fusex::detail;
    const auto dst = std::make_tuple(y.view({rows, cols}));
    const auto pe = prepare(dst, e3);
    leaf_strides_source<std::uint32_t> src{pe.ops.data() + 1, 0, 0};
    const auto ev3 = build_evaluator(e3, src);
    const auto lev = share_leaves<share_leaf_first>(ev3);
    CHECK(leaves_all_first(ev3));
    CHECK(src.shares_lazy);
    // The two leaf forms are two types (so the launch has the third kernel to take)...
    CHECK_FALSE(std::is_same_v<decltype(share_leaves<share_leaf_any>(ev3)), decltype(lev)>);
    // ...and one type where no tensor leaf repeats (no third kernel is instantiated): a shared
    // value over an index leaf alone (a tensor leaf inside a shared value repeats in its copies).
    const auto u = fusex::uniform(X.shape(), 3, 0);
    const auto pe4 = prepare(dst, u * u);
    leaf_strides_source<std::uint32_t> src4{pe4.ops.data() + 1, 0, 0};
    const auto ev4 = build_evaluator(u * u, src4);
    CHECK(std::is_same_v<decltype(share_leaves<share_leaf_any>(ev4)), decltype(share_leaves<share_leaf_first>(ev4))>);
    leaf_role_collector rc;
    visit_tree(lev, rc, 0);
    CHECK(rc.roles == std::vector<int>{share_store, share_reuse, share_reuse, share_reuse});
  }
  poison(y);
  fusex::host::eval(y.view({rows, cols}), e3);
  check_values<float>("(h * h) * x + x", y, rows * cols, [&](std::size_t i) {
    const double v = double(x[i]) * 0.5 + 0.25;
    return v * v * x[i] + x[i];
  });
  // The roles share_leaves gives the leaves (post-order): the first X keeps its value, the later Xs
  // read it, B (other strides) and X2 (another pointer) read memory.
  {
    using namespace fusex::detail;
    const auto dst = std::make_tuple(y.view({rows, cols}));
    const auto pe = prepare(dst, e);
    leaf_strides_source<std::uint32_t> src{pe.ops.data() + 1, 0, 0};
    const auto ev = build_evaluator(e, src);
    const auto lev = share_leaves<share_leaf_any>(ev);
    CHECK_FALSE(leaves_all_first(ev));  // B and X2 are other views: the launch takes the form that tests leaf roles
    leaf_role_collector rc;
    visit_tree(lev, rc, 0);
    const std::vector<int> want{share_store,  share_compute, share_reuse, share_compute,
                                share_compute, share_reuse,  share_reuse, share_compute};
    CHECK(rc.roles == want);
  }
  // Through the host backend (the kernels' loop, either form) against a double reference.
  poison(y);
  fusex::host::eval(y.view({rows, cols}), e);
  check_values<float>("(h * h) * (x2 + x) + x * b", y, rows * cols, [&](std::size_t i) {
    const double v = double(x[i]) * 0.5 + b[i % cols];
    return v * v * (double(x2[i]) + x[i]) + double(x[i]) * b[i % cols];
  });
}

