#include "compiler/runtime/gpu_executable.h"

#include <atomic>
#include <chrono>

#include <fmt/format.h>

#include "compiler/hlo/hlo_cost_analysis.h"
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
  int64_t scratch = 0;
  for (const auto& [hlo, spec] : exe->compiled_.specs) scratch = std::max(scratch, spec.scratch_bytes);
  exe->scratch_offset_ = arena_bytes;
  arena_bytes += AlignedSize(scratch);

  HloCostAnalysis costs;
  for (const HloInstruction* hlo : assignment.schedule()) {
    auto spec = exe->compiled_.specs.find(hlo);
    if (spec == exe->compiled_.specs.end()) {
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
      for (int64_t s : exe->plan_->LeafSlots(operand)) slots.push_back(s);
    }
    for (int64_t s : exe->plan_->LeafSlots(hlo)) slots.push_back(s);
    // The same keys on every launch, empty for a non-fusion or an instruction without metadata.
    std::vector<profiler::TraceArg> args = {{"hlo_op", hlo->name()}};
    args.push_back({"fusion_kind", hlo->opcode() == HloOpcode::kFusion
                                       ? std::string(FusionKindString(
                                             hlo->fusion_kind.value_or(FusionKind::kLoop)))
                                       : std::string()});
    args.push_back({"op_names", hlo->metadata.op_name});
    args.push_back({"module", optimized.name()});
    // A multi-phase kernel's cost goes with its first phase.
    HloCost cost = costs.InstructionCost(*hlo);
    // A plain dot on a real device: one cuBLAS call instead of our GEMM's phases.
    if (auto gemm = PlanCublasGemm(*hlo, device); gemm.ok()) {
      auto span = std::make_shared<profiler::SpanInfo>();
      span->name = hlo->name();
      span->category = profiler::category::kThunk;
      span->args = args;
      span->args.push_back({"bytes_accessed", cost.bytes_accessed});
      span->args.push_back({"flops", static_cast<int64_t>(cost.flops)});
      span->args.push_back({"kernel", std::string("cublasSgemm_v2")});
      exe->launches_.push_back({"cublasSgemm_v2", hlo->name(), {1, 1}, slots, std::move(span), "cublas", *gemm});
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
      exe->launches_.push_back({phase.function_name, hlo->name(),
                                {phase.blocks, phase.threads_per_block}, slots, std::move(span)});
    }
  }

  ASSIGN_OR_RETURN(exe->arena_, device.Allocate(arena_bytes));
  ASSIGN_OR_RETURN(exe->module_, device.LoadModule({exe->compiled_.ptx, exe->compiled_.nvvm_ir}));
  for (const HloInstruction* hlo : optimized.entry_computation()->instructions()) {
    if (hlo->opcode() != HloOpcode::kConstant) continue;
    const int64_t slot = exe->plan_->Slot(hlo);
    if (slot < 0) continue;
    if (hlo->literal().is_elided() || hlo->literal().is_text_only()) {
      return Error(fmt::format("constant {} has no value in the text (elided)", hlo->name()));
    }
    exe->staging_.resize(shape_util::ByteSizeOf(hlo->shape()));
    CopyToLayout(hlo->literal().untyped_data(), hlo->shape(), reinterpret_cast<char*>(exe->staging_.data()));
    RETURN_IF_ERROR(device.CopyToDevice(exe->SlotPointer(slot), exe->staging_.data(), exe->staging_.size()));
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

Status GpuExecutable::Run(profiler::CuptiCollector* cupti) {
  profiler::TraceSpan span(execute_span_name_, profiler::category::kExecute);
  if (span.active()) {
    span.AddArg("module", compiled_.module->name());
    span.AddArg("run", runs_);
  }
  ++runs_;
  last_run_external_ids_.clear();
  last_run_launch_ns_.clear();
  std::vector<DevicePointer> arguments;
  for (const GpuLaunch& launch : launches_) {
    arguments.clear();
    for (int64_t s : launch.slots) arguments.push_back(SlotPointer(s));
    arguments.push_back(arena_ + static_cast<DevicePointer>(scratch_offset_));
    const uint64_t external_id = g_next_external_id.fetch_add(1, std::memory_order_relaxed);
    profiler::ScopedExternalCorrelation correlation(cupti, external_id);
    const int64_t start = profiler::TracingEnabled() ? profiler::NowNs() : 0;
    last_run_external_ids_.push_back(static_cast<int64_t>(external_id));
    last_run_launch_ns_.push_back(start);
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
  }
  profiler::TraceSpan sync("synchronize", profiler::category::kThunk);
  return device_.Synchronize();
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
