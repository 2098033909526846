#pragma once
/// \file
/// Reductions as expression nodes (sum, prod, mean, max/amax, min/amin, argmax, argmin, any, all,
/// norm, var, std, logsumexp) over all axes, one axis or a set of axes, with keepdim; and the
/// composite functions built from them as plain expressions: softmax, log_softmax, layer_norm,
/// rms_norm. A reduction's result is an expression of the reduced shape that broadcasts back, so
/// `exp(x - max(x, -1, keepdim)) / sum(exp(x - max(x, -1, keepdim)), -1, keepdim)` is valid, and the
/// planner evaluates it as one kernel (see docs/reductions.md).

#include <fusex/core/shape.hpp>
#include <fusex/error.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/expr/operators.hpp>
#include <fusex/expr/reduce_ops.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fusex {

/// Tag: keep reduced dimensions as size 1 (`sum(x, -1, fusex::keepdim)`).
struct keepdim_t {
  explicit constexpr keepdim_t() = default;
};
inline constexpr keepdim_t keepdim{};

/// A set of axes to reduce over; negative axes count from the end.
class axes {
 public:
  axes(std::initializer_list<int> a) : list_(a.begin(), a.end()) {}
  // Parentheses, not braces: nvcc rewrites `list_{a}` as `list_{{a}}`, which clang warns about
  // (-Wbraced-scalar-init) when it is the host compiler.
  axes(int a) : list_(1, a) {}  // NOLINT: one axis converts implicitly
  explicit axes(std::vector<int> a) : list_(std::move(a)) {}
  const std::vector<int>& list() const { return list_; }

 private:
  std::vector<int> list_;
};

/// A reduction of `Child` over a set of its axes.
template <class Op, class Child>
struct reduce_node : detail::expr_base {
  using input_type = typename Child::value_type;
  using value_type = typename Op::template result<input_type>;
  static constexpr int leaf_count = Child::leaf_count;
  static constexpr int reduce_count = Child::reduce_count + 1;

  Op op;
  Child child;
  std::uint32_t mask = 0;  ///< bit d set: axis d of the child's shape is reduced
  bool keep = false;       ///< reduced axes kept with extent 1

  reduce_node(Op o, Child c, std::uint32_t m, bool k) : op(o), child(c), mask(m), keep(k) {}

  static constexpr int share_kind = detail::share_reduction;
  bool same_data(const reduce_node& o) const { return detail::ops_equal(op, o.op) && mask == o.mask && keep == o.keep; }

  shape_t shape() const { return reduced_shape(child.shape()); }
  shape_t reduced_shape(const shape_t& in) const {
    shape_t out;
    for (int d = 0; d < in.rank(); ++d) {
      if (mask & (1u << d)) {
        if (keep) out.push_back(1);
      } else {
        out.push_back(in[d]);
      }
    }
    return out;
  }

  // The inner node interface (expr/detail/tree.hpp).
  static constexpr std::size_t arity = 1;
  template <std::size_t I>
  const Child& child_at() const {
    return child;
  }
  template <class C>
  reduce_node<Op, C> with_children(const C& c) const {
    return reduce_node<Op, C>(op, c, mask, keep);
  }
};

