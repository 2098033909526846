#pragma once
/// \file
/// The definitions behind dispatch/plan_text.hpp. Included by <fusex/dispatch/plan_text.hpp> where
/// FUSEX_DETAIL_HOST_BODIES is set (config.hpp): not in nvcc's device pass, and, under
/// FUSEX_SEPARATE_COMPILATION, only by the fusex_compiled library.

#include <fusex/config.hpp>
#include <fusex/dispatch/plan_text.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace fusex::detail {

FUSEX_DECL std::string row_plan_text(const row_layout& R, const operand_layout* ops, int n_ops,
                                     std::size_t n_reductions, int passes, bool static_path) {
  const std::string pieces = R.index64 ? std::to_string((R.rows + R.rows_per_piece - 1) / R.rows_per_piece) : "1";
  std::string out = "fusex plan: " + (R.index64 ? pieces + " launches of 1 kernel" : std::string("1 kernel")) +
                    " (row reduction with epilogue, rule 1): " + std::to_string(R.rows) + " rows x " +
                    std::to_string(R.cols) + " columns, " + std::to_string(R.tpr) +
                    (R.tpr == 1 ? " thread per row, " : " threads per row, ") + std::to_string(passes) +
                    " pass(es) over each row (" + std::to_string(n_reductions) +
                    " reduction(s); those of one nesting level share a pass) then the " +
                    (R.full_dest ? "epilogue over the row" : "one value per row") + ", ";
  out += R.vector_width > 1 ? "vector width " + std::to_string(R.vector_width) : std::string("scalar accesses");
  if (R.cached) {
    out += ", row kept in registers (read once; " + std::to_string(R.cached_leaves) + " of " +
           std::to_string(n_ops - 1) + " leaves answered from registers";
    if (R.prefetched_leaves > 0) out += ", " + std::to_string(R.prefetched_leaves) + " prefetched into L1 at the load";
    out += static_path ? "; static path: roles and strides known at compile time" : "; roles tested at run time";
    out += ")";
  } else if (R.reread_why != nullptr) {
    out += ", row re-read per pass (" + std::string(R.reread_why) + ")";
  }
  out += ", 32-bit indices";
  out += R.index64 ? " (2^31 elements or more: launched in " + pieces + " pieces of at most " +
                         std::to_string(R.rows_per_piece) + " rows)\n"
                   : std::string("\n");
  out += "  destination: " + operand_text(ops[0]) + " <-\n";
  return out;
}

FUSEX_DECL std::string generic_plan_text(const std::vector<reduction_info>& reds, const std::string& why) {
  std::string out = "fusex plan: " + std::to_string(reds.size()) +
                    " reduction(s) computed first by the generic reduction kernel (plus a finishing kernel when a "
                    "reduction is split across blocks) into temporaries from the default resource, then 1 "
                    "elementwise kernel (rule 2: " +
                    why + ")\n";
  for (const auto& r : reds) out += "  " + std::string(r.name) + " of an operand of shape " + r.child_shape.str() + "\n";
  return out;
}

FUSEX_DECL std::string elementwise_plan_text(const elementwise_layout& L, std::size_t pieces, std::size_t n_dst) {
  if (L.numel == 0) return "fusex plan: empty destination " + L.shape.str() + ": no kernel\n";
  std::string out = "fusex plan: " + std::to_string(pieces) + (pieces == 1 ? " kernel" : " kernels") +
                    " (elementwise), " + std::to_string(n_dst) + " destination(s) of shape " + L.shape.str() + "\n";
  out += "  index space [";
  for (int d = 0; d < L.rank; ++d) out += (d ? ", " : "") + std::to_string(L.extent[d]);
  out += "], ";
  out += L.vector_width > 1 ? "vector width " + std::to_string(L.vector_width) + " (16-byte accesses)"
                            : std::string("scalar accesses");
  out += L.index64 ? ", 32-bit indices in " + std::to_string(pieces) + " pieces (2^31 elements or offsets or more)\n"
                   : ", 32-bit indices\n";
  return out;
}

}  // namespace fusex::detail
