#pragma once
/// \file
/// Shared values: which nodes of a tree compute the same value as an earlier node (issue #29 item
/// 1). Written once for both kinds of tree (expression nodes and the evaluators built from them):
///
/// - `same_value(a, b)`: two nodes of one type compute the same value at every element: their
///   own data are equal (`same_data`: a view's pointer, shape and strides; a scalar's bits; an op's
///   state) and so are their children's. A node kind without `same_data` is never equal to
///   another (a terminal of a higher layer, unless it says so).
/// - The candidates are decided by the types alone (`share_dups_t`): a *value node* (a map, an
///   explicit fusex::share) or a reduction whose type occurs more than once in the tree. A tree
///   without them costs nothing more to compile or to launch.
/// - `share_table`: the candidates in post-order (the order in which the kernels evaluate them:
///   children left to right, and nodes of one type never nest), each with its *scope* (the
///   expression that is evaluated together: the tree outside reductions, or one reduction's
///   operand) and its role: the first of a set of equal values in one scope computes and keeps it
///   (`share_store`), the later ones read it (`share_reuse`). Equal reductions are equal in any
///   scope (each runs once per row, in its pass): the later ones reuse the first's result.

#include <fusex/config.hpp>
#include <fusex/core/detail/type_list.hpp>
#include <fusex/expr/detail/tree.hpp>

#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

