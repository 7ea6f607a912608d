// The cache_write primitive (see schedule.h).
//
// Before:                                       After cache_write(k):
//   for (k, 0, K)                                 allocate y_local: f32[64]
//     for (i, 0, 4)                               for (i_r, 0, 4) for (j_r, 0, 16)
//       for (j, 0, 16)                              y_local[i_r·16 + j_r] = y[A + i_r·N + j_r]
//         y[A + i·N + j] = y[A + i·N + j] + v     for (k, 0, K) for (i, 0, 4) for (j, 0, 16)
//                                                   y_local[i·16 + j] = y_local[i·16 + j] + v
//                                                 for (i_w, 0, 4) for (j_w, 0, 16)
//                                                   y[A + i_w·N + j_w] = y_local[i_w·16 + j_w]
//
// A reduction that starts from an initial value on the loop's first iteration (y[f] = select(k ==
// 0, b, y[f]) + v, schedule_analysis.h: initReduction) needs no read of the block: the copy-in
// stores that value (b) and the updates inside the loop drop the select.
//
// The loop's body is a perfect chain of loops around one store, to the block. Its index is A (an
// expression of loops outside `loop`, not of `loop` itself) plus an affine, injective function of
// the chain's variables (mixed radix: each coefficient larger than what the smaller ones reach),
// and every read of the block in the store reads that same element. So the iterations of `loop`
// update one fixed window of the block, each element from one chain iteration: staging the window
// in a local buffer, read before the loop and written back after it, computes the same values.
// The local buffer is row-major over the chain loops the index uses; the copy nests repeat those
// loops (kinds kept, so an unrolled register tile stays unrolled) with fresh names.
#include <algorithm>

#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/schedule.h"
#include "core/tir/schedule_analysis.h"
#include "core/tir/simplify.h"
#include "runtime/error.h"

