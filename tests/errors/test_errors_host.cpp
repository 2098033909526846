// Error catalogue, host part (docs/reliability.md): for each bad input, the exception type and
// that the message names the culprit.
#include <fusex/fusex.hpp>
#include <fusex/memory/pinned.hpp>

#include "fusex_catch.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace {
bool has(const std::string& m, const std::string& part) { return m.find(part) != std::string::npos; }

// e + v + v + ... (n more leaves v): an expression of as many operands as one wants.
template <int N, class E, class V>
auto add_leaves(const E& e, const V& v) {
  if constexpr (N == 0) {
    return e;
  } else {
    return add_leaves<N - 1>(e + v, v);
  }
}

cudaError_t returns(cudaError_t code) { return code; }

// A resource without record_stream (the tests never get memory from it).
struct plain_resource {
  void* allocate_async(std::size_t, std::size_t, cudaStream_t) { return nullptr; }
  void deallocate_async(void*, std::size_t, std::size_t, cudaStream_t) {}
};
cudaStream_t some_stream() { return reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1230}); }
}  // namespace

TEST_CASE("errors: shapes that do not broadcast name both shapes", "[errors]") {
  std::vector<float> a(6), b(4), y(6);
  const auto va = fusex::make_view(a.data(), {2, 3});
  const auto vb = fusex::make_view(b.data(), {4});
  const auto vy = fusex::make_view(y.data(), {2, 3});
  const std::string m = thrown_message<fusex::shape_error>([&] { fusex::host::eval(vy, va + vb); });
  INFO(m);
  CHECK(has(m, "[2, 3]"));
  CHECK(has(m, "[4]"));
}

TEST_CASE("errors: destination of the wrong shape names both shapes", "[errors]") {
  std::vector<float> a(6), y(4);
  const auto va = fusex::make_view(a.data(), {2, 3});
  const auto vy = fusex::make_view(y.data(), {4});
  const std::string m = thrown_message<fusex::shape_error>([&] { fusex::host::eval(vy, va * 2.0f); });
  INFO(m);
  CHECK(has(m, "[2, 3]"));
  CHECK(has(m, "[4]"));
}

TEST_CASE("errors: overlapping destination and input name both operands", "[errors]") {
  std::vector<float> buf(8);
  const auto dst = fusex::make_view(buf.data() + 1, {4});
  const auto src = fusex::make_view(buf.data(), {4});
  const std::string m = thrown_message<fusex::invalid_argument>([&] { fusex::host::eval(dst, src + 1.0f); });
  INFO(m);
  CHECK(has(m, "destination 0"));
  CHECK(has(m, "input 0"));
  CHECK(has(m, "overlaps"));
}

TEST_CASE("errors: a destination that overlaps itself names it", "[errors]") {
  std::vector<float> buf(8);
  const auto dst = fusex::make_view(buf.data(), {4, 2}, {1, 1});
  const std::string m = thrown_message<fusex::invalid_argument>([&] { fusex::host::eval(dst, 1.0f); });
  INFO(m);
  CHECK(has(m, "destination 0"));
  CHECK(has(m, "[4, 2]"));
  CHECK(has(m, "share memory"));
}

TEST_CASE("errors: null pointer with elements names the shape", "[errors]") {
  float* null = nullptr;
  const std::string m = thrown_message<fusex::invalid_argument>([&] { (void)fusex::make_view(null, {3, 5}); });
  INFO(m);
  CHECK(has(m, "null pointer"));
  CHECK(has(m, "[3, 5]"));
  CHECK(has(m, "15 elements"));
}

TEST_CASE("errors: negative extent and stride, stride count", "[errors]") {
  std::vector<float> a(8);
  const std::string m1 = thrown_message<fusex::shape_error>([&] { (void)fusex::make_view(a.data(), {2, -1}); });
  CHECK(has(m1, "[2, -1]"));
  const std::string m2 = thrown_message<fusex::shape_error>([&] { (void)fusex::make_view(a.data(), {2, 2}, {-1, 1}); });
  CHECK(has(m2, "[-1, 1]"));
  const std::string m3 = thrown_message<fusex::shape_error>([&] { (void)fusex::make_view(a.data(), {2, 2}, {1}); });
  CHECK(has(m3, "[2, 2]"));
  CHECK(has(m3, "[1]"));
}

