// Analyses and rewriting helpers behind the schedule primitives (core/tir/schedule.h): finding
// loops by name, keeping loop names unique, cloning statements with fresh variables, affine
// index forms, numeric bounds, and an exact dependence check that replays a loop nest's integer
// control flow. Only core/tir/schedule*.cpp, trace.cpp and loop_features.cpp (bounds, vars) use
// this header.
//
// Semantics the primitives rely on
// - Names. A scheduled function keeps every bound Var (loop and let variables) under a distinct
//   name, so a loop is identified by its variable's name and the printer shows exactly that name.
//   canonicalizeNames() renames duplicates the way the printer would disambiguate them (name_1,
//   name_2, ... in order of first appearance), skipping names already taken.
// - Dependences. checkIterations() runs the integer part of the program (loop bounds, integer
//   lets, conditions, Load/Store indices) with concrete values, never the float arithmetic, and
//   records which iteration of a chosen loop touches which element. It is exact for the index
//   arithmetic the IR allows, and refuses (throws) when an index depends on loaded data or the
//   work exceeds a budget, so a primitive is never applied on a guess. Static proofs
//   (schedule_proofs.cpp) decide the common cases from the indices' affine forms first.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/tir/stmt.h"

namespace kiln::core::tir::schedule_detail {

// ---- loops and names ---------------------------------------------------------------------------

/// A loop of a function and the loops around it (outermost first).
struct LoopSite {
  const For* loop = nullptr;
  Stmt stmt;                        // the For statement itself
  std::vector<const For*> enclosing;
};

/// Throws kiln::Error "<primitive>: <what>".
[[noreturn]] void fail(const std::string& primitive, const std::string& what);
std::string quoted(const std::string& name);
/// The loop a handle (name or "block/k", see schedule.h) refers to; throws naming `primitive`.
LoopSite findLoop(const PrimFunc& func, const std::string& handle, const std::string& primitive);

/// Every loop of `body` in pre-order (outer before inner, earlier before later).
std::vector<LoopSite> allLoops(const Stmt& body);
/// The name of a loop (its Var's name).
const std::string& loopName(const For* loop);

/// Renames bound Vars whose names repeat (see the file comment); returns `body` unchanged when
/// every name is already unique.
Stmt canonicalizeNames(const Stmt& body);
/// Every Var name and buffer name used in `body`.
std::set<std::string> usedNames(const Stmt& body);
/// `base` when free in `used`, else base_1, base_2, ...; the result is added to `used`.
std::string freshName(const std::string& base, std::set<std::string>& used);

/// Copy of `s` in which every Var bound inside it (loops, lets) is a new Var named by
/// `freshName(name + suffix)` and every buffer allocated inside it a new buffer of the same name
/// and shape, so the copy can sit next to the original without sharing bindings.
Stmt cloneWithFreshVars(const Stmt& s, const std::string& suffix, std::set<std::string>& used);

/// The statements from `root` down to `target` (both included); empty when `target` is not in
/// `root`.
std::vector<const StmtNode*> pathTo(const Stmt& root, const StmtNode* target);
/// `root` with the statement node `target` replaced by `replacement`.
Stmt replaceStmt(const Stmt& root, const StmtNode* target, const Stmt& replacement);

/// Vars used (free or bound) in an expression.
std::set<const Var*> varsIn(const Expr& e);
/// Whether `s` contains a For node.
bool containsLoop(const Stmt& s);
/// Whether `s` loads or stores `buffer`.
bool usesBuffer(const Stmt& s, const BufferNode* buffer);
bool loadsBuffer(const Expr& e, const BufferNode* buffer);
/// Buffers stored to / loaded from in `s`.
std::set<const BufferNode*> storedBuffers(const Stmt& s);
std::set<const BufferNode*> loadedBuffers(const Stmt& s);

// ---- affine forms and numeric bounds -------------------------------------------------------------

/// Σ coef·term + constant, where each term is either an "inner" Var or an expression free of
/// inner Vars (kept whole as an opaque atom). Terms are keyed by their printed text, so the form
/// is deterministic and equal atoms merge.
struct Affine {
  std::map<std::string, std::pair<Expr, int64_t>> terms;
  int64_t constant = 0;
  Expr toExpr(Type t) const;
};
/// What affineForm does with a subexpression that is not affine in the inner Vars (a product of
/// two inner-dependent values, / or % of one, a load that depends on one, ...).
enum class NonAffine { Fail, Atom };
/// The affine form of `e` over the Vars in `inner`; nullopt when `e` is not affine in them, or with
/// NonAffine::Atom every such subexpression kept whole as one more atom (never nullopt).
std::optional<Affine> affineForm(const Expr& e, const std::set<const Var*>& inner,
                                 NonAffine nonAffine = NonAffine::Fail);

/// A closed integer interval.
struct Interval {
  int64_t lo = 0, hi = 0;
};
/// Bounds of an integer expression given ranges of its Vars; nullopt when a Var has no range or
/// the expression is outside the supported arithmetic.
std::optional<Interval> boundsOf(const Expr& e, const std::map<const Var*, Interval>& ranges);

/// {e / d, e % d} without a division, given the ranges of e's Vars: e's affine form (divisions
/// and other non-affine parts kept as atoms) splits into q·d (the terms whose coefficients d
/// divides) and a remainder r. Holds when e ≥ 0 (truncating division agrees) and 0 ≤ r ≤ d −
/// span: the `span` consecutive elements from e (a vector's) share one quotient. What a
/// reshape's flat index becomes inside the loops over its axes: ((i·256 + j·64 + k) / 256) % 128
/// with j < 4, k < 64, i < 128 is i. nullopt when the ranges do not show it (or e is not a
/// scalar integer).
std::optional<std::pair<Expr, Expr>> divideByRanges(const Expr& e, int64_t d,
                                                    const std::map<const Var*, Interval>& ranges,
                                                    int64_t span = 1);

// ---- reductions that start from an initial value ------------------------------------------------------

/// The operands of a + b, a · b, min(a, b) or max(a, b): the operations a reduction may update
/// with; nullopt for any other expression.
std::optional<std::pair<Expr, Expr>> reductionOperands(const Expr& e);

/// A store `y[f] = select(v == first, init, y[f]) op rest` (op one of + * min max, either operand
/// order; init, rest and f free of y): a reduction over the loop of variable v whose first
/// iteration starts from `init` instead of y's old value (how a plain nest writes "y = b + Σ"
/// without a separate initializing nest). The condition may be a conjunction
/// `v1 == first1 && v2 == first2 ...`: a reduction over several loops (a packed convolution's
/// input-channel blocks and the channels of a block) that starts at their common first iteration.
struct InitReduction {
  std::vector<std::pair<const Var*, int64_t>> firsts;  // each loop variable and its first value
  Expr init;   // the select's true value
  Expr reduced;  // the store's value with the select replaced by y[f]: the update after the first iteration
  /// The first value of loop variable v in the condition, or nullopt when v is not in it.
  std::optional<int64_t> firstOf(const Var* v) const;
};
std::optional<InitReduction> initReduction(const Store* store);

/// Whether `f`, affine in the variables of `loops` (constant bounds), maps distinct iterations of
/// `loops` to distinct elements (mixed radix: sorted by |coefficient|, each one exceeds what the
/// smaller ones reach). Loops of one iteration do not count; another loop f does not move fails.
bool injectiveIn(const Expr& f, const std::vector<const For*>& loops);

// ---- static dependence proofs (schedule_proofs.cpp) ------------------------------------------------
// Each is exact when it returns true; false only means "not proven" (the replay decides).

/// Whether the iterations of `loop` touch disjoint elements of every buffer they write (with
/// `among`, of those buffers only), from affine indices: one coefficient of the loop per buffer,
/// the inner footprint narrower than it or beyond the loop's reach (mixed radix).
bool disjointIterations(const For* loop, const std::set<const BufferNode*>* among = nullptr);
/// The same where loop variables enter the indices divided (f / E, f % E, repeatedly) or
/// recombined (v · K + w): each such term a variable of its own; either the iteration's own
/// variables are the high digits of a mixed radix over what the rest spans (tail loops and main
/// tiles alike), or the indices are injective in all of them.
bool disjointDividedIterations(const For* loop);
/// Whether every loop of the perfect chain from `scope` down to `unit` is proven disjoint.
bool disjointChain(const For* scope, const For* unit);
/// Whether each iteration of `loop` reads only elements of `buffer` it wrote before: the first
/// statement of the body touching the buffer writes it unconditionally and reads none of it, and
/// every later read reaches only elements that store reaches.
bool windowWrittenFirst(const For* loop, const BufferNode* buffer);

// ---- exact dependence check ------------------------------------------------------------------------

/// How the elements of one buffer are shared between iterations of the checked loop.
struct BufferSharing {
  const BufferNode* buffer = nullptr;
  bool crossIteration = false;  // some element is touched by two iterations, at least one writing
  bool exposedRead = false;     // some read sees a value not written earlier in its own iteration
};

/// Runs `func`'s integer control flow and classifies, for every buffer accessed inside `scope`
/// (a For of the function), how iterations of `scope` share elements. An "iteration" is one
/// execution of the body of `unit` (a For inside or equal to `scope`); accesses are compared
/// within each execution of `scope` separately. Buffers allocated inside `unit`'s body are
/// private to an iteration and skipped. Throws kiln::Error (prefixed with `what`) when an index
/// or loop bound depends on data, or when more than `budget` steps would be needed. Two exact
/// shortcuts keep large nests within the budget: when every loop from `scope` down to `unit` (a
/// perfect chain) provably has iterations that touch disjoint elements (indices affine in the loop
/// variables with one coefficient c of the checked loop per buffer and an inner footprint narrower
/// than |c|; or, with loop variables divided (f / E, f % E, again and again, as a flat tile index
/// taken apart into image, row and column) or recombined (v · K + w, split's form), injective in
/// the variables those terms become) nothing is replayed and no buffer is returned; when every
/// execution of `scope`
/// touches the same pattern shifted by what the loops outside decide, only its first execution
/// is replayed. Loops that touch no buffer written inside `scope` (outside `unit`'s own
/// allocations) are not replayed: only reads of unwritten buffers happen there.
std::vector<BufferSharing> checkIterations(const PrimFunc& func, const For* scope, const For* unit,
                                           const std::string& what, int64_t budget = int64_t{1} << 23);

/// How the iterations of `loop` share the elements of `buffer` (replaying only the loops that
/// access it): crossIteration and exposedRead as in checkIterations. Throws like it. Exact
/// without a replay when the iterations provably touch disjoint elements of it and the first
/// statement of the loop's body that touches it writes, unconditionally, every element that
/// the later statements read (store_at's window of a producer followed by its consumer).
BufferSharing sharingOf(const PrimFunc& func, const For* loop, const BufferNode* buffer, const std::string& what,
                        int64_t budget = int64_t{1} << 23);

/// Checks that `second`, the loop that directly follows `first` (equal bounds), may run inside
/// it, iteration j right after iteration j of `first`: no element that both touch (one writing)
/// is touched by an iteration of `second` before a later iteration of `first`. Exact without a
/// replay when the two loops run as one (second's variable first's) provably touch disjoint
/// elements of the buffers they share; otherwise replays only the loops that touch such
/// elements. Throws kiln::Error (prefixed with `what`) on a dependence, on data-dependent indices
/// or bounds, or beyond `budget` steps.
void checkMerge(const PrimFunc& func, const For* first, const For* second, const std::string& what,
                int64_t budget = int64_t{1} << 23);

/// For tests: with false, checkIterations, sharingOf and checkMerge skip their static proofs
/// (disjoint iterations, a window written first, loops disjoint as one) and always replay, so a
/// test can compare the proofs' verdicts with the replay's. Not thread-safe; default true.
void setStaticProofs(bool on);

}  // namespace kiln::core::tir::schedule_detail
