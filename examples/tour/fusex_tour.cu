// fusex-tour: what fusex does to launch overhead, on the workloads that motivate it.
//
// Three workloads, each run four ways and checked against each other:
//   (1) unfused    one kernel per operation, temporaries from cudaMallocAsync (an eager framework)
//   (2) fused      fusex expressions: one kernel per fused step, temporaries from cudaMallocAsync
//   (3) +arena     the same with temporaries from fusex's arena
//   (4) +graph     the same captured once into a CUDA graph (programmatic dependent launch on)
//                  and replayed
// The table shows kernels launched per step (counted by fusex::launch_monitor), host and GPU time
// per step, the speedup over (1) and the largest difference from (1)'s output.
//
// Without a GPU it says so, runs (1) and (2) on fusex's host backend at a small size, prints the
// same table without the GPU columns and exits 0.
#include <fusex/fusex.hpp>
#include <fusex/matmul.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

// Exit codes: 0 ok (also when there is no device, unless --require-device), 1 a failed check or
// an error, 2 bad usage, 77 no device with --require-device (CTest's skip code).
constexpr int exit_failure = 1;
constexpr int exit_usage = 2;
constexpr int exit_no_device = 77;

// ---------------------------------------------------------------------------------------------
// Options

struct options {
  int device = 0;
  bool require_device = false;
  bool force_host = false;
  bool pdl = true;
  bool tf32 = false;  // float32 GEMMs on TF32 tensor cores (every version)
  bool chain_one_expression = false;  // each chain block as one expression
  std::int64_t batch = 16;
  std::int64_t hidden = 256;
  std::int64_t layers = 100;  // MLP depth
  std::int64_t seq = 32;      // transformer sequence length
  std::int64_t blocks = 50;   // chain length (each block: 7 operations)
  int steps = 200;
  int warmup = 10;
  std::vector<std::string> workloads{"chain", "transformer", "mlp"};
  std::string json;
  // Which sizes the user set (the host backend's small defaults apply to the others).
  bool set_batch = false, set_hidden = false, set_layers = false, set_seq = false, set_blocks = false,
       set_steps = false, set_warmup = false;
};

void print_help(std::FILE* out) {
  std::fprintf(out,
               "usage: fusex-tour [options]\n"
               "\n"
               "Shows what fusex does to launch overhead. Each workload runs four ways, checked against\n"
               "each other:\n"
               "  (1) unfused      one kernel per operation, temporaries from cudaMallocAsync, no PDL\n"
               "                   (as an eager framework runs it)\n"
               "  (2) fused        fusex expressions (one kernel per fused step), temporaries from\n"
               "                   cudaMallocAsync\n"
               "  (3) +arena       (2) with temporaries from fusex's stream-ordered arena\n"
               "  (4) +graph       (3) captured once into a CUDA graph and replayed, with programmatic\n"
               "                   dependent launch (PDL)\n"
               "and prints kernels launched per step (fusex::launch_monitor), host us per step (time to\n"
               "submit), GPU us per step (CUDA events around the measured steps), speedup of GPU time\n"
               "over (1), and the largest absolute difference from (1)'s output. A difference above\n"
               "1e-3 x max(1, max|output of (1)|) fails the check (exit code 1).\n"
               "\n"
               "Workloads:\n"
               "  chain        a long chain of small steps on [batch, hidden]; each block is\n"
               "               layer_norm(affine), *scale, +shift, gelu, *0.5, +residual, rms_norm(weight):\n"
               "               7 kernels unfused, 2 fused\n"
               "  transformer  one pre-LN transformer block on [batch*seq, hidden] (one attention head):\n"
               "               layer_norm, QKV linear, scores, scale, softmax, attention, output linear,\n"
               "               residual, layer_norm, linear+bias, gelu, linear, residual\n"
               "  mlp          `layers` x (Linear(hidden, hidden) + ReLU) on [batch, hidden]\n"
               "Linear layers are fusex::linear (fusex::matmul); weights use PyTorch's default init.\n"
               "\n"
               "Without a usable CUDA device (or with --host) it runs (1) and (2) on fusex's host backend\n"
               "at a small size (batch 4, hidden 32, layers 8, seq 8, blocks 8, steps 3, unless set),\n"
               "prints the table without the GPU columns and exits 0.\n"
               "\n"
               "options:\n"
               "  --workload LIST   comma-separated subset of chain,transformer,mlp or all\n"
               "                    (default: all, in that order)\n"
               "  --batch N         rows per step (default 16)\n"
               "  --hidden N        hidden size (default 256)\n"
               "  --layers N        MLP depth (default 100)\n"
               "  --seq N           transformer sequence length (default 32)\n"
               "  --blocks N        chain blocks (default 50)\n"
               "  --steps N         measured steps per version (default 200)\n"
               "  --warmup N        unmeasured steps first (default 10)\n"
               "  --no-pdl          no programmatic dependent launch in any version\n"
               "  --tf32            let the float32 GEMMs of every version use TF32 tensor cores\n"
               "                    (fusex::matmul_options::allow_tf32; off: float32-accurate products;\n"
               "                    no effect on the host backend)\n"
               "  --chain-one-expression\n"
               "                    write each chain block as one expression (one row kernel; its\n"
               "                    repeated layer_norm is computed once) instead of two\n"
               "  --json FILE       also write the results as JSON to FILE\n"
               "  --device N        the CUDA device to use (default 0)\n"
               "  --host            use the host backend even when a GPU is present\n"
               "  --require-device  exit with 77 instead of running on the host when there is no usable\n"
               "                    device (CTest reports that as skipped)\n"
               "  --version         print fusex's version and exit\n"
               "  -h, --help        print this help and exit\n"
               "\n"
               "exit codes: 0 ok, 1 a check failed or an error, 2 bad usage, 77 no device with\n"
               "--require-device\n");
}

