#include "compiler/runtime/gpu_executable.h"

#include <atomic>
#include <chrono>

#include <fmt/format.h>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/hlo_cost_analysis.h"
#include "compiler/hlo/stack_frames.h"
#include "compiler/runtime/executable.h"
#include "profiler/cupti_collector.h"
#include "profiler/host_tracer.h"

namespace xlens::runtime {

StatusOr<std::unique_ptr<GpuExecutable>> GpuExecutable::Create(std::unique_ptr<HloModule> module,
                                                               const GpuCompileOptions& options,
                                                               GpuDevice& device) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<GpuExecutable> exe(new GpuExecutable(device));
  GpuCompileOptions for_device = options;
  for_device.nvptx.gpu_arch = device.arch();
  for_device.emit_ptx = device.needs_ptx();
  for_device.keep_nvvm_ir = device.needs_llvm_ir();
  ASSIGN_OR_RETURN(exe->compiled_, CompileForGpuToPtx(std::move(module), for_device));
  const HloModule& optimized = *exe->compiled_.module;
  if (!exe->compiled_.buffers) return Error("buffer assignment did not run");
  const BufferAssignment& assignment = *exe->compiled_.buffers;

  std::vector<int64_t> allocation_offsets;
  int64_t arena_bytes = 0;
  for (const BufferAllocation& allocation : assignment.allocations()) {
    allocation_offsets.push_back(arena_bytes);
    arena_bytes += AlignedSize(allocation.size);
  }
  ASSIGN_OR_RETURN(FramePlan plan, FramePlan::ForEntry(*optimized.entry_computation(), assignment,
                                                       allocation_offsets));
  exe->plan_ = std::make_unique<FramePlan>(std::move(plan));
  ASSIGN_OR_RETURN(exe->commands_, exe->BuildCommands(*optimized.entry_computation(), *exe->plan_,
                                                      assignment.schedule(), arena_bytes));
  int64_t scratch = 0;
  for (const auto& [hlo, spec] : exe->compiled_.specs) scratch = std::max(scratch, spec.scratch_bytes);
  exe->scratch_offset_ = arena_bytes;
  arena_bytes += AlignedSize(scratch);

  ASSIGN_OR_RETURN(exe->arena_, device.Allocate(arena_bytes));
  // A module of collectives alone (a reduce-scatter and nothing else) has no kernel to load.
  if (!exe->compiled_.kernels.empty()) {
    ASSIGN_OR_RETURN(exe->module_, device.LoadModule({exe->compiled_.ptx, exe->compiled_.nvvm_ir}));
  }
  auto frame_of = [&](const FramePlan& p) {
    std::vector<DevicePointer> frame(p.slot_count(), 0);
    for (int64_t s = 0; s < p.slot_count(); ++s) {
      if (p.slot_offsets()[s] >= 0) frame[s] = exe->arena_ + static_cast<DevicePointer>(p.slot_offsets()[s]);
    }
    return frame;
  };
  exe->entry_frame_ = frame_of(*exe->plan_);
  for (const auto& nested : exe->nested_) nested->frame = frame_of(*nested->plan);
  // Constants are written into their buffers once, here (those of nested computations too).
  auto write_constants = [&](const HloComputation& computation, const FramePlan& p,
                             const std::vector<DevicePointer>& frame) -> Status {
    for (const HloInstruction* hlo : computation.instructions()) {
      if (hlo->opcode() != HloOpcode::kConstant) continue;
      const int64_t slot = p.Slot(hlo);
      if (slot < 0 || frame[slot] == 0) continue;
      if (hlo->literal().is_elided() || hlo->literal().is_text_only()) {
        return Error(fmt::format("constant {} has no value in the text (elided)", hlo->name()));
      }
      exe->staging_.resize(shape_util::ByteSizeOf(hlo->shape()));
      CopyToLayout(hlo->literal().untyped_data(), hlo->shape(), reinterpret_cast<char*>(exe->staging_.data()));
      RETURN_IF_ERROR(device.CopyToDevice(frame[slot], exe->staging_.data(), exe->staging_.size()));
    }
    return OkStatus();
  };
  RETURN_IF_ERROR(write_constants(*optimized.entry_computation(), *exe->plan_, exe->entry_frame_));
  for (const auto& nested : exe->nested_) {
    RETURN_IF_ERROR(write_constants(*nested->plan->computation(), *nested->plan, nested->frame));
  }
  exe->compile_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start).count();
  exe->execute_span_name_ = fmt::format("execute {}", optimized.name());
  return exe;
}

