#include "codegen/export.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/llvm/codegen_llvm.h"
#include "codegen/llvm/llvm_support.h"
#include "runtime/error.h"
#include "runtime/module.h"

extern char** environ;

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;

void addSignature(llvm::Module& module, const std::string& signature) {
  llvm::Constant* text = llvm::ConstantDataArray::getString(module.getContext(), signature, /*AddNull=*/true);
  // Owned by the module, as every LLVM global is.
  auto* global = new llvm::GlobalVariable(module, text->getType(), /*isConstant=*/true,
                                          llvm::GlobalValue::ExternalLinkage, text, runtime::kModuleSignatureSymbol);
  global->setAlignment(llvm::Align(1));
}

std::vector<std::string> splitWords(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  std::string w;
  while (in >> w) words.push_back(w);
  return words;
}

/// The full path of an executable found on PATH (or `name` itself when it holds a '/'), or "".
std::string findInPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

/// The first line of the driver's output that says "error", else its first line.
std::string firstErrorLine(const std::string& output) {
  std::istringstream in(output);
  std::string line, first;
  while (std::getline(in, line)) {
    if (first.empty() && !line.empty()) first = line;
    if (line.find("error") != std::string::npos) return line;
  }
  return first.empty() ? "no output" : first;
}

/// Runs argv (no shell) with stdout and stderr captured; returns {exit status or -1, output}.
std::pair<int, std::string> runCaptured(const std::vector<std::string>& argv) {
  char logName[] = "/tmp/kiln_link_XXXXXX";
  int logFd = ::mkstemp(logName);
  if (logFd < 0) throw Error(std::string("cannot create a temporary file: ") + std::strerror(errno), ErrorKind::Io);
  ::unlink(logName);  // the descriptor keeps it alive

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, logFd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, logFd, STDERR_FILENO);
  pid_t pid = 0;
  int err = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    ::close(logFd);
    throw Error("cannot run the linker driver '" + argv[0] + "': " + std::strerror(err) +
                    " (install gcc, or set KILN_CC to a C compiler driver)",
                ErrorKind::Io);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string output;
  ::lseek(logFd, 0, SEEK_SET);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(logFd, buf, sizeof buf)) > 0) output.append(buf, static_cast<size_t>(n));
  ::close(logFd);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace

void emitObjectFile(const std::vector<core::tir::PrimFunc>& funcs, const Target& target, const std::string& path,
                    const std::string& signature) {
  llvm::LLVMContext ctx;
  ctx.setDiscardValueNames(true);
  std::shared_ptr<DiagnosticLog> diagnostics = captureDiagnostics(ctx);
  std::unique_ptr<llvm::TargetMachine> tm = createTargetMachine(target);
  std::unique_ptr<llvm::Module> module = buildModule(funcs, target, *tm, ctx);
  optimizeModule(*module, *tm);
  throwIfDiagnosed(*diagnostics, "optimizing the module");
  addSignature(*module, signature);

  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec, llvm::sys::fs::OF_None);
  if (ec) throw Error(path + ": cannot write file: " + ec.message(), ErrorKind::Io);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, out, nullptr, llvm::CodeGenFileType::ObjectFile))
    throw InternalError("target '" + target.str() + "' cannot emit object files");
  pm.run(*module);
  out.close();
  if (out.has_error()) {
    const std::string why = out.error().message();
    out.clear_error();  // else its destructor aborts the process
    throw Error(path + ": write failed: " + why, ErrorKind::Io);
  }
  throwIfDiagnosed(*diagnostics, "object code for '" + target.str() + "'");
}