struct usage_error {
  std::string message;
};

std::int64_t parse_count(const std::string& flag, const char* s, std::int64_t lo, std::int64_t hi) {
  if (s == nullptr) throw usage_error{flag + " needs a value"};
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < lo || v > hi) {
    throw usage_error{flag + " needs a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                      ", got '" + s + "'"};
  }
  return v;
}

options parse(int argc, char** argv, bool& exit_now, int& exit_code) {
  options o;
  exit_now = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* value = nullptr;
    const auto eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = argv[i] + eq + 1;
      a = a.substr(0, eq);
    }
    auto take = [&]() -> const char* {
      if (value != nullptr) return value;
      if (i + 1 < argc) return argv[++i];
      return nullptr;
    };
    auto no_value = [&] {
      if (value != nullptr) throw usage_error{a + " takes no value"};
    };
    if (a == "-h" || a == "--help") {
      print_help(stdout);
      exit_now = true;
      exit_code = 0;
      return o;
    } else if (a == "--version") {
      std::printf("fusex %s\n", fusex::version_string);
      exit_now = true;
      exit_code = 0;
      return o;
    } else if (a == "--require-device") {
      no_value();
      o.require_device = true;
    } else if (a == "--host") {
      no_value();
      o.force_host = true;
    } else if (a == "--no-pdl") {
      no_value();
      o.pdl = false;
    } else if (a == "--tf32") {
      no_value();
      o.tf32 = true;
    } else if (a == "--chain-one-expression") {
      no_value();
      o.chain_one_expression = true;
    } else if (a == "--device") {
      o.device = static_cast<int>(parse_count(a, take(), 0, 1023));
    } else if (a == "--batch") {
      o.batch = parse_count(a, take(), 1, 1 << 20);
      o.set_batch = true;
    } else if (a == "--hidden") {
      o.hidden = parse_count(a, take(), 1, 1 << 16);
      o.set_hidden = true;
    } else if (a == "--layers") {
      o.layers = parse_count(a, take(), 1, 100000);
      o.set_layers = true;
    } else if (a == "--seq") {
      o.seq = parse_count(a, take(), 1, 1 << 14);
      o.set_seq = true;
    } else if (a == "--blocks") {
      o.blocks = parse_count(a, take(), 1, 100000);
      o.set_blocks = true;
    } else if (a == "--steps") {
      o.steps = static_cast<int>(parse_count(a, take(), 1, 1000000));
      o.set_steps = true;
    } else if (a == "--warmup") {
      o.warmup = static_cast<int>(parse_count(a, take(), 0, 1000000));
      o.set_warmup = true;
    } else if (a == "--json") {
      const char* v = take();
      if (v == nullptr || *v == '\0') throw usage_error{"--json needs a file name"};
      o.json = v;
    } else if (a == "--workload") {
      const char* v = take();
      if (v == nullptr || *v == '\0') throw usage_error{"--workload needs a list, e.g. --workload chain,mlp"};
      o.workloads.clear();
      std::string list = v;
      std::size_t start = 0;
      while (start <= list.size()) {
        const std::size_t comma = list.find(',', start);
        const std::string w = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (w == "all") {
          o.workloads = {"chain", "transformer", "mlp"};
        } else if (w == "chain" || w == "transformer" || w == "mlp") {
          if (std::find(o.workloads.begin(), o.workloads.end(), w) == o.workloads.end()) o.workloads.push_back(w);
        } else {
          throw usage_error{"unknown workload '" + w + "' (choose from chain, transformer, mlp, all)"};
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else {
      throw usage_error{"unknown option '" + a + "'"};
    }
  }
  return o;
}

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

fusex::view<float> v2(float* p, std::int64_t r, std::int64_t c) { return fusex::make_view(p, {r, c}); }
fusex::view<float> v1(float* p, std::int64_t n) { return fusex::make_view(p, {n}); }

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

// A long chain of small steps: per block, 7 operations unfused, 2 fused kernels.
class chain_workload : public workload {
 public:
  chain_workload(bool host, std::int64_t batch, std::int64_t hidden, std::int64_t blocks, bool one_expression)
      : B_(batch), D_(hidden), one_expression_(one_expression), x_(host, batch * hidden), out_(host, batch * hidden) {
    lcg r(1);
    x_.fill(r, -1.0f, 1.0f);
    for (std::int64_t i = 0; i < blocks; ++i) {
      auto p = std::make_unique<block_params>(host, hidden);
      p->g.fill(r, 0.8f, 1.2f);
      p->b.fill(r, -0.1f, 0.1f);
      p->scale.fill(r, 0.5f, 1.5f);
      p->shift.fill(r, -0.2f, 0.2f);
      p->w.fill(r, 0.8f, 1.2f);
      blocks_.push_back(std::move(p));
    }
  }
  std::string name() const override { return "chain"; }
  std::string shape() const override {
    return std::to_string(blocks_.size()) + " blocks of 7 ops on [" + std::to_string(B_) + ", " + std::to_string(D_) +
           "]";
  }
  param& output() override { return out_; }

  void step(backend& b, bool fused) override {
    const std::int64_t n = B_ * D_;
    temp cur_store;
    fusex::view<float> cur = v2(x_.data(), B_, D_);
    for (std::size_t i = 0; i < blocks_.size(); ++i) {
      block_params& p = *blocks_[i];
      const bool last = i + 1 == blocks_.size();
      temp next_store = last ? temp() : temp(b, n);
      const fusex::view<float> next = last ? v2(out_.data(), B_, D_) : v2(next_store.data(), B_, D_);
      auto g = v1(p.g.data(), D_);
      auto bb = v1(p.b.data(), D_);
      auto scale = v1(p.scale.data(), D_);
      auto shift = v1(p.shift.data(), D_);
      auto w = v1(p.w.data(), D_);
      if (fused && one_expression_) {
        // One kernel per block: rms_norm uses its argument three times, and fusex computes it
        // once per scope (the layer_norm's reductions once per row: docs/ops.md, "Shared values").
        b.eval(next, fusex::rms_norm(cur + fusex::gelu(fusex::layer_norm(cur, g, bb) * scale + shift) * 0.5f, w));
      } else if (fused) {
        // Two kernels per block. (Written as one expression, the rms_norm's reduction nests over
        // the layer_norm's and the block is one kernel of three dependent phases; measured on the
        // H200 at [16, 256] that kernel took about twice as long as these two: the rows are short,
        // so each phase's latency, not the memory traffic, sets the time.)
        temp t(b, n);
        auto tv = v2(t.data(), B_, D_);
        b.eval(tv, cur + fusex::gelu(fusex::layer_norm(cur, g, bb) * scale + shift) * 0.5f);
        b.eval(next, fusex::rms_norm(tv, w));
      } else {
        // One kernel per operation, each into a fresh temporary.
        temp t1(b, n), t2(b, n), t3(b, n), t4(b, n), t5(b, n), t6(b, n);
        auto a1 = v2(t1.data(), B_, D_), a2 = v2(t2.data(), B_, D_), a3 = v2(t3.data(), B_, D_);
        auto a4 = v2(t4.data(), B_, D_), a5 = v2(t5.data(), B_, D_), a6 = v2(t6.data(), B_, D_);
        b.eval(a1, fusex::layer_norm(cur, g, bb));
        b.eval(a2, a1 * scale);
        b.eval(a3, a2 + shift);
        b.eval(a4, fusex::gelu(a3));
        b.eval(a5, a4 * 0.5f);
        b.eval(a6, cur + a5);
        b.eval(next, fusex::rms_norm(a6, w));
      }
      cur = next;
      cur_store = std::move(next_store);  // the previous block's output is freed here
    }
  }

 private:
  struct block_params {
    param g, b, scale, shift, w;
    block_params(bool host, std::int64_t d) : g(host, d), b(host, d), scale(host, d), shift(host, d), w(host, d) {}
  };
  std::int64_t B_, D_;
  bool one_expression_;
  param x_, out_;
  std::vector<std::unique_ptr<block_params>> blocks_;
};

// One pre-LN transformer block with a single attention head, on [batch * seq, hidden].
class transformer_workload : public workload {
 public:
  transformer_workload(bool host, std::int64_t batch, std::int64_t seq, std::int64_t hidden, fusex::matmul_options mm)
      : mm_(mm),
        B_(batch),
        S_(seq),
        D_(hidden),
        F_(4 * hidden),
        T_(batch * seq),
        x_(host, T_ * D_),
        out_(host, T_ * D_),
        g1_(host, D_),
        b1_(host, D_),
        g2_(host, D_),
        b2_(host, D_),
        wqkv_(host, 3 * D_ * D_),
        bqkv_(host, 3 * D_),
        wo_(host, D_ * D_),
        bo_(host, D_),
        w1_(host, F_ * D_),
        bf1_(host, F_),
        w2_(host, D_ * F_),
        bf2_(host, D_) {
    lcg r(2);
    x_.fill(r, -1.0f, 1.0f);
    g1_.fill(r, 0.9f, 1.1f);
    b1_.fill(r, -0.1f, 0.1f);
    g2_.fill(r, 0.9f, 1.1f);
    b2_.fill(r, -0.1f, 0.1f);
    const float kd = 1.0f / std::sqrt(static_cast<float>(D_));  // PyTorch's default Linear init
    const float kf = 1.0f / std::sqrt(static_cast<float>(F_));
    wqkv_.fill(r, -kd, kd);
    bqkv_.fill(r, -kd, kd);
    wo_.fill(r, -kd, kd);
    bo_.fill(r, -kd, kd);
    w1_.fill(r, -kd, kd);
    bf1_.fill(r, -kd, kd);
    w2_.fill(r, -kf, kf);
    bf2_.fill(r, -kf, kf);
  }
  std::string name() const override { return "transformer"; }
  std::string shape() const override {
    return "1 block, [" + std::to_string(B_) + " x " + std::to_string(S_) + ", " + std::to_string(D_) + "], ffn " +
           std::to_string(F_);
  }
  param& output() override { return out_; }

  void step(backend& b, bool fused) override {
    const std::int64_t T = T_, D = D_, F = F_, S = S_, B = B_;
    auto x = v2(x_.data(), T, D);
    auto out = v2(out_.data(), T, D);
    auto g1 = v1(g1_.data(), D), b1 = v1(b1_.data(), D), g2 = v1(g2_.data(), D), b2 = v1(b2_.data(), D);
    auto wqkv = v2(wqkv_.data(), 3 * D, D), wo = v2(wo_.data(), D, D);
    auto w1 = v2(w1_.data(), F, D), w2 = v2(w2_.data(), D, F);
    auto bqkv = v1(bqkv_.data(), 3 * D), bo = v1(bo_.data(), D), bf1 = v1(bf1_.data(), F), bf2 = v1(bf2_.data(), D);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));

    temp h(b, T * D), qkv(b, T * 3 * D), s(b, B * S * S), p(b, B * S * S), a(b, T * D), x1(b, T * D), h2(b, T * D),
        f(b, T * F);
    auto hv = v2(h.data(), T, D);
    auto qkvv = v2(qkv.data(), T, 3 * D);
    // q, k, v: [B, S, D] views into the QKV rows; k transposed to [B, D, S] for the scores.
    const fusex::strides_t qkv_strides{S * 3 * D, 3 * D, 1};
    auto q = fusex::make_view(qkv.data(), {B, S, D}, qkv_strides);
    auto k = fusex::make_view(qkv.data() + D, {B, S, D}, qkv_strides);
    auto v = fusex::make_view(qkv.data() + 2 * D, {B, S, D}, qkv_strides);
    auto sv = fusex::make_view(s.data(), {B, S, S});
    auto pv = fusex::make_view(p.data(), {B, S, S});
    auto a3 = fusex::make_view(a.data(), {B, S, D});
    auto av = v2(a.data(), T, D);
    auto x1v = v2(x1.data(), T, D);
    auto h2v = v2(h2.data(), T, D);
    auto fv = v2(f.data(), T, F);

    b.eval(hv, fusex::layer_norm(x, g1, b1));
    b.eval(qkvv, fusex::linear(hv, wqkv, bqkv, mm_));
    if (fused) {
      b.eval(sv, fusex::matmul(q, k.transpose(1, 2), mm_) * scale);
      b.eval(pv, fusex::softmax(sv));
      b.eval(a3, fusex::matmul(pv, v, mm_));
      b.eval(x1v, x + fusex::linear(av, wo, bo, mm_));
      b.eval(h2v, fusex::layer_norm(x1v, g2, b2));
      b.eval(fv, fusex::gelu(fusex::linear(h2v, w1, bf1, mm_)));
      b.eval(out, x1v + fusex::linear(fv, w2, bf2, mm_));
    } else {
      temp s2(b, B * S * S), o(b, T * D), f2(b, T * F), o2(b, T * D);
      auto s2v = fusex::make_view(s2.data(), {B, S, S});
      auto ov = v2(o.data(), T, D), f2v = v2(f2.data(), T, F), o2v = v2(o2.data(), T, D);
      b.eval(sv, fusex::matmul(q, k.transpose(1, 2), mm_));
      b.eval(s2v, sv * scale);
      b.eval(pv, fusex::softmax(s2v));
      b.eval(a3, fusex::matmul(pv, v, mm_));
      b.eval(ov, fusex::linear(av, wo, bo, mm_));
      b.eval(x1v, x + ov);
      b.eval(h2v, fusex::layer_norm(x1v, g2, b2));
      b.eval(fv, fusex::linear(h2v, w1, bf1, mm_));
      b.eval(f2v, fusex::gelu(fv));
      b.eval(o2v, fusex::linear(f2v, w2, bf2, mm_));
      b.eval(out, x1v + o2v);
    }
  }

 private:
  fusex::matmul_options mm_;
  std::int64_t B_, S_, D_, F_, T_;
  param x_, out_, g1_, b1_, g2_, b2_, wqkv_, bqkv_, wo_, bo_, w1_, bf1_, w2_, bf2_;
};

