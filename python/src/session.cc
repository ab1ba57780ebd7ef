// xlens.Session and xlens.tf.function's engine: a graph::Session over a GraphDef with TensorFlow's
// JIT installed as `xlens graph run --jit=auto|compile` installs it (compiler/cluster/graph_run.h
// is the code both share), feeds checked and messages worded as the command line words them.
// session.py gives it TensorFlow 1's API.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "compiler/cluster/graph_run.h"
#include "compiler/cluster/must_compile_body.h"
#include "compiler/cluster/xla_device_compiler.h"
#include "compiler/cluster/xla_jit.h"
#include "compiler/graph/attr_value.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/session.h"
#include "compiler/support/terminal_text.h"
#include "dump/flags.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/host_tracer.h"
#include "python/src/bindings.h"
#include "python/src/session_tensor.h"

namespace nb = nanobind;

namespace xlens::python {
namespace {

using graph::Tensor;
using Feeds = std::vector<std::pair<std::string, Tensor>>;

// As `xlens graph run` fails: the whole message escaped, one line.
constexpr Lines kGraph = Lines::kEscaped;

graph::GraphDef ParseDef(nb::bytes bytes, const std::string& shown) {
  return ValueOrThrow(graph::ParseGraphDef(std::string_view(bytes.c_str(), bytes.size()),
                                           graph::GraphDefFormat::kBinary, shown),
                      kGraph);
}

class GraphSession {
 public:
  // `jit`: off, auto or compile (as `xlens graph run --jit`); `flags`: --xla_* and --tf_xla_*
  // flags after XLA_FLAGS and TF_XLA_FLAGS (dump_to= is --xla_dump_to).
  // `graph_def`: the serialized GraphDef (`shown` names it in messages) or the path of a .pb or
  // .pbtxt file (`shown` None: messages name the file, as the command line's do).
  GraphSession(nb::object graph_def, nb::object shown, std::string jit, int jit_level,
               bool cpu_global_jit, std::string function_name, std::vector<std::string> flags) {
    if (nb::isinstance<nb::str>(graph_def)) {
      const std::string path = nb::cast<std::string>(graph_def);
      shown_ = DisplayPath(path);
      auto def = graph::ReadGraphDef(path);
      ThrowIfError(cluster::InGraphFile(def.status(), shown_), kGraph);
      def_ = std::move(*def);
    } else if (nb::isinstance<nb::bytes>(graph_def) && nb::isinstance<nb::str>(shown)) {
      shown_ = nb::cast<std::string>(shown);
      def_ = ParseDef(nb::borrow<nb::bytes>(graph_def), shown_);
    } else {
      throw Error("graph_def: expected a file's path, or bytes with the name messages show");
    }
    check_graph_ = ValueOrThrow(cluster::BuildGraphToRun(def_, shown_), kGraph);
    if (jit != "off" && jit != "auto" && jit != "compile") {
      throw Error(fmt::format("jit {}: expected off, auto or compile", cluster::QuoteName(jit)));
    }
    if (jit_level != 0 && jit_level != -1 && jit_level != 1 && jit_level != 2) {
      throw Error(fmt::format("global_jit_level {}: expected DEFAULT (0), OFF (-1), ON_1 (1) or "
                              "ON_2 (2)",
                              jit_level));
    }
    cluster::GraphJitOptions options;
    options.mode = jit;
    options.level = static_cast<graph::GlobalJitLevel>(jit_level);
    options.cpu_global_jit = cpu_global_jit;
    options.function_name = std::move(function_name);
    if (jit != "off") {
      for (const std::string& flag : flags) {
        if (!IsDebugFlag(flag)) {
          throw Error(fmt::format("{}: not an XLA flag (--xla_* or --tf_xla_*)",
                                  cluster::QuoteName(flag)));
        }
      }
      options.flags = ValueOrThrow(DebugOptionsFromEnvironment(flags), kGraph);
    }
    graph::SessionOptions session_options;
    std::optional<graph::GraphDef> def_to_run;
    jit_ = ValueOrThrow(cluster::InstallGraphJit(options, def_, &session_options, &def_to_run),
                        kGraph);
    compile_ = jit == "compile";
    auto session = graph::Session::Create(def_to_run ? *def_to_run : def_, session_options);
    ThrowIfError(cluster::InGraphFile(session.status(), shown_), kGraph);
    session_ = std::move(*session);
  }

  ~GraphSession() {
    if (tracing_) profiler::TracerSession::Stop();
  }

  // Nodes (and functions) added to the graph since: TensorFlow's Session.Extend.
  void Extend(nb::bytes more_def) {
    graph::GraphDef more = ParseDef(more_def, shown_);
    graph::GraphDef all = def_;
    for (const graph::NodeDef& n : more.node) all.node.push_back(n);
    for (const graph::FunctionDef& f : more.library.function) all.library.function.push_back(f);
    std::unique_ptr<graph::Graph> check =
        ValueOrThrow(cluster::BuildGraphToRun(all, shown_), kGraph);
    if (compile_) cluster::KeepFunctionalControlFlow(&more);
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    ThrowIfError(cluster::InGraphFile(Live().Extend(more), shown_), kGraph);
    def_ = std::move(all);
    check_graph_ = std::move(check);
  }

