#include "compiler/codegen/scalar_ops.h"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include "compiler/codegen/complex_ops.h"
#include "compiler/codegen/fast_math.h"
#include "compiler/codegen/llvm_ir_util.h"
#include "compiler/hlo/computation.h"
#include "compiler/hlo/float8.h"

namespace xlens::codegen {
namespace {

using llvm::Value;

llvm::Module& ModuleOf(llvm::IRBuilder<>& b) { return *b.GetInsertBlock()->getModule(); }

Value* Intrinsic(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id, std::vector<Value*> args) {
  return b.CreateIntrinsic(id, {args[0]->getType()}, args);
}

// A C library function of one or two float or double arguments (expm1f, atan2, ...).
Value* LibmCall(llvm::IRBuilder<>& b, std::string_view name, std::vector<Value*> args) {
  llvm::Type* t = args[0]->getType();
  std::string full(name);
  if (t->isFloatTy()) full += "f";
  std::vector<llvm::Type*> params(args.size(), t);
  return b.CreateCall(DeclareFunction(ModuleOf(b), full, t, params), args);
}

Status Unsupported(const char* what, PrimitiveType type) {
  return Error(fmt::format("{} of {} is not supported by code generation", what,
                           PrimitiveTypeName(type)));
}

// Complex values: {re, im} structs; transcendental functions go to the runtime through memory.
Value* ComplexPart(llvm::IRBuilder<>& b, Value* z, unsigned i) { return b.CreateExtractValue(z, i); }
Value* MakeComplex(llvm::IRBuilder<>& b, llvm::Type* type, Value* re, Value* im) {
  Value* z = llvm::UndefValue::get(type);
  z = b.CreateInsertValue(z, re, 0);
  return b.CreateInsertValue(z, im, 1);
}

Value* ComplexRuntimeCall(llvm::IRBuilder<>& b, std::string_view kind, HloOpcode op, Value* lhs,
                          Value* rhs) {
  llvm::Type* type = lhs->getType();
  const bool is_double = type->getStructElementType(0)->isDoubleTy();
  std::string name = fmt::format("xlens_complex{}_{}", is_double ? 128 : 64, kind);
  llvm::AllocaInst* a = EmitEntryAlloca(b, type, "complex.a");
  b.CreateStore(lhs, a);
  std::vector<llvm::Type*> params = {b.getInt32Ty(), b.getPtrTy()};
  std::vector<Value*> args = {b.getInt32(static_cast<int>(op)), a};
  if (rhs != nullptr) {
    llvm::AllocaInst* r = EmitEntryAlloca(b, type, "complex.b");
    b.CreateStore(rhs, r);
    params.push_back(b.getPtrTy());
    args.push_back(r);
  }
  b.CreateCall(DeclareFunction(ModuleOf(b), name, b.getVoidTy(), params), args);
  return b.CreateLoad(type, a);
}

StatusOr<Value*> EmitComplexUnary(llvm::IRBuilder<>& b, HloOpcode op, PrimitiveType result_type,
                                  Value* z) {
  Value* re = ComplexPart(b, z, 0);
  Value* im = ComplexPart(b, z, 1);
  const bool runtime_call = op != HloOpcode::kReal && op != HloOpcode::kImag && op != HloOpcode::kNegate;
  if (runtime_call && UseInlineComplexMath(b)) return EmitInlineComplexUnary(b, op, z);
  switch (op) {
    case HloOpcode::kReal: return re;
    case HloOpcode::kImag: return im;
    case HloOpcode::kNegate: return MakeComplex(b, z->getType(), b.CreateFNeg(re), b.CreateFNeg(im));
    case HloOpcode::kAbs:
      return ComplexPart(b, ComplexRuntimeCall(b, "unary", op, z, nullptr), 0);
    case HloOpcode::kExp: case HloOpcode::kExpm1: case HloOpcode::kLog: case HloOpcode::kLog1p:
    case HloOpcode::kSqrt: case HloOpcode::kRsqrt: case HloOpcode::kTanh:
    case HloOpcode::kLogistic: case HloOpcode::kSin: case HloOpcode::kCos: case HloOpcode::kSign:
      return ComplexRuntimeCall(b, "unary", op, z, nullptr);
    default:
      return Error(fmt::format("{} of a complex value is not supported by code generation",
                               HloOpcodeString(op)));
  }
}

// Whether `v`, of `a`'s shape less the dimensions it keeps, is at least the maximum of each row
// of `a`: a reduce of `a` with a maximum (whatever its initial value), or the maximum of such a
// value and anything (JAX's log_softmax takes max(reduce_max(x), -inf)). `kept` gets the
// reduce's kept dimensions.
bool AtLeastRowMaximum(const HloInstruction* v, const HloInstruction* a, std::vector<int64_t>* kept,
                       int depth = 0) {
  if (v->opcode() == HloOpcode::kMaximum && depth < 4) {
    return AtLeastRowMaximum(v->operand(0), a, kept, depth + 1) ||
           AtLeastRowMaximum(v->operand(1), a, kept, depth + 1);
  }
  if (v->opcode() != HloOpcode::kReduce || v->operand_count() != 2 || v->operand(0) != a ||
      v->to_apply() == nullptr) {
    return false;
  }
  const HloInstruction* root = v->to_apply()->root_instruction();
  if (root == nullptr || root->opcode() != HloOpcode::kMaximum ||
      root->operand(0)->opcode() != HloOpcode::kParameter ||
      root->operand(1)->opcode() != HloOpcode::kParameter ||
      root->operand(0)->parameter_number() == root->operand(1)->parameter_number()) {
    return false;
  }
  *kept = KeptDimensions(*v);
  return true;
}

StatusOr<Value*> EmitFloatUnary(llvm::IRBuilder<>& b, HloOpcode op, PrimitiveType type, Value* v,
                                bool not_positive = false) {
  Value* x = FloatToCompute(b, type, v);
  Value* r = nullptr;
  llvm::Type* t = x->getType();
  // f32 (and f16/bf16, which compute in f32) on a CPU: inline polynomials that vectorize with
  // the loop around them (fast_math.h); f64 and GPUs keep the C library's and libdevice's.
  if (t->isFloatTy() && UseInlineTranscendentals(b)) {
    switch (op) {
      case HloOpcode::kExp: r = EmitFastExpF32(b, x, not_positive); break;
      case HloOpcode::kLog: r = EmitFastLogF32(b, x); break;
      case HloOpcode::kTanh: r = EmitFastTanhF32(b, x); break;
      case HloOpcode::kLogistic: r = EmitFastLogisticF32(b, x); break;
      case HloOpcode::kErf: r = EmitFastErfF32(b, x); break;
      default: break;
    }
    if (r != nullptr) return ComputeToFloat(b, type, r);
  }
  switch (op) {
    case HloOpcode::kAbs: r = Intrinsic(b, llvm::Intrinsic::fabs, {x}); break;
    case HloOpcode::kNegate: r = b.CreateFNeg(x); break;
    case HloOpcode::kExp: r = Intrinsic(b, llvm::Intrinsic::exp, {x}); break;
    case HloOpcode::kExpm1: r = LibmCall(b, "expm1", {x}); break;
    case HloOpcode::kLog: r = Intrinsic(b, llvm::Intrinsic::log, {x}); break;
    case HloOpcode::kLog1p: r = LibmCall(b, "log1p", {x}); break;
    case HloOpcode::kSqrt: r = Intrinsic(b, llvm::Intrinsic::sqrt, {x}); break;
    case HloOpcode::kRsqrt:
      r = b.CreateFDiv(llvm::ConstantFP::get(t, 1.0), Intrinsic(b, llvm::Intrinsic::sqrt, {x}));
      break;
    case HloOpcode::kCbrt: r = LibmCall(b, "cbrt", {x}); break;
    case HloOpcode::kTanh: r = LibmCall(b, "tanh", {x}); break;
    case HloOpcode::kErf: r = LibmCall(b, "erf", {x}); break;
    case HloOpcode::kLogistic:
      r = b.CreateFDiv(llvm::ConstantFP::get(t, 1.0),
                       b.CreateFAdd(llvm::ConstantFP::get(t, 1.0),
                                    Intrinsic(b, llvm::Intrinsic::exp, {b.CreateFNeg(x)})));
      break;
    case HloOpcode::kSin: r = Intrinsic(b, llvm::Intrinsic::sin, {x}); break;
    case HloOpcode::kCos: r = Intrinsic(b, llvm::Intrinsic::cos, {x}); break;
    case HloOpcode::kTan: r = LibmCall(b, "tan", {x}); break;
    case HloOpcode::kFloor: r = Intrinsic(b, llvm::Intrinsic::floor, {x}); break;
    case HloOpcode::kCeil: r = Intrinsic(b, llvm::Intrinsic::ceil, {x}); break;
    case HloOpcode::kRoundNearestEven: r = Intrinsic(b, llvm::Intrinsic::roundeven, {x}); break;
    case HloOpcode::kRoundNearestAfz: r = Intrinsic(b, llvm::Intrinsic::round, {x}); break;
    case HloOpcode::kSign: {
      // NaN and zeros are their own sign.
      Value* one = Intrinsic(b, llvm::Intrinsic::copysign, {llvm::ConstantFP::get(t, 1.0), x});
      Value* keep = b.CreateFCmpUEQ(x, llvm::ConstantFP::get(t, 0.0));
      r = b.CreateSelect(keep, x, one);
      break;
    }
    case HloOpcode::kIsFinite:
      return b.CreateFCmpONE(Intrinsic(b, llvm::Intrinsic::fabs, {x}),
                             llvm::ConstantFP::getInfinity(t));
    case HloOpcode::kReal: return v;
    case HloOpcode::kImag: return ComputeToFloat(b, type, llvm::ConstantFP::get(t, 0.0));
    default:
      return Error(fmt::format("{} of {} is not supported by code generation", HloOpcodeString(op),
                               PrimitiveTypeName(type)));
  }
  return ComputeToFloat(b, type, r);
}

StatusOr<Value*> EmitIntegerUnary(llvm::IRBuilder<>& b, HloOpcode op, PrimitiveType type,
                                  Value* x) {
  llvm::Type* t = x->getType();
  Value* zero = llvm::ConstantInt::get(t, 0);
  const bool is_signed = IsSignedIntegralType(type);
  switch (op) {
    case HloOpcode::kAbs:
      if (!is_signed) return x;
      return b.CreateSelect(b.CreateICmpSLT(x, zero), b.CreateSub(zero, x), x);
    case HloOpcode::kNegate: return b.CreateSub(zero, x);
    case HloOpcode::kNot: return b.CreateNot(x);
    case HloOpcode::kPopulationCount: return Intrinsic(b, llvm::Intrinsic::ctpop, {x});
    case HloOpcode::kClz:
      return b.CreateIntrinsic(llvm::Intrinsic::ctlz, {t}, {x, b.getFalse()});
    case HloOpcode::kSign:
      if (!is_signed) return b.CreateZExt(b.CreateICmpNE(x, zero), t);
      return b.CreateSub(b.CreateZExt(b.CreateICmpSGT(x, zero), t),
                         b.CreateZExt(b.CreateICmpSLT(x, zero), t));
    case HloOpcode::kReal: return x;
    case HloOpcode::kImag: return zero;
    default:
      return Error(fmt::format("{} of {} is not supported by code generation", HloOpcodeString(op),
                               PrimitiveTypeName(type)));
  }
}

// Signed or unsigned integer division and remainder with XLA's definitions for the cases C
// leaves undefined: x/0 = -1, x%0 = x, INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0.
Value* EmitIntegerDivide(llvm::IRBuilder<>& b, bool is_signed, bool remainder, Value* x, Value* y) {
  llvm::Type* t = x->getType();
  Value* zero = llvm::ConstantInt::get(t, 0);
  Value* one = llvm::ConstantInt::get(t, 1);
  Value* y_is_zero = b.CreateICmpEQ(y, zero);
  Value* bad = y_is_zero;
  Value* overflow = nullptr;
  if (is_signed) {
    Value* min = llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(t->getIntegerBitWidth()));
    overflow = b.CreateAnd(b.CreateICmpEQ(x, min), b.CreateICmpEQ(y, llvm::ConstantInt::getSigned(t, -1)));
    bad = b.CreateOr(bad, overflow);
  }
  Value* safe_y = b.CreateSelect(bad, one, y);
  Value* q = remainder ? (is_signed ? b.CreateSRem(x, safe_y) : b.CreateURem(x, safe_y))
                       : (is_signed ? b.CreateSDiv(x, safe_y) : b.CreateUDiv(x, safe_y));
  if (remainder) {
    // x % 1 == 0 already gives INT_MIN % -1 == 0; x % 0 is x.
    return b.CreateSelect(y_is_zero, x, q);
  }
  // x / 1 == x already gives INT_MIN / -1 == INT_MIN; x / 0 is all ones.
  return b.CreateSelect(y_is_zero, llvm::ConstantInt::getSigned(t, -1), q);
}

Value* EmitShift(llvm::IRBuilder<>& b, HloOpcode op, Value* x, Value* amount) {
  llvm::Type* t = x->getType();
  const unsigned bits = t->getIntegerBitWidth();
  Value* too_big = b.CreateICmpUGE(amount, llvm::ConstantInt::get(t, bits));
  Value* safe = b.CreateSelect(too_big, llvm::ConstantInt::get(t, 0), amount);
  switch (op) {
    case HloOpcode::kShiftLeft:
      return b.CreateSelect(too_big, llvm::ConstantInt::get(t, 0), b.CreateShl(x, safe));
    case HloOpcode::kShiftRightLogical:
      return b.CreateSelect(too_big, llvm::ConstantInt::get(t, 0), b.CreateLShr(x, safe));
    default: {
      Value* fill = b.CreateAShr(x, llvm::ConstantInt::get(t, bits - 1));
      return b.CreateSelect(too_big, fill, b.CreateAShr(x, safe));
    }
  }
}

Value* EmitIntegerPower(llvm::IRBuilder<>& b, bool is_signed, Value* x, Value* y) {
  if (UseInlineComplexMath(b)) return EmitInlineIntegerPower(b, is_signed, x, y);
  llvm::Type* t = x->getType();
  Value* x64 = is_signed ? b.CreateSExt(x, b.getInt64Ty()) : b.CreateZExt(x, b.getInt64Ty());
  Value* y64 = is_signed ? b.CreateSExt(y, b.getInt64Ty()) : b.CreateZExt(y, b.getInt64Ty());
  if (t->getIntegerBitWidth() == 64) { x64 = x; y64 = y; }
  auto fn = DeclareFunction(ModuleOf(b), is_signed ? "xlens_powi_s64" : "xlens_powi_u64",
                            b.getInt64Ty(), {b.getInt64Ty(), b.getInt64Ty()});
  return b.CreateTrunc(b.CreateCall(fn, {x64, y64}), t);
}

}  // namespace

