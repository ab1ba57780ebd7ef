// What several `xlens` subcommands share: loading a module and its inputs, printing results.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "compiler/hlo/literal.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/passes/hlo_optimizer.h"
#include "dump/dump_context.h"
#include "compiler/hlo/module.h"
#include "compiler/support/status.h"
#include "compiler/support/watchdog.h"
#include "compiler/tools/flags_setup.h"
#include "profiler/trace.h"

namespace xlens::cli {

// Prints "xlens: MESSAGE" to stderr and returns 1, the exit code of a user error.
int Fail(const Status& status);
StatusOr<std::unique_ptr<HloModule>> LoadModule(const std::string& path, bool verify);
// What a command that runs `module` does to it first, saying each change once on stderr as
// "xlens COMMAND: ...": elided constants filled from `fill` with `seed`, or refused naming the
// flag (elided_constants.h); bounded dynamic dimensions made static at their bounds, or what
// cannot be refused by name (bounded_dynamic_shapes.h). `quiet` says nothing (a second load of
// the same file). Errors are the file's.
Status PrepareModuleToRun(HloModule& module, const std::string& path, std::string_view command,
                          const std::string& fill, uint64_t seed, bool quiet = false);
// The comparison with the reference evaluator of every command's --tolerance (run, bisect,
// reduce, replay, the multi-device runs): absolute and relative `tolerance`; by default (`given`
// false) f16 and bf16 outputs within at least 1e-2 and f8 and f4 within at least their own
// rounding (NarrowFloatTolerance). A --tolerance the user gave is held to as given, so that it can
// also tighten the comparison of a narrow type. A bisection's `xlens run --reference` line repeats
// --tolerance only when it was given, so that it judges a miscompare as the bisection did.
inline ErrorSpec ReferenceTolerance(double tolerance, bool given) {
  return ErrorSpec{tolerance, tolerance, /*widen_for_narrow_floats=*/!given};
}
// "tolerance 0.001, f16 0.01": what `spec` holds the types of `leaves` to (ErrorSpecFor), each
// widened type named once with its own tolerance.
std::string ReferenceToleranceLabel(const ErrorSpec& spec, const std::vector<const Literal*>& leaves);
// The verdict line of a comparison with the reference evaluator, the same for run and the
// multi-device runs: "reference: largest absolute error A, largest relative error R[, N
// non-finite mismatch(es)]SCOPE (LABEL): match|MISMATCH", SCOPE being e.g. " over 2 devices".
std::string ReferenceVerdict(const LiteralDifference& difference, const std::string& scope,
                             const std::string& tolerance_label, bool match);
// Every leaf of a (possibly tuple) literal, in order.
void CollectLeaves(const Literal& literal, std::vector<const Literal*>& leaves);
// A literal for a terminal: whole when small, the first and last elements otherwise.
std::string Summarize(const Literal& literal);
// DIR/arg0.npy, arg1.npy, ... in parameter order, or random values (seeded) when `dir` is empty
// or "random". With a `file_prefix`, DIR/PREFIX.arg0.npy, ...: one execution of a snapshot dump.
StatusOr<std::vector<Literal>> LoadInputs(const HloComputation& entry, const std::string& dir,
                                          uint64_t seed, const std::string& file_prefix = "");
// Writes DIR/out0.npy, out1.npy, ... (creating DIR), printing each file. Every output is
// attempted: one that fails is reported on stderr and named in the error returned after the
// others were written. Types .npy lacks (bf16, ...) are widened exactly (see npy.h), said once on
// stderr per type.
Status WriteOutputs(const std::string& dir, const std::vector<const Literal*>& leaves);

// The XLA flags of a compilation (compiler/tools/flags_setup.h, shared with the Python package).
using tools::FlagsSetup;
using tools::SetUpFromFlags;

// --trace with --timeout: a run stopped by the watchdog's last resort (work that never polls) still
// writes the trace recorded so far to `trace_path`, marked as stopped (MarkStopped), and the stop
// line says where it is. Call after the trace session started.
void KeepTraceWhenStopped(Watchdog& watchdog, const std::string& trace_path);
// Marks a trace whose run `watchdog` stopped: its metadata (the file's otherData) gets "stopped"
// with the stop message. Nothing when the watchdog did not fire.
void MarkStopped(profiler::Trace& trace, const Watchdog& watchdog);

}  // namespace xlens::cli
