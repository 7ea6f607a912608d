// Statements, loops, parallel outlining and module assembly of the TIR → LLVM IR emitter.
//
// Parallel loops. `parallel (i, min, extent) body` becomes
//     closure = { min, <every outer Var the body reads>, <every outer buffer pointer it uses> }
//     kiln_parallel_launch(NAME.parK, &closure, extent)
// (kiln_parallel_launch_chunked(..., chunks) when the kernel's attrs["parallel_chunks"] is set)
// with an internal task `i32 NAME.parK(i64 begin, i64 end, ptr closure)` that reloads the
// captured values and runs `for (i = min + begin; i < min + end; ++i) body`. The closure lives in
// the caller's entry block (the launch returns only when every chunk is done). Inside a task,
// further Parallel loops are ordinary serial loops (the runtime runs nested launches serially
// anyway; outlining them would only add overhead).
#include "codegen/llvm/codegen_llvm.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>
#include <unordered_set>

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/llvm/function_codegen.h"
#include "codegen/llvm/wasm_runtime.h"
#include "core/tir/functor.h"
#include "runtime/error.h"

namespace kiln::codegen {

using namespace core::tir;  // NOLINT: the visit() overloads name every node kind

namespace {

constexpr uint64_t kMaxStackAllocBytes = 64 * 1024;
constexpr int64_t kMaxReplicatedUnroll = 64;
constexpr int64_t kMaxForcedVectorWidth = 16;

/// Vars and buffers a statement uses, in order of first use (deterministic output).
class UseCollector : public IRVisitor {
 public:
  std::vector<const Var*> vars;
  std::vector<const BufferNode*> buffers;

  void addBuffer(const BufferNode* b) {
    if (m_seenBuffers.insert(b).second) buffers.push_back(b);
  }

 protected:
  using IRVisitor::visit;
  void visit(const Var* op) override {
    if (m_seenVars.insert(op).second) vars.push_back(op);
  }
  void visit(const Load* op) override {
    addBuffer(op->buffer.get());
    IRVisitor::visit(op);
  }
  void visit(const Store* op) override {
    addBuffer(op->buffer.get());
    IRVisitor::visit(op);
  }
  void visit(const Allocate* op) override {
    addBuffer(op->buffer.get());
    IRVisitor::visit(op);
  }