// `layers` x (Linear(hidden, hidden) + ReLU) on [batch, hidden].
class mlp_workload : public workload {
 public:
  mlp_workload(bool host, std::int64_t batch, std::int64_t hidden, std::int64_t layers, fusex::matmul_options mm)
      : mm_(mm), B_(batch), H_(hidden), x_(host, batch * hidden), out_(host, batch * hidden) {
    lcg r(3);
    x_.fill(r, -1.0f, 1.0f);
    const float k = 1.0f / std::sqrt(static_cast<float>(hidden));  // PyTorch's default Linear init
    for (std::int64_t i = 0; i < layers; ++i) {
      auto w = std::make_unique<param>(host, hidden * hidden);
      auto bias = std::make_unique<param>(host, hidden);
      w->fill(r, -k, k);
      bias->fill(r, -k, k);
      w_.push_back(std::move(w));
      b_.push_back(std::move(bias));
    }
  }
  std::string name() const override { return "mlp"; }
  std::string shape() const override {
    return std::to_string(w_.size()) + " x (Linear(" + std::to_string(H_) + ", " + std::to_string(H_) +
           ") + ReLU), batch " + std::to_string(B_);
  }
  param& output() override { return out_; }

  void step(backend& b, bool fused) override {
    temp cur_store;
    fusex::view<float> cur = v2(x_.data(), B_, H_);
    for (std::size_t i = 0; i < w_.size(); ++i) {
      const bool last = i + 1 == w_.size();
      temp next_store = last ? temp() : temp(b, B_ * H_);
      const fusex::view<float> next = last ? v2(out_.data(), B_, H_) : v2(next_store.data(), B_, H_);
      auto w = v2(w_[i]->data(), H_, H_);
      auto bias = v1(b_[i]->data(), H_);
      if (fused) {
        b.eval(next, fusex::relu(fusex::linear(cur, w, bias, mm_)));
      } else {
        temp t(b, B_ * H_);  // Linear (GEMM with its bias, as addmm), then ReLU
        auto tv = v2(t.data(), B_, H_);
        b.eval(tv, fusex::linear(cur, w, bias, mm_));
        b.eval(next, fusex::relu(tv));
      }
      cur = next;
      cur_store = std::move(next_store);
    }
  }

