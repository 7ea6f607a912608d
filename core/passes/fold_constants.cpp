#include "core/passes/fold_constants.h"

#include <vector>

#include "core/lower/interpreter.h"
#include "core/lower/lower.h"
#include "core/passes/rewrite.h"
#include "runtime/error.h"

namespace kiln::core::passes {
namespace {

/// Evaluates `node` of `source` on the constant target values `inputs` by lowering it in a
/// scratch graph and interpreting the loop IR. Throws kiln::Error when it cannot be lowered.
std::vector<runtime::Tensor> evaluate(const Graph& source, const Node& node, const Graph& target,
                                      const std::vector<ValueId>& inputs) {
  Graph scratch;
  std::vector<ValueId> scratchInputs;
  for (ValueId v : inputs)
    scratchInputs.push_back(scratch.addConstant(target.value(v).name, *target.value(v).constant));
  scratch.addNode(node.op, scratchInputs, node.attrs, node.location, source.value(node.outputs[0]).name);
  tir::PrimFunc func = lower::lowerNode(scratch, 0, "fold");

  std::vector<runtime::Tensor> results;
  std::vector<void*> args;
  for (ValueId v : scratchInputs) args.push_back(scratch.value(v).constant->raw());
  for (ValueId out : scratch.node(0).outputs) {
    results.push_back(runtime::Tensor::zeros(scratch.type(out).dtype, scratch.type(out).shape));
    args.push_back(results.back().raw());
  }
  lower::interpret(func, args);
  return results;
}

}  // namespace

bool foldConstants(Graph& graph, const FoldConstantsOptions& options, PassCounters* counters) {
  GraphRewriter rw(graph);
  int64_t folded = 0;
  for (NodeId n = 0; n < static_cast<NodeId>(graph.nodes().size()); ++n) {
    const Node& node = graph.node(n);
    std::vector<ValueId> inputs;
    bool allConstant = !node.inputs.empty();
    int64_t inputElements = 0;
    for (ValueId v : node.inputs) {
      inputs.push_back(rw.map(v));
      const Value& mapped = rw.target().value(inputs.back());
      allConstant = allConstant && mapped.isConstant();
      inputElements += mapped.type.numel();
    }
    if (!allConstant) {
      rw.copyNode(n);
      continue;
    }
    int64_t outputElements = 0;
    for (ValueId out : node.outputs) outputElements += graph.type(out).numel();
    if (outputElements > options.maxElements && outputElements > inputElements) {
      bump(counters, "skipped-size");
      rw.copyNode(n);
      continue;
    }
    std::vector<runtime::Tensor> results;
    try {
      results = evaluate(graph, node, rw.target(), inputs);
    } catch (const InternalError&) {
      throw;
    } catch (const Error&) {
      bump(counters, "skipped-unsupported");
      rw.copyNode(n);
      continue;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i)
      rw.replaceWithConstant(node.outputs[i], std::move(results[i]));
    ++folded;
  }
  if (folded == 0) return false;
  graph = rw.finish();
  bump(counters, "folded", folded);
  return true;
}

}  // namespace kiln::core::passes
