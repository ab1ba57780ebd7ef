#include "viewer/hlo_outline.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>

namespace xlens::viewer {
namespace {

bool IsNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string StripPercent(std::string_view s) {
  s = Trim(s);
  if (!s.empty() && s.front() == '%') s.remove_prefix(1);
  return std::string(s);
}

bool IsName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsNameChar);
}

// A failure while reading one line: the column (1-based) and what was expected there.
struct LineError {
  size_t column;
  std::string what;
};

// Finds the bracket that closes the one at `open` (one of "([{"), skipping quoted strings and
// /* */ comments; nullopt when the line ends first. Linear and without recursion, so deeply
// nested garbage costs no stack.
std::optional<size_t> FindClosing(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
      if (i >= s.size()) return std::nullopt;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      if (end == std::string_view::npos) return std::nullopt;
      i = end + 1;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      if (--depth == 0) return i;
      if (depth < 0) return std::nullopt;
    }
  }
  return std::nullopt;
}

// Splits at commas outside brackets and quotes.
std::vector<std::string_view> SplitTopLevel(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  if (start < s.size()) parts.push_back(s.substr(start));
  return parts;
}

// Removes /* ... */ comments (XLA writes /*index=5*/ into long operand lists).
std::string StripBlockComments(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      if (end == std::string_view::npos) break;
      i = end + 1;
      continue;
    }
    out.push_back(s[i]);
  }
  return out;
}

// The name an operand refers to: "f32[10]{0} %x" -> "x", "x" -> "x"; empty for a literal.
std::string OperandName(std::string_view operand) {
  std::string cleaned = StripBlockComments(operand);
  std::string_view s = Trim(cleaned);
  size_t percent = s.rfind('%');
  if (percent != std::string_view::npos) {
    std::string_view rest = s.substr(percent + 1);
    size_t end = 0;
    while (end < rest.size() && IsNameChar(rest[end])) ++end;
    return std::string(rest.substr(0, end));
  }
  size_t space = s.find_last_of(" \t");
  std::string_view last = space == std::string_view::npos ? s : s.substr(space + 1);
  // A bare name starts with a letter or '_'; numbers and literals are not operands.
  if (!IsName(last) || !(std::isalpha(static_cast<unsigned char>(last.front())) || last.front() == '_')) {
    return "";
  }
  return std::string(last);
}

// Names in a computation reference: "%c", "{%a, %b}".
std::vector<std::string> ComputationList(std::string_view value) {
  value = Trim(value);
  if (!value.empty() && value.front() == '{') {
    value.remove_prefix(1);
    if (!value.empty() && value.back() == '}') value.remove_suffix(1);
  }
  std::vector<std::string> names;
  for (std::string_view part : SplitTopLevel(value)) {
    std::string name = StripPercent(part);
    if (IsName(name)) names.push_back(std::move(name));
  }
  return names;
}

// Reads key="value" pairs of metadata={...}; values may hold escaped quotes.
std::map<std::string, std::string> ParseMetadata(std::string_view body) {
  std::map<std::string, std::string> fields;
  size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && (IsSpace(body[i]) || body[i] == ',')) ++i;
    size_t key_start = i;
    while (i < body.size() && IsNameChar(body[i])) ++i;
    std::string key(body.substr(key_start, i - key_start));
    if (i >= body.size() || body[i] != '=' || key.empty()) {
      ++i;  // skip what we cannot read rather than fail on a field we do not need
      continue;
    }
    ++i;
    std::string value;
    if (i < body.size() && body[i] == '"') {
      for (++i; i < body.size() && body[i] != '"'; ++i) {
        if (body[i] == '\\' && i + 1 < body.size()) ++i;
        value.push_back(body[i]);
      }
      ++i;
    } else {
      while (i < body.size() && !IsSpace(body[i])) value.push_back(body[i++]);
    }
    fields[key] = value;
  }
  return fields;
}