 private:
  std::unordered_set<const Var*> m_seenVars;
  std::unordered_set<const BufferNode*> m_seenBuffers;
};

}  // namespace

FunctionCodeGen::FunctionCodeGen(llvm::Module& module, const Target& target, const PrimFunc& func)
    : m_ctx(module.getContext()), m_module(module), m_target(target), m_func(func), m_b(module.getContext()) {
  m_b.setFastMathFlags(fastMathFlags(func));
}

llvm::FastMathFlags FunctionCodeGen::fastMathFlags(const PrimFunc& func) {
  llvm::FastMathFlags fmf;
  fmf.setAllowContract(true);  // a*b+c may become an FMA; nothing else by default (expr.h)
  auto it = func.attrs.find("fast_math");
  if (it == func.attrs.end()) return fmf;
  std::stringstream in(it->second);
  std::string flag;
  using Setter = void (llvm::FastMathFlags::*)(bool);
  static const std::pair<const char*, Setter> kFlags[] = {
      {"reassoc", &llvm::FastMathFlags::setAllowReassoc},
      {"nnan", &llvm::FastMathFlags::setNoNaNs},
      {"ninf", &llvm::FastMathFlags::setNoInfs},
      {"nsz", &llvm::FastMathFlags::setNoSignedZeros},
      {"arcp", &llvm::FastMathFlags::setAllowReciprocal},
      {"contract", &llvm::FastMathFlags::setAllowContract},
      {"afn", &llvm::FastMathFlags::setApproxFunc},
      {"fast", &llvm::FastMathFlags::setFast},
  };
  while (std::getline(in, flag, ',')) {
    if (flag.empty()) continue;
    auto known =
        std::find_if(std::begin(kFlags), std::end(kFlags), [&](const auto& f) { return flag == f.first; });
    if (known == std::end(kFlags)) {
      throw InternalError("codegen of kernel '" + func.name + "': unknown fast_math flag '" + flag + "'");
    }
    (fmf.*(known->second))(true);
  }
  return fmf;
}

void FunctionCodeGen::fail(const std::string& message) const {
  throw InternalError("codegen of kernel '" + m_func.name + "': " + message);
}

llvm::Function* FunctionCodeGen::declareFunction(const std::string& name, llvm::FunctionType* type,
                                                 bool external) {
  auto linkage = external ? llvm::GlobalValue::ExternalLinkage : llvm::GlobalValue::InternalLinkage;
  llvm::Function* fn = llvm::Function::Create(type, linkage, name, m_module);
  if (fn->getName() != name) fail("symbol '" + name + "' is defined twice");
  fn->addFnAttr("target-cpu", m_target.cpu);
  if (!m_target.features.empty()) fn->addFnAttr("target-features", m_target.features);
  fn->addFnAttr("no-trapping-math", "true");
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  return fn;
}

void FunctionCodeGen::collectAliasScopes() {
  UseCollector uses;
  for (const Buffer& p : m_func.params) uses.addBuffer(p.get());
  uses.visitStmt(m_func.body);
  llvm::MDBuilder md(m_ctx);
  llvm::MDNode* domain = md.createAnonymousAliasScopeDomain(m_func.name);
  std::vector<llvm::MDNode*> scopes;
  for (const BufferNode* b : uses.buffers) scopes.push_back(md.createAnonymousAliasScope(domain, b->name));
  for (size_t i = 0; i < scopes.size(); ++i) {
    std::vector<llvm::Metadata*> others;
    for (size_t j = 0; j < scopes.size(); ++j) {
      if (j != i) others.push_back(scopes[j]);
    }
    AliasInfo& info = m_alias[uses.buffers[i]];
    info.scope = llvm::MDNode::get(m_ctx, {scopes[i]});
    info.noalias = others.empty() ? nullptr : llvm::MDNode::get(m_ctx, others);
  }
}

void FunctionCodeGen::run() {
  collectAliasScopes();
  llvm::Type* ptrTy = llvm::PointerType::get(m_ctx, 0);
  auto* type = llvm::FunctionType::get(m_b.getVoidTy(), {ptrTy}, false);
  llvm::Function* fn = declareFunction(m_func.name, type, true);
  llvm::Argument* args = fn->getArg(0);
  args->setName("args");
  for (auto kind : {llvm::Attribute::NoAlias, llvm::Attribute::NoCapture, llvm::Attribute::ReadOnly,
                    llvm::Attribute::NonNull, llvm::Attribute::NoUndef}) {
    fn->addParamAttr(0, kind);
  }
  m_state = FunctionState{};
  m_state.fn = fn;
  startBlock(llvm::BasicBlock::Create(m_ctx, "entry"));
  llvm::MDNode* empty = llvm::MDNode::get(m_ctx, {});
  for (size_t i = 0; i < m_func.params.size(); ++i) {
    const Buffer& param = m_func.params[i];
    Value* slot = m_b.CreateConstInBoundsGEP1_64(ptrTy, args, i);
    llvm::LoadInst* ptr = m_b.CreateAlignedLoad(ptrTy, slot, llvm::Align(8), param->name);
    ptr->setMetadata(llvm::LLVMContext::MD_nonnull, empty);
    ptr->setMetadata(llvm::LLVMContext::MD_noundef, empty);
    ptr->setMetadata(llvm::LLVMContext::MD_invariant_load, empty);
    m_state.buffers[param.get()] = ptr;
  }
  emit(m_func.body);
  m_b.CreateRetVoid();
}

void FunctionCodeGen::startBlock(llvm::BasicBlock* block) {
  block->insertInto(m_state.fn);
  m_b.SetInsertPoint(block);
}

FunctionCodeGen::Value* FunctionCodeGen::bindVar(const Expr& var, Value* value) {
  Value*& slot = m_state.vars[var.as<Var>()];
  Value* previous = slot;
  slot = value;
  return previous;
}

void FunctionCodeGen::unbindVar(const Expr& var, Value* previous) {
  if (previous != nullptr)
    m_state.vars[var.as<Var>()] = previous;
  else
    m_state.vars.erase(var.as<Var>());
}

llvm::AllocaInst* FunctionCodeGen::entryAlloca(llvm::Type* type, const std::string& name, unsigned align) {
  llvm::BasicBlock& entry = m_state.fn->getEntryBlock();
  llvm::IRBuilder<> b(&entry, entry.getFirstInsertionPt());
  llvm::AllocaInst* slot = b.CreateAlloca(type, nullptr, name);
  slot->setAlignment(llvm::Align(align));
  return slot;
}

// ---- statements ------------------------------------------------------------------------------

void FunctionCodeGen::emit(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
#define KILN_X(name) \
  case StmtKind::name: visit(static_cast<const name*>(s.get())); return;
    KILN_TIR_STMT_KINDS(KILN_X)
#undef KILN_X
  }
  fail("unknown statement kind");
}

