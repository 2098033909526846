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
  // mlp-persistent (fusex::layer_sequence) only on request until its kernel has run on a GPU.
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

// A temporary: host memory on the host backend, else a stream-ordered buffer from the run's
// resource (freed on the stream when it goes out of scope, as an eager framework frees).
class temp {
 public:
  temp() = default;
  temp(backend& b, std::int64_t n) {
    if (b.host) {
      host_.resize(static_cast<std::size_t>(n));
    } else {
      dev_ = fusex::buffer<float>(static_cast<std::size_t>(n), b.stream, b.resource);
    }
  }
  float* data() { return host_.empty() ? dev_.data() : host_.data(); }

 private:
  std::vector<float> host_;
  fusex::buffer<float> dev_;
};

// Parameters and inputs: filled once on the host, uploaded to the device for GPU runs.
class param {
 public:
  param(bool host, std::int64_t n) : h_(static_cast<std::size_t>(n)), host_(host) {
    if (!host_) FUSEX_CUDA_CHECK(cudaMalloc(&d_, h_.size() * sizeof(float)));
  }
  param(const param&) = delete;
  param& operator=(const param&) = delete;
  ~param() {
    if (d_ != nullptr) (void)cudaFree(d_);
  }
  void fill(lcg& r, float lo, float hi) {
    for (float& v : h_) v = r.uniform(lo, hi);
    upload();
  }
  void upload() {
    if (!host_) FUSEX_CUDA_CHECK(cudaMemcpy(d_, h_.data(), h_.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() {
    if (host_) return h_;
    std::vector<float> out(h_.size());
    FUSEX_CUDA_CHECK(cudaMemcpy(out.data(), d_, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }
  float* data() { return host_ ? h_.data() : d_; }
  std::int64_t size() const { return static_cast<std::int64_t>(h_.size()); }

 private:
  std::vector<float> h_;
  float* d_ = nullptr;
  bool host_;
};

inline fusex::view<float> v2(float* p, std::int64_t r, std::int64_t c) { return fusex::make_view(p, {r, c}); }
inline fusex::view<float> v1(float* p, std::int64_t n) { return fusex::make_view(p, {n}); }

// ---------------------------------------------------------------------------------------------
// Workloads. step(b, fused) computes output() from the inputs; it never changes its inputs, so
// every version computes the same thing.

struct workload {
  virtual ~workload() = default;
  virtual std::string name() const = 0;
  virtual std::string shape() const = 0;
  virtual void step(backend& b, bool fused) = 0;
  virtual param& output() = 0;
};

// The workloads (workload_chain.cu, workload_transformer.cu, workload_mlp.cu).
std::unique_ptr<workload> make_chain(bool host, const options& o);
std::unique_ptr<workload> make_transformer(bool host, const options& o);
std::unique_ptr<workload> make_mlp(bool host, const options& o, bool persistent);

}  // namespace tour
