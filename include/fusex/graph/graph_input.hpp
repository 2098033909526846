#pragma once
/// \file
/// The input contract of captured graphs (as torch.cuda.graph's): a replay reads and writes
/// exactly the addresses that were captured. New inputs are therefore copied into the captured
/// input buffers before the replay, and results are read from the captured output buffers after
/// it. fusex::copy_input makes the copy and checks that sizes match (a mismatch would silently
/// read stale or out-of-range data in the replay); fusex::copy_input_padded pads a smaller batch
/// up to the captured one (bucketing).

#include <fusex/core/shape.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace fusex {

namespace detail {
template <class T>
view<T> input_view(const view<T>& v) {
  return v;
}
template <class T>
view<T> input_view(const tensor<T>& t) {
  return t.view();
}

template <class T>
void require_contiguous(const view<T>& v, const char* what, const char* which) {
  if (!v.is_contiguous()) {
    throw invalid_argument(std::string("fusex: ") + what + ": the " + which + " (shape " + v.shape().str() +
                           ") is not contiguous; copy it with fusex::eval(dst, src, stream) instead");
  }
}
}  // namespace detail

/// Copies `src` into the captured buffer `dst` (views or tensors of one element type and the
/// same shape, both contiguous), ordered on `stream`. Throws fusex::shape_error when the shapes
/// differ (capture a graph for the new shape, or pad with copy_input_padded) and
/// fusex::invalid_argument for a non-contiguous operand. Either may live in host or device memory
/// (pageable host memory is copied before the call returns).
template <class D, class S>
void copy_input(const D& dst, const S& src, cudaStream_t stream) {
  const auto d = detail::input_view(dst);
  const auto s = detail::input_view(src);
  using TD = typename decltype(d)::element_type;
  using TS = typename decltype(s)::element_type;
  static_assert(!std::is_const_v<TD>, "fusex::copy_input: the destination must be writable");
  static_assert(std::is_same_v<TD, std::remove_const_t<TS>>,
                "fusex::copy_input: the source and the captured buffer must have one element type");
  if (d.shape() != s.shape()) {
    throw shape_error("fusex: copy_input: the captured buffer has shape " + d.shape().str() +
                      " but the new input has shape " + s.shape().str() +
                      ": a replay reads exactly the captured buffer; capture a graph for this shape (graph_cache) or "
                      "pad the input up to the captured shape (copy_input_padded)");
  }
  detail::require_contiguous(d, "copy_input", "captured buffer");
  detail::require_contiguous(s, "copy_input", "new input");
  const std::size_t bytes = static_cast<std::size_t>(d.size()) * sizeof(TD);
  if (bytes != 0) FUSEX_CUDA_CHECK(cudaMemcpyAsync(d.data(), s.data(), bytes, cudaMemcpyDefault, stream));
}

/// Copies `count` elements at `src` (host or device memory) into the captured buffer `dst`, which
/// must hold exactly `count` elements (fusex::invalid_argument otherwise).
template <class D, class T>
void copy_input(const D& dst, const T* src, std::size_t count, cudaStream_t stream) {
  const auto d = detail::input_view(dst);
  using TD = typename decltype(d)::element_type;
  static_assert(std::is_same_v<TD, std::remove_const_t<T>>,
                "fusex::copy_input: the source and the captured buffer must have one element type");
  if (static_cast<std::int64_t>(count) != d.size()) {
    throw invalid_argument("fusex: copy_input: the captured buffer (shape " + d.shape().str() + ") holds " +
                           std::to_string(d.size()) + " elements but " + std::to_string(count) +
                           " were given: a replay reads exactly the captured buffer");
  }
  if (count != 0 && src == nullptr) {
    throw invalid_argument("fusex: copy_input: null source for " + std::to_string(count) +
                           " elements into the captured buffer (shape " + d.shape().str() + ")");
  }
  detail::require_contiguous(d, "copy_input", "captured buffer");
  if (count != 0) FUSEX_CUDA_CHECK(cudaMemcpyAsync(d.data(), src, count * sizeof(TD), cudaMemcpyDefault, stream));
}

/// Copies a host vector into the captured buffer `dst` (sizes must match).
template <class D, class T, class A>
void copy_input(const D& dst, const std::vector<T, A>& src, cudaStream_t stream) {
  copy_input(dst, src.data(), src.size(), stream);
}

/// Copies `src` of shape [n, ...] into the first n rows of the captured buffer `dst` of shape
/// [N, ...] (n <= N, the other extents equal, both contiguous) and fills rows n..N with zero
/// bytes, ordered on `stream`: a batch padded up to the size a graph was captured for. Throws
/// fusex::shape_error when the shapes do not fit.
template <class D, class S>
void copy_input_padded(const D& dst, const S& src, cudaStream_t stream) {
  const auto d = detail::input_view(dst);
  const auto s = detail::input_view(src);
  using TD = typename decltype(d)::element_type;
  using TS = typename decltype(s)::element_type;
  static_assert(!std::is_const_v<TD>, "fusex::copy_input_padded: the destination must be writable");
  static_assert(std::is_same_v<TD, std::remove_const_t<TS>>,
                "fusex::copy_input_padded: the source and the captured buffer must have one element type");
  bool fits = d.rank() == s.rank() && d.rank() >= 1 && s.shape()[0] <= d.shape()[0];
  for (int i = 1; fits && i < d.rank(); ++i) fits = d.shape()[i] == s.shape()[i];
  if (!fits) {
    throw shape_error("fusex: copy_input_padded: an input of shape " + s.shape().str() +
                      " does not pad up to the captured buffer of shape " + d.shape().str() +
                      " (same rank, same extents after the first, first extent no larger)");
  }
  detail::require_contiguous(d, "copy_input_padded", "captured buffer");
  detail::require_contiguous(s, "copy_input_padded", "new input");
  const std::size_t bytes = static_cast<std::size_t>(s.size()) * sizeof(TD);
  const std::size_t total = static_cast<std::size_t>(d.size()) * sizeof(TD);
  if (bytes != 0) FUSEX_CUDA_CHECK(cudaMemcpyAsync(d.data(), s.data(), bytes, cudaMemcpyDefault, stream));
  if (total > bytes) {
    FUSEX_CUDA_CHECK(cudaMemsetAsync(reinterpret_cast<unsigned char*>(d.data()) + bytes, 0, total - bytes, stream));
  }
}

}  // namespace fusex
