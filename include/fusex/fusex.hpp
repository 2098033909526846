#pragma once
/// \file
/// The umbrella header: everything fusex offers.

#include <fusex/config.hpp>
#include <fusex/core/dtype.hpp>
#include <fusex/core/shape.hpp>
#include <fusex/tensor.hpp>
#include <fusex/core/view.hpp>
#include <fusex/error.hpp>
#include <fusex/eval.hpp>
#include <fusex/expr/index.hpp>
#include <fusex/expr/node.hpp>
#include <fusex/expr/operators.hpp>
#include <fusex/expr/random.hpp>
#include <fusex/expr/reduce.hpp>
#include <fusex/expr/share.hpp>
#include <fusex/graph/graph.hpp>
#include <fusex/memory/buffer.hpp>
#include <fusex/copy.hpp>
#include <fusex/memory/resource.hpp>
#include <fusex/monitor.hpp>
#include <fusex/random_generator.hpp>
#include <fusex/version.hpp>
