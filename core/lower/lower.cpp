// Lowering entry points: operator dispatch, workload keys, PrimFunc assembly and the graph plan.
#include "core/lower/lower.h"

#include <cctype>
#include <map>
#include <set>

#include "core/ir/op_registry.h"
#include "core/ir/printer.h"
#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
#include "core/tir/vectorize.h"
#include "core/tir/simplify.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

// Lowerings of the operators added for import breadth (declared here, next to their dispatch).
Stmt lowerStridedSlice(const OpContext& ctx);     // ops_indexing.cpp
Stmt lowerTake(const OpContext& ctx);             // ops_indexing.cpp
Stmt lowerBroadcastTo(const OpContext& ctx);      // ops_indexing.cpp
Stmt lowerWhere(const OpContext& ctx);            // ops_indexing.cpp
Stmt lowerCompare(const OpContext& ctx);          // ops_indexing.cpp
Stmt lowerCast(const OpContext& ctx);             // ops_indexing.cpp
Stmt lowerArgMinMax(const OpContext& ctx);        // ops_select_reduce.cpp
Stmt lowerTopk(const OpContext& ctx);             // ops_select_reduce.cpp
Stmt lowerConvTranspose2d(const OpContext& ctx);  // ops_image.cpp
Stmt lowerResize2d(const OpContext& ctx);         // ops_image.cpp
Stmt lowerPad(const OpContext& ctx);              // ops_pad.cpp
void addQuantLowerings(std::map<std::string, OpLowering, std::less<>>& table);  // ops_quant.cpp (qnn.*)

