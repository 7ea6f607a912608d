#include "profiler/python_worker.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "profiler/subprocess.h"

namespace kiln::profiler {
namespace {

constexpr const char* kProbeScript =
    "import sys\nprint(sys.executable)\nimport torch\nprint(torch.__version__)\n";

TorchPython probe(const std::string& python) {
  TorchPython p;
  p.python = python;
  ProcessResult r = runProcess({python, "-c", kProbeScript}, 120);
  if (!r.started) {
    p.reason = python + " cannot be run (" + r.error + ")";
    return p;
  }
  p.runnable = r.exitCode == 0 || !r.out.empty();
  std::istringstream lines(r.out);
  std::string executable, version;
  std::getline(lines, executable);
  std::getline(lines, version);
  if (!executable.empty()) p.python = executable;
  if (r.timedOut) {
    p.reason = p.python + " did not answer within 120 s";
    return p;
  }
  if (r.exitCode != 0 || version.empty()) {
    p.reason = p.python + " has no torch module";
    return p;
  }
  p.version = version;
  int major = std::atoi(version.c_str());
  p.usable = major >= 2;
  if (!p.usable) p.reason = "today's PyTorch backends need torch >= 2.0, found " + version + " at " + p.python;
  return p;
}

}  // namespace

TorchPython findTorchPython(const std::string& requested) {
  static std::mutex mutex;
  static std::map<std::string, TorchPython>* cache = new std::map<std::string, TorchPython>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache->find(requested);
  if (it != cache->end()) return it->second;

  // Kiln's own environment (scripts/install-deps.sh) first, then whatever python3 there is.
  std::vector<std::string> candidates{requested};
  if (requested.empty()) {
    candidates.clear();
    if (const char* env = std::getenv("KILN_TORCH_PYTHON"); env && *env) candidates.push_back(env);
    candidates.insert(candidates.end(), {KILN_PYENV_PYTHON, "python3", "/usr/bin/python3"});
  }
  std::vector<TorchPython> probed;
  TorchPython chosen;
  for (const auto& c : candidates) {
    TorchPython p = probe(c);
    if (p.usable) {
      chosen = p;
      break;
    }
    probed.push_back(p);
  }
  if (!chosen.usable) {
    // Prefer the reason of an interpreter that has torch (too old) over "no torch module".
    const TorchPython* best = nullptr;
    for (const auto& p : probed)
      if (!p.version.empty()) best = &p;
    if (best) {
      chosen = *best;
      if (requested.empty()) chosen.reason += " (choose another interpreter with --python)";
    } else {
      chosen.reason = "today's PyTorch backends need a python with torch >= 2.0; none found (";
      for (size_t i = 0; i < probed.size(); ++i) chosen.reason += (i ? "; " : "") + probed[i].reason;
      chosen.reason += ")";
    }
  }
  cache->emplace(requested, chosen);
  return chosen;
}

std::string benchWorkerScript() {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("KILN_PYTHON_DIR"); dir && *dir)
    return (fs::path(dir) / "kiln_workers" / "bench_worker.py").string();
  return (fs::path(KILN_PYTHON_DIR) / "kiln_workers" / "bench_worker.py").string();
}

bool isPythonBackend(const std::string& name) {
  static const char* const kNames[] = {"pytorch-eager", "torch-compile", "torch-compile-max-autotune", "onnxruntime",
                                       "openvino"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

BenchBackend pythonBenchBackend(const std::string& name, const PythonBenchSpec& spec) {
  BenchBackend b;
  b.name = name;
  TorchPython python = findTorchPython(spec.python);
  if (!python.runnable) {
    // Nothing to start: the probe's reason (no interpreter, or none that runs).
    b.unavailable = python.reason;
    return b;
  }
  std::string script = benchWorkerScript();
  if (!std::filesystem::exists(script)) {
    b.unavailable = "the Python worker " + script + " is missing (set KILN_PYTHON_DIR)";
    return b;
  }
  // -u: unbuffered, so each protocol line leaves at once; -B: no __pycache__ beside the script.
  b.argv = {python.python, "-u", "-B", script};
  nlohmann::json setup = {{"backend", name},        {"path", spec.path},     {"batch", spec.batch},
                          {"threads", spec.threads}, {"inputs", spec.inputs}};
  if (!spec.pythonRef.empty()) setup["python_ref"] = spec.pythonRef;
  if (!spec.stateDict.empty()) setup["state_dict"] = spec.stateDict;
  b.setupJson = setup.dump();
  return b;
}

}  // namespace kiln::profiler
