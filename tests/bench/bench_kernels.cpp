// Microbenchmarks of Kiln's generated kernels (Google Benchmark): GFLOP/s of conv2d in the packed
// layout (what -O3 runs: the schedule of core/lower/conv_search.h's sketch) and in plain NCHW
// (-O0..-O2) on ResNet-50 layer shapes (and two of MobileNetV2's depthwise ones), direct vs Winograd F(2×2,
// 3×3) / F(4×4, 3×3) on ResNet-18's 3×3 layers (conv_algo{0,2,4}: effective GFLOP/s, counting the direct
// convolution's FLOPs), dense 2048→1000, and bert_encoder's dense layers over 128 and 1024 tokens (batch 1
// and 8) both as dense (dot-product tile) and as -O3 runs them (pack-dense's dense_packed, the outer-product
// tile on weight panels that the schedule primitives of its sketch build, core/lower/gemm_search.h), the
// feed-forward layers' dense_packed_gelu (an exact GELU fused at the tile's write-back) and that GELU alone
// over their 1024 × 1024 activation, next to the measured FMA peak of this machine: a JIT-compiled loop-IR
// kernel of independent vector FMA chains, once per vector width.
//
//   build/tests/bench/bench_kernels [--benchmark_repetitions=5 --benchmark_report_aggregates_only]
//   KILN_BENCH_TARGET="llvm -mcpu=znver3" build/tests/bench/bench_kernels   (AVX2 schedules)
//   KILN_BENCH_WINO_KNOBS="oc_vecs=1,mi=7,po=0" ... --benchmark_filter=conv_algo   (other Winograd tiles)
//   KILN_BENCH_SKETCH_KNOBS="mi=14,po=0" ... --benchmark_filter=conv_packed   (other sketch tiles)
//   KILN_BENCH_NCHW_KNOBS="mi=2,oc_vecs=4,vl=8" ... --benchmark_filter=conv_nchw   (other NCHW tiles)
//
// Each row reports GFLOPS (2·MACs per second) and pct_peak (of the measured single-thread peak
// times the thread count). Kernels are compiled for the host ("llvm") with LowerOptions from its
// features; threads come from the runtime pool (1 and 2). Single-thread rows are timed in CPU
// time (the machine is shared: time spent descheduled is not the kernel's), 2-thread rows in
// real time.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/llvm/jit.h"
#include "codegen/target.h"
#include "core/ir/graph.h"
#include "core/lower/conv_search.h"
#include "core/lower/lower.h"
#include "core/lower/peak_kernels.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/passes/alter_layout.h"
#include "core/passes/fuse_ops.h"
#include "core/passes/pack_dense.h"
#include "core/tir/stmt.h"
#include "runtime/graph_executor.h"
#include "runtime/thread_pool.h"