 private:
  fusex::matmul_options mm_;
  std::int64_t B_, H_;
  param x_, out_;
  std::vector<std::unique_ptr<param>> w_, b_;
};

std::unique_ptr<workload> make_workload(const std::string& name, bool host, const options& o) {
  if (name == "chain") return std::make_unique<chain_workload>(host, o.batch, o.hidden, o.blocks, o.chain_one_expression);
  fusex::matmul_options mm;
  mm.allow_tf32 = o.tf32;
  if (name == "transformer") return std::make_unique<transformer_workload>(host, o.batch, o.seq, o.hidden, mm);
  return std::make_unique<mlp_workload>(host, o.batch, o.hidden, o.layers, mm);
}

// ---------------------------------------------------------------------------------------------
// Measuring

struct result {
  std::string version;
  bool measured = true;  // false: not run on this backend
  double kernels = 0;    // kernels launched per step (host backend: evaluations per step)
  double host_us = 0;    // host time per step
  double gpu_us = -1;    // GPU time per step (negative: not measured)
  double speedup = 0;    // over (1), GPU time (host time on the host backend)
  double max_diff = 0;   // largest |output - output of (1)|
  bool launch_bound = false;
  bool ok = true;
};

struct workload_result {
  std::string name, shape;
  double tolerance = 0;
  std::vector<result> versions;
};