GpuExecutable::~GpuExecutable() {
  if (arena_ != 0) (void)device_.Free(arena_);
}

DevicePointer GpuExecutable::SlotPointer(int64_t slot) const {
  return arena_ + static_cast<DevicePointer>(plan_->slot_offsets()[slot]);
}

Status GpuExecutable::SetArguments(std::span<const Literal> arguments) {
  return ForEachArgumentLeaf(*compiled_.module, arguments,
                             [&](const Shape& s, const uint8_t* data, size_t leaf) {
    staging_.resize(shape_util::ByteSizeOf(s));
    CopyToLayout(data, s, reinterpret_cast<char*>(staging_.data()));
    profiler::TraceSpan span("copy to device", profiler::category::kCopy);
    span.AddArg("bytes", static_cast<int64_t>(staging_.size()));
    return device_.CopyToDevice(SlotPointer(plan_->parameter_slots()[leaf]), staging_.data(),
                                staging_.size());
  });
}

namespace {
// External correlation ids, unique in the process so runs and executables never share one.
std::atomic<uint64_t> g_next_external_id{1};
}  // namespace

StatusOr<std::vector<GpuCommand>> GpuExecutable::BuildCommands(
    const HloComputation& computation, const FramePlan& plan,
    const std::vector<const HloInstruction*>& order, int64_t& arena_end) {
  (void)computation;
  std::vector<GpuCommand> commands;
  HloCostAnalysis costs;
  auto sizes_of = [](const HloInstruction* hlo) {
    std::vector<int64_t> sizes;
    hlo->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
      if (s.IsArray()) sizes.push_back(shape_util::ByteSizeOf(s));
    });
    return sizes;
  };
  for (const HloInstruction* hlo : order) {
    GpuCommand command;
    command.hlo_instruction = hlo->name();
    command.output_slots = plan.LeafSlots(hlo);
    command.sizes = sizes_of(hlo);
    switch (hlo->opcode()) {
      case HloOpcode::kWhile: {
        command.kind = GpuCommand::Kind::kWhile;
        for (const HloComputation* c : {hlo->while_condition(), hlo->while_body()}) {
          ASSIGN_OR_RETURN(auto nested, BuildNested(*c, arena_end));
          command.computations.push_back(std::move(nested));
        }
        command.operand_slots.push_back(plan.LeafSlots(hlo->operand(0)));
        commands.push_back(std::move(command));
        continue;
      }
      case HloOpcode::kConditional: {
        command.kind = GpuCommand::Kind::kConditional;
        command.index_slot = plan.Slot(hlo->operand(0));
        command.index_is_pred = hlo->operand(0)->shape().element_type() == PrimitiveType::PRED;
        int64_t i = 1;
        for (const HloComputation* branch : hlo->branch_computations()) {
          ASSIGN_OR_RETURN(auto nested, BuildNested(*branch, arena_end));
          command.computations.push_back(std::move(nested));
          command.operand_slots.push_back(plan.LeafSlots(hlo->operand(i++)));
        }
        commands.push_back(std::move(command));
        continue;
      }
      case HloOpcode::kCall: {
        command.kind = GpuCommand::Kind::kCall;
        ASSIGN_OR_RETURN(auto nested, BuildNested(*hlo->to_apply(), arena_end));
        command.computations.push_back(std::move(nested));
        std::vector<int64_t> operands;
        for (const HloInstruction* operand : hlo->operands()) {
          for (int64_t s : plan.LeafSlots(operand)) operands.push_back(s);
        }
        command.operand_slots.push_back(std::move(operands));
        commands.push_back(std::move(command));
        continue;
      }
      default:
        break;
    }
    if (IsCollectiveOpcode(hlo->opcode())) {
      command.kind = GpuCommand::Kind::kCollective;
      command.launch = collectives_.size();
      std::vector<std::vector<int64_t>> operand_slots;
      for (const HloInstruction* operand : hlo->operands()) operand_slots.push_back(plan.LeafSlots(operand));
      collectives_.push_back(std::make_unique<GpuCollective>(*hlo, std::move(operand_slots), plan.LeafSlots(hlo)));
      commands.push_back(std::move(command));
      continue;
    }
    auto spec = compiled_.specs.find(hlo);
    if (spec == compiled_.specs.end()) {
      switch (hlo->opcode()) {
        case HloOpcode::kParameter: case HloOpcode::kConstant: case HloOpcode::kTuple:
        case HloOpcode::kGetTupleElement: case HloOpcode::kBitcast:
        case HloOpcode::kAddDependency: case HloOpcode::kOptimizationBarrier:
          continue;
        default:
          return Error(fmt::format("{} ({}) runs on the CPU backend only so far", hlo->name(),
                                   HloOpcodeString(hlo->opcode())));
      }
    }
    std::vector<int64_t> slots;
    for (const HloInstruction* operand : hlo->operands()) {
      for (int64_t s : plan.LeafSlots(operand)) slots.push_back(s);
    }
    for (int64_t s : plan.LeafSlots(hlo)) slots.push_back(s);
    // The same keys on every launch, empty for a non-fusion or an instruction without metadata.
    std::vector<profiler::TraceArg> args = {{"hlo_op", hlo->name()}};
    args.push_back({"fusion_kind", hlo->opcode() == HloOpcode::kFusion
                                       ? std::string(FusionKindString(
                                             hlo->fusion_kind.value_or(FusionKind::kLoop)))
                                       : std::string()});
    args.push_back({"op_names", hlo->metadata.op_name});
    // The line of the user's program the kernel came from, and its callers (stack_frames.h).
    std::vector<SourceFrame> stack = KernelStack(*hlo);
    args.push_back({"source", StackSourceLine(stack)});
    args.push_back({"stack", stack.size() > 1 ? StackText({stack.begin() + 1, stack.end()}) : std::string()});
    args.push_back({"module", compiled_.module->name()});
    // A multi-phase kernel's cost goes with its first phase.
    HloCost cost = costs.InstructionCost(*hlo);
    // A plain dot on a real device: one cuBLAS call instead of our GEMM's phases.
    if (auto gemm = PlanCublasGemm(*hlo, device_); gemm.ok()) {
      auto span = std::make_shared<profiler::SpanInfo>();
      span->name = hlo->name();
      span->category = profiler::category::kThunk;
      span->args = args;
      span->args.push_back({"bytes_accessed", cost.bytes_accessed});
      span->args.push_back({"flops", static_cast<int64_t>(cost.flops)});
      span->args.push_back({"kernel", std::string("cublasSgemm_v2")});
      GpuCommand launch;
      launch.hlo_instruction = hlo->name();
      launch.launch = launches_.size();
      commands.push_back(std::move(launch));
      launches_.push_back({"cublasSgemm_v2", hlo->name(), {1, 1}, slots, std::move(span), "cublas", *gemm});
      continue;
    }
    bool first_phase = true;
    for (const codegen::KernelPhase& phase : spec->second.phases) {
      auto span = std::make_shared<profiler::SpanInfo>();
      span->name = hlo->name();
      span->category = profiler::category::kThunk;
      span->args = args;
      span->args.push_back({"bytes_accessed", first_phase ? cost.bytes_accessed : int64_t{0}});
      span->args.push_back({"flops", first_phase ? static_cast<int64_t>(cost.flops) : int64_t{0}});
      span->args.push_back({"kernel", phase.function_name});
      first_phase = false;
      GpuCommand launch;
      launch.hlo_instruction = hlo->name();
      launch.launch = launches_.size();
      commands.push_back(std::move(launch));
      launches_.push_back({phase.function_name, hlo->name(),
                           {phase.blocks, phase.threads_per_block}, slots, std::move(span)});
    }
  }
  return commands;
}

