#pragma once
/// \file
/// fusex::tensor<T>: an owning, contiguous device tensor whose memory comes from a stream-ordered
/// memory resource (the default resource unless one is given).

#include <fusex/core/shape.hpp>
#include <fusex/core/view.hpp>
#include <fusex/memory/buffer.hpp>
#include <fusex/memory/resource.hpp>

#include <cuda_runtime_api.h>

namespace fusex {

/// An owning row-major device tensor. Its memory is allocated on a stream from a resource and freed
/// on that stream when the tensor is destroyed. Move-only; use view() for non-owning access.
template <class T>
class tensor {
  static_assert(is_dtype_v<T>, "fusex::tensor<T>: T must be a supported element type");

 public:
  using value_type = T;

  tensor() = default;
  /// An uninitialised tensor of `shape`, allocated ordered on `stream` from `resource`.
  tensor(shape_t shape, cudaStream_t stream, device_resource_ref resource = get_default_resource())
      : buf_(static_cast<std::size_t>(checked_numel(shape)), stream, resource), shape_(shape) {}

  T* data() const noexcept { return buf_.data(); }
  const shape_t& shape() const noexcept { return shape_; }
  int rank() const noexcept { return shape_.rank(); }
  std::int64_t size() const noexcept { return numel(shape_); }
  cudaStream_t stream() const noexcept { return buf_.stream(); }

  /// A mutable view of the whole tensor.
  fusex::view<T> view() const { return fusex::view<T>(buf_.data(), shape_); }
  operator fusex::view<T>() const { return view(); }        // NOLINT: views convert implicitly
  operator fusex::view<const T>() const { return view(); }  // NOLINT

  /// Evaluates `expr` into this tensor on `stream` (asynchronous). Defined in <fusex/eval.hpp>.
  template <class E>
  void assign(const E& expr, cudaStream_t stream);

  /// The underlying buffer (to free early with reset(), or change the freeing stream).
  buffer<T>& storage() noexcept { return buf_; }

 private:
  static std::int64_t checked_numel(const shape_t& s) {
    for (std::int64_t e : s)
      if (e < 0) throw shape_error("fusex: tensor of shape " + s.str() + " has a negative extent");
    return numel(s);
  }

  buffer<T> buf_;
  shape_t shape_{0};
};

}  // namespace fusex
