// Loop-nest features of a scheduled kernel; see loop_features.h.
#include "core/tir/loop_features.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "core/tir/functor.h"
#include "core/tir/schedule_analysis.h"
#include "runtime/thread_pool.h"

namespace kiln::core::tir {
namespace {

float lg(double v) { return static_cast<float>(std::log2(1.0 + std::max(0.0, v))); }

using schedule_detail::Interval;
using Ranges = std::map<const Var*, Interval>;

/// A loop extent: its value when constant, else its upper bound over the enclosing loops' ranges
/// (a window clipped at the borders counts as unclipped), else 1.
int64_t extentOf(const Expr& e, const Ranges& ranges) {
  if (const int64_t* c = asConstInt(e)) return std::max<int64_t>(0, *c);
  if (auto b = schedule_detail::boundsOf(e, ranges)) return std::max<int64_t>(0, b->hi);
  return 1;
}

struct Loop {
  const Var* var;
  int64_t extent;
  ForKind kind;
  int64_t min = 0;  // its first value (the lower bound when not constant)
};

constexpr int kSteppedLoops = 2;  // outermost loops whose one-iteration address steps are described

struct Access {
  int64_t bytes = 0;        // per execution (lanes × element size)
  bool param = false, store = false;
  std::set<const Var*> loops;  // the loop variables its index depends on
  // How far its address moves, in bytes, when the statement's i-th outermost loop advances by one
  // iteration from its start (the other loops at theirs); negative when unknown.
  double step[kSteppedLoops] = {-1, -1};
};

/// A store, or a float let's value (loads a register tile reuses), in its loop context.
struct Statement {
  std::vector<Loop> loops;  // outermost first
  double executions = 1;
  double ops = 0, vectorOps = 0, laneWeighted = 0, calls = 0;  // per execution
  std::vector<Access> accesses;
  bool isStore = true;  // false: a let's value
};

int64_t elementBytes(const Type& t) { return std::max<int64_t>(1, t.bits / 8); }

bool hasLoop(const std::vector<Loop>& loops, ForKind kind) {
  return std::any_of(loops.begin(), loops.end(), [&](const Loop& l) { return l.kind == kind; });
}

/// The innermost loop that runs one iteration after another (not vector lanes, not unrolled).
const Var* innermostSerial(const std::vector<Loop>& loops) {
  for (auto it = loops.rbegin(); it != loops.rend(); ++it)
    if (it->kind == ForKind::Serial) return it->var;
  return nullptr;
}

/// Float arithmetic, calls and loads of an expression.
class ExprStats : public IRVisitor {
 public:
  double ops = 0, calls = 0;
  std::vector<const Load*> loads;

 protected:
  using IRVisitor::visit;
  void count(const ExprNode* op) {
    if (op->type.isFloat()) ops += op->type.lanes;
  }
  void visit(const Add* op) override { count(op), IRVisitor::visit(op); }
  void visit(const Sub* op) override { count(op), IRVisitor::visit(op); }
  void visit(const Mul* op) override { count(op), IRVisitor::visit(op); }
  void visit(const Div* op) override { count(op), IRVisitor::visit(op); }
  void visit(const Min* op) override { count(op), IRVisitor::visit(op); }
  void visit(const Max* op) override { count(op), IRVisitor::visit(op); }
  void visit(const Call* op) override {
    calls += op->type.lanes;
    IRVisitor::visit(op);
  }
  void visit(const Load* op) override {
    loads.push_back(op);
    IRVisitor::visit(op);
  }
};

class Walker {
 public:
  explicit Walker(const PrimFunc& func) {
    for (const Buffer& b : func.params) m_params.insert(b.get());
  }

