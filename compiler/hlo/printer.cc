#include "compiler/hlo/printer.h"

#include <fmt/format.h>

#include "compiler/hlo/stack_frames.h"

namespace xlens {

namespace {

std::string JoinInts(const std::vector<int64_t>& v) { return fmt::format("{}", fmt::join(v, ",")); }

std::string Name(const std::string& name, bool short_form) {
  return short_form ? name : "%" + name;
}

// Typed attributes in the order XLA prints them.
void AppendTypedAttributes(const HloInstruction& instr, std::vector<std::string>& out) {
  if (instr.has_slice) {
    std::vector<std::string> dims;
    for (size_t i = 0; i < instr.slice_starts.size(); ++i) {
      std::string d = fmt::format("[{}:{}", instr.slice_starts[i], instr.slice_limits[i]);
      if (instr.slice_strides[i] != 1) d += fmt::format(":{}", instr.slice_strides[i]);
      dims.push_back(d + "]");
    }
    out.push_back(fmt::format("slice={{{}}}", fmt::join(dims, ", ")));
  }
  if (instr.dimensions_attr) out.push_back("dimensions={" + JoinInts(*instr.dimensions_attr) + "}");
  if (instr.tuple_index_attr) out.push_back(fmt::format("index={}", *instr.tuple_index_attr));
  if (instr.iota_dimension_attr) {
    out.push_back(fmt::format("iota_dimension={}", *instr.iota_dimension_attr));
  }
  if (instr.padding_config) out.push_back("padding=" + instr.padding_config->ToString());
  if (instr.window) out.push_back("window={" + instr.window->ToString() + "}");
  if (instr.convolution_dimension_numbers) {
    out.push_back("dim_labels=" + instr.convolution_dimension_numbers->ToString());
  }
  if (instr.feature_group_count_attr) {
    out.push_back(fmt::format("feature_group_count={}", *instr.feature_group_count_attr));
  }
  if (instr.batch_group_count_attr) {
    out.push_back(fmt::format("batch_group_count={}", *instr.batch_group_count_attr));
  }
  if (instr.dot_dimension_numbers) {
    const DotDimensionNumbers& d = *instr.dot_dimension_numbers;
    if (!d.lhs_batch_dimensions.empty()) {
      out.push_back("lhs_batch_dims={" + JoinInts(d.lhs_batch_dimensions) + "}");
    }
    out.push_back("lhs_contracting_dims={" + JoinInts(d.lhs_contracting_dimensions) + "}");
    if (!d.rhs_batch_dimensions.empty()) {
      out.push_back("rhs_batch_dims={" + JoinInts(d.rhs_batch_dimensions) + "}");
    }
    out.push_back("rhs_contracting_dims={" + JoinInts(d.rhs_contracting_dimensions) + "}");
  }
  if (instr.comparison_direction) {
    out.push_back(fmt::format("direction={}", ComparisonDirectionString(*instr.comparison_direction)));
  }
  if (instr.comparison_type) {
    out.push_back(fmt::format("type={}", ComparisonTypeString(*instr.comparison_type)));
  }
  if (instr.gather_dimension_numbers) {
    const GatherDimensionNumbers& g = *instr.gather_dimension_numbers;
    out.push_back("offset_dims={" + JoinInts(g.offset_dims) + "}");
    out.push_back("collapsed_slice_dims={" + JoinInts(g.collapsed_slice_dims) + "}");
    out.push_back("start_index_map={" + JoinInts(g.start_index_map) + "}");
    if (!g.operand_batching_dims.empty()) {
      out.push_back("operand_batching_dims={" + JoinInts(g.operand_batching_dims) + "}");
    }
    if (!g.start_indices_batching_dims.empty()) {
      out.push_back("start_indices_batching_dims={" + JoinInts(g.start_indices_batching_dims) + "}");
    }
    out.push_back(fmt::format("index_vector_dim={}", g.index_vector_dim));
  }
  if (instr.slice_sizes_attr) out.push_back("slice_sizes={" + JoinInts(*instr.slice_sizes_attr) + "}");
  if (instr.scatter_dimension_numbers) {
    const ScatterDimensionNumbers& s = *instr.scatter_dimension_numbers;
    out.push_back("update_window_dims={" + JoinInts(s.update_window_dims) + "}");
    out.push_back("inserted_window_dims={" + JoinInts(s.inserted_window_dims) + "}");
    out.push_back("scatter_dims_to_operand_dims={" + JoinInts(s.scatter_dims_to_operand_dims) + "}");
    if (!s.input_batching_dims.empty()) {
      out.push_back("input_batching_dims={" + JoinInts(s.input_batching_dims) + "}");
    }
    if (!s.scatter_indices_batching_dims.empty()) {
      out.push_back("scatter_indices_batching_dims={" + JoinInts(s.scatter_indices_batching_dims) +
                    "}");
    }
    out.push_back(fmt::format("index_vector_dim={}", s.index_vector_dim));
  }
  if (instr.indices_are_sorted_attr) {
    out.push_back(fmt::format("indices_are_sorted={}", *instr.indices_are_sorted_attr));
  }
  if (instr.unique_indices_attr) {
    out.push_back(fmt::format("unique_indices={}", *instr.unique_indices_attr));
  }
  if (instr.dynamic_slice_sizes_attr) {
    out.push_back("dynamic_slice_sizes={" + JoinInts(*instr.dynamic_slice_sizes_attr) + "}");
  }
  if (instr.is_stable_attr) out.push_back(fmt::format("is_stable={}", *instr.is_stable_attr));
  if (instr.exponent_bits_attr) {
    out.push_back(fmt::format("exponent_bits={}", *instr.exponent_bits_attr));
  }
  if (instr.mantissa_bits_attr) {
    out.push_back(fmt::format("mantissa_bits={}", *instr.mantissa_bits_attr));
  }
  if (instr.fusion_kind) out.push_back(fmt::format("kind={}", FusionKindString(*instr.fusion_kind)));
  if (instr.custom_call_target) {
    out.push_back("custom_call_target=" + QuoteString(*instr.custom_call_target));
  }
}

// Typed attributes, called computations, then the raw ones (backend_config is written last by the
// callers, after metadata, as XLA does).
void AppendAttributes(const HloInstruction& instr, bool short_form, std::vector<std::string>& out) {
  AppendTypedAttributes(instr, out);
  for (const CalledComputationAttribute& attr : instr.called_computation_attributes()) {
    std::vector<std::string> names;
    for (const HloComputation* c : attr.computations) {
      names.push_back(Name(c != nullptr ? c->name() : "<null>", short_form));
    }
    if (attr.is_list) {
      out.push_back(fmt::format("{}={{{}}}", attr.key, fmt::join(names, ", ")));
    } else {
      out.push_back(fmt::format("{}={}", attr.key, fmt::join(names, ", ")));
    }
  }
  for (const RawAttribute& raw : instr.raw_attributes) {
    if (raw.key != "backend_config") out.push_back(raw.key + "=" + raw.value);
  }
}

// `text` (computation.ToString) with each instruction's source after its line: line i + 1 is
// post-order instruction i, as ToString writes them.
std::string WithSourceComments(const HloComputation& computation, const std::string& text) {
  const auto order = computation.MakeInstructionPostOrder();
  std::string out;
  size_t start = 0;
  int64_t line = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.append(text, start, end - start);
    if (line >= 1 && line <= static_cast<int64_t>(order.size())) {
      std::vector<SourceFrame> stack = InstructionStack(*order[line - 1]);
      if (!stack.empty()) out += "  // " + StackText(stack);
    }
    if (end < text.size()) out += '\n';
    start = end + 1;
    ++line;
  }
  return out;
}

}  // namespace

