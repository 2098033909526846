#pragma once
/// \file
/// The definitions behind plan/elementwise_plan.hpp: the elementwise planner, its 32-bit pieces and overlap checks.
/// Included by <fusex/plan/elementwise_plan.hpp> where FUSEX_DETAIL_HOST_BODIES is set (config.hpp): not in
/// nvcc's device pass, and, under FUSEX_SEPARATE_COMPILATION, only by the fusex_compiled library.

#include <fusex/config.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace fusex::detail {

FUSEX_DECL std::string operand_text(const operand_layout& o) {
  if (o.computed) {
    // An index leaf: stride 1 along its axis and 0 elsewhere (iota), or row-major (linear_index).
    int axis = 0, nonzero = 0;
    for (int d = 0; d < o.strides.rank(); ++d)
      if (o.strides[d] != 0) {
        axis = d;
        ++nonzero;
      }
    const bool along_axis = nonzero == 0 || (nonzero == 1 && o.strides[axis] == 1);
    return (along_axis ? "index along axis " + std::to_string(axis) : std::string("linear index")) + " of " +
           o.shape.str() + " (int64, computed)";
  }
  return std::string(dtype_name(o.dtype)) + " " + o.shape.str() + " strides " + o.strides.str();
}

FUSEX_DECL std::int64_t index_reach(std::int64_t count, const std::int64_t* ext, int rank, const operand_layout* ops,
                                int n_ops) {
  std::int64_t biggest = count;
  for (int i = 0; i < n_ops; ++i) {
    const std::int64_t m = span_of(ops[i].s, ext, 0, rank) + 1;
    if (m > biggest) biggest = m;
  }
  return biggest;
}

FUSEX_DECL invalid_argument overlap_error(const std::string& dest, const operand_layout& d, const std::string& other,
                                      const operand_layout& o) {
  return invalid_argument("fusex: " + dest + " (" + operand_text(d) + ") overlaps " + other + " (" + operand_text(o) +
                          ") other than element for element; the result would race");
}

FUSEX_DECL void check_no_self_overlap(const operand_layout& o, int index) {
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

FUSEX_DECL bool translate_overlaps_from(std::int64_t rem, const std::int64_t* st, const std::int64_t* ext, int n, int k) {
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

FUSEX_DECL bool translate_overlaps(std::int64_t delta, const std::int64_t* strides, const shape_t& shape) {
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

FUSEX_DECL void set_vector_path(elementwise_layout& L, const operand_layout* ops, int n_out, int n_ops, int V) {
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

FUSEX_DECL void plan_elementwise(operand_layout* ops, int n_out, int n_ops, int vector_width, elementwise_layout& L) {
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

FUSEX_DECL std::vector<index32_piece> split_index32(const elementwise_layout& L, const operand_layout* ops, int n_ops,
                                                std::int64_t limit) {
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
