#include "samples/sample_options.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <variant>

#include <fmt/format.h>

#include "compiler/cluster/xla_device_compiler.h"
#include "compiler/graph/executor.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/support/terminal_text.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/host_tracer.h"

namespace xlens::samples {

std::string_view JitModeName(JitMode mode) {
  switch (mode) {
    case JitMode::kOff: return "off";
    case JitMode::kDefault: return "default";
    case JitMode::kAuto: return "auto";
    case JitMode::kOn: return "on";
  }
  return "?";
}

namespace {

[[noreturn]] void Exit(const std::string& program, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program.c_str(), EscapeForTerminal(message).c_str());
  std::exit(1);
}

std::string Usage(const std::string& program, const std::string& description, JitMode default_jit,
                  const std::vector<SampleFlag>& extra) {
  std::string text = fmt::format("{}\n\nUsage: {} [options] [--xla_*=VALUE] [--tf_xla_*=VALUE]\n\n",
                                 description, program);
  text += fmt::format(
      "  --jit=off|default|auto|on  how TensorFlow is asked to compile (default: {}):\n"
      "                        off: op by op, no XLA; default: a default session (only\n"
      "                        jit_scope'd nodes, and what TF_XLA_FLAGS turns on); auto:\n"
      "                        auto-clustering, global_jit_level ON_1 with cpu_global_jit as\n"
      "                        tf.config.optimizer.set_jit(True) on the CPU; on: the whole graph\n"
      "                        as one must-compile function (tf.function(jit_compile=True))\n"
      "  --trace FILE          write a Chrome trace (Perfetto UI, xlens-viewer)\n"
      "  --write-graph DIR     write the sample's graph as DIR/graph.pbtxt (for xlens graph run)\n",
      JitModeName(default_jit));
  for (const SampleFlag& flag : extra) {
    text += fmt::format("  --{:<19} {}\n", flag.name + " V", flag.help);
  }
  text +=
      "  -h, --help            this help\n\n"
      "XLA and TF_XLA flags (--xla_dump_to=DIR, --tf_xla_clustering_debug, ...) are read from\n"
      "XLA_FLAGS, TF_XLA_FLAGS and TF_DUMP_GRAPH_PREFIX, then from the command line; `xlens flags`\n"
      "lists them all.\n";
  return text;
}

}  // namespace

SampleOptions ParseSampleOptions(int argc, char** argv, const std::string& program,
                                 const std::string& description, JitMode default_jit,
                                 const std::vector<SampleFlag>& extra) {
  // Line-buffered even into a pipe or a file, so the story and the JIT's lines on stderr stay in
  // the order they happened.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  SampleOptions options;
  options.program = program;
  options.jit = default_jit;
  // "--name=value" or "--name value": the value of an option that takes one.
  auto value_of = [&](int& i, std::string_view arg, std::string_view name) -> std::optional<std::string> {
    const std::string flag = "--" + std::string(name);
    if (arg == flag) {
      if (i + 1 >= argc) Exit(program, fmt::format("{}: expected a value", flag));
      return std::string(argv[++i]);
    }
    if (arg.starts_with(flag + "=")) return std::string(arg.substr(flag.size() + 1));
    return std::nullopt;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(Usage(program, description, default_jit, extra).c_str(), stdout);
      std::exit(0);
    }
    if (IsDebugFlag(arg)) {
      options.debug_flags.emplace_back(arg);
      continue;
    }
    if (auto v = value_of(i, arg, "jit")) {
      if (*v == "off") options.jit = JitMode::kOff;
      else if (*v == "default") options.jit = JitMode::kDefault;
      else if (*v == "auto") options.jit = JitMode::kAuto;
      else if (*v == "on") options.jit = JitMode::kOn;
      else Exit(program, fmt::format("--jit: '{}' is not one of off, default, auto, on", *v));
      continue;
    }
    if (auto v = value_of(i, arg, "trace")) {
      if (v->empty()) Exit(program, "--trace: expected a file name");
      options.trace = *v;
      continue;
    }
    if (auto v = value_of(i, arg, "write-graph")) {
      if (v->empty()) Exit(program, "--write-graph: expected a directory");
      options.write_graph = *v;
      continue;
    }
    bool matched = false;
    for (const SampleFlag& flag : extra) {
      if (auto v = value_of(i, arg, flag.name)) {
        *flag.value = *v;
        matched = true;
        break;
      }
    }
    if (!matched) {
      Exit(program, fmt::format("unknown argument '{}' (see {} --help)", TruncateUtf8(arg, 200),
                                program));
    }
  }
  auto flags = DebugOptionsFromEnvironment(options.debug_flags);
  if (!flags.ok()) Exit(program, flags.status().message());
  options.flags = std::move(*flags);
  return options;
}

int Fail(const SampleOptions& options, const Status& status) {
  std::fprintf(stderr, "%s: %s\n", options.program.c_str(),
               EscapeForTerminal(status.message()).c_str());
  return 1;
}

