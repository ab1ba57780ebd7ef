#include "compiler/hlo/verifier.h"

#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "compiler/hlo/shape_inference.h"
#include "compiler/hlo/shape_inference_internal.h"

namespace xlens {

namespace {

using shape_inference_internal::ShapesCompatible;
using shape_inference_internal::ShapeString;

// "%add.1 = f32[2,2] add(%p: f32[2,2], %c: f32[2,5])": what an error is about, operands
// included, so that a message can be read without the module at hand.
std::string Describe(const HloInstruction& instruction) {
  std::string out =
      fmt::format("%{} = {} {}(", instruction.name(), ShapeString(instruction.shape()),
                  HloOpcodeString(instruction.opcode()));
  for (int64_t i = 0; i < instruction.operand_count(); ++i) {
    const HloInstruction* operand = instruction.operand(i);
    if (i > 0) out += ", ";
    out += operand == nullptr
               ? "<null>"
               : fmt::format("%{}: {}", operand->name(), ShapeString(operand->shape()));
  }
  return out + ")";
}

Status InstructionError(const HloComputation& computation, const HloInstruction& instruction,
                        std::string_view message) {
  return Error(fmt::format("in %{}, instruction {}: {}", computation.name(), Describe(instruction),
                           message));
}

Status ComputationError(const HloComputation& computation, std::string_view message) {
  return Error(fmt::format("in %{}: {}", computation.name(), message));
}

// A layout, where present, orders exactly the dimensions of its array.
Status CheckLayouts(const Shape& shape, bool layout_required) {
  if (shape.IsTuple()) {
    for (const Shape& element : shape.tuple_shapes()) {
      RETURN_IF_ERROR(CheckLayouts(element, layout_required));
    }
    return OkStatus();
  }
  if (!shape.IsArray()) return OkStatus();
  if (!shape.has_layout()) {
    if (layout_required) {
      return Error(fmt::format("shape {} has no layout", ShapeString(shape)));
    }
    return OkStatus();
  }
  const std::vector<int64_t>& m2m = shape.layout().minor_to_major;
  std::vector<bool> seen(shape.rank(), false);
  bool ok = static_cast<int64_t>(m2m.size()) == shape.rank();
  for (size_t i = 0; ok && i < m2m.size(); ++i) {
    ok = m2m[i] >= 0 && m2m[i] < shape.rank() && !seen[m2m[i]];
    if (ok) seen[m2m[i]] = true;
  }
  if (!ok) {
    return Error(fmt::format("layout {} is not a permutation of the dimensions of {}",
                             shape.layout().ToString(), ShapeString(shape)));
  }
  return OkStatus();
}

class Verifier {
 public:
  Verifier(const HloModule& module, const VerifierOptions& options)
      : module_(module), options_(options) {}

  Status Run() {
    const HloComputation* entry = module_.entry_computation();
    if (entry == nullptr) {
      return Error(fmt::format("module {} has no entry computation", module_.name()));
    }
    const std::vector<HloComputation*> computations = module_.computations();
    std::unordered_set<std::string_view> names;
    for (const HloComputation* computation : computations) {
      computations_.insert(computation);
      if (!names.insert(computation->name()).second) {
        return Error(fmt::format("module {} has two computations named %{}", module_.name(),
                                 computation->name()));
      }
    }
    if (!computations_.count(entry)) {
      return Error(fmt::format("the entry computation %{} does not belong to module {}",
                               entry->name(), module_.name()));
    }
    for (const HloComputation* computation : computations) {
      RETURN_IF_ERROR(VerifyComputation(*computation));
    }
    RETURN_IF_ERROR(VerifyCallGraphIsAcyclic(computations));
    return VerifyEntryLayout(*entry);
  }

 private:
  Status VerifyComputation(const HloComputation& computation) {
    const HloInstruction* root = computation.root_instruction();
    if (root == nullptr) return ComputationError(computation, "the computation has no root");
    if (root->parent() != &computation) {
      return ComputationError(computation, fmt::format("the root %{} belongs to another "
                                                       "computation",
                                                       root->name()));
    }
    const std::vector<HloInstruction*> instructions = computation.instructions();
    RETURN_IF_ERROR(VerifyNamesAndParameters(computation, instructions));
    for (const HloInstruction* instruction : instructions) {
      RETURN_IF_ERROR(VerifyInstruction(computation, *instruction));
    }
    return VerifyAcyclic(computation, instructions);
  }

