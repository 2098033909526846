// A graph-captured inference step with the arena: a small residual MLP block
// (layer_norm -> scale/shift -> gelu -> residual) whose temporaries come from fusex's arena, captured
// once into a CUDA graph and replayed for every request. The replay is checked against the eager
// step. Needs a GPU (exits 77 with --require-device when there is none, else 0).
#include <fusex/fusex.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {
constexpr std::int64_t batch = 16, hidden = 512, depth = 8;

// One inference step: reads `in`, writes `out`; temporaries are tensors from the default resource
// (the arena), freed on the stream at the end of the step, which a graph capture turns into
// graph-private memory.
void step(const fusex::view<float>& in, const fusex::view<float>& out, const fusex::view<float>& gamma,
          const fusex::view<float>& beta, cudaStream_t s) {
  fusex::tensor<float> a({batch, hidden}, s), b({batch, hidden}, s);
  fusex::eval(a, in, s);
  for (int i = 0; i < depth; ++i) {
    fusex::eval(b, a + 0.5f * fusex::gelu(fusex::layer_norm(a, gamma, beta)), s);  // one kernel
    fusex::eval(a, fusex::rms_norm(b), s);                                         // one kernel
  }
  fusex::eval(out, a, s);
}
}  // namespace

int main(int argc, char** argv) {
  const bool require = argc > 1 && std::strcmp(argv[1], "--require-device") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("graph_inference: no usable CUDA device; CUDA graphs need a GPU\n");
    return require ? 77 : 0;
  }
  cudaStream_t s;  // a graph is captured on a stream you create, never the default stream
  FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const std::size_t n = static_cast<std::size_t>(batch * hidden);
  std::vector<float> hin(n), hg(hidden, 1.0f), hb(hidden, 0.0f), eager(n), replay(n);
  for (std::size_t i = 0; i < n; ++i) hin[i] = std::sin(0.05f * static_cast<float>(i));
  fusex::tensor<float> in({batch, hidden}, s), out({batch, hidden}, s), gamma({hidden}, s), beta({hidden}, s);
  FUSEX_CUDA_CHECK(cudaMemcpyAsync(in.data(), hin.data(), n * sizeof(float), cudaMemcpyHostToDevice, s));
  FUSEX_CUDA_CHECK(cudaMemcpyAsync(gamma.data(), hg.data(), hidden * sizeof(float), cudaMemcpyHostToDevice, s));
  FUSEX_CUDA_CHECK(cudaMemcpyAsync(beta.data(), hb.data(), hidden * sizeof(float), cudaMemcpyHostToDevice, s));

  // Eager once (also warms up lazy initialisation), for the reference.
  step(in, out, gamma, beta, s);
  FUSEX_CUDA_CHECK(cudaMemcpyAsync(eager.data(), out.data(), n * sizeof(float), cudaMemcpyDeviceToHost, s));
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));

  // Capture: the step's tensors come from a graph-private pool of the arena.
  fusex::graph_exec g = [&] {
    fusex::graph_capture cap(s);
    step(in, out, gamma, beta, s);
    return cap.finish();
  }();
  std::printf("captured %zu kernels (graph memory %zu bytes)\n", g.kernel_node_count(), g.memory_bytes());

  // Serve "requests": new input each time, same addresses, one graph launch each.
  fusex::launch_monitor mon(s);
  for (int request = 0; request < 100; ++request) g.launch(s);
  std::printf("100 replays: %s\n", mon.report().str().c_str());
  FUSEX_CUDA_CHECK(cudaMemcpyAsync(replay.data(), out.data(), n * sizeof(float), cudaMemcpyDeviceToHost, s));
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) worst = std::fmax(worst, std::fabs(replay[i] - eager[i]));
  std::printf("graph_inference: replay vs eager largest difference %.3g\n", worst);
  FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
  return worst == 0.0 ? 0 : 1;
}
