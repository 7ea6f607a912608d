// Python model references as a model source: `my_models.py:build` or `package.module:make`
// names a callable that returns (nn.Module, example_inputs). openModel() (and so every command
// and the Workbench) traces such a reference with Kiln's Python environment
// (python/kiln_workers/model_ref.py, in a subprocess with a time limit) into a cache folder and
// opens the traced TorchScript file; the PyTorch backends get the reference and the saved
// state_dict so they run the same module with the same weights. Part of the façade (no Qt).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/facade.h"

namespace kiln::app {

struct PythonReference {
  std::string text;    // as given
  std::string file;    // the .py file, absolute; empty for a module reference
  std::string module;  // the dotted module name of a module reference
  std::string attr;    // the callable ("build", "Factory.make")
  /// The form the Python side imports from any working directory ("/abs/my_models.py:build").
  std::string canonical() const { return (file.empty() ? module : file) + ":" + attr; }
};

/// True when `path` names a Python reference rather than a file: an existing file never is;
/// otherwise `X.py:NAME` (X.py need not exist: opening it then fails with "no such file") or
/// `pkg.mod:NAME` with dotted identifiers on both sides.
std::optional<PythonReference> parsePythonReference(const std::string& path);

/// What tracing a reference produced (its cache folder's files).
struct TracedReference {
  PythonReference ref;
  std::string model;                // TorchScript with kiln.json (input names, shapes, dtypes)
  std::string stateDict;            // torch.save(module.state_dict())
  std::vector<std::string> inputs;  // the example inputs, .npy
  std::string dir;                  // the cache folder
  std::string torchVersion;         // of the environment that traced it
  bool reused = false;              // found in the cache, not traced again
};

struct TraceOptions {
  std::string python;          // the interpreter; "": Kiln's environment (profiler::findTorchPython)
  double timeoutSeconds = 600;  // for importing, calling and tracing
  std::function<bool()> cancelled;
};

/// Traces the reference (or reuses the cache folder of the same file bytes, reference and torch
/// version). Within one process the result is remembered per reference and file mtime. Errors:
/// Io for a missing file or module, InvalidModel for an import failure, a missing attribute, a
/// callable that raises or does not return (nn.Module, example_inputs), Unsupported for a failed
/// trace or no Python environment with torch >= 2 (create it with scripts/install-deps.sh).
Result<TracedReference> traceReference(const PythonReference& ref, const TraceOptions& options = {});

/// The folder of python/kiln_workers (model_ref.py): $KILN_PYTHON_DIR, else the source tree's.
std::string kilnPythonDir();

}  // namespace kiln::app
