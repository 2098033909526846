#pragma once
/// \file
/// fusex::launch_monitor: a scoped region that counts the kernels and graphs fusex launches in
/// it, the host time spent submitting them and the GPU time they take, and says whether the
/// region is launch-bound (the host took at least as long to submit the work as the GPU took to
/// run it): the check otherwise made by hand with a profiler.
///
///     {
///       fusex::launch_monitor mon(stream);
///       for (int i = 0; i < 100; ++i) fusex::eval(y, fusex::relu(x + b), stream);
///       fusex::launch_report r = mon.report();   // waits for the region's work to finish
///       std::printf("%s\n", r.str().c_str());     // 100 kernels, host 380 us, GPU 150 us, launch-bound
///     }
///
/// Cost: when no region is active, each fusex launch pays one thread-local load and a branch.
/// In a region, each launch adds one increment; the region itself costs two clock reads, and
/// with GPU timing two cudaEventRecord calls (events come from a per-thread pool, so regions do
/// not create events). bench/monitor/bench_monitor.cu measures both.

#include <fusex/device/launch_hook.hpp>
#include <fusex/error.hpp>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace fusex {

/// launch_report::launch_bound() holds when host time >= this fraction of the GPU time.
inline constexpr double launch_bound_margin = 0.9;

/// What a launch_monitor region measured.
struct launch_report {
  /// Kernels fusex launched from the region's thread while the region was active (nested
  /// regions' launches included). Kernels recorded into a graph during a capture count here,
  /// when captured; replays of a graph count as graph_launches.
  std::uint64_t kernel_launches = 0;
  /// Graphs launched with fusex::graph_exec::launch (each may hold many kernels).
  std::uint64_t graph_launches = 0;
  /// Host wall time from the region's start to its stop, in microseconds: the time the host
  /// spent submitting the region's work (planning, allocation and launch calls included).
  double host_us = 0.0;
  /// GPU time of the region's work on its stream (events recorded at start and stop), in
  /// microseconds; negative when the region was not timed on the GPU (no stream given, or the
  /// stream was being captured into a graph).
  double gpu_us = -1.0;

  /// True when the region's GPU time was measured.
  bool gpu_timed() const noexcept { return gpu_us >= 0.0; }
  /// True when the host's submit time is at least the GPU time (within launch_bound_margin):
  /// the GPU waited for work, and fewer launches (fusion, graphs) would make the region faster.
  /// The GPU time is the span between the region's two events, which includes the time the GPU
  /// idled waiting for launches, so a region the host cannot feed fast enough shows a GPU time
  /// just above its host time (the last kernel's run and the launch latency); hence the margin.
  /// False when the GPU time is unknown.
  bool launch_bound() const noexcept { return gpu_timed() && host_us >= launch_bound_margin * gpu_us; }
  /// Kernel and graph launches together.
  std::uint64_t launches() const noexcept { return kernel_launches + graph_launches; }
  /// One line: counts, times and the verdict.
  std::string str() const {
    char buf[256];
    if (gpu_timed()) {
      std::snprintf(buf, sizeof buf, "%llu kernel launch(es), %llu graph launch(es), host %.1f us, GPU %.1f us: %s",
                    static_cast<unsigned long long>(kernel_launches), static_cast<unsigned long long>(graph_launches),
                    host_us, gpu_us, launch_bound() ? "launch-bound" : "GPU-bound");
    } else {
      std::snprintf(buf, sizeof buf, "%llu kernel launch(es), %llu graph launch(es), host %.1f us, GPU not timed",
                    static_cast<unsigned long long>(kernel_launches), static_cast<unsigned long long>(graph_launches),
                    host_us);
    }
    return buf;
  }
};

namespace detail {

/// The region logic, independent of how GPU time is measured (`Timer`: start(), stop(),
/// elapsed_us() (negative: not timed; may wait for the GPU), release()). Host-testable.
template <class Timer>
class basic_launch_monitor {
 public:
  explicit basic_launch_monitor(Timer timer = Timer()) : timer_(std::move(timer)), slot_(&active_tally) {
    tally_.parent = *slot_;
    *slot_ = &tally_;
    try {
      timer_.start();
    } catch (...) {
      *slot_ = tally_.parent;
      throw;
    }
    t0_ = std::chrono::steady_clock::now();
  }
  basic_launch_monitor(const basic_launch_monitor&) = delete;
  basic_launch_monitor& operator=(const basic_launch_monitor&) = delete;
  ~basic_launch_monitor() {
    try {
      stop();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fusex: launch_monitor: %s\n", e.what());
    }
    timer_.release();
  }

  /// Ends the region (no host synchronisation): later launches are not counted. Idempotent.
  /// Regions should stop in the reverse order of their starts (scopes do that); one stopped
  /// early while an inner one is active is unlinked, and the inner one's counts then go to the
  /// region around both.
  void stop() {
    if (!running_) return;
    host_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count();
    running_ = false;
    unlink();
    timer_.stop();
  }

  /// Stops the region if it is running and returns what it measured. With GPU timing this waits
  /// until the region's work on its stream has finished (the first call only).
  launch_report report() {
    stop();
    if (!reported_) {
      report_.gpu_us = timer_.elapsed_us();
      reported_ = true;
    }
    report_.kernel_launches = tally_.kernels;
    report_.graph_launches = tally_.graphs;
    report_.host_us = static_cast<double>(host_ns_) / 1000.0;
    return report_;
  }

  /// Kernel launches counted so far (nested regions' launches are added when they stop).
  std::uint64_t kernel_launches() const noexcept { return tally_.kernels; }
  /// Graph launches counted so far.
  std::uint64_t graph_launches() const noexcept { return tally_.graphs; }
  /// True until stop() (or report()).
  bool running() const noexcept { return running_; }

