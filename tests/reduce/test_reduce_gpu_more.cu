// GPU suite for reductions against a double-precision reference computed with plain loops
// (reduce_gpu_support.hpp), part 2: softmax written out by hand with a cast epilogue and
// non-contiguous rows, determinism, the row kernel's static path against its generic path, a
// destination overlapping its input, and a full sum over more than 2^31 elements (part 1:
// test_reduce_gpu.cu; the two compile in parallel).
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

TEST_CASE("gpu: softmax written out by hand, cast epilogue, non-contiguous rows", "[gpu][reduce]") {
  const std::int64_t rows = 40, cols = 1000;
  const auto hx = random_values<float>(rows * 2 * cols, -4, 4, 31);
  device_array<float> x(rows * 2 * cols);
  device_array<bfloat16> y(rows * cols);
  x.upload(hx);
  y.poison();
  stream_guard sg;
  // Every other row of a [2*rows, cols] tensor: rows with a stride of 2*cols.
  auto xs = fusex::make_view(x.data(), {rows, cols}, {2 * cols, 1});
  auto e = fusex::cast<bfloat16>(fusex::exp(xs - fusex::max(xs, -1, fusex::keepdim)) /
                                 fusex::sum(fusex::exp(xs - fusex::max(xs, -1, fusex::keepdim)), -1, fusex::keepdim));
  auto yv = fusex::make_view(y.data(), {rows, cols});
  INFO(fusex::explain(yv, e));
  CHECK(fusex::explain(yv, e).find("1 kernel") != std::string::npos);
  run(sg.s, [&](cudaStream_t s) { fusex::eval(yv, e, s); });
  const auto hy = y.download();
  std::vector<double> expect(rows * cols), row(cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) row[c] = hx[r * 2 * cols + c];
    const auto st = composite_test::softmax_stats(row);
    for (std::int64_t c = 0; c < cols; ++c) expect[r * cols + c] = std::exp(row[c] - st.m) / st.z;
  }
  // Relative, in float: each term's expf (2 ulp, 4u) of a difference rounded by u|d| (|d| <= 8
  // here), the sum's `depth` levels of u (positive terms), and the quotient's expf, difference
  // and division; then one rounding to bfloat16 (eps/2) and below its normal range half its
  // smallest subnormal.
  const double u = composite_test::u_f, d_max = 8;
  const double acc = (composite_test::sum_depth(cols) + 1) * u + 2 * (4 + d_max) * u + u;
  const std::string err = compare_rel(hy, expect, epsilon_of<bfloat16>() / 2 + acc * (1 + epsilon_of<bfloat16>()),
                                      denorm_min_of<bfloat16>() / 2);
  INFO(err);
  CHECK(err.empty());
}

TEST_CASE("gpu: reductions are deterministic (bit-identical runs)", "[gpu][reduce]") {
  const std::int64_t rows = 512, cols = 4096;
  device_array<float> x(rows * cols), a(rows * cols), b(rows * cols), s1(cols), s2(cols), t1(1), t2(1);
  x.upload(random_values<float>(rows * cols, -3, 3, 55));
  stream_guard sg;
  auto xv = fusex::make_view(x.data(), {rows, cols});
  run(sg.s, [&](cudaStream_t s) {
    fusex::eval(fusex::make_view(a.data(), {rows, cols}), fusex::softmax(xv), s);
    fusex::eval(fusex::make_view(b.data(), {rows, cols}), fusex::softmax(xv), s);
    fusex::eval(fusex::make_view(s1.data(), {cols}), fusex::sum(xv, 0), s);
    fusex::eval(fusex::make_view(s2.data(), {cols}), fusex::sum(xv, 0), s);
    fusex::eval(fusex::make_view(t1.data(), {}), fusex::sum(xv * xv), s);
    fusex::eval(fusex::make_view(t2.data(), {}), fusex::sum(xv * xv), s);
  });
  const auto ha = a.download(), hb = b.download(), hs1 = s1.download(), hs2 = s2.download(), ht1 = t1.download(),
             ht2 = t2.download();
  CHECK(std::memcmp(ha.data(), hb.data(), ha.size() * 4) == 0);
  CHECK(std::memcmp(hs1.data(), hs2.data(), hs1.size() * 4) == 0);
  CHECK(std::memcmp(ht1.data(), ht2.data(), 4) == 0);
}

