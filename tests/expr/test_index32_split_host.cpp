// Host tests of the 32-bit index pieces (split_index32, rows_per_index32_piece): tensors of 2^31
// elements or offsets or more are launched as several 32-bit kernels instead of one 64-bit
// kernel. With a small limit standing in for 2^31, every element of random layouts is checked to
// fall in exactly one piece, at the same address for every operand, with each piece's counts and
// offsets below the limit and the vector path kept where the piece allows it.
#include <fusex/fusex.hpp>
#include <fusex/plan/elementwise_plan.hpp>
#include <fusex/plan/reduce_plan.hpp>

#include "fusex_catch.hpp"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using fusex::detail::elementwise_layout;
using fusex::detail::operand_layout;
using i64 = std::int64_t;

namespace {

alignas(64) unsigned char arena[64];  // base addresses only: nothing is read or written

struct piece_record {
  elementwise_layout L;
  std::vector<operand_layout> ops;
};

std::vector<piece_record> split(const elementwise_layout& L, const std::vector<operand_layout>& ops, i64 limit) {
  std::vector<piece_record> out;
  for (const auto& p : fusex::detail::split_index32(L, ops.data(), static_cast<int>(ops.size()), limit)) {
    piece_record r{p.layout, ops};
    REQUIRE(p.data.size() == ops.size());
    for (std::size_t i = 0; i < ops.size(); ++i) r.ops[i].data = p.data[i];
    out.push_back(r);
  }
  return out;
}

i64 byte_offset(const void* p, const void* base) {
  return static_cast<const unsigned char*>(p) - static_cast<const unsigned char*>(base);
}

// Checks the pieces of layout L against the definition. ops[0] is a contiguous probe (row-major
// strides of L's extents, 1-byte elements): its offset names each element.
void check_pieces(const elementwise_layout& L, const std::vector<operand_layout>& ops, i64 limit,
                  const std::vector<piece_record>& pieces) {
  const int r = L.rank;
  std::vector<int> covered(static_cast<std::size_t>(L.numel), 0);
  for (const piece_record& p : pieces) {
    INFO("piece of " << p.L.numel << " elements");
    REQUIRE(p.L.rank == r);
    REQUIRE_FALSE(p.L.index64);
    REQUIRE(fusex::detail::fits_index32(p.L, p.ops.data(), static_cast<int>(p.ops.size()), limit));
    i64 n = 1;
    for (int d = 0; d < r; ++d) n *= p.L.extent[d];
    REQUIRE(p.L.numel == n);
    REQUIRE(p.L.numel > 0);
    REQUIRE(p.L.work * p.L.vector_width == p.L.tail_start);
    REQUIRE(p.L.tail_start <= p.L.numel);
    if (p.L.vector_width > 1) {
      for (const operand_layout& o : p.ops) {
        if (o.s[r - 1] != 0) CHECK(reinterpret_cast<std::uintptr_t>(o.data) % (p.L.vector_width * o.elem_size) == 0);
      }
      if (r > 1) CHECK(p.L.extent[r - 1] % p.L.vector_width == 0);
    }
    const i64 first = byte_offset(p.ops[0].data, ops[0].data);
    for (i64 k = 0; k < p.L.numel; ++k) {
      i64 rem = k, idx[fusex::max_rank] = {};
      for (int d = r - 1; d >= 0; --d) {
        idx[d] = rem % p.L.extent[d];
        rem /= p.L.extent[d];
      }
      i64 probe = first;
      for (int d = 0; d < r; ++d) probe += idx[d] * p.ops[0].s[d];
      REQUIRE(probe >= 0);
      REQUIRE(probe < L.numel);
      ++covered[static_cast<std::size_t>(probe)];
      // The element's coordinates in the whole space, from the probe's row-major offset.
      i64 whole[fusex::max_rank] = {};
      rem = probe;
      for (int d = r - 1; d >= 0; --d) {
        whole[d] = rem % L.extent[d];
        rem /= L.extent[d];
      }
      for (std::size_t i = 1; i < ops.size(); ++i) {
        i64 in_piece = byte_offset(p.ops[i].data, ops[i].data), in_whole = 0;
        for (int d = 0; d < r; ++d) {
          in_piece += idx[d] * p.ops[i].s[d] * p.ops[i].elem_size;
          in_whole += whole[d] * ops[i].s[d] * ops[i].elem_size;
        }
        REQUIRE(in_piece == in_whole);
      }
    }
  }
  for (i64 k = 0; k < L.numel; ++k) {
    INFO("element " << k);
    REQUIRE(covered[static_cast<std::size_t>(k)] == 1);
  }
}

operand_layout probe_of(const elementwise_layout& L) {
  operand_layout o;
  o.data = arena;
  o.elem_size = 1;
  i64 st = 1;
  for (int d = L.rank - 1; d >= 0; --d) {
    o.s[d] = st;
    st *= L.extent[d];
  }
  return o;
}

}  // namespace

