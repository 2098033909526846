#pragma once
/// \file
/// A small tuple for expression nodes, evaluators and kernel parameters, usable in host and
/// device code. fusex needs construction, `get<I>`, the size, an element's type and concatenation;
/// `<cuda/std/tuple>` offers far more and costs about 2.5 s of nvcc time in every translation unit
/// that includes it (bench/results/logs/compile-headers-2026-12-05-5544086.log:
/// 4.24 s against 1.70 s for config.hpp alone). Elements are laid out as
/// distinct bases, so `get<I>` is one overload resolution, not a recursive instantiation, and
/// empty elements (the ops) take no space.

#include <fusex/config.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace fusex::detail {

template <class... Ts>
struct tuple;
template <class T>
struct is_detail_tuple : std::false_type {};
template <class... Ts>
struct is_detail_tuple<tuple<Ts...>> : std::true_type {};

// An empty element becomes a base (no storage), except a tuple: its own leaves would then be bases
// of the outer tuple too, and get<I> would find two leaves of index I.
template <std::size_t I, class T, bool = std::is_empty_v<T> && !std::is_final_v<T> && !is_detail_tuple<T>::value>
struct tuple_leaf {
  T value;
  FUSEX_HD constexpr T& get() noexcept { return value; }
  FUSEX_HD constexpr const T& get() const noexcept { return value; }
};
template <std::size_t I, class T>
struct tuple_leaf<I, T, true> : T {
  FUSEX_HD constexpr T& get() noexcept { return *this; }
  FUSEX_HD constexpr const T& get() const noexcept { return *this; }
};

template <class Seq, class... Ts>
struct tuple_storage;
template <std::size_t... I, class... Ts>
struct tuple_storage<std::index_sequence<I...>, Ts...> : tuple_leaf<I, Ts>... {};

/// The tuple: default-constructible, constructible from one value per element.
template <class... Ts>
struct tuple : tuple_storage<std::index_sequence_for<Ts...>, Ts...> {
  // Value-initialises every element, as std::tuple does (the row kernel's register caches start as
  // zeros; left uninitialised, ptxas allocated more registers to the dynamic row path).
  FUSEX_HD constexpr tuple() : tuple_storage<std::index_sequence_for<Ts...>, Ts...>{} {}
  template <class... Us,
            class = std::enable_if_t<sizeof...(Us) == sizeof...(Ts) && (sizeof...(Ts) > 0) &&
                                     !(sizeof...(Us) == 1 && (std::is_same_v<std::decay_t<Us>, tuple> && ...))>,
            class = std::enable_if_t<(std::is_constructible_v<Ts, Us&&> && ...)>>
  FUSEX_HD constexpr tuple(Us&&... us)
      : tuple_storage<std::index_sequence_for<Ts...>, Ts...>{{static_cast<Us&&>(us)}...} {}
};

// The leaf of index I, its type deduced from the base class.
template <std::size_t I, class T, bool E>
FUSEX_HD constexpr tuple_leaf<I, T, E>& leaf_at(tuple_leaf<I, T, E>& l) noexcept {
  return l;
}
template <std::size_t I, class T, bool E>
FUSEX_HD constexpr const tuple_leaf<I, T, E>& leaf_at(const tuple_leaf<I, T, E>& l) noexcept {
  return l;
}

/// Element I of a tuple.
template <std::size_t I, class... Ts>
FUSEX_HD FUSEX_FORCEINLINE constexpr decltype(auto) get(tuple<Ts...>& t) noexcept {
  return leaf_at<I>(t).get();
}
template <std::size_t I, class... Ts>
FUSEX_HD FUSEX_FORCEINLINE constexpr decltype(auto) get(const tuple<Ts...>& t) noexcept {
  return leaf_at<I>(t).get();
}
// Element I of an rvalue tuple as T&& (an lvalue for a reference element, as std::get).
template <std::size_t I, class T, bool E>
FUSEX_HD constexpr T&& rvalue_at(tuple_leaf<I, T, E>& l) noexcept {
  return static_cast<T&&>(l.get());
}
template <std::size_t I, class... Ts>
FUSEX_HD FUSEX_FORCEINLINE constexpr decltype(auto) get(tuple<Ts...>&& t) noexcept {
  return rvalue_at<I>(t);
}

template <class T>
struct tuple_size;
template <class... Ts>
struct tuple_size<tuple<Ts...>> : std::integral_constant<std::size_t, sizeof...(Ts)> {};
template <class T>
struct tuple_size<const T> : tuple_size<T> {};

template <std::size_t I, class T>
struct tuple_element;
template <std::size_t I, class... Ts>
struct tuple_element<I, tuple<Ts...>> {
  using type = std::remove_reference_t<decltype(get<I>(std::declval<tuple<Ts...>&>()))>;
};
template <std::size_t I, class T>
struct tuple_element<I, const T> {
  using type = const typename tuple_element<I, T>::type;
};
template <std::size_t I, class T>
using tuple_element_t = typename tuple_element<I, T>::type;

template <class... A, class... B, std::size_t... I, std::size_t... J>
FUSEX_HD constexpr tuple<A..., B...> tuple_cat2(const tuple<A...>& a, const tuple<B...>& b, std::index_sequence<I...>,
                                                std::index_sequence<J...>) {
  return tuple<A..., B...>{get<I>(a)..., get<J>(b)...};
}
/// The elements of several tuples, in order, as one tuple.
FUSEX_HD constexpr tuple<> tuple_cat() { return {}; }
template <class... A>
FUSEX_HD constexpr tuple<A...> tuple_cat(const tuple<A...>& a) {
  return a;
}
template <class... A, class... B, class... Rest>
FUSEX_HD constexpr auto tuple_cat(const tuple<A...>& a, const tuple<B...>& b, const Rest&... rest) {
  return tuple_cat(tuple_cat2(a, b, std::index_sequence_for<A...>{}, std::index_sequence_for<B...>{}), rest...);
}

}  // namespace fusex::detail
