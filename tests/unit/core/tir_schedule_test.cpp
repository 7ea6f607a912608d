// Schedule primitives and traces (core/tir/schedule.h, core/tir/trace.h): golden TIR text for
// each primitive on small lowered functions, trace text round trips and replay, rejected
// applications, and property tests: random shapes and random primitive sequences must compute
// what the unscheduled function computes, in the TIR interpreter and as JIT-compiled code.
#include "core/tir/schedule.h"
#include "core/tir/schedule_analysis.h"

#include <gtest/gtest.h>

#include <random>

#include "codegen/llvm/jit.h"
#include "core/ir/parser.h"
#include "core/lower/interpreter.h"
#include "core/lower/lower.h"
#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/trace.h"
#include "runtime/error.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::tir {
namespace {

using lower::testing::hostTarget;

// ---- helpers ------------------------------------------------------------------------------------

PrimFunc lowerFirst(const std::string& text, int lanes = 1) {
  Graph g = parseGraph(text);
  lower::LowerOptions options;
  options.vectorLanes = lanes;
  return lower::lowerNode(g, 0, "f", options);
}

/// Rewrites buffers by name (joins two lowered functions into one).
class BufferMap : public IRMutator {
 public:
  std::map<std::string, Buffer> byName;

 protected:
  using IRMutator::visit;
  Buffer map(const Buffer& b) const {
    auto it = byName.find(b->name);
    return it == byName.end() ? b : it->second;
  }
  Expr visit(const Load* op, const Expr& self) override { return Load::make(map(op->buffer), mutate(op->index)); }
  Stmt visit(const Store* op, const Stmt& self) override {
    return Store::make(map(op->buffer), mutate(op->index), mutate(op->value));
  }
};

/// Lowers the two nodes of `text` (node 1 reads node 0's output) into one function whose
/// intermediate is a local buffer: a producer nest followed by a consumer nest.
PrimFunc lowerChain(const std::string& text, int lanes = 1) {
  Graph g = parseGraph(text);
  lower::LowerOptions options;
  options.vectorLanes = lanes;
  PrimFunc p = lower::lowerNode(g, 0, "p", options), c = lower::lowerNode(g, 1, "c", options);
  PrimFunc f;
  f.name = "f";
  Buffer mid = p.params.back();
  BufferMap map;
  for (size_t i = 0; i + 1 < p.params.size(); ++i) {
    f.params.push_back(p.params[i]);
    map.byName[p.params[i]->name] = p.params[i];
  }
  for (size_t i = 0; i + 1 < c.params.size(); ++i)
    if (!map.byName.count(c.params[i]->name) && c.params[i]->name != mid->name) f.params.push_back(c.params[i]);
  f.params.push_back(c.params.back());
  map.byName[mid->name] = mid;
  f.body = Allocate::make(mid, Seq::make({p.body, map.mutate(c.body)}));
  f.attrs = c.attrs;
  return f;
}

/// Inputs of every parameter but the outputs (random), outputs NaN.
std::vector<std::vector<float>> makeArgs(const PrimFunc& f, uint32_t seed) {
  std::vector<std::vector<float>> args;
  for (size_t i = 0; i < f.params.size(); ++i) {
    bool output = i + f.numOutputs >= f.params.size();
    if (output) args.emplace_back(f.params[i]->numel(), std::nanf(""));
    else args.push_back(lower::testing::toVector(lower::testing::randomTensor(f.params[i]->shape, seed + i)));
  }
  return args;
}

std::vector<void*> pointers(std::vector<std::vector<float>>& bufs) {
  std::vector<void*> p;
  for (auto& b : bufs) p.push_back(b.data());
  return p;
}

std::vector<std::vector<float>> interpret(const PrimFunc& f, uint32_t seed) {
  auto args = makeArgs(f, seed);
  lower::interpret(f, pointers(args));
  return args;
}

::testing::AssertionResult sameValues(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                                      double tol) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "argument count differs";
  for (size_t p = 0; p < a.size(); ++p) {
    if (a[p].size() != b[p].size()) return ::testing::AssertionFailure() << "size of argument " << p << " differs";
    for (size_t i = 0; i < a[p].size(); ++i) {
      double x = a[p][i], y = b[p][i];
      if (std::isnan(x) || std::isnan(y) || std::fabs(x - y) > tol * (1 + std::fabs(y)))
        return ::testing::AssertionFailure() << "argument " << p << " element " << i << ": " << x << " vs " << y;
    }
  }
  return ::testing::AssertionSuccess();
}

/// The message of the kiln::Error `f` throws ("" when it does not throw).
template <typename F>
std::string errorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kAdd = R"(graph(%x: f32[4,6], %y: f32[4,6]) {
  %z = add(%x, %y) : f32[4,6]
  return %z
})";
const char* kBroadcast = R"(graph(%x: f32[4,5,6], %y: f32[5,1]) {
  %z = add(%x, %y) : f32[4,5,6]
  return %z
})";
const char* kSum = R"(graph(%x: f32[4,6,7]) {
  %z = sum(%x) {axes=[1]} : f32[4,7]
  return %z
})";
const char* kChain = R"(graph(%x: f32[3,5], %y: f32[3,5]) {
  %t = exp(%x) : f32[3,5]
  %z = add(%t, %y) : f32[3,5]
  return %z
})";

/// Applies `steps` with a fresh Schedule and checks that the result computes what `f` did (in
/// the interpreter) and that its trace replays on `f` to the same text.
PrimFunc scheduled(const PrimFunc& f, const std::function<void(Schedule&)>& steps, double tol = 1e-6) {
  Schedule s(f);
  steps(s);
  PrimFunc out = s.func();
  EXPECT_TRUE(sameValues(interpret(out, 7), interpret(f, 7), tol)) << print(out);
  EXPECT_EQ(print(Trace::parse(out.attrs.at("trace")).apply(f)), print(out));
  return out;
}

// ---- golden text ----------------------------------------------------------------------------------

TEST(TirSchedule, SplitWithGuard) {
  PrimFunc f = scheduled(lowerFirst(kAdd), [](Schedule& s) { EXPECT_EQ(s.split("i", 5), std::make_pair(std::string("i_o"), std::string("i_i"))); });
  EXPECT_EQ(print(f), R"(func f(x: f32[4,6], y: f32[4,6], z: f32[4,6]) {
  for (i_o, 0, 5) {
    for (i_i, 0, 5) {
      if ((((i_o * 5) + i_i) < 24)) {
        z[((i_o * 5) + i_i)] = (x[((i_o * 5) + i_i)] + y[((i_o * 5) + i_i)])
      }
    }
  }
}
)");
  EXPECT_EQ(f.attrs.at("trace"), "split(i; 5, 0)\n");
}

TEST(TirSchedule, SplitWithTailLoop) {
  PrimFunc f = scheduled(lowerFirst(kAdd), [](Schedule& s) { s.split("i", 5, TailStrategy::Loop); });
  EXPECT_EQ(print(f), R"(func f(x: f32[4,6], y: f32[4,6], z: f32[4,6]) {
  for (i_o, 0, 4) {
    for (i_i, 0, 5) {
      z[((i_o * 5) + i_i)] = (x[((i_o * 5) + i_i)] + y[((i_o * 5) + i_i)])
    }
  }
  for (i_t, 0, 4) {
    z[(20 + i_t)] = (x[(20 + i_t)] + y[(20 + i_t)])
  }
}
)");
}

TEST(TirSchedule, SplitDividingNeedsNoGuard) {
  PrimFunc f = scheduled(lowerFirst(kAdd), [](Schedule& s) { s.split("i", 8, TailStrategy::Guard); });
  EXPECT_EQ(print(f).find("if"), std::string::npos) << print(f);
  EXPECT_EQ(loopNames(f), (std::vector<std::string>{"i_o", "i_i"}));
}