TEST_CASE("split_index32: every element in exactly one piece, at the same address", "[eval][planner][index32]") {
  std::mt19937_64 rng(20261205);
  auto pick = [&](i64 lo, i64 hi) { return std::uniform_int_distribution<i64>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    elementwise_layout L;
    L.rank = static_cast<int>(pick(1, 4));
    L.numel = 1;
    for (int d = 0; d < fusex::max_rank; ++d) L.extent[d] = d < L.rank ? pick(1, 9) : 1;
    for (int d = 0; d < L.rank; ++d) L.numel *= L.extent[d];
    std::vector<operand_layout> ops{probe_of(L)};
    const int extra = static_cast<int>(pick(0, 3));
    for (int k = 0; k < extra; ++k) {
      operand_layout o;
      o.data = arena + 8 * pick(0, 7);
      o.elem_size = static_cast<int>(1 << pick(0, 3));
      for (int d = 0; d < L.rank; ++d) o.s[d] = pick(0, 3) == 0 ? 0 : pick(1, 40);  // broadcast or any stride
      ops.push_back(o);
    }
    L.vector_width = 1;
    L.work = L.numel;
    L.tail_start = L.numel;
    i64 biggest = L.numel;
    for (const operand_layout& o : ops) biggest = std::max(biggest, fusex::detail::max_offset(o, L) + 1);
    // A limit below what the whole needs (most trials split, some into single elements; a limit
    // that fits gives one piece).
    const i64 limit = std::max<i64>(2, biggest / pick(1, 40));
    L.index64 = !fusex::detail::fits_index32(L, ops.data(), static_cast<int>(ops.size()), limit);
    INFO("trial " << trial << ", rank " << L.rank << ", " << L.numel << " elements, limit " << limit);
    const auto pieces = split(L, ops, limit);
    if (!L.index64) CHECK(pieces.size() == 1);
    check_pieces(L, ops, limit, pieces);
  }
}

TEST_CASE("split_index32: the vector path survives the cut", "[eval][planner][index32]") {
  constexpr int V = 4;
  SECTION("one dimension: cut at whole vectors, the last piece keeps a scalar tail") {
    elementwise_layout L;
    L.rank = 1;
    L.extent[0] = 1001;
    L.numel = 1001;
    L.vector_width = V;
    L.work = L.numel / V;
    L.tail_start = L.work * V;
    operand_layout x = probe_of(L);
    operand_layout f;  // a float operand, contiguous and aligned
    f.data = arena;
    f.elem_size = 4;
    f.s[0] = 1;
    const std::vector<operand_layout> ops{x, f};
    const auto pieces = split(L, ops, 300);
    check_pieces(L, ops, 300, pieces);
    // At most 296 (whole vectors below 300) per piece: 4 pieces, as even as vectors allow.
    REQUIRE(pieces.size() == 4);
    for (std::size_t i = 0; i + 1 < pieces.size(); ++i) {
      CHECK(pieces[i].L.numel == 252);
      CHECK(pieces[i].L.vector_width == V);
      CHECK(pieces[i].L.tail_start == pieces[i].L.numel);
    }
    CHECK(pieces.back().L.numel == 245);
    CHECK(pieces.back().L.vector_width == V);
    CHECK(pieces.back().L.tail_start == 244);
  }
  SECTION("two dimensions with a row broadcast: rows cut whole") {
    elementwise_layout L;
    L.rank = 2;
    L.extent[0] = 37;
    L.extent[1] = 64;
    L.numel = 37 * 64;
    L.vector_width = V;
    L.work = L.numel / V;
    L.tail_start = L.numel;
    operand_layout y = probe_of(L), f, bias;
    f.data = arena;
    f.elem_size = 4;
    f.s[0] = 64;
    f.s[1] = 1;
    bias.data = arena + 16;
    bias.elem_size = 4;
    bias.s[0] = 0;
    bias.s[1] = 1;
    const std::vector<operand_layout> ops{y, f, bias};
    const auto pieces = split(L, ops, 1000);
    check_pieces(L, ops, 1000, pieces);
    REQUIRE(pieces.size() == 3);  // 13 + 12 + 12 rows of 64 (at most 15 fit)
    CHECK(pieces[0].L.extent[0] == 13);
    CHECK(pieces[1].L.extent[0] == 12);
    CHECK(pieces[2].L.extent[0] == 12);
    for (const piece_record& p : pieces) {
      CHECK(p.L.extent[1] == 64);
      CHECK(p.L.vector_width == V);
    }
  }
}

TEST_CASE("split_index32: the real limit", "[eval][planner][index32]") {
  // 2^32 contiguous elements: three pieces below 2^31, as even as whole vectors allow.
  elementwise_layout L;
  L.rank = 1;
  L.extent[0] = std::int64_t{1} << 32;
  L.numel = L.extent[0];
  L.vector_width = 4;
  L.work = L.numel / 4;
  L.tail_start = L.numel;
  operand_layout f;
  f.data = arena;
  f.elem_size = 4;
  f.s[0] = 1;
  L.index64 = !fusex::detail::fits_index32(L, &f, 1);
  REQUIRE(L.index64);
  std::vector<i64> sizes;
  for (const auto& p : fusex::detail::split_index32(L, &f, 1)) {
    operand_layout o = f;
    o.data = p.data[0];
    CHECK(fusex::detail::fits_index32(p.layout, &o, 1));
    sizes.push_back(p.layout.numel);
  }
  CHECK(sizes == std::vector<i64>{1431655768, 1431655764, 1431655764});
}