namespace detail {
inline std::uint32_t axes_mask(const std::vector<int>& list, const shape_t& s, const char* what) {
  std::uint32_t m = 0;
  for (int a : list) {
    if (a < -s.rank() || a >= s.rank() || (s.rank() == 0)) {
      throw shape_error(std::string("fusex: ") + what + ": axis " + std::to_string(a) + " is out of range for shape " +
                        s.str());
    }
    const int d = a < 0 ? a + s.rank() : a;
    if (m & (1u << d)) {
      throw shape_error(std::string("fusex: ") + what + ": axis " + std::to_string(a) + " repeated for shape " +
                        s.str());
    }
    m |= 1u << d;
  }
  return m;
}

template <class Op, class X>
auto make_reduce(Op op, const X& x, const std::vector<int>* list, bool keep) {
  auto e = as_expr(x);
  const shape_t s = e.shape();
  std::uint32_t m = list ? axes_mask(*list, s, Op::name) : (s.rank() >= 32 ? ~0u : ((1u << s.rank()) - 1));
  if constexpr (Op::needs_elements) {
    for (int d = 0; d < s.rank(); ++d) {
      if ((m & (1u << d)) && s[d] == 0) {
        throw shape_error(std::string("fusex: ") + Op::name + " over an empty axis " + std::to_string(d) +
                          " of shape " + s.str() + " has no identity");
      }
    }
  }
  return reduce_node<Op, decltype(e)>(op, e, m, keep);
}

template <class X>
using reducible = std::enable_if_t<is_operand_v<X>, int>;
}  // namespace detail

#define FUSEX_REDUCTION(fn, op_type)                            \
  template <class X, detail::reducible<X> = 0>                  \
  auto fn(const X& x) {                                         \
    return detail::make_reduce(op_type{}, x, nullptr, false);   \
  }                                                             \
  template <class X, detail::reducible<X> = 0>                  \
  auto fn(const X& x, const axes& a) {                          \
    return detail::make_reduce(op_type{}, x, &a.list(), false); \
  }                                                             \
  template <class X, detail::reducible<X> = 0>                  \
  auto fn(const X& x, const axes& a, keepdim_t) {               \
    return detail::make_reduce(op_type{}, x, &a.list(), true);  \
  }
/// \name Reductions
/// `f(x)` reduces over all axes; `f(x, axis)` or `f(x, {a, b})` over the given axes;
/// `f(x, axes, fusex::keepdim)` keeps them as size 1 so the result broadcasts back against x.
///@{
FUSEX_REDUCTION(sum, reduce_ops::sum)
FUSEX_REDUCTION(prod, reduce_ops::prod)
FUSEX_REDUCTION(mean, reduce_ops::mean)
FUSEX_REDUCTION(amax, reduce_ops::max)
FUSEX_REDUCTION(amin, reduce_ops::min)
FUSEX_REDUCTION(argmax, reduce_ops::argmax)
FUSEX_REDUCTION(argmin, reduce_ops::argmin)
FUSEX_REDUCTION(any, reduce_ops::any)
FUSEX_REDUCTION(all, reduce_ops::all)
FUSEX_REDUCTION(logsumexp, reduce_ops::logsumexp)
///@}
#undef FUSEX_REDUCTION

/// max over all axes (one argument) or over axes with keepdim (three arguments). `max(a, b)` with
/// two operands is the elementwise maximum; use amax(x, axes) to reduce without keepdim.
template <class X, detail::reducible<X> = 0>
auto max(const X& x) {
  return amax(x);
}
template <class X, detail::reducible<X> = 0>
auto max(const X& x, const axes& a, keepdim_t k) {
  return amax(x, a, k);
}
/// min over all axes, or over axes with keepdim (see max).
template <class X, detail::reducible<X> = 0>
auto min(const X& x) {
  return amin(x);
}
template <class X, detail::reducible<X> = 0>
auto min(const X& x, const axes& a, keepdim_t k) {
  return amin(x, a, k);
}

/// Which vector norm: L1 (sum of |x|), L2 (Euclidean), max (largest |x|).
enum class norm_kind { l1 = 1, l2 = 2, max = 0 };