void FunctionCodeGen::visit(const Seq* op) {
  for (const Stmt& s : op->stmts) emit(s);
}

void FunctionCodeGen::visit(const Evaluate* op) { emit(op->value); }

void FunctionCodeGen::visit(const LetStmt* op) {
  Value* value = emit(op->value);
  Value* previous = bindVar(op->var, value);
  emit(op->body);
  unbindVar(op->var, previous);
}

void FunctionCodeGen::visit(const IfThenElse* op) {
  Value* cond = emit(op->cond);
  auto* thenBlock = llvm::BasicBlock::Create(m_ctx, "if.then");
  auto* elseBlock = op->elseCase.defined() ? llvm::BasicBlock::Create(m_ctx, "if.else") : nullptr;
  auto* endBlock = llvm::BasicBlock::Create(m_ctx, "if.end");
  m_b.CreateCondBr(cond, thenBlock, elseBlock != nullptr ? elseBlock : endBlock);
  startBlock(thenBlock);
  emit(op->thenCase);
  m_b.CreateBr(endBlock);
  if (elseBlock != nullptr) {
    startBlock(elseBlock);
    emit(op->elseCase);
    m_b.CreateBr(endBlock);
  }
  startBlock(endBlock);
}

void FunctionCodeGen::visit(const Allocate* op) {
  const Buffer& buffer = op->buffer;
  if (buffer->elemType.code == Type::Code::Handle || buffer->elemType.isVector()) {
    fail("local buffer '" + buffer->name + "' has unsupported element type " + buffer->elemType.str());
  }
  llvm::Type* mem = memoryType(m_ctx, buffer->elemType);
  const uint64_t numel = static_cast<uint64_t>(std::max<int64_t>(buffer->numel(), 0));
  const uint64_t bytes = numel * (mem->getScalarSizeInBits() / 8);
  Value* ptr = nullptr;
  const bool onHeap = bytes > kMaxStackAllocBytes;
  if (!onHeap) {
    llvm::AllocaInst*& slot = m_state.allocas[buffer.get()];
    if (slot == nullptr) slot = entryAlloca(llvm::ArrayType::get(mem, numel), buffer->name, 64);
    ptr = slot;
  } else {
    // size_t: 64 bits on the native targets, 32 on wasm32.
    llvm::Type* sizeTy = m_b.getIntPtrTy(m_module.getDataLayout());
    llvm::Type* ptrTy = m_b.getPtrTy();
    auto allocFn =
        m_module.getOrInsertFunction("aligned_alloc", llvm::FunctionType::get(ptrTy, {sizeTy, sizeTy}, false));
    const uint64_t rounded = (bytes + 63) / 64 * 64;
    ptr = m_b.CreateCall(allocFn, {llvm::ConstantInt::get(sizeTy, 64), llvm::ConstantInt::get(sizeTy, rounded)},
                         buffer->name);
  }
  Value*& binding = m_state.buffers[buffer.get()];
  Value* previous = binding;
  binding = ptr;
  emit(op->body);
  if (previous != nullptr)
    m_state.buffers[buffer.get()] = previous;
  else
    m_state.buffers.erase(buffer.get());
  if (onHeap) {
    auto freeFn = m_module.getOrInsertFunction(
        "free", llvm::FunctionType::get(m_b.getVoidTy(), {m_b.getPtrTy()}, false));
    m_b.CreateCall(freeFn, {ptr});
  }
}

