// A compile-time probe (not in compile_time.sh's rounds): a deep expression whose shared values
// nest (e1 used three times in e2, e2 three times in e3), the case that load_outlined
// (include/fusex/device/evaluator.hpp) keeps linear in the run-time-role kernel form. It was the
// deep case of tests/expr/test_elementwise_gpu_launch.cu until 60f628b. docs/performance.md,
// "Compile time", gives its A/B.
#include <fusex/fusex.hpp>

void run(float* y, const float* x, const float* b, int rows, int cols, cudaStream_t s) {
  auto xv = fusex::make_view(x, {rows, cols});
  auto bv = fusex::make_view(b, {cols});
  auto e1 = fusex::gelu(xv * bv + bv) - fusex::sigmoid(xv);
  auto e2 = fusex::where(e1 > 0, fusex::exp(e1), fusex::log1p(fusex::abs(e1))) * fusex::tanh(e1 + xv);
  auto e3 = fusex::clamp(e2 * e2 + fusex::sqrt(fusex::abs(e2)), -3.0f, 3.0f) / (1.0f + fusex::cast<fusex::bfloat16>(e1));
  fusex::eval(fusex::make_view(y, {rows, cols}), e3, s);
}