std::string HloInstruction::ToString(bool short_form) const {
  std::string out = Name(name_, short_form) + " = " + shape_.ToString() + " " +
                    std::string(HloOpcodeString(opcode_)) + "(";
  if (opcode_ == HloOpcode::kParameter) {
    out += std::to_string(parameter_number_);
  } else if (opcode_ == HloOpcode::kConstant && literal_) {
    out += literal_->ToStringWithoutShape();
  } else {
    for (size_t i = 0; i < operands_.size(); ++i) {
      if (i > 0) out += ", ";
      // XLA marks every fifth operand of long lists so that they can be counted.
      if (!short_form && i > 0 && i % 5 == 0) out += fmt::format("/*index={}*/", i);
      if (!short_form) out += operands_[i]->shape().ToString() + " ";
      out += Name(operands_[i]->name(), short_form);
    }
  }
  out += ")";

  std::vector<std::string> attrs;
  AppendAttributes(*this, short_form, attrs);
  if (!control_predecessors_.empty()) {
    std::vector<std::string> names;
    for (const HloInstruction* p : control_predecessors_) names.push_back(Name(p->name(), short_form));
    attrs.push_back(fmt::format("control-predecessors={{{}}}", fmt::join(names, ", ")));
  }
  // XLA's short parsable form drops metadata but keeps backend_config, which changes codegen.
  if (!short_form && !metadata.empty()) attrs.push_back("metadata={" + metadata.ToString() + "}");
  if (const std::string* config = raw_attribute("backend_config")) {
    attrs.push_back("backend_config=" + *config);
  }
  for (const std::string& a : attrs) out += ", " + a;
  return out;
}