std::vector<int64_t> KeptDimensions(const HloInstruction& reduce) {
  std::vector<int64_t> kept;
  const std::vector<int64_t>& reduced = reduce.dimensions();
  for (int64_t d = 0; d < reduce.operand(0)->shape().rank(); ++d) {
    if (std::find(reduced.begin(), reduced.end(), d) == reduced.end()) kept.push_back(d);
  }
  return kept;
}

// Whether `exp` is exp(a - broadcast(m)) with m at least the maximum of each row of a, every
// element of a less its own row's maximum or more (softmax's and log-softmax's shift): <= 0 at
// every element, or NaN.
bool ExpOfShiftByMaximum(const HloInstruction& exp) {
  const HloInstruction* shift = exp.operand(0);
  if (shift->opcode() != HloOpcode::kSubtract) return false;
  const HloInstruction* a = shift->operand(0);
  const HloInstruction* broadcast = shift->operand(1);
  if (broadcast->opcode() != HloOpcode::kBroadcast) return false;
  // The broadcast puts each maximum back on the dimensions it was kept on, in order, so that
  // element i of a meets the maximum of the row that holds it.
  std::vector<int64_t> kept;
  return AtLeastRowMaximum(broadcast->operand(0), a, &kept) && broadcast->dimensions() == kept &&
         broadcast->shape().dimensions() == a->shape().dimensions();
}

