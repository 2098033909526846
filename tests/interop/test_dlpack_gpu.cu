// GPU tests of include/fusex/dlpack.hpp: a DLPack tensor of device memory as a view that fusex
// evaluates into and out of (checked against double references computed here, outputs poisoned
// first), a fusex::tensor handed out with to_dlpack (its DLTensor's fields, its values read back
// through from_dlpack, its memory returned to the arena by the deleter), and a tensor of another
// device rejected.
#include <fusex/dlpack.hpp>
#include <fusex/fusex.hpp>

#include "dlpack_types.hpp"
#include "fusex_catch.hpp"
#include "gpu_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

using namespace fxt_dl;
using namespace fusex_test;

TEST_CASE("dlpack gpu: device tensors in and out of fusex", "[dlpack][gpu]") {
  stream_guard sg;
  const std::int64_t R = 33, C = 130;
  const std::size_t n = static_cast<std::size_t>(R * C);
  const auto hx = random_values<float>(n, -2, 2, 5);
  const auto hb = random_values<float>(static_cast<std::size_t>(C), -1, 1, 6);
  device_array<float> x(n), b(static_cast<std::size_t>(C)), y(n);
  x.upload(hx);
  b.upload(hb);
  y.poison();
  const DLDataType f32{kDLFloat, 32, 1};
  std::int64_t xs[2] = {R, C}, bs[1] = {C};
  const DLDevice dev{kDLCUDA, fusex::detail::current_device()};
  const DLTensor tx = make_tensor(x.data(), f32, xs, 2, nullptr, 0, dev);
  const DLTensor tb = make_tensor(b.data(), f32, bs, 1, nullptr, 0, dev);
  const DLTensor ty = make_tensor(y.data(), f32, xs, 2, nullptr, 0, dev);
  fusex::eval(fusex::from_dlpack<float>(ty), fusex::relu(fusex::from_dlpack<const float>(tx) + fusex::from_dlpack<const float>(tb)),
              sg.s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(sg.s));
  const auto hy = y.download();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double want = std::max(static_cast<double>(hx[i]) + hb[i % static_cast<std::size_t>(C)], 0.0);
    bad += std::abs(hy[i] - want) > 1e-6 * std::abs(want) + 1e-7;
  }
  CHECK(bad == 0);

  // Another device's memory (device ids are checked, not dereferenced).
  const DLTensor other = make_tensor(x.data(), f32, xs, 2, nullptr, 0, {kDLCUDA, dev.device_id + 1});
  const std::string m = thrown_message<fusex::invalid_argument>([&] { (void)fusex::from_dlpack<float>(other); });
  INFO(m);
  CHECK(m.find("CUDA device " + std::to_string(dev.device_id + 1)) != std::string::npos);
}

template <class M>
void hand_out_and_read_back() {
  stream_guard producer, consumer;
  fusex::arena a;
  const std::int64_t R = 17, C = 96;
  const std::size_t n = static_cast<std::size_t>(R * C);
  const auto hx = random_values<float>(n, -2, 2, 7);
  device_array<float> x(n), out(n);
  x.upload(hx);
  out.poison();
  M* m = nullptr;
  {
    fusex::tensor<float> t(fusex::shape_t{R, C}, producer.s, a);
    t.assign(fusex::make_view(static_cast<const float*>(x.data()), {R, C}) * 3.0f, producer.s);
    m = fusex::to_dlpack<M>(std::move(t), consumer.s);
  }
  REQUIRE(m != nullptr);
  CHECK(a.stats().allocations_in_use == 1);  // the tensor lives on in the DLPack tensor
  const DLTensor& dl = m->dl_tensor;
  CHECK(dl.device.device_type == kDLCUDA);
  CHECK(dl.device.device_id == fusex::detail::current_device());
  CHECK(dl.ndim == 2);
  CHECK(dl.shape[0] == R);
  CHECK(dl.shape[1] == C);
  CHECK(dl.strides[0] == C);
  CHECK(dl.strides[1] == 1);
  CHECK(dl.dtype.code == kDLFloat);
  CHECK(dl.dtype.bits == 32);
  CHECK(dl.dtype.lanes == 1);
  CHECK(dl.byte_offset == 0);
  // The consumer reads it on its own stream: the producer's work is ordered before.
  fusex::eval(fusex::make_view(out.data(), {R, C}), fusex::from_dlpack<const float>(m) + 1.0f, consumer.s);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(consumer.s));
  const auto h = out.download();
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double want = 3.0 * hx[i] + 1.0;
    bad += std::abs(h[i] - want) > 1e-6 * std::abs(want) + 1e-7;
  }
  CHECK(bad == 0);
  m->deleter(m);  // frees on the consumer's stream
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(consumer.s));
  CHECK(a.stats().allocations_in_use == 0);
}

TEST_CASE("dlpack gpu: to_dlpack hands a tensor out (legacy and versioned)", "[dlpack][gpu]") {
  SECTION("DLManagedTensor") { hand_out_and_read_back<DLManagedTensor>(); }
  SECTION("DLManagedTensorVersioned") { hand_out_and_read_back<DLManagedTensorVersioned>(); }
}