  // The DataType of the tensor `name` names (None when the graph has no such tensor: the run
  // reports it), so a fed value can be converted as TensorFlow converts it.
  nb::object OutputDtype(const std::string& name) {
    auto id = graph::ParseTensorName(name);
    if (!id.ok() || id->IsControl()) return nb::none();
    const graph::Node* n = check_graph_->FindNode(id->node);
    if (n == nullptr || id->index >= n->num_outputs()) return nb::none();
    return nb::int_(static_cast<int>(graph::RemoveRefType(n->output_type(id->index))));
  }

  // feeds: [(name, dtype, shape, data)], checked in order before anything runs, then fetches and
  // targets, as `xlens graph run` checks --feed, --fetch and --target.
  // `full_trace`: the run asked for TensorFlow's FULL_TRACE; its span in the trace says so.
  nb::list Run(nb::list feed_list, std::vector<std::string> fetches,
               std::vector<std::string> targets, bool full_trace) {
    Feeds feeds;
    for (nb::handle item : feed_list) {
      if (!nb::isinstance<nb::tuple>(item) || nb::len(item) != 4) {
        throw Error("feeds: expected (name, dtype, shape, data) tuples");
      }
      nb::tuple t = nb::borrow<nb::tuple>(item);
      if (!nb::isinstance<nb::str>(t[0])) throw Error("feeds: a name is not a str");
      std::string name = nb::cast<std::string>(t[0]);
      auto target = cluster::FindGraphTensor(*check_graph_, shown_, "feed_dict", name,
                                             /*output_required=*/true);
      ThrowIfError(target.status(), kGraph);
      Tensor tensor = TensorFromPython(
          fmt::format("{}: feed_dict {}", shown_, cluster::QuoteName(name)), t[1], t[2], t[3]);
      ThrowIfError(cluster::CheckFeed(shown_, *target->first, target->second, tensor,
                                      "the fed value"),
                   kGraph);
      feeds.emplace_back(std::move(name), std::move(tensor));
    }
    for (const std::string& fetch : fetches) {
      auto found = cluster::FindGraphTensor(*check_graph_, shown_, "fetch", fetch,
                                            /*output_required=*/true);
      ThrowIfError(found.status(), kGraph);
    }
    for (const std::string& target : targets) {
      if (check_graph_->FindNode(target) == nullptr) {
        throw Error(EscapeForTerminal(fmt::format("{}: target {}: the graph has no node named {}",
                                                  shown_, cluster::QuoteName(target),
                                                  cluster::QuoteName(target))));
      }
    }
    std::vector<Tensor> results;
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [name, handle] : capture_feeds_) feeds.emplace_back(name, handle);
      ThrowIfError(cluster::CheckCapturesAssigned(*check_graph_, shown_, fetches, targets, feeds,
                                                  "give each a value first"),
                   kGraph);
      // One span per run, so a timeline tells the steps apart (the sample counts the kernels
      // of the last one).
      profiler::TraceSpan span("Session.run", "session");
      if (full_trace) span.AddArg("full_trace", true);
      auto ran = Live().Run(feeds, fetches, targets);
      ThrowIfError(cluster::InGraphFile(ran.status(), shown_), kGraph);
      results = std::move(*ran);
    }
    nb::list out;
    for (size_t i = 0; i < results.size(); ++i) {
      out.append(TensorToPython(
          fmt::format("{}: fetch {}", shown_, cluster::QuoteName(fetches[i])),
          std::move(results[i])));
    }
    return out;
  }

