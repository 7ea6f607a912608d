// Expressions and memory accesses of the TIR → LLVM IR emitter (see codegen_llvm.h for the rules).
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/MDBuilder.h>

#include "codegen/llvm/function_codegen.h"
#include "codegen/llvm/vector_math.h"
#include "core/tir/bounds_check.h"
#include "runtime/error.h"

namespace kiln::codegen {

using namespace core::tir;  // NOLINT: the visit() overloads name every node kind
using llvm::CmpInst;

namespace {

bool isSignedInt(const Type& t) { return t.code == Type::Code::Int; }

/// A stride-1 Ramp index: the access is one contiguous vector.
const Ramp* contiguousRamp(const Expr& index) {
  const auto* ramp = index.as<Ramp>();
  if (ramp == nullptr) return nullptr;
  const int64_t* stride = asConstInt(ramp->stride);
  return stride != nullptr && *stride == 1 ? ramp : nullptr;
}

llvm::Align elementAlign(llvm::Type* mem) { return llvm::Align(mem->getScalarSizeInBits() / 8); }

}  // namespace

llvm::Type* llvmType(llvm::LLVMContext& ctx, const Type& type) {
  llvm::Type* elem = nullptr;
  switch (type.code) {
    case Type::Code::Int:
    case Type::Code::UInt: elem = llvm::Type::getIntNTy(ctx, type.bits); break;
    case Type::Code::Bool: elem = llvm::Type::getInt1Ty(ctx); break;
    case Type::Code::Handle: elem = llvm::PointerType::get(ctx, 0); break;
    case Type::Code::Float:
      if (type.bits == 16)
        elem = llvm::Type::getHalfTy(ctx);
      else if (type.bits == 64)
        elem = llvm::Type::getDoubleTy(ctx);
      else
        elem = llvm::Type::getFloatTy(ctx);
      break;
  }
  return type.lanes > 1 ? llvm::FixedVectorType::get(elem, type.lanes) : elem;
}

llvm::Type* memoryType(llvm::LLVMContext& ctx, const Type& type) {
  if (type.isBool()) return llvmType(ctx, Type::u8(type.lanes));
  return llvmType(ctx, type);
}

FunctionCodeGen::Value* FunctionCodeGen::emit(const Expr& e) {
  if (!e.defined()) fail("undefined expression");
  switch (e.kind()) {
#define KILN_X(name) \
  case ExprKind::name: return visit(static_cast<const name*>(e.get()));
    KILN_TIR_EXPR_KINDS(KILN_X)
#undef KILN_X
  }
  fail("unknown expression kind");
}

// ---- leaves and casts ------------------------------------------------------------------------

FunctionCodeGen::Value* FunctionCodeGen::visit(const IntImm* op) {
  if (op->type.isFloat())
    return llvm::ConstantFP::get(llvmType(m_ctx, op->type), static_cast<double>(op->value));
  if (op->type.isBool()) return m_b.getInt1(op->value != 0);
  if (!op->type.isInt()) fail("integer literal of type " + op->type.str());
  return llvm::ConstantInt::get(llvmType(m_ctx, op->type), static_cast<uint64_t>(op->value), true);
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const FloatImm* op) {
  return llvm::ConstantFP::get(llvmType(m_ctx, op->type), op->value);
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const Var* op) {
  auto it = m_state.vars.find(op);
  if (it == m_state.vars.end()) fail("unbound variable '" + op->name + "'");
  return it->second;
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const Cast* op) {
  return castValue(emit(op->value), op->value.type(), op->type);
}

FunctionCodeGen::Value* FunctionCodeGen::castValue(Value* v, const Type& from, const Type& to) {
  if (from == to) return v;
  if (from.code == Type::Code::Handle || to.code == Type::Code::Handle) {
    fail("cast between " + from.str() + " and " + to.str());
  }
  llvm::Type* dst = llvmType(m_ctx, to);
  if (to.isBool()) {  // C semantics: non-zero (and NaN) is true
    llvm::Value* zero = llvm::Constant::getNullValue(v->getType());
    return from.isFloat() ? m_b.CreateFCmpUNE(v, zero) : m_b.CreateICmpNE(v, zero);
  }
  if (from.isBool()) return to.isFloat() ? m_b.CreateUIToFP(v, dst) : m_b.CreateZExt(v, dst);
  if (from.isFloat() && to.isFloat()) return m_b.CreateFPCast(v, dst);
  if (from.isFloat()) return isSignedInt(to) ? m_b.CreateFPToSI(v, dst) : m_b.CreateFPToUI(v, dst);
  if (to.isFloat()) return isSignedInt(from) ? m_b.CreateSIToFP(v, dst) : m_b.CreateUIToFP(v, dst);
  return m_b.CreateIntCast(v, dst, isSignedInt(from));
}

// ---- arithmetic ------------------------------------------------------------------------------

FunctionCodeGen::Value* FunctionCodeGen::visit(const Add* op) {
  Value* a = emit(op->a);
  Value* b = emit(op->b);
  if (op->type.isFloat()) return m_b.CreateFAdd(a, b);
  return m_b.CreateAdd(a, b, "", false, isSignedInt(op->type));
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const Sub* op) {
  Value* a = emit(op->a);
  Value* b = emit(op->b);
  if (op->type.isFloat()) return m_b.CreateFSub(a, b);
  return m_b.CreateSub(a, b, "", false, isSignedInt(op->type));
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const Mul* op) {
  Value* a = emit(op->a);
  Value* b = emit(op->b);
  if (op->type.isFloat()) return m_b.CreateFMul(a, b);
  return m_b.CreateMul(a, b, "", false, isSignedInt(op->type));
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const Div* op) {
  Value* a = emit(op->a);
  Value* b = emit(op->b);
  if (op->type.isFloat()) return m_b.CreateFDiv(a, b);
  return isSignedInt(op->type) ? m_b.CreateSDiv(a, b) : m_b.CreateUDiv(a, b);
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const Mod* op) {
  Value* a = emit(op->a);
  Value* b = emit(op->b);
  if (op->type.isFloat()) return m_b.CreateFRem(a, b);
  return isSignedInt(op->type) ? m_b.CreateSRem(a, b) : m_b.CreateURem(a, b);
}

FunctionCodeGen::Value* FunctionCodeGen::minMax(const Expr& x, const Expr& y, bool isMax) {
  Value* a = emit(x);
  Value* b = emit(y);
  const Type& t = x.type();
  if (t.isFloat()) {
    // a > b ? a : b (resp. <): returns b when either is NaN; x86 selects maxps/minps for it.
    Value* pick = isMax ? m_b.CreateFCmpOGT(a, b) : m_b.CreateFCmpOLT(a, b);
    return m_b.CreateSelect(pick, a, b);
  }
  llvm::Intrinsic::ID id = isSignedInt(t) ? (isMax ? llvm::Intrinsic::smax : llvm::Intrinsic::smin)
                                          : (isMax ? llvm::Intrinsic::umax : llvm::Intrinsic::umin);
  return m_b.CreateBinaryIntrinsic(id, a, b);
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const Min* op) { return minMax(op->a, op->b, false); }
FunctionCodeGen::Value* FunctionCodeGen::visit(const Max* op) { return minMax(op->a, op->b, true); }

// ---- comparisons and logic -------------------------------------------------------------------

FunctionCodeGen::Value* FunctionCodeGen::compare(const Expr& x, const Expr& y, CmpInst::Predicate signedPred,
                                                 CmpInst::Predicate unsignedPred,
                                                 CmpInst::Predicate floatPred) {
  Value* a = emit(x);
  Value* b = emit(y);
  const Type& t = x.type();
  if (t.isFloat()) return m_b.CreateFCmp(floatPred, a, b);
  return m_b.CreateICmp(isSignedInt(t) ? signedPred : unsignedPred, a, b);
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const EQ* op) {
  return compare(op->a, op->b, CmpInst::ICMP_EQ, CmpInst::ICMP_EQ, CmpInst::FCMP_OEQ);
}
FunctionCodeGen::Value* FunctionCodeGen::visit(const NE* op) {
  return compare(op->a, op->b, CmpInst::ICMP_NE, CmpInst::ICMP_NE, CmpInst::FCMP_UNE);
}
FunctionCodeGen::Value* FunctionCodeGen::visit(const LT* op) {
  return compare(op->a, op->b, CmpInst::ICMP_SLT, CmpInst::ICMP_ULT, CmpInst::FCMP_OLT);
}
FunctionCodeGen::Value* FunctionCodeGen::visit(const LE* op) {
  return compare(op->a, op->b, CmpInst::ICMP_SLE, CmpInst::ICMP_ULE, CmpInst::FCMP_OLE);
}
FunctionCodeGen::Value* FunctionCodeGen::visit(const GT* op) {
  return compare(op->a, op->b, CmpInst::ICMP_SGT, CmpInst::ICMP_UGT, CmpInst::FCMP_OGT);
}
FunctionCodeGen::Value* FunctionCodeGen::visit(const GE* op) {
  return compare(op->a, op->b, CmpInst::ICMP_SGE, CmpInst::ICMP_UGE, CmpInst::FCMP_OGE);
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const And* op) {
  return m_b.CreateAnd(emit(op->a), emit(op->b));
}
FunctionCodeGen::Value* FunctionCodeGen::visit(const Or* op) {
  return m_b.CreateOr(emit(op->a), emit(op->b));
}
FunctionCodeGen::Value* FunctionCodeGen::visit(const Not* op) { return m_b.CreateNot(emit(op->a)); }

FunctionCodeGen::Value* FunctionCodeGen::visit(const Select* op) {
  Value* cond = emit(op->cond);
  Value* t = emit(op->trueValue);
  Value* f = emit(op->falseValue);
  return m_b.CreateSelect(cond, t, f);
}

// ---- vectors ---------------------------------------------------------------------------------

FunctionCodeGen::Value* FunctionCodeGen::visit(const Ramp* op) {
  Value* base = m_b.CreateVectorSplat(op->lanes, emit(op->base));
  Value* stride = m_b.CreateVectorSplat(op->lanes, emit(op->stride));
  const Type& t = op->base.type();
  std::vector<llvm::Constant*> steps;
  llvm::Type* elem = llvmType(m_ctx, t);
  for (int i = 0; i < op->lanes; ++i) {
    steps.push_back(t.isFloat() ? llvm::ConstantFP::get(elem, i) : llvm::ConstantInt::get(elem, i));
  }
  Value* offsets = llvm::ConstantVector::get(steps);
  if (t.isFloat()) return m_b.CreateFAdd(base, m_b.CreateFMul(stride, offsets));
  const bool nsw = isSignedInt(t);
  return m_b.CreateAdd(base, m_b.CreateMul(stride, offsets, "", false, nsw), "", false, nsw);
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const Broadcast* op) {
  return m_b.CreateVectorSplat(op->lanes, emit(op->value));
}

// ---- calls -----------------------------------------------------------------------------------

FunctionCodeGen::Value* FunctionCodeGen::libmCall(const std::string& name, Value* x, const Type& type) {
  llvm::Type* elem = llvmType(m_ctx, type.element());
  std::string symbol = name;
  if (type.bits == 32)
    symbol += "f";
  else if (type.bits != 64)
    fail(name + " of " + type.str() + " is not supported");
  llvm::FunctionCallee callee =
      m_module.getOrInsertFunction(symbol, llvm::FunctionType::get(elem, {elem}, false));
  if (auto* fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    fn->setDoesNotAccessMemory();  // tanhf/erff never set errno
    fn->setDoesNotThrow();
    fn->setWillReturn();
  }
  if (type.lanes == 1) return m_b.CreateCall(callee, {x});
  Value* out = llvm::PoisonValue::get(x->getType());
  for (unsigned i = 0; i < type.lanes; ++i) {
    Value* lane = m_b.CreateCall(callee, {m_b.CreateExtractElement(x, i)});
    out = m_b.CreateInsertElement(out, lane, i);
  }
  return out;
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const Call* op) {
  std::vector<Value*> args;
  for (const Expr& a : op->args) args.push_back(emit(a));
  if (args.empty()) fail("call of '" + op->name + "' without arguments");
  const std::string& n = op->name;
  Value* x = args[0];
  if (n == "bounds_check") {
    // (x, lowOffset, highOffset, extent, site) → x, or kiln_bounds_fail (core/tir/bounds_check.h).
    if (args.size() != 5) fail("bounds_check takes five arguments");
    const bool isSigned = op->type.code == Type::Code::Int;
    auto wide = [&](Value* v) { return m_b.CreateIntCast(v, m_b.getInt64Ty(), isSigned); };
    Value* low = m_b.CreateAdd(wide(x), wide(args[1]));
    Value* high = m_b.CreateAdd(wide(x), wide(args[2]));
    Value* extent = wide(args[3]);
    Value* ok = m_b.CreateAnd(m_b.CreateICmpSGE(low, m_b.getInt64(0)), m_b.CreateICmpSLT(high, extent));
    auto* failBlock = llvm::BasicBlock::Create(m_ctx, "bounds.fail");
    auto* okBlock = llvm::BasicBlock::Create(m_ctx, "bounds.ok");
    m_b.CreateCondBr(ok, okBlock, failBlock, llvm::MDBuilder(m_ctx).createBranchWeights(1 << 20, 1));
    startBlock(failBlock);
    llvm::Type* ptrTy = llvm::PointerType::get(m_ctx, 0);
    llvm::FunctionCallee trap = m_module.getOrInsertFunction(
        "kiln_bounds_fail", llvm::FunctionType::get(m_b.getVoidTy(), {ptrTy, ptrTy, m_b.getInt64Ty(), m_b.getInt64Ty()}, false));
    if (auto* fn = llvm::dyn_cast<llvm::Function>(trap.getCallee())) {
      fn->setDoesNotReturn();
      fn->addFnAttr(llvm::Attribute::Cold);
    }
    const int64_t* site = asConstInt(op->args[4]);
    std::string buffer = core::tir::boundsCheckBufferName(m_func, site ? *site : -1);
    Value* where = m_b.CreateSelect(m_b.CreateICmpSLT(low, m_b.getInt64(0)), low, high);
    m_b.CreateCall(trap, {m_b.CreateGlobalString(m_func.name), m_b.CreateGlobalString(buffer), where, extent});
    m_b.CreateUnreachable();
    startBlock(okBlock);
    return x;
  }
  if (n == "dot4_u8i8") return dot4U8I8(args, op->type.lanes);
  llvm::Intrinsic::ID unary = llvm::Intrinsic::not_intrinsic;
  if (n == "exp")
    unary = llvm::Intrinsic::exp;
  else if (n == "log")
    unary = llvm::Intrinsic::log;
  else if (n == "sqrt")
    unary = llvm::Intrinsic::sqrt;
  else if (n == "fabs")
    unary = llvm::Intrinsic::fabs;
  else if (n == "floor")
    unary = llvm::Intrinsic::floor;
  else if (n == "ceil")
    unary = llvm::Intrinsic::ceil;
  else if (n == "round")
    unary = llvm::Intrinsic::round;  // C round: ties away from zero
  else if (n == "roundeven")
    unary = llvm::Intrinsic::roundeven;  // ties to even (quantization)
  // f32 vectors: exp, tanh, erf and sigmoid as vector code (vector_math.h) instead of a libm
  // call per lane.
  const bool f32Vector = op->type.isFloat() && op->type.bits == 32 && op->type.lanes > 1;
  if (f32Vector && n == "exp") return emitVectorExpF32(m_b, x);
  if (f32Vector && n == "tanh") return emitVectorTanhF32(m_b, x);
  if (f32Vector && n == "erf") return emitVectorErfF32(m_b, x);
  if (unary != llvm::Intrinsic::not_intrinsic) return m_b.CreateUnaryIntrinsic(unary, x);
  if (n == "pow") {
    if (args.size() != 2) fail("pow takes two arguments");
    return m_b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, x, args[1]);
  }
  if (n == "tanh" || n == "erf") return libmCall(n, x, op->type);
  if (n == "sigmoid") {
    llvm::Constant* one = llvm::ConstantFP::get(x->getType(), 1.0);
    Value* e = f32Vector ? emitVectorExpF32(m_b, m_b.CreateFNeg(x))
                         : m_b.CreateUnaryIntrinsic(llvm::Intrinsic::exp, m_b.CreateFNeg(x));
    return m_b.CreateFDiv(one, m_b.CreateFAdd(one, e));
  }
  fail("unknown intrinsic '" + n + "'");
}

