// TorchScript import: a `.pt` file saved by torch.jit.save → Kiln graph IR.
//
// The module is loaded with libtorch, put in eval mode, frozen without numeric optimizations
// (so Kiln's own passes do the folding), inlined, and its aten::/prim:: nodes are mapped onto
// Kiln's canonical operators (core/ir/op_registry.h). Weights become bound constants; integer,
// list and shape arithmetic is evaluated at import time against the static input shapes.
// Anything unsupported raises kiln::Error (Unsupported) naming the aten:: operator and its
// source location. libtorch headers stay inside importers/*.cpp.
#pragma once

#include <string>
#include <vector>

#include "core/ir/graph.h"

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

}  // namespace kiln::importers
