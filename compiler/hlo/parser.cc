#include "compiler/hlo/parser.h"

#include <charconv>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "compiler/hlo/shape_inference.h"
#include "compiler/hlo/sharding.h"
#include "compiler/hlo/stack_frames.h"
#include "compiler/hlo/text_cursor.h"
#include "compiler/hlo/text_readers.h"
#include "compiler/hlo/verifier.h"

namespace xlens {

namespace {

// Nested anonymous operands (`add(f32[] parameter(0), multiply(...))`) recurse; broken input must
// not exhaust the stack.
constexpr int kMaxOperandNesting = 64;

struct NameRef {
  std::string_view name;
  size_t pos;
};

struct PendingOperand {
  NameRef ref;
  std::optional<Shape> declared_shape;
  HloInstruction* resolved = nullptr;  // set directly for nested anonymous operands
};

struct PendingInstruction {
  HloInstruction* instruction;
  size_t pos;
  std::vector<PendingOperand> operands;
  std::vector<NameRef> control_predecessors;
  bool shape_omitted = false;
  bool anonymous = false;
};

struct PendingCalled {
  HloInstruction* instruction;
  size_t attr_index;  // into instruction->mutable_called_computation_attributes()
  std::vector<NameRef> names;
};

struct ComputationState {
  HloComputation* computation;
  size_t pos;
  std::vector<PendingInstruction> instructions;
  std::unordered_map<std::string_view, HloInstruction*> by_name;
  HloInstruction* root = nullptr;
};

bool IsCalledComputationKey(std::string_view key) {
  return key == "to_apply" || key == "calls" || key == "condition" || key == "body" ||
         key == "select" || key == "scatter" || key == "true_computation" ||
         key == "false_computation";
}

bool IsCalledComputationListKey(std::string_view key) {
  return key == "branch_computations" || key == "called_computations";
}

class HloParser {
 public:
  HloParser(std::string_view text, const ParseOptions& options)
      : cursor_(text, options.filename), options_(options) {}

  StatusOr<std::unique_ptr<HloModule>> Parse();

 private:
  Status ParseHeader();
  Status ParseEntryComputationLayout();
  Status ParseComputation();
  Status ParseSignature();
  Status ParseInstruction(ComputationState& state);
  // Parses `opcode(...)` after the name and shape; returns the new instruction's index in
  // state.instructions.
  StatusOr<size_t> ParseInstructionBody(ComputationState& state, std::string_view name,
                                        std::optional<Shape> shape, size_t pos, int depth);
  Status ParseOperands(ComputationState& state, std::vector<PendingOperand>& operands, int depth);
  Status ParseAttribute(ComputationState& state, size_t instruction_index);
  StatusOr<std::vector<NameRef>> ParseNameList(std::string_view what);
  // A stack_frame_id in metadata read from `start` must name a frame of the module's table.
  Status CheckStackFrameId(const OpMetadata& metadata, size_t start);
  Status ParseShardingAttribute(HloInstruction& instr);

  Status ResolveCalledComputations();
  Status ResolveOperands(ComputationState& state);
  Status InferOmittedShapes();
  Status CheckShapes(ComputationState& state);

