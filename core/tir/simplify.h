// Algebraic simplification of the loop IR: constant folding, identities (x+0, x*1, x*0, x/1,
// min/max of constants), reassociation of constant offsets ((x+c1)+c2), folding of comparisons
// and selects with known conditions, removal of loops with extent 0 and substitution of loops
// with extent 1, and pruning of IfThenElse with constant conditions. It never changes what a
// program computes (integer identities assume no overflow, as the IR semantics state).
#pragma once

#include "core/tir/stmt.h"

namespace kiln::core::tir {

Expr simplify(const Expr& e);
Stmt simplify(const Stmt& s);
PrimFunc simplify(const PrimFunc& f);

}  // namespace kiln::core::tir
