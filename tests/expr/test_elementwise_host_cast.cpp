// Host tests: fusex::cast<T> from every element type to every element type, against a reference
// conversion written here (rounding for floating targets, truncation and wrapping for integers).
#include "host_test_support.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

using namespace fxt;

namespace {
const fusex::shape_t S{3, 41};
constexpr std::size_t N = 3 * 41;

// Reference conversion of an exact value v to To: floating types round (compared with To's
// tolerance), integers truncate toward zero and then wrap modulo 2^bits, bool is v != 0.
template <class To>
double cast_ref(double v) {
  if constexpr (is_fp<To>) return v;
  else if constexpr (std::is_same_v<To, bool>) return v != 0 ? 1 : 0;
  else return static_cast<double>(wrap<To>(static_cast<i64>(std::trunc(v))));
}

template <class From, class To>
void check_cast(double lo, double hi) {
  const auto a = random_array<From>(N, lo, hi, false);
  const auto e = fusex::cast<To>(a.cview(S));
  STATIC_REQUIRE(std::is_same_v<typename decltype(e)::value_type, To>);
  const std::string what = std::string("cast<") + fusex::dtype_name<To>() + ">(" + fusex::dtype_name<From>() + ")";
  check_expr(what, e, S, [&](std::size_t i) {
    const double r = cast_ref<To>(static_cast<double>(value_of(a[i])));
    if constexpr (is_fp<To>) return r;
    else return static_cast<i64>(r);
  });
  // Also into a float64 destination: the value carried after the cast is exactly To's value.
  if constexpr (!is_fp<To>) {
    host_array<double> out(N);
    poison(out);
    fusex::host::eval(out.view(S), e);
    check_values<double>(what + " stored to float64", out, N, [&](std::size_t i) {
      return static_cast<double>(wrap<To>(static_cast<i64>(cast_ref<To>(static_cast<double>(value_of(a[i]))))));
    });
  }
}

template <class From, class... To>
void check_casts_to(double lo, double hi) {
  (check_cast<From, To>(lo, hi), ...);
}

}  // namespace

TEMPLATE_TEST_CASE("cast<T> from every dtype to every dtype", "[ops][cast]", FXT_ALL_DTYPES) {
  using From = TestType;
  // Values every target can hold (truncation for integers, rounding for floating types).
  check_casts_to<From, FXT_ALL_DTYPES>(0, 100.75);
  // Negative values: integer targets truncate toward zero (floating sources) or wrap (integer
  // sources: -5 -> uint8 251). A negative floating value converted to uint8 is undefined in C++
  // and not tested.
  if constexpr (!std::is_same_v<From, bool> && !std::is_same_v<From, u8>) {
    if constexpr (is_fp<From>) check_casts_to<From, float, double, half, bfloat16, i8, i32, i64, bool>(-100.75, 0);
    else check_casts_to<From, FXT_ALL_DTYPES>(-100, 0);
  }
}

TEST_CASE("cast<T> of wider integers wraps", "[ops][cast]") {
  auto a = from_list<i32>({300, -129, 255, 256, 65536 + 7});
  check_expr("cast<int8>(int32)", fusex::cast<i8>(a.view({5})), {5},
             [&](std::size_t i) { return wrap<i8>(value_of(a[i])); });
  check_expr("cast<uint8>(int32)", fusex::cast<u8>(a.view({5})), {5},
             [&](std::size_t i) { return wrap<u8>(value_of(a[i])); });
  check_expr("cast<bool>(int32)", fusex::cast<bool>(a.view({5})), {5}, [](std::size_t) { return 1; });
  // The cast happens where written: cast<uint8>(x) + 1 computes in uint8.
  check_expr("cast<uint8>(x) + 1", fusex::cast<u8>(a.view({5})) + 1, {5},
             [&](std::size_t i) { return wrap<u8>(value_of(a[i])) + 1; });
}
