// Host tests for the foundation: fusex::dims (shapes and strides), numel, contiguous_strides,
// broadcast_shapes, normalize_axis, fusex::view (construction, validation, slice, transpose,
// permute, reshape, broadcast_to, expand_dims, squeeze), ranks 0 to max_rank, and the
// type-promotion rule of <fusex/core/dtype.hpp> as seen through promote_t and expression types.
#include <fusex/fusex.hpp>

#include "fusex_catch.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using fusex::bfloat16;
using fusex::dims;
using fusex::half;
using fusex::shape_t;
using fusex::strides_t;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

// --- dims, numel, contiguous_strides ---------------------------------------------------------------

TEST_CASE("dims: construction, access, printing, comparison", "[core][dims]") {
  const dims empty;
  CHECK(empty.rank() == 0);
  CHECK(empty.size() == 0);
  CHECK(empty.str() == "[]");
  CHECK(empty.begin() == empty.end());

  const dims d{16384, 4096};
  CHECK(d.rank() == 2);
  CHECK(d[0] == 16384);
  CHECK(d[1] == 4096);
  CHECK(d.str() == "[16384, 4096]");
  CHECK(dims{3}.str() == "[3]");

  CHECK(dims{2, 3} == dims{2, 3});
  CHECK(dims{2, 3} != dims{3, 2});
  CHECK(dims{2, 3} != dims{2, 3, 1});
  CHECK(dims{} == dims());

  const dims f = dims::filled(3, 7);
  CHECK(f == dims{7, 7, 7});
  CHECK(dims::filled(0, 7).rank() == 0);

  dims e{1, 2, 3};
  e.insert(0, 9);
  CHECK(e == dims{9, 1, 2, 3});
  e.insert(4, 8);
  CHECK(e == dims{9, 1, 2, 3, 8});
  e.insert(2, 5);
  CHECK(e == dims{9, 1, 5, 2, 3, 8});
  e.erase(0);
  CHECK(e == dims{1, 5, 2, 3, 8});
  e.erase(4);
  CHECK(e == dims{1, 5, 2, 3});
  e.erase(1);
  CHECK(e == dims{1, 2, 3});
  e.push_back(4);
  CHECK(e == dims{1, 2, 3, 4});
}

TEST_CASE("dims: shapes written in any integer type, mixed included, without narrowing errors", "[core][dims]") {
  const std::size_t rows = 3, cols = 4;
  const unsigned u = 5;
  const long long ll = 6;
  const short sh = 7;
  float buf[8] = {};
  CHECK(fusex::make_view(buf, {rows, cols}).shape() == shape_t{3, 4});  // README's snippet
  CHECK(fusex::make_view(buf, {rows, 2}).shape() == shape_t{3, 2});     // mixed types
  CHECK(shape_t{u, ll, sh} == shape_t{5, 6, 7});
  CHECK(shape_t{rows}.rank() == 1);
  CHECK(shape_t{rows}[0] == 3);
  CHECK(strides_t{std::int64_t{-1}, 2}[0] == -1);  // strides may be negative
  CHECK_THROWS_AS(shape_t{std::size_t(-1)}, fusex::shape_error);
  CHECK(thrown_message<fusex::shape_error>([&] {
          (void)shape_t{rows, std::uint64_t{1} << 63};
        }).find("does not fit in int64") != std::string::npos);
  static_assert(!std::is_constructible_v<shape_t, bool, bool>, "bool is not an extent");
}

