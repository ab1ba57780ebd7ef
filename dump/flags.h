// XLA_FLAGS and TF_XLA_FLAGS, read as XLA and TensorFlow read them, plus the same flags on the
// command line.
//
// An environment variable holds whitespace-separated flags: `--name`, `--name=value`,
// `--name="a b"` or `--name='a b'` (a backslash escapes the next character inside double quotes
// only). Booleans are `--name`, `--name=true|false|1|0`. As in XLA, a value that does not start
// with `-` is the name of a file holding the flags; one that cannot be read as a regular file (a
// directory, a FIFO, a device, a missing file) is an error, as XLA stops when it cannot open it.
// The later of two settings of one flag wins; the order is TF_XLA_FLAGS, XLA_FLAGS, then the
// command line, so the command line wins. The regex flags take RE2 patterns, as XLA's do.
//
// An unknown flag is an error naming it and the closest known flag; a bad value names the flag
// and what it expects. XLA flags belong in XLA_FLAGS and tf_* flags in TF_XLA_FLAGS (the error
// says so when they are swapped); the command line takes both. Every error is one line: it starts
// with the variable, "command line", or FILE:LINE for a flags file, and what the user wrote is
// escaped and, when long, cut (terminal_text.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/support/status.h"

namespace xlens {

// The typed value of every flag. Fields are named after their flags. The dump fields hold what
// the user wrote; DumpContext derives XLA's implied settings from them (text is the format when
// none is chosen; a format flag without --xla_dump_to dumps to stdout).
struct DebugOptions {
  std::string xla_dump_to;
  bool xla_dump_hlo_as_text = false;
  bool xla_dump_hlo_as_dot = false;
  bool xla_dump_hlo_as_html = false;
  std::string xla_dump_hlo_pass_re;
  std::string xla_dump_hlo_module_re;
  bool xla_dump_include_timestamp = false;
  int64_t xla_dump_max_hlo_modules = -1;
  // Every execution of a dumped module writes its arguments and results as .npy beside its dumps,
  // up to xla_dump_max_hlo_snapshots executions per module (-1: all).
  bool xla_dump_hlo_snapshots = false;
  int64_t xla_dump_max_hlo_snapshots = 4;
  bool xla_dump_disable_metadata = false;
  bool xla_hlo_profile = false;
  std::vector<std::string> xla_disable_hlo_passes;
  std::vector<std::string> xla_enable_hlo_passes_only;
  int64_t xla_backend_optimization_level = 3;
  std::string xla_reduce_precision;  // "E,M" or "E,M:opcode,opcode"; empty: off
  bool xla_gpu_dump_llvmir = false;
  // Hidden, test-only: plant a known bug so that bisect and reduce can be tested. Insert the
  // planted-miscompile pass right after this pass; make this kernel's code store wrong values.
  std::string xla_test_miscompile_after_pass;
  std::string xla_test_miscompile_kernel;
  // The GPU backend's one-thread-per-element kernels instead of its warp, shared-memory and tiled
  // ones (to compare the two).
  bool xla_gpu_xlens_naive_emitters = false;
  // Split a GEMM's K and a column reduction's rows across blocks when one tiled launch would fill
  // too few SMs (off: the one tiled kernel, to compare).
  bool xla_gpu_xlens_split_launches = true;
  // Where compiled CPU kernels are kept across processes (empty: in memory only).
  std::string xla_xlens_persistent_cache_dir;
  // Choose between a CPU call's kernels by timing them at compile time, per shape (off: the
  // fixed rule, deterministic).
  bool xla_cpu_xlens_measure_kernel_choice = true;
  // No trial where the whole trial (a run of the rule's kernel as estimated, times the runs of
  // each kernel, times the kernels) is estimated above this many ms, even with fewer runs (the
  // rule's pick, recorded as not timed; runtime/measured_choice.h).
  int64_t xla_cpu_xlens_kernel_choice_trial_budget_ms = 60;
  // Every kernel choice of the process written to this file after each compilation that makes
  // one; the choices of this file forced (replay); as XLA's --xla_gpu_dump_autotune_results_to
  // and --xla_gpu_load_autotune_results_from.
  std::string xla_cpu_xlens_dump_kernel_choices_to;
  std::string xla_cpu_xlens_load_kernel_choices_from;

