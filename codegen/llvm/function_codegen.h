// The per-PrimFunc TIR → LLVM IR emitter behind buildModule (codegen/llvm/codegen_llvm.h, which
// documents the lowering rules). Expressions are in codegen_expr.cpp, statements, loops and
// parallel outlining in codegen_llvm.cpp. Dispatch is a switch over the X-macro kind lists, so
// adding a TIR node kind fails to compile here until it has a visit() overload.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "codegen/target.h"
#include "core/tir/stmt.h"

namespace kiln::codegen {

class FunctionCodeGen {
 public:
  FunctionCodeGen(llvm::Module& module, const Target& target, const core::tir::PrimFunc& func);
  /// Emits `void NAME(ptr args)` and its outlined tasks.
  void run();

 private:
  using Value = llvm::Value;

  struct AliasInfo {
    llvm::MDNode* scope = nullptr;    // !alias.scope list for accesses to this buffer
    llvm::MDNode* noalias = nullptr;  // !noalias list: every other buffer of the function
  };

  // What changes when code generation moves into an outlined task function.
  struct FunctionState {
    llvm::Function* fn = nullptr;
    std::unordered_map<const core::tir::Var*, Value*> vars;
    std::unordered_map<const core::tir::BufferNode*, Value*> buffers;
    // One stack slot per Allocate'd buffer, reused when an unrolled body allocates it again.
    std::unordered_map<const core::tir::BufferNode*, llvm::AllocaInst*> allocas;
    bool inParallel = false;
  };

  // --- expressions (codegen_expr.cpp) ---
  Value* emit(const core::tir::Expr& e);
  Value* visit(const core::tir::IntImm* op);
  Value* visit(const core::tir::FloatImm* op);
  Value* visit(const core::tir::Var* op);
  Value* visit(const core::tir::Cast* op);
  Value* visit(const core::tir::Add* op);
  Value* visit(const core::tir::Sub* op);
  Value* visit(const core::tir::Mul* op);
  Value* visit(const core::tir::Div* op);
  Value* visit(const core::tir::Mod* op);
  Value* visit(const core::tir::Min* op);
  Value* visit(const core::tir::Max* op);
  Value* visit(const core::tir::EQ* op);
  Value* visit(const core::tir::NE* op);
  Value* visit(const core::tir::LT* op);
  Value* visit(const core::tir::LE* op);
  Value* visit(const core::tir::GT* op);
  Value* visit(const core::tir::GE* op);
  Value* visit(const core::tir::And* op);
  Value* visit(const core::tir::Or* op);
  Value* visit(const core::tir::Not* op);
  Value* visit(const core::tir::Select* op);
  Value* visit(const core::tir::Load* op);
  Value* visit(const core::tir::Ramp* op);
  Value* visit(const core::tir::Broadcast* op);
  Value* visit(const core::tir::Call* op);

  Value* compare(const core::tir::Expr& a, const core::tir::Expr& b, llvm::CmpInst::Predicate signedPred,
                 llvm::CmpInst::Predicate unsignedPred, llvm::CmpInst::Predicate floatPred);
  Value* minMax(const core::tir::Expr& a, const core::tir::Expr& b, bool isMax);
  Value* libmCall(const std::string& name, Value* x, const core::tir::Type& type);
  Value* dot4U8I8(const std::vector<Value*>& args, unsigned lanes);  // the int8 dot-product intrinsic
  Value* castValue(Value* v, const core::tir::Type& from, const core::tir::Type& to);

  // --- memory ---
  /// Element address(es): a scalar pointer, or a vector of pointers for a non-contiguous index.
  Value* bufferBase(const core::tir::Buffer& buffer);
  Value* toIndex(Value* v, const core::tir::Type& type);
  void tagAccess(llvm::Instruction* inst, const core::tir::Buffer& buffer);
  llvm::AllocaInst* entryAlloca(llvm::Type* type, const std::string& name, unsigned align);

  // --- statements (codegen_llvm.cpp) ---
  void emit(const core::tir::Stmt& s);
  void visit(const core::tir::For* op);
  void visit(const core::tir::Store* op);
  void visit(const core::tir::Seq* op);
  void visit(const core::tir::IfThenElse* op);
  void visit(const core::tir::Allocate* op);
  void visit(const core::tir::LetStmt* op);
  void visit(const core::tir::Evaluate* op);

  enum class LoopHint { None, Vectorize, UnrollFull };
  void emitLoop(const core::tir::For* op, Value* begin, Value* end, LoopHint hint);
  void emitUnrolled(const core::tir::For* op);
  void emitParallel(const core::tir::For* op);
  llvm::MDNode* loopMetadata(const core::tir::For* op, LoopHint hint);

  static llvm::FastMathFlags fastMathFlags(const core::tir::PrimFunc& func);
  void collectAliasScopes();
  /// Binds `var` for a scope; returns the previous binding for unbindVar.
  Value* bindVar(const core::tir::Expr& var, Value* value);
  void unbindVar(const core::tir::Expr& var, Value* previous);
  void startBlock(llvm::BasicBlock* block);
  llvm::Function* declareFunction(const std::string& name, llvm::FunctionType* type, bool external);
  [[noreturn]] void fail(const std::string& message) const;

  llvm::LLVMContext& m_ctx;
  llvm::Module& m_module;
  const Target& m_target;
  const core::tir::PrimFunc& m_func;
  llvm::IRBuilder<> m_b;
  FunctionState m_state;
  std::unordered_map<const core::tir::BufferNode*, AliasInfo> m_alias;
  int m_taskCount = 0;
};

/// The LLVM type of a TIR type (bool is i1; vectors are fixed vectors).
llvm::Type* llvmType(llvm::LLVMContext& ctx, const core::tir::Type& type);
/// The in-memory LLVM type of a buffer element (bool is stored as i8).
llvm::Type* memoryType(llvm::LLVMContext& ctx, const core::tir::Type& type);

}  // namespace kiln::codegen