/// Vector norm over all axes.
template <class X, detail::reducible<X> = 0>
auto norm(const X& x, norm_kind kind = norm_kind::l2) {
  return detail::make_reduce(reduce_ops::norm{static_cast<int>(kind)}, x, nullptr, false);
}
/// Vector norm over the axes `a`.
template <class X, detail::reducible<X> = 0>
auto norm(const X& x, const axes& a, norm_kind kind = norm_kind::l2) {
  return detail::make_reduce(reduce_ops::norm{static_cast<int>(kind)}, x, &a.list(), false);
}
/// Vector norm over the axes `a`, keeping them as size 1.
template <class X, detail::reducible<X> = 0>
auto norm(const X& x, const axes& a, norm_kind kind, keepdim_t) {
  return detail::make_reduce(reduce_ops::norm{static_cast<int>(kind)}, x, &a.list(), true);
}

/// Variance over the axes `a` with `correction` (1: sample variance, 0: population), Welford.
template <class X, detail::reducible<X> = 0>
auto var(const X& x, const axes& a, double correction = 1) {
  reduce_ops::variance<0> op;
  op.correction = correction;
  return detail::make_reduce(op, x, &a.list(), false);
}
template <class X, detail::reducible<X> = 0>
auto var(const X& x, const axes& a, double correction, keepdim_t) {
  reduce_ops::variance<0> op;
  op.correction = correction;
  return detail::make_reduce(op, x, &a.list(), true);
}
/// Variance over all axes.
template <class X, detail::reducible<X> = 0>
auto var(const X& x) {
  return detail::make_reduce(reduce_ops::variance<0>{}, x, nullptr, false);
}
/// Standard deviation over the axes `a` with `correction` (named stddev, not std, beside namespace std).
template <class X, detail::reducible<X> = 0>
auto stddev(const X& x, const axes& a, double correction = 1) {
  reduce_ops::variance<1> op;
  op.correction = correction;
  return detail::make_reduce(op, x, &a.list(), false);
}
template <class X, detail::reducible<X> = 0>
auto stddev(const X& x, const axes& a, double correction, keepdim_t) {
  reduce_ops::variance<1> op;
  op.correction = correction;
  return detail::make_reduce(op, x, &a.list(), true);
}
/// Standard deviation over all axes.
template <class X, detail::reducible<X> = 0>
auto stddev(const X& x) {
  return detail::make_reduce(reduce_ops::variance<1>{}, x, nullptr, false);
}

// --- composites: plain expressions, planned like any other -------------------------------------

/// softmax along `axis`: exp(x - logsumexp(x)). One reduction (logsumexp keeps a running maximum
/// and a rescaled sum, so it is stable and takes one pass over a row) and the epilogue.
template <class X, detail::reducible<X> = 0>
auto softmax(const X& x, int axis = -1) {
  return exp(x - logsumexp(x, axis, keepdim));
}

/// log_softmax along `axis`: x - logsumexp(x), one reduction.
template <class X, detail::reducible<X> = 0>
auto log_softmax(const X& x, int axis = -1) {
  return x - logsumexp(x, axis, keepdim);
}

/// layer_norm over the last axis: (x - mean) / sqrt(var + eps), population variance (Welford,
/// so two independent reductions).
template <class X, detail::reducible<X> = 0>
auto layer_norm(const X& x, double eps = 1e-5) {
  return (x - mean(x, -1, keepdim)) * rsqrt(var(x, -1, 0.0, keepdim) + eps);
}
/// layer_norm with an affine epilogue: layer_norm(x) * weight + bias.
template <class X, class W, class B, detail::reducible<X> = 0>
auto layer_norm(const X& x, const W& weight, const B& bias, double eps = 1e-5) {
  return layer_norm(x, eps) * weight + bias;
}

/// rms_norm over the last axis: x / sqrt(mean(x^2) + eps).
template <class X, detail::reducible<X> = 0>
auto rms_norm(const X& x, double eps = 1e-6) {
  return x * rsqrt(mean(x * x, -1, keepdim) + eps);
}
/// rms_norm with a weight: rms_norm(x) * weight.
template <class X, class W, detail::reducible<X> = 0>
auto rms_norm(const X& x, const W& weight, double eps = 1e-6) {
  return rms_norm(x, eps) * weight;
}

}  // namespace fusex
