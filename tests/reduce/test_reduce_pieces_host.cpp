// The pieces of a reduction too large for 32-bit indices (plan/reduce_pieces.hpp), checked on the
// host with small limits: over random shapes and strides, the pieces tile the coordinate space
// exactly once, each fits the limit in count and in every operand's span, each one's outputs and
// reduced elements are the contiguous linear ranges it claims, and the pieces of one output come
// in order. The GPU test (test_reduce_gpu_more.cu) runs real reductions over 2^31 elements.
#include <fusex/plan/reduce_pieces.hpp>

#include "fusex_catch.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using fusex::detail::operand_layout;
using fusex::detail::reduce_piece_plan;

struct problem {
  int nk = 0, nr = 0;
  std::int64_t ext[fusex::max_rank] = {};
  std::vector<operand_layout> ops;
  std::int64_t limit = 0;

  std::string text() const {
    std::string t = "kept [";
    for (int q = 0; q < nk; ++q) t += std::to_string(ext[q]) + (q + 1 < nk ? ", " : "");
    t += "] reduced [";
    for (int q = nk; q < nk + nr; ++q) t += std::to_string(ext[q]) + (q + 1 < nk + nr ? ", " : "");
    t += "] limit " + std::to_string(limit) + " strides";
    for (const auto& o : ops) {
      t += " (";
      for (int q = 0; q < nk + nr; ++q) t += std::to_string(o.s[q]) + (q + 1 < nk + nr ? "," : "");
      t += ")";
    }
    return t;
  }
};

// Row-major linear index of coordinates c over positions [a, b).
std::int64_t linear(const problem& p, const std::int64_t* c, int a, int b) {
  std::int64_t l = 0;
  for (int q = a; q < b; ++q) l = l * p.ext[q] + c[q];
  return l;
}

// Checks one group's boxes: in row-major order, each the linear range it claims, tiling the group.
void check_boxes(const problem& p, const std::vector<fusex::detail::reduce_box>& boxes, int a, int b) {
  std::int64_t next = 0;
  for (const auto& box : boxes) {
    std::int64_t count = 1;
    for (int q = a; q < b; ++q) {
      REQUIRE(box.extent[q] >= 1);
      REQUIRE(box.start[q] >= 0);
      REQUIRE(box.start[q] + box.extent[q] <= p.ext[q]);
      count *= box.extent[q];
    }
    CHECK(box.count == count);
    CHECK(box.first == linear(p, box.start, a, b));
    CHECK(box.first == next);  // contiguous, in order, no gap
    next = box.first + box.count;
  }
  std::int64_t total = 1;
  for (int q = a; q < b; ++q) total *= p.ext[q];
  CHECK(next == total);
}

// Checks a plan against the rules, independently of how the planner chose it.
void check_plan(const problem& p, std::int64_t max_outputs) {
  INFO(p.text() << " max_outputs " << max_outputs);
  const int rank = p.nk + p.nr;
  std::int64_t k_total = 1, n_total = 1;
  for (int q = 0; q < p.nk; ++q) k_total *= p.ext[q];
  for (int q = p.nk; q < rank; ++q) n_total *= p.ext[q];
  const reduce_piece_plan plan = fusex::detail::plan_reduce_pieces(
      p.nk, p.nr, p.ext, p.ops.data(), static_cast<int>(p.ops.size()), max_outputs, p.limit);
  REQUIRE_FALSE(plan.too_many());
  CHECK(plan.pieces == static_cast<std::int64_t>(plan.kept.size() * plan.reduced.size()));
  check_boxes(p, plan.kept, 0, p.nk);
  check_boxes(p, plan.reduced, p.nk, rank);
  if (!plan.split_reduced()) CHECK(plan.reduced.front().count == n_total);
  std::vector<int> seen(static_cast<std::size_t>(k_total * n_total), 0);
  for (const auto& kb : plan.kept) {
    if (plan.split_reduced()) CHECK(kb.count <= max_outputs);
    for (const auto& nb : plan.reduced) {
      std::int64_t e[fusex::max_rank] = {}, start[fusex::max_rank] = {};
      for (int q = 0; q < p.nk; ++q) {
        e[q] = kb.extent[q];
        start[q] = kb.start[q];
      }
      for (int q = p.nk; q < rank; ++q) {
        e[q] = nb.extent[q];
        start[q] = nb.start[q];
      }
      CHECK(kb.count * nb.count < p.limit);
      for (const auto& o : p.ops) {
        std::int64_t span = 0;
        for (int q = 0; q < rank; ++q) span += (e[q] - 1) * o.s[q];
        CHECK(span < p.limit);
      }
      // Mark every element of the piece, visiting it as the kernels' decode would.
      std::int64_t c[fusex::max_rank] = {};
      for (std::int64_t x = 0; x < kb.count * nb.count; ++x) {
        std::int64_t rem = x;
        for (int q = rank - 1; q >= 0; --q) {
          c[q] = start[q] + rem % e[q];
          rem /= e[q];
        }
        const std::int64_t k = linear(p, c, 0, p.nk), n = linear(p, c, p.nk, rank);
        CHECK(k - kb.first >= 0);
        CHECK(k - kb.first < kb.count);
        CHECK(n - nb.first >= 0);
        CHECK(n - nb.first < nb.count);
        ++seen[static_cast<std::size_t>(k * n_total + n)];
      }
    }
  }
  std::int64_t wrong = 0;
  for (int v : seen) wrong += v != 1;
  CHECK(wrong == 0);
}

