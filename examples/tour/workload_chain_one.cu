// fusex-tour's chain block as one expression (--chain-one-expression).
#include "chain_blocks.hpp"

namespace tour {

// One kernel per block: rms_norm uses its argument three times, and fusex computes it once per
// scope (the layer_norm's reductions once per row: docs/ops.md, "Shared values").
void chain_block_one_expression(backend& b, const chain_block& k) {
  b.eval(k.next,
         fusex::rms_norm(k.cur + fusex::gelu(fusex::layer_norm(k.cur, k.g, k.b) * k.scale + k.shift) * 0.5f, k.w));
}

}  // namespace tour
