// The WebAssembly rows of side-by-side measurements (issue 20): `kiln-wasm` (Kiln's wasm32 module
// run by the JavaScript runtime in Node) and `onnxruntime-web` (npm onnxruntime-web's WASM
// backend in Node, on the ONNX file the onnxruntime row runs), each served by web/bench_worker.mjs
// in a Node process of its own (profiler/bench.h's protocol). Unavailable rows say what is missing.
// And the check of an export-only build (app::checkCrossTarget, the Workbench's status line,
// `kiln compile --check`): its module's size and, where something here runs it (Node for wasm32,
// qemu-aarch64 with the aarch64 runtime for aarch64 Linux), its outputs against the host build's.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/input_shapes.h"
#include "app/measure_internal.h"
#include "codegen/export.h"
#include "profiler/subprocess.h"
#include "runtime/module.h"
#include "runtime/tensor.h"
#include "runtime/tensor_values.h"

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

std::string lastLine(const std::string& text) {
  std::string s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

/// Where Debian's cross packages put aarch64's libc and libstdc++ (qemu-aarch64's -L).
constexpr const char* kAarch64Sysroot = "/usr/aarch64-linux-gnu";

/// How this machine runs a module of another target: a program given the module directory, then
/// `--input IN.raw` per input and `--output OUT.raw` per output (web/run_model.mjs in Node, or
/// the aarch64 C example examples/c_api/run_model.c under qemu-aarch64: the same arguments).
struct ModuleRunner {
  std::string name;               // "node", "qemu-aarch64"; "" when nothing here runs it
  std::vector<std::string> argv;  // up to and including the module directory
  std::string note;               // why nothing runs it
};

ModuleRunner nodeRunner(const std::string& dir) {
  const std::string node = onPath("node");
  const std::string script = (fs::path(webDirectory()) / "run_model.mjs").string();
  if (node.empty()) return {"", {}, "no node on PATH to run it (scripts/install-deps.sh installs nodejs)"};
  if (!fs::exists(script)) return {"", {}, "the JavaScript runtime " + script + " is missing (set KILN_WEB_DIR)"};
  return {"node", {node, script, dir}, ""};
}

ModuleRunner qemuAarch64Runner(const std::string& dir, int threads) {
  std::string qemu;
  if (const char* env = std::getenv("KILN_QEMU_AARCH64"); env && *env) {
    if (::access(env, X_OK) != 0)
      return {"", {}, std::string("KILN_QEMU_AARCH64=") + env + " is not an executable (scripts/install-deps.sh installs qemu-user)"};
    qemu = env;
  } else {
    qemu = onPath("qemu-aarch64");
    if (qemu.empty() && ::access(KILN_QEMU_AARCH64, X_OK) == 0) qemu = KILN_QEMU_AARCH64;
    if (qemu.empty()) return {"", {}, "no qemu-aarch64 on PATH to run it (scripts/install-deps.sh installs qemu-user)"};
  }
  std::string runner;
  if (const char* env = std::getenv("KILN_AARCH64_RUNNER"); env && *env) {
    if (!fs::exists(env))
      return {"", {}, std::string("KILN_AARCH64_RUNNER=") + env + " does not exist (the aarch64 run_model the build writes into build/aarch64/)"};
    runner = env;
  } else {
    runner = KILN_AARCH64_RUNNER;
    if (runner.empty() || !fs::exists(runner))
      return {"", {},
              "no aarch64 runtime was built to run it (scripts/install-deps.sh installs gcc-aarch64-linux-gnu and "
              "g++-aarch64-linux-gnu; configure and build kiln again)"};
  }
  std::vector<std::string> argv = {qemu, "-L", kAarch64Sysroot, runner, dir};
  if (threads > 0) argv.insert(argv.end(), {"--threads", std::to_string(threads)});
  return {"qemu-aarch64", argv, ""};
}

/// The architecture of a canonical target string ("llvm -mtriple=aarch64-linux-gnu ..." →
/// "aarch64"); the host's when it names no triple.
std::string architectureOf(const std::string& target) {
  const std::string key = "-mtriple=";
  size_t at = target.find(key);
  if (at == std::string::npos) return runtime::hostArchitecture();
  at += key.size();
  return target.substr(at, target.find_first_of("- ", at) - at);
}

/// Runs `runner` on `inputs` (raw files in `scratch`) and reads its outputs, shaped like `like`.
std::vector<runtime::Tensor> runElsewhere(const ModuleRunner& runner, const std::string& scratch,
                                          const std::vector<runtime::Tensor>& inputs,
                                          const std::vector<runtime::Tensor>& like,
                                          const std::function<bool()>& cancelled) {
  std::vector<std::string> argv = runner.argv;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string path = (fs::path(scratch) / ("in" + std::to_string(i) + ".raw")).string();
    writeRaw(path, inputs[i]);
    argv.insert(argv.end(), {"--input", path});
  }
  auto outputPath = [&](size_t i) { return (fs::path(scratch) / ("out" + std::to_string(i) + ".raw")).string(); };
  for (size_t i = 0; i < like.size(); ++i) argv.insert(argv.end(), {"--output", outputPath(i)});
  constexpr double kTimeoutSeconds = 1800;  // ResNet-50 under emulation on a busy machine
  profiler::ProcessResult ran = profiler::runProcess(argv, kTimeoutSeconds, cancelled);
  if (ran.cancelled) throw Error("cancelled", ErrorKind::Usage);
  if (!ran.started) throw Error("cannot start " + runner.name + ": " + ran.error, ErrorKind::Io);
  if (ran.timedOut)
    throw Error("the module ran for more than " + std::to_string(int(kTimeoutSeconds)) + " s in " + runner.name,
                ErrorKind::Io);
  if (ran.exitCode != 0)
    throw Error("the module failed in " + runner.name + ": " + lastLine(ran.err.empty() ? ran.out : ran.err),
                ErrorKind::Io);
  std::vector<runtime::Tensor> outputs;
  for (size_t i = 0; i < like.size(); ++i) outputs.push_back(readRaw(outputPath(i), like[i]));
  return outputs;
}