  TextCursor cursor_;
  ParseOptions options_;
  std::unique_ptr<HloModule> module_;
  std::vector<std::unique_ptr<ComputationState>> states_;
  std::unordered_map<std::string_view, std::pair<HloComputation*, size_t>> computations_;
  std::vector<PendingCalled> pending_called_;
  HloComputation* entry_ = nullptr;
};

StatusOr<std::unique_ptr<HloModule>> HloParser::Parse() {
  RETURN_IF_ERROR(ParseHeader());
  while (true) {
    cursor_.SkipWhitespace();
    if (cursor_.AtEnd()) break;
    RETURN_IF_ERROR(ParseComputation());
  }
  if (states_.empty()) {
    return cursor_.Error("expected a computation after the HloModule line, found the end of the text");
  }
  if (entry_ == nullptr) {
    return cursor_.ErrorAt(0, "the module has no ENTRY computation (mark one computation with "
                              "ENTRY)");
  }
  module_->set_entry_computation(entry_);
  RETURN_IF_ERROR(ResolveCalledComputations());
  for (auto& state : states_) RETURN_IF_ERROR(ResolveOperands(*state));
  RETURN_IF_ERROR(InferOmittedShapes());
  // Anonymous nested instructions get names only now, when every written name is reserved.
  for (auto& state : states_) {
    for (PendingInstruction& p : state->instructions) {
      if (p.anonymous) {
        // XLA's parser names them "<opcode>.anon"; so do we, so both print the same module.
        p.instruction->set_name(module_->UniqueInstructionName(
            std::string(HloOpcodeString(p.instruction->opcode())) + ".anon"));
      }
    }
  }
  if (options_.verify) {
    for (auto& state : states_) RETURN_IF_ERROR(CheckShapes(*state));
    Status verified = VerifyModule(*module_);
    if (!verified.ok()) {
      return Error(fmt::format("{}: {}", options_.filename, verified.message()));
    }
  }
  return std::move(module_);
}

Status HloParser::ParseHeader() {
  if (!cursor_.TryConsumeWord("HloModule")) {
    return cursor_.Error(fmt::format("expected 'HloModule' at the start of the module, found {}",
                                     cursor_.Describe()));
  }
  std::string_view name = cursor_.ReadName();
  if (name.empty()) {
    return cursor_.Error(fmt::format("expected a module name after HloModule, found {}",
                                     cursor_.Describe()));
  }
  // `HloModule name:` occurs in XLA's own tests; the colon is not part of the name.
  cursor_.TryConsume(':');
  module_ = std::make_unique<HloModule>(std::string(name));
  while (cursor_.TryConsume(',')) {
    size_t key_pos = cursor_.Here();
    std::string_view key = cursor_.ReadKey();
    if (key.empty()) {
      return cursor_.Error(fmt::format("expected a module attribute after ',', found {}",
                                       cursor_.Describe()));
    }
    RETURN_IF_ERROR(cursor_.Expect('=', fmt::format("after module attribute {}", key)));
    if (key == "entry_computation_layout") {
      RETURN_IF_ERROR(ParseEntryComputationLayout());
      continue;
    }
    ASSIGN_OR_RETURN(std::string_view value, cursor_.ReadRawValue());
    for (const RawAttribute& attr : module_->header_attributes()) {
      if (attr.key == key) {
        return cursor_.ErrorAt(key_pos, fmt::format("module attribute '{}' is given twice", key));
      }
    }
    module_->header_attributes().push_back({std::string(key), std::string(value)});
  }
  // jaxlib and TensorFlow write the stack-frame table between the header and the computations.
  size_t table_pos = cursor_.Here();
  if (cursor_.TryConsumeWord("FileNames")) {
    cursor_.set_pos(table_pos);
    ASSIGN_OR_RETURN(StackFrameTable table, ReadStackFrameTable(cursor_));
    module_->set_stack_frames(std::make_shared<const StackFrameTable>(std::move(table)));
  }
  return OkStatus();
}

Status HloParser::CheckStackFrameId(const OpMetadata& metadata, size_t start) {
  // 0 is XLA's "no frame".
  if (!metadata.stack_frame_id || *metadata.stack_frame_id == 0) return OkStatus();
  const StackFrameTable* table = module_->stack_frames();
  if (table != nullptr && table->HasFrame(*metadata.stack_frame_id)) return OkStatus();
  size_t field = cursor_.text().substr(start, cursor_.pos() - start).rfind("stack_frame_id=");
  size_t pos = field == std::string_view::npos ? start : start + field;
  if (table == nullptr) {
    return cursor_.ErrorAt(pos, fmt::format("stack_frame_id={} but the module has no stack-frame "
                                            "table (FileNames, FunctionNames, FileLocations, "
                                            "StackFrames after the HloModule line)",
                                            *metadata.stack_frame_id));
  }
  return cursor_.ErrorAt(pos, fmt::format("stack_frame_id={} names no frame of the module's "
                                          "StackFrames table (it has {})",
                                          *metadata.stack_frame_id, table->frame_count()));
}

Status HloParser::ParseEntryComputationLayout() {
  RETURN_IF_ERROR(cursor_.Expect('{', "to start entry_computation_layout={(...)->...}"));
  RETURN_IF_ERROR(cursor_.Expect('(', "to start the parameter shapes of entry_computation_layout"));
  ComputationLayout layout;
  if (!cursor_.TryConsume(')')) {
    while (true) {
      ASSIGN_OR_RETURN(Shape s, text::ReadShape(cursor_));
      layout.parameters.push_back(std::move(s));
      if (cursor_.TryConsume(',')) continue;
      RETURN_IF_ERROR(cursor_.Expect(')', "to close the parameter shapes"));
      break;
    }
  }
  if (!cursor_.TryConsume("->")) {
    return cursor_.Error(fmt::format("expected '->' in entry_computation_layout, found {}",
                                     cursor_.Describe()));
  }
  ASSIGN_OR_RETURN(layout.result, text::ReadShape(cursor_));
  RETURN_IF_ERROR(cursor_.Expect('}', "to close entry_computation_layout"));
  module_->set_entry_computation_layout(std::move(layout));
  return OkStatus();
}

Status HloParser::ParseSignature() {
  RETURN_IF_ERROR(cursor_.Expect('(', "to start the computation signature"));
  if (!cursor_.TryConsume(')')) {
    while (true) {
      std::string_view pname = cursor_.ReadName();
      if (pname.empty()) {
        return cursor_.Error(fmt::format("expected a parameter name in the signature, found {}",
                                         cursor_.Describe()));
      }
      RETURN_IF_ERROR(cursor_.Expect(':', "after a parameter name in the signature"));
      ASSIGN_OR_RETURN(Shape ignored, text::ReadShape(cursor_));
      if (cursor_.TryConsume(',')) continue;
      RETURN_IF_ERROR(cursor_.Expect(')', "to close the signature's parameters"));
      break;
    }
  }
  if (!cursor_.TryConsume("->")) {
    return cursor_.Error(fmt::format("expected '->' and the result shape in the signature, found {}",
                                     cursor_.Describe()));
  }
  ASSIGN_OR_RETURN(Shape result, text::ReadShape(cursor_));
  return OkStatus();
}

Status HloParser::ParseComputation() {
  size_t pos = cursor_.Here();
  bool is_entry = cursor_.TryConsumeWord("ENTRY");
  size_t name_pos = cursor_.Here();
  std::string_view name = cursor_.ReadName();
  if (name.empty()) {
    return cursor_.Error(fmt::format("expected a computation (a name or ENTRY), found {}",
                                     cursor_.Describe()));
  }
  if (auto it = computations_.find(name); it != computations_.end()) {
    return cursor_.ErrorAt(name_pos, fmt::format("computation '{}' is defined twice; the "
                                                 "computation previously defined here: {}:{}",
                                                 name, options_.filename,
                                                 cursor_.LineCol(it->second.second)));
  }
  if (is_entry && entry_ != nullptr) {
    return cursor_.ErrorAt(pos, "a module expects only one ENTRY computation, found a second one");
  }
  if (cursor_.Peek() == '(') RETURN_IF_ERROR(ParseSignature());
  RETURN_IF_ERROR(cursor_.Expect('{', fmt::format("to open the body of computation {}", name)));

  auto* computation =
      module_->AddComputation(std::make_unique<HloComputation>(std::string(name)), false);
  if (is_entry) entry_ = computation;
  computations_[name] = {computation, name_pos};
  auto state = std::make_unique<ComputationState>();
  state->computation = computation;
  state->pos = pos;
  while (cursor_.Peek() != '}') {
    if (cursor_.AtEnd()) {
      return cursor_.Error(fmt::format("expected '}}' to close computation {}, found the end of "
                                       "the text", name));
    }
    RETURN_IF_ERROR(ParseInstruction(*state));
  }
  cursor_.TryConsume('}');
  if (state->instructions.empty()) {
    return cursor_.ErrorAt(pos, fmt::format("computation {} has no instructions", name));
  }
  if (state->root == nullptr) state->root = state->instructions.back().instruction;
  computation->set_root_instruction(state->root);
  if (cursor_.Peek() == ',') {
    size_t save = cursor_.Here();
    cursor_.TryConsume(',');
    if (cursor_.TryConsumeWord("execution_thread")) {
      RETURN_IF_ERROR(cursor_.Expect('=', "after execution_thread"));
      ASSIGN_OR_RETURN(std::string thread, cursor_.ReadString());
      computation->set_execution_thread(std::move(thread));
    } else {
      cursor_.set_pos(save);
      return cursor_.Error(fmt::format("expected execution_thread=\"...\" after computation {}, "
                                       "found {}", name, cursor_.DescribeAt(save + 1)));
    }
  }
  states_.push_back(std::move(state));
  return OkStatus();
}

Status HloParser::ParseInstruction(ComputationState& state) {
  size_t pos = cursor_.Here();
  cursor_.SkipWhitespace();
  pos = cursor_.pos();
  bool is_root = cursor_.TryConsumeWord("ROOT");
  std::string_view name = cursor_.ReadName();
  if (name.empty()) {
    return cursor_.Error(fmt::format("expected an instruction (name = shape opcode(operands)), "
                                     "found {}", cursor_.Describe()));
  }
  RETURN_IF_ERROR(cursor_.Expect('=', fmt::format("after instruction name {}", name)));
  if (state.by_name.count(name)) {
    return cursor_.ErrorAt(pos, fmt::format("instruction name '{}' is used twice in computation "
                                            "{}", name, state.computation->name()));
  }
  std::optional<Shape> shape;
  if (text::AtShape(cursor_)) {
    ASSIGN_OR_RETURN(Shape s, text::ReadShape(cursor_, "%" + std::string(name)));
    shape = std::move(s);
  }
  ASSIGN_OR_RETURN(size_t index, ParseInstructionBody(state, name, std::move(shape), pos, 0));
  HloInstruction* instruction = state.instructions[index].instruction;
  state.by_name[name] = instruction;
  while (cursor_.TryConsume(',')) RETURN_IF_ERROR(ParseAttribute(state, index));
  if (is_root) {
    if (state.root != nullptr) {
      return cursor_.ErrorAt(pos, fmt::format("one computation should have only one ROOT; {} "
                                              "already has ROOT %{}", state.computation->name(),
                                              state.root->name()));
    }
    state.root = instruction;
  }
  return OkStatus();
}

StatusOr<size_t> HloParser::ParseInstructionBody(ComputationState& state, std::string_view name,
                                                 std::optional<Shape> shape, size_t pos,
                                                 int depth) {
  size_t opcode_pos = cursor_.Here();
  std::string_view opcode_name = cursor_.ReadName();
  if (opcode_name.empty()) {
    return cursor_.Error(fmt::format("expected an opcode, found {}", cursor_.Describe()));
  }
  std::optional<HloOpcode> opcode = StringToHloOpcode(opcode_name);
  if (!opcode) {
    bool looks_like_shape = cursor_.pos() < cursor_.text().size() && cursor_.text()[cursor_.pos()] == '[';
    if (looks_like_shape) {
      return cursor_.ErrorAt(opcode_pos, fmt::format("unknown element type '{}' (expected pred, "
                                                     "s8..s64, u8..u64, f16, bf16, f32, f64, "
                                                     "c64, c128, f8 types, token)", opcode_name));
    }
    return cursor_.ErrorAt(opcode_pos, fmt::format("unknown opcode '{}'", opcode_name));
  }
  PendingInstruction pending;
  pending.pos = pos;
  pending.shape_omitted = !shape.has_value();
  auto instruction = std::make_unique<HloInstruction>(*opcode, shape ? *shape : Shape(),
                                                      std::string(name));
  if (*opcode == HloOpcode::kParameter) {
    RETURN_IF_ERROR(cursor_.Expect('(', "after parameter"));
    ASSIGN_OR_RETURN(int64_t number, cursor_.ReadInt64("a parameter number"));
    // Parameters are numbered 0..n-1 and each takes a line of text, so a number beyond the text's
    // length cannot be right (and must not size the computation's parameter table).
    if (number < 0 || static_cast<uint64_t>(number) >= cursor_.text().size()) {
      return cursor_.ErrorAt(pos, fmt::format("parameter number {} is out of range: a "
                                              "computation's parameters are numbered 0..n-1",
                                              number));
    }
    RETURN_IF_ERROR(cursor_.Expect(')', "to close parameter(N)"));
    if (!shape) return cursor_.ErrorAt(pos, fmt::format("parameter {} needs a shape", name));
    instruction->set_parameter_number(number);
  } else if (*opcode == HloOpcode::kConstant) {
    RETURN_IF_ERROR(cursor_.Expect('(', "after constant"));
    if (!shape) return cursor_.ErrorAt(pos, fmt::format("constant {} needs a shape", name));
    ASSIGN_OR_RETURN(Literal literal, text::ReadLiteral(cursor_, *shape));
    if (shape->IsArray() && shape->has_layout()) literal.set_layout(shape->layout());
    instruction->set_literal(std::move(literal));
    RETURN_IF_ERROR(cursor_.Expect(')', "to close constant(...)"));
  } else {
    RETURN_IF_ERROR(ParseOperands(state, pending.operands, depth));
  }
  pending.instruction = state.computation->AddInstruction(std::move(instruction), false);
  state.instructions.push_back(std::move(pending));
  return state.instructions.size() - 1;
}

Status HloParser::ParseOperands(ComputationState& state, std::vector<PendingOperand>& operands,
                                int depth) {
  RETURN_IF_ERROR(cursor_.Expect('(', "to start the operand list"));
  if (cursor_.TryConsume(')')) return OkStatus();
  while (true) {
    cursor_.SkipWhitespace();
    size_t pos = cursor_.Here();
    PendingOperand operand;
    if (text::AtShape(cursor_)) {
      ASSIGN_OR_RETURN(Shape s, text::ReadShape(cursor_, "an operand"));
      operand.declared_shape = std::move(s);
    }
    size_t name_pos = cursor_.Here();
    cursor_.SkipWhitespace();
    name_pos = cursor_.pos();
    std::string_view name = cursor_.ReadName();
    if (name.empty()) {
      return cursor_.Error(fmt::format("expected an operand name, found {}", cursor_.Describe()));
    }
    bool nested = cursor_.pos() < cursor_.text().size() && cursor_.text()[cursor_.pos()] == '(' &&
                  cursor_.text()[name_pos] != '%' && StringToHloOpcode(name).has_value();
    if (nested) {
      if (depth >= kMaxOperandNesting) return cursor_.ErrorAt(name_pos, "operands are nested too deeply");
      cursor_.set_pos(name_pos);
      ASSIGN_OR_RETURN(size_t index,
                       ParseInstructionBody(state, name, operand.declared_shape, pos, depth + 1));
      state.instructions[index].anonymous = true;
      operand.resolved = state.instructions[index].instruction;
      operand.declared_shape.reset();
    } else {
      operand.ref = {name, name_pos};
    }
    operands.push_back(std::move(operand));
    if (cursor_.TryConsume(',')) continue;
    if (cursor_.TryConsume(')')) return OkStatus();
    return cursor_.Error(fmt::format("expected ',' or ')' in the operand list, found {}",
                                     cursor_.Describe()));
  }
}

StatusOr<std::vector<NameRef>> HloParser::ParseNameList(std::string_view what) {
  RETURN_IF_ERROR(cursor_.Expect('{', fmt::format("to start the list of {}", what)));
  std::vector<NameRef> names;
  if (cursor_.TryConsume('}')) return names;
  while (true) {
    cursor_.SkipWhitespace();
    size_t pos = cursor_.Here();
    std::string_view name = cursor_.ReadName();
    if (name.empty()) {
      return cursor_.Error(fmt::format("expected a name in the list of {}, found {}", what,
                                       cursor_.Describe()));
    }
    names.push_back({name, pos});
    if (cursor_.TryConsume(',')) continue;
    RETURN_IF_ERROR(cursor_.Expect('}', fmt::format("to close the list of {}", what)));
    return names;
  }
}

Status HloParser::ParseAttribute(ComputationState& state, size_t instruction_index) {
  PendingInstruction& pending = state.instructions[instruction_index];
  HloInstruction* instr = pending.instruction;
  cursor_.SkipWhitespace();
  size_t key_pos = cursor_.Here();
  std::string_view key = cursor_.ReadKey();
  if (key.empty()) {
    return cursor_.Error(fmt::format("expected an attribute (name=value) after ',', found {}",
                                     cursor_.Describe()));
  }
  RETURN_IF_ERROR(cursor_.Expect('=', fmt::format("after attribute {}", key)));
  auto duplicate = [&]() {
    return cursor_.ErrorAt(key_pos, fmt::format("attribute '{}' is given twice on {}", key,
                                                instr->name()));
  };
  auto read_list = [&](std::optional<std::vector<int64_t>>& field) -> Status {
    if (field) return duplicate();
    ASSIGN_OR_RETURN(std::vector<int64_t> v, text::ReadIntList(cursor_, key));
    field = std::move(v);
    return OkStatus();
  };
  auto read_int = [&](std::optional<int64_t>& field) -> Status {
    if (field) return duplicate();
    ASSIGN_OR_RETURN(int64_t v, cursor_.ReadInt64(key));
    field = v;
    return OkStatus();
  };
  auto read_bool = [&](std::optional<bool>& field) -> Status {
    if (field) return duplicate();
    ASSIGN_OR_RETURN(bool v, text::ReadBool(cursor_, key));
    field = v;
    return OkStatus();
  };
  auto read_dims_into = [&](std::vector<int64_t>& field) -> Status {
    ASSIGN_OR_RETURN(std::vector<int64_t> v, text::ReadIntList(cursor_, key));
    field = std::move(v);
    return OkStatus();
  };
  HloOpcode op = instr->opcode();

  if (key == "dimensions") return read_list(instr->dimensions_attr);
  if (key == "dynamic_slice_sizes") return read_list(instr->dynamic_slice_sizes_attr);
  if (key == "slice_sizes") return read_list(instr->slice_sizes_attr);
  if (key == "index") return read_int(instr->tuple_index_attr);
  if (key == "iota_dimension") return read_int(instr->iota_dimension_attr);
  if (key == "feature_group_count") return read_int(instr->feature_group_count_attr);
  if (key == "batch_group_count") return read_int(instr->batch_group_count_attr);
  if (key == "exponent_bits") return read_int(instr->exponent_bits_attr);
  if (key == "mantissa_bits") return read_int(instr->mantissa_bits_attr);
  if (key == "indices_are_sorted") return read_bool(instr->indices_are_sorted_attr);
  if (key == "unique_indices") return read_bool(instr->unique_indices_attr);
  if (key == "is_stable") return read_bool(instr->is_stable_attr);
  if (key == "slice") {
    if (instr->has_slice) return duplicate();
    instr->has_slice = true;
    return text::ReadSlice(cursor_, instr->slice_starts, instr->slice_limits, instr->slice_strides);
  }
  if (key == "padding") {
    if (instr->padding_config) return duplicate();
    ASSIGN_OR_RETURN(PaddingConfig p, text::ReadPaddingConfig(cursor_));
    instr->padding_config = std::move(p);
    return OkStatus();
  }
  if (key == "window") {
    if (instr->window) return duplicate();
    ASSIGN_OR_RETURN(Window w, text::ReadWindow(cursor_));
    instr->window = std::move(w);
    return OkStatus();
  }
  if (key == "dim_labels") {
    if (instr->convolution_dimension_numbers) return duplicate();
    ASSIGN_OR_RETURN(ConvolutionDimensionNumbers d, text::ReadDimLabels(cursor_));
    instr->convolution_dimension_numbers = std::move(d);
    return OkStatus();
  }
  if (key == "lhs_batch_dims" || key == "lhs_contracting_dims" || key == "rhs_batch_dims" ||
      key == "rhs_contracting_dims") {
    if (!instr->dot_dimension_numbers) instr->dot_dimension_numbers.emplace();
    DotDimensionNumbers& d = *instr->dot_dimension_numbers;
    if (key == "lhs_batch_dims") return read_dims_into(d.lhs_batch_dimensions);
    if (key == "lhs_contracting_dims") return read_dims_into(d.lhs_contracting_dimensions);
    if (key == "rhs_batch_dims") return read_dims_into(d.rhs_batch_dimensions);
    return read_dims_into(d.rhs_contracting_dimensions);
  }
  // Gather and scatter share index_vector_dim, so their dimension numbers are typed only on
  // their own opcodes; elsewhere they stay raw text like any attribute xlens does not act on.
  bool gather_key = op == HloOpcode::kGather &&
                    (key == "offset_dims" || key == "collapsed_slice_dims" ||
                     key == "start_index_map" || key == "operand_batching_dims" ||
                     key == "start_indices_batching_dims" || key == "index_vector_dim");
  if (gather_key) {
    if (!instr->gather_dimension_numbers) instr->gather_dimension_numbers.emplace();
    GatherDimensionNumbers& g = *instr->gather_dimension_numbers;
    if (key == "offset_dims") return read_dims_into(g.offset_dims);
    if (key == "collapsed_slice_dims") return read_dims_into(g.collapsed_slice_dims);
    if (key == "start_index_map") return read_dims_into(g.start_index_map);
    if (key == "operand_batching_dims") return read_dims_into(g.operand_batching_dims);
    if (key == "start_indices_batching_dims") return read_dims_into(g.start_indices_batching_dims);
    ASSIGN_OR_RETURN(g.index_vector_dim, cursor_.ReadInt64(key));
    return OkStatus();
  }
  bool scatter_key = op == HloOpcode::kScatter &&
                     (key == "update_window_dims" || key == "inserted_window_dims" ||
                      key == "scatter_dims_to_operand_dims" || key == "input_batching_dims" ||
                      key == "scatter_indices_batching_dims" || key == "index_vector_dim");
  if (scatter_key) {
    if (!instr->scatter_dimension_numbers) instr->scatter_dimension_numbers.emplace();
    ScatterDimensionNumbers& s = *instr->scatter_dimension_numbers;
    if (key == "update_window_dims") return read_dims_into(s.update_window_dims);
    if (key == "inserted_window_dims") return read_dims_into(s.inserted_window_dims);
    if (key == "scatter_dims_to_operand_dims") return read_dims_into(s.scatter_dims_to_operand_dims);
    if (key == "input_batching_dims") return read_dims_into(s.input_batching_dims);
    if (key == "scatter_indices_batching_dims") return read_dims_into(s.scatter_indices_batching_dims);
    ASSIGN_OR_RETURN(s.index_vector_dim, cursor_.ReadInt64(key));
    return OkStatus();
  }
  if (key == "direction") {
    if (instr->comparison_direction) return duplicate();
    size_t pos = cursor_.Here();
    std::string_view v = cursor_.ReadName();
    auto d = ParseComparisonDirection(v);
    if (!d) {
      return cursor_.ErrorAt(pos, fmt::format("expected a comparison direction (EQ, NE, GE, GT, "
                                              "LE, LT), found '{}'", v));
    }
    instr->comparison_direction = d;
    return OkStatus();
  }
  if (key == "type" && op == HloOpcode::kCompare) {
    if (instr->comparison_type) return duplicate();
    size_t pos = cursor_.Here();
    std::string_view v = cursor_.ReadName();
    auto t = ParseComparisonType(v);
    if (!t) {
      return cursor_.ErrorAt(pos, fmt::format("expected a comparison type (FLOAT, TOTALORDER, "
                                              "SIGNED, UNSIGNED), found '{}'", v));
    }
    instr->comparison_type = t;
    return OkStatus();
  }
  if (key == "kind" && op == HloOpcode::kFusion) {
    if (instr->fusion_kind) return duplicate();
    size_t pos = cursor_.Here();
    std::string_view v = cursor_.ReadName();
    auto k = ParseFusionKind(v);
    if (!k) {
      return cursor_.ErrorAt(pos, fmt::format("expected a fusion kind (kLoop, kInput, kOutput, "
                                              "kCustom), found '{}'", v));
    }
    instr->fusion_kind = k;
    return OkStatus();
  }
  if (key == "custom_call_target") {
    if (instr->custom_call_target) return duplicate();
    ASSIGN_OR_RETURN(std::string target, cursor_.ReadString());
    instr->custom_call_target = std::move(target);
    return OkStatus();
  }
  if (key == "metadata") {
    size_t start = cursor_.Here();
    ASSIGN_OR_RETURN(instr->metadata, text::ReadMetadata(cursor_));
    return CheckStackFrameId(instr->metadata, start);
  }
  if (key == "control-predecessors") {
    ASSIGN_OR_RETURN(pending.control_predecessors, ParseNameList(key));
    return OkStatus();
  }
  if (IsCalledComputationKey(key) || IsCalledComputationListKey(key)) {
    if (instr->called_computation(std::string(key)) != nullptr) return duplicate();
    std::vector<NameRef> names;
    bool is_list = cursor_.Peek() == '{';
    if (is_list) {
      ASSIGN_OR_RETURN(names, ParseNameList(key));
    } else {
      cursor_.SkipWhitespace();
      size_t pos = cursor_.Here();
      std::string_view name = cursor_.ReadName();
      if (name.empty()) {
        return cursor_.Error(fmt::format("expected a computation name for {}, found {}", key,
                                         cursor_.Describe()));
      }
      names.push_back({name, pos});
    }
    auto& attrs = instr->mutable_called_computation_attributes();
    attrs.push_back({std::string(key), std::vector<HloComputation*>(names.size(), nullptr), is_list});
    pending_called_.push_back({instr, attrs.size() - 1, std::move(names)});
    return OkStatus();
  }
  if (instr->raw_attribute(key) != nullptr) return duplicate();
  if (key == "sharding") return ParseShardingAttribute(*instr);
  if (key == "literal") {
    // `literal=s32[] 1` (custom-call SetBound): a shape and a literal, separated by a space.
    size_t start = cursor_.Here();
    ASSIGN_OR_RETURN(Shape shape, text::ReadShape(cursor_));
    ASSIGN_OR_RETURN(Literal ignored, text::ReadLiteral(cursor_, shape));
    instr->raw_attributes.push_back(
        {std::string(key), std::string(cursor_.text().substr(start, cursor_.pos() - start))});
    return OkStatus();
  }
  ASSIGN_OR_RETURN(std::string_view raw, cursor_.ReadRawValue());
  instr->raw_attributes.push_back({std::string(key), std::string(raw)});
  return OkStatus();
}

// A sharding is read as XLA's parser reads it and checked against the instruction's shape and the
// header's num_partitions, so a malformed one fails where it is written; it is kept verbatim.
Status HloParser::ParseShardingAttribute(HloInstruction& instr) {
  const size_t start = cursor_.Here();
  ASSIGN_OR_RETURN(HloSharding sharding, HloSharding::Read(cursor_));
  std::optional<int64_t> partitions;
  for (const RawAttribute& attr : module_->header_attributes()) {
    if (attr.key == "num_partitions") {
      int64_t n = 0;
      auto [end, ec] = std::from_chars(attr.value.data(), attr.value.data() + attr.value.size(), n);
      if (ec == std::errc() && end == attr.value.data() + attr.value.size() && n > 0) partitions = n;
    }
  }
  // An outfeed's or send's sharding describes the data it moves beside its token, not its token
  // shape: values with a token are not checked against their shape.
  bool has_token = false;
  instr.shape().ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) {
    has_token = has_token || leaf.IsToken();
  });
  Status valid = instr.shape().IsValid() && !has_token
                     ? sharding.Validate(instr.shape(), std::nullopt) : OkStatus();
  if (valid.ok() && partitions && sharding.MaxDevicePlusOne() > *partitions) {
    valid = Error(fmt::format("sharding {} names device {} but the module has num_partitions={}",
                              sharding.ToString(), sharding.MaxDevicePlusOne() - 1, *partitions));
  }
  if (!valid.ok()) return cursor_.ErrorAt(start, valid.message() + " on " + instr.name());
  instr.raw_attributes.push_back(
      {"sharding", std::string(cursor_.text().substr(start, cursor_.pos() - start))});
  return OkStatus();
}

