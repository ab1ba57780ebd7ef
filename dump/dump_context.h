// DumpContext: every stage of a compilation writes its dumps through one of these. It decides
// what is dumped (XLA's rules), names the files (dump_names.h), writes them atomically in the
// formats asked for, and keeps manifest.json up to date.
//
// XLA's implied settings, from the flags as written:
//   - no format flag: text is the format;
//   - a format flag without --xla_dump_to: dump to stdout, as --xla_dump_to=- does;
//   - --xla_dump_hlo_module_re: only modules whose name it partially matches (RE2, as in XLA;
//     dump_regex.h). The flag parser refuses a bad pattern; one set in DebugOptions directly is
//     reported in warnings() and matches nothing;
//   - --xla_dump_hlo_pass_re: between-pass dumps where the pass before or after matches. The
//     pipeline calls DumpPassBoundary at its start and after each pass that changed the module,
//     so --xla_dump_hlo_pass_re=.* dumps only the passes that changed something;
//   - --xla_dump_max_hlo_modules=N: at most N modules in the directory, counting what earlier
//     processes left there.
// In stdout mode text goes to the stream between "*** Begin FILE ***" and "*** End FILE ***"
// lines; .dot and .html are not written (XLA refuses too) and there is no manifest.
//
// Module ids number modules as XLA's unique ids do (module_0001, ...). They continue after the
// highest id already in the directory (in the manifest or in a file name), and a new module's id is
// taken and recorded in manifest.json under the directory's lock, so processes dumping into the
// same directory at the same time add modules instead of overwriting each other's files.
//
// The manifest is rewritten as each file lands (a module dump, a between-pass dump, a codegen
// file), so a compilation killed half way leaves a manifest that lists what it wrote. The first
// write into the directory removes the temporaries that killed writers left there.
//
// Dumping never fails a compilation: a directory that cannot be created or written, or a
// manifest.json that is corrupt (it is moved aside) or not a regular file (it is left alone and no
// manifest is written), is reported once in warnings() (the caller prints them), the rest of the
// dump is skipped or counted, and Summary() says what was written. All methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/module.h"
#include "dump/dump_regex.h"
#include "dump/flags.h"
#include "dump/manifest.h"

namespace xlens {

struct DumpContextOptions {
  // Where --xla_dump_to=- writes; std::cout when null.
  std::ostream* stdout_stream = nullptr;
  // Graphviz's dot, for .html dumps.
  std::string dot_program = "dot";
  // Microseconds since the epoch for timestamped names; the real clock when unset.
  std::optional<int64_t> fixed_timestamp_us;
};

class DumpContext {
 public:
  explicit DumpContext(DebugOptions options, DumpContextOptions context_options = {});
  // Writes the manifest if records were added since the last write.
  ~DumpContext();
  DumpContext(const DumpContext&) = delete;
  DumpContext& operator=(const DumpContext&) = delete;

  const DebugOptions& options() const { return options_; }
  // True when anything at all may be dumped.
  bool enabled() const { return !dump_to_.empty(); }
  bool dumping_to_stdout() const { return dump_to_ == "-"; }
  // The dump directory; empty when dumping to stdout or not at all.
  std::string directory() const { return dumping_to_stdout() ? "" : dump_to_; }
  bool dump_as_text() const { return as_text_; }
  bool dump_as_dot() const { return options_.xla_dump_hlo_as_dot; }
  bool dump_as_html() const { return options_.xla_dump_hlo_as_html; }
  // Whether --xla_dump_hlo_pass_re asks for between-pass dumps at all.
  bool dumps_passes() const { return enabled() && pass_re_.has_value(); }
  // Whether a between-pass dump is wanted at the boundary after `after_pass`, before
  // `before_pass` (either name matching is enough, as in XLA).
  bool ShouldDumpPass(std::string_view after_pass, std::string_view before_pass) const;

  // Gives the module its id and decides whether it is dumped (module regex, module limit).
  // Calling it again for the same module returns the same id. Every other method begins a module
  // it has not seen.
  int64_t BeginModule(const HloModule& module);
  // Whether files are written for this module.
  bool IsDumped(const HloModule& module);
  // The file name a dump of `module` with `suffix` gets ("module_0001.m.before_optimizations.txt"
  // for suffix "before_optimizations.txt"); timestamped when asked and `timestamped`.
  std::string FileNameFor(const HloModule& module, std::string_view suffix, bool timestamped);

  // Dumps the whole module as `name` ("before_optimizations", "cpu_after_optimizations") in
  // every format asked for, plus NAME-buffer-assignment.txt when `buffer_assignment` is given and
  // text is asked for. Returns the files written.
  std::vector<std::string> DumpModule(const HloModule& module, std::string_view name,
                                      std::optional<std::string_view> buffer_assignment = {});
  // Dumps the module between two passes if ShouldDumpPass says so, as
  // module_0001.NAME.STEP.PIPELINE.after_AFTER.before_BEFORE.*. `step` is the per-module step
  // counter; -1 uses the context's own, which counts dumps as XLA's does. Returns the files.
  std::vector<std::string> DumpPassBoundary(const HloModule& module, int64_t step,
                                            std::string_view pipeline, std::string_view after_pass,
                                            std::string_view before_pass);
  // Dumps text that belongs to the module (LLVM IR, PTX, the thunk sequence) as
  // module_0001.NAME.SUFFIX. Returns the file name, or empty when nothing was written to a file.
  std::string DumpText(const HloModule& module, std::string_view suffix, std::string_view text);