// A reduction whose first iteration is named by `k == 0` (the plain nests start from 0 this way)
// keeps a condition on variables equal to constants when k is split: k_o == 0 && k_i == 0, so the
// split nest is still a reduction initReduction recognizes, and reorder can move k_o outward.
TEST(TirSchedule, SplitRewritesAFirstIterationConditionAsAConjunction) {
  Buffer x = makeBuffer("x", Type::f32(), {2, 8}), z = makeBuffer("z", Type::f32(), {2});
  Expr i = Var::make("i"), k = Var::make("k");
  PrimFunc f;
  f.name = "f";
  f.params = {x, z};
  f.body = For::make(i, i64(0), i64(2), ForKind::Serial,
                     For::make(k, i64(0), i64(8), ForKind::Serial,
                               Store::make(z, i,
                                           Select::make(EQ::make(k, i64(0)), f32(0), Load::make(z, i)) +
                                               Load::make(x, i * i64(8) + k))));
  PrimFunc out = scheduled(f, [](Schedule& s) {
    s.split("k", 4);
    s.reorder({"k_o", "i"});
  });
  EXPECT_EQ(print(out), R"(func f(x: f32[2,8], z: f32[2]) {
  for (k_o, 0, 2) {
    for (i, 0, 2) {
      for (k_i, 0, 4) {
        z[i] = (select(((k_o == 0) && (k_i == 0)), 0.0f, z[i]) + x[((i * 8) + ((k_o * 4) + k_i))])
      }
    }
  }
}
)");
}

TEST(TirSchedule, ReorderFuseAndTile) {
  PrimFunc r = scheduled(lowerFirst(kBroadcast), [](Schedule& s) { s.reorder({"i2", "i0"}); });
  EXPECT_EQ(print(r), R"(func f(x: f32[4,5,6], y: f32[5,1], z: f32[4,5,6]) {
  for (i2, 0, 6) {
    for (i1, 0, 5) {
      for (i0, 0, 4) {
        z[(((i0 * 30) + (i1 * 6)) + i2)] = (x[(((i0 * 30) + (i1 * 6)) + i2)] + y[i1])
      }
    }
  }
}
)");
  PrimFunc fu = scheduled(lowerFirst(kBroadcast), [](Schedule& s) { EXPECT_EQ(s.fuse("i0", "i1"), "i0_i1_fused"); });
  EXPECT_EQ(print(fu), R"(func f(x: f32[4,5,6], y: f32[5,1], z: f32[4,5,6]) {
  for (i0_i1_fused, 0, 20) {
    for (i2, 0, 6) {
      z[((((i0_i1_fused / 5) * 30) + ((i0_i1_fused % 5) * 6)) + i2)] = (x[((((i0_i1_fused / 5) * 30) + ((i0_i1_fused % 5) * 6)) + i2)] + y[(i0_i1_fused % 5)])
    }
  }
}
)");
  PrimFunc t = scheduled(lowerFirst(kBroadcast), [](Schedule& s) {
    EXPECT_EQ(s.tile("i1", "i2", 2, 4), (std::vector<std::string>{"i1_o", "i2_o", "i1_i", "i2_i"}));
  });
  EXPECT_EQ(t.attrs.at("trace"), "tile(i1, i2; 2, 4)\n");
  EXPECT_EQ(loopNames(t), (std::vector<std::string>{"i0", "i1_o", "i2_o", "i1_i", "i2_i"}));
  EXPECT_EQ(print(t), R"(func f(x: f32[4,5,6], y: f32[5,1], z: f32[4,5,6]) {
  for (i0, 0, 4) {
    for (i1_o, 0, 3) {
      for (i2_o, 0, 2) {
        for (i1_i, 0, 2) {
          for (i2_i, 0, 4) {
            if ((((i2_o * 4) + i2_i) < 6)) {
              if ((((i1_o * 2) + i1_i) < 5)) {
                z[(((i0 * 30) + (((i1_o * 2) + i1_i) * 6)) + ((i2_o * 4) + i2_i))] = (x[(((i0 * 30) + (((i1_o * 2) + i1_i) * 6)) + ((i2_o * 4) + i2_i))] + y[((i1_o * 2) + i1_i)])
              }
            }
          }
        }
      }
    }
  }
}
)");
}

TEST(TirSchedule, UnrollVectorizeParallel) {
  PrimFunc f = scheduled(lowerFirst(kAdd), [](Schedule& s) {
    s.split("i", 8, TailStrategy::Loop);
    s.vectorize("i_i");
    s.parallel("i_o");
  });
  EXPECT_EQ(print(f), R"(func f(x: f32[4,6], y: f32[4,6], z: f32[4,6]) {
  parallel (i_o, 0, 3) {
    z[ramp((i_o * 8), 1, 8)] = (x[ramp((i_o * 8), 1, 8)] + y[ramp((i_o * 8), 1, 8)])
  }
}
)");
  EXPECT_EQ(f.attrs.at("trace"), "split(i; 8, 1)\nvectorize(i_i)\nparallel(i_o)\n");
  PrimFunc u = scheduled(lowerFirst(kSum), [](Schedule& s) { s.unroll("i2"); });
  EXPECT_NE(print(u).find("unrolled (i2, 0, 7)"), std::string::npos) << print(u);
}

TEST(TirSchedule, ParallelPrivatizesScratchBuffer) {
  // The accumulator of the unscheduled reduction is allocated once at the top; each parallel
  // iteration needs its own.
  PrimFunc f = scheduled(lowerFirst(kSum), [](Schedule& s) { s.parallel("i0"); });
  EXPECT_EQ(print(f), R"(func f(x: f32[4,6,7], z: f32[4,7]) {
  parallel (i0, 0, 4) {
    allocate acc: f32[1]
    for (i2, 0, 7) {
      acc[0] = 0.0f
      for (r1, 0, 6) {
        acc[0] = (acc[0] + x[(((i0 * 42) + i2) + (r1 * 7))])
      }
      z[((i0 * 7) + i2)] = acc[0]
    }
  }
}
)");
}

TEST(TirSchedule, ComputeAt) {
  PrimFunc f = scheduled(lowerChain(kChain), [](Schedule& s) {
    s.split("i_1", 4, TailStrategy::Guard);
    s.computeAt("t", "i_1_o");
  });
  EXPECT_EQ(print(f), R"(func f(x: f32[3,5], y: f32[3,5], z: f32[3,5]) {
  for (i_1_o, 0, 4) {
    allocate t_local: f32[4]
    for (t_k, 0, 4) {
      if (((((i_1_o * 4) + t_k) >= 0) && (((i_1_o * 4) + t_k) < 15))) {
        t_local[t_k] = exp(x[((i_1_o * 4) + t_k)])
      }
    }
    for (i_1_i, 0, 4) {
      if ((((i_1_o * 4) + i_1_i) < 15)) {
        z[((i_1_o * 4) + i_1_i)] = (t_local[i_1_i] + y[((i_1_o * 4) + i_1_i)])
      }
    }
  }
}
)");
  EXPECT_EQ(f.attrs.at("trace"), "split(i_1; 4, 0)\ncompute_at(t, i_1_o)\n");
}

// merge runs a consumer nest inside its producer's loop, iteration by iteration; it refuses loops
// that are not adjacent, bounds that differ, and a consumer that would read an element before a
// later producer iteration writes it.
TEST(TirSchedule, MergeRunsAConsumerInsideItsProducersLoop) {
  PrimFunc f = scheduled(lowerChain(kChain), [](Schedule& s) {
    s.split("i", 5, TailStrategy::Loop);
    s.split("i_1", 5, TailStrategy::Loop);
    EXPECT_EQ(s.merge("i_o", "i_1_o"), "i_o");
  });
  EXPECT_EQ(print(f), R"(func f(x: f32[3,5], y: f32[3,5], z: f32[3,5]) {
  allocate t: f32[3,5]
  for (i_o, 0, 3) {
    for (i_i, 0, 5) {
      t[((i_o * 5) + i_i)] = exp(x[((i_o * 5) + i_i)])
    }
    for (i_1_i, 0, 5) {
      z[((i_o * 5) + i_1_i)] = (t[((i_o * 5) + i_1_i)] + y[((i_o * 5) + i_1_i)])
    }
  }
}
)");
  EXPECT_EQ(f.attrs.at("trace"), "split(i; 5, 1)\nsplit(i_1; 5, 1)\nmerge(i_o, i_1_o)\n");

  Schedule s(lowerChain(kChain));
  EXPECT_NE(errorOf([&] { s.merge("i_1", "i"); }).find("does not directly follow"), std::string::npos);
  s.split("i", 5, TailStrategy::Loop);
  EXPECT_NE(errorOf([&] { s.merge("i_o", "i_1"); }).find("different bounds"), std::string::npos);

  // z[j] = t[2 − j]: iteration 0 of the consumer reads what iteration 2 of the producer writes.
  Buffer x = makeBuffer("x", Type::f32(), {3}), t = makeBuffer("t", Type::f32(), {3}), z = makeBuffer("z", Type::f32(), {3});
  Expr i = Var::make("i"), j = Var::make("j");
  PrimFunc reversed;
  reversed.name = "f";
  reversed.params = {x, z};
  reversed.body = Allocate::make(
      t, Seq::make({For::make(i, i64(0), i64(3), ForKind::Serial, Store::make(t, i, Load::make(x, i))),
                    For::make(j, i64(0), i64(3), ForKind::Serial, Store::make(z, j, Load::make(t, i64(2) - j)))}));
  Schedule r(reversed);
  EXPECT_NE(errorOf([&] { r.merge("i", "j"); }).find("depends on a later iteration of the first through 't'"),
            std::string::npos);
  // Reading the same iteration's element is fine.
  reversed.body = Allocate::make(
      t, Seq::make({For::make(i, i64(0), i64(3), ForKind::Serial, Store::make(t, i, Load::make(x, i))),
                    For::make(j, i64(0), i64(3), ForKind::Serial, Store::make(z, j, Load::make(t, j)))}));
  EXPECT_EQ(Schedule(reversed).merge("i", "j"), "i");
}

