// Dumps the module between passes as XLA does (module_0001.NAME.0004.PIPELINE.after_PASS.before_NEXT,
// with the pseudo passes pipeline-start and pipeline-end) and records every pass as a stage of
// manifest.json. A between-pass dump names the pass that comes next, so the dump of the module
// after a pass is written when the next pass (or the end of the pipeline) is known. Nested
// pipelines are passes of the pipeline around them, named by their own name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/passes/pass_instrumentation.h"
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
  };
  // Writes the pending dumps of `frame` now that `next` (a pass name) is known.
  void Flush(const HloModule& module, Frame& frame, std::string_view next);

  DumpContext& dump_;
  std::vector<Frame> frames_;
  int64_t next_step_ = 0;
};

}  // namespace xlens
