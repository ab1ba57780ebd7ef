// What one pass changed in a module, by instruction name. These definitions are a contract: the
// compiler records the same four lists in manifest.json for every stage (ManifestStageChanges),
// so a change here must be made there too.
//
// "Top level" instructions are those of every computation that is not a fused computation (one
// that a fusion's calls= names), keyed by instruction name.
//   added       top-level names only in `after`.
//   removed     top-level names only in `before` that were not fused (not in fused_into).
//   fused_into  X -> F when X is top-level in `before`, not top-level in `after`, and the fused
//               computation called by the top-level fusion F in `after` contains an instruction
//               named X, directly or through fusions nested inside it (when several F do, a
//               producer duplicated into each, the one whose name sorts first).
//   modified    top-level names in both whose text differs (the line without "ROOT "), or, for a
//               fusion in both, whose fused computation's text differs: the texts of all its
//               instructions in order, then those of the fused computations they call, recursively.
// Each list is sorted by name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "viewer/hlo_outline.h"

namespace xlens::viewer {

struct StageDiff {
  std::vector<std::string> added, removed, modified;
  std::map<std::string, std::string> fused_into;  // instruction -> the fusion that absorbed it

  // True when the stage changed nothing by these definitions.
  bool empty() const { return added.empty() && removed.empty() && modified.empty() && fused_into.empty(); }
};

// The changes from `before` to `after` (see the definitions above).
StageDiff ComputeStageDiff(const HloOutline& before, const HloOutline& after);

// The text that `modified` compares for a fusion: its fused computation's instruction texts, in
// order, followed by those of the fused computations they call, recursively (each once).
std::string FusedComputationText(const HloOutline& outline, const std::string& computation);

}  // namespace xlens::viewer
