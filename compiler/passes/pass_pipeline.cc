#include "compiler/passes/pass_pipeline.h"

#include <fmt/format.h>

#include "profiler/host_tracer.h"

namespace xlens {

bool PassFilter::Allows(std::string_view pass) const {
  std::string name(pass);
  if (disabled.count(name)) return false;
  return enabled_only.empty() || enabled_only.count(name) > 0;
}

using profiler::NowNs;  // pass times and trace spans share the profiler's clock

StatusOr<bool> HloPassPipeline::Run(HloModule& module) {
  PipelineContext context;
  return Run(module, context);
}

StatusOr<bool> HloPassPipeline::Run(HloModule& module, PipelineContext& context) {
  profiler::TraceSpan pipeline_span(name_, profiler::category::kPipeline);
  pipeline_span.AddArg("module", module.name());
  for (PassInstrumentation* inst : context.instrumentation) {
    RETURN_IF_ERROR(inst->BeforePipeline(module, name_));
  }
  bool changed = false;
  for (const auto& pass : passes_) {
    if (auto* nested = dynamic_cast<HloPassPipeline*>(pass.get())) {
      ASSIGN_OR_RETURN(bool c, nested->Run(module, context));
      changed |= c;
      continue;
    }
    if (auto* fix = dynamic_cast<HloPassFix*>(pass.get())) {
      ASSIGN_OR_RETURN(bool c, fix->Run(module, context));
      changed |= c;
      continue;
    }
    if (!context.filter.Allows(pass->name())) continue;
    PassEvent event;
    event.pipeline = name_;
    event.pass = std::string(pass->name());
    event.step = context.next_step++;
    event.pass_object = pass.get();
    for (PassInstrumentation* inst : context.instrumentation) {
      RETURN_IF_ERROR(inst->BeforePass(module, event));
    }
    int64_t start = NowNs();
    StatusOr<bool> result = pass->Run(module);
    event.wall_ns = NowNs() - start;
    if (profiler::TracingEnabled()) {
      // The pass alone: the instruments (dumps, the verifier) run outside its span.
      profiler::SpanArgs span = profiler::RecordSpan(event.pass, profiler::category::kPass, start,
                                                     start + event.wall_ns);
      span.AddArg("pipeline", name_);
      span.AddArg("step", event.step);
      span.AddArg("changed", result.ok() && *result);
      if (!result.ok()) span.AddArg("error", result.status().message());
    }
    if (!result.ok()) {
      for (PassInstrumentation* inst : context.instrumentation) {
        inst->PassFailed(module, event, result.status());
      }
      return result.status().WithContext(fmt::format("pass {} (pipeline {})", event.pass, name_));
    }
    event.changed = *result;
    changed |= event.changed;
    for (PassInstrumentation* inst : context.instrumentation) {
      RETURN_IF_ERROR(inst->AfterPass(module, event));
    }
  }
  for (PassInstrumentation* inst : context.instrumentation) {
    RETURN_IF_ERROR(inst->AfterPipeline(module, name_));
  }
  return changed;
}

std::vector<std::string> HloPassPipeline::LeafPassNames() const {
  std::vector<std::string> names;
  for (const auto& pass : passes_) {
    const HloPassPipeline* nested = dynamic_cast<const HloPassPipeline*>(pass.get());
    if (const auto* fix = dynamic_cast<const HloPassFix*>(pass.get())) nested = &fix->pipeline();
    if (nested != nullptr) {
      for (std::string& n : nested->LeafPassNames()) names.push_back(std::move(n));
    } else {
      names.emplace_back(pass->name());
    }
  }
  return names;
}

StatusOr<bool> HloPassFix::Run(HloModule& module) {
  PipelineContext context;
  return Run(module, context);
}

StatusOr<bool> HloPassFix::Run(HloModule& module, PipelineContext& context) {
  bool changed = false;
  iterations_ = 0;
  cap_hit_ = false;
  while (true) {
    ASSIGN_OR_RETURN(bool c, pipeline_->Run(module, context));
    ++iterations_;
    changed |= c;
    if (!c) break;
    if (iterations_ >= max_iterations_) {
      cap_hit_ = true;
      context.warnings.push_back(fmt::format("fixed-point pipeline {} still changed the module "
                                             "after {} iterations; stopped there",
                                             pipeline_->name(), max_iterations_));
      break;
    }
  }
  return changed;
}

}  // namespace xlens