namespace {

const std::map<std::string, OpLowering, std::less<>>& lowerings() {
  static const auto* table = [] {
    auto* t = new std::map<std::string, OpLowering, std::less<>>();
    for (const std::string& u : unaryElementwiseOps()) (*t)[u] = lowerUnary;
    for (const std::string& b : binaryElementwiseOps()) (*t)[b] = lowerBinary;
    (*t)["copy"] = lowerCopy;
    (*t)["reshape"] = lowerCopy;
    (*t)["transpose"] = lowerTranspose;
    (*t)["concat"] = lowerConcat;
    (*t)["batch_norm"] = lowerBatchNorm;
    (*t)["conv2d"] = lowerConv2d;
    (*t)["dense"] = lowerDense;
    (*t)["dense_packed"] = lowerDensePacked;
    (*t)["matmul"] = lowerMatmul;
    (*t)["max_pool2d"] = lowerPool2d;
    (*t)["avg_pool2d"] = lowerPool2d;
    (*t)["adaptive_avg_pool2d"] = lowerAdaptiveAvgPool2d;
    (*t)["mean"] = lowerReduce;
    (*t)["sum"] = lowerReduce;
    (*t)["softmax"] = lowerSoftmax;
    (*t)["conv2d_nchwc"] = lowerConv2dNchwc;
    (*t)["conv2d_winograd_nchwc"] = lowerConv2dWinogradNchwc;
    (*t)["layout_transform"] = lowerLayoutTransform;
    (*t)["strided_slice"] = lowerStridedSlice;
    (*t)["take"] = lowerTake;
    (*t)["broadcast_to"] = lowerBroadcastTo;
    (*t)["where"] = lowerWhere;
    for (const char* c : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"})
      (*t)[c] = lowerCompare;
    (*t)["cast"] = lowerCast;
    (*t)["max"] = lowerReduce;
    (*t)["min"] = lowerReduce;
    (*t)["argmax"] = lowerArgMinMax;
    (*t)["argmin"] = lowerArgMinMax;
    (*t)["topk"] = lowerTopk;
    (*t)["conv_transpose2d"] = lowerConvTranspose2d;
    (*t)["resize2d"] = lowerResize2d;
    (*t)["pad"] = lowerPad;
    addQuantLowerings(*t);
    return t;
  }();
  return *table;
}

/// A C identifier derived from a graph value name.
std::string sanitize(const std::string& name) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "v" + s;
  return s;
}

std::string makeKey(const std::string& op, const Attrs& attrs, const std::vector<TensorType>& inTypes,
                    const std::vector<TensorType>& outTypes) {
  std::string key = op;
  if (!attrs.values().empty()) {
    key += "{";
    bool first = true;
    for (const auto& [name, value] : attrs.values()) {
      key += (first ? "" : ",") + name + "=" + printAttrValue(value);
      first = false;
    }
    key += "}";
  }
  auto types = [](const std::vector<TensorType>& ts) {
    std::string s;
    for (size_t i = 0; i < ts.size(); ++i) s += (i ? "," : "") + ts[i].str();
    return s;
  };
  return key + "(" + types(inTypes) + ")->" + types(outTypes);
}

/// Everything needed to lower one operator application, independent of a Graph node (output
/// copies in lowerGraph have no node).
struct OpApplication {
  std::string op;
  Attrs attrs;
  std::vector<TensorType> inTypes, outTypes;
  std::vector<std::string> inNames, outNames;  // graph value names (become parameter names)
  std::string where;                           // diagnostics suffix
};

OpApplication fromNode(const Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  OpApplication app{node.op, node.attrs, {}, {}, {}, {}, {}};
  for (ValueId v : node.inputs) {
    app.inTypes.push_back(graph.type(v));
    app.inNames.push_back(graph.value(v).name);
  }
  for (ValueId v : node.outputs) {
    app.outTypes.push_back(graph.type(v));
    app.outNames.push_back(graph.value(v).name);
  }
  std::string label = node.outputs.empty() ? node.op : "%" + graph.value(node.outputs[0]).name;
  app.where = " (" + label + (node.location.empty() ? "" : " at " + node.location) + ")";
  return app;
}

PrimFunc lowerApplication(const OpApplication& app, const std::string& funcName, const LowerOptions& options) {
  auto it = lowerings().find(app.op);
  if (it == lowerings().end())
    throw Error("operator '" + app.op + "' is not supported" + app.where, ErrorKind::Unsupported);

  OpContext ctx;
  ctx.op = app.op;
  ctx.attrs = app.attrs;
  ctx.inTypes = app.inTypes;
  ctx.outTypes = app.outTypes;
  ctx.where = app.where;
  ctx.options = options;
  std::set<std::string> used;
  auto param = [&used](const std::string& valueName, const TensorType& type) {
    std::string base = sanitize(valueName), name = base;
    for (int i = 1; used.count(name); ++i) name = base + "_" + std::to_string(i);
    used.insert(name);
    return makeBuffer(name, Type::fromDType(type.dtype), type.shape);
  };
  for (size_t i = 0; i < app.inTypes.size(); ++i) ctx.in.push_back(param(app.inNames[i], app.inTypes[i]));
  for (size_t i = 0; i < app.outTypes.size(); ++i) ctx.out.push_back(param(app.outNames[i], app.outTypes[i]));

  PrimFunc func;
  func.name = funcName;
  func.params = ctx.in;
  func.params.insert(func.params.end(), ctx.out.begin(), ctx.out.end());
  func.numOutputs = static_cast<int>(ctx.out.size());
  func.body = renameClashes(it->second(ctx), func.params);
  func = simplify(func);
  func.body = simplify(vectorizeInnermostLoops(func.body, options.vectorLanes));
  func.attrs["workload_key"] = makeKey(app.op, app.attrs, app.inTypes, app.outTypes);
  func.attrs["op"] = app.op;
  recordSchedule(func, ctx.schedule);
  if (!ctx.tuneKey.empty()) func.attrs["tune_key"] = ctx.tuneKey;
  if (!ctx.trace.empty()) func.attrs["trace"] = ctx.trace;
  return func;
}

std::string nodeLabel(const Graph& graph, const Node& node) {
  std::string label;
  for (size_t i = 0; i < node.outputs.size(); ++i) label += (i ? ", %" : "%") + graph.value(node.outputs[i]).name;
  label += " = " + node.op;
  if (!node.location.empty()) label += " (" + node.location + ")";
  return label;
}

/// Builds the plan and the deduplicated kernels.
class GraphLowering {
 public:
  GraphLowering(const Graph& graph, const LowerOptions& options) : m_graph(graph), m_options(options), m_root(this) {}

  LoweredModule run() {
    createSlots();
    for (NodeId id = 0; id < static_cast<NodeId>(m_graph.nodes().size()); ++id) {
      const Node& node = m_graph.node(id);
      if (!node.regions.empty()) {
        m_module.plan.calls.push_back(controlCall(id));
        continue;
      }
      if (node.group >= 0) {
        if (id == m_graph.groups()[node.group].root()) m_module.plan.calls.push_back(groupCall(node.group));
        continue;
      }
      runtime::KernelCall call;
      const bool alone = lowersAsGroupOfOne(m_graph, id);
      call.kernel = alone ? kernelForGroupOfOne(id) : kernelFor(fromNode(m_graph, id));
      // A group's parameters are its inputs: an operand used twice is passed once.
      for (ValueId v : alone ? groupInputs(m_graph, FusedGroup{node.op, id, id + 1}) : node.inputs)
        call.args.push_back(m_slotOf.at(v));
      for (ValueId v : node.outputs) call.args.push_back(m_slotOf.at(v));
      call.numOutputs = static_cast<int>(node.outputs.size());
      call.node = m_labelPrefix + nodeLabel(m_graph, node);
      m_module.plan.calls.push_back(std::move(call));
    }
    planOutputs();
    return std::move(m_module);
  }