// The static path (roles and unit strides as compile-time facts) and the generic cached path
// (roles tested at run time) compute the same operations in the same order: their results are
// bit-identical. Few rows (one vector per thread), many short rows (groups smaller than a warp,
// four vectors per thread), four vectors per thread forced, and a one-value-per-row epilogue.
TEMPLATE_TEST_CASE("gpu: the row kernel's static path matches the generic path bit for bit", "[gpu][reduce]", float,
                   bfloat16) {
  using T = TestType;
  struct shape_case {
    std::int64_t rows, cols;
    int vectors;
  };
  std::vector<shape_case> cases{shape_case{37, 8, 0},     shape_case{37, 1000, 0},   shape_case{37, 4096, 0},
                                shape_case{4096, 128, 0}, shape_case{4096, 1024, 0}, shape_case{37, 1000, 4}};
  if (sizeof(T) == 2) cases.push_back(shape_case{37, 8192, 0});  // 2-byte rows keep up to 8192 columns on chip
  for (const shape_case sc : cases) {
    const std::int64_t rows = sc.rows, cols = sc.cols;
    INFO("[" << rows << ", " << cols << "] " << fusex::dtype_name<T>() << ", vectors per thread " << sc.vectors);
    const row_vectors vectors(sc.vectors);
    device_array<T> x(rows * cols), g(cols), b(cols), a(rows * cols), c(rows * cols);
    device_array<float> na(rows), nc(rows);
    x.upload(random_values<T>(rows * cols, -3, 3, 61));
    g.upload(random_values<T>(cols, 0.5, 1.5, 62));
    b.upload(random_values<T>(cols, -0.5, 0.5, 63));
    stream_guard sg;
    const auto xv = fusex::make_view(x.data(), {rows, cols});
    const auto gv = fusex::make_view(g.data(), {cols});
    const auto bv = fusex::make_view(b.data(), {cols});
    auto both = [&](const char* name, auto& ra, auto& rc, const auto& av, const auto& cv, const auto& e) {
      INFO(name);
      const std::string plan = fusex::explain(av, e);
      INFO(plan);
      CHECK(plan.find("static path") != std::string::npos);
      ra.poison();
      rc.poison();
      run(sg.s, [&](cudaStream_t s) {
        fusex::eval(av, e, s);
        const scoped_setting<bool> generic(fusex::detail::row_tuning_state().static_path, false);
        fusex::eval(cv, e, s);
      });
      {
        const scoped_setting<bool> generic(fusex::detail::row_tuning_state().static_path, false);
        CHECK(fusex::explain(cv, e).find("roles tested at run time") != std::string::npos);
      }
      const auto ha = ra.download(), hc = rc.download();
      CHECK(std::memcmp(ha.data(), hc.data(), ha.size() * sizeof(ha[0])) == 0);
    };
    const auto av = fusex::make_view(a.data(), {rows, cols});
    const auto cv = fusex::make_view(c.data(), {rows, cols});
    both("softmax", a, c, av, cv, fusex::softmax(xv));
    both("layer_norm", a, c, av, cv, fusex::layer_norm(xv, gv, bv));
    both("rms_norm", a, c, av, cv, fusex::rms_norm(xv, gv));
    // (Its float32 destination makes the vectors 4 wide: 16 elements per thread, so rows of up
    // to 4096 columns are kept on chip, whatever the leaves' type.)
    if (cols <= 4096) {
      both("L2 norm per row", na, nc, fusex::make_view(na.data(), {rows}), fusex::make_view(nc.data(), {rows}),
           fusex::sqrt(fusex::cast<float>(fusex::sum(xv * xv, -1))));
    }
  }
}