namespace fusex::detail {

/// What a node kind is to the sharing analysis (a node says so with `static constexpr int
/// share_kind`): nothing (terminals; default), a value (computed per element) or a reduction.
inline constexpr int share_none = 0, share_value = 1, share_reduction = 2;
template <class N, class = void>
struct share_kind_of : std::integral_constant<int, share_none> {};
template <class N>
struct share_kind_of<N, std::void_t<decltype(N::share_kind)>> : std::integral_constant<int, N::share_kind> {};

/// An op's state compared (ops are trivially copyable: kernel parameters): stateless ops are
/// equal; others compare bytes (padding can only make equal ops look different, which loses the
/// sharing, never the result).
template <class Op>
bool ops_equal(const Op& a, const Op& b) noexcept {
  if constexpr (std::is_empty_v<Op>) {
    return true;
  } else if constexpr (std::is_trivially_copyable_v<Op>) {
    return std::memcmp(&a, &b, sizeof(Op)) == 0;
  } else {
    return &a == &b;  // (a host-only op with owning members: never shared)
  }
}

template <class N, class = void>
struct has_same_data : std::false_type {};
template <class N>
struct has_same_data<N, std::void_t<decltype(std::declval<const N&>().same_data(std::declval<const N&>()))>>
    : std::true_type {};
template <class N, class = void>
struct shared_by_identity : std::false_type {};
template <class N>
struct shared_by_identity<N, std::void_t<decltype(std::declval<const N&>().share_id)>> : std::true_type {};

template <class N>
bool same_value(const N& a, const N& b);
template <class N, std::size_t... I>
bool same_children(const N& a, const N& b, std::index_sequence<I...>) {
  return (same_value(a.template child_at<I>(), b.template child_at<I>()) && ...);
}
/// Whether two nodes of one type compute the same value at every element (see the file comment).
/// An explicit fusex::share is equal to its own copies whatever its contents.
template <class N>
bool same_value(const N& a, const N& b) {
  if (&a == &b) return true;
  if constexpr (shared_by_identity<N>::value) {
    if (a.share_id == b.share_id) return true;
  }
  if constexpr (!has_same_data<N>::value) {
    return false;
  } else {
    if (!a.same_data(b)) return false;
    if constexpr (is_inner_v<N>) return same_children(a, b, std::make_index_sequence<tree_arity<N>::value>{});
    return true;
  }
}

// --- the candidates, from the types ---------------------------------------------------------------
template <class All, class Dups>
struct share_sets {
  using all = All;    // the value and reduction node types of a subtree (a set)
  using dups = Dups;  // those that occur more than once in it
};
template <class T, class... L>
struct lists_containing : std::integral_constant<int, (0 + ... + static_cast<int>(type_list_contains<T, L>::value))> {};
template <class U, class... L>
struct types_in_two;  // the types of U found in at least two of the lists L
template <class... U, class... L>
struct types_in_two<type_list<U...>, L...> {
  using type = typename type_list_cat<
      std::conditional_t<(lists_containing<U, L...>::value >= 2), type_list<U>, type_list<>>...>::type;
};
/// The candidate sets of a tree, for the node types that `Pred<N>::value` selects.
template <template <class> class Pred>
struct candidate_sets {
  template <class N, class... K>
  struct f {
    using merged = typename type_lists_merge<typename K::all...>::type;
    using all = std::conditional_t<Pred<N>::value, typename type_list_add<merged, N>::type, merged>;
    using dups =
        typename type_lists_merge<typename K::dups..., typename types_in_two<merged, typename K::all...>::type>::type;
    using type = share_sets<all, dups>;
  };
  template <class N>
  struct f<N> {
    using type = share_sets<std::conditional_t<Pred<N>::value, type_list<N>, type_list<>>, type_list<>>;
  };
};
template <class N>
struct is_share_candidate : std::bool_constant<share_kind_of<N>::value != share_none> {};
/// The node types of tree N that are candidates for sharing (occur more than once).
template <class N>
using share_dups_t = typename fold_type_t<N, candidate_sets<is_share_candidate>::template f>::dups;

template <class Dups>
struct share_count {
  template <class N, class... K>
  struct f : std::integral_constant<int, (0 + ... + K::value) + (type_list_contains<N, Dups>::value ? 1 : 0)> {};
};
/// The number of candidate nodes in tree N.
template <class N>
inline constexpr int share_count_v = fold_type_t<N, share_count<share_dups_t<N>>::template f>::value;

// --- the roles, at run time -------------------------------------------------------------------------
inline constexpr int share_compute = 0, share_store = 1, share_reuse = 2;

/// A per-type address: the identity of a node type at run time. (Not the address of a function
/// instantiated per type: linkers that fold identical functions may give two types one address.
/// A mutable variable is never folded.)
template <class N>
struct type_tag {
  static inline char id = 0;
};

/// One candidate node of a tree.
struct share_entry {
  const void* node = nullptr;
  const void* type = nullptr;                        // &type_tag<its type>::id
  bool (*same)(const void*, const void*) = nullptr;  // same_value for its type
  int scope = -1;  // -1: not yet known (the tree's top scope when the walk ends)
  bool reduction = false;
  int role = share_compute;
  int rep = -1;   // the entry it reads (share_reuse), else itself
  int uses = 1;   // share_store: the number of nodes that use the value
};
template <class N>
bool same_value_erased(const void* a, const void* b) {
  return same_value(*static_cast<const N*>(a), *static_cast<const N*>(b));
}

/// The candidates of a tree of type N, in post-order, with their roles.
template <class N>
struct share_table {
  std::array<share_entry, static_cast<std::size_t>(share_count_v<N> > 0 ? share_count_v<N> : 1)> e{};
  std::array<int, static_cast<std::size_t>(share_count_v<N> > 0 ? share_count_v<N> : 1)> first{};  // of each subtree
  int size = 0;
  int shared = 0;  // the number of values computed once for several uses
  // Every evaluated candidate with an earlier evaluated one of its type in its scope reuses the
  // first of them: "compute at the first evaluation, read after" gives these roles, so a kernel may
  // resolve them at compile time (shared_eval's lazy form) instead of testing them at run time.
  bool lazy_ok = true;
};

// Collects the candidates (a fold_tree visitor; each subtree folds to the index of its first entry).
template <class Dups, std::size_t Cap>
struct share_collector {
  std::array<share_entry, Cap>& e;
  int& size;
  std::array<int, Cap>& first_of;  // each entry's first entry (its subtree's entries are first_of .. itself)
  int next_scope = 1;