namespace {

using namespace kiln;
using namespace kiln::core;
namespace tir = kiln::core::tir;

/// The benchmark target: the host, or KILN_BENCH_TARGET (e.g. "llvm -mcpu=znver3" for AVX2 only).
const codegen::Target& host() {
  static const codegen::Target t = codegen::Target::parse(std::getenv("KILN_BENCH_TARGET") ? std::getenv("KILN_BENCH_TARGET") : "llvm");
  return t;
}

const lower::LowerOptions& hostOptions() {
  static const lower::LowerOptions o = lower::lowerOptionsFor(host().cpu, host().features);
  return o;
}

runtime::Tensor filled(const Shape& shape, float seed) {
  runtime::Tensor t = runtime::Tensor::zeros(DType::Float32, shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>((i * 7919 + 13) % 1000) * 1e-3f - 0.5f + seed;
  return t;
}

// ---- FMA peak ---------------------------------------------------------------------------------

// GFLOP/s everywhere counts nominal FLOPs (2·MACs including taps that fall into the padding, as
// PyTorch and oneDNN report them); the schedules skip padding taps, so a small padded 3×3 layer
// (7×7 spatial: 82 % of the nominal taps are real) can show > 100 % of the peak. The peak kernel
// is core/lower/peak_kernels.h's, the one the roofline's ceilings measure with.
using core::lower::fmaPeakKernel;

double g_peakPerThread = 0;  // GFLOP/s, measured at start-up

void BM_FmaPeak(benchmark::State& state, int lanes, int threads) {
  const int chains = lanes >= 16 ? 24 : 12;
  const int64_t iters = 1 << 16;
  runtime::setNumThreads(threads);
  tir::PrimFunc f = fmaPeakKernel(lanes, chains, iters, threads);
  auto lib = codegen::JitLibrary::compile({f}, host());
  KilnKernelFn fn = lib->lookup(f.name);
  std::vector<float> out(static_cast<size_t>(threads * lanes));
  void* args[] = {out.data()};
  for (auto _ : state) {
    fn(args);
    benchmark::DoNotOptimize(out.data());
  }
  double flops = 2.0 * lanes * chains * iters * threads;
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

/// Measures the single-thread FMA peak once (best of a few runs) for the pct_peak counters.
double measurePeak() {
  int lanes = hostOptions().vectorLanes;
  const int chains = lanes >= 16 ? 24 : 12;
  const int64_t iters = 1 << 18;
  runtime::setNumThreads(1);
  // Thread CPU time: on a shared machine, time spent descheduled does not count.
  auto cpuNow = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  tir::PrimFunc f = fmaPeakKernel(lanes, chains, iters, 1);
  auto lib = codegen::JitLibrary::compile({f}, host());
  KilnKernelFn fn = lib->lookup(f.name);
  std::vector<float> out(static_cast<size_t>(lanes));
  void* args[] = {out.data()};
  double best = 1e30;
  for (int r = 0; r < 20; ++r) {
    double start = cpuNow();
    fn(args);
    best = std::min(best, cpuNow() - start);
  }
  return 2.0 * lanes * chains * iters / best * 1e-9;
}

// ---- thread pool ------------------------------------------------------------------------------

/// One parallel launch of an (almost) empty task over 64 iterations: the fixed cost every
/// parallel kernel pays.
void BM_ParallelLaunch(benchmark::State& state, int threads) {
  runtime::setNumThreads(threads);
  std::atomic<int64_t> sink{0};
  auto task = [](int64_t begin, int64_t end, void* closure) -> int32_t {
    static_cast<std::atomic<int64_t>*>(closure)->fetch_add(end - begin, std::memory_order_relaxed);
    return 0;
  };
  for (auto _ : state) runtime::parallelLaunch(task, &sink, 64);
  benchmark::DoNotOptimize(sink.load());
}

// ---- graph-level kernels ----------------------------------------------------------------------

/// A compiled one-op graph plus its inputs, ready to run.
struct Compiled {
  std::unique_ptr<runtime::GraphExecutor> executor;
  double flops = 0;
  std::string schedule;
};

Compiled compileGraph(const Graph& graph, const std::vector<runtime::Tensor>& inputs, double flops,
                      const lower::Knobs& knobs = {}) {
  lower::LowerOptions options = hostOptions();
  if (!knobs.empty()) {
    // The knobs as a tuning record for every kernel of the graph.
    auto configs = std::make_shared<lower::ScheduleConfigs>();
    for (NodeId n = 0; n < static_cast<NodeId>(graph.nodes().size()); ++n) {
      const Node& node = graph.node(n);
      std::vector<TensorType> in, out;
      for (ValueId v : node.inputs) in.push_back(graph.type(v));
      for (ValueId v : node.outputs) out.push_back(graph.type(v));
      std::string key = lower::tuneKeyOf(node.op, node.attrs, in, out);
      if (!key.empty()) configs->byKey[key] = knobs;
    }
    options.schedules = configs;
  }
  lower::LoweredModule module = lower::lowerGraph(graph, options);
  Compiled c;
  for (const auto& f : module.funcs) {
    auto it = f.attrs.find("schedule");
    if (it != f.attrs.end()) c.schedule += (c.schedule.empty() ? "" : ";") + it->second;
  }
  auto lib = codegen::JitLibrary::compile(module.funcs, host());
  c.executor = std::make_unique<runtime::GraphExecutor>(std::move(module.plan), lib);
  for (size_t i = 0; i < inputs.size(); ++i) c.executor->setInput(static_cast<int>(i), inputs[i]);
  c.flops = flops;
  return c;
}

struct ConvShape {
  const char* name;
  int64_t c, h, w, oc, k, stride, pad, groups;
};

/// conv2d_nchwc on a packed input, exactly as -O3 emits it (weights pre-packed): the schedule of
/// core/lower/conv_search.h with its default annotation, or with KILN_BENCH_SKETCH_KNOBS
/// ("mi=7,po=1") other tiles on the same packing.
Compiled packedConv(const ConvShape& s) {
  const auto& o = hostOptions();
  bool depthwise = s.groups > 1;
  int64_t outBlock = lower::channelBlock(s.oc, o), inBlock = depthwise ? outBlock : lower::channelBlock(s.c, o);
  int64_t oh = (s.h + 2 * s.pad - s.k) / s.stride + 1, ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
  std::vector<int64_t> stride = {s.stride, s.stride}, pad = {s.pad, s.pad};
  int64_t rowWidth = lower::packedConvFlattens(s.k, s.k, stride, pad, ow, o) ? oh * ow : ow;
  int ocVecs = lower::packedConvOcVecs(s.oc, outBlock, rowWidth, depthwise, o);
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {1, s.c / inBlock, s.h, s.w, inBlock}});
  runtime::Tensor w = filled({s.oc, s.c / s.groups, s.k, s.k}, 0.f);
  ValueId wp = g.addConstant("w", passes::packConvWeight(w, inBlock, outBlock * ocVecs, depthwise));
  ValueId b = g.addConstant("b", filled({s.oc}, 0.f));
  Attrs attrs{{"stride", std::vector<int64_t>{s.stride, s.stride}},
              {"padding", std::vector<int64_t>{s.pad, s.pad}},
              {"groups", s.groups},
              {"out_layout", "NCHW" + std::to_string(outBlock) + "c"}};
  g.setOutputs({g.add("conv2d_nchwc", {x, wp, b}, attrs)});
  double flops = 2.0 * s.oc * oh * ow * (s.c / s.groups) * s.k * s.k;
  lower::Knobs knobs;
  if (const char* text = std::getenv("KILN_BENCH_SKETCH_KNOBS")) {
    auto shape = lower::convSketchShape({1, s.c / inBlock, s.h, s.w, inBlock}, g.type(wp).shape,
                                        {1, s.oc / outBlock, oh, ow, outBlock}, stride, pad, {1, 1}, s.groups, true);
    if (shape) knobs = lower::convSketchDefaultKnobs(*shape, o.vectorRegisters);
    for (const auto& [name, value] : lower::parseKnobs(text)) knobs[name] = value;
  }
  return compileGraph(g, {filled({1, s.c / inBlock, s.h, s.w, inBlock}, 0.f)}, flops, knobs);
}

/// conv2d_winograd_nchwc F(m×m, 3×3) (stride 1) with its heuristic tile, as alter-layout emits it
/// for a record with algo=m. FLOPs are the direct convolution's (effective GFLOP/s).
Compiled winogradConv(const ConvShape& s, int m) {
  const auto& o = hostOptions();
  int64_t outBlock = lower::channelBlock(s.oc, o), inBlock = lower::channelBlock(s.c, o);
  int64_t oh = s.h + 2 * s.pad - 2, ow = s.w + 2 * s.pad - 2;
  int ocVecs = lower::packedConvOcVecs(s.oc, outBlock, ow, false, o);
  // KILN_BENCH_WINO_KNOBS="oc_vecs=1,mi=7,po=0": other sketch annotations (winograd_search.h).
  lower::Knobs knobs;
  if (const char* text = std::getenv("KILN_BENCH_WINO_KNOBS")) {
    knobs = lower::parseKnobs(text);
    knobs["algo"] = m;
    ocVecs = static_cast<int>(lower::knob(knobs, "oc_vecs", ocVecs));
  }
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {1, s.c / inBlock, s.h, s.w, inBlock}});
  runtime::Tensor w = filled({s.oc, s.c, 3, 3}, 0.f);
  ValueId u = g.addConstant("u", passes::winogradConvWeight(w, m, outBlock * ocVecs));
  ValueId b = g.addConstant("b", filled({s.oc}, 0.f));
  Attrs attrs{{"padding", std::vector<int64_t>{s.pad, s.pad}},
              {"tile", int64_t{m}},
              {"out_layout", "NCHW" + std::to_string(outBlock) + "c"}};
  g.setOutputs({g.add("conv2d_winograd_nchwc", {x, u, b}, attrs)});
  double flops = 2.0 * s.oc * oh * ow * s.c * 9;
  return compileGraph(g, {filled({1, s.c / inBlock, s.h, s.w, inBlock}, 0.f)}, flops, knobs);
}

