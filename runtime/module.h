// Exported modules: the on-disk form of a compiled model, and the loader that runs one with the
// runtime alone (no compiler, no LLVM, no libtorch). `kiln compile MODEL -o DIR` writes one.
//
// A module is a directory:
//
//   DIR/graph.txt    the plan, as line-based text (format below): format version, Kiln version,
//                    target, the CPU features the kernels may use, tensor slots, kernel calls,
//                    inputs, outputs and the table of constants
//   DIR/params.bin   the constants: the 16-byte header "KILNPRM1" + u64 little-endian data size,
//                    then every constant's bytes at the 64-byte aligned offset graph.txt gives
//   DIR/kernels.so   the kernels, a shared library exporting one `void NAME(void* const*)` per
//                    kernel (runtime/kernel_abi.h) and the C string `kiln_module_signature`. It
//                    leaves `kiln_parallel_launch` undefined: the loading process provides it
//                    (libkiln_runtime_shared.so, or an executable that exports the runtime's C
//                    symbols, which every executable linking kiln_runtime does)
//   DIR/kernels.o    cross-compiled modules without a cross linker: the object file, to be
//                    linked on the target with `cc -shared -o kernels.so kernels.o -lm`
//
// graph.txt is one record per line, fields separated by one space. Names are percent-escaped
// (bytes outside '!'..'~' and '%' itself as %XX; the empty string as a lone %), so every field
// is one token; shapes are written [1,3,224,224] and dtypes by their short names (f32, i64, ...).
//
//   kiln-module 1                       always first: the format version (1, or 2 with control flow)
//   kiln-version 0.1.0
//   target llvm -mcpu=skylake           the rest of the line
//   triple x86_64-pc-linux-gnu
//   cpu skylake
//   features avx avx2 fma ...           LLVM names of the features enabled for the kernels
//   library kernels.so
//   signature 0123456789abcdef...       must equal the library's kiln_module_signature
//   params params.bin BYTES FNV1A64HEX  data size and checksum of params.bin after its header
//   slot ID KIND INDEX DTYPE SHAPE NAME KIND: input | constant | intermediate
//   call KERNEL NUM_OUTPUTS ARG,ARG,... NODE
//   control if|loop NUM_OUTPUTS ARG,ARG,... NODE REGION,...   (version 2) an If/Loop call
//   input SLOT                          forward-argument order
//   output SLOT                         flattened output order
//   constant ID DTYPE SHAPE OFFSET BYTES
//   region ID                           (version 2) sub-plan ID of the plan being read: its own
//   ...                                 slot, call, control, input, output, constant and region
//   endregion                           records (numbered from 0), up to its endregion
//   end
//
// A control call's REGIONs index the `region` blocks of its own plan (graph_plan.h, CallKind);
// every plan's constants live in the one params.bin.
//
// Compatibility: a loader reads format versions kModuleFormatMinVersion to kModuleFormatVersion;
// anything else is a kiln::Error that says which version the module has and which this runtime
// reads. The writer writes version 1 unless the plan has control flow, so such modules still load
// in runtimes that read only version 1 (older ones, web/kiln_runtime.mjs). Loading also checks the
// architecture (triple) and the CPU features against this machine, params.bin's size and
// checksum, and the library's signature, so a module for another CPU gives an error, not SIGILL,
// and files mixed from two exports are refused.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/graph_executor.h"
#include "runtime/graph_plan.h"

namespace kiln::runtime {

/// The newest module format this runtime reads and writes (2: control flow), and the oldest it
/// reads.
constexpr int kModuleFormatVersion = 2;
constexpr int kModuleFormatMinVersion = 1;

inline constexpr const char* kModuleGraphFile = "graph.txt";
inline constexpr const char* kModuleParamsFile = "params.bin";
inline constexpr const char* kModuleLibraryFile = "kernels.so";
inline constexpr const char* kModuleObjectFile = "kernels.o";
/// The C string every exported kernel library defines.
inline constexpr const char* kModuleSignatureSymbol = "kiln_module_signature";

struct ModuleInfo {
  int formatVersion = kModuleFormatVersion;  // as read (saveModule picks the version it writes)
  std::string kilnVersion;
  std::string target;                    // canonical target string ("llvm -mcpu=skylake")
  std::string triple;                    // "x86_64-pc-linux-gnu"
  std::string cpu;                       // "skylake"
  std::vector<std::string> cpuFeatures;  // LLVM feature names the kernels may use
  std::string library = kModuleLibraryFile;
  std::string signature;                 // random hex token shared with the library
};

/// A module's plan and constants, read without loading its library.
struct ModuleContents {
  ModuleInfo info;
  GraphPlan plan;
};

/// Writes DIR/graph.txt and DIR/params.bin (creating DIR); the library is codegen's to write.
/// Throws kiln::Error (Io) when a file cannot be written.
void saveModule(const std::string& dir, const GraphPlan& plan, const ModuleInfo& info);

/// Reads graph.txt and params.bin, checking the format version, params.bin's size and checksum.
/// Throws kiln::Error naming the file and line on anything malformed.
ModuleContents readModule(const std::string& dir);

/// A fresh random signature (32 hex digits).
std::string newModuleSignature();

/// Checks that a library built for `info` can run here: architecture and CPU features. Throws
/// kiln::Error naming what is missing.
void checkModuleRunsHere(const ModuleInfo& info, const std::string& dir);

/// The names among `features` (LLVM names) that this CPU lacks. Names the runtime cannot check
/// (tuning flags, features of another architecture) are not reported.
std::vector<std::string> missingCpuFeatures(const std::vector<std::string>& features);

/// "x86_64", "aarch64", ...: the architecture this runtime was compiled for.
std::string hostArchitecture();

/// An exported module loaded for running. Owns the kernel library (dlopen'ed) and an executor.
class Module {
 public:
  /// Reads and checks DIR, opens its library and resolves every kernel. Throws kiln::Error.
  static std::unique_ptr<Module> load(const std::string& dir);

  const std::string& path() const { return m_path; }
  const ModuleInfo& info() const { return m_info; }
  GraphExecutor& executor() { return *m_executor; }
  const GraphExecutor& executor() const { return *m_executor; }

  /// One inference: inputs in forward-argument order; returns the outputs (copies).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

 private:
  Module() = default;
  std::string m_path;
  ModuleInfo m_info;
  std::unique_ptr<GraphExecutor> m_executor;
};

}  // namespace kiln::runtime
