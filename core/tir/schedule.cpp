// Schedule primitives (see schedule.h). Each primitive resolves its handles, checks every
// precondition before it builds anything, then replaces the affected statement in one step, so a
// rejected primitive leaves the schedule unchanged.
#include "core/tir/schedule.h"

#include <algorithm>

#include "core/tir/vectorize.h"
#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/schedule_analysis.h"
#include "core/tir/simplify.h"
#include "runtime/error.h"

namespace kiln::core::tir {

namespace schedule_detail {

[[noreturn]] void fail(const std::string& primitive, const std::string& what) {
  throw Error(primitive + ": " + what, ErrorKind::Usage);
}

std::string quoted(const std::string& name) { return "'" + name + "'"; }

LoopSite findLoop(const PrimFunc& func, const std::string& handle, const std::string& primitive) {
  std::vector<LoopSite> loops = allLoops(func.body);
  std::string name = handle;
  if (size_t slash = handle.find('/'); slash != std::string::npos) {
    std::vector<std::string> around;
    try {
      around = getLoops(func, handle.substr(0, slash));
    } catch (const Error& e) {
      fail(primitive, e.what());
    }
    size_t k = 0;
    try {
      k = std::stoul(handle.substr(slash + 1));
    } catch (const std::exception&) {
      fail(primitive, "bad loop path " + quoted(handle));
    }
    if (k >= around.size())
      fail(primitive, "block " + quoted(handle.substr(0, slash)) + " has only " + std::to_string(around.size()) + " loops");
    name = around[k];
  }
  for (const LoopSite& site : loops)
    if (loopName(site.loop) == name) return site;
  fail(primitive, "no loop named " + quoted(name));
}

}  // namespace schedule_detail

using namespace schedule_detail;

namespace {

/// Loops wider than this are not vectorized in one piece (split them first).
constexpr int64_t kMaxVectorizeExtent = 64;

const int64_t* constExtent(const For* op, const std::string& primitive) {
  const int64_t* ext = asConstInt(op->extent);
  if (!ext) fail(primitive, "loop " + quoted(loopName(op)) + " has a non-constant extent");
  return ext;
}

void requireKind(const For* op, std::initializer_list<ForKind> allowed, const std::string& primitive) {
  for (ForKind k : allowed)
    if (op->forKind == k) return;
  fail(primitive, "loop " + quoted(loopName(op)) + " is already " + forKindName(op->forKind));
}

/// Wraps the innermost body of the perfect loop chain `s` in `if (cond)`.
Stmt guardLeaf(const Stmt& s, const Expr& cond) {
  if (const auto* op = s.as<For>()) return For::make(op->var, op->min, op->extent, op->forKind, guardLeaf(op->body, cond));
  return IfThenElse::make(cond, s);
}

/// The perfect chain of loops starting at `top` (each body exactly the next loop).
std::vector<const For*> perfectChain(const For* top) {
  std::vector<const For*> chain = {top};
  while (const auto* next = chain.back()->body.as<For>()) chain.push_back(next);
  return chain;
}

/// Whether every access to `buffer` in `s` is a commutative update b[x] = b[x] op v (one op
/// kind, v not reading b): the order of the updates then does not matter (up to reassociation).
bool isReduction(const Stmt& s, const BufferNode* buffer) {
  struct Check : IRVisitor {
    const BufferNode* buffer;
    int stores = 0, loads = 0;
    int op = -1;
    bool ok = true;
    using IRVisitor::visit;
    void visit(const Load* l) override {
      if (l->buffer.get() == buffer) ++loads;
      IRVisitor::visit(l);
    }
    void visit(const Store* st) override {
      IRVisitor::visit(st);
      if (st->buffer.get() != buffer) return;
      ++stores;
      const Expr& v = st->value;
      std::optional<std::pair<Expr, Expr>> operands = reductionOperands(v);
      if (!operands) {
        ok = false;
        return;
      }
      const auto& [a, b] = *operands;
      int kind = static_cast<int>(v.kind());
      if (op >= 0 && op != kind) ok = false;
      op = kind;
      auto self = [&](const Expr& e) {
        const auto* l = e.as<Load>();
        return l && l->buffer.get() == buffer && print(l->index) == print(st->index);
      };
      bool selfA = self(a), selfB = self(b);
      if (selfA == selfB) ok = false;  // neither or both operands read the element
      if (loadsBuffer(selfA ? b : a, buffer) || loadsBuffer(st->index, buffer)) ok = false;
    }
  } check;
  check.buffer = buffer;
  check.visitStmt(s);
  return check.ok && check.stores > 0 && check.loads == check.stores;
}

/// The Allocate node of `buffer` in `s`, or nullptr.
const Allocate* findAllocate(const Stmt& s, const BufferNode* buffer) {
  struct Finder : IRVisitor {
    const BufferNode* buffer;
    const Allocate* found = nullptr;
    using IRVisitor::visit;
    void visit(const Allocate* op) override {
      if (op->buffer.get() == buffer && !found) found = op;
      IRVisitor::visit(op);
    }
  } f;
  f.buffer = buffer;
  f.visitStmt(s);
  return f.found;
}

/// Removes the Allocate nodes of `buffers` (their bodies stay).
Stmt stripAllocates(const Stmt& s, const std::set<const BufferNode*>& buffers) {
  struct Stripper : IRMutator {
    const std::set<const BufferNode*>* buffers;
    using IRMutator::visit;
    Stmt visit(const Allocate* op, const Stmt& self) override {
      Stmt body = mutate(op->body);
      if (buffers->count(op->buffer.get())) return body;
      return body.same(op->body) ? self : Allocate::make(op->buffer, body);
    }
  } stripper;
  stripper.buffers = &buffers;
  return stripper.mutate(s);
}

/// Whether `buffer` is a local scratch buffer used only inside `loop`: allocated in the function
/// and not accessed anywhere outside the loop.
bool localOnlyIn(const PrimFunc& func, const LoopSite& loop, const BufferNode* buffer) {
  if (!findAllocate(func.body, buffer)) return false;
  Stmt outside = replaceStmt(func.body, loop.loop, Evaluate::make(i64(0)));
  return !usesBuffer(outside, buffer);
}

/// Whether reordering the perfect chain `chain` into `order` keeps every element's updates in
/// their order: the chain's innermost body is one store, a reduction that starts from an initial
/// value (initReduction) over chain loops its index does not use; the index is injective in the
/// chain loops it uses; and the chain loops it does not use (an element's updates run in their
/// lexicographic order) keep their relative order. Then every element sees the same updates in
/// the same order, so the result is identical; nothing needs replaying.
bool updatesKeepTheirOrder(const std::vector<const For*>& chain, const std::vector<const For*>& order) {
  const auto* store = chain.back()->body.as<Store>();
  if (!store) return false;
  std::optional<InitReduction> r = initReduction(store);
  if (!r) return false;
  std::set<const Var*> used = varsIn(store->index);
  size_t inChain = 0;  // the condition's loops found in the chain
  std::vector<const For*> free, moving;  // chain loops the index does not / does use
  for (const For* l : chain) {
    const Var* v = l->var.as<Var>();
    inChain += r->firstOf(v).has_value();
    (used.count(v) ? moving : free).push_back(l);
  }
  if (inChain != r->firsts.size() || !injectiveIn(store->index, moving)) return false;
  for (const auto& [v, first] : r->firsts)
    if (used.count(v)) return false;
  std::vector<const For*> freeAfter;
  for (const For* l : order)
    if (!used.count(l->var.as<Var>())) freeAfter.push_back(l);
  return freeAfter == free;
}

/// Checks that the iterations of `unit` within `scope` may run in any order (reorder) or
/// concurrently (parallel); returns the scratch buffers that need one copy per iteration.
std::set<const BufferNode*> checkIndependent(const PrimFunc& func, const LoopSite& scope, const For* unit,
                                             const std::string& primitive, bool allowReductions) {
  std::string loops = quoted(loopName(scope.loop));
  if (unit != scope.loop) loops += ".." + quoted(loopName(unit));
  std::set<const BufferNode*> privatize;
  // Every store a reduction (b[x] = b[x] op v, the element read nowhere else): any order computes
  // the same up to reassociation, whatever the indices, so nothing needs replaying (the replay
  // would find exactly these buffers shared and accept them).
  std::set<const BufferNode*> stored = storedBuffers(unit->body);
  if (allowReductions && !stored.empty() &&
      std::all_of(stored.begin(), stored.end(), [&](const BufferNode* b) { return isReduction(unit->body, b); }))
    return privatize;
  for (const BufferSharing& s : checkIterations(func, scope.loop, unit, primitive + ": loop " + loops)) {
    if (!s.crossIteration) continue;
    if (!s.exposedRead && localOnlyIn(func, scope, s.buffer)) {
      privatize.insert(s.buffer);
      continue;
    }
    if (allowReductions && isReduction(unit->body, s.buffer)) continue;
    fail(primitive, "iterations of loop " + loops + " depend on each other through " + quoted(s.buffer->name));
  }
  return privatize;
}

}  // namespace

// ---- handles -----------------------------------------------------------------------------------

std::vector<std::string> getLoops(const PrimFunc& func, const std::string& block) {
  struct Finder : IRVisitor {
    std::string name;
    std::vector<const For*> stack, found;
    bool done = false;
    using IRVisitor::visit;
    void visit(const For* op) override {
      if (done) return;
      stack.push_back(op);
      IRVisitor::visit(op);
      stack.pop_back();
    }
    void visit(const Store* op) override {
      if (done || op->buffer->name != name) return;
      found = stack;
      done = true;
    }
  } finder;
  finder.name = block;
  finder.visitStmt(func.body);
  if (!finder.done) throw Error("no block " + quoted(block) + " (no statement stores to a buffer of that name)", ErrorKind::Usage);
  std::vector<std::string> names;
  for (const For* op : finder.found) names.push_back(loopName(op));
  return names;
}

std::vector<std::string> loopNames(const PrimFunc& func) {
  std::vector<std::string> names;
  for (const LoopSite& site : allLoops(func.body)) names.push_back(loopName(site.loop));
  return names;
}

// ---- Schedule ------------------------------------------------------------------------------------

Schedule::Schedule(PrimFunc func) : m_func(std::move(func)) {
  auto it = m_func.attrs.find("trace");
  if (it != m_func.attrs.end()) m_trace = Trace::parse(it->second);
  m_func.body = canonicalizeNames(m_func.body);
}

std::vector<std::string> Schedule::getLoops(const std::string& block) const { return tir::getLoops(m_func, block); }
std::vector<std::string> Schedule::loopNames() const { return tir::loopNames(m_func); }

void Schedule::record(TraceStep step) {
  if (m_quiet > 0) return;
  m_trace.append(std::move(step));
  m_func.attrs["trace"] = m_trace.str();
}

void Schedule::setBody(Stmt body) { m_func.body = canonicalizeNames(body); }

namespace {

/// Rewrites `v == c` (v the variable of a loop split by `factor`, from `min`) as `outer == (c −
/// min) / factor && inner == (c − min) mod factor`: the same condition on the main nest's
/// variables, which keeps a reduction's first-iteration condition a conjunction of variables
/// equal to constants (initReduction) after its loop is split.
struct SplitEquality : IRMutator {
  const Var* var = nullptr;
  int64_t min = 0, factor = 1, extent = 0;
  Expr outer, inner;
  using IRMutator::visit;
  Expr visit(const EQ* op, const Expr& self) override {
    const Var* v = op->a.as<Var>();
    const int64_t* c = asConstInt(op->b);
    if (!v || !c) {
      v = op->b.as<Var>();
      c = asConstInt(op->a);
    }
    if (v != var || !c || *c < min || *c - min >= extent) return IRMutator::visit(op, self);
    Type t = outer.type();
    int64_t rel = *c - min;
    return And::make(EQ::make(outer, IntImm::make(t, rel / factor)),
                     EQ::make(inner, IntImm::make(t, rel % factor)));
  }
};

}  // namespace

std::pair<std::string, std::string> Schedule::split(const std::string& loop, int64_t factor, TailStrategy tail) {
  LoopSite site = findLoop(m_func, loop, "split");
  const For* op = site.loop;
  const std::string& name = loopName(op);
  if (factor < 1) fail("split", "factor " + std::to_string(factor) + " for loop " + quoted(name) + " must be at least 1");
  int64_t n = *constExtent(op, "split");
  requireKind(op, {ForKind::Serial, ForKind::Parallel}, "split");

  std::set<std::string> used = usedNames(m_func.body);
  for (const Buffer& b : m_func.params) used.insert(b->name);
  Type t = op->var.type();
  Expr outer = Var::make(freshName(name + "_o", used), t), inner = Var::make(freshName(name + "_i", used), t);
  Expr offset = outer * IntImm::make(t, factor) + inner;
  const int64_t* mn = asConstInt(op->min);
  Expr index = mn && *mn == 0 ? offset : op->min + offset;
  Stmt body = op->body;
  if (mn) {
    SplitEquality eq;
    eq.var = op->var.as<Var>(), eq.min = *mn, eq.factor = factor, eq.extent = n, eq.outer = outer,
    eq.inner = inner;
    body = eq.mutate(body);
  }
  body = substitute(body, {{op->var, index}});
  bool divides = n % factor == 0;

  Stmt result;
  if (divides || tail == TailStrategy::Guard) {
    if (!divides) body = guardLeaf(body, offset < IntImm::make(t, n));
    int64_t outerExtent = (n + factor - 1) / factor;
    result = For::make(outer, IntImm::make(t, 0), IntImm::make(t, outerExtent), op->forKind,
                       For::make(inner, IntImm::make(t, 0), IntImm::make(t, factor), ForKind::Serial, body));
  } else {
    Stmt main = For::make(outer, IntImm::make(t, 0), IntImm::make(t, n / factor), op->forKind,
                          For::make(inner, IntImm::make(t, 0), IntImm::make(t, factor), ForKind::Serial, body));
    Expr rest = Var::make(freshName(name + "_t", used), t);
    Expr start = IntImm::make(t, n / factor * factor) + rest;
    Stmt copy = cloneWithFreshVars(op->body, "_t", used);
    copy = substitute(copy, {{op->var, mn && *mn == 0 ? start : op->min + start}});
    result = Seq::make({main, For::make(rest, IntImm::make(t, 0), IntImm::make(t, n % factor), ForKind::Serial, copy)});
  }
  setBody(replaceStmt(m_func.body, op, result));
  record({"split", {name}, {factor, static_cast<int64_t>(tail)}});
  return {outer.as<Var>()->name, inner.as<Var>()->name};
}

void Schedule::reorder(const std::vector<std::string>& loops) {
  if (loops.size() < 2) fail("reorder", "needs at least two loops");
  std::vector<LoopSite> sites;
  for (const std::string& l : loops) sites.push_back(findLoop(m_func, l, "reorder"));
  for (size_t i = 0; i < sites.size(); ++i)
    for (size_t j = i + 1; j < sites.size(); ++j)
      if (sites[i].loop == sites[j].loop) fail("reorder", "loop " + quoted(loopName(sites[i].loop)) + " is listed twice");
  const LoopSite* top = &sites[0];
  for (const LoopSite& s : sites)
    if (s.enclosing.size() < top->enclosing.size()) top = &s;
  std::vector<const For*> chain = perfectChain(top->loop);
  size_t deepest = 0;
  std::vector<size_t> slots;
  for (const LoopSite& s : sites) {
    auto it = std::find(chain.begin(), chain.end(), s.loop);
    if (it == chain.end())
      fail("reorder", "loops " + quoted(loopName(top->loop)) + " and " + quoted(loopName(s.loop)) + " are not perfectly nested");
    slots.push_back(static_cast<size_t>(it - chain.begin()));
    deepest = std::max(deepest, slots.back());
  }
  chain.resize(deepest + 1);
  std::vector<const For*> order = chain;
  std::vector<size_t> sorted = slots;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sites.size(); ++i) order[sorted[i]] = sites[i].loop;

