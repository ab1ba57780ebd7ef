#include "compiler/runtime/gpu_sim_analysis.h"

#include <algorithm>

#include <fmt/format.h>

namespace xlens::runtime {

void GpuAnalysisObserver::KernelBegin(const GpuKernelLaunchInfo& launch, int workers) {
  warp_size_ = launch.warp_size > 0 ? launch.warp_size : 32;
  sampled_ = SampledBlocks(launch.blocks, sample_blocks_);
  analysis_ = std::make_unique<GpuMemoryAnalysis>(launch.blocks);
  recorders_.clear();
  recorders_.resize(static_cast<size_t>(std::max(workers, 1)));
  launches_.push_back({launch.kernel, launch.blocks, launch.threads_per_block, launch.shared_memory_bytes, {}});
}

void GpuAnalysisObserver::BlockBegin(int worker, int64_t block) {
  if (worker < 0 || static_cast<size_t>(worker) >= recorders_.size()) return;
  // Blocks outside the sample keep only their footprint, for exact DRAM bytes.
  const bool sampled = std::binary_search(sampled_.begin(), sampled_.end(), block);
  recorders_[worker] = std::make_unique<GpuBlockRecorder>(block, warp_size_, sampled);
  // The simulator runs the IR before the NVPTX back end's load/store vectorizer: merge as it would.
  recorders_[worker]->set_vectorize(true);
}

void GpuAnalysisObserver::Barrier(int worker, int64_t block) {
  if (worker < 0 || static_cast<size_t>(worker) >= recorders_.size()) return;
  if (GpuBlockRecorder* recorder = recorders_[worker].get(); recorder != nullptr && recorder->block() == block) {
    recorder->Flush();
  }
}

void GpuAnalysisObserver::Access(int worker, int64_t block, const GpuMemoryAccess& access) {
  if (worker < 0 || static_cast<size_t>(worker) >= recorders_.size()) return;
  GpuBlockRecorder* recorder = recorders_[worker].get();
  if (recorder == nullptr || recorder->block() != block) return;
  const GpuAccessKind kind = access.atomic  ? GpuAccessKind::kAtomic
                             : access.store ? GpuAccessKind::kStore
                                            : GpuAccessKind::kLoad;
  recorder->Record(access.thread, access.site, access.address, access.bytes, access.space, kind);
}

void GpuAnalysisObserver::BlockEnd(int worker, int64_t block) {
  if (worker < 0 || static_cast<size_t>(worker) >= recorders_.size()) return;
  std::unique_ptr<GpuBlockRecorder> recorder = std::move(recorders_[worker]);
  if (recorder != nullptr && recorder->block() == block && analysis_ != nullptr) analysis_->AddBlock(*recorder);
}

void GpuAnalysisObserver::KernelEnd() {
  if (analysis_ != nullptr && !launches_.empty()) launches_.back().memory = analysis_->Finish();
  analysis_.reset();
  recorders_.clear();
}

namespace {

const profiler::TraceArg* SpanArg(const GpuLaunch& launch, const std::string& key) {
  if (launch.span == nullptr) return nullptr;
  for (const profiler::TraceArg& arg : launch.span->args) {
    if (arg.key == key) return &arg;
  }
  return nullptr;
}

double NumberArg(const GpuLaunch& launch, const std::string& key) {
  const profiler::TraceArg* arg = SpanArg(launch, key);
  if (arg == nullptr) return 0;
  if (const int64_t* i = std::get_if<int64_t>(&arg->value)) return static_cast<double>(*i);
  if (const double* d = std::get_if<double>(&arg->value)) return *d;
  return 0;
}

std::string StringArg(const GpuLaunch& launch, const std::string& key) {
  const profiler::TraceArg* arg = SpanArg(launch, key);
  const std::string* s = arg ? std::get_if<std::string>(&arg->value) : nullptr;
  return s ? *s : "";
}

}  // namespace

StatusOr<GpuSimAnalysis> AnalyseGpuSimRun(GpuExecutable& exe, GpuSimDevice& device,
                                          const GpuTarget& target, int64_t sample_blocks) {
  GpuSimAnalysis out;
  ModuleResources resources;
  if (exe.ptx().empty()) {
    out.resources_source = "nowhere (no PTX without the CUDA toolkit's libdevice: 32 registers assumed)";
  } else {
    auto assembled = KernelResourcesOf(exe.ptx(), device.arch());
    if (assembled.ok()) {
      resources = std::move(*assembled);
    } else {
      resources = EstimateFromPtx(exe.ptx());
      resources.source += fmt::format("; ptxas failed: {}", assembled.status().message());
    }
    out.resources_source = resources.source;
  }

  GpuAnalysisObserver observer(sample_blocks);
  device.SetObserver(&observer);
  Status ran = exe.Run();
  device.SetObserver(nullptr);
  RETURN_IF_ERROR(ran.WithContext("the analysed run"));

  // The launches in the order the run made them (a loop's once per iteration).
  const std::vector<GpuAnalysisObserver::Observed>& observed = observer.launches();
  for (size_t i = 0; i < exe.last_run_launches().size(); ++i) {
    const GpuLaunch& launch = exe.launches()[exe.last_run_launches()[i]];
    GpuLaunchAnalysis a;
    a.kernel = launch.kernel;
    a.hlo_instruction = launch.hlo_instruction;
    a.dims = launch.dims;
    const auto assembled = resources.kernels.find(launch.kernel);
    if (assembled != resources.kernels.end()) a.resources = assembled->second;
    // A launch of no blocks is never observed; the simulator reports the others in order.
    if (i < observed.size() && observed[i].kernel == launch.kernel) {
      a.memory = observed[i].memory;
      // The simulator lays out the shared variables of every kernel of the module side by side, so
      // its block buffer also spans earlier kernels' variables: where the assembler (or the PTX)
      // gave the kernel's own static size, that plus the launch's dynamic bytes is what a GPU
      // allocates.
      a.resources.shared_bytes = assembled != resources.kernels.end()
                                     ? a.resources.shared_bytes + launch.dims.shared_memory_bytes
                                     : observed[i].shared_memory_bytes;
    } else if (launch.dims.blocks > 0) {
      return Error(fmt::format("launch {} ({}) was not observed by the analysis", i, launch.kernel));
    }
    a.flops = NumberArg(launch, "flops");
    if (i < exe.last_run_external_ids().size()) {
      a.external_id = exe.last_run_external_ids()[i];
      a.launch_ns = exe.last_run_launch_ns()[i];
    }
    PredictLaunch(target, a);
    out.launches.push_back(std::move(a));
  }
  return out;
}

std::vector<profiler::PredictedKernel> PredictedKernels(const GpuSimAnalysis& analysis, const GpuTarget& target) {
  std::vector<profiler::PredictedKernel> kernels;
  for (const GpuLaunchAnalysis& a : analysis.launches) {
    kernels.push_back({a.kernel, a.external_id, a.launch_ns, static_cast<int64_t>(a.prediction.total_ns),
                       PredictedSpanArgs(a, target)});
  }
  return kernels;
}

profiler::HloProfile PredictedHloProfile(const GpuSimAnalysis& analysis, const GpuExecutable& exe,
                                         const GpuTarget& target) {
  profiler::HloProfile profile;
  profile.module = exe.module().name();
  profile.runs = 1;
  profile.peak_bandwidth_gbps = target.dram_copy_gbps;
  profile.predicted_for = fmt::format("{} ({})", target.name, target.description);
  for (size_t i = 0; i < analysis.launches.size() && i < exe.last_run_launches().size(); ++i) {
    const GpuLaunchAnalysis& a = analysis.launches[i];
    const GpuLaunch& launch = exe.launches()[exe.last_run_launches()[i]];
    profiler::HloProfileEntry entry;
    // A multi-phase kernel has a row per phase: the phase's function tells them apart.
    entry.name = a.hlo_instruction;
    std::string kind = StringArg(launch, "fusion_kind");
    entry.kind = kind.empty() ? a.kernel : fmt::format("{} fusion, {}", kind, a.kernel);
    entry.total_ns = static_cast<int64_t>(a.prediction.total_ns);
    entry.bytes_accessed = NumberArg(launch, "bytes_accessed");
    entry.flops = a.flops;
    entry.source = StringArg(launch, "source");
    entry.has_gpu_analysis = true;
    entry.gpu = ProfileColumns(a);
    profile.entries.push_back(std::move(entry));
  }
  return profile;
}

}  // namespace xlens::runtime
