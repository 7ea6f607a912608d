// The pass registry, pipeline text and the pass manager's instrumentation.
#include <gtest/gtest.h>

#include <atomic>

#include "runtime/error.h"
#include "tests/unit/core/passes_test_util.h"

namespace kiln::core::passes {
namespace {

std::string usageError(const std::string& pipeline) {
  try {
    parsePipeline(pipeline);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    return e.what();
  }
  return "(parsed)";
}

TEST(PassRegistry, ListsEveryPassWithSummaryAndLevel) {
  std::vector<std::string> names;
  for (const PassInfo* p : allPasses()) {
    names.push_back(p->name);
    EXPECT_FALSE(p->summary.empty()) << p->name;
    EXPECT_GE(p->minOptLevel, 1) << p->name;
    if (p->kind == PassKind::Graph) EXPECT_TRUE(p->run && !p->runLoop) << p->name;
    else EXPECT_TRUE(p->runLoop && !p->run) << p->name;
  }
  EXPECT_EQ(findPass("fast-math")->kind, PassKind::Loop);
  EXPECT_EQ(findPass("bounds-check")->kind, PassKind::Loop);
  for (const char* expected : {"simplify-inference", "fold-constants", "fold-scale-axis",
                               "eliminate-common-subexpressions", "eliminate-dead-code", "fuse-ops"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  EXPECT_EQ(findPass("nonsense"), nullptr);
  EXPECT_EQ(findPass("fuse-ops")->minOptLevel, 2);
  EXPECT_NE(describePasses().find("fuse-ops"), std::string::npos);
}

TEST(PassRegistry, OptionsHaveTypedDefaults) {
  const PassInfo* fuse = findPass("fuse-ops");
  PassOptions defaults = fuse->makeOptions();
  EXPECT_EQ(defaults.getInt("max-depth"), 256);
  EXPECT_EQ(fuse->makeOptions({{"max-depth", "8"}}).getInt("max-depth"), 8);
  EXPECT_THROW(fuse->makeOptions({{"max-depth", "eight"}}), Error);
  EXPECT_THROW(fuse->makeOptions({{"depth", "8"}}), Error);
  EXPECT_THROW(defaults.getInt("nope"), InternalError);
}

TEST(Pipeline, ParsesNamesAndOptions) {
  Pipeline p =
      parsePipeline(" fold-constants{max-elements=16}, eliminate-dead-code ,fuse-ops{max-depth=64} ");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].pass->name, "fold-constants");
  EXPECT_EQ(p[0].options.getInt("max-elements"), 16);
  EXPECT_EQ(p[1].pass->name, "eliminate-dead-code");
  EXPECT_EQ(p[2].options.getInt("max-depth"), 64);
  EXPECT_EQ(printPipeline(p), "fold-constants{max-elements=16},eliminate-dead-code,fuse-ops{max-depth=64}");
  EXPECT_EQ(printPipeline(parsePipeline(printPipeline(p))), printPipeline(p));
  // Default-valued options are not printed; empty braces are allowed.
  EXPECT_EQ(printPipeline(parsePipeline("fuse-ops{max-depth=256},fuse-ops{}")), "fuse-ops,fuse-ops");
  EXPECT_TRUE(parsePipeline("").empty());
  EXPECT_TRUE(parsePipeline("   ").empty());
}

TEST(Pipeline, ReportsErrorsWithTheirColumn) {
  EXPECT_EQ(
      usageError("fold-constants,fuse"), "pipeline 'fold-constants,fuse': unknown pass 'fuse' (passes: " +
                                             [] {
                                               std::string known;
                                               for (const PassInfo* p : allPasses())
                                                 known += (known.empty() ? "" : ", ") + p->name;
                                               return known;
                                             }() +
                                             ") at column 16");
  EXPECT_EQ(
      usageError("fuse-ops{max-depth=x}"),
      "pipeline 'fuse-ops{max-depth=x}': fuse-ops: option 'max-depth' expects an int, got 'x' at column 1");
  EXPECT_EQ(
      usageError("fuse-ops{depth=3}"),
      "pipeline 'fuse-ops{depth=3}': fuse-ops: unknown option 'depth' (options: max-depth) at column 1");
  EXPECT_EQ(usageError("fuse-ops{max-depth=3"),
            "pipeline 'fuse-ops{max-depth=3': expected ',' or '}' after an option at column 21");
  EXPECT_EQ(usageError("fuse-ops,,"), "pipeline 'fuse-ops,,': expected a name at column 10");
  EXPECT_EQ(usageError("fuse-ops fold-constants"),
            "pipeline 'fuse-ops fold-constants': expected ',' at column 10");
}

TEST(Pipeline, LoopIrPassesComeAfterTheGraphPasses) {
  EXPECT_EQ(printPipeline(parsePipeline("fold-constants,fuse-ops,fast-math,bounds-check")),
            "fold-constants,fuse-ops,fast-math,bounds-check");
  EXPECT_EQ(usageError("fast-math,fuse-ops"),
            "pipeline 'fast-math,fuse-ops': graph pass 'fuse-ops' after loop-IR pass 'fast-math' (graph passes "
            "run first, before lowering) at column 11");
  Graph g = parseGraph("graph(%x: f32[2]) {\n  %y = relu(%x) : f32[2]\n  return %y\n}");
  EXPECT_THROW(PassManager(parsePipeline("fast-math")).run(g), Error);
}

// The compile driver (core/compile.h): named steps, loop-IR passes on every kernel, the level's
// loop-IR part, bounds checks on request.
TEST(CompileDriver, RunsGraphPassesLoweringAndLoopIrPassesAsSteps) {
  const char* text = R"(graph(%x: f32[1,4,8,8], %w: f32[8,4,3,3]) {
    %c = conv2d(%x, %w) {stride=[1,1], padding=[1,1], dilation=[1,1], groups=1} : f32[1,8,8,8]
    %r = relu(%c) : f32[1,8,8,8]
    %m = mean(%r) {axes=[2,3], keepdims=0} : f32[1,8]
    return %m
  })";
  CompileOptions options;
  options.passes = "fold-constants,fuse-ops,fast-math";
  CompiledKernels c = compile(parseGraph(text), options);
  ASSERT_EQ(c.steps.size(), 3u);
  EXPECT_EQ(c.steps[0].name, "graph passes");
  EXPECT_EQ(c.steps[1].name, "lower");
  EXPECT_EQ(c.steps[2].name, "fast-math");
  EXPECT_EQ(c.pipeline, "fold-constants,fuse-ops,fast-math");
  ASSERT_FALSE(c.module.funcs.empty());
  for (const auto& f : c.module.funcs) EXPECT_EQ(f.attrs.at("fast_math"), "reassoc,nsz,contract,afn") << f.name;
  EXPECT_EQ(c.passes.passes.size(), 2u);  // the graph part only

