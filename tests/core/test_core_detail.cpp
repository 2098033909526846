// fusex's own small utilities that stand in for CCCL headers (core/detail/tuple.hpp,
// core/detail/limits.hpp), checked against the standard library's.
#include <fusex/core/detail/limits.hpp>
#include <fusex/core/detail/tuple.hpp>

#include "fusex_catch.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace {
struct empty_a {};
struct empty_b {
  int twice(int v) const { return 2 * v; }
};
}  // namespace

TEST_CASE("detail::tuple: construction, get, size, element types", "[core]") {
  using fusex::detail::get;
  using fusex::detail::tuple;
  tuple<int, double, std::string> t{3, 2.5, std::string("abc")};
  CHECK(get<0>(t) == 3);
  CHECK(get<1>(t) == 2.5);
  CHECK(get<2>(t) == "abc");
  get<0>(t) = 7;
  CHECK(get<0>(t) == 7);
  const auto& ct = t;
  CHECK(get<2>(ct).size() == 3);
  STATIC_REQUIRE(fusex::detail::tuple_size<decltype(t)>::value == 3);
  STATIC_REQUIRE(fusex::detail::tuple_size<const decltype(t)>::value == 3);
  STATIC_REQUIRE(std::is_same_v<fusex::detail::tuple_element_t<1, decltype(t)>, double>);
  STATIC_REQUIRE(std::is_same_v<decltype(get<0>(ct)), const int&>);
  // Copies are copies, not a one-element construction from a tuple.
  tuple<int> one{5};
  tuple<int> copy(one);
  get<0>(one) = 6;
  CHECK(get<0>(copy) == 5);
  // Default construction value-initialises every element, as std::tuple does (the row kernel's
  // register caches rely on it: left uninitialised, ptxas gave the dynamic row path more registers).
  tuple<int, float> z;
  CHECK(get<0>(z) == 0);
  CHECK(get<1>(z) == 0.0f);
  tuple<int, float> braced{};
  CHECK(get<0>(braced) == 0);
}

TEST_CASE("detail::tuple: empty elements take no space", "[core]") {
  using fusex::detail::tuple;
  STATIC_REQUIRE(sizeof(tuple<empty_a, float>) == sizeof(float));
  STATIC_REQUIRE(sizeof(tuple<empty_a, empty_b, double>) == sizeof(double));
  tuple<empty_b, int> t{empty_b{}, 4};
  CHECK(fusex::detail::get<0>(t).twice(fusex::detail::get<1>(t)) == 8);
}

TEST_CASE("detail::tuple: nested tuples, rvalues, const element types, constrained construction", "[core]") {
  using fusex::detail::get;
  using fusex::detail::tuple;
  // Tuples of empty elements nest without making get<I> ambiguous (an empty tuple element is not
  // a base, so its leaves do not become the outer tuple's).
  tuple<tuple<empty_a>, tuple<empty_b>, int> n{tuple<empty_a>{}, tuple<empty_b>{}, 3};
  CHECK(get<0>(get<1>(n)).twice(get<2>(n)) == 6);
  tuple<tuple<empty_b, int>> deep{tuple<empty_b, int>{empty_b{}, 5}};
  CHECK(get<1>(get<0>(deep)) == 5);
  // get on an rvalue moves the element out.
  tuple<std::string, int> r{std::string("moved"), 1};
  STATIC_REQUIRE(std::is_same_v<decltype(get<0>(std::move(r))), std::string&&>);
  const std::string out = get<0>(std::move(r));
  CHECK(out == "moved");
  STATIC_REQUIRE(std::is_same_v<fusex::detail::tuple_element_t<0, const tuple<int, float>>, const int>);
  // The element-wise constructor takes only arguments the elements can be built from.
  STATIC_REQUIRE(std::is_constructible_v<tuple<int, std::string>, int, const char*>);
  STATIC_REQUIRE(!std::is_constructible_v<tuple<int, std::string>, int, double>);
  // get on an rvalue tuple of a reference element gives the lvalue, as std::get does.
  int target = 1;
  tuple<int&> ref{target};
  STATIC_REQUIRE(std::is_same_v<decltype(get<0>(std::move(ref))), int&>);
  get<0>(std::move(ref)) = 9;
  CHECK(target == 9);
}

TEST_CASE("detail::tuple_cat concatenates in order", "[core]") {
  using fusex::detail::get;
  using fusex::detail::tuple;
  const tuple<int> a{1};
  const tuple<> none{};
  const tuple<char, long> b{'x', 9L};
  const auto c = fusex::detail::tuple_cat(a, none, b, a);
  STATIC_REQUIRE(std::is_same_v<std::decay_t<decltype(c)>, tuple<int, char, long, int>>);
  CHECK(get<0>(c) == 1);
  CHECK(get<1>(c) == 'x');
  CHECK(get<2>(c) == 9L);
  CHECK(get<3>(c) == 1);
  STATIC_REQUIRE(std::is_same_v<decltype(fusex::detail::tuple_cat()), tuple<>>);
}

TEST_CASE("detail::limits agrees with std::numeric_limits", "[core]") {
  using fusex::detail::limits;
  CHECK(limits<float>::infinity() == std::numeric_limits<float>::infinity());
  CHECK(limits<double>::infinity() == std::numeric_limits<double>::infinity());
  CHECK(std::isnan(limits<float>::quiet_NaN()));
  CHECK(std::isnan(limits<double>::quiet_NaN()));
  CHECK(limits<float>::max() == std::numeric_limits<float>::max());
  CHECK(limits<float>::lowest() == std::numeric_limits<float>::lowest());
  CHECK(limits<double>::max() == std::numeric_limits<double>::max());
  CHECK(limits<double>::lowest() == std::numeric_limits<double>::lowest());
  CHECK(limits<std::int8_t>::max() == std::numeric_limits<std::int8_t>::max());
  CHECK(limits<std::int8_t>::lowest() == std::numeric_limits<std::int8_t>::lowest());
  CHECK(limits<std::int32_t>::lowest() == std::numeric_limits<std::int32_t>::lowest());
  CHECK(limits<std::int64_t>::max() == std::numeric_limits<std::int64_t>::max());
  CHECK(limits<std::int64_t>::lowest() == std::numeric_limits<std::int64_t>::lowest());
  CHECK(limits<std::uint8_t>::max() == std::numeric_limits<std::uint8_t>::max());
  CHECK(limits<std::uint64_t>::max() == std::numeric_limits<std::uint64_t>::max());
  CHECK(limits<std::uint32_t>::lowest() == 0u);
  CHECK(limits<bool>::max());
  CHECK(!limits<bool>::lowest());
}