Status HloParser::ResolveCalledComputations() {
  for (PendingCalled& p : pending_called_) {
    auto& attr = p.instruction->mutable_called_computation_attributes()[p.attr_index];
    for (size_t i = 0; i < p.names.size(); ++i) {
      auto it = computations_.find(p.names[i].name);
      if (it == computations_.end()) {
        return cursor_.ErrorAt(p.names[i].pos, fmt::format("computation does not exist: {}",
                                                           p.names[i].name));
      }
      attr.computations[i] = it->second.first;
    }
    if (p.instruction->opcode() == HloOpcode::kFusion && attr.key == "calls" &&
        !attr.computations.empty()) {
      attr.computations[0]->SetFusionInstruction(p.instruction);
    }
  }
  return OkStatus();
}

Status HloParser::ResolveOperands(ComputationState& state) {
  for (PendingInstruction& p : state.instructions) {
    for (PendingOperand& operand : p.operands) {
      HloInstruction* target = operand.resolved;
      if (target == nullptr) {
        auto it = state.by_name.find(operand.ref.name);
        if (it == state.by_name.end()) {
          return cursor_.ErrorAt(operand.ref.pos, fmt::format("instruction does not exist: {} "
                                                              "(in computation {})",
                                                              operand.ref.name,
                                                              state.computation->name()));
        }
        target = it->second;
      }
      p.instruction->AppendOperand(target);
    }
    for (const NameRef& ref : p.control_predecessors) {
      auto it = state.by_name.find(ref.name);
      if (it == state.by_name.end()) {
        return cursor_.ErrorAt(ref.pos, fmt::format("control predecessor '{}' is not defined in "
                                                    "computation {}", ref.name,
                                                    state.computation->name()));
      }
      it->second->AddControlDependencyTo(p.instruction);
    }
  }
  return OkStatus();
}

