#pragma once
/// \file
/// Planning for expressions that contain reductions.
///
/// Rule 1 (one kernel): when every reduction reduces the last axis of an operand of one common
/// "full" shape [rows..., cols], and the destination is either that full shape (an epilogue over
/// whole rows: softmax, layer_norm) or the reduced shape (one value per row), and every operand
/// steps through the leading dimensions as one "row" dimension, the whole expression is one row
/// kernel: a group of threads per row makes one pass over the row per nesting level of reductions
/// (all reductions of a level share it) and then writes the epilogue; rows of up to 4096
/// vectorised columns (8192 at vector width 8: 2-byte operands) are read once into registers and
/// every pass works from there. Otherwise (rule 2), each reduction is computed by the generic
/// reduction kernels
/// into a temporary from the default memory resource, and the rest is one elementwise kernel.

#include <fusex/config.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/plan/cache_roles.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace fusex::detail {

/// The row kernel's block (and its largest group per row). 256 threads leave each thread enough
/// registers to keep its share of a row (row_cache_chunks vectors per leaf) on chip.
inline constexpr int row_max_threads = 256;
/// Vectors of a row each thread keeps in registers when the row is short enough (the cached
/// path): about 16 elements per thread (4 float4 vectors; at most 4 vectors), held as values of
/// the compute type beside the passes' state. At vector width 8 (the widest operand, destination
/// included, is 2 bytes) 4 vectors, 32 elements: the same 64 bytes per thread in flight as float
/// rows and half as many threads per row, so a 4096-column row is 128 threads and its group
/// reductions (two or three in softmax and layer_norm) are shared by twice the bytes. With
/// row_max_threads threads per row that caches rows of up to 4096 columns (8192 at width 8).
FUSEX_HD constexpr int row_cache_chunks(int vector_width) {
  const int c = (vector_width == 8 ? 32 : 16) / (vector_width > 0 ? vector_width : 1);
  return c > 4 ? 4 : (c < 1 ? 1 : c);
}

/// Register budget of the cached row, in bytes per thread: one vector set per distinct leaf type
/// (each occurrence of the owning operand shares it): a float32 set is 64 bytes (16 elements), a
/// bfloat16 one 128 (32 held as float), so only expressions over many leaf types exceed it; they
/// re-read their rows per pass instead of spilling registers.
inline constexpr int row_cache_budget_bytes = 384;

/// Fewer rows than this (about one per SM of a large GPU), each longer than 65536 columns, leave
/// most of the GPU idle in the row kernel (one block per row): rule 2 splits each row across
/// blocks instead (measured on the H200: softmax over [64, 2^20] ran at 9% of the copy's
/// bandwidth in the row kernel).
inline constexpr std::int64_t row_split_rows = 128;

/// A plan that would launch fewer blocks than this (about one per SM of a large GPU) at
/// row_cache_chunks vectors per thread is latency-bound: its rows get one vector per thread instead (more threads
/// per row, each holding less), see row_tuning::vectors_per_thread.
inline constexpr std::int64_t row_small_grid_blocks = 128;

/// Run-time switches of the row kernel, for benchmarks that compare its strategies in one run.
struct row_tuning {
  bool cache = true;  ///< use the register-cached path where the row fits (else re-read per pass)
  /// In the cached path, request the lines of the epilogue's leaves that read memory into L1
  /// while the row loads (their reads come after the passes). Off by default: on the H200 it
  /// gained nothing at [16, 256] and cost 10% on a [16384, 4096] fp32 rms_norm (bench_reduce).
  bool prefetch = false;
  /// Fewer full blocks than SMs: fewer rows per block (down to one) so the rows spread out. Off by
  /// default: measured on the H200 at [16, 256] (layer_norm, rms_norm) within -1% to +3.5% of
  /// the default across runs, too little to change the launch shape of every small reduction.
  bool spread_small = false;
  /// Vectors of the row per thread the group is sized for. 0: automatic, one vector per thread
  /// when the plan would otherwise launch fewer than row_small_grid_blocks blocks (few short rows:
  /// the kernel is latency-bound, and more threads each holding less finish sooner; measured on
  /// the H200 at [16, 256]: 7-13% less time per kernel), else row_cache_chunks (about 16
  /// elements; 32 at vector width 8). n > 0: n (at most row_cache_chunks).
  int vectors_per_thread = 0;
  /// The static path (row_static_path) where it applies; off: the generic cached path, whose
  /// roles are tested at run time (bench_reduce compares them).
  bool static_path = true;
};
inline row_tuning& row_tuning_state() {
  static row_tuning t;
  return t;
}

