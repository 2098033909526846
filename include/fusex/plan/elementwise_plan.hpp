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

inline std::string operand_text(const operand_layout& o) {
  if (o.computed) {
    int axis = 0;
    for (int d = 0; d < o.strides.rank(); ++d)
      if (o.strides[d] != 0) axis = d;
    return "index along axis " + std::to_string(axis) + " of " + o.shape.str() + " (int64, computed)";
  }
  return std::string(dtype_name(o.dtype)) + " " + o.shape.str() + " strides " + o.strides.str();
}

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
inline std::int64_t index_reach(std::int64_t count, const std::int64_t* ext, int rank, const operand_layout* ops,
                                int n_ops) {
  std::int64_t biggest = count;
  for (int i = 0; i < n_ops; ++i) {
    const std::int64_t m = span_of(ops[i].s, ext, 0, rank) + 1;
    if (m > biggest) biggest = m;
  }
  return biggest;
}

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
inline invalid_argument overlap_error(const std::string& dest, const operand_layout& d, const std::string& other,
                                      const operand_layout& o) {
  return invalid_argument("fusex: " + dest + " (" + operand_text(d) + ") overlaps " + other + " (" + operand_text(o) +
                          ") other than element for element; the result would race");
}

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
inline void check_no_self_overlap(const operand_layout& o, int index) {
  int order[max_rank];
  int n = 0;
  for (int d = 0; d < o.shape.rank(); ++d)
    if (o.shape[d] > 1) order[n++] = d;
  sort_by_stride(order, n, o.strides.begin(), false);
  std::int64_t span = 0;
  for (int i = 0; i < n; ++i) {
    const std::int64_t st = o.strides[order[i]];
    if (st <= span) {
      throw invalid_argument("fusex: destination " + std::to_string(index) + " (" + operand_text(o) +
                             ") has elements that share memory; writing it would race");
    }
    span += (o.shape[order[i]] - 1) * st;
  }
}

// Whether a strided layout and its translate by `delta` elements share an element: whether
// delta = sum k_d * stride_d with |k_d| < extent_d. The layout is known not to overlap itself
// (each stride exceeds the span of the smaller ones), so at each dimension, largest stride first,
// only the two multiples nearest the remainder can lead to a solution.
inline bool translate_overlaps_from(std::int64_t rem, const std::int64_t* st, const std::int64_t* ext, int n, int k) {
  if (rem == 0) return true;
  if (k >= n || k >= max_rank) return false;
  const std::int64_t s = st[k];
  const std::int64_t q = rem / s;  // toward zero
  for (std::int64_t c : {q, rem > 0 ? q + 1 : q - 1}) {
    if (c <= -ext[k] || c >= ext[k]) continue;
    if (translate_overlaps_from(rem - c * s, st, ext, n, k + 1)) return true;
  }
  return false;
}
inline bool translate_overlaps(std::int64_t delta, const std::int64_t* strides, const shape_t& shape) {
  int order[max_rank];
  int n = 0;
  for (int d = 0; d < shape.rank(); ++d)
    if (shape[d] > 1 && strides[d] > 0) order[n++] = d;
  sort_by_stride(order, n, strides, true);
  std::int64_t st[max_rank], ext[max_rank];
  for (int i = 0; i < n; ++i) {
    st[i] = strides[order[i]];
    ext[i] = shape[order[i]];
  }
  return translate_overlaps_from(delta, st, ext, n, 0);
}

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
inline void set_vector_path(elementwise_layout& L, const operand_layout* ops, int n_out, int n_ops, int V) {
  const int r = L.rank;
  bool vec = V > 1 && (r == 1 || L.extent[r - 1] % V == 0) && L.extent[r - 1] >= V;
  for (int i = 0; vec && i < n_ops; ++i) {
    const operand_layout& o = ops[i];
    const std::int64_t inner = o.s[r - 1];
    if (inner == 0 && i >= n_out) continue;  // broadcast along the vector: one value
    if (o.computed) continue;                 // computed per lane, whatever its strides
    vec = vector_ok(o, V, inner, o.s, r - 1);
  }
  L.vector_width = vec ? V : 1;
  L.work = L.numel / L.vector_width;
  L.tail_start = L.work * L.vector_width;
}