StatusOr<Value*> EmitUnaryOp(llvm::IRBuilder<>& b, const HloInstruction& hlo, Value* operand) {
  const PrimitiveType type = hlo.operand(0)->shape().element_type();
  const HloOpcode op = hlo.opcode();
  if (op == HloOpcode::kConvert) return EmitConvert(b, type, hlo.shape().element_type(), operand);
  if (op == HloOpcode::kBitcastConvert) {
    return EmitBitcastConvert(b, type, hlo.shape().element_type(), operand);
  }
  if (op == HloOpcode::kReducePrecision) {
    return EmitReducePrecision(b, type, hlo.exponent_bits_attr.value_or(8),
                               hlo.mantissa_bits_attr.value_or(23), operand);
  }
  if (op == HloOpcode::kCopy) return operand;
  if (type == PrimitiveType::PRED) {
    if (op == HloOpcode::kNot) return b.CreateNot(operand);
    if (op == HloOpcode::kAbs || op == HloOpcode::kSign || op == HloOpcode::kReal) return operand;
    return Unsupported(HloOpcodeString(op).data(), type);
  }
  if (IsComplexType(type)) return EmitComplexUnary(b, op, hlo.shape().element_type(), operand);
  if (IsFloatingPointType(type)) {
    return EmitFloatUnary(b, op, type, operand, op == HloOpcode::kExp && ExpOfShiftByMaximum(hlo));
  }
  return EmitIntegerUnary(b, op, type, operand);
}

