#include "compiler/runtime/cpu_compiler.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Host.h>

#include "compiler/codegen/cpu/cpu_streaming_store.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/codegen/sort_comparator.h"
#include "compiler/codegen/planted_kernel_fault.h"
#include "compiler/hlo/annotation_custom_calls.h"
#include "compiler/hlo/bounded_dynamic_shapes.h"
#include "compiler/hlo/canonical_text.h"
#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/custom_call_targets.h"
#include "compiler/hlo/hlo_cost_analysis.h"
#include "compiler/hlo/stack_frames.h"
#include "compiler/runtime/cholesky_thunk.h"
#include "compiler/runtime/collective_thunk.h"
#include "compiler/runtime/control_flow_thunks.h"
#include "compiler/runtime/dynamic_update_slice_thunk.h"
#include "compiler/runtime/fft_thunk.h"
#include "compiler/runtime/lapack_thunk.h"
#include "compiler/runtime/library_thunks.h"
#include "compiler/runtime/measured_choice.h"
#include "compiler/runtime/onednn_thunks.h"
#include "compiler/runtime/triangular_solve_thunk.h"
#include "compiler/support/large_allocation.h"

namespace xlens::runtime {

// Instructions that run as a call of a library, as in XLA's CPU runtime (fft_thunk.h,
// cholesky_thunk.h), never as a generated kernel.
static bool IsLibraryCall(const HloInstruction& hlo) {
  return hlo.opcode() == HloOpcode::kFft || hlo.opcode() == HloOpcode::kCholesky ||
         hlo.opcode() == HloOpcode::kTriangularSolve;
}

namespace {

// What a CPU program cannot hold, refused before any pass fuses it out of sight: transfers
// through a host framework, and the collectives the runtime has no thunk for. (The others run as
// CollectiveThunks between the executables of simulated devices.)
Status CheckRunsOnCpu(const HloModule& module) {
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* hlo : computation->instructions()) {
      switch (hlo->opcode()) {
        case HloOpcode::kRaggedAllToAll:
          return Error(fmt::format("{}: {} is not supported by the CPU backend's collectives",
                                   hlo->name(), HloOpcodeString(hlo->opcode())));
        case HloOpcode::kSend: case HloOpcode::kSendDone: case HloOpcode::kRecv:
        case HloOpcode::kRecvDone: case HloOpcode::kInfeed: case HloOpcode::kOutfeed:
          // XLA:CPU refuses them too ("HLO opcode `send` is not supported by XLA:CPU ThunkEmitter").
          return Error(fmt::format("{}: {} moves data to or from the host program through a "
                                   "framework's transfer handler, which a module run on its own "
                                   "does not have; XLA:CPU cannot run it either",
                                   hlo->name(), HloOpcodeString(hlo->opcode())));
        default:
          break;
      }
    }
  }
  return OkStatus();
}

// Control flow reads its operands where buffer assignment put them in the arena (a while's or
// conditional's computations share the parameter's allocation, not the entry frame's slot), so
// an argument read in place would leave them reading the parameter's stale home. Only a module
// without control flow borrows its arguments.
bool MayBorrowArguments(const HloModule& module) {
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* instruction : computation->instructions()) {
      const HloOpcode op = instruction->opcode();
      if (op == HloOpcode::kWhile || op == HloOpcode::kConditional || op == HloOpcode::kCall) {
        return false;
      }
    }
  }
  return true;
}

// What decides the code of `hlo`'s kernel: its canonical text (the fused computation up to
// names: opcodes, shapes with layouts, attributes, constants' values, operand order; its operand
// and result shapes) and the options it is emitted with. Nullopt: never shared (a constant
// whose value the text does not hold).
std::optional<std::string> KernelReuseKey(const HloInstruction& hlo,
                                          const codegen::KernelOptions& options) {
  std::optional<std::string> text = CanonicalInstructionText(hlo);
  if (!text) return std::nullopt;
  return fmt::format("streaming_store_bytes={}\n{}", options.cpu_streaming_store_bytes, *text);
}

// A row fusion placed over an operand (BufferAssignmentOptions::in_place_row_fusions) reads that
// operand through reductions: its kernel must complete them before it writes over the operand.
Status CheckInPlaceReductions(const HloInstruction& hlo, const codegen::KernelSpec& spec,
                              const BufferAssignment* assignment) {
  if (assignment == nullptr || spec.reduces_before_writing || hlo.opcode() != HloOpcode::kFusion ||
      hlo.fusion_kind != FusionKind::kInput) {
    return OkStatus();
  }
  auto out = assignment->GetSlice(hlo);
  if (!out.ok()) return OkStatus();
  for (const HloInstruction* operand : hlo.operands()) {
    auto in = assignment->GetSlice(*operand);
    if (in.ok() && in->allocation == out->allocation && in->offset == out->offset) {
      return Error(fmt::format("{}: written over its operand {}, whose reductions its kernel does not "
                               "complete before writing",
                               hlo.name(), operand->name()));
    }
  }
  return OkStatus();
}

