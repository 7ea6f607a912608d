#include "profiler/op_cost.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/ir/op_registry.h"

namespace kiln::profiler {
namespace {

using core::TensorType;

double numel(const TensorType& t) { return static_cast<double>(t.numel()); }

double typeBytes(const TensorType& t) { return numel(t) * static_cast<double>(runtime::dtypeSize(t.dtype)); }

bool oneFlopOp(const std::string& op) { return core::isUnaryElementwise(op) || core::isBinaryElementwise(op); }

double windowSize(const core::Attrs& attrs) {
  if (!attrs.has("kernel")) return 1;
  const auto& k = attrs.getInts("kernel");
  if (k.empty()) return 1;
  double kh = static_cast<double>(k[0]);
  double kw = static_cast<double>(k.size() > 1 ? k[1] : k[0]);
  return kh * kw;
}

std::string typesString(const std::vector<TensorType>& types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].str();
  return s;
}

TensorType slotType(const runtime::TensorSlot& slot) { return TensorType{slot.dtype, slot.shape}; }

/// The graph nodes one call computes (see describeCalls), sorted by node id: the producers of
/// its outputs, their fused groups, and producers of values that never reach memory.
std::vector<core::NodeId> nodesOfCall(const core::Graph& graph, const runtime::KernelCall& call,
                                      const runtime::GraphPlan& plan,
                                      const std::map<std::string, core::ValueId>& valueByName,
                                      const std::set<std::string>& slotNames) {
  std::set<core::NodeId> nodes;
  std::vector<core::NodeId> stack;
  for (size_t a = call.args.size() - call.numOutputs; a < call.args.size(); ++a) {
    auto it = valueByName.find(plan.slots[call.args[a]].name);
    if (it == valueByName.end() || graph.value(it->second).producer < 0) continue;
    stack.push_back(graph.value(it->second).producer);
  }
  while (!stack.empty()) {
    core::NodeId n = stack.back();
    stack.pop_back();
    if (!nodes.insert(n).second) continue;
    int group = graph.node(n).group;
    if (group >= 0 && group < static_cast<int>(graph.groups().size())) {
      // A fused group lowers to one kernel: all of its nodes belong to the call.
      const core::FusedGroup& g = graph.groups()[group];
      for (core::NodeId m = g.first; m < g.end; ++m)
        if (m != n) stack.push_back(m);
    }
    for (core::ValueId v : graph.node(n).inputs) {
      const core::Value& value = graph.value(v);
      if (value.producer >= 0 && !slotNames.count(value.name)) stack.push_back(value.producer);
    }
  }
  return {nodes.begin(), nodes.end()};
}

}  // namespace

double opFlops(const std::string& op, const core::Attrs& attrs, const std::vector<TensorType>& in,
               const std::vector<TensorType>& out) {
  if (out.empty()) return 0;
  const TensorType& y = out[0];
  if (op == "conv2d" || op == "conv2d_nchwc") {
    if (in.size() < 2 || y.rank() < 4) return 0;
    double spatial = static_cast<double>(y.shape[0] * y.shape[2] * y.shape[3]);
    return 2.0 * spatial * numel(in[1]) + (in.size() > 2 ? numel(y) : 0);
  }
  if (op == "conv2d_winograd_nchwc") {
    // Nominal work of the 3x3 convolution it computes (as for conv2d), not the transformed
    // arithmetic: the weight holds (tile + 2)^2 positions per channel pair instead of 9 taps.
    if (in.size() < 2 || y.rank() < 4 || in[1].rank() < 3) return 0;
    double spatial = static_cast<double>(y.shape[0] * y.shape[2] * y.shape[3]);
    double alpha2 = static_cast<double>(in[1].shape[1] * in[1].shape[2]);
    return 2.0 * spatial * numel(in[1]) * 9.0 / alpha2 + (in.size() > 2 ? numel(y) : 0);
  }
  if (op == "dense" || op == "dense_packed" || op == "matmul") {
    if (in.empty() || in[0].rank() < 1) return 0;
    double k = static_cast<double>(in[0].shape.back());
    return 2.0 * numel(y) * k + (op != "matmul" && in.size() > 2 ? numel(y) : 0);
  }
  if (op == "batch_norm") return 2.0 * numel(y);
  if (oneFlopOp(op)) return numel(y);
  if (op == "max_pool2d" || op == "avg_pool2d") return numel(y) * windowSize(attrs);
  if (op == "adaptive_avg_pool2d" || op == "mean" || op == "sum") return in.empty() ? 0 : numel(in[0]);
  if (op == "softmax") return 5.0 * numel(y);
  return 0;
}

