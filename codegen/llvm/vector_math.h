// Vector implementations of transcendental intrinsics for f32 vectors. LLVM legalizes a vector
// llvm.exp by calling expf once per lane, which makes fused epilogues such as silu or sigmoid
// (and softmax) an order of magnitude slower than the convolution they follow. These emit the
// whole computation as vector IR instead, accurate to a few ulp (no fast-math licence needed):
//
//   exp(x):  n = rint(x·log2 e), r = x − n·ln2 (Cody–Waite, two-part ln2), e^r by a degree-7
//            polynomial (Cephes expf coefficients, |rel err| < 2e-7 on |r| ≤ ln2/2), scaled by
//            2^n built in the exponent field in two halves (no overflow of the biased exponent,
//            gradual underflow into denormals); x is clamped so n fits, NaN passes through.
//   tanh(x): |x| < 0.625: x + x³·P(x²) (Cephes tanhf); otherwise sign(x)·(1 − 2/(exp(2|x|)+1)).
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace kiln::codegen {

/// exp of a <N x float> value.
llvm::Value* emitVectorExpF32(llvm::IRBuilderBase& b, llvm::Value* x);
/// tanh of a <N x float> value.
llvm::Value* emitVectorTanhF32(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace kiln::codegen
