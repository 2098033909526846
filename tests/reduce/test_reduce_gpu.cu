// GPU suite for reductions against a double-precision reference computed with plain loops
// (reduce_gpu_support.hpp), part 1: integer and small dtypes, row lengths from 1 to 2^20, empty and
// degenerate shapes, the two-dimensional paths, NaN, logsumexp at the ends of the float range.
// Part 2 (test_reduce_gpu_more.cu): softmax written out by hand, determinism, the static path,
// overlap, a full sum over more than 2^31 elements. Every reduction over every axis set, one
// translation unit per dtype: test_reduce_axes_<dtype>_gpu.cu; the composites with epilogues:
// test_reduce_composites_<dtype>_gpu.cu.
#include <fusex/fusex.hpp>

#include "reduce_gpu_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using fusex::bfloat16;
using namespace fusex_test;
using namespace reduce_gpu_test;

TEST_CASE("gpu: integer sums accumulate in int64, products and small dtypes", "[gpu][reduce]") {
  check_reduction<std::int8_t>(
      "sum int8 -> int64", {300, 77}, 1u << 1, [](auto x) { return fusex::sum(x, -1); }, kind::sum, -100, 100);
  check_reduction<std::int32_t>(
      "sum int32 axis 0", {3000, 77}, 1u, [](auto x) { return fusex::sum(x, 0); }, kind::sum, -100000, 100000);
  check_reduction<std::uint8_t>(
      "sum uint8 all", {1000, 333}, 3u, [](auto x) { return fusex::sum(x); }, kind::sum, 1, 255);
  check_reduction<std::int64_t>(
      "amax int64", {65, 4099}, 2u, [](auto x) { return fusex::amax(x, 1); }, kind::max, -1000000, 1000000);
  check_reduction<float>(
      "prod", {64, 30}, 2u, [](auto x) { return fusex::prod(x, -1); }, kind::prod, 0.8, 1.25);
  check_reduction<std::int32_t>(
      "mean int -> float", {64, 100}, 2u, [](auto x) { return fusex::mean(x, -1); }, kind::mean, -1000, 1000);
}

TEST_CASE("gpu: row lengths from 1 to 2^20, [1, n] and [n, 1], empty", "[gpu][reduce]") {
  for (std::int64_t cols :
       std::vector<std::int64_t>{1, 2, 3, 31, 32, 33, 127, 128, 1000, 4096, 16384, 65537, std::int64_t{1} << 20}) {
    const std::int64_t rows = cols >= 65536 ? 4 : 33;
    check_reduction<float>(
        "sum row", {rows, cols}, 2u, [](auto x) { return fusex::sum(x, -1); }, kind::sum, -1, 1);
    check_reduction<float>(
        "amax row", {rows, cols}, 2u, [](auto x) { return fusex::amax(x, -1); }, kind::max, -1, 1);
  }
  {
    // The same rows with the other launch shapes: one row per block, and groups sized for four
    // vectors per thread (as larger plans have).
    const row_spread spread(!fusex::detail::row_tuning_state().spread_small);
    for (std::int64_t cols : std::vector<std::int64_t>{1, 33, 128, 1000, 4096, 16384}) {
      check_reduction<float>(
          "sum row, other launch shape", {33, cols}, 2u, [](auto x) { return fusex::sum(x, -1); }, kind::sum, -1, 1);
    }
  }
  {
    const row_vectors four(4);
    for (std::int64_t cols : std::vector<std::int64_t>{1, 33, 128, 1000, 4096, 16384}) {
      check_reduction<float>(
          "sum row, four vectors per thread", {33, cols}, 2u, [](auto x) { return fusex::sum(x, -1); }, kind::sum, -1,
          1);
    }
  }
  check_reduction<float>(
      "[1, n] all", {1, 100000}, 3u, [](auto x) { return fusex::sum(x); }, kind::sum, -1, 1);
  check_reduction<float>(
      "[n, 1] axis 0", {100000, 1}, 1u, [](auto x) { return fusex::sum(x, 0); }, kind::sum, -1, 1);
  check_reduction<float>(
      "[n, 1] axis 1", {100000, 1}, 2u, [](auto x) { return fusex::sum(x, 1); }, kind::sum, -1, 1);
  stream_guard sg;
  device_array<float> x(8), y(8);
  y.poison();
  // sum over an empty axis is 0; amax over one has no identity.
  run(sg.s, [&](cudaStream_t s) {
    fusex::eval(fusex::make_view(y.data(), {4}), fusex::sum(fusex::make_view(x.data(), {4, 0}), -1), s);
  });
  const auto hy = y.download();
  for (int i = 0; i < 4; ++i) CHECK(hy[i] == 0.0f);
  CHECK_THROWS_AS(fusex::amax(fusex::make_view(x.data(), {4, 0}), -1), fusex::shape_error);
  CHECK_THROWS_AS(fusex::sum(fusex::make_view(x.data(), {4, 2}), 2), fusex::shape_error);
  REQUIRE_NOTHROW(run(sg.s, [&](cudaStream_t s) {
    fusex::eval(fusex::make_view(y.data(), {0}), fusex::sum(fusex::make_view(x.data(), {0, 3}), -1), s);
  }));
}