/// ResNet-18's 3×3 stride-1 layers (the Winograd-eligible ones).
const std::vector<ConvShape>& resnet18Winograd() {
  static const std::vector<ConvShape> shapes = {
      {"r18_l1_3x3_64", 64, 56, 56, 64, 3, 1, 1, 1},
      {"r18_l2_3x3_128", 128, 28, 28, 128, 3, 1, 1, 1},
      {"r18_l3_3x3_256", 256, 14, 14, 256, 3, 1, 1, 1},
      {"r18_l4_3x3_512", 512, 7, 7, 512, 3, 1, 1, 1},
  };
  return shapes;
}

/// Plain NCHW conv2d (the -O0..-O2 schedule): conv_search.h's NCHW sketch with its default
/// annotation, or with KILN_BENCH_NCHW_KNOBS ("mi=2,oc_vecs=4,vl=8") another.
Compiled plainConv(const ConvShape& s) {
  int64_t oh = (s.h + 2 * s.pad - s.k) / s.stride + 1, ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {1, s.c, s.h, s.w}});
  ValueId w = g.addConstant("w", filled({s.oc, s.c / s.groups, s.k, s.k}, 0.f));
  ValueId b = g.addConstant("b", filled({s.oc}, 0.f));
  Attrs attrs{{"stride", std::vector<int64_t>{s.stride, s.stride}},
              {"padding", std::vector<int64_t>{s.pad, s.pad}},
              {"groups", s.groups}};
  g.setOutputs({g.add("conv2d", {x, w, b}, attrs)});
  double flops = 2.0 * s.oc * oh * ow * (s.c / s.groups) * s.k * s.k;
  lower::Knobs knobs;
  if (const char* text = std::getenv("KILN_BENCH_NCHW_KNOBS")) knobs = lower::parseKnobs(text);
  return compileGraph(g, {filled({1, s.c, s.h, s.w}, 0.f)}, flops, knobs);
}