// ---- loops -----------------------------------------------------------------------------------

void FunctionCodeGen::visit(const For* op) {
  LoopHint hint = LoopHint::None;
  switch (op->forKind) {
    case ForKind::Serial: break;
    case ForKind::Vectorized: hint = LoopHint::Vectorize; break;
    case ForKind::Unrolled: emitUnrolled(op); return;
    case ForKind::Parallel:
      if (!m_state.inParallel) {
        emitParallel(op);
        return;
      }
      break;
  }
  Value* min = emit(op->min);
  Value* extent = emit(op->extent);
  Value* end = m_b.CreateAdd(min, extent, "", false, op->var.type().code == Type::Code::Int);
  emitLoop(op, min, end, hint);
}

llvm::MDNode* FunctionCodeGen::loopMetadata(const For* op, LoopHint hint) {
  if (hint == LoopHint::None) return nullptr;
  std::vector<llvm::Metadata*> ops = {nullptr};  // operand 0 is the loop id itself
  if (hint == LoopHint::UnrollFull) {
    ops.push_back(llvm::MDNode::get(m_ctx, {llvm::MDString::get(m_ctx, "llvm.loop.unroll.full")}));
  } else {
    ops.push_back(llvm::MDNode::get(m_ctx, {llvm::MDString::get(m_ctx, "llvm.loop.vectorize.enable"),
                                            llvm::ConstantAsMetadata::get(m_b.getTrue())}));
    const int64_t* extent = asConstInt(op->extent);
    if (extent != nullptr && *extent >= 2 && (*extent & (*extent - 1)) == 0) {
      const int64_t width = std::min(*extent, kMaxForcedVectorWidth);
      ops.push_back(llvm::MDNode::get(m_ctx, {llvm::MDString::get(m_ctx, "llvm.loop.vectorize.width"),
                                              llvm::ConstantAsMetadata::get(m_b.getInt32(width))}));
    }
  }
  llvm::MDNode* id = llvm::MDNode::getDistinct(m_ctx, ops);
  id->replaceOperandWith(0, id);
  return id;
}

void FunctionCodeGen::emitLoop(const For* op, Value* begin, Value* end, LoopHint hint) {
  const std::string& name = op->var.as<Var>()->name;
  const bool isSigned = op->var.type().code == Type::Code::Int;
  llvm::BasicBlock* preheader = m_b.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(m_ctx, name + ".header");
  auto* body = llvm::BasicBlock::Create(m_ctx, name + ".body");
  auto* exit = llvm::BasicBlock::Create(m_ctx, name + ".exit");
  m_b.CreateBr(header);
  startBlock(header);
  llvm::PHINode* iv = m_b.CreatePHI(begin->getType(), 2, name);
  iv->addIncoming(begin, preheader);
  Value* inRange = isSigned ? m_b.CreateICmpSLT(iv, end) : m_b.CreateICmpULT(iv, end);
  m_b.CreateCondBr(inRange, body, exit);
  startBlock(body);
  Value* previous = bindVar(op->var, iv);
  emit(op->body);
  unbindVar(op->var, previous);
  Value* next = m_b.CreateAdd(iv, llvm::ConstantInt::get(iv->getType(), 1), name + ".next", false, isSigned);
  llvm::BranchInst* backEdge = m_b.CreateBr(header);
  iv->addIncoming(next, m_b.GetInsertBlock());
  if (llvm::MDNode* md = loopMetadata(op, hint)) backEdge->setMetadata(llvm::LLVMContext::MD_loop, md);
  startBlock(exit);
}

