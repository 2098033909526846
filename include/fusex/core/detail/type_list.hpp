#pragma once
/// \file
/// Lists of types for the compile-time folds over trees (expr/detail/tree.hpp): sets of leaf
/// types, of node types that occur more than once, of leaf entries.

#include <cstddef>
#include <type_traits>

namespace fusex::detail {

template <class... T>
struct type_list {
  static constexpr int size = static_cast<int>(sizeof...(T));
};

template <class T, class L>
struct type_list_contains;
template <class T, class... Ts>
struct type_list_contains<T, type_list<Ts...>> : std::bool_constant<(std::is_same_v<T, Ts> || ...)> {};

template <class L, class T>
struct type_list_add;
template <class... Ts, class T>
struct type_list_add<type_list<Ts...>, T> {
  using type = std::conditional_t<(std::is_same_v<T, Ts> || ...), type_list<Ts...>, type_list<Ts..., T>>;
};
// The types of list B not in list A, appended to A.
template <class A, class B>
struct type_list_merge {
  using type = A;
};
template <class A, class B0, class... B>
struct type_list_merge<A, type_list<B0, B...>> : type_list_merge<typename type_list_add<A, B0>::type, type_list<B...>> {};
/// The union of the lists, in first-seen order (left to right).
template <class... K>
struct type_lists_merge;
template <>
struct type_lists_merge<> {
  using type = type_list<>;
};
template <class L0, class... L>
struct type_lists_merge<L0, L...> : type_list_merge<L0, typename type_lists_merge<L...>::type> {};

/// T's position among Ts (T must be one of them).
template <class T, class... Ts>
struct type_index;
template <class T, class... Ts>
struct type_index<T, T, Ts...> : std::integral_constant<std::size_t, 0> {};
template <class T, class U, class... Ts>
struct type_index<T, U, Ts...> : std::integral_constant<std::size_t, 1 + type_index<T, Ts...>::value> {};
/// T's position in type list L (T must be in it).
template <class T, class L>
struct type_list_index;
template <class T, class... Ts>
struct type_list_index<T, type_list<Ts...>> : type_index<T, Ts...> {};

/// The concatenation of the lists (duplicates kept).
template <class A, class B>
struct type_list_cat2;
template <class... A, class... B>
struct type_list_cat2<type_list<A...>, type_list<B...>> {
  using type = type_list<A..., B...>;
};
template <class... L>
struct type_list_cat {
  using type = type_list<>;
};
template <class L0, class... L>
struct type_list_cat<L0, L...> : type_list_cat2<L0, typename type_list_cat<L...>::type> {};

}  // namespace fusex::detail
