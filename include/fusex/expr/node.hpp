#pragma once
/// \file
/// Expression nodes. An expression is a small value type: terminals (views and scalars) and
/// map nodes (an op applied elementwise to child expressions). Building one allocates nothing and
/// launches nothing; evaluation (fusex::eval, fusex::host::eval) plans and runs it.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/core/view.hpp>
#include <fusex/expr/ops.hpp>

#include <fusex/core/detail/tuple.hpp>
#include <fusex/expr/detail/share.hpp>
#include <fusex/expr/detail/tree.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

namespace fusex {

namespace detail {
/// Base of every expression node type (a tag; no virtual functions).
struct expr_base {};

template <class T>
struct is_view : std::false_type {};
template <class T>
struct is_view<view<T>> : std::true_type {};
template <class T>
struct is_tensor : std::false_type {};
template <class T>
struct is_tensor<tensor<T>> : std::true_type {};

// Describes a leaf to the planner: where its elements are and how they are laid out.
struct leaf_info {
  const void* data;
  int elem_size;
  dtype_id dtype;
  shape_t shape;
  strides_t strides;
  bool in_reduction = false;  // inside a reduction's operand (its index space is the unreduced one)
  int compute_size = 0;       // bytes of its compute type (the row kernel's register cache holds it)
  // Values computed from the coordinates, not read from memory (an index leaf): `data` is then the
  // value at the first element (a launch in pieces advances it like an address, elem_size 1), and
  // the planner skips alignment, overlap and the register cache for it.
  bool computed = false;
};
}  // namespace detail

/// True for fusex expression node types.
template <class E>
inline constexpr bool is_expr_v = std::is_base_of_v<detail::expr_base, std::decay_t<E>>;

/// True for anything that can be an operand of a fusex expression other than a C++ scalar: an
/// expression node, a view or a tensor.
template <class E>
inline constexpr bool is_operand_v =
    is_expr_v<E> || detail::is_view<std::decay_t<E>>::value || detail::is_tensor<std::decay_t<E>>::value;

/// A terminal reading a view's elements.
template <class T>
struct leaf_node : detail::expr_base {
  using value_type = std::remove_const_t<T>;
  static constexpr int leaf_count = 1;
  static constexpr int reduce_count = 0;

  view<const value_type> v;

  shape_t shape() const { return v.shape(); }
  /// The same elements (expr/detail/share.hpp).
  bool same_data(const leaf_node& o) const {
    return v.data() == o.v.data() && v.shape() == o.v.shape() && v.strides() == o.v.strides();
  }
  /// The planner's description of this leaf (a terminal that is a planner operand has one).
  detail::leaf_info leaf(bool in_reduction) const {
    return detail::leaf_info{v.data(),    static_cast<int>(sizeof(value_type)), dtype_of<value_type>(), v.shape(),
                             v.strides(), in_reduction, static_cast<int>(sizeof(compute_t<value_type>))};
  }
};

/// A terminal holding one value, broadcast to any shape. Its value is kept in the compute type.
template <class T>
struct scalar_node : detail::expr_base {
  using value_type = T;
  static constexpr int leaf_count = 0;
  static constexpr int reduce_count = 0;

  compute_t<T> value;

  shape_t shape() const { return shape_t{}; }
  bool same_data(const scalar_node& o) const { return std::memcmp(&value, &o.value, sizeof(value)) == 0; }
};

/// `Op` applied elementwise to the child expressions `Args...`, broadcast together.
template <class Op, class... Args>
struct map_node : detail::expr_base {
  using value_type = typename Op::template result<typename Args::value_type...>;
  static_assert(is_dtype_v<value_type>,
                "fusex::map: the functor must return a supported element type (float, double, half, "
                "bfloat16, int8_t, uint8_t, int32_t, int64_t or bool)");
  static constexpr int leaf_count = (0 + ... + Args::leaf_count);
  static constexpr int reduce_count = (0 + ... + Args::reduce_count);

  Op op;
  fusex::detail::tuple<Args...> args;

  map_node(Op o, Args... a) : op(o), args(a...) {}

  static constexpr int share_kind = detail::share_value;
  bool same_data(const map_node& o) const { return detail::ops_equal(op, o.op); }

  shape_t shape() const { return shape_impl(std::index_sequence_for<Args...>{}); }

  // The inner node interface (expr/detail/tree.hpp).
  static constexpr std::size_t arity = sizeof...(Args);
  template <std::size_t I>
  const auto& child_at() const {
    return fusex::detail::get<I>(args);
  }
  template <class... C>
  map_node<Op, C...> with_children(const C&... c) const {
    return map_node<Op, C...>(op, c...);
  }

