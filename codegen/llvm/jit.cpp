// Optimization (LLVM's O3 new-pass-manager pipeline), ORC LLJIT compilation, and IR/assembly
// emission. Every entry point builds its own LLVMContext, so compilations on different threads
// share no LLVM state beyond the one-time target registration.
#include "codegen/llvm/jit.h"

#include <mutex>
#include <sstream>
#include <unordered_map>

#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectTransformLayer.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/llvm/codegen_llvm.h"
#include "codegen/llvm/llvm_support.h"
#include "core/tir/bounds_check.h"
#include "runtime/error.h"
#include "runtime/kernel_abi.h"

namespace kiln::codegen {
namespace {

std::string printModule(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return os.str();
}

/// Collects errors the ORC session reports outside a lookup's own result.
struct SessionErrors {
  std::mutex mutex;
  std::string text;
};

}  // namespace

/// Counts the object files the JIT links (code generation may run on another thread).
struct ObjectCount {
  std::mutex mutex;
  int objects = 0;
  size_t bytes = 0;
};

struct JitLibrary::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unordered_map<std::string, KilnKernelFn> kernels;
  std::shared_ptr<SessionErrors> errors = std::make_shared<SessionErrors>();
  JitStats stats;
};

JitLibrary::JitLibrary(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
JitLibrary::~JitLibrary() = default;

std::shared_ptr<JitLibrary> JitLibrary::compile(const std::vector<core::tir::PrimFunc>& funcs,
                                                const Target& target) {
  if (!target.runnable) {
    throw Error("target '" + target.str() +
                    "' cannot run on this machine (cross-compilation targets are export only)",
                ErrorKind::Usage);
  }
  initializeLLVM();
  auto ctx = std::make_unique<llvm::LLVMContext>();
  ctx->setDiscardValueNames(true);
  std::shared_ptr<DiagnosticLog> diagnostics = captureDiagnostics(*ctx);

  llvm::orc::JITTargetMachineBuilder builder{llvm::Triple(target.triple)};
  builder.setCPU(target.cpu);
  builder.addFeatures(splitFeatures(target.features));
  builder.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  builder.setRelocationModel(llvm::Reloc::PIC_);
  builder.setCodeModel(llvm::CodeModel::Small);
  auto tm = builder.createTargetMachine();
  throwIfError(tm.takeError(), "jit: target machine for '" + target.str() + "'");

  // KILN_BOUNDS_CHECK=1: every kernel that runs checks its accesses (core/tir/bounds_check.h);
  // printed IR and exported objects stay as lowered.
  std::vector<core::tir::PrimFunc> checked;
  if (core::tir::boundsCheckRequested()) {
    for (const core::tir::PrimFunc& f : funcs) checked.push_back(core::tir::insertBoundsChecks(f));
  }
  std::unique_ptr<llvm::Module> module = buildModule(checked.empty() ? funcs : checked, target, **tm, *ctx);
  optimizeModule(*module, **tm);
  throwIfDiagnosed(*diagnostics, "optimizing the module");

  auto impl = std::make_unique<Impl>();
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(builder)).create();
  throwIfError(jit.takeError(), "jit: cannot create the JIT");
  impl->jit = std::move(*jit);
  llvm::orc::LLJIT& lljit = *impl->jit;
  std::shared_ptr<SessionErrors> errors = impl->errors;
  lljit.getExecutionSession().setErrorReporter([errors](llvm::Error err) {
    std::lock_guard<std::mutex> lock(errors->mutex);
    if (!errors->text.empty()) errors->text += "; ";
    errors->text += llvm::toString(std::move(err));
  });

  // The runtime's launcher by its real address (the executable need not export it), then libc
  // and libm (expf, tanhf, erff, aligned_alloc, ...) from the process.
  llvm::orc::JITDylib& dylib = lljit.getMainJITDylib();
  llvm::orc::SymbolMap runtimeSymbols;
  runtimeSymbols[lljit.mangleAndIntern("kiln_parallel_launch")] =
      llvm::orc::ExecutorSymbolDef(llvm::orc::ExecutorAddr::fromPtr(&kiln_parallel_launch),
                                   llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  runtimeSymbols[lljit.mangleAndIntern("kiln_parallel_launch_chunked")] =
      llvm::orc::ExecutorSymbolDef(llvm::orc::ExecutorAddr::fromPtr(&kiln_parallel_launch_chunked),
                                   llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  runtimeSymbols[lljit.mangleAndIntern("kiln_bounds_fail")] =  // bounds-checked kernels only
      llvm::orc::ExecutorSymbolDef(llvm::orc::ExecutorAddr::fromPtr(&kiln_bounds_fail),
                                   llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  throwIfError(dylib.define(llvm::orc::absoluteSymbols(std::move(runtimeSymbols))), "jit: runtime symbols");
  auto process =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(lljit.getDataLayout().getGlobalPrefix());
  throwIfError(process.takeError(), "jit: process symbols");
  dylib.addGenerator(std::move(*process));

  auto objects = std::make_shared<ObjectCount>();
  lljit.getObjTransformLayer().setTransform(
      [objects](std::unique_ptr<llvm::MemoryBuffer> object) -> llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> {
        std::lock_guard<std::mutex> lock(objects->mutex);
        ++objects->objects;
        objects->bytes += object->getBufferSize();
        return object;
      });

  throwIfError(lljit.addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(ctx))), "jit");
  // Materialize everything now: errors surface here, and lookup() is a plain map read.
  for (const core::tir::PrimFunc& f : funcs) {
    auto addr = lljit.lookup(f.name);
    if (!addr) {
      std::string message = llvm::toString(addr.takeError());
      std::lock_guard<std::mutex> lock(errors->mutex);
      if (!errors->text.empty()) message += " (" + errors->text + ")";
      throw InternalError("jit: cannot compile kernel '" + f.name + "': " + message);
    }
    impl->kernels[f.name] = addr->toPtr<KilnKernelFn>();
  }
  throwIfDiagnosed(*diagnostics, "jit: machine code generation");
  {
    std::lock_guard<std::mutex> lock(objects->mutex);
    impl->stats.objects = objects->objects;
    impl->stats.objectBytes = objects->bytes;
  }
  impl->stats.kernels = static_cast<int>(impl->kernels.size());
  return std::shared_ptr<JitLibrary>(new JitLibrary(std::move(impl)));
}

KilnKernelFn JitLibrary::lookup(const std::string& symbol) {
  auto it = m_impl->kernels.find(symbol);
  return it == m_impl->kernels.end() ? nullptr : it->second;
}

const JitStats& JitLibrary::stats() const { return m_impl->stats; }

std::string emitLLVMIR(const std::vector<core::tir::PrimFunc>& funcs, const Target& target, bool optimize) {
  llvm::LLVMContext ctx;
  std::shared_ptr<DiagnosticLog> diagnostics = captureDiagnostics(ctx);
  std::unique_ptr<llvm::TargetMachine> tm = createTargetMachine(target);
  std::unique_ptr<llvm::Module> module = buildModule(funcs, target, *tm, ctx);
  if (optimize) optimizeModule(*module, *tm);
  throwIfDiagnosed(*diagnostics, "optimizing the module");
  return printModule(*module);
}

std::string emitAssembly(const std::vector<core::tir::PrimFunc>& funcs, const Target& target) {
  llvm::LLVMContext ctx;
  std::shared_ptr<DiagnosticLog> diagnostics = captureDiagnostics(ctx);
  std::unique_ptr<llvm::TargetMachine> tm = createTargetMachine(target);
  std::unique_ptr<llvm::Module> module = buildModule(funcs, target, *tm, ctx);
  optimizeModule(*module, *tm);
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream os(text);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile)) {
    throw InternalError("target '" + target.str() + "' cannot emit assembly");
  }
  pm.run(*module);
  throwIfDiagnosed(*diagnostics, "assembly for '" + target.str() + "'");
  return std::string(text.str());
}

}  // namespace kiln::codegen
