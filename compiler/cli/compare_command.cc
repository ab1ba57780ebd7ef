// `xlens compare DIR [--backend cpu|gpu] [--module NAME] [--trace FILE] [--xlens-trace FILE]
// [--json FILE]`: XLA's own pipeline beside xlens's. For every module of a dump directory (XLA's,
// as jaxlib or TensorFlow wrote it, or xlens's own) that has both its before_optimizations and
// its {cpu,gpu}_after_optimizations HLO, xlens's pipeline runs on the very before_optimizations
// module, and the kernels of the two compilations are matched through the instructions they came
// from. No other tool compares two compilers of one module: XLA's hlo_diff compares two modules.
//
// A kernel is what `xlens inspect` calls one (xla_dump_kernels.h: a fusion, a dot, a custom call,
// a while loop, ... of the entry computation or of what control flow there runs), for both sides
// alike. XLA renames the instructions it fuses (sub.7 becomes sub.4), so names cannot match them;
// what both compilers keep is each instruction's metadata. Matching therefore compares ATOMS: an
// atom is one op_name (split at ';', which is how fusions join theirs) with the instruction's
// element type and count and the source location its stack frame or source_file/line gives
// ("jit(f)/jvp()/sub f32x64 @ f.py:7:11"), taken
// from every instruction the kernel runs (a fusion's fused instructions, nested fusions included;
// otherwise the instruction itself; parameters never). The rule:
//   1. Every pair of kernels (one XLA, one xlens) sharing an atom is a candidate, scored by the
//      Jaccard overlap of their atom sets, |A n B| / |A u B|. A kernel sharing no atom with any
//      kernel of the other side is compared by SHORT atoms, each op_name cut to its last '/'
//      component and without the element count, with the other side's kernels in the same
//      case: XLA's call inliner prefixes the caller's op_name to what it inlines
//      ("jit(f)/while/body/closed_call/dot_general" for a loop body's "dot_general"), which xlens
//      keeps as jax wrote it, and XLA's optimized module of a sharded program holds one device's
//      share of each value, xlens's the whole.
//   2. Candidates are taken best first (ties: XLA's program order, then xlens's), each kernel in
//      at most one pair: the matched pairs. A score of 1 is an exact match.
//   3. An XLA kernel sharing atoms with two or more xlens kernels is one XLA fused and xlens
//      split ("XLA fused more"), and the reverse ("xlens fused more"), whether or not paired.
//   4. A kernel left unpaired says why: it has no op_name to match by (a copy or layout change
//      the compiler added); no kernel of the other side runs any of its atoms (folded away or
//      never made); or its atoms are in kernels of the other side already paired more closely.
// With profiles (XLA's --trace, xlens's --xlens-trace from `xlens run --trace`), kernel events
// are linked to kernels as `xlens inspect` links them (hlo_op, else the event's name; hlo_module
// or module picks the module) and each pair shows both times. `--run` makes xlens's profile
// itself: `xlens run BEFORE --iterations N --trace` of each module, in a child process with a time
// limit, so a module that fails to run costs its times and nothing else. Constants XLA elided
// from the dump ({...}, as TensorFlow's dumps have them) are run as zeros: the times are wanted,
// not the values.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/printer.h"
#include "compiler/hlo/stack_frames.h"
#include "compiler/passes/hlo_optimizer.h"
#include "compiler/support/file_io.h"
#include "compiler/support/subprocess.h"
#include "compiler/support/temporary_directory.h"
#include "compiler/support/terminal_text.h"
#include "dump/dump_directory.h"
#include "dump/xla_dump_kernels.h"
#include "profiler/chrome_trace_reader.h"