// fission distributes a loop over the statements of its body, merge's inverse: legal when each
// iteration of a later statement reads only what the same or an earlier iteration wrote.
TEST(TirSchedule, FissionDistributesALoopOverItsStatements) {
  Buffer x = makeBuffer("x", Type::f32(), {3}), t = makeBuffer("t", Type::f32(), {3}),
         z = makeBuffer("z", Type::f32(), {3});
  Expr i = Var::make("i");
  auto twoStatements = [&](const Expr& read) {
    PrimFunc f;
    f.name = "f";
    f.params = {x, z};
    f.body = Allocate::make(t, For::make(i, i64(0), i64(3), ForKind::Serial,
                                         Seq::make({Store::make(t, i, Load::make(x, i)),
                                                    Store::make(z, i, Load::make(t, read) + f32(1))})));
    return f;
  };
  Schedule s(twoStatements(i));
  EXPECT_EQ(s.fission("i"), (std::vector<std::string>{"i", "i_f"}));
  EXPECT_EQ(print(s.func()), R"(func f(x: f32[3], z: f32[3]) {
  allocate t: f32[3]
  for (i, 0, 3) {
    t[i] = x[i]
  }
  for (i_f, 0, 3) {
    z[i_f] = (t[i_f] + 1.0f)
  }
}
)");
  EXPECT_EQ(s.trace().str(), "fission(i)\n");
  EXPECT_EQ(print(Trace::parse("fission(i)\n").apply(twoStatements(i))), print(s.func()));
  // Reading an element an earlier iteration wrote is fine; one a later iteration writes is not.
  EXPECT_NO_THROW(Schedule(twoStatements(max(i - 1, i64(0)))).fission("i"));
  Schedule later(twoStatements(i64(2) - i));
  EXPECT_NE(errorOf([&] { later.fission("i"); }).find("fission: loop 'i', statements 0 and 1"),
            std::string::npos);
  Schedule one(twoStatements(i));
  one.fission("i");
  EXPECT_NE(errorOf([&] { one.fission("i_f"); }).find("is not a sequence of statements"), std::string::npos);
}

// store_at shrinks a local buffer to the window one iteration of a loop touches, allocated inside
// it; it refuses a buffer used outside the loop and one whose values pass between iterations.
TEST(TirSchedule, StoreAtAllocatesOneIterationsWindow) {
  PrimFunc f = scheduled(lowerChain(kChain), [](Schedule& s) {
    s.split("i", 5, TailStrategy::Loop);
    s.split("i_1", 5, TailStrategy::Loop);
    EXPECT_NE(errorOf([&] { s.storeAt("t", "i_o"); }).find("also accessed outside loop 'i_o'"), std::string::npos);
    s.merge("i_o", "i_1_o");
    s.storeAt("t", "i_o");
  });
  EXPECT_EQ(print(f), R"(func f(x: f32[3,5], y: f32[3,5], z: f32[3,5]) {
  for (i_o, 0, 3) {
    allocate t: f32[5]
    for (i_i, 0, 5) {
      t[i_i] = exp(x[((i_o * 5) + i_i)])
    }
    for (i_1_i, 0, 5) {
      z[((i_o * 5) + i_1_i)] = (t[i_1_i] + y[((i_o * 5) + i_1_i)])
    }
  }
}
)");
  EXPECT_EQ(f.attrs.at("trace"), "split(i; 5, 1)\nsplit(i_1; 5, 1)\nmerge(i_o, i_1_o)\nstore_at(t, i_o)\n");

  // for i: z[i] = t[i]; t[i] = x[i] — each iteration reads the value the loop found in t.
  Buffer x = makeBuffer("x", Type::f32(), {3}), t = makeBuffer("t", Type::f32(), {3}), z = makeBuffer("z", Type::f32(), {3});
  Expr i = Var::make("i");
  PrimFunc g;
  g.name = "g";
  g.params = {x, z};
  g.body = Allocate::make(t, For::make(i, i64(0), i64(3), ForKind::Serial,
                                       Seq::make({Store::make(z, i, Load::make(t, i)), Store::make(t, i, Load::make(x, i))})));
  EXPECT_NE(errorOf([&] { Schedule(g).storeAt("t", "i"); }).find("iterations of loop 'i' share elements of 't'"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { Schedule(g).storeAt("x", "i"); }).find("is a parameter"), std::string::npos);

  // A column block of a [4, 6] buffer per iteration: a [4, 3] window (the flat one would span 21).
  Buffer x2 = makeBuffer("x", Type::f32(), {4, 6}), z2 = makeBuffer("z", Type::f32(), {4, 6});
  Buffer t2 = makeBuffer("t", Type::f32(), {4, 6});
  Expr c = Var::make("c"), r = Var::make("r"), k = Var::make("k"), r2 = Var::make("r2"), k2 = Var::make("k2");
  auto at = [&](const Expr& row, const Expr& col) { return row * 6 + c * 3 + col; };
  auto serialFor = [](const Expr& v, int64_t n, Stmt body) { return For::make(v, i64(0), i64(n), ForKind::Serial, body); };
  PrimFunc h;
  h.name = "h";
  h.params = {x2, z2};
  h.body = Allocate::make(
      t2, For::make(c, i64(0), i64(2), ForKind::Serial,
                    Seq::make({serialFor(r, 4, serialFor(k, 3, Store::make(t2, at(r, k), Load::make(x2, at(r, k)) * f32(2)))),
                               serialFor(r2, 4, serialFor(k2, 3, Store::make(z2, at(r2, k2), Load::make(t2, at(r2, k2)))))})));
  PrimFunc windowed = scheduled(h, [](Schedule& s) { s.storeAt("t", "c"); });
  EXPECT_NE(print(windowed).find("allocate t: f32[4,3]"), std::string::npos) << print(windowed);
}

TEST(TirSchedule, HandlesByBlockPath) {
  PrimFunc f = lowerFirst(kBroadcast);
  EXPECT_EQ(getLoops(f, "z"), (std::vector<std::string>{"i0", "i1", "i2"}));
  Schedule s(f);
  s.unroll("z/2");
  EXPECT_EQ(s.trace().str(), "unroll(i2)\n");
  EXPECT_EQ(errorOf([&] { getLoops(f, "nope"); }), "no block 'nope' (no statement stores to a buffer of that name)");
  EXPECT_EQ(errorOf([&] { s.split("z/3", 2); }), "split: block 'z' has only 3 loops");
}

