// graph_cache_buckets: serving requests of any batch size with a few captured CUDA graphs.
//
// A small "model" (three fused elementwise layers over [batch, features]) answers a stream of
// requests whose batch sizes vary from 1 to 64. Capturing a graph per batch size would mean 64
// captures; instead each batch is padded up to a bucket (1, 2, 4, ..., 64), as serving systems do,
// and fusex::graph_cache keeps one graph per bucket:
//   - each bucket has static input and output buffers: a replay reads the captured addresses, so
//     the request is copied in (fusex::copy_input_padded pads with zeros) and the answer copied out;
//   - cache.run(key, stream, work) captures the bucket's forward pass on its first request and
//     replays it afterwards;
//   - every answer is checked against a host computation, and the cache's statistics are printed.
//
// usage: graph_cache_buckets [--requests N] [--capacity N] [--require-device]
#include <fusex/fusex.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t features = 784;
constexpr int layers = 3;

// The model's parameters: per layer, a scale and a shift per feature.
struct model {
  std::vector<std::vector<float>> hw, hb;
  std::vector<fusex::tensor<float>> w, b;

  model(cudaStream_t s, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dw(0.5f, 1.5f), db(-0.5f, 0.5f);
    for (int l = 0; l < layers; ++l) {
      hw.emplace_back(features);
      hb.emplace_back(features);
      for (auto& v : hw.back()) v = dw(rng);
      for (auto& v : hb.back()) v = db(rng);
      w.emplace_back(fusex::shape_t{features}, s);
      b.emplace_back(fusex::shape_t{features}, s);
      fusex::copy_input(w.back(), hw.back(), s);
      fusex::copy_input(b.back(), hb.back(), s);
    }
  }

  // One forward pass of `rows` rows from `in` to `out`, through `tmp`: three kernels.
  void forward(fusex::view<const float> in, fusex::view<float> tmp, fusex::view<float> out, cudaStream_t s) const {
    const auto w0 = w[0].view(), w1 = w[1].view(), w2 = w[2].view();
    const auto b0 = b[0].view(), b1 = b[1].view(), b2 = b[2].view();
    fusex::eval(out, fusex::relu(in * w0 + b0), s);
    fusex::eval(tmp, fusex::tanh(out * w1 + b1), s);
    fusex::eval(out, tmp * w2 + b2, s);
  }

  // The same on the host, for checking.
  float reference(float x, std::int64_t f) const {
    const auto i = static_cast<std::size_t>(f);
    float v = x * hw[0][i] + hb[0][i];
    v = v > 0 ? v : 0;
    v = std::tanh(v * hw[1][i] + hb[1][i]);
    return v * hw[2][i] + hb[2][i];
  }
};

// The static buffers a bucket's graph reads and writes.
struct bucket_buffers {
  fusex::tensor<float> in, tmp, out;
  bucket_buffers(std::int64_t rows, cudaStream_t s)
      : in({rows, features}, s), tmp({rows, features}, s), out({rows, features}, s) {}
};

