// Hooks the pipeline calls around every pass: dumping, timing, verifying and change checking are
// instruments, not code inside passes (as MLIR's PassInstrumentation and TVM's PassInstrument).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

class HloPass;

// What the pipeline knows about one run of one pass.
struct PassEvent {
  std::string pipeline;   // the innermost named pipeline ("simplification")
  std::string pass;       // the pass name ("algebraic-simplifier")
  int64_t step = 0;       // per-module step counter, as in dump file names
  bool changed = false;   // after the pass
  int64_t wall_ns = 0;    // after the pass
  // The pass itself, for instruments that read what it reports (a fusion pass's decisions).
  const HloPass* pass_object = nullptr;
};

class PassInstrumentation {
 public:
  virtual ~PassInstrumentation() = default;
  virtual Status BeforePipeline(const HloModule& module, std::string_view pipeline) {
    return OkStatus();
  }
  virtual Status BeforePass(const HloModule& module, const PassEvent& event) { return OkStatus(); }
  // Called after a pass that succeeded; an error here fails the pipeline (the verifier does that).
  virtual Status AfterPass(const HloModule& module, const PassEvent& event) { return OkStatus(); }
  // Called when a pass returned an error, before the pipeline returns it.
  virtual void PassFailed(const HloModule& module, const PassEvent& event, const Status& error) {}
  virtual Status AfterPipeline(const HloModule& module, std::string_view pipeline) {
    return OkStatus();
  }
};

}  // namespace xlens
