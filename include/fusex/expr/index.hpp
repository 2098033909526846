#pragma once
/// \file
/// Index leaves: expressions whose value at each element is that element's coordinate along one
/// axis, computed in the kernel (nothing is read from memory). `fusex::arange(n)` is 0, 1, ..., n-1;
/// `fusex::iota(shape, axis)` is the coordinate along `axis` of an array of that shape, and
/// broadcasts like any operand, so a causal mask is an expression:
/// `softmax(where(iota(s, 1) > iota(s, 0), -inf, s))` with `s` of shape [L, L] is one kernel.

#include <fusex/core/shape.hpp>
#include <fusex/error.hpp>
#include <fusex/expr/node.hpp>

#include <cstdint>
#include <string>

namespace fusex {

/// A terminal: the coordinate (int64) of each element of `shape` along `axis` (or, for
/// linear_index, its row-major linear index). To the planner it is an operand of that shape whose
/// "strides" are 1 along the axis and 0 elsewhere (row-major strides for the linear index), so it is
/// broadcast, reordered, merged and split into 32-bit pieces like a view, and its value at a
/// coordinate is that operand's offset.
struct index_node : detail::expr_base {
  using value_type = std::int64_t;
  static constexpr int leaf_count = 1;
  static constexpr int reduce_count = 0;

  shape_t extent;  ///< the shape it indexes
  int axis = 0;    ///< normalised, in [0, extent.rank()); -1: the row-major linear index (linear_index)

  shape_t shape() const { return extent; }
  bool same_data(const index_node& o) const { return axis == o.axis && extent == o.extent; }
  detail::leaf_info leaf(bool in_reduction) const {
    strides_t s;
    if (axis < 0) {
      s = contiguous_strides(extent);
    } else {
      for (int d = 0; d < extent.rank(); ++d) s.push_back(d == axis ? 1 : 0);
    }
    detail::leaf_info li{nullptr, 1, dtype_id::int64, extent, s, in_reduction, static_cast<int>(sizeof(value_type))};
    li.computed = true;
    return li;
  }
};

/// The coordinates along `axis` (negative: from the end) of an array of shape `s`, as an int64
/// expression of that shape. Throws fusex::shape_error for an axis out of range.
///
/// (Not named `index`: a function template `fusex::index` made nvcc's front end in clang mode parse
/// `a.index < 0` in fusex's own templates, and in users' under `using namespace fusex`, as a
/// template argument list.)
inline index_node iota(const shape_t& s, int axis) {
  if (axis < -s.rank() || axis >= s.rank()) {
    throw shape_error("fusex::iota: axis " + std::to_string(axis) + " is out of range for shape " + s.str());
  }
  for (int d = 0; d < s.rank(); ++d) {
    if (s[d] < 0) throw shape_error("fusex::iota: shape " + s.str() + " has a negative extent");
  }
  index_node n;
  n.extent = s;
  n.axis = axis < 0 ? axis + s.rank() : axis;
  return n;
}
/// The coordinates along `axis` of an operand's shape: `iota(x, -1)` is each element's column.
template <class X, std::enable_if_t<is_operand_v<X>, int> = 0>
index_node iota(const X& x, int axis) {
  return iota(as_expr(x).shape(), axis);
}
/// The row-major linear index of each element of shape `s` (0 to numel(s) - 1), as an int64
/// expression of that shape: the counter of fusex's random numbers (expr/random.hpp). Throws
/// fusex::shape_error for a negative extent.
inline index_node linear_index(const shape_t& s) {
  for (int d = 0; d < s.rank(); ++d) {
    if (s[d] < 0) throw shape_error("fusex::linear_index: shape " + s.str() + " has a negative extent");
  }
  index_node n;
  n.extent = s;
  n.axis = -1;
  return n;
}
/// 0, 1, ..., n-1 as an int64 expression of shape [n]. Throws fusex::shape_error for n < 0.
inline index_node arange(std::int64_t n) {
  if (n < 0) throw shape_error("fusex::arange: n = " + std::to_string(n) + " is negative");
  return iota(shape_t{n}, 0);
}

}  // namespace fusex
