#include "dump/flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <optional>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/dump_regex.h"

namespace xlens {
namespace {

constexpr std::string_view kWhitespace = " \t\r\n";

// A flag's parser and printer. `set` gets the text after "=", or nullopt for a bare "--name".
struct FlagSpec {
  FlagInfo info;
  std::function<Status(DebugOptions&, std::optional<std::string_view>)> set;
  std::function<std::string(const DebugOptions&)> get;
};

Status BadValue(std::string_view name, std::optional<std::string_view> value,
                std::string_view expected) {
  if (!value) return Error(fmt::format("--{} needs a value: --{}={}", name, name, expected));
  return Error(fmt::format("--{}={}: expected {}", name, DisplayText(*value), expected));
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<bool> ParseBool(std::optional<std::string_view> value) {
  if (!value) return true;
  std::string v = Lower(*value);
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  return std::nullopt;
}

std::optional<int64_t> ParseInt(std::string_view text) {
  int64_t out = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return out;
}

std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    size_t b = item.find_first_not_of(kWhitespace);
    size_t e = item.find_last_not_of(kWhitespace);
    if (b != std::string_view::npos) out.emplace_back(item.substr(b, e - b + 1));
    start = comma + 1;
  }
  return out;
}

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

FlagSpec BoolFlag(std::string name, bool DebugOptions::*field, std::string help, bool tf = false) {
  return FlagSpec{
      {name, "bool", "", std::move(help), tf},
      [name, field](DebugOptions& o, std::optional<std::string_view> v) -> Status {
        std::optional<bool> b = ParseBool(v);
        if (!b) return BadValue(name, v, "true, false, 1 or 0");
        o.*field = *b;
        return OkStatus();
      },
      [field](const DebugOptions& o) { return std::string(o.*field ? "true" : "false"); }};
}

FlagSpec IntFlag(std::string name, int64_t DebugOptions::*field, std::string help,
                 int64_t min = INT64_MIN, bool tf = false, int64_t max = INT64_MAX) {
  return FlagSpec{
      {name, "int", "", std::move(help), tf},
      [name, field, min, max](DebugOptions& o, std::optional<std::string_view> v) -> Status {
        std::optional<int64_t> i = v ? ParseInt(*v) : std::nullopt;
        if (!i) return BadValue(name, v, "an integer");
        if (*i < min || *i > max) {
          return BadValue(name, v,
                          max == INT64_MAX ? fmt::format("an integer >= {}", min)
                                           : fmt::format("an integer from {} to {}", min, max));
        }
        o.*field = *i;
        return OkStatus();
      },
      [field](const DebugOptions& o) { return std::to_string(o.*field); }};
}

FlagSpec StringFlag(std::string name, std::string DebugOptions::*field, std::string help,
                    std::string value_name, bool tf = false) {
  return FlagSpec{
      {name, "string", "", std::move(help), tf},
      [name, field, value_name](DebugOptions& o, std::optional<std::string_view> v) -> Status {
        if (!v) return BadValue(name, v, value_name);
        o.*field = std::string(*v);
        return OkStatus();
      },
      [field](const DebugOptions& o) { return o.*field; }};
}

// An RE2 pattern, as XLA takes it. A pattern RE2 refuses is an error here, with RE2's reason,
// rather than a dump that silently matches nothing.
FlagSpec RegexFlag(std::string name, std::string DebugOptions::*field, std::string help) {
  return FlagSpec{{name, "regex", "", std::move(help), false},
                  [name, field](DebugOptions& o, std::optional<std::string_view> v) -> Status {
                    if (!v) return BadValue(name, v, "REGEX");
                    StatusOr<DumpRegex> check = DumpRegex::Compile(*v);
                    if (!check.ok()) {
                      return BadValue(name, v,
                                      fmt::format("a regular expression (RE2 syntax): {}",
                                                  check.status().message()));
                    }
                    o.*field = std::string(*v);
                    return OkStatus();
                  },
                  [field](const DebugOptions& o) { return o.*field; }};
}

FlagSpec ListFlag(std::string name, std::vector<std::string> DebugOptions::*field,
                  std::string help) {
  return FlagSpec{{name, "list", "", std::move(help), false},
                  [name, field](DebugOptions& o, std::optional<std::string_view> v) -> Status {
                    if (!v) return BadValue(name, v, "a comma-separated list of pass names");
                    o.*field = SplitList(*v);
                    return OkStatus();
                  },
                  [field](const DebugOptions& o) { return JoinList(o.*field); }};
}

FlagSpec Hidden(FlagSpec spec) {
  spec.info.hidden = true;
  return spec;
}

// TensorFlow's --tf_xla_auto_jit: a level, "single-gpu(N)" or "fusible".
Status SetAutoJit(DebugOptions& o, std::optional<std::string_view> v) {
  constexpr std::string_view kExpected = "-1, 0, 1, 2, single-gpu(N) or fusible";
  if (!v) return BadValue("tf_xla_auto_jit", v, kExpected);
  std::string_view text = *v;
  if (text == "fusible") {
    o.tf_xla_auto_jit_general = 1;
    o.tf_xla_auto_jit_single_gpu = 1;
    o.tf_xla_auto_jit_fusible_only = true;
    // As in TensorFlow, "fusible" restricts auto-clustering to the fusible op groups.
    o.tf_xla_ops_to_cluster = "FUSIBLE";
  } else if (text.starts_with("single-gpu(") && text.ends_with(")")) {
    std::optional<int64_t> level = ParseInt(text.substr(11, text.size() - 12));
    if (!level || *level < -1 || *level > 2) return BadValue("tf_xla_auto_jit", v, kExpected);
    o.tf_xla_auto_jit_general = 0;
    o.tf_xla_auto_jit_single_gpu = *level;
    o.tf_xla_auto_jit_fusible_only = false;
  } else {
    std::optional<int64_t> level = ParseInt(text);
    if (!level || *level < -1 || *level > 2) return BadValue("tf_xla_auto_jit", v, kExpected);
    o.tf_xla_auto_jit_general = *level;
    o.tf_xla_auto_jit_single_gpu = *level;
    o.tf_xla_auto_jit_fusible_only = false;
  }
  o.tf_xla_auto_jit = std::string(text);
  return OkStatus();
}

std::vector<FlagSpec> MakeSpecs() {
  using D = DebugOptions;
  std::vector<FlagSpec> specs = {
      StringFlag("xla_dump_to", &D::xla_dump_to,
                 "Directory to dump HLO modules, LLVM IR, PTX and manifest.json into; \"-\" "
                 "prints dumps to stdout.",
                 "DIR"),
      BoolFlag("xla_dump_hlo_as_text", &D::xla_dump_hlo_as_text,
               "Dump HLO as text (.txt). On by default when --xla_dump_to is set and no other "
               "format is chosen."),
      BoolFlag("xla_dump_hlo_as_dot", &D::xla_dump_hlo_as_dot,
               "Dump HLO graphs as Graphviz DOT (.dot)."),
      BoolFlag("xla_dump_hlo_as_html", &D::xla_dump_hlo_as_html,
               "Dump HLO as a standalone HTML page (.html): the graph as SVG and the text."),
      RegexFlag("xla_dump_hlo_pass_re", &D::xla_dump_hlo_pass_re,
                "Also dump the module between passes whose name matches this regex (.* for all "
                "passes that changed it)."),
      RegexFlag("xla_dump_hlo_module_re", &D::xla_dump_hlo_module_re,
                "Only dump modules whose name matches this regex (partial match)."),
      BoolFlag("xla_dump_include_timestamp", &D::xla_dump_include_timestamp,
               "Prefix HLO dump file names with the module's compile time in microseconds."),
      IntFlag("xla_dump_max_hlo_modules", &D::xla_dump_max_hlo_modules,
              "Dump at most this many modules into the directory; -1 means no limit.", -1),
      BoolFlag("xla_dump_hlo_snapshots", &D::xla_dump_hlo_snapshots,
               "Write the arguments and results of every execution of a dumped module as .npy "
               "beside its dumps (module_0001.NAME.execution_0001.arg0.npy, ...), listed in "
               "manifest.json."),
      IntFlag("xla_dump_max_hlo_snapshots", &D::xla_dump_max_hlo_snapshots,
              "With --xla_dump_hlo_snapshots: at most this many executions per module; -1 means "
              "no limit.",
              -1),
      BoolFlag("xla_dump_disable_metadata", &D::xla_dump_disable_metadata,
               "Leave metadata={...} out of dumped HLO text."),
      BoolFlag("xla_hlo_profile", &D::xla_hlo_profile,
               "Instrument compiled code and print a per-HLO profile table after each run."),
      ListFlag("xla_disable_hlo_passes", &D::xla_disable_hlo_passes,
               "Comma-separated names of HLO passes not to run."),
      ListFlag("xla_enable_hlo_passes_only", &D::xla_enable_hlo_passes_only,
               "Comma-separated names of the only HLO passes to run."),
      IntFlag("xla_backend_optimization_level", &D::xla_backend_optimization_level,
              "LLVM optimization level for generated code, 0 to 3.", 0, false, 3),
      StringFlag("xla_reduce_precision", &D::xla_reduce_precision,
                 "Round the outputs of instructions to E exponent and M mantissa bits after layout "
                 "assignment (reduce-precision-insertion): E,M for every floating-point op, or "
                 "E,M:add,multiply for those opcodes.",
                 "E,M[:OPCODES]"),
      StringFlag("xla_xlens_persistent_cache_dir", &D::xla_xlens_persistent_cache_dir,
                 "Keep compiled CPU kernels in this directory and reuse them in later runs "
                 "(as JAX's persistent compilation cache); a corrupt entry is recompiled.",
                 "DIR"),
      BoolFlag("xla_cpu_xlens_measure_kernel_choice", &D::xla_cpu_xlens_measure_kernel_choice,
               "Where a CPU call has two kernels for its shape and no rule ranks them on every "
               "machine (a depthwise convolution: xlens's loops or oneDNN's), time both at compile "
               "time and keep the faster (by 10% over the rule's pick), cached per shape in the "
               "process and in --xla_xlens_persistent_cache_dir, as XLA's GPU autotuner does; "
               "false: the fixed rule."),
      IntFlag("xla_cpu_xlens_kernel_choice_trial_budget_ms", &D::xla_cpu_xlens_kernel_choice_trial_budget_ms,
              "Time a CPU call's kernels at compile time (--xla_cpu_xlens_measure_kernel_choice) only "
              "where the whole trial (one run as estimated from the bytes it moves, times the runs "
              "of each kernel, times the kernels) fits this many milliseconds, with fewer runs "
              "where only those fit; a larger call takes the fixed rule's kernel, listed and dumped "
              "as not timed. A choice already cached or loaded is taken either way. 0: no trials.",
              0),
      StringFlag("xla_cpu_xlens_dump_kernel_choices_to", &D::xla_cpu_xlens_dump_kernel_choices_to,
                 "Write every kernel choice made by timing (and its times) to this JSON file after "
                 "each compilation that makes one, as --xla_gpu_dump_autotune_results_to.",
                 "FILE"),
      StringFlag("xla_cpu_xlens_load_kernel_choices_from", &D::xla_cpu_xlens_load_kernel_choices_from,
                 "Take the kernel choices of this JSON file (a dump's kernel_choices.json or a file "
                 "of --xla_cpu_xlens_dump_kernel_choices_to) instead of timing, as "
                 "--xla_gpu_load_autotune_results_from; a malformed file is an error.",
                 "FILE"),
      BoolFlag("xla_gpu_dump_llvmir", &D::xla_gpu_dump_llvmir,
               "Dump the LLVM IR of GPU kernels (ir-no-opt.ll, ir-with-opt.ll)."),
      Hidden(StringFlag("xla_test_miscompile_after_pass", &D::xla_test_miscompile_after_pass,
                        "Test only: insert the planted-miscompile pass (adds 1 to the entry's "
                        "first numeric output) right after the named pass.",
                        "PASS")),
      Hidden(StringFlag("xla_test_miscompile_kernel", &D::xla_test_miscompile_kernel,
                        "Test only: the CPU/GPU kernel of the named HLO instruction adds 1 to "
                        "every value it stores.",
                        "HLO_NAME")),
      BoolFlag("xla_gpu_xlens_naive_emitters", &D::xla_gpu_xlens_naive_emitters,
               "GPU kernels one thread per output element (reductions, transposes and dots "
               "included) instead of warp reductions, shared-memory tiles and the tiled GEMM: "
               "the kernels before and after, to compare."),
      BoolFlag("xla_gpu_xlens_split_launches", &D::xla_gpu_xlens_split_launches,
               "GPU GEMMs with few output tiles split K, and column reductions with few column "
               "tiles split their rows, across blocks (partial results combined by a second "
               "kernel); false: the one tiled kernel, to compare."),
      FlagSpec{{"tf_xla_auto_jit", "string", "",
                "Auto-clustering: -1 off, 0 as the session config says, 1 on for likely wins, 2 "
                "on for everything; single-gpu(N) or fusible.",
                true},
               SetAutoJit,
               [](const D& o) { return o.tf_xla_auto_jit; }},
      BoolFlag("tf_xla_cpu_global_jit", &D::tf_xla_cpu_global_jit,
               "Let auto-clustering compile operators placed on the CPU too.", true),
      IntFlag("tf_xla_min_cluster_size", &D::tf_xla_min_cluster_size,
              "Smallest number of operators in an auto-clustered XLA computation.", 1, true),
      IntFlag("tf_xla_max_cluster_size", &D::tf_xla_max_cluster_size,
              "Largest number of operators in an auto-clustered XLA computation.", 1, true),
      BoolFlag("tf_xla_clustering_debug", &D::tf_xla_clustering_debug,
               "Dump the graph before and after each clustering pass under "
               "$TF_DUMP_GRAPH_PREFIX.",
               true),
      StringFlag("tf_dump_graph_prefix", &D::tf_dump_graph_prefix,
                 "Directory for the clustering graphs (as $TF_DUMP_GRAPH_PREFIX, which it "
                 "overrides; written with --tf_xla_clustering_debug).",
                 "DIR", true),
      StringFlag("tf_xla_ops_to_cluster", &D::tf_xla_ops_to_cluster,
                 "Comma-separated ops or op groups (PW, RED, PWRED, REDUCEWINDOW, "
                 "REDUCEWINDOWPW, BN, Conv, SORT, MISC, FUSIBLE) that auto-clustering may take; "
                 "empty for all.",
                 "OPS", true),
      StringFlag("tf_xla_cluster_exclude_ops", &D::tf_xla_cluster_exclude_ops,
                 "Comma-separated ops auto-clustering leaves out (only Where is accepted).", "OPS",
                 true),
      IntFlag("tf_xla_clustering_fuel", &D::tf_xla_clustering_fuel,
              "Stop making nodes clustering candidates after this many (to bisect a bad "
              "cluster).",
              0, true),
      BoolFlag("tf_xla_deterministic_cluster_names", &D::tf_xla_deterministic_cluster_names,
               "Name clusters after a fingerprint of the graph, stable from run to run.", true),
      BoolFlag("tf_xla_disable_deadness_safety_checks_for_debugging",
               &D::tf_xla_disable_deadness_safety_checks_for_debugging,
               "Cluster across control-flow deadness (unsafe; for debugging).", true),
      BoolFlag("tf_xla_disable_resource_variable_safety_checks_for_debugging",
               &D::tf_xla_disable_resource_variable_safety_checks_for_debugging,
               "Cluster resource variable operations without keeping their order (unsafe; for "
               "debugging).",
               true),
  };
  DebugOptions defaults;
  for (FlagSpec& spec : specs) spec.info.default_value = spec.get(defaults);
  return specs;
}

const std::vector<FlagSpec>& Specs() {
  static const std::vector<FlagSpec> specs = MakeSpecs();
  return specs;
}

const FlagSpec* FindSpec(std::string_view name) {
  for (const FlagSpec& spec : Specs()) {
    if (spec.info.name == name) return &spec;
  }
  return nullptr;
}

// XLA flags that exist in XLA but not here, and what to use instead.
std::optional<std::string> UnsupportedHint(std::string_view name) {
  static const std::pair<std::string_view, std::string_view> kHints[] = {
      {"xla_dump_hlo_as_proto", "HLO protos are not written; use --xla_dump_hlo_as_text"},
      {"xla_dump_hlo_as_url", "there is no graph server; use --xla_dump_hlo_as_html"},
      {"xla_dump_hlo_as_long_text", "the .txt dump is always the long form"},
      {"xla_generate_hlo_graph",
       "it was removed from XLA; use --xla_dump_to=DIR --xla_dump_hlo_as_dot "
       "--xla_dump_hlo_pass_re=REGEX"},
  };
  for (const auto& [flag, hint] : kHints) {
    if (flag == name) return std::string(hint);
  }
  return std::nullopt;
}

enum class Source { kXlaFlags, kTfXlaFlags, kCommandLine };

std::string_view SourceName(Source source) {
  switch (source) {
    case Source::kXlaFlags: return "XLA_FLAGS";
    case Source::kTfXlaFlags: return "TF_XLA_FLAGS";
    case Source::kCommandLine: return "command line";
  }
  return "";
}

bool Accepts(Source source, const FlagInfo& info) {
  if (source == Source::kCommandLine) return true;
  return info.tf == (source == Source::kTfXlaFlags);
}

std::string UnknownFlag(std::string_view name, Source source) {
  const FlagInfo* best = nullptr;
  int best_distance = 0;
  for (const FlagSpec& spec : Specs()) {
    if (!Accepts(source, spec.info) || spec.info.hidden) continue;
    int d = EditDistance(name, spec.info.name);
    if (best == nullptr || d < best_distance) {
      best = &spec.info;
      best_distance = d;
    }
  }
  std::string message = fmt::format("unknown flag --{}", DisplayText(name));
  // A suggestion further away than this is noise, not a typo.
  if (best != nullptr && best_distance <= static_cast<int>(name.size()) / 2 + 1) {
    message += fmt::format("; did you mean --{}?", best->name);
  } else {
    message += " (the flags are listed by --help)";
  }
  return message;
}

// `where` starts the message: the variable or "command line", or FILE:LINE for a flags file.
Status ApplyFlag(std::string_view token, Source source, std::string_view where,
                 DebugOptions& options) {
  auto fail = [&](const std::string& message) {
    return Error(fmt::format("{}: {}", where, message));
  };
  std::string_view body = token;
  if (!body.starts_with("--")) {
    std::string_view bare = body.substr(body.find_first_not_of('-') == std::string_view::npos
                                            ? body.size()
                                            : body.find_first_not_of('-'));
    return fail(fmt::format("expected --name or --name=value, got '{}'{}", DisplayText(token),
                            bare.empty() ? ""
                                         : fmt::format("; did you mean --{}?", DisplayText(bare))));
  }
  body.remove_prefix(2);
  size_t eq = body.find('=');
  std::string_view name = body.substr(0, eq);
  std::optional<std::string_view> value;
  if (eq != std::string_view::npos) value = body.substr(eq + 1);

  const FlagSpec* spec = FindSpec(name);
  if (spec == nullptr) {
    if (std::optional<std::string> hint = UnsupportedHint(name)) {
      return fail(fmt::format("--{} is not supported by xlens: {}", DisplayText(name), *hint));
    }
    if (source == Source::kTfXlaFlags && where == "TF_XLA_FLAGS") {
      // TensorFlow's own words (parse_flags_from_env.cc), so a search for them finds this too.
      return Error(fmt::format("Unknown flag in TF_XLA_FLAGS: {} ({})", DisplayText(token),
                               UnknownFlag(name, source)));
    }
    return fail(UnknownFlag(name, source));
  }
  if (!Accepts(source, spec->info)) {
    return fail(
        fmt::format("--{} belongs in {}", DisplayText(name),
                    spec->info.tf ? "TF_XLA_FLAGS" : "XLA_FLAGS"));
  }
  Status status = spec->set(options, value);
  if (!status.ok()) return fail(status.message());
  return OkStatus();
}

// One flag as written, and the line of the flags file it starts on (1 for a variable's value).
struct FlagToken {
  std::string text;
  int64_t line = 1;
};

// Splits XLA_FLAGS-style text into flags with quotes removed. On an error, `error_line` is the
// line where the offending flag or word starts.
Status SplitFlagText(std::string_view text, std::vector<FlagToken>& tokens,
                     int64_t& error_line) {
  // Lines are counted as the scan moves on, so a long file costs one pass.
  int64_t line = 1;
  size_t counted = 0;
  auto line_at = [&](size_t offset) {
    line += std::count(text.begin() + counted, text.begin() + offset, '\n');
    counted = offset;
    return line;
  };
  size_t i = text.find_first_not_of(kWhitespace);
  while (i != std::string_view::npos && i < text.size()) {
    error_line = line_at(i);
    if (text[i] != '-') {
      size_t end = text.find_first_of(kWhitespace, i);
      return Error(fmt::format("expected a flag starting with --, got '{}'",
                               DisplayText(text.substr(i, end == std::string_view::npos ? end
                                                                                       : end - i))));
    }
    size_t eq = i;
    while (eq < text.size() && text[eq] != '=' &&
           kWhitespace.find(text[eq]) == std::string_view::npos) {
      ++eq;
    }
    std::string token(text.substr(i, eq - i));
    size_t next = eq;
    if (eq + 1 < text.size() && text[eq] == '=' && (text[eq + 1] == '"' || text[eq + 1] == '\'')) {
      // As XLA: a value is quoted only when the quote follows "=" directly; a backslash escapes
      // the next character inside double quotes, and is literal inside single quotes.
      const char quote = text[eq + 1];
      token += '=';
      size_t close = eq + 2;
      while (close < text.size() && text[close] != quote) {
        if (quote == '"' && text[close] == '\\' && close + 1 < text.size()) ++close;
        token += text[close];
        ++close;
      }
      if (close >= text.size()) {
        return Error(fmt::format("unterminated {} quote in '{}'",
                                 quote == '"' ? "double" : "single", DisplayText(text.substr(i))));
      }
      next = close + 1;
      if (next < text.size() && kWhitespace.find(text[next]) == std::string_view::npos) {
        return Error(
            fmt::format("expected a space after the closing quote in '{}'",
                        DisplayText(text.substr(i, text.find_first_of(kWhitespace, next) - i))));
      }
    } else {
      next = std::min(text.find_first_of(kWhitespace, eq), text.size());
      token = std::string(text.substr(i, next - i));
    }
    tokens.push_back(FlagToken{std::move(token), line});
    i = text.find_first_not_of(kWhitespace, next);
  }
  return OkStatus();
}

// The flags of an environment variable, and the file they came from (empty when they are the
// value itself).
struct EnvironmentFlags {
  std::string file;
  std::vector<FlagToken> tokens;