TEST(TirSchedule, DuplicateLoopNamesBecomeUnique) {
  // A lowering may repeat variable names (two distinct loops both named k, as hand-written
  // lowerings built them); a schedule names them as the printer shows them.
  Buffer x = makeBuffer("x", Type::f32(), {4}), y = makeBuffer("y", Type::f32(), {4});
  Expr k1 = Var::make("k"), k2 = Var::make("k");
  PrimFunc f;
  f.name = "twice";
  f.params = {x, y};
  f.numOutputs = 1;
  f.body = Seq::make({For::make(k1, i64(0), i64(4), ForKind::Serial, Store::make(y, k1, Load::make(x, k1))),
                      For::make(k2, i64(0), i64(4), ForKind::Serial,
                                Store::make(y, k2, Load::make(y, k2) + Load::make(x, k2)))});
  Schedule s(f);
  EXPECT_EQ(s.loopNames(), (std::vector<std::string>{"k", "k_1"}));
  EXPECT_EQ(print(s.func()), print(f));
  s.unroll("k_1");
  EXPECT_EQ(print(Trace::parse(s.trace().str()).apply(f)), print(s.func()));
}

// ---- traces -----------------------------------------------------------------------------------------

TEST(TirSchedule, TraceRoundTrip) {
  std::string text = "split(i; 8, 1)\ntile(i0, i1; 4, 8)\nreorder(a, b, c)\nfuse(i0, i1)\nunroll(j)\n"
                     "vectorize(i_i)\nparallel(i_o)\ncompute_at(t, i0)\n";
  Trace t = Trace::parse(text);
  EXPECT_EQ(t.steps().size(), 8u);
  EXPECT_EQ(t.str(), text);
  EXPECT_EQ(Trace::parse(t.str()), t);
  EXPECT_EQ(Trace::parse("\n  split( i ;8,0 )  \n\n").str(), "split(i; 8, 0)\n");
  EXPECT_EQ(t.steps()[1], (TraceStep{"tile", {"i0", "i1"}, {4, 8}}));
}

TEST(TirSchedule, TraceParseErrors) {
  EXPECT_EQ(errorOf([] { Trace::parse("split(i; 8, 0)\nspin(i)"); }),
            "trace line 2: unknown schedule primitive 'spin' ('spin(i)')");
  EXPECT_EQ(errorOf([] { Trace::parse("split(i; 8)"); }),
            "trace line 1: split takes 2 integer parameter(s), got 1 ('split(i; 8)')");
  EXPECT_EQ(errorOf([] { Trace::parse("fuse(i)"); }), "trace line 1: fuse takes 2 loop name(s), got 1 ('fuse(i)')");
  EXPECT_EQ(errorOf([] { Trace::parse("split(i; x, 0)"); }), "trace line 1: bad integer parameter 'x' ('split(i; x, 0)')");
  EXPECT_EQ(errorOf([] { Trace::parse("unroll i"); }), "trace line 1: expected 'primitive(loops; params)' ('unroll i')");
  EXPECT_EQ(errorOf([] { Trace::parse("unroll(a b)"); }), "trace line 1: bad loop name 'a b' ('unroll(a b)')");
}

TEST(TirSchedule, ReplayOnFreshLoweringAndAppend) {
  Schedule s(lowerFirst(kBroadcast));
  auto tiles = s.tile("i1", "i2", 2, 4);
  s.fuse("i0", tiles[0]);
  s.parallel("i0_i1_o_fused");
  PrimFunc replayed = Trace::parse(s.func().attrs.at("trace")).apply(lowerFirst(kBroadcast));
  EXPECT_EQ(print(replayed), print(s.func()));
  EXPECT_EQ(replayed.attrs.at("trace"), s.trace().str());
  // A trace applied to an already scheduled function extends its history.
  PrimFunc more = Trace::parse("unroll(i1_i)").apply(replayed);
  EXPECT_EQ(more.attrs.at("trace"), s.trace().str() + "unroll(i1_i)\n");
  EXPECT_EQ(print(Trace::parse(more.attrs.at("trace")).apply(lowerFirst(kBroadcast))), print(more));
}

// ---- rejected applications ------------------------------------------------------------------------

TEST(TirSchedule, RejectsInvalidApplications) {
  PrimFunc add = lowerFirst(kAdd), sum = lowerFirst(kSum), bc = lowerFirst(kBroadcast);
  // Runs `steps`; the last one is expected to fail and must leave the function as it was.
  auto on = [](const PrimFunc& f, const std::function<void(Schedule&)>& steps) {
    Schedule s(f);
    return errorOf([&] { steps(s); });
  };
  auto unchanged = [](const PrimFunc& f, const std::function<void(Schedule&)>& bad) {
    Schedule s(f);
    std::string before = print(s.func());
    EXPECT_NE(errorOf([&] { bad(s); }), "");
    EXPECT_EQ(print(s.func()), before) << "a rejected primitive changed the function";
    EXPECT_EQ(s.trace().str(), "");
  };
  EXPECT_EQ(on(add, [](Schedule& s) { s.split("j", 2); }), "split: no loop named 'j'");
  EXPECT_EQ(on(add, [](Schedule& s) { s.split("i", 0); }), "split: factor 0 for loop 'i' must be at least 1");
  EXPECT_EQ(on(sum, [](Schedule& s) { s.reorder({"i2", "r1"}); }), "reorder: loops 'i2' and 'r1' are not perfectly nested");
  EXPECT_EQ(on(bc, [](Schedule& s) { s.reorder({"i0", "i0"}); }), "reorder: loop 'i0' is listed twice");
  EXPECT_EQ(on(bc, [](Schedule& s) { s.fuse("i0", "i2"); }), "fuse: loop 'i2' is not the direct, perfectly nested child of 'i0'");
  EXPECT_EQ(on(bc, [](Schedule& s) {
              s.parallel("i1");
              s.fuse("i1", "i2");
            }),
            "fuse: loop 'i1' is already parallel");
  EXPECT_EQ(on(bc, [](Schedule& s) { s.tile("i2", "i0", 2, 2); }), "tile: loop 'i0' is not perfectly nested inside 'i2'");
  EXPECT_EQ(on(bc, [](Schedule& s) { s.vectorize("i1"); }), "vectorize: loop 'i1' is not innermost");
  EXPECT_EQ(on(add, [](Schedule& s) { s.vectorize("i"); }), "");
  EXPECT_EQ(on(lowerFirst(R"(graph(%x: f32[100]) {
    %z = relu(%x) : f32[100]
    return %z
  })"), [](Schedule& s) { s.vectorize("i"); }),
            "vectorize: loop 'i' has extent 100; vectorize takes 2 to 64 (split it first)");
  EXPECT_EQ(on(sum, [](Schedule& s) { s.vectorize("r1"); }).substr(0, 61),
            "vectorize: loop 'r1' is not straight-line code with stores co");
  EXPECT_EQ(on(add, [](Schedule& s) {
              s.split("i", 5);
              s.vectorize("i_i");
            }).substr(0, 30),
            "vectorize: loop 'i_i' is not s");
  EXPECT_EQ(on(sum, [](Schedule& s) { s.parallel("r1"); }),
            "parallel: iterations of loop 'r1' depend on each other through 'acc'");
  EXPECT_EQ(on(bc, [](Schedule& s) {
              s.parallel("i0");
              s.parallel("i2");
            }),
            "parallel: loop 'i2' is inside parallel loop 'i0'");
  EXPECT_EQ(on(bc, [](Schedule& s) {
              s.unroll("i2");
              s.unroll("i2");
            }),
            "unroll: loop 'i2' is already unrolled");
  PrimFunc chain = lowerChain(kChain);
  EXPECT_EQ(on(chain, [](Schedule& s) { s.computeAt("t", "i"); }), "compute_at: loop 'i' belongs to the producer of 't'");
  EXPECT_EQ(on(chain, [](Schedule& s) { s.computeAt("z", "i"); }),
            "compute_at: 'z' is a parameter of the function, not a local buffer");
  EXPECT_EQ(on(chain, [](Schedule& s) {
              s.split("i", 4);
              s.computeAt("t", "i_1");
            }),
            "compute_at: the producer of 't' must be a loop nest whose body is one store to it");
  EXPECT_EQ(on(chain, [](Schedule& s) {
              s.fuse("i", "i");
            }),
            "fuse: loop 'i' is not the direct, perfectly nested child of 'i'");
  EXPECT_EQ(on(add, [](Schedule& s) { s.computeAt("t", "i"); }), "compute_at: no block 't' (no statement stores to a buffer of that name)");
  unchanged(sum, [](Schedule& s) { s.parallel("r1"); });
  unchanged(bc, [](Schedule& s) { s.tile("i2", "i0", 2, 2); });
  unchanged(chain, [](Schedule& s) { s.computeAt("t", "i"); });
  unchanged(add, [](Schedule& s) { s.split("i", 0); });
}

