// TorchScript import: a `.pt` file saved by torch.jit.save → Kiln graph IR.
//
// The module is loaded with libtorch, put in eval mode, frozen without numeric optimizations
// (so Kiln's own passes do the folding), inlined, and its aten::/prim:: nodes are mapped onto
// Kiln's canonical operators (core/ir/op_registry.h). Weights become bound constants; integer,
// list and shape arithmetic is evaluated at import time against the static input shapes.
// Anything unsupported raises kiln::Error (Unsupported) naming the aten:: operator and its
// source location. libtorch headers stay inside importers/*.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/ir/graph.h"

namespace torch::jit {
struct Graph;
struct Module;
struct Node;
}  // namespace torch::jit

namespace kiln::importers {

struct InputSpec {
  std::string name;
  runtime::DType dtype = runtime::DType::Float32;
  runtime::Shape shape;
};

struct ImportOptions {
  /// Input shapes. Empty: read them from the file's "kiln.json" extra file (written by
  /// resources/models/export_models.py); failing that, from complete tensor types in the graph.
  std::vector<InputSpec> inputs;
};

struct ImportedModel {
  core::Graph graph;
  std::vector<InputSpec> inputs;
  std::string description;  // from kiln.json "source", if any
};

/// Throws kiln::Error: InvalidModel for unreadable files, Unsupported for unsupported constructs.
ImportedModel importTorchScript(const std::string& path, const ImportOptions& options = {});

/// Input specs stored in the file's kiln.json, or empty when absent.
std::vector<InputSpec> readInputSpecs(const std::string& path);

/// What a TorchScript file says about its forward arguments, without importing it.
struct InputSignature {
  std::vector<std::string> names;  // the forward arguments after self, in order
  /// From kiln.json, else from complete tensor types in the graph; empty when the file records no
  /// shapes (a module traced and saved by the user): they must then be given (ImportOptions::inputs).
  std::vector<InputSpec> specs;
};
/// Loads the archive (no freezing). Throws kiln::Error like importTorchScript for a bad file.
InputSignature readInputSignature(const std::string& path);

// ---- the import doctor's view (app/doctor.h) ---------------------------------------------------

enum class OpStatus {
  Supported,    // mapped onto Kiln operators
  Folded,       // evaluated at import time (shape arithmetic, constants, import-time branches)
  Unsupported,  // no mapping, or an argument combination Kiln cannot express
};

/// One aten:: (or failing prim::) node of the model, in graph order.
struct SurveyedOp {
  std::string kind;      // "aten::conv2d"
  std::string location;  // "model.py:42" (may be empty)
  OpStatus status = OpStatus::Supported;
  std::string message;   // Unsupported: the importer's one-line error
  std::vector<core::NodeId> nodes;  // Supported: the Kiln nodes it became (in SurveyResult::graph)
  /// Unsupported: element count of its outputs in a libtorch run (a 1-FLOP-per-element estimate
  /// of its work); 0 when the run was not possible.
  int64_t outputElements = 0;
};

struct SurveyResult {
  std::vector<SurveyedOp> ops;
  /// Everything that imported; outputs of unsupported nodes stand in as extra graph inputs.
  core::Graph graph;
  std::vector<InputSpec> inputs;
  bool controlFlow = false;  // prim::If / prim::Loop left after freezing and inlining (scripted)
  /// False when the walk had to stop (an unsupported node whose outputs could not be reproduced):
  /// ops after it are listed with the status their kind would have, unverified.
  bool complete = true;
};

/// Like importTorchScript, but continues past unsupported nodes and reports every node. Throws
/// kiln::Error only when the file cannot be loaded or its inputs are unknown.
SurveyResult surveyTorchScript(const std::string& path, const ImportOptions& options = {});

/// The aten:: kinds the importer maps ("aten::conv2d", ...), sorted.
std::vector<std::string> supportedTorchScriptOps();
/// True when the importer maps this kind ("aten::conv2d"); arguments are checked at import.
bool supportsTorchScriptOp(const std::string& kind);

// ---- in-memory modules and graphs (app/torch: kiln::torch::optimize) ---------------------------

/// The forward graph of an in-memory module, prepared as importTorchScript prepares a file's
/// (eval, freeze, inline, cleanups) without changing the module; the unused `self` input is
/// removed, so the graph's inputs are the forward arguments. Throws kiln::Error (InvalidModel)
/// when the module has no forward method or cannot be frozen.
std::shared_ptr<::torch::jit::Graph> prepareTorchScriptModule(const ::torch::jit::Module& module);

/// Imports a prepared graph (or a sub-graph of one): `inputs` gives one spec per graph input,
/// every graph input must be a tensor. Throws like importTorchScript.
ImportedModel importTorchScriptGraph(const std::shared_ptr<::torch::jit::Graph>& graph,
                                     const std::vector<InputSpec>& inputs);

/// Like surveyTorchScript for a prepared graph (the torch.export importer's rebuilt graph,
/// importers/torch_export.h): every node judged, unsupported ones stood in for by a libtorch run.
SurveyResult surveyTorchScriptGraph(const std::shared_ptr<::torch::jit::Graph>& graph,
                                    const std::vector<InputSpec>& inputs);

/// What the importer does with one node of a prepared graph for given input shapes.
struct NodeSupport {
  const ::torch::jit::Node* node = nullptr;
  /// Supported: mapped onto Kiln operators; Folded: evaluated at import time or structural
  /// (constants, lists, tuples); Unsupported: see message.
  OpStatus status = OpStatus::Supported;
  std::string message;  // Unsupported: the importer's one-line error
};

/// Judges every node of a prepared graph (nodes of the taken branch of an import-time prim::If
/// too), like surveyTorchScript: libtorch runs the graph once on random inputs and the outputs of
/// unsupported nodes stand in so that later nodes are judged as well. Nodes after a point where
/// the walk had to stop are Unsupported ("not checked: ..."). Throws kiln::Error for non-tensor
/// graph inputs or a wrong number of specs.
std::vector<NodeSupport> classifyTorchScriptGraph(const std::shared_ptr<::torch::jit::Graph>& graph,
                                                  const std::vector<InputSpec>& inputs);

}  // namespace kiln::importers
