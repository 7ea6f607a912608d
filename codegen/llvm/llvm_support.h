// Shared LLVM plumbing for codegen/ (private; never included outside codegen/): one-time target
// initialization, TargetMachine creation from a Kiln Target, and llvm::Error → kiln::Error.
#pragma once

#include <memory>
#include <vector>
#include <string>

#include "codegen/target.h"

namespace llvm {
class Error;
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::codegen {

/// Registers every LLVM target, MC layer, asm printer and parser once (thread-safe).
void initializeLLVM();

/// "+avx2,+fma" → {"+avx2", "+fma"} (empty items dropped).
std::vector<std::string> splitFeatures(const std::string& features);

/// A TargetMachine for `target` (CPU, features, aggressive codegen, PIC). Throws kiln::Error.
std::unique_ptr<llvm::TargetMachine> createTargetMachine(const Target& target);

/// Runs LLVM's O3 pipeline with the target's cost model (TargetIRAnalysis), so the vectorizers
/// see the real vector widths and costs. The JIT and export share it: same code either way.
void optimizeModule(llvm::Module& module, llvm::TargetMachine& tm);

/// Errors LLVM reports through a context's diagnostic handler (backend failures). Warnings and
/// remarks, e.g. "loop not vectorized" for a Vectorized loop LLVM could not vectorize, are
/// dropped: they are not actionable for a Kiln user and would otherwise go to stderr.
struct DiagnosticLog {
  std::string errors;  // empty when none
};

/// Routes `ctx`'s diagnostics into the returned log (instead of stderr, or exit() on errors).
std::shared_ptr<DiagnosticLog> captureDiagnostics(llvm::LLVMContext& ctx);

/// Throws kiln::InternalError("CONTEXT: ERRORS") when `log` recorded an error.
void throwIfDiagnosed(const DiagnosticLog& log, const std::string& context);

/// Throws kiln::InternalError("CONTEXT: MESSAGE") for a failed llvm::Error; no-op on success.
void throwIfError(llvm::Error err, const std::string& context);

}  // namespace kiln::codegen
