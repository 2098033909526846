#pragma once
/// \file
/// The one traversal of fusex's trees: expression nodes (leaf_node, scalar_node, map_node,
/// reduce_node, matmul_node) and the evaluators built from them (leaf_eval, map_eval, reduce_eval,
/// ...). Every walk (planning, building evaluators, materialising reductions, the row kernel's
/// register cache, explain, finding and replacing the matmul node) is one of the three below with a small visitor that
/// names only the node kinds it treats differently; adding a node kind means giving it the inner
/// node interface (or none: it is then a terminal) and teaching the visitors that care about it.
///
/// The inner node interface (map_node, reduce_node, map_eval, reduce_eval):
///   static constexpr std::size_t arity;                 the number of children (at least 1)
///   template <std::size_t I> const auto& child_at() const;  child I (FUSEX_HD where device code walks)
///   template <class... C> auto with_children(const C&... c) const;
///                                                       the same kind over new children
/// Any type without `arity` is a terminal.

#include <fusex/config.hpp>
#include <fusex/core/detail/tuple.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace fusex::detail {

template <class N, class = void>
struct tree_arity : std::integral_constant<std::size_t, 0> {};
template <class N>
struct tree_arity<N, std::void_t<decltype(N::arity)>> : std::integral_constant<std::size_t, N::arity> {};
/// Whether N is an inner node (has children).
template <class N>
inline constexpr bool is_inner_v = tree_arity<N>::value > 0;
/// The type of child I of the inner node N.
template <std::size_t I, class N>
using child_t = std::decay_t<decltype(std::declval<const N&>().template child_at<I>())>;

// --- fold: post-order, results replace nodes -----------------------------------------------------
template <class F, class N>
FUSEX_HD FUSEX_FORCEINLINE auto fold_tree(const N& n, F& f);

#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class F, class N, std::size_t... I>
FUSEX_HD FUSEX_FORCEINLINE auto fold_children(const N& n, F& f, std::index_sequence<I...>) {
  if constexpr (sizeof...(I) == 1) {
    return f(n, fold_tree(n.template child_at<0>(), f));
  } else {
    // Braced initialisation folds the children left to right (leaves take their strides, and
    // reductions their slots, in that order).
    const tuple<decltype(fold_tree(n.template child_at<I>(), f))...> kids{fold_tree(n.template child_at<I>(), f)...};
    return f(n, get<I>(kids)...);
  }
}

/// f(n, fold_tree(children, f)...) for an inner node, f(n) for a terminal: builds a new tree
/// (evaluators from nodes, a tree with its reductions materialised, ...) or computes a value from
/// the bottom up. Children are folded left to right.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class F, class N>
FUSEX_HD FUSEX_FORCEINLINE auto fold_tree(const N& n, F& f) {
  if constexpr (is_inner_v<N>) {
    return fold_children(n, f, std::make_index_sequence<tree_arity<N>::value>{});
  } else {
    return f(n);
  }
}
/// The type fold_tree(N, F) returns.
template <class N, class F>
using fold_tree_t = decltype(fold_tree(std::declval<const N&>(), std::declval<F&>()));

/// A base for fold visitors that rebuild the tree: terminals are kept, inner nodes are rebuilt
/// over their folded children. A visitor derives from it (with `using rebuild_tree::operator();`)
/// and overloads the node kinds it replaces.
struct rebuild_tree {
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <class N>
  FUSEX_HD FUSEX_FORCEINLINE N operator()(const N& n) const {
    return n;
  }
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
  template <class N, class C0, class... C>
  FUSEX_HD FUSEX_FORCEINLINE auto operator()(const N& n, const C0& c0, const C&... c) const {
    return n.with_children(c0, c...);
  }
};

// --- visit: pre-order, with a context passed down ------------------------------------------------
template <class F, class N, class Ctx>
FUSEX_HD FUSEX_FORCEINLINE void visit_tree(const N& n, F& f, const Ctx& ctx);

#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class F, class N, class Ctx, std::size_t... I>
FUSEX_HD FUSEX_FORCEINLINE void visit_children(const N& n, F& f, const Ctx& ctx, std::index_sequence<I...>) {
  (visit_tree(n.template child_at<I>(), f, ctx), ...);
}

/// Calls f(node, ctx) for every node, parents before children, children left to right. For an
/// inner node f returns the context its children get (a depth, "inside a reduction"); for a
/// terminal its result is ignored.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class F, class N, class Ctx>
FUSEX_HD FUSEX_FORCEINLINE void visit_tree(const N& n, F& f, const Ctx& ctx) {
  if constexpr (is_inner_v<N>) {
    visit_children(n, f, f(n, ctx), std::make_index_sequence<tree_arity<N>::value>{});
  } else {
    f(n, ctx);
  }
}

// --- type fold: the same post-order over types only ---------------------------------------------
template <class N, template <class, class...> class F, class = std::make_index_sequence<tree_arity<N>::value>>
struct fold_type;
template <class N, template <class, class...> class F, std::size_t... I>
struct fold_type<N, F, std::index_sequence<I...>> {
  using type = typename F<N, typename fold_type<child_t<I, N>, F>::type...>::type;
};
/// F<N, fold_type_t<children, F>...>::type for an inner node, F<N>::type for a terminal: what a
/// tree's type alone decides (the widest leaf, the depth of nested reductions, the leaf types).
template <class N, template <class, class...> class F>
using fold_type_t = typename fold_type<N, F>::type;

/// The largest of the children's values (0 for none): the inner-node case of most type folds.
template <class... K>
struct max_of : std::integral_constant<int, 0> {};
template <class K0, class... K>
struct max_of<K0, K...> : std::integral_constant<int, (K0::value > max_of<K...>::value ? K0::value : max_of<K...>::value)> {
};
/// The sum of the children's values.
template <class... K>
struct sum_of : std::integral_constant<int, (0 + ... + K::value)> {};

}  // namespace fusex::detail