  // Bounds may only use variables of loops that stay outside.
  for (size_t p = 0; p < order.size(); ++p) {
    std::set<const Var*> vars = varsIn(order[p]->min);
    for (const Var* v : varsIn(order[p]->extent)) vars.insert(v);
    for (size_t q = p; q < order.size(); ++q)
      if (vars.count(order[q]->var.as<Var>()))
        fail("reorder", "bounds of loop " + quoted(loopName(order[p])) + " depend on loop " + quoted(loopName(order[q])));
  }
  LoopSite scope = findLoop(m_func, loopName(chain.front()), "reorder");
  // The order check looks down the whole perfect chain (loops below the listed ones stay put).
  std::vector<const For*> whole = perfectChain(top->loop), wholeOrder = order;
  wholeOrder.insert(wholeOrder.end(), whole.begin() + static_cast<std::ptrdiff_t>(order.size()), whole.end());
  if (!updatesKeepTheirOrder(whole, wholeOrder)) {
    std::set<const BufferNode*> scratch = checkIndependent(m_func, scope, chain.back(), "reorder", true);
    (void)scratch;  // scratch buffers stay where they are: iterations still run one at a time
  }

  Stmt s = chain.back()->body;
  for (size_t p = order.size(); p-- > 0;) s = For::make(order[p]->var, order[p]->min, order[p]->extent, order[p]->forKind, s);
  setBody(replaceStmt(m_func.body, chain.front(), s));
  std::vector<std::string> names;
  for (const LoopSite& site : sites) names.push_back(loopName(site.loop));
  record({"reorder", names, {}});
}

