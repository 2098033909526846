#pragma once
// Helpers for GPU tests: RAII device arrays, random non-zero inputs, poisoned outputs, and
// comparison against double-precision references.
#include <cuda_runtime.h>
#include <fusex/core/dtype.hpp>
#include <fusex/error.hpp>
#include <fusex/graph/graph_capture.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace fusex_test {

/// A bool stored in one byte that std::vector does not bit-pack.
struct boolean {
  bool v = false;
  boolean() = default;
  boolean(bool b) : v(b) {}            // NOLINT: converts like bool
  operator bool() const { return v; }  // NOLINT
};
/// Host storage for device data of type T (bool as `boolean`).
template <class T>
struct host_type {
  using type = T;
};
template <>
struct host_type<bool> {
  using type = boolean;
};
template <class T>
using host_t = typename host_type<T>::type;
template <class T>
using host_vector = std::vector<host_t<T>>;

/// cudaMalloc'd storage, freed on destruction.
template <class T>
class device_array {
 public:
  explicit device_array(std::size_t n) : n_(n) {
    if (n) FUSEX_CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T)));
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  ~device_array() {
    if (p_) cudaFree(p_);
  }
  T* data() const { return p_; }
  std::size_t size() const { return n_; }
  // cudaMemcpy from pageable memory and cudaMemset may return before the device has finished, on
  // the legacy default stream, which the tests' non-blocking streams do not wait for: both are
  // followed by a synchronisation so that later work on any stream sees the new contents.
  void upload(const host_vector<T>& h) {
    FUSEX_CUDA_CHECK(cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
  host_vector<T> download() const {
    host_vector<T> h(n_);
    if (n_) FUSEX_CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  /// Fills with 0xFF bytes: NaN for floating types, -1 / max for integers.
  void poison() {
    if (n_) FUSEX_CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(T)));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }

 private:
  T* p_ = nullptr;
  std::size_t n_;
};

template <class T>
double to_double(T x) {
  return fusex::convert<double>(x);
}
inline double to_double(boolean b) { return b.v ? 1.0 : 0.0; }

/// Random values of T in [lo, hi], never zero, rounded to T.
template <class T>
host_vector<T> random_values(std::size_t n, double lo, double hi, unsigned seed) {
  std::mt19937_64 rng(seed);
  host_vector<T> v(n);
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution d(0.5);
    for (auto& x : v) x = d(rng);
  } else if constexpr (fusex::is_integer_v<T>) {
    std::uniform_int_distribution<long long> d(static_cast<long long>(lo), static_cast<long long>(hi));
    for (auto& x : v) {
      long long r = 0;
      while (r == 0) r = d(rng);
      x = static_cast<T>(r);
    }
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (auto& x : v) {
      double r = 0;
      while (r == 0 || fusex::convert<double>(fusex::convert<T>(r)) == 0) r = d(rng);
      x = fusex::convert<T>(r);
    }
  }
  return v;
}

/// Relative tolerance for results stored as T.
template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  else if constexpr (std::is_same_v<T, float>) return 4e-6;
  else if constexpr (std::is_same_v<T, fusex::half>) return 2e-3;
  else if constexpr (std::is_same_v<T, fusex::bfloat16>) return 1.6e-2;
  else return 0;
}

/// Compares `got` with `ref` elementwise: |got - ref| <= tol * max(1, |ref|), NaN only where the
/// reference is NaN. Returns a description of the first mismatch, or "" when all match. Below
/// |ref| = 1 the tolerance is absolute (tol): results that may be far below 1 (probabilities, values
/// near zero after cancellation) need compare_rel or compare_within below.
template <class T>
std::string compare(const std::vector<T>& got, const std::vector<double>& ref, double tol) {
  if (got.size() != ref.size()) return "size mismatch";
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = to_double(got[i]), r = ref[i];
    bool ok;
    if (std::isnan(r)) ok = std::isnan(g);
    else if (std::isinf(r)) ok = g == r;
    else ok = !std::isnan(g) && std::fabs(g - r) <= tol * std::fmax(1.0, std::fabs(r));
    if (!ok) return "element " + std::to_string(i) + ": got " + std::to_string(g) + ", expected " + std::to_string(r);
  }
  return "";
}

/// Machine epsilon of a floating type: the spacing of T at 1 (2^-23 float, 2^-52 double, 2^-10
/// half, 2^-7 bfloat16). Rounding a value in T's normal range moves it by at most eps/2 relative.
template <class T>
constexpr double epsilon_of() {
  if constexpr (std::is_same_v<T, double>) return 0x1p-52;
  else if constexpr (std::is_same_v<T, float>) return 0x1p-23;
  else if constexpr (std::is_same_v<T, fusex::half>) return 0x1p-10;
  else if constexpr (std::is_same_v<T, fusex::bfloat16>) return 0x1p-7;
  else return 0;
}
/// The smallest subnormal of a floating type: the spacing of T below its smallest normal, where
/// rounding moves a value by at most half of it (an absolute, not a relative, error).
template <class T>
constexpr double denorm_min_of() {
  if constexpr (std::is_same_v<T, double>) return 0x1p-1074;
  else if constexpr (std::is_same_v<T, float>) return 0x1p-149;
  else if constexpr (std::is_same_v<T, fusex::half>) return 0x1p-24;
  else if constexpr (std::is_same_v<T, fusex::bfloat16>) return 0x1p-133;
  else return 0;
}

/// Outcome of an elementwise comparison against a tolerance.
struct comparison {
  std::size_t mismatches = 0;  ///< elements outside the tolerance
  std::string first;           ///< the first mismatches described ("" when none)
  /// The largest |got - ref| / tolerance over the elements (<= 1 where all pass; infinite where a
  /// NaN or infinity does not match), and where it is.
  double worst_ratio = 0;
  std::size_t worst = 0;
  bool ok() const { return mismatches == 0; }
};

