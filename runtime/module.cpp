// Loading an exported module: host checks (architecture, CPU features), dlopen of the kernel
// library, signature check, and a GraphExecutor over the module's plan.
#include "runtime/module.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include "runtime/error.h"
#include "runtime/kernel_abi.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;

/// LLVM feature name → the flag Linux prints for it in /proc/cpuinfo. Only instruction-set
/// features: LLVM's tuning flags have no entry and are not checked. RDRAND and RDSEED are left
/// out: compilers emit them only for their intrinsics, which kernels never call, and Linux hides
/// them on CPUs with errata (RDSEED on Zen 5) whose CPUID still reports them, so checking them
/// refused -mcpu=skylake modules on a machine that runs them.
struct FeatureFlag {
  std::string_view llvm, cpuinfo;
};

constexpr FeatureFlag kX86Flags[] = {
    {"cmov", "cmov"},           {"mmx", "mmx"},
    {"sse", "sse"},             {"sse2", "sse2"},
    {"sse3", "pni"},            {"ssse3", "ssse3"},
    {"sse4.1", "sse4_1"},       {"sse4.2", "sse4_2"},
    {"sse4a", "sse4a"},         {"popcnt", "popcnt"},
    {"cx16", "cx16"},           {"movbe", "movbe"},
    {"avx", "avx"},             {"avx2", "avx2"},
    {"fma", "fma"},             {"fma4", "fma4"},
    {"xop", "xop"},             {"f16c", "f16c"},
    {"bmi", "bmi1"},            {"bmi2", "bmi2"},
    {"lzcnt", "abm"},           {"adx", "adx"},
    {"aes", "aes"},             {"pclmul", "pclmulqdq"},
    {"sha", "sha_ni"},          {"vaes", "vaes"},
    {"vpclmulqdq", "vpclmulqdq"}, {"gfni", "gfni"},
    {"avx512f", "avx512f"},     {"avx512cd", "avx512cd"},
    {"avx512bw", "avx512bw"},   {"avx512dq", "avx512dq"},
    {"avx512vl", "avx512vl"},   {"avx512ifma", "avx512ifma"},
    {"avx512vbmi", "avx512vbmi"}, {"avx512vbmi2", "avx512_vbmi2"},
    {"avx512vnni", "avx512_vnni"}, {"avx512bitalg", "avx512_bitalg"},
    {"avx512vpopcntdq", "avx512_vpopcntdq"}, {"avx512bf16", "avx512_bf16"},
    {"avx512fp16", "avx512_fp16"}, {"avx512vp2intersect", "avx512_vp2intersect"},
    {"avxvnni", "avx_vnni"},    {"amx-tile", "amx_tile"},
    {"amx-int8", "amx_int8"},   {"amx-bf16", "amx_bf16"},
};

constexpr FeatureFlag kAArch64Flags[] = {
    {"fp-armv8", "fp"}, {"neon", "asimd"},    {"crc", "crc32"},     {"aes", "aes"},
    {"sha2", "sha2"},   {"sha3", "sha3"},     {"lse", "atomics"},   {"rdm", "asimdrdm"},
    {"dotprod", "asimddp"}, {"fullfp16", "fphp"}, {"rcpc", "lrcpc"}, {"sve", "sve"},
    {"sve2", "sve2"},   {"i8mm", "i8mm"},     {"bf16", "bf16"},
};

/// The feature flags of the first CPU in /proc/cpuinfo ("flags" on x86, "Features" on Arm).
/// Empty when unknown, and when the file describes another architecture than this program's
/// (user-mode emulation, e.g. qemu-aarch64 on x86-64, shows the host's).
std::set<std::string> cpuinfoFlags() {
#if defined(__aarch64__) || defined(__arm__)
  const char* key = "Features";
#else
  const char* key = "flags";
#endif
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    std::set<std::string> flags;
    std::string w;
    while (words >> w) flags.insert(w);
    return flags;
  }
  return {};
}

/// The architecture part of an LLVM triple, with Apple's spelling of AArch64 folded in.
std::string tripleArch(const std::string& triple) {
  std::string arch = triple.substr(0, triple.find('-'));
  if (arch == "arm64") return "aarch64";
  if (arch == "amd64") return "x86_64";
  return arch;
}

std::string hostOs() {
#if defined(__linux__)
  return "linux";
#elif defined(__APPLE__)
  return "darwin";
#else
  return "unknown";
#endif
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& item : items) s += (s.empty() ? "" : ", ") + item;
  return s;
}

/// Kernels of one dlopen'ed library.
class SharedLibrary final : public KernelLibrary {
 public:
  explicit SharedLibrary(void* handle) : m_handle(handle) {}
  ~SharedLibrary() override { dlclose(m_handle); }
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  KilnKernelFn lookup(const std::string& symbol) override {
    return reinterpret_cast<KilnKernelFn>(dlsym(m_handle, symbol.c_str()));
  }
  const char* signature() const { return static_cast<const char*>(dlsym(m_handle, kModuleSignatureSymbol)); }

 private:
  void* m_handle;
};

/// Generated kernels call kiln_parallel_launch, which the library leaves undefined: it must be
/// in the process's global scope. When this runtime is itself a shared library opened with
/// RTLD_LOCAL (Python's ctypes does that), it is promoted to the global scope first.
void promoteRuntimeToGlobalScope() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&kiln_parallel_launch), &self) == 0 || self.dli_fname == nullptr) return;
  void* handle = dlopen(self.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL);
  if (handle != nullptr) dlclose(handle);  // the promotion stays; only the extra reference goes
}

constexpr const char* kExportHint =
    "; the program must export the runtime's kiln_parallel_launch: link it with "
    "libkiln_runtime_shared.so, or link the static runtime into the executable with "
    "-Wl,--dynamic-list=runtime/kiln_runtime.dynlist (CMake targets linking kiln_runtime do)";