TEST(TirSchedule, RejectsReorderAcrossADependence) {
  // y[i, j] = y[i - 1, j + 1] + x[i, j]: the dependence distance (1, -1) turns negative when
  // j runs outside i, so the loops cannot be interchanged.
  Buffer x = makeBuffer("x", Type::f32(), {5, 5}), y = makeBuffer("y", Type::f32(), {6, 6});
  Expr i = Var::make("i"), j = Var::make("j");
  PrimFunc f;
  f.name = "wave";
  f.params = {x, y};
  f.body = For::make(i, i64(1), i64(5), ForKind::Serial,
                     For::make(j, i64(0), i64(5), ForKind::Serial,
                               Store::make(y, i * 6 + j, Load::make(y, (i - 1) * 6 + j + 1) + Load::make(x, (i - 1) * 5 + j))));
  Schedule s(f);
  EXPECT_EQ(errorOf([&] { s.reorder({"j", "i"}); }), "reorder: iterations of loop 'i'..'j' depend on each other through 'y'");
  EXPECT_EQ(errorOf([&] { s.parallel("i"); }), "parallel: iterations of loop 'i' depend on each other through 'y'");
  // tile splits both loops and then fails to interchange them: nothing of it remains.
  EXPECT_EQ(errorOf([&] { s.tile("i", "j", 2, 2); }),
            "reorder: iterations of loop 'i_o'..'j_i' depend on each other through 'y'");
  EXPECT_EQ(print(s.func()), print(f));
  EXPECT_EQ(s.trace().str(), "");
  EXPECT_EQ(errorOf([&] { s.parallel("j"); }), "");  // within a row the elements are independent
}

/// y[i, j] += a[i, k] · b[k, j] over loops i, j, k (y zeroed first), M × K times K × N.
PrimFunc gemmNest(int64_t m, int64_t n, int64_t k) {
  Buffer a = makeBuffer("a", Type::f32(), {m, k}), b = makeBuffer("b", Type::f32(), {k, n}), y = makeBuffer("y", Type::f32(), {m, n});
  Expr i = Var::make("i"), j = Var::make("j"), r = Var::make("k"), z = Var::make("z");
  Expr at = i * n + j;
  PrimFunc f;
  f.name = "gemm";
  f.params = {a, b, y};
  f.body = Seq::make(
      {For::make(z, i64(0), i64(m * n), ForKind::Serial, Store::make(y, z, FloatImm::make(Type::f32(), 0))),
       For::make(i, i64(0), i64(m), ForKind::Serial,
                 For::make(j, i64(0), i64(n), ForKind::Serial,
                           For::make(r, i64(0), i64(k), ForKind::Serial,
                                     Store::make(y, at, Load::make(y, at) + Load::make(a, i * k + r) * Load::make(b, r * n + j)))))});
  return f;
}

TEST(TirSchedule, CacheWriteStagesARegisterTile) {
  PrimFunc f = scheduled(
      gemmNest(6, 8, 5),
      [](Schedule& s) {
        s.split("i", 3, TailStrategy::Loop);
        s.split("j", 4, TailStrategy::Loop);
        s.reorder({"i_o", "j_o", "k", "i_i", "j_i"});
        s.unroll("i_i");
        s.cacheWrite("k");
        s.vectorize("j_i");
        s.vectorize("j_i_r");
        s.vectorize("j_i_w");
      },
      1e-5);
  EXPECT_EQ(print(f), R"(func gemm(a: f32[6,5], b: f32[5,8], y: f32[6,8]) {
  for (z, 0, 48) {
    y[z] = 0.0f
  }
  for (i_o, 0, 2) {
    for (j_o, 0, 2) {
      allocate y_local: f32[12]
      unrolled (i_i_r, 0, 3) {
        y_local[ramp((i_i_r * 4), 1, 4)] = y[ramp(((((i_o * 3) + i_i_r) * 8) + (j_o * 4)), 1, 4)]
      }
      for (k, 0, 5) {
        unrolled (i_i, 0, 3) {
          y_local[ramp((i_i * 4), 1, 4)] = (y_local[ramp((i_i * 4), 1, 4)] + (x4(a[((((i_o * 3) + i_i) * 5) + k)]) * b[ramp(((k * 8) + (j_o * 4)), 1, 4)]))
        }
      }
      unrolled (i_i_w, 0, 3) {
        y[ramp(((((i_o * 3) + i_i_w) * 8) + (j_o * 4)), 1, 4)] = y_local[ramp((i_i_w * 4), 1, 4)]
      }
    }
  }
}
)");
  EXPECT_EQ(f.attrs.at("trace"),
            "split(i; 3, 1)\nsplit(j; 4, 1)\nreorder(i_o, j_o, k, i_i, j_i)\nunroll(i_i)\ncache_write(k)\n"
            "vectorize(j_i)\nvectorize(j_i_r)\nvectorize(j_i_w)\n");
}

// A reduction that starts at the first iteration of r and j, where j picks the element: only
// y[0] starts from 7, the others from what y held. Staged at r, the start cannot be the copy-in's
// value for every element, so the copy-in reads y and the select stays.
TEST(TirSchedule, CacheWriteKeepsAStartThatDependsOnTheElement) {
  Buffer y = makeBuffer("y", Type::f32(), {4}), x = makeBuffer("x", Type::f32(), {4});
  Expr r = Var::make("r"), j = Var::make("j");
  PrimFunc f;
  f.name = "start";
  f.params = {x, y};
  Expr first = EQ::make(r, i64(0)) && EQ::make(j, i64(0));
  f.body = For::make(r, i64(0), i64(2), ForKind::Serial,
                     For::make(j, i64(0), i64(4), ForKind::Serial,
                               Store::make(y, j, Select::make(first, FloatImm::make(Type::f32(), 7), Load::make(y, j)) +
                                                     Load::make(x, j))));
  Schedule s(f);
  s.cacheWrite("r");
  EXPECT_NE(print(s.func()).find("select"), std::string::npos) << print(s.func());
  std::vector<float> xs{1, 2, 3, 4}, ys{10, 20, 30, 40};
  lower::interpret(s.func(), {xs.data(), ys.data()});
  EXPECT_EQ(ys, (std::vector<float>{9, 24, 36, 48}));  // 7 + 1 + 1; the others their own + 2x
}

TEST(TirSchedule, CacheWriteRejectsWhatItCannotStage) {
  Schedule s(gemmNest(4, 4, 3));
  // The loop's updates move with it: each iteration of i updates its own row.
  EXPECT_EQ(errorOf([&] { s.cacheWrite("i"); }),
            "cache_write: the index of 'y' moves with loop 'i': its iterations update different elements");
  // j's nest is k around the update, whose element moves with j.
  EXPECT_NE(errorOf([&] { s.cacheWrite("j"); }), "");
  // Two loops that reach one element: y[i + j] over i, j.
  Buffer y = makeBuffer("y", Type::f32(), {8}), x = makeBuffer("x", Type::f32(), {4});
  Expr i = Var::make("i"), j = Var::make("j"), r = Var::make("r");
  PrimFunc f;
  f.name = "overlap";
  f.params = {x, y};
  f.body = For::make(r, i64(0), i64(2), ForKind::Serial,
                     For::make(i, i64(0), i64(4), ForKind::Serial,
                               For::make(j, i64(0), i64(4), ForKind::Serial,
                                         Store::make(y, i + j, Load::make(y, i + j) + Load::make(x, j)))));
  Schedule overlap(f);
  EXPECT_EQ(errorOf([&] { overlap.cacheWrite("r"); }),
            "cache_write: iterations of the loops inside 'r' may update one element of 'y' twice");
  // A store that reads a neighbour of the element it writes.
  f.body = For::make(r, i64(0), i64(2), ForKind::Serial,
                     For::make(i, i64(0), i64(4), ForKind::Serial, Store::make(y, i, Load::make(y, i + 1) + Load::make(x, i))));
  Schedule neighbour(f);
  EXPECT_EQ(errorOf([&] { neighbour.cacheWrite("r"); }), "cache_write: the store to 'y' reads another element of it");
  // Not a loop nest around one store.
  Schedule chain(lowerChain(kChain));
  EXPECT_NE(errorOf([&] { chain.cacheWrite("i_1"); }).find("cache_write: "), std::string::npos);
  EXPECT_EQ(print(s.func()), print(gemmNest(4, 4, 3)));
  EXPECT_EQ(s.trace().str(), "");
}

