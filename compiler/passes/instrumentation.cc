#include "compiler/passes/instrumentation.h"

#include <functional>

#include <fmt/format.h>

#include "compiler/hlo/printer.h"

namespace xlens {

uint64_t ModuleFingerprint(const HloModule& module) {
  return std::hash<std::string>{}(PrintModule(module));
}

Status VerifierInstrumentation::AfterPass(const HloModule& module, const PassEvent& event) {
  Status status = VerifyModule(module, options_);
  if (status.ok()) return status;
  return Error(fmt::format("the module fails verification after pass {} (pipeline {}): {}",
                           event.pass, event.pipeline, status.message()));
}

Status ChangeCheckInstrumentation::BeforePass(const HloModule& module, const PassEvent& event) {
  before_ = ModuleFingerprint(module);
  return OkStatus();
}

Status ChangeCheckInstrumentation::AfterPass(const HloModule& module, const PassEvent& event) {
  if (event.changed || ModuleFingerprint(module) == before_) return OkStatus();
  return Error(fmt::format("pass {} (pipeline {}) reported no change but changed the module",
                           event.pass, event.pipeline));
}

Status PassRecorder::AfterPass(const HloModule& module, const PassEvent& event) {
  events_.push_back(event);
  return OkStatus();
}

}  // namespace xlens