  // The backend the modules are compiled for ("cpu", "gpu"), recorded with each module's
  // invocation in the manifest; call it before the first module begins.
  void SetBackend(std::string backend);
  // --xla_dump_hlo_snapshots: whether the next execution of `module` is to be recorded (snapshots
  // on, the module dumped to a directory, fewer than --xla_dump_max_hlo_snapshots recorded), so a
  // caller fetches the results only when they are wanted.
  bool WantsExecution(const HloModule& module);
  // Writes the arguments and results of one execution as .npy beside the module's dumps
  // (hlo_snapshot.h) and lists them in the manifest with their shapes and checksums. Does nothing
  // when WantsExecution is false; a snapshot that cannot be written is a warning. Returns the files.
  std::vector<std::string> DumpExecution(const HloModule& module,
                                         const std::vector<Literal>& arguments,
                                         const Literal& result);

  // Records a stage or kernel of a dumped module in the manifest.
  void RecordStage(const HloModule& module, ManifestStage stage);
  void RecordKernel(const HloModule& module, ManifestKernel kernel);
  void RecordFusionDecision(const HloModule& module, ManifestFusionDecision decision);
  // Whether records of this module reach a manifest (a dump directory, the module dumped): what
  // only the manifest needs is not computed otherwise.
  bool RecordsManifest(const HloModule& module);
  // Records a TensorFlow graph the clustering saw (its stages, clusters and reasons), and later
  // the HLO module a cluster compiled to; written with the manifest.
  void RecordClusteringGraph(ManifestGraph graph);
  void RecordClusterModule(const std::string& cluster, const std::string& module_name);
  // Writes the manifest and forgets the module (its address may be reused by a new module).
  void EndModule(const HloModule& module);
  // Writes the manifest now.
  void FlushManifest();

  // What went wrong, each problem once; the compilation goes on regardless.
  std::vector<std::string> warnings() const;
  // What the dump directory got, in one line for the command line: "dumped 12 files to DIR
  // (manifest.json lists every file)", or what was not written when something was not. Call it
  // after FlushManifest.
  std::string Summary() const;

 private:
  struct ModuleState {
    int64_t id = 0;
    bool dumped = false;
    std::string timestamp;
    int64_t next_step = 0;
    int64_t executions = 0;  // snapshots written
  };

  ModuleState& StateFor(const HloModule& module);  // requires mu_
  // Modules that ended, by address and name: a file dumped after the end (the per-HLO profile
  // of a run) keeps the module's number.
  std::map<const HloModule*, std::pair<std::string, ModuleState>> ended_;
  std::string NameFor(const HloModule& module, const ModuleState& state, std::string_view suffix,
                      bool timestamped) const;
  // Writes one file (or prints it in stdout mode); returns its name when it went to a file.
  std::optional<std::string> Emit(const std::string& file_name, std::string_view contents,
                                  bool allowed_on_stdout);  // requires mu_
  std::vector<std::string> DumpFormats(const HloModule& module, const ModuleState& state,
                                       const std::string& base);  // requires mu_
  bool EnsureDirectory();                                         // requires mu_
  void WriteManifest();                                           // requires mu_
  void ManifestProblem(const std::string& message);               // requires mu_
  void TakeManifestWarnings();                                    // requires mu_
  void Warn(std::string message);                                 // requires mu_, once per message

  DebugOptions options_;
  DumpContextOptions context_options_;
  std::string backend_;
  std::string dump_to_;
  bool as_text_ = false;
  std::optional<DumpRegex> module_re_;
  std::optional<DumpRegex> pass_re_;

  mutable std::mutex mu_;
  std::map<const HloModule*, ModuleState> modules_;
  std::optional<ManifestWriter> manifest_;
  bool manifest_dirty_ = false;
  bool directory_ready_ = false;
  bool directory_failed_ = false;
  std::string first_write_error_;
  int64_t failed_writes_ = 0;
  int64_t written_files_ = 0;
  // Why manifest.json could not be written, the first time it could not; and whether the last
  // attempt wrote it.
  std::string manifest_problem_;
  bool manifest_written_ = false;
  size_t manifest_warnings_taken_ = 0;
  std::vector<std::string> warnings_;
};

// The process's command line, recorded with every module dumped afterwards (the manifest's
// "invocation"), so a bug bundle says how its modules were compiled. main() sets it once.
void SetDumpCommandLine(std::vector<std::string> arguments);

// Removes the ", metadata={...}" attributes from HLO text (for --xla_dump_disable_metadata).
std::string StripHloMetadata(std::string_view hlo_text);

}  // namespace xlens