// Whether the planted fault (planted_kernel_fault.h) may name `hlo`'s kernel, by the
// instruction's name or a function named after it: that kernel is its own, neither reused nor
// lent, so that the fault stays in the one instruction the flag names.
bool MayBePlanted(std::string_view planted, const HloInstruction& hlo) {
  return !planted.empty() &&
         (planted == hlo.name() || planted.starts_with(codegen::SanitizeName(hlo.name())));
}

}  // namespace

class ExecutableBuilder {
 public:
  ExecutableBuilder(std::unique_ptr<HloModule> module, const CompileOptions& options)
      : options_(options) {
    exe_.reset(new Executable());
    exe_->module_ = std::move(module);
  }

  StatusOr<std::unique_ptr<Executable>> Build();

 private:
  // Pass A: code for every instruction of `computation` and of the computations it calls.
  Status EmitComputation(const HloComputation& computation,
                         const std::vector<const HloInstruction*>& order);
  Status PlanNested(const HloComputation& computation);
  // Pass B: the thunks of a computation over `plan`.
  StatusOr<ThunkSequence> BuildThunks(const HloComputation& computation, const FramePlan& plan,
                                      const std::vector<const HloInstruction*>& order,
                                      std::vector<char*>& frame);
  StatusOr<NestedComputation> BuildNested(const HloComputation& computation);
  std::vector<char*> MakeFrame(const FramePlan& plan) const;
  // What each thunk's span and profile row show: its kind, the HLO it runs and its cost.
  void AnnotateThunks(const std::vector<const HloInstruction*>& order, ThunkSequence& thunks);

  CompileOptions options_;
  std::unique_ptr<Executable> exe_;
  std::unique_ptr<llvm::LLVMContext> context_ = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> llvm_module_;
  std::map<const HloInstruction*, codegen::KernelSpec> kernels_;
  // The instruction whose kernel each class of identical instructions runs (KernelReuseKey).
  std::map<std::string, const HloInstruction*> kernel_classes_;
  int64_t shared_kernels_ = 0;
  std::map<const HloInstruction*, std::string> comparators_;
  std::map<const HloComputation*, std::unique_ptr<FramePlan>> nested_plans_;
  // The constants and their buffers, written once the thunks say which buffers keep small pages.
  std::vector<std::pair<const HloInstruction*, char*>> constants_;
  std::set<std::string> symbols_;
  int64_t arena_end_ = 0;
  int64_t scratch_bytes_ = 0;
  HloCostAnalysis costs_;
};

Status ExecutableBuilder::EmitComputation(const HloComputation& computation,
                                          const std::vector<const HloInstruction*>& order) {
  for (const HloInstruction* hlo : order) {
    switch (hlo->opcode()) {
      case HloOpcode::kWhile:
        RETURN_IF_ERROR(PlanNested(*hlo->while_condition()));
        RETURN_IF_ERROR(PlanNested(*hlo->while_body()));
        continue;
      case HloOpcode::kConditional:
        for (const HloComputation* branch : hlo->branch_computations()) {
          RETURN_IF_ERROR(PlanNested(*branch));
        }
        continue;
      case HloOpcode::kCall:
        RETURN_IF_ERROR(PlanNested(*hlo->to_apply()));
        continue;
      case HloOpcode::kSort: {
        ASSIGN_OR_RETURN(const std::string name,
                         codegen::EmitSortComparator(*hlo, symbols_, *llvm_module_));
        comparators_[hlo] = name;
        continue;
      }
      case HloOpcode::kCustomCall: {
        const std::string target = hlo->custom_call_target.value_or("");
        if (IsLapackCustomCallTarget(target)) continue;  // a LapackThunk
        const std::string why = WhyCustomCallCannotRunOnCpu(target);
        return Error(fmt::format("{}: custom-call \"{}\" {}", hlo->name(), target,
                                 why.empty() ? "cannot run on the CPU backend" : why));
      }
      default:
        break;
    }
    if (IsCollectiveOpcode(hlo->opcode())) continue;  // a CollectiveThunk
    if (!codegen::IsKernelInstruction(*hlo) || IsLibraryCall(*hlo) || IsEigenDot(*hlo) ||
        IsEigenConvolution(*hlo) || IsOneDnnFusion(*hlo)) {
      continue;
    }
    codegen::KernelOptions kernel_options;
    kernel_options.cpu_streaming_store_bytes =
        options_.cpu_streaming_store_bytes >= 0
            ? options_.cpu_streaming_store_bytes
            : codegen::cpu::StreamingStoreBytesFor(*hlo, exe_->assignment_.get());
    // Identical instructions run one kernel, as XLA's kernel reuse cache does: a transformer's
    // layers, or attention split per batch element, repeat the same fusions, and each copy
    // would cost LLVM the same time again. The thunks keep their own HLO names (profiles,
    // traces, the manifest); the dumped LLVM IR holds the one shared function.
    const std::string& planted = options_.optimize.planted.miscompile_kernel;
    std::optional<std::string> key;
    if (!MayBePlanted(planted, *hlo)) key = KernelReuseKey(*hlo, kernel_options);
    if (key) {
      auto same = kernel_classes_.find(*key);
      if (same != kernel_classes_.end()) {
        RETURN_IF_ERROR(CheckInPlaceReductions(*hlo, kernels_.at(same->second), exe_->assignment_.get()));
        kernels_[hlo] = kernels_.at(same->second);
        ++shared_kernels_;
        continue;
      }
    }
    auto spec = codegen::EmitKernel(*hlo, codegen::UniqueKernelName(hlo->name(), symbols_), *llvm_module_,
                                    codegen::KernelTarget::kCpu, kernel_options);
    if (!spec.ok()) return spec.status().WithContext(hlo->name());
    RETURN_IF_ERROR(CheckInPlaceReductions(*hlo, *spec, exe_->assignment_.get()));
    if (codegen::IsPlantedKernel(planted, *hlo, *spec)) {
      codegen::PlantKernelFault(*hlo, *spec, *llvm_module_);
    }
    scratch_bytes_ = std::max(scratch_bytes_, spec->scratch_bytes);
    kernels_[hlo] = std::move(*spec);
    if (key) kernel_classes_.emplace(std::move(*key), hlo);
  }
  return OkStatus();
}