Status HloParser::InferOmittedShapes() {
  // Callees first: a reduce without a written shape needs its reducer's shapes.
  std::unordered_map<HloComputation*, ComputationState*> state_of;
  for (auto& s : states_) state_of[s->computation] = s.get();
  std::unordered_set<HloComputation*> done;
  std::unordered_set<HloComputation*> active;
  std::function<Status(ComputationState&)> visit = [&](ComputationState& state) -> Status {
    HloComputation* comp = state.computation;
    if (done.count(comp)) return OkStatus();
    if (!active.insert(comp).second) {
      return cursor_.ErrorAt(state.pos, fmt::format("computation {} calls itself", comp->name()));
    }
    bool any_omitted = false;
    for (PendingInstruction& p : state.instructions) {
      any_omitted |= p.shape_omitted;
      for (HloComputation* callee : p.instruction->called_computations()) {
        RETURN_IF_ERROR(visit(*state_of[callee]));
      }
    }
    if (any_omitted) {
      std::unordered_map<HloInstruction*, PendingInstruction*> pending_of;
      for (PendingInstruction& p : state.instructions) pending_of[p.instruction] = &p;
      for (HloInstruction* instr : comp->MakeInstructionPostOrder()) {
        PendingInstruction* p = pending_of[instr];
        if (!p->shape_omitted) continue;
        for (HloInstruction* operand : instr->operands()) {
          if (!operand->shape().IsValid()) {
            return cursor_.ErrorAt(p->pos, fmt::format("cannot infer the shape of {}: operand {} "
                                                       "has no shape (is there a cycle?)",
                                                       instr->name(), operand->name()));
          }
        }
        StatusOr<Shape> inferred = InferShape(*instr);
        if (!inferred.ok()) {
          return cursor_.ErrorAt(p->pos, fmt::format("cannot infer the shape of {}: {}",
                                                     instr->name(), inferred.status().message()));
        }
        Shape shape = std::move(inferred).value();
        if (!shape.has_layout()) shape.SetDefaultLayout();
        instr->set_shape(std::move(shape));
      }
    }
    active.erase(comp);
    done.insert(comp);
    return OkStatus();
  };
  for (auto& s : states_) RETURN_IF_ERROR(visit(*s));
  return OkStatus();
}