StatusOr<Value*> EmitBinaryOpcode(llvm::IRBuilder<>& b, HloOpcode op, PrimitiveType type,
                                  Value* lhs, Value* rhs) {
  if (type == PrimitiveType::PRED) {
    switch (op) {
      case HloOpcode::kAdd: case HloOpcode::kOr: case HloOpcode::kMaximum:
        return b.CreateOr(lhs, rhs);
      case HloOpcode::kMultiply: case HloOpcode::kAnd: case HloOpcode::kMinimum:
        return b.CreateAnd(lhs, rhs);
      case HloOpcode::kXor: return b.CreateXor(lhs, rhs);
      default: return Unsupported(HloOpcodeString(op).data(), type);
    }
  }
  if (IsComplexType(type)) {
    llvm::Type* t = lhs->getType();
    switch (op) {
      case HloOpcode::kAdd:
        return MakeComplex(b, t, b.CreateFAdd(ComplexPart(b, lhs, 0), ComplexPart(b, rhs, 0)),
                           b.CreateFAdd(ComplexPart(b, lhs, 1), ComplexPart(b, rhs, 1)));
      case HloOpcode::kSubtract:
        return MakeComplex(b, t, b.CreateFSub(ComplexPart(b, lhs, 0), ComplexPart(b, rhs, 0)),
                           b.CreateFSub(ComplexPart(b, lhs, 1), ComplexPart(b, rhs, 1)));
      case HloOpcode::kMultiply: case HloOpcode::kDivide: case HloOpcode::kPower:
        if (UseInlineComplexMath(b)) return EmitInlineComplexBinary(b, op, lhs, rhs);
        return ComplexRuntimeCall(b, "binary", op, lhs, rhs);
      default: return Unsupported(HloOpcodeString(op).data(), type);
    }
  }
  if (IsFloatingPointType(type)) {
    Value* x = FloatToCompute(b, type, lhs);
    Value* y = FloatToCompute(b, type, rhs);
    Value* r = nullptr;
    switch (op) {
      case HloOpcode::kAdd: r = b.CreateFAdd(x, y); break;
      case HloOpcode::kSubtract: r = b.CreateFSub(x, y); break;
      case HloOpcode::kMultiply: r = b.CreateFMul(x, y); break;
      case HloOpcode::kDivide: r = b.CreateFDiv(x, y); break;
      case HloOpcode::kRemainder: r = b.CreateFRem(x, y); break;
      case HloOpcode::kPower: r = Intrinsic(b, llvm::Intrinsic::pow, {x, y}); break;
      case HloOpcode::kMaximum: r = Intrinsic(b, llvm::Intrinsic::maximum, {x, y}); break;
      case HloOpcode::kMinimum: r = Intrinsic(b, llvm::Intrinsic::minimum, {x, y}); break;
      case HloOpcode::kAtan2: r = LibmCall(b, "atan2", {x, y}); break;
      default: return Unsupported(HloOpcodeString(op).data(), type);
    }
    // On the CPU a multiply feeding the add of a constant may become one fused multiply-add (it
    // rounds once instead of twice), as XLA's CPU backend allows: the Horner steps of the
    // polynomials JAX expands erf into take half the instructions. Only those: a sum of two
    // computed values stays rounded as the evaluator rounds it, where a cancellation (a batch-norm
    // gradient) would make the once-rounded product stand out. Not for f16/bf16, which round to
    // their type after every operation; and only for CPU targets.
    if ((type == PrimitiveType::F32 || type == PrimitiveType::F64) &&
        llvm::isa<llvm::Instruction>(r) && UseInlineTranscendentals(b)) {
      const bool horner_step = (op == HloOpcode::kAdd || op == HloOpcode::kSubtract) &&
                               (llvm::isa<llvm::Constant>(x) || llvm::isa<llvm::Constant>(y));
      if (op == HloOpcode::kMultiply || horner_step) {
        llvm::cast<llvm::Instruction>(r)->setHasAllowContract(true);
      }
    }
    return ComputeToFloat(b, type, r);
  }
  const bool is_signed = IsSignedIntegralType(type);
  switch (op) {
    case HloOpcode::kAdd: return b.CreateAdd(lhs, rhs);
    case HloOpcode::kSubtract: return b.CreateSub(lhs, rhs);
    case HloOpcode::kMultiply: return b.CreateMul(lhs, rhs);
    case HloOpcode::kDivide: return EmitIntegerDivide(b, is_signed, false, lhs, rhs);
    case HloOpcode::kRemainder: return EmitIntegerDivide(b, is_signed, true, lhs, rhs);
    case HloOpcode::kMaximum:
      return b.CreateSelect(is_signed ? b.CreateICmpSGT(lhs, rhs) : b.CreateICmpUGT(lhs, rhs), lhs, rhs);
    case HloOpcode::kMinimum:
      return b.CreateSelect(is_signed ? b.CreateICmpSLT(lhs, rhs) : b.CreateICmpULT(lhs, rhs), lhs, rhs);
    case HloOpcode::kAnd: return b.CreateAnd(lhs, rhs);
    case HloOpcode::kOr: return b.CreateOr(lhs, rhs);
    case HloOpcode::kXor: return b.CreateXor(lhs, rhs);
    case HloOpcode::kShiftLeft: case HloOpcode::kShiftRightLogical:
    case HloOpcode::kShiftRightArithmetic:
      return EmitShift(b, op, lhs, rhs);
    case HloOpcode::kPower: return EmitIntegerPower(b, is_signed, lhs, rhs);
    default: return Unsupported(HloOpcodeString(op).data(), type);
  }
}

