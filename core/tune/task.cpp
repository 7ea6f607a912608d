// Task extraction and standalone task graphs; see task.h.
#include "core/tune/task.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "core/lower/conv_search.h"
#include "core/lower/gemm_search.h"
#include "core/lower/nest_search.h"
#include "core/lower/schedule_config.h"
#include "runtime/error.h"

namespace kiln::core::tune {

using lower::knob;

std::vector<TuneTask> extractTasks(const lower::LoweredModule& module) {
  std::map<std::string, const tir::PrimFunc*> byName;
  for (const auto& f : module.funcs) byName[f.name] = &f;
  std::vector<TuneTask> tasks;
  std::map<std::string, size_t> index;
  for (const auto& call : module.plan.calls) {
    auto it = byName.find(call.kernel);
    if (it == byName.end()) continue;
    const auto& attrs = it->second->attrs;
    auto key = attrs.find("tune_key");
    if (key == attrs.end()) continue;
    auto [pos, fresh] = index.emplace(key->second, tasks.size());
    if (fresh) {
      TuneTask t;
      t.name = call.kernel;
      t.key = key->second;
      t.kind = lower::parseTuneKey(t.key).kind;
      t.flops = taskFlops(t.key);
      auto schedule = attrs.find("schedule");
      if (schedule != attrs.end()) t.defaultKnobs = schedule->second;
      tasks.push_back(std::move(t));
    }
    ++tasks[pos->second].weight;
  }
  std::stable_sort(tasks.begin(), tasks.end(), [](const TuneTask& a, const TuneTask& b) {
    return a.weight * a.flops > b.weight * b.flops;
  });
  return tasks;
}

namespace {

runtime::Tensor randomTensor(runtime::Shape shape, std::mt19937& rng, float scale) {
  runtime::Tensor t = runtime::Tensor::zeros(DType::Float32, std::move(shape));
  std::normal_distribution<float> normal(0.0f, scale);
  float* data = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) data[i] = normal(rng);
  return t;
}

void requireF32(const lower::TuneKeyParts& parts, const std::string& key) {
  if (parts.dtype != "f32") throw Error("tuning key '" + key + "': only f32 tasks are supported", ErrorKind::Unsupported);
}

/// The inputs of a quantized task after its u8 input x: random i8 weights of `weightShape` in
/// [-8, 8], per-channel multipliers that keep the requantized outputs inside (0, 255) for inputs in
/// [0, 8) (what a tuning worker feeds a u8 input) over `fanIn` products, and zero offsets; the
/// scales and zero points into `attrs`.
std::vector<ValueId> quantizedInputs(Graph& g, ValueId x, const runtime::Shape& weightShape, int64_t fanIn,
                                     int64_t inputZeroPoint, uint64_t seed, Attrs& attrs) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> weight(-8, 8);
  runtime::Tensor w = runtime::Tensor::zeros(DType::Int8, weightShape);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(weight(rng));
  const int64_t channels = weightShape[0];
  runtime::Tensor multiplier = runtime::Tensor::zeros(DType::Float32, {channels});
  runtime::Tensor offset = runtime::Tensor::zeros(DType::Float32, {channels});
  for (int64_t j = 0; j < channels; ++j)
    multiplier.data<float>()[j] = 4.0f / std::sqrt(static_cast<float>(fanIn));
  attrs.set("input_scale", 1.0);
  attrs.set("input_zero_point", inputZeroPoint);
  attrs.set("output_scale", 1.0);
  attrs.set("output_zero_point", int64_t{128});
  return {x, g.addConstant("weight", std::move(w)), g.addConstant("multiplier", std::move(multiplier)),
          g.addConstant("offset", std::move(offset))};
}

/// A quantized dense key's task: qnn.dense over a u8 input (quantizedInputs).
Graph quantizedDenseGraph(const lower::TuneKeyParts& parts, const std::string& key, uint64_t seed) {
  lower::DenseShape s = lower::denseShapeOfKey(parts.params, key);
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::UInt8, {s.m, s.k}});
  Attrs attrs;
  std::vector<ValueId> inputs = quantizedInputs(g, x, {s.n, s.k}, s.k, 0, seed, attrs);
  g.setOutputs({g.addNode("qnn.dense", inputs, attrs, {}, "y")[0]});
  return g;
}