// The two-dimensional kernels of rule 2 (vector loads along the inner dimension): rows with a
// tail past the last whole vector, columns with W outputs per thread, ties in argmax/argmin
// (small integer values), Welford and logsumexp over vectors, and shapes that must fall back to
// the generic kernels (odd column counts, operands that do not fold).
TEST_CASE("gpu: two-dimensional reduction paths (rows split across blocks, columns)", "[gpu][reduce]") {
  check_reduction<float>(
      "sum rows with tail", {3, 100003}, 2u, [](auto x) { return fusex::sum(x, -1); }, kind::sum, -1, 1);
  check_reduction<float>(
      "full mean, odd length", {(std::int64_t{1} << 20) + 3}, 1u, [](auto x) { return fusex::mean(x); }, kind::mean, -1,
      1);
  check_reduction<float>(
      "var rows split", {5, 70001}, 2u, [](auto x) { return fusex::var(x, -1); }, kind::var, -2, 3);
  check_reduction<float>(
      "logsumexp rows split", {2, 300001}, 2u, [](auto x) { return fusex::logsumexp(x, -1); }, kind::lse, -20, 20);
  check_reduction<bfloat16>(
      "sum bf16 rows split", {4, 200000}, 2u, [](auto x) { return fusex::sum(x, -1); }, kind::sum, -1, 1);
  check_reduction<float>(
      "sum columns", {1000, 1024}, 1u, [](auto x) { return fusex::sum(x, 0); }, kind::sum, -1, 1);
  check_reduction<float>(
      "sum columns, odd count", {1000, 1023}, 1u, [](auto x) { return fusex::sum(x, 0); }, kind::sum, -1, 1);
  check_reduction<std::int32_t>(
      "argmax columns, ties", {777, 256}, 1u, [](auto x) { return fusex::argmax(x, 0); }, kind::argmax, 1, 4);
  // Column tiles narrower than a warp (1 to 16 vector columns: 128 down to 8 row groups), many
  // splits with a ragged last one, Welford and ties across splits and row groups.
  for (std::int64_t cols : std::vector<std::int64_t>{4, 8, 12, 32, 64}) {
    check_reduction<float>(
        "sum columns, narrow tile", {20011, cols}, 1u, [](auto x) { return fusex::sum(x, 0); }, kind::sum, -1, 1);
  }
  check_reduction<float>(
      "var columns, split", {30001, 96}, 1u, [](auto x) { return fusex::var(x, 0); }, kind::var, -2, 3);
  check_reduction<std::int32_t>(
      "argmax columns, ties across splits", {50000, 20}, 1u, [](auto x) { return fusex::argmax(x, 0); }, kind::argmax,
      1, 3);
  check_reduction<bfloat16>(
      "mean bf16 columns, split", {9000, 264}, 1u, [](auto x) { return fusex::mean(x, 0); }, kind::mean, -1, 1);
  check_reduction<float>(
      "sum columns, wide", {2048, 16384}, 1u, [](auto x) { return fusex::sum(x, 0); }, kind::sum, -1, 1);
  // Every vector width of the column kernel (16 one-byte, 2 eight-byte elements per thread),
  // logsumexp across splits, and more column tiles than one wave of blocks holds on an H200
  // (140032 columns: 1094 tiles of 128), where the rows are not split.
  check_reduction<std::int8_t>(
      "sum int8 columns, split", {6000, 64}, 1u, [](auto x) { return fusex::sum(x, 0); }, kind::sum, -100, 100);
  check_reduction<double>(
      "var double columns, split", {20000, 40}, 1u, [](auto x) { return fusex::var(x, 0); }, kind::var, -2, 3);
  check_reduction<float>(
      "logsumexp columns, split", {12000, 128}, 1u, [](auto x) { return fusex::logsumexp(x, 0); }, kind::lse, -20, 20);
  check_reduction<float>(
      "sum columns, more tiles than a wave", {64, 140032}, 1u, [](auto x) { return fusex::sum(x, 0); }, kind::sum, -1,
      1);
  check_reduction<std::int32_t>(
      "argmin rows split, ties", {2, 150000}, 2u, [](auto x) { return fusex::argmin(x, -1); }, kind::argmin, 1, 4);
  check_reduction<float>(
      "amax middle axis (no fold)", {17, 300, 8}, 2u, [](auto x) { return fusex::amax(x, 1); }, kind::max, -1, 1);
  check_reduction<bfloat16>(
      "sum bf16 axis 0 of 3-D", {64, 40, 16}, 1u, [](auto x) { return fusex::sum(x, 0); }, kind::sum, -1, 1);
}