  Status VerifyNamesAndParameters(const HloComputation& computation,
                                  const std::vector<HloInstruction*>& instructions) {
    std::unordered_set<std::string_view> names;
    names.reserve(instructions.size());
    std::vector<const HloInstruction*> parameters;
    for (const HloInstruction* instruction : instructions) {
      if (!names.insert(instruction->name()).second) {
        return ComputationError(computation,
                                fmt::format("two instructions are named %{}", instruction->name()));
      }
      if (instruction->opcode() == HloOpcode::kParameter) parameters.push_back(instruction);
    }
    std::vector<const HloInstruction*> by_number(parameters.size(), nullptr);
    for (const HloInstruction* parameter : parameters) {
      const int64_t number = parameter->parameter_number();
      if (number < 0 || number >= static_cast<int64_t>(parameters.size())) {
        return InstructionError(
            computation, *parameter,
            fmt::format("parameter number {} is out of range: the computation has {} parameters, "
                        "numbered 0 to {}",
                        number, parameters.size(), parameters.size() - 1));
      }
      if (by_number[number] != nullptr) {
        return InstructionError(computation, *parameter,
                                fmt::format("parameter number {} is also used by %{}", number,
                                            by_number[number]->name()));
      }
      by_number[number] = parameter;
    }
    if (computation.num_parameters() != static_cast<int64_t>(parameters.size())) {
      return ComputationError(computation,
                              fmt::format("the computation lists {} parameters but holds {}",
                                          computation.num_parameters(), parameters.size()));
    }
    return OkStatus();
  }

  Status VerifyInstruction(const HloComputation& computation, const HloInstruction& instruction) {
    if (instruction.parent() != &computation) {
      return InstructionError(computation, instruction, "its parent is another computation");
    }
    if (!instruction.shape().IsValid()) {
      return InstructionError(computation, instruction, "the instruction has no shape");
    }
    const HloOpcode opcode = instruction.opcode();
    if (std::optional<int> arity = HloOpcodeArity(opcode);
        arity && instruction.operand_count() != *arity) {
      return InstructionError(
          computation, instruction,
          fmt::format("{} takes {} operand(s), but has {}", HloOpcodeString(opcode), *arity,
                      instruction.operand_count()));
    }
    for (int64_t i = 0; i < instruction.operand_count(); ++i) {
      const HloInstruction* operand = instruction.operand(i);
      if (operand == nullptr) {
        return InstructionError(computation, instruction, fmt::format("operand {} is null", i));
      }
      if (operand->parent() != &computation) {
        return InstructionError(
            computation, instruction,
            fmt::format("operand %{} belongs to computation %{}", operand->name(),
                        operand->parent() ? operand->parent()->name() : "<none>"));
      }
    }
    for (const HloInstruction* predecessor : instruction.control_predecessors()) {
      if (predecessor->parent() != &computation) {
        return InstructionError(
            computation, instruction,
            fmt::format("control predecessor %{} is in another computation", predecessor->name()));
      }
    }
    for (const CalledComputationAttribute& attr : instruction.called_computation_attributes()) {
      for (const HloComputation* called : attr.computations) {
        if (called == nullptr || !computations_.count(called)) {
          return InstructionError(
              computation, instruction,
              fmt::format("{}= names a computation that is not in the module", attr.key));
        }
      }
    }
    // Sizes are computed everywhere without overflow checks: a shape whose element count or byte
    // size does not fit in int64 must stop here.
    if (Status s = shape_util::CheckShapeSize(instruction.shape()); !s.ok()) {
      return InstructionError(computation, instruction, s.message());
    }
    if (Status s = CheckLayouts(instruction.shape(), options_.layout_sensitive); !s.ok()) {
      return InstructionError(computation, instruction, s.message());
    }
    if (!IsFullySupportedOpcode(opcode)) return OkStatus();

    StatusOr<Shape> inferred = InferShape(instruction);
    if (!inferred.ok()) {
      return InstructionError(computation, instruction, inferred.status().message());
    }
    if (!ShapesCompatible(instruction.shape(), *inferred)) {
      return InstructionError(
          computation, instruction,
          fmt::format("the declared shape {} does not match the inferred {}",
                      ShapeString(instruction.shape()), ShapeString(*inferred)));
    }
    return OkStatus();
  }

