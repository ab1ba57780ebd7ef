// The standard instruments: verify after every pass, catch passes that change the module while
// reporting no change, and record what ran (for the CLI, the manifest and the trace).
#pragma once

#include <string>
#include <vector>

#include "compiler/hlo/verifier.h"
#include "compiler/passes/pass_instrumentation.h"

namespace xlens {

// Runs the verifier after every pass; a failure names the pass that broke the module.
class VerifierInstrumentation : public PassInstrumentation {
 public:
  explicit VerifierInstrumentation(VerifierOptions options = {}) : options_(options) {}
  Status AfterPass(const HloModule& module, const PassEvent& event) override;

 private:
  VerifierOptions options_;
};

// A fingerprint of the module's text before and after each pass: a pass that returns "no change"
// but changed the module is a bug (dumps, caches and fixed points rely on the flag).
class ChangeCheckInstrumentation : public PassInstrumentation {
 public:
  Status BeforePass(const HloModule& module, const PassEvent& event) override;
  Status AfterPass(const HloModule& module, const PassEvent& event) override;

 private:
  uint64_t before_ = 0;
};

// Records every pass event in order.
class PassRecorder : public PassInstrumentation {
 public:
  Status AfterPass(const HloModule& module, const PassEvent& event) override;
  const std::vector<PassEvent>& events() const { return events_; }

 private:
  std::vector<PassEvent> events_;
};

// A fingerprint of the module: a hash of its long-form text.
uint64_t ModuleFingerprint(const HloModule& module);

}  // namespace xlens
