#include "core/compile.h"

#include <chrono>
#include <map>

#include "core/passes/pack_dense.h"
#include "core/tir/verify.h"
#include "runtime/error.h"

namespace kiln::core {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The pipeline the options ask for, bounds checks appended when requested.
passes::Pipeline pipelineFor(const CompileOptions& options) {
  std::string text = options.passes ? *options.passes : optLevelPipelineText(options.optLevel, options.lower.vectorLanes, options.lower.winograd);
  passes::Pipeline pipeline = passes::parsePipeline(text);
  if (options.boundsCheck) {
    bool present = false;
    for (const auto& inv : pipeline) present |= inv.pass->name == "bounds-check";
    if (!present) pipeline.push_back(passes::parsePipeline("bounds-check").front());
  }
  return pipeline;
}

/// The graph part and the loop-IR part of a pipeline (parsePipeline keeps graph passes first).
std::pair<passes::Pipeline, passes::Pipeline> split(const passes::Pipeline& pipeline) {
  std::pair<passes::Pipeline, passes::Pipeline> parts;
  for (const auto& inv : pipeline)
    (inv.pass->kind == passes::PassKind::Graph ? parts.first : parts.second).push_back(inv);
  return parts;
}

OptimizedGraph runGraphPasses(Graph graph, const CompileOptions& options, const passes::Pipeline& pipeline);

/// The sub-graphs of if/loop nodes go through the same graph passes, as graphs of their own
/// (their inputs and output types stay; what the passes did is not reported per region). They go
/// first, so a branch or loop body that inline-control-flow inlines arrives optimized.
void optimizeRegions(Graph& graph, const CompileOptions& options, const passes::Pipeline& pipeline) {
  for (NodeId n = 0; n < static_cast<NodeId>(graph.nodes().size()); ++n) {
    if (graph.node(n).regions.empty()) continue;
    std::vector<Region> optimized;
    for (const Region& r : graph.node(n).regions)
      optimized.push_back(std::make_shared<const Graph>(runGraphPasses(*r, options, pipeline).graph));
    graph.setRegions(n, std::move(optimized));
  }
}

OptimizedGraph runGraphPasses(Graph graph, const CompileOptions& options, const passes::Pipeline& pipeline) {
  passes::PassManagerOptions pm;
  pm.verify = options.verify;
  pm.keepIr = options.keepIr;
  pm.skip = options.skipPasses;
  pm.cancel = options.cancel;
  pm.schedules = options.lower.schedules;
  OptimizedGraph o{std::move(graph), {}, passes::printPipeline(pipeline)};
  optimizeRegions(o.graph, options, pipeline);
  o.passes = passes::PassManager(split(pipeline).first, pm).run(o.graph);
  return o;
}

}  // namespace

std::string optLevelPipelineText(int optLevel, int vectorLanes, int winograd) {
  if (optLevel < 0 || optLevel > passes::kMaxOptLevel)
    throw Error("opt level must be 0-" + std::to_string(passes::kMaxOptLevel) + ", got " + std::to_string(optLevel),
                ErrorKind::Usage);
  const std::string o1 =
      "simplify-inference,fold-constants,inline-control-flow,eliminate-common-subexpressions,eliminate-dead-code";
  if (optLevel == 0) return "";
  // pool-to-mean runs late (at O3 and O4 after alter-layout, which packs the pools it can).
  if (optLevel == 1) return o1 + ",pool-to-mean";
  if (optLevel == 2) return o1 + ",fold-pad-into-conv,pool-to-mean,fuse-ops";
  std::string o3 = o1 + ",fold-pad-into-conv,fold-scale-axis";
  if (const passes::PassInfo* alter = passes::findPass("alter-layout")) {
    std::map<std::string, std::string> options;
    if (alter->findOption("lanes")) options["lanes"] = std::to_string(vectorLanes);
    if (alter->findOption("winograd")) options["winograd"] = std::to_string(winograd);  // 4, the default, is not printed
    o3 += "," + passes::PassInvocation{alter, alter->makeOptions(options)}.text() + ",fold-constants";
  }
  o3 += ",qnn-alter-layout";  // a no-op without quantized convolutions
  std::string packDense;
  if (const passes::PassInfo* pack = passes::findPass("pack-dense")) {
    std::map<std::string, std::string> options{
        {"lanes", std::to_string(vectorLanes)},
        {"max-vectors", std::to_string(passes::packDenseMaxVectors(vectorLanes))}};
    packDense = "," + passes::PassInvocation{pack, pack->makeOptions(options)}.text();
  }
  if (optLevel == 3) return o3 + packDense + ",eliminate-dead-code,pool-to-mean,fuse-ops";
  // O4: merge-parallel once weights are folded and packed, before fusion fuses the slices (and
  // before pack-dense, which packs the merged dense).
  return o3 + ",merge-parallel" + packDense + ",eliminate-dead-code,pool-to-mean,fuse-ops,fast-math";
}

OptimizedGraph optimizeGraph(Graph graph, const CompileOptions& options) {
  return runGraphPasses(std::move(graph), options, pipelineFor(options));
}

void verifyKernels(const std::vector<tir::PrimFunc>& kernels, const std::string& when) {
  for (const tir::PrimFunc& f : kernels) tir::verifyPrimFuncOrThrow(f, when);
}

std::vector<CompileStep> runLoopPasses(std::vector<tir::PrimFunc>& kernels, const passes::Pipeline& pipeline,
                                       const std::set<std::string>& skip, bool verify) {
  std::vector<CompileStep> steps;
  for (const passes::PassInvocation& inv : pipeline) {
    if (inv.pass->kind != passes::PassKind::Loop)
      throw Error("'" + inv.pass->name + "' is a graph pass: it runs before lowering, not on kernels",
                  ErrorKind::Usage);
    CompileStep step{inv.text(), 0, ""};
    if (skip.count(inv.pass->name)) {
      step.detail = "skipped";
      steps.push_back(std::move(step));
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    int changed = 0;
    for (tir::PrimFunc& f : kernels) changed += inv.pass->runLoop(f, inv.options);
    if (verify) verifyKernels(kernels, "after pass " + inv.text());
    step.seconds = secondsSince(start);
    step.detail = std::to_string(changed) + " of " + std::to_string(kernels.size()) + " kernels changed";
    steps.push_back(std::move(step));
  }
  return steps;
}

CompiledKernels compile(Graph graph, const CompileOptions& options) {
  passes::Pipeline pipeline = pipelineFor(options);
  CompiledKernels c;

  auto start = std::chrono::steady_clock::now();
  OptimizedGraph optimized = runGraphPasses(std::move(graph), options, pipeline);
  c.graph = std::move(optimized.graph);
  c.passes = std::move(optimized.passes);
  c.pipeline = std::move(optimized.pipeline);
  c.steps.push_back({"graph passes", secondsSince(start),
                     std::to_string(c.passes.passes.size()) + " passes, " + std::to_string(c.passes.changedCount()) +
                         " changed the graph"});

  start = std::chrono::steady_clock::now();
  c.module = lower::lowerGraph(c.graph, options.lower);
  if (options.verify) verifyKernels(c.module.funcs, "after lowering");
  c.steps.push_back({"lower", secondsSince(start),
                     std::to_string(c.module.funcs.size()) + " kernels, " +
                         std::to_string(c.module.plan.calls.size()) + " calls"});

  std::vector<CompileStep> loopSteps = runLoopPasses(c.module.funcs, split(pipeline).second, options.skipPasses, options.verify);
  c.steps.insert(c.steps.end(), loopSteps.begin(), loopSteps.end());
  return c;
}

}  // namespace kiln::core