/// A quantized convolution key's task: qnn.conv2d_nchwc itself on a u8 input packed in the key's
/// block, random packed i8 weights in [-8, 8], multipliers as quantizedInputs', and random
/// zero-point shares (one row per region; the kernel takes any off).
Graph quantizedConvGraph(const lower::TuneKeyParts& parts, const std::string& key, uint64_t seed) {
  std::optional<lower::ConvSketchShape> s = lower::convSketchShapeOfKey(key, 1, 16);
  if (!s)
    throw Error("tuning key '" + key + "': its blocks do not pack these channels", ErrorKind::InvalidInput);
  const lower::ConvGeometry c = lower::convGeometryOfKey(parts.params);
  const int64_t ib = knob(parts.params, "ib", 0), ob = knob(parts.params, "ob", 0);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> weight(-8, 8), share(-64, 64);
  runtime::Tensor w = runtime::Tensor::zeros(
      DType::Int8, s->depthwise ? runtime::Shape{c.c / ob, 1, c.kh, c.kw, ob, 1}
                                : runtime::Shape{c.o / ob, c.c / 4, c.kh, c.kw, ob, 4});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(weight(rng));
  runtime::Tensor shares = runtime::Tensor::zeros(DType::Int32, {s->regions(), c.o});
  for (int64_t i = 0; i < shares.numel(); ++i) shares.data<int32_t>()[i] = share(rng);
  runtime::Tensor multiplier = runtime::Tensor::zeros(DType::Float32, {c.o});
  runtime::Tensor offset = runtime::Tensor::zeros(DType::Float32, {c.o});
  const int64_t fanIn = (s->depthwise ? 1 : c.c) * c.kh * c.kw;
  for (int64_t j = 0; j < c.o; ++j) multiplier.data<float>()[j] = 4.0f / std::sqrt(static_cast<float>(fanIn));
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::UInt8, {c.n, c.c / ib, c.h, c.w, ib}});
  Attrs attrs;
  attrs.set("stride", std::vector<int64_t>{c.sh, c.sw});
  attrs.set("padding", std::vector<int64_t>{c.ph, c.pw});
  attrs.set("dilation", std::vector<int64_t>{c.dh, c.dw});
  attrs.set("groups", c.groups);
  attrs.set("out_layout", "NCHW" + std::to_string(ob) + "c");
  attrs.set("in_channels", c.c);
  attrs.set("input_scale", 1.0);
  attrs.set("input_zero_point", int64_t{0});
  attrs.set("output_scale", 1.0);
  attrs.set("output_zero_point", int64_t{128});
  std::vector<ValueId> inputs{
      x, g.addConstant("weight_packed", std::move(w)), g.addConstant("multiplier", std::move(multiplier)),
      g.addConstant("offset", std::move(offset)), g.addConstant("zero_point_shares", std::move(shares))};
  g.setOutputs({g.addNode("qnn.conv2d_nchwc", inputs, attrs, {}, "y")[0]});
  return g;
}

/// A quantized NCHW convolution key's task: qnn.conv2d on a u8 input (quantizedInputs) with an
/// input zero point of 8 (its traces do not depend on it).
Graph quantizedPlanarConvGraph(const lower::TuneKeyParts& parts, const std::string& key, uint64_t seed) {
  const lower::ConvGeometry c = lower::convGeometryOfKey(parts.params);
  if (c.groups <= 0 || c.c % c.groups != 0 || c.o % c.groups != 0)
    throw Error("tuning key '" + key + "': groups do not divide the channels", ErrorKind::InvalidInput);
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::UInt8, {c.n, c.c, c.h, c.w}});
  Attrs attrs;
  attrs.set("stride", std::vector<int64_t>{c.sh, c.sw});
  attrs.set("padding", std::vector<int64_t>{c.ph, c.pw});
  attrs.set("dilation", std::vector<int64_t>{c.dh, c.dw});
  attrs.set("groups", c.groups);
  std::vector<ValueId> inputs =
      quantizedInputs(g, x, {c.o, c.c / c.groups, c.kh, c.kw}, c.c / c.groups * c.kh * c.kw, 8, seed, attrs);
  g.setOutputs({g.addNode("qnn.conv2d", inputs, attrs, {}, "y")[0]});
  return g;
}

}  // namespace

