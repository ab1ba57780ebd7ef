// Collectives in the reference evaluator, with XLA's semantics. Each device brings its operands to
// the rendezvous of its group (collective_rendezvous.h) and computes its own result from what
// every member brought: the reductions fold the members' values in rank order, so every member
// of a group computes the same bits.
#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/collective_rendezvous.h"
#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {
namespace {

// Each member's value in a collective, by rank.
using Pieces = std::vector<std::shared_ptr<const Literal>>;

// This device's group in a collective and its rank there.
struct Placement {
  std::vector<int64_t> group;
  int64_t rank = 0;
  int64_t device = 0;
};

const DeviceTopology& SingleDevice() {
  static const DeviceTopology kOne;
  return kOne;
}

StatusOr<Placement> Place(const HloEvaluator& evaluator, const HloInstruction& instruction) {
  const DeviceCollectives* device = evaluator.device();
  const DeviceTopology& topology = device ? device->topology() : SingleDevice();
  const int64_t id = device ? device->device_id() : 0;
  auto groups = ParticipatingDeviceGroups(instruction, topology);
  if (!groups.ok()) {
    return Error(groups.status().message() + HeaderTopologyHint(instruction, topology));
  }
  for (auto& group : *groups) {
    for (size_t rank = 0; rank < group.size(); ++rank) {
      if (group[rank] == id) return Placement{std::move(group), static_cast<int64_t>(rank), id};
    }
  }
  return Error(fmt::format("device {} is in none of the groups", id));
}

// Every member's value (in rank order) once all have brought theirs; checks that they agree on
// its shape.
StatusOr<Pieces> Exchange(HloEvaluator& evaluator, const HloInstruction& instruction,
                          const Placement& placement, Literal mine) {
  DeviceCollectives* device = evaluator.device();
  const int64_t occurrence = device ? device->NextOccurrence(instruction) : 0;
  if (placement.group.size() == 1) return Pieces{std::make_shared<const Literal>(std::move(mine))};
  if (device == nullptr || device->rendezvous() == nullptr) {
    return Error("a group of several devices on a single-device evaluation");
  }
  ASSIGN_OR_RETURN(Pieces values, device->rendezvous()->Meet(instruction, occurrence,
                                                              placement.device, placement.group,
                                                              std::move(mine)));
  for (size_t rank = 1; rank < values.size(); ++rank) {
    if (!shape_util::Compatible(values[rank]->shape(), values[0]->shape())) {
      return Error(fmt::format("device {} brought {} where device {} brought {}",
                               placement.group[rank], values[rank]->shape().ToString(false),
                               placement.group[0], values[0]->shape().ToString(false)));
    }
  }
  return values;
}

// The operands as one value: the operand itself, or a tuple of them.
Literal Bundle(std::span<const Literal* const> operands) {
  if (operands.size() == 1) return Literal(*operands[0]);
  std::vector<Literal> elements;
  for (const Literal* operand : operands) elements.push_back(*operand);
  return Literal::MakeTuple(std::move(elements));
}

const Literal& Part(const Literal& bundle, size_t count, size_t k) {
  return count == 1 ? bundle : bundle.tuple_element(static_cast<int64_t>(k));
}

Literal Unbundle(std::vector<Literal> results) {
  if (results.size() == 1) return std::move(results[0]);
  return Literal::MakeTuple(std::move(results));
}

Status ExpectArrays(std::span<const Literal* const> operands) {
  if (operands.empty()) return Error("expected at least one operand");
  for (const Literal* operand : operands) {
    if (!operand->shape().IsArray()) {
      return Error(fmt::format("expected array operands, got {}", operand->shape().ToString(false)));
    }
  }
  return OkStatus();
}

}  // namespace

BinaryKernel WholeArrayFold(const HloComputation* to_apply, PrimitiveType type, bool& swapped) {
  const HloInstruction* root = to_apply->root_instruction();
  if (to_apply->num_parameters() != 2 || root == nullptr || root->operand_count() != 2 ||
      root->opcode() == HloOpcode::kCompare || !root->shape().IsArray() ||
      root->shape().rank() != 0 || root->shape().element_type() != type) {
    return nullptr;
  }
  const HloInstruction* lhs = root->operand(0);
  const HloInstruction* rhs = root->operand(1);
  if (lhs->opcode() != HloOpcode::kParameter || rhs->opcode() != HloOpcode::kParameter ||
      lhs == rhs || lhs->shape().element_type() != type || rhs->shape().element_type() != type) {
    return nullptr;
  }
  swapped = lhs->parameter_number() == 1;
  auto kernel = SelectBinaryKernel(*root, type);
  return kernel.ok() ? *kernel : nullptr;
}

