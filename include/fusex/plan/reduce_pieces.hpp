#pragma once
/// \file
/// Pieces of a generic reduction too large for 32-bit index arithmetic. The reduction kernels
/// exist only with 32-bit indices (a 64-bit twin of each would double the kernels every
/// reduction instantiates); a reduction whose element count or some operand's offsets reach
/// 2^31 runs as several launches over boxes of its coordinate space that each fit.
///
/// The coordinate space is in position order: the nk kept dimensions, then the nr reduced ones
/// (each group outer to inner, as the generic kernels decode it). Each group is cut on its own:
/// the positions before a "level" are fixed, the level is taken in ranges, the later positions
/// whole, so a box's outputs (kept part) and each output's reduced elements (reduced part) are
/// contiguous ranges of the row-major linear indices (strides are never negative): outputs are
/// written at an offset, and an argmin/argmax's element index is the box's first plus its own.
///  - Whole reductions (preferred): the reduced group is whole, the kept group is cut.
///  - Otherwise the reduced group is cut too (its boxes as large as fit with one output), and the
///    kept group as far as the rest allows, at most `max_outputs` per box: for each kept box, the
///    reduced boxes run in order, each folded into a running accumulator per output, and the last
///    one finishes with the whole count. (An outer reduced dimension with a stride of 2^31
///    elements or more gives reduced boxes of one coordinate of it, with many outputs each.)

#include <fusex/config.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/error.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <cstdint>
#include <vector>

namespace fusex::detail {

/// A box of one group (kept or reduced) of a reduction's positions.
struct reduce_box {
  std::int64_t start[max_rank] = {};   ///< first coordinate of each position of the group
  std::int64_t extent[max_rank] = {};  ///< extent of each position of the group in the box
  std::int64_t first = 0;              ///< its linear indices in the group: [first, first + count)
  std::int64_t count = 0;
};

/// Pieces beyond which a reduction is refused rather than launched piece by piece: boxes fix the
/// positions before their level, so a layout whose large strides sit on inner positions (a
/// permuted view) can need a launch per coordinate of the outer ones.
inline constexpr std::int64_t max_reduce_pieces = std::int64_t{1} << 16;

/// How a reduction is cut into pieces (see the file comment): kept boxes times reduced boxes.
struct reduce_piece_plan {
  int nk = 0, nr = 0;
  std::vector<reduce_box> kept, reduced;  ///< the boxes, in row-major order
  std::int64_t pieces = 0;                ///< kept boxes times reduced boxes
  bool split_reduced() const noexcept { return reduced.size() > 1; }
  /// More than max_reduce_pieces: no boxes were built (the caller refuses the reduction).
  bool too_many() const noexcept { return pieces > max_reduce_pieces; }
};

// How many boxes section_boxes would build (without building them; at most the group's element
// count, so no overflow).
FUSEX_DECL std::int64_t section_box_count(const std::int64_t* ext, int a, int b, int level, std::int64_t chunk);

// The outermost position of [a, b) to cut into ranges, and the longest range, so that a box (the
// positions before it fixed, those after it whole) together with `rest_span` (per operand) and
// `rest_count` elements of the other group stays below `limit` in span and count, and has at most
// `own_count` elements of its own. False where not even single coordinates fit.
FUSEX_DECL bool cut_section(const operand_layout* ops, int n_ops, const std::int64_t* ext, int a, int b,
                        const std::int64_t* rest_span, std::int64_t rest_count, std::int64_t own_count,
                        std::int64_t limit, int& level, std::int64_t& chunk);

/// The boxes of positions [a, b) cut at `level` into ranges of `chunk` (positions before it
/// fixed, after it whole), in row-major order. An empty group is one box of one element; a group
/// with an empty extent one box of no elements.
FUSEX_DECL std::vector<reduce_box> section_boxes(const std::int64_t* ext, int a, int b, int level, std::int64_t chunk);

/// Cuts a reduction with extents `ext` (positions: nk kept, then nr reduced) over the operands
/// `ops` (strides by position) into pieces whose element count and every operand's offsets stay
/// below `limit`; where the reduced group is cut, a kept box has at most `max_outputs` outputs.
FUSEX_DECL reduce_piece_plan plan_reduce_pieces(int nk, int nr, const std::int64_t* ext, const operand_layout* ops,
                                            int n_ops, std::int64_t max_outputs, std::int64_t limit = index32_limit);

}  // namespace fusex::detail

// The definitions, for host compilers only (config.hpp: FUSEX_DETAIL_HOST_BODIES).
#if FUSEX_DETAIL_HOST_BODIES
#include <fusex/plan/detail/reduce_pieces_impl.hpp>
#endif
