// The element nest's sketch; see nest_search.h.
#include "core/lower/nest_search.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "core/ir/parser.h"
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

std::vector<Knobs> elementNestAnnotations(int64_t numel, const LowerOptions& options) {
  std::vector<Knobs> all{elementNestDefaultKnobs(numel, options)};
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

Knobs elementNestKnobsOf(const Knobs* tuned, int64_t numel, const LowerOptions& options) {
  std::vector<Knobs> all = elementNestAnnotations(numel, options);
  if (tuned && std::find(all.begin(), all.end(), *tuned) != all.end()) return *tuned;
  return all.front();
}

// ---- keys and task graphs ------------------------------------------------------------------------

std::string elementNestTuneKey(const std::string& workloadKey) { return "nest:" + workloadKey; }

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
  if (parts.kind != "nest") badKey(key, "not an element nest's key");
  const std::string& w = parts.workload;
  const std::string head = "fused[";
  if (w.compare(0, head.size(), head) != 0 || w.back() != ']') badKey(key, "expected fused[...] after nest:");
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

Graph elementNestTaskGraph(const std::string& key) {
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
  std::string text = "graph(" + params + ") {\n  group @nest {\n" + body + "  }\n  return %v" +
                     std::to_string(nodes.size() - 1) + "\n}\n";
  try {
    return parseGraph(text);
  } catch (const Error& e) {
    badKey(key, std::string("its workload does not parse as a graph: ") + e.what());
  }
}

int64_t elementNestOutputs(const std::string& key) {
  Graph g = elementNestTaskGraph(key);
  return g.type(g.outputs().at(0)).numel();
}

void applyElementNestSketch(Schedule& sched, const std::string& block, const Knobs& knobs) {
  std::vector<std::string> outer = sched.getLoops(block);
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
  // 2. Vectors, and their tail.
  std::string vectors;  // the loop over whole vectors, when there is one
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
  // 3. Unrolled vectors.
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

}  // namespace kiln::core::lower