  // O3 has no loop-IR pass; O4 ends with fast-math; --bounds-check appends its pass.
  options.passes.reset();
  options.optLevel = 3;
  c = compile(parseGraph(text), options);
  EXPECT_EQ(c.steps.size(), 2u);
  for (const auto& f : c.module.funcs) EXPECT_EQ(f.attrs.count("fast_math"), 0u) << f.name;
  options.optLevel = 4;
  options.boundsCheck = true;
  c = compile(parseGraph(text), options);
  ASSERT_EQ(c.steps.size(), 4u);
  EXPECT_EQ(c.steps[3].name, "bounds-check");
  for (const auto& f : c.module.funcs) {
    EXPECT_EQ(f.attrs.count("fast_math"), 1u) << f.name;
    EXPECT_EQ(f.attrs.count("bounds_check"), 1u) << f.name;
  }
  // A skipped loop-IR pass is a step that did nothing.
  options.skipPasses = {"fast-math"};
  c = compile(parseGraph(text), options);
  EXPECT_EQ(c.steps[2].detail, "skipped");
  for (const auto& f : c.module.funcs) EXPECT_EQ(f.attrs.count("fast_math"), 0u) << f.name;
  // A graph pass handed to the loop-IR runner is refused.
  EXPECT_THROW(runLoopPasses(c.module.funcs, parsePipeline("fuse-ops")), Error);
}