std::string Schedule::fuse(const std::string& outerName, const std::string& innerName) {
  LoopSite outer = findLoop(m_func, outerName, "fuse");
  LoopSite inner = findLoop(m_func, innerName, "fuse");
  const For *o = outer.loop, *i = inner.loop;
  if (o->body.get() != i)
    fail("fuse", "loop " + quoted(loopName(i)) + " is not the direct, perfectly nested child of " + quoted(loopName(o)));
  requireKind(o, {ForKind::Serial}, "fuse");
  requireKind(i, {ForKind::Serial}, "fuse");
  int64_t eo = *constExtent(o, "fuse"), ei = *constExtent(i, "fuse");
  if (varsIn(i->min).count(o->var.as<Var>()))
    fail("fuse", "bounds of loop " + quoted(loopName(i)) + " depend on loop " + quoted(loopName(o)));
  std::set<std::string> used = usedNames(m_func.body);
  for (const Buffer& b : m_func.params) used.insert(b->name);
  Type t = o->var.type();
  Expr f = Var::make(freshName(loopName(o) + "_" + loopName(i) + "_fused", used), t);
  auto plus = [](const Expr& mn, const Expr& x) {
    const int64_t* c = asConstInt(mn);
    return c && *c == 0 ? x : mn + x;
  };
  Expr outerValue = plus(o->min, ei == 1 ? f : f / IntImm::make(t, ei));
  Expr innerValue = plus(i->min, ei == 1 ? IntImm::make(t, 0) : f % IntImm::make(t, ei));
  Stmt body = substitute(i->body, {{o->var, outerValue}, {i->var, innerValue}});
  setBody(replaceStmt(m_func.body, o, For::make(f, IntImm::make(t, 0), IntImm::make(t, eo * ei), ForKind::Serial, body)));
  record({"fuse", {loopName(o), loopName(i)}, {}});
  return f.as<Var>()->name;
}

