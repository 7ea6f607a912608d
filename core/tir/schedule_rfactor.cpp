// The rfactor primitive (see schedule.h).
//
// Before:                                   After rfactor(k_i):
//   y[o] = 0                                  y[o] = 0
//   for (k_o, 0, 16)                          allocate y_rf: f32[16]
//     for (k_i, 0, 16)                        for (k_i_init, 0, 16) y_rf[k_i_init] = 0
//       y[o] = y[o] + x[o·256 + k_o·16 + k_i]  for (k_o, 0, 16) for (k_i, 0, 16)
//                                                y_rf[k_i] = y_rf[k_i] + x[o·256 + k_o·16 + k_i]
//                                              for (k_i_fold, 0, 16) y[o] = y[o] + y_rf[k_i_fold]
//
// The factored loop's iterations now update distinct elements (y_rf[k_i]), so it vectorizes, and
// the loops above it keep reducing into each element. The fold combines the partial results in
// the order of the factored loop. The reduction's operation (+, ·, min, max) is associative and
// commutative, so this computes the same result, up to float rounding for + and · (the same
// reassociation reorder accepts).
//
// The reduction is the chain of loops from the outermost one above the factored loop that still
// nests perfectly (serial or unrolled) and does not move the element, down to the one store at
// the bottom of the chain: `y[f] = y[f] op v`, v not reading y. Loops of the chain other than the
// factored one may move the element (a register tile's rows and columns inside the reduction
// loop): each is then a dimension of the partial results, so every element of the tile keeps its
// own, and the init and fold loops run over it too:
//
//   for (k_o, 0, 48)                          y_rf: f32[2 · 3 · 16], index (r·3 + c)·16 + k_i
//     for (r, 0, 2) for (c, 0, 3)             for (k_o, 0, 48) for (r, 0, 2) for (c, 0, 3)
//       for (k_i, 0, 16)                        for (k_i, 0, 16) y_rf[...] = y_rf[...] + x·w
//         y[r·3 + c] = y[r·3 + c] + x·w       for (r_fold, 0, 2) for (c_fold, 0, 3) for (k_i_fold, 0, 16)
//                                               y[r_fold·3 + c_fold] = ... + y_rf[...]
#include <functional>
#include <optional>
#include <string>

#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/schedule.h"
#include "core/tir/schedule_analysis.h"
#include "core/tir/simplify.h"
#include "runtime/error.h"

