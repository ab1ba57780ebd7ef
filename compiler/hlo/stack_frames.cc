#include "compiler/hlo/stack_frames.h"

#include <array>
#include <string_view>

#include <fmt/format.h>

#include "compiler/hlo/attributes.h"
#include "compiler/hlo/computation.h"
#include "compiler/hlo/instruction.h"
#include "compiler/hlo/module.h"
#include "compiler/hlo/text_cursor.h"

namespace xlens {
namespace {

enum Section { kFileNames, kFunctionNames, kFileLocations, kStackFrames };
constexpr std::array<std::string_view, 4> kSectionNames = {"FileNames", "FunctionNames",
                                                           "FileLocations", "StackFrames"};

// What is wrong with a table: the entry at fault (section and 0-based index) and why.
struct TableProblem {
  Section section;
  size_t index;
  std::string message;
};

std::optional<TableProblem> CheckReference(Section section, size_t index, std::string_view field,
                                           int64_t id, size_t count, Section target) {
  if (id >= 1 && static_cast<uint64_t>(id) <= count) return std::nullopt;
  return TableProblem{section, index,
                      fmt::format("{} entry {}: {}={} names no entry of {} (it has {})",
                                  kSectionNames[section], index + 1, field, id,
                                  kSectionNames[target], count)};
}

// Every reference in range and no cycle through the parents: what makes lookups and stack walks
// safe. The first problem, in text order.
std::optional<TableProblem> CheckTable(size_t file_names, size_t function_names,
                                       const std::vector<StackFrameFileLocation>& locations,
                                       const std::vector<StackFrameEntry>& frames) {
  for (size_t i = 0; i < locations.size(); ++i) {
    const StackFrameFileLocation& l = locations[i];
    if (auto p = CheckReference(kFileLocations, i, "file_name_id", l.file_name_id, file_names,
                                kFileNames)) {
      return p;
    }
    if (auto p = CheckReference(kFileLocations, i, "function_name_id", l.function_name_id,
                                function_names, kFunctionNames)) {
      return p;
    }
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    const StackFrameEntry& f = frames[i];
    if (auto p = CheckReference(kStackFrames, i, "file_location_id", f.file_location_id,
                                locations.size(), kFileLocations)) {
      return p;
    }
    if (f.parent_frame_id != 0) {
      if (f.parent_frame_id < 1 || static_cast<uint64_t>(f.parent_frame_id) > frames.size()) {
        // The text writes the parent plus one; say it as written.
        return TableProblem{kStackFrames, i,
                            fmt::format("StackFrames entry {}: parent_frame_id={} names no frame "
                                        "(the table has {}; the field is the parent's id plus one, "
                                        "1 for none)",
                                        i + 1, f.parent_frame_id + 1, frames.size())};
      }
    }
  }
  // Cycles: walk up from each frame not yet known to end; a frame met again on the same walk
  // closes a cycle. Each frame is walked through once, so this is linear.
  enum : uint8_t { kUnseen, kOnWalk, kEnds };
  std::vector<uint8_t> state(frames.size(), kUnseen);
  std::vector<size_t> walk;
  for (size_t start = 0; start < frames.size(); ++start) {
    walk.clear();
    size_t at = start;
    while (true) {
      if (state[at] == kEnds) break;
      if (state[at] == kOnWalk) {
        size_t closing = walk.back();
        return TableProblem{kStackFrames, closing,
                            fmt::format("StackFrames entry {}: parent_frame_id={} makes a cycle "
                                        "(frame {} is its own ancestor)",
                                        closing + 1, frames[closing].parent_frame_id + 1, at + 1)};
      }
      state[at] = kOnWalk;
      walk.push_back(at);
      if (frames[at].parent_frame_id == 0) break;
      at = static_cast<size_t>(frames[at].parent_frame_id - 1);
    }
    for (size_t w : walk) state[w] = kEnds;
  }
  return std::nullopt;
}

// `N` at the start of an entry, which must be the entry's 1-based position.
Status ReadEntryId(TextCursor& cursor, Section section, size_t expected) {
  size_t pos = cursor.Here();
  ASSIGN_OR_RETURN(int64_t id, cursor.ReadInt64(fmt::format("the id of a {} entry",
                                                            kSectionNames[section])));
  if (id < 0 || static_cast<uint64_t>(id) != expected) {
    return cursor.ErrorAt(pos, fmt::format("{} entry {} is numbered {}: entries are numbered 1, 2, "
                                           "... in order, without gaps or repeats",
                                           kSectionNames[section], expected, id));
  }
  return OkStatus();
}

// `{key=N key=N ...}` with exactly the keys `keys` (any order, commas allowed between fields),
// into `values` in the order of `keys`.
Status ReadFields(TextCursor& cursor, Section section, size_t entry,
                  const std::vector<std::string_view>& keys, std::vector<int64_t>& values) {
  std::string what = fmt::format("{} entry {}", kSectionNames[section], entry);
  RETURN_IF_ERROR(cursor.Expect('{', fmt::format("to open {}", what)));
  values.assign(keys.size(), 0);
  std::vector<bool> seen(keys.size(), false);
  while (!cursor.TryConsume('}')) {
    if (cursor.AtEnd()) return cursor.Error(fmt::format("expected '}}' to close {}", what));
    size_t key_pos = cursor.Here();
    std::string_view key = cursor.ReadKey();
    size_t k = 0;
    while (k < keys.size() && keys[k] != key) ++k;
    if (k == keys.size()) {
      return cursor.ErrorAt(key_pos, fmt::format("{}: expected one of {}, found {}", what,
                                                 fmt::join(keys, ", "),
                                                 key.empty() ? cursor.DescribeAt(key_pos)
                                                             : std::string(key)));
    }
    if (seen[k]) return cursor.ErrorAt(key_pos, fmt::format("{}: {} is given twice", what, key));
    seen[k] = true;
    RETURN_IF_ERROR(cursor.Expect('=', fmt::format("after {}", key)));
    ASSIGN_OR_RETURN(values[k], cursor.ReadInt64(key));
    cursor.TryConsume(',');
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    if (!seen[k]) return cursor.Error(fmt::format("{}: {}= is missing", what, keys[k]));
  }
  return OkStatus();
}

// Entries start with a digit; the section (or the table) ends at anything else.
bool AtEntry(TextCursor& cursor) {
  char c = cursor.Peek();
  return c >= '0' && c <= '9';
}

}  // namespace

std::string SourceFrame::Location() const {
  if (line <= 0) return file;
  std::string out = fmt::format("{}:{}", file, line);
  if (column > 0) out += fmt::format(":{}", column);
  return out;
}

std::string SourceFrame::ToString() const {
  return function.empty() ? Location() : fmt::format("{} ({})", Location(), function);
}

StatusOr<StackFrameTable> StackFrameTable::Create(
    std::vector<std::string> file_names, std::vector<std::string> function_names,
    std::vector<StackFrameFileLocation> file_locations, std::vector<StackFrameEntry> frames) {
  if (auto problem = CheckTable(file_names.size(), function_names.size(), file_locations, frames)) {
    return Error(problem->message);
  }
  StackFrameTable table;
  table.file_names_ = std::move(file_names);
  table.function_names_ = std::move(function_names);
  table.file_locations_ = std::move(file_locations);
  table.frames_ = std::move(frames);
  return table;
}

std::optional<SourceFrame> StackFrameTable::Frame(int64_t id) const {
  if (!HasFrame(id)) return std::nullopt;
  const StackFrameEntry& frame = frames_[static_cast<size_t>(id - 1)];
  const StackFrameFileLocation& l = file_locations_[static_cast<size_t>(frame.file_location_id - 1)];
  SourceFrame out;
  out.file = file_names_[static_cast<size_t>(l.file_name_id - 1)];
  out.function = function_names_[static_cast<size_t>(l.function_name_id - 1)];
  out.line = l.line;
  out.column = l.column;
  out.end_line = l.end_line;
  out.end_column = l.end_column;
  out.frame_id = id;
  return out;
}

std::vector<SourceFrame> StackFrameTable::Stack(int64_t id) const {
  std::vector<SourceFrame> stack;
  // Tables are checked for cycles when built; the bound keeps a walk finite regardless.
  while (HasFrame(id) && stack.size() < frames_.size()) {
    stack.push_back(*Frame(id));
    id = frames_[static_cast<size_t>(id - 1)].parent_frame_id;
  }
  return stack;
}

std::string StackFrameTable::ToString() const {
  std::string out = "FileNames\n";
  for (size_t i = 0; i < file_names_.size(); ++i) {
    out += fmt::format("{} {}\n", i + 1, QuoteString(file_names_[i]));
  }
  out += "\nFunctionNames\n";
  for (size_t i = 0; i < function_names_.size(); ++i) {
    out += fmt::format("{} {}\n", i + 1, QuoteString(function_names_[i]));
  }
  out += "\nFileLocations\n";
  for (size_t i = 0; i < file_locations_.size(); ++i) {
    const StackFrameFileLocation& l = file_locations_[i];
    out += fmt::format("{} {{file_name_id={} function_name_id={} line={} end_line={} column={} "
                       "end_column={}}}\n",
                       i + 1, l.file_name_id, l.function_name_id, l.line, l.end_line, l.column,
                       l.end_column);
  }
  out += "\nStackFrames\n";
  for (size_t i = 0; i < frames_.size(); ++i) {
    out += fmt::format("{} {{file_location_id={} parent_frame_id={}}}\n", i + 1,
                       frames_[i].file_location_id, frames_[i].parent_frame_id + 1);
  }
  return out + "\n";
}

StatusOr<StackFrameTable> ReadStackFrameTable(TextCursor& cursor) {
  std::vector<std::string> names[2];
  std::vector<StackFrameFileLocation> locations;
  std::vector<StackFrameEntry> frames;
  // Where each entry starts, to point errors found after reading at the entry at fault.
  std::vector<size_t> location_pos, frame_pos;
  for (Section section : {kFileNames, kFunctionNames, kFileLocations, kStackFrames}) {
    if (!cursor.TryConsumeWord(kSectionNames[section])) {
      return cursor.Error(fmt::format("expected the {} section of the stack-frame table (FileNames, "
                                      "FunctionNames, FileLocations, StackFrames, in this order), "
                                      "found {}",
                                      kSectionNames[section], cursor.Describe()));
    }
    while (AtEntry(cursor)) {
      size_t pos = cursor.Here();
      switch (section) {
        case kFileNames:
        case kFunctionNames: {
          std::vector<std::string>& list = names[section];
          RETURN_IF_ERROR(ReadEntryId(cursor, section, list.size() + 1));
          ASSIGN_OR_RETURN(std::string name, cursor.ReadString());
          list.push_back(std::move(name));
          break;
        }
        case kFileLocations: {
          RETURN_IF_ERROR(ReadEntryId(cursor, section, locations.size() + 1));
          std::vector<int64_t> v;
          RETURN_IF_ERROR(ReadFields(cursor, section, locations.size() + 1,
                                     {"file_name_id", "function_name_id", "line", "end_line",
                                      "column", "end_column"},
                                     v));
          locations.push_back({v[0], v[1], v[2], v[3], v[4], v[5]});
          location_pos.push_back(pos);
          break;
        }
        case kStackFrames: {
          RETURN_IF_ERROR(ReadEntryId(cursor, section, frames.size() + 1));
          std::vector<int64_t> v;
          RETURN_IF_ERROR(ReadFields(cursor, section, frames.size() + 1,
                                     {"file_location_id", "parent_frame_id"}, v));
          // Written plus one; 0 (and below) names nothing XLA could have written.
          if (v[1] < 1) {
            return cursor.ErrorAt(pos, fmt::format("StackFrames entry {}: parent_frame_id={} is "
                                                   "below 1 (the field is the parent's id plus "
                                                   "one, 1 for none)",
                                                   frames.size() + 1, v[1]));
          }
          frames.push_back({v[0], v[1] - 1});
          frame_pos.push_back(pos);
          break;
        }
      }
    }
  }
  if (auto problem = CheckTable(names[0].size(), names[1].size(), locations, frames)) {
    size_t pos = problem->section == kFileLocations ? location_pos[problem->index]
                                                    : frame_pos[problem->index];
    return cursor.ErrorAt(pos, problem->message);
  }
  return StackFrameTable::Create(std::move(names[0]), std::move(names[1]), std::move(locations),
                                 std::move(frames));
}

std::optional<SourceFrame> InstructionSource(const HloInstruction& instruction) {
  const OpMetadata& metadata = instruction.metadata;
  if (metadata.stack_frame_id && instruction.parent() != nullptr &&
      instruction.parent()->parent() != nullptr) {
    if (const StackFrameTable* table = instruction.parent()->parent()->stack_frames()) {
      if (auto frame = table->Frame(*metadata.stack_frame_id)) return frame;
    }
  }
  // TensorFlow's placeholder is on all 1237 instructions of TensorFlow 2.21's dumps in the corpus;
  // as a source it would put "dummy_file_name:10" on every profile row and span.
  if (metadata.source_file.empty() || metadata.source_file == kTfPlaceholderSourceFile) {
    return std::nullopt;
  }
  SourceFrame frame;
  frame.file = metadata.source_file;
  frame.line = metadata.source_line.value_or(0);
  return frame;
}

std::vector<SourceFrame> InstructionStack(const HloInstruction& instruction) {
  const OpMetadata& metadata = instruction.metadata;
  if (metadata.stack_frame_id && instruction.parent() != nullptr &&
      instruction.parent()->parent() != nullptr) {
    if (const StackFrameTable* table = instruction.parent()->parent()->stack_frames()) {
      std::vector<SourceFrame> stack = table->Stack(*metadata.stack_frame_id);
      if (!stack.empty()) return stack;
    }
  }
  std::vector<SourceFrame> stack;
  if (auto frame = InstructionSource(instruction)) stack.push_back(std::move(*frame));
  return stack;
}

std::vector<SourceFrame> KernelStack(const HloInstruction& instruction) {
  std::vector<SourceFrame> stack = InstructionStack(instruction);
  if (!stack.empty() || instruction.opcode() != HloOpcode::kFusion) return stack;
  const HloComputation* fused = instruction.fused_computation();
  if (fused == nullptr) return stack;
  for (const HloInstruction* inner : fused->MakeInstructionPostOrder()) {
    // A nested fusion credits its own fused instructions the same way.
    stack = KernelStack(*inner);
    if (!stack.empty()) return stack;
  }
  return stack;
}

std::string StackSourceLine(const std::vector<SourceFrame>& stack) {
  if (stack.empty()) return "";
  const SourceFrame& frame = stack.front();
  return frame.line > 0 ? fmt::format("{}:{}", frame.file, frame.line) : frame.file;
}

std::string StackText(const std::vector<SourceFrame>& stack) {
  std::string text;
  for (const SourceFrame& frame : stack) {
    if (!text.empty()) text += "; ";
    text += frame.ToString();
  }
  return text;
}

}  // namespace xlens
