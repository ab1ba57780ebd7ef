#include "compiler/passes/dump_instrumentation.h"

#include "compiler/passes/hlo_pipelines.h"
#include "dump/dump_names.h"

namespace xlens {

std::shared_ptr<const ModuleSnapshot> DumpInstrumentation::Current(const HloModule& module) {
  if (current_ == nullptr) current_ = std::make_shared<const ModuleSnapshot>(TakeModuleSnapshot(module));
  return current_;
}

void DumpInstrumentation::RecordFusionDecisions(const HloModule& module, const PassEvent& event,
                                                int64_t step) {
  if (event.pass_object == nullptr) return;
  for (const FusionDecision& d : FusionDecisionsOf({event.pass_object})) {
    dump_.RecordFusionDecision(module, ManifestFusionDecision{.step = step,
                                                              .pass = event.pass,
                                                              .producer = d.producer,
                                                              .consumer = d.consumer,
                                                              .fused = d.fused,
                                                              .kind = d.kind,
                                                              .fusion = d.fusion,
                                                              .reason = d.reason});
  }
}

void DumpInstrumentation::Flush(const HloModule& module, Frame& frame, std::string_view next) {
  if (frame.start_pending) {
    frame.start_pending = false;
    std::vector<std::string> files =
        dump_.DumpPassBoundary(module, -1, frame.pipeline, kPipelineStart, next);
    if (!files.empty()) {
      ManifestStage start;
      start.step = next_step_++;
      start.pipeline = frame.pipeline;
      start.pass = std::string(kPipelineStart);
      start.files = std::move(files);
      dump_.RecordStage(module, std::move(start));
    }
  }
  if (frame.last) {
    ManifestStage stage = std::move(*frame.last);
    frame.last.reset();
    // As XLA: only a pass that changed the module gets a between-pass dump.
    if (stage.changed) {
      stage.files = dump_.DumpPassBoundary(module, -1, frame.pipeline, stage.pass, next);
    }
    dump_.RecordStage(module, std::move(stage));
  }
}

Status DumpInstrumentation::BeforePipeline(const HloModule& module, std::string_view pipeline) {
  if (!frames_.empty()) Flush(module, frames_.back(), pipeline);
  if (frames_.empty()) {
    // Between top-level pipelines the module is the caller's: look at it afresh.
    recording_ = dump_.RecordsManifest(module);
    current_.reset();
  }
  Frame frame;
  frame.pipeline = std::string(pipeline);
  if (recording_) frame.at_start = Current(module);
  frames_.push_back(std::move(frame));
  return OkStatus();
}

Status DumpInstrumentation::BeforePass(const HloModule& module, const PassEvent& event) {
  if (!frames_.empty()) Flush(module, frames_.back(), event.pass);
  if (recording_) Current(module);
  return OkStatus();
}

Status DumpInstrumentation::AfterPass(const HloModule& module, const PassEvent& event) {
  if (frames_.empty()) return OkStatus();
  ManifestStage stage;
  stage.step = next_step_++;
  stage.pipeline = event.pipeline;
  stage.pass = event.pass;
  stage.changed = event.changed;
  stage.wall_ns = event.wall_ns;
  if (recording_) {
    if (event.changed) {
      std::shared_ptr<const ModuleSnapshot> before = Current(module);
      current_ = std::make_shared<const ModuleSnapshot>(TakeModuleSnapshot(module));
      stage.changes = CompareSnapshots(*before, *current_);
    }
    RecordFusionDecisions(module, event, stage.step);
  }
  frames_.back().last = std::move(stage);
  for (Frame& frame : frames_) {
    frame.changed |= event.changed;
    frame.wall_ns += event.wall_ns;
  }
  return OkStatus();
}

Status DumpInstrumentation::AfterPipeline(const HloModule& module, std::string_view pipeline) {
  if (frames_.empty()) return OkStatus();
  Flush(module, frames_.back(), kPipelineEnd);
  Frame done = std::move(frames_.back());
  frames_.pop_back();
  if (!frames_.empty()) {
    // The nested pipeline is one pass of the pipeline around it.
    ManifestStage stage;
    stage.step = next_step_++;
    stage.pipeline = frames_.back().pipeline;
    stage.pass = done.pipeline;
    stage.changed = done.changed;
    stage.wall_ns = done.wall_ns;
    if (recording_ && done.changed && done.at_start != nullptr) {
      stage.changes = CompareSnapshots(*done.at_start, *Current(module));
    }
    frames_.back().last = std::move(stage);
  }
  return OkStatus();
}

}  // namespace xlens
