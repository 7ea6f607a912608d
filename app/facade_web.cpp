// The WebAssembly rows of side-by-side measurements (issue 20): `kiln-wasm` (Kiln's wasm32 module
// run by the JavaScript runtime in Node) and `onnxruntime-web` (npm onnxruntime-web's WASM
// backend in Node, on the ONNX file the onnxruntime row runs), each served by web/bench_worker.mjs
// in a Node process of its own (profiler/bench.h's protocol). Unavailable rows say what is missing.
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/input_shapes.h"
#include "app/measure_internal.h"
#include "codegen/export.h"

namespace kiln::app {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kWasmTarget = "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128";

/// `name` on PATH, or "".
std::string onPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string cacheHome() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return x;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache";
}

}  // namespace

std::string webDirectory() {
  if (const char* dir = std::getenv("KILN_WEB_DIR"); dir && *dir) return dir;
  return KILN_WEB_DIR;
}

std::string onnxruntimeWebDirectory() {
  if (const char* dir = std::getenv("KILN_NPM_DIR"); dir && *dir)
    return (fs::path(dir) / "node_modules" / "onnxruntime-web").string();
  return cacheHome() + "/kiln/npm/node_modules/onnxruntime-web";
}

bool isWebBackend(const std::string& name) { return name == "kiln-wasm" || name == "onnxruntime-web"; }

profiler::BenchBackend webBenchBackend(const std::string& name, const BuildOptions& build, const BenchSpec& spec) {
  profiler::BenchBackend b;
  b.name = name;
  const std::string node = onPath("node");
  if (node.empty()) {
    b.unavailable = "no node on PATH (scripts/install-deps.sh installs nodejs)";
    return b;
  }
  const std::string script = (fs::path(webDirectory()) / "bench_worker.mjs").string();
  if (!fs::exists(script)) {
    b.unavailable = "the Node worker " + script + " is missing (set KILN_WEB_DIR)";
    return b;
  }
  b.argv = {node, script};
  json setup = {{"backend", name}, {"threads", spec.threads}, {"inputs", spec.inputs}};
  if (name == "kiln-wasm") {
    if (codegen::findWasmLinker().empty() || codegen::findWasiLibc().empty()) {
      b.unavailable = "no wasm-ld or wasi-libc to link a wasm32 module (scripts/install-deps.sh installs lld-19 and wasi-libc)";
      return b;
    }
    // The worker adds `-o DIR` (a directory in its own output folder: with several processes per
    // row each compiles its own module).
    std::vector<std::string> compile = workerArgv(spec.workerCommand, "compile");
    for (const std::string& a : {spec.path, std::string("--target"), std::string(kWasmTarget),
                                 "-O" + std::to_string(build.optLevel)})
      compile.push_back(a);
    if (spec.batch > 0) compile.insert(compile.end(), {"--batch", std::to_string(spec.batch)});
    if (!spec.inputSpecs.empty()) compile.insert(compile.end(), {"--input-shapes", inputShapesText(spec.inputSpecs)});
    setup["compile_argv"] = compile;
  } else {
    const std::string ort = onnxruntimeWebDirectory();
    if (!fs::exists(fs::path(ort) / "package.json")) {
      b.unavailable = "npm onnxruntime-web is not installed in " + ort + " (scripts/install-deps.sh installs it)";
      return b;
    }
    setup["ort_dir"] = ort;
    if (fs::path(spec.path).extension() == ".onnx" && spec.pythonRef.empty()) {
      setup["onnx"] = spec.path;
    } else {
      // The onnxruntime row's worker exports (and caches) the ONNX file; the Node worker asks it.
      profiler::BenchBackend exporter = baselineBenchBackend("onnxruntime", spec);
      if (!exporter.unavailable.empty()) {
        b.unavailable = "no ONNX export: " + exporter.unavailable;
        return b;
      }
      setup["onnx_worker"] = {{"argv", exporter.argv}, {"setup", json::parse(exporter.setupJson)}};
    }
  }
  b.setupJson = setup.dump();
  return b;
}

}  // namespace kiln::app
