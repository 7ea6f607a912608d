// Runs a GraphPlan: binds inputs, calls each kernel in order on planned storage, and exposes the
// outputs. Storage is allocated once at construction and reused across runs; outputs returned by
// output() are copies, so they stay valid after the next run.
#pragma once

#include <memory>
#include <vector>

#include "runtime/graph_plan.h"
#include "runtime/memory_planner.h"

namespace kiln::runtime {

class GraphExecutor {
 public:
  /// Resolves every kernel in `library` (kept alive by the executor); throws kiln::Error if one
  /// is missing.
  GraphExecutor(GraphPlan plan, std::shared_ptr<KernelLibrary> library);

  int numInputs() const { return static_cast<int>(m_plan.inputs.size()); }
  int numOutputs() const { return static_cast<int>(m_plan.outputs.size()); }
  const TensorSlot& inputSlot(int i) const { return m_plan.slots[m_plan.inputs[i]]; }
  const TensorSlot& outputSlot(int i) const { return m_plan.slots[m_plan.outputs[i]]; }

  /// Checks dtype and shape against the plan; throws kiln::Error on mismatch.
  void setInput(int index, const Tensor& tensor);
  void run();
  /// Runs only call `index` (the debug executor times calls one by one).
  void runCall(int index);
  Tensor output(int index) const;

  const GraphPlan& plan() const { return m_plan; }
  const MemoryPlan& memoryPlan() const { return m_memory; }

 private:
  GraphPlan m_plan;
  std::shared_ptr<KernelLibrary> m_library;
  MemoryPlan m_memory;
  std::vector<KilnKernelFn> m_fns;
  std::vector<Tensor> m_slotTensors;          // bound tensor per slot
  std::vector<std::vector<void*>> m_callArgs; // per call: argument pointers
  std::vector<bool> m_inputBound;
};

}  // namespace kiln::runtime
