// GpuExecutable: a module compiled to PTX and loaded on a GpuDevice, ready to run. One device
// allocation holds every buffer of the buffer assignment and the kernels' scratch; constants are
// copied in once; each run copies the arguments in, launches the kernels in schedule order and
// copies the results out. Control flow (while, conditional, call) runs on the host around the
// kernels of its computations; library calls run on the CPU backend.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/hlo/literal.h"
#include "compiler/runtime/cublas_library.h"
#include "compiler/runtime/frame_plan.h"
#include "compiler/runtime/gpu_collectives.h"
#include "compiler/runtime/gpu_compiler.h"
#include "compiler/runtime/gpu_device.h"
#include "profiler/host_tracer.h"

namespace xlens::profiler {
class CuptiCollector;
}

namespace xlens::runtime {

struct GpuLaunch {
  std::string kernel;
  std::string hlo_instruction;
  LaunchDimensions dims;
  std::vector<int64_t> slots;  // operand leaves, output leaves (the scratch pointer follows)
  // The launch's span: the HLO instruction, with hlo_op, fusion_kind, op_names, module,
  // bytes_accessed, flops and the kernel; LinkExternalIds copies these onto the GPU kernel
  // that CUPTI records for the launch.
  std::shared_ptr<const profiler::SpanInfo> span;
  // "cublas": a cublasSgemm call (`gemm`) instead of our own kernel's launches (PlanCublasGemm).
  std::string library;
  CublasGemm gemm;
};

// A computation that control flow runs (a while's condition or body, a conditional's branch, a
// call's callee): its own frame of slots, packed into the executable's arena, whose parameter
// slots point at the caller's buffers for each run.
struct GpuNestedComputation;

// One step of a computation: a kernel launch, a collective, or control flow around nested
// computations. The host drives control flow: a while reads its predicate back from the device
// after each run of the condition, a conditional its branch index.
struct GpuCommand {
  enum class Kind { kLaunch, kWhile, kConditional, kCall, kCollective };
  Kind kind = Kind::kLaunch;
  std::string hlo_instruction;
  size_t launch = 0;  // kLaunch: the index in launches(); kCollective: in the collectives
  // kWhile: {condition, body}; kConditional: the branches; kCall: {callee}.
  std::vector<std::shared_ptr<GpuNestedComputation>> computations;
  // kWhile: {the initial state}; kConditional: each branch's operand; kCall: {the operands}.
  std::vector<std::vector<int64_t>> operand_slots;
  int64_t index_slot = -1;  // kConditional: the predicate or branch index
  bool index_is_pred = false;
  std::vector<int64_t> output_slots;  // the instruction's own leaves (kWhile: the loop state)
  std::vector<int64_t> sizes;         // bytes of each output leaf
};

struct GpuNestedComputation {
  std::unique_ptr<FramePlan> plan;
  std::vector<GpuCommand> commands;
  std::vector<DevicePointer> frame;  // filled once the arena exists; parameters per run
};

class GpuExecutable {
 public:
  static StatusOr<std::unique_ptr<GpuExecutable>> Create(std::unique_ptr<HloModule> module,
                                                         const GpuCompileOptions& options,
                                                         GpuDevice& device);
  ~GpuExecutable();

  StatusOr<Literal> Execute(std::span<const Literal> arguments);
  Status SetArguments(std::span<const Literal> arguments);
  // Launches every kernel and waits for the device. With a CUPTI collector, each launch is
  // tagged with an external correlation id that its host span carries too, so every GPU kernel
  // links back to the HLO instruction that launched it.
  Status Run(profiler::CuptiCollector* cupti = nullptr);
  StatusOr<Literal> Results();
  // What the module's collectives meet with in the runs that follow (gpu_collectives.h): the
  // other devices, NCCL's communicators, the target of the modelled times. Without a call, the
  // executable is the only device.
  void SetCollectives(const GpuCollectiveContext& context);
  // How many collective instructions the module runs (those inside control flow included).
  size_t num_collectives() const { return collectives_.size(); }
  // Of the last Run: the collectives run and their modelled time between GPUs of an NVLink
  // board, on the target SetCollectives gave (0 without one).
  int64_t last_run_collectives() const { return last_run_collectives_; }
  double last_run_modelled_collective_ns() const { return last_run_modelled_collective_ns_; }

  // Every launch of the module, those inside control flow included, in program order.
  const std::vector<GpuLaunch>& launches() const { return launches_; }
  // Of the last Run, the index in launches() of each launch made, in the order made (a loop's
  // launches once per iteration).
  const std::vector<size_t>& last_run_launches() const { return last_run_launches_; }
  // Of the last Run, per launch: its external correlation id (what its host span carries as
  // "External id") and when it was launched (NowNs; 0 when tracing was off).
  const std::vector<int64_t>& last_run_external_ids() const { return last_run_external_ids_; }
  const std::vector<int64_t>& last_run_launch_ns() const { return last_run_launch_ns_; }
  const HloModule& module() const { return *compiled_.module; }
  const std::string& ptx() const { return compiled_.ptx; }
  int64_t compile_ns() const { return compile_ns_; }

 private:
  GpuExecutable(GpuDevice& device) : device_(device) {}
  DevicePointer SlotPointer(int64_t slot) const;
  // The commands of `computation` over `plan`, in `order`; nested computations are planned from
  // arena offset `arena_end`, which grows past them.
  StatusOr<std::vector<GpuCommand>> BuildCommands(const HloComputation& computation,
                                                  const FramePlan& plan,
                                                  const std::vector<const HloInstruction*>& order,
                                                  int64_t& arena_end);
  StatusOr<std::shared_ptr<GpuNestedComputation>> BuildNested(const HloComputation& computation,
                                                              int64_t& arena_end);
  Status RunCommands(const std::vector<GpuCommand>& commands, const std::vector<DevicePointer>& frame,
                     profiler::CuptiCollector* cupti);
  // Runs `nested` with its parameters at `parameters`.
  Status RunNested(GpuNestedComputation& nested, const std::vector<DevicePointer>& parameters,
                   profiler::CuptiCollector* cupti);
  // Device-to-device copies of whole buffers, through the host: every leaf is read before any is
  // written, so results may be each other's destinations (a loop body that swaps two values).
  Status CopyLeaves(const std::vector<DevicePointer>& from, const std::vector<DevicePointer>& to,
                    const std::vector<int64_t>& sizes);

  GpuDevice& device_;
  GpuModuleHandle module_ = -1;  // this executable's kernels, in device_
  GpuCompilation compiled_;
  std::unique_ptr<FramePlan> plan_;
  DevicePointer arena_ = 0;
  int64_t scratch_offset_ = 0;
  std::vector<GpuLaunch> launches_;
  std::vector<GpuCommand> commands_;  // the entry computation's
  std::vector<DevicePointer> entry_frame_;
  std::vector<std::shared_ptr<GpuNestedComputation>> nested_;  // every nested computation
  std::vector<std::unique_ptr<GpuCollective>> collectives_;
  GpuCollectiveContext collective_context_;
  int64_t last_run_collectives_ = 0;
  double last_run_modelled_collective_ns_ = 0;
  std::vector<size_t> last_run_launches_;
  std::vector<uint8_t> staging_;
  int64_t compile_ns_ = 0;
  std::string execute_span_name_;
  int64_t runs_ = 0;
  std::vector<int64_t> last_run_external_ids_;
  std::vector<int64_t> last_run_launch_ns_;
};

}  // namespace xlens::runtime
