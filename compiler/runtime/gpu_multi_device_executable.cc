#include "compiler/runtime/gpu_multi_device_executable.h"

#include <chrono>

#include <fmt/format.h>

#include "compiler/hlo/collective_rendezvous.h"
#include "compiler/hlo/parser.h"
#include "compiler/runtime/multi_device_trace.h"
#include "profiler/host_tracer.h"

namespace xlens::runtime {

StatusOr<std::unique_ptr<GpuMultiDeviceExecutable>> GpuMultiDeviceExecutable::Compile(
    const HloModule& module, const DeviceTopology& topology, const GpuCompileOptions& options,
    const GpuDeviceOpener& open, const GpuTarget* target, bool nccl_on_one_gpu) {
  RETURN_IF_ERROR(CheckTopology(topology));
  RETURN_IF_ERROR(CheckModuleCollectives(module, topology));
  auto result = std::unique_ptr<GpuMultiDeviceExecutable>(new GpuMultiDeviceExecutable());
  result->topology_ = topology;
  if (target != nullptr) {
    result->target_ = *target;
    result->has_target_ = true;
  }
  const auto start = std::chrono::steady_clock::now();
  // Each device compiles its own copy (through the text, as the compilation cache copies).
  const std::string text = module.ToString();
  for (int64_t d = 0; d < topology.num_devices(); ++d) {
    auto device = std::make_shared<Device>();
    ASSIGN_OR_RETURN(device->device, open(d));
    ASSIGN_OR_RETURN(std::unique_ptr<HloModule> copy, ParseHloModule(text, ParseOptions{.verify = true}));
    ASSIGN_OR_RETURN(device->executable, GpuExecutable::Create(std::move(copy), options, *device->device));
    result->devices_.push_back(std::move(device));
  }
  if ((topology.num_devices() > 1 || nccl_on_one_gpu) && result->devices_[0]->device->runs_cuda_libraries()) {
    ASSIGN_OR_RETURN(const NcclLibrary* nccl, LoadNccl());
    std::vector<int> gpus;
    for (int64_t d = 0; d < topology.num_devices(); ++d) gpus.push_back(static_cast<int>(d));
    ASSIGN_OR_RETURN(std::unique_ptr<NcclCliques> cliques,
                     NcclCliques::Create(*nccl, result->devices_[0]->executable->module(), topology, gpus,
                                         /*groups_of_one=*/nccl_on_one_gpu));
    result->nccl_ = std::move(cliques);
  }
  result->compile_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - start).count();
  return result;
}

GpuMultiDeviceExecutable::~GpuMultiDeviceExecutable() = default;

StatusOr<std::vector<Literal>> GpuMultiDeviceExecutable::Execute(
    std::span<const std::vector<Literal>> per_device_arguments, const MultiDeviceOptions& options,
    const std::atomic<bool>* cancel) {
  const int64_t devices = topology_.num_devices();
  if (static_cast<int64_t>(per_device_arguments.size()) != devices) {
    return Error(fmt::format("{} devices need {} argument lists, got {}", devices, devices,
                             per_device_arguments.size()));
  }
  // A device left behind (options.abandon_after_seconds) still holds its executable, its device,
  // the communicators and its arguments: the program owns references to all of them.
  auto arguments = std::make_shared<std::vector<std::vector<Literal>>>(per_device_arguments.begin(),
                                                                        per_device_arguments.end());
  std::vector<std::shared_ptr<Device>> held = devices_;
  std::shared_ptr<NcclCliques> nccl = nccl_;
  auto target = has_target_ ? std::make_shared<GpuTarget>(target_) : nullptr;
  return RunOnSimulatedDevices(
      topology_, options, cancel,
      [held, arguments, nccl, target](DeviceCollectives& collectives, const std::atomic<bool>*) -> StatusOr<Literal> {
        const size_t id = static_cast<size_t>(collectives.device_id());
        GpuExecutable& executable = *held[id]->executable;
        // The timeline puts this thread's spans on the device's own track.
        if (profiler::TracingEnabled()) profiler::SetCurrentThreadName(DeviceThreadName(collectives.device_id()));
        executable.SetCollectives({&collectives, target.get(), nccl.get()});
        Status ran = executable.SetArguments((*arguments)[id]);
        if (ran.ok()) ran = executable.Run();
        StatusOr<Literal> result = ran.ok() ? executable.Results() : StatusOr<Literal>(ran);
        // The rendezvous lives only as long as this run.
        executable.SetCollectives({});
        return result;
      });
}

StatusOr<std::vector<GpuSimAnalysis>> GpuMultiDeviceExecutable::AnalyseRun(
    const MultiDeviceOptions& options, const std::atomic<bool>* cancel, int64_t sample_blocks) {
  if (!has_target_) return Error("the analysis needs the target the executable was compiled for");
  for (const auto& device : devices_) {
    if (dynamic_cast<GpuSimDevice*>(device->device.get()) == nullptr) {
      return Error("the analysis needs the GPU simulator");
    }
  }
  // Each device's thread writes its own entry.
  auto analyses = std::make_shared<std::vector<GpuSimAnalysis>>(devices_.size());
  std::vector<std::shared_ptr<Device>> held = devices_;
  auto target = std::make_shared<GpuTarget>(target_);
  auto ran = RunOnSimulatedDevices(
      topology_, options, cancel,
      [held, analyses, target, sample_blocks](DeviceCollectives& collectives, const std::atomic<bool>*) -> StatusOr<Literal> {
        const size_t id = static_cast<size_t>(collectives.device_id());
        GpuExecutable& executable = *held[id]->executable;
        auto& sim = dynamic_cast<GpuSimDevice&>(*held[id]->device);
        executable.SetCollectives({&collectives, target.get(), nullptr});
        StatusOr<GpuSimAnalysis> analysis = AnalyseGpuSimRun(executable, sim, *target, sample_blocks);
        executable.SetCollectives({});
        if (!analysis.ok()) return analysis.status();
        (*analyses)[id] = std::move(*analysis);
        return Literal();
      });
  RETURN_IF_ERROR(ran.status());
  return std::move(*analyses);
}

}  // namespace xlens::runtime
