// softmax and layer_norm over the rows of a matrix: each is one fused kernel (a row reduction with
// its epilogue), checked against plain loops in double precision. With a GPU it runs there;
// without one it runs the same expressions on fusex's host backend. Exit 0 when both agree.
#include <fusex/fusex.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {
constexpr std::int64_t rows = 512, cols = 1000;

// The same expressions whatever the backend: `run(dst, expr)` evaluates on the GPU or the host.
template <class Run>
void compute(Run&& run, float* x, float* gamma, float* beta, float* sm, float* ln) {
  auto xv = fusex::make_view(x, {rows, cols});
  auto g = fusex::make_view(gamma, {cols});
  auto b = fusex::make_view(beta, {cols});
  run(fusex::make_view(sm, {rows, cols}), fusex::softmax(xv));           // one kernel
  run(fusex::make_view(ln, {rows, cols}), fusex::layer_norm(xv, g, b));  // one kernel
}

double check(const std::vector<float>& x, const std::vector<float>& g, const std::vector<float>& b,
             const std::vector<float>& sm, const std::vector<float>& ln) {
  double worst = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[static_cast<std::size_t>(r * cols)];
    double mx = xr[0], sum = 0, mean = 0, var = 0;
    for (std::int64_t c = 0; c < cols; ++c) mx = std::max(mx, static_cast<double>(xr[c]));
    for (std::int64_t c = 0; c < cols; ++c) sum += std::exp(xr[c] - mx);
    for (std::int64_t c = 0; c < cols; ++c) mean += xr[c];
    mean /= cols;
    for (std::int64_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * cols + c);
      const double s = std::exp(xr[c] - mx) / sum;
      const double l = (xr[c] - mean) / std::sqrt(var + 1e-5) * g[c] + b[c];
      worst = std::max({worst, std::fabs(sm[i] - s) / (s + 1e-6), std::fabs(ln[i] - l)});
    }
  }
  return worst;
}
}  // namespace

int main() {
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  std::vector<float> x(n), g(cols), b(cols), sm(n), ln(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = 4.0f * std::sin(0.37f * static_cast<float>(i));
  for (std::int64_t c = 0; c < cols; ++c) {
    g[c] = 1.0f + 0.001f * static_cast<float>(c);
    b[c] = 0.01f * static_cast<float>(c % 7);
  }
  int devices = 0;
  const bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  if (gpu) {
    cudaStream_t s;
    FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    fusex::tensor<float> dx({rows, cols}, s), dg({cols}, s), db({cols}, s), dsm({rows, cols}, s), dln({rows, cols}, s);
    FUSEX_CUDA_CHECK(cudaMemcpyAsync(dx.data(), x.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
    FUSEX_CUDA_CHECK(cudaMemcpyAsync(dg.data(), g.data(), cols * sizeof(float), cudaMemcpyHostToDevice, s));
    FUSEX_CUDA_CHECK(cudaMemcpyAsync(db.data(), b.data(), cols * sizeof(float), cudaMemcpyHostToDevice, s));
    fusex::launch_monitor mon(s);
    compute([&](const auto& dst, const auto& e) { fusex::eval(dst, e, s); }, dx.data(), dg.data(), db.data(),
            dsm.data(), dln.data());
    const fusex::launch_report r = mon.report();
    FUSEX_CUDA_CHECK(cudaMemcpyAsync(sm.data(), dsm.data(), n * sizeof(float), cudaMemcpyDeviceToHost, s));
    FUSEX_CUDA_CHECK(cudaMemcpyAsync(ln.data(), dln.data(), n * sizeof(float), cudaMemcpyDeviceToHost, s));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    std::printf("GPU: softmax and layer_norm of [%lld, %lld]: %s\n", static_cast<long long>(rows),
                static_cast<long long>(cols), r.str().c_str());
    std::printf("%s", fusex::explain(dsm.view(), fusex::softmax(dx.view())).c_str());
    if (r.kernel_launches != 2) {
      std::printf("softmax_layer_norm: expected 2 kernels, counted %llu\n",
                  static_cast<unsigned long long>(r.kernel_launches));
      return 1;
    }
  } else {
    std::printf("No usable CUDA device: running the same expressions on fusex's host backend.\n");
    compute([](const auto& dst, const auto& e) { fusex::host::eval(dst, e); }, x.data(), g.data(), b.data(), sm.data(),
            ln.data());
  }
  const double worst = check(x, g, b, sm, ln);
  std::printf("softmax_layer_norm: largest error against double-precision loops %.3g (tolerance 1e-4)\n", worst);
  return worst <= 1e-4 ? 0 : 1;
}
