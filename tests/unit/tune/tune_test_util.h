// Shared by the tuning tests: a small tuning loop's options.
#pragma once

#include <string>

#include "core/tune/tune_loop.h"

namespace kiln::core::tune::testing {

/// The random tuner in batches of 3, a confirmation round of the 2 fastest and the default,
/// target "llvm", every record stamped `now`.
inline TuneLoopOptions smallLoopOptions(std::string now) {
  TuneLoopOptions options;
  options.tuner = "random";
  options.batchSize = 3;
  options.confirmTop = 2;
  options.target = "llvm";
  options.now = [now] { return now; };
  return options;
}

}  // namespace kiln::core::tune::testing