/// dot4_u8i8(acc i32xN, a u8x4 | u8x4N, b i8x4N) (core/tir/expr.h): vpdpbusd with AVX-512 VNNI
/// (N = 16, or 8 with AVX-512VL), else exact widening multiplies and adds.
FunctionCodeGen::Value* FunctionCodeGen::dot4U8I8(const std::vector<Value*>& args, unsigned lanes) {
  llvm::Type* i32 = m_b.getInt32Ty();
  if (!args[0]->getType()->isVectorTy()) {  // one accumulator (a dot4 step not vectorized): a 1-lane vector
    Value* acc = m_b.CreateInsertElement(llvm::PoisonValue::get(llvm::FixedVectorType::get(i32, 1)), args[0],
                                         uint64_t{0});
    return m_b.CreateExtractElement(dot4U8I8({acc, args[1], args[2]}, 1), uint64_t{0});
  }
  auto* words = llvm::FixedVectorType::get(i32, lanes);
  Value* a = args[1];
  if (llvm::cast<llvm::FixedVectorType>(a->getType())->getNumElements() == 4)
    a = m_b.CreateVectorSplat(lanes, m_b.CreateBitCast(a, i32));
  else
    a = m_b.CreateBitCast(a, words);
  Value* b = m_b.CreateBitCast(args[2], words);
  const std::string& f = m_target.features;
  bool vnni = f.find("+avx512vnni") != std::string::npos;
  bool vl = f.find("+avx512vl") != std::string::npos;
  if (vnni && (lanes == 16 || (lanes == 8 && vl))) {
    llvm::Intrinsic::ID id = lanes == 16 ? llvm::Intrinsic::x86_avx512_vpdpbusd_512 : llvm::Intrinsic::x86_avx512_vpdpbusd_256;
    return m_b.CreateIntrinsic(id, {}, {args[0], a, b});
  }
  // Generic: zero-extend a, sign-extend b, multiply in i32 and add each group of four lanes.
  auto* bytes = llvm::FixedVectorType::get(m_b.getInt8Ty(), 4 * lanes);
  auto* wide = llvm::FixedVectorType::get(i32, 4 * lanes);
  Value* prod = m_b.CreateMul(m_b.CreateZExt(m_b.CreateBitCast(a, bytes), wide),
                              m_b.CreateSExt(m_b.CreateBitCast(b, bytes), wide));
  Value* sum = args[0];
  for (unsigned k = 0; k < 4; ++k) {
    std::vector<int> pick;
    for (unsigned i = 0; i < lanes; ++i) pick.push_back(static_cast<int>(4 * i + k));
    sum = m_b.CreateAdd(sum, m_b.CreateShuffleVector(prod, pick));
  }
  return sum;
}