const char* const version_names[4] = {"(1) unfused", "(2) fused", "(3) fused+arena", "(4) fused+arena+graph"};

void progress(const std::string& workload, int version, int total) {
  std::fprintf(stderr, "\rmeasuring %-11s %d/%d %-24s", workload.c_str(), version + 1, total, version_names[version]);
  std::fflush(stderr);
}
void progress_done() {
  std::fprintf(stderr, "\r%-72s\r", "");
  std::fflush(stderr);
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (!(d <= m)) m = d;  // NaN propagates
  }
  return m;
}

constexpr double relative_tolerance = 1e-3;

// The four versions on the GPU.
workload_result run_device(workload& w, const options& o, cudaStream_t stream) {
  workload_result wr;
  wr.name = w.name();
  wr.shape = w.shape();
  static fusex::cuda_async_resource async_resource;
  fusex::arena& ar = fusex::default_arena();
  std::vector<float> reference;
  for (int v = 0; v < 4; ++v) {
    progress(w.name(), v, 4);
    result r;
    r.version = version_names[v];
    const bool fused = v > 0;
    const bool use_arena = v >= 2;
    // (1) launches as an eager framework does, without PDL; fusex's versions with its default.
    fusex::set_programmatic_dependent_launch(o.pdl && fused);
    // Temporaries, fusex's internal ones included, from cudaMallocAsync or from the arena.
    if (use_arena) {
      fusex::set_default_resource(fusex::device_resource_ref(ar));
    } else {
      fusex::set_default_resource(fusex::device_resource_ref(async_resource));
    }
    backend b;
    b.stream = stream;
    b.resource = fusex::get_default_resource();
    FUSEX_CUDA_CHECK(
        cudaMemsetAsync(w.output().data(), 0xFF, static_cast<std::size_t>(w.output().size()) * sizeof(float), stream));
    fusex::launch_report rep;
    if (v < 3) {
      for (int i = 0; i < o.warmup; ++i) w.step(b, fused);
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (o.warmup == 0) w.step(b, fused);  // at least the output
      fusex::launch_monitor mon(stream);
      for (int i = 0; i < o.steps; ++i) w.step(b, fused);
      rep = mon.report();
      r.kernels = static_cast<double>(rep.kernel_launches) / o.steps;
    } else {
      w.step(b, true);  // eager warm-up: lazy initialisation (plans, cuBLASLt handles) before capture
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
      fusex::graph_exec g;
      {
        fusex::graph_capture cap(stream);
        w.step(b, true);
        g = cap.finish();
      }
      g.upload(stream);
      for (int i = 0; i < std::max(1, o.warmup); ++i) g.launch(stream);
      FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
      fusex::launch_monitor mon(stream);
      for (int i = 0; i < o.steps; ++i) g.launch(stream);
      rep = mon.report();
      r.kernels = static_cast<double>(rep.kernel_launches) / o.steps +
                  static_cast<double>(rep.graph_launches) * static_cast<double>(g.kernel_node_count()) / o.steps;
    }
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
    r.host_us = rep.host_us / o.steps;
    r.gpu_us = rep.gpu_us / o.steps;
    r.launch_bound = rep.launch_bound();
    const std::vector<float> out = w.output().download();
    if (v == 0) {
      reference = out;
      wr.tolerance = relative_tolerance * std::max(1.0, max_abs(reference));
    }
    r.max_diff = max_abs_diff(out, reference);
    r.ok = r.max_diff <= wr.tolerance;
    wr.versions.push_back(r);
  }
  for (auto& r : wr.versions) r.speedup = wr.versions[0].gpu_us / r.gpu_us;
  fusex::set_programmatic_dependent_launch(o.pdl);
  fusex::set_default_resource(fusex::device_resource_ref(ar));
  progress_done();
  return wr;
}

