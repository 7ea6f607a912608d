// Private to app/torch: splitting a prepared TorchScript graph into compiled (Kiln) and libtorch
// segments for one input signature.
//
// The algorithm:
//
// 1. Classify each top-level node from the importer's verdicts (importers::classifyTorchScriptGraph):
//    - Neutral: prim::Constant, and nodes the importer folds whose outputs hold no tensor (shape
//      and integer arithmetic). They belong to no segment: every segment that needs one of their
//      values gets its own clone (a Kiln import folds it again; libtorch evaluates it cheaply).
//    - Kiln: nodes mapped onto Kiln operators, and structural nodes over tensors (lists, tuples);
//      a prim::If or prim::Loop none of whose nested nodes is unsupported (a branch taken or a
//      loop unrolled at import time, or an if/loop node with sub-graphs).
//    - Torch: everything else, with the importer's message as the reason.
// 2. Segment: nodes are visited in graph (topological) order; a node's lower bound is, over its
//    effective producers (through Neutral nodes), the producer's segment if it has the same kind
//    and the one after it otherwise. The node joins the first segment of its kind at or after
//    that bound, or opens a new one at the end. Every input of a segment then comes from an
//    earlier segment, so running segments in index order is valid, and independent branches
//    join the same segment (a libtorch node on a side branch does not split the compiled graph).
// 3. Build one torch::jit::Graph per segment: boundary values become its inputs, values used
//    later (or returned) its outputs (a single tuple). A final libtorch segment builds returned
//    values that come from Neutral nodes (or tuples).
// 4. Check the boundaries: a compiled segment exchanges only plain tensors. A non-tensor value
//    crossing into or out of a compiled segment (a list of tensors, an integer computed by
//    libtorch) demotes the compiled node(s) involved to libtorch; compiled segments with fewer
//    than minSubgraphOps aten:: operators are demoted too. Repeat from 2 until stable (nodes only
//    move from Kiln to Torch, so this ends).
#pragma once

#include <torch/csrc/jit/ir/ir.h>

#include <memory>
#include <string>
#include <vector>

#include "importers/torchscript.h"

namespace kiln::torch::detail {

namespace jit = ::torch::jit;

struct PlannedSegment {
  bool compiled = false;
  std::shared_ptr<jit::Graph> graph;      // inputs: `inputs`; one output: a tuple of `outputs`
  std::vector<const jit::Value*> inputs;  // values of the prepared graph, in graph-input order
  std::vector<const jit::Value*> outputs;
  std::vector<std::string> ops;           // aten:: kinds (and prim::If/Loop) in graph order
  std::vector<std::string> reasons;       // Torch: per entry of `ops`, why it is not compiled
};

struct Partition {
  std::vector<PlannedSegment> segments;  // in execution order
  /// The prepared graph's returned values (looked up after the last segment ran); when
  /// `tupleResult`, the elements of the one tuple it returns (the executor builds the tuple).
  std::vector<const jit::Value*> results;
  bool tupleResult = false;
};

/// `verdicts` from importers::classifyTorchScriptGraph on `graph`. A non-empty `forceReason`
/// puts every node in libtorch with that reason (e.g. an input dtype Kiln does not compile).
Partition partitionGraph(const std::shared_ptr<jit::Graph>& graph,
                         const std::vector<importers::NodeSupport>& verdicts, int minSubgraphOps,
                         const std::string& forceReason);

}  // namespace kiln::torch::detail
