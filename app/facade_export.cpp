// The façade's export half: `kiln compile` writes a module directory, `kiln run DIR` loads one.
#include "app/facade.h"

#include "app/facade_internal.h"

#include <filesystem>

#include "codegen/export.h"
#include "runtime/module.h"
#include "runtime/thread_pool.h"

namespace kiln::app {
namespace {

namespace fs = std::filesystem;

/// Refuses to write into a directory that holds anything but an earlier module.
void prepareDirectory(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw Error(dir + ": exists and is not a directory (a module is written as a directory)", ErrorKind::Io);
  if (fs::is_directory(dir, ec) && !fs::is_empty(dir, ec) && !isModuleDirectory(dir))
    throw Error(dir + ": directory is not empty and holds no Kiln module; choose another output path",
                ErrorKind::Io);
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir + ": cannot create directory: " + ec.message(), ErrorKind::Io);
}

void removeIfPresent(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

}  // namespace

bool isModuleDirectory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(fs::path(path) / runtime::kModuleGraphFile, ec);
}

Result<ExportResult> exportModel(std::shared_ptr<const Model> model, const BuildOptions& options,
                                 const std::string& outPath) {
  return guarded<ExportResult>(model ? sourceOf(*model) : "", [&] {
    KILN_ASSERT(model != nullptr, "exportModel() needs a model");
    if (outPath.empty()) throw Error("no output path for the module", ErrorKind::Usage);
    const std::string ext = fs::path(outPath).extension().string();
    if (ext == ".so" || ext == ".o" || ext == ".wasm")
      throw Error(outPath + ": a module is a directory (kernels.so or kernels.wasm, graph.txt, params.bin); give a "
                  "directory path",
                  ErrorKind::Usage);
    auto start = std::chrono::steady_clock::now();
    Lowered lowered = lowerFor(*model, options);
    // Before anything is written: the WebAssembly runtime (web/kiln_runtime.mjs) runs no sub-plans.
    if (!lowered.module.plan.regions.empty() && codegen::isWasmTarget(lowered.target))
      throw Error("this model has control flow (if/loop), which the WebAssembly runtime cannot run yet; export it "
                  "for a native target",
                  ErrorKind::Unsupported);
    prepareDirectory(outPath);
    const fs::path dir(outPath);

    runtime::ModuleInfo info;
    info.kilnVersion = version();
    info.target = lowered.target.str();
    info.triple = lowered.target.triple;
    info.cpu = lowered.target.cpu;
    info.signature = runtime::newModuleSignature();
    info.library = codegen::libraryFileName(lowered.target);  // kernels.wasm for WebAssembly
    codegen::ExportedLibrary library =
        codegen::exportLibrary(lowered.module.funcs, lowered.target, (dir / runtime::kModuleObjectFile).string(),
                               (dir / info.library).string(), info.signature);
    info.cpuFeatures = library.cpuFeatures;
    // What an earlier export left and this one does not replace.
    for (const char* stale : {runtime::kModuleLibraryFile, "kernels.wasm", runtime::kModuleObjectFile}) {
      if (library.libraryPath.empty() ? stale != std::string(runtime::kModuleObjectFile) : stale != info.library)
        removeIfPresent(dir / stale);
    }
    // graph.txt is written last: a module is complete once it is there.
    runtime::saveModule(outPath, lowered.module.plan, info);

    ExportResult result;
    result.path = outPath;
    result.targetString = info.target;
    result.linked = !library.libraryPath.empty();
    result.linker = library.linker;
    result.note = library.note;
    result.numKernels = static_cast<int>(lowered.module.funcs.size());
    result.numCalls = static_cast<int>(lowered.module.plan.calls.size());
    for (const std::string& name : {std::string(runtime::kModuleGraphFile), std::string(runtime::kModuleParamsFile),
                                    result.linked ? info.library : std::string(runtime::kModuleObjectFile)}) {
      std::error_code ec;
      result.files.push_back({name, static_cast<uint64_t>(fs::file_size(dir / name, ec))});
    }
    result.compileSeconds = secondsSince(start);
    return result;
  });
}

Result<std::shared_ptr<runtime::Module>> loadModule(const std::string& path, int threads) {
  return guarded<std::shared_ptr<runtime::Module>>("", [&] {
    std::shared_ptr<runtime::Module> module = runtime::Module::load(path);
    if (threads > 0) runtime::setNumThreads(threads);
    return module;
  });
}

Result<std::vector<runtime::Tensor>> runModule(runtime::Module& module, const std::vector<runtime::Tensor>& inputs) {
  return guarded<std::vector<runtime::Tensor>>(module.path(), [&] { return module.run(inputs); });
}

}  // namespace kiln::app
