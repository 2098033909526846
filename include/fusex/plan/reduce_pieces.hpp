#pragma once
/// \file
/// Pieces of a generic reduction too large for 32-bit index arithmetic. The reduction kernels
/// exist only with 32-bit indices (a 64-bit twin of each would double the kernels every
/// reduction instantiates); a reduction whose element count or some operand's offsets reach
/// 2^31 runs as several launches over boxes of its coordinate space that each fit.
///
/// The coordinate space is in position order: the nk kept dimensions, then the nr reduced ones
/// (each group outer to inner, as the generic kernels decode it). A box fixes the positions
/// before one "level" position, takes a range of the level, and keeps every later position
/// whole, so its outputs (kept part) and each output's reduced elements (reduced part) are
/// contiguous ranges of the row-major linear indices (strides are never negative): outputs are written at an offset, and an
/// argmin/argmax's element index is the piece's first plus its own.
///  - Whole reductions (preferred): the reduced part is whole, the kept part is cut.
///  - Otherwise (one output alone does not fit): each piece has one output and part of its
///    reduced elements; the pieces leave partial accumulators that one finishing launch combines.

#include <fusex/config.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/error.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <cstdint>
#include <vector>

namespace fusex::detail {

/// A box of a reduction's coordinate space (positions: kept, then reduced).
struct reduce_piece {
  std::int64_t start[max_rank] = {};   ///< first coordinate of each position
  std::int64_t extent[max_rank] = {};  ///< extent of each position in the box
  std::int64_t k_first = 0;            ///< its outputs: [k_first, k_first + k_count) of row-major
  std::int64_t k_count = 0;
  std::int64_t n_first = 0;  ///< its reduced elements of each output, likewise
  std::int64_t n_count = 0;
};

/// How a reduction is cut into pieces (see the file comment).
struct reduce_piece_plan {
  int nk = 0, nr = 0;
  std::int64_t ext[max_rank] = {};  ///< extents by position
  bool split_reduced = false;       ///< one output per piece, its reduced elements cut
  int level = 0;                    ///< the position cut into ranges
  std::int64_t chunk = 1;           ///< the range length at `level`
};

// The outermost position of [a, b) to cut into ranges, and the longest range, so that a box (the
// positions before it fixed, those after it whole) together with `rest_span` (per operand) and
// `rest_count` elements of the other positions stays below `limit` in span and count. False where
// not even single coordinates fit.
inline bool cut_section(const operand_layout* ops, int n_ops, const std::int64_t* ext, int a, int b,
                        const std::int64_t* rest_span, std::int64_t rest_count, std::int64_t limit, int& level,
                        std::int64_t& chunk) {
  if (a == b) {
    level = a;
    chunk = 1;
    if (rest_count >= limit) return false;
    for (int i = 0; i < n_ops; ++i)
      if (rest_span[i] >= limit) return false;
    return true;
  }
  for (int j = a; j < b; ++j) {
    std::int64_t count = rest_count;
    bool ok = count < limit;
    for (int q = j + 1; q < b && ok; ++q) {
      if (ext[q] != 0 && count > (limit - 1) / ext[q]) ok = false;
      else count *= ext[q];
    }
    if (!ok) continue;
    std::int64_t c = ext[j] > 0 ? ext[j] : 1;
    const std::int64_t per = count > 0 ? count : 1;  // (an empty box still counts as one launch's worth)
    if (c > (limit - 1) / per) c = (limit - 1) / per;
    for (int i = 0; i < n_ops && c >= 1; ++i) {
      const std::int64_t inner = span_of(ops[i].s, ext, j + 1, b) + rest_span[i];
      if (inner >= limit) {
        c = 0;
        break;
      }
      const std::int64_t st = ops[i].s[j];
      if (st != 0 && c - 1 > (limit - 1 - inner) / st) c = (limit - 1 - inner) / st + 1;
    }
    if (c >= 1) {
      level = j;
      chunk = c;
      return true;
    }
  }
  return false;
}

/// Cuts a reduction with extents `ext` (positions: nk kept, then nr reduced) over the operands
/// `ops` (strides by position) into pieces whose element count and every operand's offsets stay
/// below `limit`.
inline reduce_piece_plan plan_reduce_pieces(int nk, int nr, const std::int64_t* ext, const operand_layout* ops,
                                            int n_ops, std::int64_t limit = index32_limit) {
  reduce_piece_plan p;
  p.nk = nk;
  p.nr = nr;
  for (int q = 0; q < nk + nr; ++q) p.ext[q] = ext[q];
  std::vector<std::int64_t> rest(static_cast<std::size_t>(n_ops > 0 ? n_ops : 1), 0);
  std::int64_t n_count = 1;
  bool whole = true;
  for (int q = nk; q < nk + nr; ++q) {
    if (ext[q] != 0 && n_count > (limit - 1) / ext[q]) whole = false;
    else n_count *= ext[q];
  }
  for (int i = 0; i < n_ops && whole; ++i) {
    rest[static_cast<std::size_t>(i)] = span_of(ops[i].s, ext, nk, nk + nr);
    whole = rest[static_cast<std::size_t>(i)] < limit;
  }
  if (whole && cut_section(ops, n_ops, ext, 0, nk, rest.data(), n_count, limit, p.level, p.chunk)) return p;
  for (int i = 0; i < n_ops; ++i) rest[static_cast<std::size_t>(i)] = 0;
  p.split_reduced = true;
  if (!cut_section(ops, n_ops, ext, nk, nk + nr, rest.data(), 1, limit, p.level, p.chunk))
    throw error("fusex: internal: no 32-bit piece fits a reduction");  // a single element always fits
  return p;
}

// Calls f(start, extent, linear_first, count) for the boxes of positions [a, b) cut at `level`
// into ranges of `chunk` (positions before it fixed, after it whole), in row-major order. An
// empty section is one box of one element.
template <class F>
void for_each_section_box(const std::int64_t* ext, int a, int b, int level, std::int64_t chunk, F&& f) {
  std::int64_t start[max_rank] = {}, extent[max_rank] = {};
  if (a == b) {
    f(start, extent, std::int64_t{0}, std::int64_t{1});
    return;
  }
  std::int64_t inner = 1;  // elements of the whole positions after the level
  for (int q = level + 1; q < b; ++q) {
    extent[q] = ext[q];
    inner *= ext[q];
  }
  for (int q = a; q < level; ++q) extent[q] = 1;
  for (int q = a; q <= level; ++q) {
    if (ext[q] == 0) {  // no elements: one empty box (an empty reduction still writes its outputs)
      for (int d = a; d < b; ++d) extent[d] = ext[d];
      f(start, extent, std::int64_t{0}, std::int64_t{0});
      return;
    }
  }
  for (;;) {
    std::int64_t outer = 0;  // linear index of the fixed positions
    for (int q = a; q < level; ++q) outer = outer * ext[q] + start[q];
    for (std::int64_t r = 0; r < ext[level]; r += chunk) {
      start[level] = r;
      extent[level] = chunk < ext[level] - r ? chunk : ext[level] - r;
      f(start, extent, (outer * ext[level] + r) * inner, extent[level] * inner);
    }
    start[level] = 0;
    int q = level - 1;  // odometer over the fixed positions
    while (q >= a && ++start[q] == ext[q]) start[q--] = 0;
    if (q < a) return;
  }
}

/// Calls f(const reduce_piece&) for the pieces of a plan: in row-major order of outputs, and for
/// a split_reduced plan the pieces of one output consecutively in order of their reduced elements.
template <class F>
void for_each_reduce_piece(const reduce_piece_plan& p, F&& f) {
  const int end = p.nk + p.nr;
  // Kept section: cut at the level (whole reductions) or every output alone.
  const int k_level = p.split_reduced ? (p.nk > 0 ? p.nk - 1 : 0) : p.level;
  const std::int64_t k_chunk = p.split_reduced ? 1 : p.chunk;
  // Reduced section: whole, or cut at the level.
  const int n_level = p.split_reduced ? p.level : p.nk;
  const std::int64_t n_chunk = p.split_reduced ? p.chunk : (p.nr > 0 ? p.ext[p.nk] : 1);
  reduce_piece pc;
  for_each_section_box(p.ext, 0, p.nk, k_level, k_chunk,
                       [&](const std::int64_t* ks, const std::int64_t* ke, std::int64_t kf, std::int64_t kc) {
                         for (int q = 0; q < p.nk; ++q) {
                           pc.start[q] = ks[q];
                           pc.extent[q] = ke[q];
                         }
                         pc.k_first = kf;
                         pc.k_count = kc;
                         for_each_section_box(p.ext, p.nk, end, n_level, n_chunk,
                                              [&](const std::int64_t* ns, const std::int64_t* ne, std::int64_t nf,
                                                  std::int64_t nc) {
                                                for (int q = p.nk; q < end; ++q) {
                                                  pc.start[q] = ns[q];
                                                  pc.extent[q] = ne[q];
                                                }
                                                pc.n_first = nf;
                                                pc.n_count = nc;
                                                f(static_cast<const reduce_piece&>(pc));
                                              });
                       });
}

/// Pieces per output of a split_reduced plan (the partial accumulators' slots to keep).
inline std::int64_t pieces_per_output(const reduce_piece_plan& p) {
  std::int64_t n = 1;
  for (int q = p.nk; q < p.level; ++q) n *= p.ext[q];
  return n * ((p.ext[p.level] + p.chunk - 1) / p.chunk);
}

}  // namespace fusex::detail
