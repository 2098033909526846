#pragma once
/// \file
/// The elementwise planner: from the destination(s) and the leaves of the expression(s) to the
/// kernel's index space. It checks shapes and overlap, orders the dimensions by the destination's
/// strides, drops size-1 dimensions, merges dimensions that are contiguous for every operand,
/// decides whether 16-byte vector access is safe, and whether the index space fits 32-bit indices
/// (else the launch splits it into pieces that do). The same plan
/// drives the device launch, the host backend and the plan printer.

#include <fusex/config.hpp>
#include <fusex/core/dtype_id.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fusex::detail {

/// One operand as the planner sees it. Destinations come first.
struct operand_layout {
  const void* data = nullptr;
  int elem_size = 0;
  int compute_size = 0;  ///< bytes of the compute type (half and bfloat16 compute in float)
  dtype_id dtype = dtype_id::user;
  shape_t shape;
  strides_t strides;
  /// Values computed from the coordinates (an index leaf): no memory, so no alignment, overlap or
  /// register cache; `data` is the value at the first element (advanced like an address of
  /// elem_size 1 when a launch is split into pieces).
  bool computed = false;
  /// Strides in the kernel's (collapsed) index space, in elements.
  std::int64_t s[max_rank] = {};
};

/// The decisions of the elementwise planner.
struct elementwise_layout {
  shape_t shape;                       ///< logical shape of the destination(s)
  std::int64_t numel = 0;              ///< number of elements
  int rank = 0;                        ///< rank of the kernel's index space
  std::int64_t extent[max_rank] = {};  ///< its extents, in elements
  int vector_width = 1;                ///< elements per vector access (1: scalar path)
  bool index64 = false;                ///< too large for 32-bit indices: launched in pieces (split_index32)
  std::int64_t work = 0;               ///< work items: vectors, or elements on the scalar path
  std::int64_t tail_start = 0;         ///< first element of the scalar tail (rank-1 vector path)
};

FUSEX_DECL std::string operand_text(const operand_layout& o);

/// Moves an operand's start by `elements` elements (a launch in pieces): its address, or, for a
/// computed operand, the value at its first element that `data` carries (integer arithmetic: no
/// pointer arithmetic on what is not an address).
inline void advance_operand(operand_layout& o, std::int64_t elements) {
  if (o.computed) {
    o.data = reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(o.data) +
                                           static_cast<std::uintptr_t>(elements));
  } else {
    o.data = static_cast<const char*>(o.data) + elements * o.elem_size;
  }
}

/// Folds dimensions [lo, hi) of positional strides `st` (extents `ext`) into one stride, if the
/// operand steps through them as one dimension (unit extents ignored; all-broadcast gives 0).
inline bool fold_dims(const std::int64_t* st, const std::int64_t* ext, int lo, int hi, std::int64_t& folded) {
  folded = 0;
  int prev = -1;
  for (int d = lo; d < hi; ++d) {
    if (ext[d] == 1) continue;
    if (prev >= 0 && st[prev] != st[d] * ext[d]) return false;
    prev = d;
  }
  if (prev >= 0) folded = st[prev];
  return true;
}

/// Largest element offset of strides `s` over extents `ext` in dimensions [lo, hi) (strides are
/// never negative); max_offset: an operand's over a layout's whole index space.
inline std::int64_t span_of(const std::int64_t* s, const std::int64_t* ext, int lo, int hi) {
  std::int64_t m = 0;
  for (int d = lo; d < hi; ++d) m += (ext[d] - 1) * s[d];
  return m;
}
inline std::int64_t max_offset(const operand_layout& o, const elementwise_layout& L) {
  return span_of(o.s, L.extent, 0, L.rank);
}

/// Counts and element offsets below this fit the kernels' 32-bit index arithmetic.
inline constexpr std::int64_t index32_limit = std::int64_t{1} << 31;

/// What must stay below index32_limit for a launch with 32-bit indices: its element count and
/// every operand's largest offset from its first element, plus one, over extents `ext` (the
/// operands' strides in `s`). Every planner decides the 32-bit fit with this.
FUSEX_DECL std::int64_t index_reach(std::int64_t count, const std::int64_t* ext, int rank, const operand_layout* ops,
                                int n_ops);

/// Whether an index space (or a piece of one) fits 32-bit indices: its element count and every
/// operand's largest offset from its first element are below `limit`.
inline bool fits_index32(const elementwise_layout& L, const operand_layout* ops, int n_ops,
                         std::int64_t limit = index32_limit) {
  return index_reach(L.numel, L.extent, L.rank, ops, n_ops) < limit;
}

