// The torch.compile baseline: PyTorch 2's compiler runs in a Python worker process (it has no C++
// entry point). It needs a python with torch >= 2.0 and the model's Python module: the sample
// models record their torchvision architecture, so the script rebuilds it and loads the
// TorchScript file's weights into it. When any of that is missing the backend is recorded as
// unavailable with the reason, never as a number.
#pragma once

#include <string>
#include <vector>

#include "profiler/bench.h"

namespace kiln::profiler {

struct TorchPython {
  bool usable = false;  // torch >= 2.0 found
  std::string python;   // the interpreter (absolute path when known)
  std::string version;  // its torch version
  std::string reason;   // why not usable
};

/// Probes `requested` (a path or a name in PATH), or when empty `python3` then /usr/bin/python3.
/// Results are cached per process.
TorchPython findTorchPython(const std::string& requested = "");

/// The torch.compile row of a side-by-side measurement (profiler/bench.h): a Python worker that
/// rebuilds the model (a sample model's torchvision architecture with the file's weights),
/// compiles it with torch.compile (inductor, default mode) and serves the bench protocol. Its
/// first call compiles and is timed apart (compile_seconds in the setup result). Unavailable with
/// the reason when `python` (findTorchPython) has no torch >= 2.
BenchBackend torchCompileBackend(const std::string& python, const std::string& modelPath, int64_t batch,
                                 int threads, const std::vector<std::string>& inputPaths);

}  // namespace kiln::profiler