StatusOr<std::shared_ptr<GpuNestedComputation>> GpuExecutable::BuildNested(
    const HloComputation& computation, int64_t& arena_end) {
  auto nested = std::make_shared<GpuNestedComputation>();
  ASSIGN_OR_RETURN(FramePlan plan, FramePlan::ForNested(computation, arena_end));
  arena_end = plan.arena_end();
  nested->plan = std::make_unique<FramePlan>(std::move(plan));
  auto order = computation.MakeInstructionPostOrder();
  ASSIGN_OR_RETURN(nested->commands, BuildCommands(computation, *nested->plan,
                                                   {order.begin(), order.end()}, arena_end));
  nested_.push_back(nested);
  return nested;
}

Status GpuExecutable::CopyLeaves(const std::vector<DevicePointer>& from,
                                 const std::vector<DevicePointer>& to,
                                 const std::vector<int64_t>& sizes) {
  std::vector<std::vector<uint8_t>> staged(from.size());
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] == to[i]) continue;
    staged[i].resize(static_cast<size_t>(sizes[i]));
    RETURN_IF_ERROR(device_.CopyFromDevice(staged[i].data(), from[i], sizes[i]));
  }
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] == to[i]) continue;
    RETURN_IF_ERROR(device_.CopyToDevice(to[i], staged[i].data(), sizes[i]));
  }
  return OkStatus();
}

