// What the Workbench's tests share: the sample models' paths (KILN_MODELS_DIR, set by
// tests/CMakeLists.txt), a graph with nested control flow and synthetic compare rows for the
// models and views.
#pragma once

#include <QFile>
#include <QString>

#include <string>
#include <utility>
#include <vector>

#include "app/facade.h"
#include "app/measure.h"

namespace kiln::testing_support {

/// A sample model of the build: modelPath("ops/relu.pt").
inline QString modelPath(const char* relative) {
  return QStringLiteral(KILN_MODELS_DIR "/") + QLatin1String(relative);
}

/// Graph text (`.kir`, opened by app::openGraphText) whose loop body holds an if, whose else
/// region runs no call: the sample models have one level of control flow only.
inline const char* kNestedControlFlow = R"(graph(%x: f32[2,3], %n: i64[]) {
  %go = constant bool[] [1]
  %y, %y_1 = loop(%n, %go, %x, %n, %x) {carried=2} : f32[2,3], i64[] {
    graph(%i: i64[], %h: f32[2,3], %c: i64[], %x: f32[2,3]) {
      %t = tanh(%h) : f32[2,3]
      %s = add(%t, %x) : f32[2,3]
      %one = constant i64[] [1]
      %c1 = sub(%c, %one) : i64[]
      %z = constant i64[] [0]
      %more = greater(%c1, %z) : bool[]
      %b = if(%more, %s) : f32[2,3] {
        graph(%a: f32[2,3]) {
          %r = relu(%a) : f32[2,3]
          return %r
        }
        graph(%a: f32[2,3]) {
          return %a
        }
      }
      return %more, %b, %c1
    }
  }
  %out = mul(%y, %y) : f32[2,3]
  return %out, %y_1
}
)";

/// A quick in-process profile's options (3 repeats, nothing stored), for tests that need a real
/// profile's rows rather than its figures.
inline app::ProfileOptions quickProfileOptions(const app::BuildOptions& build = {}) {
  app::ProfileOptions p;
  p.build = build;
  p.repeat = 3;
  p.warmup = 1;
  p.minRepeatMs = 0;
  p.store.enabled = false;
  return p;
}

/// Writes kNestedControlFlow to `dir`/nested.kir and returns its path.
inline QString writeNestedControlFlow(const QString& dir) {
  QString path = dir + QStringLiteral("/nested.kir");
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return {};
  f.write(kNestedControlFlow);
  return path;
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