 private:
  void unlink() noexcept {
    launch_tally* parent = tally_.parent;
    if (*slot_ == &tally_) {
      *slot_ = parent;
    } else {
      // Stopped out of order: an inner region is still active. Link it to our parent.
      for (launch_tally* t = *slot_; t != nullptr; t = t->parent) {
        if (t->parent == &tally_) {
          t->parent = parent;
          break;
        }
      }
    }
    if (parent != nullptr) {
      parent->kernels += tally_.kernels;
      parent->graphs += tally_.graphs;
    }
  }

  Timer timer_;
  launch_tally tally_;
  launch_tally** slot_;
  std::chrono::steady_clock::time_point t0_;
  std::int64_t host_ns_ = 0;
  bool running_ = true;
  bool reported_ = false;
  launch_report report_;
};

/// A per-thread pool of timing events (creating an event costs more than the whole region
/// should). Events are returned when a region is destroyed; recording an event again while an
/// earlier record is pending is allowed by CUDA.
class event_pool {
 public:
  event_pool() = default;
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;
  ~event_pool() {
    for (const entry& e : free_) (void)cudaEventDestroy(e.event);
  }
  static event_pool& local() {
    static thread_local event_pool pool;
    return pool;
  }
  cudaEvent_t take(int device) {
    for (std::size_t i = free_.size(); i-- > 0;) {
      if (free_[i].device == device) {
        cudaEvent_t e = free_[i].event;
        free_[i] = free_.back();
        free_.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    FUSEX_CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }
  void give(int device, cudaEvent_t e) noexcept {
    if (e == nullptr) return;
    try {
      free_.push_back(entry{device, e});
    } catch (...) {
      (void)cudaEventDestroy(e);
    }
  }

 private:
  struct entry {
    int device;
    cudaEvent_t event;
  };
  std::vector<entry> free_;
};

/// GPU time of a region's work on one stream, from two events of the thread's pool. Not timed
/// (elapsed_us() < 0) when the stream is being captured into a graph at the region's start.
class cuda_event_timer {
 public:
  explicit cuda_event_timer(cudaStream_t stream) noexcept : stream_(stream) {}
  cuda_event_timer(cuda_event_timer&& o) noexcept
      : stream_(o.stream_),
        device_(o.device_),
        start_(std::exchange(o.start_, nullptr)),
        stop_(std::exchange(o.stop_, nullptr)),
        timed_(o.timed_) {}
  cuda_event_timer& operator=(cuda_event_timer&&) = delete;
  ~cuda_event_timer() { release(); }

  void start() {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    FUSEX_CUDA_CHECK(cudaStreamIsCapturing(stream_, &status));
    if (status != cudaStreamCaptureStatusNone) return;  // events in a capture time nothing
    device_ = detail::current_device();
    event_pool& pool = event_pool::local();
    start_ = pool.take(device_);
    stop_ = pool.take(device_);
    FUSEX_CUDA_CHECK(cudaEventRecord(start_, stream_));
    timed_ = true;
  }
  void stop() {
    if (timed_) FUSEX_CUDA_CHECK(cudaEventRecord(stop_, stream_));
  }
  double elapsed_us() {
    if (!timed_) return -1.0;
    FUSEX_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    FUSEX_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return static_cast<double>(ms) * 1000.0;
  }
  void release() noexcept {
    if (start_ == nullptr && stop_ == nullptr) return;
    event_pool& pool = event_pool::local();
    pool.give(device_, std::exchange(start_, nullptr));
    pool.give(device_, std::exchange(stop_, nullptr));
  }

 private:
  cudaStream_t stream_;
  int device_ = 0;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  bool timed_ = false;
};

}  // namespace detail

/// A scoped region that counts fusex's launches on the calling thread, measures the host time
/// spent submitting them and, given a stream, the GPU time of the region's work on it (see
/// fusex::launch_report). Not copyable or movable: start and stop it on one thread, in scope
/// order. Regions nest; an outer region's counts include its inner regions'.
class launch_monitor {
 public:
  /// Starts a region that also measures GPU time on `stream` (events recorded at start and
  /// stop). Throws fusex::cuda_error if CUDA refuses the event record.
  explicit launch_monitor(cudaStream_t stream) : impl_(timer(stream)) {}
  /// Starts a region that counts launches and host time only (makes no CUDA call).
  launch_monitor() : impl_(timer()) {}

  /// Ends the region without waiting for the GPU. Idempotent.
  void stop() { impl_.stop(); }
  /// Stops the region and returns what it measured; with GPU timing, waits for the region's
  /// work on its stream to finish (the first call only).
  launch_report report() { return impl_.report(); }
  /// Kernel launches counted so far.
  std::uint64_t kernel_launches() const noexcept { return impl_.kernel_launches(); }
  /// Graph launches counted so far.
  std::uint64_t graph_launches() const noexcept { return impl_.graph_launches(); }
  /// True until stop() or report().
  bool running() const noexcept { return impl_.running(); }

 private:
  // A timer that is either the CUDA event timer or nothing, without a virtual call.
  class timer {
   public:
    timer() noexcept : cuda_(nullptr) {}
    explicit timer(cudaStream_t s) noexcept : cuda_(s), enabled_(true) {}
    void start() {
      if (enabled_) cuda_.start();
    }
    void stop() {
      if (enabled_) cuda_.stop();
    }
    double elapsed_us() { return enabled_ ? cuda_.elapsed_us() : -1.0; }
    void release() noexcept { cuda_.release(); }

   private:
    detail::cuda_event_timer cuda_;
    bool enabled_ = false;
  };
  detail::basic_launch_monitor<timer> impl_;
};

}  // namespace fusex