  // The value of the variable of node `name` (VarHandleOp, VariableV2, or a function graph's
  // captured resource Placeholder) before the next run: `xlens graph run --assign`.
  void Assign(const std::string& name, nb::handle dtype, nb::handle shape, nb::handle data) {
    const std::string what = fmt::format("{}: assign {}", shown_, cluster::QuoteName(name));
    Tensor value = TensorFromPython(what, dtype, shape, data);
    Tensor kept = value;  // shares the elements: Read tells an unchanged variable by them
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu_);
    Feeds feeds;
    ThrowIfError(cluster::AssignVariable(*check_graph_, shown_, "assign", Live(), name,
                                         std::move(value), "the value", &feeds),
                 kGraph);
    for (auto& feed : feeds) capture_feeds_[feed.first] = std::move(feed.second);
    assigned_[name] = std::move(kept);
  }

  // The variable's value now, or None when it still holds the very tensor Assign gave it (the
  // run did not write it). Variables are found as Assign finds them.
  nb::object Read(const std::string& name) {
    Tensor value;
    bool unchanged = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::shared_ptr<graph::Var> var = FindVariable(name);
      if (var == nullptr) return nb::none();
      std::lock_guard<std::mutex> var_lock(var->mu);
      value = var->value;
      auto it = assigned_.find(name);
      unchanged = it != assigned_.end() && value.IsInitialized() &&
                  value.dtype() == it->second.dtype() && value.dims() == it->second.dims() &&
                  value.SharesBufferWith(it->second);
    }
    if (unchanged) return nb::none();
    return TensorToPython(fmt::format("{}: variable {}", shown_, cluster::QuoteName(name)),
                          std::move(value));
  }

  void StartTrace() {
    if (tracing_) return;
    profiler::SetCurrentThreadName("main");
    if (!profiler::TracerSession::Start()) throw Error("trace: another trace is being recorded");
    tracing_ = true;
  }

  // Stops the trace this session records and writes it (Chrome's format); the events' count.
  size_t StopTrace(const std::string& path) {
    if (!tracing_) return 0;
    tracing_ = false;
    profiler::Trace trace = profiler::TracerSession::Stop();
    ThrowIfError(profiler::WriteChromeTrace(trace, path), kGraph);
    return trace.events.size();
  }

  // What the JIT did: per graph prepared, its clusters (name -> nodes) and the nodes left out
  // with why; the compilations and lazy fallbacks so far.
  nb::dict JitRecord() {
    nb::dict out;
    nb::list graphs;
    int64_t compilations = 0, fallbacks = 0;
    if (jit_ != nullptr) {
      for (const auto& g : jit_->record().graphs) {
        nb::dict clusters, unclustered;
        for (const auto& [name, nodes] : g.result.clusters) {
          nb::list kept;
          for (const std::string& n : nodes) {
            if (g.result.declustered.count(n) == 0) kept.append(n);
          }
          clusters[nb::str(name.c_str())] = kept;
        }
        for (const auto* reasons : {&g.result.unclustered, &g.result.declustered}) {
          for (const auto& [node, why] : *reasons) unclustered[nb::str(node.c_str())] = why;
        }
        nb::dict entry;
        entry["graph"] = g.graph_index;
        entry["clusters"] = clusters;
        entry["unclustered"] = unclustered;
        graphs.append(entry);
      }
      if (auto compiler = jit_->compiler()) {
        compilations = compiler->compilations();
        fallbacks = compiler->lazy_fallbacks();
      }
    }
    out["graphs"] = graphs;
    out["compilations"] = compilations;
    out["lazy_fallbacks"] = fallbacks;
    return out;
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    session_.reset();
  }

 private:
  graph::Session& Live() {
    if (session_ == nullptr) throw Error("Attempted to use a closed Session.");
    return *session_;
  }

  std::shared_ptr<graph::Var> FindVariable(const std::string& name) {
    if (session_ == nullptr) return nullptr;
    const graph::Node* n = check_graph_->FindNode(name);
    if (n == nullptr) return nullptr;
    if (n->type_string() == "Placeholder") return session_->resources().Lookup("", name);
    std::string container, shared_name;
    if (const graph::AttrValue* c = graph::FindAttr(n->attrs(), "container")) container = c->s();
    if (const graph::AttrValue* s = graph::FindAttr(n->attrs(), "shared_name")) {
      shared_name = s->s();
    }
    if (shared_name.empty()) shared_name = name;
    return session_->resources().Lookup(container, shared_name);
  }

  std::string shown_;
  graph::GraphDef def_;
  // The graph as the checks see it (shapes inferred), as `xlens graph run` loads it.
  std::unique_ptr<graph::Graph> check_graph_;
  std::unique_ptr<cluster::XlaJit> jit_;  // outlives the session (declared before it)
  bool compile_ = false;
  std::mutex mu_;
  std::unique_ptr<graph::Session> session_;
  // Captured variables' handles, fed every run as a function's caller passes them.
  std::map<std::string, Tensor> capture_feeds_;
  std::map<std::string, Tensor> assigned_;
  bool tracing_ = false;
};

}  // namespace

void RegisterSession(nb::module_& m) {
  nb::class_<GraphSession>(m, "_GraphSession")
      .def(nb::init<nb::object, nb::object, std::string, int, bool, std::string,
                    std::vector<std::string>>(),
           nb::arg("graph_def"), nb::arg("shown").none(), nb::arg("jit"), nb::arg("jit_level"),
           nb::arg("cpu_global_jit"), nb::arg("function_name"), nb::arg("flags"))
      .def("extend", &GraphSession::Extend)
      .def("output_dtype", &GraphSession::OutputDtype)
      .def("run", &GraphSession::Run, nb::arg("feeds"), nb::arg("fetches"), nb::arg("targets"),
           nb::arg("full_trace") = false)
      .def("assign", &GraphSession::Assign)
      .def("read", &GraphSession::Read)
      .def("start_trace", &GraphSession::StartTrace)
      .def("stop_trace", &GraphSession::StopTrace)
      .def("jit_record", &GraphSession::JitRecord)
      .def("close", &GraphSession::Close);
}

}  // namespace xlens::python
