#pragma once
/// \file
/// The hook through which fusex::launch_monitor counts launches. Every place that submits GPU
/// work for fusex (detail::launch_kernel, graph_exec::launch, the matmul path) calls
/// detail::note_launch() or detail::note_graph_launch() after a successful submission. With no
/// monitor active on the calling thread each call is one thread-local load and one predictable
/// branch; nothing else.

#include <cstdint>

namespace fusex::detail {

/// What one launch_monitor region counts. Regions nest: the innermost active one counts, and
/// adds its counts to the one around it when it stops.
struct launch_tally {
  std::uint64_t kernels = 0;       ///< Kernel launches submitted (captured ones included).
  std::uint64_t graphs = 0;        ///< Graph launches submitted (graph_exec::launch).
  launch_tally* parent = nullptr;  ///< The region around this one on the same thread, or null.
};

/// The innermost active region of this thread, or null (constant-initialised: no TLS guard).
inline thread_local launch_tally* active_tally = nullptr;

/// Counts one kernel launch in the calling thread's innermost active launch_monitor, if any.
inline void note_launch() noexcept {
  if (launch_tally* t = active_tally) ++t->kernels;
}

/// Counts one graph launch in the calling thread's innermost active launch_monitor, if any.
inline void note_graph_launch() noexcept {
  if (launch_tally* t = active_tally) ++t->graphs;
}

}  // namespace fusex::detail