double taskFlops(const std::string& key) {
  lower::TuneKeyParts parts = lower::parseTuneKey(key);
  if (parts.kind == "conv2d_nchwc" || parts.kind == "conv2d")
    return lower::convGeometryOfKey(parts.params).flops();
  if (parts.kind == "dense")
    return 2.0 * static_cast<double>(knob(parts.params, "m", 1)) * static_cast<double>(knob(parts.params, "k", 1)) *
           static_cast<double>(knob(parts.params, "n", 1));
  if (parts.kind == "matmul") return lower::matmulShapeOfKey(parts.params, key).flops();
  if (parts.kind == "dense_packed") return lower::densePackedShapeOfKey(parts.params, key).flops();
  // An element nest: one operation per output element (a copy's is a move), so its rate reads as
  // outputs per second beside the other tasks' FLOP/s.
  if (parts.kind == "nest") return static_cast<double>(lower::elementNestOutputs(key));
  // A row nest: one operation per element of a row it reads (softmax's four passes count once).
  if (parts.kind == "reduce") {
    lower::RowNestShape s = lower::rowNestShapeOfKey(key);
    return static_cast<double>(s.rows) * static_cast<double>(s.length);
  }
  // A pooling window: one operation per tap of every output element.
  if (parts.kind == "pool") {
    const lower::ConvSketchShape s = lower::poolSketchShapeOfKey(key);
    return static_cast<double>(s.n * s.groups * s.rows * s.pixels * s.lanes) *
           static_cast<double>(s.kh * s.kw);
  }
  // A plain window nest: one operation per tap of its largest window, for every output element.
  if (parts.kind == "window") {
    const lower::WindowNestShape s = lower::windowNestShapeOfKey(key);
    return static_cast<double>(s.outputs) * static_cast<double>(s.taps);
  }
  throw Error("tuning key '" + key + "' names no tunable operator", ErrorKind::InvalidInput);
}

