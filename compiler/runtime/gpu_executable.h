// GpuExecutable: a module compiled to PTX and loaded on a GpuDevice, ready to run. One device
// allocation holds every buffer of the buffer assignment and the kernels' scratch; constants are
// copied in once; each run copies the arguments in, launches the kernels in schedule order and
// copies the results out. Entry computations of kernels only for now: control flow, sort and
// library calls run on the CPU backend.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/hlo/literal.h"
#include "compiler/runtime/cublas_library.h"
#include "compiler/runtime/frame_plan.h"
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

  const std::vector<GpuLaunch>& launches() const { return launches_; }
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

  GpuDevice& device_;
  GpuModuleHandle module_ = -1;  // this executable's kernels, in device_
  GpuCompilation compiled_;
  std::unique_ptr<FramePlan> plan_;
  DevicePointer arena_ = 0;
  int64_t scratch_offset_ = 0;
  std::vector<GpuLaunch> launches_;
  std::vector<uint8_t> staging_;
  int64_t compile_ns_ = 0;
  std::string execute_span_name_;
  int64_t runs_ = 0;
  std::vector<int64_t> last_run_external_ids_;
  std::vector<int64_t> last_run_launch_ns_;
};

}  // namespace xlens::runtime
