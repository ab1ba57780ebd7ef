// HloPassPipeline runs passes in order; HloPassFix repeats a pipeline until nothing changes.
// Both are passes themselves, so pipelines nest ("simplification" inside "optimization") and the
// innermost named pipeline is what dumps and traces show.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compiler/passes/hlo_pass.h"
#include "compiler/passes/pass_instrumentation.h"

namespace xlens {

// Which passes run: --xla_disable_hlo_passes and --xla_enable_hlo_passes_only. Pipelines and
// fixed-point wrappers always run; the filter applies to leaf passes by name.
struct PassFilter {
  std::set<std::string> disabled;
  std::set<std::string> enabled_only;  // empty: all
  bool Allows(std::string_view pass) const;
};

// Shared by every pipeline of one compilation: the instruments, the filter and the per-module step
// counter used in dump file names.
struct PipelineContext {
  std::vector<PassInstrumentation*> instrumentation;
  PassFilter filter;
  int64_t next_step = 0;
  // Things the user should hear about that are not errors (a fixed point that hit its cap).
  std::vector<std::string> warnings;
};

class HloPassPipeline : public HloPass {
 public:
  explicit HloPassPipeline(std::string name) : name_(std::move(name)) {}

  std::string_view name() const override { return name_; }

  template <typename Pass, typename... Args>
  Pass& AddPass(Args&&... args) {
    auto pass = std::make_unique<Pass>(std::forward<Args>(args)...);
    Pass& ref = *pass;
    passes_.push_back(std::move(pass));
    return ref;
  }
  void AddPass(std::unique_ptr<HloPass> pass) { passes_.push_back(std::move(pass)); }

  // Runs with no instrumentation and no filter.
  StatusOr<bool> Run(HloModule& module) override;
  // Runs with the instruments and filter of `context`.
  StatusOr<bool> Run(HloModule& module, PipelineContext& context);

  const std::vector<std::unique_ptr<HloPass>>& passes() const { return passes_; }
  // For inserting a pass into a built pipeline (test-only planted passes).
  std::vector<std::unique_ptr<HloPass>>& mutable_passes() { return passes_; }
  // The names of every leaf pass, in order, nested pipelines flattened (for --list-passes).
  std::vector<std::string> LeafPassNames() const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<HloPass>> passes_;
};

// Repeats `pipeline` until an iteration changes nothing, at most `max_iterations` times. Hitting
// the cap is not an error (the module is still valid) but is reported through `cap_hit()` and in
// the pipeline's name in dumps, so the user sees it.
class HloPassFix : public HloPass {
 public:
  HloPassFix(std::unique_ptr<HloPassPipeline> pipeline, int max_iterations = 25)
      : pipeline_(std::move(pipeline)), max_iterations_(max_iterations) {}

  std::string_view name() const override { return pipeline_->name(); }
  StatusOr<bool> Run(HloModule& module) override;
  StatusOr<bool> Run(HloModule& module, PipelineContext& context);

  HloPassPipeline& pipeline() { return *pipeline_; }
  const HloPassPipeline& pipeline() const { return *pipeline_; }
  int iterations() const { return iterations_; }
  bool cap_hit() const { return cap_hit_; }

 private:
  std::unique_ptr<HloPassPipeline> pipeline_;
  int max_iterations_;
  int iterations_ = 0;
  bool cap_hit_ = false;
};

}  // namespace xlens
