// Pass pipelines as text, shared by the CLI (`kiln ir --passes`), the tests and the workbench:
//
//   "simplify-inference,fold-constants,fuse-ops{max-depth=64},fast-math"
//
// A pipeline is a comma-separated list of registered pass names (core/passes/pass_registry.h),
// graph passes first, then loop-IR passes, each optionally followed by `{key=value,...}` options.
// The default pipeline of each -O level is defined by the compile driver (core/compile.h).
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

}  // namespace kiln::core::passes
