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
//   erf(x):  |x| < 1: x·P(x²), P of degree 6 (minimax for relative error, 1.2e-9 before rounding
//            the coefficients to float); 1 ≤ |x|: sign(x)·(1 − exp(−x² + L(|x|))), where
//            L(a) = log(erfc(a)·e^{a²}) is smooth and a degree-8 polynomial in a − 2.5 fits it on
//            [1, 4] within 1.2e-8 (minimax, absolute); x² is split exactly (hi + lo by an FMA) so
//            the exponent carries no rounding of x²; that exponent lies in [−18, 0], so its exp
//            skips the general clamps, NaN check and split 2^n (GELU 1.2–1.3× faster in
//            bench_kernels' gelu row). |x| is clamped to 4 (erf(4) rounds to 1 in
//            f32), so ±inf give ±1; NaN passes through, ±0 and denormals keep their sign and
//            value (x·P(0)). Measured against libm over a dense sweep of [−5, 5] and special
//            values (tests/unit/codegen/vector_math_test.cpp): max |error| 1.19e-7 (2 ulp of the
//            result, just below |x| = 1; the test asserts ≤ 1.5e-7), ≤ 2 ulp where |erf(x)| < 0.85.
//   sigmoid is 1/(1 + exp(−x)) over the vector exp (codegen_expr.cpp).
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace kiln::codegen {

/// exp of a <N x float> value.
llvm::Value* emitVectorExpF32(llvm::IRBuilderBase& b, llvm::Value* x);
/// tanh of a <N x float> value.
llvm::Value* emitVectorTanhF32(llvm::IRBuilderBase& b, llvm::Value* x);
/// erf of a <N x float> value.
llvm::Value* emitVectorErfF32(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace kiln::codegen
