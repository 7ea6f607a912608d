// Algebraic simplification of the loop IR: constant folding, identities (x+0, x*1, x*0, x/1,
// min/max of constants), reassociation of constant offsets ((x+c1)+c2), folding of comparisons
// and selects with known conditions, removal of loops with extent 0 and substitution of loops
// with extent 1, and pruning of IfThenElse with constant conditions. Inside loops with constant
// bounds it also removes the integer divisions and remainders that the loops' ranges resolve
// (((i·256 + j·64 + k) / 256) % 128 is i when j < 4 and k < 64: a reshape's flat index read
// inside the loops over its axes). It never changes what a
// program computes (integer identities assume no overflow, as the IR semantics state).
#pragma once

#include <vector>

#include "core/tir/stmt.h"

namespace kiln::core::tir {

Expr simplify(const Expr& e);
Stmt simplify(const Stmt& s);
PrimFunc simplify(const PrimFunc& f);
/// simplify(s) for a statement that runs inside `enclosing` (loops outside it, any order): their
/// ranges hold for its divisions and remainders too.
Stmt simplifyWithin(const Stmt& s, const std::vector<const For*>& enclosing);

}  // namespace kiln::core::tir
