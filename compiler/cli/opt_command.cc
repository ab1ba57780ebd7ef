// `xlens opt`: runs a backend's HLO pipeline (or a list of passes) on a module and prints the
// result, like XLA's hlo-opt. Dump flags (--xla_dump_to=DIR ...) work on its command line and in
// XLA_FLAGS.
#include <cstdio>

#include <fmt/format.h>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/passes/hlo_optimizer.h"
#include "compiler/passes/spmd_partitioner.h"
#include "compiler/support/file_io.h"
#include "dump/flags.h"

namespace xlens::cli {

namespace {

std::vector<std::string> SplitCommaList(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    std::string item = list.substr(start, end == std::string::npos ? end : end - start);
    if (!item.empty()) out.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// Runs spmd-partitioning alone on `file` and prints its decisions, one line each.
int ExplainSpmd(const std::string& file) {
  auto text = ReadFile(file);
  if (!text.ok()) return Fail(text.status());
  auto module = ParseHloModule(*text, ParseOptions{.verify = true, .filename = file});
  if (!module.ok()) return Fail(module.status());
  SpmdPartitioner partitioner;
  auto changed = partitioner.Run(**module);
  if (!changed.ok()) return Fail(changed.status().WithContext(file));
  if (!*changed) {
    std::printf("%s: one partition (num_partitions in the header is absent or 1): nothing to partition\n",
                file.c_str());
    return 0;
  }
  for (const std::string& d : partitioner.decisions()) std::printf("%s\n", d.c_str());
  return 0;
}

}  // namespace

int RunOpt(const OptArgs& args) {
  if (args.list_passes) {
    for (Backend backend : {Backend::kCpu, Backend::kGpu}) {
      std::printf("%s pipeline:\n", std::string(BackendName(backend)).c_str());
      auto pipeline = MakeHloPipeline(backend);
      for (const auto& stage : pipeline->passes()) {
        const auto* stage_pipeline = static_cast<const HloPassPipeline*>(stage.get());
        std::printf("  %-24s %s\n", std::string(stage->name()).c_str(),
                    fmt::format("{}", fmt::join(stage_pipeline->LeafPassNames(), ", ")).c_str());
      }
    }
    return 0;
  }
  if (args.file.empty()) return Fail(Error("opt: a module file is required (or --list-passes)"));

  if (args.explain_spmd) return ExplainSpmd(args.file);

  FlagsSetup setup;
  if (Status s = SetUpFromFlags(args.extra_flags, "opt", setup); !s.ok()) return Fail(s);
  OptimizeOptions& options = setup.optimize;
  if (args.backend == "cpu") {
    options.backend = Backend::kCpu;
  } else if (args.backend == "gpu" || args.backend == "gpu-sim") {
    options.backend = Backend::kGpu;
  } else {
    return Fail(Error(fmt::format("--backend: expected cpu, gpu or gpu-sim, found '{}'", args.backend)));
  }
  options.only_passes = SplitCommaList(args.passes);
  if (Status names = CheckPassNames(options.only_passes, "--passes"); !names.ok()) return Fail(names);
  options.verify_each_pass = args.verify_each_pass;
  options.check_changes = args.verify_each_pass;

  auto text = ReadFile(args.file);
  if (!text.ok()) return Fail(text.status());
  auto module = ParseHloModule(*text, ParseOptions{.verify = true, .filename = args.file});
  if (!module.ok()) return Fail(module.status());

  std::optional<DumpContext>& dump = setup.dump;

  auto result = OptimizeHloModule(**module, options);
  if (!result.ok()) return Fail(result.status().WithContext(args.file));

  if (args.explain_fusion) {
    for (const FusionDecision& d : result->fusion_decisions) std::printf("%s\n", d.ToString().c_str());
  } else if (options.dump == nullptr || !dump->dumping_to_stdout()) {
    std::fputs(PrintModule(**module, PrintOptions{.short_form = args.short_form}).c_str(), stdout);
  }
  int64_t changed = 0;
  for (const PassEvent& e : result->events) changed += e.changed;
  if (args.pass_timing) {
    for (const PassEvent& e : result->events) {
      std::fprintf(stderr, "  %04lld %-28s %-26s %9.3f ms%s\n", static_cast<long long>(e.step),
                   e.pipeline.c_str(), e.pass.c_str(), e.wall_ns / 1e6, e.changed ? "  changed" : "");
    }
  }
  std::fprintf(stderr, "xlens opt: %s pipeline: %zu passes ran, %lld changed the module; kernels %lld -> %lld; %.1f ms\n",
               std::string(BackendName(options.backend)).c_str(), result->events.size(),
               static_cast<long long>(changed), static_cast<long long>(result->kernels_before),
               static_cast<long long>(result->kernels_after), result->wall_ns / 1e6);
  if (result->buffers) {
    std::fprintf(stderr, "xlens opt: buffers: %s allocated, peak live %s (all buffers together: %s)\n",
                 HumanReadableBytes(result->buffers->total_allocated_bytes()).c_str(),
                 HumanReadableBytes(result->buffers->peak_live_bytes()).c_str(),
                 HumanReadableBytes(result->buffers->sum_of_buffer_sizes()).c_str());
  }
  if (dump && dump->enabled() && !dump->dumping_to_stdout()) {
    dump->FlushManifest();
    std::fprintf(stderr, "xlens opt: %s\n", dump->Summary().c_str());
  }
  for (const std::string& w : result->warnings) std::fprintf(stderr, "xlens opt: warning: %s\n", w.c_str());
  return 0;
}

int RunFlags() {
  std::fputs(FlagsHelp().c_str(), stdout);
  return 0;
}

}  // namespace xlens::cli
