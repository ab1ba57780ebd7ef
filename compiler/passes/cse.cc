#include "compiler/passes/cse.h"

#include <functional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/passes/dce.h"

namespace xlens {
namespace {

size_t Combine(size_t seed, size_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

// Equal for identical instructions; attributes are left to Identical, which the bucket checks.
size_t HashOf(const HloInstruction& instruction) {
  size_t hash = std::hash<int>()(static_cast<int>(instruction.opcode()));
  for (const HloInstruction* operand : instruction.operands()) {
    hash = Combine(hash, std::hash<const HloInstruction*>()(operand));
  }
  hash = Combine(hash, std::hash<std::string>()(instruction.shape().ToString()));
  if (instruction.has_literal()) {
    const Literal& literal = instruction.literal();
    if (literal.shape().IsTuple()) {
      hash = Combine(hash, std::hash<std::string>()(literal.ToStringWithoutShape()));
    } else {
      hash = Combine(hash, std::hash<std::string_view>()(std::string_view(
                               reinterpret_cast<const char*>(literal.untyped_data()),
                               literal.size_bytes())));
    }
  }
  return hash;
}

bool CanMerge(const HloInstruction& instruction) {
  if (instruction.opcode() == HloOpcode::kParameter || HasSideEffect(instruction) ||
      !instruction.control_predecessors().empty() || !instruction.control_successors().empty()) {
    return false;
  }
  if (instruction.opcode() == HloOpcode::kConstant) {
    // Elided literals compare equal without being equal; text-only ones have no data to compare.
    return instruction.has_literal() && !instruction.literal().is_elided() &&
           !instruction.literal().is_text_only();
  }
  return true;
}

}  // namespace

StatusOr<bool> HloCse::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    std::unordered_map<size_t, std::vector<HloInstruction*>> seen;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (!CanMerge(*instruction)) continue;
      std::vector<HloInstruction*>& bucket = seen[HashOf(*instruction)];
      HloInstruction* first = nullptr;
      for (HloInstruction* candidate : bucket) {
        if (candidate->Identical(*instruction)) {
          first = candidate;
          break;
        }
      }
      if (first == nullptr) {
        bucket.push_back(instruction);
        continue;
      }
      instruction->ReplaceAllUsesWith(first);
      RETURN_IF_ERROR(computation->RemoveInstruction(instruction));
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
