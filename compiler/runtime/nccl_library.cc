#include "compiler/runtime/nccl_library.h"

#include <fmt/format.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/shape.h"
#include "compiler/runtime/dynamic_library.h"

namespace xlens::runtime {

std::vector<std::string> NcclCandidates() {
  return CudaLibraryCandidates({"libnccl.so.2", "libnccl.so"}, "NCCL_HOME");
}

StatusOr<NcclLibrary> LoadNcclFrom(const std::vector<std::string>& candidates) {
  ASSIGN_OR_RETURN(DynamicLibrary opened,
                   OpenFirstLibrary(candidates, "NCCL",
                                    "collectives between GPUs need it: install libnccl2 (from "
                                    "NVIDIA's CUDA repository), or pip's nvidia-nccl-cu12 with "
                                    "NCCL_HOME set to its nvidia/nccl folder"));
  NcclLibrary lib;
  RETURN_IF_ERROR(ResolveSymbols(opened,
                                 {{lib.ncclGetVersion, "ncclGetVersion"},
                                  {lib.ncclGetErrorString, "ncclGetErrorString"},
                                  {lib.ncclCommInitAll, "ncclCommInitAll"},
                                  {lib.ncclCommDestroy, "ncclCommDestroy"},
                                  {lib.ncclGroupStart, "ncclGroupStart"},
                                  {lib.ncclGroupEnd, "ncclGroupEnd"},
                                  {lib.ncclAllReduce, "ncclAllReduce"},
                                  {lib.ncclAllGather, "ncclAllGather"},
                                  {lib.ncclReduceScatter, "ncclReduceScatter"},
                                  {lib.ncclBroadcast, "ncclBroadcast"},
                                  {lib.ncclSend, "ncclSend"},
                                  {lib.ncclRecv, "ncclRecv"}},
                                 "ncclSend and ncclRecv need NCCL 2.7 or later"));
  lib.path = opened.path;
  lib.handle = opened.handle;
  if (lib.ncclGetVersion(&lib.version) != 0) lib.version = 0;
  return lib;
}

StatusOr<const NcclLibrary*> LoadNccl() {
  static const StatusOr<NcclLibrary> loaded = LoadNcclFrom(NcclCandidates());
  if (!loaded.ok()) return loaded.status();
  return &*loaded;
}

Status CheckNccl(const NcclLibrary& library, int result, const char* call) {
  if (result == 0) return OkStatus();
  const char* text = library.ncclGetErrorString != nullptr ? library.ncclGetErrorString(result) : nullptr;
  return Error(fmt::format("NCCL call {} failed: {} (NCCL error {})", call, text ? text : "unknown",
                           result));
}

std::optional<NcclType> NcclTypeOf(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::S8: return NcclType::kInt8;
    case PrimitiveType::PRED: case PrimitiveType::U8: return NcclType::kUint8;
    case PrimitiveType::S32: return NcclType::kInt32;
    case PrimitiveType::U32: return NcclType::kUint32;
    case PrimitiveType::S64: return NcclType::kInt64;
    case PrimitiveType::U64: return NcclType::kUint64;
    case PrimitiveType::F16: return NcclType::kFloat16;
    case PrimitiveType::BF16: return NcclType::kBfloat16;
    case PrimitiveType::F32: return NcclType::kFloat32;
    case PrimitiveType::F64: return NcclType::kFloat64;
    case PrimitiveType::F8E4M3FN: return NcclType::kFloat8e4m3;
    case PrimitiveType::F8E5M2: return NcclType::kFloat8e5m2;
    default: return std::nullopt;  // s16, u16, sub-byte types, complex: no NCCL type reduces them
  }
}

std::optional<NcclOp> NcclOpOf(const HloComputation* to_apply, PrimitiveType type) {
  if (to_apply == nullptr || to_apply->num_parameters() != 2) return std::nullopt;
  const HloInstruction* root = to_apply->root_instruction();
  if (root == nullptr || root->operand_count() != 2) return std::nullopt;
  for (int64_t i = 0; i < 2; ++i) {
    if (root->operand(i)->opcode() != HloOpcode::kParameter) return std::nullopt;
  }
  if (root->operand(0) == root->operand(1) || !NcclTypeOf(type)) return std::nullopt;
  const bool pred = type == PrimitiveType::PRED;
  switch (root->opcode()) {
    case HloOpcode::kAdd: return pred ? std::nullopt : std::optional(NcclOp::kSum);
    case HloOpcode::kMultiply: return pred ? std::nullopt : std::optional(NcclOp::kProd);
    case HloOpcode::kMaximum: return NcclOp::kMax;
    case HloOpcode::kMinimum: return NcclOp::kMin;
    // Over 0 and 1, or is the maximum and and the minimum.
    case HloOpcode::kOr: return pred ? std::optional(NcclOp::kMax) : std::nullopt;
    case HloOpcode::kAnd: return pred ? std::optional(NcclOp::kMin) : std::nullopt;
    default: return std::nullopt;
  }
}