  // Where a message about `token` starts: the variable, or FILE:LINE so that an editor can jump
  // to it.
  std::string Where(std::string_view variable, const FlagToken& token) const {
    if (file.empty()) return std::string(variable);
    return fmt::format("{}:{}", DisplayPath(file), token.line);
  }
};

// As XLA does, a value that does not start with "-" names a file holding the flags. XLA stops
// when it cannot open the file; so do we, and, unlike fopen, ReadFile also refuses what is not a
// regular file (a directory would otherwise read as no flags at all, a FIFO would wait for a
// writer, /dev/zero would never end).
StatusOr<EnvironmentFlags> FlagsFromEnvironment(std::string_view value,
                                                std::string_view variable) {
  EnvironmentFlags out;
  size_t first = value.find_first_not_of(kWhitespace);
  if (first == std::string_view::npos) return out;
  std::string text(value);
  if (value[first] != '-') {
    out.file = std::string(value.substr(first, value.find_last_not_of(kWhitespace) - first + 1));
    StatusOr<std::string> contents = ReadFile(out.file);
    if (!contents.ok()) {
      return Error(
          fmt::format("{}={}: {}; a value that does not start with \"--\" is read as "
                      "the name of a file of flags",
                      variable, DisplayPath(out.file), contents.status().message()));
    }
    text = *std::move(contents);
  }
  int64_t error_line = 1;
  Status status = SplitFlagText(text, out.tokens, error_line);
  if (!status.ok()) return status.WithContext(out.Where(variable, FlagToken{"", error_line}));
  return out;
}

std::string QuoteIfNeeded(const std::string& value) {
  if (!value.empty() && value.find_first_of(" \t\r\n\"'\\") == std::string::npos) return value;
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

int EditDistance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

const std::vector<FlagInfo>& AllFlags() {
  static const std::vector<FlagInfo> flags = [] {
    std::vector<FlagInfo> out;
    for (const FlagSpec& spec : Specs()) {
      if (!spec.info.hidden) out.push_back(spec.info);
    }
    return out;
  }();
  return flags;
}

std::string FlagsHelp() {
  std::string out = "Flags in XLA_FLAGS (or on the command line):\n";
  auto list = [&](bool tf) {
    for (const FlagInfo& flag : AllFlags()) {
      if (flag.tf != tf) continue;
      std::string head = fmt::format("  --{}={}", flag.name,
                                     flag.default_value.empty() ? "\"\"" : flag.default_value);
      out += fmt::format("{:<46} ({}) {}\n", head, flag.type, flag.help);
    }
  };
  list(false);
  out += "Flags in TF_XLA_FLAGS (or on the command line):\n";
  list(true);
  out +=
      "Environment:\n"
      "  XLA_FLAGS, TF_XLA_FLAGS: space-separated --name=value; quote values with spaces; a "
      "value not starting with -- names a file of flags.\n"
      "  TF_DUMP_GRAPH_PREFIX: directory for the clustering graphs (.pbtxt, .dot) when "
      "--tf_xla_clustering_debug is on.\n";
  return out;
}

StatusOr<std::vector<std::string>> SplitFlagString(std::string_view text) {
  std::vector<FlagToken> tokens;
  int64_t error_line = 1;
  RETURN_IF_ERROR(SplitFlagText(text, tokens, error_line));
  std::vector<std::string> out;
  out.reserve(tokens.size());
  for (FlagToken& token : tokens) out.push_back(std::move(token.text));
  return out;
}

bool IsDebugFlag(std::string_view argument) {
  return argument.starts_with("--xla_") || argument.starts_with("--tf_xla_") ||
         argument.starts_with("--tf_dump_graph_prefix");
}

FlagEnvironment ReadFlagEnvironment() {
  auto get = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value == nullptr ? "" : value);
  };
  return FlagEnvironment{get("XLA_FLAGS"), get("TF_XLA_FLAGS"), get("TF_DUMP_GRAPH_PREFIX")};
}

