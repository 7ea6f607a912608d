// Runs a GraphPlan: binds inputs, calls each kernel in order on planned storage, and exposes the
// outputs. If/Loop calls run their sub-plans on executors of their own, created with this one. Storage is allocated once at construction and reused across runs; outputs returned by
// output() are copies, so they stay valid after the next run.
#pragma once

#include <memory>
#include <vector>

#include "runtime/graph_plan.h"
#include "runtime/memory_planner.h"

namespace kiln::runtime {

/// Kernel watch, for worker processes that run generated code in isolation (app/ measure-worker):
/// once enabled, every executor publishes the name of the call it is running, readable from a
/// signal handler, so the parent can say which kernel crashed or hung. It also honours
/// KILN_FAULT for tests: "crash:<substring>" raises SIGSEGV, "stack:<substring>" overflows the
/// stack (a pool thread's, in a parallel launch, when the pool has more than one thread) and
/// "hang:<substring>" loops forever instead of running a call whose fused function or
/// kernel name contains the substring. Off by default: ordinary processes never read KILN_FAULT
/// and pay nothing.
void enableKernelWatch();
/// The kernel (compiled function symbol) being called, or nullptr; async-signal-safe.
const char* watchedKernel();

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
  /// The memory call `index` reads and writes: each argument's data and size in bytes, in the
  /// call's argument order (inputs, then outputs). A timing that wants a call's operands out of
  /// the caches, as a model's weights are when their layer comes round, evicts these.
  struct Operand {
    const void* data = nullptr;
    size_t bytes = 0;
  };
  std::vector<Operand> callOperands(int index) const;
  /// Output `index` in place: valid until the next run.
  const Tensor& outputView(int index) const;

  const GraphPlan& plan() const { return m_plan; }
  const MemoryPlan& memoryPlan() const { return m_memory; }

  /// The executors of the sub-plans of If/Loop calls, by GraphPlan::regions index.
  const std::vector<std::unique_ptr<GraphExecutor>>& regions() const { return m_regions; }
  /// Time spent in each call and how often it ran, since resetCallTotals(); kept only while
  /// call timing is on (the debug executor turns it on for the sub-plans, to split an If/Loop
  /// call's time among the calls inside it).
  struct CallTotals {
    std::vector<double> us;
    std::vector<int64_t> runs;
  };
  /// Turns call timing on or off here and in every sub-plan below.
  void setCallTiming(bool on);
  void resetCallTotals();
  const CallTotals& callTotals() const { return m_totals; }

 private:
  GraphPlan m_plan;
  std::shared_ptr<KernelLibrary> m_library;
  MemoryPlan m_memory;
  std::vector<KilnKernelFn> m_fns;
  std::vector<Tensor> m_slotTensors;          // bound tensor per slot
  std::vector<std::vector<void*>> m_callArgs; // per call: argument pointers
  std::vector<bool> m_inputBound;
  std::vector<char> m_fault;  // per call, under the kernel watch: 0 none, 'c' crash, 's' stack, 'h' hang
  bool m_watched = false;
  std::vector<std::unique_ptr<GraphExecutor>> m_regions;  // one per GraphPlan::regions entry
  bool m_timing = false;
  CallTotals m_totals;

  void runTimed();

  void callWatched(size_t index);
  /// Runs If/Loop call `index` on its sub-plans' executors.
  void runControl(size_t index);
  /// Throws kiln::Error unless If/Loop call `call` fits its sub-plans (region count, argument
  /// count, and the types of every value passed in or out); a plan read from a file is checked
  /// here before anything runs.
  void checkControlCall(const KernelCall& call) const;
};

}  // namespace kiln::runtime
