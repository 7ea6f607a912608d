// The loop-IR verifier (core/tir/verify.h): each rule on a kernel that breaks it (built from raw
// nodes where the checked builders would refuse), well-formed kernels pass, and the compile
// driver runs it after lowering and every loop-IR pass when asked.
#include <gtest/gtest.h>

#include "core/compile.h"
#include "core/ir/parser.h"
#include "core/tir/verify.h"
#include "runtime/error.h"

using namespace kiln::core;
using namespace kiln::core::tir;

namespace {

PrimFunc kernel(std::vector<Buffer> params, Stmt body, int numOutputs = 1) {
  PrimFunc f;
  f.name = "k";
  f.params = std::move(params);
  f.numOutputs = numOutputs;
  f.body = std::move(body);
  return f;
}

/// The single problem the verifier finds (fails when there are none or several).
std::string onlyProblem(const PrimFunc& f) {
  std::vector<std::string> p = verifyPrimFunc(f);
  EXPECT_EQ(p.size(), 1u) << (p.empty() ? "no problem" : p.front() + " ... " + p.back());
  return p.empty() ? "" : p.front();
}

Stmt rawStore(Buffer b, Expr index, Expr value) { return Stmt(std::make_shared<Store>(b, index, value)); }

}  // namespace

TEST(TirVerify, AWellFormedKernelPasses) {
  Buffer in = makeBuffer("in", Type::f32(), {16}), out = makeBuffer("out", Type::f32(), {16});
  Buffer tmp = makeBuffer("tmp", Type::f32(), {8});
  Expr i = Var::make("i"), j = Var::make("j"), t = Var::make("t");
  Stmt fill = For::make(j, 0, 8, ForKind::Vectorized, Store::make(tmp, j, Load::make(in, j * 2) * 2.0f));
  Stmt use = For::make(j, 0, 8, ForKind::Unrolled,  // a Var bound again in a sibling scope is fine
                       LetStmt::make(t, j * 2, Store::make(out, t, Load::make(tmp, j))));
  Stmt vec = Store::make(out, Ramp::make(Expr(8), Expr(1), 8), Load::make(in, Ramp::make(Expr(0), Expr(1), 8)));
  PrimFunc f = kernel({in, out}, For::make(i, 0, 1, ForKind::Parallel, Allocate::make(tmp, Seq::make({fill, use, vec}))));
  EXPECT_TRUE(verifyPrimFunc(f).empty()) << verifyPrimFunc(f).front();
}

TEST(TirVerify, VariablesMustBeBoundAndNotRebound) {
  Buffer out = makeBuffer("out", Type::f32(), {4});
  Expr i = Var::make("i"), free = Var::make("n");
  EXPECT_EQ(onlyProblem(kernel({out}, For::make(i, 0, 4, ForKind::Serial, Store::make(out, i + free, f32(0))))),
            "variable 'n' is used outside the loop or let that binds it");
  EXPECT_EQ(onlyProblem(kernel({out}, For::make(i, 0, 2, ForKind::Serial,
                                                For::make(i, 0, 2, ForKind::Serial, Store::make(out, i, f32(0)))))),
            "variable 'i' is bound again inside its own scope");
  // A loop variable is out of scope after its loop.
  Stmt after = Seq::make({For::make(i, 0, 4, ForKind::Serial, Store::make(out, i, f32(0))), Store::make(out, i, f32(1))});
  EXPECT_EQ(onlyProblem(kernel({out}, after)), "variable 'i' is used outside the loop or let that binds it");
}

TEST(TirVerify, BuffersMustBeParametersOrAllocatedAround) {
  Buffer in = makeBuffer("in", Type::f32(), {4}), out = makeBuffer("out", Type::f32(), {4});
  Buffer stray = makeBuffer("stray", Type::f32(), {4});
  Expr i = Var::make("i");
  EXPECT_EQ(onlyProblem(kernel({in, out}, For::make(i, 0, 4, ForKind::Serial, Store::make(out, i, Load::make(stray, i))))),
            "load of buffer 'stray', which is neither a parameter nor allocated around it");
  // Used after its Allocate's body ended.
  Stmt s = Seq::make({Allocate::make(stray, Store::make(stray, 0, f32(1))), Store::make(out, 0, Load::make(stray, 0))});
  EXPECT_EQ(onlyProblem(kernel({in, out}, s)), "load of buffer 'stray', which is neither a parameter nor allocated around it");
  EXPECT_EQ(onlyProblem(kernel({in, out}, Store::make(in, 0, f32(1)))),
            "store to input buffer 'in' (kernels write only outputs and local buffers)");
}