std::string Schedule::merge(const std::string& firstName, const std::string& secondName) {
  LoopSite first = findLoop(m_func, firstName, "merge");
  LoopSite second = findLoop(m_func, secondName, "merge");
  const For *a = first.loop, *b = second.loop;
  const std::string what = "merge: loops " + quoted(loopName(a)) + " and " + quoted(loopName(b));
  std::vector<const StmtNode*> path = pathTo(m_func.body, a);
  const Seq* seq = path.size() >= 2 ? path[path.size() - 2]->as<Seq>() : nullptr;
  size_t at = 0;
  while (seq && at + 1 < seq->stmts.size() && seq->stmts[at].get() != a) ++at;
  if (!seq || at + 1 >= seq->stmts.size() || seq->stmts[at + 1].get() != b)
    fail("merge", "loop " + quoted(loopName(b)) + " does not directly follow loop " + quoted(loopName(a)));
  requireKind(a, {ForKind::Serial}, "merge");
  requireKind(b, {ForKind::Serial}, "merge");
  const int64_t *minA = asConstInt(a->min), *minB = asConstInt(b->min);
  if (!minA || !minB || *minA != *minB || *constExtent(a, "merge") != *constExtent(b, "merge"))
    fail("merge", "loops " + quoted(loopName(a)) + " and " + quoted(loopName(b)) + " have different bounds");
  checkMerge(m_func, a, b, what);
  std::vector<Stmt> stmts = seq->stmts;
  stmts[at] = For::make(a->var, a->min, a->extent, ForKind::Serial,
                        Seq::make({a->body, substitute(b->body, {{b->var, a->var}})}));
  stmts.erase(stmts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  Stmt merged = Seq::make(std::move(stmts));
  const std::string name = loopName(a), gone = loopName(b);
  setBody(replaceStmt(m_func.body, seq, merged));
  record({"merge", {name, gone}, {}});
  return name;
}

std::vector<std::string> Schedule::fission(const std::string& loop) {
  LoopSite site = findLoop(m_func, loop, "fission");
  const For* op = site.loop;
  const std::string name = loopName(op);
  requireKind(op, {ForKind::Serial}, "fission");
  const auto* seq = op->body.as<Seq>();
  if (!seq || seq->stmts.size() < 2)
    fail("fission", "the body of loop " + quoted(name) + " is not a sequence of statements");
  std::set<std::string> used = usedNames(m_func.body);
  for (const Buffer& b : m_func.params) used.insert(b->name);
  std::vector<Stmt> parts;
  std::vector<std::string> names;
  for (size_t k = 0; k < seq->stmts.size(); ++k) {
    Expr var = op->var;
    if (k > 0) {
      var = Var::make(freshName(name + "_f", used), op->var.type());
      used.insert(var.as<Var>()->name);
    }
    names.push_back(var.as<Var>()->name);
    parts.push_back(For::make(var, op->min, op->extent, ForKind::Serial,
                              k == 0 ? seq->stmts[k] : substitute(seq->stmts[k], {{op->var, var}})));
  }
  // Legal when merging the loops back would be: for each earlier part p and later part q, no
  // iteration of q depends on a later iteration of p (pairwise, checkMerge).
  PrimFunc distributed = m_func;
  Stmt seqOfLoops = Seq::make(parts);
  distributed.body = replaceStmt(m_func.body, op, seqOfLoops);
  for (size_t p = 0; p < parts.size(); ++p)
    for (size_t q = p + 1; q < parts.size(); ++q)
      checkMerge(distributed, parts[p].as<For>(), parts[q].as<For>(),
                 "fission: loop " + quoted(name) + ", statements " + std::to_string(p) + " and " +
                     std::to_string(q));
  setBody(distributed.body);
  record({"fission", {name}, {}});
  return names;
}

std::vector<std::string> Schedule::tile(const std::string& x, const std::string& y, int64_t fx, int64_t fy) {
  LoopSite sx = findLoop(m_func, x, "tile");
  LoopSite sy = findLoop(m_func, y, "tile");
  std::vector<const For*> chain = perfectChain(sx.loop);
  if (sx.loop == sy.loop || std::find(chain.begin(), chain.end(), sy.loop) == chain.end())
    fail("tile", "loop " + quoted(loopName(sy.loop)) + " is not perfectly nested inside " + quoted(loopName(sx.loop)));
  std::string xName = loopName(sx.loop), yName = loopName(sy.loop);
  PrimFunc before = m_func;
  ++m_quiet;
  try {
    auto [xo, xi] = split(xName, fx, TailStrategy::Guard);
    auto [yo, yi] = split(yName, fy, TailStrategy::Guard);
    reorder({xo, yo, xi, yi});
    --m_quiet;
    record({"tile", {xName, yName}, {fx, fy}});
    return {xo, yo, xi, yi};
  } catch (...) {
    --m_quiet;
    m_func = before;
    throw;
  }
}

void Schedule::unroll(const std::string& loop) {
  LoopSite site = findLoop(m_func, loop, "unroll");
  const For* op = site.loop;
  constExtent(op, "unroll");
  requireKind(op, {ForKind::Serial}, "unroll");
  setBody(replaceStmt(m_func.body, op, For::make(op->var, op->min, op->extent, ForKind::Unrolled, op->body)));
  record({"unroll", {loopName(op)}, {}});
}

void Schedule::vectorize(const std::string& loop) {
  LoopSite site = findLoop(m_func, loop, "vectorize");
  const For* op = site.loop;
  const std::string& name = loopName(op);
  int64_t n = *constExtent(op, "vectorize");
  requireKind(op, {ForKind::Serial}, "vectorize");
  if (containsLoop(op->body)) fail("vectorize", "loop " + quoted(name) + " is not innermost");
  if (n < 2 || n > kMaxVectorizeExtent)
    fail("vectorize", "loop " + quoted(name) + " has extent " + std::to_string(n) + "; vectorize takes 2 to " +
                          std::to_string(kMaxVectorizeExtent) + " (split it first)");
  // vectorizeInnermostLoops takes the lane count of 32-bit elements; twice the extent makes the
  // widest piece the largest power of two ≤ n for every element width up to 64 bits.
  // Divisions the enclosing loops' ranges resolve (a reshape's index after a split at its axis
  // boundary) go first: what is left of them must not depend on the loop.
  Stmt plain = simplifyWithin(site.stmt, site.enclosing);
  Stmt vec = tir::vectorizeInnermostLoops(plain, static_cast<int>(2 * n));
  if (vec.same(plain))
    fail("vectorize", "loop " + quoted(name) +
                          " is not straight-line code with stores contiguous in it (guards, reductions and strided "
                          "stores do not vectorize; split with a tail loop instead of a guard)");
  setBody(replaceStmt(m_func.body, op, simplify(vec)));
  record({"vectorize", {name}, {}});
}

void Schedule::parallel(const std::string& loop) {
  LoopSite site = findLoop(m_func, loop, "parallel");
  const For* op = site.loop;
  const std::string& name = loopName(op);
  requireKind(op, {ForKind::Serial}, "parallel");
  for (const For* outer : site.enclosing)
    if (outer->forKind == ForKind::Parallel)
      fail("parallel", "loop " + quoted(name) + " is inside parallel loop " + quoted(loopName(outer)));
  for (const LoopSite& inner : allLoops(op->body))
    if (inner.loop->forKind == ForKind::Parallel)
      fail("parallel", "loop " + quoted(name) + " contains parallel loop " + quoted(loopName(inner.loop)));
  std::set<const BufferNode*> scratch = checkIndependent(m_func, site, op, "parallel", false);
  // Scratch buffers shared by all iterations get one copy per iteration (per worker).
  Stmt body = op->body;
  std::vector<Buffer> moved;
  for (const BufferNode* b : scratch) moved.push_back(findAllocate(m_func.body, b)->buffer);
  std::sort(moved.begin(), moved.end(), [](const Buffer& a, const Buffer& b) { return a->name < b->name; });
  for (const Buffer& b : moved) body = Allocate::make(b, body);
  Stmt stripped = stripAllocates(m_func.body, scratch);
  setBody(replaceStmt(stripped, op, For::make(op->var, op->min, op->extent, ForKind::Parallel, body)));
  record({"parallel", {name}, {}});
}

void Schedule::apply(const TraceStep& step) {
  validateStep(step);
  const std::string& p = step.primitive;
  if (p == "split") {
    if (step.params[1] != 0 && step.params[1] != 1) fail("split", "tail strategy must be 0 (guard) or 1 (loop)");
    split(step.loops[0], step.params[0], static_cast<TailStrategy>(step.params[1]));
  } else if (p == "reorder") {
    reorder(step.loops);
  } else if (p == "fuse") {
    fuse(step.loops[0], step.loops[1]);
  } else if (p == "store_at") {
    storeAt(step.loops[0], step.loops[1]);
  } else if (p == "merge") {
    merge(step.loops[0], step.loops[1]);
  } else if (p == "fission") {
    fission(step.loops[0]);
  } else if (p == "tile") {
    tile(step.loops[0], step.loops[1], step.params[0], step.params[1]);
  } else if (p == "unroll") {
    unroll(step.loops[0]);
  } else if (p == "vectorize") {
    vectorize(step.loops[0]);
  } else if (p == "parallel") {
    parallel(step.loops[0]);
  } else if (p == "compute_at") {
    computeAt(step.loops[0], step.loops[1]);
  } else if (p == "cache_write") {
    cacheWrite(step.loops[0]);
  } else if (p == "rfactor") {
    rfactor(step.loops[0]);
  } else if (p == "dot4") {
    dot4(step.loops[0]);
  }
}

}  // namespace kiln::core::tir