// Error catalogue (docs/reliability.md): the row kernel checks overlap itself (the host backend
// materialises reductions first, so only a device evaluation reaches this check). softmax of a
// float view is already instantiated above: no new kernel.
TEST_CASE("gpu: a row reduction whose destination overlaps its input is refused before launch",
          "[gpu][reduce][errors]") {
  const std::int64_t rows = 8, cols = 256;
  device_array<float> x(rows * cols + 1);
  stream_guard sg;
  const auto xv = fusex::make_view(x.data(), {rows, cols});
  const auto shifted = fusex::make_view(x.data() + 1, {rows, cols});
  REQUIRE(fusex::explain(shifted, fusex::softmax(xv)).find("row reduction") != std::string::npos);
  std::string m;
  try {
    run(sg.s, [&](cudaStream_t s) { fusex::eval(shifted, fusex::softmax(xv), s); });
  } catch (const fusex::invalid_argument& e) {
    m = e.what();
  }
  INFO(m);
  CHECK(m.find("destination (float32 [8, 256] strides [256, 1]) overlaps input 0") != std::string::npos);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
}

TEST_CASE("gpu: a full sum over more than 2^31 elements", "[gpu][reduce][large]") {
  const std::size_t n = (std::size_t{1} << 31) + 4099;
  device_array<std::uint8_t> x(n);
  device_array<std::int64_t> s(1);
  fill_pattern<<<1024, 256>>>(x.data(), n);
  FUSEX_CUDA_CHECK(cudaGetLastError());
  FUSEX_CUDA_CHECK(cudaDeviceSynchronize());
  stream_guard sg;
  run(sg.s, [&](cudaStream_t st) {
    fusex::eval(fusex::make_view(s.data(), {}), fusex::sum(fusex::make_view(x.data(), {static_cast<std::int64_t>(n)})),
                st);
  });
  std::int64_t expect = 0;
  const std::size_t cycles = n / 251;
  expect += static_cast<std::int64_t>(cycles) * (251 * 252 / 2);
  for (std::size_t i = cycles * 251; i < n; ++i) expect += static_cast<std::int64_t>(i % 251 + 1);
  CHECK(s.download()[0] == expect);
}