StatusOr<Value*> EmitBinaryOp(llvm::IRBuilder<>& b, const HloInstruction& hlo, Value* lhs,
                              Value* rhs) {
  const PrimitiveType type = hlo.operand(0)->shape().element_type();
  if (hlo.opcode() == HloOpcode::kCompare) {
    return EmitCompare(b, type, hlo.comparison_direction.value_or(ComparisonDirection::kEq),
                       hlo.EffectiveComparisonType(), lhs, rhs);
  }
  if (hlo.opcode() == HloOpcode::kComplex) {
    ASSIGN_OR_RETURN(llvm::Type * t, ValueType(hlo.shape().element_type(), b.getContext()));
    return MakeComplex(b, t, lhs, rhs);
  }
  return EmitBinaryOpcode(b, hlo.opcode(), type, lhs, rhs);
}

StatusOr<Value*> EmitCompare(llvm::IRBuilder<>& b, PrimitiveType type,
                             ComparisonDirection direction, ComparisonType comparison, Value* lhs,
                             Value* rhs) {
  using D = ComparisonDirection;
  if (IsComplexType(type)) {
    if (direction != D::kEq && direction != D::kNe) return Unsupported("ordered compare", type);
    Value* eq = b.CreateAnd(b.CreateFCmpOEQ(ComplexPart(b, lhs, 0), ComplexPart(b, rhs, 0)),
                            b.CreateFCmpOEQ(ComplexPart(b, lhs, 1), ComplexPart(b, rhs, 1)));
    return direction == D::kEq ? eq : b.CreateNot(eq);
  }
  if (IsFloatingPointType(type) && comparison != ComparisonType::kFloatTotalOrder) {
    Value* x = FloatToCompute(b, type, lhs);
    Value* y = FloatToCompute(b, type, rhs);
    switch (direction) {
      case D::kEq: return b.CreateFCmpOEQ(x, y);
      case D::kNe: return b.CreateFCmpUNE(x, y);
      case D::kGe: return b.CreateFCmpOGE(x, y);
      case D::kGt: return b.CreateFCmpOGT(x, y);
      case D::kLe: return b.CreateFCmpOLE(x, y);
      case D::kLt: return b.CreateFCmpOLT(x, y);
    }
  }
  bool is_signed = comparison == ComparisonType::kSigned;
  if (IsFloatingPointType(type)) {
    // Total order: flip all but the sign bit of negative values and compare as signed integers.
    auto key = [&](Value* v) {
      llvm::Type* int_type = b.getIntNTy(v->getType()->getPrimitiveSizeInBits());
      Value* bits = v->getType()->isIntegerTy() ? v : b.CreateBitCast(v, int_type);
      llvm::Type* it = bits->getType();
      Value* max = llvm::ConstantInt::get(it, llvm::APInt::getSignedMaxValue(it->getIntegerBitWidth()));
      return b.CreateSelect(b.CreateICmpSLT(bits, llvm::ConstantInt::get(it, 0)),
                            b.CreateXor(bits, max), bits);
    };
    lhs = key(lhs);
    rhs = key(rhs);
    is_signed = true;
  }
  if (type == PrimitiveType::PRED) is_signed = false;
  switch (direction) {
    case D::kEq: return b.CreateICmpEQ(lhs, rhs);
    case D::kNe: return b.CreateICmpNE(lhs, rhs);
    case D::kGe: return is_signed ? b.CreateICmpSGE(lhs, rhs) : b.CreateICmpUGE(lhs, rhs);
    case D::kGt: return is_signed ? b.CreateICmpSGT(lhs, rhs) : b.CreateICmpUGT(lhs, rhs);
    case D::kLe: return is_signed ? b.CreateICmpSLE(lhs, rhs) : b.CreateICmpULE(lhs, rhs);
    case D::kLt: return is_signed ? b.CreateICmpSLT(lhs, rhs) : b.CreateICmpULT(lhs, rhs);
  }
  return Error("unknown comparison direction");
}

