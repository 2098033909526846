// README's five-line example as a real program: y = relu(x + bias) as one kernel, checked against
// a host computation. Exits 77 (skipped) without a GPU when run with --require-device, else 0.
#include <fusex/fusex.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const bool require = argc > 1 && std::strcmp(argv[1], "--require-device") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("relu_bias: no usable CUDA device\n");
    return require ? 77 : 0;
  }
  const std::int64_t rows = 1000, cols = 784;
  std::vector<float> hx(rows * cols), hb(cols), hy(rows * cols);
  for (std::size_t i = 0; i < hx.size(); ++i) hx[i] = std::sin(0.1f * static_cast<float>(i));
  for (std::size_t i = 0; i < hb.size(); ++i) hb[i] = 0.001f * static_cast<float>(i) - 0.3f;
  cudaStream_t stream;
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *d_x, *d_bias, *d_y;
  FUSEX_CUDA_CHECK(cudaMalloc(&d_x, hx.size() * sizeof(float)));
  FUSEX_CUDA_CHECK(cudaMalloc(&d_bias, hb.size() * sizeof(float)));
  FUSEX_CUDA_CHECK(cudaMalloc(&d_y, hy.size() * sizeof(float)));
  FUSEX_CUDA_CHECK(cudaMemcpy(d_x, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
  FUSEX_CUDA_CHECK(cudaMemcpy(d_bias, hb.data(), hb.size() * sizeof(float), cudaMemcpyHostToDevice));

  // --- the README example ---
  auto x = fusex::make_view(d_x, {rows, cols});
  auto bias = fusex::make_view(d_bias, {cols});
  auto y = fusex::make_view(d_y, {rows, cols});
  fusex::eval(y, fusex::relu(x + bias), stream);  // one kernel, no temporaries
  // ---

  std::printf("%s", fusex::explain(y, fusex::relu(x + bias)).c_str());
  FUSEX_CUDA_CHECK(cudaMemcpyAsync(hy.data(), d_y, hy.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::size_t bad = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = hx[r * cols + c] + hb[c];
      bad += hy[r * cols + c] != (v > 0 ? v : 0.0f);
    }
  FUSEX_CUDA_CHECK(cudaFree(d_x));
  FUSEX_CUDA_CHECK(cudaFree(d_bias));
  FUSEX_CUDA_CHECK(cudaFree(d_y));
  FUSEX_CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("relu_bias: %zu of %lld elements wrong\n", bad, static_cast<long long>(rows * cols));
  return bad == 0 ? 0 : 1;
}