/// dense(m, k, n) with bias; `packed`: as -O3 runs it over many rows, its weights packed into
/// panels by pack-dense (dense_packed); `gelu`: followed by an exact GELU fused into its kernel
/// (a transformer's feed-forward layer), applied where each register tile is written back.
Compiled dense(int64_t m, int64_t k, int64_t n, bool packed = false, bool gelu = false) {
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {m, k}});
  ValueId w = g.addConstant("w", filled({n, k}, 0.f));
  ValueId b = g.addConstant("b", filled({n}, 0.f));
  ValueId y = g.add("dense", {x, w, b});
  g.setOutputs({gelu ? g.add("gelu", {y}) : y});
  const int lanes = hostOptions().vectorLanes;
  if (packed && !passes::packDense(g, {lanes, passes::packDenseMaxVectors(lanes), 16}))
    std::fprintf(stderr, "dense %lld to %lld: no panel width fits, not packed\n", static_cast<long long>(k),
                 static_cast<long long>(n));
  if (gelu) passes::fuseOps(g);
  // Inputs of one sign and size (the GELU's polynomial branch and its exp branch both run).
  runtime::Tensor input = filled({m, k}, 0.f);
  for (int64_t i = 0; i < input.numel(); ++i) input.data<float>()[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
  return compileGraph(g, {input}, 2.0 * m * k * n);
}