void FunctionCodeGen::emitUnrolled(const For* op) {
  const int64_t* extent = asConstInt(op->extent);
  Value* min = emit(op->min);
  if (extent == nullptr || *extent > kMaxReplicatedUnroll) {
    Value* end = m_b.CreateAdd(min, emit(op->extent), "", false, op->var.type().code == Type::Code::Int);
    emitLoop(op, min, end, LoopHint::UnrollFull);
    return;
  }
  const bool isSigned = op->var.type().code == Type::Code::Int;
  for (int64_t k = 0; k < *extent; ++k) {
    Value* iv =
        k == 0 ? min : m_b.CreateAdd(min, llvm::ConstantInt::get(min->getType(), k), "", false, isSigned);
    Value* previous = bindVar(op->var, iv);
    emit(op->body);
    unbindVar(op->var, previous);
  }
}

void FunctionCodeGen::emitParallel(const For* op) {
  Value* min = emit(op->min);
  Value* extent = emit(op->extent);

  // Captured state: min, then outer Vars and buffers the body uses (first-use order).
  UseCollector uses;
  uses.visitStmt(op->body);
  std::vector<Value*> fields = {min};
  std::vector<const Var*> capturedVars;
  std::vector<const BufferNode*> capturedBuffers;
  for (const Var* v : uses.vars) {
    auto it = m_state.vars.find(v);
    if (v == op->var.as<Var>() || it == m_state.vars.end()) continue;
    capturedVars.push_back(v);
    fields.push_back(it->second);
  }
  for (const BufferNode* b : uses.buffers) {
    auto it = m_state.buffers.find(b);
    if (it == m_state.buffers.end()) continue;
    capturedBuffers.push_back(b);
    fields.push_back(it->second);
  }
  std::vector<llvm::Type*> fieldTypes;
  for (Value* f : fields) fieldTypes.push_back(f->getType());
  llvm::StructType* closureType = llvm::StructType::get(m_ctx, fieldTypes);

  const std::string taskName = m_func.name + ".par" + std::to_string(m_taskCount++);
  llvm::Type* ptrTy = m_b.getPtrTy();
  auto* taskType =
      llvm::FunctionType::get(m_b.getInt32Ty(), {m_b.getInt64Ty(), m_b.getInt64Ty(), ptrTy}, false);
  llvm::Function* task = declareFunction(taskName, taskType, false);

  // Caller: fill the closure, launch.
  llvm::AllocaInst* closure = entryAlloca(closureType, taskName + ".closure", 8);
  for (size_t i = 0; i < fields.size(); ++i) {
    m_b.CreateStore(fields[i], m_b.CreateStructGEP(closureType, closure, static_cast<unsigned>(i)));
  }
  // A schedule's parallel granularity (attrs["parallel_chunks"], chunks per thread) picks the
  // chunked launch; without one, the runtime's default split.
  int64_t chunks = 0;
  if (auto it = m_func.attrs.find("parallel_chunks"); it != m_func.attrs.end()) chunks = std::atoll(it->second.c_str());
  std::vector<llvm::Type*> launchParams{ptrTy, ptrTy, m_b.getInt64Ty()};
  std::vector<Value*> launchArgs{task, closure, toIndex(extent, op->extent.type())};
  if (chunks > 0) {
    launchParams.push_back(m_b.getInt64Ty());
    launchArgs.push_back(m_b.getInt64(static_cast<uint64_t>(chunks)));
  }
  auto launchType = llvm::FunctionType::get(m_b.getInt32Ty(), launchParams, false);
  llvm::FunctionCallee launch =
      m_module.getOrInsertFunction(chunks > 0 ? "kiln_parallel_launch_chunked" : "kiln_parallel_launch", launchType);
  if (auto* fn = llvm::dyn_cast<llvm::Function>(launch.getCallee())) fn->setDoesNotThrow();
  m_b.CreateCall(launch, launchArgs);

  // Task: reload the captured state and run [min + begin, min + end).
  FunctionState saved = std::move(m_state);
  llvm::IRBuilderBase::InsertPoint savedIp = m_b.saveIP();
  m_state = FunctionState{};
  m_state.fn = task;
  m_state.inParallel = true;
  llvm::Argument* begin = task->getArg(0);
  llvm::Argument* end = task->getArg(1);
  llvm::Argument* closureArg = task->getArg(2);
  begin->setName("begin");
  end->setName("end");
  closureArg->setName("closure");
  for (auto kind : {llvm::Attribute::NoAlias, llvm::Attribute::NoCapture, llvm::Attribute::ReadOnly,
                    llvm::Attribute::NonNull, llvm::Attribute::NoUndef}) {
    task->addParamAttr(2, kind);
  }
  startBlock(llvm::BasicBlock::Create(m_ctx, "entry"));
  std::vector<Value*> loaded;
  for (size_t i = 0; i < fields.size(); ++i) {
    Value* addr = m_b.CreateStructGEP(closureType, closureArg, static_cast<unsigned>(i));
    loaded.push_back(m_b.CreateLoad(fieldTypes[i], addr));
  }
  for (size_t i = 0; i < capturedVars.size(); ++i) m_state.vars[capturedVars[i]] = loaded[1 + i];
  for (size_t i = 0; i < capturedBuffers.size(); ++i) {
    m_state.buffers[capturedBuffers[i]] = loaded[1 + capturedVars.size() + i];
  }
  const bool isSigned = op->var.type().code == Type::Code::Int;
  llvm::Type* varType = loaded[0]->getType();
  Value* lo = m_b.CreateAdd(loaded[0], m_b.CreateIntCast(begin, varType, true), "", false, isSigned);
  Value* hi = m_b.CreateAdd(loaded[0], m_b.CreateIntCast(end, varType, true), "", false, isSigned);
  emitLoop(op, lo, hi, LoopHint::None);
  m_b.CreateRet(m_b.getInt32(0));

  m_state = std::move(saved);
  m_b.restoreIP(savedIp);
}

