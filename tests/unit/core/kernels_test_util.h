// Helpers for the fast-schedule tests (kernels_*_test.cpp, alter_layout_*_test.cpp): build small
// graphs, lower them with given LowerOptions, run the result both in the TIR interpreter (the
// loop IR's reference semantics) and as JIT-compiled machine code, and compare with plain C++
// references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/llvm/jit.h"
#include "codegen/target.h"
#include "core/ir/graph.h"
#include "core/lower/interpreter.h"
#include "core/lower/lower.h"
#include "core/lower/schedule_config.h"
#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "runtime/graph_executor.h"

namespace kiln::core::lower::testing {

inline runtime::Tensor randomTensor(const Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  runtime::Tensor t = runtime::Tensor::zeros(DType::Float32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

/// |got − want| ≤ 1e-4·(1 + |want|) elementwise, NaN never close.
inline ::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-4 * (1 + std::fabs(want[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

enum class Engine { Interpreter, Jit };

inline const codegen::Target& hostTarget() {
  static const codegen::Target target = codegen::Target::parse("llvm");
  return target;
}

/// Runs lowered kernels and their plan on `inputs`; returns the graph outputs.
inline std::vector<runtime::Tensor> evalModule(const LoweredModule& module, const std::vector<runtime::Tensor>& inputs,
                                               Engine engine) {
  const runtime::GraphPlan& plan = module.plan;
  if (engine == Engine::Jit) {
    auto library = codegen::JitLibrary::compile(module.funcs, hostTarget());
    runtime::GraphExecutor ex(plan, library);
    for (size_t i = 0; i < inputs.size(); ++i) ex.setInput(static_cast<int>(i), inputs[i]);
    ex.run();
    std::vector<runtime::Tensor> out;
    for (int i = 0; i < ex.numOutputs(); ++i) out.push_back(ex.output(i));
    return out;
  }
  std::vector<runtime::Tensor> slots(plan.slots.size());
  for (size_t s = 0; s < plan.slots.size(); ++s) {
    const runtime::TensorSlot& slot = plan.slots[s];
    if (slot.kind == runtime::SlotKind::Input) slots[s] = inputs.at(slot.index).clone();
    else if (slot.kind == runtime::SlotKind::Constant) slots[s] = plan.constants.at(slot.index);
    else slots[s] = runtime::Tensor::zeros(slot.dtype, slot.shape);
  }
  for (const runtime::KernelCall& call : plan.calls) {
    const tir::PrimFunc* func = nullptr;
    for (const auto& f : module.funcs)
      if (f.name == call.kernel) func = &f;
    std::vector<void*> args;
    for (int a : call.args) args.push_back(slots[a].raw());
    interpret(*func, args);
  }
  std::vector<runtime::Tensor> out;
  for (int s : plan.outputs) out.push_back(slots[s]);
  return out;
}

/// Lowers the whole graph and runs it on `inputs`; returns the graph outputs.
inline std::vector<runtime::Tensor> evalGraph(const Graph& graph, const std::vector<runtime::Tensor>& inputs,
                                              Engine engine, const LowerOptions& options = {}) {
  return evalModule(lowerGraph(graph, options), inputs, engine);
}

/// |actual − expected| ≤ tol·(1 + |expected|) elementwise.
inline ::testing::AssertionResult allClose(const runtime::Tensor& actual, const std::vector<float>& expected,
                                           double tol = 1e-4) {
  if (actual.numel() != static_cast<int64_t>(expected.size()))
    return ::testing::AssertionFailure() << "size " << actual.numel() << " vs " << expected.size();
  int bad = 0;
  std::string first;
  for (size_t i = 0; i < expected.size(); ++i) {
    double a = actual.data<float>()[i], e = expected[i];
    if (std::fabs(a - e) <= tol * (1.0 + std::fabs(e))) continue;
    if (bad++ == 0) first = "element " + std::to_string(i) + ": got " + std::to_string(a) + ", expected " + std::to_string(e);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " elements differ; " << first;
}

/// How many loads of `f` read buffer `buffer` (0: a kernel that never reads its output back).
inline int loadsOf(const tir::PrimFunc& f, const tir::Buffer& buffer) {
  struct Reads : tir::IRVisitor {
    const tir::BufferNode* buffer;
    int loads = 0;
    using tir::IRVisitor::visit;
    void visit(const tir::Load* op) override {
      loads += op->buffer.get() == buffer;
      tir::IRVisitor::visit(op);
    }
  } reads;
  reads.buffer = buffer.get();
  reads.visitStmt(f.body);
  return reads.loads;
}

/// `graph` lowered with `knobs` as the tuning record of `key`.
inline LoweredModule lowerWithRecord(const Graph& graph, LowerOptions options, const std::string& key,
                                     const std::map<std::string, int64_t>& knobs) {
  auto configs = std::make_shared<ScheduleConfigs>();
  configs->byKey[key] = knobs;
  options.schedules = configs;
  return lowerGraph(graph, options);
}

/// A kernel scheduled by a sketch through a tuning record: lowers `graph` (one kernel) with
/// `knobs` as the record of `key`, then checks its schedule and trace (staged in registers at
/// `stagedLoop`), that it never reads its output back (a fused epilogue at the tile's stores),
/// its outputs in the interpreter and as JIT code, and that the trace alone rebuilds it.
inline void expectSketchKernel(const Graph& graph, LowerOptions options, const std::string& key,
                               const std::map<std::string, int64_t>& knobs, const std::string& stagedLoop,
                               const std::vector<runtime::Tensor>& inputs, const std::vector<float>& want) {
  LoweredModule module = lowerWithRecord(graph, options, key, knobs);
  ASSERT_EQ(module.funcs.size(), 1u);
  const tir::PrimFunc& f = module.funcs[0];
  EXPECT_EQ(f.attrs.at("tune_key"), key);
  EXPECT_EQ(f.attrs.at("schedule"), knobsText(knobs));
  ASSERT_EQ(f.attrs.count("trace"), 1u);
  EXPECT_NE(f.attrs.at("trace").find("cache_write(" + stagedLoop + ")"), std::string::npos);
  EXPECT_EQ(loadsOf(f, f.params.back()), 0) << tir::print(f);
  for (Engine e : {Engine::Interpreter, Engine::Jit})
    EXPECT_TRUE(allClose(evalModule(module, inputs, e)[0], want)) << (e == Engine::Jit ? "jit" : "interp");
  auto traced = std::make_shared<ScheduleConfigs>();
  traced->traces[key] = f.attrs.at("trace");
  options.schedules = traced;
  EXPECT_EQ(tir::print(lowerGraph(graph, options).funcs[0]), tir::print(f));
}

inline std::vector<float> toVector(const runtime::Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

struct ConvCase {
  int64_t n = 1, c = 4, h = 5, w = 5, oc = 4, kh = 3, kw = 3;
  int64_t sh = 1, sw = 1, ph = 1, pw = 1, dh = 1, dw = 1, groups = 1;
  bool bias = true;
  int64_t oh() const { return outSize(h, kh, sh, ph, dh); }
  int64_t ow() const { return outSize(w, kw, sw, pw, dw); }
  static int64_t outSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    int64_t span = in + 2 * p - d * (k - 1) - 1;
    return span < 0 ? 0 : span / s + 1;
  }
  std::string str() const {
    return "x[" + std::to_string(n) + "," + std::to_string(c) + "," + std::to_string(h) + "," + std::to_string(w) +
           "] oc=" + std::to_string(oc) + " k=" + std::to_string(kh) + "x" + std::to_string(kw) + " s=" +
           std::to_string(sh) + "," + std::to_string(sw) + " p=" + std::to_string(ph) + "," + std::to_string(pw) +
           " d=" + std::to_string(dh) + "," + std::to_string(dw) + " g=" + std::to_string(groups) +
           (bias ? " bias" : "");
  }
};

/// Plain NCHW convolution in double precision.
inline std::vector<float> referenceConv(const ConvCase& p, const runtime::Tensor& xt, const runtime::Tensor& wt,
                                        const runtime::Tensor* bt) {
  const float* x = xt.data<float>();
  const float* w = wt.data<float>();
  int64_t cg = p.c / p.groups, ocg = p.oc / p.groups, oh = p.oh(), ow = p.ow();
  std::vector<float> y(static_cast<size_t>(p.n * p.oc * oh * ow));
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t o = 0; o < p.oc; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bt ? bt->data<float>()[o] : 0.0;
          int64_t g = o / ocg;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t u = 0; u < p.kh; ++u)
              for (int64_t v = 0; v < p.kw; ++v) {
                int64_t ih = i * p.sh - p.ph + u * p.dh, iw = j * p.sw - p.pw + v * p.dw;
                if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) continue;
                acc += double(x[((n * p.c + g * cg + ic) * p.h + ih) * p.w + iw]) * w[((o * cg + ic) * p.kh + u) * p.kw + v];
              }
          y[((n * p.oc + o) * oh + i) * ow + j] = static_cast<float>(acc);
        }
  return y;
}

/// Conv attributes of a case.
inline Attrs convAttrs(const ConvCase& p) {
  return Attrs{{"stride", std::vector<int64_t>{p.sh, p.sw}},
               {"padding", std::vector<int64_t>{p.ph, p.pw}},
               {"dilation", std::vector<int64_t>{p.dh, p.dw}},
               {"groups", p.groups}};
}

/// A random case; `depthwise` forces groups = C = O.
inline ConvCase randomConvCase(std::mt19937& rng, bool depthwise) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  ConvCase p;
  p.n = pick(1, 2);
  p.c = pick(1, 40);
  p.oc = depthwise ? p.c : pick(1, 40);
  p.groups = depthwise ? p.c : 1;
  p.kh = std::vector<int64_t>{1, 3, 5, 2}[pick(0, 3)];
  p.kw = pick(0, 3) == 0 ? p.kh : std::vector<int64_t>{1, 3, 5}[pick(0, 2)];
  p.sh = pick(1, 2), p.sw = pick(1, 2);
  p.dh = pick(0, 3) == 0 ? 2 : 1, p.dw = pick(0, 3) == 0 ? 2 : 1;
  p.ph = pick(0, p.kh / 2 + 1), p.pw = pick(0, p.kw / 2 + 1);
  p.h = pick(1, 15), p.w = pick(1, 19);
  p.bias = pick(0, 1) == 1;
  // Keep the output non-empty.
  while (p.oh() <= 0) ++p.h;
  while (p.ow() <= 0) ++p.w;
  return p;
}

}  // namespace kiln::core::lower::testing
