// The element, row and plain window nests' sketches; see nest_search.h.
#include "core/lower/nest_search.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "core/ir/parser.h"
#include "core/lower/conv_search.h"
#include "core/lower/lower_internal.h"
#include "core/tir/functor.h"
#include "core/tir/schedule_analysis.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

int64_t extentOf(const Schedule& sched, const std::string& loop) {
  const int64_t* n = asConstInt(schedule_detail::findLoop(sched.func(), loop, "element nest").loop->extent);
  return n ? *n : 0;
}

/// The smallest divisor c (1 < c < n, dividing n) of a division or remainder in what the store to
/// `block` reads whose dividend steps by 1 with `inner`: where a reshape cuts the loop's range.
/// 0 when there is none.
int64_t reshapeBoundary(const Schedule& sched, const std::string& block, const std::string& inner) {
  const schedule_detail::LoopSite site = schedule_detail::findLoop(sched.func(), inner, "element nest");
  const Var* var = site.loop->var.as<Var>();
  const int64_t n = extentOf(sched, inner);
  struct Divisions : IRVisitor {
    const Var* var = nullptr;
    int64_t n = 0, best = 0;
    std::string block;
    using IRVisitor::visit;
    void consider(const Expr& dividend, const Expr& divisor) {
      const int64_t* c = asConstInt(divisor);
      if (!c || *c <= 1 || *c >= n || n % *c != 0 || (best && best <= *c)) return;
      auto form = schedule_detail::affineForm(dividend, {var}, schedule_detail::NonAffine::Atom);
      if (!form) return;
      for (const auto& [text, term] : form->terms)
        if (term.first.as<Var>() == var && term.second == 1) best = *c;
    }
    void visit(const Div* op) override {
      consider(op->a, op->b);
      IRVisitor::visit(op);
    }
    void visit(const Mod* op) override {
      consider(op->a, op->b);
      IRVisitor::visit(op);
    }
    void visit(const Store* op) override {
      if (op->buffer->name == block) IRVisitor::visit(op);
    }
  } scan;
  scan.var = var, scan.n = n, scan.block = block;
  scan.visitStmt(site.loop->body);
  return scan.best;
}

/// Vectorizes `loop` when it admits it (see applyElementNestSketch).
void tryVectorize(Schedule& sched, const std::string& loop) {
  if (extentOf(sched, loop) < 2) return;
  try {
    sched.vectorize(loop);
  } catch (const Error&) {
    // A load whose index divides by something the loop's range does not resolve: stays scalar.
  }
}

}  // namespace

Knobs elementNestDefaultKnobs(int64_t numel, const LowerOptions& options) {
  return {{"vl", std::max(1, options.vectorLanes)}, {"un", 1}, {"par", wantParallel(numel) ? 1 : 0}};
}

namespace {

/// `first`, then every other point of the grid vl ∈ {lanes, its halves down to 4, 1} × un ∈ {1, 2,
/// 4} × par ∈ {0, 1}.
std::vector<Knobs> annotationsAfter(Knobs first, const LowerOptions& options) {
  std::vector<Knobs> all{std::move(first)};
  std::vector<int64_t> lanes{1};
  for (int64_t l = std::max(1, options.vectorLanes); l >= 4; l /= 2) lanes.push_back(l);
  for (int64_t vl : lanes)
    for (int64_t un : {1, 2, 4})
      for (int64_t par : {0, 1}) {
        Knobs k{{"vl", vl}, {"un", un}, {"par", par}};
        if (k != all.front()) all.push_back(std::move(k));
      }
  return all;
}

Knobs chosen(const Knobs* tuned, std::vector<Knobs> all) {
  if (tuned && std::find(all.begin(), all.end(), *tuned) != all.end()) return *tuned;
  return all.front();
}

}  // namespace

bool gathersBytes(const Stmt& nest) {
  struct Gathers : IRVisitor {
    bool gather = false, bytes = false;
    using IRVisitor::visit;
    void visit(const Load* op) override {
      bytes = bytes || op->buffer->elemType.bits == 8;
      if (op->type.lanes > 1 && !op->index.as<Broadcast>()) {
        const auto* ramp = op->index.as<Ramp>();
        const int64_t* stride = ramp ? asConstInt(ramp->stride) : nullptr;
        gather = gather || !stride || *stride != 1;
      }
      IRVisitor::visit(op);
    }
    void visit(const Store* op) override {
      bytes = bytes || op->buffer->elemType.bits == 8;
      IRVisitor::visit(op);
    }
  } check;
  check.visitStmt(nest);
  return check.gather && check.bytes;
}