operand_layout strided(const problem& p, const std::vector<std::int64_t>& s) {
  operand_layout o;
  for (int q = 0; q < p.nk + p.nr; ++q) o.s[q] = s[static_cast<std::size_t>(q)];
  return o;
}

}  // namespace

TEST_CASE("reduce pieces: a full reduction over more than the limit is cut along its elements",
          "[host][reduce][pieces]") {
  problem p;
  p.nr = 1;
  p.ext[0] = 1000;
  p.limit = 128;
  p.ops.push_back(strided(p, {1}));
  const auto plan = fusex::detail::plan_reduce_pieces(p.nk, p.nr, p.ext, p.ops.data(), 1, 16, p.limit);
  CHECK(plan.split_reduced());
  CHECK(plan.kept.size() == 1);
  CHECK(plan.reduced.size() == 8);  // 127 elements each, the last 111
  CHECK(plan.reduced.front().count == 127);
  check_plan(p, 16);
}

TEST_CASE("reduce pieces: whole reductions are preferred, the outputs cut", "[host][reduce][pieces]") {
  problem p;  // [300, 20] summed over axis 1, contiguous: 6000 elements, 128 per piece
  p.nk = 1;
  p.nr = 1;
  p.ext[0] = 300;
  p.ext[1] = 20;
  p.limit = 128;
  p.ops.push_back(strided(p, {20, 1}));
  const auto plan = fusex::detail::plan_reduce_pieces(p.nk, p.nr, p.ext, p.ops.data(), 1, 16, p.limit);
  CHECK_FALSE(plan.split_reduced());
  CHECK(plan.kept.front().count == 6);  // 6 * 20 = 120 < 128 elements, span 119
  CHECK(plan.kept.size() == 50);
  check_plan(p, 16);
  // A broadcast operand spans nothing along its broadcast axis; a transposed one spans more.
  p.ops.push_back(strided(p, {0, 300}));
  check_plan(p, 16);
}

TEST_CASE("reduce pieces: an inner dimension too large alone moves the cut inward", "[host][reduce][pieces]") {
  problem p;  // kept [3, 50], reduced [2]: one whole kept row alone (50 x stride 2) spans more than 64
  p.nk = 2;
  p.nr = 1;
  p.ext[0] = 3;
  p.ext[1] = 50;
  p.ext[2] = 2;
  p.limit = 64;
  p.ops.push_back(strided(p, {100, 2, 1}));
  const auto plan = fusex::detail::plan_reduce_pieces(p.nk, p.nr, p.ext, p.ops.data(), 1, 1000, p.limit);
  CHECK_FALSE(plan.split_reduced());
  CHECK(plan.kept.front().extent[0] == 1);
  CHECK(plan.kept.front().extent[1] == 31);  // 31 x 2 = 62 elements, span 30 x 2 + 1 = 61
  CHECK(plan.kept.size() == 6);
  check_plan(p, 1000);
  // Reduced positions cut at an inner level too: [2] kept, [4, 40] reduced, one row of 40 spans more.
  problem q;
  q.nk = 1;
  q.nr = 2;
  q.ext[0] = 2;
  q.ext[1] = 4;
  q.ext[2] = 40;
  q.limit = 32;
  q.ops.push_back(strided(q, {1, 2, 8}));
  const auto qp = fusex::detail::plan_reduce_pieces(q.nk, q.nr, q.ext, q.ops.data(), 1, 1000, q.limit);
  CHECK(qp.split_reduced());
  CHECK(qp.reduced.front().extent[1] == 1);
  CHECK(qp.reduced.front().extent[2] == 4);  // span 3 x 8 = 24 < 32; 5 would be 32
  CHECK(qp.reduced.size() == 40);
  CHECK(qp.kept.size() == 1);  // both outputs beside a reduced box: 2 x 4 elements, span 1 + 24
  check_plan(q, 1000);
}

