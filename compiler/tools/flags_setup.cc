#include "compiler/tools/flags_setup.h"

#include <fmt/format.h>

#include "compiler/passes/hlo_pipelines.h"
#include "compiler/runtime/measured_choice.h"
#include "compiler/support/terminal_text.h"

namespace xlens::tools {

Status SetUpFromFlags(const std::vector<std::string>& extra_flags, std::string_view command,
                      FlagsSetup& setup) {
  for (const std::string& extra : extra_flags) {
    if (!IsDebugFlag(extra)) {
      return Error(fmt::format("{}: unknown argument '{}' (see xlens {} --help)", command,
                               DisplayText(extra), command));
    }
  }
  ASSIGN_OR_RETURN(setup.debug, DebugOptionsFromEnvironment(extra_flags));
  const DebugOptions& debug = setup.debug;
  RETURN_IF_ERROR(CheckPassNames(debug.xla_disable_hlo_passes, "--xla_disable_hlo_passes"));
  RETURN_IF_ERROR(CheckPassNames(debug.xla_enable_hlo_passes_only, "--xla_enable_hlo_passes_only"));
  setup.optimize.filter.disabled = {debug.xla_disable_hlo_passes.begin(),
                                    debug.xla_disable_hlo_passes.end()};
  setup.optimize.filter.enabled_only = {debug.xla_enable_hlo_passes_only.begin(),
                                        debug.xla_enable_hlo_passes_only.end()};
  if (!debug.xla_test_miscompile_after_pass.empty()) {
    RETURN_IF_ERROR(CheckPassNames({debug.xla_test_miscompile_after_pass},
                                   "--xla_test_miscompile_after_pass"));
  }
  setup.optimize.planted = {debug.xla_test_miscompile_after_pass, debug.xla_test_miscompile_kernel};
  if (!debug.xla_reduce_precision.empty()) {
    ASSIGN_OR_RETURN(setup.optimize.reduce_precision,
                     ParseReducePrecisionFlag(debug.xla_reduce_precision));
  }
  if (debug.xla_backend_optimization_level < 0 || debug.xla_backend_optimization_level > 3) {
    return Error(fmt::format("--xla_backend_optimization_level: expected 0 to 3, found {}",
                             debug.xla_backend_optimization_level));
  }
  setup.opt_level = static_cast<int>(debug.xla_backend_optimization_level);
  setup.optimize.gpu_naive_emitters = debug.xla_gpu_xlens_naive_emitters;
  setup.optimize.gpu_split_launches = debug.xla_gpu_xlens_split_launches;
  // Process-wide, as the thunks that choose are built far from these options.
  runtime::SetKernelChoiceMode(debug.xla_cpu_xlens_measure_kernel_choice ? runtime::KernelChoiceMode::kMeasured
                                                                         : runtime::KernelChoiceMode::kRule);
  runtime::SetTrialBudgetMs(static_cast<double>(debug.xla_cpu_xlens_kernel_choice_trial_budget_ms));
  if (auto loaded = runtime::LoadKernelChoices(debug.xla_cpu_xlens_load_kernel_choices_from); !loaded.ok()) {
    return loaded.status().WithContext("--xla_cpu_xlens_load_kernel_choices_from");
  }
  runtime::SetKernelChoicesDumpPath(debug.xla_cpu_xlens_dump_kernel_choices_to);
  if (!debug.xla_dump_to.empty() || debug.xla_dump_hlo_as_text || debug.xla_dump_hlo_as_dot ||
      debug.xla_dump_hlo_as_html) {
    setup.dump.emplace(debug);
    if (setup.dump->enabled()) setup.optimize.dump = &*setup.dump;
  }
  return OkStatus();
}

}  // namespace xlens::tools
