#include "dump/xla_dump_kernels.h"

#include <set>
#include <string>
#include <vector>

#include "compiler/hlo/parser.h"
#include "compiler/hlo/stack_frames.h"

namespace xlens {
namespace {

// Instructions that name or move buffers and run no code of their own.
bool RunsNoCode(HloOpcode opcode) {
  switch (opcode) {
    case HloOpcode::kParameter:
    case HloOpcode::kConstant:
    case HloOpcode::kTuple:
    case HloOpcode::kGetTupleElement:
    case HloOpcode::kBitcast:
    case HloOpcode::kAfterAll:
    case HloOpcode::kAddDependency:
    case HloOpcode::kOptimizationBarrier:
      return true;
    default:
      return false;
  }
}

bool RunsComputations(HloOpcode opcode) {
  return opcode == HloOpcode::kWhile || opcode == HloOpcode::kConditional || opcode == HloOpcode::kCall;
}

std::optional<DumpSourceLocation> SourceOf(const HloInstruction& instruction, std::string via = "") {
  std::optional<SourceFrame> frame = InstructionSource(instruction);
  if (!frame || frame->file.empty()) return std::nullopt;
  return DumpSourceLocation{frame->file, frame->line, frame->function, std::move(via)};
}

// The nearest instruction with a source through users (what the value is for), else through
// operands (what it is made of), breadth first and bounded: how far a copy or a wrapper XLA
// added without metadata is from the code that asked for it.
std::optional<DumpSourceLocation> NearestSource(const HloInstruction& start) {
  constexpr size_t kMaxVisited = 256;
  for (bool users : {true, false}) {
    std::vector<const HloInstruction*> queue{&start};
    std::set<const HloInstruction*> seen{&start};
    for (size_t i = 0; i < queue.size() && seen.size() < kMaxVisited; ++i) {
      const std::vector<HloInstruction*>& next = users ? queue[i]->users() : queue[i]->operands();
      for (const HloInstruction* neighbour : next) {
        if (!seen.insert(neighbour).second) continue;
        std::optional<DumpSourceLocation> source =
            SourceOf(*neighbour, (users ? "user " : "operand ") + neighbour->name());
        if (source) return source;
        queue.push_back(neighbour);
      }
    }
  }
  return std::nullopt;
}

void Collect(const HloComputation& computation, std::set<const HloComputation*>& seen,
             std::vector<DerivedKernel>& kernels) {
  if (!seen.insert(&computation).second) return;
  for (const HloInstruction* instruction : computation.MakeInstructionPostOrder()) {
    const HloOpcode opcode = instruction->opcode();
    if (RunsNoCode(opcode)) continue;
    DerivedKernel derived;
    ManifestKernel& kernel = derived.kernel;
    kernel.name = instruction->name();
    kernel.hlo_instruction = instruction->name();
    derived.opcode = std::string(HloOpcodeString(opcode));
    if (!instruction->metadata.op_name.empty()) kernel.op_names.push_back(instruction->metadata.op_name);
    derived.source = SourceOf(*instruction);
    if (opcode == HloOpcode::kFusion) {
      if (instruction->fusion_kind) kernel.fusion_kind = std::string(FusionKindString(*instruction->fusion_kind));
      if (const HloComputation* fused = instruction->fused_computation()) {
        kernel.fusion_computation = fused->name();
        std::set<std::string> names(kernel.op_names.begin(), kernel.op_names.end());
        for (const HloInstruction* inner : fused->MakeInstructionPostOrder()) {
          const std::string& op_name = inner->metadata.op_name;
          if (!op_name.empty() && names.insert(op_name).second) kernel.op_names.push_back(op_name);
          if (!derived.source) derived.source = SourceOf(*inner, "fused instruction " + inner->name());
        }
      }
    }
    if (!derived.source) derived.source = NearestSource(*instruction);
    kernels.push_back(std::move(derived));
    if (RunsComputations(opcode)) {
      for (const HloComputation* called : instruction->called_computations()) Collect(*called, seen, kernels);
    }
  }
}

}  // namespace

StatusOr<std::vector<DerivedKernel>> DeriveKernelsFromHlo(std::string_view hlo_text, const std::string& file_name) {
  ParseOptions options;
  options.verify = false;  // the kernels of a module XLA compiled, whatever our verifier thinks
  options.filename = file_name;
  StatusOr<std::unique_ptr<HloModule>> module = ParseHloModule(hlo_text, options);
  if (!module.ok()) return module.status();
  std::vector<DerivedKernel> kernels;
  if ((*module)->entry_computation() == nullptr) return kernels;
  std::set<const HloComputation*> seen;
  Collect(*(*module)->entry_computation(), seen, kernels);
  return kernels;
}

}  // namespace xlens