TEST_CASE("rows_per_index32_piece: whole rows within the limit", "[reduce][planner][index32]") {
  operand_layout dst, x;
  dst.s[0] = 100;  // contiguous rows of 100
  dst.s[1] = 1;
  x.s[0] = 128;  // padded rows
  x.s[1] = 1;
  const operand_layout ops[] = {dst, x};
  // count: r * 100 < 1000 -> 9; x: (r - 1) * 128 + 100 < 1000 -> 8.
  CHECK(fusex::detail::rows_per_index32_piece(ops, 2, 100, 1000) == 8);
  CHECK(fusex::detail::rows_per_index32_piece(ops, 1, 100, 1000) == 9);
  // A column-major operand: one row spans (cols - 1) * 5000 elements, more than the limit.
  operand_layout t;
  t.s[0] = 1;
  t.s[1] = 5000;
  const operand_layout bad[] = {dst, t};
  CHECK(fusex::detail::rows_per_index32_piece(bad, 2, 100, 1000) == 0);
  // The real limit: 2 rows of 2^30 + 2050 elements go one row per launch.
  operand_layout big;
  big.s[0] = (std::int64_t{1} << 30) + 2050;
  big.s[1] = 1;
  CHECK(fusex::detail::rows_per_index32_piece(&big, 1, big.s[0]) == 1);
}

// The plan printer on the shapes of the large GPU tests (tests/stress/test_large_gpu.cu,
// test_elementwise_gpu.cu): a plan never touches memory, so views at made-up, far-apart addresses
// do (no overlap between their 2^31-element spans).
TEST_CASE("explain: plans past 2^31 elements run in 32-bit pieces", "[eval][planner][index32]") {
  auto at = [](int k) { return reinterpret_cast<std::int8_t*>(static_cast<std::uintptr_t>(k) << 40); };
  auto* out = reinterpret_cast<std::int64_t*>(std::uintptr_t{7} << 40);
  const std::int64_t n = (std::int64_t{1} << 31) + 4099;
  const auto x = fusex::make_view(at(1), {n});
  const auto y = fusex::make_view(at(2), {n});
  SECTION("elementwise, vector path") {
    const std::string plan = fusex::explain(y, x + std::int8_t{2});
    INFO(plan);
    CHECK(plan.find("fusex plan: 2 kernels (elementwise)") != std::string::npos);
    CHECK(plan.find("vector width 16 (16-byte accesses), 32-bit indices in 2 pieces") != std::string::npos);
  }
  SECTION("elementwise, misaligned: scalar path") {
    const auto xs = fusex::make_view(at(1) + 1, {n - 1});
    const auto ys = fusex::make_view(at(2), {n - 1});
    const std::string plan = fusex::explain(ys, xs - std::int8_t{1});
    INFO(plan);
    CHECK(plan.find("scalar accesses, 32-bit indices in 2 pieces") != std::string::npos);
  }
  SECTION("row reduction: one launch per piece of whole rows") {
    // 32768 rows of 65536 (2^31 elements): at most 32767 rows fit, so two pieces of 16384.
    const auto m = fusex::make_view(at(2), {32768, 65536});
    const std::string plan =
        fusex::explain(fusex::make_view(out, {32768}), fusex::sum(fusex::cast<std::int64_t>(m), -1));
    INFO(plan);
    CHECK(plan.find("fusex plan: 2 launches of 1 kernel (row reduction with epilogue, rule 1)") != std::string::npos);
    CHECK(plan.find("launched in 2 pieces of at most 16384 rows") != std::string::npos);
  }
  SECTION("row pieces keep the row in registers (softmax over 2^31 floats)") {
    auto* xf = reinterpret_cast<float*>(std::uintptr_t{3} << 40);
    auto* yf = reinterpret_cast<float*>(std::uintptr_t{4} << 40);
    const auto xs = fusex::make_view(xf, {524288, 4096});
    const auto ys = fusex::make_view(yf, {524288, 4096});
    const std::string plan = fusex::explain(ys, fusex::softmax(xs));
    INFO(plan);
    CHECK(plan.find("fusex plan: 2 launches of 1 kernel (row reduction with epilogue, rule 1)") != std::string::npos);
    CHECK(plan.find("row kept in registers") != std::string::npos);
    CHECK(plan.find("static path") != std::string::npos);
    CHECK(plan.find("launched in 2 pieces of at most 262144 rows") != std::string::npos);
  }
  SECTION("a row that alone spans 2^31 elements goes to rule 2") {
    // Column-major [65536, 65536]: one row's elements lie 65536 apart.
    const auto m = fusex::make_view(at(2), {65536, 65536}, {1, 65536});
    const std::string plan =
        fusex::explain(fusex::make_view(out, {65536}), fusex::sum(fusex::cast<std::int64_t>(m), -1));
    INFO(plan);
    CHECK(plan.find("rule 2: one row spans 2^31 elements or more") != std::string::npos);
  }
}