Status ExecutableBuilder::PlanNested(const HloComputation& computation) {
  if (nested_plans_.count(&computation)) return OkStatus();
  ASSIGN_OR_RETURN(FramePlan plan, FramePlan::ForNested(computation, arena_end_));
  arena_end_ = plan.arena_end();
  nested_plans_[&computation] = std::make_unique<FramePlan>(std::move(plan));
  auto order = computation.MakeInstructionPostOrder();
  return EmitComputation(computation, {order.begin(), order.end()});
}

std::vector<char*> ExecutableBuilder::MakeFrame(const FramePlan& plan) const {
  std::vector<char*> frame(plan.slot_count(), nullptr);
  for (int64_t s = 0; s < plan.slot_count(); ++s) {
    if (plan.slot_offsets()[s] >= 0) frame[s] = exe_->arena_ + plan.slot_offsets()[s];
  }
  return frame;
}

StatusOr<NestedComputation> ExecutableBuilder::BuildNested(const HloComputation& computation) {
  NestedComputation nested{*nested_plans_.at(&computation), {}, {}};
  nested.frame = MakeFrame(nested.plan);
  auto order = computation.MakeInstructionPostOrder();
  ASSIGN_OR_RETURN(nested.thunks, BuildThunks(computation, nested.plan,
                                              {order.begin(), order.end()}, nested.frame));
  return nested;
}

