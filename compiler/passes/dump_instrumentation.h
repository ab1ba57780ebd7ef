// Dumps the module between passes as XLA does (module_0001.NAME.0004.PIPELINE.after_PASS.before_NEXT,
// with the pseudo passes pipeline-start and pipeline-end) and records every pass as a stage of
// manifest.json. A between-pass dump names the pass that comes next, so the dump of the module
// after a pass is written when the next pass (or the end of the pipeline) is known. Nested
// pipelines are passes of the pipeline around them, named by their own name.
//
// When the module's records reach a manifest, each stage also records what it changed
// (stage_changes.h) and each fusion pass the decisions it took. The module is snapshotted at the
// start of every top-level pipeline and again after every pass that reports a change; a pass that
// reports none is taken at its word (as the between-pass dumps do), so it costs nothing.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/passes/pass_instrumentation.h"
#include "compiler/passes/stage_changes.h"
#include "dump/dump_context.h"

namespace xlens {

class DumpInstrumentation : public PassInstrumentation {
 public:
  explicit DumpInstrumentation(DumpContext& dump) : dump_(dump) {}

  Status BeforePipeline(const HloModule& module, std::string_view pipeline) override;
  Status BeforePass(const HloModule& module, const PassEvent& event) override;
  Status AfterPass(const HloModule& module, const PassEvent& event) override;
  Status AfterPipeline(const HloModule& module, std::string_view pipeline) override;

 private:
  struct Frame {
    std::string pipeline;
    bool start_pending = true;           // the pipeline-start dump waits for the first pass name
    std::optional<ManifestStage> last;   // the last pass, waiting for the next name
    bool changed = false;                // anything in this pipeline changed the module
    int64_t wall_ns = 0;
    std::shared_ptr<const ModuleSnapshot> at_start;  // when recording changes
  };
  // Writes the pending dumps of `frame` now that `next` (a pass name) is known.
  void Flush(const HloModule& module, Frame& frame, std::string_view next);
  // The snapshot of the module as it is now, taken when there is none.
  std::shared_ptr<const ModuleSnapshot> Current(const HloModule& module);
  // Records the decisions `event`'s pass took, if it is a fusion pass, under `step`.
  void RecordFusionDecisions(const HloModule& module, const PassEvent& event, int64_t step);

  DumpContext& dump_;
  std::vector<Frame> frames_;
  int64_t next_step_ = 0;
  // Whether stage changes and fusion decisions are recorded (decided per top-level pipeline).
  bool recording_ = false;
  std::shared_ptr<const ModuleSnapshot> current_;
};

}  // namespace xlens
