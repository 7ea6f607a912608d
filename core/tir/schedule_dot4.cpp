// The dot4 primitive (see schedule.h): an int8 micro-kernel step, the way TVM's tensorize maps a
// loop onto a hardware instruction.
//
// Before:                                       After dot4(j):
//   for (j, 0, 4)                                 y[f] = dot4_u8i8(y[f], a[ramp(A, 1, 4)],
//     y[f] = y[f] + i32(a[A + j]) · i32(b[B + j])                  b[ramp(B, 1, 4)])
//
// (A, B: the indices at j's first value.) Four u8 · i8 products summed into one i32: what one lane
// of AVX-512 VNNI's vpdpbusd computes, exactly (the products and their sum fit i32 without
// saturation). Vectorizing an enclosing loop afterwards widens the call: y[f] becomes a vector
// of accumulators, b's four bytes per lane one contiguous load when the lanes' words are adjacent,
// and a word of `a` that is the same for every lane stays one 4-byte load (core/tir/vectorize.h).
//
// A reduction that starts from an initial value at j's first iteration (y[f] = select(j == 0 &&
// ..., init, y[f]) + product, schedule_analysis.h: initReduction) keeps its start: the call adds
// the four products to the select taken at j's first value.
#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/schedule.h"
#include "core/tir/schedule_analysis.h"
#include "core/tir/simplify.h"
#include "runtime/error.h"

namespace kiln::core::tir {

using namespace schedule_detail;

namespace {

const char* const kPrim = "dot4";

/// The load under `e` when `e` is i32(load) of a one-byte element of type `elem`.
const Load* widenedByteLoad(const Expr& e, const Type& elem) {
  const auto* cast = e.as<Cast>();
  if (!cast || cast->type != Type::i32()) return nullptr;
  const auto* load = cast->value.as<Load>();
  return load && load->type == elem ? load : nullptr;
}

/// The u8 and i8 loads of i32(u8 load) · i32(i8 load), in either order.
std::optional<std::pair<const Load*, const Load*>> byteProduct(const Expr& e) {
  const auto* mul = e.as<Mul>();
  if (!mul) return std::nullopt;
  for (int swap = 0; swap < 2; ++swap) {
    const Expr& x = swap ? mul->b : mul->a;
    const Expr& w = swap ? mul->a : mul->b;
    const Load* u = widenedByteLoad(x, Type::u8());
    const Load* s = widenedByteLoad(w, Type::i8());
    if (u && s) return std::make_pair(u, s);
  }
  return std::nullopt;
}

/// The four bytes a[index(v = min)], ..., a[index(v = min + 3)] as one 4-lane load; fails unless
/// `index` steps by exactly 1 with loop variable `v`.
Expr wordLoad(const Load* load, const Expr& v, const Expr& min, const std::string& loop) {
  const Var* var = v.as<Var>();
  std::optional<Affine> form = affineForm(load->index, {var});
  int64_t step = 0;
  if (form)
    for (const auto& [key, term] : form->terms)
      if (term.first.as<Var>() == var) step = term.second;
  if (step != 1)
    fail(kPrim,
         "the index of '" + load->buffer->name + "' does not step by one element with loop " + quoted(loop));
  Expr first = simplify(substitute(load->index, {{v, min}}));
  return Load::make(load->buffer, Ramp::make(first, IntImm::make(first.type(), 1), 4));
}

}  // namespace

void Schedule::dot4(const std::string& loop) {
  LoopSite site = findLoop(m_func, loop, kPrim);
  const For* op = site.loop;
  const std::string& name = loopName(op);
  if (op->forKind != ForKind::Serial)
    fail(kPrim, "loop " + quoted(name) + " is already " + forKindName(op->forKind));
  const int64_t* extent = asConstInt(op->extent);
  if (!extent || *extent != 4) fail(kPrim, "loop " + quoted(name) + " must have extent 4");
  const auto* store = op->body.as<Store>();
  const char* shape = " is not one store y[f] = y[f] + i32(u8 load) · i32(i8 load)";
  if (!store || store->buffer->elemType != Type::i32() || store->value.type() != Type::i32())
    fail(kPrim, "the body of loop " + quoted(name) + shape);
  const Var* v = op->var.as<Var>();
  if (varsIn(store->index).count(v)) fail(kPrim, "loop " + quoted(name) + " moves the element it updates");
  const auto* add = store->value.as<Add>();
  if (!add) fail(kPrim, "the body of loop " + quoted(name) + shape);
  // Which operand is the product, which the running sum.
  Expr acc;
  std::optional<std::pair<const Load*, const Load*>> product;
  for (int swap = 0; swap < 2 && !product; ++swap) {
    product = byteProduct(swap ? add->a : add->b);
    acc = swap ? add->b : add->a;
  }
  if (!product) fail(kPrim, "the body of loop " + quoted(name) + shape);
  Expr accAt = substitute(acc, {{op->var, op->min}});
  const auto* accLoad = acc.as<Load>();
  bool plainSum = false;
  if (accLoad && accLoad->buffer == store->buffer && !varsIn(acc).count(v)) {
    const Expr apart = simplify(accLoad->index - store->index);
    plainSum = apart.as<IntImm>() && apart.as<IntImm>()->value == 0;
  }
  if (!plainSum) {
    // A start at the loop's first iteration: select(v == min && ..., init, y[f]).
    std::optional<InitReduction> init = initReduction(store);
    const int64_t* min = asConstInt(op->min);
    if (!init || !min || init->firstOf(v) != *min)
      fail(kPrim,
           "the body of loop " + quoted(name) + shape + " (or a reduction starting at its first iteration)");
  }
  auto [u8Load, i8Load] = *product;
  for (const Load* l : {u8Load, i8Load})
    if (l->buffer == store->buffer) fail(kPrim, "loop " + quoted(name) + " reads the buffer it updates");
  Expr a = wordLoad(u8Load, op->var, op->min, name), b = wordLoad(i8Load, op->var, op->min, name);
  Stmt result = Store::make(store->buffer, store->index, call("dot4_u8i8", {simplify(accAt), a, b}));
  setBody(replaceStmt(m_func.body, op, result));
  record({kPrim, {name}, {}});
}

}  // namespace kiln::core::tir