// Reductions whose counts or offsets reach 2^31 run as several launches of the 32-bit kernels
// (plan/reduce_pieces.hpp). Index leaves make them cheap (no memory) and every answer exact:
//  - one output over more than 2^31 elements: its pieces leave partials that one launch combines
//    (sum; a mean of threes divides by the whole count; argmin's index is the piece's first plus its own);
//  - several outputs of that kind (each output's pieces start at its own row);
//  - whole rows or columns whose count reaches 2^31: the outputs are cut, each piece writing at an
//    offset (rows: the 2-D row kernel; columns: the generic kernel, the pieces' output counts
//    being odd).
TEST_CASE("gpu: reductions over 2^31 elements or more run in 32-bit pieces", "[gpu][reduce][large]") {
  using fusex::shape_t;
  const std::int64_t n = (std::int64_t{1} << 31) + 4099, peak = (std::int64_t{1} << 31) + 17;
  const std::int64_t m = (std::int64_t{1} << 31) + 5;
  const std::int64_t rows = std::int64_t{1} << 21, cols = 1024;
  device_array<std::int64_t> total(1), where_min(1), per_row(3), row_sums(static_cast<std::size_t>(rows)),
      col_sums(static_cast<std::size_t>(rows));
  device_array<float> average(1);
  total.poison();
  where_min.poison();
  per_row.poison();
  row_sums.poison();
  col_sums.poison();
  average.poison();
  stream_guard sg;
  run(sg.s, [&](cudaStream_t st) {
    fusex::eval(fusex::make_view(total.data(), {}), fusex::sum(fusex::arange(n)), st);
    fusex::eval(fusex::make_view(average.data(), {}), fusex::mean(fusex::arange(n) * 0 + 3), st);
    fusex::eval(fusex::make_view(where_min.data(), {}), fusex::argmin(fusex::abs(fusex::arange(n) - peak)), st);
    const shape_t s3{3, m};
    fusex::eval(fusex::make_view(per_row.data(), {3}), fusex::sum(fusex::iota(s3, 1) + fusex::iota(s3, 0), 1), st);
    fusex::eval(fusex::make_view(row_sums.data(), {rows}), fusex::sum(fusex::iota(shape_t{rows, cols}, 0), 1), st);
    fusex::eval(fusex::make_view(col_sums.data(), {rows}), fusex::sum(fusex::iota(shape_t{cols, rows}, 1), 0), st);
  });
  CHECK(total.download()[0] == n * (n - 1) / 2);
  CHECK(average.download()[0] == 3.0f);  // the partial sums divided by the whole count
  CHECK(where_min.download()[0] == peak);
  const auto pr = per_row.download();
  for (std::int64_t k = 0; k < 3; ++k) CHECK(pr[static_cast<std::size_t>(k)] == m * (m - 1) / 2 + k * m);
  const auto rsum = row_sums.download(), csum = col_sums.download();
  std::int64_t bad_rows = 0, bad_cols = 0;
  for (std::int64_t k = 0; k < rows; ++k) {
    bad_rows += rsum[static_cast<std::size_t>(k)] != k * cols;
    bad_cols += csum[static_cast<std::size_t>(k)] != k * cols;
  }
  CHECK(bad_rows == 0);
  CHECK(bad_cols == 0);
}

