#pragma once
/// \file
/// fusex::layer_sequence: a fixed chain of small linear layers (float32, half or bfloat16), each with its bias and
/// activation, run by one persistent kernel where the device and the shapes allow (sm_90 thread-block
/// clusters; see matmul/sequence_kernel.hpp), else as one fused fusex::linear per layer. Part of the
/// fusex::matmul target (the per-layer path is fusex::linear), not of <fusex/fusex.hpp>.
///
///     fusex::layer_sequence mlp;
///     for (int i = 0; i < 100; ++i) mlp.linear(w[i], b[i], fusex::activation::relu);  // w[i]: [256, 256]
///     mlp.run(x, y, stream);   // x [16, 256] -> y [16, 256]: one kernel for the 100 layers

#include <fusex/config.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>
#include <fusex/eval.hpp>
#include <fusex/expr/operators.hpp>
#include <fusex/matmul.hpp>
#include <fusex/matmul/sequence_kernel.hpp>
#include <fusex/memory/buffer.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <mutex>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fusex {

/// A chain of linear layers y = act(x w^T + bias) in T (float, fusex::half or fusex::bfloat16;
/// sums and activations in float32, each layer's output rounded to T as fusex::linear stores it),
/// built once (shapes fixed; the views must stay valid while it is used). run() evaluates the chain
/// on the GPU: on sm_90 and newer, where every layer's N divides among a thread-block cluster in
/// slices of 8 to 64 columns and the widest layer's slices fit in shared memory (K, N up to 512 in
/// float32), as one kernel for the whole chain (up to 112 layers per launch, products on tensor
/// cores: float32 as 3xTF32); otherwise one fused linear (GEMM with its bias and activation in the
/// epilogue) per layer, intermediates in temporaries from the default resource. plan() says which
/// and why. Results agree with the per-layer path to float32 rounding (the sums run in another order).
template <class T>
class basic_layer_sequence {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>,
                "fusex::basic_layer_sequence: T must be float, fusex::half or fusex::bfloat16");

 public:
  /// Appends y = act(x w^T + bias) with w [N, K] as torch.nn.Linear stores it and bias [N]. K
  /// must be the previous layer's N. Throws fusex::shape_error otherwise.
  basic_layer_sequence& linear(const view<const T>& w, const view<const T>& bias, activation act = activation::none) {
    check_weight(w);
    if (!(bias.rank() == 1 && bias.extent(0) == w.extent(0))) {
      throw shape_error("fusex::layer_sequence: layer " + std::to_string(layers_.size()) +
                        ": the bias must be [N] = [" + std::to_string(w.extent(0)) + "]; got " + bias.shape().str());
    }
    layers_.push_back({w, bias, true, act});
    cache_.clear();
    return *this;
  }
  /// Appends y = act(x w^T) (no bias).
  basic_layer_sequence& linear(const view<const T>& w, activation act = activation::none) {
    check_weight(w);
    layers_.push_back({w, view<const T>(), false, act});
    cache_.clear();
    return *this;
  }

  /// Number of layers.
  std::size_t size() const noexcept { return layers_.size(); }
  /// K of the first layer (0 when empty).
  std::int64_t in_features() const { return layers_.empty() ? 0 : layers_.front().w.extent(1); }
  /// N of the last layer (0 when empty).
  std::int64_t out_features() const { return layers_.empty() ? 0 : layers_.back().w.extent(0); }

  /// With false, run() always takes the per-layer path (to compare the two; default true).
  void allow_persistent(bool on) noexcept { allow_persistent_ = on; }

  /// How run() evaluates `m` rows on the current device: "persistent: ..." (one launch per up to
  /// 112 layers: clusters, blocks, shared memory) or "per layer: <why not persistent>".
  std::string plan(std::int64_t m) const {
    const choice c = choose();
    if (c.cluster == 0) return "per layer: " + c.why;
    const std::int64_t clusters = (m + detail::seq_rows - 1) / detail::seq_rows;
    const std::size_t launches = (layers_.size() + detail::seq_max_layers - 1) / detail::seq_max_layers;
    return "persistent: " + std::to_string(launches) + " launch" + (launches == 1 ? "" : "es") + " of " +
           std::to_string(clusters) + " cluster" + (clusters == 1 ? "" : "s") + " x " + std::to_string(c.cluster) +
           " blocks (" + std::to_string(detail::seq_rows) + " rows per cluster), " + std::to_string(c.shared / 1024) +
           " KiB of shared memory per block";
  }