StatusOr<Value*> EmitConvert(llvm::IRBuilder<>& b, PrimitiveType from, PrimitiveType to, Value* v) {
  llvm::LLVMContext& c = b.getContext();
  ASSIGN_OR_RETURN(llvm::Type * to_type, ValueType(to, c));
  if (from == to) return v;
  if (IsComplexType(from)) {
    Value* re = ComplexPart(b, v, 0);
    Value* im = ComplexPart(b, v, 1);
    const PrimitiveType part = ComplexComponentType(from);
    if (IsComplexType(to)) {
      const PrimitiveType to_part = ComplexComponentType(to);
      ASSIGN_OR_RETURN(Value * r, EmitConvert(b, part, to_part, re));
      ASSIGN_OR_RETURN(Value * i, EmitConvert(b, part, to_part, im));
      return MakeComplex(b, to_type, r, i);
    }
    return EmitConvert(b, part, to, re);  // complex to real keeps the real part
  }
  if (to == PrimitiveType::PRED) {
    if (IsFloatingPointType(from)) {
      Value* x = FloatToCompute(b, from, v);
      return b.CreateFCmpUNE(x, llvm::ConstantFP::get(x->getType(), 0.0));  // NaN is true
    }
    return b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (from == PrimitiveType::PRED) {
    return EmitConvert(b, PrimitiveType::S32, to, b.CreateZExt(v, b.getInt32Ty()));
  }
  if (IsComplexType(to)) {
    const PrimitiveType part = ComplexComponentType(to);
    ASSIGN_OR_RETURN(Value * re, EmitConvert(b, from, part, v));
    ASSIGN_OR_RETURN(llvm::Type * part_type, ValueType(part, c));
    return MakeComplex(b, to_type, re, llvm::ConstantFP::get(part_type, 0.0));
  }
  const bool from_float = IsFloatingPointType(from);
  const bool to_float = IsFloatingPointType(to);
  if (from_float && to_float) {
    Value* x = FloatToCompute(b, from, v);
    if (to == PrimitiveType::F16 && from == PrimitiveType::F64) return b.CreateFPTrunc(x, to_type);
    if (IsComputedFloat8Type(to) && from == PrimitiveType::F64) return ComputeToFloat(b, to, x);
    llvm::Type* target = FloatComputeType(to, c);
    if (to == PrimitiveType::BF16 && from == PrimitiveType::F64) x = b.CreateFPTrunc(x, target);
    if (x->getType() != target) {
      x = x->getType()->getPrimitiveSizeInBits() < target->getPrimitiveSizeInBits()
              ? b.CreateFPExt(x, target) : b.CreateFPTrunc(x, target);
    }
    return ComputeToFloat(b, to, x);
  }
  if (!from_float && to_float) {
    // Integers reach f16 and bf16 through f32.
    llvm::Type* target = FloatComputeType(to, c);
    Value* x = IsSignedIntegralType(from) ? b.CreateSIToFP(v, target) : b.CreateUIToFP(v, target);
    return ComputeToFloat(b, to, x);
  }
  if (from_float && !to_float) {
    // Saturating, NaN to 0, rounding toward zero.
    Value* x = FloatToCompute(b, from, v);
    llvm::Type* ft = x->getType();
    const unsigned bits = to_type->getIntegerBitWidth();
    const bool is_signed = IsSignedIntegralType(to);
    llvm::APInt lowest = is_signed ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt(bits, 0);
    llvm::APInt highest = is_signed ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits);
    const double lowest_f = is_signed ? -std::ldexp(1.0, bits - 1) : 0.0;
    const double upper_f = std::ldexp(1.0, is_signed ? bits - 1 : bits);
    Value* lo = llvm::ConstantFP::get(ft, lowest_f);
    Value* hi = llvm::ConstantFP::get(ft, upper_f);
    // Clamp into range before converting so that fptosi never sees an out-of-range value.
    Value* inside = b.CreateAnd(b.CreateFCmpOGT(x, lo), b.CreateFCmpOLT(x, hi));
    Value* safe = b.CreateSelect(inside, x, llvm::ConstantFP::get(ft, 0.0));
    Value* converted = is_signed ? b.CreateFPToSI(safe, to_type) : b.CreateFPToUI(safe, to_type);
    Value* r = b.CreateSelect(b.CreateFCmpOLE(x, lo), llvm::ConstantInt::get(to_type, lowest), converted);
    r = b.CreateSelect(b.CreateFCmpOGE(x, hi), llvm::ConstantInt::get(to_type, highest), r);
    return b.CreateSelect(b.CreateFCmpUNO(x, x), llvm::ConstantInt::get(to_type, 0), r);
  }
  // Integer to integer: two's complement truncation or extension by the source's signedness.
  const unsigned from_bits = v->getType()->getIntegerBitWidth();
  const unsigned to_bits = to_type->getIntegerBitWidth();
  if (to_bits < from_bits) return b.CreateTrunc(v, to_type);
  if (to_bits == from_bits) return v;
  return IsSignedIntegralType(from) ? b.CreateSExt(v, to_type) : b.CreateZExt(v, to_type);
}