/// for (o, 0, rows) { y[o] = start; for (k, 0, n) y[o] = y[o] op x[o·n + k] }
PrimFunc rowReduction(int64_t rows, int64_t n, bool isMax) {
  Buffer x = makeBuffer("x", Type::f32(), {rows, n}), y = makeBuffer("y", Type::f32(), {rows});
  Expr o = Var::make("o"), k = Var::make("k");
  Expr old = Load::make(y, o), v = Load::make(x, o * i64(n) + k);
  PrimFunc f;
  f.name = "rows";
  f.params = {x, y};
  f.numOutputs = 1;
  f.body = For::make(
      o, i64(0), i64(rows), ForKind::Serial,
      Seq::make(
          {Store::make(y, o, isMax ? lowestValue(Type::f32()) : FloatImm::make(Type::f32(), 0)),
           For::make(k, i64(0), i64(n), ForKind::Serial, Store::make(y, o, isMax ? max(old, v) : old + v))}));
  return f;
}

TEST(TirSchedule, RfactorKeepsPartialResultsApartSoTheyVectorize) {
  PrimFunc f = scheduled(
      rowReduction(3, 37, false),
      [](Schedule& s) {
        s.split("k", 8, TailStrategy::Loop);
        s.rfactor("k_i");
        s.vectorize("k_i");
        s.vectorize("k_i_init");
      },
      1e-5);
  EXPECT_EQ(print(f), R"(func rows(x: f32[3,37], y: f32[3]) {
  for (o, 0, 3) {
    y[o] = 0.0f
    allocate y_rf: f32[8]
    y_rf[ramp(0, 1, 8)] = x8(-0.0f)
    for (k_o, 0, 4) {
      y_rf[ramp(0, 1, 8)] = (y_rf[ramp(0, 1, 8)] + x[ramp(((o * 37) + (k_o * 8)), 1, 8)])
    }
    for (k_i_fold, 0, 8) {
      y[o] = (y[o] + y_rf[k_i_fold])
    }
    for (k_t, 0, 5) {
      y[o] = (y[o] + x[((o * 37) + (32 + k_t))])
    }
  }
}
)");
  // A max folds from -inf, and the chain reaches up through perfectly nested reduction loops: all
  // of k_o and k_i reduce into y[o], the factored loop being k_i.
  scheduled(rowReduction(2, 32, true), [](Schedule& s) {
    s.split("k", 4, TailStrategy::Loop);
    s.rfactor("k_i");
    s.unroll("k_i_fold");
    s.parallel("o");
  });
  // Factoring the whole loop: every update its own partial result.
  PrimFunc whole = scheduled(rowReduction(2, 5, false), [](Schedule& s) { s.rfactor("k"); });
  EXPECT_NE(print(whole).find("y_rf: f32[5]"), std::string::npos) << print(whole);
}

// A register tile inside the reduction loop (dense's dot-product tile): the rows and columns that
// move the element are dimensions of the partial results, each element keeping its own vector.
TEST(TirSchedule, RfactorSpansTheLoopsOfARegisterTile) {
  PrimFunc f = scheduled(
      gemmNest(2, 3, 32),
      [](Schedule& s) {
        s.split("k", 8, TailStrategy::Loop);
        s.reorder({"k_o", "i", "j", "k_i"});
        s.rfactor("k_i");
        s.vectorize("k_i");
        s.vectorize("k_i_init");
        s.unroll("i");
        s.unroll("j");
      },
      1e-5);
  EXPECT_EQ(print(f), R"(func gemm(a: f32[2,32], b: f32[32,3], y: f32[2,3]) {
  for (z, 0, 6) {
    y[z] = 0.0f
  }
  allocate y_rf: f32[48]
  for (i_init, 0, 2) {
    for (j_init, 0, 3) {
      y_rf[ramp((((i_init * 3) + j_init) * 8), 1, 8)] = x8(-0.0f)
    }
  }
  for (k_o, 0, 4) {
    unrolled (i, 0, 2) {
      unrolled (j, 0, 3) {
        y_rf[ramp((((i * 3) + j) * 8), 1, 8)] = (y_rf[ramp((((i * 3) + j) * 8), 1, 8)] + (a[ramp(((i * 32) + (k_o * 8)), 1, 8)] * b[ramp(((k_o * 24) + j), 3, 8)]))
      }
    }
  }
  for (i_fold, 0, 2) {
    for (j_fold, 0, 3) {
      for (k_i_fold, 0, 8) {
        y[((i_fold * 3) + j_fold)] = (y[((i_fold * 3) + j_fold)] + y_rf[((((i_fold * 3) + j_fold) * 8) + k_i_fold)])
      }
    }
  }
}
)");
  // Reduction loops on both sides of one that moves the element all join the chain: for a, b,
  // c, d: y[c] += x[((a·2 + b)·4 + c)·8 + d], rfactor(d) keeps 4 × 8 partial results over all of
  // a and b.
  Buffer x = makeBuffer("x", Type::f32(), {192}), y = makeBuffer("y", Type::f32(), {4});
  Expr a = Var::make("a"), b = Var::make("b"), c = Var::make("c"), d = Var::make("d");
  PrimFunc nest;
  nest.name = "nest";
  nest.params = {x, y};
  nest.numOutputs = 1;
  auto loop = [](const Expr& v, int64_t n, Stmt body) {
    return For::make(v, i64(0), i64(n), ForKind::Serial, body);
  };
  Expr z = Var::make("z");
  nest.body = Seq::make(
      {loop(z, 4, Store::make(y, z, FloatImm::make(Type::f32(), 0))),
       loop(a, 3,
            loop(b, 2,
                 loop(c, 4,
                      loop(d, 8,
                           Store::make(y, c,
                                       Load::make(y, c) + Load::make(x, ((a * 2 + b) * 4 + c) * 8 + d))))))});
  PrimFunc outer = scheduled(nest, [](Schedule& s) { s.rfactor("d"); }, 1e-5);
  const std::string text = print(outer);
  EXPECT_NE(text.find("allocate y_rf: f32[32]"), std::string::npos) << text;
  EXPECT_LT(text.find("for (d_init"), text.find("for (a,")) << text;
  EXPECT_GT(text.find("for (c_fold"), text.find("for (a,")) << text;
  // Too many partial results over the tile: 4 · 3 · 300.
  Schedule wide(gemmNest(4, 3, 300));
  wide.reorder({"k", "i", "j"});
  auto [ko, ki] = wide.split("k", 300, TailStrategy::Loop);
  (void)ko;
  EXPECT_EQ(
      errorOf([&] { wide.rfactor(ki); }),
      "rfactor: loop 'k_i' and the loops moving the element make 3600 partial results, more than 1024 (split "
      "it first)");
}