std::vector<Knobs> elementNestAnnotations(int64_t numel, const LowerOptions& options) {
  return annotationsAfter(elementNestDefaultKnobs(numel, options), options);
}

Knobs elementNestKnobsOf(const Knobs* tuned, int64_t numel, const LowerOptions& options) {
  return chosen(tuned, elementNestAnnotations(numel, options));
}

Knobs rowNestDefaultKnobs(const RowNestShape& shape, int lanes) {
  lanes = std::max(1, lanes);
  // The most accumulators (up to 4) among those that leave the fewest elements to the scalar tail:
  // a row of 100 in vectors of 16 takes 2 (96 in vectors, 4 left), not 4 (64, 36 left).
  int64_t accumulators = 1, covered = 0;
  for (int64_t a : {1, 2, 4}) {
    const int64_t width = a * lanes, inVectors = shape.length / width * width;
    if (inVectors > 0 && inVectors >= covered) accumulators = a, covered = inVectors;
  }
  const bool parallel = shape.passes > 1 ? wantParallel(shape.rows * shape.length)  // softmax: its outputs
                                         : wantParallel(shape.rows, shape.length);
  return {{"vl", lanes}, {"un", accumulators}, {"par", parallel ? 1 : 0}};
}

std::vector<Knobs> rowNestAnnotations(const RowNestShape& shape, const LowerOptions& options) {
  return annotationsAfter(rowNestDefaultKnobs(shape, options.vectorLanes), options);
}

Knobs rowNestKnobsOf(const Knobs* tuned, const RowNestShape& shape, const LowerOptions& options) {
  return chosen(tuned, rowNestAnnotations(shape, options));
}

// ---- keys and task graphs ------------------------------------------------------------------------

std::string elementNestTuneKey(const std::string& workloadKey) { return "nest:" + workloadKey; }
std::string rowNestTuneKey(const std::string& workloadKey) { return "reduce:" + workloadKey; }