#if defined(__CUDACC__)
  /// y = the chain applied to x: x [M, K0], y [M, N_last], on `stream`, asynchronously (capturable
  /// into a CUDA graph). Throws fusex::shape_error on shapes that do not chain.
  void run(const view<const T>& x, const view<T>& y, cudaStream_t stream) const {
    check_io(x, y);
    const std::int64_t m = x.extent(0);
    if (m == 0) return;
    // x is read and y written element by element along rows: any row stride, unit column stride.
    const choice c = x.stride(1) == 1 && y.stride(1) == 1 ? choose() : choice{};
    if (c.cluster == 0) return run_per_layer(x, y, stream);
    const std::int64_t clusters = (m + detail::seq_rows - 1) / detail::seq_rows;
    if (clusters * c.cluster > 0x7fffffff) return run_per_layer(x, y, stream);  // past a grid's 2^31 - 1 blocks
    // Chunks of at most seq_max_layers layers; between chunks the activations go through a
    // temporary [M, N].
    buffer<T> tmp[2];
    view<const T> in = x;
    for (std::size_t l0 = 0; l0 < layers_.size(); l0 += detail::seq_max_layers) {
      const std::size_t l1 = std::min(layers_.size(), l0 + detail::seq_max_layers);
      detail::seq_params<T> p{};
      p.x = in.data();
      p.x_ld = in.stride(0);
      p.m = m;
      p.n_layers = static_cast<std::int32_t>(l1 - l0);
      p.pitch = c.pitch;
      p.act_pitch = c.act_pitch;
      p.nc_max = c.nc_max;
      for (std::size_t l = l0; l < l1; ++l) {
        const layer& L = layers_[l];
        p.layers[l - l0] = {L.w.data(),
                            L.has_bias ? L.bias.data() : nullptr,
                            static_cast<std::int32_t>(L.w.stride(0)),
                            static_cast<std::int32_t>(L.w.extent(1)),
                            static_cast<std::int32_t>(L.w.extent(0)),
                            static_cast<std::int32_t>(L.act)};
      }
      view<T> out = y;
      if (l1 != layers_.size()) {
        const std::int64_t n = layers_[l1 - 1].w.extent(0);
        buffer<T>& t = tmp[(l0 / detail::seq_max_layers) & 1];
        t = buffer<T>(static_cast<std::size_t>(m * n), stream);
        out = view<T>(t.data(), {m, n});
      }
      p.y = out.data();
      p.y_ld = out.stride(0);
      detail::launch_layer_sequence(p, c.cluster, clusters, c.shared, stream);
      in = out;
    }
  }
#else
  /// (Needs nvcc: this translation unit is compiled by a host compiler; see run_host.)
  template <class X, class Y>
  void run(const X&, const Y&, cudaStream_t) const {
    static_assert(sizeof(X) == 0,
                  "fusex::layer_sequence::run runs on the GPU and needs this translation unit "
                  "compiled by nvcc; use run_host to evaluate on the CPU");
  }
