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
    EXPECT_TRUE(p->run) << p->name;
  }
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

TEST(Pipeline, DefaultPipelinesGrowWithTheLevel) {
  EXPECT_EQ(defaultPipelineText(0), "");
  EXPECT_EQ(defaultPipelineText(1),
            "simplify-inference,fold-constants,eliminate-common-subexpressions,eliminate-dead-code");
  EXPECT_EQ(defaultPipelineText(2), defaultPipelineText(1) + ",fold-pad-into-conv,fuse-ops");
  std::string o3 = defaultPipelineText(3);
  EXPECT_EQ(o3.rfind(defaultPipelineText(1), 0), 0u);
  EXPECT_LT(o3.find("fold-scale-axis"), o3.find("fuse-ops"));  // folding before fusion
  EXPECT_LT(o3.find("fold-pad-into-conv"), o3.find("alter-layout"));  // while convolutions are conv2d
  EXPECT_EQ(o3.substr(o3.size() - 8), "fuse-ops");
  std::string o4 = defaultPipelineText(4);  // O3 with merge-parallel before the final fusion
  EXPECT_EQ(o4, o3.substr(0, o3.size() - std::string(",eliminate-dead-code,fuse-ops").size()) +
                    ",merge-parallel,eliminate-dead-code,fuse-ops");
  EXPECT_THROW(defaultPipelineText(5), Error);
  EXPECT_THROW(defaultPipelineText(-1), Error);
  for (int level = 0; level <= kMaxOptLevel; ++level) {
    for (const PassInvocation& inv : defaultPipeline(level))
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
  PipelineResult r = PassManager(defaultPipeline(2), options).run(g);
  EXPECT_TRUE(r.cancelled);
  EXPECT_TRUE(r.passes.empty());
  EXPECT_TRUE(g == parseGraph(kSmall));
}

}  // namespace
}  // namespace kiln::core::passes
