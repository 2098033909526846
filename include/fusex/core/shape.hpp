#pragma once
/// \file
/// Shapes and strides: small fixed-capacity arrays of run-time rank (up to fusex::max_rank),
/// NumPy broadcasting, and their printing for error messages.

#include <fusex/config.hpp>
#include <fusex/error.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace fusex {

namespace detail {
/// Integer types a shape or stride can be written in (bool is not one).
template <class I>
inline constexpr bool is_index_v = std::is_integral_v<I> && !std::is_same_v<I, bool>;
}  // namespace detail

/// A list of up to max_rank 64-bit integers: the extents of a shape or the strides of a view
/// (strides are counted in elements).
class dims {
 public:
  constexpr dims() = default;
  /// `{rows, cols}` of any one integer type (int, std::size_t, std::int64_t, ...): a
  /// `std::size_t rows` needs no cast. Throws shape_error for a rank above max_rank or an unsigned
  /// value above INT64_MAX.
  template <class I, std::enable_if_t<detail::is_index_v<I>, int> = 0>
  dims(std::initializer_list<I> v) {
    check_rank(static_cast<int>(v.size()));  // a braced list is never near INT_MAX
    for (I x : v) v_[rank_++] = to_int64(x);
  }
  /// `{rows, 3}`: integers of mixed types (two or more; one converts through the list form).
  template <
      class I0, class I1, class... I,
      std::enable_if_t<detail::is_index_v<I0> && detail::is_index_v<I1> && (detail::is_index_v<I> && ...), int> = 0>
  dims(I0 a, I1 b, I... rest) {
    check_rank(static_cast<int>(2 + sizeof...(I)));
    v_[rank_++] = to_int64(a);
    v_[rank_++] = to_int64(b);
    ((v_[rank_++] = to_int64(rest)), ...);
  }
  /// A list of `rank` copies of `value`.
  static dims filled(int rank, std::int64_t value) {
    check_rank(rank);
    dims d;
    d.rank_ = rank;
    for (int i = 0; i < rank; ++i) d.v_[i] = value;
    return d;
  }

  FUSEX_HD constexpr int rank() const noexcept { return rank_; }
  FUSEX_HD constexpr int size() const noexcept { return rank_; }
  FUSEX_HD constexpr std::int64_t operator[](int i) const noexcept { return v_[i]; }
  FUSEX_HD constexpr std::int64_t& operator[](int i) noexcept { return v_[i]; }
  const std::int64_t* begin() const noexcept { return v_; }
  const std::int64_t* end() const noexcept { return v_ + rank_; }

  void push_back(std::int64_t x) {
    check_rank(rank_ + 1);
    v_[rank_++] = x;
  }
  void insert(int pos, std::int64_t x) {
    check_rank(rank_ + 1);
    for (int i = rank_; i > pos; --i) v_[i] = v_[i - 1];
    v_[pos] = x;
    ++rank_;
  }
  void erase(int pos) {
    for (int i = pos; i + 1 < rank_; ++i) v_[i] = v_[i + 1];
    --rank_;
  }

  friend bool operator==(const dims& a, const dims& b) noexcept {
    if (a.rank_ != b.rank_) return false;
    for (int i = 0; i < a.rank_; ++i)
      if (a.v_[i] != b.v_[i]) return false;
    return true;
  }
  friend bool operator!=(const dims& a, const dims& b) noexcept { return !(a == b); }

  /// "[16384, 4096]"
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < rank_; ++i) {
      if (i) s += ", ";
      s += std::to_string(v_[i]);
    }
    return s + "]";
  }

  static void check_rank(int r) {
    if (r < 0 || r > max_rank)
      throw shape_error("fusex: rank " + std::to_string(r) + " exceeds fusex::max_rank (" + std::to_string(max_rank) +
                        ")");
  }

 private:
  template <class I>
  static std::int64_t to_int64(I x) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(std::int64_t)) {
      if (x > static_cast<I>(INT64_MAX))
        throw shape_error("fusex: extent or stride " + std::to_string(x) + " does not fit in int64");
    }
    return static_cast<std::int64_t>(x);
  }

  std::int64_t v_[max_rank] = {};
  int rank_ = 0;
};

/// The extents of a tensor.
using shape_t = dims;
/// The strides of a view, in elements.
using strides_t = dims;

/// Number of elements of a shape (1 for rank 0).
inline std::int64_t numel(const shape_t& s) noexcept {
  std::int64_t n = 1;
  for (std::int64_t e : s) n *= e;
  return n;
}

/// Row-major (C order) strides of a shape.
inline strides_t contiguous_strides(const shape_t& s) {
  strides_t st = dims::filled(s.rank(), 0);
  std::int64_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= (s[i] > 0 ? s[i] : 1);
  }
  return st;
}

/// Normalises a possibly negative axis against `rank`; throws shape_error naming the axis.
inline int normalize_axis(int axis, int rank, const char* what = "axis") {
  if (axis < -rank || axis >= (rank > 0 ? rank : 1) || (rank == 0 && axis != 0 && axis != -1)) {
    throw shape_error(std::string("fusex: ") + what + " " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

/// NumPy broadcasting of two shapes: trailing dimensions aligned, size-1 and missing dimensions
/// stretched. Throws shape_error naming both shapes and `context` when they do not broadcast.
FUSEX_DECL shape_t broadcast_shapes(const shape_t& a, const shape_t& b, const char* context = nullptr);

/// True when `from` broadcasts to exactly `to` (NumPy rules, `to` unchanged).
inline bool broadcasts_to(const shape_t& from, const shape_t& to) noexcept {
  if (from.rank() > to.rank()) return false;
  for (int i = 0; i < from.rank(); ++i) {
    const std::int64_t ef = from[i], et = to[to.rank() - from.rank() + i];
    if (ef != et && ef != 1) return false;
  }
  return true;
}

/// Strides of an operand of shape `s` (strides `st`) broadcast to `to`, right-aligned: 0 where
/// a dimension is missing or stretched. False (out untouched) when `s` does not broadcast to `to`.
inline bool broadcast_strides(const shape_t& s, const strides_t& st, const shape_t& to, std::int64_t* out) {
  if (!broadcasts_to(s, to)) return false;
  const int R = to.rank();
  for (int d = 0; d < R; ++d) {
    const int j = d - (R - s.rank());
    out[d] = (j < 0 || s[j] != to[d]) ? 0 : st[j];
  }
  return true;
}

/// The error for an operand (`what`: "operand", "a view", ...) of shape `s` that does not
/// broadcast to `to`.
FUSEX_DECL shape_error broadcast_error(const char* what, const shape_t& s, const shape_t& to);

}  // namespace fusex

// The definitions, for host compilers only (config.hpp: FUSEX_DETAIL_HOST_BODIES).
#if FUSEX_DETAIL_HOST_BODIES
#include <fusex/core/detail/shape_impl.hpp>
#endif