namespace {

// Folds every member's k-th value with to_apply, in rank order.
StatusOr<std::vector<Literal>> Reduce(HloEvaluator& evaluator, const HloInstruction& instruction,
                                      const Pieces& values, size_t count) {
  if (instruction.to_apply() == nullptr) return Error("missing to_apply");
  std::vector<Literal> results;
  for (size_t k = 0; k < count; ++k) {
    Literal accumulator(Part(*values[0], count, k));
    const PrimitiveType type = accumulator.shape().element_type();
    bool swapped = false;
    if (BinaryKernel fold = WholeArrayFold(instruction.to_apply(), type, swapped)) {
      uint8_t* acc = accumulator.untyped_data();
      for (size_t rank = 1; rank < values.size(); ++rank) {
        const uint8_t* in = Part(*values[rank], count, k).untyped_data();
        if (swapped) {
          fold(in, acc, acc, accumulator.element_count());
        } else {
          fold(acc, in, acc, accumulator.element_count());
        }
      }
      results.push_back(std::move(accumulator));
      continue;
    }
    ASSIGN_OR_RETURN(ScalarCaller caller,
                     ScalarCaller::Create(evaluator, instruction.to_apply(), {type, type}, {type}));
    const int64_t width = ByteWidth(type);
    const int64_t n = accumulator.element_count();
    uint8_t* acc = accumulator.untyped_data();
    for (size_t rank = 1; rank < values.size(); ++rank) {
      const uint8_t* in = Part(*values[rank], count, k).untyped_data();
      for (int64_t i = 0; i < n; ++i) {
        const void* arguments[2] = {acc + i * width, in + i * width};
        void* out[1] = {acc + i * width};
        RETURN_IF_ERROR(caller.Call(arguments, out));
        if ((i & 0xffff) == 0 && evaluator.cancelled()) return CancelledError();
      }
    }
    results.push_back(std::move(accumulator));
  }
  return results;
}

StatusOr<int64_t> OneDimension(const HloInstruction& instruction, const Shape& shape) {
  if (instruction.dimensions().size() != 1) {
    return Error(fmt::format("expected dimensions={{d}}, got {} dimensions",
                             instruction.dimensions().size()));
  }
  const int64_t d = instruction.dimensions()[0];
  if (d < 0 || d >= shape.rank()) {
    return Error(fmt::format("dimension {} is out of range for {}", d, shape.ToString(false)));
  }
  return d;
}

// Copies `block` (dims of `block_shape`) from src at `src_offset` along dimension d to dst at
// `dst_offset` along d.
void CopyBlock(const Literal& src, int64_t src_offset, Literal& dst, int64_t dst_offset,
               std::vector<int64_t> block, int64_t d) {
  const std::vector<int64_t> src_strides = StridesOf(src.shape());
  const std::vector<int64_t> dst_strides = StridesOf(dst.shape());
  StridedCopy(ByteWidth(src.shape().element_type()), block, dst.untyped_data(),
              dst_offset * dst_strides[d], dst_strides, src.untyped_data(),
              src_offset * src_strides[d], src_strides);
}

StatusOr<Literal> AllReduce(HloEvaluator& evaluator, const HloInstruction& instruction,
                            std::span<const Literal* const> operands) {
  RETURN_IF_ERROR(ExpectArrays(operands));
  ASSIGN_OR_RETURN(Placement placement, Place(evaluator, instruction));
  ASSIGN_OR_RETURN(Pieces values, Exchange(evaluator, instruction, placement, Bundle(operands)));
  // A rendezvous spanning processes may reduce itself (MPI_Allreduce) and bring one value.
  if (values.size() == 1 && placement.group.size() > 1) return Literal(*values[0]);
  ASSIGN_OR_RETURN(std::vector<Literal> results,
                   Reduce(evaluator, instruction, values, operands.size()));
  return Unbundle(std::move(results));
}

// Every member's operands concatenated along the dimension, in rank order.
StatusOr<Literal> AllGather(HloEvaluator& evaluator, const HloInstruction& instruction,
                            std::span<const Literal* const> operands) {
  RETURN_IF_ERROR(ExpectArrays(operands));
  ASSIGN_OR_RETURN(int64_t d, OneDimension(instruction, operands[0]->shape()));
  ASSIGN_OR_RETURN(Placement placement, Place(evaluator, instruction));
  ASSIGN_OR_RETURN(Pieces values, Exchange(evaluator, instruction, placement, Bundle(operands)));
  std::vector<Literal> results;
  for (size_t k = 0; k < operands.size(); ++k) {
    const Shape& shape = operands[k]->shape();
    if (d >= shape.rank()) return Error("the operands differ in rank");
    std::vector<int64_t> dims(shape.dimensions().begin(), shape.dimensions().end());
    const int64_t size = dims[d];
    std::vector<int64_t> out_dims = dims;
    out_dims[d] = size * static_cast<int64_t>(values.size());
    Literal result(Shape(shape.element_type(), out_dims));
    for (size_t rank = 0; rank < values.size(); ++rank) {
      CopyBlock(Part(*values[rank], operands.size(), k), 0, result,
                static_cast<int64_t>(rank) * size, dims, d);
    }
    results.push_back(std::move(result));
  }
  return Unbundle(std::move(results));
}

// The reduction of every member's operands, cut along the dimension: rank r keeps the r-th piece.
StatusOr<Literal> ReduceScatter(HloEvaluator& evaluator, const HloInstruction& instruction,
                                std::span<const Literal* const> operands) {
  RETURN_IF_ERROR(ExpectArrays(operands));
  ASSIGN_OR_RETURN(int64_t d, OneDimension(instruction, operands[0]->shape()));
  ASSIGN_OR_RETURN(Placement placement, Place(evaluator, instruction));
  const int64_t members = static_cast<int64_t>(placement.group.size());
  for (const Literal* operand : operands) {
    if (d >= operand->shape().rank() || operand->shape().dimensions()[d] % members != 0) {
      return Error(fmt::format("dimension {} of {} does not split into {} equal pieces", d,
                               operand->shape().ToString(false), members));
    }
  }
  ASSIGN_OR_RETURN(Pieces values, Exchange(evaluator, instruction, placement, Bundle(operands)));
  ASSIGN_OR_RETURN(std::vector<Literal> reduced,
                   Reduce(evaluator, instruction, values, operands.size()));
  std::vector<Literal> results;
  for (const Literal& full : reduced) {
    std::vector<int64_t> dims(full.shape().dimensions().begin(), full.shape().dimensions().end());
    dims[d] /= members;
    Literal piece(Shape(full.shape().element_type(), dims));
    CopyBlock(full, placement.rank * dims[d], piece, 0, dims, d);
    results.push_back(std::move(piece));
  }
  return Unbundle(std::move(results));
}

// With dimensions={d}: the operand cut in G pieces along d, piece j going to rank j, and the
// pieces received concatenated along d in rank order. Without: G operands, the j-th going to rank
// j; the result's i-th element is what rank i sent.
StatusOr<Literal> AllToAll(HloEvaluator& evaluator, const HloInstruction& instruction,
                           std::span<const Literal* const> operands) {
  RETURN_IF_ERROR(ExpectArrays(operands));
  ASSIGN_OR_RETURN(Placement placement, Place(evaluator, instruction));
  const int64_t members = static_cast<int64_t>(placement.group.size());
  if (instruction.dimensions_attr) {
    if (operands.size() != 1) {
      return Error(fmt::format("all-to-all with dimensions= takes 1 operand, got {}",
                               operands.size()));
    }
    ASSIGN_OR_RETURN(int64_t d, OneDimension(instruction, operands[0]->shape()));
    const Shape& shape = operands[0]->shape();
    if (shape.dimensions()[d] % members != 0) {
      return Error(fmt::format("dimension {} of {} does not split into {} equal pieces", d,
                               shape.ToString(false), members));
    }
    ASSIGN_OR_RETURN(Pieces values, Exchange(evaluator, instruction, placement, Bundle(operands)));
    std::vector<int64_t> piece(shape.dimensions().begin(), shape.dimensions().end());
    piece[d] /= members;
    Literal result(Shape(shape.element_type(), shape.dimensions()));
    for (int64_t rank = 0; rank < members; ++rank) {
      CopyBlock(*values[rank], placement.rank * piece[d], result, rank * piece[d], piece, d);
    }
    return result;
  }
  if (static_cast<int64_t>(operands.size()) != members) {
    return Error(fmt::format("all-to-all without dimensions= takes one operand per member of its "
                             "group ({}), got {}", members, operands.size()));
  }
  ASSIGN_OR_RETURN(Pieces values, Exchange(evaluator, instruction, placement, Bundle(operands)));
  std::vector<Literal> results;
  for (int64_t rank = 0; rank < members; ++rank) {
    results.push_back(Part(*values[rank], operands.size(), placement.rank));
  }
  return Unbundle(std::move(results));
}

// What the source paired with this device sent; zeros when no pair targets it.
StatusOr<Literal> CollectivePermute(HloEvaluator& evaluator, const HloInstruction& instruction,
                                    std::span<const Literal* const> operands) {
  if (operands.size() != 1) {
    return Error(fmt::format("collective-permute of {} operands is not supported", operands.size()));
  }
  ASSIGN_OR_RETURN(Placement placement, Place(evaluator, instruction));
  const DeviceCollectives* device = evaluator.device();
  ASSIGN_OR_RETURN(std::vector<int64_t> sources,
                   PermuteSources(instruction, device ? device->topology() : SingleDevice()));
  ASSIGN_OR_RETURN(Pieces values, Exchange(evaluator, instruction, placement, Bundle(operands)));
  const int64_t source = sources[placement.device];
  for (size_t rank = 0; rank < placement.group.size(); ++rank) {
    if (placement.group[rank] == source) return Literal(*values[rank]);
  }
  return Literal(operands[0]->shape());
}

StatusOr<Literal> CollectiveBroadcast(HloEvaluator& evaluator, const HloInstruction& instruction,
                                      std::span<const Literal* const> operands) {
  RETURN_IF_ERROR(ExpectArrays(operands));
  ASSIGN_OR_RETURN(Placement placement, Place(evaluator, instruction));
  ASSIGN_OR_RETURN(Pieces values, Exchange(evaluator, instruction, placement, Bundle(operands)));
  return Literal(*values[0]);
}

// The start of an async pair whose shape is (operands, results, context...): the results are
// computed now; the context (XLA's u32 scratch values) is zeros.
StatusOr<Literal> StartTuple(const HloInstruction& instruction,
                             std::span<const Literal* const> operands, Literal results) {
  const Shape& shape = instruction.shape();
  if (!shape.IsTuple() || shape.tuple_shapes_size() < 2) {
    return Error(fmt::format("expected a tuple (operands, results, ...) shape, got {}",
                             shape.ToString(false)));
  }
  std::vector<Literal> elements;
  elements.push_back(Bundle(operands));
  elements.push_back(std::move(results));
  for (int64_t i = 2; i < shape.tuple_shapes_size(); ++i) {
    elements.emplace_back(shape.tuple_shapes(i));
  }
  return Literal::MakeTuple(std::move(elements));
}

StatusOr<Literal> DoneOf(const Literal& started) {
  if (!started.shape().IsTuple() || started.tuple_size() < 2) {
    return Error(fmt::format("expected the tuple its -start made, got {}",
                             started.shape().ToString(false)));
  }
  return Literal(started.tuple_element(1));
}

StatusOr<Literal> Id(HloEvaluator& evaluator, bool replica) {
  const DeviceCollectives* device = evaluator.device();
  const int64_t id = device == nullptr ? 0 : replica ? device->replica() : device->partition();
  return Literal::CreateR0<uint32_t>(PrimitiveType::U32, static_cast<uint32_t>(id));
}

}  // namespace

