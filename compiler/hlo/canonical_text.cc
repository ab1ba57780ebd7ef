#include "compiler/hlo/canonical_text.h"

#include <map>

#include <fmt/format.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/printer.h"

namespace xlens {

namespace {

class CanonicalPrinter {
 public:
  // False once something without a pinned-down value was met.
  bool ok() const { return ok_; }

  // `instruction`, each operand written by `operand_ref`.
  template <typename OperandRef>
  std::string Instruction(const HloInstruction& instruction, OperandRef operand_ref) {
    std::string out = instruction.shape().ToString() + " " +
                      std::string(HloOpcodeString(instruction.opcode())) + "(";
    if (instruction.opcode() == HloOpcode::kParameter) {
      out += std::to_string(instruction.parameter_number());
    } else if (instruction.opcode() == HloOpcode::kConstant) {
      out += Constant(instruction);
    } else {
      for (size_t i = 0; i < instruction.operands().size(); ++i) {
        if (i > 0) out += ", ";
        out += operand_ref(instruction.operand(static_cast<int64_t>(i)));
      }
    }
    out += ")";
    const std::string typed = TypedAttributesToString(instruction);
    if (!typed.empty()) out += ", " + typed;
    for (const CalledComputationAttribute& attr : instruction.called_computation_attributes()) {
      out += ", " + attr.key + "={";
      for (const HloComputation* computation : attr.computations) {
        out += computation == nullptr ? std::string("<null>") : Computation(*computation);
      }
      out += "}";
    }
    // Raw attributes (backend_config among them) can change what the compiler emits.
    for (const RawAttribute& raw : instruction.raw_attributes) {
      out += ", " + raw.key + "=" + raw.value;
    }
    return out;
  }

 private:
  // The value bit for bit: printed floats would hide a NaN's payload and the sign of a zero.
  std::string Constant(const HloInstruction& instruction) {
    if (!instruction.has_literal()) return "<none>";
    const Literal& literal = instruction.literal();
    if (literal.is_elided() || instruction.shape().IsTuple()) {
      ok_ = false;
      return "";
    }
    if (literal.is_text_only()) return "text:" + literal.ToStringWithoutShape();
    // The bytes themselves behind their count: the count keeps them from running into the text
    // that follows, and a large fused constant costs one copy, not one formatted call a byte.
    std::string out = fmt::format("bytes{}:", literal.size_bytes());
    out.append(reinterpret_cast<const char*>(literal.untyped_data()), literal.size_bytes());
    return out;
  }

  // Parameters by number, then the instructions the root depends on, in post order from the
  // root (operands in order): the numbering follows the structure, not the order in which the
  // instructions were added. Instructions the root does not reach (dead code, which the
  // emitters still see among the users of the others) come after them, in the computation's
  // post order.
  std::string Computation(const HloComputation& computation) {
    std::map<const HloInstruction*, int64_t> numbers;
    std::vector<const HloInstruction*> order;
    for (const HloInstruction* parameter : computation.parameter_instructions()) {
      if (parameter == nullptr) continue;
      numbers[parameter] = static_cast<int64_t>(order.size());
      order.push_back(parameter);
    }
    // Iterative: fused computations can be deep chains.
    auto number_from = [&](const HloInstruction* start) {
      if (start == nullptr || numbers.count(start)) return;
      std::vector<std::pair<const HloInstruction*, size_t>> stack = {{start, 0}};
      numbers[start] = -1;
      while (!stack.empty()) {
        auto& [instruction, next] = stack.back();
        if (next < instruction->operands().size()) {
          const HloInstruction* operand = instruction->operand(static_cast<int64_t>(next++));
          if (!numbers.count(operand)) {
            numbers[operand] = -1;
            stack.push_back({operand, 0});
          }
          continue;
        }
        numbers[instruction] = static_cast<int64_t>(order.size());
        order.push_back(instruction);
        stack.pop_back();
      }
    };
    const HloInstruction* root = computation.root_instruction();
    number_from(root);
    for (const HloInstruction* instruction : computation.MakeInstructionPostOrder()) {
      number_from(instruction);
    }
    std::string out = "{";
    for (const HloInstruction* instruction : order) {
      out += fmt::format("%{}{} = ", instruction == root ? "root." : "", numbers.at(instruction));
      out += Instruction(*instruction, [&](const HloInstruction* operand) {
        auto it = numbers.find(operand);
        // An operand outside the computation cannot be named by place; its shape must do.
        return it == numbers.end() ? operand->shape().ToString() + " <outer>"
                                   : fmt::format("%{}", it->second);
      });
      out += "; ";
    }
    return out + "}";
  }

  bool ok_ = true;
};

}  // namespace

std::optional<std::string> CanonicalInstructionText(const HloInstruction& instruction) {
  CanonicalPrinter printer;
  std::string text = printer.Instruction(instruction, [](const HloInstruction* operand) {
    return operand->shape().ToString();
  });
  if (!printer.ok()) return std::nullopt;
  return text;
}

}  // namespace xlens
