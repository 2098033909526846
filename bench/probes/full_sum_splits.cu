// Probe (built as probe.hpp says): the library's full-sum path (reduce_rows_kernel, k = 1) at several split counts beside cub (docs/performance.md, session 10).
#include "probe.hpp"
#include <cub/device/device_reduce.cuh>

int main() {
  auto k = &fd::reduce_rows_kernel<unsigned, 4, fusex::reduce_ops::sum, fd::leaf_eval<float, unsigned>, float, float>;
  auto fin = &fd::reduce_finish_kernel<unsigned, fusex::reduce_ops::sum, float, float, float>;
  int bps = 0; FUSEX_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, k, 256, 0));
  cudaFuncAttributes fa; FUSEX_CUDA_CHECK(cudaFuncGetAttributes(&fa, k));
  printf("reduce_rows_kernel<float sum>: %d regs, %d blocks/SM\n", fa.numRegs, bps);
  const i64 n = i64{1} << 28;
  float *x, *y, *p, *cp; FUSEX_CUDA_CHECK(cudaMalloc(&x, n * 4)); FUSEX_CUDA_CHECK(cudaMalloc(&cp, n * 4)); FUSEX_CUDA_CHECK(cudaMalloc(&y, 4)); FUSEX_CUDA_CHECK(cudaMalloc(&p, 65536 * 4));
  std::vector<float> h(n);
  for (i64 i = 0; i < n; ++i) h[i] = float((i * 2654435761u) % 1000) / 1000.f + 0.001f;
  double ref = 0; for (i64 i = 0; i < n; ++i) ref += h[i];
  FUSEX_CUDA_CHECK(cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice));
  auto check = [&](const char* what) {
    float o; FUSEX_CUDA_CHECK(cudaMemcpy(&o, y, 4, cudaMemcpyDeviceToHost));
    if (std::fabs(o - ref) / ref > 1e-5) printf("  %s: WRONG %g vs %g\n", what, o, ref);
    FUSEX_CUDA_CHECK(cudaMemset(y, 0xff, 4));
  };
  const double copy_us = timeit([&] { FUSEX_CUDA_CHECK(cudaMemcpyAsync(cp, x, n * 4, cudaMemcpyDeviceToDevice)); });
  printf("copy 1 GiB: %.2f us (read-only ceiling at the copy's bytes/s: %.2f us)\n", copy_us, copy_us / 2);
  std::size_t tb = 0; void* tmp = nullptr;
  FUSEX_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, tb, x, y, n)); FUSEX_CUDA_CHECK(cudaMalloc(&tmp, tb));
  printf("%-50s %8.2f us\n", "cub::DeviceReduce::Sum", timeit([&] { FUSEX_CUDA_CHECK(cub::DeviceReduce::Sum(tmp, tb, x, y, n)); }));
  check("cub");
  auto xv = fusex::make_view(x, {n});
  auto yv = fusex::make_view(y, {});
  printf("%-50s %8.2f us\n", "fusex::eval(sum(x))", timeit([&] { fusex::eval(yv, fusex::sum(xv), cudaStream_t{}); }));
  check("fusex");
  fd::leaf_eval<float, unsigned> child{x, {0u, 1u}};
  const int wave = 132 * bps;
  for (int splits : {132, 264, 396, 528, wave / 2, wave, 2 * wave, 2112, 3 * wave, 4 * wave, 8 * wave}) {
    fd::reduce2d_params<unsigned> prm{};
    prm.k_count = 1; prm.n_count = unsigned(n); prm.splits = splits;
    char name[96];
    snprintf(name, sizeof name, "rows kernel, splits %d (%.2f waves)", splits, double(splits) / wave);
    printf("%-50s %8.2f us", name, timeit([&] { k<<<dim3(splits, 1, 1), 256>>>(prm, {}, child, p, y); }));
    printf("   + finish %8.2f us\n", timeit([&] { k<<<dim3(splits, 1, 1), 256>>>(prm, {}, child, p, y); fin<<<dim3(1, 1), 256>>>(1u, unsigned(splits), unsigned(n), true, {}, p, y); }));
    check(name);
  }
  return 0;
}