  // Iterative depth-first search over operands and control predecessors: modules of 100,000
  // chained instructions must not exhaust the stack.
  Status VerifyAcyclic(const HloComputation& computation,
                       const std::vector<HloInstruction*>& instructions) {
    enum : uint8_t { kUnvisited, kOnStack, kDone };
    std::unordered_map<const HloInstruction*, uint8_t> state;
    state.reserve(instructions.size());
    std::vector<std::pair<const HloInstruction*, size_t>> stack;
    for (const HloInstruction* start : instructions) {
      if (state[start] != kUnvisited) continue;
      state[start] = kOnStack;
      stack.push_back({start, 0});
      while (!stack.empty()) {
        auto& [instruction, next] = stack.back();
        const size_t operands = instruction->operands().size();
        const size_t total = operands + instruction->control_predecessors().size();
        if (next == total) {
          state[instruction] = kDone;
          stack.pop_back();
          continue;
        }
        const HloInstruction* dep = next < operands
                                        ? instruction->operand(static_cast<int64_t>(next))
                                        : instruction->control_predecessors()[next - operands];
        ++next;
        uint8_t& dep_state = state[dep];
        if (dep_state == kOnStack) {
          return InstructionError(computation, *dep,
                                  "the instruction depends on itself (the graph has a cycle)");
        }
        if (dep_state == kUnvisited) {
          dep_state = kOnStack;
          stack.push_back({dep, 0});
        }
      }
    }
    return OkStatus();
  }

  // A computation may not call itself, directly or through others: HLO has no recursion.
  Status VerifyCallGraphIsAcyclic(const std::vector<HloComputation*>& computations) {
    std::unordered_map<const HloComputation*, std::vector<const HloComputation*>> callees;
    for (const HloComputation* computation : computations) {
      std::unordered_set<const HloComputation*> seen;
      for (const HloInstruction* instruction : computation->instructions()) {
        for (const HloComputation* called : instruction->called_computations()) {
          if (seen.insert(called).second) callees[computation].push_back(called);
        }
      }
    }
    enum : uint8_t { kUnvisited, kOnStack, kDone };
    std::unordered_map<const HloComputation*, uint8_t> state;
    std::vector<std::pair<const HloComputation*, size_t>> stack;
    for (const HloComputation* start : computations) {
      if (state[start] != kUnvisited) continue;
      state[start] = kOnStack;
      stack.push_back({start, 0});
      while (!stack.empty()) {
        auto& [computation, next] = stack.back();
        const std::vector<const HloComputation*>& out = callees[computation];
        if (next == out.size()) {
          state[computation] = kDone;
          stack.pop_back();
          continue;
        }
        const HloComputation* called = out[next++];
        uint8_t& called_state = state[called];
        if (called_state == kOnStack) {
          return Error(fmt::format("computation %{} calls itself (the call graph has a cycle)",
                                   called->name()));
        }
        if (called_state == kUnvisited) {
          called_state = kOnStack;
          stack.push_back({called, 0});
        }
      }
    }
    return OkStatus();
  }

  // entry_computation_layout, when written, describes the entry's signature.
  Status VerifyEntryLayout(const HloComputation& entry) {
    const std::optional<ComputationLayout>& layout = module_.entry_computation_layout();
    if (!layout) return OkStatus();
    if (static_cast<int64_t>(layout->parameters.size()) != entry.num_parameters()) {
      return Error(fmt::format(
          "entry_computation_layout has {} parameters, but the entry computation %{} has {}",
          layout->parameters.size(), entry.name(), entry.num_parameters()));
    }
    for (int64_t i = 0; i < entry.num_parameters(); ++i) {
      const Shape& shape = entry.parameter_instruction(i)->shape();
      if (!ShapesCompatible(layout->parameters[i], shape)) {
        return Error(
            fmt::format("entry_computation_layout gives parameter {} the shape {}, but %{} has {}",
                        i, ShapeString(layout->parameters[i]),
                        entry.parameter_instruction(i)->name(), ShapeString(shape)));
      }
    }
    const Shape& result = entry.root_instruction()->shape();
    if (!ShapesCompatible(layout->result, result)) {
      return Error(fmt::format(
          "entry_computation_layout gives the result the shape {}, but the root %{} has {}",
          ShapeString(layout->result), entry.root_instruction()->name(), ShapeString(result)));
    }
    return OkStatus();
  }

  const HloModule& module_;
  const VerifierOptions& options_;
  std::unordered_set<const HloComputation*> computations_;
};

}  // namespace

Status VerifyModule(const HloModule& module, const VerifierOptions& options) {
  return Verifier(module, options).Run();
}

}  // namespace xlens
