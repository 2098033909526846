#pragma once
/// \file
/// The definitions behind plan/reduce_plan.hpp: the row planner.
/// Included by <fusex/plan/reduce_plan.hpp> where FUSEX_DETAIL_HOST_BODIES is set (config.hpp): not in
/// nvcc's device pass, and, under FUSEX_SEPARATE_COMPILATION, only by the fusex_compiled library.

#include <fusex/config.hpp>
#include <fusex/plan/reduce_plan.hpp>

#include <cstdint>
#include <vector>

namespace fusex::detail {

FUSEX_DECL std::int64_t rows_per_index32_piece(const operand_layout* ops, int n_ops, std::int64_t cols,
                                           std::int64_t limit) {
  std::int64_t per = (limit - 1) / (cols > 0 ? cols : 1);
  for (int i = 0; i < n_ops; ++i) {
    const std::int64_t inner = (cols > 0 ? (cols - 1) * ops[i].s[1] : 0) + 1;  // one row's span
    if (inner >= limit) return 0;
    if (ops[i].s[0] > 0 && (limit - 1 - inner) / ops[i].s[0] + 1 < per) per = (limit - 1 - inner) / ops[i].s[0] + 1;
  }
  return per;
}

FUSEX_DECL std::uint64_t assign_cache_roles(const operand_layout* leaves, int n, int& cached_leaves,
                                        const bool* eligible) {
  auto usable = [&](int i) {
    return !leaves[i].computed && leaves[i].dtype != dtype_id::user && (eligible == nullptr || eligible[i]);
  };
  auto same_type = [&](int a, int b) {
    return leaves[a].dtype == leaves[b].dtype && leaves[a].elem_size == leaves[b].elem_size;
  };
  auto same_operand = [&](int a, int b) {
    return same_type(a, b) && leaves[a].data == leaves[b].data && leaves[a].s[0] == leaves[b].s[0] &&
           leaves[a].s[1] == leaves[b].s[1];
  };
  return cache_roles(n, usable, same_type, same_operand, cached_leaves);
}

FUSEX_DECL row_layout plan_rows(operand_layout* ops, const bool* in_reduction, int n_ops,
                            const std::vector<reduction_info>& reductions, int vector_width) {
  row_layout L;
  if (reductions.empty()) {
    L.why_not = "no reduction";
    return L;
  }
  shape_t full = reductions[0].child_shape;
  for (const auto& r : reductions) {
    if (r.child_shape.rank() != full.rank()) {
      L.why_not = "reductions of operands of different ranks";
      return L;
    }
    full = broadcast_shapes(full, r.child_shape, r.name);
  }
  const int R = full.rank();
  if (R == 0) {
    L.why_not = "reduction of a rank-0 operand";
    return L;
  }
  for (const auto& r : reductions) {
    if (r.mask != (1u << (R - 1))) {
      L.why_not = std::string(r.name) + " reduces axes other than the last one alone";
      return L;
    }
  }
  L.full = full;
  L.cols = full[R - 1];
  L.rows = 1;
  for (int d = 0; d < R - 1; ++d) L.rows *= full[d];
  if (L.rows < row_split_rows && L.cols > 65536) {
    L.why_not = "too few rows (" + std::to_string(L.rows) + ") for rows this long (" + std::to_string(L.cols) +
                "): split across blocks instead";
    return L;
  }
  // The destination: the full shape, or the reduced shape (last axis removed or kept as 1).
  const shape_t& ds = ops[0].shape;
  shape_t reduced_keep = full;
  reduced_keep[R - 1] = 1;
  shape_t reduced_drop;
  for (int d = 0; d < R - 1; ++d) reduced_drop.push_back(full[d]);
  shape_t dest_space;
  if (ds == full) {
    L.full_dest = true;
    dest_space = full;
  } else if (ds == reduced_keep || ds == reduced_drop) {
    dest_space = ds;
  } else {
    L.why_not = "destination " + ds.str() + " is neither the full shape " + full.str() + " nor the reduced one";
    return L;
  }
  // Every operand's strides in the full space, folded to {row, column}.
  for (int i = 0; i < n_ops; ++i) {
    operand_layout& o = ops[i];
    std::int64_t s[max_rank] = {};
    const bool inside = i > 0 && in_reduction[i];
    if (inside || L.full_dest) {
      if (!broadcast_strides(o.shape, o.strides, full, s)) {
        L.why_not = "operand " + o.shape.str() + " does not broadcast to " + full.str();
        return L;
      }
    } else {  // destination-space operand of a one-value-per-row evaluation: column stride 0
      std::int64_t t[max_rank] = {};
      if (!broadcast_strides(o.shape, o.strides, dest_space, t)) {
        L.why_not = "operand " + o.shape.str() + " does not broadcast to " + dest_space.str();
        return L;
      }
      for (int d = 0; d < R - 1; ++d) s[d] = t[d];
      s[R - 1] = 0;
    }
    std::int64_t rs = 0;
    if (!row_stride_of(s, full, rs)) {
      L.why_not = "operand " + o.shape.str() + " with strides " + o.strides.str() + " is not one row dimension";
      return L;
    }
    const std::int64_t cs = full[R - 1] == 1 ? 0 : s[R - 1];
    for (int d = 0; d < max_rank; ++d) o.s[d] = 0;
    o.s[0] = rs;
    o.s[1] = cs;
  }
  // Vector access along the row, as for elementwise kernels.
  const int V = vector_width;
  bool vec = V > 1 && L.cols % V == 0;
  for (int i = 0; vec && i < n_ops; ++i) {
    const operand_layout& o = ops[i];
    if (i == 0 && !L.full_dest) continue;  // one scalar store per row
    if ((o.s[1] == 0 || o.computed) && i > 0) continue;
    if (!vector_ok(o, V, o.s[1], o.s, 1)) vec = false;
  }
  L.vector_width = vec ? V : 1;
  const std::int64_t row_col[2] = {L.rows, L.cols};
  L.index64 = index_reach(L.rows * (L.cols > 0 ? L.cols : 1), row_col, 2, ops, n_ops) >= index32_limit;
  if (L.index64) {
    // Launched in pieces of whole rows, each within 32-bit indices (the kernels exist in 32-bit
    // form only); a row that does not fit alone goes to rule 2.
    const std::int64_t most = rows_per_index32_piece(ops, n_ops, L.cols);
    if (most < 1) {
      L.why_not =
          "one row spans 2^31 elements or more (the row kernel runs in pieces of whole rows with 32-bit indices)";
      return L;
    }
    const std::int64_t pieces = (L.rows + most - 1) / most;
    L.rows_per_piece = (L.rows + pieces - 1) / pieces;  // as even as whole rows allow
  }
  const int chunks = row_cache_chunks(L.vector_width);
  const int vpt = row_tuning_state().vectors_per_thread;
  L.tpr = threads_per_row(L.cols / L.vector_width, vpt > 0 && vpt < chunks ? vpt : chunks);
  if (vpt == 0) {
    const std::int64_t rows_per_block = row_max_threads / L.tpr;
    if ((L.rows + rows_per_block - 1) / rows_per_block < row_small_grid_blocks)
      L.tpr = threads_per_row(L.cols / L.vector_width, 1);
  }
  L.block = row_max_threads;  // at most: the launch gives few rows fewer rows per block
  L.rows_per_block = L.block / L.tpr;
  // Short enough rows are read once into registers, whatever the number of passes; longer ones
  // are re-read by each pass (the later reads mostly from L2).
  // The register budget counts one vector set per distinct leaf type, as the kernel allocates.
  int cache_bytes = 0;
  for (int i = 1; i < n_ops; ++i) {
    if (ops[i].computed) continue;  // never in registers
    bool seen = false;
    for (int j = 1; j < i && !seen; ++j) seen = !ops[j].computed && ops[i].dtype == ops[j].dtype;
    // The cache holds the compute type (half and bfloat16 as float), as the kernel allocates it.
    const int bytes = ops[i].compute_size > ops[i].elem_size ? ops[i].compute_size : ops[i].elem_size;
    if (!seen) cache_bytes += bytes * chunks * L.vector_width;
  }
  // cols > 0: the cached path's loads are branch-free (a chunk outside the row reads the first
  // vector of row 0 instead), so the row must have one.
  L.cached = row_tuning_state().cache && L.cols > 0 && L.vector_width > 1 && cache_bytes <= row_cache_budget_bytes &&
             L.cols / L.vector_width <= std::int64_t{chunks} * L.tpr;
  if (L.cached) {
    bool eligible[64] = {};
    for (int i = 1; i < n_ops && i <= 64; ++i) eligible[i - 1] = L.full_dest || in_reduction[i];
    L.cache_modes = assign_cache_roles(ops + 1, n_ops - 1, L.cached_leaves, eligible);
    // A full-size operand inside a reduction that is not in registers (another operand of a
    // cached type, as the residual of layer_norm(x + residual)) would stream from memory in
    // every pass and the epilogue, one chunk at a time between the register work: the streaming
    // re-read loop is faster (measured on the H200: layer_norm(x + residual) at [16384, 4096]
    // fp32, 0.61 of the copy cached against 0.78-0.80 re-read). Broadcast operands (a [cols]
    // vector, a [rows, 1] scale, a 0-d tensor) are a few cached lines: they keep the cache, and
    // so do computed operands (index leaves, random numbers), which read no memory.
    for (int i = 0; i < n_ops - 1; ++i) {
      if (!in_reduction[i + 1] || (i < 32 && ((L.cache_modes >> (2 * i)) & 3u) != 0)) continue;
      if (ops[i + 1].computed || ops[i + 1].s[0] == 0 || ops[i + 1].s[1] == 0) continue;
      L.cached = false;
      L.cache_modes = 0;
      L.cached_leaves = 0;
      L.reread_why = "an operand inside a reduction would read memory on every pass";
      break;
    }
  }
  if (L.cached) {
    // Leaves of the epilogue (outside every reduction) that read memory are read only after the
    // passes: their lines are requested while the row loads, so that read does not cost a second
    // memory round trip after the reductions (at small shapes the kernel's time is such round
    // trips). Leaves inside reductions are read by the first pass right after the load anyway;
    // a one-value-per-row epilogue reads one element per row, not worth a request per thread.
    for (int i = 0; row_tuning_state().prefetch && L.full_dest && i < n_ops - 1 && i < 32; ++i) {
      if (((L.cache_modes >> (2 * i)) & 3u) != 0 || in_reduction[i + 1] || ops[i + 1].computed) continue;
      L.cache_modes |= std::uint64_t{leaf_prefetch} << (2 * i);
      ++L.prefetched_leaves;
    }
  }
  L.ok = true;
  return L;
}

}  // namespace fusex::detail