// The stream everything below runs on. Declared first in run(), so destroyed last: the model's and
// the buckets' tensors are freed on it and the cache's graphs return their graph-private pools
// ordered after it, all in their destructors. Destroying the stream before them (as this example
// once did, with cudaStreamDestroy before `return`) hands a dead handle to the arena: the frees and
// the pools' release record events on it, and the process crashed at exit.
class owned_stream {
 public:
  owned_stream() { FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  owned_stream(const owned_stream&) = delete;
  owned_stream& operator=(const owned_stream&) = delete;
  ~owned_stream() {
    // Everything that used the stream is gone; the arena must not touch the handle again.
    try {
      fusex::default_arena().forget_stream(s_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "graph_cache_buckets: %s\n", e.what());
    }
    const cudaError_t e1 = cudaStreamSynchronize(s_);
    const cudaError_t e2 = cudaStreamDestroy(s_);
    if (e1 != cudaSuccess || e2 != cudaSuccess)
      std::fprintf(stderr, "graph_cache_buckets: stream teardown failed: %s\n",
                   cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
  }
  cudaStream_t get() const noexcept { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

int run(int requests, std::size_t capacity) {
  const owned_stream stream;  // outlives the model, the buffers and the cache (declared first)
  const cudaStream_t s = stream.get();
  const model m(s, 1234);
  const fusex::batch_buckets buckets = fusex::batch_buckets::powers_of_two(1, 64);

  fusex::graph_cache_options options;
  options.capacity = capacity;             // fewer graphs than buckets: the least recently used is evicted
  options.warmup_runs = 1;                 // one eager run before each capture
  options.capture.pool.reserve_bytes = 0;  // the forward pass allocates nothing while captured
  fusex::graph_cache cache(options);
  std::map<std::int64_t, std::unique_ptr<bucket_buffers>> static_buffers;

  std::mt19937 rng(42);
  std::uniform_int_distribution<int> batch_size(1, 64);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  double max_error = 0;
  std::int64_t padded_rows = 0, real_rows = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < requests; ++r) {
    // A request: `n` rows of input.
    const std::int64_t n = batch_size(rng);
    std::vector<float> request(static_cast<std::size_t>(n * features));
    for (auto& v : request) v = value(rng);

    // Pad it up to its bucket; the bucket's graph reads the bucket's static input buffer.
    const std::int64_t bucket = buckets.bucket_for(n);
    auto& bb = static_buffers[bucket];
    if (!bb) bb = std::make_unique<bucket_buffers>(bucket, s);
    fusex::copy_input_padded(bb->in, fusex::make_view(static_cast<const float*>(request.data()), {n, features}), s);
    bucket_buffers* buf = bb.get();
    cache.run(fusex::graph_key{bucket}, s,
              [&m, buf](cudaStream_t st) { m.forward(buf->in, buf->tmp.view(), buf->out.view(), st); });

    // The answer: the first n rows of the bucket's output.
    std::vector<float> answer(request.size());
    FUSEX_CUDA_CHECK(
        cudaMemcpyAsync(answer.data(), bb->out.data(), answer.size() * sizeof(float), cudaMemcpyDeviceToHost, s));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(s));
    for (std::size_t i = 0; i < answer.size(); ++i) {
      const double e = m.reference(request[i], static_cast<std::int64_t>(i) % features);
      max_error = std::fmax(max_error, std::fabs(answer[i] - e) / std::fmax(1.0, std::fabs(e)));
    }
    padded_rows += bucket;
    real_rows += n;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const fusex::graph_cache_stats st = cache.stats();
  std::printf("graph_cache_buckets: %d requests of 1 to 64 rows x %lld features, buckets", requests,
              static_cast<long long>(features));
  for (auto b : buckets.sizes()) std::printf(" %lld", static_cast<long long>(b));
  std::printf(
      "\n  graphs: %llu captured, %llu hits, %llu misses, %llu evicted; %zu held (capacity %zu), %zu bytes "
      "of graph memory\n",
      static_cast<unsigned long long>(st.captures), static_cast<unsigned long long>(st.hits),
      static_cast<unsigned long long>(st.misses), static_cast<unsigned long long>(st.evictions), st.entries,
      st.capacity, st.memory_bytes);
  std::printf("  padding: %.1f%% of the rows computed were padding\n",
              100.0 * static_cast<double>(padded_rows - real_rows) / static_cast<double>(padded_rows));
  std::printf("  %.1f us per request (copy in, replay, copy out, check); max relative error %.2e\n",
              secs * 1e6 / requests, max_error);
  if (max_error > 1e-5) {
    std::fprintf(stderr, "graph_cache_buckets: answers differ from the host reference\n");
    return 1;
  }
  if (st.captures + st.hits != static_cast<std::uint64_t>(requests) || st.hits == 0) {
    std::fprintf(stderr, "graph_cache_buckets: unexpected cache statistics\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
  int requests = 500;
  long capacity = 8;
  bool require_device = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--require-device") {
      require_device = true;
    } else if (a == "--requests" && i + 1 < argc) {
      requests = std::atoi(argv[++i]);
    } else if (a == "--capacity" && i + 1 < argc) {
      capacity = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: graph_cache_buckets [--requests N] [--capacity N] [--require-device]\n");
      return 2;
    }
  }
  if (requests <= 0 || capacity <= 0) {
    std::fprintf(stderr, "graph_cache_buckets: --requests and --capacity must be positive\n");
    return 2;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("graph_cache_buckets: no usable CUDA device\n");
    return require_device ? 77 : 0;
  }
  try {
    return run(requests, static_cast<std::size_t>(capacity));
  } catch (const fusex::error& e) {
    std::fprintf(stderr, "graph_cache_buckets: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "graph_cache_buckets: %s\n", e.what());
    return 1;
  }
}
