// The fusex_compiled library (CMake target fusex::compiled, docs/design.md "Separate compilation"): the
// bodies of fusex's non-template host code, compiled once here instead of in every translation
// unit that includes fusex. Its users are compiled with FUSEX_SEPARATE_COMPILATION (the target
// defines it), which leaves those bodies out of the headers. A plain C++17 file: no device code.
#ifndef FUSEX_SEPARATE_COMPILATION
#define FUSEX_SEPARATE_COMPILATION
#endif
#define FUSEX_BUILDING_LIBRARY

#include <fusex/core/shape.hpp>
#include <fusex/dispatch/plan_text.hpp>
#include <fusex/dispatch/reduce_generic.hpp>
#include <fusex/memory/arena.hpp>
#include <fusex/memory/pinned.hpp>
#include <fusex/memory/resource.hpp>
#include <fusex/plan/elementwise_plan.hpp>
#include <fusex/plan/reduce_pieces.hpp>
#include <fusex/plan/reduce_plan.hpp>

// Every member of the arena over CUDA (fusex::arena's base) and of its private-pool handle
// (fusex::private_pool), emitted here.
template class fusex::detail::basic_arena<fusex::detail::cuda_backend>;
template class fusex::detail::basic_private_pool<fusex::detail::basic_arena<fusex::detail::cuda_backend>>;
