// fusex-tour: the transformer workload in float32, and the factory of both rows (see
// transformer_block.hpp).
#include "transformer_block.hpp"

#include <memory>

namespace tour {

std::unique_ptr<workload> make_transformer(bool host, const options& o, bool bf16) {
  fusex::matmul_options mm;
  mm.allow_tf32 = o.tf32;  // float32 GEMMs only: bfloat16 ones run on tensor cores regardless
  if (bf16) return make_transformer_bf16(host, o, mm);
  return std::make_unique<transformer_workload<float>>(host, o.batch, o.seq, o.hidden, mm);
}

}  // namespace tour
