#pragma once
/// \file
/// fusex::copy_async: stream-ordered copies between host and device tensors, views, buffers and
/// std::vector; fusex::to_host: a result as a std::vector.

#include <fusex/core/shape.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>
#include <fusex/graph/capture_rules.hpp>
#include <fusex/memory/buffer.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace fusex {

namespace detail {
template <class T>
view<T> as_copy_view(const view<T>& v) {
  return v;
}
template <class T>
view<T> as_copy_view(const buffer<T>& b) {
  return view<T>(b.data(), shape_t{static_cast<std::int64_t>(b.size())});
}
// tensor<T> and pinned_buffer<T> (and anything else with a view()): this header need not include
// pinned.hpp, so <fusex/fusex.hpp> can offer copy_async and to_host at no parsing cost.
template <class C>
auto as_copy_view(const C& c) -> decltype(c.view()) {
  return c.view();
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
    FUSEX_CUDA_CHECK(
        cudaMemcpyAsync(d.data(), s.data(), static_cast<std::size_t>(n) * sizeof(T), cudaMemcpyDefault, stream));
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

/// Copies `src` (a view, tensor, buffer or pinned_buffer, in any memory) into a host std::vector of
/// exactly src.size() elements, in row-major order, ordered on `stream`. As with any copy into
/// pageable memory, CUDA returns once the data is there (see the overload above); throws
/// shape_error when the sizes differ. std::vector<bool> has no contiguous storage: use to_host.
template <class T, class A, class Src>
void copy_async(std::vector<T, A>& dst, const Src& src, cudaStream_t stream) {
  static_assert(!std::is_same_v<T, bool>,
                "fusex::copy_async: std::vector<bool> has no contiguous storage; use fusex::to_host");
  const auto s = detail::as_copy_view(src);
  if (static_cast<std::int64_t>(dst.size()) != s.size()) {
    throw shape_error("fusex::copy_async: a std::vector of " + std::to_string(dst.size()) +
                      " elements cannot hold a source of shape " + s.shape().str() + " (" + std::to_string(s.size()) +
                      " elements)");
  }
  copy_async(view<T>(dst.data(), s.shape()), s, stream);
}

/// The elements of `src` (a view, tensor, buffer or pinned_buffer, usually in device memory) as a
/// host std::vector in row-major order: `auto y = fusex::to_host(t, stream);`. Waits for `stream`
/// (everything enqueued on it before, then the copy), so the vector holds the result when this
/// returns; not for use while `stream` is being captured into a graph.
template <class Src>
auto to_host(const Src& src, cudaStream_t stream) {
  const auto s = detail::as_copy_view(src);
  using T = std::remove_const_t<typename decltype(s)::value_type>;
  const auto n = static_cast<std::size_t>(s.size());
  if constexpr (std::is_same_v<T, bool>) {
    std::unique_ptr<bool[]> tmp(new bool[n > 0 ? n : 1]);
    copy_async(view<bool>(tmp.get(), s.shape()), s, stream);
    stream_synchronize(stream);
    return std::vector<bool>(tmp.get(), tmp.get() + n);
  } else {
    std::vector<T> out(n);
    copy_async(view<T>(out.data(), s.shape()), s, stream);
    stream_synchronize(stream);
    return out;
  }
}

}  // namespace fusex
