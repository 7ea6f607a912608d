// In-process compilation of loop-IR functions: TIR → LLVM IR → LLVM's O3 pipeline → ORC LLJIT.
// The resulting library resolves kernel symbols for the runtime's GraphExecutor. LLVM types never
// appear in this header, so only codegen/ includes LLVM.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "core/tir/stmt.h"
#include "runtime/graph_plan.h"

namespace kiln::codegen {

/// What one JitLibrary::compile did: the structure that decides compile time, independent of how
/// fast or busy the machine is.
struct JitStats {
  int objects = 0;         // object files code generation produced (one: every kernel compiled once)
  size_t objectBytes = 0;  // their size: machine code, constants and relocations
  int kernels = 0;         // kernel entry points resolved
};

class JitLibrary : public runtime::KernelLibrary {
 public:
  ~JitLibrary() override;
  /// Compiles all functions into one module. Throws kiln::Error when the target is not runnable
  /// here or code generation fails.
  static std::shared_ptr<JitLibrary> compile(const std::vector<core::tir::PrimFunc>& funcs,
                                             const Target& target);
  KilnKernelFn lookup(const std::string& symbol) override;
  const JitStats& stats() const;

 private:
  struct Impl;
  explicit JitLibrary(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

/// Textual LLVM IR of the functions, before (optimize=false) or after the O3 pipeline.
std::string emitLLVMIR(const std::vector<core::tir::PrimFunc>& funcs, const Target& target, bool optimize = true);
/// Target assembly of the optimized module.
std::string emitAssembly(const std::vector<core::tir::PrimFunc>& funcs, const Target& target);

}  // namespace kiln::codegen
