// Host tests of fusex::from_dlpack (include/fusex/dlpack.hpp): DLPack tensors of host memory as
// views, read and written through fusex::host::eval and checked against double references
// computed here, and every kind of tensor fusex cannot take rejected with a message naming why.
// (to_dlpack owns device memory: test_dlpack_gpu.cu.)
#include <fusex/dlpack.hpp>
#include <fusex/fusex.hpp>

#include "dlpack_types.hpp"
#include "fusex_catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace fxt_dl;

namespace {
std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(0.25f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = (g() & 1) ? u(g) : -u(g);  // non-zero, both signs
  return v;
}
constexpr DLDataType f32{kDLFloat, 32, 1};
bool close(double got, double want) { return std::abs(got - want) <= 1e-6 * std::abs(want) + 1e-7; }
// Whether `message` contains `text` (printed on failure).
bool says(const std::string& message, const std::string& text) {
  INFO("message: " << message << "\nexpected to contain: " << text);
  const bool found = message.find(text) != std::string::npos;
  CHECK(found);
  return found;
}
}  // namespace

TEST_CASE("dlpack: a contiguous host tensor is a view; fusex reads and writes through it", "[dlpack]") {
  const std::int64_t R = 5, C = 7;
  auto x = random_floats(R * C, 1);
  std::vector<float> y(R * C, std::numeric_limits<float>::quiet_NaN());  // poisoned
  std::int64_t shape[2] = {R, C};
  DLTensor tx = make_tensor(x.data(), f32, shape, 2);  // null strides: compact row-major
  DLTensor ty = make_tensor(y.data(), f32, shape, 2);
  const auto xv = fusex::from_dlpack<const float>(tx);
  const auto yv = fusex::from_dlpack<float>(ty);
  CHECK(xv.data() == x.data());
  CHECK(xv.shape() == fusex::shape_t{R, C});
  CHECK(xv.strides() == fusex::strides_t{C, 1});
  fusex::host::eval(yv, fusex::relu(xv * 2.0f + 1.0f));
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double want = std::max(2.0 * x[i] + 1.0, 0.0);
    INFO("element " << i);
    CHECK(close(y[i], want));
  }
}

TEST_CASE("dlpack: strides, byte_offset and one-element dimensions", "[dlpack]") {
  // A transposed [C, R] view of a [R, C] buffer that starts one row in (byte_offset).
  const std::int64_t R = 4, C = 6;
  auto buf = random_floats((R + 1) * C, 2);
  std::int64_t shape[2] = {C, R}, strides[2] = {1, C};
  DLTensor t = make_tensor(buf.data(), f32, shape, 2, strides, C * sizeof(float));
  const auto v = fusex::from_dlpack<const float>(t);
  CHECK(v.data() == buf.data() + C);
  CHECK(v.strides() == fusex::strides_t{1, C});
  std::vector<float> out(C * R, std::numeric_limits<float>::quiet_NaN());
  fusex::host::eval(fusex::make_view(out.data(), {C, R}), v + 0.5f);
  for (std::int64_t i = 0; i < C; ++i)
    for (std::int64_t j = 0; j < R; ++j) {
      INFO("[" << i << ", " << j << "]");
      CHECK(close(out[static_cast<std::size_t>(i * R + j)],
                  static_cast<double>(buf[static_cast<std::size_t>((j + 1) * C + i)]) + 0.5));
    }
  // A dimension of one element may carry any stride, even a negative one (frameworks leave them).
  std::int64_t shape1[3] = {R, 1, C}, strides1[3] = {C, -7, 1};
  DLTensor t1 = make_tensor(buf.data(), f32, shape1, 3, strides1);
  const auto v1 = fusex::from_dlpack<const float>(t1);
  CHECK(v1.strides() == fusex::strides_t{C, 0, 1});
  // Rank 0: one element, no shape pointer needed.
  DLTensor t0 = make_tensor(buf.data(), f32, nullptr, 0);
  const auto v0 = fusex::from_dlpack<const float>(t0);
  CHECK(v0.rank() == 0);
  CHECK(v0.size() == 1);
}