StatusOr<ThunkSequence> ExecutableBuilder::BuildThunks(
    const HloComputation& computation, const FramePlan& plan,
    const std::vector<const HloInstruction*>& order, std::vector<char*>& frame) {
  ThunkSequence thunks;
  // The last library call made, which the loop kernel after it may run in (TakeEpilogue).
  struct {
    OneDnnThunk* thunk = nullptr;
    const HloInstruction* hlo = nullptr;
    std::vector<int64_t> operand_slots;
  } last_call;
  auto sizes_of = [](const HloInstruction* hlo) {
    std::vector<int64_t> sizes;
    hlo->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
      if (s.IsArray()) sizes.push_back(shape_util::ByteSizeOf(s));
    });
    return sizes;
  };
  for (const HloInstruction* hlo : order) {
    const std::string& name = hlo->name();
    switch (hlo->opcode()) {
      case HloOpcode::kConstant: {
        // Constants are written into their buffers once, after every thunk is built (Build): a
        // buffer's first write fixes its page size, and the thunks say which keep small pages.
        const int64_t slot = plan.Slot(hlo);
        if (slot >= 0 && frame[slot] != nullptr) {
          if (hlo->literal().is_elided() || hlo->literal().is_text_only()) {
            return Error(fmt::format("constant {} has no value in the text (elided)", name));
          }
          constants_.emplace_back(hlo, frame[slot]);
        }
        continue;
      }
      case HloOpcode::kWhile: {
        ASSIGN_OR_RETURN(NestedComputation condition, BuildNested(*hlo->while_condition()));
        ASSIGN_OR_RETURN(NestedComputation body, BuildNested(*hlo->while_body()));
        thunks.push_back(std::make_unique<WhileThunk>(
            name, std::move(condition), std::move(body), plan.LeafSlots(hlo->operand(0)),
            plan.LeafSlots(hlo), sizes_of(hlo)));
        continue;
      }
      case HloOpcode::kConditional: {
        std::vector<NestedComputation> branches;
        std::vector<std::vector<int64_t>> operand_slots;
        int64_t i = 1;
        for (const HloComputation* branch : hlo->branch_computations()) {
          ASSIGN_OR_RETURN(NestedComputation nested, BuildNested(*branch));
          branches.push_back(std::move(nested));
          operand_slots.push_back(plan.LeafSlots(hlo->operand(i++)));
        }
        thunks.push_back(std::make_unique<ConditionalThunk>(
            name, plan.Slot(hlo->operand(0)),
            hlo->operand(0)->shape().element_type() == PrimitiveType::PRED, std::move(branches),
            std::move(operand_slots), plan.LeafSlots(hlo), sizes_of(hlo)));
        continue;
      }
      case HloOpcode::kCall: {
        ASSIGN_OR_RETURN(NestedComputation callee, BuildNested(*hlo->to_apply()));
        std::vector<int64_t> operand_slots;
        for (const HloInstruction* operand : hlo->operands()) {
          for (int64_t s : plan.LeafSlots(operand)) operand_slots.push_back(s);
        }
        thunks.push_back(std::make_unique<CallThunk>(name, std::move(callee), operand_slots,
                                                     plan.LeafSlots(hlo), sizes_of(hlo)));
        continue;
      }
      case HloOpcode::kFft: {
        ASSIGN_OR_RETURN(std::unique_ptr<FftThunk> thunk,
                         FftThunk::Create(name, *hlo, plan.Slot(hlo->operand(0)), plan.Slot(hlo)));
        thunks.push_back(std::move(thunk));
        continue;
      }
      case HloOpcode::kCholesky: {
        ASSIGN_OR_RETURN(std::unique_ptr<CholeskyThunk> thunk,
                         CholeskyThunk::Create(name, *hlo, plan.Slot(hlo->operand(0)),
                                               plan.Slot(hlo)));
        thunks.push_back(std::move(thunk));
        continue;
      }
      case HloOpcode::kTriangularSolve: {
        ASSIGN_OR_RETURN(std::unique_ptr<TriangularSolveThunk> thunk,
                         TriangularSolveThunk::Create(name, *hlo, plan.Slot(hlo->operand(0)),
                                                      plan.Slot(hlo->operand(1)), plan.Slot(hlo)));
        thunks.push_back(std::move(thunk));
        continue;
      }
      case HloOpcode::kCustomCall: {
        if (!IsLapackCustomCallTarget(hlo->custom_call_target.value_or(""))) break;
        std::vector<int64_t> operand_slots;
        for (const HloInstruction* operand : hlo->operands()) {
          operand_slots.push_back(plan.Slot(operand));
        }
        ASSIGN_OR_RETURN(std::unique_ptr<LapackThunk> thunk,
                         LapackThunk::Create(name, *hlo, std::move(operand_slots),
                                             plan.LeafSlots(hlo)));
        thunks.push_back(std::move(thunk));
        continue;
      }
      case HloOpcode::kSort: {
        ASSIGN_OR_RETURN(void* fn, exe_->jit_->Lookup(comparators_.at(hlo)));
        std::vector<Shape> shapes, output_shapes;
        std::vector<int64_t> operand_slots;
        for (const HloInstruction* operand : hlo->operands()) {
          shapes.push_back(operand->shape());
          operand_slots.push_back(plan.Slot(operand));
        }
        hlo->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
          output_shapes.push_back(s);
        });
        thunks.push_back(std::make_unique<SortThunk>(
            name, reinterpret_cast<SortThunk::Comparator>(fn), hlo->dimensions(0), shapes,
            operand_slots, plan.LeafSlots(hlo), output_shapes));
        continue;
      }
      default:
        break;
    }
    if (IsCollectiveOpcode(hlo->opcode())) {
      std::vector<std::vector<int64_t>> operand_slots;
      for (const HloInstruction* operand : hlo->operands()) operand_slots.push_back(plan.LeafSlots(operand));
      thunks.push_back(std::make_unique<CollectiveThunk>(name, *hlo, std::move(operand_slots),
                                                         plan.LeafSlots(hlo)));
      continue;
    }
    if (IsOneDnnFusion(*hlo)) {
      std::vector<int64_t> operand_slots;
      for (const HloInstruction* operand : hlo->operands()) operand_slots.push_back(plan.Slot(operand));
      ASSIGN_OR_RETURN(std::unique_ptr<OneDnnThunk> thunk,
                       OneDnnThunk::Create(name, *hlo, operand_slots, plan.Slot(hlo)));
      last_call = {thunk.get(), hlo, std::move(operand_slots)};
      thunks.push_back(std::move(thunk));
      continue;
    }
    if (IsEigenDot(*hlo)) {
      thunks.push_back(std::make_unique<EigenDotThunk>(name, *hlo, plan.Slot(hlo->operand(0)),
                                                       plan.Slot(hlo->operand(1)), plan.Slot(hlo)));
      continue;
    }
    if (IsEigenConvolution(*hlo)) {
      thunks.push_back(std::make_unique<EigenConvolutionThunk>(
          name, *hlo, plan.Slot(hlo->operand(0)), plan.Slot(hlo->operand(1)), plan.Slot(hlo),
          ThreadPool::Default().parallelism()));
      continue;
    }
    if (hlo->opcode() == HloOpcode::kDynamicUpdateSlice) {
      // The update copied into place: a loop writing a row per step costs the row.
      std::vector<int64_t> slots;
      for (const HloInstruction* operand : hlo->operands()) slots.push_back(plan.Slot(operand));
      if (auto thunk = DynamicUpdateSliceThunk::TryCreate(name, *hlo, std::move(slots),
                                                          plan.Slot(hlo))) {
        thunks.push_back(std::move(thunk));
        continue;
      }
    }
    auto kernel = kernels_.find(hlo);
    if (kernel == kernels_.end()) continue;  // an alias or a no-op
    std::vector<KernelThunk::PhaseFn> phases;
    for (const codegen::KernelPhase& phase : kernel->second.phases) {
      ASSIGN_OR_RETURN(void* fn, exe_->jit_->Lookup(phase.function_name));
      phases.push_back(reinterpret_cast<KernelThunk::PhaseFn>(fn));
    }
    std::vector<int64_t> operand_slots;
    for (const HloInstruction* operand : hlo->operands()) {
      for (int64_t s : plan.LeafSlots(operand)) operand_slots.push_back(s);
    }
    for (int64_t s : operand_slots) {
      if (s < 0) return Error(fmt::format("{}: an operand has no buffer", name));
    }
    KernelInfo info{kernel->second.phases.empty() ? "" : kernel->second.phases[0].function_name,
                    name, "", static_cast<int64_t>(kernel->second.phases.size()), 0};
    if (hlo->opcode() == HloOpcode::kFusion && hlo->fusion_kind) {
      static const char* kinds[] = {"kLoop", "kInput", "kOutput", "kCustom"};
      info.fusion_kind = kinds[static_cast<int>(*hlo->fusion_kind)];
    }
    std::vector<std::string> launch;
    for (const auto& p : kernel->second.phases) {
      info.tasks = std::max(info.tasks, p.tasks);
      launch.push_back(fmt::format("{} tasks x {} work{}", p.tasks, p.work_per_task,
                                   p.sequential ? " (sequential)" : ""));
    }
    info.launch = fmt::format("{} phase{}: {}", launch.size(), launch.size() == 1 ? "" : "s",
                              fmt::join(launch, ", "));
    exe_->kernels_.push_back(info);
    auto kernel_thunk = std::make_unique<KernelThunk>(name, kernel->second, std::move(phases), operand_slots,
                                                      plan.LeafSlots(hlo));
    // A loop kernel right after the library call whose result it reads runs on each of the
    // call's parts where it can (part_epilogue.h): the thunk is then the call's.
    if (!thunks.empty() && last_call.thunk != nullptr && thunks.back().get() == last_call.thunk &&
        last_call.thunk->TakeEpilogue(*last_call.hlo, last_call.operand_slots, plan.Slot(last_call.hlo), *hlo,
                                      kernel_thunk)) {
      exe_->kernels_.back().run_by_call = last_call.thunk->hlo_name();
      exe_->kernels_.back().launch += fmt::format(", on each part of {}", last_call.thunk->hlo_name());
      continue;
    }
    thunks.push_back(std::move(kernel_thunk));
  }
  (void)computation;
  AnnotateThunks(order, thunks);
  return thunks;
}