TEST(Pipeline, DefaultPipelinesGrowWithTheLevel) {
  EXPECT_EQ(optLevelPipelineText(0), "");
  const std::string o1 =
      "simplify-inference,fold-constants,inline-control-flow,eliminate-common-subexpressions,eliminate-dead-"
      "code";
  EXPECT_EQ(optLevelPipelineText(1), o1 + ",pool-to-mean");
  EXPECT_EQ(optLevelPipelineText(2), o1 + ",fold-pad-into-conv,pool-to-mean,fuse-ops");
  std::string o3 = optLevelPipelineText(3);
  EXPECT_EQ(o3.rfind(o1, 0), 0u);
  EXPECT_LT(o3.find("alter-layout"), o3.find("pool-to-mean"));  // the pools left on NCHW only
  EXPECT_LT(o3.find("fold-scale-axis"), o3.find("fuse-ops"));  // folding before fusion
  EXPECT_LT(o3.find("fold-pad-into-conv"), o3.find("alter-layout"));  // while convolutions are conv2d
  EXPECT_EQ(o3.substr(o3.size() - 8), "fuse-ops");
  EXPECT_NE(o3.find(",pack-dense,eliminate-dead-code,pool-to-mean,fuse-ops"), std::string::npos) << o3;
  EXPECT_NE(optLevelPipelineText(3, 16).find(",pack-dense{lanes=16,max-vectors=4},"), std::string::npos);
  // O4: O3 with merge-parallel before packing and the final fusion, and fast math in the loop IR.
  std::string o4 = optLevelPipelineText(4);
  EXPECT_EQ(
      o4,
      o3.substr(0, o3.size() - std::string(",pack-dense,eliminate-dead-code,pool-to-mean,fuse-ops").size()) +
          ",merge-parallel,pack-dense,eliminate-dead-code,pool-to-mean,fuse-ops,fast-math");
  EXPECT_THROW(optLevelPipelineText(5), Error);
  EXPECT_THROW(optLevelPipelineText(-1), Error);
  // --winograd: the default tile (4) is not written; another is alter-layout's option.
  EXPECT_EQ(optLevelPipelineText(3, 8, 4), optLevelPipelineText(3, 8));
  EXPECT_NE(optLevelPipelineText(3, 8, 2).find("alter-layout{winograd=2}"), std::string::npos)
      << optLevelPipelineText(3, 8, 2);
  EXPECT_NE(optLevelPipelineText(4, 16, 0).find("alter-layout{lanes=16,winograd=0}"), std::string::npos);
  for (int level = 0; level <= kMaxOptLevel; ++level) {
    for (const PassInvocation& inv : parsePipeline(optLevelPipelineText(level)))
      EXPECT_LE(inv.pass->minOptLevel, level) << inv.pass->name;
  }
}

const char* kSmall = R"(graph(%x: f32[2,3]) {
  %c = constant f32[3] [1, 2, 3]
  %two = constant f32[] [2]
  %c2 = mul(%c, %two) : f32[3]
  %dead = neg(%x) : f32[2,3]
  %y = add(%x, %c2) : f32[2,3]
  %z = relu(%y) : f32[2,3]
  return %z
})";

TEST(PassManager, InstrumentsEveryPass) {
  Graph g = parseGraph(kSmall);
  PassManagerOptions options;
  options.keepIr = true;
  options.verify = true;
  PipelineResult r =
      PassManager(parsePipeline("fold-constants,eliminate-dead-code,eliminate-dead-code,fuse-ops"), options)
          .run(g);
  ASSERT_EQ(r.passes.size(), 4u);
  EXPECT_EQ(r.passes[0].name, "fold-constants");
  EXPECT_TRUE(r.passes[0].changed);
  EXPECT_EQ(r.passes[0].counters.at("folded"), 1);
  EXPECT_EQ(r.passes[0].nodesBefore, 4);
  EXPECT_EQ(r.passes[0].nodesAfter, 3);
  EXPECT_NE(r.passes[0].irAfter.find("%c2 = constant f32[3] [2, 4, 6]"), std::string::npos);
  EXPECT_TRUE(r.passes[1].changed);
  EXPECT_EQ(r.passes[1].counters.at("nodes-removed"), 1);
  EXPECT_FALSE(r.passes[2].changed);
  EXPECT_EQ(r.passes[2].irAfter, "");  // IR is kept only when the pass changed the graph
  EXPECT_TRUE(r.passes[3].changed);
  EXPECT_EQ(r.changedCount(), 3);
  EXPECT_FALSE(r.cancelled);
  for (const PassRecord& p : r.passes) EXPECT_GE(p.seconds, 0.0);
  EXPECT_GE(r.seconds, 0.0);
  EXPECT_NE(formatPipelineResult(r).find("fold-constants"), std::string::npos);
}

TEST(PassManager, SkipsPassesByName) {
  Graph g = parseGraph(kSmall);
  PassManagerOptions options;
  options.skip = {"fold-constants"};
  PipelineResult r = PassManager(parsePipeline("fold-constants,eliminate-dead-code"), options).run(g);
  ASSERT_EQ(r.passes.size(), 2u);
  EXPECT_TRUE(r.passes[0].skipped);
  EXPECT_FALSE(r.passes[0].changed);
  EXPECT_TRUE(r.passes[1].changed);
  EXPECT_EQ(g.nodes().size(), 3u);  // mul kept, neg removed
}

TEST(PassManager, StopsWhenCancelled) {
  Graph g = parseGraph(kSmall);
  std::atomic<bool> cancel{true};
  PassManagerOptions options;
  options.cancel = &cancel;
  PipelineResult r = PassManager(parsePipeline(optLevelPipelineText(2)), options).run(g);
  EXPECT_TRUE(r.cancelled);
  EXPECT_TRUE(r.passes.empty());
  EXPECT_TRUE(g == parseGraph(kSmall));
}

}  // namespace
}  // namespace kiln::core::passes
