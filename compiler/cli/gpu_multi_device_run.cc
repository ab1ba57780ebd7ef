#include "compiler/cli/gpu_multi_device_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <variant>

#include <fmt/format.h>

#include "compiler/runtime/cuda_driver.h"
#include "compiler/runtime/gpu_kernel_resources.h"
#include "compiler/runtime/gpu_launch_analysis.h"
#include "compiler/runtime/gpu_multi_device_executable.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "compiler/runtime/multi_device_trace.h"
#include "compiler/runtime/nccl_library.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/collective_timeline.h"
#include "profiler/host_tracer.h"
#include "profiler/trace_summary.h"

namespace xlens::cli {

Status CheckGpuDevices(const RunArgs& args, const DeviceTopology& topology) {
  if (args.backend != "gpu") return OkStatus();
  const std::string flags = fmt::format("--backend=gpu --num_replicas={} --num_partitions={}",
                                        topology.num_replicas, topology.num_partitions);
  StatusOr<int> gpus = runtime::CountCudaDevices();
  if (!gpus.ok()) {
    return Error(fmt::format("{}: {} devices need {} GPUs: {} (--backend=gpu-sim runs them on the "
                             "GPU simulator)", flags, topology.num_devices(), topology.num_devices(),
                             gpus.status().message()));
  }
  if (*gpus < topology.num_devices()) {
    return Error(fmt::format("{}: {} devices need {} GPUs, one each (NCCL puts one rank on a GPU), "
                             "but the CUDA driver sees {} (--backend=gpu-sim runs them on the GPU "
                             "simulator)", flags, topology.num_devices(), topology.num_devices(), *gpus));
  }
  if (topology.num_devices() > 1) {
    if (StatusOr<const runtime::NcclLibrary*> nccl = runtime::LoadNccl(); !nccl.ok()) {
      return Error(fmt::format("{}: {}", flags, nccl.status().message()));
    }
  }
  return OkStatus();
}

namespace {

// Stops the trace the caller started, places the devices on it and writes it.
Status WriteDeviceTrace(const RunArgs& args, const DeviceTopology& topology, const Watchdog& watchdog,
                        std::string& report) {
  profiler::Trace trace = profiler::TracerSession::Stop();
  const int64_t devices = runtime::PlaceDevicesOnTimeline(trace, topology);
  // The devices are GPUs here: "simulated GPU device 3 (replica 1, partition 1)".
  const std::string kind = args.backend == "gpu-sim" ? "simulated GPU device" : "GPU device";
  for (profiler::TraceProcess& process : trace.processes) {
    if (process.name.rfind("CPU device", 0) == 0) process.name = kind + process.name.substr(10);
  }
  // Each device's collectives as the timing model prices them over NVLink, beside what they took.
  std::map<int64_t, std::pair<int64_t, int64_t>> modelled;  // device: (modelled, measured) ns
  for (const profiler::TraceEvent& event : trace.events) {
    if (event.category != profiler::category::kCollective) continue;
    for (const profiler::TraceArg& arg : event.args) {
      const int64_t* ns = std::get_if<int64_t>(&arg.value);
      if (arg.key != "modelled_ns" || ns == nullptr) continue;
      modelled[event.pid - profiler::kCpuDevicePidBase].first += *ns;
      modelled[event.pid - profiler::kCpuDevicePidBase].second += event.duration_ns;
    }
  }
  const profiler::CollectiveLinks links = profiler::LinkCollectives(trace);
  trace.metadata.push_back({"devices", devices});
  trace.metadata.push_back({"collective_meetings", links.meetings});
  trace.metadata.push_back({"collective_flows", links.flows});
  trace.metadata.push_back({"device_kind", std::string(args.backend == "gpu-sim" ? "simulated GPU" : "GPU")});
  if (links.incomplete > 0) trace.metadata.push_back({"incomplete_collective_spans", links.incomplete});
  MarkStopped(trace, watchdog);
  RETURN_IF_ERROR(profiler::WriteChromeTrace(trace, args.trace));
  report += profiler::SummarizeDeviceCollectives(trace);
  for (const auto& [device, ns] : modelled) {
    report += fmt::format("device {}: collectives modelled at {:.1f} us over NVLink ({}), {:.1f} us here\n",
                          device, ns.first / 1e3, args.gpu_target, ns.second / 1e3);
  }
  std::fprintf(stderr, "xlens run: wrote %zu trace events on %lld devices to %s\n", trace.events.size(),
               static_cast<long long>(topology.num_devices()), args.trace.c_str());
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<Literal>> RunOnGpuDevices(const RunArgs& args, tools::FlagsSetup& setup,
                                               const HloModule& module, const DeviceTopology& topology,
                                               const std::vector<std::vector<Literal>>& arguments,
                                               const MultiDeviceOptions& multi, Watchdog& watchdog,
                                               std::string& report) {
  const bool simulated = args.backend == "gpu-sim";
  ASSIGN_OR_RETURN(runtime::GpuTarget target, runtime::GpuTargetByName(args.gpu_target));
  if (args.gpu_sim_analysis && !simulated) {
    return Error("--gpu_sim_analysis: the analysis needs --backend=gpu-sim (a real GPU is measured with "
                 "--trace, and Nsight Compute)");
  }
  if (setup.debug.xla_hlo_profile) {
    std::fprintf(stderr, "xlens run: --xla_hlo_profile: no per-HLO profile on several GPU devices "
                         "yet; --trace records every device's kernels and collectives\n");
  }
  runtime::GpuDeviceOpener open = [&](int64_t device) -> StatusOr<std::unique_ptr<runtime::GpuDevice>> {
    if (!simulated) return runtime::OpenCudaDevice(static_cast<int>(device));
    runtime::GpuSimOptions options;
    options.race_check = args.gpu_sim_race_check;
    options.opt_level = setup.opt_level;
    // PTX (for ptxas's register counts in the analysis) needs the CUDA toolkit.
    options.want_ptx = args.gpu_sim_analysis && !runtime::FindPtxas().empty();
    ASSIGN_OR_RETURN(std::unique_ptr<runtime::GpuSimDevice> sim, runtime::OpenSimulatedGpuDevice(options));
    return std::unique_ptr<runtime::GpuDevice>(std::move(sim));
  };
  const char* kind = simulated ? "simulated GPUs" : "GPUs";
  watchdog.SetActivity(fmt::format("compiling module {} for {} {}", module.name(), topology.num_devices(), kind));
  runtime::GpuCompileOptions options;
  options.optimize = setup.optimize;
  options.nvptx.opt_level = setup.opt_level;
  ASSIGN_OR_RETURN(auto executable,
                   runtime::GpuMultiDeviceExecutable::Compile(module, topology, options, open, &target));
  watchdog.SetActivity(fmt::format("running module {} on {} {}", module.name(), topology.num_devices(), kind));
  StatusOr<std::vector<Literal>> results = Error("not run");
  std::vector<double> run_ms;
  for (int i = 0; i < args.iterations + (args.iterations > 1 ? 1 : 0); ++i) {
    const auto start = std::chrono::steady_clock::now();
    results = executable->Execute(arguments, multi, watchdog.cancel_flag());
    if (!results.ok()) return results.status();
    if (args.iterations > 1 && i == 0) continue;  // untimed: the first touch of every buffer
    run_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(run_ms.begin(), run_ms.end());
  report = fmt::format("compiled {} executables for {} in {:.1f} ms; run median {:.3f} ms over {} "
                       "iteration{} on {} {} ({} replicas x {} partitions){}\n",
                       topology.num_devices(), executable->executable(0).module().name(),
                       executable->compile_ns() / 1e6, run_ms[run_ms.size() / 2], args.iterations,
                       args.iterations == 1 ? "" : "s", topology.num_devices(), kind,
                       topology.num_replicas, topology.num_partitions,
                       simulated ? "" : (executable->uses_nccl() ? ", collectives through NCCL" : ""));
  if (profiler::TracerSession::running()) RETURN_IF_ERROR(WriteDeviceTrace(args, topology, watchdog, report));
  if (args.gpu_sim_analysis) {
    // One more run, observed: each device's kernels predicted on the target and its collectives
    // modelled over NVLink, the step a board of such GPUs would take.
    watchdog.SetActivity(fmt::format("analysing module {} on {} simulated GPUs", module.name(),
                                     topology.num_devices()));
    ASSIGN_OR_RETURN(std::vector<runtime::GpuSimAnalysis> analyses,
                     executable->AnalyseRun(multi, watchdog.cancel_flag(), args.gpu_sim_sample_blocks));
    report += "device 0:\n";
    report += runtime::FormatGpuLaunchAnalyses(analyses[0].launches, target, analyses[0].resources_source);
    report += fmt::format("each device's step predicted for {} ({}); collectives modelled over NVLink at "
                          "{:.0f} GB/s bus bandwidth and {:.1f} us a ring step (assumed):\n",
                          target.name, target.description, target.nvlink_bus_gbps,
                          target.collective_step_ns / 1e3);
    for (int64_t d = 0; d < topology.num_devices(); ++d) {
      double kernels_ns = 0;
      for (const runtime::GpuLaunchAnalysis& launch : analyses[static_cast<size_t>(d)].launches) {
        kernels_ns += launch.prediction.total_ns;
      }
      const runtime::GpuExecutable& exe = executable->executable(d);
      const double collectives_ns = exe.last_run_modelled_collective_ns();
      report += fmt::format("  device {}: {} launches {:.2f} us + {} collectives {:.2f} us = {:.2f} us\n", d,
                            analyses[static_cast<size_t>(d)].launches.size(), kernels_ns / 1e3,
                            exe.last_run_collectives(), collectives_ns / 1e3, (kernels_ns + collectives_ns) / 1e3);
    }
  }
  return results;
}

}  // namespace xlens::cli
