// TIR → LLVM IR (private to codegen/). Every PrimFunc of a model becomes one external function
// `void NAME(ptr args)` (runtime/kernel_abi.h) in a single module, plus internal task functions
// outlined from its Parallel loops.
//
// Lowering rules (the contract tests rely on):
// - Buffer parameters are loaded from args[i] once at entry. Each buffer (parameter or Allocate)
//   gets its own alias scope: every access carries !alias.scope for its buffer and !noalias for
//   all others, which is how "parameters are distinct buffers" reaches LLVM's alias analysis
//   (it survives outlining, where noalias parameter attributes would not).
// - Integers: add/sub/mul carry nsw (signed) per the IR's no-overflow rule; Div/Mod are
//   sdiv/srem (udiv/urem for unsigned). Floats: IEEE ops with only the `contract` flag (FMA),
//   unless the PrimFunc asks for more with attrs["fast_math"] = a comma list of LLVM flag names
//   (reassoc nnan ninf nsz arcp afn contract, or fast). "reassoc" is what lets LLVM vectorize
//   a float reduction into a scalar accumulator (sum order changes).
//   Float Min/Max are selects (a < b ? a : b), which x86 lowers to minps/maxps.
//   Comparisons are ordered, except NE which is unordered (C's !=, so NE == !EQ).
// - Vector loads/stores with a stride-1 Ramp index are plain vector accesses; any other vector
//   index is a masked gather/scatter with an all-true mask. Bool buffers are bytes in memory.
// - Calls: exp log sqrt fabs floor ceil round pow → LLVM intrinsics (round is C's: ties away from
//   zero, as in the TIR interpreter), tanh erf → libm tanhf/erff for scalars,
//   sigmoid → 1 / (1 + exp(-x)); f32 vectors of exp, tanh, erf and sigmoid are vector code
//   (vector_math.h), never a libm call per lane.
// - Loops: Serial is a canonical i64 (or the var's type) loop; Vectorized adds
//   llvm.loop.vectorize.enable (+ width when the extent is a small constant power of two);
//   Unrolled replicates the body for constant extents up to 64, else llvm.loop.unroll.full;
//   Parallel is outlined into `i32 NAME.parK(i64 begin, i64 end, ptr closure)` and launched
//   through kiln_parallel_launch; parallel loops nested inside it run serially.
// - Allocate: alloca in the function's entry block (64-byte aligned) up to 64 KiB, else
//   aligned_alloc/free around the body.
#pragma once

#include <memory>
#include <vector>

#include "codegen/target.h"
#include "core/tir/stmt.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen {

/// Builds the unoptimized module for `funcs` and verifies it. Throws kiln::InternalError naming
/// the function when the IR is malformed (an unbound variable, an unknown buffer, a verifier
/// failure) and kiln::Error (Usage) for duplicate kernel names.
std::unique_ptr<llvm::Module> buildModule(const std::vector<core::tir::PrimFunc>& funcs, const Target& target,
                                          llvm::TargetMachine& tm, llvm::LLVMContext& ctx);

}  // namespace kiln::codegen
