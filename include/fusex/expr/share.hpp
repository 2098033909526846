#pragma once
/// \file
/// fusex::share: a value named once and used several times, computed once per element (or once per
/// row for a reduction inside it) in the generated kernel. fusex finds most such values itself (a
/// subtree used twice: the same node types over the same views, equal scalars and op states; see
/// docs/design.md, "Shared values"); share marks the ones it cannot prove equal, or makes the
/// intent explicit: every copy of the returned expression is one value.

#include <fusex/core/shape.hpp>
#include <fusex/expr/node.hpp>

#include <atomic>
#include <cstdint>

namespace fusex {

/// A shared value: its child computed once for all the copies of this node in one expression
/// (copies carry the same `share_id`).
template <class E>
struct shared_node : detail::expr_base {
  using value_type = typename E::value_type;
  static constexpr int leaf_count = E::leaf_count;
  static constexpr int reduce_count = E::reduce_count;

  E child;
  std::uint64_t share_id;

  shape_t shape() const { return child.shape(); }

  // Sharing (expr/detail/share.hpp): copies are equal by their id; other shared nodes of the same
  // type by their contents.
  static constexpr int share_kind = detail::share_value;
  bool same_data(const shared_node&) const { return true; }

  // The inner node interface (expr/detail/tree.hpp).
  static constexpr std::size_t arity = 1;
  template <std::size_t I>
  const E& child_at() const {
    return child;
  }
  template <class C>
  shared_node<C> with_children(const C& c) const {
    return shared_node<C>{{}, c, share_id};
  }
};

namespace detail {
inline std::uint64_t next_share_id() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

/// Marks `x` (an expression, view or tensor) as one value: however many times the result is used
/// in an expression, it is computed once per element, and reductions inside it once per row or
/// output. `auto h = fusex::share(x + b); fusex::eval(y, h * fusex::sigmoid(h), s);`
template <class X, std::enable_if_t<is_operand_v<X>, int> = 0>
auto share(const X& x) {
  const auto e = as_expr(x);
  return shared_node<std::decay_t<decltype(e)>>{{}, e, detail::next_share_id()};
}

}  // namespace fusex
