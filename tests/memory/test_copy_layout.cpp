// Host tests of copy_async's layout analysis (which views copy as one contiguous or one 2-D copy)
// and of pinned_buffer's views; no GPU needed.
#include "fusex_catch.hpp"

#include <fusex/copy.hpp>
#include <fusex/memory/pinned.hpp>

#include <string>
#include <vector>

using fusex::shape_t;

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("copy layout: dense suffixes and row blocks", "[memory][host]") {
  std::vector<float> mem(64 * 512);
  fusex::view<float> m(mem.data(), shape_t{64, 512});
  CHECK(fusex::detail::dense_suffix(m) == 2);
  auto block = m.slice(0, 8, 40).slice(1, 100, 356);  // 32 rows of 256 at a pitch of 512
  CHECK(fusex::detail::dense_suffix(block) == 1);
  auto l = fusex::detail::layout_2d(block, 1);
  CHECK(l.ok);
  CHECK(l.rows == 32);
  CHECK(l.width == 256);
  CHECK(l.pitch == 512);
  // Rows of a 3-D view that collapse into one uniform pitch.
  fusex::view<float> t(mem.data(), shape_t{4, 8, 512});
  auto tb = t.slice(2, 0, 100);
  CHECK(fusex::detail::dense_suffix(tb) == 1);
  auto lt = fusex::detail::layout_2d(tb, 1);
  CHECK(lt.ok);
  CHECK(lt.rows == 32);
  CHECK(lt.pitch == 512);
  // Every other row of every other plane: the outer dimensions do not collapse.
  auto bad = t.slice(0, 0, 4, 2).slice(1, 0, 8, 3).slice(2, 0, 100);
  CHECK(!fusex::detail::layout_2d(bad, 1).ok);
  // A column (stride 512) is a 2-D copy of width 1.
  auto column = fusex::view<float>(mem.data() + 3, shape_t{64}, fusex::strides_t{512});
  CHECK(fusex::detail::dense_suffix(column) == 0);
  auto lc = fusex::detail::layout_2d(column, 0);
  CHECK(lc.ok);
  CHECK(lc.rows == 64);
  CHECK(lc.width == 1);
  CHECK(lc.pitch == 512);
  // A transposed matrix: no dense suffix, outer dims (512, 1) do not collapse.
  CHECK(!fusex::detail::layout_2d(m.t(), 0).ok);
}

TEST_CASE("copy_async: shape and overlap errors come before any CUDA call", "[memory][host]") {
  std::vector<float> a(100), b(100);
  fusex::view<float> va(a.data(), shape_t{10, 10});
  fusex::view<float> vb(b.data(), shape_t{100});
  CHECK_THROWS_AS(fusex::copy_async(va, vb, nullptr), fusex::shape_error);
  const std::string shapes = thrown_message<fusex::shape_error>([&] { fusex::copy_async(va, vb, nullptr); });
  INFO(shapes);
  CHECK(contains(shapes, "destination of shape [10, 10] and source of shape [100] differ"));
  fusex::view<float> lo(a.data(), shape_t{60}), hi(a.data() + 40, shape_t{60});
  CHECK_THROWS_AS(fusex::copy_async(lo, hi, nullptr), fusex::invalid_argument);
  CHECK(contains(thrown_message<fusex::invalid_argument>([&] { fusex::copy_async(lo, hi, nullptr); }),
                 "copy_async: destination (shape [60]) and source (shape [60]) overlap in memory"));
  // A layout that is neither contiguous nor rows at one pitch (a transposed matrix).
  std::vector<float> c(100);
  fusex::view<float> vc(c.data(), shape_t{10, 10});
  const std::string layout = thrown_message<fusex::invalid_argument>([&] { fusex::copy_async(vc, va.t(), nullptr); });
  INFO(layout);
  CHECK(contains(layout, "cannot copy a view of shape [10, 10] and strides [1, 10] into one with strides [10, 1]"));
  // Zero elements: nothing to do, no CUDA call.
  fusex::view<float> e1(a.data(), shape_t{0}), e2(b.data(), shape_t{0});
  fusex::copy_async(e1, e2, nullptr);
}