TEST_CASE("gpu: NaN propagates through max and argmax picks it", "[gpu][reduce]") {
  const std::int64_t rows = 8, cols = 300;
  auto hx = random_values<float>(rows * cols, -1, 1, 99);
  hx[3 * cols + 17] = NAN;
  hx[5 * cols + 250] = NAN;
  device_array<float> x(rows * cols), m(rows);
  device_array<std::int64_t> a(rows);
  x.upload(hx);
  stream_guard sg;
  auto xv = fusex::make_view(x.data(), {rows, cols});
  run(sg.s, [&](cudaStream_t s) {
    fusex::eval(fusex::make_view(m.data(), {rows}), fusex::amax(xv, -1), s);
    fusex::eval(fusex::make_view(a.data(), {rows}), fusex::argmax(xv, -1), s);
  });
  const auto hm = m.download();
  const auto ha = a.download();
  CHECK(std::isnan(hm[3]));
  CHECK(std::isnan(hm[5]));
  CHECK(!std::isnan(hm[0]));
  CHECK(ha[3] == 17);
  CHECK(ha[5] == 250);
}

// logsumexp's terms are computed by ex2.approx on the device (reduce_ops.hpp, exp_shifted): rows
// at the ends of the float range and with infinities and NaN, through each path that sums them:
// the row kept in registers (two levels), the row re-read per pass (one-pass combines) and rows
// split across blocks (rule 2). Reference: double-precision loops; the largest term must count.
TEST_CASE("gpu: logsumexp at the ends of the float range, infinities and NaN, every path", "[gpu][reduce]") {
  const float big = 3.0e38f;  // above FLT_MAX / log2(e): big * log2(e) overflows
  for (const std::int64_t cols : {std::int64_t{6}, std::int64_t{5000}, std::int64_t{300001}}) {
    const std::int64_t rows = 8;
    std::vector<float> hx(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) hx[r * cols + c] = -1.0f - static_cast<float>(c % 13) * 0.5f;
    auto at = [&](std::int64_t r, std::int64_t c) -> float& { return hx[static_cast<std::size_t>(r * cols + c)]; };
    at(0, 1) = big;  // the largest term far above the rest
    at(1, 0) = big;  // two equal huge maxima and a huge negative
    at(1, cols - 1) = big;
    at(1, cols / 2) = -big;
    at(2, cols / 3) = INFINITY;
    for (std::int64_t c = 0; c < cols; ++c) at(3, c) = -INFINITY;
    at(4, cols - 2) = NAN;
    for (std::int64_t c = 0; c < cols; ++c) at(5, c) = 5.0f;  // equal terms: log(cols) exactly
    for (std::int64_t c = 0; c < cols; ++c) at(6, c) = -90.0f - static_cast<float>(c % 7);  // tiny terms, e^-90
    for (std::int64_t c = 0; c < cols; ++c) at(7, c) = -big;  // a maximum of -3e38: log(cols) above it
    device_array<float> x(rows * cols), y(rows);
    x.upload(hx);
    y.poison();
    stream_guard sg;
    const auto xv = fusex::make_view(x.data(), {rows, cols});
    const auto yv = fusex::make_view(y.data(), {rows});
    const std::string plan = fusex::explain(yv, fusex::logsumexp(xv, -1));
    INFO("[" << rows << ", " << cols << "]\n" << plan);
    run(sg.s, [&](cudaStream_t s) { fusex::eval(yv, fusex::logsumexp(xv, -1), s); });
    const auto hy = y.download();
    std::vector<double> expect(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, z = 0;
      bool nan = false;
      for (std::int64_t c = 0; c < cols; ++c) {
        nan = nan || std::isnan(at(r, c));
        m = std::max(m, static_cast<double>(at(r, c)));
      }
      if (nan) {
        expect[static_cast<std::size_t>(r)] = NAN;
        continue;
      }
      if (std::isinf(m)) {
        expect[static_cast<std::size_t>(r)] = m;
        continue;
      }
      for (std::int64_t c = 0; c < cols; ++c) z += std::exp(static_cast<double>(at(r, c)) - m);
      expect[static_cast<std::size_t>(r)] = round_to<float>(m + std::log(z));
    }
    const std::string err = compare(hy, expect, 2e-6);
    INFO(err);
    CHECK(err.empty());
  }
}