Status MaybeWriteGraph(const SampleOptions& options, const graph::GraphDef& def) {
  if (options.write_graph.empty()) return OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(options.write_graph, ec);
  if (ec) return Error(fmt::format("--write-graph {}: {}", options.write_graph, ec.message()));
  const std::string path = (std::filesystem::path(options.write_graph) / "graph.pbtxt").string();
  RETURN_IF_ERROR(graph::WriteGraphDef(path, def, graph::GraphDefFormat::kText));
  std::fprintf(stderr, "%s: wrote %s\n", options.program.c_str(), path.c_str());
  return OkStatus();
}

StatusOr<std::unique_ptr<SampleSession>> SampleSession::Create(const SampleOptions& options,
                                                               const graph::GraphDef& def,
                                                               JitMode jit,
                                                               const std::string& function_name) {
  std::unique_ptr<SampleSession> s(new SampleSession);
  s->log_ = std::make_shared<std::vector<std::string>>();
  graph::SessionOptions session_options;
  if (jit != JitMode::kOff) {
    auto log = s->log_;
    const std::string program = options.program;
    s->jit_ = std::make_unique<cluster::XlaJit>(options.flags, [log, program](const std::string& line) {
      log->push_back(line);
      std::fprintf(stderr, "%s: %s\n", program.c_str(), EscapeForTerminal(line).c_str());
    });
    if (jit == JitMode::kAuto) {
      session_options.global_jit_level = graph::GlobalJitLevel::kOn1;
      session_options.cpu_global_jit = true;
    }
    if (jit == JitMode::kOn) s->jit_->set_must_compile_function(function_name);
    s->jit_->Install(&session_options);
  }
  ASSIGN_OR_RETURN(s->session_, graph::Session::Create(def, session_options));
  return s;
}

SampleSession::~SampleSession() = default;

int64_t SampleSession::compilations() const {
  if (jit_ == nullptr) return 0;
  auto compiler = jit_->compiler();
  return compiler == nullptr ? 0 : compiler->compilations();
}

void PrintClustering(const cluster::XlaJitRecord& record) {
  auto list = [](const std::vector<std::string>& nodes) {
    return EscapeForTerminal(fmt::format("{{{}}}", fmt::join(nodes, ", ")));
  };
  for (const auto& g : record.graphs) {
    for (const auto& [cluster, nodes] : g.result.clusters) {
      std::printf("compiled: %s = %s\n", cluster.c_str(), list(nodes).c_str());
    }
    std::map<std::string, std::vector<std::string>> by_reason;
    for (const auto& [node, reason] : g.result.unclustered) {
      if (node.starts_with("_arg_") || node.starts_with("_retval_")) continue;
      by_reason[reason].push_back(node);
    }
    for (const auto& [node, reason] : g.result.declustered) by_reason[reason].push_back(node);
    for (const auto& [reason, nodes] : by_reason) {
      std::printf("left out: %s: %s\n", list(nodes).c_str(), EscapeForTerminal(reason).c_str());
    }
  }
}

Status StartTrace() {
  profiler::SetCurrentThreadName("main");
  if (!profiler::TracerSession::Start()) return Error("--trace: another trace is being recorded");
  return OkStatus();
}

profiler::Trace StopTrace() { return profiler::TracerSession::Stop(); }

Status MaybeWriteTrace(const SampleOptions& options, const profiler::Trace& trace) {
  if (options.trace.empty()) return OkStatus();
  RETURN_IF_ERROR(profiler::WriteChromeTrace(trace, options.trace));
  std::fprintf(stderr, "%s: wrote %zu trace events to %s\n", options.program.c_str(),
               trace.events.size(), options.trace.c_str());
  return OkStatus();
}

KernelCount CountKernels(const profiler::Trace& trace) {
  static const std::set<std::string> kBookkeeping = {"Const", "NoOp", "Identity", "Placeholder"};
  KernelCount count;
  for (const profiler::TraceEvent& e : trace.events) {
    if (profiler::IsKernelCategory(e.category)) {
      ++count.compiled;
      count.names.push_back(fmt::format("{} ({})", e.name, e.category));
      continue;
    }
    if (e.category != graph::kTfOpCategory) continue;
    const profiler::TraceArg* op = profiler::FindArg(e, "op");
    const std::string* op_type = op == nullptr ? nullptr : std::get_if<std::string>(&op->value);
    const std::string type = op_type == nullptr ? "" : *op_type;
    // _Arg, _Retval and the launch ops (_XlaCompile, _XlaRun, _XlaMerge) move data, they compute
    // nothing; so do the Switch/Identity a cluster's launch adds.
    if (type.empty() || type.starts_with("_") || kBookkeeping.count(type) > 0) continue;
    if (e.name.ends_with("/predicated_compilation_key") || e.name.ends_with("/data_as_ctrl")) continue;
    ++count.op_by_op;
    count.names.push_back(fmt::format("{} ({})", e.name, type));
  }
  return count;
}

}  // namespace xlens::samples