  // --tf_xla_auto_jit: -1 off, 0 as the session config says, 1 and 2 on. "single-gpu(N)"
  // applies level N to single-GPU graphs only; "fusible" is level 1 restricted to fusible ops.
  std::string tf_xla_auto_jit = "0";
  int64_t tf_xla_auto_jit_general = 0;
  int64_t tf_xla_auto_jit_single_gpu = 0;
  bool tf_xla_auto_jit_fusible_only = false;
  bool tf_xla_cpu_global_jit = false;
  int64_t tf_xla_min_cluster_size = 4;
  int64_t tf_xla_max_cluster_size = 2147483647;
  bool tf_xla_clustering_debug = false;
  // Comma-separated ops (or the groups PW, RED, PWRED, REDUCEWINDOW, REDUCEWINDOWPW, BN, Conv,
  // SORT, MISC, FUSIBLE) auto-clustering may take; empty: every op XLA compiles. "fusible" auto
  // jit sets FUSIBLE.
  std::string tf_xla_ops_to_cluster;
  // Comma-separated ops auto-clustering leaves out (TensorFlow accepts only Where).
  std::string tf_xla_cluster_exclude_ops;
  // How many nodes auto-clustering may make candidates before it stops (bisects a bad cluster).
  int64_t tf_xla_clustering_fuel = 9223372036854775807;
  // Name clusters cluster_<graph fingerprint>_<n>, stable from run to run.
  bool tf_xla_deterministic_cluster_names = false;
  bool tf_xla_disable_deadness_safety_checks_for_debugging = false;
  bool tf_xla_disable_resource_variable_safety_checks_for_debugging = false;

  // $TF_DUMP_GRAPH_PREFIX: where clustering graphs are dumped; empty when unset.
  std::string tf_dump_graph_prefix;

  bool operator==(const DebugOptions&) const = default;
};

// One flag, for help text and tooling.
struct FlagInfo {
  std::string name;           // without the leading "--"
  std::string type;           // "bool", "int", "string", "regex", "list"
  std::string default_value;  // as it would be written after "="
  std::string help;           // one line
  bool tf = false;            // read from TF_XLA_FLAGS rather than XLA_FLAGS
  bool hidden = false;        // test-only: accepted, but not in help nor suggested
};

// Every flag users see (hidden test-only flags left out), in help order.
const std::vector<FlagInfo>& AllFlags();

// Every flag with its type, default and meaning, one per line, plus the environment variables.
std::string FlagsHelp();

// The environment the flags come from.
struct FlagEnvironment {
  std::string xla_flags;             // $XLA_FLAGS
  std::string tf_xla_flags;          // $TF_XLA_FLAGS
  std::string tf_dump_graph_prefix;  // $TF_DUMP_GRAPH_PREFIX
};

// Reads the three variables from the process environment (unset reads as empty).
FlagEnvironment ReadFlagEnvironment();

// Parses the environment, then `command_line_flags` (each one "--name[=value]"), over the
// defaults. Errors name the flag and where it came from.
StatusOr<DebugOptions> ParseDebugOptions(const FlagEnvironment& environment,
                                         const std::vector<std::string>& command_line_flags = {});

// ParseDebugOptions(ReadFlagEnvironment(), command_line_flags).
StatusOr<DebugOptions> DebugOptionsFromEnvironment(
    const std::vector<std::string>& command_line_flags = {});

// Splits an XLA_FLAGS-style string into "--name[=value]" tokens with quotes removed. Fails on a
// token that does not start with "-" and on an unterminated quote.
StatusOr<std::vector<std::string>> SplitFlagString(std::string_view text);

// True for "--xla_..." and "--tf_xla_..." arguments, so a command-line parser can hand them over.
bool IsDebugFlag(std::string_view argument);

// The flags that differ from the defaults, as a string XLA_FLAGS/TF_XLA_FLAGS would accept
// (values quoted where needed); parsing it gives back `options` (for bug reports and bundles).
struct FlagStrings {
  std::string xla_flags;
  std::string tf_xla_flags;
};
FlagStrings DebugOptionsToFlags(const DebugOptions& options);

// Every flag and its value in `options`, in help order, as it would be written after "=" (for
// the environment of a bug bundle: every flag in effect, defaults included).
std::vector<std::pair<std::string, std::string>> DebugOptionsValues(const DebugOptions& options);

// Levenshtein distance, used for "did you mean".
int EditDistance(std::string_view a, std::string_view b);

}  // namespace xlens
