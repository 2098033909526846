#pragma once
/// \file
/// The text of fusex::explain's plans, from the planners' results (non-template: compiled once per
/// translation unit, or once per program under FUSEX_SEPARATE_COMPILATION). dispatch/explain.hpp
/// gathers what depends on the expression's types and prints its tree.

#include <fusex/config.hpp>
#include <fusex/plan/elementwise_plan.hpp>
#include <fusex/plan/reduce_plan.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace fusex::detail {

/// A row-kernel plan (rule 1): its header line and destination line. `ops`: the destination,
/// then the leaves; `passes`: reduction nesting depth; `static_path`: the cached path's roles are
/// known at compile time.
FUSEX_DECL std::string row_plan_text(const row_layout& R, const operand_layout* ops, int n_ops,
                                     std::size_t n_reductions, int passes, bool static_path);

/// A plan that materialises its reductions with the generic kernels (rule 2), and why.
FUSEX_DECL std::string generic_plan_text(const std::vector<reduction_info>& reds, const std::string& why);

/// An elementwise plan's header lines (the destinations' trees follow).
FUSEX_DECL std::string elementwise_plan_text(const elementwise_layout& L, std::size_t pieces, std::size_t n_dst);

}  // namespace fusex::detail

// The definitions, for host compilers only (config.hpp: FUSEX_DETAIL_HOST_BODIES).
#if FUSEX_DETAIL_HOST_BODIES
#include <fusex/dispatch/detail/plan_text_impl.hpp>
#endif