/// Compares `got` with `ref` elementwise: |got - ref| <= rel * |ref| + abs_floor + (abs ? (*abs)[i]
/// : 0), NaN only where the reference is NaN, infinities only where it has the same one. Unlike
/// compare(), the relative part has no max(1, |ref|): a reference below 1 gets a tolerance below
/// `rel`, so outputs such as probabilities are checked to their own precision. `abs` (per element,
/// when given) carries error bounds that scale with something other than the result (an
/// accumulation over a row, a cancellation in an epilogue).
template <class T>
comparison compare_within(const std::vector<T>& got, const std::vector<double>& ref, double rel, double abs_floor,
                          const std::vector<double>* abs = nullptr) {
  comparison c;
  if (got.size() != ref.size() || (abs != nullptr && abs->size() != ref.size())) {
    c.mismatches = 1;
    c.first = "size mismatch";
    c.worst_ratio = INFINITY;
    return c;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = to_double(got[i]), r = ref[i];
    const double tol = rel * std::fabs(r) + abs_floor + (abs != nullptr ? (*abs)[i] : 0.0);
    double ratio;
    if (std::isnan(r)) ratio = std::isnan(g) ? 0 : INFINITY;
    else if (std::isinf(r)) ratio = g == r ? 0 : INFINITY;
    else if (!std::isfinite(g)) ratio = INFINITY;
    else ratio = std::fabs(g - r) / tol;  // tol > 0 unless rel * |r| and the floors are all 0
    if (std::isnan(ratio)) ratio = 0;     // 0 / 0: an exact match where no error is allowed
    if (ratio > c.worst_ratio) c.worst_ratio = ratio, c.worst = i;
    if (ratio > 1) {
      if (c.mismatches < 4)
        c.first += "element " + std::to_string(i) + ": got " + std::to_string(g) + ", expected " + std::to_string(r) +
                   " (tolerance " + std::to_string(tol) + ")\n";
      ++c.mismatches;
    }
  }
  return c;
}

/// Relative comparison with a tiny absolute floor: |got - ref| <= rel * |ref| + abs_floor (by
/// default T's smallest subnormal, the most a correctly rounded result below T's normal range can
/// be off by, twice over). Returns a description of the first mismatches, or "" when all match.
template <class T>
std::string compare_rel(const std::vector<T>& got, const std::vector<double>& ref, double rel,
                        double abs_floor = denorm_min_of<T>()) {
  const comparison c = compare_within(got, ref, rel, abs_floor);
  return c.ok() ? std::string() : std::to_string(c.mismatches) + " mismatch(es), first:\n" + c.first;
}

/// A non-blocking stream for one test, destroyed at scope end.
struct stream_guard {
  cudaStream_t s{};
  stream_guard() { FUSEX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~stream_guard() { cudaStreamDestroy(s); }
  stream_guard(const stream_guard&) = delete;
  stream_guard& operator=(const stream_guard&) = delete;
};

/// How a GPU test submits the work it checks. CTest runs each GPU program that uses fusex_test::run
/// twice: once as is (eager) and once with FUSEX_TEST_LAUNCH=graph, so that every case is also
/// captured into a CUDA graph and replayed. A run-time switch, not a second instantiation of the
/// tests: the test build does not grow.
enum class launch_path { eager, graph };

/// The launch path of this run: FUSEX_TEST_LAUNCH=graph selects graph, anything else eager.
inline launch_path current_launch_path() {
  static const launch_path p = [] {
    const char* v = std::getenv("FUSEX_TEST_LAUNCH");
    return v != nullptr && std::strcmp(v, "graph") == 0 ? launch_path::graph : launch_path::eager;
  }();
  return p;
}

inline const char* launch_path_name() { return current_launch_path() == launch_path::graph ? "graph" : "eager"; }

/// Submits `work(stream)` through the run's launch path and waits for it: eagerly, or captured by
/// fusex::graph_capture into a graph, instantiated and replayed once. Errors thrown by `work` reach
/// the caller in both paths (the guard discards the capture and leaves the stream usable).
template <class Work>
void run(cudaStream_t stream, Work&& work) {
  if (current_launch_path() == launch_path::graph) {
    fusex::graph_exec g = [&] {
      fusex::graph_capture cap(stream);
      work(stream);
      return cap.finish();
    }();
    g.launch(stream);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
  } else {
    work(stream);
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
}

/// Number of kernel nodes in a captured graph (the one-kernel guarantee is checked with it).
inline std::size_t count_kernel_nodes(cudaGraph_t g) {
  std::size_t n = 0;
  FUSEX_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  FUSEX_CUDA_CHECK(cudaGraphGetNodes(g, nodes.data(), &n));
  std::size_t kernels = 0;
  for (auto node : nodes) {
    cudaGraphNodeType t;
    FUSEX_CUDA_CHECK(cudaGraphNodeGetType(node, &t));
    if (t == cudaGraphNodeTypeKernel) ++kernels;
  }
  return kernels;
}

/// Rounds a double reference to T and back (for comparing against outputs stored as T).
template <class T>
double round_to(double x) {
  return fusex::convert<double>(fusex::convert<T>(x));
}

#if defined(__CUDACC__)
/// Fills p[0, n) with i % 251 + 1 (never 0) on the device, for the tests past 2^31 elements: each
/// byte's value tells its index modulo 251. (A template, so that several translation units may
/// include it.)
template <class = void>
__global__ void fill_pattern(std::uint8_t* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<std::uint8_t>(i % 251 + 1);
}
#endif

}  // namespace fusex_test
