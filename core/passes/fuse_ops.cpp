// Operator fusion by post-dominators
// ==================================
//
// The problem. A node's result is needed by every consumer of it. If we fuse a producer into one
// consumer's kernel while another consumer still reads the producer's value from memory, the
// value must be written anyway and nothing is gained; worse, on a diamond
//
//        x ─► a ─┐
//         └─► b ─┴─► add
//
// fusing x with a alone would leave b needing an intermediate that no longer exists. So a node
// may only be fused forward together with *every* path that leaves it, up to the point where the
// paths meet again. That meeting point is the node's immediate post-dominator.
//
// Post-dominators. Add a virtual sink that consumes every graph output. Node p post-dominates n
// when every path from n to the sink passes through p; the immediate post-dominator ipdom(n) is
// the closest such p. Because nodes are stored in topological order, all consumers of n come
// after n, so one sweep in reverse order computes the tree: ipdom(n) is the lowest common
// ancestor, in the post-dominator tree built so far, of n's consumers (the sink when n is a
// graph output). When that is the sink, n's value leaves any candidate group and n ends one.
//
// Growing groups (after TVM's FuseOps). Every node starts as its own group (union-find). Visit
// nodes in topological order; for node n with p = ipdom(n), let P be the nodes on paths from n
// to p (everything reachable from n that comes before p, plus p itself; all of it reaches p,
// since p post-dominates n). Merge n's group, the groups of P's nodes and p's group into one
// candidate S, and keep it when S is a group lowering can compile as one kernel:
//
//   1. every op in S can be lowered in a group (lower::fusedRole): at most one anchor
//      (OutEWiseFusable: conv2d, dense, matmul, pooling) or one reduction (mean, sum),
//      everything else an element op (elementwise, broadcast, injective);
//   2. with an anchor A: A's inputs come from outside S, and every other member is elementwise or
//      broadcast with A's output type, so lowering evaluates it per output element in A's
//      epilogue (OpContext::epilogue); a strided_slice of a value computed outside S (a residual
//      that merge-parallel sliced out of a wider convolution) may join too, read at the remapped
//      index;
//   3. no value computed in S is broadcast to a larger shape inside S (a member's in-group
//      operands have its output shape, injective ops and the reduction excepted, and take's
//      indices, read once per gathered element, come from outside S): every op then runs once
//      per output element (per input element of the reduction), never redundantly;
//   3b. with a reduction R: R is S's root (its lowering reads its input through a prologue,
//      OpContext::prologue, that evaluates the other members at every position it reads; ops
//      after a reduction would need its result per element of a different shape), and every
//      other member is elementwise or broadcast, so it evaluates at any index of R's input;
//   3c. when R reduces several axes, every operand of the other members is of R's input's shape
//      or constant along the reduced axes (lower::readsAlongRows): R then reads along its rows
//      in vectors, where an operand varying along the reduced axes otherwise (a positional bias
//      before a global mean) would make it scalar, slower than the unfused ops;
//   4. concat appears only as S's last node (its inputs are lowered as one loop nest each);
//   5. only S's last node (the root) has uses outside S or is a graph output, and |S| ≤
//      max-depth;
//   6. S is convex: no path leaves S and comes back. Merging along all paths to a
//      post-dominator keeps that by construction when the merged groups hold nothing else;
//      groups formed earlier may, so it is checked explicitly.
//
// Visiting in topological order grows a group along a chain: conv2d merges with its bias add,
// the resulting group merges with the relu after it (the add's ipdom), and so on until the next
// op cannot join (another conv2d: rule 1) or the value is used twice in places that do not meet
// within fusable ops. A residual add joins the group of whichever branch reaches it through
// fusable ops; the other branch's value is read from memory by the epilogue.
//
// Emitting. Groups of two or more nodes become graph FusedGroups. A group DAG is acyclic
// (convexity), so the nodes are re-emitted group by group in a topological order of groups
// (ties broken by first node, which keeps the original order wherever possible), constants a
// group reads are emitted before it, and each group is named after its ops.
//
// Reductions. Visiting in topological order, mean(relu(add(x, y))) grows {add, relu} and then
// takes the mean (relu's ipdom) as its root; the mean's own ipdom never joins (rule 3b). A value
// also used by a later op that meets the reduction's result (exp(x) in exp(x) / sum(exp(x)))
// has an ipdom after the reduction, so it stays out and the sum reads it from memory.
//
// Not done (yet): fusing the elementwise ops that follow a reduction (its result per element of
// the smaller output shape: a second nest), and the injective ops that follow an anchor (the
// epilogue computes at the anchor's own output index).
#include "core/passes/fuse_ops.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "core/ir/op_registry.h"
#include "core/lower/lower.h"
#include "core/passes/rewrite.h"
#include "runtime/error.h"

