#include "codegen/llvm/wasm_runtime.h"

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

namespace kiln::codegen {
namespace {

/// `int32_t launch(task, closure, extent[, chunks])`: task(0, extent, closure) when extent > 0.
void defineSerialLaunch(llvm::Function& fn) {
  llvm::LLVMContext& ctx = fn.getContext();
  fn.setLinkage(llvm::GlobalValue::InternalLinkage);
  auto* entry = llvm::BasicBlock::Create(ctx, "entry", &fn);
  auto* run = llvm::BasicBlock::Create(ctx, "run", &fn);
  auto* empty = llvm::BasicBlock::Create(ctx, "empty", &fn);
  llvm::IRBuilder<> b(entry);
  llvm::Value* task = fn.getArg(0);
  llvm::Value* closure = fn.getArg(1);
  llvm::Value* extent = fn.getArg(2);
  b.CreateCondBr(b.CreateICmpSGT(extent, b.getInt64(0)), run, empty);
  b.SetInsertPoint(run);
  auto* taskType = llvm::FunctionType::get(b.getInt32Ty(), {b.getInt64Ty(), b.getInt64Ty(), b.getPtrTy()}, false);
  b.CreateRet(b.CreateCall(taskType, task, {b.getInt64(0), extent, closure}));
  b.SetInsertPoint(empty);
  b.CreateRet(b.getInt32(0));
}

void defineTrap(llvm::Function& fn) {
  fn.setLinkage(llvm::GlobalValue::InternalLinkage);
  fn.setDoesNotReturn();
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(fn.getContext(), "entry", &fn));
  b.CreateIntrinsic(llvm::Intrinsic::trap, {}, {});
  b.CreateUnreachable();
}

}  // namespace

void defineWasmRuntime(llvm::Module& module) {
  for (const char* name : {"kiln_parallel_launch", "kiln_parallel_launch_chunked"}) {
    if (llvm::Function* fn = module.getFunction(name); fn != nullptr && fn->isDeclaration()) defineSerialLaunch(*fn);
  }
  if (llvm::Function* fn = module.getFunction("kiln_bounds_fail"); fn != nullptr && fn->isDeclaration()) defineTrap(*fn);
}

}  // namespace kiln::codegen