std::vector<std::string> targetFeatures(const Target& target) {
  std::unique_ptr<llvm::TargetMachine> tm = createTargetMachine(target);
  const llvm::MCSubtargetInfo* sti = tm->getMCSubtargetInfo();
  std::vector<std::string> names;
  for (const llvm::SubtargetFeatureKV& kv : sti->getAllProcessorFeatures()) {
    if (sti->getFeatureBits().test(kv.Value)) names.emplace_back(kv.Key);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string crossDriverName(const Target& target) {
  return llvm::Triple(target.triple).getArchName().str() + "-linux-gnu-gcc";
}

bool isHostSystem(const Target& target) {
  const llvm::Triple t(target.triple), host(llvm::sys::getProcessTriple());
  return t.getArch() == host.getArch() && t.getOS() == host.getOS() && t.getObjectFormat() == host.getObjectFormat();
}

std::string findLinkerDriver(const Target& target) {
  if (const char* env = std::getenv("KILN_CC"); env && *env) return env;
  if (isHostSystem(target)) {
    for (const char* name : {"cc", "gcc", "clang"}) {
      if (!findInPath(name).empty()) return name;
    }
    return "";
  }
  if (!llvm::Triple(target.triple).isOSLinux()) return "";
  std::string cross = crossDriverName(target);
  return findInPath(cross).empty() ? "" : cross;
}

void linkSharedLibrary(const std::string& driver, const std::string& object, const std::string& library) {
  std::vector<std::string> argv = splitWords(driver);
  if (argv.empty()) throw Error("empty linker driver command", ErrorKind::Usage);
  // Into a temporary name first: a library of this path may be loaded in this process, and
  // rewriting its file in place would corrupt the mapped code.
  const std::string tmp = library + ".tmp";
  for (const char* a : {"-shared", "-o"}) argv.emplace_back(a);
  argv.push_back(tmp);
  argv.push_back(object);
  argv.emplace_back("-lm");
  auto [status, output] = runCaptured(argv);
  if (status != 0) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error("linking " + library + " with '" + driver + "' failed (exit " + std::to_string(status) +
                    "): " + firstErrorLine(output),
                ErrorKind::Io);
  }
  std::error_code ec;
  fs::rename(tmp, library, ec);
  if (ec) throw Error(library + ": cannot write file: " + ec.message(), ErrorKind::Io);
}

bool isWasmTarget(const Target& target) { return llvm::Triple(target.triple).isWasm(); }

std::string libraryFileName(const Target& target) {
  return isWasmTarget(target) ? "kernels.wasm" : runtime::kModuleLibraryFile;
}

std::string findWasmLinker() {
  if (const char* env = std::getenv("KILN_WASM_LD"); env && *env) return findInPath(env);
  for (const char* name : {"wasm-ld-19", "wasm-ld", "/usr/lib/llvm-19/bin/wasm-ld"}) {
    std::string found = findInPath(name);
    if (!found.empty()) return found;
  }
  return "";
}

std::string findWasiLibc() {
  std::error_code ec;
  if (const char* env = std::getenv("KILN_WASI_LIBC"); env && *env) return fs::is_regular_file(env, ec) ? env : "";
  const char* debian = "/usr/lib/wasm32-wasi/libc.a";
  return fs::is_regular_file(debian, ec) ? debian : "";
}

void linkWasmModule(const std::string& linker, const std::string& libc, const std::string& object,
                    const std::string& library, const std::vector<std::string>& exports) {
  const std::string tmp = library + ".tmp";
  std::vector<std::string> argv = {linker, "-o", tmp, object, libc,
                                   // A library of kernels, no main; 8 MiB of stack for the kernels'
                                   // local tiles (64 KiB each at most), placed first so an overflow
                                   // traps instead of overwriting data.
                                   "--no-entry", "-z", "stack-size=8388608", "--stack-first",
                                   "--export=aligned_alloc", "--export=free", "-O2", "--strip-debug"};
  for (const std::string& name : exports) argv.push_back("--export=" + name);
  auto [status, output] = runCaptured(argv);
  if (status != 0) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error("linking " + library + " with '" + linker + "' failed (exit " + std::to_string(status) +
                    "): " + firstErrorLine(output),
                ErrorKind::Io);
  }
  std::error_code ec;
  fs::rename(tmp, library, ec);
  if (ec) throw Error(library + ": cannot write file: " + ec.message(), ErrorKind::Io);
}

ExportedLibrary exportLibrary(const std::vector<core::tir::PrimFunc>& funcs, const Target& target,
                              const std::string& objectPath, const std::string& libraryPath,
                              const std::string& signature) {
  ExportedLibrary out;
  out.cpuFeatures = targetFeatures(target);
  if (isWasmTarget(target)) {
    out.linker = findWasmLinker();
    if (out.linker.empty())
      throw Error(libraryPath + ": cannot link kernels for " + target.triple +
                      ": no wasm-ld (install lld-19, or set KILN_WASM_LD to LLVM's wasm-ld)",
                  ErrorKind::Io);
    const std::string libc = findWasiLibc();
    if (libc.empty()) {
      const char* env = std::getenv("KILN_WASI_LIBC");
      const std::string where = env && *env ? std::string("KILN_WASI_LIBC=") + env + " is not a file"
                                            : "no /usr/lib/wasm32-wasi/libc.a";
      throw Error(libraryPath + ": cannot link kernels for " + target.triple + ": " + where +
                      " (install wasi-libc, or set KILN_WASI_LIBC to its libc.a)",
                  ErrorKind::Io);
    }
    emitObjectFile(funcs, target, objectPath, signature);
    std::vector<std::string> exports = {runtime::kModuleSignatureSymbol};
    for (const core::tir::PrimFunc& f : funcs) exports.push_back(f.name);
    linkWasmModule(out.linker, libc, objectPath, libraryPath, exports);
    std::error_code ec;
    fs::remove(objectPath, ec);
    out.libraryPath = libraryPath;
    return out;
  }
  // Without a linker for the target, stop before the code generation (the slow part).
  out.linker = findLinkerDriver(target);
  if (out.linker.empty() && isHostSystem(target))
    throw Error("cannot link " + libraryPath + ": no C compiler driver on PATH (looked for cc, gcc, clang); "
                "install gcc or set KILN_CC",
                ErrorKind::Io);
  if (out.linker.empty() && llvm::Triple(target.triple).isOSLinux()) {
    const std::string cross = crossDriverName(target);
    std::string package = "gcc-" + cross.substr(0, cross.size() - 4);  // gcc-aarch64-linux-gnu
    std::replace(package.begin(), package.end(), '_', '-');            // gcc-x86-64-linux-gnu
    throw Error(libraryPath + ": cannot link kernels for " + target.triple + ": no cross linker " + cross +
                    " on PATH (install " + package + ", or set KILN_CC to a C compiler driver for that target)",
                ErrorKind::Io);
  }
  emitObjectFile(funcs, target, objectPath, signature);
  if (out.linker.empty()) {
    out.objectPath = objectPath;
    out.note = "no linker for " + target.triple + " (Kiln finds cross linkers for Linux targets; set KILN_CC to a "
               "driver that links for this one): wrote the object file only; link it on the target with "
               "`cc -shared -o kernels.so kernels.o -lm`";
    return out;
  }
  linkSharedLibrary(out.linker, objectPath, libraryPath);
  std::error_code ec;
  fs::remove(objectPath, ec);
  out.libraryPath = libraryPath;
  return out;
}

}  // namespace kiln::codegen