// A non-negative decimal of at most 15 digits; nullopt for anything else.
std::optional<int64_t> ParseCount(std::string_view s) {
  s = Trim(s);
  if (s.empty() || s.size() > 15) return std::nullopt;
  int64_t value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

// One entry of the stack-frame table: `N "text"` (FileNames, FunctionNames) or `N {key=value ...}`
// (FileLocations, StackFrames). Entries are kept in order; one whose id is not the next is
// dropped, so what refers to it dangles and is cut there, never read out of range.
void ReadFrameTableEntry(std::string_view line, int section, HloOutlineFrameTable& table) {
  size_t i = 0;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  const std::optional<int64_t> id = ParseCount(line.substr(0, i));
  std::string_view rest = Trim(line.substr(i));
  const size_t expected = section == 0   ? table.files.size()
                          : section == 1 ? table.functions.size()
                          : section == 2 ? table.locations.size()
                                         : table.frames.size();
  if (!id || *id != static_cast<int64_t>(expected) + 1) return;
  if (section <= 1) {
    if (rest.size() < 2 || rest.front() != '"') return;
    std::string text;
    for (size_t k = 1; k < rest.size() && rest[k] != '"'; ++k) {
      if (rest[k] == '\\' && k + 1 < rest.size()) {
        ++k;
        text.push_back(rest[k] == 'n' ? '\n' : rest[k] == 't' ? '\t' : rest[k]);
      } else {
        text.push_back(rest[k]);
      }
    }
    (section == 0 ? table.files : table.functions).push_back(std::move(text));
    return;
  }
  if (rest.size() < 2 || rest.front() != '{' || rest.back() != '}') return;
  std::map<std::string, std::string> fields = ParseMetadata(rest.substr(1, rest.size() - 2));
  auto field = [&](const char* key) { return ParseCount(fields[key]).value_or(0); };
  if (section == 2) {
    table.locations.push_back({field("file_name_id"), field("function_name_id"), field("line"), field("column")});
  } else {
    const int64_t parent = field("parent_frame_id");
    table.frames.push_back({field("file_location_id"), parent > 0 ? parent - 1 : 0});
  }
}

// Fills each instruction's source and stack from its metadata.
void ResolveSources(HloOutline& outline) {
  for (HloOutlineComputation& computation : outline.computations) {
    for (HloOutlineInstruction& instruction : computation.instructions) {
      if (instruction.stack_frame_id <= 0) continue;
      std::vector<xlens::ManifestSourceFrame> frame = outline.frame_table.Stack(instruction.stack_frame_id, 1);
      if (frame.empty()) continue;  // a dangling id: source_file/source_line, if any, stand
      instruction.source = std::move(frame.front());
    }
  }
}

std::vector<std::string> SplitOpNames(const std::string& joined) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= joined.size()) {
    size_t end = joined.find(';', start);
    if (end == std::string::npos) end = joined.size();
    std::string_view part = Trim(std::string_view(joined).substr(start, end - start));
    if (!part.empty()) names.emplace_back(part);
    start = end + 1;
  }
  return names;
}

