#include "profiler/torch_compile.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "profiler/subprocess.h"

namespace kiln::profiler {
namespace {

constexpr const char* kProbeScript =
    "import sys\nprint(sys.executable)\nimport torch\nprint(torch.__version__)\n";

// A bench-protocol worker (profiler/bench.h) for torch.compile. Reads JSON lines on stdin.
constexpr const char* kWorkerScript = R"py(
import json, os, sys, time

def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

def flatten(value, out):
    if isinstance(value, (tuple, list)):
        for v in value:
            flatten(v, out)
    elif hasattr(value, "detach"):
        out.append(value.detach().contiguous().numpy())
    return out

def setup(q):
    import torch
    if int(torch.__version__.split(".")[0]) < 2:
        return None, {"ok": False, "status": "unavailable",
                      "error": "torch.compile needs torch >= 2.0, found " + torch.__version__}
    import numpy
    if q["threads"] > 0:
        torch.set_num_threads(q["threads"])
    extra = {"kiln.json": ""}
    scripted = torch.jit.load(q["path"], map_location="cpu", _extra_files=extra)
    meta = json.loads(extra["kiln.json"] or "{}")
    source = meta.get("source", "")
    if not source.startswith("torchvision "):
        return None, {"ok": False, "status": "unavailable",
                      "error": "torch.compile needs the model's Python module; the file is TorchScript "
                               "without a torchvision architecture in its kiln.json"}
    import torchvision
    model = getattr(torchvision.models, source.split()[1].rstrip(","))(weights=None)
    model.load_state_dict(scripted.state_dict())
    model.eval()
    inputs = [torch.from_numpy(numpy.load(p)) for p in q["inputs"]]
    compiled = torch.compile(model)
    with torch.inference_mode():
        start = time.perf_counter()
        compiled(*inputs)
        compile_s = time.perf_counter() - start
        start = time.perf_counter()
        outputs = flatten(compiled(*inputs), [])
        first_ms = (time.perf_counter() - start) * 1000
    paths = []
    for i, array in enumerate(outputs):
        path = os.path.join(q["output_dir"], "out%d.npy" % i)
        numpy.save(path, array)
        paths.append(path)
    def call():
        with torch.inference_mode():
            compiled(*inputs)
    return call, {"ok": True, "result": {"outputs": paths, "first_ms": first_ms, "compile_seconds": compile_s,
                                         "pid": os.getpid(), "torch_version": torch.__version__}}

def failure(e):
    text = str(e).strip().splitlines()
    reason = type(e).__name__ + (": " + text[0] if text else "")
    memory = isinstance(e, MemoryError) or "out of memory" in reason or "can't allocate" in reason
    return {"ok": False, "status": "out-of-memory" if memory else "failed", "error": reason}

call = None
for line in sys.stdin:
    try:
        q = json.loads(line)
        if q["op"] == "exit":
            break
        if q["op"] == "setup":
            call, answer = setup(q)
        elif q["op"] == "run":
            start = time.perf_counter()
            for _ in range(q.get("warm", 0)):
                call()
            warm_ms = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            for _ in range(q.get("number", 1)):
                call()
            answer = {"ok": True, "ms": (time.perf_counter() - start) * 1000, "warm_ms": warm_ms}
        else:
            answer = {"ok": False, "error": "unknown request " + str(q["op"])}
    except Exception as e:
        answer = failure(e)
    reply(answer)
)py";

TorchPython probe(const std::string& python) {
  TorchPython p;
  p.python = python;
  ProcessResult r = runProcess({python, "-c", kProbeScript}, 120);
  if (!r.started) {
    p.reason = python + " cannot be run (" + r.error + ")";
    return p;
  }
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
  if (!p.usable) p.reason = "torch.compile needs torch >= 2.0, found " + version + " at " + p.python;
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
      chosen.reason = "torch.compile needs a python with torch >= 2.0; none found (";
      for (size_t i = 0; i < probed.size(); ++i) chosen.reason += (i ? "; " : "") + probed[i].reason;
      chosen.reason += ")";
    }
  }
  cache->emplace(requested, chosen);
  return chosen;
}

BenchBackend torchCompileBackend(const std::string& requested, const std::string& modelPath, int64_t batch,
                                 int threads, const std::vector<std::string>& inputPaths) {
  BenchBackend b;
  b.name = "torch-compile";
  TorchPython python = findTorchPython(requested);
  if (!python.usable) {
    b.unavailable = python.reason;
    return b;
  }
  b.argv = {python.python, "-c", kWorkerScript};
  b.setupJson = nlohmann::json{{"path", modelPath}, {"batch", batch}, {"threads", threads}, {"inputs", inputPaths}}.dump();
  return b;
}

}  // namespace kiln::profiler