/// The bytes an operand touches over extents `ext` (its strides in `o.s`): [begin, end).
struct byte_range {
  const char* begin;
  const char* end;
  bool overlaps(const byte_range& o) const noexcept { return !(o.begin >= end || begin >= o.end); }
};
inline byte_range operand_bytes(const operand_layout& o, const std::int64_t* ext, int rank) {
  const char* b = static_cast<const char*>(o.data);
  return {b, b + (span_of(o.s, ext, 0, rank) + 1) * o.elem_size};
}
/// The error for a destination (`dest`: "destination 0", ...) that overlaps another operand
/// (`other`: "input 1", ...) other than element for element.
FUSEX_DECL invalid_argument overlap_error(const std::string& dest, const operand_layout& d, const std::string& other,
                                      const operand_layout& o);

/// Sorts dimension indices `order[0 .. n)` by `strides[order[i]]`, largest first or smallest first;
/// stable (an insertion sort: n <= max_rank).
inline void sort_by_stride(int* order, int n, const std::int64_t* strides, bool largest_first) {
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0; --j) {
      const std::int64_t a = strides[order[j]], b = strides[order[j - 1]];
      if (largest_first ? !(a > b) : !(a < b)) break;
      std::swap(order[j], order[j - 1]);
    }
}

// A destination may not hold two elements at one address: with strides sorted ascending, each
// stride must exceed the span of all smaller dimensions (sufficient, cheap, and exact for every
// layout slicing and permuting can produce).
FUSEX_DECL void check_no_self_overlap(const operand_layout& o, int index);

// Whether a strided layout and its translate by `delta` elements share an element: whether
// delta = sum k_d * stride_d with |k_d| < extent_d. The layout is known not to overlap itself
// (each stride exceeds the span of the smaller ones), so at each dimension, largest stride first,
// only the two multiples nearest the remainder can lead to a solution.
FUSEX_DECL bool translate_overlaps_from(std::int64_t rem, const std::int64_t* st, const std::int64_t* ext, int n, int k);
FUSEX_DECL bool translate_overlaps(std::int64_t delta, const std::int64_t* strides, const shape_t& shape);

/// Whether operand `o` can be read or written in vectors of V elements along a dimension of
/// stride `inner` whose outer dimensions have strides `outer[0 .. n_outer)`: unit inner stride,
/// an address aligned to the vector's size, and outer strides of whole vectors (so every vector
/// stays aligned). Every vector-path decision (elementwise, row and 2-D reduction kernels) uses it;
/// broadcast and computed operands are the caller's to exempt.
inline bool vector_ok(const operand_layout& o, int V, std::int64_t inner, const std::int64_t* outer, int n_outer) {
  if (inner != 1) return false;
  if (reinterpret_cast<std::uintptr_t>(o.data) % static_cast<std::uintptr_t>(V * o.elem_size) != 0) return false;
  for (int d = 0; d < n_outer; ++d)
    if (outer[d] % V != 0) return false;
  return true;
}

/// Chooses the vector path of a planned index space (L's rank, extents and element count set):
/// vectors of V elements where every destination (ops[0 .. n_out)) and every input that moves
/// along the innermost dimension has unit inner stride, a base aligned to the vector's size and
/// outer strides of whole vectors, else single elements. Also sets the work items and the tail.
/// The planner calls it, and split_index32 again for each piece (new extents and addresses).
FUSEX_DECL void set_vector_path(elementwise_layout& L, const operand_layout* ops, int n_out, int n_ops, int V);

/// Plans an elementwise evaluation over `ops[0 .. n_out)` (destinations) and
/// `ops[n_out .. n_ops)` (leaves). `vector_width` is the widest vector the element types allow
/// (16 bytes over the largest element). Throws fusex::error on bad input.
FUSEX_DECL void plan_elementwise(operand_layout* ops, int n_out, int n_ops, int vector_width, elementwise_layout& L);

/// One piece of a split index space: its layout and each operand's address of its first element
/// (the strides are the whole space's).
struct index32_piece {
  elementwise_layout layout;
  std::vector<const void*> data;
};

/// Splits a planned index space whose counts or offsets do not fit 32-bit indices into pieces
/// that do. Only 32-bit kernels are then instantiated: a 64-bit twin of every kernel cost compile
/// time in every translation unit for tensors of 2^31 elements or more, which are rare and are
/// here a few launches more. Each split cuts the dimension whose extent or offset span is largest
/// (the one spanning the most memory, else the longest) into as few even parts as fit, or in
/// half where no part of it fits with the other dimensions whole; the innermost dimension is
/// cut at whole vectors, so the pieces keep the plan's vector path. Not a template: compiled once,
/// whatever the expressions. (`limit`: tests use small ones.)
FUSEX_DECL std::vector<index32_piece> split_index32(const elementwise_layout& L, const operand_layout* ops, int n_ops,
                                                std::int64_t limit = index32_limit);

}  // namespace fusex::detail

// The definitions, for host compilers only (config.hpp: FUSEX_DETAIL_HOST_BODIES).
#if FUSEX_DETAIL_HOST_BODIES
#include <fusex/plan/detail/elementwise_plan_impl.hpp>
#endif