namespace xlens::cli {
namespace {

struct KernelTime {
  int64_t events = 0;
  int64_t total_ns = 0;
};

struct SideKernel {
  std::string name;
  std::string kind;                       // the fusion kind, else the opcode
  std::vector<std::string> op_names;      // the kernel's and its fused instructions', first seen first
  std::vector<std::string> instructions;  // what it runs: a fusion's fused instructions, else itself
  std::set<std::string> atoms;            // what matching compares (the rule above)
  std::set<std::string> short_atoms;      // each op_name's last component, the element type, the location
  std::optional<DumpSourceLocation> source;
  std::optional<KernelTime> time;         // with a profile of this side
};

struct Pair {
  size_t xla = 0, xlens = 0;
  double jaccard = 0;
  size_t shared = 0;
  bool by_short_atoms = false;  // matched in the second round (step 1)
};

struct ModuleComparison {
  int64_t id = 0;
  std::string name, before_file, after_file, backend;
  std::vector<SideKernel> xla, xlens;
  std::vector<Pair> pairs;
  std::vector<int> xla_pair, xlens_pair;                       // index into pairs, -1: unpaired
  std::vector<std::vector<size_t>> xla_overlaps, xlens_overlaps;  // kernels of the other side sharing an atom
  std::vector<std::string> xla_reason, xlens_reason;          // why unpaired; empty when paired
  std::string run_problem;  // with --run: why xlens's kernels have no times
};

struct Skipped {
  int64_t id = 0;
  std::string name, reason;
};

void AddAtoms(const HloInstruction& instruction, SideKernel& kernel, std::set<std::string>& seen_op_names) {
  kernel.instructions.push_back(instruction.name());
  const std::string& op_name = instruction.metadata.op_name;
  if (op_name.empty()) return;
  if (seen_op_names.insert(op_name).second) kernel.op_names.push_back(op_name);
  std::optional<SourceFrame> source = InstructionSource(instruction);
  // The element type and count tell apart what one line does to several values (the update of
  // each parameter in a tree_map is one op_name at one line); a count, not the dimensions, so a
  // value one compiler transposes or reshapes is still the same atom.
  const Shape& shape = instruction.shape();
  std::string type = shape.IsArray() ? std::string(PrimitiveTypeName(shape.element_type()))
                                     : shape.ToString(/*print_layout=*/false);
  std::string at = source && !source->file.empty() ? " @ " + source->Location() : "";
  std::string where = " " + type + (shape.IsArray() ? fmt::format("x{}", shape.num_elements()) : "") + at;
  size_t start = 0;
  while (start <= op_name.size()) {
    size_t end = std::min(op_name.find(';', start), op_name.size());
    std::string_view piece = std::string_view(op_name).substr(start, end - start);
    if (!piece.empty()) kernel.atoms.insert(std::string(piece) + where);
    if (size_t slash = piece.rfind('/'); slash != std::string_view::npos && slash + 1 < piece.size()) {
      piece.remove_prefix(slash + 1);
    }
    if (!piece.empty()) kernel.short_atoms.insert(std::string(piece) + " " + type + at);
    start = end + 1;
  }
}

void AddRunInstructions(const HloInstruction& instruction, SideKernel& kernel, std::set<std::string>& seen) {
  const HloComputation* fused =
      instruction.opcode() == HloOpcode::kFusion ? instruction.fused_computation() : nullptr;
  if (fused == nullptr) {
    AddAtoms(instruction, kernel, seen);
    return;
  }
  for (const HloInstruction* inner : fused->MakeInstructionPostOrder()) {
    if (inner->opcode() == HloOpcode::kParameter) continue;
    AddRunInstructions(*inner, kernel, seen);
  }
}

// The kernels of `module`, whose text is `text` (the kernel list is read from the text, the one
// definition `xlens inspect` uses; their instructions are looked up in `module`).
StatusOr<std::vector<SideKernel>> KernelsOf(const HloModule& module, std::string_view text, const std::string& file) {
  StatusOr<std::vector<DerivedKernel>> derived = DeriveKernelsFromHlo(text, file);
  if (!derived.ok()) return derived.status();
  std::map<std::string, const HloInstruction*> by_name;
  for (const HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    for (const HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      by_name.emplace(instruction->name(), instruction);
    }
  }
  std::vector<SideKernel> kernels;
  for (DerivedKernel& d : *derived) {
    SideKernel kernel;
    kernel.name = d.kernel.name;
    kernel.kind = d.kernel.fusion_kind.empty() ? d.opcode : d.kernel.fusion_kind;
    kernel.source = d.source;
    auto it = by_name.find(d.kernel.hlo_instruction);
    if (it != by_name.end()) {
      std::set<std::string> seen;
      AddRunInstructions(*it->second, kernel, seen);
    } else {
      kernel.op_names = d.kernel.op_names;
    }
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

std::string Names(const std::vector<SideKernel>& kernels, const std::vector<size_t>& indices) {
  std::string out;
  for (size_t i : indices) out += (out.empty() ? "" : ", ") + DisplayText(kernels[i].name);
  return out;
}

// Steps 1-4 of the rule at the top of this file.
void Match(ModuleComparison& m) {
  std::vector<Pair> candidates;
  m.xla_overlaps.assign(m.xla.size(), {});
  m.xlens_overlaps.assign(m.xlens.size(), {});
  for (bool short_atoms : {false, true}) {
    // The second round only among kernels the first left without any overlap.
    std::vector<bool> xla_alone(m.xla.size()), xlens_alone(m.xlens.size());
    for (size_t i = 0; i < m.xla.size(); ++i) xla_alone[i] = m.xla_overlaps[i].empty();
    for (size_t j = 0; j < m.xlens.size(); ++j) xlens_alone[j] = m.xlens_overlaps[j].empty();
    // Through an index of xlens's atoms, so a module of thousands of kernels costs the overlaps
    // there are, not every pair.
    std::map<std::string_view, std::vector<size_t>> index;
    for (size_t j = 0; j < m.xlens.size(); ++j) {
      if (short_atoms && !xlens_alone[j]) continue;
      for (const std::string& atom : short_atoms ? m.xlens[j].short_atoms : m.xlens[j].atoms) index[atom].push_back(j);
    }
    for (size_t i = 0; i < m.xla.size(); ++i) {
      if (short_atoms && !xla_alone[i]) continue;
      const std::set<std::string>& a = short_atoms ? m.xla[i].short_atoms : m.xla[i].atoms;
      std::map<size_t, size_t> shared_with;  // xlens kernel -> atoms shared, in xlens's order
      for (const std::string& atom : a) {
        auto it = index.find(atom);
        if (it == index.end()) continue;
        for (size_t j : it->second) ++shared_with[j];
      }
      for (const auto& [j, shared] : shared_with) {
        const std::set<std::string>& b = short_atoms ? m.xlens[j].short_atoms : m.xlens[j].atoms;
        m.xla_overlaps[i].push_back(j);
        m.xlens_overlaps[j].push_back(i);
        double jaccard = static_cast<double>(shared) / static_cast<double>(a.size() + b.size() - shared);
        candidates.push_back({i, j, jaccard, shared, short_atoms});
      }
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Pair& a, const Pair& b) { return a.jaccard > b.jaccard; });
  m.xla_pair.assign(m.xla.size(), -1);
  m.xlens_pair.assign(m.xlens.size(), -1);
  for (const Pair& c : candidates) {
    if (m.xla_pair[c.xla] >= 0 || m.xlens_pair[c.xlens] >= 0) continue;
    m.xla_pair[c.xla] = m.xlens_pair[c.xlens] = static_cast<int>(m.pairs.size());
    m.pairs.push_back(c);
  }
  std::sort(m.pairs.begin(), m.pairs.end(), [](const Pair& a, const Pair& b) { return a.xla < b.xla; });
  for (size_t p = 0; p < m.pairs.size(); ++p) {
    m.xla_pair[m.pairs[p].xla] = m.xlens_pair[m.pairs[p].xlens] = static_cast<int>(p);
  }
  auto reasons = [](const std::vector<SideKernel>& side, const std::vector<int>& paired,
                    const std::vector<std::vector<size_t>>& overlaps, const std::vector<SideKernel>& other,
                    const char* other_name) {
    std::vector<std::string> out(side.size());
    for (size_t i = 0; i < side.size(); ++i) {
      if (paired[i] >= 0) continue;
      if (side[i].atoms.empty()) {
        out[i] = "no op_name to match by (the compiler added it: a copy, a layout change, ...)";
      } else if (overlaps[i].empty()) {
        out[i] = fmt::format("no {} kernel runs any of its op_names (folded away, or never a kernel there)", other_name);
      } else {
        out[i] = fmt::format("its op_names are in {} kernel{} {}, paired more closely", other_name,
                             overlaps[i].size() == 1 ? "" : "s", Names(other, overlaps[i]));
      }
    }
    return out;
  };
  m.xla_reason = reasons(m.xla, m.xla_pair, m.xla_overlaps, m.xlens, "xlens");
  m.xlens_reason = reasons(m.xlens, m.xlens_pair, m.xlens_overlaps, m.xla, "XLA");
}

// The module's HLO files: the one before optimizations and XLA's optimized one.
void FindFiles(const ManifestModule& module, std::string& before, std::string& after) {
  for (const std::string& file : module.files) {
    if (file.ends_with(".before_optimizations.txt") || file == "before_optimizations.txt") before = file;
    if (file.ends_with("after_optimizations.txt")) after = file;
  }
}

StatusOr<ModuleComparison> Compare(const std::string& directory, const ManifestModule& module,
                                   const std::string& before, const std::string& after, const std::string& backend) {
  ModuleComparison m;
  m.id = module.id;
  m.name = module.name;
  m.before_file = before;
  m.after_file = after;
  m.backend = backend != "auto" ? backend : after.find("gpu_after_optimizations") != std::string::npos ? "gpu" : "cpu";
  const std::string after_path = directory + "/" + after;
  StatusOr<std::string> after_text = ReadFile(after_path);
  if (!after_text.ok()) return after_text.status();
  StatusOr<std::unique_ptr<HloModule>> xla_module =
      ParseHloModule(*after_text, ParseOptions{.verify = false, .filename = after_path});
  if (!xla_module.ok()) return xla_module.status();
  StatusOr<std::vector<SideKernel>> xla = KernelsOf(**xla_module, *after_text, after_path);
  if (!xla.ok()) return xla.status();
  m.xla = std::move(*xla);

  const std::string before_path = directory + "/" + before;
  StatusOr<std::string> before_text = ReadFile(before_path);
  if (!before_text.ok()) return before_text.status();
  StatusOr<std::unique_ptr<HloModule>> ours = ParseHloModule(*before_text, ParseOptions{.verify = true, .filename = before_path});
  if (!ours.ok()) return ours.status();
  OptimizeOptions options;
  options.backend = m.backend == "gpu" ? Backend::kGpu : Backend::kCpu;
  StatusOr<OptimizeResult> optimized = OptimizeHloModule(**ours, options);
  if (!optimized.ok()) return optimized.status().WithContext("xlens's " + m.backend + " pipeline on " + before_path);
  std::string ours_text = PrintModule(**ours);
  StatusOr<std::vector<SideKernel>> xlens = KernelsOf(**ours, ours_text, "xlens's optimized " + before_path);
  if (!xlens.ok()) return xlens.status();
  m.xlens = std::move(*xlens);
  Match(m);
  return m;
}

// Kernel events of a profile, summed per (module, hlo_op); module "" for events that name none.
class TimesVisitor : public profiler::ChromeTraceVisitor {
 public:
  bool WantsFlows() const override { return false; }
  void OnEvent(profiler::TraceEvent& event) override {
    ++events;
    std::string op = event.name, module;
    const profiler::TraceArg* hlo_op = profiler::FindArg(event, "hlo_op");
    if (hlo_op != nullptr) {
      if (auto* text = std::get_if<std::string>(&hlo_op->value)) op = *text;
    }
    for (const char* key : {"hlo_module", "module"}) {
      const profiler::TraceArg* arg = profiler::FindArg(event, key);
      if (arg == nullptr) continue;
      if (auto* text = std::get_if<std::string>(&arg->value)) module = *text;
      break;
    }
    if (hlo_op == nullptr && !profiler::IsKernelCategory(event.category)) return;
    ++kernel_events;
    KernelTime& time = times[{module, op}];
    ++time.events;
    time.total_ns += event.duration_ns;
  }
  // The kernel's time: the events naming its module, and those naming no module.
  std::optional<KernelTime> Find(const std::string& module, const std::string& kernel) {
    std::optional<KernelTime> out;
    for (const std::string& m : {module, std::string()}) {
      auto it = times.find({m, kernel});
      if (it == times.end()) continue;
      if (!out) out.emplace();
      out->events += it->second.events;
      out->total_ns += it->second.total_ns;
      if (linked_keys.insert(it->first).second) linked_events += it->second.events;
    }
    return out;
  }

  int64_t events = 0, kernel_events = 0, linked_events = 0;

 private:
  std::map<std::pair<std::string, std::string>, KernelTime> times;
  std::set<std::pair<std::string, std::string>> linked_keys;
};

nlohmann::json TraceJson(const std::string& file, const TimesVisitor& visitor) {
  return {{"file", file}, {"events", visitor.events}, {"kernel_events", visitor.kernel_events},
          {"linked_events", visitor.linked_events}};
}

nlohmann::json KernelJson(const SideKernel& kernel, const std::vector<SideKernel>& other, int pair,
                          const std::vector<Pair>& pairs, bool is_xla, const std::string& reason) {
  nlohmann::json k{{"name", kernel.name}, {"kind", kernel.kind}, {"op_names", kernel.op_names},
                   {"instructions", kernel.instructions}};
  if (kernel.source) {
    k["source"] = {{"file", kernel.source->file}, {"line", kernel.source->line}, {"function", kernel.source->function}};
  } else {
    k["source"] = nullptr;
  }
  if (pair >= 0) {
    k["matched"] = other[is_xla ? pairs[pair].xlens : pairs[pair].xla].name;
  } else {
    k["matched"] = nullptr;
    k["reason"] = reason;
  }
  if (kernel.time) {
    k["trace"] = {{"events", kernel.time->events}, {"total_us", static_cast<double>(kernel.time->total_ns) / 1000.0}};
  }
  return k;
}

nlohmann::json ModuleJson(const ModuleComparison& m) {
  nlohmann::json j{{"id", m.id}, {"name", m.name}, {"before", m.before_file}, {"after", m.after_file},
                   {"backend", m.backend}};
  j["xla"] = {{"kernel_count", m.xla.size()}, {"kernels", nlohmann::json::array()}};
  j["xlens"] = {{"kernel_count", m.xlens.size()}, {"kernels", nlohmann::json::array()}};
  for (size_t i = 0; i < m.xla.size(); ++i) {
    j["xla"]["kernels"].push_back(KernelJson(m.xla[i], m.xlens, m.xla_pair[i], m.pairs, true, m.xla_reason[i]));
  }
  for (size_t i = 0; i < m.xlens.size(); ++i) {
    j["xlens"]["kernels"].push_back(KernelJson(m.xlens[i], m.xla, m.xlens_pair[i], m.pairs, false, m.xlens_reason[i]));
  }
  j["pairs"] = nlohmann::json::array();
  for (const Pair& p : m.pairs) {
    j["pairs"].push_back({{"xla", m.xla[p.xla].name}, {"xlens", m.xlens[p.xlens].name}, {"jaccard", p.jaccard},
                          {"shared_atoms", p.shared}, {"exact", p.jaccard == 1.0},
                          {"by", p.by_short_atoms ? "short_atoms" : "atoms"}});
  }
  auto fused_more = [](const std::vector<SideKernel>& side, const std::vector<std::vector<size_t>>& overlaps,
                       const std::vector<SideKernel>& other, const char* key) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < side.size(); ++i) {
      if (overlaps[i].size() < 2) continue;
      nlohmann::json names = nlohmann::json::array();
      for (size_t o : overlaps[i]) names.push_back(other[o].name);
      out.push_back({{"kernel", side[i].name}, {key, names}});
    }
    return out;
  };
  if (!m.run_problem.empty()) j["xlens_run_problem"] = m.run_problem;
  j["xla_fused_more"] = fused_more(m.xla, m.xla_overlaps, m.xlens, "xlens_kernels");
  j["xlens_fused_more"] = fused_more(m.xlens, m.xlens_overlaps, m.xla, "xla_kernels");
  return j;
}

std::string Time(const std::optional<KernelTime>& time) {
  if (!time) return "-";
  return fmt::format("{:.3f} us in {}", static_cast<double>(time->total_ns) / 1000.0, time->events);
}

std::string ModuleText(const ModuleComparison& m, bool times) {
  size_t exact = 0;
  for (const Pair& p : m.pairs) exact += p.jaccard == 1.0 && !p.by_short_atoms;
  std::string out = fmt::format(
      "module {} {}: XLA {} kernels ({}), xlens {} kernels ({} pipeline); {} matched ({} exactly), {} only in XLA, {} only in xlens\n",
      m.id, DisplayText(m.name, 200), m.xla.size(), DisplayPath(m.after_file), m.xlens.size(), m.backend,
      m.pairs.size(), exact, m.xla.size() - m.pairs.size(), m.xlens.size() - m.pairs.size());
  for (const Pair& p : m.pairs) {
    const SideKernel& a = m.xla[p.xla];
    const SideKernel& b = m.xlens[p.xlens];
    out += fmt::format("  matched {} ({}) <-> {} ({})  overlap {:.2f}{}", DisplayText(a.name), DisplayText(a.kind),
                       DisplayText(b.name), DisplayText(b.kind), p.jaccard,
                       p.by_short_atoms ? " (op_names' last components)" : "");
    const std::optional<DumpSourceLocation>& source = a.source ? a.source : b.source;
    if (source) out += fmt::format("  {}:{}", DisplayText(source->file, 200), source->line);
    if (times) out += fmt::format("  XLA {}, xlens {}", Time(a.time), Time(b.time));
    out += "\n";
  }
  for (size_t i = 0; i < m.xla.size(); ++i) {
    if (m.xla_overlaps[i].size() < 2) continue;
    out += fmt::format("  XLA fused more: {} ({}) runs what xlens runs as {} kernels: {}\n", DisplayText(m.xla[i].name),
                       DisplayText(m.xla[i].kind), m.xla_overlaps[i].size(), Names(m.xlens, m.xla_overlaps[i]));
  }
  for (size_t i = 0; i < m.xlens.size(); ++i) {
    if (m.xlens_overlaps[i].size() < 2) continue;
    out += fmt::format("  xlens fused more: {} ({}) runs what XLA runs as {} kernels: {}\n", DisplayText(m.xlens[i].name),
                       DisplayText(m.xlens[i].kind), m.xlens_overlaps[i].size(), Names(m.xla, m.xlens_overlaps[i]));
  }
  for (size_t i = 0; i < m.xla.size(); ++i) {
    if (m.xla_pair[i] >= 0) continue;
    out += fmt::format("  only in XLA: {} ({}): {}{}\n", DisplayText(m.xla[i].name), DisplayText(m.xla[i].kind),
                       m.xla_reason[i], times ? "  " + Time(m.xla[i].time) : "");
  }
  for (size_t i = 0; i < m.xlens.size(); ++i) {
    if (m.xlens_pair[i] >= 0) continue;
    out += fmt::format("  only in xlens: {} ({}): {}{}\n", DisplayText(m.xlens[i].name), DisplayText(m.xlens[i].kind),
                       m.xlens_reason[i], times ? "  " + Time(m.xlens[i].time) : "");
  }
  if (!m.run_problem.empty()) out += "  xlens's kernels not timed: " + DisplayText(m.run_problem, 400) + "\n";
  return out;
}

Status ReadTrace(const std::string& path, TimesVisitor& visitor, const char* flag) {
  StatusOr<profiler::ChromeTraceHeader> header = profiler::StreamChromeTrace(path, visitor);
  if (!header.ok()) return header.status().WithContext(flag);
  return Status();
}

// `xlens run` of the module's before_optimizations HLO with a trace, read into the xlens kernels.
void TimeByRunning(const std::string& directory, const CompareArgs& args, ModuleComparison& m) {
  StatusOr<TemporaryDirectory> tmp = TemporaryDirectory::Create("compare");
  if (!tmp.ok()) {
    m.run_problem = tmp.status().message();
    return;
  }
  const std::string trace = tmp->path() + "/xlens_trace.json";
  constexpr double kRunTimeoutSeconds = 300;
  StatusOr<CommandOutcome> run = RunCommand(
      {"/proc/self/exe", "run", directory + "/" + m.before_file, "--backend", m.backend == "gpu" ? "gpu-sim" : "cpu",
       "--iterations", std::to_string(args.iterations), "--trace", trace, "--fill_elided_constants", "zeros"},
      kRunTimeoutSeconds);
  if (!run.ok()) {
    m.run_problem = run.status().message();
    return;
  }
  if (run->timed_out || run->signal != 0 || run->exit_code != 0) {
    std::string last = run->output;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    if (size_t nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
    m.run_problem = "xlens run: " + run->Describe(kRunTimeoutSeconds) + (last.empty() ? "" : ": " + last);
    return;
  }
  TimesVisitor visitor;
  if (Status read = ReadTrace(trace, visitor, "xlens run's trace"); !read.ok()) {
    m.run_problem = read.message();
    return;
  }
  for (SideKernel& k : m.xlens) k.time = visitor.Find(m.name, k.name);
}

}  // namespace

int RunCompare(const CompareArgs& args) {
  if (args.backend != "auto" && args.backend != "cpu" && args.backend != "gpu") {
    return Fail(Error(fmt::format("compare: --backend: expected cpu, gpu or auto, found '{}'", DisplayText(args.backend))));
  }
  DumpDirectory dump = ReadDumpDirectory(args.directory);
  if (dump.source == DumpDirectory::Source::kNone) {
    return Fail(Error("compare: " + (dump.problems.empty() ? DisplayPath(args.directory) : dump.problems.front())));
  }
  std::vector<ModuleComparison> compared;
  std::vector<Skipped> skipped;
  for (const ManifestModule& module : dump.manifest.modules) {
    if (!args.module.empty() && module.name.find(args.module) == std::string::npos) continue;
    std::string before, after;
    FindFiles(module, before, after);
    if (before.empty() || after.empty()) {
      skipped.push_back({module.id, module.name,
                         before.empty() ? "no before_optimizations HLO text" : "no *_after_optimizations HLO text"});
      continue;
    }
    StatusOr<ModuleComparison> m = Compare(dump.directory, module, before, after, args.backend);
    if (!m.ok()) {
      skipped.push_back({module.id, module.name, m.status().message()});
      continue;
    }
    compared.push_back(std::move(*m));
  }
  if (compared.empty()) {
    std::string why = skipped.empty() ? (args.module.empty() ? "it holds no module" : "no module's name contains '" + DisplayText(args.module) + "'")
                                       : fmt::format("module {} {}: {}", skipped.front().id, DisplayText(skipped.front().name, 200),
                                                     DisplayText(skipped.front().reason, 400));
    return Fail(Error(fmt::format("compare: {}: no module to compare (one with before_optimizations and "
                                  "*_after_optimizations HLO that both compile); {}{}",
                                  DisplayPath(args.directory), why,
                                  skipped.size() > 1 ? fmt::format(" (and {} more)", skipped.size() - 1) : "")));
  }
  if (args.run && !args.xlens_trace.empty()) {
    return Fail(Error("compare: --run makes xlens's profile itself: give it or --xlens-trace, not both"));
  }
  if (args.iterations < 1) return Fail(Error(fmt::format("compare: --iterations: expected 1 or more, found {}", args.iterations)));
  std::optional<TimesVisitor> xla_trace, xlens_trace;
  if (!args.trace.empty()) {
    xla_trace.emplace();
    if (Status s = ReadTrace(args.trace, *xla_trace, "--trace"); !s.ok()) return Fail(s);
  }
  if (!args.xlens_trace.empty()) {
    xlens_trace.emplace();
    if (Status s = ReadTrace(args.xlens_trace, *xlens_trace, "--xlens-trace"); !s.ok()) return Fail(s);
  }
  for (ModuleComparison& m : compared) {
    if (xla_trace) {
      for (SideKernel& k : m.xla) k.time = xla_trace->Find(m.name, k.name);
    }
    if (xlens_trace) {
      for (SideKernel& k : m.xlens) k.time = xlens_trace->Find(m.name, k.name);
    }
    if (args.run) TimeByRunning(dump.directory, args, m);
  }
  const bool times = xla_trace || xlens_trace || args.run;
  if (!args.json.empty()) {
    nlohmann::json root{{"directory", dump.directory}, {"modules", nlohmann::json::array()},
                        {"skipped", nlohmann::json::array()}};
    for (const ModuleComparison& m : compared) root["modules"].push_back(ModuleJson(m));
    for (const Skipped& s : skipped) root["skipped"].push_back({{"id", s.id}, {"name", s.name}, {"reason", s.reason}});
    if (xla_trace) root["trace"] = TraceJson(args.trace, *xla_trace);
    if (xlens_trace) root["xlens_trace"] = TraceJson(args.xlens_trace, *xlens_trace);
    std::string text = root.dump(1) + "\n";
    if (args.json == "-") {
      if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
        return Fail(Error("cannot write the JSON to standard output"));
      }
      return 0;
    }
    if (Status written = WriteFile(args.json, text); !written.ok()) return Fail(written);
  }
  std::string out;
  for (const ModuleComparison& m : compared) out += ModuleText(m, times);
  for (const Skipped& s : skipped) {
    out += fmt::format("module {} {}: not compared: {}\n", s.id, DisplayText(s.name, 200), DisplayText(s.reason, 400));
  }
  auto trace_line = [](const char* who, const std::string& file, const TimesVisitor& v) {
    return fmt::format("{} trace {}: {} events, {} kernel events, {} linked to a compared kernel\n", who,
                       DisplayPath(file), v.events, v.kernel_events, v.linked_events);
  };
  if (xla_trace) out += trace_line("XLA", args.trace, *xla_trace);
  if (xlens_trace) out += trace_line("xlens", args.xlens_trace, *xlens_trace);
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    return Fail(Error("cannot write to standard output"));
  }
  return 0;
}

}  // namespace xlens::cli
