// Deterministic text of the loop IR. Variables print by name with a numeric suffix when two
// distinct Vars share a name, assigned in order of first appearance (never by pointer).
//
//   func relu_0(x: f32[1,8], out: f32[1,8]) {
//     parallel (i, 0, 8) {
//       out[i] = max(x[i], 0f)
//     }
//   }
#pragma once

#include <string>

#include "core/tir/stmt.h"

namespace kiln::core::tir {

std::string print(const Expr& e);
std::string print(const Stmt& s);
std::string print(const PrimFunc& f);

}  // namespace kiln::core::tir