#endif

  /// The chain on the host (fusex::host::eval per layer, host memory), for references and
  /// machines without a GPU.
  void run_host(const view<const T>& x, const view<T>& y) const {
    check_io(x, y);
    std::vector<T> tmp[2];
    per_layer(
        x, y, [&](int slot, std::size_t count) { return (tmp[slot] = std::vector<T>(count)).data(); },
        [](const view<T>& out, const auto& e) { fusex::host::eval(out, e); });
  }

 private:
  struct layer {
    view<const T> w, bias;
    bool has_bias;
    activation act;
  };
  struct choice {
    int cluster = 0;  // 0: per layer
    int pitch = 0, nc_max = 0, act_pitch = 0;
    std::string why;
    std::size_t shared = 0;
  };

  void check_weight(const view<const T>& w) const {
    if (w.rank() != 2) {
      throw shape_error("fusex::layer_sequence: layer " + std::to_string(layers_.size()) +
                        ": the weight must be 2-D [N, K]; got " + w.shape().str());
    }
    if (!layers_.empty() && w.extent(1) != layers_.back().w.extent(0)) {
      throw shape_error("fusex::layer_sequence: layer " + std::to_string(layers_.size()) + ": weight " +
                        w.shape().str() + " takes K = " + std::to_string(w.extent(1)) + " inputs, but layer " +
                        std::to_string(layers_.size() - 1) +
                        " gives N = " + std::to_string(layers_.back().w.extent(0)));
    }
  }
  void check_io(const view<const T>& x, const view<T>& y) const {
    if (layers_.empty()) throw invalid_argument("fusex::layer_sequence::run: the sequence has no layers");
    if (x.rank() != 2 || x.extent(1) != in_features()) {
      throw shape_error("fusex::layer_sequence::run: x must be [M, " + std::to_string(in_features()) + "]; got " +
                        x.shape().str());
    }
    if (y.rank() != 2 || y.extent(0) != x.extent(0) || y.extent(1) != out_features()) {
      throw shape_error("fusex::layer_sequence::run: y must be [" + std::to_string(x.extent(0)) + ", " +
                        std::to_string(out_features()) + "] for x " + x.shape().str() + "; got " + y.shape().str());
    }
  }
  // Weight rows are copied by the bulk-copy engine (16-byte aligned rows); biases are read per element.
  static bool rows_ok(const void* p, std::int64_t ld, std::int64_t inner_stride) {
    return inner_stride == 1 && ld % static_cast<std::int64_t>(16 / sizeof(T)) == 0 &&
           reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
  }
  /// The chain one fused linear per layer: `temp(slot, count)` gives storage for an intermediate
  /// (two slots, used in turn), `eval(out, expression)` evaluates a layer.
  template <class Temp, class Eval>
  void per_layer(const view<const T>& x, const view<T>& y, Temp&& temp, Eval&& eval) const {
    const std::int64_t m = x.extent(0);
    view<const T> in = x;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const layer& L = layers_[l];
      const std::int64_t n = L.w.extent(0);
      view<T> out = y;
      if (l + 1 != layers_.size())
        out = view<T>(temp(static_cast<int>(l & 1), static_cast<std::size_t>(m * n)), {m, n});
      with_activation(L.act, [&](auto act) {
        if (L.has_bias) eval(out, act(fusex::linear(in, L.w, L.bias)));
        else eval(out, act(fusex::linear(in, L.w)));
      });
      in = out;
    }
  }

  /// Calls f with a function object applying `act` to an expression.
  template <class F>
  static void with_activation(activation act, F&& f) {
    switch (act) {
      case activation::relu: return f([](const auto& e) { return fusex::relu(e); });
      case activation::gelu: return f([](const auto& e) { return fusex::gelu(e); });
      case activation::silu: return f([](const auto& e) { return fusex::silu(e); });
      default: return f([](const auto& e) { return e; });
    }
  }

  // The persistent kernel's geometry for these layers on the current device: found once per device
  // (the queries cost microseconds), kept until a layer is added.
  choice choose() const {
    if (layers_.empty()) return {0, 0, 0, 0, "no layers"};
    if (!allow_persistent_) return {0, 0, 0, 0, "persistent kernel turned off (allow_persistent(false))"};
#if defined(__CUDACC__)
    const detail::device_properties& dev = detail::current_device_info();
    std::lock_guard<std::mutex> lock(cache_.mutex);
    for (const auto& e : cache_.chosen)
      if (e.first == dev.ordinal) return e.second;
    cache_.chosen.emplace_back(dev.ordinal, find_geometry(dev));
    return cache_.chosen.back().second;
#else
    return {0, 0, 0, 0, "compiled without nvcc"};
#endif
  }
