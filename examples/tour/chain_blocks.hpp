// fusex-tour's chain workload: one block of the chain (layer_norm, *scale, +shift, gelu, *0.5,
// +residual, rms_norm) in each of its three forms, each in its own translation unit so that none
// compiles for long.
#pragma once

#include "tour.hpp"

namespace tour {

struct chain_block {
  fusex::view<float> cur, next, g, b, scale, shift, w;
};
/// Two kernels (workload_chain.cu).
void chain_block_fused(backend& b, const chain_block& k);
/// One kernel: the block as one expression (workload_chain_one.cu).
void chain_block_one_expression(backend& b, const chain_block& k);
/// One kernel per operation, each into a fresh temporary (workload_chain_unfused.cu).
void chain_block_unfused(backend& b, const chain_block& k);

}  // namespace tour