namespace kiln::core::passes {
namespace {

constexpr NodeId kSink = -1;

OpPattern patternOf(const Node& node) {
  const OpDef* def = findOp(node.op);
  return def ? def->pattern : OpPattern::Opaque;
}

bool isInjectiveOp(const Node& node) { return patternOf(node) == OpPattern::Injective; }

class Fuser {
 public:
  Fuser(const Graph& graph, const FuseOpsOptions& options) : m_graph(graph), m_options(options) {
    m_numNodes = static_cast<NodeId>(graph.nodes().size());
    buildConsumers();
    computePostDominators();
    m_parent.resize(m_numNodes);
    std::iota(m_parent.begin(), m_parent.end(), 0);
    m_members.resize(m_numNodes);
    for (NodeId n = 0; n < m_numNodes; ++n) m_members[n] = {n};
    for (NodeId n = 0; n < m_numNodes; ++n) m_role.push_back(lower::fusedRole(graph.node(n).op));
  }

  /// Runs the merging; returns the groups of two or more nodes (sorted members).
  std::vector<std::vector<NodeId>> run() {
    for (NodeId n = 0; n < m_numNodes; ++n) {
      NodeId p = m_ipdom[n];
      if (p == kSink || m_role[n] == lower::FusedRole::None) continue;
      std::vector<NodeId> candidate = unionWithPaths(n, p);
      if (candidate.empty() || !canForm(candidate)) continue;
      for (NodeId m : candidate) unite(n, m);
    }
    std::vector<std::vector<NodeId>> groups;
    for (NodeId n = 0; n < m_numNodes; ++n) {
      if (find(n) == n && m_members[n].size() >= 2) groups.push_back(m_members[n]);
    }
    return groups;
  }

 private:
  // ---- the dataflow graph and its post-dominator tree -------------------------------------

  void buildConsumers() {
    m_consumers.assign(m_numNodes, {});
    m_feedsSink.assign(m_numNodes, false);
    for (NodeId n = 0; n < m_numNodes; ++n) {
      for (ValueId v : m_graph.node(n).inputs) {
        NodeId p = m_graph.value(v).producer;
        if (p >= 0) m_consumers[p].push_back(n);
      }
    }
    for (auto& c : m_consumers) {
      std::sort(c.begin(), c.end());
      c.erase(std::unique(c.begin(), c.end()), c.end());
    }
    for (ValueId v : m_graph.outputs()) {
      NodeId p = m_graph.value(v).producer;
      if (p >= 0) m_feedsSink[p] = true;
    }
  }

  void computePostDominators() {
    m_ipdom.assign(m_numNodes, kSink);
    m_depth.assign(m_numNodes, 1);
    for (NodeId n = m_numNodes; n-- > 0;) {
      if (m_feedsSink[n] || m_consumers[n].empty()) continue;  // ipdom is the sink
      NodeId lca = m_consumers[n][0];
      for (size_t i = 1; i < m_consumers[n].size() && lca != kSink; ++i)
        lca = commonAncestor(lca, m_consumers[n][i]);
      m_ipdom[n] = lca;
      m_depth[n] = lca == kSink ? 1 : m_depth[lca] + 1;
    }
  }

  NodeId commonAncestor(NodeId a, NodeId b) const {
    while (a != b) {
      if (a == kSink || b == kSink) return kSink;
      if (m_depth[a] > m_depth[b])
        a = m_ipdom[a];
      else if (m_depth[b] > m_depth[a])
        b = m_ipdom[b];
      else {
        a = m_ipdom[a];
        b = m_ipdom[b];
      }
    }
    return a;
  }

  // ---- union-find over groups --------------------------------------------------------------

  NodeId find(NodeId n) {
    while (m_parent[n] != n) n = m_parent[n] = m_parent[m_parent[n]];
    return n;
  }

  void unite(NodeId a, NodeId b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (a > b) std::swap(a, b);
    m_parent[b] = a;
    std::vector<NodeId> merged;
    std::merge(m_members[a].begin(), m_members[a].end(), m_members[b].begin(), m_members[b].end(),
               std::back_inserter(merged));
    m_members[a] = std::move(merged);
    m_members[b].clear();
  }