namespace {

// Whether concatenating whole buffers by rank is concatenating along `dimension`: every
// dimension more major in memory than it has one element.
bool MajorInMemory(const Shape& shape, int64_t dimension) {
  std::vector<int64_t> minor_to_major = shape.has_layout() && !shape.layout().minor_to_major.empty()
                                            ? shape.layout().minor_to_major
                                            : shape_util::DefaultMinorToMajor(shape.rank());
  bool above = false;
  for (int64_t d : minor_to_major) {
    if (above && shape.dimensions()[d] != 1) return false;
    if (d == dimension) above = true;
  }
  return above;
}

// Every operand an array; their element counts in bytes (moved as u8) or elements of `type`.
Status ArrayOperands(const HloInstruction& hlo, bool as_bytes, NcclPlan& plan) {
  for (const HloInstruction* operand : hlo.operands()) {
    if (!operand->shape().IsArray()) {
      return Error(fmt::format("operand %{} is not an array", operand->name()));
    }
    plan.counts.push_back(as_bytes ? shape_util::ByteSizeOf(operand->shape()) : operand->shape().num_elements());
  }
  return OkStatus();
}

}  // namespace

StatusOr<NcclPlan> PlanNcclCollective(const HloInstruction& hlo) {
  NcclPlan plan;
  auto one_dimension = [&]() -> StatusOr<int64_t> {
    if (hlo.dimensions().size() != 1) return Error("not one dimension");
    return hlo.dimensions()[0];
  };
  switch (hlo.opcode()) {
    case HloOpcode::kAllReduce: case HloOpcode::kAllReduceStart: {
      plan.kind = NcclPlan::Kind::kAllReduce;
      if (hlo.operand_count() == 0) return Error("no operands");
      const PrimitiveType type = hlo.operand(0)->shape().element_type();
      for (const HloInstruction* operand : hlo.operands()) {
        if (operand->shape().element_type() != type) return Error("operands of several types");
      }
      std::optional<NcclType> nccl_type = NcclTypeOf(type);
      if (!nccl_type) return Error(fmt::format("NCCL does not reduce {}", PrimitiveTypeName(type)));
      std::optional<NcclOp> op = NcclOpOf(hlo.to_apply(), type);
      if (!op) return Error(fmt::format("to_apply is not an add, multiply, maximum or minimum NCCL "
                                        "reduces {} with", PrimitiveTypeName(type)));
      plan.type = *nccl_type;
      plan.op = *op;
      RETURN_IF_ERROR(ArrayOperands(hlo, /*as_bytes=*/false, plan));
      return plan;
    }
    case HloOpcode::kReduceScatter: {
      plan.kind = NcclPlan::Kind::kReduceScatter;
      if (hlo.operand_count() != 1) return Error("not one operand");
      const Shape& shape = hlo.operand(0)->shape();
      ASSIGN_OR_RETURN(int64_t d, one_dimension());
      if (!shape.IsArray() || !MajorInMemory(shape, d)) {
        return Error(fmt::format("reduce-scatter along dimension {}, not the major one", d));
      }
      std::optional<NcclType> nccl_type = NcclTypeOf(shape.element_type());
      std::optional<NcclOp> op = NcclOpOf(hlo.to_apply(), shape.element_type());
      if (!nccl_type || !op) return Error("to_apply or the type is not one NCCL reduces");
      plan.type = *nccl_type;
      plan.op = *op;
      RETURN_IF_ERROR(ArrayOperands(hlo, /*as_bytes=*/false, plan));
      return plan;
    }
    case HloOpcode::kAllGather: {
      plan.kind = NcclPlan::Kind::kAllGather;
      if (hlo.operand_count() != 1) return Error("not one operand");
      ASSIGN_OR_RETURN(int64_t d, one_dimension());
      if (!hlo.shape().IsArray() || !MajorInMemory(hlo.shape(), d) ||
          !MajorInMemory(hlo.operand(0)->shape(), d)) {
        return Error(fmt::format("all-gather along dimension {}, not the major one", d));
      }
      RETURN_IF_ERROR(ArrayOperands(hlo, /*as_bytes=*/true, plan));
      return plan;
    }
    case HloOpcode::kAllToAll: {
      plan.kind = NcclPlan::Kind::kAllToAll;
      if (hlo.dimensions_attr) {
        ASSIGN_OR_RETURN(int64_t d, one_dimension());
        if (hlo.operand_count() != 1 || !MajorInMemory(hlo.operand(0)->shape(), d)) {
          return Error(fmt::format("all-to-all along dimension {}, not the major one", d));
        }
      }
      RETURN_IF_ERROR(ArrayOperands(hlo, /*as_bytes=*/true, plan));
      return plan;
    }
    case HloOpcode::kCollectivePermute: {
      plan.kind = NcclPlan::Kind::kPermute;
      if (hlo.operand_count() != 1) return Error("not one operand");
      RETURN_IF_ERROR(ArrayOperands(hlo, /*as_bytes=*/true, plan));
      return plan;
    }
    case HloOpcode::kCollectiveBroadcast: {
      plan.kind = NcclPlan::Kind::kBroadcast;
      RETURN_IF_ERROR(ArrayOperands(hlo, /*as_bytes=*/true, plan));
      return plan;
    }
    default:
      return Error(fmt::format("{} runs through the host", HloOpcodeString(hlo.opcode())));
  }
}

}  // namespace xlens::runtime