namespace kiln::core::tir {

using namespace schedule_detail;

namespace {

const char* const kPrim = "rfactor";
// The most partial results rfactor keeps (a local buffer on the stack of every thread).
constexpr int64_t kMaxPartials = 1024;

/// A store `y[f] = y[f] op v` (either operand order): op's identity and its combination.
struct Update {
  Expr identity;
  std::function<Expr(const Expr&, const Expr&)> combine;
  Expr rest;  // v
};

std::optional<Update> reductionUpdate(const Store* store) {
  const BufferNode* y = store->buffer.get();
  const std::string at = print(store->index);
  auto isOld = [&](const Expr& e) {
    const auto* load = e.as<Load>();
    return load && load->buffer.get() == y && print(load->index) == at;
  };
  const Expr& value = store->value;
  std::optional<std::pair<Expr, Expr>> operands = reductionOperands(value);
  if (!operands) return std::nullopt;
  auto [a, b] = *operands;
  if (!isOld(a)) std::swap(a, b);
  if (!isOld(a) || loadsBuffer(b, y)) return std::nullopt;
  Type t = value.type();
  Update u;
  u.rest = b;
  if (value.as<Add>()) {
    // -0.0, not 0.0: x + -0.0 is x for every float x (0.0 + -0.0 is 0.0), so the code
    // generator drops the first update's addition.
    u.identity = t.isFloat() ? FloatImm::make(t, -0.0) : IntImm::make(t, 0);
    u.combine = [](const Expr& p, const Expr& q) { return p + q; };
  } else if (value.as<Mul>()) {
    u.identity = t.isFloat() ? FloatImm::make(t, 1) : IntImm::make(t, 1);
    u.combine = [](const Expr& p, const Expr& q) { return p * q; };
  } else if (value.as<Min>()) {
    u.identity = highestValue(t);
    u.combine = [](const Expr& p, const Expr& q) { return min(p, q); };
  } else {
    u.identity = lowestValue(t);
    u.combine = [](const Expr& p, const Expr& q) { return max(p, q); };
  }
  return u;
}

}  // namespace

void Schedule::rfactor(const std::string& loop) {
  LoopSite site = findLoop(m_func, loop, kPrim);
  const For* factored = site.loop;
  // The chain below the loop and the one store at its bottom.
  std::vector<const For*> chain{factored};
  Stmt s = factored->body;
  while (const auto* f = s.as<For>()) {
    chain.push_back(f);
    s = f->body;
  }
  const auto* store = s.as<Store>();
  if (!store)
    fail(kPrim, "the body of loop " + quoted(loop) + " is not a perfect loop nest around one store");
  const std::string& block = store->buffer->name;
  if (store->index.type().lanes != 1 || store->value.type().lanes != 1)
    fail(kPrim, "the store to " + quoted(block) + " is vectorized already");
  std::set<const Var*> elementVars = varsIn(store->index);
  auto movesElement = [&](const For* f) { return elementVars.count(f->var.as<Var>()) != 0; };
  if (movesElement(factored))
    fail(kPrim, "loop " + quoted(loop) + " moves the element of " + quoted(block) + " it updates");
  // The loops above it that nest perfectly join the chain up to the outermost one that reduces
  // into the element (does not move it); loops of a register tile between them (moving it) join
  // too, each a dimension of the partial results.
  const For* top = factored;
  std::vector<const For*> above;
  for (size_t i = site.enclosing.size(); i-- > 0;) {
    const For* f = site.enclosing[i];
    const For* inner = above.empty() ? top : above.back();
    if (f->body.get() != static_cast<const StmtNode*>(inner)) break;
    if (f->forKind != ForKind::Serial && f->forKind != ForKind::Unrolled) break;
    above.push_back(f);
    if (!movesElement(f)) {
      chain.insert(chain.begin(), above.rbegin(), above.rend());
      above.clear();
      top = f;
    }
  }
  for (const For* f : chain)
    if (f->forKind != ForKind::Serial && f->forKind != ForKind::Unrolled)
      fail(kPrim, "loop " + quoted(loopName(f)) + " is not serial or unrolled");
  // The partial results: one per iteration of the factored loop and of each loop moving the
  // element, the factored loop's index innermost (contiguous, so it vectorizes).
  std::vector<const For*> dims;
  for (const For* f : chain)
    if (movesElement(f)) dims.push_back(f);
  dims.push_back(factored);
  int64_t count = 1;
  for (const For* f : dims) {
    const int64_t* min = asConstInt(f->min);
    const int64_t* extent = asConstInt(f->extent);
    if (!min || !extent || *extent < 1)
      fail(kPrim, "loop " + quoted(loopName(f)) + " has non-constant bounds");
    count *= *extent;
  }
  if (count > kMaxPartials) {
    const std::string what =
        dims.size() == 1
            ? " has " + std::to_string(count) + " iterations, more partial results"
            : " and the loops moving the element make " + std::to_string(count) + " partial results, more";
    fail(kPrim,
         "loop " + quoted(loop) + what + " than " + std::to_string(kMaxPartials) + " (split it first)");
  }
  if (loadsBuffer(store->index, store->buffer.get()))
    fail(kPrim, "the index of " + quoted(block) + " reads " + quoted(block));
  std::optional<Update> update = reductionUpdate(store);
  if (!update)
    fail(kPrim, "the store to " + quoted(block) + " is not a reduction " + block + "[f] = " + block +
                    "[f] op v (op one of + * min max, v not reading " + quoted(block) + ")");

  // ---- build ------------------------------------------------------------------------------------
  std::set<std::string> used = usedNames(m_func.body);
  for (const Buffer& p : m_func.params) used.insert(p->name);
  Buffer partial = makeBuffer(freshName(block + "_rf", used), store->buffer->elemType, {count});
  // The flat index of the partial result at the dims' variables `vars` (row-major, from each
  // loop's min).
  auto slotOf = [&](const std::vector<Expr>& vars) {
    Expr slot;
    for (size_t d = 0; d < dims.size(); ++d) {
      Type it = dims[d]->var.type();
      Expr at = vars[d] - dims[d]->min;
      slot = slot.defined() ? slot * IntImm::make(it, *asConstInt(dims[d]->extent)) + at : at;
    }
    return simplify(slot);
  };
  // A nest of fresh loops over the dims (named after them + `suffix`, from 0) around `body(vars)`,
  // the vars shifted to the dims' ranges.
  auto nestOver = [&](const std::string& suffix, const std::function<Stmt(const std::vector<Expr>&)>& body) {
    std::vector<Expr> loopVars, vars;
    for (const For* f : dims) {
      Type it = f->var.type();
      loopVars.push_back(Var::make(freshName(loopName(f) + suffix, used), it));
      vars.push_back(simplify(loopVars.back() + f->min));
    }
    Stmt nest = body(vars);
    for (size_t d = dims.size(); d-- > 0;)
      nest = For::make(loopVars[d], IntImm::make(dims[d]->var.type(), 0), dims[d]->extent, ForKind::Serial,
                       nest);
    return nest;
  };
  std::vector<Expr> dimVars;
  for (const For* f : dims) dimVars.push_back(f->var);
  Stmt init = nestOver("_init", [&](const std::vector<Expr>& vars) {
    return Store::make(partial, slotOf(vars), update->identity);
  });
  Expr slot = slotOf(dimVars);
  Stmt partialUpdate = Store::make(partial, slot, update->combine(Load::make(partial, slot), update->rest));
  Stmt reduced = replaceStmt(top->body, store, partialUpdate);
  Stmt loopNest = For::make(top->var, top->min, top->extent, top->forKind, reduced);
  Stmt fold = nestOver("_fold", [&](const std::vector<Expr>& vars) {
    std::vector<std::pair<Expr, Expr>> moved;
    for (size_t d = 0; d + 1 < dims.size(); ++d) moved.emplace_back(dims[d]->var, vars[d]);
    Expr index = moved.empty() ? store->index : simplify(substitute(store->index, moved));
    return Store::make(store->buffer, index,
                       update->combine(Load::make(store->buffer, index), Load::make(partial, slotOf(vars))));
  });
  setBody(replaceStmt(m_func.body, top, Allocate::make(partial, Seq::make({init, loopNest, fold}))));
  record({"rfactor", {loop}, {}});
}

}  // namespace kiln::core::tir