TEST_CASE("dims: rank is bounded by fusex::max_rank", "[core][dims]") {
  STATIC_REQUIRE(fusex::max_rank == 8);
  const dims eight{1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(eight.rank() == 8);
  CHECK(eight.str() == "[1, 2, 3, 4, 5, 6, 7, 8]");

  const std::string m = thrown_message<fusex::shape_error>([] { dims nine{1, 2, 3, 4, 5, 6, 7, 8, 9}; });
  CHECK(contains(m, "rank 9"));
  CHECK(contains(m, "max_rank"));
  // The ranks are run-time values here: with a constant out-of-range rank, g++ -O3 warns about the
  // loop past the array in dims::filled / push_back (it does not see that check_rank throws first).
  volatile int nine_v = 9, minus_one_v = -1;
  const int nine = nine_v, minus_one = minus_one_v;
  CHECK_THROWS_AS(dims::filled(nine, 1), fusex::shape_error);
  CHECK_THROWS_AS(dims::filled(minus_one, 1), fusex::shape_error);
  dims full = dims::filled(nine - 1, 1);
  CHECK_THROWS_AS(full.push_back(nine), fusex::shape_error);
  CHECK_THROWS_AS(full.insert(0, nine), fusex::shape_error);
  CHECK(full.rank() == 8);
  // shape_error is a fusex::error.
  CHECK_THROWS_AS(dims::filled(nine, 1), fusex::error);
}

TEST_CASE("numel", "[core][dims]") {
  CHECK(fusex::numel(shape_t{}) == 1);  // rank 0: one element
  CHECK(fusex::numel(shape_t{5}) == 5);
  CHECK(fusex::numel(shape_t{3, 4}) == 12);
  CHECK(fusex::numel(shape_t{2, 3, 4, 5}) == 120);
  CHECK(fusex::numel(shape_t{3, 0, 4}) == 0);
  CHECK(fusex::numel(shape_t{0}) == 0);
  CHECK(fusex::numel(shape_t{1, 1, 1, 1, 1, 1, 1, 1}) == 1);
  CHECK(fusex::numel(shape_t{2, 2, 2, 2, 2, 2, 2, 2}) == 256);
  CHECK(fusex::numel(shape_t{16384, 4096, 64}) == std::int64_t{16384} * 4096 * 64);  // beyond 32 bits
}

TEST_CASE("contiguous_strides", "[core][dims]") {
  CHECK(fusex::contiguous_strides(shape_t{}) == strides_t{});
  CHECK(fusex::contiguous_strides(shape_t{7}) == strides_t{1});
  CHECK(fusex::contiguous_strides(shape_t{3, 4}) == strides_t{4, 1});
  CHECK(fusex::contiguous_strides(shape_t{2, 3, 4}) == strides_t{12, 4, 1});
  CHECK(fusex::contiguous_strides(shape_t{2, 1, 4}) == strides_t{4, 4, 1});
  CHECK(fusex::contiguous_strides(shape_t{1, 2, 1, 2, 1, 2, 1, 2}) == strides_t{16, 8, 8, 4, 4, 2, 2, 1});
}

// --- broadcasting ----------------------------------------------------------------------------------

TEST_CASE("broadcast_shapes follows NumPy rules", "[core][broadcast]") {
  using fusex::broadcast_shapes;
  CHECK(broadcast_shapes(shape_t{3, 4}, shape_t{3, 4}) == shape_t{3, 4});
  CHECK(broadcast_shapes(shape_t{3, 4}, shape_t{4}) == shape_t{3, 4});
  CHECK(broadcast_shapes(shape_t{4}, shape_t{3, 4}) == shape_t{3, 4});
  CHECK(broadcast_shapes(shape_t{3, 1}, shape_t{1, 4}) == shape_t{3, 4});
  CHECK(broadcast_shapes(shape_t{}, shape_t{2, 3}) == shape_t{2, 3});
  CHECK(broadcast_shapes(shape_t{2, 3}, shape_t{}) == shape_t{2, 3});
  CHECK(broadcast_shapes(shape_t{}, shape_t{}) == shape_t{});
  CHECK(broadcast_shapes(shape_t{2, 1, 4}, shape_t{3, 1}) == shape_t{2, 3, 4});
  CHECK(broadcast_shapes(shape_t{5, 1, 1, 1, 1, 1, 1, 2}, shape_t{3, 1, 1, 1, 1, 4, 1}) ==
        shape_t{5, 3, 1, 1, 1, 1, 4, 2});
  // Zero-size dimensions broadcast like any other extent: against 1 or themselves.
  CHECK(broadcast_shapes(shape_t{0}, shape_t{1}) == shape_t{0});
  CHECK(broadcast_shapes(shape_t{1}, shape_t{0}) == shape_t{0});
  CHECK(broadcast_shapes(shape_t{0, 4}, shape_t{4}) == shape_t{0, 4});
  CHECK_THROWS_AS(broadcast_shapes(shape_t{0}, shape_t{3}), fusex::shape_error);
}

TEST_CASE("broadcast_shapes names both shapes when they do not broadcast", "[core][broadcast][errors]") {
  const std::string m = thrown_message<fusex::shape_error>([] { fusex::broadcast_shapes(shape_t{3, 4}, shape_t{5}); });
  INFO(m);
  CHECK(contains(m, "[3, 4]"));
  CHECK(contains(m, "[5]"));
  CHECK(contains(m, "4 vs 5"));

  const std::string m2 = thrown_message<fusex::shape_error>([] {
    fusex::broadcast_shapes(shape_t{2, 3}, shape_t{4, 3}, "add");
  });
  INFO(m2);
  CHECK(contains(m2, "[2, 3]"));
  CHECK(contains(m2, "[4, 3]"));
  CHECK(contains(m2, "add"));

  CHECK_THROWS_AS(fusex::broadcast_shapes(shape_t{2, 1}, shape_t{8, 4, 3}), fusex::shape_error);
}

TEST_CASE("broadcasts_to", "[core][broadcast]") {
  using fusex::broadcasts_to;
  CHECK(broadcasts_to(shape_t{4}, shape_t{3, 4}));
  CHECK(broadcasts_to(shape_t{1, 4}, shape_t{3, 4}));
  CHECK(broadcasts_to(shape_t{3, 1}, shape_t{3, 4}));
  CHECK(broadcasts_to(shape_t{}, shape_t{3, 4}));
  CHECK(broadcasts_to(shape_t{3, 4}, shape_t{3, 4}));
  CHECK(broadcasts_to(shape_t{1}, shape_t{0}));
  CHECK_FALSE(broadcasts_to(shape_t{3, 4}, shape_t{4}));  // the target does not grow
  CHECK_FALSE(broadcasts_to(shape_t{3, 4}, shape_t{1, 4}));
  CHECK_FALSE(broadcasts_to(shape_t{5}, shape_t{3, 4}));
  CHECK_FALSE(broadcasts_to(shape_t{0}, shape_t{3}));
}

TEST_CASE("normalize_axis", "[core][dims]") {
  using fusex::normalize_axis;
  CHECK(normalize_axis(0, 3) == 0);
  CHECK(normalize_axis(2, 3) == 2);
  CHECK(normalize_axis(-1, 3) == 2);
  CHECK(normalize_axis(-3, 3) == 0);
  CHECK(normalize_axis(0, 0) == 0);  // a rank-0 view accepts axis 0
  CHECK(normalize_axis(7, 8) == 7);
  CHECK(normalize_axis(-8, 8) == 0);

  const std::string m = thrown_message<fusex::shape_error>([] { normalize_axis(3, 3); });
  INFO(m);
  CHECK(contains(m, "3"));
  CHECK(contains(m, "rank 3"));
  const std::string m2 = thrown_message<fusex::shape_error>([] { normalize_axis(-4, 3, "squeeze axis"); });
  INFO(m2);
  CHECK(contains(m2, "squeeze axis -4"));
  CHECK_THROWS_AS(normalize_axis(1, 0), fusex::shape_error);
  CHECK_THROWS_AS(normalize_axis(8, 8), fusex::shape_error);
}

// --- view construction -----------------------------------------------------------------------------

TEST_CASE("view: contiguous construction from a pointer and extents", "[core][view]") {
  std::array<float, 12> buf{};
  auto v = fusex::make_view(buf.data(), {3, 4});
  STATIC_REQUIRE(std::is_same_v<decltype(v), fusex::view<float>>);
  STATIC_REQUIRE(std::is_same_v<decltype(v)::value_type, float>);
  STATIC_REQUIRE(std::is_same_v<fusex::tensor_view<float>, fusex::view<float>>);
  CHECK(v.data() == buf.data());
  CHECK(v.shape() == shape_t{3, 4});
  CHECK(v.strides() == strides_t{4, 1});
  CHECK(v.rank() == 2);
  CHECK(v.size() == 12);
  CHECK_FALSE(v.empty());
  CHECK(v.is_contiguous());
  CHECK(v.extent(0) == 3);
  CHECK(v.extent(-1) == 4);
  CHECK(v.stride(0) == 4);
  CHECK(v.stride(-1) == 1);
  CHECK_THROWS_AS(v.extent(2), fusex::shape_error);
  CHECK_THROWS_AS(v.stride(-3), fusex::shape_error);

  // Explicit strides, including 0 (broadcast) and non-unit inner strides.
  auto s = fusex::make_view(buf.data(), {3, 4}, {0, 2});
  CHECK(s.shape() == shape_t{3, 4});
  CHECK(s.strides() == strides_t{0, 2});
  CHECK_FALSE(s.is_contiguous());
  auto col = fusex::make_view(buf.data() + 1, {3}, {4});
  CHECK(col.data() == buf.data() + 1);
  CHECK_FALSE(col.is_contiguous());

  // Size-1 dimensions may have any stride and still be contiguous.
  CHECK(fusex::make_view(buf.data(), {3, 1, 4}, {4, 99, 1}).is_contiguous());

  // A const view, and the implicit conversion from a mutable view.
  const float* cp = buf.data();
  auto cv = fusex::make_view(cp, {12});
  STATIC_REQUIRE(std::is_same_v<decltype(cv), fusex::view<const float>>);
  STATIC_REQUIRE(std::is_same_v<decltype(cv)::value_type, float>);
  fusex::view<const float> converted = v;
  CHECK(converted.data() == buf.data());
  CHECK(converted.shape() == v.shape());
  CHECK(converted.strides() == v.strides());
  STATIC_REQUIRE_FALSE(std::is_convertible_v<fusex::view<const float>, fusex::view<float>>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<fusex::view<float>, fusex::view<double>>);

  // The default view is empty.
  fusex::view<int> d;
  CHECK(d.data() == nullptr);
  CHECK(d.empty());
  CHECK(d.size() == 0);
  CHECK(d.shape() == shape_t{0});
}

TEST_CASE("view: construction from a container with .data() and .size()", "[core][view]") {
  std::vector<float> vec(10, 1.0f);
  auto v = fusex::make_view(vec);
  STATIC_REQUIRE(std::is_same_v<decltype(v), fusex::view<float>>);
  CHECK(v.data() == vec.data());
  CHECK(v.shape() == shape_t{10});
  CHECK(v.strides() == strides_t{1});

  const std::vector<double> cvec(5, 2.0);
  auto cv = fusex::make_view(cvec);
  STATIC_REQUIRE(std::is_same_v<decltype(cv), fusex::view<const double>>);
  CHECK(cv.data() == cvec.data());
  CHECK(cv.shape() == shape_t{5});

  std::array<std::int32_t, 6> arr{};
  fusex::view av(arr);
  STATIC_REQUIRE(std::is_same_v<decltype(av), fusex::view<std::int32_t>>);
  CHECK(av.data() == arr.data());
  CHECK(av.shape() == shape_t{6});

  std::vector<fusex::half> hv(3);
  CHECK(fusex::make_view(hv).shape() == shape_t{3});

  // An empty container gives an empty view (its data() may be null).
  std::vector<float> none;
  auto ev = fusex::make_view(none);
  CHECK(ev.empty());
  CHECK(ev.shape() == shape_t{0});
}

TEST_CASE("view: validation of null pointers, extents and strides", "[core][view][errors]") {
  float* null = nullptr;
  const std::string m = thrown_message<fusex::invalid_argument>([&] { fusex::make_view(null, {3, 4}); });
  INFO(m);
  CHECK(contains(m, "null"));
  CHECK(contains(m, "[3, 4]"));
  CHECK_THROWS_AS(fusex::make_view(null, {3, 4}), fusex::error);
  CHECK_THROWS_AS(fusex::make_view(null, {}), fusex::invalid_argument);  // rank 0 holds one element
  CHECK_THROWS_AS(fusex::make_view(null, {5}, {1}), fusex::invalid_argument);

  // A null pointer with zero elements is valid.
  CHECK_NOTHROW(fusex::make_view(null, {0}));
  CHECK_NOTHROW(fusex::make_view(null, {3, 0, 4}));
  CHECK_NOTHROW(fusex::make_view(null, {0, 2}, {2, 1}));
  auto e = fusex::make_view(null, {3, 0, 4});
  CHECK(e.empty());
  CHECK(e.size() == 0);

  float buf[8] = {};
  const std::string ms = thrown_message<fusex::shape_error>([&] { fusex::make_view(buf, {2, 4}, {4, -1}); });
  INFO(ms);
  CHECK(contains(ms, "negative stride"));
  CHECK(contains(ms, "[2, 4]"));
  const std::string me = thrown_message<fusex::shape_error>([&] { fusex::make_view(buf, {2, -4}); });
  INFO(me);
  CHECK(contains(me, "negative extent"));
  CHECK(contains(me, "[2, -4]"));
  // One stride per dimension.
  const std::string mr = thrown_message<fusex::shape_error>([&] { fusex::make_view(buf, {2, 4}, {1}); });
  INFO(mr);
  CHECK(contains(mr, "[2, 4]"));
}

// --- view transformations --------------------------------------------------------------------------

TEST_CASE("view::slice", "[core][view]") {
  std::array<float, 15> buf{};
  float* p = buf.data();
  auto v = fusex::make_view(p, {3, 5});

  auto a = v.slice(1, 1, 4);
  CHECK(a.shape() == shape_t{3, 3});
  CHECK(a.strides() == strides_t{5, 1});
  CHECK(a.data() == p + 1);

  auto b = v.slice(1, 0, 5, 2);  // columns 0, 2, 4
  CHECK(b.shape() == shape_t{3, 3});
  CHECK(b.strides() == strides_t{5, 2});
  CHECK(b.data() == p);

  auto c = v.slice(1, 1, 5, 3);  // columns 1, 4
  CHECK(c.shape() == shape_t{3, 2});
  CHECK(c.strides() == strides_t{5, 3});
  CHECK(c.data() == p + 1);

  auto d = v.slice(0, -2, 3);  // rows 1, 2 (negative begin counts from the end)
  CHECK(d.shape() == shape_t{2, 5});
  CHECK(d.strides() == strides_t{5, 1});
  CHECK(d.data() == p + 5);

  auto e = v.slice(-1, -3, -1);  // columns 2, 3
  CHECK(e.shape() == shape_t{3, 2});
  CHECK(e.data() == p + 2);

  auto f = v.slice(0, 1, 3).slice(1, 1, 5, 2);  // slices compose
  CHECK(f.shape() == shape_t{2, 2});
  CHECK(f.strides() == strides_t{5, 2});
  CHECK(f.data() == p + 6);

  auto empty = v.slice(1, 2, 2);
  CHECK(empty.shape() == shape_t{3, 0});
  CHECK(empty.empty());

  const std::string m = thrown_message<fusex::shape_error>([&] { v.slice(1, 0, 6); });
  INFO(m);
  CHECK(contains(m, "[3, 5]"));
  CHECK_THROWS_AS(v.slice(1, 3, 2), fusex::shape_error);
  CHECK_THROWS_AS(v.slice(1, 0, 5, 0), fusex::shape_error);
  CHECK_THROWS_AS(v.slice(1, -6, 5), fusex::shape_error);
  CHECK_THROWS_AS(v.slice(2, 0, 1), fusex::shape_error);
}

TEST_CASE("view::transpose, t and permute", "[core][view]") {
  std::array<float, 24> buf{};
  float* p = buf.data();
  auto v = fusex::make_view(p, {2, 3, 4});

  auto t = v.transpose(0, 2);
  CHECK(t.shape() == shape_t{4, 3, 2});
  CHECK(t.strides() == strides_t{1, 4, 12});
  CHECK(t.data() == p);
  CHECK_FALSE(t.is_contiguous());
  CHECK(v.transpose(-1, 0).shape() == shape_t{4, 3, 2});
  CHECK(v.transpose(1, 1).strides() == v.strides());

  auto m = fusex::make_view(p, {4, 6});
  CHECK(m.t().shape() == shape_t{6, 4});
  CHECK(m.t().strides() == strides_t{1, 6});
  CHECK(m.t().t().strides() == m.strides());
  const std::string mt = thrown_message<fusex::shape_error>([&] { v.t(); });
  INFO(mt);
  CHECK(contains(mt, "[2, 3, 4]"));

  auto q = v.permute({2, 0, 1});
  CHECK(q.shape() == shape_t{4, 2, 3});
  CHECK(q.strides() == strides_t{1, 12, 4});
  CHECK(q.data() == p);
  CHECK(v.permute({-1, 0, 1}).shape() == shape_t{4, 2, 3});
  CHECK(v.permute({0, 1, 2}).strides() == v.strides());
  CHECK_THROWS_AS(v.permute({0, 1}), fusex::shape_error);
  CHECK_THROWS_AS(v.permute({0, 1, 1}), fusex::shape_error);
  CHECK_THROWS_AS(v.permute({0, 1, 3}), fusex::shape_error);
  CHECK_THROWS_AS(v.transpose(0, 3), fusex::shape_error);
}

TEST_CASE("view::reshape of contiguous data", "[core][view]") {
  std::array<float, 24> buf{};
  float* p = buf.data();
  auto v = fusex::make_view(p, {2, 3, 4});

  auto r = v.reshape({6, 4});
  CHECK(r.shape() == shape_t{6, 4});
  CHECK(r.strides() == strides_t{4, 1});
  CHECK(r.data() == p);
  CHECK(v.reshape({6, -1}).shape() == shape_t{6, 4});
  CHECK(v.reshape({-1}).shape() == shape_t{24});
  CHECK(v.reshape({4, -1, 2}).shape() == shape_t{4, 3, 2});
  CHECK(v.reshape({1, 24, 1}).strides() == strides_t{24, 1, 1});
  CHECK(v.slice(0, 1, 2).reshape({12}).data() == p + 12);  // a contiguous slice
  // One element to rank 0 and back.
  auto one = fusex::make_view(p, {1, 1});
  CHECK(one.reshape({}).rank() == 0);
  CHECK(one.reshape({}).reshape({1}).shape() == shape_t{1});

  const std::string m = thrown_message<fusex::shape_error>([&] { v.reshape({5, 5}); });
  INFO(m);
  CHECK(contains(m, "[2, 3, 4]"));
  CHECK(contains(m, "[5, 5]"));
  CHECK_THROWS_AS(v.reshape({-1, -1}), fusex::shape_error);
  CHECK_THROWS_AS(v.reshape({5, -1}), fusex::shape_error);  // 24 is not a multiple of 5
  CHECK_THROWS_AS(v.reshape({-2, 12}), fusex::shape_error);

  // A non-contiguous view cannot be reshaped.
  const std::string mc = thrown_message<fusex::shape_error>([&] { v.transpose(0, 1).reshape({24}); });
  INFO(mc);
  CHECK(contains(mc, "contiguous"));
  CHECK(contains(mc, "[3, 2, 4]"));
  CHECK_THROWS_AS(v.slice(2, 0, 4, 2).reshape({12}), fusex::shape_error);
}

TEST_CASE("view::broadcast_to", "[core][view]") {
  std::array<float, 12> buf{};
  float* p = buf.data();
  auto col = fusex::make_view(p, {3, 1});

  auto b = col.broadcast_to({2, 3, 4});
  CHECK(b.shape() == shape_t{2, 3, 4});
  CHECK(b.strides() == strides_t{0, 1, 0});
  CHECK(b.data() == p);

  auto row = fusex::make_view(p, {4});
  CHECK(row.broadcast_to({3, 4}).strides() == strides_t{0, 1});
  auto scalar = fusex::make_view(p, {});
  CHECK(scalar.broadcast_to({2, 2}).strides() == strides_t{0, 0});
  CHECK(fusex::make_view(p, {3, 4}).broadcast_to({3, 4}).strides() == strides_t{4, 1});
  // A transposed view keeps its strides where extents match.
  CHECK(fusex::make_view(p, {4, 3}).t().broadcast_to({2, 3, 4}).strides() == strides_t{0, 1, 3});

  const std::string m = thrown_message<fusex::shape_error>([&] { fusex::make_view(p, {3, 2}).broadcast_to({3, 4}); });
  INFO(m);
  CHECK(contains(m, "[3, 2]"));
  CHECK(contains(m, "[3, 4]"));
  CHECK_THROWS_AS(row.broadcast_to({4, 1}), fusex::shape_error);
  CHECK_THROWS_AS(fusex::make_view(p, {3, 4}).broadcast_to({4}), fusex::shape_error);
}

TEST_CASE("view::expand_dims and squeeze", "[core][view]") {
  std::array<float, 12> buf{};
  float* p = buf.data();
  auto v = fusex::make_view(p, {3, 4});

  auto a = v.expand_dims(0);
  CHECK(a.shape() == shape_t{1, 3, 4});
  CHECK(a.strides() == strides_t{12, 4, 1});
  CHECK(a.data() == p);
  auto b = v.expand_dims(1);
  CHECK(b.shape() == shape_t{3, 1, 4});
  CHECK(b.strides() == strides_t{4, 4, 1});
  auto c = v.expand_dims(-1);  // negative axes count from the end of the result
  CHECK(c.shape() == shape_t{3, 4, 1});
  CHECK(c.strides() == strides_t{4, 1, 1});
  CHECK(v.expand_dims(2).shape() == shape_t{3, 4, 1});
  CHECK(v.expand_dims(-3).shape() == shape_t{1, 3, 4});
  CHECK(a.is_contiguous());
  CHECK(b.is_contiguous());
  CHECK(c.is_contiguous());
  CHECK_THROWS_AS(v.expand_dims(3), fusex::shape_error);
  CHECK_THROWS_AS(v.expand_dims(-4), fusex::shape_error);

  CHECK(b.squeeze(1).shape() == shape_t{3, 4});
  CHECK(b.squeeze(1).strides() == strides_t{4, 1});
  CHECK(b.squeeze(-2).shape() == shape_t{3, 4});
  CHECK(a.squeeze(0).data() == p);
  CHECK(c.squeeze(2).shape() == shape_t{3, 4});
  const std::string m = thrown_message<fusex::shape_error>([&] { b.squeeze(0); });
  INFO(m);
  CHECK(contains(m, "[3, 1, 4]"));
  CHECK_THROWS_AS(b.squeeze(3), fusex::shape_error);

  // expand_dims of a strided view keeps the view's element order.
  auto t = v.t();  // [4, 3] strides [1, 4]
  CHECK(t.expand_dims(1).shape() == shape_t{4, 1, 3});
  CHECK(t.expand_dims(1).stride(0) == 1);  // the size-1 dimension's stride is immaterial
  CHECK(t.expand_dims(1).stride(2) == 4);
  CHECK(t.expand_dims(1).squeeze(1).strides() == t.strides());
}

TEST_CASE("view: rank 0", "[core][view][rank]") {
  float x = 3.0f;
  auto s = fusex::make_view(&x, {});
  CHECK(s.rank() == 0);
  CHECK(s.size() == 1);
  CHECK_FALSE(s.empty());
  CHECK(s.shape() == shape_t{});
  CHECK(s.strides() == strides_t{});
  CHECK(s.shape().str() == "[]");
  CHECK(s.is_contiguous());
  CHECK(s.data() == &x);
  CHECK(s.expand_dims(0).shape() == shape_t{1});
  CHECK(s.expand_dims(-1).shape() == shape_t{1});
  CHECK(s.expand_dims(0).squeeze(0).rank() == 0);
  CHECK(s.reshape({1, 1}).shape() == shape_t{1, 1});
  CHECK(s.broadcast_to({2, 3}).shape() == shape_t{2, 3});
}

TEST_CASE("view: rank 8 (fusex::max_rank)", "[core][view][rank]") {
  std::vector<double> buf(256);
  auto v = fusex::make_view(buf.data(), {2, 2, 2, 2, 2, 2, 2, 2});
  CHECK(v.rank() == 8);
  CHECK(v.size() == 256);
  CHECK(v.strides() == strides_t{128, 64, 32, 16, 8, 4, 2, 1});
  CHECK(v.is_contiguous());

  auto p = v.permute({7, 6, 5, 4, 3, 2, 1, 0});
  CHECK(p.strides() == strides_t{1, 2, 4, 8, 16, 32, 64, 128});
  CHECK_FALSE(p.is_contiguous());
  auto s = v.slice(3, 1, 2).slice(7, 0, 2, 2);
  CHECK(s.shape() == shape_t{2, 2, 2, 1, 2, 2, 2, 1});
  CHECK(s.data() == buf.data() + 16);
  CHECK(s.strides() == strides_t{128, 64, 32, 16, 8, 4, 2, 2});
  CHECK(s.squeeze(3).rank() == 7);
  CHECK(v.reshape({4, 4, 4, 4}).shape() == shape_t{4, 4, 4, 4});
  CHECK(fusex::make_view(buf.data(), {256}).reshape({2, 2, 2, 2, 2, 2, 2, -1}).rank() == 8);
  CHECK(fusex::make_view(buf.data(), {2, 2}).broadcast_to({3, 3, 3, 3, 3, 3, 2, 2}).strides() ==
        strides_t{0, 0, 0, 0, 0, 0, 2, 1});

  // Nothing goes beyond rank 8.
  CHECK_THROWS_AS(v.expand_dims(0), fusex::shape_error);
  CHECK_THROWS_AS(fusex::make_view(buf.data(), {1, 1, 1, 1, 1, 1, 1, 1, 1}), fusex::shape_error);
  CHECK_THROWS_AS(fusex::make_view(buf.data(), {256}).reshape({2, 2, 2, 2, 2, 2, 2, 1, 2}), fusex::shape_error);
}

// --- element types and promotion -------------------------------------------------------------------

namespace {
template <class T>
using V = fusex::view<T>;
template <class E>
using value_t = typename std::decay_t<E>::value_type;
template <class A, class B>
inline constexpr bool same = std::is_same_v<A, B>;
}  // namespace

TEST_CASE("dtype traits and names", "[core][dtype]") {
  STATIC_REQUIRE(fusex::is_dtype_v<float>);
  STATIC_REQUIRE(fusex::is_dtype_v<double>);
  STATIC_REQUIRE(fusex::is_dtype_v<half>);
  STATIC_REQUIRE(fusex::is_dtype_v<bfloat16>);
  STATIC_REQUIRE(fusex::is_dtype_v<std::int8_t>);
  STATIC_REQUIRE(fusex::is_dtype_v<std::uint8_t>);
  STATIC_REQUIRE(fusex::is_dtype_v<std::int32_t>);
  STATIC_REQUIRE(fusex::is_dtype_v<std::int64_t>);
  STATIC_REQUIRE(fusex::is_dtype_v<bool>);
  STATIC_REQUIRE_FALSE(fusex::is_dtype_v<std::int16_t>);
  STATIC_REQUIRE_FALSE(fusex::is_dtype_v<std::uint32_t>);
  STATIC_REQUIRE_FALSE(fusex::is_dtype_v<std::uint64_t>);
  STATIC_REQUIRE_FALSE(fusex::is_dtype_v<long double>);

  STATIC_REQUIRE(same<fusex::half, __half>);
  STATIC_REQUIRE(same<fusex::bfloat16, __nv_bfloat16>);

  STATIC_REQUIRE(std::string_view(fusex::dtype_name<float>()) == "float32");
  STATIC_REQUIRE(std::string_view(fusex::dtype_name<double>()) == "float64");
  STATIC_REQUIRE(std::string_view(fusex::dtype_name<half>()) == "float16");
  STATIC_REQUIRE(std::string_view(fusex::dtype_name<bfloat16>()) == "bfloat16");
  STATIC_REQUIRE(std::string_view(fusex::dtype_name<std::int8_t>()) == "int8");
  STATIC_REQUIRE(std::string_view(fusex::dtype_name<std::uint8_t>()) == "uint8");
  STATIC_REQUIRE(std::string_view(fusex::dtype_name<std::int32_t>()) == "int32");
  STATIC_REQUIRE(std::string_view(fusex::dtype_name<std::int64_t>()) == "int64");
  STATIC_REQUIRE(std::string_view(fusex::dtype_name<bool>()) == "bool");
  // Plans compare dtypes as values: distinct types, distinct ids; other types are `user`.
  STATIC_REQUIRE(fusex::dtype_of<half>() == fusex::dtype_id::float16);
  STATIC_REQUIRE(fusex::dtype_of<bfloat16>() == fusex::dtype_id::bfloat16);
  STATIC_REQUIRE(fusex::dtype_of<std::uint8_t>() != fusex::dtype_of<std::int8_t>());
  STATIC_REQUIRE(fusex::dtype_of<bool>() == fusex::dtype_id::boolean);
  STATIC_REQUIRE(fusex::dtype_of<long double>() == fusex::dtype_id::user);
  STATIC_REQUIRE(std::string_view(fusex::dtype_name(fusex::dtype_id::int64)) == "int64");
  STATIC_REQUIRE(std::string_view(fusex::dtype_name<long double>()) == "user type");

  // half and bfloat16 are computed in float; everything else in itself.
  STATIC_REQUIRE(same<fusex::compute_t<half>, float>);
  STATIC_REQUIRE(same<fusex::compute_t<bfloat16>, float>);
  STATIC_REQUIRE(same<fusex::compute_t<float>, float>);
  STATIC_REQUIRE(same<fusex::compute_t<double>, double>);
  STATIC_REQUIRE(same<fusex::compute_t<std::int8_t>, std::int8_t>);
  STATIC_REQUIRE(same<fusex::compute_t<bool>, bool>);
}

TEST_CASE("promote_t: the documented promotion rule", "[core][dtype][promotion]") {
  using fusex::promote_t;
  using i8 = std::int8_t;
  using u8 = std::uint8_t;
  using i32 = std::int32_t;
  using i64 = std::int64_t;

  // Same type: itself.
  STATIC_REQUIRE(same<promote_t<float, float>, float>);
  STATIC_REQUIRE(same<promote_t<half, half>, half>);
  STATIC_REQUIRE(same<promote_t<bool, bool>, bool>);
  STATIC_REQUIRE(same<promote_t<u8, u8>, u8>);

  // Different categories (bool < integer < floating): the higher category wins, whatever the width.
  STATIC_REQUIRE(same<promote_t<i32, half>, half>);
  STATIC_REQUIRE(same<promote_t<half, i32>, half>);
  STATIC_REQUIRE(same<promote_t<i64, half>, half>);
  STATIC_REQUIRE(same<promote_t<i64, bfloat16>, bfloat16>);
  STATIC_REQUIRE(same<promote_t<i64, float>, float>);
  STATIC_REQUIRE(same<promote_t<i8, double>, double>);
  STATIC_REQUIRE(same<promote_t<bool, i8>, i8>);
  STATIC_REQUIRE(same<promote_t<u8, bool>, u8>);
  STATIC_REQUIRE(same<promote_t<bool, i64>, i64>);
  STATIC_REQUIRE(same<promote_t<bool, half>, half>);
  STATIC_REQUIRE(same<promote_t<float, bool>, float>);

  // Two floating types: float16 + bfloat16 -> float32, otherwise the wider one.
  STATIC_REQUIRE(same<promote_t<half, bfloat16>, float>);
  STATIC_REQUIRE(same<promote_t<bfloat16, half>, float>);
  STATIC_REQUIRE(same<promote_t<half, float>, float>);
  STATIC_REQUIRE(same<promote_t<float, bfloat16>, float>);
  STATIC_REQUIRE(same<promote_t<half, double>, double>);
  STATIC_REQUIRE(same<promote_t<float, double>, double>);
  STATIC_REQUIRE(same<promote_t<double, bfloat16>, double>);

  // Two integer types: the wider one; int8 + uint8 -> int32; uint8 + wider signed -> that type.
  STATIC_REQUIRE(same<promote_t<i8, u8>, i32>);
  STATIC_REQUIRE(same<promote_t<u8, i8>, i32>);
  STATIC_REQUIRE(same<promote_t<i8, i32>, i32>);
  STATIC_REQUIRE(same<promote_t<i32, i64>, i64>);
  STATIC_REQUIRE(same<promote_t<i64, i8>, i64>);
  STATIC_REQUIRE(same<promote_t<u8, i32>, i32>);
  STATIC_REQUIRE(same<promote_t<i64, u8>, i64>);

  // Several types, left to right.
  STATIC_REQUIRE(same<fusex::promote_all_t<i8, u8, half>, half>);
  STATIC_REQUIRE(same<fusex::promote_all_t<half, bfloat16, double>, double>);
  STATIC_REQUIRE(same<fusex::promote_all_t<bool, bool, i8>, i8>);
  STATIC_REQUIRE(same<fusex::promote_all_t<u8>, u8>);

  // Math functions of integers and bool compute in float32.
  STATIC_REQUIRE(same<fusex::float_of_t<i32>, float>);
  STATIC_REQUIRE(same<fusex::float_of_t<i64>, float>);
  STATIC_REQUIRE(same<fusex::float_of_t<bool>, float>);
  STATIC_REQUIRE(same<fusex::float_of_t<half>, half>);
  STATIC_REQUIRE(same<fusex::float_of_t<double>, double>);
}

TEST_CASE("expression value types follow the promotion rule", "[core][dtype][promotion]") {
  using i8 = std::int8_t;
  using u8 = std::uint8_t;
  using i32 = std::int32_t;
  using i64 = std::int64_t;
  const V<half> xh;
  const V<bfloat16> xb;
  const V<float> xf;
  const V<double> xd;
  const V<i8> xi8;
  const V<u8> xu8;
  const V<i32> xi32;
  const V<i64> xi64;
  const V<bool> xbool;

  // Tensor with tensor: promote_t.
  STATIC_REQUIRE(same<value_t<decltype(xi8 + xu8)>, i32>);
  STATIC_REQUIRE(same<value_t<decltype(xu8 + xi8)>, i32>);
  STATIC_REQUIRE(same<value_t<decltype(xh + xb)>, float>);
  STATIC_REQUIRE(same<value_t<decltype(xh * xf)>, float>);
  STATIC_REQUIRE(same<value_t<decltype(xi32 * xh)>, half>);
  STATIC_REQUIRE(same<value_t<decltype(xi64 - xb)>, bfloat16>);
  STATIC_REQUIRE(same<value_t<decltype(xf / xd)>, double>);
  STATIC_REQUIRE(same<value_t<decltype(xbool + xi8)>, i8>);
  STATIC_REQUIRE(same<value_t<decltype(xu8 % xi64)>, i64>);
  STATIC_REQUIRE(same<value_t<decltype(xbool + xbool)>, bool>);

  // Weak scalars take the tensor's type unless their category is higher.
  STATIC_REQUIRE(same<value_t<decltype(xh * 2.0)>, half>);
  STATIC_REQUIRE(same<value_t<decltype(2.0 * xh)>, half>);
  STATIC_REQUIRE(same<value_t<decltype(xb + 1.5f)>, bfloat16>);
  STATIC_REQUIRE(same<value_t<decltype(xh + 1)>, half>);
  STATIC_REQUIRE(same<value_t<decltype(xf * 2.0)>, float>);
  STATIC_REQUIRE(same<value_t<decltype(xd * 2.0f)>, double>);
  STATIC_REQUIRE(same<value_t<decltype(xi8 + 1)>, i8>);
  STATIC_REQUIRE(same<value_t<decltype(xu8 + 1)>, u8>);
  STATIC_REQUIRE(same<value_t<decltype(xi32 + i64{1})>, i32>);
  STATIC_REQUIRE(same<value_t<decltype(xi64 + 1)>, i64>);
  STATIC_REQUIRE(same<value_t<decltype(xi32 + true)>, i32>);
  STATIC_REQUIRE(same<value_t<decltype(xbool + true)>, bool>);
  // A floating scalar with an integer or bool tensor gives float32.
  STATIC_REQUIRE(same<value_t<decltype(xi32 + 1.5)>, float>);
  STATIC_REQUIRE(same<value_t<decltype(xi64 * 0.5)>, float>);
  STATIC_REQUIRE(same<value_t<decltype(xi8 * 0.5f)>, float>);
  STATIC_REQUIRE(same<value_t<decltype(xbool * 0.5)>, float>);
  // An integer scalar with a bool tensor gives int64.
  STATIC_REQUIRE(same<value_t<decltype(xbool + 1)>, i64>);
  STATIC_REQUIRE(same<value_t<decltype(3 * xbool)>, i64>);
  // The scalar's type is decided against the promoted type of all tensor operands.
  STATIC_REQUIRE(same<value_t<decltype(fusex::clamp(xi8, 0, xu8))>, i32>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::fma(xh, 2.0, xb))>, float>);

  // Comparisons and logical ops give bool.
  STATIC_REQUIRE(same<value_t<decltype(xf < xf)>, bool>);
  STATIC_REQUIRE(same<value_t<decltype(xh == 1.0)>, bool>);
  STATIC_REQUIRE(same<value_t<decltype(xi8 >= xu8)>, bool>);
  STATIC_REQUIRE(same<value_t<decltype(xd != 0)>, bool>);
  STATIC_REQUIRE(same<value_t<decltype(xf && xi32)>, bool>);
  STATIC_REQUIRE(same<value_t<decltype(!xh)>, bool>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::isnan(xb))>, bool>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::isfinite(xi32))>, bool>);

  // Math functions: integers and bool give float32; floating types keep their type.
  STATIC_REQUIRE(same<value_t<decltype(fusex::exp(xi32))>, float>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::exp(xi64))>, float>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::sqrt(xbool))>, float>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::log(xu8))>, float>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::exp(xh))>, half>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::tanh(xb))>, bfloat16>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::sigmoid(xd))>, double>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::pow(xi32, 2))>, float>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::pow(xh, xd))>, double>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::gelu(xi8))>, float>);

  // Type-preserving ops.
  STATIC_REQUIRE(same<value_t<decltype(-xi8)>, i8>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::abs(xi8))>, i8>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::floor(xi32))>, i32>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::round(xh))>, half>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::relu(xb))>, bfloat16>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::leaky_relu(xh, 0.2))>, half>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::min(xu8, xi8))>, i32>);
  STATIC_REQUIRE(same<value_t<decltype(xi8 & xu8)>, i32>);
  STATIC_REQUIRE(same<value_t<decltype(xi64 << 3)>, i64>);
  STATIC_REQUIRE(same<value_t<decltype(~xbool)>, bool>);

  // where promotes its two branches; the condition converts to bool.
  STATIC_REQUIRE(same<value_t<decltype(fusex::where(xbool, xi32, 1.5))>, float>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::where(xi32, xh, xf))>, float>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::where(xf > 0, xh, 0))>, half>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::where(xf > 0, xi8, xu8))>, i32>);

  // cast<T> gives T.
  STATIC_REQUIRE(same<value_t<decltype(fusex::cast<i8>(xf))>, i8>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::cast<half>(xd))>, half>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::cast<float>(xh) * xh)>, float>);

  // map: what the functor returns (operands in their compute types), or the explicit type.
  const auto to_double = [](float v) { return static_cast<double>(v); };
  STATIC_REQUIRE(same<value_t<decltype(fusex::map(to_double, xh))>, double>);
  const auto add = [](auto a, auto b) { return a + b; };
  STATIC_REQUIRE(same<value_t<decltype(fusex::map(add, xh, xb))>, float>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::map(add, xi8, xi8))>, int>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::map<float>(add, xi32, xi32))>, float>);

  // Nesting keeps the rule at every level.
  STATIC_REQUIRE(same<value_t<decltype(fusex::exp(xi32) * xh)>, float>);
  STATIC_REQUIRE(same<value_t<decltype((xh * 2.0 + 1) * xh)>, half>);
  STATIC_REQUIRE(same<value_t<decltype(fusex::where(xi8 > 0, xi8 + 1, xi8) / 2)>, i8>);
}