TEST_CASE("reduce pieces: a reduced dimension of a huge stride keeps many outputs per piece",
          "[host][reduce][pieces]") {
  // sum over axis 0 of [4, 1000] stored column-major-like (stride 1000 along the reduced axis,
  // 4000 > limit): one coordinate of the reduced axis per piece, with up to max_outputs outputs
  // each, not one launch per output and coordinate.
  problem p;
  p.nk = 1;
  p.nr = 1;
  p.ext[0] = 1000;
  p.ext[1] = 4;
  p.limit = 128;
  p.ops.push_back(strided(p, {1, 1000}));
  const auto plan = fusex::detail::plan_reduce_pieces(p.nk, p.nr, p.ext, p.ops.data(), 1, 50, p.limit);
  CHECK(plan.split_reduced());
  CHECK(plan.reduced.size() == 4);
  CHECK(plan.kept.size() == 20);
  check_plan(p, 50);
}

TEST_CASE("reduce pieces: a layout needing more than max_reduce_pieces launches is refused, not built",
          "[host][reduce][pieces]") {
  // kept [70000, 4] with the large stride on the inner kept position: a box fixes the outer one,
  // so one launch per (outer coordinate, inner coordinate): 280000 pieces.
  problem p;
  p.nk = 2;
  p.nr = 1;
  p.ext[0] = 70000;
  p.ext[1] = 4;
  p.ext[2] = 1;
  p.limit = std::int64_t{1} << 20;
  p.ops.push_back(strided(p, {1, std::int64_t{1} << 20, 1}));
  const auto plan = fusex::detail::plan_reduce_pieces(p.nk, p.nr, p.ext, p.ops.data(), 1, 1000, p.limit);
  CHECK(plan.too_many());
  CHECK(plan.pieces == 280000);
  CHECK(plan.kept.empty());
  CHECK(plan.reduced.empty());
  // The same with a contiguous layout is two pieces.
  problem q = p;
  q.ops[0] = strided(q, {4, 1, 1});
  const auto qp = fusex::detail::plan_reduce_pieces(q.nk, q.nr, q.ext, q.ops.data(), 1, 1000, q.limit);
  CHECK_FALSE(qp.too_many());
  CHECK(qp.pieces == 1);
}

TEST_CASE("reduce pieces: random shapes, axes and strides tile the space once and fit",
          "[host][reduce][pieces]") {
  std::mt19937_64 rng(20261206);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 400; ++trial) {
    problem p;
    const int rank = static_cast<int>(pick(1, 5));
    p.nk = static_cast<int>(pick(0, rank));
    p.nr = rank - p.nk;
    std::int64_t total = 1;
    for (int q = 0; q < rank; ++q) {
      p.ext[q] = pick(1, 9);
      total *= p.ext[q];
    }
    if (total > 20000) continue;
    p.limit = pick(2, 300);
    const int n_ops = static_cast<int>(pick(1, 3));
    for (int i = 0; i < n_ops; ++i) {
      std::vector<std::int64_t> s(static_cast<std::size_t>(rank));
      for (auto& x : s) x = pick(0, 3) == 0 ? 0 : pick(1, 40);  // views' strides are never negative
      p.ops.push_back(strided(p, s));
    }
    check_plan(p, pick(1, 60));
  }
}
