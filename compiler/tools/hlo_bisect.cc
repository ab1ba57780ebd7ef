#include "compiler/tools/hlo_bisect.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/printer.h"
#include "compiler/hlo/stack_frames.h"

namespace xlens::tools {

std::string_view CulpritKindName(CulpritKind kind) {
  switch (kind) {
    case CulpritKind::kNone: return "none";
    case CulpritKind::kPass: return "pass";
    case CulpritKind::kCodegen: return "codegen";
    case CulpritKind::kPassInvisible: return "pass-invisible";
    case CulpritKind::kCompileError: return "compile-error";
    case CulpritKind::kUnexplained: return "unexplained";
  }
  return "";
}

namespace {

// Evaluates the module after every pass that changed it and remembers the first pass after which
// the result departs from the reference.
class EvaluateAfterEachPass : public PassInstrumentation {
 public:
  EvaluateAfterEachPass(const HloModule& original, std::span<const Literal> arguments,
                        const Literal& reference, const BisectOptions& options, BisectResult& result)
      : arguments_(arguments), reference_(reference), options_(options), result_(result),
        last_text_(PrintModule(original)) {}

  Status AfterPass(const HloModule& module, const PassEvent& event) override {
    if (!event.changed || found_) return OkStatus();
    ++result_.evaluations;
    StatusOr<Literal> value = EvaluateModule(module, arguments_, options_.evaluator);
    if (!value.ok()) {
      // The evaluator cannot run every intermediate form; the pass is judged by the next one.
      if (options_.progress) {
        options_.progress(fmt::format("after {} (step {}): the evaluator cannot run the module: {}",
                                      event.pass, event.step, value.status().message()));
      }
      return OkStatus();
    }
    LiteralDifference errors;
    Status same = ExpectLiteralNear(reference_, *value, options_.tolerance, &errors);
    std::string after = PrintModule(module);
    if (same.ok()) {
      last_text_ = std::move(after);
      return OkStatus();
    }
    found_ = true;
    result_.kind = CulpritKind::kPass;
    result_.pass = event.pass;
    result_.pipeline = event.pipeline;
    result_.step = event.step;
    result_.difference = same.message();
    result_.errors = errors;
    result_.before_text = std::move(last_text_);
    result_.after_text = std::move(after);
    return OkStatus();
  }

  bool found() const { return found_; }