// ---- module ----------------------------------------------------------------------------------

std::unique_ptr<llvm::Module> buildModule(const std::vector<PrimFunc>& funcs, const Target& target,
                                          llvm::TargetMachine& tm, llvm::LLVMContext& ctx) {
  auto module = std::make_unique<llvm::Module>("kiln", ctx);
  module->setTargetTriple(target.triple);
  module->setDataLayout(tm.createDataLayout());
  std::set<std::string> names;
  for (const PrimFunc& f : funcs) {
    if (f.name.empty()) throw Error("a kernel has an empty name", ErrorKind::Usage);
    if (!names.insert(f.name).second) throw Error("duplicate kernel name '" + f.name + "'", ErrorKind::Usage);
  }
  for (const PrimFunc& f : funcs) {
    FunctionCodeGen(*module, target, f).run();
  }
  if (llvm::Triple(target.triple).isWasm()) defineWasmRuntime(*module);
  // Verify function by function so the message names the kernel (tasks are "KERNEL.parN").
  for (llvm::Function& fn : *module) {
    if (fn.isDeclaration()) continue;
    std::string message;
    llvm::raw_string_ostream os(message);
    if (llvm::verifyFunction(fn, &os)) {
      std::string kernel = fn.getName().str();
      kernel = kernel.substr(0, kernel.find(".par"));
      throw InternalError("invalid LLVM IR for kernel '" + kernel + "': " + os.str());
    }
  }
  std::string message;
  llvm::raw_string_ostream os(message);
  if (llvm::verifyModule(*module, &os)) throw InternalError("invalid LLVM module: " + os.str());
  return module;
}

}  // namespace kiln::codegen
