#pragma once
/// \file
/// The host side of the generic reductions (a reduction the row kernel does not take: any axes,
/// any operand), written once for every reduction instead of once per expression: strategy (the
/// two-dimensional kernels, the generic ones, pieces past 32-bit indices), launch geometry and
/// temporaries. What depends on the reduction's types (its kernels, built over the operand's
/// evaluator) is reached through `reduce_kernels`, a node and a thunk that launches one of its
/// kernels (dispatch/reduce.hpp makes one per reduction node type): an expression's template code
/// is then one small switch per reduction, and the rest is compiled once per translation unit, or
/// once per program under FUSEX_SEPARATE_COMPILATION.

#include <fusex/config.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/device/launch.hpp>
#include <fusex/device/reduce_kernels.hpp>
#include <fusex/memory/buffer.hpp>
#include <fusex/plan/elementwise_plan.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <deque>

namespace fusex::detail {

// Kept and reduced dimensions of an operand shape.
struct reduce_split {
  std::int64_t k_count = 1, n_count = 1;
  int nk = 0, nr = 0;
  int kdim[max_rank] = {}, rdim[max_rank] = {};
};
inline reduce_split split_dims(const shape_t& s, std::uint32_t mask) {
  reduce_split r;
  for (int d = 0; d < s.rank(); ++d) {
    if (mask & (1u << d)) {
      r.rdim[r.nr++] = d;
      r.n_count *= s[d];
    } else {
      r.kdim[r.nk++] = d;
      r.k_count *= s[d];
    }
  }
  return r;
}

/// The kernels of a generic reduction (device/reduce_kernels.hpp), all with 32-bit indices.
enum class reduce_kernel_kind {
  rows,         // reduce_rows_kernel: [k, n] operand, inner dimension reduced, vector loads
  cols,         // reduce_cols_kernel: [n, k] operand, inner dimension kept, vector loads
  block,        // reduce_block_kernel: any layout, inner dimension reduced
  thread,       // reduce_thread_kernel: any layout, inner dimension kept
  finish,       // reduce_finish_kernel: partials in a fixed order, optionally into running values
  finish_cols,  // reduce_finish_cols_kernel: the column kernel's partials
};

/// One launch of one of a reduction's kernels, in type-erased form (pointers typed by the thunk).
struct reduce_launch {
  reduce_kernel_kind kind = reduce_kernel_kind::block;
  dim3 grid, block;
  cudaStream_t stream = nullptr;
  const device_properties* dev = nullptr;
  const operand_layout* leaves = nullptr;  // partial kernels: the operand's leaves, in position order
  const void* params = nullptr;  // reduce2d_params<uint32_t> (rows, cols), reduce_params<uint32_t> (block, thread)
  // Finishing kernels.
  std::uint32_t k_count = 0, splits = 0;
  std::int64_t n_count = 0;
  bool k_major = false;
  const void* prev = nullptr;  // running accumulators to continue from (finish), or null
  void* running = nullptr;     // where to leave running accumulators instead of results, or null
  void* partials = nullptr;    // partial kernels write these (null: finished results); finishing ones read them
  void* out = nullptr;         // results, in the reduction's compute type
};

/// What the type-independent dispatch needs of one reduction node.
struct reduce_kernels {
  const void* node = nullptr;  // the reduce_node
  const char* name = "";       // the reduction's name, for messages
  int vector_width = 1;        // elements per 16-byte vector of the 2-D kernels; 1: they don't apply
  std::size_t acc_size = 0;    // bytes of one accumulator
  std::size_t result_size = 0; // bytes of one result (the reduction's compute type)
  void (*launch)(const void* node, const reduce_launch& l) = nullptr;
  int (*cols_blocks_per_sm)(const device_properties& dev) = nullptr;  // the column kernel's occupancy
};

/// Temporaries of one evaluation, freed (stream-ordered) when it ends.
struct reduce_temps {
  cudaStream_t stream = nullptr;
  std::deque<buffer<unsigned char>> storage;

  void* take(std::size_t bytes) {
    storage.emplace_back(bytes, stream);
    return storage.back().data();
  }
};

/// Reduces the operand of shape `s` (leaves `leaves[0, n_leaves)`, strides in the space `s`) over
/// the dimensions in `mask` into `out` (one value per kept element, row-major), launching on
/// `t.stream`: the two-dimensional kernels where every leaf folds to two dimensions, else the
/// generic ones, in 32-bit pieces where the operand reaches 2^31 elements or offsets.
FUSEX_DECL void run_generic_reduction(const reduce_kernels& k, const shape_t& s, std::uint32_t mask,
                                      const operand_layout* leaves, int n_leaves, void* out, reduce_temps& t);

}  // namespace fusex::detail

// The definitions, for host compilers only (config.hpp: FUSEX_DETAIL_HOST_BODIES).
#if FUSEX_DETAIL_HOST_BODIES
#include <fusex/dispatch/detail/reduce_generic_impl.hpp>
#endif