  void walk(const Stmt& s) {
    if (!s.defined()) return;
    if (const auto* op = s.as<For>()) {
      const auto* var = op->var.as<Var>();
      m_deps[var] = {var};
      int64_t extent = extentOf(op->extent, m_ranges);
      int64_t first = 0;
      if (auto lo = schedule_detail::boundsOf(op->min, m_ranges)) {
        m_ranges[var] = {lo->lo, lo->hi + std::max<int64_t>(1, extent) - 1};
        first = lo->lo;
      }
      m_loops.push_back({var, extent, op->forKind, first});
      ++loopCount;
      parallelLoops += op->forKind == ForKind::Parallel;
      maxDepth = std::max(maxDepth, static_cast<int>(m_loops.size()));
      walk(op->body);
      m_loops.pop_back();
    } else if (const auto* op = s.as<Store>()) {
      store(*op);
    } else if (const auto* op = s.as<Seq>()) {
      for (const Stmt& child : op->stmts) walk(child);
    } else if (const auto* op = s.as<IfThenElse>()) {
      walk(op->thenCase);
      walk(op->elseCase);
    } else if (const auto* op = s.as<Allocate>()) {
      double bytes = static_cast<double>(op->buffer->numel() * elementBytes(op->buffer->elemType));
      localBytes += bytes;
      largestLocal = std::max(largestLocal, bytes);
      ++locals;
      walk(op->body);
    } else if (const auto* op = s.as<LetStmt>()) {
      const auto* var = op->var.as<Var>();
      m_deps[var] = loopsOf(op->value);
      if (op->value.type().isInt())
        if (auto b = schedule_detail::boundsOf(op->value, m_ranges)) m_ranges[var] = *b;
      // A let's value runs once per iteration of the loops around it (a register tile's loads).
      if (op->value.type().isFloat()) record(op->value, nullptr, Expr());
      if (op->value.type().isInt()) m_intLets.emplace_back(var, op->value);
      walk(op->body);
      if (op->value.type().isInt()) m_intLets.pop_back();
    }
  }

  std::vector<Statement> statements;  // stores and float lets, in program order
  int stores = 0;
  int loopCount = 0, parallelLoops = 0, maxDepth = 0, locals = 0;
  double localBytes = 0, largestLocal = 0;

 private:
  std::set<const Var*> loopsOf(const Expr& e) const {
    std::set<const Var*> out;
    for (const Var* var : schedule_detail::varsIn(e)) {
      auto it = m_deps.find(var);
      if (it != m_deps.end()) out.insert(it->second.begin(), it->second.end());
    }
    return out;
  }

  Access access(const Buffer& buffer, const Expr& index, int lanes, bool isStore) const {
    Access a;
    int64_t element = elementBytes(buffer->elemType);
    a.bytes = element * std::max(1, lanes);
    a.param = m_params.count(buffer.get()) != 0;
    a.store = isStore;
    a.loops = loopsOf(index);
    for (int i = 0; i < kSteppedLoops && static_cast<size_t>(i) < m_loops.size(); ++i) {
      std::optional<int64_t> from = valueAt(index, static_cast<size_t>(i), 0);
      std::optional<int64_t> to = valueAt(index, static_cast<size_t>(i), 1);
      if (from && to) a.step[i] = static_cast<double>(std::abs(*to - *from) * element);
    }
    return a;
  }

  /// The (first lane's) element index `index` addresses with every loop at its first value but
  /// loop `loop`, which is `offset` iterations further; nullopt when not computable.
  std::optional<int64_t> valueAt(const Expr& index, size_t loop, int64_t offset) const {
    Ranges point;
    for (size_t i = 0; i < m_loops.size(); ++i) {
      int64_t v = m_loops[i].min + (i == loop ? offset : 0);
      point[m_loops[i].var] = {v, v};
    }
    for (const auto& [var, value] : m_intLets)
      if (auto b = schedule_detail::boundsOf(value, point); b && b->lo == b->hi) point[var] = *b;
    const Ramp* ramp = index.as<Ramp>();
    auto b = schedule_detail::boundsOf(ramp ? ramp->base : index, point);
    if (!b || b->lo != b->hi) return std::nullopt;
    return b->lo;
  }

  void store(const Store& op) { record(op.value, &op.buffer, op.index); }