TEST_CASE("dlpack: every fusex dtype maps to its DLPack code and width", "[dlpack]") {
  std::int64_t shape[1] = {3};
  std::int64_t i64[3] = {-5, 0, 1LL << 40};
  std::uint8_t u8[3] = {1, 200, 255};
  std::int8_t i8[3] = {-128, 3, 127};
  std::int32_t i32[3] = {-7, 8, 9};
  double f64[3] = {0.1, -2.5, 3.0};
  bool b[3] = {true, false, true};
  fusex::bfloat16 bf[3] = {fusex::bfloat16(1.5f), fusex::bfloat16(-2.0f), fusex::bfloat16(0.25f)};
  fusex::half h[3] = {fusex::half(1.5f), fusex::half(-2.0f), fusex::half(0.25f)};
  std::vector<double> out(3);
  const auto ov = fusex::make_view(out.data(), {3});
  auto read = [&](auto* data, DLDataType t, auto tag) {
    using T = decltype(tag);
    DLTensor d = make_tensor(data, t, shape, 1);
    fusex::host::eval(ov, fusex::cast<double>(fusex::from_dlpack<const T>(d)));
    return out;
  };
  CHECK(read(i64, {kDLInt, 64, 1}, std::int64_t{}) == std::vector<double>{-5, 0, static_cast<double>(1LL << 40)});
  CHECK(read(u8, {kDLUInt, 8, 1}, std::uint8_t{}) == std::vector<double>{1, 200, 255});
  CHECK(read(i8, {kDLInt, 8, 1}, std::int8_t{}) == std::vector<double>{-128, 3, 127});
  CHECK(read(i32, {kDLInt, 32, 1}, std::int32_t{}) == std::vector<double>{-7, 8, 9});
  CHECK(read(f64, {kDLFloat, 64, 1}, double{}) == std::vector<double>{0.1, -2.5, 3.0});
  CHECK(read(b, {kDLBool, 8, 1}, bool{}) == std::vector<double>{1, 0, 1});
  CHECK(read(bf, {kDLBfloat, 16, 1}, fusex::bfloat16{}) == std::vector<double>{1.5, -2.0, 0.25});
  CHECK(read(h, {kDLFloat, 16, 1}, fusex::half{}) == std::vector<double>{1.5, -2.0, 0.25});
}

TEST_CASE("dlpack: managed tensors, legacy and versioned", "[dlpack]") {
  auto x = random_floats(6, 3);
  std::int64_t shape[2] = {2, 3};
  DLManagedTensor legacy{make_tensor(x.data(), f32, shape, 2), nullptr, nullptr};
  CHECK(fusex::from_dlpack<float>(&legacy).data() == x.data());
  DLManagedTensorVersioned v{{1, 3}, nullptr, nullptr, 0, make_tensor(x.data(), f32, shape, 2)};
  CHECK(fusex::from_dlpack<float>(&v).shape() == fusex::shape_t{2, 3});
  // Read-only: a view of const elements only.
  v.flags = 1;
  CHECK(fusex::from_dlpack<const float>(&v).data() == x.data());
  says(thrown_message<fusex::invalid_argument>([&] { (void)fusex::from_dlpack<float>(&v); }), "read-only");
  v.flags = 0;
  v.version.major = 2;
  says(thrown_message<fusex::invalid_argument>([&] { (void)fusex::from_dlpack<float>(&v); }), "major version 2");
  const DLManagedTensor* none = nullptr;
  says(thrown_message<fusex::invalid_argument>([&] { (void)fusex::from_dlpack<float>(none); }), "null");
}

TEST_CASE("dlpack: tensors fusex cannot take are errors that say why", "[dlpack][errors]") {
  auto x = random_floats(64, 4);
  std::int64_t shape[2] = {4, 8};
  auto message = [](const DLTensor& t) {
    return thrown_message<fusex::invalid_argument>([&] { (void)fusex::from_dlpack<float>(t); });
  };
  says(message(make_tensor(x.data(), {kDLFloat, 16, 1}, shape, 2)), "holds float16, not float32");
  says(message(make_tensor(x.data(), {kDLBfloat, 16, 1}, shape, 2)), "holds bfloat16, not float32");
  says(message(make_tensor(x.data(), {kDLFloat, 32, 4}, shape, 2)), "4 lanes");
  says(message(make_tensor(x.data(), {9, 32, 1}, shape, 2)), "type code 9");
  says(message(make_tensor(x.data(), f32, shape, 2, nullptr, 0, {kDLROCM, 0})), "device type 10 device 0");
  std::int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  says(message(make_tensor(x.data(), f32, big, 9)), "9 dimensions");
  says(message(make_tensor(x.data(), f32, nullptr, 2)), "shape pointer is null");
  std::int64_t neg_shape[2] = {4, -1};
  says(message(make_tensor(x.data(), f32, neg_shape, 2)), "extent -1");
  std::int64_t reversed[2] = {8, -1};
  says(message(make_tensor(x.data() + 7, f32, shape, 2, reversed)), "stride -1");
  says(message(make_tensor(x.data(), f32, shape, 2, nullptr, 2)), "byte_offset 2 is not aligned to 4");
  says(message(make_tensor(nullptr, f32, shape, 2)), "null data pointer");
  // No elements: a null pointer is fine.
  std::int64_t empty[2] = {0, 8};
  CHECK(fusex::from_dlpack<float>(make_tensor(nullptr, f32, empty, 2)).size() == 0);
}