 private:
  template <std::size_t... I>
  shape_t shape_impl(std::index_sequence<I...>) const {
    shape_t s;
    ((s = broadcast_shapes(s, fusex::detail::get<I>(args).shape(), Op::name)), ...);
    return s;
  }
};

template <class Op, class Child>
struct reduce_node;

namespace detail {
template <class N>
struct is_reduce_node : std::false_type {};
template <class Op, class C>
struct is_reduce_node<reduce_node<Op, C>> : std::true_type {};

template <class N, class = void>
struct is_planner_operand : std::false_type {};
template <class N>
struct is_planner_operand<N, std::void_t<decltype(std::declval<const N&>().leaf(false))>> : std::true_type {};

template <class F>
struct leaf_visitor {
  F& f;
  // Terminals with a leaf() description are planner operands; a reduction's operand is inside it.
  template <class N>
  bool operator()(const N& n, bool in_reduction) const {
    if constexpr (is_planner_operand<N>::value) f(n.leaf(in_reduction));
    return in_reduction || is_reduce_node<N>::value;
  }
};
/// Calls f(leaf_info) for every planner operand (views, index leaves) of an expression, left to
/// right: the order in which the planner's operands and the evaluators' leaves are numbered.
template <class E, class F>
void visit_leaves(const E& e, F&& f) {
  leaf_visitor<std::remove_reference_t<F>> v{f};
  visit_tree(e, v, false);
}
}  // namespace detail

namespace detail {
// The dtype a C++ arithmetic scalar stands for on its own.
template <class S>
constexpr auto scalar_dtype_impl() {
  if constexpr (std::is_same_v<S, bool>) return bool{};
  else if constexpr (std::is_same_v<S, half> || std::is_same_v<S, bfloat16>) return S{};
  else if constexpr (std::is_floating_point_v<S>) {
    if constexpr (sizeof(S) <= 4) return float{};
    else return double{};
  } else if constexpr (std::is_signed_v<S> && sizeof(S) <= 4) return std::int32_t{};
  else if constexpr (std::is_same_v<S, std::uint8_t>) return std::uint8_t{};
  else return std::int64_t{};
}
template <class S>
using scalar_dtype_t = decltype(scalar_dtype_impl<S>());

// A weak scalar adopts the tensor operand's type unless its category is higher (see dtype.hpp).
template <class Ref, class S>
constexpr auto weak_scalar_impl() {
  using D = scalar_dtype_t<S>;
  if constexpr (std::is_void_v<Ref>) return D{};
  else if constexpr (category<D>() <= category<Ref>()) return Ref{};
  else if constexpr (is_floating_v<D>) return float{};
  else return std::int64_t{};
}
template <class Ref, class S>
using weak_scalar_t = decltype(weak_scalar_impl<Ref, S>());

template <class X>
inline constexpr bool is_scalar_v = std::is_arithmetic_v<std::decay_t<X>> || std::is_same_v<std::decay_t<X>, half> ||
                                    std::is_same_v<std::decay_t<X>, bfloat16>;

template <class X, class = void>
struct value_type_of {
  using type = void;
};  // C++ scalars have no tensor type
template <class X>
struct value_type_of<X, std::enable_if_t<is_operand_v<X>>> {
  using type = typename std::decay_t<X>::value_type;
};

// The promoted type of the non-scalar operands (void when all are scalars).
template <class A, class B>
struct promote_or_void {
  using type = promote_t<A, B>;
};
template <class B>
struct promote_or_void<void, B> {
  using type = B;
};
template <class A>
struct promote_or_void<A, void> {
  using type = A;
};
template <>
struct promote_or_void<void, void> {
  using type = void;
};

template <class... X>
struct ref_type {
  using type = void;
};
template <class X, class... Xs>
struct ref_type<X, Xs...> {
  using type = typename promote_or_void<typename value_type_of<X>::type, typename ref_type<Xs...>::type>::type;
};
}  // namespace detail

/// The element type an expression, view or tensor evaluates to: `fusex::result_t<decltype(e)>`
/// gives a destination's type without reading the promotion rules (a sum of int8 is int64, a mean
/// of int32 is float32, a comparison is bool; docs/ops.md and docs/reductions.md have the tables).
template <class E, std::enable_if_t<is_operand_v<E>, int> = 0>
using result_t = typename std::decay_t<E>::value_type;

/// Turns an operand into an expression node: expressions pass through, views and tensors become
/// leaves. `Ref` is the element type a C++ scalar operand adopts (void: its own type).
template <class Ref = void, class X>
auto as_expr(const X& x) {
  using D = std::decay_t<X>;
  if constexpr (is_expr_v<D>) {
    return x;
  } else if constexpr (detail::is_view<D>::value) {
    return leaf_node<typename D::value_type>{{}, view<const typename D::value_type>(x)};
  } else if constexpr (detail::is_tensor<D>::value) {
    return leaf_node<typename D::value_type>{{}, view<const typename D::value_type>(x.view())};
  } else {
    static_assert(detail::is_scalar_v<D>,
                  "fusex: an operand must be a fusex expression, view, tensor, or an arithmetic scalar");
    using S = detail::weak_scalar_t<Ref, D>;
    return scalar_node<S>{{}, convert<compute_t<S>>(x)};
  }
}

namespace detail {
template <class Op, class... X>
auto make_map(Op op, const X&... x) {
  using ref = typename ref_type<X...>::type;
  return map_node<Op, decltype(as_expr<ref>(x))...>(op, as_expr<ref>(x)...);
}

// Wraps a user functor for fusex::map: operands are passed in their compute types, and the result
// type is what the functor returns (or R when given explicitly).
template <class F, class R, class... T>
struct user_result {
  using type = R;
};
template <class F, class... T>
struct user_result<F, void, T...> {
  using type = std::decay_t<decltype(std::declval<const F&>()(std::declval<compute_t<T>>()...))>;
};

template <class F, class R>
struct user_op {
  static constexpr const char* name = "map";
  F f;
  template <class... T>
  using result = typename user_result<F, R, T...>::type;
  template <std::size_t I, class... T>
  using operand = compute_t<nth_t<I, T...>>;
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <class... C>
  FUSEX_HD auto operator()(C... x) const {
    return f(x...);
  }
};
}  // namespace detail

}  // namespace fusex
