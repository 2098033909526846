// fusex-tour: the chain workload (see fusex_tour.cu).
#include "chain_blocks.hpp"
#include "tour.hpp"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tour {
namespace {

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
      const chain_block blk{cur, next, g, bb, scale, shift, w};
      if (fused && one_expression_) chain_block_one_expression(b, blk);
      else if (fused) chain_block_fused(b, blk);
      else chain_block_unfused(b, blk);
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

}  // namespace

// Two kernels per block. (Written as one expression, the rms_norm's reduction nests over the
// layer_norm's and the block is one kernel of three dependent phases; measured on the H200 at
// [16, 256] that kernel took about twice as long as these two: the rows are short, so each
// phase's latency, not the memory traffic, sets the time.)
void chain_block_fused(backend& b, const chain_block& k) {
  temp t(b, k.cur.size());
  const auto tv = v2(t.data(), k.cur.extent(0), k.cur.extent(1));
  b.eval(tv, k.cur + fusex::gelu(fusex::layer_norm(k.cur, k.g, k.b) * k.scale + k.shift) * 0.5f);
  b.eval(k.next, fusex::rms_norm(tv, k.w));
}

std::unique_ptr<workload> make_chain(bool host, const options& o) {
  return std::make_unique<chain_workload>(host, o.batch, o.hidden, o.blocks, o.chain_one_expression);
}

}  // namespace tour
