// Today's engines through Kiln's Python environment: pytorch-eager (the nn.Module under
// torch.inference_mode()), torch-compile (inductor; torch-compile-max-autotune on request),
// onnxruntime and openvino, each served by python/kiln_workers/bench_worker.py in a process of
// its own that speaks the bench protocol (profiler/bench.h). The worker decides per backend
// whether it can run (torch >= 2, the module installed, a PyTorch module for this model, an ONNX
// export that worked) and says why not in one line: such a row is unavailable (or failed), never
// a failure of the whole comparison.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/bench.h"

namespace kiln::profiler {

struct TorchPython {
  bool usable = false;    // torch >= 2.0 found
  bool runnable = false;  // the interpreter started (with or without a usable torch)
  std::string python;     // the interpreter (absolute path when known)
  std::string version;    // its torch version
  std::string reason;     // why not usable
};

/// Probes `requested` (a path or a name in PATH), or when empty $KILN_TORCH_PYTHON, Kiln's
/// Python environment (scripts/install-deps.sh), `python3` then /usr/bin/python3, choosing the
/// first with torch >= 2. Results are cached per process.
TorchPython findTorchPython(const std::string& requested = "");

/// The worker script: $KILN_PYTHON_DIR/kiln_workers/bench_worker.py when that variable is set,
/// else the checkout's python/kiln_workers/bench_worker.py.
std::string benchWorkerScript();

/// True for the backends the Python worker serves.
bool isPythonBackend(const std::string& name);

/// What a Python backend's setup is made of.
struct PythonBenchSpec {
  std::string python;               // --python; empty: findTorchPython's choice
  std::string path;                 // the model file (.pt or .onnx)
  std::string pythonRef;            // "file.py:fn" / "pkg.mod:attr" returning (nn.Module, example inputs)
  std::string stateDict;            // a torch.save'd state dict loaded into pythonRef's module
  int64_t batch = 0;
  int threads = 1;
  std::vector<std::string> inputs;  // .npy files
};

/// The row `name` (isPythonBackend) served by the Python worker. Unavailable, without starting
/// anything, only when no interpreter can be started; every other reason comes from the worker.
BenchBackend pythonBenchBackend(const std::string& name, const PythonBenchSpec& spec);

}  // namespace kiln::profiler