StatusOr<Literal> HandleCollective(HloEvaluator& evaluator, const HloInstruction& instruction,
                                   std::span<const Literal* const> operands) {
  RETURN_IF_ERROR(CheckSupportedShape(instruction.shape()));
  switch (instruction.opcode()) {
    case HloOpcode::kReplicaId:
      return Id(evaluator, /*replica=*/true);
    case HloOpcode::kPartitionId:
      return Id(evaluator, /*replica=*/false);
    case HloOpcode::kAllReduce:
    case HloOpcode::kAllReduceStart:
      return AllReduce(evaluator, instruction, operands);
    case HloOpcode::kAllReduceDone:
      if (operands.size() != 1) return Error("all-reduce-done takes 1 operand");
      return Literal(*operands[0]);
    case HloOpcode::kAllGather:
      return AllGather(evaluator, instruction, operands);
    case HloOpcode::kAllGatherStart: {
      ASSIGN_OR_RETURN(Literal gathered, AllGather(evaluator, instruction, operands));
      return StartTuple(instruction, operands, std::move(gathered));
    }
    case HloOpcode::kReduceScatter:
      return ReduceScatter(evaluator, instruction, operands);
    case HloOpcode::kAllToAll:
      return AllToAll(evaluator, instruction, operands);
    case HloOpcode::kCollectivePermute:
      return CollectivePermute(evaluator, instruction, operands);
    case HloOpcode::kCollectivePermuteStart: {
      ASSIGN_OR_RETURN(Literal permuted, CollectivePermute(evaluator, instruction, operands));
      return StartTuple(instruction, operands, std::move(permuted));
    }
    case HloOpcode::kAllGatherDone:
    case HloOpcode::kCollectivePermuteDone:
      if (operands.size() != 1) return Error("a -done takes 1 operand");
      return DoneOf(*operands[0]);
    case HloOpcode::kCollectiveBroadcast:
      return CollectiveBroadcast(evaluator, instruction, operands);
    default:
      return Error(fmt::format("unsupported opcode {}", HloOpcodeString(instruction.opcode())));
  }
}

}  // namespace xlens::evaluator_internal