namespace kiln::core::tir {

using namespace schedule_detail;

namespace {

const char* const kPrim = "cache_write";

/// Replaces every access of one buffer at one index by an access of another buffer.
struct Redirect : IRMutator {
  const BufferNode* from = nullptr;
  Buffer to;
  Expr index;
  using IRMutator::visit;
  Expr visit(const Load* op, const Expr& self) override {
    if (op->buffer.get() != from) return IRMutator::visit(op, self);
    return Load::make(to, index);
  }
  Stmt visit(const Store* op, const Stmt& self) override {
    if (op->buffer.get() != from) return IRMutator::visit(op, self);
    return Store::make(to, index, mutate(op->value));
  }
};

}  // namespace

void Schedule::cacheWrite(const std::string& loop) {
  LoopSite site = findLoop(m_func, loop, kPrim);
  const For* outer = site.loop;
  // The perfect chain inside the loop and the one store at its bottom.
  std::vector<const For*> chain;
  Stmt s = outer->body;
  while (const auto* f = s.as<For>()) {
    chain.push_back(f);
    s = f->body;
  }
  const auto* store = s.as<Store>();
  if (!store) fail(kPrim, "the body of loop " + quoted(loop) + " is not a perfect loop nest around one store");
  const BufferNode* target = store->buffer.get();
  const std::string& block = target->name;
  for (const For* f : chain) {
    if (!asConstInt(f->min) || !asConstInt(f->extent) || *asConstInt(f->extent) < 1)
      fail(kPrim, "loop " + quoted(loopName(f)) + " has non-constant bounds");
    if (f->forKind != ForKind::Serial && f->forKind != ForKind::Unrolled)
      fail(kPrim, "loop " + quoted(loopName(f)) + " is not serial or unrolled");
  }
  if (store->index.type().lanes != 1) fail(kPrim, "the store to " + quoted(block) + " is vectorized already");

  // The index: outer part A plus an affine function of the chain's variables, not of the loop's.
  std::set<const Var*> inner{outer->var.as<Var>()};
  for (const For* f : chain) inner.insert(f->var.as<Var>());
  std::optional<Affine> form = affineForm(store->index, inner);
  if (!form) fail(kPrim, "the index of " + quoted(block) + " is not affine in the loops inside " + quoted(loop));
  struct Axis {
    const For* loop;
    int64_t coef, extent;
  };
  std::vector<Axis> axes;  // chain order, outer first
  for (const auto& [text, term] : form->terms)
    if (term.first.as<Var>() == outer->var.as<Var>())
      fail(kPrim, "the index of " + quoted(block) + " moves with loop " + quoted(loop) + ": its iterations update different elements");
  // Chain loops of one iteration take their first value in the copy nests.
  std::vector<std::pair<Expr, Expr>> single;
  for (const For* f : chain) {
    if (*asConstInt(f->extent) == 1) {
      single.emplace_back(f->var, f->min);
      continue;
    }
    for (const auto& [text, term] : form->terms)
      if (term.first.as<Var>() == f->var.as<Var>()) axes.push_back({f, term.second, *asConstInt(f->extent)});
  }
  // Injective in the loops that move the element (mixed radix).
  std::vector<const For*> moving;
  for (const Axis& a : axes) moving.push_back(a.loop);
  if (!injectiveIn(store->index, moving))
    fail(kPrim, "iterations of the loops inside " + quoted(loop) + " may update one element of " + quoted(block) + " twice");
  // Every read of the block in the store reads the stored element.
  struct Reads : IRVisitor {
    const BufferNode* buffer;
    std::string index;
    bool same = true;
    using IRVisitor::visit;
    void visit(const Load* op) override {
      if (op->buffer.get() == buffer && print(op->index) != index) same = false;
      IRVisitor::visit(op);
    }
  } reads;
  reads.buffer = target;
  reads.index = print(store->index);
  reads.visitExpr(store->value);
  reads.visitExpr(store->index);
  if (!reads.same) fail(kPrim, "the store to " + quoted(block) + " reads another element of it");

  // ---- build ------------------------------------------------------------------------------------
  Type it = store->index.type();
  std::set<std::string> used = usedNames(m_func.body);
  for (const Buffer& p : m_func.params) used.insert(p->name);
  int64_t size = 1;
  for (const Axis& a : axes) size *= a.extent;
  Buffer local = makeBuffer(freshName(block + "_local", used), store->buffer->elemType, {size});
  // Row-major over the axes: the last axis is contiguous.
  auto localIndex = [&](const std::vector<Expr>& vars) {
    Expr index = IntImm::make(it, 0);
    int64_t stride = 1;
    for (size_t a = axes.size(); a-- > 0;) {
      Expr rel = vars[a] - axes[a].loop->min;
      index = index + rel * IntImm::make(it, stride);
      stride *= axes[a].extent;
    }
    return simplify(index);
  };
  std::vector<Expr> vars;
  for (const Axis& a : axes) vars.push_back(a.loop->var);
  // A reduction that starts from an initial value at the loop's first iteration (initReduction):
  // the copy-in computes that value instead of reading the block, and the loop's updates no longer
  // select it. Only when the value uses no loop of the nest that the copy nests lack.
  std::optional<InitReduction> init = initReduction(store);
  if (init) {
    const int64_t* first = asConstInt(outer->min);
    std::set<const Var*> known;
    for (const Axis& a : axes) known.insert(a.loop->var.as<Var>());
    for (const auto& [var, value] : single) known.insert(var.as<Var>());
    // The loop is one of the condition's, and the others run inside it from their first value
    // without moving the element: then the condition holds exactly at an element's first update
    // in the loop.
    bool fits = first && init->firstOf(outer->var.as<Var>()) == *first;
    size_t inside = 1;
    std::set<const Var*> elementVars = varsIn(store->index);
    for (const For* f : chain) {
      if (std::optional<int64_t> v = init->firstOf(f->var.as<Var>())) {
        fits = fits && asConstInt(f->min) && *asConstInt(f->min) == *v && !elementVars.count(f->var.as<Var>());
        ++inside;
      }
      if (varsIn(init->init).count(f->var.as<Var>()) && !known.count(f->var.as<Var>())) fits = false;
    }
    fits = fits && inside == init->firsts.size();
    if (!fits) init.reset();
  }
  Stmt staged = outer->body;
  if (init) staged = replaceStmt(staged, store, Store::make(store->buffer, store->index, init->reduced));
  Redirect redirect;
  redirect.from = target;
  redirect.to = local;
  redirect.index = localIndex(vars);
  Stmt updated = redirect.mutate(staged);
  // Copy nests over the axes, with fresh loop variables.
  auto copyNest = [&](bool in, const std::string& suffix) {
    Expr element = simplify(substitute(store->index, single));
    Expr value = in && init ? simplify(substitute(substitute(init->init, single), {{outer->var, outer->min}}))
                            : Load::make(store->buffer, element);
    Stmt body = in ? Store::make(local, localIndex(vars), value)
                   : Store::make(store->buffer, element, Load::make(local, localIndex(vars)));
    for (size_t a = axes.size(); a-- > 0;) {
      const For* f = axes[a].loop;
      body = For::make(f->var, f->min, f->extent, f->forKind, body);
    }
    return cloneWithFreshVars(body, suffix, used);
  };
  Stmt fill = copyNest(true, "_r");
  Stmt update = For::make(outer->var, outer->min, outer->extent, outer->forKind, updated);
  Stmt flush = copyNest(false, "_w");
  setBody(replaceStmt(m_func.body, outer, Allocate::make(local, Seq::make({fill, update, flush}))));
  record({"cache_write", {loop}, {}});
}

}  // namespace kiln::core::tir
