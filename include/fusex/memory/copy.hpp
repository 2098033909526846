#pragma once
/// \file
/// fusex::copy_async: stream-ordered copies between host and device tensors, views and buffers.

#include <fusex/core/shape.hpp>
#include <fusex/core/tensor.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>
#include <fusex/memory/buffer.hpp>
#include <fusex/memory/pinned.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace fusex {

namespace detail {
template <class T>
view<T> as_copy_view(const view<T>& v) {
  return v;
}
template <class T>
view<T> as_copy_view(const tensor<T>& t) {
  return t.view();
}
template <class T>
view<T> as_copy_view(const buffer<T>& b) {
  return view<T>(b.data(), shape_t{static_cast<std::int64_t>(b.size())});
}
template <class T>
view<T> as_copy_view(const pinned_buffer<T>& b) {
  return b.view();
}

// A view as `rows` rows of `width` contiguous elements, `pitch` elements apart, when its last
// `k` dimensions are dense and the others collapse into one uniform stride.
struct copy_layout {
  bool ok = false;
  std::int64_t rows = 0, width = 0, pitch = 0;
};

// Number of trailing dimensions over which the view is dense (row-major).
template <class T>
int dense_suffix(const view<T>& v) {
  std::int64_t expect = 1;
  int k = 0;
  for (int i = v.rank() - 1; i >= 0; --i) {
    if (v.shape()[i] != 1 && v.strides()[i] != expect) break;
    expect *= v.shape()[i];
    ++k;
  }
  return k;
}

template <class T>
copy_layout layout_2d(const view<T>& v, int k) {
  copy_layout l;
  l.width = 1;
  for (int i = v.rank() - k; i < v.rank(); ++i) l.width *= v.shape()[i];
  l.rows = 1;
  std::int64_t pitch = -1, next_stride = -1, next_extent = 1;
  // The outer dimensions, inner to outer, must form one arithmetic progression of rows.
  for (int i = v.rank() - k - 1; i >= 0; --i) {
    const std::int64_t e = v.shape()[i], s = v.strides()[i];
    if (e == 1) continue;
    if (pitch < 0) {
      pitch = s;
    } else if (s != next_stride * next_extent) {
      return l;
    }
    next_stride = s;
    next_extent = e;
    l.rows *= e;
  }
  l.pitch = pitch < 0 ? l.width : pitch;
  l.ok = true;
  return l;
}
}  // namespace detail

/// Copies `src` into `dst` (same shape, same element type), ordered on `stream`: host to device,
/// device to host, device to device or host to host, the direction found from the pointers
/// (unified addressing). Accepts fusex::view, tensor, buffer and pinned_buffer. Contiguous views
/// copy with one cudaMemcpyAsync; views whose rows are contiguous (a slice of rows, a padded
/// matrix) with one cudaMemcpy2DAsync; other layouts are rejected (make them contiguous first).
/// The copy is asynchronous with respect to the host only for pinned (or device) memory: from or to
/// pageable memory CUDA stages it and returns when the source may be reused. Never synchronises
/// the stream.
template <class Dst, class Src>
void copy_async(const Dst& dst, const Src& src, cudaStream_t stream) {
  const auto d = detail::as_copy_view(dst);
  const auto s = detail::as_copy_view(src);
  using DT = typename decltype(d)::element_type;
  using ST = typename decltype(s)::value_type;
  static_assert(!std::is_const_v<DT>, "fusex::copy_async: the destination must be writable");
  static_assert(std::is_same_v<DT, ST>, "fusex::copy_async: source and destination element types differ");
  using T = DT;
  if (d.shape() != s.shape()) {
    throw shape_error("fusex::copy_async: destination of shape " + d.shape().str() + " and source of shape " +
                      s.shape().str() + " differ");
  }
  const std::int64_t n = d.size();
  if (n == 0) return;
  // Overlap of the spans the two views touch.
  auto span_end = [](const auto& v) {
    std::int64_t last = 0;
    for (int i = 0; i < v.rank(); ++i) last += (v.shape()[i] - 1) * v.strides()[i];
    return reinterpret_cast<std::uintptr_t>(v.data() + last + 1);
  };
  const auto d0 = reinterpret_cast<std::uintptr_t>(d.data()), s0 = reinterpret_cast<std::uintptr_t>(s.data());
  if (d0 < span_end(s) && s0 < span_end(d)) {
    throw invalid_argument("fusex::copy_async: destination (shape " + d.shape().str() + ") and source (shape " +
                           s.shape().str() + ") overlap in memory");
  }
  if (d.is_contiguous() && s.is_contiguous()) {
    FUSEX_CUDA_CHECK(cudaMemcpyAsync(d.data(), s.data(), static_cast<std::size_t>(n) * sizeof(T), cudaMemcpyDefault,
                                     stream));
    return;
  }
  const int k = std::min(detail::dense_suffix(d), detail::dense_suffix(s));
  const detail::copy_layout ld = detail::layout_2d(d, k), ls = detail::layout_2d(s, k);
  if (!ld.ok || !ls.ok || ld.pitch < ld.width || ls.pitch < ls.width || ld.rows != ls.rows) {
    throw invalid_argument("fusex::copy_async: cannot copy a view of shape " + s.shape().str() + " and strides " +
                           s.strides().str() + " into one with strides " + d.strides().str() +
                           ": only contiguous views and views of contiguous rows at a uniform pitch are "
                           "supported; make the data contiguous first");
  }
  FUSEX_CUDA_CHECK(cudaMemcpy2DAsync(d.data(), static_cast<std::size_t>(ld.pitch) * sizeof(T), s.data(),
                                     static_cast<std::size_t>(ls.pitch) * sizeof(T),
                                     static_cast<std::size_t>(ld.width) * sizeof(T), static_cast<std::size_t>(ld.rows),
                                     cudaMemcpyDefault, stream));
}

}  // namespace fusex
