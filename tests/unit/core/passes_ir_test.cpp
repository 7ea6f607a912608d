// Fused groups in the graph IR (print/parse round trip, construction checks) and the graph
// verifier.
#include <gtest/gtest.h>

#include "runtime/error.h"
#include "tests/unit/core/passes_test_util.h"

namespace kiln::core::passes {
namespace {

const char* kFused = R"(graph(%x: f32[1,2,4,4], %r: f32[1,2,4,4]) {
  %w = constant f32[2,2,1,1] [1, 0, 0, 1]
  %b = constant f32[2] [0.5, -0.5]
  group @fused_conv2d_add_relu_0 {
    %conv = conv2d(%x, %w, %b) {groups=1} : f32[1,2,4,4]
    %add = add(%conv, %r) : f32[1,2,4,4] loc("m.py:3")
    %relu = relu(%add) : f32[1,2,4,4]
  }
  %sig = sigmoid(%relu) : f32[1,2,4,4]
  group @fused_mul_tanh_0 {
    %mul = mul(%sig, %x) : f32[1,2,4,4]
    %tanh = tanh(%mul) : f32[1,2,4,4]
  }
  return %tanh
}
)";

TEST(FusedGroupText, PrintParsePrintIsIdentity) {
  Graph g = parseGraph(kFused);
  EXPECT_EQ(printGraph(g), kFused);
  ASSERT_EQ(g.groups().size(), 2u);
  EXPECT_EQ(g.groups()[0], (FusedGroup{"fused_conv2d_add_relu_0", 0, 3}));
  EXPECT_EQ(g.groups()[1], (FusedGroup{"fused_mul_tanh_0", 4, 6}));
  EXPECT_EQ(g.node(1).group, 0);
  EXPECT_EQ(g.node(3).group, -1);
  EXPECT_EQ(g.node(5).group, 1);
  EXPECT_TRUE(parseGraph(printGraph(g)) == g);
  EXPECT_EQ(verifyGraph(g), std::vector<std::string>{});
}

TEST(FusedGroupText, EqualityComparesGroups) {
  Graph a = parseGraph(kFused);
  std::string text = kFused;
  text.replace(text.find("fused_mul_tanh_0"), 16, "fused_mul_tanh_9");
  EXPECT_FALSE(parseGraph(text) == a);
}

TEST(FusedGroupText, ParseErrors) {
  auto parseError = [](const std::string& text) {
    try {
      parseGraph(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(parsed)");
  };
  EXPECT_EQ(parseError("graph(%x: f32[2]) {\n  group @g {\n  }\n  return %x\n}"),
            "line 3:4: group @g has no nodes");
  EXPECT_EQ(parseError("graph(%x: f32[2]) {\n  group @g {\n    %a = relu(%x) : f32[2]\n  }\n"
                       "  group @g {\n    %b = relu(%a) : f32[2]\n  }\n  return %b\n}"),
            "line 7:4: group @g is defined twice");
  EXPECT_EQ(parseError("graph(%x: f32[2]) {\n  group g {\n  }\n  return %x\n}"), "line 2:9: expected '@'");
}

TEST(FusedGroupText, AddGroupChecksItsRange) {
  Graph g =
      parseGraph("graph(%x: f32[2]) {\n  %a = relu(%x) : f32[2]\n  %b = relu(%a) : f32[2]\n  return %b\n}");
  EXPECT_THROW(g.addGroup("g", 1, 1), InternalError);
  EXPECT_THROW(g.addGroup("g", 0, 3), InternalError);
  EXPECT_EQ(g.addGroup("g", 0, 2), 0);
  EXPECT_THROW(g.addGroup("h", 1, 2), InternalError);  // already grouped
}

TEST(Verifier, AcceptsValidGraphs) { EXPECT_EQ(verifyGraph(parseGraph(kFused)), std::vector<std::string>{}); }

TEST(Verifier, RejectsAnEscapingGroupIntermediate) {
  // %add is used outside the group although it is not the group's root.
  Graph g = parseGraph(R"(graph(%x: f32[4]) {
  group @g {
    %add = add(%x, %x) : f32[4]
    %relu = relu(%add) : f32[4]
  }
  %neg = neg(%add) : f32[4]
  return %relu, %neg
})");
  EXPECT_EQ(verifyGraph(g),
            (std::vector<std::string>{"node 2 (%neg = neg) uses %add, an intermediate of group @g"}));
  EXPECT_THROW(verifyGraphOrThrow(g, "after pass x"), InternalError);
}

TEST(Verifier, RejectsAGroupIntermediateThatIsAGraphOutput) {
  Graph g = parseGraph(R"(graph(%x: f32[4]) {
  group @g {
    %add = add(%x, %x) : f32[4]
    %relu = relu(%add) : f32[4]
  }
  return %relu, %add
})");
  EXPECT_EQ(verifyGraph(g),
            (std::vector<std::string>{
                "node 0 (%add = add) is not the root of @g but its output is a graph output"}));
}

}  // namespace
}  // namespace kiln::core::passes