// Parses one instruction from the start of `line` (`offset` is its column - 1) and says in
// `consumed` where it ended.
std::optional<LineError> ParseInstruction(std::string_view line, size_t offset,
                                          HloOutlineInstruction& out, size_t* consumed) {
  size_t i = 0;
  auto col = [&](size_t at) { return offset + at + 1; };
  if (line.substr(0, 5) == "ROOT " || line.substr(0, 5) == "ROOT\t") {
    out.is_root = true;
    i = 5;
    while (i < line.size() && IsSpace(line[i])) ++i;
  }
  size_t text_start = i;
  if (i < line.size() && line[i] == '%') ++i;
  size_t name_start = i;
  while (i < line.size() && IsNameChar(line[i])) ++i;
  if (i == name_start) return LineError{col(name_start), "expected an instruction name"};
  out.name = std::string(line.substr(name_start, i - name_start));
  while (i < line.size() && IsSpace(line[i])) ++i;
  if (i >= line.size() || line[i] != '=') {
    return LineError{col(i), "expected '=' after instruction name '" + out.name + "'"};
  }
  ++i;
  while (i < line.size() && IsSpace(line[i])) ++i;
  size_t shape_start = i;
  if (i < line.size() && line[i] == '(') {
    std::optional<size_t> close = FindClosing(line, i);
    if (!close) return LineError{col(i), "unbalanced '(' in the tuple shape; expected ')'"};
    i = *close + 1;
  } else {
    while (i < line.size() && !IsSpace(line[i])) ++i;
  }
  if (i == shape_start) return LineError{col(i), "expected a shape after '='"};
  out.shape = std::string(line.substr(shape_start, i - shape_start));
  while (i < line.size() && IsSpace(line[i])) ++i;
  size_t opcode_start = i;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '-' ||
                             line[i] == '_')) {
    ++i;
  }
  if (i == opcode_start || i >= line.size() || line[i] != '(') {
    return LineError{col(i == opcode_start ? opcode_start : i),
                     i == opcode_start ? "expected an opcode after the shape"
                                       : "expected '(' after opcode '" +
                                             std::string(line.substr(opcode_start, i - opcode_start)) + "'"};
  }
  out.opcode = std::string(line.substr(opcode_start, i - opcode_start));
  size_t open = i;
  std::optional<size_t> close = FindClosing(line, open);
  if (!close) return LineError{col(open), "unbalanced '(' after '" + out.opcode + "'; expected ')'"};
  if (out.opcode != "parameter" && out.opcode != "constant" && out.opcode != "iota") {
    for (std::string_view operand : SplitTopLevel(line.substr(open + 1, *close - open - 1))) {
      std::string name = OperandName(operand);
      if (!name.empty()) out.operands.push_back(std::move(name));
    }
  }
  i = *close + 1;
  // Strings first, over the rest of the line, so an unterminated one is reported as such rather
  // than as the bracket around it.
  for (size_t k = i; k < line.size(); ++k) {
    if (line[k] != '"') continue;
    size_t j = k + 1;
    for (; j < line.size() && line[j] != '"'; ++j) {
      if (line[j] == '\\') ++j;
    }
    if (j >= line.size()) return LineError{col(k), "unterminated string; expected '\"'"};
    k = j;
  }
  // Attributes: ", name=value" for as long as commas follow; the statement ends where none does
  // (the end of the line, '}', or the next instruction of a one-line computation).
  size_t end = i;
  for (;;) {
    size_t k = end;
    while (k < line.size() && IsSpace(line[k])) ++k;
    if (k >= line.size() || line[k] != ',') break;
    ++k;
    while (k < line.size() && IsSpace(line[k])) ++k;
    size_t key_start = k;
    while (k < line.size() && IsNameChar(line[k])) ++k;
    std::string_view key = line.substr(key_start, k - key_start);
    if (key.empty() || k >= line.size() || line[k] != '=') {
      return LineError{col(key_start), "expected an attribute 'name=value' after ','"};
    }
    ++k;
    size_t value_start = k;
    while (k < line.size() && !IsSpace(line[k]) && line[k] != ',' && line[k] != '}') {
      char c = line[k];
      if (c == '"') {
        for (++k; k < line.size() && line[k] != '"'; ++k) {
          if (line[k] == '\\') ++k;
        }
        ++k;
      } else if (c == '(' || c == '[' || c == '{') {
        std::optional<size_t> closing = FindClosing(line, k);
        if (!closing) return LineError{col(k), std::string("unbalanced '") + c + "' in the attributes"};
        k = *closing + 1;
      } else {
        ++k;
      }
    }
    std::string_view value = line.substr(value_start, std::min(k, line.size()) - value_start);
    if (key == "kind" && out.opcode == "fusion") {
      out.fusion_kind = std::string(value);
    } else if (key == "calls" || key == "to_apply" || key == "body" || key == "condition" ||
               key == "true_computation" || key == "false_computation" ||
               key == "branch_computations" || key == "called_computations") {
      for (std::string& name : ComputationList(value)) out.called.push_back(std::move(name));
    } else if (key == "metadata" && !value.empty() && value.front() == '{') {
      std::string_view body = value.substr(1, value.size() >= 2 ? value.size() - 2 : 0);
      std::map<std::string, std::string> fields = ParseMetadata(body);
      out.op_type = fields["op_type"];
      out.op_names = SplitOpNames(fields["op_name"]);
      out.stack_frame_id = ParseCount(fields["stack_frame_id"]).value_or(0);
      if (!fields["source_file"].empty()) {
        xlens::ManifestSourceFrame frame;
        frame.file = fields["source_file"];
        frame.line = ParseCount(fields["source_line"]).value_or(0);
        out.source = std::move(frame);
      }
    }
    end = std::min(k, line.size());
  }
  out.text = std::string(Trim(line.substr(text_start, end - text_start)));
  *consumed = end;
  return std::nullopt;
}