  /// A statement computing `value`, stored to `buffer[index]` (none: a let's value).
  void record(const Expr& value, const Buffer* buffer, const Expr& index) {
    Statement st;
    st.loops = m_loops;
    for (const Loop& l : m_loops) st.executions *= static_cast<double>(l.extent);
    ExprStats stats;
    stats.visitExpr(value);
    if (buffer) stats.visitExpr(index);
    bool inVectorLoop = hasLoop(m_loops, ForKind::Vectorized);
    int lanes = value.type().lanes;
    st.ops = stats.ops;
    st.vectorOps = lanes > 1 || inVectorLoop ? stats.ops : 0;
    st.laneWeighted = stats.ops * (inVectorLoop ? std::max(lanes, 2) : lanes);
    st.calls = stats.calls;
    for (const Load* load : stats.loads)
      st.accesses.push_back(access(load->buffer, load->index, load->type.lanes, false));
    if (buffer) st.accesses.push_back(access(*buffer, index, lanes, true));
    st.isStore = buffer != nullptr;
    stores += st.isStore;
    statements.push_back(std::move(st));
  }

  std::set<const BufferNode*> m_params;
  std::vector<Loop> m_loops;
  std::map<const Var*, std::set<const Var*>> m_deps;
  Ranges m_ranges;
  std::vector<std::pair<const Var*, Expr>> m_intLets;  // integer lets in scope, outermost first
};

}  // namespace

const std::vector<std::string>& loopFeatureNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n{
        "float_ops",           "calls",                "param_load_bytes",    "local_load_bytes",
        "param_store_bytes",   "local_store_bytes",    "ops_per_param_byte",  "vector_op_share",
        "mean_op_lanes",       "invariant_load_share", "parallel_iterations", "parallel_balance",
        "parallel_op_share",   "parallel_loops",       "unrolled_iterations", "emitted_stores",
        "max_depth",           "loops",                "stores",              "local_bytes",
        "largest_local_bytes", "locals",               "heaviest_op_share",   "chunks_per_thread",
        "iterations_per_chunk", "chunk_balance",       "inner_body_ops",      "inner_ops_per_param_load",
        "inner_param_bytes_per_op"};
    for (int i = 1; i <= kSteppedLoops; ++i) {
      std::string loop = "outer" + std::to_string(i) + "_";
      n.push_back(loop + "still_param_share");
      n.push_back(loop + "mean_param_step");
    }
    return n;
  }();
  return names;
}

