// Bounds-checked loop IR (a debug mode): every Load and Store whose buffer has a known extent gets
// its index checked against [0, extent) when the kernel runs, so an out-of-bounds schedule is
// caught in tests instead of silently reading or corrupting memory.
//
// The check is an expression that wraps the index (so it sits exactly where the access is, also
// under IfThenElse guards and inside vectorized code):
//
//     bounds_check(x, lowOffset, highOffset, extent, site)  →  x
//
// It returns x when 0 <= x + lowOffset and x + highOffset < extent; otherwise the kernel stops.
// A scalar index i becomes bounds_check(i, 0, 0, n, site); a vector index Ramp(b, s, L) becomes
// Ramp(bounds_check(b, min(0, (L-1)*s), max(0, (L-1)*s), n, site), s, L) (the lowest and the
// highest lane); Broadcast(v, L) checks v. Other vector indices (none are produced by lowering)
// stay unchecked and are counted. All five operands have the index's type; `site` is a constant
// into the function's attrs["bounds_check"], the comma-separated names of the checked buffers.
//
// An access needs no check when the loops around it prove it in bounds (BoundsCheckMode::Unproven,
// the default): its index is built from constants, the variables of loops with constant bounds
// and lets of such expressions by + - * / % min max, every intermediate value stays below 2^31 in
// magnitude, and interval arithmetic over those ranges (schedule_detail::boundsOf) keeps all of
// its lanes in [0, n). What is left to check at run time is what that does not show: indices
// under IfThenElse guards that the ranges alone would not keep in bounds, loads inside indices,
// loops of symbolic extent. Checking what is proven would only cost compile time: LLVM spends
// minutes in its loop analyses on a kernel whose unrolled tiles each branch on a check.
//
// Code generation (codegen/llvm) branches to `kiln_bounds_fail(kernel, buffer, index, extent)`
// (runtime/kernel_abi.h), which prints one line and aborts; the TIR interpreter
// (core/lower/interpreter.h) throws InternalError with the same text (kiln::boundsFailureMessage).
//
// Switches: the loop-IR pass bounds-check (core/compile.h; BuildOptions::boundsCheck, `kiln build
// --bounds-check`) inserts the checks after lowering, so they show in printed IR; the environment variable
// KILN_BOUNDS_CHECK=1 makes the JIT (codegen::JitLibrary::compile) insert them into every
// function it compiles (scripts/sanitize.sh runs all tests that way), while printed IR and
// exported objects stay as lowered. The interpreter checks every access anyway.
#pragma once

#include "core/tir/stmt.h"

namespace kiln::core::tir {

struct BoundsCheckStats {
  int checked = 0;    // accesses that got a check
  int proven = 0;     // accesses the loop ranges keep in bounds (BoundsCheckMode::Unproven)
  int unchecked = 0;  // accesses left alone: unknown extent or an index that is not Ramp/Broadcast
};

enum class BoundsCheckMode {
  Unproven,  // check the accesses that the ranges of the enclosing loops do not prove in bounds
  Every,     // check every access
};

/// Returns `func` with Load/Store indices wrapped in bounds_check (see above) and
/// attrs["bounds_check"] set. A function that already has the attribute is returned unchanged.
PrimFunc insertBoundsChecks(const PrimFunc& func, BoundsCheckStats* stats = nullptr,
                            BoundsCheckMode mode = BoundsCheckMode::Unproven);

/// True when `func` went through insertBoundsChecks.
bool hasBoundsChecks(const PrimFunc& func);

/// True when the environment variable KILN_BOUNDS_CHECK is set to something other than "" or "0".
bool boundsCheckRequested();

/// The buffer name of check `site` of `func` ("?" when out of range).
std::string boundsCheckBufferName(const PrimFunc& func, int64_t site);

}  // namespace kiln::core::tir
