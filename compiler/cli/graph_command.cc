// `xlens graph print|dot|verify|run`: TensorFlow GraphDefs (.pb or .pbtxt, as TensorFlow writes
// them) loaded into the graph front end, shown, checked, and run op by op through a Session the
// way TensorFlow runs them without XLA.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/cluster/graph_run.h"
#include "compiler/cluster/xla_device_compiler.h"
#include "compiler/cluster/xla_jit.h"
#include "compiler/graph/function.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/graph_dot.h"
#include "compiler/graph/lower_functional_ops.h"
#include "compiler/graph/saved_model.h"
#include "compiler/graph/session.h"
#include "compiler/graph/variable_nodes.h"
#include "compiler/hlo/npy.h"
#include "compiler/support/activity.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "compiler/support/watchdog.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/host_tracer.h"

namespace xlens::cli {
namespace {

using graph::DataType;
using graph::Graph;
using graph::GraphDef;
using graph::Node;
using graph::PartialShape;
using graph::Tensor;

// Fail, with the whole message escaped: the graph core quotes node names and inputs from the
// file as they are, and a name may hold an escape sequence or a newline. One line, always.
int GraphFail(const Status& status) { return Fail(Error(EscapeForTerminal(status.message()))); }

Status InFile(const Status& status, const std::string& shown) {
  return cluster::InGraphFile(status, shown);
}

std::string Q(std::string_view name) { return cluster::QuoteName(name); }

struct LoadedGraph {
  GraphDef def;
  std::unique_ptr<Graph> graph;
  std::string shown;  // the path as messages show it
  std::shared_ptr<graph::SavedModel> saved_model;  // when the path is a SavedModel directory
};

// Reads, builds and (with infer_shapes) shape-infers a GraphDef; every error names the file.
StatusOr<LoadedGraph> LoadGraph(const std::string& path, bool allow_unknown_ops,
                                bool infer_shapes = true, const std::string& signature = "") {
  ActivityScope activity("reading GraphDef " + path);
  LoadedGraph loaded;
  loaded.shown = DisplayPath(path);
  auto def = ReadGraphInput(path, signature, &loaded.saved_model);
  if (!def.ok()) return InFile(def.status(), loaded.shown);
  loaded.def = std::move(*def);
  // Shapes are inferred after a SavedModel's call is inlined, below.
  auto built = cluster::BuildGraphToRun(loaded.def, loaded.shown, allow_unknown_ops,
                                        /*infer_shapes=*/false);
  if (!built.ok()) return built.status();
  loaded.graph = std::move(*built);
  // A SavedModel's signature is a call of its function: shown, checked and clustered inlined, as
  // TensorFlow's session inlines it before anything else sees the graph.
  if (loaded.saved_model != nullptr) {
    RETURN_IF_ERROR(InFile(graph::LowerFunctionalOps(loaded.graph.get()), loaded.shown));
  }
  if (infer_shapes) RETURN_IF_ERROR(InFile(loaded.graph->InferShapes(), loaded.shown));
  return loaded;
}

using cluster::TypeAndShape;

std::string OutputsText(const Node& n) {
  std::vector<std::string> outs;
  for (int i = 0; i < n.num_outputs(); ++i) {
    const PartialShape shape = i < static_cast<int>(n.output_shapes().size())
                                   ? n.output_shapes()[i]
                                   : PartialShape::UnknownRank();
    outs.push_back(TypeAndShape(n.output_type(i), shape));
  }
  return fmt::format("{}", fmt::join(outs, ", "));
}

// The node's inputs as a NodeDef writes them, from its edges (the Graph keeps no input list):
// data inputs in order ("src", "src:1"), then control inputs ("^src").
std::vector<std::string> InputNames(const Node& n) {
  std::vector<std::string> names;
  for (int i = 0; i < n.num_inputs(); ++i) {
    const graph::Edge* e = n.input_edge(i);
    if (e == nullptr) {
      names.push_back("?");
      continue;
    }
    names.push_back(e->src_output == 0 ? e->src->name()
                                       : e->src->name() + ":" + std::to_string(e->src_output));
  }
  for (const graph::Edge* e : n.in_edges()) {
    if (e->IsControlEdge() && e->src->IsOp()) names.push_back("^" + e->src->name());
  }
  return names;
}

// TensorFlow's SummarizeNodeDef, with the inferred outputs: `name = Op[attrs](inputs) -> types`.
// Attrs that start with '_' are TensorFlow's bookkeeping (_class, _output_shapes) and left out.
std::string NodeLine(const Node& n) {
  constexpr size_t kMaxAttrText = 80;
  std::vector<std::string> attrs;
  for (const auto& [name, value] : n.attrs()) {
    if (name.starts_with("_")) continue;
    std::string text;
    if (value.kind() == graph::AttrValue::Kind::kTensor && value.tensor().IsInitialized()) {
      text = value.tensor().DebugString(4);
    } else if (value.kind() == graph::AttrValue::Kind::kType) {
      text = graph::DataTypeName(value.type());
    } else {
      text = value.DebugString();
    }
    attrs.push_back(name + "=" + EscapeForTerminal(TruncateUtf8(text, kMaxAttrText)));
  }
  std::vector<std::string> inputs;
  for (const std::string& input : InputNames(n)) inputs.push_back(EscapeForTerminal(input));
  std::string line = EscapeForTerminal(n.name()) + " = " + EscapeForTerminal(n.type_string());
  if (!attrs.empty()) line += fmt::format("[{}]", fmt::join(attrs, ", "));
  line += fmt::format("({})", fmt::join(inputs, ", "));
  if (!n.requested_device().empty()) line += " @" + EscapeForTerminal(n.requested_device());
  if (n.num_outputs() > 0) line += " -> " + OutputsText(n);
  if (!n.has_kernel()) line += "  (no kernel)";
  return line;
}

// "12 nodes, 7 ops: Const 4, Mul 2, ..." the most frequent first.
std::string Summary(const Graph& g) {
  std::map<std::string, int> counts;
  for (const Node* n : g.op_nodes()) ++counts[n->type_string()];
  std::vector<std::pair<int, std::string>> order;
  for (const auto& [op, count] : counts) order.push_back({-count, op});
  std::sort(order.begin(), order.end());
  std::vector<std::string> parts;
  for (const auto& [count, op] : order) parts.push_back(fmt::format("{} {}", op, -count));
  return fmt::format("{} nodes, {} ops: {}", g.num_op_nodes(), counts.size(),
                     EscapeForTerminal(fmt::format("{}", fmt::join(parts, ", "))));
}

// Whether shape inference found the rank of every output (a node without outputs counts).
bool ShapesInferred(const Node& n) {
  for (const PartialShape& s : n.output_shapes()) {
    if (s.unknown_rank()) return false;
  }
  return static_cast<int>(n.output_shapes().size()) == n.num_outputs();
}

// "name=path" from --feed and --assign.
StatusOr<std::pair<std::string, std::string>> SplitAssignment(const std::string& flag,
                                                              const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return Error(fmt::format("{} {}: expected NAME=FILE.npy", flag, Q(text)));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

// The node (and output) a --fetch/--feed/--target names, or an error naming the flag and file.
StatusOr<std::pair<Node*, int>> FindTensor(const LoadedGraph& g, const std::string& flag,
                                           const std::string& name, bool output_required) {
  return cluster::FindGraphTensor(*g.graph, g.shown, flag, name, output_required);
}

StatusOr<Tensor> ReadTensor(const std::string& path) {
  ASSIGN_OR_RETURN(Literal literal, ReadNpy(path));
  auto tensor = Tensor::FromLiteral(std::move(literal));
  if (!tensor.ok()) return tensor.status().WithContext(DisplayPath(path));
  return tensor;
}

// Whether `name` is a tensor of the graph ("node" or "node:1").
bool InGraph(const LoadedGraph& g, const std::string& name) {
  auto id = graph::ParseTensorName(name);
  return id.ok() && !id->IsControl() && g.graph->FindNode(id->node) != nullptr;
}

// A SavedModel run: --feed NAME and --fetch NAME name the signature's inputs and outputs (every
// output when no --fetch and no --target is given), and every input must be fed. A name that is
// no input or output of the signature but a tensor of the graph (with the signature's call
// inlined: "StatefulPartitionedCall/dense/MatMul") is fed or fetched as it is.
Status SignatureNames(const LoadedGraph& g, const GraphRunArgs& args,
                      std::vector<std::string>* feed_args, std::vector<std::string>* fetch_names,
                      std::vector<std::string>* fetches) {
  const graph::SavedModelSignature& sig = g.saved_model->signature;
  auto keys = [](const std::vector<graph::SavedModelTensor>& list) {
    std::vector<std::string> out;
    for (const auto& t : list) out.push_back(EscapeForTerminal(t.key));
    return out.empty() ? std::string("none") : fmt::format("{}", fmt::join(out, ", "));
  };
  auto find = [](const std::vector<graph::SavedModelTensor>& list,
                 const std::string& key) -> const graph::SavedModelTensor* {
    for (const auto& t : list) {
      if (t.key == key) return &t;
    }
    return nullptr;
  };
  std::set<std::string> fed;
  for (std::string& feed : *feed_args) {
    ASSIGN_OR_RETURN(auto parts, SplitAssignment("--feed", feed));
    const graph::SavedModelTensor* t = find(sig.inputs, parts.first);
    if (t == nullptr && InGraph(g, parts.first)) continue;  // a tensor of the graph itself
    if (t == nullptr) {
      return Error(fmt::format("{}: --feed {}: signature {} has no input {} (inputs: {})", g.shown,
                               Q(feed), Q(sig.key), Q(parts.first), keys(sig.inputs)));
    }
    fed.insert(t->key);
    feed = t->tensor + "=" + parts.second;
  }
  for (const auto& t : sig.inputs) {
    if (!fed.count(t.key)) {
      return Error(fmt::format("{}: signature {} input {} ({}) is not fed: give --feed {}=FILE.npy",
                               g.shown, Q(sig.key), Q(t.key), TypeAndShape(t.dtype, t.shape),
                               EscapeForTerminal(t.key)));
    }
  }
  if (fetch_names->empty() && args.targets.empty()) {
    for (const auto& t : sig.outputs) fetch_names->push_back(t.key);
  }
  fetches->clear();
  for (const std::string& name : *fetch_names) {
    const graph::SavedModelTensor* t = find(sig.outputs, name);
    if (t == nullptr && InGraph(g, name)) {  // an intermediate tensor, by its (inlined) name
      fetches->push_back(name);
      continue;
    }
    if (t == nullptr) {
      return Error(fmt::format("{}: --fetch {}: signature {} has no output {} (outputs: {})",
                               g.shown, Q(name), Q(sig.key), Q(name), keys(sig.outputs)));
    }
    fetches->push_back(t->tensor);
  }
  return OkStatus();
}

// --assign VAR=FILE.npy: the value the variable of node VAR (VarHandleOp, VariableV2, or a TF2
// function graph's captured resource Placeholder) holds before the steps, so a run can start
// from the initial values TensorFlow recorded.
Status AssignVariable(const LoadedGraph& g, graph::Session& session, const std::string& name,
                      const std::string& file, std::vector<std::pair<std::string, Tensor>>* feeds) {
  // The node is checked before the file is read: a wrong name is the mistake to report.
  const Node* n = g.graph->FindNode(name);
  const bool variable =
      n != nullptr && (graph::IsVariableOp(n->type_string()) || graph::IsResourcePlaceholder(*n));
  Tensor value;
  if (variable) {
    ASSIGN_OR_RETURN(value, ReadTensor(file));
  }
  return cluster::AssignVariable(*g.graph, g.shown, "--assign", session, name, std::move(value),
                                 DisplayPath(file), feeds);
}

// One line for a fetched tensor: "loss: float[] 13.3413".
std::string FetchLine(const std::string& name, const Tensor& t) {
  if (!t.IsInitialized()) return EscapeForTerminal(name) + ": (no value)";
  return EscapeForTerminal(name) + ": " + EscapeForTerminal(t.DebugString(16));
}

bool IsNumericScalar(const Tensor& t) {
  return t.IsInitialized() && t.rank() == 0 && graph::DataTypeIsNumeric(t.dtype());
}

// A SavedModel's signature and the variables it reads, after `graph print`'s nodes.
void PrintSignature(const graph::SavedModel& m) {
  auto tensors = [](const std::vector<graph::SavedModelTensor>& list) {
    std::vector<std::string> out;
    for (const auto& t : list) {
      out.push_back(fmt::format("{}: {} ({})", EscapeForTerminal(t.key), TypeAndShape(t.dtype, t.shape),
                                EscapeForTerminal(t.tensor)));
    }
    return fmt::format("{}", fmt::join(out, ", "));
  };
  std::printf("signature %s: inputs %s; outputs %s\n", Q(m.signature.key).c_str(),
              tensors(m.signature.inputs).c_str(), tensors(m.signature.outputs).c_str());
  std::printf("%zu variable%s from variables/variables\n", m.variables.size(),
              m.variables.size() == 1 ? "" : "s");
}

}  // namespace

StatusOr<graph::GraphDef> ReadGraphInput(const std::string& path, const std::string& signature,
                                         std::shared_ptr<graph::SavedModel>* saved_model) {
  if (GetPathKind(path) == PathKind::kDirectory) {
    graph::SavedModelOptions options;
    options.signature = signature;
    ASSIGN_OR_RETURN(graph::SavedModel model, graph::ReadSavedModel(path, options));
    auto shared = std::make_shared<graph::SavedModel>(std::move(model));
    if (saved_model != nullptr) *saved_model = shared;
    return shared->graph;
  }
  if (!signature.empty()) {
    return Error(fmt::format("{}: --signature {}: a signature is chosen from a SavedModel "
                             "directory, not a GraphDef file",
                             DisplayPath(path), Q(signature)));
  }
  auto def = graph::ReadGraphDef(path);
  if (def.ok()) return def;
  // A FunctionDef on its own (TensorFlow's encapsulate_fdef_<cluster>.pbtxt): its body's graph.
  auto function = graph::ReadFunctionDef(path);
  if (!function.ok()) return def.status();
  auto body = graph::FunctionDefAsGraphDef(*function);
  if (!body.ok()) return body.status().WithContext(DisplayPath(path));
  return body;
}

int RunGraphPrint(const GraphFileArgs& args) {
  auto g = LoadGraph(args.file, /*allow_unknown_ops=*/true, /*infer_shapes=*/true, args.signature);
  if (!g.ok()) return GraphFail(g.status());
  for (const Node* n : g->graph->op_nodes()) std::printf("%s\n", NodeLine(*n).c_str());
  std::printf("%s\n", Summary(*g->graph).c_str());
  if (g->saved_model != nullptr) PrintSignature(*g->saved_model);
  return 0;
}

int RunGraphVerify(const GraphFileArgs& args) {
  auto g = LoadGraph(args.file, /*allow_unknown_ops=*/false, /*infer_shapes=*/true, args.signature);
  if (!g.ok()) return GraphFail(g.status());
  // A cycle the constructor let through (it wires edges, it does not order them) is an error here.
  if (auto order = g->graph->TopologicalOrder(); !order.ok()) {
    return GraphFail(InFile(order.status(), g->shown));
  }
  int inferred = 0;
  const std::vector<Node*> nodes = g->graph->op_nodes();
  for (const Node* n : nodes) inferred += ShapesInferred(*n) ? 1 : 0;
  std::printf("OK: %zu nodes, shapes inferred for %d of %zu\n", nodes.size(), inferred,
              nodes.size());
  return 0;
}

int RunGraphDot(const GraphDotArgs& args) {
  auto g = LoadGraph(args.file, /*allow_unknown_ops=*/true, /*infer_shapes=*/true, args.signature);
  if (!g.ok()) return GraphFail(g.status());
  graph::GraphDotOptions options;
  options.center = args.node;
  options.radius = args.radius;
  options.max_nodes = args.max_nodes;
  options.title = g->shown;
  auto dot = graph::GraphToDot(*g->graph, options);
  if (!dot.ok()) return GraphFail(InFile(dot.status(), g->shown));
  if (args.output.empty()) {
    std::fputs(dot->c_str(), stdout);
    return 0;
  }
  if (Status s = WriteFileAtomic(args.output, *dot); !s.ok()) return GraphFail(s);
  return 0;
}

// What the JIT did, on stderr: per graph the session prepared, its clusters, and how many
// executables were compiled.
void PrintJitSummary(const cluster::XlaJit& jit) {
  cluster::XlaJitRecord record = jit.record();
  for (const auto& g : record.graphs) {
    std::vector<std::string> clusters;
    for (const auto& [name, nodes] : g.result.clusters) {
      size_t kept = 0;
      for (const std::string& n : nodes) kept += g.result.declustered.count(n) == 0;
      clusters.push_back(fmt::format("{} ({} nodes)", name, kept));
    }
    std::fprintf(stderr, "xlens graph run: graph %lld: %s; %zu nodes left to TensorFlow's executor\n",
                 static_cast<long long>(g.graph_index),
                 clusters.empty() ? "no clusters" : fmt::format("{}", fmt::join(clusters, ", ")).c_str(),
                 g.result.unclustered.size() + g.result.declustered.size());
  }
  if (auto compiler = jit.compiler()) {
    std::fprintf(stderr, "xlens graph run: %lld compilation%s, %lld launch%s run op by op (lazy compilation)\n",
                 static_cast<long long>(compiler->compilations()),
                 compiler->compilations() == 1 ? "" : "s",
                 static_cast<long long>(compiler->lazy_fallbacks()),
                 compiler->lazy_fallbacks() == 1 ? "" : "es");
  }
}

int RunGraphRun(const GraphRunArgs& args) {
  if (args.steps < 1) return GraphFail(Error("--steps: expected at least 1"));
  const bool saved_model = GetPathKind(args.file) == PathKind::kDirectory;
  if (args.fetches.empty() && args.targets.empty() && args.init.empty() && !saved_model) {
    return GraphFail(Error(fmt::format("{}: nothing to run: give --fetch NAME or --target NAME",
                                  DisplayPath(args.file))));
  }
  auto loaded = LoadGraph(args.file, /*allow_unknown_ops=*/false, /*infer_shapes=*/true,
                          args.signature);
  if (!loaded.ok()) return GraphFail(loaded.status());
  const LoadedGraph& g = *loaded;
  // A SavedModel's --feed and --fetch name its signature's inputs and outputs.
  std::vector<std::string> fetch_names = args.fetches;  // as the user named them
  std::vector<std::string> fetches = args.fetches;      // the graph's tensors
  std::vector<std::string> feed_args = args.feeds;
  if (g.saved_model != nullptr) {
    auto signature_names = SignatureNames(g, args, &feed_args, &fetch_names, &fetches);
    if (!signature_names.ok()) return GraphFail(signature_names);
  }

  // Everything the command line names is checked before anything runs.
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (const std::string& feed : feed_args) {
    auto parts = SplitAssignment("--feed", feed);
    if (!parts.ok()) return GraphFail(parts.status());
    auto target = FindTensor(g, "--feed", parts->first, /*output_required=*/true);
    if (!target.ok()) return GraphFail(target.status());
    auto tensor = ReadTensor(parts->second);
    if (!tensor.ok()) return GraphFail(tensor.status());
    if (Status s = cluster::CheckFeed(g.shown, *target->first, target->second, *tensor,
                                      DisplayPath(parts->second));
        !s.ok()) {
      return GraphFail(s);
    }
    feeds.emplace_back(parts->first, std::move(*tensor));
  }
  for (const std::string& fetch : fetches) {
    if (auto t = FindTensor(g, "--fetch", fetch, /*output_required=*/true); !t.ok()) {
      return GraphFail(t.status());
    }
  }
  for (const auto& [flag, names] : {std::pair{"--target", &args.targets}, {"--init", &args.init}}) {
    for (const std::string& name : *names) {
      if (g.graph->FindNode(name) == nullptr) {
        return GraphFail(Error(fmt::format("{}: {} {}: the graph has no node named {}", g.shown, flag,
                                      Q(name), Q(name))));
      }
    }
  }

  for (const std::string& extra : args.extra_flags) {
    if (!IsDebugFlag(extra)) {
      return GraphFail(Error(fmt::format("graph run: unknown argument {} (see xlens graph run --help)",
                                         Q(extra))));
    }
  }
  graph::SessionOptions session_options;
  std::unique_ptr<cluster::XlaJit> jit;
  std::optional<graph::GraphDef> must_compile_def;
  if (args.jit != "off") {
    cluster::GraphJitOptions jit_options;
    jit_options.mode = args.jit;
    auto flags = DebugOptionsFromEnvironment(args.extra_flags);
    if (!flags.ok()) return GraphFail(flags.status());
    jit_options.flags = std::move(*flags);
    auto level = graph::ParseGlobalJitLevel(args.jit_level);
    if (!level.ok()) return GraphFail(level.status().WithContext("--jit-level"));
    jit_options.level = *level;
    jit_options.function_name = args.function_name;
    if (jit_options.function_name.empty()) {
      jit_options.function_name = std::filesystem::path(args.file).stem().string();
    }
    auto installed = cluster::InstallGraphJit(jit_options, g.def, &session_options, &must_compile_def);
    if (!installed.ok()) return GraphFail(installed.status());
    jit = std::move(*installed);
  }
  ActivityScope activity("running GraphDef " + args.file);
  auto session = graph::Session::Create(must_compile_def ? *must_compile_def : g.def, session_options);
  if (!session.ok()) return GraphFail(InFile(session.status(), g.shown));
  Watchdog watchdog(args.timeout_seconds, "graph run");
  const bool tracing = !args.trace.empty();
  if (tracing) {
    profiler::SetCurrentThreadName("main");
    if (!profiler::TracerSession::Start()) return GraphFail(Error("--trace: another trace is being recorded"));
    KeepTraceWhenStopped(watchdog, args.trace);
  }
  std::vector<Tensor> results;
  std::vector<double> step_ms;
  Status status = [&]() -> Status {
    if (g.saved_model != nullptr) {
      watchdog.SetActivity("reading the SavedModel's variables");
      RETURN_IF_ERROR(graph::LoadSavedModelVariables(*g.saved_model, (*session)->resources()));
      if (!g.saved_model->init_op.empty()) {
        // Like --init below: the init op runs op by op, not compiled as the model's function.
        const bool pause = jit != nullptr && args.jit == "compile";
        if (pause) jit->set_paused(true);
        auto ran = (*session)->Run({}, {}, {g.saved_model->init_op});
        if (pause) jit->set_paused(false);
        if (!ran.ok()) return InFile(ran.status(), g.shown).WithContext("the SavedModel's init op");
      }
    }
    if (!args.init.empty()) {
      watchdog.SetActivity("running the --init targets");
      // With --jit=compile the initializers run op by op, outside the function, as TensorFlow
      // runs them before the first call of a jit_compile function.
      const bool pause = jit != nullptr && args.jit == "compile";
      if (pause) jit->set_paused(true);
      auto ran = (*session)->Run({}, {}, args.init);
      if (pause) jit->set_paused(false);
      if (!ran.ok()) return InFile(ran.status(), g.shown).WithContext("--init");
    }
    for (const std::string& assign : args.assigns) {
      ASSIGN_OR_RETURN(auto parts, SplitAssignment("--assign", assign));
      RETURN_IF_ERROR(AssignVariable(g, **session, parts.first, parts.second, &feeds));
    }
    if (fetches.empty() && args.targets.empty()) return OkStatus();
    RETURN_IF_ERROR(cluster::CheckCapturesAssigned(*g.graph, g.shown, fetches, args.targets, feeds,
                                                   "give --assign NAME=FILE.npy for each"));
    for (int step = 1; step <= args.steps; ++step) {
      watchdog.SetActivity(fmt::format("running step {} of {}", step, args.steps));
      const auto start = std::chrono::steady_clock::now();
      auto ran = (*session)->Run(feeds, fetches, args.targets);
      step_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      if (!ran.ok()) {
        Status s = InFile(ran.status(), g.shown);
        return args.steps > 1 ? Error(fmt::format("{} (step {})", s.message(), step)) : s;
      }
      results = std::move(*ran);
      if (args.steps > 1) {
        // A scalar fetch (the loss) is shown per step: the training curve.
        std::vector<std::string> scalars;
        for (size_t i = 0; i < results.size(); ++i) {
          if (IsNumericScalar(results[i])) {
            scalars.push_back(fmt::format("{} = {:.6g}", EscapeForTerminal(fetch_names[i]),
                                          results[i].GetAsDouble(0)));
          }
        }
        if (!scalars.empty()) std::printf("step %d: %s\n", step, fmt::format("{}", fmt::join(scalars, ", ")).c_str());
      }
    }
    return OkStatus();
  }();
  Status trace_written;
  if (tracing) {
    // Written even when a step failed: the timeline up to the failure is what the user needs.
    profiler::Trace trace = profiler::TracerSession::Stop();
    MarkStopped(trace, watchdog);
    trace_written = profiler::WriteChromeTrace(trace, args.trace);
    if (trace_written.ok()) {
      std::fprintf(stderr, "xlens graph run: wrote %zu trace events to %s\n", trace.events.size(),
                   DisplayPath(args.trace).c_str());
    }
  }
  if (!status.ok()) {
    if (watchdog.fired()) return GraphFail(Error(watchdog.StopMessage() + ": " + status.message()));
    return GraphFail(status);
  }
  if (jit != nullptr) PrintJitSummary(*jit);

  if (!args.outputs.empty()) {
    std::vector<Literal> literals;
    for (size_t i = 0; i < results.size(); ++i) {
      auto literal = results[i].ToLiteral();
      if (!literal.ok()) {
        return GraphFail(literal.status().WithContext(fmt::format("--fetch {}", Q(fetch_names[i]))));
      }
      literals.push_back(std::move(*literal));
    }
    std::vector<const Literal*> leaves;
    for (const Literal& l : literals) leaves.push_back(&l);
    if (Status s = WriteOutputs(args.outputs, leaves); !s.ok()) return GraphFail(s);
  } else {
    for (size_t i = 0; i < results.size(); ++i) {
      std::printf("%s\n", FetchLine(fetch_names[i], results[i]).c_str());
    }
  }
  if (step_ms.size() > 1) {
    std::vector<double> sorted = step_ms;
    std::sort(sorted.begin(), sorted.end());
    std::printf("%zu step%s, median %.3f ms per step (first %.3f ms)\n", step_ms.size(),
                step_ms.size() == 1 ? "" : "s", sorted[sorted.size() / 2], step_ms.front());
  }
  return trace_written.ok() ? 0 : GraphFail(trace_written);
}

}  // namespace xlens::cli
