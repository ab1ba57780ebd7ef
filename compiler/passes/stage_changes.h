// What one stage of a pipeline did to a module, for the "changes" of its stage in manifest.json:
// a snapshot of the module's top-level instructions before the stage, another after, compared.
// The definitions are the viewer's (ComputeStageDiff over two dumps), so that the record and what
// the viewer computes from the dumped text agree:
//   top level   every instruction of every computation that is not a fused computation (one a
//               fusion calls), keyed by its name;
//   text        the instruction as printed, without "ROOT "; for a fusion, followed by its fused
//               computation and every fused computation nested in it, as printed;
//   fused into  an instruction that left the top level and sits inside the fused computation of a
//               top-level fusion, directly or through nested fusions (inside several: the
//               fusion whose name sorts first).
#pragma once

#include <map>
#include <string>

#include "compiler/hlo/module.h"
#include "dump/manifest.h"

namespace xlens {

struct ModuleSnapshot {
  std::map<std::string, std::string> top_level;  // instruction name -> text
  // Instruction inside a fused computation -> the top-level fusion holding it (of several, as a
  // duplicated producer can be, the one with the smallest name).
  std::map<std::string, std::string> fused_member_of;
};

// The snapshot of `module` now. It prints every top-level instruction, so callers take it only
// when a record needs it.
ModuleSnapshot TakeModuleSnapshot(const HloModule& module);

// What changed from `before` to `after` (lists sorted; empty when nothing did).
ManifestStageChanges CompareSnapshots(const ModuleSnapshot& before, const ModuleSnapshot& after);

}  // namespace xlens
