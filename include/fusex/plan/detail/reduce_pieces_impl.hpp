#pragma once
/// \file
/// The definitions behind plan/reduce_pieces.hpp: pieces of reductions past 32-bit indices.
/// Included by <fusex/plan/reduce_pieces.hpp> where FUSEX_DETAIL_HOST_BODIES is set (config.hpp): not in
/// nvcc's device pass, and, under FUSEX_SEPARATE_COMPILATION, only by the fusex_compiled library.

#include <fusex/config.hpp>
#include <fusex/plan/reduce_pieces.hpp>

#include <cstdint>
#include <vector>

namespace fusex::detail {

FUSEX_DECL std::int64_t section_box_count(const std::int64_t* ext, int a, int b, int level, std::int64_t chunk) {
  if (a == b) return 1;
  std::int64_t n = 1;
  for (int q = a; q < level; ++q) {
    if (ext[q] == 0) return 1;
    n *= ext[q];
  }
  return ext[level] == 0 ? 1 : n * ((ext[level] + chunk - 1) / chunk);
}

FUSEX_DECL bool cut_section(const operand_layout* ops, int n_ops, const std::int64_t* ext, int a, int b,
                        const std::int64_t* rest_span, std::int64_t rest_count, std::int64_t own_count,
                        std::int64_t limit, int& level, std::int64_t& chunk) {
  for (int i = 0; i < n_ops; ++i)
    if (rest_span[i] >= limit) return false;
  if (rest_count >= limit) return false;
  if (a == b) {
    level = a;
    chunk = 1;
    return true;
  }
  for (int j = a; j < b; ++j) {
    std::int64_t own = 1;  // elements of the whole positions after the level
    bool ok = true;
    for (int q = j + 1; q < b && ok; ++q) {
      if (ext[q] != 0 && own > own_count / ext[q]) ok = false;
      else own *= ext[q];
    }
    if (!ok) continue;
    const std::int64_t per = own > 0 ? own : 1;  // (an empty box still counts as one element's worth)
    const std::int64_t whole = per * (rest_count > 0 ? rest_count : 1);
    if (whole >= limit) continue;
    std::int64_t c = ext[j] > 0 ? ext[j] : 1;
    if (c > (limit - 1) / whole) c = (limit - 1) / whole;
    if (c > own_count / per) c = own_count / per;
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

FUSEX_DECL std::vector<reduce_box> section_boxes(const std::int64_t* ext, int a, int b, int level, std::int64_t chunk) {
  std::vector<reduce_box> out;
  reduce_box box;
  if (a == b) {
    box.count = 1;
    out.push_back(box);
    return out;
  }
  std::int64_t inner = 1;
  for (int q = level + 1; q < b; ++q) {
    box.extent[q] = ext[q];
    inner *= ext[q];
  }
  for (int q = a; q < level; ++q) box.extent[q] = 1;
  for (int q = a; q <= level; ++q) {
    if (ext[q] == 0) {
      for (int d = a; d < b; ++d) box.extent[d] = ext[d];
      out.push_back(box);
      return out;
    }
  }
  for (;;) {
    std::int64_t outer = 0;  // linear index of the fixed positions
    for (int q = a; q < level; ++q) outer = outer * ext[q] + box.start[q];
    for (std::int64_t r = 0; r < ext[level]; r += chunk) {
      box.start[level] = r;
      box.extent[level] = chunk < ext[level] - r ? chunk : ext[level] - r;
      box.first = (outer * ext[level] + r) * inner;
      box.count = box.extent[level] * inner;
      out.push_back(box);
    }
    box.start[level] = 0;
    int q = level - 1;  // odometer over the fixed positions
    while (q >= a && ++box.start[q] == ext[q]) box.start[q--] = 0;
    if (q < a) return out;
  }
}

FUSEX_DECL reduce_piece_plan plan_reduce_pieces(int nk, int nr, const std::int64_t* ext, const operand_layout* ops,
                                            int n_ops, std::int64_t max_outputs, std::int64_t limit) {
  reduce_piece_plan p;
  p.nk = nk;
  p.nr = nr;
  const int end = nk + nr;
  std::vector<std::int64_t> rest(static_cast<std::size_t>(n_ops > 0 ? n_ops : 1), 0);
  int level = 0;
  std::int64_t chunk = 1;
  // Whole reductions: the reduced group's span and count beside a cut of the kept group.
  std::int64_t n_count = 1;
  bool whole = true;
  for (int q = nk; q < end; ++q) {
    if (ext[q] != 0 && n_count > (limit - 1) / ext[q]) whole = false;
    else n_count *= ext[q];
  }
  for (int i = 0; i < n_ops && whole; ++i) rest[static_cast<std::size_t>(i)] = span_of(ops[i].s, ext, nk, end);
  if (whole && cut_section(ops, n_ops, ext, 0, nk, rest.data(), n_count, limit, limit, level, chunk)) {
    p.pieces = section_box_count(ext, 0, nk, level, chunk);
    if (p.too_many()) return p;
    p.kept = section_boxes(ext, 0, nk, level, chunk);
    p.reduced = section_boxes(ext, nk, end, nk, nr > 0 ? ext[nk] : 1);
    return p;
  }
  // The reduced group cut (as if for one output), then the kept group beside its largest box.
  for (auto& r : rest) r = 0;
  if (!cut_section(ops, n_ops, ext, nk, end, rest.data(), 1, limit, limit, level, chunk))
    throw error("fusex: internal: no 32-bit piece fits a reduction");  // a single element always fits
  const std::int64_t n_boxes = section_box_count(ext, nk, end, level, chunk);
  if (n_boxes > max_reduce_pieces) {
    p.pieces = n_boxes;
    return p;
  }
  p.reduced = section_boxes(ext, nk, end, level, chunk);
  const reduce_box& big = p.reduced.front();  // the first box is a largest one
  std::int64_t box_ext[max_rank] = {};
  for (int q = nk; q < end; ++q) box_ext[q] = big.extent[q];
  for (int i = 0; i < n_ops; ++i) rest[static_cast<std::size_t>(i)] = span_of(ops[i].s, box_ext, nk, end);
  if (!cut_section(ops, n_ops, ext, 0, nk, rest.data(), big.count, max_outputs > 0 ? max_outputs : 1, limit, level,
                   chunk))
    throw error("fusex: internal: no 32-bit piece fits a reduction");  // the reduced cut left room for one output
  const std::int64_t k_boxes = section_box_count(ext, 0, nk, level, chunk);
  p.pieces = k_boxes * n_boxes;  // at most the reduction's element count
  if (p.too_many()) {
    p.reduced.clear();
    return p;
  }
  p.kept = section_boxes(ext, 0, nk, level, chunk);
  return p;
}

}  // namespace fusex::detail
