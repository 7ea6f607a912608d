// torch.export import: a `.pt2` archive written by `torch.export.save(ep, "m.pt2")` → Kiln graph IR.
//
// Kiln reads the archive itself (a zip, read with libtorch's stream reader; no Python): the
// exported program's JSON (models/<name>.json: the graph, its signature, the symbolic dimensions'
// ranges) and its weights (data/weights/ and data/constants/: raw bytes described by JSON configs).
// The serialized graph is rebuilt as a TorchScript graph (every node an aten:: overload with its
// schema-ordered arguments; parameters, buffers and constants as constant tensors) and handed to
// the TorchScript importer's walker (importers/torchscript.h), so both formats share one operator
// table. A few operators newer than Debian's libtorch 1.13 are rewritten into the ones it knows
// (`_native_batch_norm_legit_no_training` → `batch_norm`, `scaled_dot_product_attention` → matmul,
// softmax, matmul). Symbolic dimensions (`dynamic_shapes=...`) take the sizes given in
// ImportOptions::inputs (`--input-shapes`, `--batch`), checked against the export's ranges; without
// them, the sizes of the example inputs the program was exported with. Errors are kiln::Error:
// InvalidModel for a corrupt or truncated archive or an archive/schema version Kiln does not read,
// Unsupported naming the aten:: operator that has no mapping, InvalidInput for shapes outside the
// export's ranges. libtorch headers stay inside importers/*.cpp.
#pragma once

#include <string>
#include <vector>

#include "importers/torchscript.h"

namespace kiln::importers {

/// True when `path` names a torch.export archive (by its ".pt2" extension).
bool isTorchExportFile(const std::string& path);

/// Throws kiln::Error: Io for a missing file, InvalidModel for a bad archive, Unsupported for
/// operators Kiln cannot map, InvalidInput for input shapes the export does not allow.
ImportedModel importTorchExport(const std::string& path, const ImportOptions& options = {});

/// The program's user inputs (names as in the exported graph, which are forward's argument names)
/// with the shapes they were exported with (a symbolic dimension takes its example size).
InputSignature readTorchExportSignature(const std::string& path);

/// Like importTorchExport, but continues past unsupported nodes (importers/torchscript.h's
/// surveyTorchScript on the rebuilt graph) for the import doctor.
SurveyResult surveyTorchExport(const std::string& path, const ImportOptions& options = {});

}  // namespace kiln::importers