void runCompiled(benchmark::State& state, const std::function<Compiled()>& make, int threads) {
  runtime::setNumThreads(threads);
  Compiled c = make();
  state.SetLabel(c.schedule);
  c.executor->run();  // warm-up
  for (auto _ : state) c.executor->run();
  state.counters["GFLOPS"] = benchmark::Counter(c.flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (g_peakPerThread > 0) {
    state.counters["pct_peak"] = benchmark::Counter(c.flops * 1e-9 * 100.0 / (g_peakPerThread * threads),
                                                    benchmark::Counter::kIsIterationInvariantRate);
  }
}

const std::vector<ConvShape>& resnet50Shapes() {
  static const std::vector<ConvShape> shapes = {
      {"r50_conv1_7x7s2", 3, 224, 224, 64, 7, 2, 3, 1},
      {"r50_l1_1x1_64", 64, 56, 56, 64, 1, 1, 0, 1},
      {"r50_l1_3x3_64", 64, 56, 56, 64, 3, 1, 1, 1},
      {"r50_l1_1x1_256to64", 256, 56, 56, 64, 1, 1, 0, 1},
      {"r50_l1_1x1_64to256", 64, 56, 56, 256, 1, 1, 0, 1},
      {"r50_l2_3x3s2_128", 128, 56, 56, 128, 3, 2, 1, 1},
      {"r50_l2_3x3_128", 128, 28, 28, 128, 3, 1, 1, 1},
      {"r50_l2_1x1_512to128", 512, 28, 28, 128, 1, 1, 0, 1},
      {"r50_l3_3x3_256", 256, 14, 14, 256, 3, 1, 1, 1},
      {"r50_l3_1x1_1024to256", 1024, 14, 14, 256, 1, 1, 0, 1},
      {"r50_l4_3x3_512", 512, 7, 7, 512, 3, 1, 1, 1},
      {"r50_l4_1x1_512to2048", 512, 7, 7, 2048, 1, 1, 0, 1},
      {"r50_down_1x1s2_512to1024", 512, 28, 28, 1024, 1, 2, 0, 1},
      {"mbv2_dw3x3_144", 144, 56, 56, 144, 3, 1, 1, 144},
      {"mbv2_dw3x3s2_96", 96, 112, 112, 96, 3, 2, 1, 96},
  };
  return shapes;
}

/// Microseconds; real time when several threads work (the main thread's CPU time would miss
/// the workers), else CPU time.
void configure(benchmark::internal::Benchmark* b, int threads) {
  b->Unit(benchmark::kMicrosecond);
  if (threads > 1) b->UseRealTime();
}

void registerAll() {
  int lanes = hostOptions().vectorLanes;
  for (int l : {8, 16}) {
    if (l > lanes) continue;
    for (int t : {1, 2})
      configure(benchmark::RegisterBenchmark(("fma_peak/f32x" + std::to_string(l) + "/threads:" + std::to_string(t)).c_str(),
                                             [l, t](benchmark::State& s) { BM_FmaPeak(s, l, t); }),
                t);
  }
  for (int t : {1, 2})
    configure(benchmark::RegisterBenchmark(("parallel_launch/threads:" + std::to_string(t)).c_str(),
                                           [t](benchmark::State& s) { BM_ParallelLaunch(s, t); }),
              2);
  for (const ConvShape& shape : resnet50Shapes()) {
    for (int t : {1, 2}) {
      std::string suffix = std::string(shape.name) + "/threads:" + std::to_string(t);
      configure(benchmark::RegisterBenchmark(("conv_packed/" + suffix).c_str(), [shape, t](benchmark::State& s) {
                  runCompiled(s, [&] { return packedConv(shape); }, t);
                }),
                t);
    }
  }
  // Direct vs Winograd F(2×2, 3×3) vs F(4×4, 3×3) on ResNet-18's 3×3 layers.
  for (const ConvShape& shape : resnet18Winograd()) {
    for (int algo : {0, 2, 4})
      for (int t : {1, 2}) {
        std::string name = "conv_algo" + std::to_string(algo) + "/" + shape.name + "/threads:" + std::to_string(t);
        configure(benchmark::RegisterBenchmark(name.c_str(), [shape, algo, t](benchmark::State& s) {
                    runCompiled(s, [&] { return algo == 0 ? packedConv(shape) : winogradConv(shape, algo); }, t);
                  }),
                  t);
      }
  }
  for (const ConvShape& shape : resnet50Shapes()) {
    std::string suffix = std::string(shape.name) + "/threads:1";
    configure(benchmark::RegisterBenchmark(("conv_nchw/" + suffix).c_str(),
                                           [shape](benchmark::State& s) { runCompiled(s, [&] { return plainConv(shape); }, 1); }),
              1);
  }
  for (int64_t m : {1, 8})
    for (int t : {1, 2})
      configure(benchmark::RegisterBenchmark(("dense/m" + std::to_string(m) + "_2048to1000/threads:" + std::to_string(t)).c_str(),
                                             [m, t](benchmark::State& s) { runCompiled(s, [&] { return dense(m, 2048, 1000); }, t); }),
                t);
  // An exact GELU alone over the feed-forward activation of bert_encoder at batch 8 (1024 × 1024):
  // what the epilogue of dense_packed_gelu costs by itself.
  for (int t : {1, 2})
    configure(benchmark::RegisterBenchmark(("gelu/1024x1024/threads:" + std::to_string(t)).c_str(),
                                           [t](benchmark::State& s) {
                                             runCompiled(s, [] {
                                               Graph g;
                                               ValueId x = g.addInput("x", TensorType{DType::Float32, {1024, 1024}});
                                               g.setOutputs({g.add("gelu", {x})});
                                               runtime::Tensor input = filled({1024, 1024}, 0.f);
                                               for (int64_t i = 0; i < input.numel(); ++i)
                                                 input.data<float>()[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
                                               return compileGraph(g, {input}, 1024.0 * 1024);
                                             }, t);
                                           }),
              t);
  for (int64_t m : {128, 1024})
    for (auto [k, n] : {std::pair<int64_t, int64_t>{256, 1024}, {1024, 256}, {256, 256}})
      for (int t : {1, 2}) {
        std::string shape = "/m" + std::to_string(m) + "_" + std::to_string(k) + "to" + std::to_string(n) + "/threads:" + std::to_string(t);
        configure(benchmark::RegisterBenchmark(("dense" + shape).c_str(),
                                               [m, k, n, t](benchmark::State& s) { runCompiled(s, [&] { return dense(m, k, n); }, t); }),
                  t);
        configure(benchmark::RegisterBenchmark(("dense_packed" + shape).c_str(),
                                               [m, k, n, t](benchmark::State& s) { runCompiled(s, [&] { return dense(m, k, n, true); }, t); }),
                  t);
        if (k < n)  // the feed-forward layer's first half
          configure(benchmark::RegisterBenchmark(("dense_packed_gelu" + shape).c_str(),
                                                 [m, k, n, t](benchmark::State& s) {
                                                   runCompiled(s, [&] { return dense(m, k, n, true, true); }, t);
                                                 }),
                    t);
      }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  g_peakPerThread = measurePeak();
  std::printf("host: %s, %d f32 lanes; measured FMA peak %.1f GFLOP/s per thread\n", host().cpu.c_str(),
              hostOptions().vectorLanes, g_peakPerThread);
  benchmark::AddCustomContext("fma_peak_gflops_per_thread", std::to_string(g_peakPerThread));
  registerAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
