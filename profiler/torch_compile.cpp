#include "profiler/torch_compile.h"

#include <map>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "profiler/subprocess.h"

namespace kiln::profiler {
namespace {

constexpr const char* kProbeScript =
    "import sys\nprint(sys.executable)\nimport torch\nprint(torch.__version__)\n";

// argv: model batch threads warmup repeat min_repeat_ms. Prints one line "KILN_RESULT {json}".
constexpr const char* kMeasureScript = R"py(
import json, sys, time

def measure():
    path = sys.argv[1]
    batch, threads, warmup, repeat = (int(a) for a in sys.argv[2:6])
    min_repeat_ms = float(sys.argv[6])
    import torch
    if int(torch.__version__.split(".")[0]) < 2:
        return {"ok": False, "reason": "torch.compile needs torch >= 2.0, found " + torch.__version__}
    if threads > 0:
        torch.set_num_threads(threads)
    extra = {"kiln.json": ""}
    scripted = torch.jit.load(path, map_location="cpu", _extra_files=extra)
    meta = json.loads(extra["kiln.json"] or "{}")
    source = meta.get("source", "")
    if not source.startswith("torchvision "):
        return {"ok": False, "reason": "torch.compile needs the model's Python module; the file is "
                "TorchScript without a torchvision architecture in its kiln.json"}
    arch = source.split()[1].rstrip(",")
    import torchvision
    model = getattr(torchvision.models, arch)(weights=None)
    model.load_state_dict(scripted.state_dict())
    model.eval()
    inputs = []
    for spec in meta["inputs"]:
        shape = list(spec["shape"])
        if batch > 0:
            shape[0] = batch
        inputs.append(torch.randn(*shape))
    compiled = torch.compile(model)
    with torch.no_grad():
        start = time.perf_counter()
        compiled(*inputs)
        compile_s = time.perf_counter() - start
        for _ in range(warmup):
            compiled(*inputs)
        number = 1
        while True:
            start = time.perf_counter()
            for _ in range(number):
                compiled(*inputs)
            ms = (time.perf_counter() - start) * 1000
            if ms >= min_repeat_ms or number >= 1 << 20:
                break
            number = max(number + 1, int(number * min(10.0, 1.2 * min_repeat_ms / max(ms, 1e-3))))
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                compiled(*inputs)
            samples.append((time.perf_counter() - start) * 1000 / number)
    return {"ok": True, "samples_ms": samples, "number": number, "compile_seconds": compile_s,
            "torch_version": torch.__version__}

try:
    result = measure()
except Exception as e:
    text = str(e).strip().splitlines()
    result = {"ok": False, "failed": True, "reason": type(e).__name__ + (": " + text[0] if text else "")}
print("KILN_RESULT " + json.dumps(result), flush=True)
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

  std::vector<std::string> candidates = requested.empty()
                                            ? std::vector<std::string>{"python3", "/usr/bin/python3"}
                                            : std::vector<std::string>{requested};
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

Measurement measureTorchCompile(const TorchCompileOptions& o) {
  Measurement m;
  m.backend = "torch-compile";
  m.batch = o.batch;
  TorchPython python = findTorchPython(o.python);
  if (!python.usable) {
    m.status = Status::Unavailable;
    m.reason = python.reason;
    return m;
  }
  ProcessResult r = runProcess(
      {python.python, "-c", kMeasureScript, o.modelPath, std::to_string(o.batch), std::to_string(o.threads),
       std::to_string(o.warmup), std::to_string(o.repeat), std::to_string(o.minRepeatMs)},
      o.timeoutSeconds, o.cancelled);
  if (r.cancelled) {
    m.status = Status::Failed;
    m.reason = "cancelled";
    return m;
  }
  if (r.timedOut) {
    m.status = Status::Timeout;
    m.reason =
        "torch.compile did not finish within " + std::to_string(static_cast<int>(o.timeoutSeconds)) + " s";
    return m;
  }
  size_t marker = r.out.rfind("KILN_RESULT ");
  if (marker == std::string::npos) {
    m.status = Status::Failed;
    std::string err = r.err;
    while (!err.empty() && err.back() == '\n') err.pop_back();
    m.reason = "the torch.compile subprocess exited with " + std::to_string(r.exitCode) +
               (err.empty() ? "" : ": " + err.substr(err.rfind('\n') + 1));
    return m;
  }
  nlohmann::json j = nlohmann::json::parse(r.out.substr(marker + 12), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    m.status = Status::Failed;
    m.reason = "the torch.compile subprocess printed an unreadable result";
    return m;
  }
  if (!j.value("ok", false)) {
    m.status = j.value("failed", false) ? Status::Failed : Status::Unavailable;
    m.reason = j.value("reason", std::string("unknown reason"));
    if (m.reason.find("out of memory") != std::string::npos ||
        m.reason.find("can't allocate") != std::string::npos)
      m.status = Status::OutOfMemory;
    return m;
  }
  m.timing = timingFromSamples(j["samples_ms"].get<std::vector<double>>(), j.value("number", 1));
  return m;
}

}  // namespace kiln::profiler