#if defined(__CUDACC__)
  choice find_geometry(const detail::device_properties& dev) const {
    if (dev.cc_major < 9)
      return {0, 0, 0, 0,
              "the device is sm_" + std::to_string(dev.cc_major * 10 + dev.cc_minor) +
                  ": thread-block clusters need sm_90"};
    if (const int arch = detail::seq_kernel_arch<T>(); arch < 90) {
      return {0, 0, 0, 0,
              "this program's kernel was compiled for " +
                  (arch == 0 ? std::string("no architecture of this device") : "sm_" + std::to_string(arch)) +
                  ", not sm_90 or newer (CMAKE_CUDA_ARCHITECTURES)"};
    }
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const layer& L = layers_[l];
      if (!rows_ok(L.w.data(), L.w.stride(0), L.w.stride(1)) || L.w.stride(0) > INT32_MAX ||
          (L.has_bias && (L.bias.stride(0) != 1 || reinterpret_cast<std::uintptr_t>(L.bias.data()) % alignof(T) != 0))) {
        return {0, 0, 0, 0,
                "layer " + std::to_string(l) + ": weight rows (or the bias) are not contiguous and aligned"};
      }
    }
    std::int64_t k_max = 0, n_max = 0;
    for (const layer& L : layers_) {
      k_max = std::max(k_max, L.w.extent(1));
      n_max = std::max(n_max, L.w.extent(0));
    }
    int opt_in = 0;
    FUSEX_CUDA_CHECK(cudaDeviceGetAttribute(&opt_in, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev.ordinal));
    opt_in = detail::seq_dynamic_shared_limit<T>(opt_in);
    std::string why;
    for (int c = 16; c >= 2; c /= 2) {
      std::string misfit;
      for (std::size_t l = 0; l < layers_.size() && misfit.empty(); ++l) {
        misfit = detail::seq_layer_misfit(layers_[l].w.extent(1), layers_[l].w.extent(0), c, sizeof(T));
        if (!misfit.empty()) misfit = "layer " + std::to_string(l) + ": " + misfit;
      }
      const int pitch = detail::seq_pitch(k_max, sizeof(T)), act_pitch = detail::seq_act_pitch(k_max, sizeof(T));
      const int nc_max = static_cast<int>(n_max / c);
      const std::size_t shared = detail::seq_layout(act_pitch, pitch, nc_max, sizeof(T)).bytes;
      if (misfit.empty() && shared > static_cast<std::size_t>(opt_in)) {
        misfit = std::to_string(shared) + " bytes of shared memory per block (the device allows " +
                 std::to_string(opt_in) + ")";
      }
      if (misfit.empty() && !detail::seq_cluster_fits<T>(c, shared, opt_in)) {
        misfit = "the device does not run clusters of " + std::to_string(c) + " blocks with " + std::to_string(shared) +
                 " bytes of shared memory each";
      }
      if (misfit.empty()) return {c, pitch, nc_max, act_pitch, {}, shared};
      if (why.empty()) why = "clusters of " + std::to_string(c) + ": " + misfit;
    }
    return {0, 0, 0, 0, why};
  }
#endif

#if defined(__CUDACC__)
  void run_per_layer(const view<const T>& x, const view<T>& y, cudaStream_t stream) const {
    buffer<T> tmp[2];
    // Stream-ordered: the buffer a slot's new one replaces (layer l-2's output) is freed after its
    // last use.
    per_layer(
        x, y, [&](int slot, std::size_t count) { return (tmp[slot] = buffer<T>(count, stream)).data(); },
        [&](const view<T>& out, const auto& e) { fusex::eval(out, e, stream); });
  }
#endif

  std::vector<layer> layers_;
  bool allow_persistent_ = true;
  // The geometry found per device; a copy (or a moved-to sequence) starts with an empty cache.
  struct geometry_cache {
    std::mutex mutex;
    std::vector<std::pair<int, choice>> chosen;  // (device, geometry)
    geometry_cache() = default;
    geometry_cache(const geometry_cache&) {}
    geometry_cache& operator=(const geometry_cache&) {
      std::lock_guard<std::mutex> lock(mutex);
      chosen.clear();
      return *this;
    }
    void clear() {
      std::lock_guard<std::mutex> lock(mutex);
      chosen.clear();
    }
  };
  mutable geometry_cache cache_;
};

/// A chain of float32 layers (basic_layer_sequence<fusex::bfloat16> or <fusex::half> for 16-bit
/// weights, inputs and outputs).
using layer_sequence = basic_layer_sequence<float>;

}  // namespace fusex