void ExecutableBuilder::AnnotateThunks(const std::vector<const HloInstruction*>& order,
                                       ThunkSequence& thunks) {
  namespace category = profiler::category;
  std::map<std::string_view, const HloInstruction*> by_name;
  for (const HloInstruction* hlo : order) by_name[hlo->name()] = hlo;
  for (auto& thunk : thunks) {
    auto it = by_name.find(thunk->hlo_name());
    if (it == by_name.end()) continue;
    const HloInstruction& hlo = *it->second;
    ThunkTraceInfo info;
    auto span = std::make_shared<profiler::SpanInfo>();
    span->name = hlo.name();
    span->category = category::kThunk;
    info.kind = std::string(HloOpcodeString(hlo.opcode()));
    std::string fusion_kind;
    if (dynamic_cast<const KernelThunk*>(thunk.get()) != nullptr) {
      span->category = category::kCpuKernel;
      if (hlo.opcode() == HloOpcode::kFusion) {
        fusion_kind = std::string(FusionKindString(hlo.fusion_kind.value_or(FusionKind::kLoop)));
        info.kind = fusion_kind + " fusion";
      }
    } else if (dynamic_cast<const CopyThunk*>(thunk.get()) != nullptr) {
      // Copies that layout assignment and copy insertion add are kernels like any other.
      span->category = category::kCpuKernel;
    } else if (const auto* onednn = dynamic_cast<const OneDnnThunk*>(thunk.get())) {
      span->category = category::kLibrary;
      fusion_kind = "kCustom";
      info.kind = "oneDNN " + onednn->description();
    } else if (dynamic_cast<const EigenDotThunk*>(thunk.get()) != nullptr) {
      span->category = category::kLibrary;
      info.kind = "dot (Eigen)";
    } else if (dynamic_cast<const EigenConvolutionThunk*>(thunk.get()) != nullptr) {
      span->category = category::kLibrary;
      info.kind = "convolution (im2col + Eigen)";
    } else if (dynamic_cast<const SortThunk*>(thunk.get()) != nullptr) {
      span->category = category::kLibrary;
      info.kind = "sort";
    } else if (dynamic_cast<const FftThunk*>(thunk.get()) != nullptr) {
      span->category = category::kLibrary;
      info.kind = "fft (Eigen)";
    } else if (dynamic_cast<const DynamicUpdateSliceThunk*>(thunk.get()) != nullptr) {
      span->category = category::kLibrary;
      info.kind = "dynamic-update-slice (copy into place)";
    } else if (dynamic_cast<const CholeskyThunk*>(thunk.get()) != nullptr) {
      span->category = category::kLibrary;
      info.kind = "cholesky (Eigen LLT)";
    } else if (const auto* lapack = dynamic_cast<const LapackThunk*>(thunk.get())) {
      span->category = category::kLibrary;
      info.kind = "lapack " + lapack->routine();
    }
    HloCost cost = costs_.InstructionCost(hlo);
    double flops = cost.flops;
    if (const auto* onednn = dynamic_cast<const OneDnnThunk*>(thunk.get())) {
      // A masked product computes only the outputs read (onednn_thunks.h): rated by those.
      flops *= onednn->ComputedShare();
      // The loop kernel it runs on each part is part of its time (part_epilogue.h).
      if (const KernelThunk* epilogue = onednn->EpilogueKernel();
          epilogue != nullptr && by_name.count(epilogue->hlo_name()) != 0) {
        const HloCost kernel_cost = costs_.InstructionCost(*by_name.at(epilogue->hlo_name()));
        cost += kernel_cost;
        flops += kernel_cost.flops;
      }
    }
    info.bytes_accessed = static_cast<double>(cost.bytes_accessed);
    info.flops = flops;
    info.transcendentals = cost.transcendentals;
    std::vector<profiler::TraceArg>& args = span->args;
    // Every span has the same keys, empty where there is nothing to say (no fusion, no
    // metadata), so a reader links each one to its HLO without guessing from a missing key.
    // op_names is the metadata op_name: the graph ops joined by ";" (fusion_utils.h).
    args.push_back({"hlo_op", hlo.name()});
    args.push_back({"fusion_kind", fusion_kind});
    args.push_back({"op_names", hlo.metadata.op_name});
    // The line of the user's program the kernel came from, and its callers (stack_frames.h).
    std::vector<SourceFrame> stack = KernelStack(hlo);
    info.source = StackSourceLine(stack);
    args.push_back({"source", info.source});
    args.push_back({"stack", stack.size() > 1 ? StackText({stack.begin() + 1, stack.end()}) : std::string()});
    args.push_back({"module", exe_->module_->name()});
    args.push_back({"bytes_accessed", cost.bytes_accessed});
    args.push_back({"flops", static_cast<int64_t>(info.flops)});
    if (cost.transcendentals > 0) {
      args.push_back({"transcendentals", static_cast<int64_t>(cost.transcendentals)});
    }
    if (const auto* kernel = dynamic_cast<const KernelThunk*>(thunk.get());
        kernel != nullptr && !kernel->spec().phases.empty()) {
      args.push_back({"kernel", kernel->spec().phases.front().function_name});
      args.push_back({"phases", static_cast<int64_t>(kernel->spec().phases.size())});
    }
    info.span = std::move(span);
    thunk->set_trace_info(std::move(info));
  }
}