  /// n's group ∪ the groups of every node on a path n → p (p included), sorted; empty when they
  /// are one group already.
  std::vector<NodeId> unionWithPaths(NodeId n, NodeId p) {
    std::set<NodeId> roots{find(n)};
    std::vector<bool> seen(m_numNodes, false);
    std::vector<NodeId> stack{n};
    seen[n] = true;
    while (!stack.empty()) {
      NodeId cur = stack.back();
      stack.pop_back();
      for (NodeId c : m_consumers[cur]) {
        if (c > p || seen[c]) continue;
        seen[c] = true;
        roots.insert(find(c));
        if (c != p) stack.push_back(c);
      }
    }
    if (roots.size() == 1) return {};
    std::vector<NodeId> members;
    for (NodeId r : roots) members.insert(members.end(), m_members[r].begin(), m_members[r].end());
    std::sort(members.begin(), members.end());
    return members;
  }

  // ---- what lowering can compile as one kernel ---------------------------------------------

  bool canForm(const std::vector<NodeId>& members) const {
    if (static_cast<int64_t>(members.size()) > m_options.maxDepth) return false;
    std::vector<bool> in(m_numNodes, false);
    for (NodeId m : members) in[m] = true;
    auto producedInside = [&](ValueId v) {
      NodeId p = m_graph.value(v).producer;
      return p >= 0 && in[p];
    };
    NodeId root = members.back();
    NodeId anchor = -1;
    bool reduceRoot = m_role[root] == lower::FusedRole::Reduce;
    // rule 3c: a reduction over several axes reads its members along its rows
    const Node& rootNode = m_graph.node(root);
    const bool severalAxes =
        reduceRoot && rootNode.attrs.has("axes") && rootNode.attrs.getInts("axes").size() > 1;
    auto alongRows = [&](ValueId v) { return lower::readsAlongRows(m_graph, rootNode, m_graph.type(v)); };
    for (NodeId m : members) {
      const Node& node = m_graph.node(m);
      if (node.outputs.size() != 1 || m_role[m] == lower::FusedRole::None) return false;
      if (m_role[m] == lower::FusedRole::Anchor) {
        if (anchor >= 0 || reduceRoot) return false;
        anchor = m;
      }
      if (m_role[m] == lower::FusedRole::Reduce && m != root) return false;  // rule 3b
      if (reduceRoot && m != root) {
        OpPattern pattern = patternOf(node);
        if (pattern != OpPattern::ElemWise && pattern != OpPattern::Broadcast) return false;
        if (severalAxes && !std::all_of(node.inputs.begin(), node.inputs.end(), alongRows)) return false;
      }
      if (node.op == "concat" && m != root) return false;
      if (m != root && (m_feedsSink[m] || usedOutside(m, in))) return false;
      // rule 3: no broadcasting of in-group values; take's indices (read once per gathered
      // element) come from outside
      if (node.op == "take" && producedInside(node.inputs[1])) return false;
      if (!isInjectiveOp(node) && m_role[m] != lower::FusedRole::Reduce) {
        for (ValueId v : node.inputs) {
          if (producedInside(v) && m_graph.type(v).shape != m_graph.type(node.outputs[0]).shape) return false;
        }
      }
    }
    if (anchor >= 0) {
      const Node& a = m_graph.node(anchor);
      for (ValueId v : a.inputs)
        if (producedInside(v)) return false;
      const TensorType& anchorType = m_graph.type(a.outputs[0]);
      for (NodeId m : members) {
        if (m == anchor) continue;
        const Node& node = m_graph.node(m);
        OpPattern pattern = patternOf(node);
        bool sideSlice = node.op == "strided_slice" && !producedInside(node.inputs[0]);
        if (pattern != OpPattern::ElemWise && pattern != OpPattern::Broadcast && !sideSlice) return false;
        if (!(m_graph.type(node.outputs[0]) == anchorType)) return false;
      }
    }
    return isConvex(members, in);
  }

  bool usedOutside(NodeId m, const std::vector<bool>& in) const {
    for (NodeId c : m_consumers[m])
      if (!in[c]) return true;
    return false;
  }

  /// No path leaves the set and re-enters it.
  bool isConvex(const std::vector<NodeId>& members, const std::vector<bool>& in) const {
    NodeId last = members.back();
    std::vector<bool> seen(m_numNodes, false);
    std::vector<NodeId> stack;
    for (NodeId m : members) {
      for (NodeId c : m_consumers[m]) {
        if (!in[c] && c < last && !seen[c]) {
          seen[c] = true;
          stack.push_back(c);
        }
      }
    }
    while (!stack.empty()) {
      NodeId cur = stack.back();
      stack.pop_back();
      for (NodeId c : m_consumers[cur]) {
        if (in[c]) return false;
        if (c < last && !seen[c]) {
          seen[c] = true;
          stack.push_back(c);
        }
      }
    }
    return true;
  }