// True when `s` starts an instruction: "[ROOT] [%]name =".
bool StartsInstruction(std::string_view s) {
  size_t i = 0;
  if (s.substr(0, 5) == "ROOT " || s.substr(0, 5) == "ROOT\t") {
    i = 5;
    while (i < s.size() && IsSpace(s[i])) ++i;
  }
  if (i < s.size() && s[i] == '%') ++i;
  size_t name_start = i;
  while (i < s.size() && IsNameChar(s[i])) ++i;
  if (i == name_start) return false;
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i < s.size() && s[i] == '=';
}

// Where a computation header's body opens: the first '{' outside parentheses that is not a
// layout (a layout follows its shape's ']' directly); npos when there is none.
size_t BodyBrace(std::string_view s) {
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\') ++i;
      }
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '{' && depth == 0) {
      if (i > 0 && s[i - 1] == ']') {
        std::optional<size_t> layout_end = FindClosing(s, i);
        if (!layout_end) return std::string_view::npos;
        i = *layout_end;
        continue;
      }
      return i;
    }
  }
  return std::string_view::npos;
}

}  // namespace

std::vector<xlens::ManifestSourceFrame> HloOutline::CallersOf(const HloOutlineInstruction& instruction,
                                                               size_t max_frames) const {
  if (instruction.stack_frame_id <= 0 || max_frames == 0) return {};
  std::vector<xlens::ManifestSourceFrame> stack = frame_table.Stack(instruction.stack_frame_id, max_frames + 1);
  if (!stack.empty()) stack.erase(stack.begin());
  return stack;
}

std::vector<xlens::ManifestSourceFrame> HloOutlineFrameTable::Stack(int64_t id, size_t max_frames) const {
  std::vector<xlens::ManifestSourceFrame> stack;
  std::set<int64_t> seen;
  auto name = [](const std::vector<std::string>& names, int64_t i) {
    return i >= 1 && i <= static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(i - 1)] : std::string();
  };
  while (stack.size() < max_frames && id >= 1 && id <= static_cast<int64_t>(frames.size()) && seen.insert(id).second) {
    const Frame& frame = frames[static_cast<size_t>(id - 1)];
    if (frame.location < 1 || frame.location > static_cast<int64_t>(locations.size())) break;
    const Location& location = locations[static_cast<size_t>(frame.location - 1)];
    xlens::ManifestSourceFrame out;
    out.file = name(files, location.file);
    if (out.file.empty()) break;
    out.function = name(functions, location.function);
    out.line = location.line;
    out.column = location.column;
    stack.push_back(std::move(out));
    id = frame.parent;
  }
  return stack;
}

const HloOutlineInstruction* HloOutlineComputation::Find(std::string_view name) const {
  if (index.size() == instructions.size()) {
    auto it = index.find(name);
    return it == index.end() ? nullptr : &instructions[it->second];
  }
  for (const HloOutlineInstruction& instruction : instructions) {
    if (instruction.name == name) return &instruction;
  }
  return nullptr;
}

const HloOutlineInstruction* HloOutlineComputation::root() const {
  for (const HloOutlineInstruction& instruction : instructions) {
    if (instruction.is_root) return &instruction;
  }
  return instructions.empty() ? nullptr : &instructions.back();
}

const HloOutlineComputation* HloOutline::entry() const {
  for (const HloOutlineComputation& computation : computations) {
    if (computation.is_entry) return &computation;
  }
  return computations.empty() ? nullptr : &computations.back();
}

