// The stack-frame table of an HLO module, as XLA (jaxlib 0.10, TensorFlow 2.21) writes it after
// the HloModule line:
//
//   FileNames
//   1 "train.py"
//
//   FunctionNames
//   1 "<module>"
//   2 "loss"
//
//   FileLocations
//   1 {file_name_id=1 function_name_id=1 line=40 end_line=40 column=0 end_column=23}
//   2 {file_name_id=1 function_name_id=2 line=15 end_line=15 column=11 end_column=53}
//
//   StackFrames
//   1 {file_location_id=1 parent_frame_id=1}
//   2 {file_location_id=2 parent_frame_id=2}
//
// and an instruction's metadata names its innermost frame with stack_frame_id=N. Every id is
// 1-based. parent_frame_id is written as the parent's id plus one: XLA holds "no parent" as 0 and
// prints the field shifted by one, so `1 {... parent_frame_id=1}` is an outermost frame and
// `2 {... parent_frame_id=2}` has frame 1 above it. The table is held as XLA holds it (parents
// unshifted) and printed back as XLA prints it.
//
// Tables from outside are checked when read: every id in range, every entry numbered in order,
// and no cycle through parent_frame_id, so that walking a stack always ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {

class HloInstruction;
class TextCursor;

struct StackFrameFileLocation {
  int64_t file_name_id = 0;      // into file_names, 1-based
  int64_t function_name_id = 0;  // into function_names, 1-based
  int64_t line = 0;
  int64_t end_line = 0;
  int64_t column = 0;
  int64_t end_column = 0;
  bool operator==(const StackFrameFileLocation&) const = default;
};

struct StackFrameEntry {
  int64_t file_location_id = 0;  // into file_locations, 1-based
  int64_t parent_frame_id = 0;   // the frame above, 1-based; 0: none (the text writes it plus one)
  bool operator==(const StackFrameEntry&) const = default;
};

// One frame resolved to names: where an instruction came from.
struct SourceFrame {
  std::string file;
  std::string function;  // empty when the location had no function (old source_file metadata)
  int64_t line = 0;
  int64_t column = 0;       // 0 when unknown
  int64_t end_line = 0;
  int64_t end_column = 0;
  int64_t frame_id = 0;     // 0 when it came from source_file/source_line, not the table

  // "train.py:15:11" (":COL" only when known), the form editors and terminals open.
  std::string Location() const;
  // "train.py:15:11 (loss)".
  std::string ToString() const;
};

class StackFrameTable {
 public:
  StackFrameTable() = default;

  // A table from its four lists; every reference is checked as ReadStackFrameTable checks it.
  static StatusOr<StackFrameTable> Create(std::vector<std::string> file_names,
                                          std::vector<std::string> function_names,
                                          std::vector<StackFrameFileLocation> file_locations,
                                          std::vector<StackFrameEntry> frames);

  const std::vector<std::string>& file_names() const { return file_names_; }
  const std::vector<std::string>& function_names() const { return function_names_; }
  const std::vector<StackFrameFileLocation>& file_locations() const { return file_locations_; }
  const std::vector<StackFrameEntry>& frames() const { return frames_; }
  int64_t frame_count() const { return static_cast<int64_t>(frames_.size()); }
  bool HasFrame(int64_t id) const { return id >= 1 && id <= frame_count(); }

  // Frame `id` resolved to names; nullopt when there is no such frame.
  std::optional<SourceFrame> Frame(int64_t id) const;
  // Frame `id` and the frames above it, innermost first. At most frame_count() frames, whatever
  // the table holds.
  std::vector<SourceFrame> Stack(int64_t id) const;

  // The four sections as XLA prints them: each heading, its entries, then an empty line.
  std::string ToString() const;

  bool operator==(const StackFrameTable&) const = default;

 private:
  std::vector<std::string> file_names_;
  std::vector<std::string> function_names_;
  std::vector<StackFrameFileLocation> file_locations_;
  std::vector<StackFrameEntry> frames_;
};

// Reads the four sections from `cursor`, which is at "FileNames". Errors are one
// `FILE:LINE:COL: message` at the entry or field at fault.
StatusOr<StackFrameTable> ReadStackFrameTable(TextCursor& cursor);

// The source_file TensorFlow's tf2xla writes on every instruction of an auto-clustered module
// (with source_line=10): a placeholder, not a file. xlens's tf2xla writes it as TensorFlow does,
// and InstructionSource reads it as no source.
inline constexpr std::string_view kTfPlaceholderSourceFile = "dummy_file_name";

// Where `instruction` came from: through its module's stack-frame table when its metadata has a
// stack_frame_id the table holds, else from source_file/source_line; nullopt when neither says
// (or when source_file is kTfPlaceholderSourceFile).
std::optional<SourceFrame> InstructionSource(const HloInstruction& instruction);
// The instruction's call stack, innermost first: the frames above InstructionSource too when the
// table has them; one frame for source_file metadata; empty when nothing is known.
std::vector<SourceFrame> InstructionStack(const HloInstruction& instruction);
// The stack a kernel made from `instruction` is credited with: the instruction's own, else, for
// a fusion whose metadata says nothing, that of the first fused instruction (in post order, so
// operands before the root) that has one. One rule for the trace, the per-HLO profile and the
// manifest, so the three name the same line.
std::vector<SourceFrame> KernelStack(const HloInstruction& instruction);
// "train.py:15": the innermost frame's file and line, as a profile column and a trace arg show
// it; empty for an empty stack.
std::string StackSourceLine(const std::vector<SourceFrame>& stack);
// "train.py:15:11 (loss); train.py:40:0 (<module>)": every frame, innermost first and outermost
// last, each as SourceFrame::ToString; empty for an empty stack.
std::string StackText(const std::vector<SourceFrame>& stack);

}  // namespace xlens
