// The import doctor (`kiln doctor MODEL`, issue 8): what Kiln can and cannot compile in a model,
// before anyone waits for a build. Every operator node of the model is listed with its status —
// supported (mapped onto Kiln operators), folded (evaluated at import: shape arithmetic, constant
// branches) or unsupported (with the importer's message) — together with the share of the model's
// FLOPs Kiln compiles and hints on how to get the rest in (trace instead of script, eval mode, ...).
//
// The import continues past unsupported nodes: libtorch runs the model once and its values stand
// in for the outputs Kiln could not compute, so one report names every problem, not just the
// first. FLOPs follow profiler/op_cost.h for Kiln's operators; an unsupported node counts one
// FLOP per output element (a lower bound).
#pragma once

#include <string>
#include <vector>

#include "app/facade.h"

namespace kiln::app {

struct DoctorOp {
  std::string kind;      // "aten::conv2d"
  std::string location;  // "model.py:42"
  std::string status;    // "supported" | "folded" | "unsupported"
  std::string message;   // why unsupported (one line)
  std::vector<std::string> kilnOps;  // the Kiln operators it became
  double flops = 0;
};

/// One row per (kind, status): how often it occurs.
struct DoctorKindCount {
  std::string kind;
  std::string status;
  int count = 0;
  double flops = 0;
};

struct DoctorReport {
  std::string model;
  std::string format;  // "torchscript"
  std::vector<InputSpec> inputs;
  std::vector<DoctorOp> ops;            // every operator node, in graph order
  std::vector<DoctorKindCount> kinds;   // by kind, unsupported first, then by count
  int supported = 0, folded = 0, unsupported = 0;
  double totalFlops = 0, compiledFlops = 0;
  double compiledShare = 1.0;  // compiledFlops / totalFlops (1 when the model has no FLOPs)
  bool complete = true;        // false: the walk stopped early (see importers/torchscript.h)
  bool importable = true;      // true when nothing is unsupported
  std::vector<std::string> hints;
};

Result<DoctorReport> diagnoseModel(const std::string& path, const OpenOptions& options = {});

/// The report as text (summary, unsupported operators with locations, the per-kind table, hints)
/// and as JSON.
std::string doctorText(const DoctorReport& report, bool allOps = false);
std::string doctorJson(const DoctorReport& report);

struct SupportedOps {
  std::vector<std::pair<std::string, std::string>> kilnOps;  // name, summary (op registry)
  std::vector<std::string> torchScriptOps;                    // aten:: kinds the importer maps
  std::vector<std::string> onnxOps;                           // ONNX op types the importer maps
};
SupportedOps supportedOps();
/// Markdown for the README's supported-operator section.
std::string supportedOpsMarkdown(const SupportedOps& ops);

}  // namespace kiln::app