// The reduced axis has a stride of 2^31 elements (a [4, 1024] view into 6 GiB): no piece may hold
// two of its coordinates, so each reduced coordinate is a piece with all 1024 outputs, folded into
// running accumulators (not one launch per output and coordinate); argmax's index is the piece's.
TEST_CASE("gpu: a reduction along an axis of stride 2^31 runs in pieces of many outputs", "[gpu][reduce][large]") {
  const std::int64_t big = std::int64_t{1} << 31, cols = 1024;
  device_array<std::uint8_t> x(static_cast<std::size_t>(3 * big + cols));
  for (std::int64_t r = 0; r < 4; ++r) {
    host_vector<std::uint8_t> row(static_cast<std::size_t>(cols));
    for (std::int64_t c = 0; c < cols; ++c)
      row[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(r == c % 4 ? 200 : r + 1);
    FUSEX_CUDA_CHECK(
        cudaMemcpy(x.data() + r * big, row.data(), static_cast<std::size_t>(cols), cudaMemcpyHostToDevice));
  }
  const auto xv = fusex::make_view<const std::uint8_t>(x.data(), {4, cols}, {big, 1});
  device_array<std::int64_t> sums(static_cast<std::size_t>(cols)), where_max(static_cast<std::size_t>(cols));
  device_array<float> means(static_cast<std::size_t>(cols));
  sums.poison();
  where_max.poison();
  means.poison();
  stream_guard sg;
  run(sg.s, [&](cudaStream_t st) {
    fusex::eval(fusex::make_view(sums.data(), {cols}), fusex::sum(xv, 0), st);
    fusex::eval(fusex::make_view(where_max.data(), {cols}), fusex::argmax(xv, 0), st);
    fusex::eval(fusex::make_view(means.data(), {cols}), fusex::mean(xv, 0), st);
  });
  const auto hs = sums.download(), hw = where_max.download();
  const auto hm = means.download();
  std::int64_t bad = 0;
  for (std::int64_t c = 0; c < cols; ++c) {
    const std::int64_t want = 1 + 2 + 3 + 4 - (c % 4 + 1) + 200;
    bad += hs[static_cast<std::size_t>(c)] != want;
    bad += hw[static_cast<std::size_t>(c)] != c % 4;
    bad += hm[static_cast<std::size_t>(c)] != static_cast<float>(want) / 4;
  }
  CHECK(bad == 0);
}

// Several outputs per piece and several splits per output, in both partial layouts: uint8 views
// into 6 GiB with a 2^31 stride on a reduced axis. [4, 64, 1024] strides {2^31, 1, 64} reduced over
// (0, 1): the innermost dimension is kept (thread kernel, split-major partials); [4, 1024, 64]
// strides {2^31, 64, 1} reduced over (0, 2): it is reduced (block kernel, output-major partials).
// And a layout that would need too many pieces is refused with a message, before any launch.
TEST_CASE("gpu: pieces with many outputs and splits, both partial layouts; too many pieces refused",
          "[gpu][reduce][large]") {
  const std::int64_t big = std::int64_t{1} << 31, plane = 64 * 1024;
  device_array<std::uint8_t> x(static_cast<std::size_t>(3 * big + plane));
  auto value = [](std::int64_t a, std::int64_t off) { return static_cast<std::uint8_t>((a * 7 + off * 3) % 251 + 1); };
  for (std::int64_t a = 0; a < 4; ++a) {
    host_vector<std::uint8_t> h(static_cast<std::size_t>(plane));
    for (std::int64_t o = 0; o < plane; ++o) h[static_cast<std::size_t>(o)] = value(a, o);
    FUSEX_CUDA_CHECK(
        cudaMemcpy(x.data() + a * big, h.data(), static_cast<std::size_t>(plane), cudaMemcpyHostToDevice));
  }
  const auto cols_kept = fusex::make_view<const std::uint8_t>(x.data(), {4, 64, 1024}, {big, 1, 64});
  const auto rows_kept = fusex::make_view<const std::uint8_t>(x.data(), {4, 1024, 64}, {big, 64, 1});
  device_array<std::int64_t> s1(1024), s2(1024);
  s1.poison();
  s2.poison();
  stream_guard sg;
  run(sg.s, [&](cudaStream_t st) {
    fusex::eval(fusex::make_view(s1.data(), {1024}), fusex::sum(cols_kept, {0, 1}), st);
    fusex::eval(fusex::make_view(s2.data(), {1024}), fusex::sum(rows_kept, {0, 2}), st);
  });
  const auto h1 = s1.download(), h2 = s2.download();
  std::int64_t bad = 0;
  for (std::int64_t k = 0; k < 1024; ++k) {
    std::int64_t w1 = 0, w2 = 0;
    for (std::int64_t a = 0; a < 4; ++a)
      for (std::int64_t j = 0; j < 64; ++j) {
        w1 += value(a, j + 64 * k);  // cols_kept[a, j, k] is at a * 2^31 + j + 64 k
        w2 += value(a, 64 * k + j);  // rows_kept[a, k, j] is at a * 2^31 + 64 k + j
      }
    bad += h1[static_cast<std::size_t>(k)] != w1;
    bad += h2[static_cast<std::size_t>(k)] != w2;
  }
  CHECK(bad == 0);
  // [2^17, 16, 2] with strides {2, 2^28, 1} (a transposed view spanning 3.75 GiB): summing the last
  // axis would take a piece per (row, pair of columns), 2^18 of them.
  const std::int64_t rows = std::int64_t{1} << 17;
  const auto permuted =
      fusex::make_view<const std::uint8_t>(x.data(), {rows, 16, 2}, {2, std::int64_t{1} << 28, 1});
  device_array<std::int64_t> out(static_cast<std::size_t>(rows * 16));
  std::string m;
  try {
    fusex::eval(fusex::make_view(out.data(), {rows, 16}), fusex::sum(permuted, 2), sg.s);
  } catch (const fusex::error& e) {
    m = e.what();
  }
  INFO(m);
  CHECK(m.find("launches of 32-bit pieces") != std::string::npos);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
}