StatusOr<Value*> EmitBitcastConvert(llvm::IRBuilder<>& b, PrimitiveType from, PrimitiveType to,
                                    Value* v) {
  if (BitWidth(from) != BitWidth(to) || IsComplexType(from) || IsComplexType(to) ||
      from == PrimitiveType::PRED || to == PrimitiveType::PRED) {
    return Error(fmt::format("bitcast-convert from {} to {} is not supported by code generation",
                             PrimitiveTypeName(from), PrimitiveTypeName(to)));
  }
  ASSIGN_OR_RETURN(llvm::Type * to_type, ValueType(to, b.getContext()));
  return b.CreateBitCast(v, to_type);
}

StatusOr<Value*> EmitReducePrecision(llvm::IRBuilder<>& b, PrimitiveType type,
                                     int64_t exponent_bits, int64_t mantissa_bits, Value* value) {
  int src_exponent_bits = 0, src_mantissa_bits = 0;
  switch (type) {
    case PrimitiveType::F16: src_exponent_bits = 5; src_mantissa_bits = 10; break;
    case PrimitiveType::BF16: src_exponent_bits = 8; src_mantissa_bits = 7; break;
    case PrimitiveType::F32: src_exponent_bits = 8; src_mantissa_bits = 23; break;
    case PrimitiveType::F64: src_exponent_bits = 11; src_mantissa_bits = 52; break;
    default: return Unsupported("reduce-precision", type);
  }
  const unsigned width = BitWidth(type);
  llvm::Type* it = b.getIntNTy(width);
  auto C = [&](uint64_t v) { return llvm::ConstantInt::get(it, v); };
  Value* bits = value->getType()->isIntegerTy() ? value : b.CreateBitCast(value, it);
  if (mantissa_bits < src_mantissa_bits) {
    const unsigned shift = src_mantissa_bits - static_cast<unsigned>(mantissa_bits);
    const uint64_t last = uint64_t{1} << shift;
    Value* x_last = b.CreateLShr(b.CreateAnd(bits, C(last)), shift);
    Value* bias = b.CreateAdd(x_last, C((last >> 1) - 1));
    bits = b.CreateAnd(b.CreateAdd(bits, bias), C(~(last - 1)));
  }
  if (exponent_bits < src_exponent_bits) {
    const uint64_t sign_mask = uint64_t{1} << (width - 1);
    const uint64_t exp_mask = ((uint64_t{1} << src_exponent_bits) - 1) << src_mantissa_bits;
    const uint64_t bias = (uint64_t{1} << (src_exponent_bits - 1)) - 1;
    const uint64_t reduced_bias = (uint64_t{1} << (exponent_bits - 1)) - 1;
    Value* x_exp = b.CreateAnd(bits, C(exp_mask));
    Value* overflows = b.CreateICmpUGT(x_exp, C((bias + reduced_bias) << src_mantissa_bits));
    Value* underflows = b.CreateICmpULE(x_exp, C((bias - reduced_bias) << src_mantissa_bits));
    Value* signed_zero = b.CreateAnd(bits, C(sign_mask));
    Value* signed_inf = b.CreateOr(signed_zero, C(exp_mask));
    bits = b.CreateSelect(overflows, signed_inf, bits);
    bits = b.CreateSelect(underflows, signed_zero, bits);
  }
  Value* result = value->getType()->isIntegerTy() ? bits : b.CreateBitCast(bits, value->getType());
  Value* x = FloatToCompute(b, type, value);
  Value* is_nan = b.CreateFCmpUNO(x, x);
  Value* nan_result = value;
  if (mantissa_bits <= 0) {
    nan_result = ComputeToFloat(b, type, llvm::ConstantFP::getInfinity(x->getType()));
  }
  return b.CreateSelect(is_nan, nan_result, result);
}

