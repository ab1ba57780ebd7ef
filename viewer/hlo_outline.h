// A tolerant reader of HLO text as dumps hold it (XLA's format): computations, their
// instructions, operands, called computations and metadata, without shapes or semantics. The
// viewer needs only the outline to draw a graph and to diff two stages, and it must open HLO
// from any XLA or JAX version, so attributes it does not know are kept as text and ignored.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/support/status.h"
#include "dump/manifest.h"

namespace xlens::viewer {

struct HloOutlineInstruction {
  std::string name;    // without the leading '%'
  std::string opcode;  // "add", "fusion", "get-tuple-element"
  std::string shape;   // as written: "f32[100,10]{1,0}", "(f32[], s32[])"
  std::string text;    // the whole line without "ROOT ", trimmed
  std::vector<std::string> operands;  // names of the operands, in order
  std::vector<std::string> op_names;  // metadata op_name split on ';'
  std::string op_type;                // metadata op_type
  std::string fusion_kind;            // "kLoop" for fusions, else empty
  // Computations this instruction calls: calls=, to_apply=, body=, condition=,
  // branch_computations=, true_computation=, false_computation=, called_computations=.
  std::vector<std::string> called;
  bool is_root = false;
  int line = 0;  // 1-based line in the source text
  // Where it came from in the user's program: metadata stack_frame_id resolved through the
  // module's stack-frame table, else source_file/source_line; nullopt when neither says. Its
  // callers are read on demand (HloOutline::CallersOf), so a deep table costs nothing per
  // instruction.
  std::optional<xlens::ManifestSourceFrame> source;
  int64_t stack_frame_id = 0;  // as the metadata wrote it; 0: none
};

struct HloOutlineComputation {
  std::string name;
  bool is_entry = false;
  std::vector<HloOutlineInstruction> instructions;
  // Instruction name -> index in `instructions`; filled by Index().
  std::map<std::string, size_t, std::less<>> index;

  // The instruction with this name, or nullptr.
  const HloOutlineInstruction* Find(std::string_view name) const;
  // The ROOT instruction (the last one when none is marked), or nullptr when empty.
  const HloOutlineInstruction* root() const;
};

// The stack-frame table XLA writes after the HloModule line (FileNames, FunctionNames,
// FileLocations, StackFrames; ids 1-based, parent_frame_id written as the parent's id plus one).
struct HloOutlineFrameTable {
  struct Location {
    int64_t file = 0, function = 0, line = 0, column = 0;
  };
  struct Frame {
    int64_t location = 0, parent = 0;  // parent: the parent's id, 0 for none
  };
  std::vector<std::string> files, functions;
  std::vector<Location> locations;
  std::vector<Frame> frames;

  // Frame `id` and its callers, innermost first, at most `max_frames`. A dangling id ends the
  // walk where it points; a cycle ends it before the first frame seen twice. Empty for an id the
  // table lacks.
  std::vector<xlens::ManifestSourceFrame> Stack(int64_t id, size_t max_frames = 64) const;
};

struct HloOutline {
  std::string module_name;
  std::vector<HloOutlineComputation> computations;
  // Names of the computations some fusion calls; filled by Index().
  std::set<std::string, std::less<>> fused_computations;
  HloOutlineFrameTable frame_table;  // empty when the text has none

  // The ENTRY computation (the last one when none is marked), or nullptr when empty.
  const HloOutlineComputation* entry() const;
  // The computation with this name, or nullptr.
  const HloOutlineComputation* FindComputation(std::string_view name) const;
  // The instruction with this name anywhere, and its computation; {nullptr, nullptr} if absent.
  std::pair<const HloOutlineComputation*, const HloOutlineInstruction*> FindInstruction(
      std::string_view name) const;
  // The callers of the instruction's source line, outermost last (at most `max_frames`); empty
  // without a stack-frame table entry.
  std::vector<xlens::ManifestSourceFrame> CallersOf(const HloOutlineInstruction& instruction,
                                                    size_t max_frames = 64) const;
  // True when the computation is called by a fusion's calls=.
  bool IsFusedComputation(const HloOutlineComputation& computation) const;
  // Rebuilds the lookup tables after the vectors were filled or changed by hand.
  void Index();
};

// Parses HLO module text. Errors read "source:line:col: what was expected"; any bytes give an
// outline or one error, never a crash. Unknown attributes and comments are skipped.
xlens::StatusOr<HloOutline> ParseHloOutline(std::string_view text, const std::string& source);

// The number of elements of an array shape ("f32[100,10]{1,0}" -> 1000; "f32[]" -> 1), the sum
// over the leaves of a tuple, or -1 when the shape cannot be read.
int64_t ShapeElementCount(std::string_view shape);

}  // namespace xlens::viewer