Status GpuExecutable::RunNested(GpuNestedComputation& nested,
                                const std::vector<DevicePointer>& parameters,
                                profiler::CuptiCollector* cupti) {
  const auto& slots = nested.plan->parameter_slots();
  for (size_t i = 0; i < slots.size() && i < parameters.size(); ++i) nested.frame[slots[i]] = parameters[i];
  return RunCommands(nested.commands, nested.frame, cupti);
}

Status GpuExecutable::RunCommands(const std::vector<GpuCommand>& commands,
                                  const std::vector<DevicePointer>& frame,
                                  profiler::CuptiCollector* cupti) {
  std::vector<DevicePointer> arguments;
  auto pointers = [&](const std::vector<int64_t>& slots) {
    std::vector<DevicePointer> out;
    for (int64_t s : slots) out.push_back(frame[s]);
    return out;
  };
  for (const GpuCommand& command : commands) {
    switch (command.kind) {
      case GpuCommand::Kind::kCollective:
        RETURN_IF_ERROR(collectives_[command.launch]->Run(device_, frame, collective_context_)
                            .WithContext(command.hlo_instruction));
        ++last_run_collectives_;
        last_run_modelled_collective_ns_ += collectives_[command.launch]->modelled_ns();
        break;
      case GpuCommand::Kind::kLaunch: {
        const GpuLaunch& launch = launches_[command.launch];
        arguments.clear();
        for (int64_t s : launch.slots) arguments.push_back(frame[s]);
        arguments.push_back(arena_ + static_cast<DevicePointer>(scratch_offset_));
        const uint64_t external_id = g_next_external_id.fetch_add(1, std::memory_order_relaxed);
        profiler::ScopedExternalCorrelation correlation(cupti, external_id);
        const int64_t start = profiler::TracingEnabled() ? profiler::NowNs() : 0;
        last_run_external_ids_.push_back(static_cast<int64_t>(external_id));
        last_run_launch_ns_.push_back(start);
        last_run_launches_.push_back(command.launch);
        Status launched = OkStatus();
        if (launch.library == "cublas") {
          auto library = LoadCublas();
          launched = library.ok() ? RunCublasGemm(**library, launch.gemm, arguments[0], arguments[1], arguments[2])
                                  : library.status();
        } else {
          launched = device_.Launch(module_, launch.kernel, launch.dims, arguments);
        }
        if (profiler::TracingEnabled()) {
          profiler::SpanArgs launch_span = profiler::RecordSpan(launch.span, start, profiler::NowNs());
          launch_span.AddArg("External id", static_cast<int64_t>(external_id));
        }
        RETURN_IF_ERROR(launched.WithContext(launch.hlo_instruction));
        break;
      }
      case GpuCommand::Kind::kWhile: {
        GpuNestedComputation& condition = *command.computations[0];
        GpuNestedComputation& body = *command.computations[1];
        const std::vector<DevicePointer> state = pointers(command.output_slots);
        RETURN_IF_ERROR(CopyLeaves(pointers(command.operand_slots[0]), state, command.sizes));
        while (true) {
          RETURN_IF_ERROR(RunNested(condition, state, cupti).WithContext(command.hlo_instruction));
          // The predicate comes back to the host, which decides whether the body runs again.
          uint8_t go = 0;
          RETURN_IF_ERROR(device_.CopyFromDevice(&go, condition.frame[condition.plan->root_slots()[0]], 1));
          if (go == 0) break;
          RETURN_IF_ERROR(RunNested(body, state, cupti).WithContext(command.hlo_instruction));
          std::vector<DevicePointer> results;
          for (int64_t s : body.plan->root_slots()) results.push_back(body.frame[s]);
          RETURN_IF_ERROR(CopyLeaves(results, state, command.sizes));
        }
        break;
      }
      case GpuCommand::Kind::kConditional: case GpuCommand::Kind::kCall: {
        int64_t branch = 0;
        if (command.kind == GpuCommand::Kind::kConditional) {
          const int64_t n = static_cast<int64_t>(command.computations.size());
          if (command.index_is_pred) {
            uint8_t pred = 0;
            RETURN_IF_ERROR(device_.CopyFromDevice(&pred, frame[command.index_slot], 1));
            branch = pred != 0 ? 0 : 1;  // {true_computation, false_computation}
          } else {
            int32_t index = 0;
            RETURN_IF_ERROR(device_.CopyFromDevice(&index, frame[command.index_slot], 4));
            branch = index < 0 || index >= n ? n - 1 : index;  // out of range runs the last branch
          }
        }
        GpuNestedComputation& callee = *command.computations[branch];
        RETURN_IF_ERROR(RunNested(callee, pointers(command.operand_slots[branch]), cupti)
                            .WithContext(command.hlo_instruction));
        std::vector<DevicePointer> results;
        for (int64_t s : callee.plan->root_slots()) results.push_back(callee.frame[s]);
        RETURN_IF_ERROR(CopyLeaves(results, pointers(command.output_slots), command.sizes));
        break;
      }
    }
  }
  return OkStatus();
}

