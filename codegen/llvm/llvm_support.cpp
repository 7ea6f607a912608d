#include "codegen/llvm/llvm_support.h"

#include <sstream>

#include <mutex>

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/DiagnosticHandler.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Triple.h>

#include "runtime/error.h"

namespace kiln::codegen {

void initializeLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
  });
}

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const Target& target) {
  initializeLLVM();
  std::string err;
  const llvm::Target* llvmTarget = llvm::TargetRegistry::lookupTarget(target.triple, err);
  if (llvmTarget == nullptr)
    throw Error("unknown target triple '" + target.triple + "': " + err, ErrorKind::Usage);
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(
      llvmTarget->createTargetMachine(target.triple, target.cpu, target.features, options,
                                      // WebAssembly links statically (wasm-ld, no shared libraries).
                                      llvm::Triple(target.triple).isWasm() ? llvm::Reloc::Static : llvm::Reloc::PIC_,
                                      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm) throw InternalError("cannot create an LLVM target machine for '" + target.str() + "'");
  return tm;
}

void optimizeModule(llvm::Module& module, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  llvm::PassBuilder pb(&tm, tuning);
  llvm::TargetLibraryInfoImpl libraryInfo(llvm::Triple(module.getTargetTriple()));
  fam.registerPass([&] { return tm.getTargetIRAnalysis(); });
  fam.registerPass([&] { return llvm::TargetLibraryAnalysis(libraryInfo); });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
}

namespace {

class LogHandler : public llvm::DiagnosticHandler {
 public:
  explicit LogHandler(std::shared_ptr<DiagnosticLog> log) : m_log(std::move(log)) {}
  bool handleDiagnostics(const llvm::DiagnosticInfo& info) override {
    if (info.getSeverity() != llvm::DS_Error) return true;
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::DiagnosticPrinterRawOStream printer(os);
    info.print(printer);
    if (!m_log->errors.empty()) m_log->errors += "; ";
    m_log->errors += os.str();
    return true;
  }

 private:
  std::shared_ptr<DiagnosticLog> m_log;
};

}  // namespace

std::shared_ptr<DiagnosticLog> captureDiagnostics(llvm::LLVMContext& ctx) {
  auto log = std::make_shared<DiagnosticLog>();
  ctx.setDiagnosticHandler(std::make_unique<LogHandler>(log));
  return log;
}

void throwIfDiagnosed(const DiagnosticLog& log, const std::string& context) {
  if (!log.errors.empty()) throw InternalError(context + ": " + log.errors);
}

void throwIfError(llvm::Error err, const std::string& context) {
  if (!err) return;
  throw InternalError(context + ": " + llvm::toString(std::move(err)));
}

std::vector<std::string> splitFeatures(const std::string& features) {
  std::vector<std::string> out;
  std::stringstream in(features);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace kiln::codegen
