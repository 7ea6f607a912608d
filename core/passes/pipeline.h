// Pass pipelines as text, shared by the CLI (`kiln ir --passes`), the tests and the workbench:
//
//   "simplify-inference,fold-constants,fuse-ops{max-depth=64}"
//
// A pipeline is a comma-separated list of registered pass names (core/passes/pass_registry.h),
// each optionally followed by `{key=value,...}` options. The default pipeline of each -O level
// is defined here:
//
//   O0  nothing (types and shapes are inferred when the graph is built)
//   O1  simplify-inference, fold-constants, eliminate-common-subexpressions, eliminate-dead-code
//   O2  O1 + fold-pad-into-conv (zero pads before a convolution become its padding) + fuse-ops
//   O3  O1 + fold-pad-into-conv + fold-scale-axis (batch-norm scale into conv/dense weights) + alter-layout (when
//       registered; weights are packed at compile time) + fold-constants + eliminate-dead-code,
//       then fuse-ops last (folding and layout before fusion)
//   O4  the O3 pipeline with merge-parallel (sibling conv2d/dense on one input become one wide
//       op) before its final eliminate-dead-code, fuse-ops; the façade also lets code
//       generation use fast math
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

inline constexpr int kMaxOptLevel = 4;

struct PassInvocation {
  const PassInfo* pass = nullptr;
  PassOptions options;  // every option of the pass, defaults filled in
  /// "fuse-ops{max-depth=64}": the name plus options that differ from the defaults.
  std::string text() const;
};

using Pipeline = std::vector<PassInvocation>;

/// Parses pipeline text. Throws kiln::Error (Usage) naming the problem and its position:
/// "pipeline 'fold,x': unknown pass 'fold' at column 1".
Pipeline parsePipeline(std::string_view text);
/// Canonical text: parsePipeline(printPipeline(p)) reproduces p.
std::string printPipeline(const Pipeline& pipeline);

/// The default pipeline text of opt level 0..kMaxOptLevel (Usage error otherwise) for a target
/// whose f32 vectors have `vectorLanes` lanes (alter-layout's channel block).
std::string defaultPipelineText(int optLevel, int vectorLanes = 8);
inline Pipeline defaultPipeline(int optLevel, int vectorLanes = 8) {
  return parsePipeline(defaultPipelineText(optLevel, vectorLanes));
}

}  // namespace kiln::core::passes