StatusOr<DebugOptions> ParseDebugOptions(const FlagEnvironment& environment,
                                         const std::vector<std::string>& command_line_flags) {
  DebugOptions options;
  options.tf_dump_graph_prefix = environment.tf_dump_graph_prefix;
  for (Source source : {Source::kTfXlaFlags, Source::kXlaFlags}) {
    std::string_view variable = SourceName(source);
    ASSIGN_OR_RETURN(EnvironmentFlags flags,
                     FlagsFromEnvironment(source == Source::kXlaFlags ? environment.xla_flags
                                                                      : environment.tf_xla_flags,
                                          variable));
    for (const FlagToken& token : flags.tokens) {
      RETURN_IF_ERROR(ApplyFlag(token.text, source, flags.Where(variable, token), options));
    }
  }
  for (const std::string& token : command_line_flags) {
    RETURN_IF_ERROR(ApplyFlag(token, Source::kCommandLine, SourceName(Source::kCommandLine), options));
  }
  if (!options.xla_disable_hlo_passes.empty() && !options.xla_enable_hlo_passes_only.empty()) {
    return Error(
        "--xla_disable_hlo_passes and --xla_enable_hlo_passes_only cannot be used together");
  }
  return options;
}

StatusOr<DebugOptions> DebugOptionsFromEnvironment(
    const std::vector<std::string>& command_line_flags) {
  return ParseDebugOptions(ReadFlagEnvironment(), command_line_flags);
}

std::vector<std::pair<std::string, std::string>> DebugOptionsValues(const DebugOptions& options) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const FlagSpec& spec : Specs()) out.emplace_back(spec.info.name, spec.get(options));
  return out;
}

FlagStrings DebugOptionsToFlags(const DebugOptions& options) {
  FlagStrings out;
  const DebugOptions defaults;
  for (const FlagSpec& spec : Specs()) {
    std::string value = spec.get(options);
    if (value == spec.get(defaults)) continue;
    std::string& target = spec.info.tf ? out.tf_xla_flags : out.xla_flags;
    if (!target.empty()) target += ' ';
    target += fmt::format("--{}={}", spec.info.name, QuoteIfNeeded(value));
  }
  return out;
}

}  // namespace xlens
