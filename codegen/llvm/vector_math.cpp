// Vector exp, tanh and erf for f32 vectors; see vector_math.h.
#include "codegen/llvm/vector_math.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>

namespace kiln::codegen {

namespace {

llvm::Value* splat(llvm::IRBuilderBase& b, llvm::Type* type, double v) { return llvm::ConstantFP::get(type, v); }

/// a·m + c (fmuladd: an FMA where the target has one).
llvm::Value* mulAdd(llvm::IRBuilderBase& b, llvm::Value* a, llvm::Value* m, llvm::Value* c) {
  return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, m, c});
}

/// exp(x) for f32 vectors. `anyX`: any input (clamped so n fits, 2^n built in two halves so
/// results underflow gradually, NaN passed through); otherwise the caller guarantees a finite x in
/// [−87, 88] (one normal 2^n, no clamp, no NaN check: what erf's exponent needs, 8 instructions
/// fewer).
llvm::Value* expF32(llvm::IRBuilderBase& b, llvm::Value* x, bool anyX) {
  llvm::Type* ft = x->getType();
  auto* vt = llvm::cast<llvm::FixedVectorType>(ft);
  llvm::Type* it = llvm::FixedVectorType::get(b.getInt32Ty(), vt->getNumElements());
  llvm::Value* xc = x;
  if (anyX) {
    // Beyond these, the result is +inf or 0 anyway; clamping keeps n within ±150.
    xc = b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, x, splat(b, ft, -104.0));
    xc = b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, xc, splat(b, ft, 88.8));
  }
  llvm::Value* n = b.CreateUnaryIntrinsic(llvm::Intrinsic::rint, b.CreateFMul(xc, splat(b, ft, 1.44269504088896341)));
  // r = x − n·ln2 with ln2 = 0.693359375 − 2.12194440e-4 (the first part exact in 9 bits).
  llvm::Value* r = mulAdd(b, n, splat(b, ft, -0.693359375), xc);
  r = mulAdd(b, n, splat(b, ft, 2.12194440e-4), r);
  // e^r ≈ 1 + r + r²·P(r)
  llvm::Value* p = splat(b, ft, 1.9875691500e-4);
  for (double c : {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
    p = mulAdd(b, p, r, splat(b, ft, c));
  llvm::Value* r2 = b.CreateFMul(r, r);
  llvm::Value* y = b.CreateFAdd(mulAdd(b, p, r2, r), splat(b, ft, 1.0));
  auto pow2 = [&](llvm::Value* e) {
    llvm::Value* bits = b.CreateShl(b.CreateAdd(e, llvm::ConstantInt::get(it, 127)), 23);
    return b.CreateBitCast(bits, ft);
  };
  llvm::Value* ni = b.CreateFPToSI(n, it);
  if (!anyX) return b.CreateFMul(y, pow2(ni));
  // 2^n = 2^(n/2) · 2^(n − n/2), each a normal number built from its biased exponent.
  llvm::Value* n1 = b.CreateAShr(ni, 1);
  llvm::Value* n2 = b.CreateSub(ni, n1);
  llvm::Value* result = b.CreateFMul(b.CreateFMul(y, pow2(n1)), pow2(n2));
  llvm::Value* isNan = b.CreateFCmpUNO(x, x);
  return b.CreateSelect(isNan, x, result);
}

}  // namespace

llvm::Value* emitVectorExpF32(llvm::IRBuilderBase& b, llvm::Value* x) { return expF32(b, x, true); }

llvm::Value* emitVectorTanhF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  llvm::Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  // Small |x|: x + x³·P(x²).
  llvm::Value* z = b.CreateFMul(x, x);
  llvm::Value* p = splat(b, ft, -5.70498872745e-3);
  for (double c : {2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1})
    p = mulAdd(b, p, z, splat(b, ft, c));
  llvm::Value* small = mulAdd(b, b.CreateFMul(p, z), x, x);
  // Large |x|: 1 − 2/(e^{2|x|} + 1), with the sign of x (exp saturates to +inf: the result is 1).
  llvm::Value* e = emitVectorExpF32(b, b.CreateFAdd(ax, ax));
  llvm::Value* one = splat(b, ft, 1.0);
  llvm::Value* large = b.CreateFSub(one, b.CreateFDiv(splat(b, ft, 2.0), b.CreateFAdd(e, one)));
  large = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, large, x);
  return b.CreateSelect(b.CreateFCmpOLT(ax, splat(b, ft, 0.625)), small, large);
}

llvm::Value* emitVectorErfF32(llvm::IRBuilderBase& b, llvm::Value* x) {
  llvm::Type* ft = x->getType();
  // Horner over coefficients given from the highest degree down.
  auto horner = [&](llvm::Value* t, std::initializer_list<double> coefficients) {
    llvm::Value* p = nullptr;
    for (double c : coefficients) p = p ? mulAdd(b, p, t, splat(b, ft, c)) : splat(b, ft, c);
    return p;
  };
  // |x| < 1: x·P(x²).
  llvm::Value* z = b.CreateFMul(x, x);
  llvm::Value* small = b.CreateFMul(
      x, horner(z, {7.853861462e-05, -8.010193706e-04, 5.188327748e-03, -2.685381286e-02, 1.128358543e-01,
                    -3.761262596e-01, 1.128379107e+00}));
  // 1 ≤ |x| ≤ 4: 1 − exp(L(a) − a²) with a² = hi + lo exactly.
  // a = min(|x|, 4) as a compare and select (one vminps; NaN gives 4, handled at the end).
  llvm::Value* a = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  a = b.CreateSelect(b.CreateFCmpOLT(a, splat(b, ft, 4.0)), a, splat(b, ft, 4.0));
  llvm::Value* u = b.CreateFSub(a, splat(b, ft, 2.5));
  llvm::Value* l = horner(u, {1.599815505e-06, -1.330170653e-05, 7.745493349e-05, -4.201731354e-04,
                              2.165081445e-03, -1.085848734e-02, 5.610639229e-02, -3.526806831e-01,
                              -1.556815267e+00});
  llvm::Value* hi = b.CreateFMul(a, a);
  llvm::Value* lo = b.CreateIntrinsic(llvm::Intrinsic::fma, {ft}, {a, a, b.CreateFNeg(hi)});
  // The exponent L(a) − a² lies in [−18, −1.8] for a in [1, 4] (and in [−1.9, 0.001] for the
  // lanes of the other branch, a < 1): the exp of a known finite range.
  llvm::Value* e = expF32(b, b.CreateFSub(b.CreateFSub(l, hi), lo), false);
  llvm::Value* large = b.CreateFSub(splat(b, ft, 1.0), e);
  large = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, large, x);
  llvm::Value* result = b.CreateSelect(b.CreateFCmpOLT(a, splat(b, ft, 1.0)), small, large);
  // NaN became a = 4: keep it explicitly (small is NaN too, but the compare is false).
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, result);
}

}  // namespace kiln::codegen