namespace {

[[noreturn]] void badKey(const std::string& key, const std::string& what) {
  throw Error("tuning key '" + key + "': " + what, ErrorKind::InvalidInput);
}

/// `text` cut at each top-level occurrence of `separator` (outside (), [] and {}).
std::vector<std::string> splitTopLevel(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (depth == 0 && text.compare(i, separator.size(), separator) == 0) {
      parts.push_back(text.substr(start, i - start));
      start = i + separator.size();
      i = start - 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

/// The index just past the bracket that closes the one at `open`; npos when it does not close.
size_t closing(const std::string& text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '(' || text[i] == '[' || text[i] == '{') ++depth;
    if ((text[i] == ')' || text[i] == ']' || text[i] == '}') && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

/// One node of a group workload: op{attrs}(args)->type.
struct WorkloadNode {
  std::string op, attrs, type;
  std::vector<std::string> args;
};

std::vector<WorkloadNode> parseWorkload(const std::string& key) {
  TuneKeyParts parts = parseTuneKey(key);
  if (parts.kind != "nest" && parts.kind != "reduce" && parts.kind != "pool" && parts.kind != "window")
    badKey(key, "not a nest's key");
  const std::string& w = parts.workload;
  const std::string head = "fused[";
  if (w.compare(0, head.size(), head) != 0 || w.back() != ']')
    badKey(key, "expected fused[...] after " + parts.kind + ":");
  std::vector<WorkloadNode> nodes;
  for (const std::string& text : splitTopLevel(w.substr(head.size(), w.size() - head.size() - 1), "; ")) {
    WorkloadNode n;
    size_t p = text.find_first_of("{(");
    if (p == std::string::npos || p == 0) badKey(key, "expected op(...) in '" + text + "'");
    n.op = text.substr(0, p);
    if (text[p] == '{') {
      size_t end = closing(text, p);
      if (end == std::string::npos) badKey(key, "unclosed attributes in '" + text + "'");
      n.attrs = text.substr(p, end - p);
      p = end;
    }
    size_t end = p < text.size() && text[p] == '(' ? closing(text, p) : std::string::npos;
    if (end == std::string::npos || text.compare(end, 2, "->") != 0)
      badKey(key, "expected (arguments)->type in '" + text + "'");
    if (end - p > 2) n.args = splitTopLevel(text.substr(p + 1, end - p - 2), ",");
    n.type = text.substr(end + 2);
    nodes.push_back(std::move(n));
  }
  return nodes;
}

}  // namespace

Graph nestTaskGraph(const std::string& key) {
  std::vector<WorkloadNode> nodes = parseWorkload(key);
  std::map<int64_t, std::string> inputs;  // $i → its type
  std::string body;
  for (size_t n = 0; n < nodes.size(); ++n) {
    std::string args;
    for (const std::string& a : nodes[n].args) {
      std::string arg;
      if (a.size() > 1 && a[0] == '%' && std::all_of(a.begin() + 1, a.end(), ::isdigit) &&
          std::stoul(a.substr(1)) < n) {
        arg = "%v" + a.substr(1);
      } else if (size_t colon = a.find(':'); a.size() > 1 && a[0] == '$' && colon != std::string::npos &&
                                             colon > 1 &&
                                             std::all_of(a.begin() + 1, a.begin() + colon, ::isdigit)) {
        int64_t i = std::stoll(a.substr(1, colon - 1));
        inputs[i] = a.substr(colon + 1);
        arg = "%in" + std::to_string(i);
      } else {
        badKey(key, "argument '" + a + "' is neither %node nor $input:type");
      }
      args += (args.empty() ? "" : ", ") + arg;
    }
    body += "    %v" + std::to_string(n) + " = " + nodes[n].op + "(" + args + ")" +
            (nodes[n].attrs.empty() ? "" : " " + nodes[n].attrs) + " : " + nodes[n].type + "\n";
  }
  std::string params;
  int64_t expected = 0;
  for (const auto& [i, type] : inputs) {
    if (i != expected++) badKey(key, "its inputs are not numbered $0, $1, ...");
    params += (params.empty() ? "" : ", ") + ("%in" + std::to_string(i)) + ": " + type;
  }
  // One node is lowered as a group of one (lower.h: lowersAsGroupOfOne), as it was in its model.
  if (nodes.size() > 1) body = "  group @nest {\n" + body + "  }\n";
  std::string text =
      "graph(" + params + ") {\n" + body + "  return %v" + std::to_string(nodes.size() - 1) + "\n}\n";
  try {
    return parseGraph(text);
  } catch (const Error& e) {
    badKey(key, std::string("its workload does not parse as a graph: ") + e.what());
  }
}

int64_t elementNestOutputs(const std::string& key) {
  Graph g = nestTaskGraph(key);
  return g.type(g.outputs().at(0)).numel();
}

RowNestShape rowNestShapeOfKey(const std::string& key) {
  Graph g = nestTaskGraph(key);
  if (parseTuneKey(key).kind != "reduce") badKey(key, "not a reduction's key");
  const Node& root = g.node(g.value(g.outputs().at(0)).producer);
  const TensorType& in = g.type(root.inputs.at(0));
  const TensorType& out = g.type(root.outputs.at(0));
  if (root.op == "softmax") {
    int64_t rank = static_cast<int64_t>(in.shape.size());
    int64_t axis = rank == 0 ? 0 : normalizeAxis(root.attrs.getInt("axis"), rank);
    if (rank > 0 && axis != rank - 1)
      badKey(key, "a softmax along an axis other than the last is not a row nest");
    int64_t length = rank == 0 ? 1 : in.shape.back();
    return {length ? in.numel() / length : 0, length, 4};
  }
  if (fusedRole(root.op) != FusedRole::Reduce) badKey(key, "its root " + root.op + " is not a reduction");
  return {out.numel(), out.numel() ? in.numel() / out.numel() : 0};
}

namespace {

/// Steps 2 and 3 of the element sketch on loop `inner`: vectors of `lanes` lanes and their tail,
/// then `unroll` vectors unrolled. Returns the loop over (groups of) vectors that is left, "" when
/// none is.
std::string vectorsAndUnroll(Schedule& sched, const std::string& inner, int64_t lanes, int64_t unroll) {
  std::string vectors;
  if (lanes > 1 && extentOf(sched, inner) > lanes) {
    const int64_t n = extentOf(sched, inner);
    std::set<std::string> before;
    for (const std::string& l : sched.loopNames()) before.insert(l);
    auto [o, i] = sched.split(inner, lanes, TailStrategy::Loop);
    vectors = o;
    tryVectorize(sched, i);
    if (n % lanes != 0)
      for (const std::string& l : sched.loopNames())
        if (!before.count(l) && l != o && l != i && l.find(inner) == 0 && extentOf(sched, l) == n % lanes) {
          tryVectorize(sched, l);
          break;
        }
  } else if (lanes > 1) {
    tryVectorize(sched, inner);
  } else {
    vectors = inner;
  }
  if (unroll > 1 && !vectors.empty()) {
    const int64_t n = extentOf(sched, vectors);
    if (n > unroll && n % unroll == 0) {
      auto [o, i] = sched.split(vectors, unroll, TailStrategy::Loop);
      sched.unroll(i);
      vectors = o;
    } else if (n == unroll) {
      sched.unroll(vectors);
      vectors.clear();
    }
  }
  return vectors;
}

/// A loop of `n` ≥ 2 iterations (constant), unrolled when short.
void unrollShort(Schedule& sched, const std::string& loop) {
  if (int64_t n = extentOf(sched, loop); n >= 2 && n <= 16) sched.unroll(loop);
}

/// The reduction loop `loop` (a store into one element): split into `unroll` accumulators of
/// `lanes` lanes, each updated by vectors (rfactor), then the accumulators folded into one vector
/// and its lanes into the element as a tree (foldPartialsAsTree); the iterations the accumulators do not
/// cover run scalar.
void reductionVectors(Schedule& sched, const std::string& loop, int64_t lanes, int64_t unroll) {
  const int64_t n = extentOf(sched, loop);
  if (lanes < 2 || n < lanes) return;
  while (unroll > 1 && n < lanes * unroll) unroll /= 2;
  const int64_t width = lanes * unroll;
  std::string partial = loop;
  if (n > width) partial = sched.split(loop, width, TailStrategy::Loop).second;
  sched.rfactor(partial);
  const std::string init = partial + "_init";
  if (unroll == 1) {
    tryVectorize(sched, partial);
    tryVectorize(sched, init);
  } else {
    // Accumulator a, lane l: a · lanes + l.
    auto [acc, lane] = sched.split(partial, lanes, TailStrategy::Loop);
    tryVectorize(sched, lane);
    sched.unroll(acc);
    auto [initAcc, initLane] = sched.split(init, lanes, TailStrategy::Loop);
    tryVectorize(sched, initLane);
    sched.unroll(initAcc);
  }
  foldPartialsAsTree(sched, partial + "_fold");
}

/// The loops of a row nest's body: the statements directly inside `body` (through sequences,
/// allocations and lets) that are loops.
std::vector<const For*> rowParts(const Stmt& body) {
  std::vector<const For*> parts;
  std::function<void(const Stmt&)> walk = [&](const Stmt& s) {
    if (const auto* f = s.as<For>()) {
      parts.push_back(f);
    } else if (const auto* seq = s.as<Seq>()) {
      for (const Stmt& x : seq->stmts) walk(x);
    } else if (const auto* a = s.as<Allocate>()) {
      walk(a->body);
    } else if (const auto* let = s.as<LetStmt>()) {
      walk(let->body);
    }
  };
  walk(body);
  return parts;
}

}  // namespace

void foldPartialsAsTree(Schedule& sched, std::string fold) {
  for (int64_t n = extentOf(sched, fold); n > 2 && n % 2 == 0; n /= 2) {
    auto [halves, half] = sched.split(fold, n / 2, TailStrategy::Loop);
    sched.rfactor(half);
    tryVectorize(sched, half);
    sched.unroll(halves);
    tryVectorize(sched, half + "_init");
    fold = half + "_fold";
  }
  unrollShort(sched, fold);
}

namespace {

/// The element nest's sketch on the perfect nest of loops `outer` (outermost first) around a store
/// to `block`.
void sketchElementLoops(Schedule& sched, const std::string& block, std::vector<std::string> outer,
                        const Knobs& knobs) {
  if (outer.empty()) return;
  const int64_t lanes = knob(knobs, "vl", 1), unroll = knob(knobs, "un", 1);
  std::string inner = outer.back();
  outer.pop_back();
  // 1. The reshape boundary.
  if (int64_t c = reshapeBoundary(sched, block, inner)) {
    auto [o, i] = sched.split(inner, c, TailStrategy::Loop);
    outer.push_back(o);
    inner = i;
  }
  // 2 and 3. Vectors, their tail, and unrolled vectors.
  std::string vectors = vectorsAndUnroll(sched, inner, lanes, unroll);
  // 4. The parallel loop.
  if (knob(knobs, "par", 0) == 0) return;
  size_t k = 0;
  int64_t product = outer.empty() ? 0 : extentOf(sched, outer[0]);
  while (!outer.empty() && product < kParallelMinExtent && k + 1 < outer.size())
    product *= extentOf(sched, outer[++k]);
  if (product >= kParallelMinExtent) {
    std::string fused = outer[0];
    for (size_t d = 1; d <= k; ++d) fused = sched.fuse(fused, outer[d]);
    sched.parallel(fused);
  } else if (!vectors.empty() && extentOf(sched, vectors) >= 2) {
    sched.parallel(vectors);
  }
}

}  // namespace

void applyElementNestSketch(Schedule& sched, const std::string& block, const Knobs& knobs) {
  sketchElementLoops(sched, block, sched.getLoops(block), knobs);
}

void applyConcatNestSketch(Schedule& sched, const std::string& block, const Knobs& knobs) {
  auto parts = [&] {
    Stmt body = sched.func().body;
    const auto* seq = body.as<Seq>();
    return seq ? seq->stmts : std::vector<Stmt>{body};
  };
  // Last part first: the steps on a part (a vector tail loop beside its loop) leave the positions
  // of the parts before it as they were.
  for (size_t k = parts().size(); k-- > 0;) {
    std::vector<std::string> loops;
    int64_t elements = 1;
    for (Stmt s = parts()[k]; const auto* loop = s.as<For>(); s = loop->body) {
      loops.push_back(schedule_detail::loopName(loop));
      const int64_t* extent = asConstInt(loop->extent);
      elements *= extent ? *extent : 1;
    }
    // A part too small to spread over threads stays serial: a parallel launch per part costs more
    // than the copy (densenet121's concatenations of one large and many 32-channel parts: 2×).
    Knobs part = knobs;
    if (!wantParallel(elements)) part["par"] = 0;
    sketchElementLoops(sched, block, loops, part);
  }
}

void applyRowNestSketch(Schedule& sched, const Knobs& knobs) {
  const int64_t lanes = knob(knobs, "vl", 1), unroll = knob(knobs, "un", 1);
  // The loop over rows, unless the nest has one row and no such loop.
  std::vector<const For*> top = rowParts(sched.func().body);
  std::string rows;
  std::vector<const For*> parts = top;
  if (top.size() == 1 && schedule_detail::containsLoop(top[0]->body)) {
    rows = schedule_detail::loopName(top[0]);
    parts = rowParts(top[0]->body);
  }
  // Each pass over the row: a reduction when its store does not move with the loop.
  std::vector<std::pair<std::string, bool>> passes;
  for (const For* f : parts) {
    const auto* store = f->body.as<Store>();
    bool reduces = store && !schedule_detail::varsIn(store->index).count(f->var.as<Var>());
    passes.emplace_back(schedule_detail::loopName(f), reduces);
  }
  for (const auto& [loop, reduces] : passes) {
    if (reduces)
      reductionVectors(sched, loop, lanes, unroll);
    else
      vectorsAndUnroll(sched, loop, lanes, unroll);
  }
  if (knob(knobs, "par", 0) != 0 && !rows.empty() && extentOf(sched, rows) >= 2) sched.parallel(rows);
}

// ---- plain window nests ----

Knobs windowNestDefaultKnobs(const WindowNestShape& shape) {
  return {{"vl", std::max<int64_t>(1, shape.lanes)},
          {"par", wantParallel(shape.outputs, shape.taps) ? 1 : 0}};
}

std::vector<Knobs> windowNestAnnotations(const WindowNestShape& shape) {
  std::vector<Knobs> all{windowNestDefaultKnobs(shape)};
  std::vector<int64_t> lanes{1};
  for (int64_t l = shape.lanes; l >= 4 && shape.lanes % l == 0; l /= 2) lanes.push_back(l);
  for (int64_t vl : lanes)
    for (int64_t par : {0, 1}) {
      Knobs k{{"vl", vl}, {"par", par}};
      if (k != all.front()) all.push_back(std::move(k));
    }
  return all;
}

Knobs windowNestKnobsOf(const Knobs* tuned, const WindowNestShape& shape) {
  return chosen(tuned, windowNestAnnotations(shape));
}

void applyWindowNestSketch(Schedule& sched, const Knobs& knobs) {
  const std::vector<std::string> names = sched.loopNames();
  auto has = [&](const std::string& loop) {
    return std::find(names.begin(), names.end(), loop) != names.end();
  };
  const int64_t lanes = knob(knobs, "vl", 1);
  if (lanes > 1)
    for (const char* loop : {"l", "l_t", "l_w"}) {
      if (!has(loop)) continue;
      if (extentOf(sched, loop) == lanes) {
        sched.vectorize(loop);
      } else if (extentOf(sched, loop) % lanes == 0) {
        sched.vectorize(sched.split(loop, lanes, TailStrategy::Loop).second);
      }
    }
  if (knob(knobs, "par", 0) == 0) return;
  // The element nest's rule: leading loops fused until they have enough iterations (all four
  // when they never do).
  const std::vector<std::string> outer{"n", "c", "oh", "ow"};
  std::string fused = outer[0];
  int64_t product = extentOf(sched, fused);
  for (size_t d = 1; d < outer.size() && product < kParallelMinExtent; ++d) {
    product *= extentOf(sched, outer[d]);
    fused = sched.fuse(fused, outer[d]);
  }
  if (product >= 2) sched.parallel(fused);
}

std::string windowNestTuneKey(const std::string& workloadKey) { return "window:" + workloadKey; }

WindowNestShape windowNestShapeOf(const std::string& op, const Attrs& attrs, const Shape& xs,
                                  const Shape& ys) {
  WindowNestShape s;
  s.outputs = runtime::numElements(ys);
  s.lanes = xs.size() == 5 ? xs[4] : 1;
  if (op == "adaptive_avg_pool2d" && xs.size() >= 4 && ys.size() >= 4) {
    // The widest of the windows [⌊i·in/out⌋, ⌈(i+1)·in/out⌉) along each axis.
    auto widest = [](int64_t in, int64_t out) {
      int64_t most = 1;
      for (int64_t i = 0; i < out; ++i) most = std::max(most, ((i + 1) * in + out - 1) / out - i * in / out);
      return most;
    };
    s.taps = widest(xs[2], ys[2]) * widest(xs[3], ys[3]);
  } else {
    const std::vector<int64_t> kernel = attrs.getPair("kernel", 1);
    s.taps = kernel[0] * kernel[1];
  }
  return s;
}

WindowNestShape windowNestShapeOfKey(const std::string& key) {
  if (parseTuneKey(key).kind != "window") badKey(key, "not a window nest's key");
  Graph g = nestTaskGraph(key);
  for (const Node& node : g.nodes())
    if (isWindowPool(node.op))
      return windowNestShapeOf(node.op, node.attrs, g.type(node.inputs[0]).shape,
                               g.type(node.outputs[0]).shape);
  badKey(key, "its workload has no pooling");
}

Trace nestSketchTrace(const std::string& key, const Knobs& knobs, int lanes, int registers) {
  const std::string kind = parseTuneKey(key).kind;
  if (kind != "nest" && kind != "reduce" && kind != "window") badKey(key, "not a nest's key");
  LowerOptions options;
  options.vectorLanes = lanes;
  options.vectorRegisters = registers;
  auto records = std::make_shared<ScheduleConfigs>();
  records->byKey[key] = knobs;
  options.schedules = records;
  for (const PrimFunc& f : lowerGraph(nestTaskGraph(key), options).funcs) {
    auto k = f.attrs.find("tune_key");
    if (k == f.attrs.end() || k->second != key) continue;
    auto schedule = f.attrs.find("schedule"), trace = f.attrs.find("trace");
    if (schedule == f.attrs.end() || schedule->second != knobsText(knobs))
      badKey(key, "its kernel does not take '" + knobsText(knobs) + "'");
    // An annotation that applies no step (a scalar nest, serial) leaves the plain nest: no trace.
    return trace == f.attrs.end() ? Trace() : Trace::parse(trace->second);
  }
  badKey(key, "its task graph has no kernel with this key");
}

}  // namespace kiln::core::lower
