// fusex::launch_monitor around user code: is this loop launch-bound? The same 30-operation update
// runs unfused (30 kernels), fused (1 kernel), and as a replayed graph; the monitor counts the
// launches and compares host submit time with GPU time. Needs a GPU (exits 77 with
// --require-device when there is none, else 0).
#include <fusex/fusex.hpp>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  const bool require = argc > 1 && std::strcmp(argv[1], "--require-device") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("launch_monitor: no usable CUDA device\n");
    return require ? 77 : 0;
  }
  cudaStream_t s;
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::int64_t n = 4096;  // small: each kernel runs for a microsecond or two
  fusex::tensor<float> x({n}, s), y({n}, s);
  fusex::eval(x, 0.5f, s);
  fusex::eval(y, 0.0f, s);
  const int iterations = 100;

  // Unfused: 30 separate operations per iteration.
  fusex::launch_report unfused;
  {
    fusex::launch_monitor mon(s);
    for (int it = 0; it < iterations; ++it)
      for (int k = 0; k < 30; ++k) fusex::eval(y, y * 0.99f + x, s);
    unfused = mon.report();
  }
  // Fused: the same 30 steps written as one expression (unrolled at compile time).
  auto body = [&](const auto& yy) { return yy * 0.99f + x; };
  fusex::launch_report fused;
  {
    fusex::launch_monitor mon(s);
    for (int it = 0; it < iterations; ++it) {
      auto e0 = body(body(body(body(body(y)))));
      auto e1 = body(body(body(body(body(e0)))));
      auto e2 = body(body(body(body(body(e1)))));
      auto e3 = body(body(body(body(body(e2)))));
      auto e4 = body(body(body(body(body(e3)))));
      fusex::eval(y, body(body(body(body(body(e4))))), s);  // 30 applications, one kernel
    }
    fused = mon.report();
  }
  // Graph: the unfused iteration captured once and replayed.
  fusex::graph_exec g = [&] {
    fusex::graph_capture cap(s);
    for (int k = 0; k < 30; ++k) fusex::eval(y, y * 0.99f + x, s);
    return cap.finish();
  }();
  fusex::launch_report graph;
  {
    fusex::launch_monitor mon(s);
    for (int it = 0; it < iterations; ++it) g.launch(s);
    graph = mon.report();
  }
  std::printf("unfused, 100 x 30 kernels: %s\n", unfused.str().c_str());
  std::printf("fused,   100 x 1 kernel:   %s\n", fused.str().c_str());
  std::printf("graph,   100 x 1 graph:    %s\n", graph.str().c_str());
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  const bool counts_ok = unfused.kernel_launches == 3000 && fused.kernel_launches == 100 &&
                         graph.graph_launches == 100 && graph.kernel_launches == 0;
  std::printf("launch_monitor: launch counts %s\n", counts_ok ? "as expected" : "WRONG");
  return counts_ok ? 0 : 1;
}