/// Sets c.maxAbsDiff (a NaN on one side only counts as infinitely far) and c.outputScale.
void measureAgreement(CrossCheck& c, const std::vector<runtime::Tensor>& got, const std::vector<runtime::Tensor>& want) {
  KILN_ASSERT(got.size() == want.size(), "the module returned " + std::to_string(got.size()) + " outputs, expected " +
                                             std::to_string(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    KILN_ASSERT(got[i].numel() == want[i].numel(), "output " + std::to_string(i) + " has another size");
    for (int64_t k = 0; k < want[i].numel(); ++k) {
      double w = runtime::elementAsDouble(want[i], k), g = runtime::elementAsDouble(got[i], k);
      c.outputScale = std::max(c.outputScale, std::abs(w));
      c.maxAbsDiff = std::max(c.maxAbsDiff, std::isnan(g) != std::isnan(w) ? INFINITY : std::abs(g - w));
    }
  }
}

/// The module's files' sizes into c (kernelsFile: the largest kernels.* file).
void measureModule(CrossCheck& c, const std::string& dir) {
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
}

}  // namespace

Result<CrossCheck> checkCrossTarget(std::shared_ptr<const Model> model, const BuildOptions& options,
                                    const std::string& moduleDir, const std::function<bool()>& cancelled) {
  return guarded<CrossCheck>(model ? sourceOf(*model) : "", [&] {
    KILN_ASSERT(model != nullptr, "checkCrossTarget() needs a model");
    ScratchDir scratch("cross");
    CrossCheck c;
    std::string dir = moduleDir;
    if (dir.empty()) {
      dir = (fs::path(scratch.path()) / "module").string();
      auto exported = exportModel(model, options, dir);
      if (!exported) throw Error(exported.error().message, exported.error().kind);
      c.targetString = exported.value().targetString;
    } else {
      c.targetString = runtime::readModule(dir).info.target;
    }
    measureModule(c, dir);

    // What runs it here: Node for wasm32, qemu-user for aarch64 Linux, this process's runtime for
    // a module of this machine (its CPU features checked when it loads).
    ModuleRunner runner;
    const std::string arch = architectureOf(c.targetString);
    if (c.kernelsFile == "kernels.wasm") runner = nodeRunner(dir);
    else if (c.kernelsFile == "kernels.so" && arch == runtime::hostArchitecture()) runner.name = "kiln runtime";
    else if (c.kernelsFile == "kernels.so" && arch == "aarch64") runner = qemuAarch64Runner(dir, options.threads);
    else if (c.kernelsFile == "kernels.o") runner.note = "its kernels are an object file only (no linker for its OS)";
    else runner.note = "no emulator runs " + arch + " modules from here (Kiln runs wasm32 in Node and aarch64 in qemu-user)";
    if (runner.name.empty()) {
      c.note = runner.note;
      return c;
    }

    // A module of this machine is loaded first: one for CPU features this CPU lacks is a note.
    std::shared_ptr<runtime::Module> inProcess;
    if (runner.argv.empty()) {
      auto loaded = loadModule(dir, options.threads);
      if (!loaded && loaded.error().kind == ErrorKind::IncompatibleModule) {
        c.note = loaded.error().message;
        return c;
      }
      if (!loaded) throw Error(loaded.error().message, loaded.error().kind);
      inProcess = loaded.value();
    }

    // The host build on the same inputs is the reference.
    BuildOptions host = options;
    host.target = "llvm";
    auto built = build(model, host);
    if (!built) throw Error(built.error().message, built.error().kind);
    std::vector<runtime::Tensor> inputs = randomInputs(*model);
    auto expected = run(*built.value(), inputs);
    if (!expected) throw Error(expected.error().message, expected.error().kind);

    std::vector<runtime::Tensor> got;
    if (inProcess) {
      auto outputs = runModule(*inProcess, inputs);
      if (!outputs) throw Error(outputs.error().message, outputs.error().kind);
      got = outputs.value();
    } else {
      got = runElsewhere(runner, scratch.path(), inputs, expected.value(), cancelled);
    }
    c.runner = runner.name;
    measureAgreement(c, got, expected.value());
    return c;
  });
}

}  // namespace kiln::app