std::string HloInstruction::AttributesToString() const {
  std::vector<std::string> attrs;
  AppendAttributes(*this, /*short_form=*/false, attrs);
  if (const std::string* config = raw_attribute("backend_config")) {
    attrs.push_back("backend_config=" + *config);
  }
  return fmt::format("{}", fmt::join(attrs, ", "));
}

std::string TypedAttributesToString(const HloInstruction& instruction) {
  std::vector<std::string> attrs;
  AppendTypedAttributes(instruction, attrs);
  return fmt::format("{}", fmt::join(attrs, ", "));
}

std::string HloComputation::ToString(bool short_form) const {
  std::string out;
  if (IsEntryComputation()) out += "ENTRY ";
  out += Name(name_, short_form);
  if (!short_form) {
    std::vector<std::string> params;
    for (const HloInstruction* p : parameters_) {
      if (p != nullptr) params.push_back(p->name() + ": " + p->shape().ToString(false));
    }
    out += fmt::format(" ({}) -> {}", fmt::join(params, ", "),
                       root_ != nullptr ? root_->shape().ToString(false) : "()");
  }
  out += " {\n";
  for (const HloInstruction* instr : MakeInstructionPostOrder()) {
    out += instr == root_ ? "  ROOT " : "  ";
    out += instr->ToString(short_form);
    out += "\n";
  }
  out += "}";
  if (!execution_thread_.empty()) out += ", execution_thread=" + QuoteString(execution_thread_);
  return out;
}

std::string HloModule::ToString(bool short_form) const {
  return PrintModule(*this, PrintOptions{.short_form = short_form});
}

std::string PrintModule(const HloModule& module, const PrintOptions& options) {
  std::string out = "HloModule " + module.name();
  std::vector<std::string> header;
  bool layout_written = false;
  auto write_layout = [&]() {
    if (layout_written) return;
    layout_written = true;
    if (module.entry_computation_layout()) {
      header.push_back("entry_computation_layout={" + module.entry_computation_layout()->ToString() + "}");
      return;
    }
    const HloComputation* entry = module.entry_computation();
    if (entry == nullptr || entry->root_instruction() == nullptr) return;
    ComputationLayout layout;
    for (const HloInstruction* p : entry->parameter_instructions()) {
      if (p != nullptr) layout.parameters.push_back(p->shape());
    }
    layout.result = entry->root_instruction()->shape();
    header.push_back("entry_computation_layout={" + layout.ToString() + "}");
  };
  // XLA writes is_scheduled before the layout and everything else after it.
  for (const RawAttribute& attr : module.header_attributes()) {
    if (attr.key != "is_scheduled") write_layout();
    header.push_back(attr.key + "=" + attr.value);
  }
  write_layout();
  for (const std::string& h : header) out += ", " + h;
  out += "\n";
  // The stack-frame table travels with metadata: XLA's short form drops both.
  if (!options.short_form && module.stack_frames() != nullptr) {
    out += "\n" + module.stack_frames()->ToString();
  }
  for (const HloComputation* computation : module.computations()) {
    std::string text = computation->ToString(options.short_form);
    if (options.source_comments) text = WithSourceComments(*computation, text);
    out += "\n" + text + "\n";
  }
  return out;
}

}  // namespace xlens