 private:
  /// A region of an if/loop node, lowered into a sub-plan whose kernels join the root's.
  GraphLowering(const Graph& graph, GraphLowering* root, std::string labelPrefix)
      : m_graph(graph), m_options(root->m_options), m_root(root), m_labelPrefix(std::move(labelPrefix)) {}

  // An if/loop node: its operands, then its outputs; each region becomes a sub-plan.
  runtime::KernelCall controlCall(NodeId id) {
    const Node& node = m_graph.node(id);
    runtime::KernelCall call;
    call.kind = node.op == "if" ? runtime::CallKind::If : runtime::CallKind::Loop;
    for (ValueId v : node.inputs) call.args.push_back(m_slotOf.at(v));
    for (ValueId v : node.outputs) call.args.push_back(m_slotOf.at(v));
    call.numOutputs = static_cast<int>(node.outputs.size());
    call.node = m_labelPrefix + nodeLabel(m_graph, node);
    static const char* const kIfNames[] = {"then", "else"};
    for (size_t r = 0; r < node.regions.size(); ++r) {
      std::string region = call.kind == runtime::CallKind::If ? kIfNames[r] : "body";
      std::string prefix = m_labelPrefix + "%" + m_graph.value(node.outputs[0]).name + "." + region + " | ";
      LoweredModule sub = GraphLowering(*node.regions[r], m_root, prefix).run();
      KILN_ASSERT(sub.funcs.empty(), "a region's kernels belong to the root module");
      call.regions.push_back(static_cast<int>(m_module.plan.regions.size()));
      m_module.plan.regions.push_back(std::move(sub.plan));
    }
    return call;
  }

  /// Kernels are shared by the whole module: a region's calls reuse the enclosing graph's.
  std::vector<tir::PrimFunc>& funcs() { return m_root->m_module.funcs; }
  std::map<std::string, std::string>& funcByKey() { return m_root->m_funcByKey; }

  /// `name`, or name_2, name_3, ... when a kernel already has it (groups of different regions
  /// may share a name).
  std::string freshKernelName(const std::string& name) {
    std::string fresh = name;
    for (int i = 2; !m_root->m_kernelNames.insert(fresh).second; ++i) fresh = name + "_" + std::to_string(i);
    return fresh;
  }
  int addSlot(const Value& v, runtime::SlotKind kind, int index) {
    m_module.plan.slots.push_back(runtime::TensorSlot{v.name, v.type.dtype, v.type.shape, kind, index});
    return static_cast<int>(m_module.plan.slots.size() - 1);
  }

  // One call per fused group: its inputs, then the root's outputs.
  runtime::KernelCall groupCall(int group) {
    const FusedGroup& g = m_graph.groups()[group];
    const Node& root = m_graph.node(g.root());
    runtime::KernelCall call;
    call.kernel = kernelForGroup(group);
    for (ValueId v : groupInputs(m_graph, group)) call.args.push_back(m_slotOf.at(v));
    for (ValueId v : root.outputs) call.args.push_back(m_slotOf.at(v));
    call.numOutputs = static_cast<int>(root.outputs.size());
    call.node = nodeLabel(m_graph, root);
    call.node.replace(call.node.find(" = ") + 3, root.op.size(), "@" + g.name);
    call.node = m_labelPrefix + call.node;
    return call;
  }

  std::string kernelForGroup(int group) {
    std::string key = groupWorkloadKey(m_graph, group);
    auto it = funcByKey().find(key);
    if (it != funcByKey().end()) return it->second;
    std::string name = freshKernelName(m_graph.groups()[group].name);
    tir::PrimFunc func = lowerGroup(m_graph, group, name, m_options);
    funcs().push_back(std::move(func));
    funcByKey().emplace(key, name);
    return name;
  }

