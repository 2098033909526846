#pragma once
/// \file
/// The definitions of fusex::detail::basic_arena's member functions (and basic_private_pool's),
/// one header per concern; the class definition, with the declarations and the data structures,
/// is arena_core.hpp:
///  - arena_alloc.hpp: allocate_async / deallocate_async, the fast and slow paths, the checks;
///  - arena_blocks.hpp: blocks within chunks (split, carve, coalesce);
///  - arena_chunks.hpp: construction and destruction, chunks from upstream, growth, trim, release;
///  - arena_thread_cache.hpp: the per-thread caches of freed blocks;
///  - arena_streams.hpp: stream states, events, dependencies, record_stream, forget_stream;
///  - arena_private_pools.hpp: graph-private pools for stream capture;
///  - arena_stats.hpp: stats() and validate().
///
/// Host code only. memory/arena.hpp includes this header when __CUDA_ARCH__ is not defined, so
/// nvcc's device pass (which analyses the host code of a .cu file but never generates it) parses
/// the declarations only. A host translation unit that instantiates basic_arena over another
/// backend (the tests' fake backend) includes this header.

#include <fusex/memory/detail/arena_core.hpp>

#include <fusex/memory/detail/arena_alloc.hpp>
#include <fusex/memory/detail/arena_blocks.hpp>
#include <fusex/memory/detail/arena_chunks.hpp>
#include <fusex/memory/detail/arena_private_pools.hpp>
#include <fusex/memory/detail/arena_stats.hpp>
#include <fusex/memory/detail/arena_streams.hpp>
#include <fusex/memory/detail/arena_thread_cache.hpp>
