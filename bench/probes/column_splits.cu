// Probe (built as probe.hpp says): the library's column kernel at several split counts, to choose the rule (docs/performance.md, session 10).
#include "probe.hpp"

int main() {
  using kern_t = void (*)(fd::reduce2d_params<unsigned>, fusex::reduce_ops::sum, fd::leaf_eval<float, unsigned>, float*, float*);
  kern_t k = &fd::reduce_cols_kernel<unsigned, 4, fusex::reduce_ops::sum, fd::leaf_eval<float, unsigned>, float, float>;
  auto fin = &fd::reduce_finish_cols_kernel<unsigned, fusex::reduce_ops::sum, float, float, float>;
  int bps = 0; FUSEX_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, k, 256, 0));
  cudaFuncAttributes fa; FUSEX_CUDA_CHECK(cudaFuncGetAttributes(&fa, k));
  printf("reduce_cols_kernel<float sum>: %d regs, %d blocks/SM\n", fa.numRegs, bps);
  for (int shape = 0; shape < 3; ++shape) {
    const int rows = shape == 0 ? 4096 : shape == 1 ? 16384 : 1024, cols = shape == 0 ? 16384 : shape == 1 ? 4096 : 65536;
    const i64 n = (i64)rows * cols;
    std::vector<float> h(n);
    for (i64 i = 0; i < n; ++i) h[i] = float((i * 2654435761u) % 1000) / 1000.f + 0.001f;
    std::vector<double> ref(cols, 0.0);
    for (int r = 0; r < rows; ++r) for (int c = 0; c < cols; ++c) ref[c] += h[(i64)r * cols + c];
    float *x, *y, *p, *cp; FUSEX_CUDA_CHECK(cudaMalloc(&x, n * 4)); FUSEX_CUDA_CHECK(cudaMalloc(&cp, n * 4)); FUSEX_CUDA_CHECK(cudaMalloc(&y, cols * 4)); FUSEX_CUDA_CHECK(cudaMalloc(&p, (i64)512 * cols * 4));
    FUSEX_CUDA_CHECK(cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice));
    auto check = [&](const char* what) {
      std::vector<float> o(cols); FUSEX_CUDA_CHECK(cudaMemcpy(o.data(), y, cols * 4, cudaMemcpyDeviceToHost));
      double worst = 0; for (int c = 0; c < cols; ++c) worst = std::max(worst, std::fabs(o[c] - ref[c]) / std::fabs(ref[c]));
      if (worst > 1e-5) printf("  %s: WRONG, worst rel err %g\n", what, worst);
      FUSEX_CUDA_CHECK(cudaMemset(y, 0xff, cols * 4));
    };
    const double copy_us = timeit([&] { FUSEX_CUDA_CHECK(cudaMemcpyAsync(cp, x, n * 4, cudaMemcpyDeviceToDevice)); });
    const double copy_bps = 2.0 * n * 4 / (copy_us * 1e-6);
    auto report = [&](const char* what, double us) {
      const double b = (n * 4.0 + cols * 4.0) / (us * 1e-6);
      printf("%-48s %8.2f us  ratio %.3f\n", what, us, b / copy_bps);
    };
    printf("\n[%d, %d] copy %.2f us\n", rows, cols, copy_us);
    auto xv = fusex::make_view(x, {rows, cols});
    auto yv = fusex::make_view(y, {cols});
    report("fusex::eval(sum(x, 0))", timeit([&] { fusex::eval(yv, fusex::sum(xv, 0), cudaStream_t{}); }));
    check("fusex");
    const int tiles = cols / 128;
    fd::leaf_eval<float, unsigned> child{x, {unsigned(cols), 1u}};
    for (int want : {2, 4, 6, 8, 10, 12, 16, 17, 24, 32, 48, 64}) {
      fd::reduce2d_params<unsigned> prm{};
      prm.k_count = cols; prm.n_count = rows; prm.lane_shift = 5;
      prm.span = (rows + want - 1) / want;
      const int splits = (rows + prm.span - 1) / prm.span;
      prm.splits = splits;
      char name[96];
      snprintf(name, sizeof name, "cols kernel, splits %d (%d blocks, %.2f waves)", splits, tiles * splits, double(tiles * splits) / (132.0 * bps));
      report(name, timeit([&] { k<<<dim3(tiles, splits), 256>>>(prm, {}, child, p, y); }));
      snprintf(name, sizeof name, "  + finish");
      report(name, timeit([&] { k<<<dim3(tiles, splits), 256>>>(prm, {}, child, p, y); fin<<<(cols + 31) / 32, 256>>>(cols, splits, rows, {}, p, y); }));
      check(name);
    }
    FUSEX_CUDA_CHECK(cudaFree(x)); FUSEX_CUDA_CHECK(cudaFree(y)); FUSEX_CUDA_CHECK(cudaFree(p)); FUSEX_CUDA_CHECK(cudaFree(cp));
  }
  return 0;
}
