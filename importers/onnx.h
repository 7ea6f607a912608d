// ONNX import: a `.onnx` file (ModelProto, read with Debian's libonnx protobuf classes) → Kiln
// graph IR, the same canonical operators as the TorchScript importer (importers/torchscript.h).
//
// Initializers become bound constants; graph inputs that are not initializers are the model's
// inputs, typed from the file (symbolic dimensions need ImportOptions::inputs or a batch
// override). Shape subgraphs (Shape → Gather → Concat → Reshape, ...) are evaluated at import time
// on constants; operators whose inputs are all constants are folded with ATen. Unsupported
// operators or attributes raise kiln::Error (Unsupported) naming the ONNX op type and node:
// `onnx::GridSample is not supported (node "/grid/GridSample")`.
#pragma once

#include <string>
#include <vector>

#include "importers/torchscript.h"

namespace kiln::importers {

/// True when `path` names an ONNX file (by its ".onnx" extension).
bool isOnnxFile(const std::string& path);

/// Throws kiln::Error: Io for a missing file, InvalidModel for unreadable files, Unsupported for
/// unsupported operators, InvalidInput for inputs of unknown shape.
ImportedModel importOnnx(const std::string& path, const ImportOptions& options = {});

/// The non-initializer graph inputs with their declared types (symbolic dimensions as -1).
std::vector<InputSpec> readOnnxInputSpecs(const std::string& path);

/// The ONNX op types the importer maps ("Conv", "MatMul", ...), sorted.
std::vector<std::string> supportedOnnxOps();

}  // namespace kiln::importers
