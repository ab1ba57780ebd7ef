#include "compiler/cli/commands.h"
#include "compiler/cli/cli_util.h"

#include <cstdio>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "compiler/hlo/dot_printer.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/npy.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/hlo/verifier.h"
#include "compiler/support/activity.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "compiler/support/watchdog.h"

namespace xlens::cli {

static_assert(kDefaultMaxWork == kDefaultMaxEvaluatorWork);


int RunPrint(const PrintArgs& args) {
  auto module = LoadModule(args.file, args.verify);
  if (!module.ok()) return Fail(module.status());
  std::fputs(PrintModule(**module, PrintOptions{.short_form = args.short_form,
                                                .source_comments = args.source}).c_str(),
             stdout);
  return 0;
}

int RunVerify(const VerifyArgs& args) {
  auto module = LoadModule(args.file, /*verify=*/true);
  if (!module.ok()) return Fail(module.status());
  std::printf("%s: OK: module %s, %lld computations, %lld instructions\n", DisplayPath(args.file).c_str(),
              (*module)->name().c_str(), static_cast<long long>((*module)->computation_count()),
              static_cast<long long>((*module)->instruction_count()));
  return 0;
}

int RunDot(const DotArgs& args) {
  auto module = LoadModule(args.file, /*verify=*/false);
  if (!module.ok()) return Fail(module.status());
  DotOptions options;
  options.center = args.node;
  options.radius = args.radius;
  options.max_nodes = args.max_nodes;
  auto dot = ModuleToDot(**module, options);
  if (!dot.ok()) return Fail(dot.status());
  if (args.output.empty()) {
    std::fputs(dot->c_str(), stdout);
    return 0;
  }
  Status written = WriteFileAtomic(args.output, *dot);
  if (!written.ok()) return Fail(written);
  return 0;
}

int RunEval(const EvalArgs& args) {
  auto module = LoadModule(args.file, /*verify=*/true);
  if (!module.ok()) return Fail(module.status());
  if (Status s = PrepareModuleToRun(**module, args.file, "eval", args.fill_elided_constants, args.seed);
      !s.ok()) {
    return Fail(s);
  }
  auto inputs = LoadInputs(*(*module)->entry_computation(), args.inputs, args.seed);
  if (!inputs.ok()) return Fail(inputs.status());
  ActivityScope activity("evaluating module " + (*module)->name() + " of " + args.file);
  Watchdog watchdog(args.timeout_seconds, "eval");
  watchdog.SetActivity(fmt::format("evaluating module {}", (*module)->name()));
  EvaluatorOptions options{.cancel = watchdog.cancel_flag(), .max_work = args.max_work};
  auto result = EvaluateModule(**module, *inputs, options);
  if (!result.ok() && watchdog.fired()) {
    return Fail(Error(watchdog.StopMessage() + ": " + result.status().message()).WithContext(args.file));
  }
  if (!result.ok()) return Fail(result.status().WithContext(args.file));
  std::vector<const Literal*> leaves;
  CollectLeaves(*result, leaves);
  if (!args.outputs.empty()) {
    Status written = WriteOutputs(args.outputs, leaves);
    if (!written.ok()) return Fail(written);
    return 0;
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    std::printf("out%zu: %s %s\n", i, leaves[i]->shape().ToString(false).c_str(),
                Summarize(*leaves[i]).c_str());
  }
  return 0;
}

}  // namespace xlens::cli