std::vector<float> loopFeatures(const PrimFunc& func, int threads) {
  Walker w(func);
  w.walk(func.body);
  double ops = 0, calls = 0, vectorOps = 0, laneWeighted = 0, parallelOps = 0, emitted = 0;
  double loadBytes[2] = {0, 0}, storeBytes[2] = {0, 0};  // [local, param]
  double loads = 0, invariantLoads = 0;
  const Statement* heaviest = nullptr;
  for (const Statement& st : w.statements) {
    double n = st.executions;
    ops += st.ops * n;
    calls += st.calls * n;
    vectorOps += st.vectorOps * n;
    laneWeighted += st.laneWeighted * n;
    if (hasLoop(st.loops, ForKind::Parallel)) parallelOps += st.ops * n;
    double unrolled = 1;
    for (const Loop& l : st.loops)
      if (l.kind == ForKind::Unrolled) unrolled *= static_cast<double>(l.extent);
    if (st.isStore) emitted += unrolled;
    const Var* inner = innermostSerial(st.loops);
    for (const Access& a : st.accesses) {
      (a.store ? storeBytes : loadBytes)[a.param ? 1 : 0] += static_cast<double>(a.bytes) * n;
      if (a.store) continue;
      loads += n;
      if (inner && !a.loops.count(inner)) invariantLoads += n;
    }
    if (st.isStore && (!heaviest || st.ops * n > heaviest->ops * heaviest->executions)) heaviest = &st;
  }
  double paramBytes = loadBytes[1] + storeBytes[1];
  std::vector<float> f{lg(ops),
                       lg(calls),
                       lg(loadBytes[1]),
                       lg(loadBytes[0]),
                       lg(storeBytes[1]),
                       lg(storeBytes[0]),
                       lg(paramBytes > 0 ? ops / paramBytes : 0),
                       static_cast<float>(ops > 0 ? vectorOps / ops : 0),
                       static_cast<float>(ops > 0 ? laneWeighted / ops : 0),
                       static_cast<float>(loads > 0 ? invariantLoads / loads : 0)};
  double parallelIterations = 1, unrolledIterations = 1;
  if (heaviest)
    for (const Loop& l : heaviest->loops) {
      if (l.kind == ForKind::Parallel) parallelIterations *= static_cast<double>(l.extent);
      if (l.kind == ForKind::Unrolled) unrolledIterations *= static_cast<double>(l.extent);
    }
  double t = std::max(1, threads);
  double balance = parallelIterations / (std::ceil(parallelIterations / t) * t);
  f.insert(f.end(), {lg(parallelIterations), static_cast<float>(balance),
                     static_cast<float>(ops > 0 ? parallelOps / ops : 0), static_cast<float>(w.parallelLoops),
                     lg(unrolledIterations), lg(emitted), static_cast<float>(w.maxDepth), lg(w.loopCount),
                     lg(static_cast<double>(w.stores)), lg(w.localBytes), lg(w.largestLocal),
                     static_cast<float>(w.locals),
                     static_cast<float>(heaviest && ops > 0 ? heaviest->ops * heaviest->executions / ops : 0)});
  // How the runtime splits the parallel iterations (attrs "parallel_chunks": chunks per thread).
  double chunksPerThread = static_cast<double>(runtime::kDefaultChunksPerThread);
  if (auto it = func.attrs.find("parallel_chunks"); it != func.attrs.end()) chunksPerThread = std::stod(it->second);
  double chunks = std::min(parallelIterations, chunksPerThread * t);
  double perChunk = std::ceil(parallelIterations / chunks);
  f.insert(f.end(), {lg(chunksPerThread), lg(perChunk), static_cast<float>(parallelIterations / (perChunk * chunks))});
  // One iteration of the heaviest statement's innermost serial loop (a register tile's body):
  // the float operations of every statement in it, and the parameter loads that feed them.
  const Var* inner = heaviest ? innermostSerial(heaviest->loops) : nullptr;
  double bodyOps = 0, bodyLoads = 0, bodyBytes = 0;
  for (const Statement& st : w.statements) {
    auto at = std::find_if(st.loops.begin(), st.loops.end(), [&](const Loop& l) { return inner && l.var == inner; });
    if (at == st.loops.end()) continue;
    double within = 1;
    for (auto it = at + 1; it != st.loops.end(); ++it) within *= static_cast<double>(it->extent);
    bodyOps += st.ops * within;
    for (const Access& a : st.accesses)
      if (a.param && !a.store) bodyLoads += within, bodyBytes += static_cast<double>(a.bytes) * within;
  }
  f.insert(f.end(), {lg(bodyOps), static_cast<float>(bodyLoads > 0 ? bodyOps / bodyLoads : 0),
                     static_cast<float>(bodyOps > 0 ? bodyBytes / bodyOps : 0)});
  // The heaviest statement's outermost loops advancing by one iteration: the share of the
  // parameter accesses (by bytes) in that loop's body whose address stays put (data the next
  // iteration reuses), and their mean address step.
  for (int i = 0; i < kSteppedLoops; ++i) {
    double still = 0, known = 0, steps = 0;
    const size_t at = static_cast<size_t>(i);
    if (heaviest && at < heaviest->loops.size())
      for (const Statement& st : w.statements) {
        if (at >= st.loops.size() || st.loops[at].var != heaviest->loops[at].var) continue;
        for (const Access& a : st.accesses) {
          if (!a.param || a.step[i] < 0) continue;
          double weight = static_cast<double>(a.bytes) * st.executions;
          known += weight;
          if (a.step[i] == 0) still += weight;
          steps += a.step[i] * weight;
        }
      }
    f.insert(f.end(), {static_cast<float>(known > 0 ? still / known : 0), lg(known > 0 ? steps / known : 0)});
  }
  return f;
}

}  // namespace kiln::core::tir
