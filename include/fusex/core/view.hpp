#pragma once
/// \file
/// fusex::view<T>: a non-owning strided view over memory (device memory for fusex::eval, host
/// memory for fusex::host::eval), of run-time rank 0 to fusex::max_rank.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace fusex {

/// The owning tensor (<fusex/tensor.hpp>, above the values and memory/): declared here so that
/// expressions and evaluation accept tensors without depending on the allocator.
template <class T>
class tensor;

namespace detail {
template <class C, class = void>
struct has_data_size : std::false_type {};
template <class C>
struct has_data_size<C, std::void_t<decltype(std::declval<C&>().data()), decltype(std::declval<C&>().size())>>
    : std::true_type {};

// Raw pointer from `c.data()`: a pointer as is, or a fancy pointer (thrust::device_ptr) via .get().
template <class P>
auto raw_pointer(P p) {
  if constexpr (std::is_pointer_v<P>) return p;
  else return p.get();
}
}  // namespace detail

/// A non-owning view of elements of type T (possibly const) with a shape and element strides.
/// Strides may be 0 (broadcast) and are never negative. A view with a null pointer and a non-zero
/// number of elements is rejected at construction.
template <class T>
class view {
  static_assert(is_dtype_v<std::remove_const_t<T>>,
                "fusex::view<T>: T must be one of float, double, fusex::half, fusex::bfloat16, int8_t, "
                "uint8_t, int32_t, int64_t, bool (optionally const)");

 public:
  using element_type = T;
  using value_type = std::remove_const_t<T>;

  /// An empty rank-1 view of zero elements.
  view() : shape_({0}), strides_({1}) {}

  /// A contiguous row-major view of `shape` starting at `data`.
  view(T* data, shape_t shape) : data_(data), shape_(shape), strides_(contiguous_strides(shape)) { validate(); }

  /// A view with explicit element strides (one per dimension, non-negative).
  view(T* data, shape_t shape, strides_t strides) : data_(data), shape_(shape), strides_(strides) {
    if (strides_.rank() != shape_.rank()) {
      throw shape_error("fusex: view of shape " + shape_.str() + " given " + std::to_string(strides_.rank()) +
                        " strides " + strides_.str());
    }
    validate();
  }

  /// A rank-1 view of a contiguous container with `.data()` and `.size()` (std::vector for host
  /// evaluation, thrust::device_vector or any device container for device evaluation).
  template <class C,
            class = std::enable_if_t<detail::has_data_size<C>::value && !std::is_same_v<std::decay_t<C>, view>>>
  explicit view(C& c)
      : view(static_cast<T*>(detail::raw_pointer(c.data())), shape_t{static_cast<std::int64_t>(c.size())}) {}

  /// Conversion to a view of const elements.
  template <class U, class = std::enable_if_t<std::is_same_v<const U, T> && !std::is_same_v<U, T>>>
  view(const view<U>& o) : data_(o.data()), shape_(o.shape()), strides_(o.strides()) {}  // NOLINT

  T* data() const noexcept { return data_; }
  const shape_t& shape() const noexcept { return shape_; }
  const strides_t& strides() const noexcept { return strides_; }
  int rank() const noexcept { return shape_.rank(); }
  std::int64_t extent(int d) const { return shape_[dim_index(d, "dimension")]; }
  std::int64_t stride(int d) const { return strides_[dim_index(d, "dimension")]; }
  /// Number of elements.
  std::int64_t size() const noexcept { return numel(shape_); }
  bool empty() const noexcept { return size() == 0; }
  /// True when the elements are dense in row-major order (size-1 dimensions may have any stride).
  bool is_contiguous() const noexcept {
    std::int64_t expect = 1;
    for (int i = rank() - 1; i >= 0; --i) {
      if (shape_[i] != 1 && strides_[i] != expect) return false;
      expect *= shape_[i];
    }
    return true;
  }

  /// Elements [begin, end) of dimension `dim`, every `step`-th. Negative `begin`/`end` count from
  /// the end, as in Python.
  view slice(int dim, std::int64_t begin, std::int64_t end, std::int64_t step = 1) const {
    const int d = dim_index(dim, "slice dimension");
    const std::int64_t e = shape_[d];
    if (begin < 0) begin += e;
    if (end < 0) end += e;
    if (step < 1 || begin < 0 || end > e || begin > end) {
      throw shape_error("fusex: slice(" + std::to_string(dim) + ", " + std::to_string(begin) + ", " +
                        std::to_string(end) + ", " + std::to_string(step) + ") is out of range for a view of shape " +
                        shape_.str());
    }
    view v = *this;
    v.data_ = data_ + begin * strides_[d];
    v.shape_[d] = (end - begin + step - 1) / step;
    v.strides_[d] = strides_[d] * step;
    if (v.shape_[d] == 0) v.data_ = data_;
    return v;
  }

  /// Swaps two dimensions (no copy).
  view transpose(int d0, int d1) const {
    const int a = dim_index(d0, "transpose dimension");
    const int b = dim_index(d1, "transpose dimension");
    view v = *this;
    std::swap(v.shape_[a], v.shape_[b]);
    std::swap(v.strides_[a], v.strides_[b]);
    return v;
  }
  /// A 2-D view's transpose.
  view t() const {
    if (rank() != 2) throw shape_error("fusex: t() needs a rank-2 view, got shape " + shape_.str());
    return transpose(0, 1);
  }