  template <class N>
  int operator()(const N&) {
    return size;
  }
  template <class N, class K0, class... K>
  int operator()(const N& n, const K0& first, const K&...) {
    if constexpr (share_kind_of<N>::value == share_reduction) {
      // The candidates of its operand so far without a scope are in the operand's scope.
      const int scope = next_scope++;
      for (int i = first; i < size; ++i)
        if (e[static_cast<std::size_t>(i)].scope < 0) e[static_cast<std::size_t>(i)].scope = scope;
    }
    if constexpr (type_list_contains<N, Dups>::value) {
      first_of[static_cast<std::size_t>(size)] = first;
      share_entry& x = e[static_cast<std::size_t>(size++)];
      x.node = &n;
      x.type = &type_tag<N>::id;
      x.same = &same_value_erased<N>;
      x.reduction = share_kind_of<N>::value == share_reduction;
    }
    return first;
  }
};

// Gives each live entry (`skip` false) of the kind asked for its role among the earlier live ones.
// A reduction reuses any earlier equal reduction (each keeps its own slot). A value reuses only the
// first live value of its type in its scope: a scope's memo holds one value per type, so a second,
// different value of the type is computed where it is used and kept by nobody.
template <std::size_t Cap>
void match_shares(std::array<share_entry, Cap>& e, int size, bool reductions, const bool* skip) {
  for (int i = 0; i < size; ++i) {
    share_entry& x = e[static_cast<std::size_t>(i)];
    if (x.reduction != reductions || skip[i]) continue;
    x.role = share_compute;
    x.rep = i;
    x.uses = 1;
    for (int j = 0; j < i; ++j) {
      share_entry& r = e[static_cast<std::size_t>(j)];
      if (skip[j] || r.reduction != reductions || r.type != x.type) continue;
      if (reductions) {
        if (r.rep != j || !x.same(r.node, x.node)) continue;
      } else {
        if (r.scope != x.scope) continue;
        // j is the first live value of the type in the scope.
        if (!x.same(r.node, x.node)) {
          x.rep = -1;  // not kept: no later value reuses it
          break;
        }
      }
      x.rep = j;
      x.role = share_reuse;
      r.role = share_store;
      ++r.uses;
      break;
    }
  }
}

/// The candidates of `tree` and their roles (post-order: what the kernels evaluate first comes
/// first, so a reused value is always computed before it is read).
template <class N>
share_table<N> share_roles(const N& tree) {
  share_table<N> t;
  if constexpr (share_count_v<N> > 0) {
    constexpr std::size_t cap = static_cast<std::size_t>(share_count_v<N>);
    share_collector<share_dups_t<N>, cap> c{t.e, t.size, t.first};
    fold_tree(tree, c);
    for (int i = 0; i < t.size; ++i)
      if (t.e[static_cast<std::size_t>(i)].scope < 0) t.e[static_cast<std::size_t>(i)].scope = 0;
    bool none[cap] = {}, dead[cap] = {};
    // Reductions first (equal in any scope), then values among every candidate, to find the ones
    // that are never evaluated: the values of a reused value's own scope below it, and everything
    // below a repeated reduction (the passes skip it).
    match_shares(t.e, t.size, true, none);
    match_shares(t.e, t.size, false, none);
    for (int i = 0; i < t.size; ++i) {
      const share_entry& x = t.e[static_cast<std::size_t>(i)];
      if (x.role != share_reuse) continue;
      // (Unsigned indices: g++ -O3 could not see that a subtree's first entry is not negative.)
      for (std::size_t j = static_cast<std::size_t>(t.first[static_cast<std::size_t>(i)]); j < static_cast<std::size_t>(i);
           ++j) {
        const share_entry& y = t.e[j];
        if (x.reduction || (!y.reduction && y.scope == x.scope)) dead[j] = true;
      }
    }
    // The values again among the evaluated ones, so that a value's uses count only evaluations (the
    // sin inside a reused subtree is not "used" by the copies that are never computed).
    match_shares(t.e, t.size, false, dead);
    for (int i = 0; i < t.size; ++i) {
      share_entry& x = t.e[static_cast<std::size_t>(i)];
      if (dead[i] && !x.reduction) x.role = share_compute, x.rep = i, x.uses = 1;
      if (x.role == share_store) ++t.shared;
      if (x.reduction || dead[i]) continue;
      for (int j = 0; j < i; ++j) {  // the first evaluated one of its type in its scope
        const share_entry& y = t.e[static_cast<std::size_t>(j)];
        if (dead[j] || y.reduction || y.type != x.type || y.scope != x.scope) continue;
        if (x.role != share_reuse || x.rep != j) t.lazy_ok = false;
        break;
      }
    }
  }
  return t;
}

}  // namespace fusex::detail