const HloOutlineComputation* HloOutline::FindComputation(std::string_view name) const {
  for (const HloOutlineComputation& computation : computations) {
    if (computation.name == name) return &computation;
  }
  return nullptr;
}

std::pair<const HloOutlineComputation*, const HloOutlineInstruction*> HloOutline::FindInstruction(
    std::string_view name) const {
  for (const HloOutlineComputation& computation : computations) {
    if (const HloOutlineInstruction* instruction = computation.Find(name)) {
      return {&computation, instruction};
    }
  }
  return {nullptr, nullptr};
}

bool HloOutline::IsFusedComputation(const HloOutlineComputation& computation) const {
  return fused_computations.count(computation.name) > 0;
}

void HloOutline::Index() {
  fused_computations.clear();
  for (HloOutlineComputation& computation : computations) {
    computation.index.clear();
    for (size_t i = 0; i < computation.instructions.size(); ++i) {
      computation.index.emplace(computation.instructions[i].name, i);
      const HloOutlineInstruction& instruction = computation.instructions[i];
      if (instruction.opcode == "fusion") {
        for (const std::string& called : instruction.called) fused_computations.insert(called);
      }
    }
  }
}

StatusOr<HloOutline> ParseHloOutline(std::string_view text, const std::string& source) {
  HloOutline outline;
  auto error = [&](size_t line, size_t column, const std::string& what) {
    return Status::Error(source + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                         what);
  };
  HloOutlineComputation* open = nullptr;
  size_t open_line = 0;
  bool in_block_comment = false;
  int frame_section = -1;  // index into the table's sections while in one, else -1
  size_t line_number = 0;
  size_t position = 0;
  while (position < text.size()) {
    size_t end = text.find('\n', position);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(position, end - position);
    position = end + 1;
    ++line_number;
    if (raw.find('\0') != std::string_view::npos) {
      return error(line_number, raw.find('\0') + 1, "unexpected NUL byte; expected HLO text");
    }
    size_t indent = 0;
    while (indent < raw.size() && IsSpace(raw[indent])) ++indent;
    std::string_view line = Trim(raw);
    if (in_block_comment) {
      if (line.find("*/") != std::string_view::npos) in_block_comment = false;
      continue;
    }
    if (line.empty() || line.substr(0, 2) == "//") continue;
    if (line.substr(0, 2) == "/*") {
      if (line.find("*/", 2) == std::string_view::npos) in_block_comment = true;
      continue;
    }
    // The stack-frame table XLA writes after the HloModule line (FileNames, FunctionNames,
    // FileLocations, StackFrames; each entry "N \"name\"" or "N {...}") names no computation.
    // Its entries are kept so instructions can say where they came from.
    const bool frame_table_place = open == nullptr && !outline.module_name.empty() && outline.computations.empty();
    if (frame_table_place) {
      static constexpr std::string_view kSections[] = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"};
      if (auto it = std::find(std::begin(kSections), std::end(kSections), line); it != std::end(kSections)) {
        frame_section = static_cast<int>(it - std::begin(kSections));
        continue;
      }
      if (frame_section >= 0 && line[0] >= '0' && line[0] <= '9') {
        ReadFrameTableEntry(line, frame_section, outline.frame_table);
        continue;
      }
    }
    frame_section = -1;
    // A line holds statements: one in what dumps write, but a computation may sit on one line.
    std::string_view rest = line;
    while (!rest.empty() && rest.substr(0, 2) != "//") {
      const size_t offset = indent + static_cast<size_t>(rest.data() - line.data());  // column - 1
      if (open == nullptr) {
        if (rest.substr(0, 9) == "HloModule") {
          if (!outline.module_name.empty() || !outline.computations.empty()) {
            return error(line_number, offset + 1, "a second HloModule header; expected one module");
          }
          std::string_view name = Trim(rest.substr(9));
          size_t stop = 0;
          while (stop < name.size() && name[stop] != ',' && !IsSpace(name[stop])) ++stop;
          outline.module_name = std::string(name.substr(0, stop));
          if (outline.module_name.empty()) {
            return error(line_number, offset + 10, "expected a module name after 'HloModule'");
          }
          break;
        }
        size_t brace = BodyBrace(rest);
        if (brace == std::string_view::npos) {
          return error(line_number, offset + 1, "expected 'HloModule' or a computation header ending in '{'");
        }
        HloOutlineComputation computation;
        size_t i = 0;
        if (rest.substr(0, 6) == "ENTRY " || rest.substr(0, 6) == "ENTRY\t") {
          computation.is_entry = true;
          i = 6;
          while (i < rest.size() && IsSpace(rest[i])) ++i;
        }
        if (i < rest.size() && rest[i] == '%') ++i;
        size_t name_start = i;
        while (i < rest.size() && IsNameChar(rest[i])) ++i;
        if (i == name_start) return error(line_number, offset + i + 1, "expected a computation name");
        computation.name = std::string(rest.substr(name_start, i - name_start));
        if (outline.FindComputation(computation.name) != nullptr) {
          return error(line_number, offset + name_start + 1,
                       "computation '" + computation.name + "' is defined twice");
        }
        outline.computations.push_back(std::move(computation));
        open = &outline.computations.back();
        open_line = line_number;
        rest = Trim(rest.substr(brace + 1));
        continue;
      }
      if (rest.front() == '}') {
        open = nullptr;
        rest = Trim(rest.substr(1));
        continue;
      }
      if (rest.back() == '{' && rest.find('=') > rest.find('(')) {
        return error(line_number, offset + 1,
                     "computation '" + open->name + "' (line " + std::to_string(open_line) +
                         ") is not closed before the next one; expected '}'");
      }
      HloOutlineInstruction instruction;
      instruction.line = static_cast<int>(line_number);
      size_t consumed = 0;
      if (std::optional<LineError> failure = ParseInstruction(rest, offset, instruction, &consumed)) {
        return error(line_number, failure->column, failure->what);
      }
      if (open->index.count(instruction.name) > 0) {
        return error(line_number, offset + 1,
                     "instruction '" + instruction.name + "' is defined twice in computation '" +
                         open->name + "'");
      }
      open->index.emplace(instruction.name, open->instructions.size());
      open->instructions.push_back(std::move(instruction));
      rest = Trim(rest.substr(consumed));
      if (!rest.empty() && rest.front() != '}' && rest.substr(0, 2) != "//" && !StartsInstruction(rest)) {
        return error(line_number, indent + static_cast<size_t>(rest.data() - line.data()) + 1,
                     "expected ',' and attributes or the end of the line after the operands");
      }
    }
  }
  if (open != nullptr) {
    return error(line_number, 1,
                 "computation '" + open->name + "' (line " + std::to_string(open_line) +
                     ") is not closed; expected '}'");
  }
  if (outline.computations.empty()) {
    return error(std::max<size_t>(line_number, 1), 1,
                 "no computation found; expected HLO text ('HloModule name' and computations)");
  }
  ResolveSources(outline);
  outline.Index();
  return outline;
}

int64_t ShapeElementCount(std::string_view shape) {
  int64_t total = 0;
  bool any = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != '[' || i == 0 || !std::isalnum(static_cast<unsigned char>(shape[i - 1]))) continue;
    size_t close = shape.find(']', i);
    if (close == std::string_view::npos) return -1;
    int64_t product = 1;
    for (std::string_view dim : SplitTopLevel(shape.substr(i + 1, close - i - 1))) {
      dim = Trim(dim);
      if (dim.substr(0, 2) == "<=") dim.remove_prefix(2);
      if (dim.empty() || dim.size() > 12 ||
          !std::all_of(dim.begin(), dim.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        return -1;
      }
      int64_t value = std::stoll(std::string(dim));
      product = value != 0 && product > (int64_t{1} << 62) / value ? (int64_t{1} << 62) : product * value;
    }
    total += product;
    any = true;
    i = close;
  }
  return any ? total : -1;
}

}  // namespace xlens::viewer