Status GpuExecutable::Run(profiler::CuptiCollector* cupti) {
  profiler::TraceSpan span(execute_span_name_, profiler::category::kExecute);
  if (span.active()) {
    span.AddArg("module", compiled_.module->name());
    span.AddArg("run", runs_);
  }
  ++runs_;
  last_run_external_ids_.clear();
  last_run_launch_ns_.clear();
  last_run_launches_.clear();
  last_run_collectives_ = 0;
  last_run_modelled_collective_ns_ = 0;
  RETURN_IF_ERROR(RunCommands(commands_, entry_frame_, cupti));
  profiler::TraceSpan sync("synchronize", profiler::category::kThunk);
  return device_.Synchronize();
}

void GpuExecutable::SetCollectives(const GpuCollectiveContext& context) {
  collective_context_ = context;
  for (const auto& collective : collectives_) collective->Prepare(context);
}

StatusOr<Literal> GpuExecutable::Results() {
  const HloInstruction* root = compiled_.module->entry_computation()->root_instruction();
  Literal result(root->shape());
  size_t leaf_number = 0;
  Status status = OkStatus();
  root->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
    if (!s.IsArray() || !status.ok()) return;
    Literal* leaf = &result;
    for (int64_t i : index) leaf = &leaf->tuple_element(i);
    staging_.resize(shape_util::ByteSizeOf(s));
    profiler::TraceSpan span("copy from device", profiler::category::kCopy);
    span.AddArg("bytes", static_cast<int64_t>(staging_.size()));
    status = device_.CopyFromDevice(staging_.data(), SlotPointer(plan_->root_slots()[leaf_number++]),
                                    staging_.size());
    if (status.ok()) CopyFromLayout(reinterpret_cast<char*>(staging_.data()), s, leaf->untyped_data());
  });
  RETURN_IF_ERROR(status);
  return result;
}

StatusOr<Literal> GpuExecutable::Execute(std::span<const Literal> arguments) {
  RETURN_IF_ERROR(SetArguments(arguments));
  RETURN_IF_ERROR(Run());
  return Results();
}

}  // namespace xlens::runtime