Graph taskGraph(const std::string& key, uint64_t seed) {
  lower::TuneKeyParts parts = lower::parseTuneKey(key);
  if (parts.kind == "dense" && parts.dtype == "u8") return quantizedDenseGraph(parts, key, seed);
  if (parts.kind == "conv2d_nchwc" && parts.dtype == "u8") return quantizedConvGraph(parts, key, seed);
  if (parts.kind == "conv2d" && parts.dtype == "u8") return quantizedPlanarConvGraph(parts, key, seed);
  requireF32(parts, key);
  if (parts.kind == "nest" || parts.kind == "reduce" || parts.kind == "pool" || parts.kind == "window")
    return lower::nestTaskGraph(key);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  Graph g;
  // A packed convolution's task is the NCHW conv2d that alter-layout packs (at -O3); a plain one's
  // the conv2d itself.
  if (parts.kind == "conv2d_nchwc" || parts.kind == "conv2d") {
    lower::ConvGeometry c = lower::convGeometryOfKey(parts.params);
    if (c.groups <= 0 || c.c % c.groups != 0 || c.o % c.groups != 0)
      throw Error("tuning key '" + key + "': groups do not divide the channels", ErrorKind::InvalidInput);
    ValueId x = g.addInput("x", TensorType{DType::Float32, {c.n, c.c, c.h, c.w}});
    // Scaled so outputs stay O(1) whatever the fan-in (the result check compares them).
    float scale = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(1, c.c / c.groups * c.kh * c.kw)));
    ValueId w = g.addConstant("weight", randomTensor({c.o, c.c / c.groups, c.kh, c.kw}, rng, scale));
    ValueId b = g.addConstant("bias", randomTensor({c.o}, rng, 0.1f));
    Attrs attrs;
    attrs.set("stride", std::vector<int64_t>{c.sh, c.sw});
    attrs.set("padding", std::vector<int64_t>{c.ph, c.pw});
    attrs.set("dilation", std::vector<int64_t>{c.dh, c.dw});
    attrs.set("groups", c.groups);
    g.setOutputs({g.addNode("conv2d", {x, w, b}, attrs, {}, "y")[0]});
    return g;
  }
  if (parts.kind == "dense") {
    int64_t m = knob(parts.params, "m", 1), k = knob(parts.params, "k", 1), n = knob(parts.params, "n", 1);
    ValueId x = g.addInput("x", TensorType{DType::Float32, {m, k}});
    ValueId w = g.addConstant("weight", randomTensor({n, k}, rng, 1.0f / std::sqrt(static_cast<float>(k))));
    ValueId b = g.addConstant("bias", randomTensor({n}, rng, 0.1f));
    g.setOutputs({g.addNode("dense", {x, w, b}, {}, {}, "y")[0]});
    return g;
  }
  if (parts.kind == "matmul") {
    // Both operands are inputs (attention multiplies two activations); scaled so outputs stay O(1).
    lower::MatmulShape s = lower::matmulShapeOfKey(parts.params, key);
    ValueId a = g.addInput("a", TensorType{DType::Float32, s.a});
    ValueId b = g.addInput("b", TensorType{DType::Float32, s.b});
    g.setOutputs({g.addNode("matmul", {a, b}, {}, {}, "y")[0]});
    return g;
  }
  if (parts.kind == "dense_packed") {
    // The packed op itself (random weights need no packing): the O3 pipeline keeps it as it is.
    lower::DensePackedShape s = lower::densePackedShapeOfKey(parts.params, key);
    ValueId x = g.addInput("x", TensorType{DType::Float32, {s.m, s.k}});
    std::vector<ValueId> inputs{
        x, g.addConstant("weight_packed", randomTensor({s.n / s.panel, s.k, s.panel}, rng,
                                                       1.0f / std::sqrt(static_cast<float>(s.k))))};
    if (s.bias) inputs.push_back(g.addConstant("bias", randomTensor({s.n}, rng, 0.1f)));
    g.setOutputs({g.addNode("dense_packed", inputs, {}, {}, "y")[0]});
    return g;
  }
  throw Error("tuning key '" + key + "' names no tunable operator", ErrorKind::InvalidInput);
}

CompileOptions candidateCompileOptions(const std::string& key, const lower::Knobs& knobs, lower::LowerOptions options,
                                       int optLevel) {
  auto configs = std::make_shared<lower::ScheduleConfigs>();
  if (!knobs.empty()) configs->byKey[key] = knobs;
  options.schedules = configs;
  CompileOptions build;
  build.lower = options;
  std::string text;
  if (lower::parseTuneKey(key).kind == "conv2d_nchwc" && optLevel >= 3)
    text = "alter-layout{lanes=" + std::to_string(options.vectorLanes) + "}";
  if (optLevel >= 4) text += std::string(text.empty() ? "" : ",") + "fast-math";
  build.passes = text;
  return build;
}

size_t kernelWithKey(const lower::LoweredModule& module, const std::string& key) {
  for (size_t i = 0; i < module.funcs.size(); ++i) {
    auto it = module.funcs[i].attrs.find("tune_key");
    if (it != module.funcs[i].attrs.end() && it->second == key) return i;
  }
  throw Error("the task graph of '" + key + "' has no kernel with that key", ErrorKind::Internal);
}

Candidate compileCandidate(const std::string& key, const lower::Knobs& knobs, lower::LowerOptions options,
                           int optLevel) {
  Candidate c;
  Graph graph = taskGraph(key);
  for (ValueId v : graph.inputs()) c.indexBounds.push_back(indexBound(graph, v));
  c.module = compile(graph, candidateCompileOptions(key, knobs, std::move(options), optLevel)).module;
  c.kernel = kernelWithKey(c.module, key);
  return c;
}

}  // namespace kiln::core::tune