 private:
  std::span<const Literal> arguments_;
  const Literal& reference_;
  const BisectOptions& options_;
  BisectResult& result_;
  std::string last_text_;
  bool found_ = false;
};

// Whether the compiled result agrees with the reference when `disabled` passes do not run.
// A compilation that fails does not agree.
bool AgreesWithout(const HloModule& module, std::span<const Literal> arguments,
                   const Literal& reference, const BisectOptions& options,
                   const std::vector<std::string>& disabled, BisectResult& result) {
  CompileSettings settings = options.compile;
  settings.optimize.filter.disabled.insert(disabled.begin(), disabled.end());
  ++result.compilations;
  StatusOr<CompiledRun> run = CompileAndRun(module, arguments, settings);
  const bool agrees = run.ok() && ExpectLiteralNear(reference, run->result, options.tolerance).ok();
  if (options.progress) {
    options.progress(fmt::format("  with {} disabled: {}", fmt::join(disabled, ","),
                                 !run.ok() ? "does not compile" : agrees ? "agrees" : "departs"));
  }
  return agrees;
}

// The smallest set of `candidates` found whose disabling makes the compiled result agree: halves
// while one half suffices, then drops one pass at a time. Empty when disabling all does not help.
std::vector<std::string> SmallestDisabledSet(const HloModule& module,
                                             std::span<const Literal> arguments,
                                             const Literal& reference,
                                             const BisectOptions& options,
                                             std::vector<std::string> candidates,
                                             BisectResult& result) {
  if (candidates.empty() ||
      !AgreesWithout(module, arguments, reference, options, candidates, result)) {
    return {};
  }
  while (candidates.size() > 1) {
    const size_t half = candidates.size() / 2;
    std::vector<std::string> first(candidates.begin(), candidates.begin() + half);
    std::vector<std::string> second(candidates.begin() + half, candidates.end());
    if (AgreesWithout(module, arguments, reference, options, first, result)) {
      candidates = std::move(first);
    } else if (AgreesWithout(module, arguments, reference, options, second, result)) {
      candidates = std::move(second);
    } else {
      break;
    }
  }
  for (size_t i = 0; candidates.size() > 1 && i < candidates.size();) {
    std::vector<std::string> fewer = candidates;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
    if (AgreesWithout(module, arguments, reference, options, fewer, result)) {
      candidates = std::move(fewer);
    } else {
      ++i;
    }
  }
  return candidates;
}

// One output of the kernel probe: a kernel's result, or one result of a multi-output kernel.
struct ProbeOutput {
  std::string kernel;
  int64_t tuple_index = -1;
};

// With the fusion pass among the passes whose disabling makes the result agree: the smallest
// fuel (number of fusions) at which it departs, the other passes of the set still disabled, and
// the decision that fuel last allowed.
void FindFusionDecision(const HloModule& module, std::span<const Literal> arguments,
                        const Literal& reference, const BisectOptions& options,
                        BisectResult& result) {
  CompileSettings settings = options.compile;
  for (const std::string& pass : result.disabled) {
    if (pass != "fusion") settings.optimize.filter.disabled.insert(pass);
  }
  auto run_with = [&](int64_t fuel) -> StatusOr<CompiledRun> {
    CompileSettings fueled = settings;
    fueled.optimize.fusion_fuel = fuel;
    ++result.compilations;
    return CompileAndRun(module, arguments, fueled);
  };
  auto departs = [&](int64_t fuel) {
    StatusOr<CompiledRun> run = run_with(fuel);
    const bool d = run.ok() && !ExpectLiteralNear(reference, run->result, options.tolerance).ok();
    if (options.progress) {
      options.progress(fmt::format("  fusion limited to {} fusions: {}", fuel,
                                   !run.ok() ? "does not compile" : d ? "departs" : "agrees"));
    }
    return d;
  };
  StatusOr<CompiledRun> unlimited = run_with(-1);
  if (!unlimited.ok()) return;
  int64_t hi = 0;
  for (const FusionDecision& d : unlimited->fusion_decisions) hi += d.fused ? 1 : 0;
  if (hi == 0 || !departs(hi) || departs(0)) return;
  int64_t lo = 1;  // departs(hi), agrees(lo - 1)
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (departs(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  StatusOr<CompiledRun> run = run_with(hi);
  if (!run.ok()) return;
  int64_t seen = 0;
  for (const FusionDecision& d : run->fusion_decisions) {
    if (!d.fused || ++seen < hi) continue;
    result.fusion_fuel = hi;
    result.fusion_decision = fmt::format("fusing %{} into %{} ({}, making %{}), fusion {} of the pass",
                                         d.producer, d.consumer, d.kind, d.fusion, hi);
    return;
  }
}

// The optimized module with every kernel's result as an output, in program order.
StatusOr<std::unique_ptr<HloModule>> KernelProbe(const HloModule& optimized,
                                                 std::vector<ProbeOutput>& names) {
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> probe, CloneModule(optimized));
  HloComputation* entry = probe->entry_computation();
  std::vector<HloInstruction*> outputs;
  for (HloInstruction* instr : entry->MakeInstructionPostOrder()) {
    if (!codegen::IsKernelInstruction(*instr)) continue;
    if (instr->shape().IsArray()) {
      outputs.push_back(instr);
      names.push_back({instr->name()});
      continue;
    }
    if (!instr->shape().IsTuple()) continue;
    for (int64_t i = 0; i < instr->shape().tuple_shapes_size(); ++i) {
      const Shape& leaf = instr->shape().tuple_shapes(i);
      if (!leaf.IsArray()) continue;
      auto gte = std::make_unique<HloInstruction>(HloOpcode::kGetTupleElement, leaf);
      gte->AppendOperand(instr);
      gte->tuple_index_attr = i;
      outputs.push_back(entry->AddInstruction(std::move(gte)));
      names.push_back({instr->name(), i});
    }
  }
  if (outputs.empty()) return Error("the optimized module has no kernels");
  std::vector<Shape> shapes;
  for (const HloInstruction* o : outputs) shapes.push_back(o->shape());
  auto tuple = std::make_unique<HloInstruction>(HloOpcode::kTuple, Shape::Tuple(shapes));
  for (HloInstruction* o : outputs) tuple->AppendOperand(o);
  HloInstruction* old_root = entry->root_instruction();
  entry->set_root_instruction(entry->AddInstruction(std::move(tuple)));
  if (old_root->user_count() == 0) RETURN_IF_ERROR(entry->RemoveInstructionAndUnusedOperands(old_root));
  probe->set_entry_computation_layout(std::nullopt);
  return CloneModule(*probe);  // verified
}

// Finds the first kernel, in program order, whose compiled result departs from the evaluator's
// on the optimized module. Fills result.kernel*; false when every kernel agrees.
bool LocateWrongKernel(const HloModule& optimized, std::span<const Literal> arguments,
                       const BisectOptions& options, BisectResult& result) {
  std::vector<ProbeOutput> names;
  StatusOr<std::unique_ptr<HloModule>> probe = KernelProbe(optimized, names);
  if (!probe.ok()) {
    if (options.progress) options.progress("kernel probe: " + probe.status().message());
    return false;
  }
  ++result.evaluations;
  StatusOr<Literal> expected = EvaluateModule(**probe, arguments, options.evaluator);
  CompileSettings settings = options.compile;
  // The probe is already optimized: compile it as it is, so its kernels are the ones that ran.
  settings.optimize.filter.disabled.clear();
  settings.optimize.filter.enabled_only = {"(no pass)"};
  settings.optimize.planted.miscompile_after_pass.clear();
  ++result.compilations;
  StatusOr<CompiledRun> run = CompileAndRun(**probe, arguments, settings);
  if (!expected.ok() || !run.ok()) {
    if (options.progress) {
      options.progress("kernel probe: " + (expected.ok() ? run.status() : expected.status()).message());
    }
    return false;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    Status same = ExpectLiteralNear(expected->tuple_elements()[i], run->result.tuple_elements()[i],
                                    options.tolerance);
    if (same.ok()) continue;
    const std::string& instruction = names[i].kernel;
    result.kernel = instruction;
    result.kernel_difference =
        names[i].tuple_index < 0
            ? same.message()
            : fmt::format("output {}: {}", names[i].tuple_index, same.message());
    if (const HloInstruction* k = optimized.entry_computation()->GetInstructionWithName(instruction)) {
      result.kernel_text = k->ToString();
      result.kernel_source = StackText(KernelStack(*k));
      if (k->fused_computation() != nullptr) {
        result.kernel_text += "\n" + k->fused_computation()->ToString();
      }
    }
    return true;
  }
  return false;
}

}  // namespace

StatusOr<BisectResult> BisectModule(const HloModule& module, std::span<const Literal> arguments,
                                    const BisectOptions& options) {
  BisectResult result;
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  say("evaluating the module as written (the reference)");
  ++result.evaluations;
  ASSIGN_OR_RETURN(Literal reference, EvaluateModule(module, arguments, options.evaluator));

  // Step 2: every pass, judged by the evaluator.
  {
    ASSIGN_OR_RETURN(std::unique_ptr<HloModule> copy, CloneModule(module));
    EvaluateAfterEachPass evaluate(module, arguments, reference, options, result);
    OptimizeOptions optimize = options.compile.optimize;
    optimize.backend = options.compile.backend == RunBackend::kCpu ? Backend::kCpu : Backend::kGpu;
    optimize.dump = nullptr;
    optimize.extra_instrumentation.push_back(&evaluate);
    say("running the pipeline, evaluating the module after every pass that changes it");
    StatusOr<OptimizeResult> optimized = OptimizeHloModule(*copy, optimize);
    if (evaluate.found()) {
      result.summary = fmt::format(
          "pass {} (pipeline {}, step {}) changes what the module computes", result.pass,
          result.pipeline, result.step);
      return result;
    }
    if (!optimized.ok()) {
      result.kind = CulpritKind::kCompileError;
      result.error = optimized.status().message();
      result.summary = "the pipeline fails: " + result.error;
      return result;
    }
    say(fmt::format("every pass kept the result ({} evaluations)", result.evaluations));
  }
  if (options.passes_only) {
    result.summary = "every pass kept what the module computes";
    return result;
  }

  // Step 3: the compiled result.
  say("compiling and running the module");
  ++result.compilations;
  StatusOr<CompiledRun> run = CompileAndRun(module, arguments, options.compile);
  if (!run.ok()) {
    result.kind = CulpritKind::kCompileError;
    result.error = run.status().message();
    result.summary = "compilation fails after every pass kept the result: " + result.error;
    return result;
  }
  Status same = ExpectLiteralNear(reference, run->result, options.tolerance, &result.errors);
  if (same.ok()) {
    result.summary = fmt::format(
        "not reproduced: every pass kept the result and the compiled result agrees with the "
        "evaluator (largest absolute error {:.3g})",
        result.errors.max_abs_error);
    return result;
  }
  result.difference = same.message();
  say("the compiled result departs: " + result.difference);
  say("looking for the kernel: every kernel's result as an output, compiled once");
  const bool kernel = LocateWrongKernel(*run->optimized, arguments, options, result);
  if (kernel) say("kernel " + result.kernel + ": " + result.kernel_difference);
  say(fmt::format("looking for the smallest set of passes to disable among the {} that changed "
                  "the module: {}",
                  run->changed_passes.size(), fmt::join(run->changed_passes, ", ")));
  result.disabled = SmallestDisabledSet(module, arguments, reference, options, run->changed_passes,
                                        result);
  if (std::find(result.disabled.begin(), result.disabled.end(), "fusion") != result.disabled.end()) {
    say("looking for the fusion decision: a binary search over the fusion pass's fuel");
    FindFusionDecision(module, arguments, reference, options, result);
  }
  result.after_text = PrintModule(*run->optimized);
  if (!result.disabled.empty()) {
    CompileSettings settings = options.compile;
    settings.optimize.filter.disabled.insert(result.disabled.begin(), result.disabled.end());
    if (StatusOr<CompiledRun> without = CompileAndRun(module, arguments, settings); without.ok()) {
      result.before_text = PrintModule(*without->optimized);
    }
  }
  std::string avoided =
      result.disabled.empty()
          ? "no set of passes avoids it"
          : fmt::format("disabling {} avoids it", fmt::join(result.disabled, ", "));
  if (!result.fusion_decision.empty()) {
    avoided += fmt::format("; the fusion decision after which it departs: {}", result.fusion_decision);
  }
  if (kernel) {
    result.kind = CulpritKind::kCodegen;
    result.summary = fmt::format(
        "code generation: kernel {} computes wrong values from right operands; every pass kept "
        "the result; {}",
        result.kernel, avoided);
  } else if (!result.disabled.empty()) {
    result.kind = CulpritKind::kPassInvisible;
    result.summary = fmt::format(
        "pass {}: the evaluator sees no change in what the module computes, but the compiled "
        "result departs only when it runs ({}): a change the evaluator cannot see (layouts, "
        "aliasing) or the code generated for what it makes",
        fmt::join(result.disabled, ","), result.difference);
  } else {
    result.kind = CulpritKind::kUnexplained;
    result.summary = fmt::format(
        "the compiled result departs ({}) but no kernel alone and no set of passes explains it",
        result.difference);
  }
  return result;
}

}  // namespace xlens::tools