TEST(TirSchedule, RfactorRejectsWhatIsNotAReductionIntoOneElement) {
  Schedule s(rowReduction(3, 8, false));
  EXPECT_EQ(errorOf([&] { s.rfactor("o"); }),
            "rfactor: the body of loop 'o' is not a perfect loop nest around one store");
  // A loop that moves the element: y[k] = y[k] + x[k].
  Buffer x = makeBuffer("x", Type::f32(), {8}), y = makeBuffer("y", Type::f32(), {8});
  Expr k = Var::make("k"), r = Var::make("r");
  PrimFunc f;
  f.name = "moving";
  f.params = {x, y};
  f.body = For::make(
      r, i64(0), i64(2), ForKind::Serial,
      For::make(k, i64(0), i64(8), ForKind::Serial, Store::make(y, k, Load::make(y, k) + Load::make(x, k))));
  Schedule moving(f);
  EXPECT_EQ(errorOf([&] { moving.rfactor("k"); }), "rfactor: loop 'k' moves the element of 'y' it updates");
  // Not an update of the element: y[0] = x[k], and y[0] = y[0] - x[k].
  f.body = For::make(k, i64(0), i64(8), ForKind::Serial, Store::make(y, i64(0), Load::make(x, k)));
  Schedule copy(f);
  EXPECT_NE(errorOf([&] { copy.rfactor("k"); }).find("rfactor: the store to 'y' is not a reduction"),
            std::string::npos);
  f.body = For::make(k, i64(0), i64(8), ForKind::Serial,
                     Store::make(y, i64(0), Load::make(y, i64(0)) - Load::make(x, k)));
  Schedule minus(f);
  EXPECT_NE(errorOf([&] { minus.rfactor("k"); }).find("is not a reduction"), std::string::npos);
  // Already vectorized.
  Schedule vectors(rowReduction(3, 8, false));
  auto [o, i] = vectors.split("k", 4, TailStrategy::Loop);
  vectors.rfactor(i);
  vectors.vectorize(i);
  EXPECT_EQ(errorOf([&] { vectors.rfactor(o); }), "rfactor: the store to 'y_rf' is vectorized already");
  // Too many partial results for a local buffer.
  Schedule wide(rowReduction(2, 5000, false));
  EXPECT_EQ(errorOf([&] { wide.rfactor("k"); }),
            "rfactor: loop 'k' has 5000 iterations, more partial results than 1024 (split it first)");
  EXPECT_EQ(print(s.func()), print(rowReduction(3, 8, false)));
}

// Nests far beyond the replay budget: a reduction reorders without replaying (its updates
// commute), and a column-block loop of a row-major output, or its fusion with the row blocks,
// parallelizes by the mixed-radix proof.
TEST(TirSchedule, LargeReductionNestsReorderAndParallelizeWithoutReplay) {
  Schedule s(gemmNest(256, 512, 128));  // 16.8 M updates, twice the replay budget
  s.split("j", 64, TailStrategy::Loop);
  EXPECT_EQ(errorOf([&] { s.reorder({"j_o", "i", "k", "j_i"}); }), "");
  EXPECT_EQ(errorOf([&] { s.parallel("j_o"); }), "");  // y[i·512 + j_o·64 + j_i]: blocks of 64 columns
  EXPECT_EQ(s.trace().str(), "split(j; 64, 1)\nreorder(j_o, i, k, j_i)\nparallel(j_o)\n");
  // Not a reduction (y[i, j] = y[i, j] · 2 + a[i, k] reads one element but the op mixes * and +):
  // the replay runs (one execution of the nest inside i) and finds the iterations of k sharing it.
  Buffer a = makeBuffer("a", Type::f32(), {256, 128}), y = makeBuffer("y", Type::f32(), {256, 512});
  Expr i = Var::make("i"), j = Var::make("j"), k = Var::make("k");
  PrimFunc f;
  f.name = "mixed";
  f.params = {a, y};
  f.body = For::make(i, i64(0), i64(256), ForKind::Serial,
                     For::make(j, i64(0), i64(512), ForKind::Serial,
                               For::make(k, i64(0), i64(128), ForKind::Serial,
                                         Store::make(y, i * 512 + j, Load::make(y, i * 512 + j) * FloatImm::make(Type::f32(), 2) + Load::make(a, i * 128 + k)))));
  Schedule mixed(f);
  EXPECT_EQ(errorOf([&] { mixed.reorder({"k", "j"}); }), "reorder: iterations of loop 'j'..'k' depend on each other through 'y'");
  // A fused loop over column blocks × row blocks (its indices divide, f / 8 and f % 8) is proven
  // disjoint without a replay, as long as its pairs map to distinct elements.
  Schedule fused(gemmNest(256, 512, 128));
  fused.split("i", 32, TailStrategy::Loop);
  fused.split("j", 64, TailStrategy::Loop);
  fused.reorder({"j_o", "i_o", "k", "i_i", "j_i"});
  std::string ji = fused.fuse("j_o", "i_o");
  EXPECT_EQ(errorOf([&] { fused.parallel(ji); }), "");
  // Rows fused with a reduction loop: the k of one fused iteration meets the k of another on y.
  Schedule badFuse(gemmNest(4, 6, 3));
  badFuse.reorder({"i", "k", "j"});
  std::string ik = badFuse.fuse("i", "k");
  EXPECT_EQ(errorOf([&] { badFuse.parallel(ik); }), "parallel: iterations of loop '" + ik + "' depend on each other through 'y'");
  // Column blocks that overlap (65 columns from every 64th) are not proven disjoint.
  Buffer w = makeBuffer("w", Type::f32(), {64 * 9});
  Expr p = Var::make("p"), c = Var::make("c");
  PrimFunc o;
  o.name = "overlap";
  o.params = {w};
  o.body = For::make(p, i64(0), i64(8), ForKind::Serial,
                     For::make(c, i64(0), i64(65), ForKind::Serial, Store::make(w, p * 64 + c, FloatImm::make(Type::f32(), 1))));
  Schedule overlapping(o);
  EXPECT_EQ(errorOf([&] { overlapping.parallel("p"); }), "parallel: iterations of loop 'p' depend on each other through 'w'");
}

// Swapping two loops of a nest far beyond the replay budget whose stores are not reductions: when
// every loop of the chain has provably disjoint iterations (each output element written by one
// iteration of the pair), no replay is needed; a chain with a loop whose iterations meet on an
// element is still replayed and refused.
TEST(TirSchedule, LargeDisjointChainsReorderWithoutReplay) {
  auto nest = [](int64_t rows, int64_t cols, int64_t inner, bool shift) {
    Buffer x = makeBuffer("x", Type::f32(), {rows * cols * inner}), y = makeBuffer("y", Type::f32(), {rows * cols * inner + 1});
    Expr i = Var::make("i"), j = Var::make("j"), k = Var::make("k");
    Expr at = (i * cols + j) * inner + k;
    PrimFunc f;
    f.name = "copy";
    f.params = {x, y};
    // y[at] = 2·x[at], or (shift) y[at + 1] = y[at] + x[at]: each iteration reads its predecessor's element.
    Stmt store = shift ? Store::make(y, at + 1, Load::make(y, at) + Load::make(x, at))
                       : Store::make(y, at, Load::make(x, at) * FloatImm::make(Type::f32(), 2));
    f.body = For::make(i, i64(0), i64(rows), ForKind::Serial,
                       For::make(j, i64(0), i64(cols), ForKind::Serial, For::make(k, i64(0), i64(inner), ForKind::Serial, store)));
    return f;
  };
  Schedule big(nest(512, 256, 128, false));  // 16.8 M stores, twice the replay budget
  EXPECT_EQ(errorOf([&] { big.reorder({"j", "i"}); }), "");
  EXPECT_EQ(big.trace().str(), "reorder(j, i)\n");
  Schedule shifted(nest(4, 3, 2, true));
  EXPECT_EQ(errorOf([&] { shifted.reorder({"j", "i"}); }),
            "reorder: iterations of loop 'i'..'j' depend on each other through 'y'");
}

// Merging two nests far beyond the replay budget, their elements 4-lane vectors: when the loops
// run as one touch each element of the buffer they share in one iteration only, nothing is
// replayed (the replay would need 12 M steps); a consumer that reads another iteration's vector
// (the reversed order) is still replayed and refused.
TEST(TirSchedule, LargeVectorMergesWithoutReplay) {
  auto chain = [](int64_t rows, bool reversed) {
    const int64_t vecs = 32, lanes = 4;
    const int64_t size = rows * vecs * lanes;
    Buffer x = makeBuffer("x", Type::f32(), {size}), t = makeBuffer("t", Type::f32(), {size});
    Buffer z = makeBuffer("z", Type::f32(), {size});
    Expr i = Var::make("i"), j = Var::make("j"), k = Var::make("k"), l = Var::make("l");
    auto at = [&](const Expr& row, const Expr& vec) {
      return Ramp::make((row * vecs + vec) * lanes, i64(1), lanes);
    };
    Expr readRow = reversed ? i64(rows - 1) - j : j;
    Stmt produce =
        For::make(k, i64(0), i64(vecs), ForKind::Serial, Store::make(t, at(i, k), Load::make(x, at(i, k))));
    Stmt copy = Store::make(z, at(j, l), Load::make(t, at(readRow, l)));
    Stmt consume = For::make(l, i64(0), i64(vecs), ForKind::Serial, copy);
    PrimFunc f;
    f.name = "f";
    f.params = {x, z};
    f.body = Allocate::make(t, Seq::make({For::make(i, i64(0), i64(rows), ForKind::Serial, produce),
                                          For::make(j, i64(0), i64(rows), ForKind::Serial, consume)}));
    return f;
  };
  Schedule forward(chain(65536, false));
  EXPECT_EQ(errorOf([&] { forward.merge("i", "j"); }), "");
  EXPECT_EQ(forward.trace().str(), "merge(i, j)\n");
  Schedule backward(chain(8, true));
  EXPECT_NE(errorOf([&] { backward.merge("i", "j"); }).find("depends on a later iteration of the first"),
            std::string::npos);
}

