#include "compiler/cli/cli_util.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <random>

#include <fmt/format.h>

#include "compiler/hlo/bounded_dynamic_shapes.h"
#include "compiler/hlo/elided_constants.h"
#include "compiler/hlo/npy.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/support/activity.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/flags.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/host_tracer.h"

namespace xlens::cli {

int Fail(const Status& status) {
  // The last guard on what reaches the terminal: every line of a message is bounded, whatever
  // name from the input it quotes.
  constexpr size_t kMaxLineBytes = 1500;
  std::string shown;
  std::string_view message = status.message();
  while (true) {
    const size_t end = message.find('\n');
    shown += ElideMiddle(message.substr(0, end), kMaxLineBytes);
    if (end == std::string_view::npos) break;
    shown += '\n';
    message.remove_prefix(end + 1);
  }
  std::fprintf(stderr, "xlens: %s\n", shown.c_str());
  return 1;
}

StatusOr<std::unique_ptr<HloModule>> LoadModule(const std::string& path, bool verify) {
  ActivityScope activity("reading module " + path);
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  // The path is shown in messages only: escaped, so that a name with control characters stays
  // one line and cannot drive the terminal.
  return ParseHloModule(text, ParseOptions{.verify = verify, .filename = DisplayPath(path)});
}

// Every leaf of a (possibly tuple) literal, in order.
void CollectLeaves(const Literal& literal, std::vector<const Literal*>& leaves) {
  if (literal.shape().IsTuple()) {
    for (const Literal& e : literal.tuple_elements()) CollectLeaves(e, leaves);
    return;
  }
  leaves.push_back(&literal);
}

std::string ReferenceToleranceLabel(const ErrorSpec& spec,
                                    const std::vector<const Literal*>& leaves) {
  std::string label = fmt::format("tolerance {:g}", spec.abs);
  std::vector<PrimitiveType> widened;
  for (const Literal* leaf : leaves) {
    PrimitiveType type = leaf->shape().element_type();
    ErrorSpec held = ErrorSpecFor(spec, type);
    if ((held.abs != spec.abs || held.rel != spec.rel) &&
        std::find(widened.begin(), widened.end(), type) == widened.end()) {
      widened.push_back(type);
      label += held.abs == held.rel
                   ? fmt::format(", {} {:g}", PrimitiveTypeName(type), held.rel)
                   : fmt::format(", {} {:g} (absolute {:g})", PrimitiveTypeName(type), held.rel, held.abs);
    }
  }
  return label;
}

std::string ReferenceVerdict(const LiteralDifference& difference, const std::string& scope,
                             const std::string& tolerance_label, bool match) {
  std::string non_finite =
      difference.non_finite_mismatches == 0
          ? ""
          : fmt::format(", {} non-finite mismatch(es)", difference.non_finite_mismatches);
  return fmt::format("reference: largest absolute error {:.3g}, largest relative error {:.3g}{}{} "
                     "({}): {}\n", difference.max_abs_error, difference.max_rel_error, non_finite,
                     scope, tolerance_label, match ? "match" : "MISMATCH");
}

// A literal for a terminal: whole when small, the first and last elements otherwise.
std::string Summarize(const Literal& literal) {
  constexpr int64_t kShown = 8;
  int64_t n = literal.element_count();
  if (n <= 2 * kShown || literal.shape().rank() == 0) return literal.ToStringWithoutShape();
  std::vector<std::string> head, tail;
  for (int64_t i = 0; i < kShown; ++i) head.push_back(literal.ElementToString(i));
  for (int64_t i = n - kShown; i < n; ++i) tail.push_back(literal.ElementToString(i));
  return fmt::format("{{{}, ... {} more ..., {}}} (flattened)", fmt::join(head, ", "),
                     n - 2 * kShown, fmt::join(tail, ", "));
}

StatusOr<std::vector<Literal>> LoadInputs(const HloComputation& entry, const std::string& dir,
                                          uint64_t seed, const std::string& file_prefix) {
  bool random = dir.empty() || dir == "random";
  if (dir == "random" && GetPathKind(dir) == PathKind::kDirectory) {
    // The keyword must not silently shadow a directory the user meant.
    return Error(
        "--inputs random is ambiguous: there is a directory named 'random' here; write --inputs ./random "
        "for its files, or leave --inputs out for random values");
  }
  if (!random) {
    std::string why;
    switch (GetPathKind(dir, &why)) {
      case PathKind::kDirectory: break;
      case PathKind::kMissing: return Error(fmt::format("--inputs {}: no such directory", DisplayPath(dir)));
      case PathKind::kRegular:
        return Error(fmt::format("--inputs {}: is a file; expected a directory of arg0.npy, arg1.npy, ...",
                                 DisplayPath(dir)));
      default: return Error(fmt::format("--inputs {}", why));
    }
  }
  std::vector<Literal> args;
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < entry.num_parameters(); ++i) {
    const HloInstruction* param = entry.parameter_instruction(i);
    if (random) {
      ASSIGN_OR_RETURN(Literal lit, MakeRandomLiteral(param->shape(), rng));
      args.push_back(std::move(lit));
      continue;
    }
    std::string path = file_prefix.empty() ? fmt::format("{}/arg{}.npy", dir, i)
                                           : fmt::format("{}/{}.arg{}.npy", dir, file_prefix, i);
    if (GetPathKind(path) == PathKind::kMissing) {
      return Error(fmt::format("{}: missing: parameter {} (%{}: {}) needs it", DisplayPath(path), i,
                               param->name(), param->shape().ToString(false)));
    }
    ASSIGN_OR_RETURN(Literal lit, ReadNpy(path));
    if (!shape_util::Compatible(lit.shape(), param->shape())) {
      return Error(fmt::format("{}: holds {} but parameter {} (%{}) expects {}", DisplayPath(path),
                               lit.shape().ToString(false), i, param->name(),
                               param->shape().ToString(false)));
    }
    if (param->shape().has_layout()) lit.set_layout(param->shape().layout());
    args.push_back(std::move(lit));
  }
  return args;
}

