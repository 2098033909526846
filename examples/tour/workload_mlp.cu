// fusex-tour: the MLP workload (see fusex_tour.cu).
#include "tour.hpp"

#include <fusex/sequence.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tour {
namespace {

// `layers` x (Linear(hidden, hidden) + ReLU) on [batch, hidden].
class mlp_workload : public workload {
 public:
  mlp_workload(bool host, std::int64_t batch, std::int64_t hidden, std::int64_t layers, fusex::matmul_options mm,
               bool persistent)
      : mm_(mm), B_(batch), H_(hidden), persistent_(persistent), x_(host, batch * hidden), out_(host, batch * hidden) {
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
      seq_.linear(fusex::view<const float>(w_.back()->data(), {hidden, hidden}),
                  fusex::view<const float>(b_.back()->data(), {hidden}), fusex::activation::relu);
    }
  }
  std::string name() const override { return persistent_ ? "mlp-persistent" : "mlp"; }
  std::string shape() const override {
    return std::to_string(w_.size()) + " x (Linear(" + std::to_string(H_) + ", " + std::to_string(H_) +
           ") + ReLU), batch " + std::to_string(B_) + (persistent_ ? ", fused: one fusex::layer_sequence" : "");
  }
  param& output() override { return out_; }

  void step(backend& b, bool fused) override {
    if (fused && persistent_) {  // the whole chain: one kernel where the GPU has clusters
      ++b.evals;
      const fusex::view<const float> x(x_.data(), {B_, H_});
      const fusex::view<float> y(out_.data(), {B_, H_});
      if (b.host) seq_.run_host(x, y);
      else seq_.run(x, y, b.stream);
      return;
    }
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
  bool persistent_;
  param x_, out_;
  std::vector<std::unique_ptr<param>> w_, b_;
  fusex::layer_sequence seq_;
};

}  // namespace

std::unique_ptr<workload> make_mlp(bool host, const options& o, bool persistent) {
  fusex::matmul_options mm;
  mm.allow_tf32 = o.tf32;
  return std::make_unique<mlp_workload>(host, o.batch, o.hidden, o.layers, mm, persistent);
}

}  // namespace tour
