// The WebAssembly rows of side-by-side measurements (issue 20): `kiln-wasm` (Kiln's wasm32 module
// run by the JavaScript runtime in Node) and `onnxruntime-web` (npm onnxruntime-web's WASM
// backend in Node, on the ONNX file the onnxruntime row runs), each served by web/bench_worker.mjs
// in a Node process of its own (profiler/bench.h's protocol). Unavailable rows say what is missing.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/input_shapes.h"
#include "app/measure_internal.h"
#include "codegen/export.h"
#include "profiler/subprocess.h"
#include "runtime/tensor.h"

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

}  // namespace

std::string webDirectory() {
  if (const char* dir = std::getenv("KILN_WEB_DIR"); dir && *dir) return dir;
  return KILN_WEB_DIR;
}

std::string onnxruntimeWebDirectory() {
  // Where install-deps.sh put it when the build was configured: a changed XDG_CACHE_HOME (tests
  // give every run a cache of its own) does not hide it.
  const char* dir = std::getenv("KILN_NPM_DIR");
  return (fs::path(dir && *dir ? dir : KILN_NPM_DIR) / "node_modules" / "onnxruntime-web").string();
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

namespace {

void writeRaw(const std::string& path, const runtime::Tensor& t) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  if (!out) throw Error(path + ": cannot write file", ErrorKind::Io);
}

/// The raw bytes of `path` as a tensor shaped like `like`.
runtime::Tensor readRaw(const std::string& path, const runtime::Tensor& like) {
  runtime::Tensor t = runtime::Tensor::zeros(like.dtype(), like.shape());
  std::ifstream in(path, std::ios::binary);
  in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  if (!in || in.gcount() != static_cast<std::streamsize>(t.nbytes()))
    throw Error(path + ": the module wrote " + std::to_string(in.gcount()) + " bytes, expected " +
                    std::to_string(t.nbytes()),
                ErrorKind::Internal);
  return t;
}

double elementAsDouble(const runtime::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case runtime::DType::Float32: return t.data<float>()[i];
    case runtime::DType::Int64: return static_cast<double>(t.data<int64_t>()[i]);
    case runtime::DType::Float64: return t.data<double>()[i];
    case runtime::DType::Int32: return t.data<int32_t>()[i];
    case runtime::DType::Int8: return t.data<int8_t>()[i];
    case runtime::DType::UInt8:
    case runtime::DType::Bool: return t.data<uint8_t>()[i];
  }
  return 0;
}

std::string lastLine(const std::string& text) {
  std::string s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

}  // namespace

Result<CrossCheck> checkCrossTarget(std::shared_ptr<const Model> model, const BuildOptions& options) {
  return guarded<CrossCheck>(model ? sourceOf(*model) : "", [&] {
    KILN_ASSERT(model != nullptr, "checkCrossTarget() needs a model");
    ScratchDir scratch("cross");
    const std::string dir = (fs::path(scratch.path()) / "module").string();
    auto exported = exportModel(model, options, dir);
    if (!exported) throw Error(exported.error().message, exported.error().kind);
    CrossCheck c;
    c.targetString = exported.value().targetString;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      int64_t bytes = static_cast<int64_t>(entry.file_size());
      c.moduleBytes += bytes;
      std::string name = entry.path().filename().string();
      if (name.rfind("kernels.", 0) == 0 && bytes > c.kernelsBytes) {
        c.kernelsFile = name;
        c.kernelsBytes = bytes;
      }
    }
    if (c.kernelsFile != "kernels.wasm") {
      c.note = "no emulator runs it from here (ctest's test_cross_aarch64 runs aarch64 modules under qemu)";
      return c;
    }
    const std::string node = onPath("node");
    const std::string script = (fs::path(webDirectory()) / "run_model.mjs").string();
    if (node.empty() || !fs::exists(script)) {
      c.note = node.empty() ? "no node on PATH to run it (scripts/install-deps.sh installs nodejs)"
                            : "the JavaScript runtime " + script + " is missing (set KILN_WEB_DIR)";
      return c;
    }
    // The host build on the same inputs is the reference.
    BuildOptions host = options;
    host.target = "llvm";
    auto built = build(model, host);
    if (!built) throw Error(built.error().message, built.error().kind);
    std::vector<runtime::Tensor> inputs = randomInputs(*model);
    auto expected = run(*built.value(), inputs);
    if (!expected) throw Error(expected.error().message, expected.error().kind);

    std::vector<std::string> argv = {node, script, dir};
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::string path = (fs::path(scratch.path()) / ("in" + std::to_string(i) + ".raw")).string();
      writeRaw(path, inputs[i]);
      argv.insert(argv.end(), {"--input", path});
    }
    for (size_t i = 0; i < expected.value().size(); ++i)
      argv.insert(argv.end(), {"--output", (fs::path(scratch.path()) / ("out" + std::to_string(i) + ".raw")).string()});
    profiler::ProcessResult ran = profiler::runProcess(argv, 600);
    if (!ran.started) throw Error("cannot start node: " + ran.error, ErrorKind::Io);
    if (ran.timedOut) throw Error("the wasm module ran for more than 600 s in Node", ErrorKind::Io);
    if (ran.exitCode != 0)
      throw Error("the wasm module failed in Node: " + lastLine(ran.err.empty() ? ran.out : ran.err), ErrorKind::Io);
    c.runner = "node";
    for (size_t i = 0; i < expected.value().size(); ++i) {
      const runtime::Tensor& want = expected.value()[i];
      runtime::Tensor got =
          readRaw((fs::path(scratch.path()) / ("out" + std::to_string(i) + ".raw")).string(), want);
      for (int64_t k = 0; k < want.numel(); ++k) {
        double w = elementAsDouble(want, k), g = elementAsDouble(got, k);
        c.outputScale = std::max(c.outputScale, std::abs(w));
        c.maxAbsDiff = std::max(c.maxAbsDiff, std::isnan(g) != std::isnan(w) ? INFINITY : std::abs(g - w));
      }
    }
    return c;
  });
}

}  // namespace kiln::app
