#pragma once
/// \file
/// fusex::random_generator: a (seed, offset) stream whose offset lives in device memory, so that a
/// step captured into a CUDA graph draws new numbers on every replay without being captured again
/// (as PyTorch's graph-safe generator does). Each draw of a step takes a key: the seed, the
/// generator's device offset (read when the kernel runs) and the draws before it in the step;
/// `advance` ends the step by adding the step's draws to the device offset with a one-element
/// fusex kernel on the stream, which a capture records like any launch. So replay r of a captured
/// step draws exactly what the r-th eager run of the step would:
///
///   fusex::random_generator gen(seed);
///   {
///     fusex::graph_capture cap(s);
///     fusex::eval(y, fusex::dropout(x, 0.1, gen.draw(x.numel())), s);
///     gen.advance(s);
///     step = cap.finish();
///   }
///   step.launch(s);  // new masks on each replay

#include <fusex/config.hpp>
#include <fusex/error.hpp>
#include <fusex/eval.hpp>
#include <fusex/expr/random.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace fusex {

/// A random stream with its offset on the device (see the file comment). Not copyable (one offset,
/// one owner); movable. Its device memory (8 bytes) is allocated at construction and freed at
/// destruction (cudaFree: a device synchronisation), on the device current at construction.
class random_generator {
 public:
  /// The stream `seed`, starting at `offset`.
  explicit random_generator(std::uint64_t seed, std::uint64_t offset = 0) : seed_(seed) {
    FUSEX_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&base_), sizeof(std::int64_t)));
    const std::int64_t start = static_cast<std::int64_t>(offset);
    try {
      FUSEX_CUDA_CHECK(cudaMemcpy(base_, &start, sizeof(start), cudaMemcpyHostToDevice));
    } catch (...) {
      cudaFree(base_);
      throw;
    }
  }
  random_generator(const random_generator&) = delete;
  random_generator& operator=(const random_generator&) = delete;
  random_generator(random_generator&& o) noexcept
      : seed_(o.seed_), base_(std::exchange(o.base_, nullptr)), step_(std::exchange(o.step_, 0)) {}
  random_generator& operator=(random_generator&& o) noexcept {
    if (this != &o) {
      if (base_ != nullptr) cudaFree(base_);
      seed_ = o.seed_;
      base_ = std::exchange(o.base_, nullptr);
      step_ = std::exchange(o.step_, 0);
    }
    return *this;
  }
  ~random_generator() {
    if (base_ != nullptr) cudaFree(base_);
  }

  /// The key for a draw of `n` values in the current step (pass it to uniform, normal,
  /// bernoulli, random_bits or dropout over n elements): offset = the device offset at run time +
  /// the step's earlier draws. Throws fusex::invalid_argument for a negative n or a moved-from
  /// generator.
  random_key draw(std::int64_t n) {
    check_live("draw");
    if (n < 0) throw invalid_argument("fusex::random_generator::draw: n = " + std::to_string(n) + " is negative");
    const random_key k{seed_, step_, base_};
    step_ += static_cast<std::uint64_t>(n);
    return k;
  }

  /// Ends the step: enqueues on `stream` the addition of the step's draws to the device offset (one
  /// kernel of one element, recorded by a capture, so each replay advances it), and starts the
  /// next step's count at 0. A step without draws enqueues nothing. Needs nvcc, as fusex::eval
  /// does. (A template only so that a translation unit that never calls it does not compile its
  /// kernel: as an ordinary inline function it instantiated that kernel in every TU including
  /// fusex.hpp.)
  template <class Stream, std::enable_if_t<std::is_convertible_v<Stream, cudaStream_t>, int> = 0>
  void advance(Stream stream) {
    check_live("advance");
    if (step_ == 0) return;
    const auto b = make_view(base_, shape_t{1});
    eval(b, b + static_cast<std::int64_t>(step_), static_cast<cudaStream_t>(stream));
    step_ = 0;
  }

  /// The draws of the current step so far.
  std::uint64_t step_draws() const noexcept { return step_; }
  std::uint64_t seed() const noexcept { return seed_; }
  /// The device offset once `stream`'s work so far has run (synchronises the stream).
  std::uint64_t offset(cudaStream_t stream) const {
    check_live("offset");
    std::int64_t v = 0;
    FUSEX_CUDA_CHECK(cudaMemcpyAsync(&v, base_, sizeof(v), cudaMemcpyDeviceToHost, stream));
    FUSEX_CUDA_CHECK(cudaStreamSynchronize(stream));
    return static_cast<std::uint64_t>(v);
  }

 private:
  void check_live(const char* what) const {
    if (base_ == nullptr) {
      throw invalid_argument(std::string("fusex::random_generator::") + what + ": the generator was moved from");
    }
  }

  std::uint64_t seed_;
  std::int64_t* base_ = nullptr;
  std::uint64_t step_ = 0;
};

}  // namespace fusex