// ---- property tests ---------------------------------------------------------------------------------

struct Case {
  std::string text;
  bool chain = false;
};

Case randomCase(std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto dim = [&] { return std::vector<int64_t>{1, 2, 3, 5, 7, 8, 11, 13, 16, 17}[pick(0, 9)]; };
  auto shape = [](const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
    return out + "]";
  };
  int64_t a = dim(), b = dim(), c = dim();
  switch (pick(0, 4)) {
    case 0:
      return {"graph(%x: f32" + shape({a, b}) + ", %y: f32" + shape({a, b}) + ") {\n %z = mul(%x, %y) : f32" +
              shape({a, b}) + "\n return %z\n}"};
    case 1:
      return {"graph(%x: f32" + shape({a, b, c}) + ", %y: f32" + shape({b, 1}) + ") {\n %z = add(%x, %y) : f32" +
              shape({a, b, c}) + "\n return %z\n}"};
    case 2: {
      int64_t axis = pick(0, 2);
      std::vector<int64_t> in = {a, b, c}, out;
      for (int64_t d = 0; d < 3; ++d)
        if (d != axis) out.push_back(in[d]);
      return {"graph(%x: f32" + shape(in) + ") {\n %z = sum(%x) {axes=[" + std::to_string(axis) + "]} : f32" +
              shape(out) + "\n return %z\n}"};
    }
    case 3:
      return {"graph(%x: f32" + shape({a, c}) + ", %w: f32" + shape({b, c}) + ") {\n %z = dense(%x, %w) : f32" +
              shape({a, b}) + "\n return %z\n}"};
    default:
      return {"graph(%x: f32" + shape({a, b}) + ", %y: f32" + shape({a, b}) + ") {\n %t = exp(%x) : f32" +
                  shape({a, b}) + "\n %z = add(%t, %y) : f32" + shape({a, b}) + "\n return %z\n}",
              true};
  }
}

/// One random primitive on a random loop of the current function; false when it was rejected.
bool randomStep(Schedule& s, std::mt19937& rng, const PrimFunc& func) {
  std::vector<std::string> loops = s.loopNames();
  std::vector<std::string> blocks;
  for (const Buffer& p : func.params) blocks.push_back(p->name);
  if (loops.empty()) return false;
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  size_t at = static_cast<size_t>(pick(0, static_cast<int64_t>(loops.size()) - 1));
  auto loop = [&] { return loops[pick(0, static_cast<int64_t>(loops.size()) - 1)]; };
  // Neighbours in pre-order are often parent and child: good candidates for fuse, tile, reorder.
  auto next = [&](size_t k) { return loops[std::min(loops.size() - 1, at + k)]; };
  try {
    switch (pick(0, 11)) {
      case 0: s.split(loop(), pick(1, 9), pick(0, 1) ? TailStrategy::Loop : TailStrategy::Guard); break;
      case 1: {
        std::vector<std::string> some = {next(1), loops[at]};
        if (pick(0, 1)) some.push_back(pick(0, 1) ? next(2) : loop());
        s.reorder(some);
        break;
      }
      case 2: s.fuse(loops[at], pick(0, 3) ? next(1) : loop()); break;
      case 3: s.tile(loops[at], pick(0, 3) ? next(1) : loop(), pick(1, 6), pick(1, 6)); break;
      case 4: s.unroll(loop()); break;
      case 5: s.vectorize(loop()); break;
      case 6: s.parallel(loop()); break;
      case 7: s.computeAt("t", loop()); break;
      case 8: s.cacheWrite(loop()); break;
      case 9: s.fission(loop()); break;
      case 10: s.rfactor(loop()); break;
      default: {
        // A split that tends to be vectorizable.
        auto [o, i] = s.split(loop(), std::vector<int64_t>{2, 4, 8}[pick(0, 2)], TailStrategy::Loop);
        (void)o;
        s.vectorize(i);
      }
    }
    return true;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(": "), std::string::npos) << e.what();
    return false;
  }
}

TEST(TirSchedule, RandomSchedulesPreserveResults) {
  std::mt19937 rng(20240611);
  std::vector<PrimFunc> jitFuncs;
  std::vector<PrimFunc> references;
  int applied = 0, rejected = 0;
  for (int round = 0; round < 160; ++round) {
    Case c = randomCase(rng);
    int lanes = rng() % 3 == 0 ? 8 : 1;
    PrimFunc original = c.chain ? lowerChain(c.text, lanes) : lowerFirst(c.text, lanes);
    SCOPED_TRACE(c.text + "\n" + print(original));
    Schedule s(original);
    int steps = static_cast<int>(rng() % 6) + 1;
    for (int k = 0; k < steps; ++k) (randomStep(s, rng, original) ? applied : rejected)++;
    PrimFunc out = s.func();
    SCOPED_TRACE(s.trace().str() + print(out));
    // Reordered reductions and vector lane sums reassociate float sums.
    ASSERT_TRUE(sameValues(interpret(out, round), interpret(original, round), 1e-5));
    // The steps taken here, after the lowering's own (a reduction's sketch).
    const size_t history =
        original.attrs.count("trace") ? Trace::parse(original.attrs.at("trace")).steps().size() : 0;
    const Trace taken(std::vector<TraceStep>(s.trace().steps().begin() + static_cast<std::ptrdiff_t>(history),
                                             s.trace().steps().end()));
    PrimFunc replay = taken.empty() ? original : taken.apply(original);
    EXPECT_EQ(print(replay), print(out));
    // Every step the static dependence proofs accepted, the replay accepts too.
    schedule_detail::setStaticProofs(false);
    std::string replayError;
    try {
      replay = taken.empty() ? original : taken.apply(original);
    } catch (const Error& e) {
      replayError = e.what();
    }
    schedule_detail::setStaticProofs(true);
    EXPECT_EQ(replayError, "");
    EXPECT_EQ(print(replay), print(out));
    out.name = "sched" + std::to_string(round);
    original.name = "orig" + std::to_string(round);
    jitFuncs.push_back(out);
    references.push_back(original);
  }
  EXPECT_GT(applied, 100);
  EXPECT_GT(rejected, 20);
  int staged = 0;  // functions with a cache_write among their steps
  for (const PrimFunc& f : jitFuncs) staged += f.attrs.count("trace") && f.attrs.at("trace").find("cache_write(") != std::string::npos;
  EXPECT_GE(staged, 2);
  int distributed = 0;  // functions with a fission among their steps
  for (const PrimFunc& f : jitFuncs)
    distributed += f.attrs.count("trace") && f.attrs.at("trace").find("fission(") != std::string::npos;
  EXPECT_GE(distributed, 2);
  // JIT-compile every scheduled function at once and compare with the unscheduled one run in the
  // interpreter.
  auto lib = codegen::JitLibrary::compile(jitFuncs, hostTarget());
  for (size_t k = 0; k < jitFuncs.size(); ++k) {
    SCOPED_TRACE(jitFuncs[k].attrs.count("trace") ? jitFuncs[k].attrs.at("trace") : "");
    auto args = makeArgs(jitFuncs[k], 99);
    std::vector<void*> p = pointers(args);
    lib->lookup(jitFuncs[k].name)(p.data());
    EXPECT_TRUE(sameValues(args, interpret(references[k], 99), 1e-5)) << print(jitFuncs[k]);
  }
}

}  // namespace
}  // namespace kiln::core::tir
