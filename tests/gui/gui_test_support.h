// What the Workbench's tests share: the sample models' paths (KILN_MODELS_DIR, set by
// tests/CMakeLists.txt) and synthetic compare rows for the models and views.
#pragma once

#include <QString>

#include <string>
#include <utility>
#include <vector>

#include "app/facade.h"

namespace kiln::testing_support {

/// A sample model of the build: modelPath("ops/relu.pt").
inline QString modelPath(const char* relative) {
  return QStringLiteral(KILN_MODELS_DIR "/") + QLatin1String(relative);
}

/// A backend that ran: its samples, its worker processes' medians and whether they disagree.
inline app::BackendResult ranBackend(const std::string& backend, std::vector<double> samples,
                                     std::vector<double> processes, bool disagree, double maxAbsDiff = 0) {
  app::BackendResult r;
  r.backend = backend;
  r.timing = profiler::timingFromSamples(std::move(samples));
  r.processMedianMs = std::move(processes);
  r.processesDisagree = disagree;
  r.maxAbsDiff = maxAbsDiff;
  return r;
}

/// A backend that did not run: its status ("timeout", "failed", ...) and why.
inline app::BackendResult failedBackend(const std::string& backend, const std::string& status,
                                        const std::string& reason) {
  app::BackendResult r;
  r.backend = backend;
  r.available = false;
  r.status = status;
  r.reason = reason;
  return r;
}

}  // namespace kiln::testing_support
