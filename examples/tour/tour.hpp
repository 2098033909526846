// fusex-tour's shared pieces: options, the two backends (GPU or fusex's host backend), memory
// that lives on either, and the workload interface. Each workload is its own translation unit
// (workload_*.cu), so that the tour builds in parallel and no translation unit compiles for long.
#pragma once

#include <fusex/fusex.hpp>
// backend::eval names fusex::eval, whose matmul overloads must be seen where it is defined.
#include <fusex/matmul.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tour {

struct options {
  int device = 0;
  bool require_device = false;
  bool force_host = false;
  bool pdl = true;
  bool tf32 = false;                  // float32 GEMMs on TF32 tensor cores (every version)
  bool chain_one_expression = false;  // each chain block as one expression
  std::int64_t batch = 16;
  std::int64_t hidden = 256;
  std::int64_t layers = 100;  // MLP depth
  std::int64_t seq = 32;      // transformer sequence length
  std::int64_t blocks = 50;   // chain length (each block: 7 operations)
  int steps = 200;
  int warmup = 10;
  // mlp-persistent (fusex::layer_sequence) and transformer-bf16 only on request until they have run
  // on a GPU (the default set is the main job's: it must not fail on a first GPU run).
  std::vector<std::string> workloads{"chain", "transformer", "mlp"};
  std::string json;
  // Which sizes the user set (the host backend's small defaults apply to the others).
  bool set_batch = false, set_hidden = false, set_layers = false, set_seq = false, set_blocks = false,
       set_steps = false, set_warmup = false;
};

// ---------------------------------------------------------------------------------------------
// Memory and evaluation on either backend

// Deterministic pseudo-random numbers (the same on every machine).
struct lcg {
  std::uint64_t s;
  explicit lcg(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float uniform(float lo, float hi) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) * (1.0 / 9007199254740992.0);
    return lo + static_cast<float>(u) * (hi - lo);
  }
};

// Where a run computes: the GPU (a stream, a resource for temporaries) or the host backend.
struct backend {
  bool host = false;
  cudaStream_t stream = nullptr;
  fusex::device_resource_ref resource = fusex::detail::null_resource_instance();
  std::int64_t evals = 0;  // evaluations issued (host runs report it as kernels per step)

  template <class D, class E>
  void eval(const D& dst, const E& expr) {
    ++evals;
    if (host) {
      fusex::host::eval(dst, expr);
    } else {
      fusex::eval(dst, expr, stream);
    }
  }
};

// A temporary of T: host memory on the host backend, else a stream-ordered buffer from the run's
// resource (freed on the stream when it goes out of scope, as an eager framework frees).
template <class T>
class basic_temp {
 public:
  basic_temp() = default;
  basic_temp(backend& b, std::int64_t n) {
    if (b.host) {
      host_.resize(static_cast<std::size_t>(n));
    } else {
      dev_ = fusex::buffer<T>(static_cast<std::size_t>(n), b.stream, b.resource);
    }
  }
  T* data() { return host_.empty() ? dev_.data() : host_.data(); }

 private:
  std::vector<T> host_;
  fusex::buffer<T> dev_;
};
using temp = basic_temp<float>;

// What the driver needs of a workload's output, whatever its element type: its values as float
// (to compare versions) and a way to poison it before a version runs.
class param_base {
 public:
  virtual ~param_base() = default;
  virtual std::vector<float> download_values() = 0;
  // Sets the device copy to all-ones bytes (NaN in float, bfloat16 and half), so that a version
  // that fails to write the output cannot pass with the previous version's values.
  virtual void poison(cudaStream_t stream) = 0;
};

// Parameters and inputs of T: filled once on the host, uploaded to the device for GPU runs.
template <class T>
class basic_param : public param_base {
 public:
  basic_param(bool host, std::int64_t n) : h_(static_cast<std::size_t>(n)), host_(host) {
    if (!host_) FUSEX_CUDA_CHECK(cudaMalloc(&d_, h_.size() * sizeof(T)));
  }
  basic_param(const basic_param&) = delete;
  basic_param& operator=(const basic_param&) = delete;
  ~basic_param() override {
    if (d_ != nullptr) (void)cudaFree(d_);
  }
  // The float draws rounded to T by fusex's own conversion, so host and device hold one value.
  void fill(lcg& r, float lo, float hi) {
    for (T& v : h_) v = fusex::convert<T>(r.uniform(lo, hi));
    upload();
  }
  void upload() {
    if (!host_) FUSEX_CUDA_CHECK(cudaMemcpy(d_, h_.data(), h_.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() {
    if (host_) return h_;
    std::vector<T> out(h_.size());
    FUSEX_CUDA_CHECK(cudaMemcpy(out.data(), d_, out.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<float> download_values() override {
    const std::vector<T> v = download();
    std::vector<float> out(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = fusex::convert<float>(v[i]);
    return out;
  }
  void poison(cudaStream_t stream) override {
    if (!host_) FUSEX_CUDA_CHECK(cudaMemsetAsync(d_, 0xFF, h_.size() * sizeof(T), stream));
  }
  T* data() { return host_ ? h_.data() : d_; }
  std::int64_t size() const { return static_cast<std::int64_t>(h_.size()); }

 private:
  std::vector<T> h_;
  T* d_ = nullptr;
  bool host_;
};
using param = basic_param<float>;

template <class T>
fusex::view<T> v2(T* p, std::int64_t r, std::int64_t c) {
  return fusex::make_view(p, {r, c});
}
template <class T>
fusex::view<T> v1(T* p, std::int64_t n) {
  return fusex::make_view(p, {n});
}

// ---------------------------------------------------------------------------------------------
// Workloads. step(b, fused) computes output() from the inputs; it never changes its inputs, so
// every version computes the same thing.

struct workload {
  virtual ~workload() = default;
  virtual std::string name() const = 0;
  virtual std::string shape() const = 0;
  virtual void step(backend& b, bool fused) = 0;
  // A workload returns its own param<T> (a covariant return), the driver reads it as floats.
  virtual param_base& output() = 0;
  // A version passes when max|output - output of (1)| <= relative_tolerance() x max(1, max|output
  // of (1)|). float32 workloads: 1e-3 (summation order and fusion move only the last float bits).
  virtual double relative_tolerance() const { return 1e-3; }
};

// The workloads (workload_chain*.cu, workload_transformer*.cu with transformer_block.hpp, workload_mlp.cu).
std::unique_ptr<workload> make_chain(bool host, const options& o);
// "transformer" (float32) or, with bf16, "transformer-bf16" (bfloat16: GEMMs on tensor cores).
std::unique_ptr<workload> make_transformer(bool host, const options& o, bool bf16);
std::unique_ptr<workload> make_mlp(bool host, const options& o, bool persistent);

}  // namespace tour