  const Graph& m_graph;
  FuseOpsOptions m_options;
  NodeId m_numNodes = 0;
  std::vector<std::vector<NodeId>> m_consumers;
  std::vector<bool> m_feedsSink;
  std::vector<NodeId> m_ipdom;
  std::vector<int> m_depth;
  std::vector<NodeId> m_parent;
  std::vector<std::vector<NodeId>> m_members;
  std::vector<lower::FusedRole> m_role;
};

/// "fused_conv2d_add_relu": the ops in order (long groups keep the first few).
std::string groupStem(const Graph& graph, const std::vector<NodeId>& members) {
  constexpr size_t kMaxOpsInName = 6;
  std::string stem = "fused";
  for (size_t i = 0; i < members.size() && i < kMaxOpsInName; ++i) stem += "_" + graph.node(members[i]).op;
  if (members.size() > kMaxOpsInName) stem += "_etc";
  return stem;
}

/// Units to emit (a group, or a single node) in a topological order of units, ties broken by
/// the first node so the original order survives where it can.
std::vector<std::vector<NodeId>> emissionOrder(const Graph& graph,
                                               const std::vector<std::vector<NodeId>>& groups) {
  auto numNodes = static_cast<NodeId>(graph.nodes().size());
  std::vector<int> unitOf(numNodes, -1);
  std::vector<std::vector<NodeId>> units = groups;
  for (size_t u = 0; u < units.size(); ++u)
    for (NodeId n : units[u]) unitOf[n] = static_cast<int>(u);
  for (NodeId n = 0; n < numNodes; ++n) {
    if (unitOf[n] >= 0) continue;
    unitOf[n] = static_cast<int>(units.size());
    units.push_back({n});
  }
  std::vector<std::set<int>> successors(units.size());
  std::vector<int> indegree(units.size(), 0);
  for (NodeId n = 0; n < numNodes; ++n) {
    for (ValueId v : graph.node(n).inputs) {
      NodeId p = graph.value(v).producer;
      if (p < 0 || unitOf[p] == unitOf[n]) continue;
      if (successors[unitOf[p]].insert(unitOf[n]).second) ++indegree[unitOf[n]];
    }
  }
  using Entry = std::pair<NodeId, int>;  // (first node, unit)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (size_t u = 0; u < units.size(); ++u)
    if (indegree[u] == 0) ready.push({units[u].front(), static_cast<int>(u)});
  std::vector<std::vector<NodeId>> order;
  while (!ready.empty()) {
    int u = ready.top().second;
    ready.pop();
    order.push_back(units[u]);
    for (int s : successors[u])
      if (--indegree[s] == 0) ready.push({units[s].front(), s});
  }
  KILN_ASSERT(order.size() == units.size(), "fuse-ops: the fused groups form a cycle");
  return order;
}

}  // namespace

bool fuseOps(Graph& graph, const FuseOpsOptions& options, PassCounters* counters) {
  if (!graph.groups().empty()) return false;
  std::vector<std::vector<NodeId>> groups = Fuser(graph, options).run();
  if (groups.empty()) return false;

  GraphRewriter rw(graph);
  std::map<std::string, int> stemCount;
  int64_t fusedNodes = 0, anchored = 0;
  for (const std::vector<NodeId>& unit : emissionOrder(graph, groups)) {
    if (unit.size() == 1) {
      rw.copyNode(unit[0]);
      continue;
    }
    // Constants first, so the group's block holds only its nodes.
    for (NodeId n : unit)
      for (ValueId v : graph.node(n).inputs)
        if (graph.value(v).isConstant()) rw.map(v);
    auto first = static_cast<NodeId>(rw.target().nodes().size());
    bool hasAnchor = false;
    for (NodeId n : unit) {
      rw.copyNode(n);
      hasAnchor = hasAnchor || lower::fusedRole(graph.node(n).op) == lower::FusedRole::Anchor;
    }
    std::string stem = groupStem(graph, unit);
    std::string name = stem + "_" + std::to_string(stemCount[stem]++);
    rw.target().addGroup(name, first, static_cast<NodeId>(rw.target().nodes().size()));
    fusedNodes += static_cast<int64_t>(unit.size());
    anchored += hasAnchor;
  }
  graph = rw.finish();
  bump(counters, "groups", static_cast<int64_t>(groups.size()));
  bump(counters, "ops-fused", fusedNodes);
  bump(counters, "anchored", anchored);
  return true;
}

}  // namespace kiln::core::passes
