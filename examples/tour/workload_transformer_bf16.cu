// fusex-tour: the transformer workload in bfloat16 (see transformer_block.hpp).
#include "transformer_block.hpp"

#include <memory>

namespace tour {

std::unique_ptr<workload> make_transformer_bf16(bool host, const options& o, fusex::matmul_options mm) {
  return std::make_unique<transformer_workload<fusex::bfloat16>>(host, o.batch, o.seq, o.hidden, mm);
}

}  // namespace tour
