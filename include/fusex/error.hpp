#pragma once
/// \file
/// The exception hierarchy: every error fusex raises derives from fusex::error.

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace fusex {

/// Base of every exception fusex throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A CUDA runtime call failed. Carries the call's text, the source location and the error code.
class cuda_error : public error {
 public:
  cuda_error(cudaError_t code, const char* call, const char* file, int line)
      : error(make_message(code, call, file, line)), code_(code), call_(call), file_(file), line_(line) {}

  /// The CUDA error code returned by the failing call.
  cudaError_t code() const noexcept { return code_; }
  /// The text of the failing call, as written in the source.
  const char* call() const noexcept { return call_; }
  /// Source file of the failing call.
  const char* file() const noexcept { return file_; }
  /// Source line of the failing call.
  int line() const noexcept { return line_; }

 private:
  static std::string make_message(cudaError_t code, const char* call, const char* file, int line) {
    std::string m = "fusex: CUDA call '";
    m += call;
    m += "' failed with ";
    m += cudaGetErrorName(code);
    m += " (";
    m += cudaGetErrorString(code);
    m += ")";
    // CUDA's text for these reads as "upgrade your driver" on a machine that has no GPU at all.
    if (code == cudaErrorInsufficientDriver || code == cudaErrorNoDevice) {
      m += ": no NVIDIA GPU or driver was found (or the driver is older than this CUDA runtime)";
    }
    m += " at ";
    m += file;
    m += ':';
    m += std::to_string(line);
    return m;
  }

  cudaError_t code_;
  const char* call_;
  const char* file_;
  int line_;
};

/// Shapes that do not broadcast, a destination of the wrong shape, a bad axis: the message names
/// the shapes involved.
class shape_error : public error {
 public:
  using error::error;
};

/// An argument that is invalid for a reason other than its shape: a null pointer with non-zero
/// size, overlapping destination and input, an unsupported layout.
class invalid_argument : public error {
 public:
  using error::error;
};

namespace detail {
inline void cuda_check(cudaError_t code, const char* call, const char* file, int line) {
  if (code != cudaSuccess) {
    // Clear the non-sticky error so that later, unrelated checks do not report it again.
    (void)cudaGetLastError();
    throw cuda_error(code, call, file, line);
  }
}
}  // namespace detail
}  // namespace fusex

/// Checks the cudaError_t returned by `call`; throws fusex::cuda_error naming the call, file and
/// line on failure.
#define FUSEX_CUDA_CHECK(call) ::fusex::detail::cuda_check((call), #call, __FILE__, __LINE__)

namespace fusex::detail {
/// The calling thread's current device (checked). Here, in a header every layer may include, so
/// that it is written once.
inline int current_device() {
  int d = 0;
  FUSEX_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}
}  // namespace fusex::detail

// ------------------------------------------------------------------------------------------------
// Memory exhaustion.
#include <cstddef>

namespace fusex {

/// A memory resource could not satisfy a request: the device (or a pool's reserve) is out of
/// memory. Derives from fusex::error alone (so `catch (const fusex::error&)`, `catch (const
/// std::runtime_error&)` and `catch (const std::exception&)` all see it). It deliberately does not
/// also derive from std::bad_alloc: that made std::exception an ambiguous base, and the usual
/// `catch (const std::exception&)` then let it through. The message names the request, the resource's
/// state and the upstream error; the resource that threw stays usable and keeps every live
/// allocation.
class bad_alloc : public error {
 public:
  bad_alloc(const std::string& message, std::size_t requested_bytes, cudaError_t upstream_error)
      : error(message), requested_(requested_bytes), upstream_(upstream_error) {}

  const char* what() const noexcept override { return error::what(); }
  /// The number of bytes that was asked for.
  std::size_t requested_bytes() const noexcept { return requested_; }
  /// The error reported by the upstream allocator (cudaErrorMemoryAllocation when a limit of the
  /// resource itself, not CUDA, refused the request).
  cudaError_t upstream_error() const noexcept { return upstream_; }

 private:
  std::size_t requested_;
  cudaError_t upstream_;
};

}  // namespace fusex
