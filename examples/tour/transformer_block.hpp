// fusex-tour: the transformer block (see fusex_tour.cu), in float32 ("transformer") and in bfloat16
// ("transformer-bf16", as inference runs it: GEMMs on tensor cores). One class template serves both,
// so that the two rows compute the same block; each is instantiated in its own translation unit
// (workload_transformer.cu, workload_transformer_bf16.cu), so that the tour builds in parallel.
#pragma once

#include "tour.hpp"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace tour {


// One pre-LN transformer block with a single attention head, on [batch * seq, hidden]: parameters
// and activations in Elem (float or fusex::bfloat16). fusex computes the 16-bit elementwise and
// reduction steps in float and rounds to Elem where it stores; the GEMMs accumulate in float.
template <class Elem>  // not T: step() names the token count T
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
  std::string name() const override { return is_bf16 ? "transformer-bf16" : "transformer"; }
  std::string shape() const override {
    return std::string(fusex::dtype_name<Elem>()) + ", 1 block, [" + std::to_string(B_) + " x " + std::to_string(S_) +
           ", " + std::to_string(D_) + "], ffn " + std::to_string(F_);
  }
  basic_param<Elem>& output() override { return out_; }
  // bfloat16 keeps 8 significant bits: one rounding moves a value by up to 2^-8 of it, and (1)
  // rounds each intermediate to bfloat16 where the fused versions keep it in float (the residual
  // sums, the scaled scores, the gelu input), so outputs differ by a few bfloat16 ulps, each at
  // most 2^-7 x max|output|. 3e-2 allows about 4 ulps at the largest magnitude (the host run
  // shows 2); a wrong result (a mis-strided view, a missing residual or norm) moves it far more.
  double relative_tolerance() const override { return is_bf16 ? 3e-2 : 1e-3; }

  void step(backend& b, bool fused) override {
    const std::int64_t T = T_, D = D_, F = F_, S = S_, B = B_;
    auto x = v2(x_.data(), T, D);
    auto out = v2(out_.data(), T, D);
    auto g1 = v1(g1_.data(), D), b1 = v1(b1_.data(), D), g2 = v1(g2_.data(), D), b2 = v1(b2_.data(), D);
    auto wqkv = v2(wqkv_.data(), 3 * D, D), wo = v2(wo_.data(), D, D);
    auto w1 = v2(w1_.data(), F, D), w2 = v2(w2_.data(), D, F);
    auto bqkv = v1(bqkv_.data(), 3 * D), bo = v1(bo_.data(), D), bf1 = v1(bf1_.data(), F), bf2 = v1(bf2_.data(), D);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));

    using temp = basic_temp<Elem>;
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
  static constexpr bool is_bf16 = std::is_same_v<Elem, fusex::bfloat16>;
  fusex::matmul_options mm_;
  std::int64_t B_, S_, D_, F_, T_;
  basic_param<Elem> x_, out_, g1_, b1_, g2_, b2_, wqkv_, bqkv_, wo_, bo_, w1_, bf1_, w2_, bf2_;
};


/// The bfloat16 block (workload_transformer_bf16.cu).
std::unique_ptr<workload> make_transformer_bf16(bool host, const options& o, fusex::matmul_options mm);

}  // namespace tour
