// Helpers for the codegen tests: build small PrimFuncs by hand, JIT them for the host, and run
// them on std::vector buffers.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/llvm/jit.h"
#include "codegen/target.h"
#include "core/tir/stmt.h"

namespace kiln::codegen::testing {

namespace tir = core::tir;

inline const Target& hostTarget() {
  static const Target target = Target::parse("llvm");
  return target;
}

inline tir::PrimFunc makeFunc(const std::string& name, std::vector<tir::Buffer> params, tir::Stmt body,
                              int numOutputs = 1) {
  tir::PrimFunc f;
  f.name = name;
  f.params = std::move(params);
  f.numOutputs = numOutputs;
  f.body = std::move(body);
  return f;
}

inline std::shared_ptr<JitLibrary> jit(const std::vector<tir::PrimFunc>& funcs) {
  return JitLibrary::compile(funcs, hostTarget());
}

/// Calls kernel `name` of `lib` with the given buffer pointers.
inline void runKernel(JitLibrary& lib, const std::string& name, std::vector<void*> args) {
  KilnKernelFn fn = lib.lookup(name);
  ASSERT_NE(fn, nullptr) << name;
  fn(args.data());
}

inline std::vector<float> randomFloats(size_t n, float lo = -2.0f, float hi = 2.0f, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

/// Relative error with an absolute floor of `tol` near zero.
inline ::testing::AssertionResult closeRel(double expected, double actual, double tol) {
  double err = std::fabs(expected - actual);
  double scale = std::max(1.0, std::fabs(expected));
  if (err <= tol * scale || (std::isnan(expected) && std::isnan(actual)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected " << expected << " got " << actual << " (rel err " << err / scale << ")";
}

}  // namespace kiln::codegen::testing

namespace kiln::codegen::testing {

/// A direct NCHW conv2d (batch 1) + bias + relu as a lowering would write it: parallel output
/// channels, a row accumulator (Allocate), a padding guard on rows (IfThenElse) and a clamped,
/// selected load on columns (Select), vectorizable innermost loops.
struct ConvShape {
  int64_t c, h, w, oc, k, stride, pad;
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
};

inline tir::PrimFunc makeConv2d(const std::string& name, const ConvShape& s) {
  using namespace tir;
  Buffer data = makeBuffer("data", Type::f32(), {s.c, s.h, s.w});
  Buffer weight = makeBuffer("weight", Type::f32(), {s.oc, s.c, s.k, s.k});
  Buffer bias = makeBuffer("bias", Type::f32(), {s.oc});
  Buffer out = makeBuffer("out", Type::f32(), {s.oc, s.oh(), s.ow()});
  Buffer acc = makeBuffer("acc", Type::f32(), {s.ow()});
  Expr oc = Var::make("oc"), oh = Var::make("oh"), ow = Var::make("ow"), ic = Var::make("ic");
  Expr kh = Var::make("kh"), kw = Var::make("kw"), ih = Var::make("ih"), iw = Var::make("iw");
  Stmt init =
      For::make(ow, i64(0), i64(s.ow()), ForKind::Vectorized, Store::make(acc, ow, Load::make(bias, oc)));
  Expr inCol = max(min(iw, i64(s.w - 1)), i64(0));
  Expr pixel = select(iw >= i64(0) && iw < i64(s.w), Load::make(data, (ic * s.h + ih) * s.w + inCol), f32(0));
  Expr wv = Load::make(weight, ((oc * s.c + ic) * s.k + kh) * s.k + kw);
  Stmt update = Store::make(acc, ow, Load::make(acc, ow) + pixel * wv);
  Stmt colLoop = For::make(ow, i64(0), i64(s.ow()), ForKind::Vectorized,
                           LetStmt::make(iw, ow * s.stride + kw - s.pad, update));
  Stmt kwLoop = For::make(kw, i64(0), i64(s.k), s.k <= 3 ? ForKind::Unrolled : ForKind::Serial, colLoop);
  Stmt rowGuard = IfThenElse::make(ih >= i64(0) && ih < i64(s.h), kwLoop);
  Stmt khLoop = For::make(kh, i64(0), i64(s.k), ForKind::Serial,
                          LetStmt::make(ih, oh * s.stride + kh - s.pad, rowGuard));
  Stmt icLoop = For::make(ic, i64(0), i64(s.c), ForKind::Serial, khLoop);
  Stmt write =
      For::make(ow, i64(0), i64(s.ow()), ForKind::Vectorized,
                Store::make(out, (oc * s.oh() + oh) * s.ow() + ow, max(Load::make(acc, ow), f32(0))));
  Stmt row = Allocate::make(acc, Seq::make({init, icLoop, write}));
  Stmt body = For::make(oc, i64(0), i64(s.oc), ForKind::Parallel,
                        For::make(oh, i64(0), i64(s.oh()), ForKind::Serial, row));
  return makeFunc(name, {data, weight, bias, out}, body);
}

inline std::vector<float> referenceConv2d(const ConvShape& s, const std::vector<float>& data,
                                          const std::vector<float>& weight, const std::vector<float>& bias) {
  std::vector<float> out(s.oc * s.oh() * s.ow());
  for (int64_t oc = 0; oc < s.oc; ++oc)
    for (int64_t oh = 0; oh < s.oh(); ++oh)
      for (int64_t ow = 0; ow < s.ow(); ++ow) {
        double acc = bias[oc];
        for (int64_t ic = 0; ic < s.c; ++ic)
          for (int64_t kh = 0; kh < s.k; ++kh)
            for (int64_t kw = 0; kw < s.k; ++kw) {
              int64_t ih = oh * s.stride + kh - s.pad, iw = ow * s.stride + kw - s.pad;
              if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
              acc +=
                  double(data[(ic * s.h + ih) * s.w + iw]) * weight[((oc * s.c + ic) * s.k + kh) * s.k + kw];
            }
        out[(oc * s.oh() + oh) * s.ow() + ow] = static_cast<float>(std::max(acc, 0.0));
      }
  return out;
}

}  // namespace kiln::codegen::testing
