#include "app/model_ref.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "app/facade_internal.h"
#include "profiler/subprocess.h"
#include "profiler/python_worker.h"

namespace kiln::app {

namespace fs = std::filesystem;

namespace {

bool isDottedIdentifier(const std::string& s) {
  if (s.empty() || s.front() == '.' || s.back() == '.') return false;
  bool start = true;
  for (char c : s) {
    if (c == '.') {
      if (start) return false;  // ".."
      start = true;
      continue;
    }
    bool ok = std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (!start && std::isdigit(static_cast<unsigned char>(c)));
    if (!ok) return false;
    start = false;
  }
  return true;
}

/// The last line of `text` that is not empty.
std::string lastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
}

ErrorKind kindOf(const std::string& kind) {
  if (kind == "io") return ErrorKind::Io;
  if (kind == "unsupported") return ErrorKind::Unsupported;
  return ErrorKind::InvalidModel;
}

/// What identifies a file reference's state within one process: its mtime and size.
std::string fileStamp(const std::string& file) {
  struct stat st {};
  if (file.empty() || ::stat(file.c_str(), &st) != 0) return "";
  return std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "/" + std::to_string(st.st_size);
}

}  // namespace

std::optional<PythonReference> parsePythonReference(const std::string& path) {
  std::error_code ec;
  if (path.empty() || fs::exists(path, ec)) return std::nullopt;
  size_t colon = path.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == path.size()) return std::nullopt;
  PythonReference ref;
  ref.text = path;
  ref.attr = path.substr(colon + 1);
  if (!isDottedIdentifier(ref.attr)) return std::nullopt;
  std::string left = path.substr(0, colon);
  if (left.size() > 3 && left.ends_with(".py")) {
    ref.file = fs::absolute(left, ec).lexically_normal().string();
    return ref;
  }
  if (!isDottedIdentifier(left)) return std::nullopt;
  ref.module = left;
  return ref;
}

std::string kilnPythonDir() {
  if (const char* env = std::getenv("KILN_PYTHON_DIR"); env && *env) return env;
  return KILN_PYTHON_DIR;
}

Result<TracedReference> traceReference(const PythonReference& ref, const TraceOptions& options) {
  static std::mutex mutex;
  static auto* memo = new std::map<std::string, TracedReference>();
  std::string memoKey = ref.canonical() + "\n" + fileStamp(ref.file) + "\n" + options.python;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = memo->find(memoKey); it != memo->end() && fs::exists(it->second.model)) return it->second;
  }
  return guarded<TracedReference>(ref.text, [&] {
    if (!ref.file.empty() && !fs::is_regular_file(ref.file)) throw Error("no such file", ErrorKind::Io);
    profiler::TorchPython python = profiler::findTorchPython(options.python);
    if (!python.usable)
      throw Error("Python model references need Kiln's Python environment (torch >= 2); create it with "
                  "scripts/install-deps.sh (" + python.reason + ")",
                  ErrorKind::Unsupported);
    std::string script = (fs::path(kilnPythonDir()) / "kiln_workers" / "model_ref.py").string();
    if (!fs::is_regular_file(script)) throw Error("cannot find " + script + " (set KILN_PYTHON_DIR)", ErrorKind::Io);
    profiler::ProcessResult r =
        profiler::runProcess({python.python, script, "trace", ref.canonical()}, options.timeoutSeconds, options.cancelled);
    if (r.cancelled) throw Error("cancelled", ErrorKind::Usage);
    if (!r.started) throw Error("cannot run " + python.python + ": " + r.error, ErrorKind::Unsupported);
    if (r.timedOut)
      throw Error("tracing did not finish within " + std::to_string(static_cast<int>(options.timeoutSeconds)) + " s",
                  ErrorKind::Unsupported);
    nlohmann::json answer = nlohmann::json::parse(lastLine(r.out), nullptr, false);
    if (answer.is_discarded() || !answer.is_object()) {
      std::string why = lastLine(r.err);
      throw Error("tracing failed (" + (why.empty() ? "exit code " + std::to_string(r.exitCode) : why) + ")",
                  ErrorKind::Unsupported);
    }
    if (!answer.value("ok", false)) {
      std::string message = answer.value("error", std::string("tracing failed"));
      // The Python side names the file or module already when it is the subject.
      if (message.rfind(ref.text, 0) == 0 && message.size() > ref.text.size() + 2) message = message.substr(ref.text.size() + 2);
      throw Error(message, kindOf(answer.value("kind", std::string("invalid"))));
    }
    TracedReference t;
    t.ref = ref;
    t.model = answer.at("model").get<std::string>();
    t.stateDict = answer.at("state_dict").get<std::string>();
    t.inputs = answer.at("inputs").get<std::vector<std::string>>();
    t.dir = answer.at("dir").get<std::string>();
    t.torchVersion = answer.value("torch_version", "");
    t.reused = answer.value("reused", false);
    std::lock_guard<std::mutex> lock(mutex);
    (*memo)[memoKey] = t;
    return t;
  });
}

}  // namespace kiln::app
