#pragma once
// A fixture for the `layers.catches_upward_include` test: a core header that includes memory/,
// which the layer table forbids. Never compiled.
#include <fusex/memory/allocator.hpp>
