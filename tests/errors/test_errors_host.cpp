// Error catalogue, host part (docs/reliability.md): for each bad input, the exception type and
// that the message names the culprit.
#include <fusex/fusex.hpp>

#include "fusex_catch.hpp"

#include <string>
#include <type_traits>
#include <vector>

namespace {
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("no exception of the expected type");
  return {};
}
bool has(const std::string& m, const std::string& part) { return m.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("errors: shapes that do not broadcast name both shapes", "[errors]") {
  std::vector<float> a(6), b(4), y(6);
  const auto va = fusex::make_view(a.data(), {2, 3});
  const auto vb = fusex::make_view(b.data(), {4});
  const auto vy = fusex::make_view(y.data(), {2, 3});
  const std::string m = message_of<fusex::shape_error>([&] { fusex::host::eval(vy, va + vb); });
  INFO(m);
  CHECK(has(m, "[2, 3]"));
  CHECK(has(m, "[4]"));
}

TEST_CASE("errors: destination of the wrong shape names both shapes", "[errors]") {
  std::vector<float> a(6), y(4);
  const auto va = fusex::make_view(a.data(), {2, 3});
  const auto vy = fusex::make_view(y.data(), {4});
  const std::string m = message_of<fusex::shape_error>([&] { fusex::host::eval(vy, va * 2.0f); });
  INFO(m);
  CHECK(has(m, "[2, 3]"));
  CHECK(has(m, "[4]"));
}

TEST_CASE("errors: overlapping destination and input name both operands", "[errors]") {
  std::vector<float> buf(8);
  const auto dst = fusex::make_view(buf.data() + 1, {4});
  const auto src = fusex::make_view(buf.data(), {4});
  const std::string m = message_of<fusex::invalid_argument>([&] { fusex::host::eval(dst, src + 1.0f); });
  INFO(m);
  CHECK(has(m, "destination 0"));
  CHECK(has(m, "input 0"));
  CHECK(has(m, "overlaps"));
}

TEST_CASE("errors: a destination that overlaps itself names it", "[errors]") {
  std::vector<float> buf(8);
  const auto dst = fusex::make_view(buf.data(), {4, 2}, {1, 1});
  const std::string m = message_of<fusex::invalid_argument>([&] { fusex::host::eval(dst, 1.0f); });
  INFO(m);
  CHECK(has(m, "destination 0"));
  CHECK(has(m, "[4, 2]"));
  CHECK(has(m, "share memory"));
}

TEST_CASE("errors: null pointer with elements names the shape", "[errors]") {
  float* null = nullptr;
  const std::string m = message_of<fusex::invalid_argument>([&] { (void)fusex::make_view(null, {3, 5}); });
  INFO(m);
  CHECK(has(m, "null pointer"));
  CHECK(has(m, "[3, 5]"));
  CHECK(has(m, "15 elements"));
}

TEST_CASE("errors: negative extent and stride, stride count", "[errors]") {
  std::vector<float> a(8);
  const std::string m1 = message_of<fusex::shape_error>([&] { (void)fusex::make_view(a.data(), {2, -1}); });
  CHECK(has(m1, "[2, -1]"));
  const std::string m2 = message_of<fusex::shape_error>([&] { (void)fusex::make_view(a.data(), {2, 2}, {-1, 1}); });
  CHECK(has(m2, "[-1, 1]"));
  const std::string m3 = message_of<fusex::shape_error>([&] { (void)fusex::make_view(a.data(), {2, 2}, {1}); });
  CHECK(has(m3, "[2, 2]"));
  CHECK(has(m3, "[1]"));
}

TEST_CASE("errors: rank above max_rank names the rank", "[errors]") {
  const std::string m = message_of<fusex::shape_error>([&] { fusex::shape_t s{1, 1, 1, 1, 1, 1, 1, 1, 1}; });
  INFO(m);
  CHECK(has(m, "rank 9"));
  CHECK(has(m, "max_rank (8)"));
}

TEST_CASE("errors: bad and repeated reduction axes name the axis and the shape", "[errors]") {
  std::vector<float> a(6);
  const auto va = fusex::make_view(a.data(), {2, 3});
  const std::string m1 = message_of<fusex::shape_error>([&] { (void)fusex::sum(va, 2); });
  INFO(m1);
  CHECK(has(m1, "sum"));
  CHECK(has(m1, "axis 2"));
  CHECK(has(m1, "[2, 3]"));
  const std::string m2 = message_of<fusex::shape_error>([&] { (void)fusex::amax(va, {1, -1}); });
  INFO(m2);
  CHECK(has(m2, "repeated"));
  CHECK(has(m2, "[2, 3]"));
}

TEST_CASE("errors: a reduction without identity over an empty axis names the axis", "[errors]") {
  std::vector<float> a(1);
  const auto va = fusex::make_view(a.data(), {0, 3});
  const std::string m = message_of<fusex::shape_error>([&] { (void)fusex::amax(va, 0); });
  INFO(m);
  CHECK(has(m, "empty axis 0"));
  CHECK(has(m, "[0, 3]"));
}

TEST_CASE("errors: view operations name the call, the axis and the shape", "[errors]") {
  std::vector<float> a(6);
  const auto va = fusex::make_view(a.data(), {2, 3});
  const std::string m1 = message_of<fusex::shape_error>([&] { (void)va.slice(1, 0, 4); });
  CHECK(has(m1, "slice(1, 0, 4, 1)"));
  CHECK(has(m1, "[2, 3]"));
  const std::string m2 = message_of<fusex::shape_error>([&] { (void)va.transpose(0, 2); });
  CHECK(has(m2, "transpose dimension 2"));
  const std::string m3 = message_of<fusex::shape_error>([&] { (void)va.permute({0, 0}); });
  CHECK(has(m3, "[0, 0]"));
  const std::string m4 = message_of<fusex::shape_error>([&] { (void)va.reshape({4, 2}); });
  CHECK(has(m4, "[2, 3]"));
  CHECK(has(m4, "[4, 2]"));
  const std::string m5 = message_of<fusex::shape_error>([&] { (void)va.t().reshape({6}); });
  CHECK(has(m5, "contiguous"));
  const std::string m6 = message_of<fusex::shape_error>([&] { (void)va.broadcast_to({3, 3}); });
  CHECK(has(m6, "[2, 3]"));
  CHECK(has(m6, "[3, 3]"));
  const std::string m7 = message_of<fusex::shape_error>([&] { (void)va.squeeze(0); });
  CHECK(has(m7, "squeeze(0)"));
  CHECK(has(m7, "[2, 3]"));
  const std::string m8 = message_of<fusex::shape_error>([&] { (void)fusex::make_view(a.data(), {6}).t(); });
  CHECK(has(m8, "t()"));
  CHECK(has(m8, "[6]"));
}

TEST_CASE("errors: a rank-0 view has no dimension to index (fuzz_shape_view finding)", "[errors]") {
  float x = 0;
  const auto v = fusex::make_view(&x, {});
  for (const auto& f : {+[](const fusex::view<float>& s) { (void)s.transpose(0, 0); },
                        +[](const fusex::view<float>& s) { (void)s.squeeze(0); },
                        +[](const fusex::view<float>& s) { (void)s.slice(-1, 0, 0); },
                        +[](const fusex::view<float>& s) { (void)s.extent(0); }}) {
    const std::string m = message_of<fusex::shape_error>([&] { f(v); });
    INFO(m);
    CHECK(has(m, "rank-0 view"));
  }
  CHECK(v.expand_dims(0).shape() == fusex::shape_t{1});  // still valid
}

TEST_CASE("errors: every fusex exception is caught as std::exception (bad_alloc included)", "[errors]") {
  // fusex::bad_alloc once derived from std::bad_alloc as well: std::exception was then an
  // ambiguous base and `catch (const std::exception&)` let it through (the GPU stress gate saw it
  // terminate a thread).
  static_assert(std::is_base_of_v<fusex::error, fusex::bad_alloc>);
  bool caught = false;
  try {
    throw fusex::bad_alloc("fusex: test: out of memory (64 bytes)", 64, cudaErrorMemoryAllocation);
  } catch (const std::exception& e) {
    caught = std::string(e.what()).find("64 bytes") != std::string::npos;
  }
  CHECK(caught);
}
