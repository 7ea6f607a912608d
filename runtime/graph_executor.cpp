#include "runtime/graph_executor.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "runtime/error.h"
#include "runtime/tensor_values.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

namespace {

std::atomic<bool> g_watch{false};
std::atomic<const char*> g_current{nullptr};

/// The fault KILN_FAULT asks for on a call ('c' crash, 'h' hang, 's' stack overflow, 0 none).
char faultFor(const KernelCall& call) {
  const char* spec = std::getenv("KILN_FAULT");
  if (!spec) return 0;
  std::string s(spec);
  size_t colon = s.find(':');
  if (colon == std::string::npos) return 0;
  std::string kind = s.substr(0, colon), needle = s.substr(colon + 1);
  if (needle.empty()) return 0;
  if (call.node.find(needle) == std::string::npos && call.kernel.find(needle) == std::string::npos) return 0;
  return kind == "crash" ? 'c' : kind == "hang" ? 'h' : kind == "stack" ? 's' : 0;
}

/// Recurses until the thread's stack is exhausted (KILN_FAULT=stack:...): each frame keeps a
/// page the compiler cannot drop, and the call is not a tail call.
__attribute__((noinline)) int64_t overflowStack(int64_t depth) {
  volatile char page[4096];
  page[0] = static_cast<char>(depth);
  page[sizeof page - 1] = page[0];
  if (depth >= 0) return overflowStack(depth + 1) + page[sizeof page - 1];
  return page[0];
}

/// The parallel body of an injected stack overflow: a pool thread overflows its stack; the
/// launching thread (`closure` holds its id) waits in its own chunk for the process to die.
int32_t overflowOnPoolThread(int64_t, int64_t, void* closure) {
  if (std::this_thread::get_id() != *static_cast<const std::thread::id*>(closure))
    return static_cast<int32_t>(overflowStack(0));
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

/// KILN_FAULT=stack:...: with a pool (more than one thread) the overflow happens in a parallel
/// launch on a pool thread, whose handler needs that thread's own alternate signal stack; with one
/// thread, on the calling thread. One chunk per thread: the caller claims at most one and keeps
/// it, so a pool thread always claims another.
void injectStackOverflow() {
  int threads = numThreads();
  if (threads <= 1) {
    overflowStack(0);
    return;
  }
  std::thread::id caller = std::this_thread::get_id();
  parallelLaunch(overflowOnPoolThread, &caller, threads, 1);
}

}  // namespace

void enableKernelWatch() { g_watch = true; }

const char* watchedKernel() { return g_current.load(std::memory_order_relaxed); }

void GraphExecutor::checkControlCall(const KernelCall& call) const {
  auto fail = [&](const std::string& what) { throw Error("control call '" + call.node + "': " + what); };
  size_t expected = call.kind == CallKind::If ? 2 : 1;
  if (call.regions.size() != expected) fail("has a wrong region count");
  for (int r : call.regions)
    if (r < 0 || r >= static_cast<int>(m_regions.size())) fail("names a missing region");
  // Every value crossing into or out of a sub-plan has the type of the slot on the other side
  // (the executor copies whole tensors between them).
  const size_t numIn = call.args.size() - static_cast<size_t>(call.numOutputs);
  const size_t lead = call.kind == CallKind::If ? 1 : 2 + static_cast<size_t>(call.numOutputs);
  if (numIn < lead) fail("has too few arguments");
  auto slotOf = [&](size_t k) -> const TensorSlot& { return m_plan.slots.at(call.args[k]); };
  auto same = [](const TensorSlot& a, const TensorSlot& b) { return a.dtype == b.dtype && a.shape == b.shape; };
  if (numElements(slotOf(call.kind == CallKind::If ? 0 : 1).shape) < 1) fail("its condition is empty");
  if (call.kind == CallKind::Loop && (slotOf(0).dtype != DType::Int64 || numElements(slotOf(0).shape) != 1))
    fail("its trip count is not one i64");
  for (int r : call.regions) {
    const GraphPlan& sub = m_plan.regions[r];
    auto inSlot = [&](size_t i) -> const TensorSlot& { return sub.slots.at(sub.inputs[i]); };
    auto outSlot = [&](size_t i) -> const TensorSlot& { return sub.slots.at(sub.outputs[i]); };
    if (call.kind == CallKind::If) {
      if (sub.inputs.size() != numIn - 1 || sub.outputs.size() != static_cast<size_t>(call.numOutputs))
        fail("its branches take or return another number of values");
      for (size_t i = 0; i + 1 < numIn; ++i)
        if (!same(inSlot(i), slotOf(1 + i))) fail("a branch input's type differs from its operand's");
      for (int o = 0; o < call.numOutputs; ++o)
        if (!same(outSlot(o), slotOf(numIn + o))) fail("a branch output's type differs from the call's");
      continue;
    }
    // Loop body: (i, v..., x...) → (cond, v'...).
    if (sub.inputs.size() != numIn - 1 || sub.outputs.size() != 1 + static_cast<size_t>(call.numOutputs))
      fail("its body takes or returns another number of values");
    if (inSlot(0).dtype != DType::Int64 || numElements(inSlot(0).shape) != 1) fail("its body's index is not one i64");
    if (numElements(outSlot(0).shape) < 1) fail("its body's condition is empty");
    for (int v = 0; v < call.numOutputs; ++v)
      if (!same(inSlot(1 + v), slotOf(numIn + v)) || !same(outSlot(1 + v), slotOf(numIn + v)) ||
          !same(slotOf(2 + v), slotOf(numIn + v)))
        fail("a carried value changes its type");
    for (size_t k = lead; k < numIn; ++k)
      if (!same(inSlot(k - 1), slotOf(k))) fail("a body input's type differs from its operand's");
  }
}

GraphExecutor::GraphExecutor(GraphPlan plan, std::shared_ptr<KernelLibrary> library)
    : m_plan(std::move(plan)), m_library(std::move(library)) {
  m_memory = planMemory(m_plan);
  std::vector<std::shared_ptr<Storage>> blocks;
  blocks.reserve(m_memory.blockBytes.size());
  for (size_t bytes : m_memory.blockBytes) blocks.push_back(std::make_shared<Storage>(bytes));

  m_slotTensors.resize(m_plan.slots.size());
  for (size_t s = 0; s < m_plan.slots.size(); ++s) {
    const TensorSlot& slot = m_plan.slots[s];
    switch (slot.kind) {
      case SlotKind::Constant: {
        KILN_ASSERT(slot.index >= 0 && slot.index < static_cast<int>(m_plan.constants.size()),
                    "constant slot without data");
        m_slotTensors[s] = m_plan.constants[slot.index];
        break;
      }
      case SlotKind::Input:
        m_slotTensors[s] = Tensor::zeros(slot.dtype, slot.shape);
        break;
      case SlotKind::Intermediate:
        if (m_memory.slotBlock[s] >= 0)
          m_slotTensors[s] = Tensor::view(blocks[m_memory.slotBlock[s]], 0, slot.dtype, slot.shape);
        else
          m_slotTensors[s] = Tensor::zeros(slot.dtype, slot.shape);
        break;
    }
  }
  for (const GraphPlan& region : m_plan.regions)
    m_regions.push_back(std::make_unique<GraphExecutor>(region, m_library));
  for (const KernelCall& call : m_plan.calls) {
    KilnKernelFn fn = nullptr;  // If/Loop calls have none: runControl runs them
    if (call.kind == CallKind::Kernel) {
      fn = m_library->lookup(call.kernel);
      if (!fn) throw Error("kernel '" + call.kernel + "' is missing from the compiled library");
    } else {
      checkControlCall(call);
    }
    m_fns.push_back(fn);
    std::vector<void*> args;
    for (int slot : call.args) args.push_back(m_slotTensors[slot].raw());
    m_callArgs.push_back(std::move(args));
  }
  m_inputBound.assign(m_plan.inputs.size(), false);
  m_watched = g_watch.load();
  if (m_watched)
    for (const KernelCall& call : m_plan.calls) m_fault.push_back(faultFor(call));
}

void GraphExecutor::callWatched(size_t c) {
  const KernelCall& call = m_plan.calls[c];
  g_current.store(call.kernel.c_str(), std::memory_order_relaxed);
  if (m_fault[c] == 'c') std::raise(SIGSEGV);
  if (m_fault[c] == 's') injectStackOverflow();
  if (m_fault[c] == 'h')
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (m_fns[c]) m_fns[c](m_callArgs[c].data());
  else runControl(c);
  g_current.store(nullptr, std::memory_order_relaxed);
}

namespace {

void copyInto(Tensor& dst, const Tensor& src) {
  if (src.nbytes()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}

}  // namespace

void GraphExecutor::runControl(size_t c) {
  const KernelCall& call = m_plan.calls[c];
  auto arg = [&](size_t k) -> Tensor& { return m_slotTensors[call.args[k]]; };
  const size_t numIn = call.args.size() - call.numOutputs;
  if (call.kind == CallKind::If) {
    GraphExecutor& branch = *m_regions[call.regions[elementIsTrue(arg(0)) ? 0 : 1]];
    for (size_t k = 1; k < numIn; ++k) branch.setInput(static_cast<int>(k - 1), arg(k));
    branch.run();
    for (int o = 0; o < call.numOutputs; ++o) copyInto(arg(numIn + o), branch.outputView(o));
    return;
  }
  // Loop: the output slots hold the carried values between iterations.
  GraphExecutor& body = *m_regions[call.regions[0]];
  const int carried = call.numOutputs;
  const int64_t trip = arg(0).data<int64_t>()[0];
  bool cond = elementIsTrue(arg(1));
  for (int v = 0; v < carried; ++v) copyInto(arg(numIn + v), arg(2 + v));
  for (size_t k = 2 + carried; k < numIn; ++k) body.setInput(static_cast<int>(k - 1), arg(k));
  Tensor& counter = body.m_slotTensors[body.m_plan.inputs[0]];
  for (int64_t i = 0; i < trip && cond; ++i) {
    counter.data<int64_t>()[0] = i;
    for (int v = 0; v < carried; ++v) body.setInput(1 + v, arg(numIn + v));
    body.m_inputBound[0] = true;
    body.run();
    cond = elementIsTrue(body.outputView(0));
    for (int v = 0; v < carried; ++v) copyInto(arg(numIn + v), body.outputView(1 + v));
  }
}

void GraphExecutor::setInput(int index, const Tensor& tensor) {
  if (index < 0 || index >= numInputs())
    throw Error("input index " + std::to_string(index) + " out of range: the model takes " +
                std::to_string(numInputs()) + " input(s)");
  const TensorSlot& slot = inputSlot(index);
  if (tensor.dtype() != slot.dtype)
    throw Error("input " + std::to_string(index) + " ('" + slot.name + "') has dtype " +
                std::string(dtypeName(tensor.dtype())) + ", expected " + std::string(dtypeName(slot.dtype)));
  if (tensor.shape() != slot.shape)
    throw Error("input " + std::to_string(index) + " ('" + slot.name + "') has shape " +
                shapeString(tensor.shape()) + ", expected " + shapeString(slot.shape));
  Tensor& dst = m_slotTensors[m_plan.inputs[index]];
  if (tensor.nbytes()) std::memcpy(dst.raw(), tensor.raw(), tensor.nbytes());
  m_inputBound[index] = true;
}

void GraphExecutor::run() {
  for (size_t i = 0; i < m_inputBound.size(); ++i) {
    if (!m_inputBound[i]) throw Error("input " + std::to_string(i) + " was not set");
  }
  if (m_timing) return runTimed();
  if (m_watched) {
    for (size_t c = 0; c < m_fns.size(); ++c) callWatched(c);
    return;
  }
  for (size_t c = 0; c < m_fns.size(); ++c) {
    if (m_fns[c]) m_fns[c](m_callArgs[c].data());
    else runControl(c);
  }
}

void GraphExecutor::runTimed() {
  for (size_t c = 0; c < m_fns.size(); ++c) {
    auto start = std::chrono::steady_clock::now();
    if (m_watched) callWatched(c);
    else if (m_fns[c]) m_fns[c](m_callArgs[c].data());
    else runControl(c);
    m_totals.us[c] += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    ++m_totals.runs[c];
  }
}

void GraphExecutor::setCallTiming(bool on) {
  m_timing = on;
  if (on && m_totals.us.size() != m_fns.size()) resetCallTotals();
  for (auto& region : m_regions) region->setCallTiming(on);
}

void GraphExecutor::resetCallTotals() {
  m_totals.us.assign(m_fns.size(), 0.0);
  m_totals.runs.assign(m_fns.size(), 0);
  for (auto& region : m_regions) region->resetCallTotals();
}

void GraphExecutor::runCall(int index) {
  if (m_watched) {
    if (index < 0 || index >= static_cast<int>(m_fns.size())) throw Error("call index out of range");
    callWatched(static_cast<size_t>(index));
    return;
  }
  if (m_fns.at(index)) m_fns[index](m_callArgs[index].data());
  else runControl(static_cast<size_t>(index));
}

std::vector<GraphExecutor::Operand> GraphExecutor::callOperands(int index) const {
  if (index < 0 || index >= static_cast<int>(m_plan.calls.size())) throw Error("call index out of range");
  std::vector<Operand> out;
  for (int slot : m_plan.calls[static_cast<size_t>(index)].args)
    out.push_back({m_slotTensors[slot].raw(), m_slotTensors[slot].nbytes()});
  return out;
}

const Tensor& GraphExecutor::outputView(int index) const {
  if (index < 0 || index >= numOutputs()) throw Error("output index out of range");
  return m_slotTensors[m_plan.outputs[index]];
}

Tensor GraphExecutor::output(int index) const {
  if (index < 0 || index >= numOutputs()) throw Error("output index out of range");
  return m_slotTensors[m_plan.outputs[index]].clone();
}

}  // namespace kiln::runtime