TEST_CASE("errors: rank above max_rank names the rank", "[errors]") {
  const std::string m = thrown_message<fusex::shape_error>([&] { fusex::shape_t s{1, 1, 1, 1, 1, 1, 1, 1, 1}; });
  INFO(m);
  CHECK(has(m, "rank 9"));
  CHECK(has(m, "max_rank (8)"));
}

TEST_CASE("errors: bad and repeated reduction axes name the axis and the shape", "[errors]") {
  std::vector<float> a(6);
  const auto va = fusex::make_view(a.data(), {2, 3});
  const std::string m1 = thrown_message<fusex::shape_error>([&] { (void)fusex::sum(va, 2); });
  INFO(m1);
  CHECK(has(m1, "sum"));
  CHECK(has(m1, "axis 2"));
  CHECK(has(m1, "[2, 3]"));
  const std::string m2 = thrown_message<fusex::shape_error>([&] { (void)fusex::amax(va, {1, -1}); });
  INFO(m2);
  CHECK(has(m2, "repeated"));
  CHECK(has(m2, "[2, 3]"));
}

TEST_CASE("errors: a reduction without identity over an empty axis names the axis", "[errors]") {
  std::vector<float> a(1);
  const auto va = fusex::make_view(a.data(), {0, 3});
  const std::string m = thrown_message<fusex::shape_error>([&] { (void)fusex::amax(va, 0); });
  INFO(m);
  CHECK(has(m, "empty axis 0"));
  CHECK(has(m, "[0, 3]"));
}

