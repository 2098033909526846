#pragma once
/// \file
/// The elementwise planner: from the destination(s) and the leaves of the expression(s) to the
/// kernel's index space. It checks shapes and overlap, orders the dimensions by the destination's
/// strides, drops size-1 dimensions, merges dimensions that are contiguous for every operand,
/// decides whether 16-byte vector access is safe, and picks 32- or 64-bit indexing. The same plan
/// drives the device launch, the host backend and the plan printer.

#include <fusex/config.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace fusex::detail {

/// One operand as the planner sees it. Destinations come first.
struct operand_layout {
  const void* data = nullptr;
  int elem_size = 0;
  int compute_size = 0;  ///< bytes of the compute type (half and bfloat16 compute in float)
  const char* dtype = "";
  shape_t shape;
  strides_t strides;
  /// Strides in the kernel's (collapsed) index space, in elements.
  std::int64_t s[max_rank] = {};
};

/// The decisions of the elementwise planner.
struct elementwise_layout {
  shape_t shape;                        ///< logical shape of the destination(s)
  std::int64_t numel = 0;               ///< number of elements
  int rank = 0;                         ///< rank of the kernel's index space
  std::int64_t extent[max_rank] = {};   ///< its extents, in elements
  int vector_width = 1;                 ///< elements per vector access (1: scalar path)
  bool index64 = false;                 ///< 64-bit index arithmetic
  std::int64_t work = 0;                ///< work items: vectors, or elements on the scalar path
  std::int64_t tail_start = 0;          ///< first element of the scalar tail (rank-1 vector path)
};

inline std::string operand_text(const operand_layout& o) {
  return std::string(o.dtype) + " " + o.shape.str() + " strides " + o.strides.str();
}

// Largest element offset an operand reaches in the index space (its extent - 1 times strides).
inline std::int64_t max_offset(const operand_layout& o, const elementwise_layout& L) {
  std::int64_t m = 0;
  for (int d = 0; d < L.rank; ++d) m += (L.extent[d] - 1) * o.s[d];
  return m;
}

// A destination may not hold two elements at one address: with strides sorted ascending, each
// stride must exceed the span of all smaller dimensions (sufficient, cheap, and exact for every
// layout slicing and permuting can produce).
inline void check_no_self_overlap(const operand_layout& o, int index) {
  int order[max_rank];
  int n = 0;
  for (int d = 0; d < o.shape.rank(); ++d)
    if (o.shape[d] > 1) order[n++] = d;
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && o.strides[order[j]] < o.strides[order[j - 1]]; --j) {
      const int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
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
  std::int64_t st[max_rank], ext[max_rank];
  int n = 0;
  for (int d = 0; d < shape.rank(); ++d)
    if (shape[d] > 1 && strides[d] > 0) {
      st[n] = strides[d];
      ext[n] = shape[d];
      ++n;
    }
  for (int i = 1; i < n; ++i)  // largest stride first
    for (int j = i; j > 0 && st[j] > st[j - 1]; --j) {
      std::swap(st[j], st[j - 1]);
      std::swap(ext[j], ext[j - 1]);
    }
  return translate_overlaps_from(delta, st, ext, n, 0);
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
      throw shape_error("fusex: destinations of one evaluation must have one shape; destination 0 is " +
                        L.shape.str() + ", destination " + std::to_string(i) + " is " + ops[i].shape.str());
    }
  }
  L.numel = numel(L.shape);

  // Strides of every operand in the destination's index space (0 where broadcast).
  for (int i = 0; i < n_ops; ++i) {
    operand_layout& o = ops[i];
    if (!broadcasts_to(o.shape, L.shape)) {
      throw shape_error("fusex: operand of shape " + o.shape.str() + " cannot be broadcast to the destination shape " +
                        L.shape.str());
    }
    for (int d = 0; d < R; ++d) {
      const int j = d - (R - o.shape.rank());
      o.s[d] = (j < 0 || o.shape[j] != L.shape[d]) ? 0 : o.strides[j];
    }
  }
  if (L.numel == 0) return;  // empty: valid, launches nothing

  // Overlap: destinations must not alias themselves or each other; an input may alias a
  // destination only element for element (in-place update), never shifted or reordered.
  for (int i = 0; i < n_out; ++i) check_no_self_overlap(ops[i], i);
  auto span_end = [&](const operand_layout& o) {
    std::int64_t m = 0;
    for (int d = 0; d < R; ++d) m += (L.shape[d] - 1) * o.s[d];
    return static_cast<const char*>(o.data) + (m + 1) * o.elem_size;
  };
  for (int i = 0; i < n_out; ++i) {
    const char* b0 = static_cast<const char*>(ops[i].data);
    const char* e0 = span_end(ops[i]);
    for (int j = 0; j < n_ops; ++j) {
      if (j == i) continue;
      const char* b1 = static_cast<const char*>(ops[j].data);
      const char* e1 = span_end(ops[j]);
      if (b1 >= e0 || b0 >= e1) continue;
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
        throw invalid_argument("fusex: destination " + std::to_string(i) + " (" + operand_text(ops[i]) + ") overlaps " +
                               (j < n_out ? "destination " + std::to_string(j) : "input " + std::to_string(j - n_out)) +
                               " (" + operand_text(ops[j]) + ") other than element for element; the result would race");
      }
    }
  }

  // Order dimensions by the first destination's strides, outermost first, so that stores are
  // coalesced whatever its layout; drop size-1 dimensions.
  int order[max_rank];
  int n = 0;
  for (int d = 0; d < R; ++d)
    if (L.shape[d] != 1) order[n++] = d;
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && ops[0].s[order[j]] > ops[0].s[order[j - 1]]; --j) {
      const int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
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

  // Vector access: every destination and every non-broadcast input has unit inner stride, is
  // aligned to the vector's size, and its outer strides are whole vectors.
  const int V = vector_width;
  bool vec = V > 1 && (r == 1 || L.extent[r - 1] % V == 0) && L.extent[r - 1] >= V;
  for (int i = 0; vec && i < n_ops; ++i) {
    const operand_layout& o = ops[i];
    const std::int64_t inner = o.s[r - 1];
    if (inner == 0 && i >= n_out) continue;
    if (inner != 1) {
      vec = false;
      break;
    }
    const auto addr = reinterpret_cast<std::uintptr_t>(o.data);
    if (addr % static_cast<std::uintptr_t>(V * o.elem_size) != 0) vec = false;
    for (int d = 0; vec && d < r - 1; ++d)
      if (o.s[d] % V != 0) vec = false;
  }
  if (vec) {
    L.vector_width = V;
    L.work = L.numel / V;
    L.tail_start = L.work * V;
  } else {
    L.vector_width = 1;
    L.work = L.numel;
    L.tail_start = L.numel;
  }

  // 32-bit indices when every count and offset fits (the common case: cheaper index math).
  std::int64_t biggest = L.numel;
  for (int i = 0; i < n_ops; ++i) {
    const std::int64_t m = max_offset(ops[i], L) + 1;
    if (m > biggest) biggest = m;
  }
  L.index64 = biggest >= (std::int64_t{1} << 31);
}

}  // namespace fusex::detail
