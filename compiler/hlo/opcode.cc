#include "compiler/hlo/opcode.h"

#include <string>
#include <unordered_map>

namespace xlens {

std::string_view HloOpcodeString(HloOpcode opcode) {
  switch (opcode) {
#define XLENS_OPCODE_NAME(e, name, arity) \
  case HloOpcode::e:                      \
    return name;
    XLENS_HLO_OPCODES(XLENS_OPCODE_NAME)
#undef XLENS_OPCODE_NAME
  }
  return "unknown";
}

std::optional<HloOpcode> StringToHloOpcode(std::string_view name) {
  static const auto* table = [] {
    auto* m = new std::unordered_map<std::string_view, HloOpcode>;
#define XLENS_OPCODE_ENTRY(e, n, arity) (*m)[n] = HloOpcode::e;
    XLENS_HLO_OPCODES(XLENS_OPCODE_ENTRY)
#undef XLENS_OPCODE_ENTRY
    (*m)["optimization-barrier"] = HloOpcode::kOptimizationBarrier;
    return m;
  }();
  auto it = table->find(name);
  if (it == table->end()) return std::nullopt;
  return it->second;
}

std::optional<int> HloOpcodeArity(HloOpcode opcode) {
  switch (opcode) {
#define XLENS_OPCODE_ARITY(e, name, arity) \
  case HloOpcode::e:                       \
    return arity < 0 ? std::nullopt : std::optional<int>(arity);
    XLENS_HLO_OPCODES(XLENS_OPCODE_ARITY)
#undef XLENS_OPCODE_ARITY
  }
  return std::nullopt;
}

bool IsElementwiseUnary(HloOpcode op) {
  using H = HloOpcode;
  switch (op) {
    case H::kAbs: case H::kAcos: case H::kAcosh: case H::kAsin: case H::kAsinh: case H::kAtanh:
    case H::kCbrt: case H::kCeil: case H::kClz: case H::kConvert: case H::kBitcastConvert:
    case H::kCopy: case H::kCos: case H::kCosh: case H::kErf: case H::kExp: case H::kExpm1:
    case H::kFloor: case H::kImag: case H::kIsFinite: case H::kLog: case H::kLog1p:
    case H::kLogistic: case H::kNegate: case H::kNot: case H::kPopulationCount: case H::kReal:
    case H::kReducePrecision: case H::kRoundNearestAfz: case H::kRoundNearestEven:
    case H::kRsqrt: case H::kSign: case H::kSin: case H::kSinh: case H::kSqrt: case H::kTan:
    case H::kTanh:
      return true;
    default:
      return false;
  }
}

bool IsElementwiseBinary(HloOpcode op) {
  using H = HloOpcode;
  switch (op) {
    case H::kAdd: case H::kAnd: case H::kAtan2: case H::kCompare: case H::kComplex:
    case H::kDivide: case H::kMaximum: case H::kMinimum: case H::kMultiply: case H::kOr:
    case H::kPower: case H::kRemainder: case H::kShiftLeft: case H::kShiftRightArithmetic:
    case H::kShiftRightLogical: case H::kSubtract: case H::kXor: case H::kStochasticConvert:
      return true;
    default:
      return false;
  }
}

bool IsElementwise(HloOpcode op) {
  return IsElementwiseUnary(op) || IsElementwiseBinary(op) || op == HloOpcode::kSelect ||
         op == HloOpcode::kClamp || op == HloOpcode::kMap;
}

bool IsFullySupportedOpcode(HloOpcode op) {
  using H = HloOpcode;
  switch (op) {
    case H::kParameter: case H::kConstant: case H::kIota:
    case H::kAbs: case H::kNegate: case H::kExp: case H::kExpm1: case H::kLog: case H::kLog1p:
    case H::kSqrt: case H::kRsqrt: case H::kCbrt: case H::kTanh: case H::kLogistic: case H::kErf:
    case H::kSin: case H::kCos: case H::kFloor: case H::kCeil: case H::kRoundNearestEven:
    case H::kRoundNearestAfz: case H::kSign: case H::kNot: case H::kIsFinite:
    case H::kPopulationCount:
    case H::kAdd: case H::kSubtract: case H::kMultiply: case H::kDivide: case H::kRemainder:
    case H::kPower: case H::kMaximum: case H::kMinimum: case H::kAnd: case H::kOr: case H::kXor:
    case H::kAtan2: case H::kShiftLeft: case H::kShiftRightLogical:
    case H::kShiftRightArithmetic:
    case H::kCompare: case H::kSelect: case H::kClamp: case H::kConvert: case H::kBitcastConvert:
    case H::kBroadcast: case H::kReshape: case H::kBitcast: case H::kTranspose: case H::kSlice:
    case H::kDynamicSlice: case H::kDynamicUpdateSlice: case H::kConcatenate: case H::kPad:
    case H::kReverse: case H::kReduce: case H::kReduceWindow: case H::kSelectAndScatter:
    case H::kDot: case H::kConvolution: case H::kGather: case H::kScatter: case H::kSort:
    case H::kTuple: case H::kGetTupleElement: case H::kFusion: case H::kCall: case H::kWhile:
    case H::kConditional: case H::kCustomCall: case H::kCopy: case H::kReducePrecision:
    case H::kRngBitGenerator: case H::kAllReduce: case H::kOptimizationBarrier:
    case H::kMap: case H::kReal: case H::kImag: case H::kComplex:
    case H::kFft: case H::kTopK: case H::kCholesky: case H::kTriangularSolve:
    case H::kBatchNormTraining:
    case H::kBatchNormInference: case H::kBatchNormGrad:
      return true;
    default:
      return false;
  }
}

}  // namespace xlens