// (1) and (2) on the host backend.
workload_result run_host(workload& w, const options& o) {
  workload_result wr;
  wr.name = w.name();
  wr.shape = w.shape();
  std::vector<float> reference;
  for (int v = 0; v < 4; ++v) {
    result r;
    r.version = version_names[v];
    if (v >= 2) {
      r.measured = false;  // the arena and graphs are GPU features
      wr.versions.push_back(r);
      continue;
    }
    progress(w.name(), v, 2);
    backend b;
    b.host = true;
    const bool fused = v == 1;
    for (int i = 0; i < o.warmup; ++i) w.step(b, fused);
    b.evals = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.steps; ++i) w.step(b, fused);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    r.kernels = static_cast<double>(b.evals) / o.steps;
    r.host_us = us / o.steps;
    const std::vector<float> out = w.output().download();
    if (v == 0) {
      reference = out;
      wr.tolerance = relative_tolerance * std::max(1.0, max_abs(reference));
    }
    r.max_diff = max_abs_diff(out, reference);
    r.ok = r.max_diff <= wr.tolerance;
    wr.versions.push_back(r);
  }
  for (auto& r : wr.versions)
    if (r.measured) r.speedup = wr.versions[0].host_us / r.host_us;
  progress_done();
  return wr;
}

// ---------------------------------------------------------------------------------------------
// Reporting