/// Threads per row when a row has `work` vectors: about `chunks` vectors per thread, a power of
/// two from 1 to row_max_threads (one block). Short rows take part of a warp: each thread holds
/// more of its row and the group's reduction needs fewer shuffle rounds (softmax over [65536,
/// 128] fp32: 8 threads of 16 elements rather than a warp of 4 each).
inline int threads_per_row(std::int64_t work, int chunks) {
  int t = 1;
  while (t < row_max_threads && std::int64_t{t} * chunks < work) t *= 2;
  return t;
}

/// The most rows of `cols` columns (operand strides {row, column} in `s[0]`, `s[1]`) that one
/// launch with 32-bit indices covers: its element count and every operand's offsets below
/// `limit`. 0 when a single row does not fit.
FUSEX_DECL std::int64_t rows_per_index32_piece(const operand_layout* ops, int n_ops, std::int64_t cols,
                                           std::int64_t limit = index32_limit);

/// What the row planner decided.
struct row_layout {
  bool ok = false;
  std::string why_not;     ///< when !ok: why the one-kernel rule does not apply
  shape_t full;            ///< [rows..., cols]
  bool full_dest = false;  ///< the destination has the full shape (else one value per row)
  std::int64_t rows = 0, cols = 0;
  int vector_width = 1;
  /// Too large for 32-bit indices: launched in pieces of rows_per_piece rows, each of which fits.
  bool index64 = false;
  std::int64_t rows_per_piece = 0;  ///< with index64
  int tpr = 32, rows_per_block = 1, block = 32;
  bool cached = false;  ///< each thread keeps its vectors of the row in registers: one read of the row
  /// Cached path: each leaf's role (2 bits per leaf in visit order: 0 reads memory, 1 reads its
  /// type's registers, 2 fills them, 3 reads memory and prefetches its line into L1 at the
  /// fill), see assign_cache_roles.
  std::uint64_t cache_modes = 0;
  int cached_leaves = 0;      ///< leaves answered from registers
  int prefetched_leaves = 0;  ///< leaves read from memory whose lines are requested at the fill
  /// Why a row that fits the registers is re-read per pass (null: it is not, or it does not fit).
  const char* reread_why = nullptr;
};

/// The register cache's roles for the real operands (see cache_roles): two leaves are the same
/// operand when their data and strides are. `eligible` (optional, one flag per leaf): leaves that
/// may use the registers at all (a one-value-per-row epilogue reads its leaves from memory, so
/// only leaves inside reductions count there).
FUSEX_DECL std::uint64_t assign_cache_roles(const operand_layout* leaves, int n, int& cached_leaves,
                                        const bool* eligible = nullptr);

/// The row kernel's static path: the cached row whose leaf roles are `predicted` (what the
/// expression's structure predicts, predicted_cache_modes) and none of whose leaves (ops[1..n))
/// broadcasts along the row. The kernel then runs a copy of the cached path with both as
/// compile-time facts: no per-leaf role or broadcast tests in its hottest code.
inline bool row_static_path(const row_layout& L, const operand_layout* ops, int n_ops, std::uint64_t predicted) {
  if (!row_tuning_state().static_path || !L.cached || L.cache_modes != predicted) return false;
  for (int i = 1; i < n_ops; ++i)
    if (ops[i].s[1] == 0 && !ops[i].computed) return false;  // (computed leaves never test it)
  return true;
}

// One reduction as the planner sees it.
struct reduction_info {
  shape_t child_shape;
  std::uint32_t mask;
  const char* name;
};

// Folds the leading dimensions [0, R-1) of `full` into one row stride, if the operand steps
// through them as one dimension.
inline bool row_stride_of(const std::int64_t* s, const shape_t& full, std::int64_t& row_stride) {
  return fold_dims(s, full.begin(), 0, full.rank() - 1, row_stride);
}

/// Applies rule 1. `ops[0]` is the destination; `ops[1..n)` the leaves, with `in_reduction[i]`
/// telling which index space each lives in. On success, `ops[i].s` holds {row stride, column
/// stride}.
FUSEX_DECL row_layout plan_rows(operand_layout* ops, const bool* in_reduction, int n_ops,
                            const std::vector<reduction_info>& reductions, int vector_width);

}  // namespace fusex::detail

// The definitions, for host compilers only (config.hpp: FUSEX_DETAIL_HOST_BODIES).
#if FUSEX_DETAIL_HOST_BODIES
#include <fusex/plan/detail/reduce_plan_impl.hpp>
#endif