// ---- memory ----------------------------------------------------------------------------------

FunctionCodeGen::Value* FunctionCodeGen::bufferBase(const Buffer& buffer) {
  if (buffer->elemType.code == Type::Code::Handle || buffer->elemType.isVector()) {
    fail("buffer '" + buffer->name + "' has unsupported element type " + buffer->elemType.str());
  }
  auto it = m_state.buffers.find(buffer.get());
  if (it == m_state.buffers.end()) {
    fail("buffer '" + buffer->name + "' is neither a parameter nor an enclosing Allocate");
  }
  return it->second;
}

FunctionCodeGen::Value* FunctionCodeGen::toIndex(Value* v, const Type& type) {
  llvm::Type* i64 = llvmType(m_ctx, Type::i64(type.lanes));
  if (v->getType() == i64) return v;
  return m_b.CreateIntCast(v, i64, isSignedInt(type));
}

void FunctionCodeGen::tagAccess(llvm::Instruction* inst, const Buffer& buffer) {
  auto it = m_alias.find(buffer.get());
  if (it == m_alias.end()) return;
  inst->setMetadata(llvm::LLVMContext::MD_alias_scope, it->second.scope);
  if (it->second.noalias != nullptr) inst->setMetadata(llvm::LLVMContext::MD_noalias, it->second.noalias);
}