void print_table(const workload_result& wr, bool gpu) {
  std::printf("\n%s: %s\n", wr.name.c_str(), wr.shape.c_str());
  if (gpu) {
    std::printf("  %-22s %12s %13s %12s %9s %14s  %s\n", "version", "kernels/step", "host us/step", "GPU us/step",
                "speedup", "max abs diff", "");
  } else {
    std::printf("  %-22s %12s %13s %9s %14s  %s\n", "version", "evals/step", "host us/step", "speedup", "max abs diff",
                "");
  }
  for (const result& r : wr.versions) {
    if (!r.measured) {
      std::printf("  %-22s %12s %13s %s%9s %14s  (GPU only)\n", r.version.c_str(), "-", "-", gpu ? "           - " : "",
                  "-", "-");
      continue;
    }
    const char* check = r.ok ? "" : "  MISMATCH";
    if (gpu) {
      std::printf("  %-22s %12.1f %13.1f %12.1f %8.1fx %14.3g  %s%s\n", r.version.c_str(), r.kernels, r.host_us,
                  r.gpu_us, r.speedup, r.max_diff, r.launch_bound ? "launch-bound" : "", check);
    } else {
      std::printf("  %-22s %12.1f %13.1f %8.1fx %14.3g%s\n", r.version.c_str(), r.kernels, r.host_us, r.speedup,
                  r.max_diff, check);
    }
  }
  std::printf("  tolerance: max abs diff <= %.3g (1e-3 x max(1, max|output of (1)|))\n", wr.tolerance);
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

bool write_json(const std::string& file, const options& o, const std::string& device, bool gpu,
                const std::vector<workload_result>& results) {
  std::FILE* f = std::fopen(file.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "fusex-tour: cannot write %s: %s\n", file.c_str(), std::strerror(errno));
    return false;
  }
  std::string s = "{\n";
  s += "  \"program\": \"fusex-tour\",\n";
  s += "  \"fusex_version\": \"" + std::string(fusex::version_string) + "\",\n";
  s += "  \"backend\": \"" + std::string(gpu ? "gpu" : "host") + "\",\n";
  s += "  \"device\": \"" + json_escape(device) + "\",\n";
  s += "  \"config\": {\"batch\": " + std::to_string(o.batch) + ", \"hidden\": " + std::to_string(o.hidden) +
       ", \"layers\": " + std::to_string(o.layers) + ", \"seq\": " + std::to_string(o.seq) +
       ", \"blocks\": " + std::to_string(o.blocks) + ", \"steps\": " + std::to_string(o.steps) +
       ", \"warmup\": " + std::to_string(o.warmup) + ", \"pdl\": " + (o.pdl ? "true" : "false") +
       ", \"tf32\": " + (o.tf32 && gpu ? "true" : "false") + "},\n";
  s += "  \"workloads\": [\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const workload_result& wr = results[i];
    s += "    {\"name\": \"" + wr.name + "\", \"shape\": \"" + json_escape(wr.shape) +
         "\", \"tolerance\": " + num(wr.tolerance) + ", \"versions\": [\n";
    for (std::size_t j = 0; j < wr.versions.size(); ++j) {
      const result& r = wr.versions[j];
      s += "      {\"version\": \"" + r.version + "\", \"measured\": " + (r.measured ? "true" : "false");
      if (r.measured) {
        s += ", \"kernels_per_step\": " + num(r.kernels) + ", \"host_us_per_step\": " + num(r.host_us) +
             ", \"gpu_us_per_step\": " + (gpu ? num(r.gpu_us) : std::string("null")) +
             ", \"speedup\": " + num(r.speedup) + ", \"max_abs_diff\": " + num(r.max_diff) +
             ", \"launch_bound\": " + (r.launch_bound ? "true" : "false") + ", \"ok\": " + (r.ok ? "true" : "false");
      }
      s += j + 1 < wr.versions.size() ? "},\n" : "}\n";
    }
    s += i + 1 < results.size() ? "    ]},\n" : "    ]}\n";
  }
  s += "  ]\n}\n";
  const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  return (std::fclose(f) == 0) && ok;
}