TEST_CASE("errors: view operations name the call, the axis and the shape", "[errors]") {
  std::vector<float> a(6);
  const auto va = fusex::make_view(a.data(), {2, 3});
  const std::string m1 = thrown_message<fusex::shape_error>([&] { (void)va.slice(1, 0, 4); });
  CHECK(has(m1, "slice(1, 0, 4, 1)"));
  CHECK(has(m1, "[2, 3]"));
  const std::string m2 = thrown_message<fusex::shape_error>([&] { (void)va.transpose(0, 2); });
  CHECK(has(m2, "transpose dimension 2"));
  const std::string m3 = thrown_message<fusex::shape_error>([&] { (void)va.permute({0, 0}); });
  CHECK(has(m3, "[0, 0]"));
  const std::string m4 = thrown_message<fusex::shape_error>([&] { (void)va.reshape({4, 2}); });
  CHECK(has(m4, "[2, 3]"));
  CHECK(has(m4, "[4, 2]"));
  const std::string m5 = thrown_message<fusex::shape_error>([&] { (void)va.t().reshape({6}); });
  CHECK(has(m5, "contiguous"));
  const std::string m6 = thrown_message<fusex::shape_error>([&] { (void)va.broadcast_to({3, 3}); });
  CHECK(has(m6, "[2, 3]"));
  CHECK(has(m6, "[3, 3]"));
  const std::string m7 = thrown_message<fusex::shape_error>([&] { (void)va.squeeze(0); });
  CHECK(has(m7, "squeeze(0)"));
  CHECK(has(m7, "[2, 3]"));
  const std::string m8 = thrown_message<fusex::shape_error>([&] { (void)fusex::make_view(a.data(), {6}).t(); });
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
    const std::string m = thrown_message<fusex::shape_error>([&] { f(v); });
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

TEST_CASE("errors: more than 64 operands in one evaluation names the limit", "[errors]") {
  std::vector<float> a(6, 1.0f), y(6);
  const auto va = fusex::make_view(static_cast<const float*>(a.data()), {2, 3});
  const auto vy = fusex::make_view(y.data(), {2, 3});
  // 64 operands (the destination and 63 leaves) are fine.
  fusex::host::eval(vy, add_leaves<62>(va * 1.0f, va));
  CHECK(y[5] == 63.0f);
  // 65 leaves and the destination are not.
  const std::string m =
      thrown_message<fusex::invalid_argument>([&] { fusex::host::eval(vy, add_leaves<64>(va * 1.0f, va)); });
  INFO(m);
  CHECK(has(m, "more than 64 operands in one evaluation (66:"));
}

TEST_CASE("errors: a failed CUDA call names the call, the error, the file and the line", "[errors]") {
  int line = 0;
  bool caught = false;
  try {
    line = __LINE__ + 1;
    FUSEX_CUDA_CHECK(returns(cudaErrorInvalidValue));
  } catch (const fusex::cuda_error& e) {
    caught = true;
    const std::string m = e.what();
    INFO(m);
    CHECK(has(m, "'returns(cudaErrorInvalidValue)'"));
    CHECK(has(m, "failed with cudaErrorInvalidValue"));
    CHECK(has(m, "test_errors_host.cpp:" + std::to_string(line)));
    CHECK(e.code() == cudaErrorInvalidValue);
    CHECK(e.line() == line);
    CHECK(std::string(e.call()) == "returns(cudaErrorInvalidValue)");
  }
  CHECK(caught);
  CHECK_NOTHROW(FUSEX_CUDA_CHECK(returns(cudaSuccess)));
}

TEST_CASE("errors: a device ordinal out of range names the ordinal", "[errors]") {
  // Kernel launches read the device's properties through this cache; checked before any CUDA call.
  const std::string m1 = thrown_message<fusex::invalid_argument>([] { (void)fusex::detail::device_info(-1); });
  INFO(m1);
  CHECK(has(m1, "device ordinal -1"));
  const std::string m2 = thrown_message<fusex::invalid_argument>([] { (void)fusex::detail::device_info(64); });
  CHECK(has(m2, "device ordinal 64"));
  // The per-device default resources.
  const std::string m3 = thrown_message<fusex::invalid_argument>([] { (void)fusex::get_default_resource(-1); });
  INFO(m3);
  CHECK(has(m3, "device -1 is out of range (0 to 63)"));
  const std::string m4 = thrown_message<fusex::invalid_argument>([] { (void)fusex::default_arena(64); });
  CHECK(has(m4, "device 64"));
}

TEST_CASE("errors: buffer and resource misuse name the size or the call", "[errors]") {
  plain_resource pr;
  const fusex::device_resource_ref ref(pr);
  const std::size_t too_many = std::numeric_limits<std::size_t>::max() / 4;
  const std::string m1 =
      thrown_message<fusex::invalid_argument>([&] { fusex::buffer<double> b(too_many, some_stream(), ref); });
  INFO(m1);
  CHECK(has(m1, "buffer of " + std::to_string(too_many) + " elements of 8 bytes overflows"));
  const std::string m2 = thrown_message<fusex::invalid_argument>([&] { ref.record_stream(nullptr, some_stream()); });
  CHECK(has(m2, "no record_stream"));
  // The empty reference of a default-constructed buffer.
  const fusex::device_resource_ref none(fusex::detail::null_resource_instance());
  const std::string m3 = thrown_message<fusex::error>([&] { (void)none.allocate_async(16, 256, some_stream()); });
  CHECK(has(m3, "allocation of 16 bytes from an empty resource reference"));
  float x = 0;
  const std::string m4 = thrown_message<fusex::error>([&] { none.deallocate_async(&x, 16, 256, some_stream()); });
  CHECK(has(m4, "deallocation of 16 bytes through an empty resource reference"));
  // cudaMallocAsync / cudaMalloc wrappers: the alignment is checked before any CUDA call.
  fusex::cuda_async_resource ar;
  const std::string m5 =
      thrown_message<fusex::invalid_argument>([&] { (void)ar.allocate_async(64, 3, some_stream()); });
  INFO(m5);
  CHECK(has(m5, "cuda_async_resource: alignment 3"));
  fusex::cuda_malloc_resource mr;
  const std::string m6 =
      thrown_message<fusex::invalid_argument>([&] { (void)mr.allocate_async(64, 512, some_stream()); });
  CHECK(has(m6, "cuda_malloc_resource: alignment 512"));
}

TEST_CASE("errors: pinned staging names the size, the shape or the pointer", "[errors]") {
  // Every check here comes before any CUDA call.
  fusex::pinned_host_resource r;
  const std::string m1 = thrown_message<fusex::invalid_argument>([&] { (void)r.allocate(64, 3); });
  INFO(m1);
  CHECK(has(m1, "alignment 3 (for 64 bytes)"));
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  bool caught = false;
  try {
    (void)r.allocate(huge);
  } catch (const fusex::bad_alloc& e) {
    caught = true;
    CHECK(has(e.what(), "request of " + std::to_string(huge) + " bytes too large"));
    CHECK(e.requested_bytes() == huge);
  }
  CHECK(caught);
  const std::string m2 = thrown_message<fusex::invalid_argument>([&] { r.deallocate(nullptr, 16); });
  CHECK(has(m2, "deallocate of a null pointer with a size of 16 bytes"));
  float x = 0;
  const std::string m3 = thrown_message<fusex::invalid_argument>([&] { r.deallocate(&x, 16); });
  INFO(m3);
  CHECK(has(m3, fusex::detail::format_pointer(&x) + " is not a live block"));
  const std::size_t too_many = std::numeric_limits<std::size_t>::max() / 4;
  const std::string m4 = thrown_message<fusex::invalid_argument>([&] { fusex::pinned_buffer<double> b(too_many, r); });
  CHECK(has(m4, "pinned_buffer of " + std::to_string(too_many) + " elements overflows"));
  const fusex::pinned_buffer<float> empty;
  const std::string m5 = thrown_message<fusex::shape_error>([&] { (void)empty.view(fusex::shape_t{2, 3}); });
  INFO(m5);
  CHECK(has(m5, "pinned_buffer of 0 elements viewed as shape [2, 3]"));
  CHECK(r.stats().bytes_reserved == 0);
}

TEST_CASE("errors: a row reduction whose destination overlaps an input names both operands", "[errors]") {
  // The device's row kernel (rule 1) checks overlap itself (the host backend materialises the
  // reductions first): the same planning and check as fusex::eval, run here on the host.
  const std::int64_t rows = 8, cols = 256;
  std::vector<float> buf(static_cast<std::size_t>(rows * cols + 1));
  const auto x = fusex::make_view(buf.data(), {rows, cols});
  const auto e = fusex::softmax(x);
  auto plan = [&](const fusex::view<float>& dst) {
    std::vector<fusex::detail::reduction_info> reds;
    fusex::detail::collect_reductions(e, reds);
    auto ro = fusex::detail::gather_row_operands(dst, e);
    const auto L = fusex::detail::plan_rows(ro.ops.data(), ro.inside.data(), static_cast<int>(ro.ops.size()), reds, 4);
    REQUIRE(L.ok);
    fusex::detail::check_row_overlap(ro.ops, L);
  };
  const auto shifted = fusex::make_view(buf.data() + 1, {rows, cols});
  CHECK(has(fusex::explain(shifted, e), "row reduction"));  // fusex::eval takes the row kernel
  const std::string m1 = thrown_message<fusex::invalid_argument>([&] { plan(shifted); });
  INFO(m1);
  CHECK(has(m1, "destination (float32 [8, 256] strides [256, 1]) overlaps input 0 (float32 [8, 256]"));
  CHECK(has(m1, "other than element for element"));
  // One value per row written over the rows it reads.
  const auto sums = fusex::make_view(buf.data(), {rows});
  const auto s = fusex::sum(x, -1);
  std::vector<fusex::detail::reduction_info> reds;
  fusex::detail::collect_reductions(s, reds);
  auto ro = fusex::detail::gather_row_operands(sums, s);
  const auto L = fusex::detail::plan_rows(ro.ops.data(), ro.inside.data(), static_cast<int>(ro.ops.size()), reds, 4);
  REQUIRE(L.ok);
  const std::string m2 = thrown_message<fusex::invalid_argument>([&] { fusex::detail::check_row_overlap(ro.ops, L); });
  INFO(m2);
  CHECK(has(m2, "destination (float32 [8] strides [1]) overlaps input 0"));
  // In place, element for element, is allowed.
  CHECK_NOTHROW(plan(x));
}