FunctionCodeGen::Value* FunctionCodeGen::visit(const Load* op) {
  Value* base = bufferBase(op->buffer);
  const Type& elemType = op->buffer->elemType;
  llvm::Type* mem = memoryType(m_ctx, elemType);
  const llvm::Align align = elementAlign(mem);
  const int lanes = op->type.lanes;
  llvm::Instruction* load = nullptr;
  if (lanes == 1) {
    Value* addr = m_b.CreateInBoundsGEP(mem, base, toIndex(emit(op->index), op->index.type()));
    load = m_b.CreateAlignedLoad(mem, addr, align);
  } else if (const Ramp* ramp = contiguousRamp(op->index)) {
    Value* addr = m_b.CreateInBoundsGEP(mem, base, toIndex(emit(ramp->base), ramp->base.type()));
    load = m_b.CreateAlignedLoad(llvm::FixedVectorType::get(mem, lanes), addr, align);
  } else {
    Value* addrs = m_b.CreateInBoundsGEP(mem, base, toIndex(emit(op->index), op->index.type()));
    load = m_b.CreateMaskedGather(llvm::FixedVectorType::get(mem, lanes), addrs, align);
  }
  tagAccess(load, op->buffer);
  if (elemType.isBool()) return m_b.CreateICmpNE(load, llvm::Constant::getNullValue(load->getType()));
  return load;
}

void FunctionCodeGen::visit(const Store* op) {
  Value* base = bufferBase(op->buffer);
  const Type& elemType = op->buffer->elemType;
  llvm::Type* mem = memoryType(m_ctx, elemType);
  const llvm::Align align = elementAlign(mem);
  Value* value = emit(op->value);
  if (elemType.isBool()) value = m_b.CreateZExt(value, memoryType(m_ctx, op->value.type()));
  llvm::Instruction* store = nullptr;
  if (op->value.type().lanes == 1) {
    Value* addr = m_b.CreateInBoundsGEP(mem, base, toIndex(emit(op->index), op->index.type()));
    store = m_b.CreateAlignedStore(value, addr, align);
  } else if (const Ramp* ramp = contiguousRamp(op->index)) {
    Value* addr = m_b.CreateInBoundsGEP(mem, base, toIndex(emit(ramp->base), ramp->base.type()));
    store = m_b.CreateAlignedStore(value, addr, align);
  } else {
    Value* addrs = m_b.CreateInBoundsGEP(mem, base, toIndex(emit(op->index), op->index.type()));
    store = m_b.CreateMaskedScatter(value, addrs, align);
  }
  tagAccess(store, op->buffer);
}

}  // namespace kiln::codegen