StatusOr<Value*> EmitLiteralElement(llvm::IRBuilder<>& b, const Literal& literal, int64_t i) {
  const PrimitiveType type = literal.shape().element_type();
  llvm::LLVMContext& c = b.getContext();
  ASSIGN_OR_RETURN(llvm::Type * t, ValueType(type, c));
  if (literal.is_elided() || literal.is_text_only()) {
    return Error("a constant whose value was elided from the text cannot be compiled");
  }
  if (type == PrimitiveType::PRED) return b.getInt1(literal.GetAsInt64(i) != 0);
  if (IsComplexType(type)) {
    complex128 z = literal.GetAsComplex(i);
    llvm::Type* part = t->getStructElementType(0);
    return llvm::ConstantStruct::get(llvm::cast<llvm::StructType>(t),
                                     {llvm::ConstantFP::get(part, z.real()),
                                      llvm::ConstantFP::get(part, z.imag())});
  }
  const uint8_t* data = literal.untyped_data() + i * ByteWidth(type);
  if (type == PrimitiveType::F32) {
    float f;
    std::memcpy(&f, data, 4);
    return llvm::ConstantFP::get(t, f);
  }
  if (type == PrimitiveType::F64) {
    double d;
    std::memcpy(&d, data, 8);
    return llvm::ConstantFP::get(t, d);
  }
  if (type == PrimitiveType::F16) {
    uint16_t h;
    std::memcpy(&h, data, 2);
    return llvm::ConstantFP::get(c, llvm::APFloat(llvm::APFloat::IEEEhalf(), llvm::APInt(16, h)));
  }
  // Integers, bf16 and the 8-bit floats (held as their bits): the raw little-endian bytes.
  uint64_t raw = 0;
  std::memcpy(&raw, data, ByteWidth(type));
  return llvm::ConstantInt::get(t, raw);
}

StatusOr<Value*> EmitFromInt64(llvm::IRBuilder<>& b, PrimitiveType type, Value* v) {
  return EmitConvert(b, PrimitiveType::S64, type, v);
}

StatusOr<Value*> EmitIndexToInt64(llvm::IRBuilder<>& b, PrimitiveType type, Value* v) {
  if (!IsIntegralType(type)) {
    return Error(fmt::format("an index of type {} (expected an integer type)",
                             PrimitiveTypeName(type)));
  }
  if (type == PrimitiveType::U64) {
    Value* past_int64 = b.CreateICmpSLT(v, b.getInt64(0));
    return b.CreateSelect(past_int64, b.getInt64(std::numeric_limits<int64_t>::max()), v);
  }
  return EmitConvert(b, type, PrimitiveType::S64, v);
}

bool IsPolynomialTranscendental(HloOpcode op) {
  switch (op) {
    case HloOpcode::kExp: case HloOpcode::kExpm1: case HloOpcode::kLog: case HloOpcode::kLog1p:
    case HloOpcode::kTanh: case HloOpcode::kLogistic: case HloOpcode::kErf: case HloOpcode::kPower:
    case HloOpcode::kSin: case HloOpcode::kCos: case HloOpcode::kTan: case HloOpcode::kAtan2:
    case HloOpcode::kCbrt:
      return true;
    default:
      return false;
  }
}

bool ReachesTranscendental(const std::vector<const HloInstruction*>& values,
                           const std::function<bool(const HloInstruction*)>& read) {
  return TranscendentalsPerElement(values, read) > 0;
}

int64_t TranscendentalsPerElement(const std::vector<const HloInstruction*>& values,
                                  const std::function<bool(const HloInstruction*)>& read) {
  int64_t count = 0;
  std::set<const HloInstruction*> seen;
  std::function<void(const HloInstruction*)> walk = [&](const HloInstruction* x) {
    if (!seen.insert(x).second || read(x)) return;
    if (x->opcode() == HloOpcode::kReduce || x->opcode() == HloOpcode::kParameter) return;
    count += IsPolynomialTranscendental(x->opcode()) ? 1 : 0;
    for (const HloInstruction* operand : x->operands()) walk(operand);
  };
  for (const HloInstruction* x : values) walk(x);
  return count;
}

}  // namespace xlens::codegen