std::vector<std::string> opsFromKernelName(const std::string& kernel) {
  std::string s = kernel;
  if (s.rfind("fused_", 0) == 0) s = s.substr(6);
  size_t us = s.rfind('_');
  if (us != std::string::npos && us + 1 < s.size() &&
      std::all_of(s.begin() + us + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    s = s.substr(0, us);
  std::vector<std::string> names;
  for (const core::OpDef* def : core::allOps()) names.push_back(def->name);
  std::sort(names.begin(), names.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  std::vector<std::string> ops;
  size_t pos = 0;
  while (pos < s.size()) {
    bool matched = false;
    for (const std::string& name : names) {
      if (s.compare(pos, name.size(), name) == 0 &&
          (pos + name.size() == s.size() || s[pos + name.size()] == '_')) {
        ops.push_back(name);
        pos += name.size() + 1;
        matched = true;
        break;
      }
    }
    if (matched) continue;
    size_t next = s.find('_', pos);  // an unknown word: keep it as is
    ops.push_back(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    pos = next == std::string::npos ? s.size() : next + 1;
  }
  if (ops.empty()) ops.push_back(kernel);
  return ops;
}

std::vector<CallCost> describeCalls(const core::Graph& graph, const runtime::GraphPlan& plan) {
  std::map<std::string, core::ValueId> valueByName;
  for (core::ValueId v = 0; v < static_cast<core::ValueId>(graph.values().size()); ++v)
    valueByName.emplace(graph.value(v).name, v);
  std::set<std::string> slotNames;
  for (const auto& slot : plan.slots) slotNames.insert(slot.name);

  std::vector<CallCost> costs;
  for (const runtime::KernelCall& call : plan.calls) {
    CallCost cost;
    std::vector<TensorType> in, out;
    size_t firstOut = call.args.size() - call.numOutputs;
    for (size_t a = 0; a < call.args.size(); ++a) {
      const runtime::TensorSlot& slot = plan.slots[call.args[a]];
      (a < firstOut ? in : out).push_back(slotType(slot));
      cost.bytes += typeBytes(slotType(slot));
      if (a >= firstOut) cost.key += (cost.key.empty() ? "" : ",") + slot.name;
    }
    for (const auto& t : in) cost.inputShapes.push_back(t.str());
    cost.outputShape = typesString(out);

    std::vector<core::NodeId> nodes = nodesOfCall(graph, call, plan, valueByName, slotNames);
    bool known = !nodes.empty();
    for (core::NodeId n : nodes) known = known && core::findOp(graph.node(n).op) != nullptr;
    if (known) {
      for (core::NodeId n : nodes) {
        const core::Node& node = graph.node(n);
        std::vector<TensorType> nin, nout;
        for (core::ValueId v : node.inputs) nin.push_back(graph.type(v));
        for (core::ValueId v : node.outputs) nout.push_back(graph.type(v));
        cost.ops.push_back(node.op);
        cost.flops += opFlops(node.op, node.attrs, nin, nout);
      }
    } else {
      // The first named operator is the anchor computed from the call's buffers; the rest are
      // epilogues, one operation per output element each.
      cost.ops = opsFromKernelName(call.kernel);
      cost.flops = opFlops(cost.ops[0], {}, in, out);
      for (size_t i = 1; i < cost.ops.size(); ++i) cost.flops += opFlops(cost.ops[i], {}, {out[0]}, {out[0]});
    }
    costs.push_back(std::move(cost));
  }
  return costs;
}

}  // namespace kiln::profiler
