// The executable form of a compiled graph, as data: tensor slots, kernel calls in execution
// order, and bound constants. The compiler (core/lower) produces it; the GraphExecutor runs it
// with kernels looked up by name in a KernelLibrary (a JIT session or an exported library).
#pragma once

#include <string>
#include <vector>

#include "runtime/kernel_abi.h"
#include "runtime/tensor.h"

namespace kiln::runtime {

enum class SlotKind { Input, Constant, Intermediate };

struct TensorSlot {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  SlotKind kind = SlotKind::Intermediate;
  int index = -1;  // input position for Input, constants[] index for Constant
};

/// What a call does: run a compiled kernel, or run sub-plans (control flow, core/ir/graph.h):
///   If    args (cond, x..., outputs...): runs regions[0] (cond nonzero) or regions[1] on x...
///   Loop  args (trip, cond, v..., x..., outputs...), numOutputs carried values v: runs
///         regions[0] on (i, v, x...) → (cond, v') while i < trip and cond is nonzero
enum class CallKind { Kernel, If, Loop };

struct KernelCall {
  std::string kernel;      // symbol of the compiled kernel (Kernel calls only)
  std::vector<int> args;   // slot ids: inputs then outputs, in the kernel's parameter order
  int numOutputs = 1;      // the last numOutputs args are written by the call
  std::string node;        // the graph node (or fused function) this call computes
  CallKind kind = CallKind::Kernel;
  std::vector<int> regions = {};  // If/Loop: indices into GraphPlan::regions
};

struct GraphPlan {
  std::vector<TensorSlot> slots;
  std::vector<KernelCall> calls;
  std::vector<int> inputs;   // slot ids, forward-argument order
  std::vector<int> outputs;  // slot ids, flattened output order
  std::vector<Tensor> constants;
  /// The sub-plans of If/Loop calls, each with slots of its own; their kernels live in the same
  /// library as the plan's.
  std::vector<GraphPlan> regions;
};

/// Resolves kernel symbols to callable functions.
class KernelLibrary {
 public:
  virtual ~KernelLibrary() = default;
  /// Returns nullptr when the symbol is unknown.
  virtual KilnKernelFn lookup(const std::string& symbol) = 0;
};

}  // namespace kiln::runtime