std::shared_ptr<SharedLibrary> openLibrary(const std::string& dir, const ModuleInfo& info) {
  const fs::path lib = fs::path(dir) / info.library;
  std::error_code ec;
  if (!fs::exists(lib, ec)) {
    const fs::path object = fs::path(dir) / kModuleObjectFile;
    if (fs::exists(object, ec))
      throw Error(lib.string() + " is missing: the module holds only the object file " + kModuleObjectFile +
                      "; link it for this machine with `cc -shared -o " + lib.string() + " " + object.string() + " -lm`",
                  ErrorKind::InvalidModel);
    throw Error(lib.string() + ": no such file (the module is incomplete)", ErrorKind::InvalidModel);
  }
  promoteRuntimeToGlobalScope();
  // dlopen returns an already loaded library of the same path as it is, even when the file was
  // replaced since (a module directory exported again, a cache entry compiled again). So a path
  // loaded before is opened through a symbolic link of a name never used: the dynamic loader
  // then tells files apart by device and inode, and maps a replaced file anew (an unchanged one
  // is still shared).
  const std::string path = fs::absolute(lib).string();
  void* earlier = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (earlier) dlclose(earlier);
  dlerror();
  std::string openPath = path;
  fs::path linkDir;
  if (earlier) {
    std::string pattern = (fs::temp_directory_path() / "kiln-module-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) {
      linkDir = pattern;
      fs::create_symlink(path, linkDir / info.library, ec);
      if (!ec) openPath = (linkDir / info.library).string();
    }
  }
  void* handle = dlopen(openPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!linkDir.empty()) fs::remove_all(linkDir, ec);
  if (handle == nullptr) {
    const char* error = dlerror();
    const std::string why = error != nullptr ? error : "unknown dlopen error";
    const bool runtimeMissing = why.find("kiln_parallel_launch") != std::string::npos;
    throw Error(lib.string() + ": cannot load the kernel library: " + why + (runtimeMissing ? kExportHint : ""),
                runtimeMissing ? ErrorKind::Usage : ErrorKind::InvalidModel);
  }
  auto library = std::make_shared<SharedLibrary>(handle);
  const char* signature = library->signature();
  if (signature == nullptr)
    throw Error(lib.string() + ": not a Kiln kernel library (no " + kModuleSignatureSymbol + ")",
                ErrorKind::InvalidModel);
  if (info.signature != signature) {
    throw Error(lib.string() + ": belongs to another export than graph.txt (signature mismatch)",
                ErrorKind::InvalidModel);
  }
  return library;
}

}  // namespace

std::string hostArchitecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__i386__)
  return "i386";
#elif defined(__riscv) && __riscv_xlen == 64
  return "riscv64";
#else
  return "unknown";
#endif
}

std::vector<std::string> missingCpuFeatures(const std::vector<std::string>& features) {
  const std::set<std::string> flags = cpuinfoFlags();
  if (flags.empty()) return {};  // cannot tell here: trust the module
  const std::string arch = hostArchitecture();
  std::vector<std::string> missing;
  auto check = [&](const auto& table) {
    for (const std::string& f : features) {
      for (const FeatureFlag& entry : table) {
        if (entry.llvm == f && !flags.count(std::string(entry.cpuinfo))) missing.push_back(f);
      }
    }
  };
  if (arch == "x86_64" || arch == "i386") check(kX86Flags);
  if (arch == "aarch64") check(kAArch64Flags);
  return missing;
}

void checkModuleRunsHere(const ModuleInfo& info, const std::string& dir) {
  const std::string arch = tripleArch(info.triple);
  if (arch != hostArchitecture() || info.triple.find(hostOs()) == std::string::npos)
    throw Error(dir + ": kernels were compiled for " + info.triple + " (target '" + info.target +
                    "'), this machine is " + hostArchitecture() + "-" + hostOs() +
                    (info.triple.rfind("wasm", 0) == 0 ? " (run a WebAssembly module with node web/run_model.mjs DIR)" : ""),
                ErrorKind::IncompatibleModule);
  std::vector<std::string> missing = missingCpuFeatures(info.cpuFeatures);
  if (!missing.empty())
    throw Error(dir + ": kernels were compiled for CPU '" + info.cpu + "' and need CPU features this machine lacks: " +
                    joined(missing) + " (export again with --target llvm, or a -mcpu this CPU supports)",
                ErrorKind::IncompatibleModule);
}

std::unique_ptr<Module> Module::load(const std::string& dir) {
  ModuleContents contents = readModule(dir);
  checkModuleRunsHere(contents.info, dir);
  std::shared_ptr<SharedLibrary> library = openLibrary(dir, contents.info);
  std::unique_ptr<Module> module(new Module());
  module->m_path = dir;
  module->m_info = std::move(contents.info);
  try {
    module->m_executor = std::make_unique<GraphExecutor>(std::move(contents.plan), library);
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    throw Error(dir + ": " + e.what(), ErrorKind::InvalidModel);
  }
  return module;
}

std::vector<Tensor> Module::run(const std::vector<Tensor>& inputs) {
  GraphExecutor& ex = *m_executor;
  if (static_cast<int>(inputs.size()) != ex.numInputs())
    throw Error("the module takes " + std::to_string(ex.numInputs()) + " input(s), got " + std::to_string(inputs.size()),
                ErrorKind::InvalidInput);
  for (size_t i = 0; i < inputs.size(); ++i) ex.setInput(static_cast<int>(i), inputs[i]);
  ex.run();
  std::vector<Tensor> outputs;
  for (int i = 0; i < ex.numOutputs(); ++i) outputs.push_back(ex.output(i));
  return outputs;
}

}  // namespace kiln::runtime
