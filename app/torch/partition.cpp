// Splitting a prepared TorchScript graph into compiled and libtorch segments (see partition.h for
// the algorithm).
#include "app/torch/partition.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "runtime/error.h"

namespace kiln::torch::detail {
namespace {

enum class Kind { Neutral, Kiln, Torch };

bool holdsTensor(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  for (const c10::TypePtr& t : type->containedTypes()) {
    if (holdsTensor(t)) return true;
  }
  return false;
}

bool isPlainTensor(const jit::Value* v) { return v->type()->kind() == c10::TypeKind::TensorType; }

bool isCounted(const jit::Node* n) {
  return n->kind().is_aten() || n->kind() == c10::prim::If || n->kind() == c10::prim::Loop;
}

/// True when `def` is (nested) inside one of `owner`'s blocks.
bool isInside(const jit::Node* def, const jit::Node* owner) {
  for (const jit::Block* b = def->owningBlock(); b; b = b->owningNode() ? b->owningNode()->owningBlock() : nullptr) {
    if (b->owningNode() == owner) return true;
  }
  return false;
}

void collectFree(jit::Block* block, const jit::Node* owner, std::vector<jit::Value*>& out) {
  auto take = [&](jit::Value* v) {
    if (!isInside(v->node(), owner) && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  for (jit::Node* n : block->nodes()) {
    for (jit::Value* v : n->inputs()) take(v);
    for (jit::Block* b : n->blocks()) collectFree(b, owner, out);
  }
  for (jit::Value* v : block->outputs()) take(v);
}

/// The values a top-level node reads: its inputs and the outer values its blocks use.
std::vector<jit::Value*> needed(jit::Node* node) {
  std::vector<jit::Value*> out(node->inputs().begin(), node->inputs().end());
  for (jit::Block* b : node->blocks()) collectFree(b, node, out);
  return out;
}

void nestedNodes(const jit::Block* block, std::vector<const jit::Node*>& out) {
  for (const jit::Node* n : block->nodes()) {
    out.push_back(n);
    for (const jit::Block* b : n->blocks()) nestedNodes(b, out);
  }
}

struct Crossing {
  const jit::Value* value;
  int from;               // producing segment; -1: a graph input
  int to;                 // consuming segment; segments.size(): the graph's results
  jit::Node* consumer;    // the top-level node that needed it (nullptr for results)
};

class Planner {
 public:
  Planner(std::shared_ptr<jit::Graph> graph, const std::vector<importers::NodeSupport>& verdicts, int minOps,
          const std::string& forceReason)
      : m_graph(std::move(graph)), m_minOps(std::max(1, minOps)) {
    for (const auto& v : verdicts) m_verdicts[v.node] = &v;
    // A returned tuple is built by the executor: its elements are the results.
    if (m_graph->outputs().size() == 1) {
      jit::Value* out = m_graph->outputs()[0];
      if (out->node()->kind() == c10::prim::TupleConstruct && out->uses().size() == 1) m_resultTuple = out->node();
    }
    for (jit::Value* v : m_resultTuple ? m_resultTuple->inputs() : m_graph->outputs()) m_results.push_back(v);
    for (jit::Node* n : m_graph->nodes())
      if (n != m_resultTuple) m_nodes.push_back(n);
    classify(forceReason);
  }

  Partition run() {
    for (;;) {
      segment();
      build();
      if (!demoteViolations() && !demoteSmallSegments()) break;
    }
    return finish();
  }

 private:
  struct Builder {
    std::shared_ptr<jit::Graph> graph = std::make_shared<jit::Graph>();
    std::unordered_map<const jit::Value*, jit::Value*> env;
    std::vector<const jit::Value*> inputs, outputs;
    std::unordered_set<const jit::Value*> outputSet;
    std::vector<jit::Node*> members;  // top-level nodes, graph order
  };

  void classify(const std::string& forceReason);
  void segment();
  void build();
  bool demoteViolations();
  bool demoteSmallSegments();
  Partition finish();

  void demote(const jit::Node* n, const std::string& reason) {
    if (m_kind[n] != Kind::Kiln) return;
    m_kind[n] = Kind::Torch;
    m_reason[n] = reason;
  }
  const std::vector<jit::Node*>& producers(jit::Node* n);
  jit::Value* valueIn(int seg, jit::Value* v);
  void cloneInto(int seg, jit::Node* n);
  bool mapped(const jit::Node* n) const {
    auto it = m_verdicts.find(n);
    return it != m_verdicts.end() && it->second->status == importers::OpStatus::Supported;
  }

  std::shared_ptr<jit::Graph> m_graph;
  int m_minOps;
  std::unordered_map<const jit::Node*, const importers::NodeSupport*> m_verdicts;
  std::vector<jit::Node*> m_nodes;
  std::unordered_map<const jit::Node*, Kind> m_kind;
  std::unordered_map<const jit::Node*, std::string> m_reason;
  // Per round:
  std::unordered_map<const jit::Node*, int> m_segment;
  std::vector<Kind> m_segKinds;
  std::unordered_map<const jit::Node*, std::vector<jit::Node*>> m_producers;
  std::vector<Builder> m_builders;
  std::vector<Crossing> m_crossings;
  jit::Node* m_consumer = nullptr;
  int m_resultSegment = -1;
  jit::Node* m_resultTuple = nullptr;
  std::vector<jit::Value*> m_results;  // the final segment building neutral results, or -1
};

void Planner::classify(const std::string& forceReason) {
  for (jit::Node* n : m_nodes) {
    if (n->kind() == c10::prim::Constant) {
      m_kind[n] = Kind::Neutral;
      continue;
    }
    if (!forceReason.empty()) {
      m_kind[n] = Kind::Torch;
      m_reason[n] = forceReason;
      continue;
    }
    auto it = m_verdicts.find(n);
    if (it == m_verdicts.end()) {
      m_kind[n] = Kind::Torch;
      m_reason[n] = "not judged by the importer";
      continue;
    }
    const importers::NodeSupport& v = *it->second;
    if (v.status == importers::OpStatus::Unsupported) {
      m_kind[n] = Kind::Torch;
      m_reason[n] = v.message;
      continue;
    }
    bool anyMapped = v.status == importers::OpStatus::Supported;
    std::string innerFailure;
    std::vector<const jit::Node*> inner;
    for (const jit::Block* b : n->blocks()) nestedNodes(b, inner);
    for (const jit::Node* i : inner) {
      auto iv = m_verdicts.find(i);
      if (iv == m_verdicts.end()) continue;  // the branch not taken
      if (iv->second->status == importers::OpStatus::Unsupported && innerFailure.empty())
        innerFailure = iv->second->message;
      anyMapped = anyMapped || iv->second->status == importers::OpStatus::Supported;
    }
    if (!innerFailure.empty()) {
      m_kind[n] = Kind::Torch;
      m_reason[n] = innerFailure;
      continue;
    }
    bool tensorOut = std::any_of(n->outputs().begin(), n->outputs().end(),
                                 [](const jit::Value* o) { return holdsTensor(o->type()); });
    m_kind[n] = anyMapped || tensorOut ? Kind::Kiln : Kind::Neutral;
  }
}

/// The non-neutral nodes `n` depends on, looking through neutral nodes.
const std::vector<jit::Node*>& Planner::producers(jit::Node* n) {
  auto it = m_producers.find(n);
  if (it != m_producers.end()) return it->second;
  std::vector<jit::Node*> out;
  for (jit::Value* v : needed(n)) {
    jit::Node* p = v->node();
    if (p->kind() == c10::prim::Param) continue;
    if (m_kind[p] == Kind::Neutral) {
      for (jit::Node* q : producers(p))
        if (std::find(out.begin(), out.end(), q) == out.end()) out.push_back(q);
    } else if (std::find(out.begin(), out.end(), p) == out.end()) {
      out.push_back(p);
    }
  }
  return m_producers[n] = std::move(out);
}

void Planner::segment() {
  m_segment.clear();
  m_segKinds.clear();
  m_producers.clear();
  for (jit::Node* n : m_nodes) {
    Kind kind = m_kind[n];
    if (kind == Kind::Neutral) continue;
    int bound = 0;
    for (jit::Node* p : producers(n)) {
      int s = m_segment.at(p);
      bound = std::max(bound, m_segKinds[s] == kind ? s : s + 1);
    }
    int seg = -1;
    for (int s = bound; s < static_cast<int>(m_segKinds.size()); ++s) {
      if (m_segKinds[s] == kind) {
        seg = s;
        break;
      }
    }
    if (seg < 0) {
      seg = static_cast<int>(m_segKinds.size());
      m_segKinds.push_back(kind);
    }
    m_segment[n] = seg;
  }
}

/// Value `v` of the prepared graph inside segment `seg`'s graph: already there, a clone of its
/// neutral producer, or a new boundary input.
jit::Value* Planner::valueIn(int seg, jit::Value* v) {
  Builder& b = m_builders[seg];
  if (auto it = b.env.find(v); it != b.env.end()) return it->second;
  jit::Node* p = v->node();
  if (p->kind() != c10::prim::Param && m_kind[p] == Kind::Neutral) {
    cloneInto(seg, p);
    return m_builders[seg].env.at(v);
  }
  int from = p->kind() == c10::prim::Param ? -1 : m_segment.at(p);
  KILN_ASSERT(from != seg, "partition: value %" + v->debugName() + " used before it is defined");
  jit::Value* in = b.graph->addInput();
  in->setType(v->type());
  if (v->hasDebugName()) in->setDebugName(v->debugNameBase());
  b.env[v] = in;
  b.inputs.push_back(v);
  m_crossings.push_back({v, from, seg, m_consumer});
  if (from >= 0 && m_builders[from].outputSet.insert(v).second) m_builders[from].outputs.push_back(v);
  return in;
}

void Planner::cloneInto(int seg, jit::Node* n) {
  for (jit::Value* v : needed(n)) valueIn(seg, v);
  Builder& b = m_builders[seg];
  jit::Node* clone = b.graph->createClone(n, [&b](jit::Value* v) { return b.env.at(v); });
  b.graph->appendNode(clone);
  for (size_t i = 0; i < n->outputs().size(); ++i) b.env[n->output(i)] = clone->output(i);
}

void Planner::build() {
  m_builders.clear();
  m_crossings.clear();
  m_resultSegment = -1;
  m_builders.resize(m_segKinds.size());
  for (jit::Node* n : m_nodes) {
    if (m_kind[n] == Kind::Neutral) continue;
    int seg = m_segment.at(n);
    m_consumer = n;
    cloneInto(seg, n);
    m_builders[seg].members.push_back(n);
  }
  m_consumer = nullptr;
  // Results: values of segments cross to the end; neutral ones are built by a final segment.
  int end = static_cast<int>(m_builders.size());
  bool needFinal = false;
  for (jit::Value* v : m_results) {
    jit::Node* p = v->node();
    if (p->kind() == c10::prim::Param) continue;
    if (m_kind[p] == Kind::Neutral) {
      needFinal = true;
      continue;
    }
    int from = m_segment.at(p);
    m_crossings.push_back({v, from, end, nullptr});
    if (m_builders[from].outputSet.insert(v).second) m_builders[from].outputs.push_back(v);
  }
  if (!needFinal) return;
  m_resultSegment = end;
  m_builders.emplace_back();
  m_segKinds.push_back(Kind::Torch);
  for (jit::Value* v : m_results) {
    if (v->node()->kind() == c10::prim::Param || m_kind[v->node()] != Kind::Neutral) continue;
    valueIn(end, v);
    Builder& b = m_builders[end];
    if (b.outputSet.insert(v).second) b.outputs.push_back(v);
  }
}

/// Compiled segments exchange plain tensors only.
bool Planner::demoteViolations() {
  bool changed = false;
  auto nseg = static_cast<int>(m_segKinds.size());
  for (const Crossing& c : m_crossings) {
    if (isPlainTensor(c.value)) continue;
    bool fromKiln = c.from >= 0 && m_segKinds[c.from] == Kind::Kiln;
    bool toKiln = c.to < nseg && m_segKinds[c.to] == Kind::Kiln;
    std::string type = c.value->type()->repr_str();
    if (fromKiln) {
      demote(c.value->node(), "its " + type + " result is used outside a compiled subgraph");
      changed = true;
    } else if (toKiln && c.consumer) {
      demote(c.consumer, "it reads a " + type + " computed outside a compiled subgraph");
      changed = true;
    }
  }
  return changed;
}

bool Planner::demoteSmallSegments() {
  bool changed = false;
  for (size_t s = 0; s < m_builders.size(); ++s) {
    if (m_segKinds[s] != Kind::Kiln) continue;
    const auto& members = m_builders[s].members;
    auto ops = std::count_if(members.begin(), members.end(), [&](const jit::Node* n) { return mapped(n) && isCounted(n); });
    if (ops >= m_minOps) continue;
    std::string reason = ops == 0 ? "no computation to compile"
                                  : "in a subgraph of " + std::to_string(ops) + " operator" + (ops == 1 ? "" : "s") +
                                        ", fewer than minSubgraphOps=" + std::to_string(m_minOps);
    for (jit::Node* n : members) demote(n, reason);
    changed = true;
  }
  return changed;
}

Partition Planner::finish() {
  Partition part;
  for (size_t s = 0; s < m_builders.size(); ++s) {
    Builder& b = m_builders[s];
    PlannedSegment seg;
    seg.compiled = m_segKinds[s] == Kind::Kiln;
    std::vector<jit::Value*> outs;
    for (const jit::Value* v : b.outputs) outs.push_back(b.env.at(v));
    jit::Node* tuple = b.graph->createTuple(outs);
    b.graph->appendNode(tuple);
    b.graph->registerOutput(tuple->output());
    seg.graph = b.graph;
    seg.inputs = b.inputs;
    seg.outputs = b.outputs;
    for (const jit::Node* n : b.members) {
      if (!isCounted(n)) continue;
      seg.ops.push_back(n->kind().toQualString());
      if (!seg.compiled) seg.reasons.push_back(m_reason[n]);
    }
    part.segments.push_back(std::move(seg));
  }
  part.results.assign(m_results.begin(), m_results.end());
  part.tupleResult = m_resultTuple != nullptr;
  return part;
}

}  // namespace

Partition partitionGraph(const std::shared_ptr<jit::Graph>& graph, const std::vector<importers::NodeSupport>& verdicts,
                         int minSubgraphOps, const std::string& forceReason) {
  return Planner(graph, verdicts, minSubgraphOps, forceReason).run();
}

}  // namespace kiln::torch::detail
