#include "compiler/passes/stage_changes.h"

#include <set>

#include "compiler/hlo/printer.h"

namespace xlens {
namespace {

// Records every instruction of `fused` (and of the fusions nested in it) as held by `fusion`.
void AddFusedMembers(const HloComputation& fused, const std::string& fusion,
                     std::set<const HloComputation*>& visited, ModuleSnapshot& snapshot) {
  if (!visited.insert(&fused).second) return;  // a malformed module may call one twice
  for (const HloInstruction* instr : fused.instructions()) {
    // A duplicated producer can sit in several fusions: the smallest name wins, so that the
    // choice does not depend on the order anything is visited in.
    auto [it, inserted] = snapshot.fused_member_of.emplace(instr->name(), fusion);
    if (!inserted && fusion < it->second) it->second = fusion;
    if (instr->opcode() == HloOpcode::kFusion && instr->fused_computation() != nullptr) {
      AddFusedMembers(*instr->fused_computation(), fusion, visited, snapshot);
    }
  }
}

// Appends the text of `fused` and of every fused computation nested in it, each once.
void AppendFusedBodies(const HloComputation& fused, std::set<const HloComputation*>& printed,
                       std::string& text) {
  if (!printed.insert(&fused).second) return;
  text += "\n";
  text += fused.ToString();
  for (const HloInstruction* instr : fused.instructions()) {
    if (instr->opcode() == HloOpcode::kFusion && instr->fused_computation() != nullptr) {
      AppendFusedBodies(*instr->fused_computation(), printed, text);
    }
  }
}

}  // namespace

ModuleSnapshot TakeModuleSnapshot(const HloModule& module) {
  std::vector<HloComputation*> computations = module.computations();
  std::set<const HloComputation*> fused;
  for (const HloComputation* computation : computations) {
    for (const HloInstruction* instr : computation->instructions()) {
      if (instr->opcode() == HloOpcode::kFusion && instr->fused_computation() != nullptr) {
        fused.insert(instr->fused_computation());
      }
    }
  }
  ModuleSnapshot snapshot;
  for (const HloComputation* computation : computations) {
    if (fused.count(computation)) continue;
    for (const HloInstruction* instr : computation->instructions()) {
      std::string text = instr->ToString();
      const bool is_fusion =
          instr->opcode() == HloOpcode::kFusion && instr->fused_computation() != nullptr;
      if (is_fusion) {
        // The whole body, nested fusions' bodies included: a fusion whose inner fusion changed
        // is modified, as the viewer's diff (stage_diff.h) says.
        std::set<const HloComputation*> printed;
        AppendFusedBodies(*instr->fused_computation(), printed, text);
        std::set<const HloComputation*> visited;
        AddFusedMembers(*instr->fused_computation(), instr->name(), visited, snapshot);
      }
      snapshot.top_level[instr->name()] = std::move(text);
    }
  }
  return snapshot;
}

ManifestStageChanges CompareSnapshots(const ModuleSnapshot& before, const ModuleSnapshot& after) {
  ManifestStageChanges changes;
  // Both maps are sorted by name, so the lists come out sorted.
  for (const auto& [name, text] : after.top_level) {
    auto it = before.top_level.find(name);
    if (it == before.top_level.end()) {
      changes.added.push_back(name);
    } else if (it->second != text) {
      changes.modified.push_back(name);
    }
  }
  for (const auto& [name, text] : before.top_level) {
    if (after.top_level.count(name)) continue;
    auto fused = after.fused_member_of.find(name);
    if (fused != after.fused_member_of.end()) {
      changes.fused_into[name] = fused->second;
    } else {
      changes.removed.push_back(name);
    }
  }
  return changes;
}

}  // namespace xlens
