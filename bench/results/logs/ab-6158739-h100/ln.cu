#include <fusex/fusex.hpp>
void ln_bf16(fusex::bfloat16* y, const fusex::bfloat16* x, const fusex::bfloat16* g, const fusex::bfloat16* b, cudaStream_t s) {
  auto xv = fusex::make_view(x, {16384, 4096});
  auto gv = fusex::make_view(g, {4096});
  auto bv = fusex::make_view(b, {4096});
  fusex::eval(fusex::make_view(y, {16384, 4096}), fusex::layer_norm(xv, gv, bv), s);
}
void lnr_f32(float* y, const float* x, const float* r, const float* g, const float* b, cudaStream_t s) {
  auto xv = fusex::make_view(x, {16384, 4096});
  auto rv = fusex::make_view(r, {16384, 4096});
  auto gv = fusex::make_view(g, {4096});
  auto bv = fusex::make_view(b, {4096});
  fusex::eval(fusex::make_view(y, {16384, 4096}), fusex::layer_norm(xv + rv, gv, bv), s);
}
