#include "dump/xla_dump_names.h"

#include <charconv>
#include <vector>

#include "dump/dump_names.h"

namespace xlens {
namespace {

bool IsDigits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// A decimal counter as XLA writes one: at least `min_digits`, at most 18 (so it fits an int64).
int64_t Counter(std::string_view text, size_t min_digits) {
  if (text.size() < min_digits || text.size() > 18 || !IsDigits(text)) return -1;
  int64_t value = -1;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t at = text.find(separator, start);
    parts.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

std::string Join(const std::vector<std::string_view>& parts, size_t begin, size_t end) {
  std::string joined;
  for (size_t i = begin; i < end; ++i) {
    if (i > begin) joined += '.';
    joined += parts[i];
  }
  return joined;
}

// The extensions XLA gives a module dump (text, --xla_dump_hlo_as_dot/html/proto/url).
bool IsHloExtension(std::string_view ext) {
  return ext == "txt" || ext == "dot" || ext == "html" || ext == "pb" || ext == "pbtxt" || ext == "url" ||
         ext == "json";
}

// What follows a whole-module dump's kind: ".txt", and the other renderings XLA adds
// (--xla_dump_hlo_as_proto: ".hlo.pb", --xla_dump_hlo_as_html's ".top_level.html").
bool IsHloTail(std::string_view tail) {
  if (tail.size() < 2 || tail[0] != '.') return false;
  tail.remove_prefix(1);
  for (std::string_view middle : {"hlo.", "top_level."}) {
    if (tail.starts_with(middle) && IsHloExtension(tail.substr(middle.size()))) return true;
  }
  return IsHloExtension(tail);
}

// Splits `rest` ("NAME.SUFFIX") where `suffix` begins at `at`; the name is empty when the suffix
// is the whole of it (XLA left the name out), and the byte before the suffix must be a dot.
bool SplitAt(std::string_view rest, size_t at, XlaDumpFileName& out) {
  if (at > 0 && (at < 2 || rest[at - 1] != '.')) return false;
  out.module_name = at == 0 ? "" : std::string(rest.substr(0, at - 1));
  out.suffix = std::string(rest.substr(at));
  return true;
}

// "STEP.PIPELINE.after_PASS[.before_NEXT].EXT", the step counter rightmost that fits.
bool MatchPass(std::string_view rest, XlaDumpFileName& out) {
  std::vector<std::string_view> tokens = Split(rest, '.');
  const size_t n = tokens.size();
  if (n < 4 || !IsHloExtension(tokens[n - 1])) return false;
  for (size_t i = n - 4 + 1; i-- > 0;) {
    int64_t step = Counter(tokens[i], 4);
    if (step < 0 || tokens[i + 1].empty() || !tokens[i + 2].starts_with("after_")) continue;
    std::string passes = Join(tokens, i + 2, n - 1);
    for (std::string_view middle : {".hlo", ".top_level"}) {
      if (passes.ends_with(middle)) passes.resize(passes.size() - middle.size());
    }
    size_t before = passes.find(".before_");
    std::string pass = passes.substr(6, before == std::string::npos ? std::string::npos : before - 6);
    if (pass.empty()) continue;
    size_t start = 0;
    for (size_t t = 0; t < i; ++t) start += tokens[t].size() + 1;
    if (!SplitAt(rest, start, out)) continue;
    out.kind = XlaDumpFileKind::kPass;
    out.step = step;
    out.pipeline = std::string(tokens[i + 1]);
    out.pass = std::move(pass);
    if (before != std::string::npos) out.next_pass = passes.substr(before + 8);
    return true;
  }
  return false;
}

// "[NAME.]before_optimizations.EXT".
bool MatchBefore(std::string_view rest, XlaDumpFileName& out) {
  const std::string_view key = kBeforeOptimizations;
  size_t at = rest.rfind(key);
  if (at == std::string_view::npos) return false;
  std::string_view tail = rest.substr(at + key.size());
  if (!IsHloTail(tail)) return false;
  if (!SplitAt(rest, at, out)) return false;
  out.kind = XlaDumpFileKind::kBeforeOptimizations;
  return true;
}

// "[NAME.]{cpu_,gpu_,sm_9.0_gpu_,}after_optimizations[-REPORT].EXT".
bool MatchAfter(std::string_view rest, XlaDumpFileName& out) {
  const std::string_view key = kAfterOptimizations;
  size_t at = rest.rfind(key);
  if (at == std::string_view::npos) return false;
  std::string_view tail = rest.substr(at + key.size());
  bool report = false;
  if (!tail.empty() && tail[0] == '-') {
    size_t dot = tail.find('.');
    if (dot == std::string_view::npos || dot < 2) return false;
    for (char c : tail.substr(1, dot - 1)) {
      if (!(c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
    }
    tail = tail.substr(dot);
    report = true;
  }
  if (!IsHloTail(tail)) return false;
  // The backend prefix: nothing, "sm_X.Y_gpu_" (which holds a dot), or one word and '_'.
  size_t start = at;
  if (at > 0 && rest[at - 1] != '.') {
    std::string_view before = rest.substr(0, at);
    size_t sm = before.rfind("sm_");
    bool gpu_sm = false;
    if (sm != std::string_view::npos && (sm == 0 || before[sm - 1] == '.') && before.ends_with("_gpu_")) {
      std::string_view version = before.substr(sm + 3, before.size() - sm - 3 - 5);
      size_t dot = version.find('.');
      gpu_sm = dot != std::string_view::npos && IsDigits(version.substr(0, dot)) && IsDigits(version.substr(dot + 1));
      if (gpu_sm) start = sm;
    }
    if (!gpu_sm) {
      size_t dot = before.rfind('.');
      start = dot == std::string_view::npos ? 0 : dot + 1;
      std::string_view prefix = before.substr(start);
      if (prefix.size() < 2 || prefix.back() != '_') return false;
      for (char c : prefix) {
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
      }
    }
  }
  if (!SplitAt(rest, start, out)) return false;
  out.kind = report ? XlaDumpFileKind::kModuleReport : XlaDumpFileKind::kAfterOptimizations;
  return true;
}

// "[NAME.][KERNEL.]ir-{no-opt,with-opt}[-noconst].ll" and "[NAME.]obj-file.KERNEL.o".
bool MatchCode(std::string_view rest, XlaDumpFileName& out) {
  if (rest.ends_with(".ll")) {
    size_t at = rest.rfind("ir-");
    if (at == std::string_view::npos) return false;
    std::string_view variant = rest.substr(at, rest.size() - 3 - at);
    if (!variant.starts_with("ir-no-opt") && !variant.starts_with("ir-with-opt")) return false;
    if (!SplitAt(rest, at, out)) return false;
    out.kind = XlaDumpFileKind::kLlvmIr;
    // xlens names a kernel's IR after the variant: "ir-no-opt.KERNEL.ll" (LlvmIrSuffix).
    if (size_t dot = variant.find('.'); dot != std::string_view::npos) {
      out.kernel = std::string(variant.substr(dot + 1));
      return !out.kernel.empty();
    }
    // The kernel module's name is the last part of the name: on the CPU, "..._kernel_module".
    size_t dot = out.module_name.rfind('.');
    std::string last = dot == std::string::npos ? out.module_name : out.module_name.substr(dot + 1);
    if (last.ends_with("_kernel_module")) {
      out.kernel = last;
      out.module_name = dot == std::string::npos ? "" : out.module_name.substr(0, dot);
      out.suffix = last + "." + out.suffix;
    }
    return true;
  }
  if (rest.ends_with(".o")) {
    size_t at = rest.rfind("obj-file.");
    if (at == std::string_view::npos) return false;
    std::string_view kernel = rest.substr(at + 9, rest.size() - 2 - at - 9);
    if (kernel.empty() || !SplitAt(rest, at, out)) return false;
    out.kind = XlaDumpFileKind::kObjectFile;
    out.kernel = std::string(kernel);
    return true;
  }
  if (rest.ends_with(".mlir")) {
    size_t dot = rest.substr(0, rest.size() - 5).rfind('.');
    size_t at = dot == std::string_view::npos ? 0 : dot + 1;
    std::string_view last = rest.substr(at, rest.size() - 5 - at);
    if (last.empty() || !SplitAt(rest, at, out)) return false;
    out.kind = XlaDumpFileKind::kMlir;
    size_t kernel_end = last.find("_kernel_module");
    if (kernel_end != std::string_view::npos) out.kernel = std::string(last.substr(0, kernel_end + 14));
    return true;
  }
  if (rest == "ptx" || rest.ends_with(".ptx")) {
    out.module_name = rest.size() > 4 ? std::string(rest.substr(0, rest.size() - 4)) : "";
    out.suffix = std::string(kPtxSuffix);
    out.kind = XlaDumpFileKind::kPtx;
    return true;
  }
  return false;
}

bool MatchThunks(std::string_view rest, XlaDumpFileName& out) {
  for (std::string_view ext : {".txt", ".json", ".pb", ".pbtxt"}) {
    if (!rest.ends_with(ext)) continue;
    std::string_view stem = rest.substr(0, rest.size() - ext.size());
    size_t dot = stem.rfind('.');
    size_t at = dot == std::string_view::npos ? 0 : dot + 1;
    if (stem.substr(at).find(kThunkSequenceSuffix.substr(0, 14)) == std::string_view::npos) return false;
    if (!SplitAt(rest, at, out)) return false;
    out.kind = XlaDumpFileKind::kThunkSequence;
    return true;
  }
  return false;
}

// TensorFlow's graph dumps: "NAME[_N].{pbtxt,pb,dot,mlir}" (DumpGraphToFile and friends number
// a name's later dumps _1, _2, ...).
bool MatchTensorFlowGraph(std::string_view name, XlaDumpFileName& out) {
  std::string_view stem;
  for (std::string_view ext : {".pbtxt", ".pb", ".dot", ".mlir"}) {
    if (name.size() > ext.size() && name.ends_with(ext)) stem = name.substr(0, name.size() - ext.size());
  }
  if (stem.empty()) return false;
  for (char c : stem) {
    if (!(c == '_' || c == '-' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  out.kind = XlaDumpFileKind::kTensorFlowGraph;
  out.graph_stage = std::string(stem);
  size_t underscore = stem.rfind('_');
  // "..._cluster_3" names a cluster, not the third dump of a name.
  if (underscore != std::string_view::npos && underscore > 0 && !stem.substr(0, underscore).ends_with("_cluster")) {
    int64_t index = Counter(stem.substr(underscore + 1), 1);
    if (index >= 0) {
      out.graph_stage = std::string(stem.substr(0, underscore));
      out.graph_index = index;
    }
  }
  return true;
}

}  // namespace

std::string_view XlaDumpFileKindName(XlaDumpFileKind kind) {
  switch (kind) {
    case XlaDumpFileKind::kUnknown: return "unknown";
    case XlaDumpFileKind::kBeforeOptimizations: return "before_optimizations";
    case XlaDumpFileKind::kAfterOptimizations: return "after_optimizations";
    case XlaDumpFileKind::kPass: return "pass";
    case XlaDumpFileKind::kModuleReport: return "report";
    case XlaDumpFileKind::kLlvmIr: return "llvm_ir";
    case XlaDumpFileKind::kObjectFile: return "object_file";
    case XlaDumpFileKind::kMlir: return "mlir";
    case XlaDumpFileKind::kPtx: return "ptx";
    case XlaDumpFileKind::kThunkSequence: return "thunk_sequence";
    case XlaDumpFileKind::kDebugOptions: return "debug_options";
    case XlaDumpFileKind::kModuleDirectory: return "module_directory";
    case XlaDumpFileKind::kOtherModuleFile: return "module_file";
    case XlaDumpFileKind::kTensorFlowGraph: return "tensorflow_graph";
  }
  return "unknown";
}

std::string KernelOfKernelModule(std::string_view kernel_module) {
  constexpr std::string_view kSuffix = "_kernel_module";
  if (kernel_module.size() > kSuffix.size() && kernel_module.ends_with(kSuffix)) {
    kernel_module.remove_suffix(kSuffix.size());
  }
  return std::string(kernel_module);
}

XlaDumpFileName ParseXlaDumpFileName(std::string_view file_name, bool is_directory) {
  XlaDumpFileName out;
  const int64_t id = ModuleIdFromFileName(file_name);
  // --xla_dump_fusion_visualization: "COMPUTATION.module_NNNN.NAME._fusion.html".
  constexpr std::string_view kFusionPage = "_fusion.html";
  if (id < 0 && !is_directory && file_name.ends_with(kFusionPage)) {
    for (size_t at = file_name.find(".module_"); at != std::string_view::npos; at = file_name.find(".module_", at + 1)) {
      std::string_view tail = file_name.substr(at + 1);
      int64_t fusion_id = ModuleIdFromFileName(tail);
      if (fusion_id < 0 || !tail.starts_with("module_")) continue;
      std::string_view rest = tail.substr(tail.find('.') + 1);
      rest.remove_suffix(kFusionPage.size());
      if (rest.ends_with('.')) rest.remove_suffix(1);
      out.kind = XlaDumpFileKind::kOtherModuleFile;
      out.module_id = fusion_id;
      out.module_name = std::string(rest);
      out.suffix = std::string(file_name.substr(0, at)) + " fusion visualization";
      return out;
    }
  }
  if (id < 0) {
    if (!is_directory && MatchTensorFlowGraph(file_name, out)) return out;
    size_t module = file_name.find("module_");
    if (module != std::string_view::npos && (module == 0 || file_name[module - 1] == '.')) {
      out.reason = "named like an XLA module dump, but \"module_\" is not followed by a number of 4 to 18 digits "
                   "and a dot (after at most a timestamp)";
    } else if (is_directory) {
      out.reason = "a directory that is not an XLA module's (module_NNNN.NAME)";
    } else {
      out.reason = "not a name XLA's or TensorFlow's dumps use";
    }
    return out;
  }
  out.module_id = id;
  size_t module = file_name.find("module_");
  if (module > 0) out.timestamp = std::string(file_name.substr(0, module - 1));
  std::string_view rest = file_name.substr(file_name.find('.', module) + 1);
  if (is_directory) {
    out.kind = XlaDumpFileKind::kModuleDirectory;
    out.module_name = std::string(rest);
    return out;
  }
  if (rest.empty()) {
    out.reason = "named for a module, with nothing after the module number";
    return out;
  }
  if (rest == "debug_options" || rest.ends_with(".debug_options")) {
    SplitAt(rest, rest.size() - 13, out);
    out.kind = XlaDumpFileKind::kDebugOptions;
    return out;
  }
  // --xla_dump_hlo_snapshots: "NAME.snapshot.N.pb", N the execution's (signed) id.
  if (size_t at = rest.rfind("snapshot."); at != std::string_view::npos && rest.ends_with(".pb") &&
      SplitAt(rest, at, out)) {
    std::string_view number = rest.substr(at + 9, rest.size() - 3 - at - 9);
    if (!number.empty() && number[0] == '-') number.remove_prefix(1);
    if (Counter(number, 1) >= 0) {
      out.kind = XlaDumpFileKind::kOtherModuleFile;
      return out;
    }
    out.module_name.clear();
    out.suffix.clear();
  }
  if (MatchPass(rest, out) || MatchCode(rest, out) || MatchThunks(rest, out) || MatchBefore(rest, out) ||
      MatchAfter(rest, out)) {
    return out;
  }
  out = XlaDumpFileName{};
  out.module_id = id;
  out.reason = "named for module " + std::to_string(id) +
               ", but of no kind XLA's dumps write (not before/after_optimizations, a pass, IR, PTX, thunks, "
               "a report or debug_options)";
  return out;
}

}  // namespace xlens