  // One slot per graph input, used constant and node output, in value order. Values computed
  // inside a fused group (all but its root's) never reach memory and get no slot.
  void createSlots() {
    std::vector<bool> used(m_graph.values().size(), false);
    for (const Node& n : m_graph.nodes())
      for (ValueId v : n.inputs) used[v] = true;
    for (ValueId v : m_graph.outputs()) used[v] = true;
    m_slotOf.assign(m_graph.values().size(), -1);
    auto& plan = m_module.plan;
    for (ValueId id = 0; id < static_cast<ValueId>(m_graph.values().size()); ++id) {
      const Value& v = m_graph.value(id);
      if (v.inputIndex >= 0) {
        m_slotOf[id] = addSlot(v, runtime::SlotKind::Input, v.inputIndex);
      } else if (v.isConstant()) {
        if (!used[id]) continue;
        m_slotOf[id] = addSlot(v, runtime::SlotKind::Constant, static_cast<int>(plan.constants.size()));
        plan.constants.push_back(*v.constant);
      } else {
        int group = m_graph.node(v.producer).group;
        if (group >= 0 && v.producer != m_graph.groups()[group].root()) continue;
        m_slotOf[id] = addSlot(v, runtime::SlotKind::Intermediate, -1);
      }
    }
    for (ValueId v : m_graph.inputs()) plan.inputs.push_back(m_slotOf[v]);
  }

  // Outputs that are inputs or constants, or that repeat an earlier output, are copied into a
  // fresh slot so every output slot is written by a call and distinct.
  void planOutputs() {
    std::set<ValueId> seen;
    auto& plan = m_module.plan;
    for (size_t i = 0; i < m_graph.outputs().size(); ++i) {
      ValueId id = m_graph.outputs()[i];
      const Value& v = m_graph.value(id);
      bool needsCopy = v.producer < 0 || !seen.insert(id).second;
      if (!needsCopy) {
        plan.outputs.push_back(m_slotOf[id]);
        continue;
      }
      Value copyValue = v;
      copyValue.name = v.name + "_out" + std::to_string(i);
      int slot = addSlot(copyValue, runtime::SlotKind::Intermediate, -1);
      OpApplication app{"copy", {}, {v.type}, {v.type}, {v.name}, {copyValue.name}, " (output " + std::to_string(i) + ")"};
      runtime::KernelCall call;
      call.kernel = kernelFor(app);
      call.args = {m_slotOf[id], slot};
      call.numOutputs = 1;
      call.node = m_labelPrefix + "%" + copyValue.name + " = copy (output " + std::to_string(i) + ")";
      plan.calls.push_back(std::move(call));
      plan.outputs.push_back(slot);
    }
  }

  // The kernel computing `app`, lowered on first use of its workload key.
  std::string kernelFor(const OpApplication& app) {
    std::string key = makeKey(app.op, app.attrs, app.inTypes, app.outTypes);
    auto it = funcByKey().find(key);
    if (it != funcByKey().end()) return it->second;
    std::string name = freshKernelName(app.op + "_" + std::to_string(m_root->m_opCount[app.op]++));
    funcs().push_back(lowerApplication(app, name, m_options));
    funcByKey().emplace(key, name);
    return name;
  }

  // The kernel of op `id` outside any group lowered as a group of one (lowersAsGroupOfOne), on
  // first use of its workload key.
  std::string kernelForGroupOfOne(NodeId id) {
    const std::string& op = m_graph.node(id).op;
    std::string key = groupWorkloadKey(m_graph, FusedGroup{op, id, id + 1});
    auto it = funcByKey().find(key);
    if (it != funcByKey().end()) return it->second;
    std::string name = freshKernelName(op + "_" + std::to_string(m_root->m_opCount[op]++));
    funcs().push_back(lowerAsGroupOfOne(m_graph, id, name, m_options));
    funcByKey().emplace(key, name);
    return name;
  }

  const Graph& m_graph;
  LowerOptions m_options;
  GraphLowering* m_root;        // owner of the kernels (itself, for the whole graph)
  std::string m_labelPrefix;    // "%y.body | " inside a region: profiles say where a call runs
  LoweredModule m_module;       // the kernels (root only) and this graph's plan
  std::vector<int> m_slotOf;
  std::map<std::string, std::string> m_funcByKey;  // root only
  std::map<std::string, int> m_opCount;            // root only
  std::set<std::string> m_kernelNames;             // root only
};

}  // namespace

bool canLower(const std::string& op) { return lowerings().count(op) != 0; }

OpLowering findLowering(const std::string& op) {
  auto it = lowerings().find(op);
  return it == lowerings().end() ? nullptr : it->second;
}

std::string sanitizeName(const std::string& name) { return sanitize(name); }

tir::PrimFunc lowerNode(const Graph& graph, NodeId node, const std::string& funcName,
                        const LowerOptions& options) {
  return lowerApplication(fromNode(graph, node), funcName, options);
}

std::string workloadKey(const Graph& graph, NodeId node) {
  OpApplication app = fromNode(graph, node);
  return makeKey(app.op, app.attrs, app.inTypes, app.outTypes);
}

LoweredModule lowerGraph(const Graph& graph, const LowerOptions& options) {
  return GraphLowering(graph, options).run();
}

}  // namespace kiln::core::lower