int run(int argc, char** argv) {
  bool exit_now = false;
  int exit_code = 0;
  options o;
  try {
    o = parse(argc, argv, exit_now, exit_code);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "fusex-tour: %s\nRun 'fusex-tour --help' for the options.\n", e.message.c_str());
    return exit_usage;
  }
  if (exit_now) return exit_code;

  std::printf("fusex %s tour\n", fusex::version_string);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  const bool have_gpu = err == cudaSuccess && count > 0;
  std::string device;
  if (!have_gpu) {
    // Without any driver CUDA answers cudaErrorInsufficientDriver, whose text ("driver version is
    // insufficient for CUDA runtime version") reads as "upgrade your driver": say what is likely.
    if (err == cudaErrorInsufficientDriver) {
      std::printf(
          "No usable CUDA device: no NVIDIA GPU or driver was found (CUDA reports "
          "cudaErrorInsufficientDriver: no driver is loaded, or it is older than this CUDA %d.%d "
          "runtime needs). fusex needs an NVIDIA GPU to run its kernels.\n",
          CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
    } else if (err == cudaErrorNoDevice || err == cudaSuccess) {
      std::printf(
          "No usable CUDA device: no NVIDIA GPU was found. fusex needs an NVIDIA GPU to run its "
          "kernels.\n");
    } else {
      std::printf("No usable CUDA device (%s: %s): fusex needs an NVIDIA GPU to run its kernels.\n",
                  cudaGetErrorName(err), cudaGetErrorString(err));
    }
    (void)cudaGetLastError();
    if (o.require_device) return exit_no_device;
  } else if (o.device >= count) {
    std::fprintf(stderr, "fusex-tour: --device %d, but there %s only %d device%s\n", o.device,
                 count == 1 ? "is" : "are", count, count == 1 ? "" : "s");
    return exit_usage;
  }
  const bool gpu = have_gpu && !o.force_host;
  if (!gpu) {
    // The host backend computes element by element: a small size keeps this quick.
    if (!o.set_batch) o.batch = 4;
    if (!o.set_hidden) o.hidden = 32;
    if (!o.set_layers) o.layers = 8;
    if (!o.set_seq) o.seq = 8;
    if (!o.set_blocks) o.blocks = 8;
    if (!o.set_steps) o.steps = 3;
    if (!o.set_warmup) o.warmup = 1;
    device = "host backend (CPU)";
    std::printf(
        "Running fusex's host backend on the CPU instead, at a small size: the same expressions, planned\n"
        "by the same planner, computed by the same operation functors. No GPU timings; versions (3)\n"
        "and (4) need a GPU.\n");
  } else {
    FUSEX_CUDA_CHECK(cudaSetDevice(o.device));
    cudaDeviceProp prop{};
    FUSEX_CUDA_CHECK(cudaGetDeviceProperties(&prop, o.device));
    device = prop.name;
    std::printf("device %d: %s, sm_%d%d, %d SMs\n", o.device, prop.name, prop.major, prop.minor,
                prop.multiProcessorCount);
    std::printf(
        "%d measured steps per version after %d warm-up steps; PDL %s for the fusex versions; float32 GEMMs %s\n",
        o.steps, o.warmup, o.pdl ? "on" : "off", o.tf32 ? "on TF32 tensor cores (--tf32)" : "in float32 (no TF32)");
  }

  std::vector<workload_result> results;
  cudaStream_t stream = nullptr;
  if (gpu) FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const std::string& name : o.workloads) {
    std::unique_ptr<workload> w = make_workload(name, !gpu, o);
    results.push_back(gpu ? run_device(*w, o, stream) : run_host(*w, o));
    print_table(results.back(), gpu);
  }
  if (gpu) {
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
    FUSEX_CUDA_CHECK(cudaStreamDestroy(stream));
  }
  if (gpu) {
    std::printf(
        "\nkernels/step: counted by fusex::launch_monitor (graph replays: the graph's kernel nodes).\n"
        "speedup: over (1), by GPU time per step.\n");
  } else {
    std::printf(
        "\nevals/step: fusex evaluations per step (on a GPU, the kernels fusex::launch_monitor counts).\n"
        "speedup: over (1), by host time per step (the host backend; not a GPU measurement).\n");
  }
  if (!o.json.empty()) {
    if (!write_json(o.json, o, device, gpu, results)) return exit_failure;
    std::printf("wrote %s\n", o.json.c_str());
  }
  bool ok = true;
  for (const auto& wr : results)
    for (const auto& r : wr.versions) ok = ok && r.ok;
  if (!ok) {
    std::printf("A version's output differs from (1)'s beyond the tolerance (MISMATCH above).\n");
    return exit_failure;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\nfusex-tour: %s\n", e.what());
    return exit_failure;
  }
}
