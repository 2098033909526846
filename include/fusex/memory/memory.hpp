#pragma once
/// \file
/// The memory area of fusex in one include: resources and the per-device default arena,
/// fusex::arena, fusex::buffer and pinned staging (fusex::copy_async, which copies views, is in
/// <fusex/copy.hpp>, above both). docs/memory.md explains the resource model, the cross-stream
/// rule and what happens when memory runs out.

#include <fusex/memory/arena.hpp>
#include <fusex/memory/arena_options.hpp>
#include <fusex/memory/buffer.hpp>
#include <fusex/memory/pinned.hpp>
#include <fusex/memory/resource.hpp>
#include <fusex/memory/resource_ref.hpp>
