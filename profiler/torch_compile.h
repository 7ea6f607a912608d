// The torch.compile baseline: PyTorch 2's compiler runs in a Python subprocess (it has no C++
// entry point). It needs a python with torch >= 2.0 and the model's Python module: the sample
// models record their torchvision architecture, so the script rebuilds it and loads the
// TorchScript file's weights into it. When any of that is missing the backend is recorded as
// unavailable with the reason, never as a number.
#pragma once

#include <functional>
#include <string>

#include "profiler/records.h"

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

struct TorchCompileOptions {
  std::string python;  // empty: findTorchPython's default candidates
  std::string modelPath;
  int64_t batch = 0;  // 0: the model's own
  int threads = 0;
  int warmup = 3;
  int repeat = 10;
  double minRepeatMs = 20;
  double timeoutSeconds = 600;  // the whole subprocess, compilation included
  std::function<bool()> cancelled;  // polled while it runs: true kills it (status Failed, "cancelled")
};

/// Measures the model with torch.compile (backend "torch-compile"); status Unavailable or Failed
/// with the reason when it cannot.
Measurement measureTorchCompile(const TorchCompileOptions& options);

}  // namespace kiln::profiler