TEST(TirVerify, TypesAndLanesOfLoadsAndStores) {
  Buffer in = makeBuffer("in", Type::i32(), {16}), out = makeBuffer("out", Type::f32(), {16});
  EXPECT_EQ(onlyProblem(kernel({in, out}, rawStore(out, Expr(0), Expr(std::make_shared<IntImm>(Type::i32(), 3))))),
            "store of i32 to f32 buffer 'out'");
  EXPECT_EQ(onlyProblem(kernel({in, out}, rawStore(out, Expr(0), Broadcast::make(f32(1), 8)))),
            "store of 8 lanes with an index of 1");
  Expr badLoad(std::make_shared<Load>(Type::f32(), in, Expr(0)));
  EXPECT_EQ(onlyProblem(kernel({in, out}, Store::make(out, 0, badLoad))), "load of f32 from i32 buffer 'in'");
  Expr floatIndex(std::make_shared<Load>(Type::f32(), out, f32(1)));
  EXPECT_EQ(onlyProblem(kernel({in, out}, Store::make(out, 0, floatIndex))), "load index of type f32");
  Expr mixed(std::make_shared<Add>(Type::f32(), f32(1), Broadcast::make(f32(1), 4)));
  EXPECT_EQ(onlyProblem(kernel({in, out}, Store::make(out, 0, mixed))), "Add of f32 and f32x4");
}

TEST(TirVerify, LoopsAndConstantIndices) {
  Buffer out = makeBuffer("out", Type::f32(), {8});
  Expr i = Var::make("i"), j = Var::make("j");
  EXPECT_EQ(onlyProblem(kernel({out}, For::make(i, 0, 8, ForKind::Serial,
                                                Stmt(std::make_shared<For>(j, Expr(0), i, ForKind::Unrolled,
                                                                          Store::make(out, j, f32(0))))))),
            "unrolled loop 'j' needs a constant extent");
  EXPECT_EQ(onlyProblem(kernel({out}, Store::make(out, 8, f32(0)))), "store at 8 outside buffer 'out' of 8 elements");
  EXPECT_EQ(onlyProblem(kernel({out}, Store::make(out, Ramp::make(Expr(4), Expr(1), 8), Broadcast::make(f32(0), 8)))),
            "store at 4..11 outside buffer 'out' of 8 elements");
  Stmt cond(std::make_shared<IfThenElse>(i, Store::make(out, i, f32(0)), Stmt()));
  EXPECT_EQ(onlyProblem(kernel({out}, For::make(i, 0, 8, ForKind::Serial, cond))), "if condition of type i64");
}

TEST(TirVerify, OrThrowNamesTheKernelAndTheStep) {
  Buffer out = makeBuffer("out", Type::f32(), {8});
  PrimFunc f = kernel({out}, Store::make(out, 9, f32(0)));
  try {
    verifyPrimFuncOrThrow(f, "after pass fast-math");
    FAIL() << "no error";
  } catch (const kiln::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "loop-IR verifier, after pass fast-math, kernel k: store at 9 outside buffer 'out' of 8 elements");
  }
}

// Every kernel the driver lowers verifies, at every level, with the loop-IR passes too: a
// convolution network in the packed layout, a transformer block, pooling, reductions.
TEST(TirVerify, TheDriverVerifiesWhatItLowers) {
  const char* texts[] = {
      R"(graph(%x: f32[1,8,14,14], %w: f32[16,8,3,3], %w2: f32[16,16,1,1], %b: f32[16]) {
    %c = conv2d(%x, %w, %b) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1} : f32[1,16,14,14]
    %r = relu(%c) : f32[1,16,14,14]
    %d = conv2d(%r, %w2) {stride=[1,1], padding=[0,0], dilation=[1,1], groups=1} : f32[1,16,14,14]
    %a = add(%d, %r) : f32[1,16,14,14]
    %p = max_pool2d(%a) {kernel=[2,2], stride=[2,2], padding=[0,0]} : f32[1,16,7,7]
    %m = mean(%p) {axes=[2,3], keepdims=0} : f32[1,16]
    %s = softmax(%m) {axis=1} : f32[1,16]
    return %s
  })",
      R"(graph(%x: f32[2,8,32], %w: f32[32,32]) {
    %q = matmul(%x, %w) : f32[2,8,32]
    %t = transpose(%q) {perm=[0,2,1]} : f32[2,32,8]
    %s = matmul(%q, %t) : f32[2,8,8]
    %p = softmax(%s) {axis=2} : f32[2,8,8]
    %o = matmul(%p, %q) : f32[2,8,32]
    %mu = mean(%o) {axes=[2], keepdims=1} : f32[2,8,1]
    %c = sub(%o, %mu) : f32[2,8,32]
    %v = mul(%c, %c) : f32[2,8,32]
    %e = gelu(%v) {approximate="none"} : f32[2,8,32]
    return %e
  })"};
  for (const char* text : texts) {
    for (int level = 0; level <= passes::kMaxOptLevel; ++level) {
      CompileOptions options;
      options.optLevel = level;
      options.verify = true;
      options.boundsCheck = level == 2;
      CompiledKernels c;
      ASSERT_NO_THROW(c = compile(parseGraph(text), options)) << "O" << level << "\n" << text;
      ASSERT_FALSE(c.module.funcs.empty());
      for (const PrimFunc& f : c.module.funcs) {
        std::vector<std::string> p = verifyPrimFunc(f);
        EXPECT_TRUE(p.empty()) << "O" << level << " " << f.name << ": " << p.front();
      }
    }
  }
}