  /// Reorders the dimensions: result dimension i is this view's dimension order[i].
  view permute(const dims& order) const {
    if (order.rank() != rank()) {
      throw shape_error("fusex: permute order " + order.str() + " does not match rank of shape " + shape_.str());
    }
    bool seen[max_rank] = {};
    view v = *this;
    for (int i = 0; i < rank(); ++i) {
      const int d = dim_index(static_cast<int>(order[i]), "permute dimension");
      if (seen[d]) throw shape_error("fusex: permute order " + order.str() + " repeats a dimension");
      seen[d] = true;
      v.shape_[i] = shape_[d];
      v.strides_[i] = strides_[d];
    }
    return v;
  }

  /// The same elements with a new shape; the view must be contiguous. One extent may be -1 and is
  /// inferred.
  view reshape(shape_t s) const {
    int infer = -1;
    std::int64_t known = 1;
    for (int i = 0; i < s.rank(); ++i) {
      if (s[i] == -1 && infer < 0) {
        infer = i;
      } else if (s[i] < 0) {
        throw shape_error("fusex: reshape to " + s.str() + ": bad extent");
      } else {
        known *= s[i];
      }
    }
    if (infer >= 0) s[infer] = known == 0 ? 0 : size() / known;
    if (numel(s) != size()) {
      throw shape_error("fusex: cannot reshape a view of shape " + shape_.str() + " (" + std::to_string(size()) +
                        " elements) to " + s.str());
    }
    if (!is_contiguous()) {
      throw shape_error("fusex: reshape needs a contiguous view; shape " + shape_.str() + " strides " + strides_.str() +
                        " is not");
    }
    return view(data_, s);
  }

  /// Stretches size-1 and missing leading dimensions to `s` (stride 0), NumPy rules.
  view broadcast_to(const shape_t& s) const {
    if (!broadcasts_to(shape_, s)) throw broadcast_error("a view", shape_, s);
    view v;
    v.data_ = data_;
    v.shape_ = s;
    v.strides_ = dims::filled(s.rank(), 0);
    for (int i = 0; i < rank(); ++i) {
      const int j = s.rank() - rank() + i;
      v.strides_[j] = shape_[i] == s[j] ? strides_[i] : 0;
    }
    return v;
  }

  /// Inserts a size-1 dimension at `axis` (negative counts from the end of the result).
  view expand_dims(int axis) const {
    const int a = normalize_axis(axis, rank() + 1, "expand_dims axis");
    view v = *this;
    v.shape_.insert(a, 1);
    v.strides_.insert(a, a < rank() ? strides_[a] * shape_[a] : 1);
    return v;
  }

  /// Removes dimension `axis`, which must have extent 1.
  view squeeze(int axis) const {
    const int a = dim_index(axis, "squeeze axis");
    if (shape_[a] != 1) {
      throw shape_error("fusex: squeeze(" + std::to_string(axis) + ") of shape " + shape_.str() + ": extent is not 1");
    }
    view v = *this;
    v.shape_.erase(a);
    v.strides_.erase(a);
    return v;
  }

 private:
  // A dimension of this view: normalize_axis accepts axis 0 of rank 0 (a scalar is a valid
  // target for expand_dims and reductions), but a rank-0 view has no dimension to index.
  int dim_index(int d, const char* what) const {
    if (rank() == 0) {
      throw shape_error(std::string("fusex: ") + what + " " + std::to_string(d) +
                        " is out of range for a rank-0 view (it has no dimensions)");
    }
    return normalize_axis(d, rank(), what);
  }

  void validate() const {
    for (int i = 0; i < rank(); ++i) {
      if (shape_[i] < 0) throw shape_error("fusex: negative extent in shape " + shape_.str());
      if (strides_[i] < 0)
        throw shape_error("fusex: negative stride in strides " + strides_.str() + " (shape " + shape_.str() + ")");
    }
    if (data_ == nullptr && size() != 0) {
      throw invalid_argument("fusex: null pointer for a view of shape " + shape_.str() + " (" + std::to_string(size()) +
                             " elements)");
    }
  }

  T* data_ = nullptr;
  shape_t shape_;
  strides_t strides_;
};

template <class C, class = std::enable_if_t<detail::has_data_size<C>::value>>
view(C&) -> view<std::remove_pointer_t<decltype(detail::raw_pointer(std::declval<C&>().data()))>>;

/// Alias: the issue tracker and docs call it tensor_view too.
template <class T>
using tensor_view = view<T>;

/// A contiguous view of `shape` over `data`.
template <class T>
view<T> make_view(T* data, shape_t shape) {
  return view<T>(data, shape);
}
/// A strided view over `data`.
template <class T>
view<T> make_view(T* data, shape_t shape, strides_t strides) {
  return view<T>(data, shape, strides);
}
/// A rank-1 view over a container with .data() and .size().
template <class C, class = std::enable_if_t<detail::has_data_size<C>::value>>
auto make_view(C& c) {
  return view(c);
}

}  // namespace fusex
