// The import doctor (app/doctor.h): surveys a model with the importer, prices its operators and
// writes the report as text or JSON; lists the supported operators.
#include "app/doctor.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "app/facade_internal.h"
#include "core/ir/op_registry.h"
#include "importers/onnx.h"
#include "importers/torch_export.h"
#include "importers/torchscript.h"
#include "profiler/op_cost.h"

namespace kiln::app {
namespace {

const char* statusName(importers::OpStatus s) {
  switch (s) {
    case importers::OpStatus::Supported: return "supported";
    case importers::OpStatus::Folded: return "folded";
    case importers::OpStatus::Unsupported: return "unsupported";
  }
  return "?";
}

/// FLOPs of one Kiln node (profiler/op_cost.h, plus the operators it does not price).
double nodeFlops(const core::Graph& graph, core::NodeId id) {
  const core::Node& node = graph.node(id);
  std::vector<core::TensorType> in, out;
  for (core::ValueId v : node.inputs) in.push_back(graph.type(v));
  for (core::ValueId v : node.outputs) out.push_back(graph.type(v));
  double flops = profiler::opFlops(node.op, node.attrs, in, out);
  if (flops == 0 && node.op == "conv_transpose2d")  // 2 · |x| · (O/groups · KH · KW)
    flops = 2.0 * static_cast<double>(in[0].numel()) * static_cast<double>(in[1].numel()) /
            static_cast<double>(std::max<int64_t>(1, in[1].shape[0]));
  return flops;
}

bool anyMessage(const DoctorReport& r, const std::string& text) {
  return std::any_of(r.ops.begin(), r.ops.end(), [&](const DoctorOp& op) {
    return op.status == "unsupported" && op.message.find(text) != std::string::npos;
  });
}

std::vector<std::string> hintsFor(const DoctorReport& r, bool controlFlow) {
  std::vector<std::string> hints;
  bool controlUnsupported = std::any_of(r.ops.begin(), r.ops.end(), [](const DoctorOp& op) {
    return op.status == "unsupported" && (op.kind == "prim::If" || op.kind == "prim::Loop");
  });
  if (controlUnsupported || anyMessage(r, "data-dependent"))
    hints.push_back("this model is scripted with control flow Kiln cannot compile (shapes that depend on the data): "
                    "trace it instead (torch.jit.trace(model.eval(), example_inputs)) so the branches taken for your "
                    "inputs are recorded");
  else if (controlFlow)
    hints.push_back("the model is scripted: branches and loops on shapes were resolved at import for these input "
                    "shapes (other shapes are imported again); those on tensor values compile to if/loop nodes");
  if (anyMessage(r, "training mode")) hints.push_back("call model.eval() before exporting: training-mode ops cannot be compiled");
  if (anyMessage(r, "boolean-mask"))
    hints.push_back("boolean-mask indexing has a data-dependent shape: use torch.where or masked_fill instead");
  if (anyMessage(r, "of dtype")) hints.push_back("convert the model to float32 (model.float()) before exporting");
  if (!r.complete)
    hints.push_back("libtorch could not reproduce the result of an unsupported operator, so the operators after it "
                    "are listed with the status of their kind, unverified");
  if (r.unsupported > 0)
    hints.push_back("Kiln cannot compile this model until the unsupported operators are removed or rewritten with "
                    "supported ones (kiln doctor --list-ops lists them)");
  return hints;
}

std::string flopsText(double flops) {
  char buf[32];
  if (flops >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GFLOP", flops / 1e9);
  else if (flops >= 1e6) std::snprintf(buf, sizeof buf, "%.2f MFLOP", flops / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f FLOP", flops);
  return buf;
}

/// ONNX: the importer stops at the first unsupported node; the report lists the ONNX nodes that
/// became Kiln operators (by their location "onnx:<node>") or the node that failed.
void diagnoseOnnx(const std::string& path, const importers::ImportOptions& io, DoctorReport& r) {
  r.format = "onnx";
  try {
    importers::ImportedModel model = importers::importOnnx(path, io);
    r.inputs = model.inputs;
    std::map<std::string, size_t> byLocation;
    for (core::NodeId n = 0; n < static_cast<core::NodeId>(model.graph.nodes().size()); ++n) {
      const core::Node& node = model.graph.node(n);
      auto [it, fresh] = byLocation.emplace(node.location, r.ops.size());
      if (fresh) {  // locations are "onnx:<op type>:<node name>"
        std::string opType = node.location.substr(5, node.location.find(':', 5) - 5);
        r.ops.push_back(DoctorOp{"onnx::" + opType, node.location, "supported", {}, {}, 0});
      }
      r.ops[it->second].kilnOps.push_back(node.op);
      r.ops[it->second].flops += nodeFlops(model.graph, n);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Unsupported) throw;
    std::string message = e.what();
    r.inputs = importers::readOnnxInputSpecs(path);
    r.ops.push_back(DoctorOp{message.substr(0, message.find(' ')), {}, "unsupported", message, {}, 0});
    r.complete = false;
  }
}

}  // namespace

Result<DoctorReport> diagnoseModel(const std::string& source, const OpenOptions& options) {
  return guarded<DoctorReport>(source, [&] {
    // A Python reference is traced first and its traced file examined.
    const std::string path = resolveSource(source).file;
    if (!std::filesystem::is_regular_file(path)) throw Error("no such file", ErrorKind::Io);
    importers::ImportOptions io;
    io.inputs = inputSpecsFor(path, options);
    DoctorReport r;
    r.model = source;
    bool controlFlow = false;
    if (importers::isOnnxFile(path)) {
      diagnoseOnnx(path, io, r);
    } else {
      bool program = importers::isTorchExportFile(path);
      importers::SurveyResult survey =
          program ? importers::surveyTorchExport(path, io) : importers::surveyTorchScript(path, io);
      r.format = program ? "torch.export" : "torchscript";
      r.inputs = survey.inputs;
      r.complete = survey.complete;
      controlFlow = survey.controlFlow;
      for (const importers::SurveyedOp& s : survey.ops) {
        DoctorOp op{s.kind, s.location, statusName(s.status), s.message, {}, 0};
        for (core::NodeId n : s.nodes) {
          op.kilnOps.push_back(survey.graph.node(n).op);
          op.flops += nodeFlops(survey.graph, n);
        }
        if (s.status == importers::OpStatus::Unsupported) op.flops = static_cast<double>(s.outputElements);
        r.ops.push_back(std::move(op));
      }
    }
    std::map<std::pair<std::string, std::string>, DoctorKindCount> kinds;
    for (const DoctorOp& op : r.ops) {
      r.totalFlops += op.flops;
      if (op.status != "unsupported") r.compiledFlops += op.flops;
      (op.status == "supported" ? r.supported : op.status == "folded" ? r.folded : r.unsupported)++;
      DoctorKindCount& k = kinds[{op.kind, op.status}];
      k.kind = op.kind;
      k.status = op.status;
      ++k.count;
      k.flops += op.flops;
    }
    for (auto& [key, k] : kinds) r.kinds.push_back(k);
    std::stable_sort(r.kinds.begin(), r.kinds.end(), [](const DoctorKindCount& a, const DoctorKindCount& b) {
      bool ua = a.status == "unsupported", ub = b.status == "unsupported";
      if (ua != ub) return ua;
      return a.count > b.count;
    });
    r.compiledShare = r.totalFlops > 0 ? r.compiledFlops / r.totalFlops : (r.unsupported ? 0.0 : 1.0);
    r.importable = r.unsupported == 0;
    r.hints = hintsFor(r, controlFlow);
    return r;
  });
}

std::string doctorText(const DoctorReport& r, bool allOps) {
  std::string out = "model: " + r.model + " (" + r.format + "), inputs";
  for (const InputSpec& in : r.inputs)
    out += " " + in.name + ":" + std::string(runtime::dtypeName(in.dtype)) + runtime::shapeString(in.shape);
  char line[256];
  std::snprintf(line, sizeof line, "\noperators: %d supported, %d folded at import, %d unsupported\n", r.supported,
                r.folded, r.unsupported);
  out += line;
  std::snprintf(line, sizeof line, "kiln compiles %.1f%% of the model's %s\n", 100.0 * r.compiledShare,
                flopsText(r.totalFlops).c_str());
  out += line;
  out += r.importable ? "status: importable\n" : "status: not importable\n";
  if (r.unsupported > 0) {
    out += "\nunsupported:\n";
    for (const DoctorOp& op : r.ops) {
      if (op.status != "unsupported") continue;
      out += "  " + op.message + "\n";  // "aten::foo is not supported[: why] (model.py:42)"
    }
  }
  out += "\nby kind:\n";
  std::snprintf(line, sizeof line, "  %-12s %6s %12s  %s\n", "status", "count", "MFLOP", "kind");
  out += line;
  for (const DoctorKindCount& k : r.kinds) {
    std::snprintf(line, sizeof line, "  %-12s %6d %12.3f  %s\n", k.status.c_str(), k.count, k.flops / 1e6, k.kind.c_str());
    out += line;
  }
  if (allOps) {
    out += "\nall operators:\n";
    for (const DoctorOp& op : r.ops) {
      std::string kiln;
      for (const std::string& k : op.kilnOps) kiln += (kiln.empty() ? " -> " : ", ") + k;
      out += "  " + op.status + "  " + op.kind + (op.location.empty() ? "" : " (" + op.location + ")") + kiln + "\n";
    }
  }
  if (!r.hints.empty()) {
    out += "\nhints:\n";
    for (const std::string& h : r.hints) out += "  - " + h + "\n";
  }
  return out;
}

std::string doctorJson(const DoctorReport& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["format"] = r.format;
  j["inputs"] = nlohmann::json::array();
  for (const InputSpec& in : r.inputs)
    j["inputs"].push_back({{"name", in.name}, {"dtype", std::string(runtime::dtypeName(in.dtype))}, {"shape", in.shape}});
  j["summary"] = {{"supported", r.supported},      {"folded", r.folded},
                  {"unsupported", r.unsupported},  {"total_flops", r.totalFlops},
                  {"compiled_flops", r.compiledFlops}, {"compiled_share", r.compiledShare},
                  {"importable", r.importable},    {"complete", r.complete}};
  j["ops"] = nlohmann::json::array();
  for (const DoctorOp& op : r.ops) {
    nlohmann::json o = {{"kind", op.kind}, {"status", op.status}, {"location", op.location}, {"flops", op.flops},
                        {"kiln_ops", op.kilnOps}};
    if (!op.message.empty()) o["message"] = op.message;
    j["ops"].push_back(std::move(o));
  }
  j["kinds"] = nlohmann::json::array();
  for (const DoctorKindCount& k : r.kinds)
    j["kinds"].push_back({{"kind", k.kind}, {"status", k.status}, {"count", k.count}, {"flops", k.flops}});
  j["hints"] = r.hints;
  return j.dump(2) + "\n";
}

SupportedOps supportedOps() {
  SupportedOps ops;
  for (const core::OpDef* def : core::allOps()) ops.kilnOps.emplace_back(def->name, def->summary);
  ops.torchScriptOps = importers::supportedTorchScriptOps();
  ops.onnxOps = importers::supportedOnnxOps();
  return ops;
}

namespace {

/// `a`, `b`, ... wrapped at 100 columns.
std::string codeList(const std::vector<std::string>& names) {
  std::string out, line;
  for (const std::string& k : names) {
    std::string item = "`" + k + "`";
    if (!line.empty() && line.size() + item.size() + 2 > 100) {
      out += line + ",\n";
      line.clear();
    }
    line += (line.empty() ? "" : ", ") + item;
  }
  return line.empty() ? out : out + line + "\n";
}

}  // namespace

std::string supportedOpsMarkdown(const SupportedOps& ops) {
  std::string out = "Kiln graph operators (" + std::to_string(ops.kilnOps.size()) + "):\n\n";
  for (const auto& [name, summary] : ops.kilnOps) out += "- `" + name + "`: " + summary + "\n";
  out += "\nTorchScript operators mapped by the importer (" + std::to_string(ops.torchScriptOps.size()) +
         "; `foo_` in-place variants included):\n\n" + codeList(ops.torchScriptOps);
  out += "\nONNX operators mapped by the importer (" + std::to_string(ops.onnxOps.size()) +
         "; all-constant shape arithmetic is folded at import):\n\n" + codeList(ops.onnxOps);
  return out;
}

}  // namespace kiln::app