Status HloParser::CheckShapes(ComputationState& state) {
  for (PendingInstruction& p : state.instructions) {
    HloInstruction* instr = p.instruction;
    for (size_t i = 0; i < p.operands.size(); ++i) {
      const PendingOperand& operand = p.operands[i];
      if (!operand.declared_shape) continue;
      const Shape& actual = instr->operand(static_cast<int64_t>(i))->shape();
      if (!shape_util::Compatible(*operand.declared_shape, actual)) {
        return cursor_.ErrorAt(operand.ref.pos,
                               fmt::format("The declared operand shape {} is not compatible with "
                                           "the shape of the operand instruction {}.",
                                           operand.declared_shape->ToString(), actual.ToString()));
      }
    }
    if (p.shape_omitted || !IsFullySupportedOpcode(instr->opcode())) continue;
    StatusOr<Shape> inferred = InferShape(*instr);
    if (!inferred.ok()) {
      return cursor_.ErrorAt(p.pos, fmt::format("instruction {}: {}", instr->name(),
                                                inferred.status().message()));
    }
    if (!shape_util::Compatible(*inferred, instr->shape())) {
      return cursor_.ErrorAt(p.pos, fmt::format("instruction {} is declared as {} but its operands "
                                                "and attributes give {}", instr->name(),
                                                instr->shape().ToString(false),
                                                inferred->ToString(false)));
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<HloModule>> ParseHloModule(std::string_view text,
                                                    const ParseOptions& options) {
  HloParser parser(text, options);
  return parser.Parse();
}

StatusOr<Shape> ParseShape(std::string_view text) {
  TextCursor cursor(text, "<shape>");
  ASSIGN_OR_RETURN(Shape shape, text::ReadShape(cursor));
  cursor.SkipWhitespace();
  if (!cursor.AtEnd()) {
    return cursor.Error(fmt::format("unexpected {} after the shape", cursor.Describe()));
  }
  return shape;
}

}  // namespace xlens
