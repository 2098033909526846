#pragma once
/// \file
/// Graph capture: everything of the graph area. fusex::graph_capture (the RAII capture guard),
/// fusex::graph_exec (an instantiated graph with its memory), fusex::scoped_fork (side streams),
/// fusex::graph_cache (graphs by key, least recently used evicted), fusex::copy_input (the input
/// contract), fusex::arena_capture_memory (graph-private pools), and the capture rules
/// (fusex::capture_error, fusex::stream_synchronize...). See docs/graph.md.

#include <fusex/graph/capture_memory.hpp>
#include <fusex/graph/capture_rules.hpp>
#include <fusex/graph/fork_join.hpp>
#include <fusex/graph/graph_cache.hpp>
#include <fusex/graph/graph_capture.hpp>
#include <fusex/graph/graph_exec.hpp>
#include <fusex/graph/graph_input.hpp>
#include <fusex/graph/graph_key.hpp>