StatusOr<std::unique_ptr<Executable>> ExecutableBuilder::Build() {
  const auto start = std::chrono::steady_clock::now();
  HloModule& module = *exe_->module_;
  profiler::TraceSpan compile_span(fmt::format("compile {}", module.name()),
                                   profiler::category::kCompile);
  compile_span.AddArg("module", module.name());
  compile_span.AddArg("backend", "cpu");
  OptimizeOptions optimize = options_.optimize;
  optimize.backend = Backend::kCpu;
  optimize.end_dump_module = false;
  RETURN_IF_ERROR(CheckRunsOnCpu(module));
  RETURN_IF_ERROR(CheckModuleCollectives(module, options_.topology));
  // Buffers are sized at compile time: a run-time size has nowhere to live. The commands that run
  // modules make bounded ones static first (bounded_dynamic_shapes.h).
  if (HasDynamicShapes(module)) {
    return Error("the module has dynamic shapes, which the CPU backend cannot compile: its "
                 "buffers have static sizes (xlens run runs bounded dynamic dimensions at their "
                 "bounds)");
  }
  // One device runs the global view: sharding annotations are identities (annotation_custom_calls.h).
  RETURN_IF_ERROR(RemoveAnnotationCustomCalls(module).status());
  ASSIGN_OR_RETURN(OptimizeResult optimized, OptimizeHloModule(module, optimize));
  if (!optimized.buffers) return Error("buffer assignment did not run");
  exe_->assignment_ = std::make_unique<BufferAssignment>(std::move(*optimized.buffers));
  optimized.buffers.reset();
  exe_->optimize_result_ = std::move(optimized);
  const BufferAssignment& assignment = *exe_->assignment_;

  // The arena: the entry's allocations first, then nested frames, then kernel scratch.
  std::vector<int64_t> allocation_offsets;
  for (const BufferAllocation& allocation : assignment.allocations()) {
    allocation_offsets.push_back(arena_end_);
    arena_end_ += AlignedSize(allocation.size);
  }
  ASSIGN_OR_RETURN(FramePlan entry_plan, FramePlan::ForEntry(*module.entry_computation(),
                                                              assignment, allocation_offsets));
  exe_->entry_plan_ = std::make_unique<FramePlan>(std::move(entry_plan));
  // The optimized module's control flow is final: whether launches may borrow their arguments
  // is decided here, once, not on every call.
  exe_->may_borrow_arguments_ = MayBorrowArguments(module);

  llvm_module_ = std::make_unique<llvm::Module>(module.name(), *context_);
  // The host triple from the start: the emitters choose CPU code (inline transcendentals) by it.
  llvm_module_->setTargetTriple(llvm::sys::getProcessTriple());
  {
    profiler::TraceSpan span("emit LLVM IR", profiler::category::kCodegen);
    RETURN_IF_ERROR(EmitComputation(*module.entry_computation(), assignment.schedule()));
    span.AddArg("shared_kernels", shared_kernels_);
  }
  exe_->scratch_offset_ = arena_end_;
  arena_end_ += AlignedSize(scratch_bytes_);
  exe_->arena_bytes_ = arena_end_;
  // Every call copies the results into fresh literals: the freed ones are kept for the next.
  RetainFreedLargeBlocks();
  exe_->arena_ = static_cast<char*>(AllocateLarge(static_cast<size_t>(arena_end_)));
  if (exe_->arena_ == nullptr) {
    return Error(fmt::format("cannot allocate {} for the module's buffers",
                             HumanReadableBytes(arena_end_)));
  }

  DumpContext* dump = options_.optimize.dump;
  const bool dumping = dump != nullptr && dump->IsDumped(module);
  codegen::CompiledIr ir;
  {
    // Optimization and machine code, partition by partition on the thread pool (the span keeps
    // its name for the readers of traces).
    profiler::TraceSpan span("LLVM IR optimization", profiler::category::kCodegen);
    span.AddArg("opt_level", options_.opt_level);
    codegen::CpuJitOptions jit_options;
    jit_options.opt_level = options_.opt_level;
    jit_options.persistent_cache_dir = options_.persistent_cache_dir;
    ASSIGN_OR_RETURN(exe_->jit_, codegen::CpuJit::Create(jit_options));
    // The optimization level of each kernel, by what it gains: a kernel that touches little
    // memory and does little arithmetic runs in microseconds whatever LLVM does with it, so it
    // gets O1 (no vectorizer, the cheapest pipeline); the others get the level asked for.
    std::map<std::string, int> levels;
    for (const auto& [hlo, spec] : kernels_) {
      const HloCost cost = costs_.InstructionCost(*hlo);
      const bool small = cost.bytes_accessed < codegen::kCpuSmallKernelBytes &&
                         cost.flops < codegen::kCpuSmallKernelFlops;
      const int level = small ? std::min(options_.opt_level, 1) : options_.opt_level;
      for (const codegen::KernelPhase& phase : spec.phases) levels[phase.function_name] = level;
    }
    ASSIGN_OR_RETURN(ir, exe_->jit_->AddModule(
                             std::move(llvm_module_), std::move(context_),
                             dumping || options_.keep_llvm_ir, [&](const llvm::Function& f) {
                               auto it = levels.find(f.getName().str());
                               return it == levels.end() ? options_.opt_level : it->second;
                             }));
    span.AddArg("partitions", static_cast<int64_t>(ir.partitions));
    span.AddArg("cached_partitions", static_cast<int64_t>(ir.cached_partitions));
    for (const std::string& warning : ir.warnings) {
      std::fprintf(stderr, "xlens: %s\n", warning.c_str());
    }
  }

  exe_->frame_ = MakeFrame(*exe_->entry_plan_);
  std::vector<KernelChoiceRecord> kernel_choices;
  {
    // The kernels are machine code already (the span above optimizes and compiles them, in
    // parallel partitions); ORC links their objects when a function is first looked up, which
    // building the thunks does.
    profiler::TraceSpan span("machine code and thunks", profiler::category::kCodegen);
    // Kernels chosen by timing (measured_choice.h) are taken from, and kept in, the persistent
    // cache directory beside the compiled code, and recorded in the dump for replay.
    KernelChoiceScope choices(options_.persistent_cache_dir);
    ASSIGN_OR_RETURN(exe_->thunks_,
                     BuildThunks(*module.entry_computation(), *exe_->entry_plan_,
                                 assignment.schedule(), exe_->frame_));
    kernel_choices = choices.choices();
    std::vector<std::string> warnings = choices.warnings();
    if (!kernel_choices.empty()) {
      if (std::string failed = WriteKernelChoicesDump(); !failed.empty()) warnings.push_back(failed);
    }
    for (const std::string& warning : warnings) std::fprintf(stderr, "xlens: %s\n", warning.c_str());
  }
  // Weights that oneDNN's gemm:jit reads in blocks of columns, their rows a multiple of 4 KiB
  // apart, in a product of few rows (OneDnnThunk::ColumnBlockWeightsSlot), stay on 4 KiB pages
  // (asked before their first touch: parameters and computed weights are written by calls, and
  // constants just below, after the advice, since a range keeps the huge page it was first
  // written on). On the arena's
  // 2 MiB pages the LSTM step's 64x512x2048 product ran at one of two speeds for a process's
  // whole life (the same in windows of 500 runs over 10-50 s): its column parts' best 0.37-0.43
  // ms in some processes, 0.49-0.66 in others. xlens run --trace, 20 processes of 400 runs
  // alternating with the binary before (load 3-5): parts' best 0.37-0.66 ms (9 of 20 above
  // 0.49) -> 0.36-0.45, its 64x256x2048's 0.20-0.37 (9 above 0.26) -> 0.19-0.23, the module's
  // best 0.64-1.20 -> 0.61-0.86 ms and its medians' upper third 1.75-2.20 -> 1.49-1.58 (the
  // middle of them 1.42 -> 1.44). Where the 2 MiB pages happened to be fast, 4 KiB cost a
  // little: 10 other pairs with 1 slow process before, parts' best 0.38-0.49 -> 0.38-0.44 ms,
  // the middle of them 0.40 -> 0.42.
  // The same product in a program of oneDNN's alone (one thread, both column parts, best of
  // 400): weights on 4 KiB pages 0.77-0.90 ms, on a 2 MiB page 0.77-1.38 (6 processes), on a
  // 2 MiB page with 16 floats of padding after each row 0.71-0.80: the rows' stride on
  // contiguous memory is what costs (set conflicts, by all signs). brgemm on weights reordered
  // into its own layout took 0.63-0.72 on either page size.
  for (const std::unique_ptr<Thunk>& thunk : exe_->thunks_) {
    if (arena_end_ < static_cast<int64_t>(kHugePageBytes)) break;  // no huge pages to leave
    const auto* onednn = dynamic_cast<const OneDnnThunk*>(thunk.get());
    const int64_t slot = onednn != nullptr ? onednn->ColumnBlockWeightsSlot() : -1;
    if (slot < 0 || slot >= exe_->entry_plan_->slot_count()) continue;
    const int64_t offset = exe_->entry_plan_->slot_offsets()[slot];
    if (offset >= 0) KeepOnSmallPages(exe_->arena_ + offset, exe_->entry_plan_->slot_sizes()[slot]);
  }
  for (const auto& [constant, buffer] : constants_) {
    CopyToLayout(constant->literal().untyped_data(), constant->shape(), buffer);
  }
  exe_->execute_span_name_ = fmt::format("execute {}", module.name());
  exe_->compile_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - start).count();

  if (options_.keep_llvm_ir) exe_->llvm_ir_ = ir;
  if (dumping) {
    std::vector<std::string> files;
    for (auto [suffix, text] : {std::pair{"ir-no-opt.ll", &ir.ir_no_opt},
                                std::pair{"ir-with-opt.ll", &ir.ir_with_opt}}) {
      std::string file = dump->DumpText(module, suffix, *text);
      if (!file.empty()) files.push_back(file);
    }
    std::string thunks_file = dump->DumpText(module, "thunk_sequence.txt", exe_->ThunkSequenceText());
    if (!thunks_file.empty()) files.push_back(thunks_file);
    // The kernels chosen by timing, in the form --xla_cpu_xlens_load_kernel_choices_from reads
    // (as XLA dumps its autotuner's results), so that a replay runs the same kernels.
    if (!kernel_choices.empty()) {
      std::string choices_file = dump->DumpText(module, "kernel_choices.json", SerializeKernelChoices(kernel_choices));
      if (!choices_file.empty()) files.push_back(choices_file);
    }
    for (const KernelInfo& k : exe_->kernels_) {
      // Merged with what the pipeline recorded for the same instruction (op_names, the pass
      // that made the fusion).
      ManifestKernel kernel;
      kernel.name = k.name;
      kernel.fusion_kind = k.fusion_kind;
      kernel.hlo_instruction = k.hlo_instruction;
      kernel.launch = k.launch;
      kernel.files = files;
      dump->RecordKernel(module, std::move(kernel));
    }
  }
  if (dump != nullptr) dump->EndModule(module);
  return std::move(exe_);
}

StatusOr<std::unique_ptr<Executable>> CompileForCpu(std::unique_ptr<HloModule> module,
                                                    const CompileOptions& options) {
  ExecutableBuilder builder(std::move(module), options);
  return builder.Build();
}

}  // namespace xlens::runtime
