#include "viewer/stage_diff.h"

#include <algorithm>
#include <set>

namespace xlens::viewer {
namespace {

// Top-level instructions by name (the first of a name wins, as XLA's names are module-unique).
std::map<std::string, const HloOutlineInstruction*> TopLevel(const HloOutline& outline) {
  std::map<std::string, const HloOutlineInstruction*> top;
  for (const HloOutlineComputation& computation : outline.computations) {
    if (outline.IsFusedComputation(computation)) continue;
    for (const HloOutlineInstruction& instruction : computation.instructions) {
      top.emplace(instruction.name, &instruction);
    }
  }
  return top;
}

// The fused computations reachable from `start` (itself included), depth first, each once, in
// the order FusedComputationText concatenates them. Iterative, so nesting depth costs no stack.
std::vector<const HloOutlineComputation*> FusedClosure(const HloOutline& outline,
                                                       const std::string& start) {
  std::vector<const HloOutlineComputation*> order;
  std::set<std::string> seen;
  std::vector<std::string> stack{start};
  while (!stack.empty()) {
    std::string name = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(name).second) continue;
    const HloOutlineComputation* computation = outline.FindComputation(name);
    if (computation == nullptr) continue;
    order.push_back(computation);
    std::vector<std::string> callees;
    for (const HloOutlineInstruction& instruction : computation->instructions) {
      for (const std::string& called : instruction.called) {
        const HloOutlineComputation* callee = outline.FindComputation(called);
        if (callee != nullptr && outline.IsFusedComputation(*callee)) callees.push_back(called);
      }
    }
    for (auto it = callees.rbegin(); it != callees.rend(); ++it) stack.push_back(*it);
  }
  return order;
}

std::string FusedTextOf(const HloOutline& outline, const HloOutlineInstruction& fusion) {
  std::string text;
  for (const std::string& called : fusion.called) text += FusedComputationText(outline, called);
  return text;
}

}  // namespace

std::string FusedComputationText(const HloOutline& outline, const std::string& computation) {
  std::string text;
  for (const HloOutlineComputation* fused : FusedClosure(outline, computation)) {
    for (const HloOutlineInstruction& instruction : fused->instructions) {
      text += instruction.text;
      text += '\n';
    }
  }
  return text;
}

StageDiff ComputeStageDiff(const HloOutline& before, const HloOutline& after) {
  StageDiff diff;
  std::map<std::string, const HloOutlineInstruction*> old_top = TopLevel(before);
  std::map<std::string, const HloOutlineInstruction*> new_top = TopLevel(after);

  for (const HloOutlineComputation& computation : after.computations) {
    if (after.IsFusedComputation(computation)) continue;
    for (const HloOutlineInstruction& fusion : computation.instructions) {
      if (fusion.opcode != "fusion") continue;
      for (const std::string& called : fusion.called) {
        for (const HloOutlineComputation* fused : FusedClosure(after, called)) {
          for (const HloOutlineInstruction& inner : fused->instructions) {
            if (old_top.count(inner.name) && !new_top.count(inner.name)) {
              // A producer duplicated into several fusions: the fusion whose name sorts first,
              // so the choice does not depend on the order anything is visited in.
              auto [it, inserted] = diff.fused_into.emplace(inner.name, fusion.name);
              if (!inserted && fusion.name < it->second) it->second = fusion.name;
            }
          }
        }
      }
    }
  }
  for (const auto& [name, instruction] : new_top) {
    auto old = old_top.find(name);
    if (old == old_top.end()) {
      diff.added.push_back(name);
      continue;
    }
    bool changed = old->second->text != instruction->text;
    if (!changed && instruction->opcode == "fusion" && old->second->opcode == "fusion") {
      changed = FusedTextOf(before, *old->second) != FusedTextOf(after, *instruction);
    }
    if (changed) diff.modified.push_back(name);
  }
  for (const auto& [name, instruction] : old_top) {
    if (!new_top.count(name) && !diff.fused_into.count(name)) diff.removed.push_back(name);
  }
  // std::map iteration already yields sorted names; keep the contract explicit.
  std::sort(diff.added.begin(), diff.added.end());
  std::sort(diff.removed.begin(), diff.removed.end());
  std::sort(diff.modified.begin(), diff.modified.end());
  return diff;
}

}  // namespace xlens::viewer
