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
// nests perfectly and does not move the element, down to the one store at the bottom of the
// chain: `y[f] = y[f] op v`, f free of every loop of the chain and v not reading y.
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
  // The loops above it that nest perfectly and reduce into the same element join the chain.
  const For* top = factored;
  for (size_t i = site.enclosing.size(); i-- > 0;) {
    const For* f = site.enclosing[i];
    if (f->body.get() != static_cast<const StmtNode*>(top) || movesElement(f)) break;
    top = f;
    chain.insert(chain.begin(), f);
  }
  for (const For* f : chain) {
    if (movesElement(f))
      fail(kPrim, "loop " + quoted(loopName(f)) + " moves the element of " + quoted(block) + " it updates");
    if (f->forKind != ForKind::Serial && f->forKind != ForKind::Unrolled)
      fail(kPrim, "loop " + quoted(loopName(f)) + " is not serial or unrolled");
  }
  const int64_t* min = asConstInt(factored->min);
  const int64_t* extent = asConstInt(factored->extent);
  if (!min || !extent || *extent < 1) fail(kPrim, "loop " + quoted(loop) + " has non-constant bounds");
  if (*extent > kMaxPartials)
    fail(kPrim, "loop " + quoted(loop) + " has " + std::to_string(*extent) +
                    " iterations, more partial results than " + std::to_string(kMaxPartials) +
                    " (split it first)");
  if (loadsBuffer(store->index, store->buffer.get()))
    fail(kPrim, "the index of " + quoted(block) + " reads " + quoted(block));
  std::optional<Update> update = reductionUpdate(store);
  if (!update)
    fail(kPrim, "the store to " + quoted(block) + " is not a reduction " + block + "[f] = " + block +
                    "[f] op v (op one of + * min max, v not reading " + quoted(block) + ")");

  // ---- build ------------------------------------------------------------------------------------
  std::set<std::string> used = usedNames(m_func.body);
  for (const Buffer& p : m_func.params) used.insert(p->name);
  Buffer partial = makeBuffer(freshName(block + "_rf", used), store->buffer->elemType, {*extent});
  Type it = factored->var.type();
  auto at = [&](const Expr& var) { return simplify(var - IntImm::make(it, *min)); };
  Expr initVar = Var::make(freshName(loop + "_init", used), it);
  Expr foldVar = Var::make(freshName(loop + "_fold", used), it);
  Stmt init = For::make(initVar, IntImm::make(it, 0), factored->extent, ForKind::Serial,
                        Store::make(partial, initVar, update->identity));
  Expr slot = at(factored->var);
  Stmt partialUpdate = Store::make(partial, slot, update->combine(Load::make(partial, slot), update->rest));
  Stmt reduced = replaceStmt(top->body, store, partialUpdate);
  Stmt loopNest = For::make(top->var, top->min, top->extent, top->forKind, reduced);
  Stmt fold = For::make(
      foldVar, IntImm::make(it, 0), factored->extent, ForKind::Serial,
      Store::make(store->buffer, store->index,
                  update->combine(Load::make(store->buffer, store->index), Load::make(partial, foldVar))));
  setBody(replaceStmt(m_func.body, top, Allocate::make(partial, Seq::make({init, loopNest, fold}))));
  record({"rfactor", {loop}, {}});
}

}  // namespace kiln::core::tir