Status WriteOutputs(const std::string& dir, const std::vector<const Literal*>& leaves) {
  RETURN_IF_ERROR(CreateDirectories(dir));
  // Every output is attempted: one that cannot be written is reported, and the others still are.
  std::vector<std::string> failed;
  std::vector<PrimitiveType> noted;  // widened types already explained
  for (size_t i = 0; i < leaves.size(); ++i) {
    std::string path = fmt::format("{}/out{}.npy", dir, i);
    const Shape& shape = leaves[i]->shape();
    if (Status written = WriteNpy(path, *leaves[i]); !written.ok()) {
      failed.push_back(written.message());  // names the file and why
      continue;
    }
    std::printf("wrote %s (%s)\n", path.c_str(), shape.ToString(false).c_str());
    const PrimitiveType stored = NpyStoredType(shape.element_type());
    if (shape.IsArray() && stored != shape.element_type() &&
        std::find(noted.begin(), noted.end(), shape.element_type()) == noted.end()) {
      noted.push_back(shape.element_type());
      std::fprintf(stderr,
                   "xlens: note: .npy has no dtype for %s: %s holds its values widened exactly to "
                   "%s (numpy.load reads them; .astype(ml_dtypes.bfloat16) and the like give the "
                   "original type back)\n",
                   std::string(PrimitiveTypeName(shape.element_type())).c_str(), path.c_str(),
                   std::string(PrimitiveTypeName(stored)).c_str());
    }
  }
  if (!failed.empty()) {
    // One message for all of them, so that a failure is one line however many outputs failed.
    return Error(fmt::format("{} of {} outputs could not be written ({}){}", failed.size(),
                             leaves.size(), fmt::join(failed, "; "),
                             failed.size() < leaves.size() ? "; the others were" : ""));
  }
  return OkStatus();
}

void KeepTraceWhenStopped(Watchdog& watchdog, const std::string& trace_path) {
  watchdog.SetFinalWork([trace_path](const std::string& stop_message) -> std::string {
    profiler::Trace trace = profiler::TracerSession::StopFromAnotherThread();
    trace.metadata.push_back({"stopped", stop_message});
    Status written = profiler::WriteChromeTrace(trace, trace_path);
    if (!written.ok()) return "; the trace could not be written: " + written.message();
    return fmt::format("; the trace up to here ({} events) is in {}", trace.events.size(), DisplayPath(trace_path));
  });
}

void MarkStopped(profiler::Trace& trace, const Watchdog& watchdog) {
  if (watchdog.fired()) trace.metadata.push_back({"stopped", watchdog.StopMessage()});
}

Status PrepareModuleToRun(HloModule& module, const std::string& path, std::string_view command,
                          const std::string& fill, uint64_t seed, bool quiet) {
  auto filled = ResolveElidedConstants(module, fill, seed);
  if (!filled.ok()) return filled.status().WithContext(DisplayPath(path));
  if (*filled > 0 && !quiet) {
    std::fprintf(stderr, "xlens %.*s: filled %lld elided constants with %s values (seed %llu)\n",
                 static_cast<int>(command.size()), command.data(), static_cast<long long>(*filled),
                 fill.c_str(), static_cast<unsigned long long>(seed));
  }
  auto dynamic = RunBoundedDynamicShapesAtTheirBounds(module);
  if (!dynamic.ok()) return dynamic.status().WithContext(DisplayPath(path));
  if (*dynamic > 0 && !quiet) {
    std::fprintf(stderr, "xlens %.*s: %lld instructions have bounded dynamic shapes; run at their "
                 "bounds (inputs of the full size)\n", static_cast<int>(command.size()),
                 command.data(), static_cast<long long>(*dynamic));
  }
  return OkStatus();
}

}  // namespace xlens::cli