/// Plans an elementwise evaluation over `ops[0 .. n_out)` (destinations) and
/// `ops[n_out .. n_ops)` (leaves). `vector_width` is the widest vector the element types allow
/// (16 bytes over the largest element). Throws fusex::error on bad input.
inline void plan_elementwise(operand_layout* ops, int n_out, int n_ops, int vector_width, elementwise_layout& L) {
  L = elementwise_layout{};
  L.shape = ops[0].shape;
  const int R = L.shape.rank();
  for (int i = 1; i < n_out; ++i) {
    if (ops[i].shape != L.shape) {
      throw shape_error("fusex: destinations of one evaluation must have one shape; destination 0 is " + L.shape.str() +
                        ", destination " + std::to_string(i) + " is " + ops[i].shape.str());
    }
  }
  L.numel = numel(L.shape);

  // Strides of every operand in the destination's index space (0 where broadcast).
  for (int i = 0; i < n_ops; ++i) {
    operand_layout& o = ops[i];
    if (!broadcast_strides(o.shape, o.strides, L.shape, o.s)) throw broadcast_error("operand", o.shape, L.shape);
  }
  if (L.numel == 0) return;  // empty: valid, launches nothing

  // Overlap: destinations must not alias themselves or each other; an input may alias a
  // destination only element for element (in-place update), never shifted or reordered.
  for (int i = 0; i < n_out; ++i) check_no_self_overlap(ops[i], i);
  for (int i = 0; i < n_out; ++i) {
    const byte_range r0 = operand_bytes(ops[i], L.shape.begin(), R);
    const char* b0 = r0.begin;
    for (int j = 0; j < n_ops; ++j) {
      if (j == i || ops[j].computed) continue;
      const byte_range r1 = operand_bytes(ops[j], L.shape.begin(), R);
      if (!r0.overlaps(r1)) continue;
      const char* b1 = r1.begin;
      // A dimension of extent 1 has one index: its stride does not matter (an input [n] of a
      // destination [1, n] over the same memory is still element for element).
      bool same_layout = ops[j].elem_size == ops[i].elem_size;
      for (int d = 0; same_layout && d < R; ++d) same_layout = L.shape[d] == 1 || ops[j].s[d] == ops[i].s[d];
      const std::ptrdiff_t byte_delta = b1 - b0;
      bool ok = false;
      if (same_layout && byte_delta % ops[i].elem_size == 0) {
        if (byte_delta == 0) {
          ok = j >= n_out;  // element for element: an in-place update (two destinations: a race)
        } else {
          // Translates of one layout: they share an element only if the offset is a combination
          // of the strides within the extents (column 0 from column 1, even from odd elements).
          ok = !translate_overlaps(byte_delta / ops[i].elem_size, ops[i].s, L.shape);
        }
      }
      if (!ok) {
        throw overlap_error("destination " + std::to_string(i), ops[i],
                            j < n_out ? "destination " + std::to_string(j) : "input " + std::to_string(j - n_out), ops[j]);
      }
    }
  }

  // Order dimensions by the first destination's strides, outermost first, so that stores are
  // coalesced whatever its layout; drop size-1 dimensions.
  int order[max_rank];
  int n = 0;
  for (int d = 0; d < R; ++d)
    if (L.shape[d] != 1) order[n++] = d;
  sort_by_stride(order, n, ops[0].s, true);
  // Merge a dimension into the one outside it when every operand steps through both as one.
  std::int64_t ext[max_rank];
  std::int64_t str[64][max_rank];  // 64 operands is far beyond any real expression
  if (n_ops > 64) {
    throw invalid_argument("fusex: more than 64 operands in one evaluation (" + std::to_string(n_ops) +
                           ": the destinations and every leaf of the expressions)");
  }
  int r = 0;
  for (int k = 0; k < n; ++k) {
    const int d = order[k];
    bool merge = r > 0;
    for (int i = 0; merge && i < n_ops; ++i) merge = str[i][r - 1] == ops[i].s[d] * L.shape[d];
    if (merge) {
      ext[r - 1] *= L.shape[d];
      for (int i = 0; i < n_ops; ++i) str[i][r - 1] = ops[i].s[d];
    } else {
      ext[r] = L.shape[d];
      for (int i = 0; i < n_ops; ++i) str[i][r] = ops[i].s[d];
      ++r;
    }
  }
  if (r == 0) {  // a single element
    ext[0] = 1;
    for (int i = 0; i < n_ops; ++i) str[i][0] = 0;
    r = 1;
  }
  L.rank = r;
  for (int d = 0; d < max_rank; ++d) L.extent[d] = d < r ? ext[d] : 1;
  for (int i = 0; i < n_ops; ++i)
    for (int d = 0; d < max_rank; ++d) ops[i].s[d] = d < r ? str[i][d] : 0;

  set_vector_path(L, ops, n_out, n_ops, vector_width);

  // 32-bit indices when every count and offset fits (the common case); otherwise the launch
  // splits the index space into pieces that do (split_index32).
  L.index64 = !fits_index32(L, ops, n_ops);
}

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
inline std::vector<index32_piece> split_index32(const elementwise_layout& L, const operand_layout* ops, int n_ops,
                                                std::int64_t limit = index32_limit) {
  struct box {
    elementwise_layout L;
    std::vector<operand_layout> ops;
  };
  const int V = L.vector_width;
  std::vector<index32_piece> out;
  std::vector<box> stack{box{L, std::vector<operand_layout>(ops, ops + n_ops)}};  // depth-first, first part first
  while (!stack.empty()) {
    box b = std::move(stack.back());
    stack.pop_back();
    if (fits_index32(b.L, b.ops.data(), n_ops, limit)) {
      b.L.index64 = false;
      // (Destinations never broadcast; inputs that do keep their stride 0: n_out = 0 suffices.)
      set_vector_path(b.L, b.ops.data(), 0, n_ops, V);
      index32_piece p{b.L, std::vector<const void*>(static_cast<std::size_t>(n_ops))};
      for (int i = 0; i < n_ops; ++i) p.data[static_cast<std::size_t>(i)] = b.ops[static_cast<std::size_t>(i)].data;
      out.push_back(std::move(p));
      continue;
    }
    int best = -1;
    std::int64_t best_span = -1;
    for (int d = 0; d < b.L.rank; ++d) {
      const std::int64_t e = b.L.extent[d];
      if (e < 2 || (d == b.L.rank - 1 && V > 1 && e < 2 * V)) continue;
      std::int64_t span = e;
      for (const operand_layout& o : b.ops) {
        const std::int64_t m = (e - 1) * o.s[d];
        if (m > span) span = m;
      }
      if (span > best_span) {
        best_span = span;
        best = d;
      }
    }
    if (best < 0) throw error("fusex: internal: an index space that 32-bit pieces cannot cover");
    const std::int64_t e = b.L.extent[best];
    const bool inner = best == b.L.rank - 1 && V > 1;
    // The longest first part that fits with the other dimensions whole, else half.
    std::int64_t other = 1;
    for (int d = 0; d < b.L.rank; ++d)
      if (d != best) other *= b.L.extent[d];
    std::int64_t h = (limit - 1) / other;
    for (const operand_layout& o : b.ops) {
      const std::int64_t rest = max_offset(o, b.L) - (e - 1) * o.s[best];
      if (rest + 2 > limit) h = 0;
      else if (o.s[best] > 0 && (limit - 2 - rest) / o.s[best] + 1 < h) h = (limit - 2 - rest) / o.s[best] + 1;
    }
    if (inner) h = h / V * V;
    if (h < 1 || h >= e) {
      h = e / 2;
      if (inner) h = h / V * V;  // (e >= 2V: h >= V)
    } else {
      // As many parts as the longest that fits needs, as even as the vectors allow (no runt).
      const std::int64_t parts = (e + h - 1) / h;
      std::int64_t even = (e + parts - 1) / parts;
      if (inner) even = (even + V - 1) / V * V;
      if (even < h) h = even;
    }
    box second = b;
    b.L.extent[best] = h;
    second.L.extent[best] = e - h;
    for (operand_layout& o : second.ops) advance_operand(o, h * o.s[best]);
    for (box* x : {&b, &second}) {
      x->L.numel = 1;
      for (int d = 0; d < x->L.rank; ++d) x->L.numel *= x->L.extent[d];
    }
    stack.push_back(std::move(second));
    stack.push_back(std::move(b));
  }
  return out;
}

}  // namespace fusex::detail
